//! The proxy's wire behaviour added with the Responses API, end to end over real HTTP: reqwest →
//! skald → the scripted upstream. Responses (JSON and SSE, skald's fetch run unseen, the stream
//! kept whole), the WebSocket refusal, compressed bodies, `previous_response_id`, Anthropic
//! thinking kept in hidden turns, whole answers to stream requests, stable additions for prompt
//! caching, session identity from the client's own ids, the side routes (count_tokens, models,
//! the banner, 405), timeouts, a client that leaves, a bounded shutdown, and headers that never
//! carry a skald key upstream.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod upstream;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use common::{TestServer, default_config};
use futures::StreamExt;
use serde_json::{Value, json};
use skald_server::config::UpstreamTimeouts;
use skald_server::{ServerConfig, Upstream as UpstreamConfig};
use tokio::sync::Notify;
use upstream::{
    Reply, RespItem, Upstream, anthropic_sse_text_with_id, anthropic_text, anthropic_tool_uses,
    assert_no_skald_key, fetch_reply, first_ref_id, openai_sse_text, openai_text,
    openai_tool_calls, responses_answer, responses_sse, responses_text,
};

const TENANT: &str = "default";

/// Generous bound for what should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(5);

fn config_for(upstream: &Upstream) -> ServerConfig {
    upstream.proxied(default_config())
}

async fn start(config: ServerConfig) -> TestServer {
    TestServer::start(common::test_state(config)).await
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

/// A build log of about 29,000 characters (over 20,000).
fn big_log() -> String {
    let log: String = (0..600)
        .map(|line| format!("2026-01-01 INFO step {line:03} compiled module_{line}.rs ok\n"))
        .collect();
    assert!(log.len() >= 20_000);
    log
}

fn input_text(role: &str, text: &str) -> Value {
    json!({"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]})
}

/// A Codex-style Responses request (`store: false`, the whole conversation in `input`) whose
/// function call output is the big build log.
fn responses_request() -> Value {
    json!({
        "model": "gpt-test",
        "instructions": "You are a build assistant.",
        "input": [
            input_text("user", "Run the build and tell me how it went."),
            {"type": "function_call", "call_id": "call_build", "name": "bash",
             "arguments": "{\"command\":\"make\"}"},
            {"type": "function_call_output", "call_id": "call_build", "output": big_log()},
            input_text("user", "Did step 150 compile?"),
        ],
        "tools": [{"type": "function", "name": "bash", "description": "Run a shell command",
                   "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
                   "strict": false}],
        "store": false
    })
}

/// An Anthropic conversation whose tool result is `result`.
fn anthropic_request(result: &str) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 1024,
        "system": "You are a build assistant.",
        "messages": [
            {"role": "user", "content": "Run the build and tell me how it went."},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_build", "name": "bash", "input": {"command": "make"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_build", "content": result}]},
            {"role": "assistant", "content": "The build finished."},
            {"role": "user", "content": "Did step 150 compile?"},
        ],
        "tools": [{"name": "bash", "description": "Run a shell command",
                   "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
    })
}

fn openai_request() -> Value {
    json!({
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are a build assistant."},
            {"role": "user", "content": "Run the build and tell me how it went."},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_build", "type": "function",
                 "function": {"name": "bash", "arguments": "{\"command\":\"make\"}"}}]},
            {"role": "tool", "tool_call_id": "call_build", "content": big_log()},
            {"role": "user", "content": "Did step 150 compile?"},
        ],
        "tools": [{"type": "function", "function": {"name": "bash", "description": "Run a shell command",
                   "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
    })
}

fn anthropic_event(kind: &str, data: Value) -> String {
    format!("event: {kind}\ndata: {data}")
}

/// The items of a Responses request's `input`.
fn input_items(body: &Value) -> Vec<Value> {
    body["input"].as_array().cloned().unwrap_or_default()
}

/// The position of the first item matching `pred`.
fn position(items: &[Value], pred: impl Fn(&Value) -> bool) -> Option<usize> {
    items.iter().position(pred)
}

