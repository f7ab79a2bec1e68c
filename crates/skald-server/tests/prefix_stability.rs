//! The prompt cache's prefix through the proxy with memory on: over a ten-turn agent
//! conversation (each turn a command and its output, then an answer) with recall hits on every
//! user turn, every upstream request starts with the previous one — system prompt, tools and
//! every message — and adds only the newest messages, on each wire API (Anthropic Messages, Chat
//! Completions, Responses).
//!
//! Regression (issue 27): each user turn's simulated `search_memories` pair was gone from the
//! next turn's request, which then shared only the messages before it with the previous
//! request: the provider wrote the previous turn's messages (with an agent, its whole tool loop)
//! to its cache again on every user turn.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod upstream;

use common::{TestServer, default_config};
use serde_json::{Value, json};
use skald_core::pipeline::policy::Policy;
use upstream::{
    Reply, RespItem, Upstream, anthropic_text, anthropic_tool_uses, openai_text, openai_tool_calls,
    responses_answer, responses_text,
};

/// What the user asks on each turn; each finds one of [`FACTS`].
const QUESTIONS: [&str; 10] = [
    "Which port does the staging gateway listen on?",
    "Where is the staging deploy key kept in vault?",
    "Who owns the nightly invoice export job?",
    "What time does the nightly invoice export run?",
    "Which bucket receives the invoice export files?",
    "What is the retention of the invoice export bucket?",
    "Which team reviews staging gateway changes?",
    "How are staging gateway certificates renewed?",
    "Where do the nightly export alerts go?",
    "Which runbook covers a failed invoice export?",
];

const FACTS: [&str; 10] = [
    "The staging gateway listens on port 8443.",
    "The staging deploy key is kept in vault at secret/staging/deploy.",
    "Priya owns the nightly invoice export job.",
    "The nightly invoice export runs at 02:30 UTC.",
    "The invoice export files go to the bucket acme-invoice-exports.",
    "The invoice export bucket keeps files for 400 days of retention.",
    "The platform team reviews staging gateway changes.",
    "Staging gateway certificates are renewed by cert-manager every 60 days.",
    "Nightly export alerts go to the #billing-alerts channel.",
    "The runbook docs/runbooks/invoice-export.md covers a failed invoice export.",
];

