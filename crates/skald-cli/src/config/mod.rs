//! `skald.toml`: the user's configuration, read from `--config FILE` or the data directory.
//!
//! Each table optional; any other top-level key is an error naming it, so a typo fails
//! at start-up instead of being ignored:
//! - `[policy]` names a preset (default `skald`) and overrides any of its settings. That policy is
//!   what `skald` means wherever a command takes policy names.
//! - `[llm]` (and `[llm.summary]`) configure the model, read by `skald_llm::LlmConfig`. When a
//!   model is configured it writes compaction summaries; without one the extractive summarizer
//!   does (no provider, no key).
//! - `[compaction]` overrides `skald_core::compaction::CompactionSettings` (seed 001's constants
//!   by default), unknown keys and invalid values refused.
//! - `[memory]` names who the memory commands act for: `user` and `agent` (the ids in
//!   `viking://user/{user}/…` and `viking://agent/{agent}/…`) and `tenant`; each defaults to
//!   `default`, and `--user`/`--agent`/`--tenant` override them. `teach_cli = true` names the
//!   memory commands in the system prompt for agents with a shell but no memory tools;
//!   `idle_archive_secs` (default 1800, 0 off) is how long a session stays untouched before
//!   `skald serve` archives it to memory.
//!   `[memory.recall]`
//!   (`skald_core::memory::recall::RecallSettings`: per-turn recall, profile, listing, budget,
//!   relevance threshold) and `[memory.write]` (`skald_core::memory::write::WriteSettings`:
//!   archives, extraction retries, the two-threshold upload) are checked at start-up.
//! - `[embedding]` configures the embedder (`skald_llm::EmbeddingConfig`): when present, memory
//!   search embeds the query and writes store vectors; without it search is full-text only.
//! - `[proxy.openai]` and `[proxy.anthropic]` name the upstreams `skald serve` forwards
//!   `/v1/chat/completions` and `/v1/messages` to: `base_url`, and optionally `api_key_env`, the
//!   environment variable holding a provider key skald sends itself (then clients hold only
//!   skald keys). `[server]` sets `addr`, `max_body_bytes`, `shutdown_grace_secs`,
//!   `session_busy_wait_secs` (how long a proxied request waits for its busy session before a
//!   409), `max_cached_bytes` (the memory the per-session engine state may take), and what the
//!   edge answers (`skald_server::config::EdgeConfig`): `allowed_hosts` (names beyond loopback a
//!   request's `Host` may give), `allowed_origins` (pages of other origins that may send
//!   changing requests), `body_read_timeout_secs`, `mcp_sessions_per_key` and
//!   `mcp_session_idle_secs`.
//! - `[models."name"]` `window`: the context window of a model the known families do not cover
//!   ([`models`]).
//! - `[refs]` `ttl_secs`, `max_entries`, `max_cache_bytes`: how long the originals behind
//!   placeholders are kept and how many stay cached in memory ([`refs`]).
//! - `[pricing]` `input_per_million`, `cache_write_multiplier`, `cache_read_multiplier`: the
//!   input prices the dashboard's timeline and savings cost calls at.
//! - `[database]` `url = "postgres://user@host:5432/db"` puts every store (sessions, refs,
//!   memories, API keys) in that PostgreSQL database instead of the data directory's SQLite
//!   file: the store several `skald serve` instances share. `skald serve --database URL` and
//!   `skald keys --database URL` override it.
//!
//! ```toml
//! [policy]
//! preset = "skald"
//! [policy.offload]
//! compress_threshold = 4000
//!
//! [llm]
//! kind = "openai"
//! base_url = "http://localhost:11434/v1"
//! model = "qwen3:32b"
//! context_window_tokens = 32768
//! [llm.summary]
//! model = "qwen3:8b"
//!
//! [compaction]
//! reserve_tokens = 16000
//! keep_recent_turns = 4
//!
//! [memory]
//! user = "alice"
//! agent = "coder"
//! teach_cli = true
//! idle_archive_secs = 1800
//! [memory.recall]
//! level = "l0"
//! max_tokens = 1200
//! [memory.write.upload]
//! upload_ratio = 0.5
//! drop_ratio = 0.7
//!
//! [embedding]
//! kind = "openai"
//! model = "text-embedding-3-small"
//!
//! [proxy.openai]
//! base_url = "http://127.0.0.1:8000/v1"
//! [proxy.anthropic]
//! base_url = "https://api.anthropic.com"
//! api_key_env = "ANTHROPIC_API_KEY"
//!
//! [server]
//! addr = "127.0.0.1:7420"
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use skald_core::compaction::CompactionSettings;
use skald_core::memory::recall::RecallSettings;
use skald_core::memory::write::WriteSettings;
use skald_core::pipeline::policy::Policy;
use skald_llm::{
    EmbeddingConfig, ExtractiveSummarizer, LlmConfig, LlmSummarizer, Summarizer, client_from_config,
};

use crate::home::Home;

mod models;
mod refs;

