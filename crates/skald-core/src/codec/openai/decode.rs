//! Chat Completions JSON → the neutral model: [`decode_request`] and [`decode_response`] (and
//! their `_str` forms), reading messages, legacy `function_call`s, tool calls, content parts, tool
//! definitions and usage, and leaving the hints the encoder needs to write the same spelling back.

use serde_json::{Map, Value};

use super::{
    FUNCTION_HINT, LEGACY_CALL_HINT, ORIGIN, PART_HINT, ROLE_HINT, TOOL_HINT, UNTYPED_HINT,
    WireError, WireResponse, mark,
};
use crate::codec::json::{
    Path, as_object, count, each, insert_nonempty, optional_array, optional_object, optional_str,
    required, required_array, required_object, required_str, rest, text_block, wrong,
};
use crate::message::{
    Block, ContentForm, Conversation, Extra, ImageBlock, ImageSource, Message, MessageMeta, Role,
    StopReason, Timestamp, ToolCall, ToolResult, ToolSpec, Usage,
};

/// Decodes a Chat Completions request body.
pub fn decode_request(value: &Value) -> Result<Conversation, WireError> {
    let root = Path::Root;
    let obj = as_object(value, root, "an object with \"messages\"")?;
    let mut conversation = Conversation::default();
    let mut consumed = vec!["messages"];

    let messages = required_array(obj, "messages", root, "an array of messages")?;
    conversation.messages = each(messages, root.key("messages"), decode_message)?;
    // A null `model` or an empty or null `tools` stays in `extra`, so it is written back as is.
    conversation.model = optional_str(obj, "model", root, &mut consumed)?;
    let tools = optional_array(obj, "tools", root, "an array of tools", &mut consumed)?;
    conversation.tools = each(tools, root.key("tools"), decode_tool)?;

    conversation.extra = rest(obj, &consumed);
    mark(&mut conversation.extra, ORIGIN);
    Ok(conversation)
}

/// Parses and decodes a Chat Completions request body.
pub fn decode_request_str(input: &str) -> Result<Conversation, WireError> {
    decode_request(&serde_json::from_str(input)?)
}

/// Decodes a non-streaming Chat Completions response.
pub fn decode_response(value: &Value) -> Result<WireResponse, WireError> {
    let root = Path::Root;
    let obj = as_object(value, root, "an object with \"choices\"")?;
    let choices_path = root.key("choices");
    let choices = required_array(obj, "choices", root, "an array of choices")?;
    let first_path = choices_path.index(0);
    let first_value = choices.first().ok_or_else(|| WireError::WrongType {
        path: choices_path.render(),
        expected: "at least one choice",
        found: "an empty array",
    })?;
    let first = as_object(first_value, first_path, "an object with \"message\"")?;
    let message_value = required(first, "message", first_path, "an object with \"role\"")?;
    let mut message = decode_message(message_value, first_path.key("message"))?;
    message.meta = read_meta(obj, first)?;

    let mut envelope = obj.clone();
    if let Some(Value::Object(choice)) = envelope
        .get_mut("choices")
        .and_then(Value::as_array_mut)
        .and_then(|choices| choices.first_mut())
    {
        choice.insert("message".to_owned(), Value::Null);
    }
    Ok(WireResponse { message, envelope })
}

/// Parses and decodes a non-streaming Chat Completions response.
pub fn decode_response_str(input: &str) -> Result<WireResponse, WireError> {
    decode_response(&serde_json::from_str(input)?)
}

fn decode_message(value: &Value, path: Path<'_>) -> Result<Message, WireError> {
    let obj = as_object(value, path, "an object with \"role\"")?;
    let role = required_str(obj, "role", path)?;
    let (content, content_form) = decode_content(obj.get("content"), path.key("content"))?;
    let mut consumed = vec!["role", "content"];
    let mut role_hint = None;
    let mut message = match role {
        "system" => Message {
            content_form,
            ..Message::new(Role::System, content)
        },
        "developer" => {
            role_hint = Some("developer");
            Message {
                content_form,
                ..Message::new(Role::System, content)
            }
        }
        "user" => Message {
            content_form,
            ..Message::new(Role::User, content)
        },
        "assistant" => {
            let mut blocks = content;
            decode_assistant_calls(obj, path, &mut blocks, &mut consumed)?;
            Message {
                content_form,
                ..Message::new(Role::Assistant, blocks)
            }
        }
        "tool" => {
            let call_id = required_str(obj, "tool_call_id", path)?.to_owned();
            consumed.push("tool_call_id");
            let tool_name = optional_str(obj, "name", path, &mut consumed)?;
            tool_result_message(call_id, tool_name, content, content_form)
        }
        "function" => {
            role_hint = Some("function");
            let name = required_str(obj, "name", path)?.to_owned();
            consumed.push("name");
            // Legacy function results pair with the call by name; neither side has an id.
            tool_result_message(String::new(), Some(name), content, content_form)
        }
        other => {
            return Err(WireError::UnknownValue {
                path: path.key("role").render(),
                expected: "one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\", \"function\"",
                found: other.to_owned(),
            });
        }
    };
    message.extra = rest(obj, &consumed);
    if let Some(hint) = role_hint {
        message
            .extra
            .insert(ROLE_HINT.to_owned(), Value::String(hint.to_owned()));
    }
    mark(&mut message.extra, ORIGIN);
    Ok(message)
}