async fn server_with_facts(upstream: &Upstream) -> TestServer {
    let mut config = upstream.proxied(default_config());
    // What is recalled is not under test here, where it goes is: every hit is kept. The `none`
    // policy keeps the tool outputs whole, so no offload changes a request either.
    config.engine.memory.recall.min_text_relevance = 0.0;
    config.engine.policy = Policy::preset("none").unwrap();
    let server = TestServer::start(common::test_state(config)).await;
    let client = reqwest::Client::new();
    for fact in FACTS {
        let response = client
            .post(server.url("/v1/memory/remember"))
            .json(&json!({"content": fact, "type": "entities"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    server
}

async fn post(server: &TestServer, path: &str, session: &str, body: &Value) -> Value {
    let response = reqwest::Client::new()
        .post(server.url(path))
        .header("x-skald-session", session)
        .header("authorization", "Bearer sk-provider-123")
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// The output of the command a turn runs: 8,000 characters, what an agent's turn reads.
fn command_output(turn: usize) -> String {
    format!("turn {turn}: checked the configuration, ok\n").repeat(200)
}

/// How one wire API lays out a request: the list of messages (or input items) and the fields
/// that come before them in the cached prefix.
struct Layout {
    messages: &'static str,
    prefix_fields: &'static [&'static str],
}

/// Every request starts with the previous one: the prefix fields are equal and the previous
/// messages are the first messages of the next; and each turn's calls carry one more recall
/// pair than the turn before.
fn assert_every_request_extends_the_previous(upstream: &Upstream, layout: &Layout) {
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2 * QUESTIONS.len());
    for (at, pair) in sent.windows(2).enumerate() {
        let (before, after) = (&pair[0].body, &pair[1].body);
        for field in layout.prefix_fields {
            assert_eq!(
                before[field],
                after[field],
                "request {}: {field} changed",
                at + 1
            );
        }
        let before_messages = before[layout.messages].as_array().unwrap();
        let after_messages = after[layout.messages].as_array().unwrap();
        assert!(
            after_messages.len() > before_messages.len()
                && after_messages[..before_messages.len()] == before_messages[..],
            "request {}: it does not start with the previous one:\n{}\n---\n{}",
            at + 1,
            serde_json::to_string_pretty(before_messages).unwrap(),
            serde_json::to_string_pretty(after_messages).unwrap(),
        );
    }
    let searches = |at: usize| {
        sent[at].body[layout.messages]
            .to_string()
            .matches("search_memories")
            .count()
    };
    // However many times an API's pair names the tool, the first turn has one pair.
    let per_pair = searches(0);
    assert!(per_pair > 0);
    for at in 0..sent.len() {
        assert_eq!(searches(at), (at / 2 + 1) * per_pair, "request {at}");
    }
}

#[tokio::test]
async fn anthropic_requests_keep_their_prefix_over_ten_turns_with_recall_on_each() {
    let upstream = Upstream::start().await;
    let server = server_with_facts(&upstream).await;
    let mut messages: Vec<Value> = Vec::new();
    for (turn, question) in QUESTIONS.iter().enumerate() {
        messages.push(json!({"role": "user", "content": question}));
        let id = format!("toolu_{turn}");
        upstream.push(Reply::Json(
            200,
            anthropic_tool_uses(
                None,
                &[(&id, "bash", json!({"command": "cat config.toml"}))],
            ),
        ));
        let answer = format!("Answer {turn}.");
        upstream.push(Reply::Json(200, anthropic_text(&answer)));
        for call in 0..2 {
            let body = json!({
                "model": "claude-test",
                "max_tokens": 1024,
                "system": "You are an operations assistant.",
                "tools": [{"name": "bash", "description": "Run a command",
                           "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
                "messages": messages,
            });
            let reply = post(&server, "/v1/messages", "s-anthropic", &body).await;
            messages.push(json!({"role": "assistant", "content": reply["content"]}));
            if call == 0 {
                messages.push(json!({"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": id, "content": command_output(turn)}]}));
            } else {
                assert_eq!(reply["content"][0]["text"], answer);
            }
        }
    }
    assert_every_request_extends_the_previous(
        &upstream,
        &Layout {
            messages: "messages",
            prefix_fields: &["system", "tools"],
        },
    );
}

#[tokio::test]
async fn chat_completions_requests_keep_their_prefix_over_ten_turns_with_recall_on_each() {
    let upstream = Upstream::start().await;
    let server = server_with_facts(&upstream).await;
    let mut messages =
        vec![json!({"role": "system", "content": "You are an operations assistant."})];
    for (turn, question) in QUESTIONS.iter().enumerate() {
        messages.push(json!({"role": "user", "content": question}));
        let id = format!("call_{turn}");
        upstream.push(Reply::Json(
            200,
            openai_tool_calls(&[(&id, "bash", json!({"command": "cat config.toml"}))]),
        ));
        let answer = format!("Answer {turn}.");
        upstream.push(Reply::Json(200, openai_text(&answer)));
        for call in 0..2 {
            let body = json!({
                "model": "gpt-test",
                "tools": [{"type": "function", "function": {"name": "bash", "description": "Run a command",
                           "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}],
                "messages": messages,
            });
            let reply = post(&server, "/v1/chat/completions", "s-chat", &body).await;
            messages.push(reply["choices"][0]["message"].clone());
            if call == 0 {
                messages.push(json!({"role": "tool", "tool_call_id": id,
                                     "content": command_output(turn)}));
            } else {
                assert_eq!(reply["choices"][0]["message"]["content"], answer);
            }
        }
    }
    assert_every_request_extends_the_previous(
        &upstream,
        &Layout {
            messages: "messages",
            prefix_fields: &["tools"],
        },
    );
}

#[tokio::test]
async fn responses_requests_keep_their_prefix_over_ten_turns_with_recall_on_each() {
    let upstream = Upstream::start().await;
    let server = server_with_facts(&upstream).await;
    let mut input: Vec<Value> = Vec::new();
    for (turn, question) in QUESTIONS.iter().enumerate() {
        input.push(json!({"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": question}]}));
        let id = format!("call_{turn}");
        upstream.push(Reply::Json(
            200,
            responses_answer(
                &format!("resp_{turn}_a"),
                &[RespItem::Call(
                    &id,
                    "bash",
                    json!({"command": "cat config.toml"}),
                )],
            ),
        ));
        let answer = format!("Answer {turn}.");
        upstream.push(Reply::Json(
            200,
            responses_text(&format!("resp_{turn}_b"), &answer),
        ));
        for call in 0..2 {
            let body = json!({
                "model": "gpt-test",
                "instructions": "You are an operations assistant.",
                "tools": [{"type": "function", "name": "bash", "description": "Run a command",
                           "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
                           "strict": false}],
                "input": input,
                "store": false,
            });
            let reply = post(&server, "/v1/responses", "s-responses", &body).await;
            let output = reply["output"].as_array().unwrap();
            assert_eq!(output.len(), 1, "{reply}");
            input.push(output[0].clone());
            if call == 0 {
                input.push(json!({"type": "function_call_output", "call_id": id,
                                  "output": command_output(turn)}));
            }
        }
    }
    assert_every_request_extends_the_previous(
        &upstream,
        &Layout {
            messages: "input",
            prefix_fields: &["instructions", "tools"],
        },
    );
}
