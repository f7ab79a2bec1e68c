//! Claude Code session JSONL import (read only): `~/.claude/projects/<project>/<session>.jsonl`
//! and its `subagents/agent-*.jsonl`.
//!
//! Each line is one entry. What this importer makes of them:
//! - `assistant` lines carry one content block each of an Anthropic response; a response with
//!   several blocks is written as consecutive lines sharing `message.id`, each repeating the usage
//!   (the last line has the final `output_tokens`). Those lines are merged into **one** assistant
//!   message per API call (`meta.id` = `message.id`). Claude Code runs tools while the response
//!   is still streaming, so `tool_result` lines may sit between the lines of one response; they
//!   are held back and emitted right after the merged message, in their original order.
//! - `user` lines holding `tool_result` blocks become [`Role::ToolResult`] messages, one per line.
//!   The line's `toolUseResult` (the harness's structured view of the result) is host-only and
//!   goes to the first result's [`ToolResult::details`]. Other `user` lines are [`Role::User`]
//!   messages; flags such as `isMeta`, `isCompactSummary`, `isVisibleInTranscriptOnly` stay in
//!   the message's extra with the rest of the line envelope.
//! - `system` lines become [`Role::Custom`] messages named by their `subtype`, which no model sees.
//!   A `compact_boundary` marks an automatic or manual compaction: the model's context restarts
//!   after it, with the `isCompactSummary` user line that follows. [`request_start`] finds where
//!   the request that produced an assistant message began.
//! - `progress`, `file-history-snapshot`, `queue-operation`, `summary` and entry types this
//!   importer does not know are counted in [`ClaudeCodeRead::ignored_lines`]; lines that are not
//!   JSON objects with a `type`, or whose message is malformed, are reported as [`LineIssue`]s.
//!
//! Lines are read in file order; the `parentUuid` tree (rewinds, edited prompts) is not followed.
//! Envelope fields (`uuid`, `parentUuid`, `sessionId`, `cwd`, …) are kept in [`Message::extra`];
//! for a merged assistant message they are those of its first line, and `lineUuids` lists the
//! `uuid` of every line merged into it.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::LineIssue;
use super::detect::{json_error_message, value_kind};
use crate::message::{
    Block, ContentForm, Conversation, Extra, ImageBlock, ImageSource, Message, MessageMeta, Role,
    StopReason, TextBlock, ThinkingBlock, Timestamp, ToolCall, ToolResult, Usage,
};

/// The [`Role::Custom`] name of a compaction marker.
pub const COMPACT_BOUNDARY: &str = "compact_boundary";

/// The Extra key listing the `uuid`s of the lines merged into one assistant message.
pub const LINE_UUIDS: &str = "lineUuids";

/// Why a Claude Code session could not be read at all (single bad lines are [`LineIssue`]s).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaudeCodeError {
    /// Nothing but whitespace.
    #[error("empty input: a Claude Code session has one JSON object per line")]
    Empty,
    /// Not one line is a Claude Code entry: the input is something else.
    #[error("none of the {lines} non-blank lines is a Claude Code entry; first problem: {first}")]
    NoEntries { lines: usize, first: LineIssue },
}

/// A decoded session: the conversation plus what was skipped.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaudeCodeRead {
    pub conversation: Conversation,
    /// Lines that could not be read, each with the reason.
    pub issues: Vec<LineIssue>,
    /// Well-formed lines that carry nothing for the conversation (`progress`, snapshots…).
    pub ignored_lines: usize,
}

/// Where the model request that produced the assistant message at `index` began: just after the
/// latest compact boundary before it, or 0. The request is `messages[start..index]`, keeping only
/// [`Message::is_model_visible`] messages.
pub fn request_start(messages: &[Message], index: usize) -> usize {
    let end = index.min(messages.len());
    messages
        .get(..end)
        .unwrap_or_default()
        .iter()
        .rposition(is_compact_boundary)
        .map_or(0, |position| position + 1)
}

/// True for the marker a compaction leaves in the transcript.
pub fn is_compact_boundary(message: &Message) -> bool {
    match &message.role {
        Role::Custom(name) => name == COMPACT_BOUNDARY,
        Role::System | Role::User | Role::Assistant | Role::ToolResult => false,
    }
}

