//! The client's view of a streamed answer that may span several upstream calls. Events pass
//! through as they arrive, untouched when skald has nothing to change; what skald changes:
//!
//! - the deltas of skald's own tool calls are held back (never sent) and collected, so the
//!   proxy can run the calls when the upstream stream ends;
//! - the end of an answer (OpenAI: the chunk with `finish_reason`, the usage chunk and
//!   `[DONE]`; Anthropic: `message_delta` and `message_stop`) is held back until skald knows
//!   whether it continues the answer with another upstream call;
//! - a continuation's events continue the same client stream: OpenAI chunks keep the first
//!   call's `id` and lose the repeated `role`, tool-call indexes stay dense; Anthropic's second
//!   `message_start` is dropped and content block indexes are renumbered, so the client sees one
//!   `message_start` … `message_stop` sequence; an OpenAI continuation's text starts on a new
//!   paragraph when the text before the hidden round did not end one, so the two do not run
//!   together.
//!
//! It also keeps what each round said that the client saw (text, and Anthropic's thinking with
//! its signature): when skald continues the call, the hidden assistant turn it sends back must
//! carry that turn's thinking (Anthropic requires it with thinking enabled) and text.

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::{Map, Value, json};
use skald_core::message::{Block, Extra, ThinkingBlock, ToolCall, Usage};

mod responses;

pub use responses::responses_usage;

use super::sse::{SseEvent, write_event};
use super::upstream::Api;
use skald_engine::SkaldTools;

/// What one upstream call's stream held: skald's calls to run, and what the answer reported.
#[derive(Debug, Clone, Default)]
pub struct Round {
    pub skald_calls: Vec<ToolCall>,
    /// Tool calls of the client's own tools in this call's answer.
    pub client_calls: usize,
    pub usage: Option<Usage>,
    /// What the answer said besides tool calls, in order: text, thinking (with signature),
    /// redacted thinking (opaque).
    pub content: Vec<Block>,
    /// Whether the call's stream carried the API's final event (`[DONE]`, `message_stop`,
    /// `response.completed` or `response.incomplete`): without it the answer was cut off.
    pub finished: bool,
    /// Whether the upstream sent the API's own error event (`error`, `response.failed`).
    pub upstream_error: bool,
}

/// A content block of the answer being streamed that the client sees (Anthropic).
#[derive(Debug, Clone)]
enum SeenBlock {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    /// Kept as the upstream wrote it (`redacted_thinking`).
    Opaque(Value),
    /// A block the hidden turn does not need (the client's tool calls, server tools…).
    Other,
}

impl SeenBlock {
    fn start(block: Option<&Value>) -> SeenBlock {
        let Some(block) = block else {
            return SeenBlock::Other;
        };
        let text = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        match block.get("type").and_then(Value::as_str) {
            Some("text") => SeenBlock::Text(text("text")),
            Some("thinking") => SeenBlock::Thinking {
                thinking: text("thinking"),
                signature: text("signature"),
            },
            Some("redacted_thinking") => SeenBlock::Opaque(block.clone()),
            _ => SeenBlock::Other,
        }
    }

    fn delta(&mut self, delta: &Value) {
        let piece = |key: &str| delta.get(key).and_then(Value::as_str);
        match self {
            SeenBlock::Text(text) => {
                if let Some(more) = piece("text") {
                    text.push_str(more);
                }
            }
            SeenBlock::Thinking {
                thinking,
                signature,
            } => {
                if let Some(more) = piece("thinking") {
                    thinking.push_str(more);
                }
                if let Some(more) = piece("signature") {
                    signature.push_str(more);
                }
            }
            SeenBlock::Opaque(_) | SeenBlock::Other => {}
        }
    }

