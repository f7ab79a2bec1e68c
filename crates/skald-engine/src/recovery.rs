//! Overflow recovery (seed 003 §4, OpenClaw's `run.ts` loop): one model call for a stored
//! session, made to succeed when the prompt turns out too large for the model.
//!
//! [`complete_turn`] assembles the session's context ([`session_context`](skald_core::session::session_context) → [`assemble`]),
//! compacts first when the context is over the threshold, calls the model, and on success appends
//! the answer to the session. When the provider reports a context overflow — an
//! [`LlmError::ContextOverflow`] ("promptError") or an answer with stop reason `error` whose text
//! is an overflow ("assistantError") — it follows the seed's decision tree:
//!
//! - **Branch A:** this attempt already compacted (the threshold compaction ran and shrank the
//!   context) → retry directly, counting an overflow compaction attempt.
//! - **Branch B:** otherwise, while fewer than `max_overflow_compactions` (3) overflow
//!   compaction attempts were made → compact with [`CompactionTrigger::Overflow`]; retry when it
//!   compacted, else fall back.
//! - **Fallback:** once per turn, cut the session's tool results persistently (a new branch, the
//!   originals in the ref store first, the marker naming each ref) and retry when anything was
//!   cut; otherwise give up with [`CONTEXT_OVERFLOW_MESSAGE`].
//!
//! A compaction whose own summarizer call overflowed skips branch B from then on (compacting
//! again would overflow again). `max_iterations` caps the model calls of one turn whatever the
//! branches do. Every other provider error is returned as it is ([`RecoveryError::Llm`]): a rate
//! limit or an auth failure is never taken for an overflow, and nothing is retried that the
//! client did not already retry.
//!
//! [`complete_turn_with_memory`] adds long-term memory ([`MemoryHooks`]): the two-threshold
//! upload before the first call, the archive and extraction of every compacted span, and recall
//! ([`RecallHook`]: the session-start profile and listing, the turn's recalled memories and the
//! memory tools, given to each call and never stored).
//!
//! [`TurnDriver`] is the same turn for a caller that sends the requests itself (the proxy, which
//! forwards raw JSON and streams the answer): it prepares each call ([`PrepareContext`], no
//! model needed) and takes the overflow decisions; [`complete_turn_with_memory`] is its loop
//! around a [`ChatModel`].
//!
//! What the user gave is never lost: compaction appends a checkpoint, truncation forks a branch
//! (the old one stays readable), and nothing is written after the caller cancels.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use skald_core::compaction::CompactionSettings;
//! use skald_core::message::{Message, Role};
//! use skald_core::pipeline::policy::Policy;
//! use skald_engine::SessionState;
//! use skald_engine::recovery::{RecoveryError, RecoverySettings, TurnContext, complete_turn};
//! use skald_llm::{ExtractiveSummarizer, LlmConfig, client_from_config};
//! use skald_store::{SessionStore, SqliteRefStore, SqliteSessionStore};
//! use tokio_util::sync::CancellationToken;
//!
//! let sessions = SqliteSessionStore::open("skald.db")?;
//! let refs = SqliteRefStore::open("skald.db", Default::default())?;
//! let config = LlmConfig::from_toml_str(&std::fs::read_to_string("skald.toml")?)?;
//! let model = client_from_config(config.chat.as_ref().ok_or("no [llm] table")?)?;
//! sessions.append_message("acme", "s1", Message::text(Role::User, "Why does the build fail?"))?;
//!
//! let (policy, compaction, settings) =
//!     (Policy::preset("skald")?, CompactionSettings::default(), RecoverySettings::default());
//! let ctx = TurnContext {
//!     sessions: &sessions, refs: &refs, tenant: "acme", session_id: "s1",
//!     model: model.as_ref(), summarizer: &ExtractiveSummarizer::default(),
//!     policy: &policy, compaction: &compaction, window_tokens: 200_000,
//!     system_prompt: Some("You are a coding agent."), tools: &[],
//!     max_output_tokens: None, temperature: None, fetch_available: true,
//!     now_ms: 1_770_000_000_000, agents_md: None, settings: &settings,
//! };
//! match complete_turn(&ctx, &mut SessionState::default(), &CancellationToken::new()).await {
//!     Ok(turn) => println!("{} ({} model calls)", turn.response.text(), turn.recovery.attempts),
//!     // The seed's "Context overflow: prompt too large for the model. Try /reset …".
//!     Err(error @ RecoveryError::ContextOverflow { .. }) => eprintln!("{error}"),
//!     Err(error) => return Err(error.into()),
//! }
//! # Ok(())
//! # }
//! ```