/// Decodes a Claude Code session.
pub fn decode(input: &str) -> Result<ClaudeCodeRead, ClaudeCodeError> {
    let mut builder = Builder::default();
    let mut issues = Vec::new();
    let mut ignored_lines = 0;
    let mut non_blank = 0;

    for (index, line) in input.lines().enumerate() {
        let line_number = index + 1;
        let line = if index == 0 {
            line.strip_prefix('\u{feff}').unwrap_or(line)
        } else {
            line
        };
        if line.trim().is_empty() {
            continue;
        }
        non_blank += 1;
        match read_line(line, &builder.tool_names) {
            Ok(Entry::Assistant(part)) => builder.assistant(part),
            Ok(Entry::User(message)) => builder.user(message),
            Ok(Entry::Other(message)) => builder.other(message),
            Ok(Entry::Ignored) => ignored_lines += 1,
            Err(message) => issues.push(LineIssue {
                line: line_number,
                message,
            }),
        }
    }

    if non_blank == 0 {
        return Err(ClaudeCodeError::Empty);
    }
    if issues.len() == non_blank {
        if let Some(first) = issues.first().cloned() {
            return Err(ClaudeCodeError::NoEntries {
                lines: non_blank,
                first,
            });
        }
    }
    Ok(ClaudeCodeRead {
        conversation: builder.finish(),
        issues,
        ignored_lines,
    })
}

/// What one line contributes.
enum Entry {
    Assistant(AssistantPart),
    User(Message),
    Other(Message),
    Ignored,
}

/// One assistant line: a slice of an API response.
struct AssistantPart {
    api_id: Option<String>,
    message: Message,
    line_uuid: Option<Value>,
}

/// Assembles messages in order, merging the lines of one API response.
#[derive(Default)]
struct Builder {
    messages: Vec<Message>,
    /// The assistant response being assembled and its `message.id`.
    open: Option<(Option<String>, Message)>,
    /// User lines (results, `isMeta` injections) that arrived while `open` may still grow.
    held: Vec<Message>,
    /// Tool names by call id, so results can name their tool.
    tool_names: HashMap<String, String>,
    model: Option<String>,
}

impl Builder {
    fn assistant(&mut self, part: AssistantPart) {
        for call in part.message.tool_calls() {
            self.tool_names.insert(call.id.clone(), call.name.clone());
        }
        if let Some(model) = &part.message.meta.model {
            if model != "<synthetic>" {
                self.model = Some(model.clone());
            }
        }
        if let Some((Some(open_id), open)) = &mut self.open {
            if part.api_id.as_deref() == Some(open_id.as_str()) {
                merge_into(open, part);
                return;
            }
        }
        self.flush();
        let AssistantPart {
            api_id,
            mut message,
            line_uuid,
        } = part;
        message.extra.insert(
            LINE_UUIDS.to_owned(),
            Value::Array(line_uuid.into_iter().collect()),
        );
        self.open = Some((api_id, message));
    }

    fn user(&mut self, message: Message) {
        let holdable = message.role == Role::ToolResult || flag(&message.extra, "isMeta");
        if self.open.is_some() && holdable {
            self.held.push(message);
        } else {
            self.flush();
            self.messages.push(message);
        }
    }

    fn other(&mut self, message: Message) {
        self.flush();
        self.messages.push(message);
    }

    fn flush(&mut self) {
        if let Some((_, message)) = self.open.take() {
            self.messages.push(message);
        }
        self.messages.append(&mut self.held);
    }

    fn finish(mut self) -> Conversation {
        self.flush();
        Conversation {
            messages: self.messages,
            tools: Vec::new(),
            model: self.model,
            extra: Extra::new(),
        }
    }
}

