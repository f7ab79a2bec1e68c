//! OpenAI Chat Completions wire format: request bodies (`model`, `messages`, `tools`) and
//! non-streaming responses (`choices[0].message`, `usage`), decoded into and encoded from the
//! neutral [`crate::message`] model.
//!
//! # Round trips
//! `encode_request(&decode_request(v)?)` equals `v` as a [`serde_json::Value`], and so does
//! `encode_response(&decode_response(v)?)`. Key order inside objects the codec rebuilds (messages,
//! parts, tool calls, tool definitions) is canonical rather than preserved: providers read JSON,
//! not its key order, and every value (schemas, arguments text, unknown fields) is kept verbatim.
//!
//! # Provenance
//! Fields skald does not interpret live in `extra` maps, but they only mean something in the
//! format they came from: an Anthropic `cache_control` or an OpenClaw entry field inside an
//! OpenAI request gets the request rejected. So the decoder marks the conversation and every
//! message it produces with `extra[ORIGIN_KEY] = "openai"`, and the encoder writes a message's
//! extra fields, its blocks' extra fields and its opaque blocks only under that mark (the
//! conversation's top-level fields and tool definitions likewise under the conversation's mark).
//! Anything else — messages from Anthropic, from transcripts, or built by skald — is written from
//! its typed parts alone, in a shape OpenAI accepts: tool results become one `tool` message each,
//! images they carry move to a `user` message after them, thinking is dropped, and a conversation
//! marked as Anthropic has its sampling parameters translated (`max_tokens`, `stop_sequences`,
//! `tool_choice`…). [`ToolResult::details`] is never written.
//!
//! # Hints
//! Keys that start with [`HINT_PREFIX`] are notes a decoder leaves for its encoder; no encoder
//! writes them out. This codec uses [`ROLE_HINT`] (`"developer"` or `"function"` on a
//! [`Role::System`] / [`Role::ToolResult`] message spelled that way) and private hints for fields of
//! nested objects the model flattens (the `function` object of a tool call, the outer object of an
//! `image_url` part or of a tool definition) and for legacy `function_call` tool calls.
//!
//! The parts, private (every item has one path: here): `decode` (JSON → model) and `encode`
//! (model → JSON). This file holds the hint keys, [`OpenAiError`], [`OpenAiResponse`] and the
//! origin-mark helpers the other wire codecs share.
//!
//! [`ToolResult::details`]: crate::message::ToolResult::details
//! [`Role::System`]: crate::message::Role::System
//! [`Role::ToolResult`]: crate::message::Role::ToolResult

mod decode;
mod encode;

use serde_json::{Map, Value};

use super::json::FieldError;
use crate::message::{Extra, Message};

pub(super) use decode::parse_arguments;
pub use decode::{decode_request, decode_request_str, decode_response, decode_response_str};
pub use encode::{arguments_text, encode_request, encode_response, finish_reason};

/// The `extra` key under which decoders record which wire format a message or conversation came
/// from. Encoders trust format-specific data only when the mark names their own format.
pub const ORIGIN_KEY: &str = "skald:origin";
pub use crate::message::HINT_PREFIX;
/// The [`ORIGIN_KEY`] value this codec writes.
pub const ORIGIN: &str = "openai";
/// On a message's `extra`: the role spelling when it was not the default for its [`Role`]
/// (`"developer"` for [`Role::System`], `"function"` for [`Role::ToolResult`]).
///
/// [`Role`]: crate::message::Role
/// [`Role::System`]: crate::message::Role::System
/// [`Role::ToolResult`]: crate::message::Role::ToolResult
pub const ROLE_HINT: &str = "skald:openai.role";

