//! Anthropic Messages wire format: request bodies (`model`, `system`, `messages`, `tools`,
//! `max_tokens`) and non-streaming responses (`type: "message"`), decoded into and encoded from the
//! neutral [`crate::message`] model.
//!
//! # Mapping
//! - The top-level `system` becomes a leading [`Role::System`] message whose `content_form` records
//!   whether it was a string ([`ContentForm::Text`]) or a list of blocks.
//! - A `system` message inside `messages` (Claude Code's mid-conversation system messages) becomes
//!   a [`Role::System`] message in place, marked with [`IN_MESSAGES_HINT`]: the encoder writes it
//!   back as `role: "system"` where it was, even first in `messages` with no top-level `system`.
//!   Without the mark (a conversation from elsewhere) leading system messages become `system` and
//!   later ones user text, as before.
//! - A `user` message holding any `tool_result` block becomes a [`Role::ToolResult`] message with
//!   all its blocks, text included, in order; the encoder writes it back as `user`.
//! - `tool_use.input` is the call's `arguments` (`arguments_text` stays `None`); `tool_result`
//!   keeps the form of its `content` (string, blocks or absent) and `is_error` (`None` if absent).
//! - `redacted_thinking`, `document`, server-tool blocks and any type added later are
//!   [`Block::Opaque`]; so is an image whose source is neither `base64` nor `url`.
//!
//! # Round trips and provenance
//! `encode_request(&decode_request(v)?)` equals `v` as a [`serde_json::Value`] (key order inside
//! rebuilt objects is canonical), and likewise for responses. As in [`super::openai`], the decoder
//! marks what it produces with `extra[ORIGIN_KEY] = "anthropic"` and the encoder writes extra
//! fields (`cache_control`, `citations`…) and opaque blocks only for marked messages (and top-level
//! fields and tool definitions only for a marked conversation). Everything else is written as a
//! valid Anthropic request from its typed parts: leading system messages become `system` (later
//! ones become `user` text, so the cached prefix stays put), consecutive tool-result messages are
//! merged into one `user` message with the results first, thinking without a signature and empty
//! text are dropped, `data:` image URLs become base64 sources, an OpenAI conversation's sampling
//! parameters are translated and `max_tokens` defaults to [`DEFAULT_MAX_TOKENS`].
//! [`ToolResult::details`] is never written.

use serde_json::{Map, Value};

use super::json::{
    Path, as_object, content_as_spelled, count, each, insert_changed_str, insert_nonempty,
    insert_opt_str, object_entry, optional_array, optional_object, optional_str, required,
    required_array, required_object, required_str, rest, text_block, write_extra, wrong,
};
pub use super::openai::{HINT_PREFIX, ORIGIN_KEY};
use super::openai::{mark, origin};
use crate::message::{
    Block, ContentForm, Conversation, Extra, ImageBlock, ImageSource, Message, MessageMeta, Role,
    StopReason, ThinkingBlock, ToolCall, ToolResult, ToolSpec, Usage,
};

pub use super::wire::{WireError, WireResponse};

/// The [`ORIGIN_KEY`] value this codec writes.
pub const ORIGIN: &str = "anthropic";
/// `max_tokens` for a request built from a conversation that did not say (Anthropic requires it;
/// every Claude model can produce this many).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// Unknown fields of an image block's `source` object (the block's own are the image's extra).
const SOURCE_HINT: &str = "skald:anthropic.source";

