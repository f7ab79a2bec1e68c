//! What the model sees, byte for byte: the exact request body the proxy sends upstream, as insta
//! snapshots, per wire API (Chat Completions, Anthropic Messages whole and streamed, Responses)
//! and per moment of a turn — a first call, the call after an offload, the continuation after a
//! hidden fetch round, a call with recall injected, and the call after an overflow recovery.
//! A change to any of them shows up here as a diff to review, not as a silent change of what
//! every user's model is sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod upstream;

use common::{TestServer, default_config};
use serde_json::{Value, json};
use skald_core::pipeline::policy::Policy;
use skald_server::ServerConfig;
use upstream::{
    Reply, RespItem, Upstream, anthropic_overflow, anthropic_sse_text, anthropic_sse_tool_uses,
    anthropic_text, anthropic_tool_uses, fetch_reply, openai_overflow, openai_text,
    openai_tool_calls, responses_answer, responses_text,
};

/// The wire APIs, with Messages twice: whole and streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Chat,
    Messages,
    MessagesStreamed,
    Responses,
}

const WIRES: [Wire; 4] = [
    Wire::Chat,
    Wire::Messages,
    Wire::MessagesStreamed,
    Wire::Responses,
];

impl Wire {
    fn name(self) -> &'static str {
        match self {
            Wire::Chat => "chat",
            Wire::Messages => "messages",
            Wire::MessagesStreamed => "messages_sse",
            Wire::Responses => "responses",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Wire::Chat => "/v1/chat/completions",
            Wire::Messages | Wire::MessagesStreamed => "/v1/messages",
            Wire::Responses => "/v1/responses",
        }
    }

    /// An answer saying `text`.
    fn text(self, text: &str) -> Reply {
        match self {
            Wire::Chat => Reply::Json(200, openai_text(text)),
            Wire::Messages => Reply::Json(200, anthropic_text(text)),
            Wire::MessagesStreamed => Reply::Sse(anthropic_sse_text(&[text])),
            Wire::Responses => Reply::Json(200, responses_text("resp_1", text)),
        }
    }

    /// An answer calling skald's fetch on the first ref the request carries.
    fn fetch(self) -> Reply {
        match self {
            Wire::Chat => fetch_reply(|id| {
                Reply::Json(
                    200,
                    openai_tool_calls(&[(
                        "call_fetch",
                        "fetch_original_data",
                        json!({"ref_ids": [id], "grep": "step 150"}),
                    )]),
                )
            }),
            Wire::Messages => fetch_reply(|id| {
                Reply::Json(
                    200,
                    anthropic_tool_uses(
                        Some("Reading the log."),
                        &[(
                            "toolu_fetch",
                            "fetch_original_data",
                            json!({"ref_ids": [id], "grep": "step 150"}),
                        )],
                    ),
                )
            }),
            Wire::MessagesStreamed => fetch_reply(|id| {
                Reply::Sse(anthropic_sse_tool_uses(
                    "msg_f1",
                    "Reading the log.",
                    &[(
                        "toolu_fetch",
                        "fetch_original_data",
                        json!({"ref_ids": [id], "grep": "step 150"}),
                    )],
                ))
            }),
            Wire::Responses => fetch_reply(|id| {
                Reply::Json(
                    200,
                    responses_answer(
                        "resp_f1",
                        &[RespItem::Call(
                            "call_fetch",
                            "fetch_original_data",
                            json!({"ref_ids": [id], "grep": "step 150"}),
                        )],
                    ),
                )
            }),
        }
    }

    fn overflow(self) -> Reply {
        match self {
            Wire::Chat | Wire::Responses => openai_overflow(),
            Wire::Messages | Wire::MessagesStreamed => anthropic_overflow(),
        }
    }

    /// A client's request: its system prompt, then `turns` of (question, a `bash` call, its
    /// output, an answer), then `question`.
    fn request(self, turns: &[(&str, String, &str)], question: &str) -> Value {
        let system = "You are a build assistant.";
        match self {
            Wire::Chat => {
                let mut messages = vec![json!({"role": "system", "content": system})];
                for (n, (ask, output, answer)) in turns.iter().enumerate() {
                    let id = format!("call_{n}");
                    messages.push(json!({"role": "user", "content": ask}));
                    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
                        {"id": id, "type": "function",
                         "function": {"name": "bash", "arguments": "{\"command\":\"make\"}"}}]}));
                    messages.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
                    messages.push(json!({"role": "assistant", "content": answer}));
                }
                messages.push(json!({"role": "user", "content": question}));
                json!({
                    "model": "gpt-test",
                    "messages": messages,
                    "tools": [{"type": "function", "function": {"name": "bash",
                        "description": "Run a shell command",
                        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}],
                    "temperature": 0.2,
                    "user": "tester"
                })
            }
            Wire::Messages | Wire::MessagesStreamed => {
                let mut messages = Vec::new();
                for (n, (ask, output, answer)) in turns.iter().enumerate() {
                    let id = format!("toolu_{n}");
                    messages.push(json!({"role": "user", "content": ask}));
                    messages.push(json!({"role": "assistant", "content": [
                        {"type": "tool_use", "id": id, "name": "bash", "input": {"command": "make"}}]}));
                    messages.push(json!({"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": id, "content": output}]}));
                    messages.push(json!({"role": "assistant", "content": answer}));
                }
                messages.push(json!({"role": "user", "content": question}));
                let mut body = json!({
                    "model": "claude-test",
                    "max_tokens": 1024,
                    "system": system,
                    "messages": messages,
                    "tools": [{"name": "bash", "description": "Run a shell command",
                               "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
                    "metadata": {"user_id": "tester"}
                });
                if self == Wire::MessagesStreamed {
                    body["stream"] = json!(true);
                }
                body
            }
            Wire::Responses => {
                let mut input = Vec::new();
                for (n, (ask, output, answer)) in turns.iter().enumerate() {
                    let id = format!("call_{n}");
                    input.push(json!({"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": ask}]}));
                    input.push(
                        json!({"type": "function_call", "call_id": id, "name": "bash",
                        "arguments": "{\"command\":\"make\"}"}),
                    );
                    input.push(
                        json!({"type": "function_call_output", "call_id": id, "output": output}),
                    );
                    input.push(json!({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": answer}]}));
                }
                input.push(json!({"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": question}]}));
                json!({
                    "model": "gpt-test",
                    "instructions": system,
                    "input": input,
                    "tools": [{"type": "function", "name": "bash", "description": "Run a shell command",
                               "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}],
                    "store": false
                })
            }
        }
    }
}