/// Unknown fields of a tool call's inner `function` object (the outer ones are the call's extra).
const FUNCTION_HINT: &str = "skald:openai.function";
/// Marks a tool call that was a legacy assistant `function_call` rather than a `tool_calls` entry.
const LEGACY_CALL_HINT: &str = "skald:openai.function_call";
/// Unknown fields of an `image_url` part's outer object (the inner ones are the image's extra).
const PART_HINT: &str = "skald:openai.part";
/// Unknown fields of a tool definition's outer object (the `function` ones are the spec's extra).
const TOOL_HINT: &str = "skald:openai.tool";

/// Marks a tool call or tool definition that had no `type` (it is `"function"` when written).
const UNTYPED_HINT: &str = "skald:openai.untyped";

/// Text put before images that came out of tool results, which OpenAI `tool` messages cannot hold.
const TOOL_IMAGES_LABEL: &str = "Attached image(s) from tool result:";
/// Content of a `tool` message whose result was only images.
const IMAGE_ONLY_RESULT: &str = "(see attached image)";

/// Why a value is not a valid Chat Completions request or response. Every variant but `Json`
/// names the field by its JSON path (`messages[2].tool_calls[0].function`, or `top level`).
#[derive(Debug, thiserror::Error)]
pub enum OpenAiError {
    /// The input is not JSON at all (the message carries line and column).
    #[error("not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A required field is absent.
    #[error("{path}: missing, expected {expected}")]
    Missing {
        /// The JSON path of the field, from the document's root (`messages[2].content[0].type`).
        path: String,
        /// What the format allows there.
        expected: &'static str,
    },
    /// A field has the wrong JSON type.
    #[error("{path}: expected {expected}, found {found}")]
    WrongType {
        /// The JSON path of the field, from the document's root (`messages[2].content[0].type`).
        path: String,
        /// What the format allows there.
        expected: &'static str,
        /// The JSON type that was there instead.
        found: &'static str,
    },
    /// A field has the right type but a value the format does not define.
    #[error("{path}: expected {expected}, found {found:?}")]
    UnknownValue {
        /// The JSON path of the field, from the document's root (`messages[2].content[0].type`).
        path: String,
        /// What the format allows there.
        expected: &'static str,
        /// The value that was there instead.
        found: String,
    },
}

impl OpenAiError {
    /// The JSON path of the offending field, when the error is about one.
    pub fn path(&self) -> Option<&str> {
        match self {
            OpenAiError::Json(_) => None,
            OpenAiError::Missing { path, .. }
            | OpenAiError::WrongType { path, .. }
            | OpenAiError::UnknownValue { path, .. } => Some(path),
        }
    }
}

impl From<FieldError> for OpenAiError {
    fn from(error: FieldError) -> Self {
        let FieldError {
            path,
            expected,
            found,
        } = error;
        match found {
            None => OpenAiError::Missing { path, expected },
            Some(found) => OpenAiError::WrongType {
                path,
                expected,
                found,
            },
        }
    }
}

/// A decoded response: its one message plus the envelope needed to write it back.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiResponse {
    /// `choices[0].message`, with `meta` filled from the envelope: `id`, `model`, `created`,
    /// `choices[0].finish_reason` and `usage`.
    pub message: Message,
    /// The response object as received, with `choices[0].message` set to `null`. Other choices,
    /// `logprobs`, `system_fingerprint` and the like stay here. The encoder puts the message back
    /// and overwrites the fields `meta` describes only where `meta` says something else.
    pub envelope: Map<String, Value>,
}

/// Marks `extra` as decoded from the wire format `origin` (see [`ORIGIN_KEY`]).
pub(super) fn mark(extra: &mut Extra, origin: &str) {
    extra.insert(ORIGIN_KEY.to_owned(), Value::String(origin.to_owned()));
}

/// The wire format `extra` is marked as decoded from.
pub(super) fn origin(extra: &Extra) -> Option<&str> {
    hint(extra, ORIGIN_KEY)
}

fn is_own(extra: &Extra) -> bool {
    origin(extra) == Some(ORIGIN)
}

fn hint<'e>(extra: &'e Extra, key: &str) -> Option<&'e str> {
    extra.get(key).and_then(Value::as_str)
}
