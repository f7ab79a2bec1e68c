//! `POST /v1/messages/count_tokens` and `GET /v1/models`: the two side routes a client of the
//! Messages API calls beside its model calls.
//!
//! A count is answered by the upstream for the request as skald would send it: the client's
//! messages through the session pipeline (offload, pruning, truncation — the originals of
//! anything offloaded stored first, as for a call) with skald's system prompt addition and tools
//! added. It is computed detached from any session: a count is often of a text that is no
//! conversation at all (Claude Code counts a file before reading it), and a count must never
//! change a session. The models list passes through as the upstream gives it.

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use skald_core::memory::tools::tool_specs as memory_tool_specs;
use skald_engine::{AssembleRequest, SessionState, assemble, function_spec};

use skald_engine::error_with_causes;

use super::exchange::{Exchange, forward_raw};
use crate::error::ApiError;
use crate::state::AppState;

/// Counts the request's tokens upstream, as skald would send it.
pub async fn count_tokens(
    exchange: Exchange,
    conversation: Vec<skald_core::message::Message>,
) -> Response {
    let state = &exchange.state;
    let mut detached = SessionState::default();
    let assembled = match assemble(
        state.engine.refs(),
        &state.engine.config().policy,
        &mut detached,
        conversation,
        AssembleRequest {
            tenant: &exchange.tenant,
            context_window_tokens: state.engine.config().window_tokens,
            now_ms: exchange.now_ms,
            fetch_available: true,
            host_prefix_tokens: 0,
        },
    ) {
        Ok(assembled) => assembled,
        Err(error) => {
            return ApiError::Internal(format!("preparing the count request failed: {error}"))
                .into_response();
        }
    };
    let mut skald_tools: Vec<Value> = assembled.tools.iter().map(function_spec).collect();
    if exchange.identity.is_some() {
        skald_tools.extend(memory_tool_specs().iter().map(function_spec));
    }
    let client_names: Vec<&str> = exchange
        .client_tools
        .iter()
        .filter_map(|tool| tool.get("name").and_then(Value::as_str))
        .collect();
    skald_tools.retain(|tool| {
        tool.pointer("/function/name")
            .and_then(Value::as_str)
            .is_none_or(|name| !client_names.contains(&name))
    });
    let body = exchange.encode_parts(
        assembled.messages,
        assembled.system_prompt_addition.as_deref(),
        skald_tools,
    );
    match serde_json::to_vec(&body) {
        Ok(bytes) => forward_raw(&exchange, bytes).await,
        Err(error) => ApiError::Internal(format!("cannot serialize the count request: {error}"))
            .into_response(),
    }
}

/// `GET {url}` (the upstream's models list) with `headers`, the answer passed back as it came.
pub async fn models(state: &AppState, url: &str, headers: HeaderMap) -> Result<Response, ApiError> {
    let response = state
        .http
        .get(url)
        .headers(headers)
        .header(reqwest::header::ACCEPT_ENCODING, "identity")
        .send()
        .await
        .map_err(|error| {
            ApiError::BadGateway(format!(
                "cannot reach the upstream at {url}: {}",
                error_with_causes(&error)
            ))
        })?;
    let status = response.status();
    let headers = super::upstream::response_headers(response.headers());
    let body = super::body::read_whole(response, state.config.timeouts.idle)
        .await
        .map_err(super::body::Fault::into_api_error)?;
    let mut out = Response::new(axum::body::Body::from(body));
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    Ok(out)
}
