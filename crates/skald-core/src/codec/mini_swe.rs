//! mini-swe-agent `.traj.json` import (read only), plus the helpers the OpenAI-shaped trajectory
//! importers share (messages, text content, OpenAI `tool_calls`, fenced commands lifted into tool
//! calls and their results).
//!
//! A trajectory is `{info, messages, trajectory_format, instance_id}`; `messages` are OpenAI-style
//! system/user/assistant messages. The agent has one tool, bash, spoken in text: the assistant
//! writes one fenced ```` ```bash ```` block (v2: ```` ```mswea_bash_command ````) and the harness
//! answers with a user message starting `<returncode>`. The importer models that exchange as a
//! tool call and its result, but only when both halves are unambiguous: an assistant message with
//! exactly one command block immediately followed by a `<returncode>` message. Everything else
//! stays plain text, so a result never points at a missing call and no call is left unanswered.
//! v2 tool-calling trajectories (assistant `tool_calls`, `tool` messages with `tool_call_id`) are
//! read as structured calls.
//!
//! Each assistant message's `extra.response` is the provider's raw chat completion; its `usage`,
//! `model`, `provider`, `id` and finish reason become the message's meta, and the whole `extra`
//! object is kept in [`Message::extra`] under `"extra"` (it holds the reasoning and the text as the
//! provider returned it, so nothing is lost when the command is lifted out of the text).

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::json::{
    FieldError, Path, as_object, each, insert_nonempty, json_error_message, kind, required_array,
    required_object, required_str, rest, text_block, wrong,
};
use super::openai::parse_arguments;
use crate::message::{
    Block, ContentForm, Conversation, Extra, Message, MessageMeta, Role, StopReason, Timestamp,
    ToolCall, ToolResult, Usage,
};

/// The name of the one tool a text-mode mini-swe-agent has.
pub const BASH_TOOL: &str = "bash";

/// Why a mini-swe-agent trajectory could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MiniSweError {
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

impl From<FieldError> for MiniSweError {
    fn from(error: FieldError) -> Self {
        MiniSweError::Shape {
            found: error.found(),
            path: error.path,
            expected: error.expected,
        }
    }
}

/// Decodes a mini-swe-agent trajectory from its JSON text.
pub fn decode(input: &str) -> Result<Conversation, MiniSweError> {
    let value: Value = serde_json::from_str(input).map_err(|error| MiniSweError::Json {
        line: error.line(),
        column: error.column(),
        message: json_error_message(&error),
    })?;
    decode_value(&value)
}