mod truncation;

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Value, json};
use skald_core::compaction::{
    CompactionOutcome, CompactionSettings, CompactionTrigger, should_compact,
};
use skald_core::memory::tools::{is_memory_tool, tool_specs as memory_tool_specs};
use skald_core::message::{ToolSpec, Usage};
use skald_core::pipeline::TruncateSettings;
use skald_core::pipeline::policy::Policy;
use skald_core::pipeline::truncate::TruncateSettingsError;
use skald_core::tokens::estimate::json_estimate_chars;
use skald_core::tokens::{CHARS_PER_TOKEN, estimate_string_chars};
use skald_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Summarizer, SummaryRequest};
use skald_store::RefStore;
use skald_store::sessions::SessionStore;
use tokio_util::sync::CancellationToken;

use crate::EngineError;
use crate::assemble::AssembleReport;
use crate::compact::{CompactRequest, Compaction, SpanArchive, compact_and_archive};
use crate::memory::RecallReport;
use crate::memory_write::{ArchiveOutcome, MemoryWriter, UploadDriver, UploadStep};
use crate::session::SessionState;
use crate::view::{ViewRequest, prepare_view};
use skald_core::session::session_context;

pub use crate::view::RecallHook;
pub use truncation::{AGGREGATE_FLOOR_CHARS, TruncationSummary};

/// The seed's answer when every recovery step is spent.
pub const CONTEXT_OVERFLOW_MESSAGE: &str = "Context overflow: prompt too large for the model. Try \
     /reset (or /new) to start a fresh session, or use a larger-context model.";

/// Overflow compaction attempts per turn (`MAX_OVERFLOW_COMPACTION_ATTEMPTS`).
pub const DEFAULT_MAX_OVERFLOW_COMPACTIONS: u32 = 3;

/// Model calls per turn at most (the seed's run-loop cap is 32 to 160 depending on the number of
/// auth profiles; skald has one).
pub const DEFAULT_MAX_ITERATIONS: u32 = 32;

/// The reason written on the marker entry of the fallback's branch.
pub const TRUNCATION_REASON: &str = "overflow recovery: oversized tool results truncated \
     persistently (originals in the ref store)";

/// The limits of one turn's recovery.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoverySettings {
    /// Overflow compaction attempts (branch A retries included), seed: 3.
    pub max_overflow_compactions: u32,
    /// Model calls per turn at most, seed: 32.
    pub max_iterations: u32,
    /// The fallback's per-result budget: the truncate stage's settings with `min_keep_chars` 0
    /// (the recovery path keeps no minimum: the alternative is giving up).
    pub truncate: TruncateSettings,
}

impl Default for RecoverySettings {
    fn default() -> Self {
        RecoverySettings {
            max_overflow_compactions: DEFAULT_MAX_OVERFLOW_COMPACTIONS,
            max_iterations: DEFAULT_MAX_ITERATIONS,
            truncate: TruncateSettings {
                min_keep_chars: 0,
                ..TruncateSettings::default()
            },
        }
    }
}

impl RecoverySettings {
    /// Rejects settings that cannot work: no model call allowed, or truncation settings the
    /// truncate stage refuses.
    pub fn validate(&self) -> Result<(), RecoverySettingsError> {
        if self.max_iterations == 0 {
            return Err(RecoverySettingsError::NoIterations);
        }
        self.truncate.validate()?;
        Ok(())
    }
}

/// Recovery settings that make no sense.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecoverySettingsError {
    #[error("max_iterations: expected at least 1 (one model call), found 0")]
    NoIterations,
    #[error("truncate: {0}")]
    Truncate(#[from] TruncateSettingsError),
}

/// Everything one turn needs: where the session is, the model, and the settings.
#[derive(Clone, Copy)]
pub struct TurnContext<'a> {
    pub sessions: &'a dyn SessionStore,
    pub refs: &'a dyn RefStore,
    pub tenant: &'a str,
    pub session_id: &'a str,
    /// The model answering the turn.
    pub model: &'a dyn ChatModel,
    /// Writes compaction summaries (the session's model, a cheaper one, or the extractive one).
    pub summarizer: &'a dyn Summarizer,
    /// The pipeline run over the context on every call.
    pub policy: &'a Policy,
    pub compaction: &'a CompactionSettings,
    /// The model's context window in tokens.
    pub window_tokens: u64,
    /// The host's system prompt (skald's REF_ID instruction is appended once refs exist).
    pub system_prompt: Option<&'a str>,
    /// The host's tools as OpenAI function specs (skald adds `fetch_original_data` once refs
    /// exist and `fetch_available`).
    pub tools: &'a [Value],
    pub max_output_tokens: Option<u32>,
    pub temperature: Option<f32>,
    /// Whether the host runs `fetch_original_data` (see [`AssembleRequest::fetch_available`]).
    pub fetch_available: bool,
    /// When the call is made (epoch ms), for the prompt-cache clocks.
    pub now_ms: i64,
    /// The workspace's AGENTS.md, for the summary's critical-rules appendix.
    pub agents_md: Option<&'a str>,
    pub settings: &'a RecoverySettings,
}

