//! Anthropic Messages: requests (system, messages, tools) and responses. STUB.
use crate::message::{Conversation, Message};
use serde_json::{Map, Value};

#[derive(Debug, thiserror::Error)]
pub enum AnthropicError {
    #[error("{0}")]
    Invalid(String),
}

/// A decoded response: its one message plus the envelope fields needed to write it back.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicResponse {
    pub message: Message,
    pub envelope: Map<String, Value>,
}

pub fn decode_request(_value: &Value) -> Result<Conversation, AnthropicError> {
    Err(AnthropicError::Invalid("not implemented".into()))
}
pub fn decode_request_str(input: &str) -> Result<Conversation, AnthropicError> {
    decode_request(&serde_json::from_str(input).map_err(|e| AnthropicError::Invalid(e.to_string()))?)
}
pub fn encode_request(_conversation: &Conversation) -> Value {
    Value::Null
}
pub fn decode_response(_value: &Value) -> Result<AnthropicResponse, AnthropicError> {
    Err(AnthropicError::Invalid("not implemented".into()))
}
pub fn decode_response_str(input: &str) -> Result<AnthropicResponse, AnthropicError> {
    decode_response(&serde_json::from_str(input).map_err(|e| AnthropicError::Invalid(e.to_string()))?)
}
pub fn encode_response(_response: &AnthropicResponse) -> Value {
    Value::Null
}