/// The session ids `GET /v1/sessions` lists.
async fn listed_sessions(server: &TestServer) -> Vec<String> {
    let list: Value = reqwest::get(server.url("/v1/sessions"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut ids: Vec<String> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["sessionId"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

// ---------------------------------------------------------------------------------------------
// 1, 2. Responses: offload and skald's fetch, whole and streamed
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn responses_json_offloads_a_big_function_call_output_and_runs_skalds_fetch_unseen() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    upstream.push(fetch_reply(|id| {
        Reply::Json(
            200,
            responses_answer(
                "resp_a",
                &[RespItem::Call(
                    "call_fetch",
                    "fetch_original_data",
                    json!({"ref_ids": [id]}),
                )],
            ),
        )
    }));
    let final_answer = responses_text("resp_b", "Step 150 compiled module_150.rs.");
    upstream.push(Reply::Json(200, final_answer.clone()));
    let response = post(&server, "/v1/responses", "s-resp", &responses_request()).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    // The continuation's answer, without skald's call.
    assert_eq!(answer, final_answer);
    assert!(!answer.to_string().contains("fetch_original_data"));

    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].path, "/v1/responses");
    let first = input_items(&sent[0].body);
    let output = first
        .iter()
        .find(|item| item["type"] == "function_call_output" && item["call_id"] == "call_build")
        .unwrap()
        .to_string();
    assert!(output.contains("[REF_ID: "), "{output}");
    assert!(output.len() < 2_000, "{} chars went up", output.len());
    assert!(
        sent[0]
            .tool_names()
            .contains(&"fetch_original_data".to_owned()),
        "{:?}",
        sent[0].tool_names()
    );

    // The continuation carries skald's call and its result.
    let items = input_items(&sent[1].body);
    let call = position(&items, |item| {
        item["type"] == "function_call" && item["name"] == "fetch_original_data"
    })
    .unwrap();
    assert_eq!(items[call]["call_id"], "call_fetch");
    let result = &items[call + 1];
    assert_eq!(result["type"], "function_call_output");
    assert_eq!(result["call_id"], "call_fetch");
    assert!(
        result["output"]
            .to_string()
            .contains("step 150 compiled module_150.rs ok"),
        "{result}"
    );
}

#[tokio::test]
async fn responses_sse_holds_skalds_fetch_and_continues_as_one_response_keeping_reasoning() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    upstream.push(fetch_reply(|id| {
        Reply::Sse(responses_sse(
            "resp_first",
            &[
                RespItem::Reasoning("enc-reasoning-1"),
                RespItem::Text("Let me look."),
                RespItem::Call(
                    "call_fetch",
                    "fetch_original_data",
                    json!({"ref_ids": [id]}),
                ),
            ],
        ))
    }));
    upstream.push(Reply::Sse(responses_sse(
        "resp_second",
        &[RespItem::Text("Found it.")],
    )));
    let mut request = responses_request();
    request["stream"] = json!(true);
    let response = post(&server, "/v1/responses", "s-resp-sse", &request).await;
    assert_eq!(response.status(), 200);
    let body = read_all(response).await;
    assert!(!body.contains("fetch_original_data"), "{body}");
    assert!(!body.contains("call_fetch"), "{body}");
    assert!(!body.contains("resp_second"), "{body}");

    let data = sse_data(&body);
    let kinds: Vec<&str> = data.iter().map(|d| d["type"].as_str().unwrap()).collect();
    let count = |kind: &str| kinds.iter().filter(|k| **k == kind).count();
    assert_eq!(count("response.created"), 1, "{kinds:?}");
    assert_eq!(count("response.in_progress"), 1, "{kinds:?}");
    assert_eq!(count("response.completed"), 1, "{kinds:?}");
    assert_eq!(kinds.first(), Some(&"response.created"));
    assert_eq!(kinds.last(), Some(&"response.completed"));
    assert_eq!(count("response.function_call_arguments.delta"), 0);

    // Sequence numbers strictly increase over both calls.
    let sequence: Vec<u64> = data
        .iter()
        .map(|d| d["sequence_number"].as_u64().unwrap())
        .collect();
    assert!(
        sequence.windows(2).all(|pair| pair[0] < pair[1]),
        "{sequence:?}"
    );
    // Output indexes are dense: the skald call's index is not a gap.
    let mut indexes: Vec<u64> = Vec::new();
    for index in data.iter().filter_map(|d| d["output_index"].as_u64()) {
        if !indexes.contains(&index) {
            indexes.push(index);
        }
    }
    assert_eq!(indexes, [0, 1, 2]);
    let text: String = data
        .iter()
        .filter(|d| d["type"] == "response.output_text.delta")
        .filter_map(|d| d["delta"].as_str())
        .collect();
    assert!(
        text.contains("Let me look.") && text.contains("Found it."),
        "{text}"
    );

    let completed = &data.last().unwrap()["response"];
    assert_eq!(completed["id"], "resp_first");
    let output = completed["output"].as_array().unwrap();
    let types: Vec<&str> = output
        .iter()
        .map(|item| item["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["reasoning", "message", "message"], "{completed}");
    assert_eq!(output[0]["encrypted_content"], "enc-reasoning-1");
    assert_eq!(output[1]["content"][0]["text"], "Let me look.");
    assert_eq!(output[2]["content"][0]["text"], "Found it.");
    assert!(completed["usage"].is_object(), "{completed}");

    // The continuation: the round's reasoning item, then skald's call, then its output.
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].body["stream"], true);
    let items = input_items(&sent[1].body);
    let reasoning = position(&items, |item| item["type"] == "reasoning").unwrap();
    assert_eq!(items[reasoning]["encrypted_content"], "enc-reasoning-1");
    let call = position(&items, |item| {
        item["type"] == "function_call" && item["name"] == "fetch_original_data"
    })
    .unwrap();
    let result = position(&items, |item| {
        item["type"] == "function_call_output" && item["call_id"] == "call_fetch"
    })
    .unwrap();
    assert!(reasoning < call && call < result, "{items:?}");
    assert!(
        items[result]["output"]
            .to_string()
            .contains("module_150.rs ok")
    );
}

// ---------------------------------------------------------------------------------------------
// 3. The WebSocket transport is refused with 426
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_responses_websocket_upgrade_is_refused_with_426_and_a_json_error() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let response = reqwest::Client::new()
        .get(server.url("/v1/responses"))
        .header("upgrade", "websocket")
        .header("connection", "Upgrade")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 426);
    let body: Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(body["error"]["type"].is_string(), "{body}");
    assert!(message.contains("POST /v1/responses"), "{message}");
    assert_eq!(upstream.request_count(), 0);
}

