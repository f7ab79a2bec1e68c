//! The engine of the local commands: a [`skald_engine::Engine`] over the data directory's
//! database, configured from skald.toml by [`engine_config`] — the one mapping of the
//! configuration to an [`EngineConfig`], which `skald serve` builds its engine with too, so a
//! command on the local store runs with the settings the server would. Each local command checks
//! its arguments here ([`tenant_arg`], [`session_arg`]), makes one engine call, and prints the
//! answer, as the server's routes do.
//!
//! The stores are where skald.toml's `[database]` puts them ([`StoreLocation`]), for every
//! command and hook: the data directory's SQLite file, or the PostgreSQL database a server
//! shares. On SQLite a command about one store names that store when the database cannot be
//! opened ([`open_stores`]), and the commands that read sessions refuse a data directory
//! without a database rather than creating an empty one ([`require_session_store`]).

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use skald_core::ids::{SessionId, Tenant};
use skald_core::pipeline::policy::Policy;
use skald_engine::storage::{DATABASE_FILE, RefSettings, redact};
use skald_engine::{DatabaseLocation, Engine, EngineConfig, EngineError, MemoryDefaults, Stores};
use skald_llm::embedder_from_config;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::home::Home;

/// The configured models an engine is given. Each is built only when the command uses it:
/// building one reads a key from the environment, makes a client or loads a local model, and a
/// command that never calls it should neither fail on its configuration nor pay for it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Models {
    /// The summary model of `[llm.summary]` / `[llm]` (else the extractive summarizer).
    pub summarizer: bool,
    /// The embedder of `[embedding]` (else none: memory search is full-text only).
    pub embedder: bool,
}

impl Models {
    /// Every configured model (the server's engine).
    pub const ALL: Models = Models {
        summarizer: true,
        embedder: true,
    };
}

/// The engine configuration of `config`: its policy (the `skald` preset with the file's
/// overrides), compaction, context window (`window`, else `[llm] context_window_tokens`),
/// `[memory]` owner and settings (`memory`: whether calls get long-term memory), session-cache
/// limit, and the `models` asked for.
pub fn engine_config(
    config: &Config,
    window: Option<u64>,
    memory: bool,
    models: Models,
) -> Result<EngineConfig> {
    let policy = match &config.policy {
        Some(policy) => policy.clone(),
        None => Policy::preset("skald")?,
    };
    let mut engine = EngineConfig::new(policy);
    engine.compaction = config.compaction.clone();
    engine.pricing = config.pricing;
    engine.window_tokens = config.window_tokens(window);
    engine.model_windows = config.model_windows.clone();
    // A window given on the command line is the window of every call.
    engine.windows_by_model = window.is_none();
    engine.memory = MemoryDefaults {
        user: config.memory.user.clone(),
        agent: config.memory.agent.clone(),
        recall: config.memory.recall.clone(),
        write: config.memory.write.clone(),
        enabled: memory,
        idle_archive_secs: config.memory.idle_archive_secs,
    };
    engine.max_cached_bytes = config.server.max_cached_bytes;
    if models.summarizer {
        engine.summarizer = Arc::from(config.summarizer()?);
    }
    if models.embedder {
        engine.embedder = embedder_from_config(config.embedding.as_ref())
            .context("cannot use the embedder configured in [embedding]")?;
    }
    Ok(engine)
}

/// The engine configuration of a command that loads no configuration (`fetch`, `import`,
/// `sessions` only read or write stored data): the defaults, which such a command never
/// consults. Not loading skald.toml keeps a broken one from failing them.
pub fn default_engine_config() -> Result<EngineConfig> {
    Ok(EngineConfig::new(Policy::preset("skald")?))
}

pub use skald_engine::StoreKind;

/// Where a local command's stores are: the data directory's SQLite file, or the PostgreSQL
/// database of `[database] url` — the one a `skald serve` with the same skald.toml uses, so a
/// hook's ref or a command's import is there for the server and `skald mcp` too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// `skald.db` in the data directory.
    DataDirectory,
    /// Every store in this PostgreSQL database (its URL, checked when the configuration was
    /// read).
    Postgres(String),
}

impl StoreLocation {
    /// The location `config`'s `[database]` names.
    pub fn of(config: &Config) -> StoreLocation {
        StoreLocation::from_url(config.database.url.clone())
    }

