//! What a server is started with: the pipeline and memory settings every session gets, the
//! upstreams the proxy forwards to, and the request limits. The CLI builds it from `skald.toml`
//! (`[proxy]`, `[server]` and the tables the other commands read); tests build it directly.

use std::sync::Arc;
use std::time::Duration;

use skald_core::compaction::CompactionSettings;
use skald_core::memory::recall::RecallSettings;
use skald_core::memory::write::WriteSettings;
use skald_core::pipeline::policy::Policy;
use skald_llm::{DeterministicExtractor, Embedder, MemoryExtractor, Summarizer};

/// The largest request body accepted by default (a long session's full history fits; a runaway
/// upload does not).
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// The context window assumed for a session when neither the request nor the configuration
/// names one.
pub const DEFAULT_WINDOW_TOKENS: u64 = 200_000;

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

/// Who memory acts for when a request does not say (`[memory]` user and agent).
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryDefaults {
    pub user: String,
    pub agent: String,
    pub recall: RecallSettings,
    pub write: WriteSettings,
    /// Whether requests get recall, the session-start snapshot and the memory tools.
    pub enabled: bool,
}

impl Default for MemoryDefaults {
    fn default() -> MemoryDefaults {
        MemoryDefaults {
            user: "default".to_owned(),
            agent: "default".to_owned(),
            recall: RecallSettings::default(),
            write: WriteSettings::default(),
            enabled: true,
        }
    }
}

/// Everything a server runs with.
#[derive(Clone)]
pub struct ServerConfig {
    /// The pipeline run over every session on every request.
    pub policy: Policy,
    pub compaction: CompactionSettings,
    /// The window used when a request gives no token budget.
    pub window_tokens: u64,
    pub memory: MemoryDefaults,
    /// `[proxy.openai]`: where `POST /v1/chat/completions` goes.
    pub openai: Option<Upstream>,
    /// `[proxy.anthropic]`: where `POST /v1/messages` goes.
    pub anthropic: Option<Upstream>,
    /// Requests over this many bytes are refused with 413.
    pub max_body_bytes: usize,
    /// The proxy's upstream timeouts.
    pub timeouts: UpstreamTimeouts,
    /// How long a stop waits for in-flight work (see [`DEFAULT_SHUTDOWN_GRACE`]).
    pub shutdown_grace: Duration,
    /// Sessions whose engine state stays in memory (least recently used idle ones are evicted
    /// and rebuilt on their next request).
    pub max_cached_sessions: usize,
    /// Bytes of engine state that stay in memory, as estimated when requests release it (least
    /// recently used idle states are evicted; one over it alone is trimmed when released). See
    /// [`crate::state::DEFAULT_MAX_CACHED_BYTES`] for the default's reasoning.
    pub max_cached_bytes: usize,
    /// Writes compaction summaries (the configured model, or the extractive one).
    pub summarizer: Arc<dyn Summarizer>,
    /// Embeds memories and queries; `None`: memory search is full-text only.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// Extracts memories from what leaves a session's context (compacted spans, uploads).
    pub extractor: Arc<dyn MemoryExtractor>,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("window_tokens", &self.window_tokens)
            .field("memory", &self.memory)
            .field("openai", &self.openai.as_ref().map(|up| &up.base_url))
            .field("anthropic", &self.anthropic.as_ref().map(|up| &up.base_url))
            .field("max_body_bytes", &self.max_body_bytes)
            .field("embedder", &self.embedder.is_some())
            .field("extractor", &self.extractor.name())
            .finish_non_exhaustive()
    }
}

impl ServerConfig {
    /// The defaults: the `skald` policy, seed 001's compaction, memory on, no upstream, the
    /// extractive summarizer, the deterministic memory extractor and no embedder.
    pub fn new(policy: Policy) -> ServerConfig {
        ServerConfig {
            policy,
            compaction: CompactionSettings::default(),
            window_tokens: DEFAULT_WINDOW_TOKENS,
            memory: MemoryDefaults::default(),
            openai: None,
            anthropic: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            timeouts: UpstreamTimeouts::default(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            max_cached_sessions: crate::state::MAX_CACHED_SESSIONS,
            max_cached_bytes: crate::state::DEFAULT_MAX_CACHED_BYTES,
            summarizer: Arc::new(skald_llm::ExtractiveSummarizer::default()),
            embedder: None,
            extractor: Arc::new(DeterministicExtractor::default()),
        }
    }
}
