//! The proxy end to end over real HTTP: reqwest → skald → a scripted upstream. Offload on the
//! way up, answers passed back byte for byte, streams relayed event by event, skald's tools run
//! by the proxy (streaming included) without the client ever seeing them, overflow recovery,
//! auth that never lets a skald key out, and bad requests that change nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod upstream;

use std::sync::Arc;

use common::{TestServer, default_config};
use futures::StreamExt;
use serde_json::{Value, json};
use skald_core::pipeline::policy::Policy;
use skald_server::{ServerConfig, Upstream as UpstreamConfig};
use tokio::sync::Notify;
use upstream::{
    Reply, Upstream, anthropic_overflow, anthropic_sse_text, anthropic_sse_text_with_id,
    anthropic_sse_tool_uses, anthropic_tool_uses, assert_no_skald_key, fetch_reply, first_ref_id,
    openai_overflow, openai_sse_text, openai_sse_text_with_id, openai_sse_tool_calls, openai_text,
    openai_tool_calls,
};

const TENANT: &str = "default";

fn config_for(upstream: &Upstream) -> ServerConfig {
    upstream.proxied(default_config())
}

async fn start(config: ServerConfig) -> TestServer {
    TestServer::start(common::test_state(config)).await
}

/// A build log of about 12,000 characters: over the `skald` policy's immediate-offload size.
fn build_log() -> String {
    (0..300)
        .map(|line| format!("2026-01-01 INFO step {line:03} compiled module_{line}.rs ok\n"))
        .collect()
}

const BASH_TOOL_OPENAI: &str = r#"{"type": "function", "function": {"name": "bash", "description": "Run a shell command", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}"#;

/// An OpenAI conversation whose tool result is the build log, ending with a question.
fn openai_request(extra_messages: &[Value]) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a build assistant."}),
        json!({"role": "user", "content": "Run the build and tell me how it went."}),
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_build", "type": "function",
             "function": {"name": "bash", "arguments": "{\"command\":\"make\"}"}}]}),
        json!({"role": "tool", "tool_call_id": "call_build", "content": build_log()}),
        json!({"role": "assistant", "content": "The build finished."}),
        json!({"role": "user", "content": "Did step 150 compile?"}),
    ];
    messages.extend(extra_messages.iter().cloned());
    json!({
        "model": "gpt-test",
        "messages": messages,
        "tools": [serde_json::from_str::<Value>(BASH_TOOL_OPENAI).unwrap()],
        "tool_choice": "auto",
        "temperature": 0.2,
        "metadata": {"run": "e2e"},
        "user": "tester"
    })
}

