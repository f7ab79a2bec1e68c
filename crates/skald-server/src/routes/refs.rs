//! The refs API: `GET /v1/refs/{id}`, the original behind a `[REF_ID: …]` placeholder, sliced
//! as `fetch_original_data` slices it (`lines`, `grep` with `context`, `max_chars`) — the route
//! a host calls when the model uses the fetch tool. `POST /v1/refs/fetch` runs the tool itself
//! on its arguments (several ids, the tool's text and counts, as `skald fetch` prints them). The
//! id is parsed before the store is touched; a ref of another tenant does not exist.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::json;
use skald_core::fetch::{FetchArgs, render_payload};
use skald_core::refs::RefId;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, ApiPath, ApiQuery, failure};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// The refs API's routes with their OpenAPI operations: `GET /v1/refs/{id}` and
/// `POST /v1/refs/fetch`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(fetch_ref))
        .routes(routes!(fetch_tool))
}

/// The slice to return (the arguments of `fetch_original_data`).
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct FetchQuery {
    /// 1-based inclusive line range: `120:180`, `120:` to the end, `:50` from the start.
    pub lines: Option<String>,
    /// A regular expression: only matching lines, with `context` lines around each.
    pub grep: Option<String>,
    /// Lines of context around each grep match (default 2, at most 50).
    pub context: Option<u64>,
    /// Cap on the characters returned (default 20000, at least 200).
    pub max_chars: Option<u64>,
}

/// An original, as the model would get it from `fetch_original_data`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FetchedRef {
    /// The ref id (64 hex digits).
    pub id: String,
    /// The slice, with numbered lines and a header.
    pub text: String,
}

/// The original behind a ref, whole or sliced. The id may be the 64 hex digits or the whole
/// `[REF_ID: …]` token.
#[utoipa::path(get, path = "/v1/refs/{id}", tag = "refs",
    params(("id" = String, Path, description = "The ref id"), FetchQuery),
    responses(
        (status = 200, description = "The original", body = FetchedRef),
        (status = 400, description = "Not a ref id, or a bad slice"),
        (status = 404, description = "No such ref for this key"),
        (status = 410, description = "The ref expired"),
    ))]
async fn fetch_ref(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(raw): ApiPath<String>,
    ApiQuery(query): ApiQuery<FetchQuery>,
) -> Result<Json<FetchedRef>, ApiError> {
    let id = RefId::parse(&raw).map_err(|error| ApiError::BadRequest(error.to_string()))?;
    let mut arguments = json!({"ref_ids": [id.as_str()]});
    if let Some(lines) = &query.lines {
        arguments["lines"] = json!(lines);
    }
    if let Some(grep) = &query.grep {
        arguments["grep"] = json!(grep);
    }
    if let Some(context) = query.context {
        arguments["context"] = json!(context);
    }
    if let Some(max_chars) = query.max_chars {
        arguments["max_chars"] = json!(max_chars);
    }
    let args = FetchArgs::from_json(&arguments)
        .map_err(|error| ApiError::BadRequest(format!("bad slice: {error}")))?;
    let payload = state
        .engine
        .read_ref(&caller.tenant, &id)
        .map_err(failure)?;
    Ok(Json(FetchedRef {
        text: render_payload(&id, &payload, &args),
        id: id.to_string(),
    }))
}

/// `POST /v1/refs/fetch`: the arguments of `fetch_original_data`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FetchToolRequest {
    /// Ref ids (64 hex digits) or whole `[REF_ID: …]` tokens.
    pub ref_ids: Vec<String>,
    /// 1-based inclusive line range: `120:180`, `120:` to the end, `:50` from the start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<String>,
    /// A regular expression: only matching lines, with `context` lines around each.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grep: Option<String>,
    /// Lines of context around each grep match (default 2, at most 50).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<u64>,
    /// Cap on the characters returned per ref (default 20000, at least 200).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_chars: Option<u64>,
}

/// What `fetch_original_data` answered.
#[derive(Debug, Serialize, ToSchema)]
pub struct FetchToolResponse {
    /// Refs found.
    pub found: usize,
    /// Ids that were malformed, unknown to this key or expired (each explained in `text`).
    pub failed: usize,
    /// The tool's text, as the model reads it: each original (sliced) with a header, or why it
    /// could not be fetched.
    pub text: String,
}

/// Runs `fetch_original_data` on its arguments, as the model would: several ids at once, each
/// failure explained in the text rather than failing the call (`failed` counts them).
#[utoipa::path(post, path = "/v1/refs/fetch", tag = "refs", request_body = FetchToolRequest,
    responses(
        (status = 200, description = "The tool's answer", body = FetchToolResponse),
        (status = 400, description = "A malformed body"),
    ))]
async fn fetch_tool(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<FetchToolRequest>,
) -> Result<Json<FetchToolResponse>, ApiError> {
    let arguments = serde_json::to_value(&body)
        .map_err(|error| ApiError::Internal(format!("cannot encode the arguments: {error}")))?;
    let output = state.engine.fetch(&caller.tenant, &arguments);
    Ok(Json(FetchToolResponse {
        found: output.found_ids,
        failed: output.failed_ids,
        text: output.text,
    }))
}