/// Decodes a parsed mini-swe-agent trajectory.
pub fn decode_value(value: &Value) -> Result<Conversation, MiniSweError> {
    let Trajectory {
        root,
        raw_messages,
        mut messages,
    } = read_trajectory(value, "messages", "a trajectory object with \"messages\"")?;
    for (raw, message) in raw_messages.iter().zip(&mut messages) {
        message.meta = raw.get("extra").map(response_meta).unwrap_or_default();
    }
    lift_text_commands(raw_messages, &mut messages);
    link_tool_messages(raw_messages, &mut messages);

    let model = root
        .get("info")
        .and_then(|info| info.get("config"))
        .and_then(|config| config.get("model"))
        .and_then(|model| model.get("model_name"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(Conversation {
        messages,
        tools: Vec::new(),
        model,
        extra: rest(root, &["messages"]),
    })
}

/// Meta of an assistant message from `extra.response`, an OpenAI chat completion.
fn response_meta(message_extra: &Value) -> MessageMeta {
    let response = message_extra.get("response");
    let field = |name: &str| response.and_then(|response| response.get(name));
    let finish_reason = field("choices")
        .and_then(|choices| choices.get(0))
        .and_then(|choice| choice.get("finish_reason"))
        .and_then(Value::as_str);
    let timestamp = message_extra
        .get("timestamp")
        .and_then(Value::as_f64)
        .or_else(|| field("created").and_then(Value::as_f64))
        .and_then(seconds_to_millis)
        .map(Timestamp::Millis);
    MessageMeta {
        id: field("id").and_then(Value::as_str).map(str::to_owned),
        stop_reason: finish_reason.map(parse_stop_reason),
        usage: field("usage").and_then(openai_usage),
        timestamp,
        model: field("model").and_then(Value::as_str).map(str::to_owned),
        provider: field("provider").and_then(Value::as_str).map(str::to_owned),
        assemble: None,
    }
}

/// Gemini through OpenRouter reports `STOP`; case is not meaningful in finish reasons.
fn parse_stop_reason(raw: &str) -> StopReason {
    match StopReason::parse(raw) {
        StopReason::Other(_) => match StopReason::parse(&raw.to_ascii_lowercase()) {
            StopReason::Other(_) => StopReason::Other(raw.to_owned()),
            known @ (StopReason::EndTurn
            | StopReason::MaxTokens
            | StopReason::ToolUse
            | StopReason::Error
            | StopReason::Aborted) => known,
        },
        known @ (StopReason::EndTurn
        | StopReason::MaxTokens
        | StopReason::ToolUse
        | StopReason::Error
        | StopReason::Aborted) => known,
    }
}

fn seconds_to_millis(seconds: f64) -> Option<i64> {
    let millis = (seconds * 1000.0).round();
    // Out-of-range floats would saturate silently; a timestamp that far off is no timestamp.
    (millis.is_finite() && millis.abs() < 1e15).then_some(millis as i64)
}

/// OpenAI usage in the model's terms: `prompt_tokens` includes cached (and, on OpenRouter, cache
/// write) tokens, which are split out so `input` means uncached input as everywhere else.
pub(super) fn openai_usage(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let count = |value: Option<&Value>| value.and_then(Value::as_u64).unwrap_or(0);
    let details = usage.get("prompt_tokens_details");
    let cache_read = count(details.and_then(|details| details.get("cached_tokens")));
    let cache_write = count(details.and_then(|details| details.get("cache_write_tokens")));
    let prompt = count(usage.get("prompt_tokens"));
    Some(Usage {
        input: prompt
            .saturating_sub(cache_read)
            .saturating_sub(cache_write),
        output: count(usage.get("completion_tokens")),
        cache_read,
        cache_write,
        cache_write_1h: 0,
    })
}

/// Pairs each assistant message holding exactly one command block with the `<returncode>` message
/// right after it: the block becomes a `bash` tool call, the reply its result.
fn lift_text_commands(raw_messages: &[Value], messages: &mut [Message]) {
    for index in 0..messages.len() {
        let Some(text) = raw_messages
            .get(index)
            .filter(|raw| raw.get("role").and_then(Value::as_str) == Some("assistant"))
            .filter(|raw| !has_structured_calls(raw))
            .and_then(|raw| raw.get("content"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let Some(reply) = raw_messages
            .get(index + 1)
            .filter(|raw| raw.get("role").and_then(Value::as_str) == Some("user"))
            .and_then(|raw| raw.get("content"))
            .and_then(Value::as_str)
            .filter(|reply| reply.starts_with("<returncode>"))
        else {
            continue;
        };
        let Some(command) = single_command_block(text) else {
            continue;
        };
        let call_id = format!("call_{index}");
        if let Some(assistant) = messages.get_mut(index) {
            assistant.content = lifted_call(command, &call_id, BASH_TOOL, command.command).into();
            assistant.content_form = ContentForm::Blocks;
        }
        if let Some(result) = messages.get_mut(index + 1) {
            // The reply was read as one text block spelled as a string; the result keeps that.
            let is_error = return_code(reply).map(|code| code != 0);
            make_tool_result(result, call_id, BASH_TOOL.to_owned(), is_error);
        }
    }
}

fn has_structured_calls(raw: &Value) -> bool {
    raw.get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|calls| !calls.is_empty())
}

/// Turns v2 `tool` messages into results of the calls they name; a `tool` message whose call is
/// unknown stays a user message (with `role: "tool"` kept in its extra).
fn link_tool_messages(raw_messages: &[Value], messages: &mut [Message]) {
    let mut call_names: HashMap<String, String> = HashMap::new();
    for (raw, message) in raw_messages.iter().zip(messages.iter_mut()) {
        if raw.get("role").and_then(Value::as_str) != Some("tool") {
            for call in message.tool_calls() {
                call_names.insert(call.id.clone(), call.name.clone());
            }
            continue;
        }
        let Some(call_id) = raw.get("tool_call_id").and_then(Value::as_str) else {
            continue;
        };
        let Some(name) = call_names.get(call_id) else {
            continue;
        };
        let is_error = raw
            .get("extra")
            .and_then(|extra| extra.get("returncode"))
            .and_then(Value::as_i64)
            .map(|code| code != 0);
        message.extra.remove("role");
        message.extra.remove("tool_call_id");
        make_tool_result(message, call_id.to_owned(), name.clone(), is_error);
    }
}

/// The exit status a `<returncode>N</returncode>` observation starts with.
fn return_code(text: &str) -> Option<i64> {
    let rest = text.strip_prefix("<returncode>")?;
    let end = rest.find("</returncode>")?;
    rest.get(..end)?.trim().parse().ok()
}

/// A fenced command found in assistant text, with the text around the fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FencedCommand<'a> {
    pub before: &'a str,
    pub command: &'a str,
    pub after: &'a str,
}

/// mini-swe-agent's own action patterns (v1 `bash`, v2 `mswea_bash_command`).
static BASH_FENCE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?s)```bash\s*\n(.*?)\n```").ok());
static MSWEA_FENCE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?s)```mswea_bash_command\s*\n(.*?)\n```").ok());

