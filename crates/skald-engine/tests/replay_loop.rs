//! `skald_engine::replay::replay` makes every recorded call again through the engine's turn
//! loop: a use the request shows only behind a ref makes the model fetch it in a hidden round,
//! billed as the call it is; memory and skald's threshold compaction run as `skald serve` runs
//! them (and never for the `none` baseline); the prefix breaks they cause are named.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use skald_core::message::{
    Block, ContentForm, Extra, Message, Role, StopReason, ToolCall, ToolResult,
};
use skald_core::pipeline::policy::Policy;
use skald_engine::replay::{PolicyFigures, ReplaySettings, replay};

fn call(id: &str, name: &str, arguments: serde_json::Value) -> Message {
    Message::new(
        Role::Assistant,
        vec![Block::ToolCall(ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments,
            arguments_text: None,
            extra: Extra::new(),
        })],
    )
}

fn result(id: &str, name: &str, text: &str) -> Message {
    Message::new(
        Role::ToolResult,
        vec![Block::ToolResult(ToolResult {
            call_id: id.to_owned(),
            tool_name: Some(name.to_owned()),
            content: vec![Block::text(text)].into(),
            content_form: ContentForm::Text,
            is_error: None,
            details: None,
            extra: Extra::new(),
        })],
    )
}

/// A long build log with one ordinary line naming `culprit` in its middle (an error line would
/// stay in the offload's summary).
fn build_log(lines: usize, culprit: &str) -> String {
    (0..lines)
        .map(|n| {
            if n == lines / 2 {
                format!("2026-01-01 INFO step {n:03} linked {culprit} ok\n")
            } else {
                format!("2026-01-01 INFO step {n:03} compiled crates/app/src/module_{n}.rs ok\n")
            }
        })
        .collect()
}

const CULPRIT: &str = "target/debug/deps/libledger-4f2a9c81.rlib";

/// A session whose last answer names a path that only the first, long tool output showed.
fn session_that_needs_an_offloaded_line() -> Vec<Message> {
    vec![
        Message::text(Role::User, "Why does the build fail?"),
        call("c1", "bash", json!({"command": "cargo build"})),
        result("c1", "bash", &build_log(600, CULPRIT)),
        call("c2", "bash", json!({"command": "git status --short"})),
        result("c2", "bash", " M Cargo.lock\n"),
        call("c3", "bash", json!({"command": "ls crates"})),
        result("c3", "bash", "app\nledger\n"),
        Message::text(
            Role::Assistant,
            format!("The build links {CULPRIT}, which is stale."),
        ),
    ]
}

