//! pi / OpenClaw session JSONL (version 3) and `AgentMessage` JSON, mapped to and from the neutral
//! [`crate::message`] model and the [`crate::session`] model.
//!
//! This module owns the file format only:
//! - [`decode_agent_message`] / [`encode_agent_message`]: one pi `AgentMessage` ↔ one [`Message`].
//!   Public because the HTTP server accepts OpenClaw messages.
//! - [`decode_entry`] / [`encode_entry`] / [`encode_header`]: one line's JSON ↔ one [`Entry`] or
//!   [`SessionHeader`].
//! - [`decode_session`] / [`encode_session`]: the session file, a header line followed by one entry
//!   per line. Versions 1 and 2 are migrated on read the way pi's `SessionManager` does; only
//!   version 3 input is promised to round-trip. The reader also reports what is wrong with the
//!   tree (duplicate ids, parents that point nowhere, cycles) by line.
//!
//! What the lines mean — the entry tree, its leaf, and the context pi builds from it — is
//! [`crate::session`].
//!
//! Typed where the pipeline acts, `extra` for the rest: every field this module does not interpret
//! is kept in an `extra` map and written back, so decode → encode gives the same JSON value for
//! every version-3 line. Key order can differ: encoders write pi's usual order, then `extra`.
//! A field that has a typed home but an unexpected shape (a fractional timestamp, a usage object
//! without `cacheWrite`) is not an error: it stays in `extra`, untouched. Only shapes that make a
//! message meaningless to a model (a text block without text, a tool call without an id) fail.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::LineIssue;
use super::json::{FieldError, Path, as_object, kind, kind_of, rest, text_block, write_extra};
use crate::message::{
    Block, ContentForm, Extra, ImageBlock, ImageSource, Message, MessageMeta, Role, StopReason,
    ThinkingBlock, Timestamp, ToolCall, ToolResult, Usage, is_hint_key,
};
use crate::session::{CURRENT_VERSION, Entry, EntryKind, Session, SessionHeader};

/// The skald field of a `toolResult` message that carries the whole content of a
/// [`Role::ToolResult`] message pi has no shape for: several results (parallel tool calls), or
/// results beside text (Anthropic's `[tool_result, text]` user message), or a lone result with
/// fields of its own (`cache_control`), which pi's one object would mix with the message's. Every
/// block is written
/// with the block encoder (results as nested `toolResult` blocks), in order; pi's own fields of
/// the message describe the first result, so readers of the format still see a valid message.
/// [`decode_agent_message`] restores the content from this field when it is present.
pub const SKALD_CONTENT_KEY: &str = "skaldContent";

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Why a session or an `AgentMessage` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenClawError {
    /// The input holds no non-blank line, so there is no header.
    #[error("the input is empty: expected a session header line {{\"type\":\"session\",...}}")]
    Empty,
    /// The first non-blank line is not a usable session header.
    #[error("line {line}: invalid session header: {message}")]
    InvalidHeader { line: usize, message: String },
    /// The header names a format version newer than this reader knows.
    #[error(
        "line {line}: session version {version} is newer than this reader, which reads versions 1 to {CURRENT_VERSION}"
    )]
    UnsupportedVersion { line: usize, version: u64 },
    /// A message or entry field has the wrong shape. `path` is the JSON path of the field.
    #[error("{path}: expected {expected}, found {found}")]
    InvalidField {
        path: String,
        expected: String,
        found: String,
    },
}

/// A field with the wrong shape is a line issue while a session is read, and this error when one
/// message or entry is decoded on its own.
impl From<FieldError> for OpenClawError {
    fn from(error: FieldError) -> Self {
        OpenClawError::InvalidField {
            expected: error.expected.to_owned(),
            found: error.found().to_owned(),
            path: error.path,
        }
    }
}

/// Reads fields of one JSON object and remembers which ones it consumed, so the rest can go to
/// `extra` in their original order.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    path: Path<'a>,
    used: Vec<&'static str>,
}

impl<'a> Fields<'a> {
    fn new(obj: &'a Map<String, Value>, path: Path<'a>) -> Self {
        Fields {
            obj,
            path,
            used: Vec::new(),
        }
    }

    /// `key` of this object holds `found` instead of `expected`.
    fn error(&self, key: &str, expected: &'static str, found: Option<&Value>) -> FieldError {
        FieldError::new(self.path.key(key), expected, found)
    }

    /// Marks `key` consumed and returns its value.
    fn take(&mut self, key: &'static str) -> Option<&'a Value> {
        self.used.push(key);
        self.obj.get(key)
    }

    fn take_owned(&mut self, key: &'static str) -> Option<Value> {
        self.take(key).cloned()
    }

    fn required_str(&mut self, key: &'static str) -> Result<String, FieldError> {
        match self.take(key) {
            Some(Value::String(text)) => Ok(text.clone()),
            other => Err(self.error(key, "a string", other)),
        }
    }

    /// Absent is fine; present must be a string.
    fn optional_str(&mut self, key: &'static str) -> Result<Option<String>, FieldError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            other => Err(self.error(key, "a string", other)),
        }
    }

