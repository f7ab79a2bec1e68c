//! Compaction settings: seed 001's constants as defaults, loaded from TOML or JSON with unknown
//! keys rejected, and [`CompactionSettings::validate`] refusing values that cannot be what the
//! author meant (with the field, the accepted range and the value found).

use serde::{Deserialize, Serialize};

/// Tokens kept free for the model's next reply: compaction triggers above `window − reserve`.
pub const DEFAULT_RESERVE_TOKENS: u64 = 20_000;
/// User turns kept verbatim after the summary (`DEFAULT_RECENT_TURNS_PRESERVE`).
pub const DEFAULT_KEEP_RECENT_TURNS: usize = 3;
/// Most user turns that may be kept verbatim (`MAX_RECENT_TURNS_PRESERVE`).
pub const MAX_KEEP_RECENT_TURNS: usize = 12;
/// Tokens of recent messages kept when the preserved turns hold everything and must be cut
/// inside a turn to leave something to summarise (pi's `keepRecentTokens`, seed 003's
/// `compaction.keepRecentTokens`).
pub const DEFAULT_KEEP_RECENT_TOKENS: u64 = 20_000;
/// Largest share of the window history may keep when new content is large.
pub const DEFAULT_MAX_HISTORY_SHARE: f64 = 0.5;
/// Parts a long history is split into before the partial summaries are merged.
pub const DEFAULT_PARTS: usize = 2;
/// Most parts accepted: each part costs a summarizer call and the merge must hold them all.
pub const MAX_PARTS: usize = 16;
/// Share of the window one summarizer chunk may fill (`BASE_CHUNK_RATIO`).
pub const DEFAULT_BASE_CHUNK_RATIO: f64 = 0.4;
/// The share the adaptive ratio never goes below (`MIN_CHUNK_RATIO`).
pub const DEFAULT_MIN_CHUNK_RATIO: f64 = 0.15;
/// Tokens of a summarizer request taken by instructions and wrappers, not by the chunk.
pub const DEFAULT_SUMMARIZATION_OVERHEAD_TOKENS: u64 = 4_096;
/// Quality-guard retries after the first attempt (`DEFAULT_QUALITY_GUARD_MAX_RETRIES`).
pub const DEFAULT_QUALITY_GUARD_RETRIES: u32 = 1;
/// Most quality-guard retries (`MAX_QUALITY_GUARD_MAX_RETRIES`).
pub const MAX_QUALITY_GUARD_RETRIES: u32 = 3;
/// Tool failures listed under `## Tool Failures` (`MAX_TOOL_FAILURES`).
pub const DEFAULT_MAX_TOOL_FAILURES: usize = 8;
/// Characters of one listed tool failure (`MAX_TOOL_FAILURE_CHARS`).
pub const DEFAULT_TOOL_FAILURE_CHARS: usize = 240;
/// Characters of AGENTS.md's critical rules appended to a summary.
pub const DEFAULT_CRITICAL_RULES_CHARS: usize = 2_000;
/// Characters of custom summary instructions (`MAX_INSTRUCTION_LENGTH`, about 200 tokens).
pub const DEFAULT_CUSTOM_INSTRUCTIONS_CHARS: usize = 800;
/// Most characters of custom instructions any configuration may allow (OpenClaw's
/// `MAX_UNTRUSTED_INSTRUCTION_CHARS`).
pub const MAX_CUSTOM_INSTRUCTIONS_CHARS: usize = 4_000;
/// Wall-clock limit of one whole compaction: OpenClaw's `compactWithSafetyTimeout` (300 s). The
/// seed names the timeout and its rule (keep the pre-compaction snapshot) but not the figure.
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;
/// The hard cap of a compaction whose last summary request is still running at `timeout_ms`
/// (seed 001's aggregate timeout waits on while the request is in flight): twice the timeout.
pub const DEFAULT_MAX_TIMEOUT_MS: u64 = 2 * DEFAULT_TIMEOUT_MS;

/// How the `## Exact identifiers` section is written and checked (OpenClaw's
/// `identifierPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentifierPolicy {
    /// Identifiers are kept literally, and the quality guard checks the extracted ones.
    #[default]
    Strict,
    /// Identifiers only when needed for continuity; not checked.
    Off,
    /// The operator's `identifier_instructions` apply (as data); not checked.
    Custom,
}

