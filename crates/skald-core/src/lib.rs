//! The pure core of skald: the neutral message model, transcript codecs, the session model (pi's
//! entry tree), token accounting and transcript repair. No I/O, no async: every function here is a computation on values.
//!
//! ```
//! use skald_core::codec;
//!
//! let request = r#"{"model":"gpt-4o","messages":[
//!     {"role":"system","content":"You are terse."},
//!     {"role":"user","content":"List the files."}]}"#;
//! let decoded = codec::decode(request).unwrap();
//! assert_eq!(decoded.format, codec::Format::OpenAiRequest);
//! assert_eq!(decoded.conversation.messages.len(), 2);
//! ```

// Every public item says what it is; `clippy -D warnings` turns a new undocumented one into an
// error.
#![warn(missing_docs)]

pub mod assemble_record;
pub mod codec;
pub mod compaction;
pub mod digest;
pub mod extractive;
pub mod fetch;
pub mod identifiers;
pub mod identity;
pub mod ids;
pub mod memory;
pub mod message;
pub mod pipeline;
pub mod refs;
pub mod render;
pub mod repair;
pub mod session;
pub mod session_id;
pub mod stats;
pub mod summary;
mod swar;
pub mod time;
pub mod tokens;
pub mod tool_output;
