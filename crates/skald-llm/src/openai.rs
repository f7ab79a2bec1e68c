//! The OpenAI-compatible client: Chat Completions (`POST {base_url}/chat/completions`, Bearer
//! key), which OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp's server, DeepSeek and most
//! gateways speak. Requests are written by `skald_core::codec::openai`; streamed answers are
//! assembled chunk by chunk into the same message a non-streamed answer decodes to.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use eventsource_stream::Event;
use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use skald_core::codec;
use skald_core::message::{
    Block, ContentForm, Conversation, Extra, Message, Role, StopReason, ThinkingBlock, ToolCall,
    Usage,
};
use tokio_util::sync::CancellationToken;

use crate::chat::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, StreamEvent, function_spec, strip_details,
};
use crate::config::{ProviderConfig, ProviderKind};
use crate::error::LlmError;
use crate::http::{StreamDecoder, Transport, decode_events, endpoint, event_json};
use crate::retry::{JitterSource, RetryPolicy};

/// Fields OpenAI-compatible servers use for reasoning text (DeepSeek and vLLM
/// `reasoning_content`, OpenRouter and newer vLLM `reasoning`). DeepSeek rejects requests that
/// send it back, so it becomes a thinking block, which the encoder never writes.
const REASONING_FIELDS: [&str; 2] = ["reasoning_content", "reasoning"];

/// A Chat Completions client.
#[derive(Debug, Clone)]
pub struct OpenAiCompatible {
    config: ProviderConfig,
    transport: Transport,
    endpoint: String,
}

impl OpenAiCompatible {
    /// A client for `config`, with the key read from its environment variable (see
    /// [`ProviderConfig::resolve_api_key`]).
    pub fn new(config: ProviderConfig) -> Result<OpenAiCompatible, LlmError> {
        let key = config.resolve_api_key()?;
        OpenAiCompatible::with_api_key(config, key)
    }

    /// A client for `config` with the key given (or none, for servers that need none).
    pub fn with_api_key(
        config: ProviderConfig,
        api_key: Option<String>,
    ) -> Result<OpenAiCompatible, LlmError> {
        if config.kind != ProviderKind::OpenAi {
            return Err(LlmError::Config {
                message: format!(
                    "kind: the OpenAI-compatible client cannot serve a {:?} configuration",
                    config.kind.name()
                ),
            });
        }
        let transport = Transport::new(&config, auth_headers(&config.base_url, api_key)?)?;
        let endpoint = endpoint(&config.base_url, &["chat", "completions"])?;
        Ok(OpenAiCompatible {
            config,
            transport,
            endpoint,
        })
    }

    /// Replaces the retry policy (default: seed 003's 3 attempts, 500–5000 ms, 0.2 jitter).
    pub fn with_retry_policy(mut self, policy: RetryPolicy) -> OpenAiCompatible {
        self.transport.retry = policy;
        self
    }

    /// Replaces the source of retry jitter (tests pass a [`crate::retry::FixedJitter`]).
    pub fn with_jitter(mut self, jitter: Arc<dyn JitterSource>) -> OpenAiCompatible {
        self.transport.jitter = jitter;
        self
    }

    /// Replaces the per-attempt timeout the configuration's `timeout_secs` set.
    pub fn with_request_timeout(mut self, timeout: Duration) -> OpenAiCompatible {
        self.transport.timeout = timeout;
        self
    }

