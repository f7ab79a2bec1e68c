//! The neutral message model: one representation of an agent conversation that every supported
//! wire and transcript format maps into without loss.
//!
//! Design rules this module owns:
//! - **Typed where skald decides, opaque where it does not.** Roles, blocks, tool calls and results,
//!   usage and stop reasons are typed, because pipeline stages act on them. Everything else a format
//!   carries lives in an `extra` map (`Extra`) on the message or block and is written back unchanged.
//! - **Form hints make round trips exact.** Where a format allows two spellings of the same thing
//!   (content as a string or as a list of parts, a system prompt at top level or as a message,
//!   arguments as a JSON string or an object), the decoder records which one it saw in a hint field
//!   so the encoder writes the same spelling back.
//! - **Tool results are blocks.** A [`Role::ToolResult`] message carries one or more
//!   [`Block::ToolResult`] blocks (OpenAI and OpenClaw: one per message; Anthropic and Claude Code:
//!   all results of a turn in one user message, possibly followed by text). Stages that look for
//!   tool output therefore only ever walk blocks.
//! - **`details` never reaches a model.** [`ToolResult::details`] is host-only data; token counting,
//!   summarising and provider encoders skip it.

mod shared;

use serde_json::Value;

pub use shared::{Content, Extra, Shared};

/// `Extra` keys that start with this prefix are notes a decoder leaves for its own encoder (the
/// origin format, the spelling of a role). No encoder ever writes them out.
pub const HINT_PREFIX: &str = "skald:";

/// True for an `Extra` key that is a codec hint rather than a field of the format.
pub fn is_hint_key(key: &str) -> bool {
    key.starts_with(HINT_PREFIX)
}

/// Who speaks in a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Instructions to the model (OpenAI `system`/`developer`, Anthropic top-level `system`).
    System,
    /// The human, or the harness speaking for them.
    User,
    /// The model.
    Assistant,
    /// Results of tool calls, as [`Block::ToolResult`] blocks.
    ToolResult,
    /// Host entries outside the model's four roles (OpenClaw `custom`, `bashExecution`,
    /// `compactionSummary`, Claude Code compact boundaries…). The string is the host's own type name.
    Custom(String),
}

impl Role {
    /// A short, stable name for reports and tables.
    pub fn name(&self) -> &str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::ToolResult => "tool_result",
            Role::Custom(name) => name,
        }
    }
}

/// Why the model stopped producing a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// Natural end of the turn (`stop`, `end_turn`, `stop_sequence`).
    EndTurn,
    /// The output limit was hit (`length`, `max_tokens`).
    MaxTokens,
    /// The model asked for tools (`tool_calls`, `tool_use`, `toolUse`).
    ToolUse,
    /// The provider call failed; the message may be empty.
    Error,
    /// The caller aborted the call.
    Aborted,
    /// A reason this model has no name for, kept as written.
    Other(String),
}

impl StopReason {
    /// Maps the spellings used by OpenAI, Anthropic and pi/OpenClaw to a reason.
    pub fn parse(raw: &str) -> StopReason {
        match raw {
            "stop" | "end_turn" | "stop_sequence" => StopReason::EndTurn,
            "length" | "max_tokens" => StopReason::MaxTokens,
            "tool_calls" | "tool_use" | "toolUse" | "function_call" => StopReason::ToolUse,
            "error" => StopReason::Error,
            "aborted" => StopReason::Aborted,
            other => StopReason::Other(other.to_owned()),
        }
    }

    /// True for calls that did not complete: their tool calls are not expected to have results.
    pub fn is_incomplete(&self) -> bool {
        match self {
            StopReason::Error | StopReason::Aborted => true,
            StopReason::EndTurn
            | StopReason::MaxTokens
            | StopReason::ToolUse
            | StopReason::Other(_) => false,
        }
    }
}