/// The same conversation in Anthropic's API.
fn anthropic_request(extra_messages: &[Value]) -> Value {
    let mut messages = vec![
        json!({"role": "user", "content": "Run the build and tell me how it went."}),
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_build", "name": "bash", "input": {"command": "make"}}]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_build", "content": build_log()}]}),
        json!({"role": "assistant", "content": "The build finished."}),
        json!({"role": "user", "content": "Did step 150 compile?"}),
    ];
    messages.extend(extra_messages.iter().cloned());
    json!({
        "model": "claude-test",
        "max_tokens": 1024,
        "system": "You are a build assistant.",
        "messages": messages,
        "tools": [{"name": "bash", "description": "Run a shell command",
                   "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
        "metadata": {"user_id": "tester"}
    })
}

async fn post(server: &TestServer, path: &str, session: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(server.url(path))
        .header("x-skald-session", session)
        .header("authorization", "Bearer sk-provider-123")
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn metrics(server: &TestServer) -> String {
    reqwest::get(server.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The value of a metric line that starts with `prefix`.
fn metric(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find(|line| line.starts_with(prefix))
        .and_then(|line| line.rsplit(' ').next())
        .map_or(0.0, |value| value.parse().unwrap())
}

/// Reads a streamed body to its end.
async fn read_all(response: reqwest::Response) -> String {
    String::from_utf8(response.bytes().await.unwrap().to_vec()).unwrap()
}

/// The `data:` payloads of an SSE body, parsed (`[DONE]` as a string).
fn sse_data(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|event| {
            event
                .lines()
                .find_map(|line| line.strip_prefix("data: "))
                .map(|data| serde_json::from_str(data).unwrap_or(Value::String(data.to_owned())))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Passthrough
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_big_tool_result_goes_up_as_a_ref_placeholder_with_the_fetch_tool_and_every_client_field()
{
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let response = post(
        &server,
        "/v1/chat/completions",
        "s-offload",
        &openai_request(&[]),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-request-id"], "req-upstream");
    let answer: Value = response.json().await.unwrap();
    // The upstream's answer, unchanged.
    assert_eq!(answer, openai_text("ok"));

    let sent = upstream.requests();
    assert_eq!(sent.len(), 1);
    let body = &sent[0].body;
    assert_eq!(sent[0].path, "/v1/chat/completions");
    for field in ["model", "tool_choice", "temperature", "metadata", "user"] {
        assert_eq!(body[field], openai_request(&[])[field], "{field}");
    }
    let tool_message = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["tool_call_id"] == "call_build")
        .unwrap();
    let content = tool_message["content"].as_str().unwrap();
    assert!(content.contains("[REF_ID: "), "{content}");
    assert!(content.len() < 2_000, "{} chars went up", content.len());
    let names = sent[0].tool_names();
    assert_eq!(names[0], "bash");
    assert!(
        names.contains(&"fetch_original_data".to_owned()),
        "{names:?}"
    );
    // The REF_ID instruction joined the client's system prompt.
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are a build assistant."), "{system}");
    assert!(system.contains("fetch_original_data"), "{system}");

    // The original was stored before the placeholder went out.
    let id = first_ref_id(body).unwrap();
    let payload = server
        .state
        .engine
        .read_ref(
            &tenant_named(TENANT),
            &skald_core::refs::RefId::parse(&id).unwrap(),
        )
        .unwrap();
    assert!(format!("{payload:?}").contains("module_150.rs"));
    let text = metrics(&server).await;
    assert_eq!(metric(&text, "skald_refs_stored_total"), 1.0);
    assert!(
        metric(&text, "skald_tokens_saved_total") > 1_000.0,
        "{text}"
    );
}

#[tokio::test]
async fn the_conversation_is_stored_once_and_a_repeated_request_writes_nothing() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    post(
        &server,
        "/v1/chat/completions",
        "s-sync",
        &openai_request(&[]),
    )
    .await;
    let first = server
        .state
        .engine
        .session_info(&tenant_named(TENANT), &session_named("s-sync"))
        .unwrap();
    // The conversation without the system prompt: that is the host's, sent with every request.
    assert_eq!(first.message_count, 5);

    // The same request again (a client retry): nothing new, nothing written.
    post(
        &server,
        "/v1/chat/completions",
        "s-sync",
        &openai_request(&[]),
    )
    .await;
    let again = server
        .state
        .engine
        .session_info(&tenant_named(TENANT), &session_named("s-sync"))
        .unwrap();
    assert_eq!(again.entry_count, first.entry_count);
    assert_eq!(again.updated_at_ms, first.updated_at_ms);

    // The next turn: the answer the client got and its new question, each stored once.
    let next = openai_request(&[
        json!({"role": "assistant", "content": "ok"}),
        json!({"role": "user", "content": "And step 151?"}),
    ]);
    post(&server, "/v1/chat/completions", "s-sync", &next).await;
    let after = server
        .state
        .engine
        .session_info(&tenant_named(TENANT), &session_named("s-sync"))
        .unwrap();
    assert_eq!(after.message_count, 7);
    let context = server
        .state
        .engine
        .stored_context(&tenant_named(TENANT), &session_named("s-sync"))
        .unwrap();
    assert_eq!(context.iter().filter(|m| m.plain_text() == "ok").count(), 1);
}

#[tokio::test]
async fn a_system_reminder_later_in_the_conversation_reaches_the_upstream_once() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let request = openai_request(&[
        json!({"role": "assistant", "content": "It did."}),
        json!({"role": "system", "content": "Reminder: answer in one line."}),
        json!({"role": "user", "content": "And step 151?"}),
    ]);
    let response = post(&server, "/v1/chat/completions", "s-reminder", &request).await;
    assert_eq!(response.status(), 200);
    post(&server, "/v1/chat/completions", "s-reminder", &request).await;
    for sent in upstream.requests() {
        let messages = sent.body["messages"].as_array().unwrap();
        let systems: Vec<&str> = messages
            .iter()
            .filter(|m| m["role"] == "system")
            .filter_map(|m| m["content"].as_str())
            .collect();
        assert_eq!(systems.len(), 2, "{systems:?}");
        assert!(systems[0].starts_with("You are a build assistant."));
        assert_eq!(systems[1], "Reminder: answer in one line.");
        let reminder = messages
            .iter()
            .position(|m| m["role"] == "system" && m["content"] == "Reminder: answer in one line.")
            .unwrap();
        assert_eq!(messages[reminder + 1]["content"], "And step 151?");
    }
}

#[tokio::test]
async fn without_a_session_header_the_session_is_derived_from_the_opening() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let client = reqwest::Client::new();
    for extra in [
        vec![],
        vec![
            json!({"role": "assistant", "content": "ok"}),
            json!({"role": "user", "content": "more"}),
        ],
    ] {
        let response = client
            .post(server.url("/v1/chat/completions"))
            .json(&openai_request(&extra))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let sessions = server
        .state
        .engine
        .session_infos(&tenant_named(TENANT))
        .unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert!(sessions[0].id.starts_with("conv-"));
    assert_eq!(sessions[0].message_count, 7);
}

#[tokio::test]
async fn an_openai_stream_is_relayed_event_by_event_without_buffering() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let gate = Arc::new(Notify::new());
    let events = openai_sse_text(&["Hel", "lo"]);
    upstream.push(Reply::GatedSse {
        first: events[..2].to_vec(),
        gate: gate.clone(),
        rest: events[2..].to_vec(),
    });
    let mut request = openai_request(&[]);
    request["stream"] = json!(true);
    request["stream_options"] = json!({"include_usage": true});
    let response = post(&server, "/v1/chat/completions", "s-stream", &request).await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut body = response.bytes_stream();
    // The upstream holds the rest back until the client has the first piece: the proxy cannot
    // be waiting for the whole answer.
    let mut received = String::new();
    while !received.contains("Hel") {
        let chunk = body.next().await.unwrap().unwrap();
        received.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(!received.contains("lo\""), "{received}");
    gate.notify_one();
    while let Some(chunk) = body.next().await {
        received.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    // Nothing to change: the client got the upstream's bytes.
    let expected: String = events.iter().map(|event| format!("{event}\n\n")).collect();
    assert_eq!(received, expected);
    assert_eq!(
        upstream.requests()[0].body["stream_options"],
        json!({"include_usage": true})
    );
}

#[tokio::test]
async fn an_anthropic_stream_is_relayed_event_by_event_without_buffering() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let gate = Arc::new(Notify::new());
    let events = anthropic_sse_text(&["Hel", "lo"]);
    upstream.push(Reply::GatedSse {
        first: events[..4].to_vec(),
        gate: gate.clone(),
        rest: events[4..].to_vec(),
    });
    let mut request = anthropic_request(&[]);
    request["stream"] = json!(true);
    let response = post(&server, "/v1/messages", "s-astream", &request).await;
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut received = String::new();
    while !received.contains("Hel") {
        let chunk = body.next().await.unwrap().unwrap();
        received.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(!received.contains("message_stop"), "{received}");
    gate.notify_one();
    while let Some(chunk) = body.next().await {
        received.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    let expected: String = events.iter().map(|event| format!("{event}\n\n")).collect();
    assert_eq!(received, expected);
    let sent = &upstream.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.body["max_tokens"], 1024);
    assert_eq!(sent.body["metadata"], json!({"user_id": "tester"}));
    assert!(
        sent.body["system"]
            .to_string()
            .contains("You are a build assistant.")
    );
}

// ---------------------------------------------------------------------------------------------
// Tool interception
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_fetch_call_is_run_by_the_proxy_and_the_client_only_sees_the_final_answer() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
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
    let response = post(
        &server,
        "/v1/chat/completions",
        "s-fetch",
        &openai_request(&[]),
    )
    .await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer, openai_text("Step 150 compiled module_150.rs."));

    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    let messages = sent[1].body["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(
        messages[n - 2]["tool_calls"][0]["function"]["name"],
        "fetch_original_data"
    );
    assert_eq!(messages[n - 1]["role"], "tool");
    assert_eq!(messages[n - 1]["tool_call_id"], "call_fetch");
    let fetched = messages[n - 1]["content"].as_str().unwrap();
    assert!(
        fetched.contains("step 150 compiled module_150.rs ok"),
        "{fetched}"
    );
    assert_eq!(sent[1].body["temperature"], 0.2);
    let text = metrics(&server).await;
    assert_eq!(metric(&text, "skald_proxy_tool_interceptions_total"), 1.0);

    // The next request: the client's history has only the final answer; the model's context
    // keeps the fetch it made, in its place, and nothing is stored twice.
    let next = openai_request(&[
        json!({"role": "assistant", "content": "Step 150 compiled module_150.rs."}),
        json!({"role": "user", "content": "Thanks."}),
    ]);
    post(&server, "/v1/chat/completions", "s-fetch", &next).await;
    let third = &upstream.requests()[2].body;
    let messages = third["messages"].as_array().unwrap();
    let fetch = messages
        .iter()
        .position(|m| m["tool_calls"][0]["id"] == "call_fetch")
        .unwrap();
    assert_eq!(messages[fetch + 1]["tool_call_id"], "call_fetch");
    assert_eq!(
        messages[fetch + 2]["content"],
        "Step 150 compiled module_150.rs."
    );
    assert_eq!(messages[fetch + 3]["content"], "Thanks.");
    assert_eq!(messages.len(), fetch + 4);
    let answers = messages
        .iter()
        .filter(|m| m["content"] == "Step 150 compiled module_150.rs.")
        .count();
    assert_eq!(answers, 1);
}

#[tokio::test]
async fn tool_statistics_count_the_clients_results_once_and_skalds_own_calls() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
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
    post(
        &server,
        "/v1/chat/completions",
        "s-stats",
        &openai_request(&[]),
    )
    .await;
    // The same conversation again: its bash result is not new and is not counted twice.
    post(
        &server,
        "/v1/chat/completions",
        "s-stats",
        &openai_request(&[]),
    )
    .await;
    let (stats, problems) = server
        .state
        .engine
        .tool_stats(&tenant_named(TENANT), "default")
        .unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let calls = |tool: &str| stats.iter().find(|s| s.tool == tool).map(|s| s.calls);
    assert_eq!(calls("bash"), Some(1), "{stats:?}");
    assert_eq!(calls("fetch_original_data"), Some(1), "{stats:?}");
}

#[tokio::test]
async fn a_streamed_fetch_call_never_reaches_the_client_and_the_stream_continues() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    upstream.push(fetch_reply(|id| {
        Reply::Sse(openai_sse_tool_calls(
            "chatcmpl-a",
            "Let me look. ",
            &[(
                "call_fetch",
                "fetch_original_data",
                json!({"ref_ids": [id]}),
            )],
        ))
    }));
    upstream.push(Reply::Sse(openai_sse_text_with_id(
        "chatcmpl-b",
        &["Found ", "it."],
    )));
    let mut request = openai_request(&[]);
    request["stream"] = json!(true);
    let response = post(&server, "/v1/chat/completions", "s-sfetch", &request).await;
    assert_eq!(response.status(), 200);
    let body = read_all(response).await;
    assert!(!body.contains("fetch_original_data"), "{body}");
    assert!(!body.contains("tool_calls"), "{body}");
    let data = sse_data(&body);
    assert_eq!(data.iter().filter(|d| **d == "[DONE]").count(), 1);
    assert_eq!(data.last().unwrap(), "[DONE]");
    let chunks: Vec<&Value> = data.iter().filter(|d| d.is_object()).collect();
    assert!(
        chunks.iter().all(|chunk| chunk["id"] == "chatcmpl-a"),
        "{body}"
    );
    let roles = chunks
        .iter()
        .filter(|chunk| chunk["choices"][0]["delta"].get("role").is_some())
        .count();
    assert_eq!(roles, 1);
    let text: String = chunks
        .iter()
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str())
        .collect();
    // The text after the hidden round starts a new paragraph instead of running on.
    assert_eq!(text, "Let me look. \n\nFound it.");
    let finishes: Vec<&Value> = chunks
        .iter()
        .map(|chunk| &chunk["choices"][0]["finish_reason"])
        .filter(|reason| !reason.is_null())
        .collect();
    assert_eq!(finishes, [&json!("stop")]);

    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    let last = sent[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("module_150.rs ok")
    );
    assert_eq!(sent[1].body["stream"], true);
}

