//! `skald serve`: the HTTP server (engine API, memory and refs API, OpenAI / Anthropic proxy)
//! on the data directory's database, until Ctrl-C or SIGTERM; then in-flight requests and
//! background memory uploads finish before the process exits.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use skald_engine::storage::DATABASE_FILE;
use skald_server::{AppState, ServerConfig};

use crate::config::Config;
use crate::home::Home;
use crate::local::{self, Models};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (default: [server] addr in skald.toml, else 127.0.0.1:7420). A
    /// non-loopback address needs at least one API key (`skald keys create`).
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: Option<String>,
    /// Context window of every call, in tokens, whatever its model. Without it, a request's
    /// model picks its window: [models."name"] window = N in skald.toml, else its family's
    /// (Claude, GPT, Gemini, …), else [llm] context_window_tokens, else 200000.
    #[arg(long, value_name = "TOKENS")]
    pub window: Option<u64>,
    /// Do not give requests long-term memory (recall, profile, memory tools).
    #[arg(long)]
    pub no_memory: bool,
    /// Keep every store in this PostgreSQL database (postgres://user@host:5432/db) instead of
    /// the data directory's SQLite file; several servers can share it (default: [database] url
    /// in skald.toml, else SQLite).
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
}

/// The PostgreSQL database the server's stores are in: `--database`, else `[database] url`;
/// `None`: the data directory's SQLite file.
pub fn database_url(config: &Config, flag: Option<&str>) -> Result<Option<String>> {
    match flag {
        Some(url) => {
            crate::config::check_database_url(url, "--database")?;
            Ok(Some(url.to_owned()))
        }
        None => Ok(config.database.url.clone()),
    }
}

/// The server's state over the stores `--database` / `[database] url` name (else the data
/// directory's SQLite file), and where they are, as the banner shows it (no password).
pub fn open_state(
    config: &Config,
    flag: Option<&str>,
    home: &Home,
    server_config: ServerConfig,
) -> Result<(AppState, String)> {
    Ok(match database_url(config, flag)? {
        Some(url) => {
            let shown = skald_engine::storage::redact(&url);
            let state = AppState::open_postgres(&url, server_config)
                .with_context(|| format!("cannot open the store in {shown}"))?;
            (state, shown)
        }
        None => {
            let database = home.ensure()?.join(DATABASE_FILE);
            let state = AppState::open(&database, server_config)
                .with_context(|| format!("cannot open the store {}", database.display()))?;
            (state, database.display().to_string())
        }
    })
}

/// What the server is built from, checked before anything listens. The engine's part is
/// [`local::engine_config`], the mapping the local commands use too.
pub fn server_config(config: &Config, args: &ServeArgs) -> Result<ServerConfig> {
    // The upstreams and timeouts are checked before the models are built, so a configuration
    // with several mistakes reports them in the order it always has.
    let openai = config
        .proxy
        .openai
        .as_ref()
        .map(|table| table.resolve("[proxy.openai]"))
        .transpose()?;
    let anthropic = config
        .proxy
        .anthropic
        .as_ref()
        .map(|table| table.resolve("[proxy.anthropic]"))
        .transpose()?;
    let timeouts = config.proxy.timeouts()?;
    let engine = local::engine_config(config, args.window, !args.no_memory, Models::ALL)?;
    let mut server = ServerConfig::new(engine.policy.clone());
    server.engine = engine;
    server.openai = openai;
    server.anthropic = anthropic;
    server.max_body_bytes = config.server.max_body_bytes;
    server.timeouts = timeouts;
    server.shutdown_grace = std::time::Duration::from_secs(config.server.shutdown_grace_secs);
    server.edge = config.server.edge();
    server.session_busy_wait = std::time::Duration::from_secs(config.server.session_busy_wait_secs);
    server.refs = config.refs.clone();
    Ok(server)
}

/// The filter when `RUST_LOG` is unset: one line per request and every error, from skald's
/// crates only.
const DEFAULT_LOG_FILTER: &str = "warn,skald_server=info,skald_engine=info,skald_cli=info";

/// Logs to stderr through `tracing`, filtered by `RUST_LOG` (default [`DEFAULT_LOG_FILTER`]).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    // A second init (tests running `run` twice in one process) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

pub fn run(args: &ServeArgs, config: &Config, home: &Home) -> Result<ExitCode> {
    init_logging();
    let text = args
        .addr
        .clone()
        .unwrap_or_else(|| config.server.addr.clone());
    // A name (`localhost:7420`) is resolved here, so the loopback check below sees the address
    // the server will really listen on.
    let addr: SocketAddr = std::net::ToSocketAddrs::to_socket_addrs(text.as_str())
        .ok()
        .and_then(|mut addrs| addrs.next())
        .with_context(|| {
            format!("--addr {text:?} is not HOST:PORT (e.g. 127.0.0.1:7420 or localhost:7420)")
        })?;
    let server_config = server_config(config, args)?;
    let (state, data) = open_state(config, args.database.as_deref(), home, server_config)?;
    if !state.auth_required() && !addr.ip().is_loopback() {
        bail!(
            "refusing to listen on {addr} without API keys: anyone who can reach it could read \
             and write every session and memory. Create a key first (`skald keys create --tenant \
             NAME`), or listen on a loopback address (127.0.0.1)"
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let shutdown = shutdown_signal()?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let bound = listener.local_addr().unwrap_or(addr);
        eprintln!(
            "skald {} serving on http://{bound}",
            env!("CARGO_PKG_VERSION")
        );
        eprintln!("  data: {data}");
        if state.auth_required() {
            eprintln!(
                "  auth: API keys required (x-skald-key or Authorization: Bearer sk-skald-…)"
            );
        } else {
            eprintln!("  auth: none — no API keys exist, so only this machine can connect");
        }
        let upstream = |name: &str, upstream: &Option<skald_server::Upstream>| match upstream {
            Some(upstream) => eprintln!(
                "  proxy {name}: {} ({})",
                upstream.base_url,
                if upstream.api_key.is_some() {
                    "skald's key"
                } else {
                    "client's key passes through"
                }
            ),
            None => eprintln!("  proxy {name}: not configured ([proxy.{name}] base_url)"),
        };
        upstream("openai", &state.config.openai);
        upstream("anthropic", &state.config.anthropic);
        skald_server::serve(listener, state, shutdown)
            .await
            .context("the server failed")?;
        eprintln!("skald: stopped; in-flight requests and background work finished");
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C, or SIGTERM on Unix (what service managers and containers send). The handlers are
/// installed when this is called, not when the future is first polled, so a signal that arrives
/// while the server is still printing its banner is not lost to the default action (exit).
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot install the SIGTERM handler")?;
    let ctrl_c = tokio::signal::ctrl_c();
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = ctrl_c => {}
            _ = terminate.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        eprintln!("skald: shutting down: finishing in-flight requests and background work…");
    })
}
