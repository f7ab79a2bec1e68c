//! What every request handler shares: the stores on the data directory's database, the key
//! store, the configuration, the per-session engine state, the memory write path (the writer
//! and the two-threshold upload driver), the metrics, the HTTP client the proxy forwards with,
//! and the tracker of background tasks a graceful shutdown waits for.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use skald_engine::memory_write::MemoryWriteError;
use skald_engine::{MemoryWriter, UploadDriver};
use skald_store::keys::{KeyError, KeyStore, SqliteKeyStore};
use skald_store::{
    MemoryError, RefSettings, SessionError, SqliteMemoryStore, SqliteRefStore, SqliteSessionStore,
    StoreError,
};
use tokio_util::task::TaskTracker;

use crate::config::ServerConfig;
use crate::metrics::Metrics;
use crate::session_cache::SessionCache;
pub use crate::session_cache::SessionSlot;

/// The stores and settings of a running server. Cheap to clone (everything is behind `Arc`).
#[derive(Clone)]
pub struct AppState {
    pub sessions: Arc<SqliteSessionStore>,
    pub refs: Arc<SqliteRefStore>,
    pub memories: Arc<SqliteMemoryStore>,
    /// The API keys; any [`KeyStore`] backend.
    pub keys: Arc<dyn KeyStore>,
    pub config: Arc<ServerConfig>,
    pub metrics: Arc<Metrics>,
    /// The proxy's client for upstream calls (rustls, connection pool).
    pub http: reqwest::Client,
    /// Background work (memory uploads, extractions) a graceful shutdown waits for.
    pub tasks: TaskTracker,
    /// Archives what leaves a session's context and extracts its memories (`[memory.write]`).
    pub memory_writer: MemoryWriter,
    /// The two-threshold memory upload of every session; its tasks run on `tasks`.
    pub uploads: Arc<UploadDriver>,
    /// Whether requests must carry a key: true once the key store has held a live key while
    /// this server ran, and never false again (revoking every key does not open the server).
    auth_required: Arc<AtomicBool>,
    session_states: Arc<SessionCache>,
}

/// Sessions whose engine state is kept in memory at most, by default
/// ([`ServerConfig::max_cached_sessions`](crate::ServerConfig::max_cached_sessions)). The state is a cache (memoised
/// decisions, the session-start memory snapshot, calibration): a session evicted after being
/// idle rebuilds it on its next request, so a long-running server's memory follows its active
/// sessions, not every session it ever saw.
pub const MAX_CACHED_SESSIONS: usize = 10_000;

/// Bytes of engine state kept in memory at most, by default
/// ([`ServerConfig::max_cached_bytes`](crate::ServerConfig::max_cached_bytes)), as
/// [`SessionState::approx_bytes`](skald_engine::SessionState::approx_bytes) counts them. A small
/// session's state is tens of kilobytes, so the 10,000 sessions of the count cap would be
/// some 700 MB; one holding a 50 MB tool output is about 100 MB (the output is held in the
/// stored session and in the rebuilt context). 512 MiB keeps thousands of small sessions or a
/// handful of very large ones warm, and keeps the cache well inside a small machine's memory
/// whatever its sessions hold; a server with more memory and many large sessions raises it.
pub const DEFAULT_MAX_CACHED_BYTES: usize = 512 * 1024 * 1024;

