//! `POST /v1/messages/count_tokens` and `GET /v1/models`: the two side routes a client of the
//! Messages API calls beside its model calls.
//!
//! A count is answered by the upstream for the request as skald would send it, which the engine
//! prepares detached from any session (`Engine::prepare_detached`): the client's messages
//! through the pipeline with skald's system prompt addition and tools added; a count never
//! changes a session. The models list passes through as the upstream gives it.

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use skald_engine::error_with_causes;

use super::exchange::{Exchange, forward_raw};
use crate::error::ApiError;
use crate::state::AppState;

/// Counts the request's tokens upstream, as skald would send it
/// ([`skald_engine::Engine::prepare_detached`]).
pub async fn count_tokens(
    exchange: Exchange,
    conversation: Vec<skald_core::message::Message>,
) -> Response {
    let prepared = exchange.state.engine.prepare_detached(
        &exchange.tenant,
        exchange.request.model.as_deref(),
        conversation,
        &exchange.client_tools,
        exchange.identity.is_some(),
        exchange.now_ms,
    );
    let call = match prepared {
        Ok(call) => call,
        Err(error) => {
            return ApiError::Internal(format!("preparing the count request failed: {error}"))
                .into_response();
        }
    };
    let body = exchange.encode_parts(
        call.messages,
        call.system_addition.as_deref(),
        call.skald_tools,
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
