//! SWE-agent `.traj` import (read only).
//!
//! A trajectory is `{environment, trajectory, history, info, replay_config?}`. `history` is what
//! the model saw, in order: system/user/assistant/tool messages whose content is a string or a
//! list of `{type: "text", text}` parts, with SWE-agent's own fields (`agent`, `message_type`,
//! `thought`, `action`, `is_demo`…) kept in [`Message::extra`]. Demonstration messages
//! (`is_demo`) were part of the prompt and are kept like any other.
//!
//! Two tool styles exist:
//! - **Function calling**: assistant messages carry OpenAI `tool_calls` (arguments a JSON string,
//!   kept verbatim in `arguments_text`) and `tool` messages name their call in `tool_call_ids`.
//!   A `tool` message becomes a [`Role::ToolResult`] when the id it names belongs to a call seen
//!   before it; otherwise it stays a user message with `role: "tool"` kept in its extra.
//! - **Classic** (no function calling): the command is a fenced block in the assistant text,
//!   also recorded in `action`, and the next user message is its observation. When the action's
//!   fence is found in the text and the next message is a user observation of the same kind (demo
//!   or not), the fence becomes a [`ToolCall`] named after the command's first word (`edit`,
//!   `open`, `python`…) with arguments `{"command": action}` and id `call_<history index>`, and
//!   the observation its result (`is_error` unknown). Otherwise both stay plain text.
//!
//! [`Role::ToolResult`]: crate::message::Role::ToolResult
//! [`ToolCall`]: crate::message::ToolCall

use std::collections::HashMap;

use serde_json::Value;

use super::json::{FieldError, json_error_message, rest};
use super::mini_swe::{FencedCommand, Trajectory, lifted_call, make_tool_result, read_trajectory};
use crate::message::{Block, ContentForm, Conversation, Message};

/// Why a SWE-agent trajectory could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SweAgentError {
    /// The input is not one JSON document.
    #[error("not valid JSON at line {line}, column {column}: {message}")]
    Json {
        /// The 1-based line of the input where the JSON parser stopped.
        line: usize,
        /// The 1-based column on that line.
        column: usize,
        /// What the JSON parser found wrong.
        message: String,
    },
    /// A field has the wrong type or is missing.
    #[error("{path}: expected {expected}, found {found}")]
    Shape {
        /// The JSON path of the field, from the document's root (`messages[2].content[0].type`).
        path: String,
        /// What the format allows there.
        expected: &'static str,
        /// The JSON type that was there instead.
        found: &'static str,
    },
}

impl From<FieldError> for SweAgentError {
    fn from(error: FieldError) -> Self {
        SweAgentError::Shape {
            found: error.found(),
            path: error.path,
            expected: error.expected,
        }
    }
}

/// Decodes a SWE-agent trajectory from its JSON text.
pub fn decode(input: &str) -> Result<Conversation, SweAgentError> {
    let value: Value = serde_json::from_str(input).map_err(|error| SweAgentError::Json {
        line: error.line(),
        column: error.column(),
        message: json_error_message(&error),
    })?;
    decode_value(&value)
}

/// Decodes a parsed SWE-agent trajectory.
pub fn decode_value(value: &Value) -> Result<Conversation, SweAgentError> {
    let Trajectory {
        root,
        raw_messages: history,
        mut messages,
    } = read_trajectory(value, "history", "a trajectory object with \"history\"")?;
    link_tool_messages(history, &mut messages);
    lift_actions(history, &mut messages);

    Ok(Conversation {
        messages,
        tools: Vec::new(),
        model: configured_model(root.get("replay_config")),
        extra: rest(root, &["history"]),
    })
}

/// The ids a `tool` message answers: `tool_call_ids` (SWE-agent) or `tool_call_id` (OpenAI).
fn answered_ids(raw: &Value) -> Vec<&str> {
    match (raw.get("tool_call_ids"), raw.get("tool_call_id")) {
        (Some(Value::Array(ids)), _) => ids.iter().filter_map(Value::as_str).collect(),
        (_, Some(Value::String(id))) => vec![id.as_str()],
        _ => Vec::new(),
    }
}

fn link_tool_messages(history: &[Value], messages: &mut [Message]) {
    let mut call_names: HashMap<String, String> = HashMap::new();
    for (raw, message) in history.iter().zip(messages.iter_mut()) {
        if raw.get("role").and_then(Value::as_str) != Some("tool") {
            for call in message.tool_calls() {
                call_names.insert(call.id.clone(), call.name.clone());
            }
            continue;
        }
        // SWE-agent answers one call per message; with several ids the first known one is used and
        // the full list stays in extra.
        let Some((call_id, name)) = answered_ids(raw)
            .into_iter()
            .find_map(|id| call_names.get(id).map(|name| (id.to_owned(), name.clone())))
        else {
            continue;
        };
        message.extra.remove("role");
        make_tool_result(message, call_id, name, None);
    }
}