// ---------------------------------------------------------------------------------------------
// 4. Compressed request bodies
// ---------------------------------------------------------------------------------------------

async fn send_encoded(server: &TestServer, encoding: &str, body: Vec<u8>) -> (u16, Option<String>) {
    let response = reqwest::Client::new()
        .post(server.url("/v1/responses"))
        .header("x-skald-session", "s-encoded")
        .header("content-type", "application/json")
        .header("content-encoding", encoding)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    (status, body["error"]["message"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn zstd_and_gzip_request_bodies_are_decoded_and_bad_ones_refused() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let request = json!({"model": "gpt-test", "input": [input_text("user", "compressed hello")],
                         "store": false});
    let plain = serde_json::to_vec(&request).unwrap();

    let zstd_body = zstd::encode_all(plain.as_slice(), 3).unwrap();
    let (status, message) = send_encoded(&server, "zstd", zstd_body).await;
    assert_eq!(status, 200, "{message:?}");

    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(&plain).unwrap();
    let (status, message) = send_encoded(&server, "gzip", gzip.finish().unwrap()).await;
    assert_eq!(status, 200, "{message:?}");

    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    for request in &sent {
        assert_eq!(request.path, "/v1/responses");
        // Plain JSON, and nothing saying otherwise.
        assert!(request.header("content-encoding").is_none());
        assert!(
            request.body["input"]
                .to_string()
                .contains("compressed hello"),
            "{}",
            request.body
        );
    }

    let (status, message) = send_encoded(&server, "zstd", b"certainly not zstd".to_vec()).await;
    assert_eq!(status, 400);
    let message = message.unwrap();
    assert!(message.contains("zstd"), "{message}");

    let (status, message) = send_encoded(&server, "br", plain).await;
    assert_eq!(status, 400);
    let message = message.unwrap();
    assert!(message.contains("br"), "{message}");
    assert_eq!(upstream.request_count(), 2);
}

// ---------------------------------------------------------------------------------------------
// 5. previous_response_id
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn previous_response_id_is_resolved_from_answers_skald_recorded() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    upstream.push(Reply::Json(200, responses_text("resp_one", "It is 4.")));
    let first = json!({"model": "gpt-test", "input": [input_text("user", "What is 2+2?")]});
    let response = post(&server, "/v1/responses", "s-prev", &first).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["id"], "resp_one");

    let second = json!({"model": "gpt-test", "previous_response_id": "resp_one",
                        "input": [input_text("user", "And 3+3?")]});
    let response = post(&server, "/v1/responses", "s-prev", &second).await;
    assert_eq!(response.status(), 200);
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    let body = &sent[1].body;
    assert!(body.get("previous_response_id").is_none(), "{body}");
    let items: Vec<String> = input_items(body).iter().map(Value::to_string).collect();
    let at = |text: &str| {
        items
            .iter()
            .position(|item| item.contains(text))
            .unwrap_or_else(|| panic!("{text} not in {items:?}"))
    };
    assert!(at("What is 2+2?") < at("It is 4."), "{items:?}");
    assert!(at("It is 4.") < at("And 3+3?"), "{items:?}");

    // An id skald never recorded: refused, saying why, and nothing goes up.
    let unknown = json!({"model": "gpt-test", "previous_response_id": "resp_nope",
                         "input": [input_text("user", "And 4+4?")]});
    let response = post(&server, "/v1/responses", "s-prev", &unknown).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("resp_nope") && message.contains("not an answer skald recorded"),
        "{message}"
    );
    assert_eq!(upstream.request_count(), 2);

    // With `store: false` the answer is not recorded: it cannot be continued from.
    upstream.push(Reply::Json(200, responses_text("resp_two", "It is 6.")));
    let unstored = json!({"model": "gpt-test", "store": false,
                          "input": [input_text("user", "What is 3+3?")]});
    let response = post(&server, "/v1/responses", "s-nostore", &unstored).await;
    assert_eq!(response.status(), 200);
    let after = json!({"model": "gpt-test", "previous_response_id": "resp_two",
                       "input": [input_text("user", "And 5+5?")]});
    let response = post(&server, "/v1/responses", "s-nostore", &after).await;
    assert_eq!(response.status(), 400);
    assert_eq!(upstream.request_count(), 3);
}

#[tokio::test]
async fn previous_response_id_continues_from_a_streamed_answer_skald_recorded() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    upstream.push(Reply::Sse(responses_sse(
        "resp_streamed",
        &[RespItem::Text("It is 4.")],
    )));
    let first = json!({"model": "gpt-test", "stream": true,
                       "input": [input_text("user", "What is 2+2?")]});
    let response = post(&server, "/v1/responses", "s-prev-sse", &first).await;
    assert_eq!(response.status(), 200);
    let body = read_all(response).await;
    assert!(body.contains("response.completed"), "{body}");

    let second = json!({"model": "gpt-test", "previous_response_id": "resp_streamed",
                        "input": [input_text("user", "And 3+3?")]});
    let response = post(&server, "/v1/responses", "s-prev-sse", &second).await;
    assert_eq!(response.status(), 200);
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    assert!(sent[1].body.get("previous_response_id").is_none());
    let input = sent[1].body["input"].to_string();
    let what = input.find("What is 2+2?").unwrap();
    let answer = input.find("It is 4.").unwrap();
    let next = input.find("And 3+3?").unwrap();
    assert!(what < answer && answer < next, "{input}");
}