#[tokio::test]
async fn an_anthropic_streamed_fetch_is_one_message_with_renumbered_blocks() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    upstream.push(fetch_reply(|id| {
        Reply::Sse(anthropic_sse_tool_uses(
            "msg_a",
            "Let me look.",
            &[(
                "toolu_fetch",
                "fetch_original_data",
                json!({"ref_ids": [id]}),
            )],
        ))
    }));
    upstream.push(Reply::Sse(anthropic_sse_text_with_id(
        "msg_b",
        &["Found it."],
    )));
    let mut request = anthropic_request(&[]);
    request["stream"] = json!(true);
    let response = post(&server, "/v1/messages", "s-asfetch", &request).await;
    let body = read_all(response).await;
    assert!(!body.contains("fetch_original_data"), "{body}");
    assert!(!body.contains("tool_use"), "{body}");
    let data = sse_data(&body);
    let kinds: Vec<&str> = data.iter().map(|d| d["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "message_start").count(), 1);
    assert_eq!(kinds.iter().filter(|k| **k == "message_stop").count(), 1);
    assert_eq!(kinds.first(), Some(&"message_start"));
    assert_eq!(kinds.last(), Some(&"message_stop"));
    let starts: Vec<(u64, &str)> = data
        .iter()
        .filter(|d| d["type"] == "content_block_start")
        .map(|d| {
            (
                d["index"].as_u64().unwrap(),
                d["content_block"]["type"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(starts, [(0, "text"), (1, "text")]);
    let deltas: Vec<u64> = data
        .iter()
        .filter(|d| d["type"] == "content_block_delta")
        .map(|d| d["index"].as_u64().unwrap())
        .collect();
    assert_eq!(deltas, [0, 1]);
    let stop = data.iter().find(|d| d["type"] == "message_delta").unwrap();
    assert_eq!(stop["delta"]["stop_reason"], "end_turn");

    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    let messages = sent[1].body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["tool_use_id"], "toolu_fetch");
}

#[tokio::test]
async fn a_mixed_answer_keeps_the_clients_tool_and_the_next_context_keeps_skalds() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    upstream.push(fetch_reply(|id| {
        Reply::Json(
            200,
            anthropic_tool_uses(
                Some("Checking."),
                &[
                    (
                        "toolu_fetch",
                        "fetch_original_data",
                        json!({"ref_ids": [id]}),
                    ),
                    ("toolu_ls", "bash", json!({"command": "ls"})),
                ],
            ),
        )
    }));
    let response = post(&server, "/v1/messages", "s-mixed", &anthropic_request(&[])).await;
    let answer: Value = response.json().await.unwrap();
    let content = answer["content"].as_array().unwrap();
    assert_eq!(content.len(), 2, "{answer}");
    assert_eq!(content[0]["text"], "Checking.");
    assert_eq!(content[1]["name"], "bash");
    assert_eq!(answer["stop_reason"], "tool_use");
    assert_eq!(upstream.request_count(), 1);

    // The client runs its tool and comes back.
    let next = anthropic_request(&[
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_ls", "name": "bash", "input": {"command": "ls"}}]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_ls", "content": "Makefile"}]}),
    ]);
    post(&server, "/v1/messages", "s-mixed", &next).await;
    let sent = upstream.requests();
    let messages = sent[1].body["messages"].as_array().unwrap();
    let n = messages.len();
    // The hidden turn carries the answer's text (and would carry its thinking) before skald's
    // call, as the model said it.
    assert_eq!(messages[n - 4]["content"][0]["text"], "Checking.");
    assert_eq!(messages[n - 4]["content"][1]["id"], "toolu_fetch");
    assert_eq!(messages[n - 3]["content"][0]["tool_use_id"], "toolu_fetch");
    assert!(
        messages[n - 3]["content"][0]["content"]
            .to_string()
            .contains("module_150.rs ok")
    );
    assert_eq!(messages[n - 2]["content"][1]["id"], "toolu_ls");
    assert_eq!(messages[n - 1]["content"][0]["tool_use_id"], "toolu_ls");
}

