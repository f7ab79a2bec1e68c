//! Encoding: the neutral model written as Responses request and response JSON — exactly as
//! decoded for the client's own messages, in the default spelling for anything else (see the
//! parent module for the mapping).

use super::decode::read_meta;
use super::*;

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
    let from_anthropic = origin(&conversation.extra) == Some(crate::codec::anthropic::ORIGIN);
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
pub fn encode_response(response: &WireResponse) -> Value {
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
