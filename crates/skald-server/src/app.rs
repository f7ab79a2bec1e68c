//! The router: every route, its OpenAPI description (utoipa: the document is generated from the
//! same handlers the router serves, so the two cannot drift), the request-size limit, the metrics
//! middleware, the edge's checks (`crate::edge`), the MCP gate, and [`serve`] with graceful
//! shutdown.

use std::future::{Future, IntoFuture};

use axum::Json;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::Uri;
use axum::response::IntoResponse;
use serde::Serialize;
use tokio::net::TcpListener;
use utoipa::{OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "skald",
        description = "Context engine for LLM agents: engine API (OpenClaw ContextEngine), \
                       memory and refs API, OpenAI and Anthropic proxy."
    ),
    tags(
        (name = "health", description = "Liveness, metrics and this document"),
    )
)]
struct ApiDoc;

/// `GET /healthz`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok` when the server answers.
    pub status: &'static str,
    /// The skald-server crate's version (`CARGO_PKG_VERSION`).
    pub version: &'static str,
    /// Whether requests need an API key.
    pub auth_required: bool,
}

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The server is up", body = Health)))]
async fn healthz(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        auth_required: state.auth_required(),
    })
}

/// Prometheus metrics, text exposition format. Needs a key when the server has keys (the counts
/// cover every tenant, so they are not for anonymous callers).
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain"),
              (status = 401, description = "A key is required")))]
async fn metrics(State(state): State<AppState>, _caller: crate::auth::Caller) -> impl IntoResponse {
    state.metrics.observe_cache(
        state.engine.cached_sessions(),
        state.engine.cached_session_bytes(),
    );
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

/// `GET /` (and `HEAD /`, which clients such as Claude Code send at start-up to check the base
/// URL answers): what this server is.
async fn root() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "name": "skald",
        "version": env!("CARGO_PKG_VERSION"),
        "routes": "/openapi.json",
    }))
}

/// A known route called with a method it does not serve: the same JSON error as every other.
async fn method_not_allowed(method: axum::http::Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed(format!(
        "{} does not serve {method}; GET /openapi.json lists every route with its methods",
        uri.path()
    ))
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::NotFound(format!(
        "no route {}; GET /openapi.json lists every route",
        uri.path()
    ))
}

/// Every route with its state, and the OpenAPI document that describes exactly them.
pub fn router(state: AppState) -> axum::Router {
    router_until(state, tokio_util::sync::CancellationToken::new())
}

/// [`router`], with the MCP endpoint's open streams ended when `shutdown` is cancelled.
fn router_until(state: AppState, shutdown: tokio_util::sync::CancellationToken) -> axum::Router {
    let (router, mut api) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(healthz))
        .routes(routes!(metrics))
        .merge(crate::routes::engine::router())
        .merge(crate::routes::memory::router())
        .merge(crate::routes::refs::router())
        .merge(crate::routes::tools::router())
        .merge(crate::proxy::router())
        .split_for_parts();
    api.info.version = env!("CARGO_PKG_VERSION").to_owned();
    let document = api.clone();
    let max_body = state.config.max_body_bytes;
    let (mcp, mcp_sessions) = crate::mcp::http_service(state.clone(), shutdown);
    let mcp = tower::ServiceBuilder::new()
        .layer(axum::middleware::from_fn_with_state(
            (state.clone(), mcp_sessions),
            crate::mcp::gate,
        ))
        .service(mcp);
    // Outermost first: the body limit, the metrics (which see every answer, refusals
    // included), the edge's checks, the JSON shape of errors, then the routes.
    router
        .route(
            "/openapi.json",
            axum::routing::get(move || async move { Json(document) }),
        )
        .route("/", axum::routing::get(root))
        .nest_service("/mcp", mcp)
        .merge(crate::ui::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(crate::edge::json_errors))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::edge::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::metrics::track,
        ))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state)
}

/// The OpenAPI document of [`router`], without starting a server.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let (_, mut api) = OpenApiRouter::<AppState>::with_openapi(ApiDoc::openapi())
        .routes(routes!(healthz))
        .routes(routes!(metrics))
        .merge(crate::routes::engine::router())
        .merge(crate::routes::memory::router())
        .merge(crate::routes::refs::router())
        .merge(crate::routes::tools::router())
        .merge(crate::proxy::router())
        .split_for_parts();
    api.info.version = env!("CARGO_PKG_VERSION").to_owned();
    api
}

/// Serves `state` on `listener` until `shutdown` resolves, sweeping idle sessions into memory
/// meanwhile (`idle`); then in-flight requests finish and
/// background work (memory uploads, extractions) is waited for, so nothing is lost — for at
/// most the configured grace ([`crate::ServerConfig::shutdown_grace`]): a request held by an
/// upstream that never answers does not keep the process alive (what it had stored is stored;
/// an unfinished upload is retried at the next start).
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let tasks = state.tasks.clone();
    let grace = state.config.shutdown_grace;
    // The engine's upload driver aborts its tasks when dropped: the engine must outlive the wait
    // below.
    let engine = state.engine.clone();
    let (stopping, stopped) = tokio::sync::oneshot::channel::<()>();
    let mcp_shutdown = tokio_util::sync::CancellationToken::new();
    let mcp_streams = mcp_shutdown.clone();
    let proxy_calls = state.shutdown.clone();
    let idle_sweep = tokio_util::sync::CancellationToken::new();
    crate::idle::start(&state, idle_sweep.clone());
    let signal = async move {
        shutdown.await;
        mcp_streams.cancel();
        idle_sweep.cancel();
        let _ = stopping.send(());
    };
    // Streams go out event by event: without TCP_NODELAY, Nagle's algorithm holds each small
    // event until the client acknowledges the one before, and a client that delays its
    // acknowledgements (Node's HTTP client does) gets every event 40 ms late.
    let listener =
        axum::serve::ListenerExt::tap_io(listener, |stream: &mut tokio::net::TcpStream| {
            if let Err(error) = stream.set_nodelay(true) {
                tracing::debug!(%error, "cannot set TCP_NODELAY on a connection");
            }
        });
    let serving = axum::serve(listener, router_until(state, mcp_shutdown))
        .with_graceful_shutdown(signal)
        .into_future();
    tokio::pin!(serving);
    let deadline = async move {
        match stopped.await {
            Ok(()) => {
                // Proxied calls get the grace to finish; those still running near its end are
                // ended in their API's own terms (a stream's error event, a JSON 503), with a
                // moment left for that to reach the client before connections are dropped.
                let margin = (grace / 2).min(std::time::Duration::from_secs(1));
                tokio::time::sleep(grace.saturating_sub(margin)).await;
                proxy_calls.cancel();
                tokio::time::sleep(margin).await;
            }
            // The server ended without a signal (an error): nothing to bound.
            Err(_) => std::future::pending::<()>().await,
        }
    };
    let drained = tokio::select! {
        result = &mut serving => {
            result?;
            true
        }
        () = deadline => false,
    };
    if drained {
        tasks.close();
        if tokio::time::timeout(grace, tasks.wait()).await.is_err() {
            tracing::warn!(
                grace_seconds = grace.as_secs(),
                "background work still running at the end of the shutdown grace; stopping anyway"
            );
        }
    } else {
        tracing::warn!(
            grace_seconds = grace.as_secs(),
            "requests still in flight at the end of the shutdown grace; stopping anyway"
        );
    }
    drop(engine);
    Ok(())
}
