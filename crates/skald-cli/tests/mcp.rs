//! skald's MCP server driven by a real MCP client: the official Python SDK (`mcp`, pinned with
//! every dependency in `hosts/mcp-client/requirements.txt`, installed into a virtualenv under
//! the target directory) runs `hosts/mcp-client/client.py` against `skald mcp` over stdio and
//! against `skald serve`'s `/mcp` over streamable HTTP: every tool listed and called, bad
//! arguments answered with a JSON-RPC error that says what was wrong, a foreign tenant's ref not
//! found, an unknown key refused. No python3 is a failure, never a skip.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod hosts;

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use hosts::openclaw::SkaldServer;
use hosts::{repo_root, run};
use serde_json::{Value, json};

/// The virtualenv's python, with the pinned SDK installed once per requirements file.
fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    PYTHON
        .get_or_init(|| {
            let requirements = repo_root().join("hosts/mcp-client/requirements.txt");
            let mut hasher = DefaultHasher::new();
            fs::read(&requirements).unwrap().hash(&mut hasher);
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join("mcp-client")
                .join(format!("{:016x}", hasher.finish()));
            let python = dir.join("bin/python");
            if !dir.join(".installed").exists() {
                let _ = fs::remove_dir_all(&dir);
                fs::create_dir_all(dir.parent().unwrap()).unwrap();
                let mut venv = Command::new("python3");
                venv.args(["-m", "venv"]).arg(&dir);
                let made = run(
                    venv,
                    dir.parent().unwrap(),
                    "venv",
                    Duration::from_secs(300),
                );
                assert!(
                    made.success(),
                    "python3 -m venv failed (the MCP client test needs python3 with venv):\n{}",
                    made.tail(3000)
                );
                let mut pip = Command::new(dir.join("bin/pip"));
                pip.args(["install", "--quiet", "--no-input", "-r"])
                    .arg(&requirements);
                let installed = run(pip, &dir, "pip", Duration::from_secs(900));
                assert!(
                    installed.success(),
                    "pip install of the MCP SDK failed:\n{}",
                    installed.tail(3000)
                );
                fs::write(dir.join(".installed"), "").unwrap();
            }
            python
        })
        .clone()
}

fn client(args: &[&str], envs: &[(&str, &str)], home: &Path) -> Value {
    let mut command = Command::new(python());
    command
        .arg(repo_root().join("hosts/mcp-client/client.py"))
        .args(args)
        .env("SKALD_HOME", home);
    for (name, value) in envs {
        command.env(name, value);
    }
    let finished = run(command, home, "mcp-client", Duration::from_secs(120));
    assert!(
        finished.success(),
        "the MCP client failed:\n{}",
        finished.tail(4000)
    );
    serde_json::from_str(finished.stdout.trim().lines().last().unwrap()).unwrap()
}

/// What both transports must show.
fn assert_exercised(report: &Value) {
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "fetch_original_data",
            "search_memories",
            "memory_ls",
            "memory_read",
            "commit_memory",
            "memory_forget",
            "search_docs"
        ],
        "{report}"
    );
    assert_eq!(report["schemas_are_objects"], true);
    for call in ["commit", "search", "ls", "read", "forget", "search_docs"] {
        assert_eq!(report[call]["is_error"], false, "{call}: {}", report[call]);
    }
    assert!(
        report["search"]["text"]
            .as_str()
            .unwrap()
            .contains("blue-green"),
        "{report}"
    );
    assert!(
        report["read"]["text"]
            .as_str()
            .unwrap()
            .contains("blue-green releases")
    );
    // The document added before the client ran, found by its content.
    assert!(
        report["search_docs"]["text"]
            .as_str()
            .unwrap()
            .contains("viking://resources/runbook"),
        "{report}"
    );
    for (tool, says) in [
        ("search_memories", "qeury"),
        ("search_docs", "viking://resources"),
        ("fetch_original_data", "ref_ids"),
        ("memory_read", "uri"),
        ("no_such_tool", "no_such_tool"),
    ] {
        let error = &report["bad_arguments"][tool];
        assert_eq!(
            error["raised"], true,
            "{tool}: a JSON-RPC error expected: {error}"
        );
        assert_eq!(error["code"], -32602, "{tool}: invalid params: {error}");
        assert!(
            error["message"].as_str().unwrap().contains(says),
            "{tool}: {error}"
        );
    }
}