// ---------------------------------------------------------------------------------------------
// 6. Anthropic thinking in the hidden turn
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn an_anthropic_streamed_fetch_after_thinking_keeps_the_signed_thinking_in_the_hidden_turn() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    upstream.push(fetch_reply(|id| {
        let input = json!({"ref_ids": [id]}).to_string();
        let (head, tail) = input.split_at(input.len() / 2);
        let block = |index: u64, block: Value| {
            anthropic_event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": block}),
            )
        };
        let delta = |index: u64, delta: Value| {
            anthropic_event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            )
        };
        let stop = |index: u64| {
            anthropic_event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            )
        };
        Reply::Sse(vec![
            anthropic_event(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_t", "type": "message",
                       "role": "assistant", "content": [], "model": "claude-test",
                       "stop_reason": null, "stop_sequence": null,
                       "usage": {"input_tokens": 100, "output_tokens": 1}}}),
            ),
            block(
                0,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
            ),
            delta(
                0,
                json!({"type": "thinking_delta", "thinking": "The log is offloaded; "}),
            ),
            delta(
                0,
                json!({"type": "thinking_delta", "thinking": "fetch it."}),
            ),
            delta(
                0,
                json!({"type": "signature_delta", "signature": "sig-EqQBCkgIARABGAIiQL"}),
            ),
            stop(0),
            block(1, json!({"type": "text", "text": ""})),
            delta(1, json!({"type": "text_delta", "text": "Let me look."})),
            stop(1),
            block(
                2,
                json!({"type": "tool_use", "id": "toolu_fetch", "name": "fetch_original_data",
                       "input": {}}),
            ),
            delta(2, json!({"type": "input_json_delta", "partial_json": head})),
            delta(2, json!({"type": "input_json_delta", "partial_json": tail})),
            stop(2),
            anthropic_event(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use",
                       "stop_sequence": null}, "usage": {"output_tokens": 30}}),
            ),
            anthropic_event("message_stop", json!({"type": "message_stop"})),
        ])
    }));
    upstream.push(Reply::Sse(anthropic_sse_text_with_id(
        "msg_b",
        &["Found it."],
    )));
    let mut request = anthropic_request(&big_log());
    request["stream"] = json!(true);
    request["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    let response = post(&server, "/v1/messages", "s-thinking", &request).await;
    assert_eq!(response.status(), 200);
    let body = read_all(response).await;
    assert!(!body.contains("fetch_original_data"), "{body}");
    assert!(body.contains("Found it."), "{body}");

    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    let messages = sent[1].body["messages"].as_array().unwrap();
    let n = messages.len();
    let hidden = &messages[n - 2];
    assert_eq!(hidden["role"], "assistant");
    let content = hidden["content"].as_array().unwrap();
    let types: Vec<&str> = content
        .iter()
        .map(|block| block["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["thinking", "text", "tool_use"], "{hidden}");
    assert_eq!(content[0]["thinking"], "The log is offloaded; fetch it.");
    assert_eq!(content[0]["signature"], "sig-EqQBCkgIARABGAIiQL");
    assert_eq!(content[1]["text"], "Let me look.");
    assert_eq!(content[2]["name"], "fetch_original_data");
    assert_eq!(content[2]["id"], "toolu_fetch");
    let last = &messages[n - 1];
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["tool_use_id"], "toolu_fetch");
}

// ---------------------------------------------------------------------------------------------
// 7. A stream request answered with a whole JSON answer
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_stream_request_answered_with_json_still_runs_skalds_fetch_unseen_chat_completions() {
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
    upstream.push(Reply::Json(200, openai_text("Step 150 compiled.")));
    let mut request = openai_request();
    request["stream"] = json!(true);
    let response = post(&server, "/v1/chat/completions", "s-json-stream", &request).await;
    assert_eq!(response.status(), 200);
    let body = read_all(response).await;
    assert!(!body.contains("fetch_original_data"), "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        openai_text("Step 150 compiled.")
    );
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    let last = sent[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_fetch");
    assert!(last["content"].to_string().contains("module_150.rs ok"));
}

#[tokio::test]
async fn a_stream_request_answered_with_json_still_runs_skalds_fetch_unseen_messages() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    upstream.push(fetch_reply(|id| {
        Reply::Json(
            200,
            anthropic_tool_uses(
                Some("Checking."),
                &[(
                    "toolu_fetch",
                    "fetch_original_data",
                    json!({"ref_ids": [id]}),
                )],
            ),
        )
    }));
    upstream.push(Reply::Json(200, anthropic_text("Step 150 compiled.")));
    let mut request = anthropic_request(&big_log());
    request["stream"] = json!(true);
    let response = post(&server, "/v1/messages", "s-json-astream", &request).await;
    assert_eq!(response.status(), 200);
    let body = read_all(response).await;
    assert!(!body.contains("fetch_original_data"), "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        anthropic_text("Step 150 compiled.")
    );
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    let last = sent[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["tool_use_id"], "toolu_fetch");
}

// ---------------------------------------------------------------------------------------------
// 8. skald's additions are stable from the first call (prompt caching)
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn skalds_tools_and_system_addition_are_stable_from_the_first_call_for_prompt_caching() {
    // A real host's own prefix (Claude Code's system prompt and tools run to tens of thousands
    // of tokens) dwarfs skald's fetch tool: then the tool is there from the first call, and the
    // first offload rewrites nothing cached.
    let host_system = format!(
        "You are a build assistant. {}",
        "Follow the repository's conventions; run the tests before you commit. ".repeat(600)
    );
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let ephemeral = json!({"type": "ephemeral"});
    let mut messages = vec![
        json!({"role": "user", "content": "Run the build."}),
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "make"}}]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "build ok"}]}),
        json!({"role": "assistant", "content": "Built."}),
        json!({"role": "user", "content": [
            {"type": "text", "text": "Now run the tests.", "cache_control": ephemeral}]}),
    ];
    let request = |messages: &[Value]| {
        json!({
            "model": "claude-test",
            "max_tokens": 1024,
            "system": [{"type": "text", "text": host_system,
                        "cache_control": ephemeral}],
            "messages": messages,
            "tools": [{"name": "bash", "description": "Run a shell command",
                       "input_schema": {"type": "object",
                                        "properties": {"command": {"type": "string"}}},
                       "cache_control": ephemeral}]
        })
    };

    // 1: no refs yet.
    upstream.push(Reply::Json(
        200,
        anthropic_tool_uses(
            None,
            &[("toolu_2", "bash", json!({"command": "make test"}))],
        ),
    ));
    let response = post(&server, "/v1/messages", "s-cache", &request(&messages)).await;
    assert_eq!(response.status(), 200);
    // 2: the big result, offloaded.
    messages.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"command": "make test"}}]}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": big_log()}]}));
    upstream.push(Reply::Json(200, anthropic_text("Tests pass.")));
    let response = post(&server, "/v1/messages", "s-cache", &request(&messages)).await;
    assert_eq!(response.status(), 200);
    // 3: the next turn.
    messages.push(json!({"role": "assistant", "content": "Tests pass."}));
    messages.push(json!({"role": "user", "content": "Thanks."}));
    let response = post(&server, "/v1/messages", "s-cache", &request(&messages)).await;
    assert_eq!(response.status(), 200);

    let sent = upstream.requests();
    assert_eq!(sent.len(), 3);
    let first = &sent[0].body;
    assert_eq!(first_ref_id(first), None, "{first}");
    assert!(
        sent[0]
            .tool_names()
            .contains(&"fetch_original_data".to_owned())
    );
    let system = first["system"].to_string();
    assert!(system.contains("REF_ID"), "{system}");
    assert_eq!(first["system"][0]["cache_control"], ephemeral);
    assert_eq!(first["tools"][0]["cache_control"], ephemeral);
    assert!(first_ref_id(&sent[1].body).is_some());

    for call in &sent[1..] {
        assert_eq!(
            call.body["tools"].to_string(),
            first["tools"].to_string(),
            "tools changed"
        );
        assert_eq!(
            call.body["system"].to_string(),
            first["system"].to_string(),
            "system changed"
        );
    }
    let sent_messages = |n: usize| sent[n].body["messages"].as_array().unwrap().clone();
    // The prefix up to the client's breakpoint is unchanged (whatever skald put in it too)…
    let first_messages = sent_messages(0);
    let breakpoint = first_messages
        .iter()
        .position(|message| message.to_string().contains("cache_control"))
        .unwrap();
    assert_eq!(
        first_messages[breakpoint]["content"][0]["text"],
        "Now run the tests."
    );
    assert_eq!(
        sent_messages(1)[..=breakpoint],
        first_messages[..=breakpoint]
    );
    // …and in the call after the offload, so is everything up to the offloaded result.
    let second = sent_messages(1);
    let last = second.last().unwrap();
    assert!(first_ref_id(last).is_some(), "{last}");
    assert_eq!(sent_messages(2)[..second.len()], second[..]);
}