    /// Absent is fine; present must be a boolean.
    fn optional_bool(&mut self, key: &'static str) -> Result<Option<bool>, FieldError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            other => Err(self.error(key, "a boolean", other)),
        }
    }

    /// Consumes `key` only when it holds a string; anything else stays for `extra`.
    fn lenient_str(&mut self, key: &'static str) -> Option<String> {
        let text = self.obj.get(key).and_then(Value::as_str)?;
        self.used.push(key);
        Some(text.to_owned())
    }

    /// Consumes `key` only when it holds a non-negative integer.
    fn lenient_u64(&mut self, key: &'static str) -> Option<u64> {
        let number = self.obj.get(key).and_then(Value::as_u64)?;
        self.used.push(key);
        Some(number)
    }

    /// Consumes `key` only when it holds a boolean.
    fn lenient_bool(&mut self, key: &'static str) -> Option<bool> {
        let flag = self.obj.get(key).and_then(Value::as_bool)?;
        self.used.push(key);
        Some(flag)
    }

    /// The fields not consumed, in their original order.
    fn rest(&self) -> Extra {
        rest(self.obj, &self.used)
    }
}

// ---------------------------------------------------------------------------------------------
// AgentMessage
// ---------------------------------------------------------------------------------------------

/// Reads one pi `AgentMessage` (`user`, `assistant`, `toolResult`, or a custom role such as
/// `bashExecution`, `custom`, `branchSummary`, `compactionSummary`).
///
/// Errors name the field under the root `message`, e.g. `message.content[1].text: expected a
/// string, found a number`. Use [`decode_agent_message_at`] to choose the root.
pub fn decode_agent_message(value: &Value) -> Result<Message, OpenClawError> {
    decode_agent_message_at(value, "message")
}

/// [`decode_agent_message`] with errors named under `path` (for example `messages[3]`).
pub fn decode_agent_message_at(value: &Value, path: &str) -> Result<Message, OpenClawError> {
    decode_message(value, Path::Root.key(path)).map_err(OpenClawError::from)
}

fn decode_message(value: &Value, path: Path<'_>) -> Result<Message, FieldError> {
    let obj = as_object(value, path, "an object with a \"role\"")?;
    let mut fields = Fields::new(obj, path);
    let role_name = fields.required_str("role")?;
    let role = match role_name.as_str() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "toolResult" => Role::ToolResult,
        // Not a pi role, but a host may send one; keeping it typed beats a custom role name.
        "system" => Role::System,
        _ => Role::Custom(role_name),
    };

    let (content, content_form) = match &role {
        Role::ToolResult => match fields.take(SKALD_CONTENT_KEY) {
            // skald's whole-content form: pi's fields only repeat the first result, so they are
            // consumed without being required (a message may hold no result at all).
            Some(Value::Array(blocks)) => {
                for key in TOOL_RESULT_KEYS {
                    fields.take(key);
                }
                let blocks = super::json::each(blocks, path.key(SKALD_CONTENT_KEY), decode_block)?;
                (blocks, ContentForm::Blocks)
            }
            Some(other) => {
                return Err(fields.error(
                    SKALD_CONTENT_KEY,
                    "an array of content blocks",
                    Some(other),
                ));
            }
            None => {
                let result = decode_tool_result_fields(&mut fields)?;
                (vec![Block::ToolResult(result)], ContentForm::Blocks)
            }
        },
        Role::Custom(_) => {
            // Custom roles own their fields. `content` is read when it has pi's content shape
            // (`custom`, `hookMessage`); any other `content` stays in `extra` as written.
            match obj.get("content") {
                None => (Vec::new(), ContentForm::Absent),
                Some(raw) => match decode_content(Some(raw), path.key("content")) {
                    Ok(decoded) => {
                        fields.take("content");
                        decoded
                    }
                    Err(_) => (Vec::new(), ContentForm::Absent),
                },
            }
        }
        Role::User | Role::Assistant | Role::System => {
            decode_content(fields.take("content"), path.key("content"))?
        }
    };

    let usage = decode_usage(obj.get("usage"));
    if usage.is_some() {
        fields.take("usage");
    }
    let (usage, usage_rest) = match usage {
        Some((usage, rest)) => (Some(usage), Some(rest)),
        None => (None, None),
    };
    let meta = MessageMeta {
        id: None,
        stop_reason: fields
            .lenient_str("stopReason")
            .map(|raw| parse_stop_reason(&raw)),
        usage,
        timestamp: decode_timestamp(&mut fields),
        model: fields.lenient_str("model"),
        provider: fields.lenient_str("provider"),
    };
    let mut extra = fields.rest();
    if let Some(rest) = usage_rest {
        // What pi adds beyond the four typed counts (totalTokens, cost) rides along here and is
        // merged back into `usage` on encode. An empty object still marks "pi usage, nothing
        // else", so the encoder does not invent totals for it.
        extra.insert("usage".to_owned(), Value::Object(rest));
    }
    Ok(Message {
        role,
        content,
        meta,
        content_form,
        extra,
    })
}

/// The fields of a pi `toolResult` message that describe its one result.
const TOOL_RESULT_KEYS: [&str; 5] = ["toolCallId", "toolName", "content", "details", "isError"];

fn decode_tool_result_fields(fields: &mut Fields<'_>) -> Result<ToolResult, FieldError> {
    let call_id = fields.required_str("toolCallId")?;
    let tool_name = fields.optional_str("toolName")?;
    let path = fields.path;
    let (content, content_form) = decode_content(fields.take("content"), path.key("content"))?;
    let details = fields.take_owned("details");
    let is_error = fields.optional_bool("isError")?;
    Ok(ToolResult {
        call_id,
        tool_name,
        content,
        content_form,
        is_error,
        details,
        extra: Extra::new(),
    })
}

/// The four typed counts, and the rest of the usage object, when all four are non-negative
/// integers. Anything else is left to `extra` untouched.
fn decode_usage(value: Option<&Value>) -> Option<(Usage, Extra)> {
    let Some(Value::Object(obj)) = value else {
        return None;
    };
    let count = |key: &str| obj.get(key).and_then(Value::as_u64);
    let usage = Usage {
        input: count("input")?,
        output: count("output")?,
        cache_read: count("cacheRead")?,
        cache_write: count("cacheWrite")?,
    };
    Some((usage, rest(obj, &USAGE_KEYS)))
}

