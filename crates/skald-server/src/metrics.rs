//! Prometheus metrics at `/metrics`: requests and latency by route and status, and what the
//! engine did — tokens saved by the pipeline, compactions, refs stored, memory uploads, proxy
//! tool interceptions and overflow recoveries. One registry per server (no global state), so
//! tests can run several servers in one process.

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::state::AppState;

/// Labels of `skald_http_requests_total`: one series per route template, method and status.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// The matched route template (`/v1/sessions/{id}/assemble`, never the raw path), or
    /// `unmatched`.
    pub route: String,
    /// The HTTP method (`GET`, `POST`…).
    pub method: String,
    /// The response's HTTP status code.
    pub status: u16,
}

/// Labels of `skald_http_request_duration_seconds`: one histogram per route template.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    /// The matched route template, or `unmatched`.
    pub route: String,
}

/// Labels of the counters kept by outcome (compactions, memory uploads, overflow recoveries).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// What happened (`compacted`, `started`, `failed`…; each family lists its own).
    pub outcome: String,
}

/// The server's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    /// `skald_http_requests_total`: requests by route template, method and status.
    pub requests: Family<RouteLabels, Counter>,
    /// `skald_http_request_duration_seconds`: time from request to response headers by route
    /// template, 50 µs to about 13 s in doubling buckets.
    pub latency: Family<LatencyLabels, Histogram>,
    /// Tokens the pipeline took out of requests (estimate before minus after assembly).
    pub tokens_saved: Counter,
    /// Compactions by outcome (`compacted`, `skipped`, `failed`).
    pub compactions: Family<OutcomeLabels, Counter>,
    /// Refs stored (offloads and truncations).
    pub refs_stored: Counter,
    /// Memory uploads by outcome (`started`, `completed`, `failed`).
    pub uploads: Family<OutcomeLabels, Counter>,
    /// Calls of skald's own tools the proxy executed instead of the client.
    pub tool_interceptions: Counter,
    /// Upstream context overflows the proxy recovered from (or not), by outcome.
    pub overflow_recoveries: Family<OutcomeLabels, Counter>,
    /// Upstream calls of the proxy that failed, by fault (`unreachable`, `no_answer`,
    /// `stalled`, `broke_off`, `undecodable`, `not_json`, `incomplete_stream`, `error_event`,
    /// `shutting_down`): a streamed answer's status is 200 before its fault, so the request
    /// counts alone do not show them.
    pub upstream_faults: Family<OutcomeLabels, Counter>,
    /// Sessions whose engine state is cached in memory.
    pub cached_sessions: Gauge,
    /// The cached engine states' estimated bytes, as measured when requests released them.
    pub cached_session_bytes: Gauge,
    /// MCP sessions open over HTTP (`/mcp`), as of the last session opened or closed.
    pub mcp_sessions: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric at zero, registered under the `skald` prefix.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("skald");
        let requests = Family::<RouteLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests by route, method and status",
            requests.clone(),
        );
        // 50 µs to ~13 s: the proxy's own overhead is sub-millisecond, upstream calls take seconds.
        let latency = Family::<LatencyLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_05, 2.0, 19))
        });
        registry.register(
            "http_request_duration_seconds",
            "Time from request to response headers, by route",
            latency.clone(),
        );
        let tokens_saved = Counter::default();
        registry.register(
            "tokens_saved",
            "Estimated tokens the pipeline took out of assembled requests",
            tokens_saved.clone(),
        );
        let compactions = Family::<OutcomeLabels, Counter>::default();
        registry.register("compactions", "Compactions by outcome", compactions.clone());
        let refs_stored = Counter::default();
        registry.register(
            "refs_stored",
            "Originals stored in the ref store",
            refs_stored.clone(),
        );
        let uploads = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "memory_uploads",
            "Memory uploads by outcome",
            uploads.clone(),
        );
        let tool_interceptions = Counter::default();
        registry.register(
            "proxy_tool_interceptions",
            "Calls of skald's tools the proxy executed itself",
            tool_interceptions.clone(),
        );
        let overflow_recoveries = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "proxy_overflow_recoveries",
            "Upstream context overflows handled by the proxy, by outcome",
            overflow_recoveries.clone(),
        );
        let upstream_faults = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "proxy_upstream_faults",
            "Upstream calls of the proxy that failed, by fault",
            upstream_faults.clone(),
        );
        let cached_sessions = Gauge::default();
        registry.register(
            "cached_sessions",
            "Sessions whose engine state is cached in memory",
            cached_sessions.clone(),
        );
        let cached_session_bytes = Gauge::default();
        registry.register(
            "cached_session_bytes",
            "Estimated bytes of the cached engine states",
            cached_session_bytes.clone(),
        );
        let mcp_sessions = Gauge::default();
        registry.register(
            "mcp_sessions",
            "MCP sessions open over streamable HTTP",
            mcp_sessions.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            tokens_saved,
            compactions,
            refs_stored,
            uploads,
            tool_interceptions,
            overflow_recoveries,
            upstream_faults,
            cached_sessions,
            cached_session_bytes,
            mcp_sessions,
        }
    }

    /// Counts one outcome of a labelled family.
    pub fn outcome(family: &Family<OutcomeLabels, Counter>, outcome: &str) {
        family
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Counts what one step of the two-threshold upload did: an upload started, each finished
    /// one as completed or failed.
    pub fn upload_step(&self, step: &skald_engine::UploadStep) {
        if step.started.is_some() {
            Metrics::outcome(&self.uploads, "started");
        }
        for outcome in &step.completed {
            let name = if outcome.is_done() {
                "completed"
            } else {
                "failed"
            };
            Metrics::outcome(&self.uploads, name);
        }
    }

    /// Sets the cache gauges from the engine's counts (read when `/metrics` is scraped).
    pub fn observe_cache(&self, sessions: usize, bytes: usize) {
        self.cached_sessions
            .set(i64::try_from(sessions).unwrap_or(i64::MAX));
        self.cached_session_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// Every metric in the Prometheus text exposition format, as `/metrics` answers.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// What a proxied request adds to its log line (a response extension the proxy sets).
#[derive(Debug, Clone, Default)]
pub struct ProxyNote {
    /// The session the proxy recorded the request in.
    pub session: String,
    /// The status of the last upstream call (`None`: none was made).
    pub upstream_status: Option<u16>,
    /// Time spent waiting for the upstream's answers (to their headers), in milliseconds.
    pub upstream_ms: f64,
    /// Upstream calls made (skald's tool rounds and overflow retries included).
    pub upstream_calls: u32,
    /// Estimated tokens the pipeline took out of this request's calls.
    pub tokens_saved: u64,
}

/// Why a request failed, for its log line (a response extension every [`crate::ApiError`]
/// sets).
#[derive(Debug, Clone)]
pub struct ErrorNote(pub String);

/// Middleware: counts every request and times it, labelled by its route template (never the
/// raw path, which would give one series per session id), and logs one line for it: route,
/// status and latency, the proxy's session, upstream status and time and tokens saved, and an
/// error's message (`RUST_LOG` sets the level; 5xx are errors, 4xx warnings).
pub async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let started = std::time::Instant::now();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    log_request(&method, &path, &response, started.elapsed());
    state
        .metrics
        .latency
        .get_or_create(&LatencyLabels {
            route: route.clone(),
        })
        .observe(started.elapsed().as_secs_f64());
    state
        .metrics
        .requests
        .get_or_create(&RouteLabels {
            route,
            method,
            status: response.status().as_u16(),
        })
        .inc();
    response
}

/// The request's log line.
fn log_request(method: &str, path: &str, response: &Response, elapsed: std::time::Duration) {
    let status = response.status().as_u16();
    let latency_ms = elapsed.as_secs_f64() * 1e3;
    let error = response
        .extensions()
        .get::<ErrorNote>()
        .map(|note| note.0.as_str());
    let proxy = response.extensions().get::<ProxyNote>();
    macro_rules! line {
        ($level:ident) => {
            match proxy {
                Some(note) => tracing::$level!(
                    method,
                    path,
                    status,
                    latency_ms = format_args!("{latency_ms:.2}"),
                    session = note.session.as_str(),
                    upstream_status = note.upstream_status,
                    upstream_ms = format_args!("{:.2}", note.upstream_ms),
                    upstream_calls = note.upstream_calls,
                    overhead_ms = format_args!("{:.2}", (latency_ms - note.upstream_ms).max(0.0)),
                    tokens_saved = note.tokens_saved,
                    error,
                    "request"
                ),
                None => tracing::$level!(
                    method,
                    path,
                    status,
                    latency_ms = format_args!("{latency_ms:.2}"),
                    error,
                    "request"
                ),
            }
        };
    }
    if status >= 500 {
        line!(error);
    } else if status >= 400 {
        line!(warn);
    } else {
        line!(info);
    }
}