/// The configuration file's name in the data directory.
pub const CONFIG_FILE: &str = "skald.toml";

/// The context window assumed when neither `--window` nor `[llm] context_window_tokens` says.
pub const DEFAULT_WINDOW_TOKENS: u64 = 200_000;

/// The top-level tables `skald.toml` may hold.
const TABLES: [&str; 11] = [
    "database",
    "pricing",
    "refs",
    "models",
    "policy",
    "llm",
    "compaction",
    "memory",
    "embedding",
    "proxy",
    "server",
];

/// What the configuration file says, and where it was read from.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub path: Option<PathBuf>,
    /// The default policy with the file's overrides applied (`None` when the file has none).
    pub policy: Option<Policy>,
    /// `[llm]` and `[llm.summary]`; empty when the file configures no model.
    pub llm: LlmConfig,
    /// `[compaction]` over seed 001's defaults, validated.
    pub compaction: CompactionSettings,
    /// `[memory]`: who the memory commands act for.
    pub memory: MemoryConfig,
    /// `[embedding]`; `None`: memory search is full-text only.
    pub embedding: Option<EmbeddingConfig>,
    /// `[proxy]`: the upstreams of `skald serve`'s proxy.
    pub proxy: ProxyConfig,
    /// `[server]`: how `skald serve` listens.
    pub server: ServerTable,
    /// `[database]`: where the stores are (default: the data directory's SQLite file).
    pub database: DatabaseTable,
    /// `[pricing]`: the input prices the dashboard costs calls at (`input_per_million`,
    /// `cache_write_multiplier`, `cache_read_multiplier`; default $3, 1.25, 0.1).
    pub pricing: skald_engine::Pricing,
    /// `[refs]`: how long refs are kept and how many stay cached (see [`refs`]).
    pub refs: skald_engine::storage::RefSettings,
    /// `[models."name"] window`: context windows by exact model name (see [`models`]).
    pub model_windows: std::collections::BTreeMap<String, u64>,
}

/// The `[database]` table.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseTable {
    /// A PostgreSQL URL (`postgres://user[:password]@host[:port]/database`); `None`: the
    /// embedded SQLite database in the data directory.
    pub url: Option<String>,
}

/// The `[database]` table of a configuration file's `table` (`shown` names the file), checked.
fn database_table(table: &toml::Table, shown: &str) -> Result<DatabaseTable> {
    let database: DatabaseTable = match table.get("database") {
        None => DatabaseTable::default(),
        Some(value @ toml::Value::Table(_)) => value
            .clone()
            .try_into()
            .with_context(|| format!("[database] in {shown}"))?,
        Some(_) => anyhow::bail!("[database] in {shown} must be a table"),
    };
    if let Some(url) = &database.url {
        check_database_url(url, &format!("[database] url in {shown}"))?;
    }
    Ok(database)
}

/// Checks a database URL given in `[database]` or by `--database` (`what` names which).
pub fn check_database_url(url: &str, what: &str) -> Result<()> {
    if skald_engine::storage::is_postgres_url(url) {
        return Ok(());
    }
    anyhow::bail!(
        "{what} is {:?}: it must be a PostgreSQL URL, postgres://user@host:5432/database (leave \
         it out for the embedded SQLite database in the data directory)",
        skald_engine::storage::redact(url)
    )
}

/// The `[proxy]` table.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProxyConfig {
    pub openai: Option<UpstreamTable>,
    pub anthropic: Option<UpstreamTable>,
    /// Seconds to open a connection to an upstream (default 10).
    pub connect_timeout_secs: Option<u64>,
    /// Seconds from a request to its answer's headers (default 600).
    pub first_byte_timeout_secs: Option<u64>,
    /// Seconds an answer's body may pause (default 300).
    pub idle_timeout_secs: Option<u64>,
}

impl ProxyConfig {
    /// The upstream timeouts, the defaults where the table says nothing; zero is refused (it
    /// would fail every call).
    pub fn timeouts(&self) -> Result<skald_server::config::UpstreamTimeouts> {
        let defaults = skald_server::config::UpstreamTimeouts::default();
        let pick = |name: &str, value: Option<u64>, default: std::time::Duration| match value {
            None => Ok(default),
            Some(0) => Err(anyhow::anyhow!(
                "[proxy] {name} is 0: it must be at least 1 second"
            )),
            Some(seconds) => Ok(std::time::Duration::from_secs(seconds)),
        };
        Ok(skald_server::config::UpstreamTimeouts {
            connect: pick(
                "connect_timeout_secs",
                self.connect_timeout_secs,
                defaults.connect,
            )?,
            first_byte: pick(
                "first_byte_timeout_secs",
                self.first_byte_timeout_secs,
                defaults.first_byte,
            )?,
            idle: pick("idle_timeout_secs", self.idle_timeout_secs, defaults.idle)?,
        })
    }
}

