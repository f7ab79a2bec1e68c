//! Claude Code session JSONL import. STUB.
use super::LineIssue;
use crate::message::Conversation;

#[derive(Debug, thiserror::Error)]
pub enum ClaudeCodeError {
    #[error("{0}")]
    Invalid(String),
}

pub struct ClaudeCodeRead {
    pub conversation: Conversation,
    pub issues: Vec<LineIssue>,
    pub ignored_lines: usize,
}

pub fn decode(_input: &str) -> Result<ClaudeCodeRead, ClaudeCodeError> {
    Err(ClaudeCodeError::Invalid("not implemented".into()))
}
