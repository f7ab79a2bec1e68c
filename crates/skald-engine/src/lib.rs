//! skald's context engine. [`Engine`] is the one way in: built once over the stores and an
//! [`EngineConfig`], its methods are the use cases — ingest, sync, view and assemble, compact,
//! after-turn, bootstrap and import, fetch, the memory operations, and a [`Turn`] for a caller
//! that sends its own model calls (the proxy) — and the HTTP routes, the proxy and the CLI only
//! translate to and from them.
//!
//! Beneath it, the pieces it is made of: the pipeline run over a session for each model request
//! ([`assemble`], [`prepare_view`]), compaction of a stored session ([`compact`]), the memory
//! write path ([`memory_write`]: archives and memory extraction after compaction, the
//! two-threshold upload), one turn's model calls with overflow recovery ([`Engine::complete_turn`],
//! [`TurnDriver`]), the executor of `fetch_original_data` ([`execute_fetch`]), long-term memory —
//! recall, session-start injection, skill and tool memories, the memory tools ([`memory`]) —,
//! and [`replay`], which re-creates every model call of a real transcript under each policy and
//! measures tokens, prompt-cache use, cost and what the model could still see or fetch.
//!
//! The pipeline alone, over messages a caller holds:
//!
//! ```
//! use skald_core::message::{Block, Message, Role, ToolCall, ToolResult, ContentForm, Extra};
//! use skald_core::pipeline::policy::Policy;
//! use skald_engine::{AssembleRequest, SessionState, assemble};
//! use skald_store::SqliteRefStore;
//!
//! let store = SqliteRefStore::in_memory(Default::default()).unwrap();
//! let policy = Policy::preset("sccs").unwrap();
//! let log = "2026-01-01 INFO step ok\n".repeat(400);
//! let messages = vec![
//!     Message::text(Role::User, "run the build"),
//!     Message::new(Role::Assistant, vec![Block::ToolCall(ToolCall {
//!         id: "c1".into(), name: "bash".into(), arguments: serde_json::json!({"command": "make"}),
//!         arguments_text: None, extra: Extra::new() })]),
//!     Message::new(Role::ToolResult, vec![Block::ToolResult(ToolResult {
//!         call_id: "c1".into(), tool_name: Some("bash".into()), content: vec![Block::text(log)],
//!         content_form: ContentForm::Blocks, is_error: None, details: None, extra: Extra::new() })]),
//! ];
//! let mut state = SessionState::default();
//! let acme = skald_core::ids::Tenant::parse("acme").unwrap();
//! let request = AssembleRequest { tenant: &acme, context_window_tokens: 200_000, now_ms: 0, fetch_available: true, host_prefix_tokens: 0 };
//! let assembled = assemble(&store, &policy, &mut state, messages, request).unwrap();
//! assert_eq!(assembled.report.offload.offloaded.len(), 1);
//! assert!(assembled.system_prompt_addition.is_some());
//! assert_eq!(assembled.tools[0].name, "fetch_original_data");
//! ```

#![warn(missing_docs)]

mod accounting;
pub mod after_turn;
mod assemble;
mod blocking;
pub mod chart;
pub mod compact;
mod engine;
mod error_kind;
mod fetch;
mod footprint;
pub mod ingest;
pub mod memory;
pub mod memory_write;
pub mod recovery;
pub mod replay;
mod session;
pub mod timeline;
pub mod view;

pub use accounting::{CacheAccount, Pricing, RequestBill, Segment};
pub use assemble::{AssembleReport, AssembleRequest, Assembled, StageTimings, assemble};
pub use blocking::blocking;
pub use compact::error_with_causes;
pub use engine::{
    AssembleInput, Assembly, Bootstrap, BootstrapSource, BringInError, BroughtIn, BudgetFit,
    CompactInput, DEFAULT_MAX_CACHED_BYTES, DEFAULT_WINDOW_TOKENS, DetachedCall, Engine,
    EngineConfig, MAX_CACHED_SESSIONS, MemoryDefaults, ModelTurn, OffloadedOutput, OpenError,
    OwnedSlotGuard, PrepareInput, PromptRecall, ReplayEstimate, SessionBusy, SessionCache,
    SessionExport, SessionOverview, SessionSlot, SlotGuard, Stores, Synced, ToolRun,
    TranscriptCompaction, Turn, View, ViewOptions,
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
pub use skald_store::clock::now_ms;

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
    pub use skald_store::sessions::{SessionInfo, SessionSwitches};
    pub use skald_store::{DATABASE_FILE, RefStats};
}
/// The transcript readers an importing edge plans with before it hands a transcript to
/// [`Engine::import`] or [`Engine::bootstrap`]: the formats skald reads and OpenClaw's SQLite
/// transcript store (opened read-only), re-exported so that the CLI reads them through the engine.
pub mod transcripts {
    pub use skald_store::sessions::import::{ImportOptions, ImportPlan, plan_import};
    pub use skald_store::sessions::openclaw_store::{OpenClawStore, SQLITE_MAGIC, is_sqlite};
}
pub use fetch::{FetchOutput, execute_fetch};
pub use memory_write::{
    MemoryWriter, UploadDriver, archive_compacted_span, retry_pending_extractions,
};
pub use recovery::{
    CONTEXT_OVERFLOW_MESSAGE, CallSize, MemoryHooks, PrepareContext, PreparedCall, RecoveryError,
    RecoveryReport, RecoverySettings, TurnDriver, TurnOutcome, function_spec,
};
pub use session::{SessionState, SyncMark, UNNAMED_MODEL, UsageObservation};
pub use view::{ModelView, RecallHook, ViewRequest, prepare_view};

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