const USAGE_KEYS: [&str; 4] = ["input", "output", "cacheRead", "cacheWrite"];

fn decode_timestamp(fields: &mut Fields<'_>) -> Option<Timestamp> {
    match fields.obj.get("timestamp") {
        Some(Value::Number(number)) => {
            let millis = number.as_i64()?;
            fields.take("timestamp");
            Some(Timestamp::Millis(millis))
        }
        Some(Value::String(text)) => {
            fields.take("timestamp");
            Some(Timestamp::Rfc3339(text.clone()))
        }
        Some(Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_)) | None => None,
    }
}

/// pi's five spellings. Anything else is kept as written so it is written back the same way.
fn parse_stop_reason(raw: &str) -> StopReason {
    match raw {
        "stop" => StopReason::EndTurn,
        "length" => StopReason::MaxTokens,
        "toolUse" => StopReason::ToolUse,
        "error" => StopReason::Error,
        "aborted" => StopReason::Aborted,
        other => StopReason::Other(other.to_owned()),
    }
}

fn stop_reason_name(reason: &StopReason) -> &str {
    match reason {
        StopReason::EndTurn => "stop",
        StopReason::MaxTokens => "length",
        StopReason::ToolUse => "toolUse",
        StopReason::Error => "error",
        StopReason::Aborted => "aborted",
        StopReason::Other(raw) => raw,
    }
}

fn decode_content(
    value: Option<&Value>,
    path: Path<'_>,
) -> Result<(Vec<Block>, ContentForm), FieldError> {
    let expected = "a string or an array of content blocks";
    super::json::content(value, path, expected, decode_block)
}

fn decode_block(value: &Value, path: Path<'_>) -> Result<Block, FieldError> {
    let obj = as_object(value, path, "an object with a \"type\"")?;
    let mut fields = Fields::new(obj, path);
    let kind = fields.required_str("type")?;
    match kind.as_str() {
        "text" => text_block(obj, path),
        "thinking" => {
            let thinking = fields.required_str("thinking")?;
            let signature = fields.lenient_str("thinkingSignature");
            Ok(Block::Thinking(ThinkingBlock {
                thinking,
                signature,
                extra: fields.rest(),
            }))
        }
        "image" => decode_image(&mut fields),
        // A result nested in content: skald's whole-content form of a tool-result message (see
        // [`SKALD_CONTENT_KEY`]), or a foreign message written with `encode_agent_message`.
        "toolResult" => {
            let mut result = decode_tool_result_fields(&mut fields)?;
            result.extra = fields.rest();
            Ok(Block::ToolResult(result))
        }
        "toolCall" => {
            let id = fields.required_str("id")?;
            let name = fields.required_str("name")?;
            let Some(arguments) = fields.take_owned("arguments") else {
                return Err(fields.error(
                    "arguments",
                    "the tool arguments (any JSON value, usually an object)",
                    None,
                ));
            };
            Ok(Block::ToolCall(ToolCall {
                id,
                name,
                arguments,
                arguments_text: None,
                extra: fields.rest(),
            }))
        }
        // Block types pi does not define (and spellings such as `toolUse` that transcript repair
        // knows) are kept verbatim for later stages to judge.
        _ => Ok(Block::Opaque(value.clone())),
    }
}

fn decode_image(fields: &mut Fields<'_>) -> Result<Block, FieldError> {
    let obj = fields.obj;
    let source = match (obj.get("data"), obj.get("mimeType"), obj.get("url")) {
        (Some(Value::String(data)), Some(Value::String(media_type)), _) => {
            fields.take("data");
            fields.take("mimeType");
            ImageSource::Base64 {
                media_type: media_type.clone(),
                data: data.clone(),
            }
        }
        (_, _, Some(Value::String(url))) => {
            fields.take("url");
            ImageSource::Url { url: url.clone() }
        }
        (Some(Value::String(_)), other, _) => {
            return Err(fields.error("mimeType", "a string (the image's MIME type)", other));
        }
        (other, _, _) => {
            return Err(fields.error("data", "a string (base64 image data)", other));
        }
    };
    Ok(Block::Image(ImageBlock {
        source,
        extra: fields.rest(),
    }))
}

