//! OpenAI Responses wire format: request bodies (`model`, `instructions`, `input` items, `tools`)
//! and non-streaming responses (`object: "response"`, `output` items, `usage`), decoded into and
//! encoded from the neutral [`crate::message`] model.
//!
//! # Mapping
//! Responses has no messages, only a list of typed *items*; the codec maps them so the pipeline
//! sees ordinary turns, and so a response's `output` decodes exactly as the same items do when the
//! client sends them back in the next request's `input`:
//! - `instructions` (a string) becomes a leading [`Role::System`] message marked with
//!   [`INSTRUCTIONS_HINT`]; `input` given as a bare string becomes one [`Role::User`] message.
//! - A `message` item (or an "easy input message", `role` without `type`) with role `user`,
//!   `developer` or `system` is one message: `developer` and `system` are [`Role::System`], with
//!   [`ROLE_HINT`] `"system"` for the second spelling. `input_text`/`output_text` parts are text
//!   blocks, `input_image` parts with an `image_url` are images, other parts are opaque blocks.
//! - **A run of consecutive model-output items is one [`Role::Assistant`] message**, its blocks in
//!   item order: an assistant `message` item gives one text block per part (the item's own fields
//!   ride on the first as [`ITEM_HINT`]); a `function_call` is a [`Block::ToolCall`] (`call_id` is
//!   the id, `arguments` parsed, `arguments_text` kept; `id`, `status` and the rest in its extra);
//!   `reasoning` (with its `encrypted_content`), `custom_tool_call`, `local_shell_call`,
//!   `web_search_call` and the other hosted-tool calls are [`Block::Opaque`] blocks holding the
//!   item verbatim. An assistant `message` item whose content is not plain text parts (a
//!   `refusal`, no parts) is opaque too. Parallel calls thus share one assistant message, as in the
//!   other formats, and repair and turn counting see one turn per model response.
//! - A `function_call_output` is one [`Role::ToolResult`] message with one [`Block::ToolResult`]
//!   (`output` as text or as parts, its form kept; the item's other fields in the result's extra).
//!   Outputs of other tool kinds (`custom_tool_call_output`, `local_shell_call_output`…) are
//!   [`Role::ToolResult`] messages holding the item as an opaque block.
//! - Every other item (`compaction`, `context_compaction`, `item_reference`, types added later) is
//!   a [`Role::User`] message holding the item as one opaque block ([`OPAQUE_ITEMS_HINT`]), in
//!   place.
//! - Function tools (`{"type": "function", "name", …}`, flat) are tool specs; every other tool
//!   (`namespace`, `web_search`, `custom`, `local_shell`…) is a spec holding its fields verbatim in
//!   `extra`, named by its `name` or else its `type`, and is written back as it was.
//! - A response's `output` decodes to one assistant message by the rule above; its `meta` comes
//!   from `id`, `model`, `created_at`, `status` (plus `incomplete_details`, and whether it called a
//!   function) and `usage`, where `input_tokens` includes the cached tokens and [`Usage::input`]
//!   does not.
//!
//! # Round trips and provenance
//! `encode_request(&decode_request(v)?)` equals `v` as a [`serde_json::Value`] (key order inside
//! rebuilt objects is canonical), and likewise for responses. As in [`super::openai`], the decoder
//! marks what it produces with `extra[ORIGIN_KEY] = "responses"`, and the encoder writes extra
//! fields, hints and opaque blocks only for marked messages (top-level fields and non-function
//! tools only for a marked conversation). A marked message the pipeline built or changed (no item
//! hints) is written in the default spelling. Anything else is written as a valid Responses
//! request from its typed parts: the leading system messages become `instructions`, later ones
//! `developer` messages; text is `input_text` (`output_text` with empty `annotations` for the
//! assistant); tool calls are `function_call` items after their message's text; each tool result
//! is a `function_call_output` with string output, the images it carried following in a `user`
//! message; thinking and opaque blocks are dropped; tools are flat function tools with
//! `strict: false`; an OpenAI or Anthropic conversation's sampling parameters are translated.
//! [`ToolResult::details`] and `is_error` are never written (the format has no such field).

use serde_json::{Map, Value};

use super::json::{
    FieldError, Path, as_object, count, each, insert_changed_str, insert_opt_str, object_entry,
    optional_array, optional_object, optional_str, required, required_array, required_str, rest,
    write_extra, wrong,
};
pub use super::openai::{HINT_PREFIX, ORIGIN_KEY};
use super::openai::{arguments_text, mark, origin, parse_arguments};
use crate::message::{
    Block, ContentForm, Conversation, Extra, ImageBlock, ImageSource, Message, MessageMeta, Role,
    StopReason, TextBlock, Timestamp, ToolCall, ToolResult, ToolSpec, Usage, join_text,
};

/// The [`ORIGIN_KEY`] value this codec writes.
pub const ORIGIN: &str = "responses";
/// On a [`Role::System`] message: `"system"` when the item spelled its role so (`developer` is
/// the default).
pub const ROLE_HINT: &str = "skald:responses.role";
/// On a [`Role::System`] message: it is the request's top-level `instructions`.
pub const INSTRUCTIONS_HINT: &str = "skald:responses.instructions";
/// On the first text block of an assistant `message` item: the item's fields other than
/// `content` (`type`, `role`, `id`, `status`…). A text block carrying it starts a new item.
pub const ITEM_HINT: &str = "skald:responses.item";
/// On a [`Role::User`] message: its opaque blocks are whole input items, not content parts.
pub const OPAQUE_ITEMS_HINT: &str = "skald:responses.items";

/// On a text block: the part's `type` when it is not the default for its place (`output_text` in
/// assistant items, `input_text` elsewhere).
const PART_HINT: &str = "skald:responses.part";
/// On an `output_text` block that had no `annotations` (others from elsewhere get an empty list).
const BARE_HINT: &str = "skald:responses.bare";
/// On the first text block of an assistant item whose `content` was a bare string.
const TEXT_CONTENT_HINT: &str = "skald:responses.text";
/// On a message: the item had no `type` (an easy input message).
const UNTYPED_HINT: &str = "skald:responses.untyped";
/// On a conversation: `input` was a bare string (`"text"`) or absent (`"absent"`).
const INPUT_HINT: &str = "skald:responses.input";
/// On a tool spec: not a function tool; its fields are in `extra`, written back verbatim.
const TOOL_HINT: &str = "skald:responses.tool";
/// On a verbatim tool spec that had no `name` (its `name` here is its `type`).
const NAMELESS_HINT: &str = "skald:responses.nameless";

