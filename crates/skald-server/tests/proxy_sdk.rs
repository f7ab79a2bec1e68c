//! The proxy driven by the official `openai` and `anthropic` Python SDKs (pinned versions from
//! PyPI): non-streaming, streaming, tool interception (both) and overflow recovery, each checked
//! by what the SDK hands the program (tests/clients/*.py) and by what the scripted upstream got.
//!
//! The SDKs live in a virtualenv under the target directory, created and filled with `pip` on
//! the first run and reused afterwards. Python 3 with `venv` is required: without it these tests
//! fail and say so.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod upstream;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use common::{TestServer, default_config};
use serde_json::json;
use skald_core::pipeline::policy::Policy;
use skald_server::{ServerConfig, Upstream as UpstreamConfig};
use upstream::{
    Reply, Upstream, anthropic_overflow, anthropic_sse_text, anthropic_sse_text_with_id,
    anthropic_sse_tool_uses, anthropic_text, anthropic_tool_uses, assert_no_skald_key, fetch_reply,
    openai_overflow, openai_sse_text, openai_sse_text_with_id, openai_sse_tool_calls, openai_text,
    openai_tool_calls,
};

/// The SDK versions the tests run against.
const PINS: &[&str] = &["openai==3.54.0", "anthropic==2.12.0"];

/// The virtualenv's python, created on first use.
fn python() -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pysdk");
    let python = venv.join("bin").join("python");
    let marker = venv.join("skald-pins.txt");
    let wanted = PINS.join("\n");
    if python.exists() && std::fs::read_to_string(&marker).ok().as_deref() == Some(&wanted) {
        return python;
    }
    let created = Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(&venv)
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "the SDK tests need Python 3 with venv (`python3` not runnable: {error}); \
                 install it, e.g. `apt-get install python3 python3-venv`"
            )
        });
    assert!(
        created.status.success(),
        "creating the virtualenv at {} failed (is python3-venv installed?):\n{}",
        venv.display(),
        String::from_utf8_lossy(&created.stderr)
    );
    let installed = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(PINS)
        .output()
        .unwrap();
    assert!(
        installed.status.success(),
        "pip install {} failed:\n{}",
        PINS.join(" "),
        String::from_utf8_lossy(&installed.stderr)
    );
    std::fs::write(&marker, wanted).unwrap();
    python
}

