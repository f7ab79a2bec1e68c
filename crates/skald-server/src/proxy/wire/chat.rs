//! OpenAI Chat Completions (`POST /v1/chat/completions`, to `[proxy.openai]`): the codec is
//! `skald_core::codec::openai`; a streamed answer is `data:` chunks ending in `[DONE]`, tool
//! calls arrive as indexed `tool_calls` deltas, and the end of the answer (the chunk with
//! `finish_reason`, the usage chunk, `[DONE]`) is held back until skald knows whether it
//! continues.

use axum::http::{HeaderMap, HeaderName, header};
use bytes::Bytes;
use serde_json::{Value, json};
use skald_core::codec::openai;
use skald_core::message::{Conversation, Message, Usage};
use skald_engine::SkaldTools;

use super::super::sse::{SseEvent, write_event};
use super::super::stream::{Held, HeldCall, Slot, StreamRewriter};
use super::{WireApi, openai_client_session};
use crate::config::{ServerConfig, Upstream};

/// OpenAI Chat Completions.
#[derive(Debug, Clone, Copy)]
pub struct ChatCompletions;

impl WireApi for ChatCompletions {
    fn name(&self) -> &'static str {
        "Chat Completions"
    }

    fn table(&self) -> &'static str {
        "[proxy.openai]"
    }

    fn example_base_url(&self) -> &'static str {
        "https://api.openai.com/v1"
    }

    fn origin(&self) -> &'static str {
        openai::ORIGIN
    }

    fn configured<'c>(&self, config: &'c ServerConfig) -> Option<&'c Upstream> {
        config.openai.as_ref()
    }

    fn decode_request(&self, body: &Value) -> Result<Conversation, String> {
        openai::decode_request(body).map_err(|error| error.to_string())
    }

    fn encode_request(&self, conversation: &Conversation) -> Value {
        openai::encode_request(conversation)
    }

    fn tool_from_function_spec(&self, tool: Value) -> Value {
        tool
    }

    fn generate_path(&self) -> &'static str {
        "/chat/completions"
    }

    fn models_path(&self) -> &'static str {
        "/models"
    }

    fn final_event(&self) -> &'static str {
        "data: [DONE]"
    }

    fn key_header(&self) -> HeaderName {
        header::AUTHORIZATION
    }

    fn key_text(&self, key: &str) -> String {
        format!("Bearer {key}")
    }

    fn decode_answer(&self, body: &Value) -> Option<Message> {
        let mut message = openai::decode_response(body).ok()?.message;
        if message.meta.usage.is_none() {
            message.meta.usage = body.get("usage").map(openai_usage);
        }
        Some(message)
    }

    fn strip_skald_calls(&self, answer: &mut Value, skald: &SkaldTools) {
        let Some(choices) = answer.get_mut("choices").and_then(Value::as_array_mut) else {
            return;
        };
        for choice in choices {
            let Some(message) = choice.get_mut("message").and_then(Value::as_object_mut) else {
                continue;
            };
            let mut left = None;
            if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
                calls.retain(|call| {
                    let name = call
                        .get("function")
                        .and_then(|function| function.get("name"))
                        .and_then(Value::as_str);
                    !name.is_some_and(|name| skald.contains(name))
                });
                left = Some(calls.len());
            }
            if left == Some(0) {
                message.remove("tool_calls");
                if let Some(reason) = choice.get_mut("finish_reason") {
                    if reason == "tool_calls" {
                        *reason = Value::String("stop".to_owned());
                    }
                }
            }
        }
    }

    fn error_event(&self, message: &str) -> Vec<Bytes> {
        vec![
            write_event(
                None,
                &json!({"error": {"message": message, "type": "upstream_error"}}).to_string(),
            ),
            write_event(None, "[DONE]"),
        ]
    }

    fn client_session(&self, headers: &HeaderMap, body: &Value) -> Option<(&'static str, String)> {
        openai_client_session(headers, body)
    }

    fn on_stream_event(&self, rewriter: &mut StreamRewriter, event: SseEvent) -> Option<Bytes> {
        rewriter.on_openai(event)
    }
}

/// OpenAI usage: `prompt_tokens` counts cached tokens too.
pub fn openai_usage(usage: &Value) -> Usage {
    let count = |value: Option<&Value>| value.and_then(Value::as_u64).unwrap_or(0);
    let prompt = count(usage.get("prompt_tokens"));
    let cached = count(
        usage
            .get("prompt_tokens_details")
            .and_then(|details| details.get("cached_tokens")),
    );
    Usage {
        input: prompt.saturating_sub(cached),
        output: count(usage.get("completion_tokens")),
        cache_read: cached,
        cache_write: 0,
        cache_write_1h: 0,
    }
}

