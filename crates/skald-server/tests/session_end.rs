//! A session's memory when it ends (issue 28, gap 1), over HTTP: `POST /v1/sessions/{id}/end`
//! (OpenClaw's `session_end` through the plugin, any client's end), and the idle sweep `skald
//! serve` runs for sessions whose host never says they ended.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api_support;
mod common;

use std::time::{Duration, Instant};

use api_support::*;
use common::TestServer;
use serde_json::{Value, json};

fn short_conversation() -> Value {
    json!({"messages": [
        user("I prefer dark mode in every editor.", 0),
        assistant_text("Noted: dark mode everywhere.", 1),
        user("How do I list the open ports on this box?", 2),
        assistant_text("Run `ss -tlnp`.", 3),
    ]})
}

async fn dark_mode_found(api: &Api) -> bool {
    let (status, found) = api
        .post("/v1/memory/search", json!({"query": "dark mode editor"}))
        .await;
    assert_eq!(status, 200, "{found}");
    found["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {found}"))
        .iter()
        .any(|hit| hit.to_string().contains("dark mode"))
}

#[tokio::test]
async fn ending_a_session_archives_it_once_and_bad_ends_are_refused() {
    let mut config = common::default_config();
    config.engine.memory.idle_archive_secs = 0;
    let server = TestServer::start(common::test_state(config)).await;
    let api = Api::new(server.url(""), None);
    let (status, _) = api
        .post("/v1/sessions/short/messages", short_conversation())
        .await;
    assert_eq!(status, 200);
    assert!(!dark_mode_found(&api).await);

    for (body, field) in [
        (json!({"reason": "tired"}), "reason"),
        (json!({"reason": 3}), "reason"),
        (json!({"sessionKey": "k", "whatever": true}), "whatever"),
    ] {
        let (status, answer) = api.post("/v1/sessions/short/end", body).await;
        assert_eq!(status, 400, "{answer}");
        assert!(answer.to_string().contains(field), "{answer}");
    }
    let (status, answer) = api.post("/v1/sessions/nope/end", json!({})).await;
    assert_eq!(status, 404, "{answer}");
    assert!(
        !dark_mode_found(&api).await,
        "a refused end archives nothing"
    );

    let (status, ended) = api
        .post(
            "/v1/sessions/short/end",
            json!({"reason": "new", "sessionKey": "agent:main:explicit:short", "nextSessionId": "n"}),
        )
        .await;
    assert_eq!(status, 200, "{ended}");
    assert_eq!(ended["status"], "archived", "{ended}");
    assert_eq!(ended["archive"]["status"], "done", "{ended}");
    assert_eq!(ended["archive"]["origin"]["kind"], "session_end", "{ended}");
    assert_eq!(ended["archive"]["origin"]["reason"], "new", "{ended}");
    assert!(dark_mode_found(&api).await);

    let (status, again) = api.post("/v1/sessions/short/end", json!({})).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["status"], "nothing_new", "{again}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_server_archives_a_session_left_idle_for_idle_archive_secs() {
    let mut config = common::default_config();
    config.engine.memory.idle_archive_secs = 1;
    let server = TestServer::start(common::test_state(config)).await;
    let api = Api::new(server.url(""), None);
    let (status, _) = api
        .post("/v1/sessions/left-open/messages", short_conversation())
        .await;
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dark_mode_found(&api).await {
        assert!(
            Instant::now() < deadline,
            "the idle session was not archived within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, entries) = api.get("/v1/sessions/left-open/entries").await;
    let records: Vec<&Value> = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["customType"] == "skald.memory_extraction")
        .collect();
    assert_eq!(records.len(), 1, "{entries}");
    assert_eq!(records[0]["data"]["origin"]["reason"], "idle", "{entries}");
    server.shutdown().await;
}