/// Writes one [`Message`] as a pi `AgentMessage`, without loss: this is the session store's form.
///
/// [`Role::System`] is written as role `system`, which pi does not define (it keeps the system
/// prompt outside the transcript). A [`Role::ToolResult`] message is written from its first
/// [`Block::ToolResult`]; a message that carries more than that one result block (several results,
/// or text beside them, as Anthropic and Claude Code send), or whose one result has fields of its
/// own, also gets its whole content under [`SKALD_CONTENT_KEY`]. Hosts that want pi's shapes only use [`encode_agent_messages`]. Usage fields
/// beyond the four typed counts come back from `extra`; a usage pi never saw (decoded from another
/// format) gets pi's `totalTokens` (the sum) and a zero `cost`, because pi's readers expect both.
pub fn encode_agent_message(message: &Message) -> Value {
    let mut out = Map::new();
    out.insert("role".to_owned(), Value::from(role_name(&message.role)));
    let mut result_extra = None;
    let (first_result, whole_content) = match message.role {
        // A lone result with fields of its own (Anthropic's `cache_control` on a `tool_result`)
        // needs the whole-content form too: pi's message has one object for the message's and
        // the result's fields, and read back they would all be the message's.
        Role::ToolResult => (
            message.tool_results().next(),
            match message.content.as_slice() {
                [Block::ToolResult(result)] => result.extra.keys().any(|key| !is_hint_key(key)),
                _ => true,
            },
        ),
        Role::System | Role::User | Role::Assistant | Role::Custom(_) => (None, false),
    };
    match first_result {
        Some(result) => {
            out.insert("toolCallId".to_owned(), Value::from(result.call_id.clone()));
            if let Some(name) = &result.tool_name {
                out.insert("toolName".to_owned(), Value::from(name.clone()));
            }
            write_content(&mut out, "content", &result.content, result.content_form);
            if let Some(details) = &result.details {
                out.insert("details".to_owned(), details.clone());
            }
            if let Some(is_error) = result.is_error {
                out.insert("isError".to_owned(), Value::Bool(is_error));
            }
            // In the whole-content form the first result's own fields live in its nested block;
            // at the top they would read back as the message's.
            if !whole_content {
                result_extra = Some(&result.extra);
            }
        }
        None if whole_content => {}
        None => write_content(&mut out, "content", &message.content, message.content_form),
    }
    if whole_content {
        let blocks = message.content.iter().map(encode_block).collect();
        out.insert(SKALD_CONTENT_KEY.to_owned(), Value::Array(blocks));
    }
    write_meta(&mut out, &message.meta, &message.extra);
    write_extra(&mut out, &message.extra);
    if let Some(extra) = result_extra {
        write_extra(&mut out, extra);
    }
    Value::Object(out)
}

/// Writes messages as pi `AgentMessage`s, splitting what pi keeps apart: every tool result becomes
/// its own `toolResult` message, and other blocks that shared a message with results (Anthropic's
/// text after `tool_result` blocks) follow as one more message.
pub fn encode_agent_messages(messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        let result_count = message.tool_results().count();
        let pi_shaped = match message.role {
            Role::ToolResult => result_count == 1 && message.content.len() == 1,
            Role::System | Role::User | Role::Assistant | Role::Custom(_) => result_count == 0,
        };
        if pi_shaped {
            out.push(encode_agent_message(message));
            continue;
        }
        for result in message.tool_results() {
            out.push(encode_agent_message(&Message {
                role: Role::ToolResult,
                content: vec![Block::ToolResult(result.clone())],
                meta: message.meta.clone(),
                content_form: ContentForm::Blocks,
                extra: message.extra.clone(),
            }));
        }
        let rest: Vec<Block> = message
            .content
            .iter()
            .filter(|block| !matches!(block, Block::ToolResult(_)))
            .cloned()
            .collect();
        if !rest.is_empty() {
            let role = match &message.role {
                Role::ToolResult => Role::User,
                other @ (Role::System | Role::User | Role::Assistant | Role::Custom(_)) => {
                    other.clone()
                }
            };
            out.push(encode_agent_message(&Message {
                role,
                content: rest,
                meta: message.meta.clone(),
                content_form: ContentForm::Blocks,
                extra: message.extra.clone(),
            }));
        }
    }
    out
}

fn role_name(role: &Role) -> &str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::ToolResult => "toolResult",
        Role::Custom(name) => name,
    }
}

fn write_content(out: &mut Map<String, Value>, key: &str, blocks: &[Block], form: ContentForm) {
    let as_array = || Value::Array(blocks.iter().map(encode_block).collect());
    let value = match form {
        ContentForm::Text => match blocks {
            [Block::Text(text)] if text.extra.is_empty() => Value::from(text.text.clone()),
            _ => as_array(),
        },
        ContentForm::Null if blocks.is_empty() => Value::Null,
        ContentForm::Absent if blocks.is_empty() => return,
        ContentForm::Null | ContentForm::Absent | ContentForm::Blocks => as_array(),
    };
    out.insert(key.to_owned(), value);
}

fn write_meta(out: &mut Map<String, Value>, meta: &MessageMeta, extra: &Extra) {
    // pi writes `api` right before `provider`; keeping that spot makes encoded lines read like
    // pi's own.
    if let Some(api) = extra.get("api") {
        out.insert("api".to_owned(), api.clone());
    }
    if let Some(provider) = &meta.provider {
        out.insert("provider".to_owned(), Value::from(provider.clone()));
    }
    if let Some(model) = &meta.model {
        out.insert("model".to_owned(), Value::from(model.clone()));
    }
    if let Some(usage) = &meta.usage {
        out.insert("usage".to_owned(), encode_usage(usage, extra.get("usage")));
    }
    if let Some(reason) = &meta.stop_reason {
        out.insert(
            "stopReason".to_owned(),
            Value::from(stop_reason_name(reason)),
        );
    }
    if let Some(timestamp) = &meta.timestamp {
        out.insert("timestamp".to_owned(), encode_timestamp(timestamp));
    }
}

fn encode_usage(usage: &Usage, rest: Option<&Value>) -> Value {
    let mut out = Map::new();
    out.insert("input".to_owned(), Value::from(usage.input));
    out.insert("output".to_owned(), Value::from(usage.output));
    out.insert("cacheRead".to_owned(), Value::from(usage.cache_read));
    out.insert("cacheWrite".to_owned(), Value::from(usage.cache_write));
    match rest {
        Some(Value::Object(rest)) => write_extra(&mut out, rest),
        Some(_) | None => {
            let total = usage
                .input
                .saturating_add(usage.output)
                .saturating_add(usage.cache_read)
                .saturating_add(usage.cache_write);
            out.insert("totalTokens".to_owned(), Value::from(total));
            let mut cost = Map::new();
            for key in ["input", "output", "cacheRead", "cacheWrite", "total"] {
                cost.insert(key.to_owned(), Value::from(0));
            }
            out.insert("cost".to_owned(), Value::Object(cost));
        }
    }
    Value::Object(out)
}