impl<'a> TurnContext<'a> {
    /// What preparing a call needs: this context without the model (but its name) and its
    /// sampling settings.
    pub fn prepare_context(&self) -> PrepareContext<'a> {
        PrepareContext {
            model: Some(self.model.model_name()),
            sessions: self.sessions,
            refs: self.refs,
            tenant: self.tenant,
            session_id: self.session_id,
            summarizer: self.summarizer,
            policy: self.policy,
            compaction: self.compaction,
            window_tokens: self.window_tokens,
            system_prompt: self.system_prompt,
            tools: self.tools,
            fetch_available: self.fetch_available,
            now_ms: self.now_ms,
            agents_md: self.agents_md,
            settings: self.settings,
        }
    }
}

/// Everything preparing a turn's calls and recovering from their overflows needs — a
/// [`TurnContext`] without the model: a caller that sends the requests itself (the proxy, which
/// forwards raw JSON and streams) drives a [`TurnDriver`] with it. Fields as in [`TurnContext`].
#[derive(Clone, Copy)]
pub struct PrepareContext<'a> {
    /// The model the requests go to, when the caller knows it: token calibration is per model
    /// ([`SessionState::calibrated_tokens`]).
    pub model: Option<&'a str>,
    pub sessions: &'a dyn SessionStore,
    pub refs: &'a dyn RefStore,
    pub tenant: &'a str,
    pub session_id: &'a str,
    pub summarizer: &'a dyn Summarizer,
    pub policy: &'a Policy,
    pub compaction: &'a CompactionSettings,
    pub window_tokens: u64,
    pub system_prompt: Option<&'a str>,
    /// The host's tools as OpenAI function specs or bare `{name, …}` objects: counted in the
    /// request's size, and a skald tool of the same name is not offered again.
    pub tools: &'a [Value],
    pub fetch_available: bool,
    pub now_ms: i64,
    pub agents_md: Option<&'a str>,
    pub settings: &'a RecoverySettings,
}

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

/// Makes one model call for the session's current context and recovers from overflow (see the
/// module docs). On success the answer is appended to the session as a child of its leaf.
pub async fn complete_turn(
    ctx: &TurnContext<'_>,
    state: &mut SessionState,
    cancel: &CancellationToken,
) -> Result<TurnOutcome, RecoveryError> {
    complete_turn_with_memory(ctx, MemoryHooks::default(), state, cancel).await
}

/// Long-term memory around a turn (seed 002): the write path (Component 1) and recall
/// (Components 2–5). Each optional.
#[derive(Clone, Copy, Default)]
pub struct MemoryHooks<'a> {
    /// Archives and extracts the span of every compaction the turn makes.
    pub writer: Option<&'a MemoryWriter>,
    /// Consulted before the first call: the two-threshold background upload.
    pub uploads: Option<&'a UploadDriver>,
    /// What the model is given from memory on every call.
    pub recall: Option<&'a RecallHook<'a>>,
}

impl std::fmt::Debug for MemoryHooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryHooks")
            .field("writer", &self.writer.is_some())
            .field("uploads", &self.uploads.is_some())
            .field("recall", &self.recall.is_some())
            .finish()
    }
}

/// [`complete_turn`] with the memory write path: before the first call the upload driver (if
/// any) runs its planner on the request's size, and after every compaction that wrote a
/// checkpoint the writer (if any) archives the compacted span and extracts its memories. A
/// failure of the write path never fails the turn: it is recorded in the session (and retried)
/// or, when even that failed, listed in [`RecoveryReport::memory_errors`].
pub async fn complete_turn_with_memory(
    ctx: &TurnContext<'_>,
    memory: MemoryHooks<'_>,
    state: &mut SessionState,
    cancel: &CancellationToken,
) -> Result<TurnOutcome, RecoveryError> {
    let prepare = ctx.prepare_context();
    let mut driver = TurnDriver::new(&prepare, memory)?;
    loop {
        let mut call = driver.prepare(state, cancel).await?;
        call.request.max_output_tokens = ctx.max_output_tokens;
        call.request.temperature = ctx.temperature;
        let (error, source) = match ctx.model.complete(&call.request, cancel).await {
            Ok(response) => match response.overflow_error() {
                Some(error) => (error, OverflowSource::AssistantError),
                None => {
                    if cancel.is_cancelled() {
                        return Err(driver.aborted());
                    }
                    // The provider's count of what was sent calibrates the next turn's.
                    if let Some(usage) = response.message.meta.usage {
                        state.observe_usage(usage.total_input());
                    }
                    let entry = ctx.sessions.append_message(
                        ctx.tenant,
                        ctx.session_id,
                        response.message.clone(),
                    )?;
                    return Ok(TurnOutcome {
                        response,
                        entry_id: entry.id,
                        recovery: driver.into_report(),
                    });
                }
            },
            Err(error) if error.is_context_overflow() => (error, OverflowSource::PromptError),
            Err(error) => return Err(driver.failed(error)),
        };
        driver.recover(state, &call, error, source, cancel).await?;
    }
}

