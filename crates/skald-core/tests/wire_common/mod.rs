//! Helpers shared by the wire codec tests: fixture loading, JSON walks and proptest strategies
//! for arbitrary and mutated JSON.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::Value;

/// Field names and values the codecs look at, so random JSON reaches past the first check.
pub const WORDS: &[&str] = &[
    "role",
    "content",
    "messages",
    "tools",
    "type",
    "text",
    "image_url",
    "url",
    "detail",
    "tool_calls",
    "function",
    "name",
    "arguments",
    "id",
    "tool_call_id",
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "choices",
    "message",
    "usage",
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_details",
    "cached_tokens",
    "finish_reason",
    "created",
    "model",
    "source",
    "base64",
    "media_type",
    "data",
    "tool_use",
    "tool_result",
    "tool_use_id",
    "input",
    "is_error",
    "thinking",
    "signature",
    "input_schema",
    "stop_reason",
    "max_tokens",
    "image",
    "description",
    "parameters",
    "function_call",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "redacted_thinking",
    "refusal",
];

pub fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("fixture is JSON")
}

/// Every key of every object in `value`, at any depth.
pub fn keys(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(value, &mut |v| {
        if let Value::Object(map) = v {
            out.extend(map.keys().cloned());
        }
    });
    out
}

pub fn walk(value: &Value, visit: &mut dyn FnMut(&Value)) {
    visit(value);
    match value {
        Value::Array(items) => items.iter().for_each(|item| walk(item, visit)),
        Value::Object(map) => map.values().for_each(|item| walk(item, visit)),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// No hint key and no `details` anywhere in encoded output.
pub fn assert_clean(encoded: &Value) {
    for key in keys(encoded) {
        assert!(
            !key.starts_with("skald:"),
            "hint key {key} leaked into {encoded}"
        );
        assert_ne!(key, "details", "details leaked into {encoded}");
    }
}

/// JSON pointers of every value in `value`.
pub fn pointers(value: &Value) -> Vec<String> {
    fn go(value: &Value, at: String, out: &mut Vec<String>) {
        match value {
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    go(item, format!("{at}/{index}"), out);
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    let escaped = key.replace('~', "~0").replace('/', "~1");
                    go(item, format!("{at}/{escaped}"), out);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
        }
        out.push(at);
    }
    let mut out = Vec::new();
    go(value, String::new(), &mut out);
    out
}

pub fn arb_json() -> impl Strategy<Value = Value> {
    let word = prop::sample::select(WORDS).prop_map(|word| word.to_owned());
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        word.clone().prop_map(Value::String),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 96, 6, move |inner| {
        let key = prop_oneof![word.clone(), ".{0,6}"];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..7)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

/// `base` with one value (chosen by `pick`) replaced by `replacement` or removed.
pub fn mutate(base: &Value, pick: usize, replacement: Value, remove: bool) -> Value {
    let mut out = base.clone();
    let targets = pointers(base);
    let Some(target) = targets.get(pick % targets.len().max(1)) else {
        return replacement;
    };
    if target.is_empty() {
        return replacement;
    }
    let (parent, last) = target.rsplit_once('/').unwrap();
    match out.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            let key = last.replace("~1", "/").replace("~0", "~");
            if remove {
                map.remove(&key);
            } else {
                map.insert(key, replacement);
            }
        }
        Some(Value::Array(items)) => {
            let index: usize = last.parse().unwrap();
            if remove {
                items.remove(index);
            } else {
                items[index] = replacement;
            }
        }
        Some(_) | None => {}
    }
    out
}

pub fn text_block(block: &skald_core::message::Block) -> &skald_core::message::TextBlock {
    let skald_core::message::Block::Text(text) = block else {
        panic!("expected a text block, found {block:?}");
    };
    text
}

pub fn image_block(block: &skald_core::message::Block) -> &skald_core::message::ImageBlock {
    let skald_core::message::Block::Image(image) = block else {
        panic!("expected an image block, found {block:?}");
    };
    image
}

pub fn call_block(block: &skald_core::message::Block) -> &skald_core::message::ToolCall {
    let skald_core::message::Block::ToolCall(call) = block else {
        panic!("expected a tool call, found {block:?}");
    };
    call
}
