//! The model-visible form of recall: a simulated tool call with its result (ids derived from
//! what the call asks, so every request renders the same bytes and the prompt cache holds), where
//! it goes in the conversation, and how simulated calls are recognised or turned back into text.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{
    RecallSettings, SEARCH_TOOL_NAME, SIMULATED_CALL_PREFIX, SelectedMemory, Selection, user_text,
};
use crate::message::{Block, Extra, Message, Role, ToolCall, ToolResult, join_text};

/// A call id derived from what the call asks, so the same call renders byte-identically on every
/// request (the prompt cache depends on it).
pub fn simulated_call_id(tool: &str, arguments: &Value) -> String {
    let digest = Sha256::digest(format!("{tool}\n{arguments}").as_bytes());
    let hex: String = digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{SIMULATED_CALL_PREFIX}{hex}")
}

/// An assistant message calling `tool` with `arguments`, and the tool result message answering
/// it with `result`.
pub fn simulated_call(tool: &str, arguments: Value, result: String) -> Vec<Message> {
    let id = simulated_call_id(tool, &arguments);
    let call = Message::new(
        Role::Assistant,
        vec![Block::ToolCall(ToolCall {
            id: id.clone(),
            name: tool.to_owned(),
            arguments,
            arguments_text: None,
            extra: Extra::new(),
        })],
    );
    let answer = Message::new(
        Role::ToolResult,
        vec![Block::ToolResult(ToolResult {
            call_id: id,
            tool_name: Some(tool.to_owned()),
            content: vec![Block::text(result)].into(),
            content_form: crate::message::ContentForm::Text,
            is_error: None,
            details: None,
            extra: Extra::new(),
        })],
    );
    vec![call, answer]
}

/// A JSON object written with each element of its array fields on a line of its own: valid JSON,
/// compact, and readable in a transcript.
pub fn render_result_json(fields: &[(&str, Value)]) -> String {
    let mut out = String::from("{");
    for (index, (key, value)) in fields.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&json!(key).to_string());
        out.push(':');
        match value {
            Value::Array(items) if !items.is_empty() => {
                out.push('[');
                for (at, item) in items.iter().enumerate() {
                    out.push_str(if at == 0 { "\n" } else { ",\n" });
                    out.push_str(&item.to_string());
                }
                out.push_str("\n]");
            }
            Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Array(_)
            | Value::Object(_) => out.push_str(&value.to_string()),
        }
    }
    out.push('}');
    out
}

/// The `search_memories` result for `memories` (already JSON objects, see [`memory_json`]).
///
/// [`memory_json`]: super::memory_json
pub fn search_result_text(memories: Vec<Value>) -> String {
    render_result_json(&[
        ("success", json!(true)),
        ("memories", Value::Array(memories)),
    ])
}

/// The simulated `search_memories` call of per-turn recall and its result.
pub fn recall_messages(
    query: &str,
    settings: &RecallSettings,
    selection: &Selection,
) -> Vec<Message> {
    let arguments = json!({"query": query, "max_results": settings.max_results});
    let memories = selection.kept.iter().map(SelectedMemory::to_json).collect();
    simulated_call(SEARCH_TOOL_NAME, arguments, search_result_text(memories))
}

/// `messages` with `injection` inserted right after the latest user message a person wrote
/// (see [`user_text`]) and the simulated calls already following it; unchanged when there is
/// none. The injection is for one model call: the caller never stores it. Passing over the
/// session-start injection keeps it where every request of the session has it, whichever is
/// inserted first, so the cached prefix reaches past it.
pub fn insert_after_latest_user(messages: Vec<Message>, injection: Vec<Message>) -> Vec<Message> {
    let at = messages
        .iter()
        .rposition(|message| !user_text(message).is_empty())
        .map(|at| {
            let simulated = messages
                .iter()
                .skip(at + 1)
                .take_while(|message| is_simulated(message))
                .count();
            at + simulated
        });
    insert_after(messages, at, injection)
}

/// Whether `message` is part of a simulated call of this module: an assistant message whose
/// blocks are all calls with a simulated id, or a result message answering such calls only.
pub fn is_simulated(message: &Message) -> bool {
    let simulated = |id: &str| id.starts_with(SIMULATED_CALL_PREFIX);
    !message.content.is_empty()
        && message.content.iter().all(|block| match block {
            Block::ToolCall(call) => simulated(&call.id),
            Block::ToolResult(result) => simulated(&result.call_id),
            Block::Text(_) | Block::Image(_) | Block::Thinking(_) | Block::Opaque(_) => false,
        })
}