/// The one command block of an assistant message, found as mini-swe-agent finds it; `None` when
/// there are none or several (the harness then answers with a format error, not a result).
pub(super) fn single_command_block(text: &str) -> Option<FencedCommand<'_>> {
    let pattern = [&*MSWEA_FENCE, &*BASH_FENCE]
        .into_iter()
        .flatten()
        .find(|pattern| pattern.is_match(text))?;
    let mut captures = pattern.captures_iter(text);
    let only = captures.next()?;
    if captures.next().is_some() {
        return None;
    }
    let whole = only.get(0)?;
    Some(FencedCommand {
        before: text.get(..whole.start())?,
        command: only.get(1)?.as_str(),
        after: text.get(whole.end()..)?,
    })
}

// ---- Shared with `swe_agent`: commands lifted into calls and results -----------------------

/// The content of an assistant message whose fenced command became a call: the text before the
/// fence, a call `call_id` to `tool` with arguments `{"command": command}`, the text after.
pub(super) fn lifted_call(
    fenced: FencedCommand<'_>,
    call_id: &str,
    tool: &str,
    command: &str,
) -> Vec<Block> {
    let mut arguments = Map::new();
    arguments.insert("command".to_owned(), Value::String(command.to_owned()));
    let mut content = Vec::with_capacity(3);
    push_text(&mut content, fenced.before);
    content.push(Block::ToolCall(ToolCall {
        id: call_id.to_owned(),
        name: tool.to_owned(),
        arguments: Value::Object(arguments),
        arguments_text: None,
        extra: Extra::new(),
    }));
    push_text(&mut content, fenced.after);
    content
}

/// Appends `text` as a text block unless it is empty.
fn push_text(content: &mut Vec<Block>, text: &str) {
    if !text.is_empty() {
        content.push(Block::text(text));
    }
}

/// Makes `message` the result of call `call_id` to `tool_name`: its content, spelled as it was,
/// becomes the result's content.
pub(super) fn make_tool_result(
    message: &mut Message,
    call_id: String,
    tool_name: String,
    is_error: Option<bool>,
) {
    let content = std::mem::take(&mut message.content);
    message.role = Role::ToolResult;
    message.content = vec![Block::ToolResult(ToolResult {
        call_id,
        tool_name: Some(tool_name),
        content,
        content_form: message.content_form,
        is_error,
        details: None,
        extra: Extra::new(),
    })]
    .into();
}

// ---- Shared with `swe_agent`: OpenAI-shaped messages ---------------------------------------

/// A trajectory's root object and its messages: as written, and decoded by [`decode_message`].
pub(super) struct Trajectory<'v> {
    pub root: &'v Map<String, Value>,
    pub raw_messages: &'v [Value],
    pub messages: Vec<Message>,
}

/// Reads the root object (`$` in errors) and decodes the messages listed under `key`.
pub(super) fn read_trajectory<'v>(
    value: &'v Value,
    key: &'static str,
    expected: &'static str,
) -> Result<Trajectory<'v>, FieldError> {
    let root = value.as_object().ok_or_else(|| FieldError {
        path: "$".to_owned(),
        expected,
        found: Some(kind(value)),
    })?;
    let top = Path::Root;
    let raw_messages = required_array(root, key, top, "an array of messages")?;
    let messages = each(raw_messages, top.key(key), decode_message)?;
    Ok(Trajectory {
        root,
        raw_messages,
        messages,
    })
}

/// One message as written, before command blocks and `tool` messages are paired with calls. Its
/// meta is left empty.
fn decode_message(raw: &Value, path: Path<'_>) -> Result<Message, FieldError> {
    let object = as_object(raw, path, "an object with \"role\"")?;
    let role_name = required_str(object, "role", path)?;
    let (mut content, content_form) = text_content(object.get("content"), path.key("content"))?;
    // Only the model calls tools; `tool_calls` elsewhere is kept as an unknown field.
    let calls = object
        .get("tool_calls")
        .filter(|_| role_name == "assistant");
    if let Some(calls) = calls {
        content.extend(
            openai_tool_calls(calls, path.key("tool_calls"))?
                .into_iter()
                .map(Block::ToolCall),
        );
    }
    let role = match role_name {
        "system" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        // `tool` messages become results once their call is known.
        "tool" => Role::User,
        other => Role::Custom(other.to_owned()),
    };
    // A `tool` message keeps its role name until it is known to answer a call.
    let mut extra = if calls.is_some() {
        rest(object, &["content", "tool_calls"])
    } else {
        rest(object, &["content"])
    };
    if role_name != "tool" {
        extra.remove("role");
    }
    Ok(Message {
        role,
        content: content.into(),
        meta: MessageMeta::default(),
        content_form,
        extra,
    })
}

