//! Fixtures shared by the client tests: a conversation whose tool result carries `details` that
//! must never be sent, a fast deterministic retry policy, and waiting on a scripted server.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_llm::{ProviderConfig, ProviderKind, RetryPolicy};
use wiremock::MockServer;

/// A value that must never appear in a request body.
pub const SECRET_DETAILS: &str = "HOST-ONLY-DETAILS-7f3a";

/// user → assistant calling `read_file` → the tool's result (with `details`) → user.
pub fn conversation() -> Vec<Message> {
    let call = Block::ToolCall(ToolCall {
        id: "call_1".to_owned(),
        name: "read_file".to_owned(),
        arguments: json!({"path": "src/main.rs"}),
        arguments_text: None,
        extra: Extra::new(),
    });
    let result = Block::ToolResult(ToolResult {
        call_id: "call_1".to_owned(),
        tool_name: Some("read_file".to_owned()),
        content: vec![Block::text("fn main() {}")].into(),
        content_form: ContentForm::Blocks,
        is_error: None,
        details: Some(json!({"raw": SECRET_DETAILS, "bytes": 12}).into()),
        extra: Extra::new(),
    });
    vec![
        Message::text(Role::User, "What does src/main.rs do?"),
        Message::new(Role::Assistant, vec![Block::text("Let me read it."), call]),
        Message::new(Role::ToolResult, vec![result]),
        Message::text(Role::User, "Summarise it in one line."),
    ]
}

/// A tool in OpenAI function-spec form.
pub fn read_file_tool() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
        }
    })
}

/// Retries without real waiting and without randomness.
pub fn fast_retry(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        attempts,
        min_delay_ms: 1,
        max_delay_ms: 5,
        jitter: 0.2,
        max_retry_after_ms: 60_000,
    }
}

/// Retries whose backoff is long enough that only a cancellation can end it.
pub fn slow_retry() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        min_delay_ms: 600_000,
        max_delay_ms: 600_000,
        jitter: 0.0,
        max_retry_after_ms: 600_000,
    }
}

pub fn config(kind: ProviderKind, server: &MockServer) -> ProviderConfig {
    let mut config = ProviderConfig::new(kind, "test-model");
    config.base_url = server.uri();
    config
        .headers
        .insert("x-skald-test".to_owned(), "yes".to_owned());
    config
}

/// Waits until the server has received `count` requests (the tests that cancel need to know a
/// request arrived; no duration is asserted).
pub async fn wait_for_requests(server: &MockServer, count: usize) {
    loop {
        let received = server.received_requests().await.unwrap_or_default();
        if received.len() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

pub async fn request_count(server: &MockServer) -> usize {
    server.received_requests().await.unwrap_or_default().len()
}

/// The JSON body of the `index`th request the server received.
pub async fn request_body(server: &MockServer, index: usize) -> Value {
    let requests = server.received_requests().await.unwrap();
    serde_json::from_slice(&requests[index].body).unwrap()
}

/// A server-sent events body: one `data:` line per entry (with an `event:` line when named).
pub fn sse(events: &[(Option<&str>, &str)]) -> String {
    let mut body = String::new();
    for (name, data) in events {
        if let Some(name) = name {
            body.push_str(&format!("event: {name}\n"));
        }
        body.push_str(&format!("data: {data}\n\n"));
    }
    body
}