fn tool_result_message(
    call_id: String,
    tool_name: Option<String>,
    content: Vec<Block>,
    content_form: ContentForm,
) -> Message {
    Message::new(
        Role::ToolResult,
        vec![Block::ToolResult(ToolResult {
            call_id,
            tool_name,
            content: content.into(),
            content_form,
            is_error: None,
            details: None,
            extra: Extra::new(),
        })],
    )
}

/// Appends the assistant's `tool_calls` (and a legacy `function_call`) to its blocks. An empty or
/// null `tool_calls` is left for `extra` so it is written back as it was.
fn decode_assistant_calls<'o>(
    obj: &'o Map<String, Value>,
    path: Path<'_>,
    blocks: &mut Vec<Block>,
    consumed: &mut Vec<&'o str>,
) -> Result<(), WireError> {
    let calls = optional_array(obj, "tool_calls", path, "an array of tool calls", consumed)?;
    let calls = each(calls, path.key("tool_calls"), decode_tool_call)?;
    blocks.extend(calls.into_iter().map(Block::ToolCall));
    let legacy_path = path.key("function_call");
    match obj.get("function_call") {
        Some(Value::Object(function)) => {
            consumed.push("function_call");
            let (name, text, mut extra) = decode_function(function, legacy_path)?;
            extra.insert(LEGACY_CALL_HINT.to_owned(), Value::Bool(true));
            blocks.push(Block::ToolCall(ToolCall {
                id: String::new(),
                name,
                arguments: parse_arguments(&text),
                arguments_text: Some(text),
                extra,
            }));
        }
        Some(Value::Null) | None => {}
        Some(other) => {
            return Err(wrong(
                legacy_path,
                "an object with \"name\" and \"arguments\"",
                other,
            )
            .into());
        }
    }
    Ok(())
}

fn decode_tool_call(value: &Value, path: Path<'_>) -> Result<ToolCall, WireError> {
    let obj = as_object(value, path, "an object with \"id\" and \"function\"")?;
    let id = required_str(obj, "id", path)?.to_owned();
    let typed = expect_function_type(obj, path)?;
    let function_path = path.key("function");
    let expected = "an object with \"name\" and \"arguments\"";
    let function = required_object(obj, "function", path, expected)?;
    let (name, text, inner) = decode_function(function, function_path)?;
    let mut extra = rest(obj, &["id", "type", "function"]);
    insert_nonempty(&mut extra, FUNCTION_HINT, inner);
    if !typed {
        extra.insert(UNTYPED_HINT.to_owned(), Value::Bool(true));
    }
    Ok(ToolCall {
        id,
        name,
        arguments: parse_arguments(&text),
        arguments_text: Some(text),
        extra,
    })
}

/// Reads `{name, arguments}`; returns the other fields of the object as well.
fn decode_function(
    function: &Map<String, Value>,
    path: Path<'_>,
) -> Result<(String, String, Extra), WireError> {
    let name = required_str(function, "name", path)?.to_owned();
    let expected = "a string of JSON";
    let arguments = required(function, "arguments", path, expected)?;
    let text = arguments
        .as_str()
        .ok_or_else(|| wrong(path.key("arguments"), expected, arguments))?
        .to_owned();
    Ok((name, text, rest(function, &["name", "arguments"])))
}

