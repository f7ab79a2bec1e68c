//! Offload (seed 000, SCCS): large tool results leave the context and a placeholder
//! `[REF_ID: <sha-256>] (Summary: <digest>)` stands in their place; the original is returned as a
//! [`NewRef`] for the caller to store durably before the output reaches a model.
//!
//! Decisions are content-addressed: the same result under the same settings always becomes the
//! same placeholder, byte for byte, so requests share their prefix. Which results are offloaded
//! is the caller's choice through a selector (SCCS offloads every large result at once; skald's
//! engine can defer results still in active use). The stage itself guarantees what must always
//! hold: content that already carries a ref is never offloaded again, output of
//! `fetch_original_data` is never offloaded, OpenClaw's workspace files (SOUL.md, AGENTS.md, …,
//! recognised by their first line) stay, and non-text blocks (images) stay beside the
//! placeholder.
//!
//! The parts, private (every item has one path: here): `results` (tool results, the stage
//! proper) and `arguments` (long tool-call arguments). This file holds the settings, the limits
//! and the report both parts fill.
//!
//! [`NewRef`]: crate::refs::NewRef

mod arguments;
mod results;

use serde::{Deserialize, Serialize};

use crate::digest::DigestSettings;

pub use arguments::{ArgumentsCache, offload_arguments, offloadable_argument_chars};
pub use results::{
    EligibleResult, OffloadCache, OffloadOutcome, eligible_results, is_workspace_file, offload,
    text_of,
};

/// The tool through which a model fetches offloaded originals.
pub const FETCH_TOOL_NAME: &str = "fetch_original_data";

/// Smallest `compress_threshold` the seed allows.
pub const MIN_COMPRESS_THRESHOLD: usize = 2_000;

/// Smallest `arguments_threshold`: a placeholder with its digest is about 400 characters, so
/// offloading shorter arguments would save little and cost a fetch.
pub const MIN_ARGUMENTS_THRESHOLD: usize = 1_000;

/// OpenClaw workspace files that are context, not tool noise (seed 000's whitelist).
pub const OPENCLAW_FILES: &[&str] = &[
    "SOUL.md",
    "MEMORY.md",
    "USER.md",
    "AGENTS.md",
    "TOOLS.md",
    "IDENTITY.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
];

/// Added to the system prompt when something was offloaded and the fetch tool is available.
pub const REF_ID_INSTRUCTION: &str = "\
Outputs shown as `[REF_ID: <id>] (Summary: …)` were moved out; the summary keeps the key facts \
and exact identifiers. When you need more, call `fetch_original_data`, with `lines` or `grep` \
for a slice. Do not fetch what the summary answers.";

/// Settings of the offload stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OffloadSettings {
    /// Whether the stage runs at all.
    pub enabled: bool,
    /// Results whose text exceeds this many characters are offloaded (seed: 3000, minimum 2000).
    pub compress_threshold: usize,
    /// Budget of the digest in the placeholder (seed: 300, minimum 50).
    pub summary_max_chars: usize,
    /// Keep OpenClaw workspace files in the context.
    pub keep_workspace_files: bool,
    /// String arguments of tool calls (file contents of a write, the old and new text of an
    /// edit) longer than this many characters are offloaded too, once the call is old enough;
    /// 0 leaves arguments alone (SCCS).
    pub arguments_threshold: usize,
}

impl Default for OffloadSettings {
    fn default() -> OffloadSettings {
        OffloadSettings {
            enabled: true,
            compress_threshold: 3_000,
            summary_max_chars: 300,
            keep_workspace_files: true,
            arguments_threshold: 0,
        }
    }
}

/// A setting outside what the stage accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OffloadSettingsError {
    /// `compress_threshold` is below the seed's minimum.
    #[error(
        "offload.compress_threshold is {0}: it must be at least {MIN_COMPRESS_THRESHOLD} chars"
    )]
    ThresholdTooLow(usize),
    /// `summary_max_chars` is not a usable digest budget.
    #[error("offload.summary_max_chars: {0}")]
    Digest(String),
    /// `arguments_threshold` is neither 0 nor at least the minimum.
    #[error(
        "offload.arguments_threshold is {0}: it must be 0 (off) or at least {MIN_ARGUMENTS_THRESHOLD} chars"
    )]
    ArgumentsThresholdTooLow(usize),
}

impl OffloadSettings {
    /// About how many characters a placeholder takes: `[REF_ID: <64 hex>] (Summary: …)` around a
    /// digest of at most `summary_max_chars` — what a scheduler counts an offload as leaving.
    pub fn placeholder_chars(&self) -> usize {
        self.summary_max_chars + 88
    }

    /// Rejects settings outside what the stage accepts.
    pub fn validate(&self) -> Result<(), OffloadSettingsError> {
        if self.compress_threshold < MIN_COMPRESS_THRESHOLD {
            return Err(OffloadSettingsError::ThresholdTooLow(
                self.compress_threshold,
            ));
        }
        self.digest_settings()
            .map(|_| ())
            .map_err(|error| OffloadSettingsError::Digest(error.to_string()))
    }

    /// The digest settings of the placeholders this stage writes.
    pub fn digest_settings(&self) -> Result<DigestSettings, crate::digest::DigestSettingsError> {
        DigestSettings::new(self.summary_max_chars)
    }
}

/// One result the stage offloaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Offloaded {
    /// The index of the message holding the result.
    pub message_index: usize,
    /// The id of the call the result answers (or of the call whose arguments were offloaded).
    pub call_id: String,
    /// The ref that holds the original.
    pub ref_id: String,
    /// Size of the original text in bytes (chars for ASCII).
    pub chars_before: usize,
    /// Size of the placeholder that replaced it.
    pub chars_after: usize,
}

/// What the offload stage did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OffloadReport {
    /// Every offloaded result, in message order.
    pub offloaded: Vec<Offloaded>,
    /// Results over the threshold kept because they are OpenClaw workspace files.
    pub kept_workspace_files: usize,
    /// Results over the threshold the selector chose to keep for now.
    pub deferred: usize,
}

impl OffloadReport {
    /// Characters the offloads took out of the context.
    pub fn chars_saved(&self) -> usize {
        self.offloaded
            .iter()
            .map(|o| o.chars_before.saturating_sub(o.chars_after))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn settings_below_the_seed_minimums_are_rejected() {
        let low = OffloadSettings {
            compress_threshold: 1_999,
            ..OffloadSettings::default()
        };
        assert_eq!(
            low.validate(),
            Err(OffloadSettingsError::ThresholdTooLow(1_999))
        );
        let short = OffloadSettings {
            summary_max_chars: 49,
            ..OffloadSettings::default()
        };
        assert!(short.validate().is_err());
        assert!(OffloadSettings::default().validate().is_ok());
    }
}
