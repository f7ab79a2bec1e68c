//! Overflow recovery (seed 003 §4, OpenClaw's `run.ts` loop): the model calls of a turn for a
//! stored session, made to succeed when the prompt turns out too large for the model.
//!
//! [`TurnDriver`] prepares each call ([`PrepareContext`], no model needed) — the session's
//! context ([`session_context`] → [`assemble`](crate::assemble())), compacted first when it is
//! over the threshold — and takes the overflow decisions. When the provider reports a context
//! overflow — an [`LlmError::ContextOverflow`] ("promptError") or an answer with stop reason
//! `error` whose text is an overflow ("assistantError") — it follows the seed's decision tree:
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
//! [`MemoryHooks`] add long-term memory: the two-threshold upload before the first call, the
//! archive and extraction of every compacted span, and recall ([`RecallHook`]: the session-start
//! profile and listing, the turn's recalled memories and the memory tools, given to each call
//! and never stored).
//!
//! The engine's [`TurnLoop`](crate::TurnLoop) is the whole turn on top of the driver for every caller: the proxy,
//! which forwards raw JSON and streams the answer, drives it with its own I/O, and
//! [`Engine::complete_turn`](crate::Engine::complete_turn) drives it with a [`ChatModel`](skald_llm::ChatModel). Either
//! way a call of skald's own tools (`fetch_original_data`, the memory tools) is run and recorded
//! as a hidden round and the turn goes on to the model's next answer, up to the loop's round cap.
//!
//! What the user gave is never lost: compaction appends a checkpoint, truncation forks a branch
//! (the old one stays readable), and nothing is written after the caller cancels.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use skald_core::ids::{SessionId, Tenant};
//! use skald_core::message::{Message, Role};
//! use skald_core::pipeline::policy::Policy;
//! use skald_engine::recovery::{RecoveryError, RecoverySettings};
//! use skald_engine::{Engine, EngineConfig, ModelTurn, Stores};
//! use skald_llm::{LlmConfig, client_from_config};
//! use tokio_util::sync::CancellationToken;
//! use tokio_util::task::TaskTracker;
//!
//! let stores = Stores::open_sqlite("skald.db".as_ref())?;
//! let engine = Engine::new(stores, EngineConfig::new(Policy::preset("skald")?), TaskTracker::new())?;
//! let config = LlmConfig::from_toml_str(&std::fs::read_to_string("skald.toml")?)?;
//! let model = client_from_config(config.chat.as_ref().ok_or("no [llm] table")?)?;
//! let (acme, s1) = (Tenant::parse("acme")?, SessionId::parse("s1")?);
//! engine.ingest(&acme, &s1, vec![Message::text(Role::User, "Why does the build fail?")]).await?;
//!
//! let settings = RecoverySettings::default();
//! let turn = ModelTurn {
//!     model: model.as_ref(), system_prompt: Some("You are a coding agent."), tools: &[],
//!     max_output_tokens: None, temperature: None, fetch_available: true,
//!     now_ms: skald_engine::now_ms(), agents_md: None, settings: &settings, memory: None,
//! };
//! match engine.complete_turn(&acme, &s1, turn, &CancellationToken::new()).await {
//!     Ok(turn) => println!("{} ({} model calls)", turn.response.text(), turn.recovery.attempts),
//!     // The seed's "Context overflow: prompt too large for the model. Try /reset …".
//!     Err(error @ RecoveryError::ContextOverflow { .. }) => eprintln!("{error}"),
//!     Err(error) => return Err(error.into()),
//! }
//! # Ok(())
//! # }
//! ```

mod driver;
mod report;
mod truncation;

pub use driver::*;
pub use report::*;

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Value, json};
use skald_core::compaction::{
    CompactionOutcome, CompactionSettings, CompactionTrigger, host_rules_in_text, should_compact,
};
use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::tools::{is_memory_tool, tool_specs as memory_tool_specs};
use skald_core::message::{ToolSpec, Usage};
use skald_core::pipeline::TruncateSettings;
use skald_core::pipeline::policy::Policy;
use skald_core::pipeline::truncate::TruncateSettingsError;
use skald_core::tokens::estimate::json_estimate_chars;
use skald_core::tokens::{CHARS_PER_TOKEN, estimate_string_chars};
use skald_llm::{ChatRequest, ChatResponse, LlmError, Summarizer, SummaryRequest};
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
    /// `max_iterations` is 0: the turn could not make a single model call.
    #[error("max_iterations: expected at least 1 (one model call), found 0")]
    NoIterations,
    /// The fallback truncation's settings are ones the truncate stage refuses.
    #[error("truncate: {0}")]
    Truncate(#[from] TruncateSettingsError),
}

/// Everything preparing a turn's calls and recovering from their overflows needs: the engine
/// builds it ([`Engine::prepare_context`](crate::Engine::prepare_context)) and a
/// [`TurnLoop`](crate::TurnLoop)
/// (through its [`TurnDriver`]) prepares every call of the turn with it.
#[derive(Clone, Copy)]
pub struct PrepareContext<'a> {
    /// The model the requests go to, when the caller knows it: token calibration is per model
    /// ([`SessionState::calibrated_tokens`]).
    pub model: Option<&'a str>,
    /// The session store the context is read from and compactions are written to.
    pub sessions: &'a dyn SessionStore,
    /// The ref store that receives the originals of what is taken out of the context.
    pub refs: &'a dyn RefStore,
    /// The tenant of the session and of its refs.
    pub tenant: &'a Tenant,
    /// The session the calls are prepared for.
    pub session_id: &'a SessionId,
    /// Writes the summaries of the turn's compactions.
    pub summarizer: &'a dyn Summarizer,
    /// The pipeline run over the context on every call.
    pub policy: &'a Policy,
    /// When to compact before a call, and how.
    pub compaction: &'a CompactionSettings,
    /// The model's context window in tokens.
    pub window_tokens: u64,
    /// The host's system prompt; skald's additions are appended to it.
    pub system_prompt: Option<&'a str>,
    /// The host's tools as OpenAI function specs or bare `{name, …}` objects: counted in the
    /// request's size, and a skald tool of the same name is not offered again.
    pub tools: &'a [Value],
    /// The host's prompt and tools in tokens, when the caller knows them better than their
    /// characters tell (a replay: fitted to the provider's recorded usage, the prompt itself not
    /// being in the transcript). `None`: estimated from `system_prompt` and `tools`.
    pub host_prefix_tokens: Option<u64>,
    /// Whether the caller runs `fetch_original_data`; without it nothing is offloaded.
    pub fetch_available: bool,
    /// When the call is made (epoch ms), for the prompt-cache clocks.
    pub now_ms: i64,
    /// The workspace's AGENTS.md, for the summary's critical-rules appendix.
    pub agents_md: Option<&'a str>,
    /// The limits of the turn's recovery.
    pub settings: &'a RecoverySettings,
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