/// A runbook added as a document (`skald add`), for `search_docs` to find; `remote` adds it
/// through a running server (its URL and key).
fn add_runbook(home: &Path, remote: Option<(&str, &str)>) {
    let docs = tempfile::tempdir().unwrap();
    let runbook = docs.path().join("runbook");
    std::fs::create_dir(&runbook).unwrap();
    std::fs::write(
        runbook.join("keys.md"),
        "# Rotating signing keys\n\nRotate the signing keys every 90 days with `vault rotate \
         signing`, then restart the token service.\n",
    )
    .unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_skald"));
    command
        .args(["add", runbook.to_str().unwrap()])
        .env("SKALD_HOME", home);
    if let Some((url, key)) = remote {
        command.args(["--url", url, "--key", key]);
    }
    let added = command.output().unwrap();
    assert!(
        added.status.success(),
        "skald add: {}",
        String::from_utf8_lossy(&added.stderr)
    );
}

#[test]
fn mcp_client_calls_every_tool_over_stdio() {
    let home = tempfile::tempdir().unwrap();
    add_runbook(home.path(), None);
    let report = client(&["stdio", env!("CARGO_BIN_EXE_skald")], &[], home.path());
    assert_exercised(&report);
}

#[test]
fn mcp_client_calls_every_tool_over_http_in_its_keys_tenant() {
    let skald = SkaldServer::start();
    let created = Command::new(env!("CARGO_BIN_EXE_skald"))
        .args(["keys", "create", "--tenant", "someone-else"])
        .env("SKALD_HOME", skald.home.path())
        .output()
        .unwrap();
    let foreign: Value = serde_json::from_slice(&created.stdout).unwrap();
    let foreign = foreign["secret"].as_str().unwrap().to_owned();
    add_runbook(skald.home.path(), Some((&skald.url(), &skald.key)));
    // A ref in the first key's tenant: a large tool result offloaded by an assemble.
    let big: String = (0..2000)
        .map(|n| format!("line {n}: compiling module {n}\n"))
        .collect();
    let messages = json!([
        {"role": "user", "content": "build it", "timestamp": 1},
        {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "make"}}],
         "timestamp": 2, "stopReason": "toolUse"},
        {"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": [{"type": "text", "text": big}], "isError": false, "timestamp": 3},
    ]);
    let (status, _) = skald.post("/v1/sessions/s1/messages", &json!({"messages": messages}));
    assert_eq!(status, 200);
    let (_, view) = skald.post("/v1/sessions/s1/assemble", &json!({}));
    let reference =
        hosts::chat_upstream::first_ref_id(&view.to_string()).expect("an offloaded result");
    let url = format!("{}/mcp", skald.url());
    let report = client(
        &["http", &url, &skald.key],
        &[
            ("SKALD_TEST_REF", &reference),
            ("SKALD_TEST_FOREIGN_KEY", &foreign),
        ],
        skald.home.path(),
    );
    assert_exercised(&report);
    assert_eq!(report["fetch"]["is_error"], false, "{report}");
    assert!(
        report["fetch"]["text"]
            .as_str()
            .unwrap()
            .contains("line 2: compiling module 2")
    );
    assert_eq!(
        report["foreign_fetch"]["is_error"], true,
        "another tenant's ref: {report}"
    );
    assert!(
        report["foreign_fetch"]["text"]
            .as_str()
            .unwrap()
            .contains("not found")
    );
    assert_eq!(report["bad_key"]["refused"], true, "{report}");
    // Refused before the MCP transport: `initialize` itself is answered 401 (the SDK reports
    // it as "Server returned an error response"), so no session opens for a bad key.
    assert_eq!(report["bad_key"]["at"], "initialize", "{report}");
}
