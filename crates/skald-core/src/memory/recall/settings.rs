//! `[memory.recall]`: [`RecallSettings`], how deep a recalled memory is shown
//! ([`RecallLevel`]), and the check that rejects a setting recall cannot work with
//! ([`RecallSettingsError`]).

use serde::{Deserialize, Serialize};

/// Which level of a memory recall shows at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecallLevel {
    /// The abstract (`abstract` in the result).
    L0,
    /// The overview (`overview`).
    L1,
    /// The full content (`content`).
    L2,
}

impl RecallLevel {
    /// The field name of the text at this level in a tool result.
    pub fn field(self) -> &'static str {
        match self {
            RecallLevel::L0 => "abstract",
            RecallLevel::L1 => "overview",
            RecallLevel::L2 => "content",
        }
    }

    /// Parses `l0`, `l1` or `l2` (any case).
    pub fn parse(text: &str) -> Option<RecallLevel> {
        match text.to_ascii_lowercase().as_str() {
            "l0" => Some(RecallLevel::L0),
            "l1" => Some(RecallLevel::L1),
            "l2" => Some(RecallLevel::L2),
            _ => None,
        }
    }
}

/// The default floor of [`RecallSettings::min_text_relevance`] (see the recall module docs for
/// how it was chosen).
pub const DEFAULT_MIN_TEXT_RELEVANCE: f64 = 0.6;

/// `[memory.recall]`: per-turn recall and what is injected at session start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecallSettings {
    /// Per-turn recall on or off (the agent tools work either way).
    pub enabled: bool,
    /// How many of the last user messages make the query (seed 002: 5).
    pub query_messages: usize,
    /// A latest user message with fewer characters than this skips recall (seed 002: messages
    /// of 3 characters or fewer).
    pub min_query_chars: usize,
    /// At most this many memories are injected.
    pub max_results: usize,
    /// A memory is relevant when this share of the query's words (see [`term_coverage`]) occur
    /// in it, 0 to 1…
    ///
    /// [`term_coverage`]: super::term_coverage
    pub min_term_coverage: f64,
    /// …and, when the full-text search scored it, its BM25 relative to the query's reference
    /// score ([`crate::memory::bm25`]) is at least this, 0 to 1 (0 turns this floor off)…
    pub min_text_relevance: f64,
    /// …or when its embedding's cosine similarity to the query's is at least this, -1 to 1.
    pub min_cosine: f64,
    /// The deepest level shown.
    pub level: RecallLevel,
    /// The token budget of the injected memories (OpenViking's `max_tokens`: 1600).
    pub max_tokens: u64,
    /// Earlier turns' recalls are sent again where they were injected, so the prompt cache
    /// keeps its prefix ([`super::KeptRecalls`]); over this many tokens together they all leave
    /// (a prefix break). 0: each turn's recall is sent with that turn's calls only.
    pub max_kept_tokens: u64,
    /// Inject the user's profile into the system prompt at session start.
    pub profile: bool,
    /// Characters of the profile section.
    pub profile_max_chars: usize,
    /// Pre-inject a simulated `memory_ls` of `viking://` at session start.
    pub directory: bool,
    /// How deep the pre-injected listing goes below `viking://`.
    pub directory_depth: usize,
    /// Characters of the pre-injected listing.
    pub directory_max_chars: usize,
    /// Inject the tool usage statistics into the system prompt at session start.
    pub tool_memory: bool,
    /// Append skill memories to reads of `skills/<name>/SKILL.md`.
    pub skill_memory: bool,
    /// Name the memory commands (`skald search`, `ls`, `read`, `remember`) in the system
    /// prompt at session start, for agents that have a shell but no memory tools. Set by
    /// `[memory] teach_cli`, not in this table.
    #[serde(skip)]
    pub teach_cli: bool,
}