fn encode_timestamp(timestamp: &Timestamp) -> Value {
    match timestamp {
        Timestamp::Millis(millis) => Value::from(*millis),
        Timestamp::Rfc3339(text) => Value::from(text.clone()),
    }
}

fn encode_block(block: &Block) -> Value {
    let mut out = Map::new();
    let extra = match block {
        Block::Text(text) => {
            out.insert("type".to_owned(), Value::from("text"));
            out.insert("text".to_owned(), Value::from(text.text.clone()));
            &text.extra
        }
        Block::Thinking(thinking) => {
            out.insert("type".to_owned(), Value::from("thinking"));
            out.insert(
                "thinking".to_owned(),
                Value::from(thinking.thinking.clone()),
            );
            if let Some(signature) = &thinking.signature {
                out.insert(
                    "thinkingSignature".to_owned(),
                    Value::from(signature.clone()),
                );
            }
            &thinking.extra
        }
        Block::Image(image) => {
            out.insert("type".to_owned(), Value::from("image"));
            match &image.source {
                ImageSource::Base64 { media_type, data } => {
                    out.insert("data".to_owned(), Value::from(data.clone()));
                    out.insert("mimeType".to_owned(), Value::from(media_type.clone()));
                }
                // pi has no URL images; `url` keeps the source readable and round-trips here.
                ImageSource::Url { url } => {
                    out.insert("url".to_owned(), Value::from(url.clone()));
                }
            }
            &image.extra
        }
        Block::ToolCall(call) => {
            out.insert("type".to_owned(), Value::from("toolCall"));
            out.insert("id".to_owned(), Value::from(call.id.clone()));
            out.insert("name".to_owned(), Value::from(call.name.clone()));
            out.insert("arguments".to_owned(), call.arguments.clone());
            &call.extra
        }
        // pi never nests a result in content; this shape appears in skald's whole-content form of
        // a tool-result message (`skaldContent`) and when a foreign message is written with
        // `encode_agent_message` instead of `encode_agent_messages`.
        Block::ToolResult(result) => {
            out.insert("type".to_owned(), Value::from("toolResult"));
            out.insert("toolCallId".to_owned(), Value::from(result.call_id.clone()));
            if let Some(name) = &result.tool_name {
                out.insert("toolName".to_owned(), Value::from(name.clone()));
            }
            write_content(&mut out, "content", &result.content, result.content_form);
            if let Some(details) = &result.details {
                out.insert("details".to_owned(), details.clone());
            }
            if let Some(is_error) = result.is_error {
                out.insert("isError".to_owned(), Value::Bool(is_error));
            }
            &result.extra
        }
        Block::Opaque(value) => return value.clone(),
    };
    write_extra(&mut out, extra);
    Value::Object(out)
}

// ---------------------------------------------------------------------------------------------
// Entry and header lines
// ---------------------------------------------------------------------------------------------

/// Reads one entry line's JSON. Unlike [`decode_session`], a known entry type whose body does not
/// decode is an error here rather than an [`EntryKind::Other`].
pub fn decode_entry(value: &Value) -> Result<Entry, OpenClawError> {
    let obj = as_object(value, Path::Root.key("entry"), "an object with a \"type\"")?;
    let (entry, body_error) = decode_entry_object(obj)?;
    match body_error {
        Some(err) => Err(err.into()),
        None => Ok(entry),
    }
}

const ENVELOPE_KEYS: [&str; 3] = ["id", "parentId", "timestamp"];

/// Decodes the envelope strictly and the body leniently: a body that does not decode gives an
/// [`EntryKind::Other`] plus the reason, so the tree stays connected.
fn decode_entry_object(
    obj: &Map<String, Value>,
) -> Result<(Entry, Option<FieldError>), FieldError> {
    let mut fields = Fields::new(obj, Path::Root);
    let kind_name = fields.required_str("type")?;
    if kind_name == "session" {
        return Err(FieldError {
            path: "type".to_owned(),
            expected: "an entry type",
            found: Some("a second \"session\" header"),
        });
    }
    let id = fields.required_str("id")?;
    let parent_id = match fields.take("parentId") {
        Some(Value::String(parent)) => Some(parent.clone()),
        Some(Value::Null) => None,
        other => {
            return Err(fields.error("parentId", "a string or null", other));
        }
    };
    let timestamp = fields.required_str("timestamp")?;
    let (kind, extra, body_error) = match decode_kind(&kind_name, &mut fields) {
        // An unknown type keeps its whole body in `Other`; nothing is left for `extra`.
        Ok(kind @ EntryKind::Other(_)) => (kind, Extra::new(), None),
        Ok(kind) => (kind, fields.rest(), None),
        Err(err) => (
            EntryKind::Other(rest(obj, &ENVELOPE_KEYS)),
            Extra::new(),
            Some(err),
        ),
    };
    Ok((
        Entry {
            id,
            parent_id,
            timestamp,
            kind,
            extra,
        },
        body_error,
    ))
}

