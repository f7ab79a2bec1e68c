//! One pi `AgentMessage` ↔ one [`Message`]: [`decode_agent_message`] (and
//! [`decode_agent_message_at`], which names the root of error paths) and [`encode_agent_message`]
//! / [`encode_agent_messages`], with the content blocks, usage, timestamps and stop reasons inside
//! a message. Entry lines wrap these messages ([`super::entry`]).

use serde_json::{Map, Value};

use super::{Fields, OpenClawError, SKALD_CONTENT_KEY};
use crate::assemble_record::AssembleRecord;
use crate::codec::json::{FieldError, Path, as_object, rest, text_block, write_extra};
use crate::message::{
    Block, ContentForm, Extra, ImageBlock, ImageSource, Message, MessageMeta, Role, StopReason,
    ThinkingBlock, Timestamp, ToolCall, ToolResult, Usage, is_hint_key,
};

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

pub(super) fn decode_message(value: &Value, path: Path<'_>) -> Result<Message, FieldError> {
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
                let blocks =
                    crate::codec::json::each(blocks, path.key(SKALD_CONTENT_KEY), decode_block)?;
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
        assemble: None,
    };
    let mut meta = meta;
    let mut extra = fields.rest();
    if let Some(record) = extra
        .get(ASSEMBLE_KEY)
        .and_then(|value| serde_json::from_value::<AssembleRecord>(value.clone()).ok())
    {
        // A record that does not parse stays in `extra` as written: nothing is lost.
        extra.remove(ASSEMBLE_KEY);
        meta.assemble = Some(Box::new(record));
    }
    if let Some(rest) = usage_rest {
        // What pi adds beyond the four typed counts (totalTokens, cost) rides along here and is
        // merged back into `usage` on encode. An empty object still marks "pi usage, nothing
        // else", so the encoder does not invent totals for it.
        extra.insert("usage".to_owned(), Value::Object(rest.into_inner()));
    }
    Ok(Message {
        role,
        content: content.into(),
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
        content: content.into(),
        content_form,
        is_error,
        details: details.map(std::sync::Arc::new),
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
        cache_write_1h: count(CACHE_WRITE_1H_KEY).unwrap_or(0),
    };
    Some((usage, rest(obj, &USAGE_KEYS)))
}

/// skald's key for the one-hour part of `cacheWrite` (pi ignores keys it does not know), written
/// only when there is one, so a session imported from Claude Code keeps what its cache writes
/// cost.
const CACHE_WRITE_1H_KEY: &str = "skaldCacheWrite1h";

const USAGE_KEYS: [&str; 5] = [
    "input",
    "output",
    "cacheRead",
    "cacheWrite",
    CACHE_WRITE_1H_KEY,
];

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

pub(super) fn decode_content(
    value: Option<&Value>,
    path: Path<'_>,
) -> Result<(Vec<Block>, ContentForm), FieldError> {
    let expected = "a string or an array of content blocks";
    crate::codec::json::content(value, path, expected, decode_block)
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
                out.insert("details".to_owned(), Value::clone(details));
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
                content: vec![Block::ToolResult(result.clone())].into(),
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
                content: rest.into(),
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

pub(super) fn write_content(
    out: &mut Map<String, Value>,
    key: &str,
    blocks: &[Block],
    form: ContentForm,
) {
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
    if let Some(record) = &meta.assemble {
        if let Ok(value) = serde_json::to_value(record) {
            out.insert(ASSEMBLE_KEY.to_owned(), value);
        }
    }
}

/// The key of skald's [`AssembleRecord`] on a stored answer (pi ignores keys it does not know).
const ASSEMBLE_KEY: &str = "skaldAssemble";

fn encode_usage(usage: &Usage, rest: Option<&Value>) -> Value {
    let mut out = Map::new();
    out.insert("input".to_owned(), Value::from(usage.input));
    out.insert("output".to_owned(), Value::from(usage.output));
    out.insert("cacheRead".to_owned(), Value::from(usage.cache_read));
    out.insert("cacheWrite".to_owned(), Value::from(usage.cache_write));
    if usage.cache_write_1h > 0 {
        out.insert(
            CACHE_WRITE_1H_KEY.to_owned(),
            Value::from(usage.cache_write_1h),
        );
    }
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
                out.insert("details".to_owned(), Value::clone(details));
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
