//! What the three wire API codecs (Chat Completions, Messages, Responses) share: the error a
//! malformed request or response is refused with, and a decoded response.

use serde_json::{Map, Value};

use super::json::FieldError;
use crate::message::Message;

/// Why a value is not a valid request or response of a wire API (Chat Completions, Messages,
/// Responses). Every variant but `Json` names the field by its JSON path
/// (`messages[1].content[0].source`, `input[3].call_id`, or `top level`).
#[derive(Debug, thiserror::Error)]
pub enum WireError {
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

impl WireError {
    /// The JSON path of the offending field, when the error is about one.
    pub fn path(&self) -> Option<&str> {
        match self {
            WireError::Json(_) => None,
            WireError::Missing { path, .. }
            | WireError::WrongType { path, .. }
            | WireError::UnknownValue { path, .. } => Some(path),
        }
    }
}

impl From<FieldError> for WireError {
    fn from(error: FieldError) -> Self {
        let FieldError {
            path,
            expected,
            found,
        } = error;
        match found {
            None => WireError::Missing { path, expected },
            Some(found) => WireError::WrongType {
                path,
                expected,
                found,
            },
        }
    }
}

/// A decoded response of a wire API: its answer as one assistant message plus the envelope
/// needed to write it back.
#[derive(Debug, Clone, PartialEq)]
pub struct WireResponse {
    /// The assistant message — Messages' `content`, Chat Completions' `choices[0].message`,
    /// Responses' `output` items — with `meta` filled from the envelope (`id`, `model`, the stop
    /// reason or status, `usage`).
    pub message: Message,
    /// The response object as received, with the answer's field (`content`,
    /// `choices[0].message`, `output`) set to `null`. Other choices, `logprobs`,
    /// `system_fingerprint` and the like stay here. The encoder puts the answer back and
    /// overwrites the fields `meta` describes only where `meta` says something else.
    pub envelope: Map<String, Value>,
}