/// Model-output items other than messages and function calls: kept opaque in the assistant turn.
const OUTPUT_ITEMS: [&str; 13] = [
    "reasoning",
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
    "file_search_call",
    "computer_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "tool_search_call",
    "shell_call",
];
/// Outputs of tools other than functions: kept opaque in a tool-result message.
const TOOL_OUTPUT_ITEMS: [&str; 6] = [
    "custom_tool_call_output",
    "local_shell_call_output",
    "computer_call_output",
    "mcp_approval_response",
    "tool_search_output",
    "shell_call_output",
];

/// Text put before images that came out of tool results from elsewhere.
const TOOL_IMAGES_LABEL: &str = "Attached image(s) from tool result:";
/// Output of a result from elsewhere that was only images.
const IMAGE_ONLY_RESULT: &str = "(see attached image)";

/// Why a value is not a valid Responses request or response. Every variant but `Json` names the
/// field by its JSON path (`input[3].call_id`, or `top level`).
#[derive(Debug, thiserror::Error)]
pub enum ResponsesError {
    /// The input is not JSON at all (the message carries line and column).
    #[error("not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A required field is absent.
    #[error("{path}: missing, expected {expected}")]
    Missing {
        path: String,
        expected: &'static str,
    },
    /// A field has the wrong JSON type.
    #[error("{path}: expected {expected}, found {found}")]
    WrongType {
        path: String,
        expected: &'static str,
        found: &'static str,
    },
    /// A field has the right type but a value the format does not define.
    #[error("{path}: expected {expected}, found {found:?}")]
    UnknownValue {
        path: String,
        expected: &'static str,
        found: String,
    },
}

impl ResponsesError {
    /// The JSON path of the offending field, when the error is about one.
    pub fn path(&self) -> Option<&str> {
        match self {
            ResponsesError::Json(_) => None,
            ResponsesError::Missing { path, .. }
            | ResponsesError::WrongType { path, .. }
            | ResponsesError::UnknownValue { path, .. } => Some(path),
        }
    }
}

impl From<FieldError> for ResponsesError {
    fn from(error: FieldError) -> Self {
        let FieldError {
            path,
            expected,
            found,
        } = error;
        match found {
            None => ResponsesError::Missing { path, expected },
            Some(found) => ResponsesError::WrongType {
                path,
                expected,
                found,
            },
        }
    }
}

/// A decoded response: its output as one assistant message plus the envelope to write it back.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsesResponse {
    /// The `output` items as one assistant message (see the module docs), with `meta` filled
    /// from `id`, `model`, `created_at`, `status` and `usage`.
    pub message: Message,
    /// The response object as received, with `output` set to `null`. The encoder puts the output
    /// back and overwrites the fields `meta` describes only where `meta` says something else.
    pub envelope: Map<String, Value>,
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Decodes a Responses request body.
pub fn decode_request(value: &Value) -> Result<Conversation, ResponsesError> {
    let root = Path::Root;
    let obj = as_object(value, root, "an object with \"input\"")?;
    let mut conversation = Conversation::default();
    let mut consumed = Vec::new();

    match obj.get("instructions") {
        Some(Value::String(text)) => {
            consumed.push("instructions");
            let mut system = Message::text(Role::System, text.clone());
            system
                .extra
                .insert(INSTRUCTIONS_HINT.to_owned(), Value::Bool(true));
            mark(&mut system.extra, ORIGIN);
            conversation.messages.push(system);
        }
        // A null `instructions` stays in `extra` and is written back as is.
        Some(Value::Null) | None => {}
        Some(other) => return Err(wrong(root.key("instructions"), "a string", other).into()),
    }

    let mut input_hint = None;
    match obj.get("input") {
        Some(Value::String(text)) => {
            consumed.push("input");
            let mut user = Message::text(Role::User, text.clone());
            mark(&mut user.extra, ORIGIN);
            conversation.messages.push(user);
            input_hint = Some("text");
        }
        Some(Value::Array(items)) => {
            consumed.push("input");
            decode_items(items, root.key("input"), &mut conversation.messages)?;
        }
        // A null `input` stays in `extra`.
        Some(Value::Null) | None => input_hint = Some("absent"),
        Some(other) => {
            return Err(wrong(
                root.key("input"),
                "a string or an array of input items",
                other,
            )
            .into());
        }
    }

    conversation.model = optional_str(obj, "model", root, &mut consumed)?;
    let tools = optional_array(obj, "tools", root, "an array of tools", &mut consumed)?;
    conversation.tools = each(tools, root.key("tools"), decode_tool)?;

    conversation.extra = rest(obj, &consumed);
    if let Some(hint) = input_hint {
        conversation
            .extra
            .insert(INPUT_HINT.to_owned(), Value::String(hint.to_owned()));
    }
    mark(&mut conversation.extra, ORIGIN);
    Ok(conversation)
}

/// Parses and decodes a Responses request body.
pub fn decode_request_str(input: &str) -> Result<Conversation, ResponsesError> {
    decode_request(&serde_json::from_str(input)?)
}

/// Decodes a non-streaming Responses response.
pub fn decode_response(value: &Value) -> Result<ResponsesResponse, ResponsesError> {
    let root = Path::Root;
    let obj = as_object(value, root, "an object with \"output\"")?;
    let items = required_array(obj, "output", root, "an array of output items")?;
    let output_path = root.key("output");
    let mut blocks = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let path = output_path.index(index);
        let item_obj = as_object(item, path, "an object with \"type\"")?;
        match item_type(item_obj, path)? {
            ItemType::Message("assistant") | ItemType::Other(_) => {
                decode_output_item(item, item_obj, path, &mut blocks)?;
            }
            ItemType::Message(_) => blocks.push(Block::Opaque(item.clone())),
        }
    }
    let mut message = Message::new(Role::Assistant, blocks);
    let has_calls = message.tool_calls().next().is_some();
    message.meta = read_meta(obj, has_calls)?;
    mark(&mut message.extra, ORIGIN);
    let mut envelope = obj.clone();
    envelope.insert("output".to_owned(), Value::Null);
    Ok(ResponsesResponse { message, envelope })
}