/// `[proxy.openai]` / `[proxy.anthropic]`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTable {
    /// The provider's base URL as its SDK takes it (`https://api.openai.com/v1`).
    pub base_url: String,
    /// The environment variable with a provider key skald sends upstream itself.
    pub api_key_env: Option<String>,
}

impl UpstreamTable {
    /// The upstream with its key read from the environment; a named variable that is unset is
    /// an error (the user asked for that key).
    pub fn resolve(&self, table: &str) -> Result<skald_server::Upstream> {
        let base_url = self.base_url.trim_end_matches('/').to_owned();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            anyhow::bail!(
                "{table} base_url {:?} is not an http:// or https:// URL",
                self.base_url
            );
        }
        let api_key = match &self.api_key_env {
            None => None,
            Some(variable) => Some(std::env::var(variable).with_context(|| {
                format!("{table} api_key_env names {variable}, which is not set")
            })?),
        };
        Ok(skald_server::Upstream { base_url, api_key })
    }
}

/// The `[server]` table.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerTable {
    /// Where `skald serve` listens unless `--addr` says.
    pub addr: String,
    /// Requests over this many bytes are refused (413).
    pub max_body_bytes: usize,
    /// Seconds a stop waits for in-flight requests and background work before exiting anyway.
    pub shutdown_grace_secs: u64,
    /// Seconds a proxied request waits for its session while another request holds it before
    /// it is answered 409 (0: refused at once).
    pub session_busy_wait_secs: u64,
    /// Bytes of per-session engine state kept in memory (least recently used idle sessions
    /// are evicted past it, and rebuild their state from the store on their next request).
    pub max_cached_bytes: usize,
    /// Host names beyond the loopback ones that requests may name (`"*"`: any).
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) whose pages may send changing requests (`"*"`: any).
    pub allowed_origins: Vec<String>,
    /// Seconds a request body may take to arrive after its headers.
    pub body_read_timeout_secs: u64,
    /// MCP sessions one key may hold at once over HTTP.
    pub mcp_sessions_per_key: usize,
    /// Seconds after which an idle MCP session is closed.
    pub mcp_session_idle_secs: u64,
}

/// Where `skald serve` listens by default.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7420";

impl Default for ServerTable {
    fn default() -> ServerTable {
        ServerTable {
            addr: DEFAULT_ADDR.to_owned(),
            max_body_bytes: skald_server::config::DEFAULT_MAX_BODY_BYTES,
            shutdown_grace_secs: skald_server::config::DEFAULT_SHUTDOWN_GRACE.as_secs(),
            session_busy_wait_secs: skald_server::config::DEFAULT_SESSION_BUSY_WAIT.as_secs(),
            max_cached_bytes: skald_engine::DEFAULT_MAX_CACHED_BYTES,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            body_read_timeout_secs: skald_server::config::DEFAULT_BODY_READ_TIMEOUT.as_secs(),
            mcp_sessions_per_key: skald_server::config::DEFAULT_MCP_SESSIONS_PER_KEY,
            mcp_session_idle_secs: skald_server::config::DEFAULT_MCP_SESSION_IDLE.as_secs(),
        }
    }
}

impl ServerTable {
    /// What the edge answers, from `[server]`.
    pub fn edge(&self) -> skald_server::config::EdgeConfig {
        skald_server::config::EdgeConfig {
            allowed_hosts: self.allowed_hosts.clone(),
            allowed_origins: self.allowed_origins.clone(),
            body_read_timeout: std::time::Duration::from_secs(self.body_read_timeout_secs),
            mcp_sessions_per_key: self.mcp_sessions_per_key,
            mcp_session_idle: std::time::Duration::from_secs(self.mcp_session_idle_secs),
        }
    }

    /// The `[server]` values that cannot be right, each with what it must be instead.
    fn check(&self, shown: &dyn std::fmt::Display) -> Result<()> {
        for host in &self.allowed_hosts {
            let host = host.trim();
            if host.is_empty() || host.contains("://") || host.contains('/') {
                anyhow::bail!(
                    "[server] allowed_hosts in {shown} holds {host:?}: each entry is a host name \
                     or address as a request's Host gives it (`skald.internal`, \
                     `skald.internal:7420`, `10.0.0.5`), or \"*\" for any"
                );
            }
        }
        for origin in &self.allowed_origins {
            let origin = origin.trim();
            let well_formed = origin == "*"
                || origin.split_once("://").is_some_and(|(scheme, authority)| {
                    !scheme.is_empty() && !authority.is_empty() && !authority.contains('/')
                });
            if !well_formed {
                anyhow::bail!(
                    "[server] allowed_origins in {shown} holds {origin:?}: each entry is an \
                     origin as a browser sends it (`http://localhost:3000`), or \"*\" for any"
                );
            }
        }
        for (field, value) in [
            ("body_read_timeout_secs", self.body_read_timeout_secs),
            ("mcp_session_idle_secs", self.mcp_session_idle_secs),
            ("mcp_sessions_per_key", self.mcp_sessions_per_key as u64),
        ] {
            if value == 0 {
                anyhow::bail!("[server] {field} in {shown} is 0: it must be at least 1");
            }
        }
        Ok(())
    }
}

