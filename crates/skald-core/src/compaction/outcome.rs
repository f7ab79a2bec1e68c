//! When a compaction runs ([`CompactionTrigger`], [`should_compact`]) and how it ends
//! ([`CompactionOutcome`]). The rule this module owns: a compaction is `Compacted` only when the
//! context really shrank; anything else is `Skipped` (decided before any summarizer call) or
//! `Cancelled` (decided after work started), with a reason a caller can act on, and in both
//! cases the history stays exactly as it was.

use serde::Serialize;

use super::appendices::FileLists;
use super::prompts::Language;
use super::quality::{QualityFailure, QualityReport};
use super::settings::CompactionSettings;
use super::split::{FallbackLevel, TurnSplit};
use crate::message::Message;
use crate::pipeline::TruncateReport;
use crate::refs::NewRef;

/// Why a compaction was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionTrigger {
    /// The context grew above `window − reserve_tokens`.
    Threshold,
    /// A person or host asked (`skald compact`, `/compact`).
    Manual,
    /// The provider rejected a request as too long.
    Overflow,
}

impl CompactionTrigger {
    /// Whether a degraded result (a summary that failed the quality guard after every retry, or
    /// the seed's last-resort note when every summarizer call failed) is accepted. Only after an
    /// overflow: the request cannot go out as it is, and the seed's fallbacks exist so that the
    /// session can continue. A threshold or manual compaction is cancelled instead, leaving the
    /// history as it was, because the context still fits.
    pub fn accepts_degraded(self) -> bool {
        match self {
            CompactionTrigger::Overflow => true,
            CompactionTrigger::Threshold | CompactionTrigger::Manual => false,
        }
    }
}

/// True when a context of `context_tokens` should be compacted for a window of `window_tokens`:
/// compaction is enabled, the window is known, and the context is above
/// `window − reserve_tokens` (pi's `contextTokens > contextWindow − reserveTokens`).
pub fn should_compact(
    context_tokens: u64,
    window_tokens: u64,
    settings: &CompactionSettings,
) -> bool {
    settings.enabled
        && window_tokens > 0
        && context_tokens > settings.threshold_tokens(window_tokens)
}

/// Why nothing was attempted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SkipReason {
    /// Threshold trigger with compaction disabled in the settings.
    Disabled,
    /// Threshold trigger while the context is not above the threshold.
    BelowThreshold {
        /// The context's size.
        context_tokens: u64,
        /// The size above which the threshold trigger compacts.
        threshold_tokens: u64,
    },
    /// Everything is in the preserved recent turns (or is a leading system message), and the
    /// preserved turns fit the budget and `keep_recent_tokens`, or hold no safe cut point
    /// before their latest assistant step.
    NothingToCompact,
    /// Nothing can be summarised (no safe cut point inside the preserved turns either), and the
    /// preserved recent turns alone are over the budget with no tool result left to truncate.
    TailTooLarge {
        /// The preserved recent turns' size.
        tail_tokens: u64,
        /// The most the preserved turns may take: what the threshold leaves after the prefix and
        /// the summary's room, over the safety margin.
        budget_tokens: u64,
    },
    /// A person paused compaction for this session (the session's switches); any trigger.
    Paused,
}

impl SkipReason {
    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            SkipReason::Disabled => "compaction is disabled in the settings".to_owned(),
            SkipReason::BelowThreshold {
                context_tokens,
                threshold_tokens,
            } => format!(
                "context of {context_tokens} tokens is not above the threshold of \
                 {threshold_tokens}"
            ),
            SkipReason::NothingToCompact => {
                "nothing to compact: all messages are in the preserved recent turns".to_owned()
            }
            SkipReason::TailTooLarge {
                tail_tokens,
                budget_tokens,
            } => format!(
                "the preserved recent turns take {tail_tokens} tokens, over the budget of \
                 {budget_tokens}, and hold no tool result to truncate"
            ),
            SkipReason::Paused => "compaction is paused for this session".to_owned(),
        }
    }
}

/// Why work that started was abandoned.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CancelReason {
    /// The context would not be smaller after compacting.
    WouldNotShrink {
        /// The context's size before compacting.
        tokens_before: u64,
        /// What it would have been after.
        tokens_after: u64,
    },
    /// The whole compaction took longer than `timeout_ms` (the caller's clock).
    Timeout {
        /// The limit that was exceeded.
        timeout_ms: u64,
    },
    /// The caller aborted.
    Aborted,
    /// Every summarizer call for the history failed (only a last-resort note was left).
    SummarizerFailed {
        /// The error of the last call, as the summarizer reported it.
        last_error: String,
    },
    /// The summary still failed the quality guard after every retry.
    QualityGuardExhausted {
        /// How many summaries were written and audited.
        attempts: u32,
        /// What the last of them failed.
        failures: Vec<QualityFailure>,
    },
}