/// Parses and decodes a non-streaming Responses response.
pub fn decode_response_str(input: &str) -> Result<ResponsesResponse, ResponsesError> {
    decode_response(&serde_json::from_str(input)?)
}

/// What an item is: a message with its role, or another item type.
enum ItemType<'v> {
    Message(&'v str),
    Other(&'v str),
}

fn item_type<'v>(
    obj: &'v Map<String, Value>,
    path: Path<'_>,
) -> Result<ItemType<'v>, ResponsesError> {
    let kind = match obj.get("type") {
        // An easy input message has a role and no type.
        None if obj.contains_key("role") => "message",
        None => required_str(obj, "type", path)?,
        Some(Value::String(kind)) => kind.as_str(),
        Some(other) => return Err(wrong(path.key("type"), "a string", other).into()),
    };
    Ok(match kind {
        "message" => ItemType::Message(required_str(obj, "role", path)?),
        other => ItemType::Other(other),
    })
}

/// Decodes input items into messages: model-output runs are joined into assistant messages.
fn decode_items(
    items: &[Value],
    path: Path<'_>,
    out: &mut Vec<Message>,
) -> Result<(), ResponsesError> {
    let mut turn: Vec<Block> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let path = path.index(index);
        let obj = as_object(item, path, "an object with \"type\"")?;
        let message = match item_type(obj, path)? {
            ItemType::Message("assistant") => {
                decode_output_item(item, obj, path, &mut turn)?;
                continue;
            }
            ItemType::Other(kind) if kind == "function_call" || OUTPUT_ITEMS.contains(&kind) => {
                decode_output_item(item, obj, path, &mut turn)?;
                continue;
            }
            ItemType::Message(role) => decode_input_message(obj, role, path)?,
            ItemType::Other("function_call_output") => decode_function_output(obj, path)?,
            ItemType::Other(kind) => {
                let role = if TOOL_OUTPUT_ITEMS.contains(&kind) {
                    Role::ToolResult
                } else {
                    Role::User
                };
                let mut message = Message::new(role, vec![Block::Opaque(item.clone())]);
                if message.role == Role::User {
                    message
                        .extra
                        .insert(OPAQUE_ITEMS_HINT.to_owned(), Value::Bool(true));
                }
                mark(&mut message.extra, ORIGIN);
                message
            }
        };
        flush_turn(&mut turn, out);
        out.push(message);
    }
    flush_turn(&mut turn, out);
    Ok(())
}

fn flush_turn(turn: &mut Vec<Block>, out: &mut Vec<Message>) {
    if turn.is_empty() {
        return;
    }
    let mut message = Message::new(Role::Assistant, std::mem::take(turn));
    mark(&mut message.extra, ORIGIN);
    out.push(message);
}

/// One model-output item as blocks of the assistant turn.
fn decode_output_item(
    value: &Value,
    obj: &Map<String, Value>,
    path: Path<'_>,
    blocks: &mut Vec<Block>,
) -> Result<(), ResponsesError> {
    match item_type(obj, path)? {
        ItemType::Message(_) => decode_assistant_item(value, obj, path, blocks),
        ItemType::Other("function_call") => {
            blocks.push(Block::ToolCall(decode_function_call(obj, path)?));
            Ok(())
        }
        ItemType::Other(_) => {
            blocks.push(Block::Opaque(value.clone()));
            Ok(())
        }
    }
}

/// An assistant `message` item: one text block per part, the item's fields on the first. Content
/// that is not all text parts keeps the whole item opaque.
fn decode_assistant_item(
    value: &Value,
    obj: &Map<String, Value>,
    path: Path<'_>,
    blocks: &mut Vec<Block>,
) -> Result<(), ResponsesError> {
    let fields = Value::Object(rest(obj, &["content"]));
    let content_path = path.key("content");
    match obj.get("content") {
        Some(Value::String(text)) => {
            let mut extra = Extra::new();
            extra.insert(ITEM_HINT.to_owned(), fields);
            extra.insert(TEXT_CONTENT_HINT.to_owned(), Value::Bool(true));
            blocks.push(Block::Text(TextBlock {
                text: text.clone(),
                extra,
            }));
        }
        Some(Value::Array(parts)) if !parts.is_empty() && parts.iter().all(is_text_part) => {
            for (index, part) in parts.iter().enumerate() {
                let part_path = content_path.index(index);
                let part_obj = as_object(part, part_path, "an object with \"type\"")?;
                let mut text = decode_text_part(part_obj, part_path, "output_text")?;
                if index == 0 {
                    text.extra.insert(ITEM_HINT.to_owned(), fields.clone());
                }
                blocks.push(Block::Text(text));
            }
        }
        Some(_) | None => blocks.push(Block::Opaque(value.clone())),
    }
    Ok(())
}

fn is_text_part(part: &Value) -> bool {
    matches!(
        part.get("type").and_then(Value::as_str),
        Some("output_text" | "input_text")
    )
}

/// A `user`, `developer` or `system` message item.
fn decode_input_message(
    obj: &Map<String, Value>,
    role: &str,
    path: Path<'_>,
) -> Result<Message, ResponsesError> {
    let (role, spelling) = match role {
        "user" => (Role::User, None),
        "developer" => (Role::System, None),
        "system" => (Role::System, Some("system")),
        other => {
            return Err(ResponsesError::UnknownValue {
                path: path.key("role").render(),
                expected: "one of \"user\", \"assistant\", \"system\", \"developer\"",
                found: other.to_owned(),
            });
        }
    };
    let expected = "a string or an array of content parts";
    let (content, content_form) = super::json::content(
        obj.get("content"),
        path.key("content"),
        expected,
        |part, path| decode_part(part, path, "input_text"),
    )?;
    let mut message = Message {
        content_form,
        ..Message::new(role, content)
    };
    message.extra = rest(obj, &["type", "role", "content"]);
    if let Some(spelling) = spelling {
        message
            .extra
            .insert(ROLE_HINT.to_owned(), Value::String(spelling.to_owned()));
    }
    if !obj.contains_key("type") {
        message
            .extra
            .insert(UNTYPED_HINT.to_owned(), Value::Bool(true));
    }
    mark(&mut message.extra, ORIGIN);
    Ok(message)
}

