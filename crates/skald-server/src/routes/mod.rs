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
use skald_engine::EngineError;
use skald_engine::memory::manage::ManageError;
use skald_store::StoreError;
use skald_store::memories::MemoryError;
use skald_store::sessions::SessionError;
use skald_store::sessions::import::ImportError;

use crate::error::ApiError;

/// A JSON body; a malformed one, an unknown field or a wrong type is a 400 naming it, an
/// over-size one a 413.
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// A query string, checked like [`ApiJson`].
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// Path parameters, checked like [`ApiJson`].
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// A session id from the path, checked before any store is touched.
pub fn session_id(raw: String) -> Result<SessionId, ApiError> {
    SessionId::parse(raw).map_err(|error| ApiError::BadRequest(error.to_string()))
}

/// What a session-store failure means for the caller.
pub fn session_error(error: SessionError) -> ApiError {
    match error {
        SessionError::InvalidSessionId { .. }
        | SessionError::InvalidEntryId { .. }
        | SessionError::InvalidEntry { .. }
        | SessionError::NothingToRewrite => ApiError::BadRequest(error.to_string()),
        SessionError::NotFound { ref id, .. } => ApiError::NotFound(format!(
            "no session {id:?}: ingest messages into it or bootstrap it first (GET /v1/sessions \
             lists this key's sessions)"
        )),
        SessionError::UnknownEntry { .. } => ApiError::NotFound(error.to_string()),
        SessionError::AlreadyExists { .. }
        | SessionError::DuplicateEntryId { .. }
        | SessionError::UnknownParent { .. }
        | SessionError::NotOnActivePath { .. } => ApiError::Unprocessable(error.to_string()),
        SessionError::Store(store) => store_error(store),
        SessionError::Storage { .. } | SessionError::Corrupt(_) => {
            ApiError::Internal(format!("the session store failed: {error}"))
        }
    }
}

/// What a ref-store failure means for the caller.
pub fn store_error(error: StoreError) -> ApiError {
    match error {
        StoreError::InvalidId(_) => ApiError::BadRequest(error.to_string()),
        StoreError::NotFound { .. } => ApiError::NotFound(error.to_string()),
        StoreError::Expired { .. } => ApiError::Gone(error.to_string()),
        StoreError::InvalidSettings(_)
        | StoreError::Storage { .. }
        | StoreError::Io { .. }
        | StoreError::UnsupportedSchema { .. }
        | StoreError::Corrupt(_) => ApiError::Internal(format!("the store failed: {error}")),
    }
}

/// What an engine failure means for the caller.
pub fn engine_error(error: EngineError) -> ApiError {
    match error {
        EngineError::Session(session) => session_error(session),
        EngineError::Store(store) => store_error(store),
        EngineError::Plan(plan) => {
            ApiError::BadRequest(format!("the compaction cannot be planned: {plan}"))
        }
        EngineError::Policy(policy) => {
            ApiError::Internal(format!("the server's policy is not usable: {policy}"))
        }
        EngineError::InvalidInput { .. } => ApiError::BadRequest(error.to_string()),
        EngineError::Import(import) => import_error(import),
        EngineError::MemoryIdentity(identity) => ApiError::Internal(identity.to_string()),
    }
}

/// What a failed import of a session file means for the caller.
fn import_error(error: ImportError) -> ApiError {
    match error {
        ImportError::Decode(_) | ImportError::InvalidTree { .. } => {
            ApiError::BadRequest(format!("sessionJsonl cannot be imported: {error}"))
        }
        ImportError::Session(session) => session_error(session),
        ImportError::Conflict { .. } | ImportError::FormatMismatch { .. } => {
            ApiError::Unprocessable(error.to_string())
        }
    }
}

/// What a memory-store failure means for the caller.
pub fn memory_error(error: MemoryError) -> ApiError {
    match error {
        MemoryError::InvalidUri(_) | MemoryError::InvalidInput { .. } => {
            ApiError::BadRequest(error.to_string())
        }
        MemoryError::NotFound { ref uri, .. } => ApiError::NotFound(format!(
            "no memory at {uri}; GET /v1/memory/ls lists what exists"
        )),
        MemoryError::Forgotten { .. } => ApiError::NotFound(error.to_string()),
        MemoryError::AlreadyExists { .. }
        | MemoryError::PathConflict { .. }
        | MemoryError::DimensionMismatch { .. }
        // Only a client that left gets this, and it is gone: nothing to tell it.
        | MemoryError::Cancelled => ApiError::Unprocessable(error.to_string()),
        MemoryError::InBatch { source, .. } => memory_error(*source),
        MemoryError::Store(store) => store_error(store),
        MemoryError::InvalidSettings(_) | MemoryError::Storage { .. } | MemoryError::Corrupt(_) => {
            ApiError::Internal(format!("the memory store failed: {error}"))
        }
    }
}

/// What a failed memory operation means for the caller.
pub fn manage_error(error: ManageError) -> ApiError {
    match error {
        ManageError::Store(store) => memory_error(store),
        ManageError::Uri(_) | ManageError::InvalidInput { .. } => {
            ApiError::BadRequest(error.to_string())
        }
        ManageError::TooManyChunks { .. } => ApiError::PayloadTooLarge(error.to_string()),
        ManageError::DirectoryWithoutOverview { .. } | ManageError::NothingToForget { .. } => {
            ApiError::NotFound(error.to_string())
        }
        ManageError::Embedding { .. } => ApiError::BadGateway(error.to_string()),
    }
}