/// One turn's preparation and overflow recovery, for a caller that makes the model calls
/// itself. [`complete_turn_with_memory`] is this loop with a [`ChatModel`]:
///
/// 1. [`TurnDriver::prepare`] gives the next request (the first one after the upload planner
///    and the threshold compaction);
/// 2. the caller sends it; on success the turn is over ([`TurnDriver::into_report`]);
/// 3. on a context overflow, [`TurnDriver::recover`] compacts or truncates (seed 003 §4) and
///    returns `Ok` when the caller should prepare and send again, or the error that ends the
///    turn; any other failure ends it with [`TurnDriver::failed`].
///
/// A caller that continues a turn after running tools itself (the proxy executing skald's
/// tools) calls [`TurnDriver::prepare`] again: every call counts towards `max_iterations`.
pub struct TurnDriver<'c> {
    ctx: &'c PrepareContext<'c>,
    memory: MemoryHooks<'c>,
    turn: Turn,
    iteration: u32,
    /// The threshold compaction of the current call compacted (branch A on its overflow).
    compacted_this_attempt: bool,
}

impl<'c> TurnDriver<'c> {
    /// A driver for one turn; refuses settings that cannot work.
    pub fn new(
        ctx: &'c PrepareContext<'c>,
        memory: MemoryHooks<'c>,
    ) -> Result<TurnDriver<'c>, RecoveryError> {
        ctx.settings.validate()?;
        Ok(TurnDriver {
            ctx,
            memory,
            turn: Turn {
                report: RecoveryReport::default(),
                threshold_checked: false,
                truncation_attempted: false,
                compaction_overflowed: false,
            },
            iteration: 0,
            compacted_this_attempt: false,
        })
    }

    /// The next model call: the session's context through the pipeline and memory. Before the
    /// turn's first call the upload planner runs, and once per turn the threshold compaction
    /// (on the calibrated size, see [`SessionState::calibrated_tokens`]). The call's estimate is
    /// recorded for the model ([`SessionState::record_counted`]): a caller that reads the
    /// provider's usage feeds it back with [`SessionState::observe_usage`].
    pub async fn prepare(
        &mut self,
        state: &mut SessionState,
        cancel: &CancellationToken,
    ) -> Result<PreparedCall, RecoveryError> {
        let ctx = self.ctx;
        let memory = self.memory;
        self.iteration += 1;
        let iteration = self.iteration;
        let turn = &mut self.turn;
        if cancel.is_cancelled() {
            return Err(turn.aborted());
        }
        let mut call = prepare_call_with_memory(ctx, memory, state, &mut turn.report).await?;
        if let (Some(uploads), 1) = (memory.uploads, iteration) {
            let context_tokens = state.calibrated_tokens(ctx.model, call.request_tokens);
            match uploads
                .before_request(
                    state,
                    ctx.sessions,
                    ctx.tenant,
                    ctx.session_id,
                    context_tokens,
                    ctx.window_tokens,
                )
                .await
            {
                Ok(step) => {
                    if step.dropped.is_some() {
                        call =
                            prepare_call_with_memory(ctx, memory, state, &mut turn.report).await?;
                    }
                    turn.report.upload = Some(step);
                }
                Err(error) => turn.report.memory_errors.push(error.to_string()),
            }
        }
        self.compacted_this_attempt = false;
        if !turn.threshold_checked {
            // Once per turn: a context still over the threshold after compacting would trigger
            // again on every retry and never get smaller that way.
            turn.threshold_checked = true;
            let calibrated = state.calibrated_tokens(ctx.model, call.request_tokens);
            if should_compact(calibrated, ctx.window_tokens, ctx.compaction) {
                let record = run_compaction(
                    ctx,
                    memory,
                    &mut turn.report.memory_errors,
                    state,
                    CompactionTrigger::Threshold,
                    ctx.window_tokens,
                    Some(calibrated),
                    iteration,
                    cancel,
                )
                .await?;
                if cancel.is_cancelled() {
                    turn.report.compactions.push(record);
                    return Err(turn.aborted());
                }
                self.compacted_this_attempt = record.is_compacted();
                turn.note_compaction(record);
                if self.compacted_this_attempt {
                    call = prepare_call_with_memory(ctx, memory, state, &mut turn.report).await?;
                }
            }
        }
        turn.report.attempts += 1;
        state.record_counted(ctx.model, call.request_tokens);
        Ok(call)
    }

    /// The call `call` overflowed (`error` is a [`LlmError::ContextOverflow`] or an
    /// assistant-error overflow): follows the seed's decision tree. `Ok` means the session was
    /// made smaller (or the call had just been compacted): prepare and send again. An error
    /// ends the turn: [`RecoveryError::ContextOverflow`] when every step is spent,
    /// [`RecoveryError::IterationLimit`] at `max_iterations`.
    pub async fn recover(
        &mut self,
        state: &mut SessionState,
        call: &PreparedCall,
        error: LlmError,
        source: OverflowSource,
        cancel: &CancellationToken,
    ) -> Result<RecoveryAction, RecoveryError> {
        let ctx = self.ctx;
        let memory = self.memory;
        let iteration = self.iteration;
        let turn = &mut self.turn;
        let (requested_tokens, limit_tokens) = overflow_counts(&error);
        let mut record = OverflowRecord {
            attempt: iteration,
            source,
            requested_tokens,
            limit_tokens,
            message: error.to_string(),
            estimated_tokens: call.request_tokens,
            action: RecoveryAction::GaveUp,
        };
        if iteration >= ctx.settings.max_iterations {
            record.action = RecoveryAction::IterationLimit;
            turn.report.overflows.push(record);
            return Err(RecoveryError::IterationLimit {
                iterations: iteration,
                last_error: error,
                report: Box::new(std::mem::take(&mut turn.report)),
            });
        }

        let under_cap =
            turn.report.overflow_compaction_attempts < ctx.settings.max_overflow_compactions;
        let action = if self.compacted_this_attempt && under_cap {
            turn.report.overflow_compaction_attempts += 1;
            RecoveryAction::DirectRetry
        } else if under_cap && !turn.compaction_overflowed {
            turn.report.overflow_compaction_attempts += 1;
            let window = compaction_window(ctx.window_tokens, limit_tokens, ctx.compaction);
            let compaction = run_compaction(
                ctx,
                memory,
                &mut turn.report.memory_errors,
                state,
                CompactionTrigger::Overflow,
                window,
                requested_tokens,
                iteration,
                cancel,
            )
            .await?;
            if cancel.is_cancelled() {
                turn.report.compactions.push(compaction);
                turn.report.overflows.push(record);
                return Err(turn.aborted());
            }
            let compacted = compaction.is_compacted();
            turn.note_compaction(compaction);
            if compacted {
                RecoveryAction::Compacted
            } else {
                turn.fallback(ctx, state, call, &record, cancel)?
            }
        } else {
            turn.fallback(ctx, state, call, &record, cancel)?
        };
        record.action = action;
        turn.report.overflows.push(record);
        match action {
            RecoveryAction::DirectRetry | RecoveryAction::Compacted | RecoveryAction::Truncated => {
                Ok(action)
            }
            RecoveryAction::GaveUp | RecoveryAction::IterationLimit => {
                Err(RecoveryError::ContextOverflow {
                    last_error: error,
                    report: Box::new(std::mem::take(&mut turn.report)),
                })
            }
        }
    }

    /// Ends the turn on a provider failure that is not an overflow ([`LlmError::Aborted`]
    /// becomes [`RecoveryError::Aborted`]).
    pub fn failed(mut self, error: LlmError) -> RecoveryError {
        if matches!(error, LlmError::Aborted) {
            return self.turn.aborted();
        }
        RecoveryError::Llm {
            source: error,
            report: Box::new(self.turn.report),
        }
    }

    /// Ends the turn because the caller cancelled.
    pub fn aborted(mut self) -> RecoveryError {
        self.turn.aborted()
    }

    /// What recovery did so far.
    pub fn report(&self) -> &RecoveryReport {
        &self.turn.report
    }

    /// What recovery did during the turn.
    pub fn into_report(self) -> RecoveryReport {
        self.turn.report
    }
}

