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
use serde_json::{Value, json};
use skald_core::message::{Block, Extra, ThinkingBlock, ToolCall, Usage};

use super::sse::{SseEvent, write_event};
use super::wire::Api;
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
pub(in crate::proxy) enum SeenBlock {
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
    pub(in crate::proxy) fn start(block: Option<&Value>) -> SeenBlock {
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

    pub(in crate::proxy) fn delta(&mut self, delta: &Value) {
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
pub(in crate::proxy) struct HeldCall {
    pub(in crate::proxy) id: String,
    pub(in crate::proxy) name: String,
    pub(in crate::proxy) arguments: String,
}

impl HeldCall {
    pub(in crate::proxy) fn into_call(self) -> ToolCall {
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
            extra: skald_core::message::Extra::new(),
        }
    }
}

/// Where an upstream tool call (OpenAI) or content block (Anthropic) goes.
#[derive(Debug, Clone, Copy)]
pub(in crate::proxy) enum Slot {
    /// Held back: the index in the round's held calls.
    Skald(usize),
    /// Sent to the client under this index.
    Client(u64),
    /// Sent unchanged (a content block that is not a tool call, OpenAI only never uses it).
    Other(u64),
}

/// An end-of-answer event held back.
#[derive(Debug, Clone)]
pub(in crate::proxy) enum Held {
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
    pub(in crate::proxy) api: Api,
    pub(in crate::proxy) skald: SkaldTools,
    pub(in crate::proxy) round: u32,
    /// OpenAI: the first chunk's id, which every later chunk takes.
    pub(in crate::proxy) first_id: Option<String>,
    /// The next index the client sees (OpenAI: tool calls; Anthropic: content blocks).
    pub(in crate::proxy) next_index: u64,
    /// Client tool calls over the whole stream.
    pub(in crate::proxy) client_calls_total: usize,
    pub(in crate::proxy) slots: HashMap<u64, Slot>,
    pub(in crate::proxy) held_calls: Vec<HeldCall>,
    pub(in crate::proxy) held_tail: Vec<Held>,
    pub(in crate::proxy) current: Round,
    /// Anthropic: the blocks of this round the client sees, by upstream index, in order.
    pub(in crate::proxy) seen: Vec<(u64, SeenBlock)>,
    /// OpenAI: the text this round sent.
    pub(in crate::proxy) round_text: String,
    /// The last character of text the client got, over the whole stream.
    pub(in crate::proxy) last_text_char: Option<char>,
    /// Responses: the items the client saw, over the whole stream (the closing event's
    /// `output`).
    pub(in crate::proxy) client_items: Vec<Value>,
    /// Responses: the next event's `sequence_number`.
    pub(in crate::proxy) next_sequence: u64,
    /// Responses: the response the client got in the closing event, once released.
    pub(in crate::proxy) final_response: Option<Value>,
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
        let api = self.api;
        api.on_stream_event(self, event)
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
        let api = self.api;
        let held: Vec<Held> = self.held_tail.drain(..).collect();
        held.into_iter()
            .map(|held| match held {
                Held::Raw(raw) => raw,
                Held::Json { event, mut data } => {
                    if no_client_calls {
                        fix_stop_reason(&mut data);
                    }
                    api.finish_held_event(self, &mut data);
                    write_event(event.as_deref(), &data.to_string())
                }
            })
            .collect()
    }
}

/// A held end whose stop reason asks for tools the client never got asks for nothing.
pub(in crate::proxy) fn fix_stop_reason(data: &mut Value) {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::super::sse::SseSplitter;
    use super::super::wire::{CHAT, MESSAGES};
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
        let mut rewriter = StreamRewriter::new(CHAT);
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
        let mut rewriter = StreamRewriter::new(CHAT);
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
        let mut rewriter = StreamRewriter::new(CHAT);
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
        let mut rewriter = StreamRewriter::new(MESSAGES);
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