/// Token usage a provider reported for the call that produced a message.
///
/// `input` counts only uncached input, as Anthropic reports it; OpenAI's `prompt_tokens` includes
/// cached tokens, so its decoder subtracts `cache_read` to keep one meaning across providers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens read without the cache (cache reads and writes are counted apart).
    pub input: u64,
    /// Tokens the model wrote, reasoning included where the provider counts it there.
    pub output: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the provider's prompt cache by this call.
    pub cache_write: u64,
    /// Of `cache_write`, the tokens written with a one-hour lifetime (Anthropic's
    /// `cache_creation.ephemeral_1h_input_tokens`), which cost more than five-minute writes.
    pub cache_write_1h: u64,
}

impl Usage {
    /// Everything the provider read for the request: uncached, cache reads and cache writes.
    pub fn total_input(&self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }
}

/// A point in time as a format wrote it: epoch milliseconds or an RFC 3339 string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timestamp {
    /// Milliseconds since the Unix epoch (pi, OpenClaw).
    Millis(i64),
    /// An RFC 3339 / ISO 8601 string, kept as written (Claude Code, session entries).
    Rfc3339(String),
}

impl Timestamp {
    /// Milliseconds since the Unix epoch, if the text parses.
    pub fn millis(&self) -> Option<i64> {
        match self {
            Timestamp::Millis(ms) => Some(*ms),
            Timestamp::Rfc3339(text) => crate::time::parse_rfc3339_millis(text),
        }
    }
}

/// How a format spelled a piece of content, so the encoder can spell it the same way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ContentForm {
    /// A list of typed parts or blocks.
    #[default]
    Blocks,
    /// A bare string (exactly one text block in the model).
    Text,
    /// JSON `null` (OpenAI assistant messages that only call tools).
    Null,
    /// The key was absent.
    Absent,
}

/// Where an image comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ImageSource {
    /// Inline bytes, base64-encoded.
    Base64 {
        /// The MIME type of the bytes (`image/png`…).
        media_type: String,
        /// The image bytes, base64-encoded.
        data: String,
    },
    /// A URL (including `data:` URLs, kept as written).
    Url {
        /// The address, exactly as the format wrote it.
        url: String,
    },
}

/// Text the model reads or wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct TextBlock {
    /// The text itself.
    pub text: String,
    /// Fields of the block the model does not interpret (`cache_control`, annotations…).
    pub extra: Extra,
}

/// An image input.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageBlock {
    /// Where the image's bytes are.
    pub source: ImageSource,
    /// Fields of the block the model does not interpret (`cache_control`, `detail`…).
    pub extra: Extra,
}

/// Model reasoning, with the provider's signature when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct ThinkingBlock {
    /// The reasoning text (empty when the provider sent only a signature).
    pub thinking: String,
    /// The provider's signature over the reasoning, which must come back unchanged for the
    /// provider to accept the thinking in a later request.
    pub signature: Option<String>,
    /// Fields of the block the model does not interpret.
    pub extra: Extra,
}

/// A request from the model to run a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call's id, which its result quotes (`call_id`, `tool_use_id`).
    pub id: String,
    /// The name of the tool to run.
    pub name: String,
    /// The arguments, parsed. A string that is not valid JSON is kept as `Value::String`.
    pub arguments: Value,
    /// The arguments exactly as a string-encoding format (OpenAI) sent them. Encoders write this
    /// text back when present; whoever changes `arguments` must clear it.
    pub arguments_text: Option<String>,
    /// Fields of the call the model does not interpret.
    pub extra: Extra,
}

/// The outcome of a tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The id of the [`ToolCall`] this result answers.
    pub call_id: String,
    /// The tool's name where the format records it (OpenClaw does; Anthropic and OpenAI do not).
    pub tool_name: Option<String>,
    /// What the tool returned, as text and image blocks (shared between clones until one writes,
    /// so a message that carries a long result can be rewritten without copying it).
    pub content: Content,
    /// How the format spelled `content` (a bare string or a list of parts).
    pub content_form: ContentForm,
    /// `None` when the format left the flag out.
    pub is_error: Option<bool>,
    /// Host-only data (OpenClaw `details`, Claude Code `toolUseResult`). Never shown to a model or
    /// a summarizer, never counted. Shared between clones: it can hold a whole file (Claude Code's
    /// `Read`), and a stage that rewrites a result copies the result, not this.
    pub details: Option<std::sync::Arc<Value>>,
    /// Fields of the result the model does not interpret.
    pub extra: Extra,
}