/// The state of one turn's recovery.
struct Turn {
    report: RecoveryReport,
    threshold_checked: bool,
    /// The fallback runs once per turn (`toolResultTruncationAttempted`).
    truncation_attempted: bool,
    /// A compaction failed because its own summarizer call overflowed: compacting again would too.
    compaction_overflowed: bool,
}

impl Turn {
    fn aborted(&mut self) -> RecoveryError {
        RecoveryError::Aborted {
            report: Box::new(std::mem::take(&mut self.report)),
        }
    }

    fn note_compaction(&mut self, record: CompactionRecord) {
        if record.summarizer_overflowed && !record.is_compacted() {
            self.compaction_overflowed = true;
        }
        self.report.compactions.push(record);
    }

    /// The fallback: truncate once, else give up.
    fn fallback(
        &mut self,
        ctx: &PrepareContext<'_>,
        state: &mut SessionState,
        call: &PreparedCall,
        overflow: &OverflowRecord,
        cancel: &CancellationToken,
    ) -> Result<RecoveryAction, RecoveryError> {
        if self.truncation_attempted {
            return Ok(RecoveryAction::GaveUp);
        }
        self.truncation_attempted = true;
        if cancel.is_cancelled() {
            return Err(self.aborted());
        }
        let record = truncate_session(ctx, state, call, overflow)?;
        let truncated = record.truncated();
        self.report.truncation = Some(record);
        Ok(if truncated {
            RecoveryAction::Truncated
        } else {
            RecoveryAction::GaveUp
        })
    }
}