// ---------------------------------------------------------------------------------------------
// 9. Session identity from the client's own ids
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_clients_own_session_ids_name_the_sessions() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let client = reqwest::Client::new();
    let anthropic = |run: Option<&str>| {
        let mut body = json!({"model": "claude-test", "max_tokens": 100,
                              "messages": [{"role": "user", "content": "Fix the build."}]});
        if let Some(run) = run {
            body["metadata"] = json!({"user_id": json!({"device_id": "dev-1",
                "account_uuid": "", "session_id": run}).to_string()});
        }
        body
    };
    for run in ["run-1", "run-2", "run-1"] {
        let response = client
            .post(server.url("/v1/messages"))
            .json(&anthropic(Some(run)))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let listed = listed_sessions(&server).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed[0].starts_with("claude-code-run-1-"), "{listed:?}");
    assert!(listed[1].starts_with("claude-code-run-2-"), "{listed:?}");

    // Claude Code's header: the same id as metadata gives the same session, another a new one.
    for run in ["run-2", "run-3"] {
        let response = client
            .post(server.url("/v1/messages"))
            .header("x-claude-code-session-id", run)
            .json(&anthropic(None))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let listed = listed_sessions(&server).await;
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(listed[2].starts_with("claude-code-run-3-"), "{listed:?}");

    // Codex: the `session-id` header and `prompt_cache_key` name the same thread.
    let codex = |key: Option<&str>| {
        let mut body = json!({"model": "gpt-test", "store": false,
                              "input": [input_text("user", "Fix the build.")]});
        if let Some(key) = key {
            body["prompt_cache_key"] = json!(key);
        }
        body
    };
    let response = client
        .post(server.url("/v1/responses"))
        .header("session-id", "thread-a")
        .header("originator", "codex_exec")
        .json(&codex(None))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    for key in ["thread-a", "thread-b"] {
        let response = client
            .post(server.url("/v1/responses"))
            .header("originator", "codex_exec")
            .json(&codex(Some(key)))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let listed = listed_sessions(&server).await;
    assert_eq!(listed.len(), 5, "{listed:?}");
    let codex: Vec<&String> = listed
        .iter()
        .filter(|id| id.starts_with("codex-"))
        .collect();
    assert_eq!(codex.len(), 2, "{listed:?}");
    assert!(codex[0].starts_with("codex-thread-a-"), "{listed:?}");
    assert!(codex[1].starts_with("codex-thread-b-"), "{listed:?}");
}

// ---------------------------------------------------------------------------------------------
// 10. Side routes
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn count_tokens_is_forwarded_with_skalds_view_and_touches_no_session() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let count = json!({"input_tokens": 4321});
    upstream.push(Reply::Json(200, count.clone()));
    let mut request = anthropic_request(&big_log());
    request.as_object_mut().unwrap().remove("max_tokens");
    let response = reqwest::Client::new()
        .post(server.url("/v1/messages/count_tokens"))
        .header("x-api-key", "sk-ant-provider")
        .header("anthropic-version", "2023-06-01")
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), count);

    let sent = upstream.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/v1/messages/count_tokens");
    assert_eq!(sent[0].header("x-api-key"), Some("sk-ant-provider"));
    let names = sent[0].tool_names();
    assert_eq!(names[0], "bash");
    assert!(
        names.contains(&"fetch_original_data".to_owned()),
        "{names:?}"
    );
    let result = sent[0].body["messages"][2]["content"][0].to_string();
    assert!(result.contains("[REF_ID: "), "{result}");
    assert!(result.len() < 2_000, "{} chars went up", result.len());
    assert!(
        server
            .state
            .engine
            .session_infos(&tenant_named(TENANT))
            .unwrap()
            .is_empty()
    );
    assert!(listed_sessions(&server).await.is_empty());
}

