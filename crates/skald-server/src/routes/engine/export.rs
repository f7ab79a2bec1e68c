//! `GET /v1/sessions/{id}/export`: the session as a JSON-lines file (the dashboard's download
//! serves the same bytes). Line 1 is `{"type":"skald.export","version":1,…}` — the session's id,
//! source, title, switches, times, leaf and the refs it lacks; then the session as an OpenClaw
//! session file (`skald import` reads those lines back: the header, every entry of every branch);
//! then one `{"type":"skald.ref","id":…,"blocks":[…]}` line per original the session names —
//! `blocks` is the stored payload itself, so its SHA-256 is the id.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use skald_core::codec::openclaw::encode_session;
use skald_engine::SessionExport;

use super::*;

/// The export's format version (line 1's `version`).
pub const EXPORT_VERSION: u64 = 1;

/// The export file's text.
pub fn export_lines(export: &SessionExport) -> Result<String, ApiError> {
    let info = &export.info;
    let first = json!({
        "type": "skald.export",
        "version": EXPORT_VERSION,
        "sessionId": info.id,
        "sourceFormat": info.source_format,
        "source": info.source,
        "title": info.title,
        "leafId": export.session.leaf_id(),
        "createdAt": format_rfc3339_seconds(info.created_at_ms),
        "updatedAt": format_rfc3339_seconds(info.updated_at_ms),
        "switches": Switches::from(info.switches),
        "refs": export.refs.len(),
        "missingRefs": export.missing_refs.iter().map(|id| id.as_str()).collect::<Vec<_>>(),
    });
    let mut out = first.to_string();
    out.push('\n');
    out.push_str(&encode_session(&export.session));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    for (id, payload) in &export.refs {
        let blocks: Value = serde_json::from_slice(&payload.to_bytes()).map_err(|error| {
            ApiError::Internal(format!("the original {id} is not JSON: {error}"))
        })?;
        out.push_str(&json!({"type": "skald.ref", "id": id, "blocks": blocks}).to_string());
        out.push('\n');
    }
    Ok(out)
}

/// The export as a download named after the session.
pub fn export_response(id: &str, export: &SessionExport) -> Result<Response, ApiError> {
    let body = export_lines(export)?;
    let file: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let disposition = HeaderValue::from_str(&format!(
        "attachment; filename=\"{file}.skald-export.jsonl\""
    ))
    .map_err(|_| ApiError::Internal("the file name is not a header value".to_owned()))?;
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson; charset=utf-8"),
    );
    headers.insert(header::CONTENT_DISPOSITION, disposition);
    Ok(response)
}

/// The session, its entries and the originals of its refs, as a JSON-lines file.
#[utoipa::path(get, path = "/v1/sessions/{id}/export", tag = "engine",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The export (JSON lines)", content_type = "application/x-ndjson", body = String),
        (status = 404, description = "No such session"),
    ))]
pub(super) async fn export_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let id = session_id(id)?;
    let export = state
        .engine
        .export_session(&caller.tenant, &id)
        .await
        .map_err(failure)?;
    export_response(id.as_str(), &export)
}
