//! [`Engine`]: the one way in. It owns the stores (behind their traits), the engine
//! configuration, the per-session state cache, the memory writer and the upload driver, built
//! once; its methods are skald's use cases, each written once — [`Engine::ingest`],
//! [`Engine::sync`], [`Engine::view`] and [`Engine::assemble`], [`Engine::compact`],
//! [`Engine::after_turn`], [`Engine::end_session`] and [`Engine::archive_idle_sessions`],
//! [`Engine::bootstrap`] and [`Engine::import`], [`Engine::fetch`], the memory operations, and for a caller that drives its model calls itself (the proxy)
//! [`Engine::begin_turn`] — a [`Turn`] holding the session for the request — with
//! [`Engine::prepare_context`] for its calls. The HTTP routes, the proxy and the CLI only translate their wire and
//! argument types to these calls and back.
//!
//! Callers name a tenant and a session with [`Tenant`] and [`SessionId`], parsed where the
//! value entered (an API key's record, a URL path, a command-line argument).
//!
//! Store calls are synchronous (see `skald_store`'s crate docs): the engine makes the short ones
//! inline and runs the ones that can take long — a batch of refs written and `fsync`ed, a memory
//! search, a transcript import — through [`blocking`](crate::blocking), so they never stall a
//! server's other requests. Every use case holds its session's state lock while it runs, so two
//! calls of one session never interleave.
//!
//! ```
//! use skald_core::ids::{SessionId, Tenant};
//! use skald_core::message::{Message, Role};
//! use skald_core::pipeline::policy::Policy;
//! use skald_engine::{Engine, EngineConfig, ViewOptions};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let engine = Engine::in_memory(EngineConfig::new(Policy::preset("skald").unwrap())).unwrap();
//! let (tenant, session) = (Tenant::parse("acme").unwrap(), SessionId::parse("demo").unwrap());
//! let stored = engine
//!     .ingest(&tenant, &session, vec![Message::text(Role::User, "why does the build fail?")])
//!     .await
//!     .unwrap();
//! assert_eq!((stored.ingested, stored.duplicates), (1, 0));
//! let view = engine.view(&tenant, &session, ViewOptions::default()).await.unwrap();
//! assert_eq!(view.view.messages.len(), 1);
//! # }
//! ```

mod cache;
mod database;
mod estimate;
mod export;
mod host_hooks;
mod inspect;
mod memories;
mod model_turn;
mod row_memo;
mod session_end;
mod sessions;
mod tools;
mod turn;
mod turn_loop;
mod turns;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use skald_core::compaction::CompactionSettings;
use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::recall::RecallSettings;
use skald_core::memory::uri::UriError;
use skald_core::memory::write::WriteSettings;
use skald_core::pipeline::policy::Policy;
use skald_llm::{DeterministicExtractor, Embedder, MemoryExtractor, Summarizer};
use skald_store::RefStore;
use skald_store::clock::{Clock, SystemClock};
use skald_store::memories::MemoryStore;
use skald_store::sessions::SessionStore;
use tokio_util::task::TaskTracker;

use crate::memory::MemoryIdentity;
use crate::memory_write::{MemoryWriter, UploadDriver};

pub use cache::{OwnedSlotGuard, SessionCache, SessionSlot, SlotGuard};
pub use database::{
    DatabaseLocation, MigrateError, OpenError, OpenedDatabase, ScratchMemoryStore, StoreKind,
    Stores, migrate_database, open_database, open_key_store, open_stores,
};
pub use estimate::ReplayEstimate;
pub use export::SessionExport;
pub use host_hooks::{PromptRecall, TranscriptCompaction};
pub use model_turn::ModelTurn;
pub use session_end::{IDLE_ARCHIVE_HORIZON_MS, SessionEndOutcome};
pub use sessions::{
    AssembleInput, Assembly, Bootstrap, BootstrapSource, BudgetFit, SessionOverview, View,
    ViewOptions,
};
pub use tools::{OffloadedOutput, ToolRun};
pub use turn::{BringInError, BroughtIn, SessionBusy, Synced, Turn};
pub use turn_loop::{
    FailedCall, MAX_TOOL_ROUNDS, SkaldTools, StreamedAnswer, StreamedRound, TurnLoop, WholeAnswer,
    hidden_assistant,
};
pub use turns::{CompactInput, DetachedCall, PrepareInput};

/// Sessions whose state is kept in memory at most, by default
/// ([`EngineConfig::max_cached_sessions`]). The state is a cache (memoised decisions, the
/// session-start memory snapshot, calibration): a session evicted after being idle rebuilds it
/// on its next call, so a long-running engine's memory follows its active sessions, not every
/// session it ever saw.
pub const MAX_CACHED_SESSIONS: usize = 10_000;

