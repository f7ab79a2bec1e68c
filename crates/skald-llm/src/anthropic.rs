//! The Anthropic Messages client (`POST {base_url}/v1/messages`, `x-api-key`,
//! `anthropic-version`). Requests are written by `skald_core::codec::anthropic` (leading system
//! messages become `system`, tool results are merged into user turns, `details` never written);
//! OpenAI-style tool specs are converted to `{name, description, input_schema}`. Streamed answers
//! are assembled block by block into the same message a non-streamed answer decodes to.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use eventsource_stream::Event;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use skald_core::codec;
use skald_core::message::{
    Block, Conversation, Extra, Message, Role, StopReason, TextBlock, ThinkingBlock, ToolCall,
    Usage,
};
use tokio_util::sync::CancellationToken;

use crate::chat::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, StreamEvent, function_spec, strip_details,
};
use crate::config::{ProviderConfig, ProviderKind};
use crate::error::LlmError;
use crate::http::{StreamDecoder, Transport, decode_events, endpoint, event_json};
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
            AnthropicStream::new(self.config.model.clone()),
        ))
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

/// A content block being streamed.
#[derive(Debug)]
enum PartialBlock {
    Text {
        text: String,
        extra: Extra,
    },
    Thinking {
        thinking: String,
        signature: Option<String>,
        extra: Extra,
    },
    ToolUse {
        ordinal: usize,
        id: String,
        name: String,
        /// `input` of `content_block_start`, used when no `input_json_delta` follows.
        initial: Value,
        json: String,
        extra: Extra,
    },
    /// Any other block (`redacted_thinking`, server tools…), kept as sent; streamed input JSON
    /// (server tool use) is put back as its `input`.
    Other {
        block: Value,
        json: String,
    },
}

/// Assembles a streamed Messages answer.
#[derive(Debug)]
struct AnthropicStream {
    configured_model: String,
    id: Option<String>,
    model: Option<String>,
    blocks: BTreeMap<u64, PartialBlock>,
    tool_calls: usize,
    usage: Option<Usage>,
    stop_reason: Option<String>,
}