impl Default for RecallSettings {
    fn default() -> RecallSettings {
        RecallSettings {
            enabled: true,
            query_messages: 5,
            min_query_chars: 4,
            max_results: 5,
            min_term_coverage: 0.5,
            min_text_relevance: DEFAULT_MIN_TEXT_RELEVANCE,
            min_cosine: 0.35,
            level: RecallLevel::L1,
            max_tokens: 1600,
            max_kept_tokens: 8000,
            profile: true,
            profile_max_chars: 2000,
            directory: true,
            directory_depth: 3,
            directory_max_chars: 3000,
            tool_memory: true,
            skill_memory: true,
            teach_cli: false,
        }
    }
}

/// A recall setting out of range; the message names the field and the accepted range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("memory.recall.{field} is {found}; {expected}")]
pub struct RecallSettingsError {
    /// The setting's name under `[memory.recall]`.
    pub field: &'static str,
    /// The value given.
    pub found: String,
    /// What the setting accepts.
    pub expected: &'static str,
}

impl RecallSettings {
    /// Checks every setting, naming the first one out of range.
    pub fn validate(&self) -> Result<(), RecallSettingsError> {
        let error = |field, found: String, expected| {
            Err(RecallSettingsError {
                field,
                found,
                expected,
            })
        };
        if !(1..=50).contains(&self.query_messages) {
            return error(
                "query_messages",
                self.query_messages.to_string(),
                "it must be from 1 to 50",
            );
        }
        if self.min_query_chars > 1000 {
            return error(
                "min_query_chars",
                self.min_query_chars.to_string(),
                "it must be at most 1000",
            );
        }
        if !(1..=50).contains(&self.max_results) {
            return error(
                "max_results",
                self.max_results.to_string(),
                "it must be from 1 to 50",
            );
        }
        if !(self.min_term_coverage.is_finite() && (0.0..=1.0).contains(&self.min_term_coverage)) {
            return error(
                "min_term_coverage",
                self.min_term_coverage.to_string(),
                "it must be from 0 to 1",
            );
        }
        if !(self.min_text_relevance.is_finite() && (0.0..=1.0).contains(&self.min_text_relevance))
        {
            return error(
                "min_text_relevance",
                self.min_text_relevance.to_string(),
                "it must be from 0 to 1",
            );
        }
        if !(self.min_cosine.is_finite() && (-1.0..=1.0).contains(&self.min_cosine)) {
            return error(
                "min_cosine",
                self.min_cosine.to_string(),
                "it must be from -1 to 1",
            );
        }
        if !(50..=100_000).contains(&self.max_tokens) {
            return error(
                "max_tokens",
                self.max_tokens.to_string(),
                "it must be from 50 to 100000",
            );
        }
        if self.max_kept_tokens > 1_000_000 {
            return error(
                "max_kept_tokens",
                self.max_kept_tokens.to_string(),
                "it must be at most 1000000",
            );
        }
        for (field, found) in [
            ("profile_max_chars", self.profile_max_chars),
            ("directory_max_chars", self.directory_max_chars),
        ] {
            if !(100..=100_000).contains(&found) {
                return error(field, found.to_string(), "it must be from 100 to 100000");
            }
        }
        if !(1..=10).contains(&self.directory_depth) {
            return error(
                "directory_depth",
                self.directory_depth.to_string(),
                "it must be from 1 to 10",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn settings_validate_names_the_bad_field() {
        RecallSettings::default().validate().unwrap();
        let bad = RecallSettings {
            min_term_coverage: 1.5,
            ..RecallSettings::default()
        };
        let error = bad.validate().unwrap_err();
        assert_eq!(error.field, "min_term_coverage");
        assert!(
            error
                .to_string()
                .contains("memory.recall.min_term_coverage is 1.5")
        );
        let parsed: Result<RecallSettings, _> = toml::from_str("max_result = 3");
        assert!(parsed.unwrap_err().to_string().contains("max_result"));
        let parsed: RecallSettings = toml::from_str("level = \"l2\"\nmax_tokens = 800").unwrap();
        assert_eq!(parsed.level, RecallLevel::L2);
        assert_eq!(parsed.max_results, 5);
    }
}
