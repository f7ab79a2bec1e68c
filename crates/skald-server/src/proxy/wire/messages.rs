//! Anthropic Messages (`POST /v1/messages`, to `[proxy.anthropic]`): the codec is
//! `skald_core::codec::anthropic`; the key goes in `x-api-key`; skald's own errors carry
//! `"type": "error"`; Claude Code's session id comes in `X-Claude-Code-Session-Id` or
//! `metadata.user_id`; a streamed answer is typed events whose content blocks skald renumbers
//! across continuation calls (one `message_start` … `message_stop` for the client), keeping each
//! round's text and thinking (with its signature) for the hidden assistant turn.

use axum::http::{HeaderMap, HeaderName};
use bytes::Bytes;
use serde_json::{Map, Value, json};
use skald_core::codec::anthropic;
use skald_core::message::{Conversation, Message, Usage};
use skald_engine::SkaldTools;

use super::super::sse::{SseEvent, write_event};
use super::super::stream::{Held, HeldCall, SeenBlock, Slot, StreamRewriter};
use super::{WireApi, header_text};
use crate::config::{ServerConfig, Upstream};

/// Anthropic Messages.
#[derive(Debug, Clone, Copy)]
pub struct AnthropicMessages;

impl WireApi for AnthropicMessages {
    fn name(&self) -> &'static str {
        "Messages"
    }

    fn table(&self) -> &'static str {
        "[proxy.anthropic]"
    }

    fn example_base_url(&self) -> &'static str {
        "https://api.anthropic.com"
    }

    fn origin(&self) -> &'static str {
        anthropic::ORIGIN
    }

    fn configured<'c>(&self, config: &'c ServerConfig) -> Option<&'c Upstream> {
        config.anthropic.as_ref()
    }

    fn decode_request(&self, body: &Value) -> Result<Conversation, String> {
        anthropic::decode_request(body).map_err(|error| error.to_string())
    }

    fn encode_request(&self, conversation: &Conversation) -> Value {
        anthropic::encode_request(conversation)
    }

    fn tool_from_function_spec(&self, tool: Value) -> Value {
        let Value::Object(mut outer) = tool else {
            return tool;
        };
        let Some(Value::Object(mut function)) = outer.remove("function") else {
            return Value::Object(outer);
        };
        let schema = function
            .remove("parameters")
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        function.insert("input_schema".to_owned(), schema);
        Value::Object(function)
    }

    fn generate_path(&self) -> &'static str {
        "/v1/messages"
    }

    fn models_path(&self) -> &'static str {
        "/v1/models"
    }

    fn final_event(&self) -> &'static str {
        "message_stop"
    }

    fn key_header(&self) -> HeaderName {
        HeaderName::from_static("x-api-key")
    }

    fn key_text(&self, key: &str) -> String {
        key.to_owned()
    }

    fn decode_answer(&self, body: &Value) -> Option<Message> {
        let mut message = anthropic::decode_response(body).ok()?.message;
        if message.meta.usage.is_none() {
            message.meta.usage = body.get("usage").map(|usage| anthropic_usage(usage, None));
        }
        Some(message)
    }

    fn strip_skald_calls(&self, answer: &mut Value, skald: &SkaldTools) {
        let mut left = 0;
        if let Some(Value::Array(blocks)) = answer.get_mut("content") {
            blocks.retain(|block| {
                let is_call = block.get("type").and_then(Value::as_str) == Some("tool_use");
                let name = block.get("name").and_then(Value::as_str);
                !(is_call && name.is_some_and(|name| skald.contains(name)))
            });
            left = blocks
                .iter()
                .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_use"))
                .count();
        }
        if left == 0 {
            if let Some(reason) = answer.get_mut("stop_reason") {
                if reason == "tool_use" {
                    *reason = Value::String("end_turn".to_owned());
                }
            }
        }
    }

    fn error_event(&self, message: &str) -> Vec<Bytes> {
        vec![write_event(
            Some("error"),
            &json!({"type": "error", "error": {"type": "api_error", "message": message}})
                .to_string(),
        )]
    }

    fn client_session(&self, headers: &HeaderMap, body: &Value) -> Option<(&'static str, String)> {
        header_text(headers, "x-claude-code-session-id")
            .or_else(|| metadata_session(body))
            .map(|id| ("claude-code", id))
    }

    fn marks_errors(&self) -> bool {
        true
    }

    /// `thinking` of type `enabled` or `adaptive`.
    fn thinking_enabled(&self, request: &Conversation) -> bool {
        request
            .extra
            .get("thinking")
            .and_then(|thinking| thinking.get("type"))
            .and_then(Value::as_str)
            .is_some_and(|kind| kind != "disabled")
    }

    fn on_stream_event(&self, rewriter: &mut StreamRewriter, event: SseEvent) -> Option<Bytes> {
        rewriter.on_anthropic(event)
    }
}