/// A content part of an input message or of a function output.
fn decode_part(value: &Value, path: Path<'_>, default_text: &str) -> Result<Block, ResponsesError> {
    let obj = as_object(value, path, "an object with \"type\"")?;
    match required_str(obj, "type", path)? {
        "input_text" | "output_text" => Ok(Block::Text(decode_text_part(obj, path, default_text)?)),
        "input_image" => match obj.get("image_url") {
            Some(Value::String(url)) => Ok(Block::Image(ImageBlock {
                source: ImageSource::Url { url: url.clone() },
                extra: rest(obj, &["type", "image_url"]),
            })),
            // A `file_id` image: nothing skald reads.
            Some(_) | None => Ok(Block::Opaque(value.clone())),
        },
        // `input_file`, `input_audio`, `refusal` and parts added later.
        _ => Ok(Block::Opaque(value.clone())),
    }
}

fn decode_text_part(
    obj: &Map<String, Value>,
    path: Path<'_>,
    default_type: &str,
) -> Result<TextBlock, ResponsesError> {
    let kind = required_str(obj, "type", path)?;
    let text = required_str(obj, "text", path)?.to_owned();
    let mut extra = rest(obj, &["type", "text"]);
    if kind != default_type {
        extra.insert(PART_HINT.to_owned(), Value::String(kind.to_owned()));
    }
    if kind == "output_text" && !obj.contains_key("annotations") {
        extra.insert(BARE_HINT.to_owned(), Value::Bool(true));
    }
    Ok(TextBlock { text, extra })
}

fn decode_function_call(
    obj: &Map<String, Value>,
    path: Path<'_>,
) -> Result<ToolCall, ResponsesError> {
    let id = required_str(obj, "call_id", path)?.to_owned();
    let name = required_str(obj, "name", path)?.to_owned();
    let expected = "a string of JSON";
    let arguments = required(obj, "arguments", path, expected)?;
    let text = arguments
        .as_str()
        .ok_or_else(|| wrong(path.key("arguments"), expected, arguments))?
        .to_owned();
    Ok(ToolCall {
        id,
        name,
        arguments: parse_arguments(&text),
        arguments_text: Some(text),
        extra: rest(obj, &["type", "call_id", "name", "arguments"]),
    })
}

fn decode_function_output(
    obj: &Map<String, Value>,
    path: Path<'_>,
) -> Result<Message, ResponsesError> {
    let call_id = required_str(obj, "call_id", path)?.to_owned();
    let expected = "a string or an array of content parts";
    let output_path = path.key("output");
    let (content, content_form) = match required(obj, "output", path, expected)? {
        Value::String(text) => (vec![Block::text(text.clone())], ContentForm::Text),
        Value::Array(parts) => (
            each(parts, output_path, |part, path| {
                decode_part(part, path, "input_text")
            })?,
            ContentForm::Blocks,
        ),
        other @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_)) => {
            return Err(wrong(output_path, expected, other).into());
        }
    };
    let mut message = Message::new(
        Role::ToolResult,
        vec![Block::ToolResult(ToolResult {
            call_id,
            tool_name: None,
            content,
            content_form,
            is_error: None,
            details: None,
            extra: rest(obj, &["type", "call_id", "output"]),
        })],
    );
    mark(&mut message.extra, ORIGIN);
    Ok(message)
}

fn decode_tool(value: &Value, path: Path<'_>) -> Result<ToolSpec, ResponsesError> {
    let obj = as_object(value, path, "an object with \"type\"")?;
    let kind = required_str(obj, "type", path)?;
    if kind != "function" {
        // `namespace`, `web_search`, `custom`…: kept as they are.
        let (name, consumed): (String, &[&str]) = match obj.get("name") {
            Some(Value::String(name)) => (name.clone(), &["name"]),
            Some(_) | None => (kind.to_owned(), &[]),
        };
        let mut extra = rest(obj, consumed);
        extra.insert(TOOL_HINT.to_owned(), Value::Bool(true));
        if consumed.is_empty() {
            extra.insert(NAMELESS_HINT.to_owned(), Value::Bool(true));
        }
        return Ok(ToolSpec {
            name,
            description: None,
            parameters: Value::Null,
            extra,
        });
    }
    let name = required_str(obj, "name", path)?.to_owned();
    let mut consumed = vec!["type", "name"];
    let description = optional_str(obj, "description", path, &mut consumed)?;
    // A null `parameters` stays in `extra`; `Value::Null` here means "not given".
    let parameters = match obj.get("parameters") {
        Some(Value::Null) | None => Value::Null,
        Some(parameters) => {
            consumed.push("parameters");
            parameters.clone()
        }
    };
    Ok(ToolSpec {
        name,
        description,
        parameters,
        extra: rest(obj, &consumed),
    })
}

/// The meta facts a response states; `has_calls` tells a completed tool turn from a final one.
fn read_meta(obj: &Map<String, Value>, has_calls: bool) -> Result<MessageMeta, ResponsesError> {
    let root = Path::Root;
    let mut ignored = Vec::new();
    let created = match obj.get("created_at") {
        Some(Value::Null) | None => None,
        Some(value) => {
            let millis = match (value.as_i64(), value.as_f64()) {
                (Some(seconds), _) => seconds.checked_mul(1000),
                // Seconds with a fraction; the float-to-int cast saturates.
                (None, Some(seconds)) => Some((seconds * 1000.0) as i64),
                (None, None) => {
                    return Err(wrong(root.key("created_at"), "a number (seconds)", value).into());
                }
            };
            millis.map(Timestamp::Millis)
        }
    };
    Ok(MessageMeta {
        id: optional_str(obj, "id", root, &mut ignored)?,
        stop_reason: stop_reason_of(obj, has_calls)?,
        usage: decode_usage(obj.get("usage"), root.key("usage"))?,
        timestamp: created,
        model: optional_str(obj, "model", root, &mut ignored)?,
        provider: None,
    })
}

/// `status` (and `incomplete_details.reason`) as a stop reason.
fn stop_reason_of(
    obj: &Map<String, Value>,
    has_calls: bool,
) -> Result<Option<StopReason>, ResponsesError> {
    let root = Path::Root;
    let mut ignored = Vec::new();
    let Some(status) = optional_str(obj, "status", root, &mut ignored)? else {
        return Ok(None);
    };
    let details_path = root.key("incomplete_details");
    let reason = match optional_object(obj.get("incomplete_details"), details_path, "an object")? {
        Some(details) => optional_str(details, "reason", details_path, &mut ignored)?,
        None => None,
    };
    Ok(Some(match (status.as_str(), reason.as_deref()) {
        ("completed", _) if has_calls => StopReason::ToolUse,
        ("completed", _) => StopReason::EndTurn,
        ("incomplete", Some("max_output_tokens")) => StopReason::MaxTokens,
        ("incomplete", Some(reason)) => StopReason::Other(reason.to_owned()),
        ("failed", _) => StopReason::Error,
        ("cancelled", _) => StopReason::Aborted,
        (status, _) => StopReason::Other(status.to_owned()),
    }))
}

