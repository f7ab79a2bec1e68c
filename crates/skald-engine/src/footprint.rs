//! Approximate heap sizes of what a [`crate::SessionState`] holds, for the server's byte budget
//! on its cache of session states.
//!
//! The estimate counts the bytes of every string (text, thinking, tool arguments and results,
//! ids, JSON values' strings and keys) plus the inline size of each struct, block and JSON node
//! that holds them. It does not count allocator overhead, the spare capacity of strings and
//! vectors, or hash tables' empty buckets: the figure is a lower bound that tracks what grows
//! (a large tool output is its length, one for one), not an exact `malloc` total. Walking is
//! proportional to the number of blocks and JSON nodes, never to the text's length (a
//! `String`'s length is known), so sizing a 50 MB output costs as much as a short one.

use std::mem::size_of;

use serde_json::Value;
use skald_core::message::{Block, ImageSource, Message};
use skald_core::session::{Entry, EntryKind};

/// A `HashMap`/`HashSet` entry's bookkeeping beyond its key and value (control byte and load
/// factor slack of hashbrown, rounded): so a map of many small entries is not counted as free.
pub(crate) const MAP_ENTRY_OVERHEAD: usize = 16;

/// A string held as a map key or set member: its text, its `String` and the map's slot.
pub(crate) fn string_entry_bytes(text: &str) -> usize {
    text.len() + size_of::<String>() + MAP_ENTRY_OVERHEAD
}

/// One stored session entry, with its slot in the session's id index.
pub(crate) fn entry_bytes(entry: &Entry) -> usize {
    let inline = size_of::<Entry>() + string_entry_bytes(&entry.id) + size_of::<usize>();
    inline
        + entry.id.len()
        + option_string(entry.parent_id.as_ref())
        + entry.timestamp.len()
        + kind_bytes(&entry.kind)
        + extra_bytes(&entry.extra)
}

fn kind_bytes(kind: &EntryKind) -> usize {
    match kind {
        EntryKind::Message(message) => message_heap_bytes(message),
        EntryKind::Compaction {
            summary,
            first_kept_entry_id,
            details,
            ..
        } => summary.len() + option_string(first_kept_entry_id.as_ref()) + option_value(details),
        EntryKind::Reset {
            reason,
            first_kept_entry_id,
        } => option_string(reason.as_ref()) + option_string(first_kept_entry_id.as_ref()),
        EntryKind::BranchSummary {
            from_id,
            summary,
            details,
            ..
        } => from_id.len() + summary.len() + option_value(details),
        EntryKind::Custom { custom_type, data } => custom_type.len() + option_value(data),
        EntryKind::CustomMessage {
            custom_type,
            content,
            details,
            ..
        } => custom_type.len() + blocks_bytes(content) + option_value(details),
        EntryKind::ThinkingLevelChange { thinking_level } => thinking_level.len(),
        EntryKind::ModelChange { provider, model_id } => provider.len() + model_id.len(),
        EntryKind::Label { target_id, label } => target_id.len() + option_string(label.as_ref()),
        EntryKind::SessionInfo { name } => option_string(name.as_ref()),
        EntryKind::Other(body) => extra_bytes(body),
    }
}

/// A message held in a vector: its inline size and what it owns.
pub(crate) fn message_bytes(message: &Message) -> usize {
    size_of::<Message>() + message_heap_bytes(message)
}

/// Messages held in a vector.
pub(crate) fn messages_bytes(messages: &[Message]) -> usize {
    messages.iter().map(message_bytes).sum()
}

fn message_heap_bytes(message: &Message) -> usize {
    let meta = &message.meta;
    blocks_bytes(&message.content)
        + option_string(meta.id.as_ref())
        + option_string(meta.model.as_ref())
        + option_string(meta.provider.as_ref())
        + extra_bytes(&message.extra)
}

fn blocks_bytes(blocks: &[Block]) -> usize {
    blocks.iter().map(block_bytes).sum()
}

fn block_bytes(block: &Block) -> usize {
    size_of::<Block>()
        + match block {
            Block::Text(text) => text.text.len() + extra_bytes(&text.extra),
            Block::Image(image) => {
                let source = match &image.source {
                    ImageSource::Base64 { media_type, data } => media_type.len() + data.len(),
                    ImageSource::Url { url } => url.len(),
                };
                source + extra_bytes(&image.extra)
            }
            Block::Thinking(thinking) => {
                thinking.thinking.len()
                    + option_string(thinking.signature.as_ref())
                    + extra_bytes(&thinking.extra)
            }
            Block::ToolCall(call) => {
                call.id.len()
                    + call.name.len()
                    + value_heap_bytes(&call.arguments)
                    + option_string(call.arguments_text.as_ref())
                    + extra_bytes(&call.extra)
            }
            Block::ToolResult(result) => {
                result.call_id.len()
                    + option_string(result.tool_name.as_ref())
                    + blocks_bytes(&result.content)
                    + result.details.as_deref().map_or(0, value_heap_bytes)
                    + extra_bytes(&result.extra)
            }
            Block::Opaque(value) => value_heap_bytes(value),
        }
}

fn option_string(text: Option<&String>) -> usize {
    text.map_or(0, String::len)
}

fn option_value(value: &Option<Value>) -> usize {
    value.as_ref().map_or(0, value_heap_bytes)
}

fn extra_bytes(extra: &serde_json::Map<String, Value>) -> usize {
    extra
        .iter()
        .map(|(key, value)| string_entry_bytes(key) + size_of::<Value>() + value_heap_bytes(value))
        .sum()
}

/// What a JSON value owns beyond its own inline size.
fn value_heap_bytes(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        Value::String(text) => text.len(),
        Value::Array(items) => items
            .iter()
            .map(|item| size_of::<Value>() + value_heap_bytes(item))
            .sum(),
        Value::Object(map) => extra_bytes(map),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use skald_core::message::Role;

    use super::*;

    #[test]
    fn a_message_counts_its_text_one_for_one() {
        let short = message_bytes(&Message::text(Role::User, "x"));
        let long = message_bytes(&Message::text(Role::User, "x".repeat(1_000_001)));
        assert_eq!(long - short, 1_000_000);
    }

    #[test]
    fn json_strings_and_keys_are_counted() {
        let small = value_heap_bytes(&serde_json::json!({"a": "b"}));
        let large = value_heap_bytes(&serde_json::json!({"a": "b".repeat(101), "c": [1, 2]}));
        assert!(large >= small + 100 + 1 + 2 * size_of::<Value>());
    }
}