fn decode_kind(kind: &str, fields: &mut Fields<'_>) -> Result<EntryKind, FieldError> {
    Ok(match kind {
        "message" => match fields.take("message") {
            Some(value) => EntryKind::Message(decode_message(value, Path::Root.key("message"))?),
            None => {
                return Err(fields.error("message", "an AgentMessage object", None));
            }
        },
        "compaction" => EntryKind::Compaction {
            summary: fields.required_str("summary")?,
            first_kept_entry_id: fields.lenient_str("firstKeptEntryId"),
            tokens_before: fields.lenient_u64("tokensBefore"),
            details: fields.take_owned("details"),
            from_hook: fields.lenient_bool("fromHook"),
        },
        "branch_summary" => EntryKind::BranchSummary {
            from_id: fields.required_str("fromId")?,
            summary: fields.required_str("summary")?,
            details: fields.take_owned("details"),
            from_hook: fields.lenient_bool("fromHook"),
        },
        "custom" => EntryKind::Custom {
            custom_type: fields.required_str("customType")?,
            data: fields.take_owned("data"),
        },
        "custom_message" => {
            let custom_type = fields.required_str("customType")?;
            let content = fields.take("content");
            let (content, content_form) = decode_content(content, Path::Root.key("content"))?;
            EntryKind::CustomMessage {
                custom_type,
                content,
                content_form,
                display: fields.lenient_bool("display"),
                details: fields.take_owned("details"),
            }
        }
        "thinking_level_change" => EntryKind::ThinkingLevelChange {
            thinking_level: fields.required_str("thinkingLevel")?,
        },
        "model_change" => EntryKind::ModelChange {
            provider: fields.required_str("provider")?,
            model_id: fields.required_str("modelId")?,
        },
        "label" => EntryKind::Label {
            target_id: fields.required_str("targetId")?,
            label: fields.lenient_str("label"),
        },
        "session_info" => EntryKind::SessionInfo {
            name: fields.lenient_str("name"),
        },
        _ => EntryKind::Other(rest(fields.obj, &ENVELOPE_KEYS)),
    })
}

/// Writes one entry as the JSON object of its line.
pub fn encode_entry(entry: &Entry) -> Value {
    let mut out = Map::new();
    if let Some(kind) = match &entry.kind {
        EntryKind::Other(body) => body.get("type").cloned(),
        EntryKind::Message(_)
        | EntryKind::Compaction { .. }
        | EntryKind::BranchSummary { .. }
        | EntryKind::Custom { .. }
        | EntryKind::CustomMessage { .. }
        | EntryKind::ThinkingLevelChange { .. }
        | EntryKind::ModelChange { .. }
        | EntryKind::Label { .. }
        | EntryKind::SessionInfo { .. } => entry.kind.type_name().map(Value::from),
    } {
        out.insert("type".to_owned(), kind);
    }
    out.insert("id".to_owned(), Value::from(entry.id.clone()));
    out.insert(
        "parentId".to_owned(),
        entry
            .parent_id
            .as_ref()
            .map_or(Value::Null, |parent| Value::from(parent.clone())),
    );
    out.insert("timestamp".to_owned(), Value::from(entry.timestamp.clone()));
    match &entry.kind {
        EntryKind::Message(message) => put(&mut out, "message", encode_agent_message(message)),
        EntryKind::Compaction {
            summary,
            first_kept_entry_id,
            tokens_before,
            details,
            from_hook,
        } => {
            put(&mut out, "summary", Value::from(summary.clone()));
            if let Some(kept) = first_kept_entry_id {
                put(&mut out, "firstKeptEntryId", Value::from(kept.clone()));
            }
            if let Some(tokens) = tokens_before {
                put(&mut out, "tokensBefore", Value::from(*tokens));
            }
            if let Some(details) = details {
                put(&mut out, "details", details.clone());
            }
            if let Some(from_hook) = from_hook {
                put(&mut out, "fromHook", Value::Bool(*from_hook));
            }
        }
        EntryKind::BranchSummary {
            from_id,
            summary,
            details,
            from_hook,
        } => {
            put(&mut out, "fromId", Value::from(from_id.clone()));
            put(&mut out, "summary", Value::from(summary.clone()));
            if let Some(details) = details {
                put(&mut out, "details", details.clone());
            }
            if let Some(from_hook) = from_hook {
                put(&mut out, "fromHook", Value::Bool(*from_hook));
            }
        }
        EntryKind::Custom { custom_type, data } => {
            put(&mut out, "customType", Value::from(custom_type.clone()));
            if let Some(data) = data {
                put(&mut out, "data", data.clone());
            }
        }
        EntryKind::CustomMessage {
            custom_type,
            content,
            content_form,
            display,
            details,
        } => {
            put(&mut out, "customType", Value::from(custom_type.clone()));
            write_content(&mut out, "content", content, *content_form);
            if let Some(display) = display {
                put(&mut out, "display", Value::Bool(*display));
            }
            if let Some(details) = details {
                put(&mut out, "details", details.clone());
            }
        }
        EntryKind::ThinkingLevelChange { thinking_level } => {
            put(
                &mut out,
                "thinkingLevel",
                Value::from(thinking_level.clone()),
            );
        }
        EntryKind::ModelChange { provider, model_id } => {
            put(&mut out, "provider", Value::from(provider.clone()));
            put(&mut out, "modelId", Value::from(model_id.clone()));
        }
        EntryKind::Label { target_id, label } => {
            put(&mut out, "targetId", Value::from(target_id.clone()));
            if let Some(label) = label {
                put(&mut out, "label", Value::from(label.clone()));
            }
        }
        EntryKind::SessionInfo { name } => {
            if let Some(name) = name {
                put(&mut out, "name", Value::from(name.clone()));
            }
        }
        EntryKind::Other(body) => write_extra(&mut out, body),
    }
    write_extra(&mut out, &entry.extra);
    Value::Object(out)
}

fn put(out: &mut Map<String, Value>, key: &str, value: Value) {
    out.insert(key.to_owned(), value);
}