/// Adds a later line of the same response: its blocks, and its usage, which is the more final.
fn merge_into(open: &mut Message, part: AssistantPart) {
    let AssistantPart {
        message, line_uuid, ..
    } = part;
    open.content.extend(message.content);
    open.content_form = ContentForm::Blocks;
    if message.meta.usage.is_some() {
        open.meta.usage = message.meta.usage;
    }
    if message.meta.stop_reason.is_some() {
        open.meta.stop_reason = message.meta.stop_reason;
    }
    if let Some(inner) = message.extra.get("message") {
        open.extra.insert("message".to_owned(), inner.clone());
    }
    if let (Some(uuid), Some(Value::Array(uuids))) = (line_uuid, open.extra.get_mut(LINE_UUIDS)) {
        uuids.push(uuid);
    }
}

fn flag(extra: &Extra, key: &str) -> bool {
    extra.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn read_line(line: &str, tool_names: &HashMap<String, String>) -> Result<Entry, String> {
    let value: Value = serde_json::from_str(line).map_err(|error| {
        format!(
            "expected a JSON object, found invalid JSON at column {}: {}",
            error.column(),
            json_error_message(&error)
        )
    })?;
    let Value::Object(object) = value else {
        return Err(format!(
            "expected a JSON object, found {}",
            value_kind(&value)
        ));
    };
    let entry_type = match object.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(other) => {
            return Err(format!(
                "type: expected a string, found {}",
                value_kind(other)
            ));
        }
        None => {
            return Err("expected an object with \"type\", found an object without it".to_owned());
        }
    };
    match entry_type.as_str() {
        "assistant" => read_assistant(object).map(Entry::Assistant),
        "user" => read_user(object, tool_names).map(Entry::User),
        "system" => Ok(Entry::Other(read_system(object))),
        _ => Ok(Entry::Ignored),
    }
}

/// The inner `message` object of a user or assistant line.
fn inner_message(object: &Map<String, Value>) -> Result<&Map<String, Value>, String> {
    match object.get("message") {
        Some(Value::Object(message)) => Ok(message),
        Some(other) => Err(format!(
            "message: expected an object, found {}",
            value_kind(other)
        )),
        None => Err("message: expected an object, found nothing".to_owned()),
    }
}

fn envelope_meta(object: &Map<String, Value>) -> MessageMeta {
    MessageMeta {
        id: object
            .get("uuid")
            .and_then(Value::as_str)
            .map(str::to_owned),
        timestamp: timestamp(object),
        ..MessageMeta::default()
    }
}

fn timestamp(object: &Map<String, Value>) -> Option<Timestamp> {
    match object.get("timestamp")? {
        Value::String(text) => Some(Timestamp::Rfc3339(text.clone())),
        Value::Number(number) => number.as_i64().map(Timestamp::Millis),
        Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_) => None,
    }
}

