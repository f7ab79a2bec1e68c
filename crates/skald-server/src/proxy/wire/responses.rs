//! OpenAI Responses (`POST /v1/responses`, to `[proxy.openai]`'s `{base_url}/responses`): the
//! codec is `skald_core::codec::responses`; a client with `store` on (the API's default)
//! continues by `previous_response_id`, so skald records its answers. The client's view of a
//! streamed answer (see `proxy::stream` for the rules all APIs share). Responses streams are typed events about *output items*:
//! `response.created`, `response.output_item.added` / `.done`, content and argument deltas
//! (each naming its item's `output_index`), and one closing `response.completed` (or
//! `.incomplete` / `.failed`) that repeats the whole `output`.
//!
//! - A `function_call` item naming one of skald's tools is held back with every event about it;
//!   its arguments are collected for the proxy to run.
//! - A continuation's `response.created` / `response.in_progress` are dropped; its items take the
//!   next `output_index` the client has not seen, and every event's `sequence_number` stays
//!   dense across calls.
//! - The closing event waits until skald knows whether it continues; the one the client gets
//!   carries the first call's response id and the `output` the client saw (skald's calls left
//!   out), with the last call's usage (the context's real size, which hosts read to decide when
//!   to compact).
//! - Reasoning items (with their `encrypted_content`) and the text of a round are kept for the
//!   hidden assistant turn: a stateless client (`store: false`) continues a reasoning model only
//!   with its reasoning items sent back.

use axum::http::{HeaderMap, HeaderName, header};
use bytes::Bytes;
use serde_json::{Map, Value, json};
use skald_core::codec::responses;
use skald_core::message::{Block, Conversation, Message, Usage};
use skald_engine::SkaldTools;

use super::super::sse::{SseEvent, write_event};
use super::super::stream::{Held, HeldCall, Slot, StreamRewriter};
use super::{WireApi, openai_client_session};
use crate::config::{ServerConfig, Upstream};

/// OpenAI Responses.
#[derive(Debug, Clone, Copy)]
pub struct Responses;

impl WireApi for Responses {
    fn name(&self) -> &'static str {
        "Responses"
    }

    fn table(&self) -> &'static str {
        "[proxy.openai]"
    }

    fn example_base_url(&self) -> &'static str {
        "https://api.openai.com/v1"
    }

    fn origin(&self) -> &'static str {
        responses::ORIGIN
    }

    fn configured<'c>(&self, config: &'c ServerConfig) -> Option<&'c Upstream> {
        config.openai.as_ref()
    }

    fn decode_request(&self, body: &Value) -> Result<Conversation, String> {
        responses::decode_request(body).map_err(|error| error.to_string())
    }

    fn encode_request(&self, conversation: &Conversation) -> Value {
        responses::encode_request(conversation)
    }

    fn tool_from_function_spec(&self, tool: Value) -> Value {
        responses::tool_from_function_spec(tool)
    }

    fn generate_path(&self) -> &'static str {
        "/responses"
    }

    fn models_path(&self) -> &'static str {
        "/models"
    }

    fn final_event(&self) -> &'static str {
        "response.completed"
    }

    fn key_header(&self) -> HeaderName {
        header::AUTHORIZATION
    }

    fn key_text(&self, key: &str) -> String {
        format!("Bearer {key}")
    }

    fn decode_answer(&self, body: &Value) -> Option<Message> {
        let mut message = responses::decode_response(body).ok()?.message;
        if message.meta.usage.is_none() {
            message.meta.usage = body.get("usage").map(responses_usage);
        }
        Some(message)
    }

    fn strip_skald_calls(&self, answer: &mut Value, skald: &SkaldTools) {
        if let Some(Value::Array(items)) = answer.get_mut("output") {
            items.retain(|item| {
                let is_call = item.get("type").and_then(Value::as_str) == Some("function_call");
                let name = item.get("name").and_then(Value::as_str);
                !(is_call && name.is_some_and(|name| skald.contains(name)))
            });
        }
    }

    fn error_event(&self, message: &str) -> Vec<Bytes> {
        vec![write_event(
            Some("response.failed"),
            &json!({"type": "response.failed", "response": {
                "object": "response", "status": "failed", "output": [],
                "error": {"code": "server_error", "message": message}}})
            .to_string(),
        )]
    }

    fn client_session(&self, headers: &HeaderMap, body: &Value) -> Option<(&'static str, String)> {
        openai_client_session(headers, body)
    }

    /// `store` is on unless the client turned it off.
    fn records_answer(&self, body: &Value) -> bool {
        body.get("store") != Some(&Value::Bool(false))
    }

    fn previous_response_id(&self, body: &Value) -> Option<String> {
        body.get("previous_response_id")
            .and_then(Value::as_str)
            .map(str::to_owned)
    }

    fn on_stream_event(&self, rewriter: &mut StreamRewriter, event: SseEvent) -> Option<Bytes> {
        rewriter.on_responses(event)
    }

    fn finish_held_event(&self, rewriter: &mut StreamRewriter, data: &mut Value) {
        rewriter.finish_responses(data);
    }
}

