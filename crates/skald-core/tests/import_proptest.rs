//! No input makes the import decoders or detection panic, and decoded trajectories never hold a
//! tool result whose call is missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};
use skald_core::codec::{self, claude_code, detect, mini_swe, swe_agent};
use skald_core::message::Conversation;

/// Keys the formats use, so random objects reach past the first shape checks.
const KEYS: &[&str] = &[
    "type",
    "role",
    "content",
    "message",
    "messages",
    "history",
    "trajectory",
    "trajectory_format",
    "choices",
    "extra",
    "response",
    "usage",
    "sessionId",
    "id",
    "text",
    "thinking",
    "signature",
    "tool_use_id",
    "is_error",
    "input",
    "name",
    "tool_calls",
    "tool_call_ids",
    "tool_call_id",
    "function",
    "arguments",
    "action",
    "is_demo",
    "message_type",
    "subtype",
    "uuid",
    "timestamp",
    "source",
    "media_type",
    "data",
    "url",
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_details",
    "cached_tokens",
    "input_tokens",
    "output_tokens",
    "model",
    "provider",
    "system",
    "tools",
    "input_schema",
    "isMeta",
    "toolUseResult",
    "replay_config",
    "agent",
    "created",
    "finish_reason",
    "version",
    "returncode",
];

/// Strings the formats give meaning to.
const WORDS: &[&str] = &[
    "user",
    "assistant",
    "system",
    "tool",
    "text",
    "tool_use",
    "tool_result",
    "thinking",
    "image",
    "base64",
    "url",
    "compact_boundary",
    "progress",
    "session",
    "message",
    "file-history-snapshot",
    "mini-swe-agent-1",
    "observation",
    "call_1",
    "toolu_1",
    "msg_1",
    "```bash\nls\n```",
    "```\nls -a\n```",
    "<returncode>0</returncode>\nok",
    "<returncode>1</returncode>",
    "<returncode>",
    "ls -a",
    "",
    "\u{feff}",
    "é…",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e20f64..1e20).prop_map(Value::from),
        select(WORDS).prop_map(|word| Value::String(word.to_owned())),
        "[a-z`<>\n ]{0,12}".prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((select(KEYS), inner), 0..6).prop_map(|pairs| {
                Value::Object(
                    pairs
                        .into_iter()
                        .map(|(key, value)| (key.to_owned(), value))
                        .collect::<Map<String, Value>>(),
                )
            }),
        ]
    })
}

/// A block of Anthropic content, often valid, sometimes not.
fn anthropic_block() -> impl Strategy<Value = Value> {
    (
        select(
            &[
                "text",
                "thinking",
                "tool_use",
                "tool_result",
                "image",
                "other",
            ][..],
        ),
        select(&["toolu_1", "toolu_2"][..]),
        json_value(),
        any::<bool>(),
    )
        .prop_map(|(kind, id, payload, valid)| {
            let mut block = Map::new();
            block.insert("type".into(), Value::String(kind.into()));
            let text = if valid {
                Value::String("t".into())
            } else {
                payload.clone()
            };
            match kind {
                "text" => {
                    block.insert("text".into(), text);
                }
                "thinking" => {
                    block.insert("thinking".into(), text);
                    block.insert("signature".into(), payload);
                }
                "tool_use" => {
                    block.insert("id".into(), Value::String(id.into()));
                    block.insert("name".into(), text);
                    block.insert("input".into(), payload);
                }
                "tool_result" => {
                    block.insert("tool_use_id".into(), Value::String(id.into()));
                    block.insert("content".into(), payload);
                    block.insert("is_error".into(), Value::Bool(valid));
                }
                _ => {
                    block.insert("source".into(), payload);
                }
            }
            Value::Object(block)
        })
}

fn claude_code_line() -> impl Strategy<Value = String> {
    (
        select(&["user", "assistant", "system", "progress", "queue-operation"][..]),
        select(&["msg_1", "msg_2"][..]),
        prop::collection::vec(anthropic_block(), 0..4),
        json_value(),
        any::<bool>(),
        any::<u8>(),
    )
        .prop_map(|(kind, id, blocks, noise, meta, mode)| {
            let line = match mode % 4 {
                0 => serde_json::json!({
                    "type": kind, "sessionId": "s", "isMeta": meta, "subtype": "compact_boundary",
                    "message": {"id": id, "role": kind, "content": blocks, "usage": noise},
                }),
                1 => serde_json::json!({"type": kind, "sessionId": "s", "message": noise}),
                2 => serde_json::json!({
                    "type": kind, "message": {"content": "plain", "id": id}, "toolUseResult": noise,
                }),
                _ => noise,
            };
            line.to_string()
        })
}