    /// The configuration the client was built from.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The JSON body sent for `request` (`stream` adds the streaming flags).
    pub fn request_body(&self, request: &ChatRequest, stream: bool) -> Result<Value, LlmError> {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if let Some(system) = &request.system {
            messages.push(Message::text(Role::System, system.clone()));
        }
        messages.extend(strip_details(&request.messages));
        let conversation = Conversation {
            messages,
            tools: Vec::new(),
            model: Some(self.config.model.clone()),
            extra: Extra::new(),
        };
        let mut body = codec::openai::encode_request(&conversation);
        let Value::Object(fields) = &mut body else {
            return Err(LlmError::InvalidRequest {
                message: "the OpenAI encoder did not produce an object".to_owned(),
            });
        };
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .enumerate()
                .map(|(index, tool)| openai_tool(tool, index))
                .collect::<Result<Vec<_>, _>>()?;
            fields.insert("tools".to_owned(), Value::Array(tools));
        }
        let limit = request
            .max_output_tokens
            .unwrap_or(self.config.max_output_tokens);
        fields.insert(
            max_tokens_field(&self.config.base_url).to_owned(),
            Value::from(limit),
        );
        if let Some(temperature) = request.temperature.and_then(json_number) {
            fields.insert("temperature".to_owned(), temperature);
        }
        if stream {
            fields.insert("stream".to_owned(), Value::Bool(true));
            // Without it the stream carries no usage, and token accounting goes blind.
            fields.insert("stream_options".to_owned(), json!({"include_usage": true}));
        }
        Ok(body)
    }
}

#[async_trait]
impl ChatModel for OpenAiCompatible {
    fn model_name(&self) -> &str {
        &self.config.model
    }

    fn context_window_tokens(&self) -> Option<u64> {
        self.config.context_window_tokens
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let body = self.request_body(request, false)?;
        let answer = self
            .transport
            .post_json(&self.endpoint, &body, cancel)
            .await?;
        decode_response(&answer, &self.config.model)
    }

    async fn stream(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatStream, LlmError> {
        let body = self.request_body(request, true)?;
        let events = self
            .transport
            .post_events(&self.endpoint, &body, cancel)
            .await?;
        Ok(decode_events(
            events,
            OpenAiStream::new(self.config.model.clone()),
        ))
    }
}

/// The headers carrying `api_key` to an OpenAI-compatible server at `base_url` (none without
/// a key).
pub(crate) fn auth_headers(
    base_url: &str,
    api_key: Option<String>,
) -> Result<Vec<(HeaderName, HeaderValue)>, LlmError> {
    let Some(key) = api_key else {
        return Ok(Vec::new());
    };
    let bad_key = |_| LlmError::Config {
        message: "api_key: contains characters an HTTP header cannot carry".to_owned(),
    };
    // Azure OpenAI takes its resource keys in `api-key`; everyone else in a Bearer token.
    Ok(vec![if is_azure(base_url) {
        (
            HeaderName::from_static("api-key"),
            HeaderValue::from_str(&key).map_err(bad_key)?,
        )
    } else {
        (
            AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {key}")).map_err(bad_key)?,
        )
    }])
}

fn host(base_url: &str) -> Option<String> {
    reqwest::Url::parse(base_url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase))
}

fn is_azure(base_url: &str) -> bool {
    host(base_url).is_some_and(|host| host.ends_with(".openai.azure.com"))
}

/// OpenAI itself (and Azure OpenAI) reject `max_tokens` for reasoning models and want
/// `max_completion_tokens`; most other Chat Completions servers only know `max_tokens`.
fn max_tokens_field(base_url: &str) -> &'static str {
    let openai = host(base_url).is_some_and(|host| host == "api.openai.com");
    if openai || is_azure(base_url) {
        "max_completion_tokens"
    } else {
        "max_tokens"
    }
}

/// An `f32` as the JSON number a person would write (0.2, not 0.20000000298…).
pub(crate) fn json_number(value: f32) -> Option<Value> {
    let shortest: f64 = value.to_string().parse().ok()?;
    serde_json::Number::from_f64(shortest).map(Value::Number)
}

/// `tools[index]` as a Chat Completions tool: function specs pass through as written, other
/// shapes are wrapped.
fn openai_tool(tool: &Value, index: usize) -> Result<Value, LlmError> {
    let spec = function_spec(tool, index)?;
    let is_function_spec = tool.get("type").and_then(Value::as_str) == Some("function")
        && tool.get("function").is_some_and(Value::is_object);
    if is_function_spec {
        return Ok(tool.clone());
    }
    let mut function = Map::new();
    function.insert("name".to_owned(), Value::String(spec.name));
    if let Some(description) = spec.description {
        function.insert("description".to_owned(), Value::String(description));
    }
    if let Some(parameters) = spec.parameters {
        function.insert("parameters".to_owned(), parameters);
    }
    Ok(json!({"type": "function", "function": Value::Object(function)}))
}