#[tokio::test]
async fn a_tool_the_client_defines_itself_is_never_intercepted() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let mut request = openai_request(&[]);
    request["tools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "function", "function": {
        "name": "fetch_original_data", "description": "the client's own",
        "parameters": {"type": "object"}}}));
    upstream.push(Reply::Json(
        200,
        openai_tool_calls(&[("call_x", "fetch_original_data", json!({"ids": ["x"]}))]),
    ));
    let answer: Value = post(&server, "/v1/chat/completions", "s-own", &request)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        answer["choices"][0]["message"]["tool_calls"][0]["id"],
        "call_x"
    );
    let names = upstream.requests()[0].tool_names();
    assert_eq!(
        names.iter().filter(|n| *n == "fetch_original_data").count(),
        1
    );
}

// ---------------------------------------------------------------------------------------------
// Overflow
// ---------------------------------------------------------------------------------------------

fn overflow_config(upstream: &Upstream) -> ServerConfig {
    let mut config = config_for(upstream);
    config.engine.policy = Policy::preset("none").unwrap();
    config.engine.window_tokens = 8_192;
    config.engine.compaction.reserve_tokens = 512;
    config.engine.memory.enabled = false;
    config
}

/// Six turns, the first three with 8,000-character logs: about 6,600 estimated tokens.
fn long_openai_request() -> Value {
    let mut messages = vec![json!({"role": "system", "content": "You are a build assistant."})];
    for (turn, size) in [8_000, 8_000, 8_000, 300, 300, 300].iter().enumerate() {
        let log: String = (0..)
            .map(|line| format!("build {turn} line {line}: linking /srv/app/src/main_{turn}.rs\n"))
            .scan(0, |len, line| {
                *len += line.len();
                (*len <= *size).then_some(line)
            })
            .collect();
        messages.push(json!({"role": "user", "content": format!("Step {turn}: check the build log for job {turn}.")}));
        messages.push(json!({"role": "assistant", "content": format!("Reading build {turn}."),
            "tool_calls": [{"id": format!("call_{turn}"), "type": "function",
                            "function": {"name": "bash", "arguments": format!("{{\"command\":\"cat build-{turn}.log\"}}")}}]}));
        messages
            .push(json!({"role": "tool", "tool_call_id": format!("call_{turn}"), "content": log}));
        messages.push(json!({"role": "assistant", "content": format!("Build {turn} fails to link main_{turn}.rs.")}));
    }
    messages.push(json!({"role": "user", "content": "Which builds failed, and why?"}));
    json!({"model": "gpt-test", "messages": messages,
           "tools": [serde_json::from_str::<Value>(BASH_TOOL_OPENAI).unwrap()]})
}

