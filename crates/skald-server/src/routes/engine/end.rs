//! `POST /v1/sessions/{id}/end`: the host says a session ended (OpenClaw's `session_end` on
//! `/new` or `reset`, any client's own end), and what of it no archive covers yet goes to
//! memory (`Engine::end_session`).

use skald_engine::{SessionEndOutcome, SessionEndReason};

use super::*;

/// Why the host ended the session, as the wire spells it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EndReasonName {
    /// The session ended (closed, deleted, shut down, or the host does not say why).
    #[default]
    Ended,
    /// A new session took its place (`/new`).
    New,
    /// The session was reset (`/reset`).
    Reset,
}

impl From<EndReasonName> for SessionEndReason {
    fn from(reason: EndReasonName) -> SessionEndReason {
        match reason {
            EndReasonName::Ended => SessionEndReason::Ended,
            EndReasonName::New => SessionEndReason::New,
            EndReasonName::Reset => SessionEndReason::Reset,
        }
    }
}

/// The body of `POST /v1/sessions/{id}/end`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EndRequestBody {
    /// Why it ended (default `ended`).
    #[serde(default)]
    pub reason: EndReasonName,
    /// OpenClaw's session key; accepted, not used.
    pub session_key: Option<String>,
    /// The session that took its place, when the host says; informational.
    pub next_session_id: Option<String>,
}

/// What ending the session did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndResponse {
    /// `archived` (the attempt is recorded; see `archive.status`), `nothing_new` (every
    /// message is archived already) or `memory_off`.
    pub status: &'static str,
    /// The archive and the memories extracted from it (absent unless `archived`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub archive: Option<Value>,
}

/// Archives what of the session no archive covers yet and extracts its memories, once per
/// span (ending it again archives only what came after). The session is not otherwise
/// changed, and may go on.
#[utoipa::path(post, path = "/v1/sessions/{id}/end", tag = "engine",
    params(("id" = String, Path, description = "Session id")),
    request_body = EndRequestBody,
    responses(
        (status = 200, description = "What was archived", body = EndResponse),
        (status = 400, description = "Bad body"),
        (status = 404, description = "No such session"),
    ))]
pub(super) async fn end_session_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<EndRequestBody>,
) -> Result<Json<EndResponse>, ApiError> {
    let id = session_id(id)?;
    let outcome = state
        .engine
        .end_session(&caller.tenant, &id, body.reason.into())
        .await
        .map_err(failure)?;
    let response = match outcome {
        SessionEndOutcome::Archived { archive } => EndResponse {
            status: "archived",
            archive: Some(serde_json::to_value(&archive).unwrap_or(Value::Null)),
        },
        SessionEndOutcome::NothingNew => EndResponse {
            status: "nothing_new",
            archive: None,
        },
        SessionEndOutcome::MemoryOff => EndResponse {
            status: "memory_off",
            archive: None,
        },
    };
    Ok(Json(response))
}
