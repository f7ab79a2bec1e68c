//! A web page against an open `skald serve` on the user's loopback, from a real headless
//! Chromium (Debian's `chromium`, driven by the pinned `playwright-core` of `hosts/browser`
//! running `hosts/browser/attacks.mjs`): a cross-site page sending the "simple" requests any
//! page may send (text/plain and form POSTs to the proxy, count_tokens, memory and ingest, an
//! HTML form into an iframe, a preflighted JSON POST, reads), and a DNS-rebinding page whose
//! own-origin requests reach skald under its name (reads of sessions and the dashboard, the
//! dashboard's form with the CSRF token it read, a planted memory, the proxy, an MCP session).
//!
//! The server proxies Anthropic's API with a provider key of its own (`api_key_env`), so an
//! attack that got through would spend the user's credits: the upstream counts every
//! connection. None may reach it, none may store anything, and the rebinding page may read
//! nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod dashboard_harness;

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dashboard_harness::*;
use serde_json::{Value, json};

/// What the page must never read.
const SECRET: &str = "AKIA-SKALD-TEST-SECRET-8126";

/// An Anthropic upstream that counts the connections it gets (each one an attack that reached
/// it) and answers each with a short message.
fn counting_upstream() -> (String, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counted.fetch_add(1, Ordering::SeqCst);
            let mut buffer = [0u8; 65536];
            let _ = stream.read(&mut buffer);
            let answer = json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-scripted",
                "content": [{"type": "text", "text": "credits spent"}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 2}
            })
            .to_string();
            respond(&mut stream, "application/json", &answer);
        }
    });
    (format!("http://{address}"), count)
}

/// The attacker's own site: one page for any path.
fn attacker_site() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buffer = [0u8; 8192];
            let _ = stream.read(&mut buffer);
            let page = "<!doctype html><html><body><h1>A page on another site</h1></body></html>";
            respond(&mut stream, "text/html", page);
        }
    });
    port
}

#[test]
fn a_web_page_can_neither_read_nor_change_nor_spend_through_an_open_server() {
    let (upstream, upstream_calls) = counting_upstream();
    let toml = format!(
        "[proxy.anthropic]\nbase_url = \"{upstream}\"\napi_key_env = \"SKALD_TEST_PROVIDER_KEY\"\n\
         [proxy.openai]\nbase_url = \"{upstream}/v1\"\napi_key_env = \"SKALD_TEST_PROVIDER_KEY\"\n"
    );
    let server = Server::start_configured(
        false,
        &toml,
        &[("SKALD_TEST_PROVIDER_KEY", "sk-ant-the-users-own-credits")],
    );
    let secret_session = "secrets-0001";
    let (status, _, body) = server.request(
        "POST",
        &format!("/v1/sessions/{secret_session}/messages"),
        &[("Content-Type", "application/json")],
        &json!({"message": {"role": "user", "content": format!("my AWS key is {SECRET}"),
                            "timestamp": 1_770_000_000_000_i64}})
        .to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let sessions_before = server.get("/v1/sessions", &[]).2;

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("attack-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let seen = run_browser_script(
        "attacks.mjs",
        &[
            ("SKALD", format!("http://{}", server.address)),
            (
                "ATTACKER",
                format!("http://attacker.test:{}", attacker_site()),
            ),
            ("SESSION", secret_session.to_owned()),
            ("SHOTS", shots.display().to_string()),
        ],
    );
    let cross_site = seen["crossSite"].as_array().unwrap();
    let rebinding = seen["rebinding"].as_array().unwrap();
    assert_eq!(cross_site.len(), 10, "{seen}");
    assert_eq!(rebinding.len(), 9, "{seen}");

    let mut succeeded = Vec::new();
    // The cross-site page: a read it could see, or anything it made skald do.
    for attack in cross_site {
        let readable = attack["body"].as_str().unwrap_or_default();
        if readable.contains(SECRET) || readable.contains("sessionId") {
            succeeded.push(format!("cross-site {}: read {readable}", attack["name"]));
        }
    }
    // The rebinding page: anything but a refusal.
    for attack in rebinding {
        let status = attack["status"].as_u64();
        let body = attack["body"].as_str().unwrap_or_default();
        if status != Some(403) || body.contains(SECRET) {
            succeeded.push(format!("rebinding {}: {attack}", attack["name"]));
        }
    }
    // What skald did, seen from the user's side.
    let calls = upstream_calls.load(Ordering::SeqCst);
    if calls > 0 {
        succeeded.push(format!(
            "{calls} requests reached the upstream with the user's key"
        ));
    }
    let sessions_after = server.get("/v1/sessions", &[]).2;
    if sessions_after != sessions_before {
        succeeded.push(format!("the sessions changed: {sessions_after}"));
    }
    let (_, _, memories) = server.request(
        "POST",
        "/v1/memory/search",
        &[("Content-Type", "application/json")],
        r#"{"query": "planted web page"}"#,
    );
    let memories: Value = serde_json::from_str(&memories).unwrap();
    if memories["results"]
        .as_array()
        .is_none_or(|rows| !rows.is_empty())
    {
        succeeded.push(format!("a memory was planted: {memories}"));
    }
    let (_, _, session) = server.get(&format!("/v1/sessions/{secret_session}"), &[]);
    let session: Value = serde_json::from_str(&session).unwrap();
    if session["switches"]["pauseCompaction"] != false {
        succeeded.push(format!("the dashboard's form was posted: {session}"));
    }
    eprintln!(
        "browser attacks: {} tried, {} succeeded",
        cross_site.len() + rebinding.len(),
        succeeded.len()
    );
    assert!(succeeded.is_empty(), "attacks that worked: {succeeded:#?}");
    for shot in ["attacker", "rebinding"] {
        let shot = shots.join(format!("{shot}.png"));
        assert!(
            std::fs::metadata(&shot).is_ok_and(|meta| meta.len() > 500),
            "no screenshot {}",
            shot.display()
        );
    }
}
