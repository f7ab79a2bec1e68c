//! Decoding: Responses request and response JSON into the neutral model (see the parent
//! module for the mapping).

use super::*;

/// Decodes a Responses request body.
pub fn decode_request(value: &Value) -> Result<Conversation, WireError> {
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
pub fn decode_request_str(input: &str) -> Result<Conversation, WireError> {
    decode_request(&serde_json::from_str(input)?)
}

/// Decodes a non-streaming Responses response.
pub fn decode_response(value: &Value) -> Result<WireResponse, WireError> {
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
    Ok(WireResponse { message, envelope })
}

/// Parses and decodes a non-streaming Responses response.
pub fn decode_response_str(input: &str) -> Result<WireResponse, WireError> {
    decode_response(&serde_json::from_str(input)?)
}

/// What an item is: a message with its role, or another item type.
enum ItemType<'v> {
    Message(&'v str),
    Other(&'v str),
}

fn item_type<'v>(obj: &'v Map<String, Value>, path: Path<'_>) -> Result<ItemType<'v>, WireError> {
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
fn decode_items(items: &[Value], path: Path<'_>, out: &mut Vec<Message>) -> Result<(), WireError> {
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
) -> Result<(), WireError> {
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
) -> Result<(), WireError> {
    let fields = Value::Object(rest(obj, &["content"]).into_inner());
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
) -> Result<Message, WireError> {
    let (role, spelling) = match role {
        "user" => (Role::User, None),
        "developer" => (Role::System, None),
        "system" => (Role::System, Some("system")),
        other => {
            return Err(WireError::UnknownValue {
                path: path.key("role").render(),
                expected: "one of \"user\", \"assistant\", \"system\", \"developer\"",
                found: other.to_owned(),
            });
        }
    };
    let expected = "a string or an array of content parts";
    let (content, content_form) = crate::codec::json::content(
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
fn decode_part(value: &Value, path: Path<'_>, default_text: &str) -> Result<Block, WireError> {
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
) -> Result<TextBlock, WireError> {
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

fn decode_function_call(obj: &Map<String, Value>, path: Path<'_>) -> Result<ToolCall, WireError> {
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

fn decode_function_output(obj: &Map<String, Value>, path: Path<'_>) -> Result<Message, WireError> {
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
            content: content.into(),
            content_form,
            is_error: None,
            details: None,
            extra: rest(obj, &["type", "call_id", "output"]),
        })],
    );
    mark(&mut message.extra, ORIGIN);
    Ok(message)
}

fn decode_tool(value: &Value, path: Path<'_>) -> Result<ToolSpec, WireError> {
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
pub(super) fn read_meta(
    obj: &Map<String, Value>,
    has_calls: bool,
) -> Result<MessageMeta, WireError> {
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
        assemble: None,
    })
}

/// `status` (and `incomplete_details.reason`) as a stop reason.
fn stop_reason_of(
    obj: &Map<String, Value>,
    has_calls: bool,
) -> Result<Option<StopReason>, WireError> {
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

fn decode_usage(value: Option<&Value>, path: Path<'_>) -> Result<Option<Usage>, WireError> {
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
        cache_write_1h: 0,
    }))
}