/// The session part of Anthropic's `metadata.user_id`: a JSON object's `session_id`, or what
/// follows `_session_` in the older underscore spelling.
fn metadata_session(body: &Value) -> Option<String> {
    let user_id = body.pointer("/metadata/user_id")?.as_str()?;
    if let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(user_id) {
        return fields
            .get("session_id")
            .and_then(Value::as_str)
            .filter(|id| !id.trim().is_empty())
            .map(str::to_owned);
    }
    user_id
        .rsplit_once("_session_")
        .map(|(_, id)| id.trim())
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// Anthropic usage (`skald_core::codec::anthropic::usage_of`, one-hour cache writes included);
/// `output` overrides the object's own output count.
pub fn anthropic_usage(usage: &Value, output: Option<u64>) -> Usage {
    let mut read = anthropic::usage_of(usage).unwrap_or_default();
    if let Some(output) = output {
        read.output = output;
    }
    read
}

impl StreamRewriter {
    pub(in crate::proxy) fn on_anthropic(&mut self, event: SseEvent) -> Option<Bytes> {
        let Ok(Value::Object(mut data)) = serde_json::from_str::<Value>(&event.data) else {
            return Some(event.raw);
        };
        let kind = data.get("type").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "message_start" => {
                if let Some(message) = data.get("message") {
                    if let Some(usage) = message.get("usage") {
                        self.current.usage = Some(anthropic_usage(usage, None));
                    }
                }
                (self.round == 0).then_some(event.raw)
            }
            "content_block_start" => {
                let upstream = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                let block = data.get("content_block");
                let is_call = block
                    .and_then(|block| block.get("type"))
                    .and_then(Value::as_str)
                    == Some("tool_use");
                let name = block
                    .and_then(|block| block.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let slot = if is_call && self.skald.contains(name) {
                    let mut held = HeldCall {
                        id: block
                            .and_then(|block| block.get("id"))
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        name: name.to_owned(),
                        arguments: String::new(),
                    };
                    if let Some(input) = block
                        .and_then(|block| block.get("input"))
                        .filter(|input| input.as_object().is_some_and(|input| !input.is_empty()))
                    {
                        held.arguments = input.to_string();
                    }
                    self.held_calls.push(held);
                    Slot::Skald(self.held_calls.len() - 1)
                } else {
                    if is_call {
                        self.current.client_calls += 1;
                    }
                    let index = self.next_index;
                    self.next_index += 1;
                    if is_call {
                        Slot::Client(index)
                    } else {
                        self.seen.push((upstream, SeenBlock::start(block)));
                        Slot::Other(index)
                    }
                };
                self.slots.insert(upstream, slot);
                self.anthropic_block_event(event, data, slot)
            }
            "content_block_delta" | "content_block_stop" => {
                let upstream = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                let Some(slot) = self.slots.get(&upstream).copied() else {
                    return Some(event.raw);
                };
                if let (Slot::Other(_), Some(delta)) = (slot, data.get("delta")) {
                    if let Some((_, seen)) = self
                        .seen
                        .iter_mut()
                        .rev()
                        .find(|(index, _)| *index == upstream)
                    {
                        seen.delta(delta);
                    }
                }
                if let (Slot::Skald(at), "content_block_delta") = (slot, kind) {
                    let partial = data
                        .get("delta")
                        .and_then(|delta| delta.get("partial_json"))
                        .and_then(Value::as_str);
                    if let (Some(held), Some(partial)) = (self.held_calls.get_mut(at), partial) {
                        held.arguments.push_str(partial);
                    }
                }
                self.anthropic_block_event(event, std::mem::take(&mut data), slot)
            }
            "message_delta" => {
                if let Some(usage) = data.get("usage") {
                    let output = usage.get("output_tokens").and_then(Value::as_u64);
                    let mut merged = self.current.usage.unwrap_or_default();
                    if let Some(output) = output {
                        merged.output = output;
                    }
                    // Newer streams report the input side here too.
                    if usage.get("input_tokens").is_some() {
                        merged = anthropic_usage(usage, output);
                    }
                    self.current.usage = Some(merged);
                }
                self.held_tail.push(Held::Json {
                    event: event.event,
                    data: Value::Object(data),
                });
                None
            }
            "message_stop" => {
                self.current.finished = true;
                self.held_tail.push(Held::Raw(event.raw));
                None
            }
            "error" => {
                self.current.upstream_error = true;
                Some(event.raw)
            }
            _ => Some(event.raw),
        }
    }

    /// A content block event as the client sees it: dropped when the block is skald's call,
    /// else with the client's index.
    fn anthropic_block_event(
        &self,
        event: SseEvent,
        mut data: Map<String, Value>,
        slot: Slot,
    ) -> Option<Bytes> {
        let index = match slot {
            Slot::Skald(_) => return None,
            Slot::Client(index) | Slot::Other(index) => index,
        };
        if data.get("index").and_then(Value::as_u64) == Some(index) {
            return Some(event.raw);
        }
        data.insert("index".to_owned(), Value::from(index));
        Some(write_event(
            event.event.as_deref(),
            &Value::Object(data).to_string(),
        ))
    }
}