#[tokio::test]
async fn an_upstream_overflow_is_compacted_and_retried_transparently() {
    let upstream = Upstream::start().await;
    let server = start(overflow_config(&upstream)).await;
    upstream.push(openai_overflow());
    upstream.push(Reply::Json(200, openai_text("Every build fails to link.")));
    let response = post(
        &server,
        "/v1/chat/completions",
        "s-overflow",
        &long_openai_request(),
    )
    .await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer, openai_text("Every build fails to link."));

    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    let first = sent[0].body.to_string().len();
    let second = sent[1].body.to_string().len();
    assert!(second < first / 2, "retry {second} bytes, first {first}");
    // The retry starts with the client's system prompt, then the summary.
    let messages = sent[1].body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["content"], "You are a build assistant.");
    assert!(
        messages[1]["content"].to_string().contains("summary"),
        "{}",
        messages[1]
    );
    assert_eq!(
        messages.last().unwrap()["content"],
        "Which builds failed, and why?"
    );
    let text = metrics(&server).await;
    assert_eq!(
        metric(
            &text,
            "skald_proxy_overflow_recoveries_total{outcome=\"compacted\"}"
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, "skald_compactions_total{outcome=\"compacted\"}"),
        1.0
    );
    // The compaction is a checkpoint in the session: nothing the client sent was lost (the
    // system prompt is the host's, not the session's).
    let info = server
        .state
        .engine
        .session_info(&tenant_named(TENANT), &session_named("s-overflow"))
        .unwrap();
    assert_eq!(info.message_count, 25);
}

