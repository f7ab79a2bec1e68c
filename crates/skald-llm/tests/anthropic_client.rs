//! The Anthropic client against a local server the test scripts: what it sends (system at the
//! top, tool results in user turns, tools as input schemas, no `details`), how it reads answers
//! whole and streamed, and which failures it retries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use futures::StreamExt;
use serde_json::{Value, json};
use skald_core::message::{Block, StopReason, Usage};
use skald_llm::{
    Anthropic, ChatModel, ChatRequest, FixedJitter, LlmError, ProviderKind, StreamEvent,
    client_from_config, collect_stream,
};
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const ENDPOINT: &str = "/v1/messages";

fn client(server: &MockServer) -> Anthropic {
    Anthropic::with_api_key(
        config(ProviderKind::Anthropic, server),
        Some("sk-ant-test".to_owned()),
    )
    .unwrap()
    .with_retry_policy(fast_retry(3))
    .with_jitter(Arc::new(FixedJitter(0.5)))
}

fn request() -> ChatRequest {
    ChatRequest {
        system: Some("You are terse.".to_owned()),
        messages: conversation(),
        tools: vec![read_file_tool()],
        max_output_tokens: Some(1024),
        temperature: Some(0.2),
    }
}

fn answer() -> Value {
    json!({
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-2025",
        "content": [
            {"type": "thinking", "thinking": "Need the manifest.", "signature": "sig-abc"},
            {"type": "text", "text": "It prints nothing."},
            {"type": "tool_use", "id": "toolu_02", "name": "read_file", "input": {"path": "Cargo.toml"}}
        ],
        "stop_reason": "tool_use",
        "stop_sequence": null,
        "usage": {"input_tokens": 200, "cache_creation_input_tokens": 50,
                  "cache_read_input_tokens": 1000, "output_tokens": 30}
    })
}

/// The same answer as [`answer`], streamed as Anthropic does.
fn streamed_answer() -> String {
    let start = json!({"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test-2025",
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 200, "cache_creation_input_tokens": 50,
                  "cache_read_input_tokens": 1000, "output_tokens": 1}}})
    .to_string();
    let block_start = |index: u64, block: Value| {
        json!({"type": "content_block_start", "index": index, "content_block": block}).to_string()
    };
    let delta = |index: u64, delta: Value| {
        json!({"type": "content_block_delta", "index": index, "delta": delta}).to_string()
    };
    let stop = |index: u64| json!({"type": "content_block_stop", "index": index}).to_string();
    let events = [
        ("message_start", start),
        (
            "content_block_start",
            block_start(0, json!({"type": "thinking", "thinking": "", "signature": ""})),
        ),
        (
            "content_block_delta",
            delta(0, json!({"type": "thinking_delta", "thinking": "Need the manifest."})),
        ),
        (
            "content_block_delta",
            delta(0, json!({"type": "signature_delta", "signature": "sig-abc"})),
        ),
        ("content_block_stop", stop(0)),
        ("ping", json!({"type": "ping"}).to_string()),
        (
            "content_block_start",
            block_start(1, json!({"type": "text", "text": ""})),
        ),
        (
            "content_block_delta",
            delta(1, json!({"type": "text_delta", "text": "It prints "})),
        ),
        (
            "content_block_delta",
            delta(1, json!({"type": "text_delta", "text": "nothing."})),
        ),
        ("content_block_stop", stop(1)),
        (
            "content_block_start",
            block_start(
                2,
                json!({"type": "tool_use", "id": "toolu_02", "name": "read_file", "input": {}}),
            ),
        ),
        (
            "content_block_delta",
            delta(2, json!({"type": "input_json_delta", "partial_json": ""})),
        ),
        (
            "content_block_delta",
            delta(2, json!({"type": "input_json_delta", "partial_json": "{\"path\":"})),
        ),
        (
            "content_block_delta",
            delta(2, json!({"type": "input_json_delta", "partial_json": "\"Cargo.toml\"}"})),
        ),
        ("content_block_stop", stop(2)),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                   "usage": {"output_tokens": 30}})
            .to_string(),
        ),
        ("message_stop", json!({"type": "message_stop"}).to_string()),
    ];
    let events: Vec<(Option<&str>, &str)> = events
        .iter()
        .map(|(name, data)| (Some(*name), data.as_str()))
        .collect();
    sse(&events)
}

