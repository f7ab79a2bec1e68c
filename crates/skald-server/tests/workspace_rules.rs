//! Workspace rules reach every compaction (issue 28, gap 3): the rules files a host loads into
//! its requests — Claude Code's CLAUDE.md block in the first user message, Codex's AGENTS.md
//! message — are found by the compaction the proxy runs after an overflow, and appended to its
//! summary as `<workspace-critical-rules>`, so the model keeps them once the message that held
//! them is summarised away. The blocks are the ones the real CLIs sent (Claude Code 2.1.332,
//! Codex 0.169), captured from their requests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod upstream;

use common::{TestServer, default_config};
use serde_json::{Value, json};
use skald_core::pipeline::policy::Policy;
use skald_server::ServerConfig;
use upstream::{Reply, Upstream, anthropic_overflow, anthropic_text, openai_overflow, openai_text};

/// Claude Code 2.1.332's text block for a workspace whose CLAUDE.md has a "Red Lines" section.
const CLAUDE_MD_BLOCK: &str = "<system-reminder>\nCodebase and user instructions are shown below. Be sure to adhere to these instructions. IMPORTANT: These instructions OVERRIDE any default behavior and you MUST follow them exactly as written.\n\nContents of /work/app/CLAUDE.md (project instructions, checked into the codebase):\n\n# Project rules\n\nAlways run `make check` before committing.\n\n## Red Lines\n\nNever push to main.\n</system-reminder>";

/// Codex 0.169's user message for a workspace with an AGENTS.md.
const AGENTS_MD_MESSAGE: &str = "# AGENTS.md instructions for /work/app\n\n<INSTRUCTIONS>\n# Agents\n\nIndent with tabs, never spaces.\n\n</INSTRUCTIONS>";

fn config(upstream: &Upstream) -> ServerConfig {
    let mut config = upstream.proxied(default_config());
    config.engine.policy = Policy::preset("none").unwrap();
    config.engine.window_tokens = 8_192;
    config.engine.compaction.reserve_tokens = 512;
    config.engine.memory.enabled = false;
    config
}

/// Six turns of build logs (about 6,600 estimated tokens) after `first`, as OpenAI messages.
fn history(first: Vec<Value>) -> Vec<Value> {
    let mut messages = first;
    for (turn, size) in [8_000, 8_000, 8_000, 300, 300, 300].iter().enumerate() {
        let log: String = (0..)
            .map(|line| format!("build {turn} line {line}: linking /srv/app/src/main_{turn}.rs\n"))
            .scan(0, |len, line| {
                *len += line.len();
                (*len <= *size).then_some(line)
            })
            .collect();
        messages
            .push(json!({"role": "user", "content": format!("Step {turn}: check build {turn}.")}));
        messages.push(json!({"role": "assistant", "content": format!("Build {turn}: {log}")}));
    }
    messages.push(json!({"role": "user", "content": "Which builds failed?"}));
    messages
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

/// The summary the retried request carries after the overflow's compaction.
fn retried_summary(upstream: &Upstream) -> String {
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2, "an overflow, then the retry");
    let body = sent[1].body.to_string();
    let at = body
        .find("<summary>")
        .unwrap_or_else(|| panic!("no summary in the retry: {body:.3000}"));
    body[at..].to_owned()
}

#[tokio::test]
async fn claude_codes_claude_md_block_survives_the_compaction_of_its_message() {
    let upstream = Upstream::start().await;
    let server = TestServer::start(common::test_state(config(&upstream))).await;
    upstream.push(anthropic_overflow());
    upstream.push(Reply::Json(200, anthropic_text("Builds 0 to 2 fail.")));
    // Claude Code's first user message: its reminders, the CLAUDE.md block, then the prompt.
    let first = json!({"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>\nToday's date is 2026-12-07.\n</system-reminder>"},
        {"type": "text", "text": CLAUDE_MD_BLOCK},
        {"type": "text", "text": "Look at the failing builds."},
    ]});
    let messages = history(vec![
        first,
        json!({"role": "assistant", "content": "On it."}),
    ]);
    let request = json!({"model": "claude-test", "max_tokens": 512,
        "system": [{"type": "text", "text": "You are Claude Code."}], "messages": messages});
    let response = post(&server, "/v1/messages", "s-claude-md", &request).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let summary = retried_summary(&upstream);
    let rules = summary
        .find("<workspace-critical-rules>")
        .map(|at| &summary[at..])
        .unwrap_or_else(|| panic!("no critical rules in the summary: {summary:.4000}"));
    assert!(
        rules.contains("From /work/app/CLAUDE.md:") && rules.contains("Never push to main."),
        "{rules:.1000}"
    );
    // The file's seed section only, since it has one.
    assert!(!rules[..rules.find("</workspace-critical-rules>").unwrap()].contains("make check"));
}

#[tokio::test]
async fn codexs_agents_md_message_survives_the_compaction_of_its_message() {
    let upstream = Upstream::start().await;
    let server = TestServer::start(common::test_state(config(&upstream))).await;
    upstream.push(openai_overflow());
    upstream.push(Reply::Json(200, openai_text("Builds 0 to 2 fail.")));
    let messages = history(vec![
        json!({"role": "system", "content": "You are a coding agent running in the Codex CLI."}),
        json!({"role": "user", "content": AGENTS_MD_MESSAGE}),
    ]);
    let request = json!({"model": "gpt-test", "messages": messages});
    let response = post(&server, "/v1/chat/completions", "s-agents-md", &request).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let summary = retried_summary(&upstream);
    assert!(
        summary.contains("<workspace-critical-rules>")
            && summary.contains("From AGENTS.md for /work/app:")
            && summary.contains("Indent with tabs, never spaces."),
        "{summary:.4000}"
    );
}