fn decode_usage(value: Option<&Value>, path: Path<'_>) -> Result<Option<Usage>, ResponsesError> {
    let Some(usage) = optional_object(value, path, "an object")? else {
        return Ok(None);
    };
    let input = count(usage, "input_tokens", path)?;
    let output = count(usage, "output_tokens", path)?;
    let details_path = path.key("input_tokens_details");
    let details = usage.get("input_tokens_details");
    let cached = match optional_object(details, details_path, "an object")? {
        Some(details) => count(details, "cached_tokens", details_path)?,
        None => 0,
    };
    Ok(Some(Usage {
        input: input.saturating_sub(cached),
        output,
        cache_read: cached,
        cache_write: 0,
    }))
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// Encodes a conversation as a Responses request body.
///
/// A conversation this codec decoded comes back as it was; anything else is written in a shape
/// the Responses API accepts (see the module docs). Custom-role messages are left out.
pub fn encode_request(conversation: &Conversation) -> Value {
    let own = is_own(&conversation.extra);
    let messages = &conversation.messages;
    let leading = messages
        .iter()
        .take_while(|message| matches!(message.role, Role::System | Role::Custom(_)))
        .count();

    let mut instructions: Vec<String> = Vec::new();
    let mut items = Vec::new();
    let mut input_messages = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let own_message = is_own(&message.extra);
        let is_instructions = matches!(message.role, Role::System)
            && if own_message {
                message.extra.get(INSTRUCTIONS_HINT) == Some(&Value::Bool(true))
            } else {
                !own && index < leading
            };
        if is_instructions {
            let text = join_text(&message.content);
            if own_message || !text.is_empty() {
                instructions.push(text);
            }
            continue;
        }
        input_messages.push(message);
        encode_message(message, own_message, &mut items);
    }

    let mut out = Map::new();
    if let Some(model) = &conversation.model {
        out.insert("model".to_owned(), Value::String(model.clone()));
    }
    if !instructions.is_empty() {
        out.insert(
            "instructions".to_owned(),
            Value::String(instructions.join("\n\n")),
        );
    }
    let input_hint = if own {
        hint(&conversation.extra, INPUT_HINT)
    } else {
        None
    };
    let bare = match (input_hint, input_messages.as_slice()) {
        (Some("text"), [only]) => bare_text(only),
        (Some(_) | None, _) => None,
    };
    match (input_hint, bare) {
        (Some("absent"), _) if items.is_empty() => {}
        (_, Some(text)) => {
            out.insert("input".to_owned(), Value::String(text.to_owned()));
        }
        (Some(_) | None, None) => {
            out.insert("input".to_owned(), Value::Array(items));
        }
    }
    let from_anthropic = origin(&conversation.extra) == Some(super::anthropic::ORIGIN);
    let tools: Vec<Value> = conversation
        .tools
        .iter()
        .filter(|tool| own || !(is_verbatim(tool) || (from_anthropic && is_server_tool(tool))))
        .map(|tool| encode_tool(tool, own))
        .collect();
    if !tools.is_empty() {
        out.insert("tools".to_owned(), Value::Array(tools));
    }
    if own {
        write_extra(&mut out, &conversation.extra);
    } else {
        translate_params(&conversation.extra, &mut out);
    }
    Value::Object(out)
}

/// The text of a user message that was `input` as a bare string and is still just that.
fn bare_text(message: &Message) -> Option<&str> {
    let plain = |extra: &Extra| extra.keys().all(|key| crate::message::is_hint_key(key));
    match (&message.role, message.content.as_slice()) {
        (Role::User, [Block::Text(text)])
            if is_own(&message.extra)
                && message.content_form == ContentForm::Text
                && plain(&message.extra)
                && plain(&text.extra) =>
        {
            Some(&text.text)
        }
        _ => None,
    }
}

/// Encodes a response: the envelope with the message's blocks put back as `output` items.
///
/// Fields `message.meta` describes (`id`, `model`, `created_at`, `status`, `usage`) are rewritten
/// only where `meta` has a value the envelope does not already say. An empty envelope gets a
/// minimal `response` object.
pub fn encode_response(response: &ResponsesResponse) -> Value {
    let message = &response.message;
    let meta = &message.meta;
    let has_calls = message.tool_calls().next().is_some();
    let mut envelope = if response.envelope.is_empty() {
        new_envelope(meta)
    } else {
        response.envelope.clone()
    };
    let stated = read_meta(&envelope, has_calls).unwrap_or_default();

    insert_changed_str(
        &mut envelope,
        "id",
        meta.id.as_deref(),
        stated.id.as_deref(),
    );
    let (model, stated_model) = (meta.model.as_deref(), stated.model.as_deref());
    insert_changed_str(&mut envelope, "model", model, stated_model);
    let stated_millis = stated.timestamp.as_ref().and_then(Timestamp::millis);
    let millis = meta.timestamp.as_ref().and_then(Timestamp::millis);
    if let Some(millis) = millis.filter(|millis| Some(*millis) != stated_millis) {
        envelope.insert(
            "created_at".to_owned(),
            Value::from(millis.div_euclid(1000)),
        );
    }
    let reason = meta.stop_reason.as_ref();
    if let Some(reason) = reason.filter(|reason| stated.stop_reason.as_ref() != Some(*reason)) {
        write_status(&mut envelope, reason);
    }
    if let Some(usage) = meta.usage.filter(|usage| stated.usage != Some(*usage)) {
        write_usage(&mut envelope, &usage);
    }
    let mut output = Vec::new();
    encode_turn(&message.content, is_own(&message.extra), &mut output);
    envelope.insert("output".to_owned(), Value::Array(output));
    Value::Object(envelope)
}

