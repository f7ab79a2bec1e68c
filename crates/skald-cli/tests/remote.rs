//! The session, memory and ref commands against a server (`--url`, `SKALD_URL`): each command
//! runs once on a local data directory and once against a real `skald serve` child process whose
//! store went through the same commands, and the JSON outputs must be equal (timestamps and the
//! random ids of new entries normalised). Then the key rules: a missing or wrong key, a key's
//! tenant seeing only its own data, the environment variables, and the flags a server cannot
//! honour.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

const BRANCHING_SESSION: &str = "7c1d2e3f-0a4b-4c5d-8e6f-9a0b1c2d3e4f";
const COMPACTABLE_SESSION: &str = "0c0ffee0-1111-4222-8333-444455556666";

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

/// `skald` with a clean environment (no data directory, server or key from the caller's).
fn skald_command(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skald"));
    command
        .arg("--home")
        .arg(home)
        .env_remove("SKALD_HOME")
        .env_remove("SKALD_URL")
        .env_remove("SKALD_API_KEY");
    command
}

fn skald(home: &Path, args: &[&str]) -> Output {
    skald_command(home).args(args).output().unwrap()
}

fn json(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "stdout is not JSON ({error}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A `skald serve` on an ephemeral port, stopped when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(home: &Path) -> Server {
        let mut child = skald_command(home)
            .args(["serve", "--addr", "127.0.0.1:0"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let url = first.split_whitespace().last().unwrap().to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{first}");
        // Keep reading what the server says, so its stderr never fills up and blocks it.
        std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
        Server { child, url }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Timestamps and the random ids of entries written now (a compaction's checkpoint: its id,
/// and the time of its summary message): the only fields that may differ between two runs of
/// the same command.
const VOLATILE_FIELDS: [&str; 9] = [
    "at",
    "timestamp",
    "created_at",
    "updated_at",
    "updated_at_ms",
    "written_at",
    "forgotten_at",
    "ended_at",
    "checkpoint_entry_id",
];

fn normalise(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if VOLATILE_FIELDS.contains(&key.as_str()) && !field.is_null() {
                    *field = Value::String(format!("<{key}>"));
                } else {
                    normalise(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// One data directory used locally, one served, and an empty one for the client of the server.
struct Pair {
    local: tempfile::TempDir,
    client: tempfile::TempDir,
    server: Server,
    _served: tempfile::TempDir,
}

impl Pair {
    fn start() -> Pair {
        let served = tempfile::tempdir().unwrap();
        Pair {
            server: Server::start(served.path()),
            local: tempfile::tempdir().unwrap(),
            client: tempfile::tempdir().unwrap(),
            _served: served,
        }
    }

    fn remote(&self, args: &[&str]) -> Output {
        skald_command(self.client.path())
            .args(["--url", &self.server.url])
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs `args` locally and against the server; both must succeed and print the same JSON.
    fn same(&self, args: &[&str]) -> Value {
        let mut local = json(&skald(self.local.path(), args));
        let mut remote = json(&self.remote(args));
        normalise(&mut local);
        normalise(&mut remote);
        assert_eq!(
            local,
            remote,
            "`skald {}` differs locally and against a server",
            args.join(" ")
        );
        local
    }
}

/// A small directory of documents for `skald add`: Markdown, text in a subdirectory, a binary
/// file and an empty one.
fn documents(root: &Path) -> PathBuf {
    let docs = root.join("docs");
    std::fs::create_dir_all(docs.join("guides")).unwrap();
    std::fs::write(
        docs.join("auth.md"),
        "# Auth\nTokens expire after one hour. Refresh them with the refresh endpoint.\n\n\
         # Retry\nFailed calls are retried three times with exponential backoff.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("guides/deploy.txt"),
        "Deploys run from the main branch.\n\nRollbacks use the previous image tag.\n",
    )
    .unwrap();
    std::fs::write(docs.join("logo.png"), [0x89, b'P', b'N', b'G', 0, 1, 2]).unwrap();
    std::fs::write(docs.join("empty.md"), "").unwrap();
    docs
}

#[test]
fn the_session_commands_print_the_same_locally_and_against_a_server() {
    let pair = Pair::start();
    let branching = fixture("session_with_compaction.jsonl");
    let compactable = fixture("compactable_session.jsonl");

    let imported = pair.same(&["import", &branching]);
    assert_eq!(imported["session_id"], BRANCHING_SESSION);
    assert_eq!(imported["status"], "created");
    pair.same(&["import", &compactable]);
    let again = pair.same(&["import", &branching]);
    assert_eq!(again["status"], "already_imported");
    let renamed = pair.same(&["import", &branching, "--session-id", "renamed-copy"]);
    assert_eq!(renamed["session_id"], "renamed-copy");

    let sessions = pair.same(&["sessions"]);
    assert_eq!(sessions.as_array().unwrap().len(), 3);
    assert_eq!(
        sessions[0]["source"].as_str(),
        Some(branching.as_str()),
        "{sessions:#}"
    );

    let context = pair.same(&["context", BRANCHING_SESSION]);
    assert_eq!(context["tools"][0], "fetch_original_data");
    pair.same(&["context", COMPACTABLE_SESSION, "--window", "8000"]);
    let text = |output: Output| {
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    assert_eq!(
        text(skald(
            pair.local.path(),
            &["context", BRANCHING_SESSION, "--text"]
        )),
        text(pair.remote(&["context", BRANCHING_SESSION, "--text"])),
        "the readable rendering differs"
    );

    // The refs the context handed out are fetched the same way, failures included.
    let token = {
        let text = context["messages"].to_string();
        let at = text.find("[REF_ID: ").unwrap();
        let end = at + text[at..].find(']').unwrap();
        text[at..=end].to_owned()
    };
    let fetched = pair.same(&["fetch", &token, "--grep", "FAILED", "--context", "1"]);
    assert!(
        fetched["text"]
            .as_str()
            .unwrap()
            .contains("test_rounding FAILED")
    );
    let missing = "0".repeat(64);
    let local = skald(pair.local.path(), &["fetch", &token, &missing, "--json"]);
    let remote = pair.remote(&["fetch", &token, &missing, "--json"]);
    assert_eq!(local.status.code(), Some(1));
    assert_eq!(remote.status.code(), Some(1));
    assert_eq!(local.stdout, remote.stdout);

    // A compaction: the same summary, checkpoint and memory archive.
    let compacted = pair.same(&["compact", COMPACTABLE_SESSION]);
    assert_eq!(compacted["outcome"], "compacted");
    assert_eq!(compacted["memory_archive"]["status"], "done");
    let skipped = pair.same(&["compact", BRANCHING_SESSION, "--no-archive"]);
    assert_eq!(skipped["outcome"], "skipped");
    let after = pair.same(&["context", COMPACTABLE_SESSION]);
    assert!(
        after["messages"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("compacted"),
        "{after:#}"
    );
    pair.same(&["sessions"]);
    pair.same(&["history"]);

    // Nothing was written where the client runs.
    assert!(!pair.client.path().join("skald.sqlite3").exists());
}

#[test]
fn the_memory_commands_print_the_same_locally_and_against_a_server() {
    let pair = Pair::start();
    let remembered = pair.same(&[
        "remember",
        "--content",
        "Dana runs the checkout team of the shop and reviews every pricing change.",
        "--type",
        "profile",
        "--user",
        "dana",
    ]);
    let profile = remembered["uri"].as_str().unwrap().to_owned();
    pair.same(&[
        "remember",
        "--content",
        "Coupon totals were wrong when the coupon was applied after tax; the fix applies it \
         before tax, with a regression test in tests/test_pricing.py.",
        "--type",
        "cases",
        "--priority",
        "8",
    ]);
    let preference = pair.same(&[
        "remember",
        "--content",
        "The user prefers dark mode in every editor",
        "--type",
        "preferences",
    ]);
    let merged = pair.same(&[
        "remember",
        "--content",
        "the user prefers dark mode in every editor",
        "--type",
        "preferences",
    ]);
    assert_eq!(merged["outcome"], "merged");
    let preference = preference["uri"].as_str().unwrap().to_owned();

    let docs = documents(pair.client.path());
    let docs = docs.to_str().unwrap();
    let added = pair.same(&["add", docs, "--to", "viking://resources/shop"]);
    assert_eq!(added["files"], 2, "{added:#}");
    assert_eq!(added["skipped"].as_array().unwrap().len(), 2, "{added:#}");
    let file = format!("{docs}/auth.md");
    pair.same(&["add", &file, "--max-chunk-chars", "200"]);
    let readded = pair.same(&["add", docs, "--to", "viking://resources/shop"]);
    assert_eq!(readded["unchanged"], added["added"], "{readded:#}");

    let found = pair.same(&["search", "--query", "coupon applied after tax"]);
    assert_eq!(found["results"].as_array().unwrap().len(), 1, "{found:#}");
    pair.same(&[
        "search",
        "-q",
        "checkout team pricing",
        "--user",
        "dana",
        "--category",
        "profile,cases",
        "--limit",
        "5",
    ]);
    let docs_found = pair.same(&["search-docs", "-q", "when do tokens expire"]);
    assert!(!docs_found["results"].as_array().unwrap().is_empty());
    pair.same(&[
        "search-docs",
        "-q",
        "rollbacks image tag",
        "--path",
        "viking://resources/shop",
    ]);

    let root = pair.same(&["ls"]);
    assert!(!root.as_array().unwrap().is_empty());
    pair.same(&["ls", "viking://resources/shop/docs"]);
    pair.same(&["ls", "--category", "profile", "--user", "dana"]);
    pair.same(&["ls", "--category", "events"]);
    pair.same(&["tree"]);
    pair.same(&["tree", "--depth", "99"]);
    pair.same(&["tree", "viking://resources", "--depth", "2"]);
    pair.same(&["read", &profile]);
    pair.same(&["read", &preference, "--level", "l0"]);
    let overview = pair.same(&["read", "viking://resources/shop/docs", "--level", "l1"]);
    assert!(overview["entry"].as_str().unwrap().ends_with("/_overview"));

    // What memory gives a call: the profile, the listing, the recalled case, the memory tools.
    pair.same(&["import", &fixture("compactable_session.jsonl")]);
    let context = pair.same(&["context", COMPACTABLE_SESSION, "--memory", "--user", "dana"]);
    assert!(
        context["systemPromptAddition"]
            .as_str()
            .unwrap()
            .contains("Dana runs the checkout team")
    );
    let kept = context["memory"]["recall"]["kept"].as_array().unwrap();
    assert!(
        kept.iter()
            .any(|memory| memory["uri"].as_str().unwrap().contains("/memories/cases/")),
        "{context:#}"
    );
    assert!(
        context["tools"]
            .as_array()
            .unwrap()
            .contains(&Value::from("commit_memory"))
    );
    pair.same(&["history", "--limit", "50"]);
    pair.same(&["history", "--uri", &preference]);

    let forgotten = pair.same(&["forget", &profile]);
    assert_eq!(forgotten["uri"], profile.as_str());
    let recursive = pair.same(&["forget", "--recursive", "viking://resources/shop"]);
    assert!(recursive.as_array().unwrap().len() > 3);
    pair.same(&["history", "--uri", &profile]);
    pair.same(&["ls", "viking://resources"]);
    assert!(!pair.client.path().join("skald.sqlite3").exists());
}

/// Two tenants' keys on one server.
struct KeyedServer {
    server: Server,
    acme: String,
    beta: String,
    client: tempfile::TempDir,
    _served: tempfile::TempDir,
}

impl KeyedServer {
    fn start() -> KeyedServer {
        let served = tempfile::tempdir().unwrap();
        let key = |tenant: &str| {
            let created = json(&skald(
                served.path(),
                &["keys", "create", "--tenant", tenant],
            ));
            created["secret"].as_str().unwrap().to_owned()
        };
        let (acme, beta) = (key("acme"), key("beta"));
        KeyedServer {
            server: Server::start(served.path()),
            acme,
            beta,
            client: tempfile::tempdir().unwrap(),
            _served: served,
        }
    }

    fn run(&self, key: Option<&str>, args: &[&str]) -> Output {
        let mut command = skald_command(self.client.path());
        command.args(["--url", &self.server.url]);
        if let Some(key) = key {
            command.args(["--key", key]);
        }
        command.args(args).output().unwrap()
    }
}

#[test]
fn a_key_is_required_and_scopes_every_command_to_its_tenant() {
    let server = KeyedServer::start();
    let fixture = fixture("session_with_compaction.jsonl");

    let anonymous = server.run(None, &["sessions"]);
    assert_eq!(anonymous.status.code(), Some(1));
    let message = stderr(&anonymous);
    assert!(
        message.starts_with("skald: error: ") && message.contains("requires an API key"),
        "{message}"
    );
    assert!(message.contains("--key or SKALD_API_KEY"), "{message}");
    let wrong = server.run(Some("sk-skald-not-a-real-key"), &["sessions"]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(stderr(&wrong).contains("unknown API key"), "{wrong:?}");

    let acme = Some(server.acme.as_str());
    let imported = json(&server.run(acme, &["import", &fixture]));
    assert_eq!(imported["tenant"], "acme");
    let remembered = json(&server.run(
        acme,
        &[
            "remember",
            "--content",
            "Acme ships on Fridays",
            "--type",
            "events",
        ],
    ));
    let uri = remembered["uri"].as_str().unwrap();
    let listed = json(&server.run(acme, &["sessions"]));
    assert_eq!(listed.as_array().unwrap().len(), 1);

    // The other tenant sees none of it.
    let beta = Some(server.beta.as_str());
    assert_eq!(json(&server.run(beta, &["sessions"])), Value::Array(vec![]));
    let read = server.run(beta, &["read", uri]);
    assert_eq!(read.status.code(), Some(1));
    assert!(stderr(&read).contains("no memory at"), "{read:?}");
    let context = server.run(beta, &["context", BRANCHING_SESSION]);
    assert!(stderr(&context).contains("no session"), "{context:?}");
    let found = json(&server.run(beta, &["search", "-q", "Acme ships on Fridays"]));
    assert_eq!(found["results"], Value::Array(vec![]));

    // SKALD_URL and SKALD_API_KEY stand for --url and --key.
    let from_env = skald_command(server.client.path())
        .env("SKALD_URL", &server.server.url)
        .env("SKALD_API_KEY", &server.acme)
        .args(["search", "-q", "Acme ships on Fridays"])
        .output()
        .unwrap();
    assert_eq!(json(&from_env)["results"][0]["uri"], uri);
    let beta_from_env = skald_command(server.client.path())
        .env("SKALD_URL", &server.server.url)
        .env("SKALD_API_KEY", &server.beta)
        .arg("sessions")
        .output()
        .unwrap();
    assert_eq!(json(&beta_from_env), Value::Array(vec![]));

    // The tenant is the key's: --tenant is refused, not ignored.
    let tenant = server.run(acme, &["sessions", "--tenant", "beta"]);
    assert_eq!(tenant.status.code(), Some(1));
    assert!(
        stderr(&tenant).contains("--tenant cannot be used with --url"),
        "{tenant:?}"
    );
    assert!(!server.client.path().join("skald.sqlite3").exists());
}

/// A local port nothing listens on.
fn closed_port_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

#[test]
fn an_unreachable_server_is_named_and_flags_it_cannot_honour_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let url = closed_port_url();
    let run = |args: &[&str]| {
        skald_command(home.path())
            .args(["--url", &url])
            .args(args)
            .output()
            .unwrap()
    };
    let unreachable = run(&["sessions"]);
    assert_eq!(unreachable.status.code(), Some(1));
    let message = stderr(&unreachable);
    assert!(
        message.starts_with(&format!(
            "skald: error: cannot reach the skald server at {url}"
        )),
        "{message}"
    );

    // Refused before anything is sent: each says which flag and why.
    for (args, flag) in [
        (vec!["context", "s1", "--policy", "none"], "--policy"),
        (vec!["context", "s1", "--leaf", "a1b2c3d4"], "--leaf"),
        (
            vec!["compact", "s1", "--extract-with", "llm"],
            "--extract-with",
        ),
        (vec!["compact", "s1", "--user", "dana"], "--user"),
        (vec!["fetch", "abc", "--tenant", "acme"], "--tenant"),
        (vec!["tree", "--user", "dana"], "--user"),
        (
            vec!["read", "viking://resources/x", "--agent", "a"],
            "--agent",
        ),
        (
            vec!["forget", "viking://resources/x", "--tenant", "t"],
            "--tenant",
        ),
        (vec!["add", "Cargo.toml", "--user", "dana"], "--user"),
        (vec!["ls", "--tenant", "acme"], "--tenant"),
        (vec!["sessions", "--config", "skald.toml"], "--config"),
    ] {
        let output = run(&args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&output).contains(&format!("{flag} cannot be used with --url")),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let compare = run(&["compact", "--compare", "."]);
    assert!(stderr(&compare).contains("--compare"), "{compare:?}");

    // A key needs a server; the local commands ignore --url.
    let key_alone = skald(home.path(), &["sessions", "--key", "sk-skald-x"]);
    assert_eq!(key_alone.status.code(), Some(1));
    assert!(stderr(&key_alone).contains("--url"), "{key_alone:?}");
    let local = run(&["home"]);
    assert_eq!(json(&local)["source"], "--home");
}
