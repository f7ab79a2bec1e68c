//! The write path's settings (`[memory]` in `skald.toml`): who the memories belong to, how
//! extraction runs and is retried, and the two-threshold upload ([`UploadSettings`]).

use serde::{Deserialize, Serialize};

use crate::memory::extract::ExtractSettings;
use crate::memory::upload::{UploadSettings, UploadSettingsError};
use crate::memory::uri::MemoryUri;

/// Default attempts at extracting a span before its failure is left for a person to look at.
pub const DEFAULT_MAX_EXTRACTION_ATTEMPTS: u32 = 5;

/// How memories are written.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct WriteSettings {
    /// Whether compacted spans are archived and memories extracted at all.
    pub enabled: bool,
    /// The user whose memories are written (`viking://user/{user}/…`).
    pub user: String,
    /// The agent whose memories are written (`viking://agent/{agent}/…`).
    pub agent: String,
    /// Attempts per span (the first and its retries) before a failure is no longer retried
    /// automatically; it stays recorded in the session either way.
    pub max_extraction_attempts: u32,
    /// Similar stored memories shown to an extractor per span, so it updates or skips instead
    /// of adding a duplicate.
    pub similar_memories: usize,
    /// How the deterministic extractor reads a span.
    pub extract: ExtractSettings,
    /// When the conversation is archived and extracted in uploads.
    pub upload: UploadSettings,
}

impl Default for WriteSettings {
    fn default() -> Self {
        WriteSettings {
            enabled: true,
            user: "default".to_owned(),
            agent: "default".to_owned(),
            max_extraction_attempts: DEFAULT_MAX_EXTRACTION_ATTEMPTS,
            similar_memories: 5,
            extract: ExtractSettings::default(),
            upload: UploadSettings::default(),
        }
    }
}

/// Write settings that cannot work.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WriteSettingsError {
    /// `user` or `agent` cannot name a `viking://` owner.
    #[error("{field} {value:?}: {reason}")]
    Owner {
        /// `user` or `agent`.
        field: &'static str,
        /// The value given.
        value: String,
        /// Why the URI layout refuses it.
        reason: String,
    },
    /// `max_extraction_attempts` is 0, so no span would ever be extracted.
    #[error("max_extraction_attempts: expected at least 1, found 0")]
    NoAttempts,
    /// `similar_memories` is over 50.
    #[error("similar_memories: expected at most 50, found {0}")]
    SimilarMemories(usize),
    /// `extract.max_candidates` is outside 1 to 1000.
    #[error("extract.max_candidates: expected 1 to 1000, found {0}")]
    MaxCandidates(usize),
    /// The upload settings failed validation.
    #[error("upload: {0}")]
    Upload(#[from] UploadSettingsError),
}

impl WriteSettings {
    /// Checks every setting, naming the one out of range.
    pub fn validate(&self) -> Result<(), WriteSettingsError> {
        for (field, value, scope) in [
            ("user", &self.user, "user"),
            ("agent", &self.agent, "agent"),
        ] {
            let checked = MemoryUri::parse(&format!("viking://{scope}/{value}"))
                .map_err(|error| error.to_string())
                .and_then(|uri| match uri.depth() {
                    2 => Ok(()),
                    _ => Err("a name is one URI segment".to_owned()),
                });
            if let Err(reason) = checked {
                return Err(WriteSettingsError::Owner {
                    field,
                    value: value.clone(),
                    reason,
                });
            }
        }
        if self.max_extraction_attempts == 0 {
            return Err(WriteSettingsError::NoAttempts);
        }
        if self.similar_memories > 50 {
            return Err(WriteSettingsError::SimilarMemories(self.similar_memories));
        }
        if !(1..=1000).contains(&self.extract.max_candidates) {
            return Err(WriteSettingsError::MaxCandidates(
                self.extract.max_candidates,
            ));
        }
        self.upload.validate()?;
        Ok(())
    }
}