/// A skald tool, given as an OpenAI Chat function spec (`{"type": "function", "function":
/// {name, description, parameters}}`), in the Responses flat shape (`{"type": "function", name,
/// description, parameters, strict}`). `strict` is `false` unless the spec says otherwise; other
/// fields of both objects are kept. A value not in the Chat shape is returned as it is.
pub fn tool_from_function_spec(tool: Value) -> Value {
    let Value::Object(mut outer) = tool else {
        return tool;
    };
    let Some(Value::Object(function)) = outer.remove("function") else {
        return Value::Object(outer);
    };
    let mut out = Map::new();
    out.insert("type".to_owned(), Value::String("function".to_owned()));
    for (key, value) in function {
        out.insert(key, value);
    }
    if !out.contains_key("parameters") {
        out.insert(
            "parameters".to_owned(),
            serde_json::json!({"type": "object", "properties": {}}),
        );
    }
    if !out.contains_key("strict") {
        out.insert("strict".to_owned(), Value::Bool(false));
    }
    for (key, value) in outer {
        if key != "type" && !out.contains_key(&key) {
            out.insert(key, value);
        }
    }
    Value::Object(out)
}

/// The status (and `incomplete_details`) that says `reason`.
fn write_status(envelope: &mut Map<String, Value>, reason: &StopReason) {
    let (status, incomplete) = match reason {
        StopReason::EndTurn | StopReason::ToolUse => ("completed", None),
        StopReason::MaxTokens => ("incomplete", Some("max_output_tokens")),
        StopReason::Error => ("failed", None),
        StopReason::Aborted => ("cancelled", None),
        StopReason::Other(raw) => match raw.as_str() {
            "in_progress" | "queued" | "incomplete" => (raw.as_str(), None),
            other => ("incomplete", Some(other)),
        },
    };
    envelope.insert("status".to_owned(), Value::String(status.to_owned()));
    if let Some(incomplete) = incomplete {
        let mut details = Map::new();
        details.insert("reason".to_owned(), Value::String(incomplete.to_owned()));
        envelope.insert("incomplete_details".to_owned(), Value::Object(details));
    }
}

fn new_envelope(meta: &MessageMeta) -> Map<String, Value> {
    let mut envelope = Map::new();
    insert_opt_str(&mut envelope, "id", meta.id.as_deref());
    envelope.insert("object".to_owned(), Value::String("response".to_owned()));
    if let Some(millis) = meta.timestamp.as_ref().and_then(Timestamp::millis) {
        envelope.insert(
            "created_at".to_owned(),
            Value::from(millis.div_euclid(1000)),
        );
    }
    insert_opt_str(&mut envelope, "model", meta.model.as_deref());
    envelope.insert("output".to_owned(), Value::Null);
    envelope
}

fn write_usage(envelope: &mut Map<String, Value>, usage: &Usage) {
    let Some(fields) = object_entry(envelope, "usage") else {
        return;
    };
    // Responses counts cached (and any cache-written) tokens inside `input_tokens`.
    let input = usage.total_input();
    fields.insert("input_tokens".to_owned(), Value::from(input));
    let has_details = fields.contains_key("input_tokens_details");
    if usage.cache_read > 0 || has_details {
        if let Some(details) = object_entry(fields, "input_tokens_details") {
            details.insert("cached_tokens".to_owned(), Value::from(usage.cache_read));
        }
    }
    fields.insert("output_tokens".to_owned(), Value::from(usage.output));
    fields.insert(
        "total_tokens".to_owned(),
        Value::from(input.saturating_add(usage.output)),
    );
}

/// One message as input items.
fn encode_message(message: &Message, own: bool, out: &mut Vec<Value>) {
    match &message.role {
        Role::Custom(_) => {}
        Role::Assistant => encode_turn(&message.content, own, out),
        Role::ToolResult => encode_results(message, own, out),
        Role::System | Role::User => encode_input_message(message, own, out),
    }
}

/// A `user` or `developer`/`system` message item; tool results it holds (Anthropic style) go
/// first as `function_call_output` items, calls as `function_call` items.
fn encode_input_message(message: &Message, own: bool, out: &mut Vec<Value>) {
    let place = Place::Input;
    let opaque_items = own && message.extra.get(OPAQUE_ITEMS_HINT) == Some(&Value::Bool(true));
    let mut images = Vec::new();
    let mut parts = Vec::new();
    for block in &message.content {
        match block {
            Block::ToolResult(result) => out.push(encode_output_item(result, own, &mut images)),
            Block::ToolCall(call) => out.push(encode_call(call, own)),
            Block::Opaque(item) if opaque_items => out.push(item.clone()),
            Block::Text(_) | Block::Image(_) | Block::Opaque(_) | Block::Thinking(_) => {
                parts.extend(encode_part(block, own, place));
            }
        }
    }
    parts.append(&mut images);
    if opaque_items && parts.is_empty() {
        return;
    }
    if !own && parts.is_empty() {
        return;
    }
    let mut item = Map::new();
    if !(own && message.extra.get(UNTYPED_HINT) == Some(&Value::Bool(true))) {
        item.insert("type".to_owned(), Value::String("message".to_owned()));
    }
    let role = match (&message.role, own.then(|| hint(&message.extra, ROLE_HINT))) {
        (Role::System, Some(Some("system"))) => "system",
        (Role::System, Some(_) | None) => "developer",
        (Role::User | Role::Assistant | Role::ToolResult | Role::Custom(_), _) => "user",
    };
    item.insert("role".to_owned(), Value::String(role.to_owned()));
    let form = if own {
        message.content_form
    } else {
        ContentForm::Blocks
    };
    if let Some(content) = content_value(parts, form, place) {
        item.insert("content".to_owned(), content);
    }
    if own {
        write_extra(&mut item, &message.extra);
    }
    out.push(Value::Object(item));
}

/// Each result as a `function_call_output`; other blocks follow in one `user` message (opaque
/// ones of a message this codec decoded are whole items, written in place).
fn encode_results(message: &Message, own: bool, out: &mut Vec<Value>) {
    let mut trailing = Vec::new();
    let mut images = Vec::new();
    for block in &message.content {
        match block {
            Block::ToolResult(result) => out.push(encode_output_item(result, own, &mut images)),
            Block::Opaque(item) if own => out.push(item.clone()),
            Block::ToolCall(call) => out.push(encode_call(call, own)),
            Block::Text(_) | Block::Image(_) | Block::Opaque(_) | Block::Thinking(_) => {
                trailing.extend(encode_part(block, own, Place::Input));
            }
        }
    }
    if !images.is_empty() {
        trailing.insert(0, text_part(TOOL_IMAGES_LABEL, Place::Input));
        trailing.append(&mut images);
    }
    if !trailing.is_empty() {
        out.push(serde_json::json!({"type": "message", "role": "user", "content": trailing}));
    }
}

