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
//! - `progress`, `file-history-snapshot`, `queue-operation`, `summary`, `attachment` and entry
//!   types this importer does not know are counted in [`ClaudeCodeRead::ignored_lines`]; lines
//!   that are not JSON objects with a `type`, or whose message is malformed, are reported as
//!   [`LineIssue`]s. The `instructions` attachments — the CLAUDE.md files Claude Code loaded,
//!   which it renders into the first user message of every request — are read apart by
//!   [`instruction_files`], for a compaction's critical rules.
//!
//! Message content is Anthropic content and is read by [`super::anthropic`]'s block decoder, so a
//! block means here what it means in a Messages request; what is Claude Code's own (merging,
//! `toolUseResult`, tool names for results, the line envelope) is done in this module.
//!
//! Lines are read in file order; the `parentUuid` tree (rewinds, edited prompts) is not followed.
//! Envelope fields (`uuid`, `parentUuid`, `sessionId`, `cwd`, …) are kept in [`Message::extra`];
//! for a merged assistant message they are those of its first line, and `lineUuids` lists the
//! `uuid` of every line merged into it.
//!
//! [`ToolResult::details`]: crate::message::ToolResult::details

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::LineIssue;
use super::anthropic::{self, WireError};
use super::json::{
    FieldError, Path, insert_nonempty, json_error_message, kind, required_object, rest,
};
use crate::compaction::RulesFile;
use crate::message::{
    Block, ContentForm, Conversation, Extra, Message, MessageMeta, Role, StopReason, Timestamp,
    Usage,
};

/// The CLAUDE.md files a Claude Code transcript says were loaded (its `attachment` lines of type
/// `instructions`: `files[].path` and `content`), each once, its latest content; lines that are
/// not such attachments, or not JSON, are passed over.
pub fn instruction_files(jsonl: &str) -> Vec<RulesFile> {
    let mut files: Vec<RulesFile> = Vec::new();
    for line in jsonl.lines() {
        // Most lines are not attachments: skip them before parsing.
        if !line.contains("\"instructions\"") {
            continue;
        }
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if value["type"] != "attachment" || value["attachment"]["type"] != "instructions" {
            continue;
        }
        for file in value["attachment"]["files"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let (Some(path), Some(content)) = (file["path"].as_str(), file["content"].as_str())
            else {
                continue;
            };
            match files.iter_mut().find(|known| known.source == path) {
                Some(known) => content.clone_into(&mut known.text),
                None => files.push(RulesFile {
                    source: path.to_owned(),
                    text: content.to_owned(),
                }),
            }
        }
    }
    files
}

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
    NoEntries {
        /// How many non-blank lines the input has.
        lines: usize,
        /// Why the first of them is not an entry.
        first: LineIssue,
    },
}

/// A decoded session: the conversation plus what was skipped.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaudeCodeRead {
    /// The messages of the session, in order, with Claude Code's tool results as blocks.
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
        return Err(format!("expected a JSON object, found {}", kind(&value)));
    };
    let entry_type = match object.get("type") {
        Some(Value::String(entry_type)) => entry_type.clone(),
        Some(other) => {
            return Err(format!("type: expected a string, found {}", kind(other)));
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
    required_object(object, "message", Path::Root, "an object").map_err(|error| error.to_string())
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
    inner: &Map<String, Value>,
    inner_omit: &[&str],
) -> Extra {
    let mut extra = rest(object, omit);
    insert_nonempty(&mut extra, "message", rest(inner, inner_omit));
    extra
}

fn read_assistant(object: Map<String, Value>) -> Result<AssistantPart, String> {
    let inner = inner_message(&object)?;
    // A `tool_result` in a response is nothing the model sent; it stays opaque.
    let (content, content_form) = read_content(inner, false)?;
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
        assemble: None,
    };
    let extra = envelope_extra(
        &object,
        &["type", "message", "timestamp"],
        inner,
        &["role", "content", "id", "model", "stop_reason"],
    );
    Ok(AssistantPart {
        api_id,
        line_uuid: object.get("uuid").cloned(),
        message: Message {
            role: Role::Assistant,
            content: content.into(),
            meta,
            content_form,
            extra,
        },
    })
}

fn anthropic_usage(usage: &Value) -> Option<Usage> {
    anthropic::usage_of(usage)
}

fn read_user(
    object: Map<String, Value>,
    tool_names: &HashMap<String, String>,
) -> Result<Message, String> {
    let inner = inner_message(&object)?;
    let (mut content, content_form) = read_content(inner, true)?;

    // `toolUseResult` is the harness's own record of the result: host-only, never model input. It
    // goes to the first result; results are named after their call.
    let mut details = object.get("toolUseResult").cloned();
    let mut has_results = false;
    for result in content.iter_mut().filter_map(Block::as_tool_result_mut) {
        has_results = true;
        result.tool_name = tool_names.get(&result.call_id).cloned();
        result.details = details.take().map(std::sync::Arc::new);
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
        content: content.into(),
        meta: envelope_meta(&object),
        content_form,
        extra: envelope_extra(&object, &omit, inner, &["role", "content"]),
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
        content: content.into(),
        meta: envelope_meta(&object),
        content_form,
        extra: rest(&object, omit),
    }
}

/// `message.content` of a user or assistant line: Anthropic content, a string or a list of blocks,
/// read by the Anthropic codec. `results` says whether `tool_result` blocks are results (user
/// lines) or stay opaque (assistant lines).
fn read_content(
    inner: &Map<String, Value>,
    results: bool,
) -> Result<(Vec<Block>, ContentForm), String> {
    let root = Path::Root;
    let message = root.key("message");
    let path = message.key("content");
    match inner.get("content") {
        Some(content @ (Value::String(_) | Value::Array(_))) => {
            anthropic::decode_content(Some(content), path, !results).map_err(anthropic_error)
        }
        other @ (None
        | Some(Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_))) => {
            Err(FieldError::new(path, "a string or an array of blocks", other).to_string())
        }
    }
}

/// An Anthropic codec error, worded as this importer words its line issues ("found nothing" for a
/// missing field).
fn anthropic_error(error: WireError) -> String {
    match error {
        WireError::Missing { path, expected } => FieldError {
            path,
            expected,
            found: None,
        }
        .to_string(),
        WireError::Json(_) | WireError::WrongType { .. } | WireError::UnknownValue { .. } => {
            error.to_string()
        }
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