/// Marks a [`Role::System`] message that came from inside `messages` (`role: "system"`), not from
/// the top-level `system`, so the encoder puts it back where it was.
pub const IN_MESSAGES_HINT: &str = "skald:anthropic.in_messages";

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Decodes a Messages request body.
pub fn decode_request(value: &Value) -> Result<Conversation, WireError> {
    let root = Path::Root;
    let obj = as_object(value, root, "an object with \"messages\"")?;
    let mut conversation = Conversation::default();
    let mut consumed = vec!["messages"];

    let system_path = root.key("system");
    let system = match obj.get("system") {
        Some(Value::String(text)) => Some(Message::text(Role::System, text.clone())),
        Some(Value::Array(blocks)) => Some(Message::new(
            Role::System,
            decode_blocks(blocks, system_path, false)?,
        )),
        // A null `system` stays in `extra` and is written back as is.
        Some(Value::Null) | None => None,
        Some(other @ (Value::Bool(_) | Value::Number(_) | Value::Object(_))) => {
            return Err(wrong(system_path, "a string or an array of text blocks", other).into());
        }
    };
    if let Some(mut system) = system {
        consumed.push("system");
        mark(&mut system.extra, ORIGIN);
        conversation.messages.push(system);
    }

    let messages = required_array(obj, "messages", root, "an array of messages")?;
    let messages = each(messages, root.key("messages"), decode_message)?;
    conversation.messages.extend(messages);
    conversation.model = optional_str(obj, "model", root, &mut consumed)?;
    let tools = optional_array(obj, "tools", root, "an array of tools", &mut consumed)?;
    conversation.tools = each(tools, root.key("tools"), decode_tool)?;

    conversation.extra = rest(obj, &consumed);
    mark(&mut conversation.extra, ORIGIN);
    Ok(conversation)
}

/// Parses and decodes a Messages request body.
pub fn decode_request_str(input: &str) -> Result<Conversation, WireError> {
    decode_request(&serde_json::from_str(input)?)
}

/// Decodes a non-streaming Messages response.
pub fn decode_response(value: &Value) -> Result<WireResponse, WireError> {
    let root = Path::Root;
    let obj = as_object(value, root, "an object with \"content\"")?;
    let content_path = root.key("content");
    let blocks = required_array(obj, "content", root, "an array of content blocks")?;
    let mut message = Message::new(Role::Assistant, decode_blocks(blocks, content_path, false)?);
    message.meta = read_meta(obj)?;
    mark(&mut message.extra, ORIGIN);
    let mut envelope = obj.clone();
    envelope.insert("content".to_owned(), Value::Null);
    Ok(WireResponse { message, envelope })
}

/// Parses and decodes a non-streaming Messages response.
pub fn decode_response_str(input: &str) -> Result<WireResponse, WireError> {
    decode_response(&serde_json::from_str(input)?)
}

fn decode_message(value: &Value, path: Path<'_>) -> Result<Message, WireError> {
    let obj = as_object(value, path, "an object with \"role\" and \"content\"")?;
    let role = match required_str(obj, "role", path)? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" => Role::System,
        other => {
            return Err(WireError::UnknownValue {
                path: path.key("role").render(),
                expected: "\"user\", \"assistant\" or \"system\"",
                found: other.to_owned(),
            });
        }
    };
    let (content, content_form) = decode_content(obj.get("content"), path.key("content"), false)?;
    let role = match role {
        Role::User
            if content
                .iter()
                .any(|block| matches!(block, Block::ToolResult(_))) =>
        {
            Role::ToolResult
        }
        Role::System | Role::User | Role::Assistant | Role::ToolResult | Role::Custom(_) => role,
    };
    let mut message = Message {
        content_form,
        ..Message::new(role, content)
    };
    message.extra = rest(obj, &["role", "content"]);
    mark(&mut message.extra, ORIGIN);
    if message.role == Role::System {
        message
            .extra
            .insert(IN_MESSAGES_HINT.to_owned(), Value::Bool(true));
    }
    Ok(message)
}

/// `content` of a message or of a `tool_result`: a string or an array of content blocks (absent
/// and `null` are kept as such). With `nested`, as inside a `tool_result`, a `tool_result` block is
/// kept opaque.
///
/// Also the block decoder of importers whose transcripts store Anthropic messages (Claude Code),
/// so they read blocks exactly as this codec does; they pass `nested` where results cannot be.
pub(crate) fn decode_content(
    value: Option<&Value>,
    path: Path<'_>,
    nested: bool,
) -> Result<(Vec<Block>, ContentForm), WireError> {
    let expected = "a string or an array of content blocks";
    super::json::content(value, path, expected, |block, path| {
        decode_block(block, path, nested)
    })
}