/// The quality guard: audits a summary and asks for another with the failed checks as feedback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QualityGuardSettings {
    /// Whether summaries are audited at all.
    pub enabled: bool,
    /// Attempts after the first one when the audit fails.
    pub max_retries: u32,
}

impl Default for QualityGuardSettings {
    fn default() -> Self {
        QualityGuardSettings {
            enabled: true,
            max_retries: DEFAULT_QUALITY_GUARD_RETRIES,
        }
    }
}

/// The `## Tool Failures` appendix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolFailureSettings {
    /// Failures listed; more are counted in a last line. 0 leaves the section out.
    pub max_failures: usize,
    /// Characters of each failure's text, `...` included.
    pub max_chars: usize,
}

impl Default for ToolFailureSettings {
    fn default() -> Self {
        ToolFailureSettings {
            max_failures: DEFAULT_MAX_TOOL_FAILURES,
            max_chars: DEFAULT_TOOL_FAILURE_CHARS,
        }
    }
}

/// Everything compaction planning and the summary loop need; the defaults are seed 001's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionSettings {
    /// When false the threshold trigger never fires; manual and overflow compactions still run.
    pub enabled: bool,
    /// Tokens of the window kept free for the model's answer: the threshold trigger fires above
    /// `window − reserve_tokens`.
    pub reserve_tokens: u64,
    /// User turns at the end kept verbatim after the summary.
    pub keep_recent_turns: usize,
    /// When everything after the leading system messages is in the preserved turns (a few user
    /// turns of long autonomous tool work), they are cut inside a turn to keep about this many
    /// tokens, so that a manual, overflow or over-threshold compaction has something to
    /// summarise (see [`super::split::cut_preserved_turns`]).
    pub keep_recent_tokens: u64,
    /// The share of the window the summarised history may take when new content is large; older
    /// history beyond it is pruned and summarised first.
    pub max_history_share: f64,
    /// Parts a large span is split into, each summarised on its own and then merged.
    pub parts: usize,
    /// The share of the window one summarizer chunk may fill before the adaptive reduction.
    pub base_chunk_ratio: f64,
    /// The floor the adaptive chunk ratio never goes below.
    pub min_chunk_ratio: f64,
    /// Tokens of one summarizer request taken by its instructions, subtracted from what a chunk
    /// may carry.
    pub summarization_overhead_tokens: u64,
    /// Factor applied to token estimates before they are compared with limits.
    pub safety_margin: f64,
    /// The audit of summaries and its retries.
    pub quality_guard: QualityGuardSettings,
    /// The `## Tool Failures` appendix.
    pub tool_failures: ToolFailureSettings,
    /// Characters of AGENTS.md's "Session Startup" and "Red Lines" appended; 0 leaves them out.
    pub max_critical_rules_chars: usize,
    /// Custom instructions are cut to this many characters.
    pub max_custom_instructions_chars: usize,
    /// Configured custom instructions; a compaction request's own instructions win over these.
    pub custom_instructions: Option<String>,
    /// Wall-clock limit of one compaction, enforced by the caller: no summary request starts
    /// after it, and one still running then is waited for (seed 001's aggregate timeout, which
    /// extends while the request is in flight), up to `max_timeout_ms`.
    pub timeout_ms: u64,
    /// The hard cap: a summary request still running this long after the compaction began is
    /// cut, and the compaction cancelled. At least `timeout_ms`.
    pub max_timeout_ms: u64,
    /// How strictly the summary must keep exact identifiers.
    pub identifier_policy: IdentifierPolicy,
    /// The policy text for [`IdentifierPolicy::Custom`].
    pub identifier_instructions: Option<String>,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            enabled: true,
            reserve_tokens: DEFAULT_RESERVE_TOKENS,
            keep_recent_turns: DEFAULT_KEEP_RECENT_TURNS,
            keep_recent_tokens: DEFAULT_KEEP_RECENT_TOKENS,
            max_history_share: DEFAULT_MAX_HISTORY_SHARE,
            parts: DEFAULT_PARTS,
            base_chunk_ratio: DEFAULT_BASE_CHUNK_RATIO,
            min_chunk_ratio: DEFAULT_MIN_CHUNK_RATIO,
            summarization_overhead_tokens: DEFAULT_SUMMARIZATION_OVERHEAD_TOKENS,
            safety_margin: crate::tokens::SAFETY_MARGIN,
            quality_guard: QualityGuardSettings::default(),
            tool_failures: ToolFailureSettings::default(),
            max_critical_rules_chars: DEFAULT_CRITICAL_RULES_CHARS,
            max_custom_instructions_chars: DEFAULT_CUSTOM_INSTRUCTIONS_CHARS,
            custom_instructions: None,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            max_timeout_ms: DEFAULT_MAX_TIMEOUT_MS,
            identifier_policy: IdentifierPolicy::Strict,
            identifier_instructions: None,
        }
    }
}

