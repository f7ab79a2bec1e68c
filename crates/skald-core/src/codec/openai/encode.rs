//! The neutral model → Chat Completions JSON: [`encode_request`] and [`encode_response`]. A
//! conversation this codec decoded is written back as it came; anything else is written from its
//! typed parts in a shape OpenAI accepts (one `tool` message per result, images out of results
//! moved to a `user` message after them, Anthropic sampling parameters translated).

use serde_json::{Map, Value};

use super::decode::read_meta;
use super::{
    FUNCTION_HINT, IMAGE_ONLY_RESULT, LEGACY_CALL_HINT, PART_HINT, ROLE_HINT, TOOL_HINT,
    TOOL_IMAGES_LABEL, UNTYPED_HINT, WireResponse, hint, is_own, origin,
};
use crate::codec::json::{
    content_as_spelled, insert_changed_str, insert_opt_str, object_entry, write_extra,
};
use crate::message::{
    Block, ContentForm, Conversation, Extra, ImageSource, Message, MessageMeta, Role, StopReason,
    Timestamp, ToolCall, ToolResult, ToolSpec, Usage,
};

/// Encodes a conversation as a Chat Completions request body.
///
/// A conversation this codec decoded comes back as it was; anything else is written in a shape
/// OpenAI accepts (see the module docs). Custom-role messages are not model-visible and are left out.
pub fn encode_request(conversation: &Conversation) -> Value {
    let own = is_own(&conversation.extra);
    let from_anthropic = origin(&conversation.extra) == Some(crate::codec::anthropic::ORIGIN);
    let mut out = Map::new();
    if let Some(model) = &conversation.model {
        out.insert("model".to_owned(), Value::String(model.clone()));
    }
    out.insert(
        "messages".to_owned(),
        Value::Array(encode_messages(&conversation.messages)),
    );
    let tools: Vec<Value> = conversation
        .tools
        .iter()
        .filter(|tool| !(from_anthropic && is_anthropic_server_tool(tool)))
        .map(|tool| encode_tool(tool, own))
        .collect();
    if !tools.is_empty() {
        out.insert("tools".to_owned(), Value::Array(tools));
    }
    if own {
        write_extra(&mut out, &conversation.extra);
    } else if from_anthropic {
        translate_anthropic_params(&conversation.extra, &mut out);
    }
    Value::Object(out)
}

/// Encodes a response: the envelope with the message put back at `choices[0].message`.
///
/// Fields `message.meta` describes (`id`, `model`, `created`, `finish_reason`, `usage`) are
/// rewritten only where `meta` has a value the envelope does not already say. An empty envelope
/// gets a minimal `chat.completion` object.
pub fn encode_response(response: &WireResponse) -> Value {
    let message = &response.message;
    let meta = &message.meta;
    let mut envelope = if response.envelope.is_empty() {
        new_envelope(meta)
    } else {
        response.envelope.clone()
    };
    let stated = envelope_meta(&envelope);

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
        envelope.insert("created".to_owned(), Value::from(millis.div_euclid(1000)));
    }
    if let Some(usage) = meta.usage.filter(|usage| stated.usage != Some(*usage)) {
        write_usage(&mut envelope, &usage);
    }
    if let Some(choice) = first_choice_mut(&mut envelope) {
        let reason = meta.stop_reason.as_ref();
        if let Some(reason) = reason.filter(|reason| stated.stop_reason.as_ref() != Some(*reason)) {
            choice.insert(
                "finish_reason".to_owned(),
                Value::String(finish_reason(reason).to_owned()),
            );
        }
        choice.insert("message".to_owned(), encode_single(message));
    }
    Value::Object(envelope)
}

/// The Chat Completions spelling of a stop reason (`"error"` and `"aborted"` have none and are
/// written as pi spells them).
pub fn finish_reason(reason: &StopReason) -> &str {
    match reason {
        StopReason::EndTurn => "stop",
        StopReason::MaxTokens => "length",
        StopReason::ToolUse => "tool_calls",
        StopReason::Error => "error",
        StopReason::Aborted => "aborted",
        StopReason::Other(raw) => raw,
    }
}

