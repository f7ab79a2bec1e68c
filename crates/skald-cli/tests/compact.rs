//! End-to-end tests of `skald compact`: a stored session compacted by the extractive summarizer
//! or by a configured model (a scripted local server), what `skald context` shows afterwards,
//! the outcomes and exit statuses, configuration errors that change nothing, and
//! `--compare` against a synthetic Claude Code compaction.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SESSION_ID: &str = "0c0ffee0-1111-4222-8333-444455556666";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn skald(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skald"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("SKALD_HOME")
        .output()
        .unwrap()
}

fn json(output: &Output) -> Value {
    assert!(output.status.success(), "{output:?}");
    parse(output)
}

fn parse(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A data directory holding the small OpenClaw session (six user turns).
fn imported_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let fixture = fixtures().join("compactable_session.jsonl");
    let imported = json(&skald(home.path(), &["import", fixture.to_str().unwrap()]));
    assert_eq!(imported["session_id"], SESSION_ID);
    assert_eq!(imported["entries"], 24);
    home
}

/// (entries, leaf) of the session, from `skald sessions`.
fn entries_and_leaf(home: &Path) -> (Value, Value) {
    let sessions = json(&skald(home, &["sessions"]));
    let row = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["session_id"] == SESSION_ID)
        .unwrap();
    (row["entries"].clone(), row["leaf_id"].clone())
}