/// One request, ready to send, with skald's estimate of its size.
#[derive(Debug, Clone)]
pub struct PreparedCall {
    /// System prompt: the context's [`PrepareContext::system_prompt`] with skald's additions
    /// (the REF_ID instruction, memory's profile); only the additions when it has none.
    /// Tools: the host's, then the skald tools offered (`offered_tools`) as OpenAI function specs.
    pub request: ChatRequest,
    /// The skald tools this call offers that the host did not define itself
    /// (`fetch_original_data` once refs exist, the memory tools with a recall hook).
    pub offered_tools: Vec<ToolSpec>,
    /// What the pipeline did to the session's messages.
    pub assemble: AssembleReport,
    /// Estimated tokens of the assembled session messages (without what memory injects).
    pub message_tokens: u64,
    /// Estimated tokens of the whole request: messages, system prompt and tools.
    pub request_tokens: u64,
}

/// The view of the session for this call ([`prepare_view`]: the pipeline, then what recall
/// gives it when a hook is given), as a request. Memory's additions count in the request's
/// size, so the threshold sees what the model will be sent.
async fn prepare_call_with_memory(
    ctx: &PrepareContext<'_>,
    memory: MemoryHooks<'_>,
    state: &mut SessionState,
    report: &mut RecoveryReport,
) -> Result<PreparedCall, RecoveryError> {
    let view = prepare_view(
        &ViewRequest {
            sessions: ctx.sessions,
            refs: ctx.refs,
            tenant: ctx.tenant,
            session_id: ctx.session_id,
            policy: ctx.policy,
            window_tokens: ctx.window_tokens,
            now_ms: ctx.now_ms,
            fetch_available: ctx.fetch_available,
            memory: memory.recall,
            pending_prompt: None,
        },
        state,
    )
    .await?;
    let system = match (ctx.system_prompt, view.pipeline_addition.as_deref()) {
        (Some(host), Some(addition)) => Some(format!("{host}\n\n{addition}")),
        (Some(host), None) => Some(host.to_owned()),
        (None, Some(addition)) => Some(addition.to_owned()),
        (None, None) => None,
    };
    let mut tools = ctx.tools.to_vec();
    let mut overhead_chars = system.as_deref().map_or(0, estimate_string_chars)
        + tools.iter().map(json_estimate_chars).sum::<usize>();
    // Overhead, not messages: the persistent truncation shrinks the stored messages, and what
    // memory adds must still fit beside them.
    let mut memory_chars = view.memory_chars;
    let mut offered_tools = Vec::new();
    for spec in view.tools {
        let Some((function, chars)) = offered_function(&tools, &spec) else {
            continue;
        };
        tools.push(function);
        if is_memory_tool(&spec.name) {
            memory_chars += chars;
        } else {
            overhead_chars += chars;
        }
        offered_tools.push(spec);
    }
    let system = match (system, view.memory_addition.as_deref()) {
        (Some(system), Some(addition)) => Some(format!("{system}\n\n{addition}")),
        (None, Some(addition)) => Some(addition.to_owned()),
        (system, None) => system,
    };
    let overhead_tokens = overhead_chars.div_ceil(CHARS_PER_TOKEN) as u64;
    let memory_tokens = memory_chars.div_ceil(CHARS_PER_TOKEN) as u64 + view.recall_tokens;
    if let Some(memory) = view.memory {
        report.recall = Some(memory.recall);
    }
    Ok(PreparedCall {
        message_tokens: view.message_tokens,
        request_tokens: view.message_tokens + overhead_tokens + memory_tokens,
        offered_tools,
        assemble: view.report,
        request: ChatRequest {
            system,
            messages: view.messages,
            tools,
            max_output_tokens: None,
            temperature: None,
        },
    })
}

/// `spec` as an OpenAI function spec and its estimated size, unless the request's tools already
/// have one of that name (the host's own definition wins).
fn offered_function(tools: &[Value], spec: &ToolSpec) -> Option<(Value, usize)> {
    if tools.iter().any(|tool| tool_name(tool) == Some(&spec.name)) {
        return None;
    }
    if let Some((_, function, chars)) = MEMORY_FUNCTIONS
        .iter()
        .find(|(name, _, _)| *name == spec.name)
    {
        return Some((function.clone(), *chars));
    }
    let function = function_spec(spec);
    let chars = json_estimate_chars(&function);
    Some((function, chars))
}

/// The memory tools as function specs with their estimated sizes, built once: every call of a
/// session with recall offers them.
static MEMORY_FUNCTIONS: LazyLock<Vec<(String, Value, usize)>> = LazyLock::new(|| {
    memory_tool_specs()
        .iter()
        .map(|spec| {
            let function = function_spec(spec);
            let chars = json_estimate_chars(&function);
            (spec.name.clone(), function, chars)
        })
        .collect()
});