/// A build log of `lines` numbered lines.
fn build_log(lines: usize) -> String {
    (0..lines)
        .map(|line| format!("2026-01-01 INFO step {line:03} compiled module_{line}.rs ok\n"))
        .collect()
}

fn one_build(lines: usize) -> Vec<(&'static str, String, &'static str)> {
    vec![(
        "Run the build and tell me how it went.",
        build_log(lines),
        "The build finished.",
    )]
}

/// Six turns, the first three with 8,000-character logs: over an 8,192-token window's
/// threshold once the overflow says so.
fn long_history() -> Vec<(&'static str, String, &'static str)> {
    [8_000, 8_000, 8_000, 300, 300, 300]
        .iter()
        .map(|size| {
            let log: String = (0..)
                .map(|line| format!("build line {line}: linking /srv/app/src/main.rs\n"))
                .scan(0, |len, line| {
                    *len += line.len();
                    (*len <= *size).then_some(line)
                })
                .collect();
            (
                "Check the next build log.",
                log,
                "That build fails to link.",
            )
        })
        .collect()
}

fn memory_off(upstream: &Upstream) -> ServerConfig {
    let mut config = upstream.proxied(default_config());
    config.engine.memory.enabled = false;
    config
}

async fn post(server: &TestServer, wire: Wire, body: &Value) {
    let response = reqwest::Client::new()
        .post(server.url(wire.path()))
        .header("x-skald-session", format!("s-{}", wire.name()))
        .header("authorization", "Bearer sk-provider-123")
        .header("x-api-key", "sk-ant-provider-123")
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
}