impl ToolResult {
    /// True when the tool reported failure.
    pub fn failed(&self) -> bool {
        self.is_error == Some(true)
    }

    /// Total characters of the result's text blocks.
    pub fn text_chars(&self) -> usize {
        self.content
            .iter()
            .filter_map(Block::as_text)
            .map(|text| text.text.chars().count())
            .sum()
    }
}

/// The text blocks of `blocks`, joined by newlines (images, calls and nested results skipped).
pub fn join_text(blocks: &[Block]) -> String {
    let mut out = String::new();
    for text in blocks.iter().filter_map(Block::as_text) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&text.text);
    }
    out
}

/// One piece of a message's content.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Text the model reads or wrote.
    Text(TextBlock),
    /// An image input.
    Image(ImageBlock),
    /// Model reasoning.
    Thinking(ThinkingBlock),
    /// A tool call the model made (assistant messages).
    ToolCall(ToolCall),
    /// The outcome of a tool call ([`Role::ToolResult`] messages, or Anthropic user messages).
    ToolResult(ToolResult),
    /// A block of a type skald does not model (Anthropic `redacted_thinking`, `document`, server
    /// tool blocks…), kept verbatim.
    Opaque(Value),
}

impl Block {
    /// A plain text block with no extra fields.
    pub fn text(text: impl Into<String>) -> Block {
        Block::Text(TextBlock {
            text: text.into(),
            extra: Extra::new(),
        })
    }

    // The accessors below match every variant by name (the workspace denies wildcard arms on its
    // own enums), so callers that want one kind of block need not write the whole list out.

    /// The text block, if this is one.
    pub fn as_text(&self) -> Option<&TextBlock> {
        match self {
            Block::Text(text) => Some(text),
            Block::Image(_)
            | Block::Thinking(_)
            | Block::ToolCall(_)
            | Block::ToolResult(_)
            | Block::Opaque(_) => None,
        }
    }

    /// The text block, mutably, if this is one.
    pub fn as_text_mut(&mut self) -> Option<&mut TextBlock> {
        match self {
            Block::Text(text) => Some(text),
            Block::Image(_)
            | Block::Thinking(_)
            | Block::ToolCall(_)
            | Block::ToolResult(_)
            | Block::Opaque(_) => None,
        }
    }

    /// The tool call, if this block is one.
    pub fn as_tool_call(&self) -> Option<&ToolCall> {
        match self {
            Block::ToolCall(call) => Some(call),
            Block::Text(_)
            | Block::Image(_)
            | Block::Thinking(_)
            | Block::ToolResult(_)
            | Block::Opaque(_) => None,
        }
    }

    /// The tool call, mutably, if this block is one.
    pub fn as_tool_call_mut(&mut self) -> Option<&mut ToolCall> {
        match self {
            Block::ToolCall(call) => Some(call),
            Block::Text(_)
            | Block::Image(_)
            | Block::Thinking(_)
            | Block::ToolResult(_)
            | Block::Opaque(_) => None,
        }
    }

    /// The tool result, if this block is one.
    pub fn as_tool_result(&self) -> Option<&ToolResult> {
        match self {
            Block::ToolResult(result) => Some(result),
            Block::Text(_)
            | Block::Image(_)
            | Block::Thinking(_)
            | Block::ToolCall(_)
            | Block::Opaque(_) => None,
        }
    }

    /// The tool result, mutably, if this block is one.
    pub fn as_tool_result_mut(&mut self) -> Option<&mut ToolResult> {
        match self {
            Block::ToolResult(result) => Some(result),
            Block::Text(_)
            | Block::Image(_)
            | Block::Thinking(_)
            | Block::ToolCall(_)
            | Block::Opaque(_) => None,
        }
    }
}