fn new_envelope(meta: &MessageMeta) -> Map<String, Value> {
    let mut envelope = Map::new();
    insert_opt_str(&mut envelope, "id", meta.id.as_deref());
    envelope.insert(
        "object".to_owned(),
        Value::String("chat.completion".to_owned()),
    );
    if let Some(millis) = meta.timestamp.as_ref().and_then(Timestamp::millis) {
        envelope.insert("created".to_owned(), Value::from(millis.div_euclid(1000)));
    }
    insert_opt_str(&mut envelope, "model", meta.model.as_deref());
    let mut choice = Map::new();
    choice.insert("index".to_owned(), Value::from(0));
    choice.insert("message".to_owned(), Value::Null);
    choice.insert("logprobs".to_owned(), Value::Null);
    choice.insert(
        "finish_reason".to_owned(),
        meta.stop_reason.as_ref().map_or(Value::Null, |reason| {
            Value::String(finish_reason(reason).to_owned())
        }),
    );
    envelope.insert(
        "choices".to_owned(),
        Value::Array(vec![Value::Object(choice)]),
    );
    envelope
}

/// What the envelope itself says, so the encoder only rewrites what changed.
fn envelope_meta(envelope: &Map<String, Value>) -> MessageMeta {
    let empty = Map::new();
    let choice = envelope
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    read_meta(envelope, choice).unwrap_or_default()
}

/// `choices[0]` as an object, created (or replaced) if the envelope has none.
fn first_choice_mut(envelope: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    let choices = envelope
        .entry("choices")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !choices.is_array() {
        *choices = Value::Array(Vec::new());
    }
    let list = choices.as_array_mut()?;
    if list.is_empty() {
        list.push(Value::Object(Map::new()));
    }
    let first = list.first_mut()?;
    if !first.is_object() {
        let mut choice = Map::new();
        choice.insert("index".to_owned(), Value::from(0));
        *first = Value::Object(choice);
    }
    first.as_object_mut()
}

fn write_usage(envelope: &mut Map<String, Value>, usage: &Usage) {
    let Some(fields) = object_entry(envelope, "usage") else {
        return;
    };
    // Chat Completions counts cached (and any cache-written) tokens inside `prompt_tokens`.
    let prompt = usage.total_input();
    fields.insert("prompt_tokens".to_owned(), Value::from(prompt));
    fields.insert("completion_tokens".to_owned(), Value::from(usage.output));
    fields.insert(
        "total_tokens".to_owned(),
        Value::from(prompt.saturating_add(usage.output)),
    );
    let has_details = fields.contains_key("prompt_tokens_details");
    if usage.cache_read > 0 || has_details {
        if let Some(details) = object_entry(fields, "prompt_tokens_details") {
            details.insert("cached_tokens".to_owned(), Value::from(usage.cache_read));
        }
    }
}

/// Parts that must go to a `user` message after a run of `tool` messages.
#[derive(Default)]
struct Trailing {
    parts: Vec<Value>,
    labelled: bool,
}

impl Trailing {
    fn push_result_image(&mut self, part: Value) {
        if !self.labelled {
            self.parts.push(text_part(TOOL_IMAGES_LABEL));
            self.labelled = true;
        }
        self.parts.push(part);
    }

    fn flush(&mut self, out: &mut Vec<Value>) {
        if self.parts.is_empty() {
            return;
        }
        let mut message = Map::new();
        message.insert("role".to_owned(), Value::String("user".to_owned()));
        message.insert(
            "content".to_owned(),
            Value::Array(std::mem::take(&mut self.parts)),
        );
        out.push(Value::Object(message));
        self.labelled = false;
    }
}

fn encode_messages(messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut trailing = Trailing::default();
    // Index in `out` of the last message when it is an assistant message from elsewhere that
    // calls tools: a following assistant message from elsewhere joins it (see `join_assistant`).
    let mut open_calls: Option<usize> = None;
    for message in messages {
        let own = is_own(&message.extra);
        match &message.role {
            Role::ToolResult => {
                encode_results(message, own, &mut out, &mut trailing);
                open_calls = None;
                continue;
            }
            Role::User if message.tool_results().next().is_some() => {
                encode_results(message, own, &mut out, &mut trailing);
                open_calls = None;
                continue;
            }
            Role::Custom(_) => continue,
            Role::System | Role::User | Role::Assistant => {}
        }
        trailing.flush(&mut out);
        let encoded = encode_message(message, own);
        let foreign_assistant = !own && matches!(message.role, Role::Assistant);
        match (
            open_calls.and_then(|index| out.get_mut(index)),
            foreign_assistant,
        ) {
            (Some(Value::Object(previous)), true) => {
                if let Value::Object(next) = encoded {
                    join_assistant(previous, next);
                }
            }
            (Some(_) | None, _) => {
                open_calls = (foreign_assistant && message.tool_calls().next().is_some())
                    .then_some(out.len());
                out.push(encoded);
            }
        }
    }
    trailing.flush(&mut out);
    out
}