fn decode_blocks(blocks: &[Value], path: Path<'_>, nested: bool) -> Result<Vec<Block>, WireError> {
    each(blocks, path, |block, path| {
        decode_block(block, path, nested)
    })
}

/// One content block. Inside a `tool_result` (`nested`) a further `tool_result` is kept opaque:
/// results do not nest in the model, and it bounds the recursion.
fn decode_block(value: &Value, path: Path<'_>, nested: bool) -> Result<Block, WireError> {
    let obj = as_object(value, path, "an object with \"type\"")?;
    match required_str(obj, "type", path)? {
        "text" => Ok(text_block(obj, path)?),
        "image" => decode_image(value, obj, path),
        "thinking" => {
            let thinking = required_str(obj, "thinking", path)?.to_owned();
            let mut consumed = vec!["type", "thinking"];
            let signature = optional_str(obj, "signature", path, &mut consumed)?;
            Ok(Block::Thinking(ThinkingBlock {
                thinking,
                signature,
                extra: rest(obj, &consumed),
            }))
        }
        "tool_use" => {
            let id = required_str(obj, "id", path)?.to_owned();
            let name = required_str(obj, "name", path)?.to_owned();
            let input = required(obj, "input", path, "an object")?;
            Ok(Block::ToolCall(ToolCall {
                id,
                name,
                arguments: input.clone(),
                arguments_text: None,
                extra: rest(obj, &["type", "id", "name", "input"]),
            }))
        }
        "tool_result" if !nested => {
            let call_id = required_str(obj, "tool_use_id", path)?.to_owned();
            let (content, content_form) =
                decode_content(obj.get("content"), path.key("content"), true)?;
            let mut consumed = vec!["type", "tool_use_id", "content"];
            let is_error = match obj.get("is_error") {
                // A null flag stays in `extra`.
                None | Some(Value::Null) => None,
                Some(Value::Bool(flag)) => {
                    consumed.push("is_error");
                    Some(*flag)
                }
                Some(other) => return Err(wrong(path.key("is_error"), "a boolean", other).into()),
            };
            Ok(Block::ToolResult(ToolResult {
                call_id,
                tool_name: None,
                content: content.into(),
                content_form,
                is_error,
                details: None,
                extra: rest(obj, &consumed),
            }))
        }
        _ => Ok(Block::Opaque(value.clone())),
    }
}

fn decode_image(
    value: &Value,
    obj: &Map<String, Value>,
    path: Path<'_>,
) -> Result<Block, WireError> {
    let source_path = path.key("source");
    let source_obj = required_object(obj, "source", path, "an object with \"type\"")?;
    let (source, consumed): (ImageSource, &[&str]) =
        match required_str(source_obj, "type", source_path)? {
            "base64" => (
                ImageSource::Base64 {
                    media_type: required_str(source_obj, "media_type", source_path)?.to_owned(),
                    data: required_str(source_obj, "data", source_path)?.to_owned(),
                },
                &["type", "media_type", "data"],
            ),
            "url" => (
                ImageSource::Url {
                    url: required_str(source_obj, "url", source_path)?.to_owned(),
                },
                &["type", "url"],
            ),
            // `file` sources and whatever comes next: nothing skald reads.
            _ => return Ok(Block::Opaque(value.clone())),
        };
    let mut extra = rest(obj, &["type", "source"]);
    insert_nonempty(&mut extra, SOURCE_HINT, rest(source_obj, consumed));
    Ok(Block::Image(ImageBlock { source, extra }))
}