#[tokio::test]
async fn models_pass_through_to_the_clients_provider() {
    let openai = Upstream::start().await;
    let anthropic = Upstream::start().await;
    let mut config = default_config();
    config.openai = Some(UpstreamConfig {
        base_url: openai.openai_base(),
        api_key: None,
    });
    config.anthropic = Some(UpstreamConfig {
        base_url: anthropic.anthropic_base(),
        api_key: None,
    });
    let server = start(config).await;
    let claude_models =
        json!({"data": [{"type": "model", "id": "claude-test"}], "has_more": false});
    let gpt_models = json!({"object": "list", "data": [{"id": "gpt-test", "object": "model"}]});
    anthropic.push(Reply::Json(200, claude_models.clone()));
    openai.push(Reply::Json(200, gpt_models.clone()));
    let client = reqwest::Client::new();

    let response = client
        .get(server.url("/v1/models"))
        .header("anthropic-version", "2023-06-01")
        .header("x-api-key", "sk-ant-provider")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), claude_models);
    let response = client
        .get(server.url("/v1/models"))
        .header("authorization", "Bearer sk-provider-123")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), gpt_models);

    let sent = anthropic.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/v1/models");
    assert_eq!(sent[0].header("anthropic-version"), Some("2023-06-01"));
    let sent = openai.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/v1/models");
    assert_eq!(
        sent[0].header("authorization"),
        Some("Bearer sk-provider-123")
    );
}

#[tokio::test]
async fn the_banner_answers_get_and_head_and_a_wrong_method_is_a_json_405() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let client = reqwest::Client::new();
    let response = client.head(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let response = client.get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let banner: Value = response.json().await.unwrap();
    assert_eq!(banner["name"], "skald");

    let response = client
        .put(server.url("/v1/messages"))
        .json(&anthropic_request("ok"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["type"].is_string(), "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("/v1/messages") && message.contains("PUT"),
        "{message}"
    );
    assert_eq!(upstream.request_count(), 0);
}

// ---------------------------------------------------------------------------------------------
// 11, 12. Timeouts, a client that leaves, a bounded shutdown
// ---------------------------------------------------------------------------------------------

fn short_timeouts(upstream: &Upstream) -> ServerConfig {
    let mut config = config_for(upstream);
    config.timeouts = UpstreamTimeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_millis(300),
        idle: Duration::from_millis(300),
    };
    config
}

