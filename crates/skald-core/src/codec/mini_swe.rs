//! mini_swe import. STUB.
use crate::message::Conversation;

#[derive(Debug, thiserror::Error)]
pub enum MiniSweError {
    #[error("{0}")]
    Invalid(String),
}

pub fn decode(_input: &str) -> Result<Conversation, MiniSweError> {
    Err(MiniSweError::Invalid("not implemented".into()))
}