/// Runs one request through a fresh server (holding `memory` when given) and returns the bodies
/// the upstream got.
async fn bodies(
    config: impl FnOnce(&Upstream) -> ServerConfig,
    wire: Wire,
    replies: Vec<Reply>,
    body: Value,
    memory: Option<&str>,
) -> Vec<Value> {
    let upstream = Upstream::start().await;
    let server = TestServer::start(common::test_state(config(&upstream))).await;
    if let Some(memory) = memory {
        let response = reqwest::Client::new()
            .post(server.url("/v1/memory/remember"))
            .json(&json!({"content": memory, "type": "entities"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    for reply in replies {
        upstream.push(reply);
    }
    post(&server, wire, &body).await;
    upstream
        .requests()
        .into_iter()
        .map(|request| request.body)
        .collect()
}

/// Snapshots one body. A recalled memory carries the day it was written, which is the day the
/// test runs, so the date is redacted: a snapshot must not fail the day after it was taken.
fn snapshot(wire: Wire, moment: &str, body: &Value) {
    insta::with_settings!({filters => vec![(
        r#"created_at\\":\\"\d{4}-\d{2}-\d{2}"#,
        r#"created_at\":\"[date]"#,
    )]}, {
        insta::assert_snapshot!(
            format!("{moment}__{}", wire.name()),
            serde_json::to_string_pretty(body).unwrap()
        );
    });
}

#[tokio::test]
async fn a_first_call() {
    for wire in WIRES {
        let sent = bodies(
            memory_off,
            wire,
            vec![wire.text("It compiled.")],
            wire.request(&one_build(3), "Did step 1 compile?"),
            None,
        )
        .await;
        assert_eq!(sent.len(), 1, "{wire:?}");
        snapshot(wire, "first_call", &sent[0]);
    }
}

#[tokio::test]
async fn the_call_after_an_offload() {
    for wire in WIRES {
        let sent = bodies(
            memory_off,
            wire,
            vec![wire.text("It compiled.")],
            wire.request(&one_build(300), "Did step 150 compile?"),
            None,
        )
        .await;
        assert_eq!(sent.len(), 1, "{wire:?}");
        assert!(
            sent[0].to_string().contains("[REF_ID: "),
            "{wire:?}: the log is offloaded"
        );
        snapshot(wire, "after_offload", &sent[0]);
    }
}

#[tokio::test]
async fn the_continuation_after_a_hidden_fetch_round() {
    for wire in WIRES {
        let sent = bodies(
            memory_off,
            wire,
            vec![wire.fetch(), wire.text("Step 150 compiled.")],
            wire.request(&one_build(300), "Did step 150 compile?"),
            None,
        )
        .await;
        assert_eq!(sent.len(), 2, "{wire:?}");
        snapshot(wire, "after_hidden_fetch", &sent[1]);
    }
}

#[tokio::test]
async fn a_call_with_recall_injected() {
    for wire in WIRES {
        let sent = bodies(
            |upstream| {
                let mut config = upstream.proxied(default_config());
                config.engine.memory.recall.min_text_relevance = 0.0;
                config
            },
            wire,
            vec![wire.text("About nine minutes.")],
            wire.request(
                &one_build(3),
                "How long does the release build take with LTO?",
            ),
            Some("The release build runs with LTO and takes 9 minutes."),
        )
        .await;
        assert_eq!(sent.len(), 1, "{wire:?}");
        assert!(
            sent[0].to_string().contains("takes 9 minutes"),
            "{wire:?}: the memory is recalled"
        );
        snapshot(wire, "with_recall", &sent[0]);
    }
}

#[tokio::test]
async fn the_call_after_an_overflow_recovery() {
    for wire in WIRES {
        let sent = bodies(
            |upstream| {
                let mut config = memory_off(upstream);
                config.engine.policy = Policy::preset("none").unwrap();
                config.engine.window_tokens = 8_192;
                config.engine.compaction.reserve_tokens = 512;
                config
            },
            wire,
            vec![wire.overflow(), wire.text("Every build fails to link.")],
            wire.request(&long_history(), "Which builds failed, and why?"),
            None,
        )
        .await;
        assert_eq!(sent.len(), 2, "{wire:?}");
        assert!(
            sent[1].to_string().len() < sent[0].to_string().len() / 2,
            "{wire:?}: the retry is smaller"
        );
        snapshot(wire, "after_overflow", &sent[1]);
    }
}