/// Per-message facts that are not content.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageMeta {
    /// The format's own id for the message or entry (OpenClaw entry id, Claude Code uuid,
    /// provider response id).
    pub id: Option<String>,
    /// Why the model stopped, on assistant messages the provider annotated.
    pub stop_reason: Option<StopReason>,
    /// Tokens the call that produced this message used, as the provider reported them.
    pub usage: Option<Usage>,
    /// When the message was written, in the format's own spelling.
    pub timestamp: Option<Timestamp>,
    /// The model that wrote the message.
    pub model: Option<String>,
    /// The provider that served the model (pi's `provider`, `anthropic`, `openai`…).
    pub provider: Option<String>,
    /// What skald's pipeline did on the request that produced this answer (set by skald when
    /// it assembled that request; stored as `skaldAssemble`, absent otherwise).
    pub assemble: Option<Box<crate::assemble_record::AssembleRecord>>,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What the message says, in order (shared between clones until one writes: [`Content`]).
    pub content: Content,
    /// Facts about the message that are not content (id, usage, stop reason, time).
    pub meta: MessageMeta,
    /// How the format spelled `content`.
    pub content_form: ContentForm,
    /// Fields of the message (and, for envelope formats, of the envelope) skald does not interpret.
    pub extra: Extra,
}

impl Message {
    /// A message with the given role and blocks and nothing else.
    pub fn new(role: Role, content: Vec<Block>) -> Message {
        Message {
            role,
            content: Content::from(content),
            meta: MessageMeta::default(),
            content_form: ContentForm::Blocks,
            extra: Extra::new(),
        }
    }

    /// A message whose content is one text block, spelled as a bare string.
    pub fn text(role: Role, text: impl Into<String>) -> Message {
        Message {
            content_form: ContentForm::Text,
            ..Message::new(role, vec![Block::text(text)])
        }
    }

    /// The tool calls in this message, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(Block::as_tool_call)
    }

    /// The tool results in this message, in order.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.content.iter().filter_map(Block::as_tool_result)
    }

    /// The concatenated text blocks of the message (not of nested tool results).
    pub fn plain_text(&self) -> String {
        join_text(&self.content)
    }

    /// True when the message is part of what a model sees (custom host entries are not).
    pub fn is_model_visible(&self) -> bool {
        match self.role {
            Role::System | Role::User | Role::Assistant | Role::ToolResult => true,
            Role::Custom(_) => false,
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls the tool by.
    pub name: String,
    /// What the tool does, as the model is told.
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    /// Fields of the definition skald does not interpret (`cache_control`, `strict`, `type`…).
    pub extra: Extra,
}

/// A conversation as a model request sees it: messages plus the tools on offer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    /// The messages, in order (system messages included, in place).
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// The model the request or transcript names, if any.
    pub model: Option<String>,
    /// Top-level fields of the request or transcript skald does not interpret.
    pub extra: Extra,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_reason_spellings_map_to_one_meaning() {
        assert_eq!(StopReason::parse("end_turn"), StopReason::EndTurn);
        assert_eq!(StopReason::parse("stop"), StopReason::EndTurn);
        assert_eq!(StopReason::parse("tool_calls"), StopReason::ToolUse);
        assert_eq!(StopReason::parse("toolUse"), StopReason::ToolUse);
        assert_eq!(StopReason::parse("length"), StopReason::MaxTokens);
        assert!(StopReason::parse("aborted").is_incomplete());
        assert!(!StopReason::parse("refusal").is_incomplete());
    }

    #[test]
    fn usage_total_input_counts_cache() {
        let usage = Usage {
            input: 3,
            output: 10,
            cache_read: 100,
            cache_write: 20,
            cache_write_1h: 0,
        };
        assert_eq!(usage.total_input(), 123);
    }

    #[test]
    fn custom_messages_are_not_model_visible() {
        let custom = Message::text(Role::Custom("note".into()), "host only");
        assert!(!custom.is_model_visible());
        assert!(Message::text(Role::User, "hi").is_model_visible());
    }
}