fn small_chat(stream: bool) -> Value {
    json!({"model": "gpt-test", "stream": stream,
           "messages": [{"role": "user", "content": "Say hello."}]})
}

#[tokio::test]
async fn an_upstream_that_never_answers_is_a_504_and_releases_the_session() {
    let upstream = Upstream::start().await;
    let server = start(short_timeouts(&upstream)).await;
    upstream.push(Reply::Hang);
    let response = tokio::time::timeout(
        PROMPTLY,
        post(
            &server,
            "/v1/chat/completions",
            "s-hang",
            &small_chat(false),
        ),
    )
    .await
    .expect("the first-byte timeout ends the wait");
    assert_eq!(response.status(), 504);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "upstream_timeout", "{body}");
    assert!(body["error"]["message"].is_string());

    // A stream request to an upstream that never answers: the same 504, before any event.
    upstream.push(Reply::Hang);
    let response = tokio::time::timeout(
        PROMPTLY,
        post(&server, "/v1/chat/completions", "s-hang", &small_chat(true)),
    )
    .await
    .expect("the first-byte timeout ends the wait");
    assert_eq!(response.status(), 504);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "upstream_timeout", "{body}");

    // The session is free again.
    let response = tokio::time::timeout(
        PROMPTLY,
        post(
            &server,
            "/v1/chat/completions",
            "s-hang",
            &small_chat(false),
        ),
    )
    .await
    .expect("the session was released");
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), openai_text("ok"));
}

#[tokio::test]
async fn a_stream_that_stalls_ends_with_an_error_event() {
    let upstream = Upstream::start().await;
    let server = start(short_timeouts(&upstream)).await;
    // Chat Completions: the gate is never opened.
    let gate = Arc::new(Notify::new());
    let events = openai_sse_text(&["Hel", "lo"]);
    upstream.push(Reply::GatedSse {
        first: events[..2].to_vec(),
        gate: gate.clone(),
        rest: events[2..].to_vec(),
    });
    let response = post(
        &server,
        "/v1/chat/completions",
        "s-stall",
        &small_chat(true),
    )
    .await;
    assert_eq!(response.status(), 200);
    let body = tokio::time::timeout(PROMPTLY, read_all(response))
        .await
        .expect("the idle timeout ends the stream");
    assert!(body.contains("Hel"), "{body}");
    let data = sse_data(&body);
    let error = data
        .iter()
        .find(|d| d.get("error").is_some())
        .unwrap_or_else(|| panic!("no error event in {body}"));
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stalled"),
        "{error}"
    );
    assert_eq!(data.last().unwrap(), "[DONE]");

    // Responses: a `response.failed` closes the stream.
    let events = responses_sse("resp_stall", &[RespItem::Text("Hello there")]);
    upstream.push(Reply::GatedSse {
        first: events[..5].to_vec(),
        gate: gate.clone(),
        rest: events[5..].to_vec(),
    });
    let request = json!({"model": "gpt-test", "stream": true, "store": false,
                         "input": [input_text("user", "Say hello.")]});
    let response = post(&server, "/v1/responses", "s-stall-r", &request).await;
    assert_eq!(response.status(), 200);
    let body = tokio::time::timeout(PROMPTLY, read_all(response))
        .await
        .expect("the idle timeout ends the stream");
    let data = sse_data(&body);
    assert_eq!(data.first().unwrap()["type"], "response.created", "{body}");
    let last = data.last().unwrap();
    assert_eq!(last["type"], "response.failed", "{body}");
    assert!(!body.contains("response.completed"), "{body}");
}