/// A compaction setting that makes no sense.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompactionSettingsError {
    /// `keep_recent_turns` is over the most the planner handles.
    #[error("keep_recent_turns: expected at most {MAX_KEEP_RECENT_TURNS}, found {0}")]
    KeepRecentTurns(usize),
    /// A share outside (0, 1].
    #[error("{field}: expected a number greater than 0 and at most 1, found {found}")]
    Share {
        /// The setting's name.
        field: &'static str,
        /// The value given.
        found: f64,
    },
    /// `min_chunk_ratio` is above `base_chunk_ratio`.
    #[error(
        "min_chunk_ratio: expected at most base_chunk_ratio ({base}), found {min}; the adaptive \
         ratio shrinks from the base towards the minimum"
    )]
    ChunkRatioOrder {
        /// `base_chunk_ratio`.
        base: f64,
        /// `min_chunk_ratio`.
        min: f64,
    },
    /// `parts` is 0 or over the most allowed.
    #[error("parts: expected 1 to {MAX_PARTS}, found {0}")]
    Parts(usize),
    /// `safety_margin` is outside 1 to 3.
    #[error("safety_margin: expected a number from 1 to 3, found {0}")]
    SafetyMargin(f64),
    /// `quality_guard.max_retries` is over the most allowed.
    #[error("quality_guard.max_retries: expected at most {MAX_QUALITY_GUARD_RETRIES}, found {0}")]
    QualityRetries(u32),
    /// `tool_failures.max_chars` leaves no room for text and the `...`.
    #[error(
        "tool_failures.max_chars: expected at least 4 (room for the text and \"...\"), found {0}"
    )]
    ToolFailureChars(usize),
    /// `max_custom_instructions_chars` is 0 or over the most allowed.
    #[error(
        "max_custom_instructions_chars: expected 1 to {MAX_CUSTOM_INSTRUCTIONS_CHARS}, found {0}"
    )]
    CustomInstructionsLimit(usize),
    /// The configured custom instructions are longer than their limit.
    #[error(
        "custom_instructions: {found} characters, longer than max_custom_instructions_chars \
         ({limit}); shorten them or raise the limit"
    )]
    CustomInstructionsTooLong {
        /// Their length in characters.
        found: usize,
        /// `max_custom_instructions_chars`.
        limit: usize,
    },
    /// `timeout_ms` is 0.
    #[error("timeout_ms: expected more than 0, found 0")]
    ZeroTimeout,
    /// `max_timeout_ms` is below `timeout_ms`.
    #[error("max_timeout_ms: expected at least timeout_ms ({timeout_ms}), found {found}")]
    HardCapBelowTimeout {
        /// `max_timeout_ms`.
        found: u64,
        /// `timeout_ms`.
        timeout_ms: u64,
    },
    /// `identifier_policy = "custom"` without `identifier_instructions`.
    #[error("identifier_policy = \"custom\" needs identifier_instructions (non-empty text)")]
    CustomPolicyWithoutInstructions,
    /// `identifier_instructions` given with a policy other than `custom`, which ignores them.
    #[error(
        "identifier_instructions: only used with identifier_policy = \"custom\", found policy \
         {0:?}; remove them or set the policy to custom"
    )]
    InstructionsWithoutCustomPolicy(IdentifierPolicy),
}

