//! skald's context engine. [`Engine`] is the one way in: built once over the stores and an
//! [`EngineConfig`], its methods are the use cases — ingest, sync, view and assemble, compact,
//! after-turn, bootstrap and import, fetch, the memory operations, and a [`Turn`] for a caller
//! that sends its own model calls (the proxy) — and the HTTP routes, the proxy and the CLI only
//! translate to and from them.
//!
//! Beneath it, the pieces it is made of ([`internal`]: the pipeline, the view builder, ingest,
//! compaction, after-turn, fetch and the memory write path, crate-private but for the pipeline
//! the benchmarks run alone), one turn's overflow recovery ([`recovery`]: the
//! [`TurnDriver`] a [`TurnLoop`] runs on), long-term memory — recall, session-start injection,
//! skill and tool memories, the memory tools ([`memory`]) —, and [`replay`], which re-creates
//! every model call of a real transcript under each policy and measures tokens, prompt-cache
//! use, cost and what the model could still see or fetch.
//!
//! A session's view, through the engine:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use skald_core::ids::{SessionId, Tenant};
//! use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
//! use skald_core::pipeline::policy::Policy;
//! use skald_engine::{Engine, EngineConfig, ViewOptions};
//!
//! let engine = Engine::in_memory(EngineConfig::new(Policy::preset("sccs")?))?;
//! let (acme, build) = (Tenant::parse("acme")?, SessionId::parse("build")?);
//! let log = "2026-01-01 INFO step ok\n".repeat(400);
//! engine.ingest(&acme, &build, vec![
//!     Message::text(Role::User, "run the build"),
//!     Message::new(Role::Assistant, vec![Block::ToolCall(ToolCall {
//!         id: "c1".into(), name: "bash".into(), arguments: serde_json::json!({"command": "make"}),
//!         arguments_text: None, extra: Extra::new() })]),
//!     Message::new(Role::ToolResult, vec![Block::ToolResult(ToolResult {
//!         call_id: "c1".into(), tool_name: Some("bash".into()),
//!         content: vec![Block::text(log)].into(), content_form: ContentForm::Blocks,
//!         is_error: None, details: None, extra: Extra::new() })]),
//! ]).await?;
//! let view = engine.view(&acme, &build, ViewOptions::default()).await?;
//! // The log is behind a reference id the model can fetch.
//! assert_eq!(view.view.report.offload.offloaded.len(), 1);
//! assert!(view.view.system_prompt_addition().is_some());
//! assert!(view.tools.iter().any(|tool| tool.name == "fetch_original_data"));
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod accounting;
mod blocking;
pub mod chart;
mod engine;
mod error_kind;
mod footprint;
pub mod internal;
pub mod memory;
pub mod recovery;
pub mod replay;
mod session;
pub mod timeline;

// The pieces beneath the engine keep their paths inside the crate (`crate::ingest::…`).
use internal::view::{ViewRequest, prepare_view};
use internal::{after_turn, assemble, compact, fetch, ingest, memory_write, view};
use internal::{assemble::AssembleRequest, assemble::assemble, fetch::execute_fetch};

pub use accounting::{CacheAccount, Pricing, RequestBill, Segment};
pub use after_turn::{AfterTurn, AfterTurnMemory, AfterTurnOutcome};
pub use assemble::{AssembleReport, StageTimings};
pub use blocking::blocking;
pub use compact::{CompactReport, CompactResult, Compaction, SpanArchive, error_with_causes};
pub use engine::{
    AssembleInput, Assembly, Bootstrap, BootstrapSource, BringInError, BroughtIn, BudgetFit,
    CompactInput, DEFAULT_IDLE_ARCHIVE_SECS, DEFAULT_MAX_CACHED_BYTES, DEFAULT_WINDOW_TOKENS,
    DetachedCall, Engine, EngineConfig, IDLE_ARCHIVE_HORIZON_MS, MAX_CACHED_SESSIONS,
    MemoryDefaults, ModelTurn, OffloadedOutput, OpenError, OwnedSlotGuard, PrepareInput,
    PromptRecall, ReplayEstimate, SessionBusy, SessionCache, SessionEndOutcome, SessionExport,
    SessionOverview, SessionSlot, SlotGuard, Stores, Synced, ToolRun, TranscriptCompaction, Turn,
    View, ViewOptions,
};
pub use engine::{
    DatabaseLocation, MigrateError, OpenedDatabase, ScratchMemoryStore, StoreKind,
    migrate_database, open_database, open_key_store, open_stores,
};
pub use engine::{
    FailedCall, MAX_TOOL_ROUNDS, SkaldTools, StreamedAnswer, StreamedRound, TurnLoop, WholeAnswer,
    hidden_assistant,
};
pub use error_kind::{Classify, ErrorKind};
pub use skald_llm::LlmError;
pub use skald_store::clock::{Clock, ManualClock, SystemClock, now_ms};

