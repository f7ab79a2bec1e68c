//! Bad requests to the engine, memory and refs API: malformed JSON, unknown fields, wrong
//! types, an over-size body, invalid session ids, ref ids and memory URIs, messages that are
//! not AgentMessages. Each is a 4xx JSON error whose message says what was wrong, and the
//! stores are exactly as they were.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api_support;
mod common;

use api_support::*;
use common::TestServer;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// What the stores hold, as the API shows it.
async fn everything(api: &Api) -> Value {
    let (_, sessions) = api.get("/v1/sessions").await;
    let mut entries = Vec::new();
    for session in sessions["sessions"].as_array().unwrap() {
        let id = session["sessionId"].as_str().unwrap();
        let (_, session_entries) = api.get(&format!("/v1/sessions/{id}/entries")).await;
        entries.push(session_entries);
    }
    let (_, history) = api.get("/v1/memory/history?limit=1000").await;
    let (_, tree) = api.get("/v1/memory/tree?depth=24").await;
    json!({"sessions": sessions, "entries": entries, "history": history, "tree": tree})
}

fn expect(status: StatusCode, body: &Value, want: u16, words: &[&str]) {
    assert_eq!(status.as_u16(), want, "{body}");
    let text = message(body);
    assert!(body["error"]["type"].is_string(), "{body}");
    for word in words {
        assert!(text.contains(word), "{word:?} not in {text:?}");
    }
}