    fn into_block(self) -> Option<Block> {
        match self {
            SeenBlock::Text(text) if !text.is_empty() => Some(Block::text(text)),
            SeenBlock::Thinking {
                thinking,
                signature,
            } => Some(Block::Thinking(ThinkingBlock {
                thinking,
                signature: (!signature.is_empty()).then_some(signature),
                extra: Extra::new(),
            })),
            SeenBlock::Opaque(value) => Some(Block::Opaque(value)),
            SeenBlock::Text(_) | SeenBlock::Other => None,
        }
    }
}

/// A skald tool call being streamed.
#[derive(Debug, Clone, Default)]
struct HeldCall {
    id: String,
    name: String,
    arguments: String,
}

impl HeldCall {
    fn into_call(self) -> ToolCall {
        let arguments = if self.arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(&self.arguments).unwrap_or(Value::String(self.arguments.clone()))
        };
        ToolCall {
            id: self.id,
            name: self.name,
            arguments,
            arguments_text: Some(self.arguments),
            extra: Map::new(),
        }
    }
}

/// Where an upstream tool call (OpenAI) or content block (Anthropic) goes.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// Held back: the index in the round's held calls.
    Skald(usize),
    /// Sent to the client under this index.
    Client(u64),
    /// Sent unchanged (a content block that is not a tool call, OpenAI only never uses it).
    Other(u64),
}

/// An end-of-answer event held back.
#[derive(Debug, Clone)]
enum Held {
    Raw(Bytes),
    /// A JSON event the release may still edit (its stop reason).
    Json {
        event: Option<String>,
        data: Value,
    },
}

/// The rewriting state of one client stream.
#[derive(Debug)]
pub struct StreamRewriter {
    api: Api,
    skald: SkaldTools,
    round: u32,
    /// OpenAI: the first chunk's id, which every later chunk takes.
    first_id: Option<String>,
    /// The next index the client sees (OpenAI: tool calls; Anthropic: content blocks).
    next_index: u64,
    /// Client tool calls over the whole stream.
    client_calls_total: usize,
    slots: HashMap<u64, Slot>,
    held_calls: Vec<HeldCall>,
    held_tail: Vec<Held>,
    current: Round,
    /// Anthropic: the blocks of this round the client sees, by upstream index, in order.
    seen: Vec<(u64, SeenBlock)>,
    /// OpenAI: the text this round sent.
    round_text: String,
    /// The last character of text the client got, over the whole stream.
    last_text_char: Option<char>,
    /// Responses: the items the client saw, over the whole stream (the closing event's
    /// `output`).
    client_items: Vec<Value>,
    /// Responses: the next event's `sequence_number`.
    next_sequence: u64,
    /// Responses: the response the client got in the closing event, once released.
    final_response: Option<Value>,
}

impl StreamRewriter {
    pub fn new(api: Api) -> StreamRewriter {
        StreamRewriter {
            api,
            skald: SkaldTools::default(),
            round: 0,
            first_id: None,
            next_index: 0,
            client_calls_total: 0,
            slots: HashMap::new(),
            held_calls: Vec::new(),
            held_tail: Vec::new(),
            current: Round::default(),
            seen: Vec::new(),
            round_text: String::new(),
            last_text_char: None,
            client_items: Vec::new(),
            next_sequence: 0,
            final_response: None,
        }
    }

    /// Starts reading one upstream call's stream; `skald` are the tools that call offered.
    pub fn start_round(&mut self, skald: SkaldTools) {
        self.skald = skald;
        self.slots.clear();
        self.held_calls.clear();
        self.held_tail.clear();
        self.current = Round::default();
        self.seen.clear();
        self.round_text.clear();
    }

    /// The bytes to send the client now for one upstream event.
    pub fn on_event(&mut self, event: SseEvent) -> Option<Bytes> {
        match self.api {
            Api::OpenAi => self.on_openai(event),
            Api::Anthropic => self.on_anthropic(event),
            Api::Responses => self.on_responses(event),
        }
    }