/// The storage layer's value types the engine's API takes and returns, and the key store a
/// server authenticates with, re-exported so that an edge (the server) reaches storage only
/// through the engine: it opens stores with [`open_database`] and never names `skald_store`.
pub mod storage {
    pub use skald_store::keys::{ApiKey, KEY_PREFIX, KeyError, KeyStore};
    pub use skald_store::memories::MemoryStats;
    pub use skald_store::memories::{
        AddOutcome, DEFAULT_VECTOR_SHARE, DEFAULT_VECTOR_WEIGHT, DuplicateKind, MemoryError,
        MemorySettings, MemorySource, MemoryStore, NewMemory, SearchQuery, VectorFusion,
    };
    pub use skald_store::memories::{
        DirEntryKind, MemoryLevel, SearchFilter, TreeNode, WriteAction,
    };
    pub use skald_store::postgres::migrate::{MigrationReport, TableCheck};
    pub use skald_store::postgres::{is_postgres_url, redact};
    pub use skald_store::refs::{
        DEFAULT_CACHE_BYTES, DEFAULT_CACHE_ENTRIES, DEFAULT_TTL, MAX_TTL, MIN_TTL,
    };
    pub use skald_store::sessions::{SessionInfo, SessionSwitches};
    pub use skald_store::{DATABASE_FILE, RefSettings, RefStats};
}
/// The transcript readers an importing edge plans with before it hands a transcript to
/// [`Engine::import`] or [`Engine::bootstrap`]: the formats skald reads and OpenClaw's SQLite
/// transcript store (opened read-only), re-exported so that the CLI reads them through the engine.
pub mod transcripts {
    pub use skald_store::sessions::import::{ImportOptions, ImportPlan, plan_import};
    pub use skald_store::sessions::openclaw_store::{OpenClawStore, SQLITE_MAGIC, is_sqlite};
}
pub use fetch::FetchOutput;
pub use ingest::{
    CommitOutcome, CommitPlacement, CommitStatus, IngestOutcome, MAX_ADVANCEMENT_KEY_LEN,
    SyncOutcome, TurnAnchors, prompt_len, prompt_text,
};
pub use memory_write::{
    ArchiveOrigin, ArchiveOutcome, DroppedRange, ExtractionStatus, FailedStage, MemoryWriteError,
    MemoryWriter, SessionEndReason, SpanRange, UploadDriver, UploadStep, WrittenMemory,
};
pub use recovery::{
    CONTEXT_OVERFLOW_MESSAGE, CallSize, MemoryHooks, PrepareContext, PreparedCall, RecoveryError,
    RecoveryReport, RecoverySettings, TurnDriver, TurnOutcome, function_spec,
};
pub use session::{SessionState, SyncMark, UNNAMED_MODEL, UsageObservation};
pub use view::{MemoryViewReport, ModelView, RecallHook};

/// Why the engine could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The ref store failed: nothing was handed to the model that is not stored.
    #[error("ref store: {0}")]
    Store(#[from] skald_store::StoreError),
    /// The policy could not be loaded (an unknown preset, unparsable TOML or invalid settings);
    /// nothing was run.
    #[error("policy: {0}")]
    Policy(#[from] skald_core::pipeline::policy::PolicyError),
    /// The session store failed or the session is unknown; nothing was changed.
    #[error("session store: {0}")]
    Session(#[from] skald_store::SessionError),
    /// The compaction could not be planned (settings or window invalid).
    #[error("compaction: {0}")]
    Plan(#[from] skald_core::compaction::PlanError),
    /// A field of the call is out of range; nothing was changed. The message names the field
    /// and what is accepted.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The field, as the host names it.
        field: &'static str,
        /// What is wrong with it and what is accepted.
        reason: String,
    },
    /// A transcript could not be imported; nothing was stored.
    #[error(transparent)]
    Import(#[from] skald_store::sessions::import::ImportError),
    /// The configured `[memory]` user or agent is not a valid name.
    #[error(transparent)]
    MemoryIdentity(Box<MemoryIdentityError>),
}

/// The configured `[memory]` user or agent is not a valid name (one URI segment each).
#[derive(Debug, thiserror::Error)]
#[error("the configured memory identity (user {user:?}, agent {agent:?}) is not usable: {source}")]
pub struct MemoryIdentityError {
    /// The configured user.
    pub user: String,
    /// The configured agent.
    pub agent: String,
    /// What is wrong with one of them.
    pub source: skald_core::memory::uri::UriError,
}
