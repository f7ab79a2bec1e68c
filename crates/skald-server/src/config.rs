//! What a server is started with: the pipeline and memory settings every session gets, the
//! upstreams the proxy forwards to, and the request limits. The CLI builds it from `skald.toml`
//! (`[proxy]`, `[server]` and the tables the other commands read); tests build it directly.

use std::time::Duration;

use skald_core::pipeline::policy::Policy;
use skald_engine::EngineConfig;
use skald_engine::storage::RefSettings;
pub use skald_engine::{DEFAULT_WINDOW_TOKENS, MemoryDefaults};

/// The largest request body accepted by default (a long session's full history fits; a runaway
/// upload does not).
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Where the proxy forwards one API's requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// The provider's base URL, as an SDK's `base_url` would be (`https://api.openai.com/v1`,
    /// `https://api.anthropic.com`); skald appends `/chat/completions` or `/v1/messages`.
    pub base_url: String,
    /// A key skald sends upstream itself (the virtual-key pattern: clients hold only skald
    /// keys). `None`: the client's own provider key passes through.
    pub api_key: Option<String>,
}

/// How long the proxy waits for an upstream before it gives up on the call (and answers 504,
/// or ends a stream with an error event). A slow model is normal; a dead one must not hold a
/// session — and the server's shutdown — forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamTimeouts {
    /// To open the connection.
    pub connect: Duration,
    /// From sending the request to the answer's headers (a non-streamed answer's headers come
    /// when the whole answer is written, so this is long by default).
    pub first_byte: Duration,
    /// Between two pieces of an answer's body once it started (a stream that stalls).
    pub idle: Duration,
}

impl Default for UpstreamTimeouts {
    fn default() -> UpstreamTimeouts {
        UpstreamTimeouts {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(600),
            idle: Duration::from_secs(300),
        }
    }
}

/// How long a graceful stop waits for in-flight requests and background work before the
/// server exits anyway (an upload found unfinished is retried at the next start).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// How long a request's body may take to arrive once its headers have: long enough for the
/// default body limit over a slow link, short enough that a client that never finishes its
/// body does not hold a connection and a worker for ever.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(120);

/// Which requests the server answers at all, before any key is looked at: the defences of a
/// server on a developer's machine against the web pages its browser opens (DNS rebinding,
/// cross-site "simple" requests), and the limits on what a request may make the server hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeConfig {
    /// Host names (or addresses) beyond the loopback ones that requests may name in `Host`
    /// (`[server] allowed_hosts`; `"*"`: any). With no key in the store only loopback names and
    /// these are answered, so a page whose name was rebound to 127.0.0.1 is refused; once the
    /// server has keys, an empty list answers any name (every request carries a key a page
    /// cannot forge) and a non-empty one still restricts it.
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) whose pages may send changing requests
    /// (`[server] allowed_origins`; `"*"`: any). A page is always allowed on its own origin.
    pub allowed_origins: Vec<String>,
    /// How long a request body may take to arrive (see [`DEFAULT_BODY_READ_TIMEOUT`]).
    pub body_read_timeout: Duration,
    /// MCP sessions kept per key (per open server) at once; past it the least recently used is
    /// closed.
    pub mcp_sessions_per_key: usize,
    /// An MCP session idle this long is closed (its client starts a new one on its next call).
    pub mcp_session_idle: Duration,
}

/// MCP sessions kept per key by default: a handful of editors and agents each.
pub const DEFAULT_MCP_SESSIONS_PER_KEY: usize = 32;

/// How long an idle MCP session is kept by default.
pub const DEFAULT_MCP_SESSION_IDLE: Duration = Duration::from_secs(10 * 60);

impl Default for EdgeConfig {
    fn default() -> EdgeConfig {
        EdgeConfig {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            mcp_sessions_per_key: DEFAULT_MCP_SESSIONS_PER_KEY,
            mcp_session_idle: DEFAULT_MCP_SESSION_IDLE,
        }
    }
}
/// How long a proxied request waits for another request that holds its session before it is
/// answered 409 (see [`ServerConfig::session_busy_wait`]). A request of a session finishes its
/// bookkeeping within milliseconds of its answer's last byte, so a few seconds cover a client
/// that sends its next request at once with a wide margin; a wait longer than that is a call
/// still running (or hung) upstream, which may take minutes — the client learns it promptly,
/// and the provider SDKs retry a 409 with backoff.
pub const DEFAULT_SESSION_BUSY_WAIT: Duration = Duration::from_secs(5);

/// Everything a server runs with: the engine's configuration, and what is about HTTP — the
/// upstreams, the request limits, the timeouts.
#[derive(Clone)]
pub struct ServerConfig {
    /// The pipeline, compaction, window, memory, cache limits and models of every session.
    pub engine: EngineConfig,
    /// `[proxy.openai]`: where `POST /v1/chat/completions` and `POST /v1/responses` go.
    pub openai: Option<Upstream>,
    /// `[proxy.anthropic]`: where `POST /v1/messages` goes.
    pub anthropic: Option<Upstream>,
    /// Requests over this many bytes are refused with 413.
    pub max_body_bytes: usize,
    /// The proxy's upstream timeouts.
    pub timeouts: UpstreamTimeouts,
    /// How long a stop waits for in-flight work (see [`DEFAULT_SHUTDOWN_GRACE`]).
    pub shutdown_grace: Duration,
    /// Which hosts and origins are answered, the body deadline and the MCP session limits.
    pub edge: EdgeConfig,
    /// How long a proxied request waits for its session while another request holds it, before
    /// it is answered 409 (see [`DEFAULT_SESSION_BUSY_WAIT`]).
    pub session_busy_wait: Duration,
    /// `[refs]`: how long the originals behind placeholders are kept, and how many stay cached
    /// in memory (used where the server opens its stores).
    pub refs: RefSettings,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("engine", &self.engine)
            .field("openai", &self.openai.as_ref().map(|up| &up.base_url))
            .field("anthropic", &self.anthropic.as_ref().map(|up| &up.base_url))
            .field("max_body_bytes", &self.max_body_bytes)
            .field("edge", &self.edge)
            .field("refs", &self.refs)
            .finish_non_exhaustive()
    }
}

impl ServerConfig {
    /// The defaults: the engine's defaults over `policy` (seed 001's compaction, memory on, the
    /// extractive summarizer, the deterministic memory extractor, no embedder), no upstream.
    pub fn new(policy: Policy) -> ServerConfig {
        ServerConfig {
            engine: EngineConfig::new(policy),
            openai: None,
            anthropic: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            timeouts: UpstreamTimeouts::default(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            edge: EdgeConfig::default(),
            session_busy_wait: DEFAULT_SESSION_BUSY_WAIT,
            refs: RefSettings::default(),
        }
    }
}
