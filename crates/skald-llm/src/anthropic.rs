//! The Anthropic Messages client (`POST {base_url}/v1/messages`, `x-api-key`,
//! `anthropic-version`). Requests are written by `skald_core::codec::anthropic` (leading system
//! messages become `system`, tool results are merged into user turns, `details` never written);
//! OpenAI-style tool specs are converted to `{name, description, input_schema}`. (A streamed
//! answer a client asked for is the proxy's to relay, event by event: `skald_server`'s stream
//! rewriter; this client reads whole answers.)

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use skald_core::codec;
use skald_core::message::{Conversation, Extra, Message, Role};
use tokio_util::sync::CancellationToken;

use crate::chat::{ChatModel, ChatRequest, ChatResponse, function_spec, strip_details};
use crate::config::{ProviderConfig, ProviderKind};
use crate::error::LlmError;
use crate::http::{Transport, endpoint};
use crate::openai::{json_number, response_from};
use crate::retry::{JitterSource, RetryPolicy};

/// The API version sent when the configuration's headers do not set `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// An Anthropic Messages client.
#[derive(Debug, Clone)]
pub struct Anthropic {
    config: ProviderConfig,
    transport: Transport,
    endpoint: String,
}

impl Anthropic {
    /// A client for `config`, with the key read from its environment variable (see
    /// [`ProviderConfig::resolve_api_key`]).
    pub fn new(config: ProviderConfig) -> Result<Anthropic, LlmError> {
        let key = config.resolve_api_key()?;
        Anthropic::with_api_key(config, key)
    }

    /// A client for `config` with the key given (or none, behind a gateway that adds it).
    pub fn with_api_key(
        config: ProviderConfig,
        api_key: Option<String>,
    ) -> Result<Anthropic, LlmError> {
        if config.kind != ProviderKind::Anthropic {
            return Err(LlmError::Config {
                message: format!(
                    "kind: the Anthropic client cannot serve a {:?} configuration",
                    config.kind.name()
                ),
            });
        }
        let mut headers = vec![(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        )];
        if let Some(key) = api_key {
            let value = HeaderValue::from_str(&key).map_err(|_| LlmError::Config {
                message: "api_key: contains characters an HTTP header cannot carry".to_owned(),
            })?;
            headers.push((HeaderName::from_static("x-api-key"), value));
        }
        let transport = Transport::new(&config, headers)?;
        let endpoint = endpoint(&config.base_url, &["v1", "messages"])?;
        Ok(Anthropic {
            config,
            transport,
            endpoint,
        })
    }

    /// Replaces the retry policy (default: seed 003's 3 attempts, 500–5000 ms, 0.2 jitter).
    pub fn with_retry_policy(mut self, policy: RetryPolicy) -> Anthropic {
        self.transport.retry = policy;
        self
    }

    /// Replaces the source of retry jitter (tests pass a [`crate::retry::FixedJitter`]).
    pub fn with_jitter(mut self, jitter: Arc<dyn JitterSource>) -> Anthropic {
        self.transport.jitter = jitter;
        self
    }

    /// Replaces the per-attempt timeout the configuration's `timeout_secs` set.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Anthropic {
        self.transport.timeout = timeout;
        self
    }

    /// The configuration the client was built from.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The JSON body sent for `request` (`stream` adds `"stream": true`).
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
        let mut body = codec::anthropic::encode_request(&conversation);
        let Value::Object(fields) = &mut body else {
            return Err(LlmError::InvalidRequest {
                message: "the Anthropic encoder did not produce an object".to_owned(),
            });
        };
        let limit = request
            .max_output_tokens
            .unwrap_or(self.config.max_output_tokens);
        fields.insert("max_tokens".to_owned(), Value::from(limit));
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .enumerate()
                .map(|(index, tool)| anthropic_tool(tool, index))
                .collect::<Result<Vec<_>, _>>()?;
            fields.insert("tools".to_owned(), Value::Array(tools));
        }
        // Anthropic samples temperatures from 0 to 1 (OpenAI up to 2).
        if let Some(temperature) = request
            .temperature
            .map(|temperature| temperature.clamp(0.0, 1.0))
            .and_then(json_number)
        {
            fields.insert("temperature".to_owned(), temperature);
        }
        if stream {
            fields.insert("stream".to_owned(), Value::Bool(true));
        }
        Ok(body)
    }
}

#[async_trait]
impl ChatModel for Anthropic {
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

/// `tools[index]` as an Anthropic custom tool.
fn anthropic_tool(tool: &Value, index: usize) -> Result<Value, LlmError> {
    let spec = function_spec(tool, index)?;
    let mut out = Map::new();
    out.insert("name".to_owned(), Value::String(spec.name));
    if let Some(description) = spec.description {
        out.insert("description".to_owned(), Value::String(description));
    }
    out.insert(
        "input_schema".to_owned(),
        spec.parameters
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    );
    Ok(Value::Object(out))
}

/// An `{"type":"error",…}` answer as a typed error.
fn embedded_error(answer: &Value) -> Option<LlmError> {
    let is_error = answer.get("type").and_then(Value::as_str) == Some("error")
        || answer.get("error").is_some_and(|error| !error.is_null());
    is_error.then(|| LlmError::from_provider(None, &answer.to_string(), None))
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
        codec::anthropic::decode_response(answer).map_err(|error| LlmError::InvalidResponse {
            message: format!("not a Messages answer: {error}"),
        })?;
    Ok(response_from(decoded.message, configured_model))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn tools_become_input_schemas() {
        let tool = json!({"type":"function","function":{"name":"ls","description":"list files","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}});
        assert_eq!(
            anthropic_tool(&tool, 0).unwrap(),
            json!({"name":"ls","description":"list files","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}})
        );
        let bare = json!({"type":"function","function":{"name":"now"}});
        assert_eq!(
            anthropic_tool(&bare, 0).unwrap(),
            json!({"name":"now","input_schema":{"type":"object","properties":{}}})
        );
    }

    #[test]
    fn an_error_answer_is_an_error() {
        let answer =
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
        assert!(matches!(
            decode_response(&answer, "m"),
            Err(LlmError::Server { .. })
        ));
    }
}