/// The id every identity has when neither `[memory]` nor a flag names one.
pub const DEFAULT_IDENTITY: &str = "default";

/// The `[memory]` table.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// The user id in `viking://user/{user}/…`.
    pub user: String,
    /// The agent id in `viking://agent/{agent}/…`.
    pub agent: String,
    /// The tenant whose memories the commands read and write.
    pub tenant: String,
    /// `[memory.recall]`: what each model call is given from memory.
    pub recall: RecallSettings,
    /// `teach_cli`: name the memory commands (`skald search`, `ls`, `read`, `remember`) in the
    /// system prompt at session start, for hosts that give the model a shell but no memory
    /// tools. Copied into [`RecallSettings::teach_cli`].
    pub teach_cli: bool,
    /// `idle_archive_secs`: a session nothing changed for this long has what no archive covers
    /// yet archived to memory by `skald serve` (0: never; default
    /// [`skald_engine::DEFAULT_IDLE_ARCHIVE_SECS`], at most a week).
    pub idle_archive_secs: u64,
    /// `[memory.write]`: archives, extraction and the two-threshold upload. Its user and agent
    /// are always the table's own (`[memory]` `user`/`agent`).
    pub write: WriteSettings,
}

impl Default for MemoryConfig {
    fn default() -> MemoryConfig {
        MemoryConfig {
            user: DEFAULT_IDENTITY.to_owned(),
            agent: DEFAULT_IDENTITY.to_owned(),
            tenant: DEFAULT_IDENTITY.to_owned(),
            recall: RecallSettings::default(),
            teach_cli: false,
            idle_archive_secs: skald_engine::DEFAULT_IDLE_ARCHIVE_SECS,
            write: WriteSettings::default(),
        }
    }
}

impl MemoryConfig {
    /// Reads `[memory]`, refusing an owner named in `[memory.write]` (it is `[memory]`'s) and
    /// settings that cannot work.
    fn from_table(table: &toml::Table) -> Result<MemoryConfig> {
        if let Some(toml::Value::Table(write)) = table.get("write")
            && let Some(key) = ["user", "agent"]
                .iter()
                .find(|key| write.contains_key(**key))
        {
            anyhow::bail!(
                "[memory.write] sets `{key}`; the user and agent are set once, in [memory]"
            );
        }
        let mut config: MemoryConfig = toml::Value::Table(table.clone()).try_into()?;
        config.write.user = config.user.clone();
        config.write.agent = config.agent.clone();
        config.recall.teach_cli = config.teach_cli;
        let longest = u64::try_from(skald_engine::IDLE_ARCHIVE_HORIZON_MS / 1000).unwrap_or(0);
        if config.idle_archive_secs > longest {
            anyhow::bail!(
                "[memory] idle_archive_secs is {}; it must be at most {longest} (a week), or 0 \
                 to archive no idle session",
                config.idle_archive_secs
            );
        }
        config
            .recall
            .validate()
            .context("[memory.recall] is not valid")?;
        config
            .write
            .validate()
            .context("[memory.write] is not valid")?;
        Ok(config)
    }
}

impl Config {
    /// Reads `explicit` (which must exist) or `<home>/skald.toml` (which may not).
    pub fn load(explicit: Option<&Path>, home: &Home) -> Result<Config> {
        match Config::read(explicit, home)? {
            Some((text, path)) => Config::parse(&text, &path),
            None => Ok(Config::default()),
        }
    }

    /// Only the `[database]` table of the configuration [`Config::load`] reads: for the
    /// commands that only read or write stored data (`fetch`, `import`, `sessions`), which need
    /// to know where the stores are and nothing else, so a mistake in another table does not
    /// stop them.
    pub fn load_database(explicit: Option<&Path>, home: &Home) -> Result<DatabaseTable> {
        let Some((text, path)) = Config::read(explicit, home)? else {
            return Ok(DatabaseTable::default());
        };
        let shown = path.display();
        let table: toml::Table = text
            .parse()
            .with_context(|| format!("{shown} is not valid TOML"))?;
        database_table(&table, &shown.to_string())
    }