/// Writes the header line's JSON object.
pub fn encode_header(header: &SessionHeader) -> Value {
    let mut out = Map::new();
    out.insert("type".to_owned(), Value::from("session"));
    out.insert("version".to_owned(), Value::from(header.version));
    out.insert("id".to_owned(), Value::from(header.id.clone()));
    let optional = [
        ("timestamp", &header.timestamp),
        ("cwd", &header.cwd),
        ("parentSession", &header.parent_session),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            out.insert(key.to_owned(), Value::from(value.clone()));
        }
    }
    write_extra(&mut out, &header.extra);
    Value::Object(out)
}
// ---------------------------------------------------------------------------------------------
// Session file
// ---------------------------------------------------------------------------------------------

/// A decoded session and what the reader had to say about it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRead {
    pub session: Session,
    /// Problems, by line: lines skipped, entries whose body did not decode (kept as
    /// [`EntryKind::Other`], out of the context), duplicate ids, parents that point nowhere,
    /// `parentId` cycles, compactions whose `firstKeptEntryId` points nowhere.
    pub issues: Vec<LineIssue>,
    /// Entries that never reach the model (model, thinking-level and label changes, session info,
    /// `custom` state, unknown types).
    pub ignored_lines: usize,
    /// The file's version when it was older than [`CURRENT_VERSION`] and was migrated.
    pub migrated_from: Option<u64>,
}

/// Reads a session file: a header on the first non-blank line, then one entry per line.
///
/// Bad entry lines are reported in [`SessionRead::issues`] and skipped; only a missing or invalid
/// header (or a version newer than 3) fails the whole read. Versions 1 and 2 are migrated as pi
/// does: version 1 entries get ids and parents from line order (ids are the entry's position as 8
/// hex digits, since core has no randomness) and `firstKeptEntryIndex` becomes
/// `firstKeptEntryId`; version 2 `hookMessage` roles become `custom`.
pub fn decode_session(input: &str) -> Result<SessionRead, OpenClawError> {
    // Editors on Windows may prepend a byte-order mark; it is not part of the JSON.
    let input = input.strip_prefix('\u{feff}').unwrap_or(input);
    let mut lines = input
        .split('\n')
        .enumerate()
        .map(|(index, text)| (index + 1, text.strip_suffix('\r').unwrap_or(text)))
        .filter(|(_, text)| !text.trim().is_empty());
    let Some((header_line, header_text)) = lines.next() else {
        return Err(OpenClawError::Empty);
    };
    let (header, version) = decode_header(header_text, header_line)?;

    let mut issues = Vec::new();
    let mut raw: Vec<(usize, Map<String, Value>)> = Vec::new();
    for (line, text) in lines {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(obj)) => raw.push((line, obj)),
            Ok(other) => issues.push(LineIssue {
                line,
                message: format!(
                    "expected a JSON object (a session entry), found {}; line skipped",
                    kind(&other)
                ),
            }),
            Err(err) => issues.push(LineIssue {
                line,
                message: format!(
                    "expected a JSON object (a session entry), found invalid JSON ({err}); line skipped"
                ),
            }),
        }
    }
    if version < 2 {
        migrate_v1_to_v2(&mut raw);
    }
    if version < 3 {
        migrate_v2_to_v3(&mut raw);
    }

    let mut session = Session::new(header);
    let mut entry_lines = Vec::new();
    let mut ignored_lines = 0;
    for (line, obj) in &raw {
        match decode_entry_object(obj) {
            Err(err) => issues.push(LineIssue {
                line: *line,
                message: format!("{err}; line skipped"),
            }),
            Ok((entry, body_error)) => {
                match body_error {
                    Some(err) => issues.push(LineIssue {
                        line: *line,
                        message: format!(
                            "{err}; entry {:?} is kept as written but left out of the model context",
                            entry.id
                        ),
                    }),
                    None if !entry.kind.feeds_context() => ignored_lines += 1,
                    None => {}
                }
                session.push_entry(entry);
                entry_lines.push(*line);
            }
        }
    }
    issues.extend(tree_issues(&session, &entry_lines));
    issues.sort_by_key(|issue| issue.line);
    Ok(SessionRead {
        session,
        issues,
        ignored_lines,
        migrated_from: (version < CURRENT_VERSION).then_some(version),
    })
}

/// Writes a session file: the header line, then one line per entry, each ending in `\n`.
pub fn encode_session(session: &Session) -> String {
    let mut out = encode_header(&session.header).to_string();
    out.push('\n');
    for entry in session.entries() {
        out.push_str(&encode_entry(entry).to_string());
        out.push('\n');
    }
    out
}

fn decode_header(text: &str, line: usize) -> Result<(SessionHeader, u64), OpenClawError> {
    let invalid = |message: String| OpenClawError::InvalidHeader { line, message };
    let value: Value = serde_json::from_str(text).map_err(|err| {
        invalid(format!(
            "expected a JSON object {{\"type\":\"session\",...}}, found invalid JSON ({err})"
        ))
    })?;
    let Value::Object(obj) = &value else {
        return Err(invalid(format!(
            "expected a JSON object {{\"type\":\"session\",...}}, found {}",
            kind(&value)
        )));
    };
    let mut fields = Fields::new(obj, Path::Root);
    match fields.take("type") {
        Some(Value::String(kind)) if kind == "session" => {}
        other => {
            return Err(invalid(format!(
                "type: expected \"session\", found {}",
                match other {
                    Some(Value::String(kind)) => format!("{kind:?}"),
                    other => kind_of(other).to_owned(),
                }
            )));
        }
    }
    let version = match fields.take("version") {
        // pi: "v1 sessions don't have this".
        None => 1,
        Some(raw) => match raw.as_u64() {
            Some(version @ 1..=CURRENT_VERSION) => version,
            Some(version) if version > CURRENT_VERSION => {
                return Err(OpenClawError::UnsupportedVersion { line, version });
            }
            Some(_) | None => {
                return Err(invalid(format!(
                    "version: expected an integer from 1 to {CURRENT_VERSION}, found {}",
                    kind(raw)
                )));
            }
        },
    };
    let header = header_fields(&mut fields).map_err(|err| invalid(err.to_string()))?;
    Ok((header, version))
}