async fn mount(server: &MockServer, template: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(template)
        .mount(server)
        .await;
}

async fn mount_once(server: &MockServer, template: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(template)
        .up_to_n_times(1)
        .mount(server)
        .await;
}

#[tokio::test]
async fn the_request_carries_system_tool_results_in_user_turns_and_no_details() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .and(header("x-api-key", "sk-ant-test"))
        .and(header("anthropic-version", "2023-06-01"))
        .and(header("x-skald-test", "yes"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer()))
        .expect(1)
        .mount(&server)
        .await;
    client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap();

    let requests = server.received_requests().await.unwrap();
    assert!(requests[0].headers.get("authorization").is_none());
    let raw = String::from_utf8(requests[0].body.clone()).unwrap();
    assert!(!raw.contains(SECRET_DETAILS), "details leaked: {raw}");
    assert!(!raw.contains("\"details\""), "details leaked: {raw}");
    assert!(!raw.contains("skald:"), "a codec hint leaked: {raw}");

    let body: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 1024);
    assert_eq!(body["temperature"], json!(0.2));
    assert_eq!(body["system"], "You are terse.");
    assert_eq!(
        body["tools"],
        json!([{"name": "read_file", "description": "Read a file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}])
    );
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|message| message["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "user"]);
    let tool_use = &messages[1]["content"][1];
    assert_eq!(tool_use["type"], "tool_use");
    assert_eq!(tool_use["id"], "call_1");
    assert_eq!(tool_use["input"], json!({"path": "src/main.rs"}));
    let tool_result = &messages[2]["content"][0];
    assert_eq!(tool_result["type"], "tool_result");
    assert_eq!(tool_result["tool_use_id"], "call_1");
    assert_eq!(tool_result["content"][0]["text"], "fn main() {}");
}

#[tokio::test]
async fn a_whole_answer_is_decoded_with_thinking_usage_and_stop_reason() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(200).set_body_json(answer())).await;
    let response = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(response.text(), "It prints nothing.");
    assert_eq!(response.model, "claude-test-2025");
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(
        response.usage,
        Usage {
            input: 200,
            output: 30,
            cache_read: 1000,
            cache_write: 50,
            cache_write_1h: 0,
        }
    );
    assert!(matches!(
        &response.message.content[0],
        Block::Thinking(thinking) if thinking.signature.as_deref() == Some("sig-abc")
    ));
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls[0].id, "toolu_02");
    assert_eq!(calls[0].arguments, json!({"path": "Cargo.toml"}));
}

#[tokio::test]
async fn a_streamed_answer_arrives_as_events_and_assembles_to_the_whole_answer() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(200).set_body_raw(streamed_answer(), "text/event-stream"),
    )
    .await;
    mount(&server, ResponseTemplate::new(200).set_body_json(answer())).await;
    let client = client(&server);
    let cancel = CancellationToken::new();

    let events: Vec<StreamEvent> = client
        .stream(&request(), &cancel)
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    let whole = client.complete(&request(), &cancel).await.unwrap();

    let usage = |output| Usage {
        input: 200,
        output,
        cache_read: 1000,
        cache_write: 50,
        cache_write_1h: 0,
    };
    assert_eq!(
        events,
        vec![
            StreamEvent::Usage(usage(1)),
            StreamEvent::ThinkingDelta("Need the manifest.".to_owned()),
            StreamEvent::TextDelta("It prints ".to_owned()),
            StreamEvent::TextDelta("nothing.".to_owned()),
            StreamEvent::ToolCallStart {
                index: 0,
                id: "toolu_02".to_owned(),
                name: "read_file".to_owned()
            },
            StreamEvent::ToolCallArgsDelta {
                index: 0,
                delta: "{\"path\":".to_owned()
            },
            StreamEvent::ToolCallArgsDelta {
                index: 0,
                delta: "\"Cargo.toml\"}".to_owned()
            },
            StreamEvent::Usage(usage(30)),
            StreamEvent::Done(Box::new(whole)),
        ]
    );
    let body = request_body(&server, 0).await;
    assert_eq!(body["stream"], true);
}