/// The name of an OpenAI function spec (or a bare `{name, …}`).
fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("function")
        .unwrap_or(tool)
        .get("name")
        .and_then(Value::as_str)
}

/// A skald tool as an OpenAI function spec (the shape the proxy writes into each API's own).
pub fn function_spec(spec: &ToolSpec) -> Value {
    let mut function = serde_json::Map::new();
    function.insert("name".to_owned(), Value::String(spec.name.clone()));
    if let Some(description) = &spec.description {
        function.insert("description".to_owned(), Value::String(description.clone()));
    }
    if !spec.parameters.is_null() {
        function.insert("parameters".to_owned(), spec.parameters.clone());
    }
    json!({"type": "function", "function": Value::Object(function)})
}

fn overflow_counts(error: &LlmError) -> (Option<u64>, Option<u64>) {
    match error {
        LlmError::ContextOverflow {
            requested_tokens,
            limit_tokens,
            ..
        } => (*requested_tokens, *limit_tokens),
        LlmError::RateLimited { .. }
        | LlmError::QuotaExceeded { .. }
        | LlmError::Auth { .. }
        | LlmError::BadRequest { .. }
        | LlmError::Server { .. }
        | LlmError::Timeout { .. }
        | LlmError::Aborted
        | LlmError::Transport { .. }
        | LlmError::InvalidResponse { .. }
        | LlmError::InvalidRequest { .. }
        | LlmError::Config { .. } => (None, None),
    }
}

/// The window an overflow compaction plans for: the provider's stated limit when it is smaller
/// than the configured window (the provider knows its model) and still leaves room above the
/// reserve; the configured window otherwise.
fn compaction_window(window: u64, limit: Option<u64>, settings: &CompactionSettings) -> u64 {
    match limit {
        Some(limit) if limit < window && limit > settings.reserve_tokens => limit,
        Some(_) | None => window,
    }
}

/// Runs one compaction through a summarizer that notes whether a summary call overflowed, and
/// lets the session state know about refs a tail truncation stored.
#[allow(clippy::too_many_arguments)]
async fn run_compaction(
    ctx: &PrepareContext<'_>,
    memory: MemoryHooks<'_>,
    memory_errors: &mut Vec<String>,
    state: &mut SessionState,
    trigger: CompactionTrigger,
    window_tokens: u64,
    context_tokens: Option<u64>,
    attempt: u32,
    cancel: &CancellationToken,
) -> Result<CompactionRecord, RecoveryError> {
    let watch = OverflowWatch {
        inner: ctx.summarizer,
        overflowed: AtomicBool::new(false),
    };
    let request = CompactRequest {
        tenant: ctx.tenant,
        session_id: ctx.session_id,
        window_tokens,
        trigger,
        settings: ctx.compaction,
        custom_instructions: None,
        agents_md: ctx.agents_md,
        context_tokens,
    };
    let archive = memory.writer.map(|writer| SpanArchive {
        writer,
        system_prompt: ctx.system_prompt,
    });
    let Compaction {
        result,
        memory_archive,
        memory_error,
    } = compact_and_archive(
        ctx.sessions,
        ctx.refs,
        &watch,
        &request,
        archive,
        Some(state),
        cancel,
    )
    .await?;
    memory_errors.extend(memory_error);
    Ok(CompactionRecord {
        attempt,
        trigger,
        window_tokens,
        outcome: result.outcome,
        checkpoint_entry_id: result.checkpoint_entry_id,
        summarizer_overflowed: watch.overflowed.load(Ordering::Relaxed),
        memory_archive,
    })
}

/// The fallback: plans the persistent truncation and writes it — originals first, then the
/// branch.
fn truncate_session(
    ctx: &PrepareContext<'_>,
    state: &mut SessionState,
    call: &PreparedCall,
    overflow: &OverflowRecord,
) -> Result<TruncationRecord, RecoveryError> {
    let window = match overflow.limit_tokens {
        Some(limit) if limit > 0 => limit.min(ctx.window_tokens),
        Some(_) | None => ctx.window_tokens,
    };
    let goal = truncation::TruncationGoal {
        window_tokens: window,
        target_tokens: truncation_target(window, ctx.compaction, overflow),
        overhead_tokens: call.request_tokens.saturating_sub(call.message_tokens),
    };
    let session = ctx.sessions.load(ctx.tenant, ctx.session_id)?;
    let context = session_context(&session, None);
    let plan =
        truncation::plan_session_truncation(&session, &context, goal, &ctx.settings.truncate);
    let mut record = TruncationRecord {
        attempt: overflow.attempt,
        summary: plan.summary,
        ref_ids: Vec::new(),
        rewritten_entries: plan.rewrites.len(),
        marker_entry_id: None,
        leaf_entry_id: None,
    };
    if plan.rewrites.is_empty() {
        return Ok(record);
    }
    // Originals first: no marker naming a ref is stored before the ref is.
    for new_ref in &plan.new_refs {
        ctx.refs.put(ctx.tenant, &new_ref.payload)?;
        let id = new_ref.id.to_string();
        state.stored_refs.insert(id.clone());
        record.ref_ids.push(id);
    }
    let rewrite = ctx.sessions.rewrite_branch(
        ctx.tenant,
        ctx.session_id,
        plan.rewrites,
        TRUNCATION_REASON,
    )?;
    record.marker_entry_id = Some(rewrite.marker_id);
    record.leaf_entry_id = Some(rewrite.leaf_id);
    Ok(record)
}