fn write_config(home: &Path, text: &str) -> PathBuf {
    let path = home.join("test-skald.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn import_compact_then_context_starts_from_the_summary() {
    let home = imported_home();
    let report = json(&skald(home.path(), &["compact", SESSION_ID, "--json"]));
    assert_eq!(report["outcome"], "compacted");
    assert_eq!(report["reason"], Value::Null);
    assert_eq!(report["summarizer"], "extractive");
    assert_eq!(report["window_tokens"], 200_000);
    let before = report["tokens_before"].as_u64().unwrap();
    let after = report["tokens_after"].as_u64().unwrap();
    assert!(after < before, "{after} !< {before}");
    let summary = report["summary"].as_str().unwrap();
    for heading in [
        "## Decisions",
        "## Open TODOs",
        "## Constraints/Rules",
        "## Pending user asks",
        "## Exact identifiers",
    ] {
        assert!(summary.contains(heading), "{heading} missing:\n{summary}");
    }
    assert!(summary.contains("Never edit vendor/ or config/prod.yaml."));
    assert!(summary.contains("3f9c2e1d7b6a5948"));
    let checkpoint = report["checkpoint_entry_id"].as_str().unwrap();
    let first_kept = report["first_kept_entry_id"].as_str().unwrap();
    assert_eq!(report["rewritten_entries"], 0);
    assert_eq!(report["details"]["trigger"], "manual");
    assert_eq!(report["details"]["preserved_messages"], 12);

    // The checkpoint was appended, then the record of the span's archive (a custom entry,
    // never in the context) as its child.
    let (entries, leaf) = entries_and_leaf(home.path());
    assert_eq!(entries, 26);
    assert_ne!(leaf, checkpoint);
    assert_eq!(report["memory_archive"]["status"], "done");
    assert_eq!(
        report["memory_archive"]["archive"][0],
        format!("viking://session/{SESSION_ID}/archive_001")
    );

    // The model now sees the summary, then the kept entries (the last three user turns).
    let context = json(&skald(
        home.path(),
        &["context", SESSION_ID, "--policy", "none"],
    ));
    let messages = context["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1 + 12);
    let first = messages[0]["content"][0]["text"].as_str().unwrap();
    assert!(
        first.starts_with("The conversation history before this point was compacted"),
        "{first}"
    );
    assert!(first.contains(summary.trim()), "{first}");
    assert_eq!(messages[1]["role"], "user");
    assert_eq!(
        messages[1]["content"][0]["text"],
        "Fix it: apply the coupon before tax, and add a regression test."
    );
    assert!(
        !context.to_string().contains("Show me the pricing code"),
        "a summarised turn is still in the context"
    );
    assert!(!first_kept.is_empty());

    // The readable rendering shows the same order.
    let text = skald(
        home.path(),
        &["context", SESSION_ID, "--policy", "none", "--text"],
    );
    let text = String::from_utf8(text.stdout).unwrap();
    let summary_at = text.find("## Decisions").unwrap();
    let kept_at = text.find("Fix it: apply the coupon").unwrap();
    assert!(summary_at < kept_at, "{text}");
}

#[test]
fn a_short_session_is_skipped_with_exit_status_zero() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("request.json");
    std::fs::write(
        &file,
        r#"{"model":"gpt-4o","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"List the files."},{"role":"assistant","content":"a.txt b.txt"}]}"#,
    )
    .unwrap();
    let imported = json(&skald(home.path(), &["import", file.to_str().unwrap()]));
    let id = imported["session_id"].as_str().unwrap().to_owned();
    let output = skald(home.path(), &["compact", &id]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let report = parse(&output);
    assert_eq!(report["outcome"], "skipped");
    assert_eq!(report["reason_detail"]["kind"], "nothing_to_compact");
    assert!(
        report["reason"]
            .as_str()
            .unwrap()
            .starts_with("nothing to compact"),
        "{report}"
    );
    assert_eq!(report["tokens_before"], report["tokens_after"]);
    assert_eq!(report["summary"], Value::Null);
    assert_eq!(report["checkpoint_entry_id"], Value::Null);
    let sessions = json(&skald(home.path(), &["sessions"]));
    assert_eq!(sessions[0]["entries"], 3, "nothing was written");
}

#[test]
fn bad_configuration_is_an_error_that_changes_nothing() {
    let home = imported_home();
    let before = entries_and_leaf(home.path());
    for (text, expected) in [
        (
            "[compation]\nreserve_tokens = 1000\n",
            "unknown key `compation`",
        ),
        ("[compaction]\nkeep_recent = 4\n", "keep_recent"),
        (
            "[compaction]\nkeep_recent_turns = 40\n",
            "keep_recent_turns: expected at most 12, found 40",
        ),
        (
            "[llm]\nkind = \"openai\"\nmodel = \"m\"\ntimeout = 5\n",
            "unknown field `timeout`",
        ),
    ] {
        let config = write_config(home.path(), text);
        let output = skald(
            home.path(),
            &["--config", config.to_str().unwrap(), "compact", SESSION_ID],
        );
        assert_eq!(output.status.code(), Some(1), "{text}: {output:?}");
        let message = stderr(&output);
        assert!(
            message.contains(expected) && message.contains("test-skald.toml"),
            "{text}: {message}"
        );
        assert!(output.stdout.is_empty(), "{output:?}");
    }
    assert_eq!(entries_and_leaf(home.path()), before);
}

#[test]
fn a_configured_model_without_its_key_is_a_clear_error() {
    let home = imported_home();
    let before = entries_and_leaf(home.path());
    let config = write_config(
        home.path(),
        "[llm]\nkind = \"anthropic\"\nmodel = \"claude-haiku-4-5\"\napi_key_env = \"SKALD_TEST_KEY_NEVER_SET\"\n",
    );
    let output = Command::new(env!("CARGO_BIN_EXE_skald"))
        .arg("--home")
        .arg(home.path())
        .args(["--config", config.to_str().unwrap(), "compact", SESSION_ID])
        .env_remove("SKALD_HOME")
        .env_remove("SKALD_TEST_KEY_NEVER_SET")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let message = stderr(&output);
    assert!(
        message.contains("SKALD_TEST_KEY_NEVER_SET")
            && message.contains("not set")
            && message.contains("[llm]"),
        "{message}"
    );
    assert_eq!(entries_and_leaf(home.path()), before);
}

#[test]
fn unknown_sessions_and_missing_stores_are_errors() {
    let empty = tempfile::tempdir().unwrap();
    let output = skald(empty.path(), &["compact", SESSION_ID]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("import a transcript first"),
        "{output:?}"
    );

    let home = imported_home();
    let output = skald(home.path(), &["compact", "no-such-session"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("no session \"no-such-session\" for tenant \"default\""),
        "{output:?}"
    );
    let output = skald(home.path(), &["compact", SESSION_ID, "--tenant", "acme"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("no session"), "{output:?}");
    let output = skald(home.path(), &["compact"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "clap usage error: {output:?}"
    );
}

/// A local HTTP server that answers every request with one canned response, recording each
/// request (request line and body). It serves at most `max_requests` and stops by itself after
/// a minute.
struct ScriptedServer {
    base_url: String,
    requests: Arc<Mutex<Vec<(String, String)>>>,
}

/// How the scripted server answers.
#[derive(Clone)]
enum Reply {
    /// This status and JSON body, every time.
    Canned(u16, Value),
    /// Nothing: the connection stays open until the client gives up (or a minute passes).
    Hang,
}

fn scripted_server(reply: Reply, max_requests: usize) -> ScriptedServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let recorded = requests.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut served = 0;
        while served < max_requests && Instant::now() < deadline {
            let Ok((stream, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            stream.set_nonblocking(false).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut reader = BufReader::new(stream);
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let mut length = 0;
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                if header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap();
                    }
                }
            }
            let mut request_body = vec![0; length];
            reader.read_exact(&mut request_body).unwrap();
            recorded.lock().unwrap().push((
                request_line.trim().to_owned(),
                String::from_utf8(request_body).unwrap(),
            ));
            let mut stream = reader.into_inner();
            let (status, body) = match &reply {
                Reply::Canned(status, body) => (*status, body.to_string()),
                Reply::Hang => {
                    while Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    return;
                }
            };
            let reason = if status == 200 { "OK" } else { "Bad Request" };
            write!(
                stream,
                "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            stream.flush().unwrap();
            served += 1;
        }
    });
    ScriptedServer { base_url, requests }
}

fn completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_770_000_000,
        "model": "scripted-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 900, "completion_tokens": 60, "total_tokens": 960}
    })
}