/// Appends an assistant message to the previous one, which called tools.
///
/// Anthropic (and Claude Code, which writes each block of a response as its own entry) lets
/// assistant messages follow each other and reads them as one turn; OpenAI wants the `tool`
/// messages right after the message with the calls, so the turn is written as one message.
fn join_assistant(previous: &mut Map<String, Value>, next: Map<String, Value>) {
    let mut parts = content_parts(previous.get("content"));
    parts.extend(content_parts(next.get("content")));
    let content = if parts.is_empty() {
        Value::Null
    } else {
        Value::Array(parts)
    };
    previous.insert("content".to_owned(), content);
    if let Some(Value::Array(more)) = next.get("tool_calls") {
        match previous.get_mut("tool_calls") {
            Some(Value::Array(calls)) => calls.extend(more.iter().cloned()),
            Some(_) | None => {
                previous.insert("tool_calls".to_owned(), Value::Array(more.clone()));
            }
        }
    }
}

/// Encoded `content` as a list of parts.
fn content_parts(content: Option<&Value>) -> Vec<Value> {
    match content {
        Some(Value::String(text)) if text.is_empty() => Vec::new(),
        Some(Value::String(text)) => vec![text_part(text)],
        Some(Value::Array(parts)) => parts.clone(),
        Some(Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_)) | None => {
            Vec::new()
        }
    }
}

/// One `tool` message per result; everything else the message holds goes to `trailing`, since
/// OpenAI wants every `tool` message of a turn right after the assistant message.
fn encode_results(message: &Message, own: bool, out: &mut Vec<Value>, trailing: &mut Trailing) {
    for block in &message.content {
        match block {
            Block::ToolResult(result) => {
                out.push(encode_tool_message(message, result, own, trailing));
            }
            Block::Text(_) | Block::Image(_) | Block::Opaque(_) => {
                if let Some(part) = encode_part(block, own, true) {
                    trailing.parts.push(part);
                }
            }
            Block::Thinking(_) | Block::ToolCall(_) => {}
        }
    }
}

fn encode_tool_message(
    message: &Message,
    result: &ToolResult,
    own: bool,
    trailing: &mut Trailing,
) -> Value {
    let legacy = hint(&message.extra, ROLE_HINT) == Some("function");
    let mut out = Map::new();
    if legacy {
        out.insert("role".to_owned(), Value::String("function".to_owned()));
        out.insert(
            "name".to_owned(),
            Value::String(result.tool_name.clone().unwrap_or_default()),
        );
    } else {
        out.insert("role".to_owned(), Value::String("tool".to_owned()));
        out.insert(
            "tool_call_id".to_owned(),
            Value::String(result.call_id.clone()),
        );
    }
    if own {
        let parts = result
            .content
            .iter()
            .filter_map(|block| encode_part(block, true, true))
            .collect();
        if let Some(content) = content_value(parts, result.content_form, true, false) {
            out.insert("content".to_owned(), content);
        }
        if let (false, Some(name)) = (legacy, &result.tool_name) {
            out.insert("name".to_owned(), Value::String(name.clone()));
        }
        write_extra(&mut out, &message.extra);
    } else {
        let mut texts = Vec::new();
        let mut images = 0;
        for block in &result.content {
            match block {
                Block::Text(text) => texts.push(text.text.as_str()),
                Block::Image(_) => {
                    if let Some(part) = encode_part(block, false, true) {
                        trailing.push_result_image(part);
                        images += 1;
                    }
                }
                Block::Thinking(_)
                | Block::ToolCall(_)
                | Block::ToolResult(_)
                | Block::Opaque(_) => {}
            }
        }
        let text = if texts.is_empty() && images > 0 {
            IMAGE_ONLY_RESULT.to_owned()
        } else {
            texts.join("\n")
        };
        out.insert("content".to_owned(), Value::String(text));
    }
    Value::Object(out)
}