/// The two-threshold upload (seed 002) runs in the proxy as in `after-turn`: a conversation at
/// half the window starts a background upload of its oldest turns; once it is done, the next
/// request no longer carries them (a checkpoint took them out), and memory holds what they said.
/// A request's model sets the window its thresholds are measured against: the model's
/// `[models."name"]` entry, else its family's known window, else the default (issue 28: one
/// window for every proxied model gave a 128k or 1M model the wrong thresholds).
#[tokio::test]
async fn the_requests_model_sets_the_window_its_thresholds_are_measured_against() {
    let upstream = Upstream::start().await;
    let mut config = config_for(&upstream);
    config.engine.policy = Policy::preset("none").unwrap();
    // The same 6,600 estimated tokens: 55 % of a 12,000-token window, 3 % of the default and
    // 5 % of gpt-4o's 128,000.
    config.engine.window_tokens = 200_000;
    config
        .engine
        .model_windows
        .insert("small-finetune".into(), 12_000);
    config.engine.compaction.reserve_tokens = 512;
    let server = start(config).await;
    let started = |text: &str| metric(text, "skald_memory_uploads_total{outcome=\"started\"}");
    for (session, model, uploads) in [
        ("s-unknown-model", "gpt-test", 0.0),
        ("s-known-family", "gpt-4o-2024-08-06", 0.0),
        ("s-configured-model", "small-finetune", 1.0),
    ] {
        upstream.push(Reply::Json(200, openai_text("Builds 0 to 2 fail.")));
        let mut request = long_openai_request();
        request["model"] = json!(model);
        let response = post(&server, "/v1/chat/completions", session, &request).await;
        assert_eq!(response.status(), 200, "{model}");
        assert_eq!(started(&metrics(&server).await), uploads, "{model}");
    }
}

#[tokio::test]
async fn at_half_the_window_the_oldest_turns_go_to_memory_and_leave_the_next_request() {
    let upstream = Upstream::start().await;
    let mut config = config_for(&upstream);
    config.engine.policy = Policy::preset("none").unwrap();
    // About 6,600 estimated tokens: 55 % of the window, below compaction's threshold.
    config.engine.window_tokens = 12_000;
    config.engine.compaction.reserve_tokens = 512;
    let server = start(config).await;
    upstream.push(Reply::Json(200, openai_text("Builds 0 to 2 fail.")));
    upstream.push(Reply::Json(200, openai_text("Build 5 passes.")));
    let mut request = long_openai_request();
    let response = post(&server, "/v1/chat/completions", "s-upload", &request).await;
    assert_eq!(response.status(), 200);
    for _ in 0..500 {
        if !server
            .state
            .engine
            .upload_running(&tenant_named(TENANT), &session_named("s-upload"))
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        !server
            .state
            .engine
            .upload_running(&tenant_named(TENANT), &session_named("s-upload"))
    );

    let messages = request["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": "Builds 0 to 2 fail."}));
    messages.push(json!({"role": "user", "content": "And build 5?"}));
    let response = post(&server, "/v1/chat/completions", "s-upload", &request).await;
    assert_eq!(response.status(), 200);

    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    let first = &sent[0].body["messages"];
    let second = &sent[1].body["messages"];
    let results = |messages: &Value| -> Vec<String> {
        messages
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|message| message["tool_call_id"].as_str().map(str::to_owned))
            .filter(|id| id.starts_with("call_"))
            .collect()
    };
    assert_eq!(
        results(first),
        ["call_0", "call_1", "call_2", "call_3", "call_4", "call_5"]
    );
    // The oldest turns left the request (what they said is in memory, where recall finds it),
    // a summary stands in for them, and the recent turns are as they were.
    assert_eq!(results(second), ["call_4", "call_5"]);
    assert!(
        second[1]["content"]
            .to_string()
            .contains("compacted into the following summary"),
        "{}",
        second[1]
    );
    assert_eq!(second[0]["role"], "system");
    assert!(
        second[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You are a build assistant.")
    );
    assert_eq!(
        second
            .as_array()
            .unwrap()
            .iter()
            .rfind(|message| message["role"] == "user")
            .unwrap()["content"],
        "And build 5?"
    );
    let text = metrics(&server).await;
    assert_eq!(
        metric(&text, "skald_memory_uploads_total{outcome=\"started\"}"),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, "skald_memory_uploads_total{outcome=\"completed\"}"),
        1.0,
        "{text}"
    );
    // Nothing the client sent was lost: every message is in the session.
    let info = server
        .state
        .engine
        .session_info(&tenant_named(TENANT), &session_named("s-upload"))
        .unwrap();
    assert!(info.message_count >= 27, "{info:?}");
}