fn trajectory_message() -> impl Strategy<Value = Value> {
    (
        select(&["system", "user", "assistant", "tool", "exit"][..]),
        select(WORDS),
        select(&[
            "THOUGHT\n```bash\nls\n```",
            "```bash\na\n```\n```bash\nb\n```",
            "<returncode>0</returncode>\nok",
            "<returncode>2</returncode>",
            "x\n```\nls -a\n```",
            "plain",
        ][..]),
        json_value(),
        any::<u8>(),
    )
        .prop_map(|(role, word, content, noise, mode)| {
            let mut message = Map::new();
            message.insert("role".into(), Value::String(role.into()));
            message.insert("content".into(), Value::String(content.into()));
            if mode & 1 != 0 {
                message.insert("action".into(), Value::String("ls -a".into()));
            }
            if mode & 2 != 0 {
                message.insert(
                    "tool_calls".into(),
                    serde_json::json!([{"id": word, "function": {"name": "bash", "arguments": "{}"}}]),
                );
            }
            if mode & 4 != 0 {
                message.insert("tool_call_id".into(), Value::String(word.into()));
                message.insert("tool_call_ids".into(), serde_json::json!([word]));
            }
            if mode & 8 != 0 {
                message.insert("extra".into(), serde_json::json!({"response": noise}));
            }
            if mode & 16 != 0 {
                message.insert("content".into(), noise);
            }
            if mode & 32 != 0 {
                message.insert("is_demo".into(), Value::Bool(true));
            }
            Value::Object(message)
        })
}

/// Every tool result answers a call that appears before it.
fn results_have_calls(conversation: &Conversation) -> bool {
    let mut calls = HashSet::new();
    for message in &conversation.messages {
        for call in message.tool_calls() {
            calls.insert(call.id.clone());
        }
        if message
            .tool_results()
            .any(|result| !calls.contains(&result.call_id))
        {
            return false;
        }
    }
    true
}

fn decode_everything(input: &str) {
    let _ = detect(input);
    let _ = codec::decode(input);
    let _ = claude_code::decode(input);
    let _ = mini_swe::decode(input);
    let _ = swe_agent::decode(input);
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(input in any::<String>()) {
        decode_everything(&input);
    }

    #[test]
    fn arbitrary_json_never_panics(value in json_value()) {
        decode_everything(&value.to_string());
        let _ = mini_swe::decode_value(&value);
        let _ = swe_agent::decode_value(&value);
    }

    #[test]
    fn arbitrary_json_lines_never_panic(values in prop::collection::vec(json_value(), 0..6)) {
        let input: String = values.iter().map(|value| format!("{value}\n")).collect();
        decode_everything(&input);
    }

    #[test]
    fn claude_code_like_sessions_never_panic(lines in prop::collection::vec(claude_code_line(), 0..12)) {
        let input = lines.join("\n");
        decode_everything(&input);
        if let Ok(read) = claude_code::decode(&input) {
            let messages = &read.conversation.messages;
            for index in 0..=messages.len() + 1 {
                prop_assert!(claude_code::request_start(messages, index) <= index.min(messages.len()));
            }
        }
    }

    #[test]
    fn trajectories_never_reference_missing_calls(
        messages in prop::collection::vec(trajectory_message(), 0..10),
    ) {
        let mini = serde_json::json!({"trajectory_format": "mini-swe-agent-1", "messages": messages});
        if let Ok(conversation) = mini_swe::decode_value(&mini) {
            prop_assert!(results_have_calls(&conversation));
        }
        let swe = serde_json::json!({"history": messages, "trajectory": []});
        if let Ok(conversation) = swe_agent::decode_value(&swe) {
            prop_assert!(results_have_calls(&conversation));
        }
        decode_everything(&mini.to_string());
        decode_everything(&swe.to_string());
    }
}