/// One message as one object: the first `tool` message for tool results.
fn encode_single(message: &Message) -> Value {
    let own = is_own(&message.extra);
    let mut out = Vec::new();
    if matches!(message.role, Role::ToolResult) {
        encode_results(message, own, &mut out, &mut Trailing::default());
    }
    match out.into_iter().next() {
        Some(first) => first,
        None => encode_message(message, own),
    }
}

/// A system, user or assistant message. (`encode_response` may hand over any role; tool results
/// and custom roles are then written as `user` so the output stays well-formed.)
fn encode_message(message: &Message, own: bool) -> Value {
    let (role, assistant) = match &message.role {
        Role::System => match hint(&message.extra, ROLE_HINT) {
            Some("developer") => ("developer", false),
            Some(_) | None => ("system", false),
        },
        Role::Assistant => ("assistant", true),
        Role::User | Role::ToolResult | Role::Custom(_) => ("user", false),
    };
    // Images only fit in user content; a message this codec decoded keeps what it had.
    let images = own || role == "user";
    let parts: Vec<Value> = message
        .content
        .iter()
        .filter_map(|block| encode_part(block, own, images))
        .collect();
    let mut out = Map::new();
    out.insert("role".to_owned(), Value::String(role.to_owned()));

    let calls: Vec<&ToolCall> = if assistant {
        message.tool_calls().collect()
    } else {
        Vec::new()
    };
    if let Some(content) = content_value(parts, message.content_form, own, !calls.is_empty()) {
        out.insert("content".to_owned(), content);
    }
    let tool_calls: Vec<Value> = calls
        .iter()
        .filter(|call| !is_legacy(call))
        .map(|call| encode_tool_call(call, own))
        .collect();
    if !tool_calls.is_empty() {
        out.insert("tool_calls".to_owned(), Value::Array(tool_calls));
    }
    if let Some(call) = calls.iter().find(|call| is_legacy(call)) {
        out.insert(
            "function_call".to_owned(),
            Value::Object(encode_function(call, own)),
        );
    }
    if own {
        write_extra(&mut out, &message.extra);
    }
    Value::Object(out)
}

/// The `content` value for encoded parts, spelled as the message had it. `None` leaves the key out.
fn content_value(
    parts: Vec<Value>,
    form: ContentForm,
    own: bool,
    null_when_empty: bool,
) -> Option<Value> {
    if parts.is_empty() && !own {
        // OpenAI rejects empty content arrays; `null` is only allowed beside tool calls.
        return Some(if null_when_empty {
            Value::Null
        } else {
            Value::String(String::new())
        });
    }
    content_as_spelled(parts, form)
}

fn text_part(text: &str) -> Value {
    let mut part = Map::new();
    part.insert("type".to_owned(), Value::String("text".to_owned()));
    part.insert("text".to_owned(), Value::String(text.to_owned()));
    Value::Object(part)
}

/// A content part for a block, or `None` for blocks that are not content parts here.
fn encode_part(block: &Block, own: bool, images: bool) -> Option<Value> {
    match block {
        Block::Text(text) => {
            let mut part = Map::new();
            part.insert("type".to_owned(), Value::String("text".to_owned()));
            part.insert("text".to_owned(), Value::String(text.text.clone()));
            if own {
                write_extra(&mut part, &text.extra);
            }
            Some(Value::Object(part))
        }
        Block::Image(image) if images => {
            let mut inner = Map::new();
            inner.insert("url".to_owned(), Value::String(image_url(&image.source)));
            let mut part = Map::new();
            part.insert("type".to_owned(), Value::String("image_url".to_owned()));
            if own {
                write_extra(&mut inner, &image.extra);
            }
            part.insert("image_url".to_owned(), Value::Object(inner));
            if let (true, Some(Value::Object(outer))) = (own, image.extra.get(PART_HINT)) {
                write_extra(&mut part, outer);
            }
            Some(Value::Object(part))
        }
        Block::Opaque(value) if own => Some(value.clone()),
        Block::Image(_)
        | Block::Opaque(_)
        | Block::Thinking(_)
        | Block::ToolCall(_)
        | Block::ToolResult(_) => None,
    }
}

fn image_url(source: &ImageSource) -> String {
    match source {
        ImageSource::Url { url } => url.clone(),
        ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
    }
}

fn untyped(extra: &Extra) -> bool {
    extra.get(UNTYPED_HINT) == Some(&Value::Bool(true))
}