/// Runs one client script; its output when every scenario passed.
async fn run_script(script: &str, env: Vec<(&'static str, String)>) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("clients")
        .join(script);
    tokio::task::spawn_blocking(move || {
        let python = python();
        let output = Command::new(python)
            .arg(&script)
            .envs(env)
            .env("PYTHONUNBUFFERED", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{} failed:\n{stdout}\n{}",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    })
    .await
    .unwrap()
}

/// A skald whose clients hold a skald key and whose upstream key skald holds.
async fn keyed_server(upstream: &Upstream) -> (TestServer, String) {
    let mut config = default_config();
    config.openai = Some(UpstreamConfig {
        base_url: upstream.openai_base(),
        api_key: Some("sk-openai-configured".to_owned()),
    });
    config.anthropic = Some(UpstreamConfig {
        base_url: upstream.anthropic_base(),
        api_key: Some("sk-ant-configured".to_owned()),
    });
    let state = common::test_state(config);
    let key = state.keys.create(&tenant_named("sdk"), "python").unwrap();
    let server = TestServer::start(state).await;
    (server, key.secret)
}

/// An open skald with a window small enough for the upstream's overflow to be believable.
async fn small_window_server(upstream: &Upstream) -> TestServer {
    let mut config: ServerConfig = default_config();
    config.openai = Some(UpstreamConfig {
        base_url: upstream.openai_base(),
        api_key: None,
    });
    config.anthropic = Some(UpstreamConfig {
        base_url: upstream.anthropic_base(),
        api_key: None,
    });
    config.engine.policy = Policy::preset("none").unwrap();
    config.engine.window_tokens = 8_192;
    config.engine.compaction.reserve_tokens = 512;
    config.engine.memory.enabled = false;
    TestServer::start(common::test_state(config)).await
}

/// The last message of a request, as text.
fn last_message(request: &upstream::Recorded) -> String {
    request.body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string()
}

const SCENARIOS: [&str; 5] = [
    "PASS non-streaming",
    "PASS streaming",
    "PASS tool-interception",
    "PASS streaming-tool-interception",
    "PASS overflow-recovery",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_python_sdk_works_through_the_proxy() {
    let upstream = Upstream::start().await;
    let (server, secret) = keyed_server(&upstream).await;
    let small = small_window_server(&upstream).await;
    upstream.push(Reply::Json(200, openai_text("ok from upstream")));
    upstream.push(Reply::Sse(openai_sse_text(&["Hello", " world"])));
    upstream.push(fetch_reply(|id| {
        Reply::Json(
            200,
            openai_tool_calls(&[(
                "call_fetch",
                "fetch_original_data",
                json!({"ref_ids": [id]}),
            )]),
        )
    }));
    upstream.push(Reply::Json(
        200,
        openai_text("Step 150 compiled module_150.rs."),
    ));
    upstream.push(fetch_reply(|id| {
        Reply::Sse(openai_sse_tool_calls(
            "chatcmpl-a",
            "Let me look. ",
            &[(
                "call_fetch2",
                "fetch_original_data",
                json!({"ref_ids": [id]}),
            )],
        ))
    }));
    upstream.push(Reply::Sse(openai_sse_text_with_id(
        "chatcmpl-b",
        &["Found ", "it."],
    )));
    upstream.push(openai_overflow());
    upstream.push(Reply::Json(200, openai_text("Every build fails to link.")));

    let output = run_script(
        "openai_sdk.py",
        vec![
            ("SKALD_BASE_URL", server.url("/v1")),
            ("SKALD_KEY", secret.clone()),
            ("SKALD_OVERFLOW_BASE_URL", small.url("/v1")),
        ],
    )
    .await;
    for scenario in SCENARIOS {
        assert!(
            output.contains(scenario),
            "{scenario} missing in:\n{output}"
        );
    }

    let sent = upstream.requests();
    assert_eq!(sent.len(), 8);
    assert!(
        sent.iter()
            .all(|request| request.path == "/v1/chat/completions")
    );
    assert_eq!(
        sent[0].header("authorization"),
        Some("Bearer sk-openai-configured")
    );
    assert_eq!(sent[0].body["temperature"], 0.2);
    assert_eq!(
        sent[1].body["stream_options"],
        json!({"include_usage": true})
    );
    // The fetch results went up, the SDK never saw them.
    assert!(last_message(&sent[3]).contains("module_150.rs ok"));
    assert!(last_message(&sent[5]).contains("module_150.rs ok"));
    assert!(
        sent[2]
            .tool_names()
            .contains(&"fetch_original_data".to_owned())
    );
    // The overflow's retry was compacted.
    assert_eq!(
        sent[6].header("authorization"),
        Some("Bearer sk-provider-test")
    );
    assert!(sent[7].body.to_string().len() < sent[6].body.to_string().len() / 2);
    assert_no_skald_key(&upstream, &secret);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_python_sdk_works_through_the_proxy() {
    let upstream = Upstream::start().await;
    let (server, secret) = keyed_server(&upstream).await;
    let small = small_window_server(&upstream).await;
    upstream.push(Reply::Json(200, anthropic_text("ok from upstream")));
    upstream.push(Reply::Sse(anthropic_sse_text(&["Hello", " world"])));
    upstream.push(fetch_reply(|id| {
        Reply::Json(
            200,
            anthropic_tool_uses(
                None,
                &[(
                    "toolu_fetch",
                    "fetch_original_data",
                    json!({"ref_ids": [id]}),
                )],
            ),
        )
    }));
    upstream.push(Reply::Json(
        200,
        anthropic_text("Step 150 compiled module_150.rs."),
    ));
    upstream.push(fetch_reply(|id| {
        Reply::Sse(anthropic_sse_tool_uses(
            "msg_a",
            "Let me look.",
            &[(
                "toolu_fetch2",
                "fetch_original_data",
                json!({"ref_ids": [id]}),
            )],
        ))
    }));
    upstream.push(Reply::Sse(anthropic_sse_text_with_id(
        "msg_b",
        &["Found it."],
    )));
    upstream.push(anthropic_overflow());
    upstream.push(Reply::Json(
        200,
        anthropic_text("Every build fails to link."),
    ));

    let output = run_script(
        "anthropic_sdk.py",
        vec![
            ("SKALD_BASE_URL", server.url("")),
            ("SKALD_KEY", secret.clone()),
            ("SKALD_OVERFLOW_BASE_URL", small.url("")),
        ],
    )
    .await;
    for scenario in SCENARIOS {
        assert!(
            output.contains(scenario),
            "{scenario} missing in:\n{output}"
        );
    }

    let sent = upstream.requests();
    assert_eq!(sent.len(), 8);
    assert!(sent.iter().all(|request| request.path == "/v1/messages"));
    assert_eq!(sent[0].header("x-api-key"), Some("sk-ant-configured"));
    assert!(sent[0].header("anthropic-version").is_some());
    assert!(last_message(&sent[3]).contains("module_150.rs ok"));
    assert!(last_message(&sent[5]).contains("module_150.rs ok"));
    // This SDK sends its key as a bearer token: it passes through as it came.
    assert_eq!(
        sent[6].header("authorization"),
        Some("Bearer sk-ant-provider-test")
    );
    assert!(sent[7].body.to_string().len() < sent[6].body.to_string().len() / 2);
    assert_no_skald_key(&upstream, &secret);
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
