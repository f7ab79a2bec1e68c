//! `replay` billed as the host was: on a Claude-Code-shaped transcript whose recorded usage
//! follows Anthropic's documented caching (a host prefix of tools and system prompt, a read of
//! everything the previous call sent while the conversation only grows, the system prefix alone
//! once a new user turn drops the earlier turns' thinking), the `none` replay with the fitted
//! host reproduces the recorded bill, and the fit finds the host's prefix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use skald_core::message::{
    Block, ContentForm, Extra, Message, Role, ThinkingBlock, Timestamp, ToolCall, ToolResult, Usage,
};
use skald_core::pipeline::policy::Policy;
use skald_core::tokens::{Encoding, TokenCounter};
use skald_engine::replay::{
    PolicyFigures, ProviderCache, ReplaySettings, billed, host_fit, provider_view, replay,
};

/// The host's tools and system prompt, in provider tokens.
const SYSTEM_PREFIX: u64 = 21_000;
/// What the host adds to the first message without recording it.
const UNRECORDED: u64 = 4_000;

fn thinking(text: &str) -> Block {
    Block::Thinking(ThinkingBlock {
        thinking: text.repeat(40),
        signature: Some("sig".to_owned()),
        extra: Default::default(),
    })
}

fn answer(text: &str, with_thinking: bool, call_id: Option<&str>) -> Message {
    let mut message = Message::text(Role::Assistant, text);
    if with_thinking {
        message.content.insert(0, thinking(text));
    }
    if let Some(id) = call_id {
        message.content.push(Block::ToolCall(ToolCall {
            id: id.to_owned(),
            name: "read".to_owned(),
            arguments: serde_json::json!({"path": format!("lib/{id}.ex")}),
            arguments_text: None,
            extra: Extra::new(),
        }));
    }
    message
}

fn tool_output(call_id: &str, text: String) -> Message {
    Message::new(
        Role::ToolResult,
        vec![Block::ToolResult(ToolResult {
            call_id: call_id.to_owned(),
            tool_name: Some("read".to_owned()),
            content: vec![Block::text(text)].into(),
            content_form: ContentForm::Blocks,
            is_error: Some(false),
            details: None,
            extra: Extra::new(),
        })],
    )
}

/// A conversation of three user turns, each answered over several calls: only the user's asks
/// start a turn, tool results continue one. A turn is longer than the provider's lookback from a
/// breakpoint, so a new turn that drops the thinking before it finds no entry but the system
/// prompt's (the rule `record_usage` bills by).
fn conversation() -> Vec<Message> {
    let mut messages = Vec::new();
    for turn in 0..3 {
        messages.push(Message::text(
            Role::User,
            format!("ask number {turn}: look at the ledger module and fix the rounding"),
        ));
        for step in 0..12 {
            let id = format!("call_{turn}_{step}");
            messages.push(answer(
                &format!("turn {turn} step {step}: reading more of the code "),
                step % 2 == 0,
                Some(&id),
            ));
            messages.push(tool_output(
                &id,
                format!("output {turn}.{step}: ").repeat(300),
            ));
        }
        messages.push(answer(&format!("turn {turn} is done"), false, None));
    }
    messages
}

/// Records on every answer the usage Anthropic would report for the request that produced it,
/// by the rule written out here (not by the replay's own cache model), and a timestamp.
fn record_usage(messages: &mut [Message]) {
    let mut counter = TokenCounter::new(Encoding::O200kBase);
    let mut previous: Option<(Vec<Message>, u64)> = None;
    for index in 0..messages.len() {
        if messages[index].role != Role::Assistant {
            continue;
        }
        let request = provider_view(&messages[..index], ProviderCache::Anthropic).into_owned();
        let total = SYSTEM_PREFIX + UNRECORDED + counter.count_messages(&request);
        let read = match &previous {
            None => 0,
            Some((before, before_total)) if request.starts_with(before) => *before_total,
            Some(_) => SYSTEM_PREFIX,
        };
        let message = &mut messages[index];
        message.meta.usage = Some(Usage {
            input: 0,
            output: 50,
            cache_read: read,
            cache_write: total - read,
            cache_write_1h: 0,
        });
        message.meta.timestamp = Some(Timestamp::Millis(1_700_000_000_000 + index as i64 * 5_000));
        previous = Some((request, total));
    }
}

fn settings() -> ReplaySettings {
    ReplaySettings {
        provider_cache: ProviderCache::Anthropic,
        ..ReplaySettings::default()
    }
}

/// The `none` policy's replay of `messages`.
fn replay_none(messages: &[Message], settings: &ReplaySettings) -> PolicyFigures {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(replay(messages, &Policy::preset("none").unwrap(), settings))
        .unwrap()
}

#[test]
fn none_billed_as_the_host_reproduces_the_recorded_bill() {
    let mut messages = conversation();
    record_usage(&mut messages);
    let mut settings = settings();
    let fit = host_fit(&messages, &settings).unwrap();
    assert_eq!(fit.prefix_tokens, SYSTEM_PREFIX + UNRECORDED);
    assert!((fit.tokens_per_bpe_token - 1.0).abs() < 1e-9, "{fit:?}");
    assert_eq!(
        fit.system_prefix_tokens, SYSTEM_PREFIX,
        "the read after a new turn dropped the thinking is the system prefix"
    );
    assert!(fit.prefix_changes.is_empty(), "{fit:?}");
    settings.host = Some(fit);
    let bill = billed(&messages, &settings.pricing).unwrap();
    let none = replay_none(&messages, &settings);
    let host = none.host.unwrap();
    assert_eq!(host.input_tokens, bill.input_tokens);
    assert_eq!(host.cache_read_tokens, bill.cache_read_tokens);
    let share = host.cost_usd / bill.cost_usd;
    assert!((share - 1.0).abs() < 1e-6, "none costs {share} of the bill");
    // The old figures stay what they were: the messages alone, no host.
    assert!(none.input_tokens < host.input_tokens);
}

#[test]
fn without_dropping_earlier_thinking_the_replay_would_miss_the_breaks_of_a_new_turn() {
    let mut messages = conversation();
    record_usage(&mut messages);
    let mut settings = ReplaySettings {
        provider_cache: ProviderCache::Automatic,
        ..ReplaySettings::default()
    };
    settings.host = host_fit(&messages, &settings);
    let none = replay_none(&messages, &settings);
    let bill = billed(&messages, &settings.pricing).unwrap();
    assert!(
        none.host.unwrap().cache_read_tokens > bill.cache_read_tokens,
        "a cache that keeps the thinking reads through the new turns"
    );
}

#[test]
fn a_transcript_without_recorded_usage_has_no_host_figures() {
    let messages = conversation();
    let settings = settings();
    assert!(host_fit(&messages, &settings).is_none());
    let none = replay_none(&messages, &settings);
    assert!(none.host.is_none());
}