    /// The text of `explicit` (which must exist) or of `<home>/skald.toml` (`None` when it does
    /// not exist), with its path.
    fn read(explicit: Option<&Path>, home: &Home) -> Result<Option<(String, PathBuf)>> {
        let path = match explicit {
            Some(path) => path.to_path_buf(),
            None => {
                let path = home.path.join(CONFIG_FILE);
                if !path.exists() {
                    return Ok(None);
                }
                path
            }
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read the configuration {}", path.display()))?;
        Ok(Some((text, path)))
    }

    /// Reads the text of a configuration file; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        let shown = path.display();
        let table: toml::Table = text
            .parse()
            .with_context(|| format!("{shown} is not valid TOML"))?;
        if let Some(unknown) = table.keys().find(|key| !TABLES.contains(&key.as_str())) {
            anyhow::bail!(
                "{shown}: unknown key `{unknown}`; skald.toml holds only the tables [policy], \
                 [llm], [compaction], [memory], [embedding], [proxy] and [server]"
            );
        }
        let policy = match table.get("policy") {
            None => None,
            Some(toml::Value::Table(policy)) => {
                let text = toml::to_string(policy)?;
                Some(Policy::from_toml(&text).with_context(|| format!("[policy] in {shown}"))?)
            }
            Some(_) => anyhow::bail!("[policy] in {shown} must be a table"),
        };
        let llm = LlmConfig::from_toml_str(text).with_context(|| format!("[llm] in {shown}"))?;
        let compaction = match table.get("compaction") {
            None => CompactionSettings::default(),
            Some(toml::Value::Table(settings)) => {
                let settings: CompactionSettings = toml::Value::Table(settings.clone())
                    .try_into()
                    .with_context(|| format!("[compaction] in {shown}"))?;
                settings
                    .validate()
                    .with_context(|| format!("[compaction] in {shown}"))?;
                settings
            }
            Some(_) => anyhow::bail!("[compaction] in {shown} must be a table"),
        };
        let memory = match table.get("memory") {
            None => MemoryConfig::default(),
            Some(toml::Value::Table(settings)) => MemoryConfig::from_table(settings)
                .with_context(|| format!("[memory] in {shown}"))?,
            Some(_) => anyhow::bail!("[memory] in {shown} must be a table"),
        };
        let embedding = EmbeddingConfig::from_toml_str(text)
            .with_context(|| format!("[embedding] in {shown}"))?;
        let proxy: ProxyConfig = match table.get("proxy") {
            None => ProxyConfig::default(),
            Some(value @ toml::Value::Table(_)) => value
                .clone()
                .try_into()
                .with_context(|| format!("[proxy] in {shown}"))?,
            Some(_) => anyhow::bail!("[proxy] in {shown} must be a table"),
        };
        let server: ServerTable = match table.get("server") {
            None => ServerTable::default(),
            Some(value @ toml::Value::Table(_)) => value
                .clone()
                .try_into()
                .with_context(|| format!("[server] in {shown}"))?,
            Some(_) => anyhow::bail!("[server] in {shown} must be a table"),
        };
        let database = database_table(&table, &shown.to_string())?;
        let refs = refs::refs_settings(&table, &shown.to_string())?;
        let model_windows = models::model_windows(&table, &shown.to_string())?;
        let pricing: skald_engine::Pricing = match table.get("pricing") {
            None => skald_engine::Pricing::default(),
            Some(value @ toml::Value::Table(_)) => value
                .clone()
                .try_into()
                .with_context(|| format!("[pricing] in {shown}"))?,
            Some(_) => anyhow::bail!("[pricing] in {shown} must be a table"),
        };
        for (field, value) in [
            ("input_per_million", pricing.input_per_million),
            ("cache_write_multiplier", pricing.cache_write_multiplier),
            ("cache_read_multiplier", pricing.cache_read_multiplier),
        ] {
            if !value.is_finite() || value < 0.0 {
                anyhow::bail!(
                    "[pricing] {field} in {shown} is {value}: it must be a number of 0 or more"
                );
            }
        }
        if server.max_body_bytes < 1024 {
            anyhow::bail!(
                "[server] max_body_bytes in {shown} is {}; it must be at least 1024",
                server.max_body_bytes
            );
        }
        server.check(&shown)?;
        if server.max_cached_bytes == 0 {
            anyhow::bail!(
                "[server] max_cached_bytes in {shown} is 0: it must be at least 1 (the default, \
                 {}, keeps the per-session state of thousands of sessions; a small budget keeps \
                 fewer and rebuilds the others from the store on their next request)",
                skald_engine::DEFAULT_MAX_CACHED_BYTES
            );
        }
        Ok(Config {
            path: Some(path.to_path_buf()),
            policy,
            llm,
            compaction,
            memory,
            embedding,
            proxy,
            server,
            database,
            pricing,
            refs,
            model_windows,
        })
    }

    /// The model's context window: `explicit` (a `--window` flag), else `[llm]
    /// context_window_tokens`, else [`DEFAULT_WINDOW_TOKENS`].
    pub fn window_tokens(&self, explicit: Option<u64>) -> u64 {
        explicit
            .or_else(|| {
                self.llm
                    .chat
                    .as_ref()
                    .and_then(|chat| chat.context_window_tokens)
            })
            .unwrap_or(DEFAULT_WINDOW_TOKENS)
    }

