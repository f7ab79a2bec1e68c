//! swe_agent import. STUB.
use crate::message::Conversation;

#[derive(Debug, thiserror::Error)]
pub enum SweAgentError {
    #[error("{0}")]
    Invalid(String),
}

pub fn decode(_input: &str) -> Result<Conversation, SweAgentError> {
    Err(SweAgentError::Invalid("not implemented".into()))
}