/// `messages` with every simulated call of this module (see [`is_simulated`]) turned into one
/// user message holding the calls and their results as text, for a model request in which a
/// tool call must come with the model's own reasoning: with extended thinking on, Anthropic
/// refuses an assistant turn that calls a tool without a thinking block — and only the model can
/// write a signed one. The memory reaches the model the same; only its form differs.
pub fn simulated_calls_as_text(messages: Vec<Message>) -> Vec<Message> {
    if !messages.iter().any(is_simulated) {
        return messages;
    }
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut pending: Vec<ToolCall> = Vec::new();
    for message in messages {
        if !is_simulated(&message) {
            out.push(message);
            continue;
        }
        if message.role == Role::Assistant {
            pending.extend(message.tool_calls().cloned());
            continue;
        }
        let mut text = String::new();
        for result in message.tool_results() {
            let call = pending.iter().find(|call| call.id == result.call_id);
            let name = call.map_or("memory", |call| call.name.as_str());
            let arguments = call.map_or_else(String::new, |call| call.arguments.to_string());
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&format!(
                "<skald-memory tool=\"{name}\" arguments='{arguments}'>\n{}\n</skald-memory>",
                join_text(&result.content)
            ));
        }
        pending.retain(|call| {
            !message
                .tool_results()
                .any(|result| result.call_id == call.id)
        });
        if !text.is_empty() {
            out.push(Message::new(Role::User, vec![Block::text(text)]));
        }
    }
    out
}

/// `messages` with `injection` inserted right after the first user message a person wrote (where
/// session-start injections stay, so every request of the session shares the same prefix).
pub fn insert_after_first_user(messages: Vec<Message>, injection: Vec<Message>) -> Vec<Message> {
    let at = messages
        .iter()
        .position(|message| !user_text(message).is_empty());
    insert_after(messages, at, injection)
}

fn insert_after(
    mut messages: Vec<Message>,
    at: Option<usize>,
    injection: Vec<Message>,
) -> Vec<Message> {
    if let Some(at) = at
        && !injection.is_empty()
    {
        let tail = messages.split_off(at + 1);
        messages.extend(injection);
        messages.extend(tail);
    }
    messages
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::memory::recall::{ListingEntry, directory_messages};

    fn user(text: &str) -> Message {
        Message::text(Role::User, text)
    }

    #[test]
    fn simulated_calls_are_deterministic() {
        let a = simulated_call_id(SEARCH_TOOL_NAME, &json!({"query": "x", "max_results": 5}));
        let b = simulated_call_id(SEARCH_TOOL_NAME, &json!({"query": "x", "max_results": 5}));
        let c = simulated_call_id(SEARCH_TOOL_NAME, &json!({"query": "y", "max_results": 5}));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(
            a.starts_with(SIMULATED_CALL_PREFIX) && a.len() == SIMULATED_CALL_PREFIX.len() + 16
        );
    }

    #[test]
    fn injection_goes_after_the_latest_user_message() {
        let messages = vec![
            user("first ask"),
            Message::text(Role::Assistant, "done"),
            user("second ask"),
            Message::text(Role::Assistant, "working"),
        ];
        let injection = vec![Message::text(Role::Assistant, "INJECTED")];
        let out = insert_after_latest_user(messages.clone(), injection.clone());
        assert_eq!(out.len(), 5);
        assert_eq!(out[3].plain_text(), "INJECTED");
        let out = insert_after_first_user(messages, injection);
        assert_eq!(out[1].plain_text(), "INJECTED");
    }

    #[test]
    fn recall_goes_after_the_session_start_injection_in_either_order() {
        let listing = directory_messages(
            &[ListingEntry::Directory {
                uri: "viking://user/a".into(),
                entries: 1,
            }],
            1000,
        );
        let recall = simulated_call(SEARCH_TOOL_NAME, json!({"query": "q"}), "{}".into());
        let messages = vec![user("only ask")];
        let listing_first = insert_after_latest_user(
            insert_after_first_user(messages.clone(), listing.clone()),
            recall.clone(),
        );
        let recall_first = insert_after_first_user(
            insert_after_latest_user(messages, recall.clone()),
            listing.clone(),
        );
        assert_eq!(listing_first, recall_first);
        assert_eq!(&listing_first[1..3], &listing[..]);
        assert_eq!(&listing_first[3..5], &recall[..]);
        assert!(is_simulated(&listing_first[1]) && is_simulated(&listing_first[4]));
        assert!(!is_simulated(&listing_first[0]));
    }
}