impl CompactionSettings {
    /// Rejects settings that cannot be what the author meant.
    pub fn validate(&self) -> Result<(), CompactionSettingsError> {
        if self.keep_recent_turns > MAX_KEEP_RECENT_TURNS {
            return Err(CompactionSettingsError::KeepRecentTurns(
                self.keep_recent_turns,
            ));
        }
        for (field, found) in [
            ("max_history_share", self.max_history_share),
            ("base_chunk_ratio", self.base_chunk_ratio),
            ("min_chunk_ratio", self.min_chunk_ratio),
        ] {
            if !(found.is_finite() && found > 0.0 && found <= 1.0) {
                return Err(CompactionSettingsError::Share { field, found });
            }
        }
        if self.min_chunk_ratio > self.base_chunk_ratio {
            return Err(CompactionSettingsError::ChunkRatioOrder {
                base: self.base_chunk_ratio,
                min: self.min_chunk_ratio,
            });
        }
        if !(1..=MAX_PARTS).contains(&self.parts) {
            return Err(CompactionSettingsError::Parts(self.parts));
        }
        let margin = self.safety_margin;
        if !(margin.is_finite() && (1.0..=3.0).contains(&margin)) {
            return Err(CompactionSettingsError::SafetyMargin(margin));
        }
        if self.quality_guard.max_retries > MAX_QUALITY_GUARD_RETRIES {
            return Err(CompactionSettingsError::QualityRetries(
                self.quality_guard.max_retries,
            ));
        }
        if self.tool_failures.max_chars < 4 {
            return Err(CompactionSettingsError::ToolFailureChars(
                self.tool_failures.max_chars,
            ));
        }
        let limit = self.max_custom_instructions_chars;
        if !(1..=MAX_CUSTOM_INSTRUCTIONS_CHARS).contains(&limit) {
            return Err(CompactionSettingsError::CustomInstructionsLimit(limit));
        }
        if let Some(text) = &self.custom_instructions {
            let found = text.trim().chars().count();
            if found > limit {
                return Err(CompactionSettingsError::CustomInstructionsTooLong { found, limit });
            }
        }
        if self.timeout_ms == 0 {
            return Err(CompactionSettingsError::ZeroTimeout);
        }
        if self.max_timeout_ms < self.timeout_ms {
            return Err(CompactionSettingsError::HardCapBelowTimeout {
                found: self.max_timeout_ms,
                timeout_ms: self.timeout_ms,
            });
        }
        let has_instructions = self
            .identifier_instructions
            .as_deref()
            .is_some_and(|text| !text.trim().is_empty());
        match self.identifier_policy {
            IdentifierPolicy::Custom if !has_instructions => {
                return Err(CompactionSettingsError::CustomPolicyWithoutInstructions);
            }
            IdentifierPolicy::Strict | IdentifierPolicy::Off
                if self.identifier_instructions.is_some() =>
            {
                return Err(CompactionSettingsError::InstructionsWithoutCustomPolicy(
                    self.identifier_policy,
                ));
            }
            IdentifierPolicy::Strict | IdentifierPolicy::Off | IdentifierPolicy::Custom => {}
        }
        Ok(())
    }

    /// Context size above which the threshold trigger fires: `window − reserve_tokens`.
    pub fn threshold_tokens(&self, window_tokens: u64) -> u64 {
        window_tokens.saturating_sub(self.reserve_tokens)
    }

    /// Summarizer calls one summary may take at most: `1 + max_retries` with the guard on.
    pub fn max_attempts(&self) -> u32 {
        if self.quality_guard.enabled {
            1 + self.quality_guard.max_retries
        } else {
            1
        }
    }

    /// `tokens × safety_margin`, rounded up.
    pub fn with_margin(&self, tokens: u64) -> u64 {
        (tokens as f64 * self.safety_margin).ceil() as u64
    }