/// The line's fields minus `omit`, plus the inner message's fields minus `inner_omit` under
/// `"message"` when any are left.
fn envelope_extra(
    object: &Map<String, Value>,
    omit: &[&str],
    inner: Option<&Map<String, Value>>,
    inner_omit: &[&str],
) -> Extra {
    let mut extra: Extra = object
        .iter()
        .filter(|(key, _)| !omit.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if let Some(inner) = inner {
        let rest: Map<String, Value> = inner
            .iter()
            .filter(|(key, _)| !inner_omit.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        if !rest.is_empty() {
            extra.insert("message".to_owned(), Value::Object(rest));
        }
    }
    extra
}

fn read_assistant(object: Map<String, Value>) -> Result<AssistantPart, String> {
    let inner = inner_message(&object)?;
    let (content, content_form) = read_content(inner.get("content"), "message.content", None)?;
    let api_id = inner.get("id").and_then(Value::as_str).map(str::to_owned);
    let meta = MessageMeta {
        id: api_id.clone(),
        stop_reason: inner
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(StopReason::parse),
        usage: inner.get("usage").and_then(anthropic_usage),
        timestamp: timestamp(&object),
        model: inner
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned),
        provider: None,
    };
    let extra = envelope_extra(
        &object,
        &["type", "message", "timestamp"],
        Some(inner),
        &["role", "content", "id", "model", "stop_reason"],
    );
    Ok(AssistantPart {
        api_id,
        line_uuid: object.get("uuid").cloned(),
        message: Message {
            role: Role::Assistant,
            content,
            meta,
            content_form,
            extra,
        },
    })
}

fn anthropic_usage(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    Some(Usage {
        input: count("input_tokens"),
        output: count("output_tokens"),
        cache_read: count("cache_read_input_tokens"),
        cache_write: count("cache_creation_input_tokens"),
    })
}

fn read_user(
    object: Map<String, Value>,
    tool_names: &HashMap<String, String>,
) -> Result<Message, String> {
    let inner = inner_message(&object)?;
    let (mut content, content_form) =
        read_content(inner.get("content"), "message.content", Some(tool_names))?;
    let has_results = content
        .iter()
        .any(|block| matches!(block, Block::ToolResult(_)));

    // `toolUseResult` is the harness's own record of the result: host-only, never model input.
    let mut details = object.get("toolUseResult").cloned();
    if has_results {
        if let Some(first) = content.iter_mut().find_map(|block| match block {
            Block::ToolResult(result) => Some(result),
            Block::Text(_)
            | Block::Image(_)
            | Block::Thinking(_)
            | Block::ToolCall(_)
            | Block::Opaque(_) => None,
        }) {
            first.details = details.take();
        }
    }
    let mut omit = vec!["type", "message", "uuid", "timestamp"];
    if details.is_none() {
        omit.push("toolUseResult");
    }
    Ok(Message {
        role: if has_results {
            Role::ToolResult
        } else {
            Role::User
        },
        content,
        meta: envelope_meta(&object),
        content_form,
        extra: envelope_extra(&object, &omit, Some(inner), &["role", "content"]),
    })
}

fn read_system(object: Map<String, Value>) -> Message {
    let name = object
        .get("subtype")
        .and_then(Value::as_str)
        .unwrap_or("system")
        .to_owned();
    let (content, content_form, omit): (Vec<Block>, ContentForm, &[&str]) =
        match object.get("content") {
            Some(Value::String(text)) => (
                vec![Block::text(text.as_str())],
                ContentForm::Text,
                &["type", "subtype", "uuid", "timestamp", "content"],
            ),
            Some(_) | None => (
                Vec::new(),
                ContentForm::Absent,
                &["type", "subtype", "uuid", "timestamp"],
            ),
        };
    Message {
        role: Role::Custom(name),
        content,
        meta: envelope_meta(&object),
        content_form,
        extra: envelope_extra(&object, omit, None, &[]),
    }
}

/// Anthropic message content: a string or a list of blocks. `tool_names` is given for user
/// content, where `tool_result` blocks may appear and are named after their call.
fn read_content(
    content: Option<&Value>,
    path: &str,
    tool_names: Option<&HashMap<String, String>>,
) -> Result<(Vec<Block>, ContentForm), String> {
    match content {
        Some(Value::String(text)) => Ok((vec![Block::text(text.as_str())], ContentForm::Text)),
        Some(Value::Array(blocks)) => {
            let mut decoded = Vec::with_capacity(blocks.len());
            for (index, block) in blocks.iter().enumerate() {
                decoded.push(read_block(block, &format!("{path}[{index}]"), tool_names)?);
            }
            Ok((decoded, ContentForm::Blocks))
        }
        Some(other) => Err(format!(
            "{path}: expected a string or an array of blocks, found {}",
            value_kind(other)
        )),
        None => Err(format!(
            "{path}: expected a string or an array of blocks, found nothing"
        )),
    }
}

fn read_block(
    block: &Value,
    path: &str,
    tool_names: Option<&HashMap<String, String>>,
) -> Result<Block, String> {
    let Value::Object(object) = block else {
        return Err(format!(
            "{path}: expected an object with \"type\", found {}",
            value_kind(block)
        ));
    };
    let kind = match object.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(other) => {
            return Err(format!(
                "{path}.type: expected a string, found {}",
                value_kind(other)
            ));
        }
        None => {
            return Err(format!(
                "{path}: expected an object with \"type\", found an object without it"
            ));
        }
    };
    let rest = |keys: &[&str]| -> Extra {
        object
            .iter()
            .filter(|(key, _)| key.as_str() != "type" && !keys.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect()
    };
    Ok(match kind {
        "text" => Block::Text(TextBlock {
            text: required_string(object, "text", path)?,
            extra: rest(&["text"]),
        }),
        "thinking" => Block::Thinking(ThinkingBlock {
            thinking: required_string(object, "thinking", path)?,
            signature: object
                .get("signature")
                .and_then(Value::as_str)
                .map(str::to_owned),
            extra: rest(&["thinking", "signature"]),
        }),
        "tool_use" => Block::ToolCall(ToolCall {
            id: required_string(object, "id", path)?,
            name: required_string(object, "name", path)?,
            arguments: object
                .get("input")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
            arguments_text: None,
            extra: rest(&["id", "name", "input"]),
        }),
        "tool_result" if tool_names.is_some() => {
            let call_id = required_string(object, "tool_use_id", path)?;
            let (content, content_form) = match object.get("content") {
                None => (Vec::new(), ContentForm::Absent),
                Some(Value::Null) => (Vec::new(), ContentForm::Null),
                Some(content) => read_content(Some(content), &format!("{path}.content"), None)?,
            };
            let is_error = match object.get("is_error") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(flag)) => Some(*flag),
                Some(other) => {
                    return Err(format!(
                        "{path}.is_error: expected a boolean, found {}",
                        value_kind(other)
                    ));
                }
            };
            Block::ToolResult(ToolResult {
                tool_name: tool_names.and_then(|names| names.get(&call_id)).cloned(),
                call_id,
                content,
                content_form,
                is_error,
                details: None,
                extra: rest(&["tool_use_id", "content", "is_error"]),
            })
        }
        "image" => match image_source(object.get("source")) {
            Some(source) => Block::Image(ImageBlock {
                source,
                extra: rest(&["source"]),
            }),
            // Sources skald does not model (files API ids…) are kept whole.
            None => Block::Opaque(block.clone()),
        },
        _ => Block::Opaque(block.clone()),
    })
}

