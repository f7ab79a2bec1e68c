//! What recovery did and how a turn ended: the records of overflows, compactions and the
//! fallback truncation, the turn's report, its outcome, and why it failed.

use super::*;

/// How the provider reported the overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OverflowSource {
    /// The request was rejected (HTTP 400/413…, the seed's "promptError").
    PromptError,
    /// The answer came back with stop reason `error` and an overflow text ("assistantError").
    AssistantError,
}

/// What recovery did about one overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAction {
    /// Branch A: the attempt had already compacted; retried as it was.
    DirectRetry,
    /// Branch B: compacted with the overflow trigger, then retried.
    Compacted,
    /// Fallback: tool results truncated persistently, then retried.
    Truncated,
    /// Every step was spent: [`RecoveryError::ContextOverflow`].
    GaveUp,
    /// The overflow came on the last iteration allowed: [`RecoveryError::IterationLimit`].
    IterationLimit,
}

/// One overflow the provider reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverflowRecord {
    /// The model call (from 1) that overflowed.
    pub attempt: u32,
    /// Whether the request was rejected or the answer reported the overflow.
    pub source: OverflowSource,
    /// The provider's figures, when its message states them.
    pub requested_tokens: Option<u64>,
    /// The context limit in tokens the provider's message states, if it states one.
    pub limit_tokens: Option<u64>,
    /// The provider's error message, as it gave it.
    pub message: String,
    /// skald's estimate of what that call sent (messages, system prompt and tools).
    pub estimated_tokens: u64,
    /// What recovery did about this overflow.
    pub action: RecoveryAction,
}

/// One compaction run during the turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionRecord {
    /// The model call (from 1) it ran before (threshold) or after (overflow).
    pub attempt: u32,
    /// Threshold (before a call) or overflow (after one).
    pub trigger: CompactionTrigger,
    /// The window it planned for.
    pub window_tokens: u64,
    /// Compacted, skipped or cancelled, with the context's tokens before and after.
    pub outcome: CompactionOutcome,
    /// The compaction entry written (`None` unless compacted).
    pub checkpoint_entry_id: Option<String>,
    /// A summarizer call of this compaction itself failed with a context overflow.
    pub summarizer_overflowed: bool,
    /// The archive and memory extraction of the compacted span, when a memory writer was
    /// given (memory on: [`MemoryHooks::writer`](crate::MemoryHooks::writer)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_archive: Option<ArchiveOutcome>,
}

impl CompactionRecord {
    /// Whether this compaction wrote a checkpoint and so changed the context.
    pub fn is_compacted(&self) -> bool {
        self.outcome.is_compacted()
    }
}

/// The fallback truncation, when it ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TruncationRecord {
    /// The model call (from 1) whose overflow led to it.
    pub attempt: u32,
    /// What the truncation cut, in figures.
    pub summary: TruncationSummary,
    /// Refs holding the originals (stored before the branch was written).
    pub ref_ids: Vec<String>,
    /// Entries rewritten on the new branch.
    pub rewritten_entries: usize,
    /// The branch's marker entry and its new leaf (`None` when nothing was cut).
    pub marker_entry_id: Option<String>,
    /// The new leaf of the truncation's branch, the session's leaf from then on (`None` when
    /// nothing was cut).
    pub leaf_entry_id: Option<String>,
}

impl TruncationRecord {
    /// True when the session was changed.
    pub fn truncated(&self) -> bool {
        self.marker_entry_id.is_some()
    }
}

/// Everything recovery did during one turn, in the order it happened within each list.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RecoveryReport {
    /// Model calls made.
    pub attempts: u32,
    /// The seed's `overflowCompactionAttempts`: branch A retries and branch B compactions.
    pub overflow_compaction_attempts: u32,
    /// Every overflow the provider reported, in order.
    pub overflows: Vec<OverflowRecord>,
    /// Threshold and overflow compactions, with their outcomes.
    pub compactions: Vec<CompactionRecord>,
    /// The fallback truncation, when it ran (at most once per turn).
    pub truncation: Option<TruncationRecord>,
    /// What the two-threshold upload did before the first call, when a driver was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upload: Option<UploadStep>,
    /// What recall injected into the last call, when a recall hook was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recall: Option<RecallReport>,
    /// The memory write path could not record something (the session store failed); the turn
    /// went on without it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub memory_errors: Vec<String>,
}

impl RecoveryReport {
    /// True when the first call went through with nothing to recover.
    pub fn is_clean(&self) -> bool {
        self.overflows.is_empty() && self.compactions.is_empty() && self.truncation.is_none()
    }
}

/// A turn that got an answer.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    /// The model's answer (also appended to the session).
    pub response: ChatResponse,
    /// The session entry holding the answer.
    pub entry_id: String,
    /// What recovery did on the way to the answer.
    pub recovery: RecoveryReport,
}

impl TurnOutcome {
    /// Tokens the provider reported for the successful call.
    pub fn usage(&self) -> Usage {
        self.response.usage
    }
}

/// Why a turn ended without an answer. Every variant that can follow model calls carries the
/// report of what recovery did; the session keeps every entry it had.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// Every recovery step was spent and the prompt still does not fit: the seed's message.
    #[error("{CONTEXT_OVERFLOW_MESSAGE}")]
    ContextOverflow {
        /// The provider's last overflow error.
        last_error: LlmError,
        /// What recovery did before it gave up.
        report: Box<RecoveryReport>,
    },
    /// The provider failed for another reason than the prompt's size (rate limit, auth, quota,
    /// bad request, server, timeout…), after the client's own retries.
    #[error("{source}")]
    Llm {
        /// The provider's error.
        #[source]
        source: LlmError,
        /// What recovery did before the failing call.
        report: Box<RecoveryReport>,
    },
    /// The caller cancelled; the step that was running wrote nothing.
    #[error("aborted by the caller")]
    Aborted {
        /// What recovery did before the caller cancelled.
        report: Box<RecoveryReport>,
    },
    /// `max_iterations` model calls were made without an answer.
    #[error(
        "overflow recovery stopped after {iterations} model calls (max_iterations); last error: \
         {last_error}"
    )]
    IterationLimit {
        /// Model calls made (`max_iterations`).
        iterations: u32,
        /// The error of the last call, an overflow.
        last_error: LlmError,
        /// What recovery did over those calls.
        report: Box<RecoveryReport>,
    },
    /// The recovery settings are invalid ([`RecoverySettings::validate`]); no model call was made.
    #[error("recovery settings: {0}")]
    Settings(#[from] RecoverySettingsError),
    /// A store failed, the session is unknown, or a compaction could not be planned.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl RecoveryError {
    /// What recovery did before the turn ended, when it got that far.
    pub fn report(&self) -> Option<&RecoveryReport> {
        match self {
            RecoveryError::ContextOverflow { report, .. }
            | RecoveryError::Llm { report, .. }
            | RecoveryError::Aborted { report }
            | RecoveryError::IterationLimit { report, .. } => Some(report),
            RecoveryError::Settings(_) | RecoveryError::Engine(_) => None,
        }
    }
}

impl From<skald_store::SessionError> for RecoveryError {
    fn from(error: skald_store::SessionError) -> Self {
        RecoveryError::Engine(EngineError::Session(error))
    }
}

impl From<skald_store::StoreError> for RecoveryError {
    fn from(error: skald_store::StoreError) -> Self {
        RecoveryError::Engine(EngineError::Store(error))
    }
}