const SCRIPTED_SUMMARY: &str = "## Decisions\n- Apply the coupon before tax (scripted).\n\n## Open TODOs\n- (none)\n\n## Constraints/Rules\n- Never edit vendor/ or config/prod.yaml.\n\n## Pending user asks\n- (none)\n\n## Exact identifiers\n- 3f9c2e1d7b6a5948";

#[test]
fn a_configured_model_writes_the_summary() {
    let home = imported_home();
    let server = scripted_server(Reply::Canned(200, completion(SCRIPTED_SUMMARY)), 8);
    // The quality guard is off so that one canned answer is accepted whatever the span holds.
    let config = write_config(
        home.path(),
        &format!(
            "[llm]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"scripted-model\"\ncontext_window_tokens = 64000\n\n[compaction.quality_guard]\nenabled = false\n",
            server.base_url
        ),
    );
    let agents_md = home.path().join("AGENTS.md");
    std::fs::write(
        &agents_md,
        "# Agents\n\n## Red Lines\n- Never force-push main.\n",
    )
    .unwrap();
    let report = json(&skald(
        home.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "compact",
            SESSION_ID,
            "--instructions",
            "Focus on the coupon regression.",
            "--agents-md",
            agents_md.to_str().unwrap(),
        ],
    ));
    assert_eq!(report["outcome"], "compacted", "{report}");
    assert_eq!(report["summarizer"], "llm:scripted-model");
    assert_eq!(report["window_tokens"], 64_000, "[llm] gives the window");
    let summary = report["summary"].as_str().unwrap();
    assert!(summary.starts_with(SCRIPTED_SUMMARY), "{summary}");
    assert!(
        summary.contains("Never force-push main."),
        "AGENTS.md's red lines are appended: {summary}"
    );

    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (line, body) = &requests[0];
    assert_eq!(line, "POST /v1/chat/completions HTTP/1.1");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["model"], "scripted-model");
    let sent = body.to_string();
    assert!(sent.contains("Checkout totals are wrong"), "{sent}");
    assert!(sent.contains("Focus on the coupon regression."), "{sent}");
    assert!(!sent.contains("\"details\""), "details reached the model");

    let context = json(&skald(
        home.path(),
        &["context", SESSION_ID, "--policy", "none"],
    ));
    let first = context["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(first.contains("Apply the coupon before tax (scripted)."));
}

#[test]
fn a_failing_model_cancels_with_a_clear_message_and_changes_nothing() {
    let home = imported_home();
    let before = entries_and_leaf(home.path());
    let server = scripted_server(
        Reply::Canned(
            400,
            json!({"error": {"message": "scripted refusal", "type": "invalid_request_error"}}),
        ),
        16,
    );
    let config = write_config(
        home.path(),
        &format!(
            "[llm]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"scripted-model\"\n",
            server.base_url
        ),
    );
    let output = skald(
        home.path(),
        &["--config", config.to_str().unwrap(), "compact", SESSION_ID],
    );
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let report = parse(&output);
    assert_eq!(report["outcome"], "cancelled");
    assert_eq!(report["reason_detail"]["kind"], "summarizer_failed");
    assert_eq!(report["checkpoint_entry_id"], Value::Null);
    let message = stderr(&output);
    assert!(
        message.contains("compaction cancelled") && message.contains("is unchanged"),
        "{message}"
    );
    assert!(!server.requests.lock().unwrap().is_empty());
    assert_eq!(entries_and_leaf(home.path()), before);
}

