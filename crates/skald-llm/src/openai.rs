//! The OpenAI-compatible client: Chat Completions (`POST {base_url}/chat/completions`, Bearer
//! key), which OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp's server, DeepSeek and most
//! gateways speak. Requests are written by `skald_core::codec::openai`; answers are read whole.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use skald_core::codec;
use skald_core::message::{Block, Conversation, Extra, Message, Role, ThinkingBlock};
use tokio_util::sync::CancellationToken;

use crate::chat::{ChatModel, ChatRequest, ChatResponse, function_spec, strip_details};
use crate::config::{ProviderConfig, ProviderKind};
use crate::error::LlmError;
use crate::http::{Transport, endpoint};
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
}
