//! OpenAI Chat Completions: requests (messages, tools) and responses (with tool calls). STUB.
use crate::message::{Conversation, Message};
use serde_json::{Map, Value};

#[derive(Debug, thiserror::Error)]
pub enum OpenAiError {
    #[error("{0}")]
    Invalid(String),
}

/// A decoded response: its one message plus the envelope fields needed to write it back.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiResponse {
    pub message: Message,
    pub envelope: Map<String, Value>,
}

pub fn decode_request(_value: &Value) -> Result<Conversation, OpenAiError> {
    Err(OpenAiError::Invalid("not implemented".into()))
}
pub fn decode_request_str(input: &str) -> Result<Conversation, OpenAiError> {
    decode_request(&serde_json::from_str(input).map_err(|e| OpenAiError::Invalid(e.to_string()))?)
}
pub fn encode_request(_conversation: &Conversation) -> Value {
    Value::Null
}
pub fn decode_response(_value: &Value) -> Result<OpenAiResponse, OpenAiError> {
    Err(OpenAiError::Invalid("not implemented".into()))
}
pub fn decode_response_str(input: &str) -> Result<OpenAiResponse, OpenAiError> {
    decode_response(&serde_json::from_str(input).map_err(|e| OpenAiError::Invalid(e.to_string()))?)
}
pub fn encode_response(_response: &OpenAiResponse) -> Value {
    Value::Null
}