    /// What writes compaction summaries: the model of `[llm.summary]`, else of `[llm]`, else the
    /// extractive summarizer. A configured model whose key variable is unset is an error, not a
    /// silent fall back: the user asked for that model.
    pub fn summarizer(&self) -> Result<Box<dyn Summarizer>> {
        let Some(provider) = self.llm.summary_or_chat() else {
            return Ok(Box::new(ExtractiveSummarizer::default()));
        };
        let table = if self.llm.summary.is_some() {
            "[llm.summary]"
        } else {
            "[llm]"
        };
        let shown = self
            .path
            .as_deref()
            .map_or_else(|| CONFIG_FILE.to_owned(), |path| path.display().to_string());
        let model = client_from_config(provider).with_context(|| {
            format!(
                "cannot use the summary model {:?} configured in {table} of {shown}",
                provider.model
            )
        })?;
        Ok(Box::new(LlmSummarizer::new(model)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn home(dir: &Path) -> Home {
        Home::resolve(Some(dir), None).unwrap()
    }

    #[test]
    fn a_missing_file_in_the_data_directory_is_no_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::load(None, &home(dir.path())).unwrap();
        assert!(config.path.is_none() && config.policy.is_none());
        assert!(Config::load(Some(&dir.path().join("nope.toml")), &home(dir.path())).is_err());
    }

    #[test]
    fn the_server_table_sets_the_edge_and_refuses_malformed_hosts_origins_and_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CONFIG_FILE);
        let config = Config::load(None, &home(dir.path())).unwrap();
        assert_eq!(
            config.server.edge(),
            skald_server::config::EdgeConfig::default()
        );
        std::fs::write(
            &path,
            "[server]\nallowed_hosts = [\"skald.internal\", \"10.0.0.5:7420\"]\n\
             allowed_origins = [\"http://localhost:3000\"]\nbody_read_timeout_secs = 5\n\
             mcp_sessions_per_key = 4\nmcp_session_idle_secs = 60\n",
        )
        .unwrap();
        let edge = Config::load(None, &home(dir.path())).unwrap().server.edge();
        assert_eq!(edge.allowed_hosts, ["skald.internal", "10.0.0.5:7420"]);
        assert_eq!(edge.allowed_origins, ["http://localhost:3000"]);
        assert_eq!(edge.body_read_timeout, std::time::Duration::from_secs(5));
        assert_eq!(edge.mcp_sessions_per_key, 4);
        assert_eq!(edge.mcp_session_idle, std::time::Duration::from_secs(60));
        for (table, words) in [
            (
                "allowed_hosts = [\"http://skald.internal\"]",
                "allowed_hosts in",
            ),
            ("allowed_hosts = [\"\"]", "allowed_hosts in"),
            (
                "allowed_origins = [\"localhost:3000\"]",
                "allowed_origins in",
            ),
            ("body_read_timeout_secs = 0", "body_read_timeout_secs in"),
            ("mcp_sessions_per_key = 0", "mcp_sessions_per_key in"),
        ] {
            std::fs::write(&path, format!("[server]\n{table}\n")).unwrap();
            let error = Config::load(None, &home(dir.path())).unwrap_err();
            assert!(format!("{error:#}").contains(words), "{table}: {error:#}");
        }
    }