/// Tool-call arguments as the model wrote them: parsed when they are JSON, else the raw text.
pub(in crate::codec) fn parse_arguments(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// Checks `type` is `"function"`; false when it is absent.
fn expect_function_type(obj: &Map<String, Value>, path: Path<'_>) -> Result<bool, WireError> {
    match obj.get("type") {
        None => Ok(false),
        Some(Value::String(kind)) if kind == "function" => Ok(true),
        Some(Value::String(kind)) => Err(WireError::UnknownValue {
            path: path.key("type").render(),
            expected: "\"function\"",
            found: kind.clone(),
        }),
        Some(other) => Err(wrong(path.key("type"), "the string \"function\"", other).into()),
    }
}

fn decode_content(
    value: Option<&Value>,
    path: Path<'_>,
) -> Result<(Vec<Block>, ContentForm), WireError> {
    let expected = "a string, an array of content parts or null";
    crate::codec::json::content(value, path, expected, decode_part)
}

fn decode_part(value: &Value, path: Path<'_>) -> Result<Block, WireError> {
    let obj = as_object(value, path, "an object with \"type\"")?;
    match required_str(obj, "type", path)? {
        "text" => Ok(text_block(obj, path)?),
        "image_url" => {
            let inner_path = path.key("image_url");
            let inner = required_object(obj, "image_url", path, "an object with \"url\"")?;
            let url = required_str(inner, "url", inner_path)?.to_owned();
            let mut extra = rest(inner, &["url"]);
            insert_nonempty(&mut extra, PART_HINT, rest(obj, &["type", "image_url"]));
            Ok(Block::Image(ImageBlock {
                source: ImageSource::Url { url },
                extra,
            }))
        }
        // `input_audio`, `file`, `refusal` and parts added after this codec was written.
        _ => Ok(Block::Opaque(value.clone())),
    }
}

fn decode_tool(value: &Value, path: Path<'_>) -> Result<ToolSpec, WireError> {
    let obj = as_object(value, path, "an object with \"type\" and \"function\"")?;
    let typed = expect_function_type(obj, path)?;
    let function_path = path.key("function");
    let function = required_object(obj, "function", path, "an object with \"name\"")?;
    let name = required_str(function, "name", function_path)?.to_owned();
    let mut consumed = vec!["name"];
    let description = optional_str(function, "description", function_path, &mut consumed)?;
    // A null `parameters` stays in `extra` too; `Value::Null` here means "not given".
    let parameters = match function.get("parameters") {
        Some(Value::Null) | None => Value::Null,
        Some(parameters) => {
            consumed.push("parameters");
            parameters.clone()
        }
    };
    let mut extra = rest(function, &consumed);
    insert_nonempty(&mut extra, TOOL_HINT, rest(obj, &["type", "function"]));
    if !typed {
        extra.insert(UNTYPED_HINT.to_owned(), Value::Bool(true));
    }
    Ok(ToolSpec {
        name,
        description,
        parameters,
        extra,
    })
}

/// The meta facts a response's envelope states.
pub(super) fn read_meta(
    obj: &Map<String, Value>,
    choice: &Map<String, Value>,
) -> Result<MessageMeta, WireError> {
    let root = Path::Root;
    let mut ignored = Vec::new();
    let created = match obj.get("created") {
        Some(Value::Null) | None => None,
        Some(value) => {
            let seconds = value
                .as_i64()
                .ok_or_else(|| wrong(root.key("created"), "an integer (seconds)", value))?;
            seconds.checked_mul(1000).map(Timestamp::Millis)
        }
    };
    let choice_path = root.key("choices");
    let choice_path = choice_path.index(0);
    Ok(MessageMeta {
        id: optional_str(obj, "id", root, &mut ignored)?,
        stop_reason: optional_str(choice, "finish_reason", choice_path, &mut ignored)?
            .map(|reason| StopReason::parse(&reason)),
        usage: decode_usage(obj.get("usage"), root.key("usage"))?,
        timestamp: created,
        model: optional_str(obj, "model", root, &mut ignored)?,
        provider: None,
        assemble: None,
    })
}

fn decode_usage(value: Option<&Value>, path: Path<'_>) -> Result<Option<Usage>, WireError> {
    let Some(usage) = optional_object(value, path, "an object")? else {
        return Ok(None);
    };
    let prompt = count(usage, "prompt_tokens", path)?;
    let output = count(usage, "completion_tokens", path)?;
    let details_path = path.key("prompt_tokens_details");
    let details = usage.get("prompt_tokens_details");
    let cached = match optional_object(details, details_path, "an object")? {
        Some(details) => count(details, "cached_tokens", details_path)?,
        None => 0,
    };
    Ok(Some(Usage {
        input: prompt.saturating_sub(cached),
        output,
        cache_read: cached,
        cache_write: 0,
        cache_write_1h: 0,
    }))
}
