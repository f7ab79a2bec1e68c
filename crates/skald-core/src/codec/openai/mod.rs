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
//! (model → JSON). This file holds the hint keys, [`WireError`], [`WireResponse`] and the
//! origin-mark helpers the other wire codecs share.
//!
//! [`ToolResult::details`]: crate::message::ToolResult::details
//! [`Role::System`]: crate::message::Role::System
//! [`Role::ToolResult`]: crate::message::Role::ToolResult

mod decode;
mod encode;

use serde_json::Value;

use crate::message::Extra;

pub use super::wire::{WireError, WireResponse};

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