    /// The location of a command that reads no other configuration: only the `[database]`
    /// table of skald.toml (`explicit`, else the data directory's), so a mistake elsewhere in
    /// the file does not stop it.
    pub fn configured(explicit: Option<&std::path::Path>, home: &Home) -> Result<StoreLocation> {
        Ok(StoreLocation::from_url(
            Config::load_database(explicit, home)?.url,
        ))
    }

    fn from_url(url: Option<String>) -> StoreLocation {
        match url {
            Some(url) => StoreLocation::Postgres(url),
            None => StoreLocation::DataDirectory,
        }
    }

    /// The SQLite file of the data directory when the stores are there and it does not exist
    /// yet (nothing was stored); `None` when it exists or the stores are on PostgreSQL.
    pub fn missing_file(&self, home: &Home) -> Option<std::path::PathBuf> {
        match self {
            StoreLocation::DataDirectory => {
                let path = home.path.join(DATABASE_FILE);
                (!path.exists()).then_some(path)
            }
            StoreLocation::Postgres(_) => None,
        }
    }
}

/// The three stores at `location`: in the data directory's database (created if missing),
/// `first` first, or all in the PostgreSQL database (its schema migrated on connecting) — opened
/// by the engine ([`skald_engine::open_stores`]), as the server's are.
pub fn open_stores(
    home: &Home,
    location: &StoreLocation,
    first: StoreKind,
    refs: &RefSettings,
) -> Result<Stores> {
    match location {
        StoreLocation::DataDirectory => {
            let path = home.path.join(DATABASE_FILE);
            skald_engine::open_stores(DatabaseLocation::Sqlite(&path), first, refs)
                .with_context(|| format!("cannot open the stores in {}", path.display()))
        }
        StoreLocation::Postgres(url) => {
            skald_engine::open_stores(DatabaseLocation::Postgres(url), first, refs)
                .with_context(|| format!("cannot open the stores in {}", redact(url)))
        }
    }
}

/// An engine over `stores`. A command's process ends with its call, so the engine's background
/// work (memory uploads, which only a finished turn starts) has no host to wait for it: the
/// task tracker is the engine's own.
pub fn engine(stores: Stores, config: EngineConfig) -> Result<Engine> {
    Ok(Engine::new(stores, config, TaskTracker::new())?)
}

/// [`open_stores`] (refs kept as `refs` says), then [`engine`].
pub fn local_engine(
    home: &Home,
    location: &StoreLocation,
    first: StoreKind,
    refs: &RefSettings,
    config: EngineConfig,
) -> Result<Engine> {
    engine(open_stores(home, location, first, refs)?, config)
}

/// Refuses a data directory without a database, for the commands that read sessions: it has
/// none, which is said plainly rather than creating an empty store. (A PostgreSQL database is
/// there or fails to connect.)
pub fn require_session_store(home: &Home, location: &StoreLocation) -> Result<()> {
    if let Some(path) = location.missing_file(home) {
        bail!(
            "no session store at {} (data directory from {}): import a transcript first with \
             `skald import FILE`",
            path.display(),
            home.source.name()
        );
    }
    Ok(())
}

/// `--tenant`, checked (absent: the default tenant).
pub fn tenant_arg(value: Option<&str>) -> Result<Tenant> {
    match value {
        Some(name) => Tenant::parse(name).context("--tenant"),
        None => Ok(Tenant::default()),
    }
}

/// A session-id argument, checked; `argument` names it in the error (`SESSION`, `--session-id`).
pub fn session_arg(value: &str, argument: &str) -> Result<SessionId> {
    SessionId::parse(value).with_context(|| argument.to_owned())
}

/// The error of an engine call, as the command reported it when it called the store itself:
/// the store's own error, without the engine's `session store: …` / `ref store: …` wrapper
/// (which `{:#}` prints twice, as the message and again as its cause).
pub fn store_error(error: EngineError) -> anyhow::Error {
    match error {
        EngineError::Session(error) => error.into(),
        EngineError::Store(error) => error.into(),
        error @ (EngineError::Policy(_)
        | EngineError::Plan(_)
        | EngineError::InvalidInput { .. }
        | EngineError::Import(_)
        | EngineError::MemoryIdentity(_)) => error.into(),
    }
}

/// Runs an engine call to completion on a runtime of its own.
pub fn block_on<F: std::future::Future>(future: F) -> Result<F::Output> {
    Ok(crate::compact_cmd::runtime()?.block_on(future))
}