    /// Output tokens a summary may take: pi's `0.8 × reserve_tokens`, at least 256.
    pub fn max_summary_tokens(&self) -> u64 {
        ((self.reserve_tokens as f64 * 0.8).floor() as u64).max(256)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn defaults_are_the_seed_constants() {
        let settings = CompactionSettings::default();
        assert_eq!(settings.reserve_tokens, 20_000);
        assert_eq!(settings.keep_recent_turns, 3);
        assert_eq!(settings.max_history_share, 0.5);
        assert_eq!(settings.parts, 2);
        assert_eq!(settings.base_chunk_ratio, 0.4);
        assert_eq!(settings.min_chunk_ratio, 0.15);
        assert_eq!(settings.summarization_overhead_tokens, 4096);
        assert_eq!(settings.safety_margin, 1.2);
        assert!(settings.quality_guard.enabled);
        assert_eq!(settings.quality_guard.max_retries, 1);
        assert_eq!(settings.tool_failures.max_failures, 8);
        assert_eq!(settings.tool_failures.max_chars, 240);
        assert_eq!(settings.max_critical_rules_chars, 2000);
        assert_eq!(settings.max_custom_instructions_chars, 800);
        assert_eq!(settings.timeout_ms, 300_000);
        assert_eq!(settings.identifier_policy, IdentifierPolicy::Strict);
        settings.validate().unwrap();
    }

    #[test]
    fn toml_overrides_and_rejects_unknown_keys() {
        let settings: CompactionSettings = toml::from_str(
            "keep_recent_turns = 5\nidentifier_policy = \"off\"\n[quality_guard]\nmax_retries = 3\n",
        )
        .unwrap();
        assert_eq!(settings.keep_recent_turns, 5);
        assert_eq!(settings.identifier_policy, IdentifierPolicy::Off);
        assert_eq!(settings.quality_guard.max_retries, 3);
        assert!(settings.quality_guard.enabled);
        settings.validate().unwrap();

        let error = toml::from_str::<CompactionSettings>("keep_recent = 5").unwrap_err();
        assert!(error.to_string().contains("keep_recent"), "{error}");
    }

    #[test]
    fn recent_turns_above_twelve_are_rejected() {
        let settings = CompactionSettings {
            keep_recent_turns: 13,
            ..CompactionSettings::default()
        };
        let error = settings.validate().unwrap_err();
        assert_eq!(error, CompactionSettingsError::KeepRecentTurns(13));
        assert_eq!(
            error.to_string(),
            "keep_recent_turns: expected at most 12, found 13"
        );
    }

    #[test]
    fn quality_retries_above_three_are_rejected() {
        let settings = CompactionSettings {
            quality_guard: QualityGuardSettings {
                enabled: true,
                max_retries: 4,
            },
            ..CompactionSettings::default()
        };
        assert_eq!(
            settings.validate(),
            Err(CompactionSettingsError::QualityRetries(4))
        );
    }

    #[test]
    fn bad_shares_ratios_and_margins_are_rejected() {
        let share = CompactionSettings {
            max_history_share: 0.0,
            ..CompactionSettings::default()
        };
        assert!(matches!(
            share.validate(),
            Err(CompactionSettingsError::Share {
                field: "max_history_share",
                ..
            })
        ));
        let order = CompactionSettings {
            min_chunk_ratio: 0.5,
            ..CompactionSettings::default()
        };
        assert!(matches!(
            order.validate(),
            Err(CompactionSettingsError::ChunkRatioOrder { .. })
        ));
        let margin = CompactionSettings {
            safety_margin: 0.9,
            ..CompactionSettings::default()
        };
        assert_eq!(
            margin.validate(),
            Err(CompactionSettingsError::SafetyMargin(0.9))
        );
        let parts = CompactionSettings {
            parts: 0,
            ..CompactionSettings::default()
        };
        assert_eq!(parts.validate(), Err(CompactionSettingsError::Parts(0)));
    }

    #[test]
    fn identifier_policy_and_instructions_must_agree() {
        let custom = CompactionSettings {
            identifier_policy: IdentifierPolicy::Custom,
            ..CompactionSettings::default()
        };
        assert_eq!(
            custom.validate(),
            Err(CompactionSettingsError::CustomPolicyWithoutInstructions)
        );
        let stray = CompactionSettings {
            identifier_instructions: Some("keep ticket ids".into()),
            ..CompactionSettings::default()
        };
        assert_eq!(
            stray.validate(),
            Err(CompactionSettingsError::InstructionsWithoutCustomPolicy(
                IdentifierPolicy::Strict
            ))
        );
        let good = CompactionSettings {
            identifier_policy: IdentifierPolicy::Custom,
            identifier_instructions: Some("keep ticket ids".into()),
            ..CompactionSettings::default()
        };
        good.validate().unwrap();
    }

    #[test]
    fn configured_custom_instructions_over_the_limit_are_an_error() {
        let settings = CompactionSettings {
            custom_instructions: Some("x".repeat(801)),
            ..CompactionSettings::default()
        };
        assert_eq!(
            settings.validate(),
            Err(CompactionSettingsError::CustomInstructionsTooLong {
                found: 801,
                limit: 800
            })
        );
    }

    #[test]
    fn threshold_is_window_minus_reserve() {
        let settings = CompactionSettings::default();
        assert_eq!(settings.threshold_tokens(200_000), 180_000);
        assert_eq!(settings.threshold_tokens(10_000), 0);
        assert_eq!(settings.max_attempts(), 2);
        assert_eq!(settings.max_summary_tokens(), 16_000);
    }
}