impl CancelReason {
    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            CancelReason::WouldNotShrink {
                tokens_before,
                tokens_after,
            } => format!(
                "compaction would not shrink the context ({tokens_before} -> {tokens_after} \
                 tokens)"
            ),
            CancelReason::Timeout { timeout_ms } => {
                format!("compaction took longer than {timeout_ms} ms")
            }
            CancelReason::Aborted => "compaction was aborted".to_owned(),
            CancelReason::SummarizerFailed { last_error } => {
                format!("every summarizer call failed; last error: {last_error}")
            }
            CancelReason::QualityGuardExhausted { attempts, failures } => format!(
                "the summary failed the quality guard after {attempts} attempts ({})",
                failures
                    .iter()
                    .map(QualityFailure::code)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The preserved tail after its largest tool results were truncated, and the middles of its
/// largest texts cut, because the tail alone was over the budget (see
/// [`super::tail::shrink_tail`]). The caller stores `new_refs` before anything that names them reaches a
/// model, and writes `messages` in place of the kept entries (a branch rewrite: the originals
/// stay in the session).
#[derive(Debug, Clone, PartialEq)]
pub struct TailTruncation {
    /// The whole preserved tail, in order, with the truncated results.
    pub messages: Vec<Message>,
    /// Originals of the truncated results and of the texts whose middles were cut.
    pub new_refs: Vec<NewRef>,
    /// What the truncate stage cut, result by result.
    pub report: TruncateReport,
    /// Texts (tool output, user and assistant text) whose middles were cut after truncating the
    /// results was not enough.
    pub middle_cuts: usize,
    /// The tail's size before truncating.
    pub tokens_before: u64,
    /// The tail's size after truncating.
    pub tokens_after: u64,
    /// Still over the budget after truncating every result as far as the truncate stage goes.
    pub still_over_budget: bool,
}

/// A compaction that replaced the history but could not bring the context to its target,
/// `window − reserve`: even with the history summarised and the kept turns shrunk as far as
/// they go (results truncated, middles cut), the summary, the kept tail, the pinned prefix and
/// the fixed overhead take more. Typed so that no caller mistakes it for a compaction that
/// landed: the next request is still over the threshold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverTarget {
    /// The context's size after compacting.
    pub tokens_after: u64,
    /// `window − reserve`, the most it should take.
    pub target_tokens: u64,
    /// What the summary message takes.
    pub summary_tokens: u64,
    /// What the kept turns take after shrinking.
    pub kept_tokens: u64,
    /// The pinned prefix (leading system messages) and the overhead outside the messages.
    pub fixed_tokens: u64,
}

impl OverTarget {
    /// One line for people.
    pub fn describe(&self) -> String {
        format!(
            "the context is still {} tokens, over window − reserve ({}): the kept turns take {} \
             after truncating and cutting, the summary {}, the pinned prefix and overhead {}",
            self.tokens_after,
            self.target_tokens,
            self.kept_tokens,
            self.summary_tokens,
            self.fixed_tokens
        )
    }
}

/// What a compaction did, for checkpoints, logs and `skald compact --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionDetails {
    /// What started the compaction.
    pub trigger: CompactionTrigger,
    /// The model's context window.
    pub window_tokens: u64,
    /// The threshold the trigger was measured against.
    pub threshold_tokens: u64,
    /// Leading system messages kept in front of the summary.
    pub pinned_prefix: usize,
    /// Messages summarised in the main pass.
    pub summarized_messages: usize,
    /// Oldest messages pruned for `max_history_share` and summarised first.
    pub dropped_messages: usize,
    /// Messages kept verbatim after the summary.
    pub preserved_messages: usize,
    /// Summarizer calls made, retries and merges included.
    pub summarizer_calls: u32,
    /// Summarizer calls that failed.
    pub failed_calls: u32,
    /// Summary attempts (the quality guard's retries included).
    pub attempts: u32,
    /// The deepest fallback level any part of the chosen summary needed.
    pub fallback_level: FallbackLevel,
    /// The merge of partial summaries failed; the partial summaries were joined instead.
    pub merge_fell_back: bool,
    /// The audit of the chosen summary (`None` when the guard is off).
    pub quality: Option<QualityReport>,
    /// A degraded result was accepted (overflow only; see
    /// [`CompactionTrigger::accepts_degraded`]).
    pub degraded: bool,
    /// The exact identifiers the summary was asked to keep.
    pub identifiers: Vec<String>,
    /// The language the summary was written in.
    pub language: Language,
    /// The files read and modified that the summary's appendix lists.
    pub files: FileLists,
    /// How many failed tool calls the summary's appendix lists.
    pub tool_failures: usize,
    /// Set when the kept part starts inside the preserved turns (a split turn).
    pub turn_split: Option<TurnSplit>,
    /// Tool results of the preserved tail that were truncated.
    pub truncated_tail_results: usize,
    /// Texts of the preserved tail whose middles were cut (originals in the ref store).
    pub cut_tail_texts: usize,
    /// Ref ids of the summarised history, listed under `## Exact identifiers`.
    pub offloaded_refs: Vec<String>,
    /// After compacting, the context is still above the threshold: the caller should not
    /// trigger again on the next request (nothing more can be freed this way).
    pub still_over_threshold: bool,
}

