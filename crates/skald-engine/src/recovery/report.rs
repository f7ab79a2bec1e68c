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
    pub source: OverflowSource,
    /// The provider's figures, when its message states them.
    pub requested_tokens: Option<u64>,
    pub limit_tokens: Option<u64>,
    pub message: String,
    /// skald's estimate of what that call sent (messages, system prompt and tools).
    pub estimated_tokens: u64,
    pub action: RecoveryAction,
}

/// One compaction run during the turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionRecord {
    /// The model call (from 1) it ran before (threshold) or after (overflow).
    pub attempt: u32,
    pub trigger: CompactionTrigger,
    /// The window it planned for.
    pub window_tokens: u64,
    pub outcome: CompactionOutcome,
    pub checkpoint_entry_id: Option<String>,
    /// A summarizer call of this compaction itself failed with a context overflow.
    pub summarizer_overflowed: bool,
    /// The archive and memory extraction of the compacted span, when a memory writer was
    /// given ([`complete_turn_with_memory`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_archive: Option<ArchiveOutcome>,
}

impl CompactionRecord {
    pub fn is_compacted(&self) -> bool {
        self.outcome.is_compacted()
    }
}

/// The fallback truncation, when it ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TruncationRecord {
    /// The model call (from 1) whose overflow led to it.
    pub attempt: u32,
    pub summary: TruncationSummary,
    /// Refs holding the originals (stored before the branch was written).
    pub ref_ids: Vec<String>,
    /// Entries rewritten on the new branch.
    pub rewritten_entries: usize,
    /// The branch's marker entry and its new leaf (`None` when nothing was cut).
    pub marker_entry_id: Option<String>,
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
    pub overflows: Vec<OverflowRecord>,
    /// Threshold and overflow compactions, with their outcomes.
    pub compactions: Vec<CompactionRecord>,
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
        report: Box<RecoveryReport>,
    },
    /// The provider failed for another reason than the prompt's size (rate limit, auth, quota,
    /// bad request, server, timeout…), after the client's own retries.
    #[error("{source}")]
    Llm {
        #[source]
        source: LlmError,
        report: Box<RecoveryReport>,
    },
    /// The caller cancelled; the step that was running wrote nothing.
    #[error("aborted by the caller")]
    Aborted { report: Box<RecoveryReport> },
    /// `max_iterations` model calls were made without an answer.
    #[error(
        "overflow recovery stopped after {iterations} model calls (max_iterations); last error: \
         {last_error}"
    )]
    IterationLimit {
        iterations: u32,
        last_error: LlmError,
        report: Box<RecoveryReport>,
    },
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