fn decode_tool(value: &Value, path: Path<'_>) -> Result<ToolSpec, WireError> {
    let obj = as_object(value, path, "an object with \"name\"")?;
    let name = required_str(obj, "name", path)?.to_owned();
    let mut consumed = vec!["name"];
    let description = optional_str(obj, "description", path, &mut consumed)?;
    // Server tools (`web_search_…`, `bash_…`) have no schema; `Value::Null` means "not given",
    // and a null schema stays in `extra`.
    let parameters = match obj.get("input_schema") {
        None | Some(Value::Null) => Value::Null,
        Some(schema) => {
            consumed.push("input_schema");
            schema.clone()
        }
    };
    Ok(ToolSpec {
        name,
        description,
        parameters,
        extra: rest(obj, &consumed),
    })
}

/// The meta facts a response states.
fn read_meta(obj: &Map<String, Value>) -> Result<MessageMeta, WireError> {
    let root = Path::Root;
    let mut ignored = Vec::new();
    Ok(MessageMeta {
        id: optional_str(obj, "id", root, &mut ignored)?,
        stop_reason: optional_str(obj, "stop_reason", root, &mut ignored)?
            .map(|reason| StopReason::parse(&reason)),
        usage: decode_usage(obj.get("usage"), root.key("usage"))?,
        timestamp: None,
        model: optional_str(obj, "model", root, &mut ignored)?,
        provider: None,
        assemble: None,
    })
}

fn decode_usage(value: Option<&Value>, path: Path<'_>) -> Result<Option<Usage>, WireError> {
    let Some(usage) = optional_object(value, path, "an object")? else {
        return Ok(None);
    };
    Ok(Some(Usage {
        input: count(usage, "input_tokens", path)?,
        output: count(usage, "output_tokens", path)?,
        cache_read: count(usage, "cache_read_input_tokens", path)?,
        cache_write: count(usage, "cache_creation_input_tokens", path)?,
        cache_write_1h: one_hour_writes(usage),
    }))
}