/// How a compaction ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CompactionOutcome {
    /// The history before `first_kept_index` is replaced by `summary`; the context is smaller.
    Compacted {
        /// The context's size before compacting.
        tokens_before: u64,
        /// The context's size after: prefix, summary and kept messages.
        tokens_after: u64,
        /// The final summary, appendices included.
        summary: String,
        /// Index (in the planned messages) of the first message kept verbatim; the length of
        /// the messages when none is kept.
        first_kept_index: usize,
        /// The host's id of that message (`MessageMeta::id`), when it has one.
        first_kept_entry: Option<String>,
        /// Present when the preserved tail was shrunk; its messages replace the kept ones.
        #[serde(skip)]
        tail_truncation: Option<Box<TailTruncation>>,
        /// What the compaction did, step by step.
        details: Box<CompactionDetails>,
        /// Set when the context is still over `window − reserve` after compacting (see
        /// [`OverTarget`]); [`CompactionOutcome::name`] is then `compacted_over_target`.
        over_target: Option<OverTarget>,
    },
    /// Nothing was attempted; the history is unchanged.
    Skipped {
        /// Why nothing was attempted.
        reason: SkipReason,
        /// The context's size, unchanged.
        tokens_before: u64,
    },
    /// Work started and was abandoned; the history is unchanged.
    Cancelled {
        /// Why the work was abandoned.
        reason: CancelReason,
        /// The context's size, unchanged.
        tokens_before: u64,
    },
}

impl CompactionOutcome {
    /// `compacted`, `compacted_over_target` (the history was replaced, but the context is still
    /// over `window − reserve`), `skipped` or `cancelled`, as reports name the outcome.
    pub fn name(&self) -> &'static str {
        match self {
            CompactionOutcome::Compacted {
                over_target: None, ..
            } => "compacted",
            CompactionOutcome::Compacted {
                over_target: Some(_),
                ..
            } => "compacted_over_target",
            CompactionOutcome::Skipped { .. } => "skipped",
            CompactionOutcome::Cancelled { .. } => "cancelled",
        }
    }

    /// True for [`CompactionOutcome::Compacted`].
    pub fn is_compacted(&self) -> bool {
        match self {
            CompactionOutcome::Compacted { .. } => true,
            CompactionOutcome::Skipped { .. } | CompactionOutcome::Cancelled { .. } => false,
        }
    }

    /// The tokens the context took before.
    pub fn tokens_before(&self) -> u64 {
        match self {
            CompactionOutcome::Compacted { tokens_before, .. }
            | CompactionOutcome::Skipped { tokens_before, .. }
            | CompactionOutcome::Cancelled { tokens_before, .. } => *tokens_before,
        }
    }

    /// The tokens the context takes after (unchanged unless compacted).
    pub fn tokens_after(&self) -> u64 {
        match self {
            CompactionOutcome::Compacted { tokens_after, .. } => *tokens_after,
            CompactionOutcome::Skipped { tokens_before, .. }
            | CompactionOutcome::Cancelled { tokens_before, .. } => *tokens_before,
        }
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            CompactionOutcome::Compacted {
                tokens_before,
                tokens_after,
                over_target,
                ..
            } => match over_target {
                None => format!("compacted: {tokens_before} -> {tokens_after} tokens"),
                Some(over) => format!(
                    "compacted over target: {tokens_before} -> {tokens_after} tokens; {}",
                    over.describe()
                ),
            },
            CompactionOutcome::Skipped { reason, .. } => format!("skipped: {}", reason.describe()),
            CompactionOutcome::Cancelled { reason, .. } => {
                format!("cancelled: {}", reason.describe())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_is_window_minus_reserve_exclusive() {
        let settings = CompactionSettings::default();
        assert!(!should_compact(180_000, 200_000, &settings));
        assert!(should_compact(180_001, 200_000, &settings));
        assert!(!should_compact(1_000_000, 0, &settings));
        let disabled = CompactionSettings {
            enabled: false,
            ..CompactionSettings::default()
        };
        assert!(!should_compact(199_999, 200_000, &disabled));
    }

    #[test]
    fn only_overflow_accepts_degraded_results() {
        assert!(CompactionTrigger::Overflow.accepts_degraded());
        assert!(!CompactionTrigger::Threshold.accepts_degraded());
        assert!(!CompactionTrigger::Manual.accepts_degraded());
    }

    #[test]
    fn skipped_and_cancelled_keep_tokens() {
        let skipped = CompactionOutcome::Skipped {
            reason: SkipReason::NothingToCompact,
            tokens_before: 42,
        };
        assert!(!skipped.is_compacted());
        assert_eq!(skipped.tokens_after(), 42);
        assert!(
            skipped
                .describe()
                .starts_with("skipped: nothing to compact")
        );
        let cancelled = CompactionOutcome::Cancelled {
            reason: CancelReason::Timeout { timeout_ms: 5 },
            tokens_before: 7,
        };
        assert_eq!(
            cancelled.describe(),
            "cancelled: compaction took longer than 5 ms"
        );
    }
}