impl StreamRewriter {
    pub(in crate::proxy) fn on_openai(&mut self, event: SseEvent) -> Option<Bytes> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.current.finished = true;
            self.held_tail.push(Held::Raw(event.raw));
            return None;
        }
        if data.is_empty() {
            return Some(event.raw);
        }
        let Ok(Value::Object(mut chunk)) = serde_json::from_str::<Value>(data) else {
            return Some(event.raw);
        };
        if chunk.contains_key("error") {
            self.current.upstream_error = true;
            return Some(event.raw);
        }
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            self.current.usage = Some(openai_usage(usage));
        }
        let mut changed = false;
        match (&self.first_id, chunk.get("id").and_then(Value::as_str)) {
            (None, Some(id)) => self.first_id = Some(id.to_owned()),
            (Some(first), Some(id)) if first != id => {
                chunk.insert("id".to_owned(), Value::String(first.clone()));
                changed = true;
            }
            (Some(_), Some(_)) | (_, None) => {}
        }
        let mut finishing = false;
        let mut has_content = false;
        if let Some(Value::Array(choices)) = chunk.get_mut("choices") {
            for choice in choices.iter_mut() {
                let Some(choice) = choice.as_object_mut() else {
                    continue;
                };
                if let Some(Value::Object(delta)) = choice.get_mut("delta") {
                    if self.round > 0 && delta.remove("role").is_some() {
                        changed = true;
                    }
                    if let Some(Value::String(text)) = delta.get_mut("content") {
                        if !text.is_empty() {
                            let first_of_continuation =
                                self.round > 0 && self.round_text.is_empty();
                            if first_of_continuation
                                && self.last_text_char.is_some_and(|last| last != '\n')
                            {
                                text.insert_str(0, "\n\n");
                                changed = true;
                            }
                            self.round_text.push_str(text);
                            self.last_text_char = text.chars().last();
                        }
                    }
                    if let Some(Value::Array(calls)) = delta.get_mut("tool_calls") {
                        let before = calls.len();
                        let mut kept = Vec::with_capacity(before);
                        for mut call in calls.drain(..) {
                            match self.openai_call(&call) {
                                Slot::Skald(_) => changed = true,
                                Slot::Client(index) | Slot::Other(index) => {
                                    if call.get("index").and_then(Value::as_u64) != Some(index) {
                                        if let Some(call) = call.as_object_mut() {
                                            call.insert("index".to_owned(), Value::from(index));
                                        }
                                        changed = true;
                                    }
                                    kept.push(call);
                                }
                            }
                        }
                        if kept.is_empty() {
                            delta.remove("tool_calls");
                        } else {
                            *calls = kept;
                        }
                    }
                    has_content |= !delta.is_empty();
                }
                finishing |= choice
                    .get("finish_reason")
                    .is_some_and(|reason| !reason.is_null());
            }
        }
        let usage_only = chunk
            .get("choices")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
            && chunk.get("usage").is_some_and(|usage| !usage.is_null());
        if usage_only {
            self.held_tail.push(Held::Json {
                event: None,
                data: Value::Object(chunk),
            });
            return None;
        }
        if finishing {
            // The end waits; what the same chunk says before it goes now.
            let mut end = chunk.clone();
            let mut now = chunk;
            if let Some(Value::Array(choices)) = end.get_mut("choices") {
                for choice in choices.iter_mut().filter_map(Value::as_object_mut) {
                    choice.insert("delta".to_owned(), json!({}));
                }
            }
            self.held_tail.push(Held::Json {
                event: None,
                data: Value::Object(end),
            });
            if !has_content {
                return None;
            }
            if let Some(Value::Array(choices)) = now.get_mut("choices") {
                for choice in choices.iter_mut().filter_map(Value::as_object_mut) {
                    choice.insert("finish_reason".to_owned(), Value::Null);
                }
            }
            now.remove("usage");
            return Some(write_event(None, &Value::Object(now).to_string()));
        }
        if changed && !has_content {
            return None;
        }
        if changed {
            Some(write_event(None, &Value::Object(chunk).to_string()))
        } else {
            Some(event.raw)
        }
    }

    /// Where one `tool_calls` delta goes; collects it when it is skald's.
    fn openai_call(&mut self, call: &Value) -> Slot {
        let upstream = call.get("index").and_then(Value::as_u64).unwrap_or(0);
        let function = call.get("function");
        let slot = match self.slots.get(&upstream) {
            Some(slot) => *slot,
            None => {
                let name = function
                    .and_then(|function| function.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let slot = if self.skald.contains(name) {
                    self.held_calls.push(HeldCall::default());
                    Slot::Skald(self.held_calls.len() - 1)
                } else {
                    self.current.client_calls += 1;
                    let index = self.next_index;
                    self.next_index += 1;
                    Slot::Client(index)
                };
                self.slots.insert(upstream, slot);
                slot
            }
        };
        if let Slot::Skald(at) = slot {
            if let Some(held) = self.held_calls.get_mut(at) {
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    held.id.push_str(id);
                }
                if let Some(function) = function {
                    if let Some(name) = function.get("name").and_then(Value::as_str) {
                        held.name.push_str(name);
                    }
                    if let Some(arguments) = function.get("arguments").and_then(Value::as_str) {
                        held.arguments.push_str(arguments);
                    }
                }
            }
        }
        slot
    }
}