/// A `function_call_output`. A result from elsewhere is written as text; its images are added to
/// `images` for a `user` message after it.
fn encode_output_item(result: &ToolResult, own: bool, images: &mut Vec<Value>) -> Value {
    let mut item = Map::new();
    item.insert(
        "type".to_owned(),
        Value::String("function_call_output".to_owned()),
    );
    item.insert("call_id".to_owned(), Value::String(result.call_id.clone()));
    let output = if own {
        let parts: Vec<Value> = result
            .content
            .iter()
            .filter_map(|block| encode_part(block, true, Place::Input))
            .collect();
        let form = match result.content_form {
            ContentForm::Text => ContentForm::Text,
            ContentForm::Blocks | ContentForm::Null | ContentForm::Absent => ContentForm::Blocks,
        };
        content_value(parts, form, Place::Input).unwrap_or_else(|| Value::Array(Vec::new()))
    } else {
        let mut texts = Vec::new();
        let before = images.len();
        for block in &result.content {
            match block {
                Block::Text(text) => texts.push(text.text.as_str()),
                Block::Image(_) => images.extend(encode_part(block, false, Place::Input)),
                Block::Thinking(_)
                | Block::ToolCall(_)
                | Block::ToolResult(_)
                | Block::Opaque(_) => {}
            }
        }
        if texts.is_empty() && images.len() > before {
            Value::String(IMAGE_ONLY_RESULT.to_owned())
        } else {
            Value::String(texts.join("\n"))
        }
    };
    item.insert("output".to_owned(), output);
    if own {
        write_extra(&mut item, &result.extra);
    }
    Value::Object(item)
}

/// An assistant turn's blocks as output items, in order: consecutive text joins one `message`
/// item (a block with [`ITEM_HINT`] starts a new one), each call is a `function_call`, each
/// opaque block of a message this codec decoded is an item.
fn encode_turn(blocks: &[Block], own: bool, out: &mut Vec<Value>) {
    let mut open: Option<(Map<String, Value>, Vec<Value>, bool)> = None;
    let close = |open: &mut Option<(Map<String, Value>, Vec<Value>, bool)>,
                 out: &mut Vec<Value>| {
        if let Some((mut item, parts, text_content)) = open.take() {
            let form = if text_content {
                ContentForm::Text
            } else {
                ContentForm::Blocks
            };
            if let Some(content) = content_value(parts, form, Place::Assistant) {
                item.insert("content".to_owned(), content);
            }
            out.push(Value::Object(item));
        }
    };
    for block in blocks {
        match block {
            Block::Text(_) | Block::Image(_) => {
                let extra = match block {
                    Block::Text(text) => Some(&text.extra),
                    Block::Image(image) => Some(&image.extra),
                    Block::Thinking(_)
                    | Block::ToolCall(_)
                    | Block::ToolResult(_)
                    | Block::Opaque(_) => None,
                };
                // Blocks from elsewhere that have no part here (empty text, an assistant
                // image) open no item.
                let Some(part) = encode_part(block, own, Place::Assistant) else {
                    continue;
                };
                let fields = extra
                    .filter(|_| own)
                    .and_then(|extra| extra.get(ITEM_HINT))
                    .and_then(Value::as_object);
                if fields.is_some() || open.is_none() {
                    close(&mut open, out);
                    let item = match fields {
                        Some(fields) => fields.clone(),
                        None => {
                            let mut item = Map::new();
                            item.insert("type".to_owned(), Value::String("message".to_owned()));
                            item.insert("role".to_owned(), Value::String("assistant".to_owned()));
                            item
                        }
                    };
                    let text_content = own
                        && extra.and_then(|extra| extra.get(TEXT_CONTENT_HINT))
                            == Some(&Value::Bool(true));
                    open = Some((item, Vec::new(), text_content));
                }
                if let Some((_, parts, _)) = open.as_mut() {
                    parts.push(part);
                }
            }
            Block::ToolCall(call) => {
                close(&mut open, out);
                out.push(encode_call(call, own));
            }
            Block::ToolResult(result) => {
                close(&mut open, out);
                let mut images = Vec::new();
                out.push(encode_output_item(result, own, &mut images));
            }
            Block::Opaque(item) => {
                if own {
                    close(&mut open, out);
                    out.push(item.clone());
                }
            }
            Block::Thinking(_) => {}
        }
    }
    close(&mut open, out);
}

fn encode_call(call: &ToolCall, own: bool) -> Value {
    let mut item = Map::new();
    item.insert("type".to_owned(), Value::String("function_call".to_owned()));
    item.insert("call_id".to_owned(), Value::String(call.id.clone()));
    item.insert("name".to_owned(), Value::String(call.name.clone()));
    item.insert("arguments".to_owned(), Value::String(arguments_text(call)));
    if own {
        write_extra(&mut item, &call.extra);
    }
    Value::Object(item)
}

/// Where a part is written: it decides the default text part type.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Input,
    Assistant,
}

impl Place {
    fn text_type(self) -> &'static str {
        match self {
            Place::Input => "input_text",
            Place::Assistant => "output_text",
        }
    }
}

fn text_part(text: &str, place: Place) -> Value {
    let mut part = Map::new();
    part.insert(
        "type".to_owned(),
        Value::String(place.text_type().to_owned()),
    );
    part.insert("text".to_owned(), Value::String(text.to_owned()));
    if place == Place::Assistant {
        part.insert("annotations".to_owned(), Value::Array(Vec::new()));
    }
    Value::Object(part)
}