fn image_source(source: Option<&Value>) -> Option<ImageSource> {
    let source = source?.as_object()?;
    let text = |key: &str| source.get(key).and_then(Value::as_str).map(str::to_owned);
    match source.get("type").and_then(Value::as_str)? {
        "base64" => Some(ImageSource::Base64 {
            media_type: text("media_type")?,
            data: text("data")?,
        }),
        "url" => Some(ImageSource::Url { url: text("url")? }),
        _ => None,
    }
}

fn required_string(object: &Map<String, Value>, key: &str, path: &str) -> Result<String, String> {
    match object.get(key) {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(other) => Err(format!(
            "{path}.{key}: expected a string, found {}",
            value_kind(other)
        )),
        None => Err(format!("{path}.{key}: expected a string, found nothing")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn boundary() -> Message {
        Message::new(Role::Custom(COMPACT_BOUNDARY.into()), Vec::new())
    }

    #[test]
    fn request_start_is_after_the_latest_boundary() {
        let messages = vec![
            Message::text(Role::User, "a"),
            boundary(),
            Message::text(Role::User, "summary"),
            Message::text(Role::Assistant, "b"),
            boundary(),
            Message::text(Role::User, "summary 2"),
            Message::text(Role::Assistant, "c"),
        ];
        assert_eq!(request_start(&messages, 0), 0);
        assert_eq!(request_start(&messages, 3), 2);
        assert_eq!(request_start(&messages, 6), 5);
        // A boundary at `index` itself does not count; indexes past the end are clamped.
        assert_eq!(request_start(&messages, 4), 2);
        assert_eq!(request_start(&messages, 99), 5);
        assert_eq!(request_start(&[], 3), 0);
    }

    #[test]
    fn a_bad_block_names_its_path() {
        let line =
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},7]}}"#;
        let error = read_line(line, &HashMap::new()).err().unwrap();
        assert_eq!(
            error,
            "message.content[1]: expected an object with \"type\", found a number"
        );
    }

    #[test]
    fn tool_results_in_assistant_content_are_opaque() {
        let line = r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_result","tool_use_id":"x"}]}}"#;
        let Ok(Entry::Assistant(part)) = read_line(line, &HashMap::new()) else {
            panic!("expected an assistant line");
        };
        assert!(matches!(
            part.message.content.as_slice(),
            [Block::Opaque(_)]
        ));
    }
}