/// Estimated tokens the request must get under: the window less the reply's reserve (half the
/// window when the reserve is not smaller than it), scaled down by how much the provider counted
/// over skald's estimate when it said.
fn truncation_target(window: u64, settings: &CompactionSettings, overflow: &OverflowRecord) -> u64 {
    let fit = if window > settings.reserve_tokens {
        window - settings.reserve_tokens
    } else {
        window / 2
    };
    match overflow.requested_tokens {
        Some(requested)
            if requested > overflow.estimated_tokens && overflow.estimated_tokens > 0 =>
        {
            let scaled =
                u128::from(fit) * u128::from(overflow.estimated_tokens) / u128::from(requested);
            u64::try_from(scaled).unwrap_or(fit)
        }
        Some(_) | None => fit,
    }
}

/// A summarizer that remembers whether any call overflowed (OpenClaw's
/// `isCompactionFailureError`: the compaction itself was too large for the model).
struct OverflowWatch<'a> {
    inner: &'a dyn Summarizer,
    overflowed: AtomicBool,
}

#[async_trait]
impl Summarizer for OverflowWatch<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn summarize(
        &self,
        request: &SummaryRequest,
        cancel: &CancellationToken,
    ) -> Result<String, LlmError> {
        let result = self.inner.summarize(request, cancel).await;
        if result.as_ref().is_err_and(LlmError::is_context_overflow) {
            self.overflowed.store(true, Ordering::Relaxed);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overflow(requested: Option<u64>, estimated: u64) -> OverflowRecord {
        OverflowRecord {
            attempt: 1,
            source: OverflowSource::PromptError,
            requested_tokens: requested,
            limit_tokens: Some(8_192),
            message: String::new(),
            estimated_tokens: estimated,
            action: RecoveryAction::GaveUp,
        }
    }

    #[test]
    fn the_target_is_the_window_less_the_reserve_scaled_by_the_providers_count() {
        let settings = CompactionSettings {
            reserve_tokens: 1_192,
            ..CompactionSettings::default()
        };
        assert_eq!(
            truncation_target(8_192, &settings, &overflow(None, 4_000)),
            7_000
        );
        // The provider counted twice what skald estimated: the estimate must halve.
        assert_eq!(
            truncation_target(8_192, &settings, &overflow(Some(8_000), 4_000)),
            3_500
        );
        // An estimate above the provider's count is not relaxed.
        assert_eq!(
            truncation_target(8_192, &settings, &overflow(Some(2_000), 4_000)),
            7_000
        );
        let default = CompactionSettings::default();
        assert_eq!(
            truncation_target(8_192, &default, &overflow(None, 1)),
            4_096
        );
    }

    #[test]
    fn an_overflow_compaction_plans_for_the_providers_limit_when_it_is_usable() {
        let settings = CompactionSettings {
            reserve_tokens: 1_000,
            ..CompactionSettings::default()
        };
        assert_eq!(compaction_window(32_000, Some(8_192), &settings), 8_192);
        assert_eq!(compaction_window(32_000, None, &settings), 32_000);
        assert_eq!(compaction_window(32_000, Some(64_000), &settings), 32_000);
        assert_eq!(compaction_window(32_000, Some(900), &settings), 32_000);
    }

    #[test]
    fn settings_without_iterations_are_refused() {
        let settings = RecoverySettings {
            max_iterations: 0,
            ..RecoverySettings::default()
        };
        assert_eq!(
            settings.validate(),
            Err(RecoverySettingsError::NoIterations)
        );
        assert_eq!(RecoverySettings::default().validate(), Ok(()));
        assert_eq!(RecoverySettings::default().max_overflow_compactions, 3);
        assert_eq!(RecoverySettings::default().max_iterations, 32);
        assert_eq!(RecoverySettings::default().truncate.min_keep_chars, 0);
    }

    #[test]
    fn the_give_up_message_is_the_seeds() {
        assert_eq!(
            CONTEXT_OVERFLOW_MESSAGE,
            "Context overflow: prompt too large for the model. Try /reset (or /new) to start a \
             fresh session, or use a larger-context model."
        );
    }
}
