//! A session's switches: `PUT /v1/sessions/{id}/switches` pauses or resumes its compaction and
//! offload (`Engine::set_switches`); `GET /v1/sessions/{id}` shows them.

use skald_engine::storage::SessionSwitches;

use super::*;

/// A session's switches, as the API reads and writes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Switches {
    /// No compaction of the session (threshold, overflow, budget or asked for): each is skipped
    /// with the reason `paused`.
    pub pause_compaction: bool,
    /// The offload stage does not run: the model sees every tool output and argument as it is.
    pub pause_offload: bool,
}

impl From<SessionSwitches> for Switches {
    fn from(switches: SessionSwitches) -> Switches {
        Switches {
            pause_compaction: switches.pause_compaction,
            pause_offload: switches.pause_offload,
        }
    }
}

impl From<Switches> for SessionSwitches {
    fn from(switches: Switches) -> SessionSwitches {
        SessionSwitches {
            pause_compaction: switches.pause_compaction,
            pause_offload: switches.pause_offload,
        }
    }
}

/// Sets the session's switches (both, as given); answers them as stored.
#[utoipa::path(put, path = "/v1/sessions/{id}/switches", tag = "engine",
    params(("id" = String, Path, description = "Session id")),
    request_body = Switches,
    responses(
        (status = 200, description = "The switches now", body = Switches),
        (status = 400, description = "Not a switches object"),
        (status = 404, description = "No such session"),
    ))]
pub(super) async fn set_switches_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(switches): ApiJson<Switches>,
) -> Result<Json<Switches>, ApiError> {
    let id = session_id(id)?;
    let info = state
        .engine
        .set_switches(&caller.tenant, &id, switches.into())
        .await
        .map_err(failure)?;
    Ok(Json(info.switches.into()))
}
