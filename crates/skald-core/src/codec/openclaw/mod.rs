//! pi / OpenClaw session JSONL (version 4, OpenClaw 2026.9) and `AgentMessage` JSON, mapped to and from the neutral
//! [`crate::message`] model and the [`crate::session`] model.
//!
//! This module owns the file format only:
//! - [`decode_agent_message`] / [`encode_agent_message`]: one pi `AgentMessage` ↔ one [`Message`].
//!   Public because the HTTP server accepts OpenClaw messages.
//! - [`decode_entry`] / [`encode_entry`] / [`encode_header`]: one line's JSON ↔ one [`Entry`] or
//!   [`SessionHeader`].
//! - [`decode_session`] / [`encode_session`]: the session file, a header line followed by one entry
//!   per line. Versions 1 and 2 are migrated on read the way pi's `SessionManager` does; version
//!   3 needs no migration (version 4 only adds the `reset` entry and the opaque `leaf` record).
//!   Versions 3 and 4 input is promised to round-trip; what is written is always version 4. The reader also reports what is wrong with the
//!   tree (duplicate ids, parents that point nowhere, cycles) by line.
//!
//! What the lines mean — the entry tree, its leaf, and the context pi builds from it — is
//! [`crate::session`].
//!
//! The parts, private (every item has one path: here): `message` (one `AgentMessage`), `entry`
//! (one entry or header line) and `file` (the whole file: line splitting, version migration, the
//! damage report). This file holds what they share: [`OpenClawError`], [`SKALD_CONTENT_KEY`] and
//! the field reader that sends what it did not consume to `extra`.
//!
//! Typed where the pipeline acts, `extra` for the rest: every field this module does not interpret
//! is kept in an `extra` map and written back, so decode → encode gives the same JSON value for
//! every version-3 and version-4 line. Entry types this module does not know — OpenClaw's opaque
//! records, `leaf` among them — are kept whole and written back verbatim. Key order can differ: encoders write pi's usual order, then `extra`.
//! A field that has a typed home but an unexpected shape (a fractional timestamp, a usage object
//! without `cacheWrite`) is not an error: it stays in `extra`, untouched. Only shapes that make a
//! message meaningless to a model (a text block without text, a tool call without an id) fail.
//!
//! [`Message`]: crate::message::Message
//! [`Entry`]: crate::session::Entry
//! [`SessionHeader`]: crate::session::SessionHeader

mod entry;
mod file;
mod host;
mod message;

use serde_json::{Map, Value};

use super::json::{FieldError, Path, rest};
use crate::message::Extra;
use crate::session::CURRENT_VERSION;

pub use entry::{decode_entry, encode_entry, encode_header};
pub use file::{SessionRead, decode_session, encode_session};
pub use host::{HOST_FILL, make_host_valid};
pub use message::{
    decode_agent_message, decode_agent_message_at, encode_agent_message, encode_agent_messages,
};

/// The skald field of a `toolResult` message that carries the whole content of a
/// [`Role::ToolResult`] message pi has no shape for: several results (parallel tool calls), or
/// results beside text (Anthropic's `[tool_result, text]` user message), or a lone result with
/// fields of its own (`cache_control`), which pi's one object would mix with the message's. Every
/// block is written
/// with the block encoder (results as nested `toolResult` blocks), in order; pi's own fields of
/// the message describe the first result, so readers of the format still see a valid message.
/// [`decode_agent_message`] restores the content from this field when it is present.
///
/// [`Role::ToolResult`]: crate::message::Role::ToolResult
pub const SKALD_CONTENT_KEY: &str = "skaldContent";

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Why a session or an `AgentMessage` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenClawError {
    /// The input holds no non-blank line, so there is no header.
    #[error("the input is empty: expected a session header line {{\"type\":\"session\",...}}")]
    Empty,
    /// The first non-blank line is not a usable session header.
    #[error("line {line}: invalid session header: {message}")]
    InvalidHeader {
        /// The line the header was expected on.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The header names a format version newer than this reader knows.
    #[error(
        "line {line}: session version {version} is newer than this reader, which reads versions 1 to {CURRENT_VERSION}"
    )]
    UnsupportedVersion {
        /// The header's line.
        line: usize,
        /// The version the header names.
        version: u64,
    },
    /// A message or entry field has the wrong shape. `path` is the JSON path of the field.
    #[error("{path}: expected {expected}, found {found}")]
    InvalidField {
        /// The JSON path of the field (`message.content[1].text`).
        path: String,
        /// What the format allows there.
        expected: String,
        /// What was there instead.
        found: String,
    },
}

/// A field with the wrong shape is a line issue while a session is read, and this error when one
/// message or entry is decoded on its own.
impl From<FieldError> for OpenClawError {
    fn from(error: FieldError) -> Self {
        OpenClawError::InvalidField {
            expected: error.expected.to_owned(),
            found: error.found().to_owned(),
            path: error.path,
        }
    }
}

/// Reads fields of one JSON object and remembers which ones it consumed, so the rest can go to
/// `extra` in their original order.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    path: Path<'a>,
    used: Vec<&'static str>,
}

impl<'a> Fields<'a> {
    fn new(obj: &'a Map<String, Value>, path: Path<'a>) -> Self {
        Fields {
            obj,
            path,
            used: Vec::new(),
        }
    }

    /// `key` of this object holds `found` instead of `expected`.
    fn error(&self, key: &str, expected: &'static str, found: Option<&Value>) -> FieldError {
        FieldError::new(self.path.key(key), expected, found)
    }

    /// Marks `key` consumed and returns its value.
    fn take(&mut self, key: &'static str) -> Option<&'a Value> {
        self.used.push(key);
        self.obj.get(key)
    }

    fn take_owned(&mut self, key: &'static str) -> Option<Value> {
        self.take(key).cloned()
    }

    fn required_str(&mut self, key: &'static str) -> Result<String, FieldError> {
        match self.take(key) {
            Some(Value::String(text)) => Ok(text.clone()),
            other => Err(self.error(key, "a string", other)),
        }
    }

    /// Absent is fine; present must be a string.
    fn optional_str(&mut self, key: &'static str) -> Result<Option<String>, FieldError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            other => Err(self.error(key, "a string", other)),
        }
    }

    /// Absent is fine; present must be a boolean.
    fn optional_bool(&mut self, key: &'static str) -> Result<Option<bool>, FieldError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            other => Err(self.error(key, "a boolean", other)),
        }
    }

    /// Consumes `key` only when it holds a string; anything else stays for `extra`.
    fn lenient_str(&mut self, key: &'static str) -> Option<String> {
        let text = self.obj.get(key).and_then(Value::as_str)?;
        self.used.push(key);
        Some(text.to_owned())
    }

    /// Consumes `key` only when it holds a non-negative integer.
    fn lenient_u64(&mut self, key: &'static str) -> Option<u64> {
        let number = self.obj.get(key).and_then(Value::as_u64)?;
        self.used.push(key);
        Some(number)
    }

    /// Consumes `key` only when it holds a boolean.
    fn lenient_bool(&mut self, key: &'static str) -> Option<bool> {
        let flag = self.obj.get(key).and_then(Value::as_bool)?;
        self.used.push(key);
        Some(flag)
    }

    /// The fields not consumed, in their original order.
    fn rest(&self) -> Extra {
        rest(self.obj, &self.used)
    }
}
