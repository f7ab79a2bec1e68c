//! The Anthropic client against a local server the test scripts: what it sends (system at the
//! top, tool results in user turns, tools as input schemas, no `details`), how it reads answers
//! and which failures it retries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use serde_json::{Value, json};
use skald_core::message::{Block, StopReason, Usage};
use skald_llm::{
    Anthropic, ChatModel, ChatRequest, FixedJitter, LlmError, ProviderKind, client_from_config,
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
