//! Offloading long string arguments of tool calls ([`offload_arguments`]): the bulk of a call
//! (a file it wrote, the text it replaced) goes to a ref and its placeholder takes the value's
//! place, while the call's id, name and other arguments stay; [`ArgumentsCache`] remembers each
//! call's outcome.

use std::collections::HashMap;

use xxhash_rust::xxh3::Xxh3;

use super::{FETCH_TOOL_NAME, OffloadOutcome, OffloadReport, OffloadSettings, Offloaded};
use crate::identity::hash_edges;
use crate::message::{Block, Message};
use crate::refs::{NewRef, RefPayload, contains_ref, placeholder};

/// Offloaded argument values of one tool call, computed once.
#[derive(Debug, Clone)]
struct CachedArguments {
    arguments: serde_json::Value,
    offloaded: Vec<Offloaded>,
}

/// Memo of argument offloads by call id and argument sizes.
#[derive(Debug, Clone, Default)]
pub struct ArgumentsCache {
    entries: HashMap<u128, Option<CachedArguments>>,
}

impl ArgumentsCache {
    /// How many tool calls the cache remembers an outcome for.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the cache remembers nothing yet.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Offloads long string arguments of the tool calls `select` chooses (by message index and call):
/// each such value becomes a `[REF_ID: …] (Summary: …)` placeholder and its text goes to a ref.
/// The call's id, name and every other argument stay as they were, so the model still reads what
/// it did; only the bulk (a file it wrote, the text it replaced) waits behind the ref.
pub fn offload_arguments(
    mut messages: Vec<Message>,
    settings: &OffloadSettings,
    cache: &mut ArgumentsCache,
    mut select: impl FnMut(usize, &crate::message::ToolCall) -> bool,
) -> OffloadOutcome {
    let mut report = OffloadReport::default();
    let mut new_refs = Vec::new();
    if !settings.enabled || settings.arguments_threshold == 0 {
        return OffloadOutcome {
            messages,
            new_refs,
            report,
        };
    }
    let digest = settings.digest_settings().unwrap_or_default();
    for (message_index, message) in messages.iter_mut().enumerate() {
        if message.role != crate::message::Role::Assistant {
            continue;
        }
        // Read before writing: the message shares its blocks with the one the engine holds
        // until written, and most calls have no long argument.
        let long = |call: &crate::message::ToolCall| {
            call.name != FETCH_TOOL_NAME && has_long_string(&call.arguments, settings)
        };
        if !message.tool_calls().any(long) {
            continue;
        }
        for block in &mut message.content {
            let Block::ToolCall(call) = block else {
                continue;
            };
            if call.name == FETCH_TOOL_NAME || !has_long_string(&call.arguments, settings) {
                continue;
            }
            if !select(message_index, call) {
                report.deferred += 1;
                continue;
            }
            let key = arguments_key(call, settings);
            let entry = cache.entries.entry(key).or_insert_with(|| {
                let mut arguments = call.arguments.clone();
                let mut offloaded = Vec::new();
                if let serde_json::Value::Object(fields) = &mut arguments {
                    for (field, value) in fields.iter_mut() {
                        let serde_json::Value::String(text) = value else {
                            continue;
                        };
                        let chars = text.chars().count();
                        if chars <= settings.arguments_threshold || contains_ref(text) {
                            continue;
                        }
                        let summary = crate::digest::digest(text, &digest).summary;
                        // `arguments` is this entry's own copy: its text can move into the ref.
                        let payload = RefPayload::new(vec![Block::text(std::mem::take(text))]);
                        let new_ref = NewRef::new(payload);
                        let replacement = placeholder(&new_ref.id, &summary);
                        offloaded.push(Offloaded {
                            message_index,
                            call_id: format!("{}#{field}", call.id),
                            ref_id: new_ref.id.to_string(),
                            chars_before: chars,
                            chars_after: replacement.chars().count(),
                        });
                        new_refs.push(new_ref);
                        *value = serde_json::Value::String(replacement);
                    }
                }
                (!offloaded.is_empty()).then_some(CachedArguments {
                    arguments,
                    offloaded,
                })
            });
            let Some(cached) = entry else {
                continue;
            };
            call.arguments = cached.arguments.clone();
            call.arguments_text = None;
            report
                .offloaded
                .extend(cached.offloaded.iter().cloned().map(|mut o| {
                    o.message_index = message_index;
                    o
                }));
        }
    }
    OffloadOutcome {
        messages,
        new_refs,
        report,
    }
}

/// Characters of `call`'s string arguments [`offload_arguments`] would move to refs (those
/// over the threshold and not already a ref); 0 when it would move none.
pub fn offloadable_argument_chars(
    call: &crate::message::ToolCall,
    settings: &OffloadSettings,
) -> usize {
    if !settings.enabled
        || settings.arguments_threshold == 0
        || call.name == FETCH_TOOL_NAME
        || !has_long_string(&call.arguments, settings)
    {
        return 0;
    }
    let serde_json::Value::Object(fields) = &call.arguments else {
        return 0;
    };
    fields
        .values()
        .filter_map(|value| match value {
            serde_json::Value::String(text) => Some(text),
            serde_json::Value::Null
            | serde_json::Value::Bool(_)
            | serde_json::Value::Number(_)
            | serde_json::Value::Array(_)
            | serde_json::Value::Object(_) => None,
        })
        .filter(|text| !contains_ref(text))
        .map(|text| text.chars().count())
        .filter(|&chars| chars > settings.arguments_threshold)
        .sum()
}

/// True when some top-level string argument may exceed the threshold (bytes bound chars).
fn has_long_string(arguments: &serde_json::Value, settings: &OffloadSettings) -> bool {
    match arguments {
        serde_json::Value::Object(fields) => fields.values().any(|value| {
            matches!(value, serde_json::Value::String(text) if text.len() > settings.arguments_threshold)
        }),
        serde_json::Value::Null
        | serde_json::Value::Bool(_)
        | serde_json::Value::Number(_)
        | serde_json::Value::String(_)
        | serde_json::Value::Array(_) => false,
    }
}

/// Cheap identity of a call's arguments: id, name, and each string field's length and edges.
fn arguments_key(call: &crate::message::ToolCall, settings: &OffloadSettings) -> u128 {
    const EDGE: usize = 128;
    let mut hasher = Xxh3::new();
    hasher.update(call.id.as_bytes());
    hasher.update(call.name.as_bytes());
    hasher.update(&(settings.arguments_threshold as u64).to_le_bytes());
    hasher.update(&(settings.summary_max_chars as u64).to_le_bytes());
    if let serde_json::Value::Object(fields) = &call.arguments {
        for (field, value) in fields {
            hasher.update(field.as_bytes());
            if let serde_json::Value::String(text) = value {
                hash_edges(&mut hasher, text, EDGE);
            }
        }
    }
    hasher.digest128()
}