#[tokio::test]
async fn bad_requests_are_4xx_json_errors_that_change_nothing() {
    let mut config = common::default_config();
    config.max_body_bytes = 16 * 1024;
    let server = TestServer::start(common::test_state(config)).await;
    let api = Api::new(server.url(""), None);
    let (status, _) = api
        .post(
            "/v1/sessions/s1/messages",
            json!({"messages": [user("hello", 0), assistant_text("hi", 1)]}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = api
        .post(
            "/v1/memory/remember",
            json!({"content": "The user likes tea."}),
        )
        .await;
    assert_eq!(status, 200);
    let before = everything(&api).await;

    // Malformed JSON.
    let (status, body) = api
        .post_raw("/v1/sessions/s1/messages", r#"{"message": {"role": "user""#)
        .await;
    expect(status, &body, 400, &["JSON"]);
    // Not JSON at all: 415, so a page's cross-site "simple" request cannot reach a JSON route.
    let response = reqwest::Client::new()
        .post(server.url("/v1/sessions/s1/messages"))
        .body("message=hello")
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    expect(status, &body, 415, &["content-type: application/json"]);
    // Unknown fields, at the top and inside.
    let (status, body) = api
        .post(
            "/v1/sessions/s1/messages",
            json!({"message": user("x", 5), "mesages": []}),
        )
        .await;
    expect(status, &body, 400, &["unknown field `mesages`"]);
    let (status, body) = api
        .post(
            "/v1/sessions/s1/after-turn",
            json!({"runtimeContext": {"promptCache": {"lastCallUsage": {"inputs": 5}}}}),
        )
        .await;
    expect(status, &body, 400, &["unknown field `inputs`"]);
    let (status, body) = api
        .post(
            "/v1/memory/remember",
            json!({"content": "x", "tags": ["a"]}),
        )
        .await;
    expect(status, &body, 400, &["unknown field `tags`"]);
    // Wrong types.
    let (status, body) = api
        .post("/v1/sessions/s1/assemble", json!({"tokenBudget": "lots"}))
        .await;
    expect(status, &body, 400, &["tokenBudget", "invalid type"]);
    let (status, body) = api.post("/v1/memory/search", json!({"query": 42})).await;
    expect(status, &body, 400, &["query", "invalid type"]);
    // Not an AgentMessage: the field is named.
    let (status, body) = api
        .post(
            "/v1/sessions/s1/messages",
            json!({"messages": [user("fine", 6), {"role": "user", "content": 5}]}),
        )
        .await;
    expect(status, &body, 400, &["messages[1].content"]);
    // Neither or both of message/messages.
    let (status, body) = api.post("/v1/sessions/s1/messages", json!({})).await;
    expect(status, &body, 400, &["`message`", "`messages`"]);
    // Values out of range.
    let (status, body) = api
        .post(
            "/v1/sessions/s1/assemble",
            json!({"runtimeContext": {"modelContextWindow": 10}}),
        )
        .await;
    expect(status, &body, 400, &["modelContextWindow", "1000"]);
    let (status, body) = api
        .post("/v1/memory/search", json!({"query": "tea", "limit": 0}))
        .await;
    expect(status, &body, 400, &["limit"]);
    let (status, body) = api
        .post(
            "/v1/memory/remember",
            json!({"content": "x y z", "type": "memo"}),
        )
        .await;
    expect(status, &body, 400, &["memo", "preferences"]);
    let (status, body) = api
        .post(
            "/v1/memory/remember",
            json!({"content": "x y z", "priority": 11}),
        )
        .await;
    expect(status, &body, 400, &["priority"]);
    let (status, body) = api
        .post("/v1/memory/remember", json!({"content": "   "}))
        .await;
    expect(status, &body, 400, &["empty"]);
    let (status, body) = api
        .post(
            "/v1/sessions/s1/bootstrap",
            json!({"sessionJsonl": "not a transcript"}),
        )
        .await;
    assert!(status.is_client_error(), "{status}: {body}");
    // Over-size body.
    let huge = json!({"message": user(&"x".repeat(40_000), 7)});
    let (status, body) = api.post("/v1/sessions/s1/messages", huge).await;
    expect(status, &body, 413, &["size limit"]);
    // Invalid session ids.
    let (status, body) = api
        .post(
            "/v1/sessions/bad%20id/messages",
            json!({"message": user("x", 8)}),
        )
        .await;
    expect(status, &body, 400, &["invalid session id"]);
    let (status, body) = api.get("/v1/sessions/-dash").await;
    expect(status, &body, 400, &["invalid session id"]);
    // Invalid ref ids and slices.
    let (status, body) = api.get("/v1/refs/..%2F..%2Fetc%2Fpasswd").await;
    expect(status, &body, 400, &["not a ref id"]);
    let (status, body) = api.get(&format!("/v1/refs/{}", "A".repeat(64))).await;
    expect(status, &body, 400, &["not a ref id"]);
    let (status, body) = api
        .get(&format!("/v1/refs/{}?lines=9:2", "a".repeat(64)))
        .await;
    expect(status, &body, 400, &["lines"]);
    let (status, body) = api
        .get(&format!("/v1/refs/{}?grep=(", "a".repeat(64)))
        .await;
    expect(status, &body, 400, &["grep"]);
    let (status, body) = api
        .get(&format!("/v1/refs/{}?limit=5", "a".repeat(64)))
        .await;
    expect(status, &body, 400, &["unknown field `limit`"]);
    let (status, body) = api.get(&format!("/v1/refs/{}", "a".repeat(64))).await;
    expect(status, &body, 404, &["not found"]);
    // Invalid memory URIs and identities.
    let (status, body) = api.get("/v1/memory/read?uri=http://example.com/x").await;
    expect(
        status,
        &body,
        400,
        &["http://example.com/x", "not a memory URI"],
    );
    let (status, body) = api.get("/v1/memory/ls?uri=viking://user/../etc").await;
    expect(status, &body, 400, &["not a memory URI"]);
    let (status, body) = api
        .post("/v1/memory/forget", json!({"uri": "viking://nowhere/x"}))
        .await;
    expect(status, &body, 400, &["not a memory URI"]);
    let (status, body) = api
        .post(
            "/v1/memory/remember",
            json!({"content": "a fact", "user": "a/b"}),
        )
        .await;
    expect(status, &body, 400, &["a/b"]);
    let (status, body) = api
        .post(
            "/v1/memory/resources",
            json!({"uri": "viking://user/default", "name": "a.md", "content": "text"}),
        )
        .await;
    expect(status, &body, 400, &["viking://resources"]);
    let (status, body) = api.get("/v1/memory/ls?uri=viking://&category=tools").await;
    expect(status, &body, 400, &["not both"]);
    let (status, body) = api
        .get("/v1/memory/read?level=l9&uri=viking://resources")
        .await;
    expect(status, &body, 400, &["l9"]);

    assert_eq!(
        everything(&api).await,
        before,
        "a refused request changed the stores"
    );
    server.shutdown().await;
}

/// PUTs `body` as JSON.
async fn put(api: &Api, path: &str, body: Value) -> (StatusCode, Value) {
    let response = api
        .http
        .put(format!("{}{path}", api.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn strict_types_refuse_arrays_for_objects_wrong_host_field_types_and_messages_without_content()
 {
    let server = TestServer::open().await;
    let api = Api::new(server.url(""), None);
    let (status, _) = api
        .post(
            "/v1/sessions/s1/messages",
            json!({"messages": [user("hello", 0), assistant_text("hi", 1)]}),
        )
        .await;
    assert_eq!(status, 200);
    let before = everything(&api).await;

    // A struct read from an array of its fields in order: serde would take it.
    let (status, body) = put(&api, "/v1/sessions/s1/switches", json!([true, true])).await;
    expect(status, &body, 400, &["JSON object"]);
    let (status, body) = api
        .post("/v1/sessions/s1/messages", json!([[user("x", 5)]]))
        .await;
    expect(status, &body, 400, &["JSON object"]);

    // Host fields OpenClaw sends as objects (and citationsMode as a string).
    for (path, field, value) in [
        ("/v1/sessions/s1/assemble", "runtimeContext", json!("nope")),
        ("/v1/sessions/s1/assemble", "runtimeSettings", json!(7)),
        (
            "/v1/sessions/s1/assemble",
            "citationsMode",
            json!({"mode": "inline"}),
        ),
        ("/v1/sessions/s1/compact", "sessionTarget", json!([1])),
        ("/v1/sessions/s1/compact", "runtimeSettings", json!(true)),
        ("/v1/sessions/s1/after-turn", "sessionTarget", json!("main")),
        ("/v1/sessions/s1/bootstrap", "sessionTarget", json!(1)),
    ] {
        let mut request = json!({});
        if path.ends_with("compact") {
            request["sessionKey"] = json!("agent:main");
        }
        if path.ends_with("after-turn") {
            request["messages"] = json!([]);
            request["prePromptMessageCount"] = json!(0);
        }
        request[field] = value;
        let (status, body) = api.post(path, request).await;
        expect(status, &body, 400, &[field]);
    }
    for field in [
        "admission",
        "terminal",
        "sessionTarget",
        "runtimeSettings",
        "runtimeContext",
    ] {
        let mut request = json!({"advancementKey": "k1", "messages": [user("turn", 9)]});
        request[field] = json!("not an object");
        let (status, body) = api.post("/v1/sessions/s1/commit-turn", request).await;
        expect(status, &body, 400, &[field]);
    }

    // A message without content, on every route that takes messages.
    let empty = json!({"role": "user", "timestamp": 7});
    for (path, request) in [
        ("/v1/sessions/s1/messages", json!({"message": empty})),
        ("/v1/sessions/s1/messages", json!({"messages": [empty]})),
        (
            "/v1/sessions/s1/assemble",
            json!({"messages": [user("hello", 0), {"role": "assistant", "timestamp": 1}]}),
        ),
        (
            "/v1/sessions/s1/commit-turn",
            json!({"advancementKey": "k2", "messages": [empty]}),
        ),
    ] {
        let (status, body) = api.post(path, request).await;
        expect(status, &body, 400, &["has no content"]);
    }

    // A bad user or agent is refused by ls as by every other memory route.
    for query in ["user=a/b", "agent=a/b", "uri=viking://&user=a/b"] {
        let (status, body) = api.get(&format!("/v1/memory/ls?{query}")).await;
        expect(status, &body, 400, &["a/b"]);
    }

    assert_eq!(
        everything(&api).await,
        before,
        "a refused request changed the stores"
    );
    server.shutdown().await;
}