#[cfg(unix)]
#[test]
fn ctrl_c_abandons_the_compaction_and_changes_nothing() {
    let home = imported_home();
    let before = entries_and_leaf(home.path());
    let server = scripted_server(Reply::Hang, 1);
    let config = write_config(
        home.path(),
        &format!(
            "[llm]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"scripted-model\"\n",
            server.base_url
        ),
    );
    let child = Command::new(env!("CARGO_BIN_EXE_skald"))
        .arg("--home")
        .arg(home.path())
        .args(["--config", config.to_str().unwrap(), "compact", SESSION_ID])
        .env_remove("SKALD_HOME")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the summary request reached the server, the runtime and its Ctrl-C handler are up.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.requests.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the request never arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{output:?}");
    let report = parse(&output);
    assert_eq!(report["outcome"], "cancelled");
    assert_eq!(report["reason_detail"]["kind"], "aborted");
    assert!(stderr(&output).contains("interrupted"), "{output:?}");
    assert_eq!(entries_and_leaf(home.path()), before);
}

/// The compare report with the machine-specific path replaced.
fn stable(mut report: Value) -> Value {
    for entry in report.as_array_mut().unwrap() {
        let file = entry["file"].as_str().unwrap().replace('\\', "/");
        assert!(
            file.ends_with("tests/fixtures/claude-code/synthetic.jsonl"),
            "{file}"
        );
        entry["file"] = json!("<fixtures>/claude-code/synthetic.jsonl");
    }
    report
}

#[test]
fn compare_measures_ours_against_claude_codes_compaction() {
    let home = tempfile::tempdir().unwrap();
    let file = fixtures().join("claude-code/synthetic.jsonl");
    let report = stable(json(&skald(
        home.path(),
        &["compact", "--compare", file.to_str().unwrap()],
    )));
    let entry = &report[0];
    assert_eq!(entry["trigger"], "manual");
    assert_eq!(entry["claude_pre_tokens"], 9000);
    let summaries = entry["summaries"].as_array().unwrap();
    let names: Vec<&str> = summaries
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["claude_code", "extractive_same_length", "extractive_engine"]
    );
    assert_eq!(summaries[0]["source"], "acompact");
    assert_eq!(summaries[0]["sections"], json!([]));
    assert_eq!(summaries[1]["sections"].as_array().unwrap().len(), 5);
    assert!(summaries[1]["chars"].as_u64() <= summaries[1]["budget_chars"].as_u64());
    assert!(summaries[1]["identifiers_kept"].as_u64() > summaries[0]["identifiers_kept"].as_u64());
    assert_eq!(summaries[2]["outcome"], "compacted");
    insta::assert_snapshot!(
        "compare_synthetic_claude_code_session",
        serde_json::to_string_pretty(&report).unwrap()
    );

    // A directory gives every session with an acompact file: here the same one.
    let dir = fixtures().join("claude-code");
    let from_dir = stable(json(&skald(
        home.path(),
        &["compact", "--compare", dir.to_str().unwrap()],
    )));
    assert_eq!(from_dir, report);

    // --save-summaries writes each summary compared.
    let out = home.path().join("summaries");
    json(&skald(
        home.path(),
        &[
            "compact",
            "--compare",
            file.to_str().unwrap(),
            "--save-summaries",
            out.to_str().unwrap(),
        ],
    ));
    let claude = std::fs::read_to_string(out.join("synthetic.1.claude_code.md")).unwrap();
    assert!(claude.contains("<summary>"), "{claude}");
    let ours = std::fs::read_to_string(out.join("synthetic.1.extractive_engine.md")).unwrap();
    assert!(ours.starts_with("## Decisions"), "{ours}");
}

#[test]
fn compare_refuses_what_it_cannot_measure() {
    let home = tempfile::tempdir().unwrap();
    let uncompacted = home.path().join("plain.jsonl");
    let text = std::fs::read_to_string(fixtures().join("claude-code/synthetic.jsonl")).unwrap();
    let before_boundary: Vec<&str> = text
        .lines()
        .take_while(|line| !line.contains("compact_boundary"))
        .collect();
    std::fs::write(&uncompacted, before_boundary.join("\n")).unwrap();
    let output = skald(
        home.path(),
        &["compact", "--compare", uncompacted.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("no compact_boundary"),
        "{output:?}"
    );
    // A directory with no acompact file anywhere.
    let output = skald(
        home.path(),
        &["compact", "--compare", home.path().to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("agent-acompact-"), "{output:?}");
    // Not a Claude Code session.
    let openclaw = fixtures().join("compactable_session.jsonl");
    let output = skald(
        home.path(),
        &["compact", "--compare", openclaw.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("cannot compare"), "{output:?}");
    // A session and --compare exclude each other.
    let output = skald(
        home.path(),
        &[
            "compact",
            SESSION_ID,
            "--compare",
            openclaw.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(2));
}