/// Classic mode: each assistant `action` fenced in its text, answered by the next user message,
/// becomes a tool call and its result.
fn lift_actions(history: &[Value], messages: &mut [Message]) {
    for index in 0..messages.len() {
        let (Some(raw), Some(next_raw)) = (history.get(index), history.get(index + 1)) else {
            continue;
        };
        if raw.get("role").and_then(Value::as_str) != Some("assistant")
            || next_raw.get("role").and_then(Value::as_str) != Some("user")
            || !is_observation(next_raw)
            || is_demo(raw) != is_demo(next_raw)
        {
            continue;
        }
        let Some(action) = raw.get("action").and_then(Value::as_str) else {
            continue;
        };
        let Some(name) = action.split_whitespace().next().map(str::to_owned) else {
            continue;
        };
        let Some(assistant) = messages.get(index) else {
            continue;
        };
        if assistant.tool_calls().next().is_some() {
            continue;
        }
        let Some(text) = single_text(assistant) else {
            continue;
        };
        let Some(fenced) = fenced_action(text, action) else {
            continue;
        };
        let call_id = format!("call_{index}");
        let content = lifted_call(fenced, &call_id, &name, action);
        if let Some(assistant) = messages.get_mut(index) {
            assistant.content = content.into();
            assistant.content_form = ContentForm::Blocks;
        }
        if let Some(observation) = messages.get_mut(index + 1) {
            make_tool_result(observation, call_id, name, None);
        }
    }
}

fn is_demo(raw: &Value) -> bool {
    raw.get("is_demo").and_then(Value::as_bool).unwrap_or(false)
}

fn is_observation(raw: &Value) -> bool {
    match raw.get("message_type") {
        None | Some(Value::Null) => true,
        Some(kind) => kind.as_str() == Some("observation"),
    }
}

/// The text of a message whose content is exactly one text block.
fn single_text(message: &Message) -> Option<&str> {
    match message.content.as_slice() {
        [Block::Text(text)] => Some(text.text.as_str()),
        _ => None,
    }
}

/// Finds the fenced block holding `action` in `text`: an opening fence (optionally with a
/// language tag) and a line break before the action, only whitespace and a closing fence after.
fn fenced_action<'a>(text: &'a str, action: &str) -> Option<FencedCommand<'a>> {
    let body = action.trim();
    if body.is_empty() {
        return None;
    }
    let position = text.rfind(body)?;
    let before = text.get(..position)?;
    let after = text.get(position + body.len()..)?;

    let opening = before.rfind("```")?;
    let between = before.get(opening + 3..)?;
    let tag_length = between.find(char::is_whitespace).unwrap_or(between.len());
    let (tag, gap) = between.split_at_checked(tag_length)?;
    if tag.contains('`') || !gap.chars().all(char::is_whitespace) || !gap.contains('\n') {
        return None;
    }

    let rest = after.trim_start();
    if !rest.starts_with("```") {
        return None;
    }
    let closing_end = position + body.len() + (after.len() - rest.len()) + 3;
    Some(FencedCommand {
        before: text.get(..opening)?,
        command: text.get(position..position + body.len())?,
        after: text.get(closing_end..)?,
    })
}

/// `replay_config.agent.model.name`; newer SWE-agent writes `replay_config` as a JSON string.
fn configured_model(replay_config: Option<&Value>) -> Option<String> {
    let replay_config = replay_config?;
    let parsed;
    let config = if let Value::String(text) = replay_config {
        parsed = serde_json::from_str::<Value>(text).ok()?;
        &parsed
    } else {
        replay_config
    };
    config
        .get("agent")?
        .get("model")?
        .get("name")?
        .as_str()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn fenced_action_splits_thought_and_fence() {
        let text = "I will list.\n\n```\nls -a\n```";
        let found = fenced_action(text, "ls -a\n").unwrap();
        assert_eq!(found.before, "I will list.\n\n");
        assert_eq!(found.command, "ls -a");
        assert_eq!(found.after, "");
    }

    #[test]
    fn fenced_action_accepts_a_language_tag_and_trailing_text() {
        let text = "ok\n```bash\nedit 1:2\nx\nend_of_edit\n```\nthen more";
        let found = fenced_action(text, "edit 1:2\nx\nend_of_edit").unwrap();
        assert_eq!(found.before, "ok\n");
        assert_eq!(found.after, "\nthen more");
    }

    #[test]
    fn unfenced_action_is_not_lifted() {
        assert!(fenced_action("just run ls -a now", "ls -a").is_none());
        assert!(fenced_action("```ls -a```", "ls -a").is_none());
        assert!(fenced_action("anything", "   ").is_none());
    }

    #[test]
    fn replay_config_may_be_a_json_string() {
        let config = Value::String(r#"{"agent":{"model":{"name":"gpt-4o"}}}"#.into());
        assert_eq!(configured_model(Some(&config)).as_deref(), Some("gpt-4o"));
    }
}