/// A content part for a block, or `None` for blocks that are not content parts.
fn encode_part(block: &Block, own: bool, place: Place) -> Option<Value> {
    match block {
        Block::Text(text) => {
            if !own && text.text.is_empty() {
                return None;
            }
            let kind = own
                .then(|| hint(&text.extra, PART_HINT))
                .flatten()
                .unwrap_or(place.text_type());
            let mut part = Map::new();
            part.insert("type".to_owned(), Value::String(kind.to_owned()));
            part.insert("text".to_owned(), Value::String(text.text.clone()));
            if own {
                write_extra(&mut part, &text.extra);
            }
            let bare = own && text.extra.get(BARE_HINT) == Some(&Value::Bool(true));
            if kind == "output_text" && !bare && !part.contains_key("annotations") {
                part.insert("annotations".to_owned(), Value::Array(Vec::new()));
            }
            Some(Value::Object(part))
        }
        Block::Image(image) => {
            if !own && place == Place::Assistant {
                return None;
            }
            let mut part = Map::new();
            part.insert("type".to_owned(), Value::String("input_image".to_owned()));
            part.insert(
                "image_url".to_owned(),
                Value::String(image_url(&image.source)),
            );
            if own {
                write_extra(&mut part, &image.extra);
            }
            Some(Value::Object(part))
        }
        Block::Opaque(value) => own.then(|| value.clone()),
        Block::Thinking(_) | Block::ToolCall(_) | Block::ToolResult(_) => None,
    }
}

fn image_url(source: &ImageSource) -> String {
    match source {
        ImageSource::Url { url } => url.clone(),
        ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
    }
}

/// The `content` value for encoded parts, spelled as the decoder found it: empty content as it
/// was (`None` leaves the key out), a lone plain text part as a bare string when it was one, else
/// the array.
fn content_value(parts: Vec<Value>, form: ContentForm, place: Place) -> Option<Value> {
    if parts.is_empty() {
        return match form {
            ContentForm::Absent => None,
            ContentForm::Null => Some(Value::Null),
            ContentForm::Text => Some(Value::String(String::new())),
            ContentForm::Blocks => Some(Value::Array(Vec::new())),
        };
    }
    if form == ContentForm::Text {
        if let [part] = parts.as_slice() {
            if let Some(text) = plain_text(part, place) {
                return Some(Value::String(text.to_owned()));
            }
        }
    }
    Some(Value::Array(parts))
}

/// The text of a part that is only a text of the place's default type (and, for `output_text`,
/// empty `annotations`).
fn plain_text(part: &Value, place: Place) -> Option<&str> {
    let obj = part.as_object()?;
    if obj.get("type").and_then(Value::as_str) != Some(place.text_type()) {
        return None;
    }
    let plain = obj.iter().all(|(key, value)| match key.as_str() {
        "type" | "text" => true,
        "annotations" => place == Place::Assistant && value.as_array().is_some_and(Vec::is_empty),
        _ => false,
    });
    if !plain {
        return None;
    }
    obj.get("text").and_then(Value::as_str)
}

fn is_verbatim(tool: &ToolSpec) -> bool {
    tool.extra.get(TOOL_HINT) == Some(&Value::Bool(true))
}

/// An Anthropic server tool (`web_search_…`, `code_execution_…`): no schema and a `type` of its
/// own; nothing on this side could answer a call to it.
fn is_server_tool(tool: &ToolSpec) -> bool {
    let kind = tool.extra.get("type").and_then(Value::as_str);
    tool.parameters.is_null() && kind.is_some_and(|kind| kind != "custom")
}

fn encode_tool(tool: &ToolSpec, own: bool) -> Value {
    let mut out = Map::new();
    if own && is_verbatim(tool) {
        if tool.extra.get(NAMELESS_HINT) != Some(&Value::Bool(true)) {
            out.insert("name".to_owned(), Value::String(tool.name.clone()));
        }
        write_extra(&mut out, &tool.extra);
        return Value::Object(out);
    }
    out.insert("type".to_owned(), Value::String("function".to_owned()));
    out.insert("name".to_owned(), Value::String(tool.name.clone()));
    if let Some(description) = &tool.description {
        out.insert("description".to_owned(), Value::String(description.clone()));
    }
    if !tool.parameters.is_null() {
        out.insert("parameters".to_owned(), tool.parameters.clone());
    } else if !own {
        out.insert(
            "parameters".to_owned(),
            serde_json::json!({"type": "object", "properties": {}}),
        );
    }
    if own {
        write_extra(&mut out, &tool.extra);
    } else {
        // Schemas from elsewhere need not meet strict mode's rules.
        out.insert("strict".to_owned(), Value::Bool(false));
    }
    Value::Object(out)
}

/// The Chat Completions and Messages request parameters that have a Responses equivalent.
fn translate_params(extra: &Extra, out: &mut Map<String, Value>) {
    let limit = extra
        .get("max_output_tokens")
        .or_else(|| extra.get("max_completion_tokens"))
        .or_else(|| extra.get("max_tokens"))
        .filter(|limit| limit.is_u64());
    if let Some(limit) = limit {
        out.insert("max_output_tokens".to_owned(), limit.clone());
    }
    for key in ["temperature", "top_p", "stream", "parallel_tool_calls"] {
        if let Some(value) = extra.get(key).filter(|value| !value.is_null()) {
            out.insert(key.to_owned(), value.clone());
        }
    }
    if !out.contains_key("tools") {
        return;
    }
    let choice = match extra.get("tool_choice") {
        Some(Value::String(mode)) => match mode.as_str() {
            "auto" | "required" | "none" => Some(Value::String(mode.clone())),
            _ => None,
        },
        Some(Value::Object(choice)) => match choice.get("type").and_then(Value::as_str) {
            // Anthropic.
            Some("auto") => Some(Value::String("auto".to_owned())),
            Some("any") => Some(Value::String("required".to_owned())),
            Some("none") => Some(Value::String("none".to_owned())),
            Some("tool") => choice.get("name").cloned(),
            // Chat Completions.
            Some("function") => choice
                .get("function")
                .and_then(|function| function.get("name"))
                .cloned(),
            Some(_) | None => None,
        }
        .map(|choice| match choice {
            Value::String(name) if !matches!(name.as_str(), "auto" | "required" | "none") => {
                serde_json::json!({"type": "function", "name": name})
            }
            other @ (Value::String(_)
            | Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::Array(_)
            | Value::Object(_)) => other,
        }),
        Some(Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_)) | None => None,
    };
    if let Some(choice) = choice {
        out.insert("tool_choice".to_owned(), choice);
    }
    if let Some(Value::Object(choice)) = extra.get("tool_choice") {
        if choice.get("disable_parallel_tool_use") == Some(&Value::Bool(true)) {
            out.insert("parallel_tool_calls".to_owned(), Value::Bool(false));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

fn is_own(extra: &Extra) -> bool {
    origin(extra) == Some(ORIGIN)
}

fn hint<'e>(extra: &'e Extra, key: &str) -> Option<&'e str> {
    extra.get(key).and_then(Value::as_str)
}