#[tokio::test]
async fn a_client_that_leaves_mid_stream_releases_the_session_at_once() {
    let upstream = Upstream::start().await;
    // Default timeouts (minutes): only the client's leaving can end the held stream.
    let server = start(config_for(&upstream)).await;
    let gate = Arc::new(Notify::new());
    let events = openai_sse_text(&["Hel", "lo"]);
    upstream.push(Reply::GatedSse {
        first: events[..2].to_vec(),
        gate: gate.clone(),
        rest: events[2..].to_vec(),
    });
    let client = reqwest::Client::new();
    let response = client
        .post(server.url("/v1/chat/completions"))
        .header("x-skald-session", "s-leave")
        .json(&small_chat(true))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut received = String::new();
    while !received.contains("Hel") {
        let chunk = tokio::time::timeout(PROMPTLY, body.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        received.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    drop(body);
    drop(client);

    let response = tokio::time::timeout(
        PROMPTLY,
        post(
            &server,
            "/v1/chat/completions",
            "s-leave",
            &small_chat(false),
        ),
    )
    .await
    .expect("the session was released when the client left");
    assert_eq!(response.status(), 200);
    assert_eq!(upstream.request_count(), 2);
}

#[tokio::test]
async fn serve_returns_within_its_grace_while_an_upstream_hangs() {
    let upstream = Upstream::start().await;
    let mut config = config_for(&upstream);
    config.shutdown_grace = Duration::from_millis(300);
    let state = common::test_state(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(skald_server::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    upstream.push(Reply::Hang);
    let held = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("http://{addr}/v1/chat/completions"))
            .header("x-skald-session", "s-held")
            .json(&small_chat(false))
            .send()
            .await
    });
    for _ in 0..250 {
        if upstream.request_count() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        upstream.request_count(),
        1,
        "the request reached the upstream"
    );
    stop.send(()).unwrap();
    let result = tokio::time::timeout(PROMPTLY, serving)
        .await
        .expect("serve returned within its grace");
    result.unwrap().unwrap();
    held.abort();
}

// ---------------------------------------------------------------------------------------------
// 13. Headers
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_skald_key_in_api_key_cookie_or_a_custom_header_never_reaches_the_upstream() {
    let upstream = Upstream::start().await;
    let state = common::test_state(config_for(&upstream));
    let key = state.keys.create(&tenant_named("acme"), "proxy").unwrap();
    let server = TestServer::start(state).await;
    let client = reqwest::Client::new();
    let with_key_everywhere = |request: reqwest::RequestBuilder| {
        request
            .header("x-skald-key", &key.secret)
            .header("api-key", &key.secret)
            .header("cookie", format!("theme=dark; skald={}", key.secret))
            .header("x-custom-auth", format!("Bearer {}", key.secret))
            .header("x-trace", "kept")
    };
    let response = with_key_everywhere(client.post(server.url("/v1/chat/completions")))
        .header("authorization", "Bearer sk-provider-123")
        .json(&small_chat(false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let response = with_key_everywhere(client.post(server.url("/v1/messages")))
        .header("x-api-key", "sk-ant-provider")
        .header("anthropic-version", "2023-06-01")
        .json(&anthropic_request("ok"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let response = with_key_everywhere(client.post(server.url("/v1/responses")))
        .header("authorization", "Bearer sk-provider-123")
        .json(&json!({"model": "gpt-test", "input": [input_text("user", "hi")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let sent = upstream.requests();
    assert_eq!(sent.len(), 3);
    for request in &sent {
        for name in ["api-key", "cookie", "x-custom-auth", "x-skald-key"] {
            assert!(request.header(name).is_none(), "{name} went upstream");
        }
        assert_eq!(request.header("x-trace"), Some("kept"));
    }
    assert_eq!(
        sent[0].header("authorization"),
        Some("Bearer sk-provider-123")
    );
    assert_eq!(sent[1].header("x-api-key"), Some("sk-ant-provider"));
    assert_eq!(
        sent[2].header("authorization"),
        Some("Bearer sk-provider-123")
    );
    assert_no_skald_key(&upstream, &key.secret);
}

#[tokio::test]
async fn a_skald_key_in_the_provider_header_without_a_provider_key_is_a_422_naming_api_key_env() {
    let upstream = Upstream::start().await;
    let state = common::test_state(config_for(&upstream));
    let key = state.keys.create(&tenant_named("acme"), "virtual").unwrap();
    let server = TestServer::start(state).await;
    let response = reqwest::Client::new()
        .post(server.url("/v1/messages"))
        .header("x-api-key", &key.secret)
        .header("anthropic-version", "2023-06-01")
        .json(&anthropic_request("ok"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    let body: Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("api_key_env") && message.contains("[proxy.anthropic]"),
        "{message}"
    );
    assert!(!message.contains(&key.secret), "{message}");
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

/// Regression: an older Codex (chat wire) sends `[assistant tool_calls][assistant text][tool]`;
/// repair used to move the result next to its call and send `…[tool][assistant text]`, so the
/// request ended on the model's own words and the upstream looped. The request must still end
/// with the tool result, and every word the client sent must go up.
#[tokio::test]
async fn a_codex_chat_request_with_text_after_its_call_still_ends_on_the_tool_result() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let wrapped =
        json!({"output": "a.txt\nb.txt\n", "metadata": {"exit_code": 0, "duration_seconds": 0.1}})
            .to_string();
    let request = json!({"model": "gpt-test", "messages": [
        {"role": "system", "content": "You are Codex."},
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_ls", "type": "function",
             "function": {"name": "shell", "arguments": "{\"command\":[\"ls\"]}"}}]},
        {"role": "assistant", "content": "Listing the files now."},
        {"role": "tool", "tool_call_id": "call_ls", "content": wrapped}]});
    let response = post(&server, "/v1/chat/completions", "s-codex080", &request).await;
    assert_eq!(response.status(), 200);
    let sent = upstream.requests();
    let messages = sent[0].body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "tool", "{messages:?}");
    assert_eq!(last["tool_call_id"], "call_ls");
    assert!(
        sent[0].body.to_string().contains("Listing the files now."),
        "the assistant's text was dropped: {messages:?}"
    );
    assert!(
        !messages.iter().any(|message| message["role"] == "assistant"
            && message["tool_calls"].is_null()
            && message["content"] == "Listing the files now."),
        "the text still stands alone after the result: {messages:?}"
    );
}

/// Regression: a malformed body sent to an API with no upstream configured was answered 422
/// ("configure the upstream") before anyone looked at it; what is wrong with the request comes
/// first.
#[tokio::test]
async fn a_malformed_body_is_a_400_even_when_no_upstream_is_configured() {
    let server = start(default_config()).await;
    let response = reqwest::Client::new()
        .post(server.url("/v1/messages"))
        .header("content-type", "application/json")
        .body("{bad")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not JSON"),
        "{body}"
    );
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
