//! What every request handler shares: the [`Engine`] (the stores, the per-session state, the
//! memory write path — every use case), the key store, the server's configuration, the metrics,
//! the HTTP client the proxy forwards with, and the tracker of background tasks a graceful
//! shutdown waits for.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use skald_engine::storage::{KeyError, KeyStore};
use skald_engine::{DatabaseLocation, open_database};
use skald_engine::{Engine, Stores};
use tokio_util::task::TaskTracker;

use crate::config::ServerConfig;
use crate::metrics::Metrics;
pub use skald_engine::SessionSlot;

/// The engine and settings of a running server. Cheap to clone (everything is behind `Arc`).
#[derive(Clone)]
pub struct AppState {
    /// Every use case: the routes, the proxy and the hooks translate to and from its calls.
    pub engine: Engine,
    /// The API keys; any [`KeyStore`] backend.
    pub keys: Arc<dyn KeyStore>,
    /// The engine settings, upstreams, body limit, timeouts and shutdown grace the server was
    /// started with.
    pub config: Arc<ServerConfig>,
    /// The server's Prometheus metrics, rendered at `/metrics`.
    pub metrics: Arc<Metrics>,
    /// The proxy's client for upstream calls (rustls, connection pool).
    pub http: reqwest::Client,
    /// Background work (memory uploads, extractions, streamed answers) a graceful shutdown
    /// waits for; the engine's background work runs on it too.
    pub tasks: TaskTracker,
    /// Cancelled when a graceful stop's grace is about to run out ([`crate::serve`]): proxied
    /// calls still running end in their API's own terms (a stream's error event, a JSON 503)
    /// instead of a closed connection.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// The dashboard's logins (a cookie token names one; the key stays here).
    pub logins: Arc<crate::ui::Logins>,
    /// Whether requests must carry a key: true once the key store has held a live key while
    /// this server ran, and never false again (revoking every key does not open the server).
    auth_required: Arc<AtomicBool>,
}

/// The stores could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The engine's stores or settings.
    #[error(transparent)]
    Engine(#[from] skald_engine::OpenError),
    /// The key store could not be opened or read.
    #[error("cannot open the key store: {0}")]
    Keys(#[from] KeyError),
    /// The HTTP client for upstream calls could not be built (TLS backend).
    #[error("cannot build the HTTP client for upstream calls: {0}")]
    Http(#[from] reqwest::Error),
}

impl AppState {
    /// Opens every store on one database file (created if needed).
    pub fn open(database: &Path, config: ServerConfig) -> Result<AppState, OpenError> {
        AppState::at(DatabaseLocation::Sqlite(database), config)
    }

    /// Every store, keys included, in the PostgreSQL database at `url` (its schema migrated
    /// first): one of several servers over one shared store.
    pub fn open_postgres(url: &str, config: ServerConfig) -> Result<AppState, OpenError> {
        AppState::at(DatabaseLocation::Postgres(url), config)
    }

    /// Every store in memory; for tests.
    pub fn in_memory(config: ServerConfig) -> Result<AppState, OpenError> {
        AppState::at(DatabaseLocation::InMemory, config)
    }

    /// A state over every store at `location` (the engine opens them).
    pub fn at(location: DatabaseLocation<'_>, config: ServerConfig) -> Result<AppState, OpenError> {
        let opened = open_database(location, &config.refs)?;
        AppState::from_stores(opened.stores, opened.keys, config)
    }

    /// A state over stores the caller opened.
    pub fn from_stores(
        stores: Stores,
        keys: Arc<dyn KeyStore>,
        config: ServerConfig,
    ) -> Result<AppState, OpenError> {
        let auth_required = keys.any_active()?;
        let http = reqwest::Client::builder()
            .pool_idle_timeout(std::time::Duration::from_secs(90))
            .connect_timeout(config.timeouts.connect)
            .build()?;
        let tasks = TaskTracker::new();
        let engine = Engine::new(stores, config.engine.clone(), tasks.clone())?;
        Ok(AppState {
            engine,
            keys,
            config: Arc::new(config),
            metrics: Arc::new(Metrics::new()),
            http,
            tasks,
            shutdown: tokio_util::sync::CancellationToken::new(),
            logins: Arc::new(crate::ui::Logins::default()),
            auth_required: Arc::new(AtomicBool::new(auth_required)),
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
}
