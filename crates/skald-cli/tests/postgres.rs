//! `skald serve` on PostgreSQL, as a deployment runs it: several servers over one database
//! (`[database] url` in skald.toml, the key made with `skald keys create` into the same database),
//! a scripted Chat Completions upstream behind them, and a client speaking HTTP.
//!
//! - Two servers behind a round-robin client take one conversation whose calls alternate
//!   between them: every call is answered, the upstream sees the whole conversation each time,
//!   and the stored session holds each message once, in order, whichever server is asked.
//! - A server killed with SIGKILL under load loses nothing it acknowledged: every answered
//!   call's question is in the session, read through the surviving server.
//!
//! Needs `SKALD_TEST_DATABASE_URL` (a database this test may create databases beside, e.g.
//! `postgres://postgres@127.0.0.1:5432/postgres`) and `psql`; without the variable each test
//! says so and passes (`.ci/run` sets it and requires these tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "hosts/chat_upstream.rs"]
mod chat_upstream;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chat_upstream::ChatUpstream;
use serde_json::{Value, json};

/// A database of its own for one test, created with `psql` beside the configured one and
/// dropped at the end.
struct TestDatabase {
    admin: String,
    name: String,
    url: String,
}

impl TestDatabase {
    fn create(test: &str) -> Option<TestDatabase> {
        let admin = match std::env::var("SKALD_TEST_DATABASE_URL") {
            Ok(url) if !url.is_empty() => url,
            Ok(_) | Err(_) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "{test}: SKALD_TEST_DATABASE_URL is not set in CI"
                );
                eprintln!("{test}: skipped, SKALD_TEST_DATABASE_URL is not set");
                return None;
            }
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("skald_t_{test}_{}_{nanos}", std::process::id());
        psql(&admin, &format!("CREATE DATABASE {name}"));
        let (base, _) = admin.rsplit_once('/').unwrap();
        let url = format!("{base}/{name}");
        Some(TestDatabase { admin, name, url })
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .arg(&self.admin)
            .args([
                "-qc",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}

fn psql(url: &str, sql: &str) {
    let output = Command::new("psql")
        .arg(url)
        .args(["-qc", sql])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A skald home whose skald.toml puts the stores in `database` and the proxy in front of
/// `upstream`.
fn home(database: &TestDatabase, upstream: &ChatUpstream) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    fs::write(
        home.path().join("skald.toml"),
        format!(
            "[database]\nurl = \"{}\"\n\n[proxy.openai]\nbase_url = \"{}\"\n",
            database.url,
            upstream.base_url()
        ),
    )
    .unwrap();
    home
}

fn create_key(home: &tempfile::TempDir) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_skald"))
        .args(["keys", "create", "--tenant", "t"])
        .env("SKALD_HOME", home.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "skald keys create: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let created: Value = serde_json::from_slice(&output.stdout).unwrap();
    created["secret"].as_str().unwrap().to_owned()
}

/// `skald serve` on its own home (same database), on a free port; killed on drop.
struct Server {
    home: tempfile::TempDir,
    port: u16,
    child: Child,
}

impl Server {
    fn start(database: &TestDatabase, upstream: &ChatUpstream) -> Server {
        let home = home(database, upstream);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_skald"))
            .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
            .env("SKALD_HOME", home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(home.path().join("serve.stderr")).unwrap())
            .spawn()
            .unwrap();
        let mut server = Server { home, port, child };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("skald serve exited ({status}):\n{}", server.log());
            }
            if get(server.port, "/healthz", None).is_some_and(|(status, _)| status == 200) {
                break;
            }
            assert!(Instant::now() < deadline, "no /healthz:\n{}", server.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn log(&self) -> String {
        fs::read_to_string(self.home.path().join("serve.stderr")).unwrap_or_default()
    }

    fn kill_hard(&mut self) {
        Command::new("kill")
            .args(["-KILL", &self.child.id().to_string()])
            .status()
            .unwrap();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request; `None` when the server cannot be reached or the answer is cut.
fn request(
    port: u16,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: &str,
) -> Option<(u16, Value)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .ok()?;
    let auth = key.map_or(String::new(), |key| format!("x-skald-key: {key}\r\n"));
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n{auth}\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let status: u16 = answer.split_whitespace().nth(1)?.parse().ok()?;
    let (head, rest) = answer.split_once("\r\n\r\n")?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Some((
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    ))
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

fn get(port: u16, path: &str, key: Option<&str>) -> Option<(u16, Value)> {
    request(port, "GET", path, key, "")
}

/// A chat call of `session`'s conversation `messages` through the proxy.
fn chat(port: u16, key: &str, session: &str, messages: &[Value]) -> Option<(u16, Value)> {
    let body = json!({"model": "scripted", "messages": messages}).to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .ok()?;
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         x-skald-key: {key}\r\nauthorization: Bearer provider-key\r\n\
         x-skald-session: {session}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let status: u16 = answer.split_whitespace().nth(1)?.parse().ok()?;
    let (head, rest) = answer.split_once("\r\n\r\n")?;
    let rest = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Some((status, serde_json::from_str(&rest).ok()?))
}

/// The texts of a stored session's message entries, in append order.
fn stored_texts(port: u16, key: &str, session: &str) -> Vec<(String, String)> {
    let (status, entries) = get(port, &format!("/v1/sessions/{session}/entries"), Some(key))
        .expect("the session's entries");
    assert_eq!(status, 200, "{entries}");
    let list = entries
        .get("entries")
        .and_then(Value::as_array)
        .cloned()
        .or_else(|| entries.as_array().cloned())
        .unwrap_or_default();
    list.iter()
        .filter(|entry| entry["type"] == "message")
        .map(|entry| {
            let message = &entry["message"];
            let role = message["role"].as_str().unwrap_or_default().to_owned();
            let text = match &message["content"] {
                Value::String(text) => text.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|part| part["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => String::new(),
            };
            (role, text)
        })
        .collect()
}

#[test]
fn two_servers_on_one_postgres_database_take_turns_in_one_conversation() {
    let Some(database) = TestDatabase::create("round_robin") else {
        return;
    };
    let upstream = ChatUpstream::start();
    let key = create_key(&home(&database, &upstream));
    let servers = [
        Server::start(&database, &upstream),
        Server::start(&database, &upstream),
    ];
    let session = "pg-round-robin";
    let mut messages = vec![json!({"role": "system", "content": "You are terse."})];
    let turns = 10;
    for turn in 0..turns {
        messages.push(json!({"role": "user", "content": format!("question {turn}")}));
        let server = &servers[turn % 2];
        let (status, answer) = chat(server.port, &key, session, &messages)
            .unwrap_or_else(|| panic!("turn {turn}: no answer:\n{}", server.log()));
        assert_eq!(status, 200, "turn {turn}: {answer}\n{}", server.log());
        let reply = answer["choices"][0]["message"].clone();
        assert_eq!(reply["role"], "assistant", "{answer}");
        messages.push(json!({"role": "assistant", "content": reply["content"]}));
    }
    // The upstream saw the whole conversation on every call, whichever server made it.
    let calls = upstream.requests();
    assert_eq!(calls.len(), turns, "{}", upstream.dump());
    for (turn, call) in calls.iter().enumerate() {
        let users: Vec<String> = call
            .messages()
            .iter()
            .filter(|message| message["role"] == "user")
            .map(|message| message["content"].as_str().unwrap_or_default().to_owned())
            .collect();
        let expected: Vec<String> = (0..=turn).map(|at| format!("question {at}")).collect();
        assert_eq!(users, expected, "call {turn} diverged");
    }
    // Each message is stored once, in order, and both servers read the same session. (A Chat
    // Completions answer is stored when the client sends it back, so the last one is not.)
    messages.pop();
    let expected: Vec<(String, String)> = messages
        .iter()
        .filter(|message| message["role"] != "system")
        .map(|message| {
            (
                message["role"].as_str().unwrap().to_owned(),
                message["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    for server in &servers {
        assert_eq!(stored_texts(server.port, &key, session), expected);
    }
}

#[test]
fn a_server_killed_under_load_loses_nothing_it_acknowledged() {
    let Some(database) = TestDatabase::create("kill_nine") else {
        return;
    };
    let upstream = ChatUpstream::start();
    let key = create_key(&home(&database, &upstream));
    let mut doomed = Server::start(&database, &upstream);
    let survivor = Server::start(&database, &upstream);
    let sessions = 4;
    // Each client thread drives its own session against the doomed server until it dies.
    let acknowledged: Vec<Vec<String>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..sessions)
            .map(|client| {
                let key = key.clone();
                let port = doomed.port;
                scope.spawn(move || {
                    let session = format!("pg-kill-{client}");
                    let mut messages = Vec::new();
                    let mut acked = Vec::new();
                    for turn in 0.. {
                        let question = format!("client {client} question {turn}");
                        messages.push(json!({"role": "user", "content": question}));
                        match chat(port, &key, &session, &messages) {
                            Some((200, answer)) => {
                                acked.push(question);
                                let reply = answer["choices"][0]["message"]["content"].clone();
                                messages.push(json!({"role": "assistant", "content": reply}));
                            }
                            Some(_) | None => break,
                        }
                    }
                    acked
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(1500));
        doomed.kill_hard();
        threads
            .into_iter()
            .map(|thread| thread.join().unwrap())
            .collect()
    });
    let total: usize = acknowledged.iter().map(Vec::len).sum();
    assert!(total >= sessions, "too few calls before the kill: {total}");
    let mut lost = Vec::new();
    for (client, acked) in acknowledged.iter().enumerate() {
        let stored: Vec<String> = stored_texts(survivor.port, &key, &format!("pg-kill-{client}"))
            .into_iter()
            .filter(|(role, _)| role == "user")
            .map(|(_, text)| text)
            .collect();
        lost.extend(
            acked
                .iter()
                .filter(|question| !stored.contains(question))
                .cloned(),
        );
    }
    eprintln!(
        "kill -9 trial: {total} calls acknowledged, {} lost",
        lost.len()
    );
    assert!(lost.is_empty(), "acknowledged but not stored: {lost:?}");
}

#[test]
fn a_commit_sent_to_two_servers_at_once_is_stored_once() {
    let Some(database) = TestDatabase::create("commit_race") else {
        return;
    };
    let upstream = ChatUpstream::start();
    let key = create_key(&home(&database, &upstream));
    let servers = [
        Server::start(&database, &upstream),
        Server::start(&database, &upstream),
    ];
    let session = "pg-commits";
    let turns = 12;
    let mut statuses = Vec::new();
    for turn in 0..turns {
        let body = json!({
            "advancementKey": format!("turn-{turn}"),
            "messages": [
                {"role": "user", "content": format!("commit question {turn}"), "timestamp": 1_770_000_000_000_i64 + turn},
                {"role": "assistant", "content": [{"type": "text", "text": format!("commit answer {turn}")}],
                 "api": "openai-completions", "provider": "scripted", "model": "scripted",
                 "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                           "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                 "stopReason": "stop", "timestamp": 1_770_000_000_001_i64 + turn},
            ],
        })
        .to_string();
        // The host's retry reaches the other server while the first attempt is under way.
        let answers: Vec<(u16, Value)> = std::thread::scope(|scope| {
            let calls: Vec<_> = servers
                .iter()
                .map(|server| {
                    let (body, key, port) = (body.clone(), key.clone(), server.port);
                    scope.spawn(move || {
                        request(
                            port,
                            "POST",
                            &format!("/v1/sessions/{session}/commit-turn"),
                            Some(&key),
                            &body,
                        )
                        .expect("an answer")
                    })
                })
                .collect();
            calls.into_iter().map(|call| call.join().unwrap()).collect()
        });
        for (status, answer) in &answers {
            assert_eq!(*status, 200, "turn {turn}: {answer}");
        }
        let mut kinds: Vec<String> = answers
            .iter()
            .map(|(_, answer)| answer["status"].as_str().unwrap_or_default().to_owned())
            .collect();
        kinds.sort();
        assert_eq!(kinds, ["committed", "duplicate"], "turn {turn}");
        statuses.push(kinds);
    }
    for server in &servers {
        let stored = stored_texts(server.port, &key, session);
        let expected: Vec<(String, String)> = (0..turns)
            .flat_map(|turn| {
                [
                    ("user".to_owned(), format!("commit question {turn}")),
                    ("assistant".to_owned(), format!("commit answer {turn}")),
                ]
            })
            .collect();
        assert_eq!(stored, expected);
    }
}

#[test]
fn skald_migrate_copies_a_data_directory_and_a_server_on_postgres_serves_it() {
    let Some(database) = TestDatabase::create("migrate_cli") else {
        return;
    };
    let upstream = ChatUpstream::start();
    let sqlite_home = tempfile::tempdir().unwrap();
    let local = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_skald"))
            .args(args)
            .args(["--json"])
            .env("SKALD_HOME", sqlite_home.path())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "skald {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/openclaw-session.jsonl"
    );
    let imported = local(&["import", example, "--tenant", "t"]);
    let session = imported["session_id"].as_str().unwrap().to_owned();
    local(&[
        "remember",
        "--content",
        "Alice prefers dark mode in every editor",
        "--tenant",
        "t",
    ]);
    let created = local(&["keys", "create", "--tenant", "t"]);
    let key = created["secret"].as_str().unwrap().to_owned();

    let source = format!(
        "sqlite://{}",
        sqlite_home.path().join("skald.sqlite3").display()
    );
    let migrate = || {
        Command::new(env!("CARGO_BIN_EXE_skald"))
            .args([
                "migrate",
                "--from",
                &source,
                "--to",
                &database.url,
                "--json",
            ])
            .env("SKALD_HOME", sqlite_home.path())
            .output()
            .unwrap()
    };
    let output = migrate();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let tables = report["tables"].as_array().unwrap();
    for table in tables {
        assert_eq!(table["source_rows"], table["target_rows"], "{table}");
        assert_eq!(table["source_sha256"], table["target_sha256"], "{table}");
    }
    let rows = |name: &str| {
        tables.iter().find(|table| table["table"] == name).unwrap()["target_rows"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(rows("sessions"), 1);
    assert!(rows("session_entries") > 3);
    assert_eq!(rows("memories"), 1);
    assert_eq!(rows("api_keys"), 1);
    // Into a database that holds data now: refused, nothing written.
    let again = migrate();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("empty database"));

    // A server on PostgreSQL takes the SQLite key and serves the same session and memory.
    let server = Server::start(&database, &upstream);
    let local_sessions = local(&["sessions", "--tenant", "t"]);
    let (status, listed) = get(server.port, "/v1/sessions", Some(&key)).unwrap();
    assert_eq!(status, 200, "{listed}");
    assert!(listed.to_string().contains(&session), "{listed}");
    let stored = stored_texts(server.port, &key, &session);
    let local_messages = local_sessions[0]["messages"].as_u64().unwrap();
    assert!(local_messages > 0, "{local_sessions}");
    assert_eq!(stored.len() as u64, local_messages, "{local_sessions}");
    let (status, found) = request(
        server.port,
        "POST",
        "/v1/memory/search",
        Some(&key),
        &json!({"query": "which mode does alice prefer"}).to_string(),
    )
    .unwrap();
    assert_eq!(status, 200, "{found}");
    assert!(found.to_string().contains("dark mode"), "{found}");
}

/// A data directory whose skald.toml puts every store in `database` and nothing else.
fn database_home(database: &TestDatabase) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    fs::write(
        home.path().join("skald.toml"),
        format!("[database]\nurl = \"{}\"\n", database.url),
    )
    .unwrap();
    home
}

/// `skald ARGS` on `home` with `stdin`; its stdout, after asserting that it succeeded.
fn skald_on(home: &std::path::Path, args: &[&str], stdin: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skald"))
        .args(args)
        .env("SKALD_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "skald {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// A Bash output long enough to be offloaded, with one line to look for.
fn long_bash_output() -> String {
    (0..400)
        .map(|line| match line {
            271 => "ERROR checkout_total mismatch in orders/coupon.py:88 (needle-5f1c)".to_owned(),
            line => format!(
                "INFO step {line}: processed batch {} of 400",
                line * 7 % 400
            ),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What Claude Code's PostToolUse hook hands `skald hook post-tool-use` for a Bash call.
fn post_tool_use_input(output: &str) -> String {
    json!({
        "hook_event_name": "PostToolUse",
        "session_id": "cc-session-1",
        "tool_name": "Bash",
        "tool_input": {"command": "make check"},
        "tool_response": {"stdout": output, "stderr": "", "interrupted": false},
    })
    .to_string()
}

/// The ref id in a placeholder `[REF_ID: <64 hex>] …`.
fn ref_id_in(text: &str) -> String {
    let (_, rest) = text.split_once("[REF_ID: ").expect("a placeholder");
    rest[..64].to_owned()
}

/// `skald mcp` on `home`, spoken to over stdio as an MCP client does: initialize, then one
/// `tools/call`; the call's result.
fn mcp_tool_call(home: &std::path::Path, tool: &str, arguments: Value) -> Value {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_skald"))
        .arg("mcp")
        .env("SKALD_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(fs::File::create(home.join("mcp.stderr")).unwrap())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let answer_to = |id: u64| -> Value {
        loop {
            let line = received
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| {
                    panic!(
                        "no answer to request {id} from skald mcp:\n{}",
                        fs::read_to_string(home.join("mcp.stderr")).unwrap_or_default()
                    )
                });
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    };
    let mut send = |message: Value| writeln!(stdin, "{message}").unwrap();
    send(json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "postgres-test", "version": "0"},
        },
    }));
    let initialized = answer_to(1);
    assert!(initialized["result"].is_object(), "{initialized}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }));
    let called = answer_to(2);
    drop(stdin);
    let _ = child.wait();
    called
}

#[test]
fn a_ref_the_post_tool_use_hook_writes_is_fetchable_through_skald_mcp_on_postgres() {
    let Some(database) = TestDatabase::create("hook_mcp") else {
        return;
    };
    // The hook runs in one data directory, `skald mcp` in another: only the database is shared.
    let hook_home = database_home(&database);
    let mcp_home = database_home(&database);
    let output = long_bash_output();
    let answer = skald_on(
        hook_home.path(),
        &["hook", "post-tool-use"],
        &post_tool_use_input(&output),
    );
    let answer: Value = serde_json::from_str(&answer).unwrap();
    let placeholder = answer["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
        .as_str()
        .unwrap_or_else(|| panic!("no placeholder: {answer}"));
    let ref_id = ref_id_in(placeholder);

    let called = mcp_tool_call(
        mcp_home.path(),
        "fetch_original_data",
        json!({"ref_ids": [ref_id], "grep": "needle-5f1c"}),
    );
    assert_eq!(called["result"]["isError"], Value::Bool(false), "{called}");
    let text = called["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("ERROR checkout_total mismatch in orders/coupon.py:88"),
        "{text}"
    );
    // Neither data directory got a SQLite database of its own.
    for home in [&hook_home, &mcp_home] {
        assert!(!home.path().join("skald.sqlite3").exists());
    }
}

#[test]
fn local_commands_import_list_fetch_and_remember_in_the_configured_postgres_database() {
    let Some(database) = TestDatabase::create("local_commands") else {
        return;
    };
    let writer = database_home(&database);
    let reader = database_home(&database);
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/openclaw-session.jsonl"
    );
    let imported: Value =
        serde_json::from_str(&skald_on(writer.path(), &["import", example, "--json"], "")).unwrap();
    let session = imported["session_id"].as_str().unwrap().to_owned();
    let answer: Value = serde_json::from_str(&skald_on(
        writer.path(),
        &["hook", "post-tool-use"],
        &post_tool_use_input(&long_bash_output()),
    ))
    .unwrap();
    let ref_id = ref_id_in(
        answer["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
            .as_str()
            .unwrap(),
    );
    skald_on(
        writer.path(),
        &[
            "remember",
            "--content",
            "Alice prefers dark mode in every editor",
        ],
        "",
    );

    let listed: Value =
        serde_json::from_str(&skald_on(reader.path(), &["sessions", "--json"], "")).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|row| row["session_id"].as_str())
        .collect();
    assert_eq!(ids, [session.as_str()], "{listed}");
    let context: Value = serde_json::from_str(&skald_on(
        reader.path(),
        &["context", &session, "--json"],
        "",
    ))
    .unwrap();
    assert!(
        context["messages"].as_array().unwrap().len() > 1,
        "{context}"
    );
    let fetched: Value = serde_json::from_str(&skald_on(
        reader.path(),
        &["fetch", &ref_id, "--grep", "needle-5f1c", "--json"],
        "",
    ))
    .unwrap();
    assert_eq!(fetched["found"], 1, "{fetched}");
    assert!(
        fetched["text"]
            .as_str()
            .unwrap()
            .contains("orders/coupon.py:88"),
        "{fetched}"
    );
    let found = skald_on(
        reader.path(),
        &[
            "search",
            "--query",
            "which mode does alice prefer",
            "--json",
        ],
        "",
    );
    assert!(found.contains("dark mode"), "{found}");
    for home in [&writer, &reader] {
        assert!(!home.path().join("skald.sqlite3").exists());
    }
}