#[tokio::test]
async fn an_anthropic_overflow_in_a_stream_request_is_recovered_before_the_stream_starts() {
    let upstream = Upstream::start().await;
    let server = start(overflow_config(&upstream)).await;
    upstream.push(anthropic_overflow());
    upstream.push(Reply::Sse(anthropic_sse_text(&["Every build fails."])));
    let openai = long_openai_request();
    // The same history in Anthropic's form.
    let mut messages = Vec::new();
    for message in openai["messages"].as_array().unwrap().iter().skip(1) {
        let converted = match message["role"].as_str().unwrap() {
            "tool" => json!({"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": message["tool_call_id"], "content": message["content"]}]}),
            "assistant" if message.get("tool_calls").is_some() => {
                let call = &message["tool_calls"][0];
                json!({"role": "assistant", "content": [
                    {"type": "text", "text": message["content"]},
                    {"type": "tool_use", "id": call["id"], "name": "bash",
                     "input": serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap()}]})
            }
            _ => message.clone(),
        };
        messages.push(converted);
    }
    let request = json!({"model": "claude-test", "max_tokens": 512, "stream": true,
        "system": "You are a build assistant.", "messages": messages});
    let response = post(&server, "/v1/messages", "s-aoverflow", &request).await;
    assert_eq!(response.status(), 200);
    let body = read_all(response).await;
    assert!(body.contains("Every build fails."), "{body}");
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    assert!(sent[1].body.to_string().len() < sent[0].body.to_string().len() / 2);
}

#[tokio::test]
async fn an_upstream_error_that_is_not_an_overflow_comes_back_as_it_was() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let error = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}});
    upstream.push(Reply::Json(401, error.clone()));
    let response = post(
        &server,
        "/v1/chat/completions",
        "s-err",
        &openai_request(&[]),
    )
    .await;
    assert_eq!(response.status(), 401);
    assert_eq!(response.json::<Value>().await.unwrap(), error);
    assert_eq!(upstream.request_count(), 1);
}