fn header_fields(fields: &mut Fields<'_>) -> Result<SessionHeader, FieldError> {
    Ok(SessionHeader {
        version: CURRENT_VERSION,
        id: fields.required_str("id")?,
        timestamp: fields.optional_str("timestamp")?,
        cwd: fields.optional_str("cwd")?,
        parent_session: fields.optional_str("parentSession")?,
        extra: fields.rest(),
    })
}

/// pi's `migrateV1ToV2`: ids and parents from line order, `firstKeptEntryIndex` (an index into the
/// file's entries, header = 0) → `firstKeptEntryId`.
fn migrate_v1_to_v2(raw: &mut [(usize, Map<String, Value>)]) {
    let is_header =
        |obj: &Map<String, Value>| obj.get("type").and_then(Value::as_str) == Some("session");
    let mut ids: Vec<Option<String>> = Vec::with_capacity(raw.len());
    let mut previous: Option<String> = None;
    for (position, (_, obj)) in raw.iter_mut().enumerate() {
        if is_header(obj) {
            ids.push(None);
            continue;
        }
        // The entry's position among the file's lines, counting the header as 0: unique, and
        // the same on every read.
        let id = format!("{:08x}", position + 1);
        obj.insert("id".to_owned(), Value::from(id.clone()));
        obj.insert(
            "parentId".to_owned(),
            previous.clone().map_or(Value::Null, Value::from),
        );
        previous = Some(id.clone());
        ids.push(Some(id));
    }
    for (_, obj) in raw.iter_mut() {
        if obj.get("type").and_then(Value::as_str) != Some("compaction") {
            continue;
        }
        let Some(index) = obj.get("firstKeptEntryIndex").filter(|v| v.is_number()) else {
            continue;
        };
        let target = index
            .as_u64()
            .and_then(|index| usize::try_from(index).ok())
            .and_then(|index| index.checked_sub(1))
            .and_then(|position| ids.get(position).cloned().flatten());
        if let Some(target) = target {
            obj.insert("firstKeptEntryId".to_owned(), Value::from(target));
        }
        obj.remove("firstKeptEntryIndex");
    }
}

/// pi's `migrateV2ToV3`: the `hookMessage` role was renamed `custom`.
fn migrate_v2_to_v3(raw: &mut [(usize, Map<String, Value>)]) {
    for (_, obj) in raw.iter_mut() {
        if obj.get("type").and_then(Value::as_str) != Some("message") {
            continue;
        }
        if let Some(Value::Object(message)) = obj.get_mut("message") {
            if message.get("role").and_then(Value::as_str) == Some("hookMessage") {
                message.insert("role".to_owned(), Value::from("custom"));
            }
        }
    }
}

/// Duplicate ids, parents and kept entries that point nowhere, and `parentId` cycles.
fn tree_issues(session: &Session, lines: &[usize]) -> Vec<LineIssue> {
    let mut issues = Vec::new();
    let line_of = |position: usize| lines.get(position).copied().unwrap_or(0);
    let mut first_seen: HashMap<&str, usize> = HashMap::new();
    for (position, entry) in session.entries().iter().enumerate() {
        let line = line_of(position);
        match first_seen.get(entry.id.as_str()) {
            Some(&first) => issues.push(LineIssue {
                line,
                message: format!(
                    "duplicate entry id {:?} (first on line {first}); lookups by id find this later entry",
                    entry.id
                ),
            }),
            None => {
                first_seen.insert(&entry.id, line);
            }
        }
        if let Some(parent) = &entry.parent_id {
            if session.position(parent).is_none() {
                issues.push(LineIssue {
                    line,
                    message: format!(
                        "parentId {parent:?} points to no entry; the path to the root stops at this entry"
                    ),
                });
            }
        }
        if let EntryKind::Compaction {
            first_kept_entry_id: Some(kept),
            ..
        } = &entry.kind
        {
            if session.position(kept).is_none() {
                issues.push(LineIssue {
                    line,
                    message: format!(
                        "firstKeptEntryId {kept:?} points to no entry; no entry before this compaction is kept"
                    ),
                });
            }
        }
    }

    // Iterative three-state walk: every entry is visited once, so this is linear.
    const NEW: u8 = 0;
    const ON_WALK: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; session.entries().len()];
    for start in 0..session.entries().len() {
        let mut walk = Vec::new();
        let mut position = Some(start);
        while let Some(at) = position {
            match state.get(at).copied() {
                Some(NEW) => {}
                Some(ON_WALK) => {
                    if let Some(entry) = session.entries().get(at) {
                        issues.push(LineIssue {
                            line: line_of(at),
                            message: format!(
                                "entry {:?} is its own ancestor (a parentId cycle); paths through it stop where the cycle closes",
                                entry.id
                            ),
                        });
                    }
                    break;
                }
                Some(_) | None => break,
            }
            if let Some(slot) = state.get_mut(at) {
                *slot = ON_WALK;
            }
            walk.push(at);
            position = session
                .entries()
                .get(at)
                .and_then(|entry| entry.parent_id.as_deref())
                .and_then(|parent| session.position(parent));
        }
        for at in walk {
            if let Some(slot) = state.get_mut(at) {
                *slot = DONE;
            }
        }
    }
    issues
}