/// Bytes of session state kept in memory at most, by default
/// ([`EngineConfig::max_cached_bytes`]), as [`SessionState::approx_bytes`](crate::SessionState::approx_bytes)
/// counts them. A small session's state is tens of kilobytes, so the 10,000 sessions of the count
/// cap would be some 700 MB; one holding a 50 MB tool output is about 100 MB (the output is held
/// in the stored session and in the rebuilt context). 512 MiB keeps thousands of small sessions
/// or a handful of very large ones warm, and keeps the cache well inside a small machine's
/// memory whatever its sessions hold; a host with more memory and many large sessions raises it.
pub const DEFAULT_MAX_CACHED_BYTES: usize = 512 * 1024 * 1024;

/// The context window assumed for a session when neither the call nor the configuration names
/// one.
pub const DEFAULT_WINDOW_TOKENS: u64 = 200_000;

/// Who memory acts for when a call does not say (`[memory]` user and agent), and how recall and
/// the write path behave.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryDefaults {
    /// The user whose memories recall reads and the write path fills.
    pub user: String,
    /// The agent whose skills and tool statistics are kept.
    pub agent: String,
    /// How much recall injects, and when.
    pub recall: RecallSettings,
    /// What the write path extracts and keeps. Its `user` and `agent` are not read: the engine
    /// writes the memories of `user` and `agent` above, the ones recall reads.
    pub write: WriteSettings,
    /// Whether calls get recall, the session-start snapshot and the memory tools.
    pub enabled: bool,
    /// A session nothing changed for this long has its unarchived part archived to memory
    /// ([`Engine::archive_idle_sessions`], run by a server); 0: never. Default
    /// [`DEFAULT_IDLE_ARCHIVE_SECS`].
    pub idle_archive_secs: u64,
}

/// The default of [`MemoryDefaults::idle_archive_secs`]: 30 minutes. In the dev transcripts
/// (46 sessions: Claude Code, mini-swe-agent, SWE-agent; 1,820 pauses between two timestamped
/// messages, `cargo run --release -p skald-engine --example session_end_memories`) the longest
/// pause inside a session is 9.5 minutes and the 99.9th percentile 3.2 minutes, so a session
/// still being worked on is not archived in the middle; one that ended reaches memory half an
/// hour later. (Archiving mid-session would lose nothing — what follows is a span of its own —
/// but spends an extraction.)
pub const DEFAULT_IDLE_ARCHIVE_SECS: u64 = 1800;

impl Default for MemoryDefaults {
    fn default() -> MemoryDefaults {
        MemoryDefaults {
            user: "default".to_owned(),
            agent: "default".to_owned(),
            recall: RecallSettings::default(),
            write: WriteSettings::default(),
            enabled: true,
            idle_archive_secs: DEFAULT_IDLE_ARCHIVE_SECS,
        }
    }
}

/// Everything the engine runs with: the part of a server's configuration that is about
/// context, not about HTTP.
#[derive(Clone)]
pub struct EngineConfig {
    /// The pipeline run over every session on every call.
    pub policy: Policy,
    /// How compaction plans, summarizes and checks.
    pub compaction: CompactionSettings,
    /// The window used when a call gives no token budget and its model is neither in
    /// `model_windows` nor of a known family
    /// ([`known_window`](skald_core::tokens::windows::known_window)).
    pub window_tokens: u64,
    /// Windows by exact model name (`[models."name"] window`), over the known families'.
    pub model_windows: BTreeMap<String, u64>,
    /// Whether a call's model picks its window (its `model_windows` entry, else its known
    /// family's); `false`: every call uses `window_tokens` (a window the user fixed, `--window`,
    /// or a replay's).
    pub windows_by_model: bool,
    /// Memory's owner and settings.
    pub memory: MemoryDefaults,
    /// Sessions whose state stays in memory (least recently used idle ones are evicted and
    /// rebuilt on their next call).
    pub max_cached_sessions: usize,
    /// Bytes of session state that stay in memory, as estimated when calls release it (least
    /// recently used idle states are evicted; one over it alone is trimmed when released). See
    /// [`DEFAULT_MAX_CACHED_BYTES`] for the default's reasoning.
    pub max_cached_bytes: usize,
    /// Writes compaction summaries (the configured model, or the extractive one).
    pub summarizer: Arc<dyn Summarizer>,
    /// Embeds memories and queries; `None`: memory search is full-text only.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// Extracts memories from what leaves a session's context (compacted spans, uploads).
    pub extractor: Arc<dyn MemoryExtractor>,
    /// The prices a session's calls are costed at ([`Engine::call_timeline`]).
    pub pricing: crate::Pricing,
    /// Where the engine's "now" comes from (the system clock; a `ManualClock` in tests, so a
    /// schedule's ages and a memory's timestamps are what the test says).
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineConfig")
            .field("window_tokens", &self.window_tokens)
            .field("model_windows", &self.model_windows)
            .field("windows_by_model", &self.windows_by_model)
            .field("memory", &self.memory)
            .field("max_cached_sessions", &self.max_cached_sessions)
            .field("max_cached_bytes", &self.max_cached_bytes)
            .field("summarizer", &self.summarizer.name())
            .field("embedder", &self.embedder.is_some())
            .field("extractor", &self.extractor.name())
            .finish_non_exhaustive()
    }
}