// ---------------------------------------------------------------------------------------------
// Auth
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn with_the_skald_key_in_its_own_header_the_clients_provider_key_passes_through() {
    let upstream = Upstream::start().await;
    let state = common::test_state(config_for(&upstream));
    let key = state.keys.create(&tenant_named("acme"), "proxy").unwrap();
    let server = TestServer::start(state).await;
    let client = reqwest::Client::new();
    let response = client
        .post(server.url("/v1/chat/completions"))
        .header("x-skald-key", &key.secret)
        .header("authorization", "Bearer sk-provider-123")
        .header("openai-organization", "org-test")
        .json(&openai_request(&[]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let sent = &upstream.requests()[0];
    assert_eq!(sent.header("authorization"), Some("Bearer sk-provider-123"));
    assert_eq!(sent.header("openai-organization"), Some("org-test"));
    assert_no_skald_key(&upstream, &key.secret);
    // The session is the key's tenant's.
    assert_eq!(
        server
            .state
            .engine
            .session_infos(&tenant_named("acme"))
            .unwrap()
            .len(),
        1
    );
    assert!(
        server
            .state
            .engine
            .session_infos(&tenant_named(TENANT))
            .unwrap()
            .is_empty()
    );

    let refused = client
        .post(server.url("/v1/chat/completions"))
        .header("authorization", "Bearer sk-provider-123")
        .json(&openai_request(&[]))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(upstream.request_count(), 1);
}

#[tokio::test]
async fn with_the_skald_key_as_the_provider_key_skald_sends_its_configured_key() {
    let upstream = Upstream::start().await;
    let mut config = config_for(&upstream);
    config.openai.as_mut().unwrap().api_key = Some("sk-openai-configured".to_owned());
    config.anthropic.as_mut().unwrap().api_key = Some("sk-ant-configured".to_owned());
    let state = common::test_state(config);
    let key = state.keys.create(&tenant_named("acme"), "virtual").unwrap();
    let server = TestServer::start(state).await;
    let client = reqwest::Client::new();
    let openai = client
        .post(server.url("/v1/chat/completions"))
        .bearer_auth(&key.secret)
        .json(&openai_request(&[]))
        .send()
        .await
        .unwrap();
    assert_eq!(openai.status(), 200);
    let anthropic = client
        .post(server.url("/v1/messages"))
        .header("x-api-key", &key.secret)
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "tools-2024-04-04")
        .json(&anthropic_request(&[]))
        .send()
        .await
        .unwrap();
    assert_eq!(anthropic.status(), 200);
    let sent = upstream.requests();
    assert_eq!(
        sent[0].header("authorization"),
        Some("Bearer sk-openai-configured")
    );
    assert_eq!(sent[1].header("x-api-key"), Some("sk-ant-configured"));
    assert_eq!(sent[1].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent[1].header("anthropic-beta"), Some("tools-2024-04-04"));
    assert_no_skald_key(&upstream, &key.secret);
}

#[tokio::test]
async fn a_skald_bearer_key_without_a_configured_provider_key_is_refused_before_anything_moves() {
    let upstream = Upstream::start().await;
    let state = common::test_state(config_for(&upstream));
    let key = state.keys.create(&tenant_named("acme"), "virtual").unwrap();
    let server = TestServer::start(state).await;
    let response = reqwest::Client::new()
        .post(server.url("/v1/chat/completions"))
        .bearer_auth(&key.secret)
        .json(&openai_request(&[]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    let body: Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("api_key") && message.contains("[proxy.openai]"),
        "{message}"
    );
    assert_eq!(upstream.request_count(), 0);
    assert!(
        server
            .state
            .engine
            .session_infos(&tenant_named("acme"))
            .unwrap()
            .is_empty()
    );
}

// ---------------------------------------------------------------------------------------------
// Bad requests
// ---------------------------------------------------------------------------------------------

/// Sends a raw body and returns the status and error message.
async fn refused(
    server: &TestServer,
    path: &str,
    body: Vec<u8>,
    session: Option<&str>,
) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(server.url(path))
        .header("content-type", "application/json")
        .body(body);
    if let Some(session) = session {
        request = request.header("x-skald-session", session);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    (
        status,
        body["error"]["message"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn bad_requests_get_a_clear_error_and_change_nothing() {
    let upstream = Upstream::start().await;
    let mut config = config_for(&upstream);
    config.max_body_bytes = 64 * 1024;
    config.anthropic = None;
    let server = start(config).await;

    let (status, message) = refused(
        &server,
        "/v1/chat/completions",
        b"{\"messages\": [".to_vec(),
        None,
    )
    .await;
    assert_eq!(status, 400);
    assert!(message.contains("not JSON"), "{message}");

    let (status, message) = refused(
        &server,
        "/v1/chat/completions",
        br#"{"model": "gpt-test", "messages": [{"content": "no role"}]}"#.to_vec(),
        None,
    )
    .await;
    assert_eq!(status, 400);
    assert!(message.contains("messages[0]"), "{message}");

    let big = openai_request(&[json!({"role": "user", "content": "x".repeat(70_000)})]);
    let (status, message) = refused(
        &server,
        "/v1/chat/completions",
        serde_json::to_vec(&big).unwrap(),
        None,
    )
    .await;
    assert_eq!(status, 413);
    assert!(message.contains("size limit"), "{message}");

    let (status, message) = refused(
        &server,
        "/v1/messages",
        serde_json::to_vec(&anthropic_request(&[])).unwrap(),
        None,
    )
    .await;
    assert_eq!(status, 422);
    assert!(
        message.contains("[proxy.anthropic]") && message.contains("base_url"),
        "{message}"
    );

    let (status, message) = refused(
        &server,
        "/v1/chat/completions",
        serde_json::to_vec(&openai_request(&[])).unwrap(),
        Some("../etc/passwd"),
    )
    .await;
    assert_eq!(status, 400);
    assert!(message.contains("x-skald-session"), "{message}");

    assert_eq!(upstream.request_count(), 0);
    assert!(
        server
            .state
            .engine
            .session_infos(&tenant_named(TENANT))
            .unwrap()
            .is_empty()
    );
    assert!(
        server
            .state
            .engine
            .ref_stats(&tenant_named(TENANT))
            .map_or(true, |stats| stats.count == 0)
    );
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502_naming_it() {
    let mut config = default_config();
    config.openai = Some(UpstreamConfig {
        base_url: "http://127.0.0.1:9/v1".to_owned(),
        api_key: None,
    });
    let server = start(config).await;
    let response = post(
        &server,
        "/v1/chat/completions",
        "s-down",
        &openai_request(&[]),
    )
    .await;
    assert_eq!(response.status(), 502);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("127.0.0.1:9")
    );
}

#[tokio::test]
async fn the_proxy_routes_are_in_the_openapi_document() {
    let document = serde_json::to_value(skald_server::openapi()).unwrap();
    let paths = document["paths"].as_object().unwrap();
    assert!(paths["/v1/chat/completions"].get("post").is_some());
    assert!(paths["/v1/messages"].get("post").is_some());
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

/// A session id of the tests, parsed (it is well formed).
fn session_named(id: &str) -> skald_core::ids::SessionId {
    skald_core::ids::SessionId::parse(id).unwrap()
}
