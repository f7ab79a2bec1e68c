//! pi / OpenClaw session JSONL v3. STUB.
use super::LineIssue;
use crate::message::Message;

#[derive(Debug, thiserror::Error)]
pub enum OpenClawError {
    #[error("{0}")]
    Invalid(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Session {}

impl Session {
    pub fn build_context(&self, _leaf: Option<&str>) -> Vec<Message> {
        Vec::new()
    }
}

pub struct SessionRead {
    pub session: Session,
    pub issues: Vec<LineIssue>,
    pub ignored_lines: usize,
}

pub fn decode_session(_input: &str) -> Result<SessionRead, OpenClawError> {
    Err(OpenClawError::Invalid("not implemented".into()))
}
pub fn encode_session(_session: &Session) -> String {
    String::new()
}