/// The part of a usage's cache writes made with the one-hour lifetime
/// (`cache_creation.ephemeral_1h_input_tokens`, priced at twice the input; Claude Code asks for
/// it), 0 when the usage does not say.
fn one_hour_writes(usage: &Map<String, Value>) -> u64 {
    usage
        .get("cache_creation")
        .and_then(|creation| creation.get("ephemeral_1h_input_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// A Messages `usage` object read leniently (a missing or mistyped count is 0), as a stream's
/// events and a session file carry it: input, output, cache reads, cache writes and the
/// one-hour part of them.
pub fn usage_of(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    Some(Usage {
        input: count("input_tokens"),
        output: count("output_tokens"),
        cache_read: count("cache_read_input_tokens"),
        cache_write: count("cache_creation_input_tokens"),
        cache_write_1h: one_hour_writes(usage),
    })
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// Encodes a conversation as a Messages request body.
///
/// A conversation this codec decoded comes back as it was; anything else is written in a shape
/// Anthropic accepts (see the module docs). Custom-role messages are not model-visible and are
/// left out.
pub fn encode_request(conversation: &Conversation) -> Value {
    let own = is_own(&conversation.extra);
    let messages = &conversation.messages;
    // The leading system messages become `system`, except one this codec read from inside
    // `messages`: it goes back there, and so does everything after it.
    let split = messages
        .iter()
        .position(|message| match message.role {
            Role::System => in_messages(message),
            Role::Custom(_) => false,
            Role::User | Role::Assistant | Role::ToolResult => true,
        })
        .unwrap_or(messages.len());
    let (leading, later) = messages
        .split_at_checked(split)
        .unwrap_or((&[], messages.as_slice()));

    let mut out = Map::new();
    if let Some(model) = &conversation.model {
        out.insert("model".to_owned(), Value::String(model.clone()));
    }
    if !own {
        if origin(&conversation.extra) == Some(super::openai::ORIGIN) {
            translate_openai_params(&conversation.extra, &conversation.tools, &mut out);
        }
        if !out.contains_key("max_tokens") {
            out.insert("max_tokens".to_owned(), Value::from(DEFAULT_MAX_TOKENS));
        }
    }
    if let Some(system) = encode_system(leading) {
        out.insert("system".to_owned(), system);
    }
    out.insert("messages".to_owned(), Value::Array(encode_messages(later)));
    if !conversation.tools.is_empty() {
        let tools = conversation
            .tools
            .iter()
            .map(|tool| encode_tool(tool, own))
            .collect();
        out.insert("tools".to_owned(), Value::Array(tools));
    }
    if own {
        write_extra(&mut out, &conversation.extra);
    }
    Value::Object(out)
}

/// Encodes a response: the envelope with the message's blocks put back as `content`.
///
/// Fields `message.meta` describes (`id`, `model`, `stop_reason`, `usage`) are rewritten only
/// where `meta` has a value the envelope does not already say. An empty envelope gets a minimal
/// `message` object.
pub fn encode_response(response: &WireResponse) -> Value {
    let message = &response.message;
    let meta = &message.meta;
    let mut envelope = if response.envelope.is_empty() {
        new_envelope(meta)
    } else {
        response.envelope.clone()
    };
    let stated = read_meta(&envelope).unwrap_or_default();

    insert_changed_str(
        &mut envelope,
        "id",
        meta.id.as_deref(),
        stated.id.as_deref(),
    );
    let (model, stated_model) = (meta.model.as_deref(), stated.model.as_deref());
    insert_changed_str(&mut envelope, "model", model, stated_model);
    let reason = meta.stop_reason.as_ref();
    if let Some(reason) = reason.filter(|reason| stated.stop_reason.as_ref() != Some(*reason)) {
        envelope.insert(
            "stop_reason".to_owned(),
            Value::String(stop_reason(reason).to_owned()),
        );
    }
    if let Some(usage) = meta.usage.filter(|usage| stated.usage != Some(*usage)) {
        write_usage(&mut envelope, &usage);
    }

    let own = is_own(&message.extra);
    let place = if matches!(message.role, Role::Assistant) {
        Place::Assistant
    } else {
        Place::User
    };
    let content = message
        .content
        .iter()
        .filter_map(|block| encode_block(block, own, place))
        .collect();
    envelope.insert("content".to_owned(), Value::Array(content));
    Value::Object(envelope)
}

/// The Messages spelling of a stop reason (`"error"` and `"aborted"` have none and are written as
/// pi spells them).
pub fn stop_reason(reason: &StopReason) -> &str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::ToolUse => "tool_use",
        StopReason::Error => "error",
        StopReason::Aborted => "aborted",
        StopReason::Other(raw) => raw,
    }
}

fn new_envelope(meta: &MessageMeta) -> Map<String, Value> {
    let mut envelope = Map::new();
    insert_opt_str(&mut envelope, "id", meta.id.as_deref());
    envelope.insert("type".to_owned(), Value::String("message".to_owned()));
    envelope.insert("role".to_owned(), Value::String("assistant".to_owned()));
    insert_opt_str(&mut envelope, "model", meta.model.as_deref());
    envelope.insert("content".to_owned(), Value::Null);
    envelope.insert(
        "stop_reason".to_owned(),
        meta.stop_reason.as_ref().map_or(Value::Null, |reason| {
            Value::String(stop_reason(reason).to_owned())
        }),
    );
    envelope.insert("stop_sequence".to_owned(), Value::Null);
    envelope
}

fn write_usage(envelope: &mut Map<String, Value>, usage: &Usage) {
    let Some(fields) = object_entry(envelope, "usage") else {
        return;
    };
    fields.insert("input_tokens".to_owned(), Value::from(usage.input));
    for (key, tokens) in [
        ("cache_creation_input_tokens", usage.cache_write),
        ("cache_read_input_tokens", usage.cache_read),
    ] {
        if tokens > 0 || fields.contains_key(key) {
            fields.insert(key.to_owned(), Value::from(tokens));
        }
    }
    fields.insert("output_tokens".to_owned(), Value::from(usage.output));
}

/// `system` from the leading system messages: as the one message spelled it, or as text blocks.
fn encode_system(leading: &[Message]) -> Option<Value> {
    let systems: Vec<&Message> = leading
        .iter()
        .filter(|message| matches!(message.role, Role::System))
        .collect();
    let mut parts = Vec::new();
    let mut all_own = true;
    for message in &systems {
        let own = is_own(&message.extra);
        all_own &= own;
        parts.extend(
            message
                .content
                .iter()
                .filter_map(|block| encode_block(block, own, Place::System)),
        );
    }
    let form = match systems.as_slice() {
        [only] => only.content_form,
        [] => return None,
        [_, _, ..] => ContentForm::Blocks,
    };
    content_value(parts, form, all_own)
}

/// Where a block is written; decides what a message from elsewhere may hold there.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    System,
    User,
    Assistant,
    /// Inside a `tool_result`'s content.
    ToolResult,
}

/// A pending `user` message merging a run of tool-result messages from elsewhere: results first,
/// as Anthropic requires, then whatever else those messages held.
#[derive(Default)]
struct MergedResults {
    results: Vec<Value>,
    others: Vec<Value>,
}

impl MergedResults {
    fn flush(&mut self, out: &mut Vec<Value>) {
        if self.results.is_empty() && self.others.is_empty() {
            return;
        }
        let mut content = std::mem::take(&mut self.results);
        content.append(&mut self.others);
        out.push(role_message("user", Some(Value::Array(content))));
    }
}

fn encode_messages(messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut merged = MergedResults::default();
    for message in messages {
        let own = is_own(&message.extra);
        let holds_results = message.tool_results().next().is_some();
        match &message.role {
            Role::Custom(_) => continue,
            Role::ToolResult | Role::User if !own && holds_results => {
                for block in &message.content {
                    let Some(encoded) = encode_block(block, false, Place::User) else {
                        continue;
                    };
                    match block {
                        Block::ToolResult(_) => merged.results.push(encoded),
                        Block::Text(_)
                        | Block::Image(_)
                        | Block::Thinking(_)
                        | Block::ToolCall(_)
                        | Block::Opaque(_) => merged.others.push(encoded),
                    }
                }
                continue;
            }
            Role::System | Role::User | Role::Assistant | Role::ToolResult => {}
        }
        merged.flush(&mut out);
        let (role, place) = match &message.role {
            Role::Assistant => ("assistant", Place::Assistant),
            Role::System if in_messages(message) => ("system", Place::System),
            Role::System | Role::User | Role::ToolResult | Role::Custom(_) => ("user", Place::User),
        };
        let parts: Vec<Value> = message
            .content
            .iter()
            .filter_map(|block| encode_block(block, own, place))
            .collect();
        if !own && parts.is_empty() {
            // Anthropic rejects messages with empty content; nothing of this one survives.
            continue;
        }
        let mut encoded = role_message(role, content_value(parts, message.content_form, own));
        if own {
            if let Value::Object(fields) = &mut encoded {
                write_extra(fields, &message.extra);
            }
        }
        out.push(encoded);
    }
    merged.flush(&mut out);
    out
}

fn role_message(role: &str, content: Option<Value>) -> Value {
    let mut message = Map::new();
    message.insert("role".to_owned(), Value::String(role.to_owned()));
    if let Some(content) = content {
        message.insert("content".to_owned(), content);
    }
    Value::Object(message)
}

/// The `content` value for encoded blocks, spelled as the message had it; `None` leaves the key
/// out.
fn content_value(parts: Vec<Value>, form: ContentForm, own: bool) -> Option<Value> {
    if parts.is_empty() && !own {
        return None;
    }
    content_as_spelled(parts, form)
}

/// A block as Anthropic writes it, or `None` where it does not belong. A block of a message this
/// codec decoded (`own`) is always written back, whatever the place.
fn encode_block(block: &Block, own: bool, place: Place) -> Option<Value> {
    let mut out = Map::new();
    let extra = match block {
        Block::Text(text) => {
            if !own && text.text.is_empty() {
                return None;
            }
            out.insert("type".to_owned(), Value::String("text".to_owned()));
            out.insert("text".to_owned(), Value::String(text.text.clone()));
            &text.extra
        }
        Block::Image(image) => {
            if !own && matches!(place, Place::System | Place::Assistant) {
                return None;
            }
            out.insert("type".to_owned(), Value::String("image".to_owned()));
            out.insert("source".to_owned(), encode_source(image, own));
            &image.extra
        }
        Block::Thinking(thinking) => {
            // Anthropic only accepts thinking it signed, and only from the assistant.
            if !own && (thinking.signature.is_none() || place != Place::Assistant) {
                return None;
            }
            out.insert("type".to_owned(), Value::String("thinking".to_owned()));
            out.insert(
                "thinking".to_owned(),
                Value::String(thinking.thinking.clone()),
            );
            if let Some(signature) = &thinking.signature {
                out.insert("signature".to_owned(), Value::String(signature.clone()));
            }
            &thinking.extra
        }
        Block::ToolCall(call) => {
            if !own && place != Place::Assistant {
                return None;
            }
            out.insert("type".to_owned(), Value::String("tool_use".to_owned()));
            out.insert("id".to_owned(), Value::String(call.id.clone()));
            out.insert("name".to_owned(), Value::String(call.name.clone()));
            out.insert("input".to_owned(), tool_input(call, own));
            &call.extra
        }
        Block::ToolResult(result) => {
            if !own && place != Place::User {
                return None;
            }
            out.insert("type".to_owned(), Value::String("tool_result".to_owned()));
            out.insert(
                "tool_use_id".to_owned(),
                Value::String(result.call_id.clone()),
            );
            let parts = result
                .content
                .iter()
                .filter_map(|inner| encode_block(inner, own, Place::ToolResult))
                .collect();
            if let Some(content) = content_value(parts, result.content_form, own) {
                out.insert("content".to_owned(), content);
            }
            if let Some(flag) = result.is_error {
                out.insert("is_error".to_owned(), Value::Bool(flag));
            }
            &result.extra
        }
        Block::Opaque(value) => return own.then(|| value.clone()),
    };
    if own {
        write_extra(&mut out, extra);
    }
    Some(Value::Object(out))
}

fn encode_source(image: &ImageBlock, own: bool) -> Value {
    let mut source = Map::new();
    match &image.source {
        ImageSource::Base64 { media_type, data } => {
            source.insert("type".to_owned(), Value::String("base64".to_owned()));
            source.insert("media_type".to_owned(), Value::String(media_type.clone()));
            source.insert("data".to_owned(), Value::String(data.clone()));
        }
        ImageSource::Url { url } => match split_data_url(url).filter(|_| !own) {
            // Anthropic's `url` source fetches over HTTP; inline data must be a base64 source.
            Some((media_type, data)) => {
                source.insert("type".to_owned(), Value::String("base64".to_owned()));
                source.insert(
                    "media_type".to_owned(),
                    Value::String(media_type.to_owned()),
                );
                source.insert("data".to_owned(), Value::String(data.to_owned()));
            }
            None => {
                source.insert("type".to_owned(), Value::String("url".to_owned()));
                source.insert("url".to_owned(), Value::String(url.clone()));
            }
        },
    }
    if let (true, Some(Value::Object(hinted))) = (own, image.extra.get(SOURCE_HINT)) {
        write_extra(&mut source, hinted);
    }
    Value::Object(source)
}

/// `(media_type, data)` of a `data:<media type>;base64,<data>` URL.
fn split_data_url(url: &str) -> Option<(&str, &str)> {
    let (header, data) = url.strip_prefix("data:")?.split_once(',')?;
    let media_type = header.strip_suffix(";base64")?;
    Some((media_type, data))
}

/// `tool_use.input`, which Anthropic requires to be an object. Arguments from elsewhere that are
/// not one (text that was not JSON) are wrapped rather than lost.
fn tool_input(call: &ToolCall, own: bool) -> Value {
    if own || call.arguments.is_object() {
        return call.arguments.clone();
    }
    match &call.arguments {
        Value::Null => Value::Object(Map::new()),
        Value::String(text) if text.trim().is_empty() => Value::Object(Map::new()),
        Value::Bool(_)
        | Value::Number(_)
        | Value::String(_)
        | Value::Array(_)
        | Value::Object(_) => {
            let mut wrapped = Map::new();
            wrapped.insert("arguments".to_owned(), call.arguments.clone());
            Value::Object(wrapped)
        }
    }
}

fn encode_tool(tool: &ToolSpec, own: bool) -> Value {
    let mut out = Map::new();
    out.insert("name".to_owned(), Value::String(tool.name.clone()));
    if let Some(description) = &tool.description {
        out.insert("description".to_owned(), Value::String(description.clone()));
    }
    if !tool.parameters.is_null() {
        out.insert("input_schema".to_owned(), tool.parameters.clone());
    } else if !own {
        // Custom tools need a schema; a tool that takes nothing takes an empty object.
        out.insert(
            "input_schema".to_owned(),
            serde_json::json!({"type": "object", "properties": {}}),
        );
    }
    if own {
        write_extra(&mut out, &tool.extra);
    }
    Value::Object(out)
}

/// The Chat Completions request parameters that have a Messages equivalent.
fn translate_openai_params(extra: &Extra, tools: &[ToolSpec], out: &mut Map<String, Value>) {
    let limit = extra
        .get("max_completion_tokens")
        .or_else(|| extra.get("max_tokens"))
        .filter(|limit| limit.is_u64());
    if let Some(limit) = limit {
        out.insert("max_tokens".to_owned(), limit.clone());
    }
    for key in ["top_p", "stream"] {
        if let Some(value) = extra.get(key) {
            out.insert(key.to_owned(), value.clone());
        }
    }
    // OpenAI samples temperatures up to 2, Anthropic up to 1.
    if let Some(temperature) = extra.get("temperature").and_then(Value::as_f64) {
        out.insert(
            "temperature".to_owned(),
            Value::from(temperature.clamp(0.0, 1.0)),
        );
    }
    match extra.get("stop") {
        Some(Value::String(stop)) => {
            out.insert(
                "stop_sequences".to_owned(),
                Value::Array(vec![Value::String(stop.clone())]),
            );
        }
        Some(stops @ Value::Array(_)) => {
            out.insert("stop_sequences".to_owned(), stops.clone());
        }
        Some(Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_)) | None => {}
    }
    if tools.is_empty() {
        return;
    }
    let mut choice = match extra.get("tool_choice") {
        Some(Value::String(mode)) => match mode.as_str() {
            "auto" => Some(serde_json::json!({"type": "auto"})),
            "required" => Some(serde_json::json!({"type": "any"})),
            "none" => Some(serde_json::json!({"type": "none"})),
            _ => None,
        },
        Some(Value::Object(choice)) => choice
            .get("function")
            .and_then(|function| function.get("name"))
            .and_then(Value::as_str)
            .map(|name| serde_json::json!({"type": "tool", "name": name})),
        Some(Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_)) | None => None,
    };
    if extra.get("parallel_tool_calls") == Some(&Value::Bool(false)) {
        let choice = choice.get_or_insert_with(|| serde_json::json!({"type": "auto"}));
        if let Value::Object(fields) = choice {
            fields.insert("disable_parallel_tool_use".to_owned(), Value::Bool(true));
        }
    }
    if let Some(choice) = choice {
        out.insert("tool_choice".to_owned(), choice);
    }
}

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

fn is_own(extra: &Extra) -> bool {
    origin(extra) == Some(ORIGIN)
}

/// A system message this codec read from inside `messages`, to be written back there.
fn in_messages(message: &Message) -> bool {
    message.role == Role::System
        && is_own(&message.extra)
        && message.extra.get(IN_MESSAGES_HINT) == Some(&Value::Bool(true))
}