    /// The upstream call's stream ended: what it held.
    pub fn end_round(&mut self) -> Round {
        let mut round = std::mem::take(&mut self.current);
        round.skald_calls = self.held_calls.drain(..).map(HeldCall::into_call).collect();
        round.content.extend(
            self.seen
                .drain(..)
                .filter_map(|(_, block)| block.into_block()),
        );
        let text = std::mem::take(&mut self.round_text);
        if !text.is_empty() {
            round.content.push(Block::text(text));
        }
        self.client_calls_total += round.client_calls;
        self.round += 1;
        round
    }

    /// Responses: the whole response the client got (its id, every item it saw), once
    /// [`StreamRewriter::release_held`] released it.
    pub fn final_response(&self) -> Option<&Value> {
        self.final_response.as_ref()
    }

    /// The answer is over: the end-of-answer events held back, with a stop reason that no
    /// longer asks for tools when the client got no tool call at all.
    pub fn release_held(&mut self) -> Vec<Bytes> {
        let no_client_calls = self.client_calls_total == 0;
        let held: Vec<Held> = self.held_tail.drain(..).collect();
        held.into_iter()
            .map(|held| match held {
                Held::Raw(raw) => raw,
                Held::Json { event, mut data } => {
                    if no_client_calls {
                        fix_stop_reason(&mut data);
                    }
                    if self.api == Api::Responses {
                        self.finish_responses(&mut data);
                    }
                    write_event(event.as_deref(), &data.to_string())
                }
            })
            .collect()
    }

