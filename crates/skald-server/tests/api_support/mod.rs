//! What the engine, memory and refs API tests share: OpenClaw `AgentMessage` fixtures, a small
//! conversation with a large tool result, and JSON request helpers that return the status with
//! the body.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use reqwest::StatusCode;
use serde_json::{Value, json};

pub const TS: i64 = 1_772_975_000_000;

pub fn user(text: &str, at: i64) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": TS + at})
}

fn usage() -> Value {
    json!({"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120,
           "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})
}

pub fn assistant_text(text: &str, at: i64) -> Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": text}],
           "api": "openai-completions", "provider": "openai", "model": "gpt-test",
           "usage": usage(), "stopReason": "stop", "timestamp": TS + at})
}

pub fn assistant_call(id: &str, name: &str, arguments: Value, at: i64) -> Value {
    json!({"role": "assistant",
           "content": [{"type": "toolCall", "id": id, "name": name, "arguments": arguments}],
           "api": "openai-completions", "provider": "openai", "model": "gpt-test",
           "usage": usage(), "stopReason": "toolUse", "timestamp": TS + at})
}

pub fn tool_result(id: &str, name: &str, text: &str, is_error: bool, at: i64) -> Value {
    json!({"role": "toolResult", "toolCallId": id, "toolName": name,
           "content": [{"type": "text", "text": text}], "isError": is_error,
           "timestamp": TS + at})
}

/// A build log of about 12,000 characters with one error line in the middle.
pub fn build_log() -> String {
    let mut lines: Vec<String> = (1..=300)
        .map(|n| format!("[{n:03}] compiling crate_{n} ... ok"))
        .collect();
    lines[149] = "[150] error: linker failed at /srv/app/src/main.rs:42 (exit 101)".to_owned();
    lines.join("\n")
}

/// A user asks for a build; the agent runs it, the log is large, the agent answers.
pub fn build_conversation() -> Vec<Value> {
    vec![
        user("Run the build and tell me what fails.", 0),
        assistant_call("call_1", "bash", json!({"command": "make build"}), 1),
        tool_result("call_1", "bash", &build_log(), false, 2),
        assistant_text(
            "The linker fails in /srv/app/src/main.rs at line 42 (exit 101).",
            3,
        ),
    ]
}

/// Six turns with 6,000-character results: enough history for a manual compaction at a
/// 32,000-token window.
pub fn long_conversation() -> Vec<Value> {
    let mut messages = Vec::new();
    for turn in 0..6_i64 {
        let at = turn * 10;
        messages.push(user(
            &format!("Step {turn}: never touch /etc/passwd. Check the build log for job {turn}."),
            at,
        ));
        let id = format!("call_{turn}");
        messages.push(assistant_call(
            &id,
            "bash",
            json!({"command": format!("cat /var/log/build-{turn}.log")}),
            at + 1,
        ));
        let body = format!(
            "build {turn} commit 9f8e7d6c5b4a{turn:04}\n{}\nerror: linker failed at /srv/app/src/main_{turn}.rs\n",
            "compiling module ... ".repeat(6_000 / 21)
        );
        messages.push(tool_result(&id, "bash", &body, turn == 2, at + 2));
        messages.push(assistant_text(
            &format!(
                "I'll fix /srv/app/src/main_{turn}.rs next; the root cause is the linker flag."
            ),
            at + 3,
        ));
    }
    messages
}

/// A client that sends the key (if any) in `x-skald-key`.
pub struct Api {
    pub base: String,
    pub key: Option<String>,
    pub http: reqwest::Client,
}

impl Api {
    pub fn new(base: String, key: Option<String>) -> Api {
        Api {
            base,
            key,
            http: reqwest::Client::new(),
        }
    }

    fn with_key(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.key {
            Some(key) => request.header("x-skald-key", key),
            None => request,
        }
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .with_key(self.http.post(format!("{}{path}", self.base)))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Posts raw bytes as JSON (malformed bodies).
    pub async fn post_raw(
        &self,
        path: &str,
        body: impl Into<reqwest::Body>,
    ) -> (StatusCode, Value) {
        let response = self
            .with_key(self.http.post(format!("{}{path}", self.base)))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = self
            .with_key(self.http.get(format!("{}{path}", self.base)))
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

/// The error message of a JSON error body.
pub fn message(body: &Value) -> String {
    body["error"]["message"].as_str().unwrap_or("").to_owned()
}

/// The ref id in the first `[REF_ID: …]` placeholder of the messages.
pub fn first_ref_id(messages: &Value) -> Option<String> {
    let text = messages.to_string();
    let at = text.find("[REF_ID: ")? + "[REF_ID: ".len();
    text.get(at..at + 64).map(str::to_owned)
}
