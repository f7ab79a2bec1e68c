//! `POST /v1/sessions/{id}/commit-turn`: OpenClaw's `commitTurn` — one finished turn stored
//! atomically, once per advancement key.

use super::*;
use skald_engine::{CommitPlacement, CommitStatus, TurnAnchors};

/// OpenClaw's `commitTurn` parameters. The host's anchors and identities are accepted by name
/// and not used; any other field is refused.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommitTurnRequest {
    /// The turn's idempotency key: the host sends the same key again when it retries the
    /// commit, and gets `duplicate`. 1 to 512 bytes, no control characters.
    pub advancement_key: String,
    /// The turn's messages only (e.g. user, assistant, toolResult, assistant), as
    /// `AgentMessage`s, in order.
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Value>,
    /// The host's transcript anchor where the turn was admitted: its `effectiveParentId` (the
    /// host's entry the turn follows) places the turn — after an earlier turn when the host
    /// rewound to it; the other fields are not used.
    #[schema(value_type = Option<Object>)]
    pub admission: Option<Map<String, Value>>,
    /// The host's transcript anchor where the turn ended: its `entryId` is recorded, so that a
    /// later turn the host continues from here is placed here.
    #[schema(value_type = Option<Object>)]
    pub terminal: Option<Map<String, Value>>,
    /// OpenClaw's session key; informational.
    pub session_key: Option<String>,
    /// The host's agent id; informational.
    pub agent_id: Option<String>,
    /// The host's session target; accepted, not used.
    #[schema(value_type = Option<Object>)]
    pub session_target: Option<Map<String, Value>>,
    /// The host's runtime settings; accepted, not used.
    #[schema(value_type = Option<Object>)]
    pub runtime_settings: Option<Map<String, Value>>,
    /// The host's runtime context; accepted, not used.
    #[schema(value_type = Option<Object>)]
    pub runtime_context: Option<Map<String, Value>>,
}

/// OpenClaw's `commitTurn` result.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommitTurnResponse {
    /// `committed`: stored now; `duplicate`: this key was committed before and nothing was
    /// written.
    pub status: String,
    /// Messages this call stored (0 for a duplicate).
    pub committed_messages: usize,
    /// Where the turn went: `continued` (after the last one), `branched` (the host rewound to
    /// an earlier turn: a new branch from it), `unknown_parent` (the host continued from an
    /// entry skald cannot place: after the last one), `none` (a duplicate).
    #[schema(value_type = String)]
    pub placement: CommitPlacement,
}

/// Stores one finished turn and its advancement key in one write; the same key again is a
/// `duplicate` that writes nothing, also after a restart.
#[utoipa::path(post, path = "/v1/sessions/{id}/commit-turn", tag = "engine",
    params(("id" = String, Path, description = "Session id")),
    request_body = CommitTurnRequest,
    responses(
        (status = 200, description = "Committed, or a duplicate of a committed turn", body = CommitTurnResponse),
        (status = 400, description = "A bad key, message or field"),
    ))]
pub(super) async fn commit_turn_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<CommitTurnRequest>,
) -> Result<Json<CommitTurnResponse>, ApiError> {
    let id = session_id(id)?;
    let messages = decode_messages(&body.messages, "messages")?;
    let anchor = |value: &Option<Map<String, Value>>, field: &str| {
        value
            .as_ref()
            .and_then(|anchor| anchor.get(field))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let anchors = TurnAnchors {
        parent_entry: anchor(&body.admission, "effectiveParentId"),
        terminal_entry: anchor(&body.terminal, "entryId"),
    };
    let outcome = state
        .engine
        .commit_turn(
            &caller.tenant,
            &id,
            &body.advancement_key,
            &anchors,
            messages,
            source_format(),
        )
        .await
        .map_err(failure)?;
    Ok(Json(CommitTurnResponse {
        status: match outcome.status {
            CommitStatus::Committed => "committed",
            CommitStatus::Duplicate => "duplicate",
        }
        .to_owned(),
        committed_messages: outcome.committed,
        placement: outcome.placement,
    }))
}