impl EngineConfig {
    /// The defaults: `policy`, seed 001's compaction, memory on, the extractive summarizer, the
    /// deterministic memory extractor and no embedder.
    pub fn new(policy: Policy) -> EngineConfig {
        EngineConfig {
            policy,
            compaction: CompactionSettings::default(),
            window_tokens: DEFAULT_WINDOW_TOKENS,
            model_windows: BTreeMap::new(),
            windows_by_model: true,
            memory: MemoryDefaults::default(),
            max_cached_sessions: MAX_CACHED_SESSIONS,
            max_cached_bytes: DEFAULT_MAX_CACHED_BYTES,
            summarizer: Arc::new(skald_llm::ExtractiveSummarizer::default()),
            embedder: None,
            extractor: Arc::new(DeterministicExtractor::default()),
            pricing: crate::Pricing::default(),
            clock: Arc::new(SystemClock),
        }
    }
}

/// skald's context engine (see the module docs). Cheap to clone: clones share everything.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    stores: Stores,
    /// `stores.sessions`, remembering a session's row while a request holds it.
    sessions: Arc<row_memo::RowMemo>,
    config: EngineConfig,
    states: Arc<SessionCache>,
    writer: MemoryWriter,
    uploads: Arc<UploadDriver>,
    tasks: TaskTracker,
    /// Models whose window was not known, already said in the log.
    unknown_models: std::sync::Mutex<HashSet<String>>,
    /// The sessions the idle sweep looked at, so that it does not read them again unchanged.
    idle_checked: std::sync::Mutex<session_end::IdleChecked>,
}