    fn on_openai(&mut self, event: SseEvent) -> Option<Bytes> {
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

    fn on_anthropic(&mut self, event: SseEvent) -> Option<Bytes> {
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

/// A held end whose stop reason asks for tools the client never got asks for nothing.
fn fix_stop_reason(data: &mut Value) {
    if let Some(Value::Array(choices)) = data.get_mut("choices") {
        for choice in choices {
            if let Some(reason) = choice.get_mut("finish_reason") {
                if reason == "tool_calls" {
                    *reason = Value::String("stop".to_owned());
                }
            }
        }
    }
    if let Some(reason) = data
        .get_mut("delta")
        .and_then(|delta| delta.get_mut("stop_reason"))
    {
        if reason == "tool_use" {
            *reason = Value::String("end_turn".to_owned());
        }
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

/// Anthropic usage; `output` overrides the object's own output count.
pub fn anthropic_usage(usage: &Value, output: Option<u64>) -> Usage {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input: count("input_tokens"),
        output: output.unwrap_or_else(|| count("output_tokens")),
        cache_read: count("cache_read_input_tokens"),
        cache_write: count("cache_creation_input_tokens"),
        cache_write_1h: 0,
    }
}

/// An error event in the API's stream format, for a failure after the answer started.
pub fn error_event(api: Api, message: &str) -> Vec<Bytes> {
    match api {
        Api::OpenAi => vec![
            write_event(
                None,
                &json!({"error": {"message": message, "type": "upstream_error"}}).to_string(),
            ),
            write_event(None, "[DONE]"),
        ],
        Api::Responses => vec![write_event(
            Some("response.failed"),
            &json!({"type": "response.failed", "response": {
                "object": "response", "status": "failed", "output": [],
                "error": {"code": "server_error", "message": message}}})
            .to_string(),
        )],
        Api::Anthropic => vec![write_event(
            Some("error"),
            &json!({"type": "error", "error": {"type": "api_error", "message": message}})
                .to_string(),
        )],
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::super::sse::SseSplitter;
    use super::*;

    fn events(text: &str) -> Vec<SseEvent> {
        SseSplitter::default().push(text.as_bytes())
    }

    fn run(rewriter: &mut StreamRewriter, text: &str) -> String {
        let mut out = String::new();
        for event in events(text) {
            if let Some(bytes) = rewriter.on_event(event) {
                out.push_str(std::str::from_utf8(&bytes).unwrap());
            }
        }
        out
    }

    fn skald() -> SkaldTools {
        SkaldTools::new(["fetch_original_data".to_owned()])
    }

    #[test]
    fn openai_text_passes_byte_for_byte_and_the_end_waits() {
        let mut rewriter = StreamRewriter::new(Api::OpenAi);
        rewriter.start_round(skald());
        let text = "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n\
                    data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
                    data: [DONE]\n\n";
        let out = run(&mut rewriter, text);
        assert_eq!(
            out,
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n"
        );
        let round = rewriter.end_round();
        assert!(round.skald_calls.is_empty());
        let tail: Vec<String> = rewriter
            .release_held()
            .iter()
            .map(|bytes| String::from_utf8(bytes.to_vec()).unwrap())
            .collect();
        assert_eq!(tail.len(), 2);
        assert!(tail[0].contains("\"finish_reason\":\"stop\""));
        assert_eq!(tail[1], "data: [DONE]\n\n");
    }

    #[test]
    fn openai_skald_calls_are_held_and_client_calls_renumbered() {
        let mut rewriter = StreamRewriter::new(Api::OpenAi);
        rewriter.start_round(skald());
        let text = "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"f1\",\"type\":\"function\",\"function\":{\"name\":\"fetch_original_data\",\"arguments\":\"\"}}]}}]}\n\n\
                    data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"ids\\\":[]}\"}}]}}]}\n\n\
                    data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"b1\",\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"{}\"}}]}}]}\n\n\
                    data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n";
        let out = run(&mut rewriter, text);
        assert!(!out.contains("fetch_original_data"), "{out}");
        assert!(out.contains("\"index\":0,\"id\":\"b1\""), "{out}");
        let round = rewriter.end_round();
        assert_eq!(round.skald_calls.len(), 1);
        assert_eq!(round.skald_calls[0].id, "f1");
        assert_eq!(round.skald_calls[0].arguments, json!({"ids": []}));
        assert_eq!(round.client_calls, 1);
    }

    #[test]
    fn openai_continuations_keep_the_first_id_and_drop_the_role() {
        let mut rewriter = StreamRewriter::new(Api::OpenAi);
        rewriter.start_round(skald());
        run(
            &mut rewriter,
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        );
        rewriter.end_round();
        rewriter.start_round(skald());
        let out = run(
            &mut rewriter,
            "data: {\"id\":\"c2\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"}}]}\n\n",
        );
        assert_eq!(
            out,
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n"
        );
    }

    #[test]
    fn anthropic_skald_blocks_are_held_and_indexes_continue_across_calls() {
        let mut rewriter = StreamRewriter::new(Api::Anthropic);
        rewriter.start_round(skald());
        let first = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"model\":\"claude\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n\
                     event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
                     event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Looking\"}}\n\n\
                     event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
                     event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"fetch_original_data\",\"input\":{}}}\n\n\
                     event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"ids\\\": [\\\"x\\\"]}\"}}\n\n\
                     event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
                     event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":7}}\n\n\
                     event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
        let out = run(&mut rewriter, first);
        assert!(out.contains("message_start"));
        assert!(out.contains("Looking"));
        assert!(!out.contains("tool_use"), "{out}");
        assert!(!out.contains("message_stop"), "{out}");
        let round = rewriter.end_round();
        assert_eq!(round.skald_calls[0].arguments, json!({"ids": ["x"]}));
        assert_eq!(round.usage.unwrap().input, 10);
        assert_eq!(round.usage.unwrap().output, 7);

        rewriter.start_round(skald());
        let second = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m2\",\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}\n\n\
                      event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
                      event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n\
                      event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
        let out = run(&mut rewriter, second);
        assert!(!out.contains("message_start"), "{out}");
        assert!(out.contains("\"index\":1"), "{out}");
        rewriter.end_round();
        let tail: String = rewriter
            .release_held()
            .iter()
            .map(|bytes| String::from_utf8(bytes.to_vec()).unwrap())
            .collect();
        assert!(tail.contains("end_turn"));
        assert!(tail.contains("message_stop"));
    }
}