#[tokio::test]
async fn an_overloaded_answer_then_success_is_retried() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(529).set_body_json(
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    )
    .await;
    mount(&server, ResponseTemplate::new(200).set_body_json(answer())).await;
    client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(request_count(&server).await, 2);
}

#[tokio::test]
async fn a_rate_limit_with_retry_after_seconds_is_retried() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "0")
            .set_body_json(
                json!({"type": "error", "error": {"type": "rate_limit_error",
                "message": "Number of request tokens has exceeded your per-minute rate limit"}}),
            ),
    )
    .await;
    mount(&server, ResponseTemplate::new(200).set_body_json(answer())).await;
    client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(request_count(&server).await, 2);
}

#[tokio::test]
async fn prompt_is_too_long_is_an_overflow_with_counts_and_is_not_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(400).set_body_json(json!({"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208310 tokens > 200000 maximum"}})),
    )
    .await;
    let error = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        error,
        LlmError::ContextOverflow {
            requested_tokens: Some(208_310),
            limit_tokens: Some(200_000),
            message: "prompt is too long: 208310 tokens > 200000 maximum".to_owned(),
        }
    );
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn request_too_large_is_an_overflow() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(413).set_body_json(json!({"type": "error", "error": {
            "type": "request_too_large", "message": "Request exceeds the maximum size"}})),
    )
    .await;
    let error = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(error.is_context_overflow(), "{error:?}");
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn an_invalid_key_is_an_auth_error_and_is_not_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(401).set_body_json(json!({"type": "error", "error": {
            "type": "authentication_error", "message": "invalid x-api-key"}})),
    )
    .await;
    let error = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        error,
        LlmError::Auth {
            status: 401,
            message: "invalid x-api-key".to_owned()
        }
    );
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn an_error_event_inside_the_stream_is_typed() {
    let body = sse(&[
        (
            Some("message_start"),
            r#"{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":5,"output_tokens":1}}}"#,
        ),
        (
            Some("error"),
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
    ]);
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"),
    )
    .await;
    let stream = client(&server)
        .stream(&request(), &CancellationToken::new())
        .await
        .unwrap();
    let error = collect_stream(stream).await.unwrap_err();
    assert!(matches!(error, LlmError::Server { .. }), "{error:?}");
}

#[tokio::test]
async fn redacted_thinking_and_server_tools_are_kept_opaque() {
    let body = sse(&[
        (
            Some("message_start"),
            r#"{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":5,"output_tokens":1}}}"#,
        ),
        (
            Some("content_block_start"),
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}"#,
        ),
        (
            Some("content_block_start"),
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}"#,
        ),
        (
            Some("content_block_delta"),
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"rust\"}"}}"#,
        ),
        (
            Some("message_delta"),
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}"#,
        ),
    ]);
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"),
    )
    .await;
    // No `message_stop`: the stop reason already said the answer was whole.
    let stream = client(&server)
        .stream(&request(), &CancellationToken::new())
        .await
        .unwrap();
    let response = collect_stream(stream).await.unwrap();
    assert_eq!(
        response.message.content,
        vec![
            Block::Opaque(json!({"type": "redacted_thinking", "data": "EmwKAhgB"})),
            Block::Opaque(json!({"type": "server_tool_use", "id": "srvtoolu_1",
                                 "name": "web_search", "input": {"query": "rust"}})),
        ]
    );
    assert_eq!(response.usage.output, 9);
    assert_eq!(response.stop_reason, Some(StopReason::EndTurn));
}

#[tokio::test]
async fn client_from_config_builds_an_anthropic_client() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(200).set_body_json(answer())).await;
    let model = client_from_config(&config(ProviderKind::Anthropic, &server)).unwrap();
    let response = model
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(response.text(), "It prints nothing.");
    let openai_config = skald_llm::ProviderConfig::new(ProviderKind::OpenAi, "gpt-4o");
    assert!(matches!(
        Anthropic::with_api_key(openai_config, None),
        Err(LlmError::Config { .. })
    ));
}