/// A provider error carried in a 200 answer (some gateways do that), as a typed error.
pub(crate) fn embedded_error(answer: &Value) -> Option<LlmError> {
    answer
        .get("error")
        .filter(|error| !error.is_null())
        .map(|_| LlmError::from_provider(None, &answer.to_string(), None))
}

/// A non-streamed answer as a [`ChatResponse`].
pub(crate) fn decode_response(
    answer: &Value,
    configured_model: &str,
) -> Result<ChatResponse, LlmError> {
    if let Some(error) = embedded_error(answer) {
        return Err(error);
    }
    let decoded =
        codec::openai::decode_response(answer).map_err(|error| LlmError::InvalidResponse {
            message: format!("not a Chat Completions answer: {error}"),
        })?;
    let mut message = decoded.message;
    lift_reasoning(&mut message);
    drop_response_only_fields(&mut message);
    Ok(response_from(message, configured_model))
}

/// The message goes back to the provider in the next request, written with its extra fields;
/// fields only responses carry (`annotations`) and empty ones (`refusal: null`,
/// `tool_calls: []`) would get that request rejected by strict servers, OpenAI included.
fn drop_response_only_fields(message: &mut Message) {
    message.extra.retain(|key, value| {
        let empty = match value {
            Value::Null => true,
            Value::Array(items) => items.is_empty(),
            Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Object(_) => false,
        };
        skald_core::message::is_hint_key(key) || !(empty || key == "annotations")
    });
}

/// Moves reasoning text out of `extra` into a leading thinking block.
fn lift_reasoning(message: &mut Message) {
    let mut reasoning = None;
    for field in REASONING_FIELDS {
        match message.extra.remove(field) {
            Some(Value::String(text)) if !text.is_empty() && reasoning.is_none() => {
                reasoning = Some(text);
            }
            Some(_) | None => {}
        }
    }
    if let Some(thinking) = reasoning {
        message.content.insert(
            0,
            Block::Thinking(ThinkingBlock {
                thinking,
                signature: None,
                extra: Extra::new(),
            }),
        );
    }
}

pub(crate) fn response_from(message: Message, configured_model: &str) -> ChatResponse {
    ChatResponse {
        usage: message.meta.usage.unwrap_or_default(),
        stop_reason: message.meta.stop_reason.clone(),
        model: message
            .meta
            .model
            .clone()
            .unwrap_or_else(|| configured_model.to_owned()),
        message,
    }
}