impl StreamRewriter {
    pub(in crate::proxy) fn on_responses(&mut self, event: SseEvent) -> Option<Bytes> {
        let Ok(Value::Object(data)) = serde_json::from_str::<Value>(&event.data) else {
            return Some(event.raw);
        };
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match kind.as_str() {
            "response.created" | "response.in_progress" => {
                if self.round > 0 {
                    return None;
                }
                if let Some(id) = data
                    .get("response")
                    .and_then(|response| response.get("id"))
                    .and_then(Value::as_str)
                {
                    self.first_id.get_or_insert_with(|| id.to_owned());
                }
                self.emit_responses(event, data, false)
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                // `response.failed` is the API's own error event: the client gets it as sent.
                self.current.finished = kind != "response.failed";
                self.current.upstream_error = kind == "response.failed";
                if let Some(usage) = data
                    .get("response")
                    .and_then(|response| response.get("usage"))
                {
                    self.current.usage = Some(responses_usage(usage));
                }
                self.held_tail.push(Held::Json {
                    event: event.event,
                    data: Value::Object(data),
                });
                None
            }
            "response.output_item.added" => {
                let upstream = output_index(&data);
                let item = data.get("item");
                let is_call = item
                    .and_then(|item| item.get("type"))
                    .and_then(Value::as_str)
                    == Some("function_call");
                let name = item
                    .and_then(|item| item.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let slot = if is_call && self.skald.contains(name) {
                    let text = |key: &str| {
                        item.and_then(|item| item.get(key))
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    self.held_calls.push(HeldCall {
                        id: text("call_id"),
                        name: name.to_owned(),
                        arguments: text("arguments"),
                    });
                    Slot::Skald(self.held_calls.len() - 1)
                } else {
                    let index = self.next_index;
                    self.next_index += 1;
                    if is_call {
                        self.current.client_calls += 1;
                        Slot::Client(index)
                    } else {
                        Slot::Other(index)
                    }
                };
                self.slots.insert(upstream, slot);
                self.item_event(event, data, upstream)
            }
            "response.function_call_arguments.done" | "response.output_item.done" => {
                let upstream = output_index(&data);
                if let Some(Slot::Skald(at)) = self.slots.get(&upstream).copied() {
                    let arguments = data
                        .get("arguments")
                        .or_else(|| data.get("item").and_then(|item| item.get("arguments")))
                        .and_then(Value::as_str);
                    if let (Some(held), Some(arguments)) = (self.held_calls.get_mut(at), arguments)
                    {
                        held.arguments = arguments.to_owned();
                    }
                    return None;
                }
                if kind == "response.output_item.done" {
                    if let Some(item) = data.get("item") {
                        self.keep_item(item);
                    }
                }
                self.item_event(event, data, upstream)
            }
            "response.function_call_arguments.delta" => {
                let upstream = output_index(&data);
                if let Some(Slot::Skald(at)) = self.slots.get(&upstream).copied() {
                    let delta = data.get("delta").and_then(Value::as_str);
                    if let (Some(held), Some(delta)) = (self.held_calls.get_mut(at), delta) {
                        held.arguments.push_str(delta);
                    }
                    return None;
                }
                self.item_event(event, data, upstream)
            }
            "error" => {
                self.current.upstream_error = true;
                self.emit_responses(event, data, false)
            }
            _ if data.contains_key("output_index") => {
                let upstream = output_index(&data);
                self.item_event(event, data, upstream)
            }
            _ => self.emit_responses(event, data, false),
        }
    }

    /// An event about one output item: dropped when the item is skald's, else under the
    /// client's index.
    fn item_event(
        &mut self,
        event: SseEvent,
        mut data: Map<String, Value>,
        upstream: u64,
    ) -> Option<Bytes> {
        let index = match self.slots.get(&upstream).copied() {
            Some(Slot::Skald(_)) => return None,
            Some(Slot::Client(index) | Slot::Other(index)) => index,
            None => upstream,
        };
        let changed = data.get("output_index").and_then(Value::as_u64) != Some(index);
        if changed {
            data.insert("output_index".to_owned(), Value::from(index));
        }
        self.emit_responses(event, data, changed)
    }

    /// Sends an event with the next sequence number (rewritten only when it is not already).
    fn emit_responses(
        &mut self,
        event: SseEvent,
        mut data: Map<String, Value>,
        mut changed: bool,
    ) -> Option<Bytes> {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        if data.contains_key("sequence_number")
            && data.get("sequence_number").and_then(Value::as_u64) != Some(sequence)
        {
            data.insert("sequence_number".to_owned(), Value::from(sequence));
            changed = true;
        }
        if !changed {
            return Some(event.raw);
        }
        Some(write_event(
            event.event.as_deref(),
            &Value::Object(data).to_string(),
        ))
    }

    /// A finished item the client sees: in the closing event's `output`, and (reasoning, text)
    /// in the round's content for the hidden turn.
    fn keep_item(&mut self, item: &Value) {
        self.client_items.push(item.clone());
        match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => self.current.content.push(Block::Opaque(item.clone())),
            Some("message") => {
                let text: String = item
                    .get("content")
                    .and_then(Value::as_array)
                    .map(|parts| {
                        parts
                            .iter()
                            .filter_map(|part| part.get("text").and_then(Value::as_str))
                            .collect()
                    })
                    .unwrap_or_default();
                if !text.is_empty() {
                    self.current.content.push(Block::text(text));
                }
            }
            _ => {}
        }
    }

    /// The closing event the client gets: the first call's id, every item it saw, the next
    /// sequence number.
    pub(in crate::proxy) fn finish_responses(&mut self, data: &mut Value) {
        if let Some(response) = data.get_mut("response").and_then(Value::as_object_mut) {
            if let Some(first) = &self.first_id {
                response.insert("id".to_owned(), Value::String(first.clone()));
            }
            response.insert(
                "output".to_owned(),
                Value::Array(std::mem::take(&mut self.client_items)),
            );
            self.final_response = Some(Value::Object(response.clone()));
        }
        if let Some(data) = data.as_object_mut() {
            if data.contains_key("sequence_number") {
                data.insert(
                    "sequence_number".to_owned(),
                    Value::from(self.next_sequence),
                );
            }
        }
        self.next_sequence += 1;
    }
}

fn output_index(data: &Map<String, Value>) -> u64 {
    data.get("output_index")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// Responses usage: `input_tokens` counts cached tokens too.
pub fn responses_usage(usage: &Value) -> Usage {
    let count = |value: Option<&Value>| value.and_then(Value::as_u64).unwrap_or(0);
    let input = count(usage.get("input_tokens"));
    let cached = count(usage.pointer("/input_tokens_details/cached_tokens"));
    Usage {
        input: input.saturating_sub(cached),
        output: count(usage.get("output_tokens")),
        cache_read: cached,
        cache_write: 0,
        cache_write_1h: 0,
    }
}
