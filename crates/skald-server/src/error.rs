//! The one error shape every route answers with: a status and a JSON body
//! `{"error": {"type": …, "message": …}}` whose message says what was wrong, so a client (or an
//! agent reading it) can fix the request. A refused request changes nothing.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request is malformed: bad JSON, an unknown field, a value out of range.
    #[error("{0}")]
    BadRequest(String),
    /// No key, or a key that is unknown or revoked.
    #[error("{0}")]
    Unauthorized(String),
    /// The caller may not do this (a dashboard form posted from another site or without its
    /// login's CSRF token).
    #[error("{0}")]
    Forbidden(String),
    /// The thing named does not exist for this tenant.
    #[error("{0}")]
    NotFound(String),
    /// A ref that existed has expired.
    #[error("{0}")]
    Gone(String),
    /// The route exists, but not for this method.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The route is served over another protocol (a WebSocket upgrade skald refuses).
    #[error("{0}")]
    UpgradeRequired(String),
    /// The request body did not arrive within the read deadline.
    #[error("{0}")]
    RequestTimeout(String),
    /// The session is busy with another request (the proxy waited its bounded time for it).
    #[error("{0}")]
    Conflict(String),
    /// The body is over the size limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A JSON route was sent a body that is not JSON (a cross-site "simple" request, a form).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The request is well formed but cannot be done (e.g. no upstream configured).
    #[error("{0}")]
    Unprocessable(String),
    /// The upstream provider could not be reached or failed.
    #[error("{0}")]
    BadGateway(String),
    /// The upstream did not answer in time (the proxy's timeouts).
    #[error("{0}")]
    GatewayTimeout(String),
    /// skald is stopping: the request cannot be finished.
    #[error("{0}")]
    Unavailable(String),
    /// skald itself failed (storage); the message says what it was doing.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The HTTP status the error is answered with, one per variant: from 400 for `BadRequest` to
    /// 504 for `GatewayTimeout`, and 500 for `Internal`.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Gone(_) => StatusCode::GONE,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::UpgradeRequired(_) => StatusCode::UPGRADE_REQUIRED,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            ApiError::GatewayTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The `type` of the JSON error body.
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "invalid_request",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::Gone(_) => "expired",
            ApiError::MethodNotAllowed(_) => "method_not_allowed",
            ApiError::UpgradeRequired(_) => "upgrade_required",
            ApiError::RequestTimeout(_) => "request_timeout",
            ApiError::Conflict(_) => "session_busy",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Unprocessable(_) => "unprocessable",
            ApiError::BadGateway(_) => "upstream_error",
            ApiError::GatewayTimeout(_) => "upstream_timeout",
            ApiError::Unavailable(_) => "shutting_down",
            ApiError::Internal(_) => "internal_error",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = self.to_string();
        let body = json!({"error": {"type": self.kind(), "message": message}});
        let mut response = (self.status(), Json(body)).into_response();
        response
            .extensions_mut()
            .insert(crate::metrics::ErrorNote(message));
        response
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        // axum's rejection enum is non-exhaustive; its status says which kind it is.
        let status = rejection.status();
        let text = rejection.body_text();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(format!(
                "the request body is over the server's size limit: {text}"
            ))
        } else if status == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            ApiError::UnsupportedMediaType(
                "the request body must be JSON with `content-type: application/json`".to_owned(),
            )
        } else {
            ApiError::BadRequest(format!("the request body is not valid: {text}"))
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> ApiError {
        ApiError::BadRequest(format!("the path is not valid: {}", rejection.body_text()))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::BadRequest(format!(
            "the query string is not valid: {}",
            rejection.body_text()
        ))
    }
}