/// Chat Completions usage: `prompt_tokens` includes cached tokens, skald's `input` does not.
fn usage_from(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let count = |value: Option<&Value>| value.and_then(Value::as_u64).unwrap_or(0);
    let prompt = count(usage.get("prompt_tokens"));
    let cached = count(
        usage
            .get("prompt_tokens_details")
            .and_then(|details| details.get("cached_tokens")),
    );
    Some(Usage {
        input: prompt.saturating_sub(cached),
        output: count(usage.get("completion_tokens")),
        cache_read: cached,
        cache_write: 0,
        cache_write_1h: 0,
    })
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles a streamed Chat Completions answer.
#[derive(Debug)]
struct OpenAiStream {
    configured_model: String,
    id: Option<String>,
    model: Option<String>,
    created: Option<i64>,
    thinking: String,
    text: String,
    calls: Vec<PartialCall>,
    /// The provider's `tool_calls[].index` → position in `calls`.
    call_slots: HashMap<u64, usize>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

impl OpenAiStream {
    fn new(configured_model: String) -> OpenAiStream {
        OpenAiStream {
            configured_model,
            id: None,
            model: None,
            created: None,
            thinking: String::new(),
            text: String::new(),
            calls: Vec::new(),
            call_slots: HashMap::new(),
            finish_reason: None,
            usage: None,
        }
    }

    fn on_chunk(&mut self, chunk: &Value) -> Result<Vec<StreamEvent>, LlmError> {
        if let Some(error) = embedded_error(chunk) {
            return Err(error);
        }
        let mut events = Vec::new();
        let text_of = |value: &Value, key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
                .map(str::to_owned)
        };
        if self.id.is_none() {
            self.id = text_of(chunk, "id");
        }
        if self.model.is_none() {
            self.model = text_of(chunk, "model");
        }
        if self.created.is_none() {
            self.created = chunk.get("created").and_then(Value::as_i64);
        }
        let choice = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|choices| {
                choices
                    .iter()
                    .find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            });
        if let Some(choice) = choice {
            if let Some(delta) = choice.get("delta") {
                if let Some(thinking) = REASONING_FIELDS
                    .iter()
                    .find_map(|field| text_of(delta, field))
                {
                    self.thinking.push_str(&thinking);
                    events.push(StreamEvent::ThinkingDelta(thinking));
                }
                if let Some(text) = text_of(delta, "content") {
                    self.text.push_str(&text);
                    events.push(StreamEvent::TextDelta(text));
                }
                if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                    for call in calls {
                        self.on_call_delta(call, &mut events);
                    }
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        if let Some(usage) = chunk.get("usage").and_then(usage_from) {
            self.usage = Some(usage);
            events.push(StreamEvent::Usage(usage));
        }
        Ok(events)
    }

    fn on_call_delta(&mut self, call: &Value, events: &mut Vec<StreamEvent>) {
        // Servers that omit `index` send one call per chunk, in order.
        let key = call
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or_else(|| self.calls.len().saturating_sub(1) as u64);
        let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
        let function = call.get("function");
        let name = function
            .and_then(|function| function.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let arguments = function
            .and_then(|function| function.get("arguments"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let is_new_call = match self.call_slots.get(&key) {
            None => true,
            // A fresh id under a used index is a new call (servers that number every call 0).
            Some(&slot) => {
                !id.is_empty()
                    && self
                        .calls
                        .get(slot)
                        .is_some_and(|existing| !existing.id.is_empty() && existing.id != id)
            }
        };
        let slot = if is_new_call {
            let slot = self.calls.len();
            self.calls.push(PartialCall {
                id: id.to_owned(),
                name: name.to_owned(),
                arguments: String::new(),
            });
            self.call_slots.insert(key, slot);
            events.push(StreamEvent::ToolCallStart {
                index: slot,
                id: id.to_owned(),
                name: name.to_owned(),
            });
            slot
        } else {
            let slot = self.call_slots.get(&key).copied().unwrap_or(0);
            if let Some(existing) = self.calls.get_mut(slot) {
                if existing.id.is_empty() {
                    existing.id = id.to_owned();
                }
                existing.name.push_str(name);
            }
            slot
        };
        if !arguments.is_empty() {
            if let Some(existing) = self.calls.get_mut(slot) {
                existing.arguments.push_str(arguments);
            }
            events.push(StreamEvent::ToolCallArgsDelta {
                index: slot,
                delta: arguments.to_owned(),
            });
        }
    }

    fn response(&mut self) -> ChatResponse {
        let mut content = Vec::new();
        if !self.thinking.is_empty() {
            content.push(Block::Thinking(ThinkingBlock {
                thinking: std::mem::take(&mut self.thinking),
                signature: None,
                extra: Extra::new(),
            }));
        }
        let has_text = !self.text.is_empty();
        if has_text {
            content.push(Block::text(std::mem::take(&mut self.text)));
        }
        let has_calls = !self.calls.is_empty();
        for call in std::mem::take(&mut self.calls) {
            content.push(Block::ToolCall(ToolCall {
                id: call.id,
                name: call.name,
                arguments: parse_arguments(&call.arguments),
                arguments_text: Some(call.arguments),
                extra: Extra::new(),
            }));
        }
        let mut message = Message::new(Role::Assistant, content);
        message.content_form = if !has_text && has_calls {
            ContentForm::Null
        } else {
            ContentForm::Text
        };
        message.meta.id = self.id.take();
        message.meta.model = self.model.take();
        message.meta.stop_reason = self.finish_reason.as_deref().map(StopReason::parse);
        message.meta.usage = self.usage;
        message.meta.timestamp = self
            .created
            .and_then(|seconds| seconds.checked_mul(1000))
            .map(skald_core::message::Timestamp::Millis);
        message.extra.insert(
            codec::openai::ORIGIN_KEY.to_owned(),
            Value::String(codec::openai::ORIGIN.to_owned()),
        );
        response_from(message, &self.configured_model)
    }
}

/// Arguments as the model wrote them: parsed when JSON, else the raw text (as the codec does).
fn parse_arguments(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

impl StreamDecoder for OpenAiStream {
    fn on_event(&mut self, event: &Event) -> Result<Vec<StreamEvent>, LlmError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(vec![StreamEvent::Done(Box::new(self.response()))]);
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let chunk = event_json(event)?;
        self.on_chunk(&chunk)
    }

    fn on_end(&mut self) -> Result<StreamEvent, LlmError> {
        // Some servers close without `[DONE]`; a finish reason says the answer is whole.
        if self.finish_reason.is_some() {
            Ok(StreamEvent::Done(Box::new(self.response())))
        } else {
            Err(LlmError::Transport {
                message: "the answer stream ended before the model finished".to_owned(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn openai_itself_gets_max_completion_tokens() {
        assert_eq!(
            max_tokens_field("https://api.openai.com/v1"),
            "max_completion_tokens"
        );
        assert_eq!(
            max_tokens_field("https://me.openai.azure.com/openai/deployments/x"),
            "max_completion_tokens"
        );
        assert_eq!(max_tokens_field("http://localhost:11434/v1"), "max_tokens");
        assert_eq!(max_tokens_field("https://api.deepseek.com"), "max_tokens");
    }

    #[test]
    fn response_only_fields_do_not_go_back() {
        let answer = json!({
            "id": "x", "object": "chat.completion", "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "hi", "refusal": null, "annotations": [],
                "tool_calls": [], "audio": {"id": "audio_1"}}}]
        });
        let response = decode_response(&answer, "m").unwrap();
        let mut keys: Vec<&str> = response.message.extra.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["audio", codec::openai::ORIGIN_KEY]);
    }

    #[test]
    fn azure_gets_its_key_in_api_key_and_keeps_its_query() {
        let mut config = ProviderConfig::new(ProviderKind::OpenAi, "gpt-4o");
        config.base_url =
            "https://me.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21"
                .to_owned();
        let client = OpenAiCompatible::with_api_key(config, Some("secret-key".to_owned())).unwrap();
        assert_eq!(
            client.endpoint,
            "https://me.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
        );
        let printed = format!("{client:?}");
        assert!(!printed.contains("secret-key"), "{printed}");
        assert!(printed.contains("api-key"), "{printed}");
    }

    #[test]
    fn temperatures_are_written_as_decimals() {
        assert_eq!(json_number(0.2).unwrap().to_string(), "0.2");
        assert_eq!(json_number(f32::NAN), None);
    }

    #[test]
    fn reasoning_content_becomes_a_thinking_block() {
        let answer = json!({
            "id": "x", "object": "chat.completion", "model": "deepseek-reasoner",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "42", "reasoning_content": "think"}}]
        });
        let response = decode_response(&answer, "m").unwrap();
        assert!(matches!(
            &response.message.content[0],
            Block::Thinking(thinking) if thinking.thinking == "think"
        ));
        assert!(!response.message.extra.contains_key("reasoning_content"));
        assert_eq!(response.text(), "42");
        assert_eq!(response.model, "deepseek-reasoner");
    }

    #[test]
    fn usage_excludes_cached_tokens_from_input() {
        let usage = usage_from(&json!({
            "prompt_tokens": 1000, "completion_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": 800}
        }))
        .unwrap();
        assert_eq!(
            usage,
            Usage {
                input: 200,
                output: 20,
                cache_read: 800,
                cache_write: 0,
                cache_write_1h: 0,
            }
        );
    }
}