/// OpenAI message content: a string, `null`, absent, or a list of parts.
fn text_content(
    content: Option<&Value>,
    path: Path<'_>,
) -> Result<(Vec<Block>, ContentForm), FieldError> {
    let expected = "a string, null or an array of parts";
    super::json::content(content, path, expected, text_part)
}

/// One part of OpenAI content: text parts become text blocks; other typed parts are kept verbatim
/// as opaque blocks.
fn text_part(part: &Value, path: Path<'_>) -> Result<Block, FieldError> {
    let object = as_object(part, path, "an object with \"type\"")?;
    match object.get("type") {
        Some(Value::String(part_type)) if part_type == "text" => text_block(object, path),
        Some(Value::String(_)) => Ok(Block::Opaque(part.clone())),
        Some(other) => Err(wrong(path.key("type"), "a string", other)),
        None => Err(FieldError {
            path: path.render(),
            expected: "an object with \"type\"",
            found: Some("an object without it"),
        }),
    }
}

/// OpenAI `tool_calls`: `[{id, type, function: {name, arguments}}]`. `null` means no calls.
fn openai_tool_calls(calls: &Value, path: Path<'_>) -> Result<Vec<ToolCall>, FieldError> {
    match calls {
        Value::Null => Ok(Vec::new()),
        Value::Array(calls) => each(calls, path, openai_tool_call),
        Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Object(_) => {
            Err(wrong(path, "an array of tool calls", calls))
        }
    }
}

/// One OpenAI tool call; arguments are a JSON string, kept verbatim in `arguments_text`.
fn openai_tool_call(call: &Value, path: Path<'_>) -> Result<ToolCall, FieldError> {
    let object = as_object(call, path, "a tool call object")?;
    let id = required_str(object, "id", path)?.to_owned();
    let function = required_object(object, "function", path, "an object")?;
    let name = required_str(function, "name", path.key("function"))?.to_owned();
    let (arguments, arguments_text) = match function.get("arguments") {
        Some(Value::String(text)) => (parse_arguments(text), Some(text.clone())),
        Some(Value::Null) | None => (Value::Object(Map::new()), None),
        Some(other) => (other.clone(), None),
    };
    let mut extra = rest(object, &["id", "function"]);
    insert_nonempty(
        &mut extra,
        "function",
        rest(function, &["name", "arguments"]),
    );
    Ok(ToolCall {
        id,
        name,
        arguments,
        arguments_text,
        extra,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn one_block_is_found_with_the_text_around_it() {
        let text = "THOUGHT: look\n\n```bash\nls -la\n```";
        let found = single_command_block(text).unwrap();
        assert_eq!(found.before, "THOUGHT: look\n\n");
        assert_eq!(found.command, "ls -la");
        assert_eq!(found.after, "");
    }

    #[test]
    fn zero_or_two_blocks_are_not_a_command() {
        assert!(single_command_block("no block here").is_none());
        assert!(single_command_block("```bash\nls\n```\n```bash\npwd\n```").is_none());
    }

    #[test]
    fn v2_fences_win_over_bash_examples() {
        let text = "like ```bash\nrm -rf /\n``` but\n```mswea_bash_command\necho hi\n```";
        assert_eq!(single_command_block(text).unwrap().command, "echo hi");
    }

    #[test]
    fn return_codes_parse() {
        assert_eq!(return_code("<returncode>0</returncode>\n<output>"), Some(0));
        assert_eq!(return_code("<returncode>127</returncode>"), Some(127));
        assert_eq!(return_code("<returncode>x</returncode>"), None);
        assert_eq!(return_code("<returncode>1"), None);
    }

    #[test]
    fn openai_usage_splits_cached_tokens() {
        let usage = serde_json::json!({
            "prompt_tokens": 100, "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 60}
        });
        assert_eq!(
            openai_usage(&usage),
            Some(Usage {
                input: 40,
                output: 7,
                cache_read: 60,
                cache_write: 0,
                cache_write_1h: 0,
            })
        );
    }

    #[test]
    fn upper_case_finish_reasons_are_understood() {
        assert_eq!(parse_stop_reason("STOP"), StopReason::EndTurn);
        assert_eq!(
            parse_stop_reason("WEIRD"),
            StopReason::Other("WEIRD".into())
        );
    }
}
