//! The OpenAI-compatible client against a local server the test scripts: what it sends, how it
//! reads whole answers, when it retries, and how it stops.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use skald_core::message::{StopReason, Usage};
use skald_llm::{
    ChatModel, ChatRequest, FixedJitter, LlmError, OpenAiCompatible, ProviderKind,
    client_from_config,
};
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const ENDPOINT: &str = "/chat/completions";

fn client(server: &MockServer) -> OpenAiCompatible {
    OpenAiCompatible::with_api_key(
        config(ProviderKind::OpenAi, server),
        Some("sk-test".to_owned()),
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
        max_output_tokens: None,
        temperature: Some(0.2),
    }
}

fn answer() -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "test-model-2024",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "It prints nothing.",
                "tool_calls": [{
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{\"path\":\"Cargo.toml\"}"}
                }]
            },
            "finish_reason": "tool_calls"
        }],
        "usage": {
            "prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230,
            "prompt_tokens_details": {"cached_tokens": 1000}
        }
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
async fn the_request_carries_model_headers_paired_tool_calls_and_no_details() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(200).set_body_json(answer())).await;
    client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap();

    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    let header = |name: &str| sent.headers.get(name).unwrap().to_str().unwrap().to_owned();
    assert_eq!(header("authorization"), "Bearer sk-test");
    assert_eq!(header("content-type"), "application/json");
    assert_eq!(header("x-skald-test"), "yes");

    let raw = String::from_utf8(sent.body.clone()).unwrap();
    assert!(!raw.contains(SECRET_DETAILS), "details leaked: {raw}");
    assert!(!raw.contains("\"details\""), "details leaked: {raw}");
    assert!(!raw.contains("skald:"), "a codec hint leaked: {raw}");

    let body: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["temperature"], json!(0.2));
    assert_eq!(body.get("stream"), None);
    assert_eq!(body["tools"], json!([read_file_tool()]));
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|message| message["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
    assert_eq!(messages[0]["content"], "You are terse.");
    // The call and its result are adjacent and name the same id.
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["arguments"],
        "{\"path\":\"src/main.rs\"}"
    );
    assert_eq!(messages[3]["tool_call_id"], "call_1");
    assert_eq!(messages[3]["content"], "fn main() {}");
}

#[tokio::test]
async fn a_whole_answer_is_decoded_with_usage_and_stop_reason() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(200).set_body_json(answer())).await;
    let response = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(response.text(), "It prints nothing.");
    assert_eq!(response.model, "test-model-2024");
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(
        response.usage,
        Usage {
            input: 200,
            output: 30,
            cache_read: 1000,
            cache_write: 0,
            cache_write_1h: 0,
        }
    );
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_2");
    assert_eq!(calls[0].arguments, json!({"path": "Cargo.toml"}));
}

#[tokio::test]
async fn a_server_error_then_success_is_retried() {
    let server = MockServer::start().await;
    mount_once(&server, ResponseTemplate::new(500).set_body_string("boom")).await;
    mount(&server, ResponseTemplate::new(200).set_body_json(answer())).await;
    let response = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(response.text(), "It prints nothing.");
    assert_eq!(request_count(&server).await, 2);
}

#[tokio::test]
async fn a_rate_limit_with_retry_after_is_retried() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after-ms", "20")
            .set_body_json(json!({"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}})),
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
async fn a_retry_after_longer_than_the_cap_goes_back_to_the_caller() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "3600")
            .set_body_string("Too Many Requests"),
    )
    .await;
    let error = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        error,
        LlmError::RateLimited {
            retry_after_ms: Some(3_600_000),
            message: "Too Many Requests".to_owned()
        }
    );
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn retries_stop_after_the_last_attempt() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(503).set_body_string("Service Unavailable"),
    )
    .await;
    let error = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::Server { status: 503, .. }),
        "{error:?}"
    );
    assert_eq!(request_count(&server).await, 3);
}