/// The stores could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the ref store: {0}")]
    Refs(#[from] StoreError),
    #[error("cannot open the session store: {0}")]
    Sessions(#[from] SessionError),
    #[error("cannot open the memory store: {0}")]
    Memories(#[from] MemoryError),
    #[error("cannot open the key store: {0}")]
    Keys(#[from] KeyError),
    #[error("cannot build the HTTP client for upstream calls: {0}")]
    Http(#[from] reqwest::Error),
    #[error("the memory write settings are not usable: {0}")]
    MemoryWrite(#[from] MemoryWriteError),
}

impl AppState {
    /// Opens every store on one database file (created if needed).
    pub fn open(database: &Path, config: ServerConfig) -> Result<AppState, OpenError> {
        let refs = SqliteRefStore::open(database, RefSettings::default())?;
        let sessions = SqliteSessionStore::open(database)?;
        let memories = SqliteMemoryStore::open(database)?;
        let keys = SqliteKeyStore::open(database)?;
        AppState::from_stores(sessions, refs, memories, keys, config)
    }

    /// Every store in memory; for tests.
    pub fn in_memory(config: ServerConfig) -> Result<AppState, OpenError> {
        AppState::from_stores(
            SqliteSessionStore::in_memory()?,
            SqliteRefStore::in_memory(RefSettings::default())?,
            SqliteMemoryStore::in_memory()?,
            SqliteKeyStore::in_memory()?,
            config,
        )
    }

    /// A state over stores the caller opened.
    pub fn from_stores(
        sessions: SqliteSessionStore,
        refs: SqliteRefStore,
        memories: SqliteMemoryStore,
        keys: SqliteKeyStore,
        config: ServerConfig,
    ) -> Result<AppState, OpenError> {
        let auth_required = keys.any_active()?;
        let http = reqwest::Client::builder()
            .pool_idle_timeout(std::time::Duration::from_secs(90))
            .connect_timeout(config.timeouts.connect)
            .build()?;
        let memories = Arc::new(memories);
        let mut memory_writer = MemoryWriter::new(
            memories.clone(),
            config.extractor.clone(),
            config.memory.write.clone(),
        )?;
        if let Some(embedder) = &config.embedder {
            memory_writer = memory_writer.with_embedder(embedder.clone());
        }
        let metrics = Arc::new(Metrics::new());
        let session_states = SessionCache::new(
            config.max_cached_sessions,
            config.max_cached_bytes,
            metrics.cached_sessions.clone(),
            metrics.cached_session_bytes.clone(),
        );
        let tasks = TaskTracker::new();
        let uploads =
            Arc::new(UploadDriver::new(memory_writer.clone()).with_tracker(tasks.clone()));
        Ok(AppState {
            sessions: Arc::new(sessions),
            refs: Arc::new(refs),
            memories,
            keys: Arc::new(keys),
            config: Arc::new(config),
            metrics,
            http,
            tasks,
            memory_writer,
            uploads,
            auth_required: Arc::new(AtomicBool::new(auth_required)),
            session_states,
        })
    }

    /// Whether requests must carry a key. While the server is open this looks at the key
    /// store, so a key created by `skald keys create` while it runs closes it at once.
    pub fn auth_required(&self) -> bool {
        if self.auth_required.load(Ordering::Relaxed) {
            return true;
        }
        let found = self.keys.any_active().unwrap_or(true);
        if found {
            self.auth_required.store(true, Ordering::Relaxed);
        }
        found
    }

    /// The engine state of one session of one tenant, created empty on first use (see
    /// [`crate::session_cache`] for how long it is kept).
    pub fn session_slot(&self, tenant: &str, session: &str) -> SessionSlot {
        self.session_states.slot(tenant, session)
    }

    /// Sessions whose engine state is in memory now.
    pub fn cached_sessions(&self) -> usize {
        self.session_states.len()
    }

    /// Bytes of engine state in memory, as last measured.
    pub fn cached_session_bytes(&self) -> usize {
        self.session_states.bytes()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test]
    async fn idle_session_states_are_evicted_over_the_cap_and_held_ones_stay() {
        let mut config =
            ServerConfig::new(skald_core::pipeline::policy::Policy::preset("skald").unwrap());
        config.max_cached_sessions = 2;
        let state = AppState::in_memory(config).unwrap();
        let held = state.session_slot("t", "a");
        drop(state.session_slot("t", "b").lock().await);
        drop(state.session_slot("t", "c").lock().await);
        assert_eq!(state.cached_sessions(), 2);
        // "a" is held by a request: "b", the least recently used idle one, went instead.
        assert!(Arc::ptr_eq(&held, &state.session_slot("t", "a")));
        // The released states were measured.
        assert!(state.cached_session_bytes() > 0);
    }
}
