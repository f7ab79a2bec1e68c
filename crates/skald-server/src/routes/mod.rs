//! The non-proxy routes, one module per API: `engine` (sessions: ingest, assemble, compact,
//! after-turn, bootstrap, reads), `memory` (ls, tree, read, search, remember, forget, resources,
//! history), `refs` (fetch with slices) and `tools` (skald's tools for hosts that run them). Also what they share: extractors whose rejections
//! are [`ApiError`]s (so a malformed body, query or path is a JSON 4xx that says what was
//! wrong), and the mapping of the engine's and the stores' errors to statuses.

pub mod engine;
pub mod memory;
pub mod refs;
pub mod tools;

use axum::extract::{FromRequest, FromRequestParts};
use skald_core::ids::SessionId;
use skald_engine::{Classify, ErrorKind};

use crate::error::ApiError;

/// A JSON object body; a malformed one, an unknown field or a wrong type is a 400 naming it, an
/// over-size one a 413, one that is not JSON a 415. Every request body is an object: serde
/// would also read a struct from an array of its fields in order (`[true, true]` for
/// `{"pauseCompaction": true, "pauseOffload": true}`), which no client means.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        if !crate::edge::is_json(request.headers()) {
            return Err(ApiError::UnsupportedMediaType(
                "the request body must be JSON with `content-type: application/json`".to_owned(),
            ));
        }
        let bytes = bytes::Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge(format!(
                        "the request body is over the server's size limit: {}",
                        rejection.body_text()
                    ))
                } else {
                    ApiError::BadRequest(format!(
                        "the request body could not be read: {}",
                        rejection.body_text()
                    ))
                }
            })?;
        let first = bytes.iter().find(|byte| !byte.is_ascii_whitespace());
        if let Some(&first) = first
            && first != b'{'
            && serde_json::from_slice::<serde_json::Value>(&bytes).is_ok()
        {
            return Err(ApiError::BadRequest(
                "the request body must be a JSON object (`{…}`) with the route's fields by name"
                    .to_owned(),
            ));
        }
        let axum::Json(value) = axum::Json::<T>::from_bytes(&bytes)?;
        Ok(ApiJson(value))
    }
}

/// A query string, checked like [`ApiJson`].
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// Path parameters, checked like [`ApiJson`].
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// A route that takes no query string: one given is refused rather than ignored, since the
/// caller meant something by it.
#[derive(Debug)]
pub struct NoQuery;

impl<S: Send + Sync> FromRequestParts<S> for NoQuery {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<NoQuery, ApiError> {
        match parts.uri.query() {
            None | Some("") => Ok(NoQuery),
            Some(query) => Err(ApiError::BadRequest(format!(
                "{} takes no query parameters (got `{query}`); GET /openapi.json lists each \
                 route's",
                parts.uri.path()
            ))),
        }
    }
}

/// A session id from the path, checked before any store is touched.
pub fn session_id(raw: String) -> Result<SessionId, ApiError> {
    SessionId::parse(raw).map_err(|error| ApiError::BadRequest(error.to_string()))
}

/// What a failure of the engine means for the caller, by its [`ErrorKind`] (the engine
/// classifies every store's errors; no route looks inside one).
pub fn failure(error: impl Classify) -> ApiError {
    match error.kind() {
        ErrorKind::BadInput => ApiError::BadRequest(error.to_string()),
        ErrorKind::SessionNotFound { id } => ApiError::NotFound(format!(
            "no session {id:?}: ingest messages into it or bootstrap it first (GET /v1/sessions \
             lists this key's sessions)"
        )),
        ErrorKind::MemoryNotFound { uri } => ApiError::NotFound(format!(
            "no memory at {uri}; GET /v1/memory/ls lists what exists"
        )),
        ErrorKind::NotFound => ApiError::NotFound(error.to_string()),
        ErrorKind::Gone => ApiError::Gone(error.to_string()),
        ErrorKind::Conflict => ApiError::Unprocessable(error.to_string()),
        ErrorKind::TooLarge => ApiError::PayloadTooLarge(error.to_string()),
        ErrorKind::Upstream => ApiError::BadGateway(error.to_string()),
        ErrorKind::Internal { what } => ApiError::Internal(format!("{what} failed: {error}")),
    }
}