#[tokio::test]
async fn a_bad_request_is_not_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(400).set_body_json(json!({"error": {"message": "Invalid value for 'temperature'", "type": "invalid_request_error"}})),
    )
    .await;
    let error = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        error,
        LlmError::BadRequest {
            status: 400,
            message: "Invalid value for 'temperature'".to_owned()
        }
    );
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn an_auth_error_is_not_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(401).set_body_json(json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}})),
    )
    .await;
    let error = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::Auth { status: 401, .. }),
        "{error:?}"
    );
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn an_overflow_is_not_retried_and_carries_its_counts() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(400).set_body_json(json!({"error": {
            "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})),
    )
    .await;
    let error = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            LlmError::ContextOverflow {
                requested_tokens: Some(130_532),
                limit_tokens: Some(128_000),
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn a_quota_error_is_not_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(429).set_body_json(json!({"error": {
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota", "code": "insufficient_quota"}})),
    )
    .await;
    let error = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::QuotaExceeded { .. }), "{error:?}");
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn cancelling_during_backoff_aborts_without_another_attempt() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(500).set_body_string("boom")).await;
    let client = client(&server).with_retry_policy(slow_retry());
    let cancel = CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        let server = &server;
        async move {
            wait_for_requests(server, 1).await;
            cancel.cancel();
        }
    };
    let request = request();
    let (outcome, ()) = tokio::join!(client.complete(&request, &cancel), canceller);
    assert_eq!(outcome.unwrap_err(), LlmError::Aborted);
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn cancelling_an_in_flight_request_aborts_it() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(200)
            .set_body_json(answer())
            .set_delay(Duration::from_secs(600)),
    )
    .await;
    let client = client(&server);
    let cancel = CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        let server = &server;
        async move {
            wait_for_requests(server, 1).await;
            cancel.cancel();
        }
    };
    let request = request();
    let (outcome, ()) = tokio::join!(client.complete(&request, &cancel), canceller);
    assert_eq!(outcome.unwrap_err(), LlmError::Aborted);
}

#[tokio::test]
async fn a_timeout_is_retried_then_reported() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(200)
            .set_body_json(answer())
            .set_delay(Duration::from_secs(600)),
    )
    .await;
    let client = client(&server)
        .with_retry_policy(fast_retry(2))
        .with_request_timeout(Duration::from_millis(100));
    let error = client
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::Timeout { .. }), "{error:?}");
    wait_for_requests(&server, 2).await;
    assert_eq!(request_count(&server).await, 2);
}

#[tokio::test]
async fn an_error_in_a_200_answer_is_typed() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(200)
            .set_body_json(json!({"error": {"message": "上下文过长", "code": 400}})),
    )
    .await;
    let error = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(error.is_context_overflow(), "{error:?}");
}

#[tokio::test]
async fn an_answer_that_is_not_chat_completions_is_an_invalid_response() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(200).set_body_string("<html>login</html>"),
    )
    .await;
    let error = client(&server)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::InvalidResponse { .. }),
        "{error:?}"
    );
    let server2 = MockServer::start().await;
    mount(
        &server2,
        ResponseTemplate::new(200).set_body_json(json!({"choices": []})),
    )
    .await;
    let error = client(&server2)
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::InvalidResponse { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_transport_error_after_retries() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = skald_llm::ProviderConfig::new(ProviderKind::OpenAi, "m");
    config.base_url = format!("http://127.0.0.1:{port}/v1");
    let client = OpenAiCompatible::with_api_key(config, None)
        .unwrap()
        .with_retry_policy(fast_retry(2))
        .with_jitter(Arc::new(FixedJitter(0.5)));
    let error = client
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::Transport { .. }), "{error:?}");
}

#[tokio::test]
async fn an_invalid_tool_spec_is_rejected_before_sending() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(200).set_body_json(answer())).await;
    let mut bad = request();
    bad.tools = vec![json!({"type": "function", "function": {"description": "no name"}})];
    let error = client(&server)
        .complete(&bad, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::InvalidRequest { .. }),
        "{error:?}"
    );
    assert_eq!(request_count(&server).await, 0);
}

#[tokio::test]
async fn a_missing_key_variable_fails_at_construction_naming_it() {
    let mut config = skald_llm::ProviderConfig::new(ProviderKind::OpenAi, "gpt-4o");
    config.api_key_env = Some("SKALD_LLM_TEST_VARIABLE_THAT_IS_NEVER_SET".to_owned());
    let Err(LlmError::Config { message }) = client_from_config(&config) else {
        panic!("expected a configuration error");
    };
    assert!(
        message.contains("SKALD_LLM_TEST_VARIABLE_THAT_IS_NEVER_SET"),
        "{message}"
    );
}

#[tokio::test]
async fn client_from_config_serves_the_configured_kind() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(200).set_body_json(answer())).await;
    let mut config = config(ProviderKind::OpenAi, &server);
    config.context_window_tokens = Some(128_000);
    let model = client_from_config(&config).unwrap();
    assert_eq!(model.model_name(), "test-model");
    assert_eq!(model.context_window_tokens(), Some(128_000));
    let response = model
        .complete(&request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(response.text(), "It prints nothing.");
    let anthropic_config = skald_llm::ProviderConfig::new(ProviderKind::Anthropic, "claude");
    assert!(matches!(
        OpenAiCompatible::with_api_key(anthropic_config, None),
        Err(LlmError::Config { .. })
    ));
}

#[tokio::test]
async fn a_cancelled_token_sends_nothing() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(200).set_body_json(answer())).await;
    let cancel = CancellationToken::new();
    cancel.cancel();
    let error = client(&server)
        .complete(&request(), &cancel)
        .await
        .unwrap_err();
    assert_eq!(error, LlmError::Aborted);
    assert_eq!(request_count(&server).await, 0);
}
