//! Format detection from content. STUB.
use super::Format;

#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    #[error("{0}")]
    Unknown(String),
}

pub fn detect(_input: &str) -> Result<Format, DetectError> {
    Err(DetectError::Unknown("not implemented".into()))
}