async fn replayed(messages: &[Message], policy: &str, settings: &ReplaySettings) -> PolicyFigures {
    replay(messages, &Policy::preset(policy).unwrap(), settings)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_use_only_behind_a_ref_makes_the_model_fetch_it_in_a_hidden_round_billed_as_a_call() {
    let messages = session_that_needs_an_offloaded_line();
    let settings = ReplaySettings::default();
    let skald = replayed(&messages, "skald", &settings).await;
    let none = replayed(&messages, "none", &settings).await;
    assert!(skald.offloads >= 1, "the long log goes behind a ref");
    assert_eq!(skald.retention.uses, 1, "{:?}", skald.retention);
    assert_eq!(
        skald.retention.visible_uses, 0,
        "the request shows the path only behind the ref"
    );
    assert_eq!(skald.retention.recoverable, 1.0);
    assert_eq!(skald.hidden_rounds, 1, "the model fetches the line first");
    assert!(
        skald.fetch_penalty_tokens > 0,
        "the hidden round's call is billed"
    );
    assert_eq!(
        skald.calls, none.calls,
        "a hidden round is no recorded call"
    );
    assert_eq!(none.hidden_rounds, 0);
    assert_eq!(none.retention.visible, 1.0);
    assert_eq!(
        skald.prefix_breaks.total - skald.prefix_breaks.offload,
        0,
        "the hidden round extends the request it follows: {:?}",
        skald.prefix_breaks
    );
}

/// A long conversation of user turns, each carrying `tokens_per_turn` tokens of prose (which no
/// stage offloads), answered in words.
fn long_conversation(turns: usize, tokens_per_turn: usize) -> Vec<Message> {
    let mut messages = Vec::new();
    for turn in 0..turns {
        let prose: String = (0..tokens_per_turn / 8)
            .map(|n| format!("the ledger module {turn} keeps decision {n} "))
            .collect();
        messages.push(Message::text(
            Role::User,
            format!("Turn {turn}: we decided that the ledger rounds half-even. {prose}"),
        ));
        messages.push(Message::text(
            Role::Assistant,
            format!("Noted for turn {turn}: the ledger rounds half-even."),
        ));
    }
    messages
}

#[tokio::test]
async fn skald_compacts_over_its_threshold_and_names_the_break_while_the_baseline_never_does() {
    let messages = long_conversation(24, 3_000);
    // Memory off: its upload would drop the old turns before compaction is needed.
    let settings = ReplaySettings {
        context_window_tokens: 60_000,
        memory: false,
        ..ReplaySettings::default()
    };
    let skald = replayed(&messages, "skald", &settings).await;
    assert!(skald.compactions >= 1, "{skald:?}");
    assert!(
        skald.prefix_breaks.compaction >= 1,
        "{:?}",
        skald.prefix_breaks
    );
    assert!(
        skald.peak_context_tokens < 60_000,
        "compaction keeps the request inside the window: {}",
        skald.peak_context_tokens
    );
    let none = replayed(&messages, "none", &settings).await;
    assert_eq!(none.compactions, 0, "the host compacts on its own");
    assert_eq!(none.recalls, 0);
    assert_eq!(none.prefix_breaks.total, 0, "{:?}", none.prefix_breaks);

    let no_compaction = ReplaySettings {
        compaction: false,
        ..settings.clone()
    };
    let uncompacted = replayed(&messages, "skald", &no_compaction).await;
    assert_eq!(uncompacted.compactions, 0);
    assert!(uncompacted.peak_context_tokens > skald.peak_context_tokens);
}

#[tokio::test]
async fn memory_recalls_what_the_upload_kept_and_no_memory_turns_it_off() {
    let messages = long_conversation(24, 3_000);
    let settings = ReplaySettings {
        context_window_tokens: 60_000,
        ..ReplaySettings::default()
    };
    let with_memory = replayed(&messages, "skald", &settings).await;
    assert!(
        with_memory.recalls >= 1 && with_memory.recall_tokens > 0,
        "what left the context comes back as recalled memories: {with_memory:?}"
    );
    let without = ReplaySettings {
        memory: false,
        ..settings.clone()
    };
    assert!(
        with_memory.prefix_breaks.upload >= 1,
        "the upload drops what it uploaded: {:?}",
        with_memory.prefix_breaks
    );
    let without_memory = replayed(&messages, "skald", &without).await;
    assert_eq!(without_memory.recalls, 0);
    assert_eq!(without_memory.prefix_breaks.recall, 0);
    assert_eq!(without_memory.prefix_breaks.upload, 0);
    assert!(
        without_memory.input_tokens < with_memory.input_tokens,
        "memory's tools and recalls are in the bill"
    );
}

/// Regression: a transcript holding the host's own overflow (an assistant error "prompt is too
/// long") made the replay's loop recover from it, retry with the same recorded answer, and give
/// up with an error that ended the whole replay.
#[tokio::test]
async fn the_hosts_own_overflow_in_a_transcript_is_history_not_a_failure_of_the_replay() {
    let mut messages = session_that_needs_an_offloaded_line();
    let mut overflow = Message::text(
        Role::Assistant,
        "prompt is too long: 212000 tokens > 200000 maximum",
    );
    overflow.meta.stop_reason = Some(StopReason::Error);
    messages.insert(5, overflow);
    messages.insert(6, Message::text(Role::User, "Go on."));
    let settings = ReplaySettings::default();
    for policy in ["none", "skald"] {
        let figures = replayed(&messages, policy, &settings).await;
        assert_eq!(
            figures.calls,
            messages
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .count() as u64,
            "{policy}: every recorded call once"
        );
        assert_eq!(figures.compactions, 0, "{policy}: nothing to recover from");
    }
}