/// The fields of an object not named in `consumed`.
fn rest(object: &Map<String, Value>, consumed: &[&str]) -> Extra {
    object
        .iter()
        .filter(|(key, _)| !consumed.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

fn text_field(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

impl AnthropicStream {
    fn new(configured_model: String) -> AnthropicStream {
        AnthropicStream {
            configured_model,
            id: None,
            model: None,
            blocks: BTreeMap::new(),
            tool_calls: 0,
            usage: None,
            stop_reason: None,
        }
    }

    /// Folds a usage object into the running usage: a field present overrides, as
    /// `message_delta` restates the final counts.
    fn merge_usage(&mut self, usage: &Value) -> Option<StreamEvent> {
        let usage = usage.as_object()?;
        let mut merged = self.usage.unwrap_or_default();
        let set = |key: &str, slot: &mut u64| {
            if let Some(count) = usage.get(key).and_then(Value::as_u64) {
                *slot = count;
            }
        };
        set("input_tokens", &mut merged.input);
        set("output_tokens", &mut merged.output);
        set("cache_read_input_tokens", &mut merged.cache_read);
        set("cache_creation_input_tokens", &mut merged.cache_write);
        self.usage = Some(merged);
        Some(StreamEvent::Usage(merged))
    }

    fn on_block_start(&mut self, index: u64, block: &Value) -> Vec<StreamEvent> {
        let Some(object) = block.as_object() else {
            return Vec::new();
        };
        let mut events = Vec::new();
        let partial = match object.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = text_field(block, "text");
                if !text.is_empty() {
                    events.push(StreamEvent::TextDelta(text.clone()));
                }
                PartialBlock::Text {
                    text,
                    extra: rest(object, &["type", "text"]),
                }
            }
            Some("thinking") => {
                let thinking = text_field(block, "thinking");
                if !thinking.is_empty() {
                    events.push(StreamEvent::ThinkingDelta(thinking.clone()));
                }
                PartialBlock::Thinking {
                    thinking,
                    signature: object
                        .get("signature")
                        .and_then(Value::as_str)
                        .filter(|signature| !signature.is_empty())
                        .map(str::to_owned),
                    extra: rest(object, &["type", "thinking", "signature"]),
                }
            }
            Some("tool_use") => {
                let ordinal = self.tool_calls;
                self.tool_calls += 1;
                let id = text_field(block, "id");
                let name = text_field(block, "name");
                events.push(StreamEvent::ToolCallStart {
                    index: ordinal,
                    id: id.clone(),
                    name: name.clone(),
                });
                PartialBlock::ToolUse {
                    ordinal,
                    id,
                    name,
                    initial: object.get("input").cloned().unwrap_or_else(|| json!({})),
                    json: String::new(),
                    extra: rest(object, &["type", "id", "name", "input"]),
                }
            }
            Some(_) | None => PartialBlock::Other {
                block: block.clone(),
                json: String::new(),
            },
        };
        self.blocks.insert(index, partial);
        events
    }

    fn on_block_delta(&mut self, index: u64, delta: &Value) -> Vec<StreamEvent> {
        let Some(block) = self.blocks.get_mut(&index) else {
            return Vec::new();
        };
        let kind = delta
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let piece = |key: &str| text_field(delta, key);
        match (kind, block) {
            ("text_delta", PartialBlock::Text { text, .. }) => {
                let added = piece("text");
                text.push_str(&added);
                vec![StreamEvent::TextDelta(added)]
            }
            ("thinking_delta", PartialBlock::Thinking { thinking, .. }) => {
                let added = piece("thinking");
                thinking.push_str(&added);
                vec![StreamEvent::ThinkingDelta(added)]
            }
            ("signature_delta", PartialBlock::Thinking { signature, .. }) => {
                signature
                    .get_or_insert_with(String::new)
                    .push_str(&piece("signature"));
                Vec::new()
            }
            ("input_json_delta", PartialBlock::ToolUse { ordinal, json, .. }) => {
                let added = piece("partial_json");
                if added.is_empty() {
                    // Anthropic opens every tool input with an empty delta.
                    return Vec::new();
                }
                json.push_str(&added);
                vec![StreamEvent::ToolCallArgsDelta {
                    index: *ordinal,
                    delta: added,
                }]
            }
            ("input_json_delta", PartialBlock::Other { json, .. }) => {
                json.push_str(&piece("partial_json"));
                Vec::new()
            }
            // Citations and deltas added after this client was written carry nothing it keeps.
            (_, _) => Vec::new(),
        }
    }

    fn response(&mut self) -> ChatResponse {
        let content = std::mem::take(&mut self.blocks)
            .into_values()
            .map(|block| match block {
                PartialBlock::Text { text, extra } => Block::Text(TextBlock { text, extra }),
                PartialBlock::Thinking {
                    thinking,
                    signature,
                    extra,
                } => Block::Thinking(ThinkingBlock {
                    thinking,
                    signature,
                    extra,
                }),
                PartialBlock::ToolUse {
                    id,
                    name,
                    initial,
                    json,
                    extra,
                    ..
                } => Block::ToolCall(ToolCall {
                    id,
                    name,
                    arguments: if json.trim().is_empty() {
                        initial
                    } else {
                        serde_json::from_str(&json).unwrap_or(Value::String(json))
                    },
                    arguments_text: None,
                    extra,
                }),
                PartialBlock::Other { mut block, json } => {
                    if let (false, Some(fields), Ok(input)) = (
                        json.trim().is_empty(),
                        block.as_object_mut(),
                        serde_json::from_str::<Value>(&json),
                    ) {
                        fields.insert("input".to_owned(), input);
                    }
                    Block::Opaque(block)
                }
            })
            .collect();
        let mut message = Message::new(Role::Assistant, content);
        message.meta.id = self.id.take();
        message.meta.model = self.model.take();
        message.meta.stop_reason = self.stop_reason.as_deref().map(StopReason::parse);
        message.meta.usage = self.usage;
        message.extra.insert(
            codec::anthropic::ORIGIN_KEY.to_owned(),
            Value::String(codec::anthropic::ORIGIN.to_owned()),
        );
        response_from(message, &self.configured_model)
    }
}

impl StreamDecoder for AnthropicStream {
    fn on_event(&mut self, event: &Event) -> Result<Vec<StreamEvent>, LlmError> {
        if event.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let data = event_json(event)?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        let events = match kind {
            "message_start" => {
                let message = data.get("message").cloned().unwrap_or(Value::Null);
                self.id = message.get("id").and_then(Value::as_str).map(str::to_owned);
                self.model = message
                    .get("model")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                message
                    .get("usage")
                    .and_then(|usage| self.merge_usage(usage))
                    .into_iter()
                    .collect()
            }
            "content_block_start" => {
                let block = data.get("content_block").cloned().unwrap_or(Value::Null);
                self.on_block_start(index, &block)
            }
            "content_block_delta" => {
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                self.on_block_delta(index, &delta)
            }
            "message_delta" => {
                if let Some(reason) = data
                    .get("delta")
                    .and_then(|delta| delta.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                data.get("usage")
                    .and_then(|usage| self.merge_usage(usage))
                    .into_iter()
                    .collect()
            }
            "message_stop" => vec![StreamEvent::Done(Box::new(self.response()))],
            "error" => return Err(LlmError::from_provider(None, &event.data, None)),
            // `ping`, `content_block_stop` and event types added later.
            _ => Vec::new(),
        };
        Ok(events)
    }

    fn on_end(&mut self) -> Result<StreamEvent, LlmError> {
        if self.stop_reason.is_some() {
            Ok(StreamEvent::Done(Box::new(self.response())))
        } else {
            Err(LlmError::Transport {
                message: "the answer stream ended before message_stop".to_owned(),
            })
        }
    }
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