/// Unknown models named in the log at most, so that clients naming endless models cannot grow
/// the set without bound.
const MAX_UNKNOWN_MODELS_NAMED: usize = 256;

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.inner.config)
            .field("states", &self.inner.states)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over `stores`. Background work (memory uploads) runs on `tasks`, so a host
    /// that waits for it at shutdown lets that work finish.
    pub fn new(
        stores: Stores,
        config: EngineConfig,
        tasks: TaskTracker,
    ) -> Result<Engine, OpenError> {
        // The writer writes the memories of the user and agent recall reads: `[memory]`'s,
        // whatever `write` was built with.
        let write = WriteSettings {
            user: config.memory.user.clone(),
            agent: config.memory.agent.clone(),
            ..config.memory.write.clone()
        };
        let mut writer =
            MemoryWriter::new(stores.memories.clone(), config.extractor.clone(), write)?;
        if let Some(embedder) = &config.embedder {
            writer = writer.with_embedder(embedder.clone());
        }
        let uploads = Arc::new(UploadDriver::new(writer.clone()).with_tracker(tasks.clone()));
        let states = SessionCache::new(config.max_cached_sessions, config.max_cached_bytes);
        let sessions = Arc::new(row_memo::RowMemo::new(stores.sessions.clone()));
        Ok(Engine {
            inner: Arc::new(Inner {
                stores,
                sessions,
                config,
                states,
                writer,
                uploads,
                tasks,
                unknown_models: std::sync::Mutex::new(HashSet::new()),
                idle_checked: std::sync::Mutex::new(session_end::IdleChecked::default()),
            }),
        })
    }

    /// An engine over in-memory SQLite stores, with its own task tracker; for tests.
    pub fn in_memory(config: EngineConfig) -> Result<Engine, OpenError> {
        Engine::new(Stores::in_memory()?, config, TaskTracker::new())
    }

    /// Now by the engine's clock, in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        self.config().clock.now_ms()
    }

    /// What the engine runs with.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// The context window of calls to `model`: its `model_windows` entry, else its family's
    /// known window, else the configured default — said once per model in the log, so a user
    /// whose model is not known learns to configure it. With `windows_by_model` off, always
    /// the configured window.
    pub fn window_for(&self, model: Option<&str>) -> u64 {
        let config = self.config();
        let Some(model) = model
            .map(str::trim)
            .filter(|model| config.windows_by_model && !model.is_empty())
        else {
            return config.window_tokens;
        };
        if let Some(&window) = config.model_windows.get(model) {
            return window;
        }
        if let Some(window) = skald_core::tokens::windows::known_window(model) {
            return window;
        }
        let first_time = self
            .inner
            .unknown_models
            .lock()
            .map(|mut seen| {
                !seen.contains(model)
                    && seen.len() < MAX_UNKNOWN_MODELS_NAMED
                    && seen.insert(model.to_owned())
            })
            .unwrap_or(false);
        if first_time {
            tracing::info!(
                model,
                window_tokens = config.window_tokens,
                "the model's context window is not known: calls to it use the default window; \
                 set [models.\"{model}\"] window = N in skald.toml if it differs"
            );
        }
        config.window_tokens
    }

    /// The session store (through the row memo: see [`row_memo`]).
    pub(crate) fn sessions(&self) -> &dyn SessionStore {
        self.inner.sessions.as_ref()
    }

    /// Opens `session`'s row scope for a request that holds its state lock: the row is read
    /// once until the scope is dropped ([`row_memo`]).
    pub(crate) fn row_scope(&self, tenant: &Tenant, session: &SessionId) -> row_memo::RowScope {
        self.inner.sessions.scope(tenant, session)
    }

    /// The ref store.
    pub(crate) fn refs(&self) -> &dyn RefStore {
        self.inner.stores.refs.as_ref()
    }

    /// The memory store.
    pub(crate) fn memories(&self) -> &dyn MemoryStore {
        self.inner.stores.memories.as_ref()
    }

    /// Archives what leaves a session's context and extracts its memories.
    pub(crate) fn writer(&self) -> &MemoryWriter {
        &self.inner.writer
    }

    /// The two-threshold memory upload of every session.
    pub(crate) fn uploads(&self) -> &Arc<UploadDriver> {
        &self.inner.uploads
    }

    /// The background work a graceful stop waits for.
    pub fn tasks(&self) -> &TaskTracker {
        &self.inner.tasks
    }

    /// The state of one session, created empty on first use (see [`SessionCache`] for how long
    /// it is kept). A caller that drives a session itself (the proxy) locks it for the call.
    pub fn slot(&self, tenant: &Tenant, session: &SessionId) -> SessionSlot {
        self.inner.states.slot(tenant, session)
    }

    /// Sessions whose state is in memory now.
    pub fn cached_sessions(&self) -> usize {
        self.inner.states.len()
    }

    /// Bytes of session state in memory, as last measured.
    pub fn cached_session_bytes(&self) -> usize {
        self.inner.states.bytes()
    }

    /// The memory identity of the configured `[memory]` user and agent.
    pub fn memory_identity(&self) -> Result<MemoryIdentity, UriError> {
        let memory = &self.inner.config.memory;
        MemoryIdentity::new(&memory.user, &memory.agent)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ids(session: &str) -> (Tenant, SessionId) {
        (
            Tenant::parse("t").unwrap(),
            SessionId::parse(session).unwrap(),
        )
    }

    #[tokio::test]
    async fn idle_session_states_are_evicted_over_the_cap_and_held_ones_stay() {
        let mut config = EngineConfig::new(Policy::preset("skald").unwrap());
        config.max_cached_sessions = 2;
        let engine = Engine::in_memory(config).unwrap();
        let (tenant, a) = ids("a");
        let held = engine.slot(&tenant, &a);
        drop(engine.slot(&tenant, &ids("b").1).lock().await);
        drop(engine.slot(&tenant, &ids("c").1).lock().await);
        assert_eq!(engine.cached_sessions(), 2);
        // "a" is held by a call: "b", the least recently used idle one, went instead.
        assert!(Arc::ptr_eq(&held, &engine.slot(&tenant, &a)));
        // The released states were measured.
        assert!(engine.cached_session_bytes() > 0);
    }

    #[tokio::test]
    async fn a_turn_on_a_held_session_gives_up_after_its_wait_and_goes_ahead_once_it_is_free() {
        let engine =
            Engine::in_memory(EngineConfig::new(Policy::preset("skald").unwrap())).unwrap();
        let (tenant, session) = ids("busy");
        let held = engine.begin_turn(&tenant, &session).await;
        let wait = std::time::Duration::from_millis(50);
        let busy = engine
            .try_begin_turn(&tenant, &session, wait)
            .await
            .unwrap_err();
        assert_eq!(busy.session, session);
        assert!(busy.to_string().contains("\"busy\""), "{busy}");
        // Another session is not held by it.
        let (_, other) = ids("other");
        assert!(engine.try_begin_turn(&tenant, &other, wait).await.is_ok());
        drop(held);
        assert!(engine.try_begin_turn(&tenant, &session, wait).await.is_ok());
    }
}