fn is_legacy(call: &ToolCall) -> bool {
    call.extra.get(LEGACY_CALL_HINT) == Some(&Value::Bool(true))
}

fn encode_tool_call(call: &ToolCall, own: bool) -> Value {
    let mut out = Map::new();
    out.insert("id".to_owned(), Value::String(call.id.clone()));
    if !(own && untyped(&call.extra)) {
        out.insert("type".to_owned(), Value::String("function".to_owned()));
    }
    out.insert(
        "function".to_owned(),
        Value::Object(encode_function(call, own)),
    );
    if own {
        write_extra(&mut out, &call.extra);
    }
    Value::Object(out)
}

/// `{name, arguments}`; for a legacy call this is the whole `function_call` object.
fn encode_function(call: &ToolCall, own: bool) -> Map<String, Value> {
    let mut function = Map::new();
    function.insert("name".to_owned(), Value::String(call.name.clone()));
    function.insert("arguments".to_owned(), Value::String(arguments_text(call)));
    if own {
        if is_legacy(call) {
            write_extra(&mut function, &call.extra);
        } else if let Some(Value::Object(inner)) = call.extra.get(FUNCTION_HINT) {
            write_extra(&mut function, inner);
        }
    }
    function
}

/// The arguments as OpenAI's JSON string: the original text when there is one.
pub fn arguments_text(call: &ToolCall) -> String {
    match (&call.arguments_text, &call.arguments) {
        (Some(text), _) => text.clone(),
        // A string argument is text that was not JSON; it goes back as the text it was.
        (None, Value::String(text)) => text.clone(),
        (None, arguments) => arguments.to_string(),
    }
}

fn encode_tool(tool: &ToolSpec, own: bool) -> Value {
    let mut function = Map::new();
    function.insert("name".to_owned(), Value::String(tool.name.clone()));
    if let Some(description) = &tool.description {
        function.insert("description".to_owned(), Value::String(description.clone()));
    }
    if !tool.parameters.is_null() {
        function.insert("parameters".to_owned(), tool.parameters.clone());
    }
    if own {
        write_extra(&mut function, &tool.extra);
    }
    let mut out = Map::new();
    if !(own && untyped(&tool.extra)) {
        out.insert("type".to_owned(), Value::String("function".to_owned()));
    }
    out.insert("function".to_owned(), Value::Object(function));
    if let (true, Some(Value::Object(outer))) = (own, tool.extra.get(TOOL_HINT)) {
        write_extra(&mut out, outer);
    }
    Value::Object(out)
}

/// An Anthropic server tool (`web_search_…`, `code_execution_…`): Anthropic runs it, so it has
/// no schema and nothing on the OpenAI side could answer a call to it.
fn is_anthropic_server_tool(tool: &ToolSpec) -> bool {
    let kind = tool.extra.get("type").and_then(Value::as_str);
    tool.parameters.is_null() && kind.is_some_and(|kind| kind != "custom")
}

/// The Anthropic request parameters that have a Chat Completions equivalent.
fn translate_anthropic_params(extra: &Extra, out: &mut Map<String, Value>) {
    let has_tools = out.contains_key("tools");
    for (key, value) in extra {
        match key.as_str() {
            "max_tokens" => {
                out.insert("max_completion_tokens".to_owned(), value.clone());
            }
            "temperature" | "top_p" | "stream" => {
                out.insert(key.clone(), value.clone());
            }
            "stop_sequences" => {
                out.insert("stop".to_owned(), value.clone());
            }
            "tool_choice" if has_tools => {
                let Some(choice) = value.as_object() else {
                    continue;
                };
                let translated = match choice.get("type").and_then(Value::as_str) {
                    Some("auto") => Some(Value::String("auto".to_owned())),
                    Some("any") => Some(Value::String("required".to_owned())),
                    Some("none") => Some(Value::String("none".to_owned())),
                    Some("tool") => choice.get("name").and_then(Value::as_str).map(
                        |name| serde_json::json!({"type": "function", "function": {"name": name}}),
                    ),
                    Some(_) | None => None,
                };
                if let Some(translated) = translated {
                    out.insert("tool_choice".to_owned(), translated);
                }
                if choice.get("disable_parallel_tool_use") == Some(&Value::Bool(true)) {
                    out.insert("parallel_tool_calls".to_owned(), Value::Bool(false));
                }
            }
            _ => {}
        }
    }
}