    #[test]
    fn the_pricing_table_sets_the_prices_and_refuses_negative_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CONFIG_FILE);
        let config = Config::load(None, &home(dir.path())).unwrap();
        assert_eq!(config.pricing, skald_engine::Pricing::default());
        std::fs::write(&path, "[pricing]\ninput_per_million = 15.0\n").unwrap();
        let config = Config::load(None, &home(dir.path())).unwrap();
        assert_eq!(config.pricing.input_per_million, 15.0);
        assert_eq!(
            config.pricing.cache_read_multiplier,
            skald_engine::Pricing::default().cache_read_multiplier
        );
        std::fs::write(&path, "[pricing]\ncache_read_multiplier = -1.0\n").unwrap();
        let error = Config::load(None, &home(dir.path())).unwrap_err();
        assert!(
            format!("{error:#}").contains("cache_read_multiplier in"),
            "{error:#}"
        );
        std::fs::write(&path, "[pricing]\ninput_price = 3.0\n").unwrap();
        let error = Config::load(None, &home(dir.path())).unwrap_err();
        assert!(format!("{error:#}").contains("input_price"), "{error:#}");
    }

    #[test]
    fn the_server_table_sets_the_state_cache_budget_and_refuses_zero() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CONFIG_FILE);
        let config = Config::load(None, &home(dir.path())).unwrap();
        assert_eq!(
            config.server.max_cached_bytes,
            skald_engine::DEFAULT_MAX_CACHED_BYTES
        );
        std::fs::write(&path, "[server]\nmax_cached_bytes = 1048576\n").unwrap();
        let config = Config::load(None, &home(dir.path())).unwrap();
        assert_eq!(config.server.max_cached_bytes, 1_048_576);
        std::fs::write(&path, "[server]\nmax_cached_bytes = 0\n").unwrap();
        let error = Config::load(None, &home(dir.path())).unwrap_err();
        assert!(
            format!("{error:#}").contains("max_cached_bytes in"),
            "{error:#}"
        );
    }

    #[test]
    fn the_policy_table_overrides_the_default_preset() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            "[policy]\n[policy.offload]\ncompress_threshold = 4000\n",
        )
        .unwrap();
        let config = Config::load(None, &home(dir.path())).unwrap();
        let policy = config.policy.unwrap();
        assert_eq!(policy.name, "skald");
        assert_eq!(policy.offload.compress_threshold, 4000);
    }

    #[test]
    fn bad_settings_name_the_file_and_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            "[policy]\n[policy.offload]\ncompress_threshold = 5\n",
        )
        .unwrap();
        let error = format!("{:#}", Config::load(None, &home(dir.path())).unwrap_err());
        assert!(
            error.contains("skald.toml") && error.contains("at least 2000"),
            "{error}"
        );
    }

    fn parse(text: &str) -> anyhow::Result<Config> {
        Config::parse(text, Path::new("/etc/skald.toml"))
    }

    #[test]
    fn no_file_means_the_extractive_summarizer_and_the_default_window() {
        let config = Config::default();
        assert_eq!(config.summarizer().unwrap().name(), "extractive");
        assert_eq!(config.window_tokens(None), DEFAULT_WINDOW_TOKENS);
        assert_eq!(config.window_tokens(Some(8_000)), 8_000);
        assert_eq!(config.compaction, CompactionSettings::default());
    }

    #[test]
    fn the_llm_table_gives_the_window_and_the_summarizer() {
        let config = parse(
            "[llm]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\
             context_window_tokens = 32768\n[llm.summary]\nmodel = \"small\"\n",
        )
        .unwrap();
        assert_eq!(config.window_tokens(None), 32_768);
        assert_eq!(config.window_tokens(Some(1_000)), 1_000);
        assert_eq!(config.summarizer().unwrap().name(), "llm:small");
    }

    #[test]
    fn the_proxy_timeouts_and_the_shutdown_grace_are_read_and_zero_is_refused() {
        let config = parse(
            "[proxy]\nconnect_timeout_secs = 3\nidle_timeout_secs = 45\n\
             [server]\nshutdown_grace_secs = 7\n",
        )
        .unwrap();
        let timeouts = config.proxy.timeouts().unwrap();
        assert_eq!(timeouts.connect, std::time::Duration::from_secs(3));
        assert_eq!(timeouts.idle, std::time::Duration::from_secs(45));
        assert_eq!(
            timeouts.first_byte,
            skald_server::config::UpstreamTimeouts::default().first_byte
        );
        assert_eq!(config.server.shutdown_grace_secs, 7);
        assert_eq!(
            config.server.session_busy_wait_secs,
            skald_server::config::DEFAULT_SESSION_BUSY_WAIT.as_secs()
        );
        let busy = parse("[server]\nsession_busy_wait_secs = 2\n").unwrap();
        assert_eq!(busy.server.session_busy_wait_secs, 2);
        let zero = parse("[proxy]\nfirst_byte_timeout_secs = 0\n").unwrap();
        let error = zero.proxy.timeouts().unwrap_err().to_string();
        assert!(error.contains("first_byte_timeout_secs"), "{error}");
        assert!(
            parse("[proxy]\ntimeout = 3\n").is_err(),
            "an unknown key is refused"
        );
    }

    #[test]
    fn a_missing_key_variable_is_a_clear_error() {
        let config = parse(
            "[llm]\nkind = \"anthropic\"\nmodel = \"claude\"\n\
             api_key_env = \"SKALD_TEST_KEY_THAT_IS_NEVER_SET\"\n",
        )
        .unwrap();
        let error = format!("{:#}", config.summarizer().err().unwrap());
        assert!(
            error.contains("SKALD_TEST_KEY_THAT_IS_NEVER_SET")
                && error.contains("[llm] of /etc/skald.toml")
                && error.contains("not set"),
            "{error}"
        );
    }

    #[test]
    fn the_compaction_table_overrides_the_seed_defaults() {
        let config = parse(
            "[compaction]\nreserve_tokens = 16000\n[compaction.quality_guard]\nenabled = false\n",
        )
        .unwrap();
        assert_eq!(config.compaction.reserve_tokens, 16_000);
        assert!(!config.compaction.quality_guard.enabled);
        assert_eq!(config.compaction.keep_recent_turns, 3);
    }

    #[test]
    fn unknown_keys_are_named() {
        let error = format!(
            "{:#}",
            parse("[compation]\nreserve_tokens = 1\n").unwrap_err()
        );
        assert!(error.contains("unknown key `compation`"), "{error}");
        let error = format!(
            "{:#}",
            parse("[compaction]\nkeep_recent = 4\n").unwrap_err()
        );
        assert!(
            error.contains("[compaction] in /etc/skald.toml") && error.contains("keep_recent"),
            "{error}"
        );
        let error = format!(
            "{:#}",
            parse("[llm]\nkind = \"openai\"\nmodel = \"m\"\ntimeout = 5\n").unwrap_err()
        );
        assert!(
            error.contains("[llm] in /etc/skald.toml") && error.contains("timeout"),
            "{error}"
        );
    }

    #[test]
    fn the_memory_and_embedding_tables_are_read() {
        let config = Config::default();
        assert_eq!(config.memory.user, "default");
        assert!(config.embedding.is_none());
        let config =
            parse("[memory]\nuser = \"alice\"\n[embedding]\nkind = \"openai\"\nmodel = \"e\"\n")
                .unwrap();
        assert_eq!(config.memory.user, "alice");
        assert_eq!(config.memory.agent, "default");
        assert!(config.embedding.is_some());
        let error = format!("{:#}", parse("[memory]\nusr = \"a\"\n").unwrap_err());
        assert!(
            error.contains("[memory] in") && error.contains("usr"),
            "{error}"
        );
        let config = parse(
            "[memory]\nuser = \"alice\"\n[memory.recall]\nlevel = \"l0\"\n\
             [memory.write.upload]\ndrop_ratio = 0.8\n",
        )
        .unwrap();
        assert_eq!(
            config.memory.write.user, "alice",
            "the owner comes from [memory]"
        );
        assert_eq!(config.memory.write.upload.drop_ratio, 0.8);
        assert_eq!(
            config.memory.recall.level,
            skald_core::memory::recall::RecallLevel::L0
        );
        let error = format!(
            "{:#}",
            parse("[memory.write]\nuser = \"bob\"\n").unwrap_err()
        );
        assert!(error.contains("set once, in [memory]"), "{error}");
        let error = format!(
            "{:#}",
            parse("[memory.recall]\nmax_results = 0\n").unwrap_err()
        );
        assert!(
            error.contains("[memory.recall]") && error.contains("max_results"),
            "{error}"
        );
        let error = format!("{:#}", parse("[embedding]\nmodel = \"e\"\n").unwrap_err());
        assert!(
            error.contains("[embedding]") && error.contains("kind"),
            "{error}"
        );
    }

    /// `[memory] teach_cli` (issue 28, gap 9): off by default, copied into the recall settings
    /// that build the session-start system prompt, refused in `[memory.recall]` (it is set
    /// once) and as anything but a boolean, naming the field.
    #[test]
    fn teach_cli_is_read_from_the_memory_table_only() {
        assert!(!Config::default().memory.recall.teach_cli);
        let config = parse("[memory]\nteach_cli = true\n").unwrap();
        assert!(config.memory.teach_cli && config.memory.recall.teach_cli);
        for (text, named) in [
            ("[memory]\nteach_cli = \"yes\"\n", "teach_cli"),
            ("[memory.recall]\nteach_cli = true\n", "teach_cli"),
        ] {
            let error = format!("{:#}", parse(text).unwrap_err());
            assert!(error.contains(named), "{text}: {error}");
        }
    }

    /// `[memory] idle_archive_secs` (issue 28, gap 1): half an hour by default, 0 turns the
    /// sweep off, more than a week or a negative number is refused naming the field.
    #[test]
    fn idle_archive_secs_defaults_to_half_an_hour_and_is_checked() {
        assert_eq!(Config::default().memory.idle_archive_secs, 1800);
        let config = parse("[memory]\nidle_archive_secs = 0\n").unwrap();
        assert_eq!(config.memory.idle_archive_secs, 0);
        for text in [
            "[memory]\nidle_archive_secs = 604801\n",
            "[memory]\nidle_archive_secs = -5\n",
            "[memory]\nidle_archive_secs = \"soon\"\n",
        ] {
            let error = format!("{:#}", parse(text).unwrap_err());
            assert!(error.contains("idle_archive_secs"), "{text}: {error}");
        }
    }

    #[test]
    fn invalid_compaction_values_are_refused() {
        let error = format!(
            "{:#}",
            parse("[compaction]\nkeep_recent_turns = 40\n").unwrap_err()
        );
        assert!(
            error.contains("keep_recent_turns: expected at most 12, found 40"),
            "{error}"
        );
    }

    #[test]
    fn the_database_table_is_read_alone_for_the_store_only_commands() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CONFIG_FILE);
        assert_eq!(
            Config::load_database(None, &home(dir.path())).unwrap(),
            DatabaseTable::default()
        );
        // A mistake in another table stops `load`, not the store's location.
        std::fs::write(
            &path,
            "[database]\nurl = \"postgres://u@h:5432/d\"\n\n[compaction]\nkeep_recent_turns = 40\n",
        )
        .unwrap();
        assert!(Config::load(None, &home(dir.path())).is_err());
        let database = Config::load_database(None, &home(dir.path())).unwrap();
        assert_eq!(database.url.as_deref(), Some("postgres://u@h:5432/d"));
        // A bad URL is refused, naming the table.
        std::fs::write(&path, "[database]\nurl = \"mysql://u@h/d\"\n").unwrap();
        let error = format!(
            "{:#}",
            Config::load_database(None, &home(dir.path())).unwrap_err()
        );
        assert!(error.contains("[database] url in"), "{error}");
    }
}
