//! `POST /v1/sessions/{id}/bootstrap`: OpenClaw's `bootstrap`, from a session file's content
//! or its messages.

use super::*;

// ---------------------------------------------------------------------------------------------
// POST /v1/sessions/{id}/bootstrap

/// OpenClaw's `bootstrap`: the session's history, once.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BootstrapRequest {
    /// The content of the session's file: an OpenClaw session JSONL (its tree and ids kept),
    /// or any transcript `skald import` reads.
    pub session_jsonl: Option<String>,
    /// The session's messages (`AgentMessage`s), when there is no file.
    #[schema(value_type = Option<Vec<Object>>)]
    pub messages: Option<Vec<Value>>,
    /// OpenClaw's session key; accepted, not used.
    pub session_key: Option<String>,
    /// The file's path on the host, kept as the session's source for listings (send its
    /// content in `sessionJsonl`). Alone, it brings nothing in: OpenClaw passes identities only.
    pub session_file: Option<String>,
    /// OpenClaw's session target; accepted, not used.
    #[schema(value_type = Option<Object>)]
    pub session_target: Option<Map<String, Value>>,
    /// OpenClaw's agent id; informational.
    pub agent_id: Option<String>,
}

/// OpenClaw's `BootstrapResult`, with what an import of `sessionJsonl` did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapResponse {
    /// Whether anything was stored.
    pub bootstrapped: bool,
    /// Messages stored by this call.
    pub imported_messages: u64,
    /// Why nothing was stored (the session already held this history); absent when something was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What importing `sessionJsonl` did (what `skald import` reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportReport>,
}

/// What importing a session file did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// The session the history was stored in (the path's id).
    pub session_id: String,
    /// The caller's tenant, which holds the session.
    pub tenant: String,
    /// The transcript's format (`openclaw-session`, `openai-request`…).
    pub format: String,
    /// `created`, `appended` or `already_imported`.
    pub status: String,
    /// Entries this call stored.
    pub entries_added: usize,
    /// Entries the session holds now, of every branch.
    pub entries: u64,
    /// Message entries the session holds now, of every branch.
    pub messages: u64,
    /// The session's title: its name in the file, else its first user message (up to 80
    /// characters).
    pub title: Option<String>,
    /// Lines the reader skipped or repaired, with the reason.
    pub issues: Vec<String>,
}

/// Brings a session's existing history in: an OpenClaw session file's content (`sessionJsonl`:
/// its entry tree, ids and leaf kept) or its messages. Idempotent: what is already stored is
/// not stored again, and a history that only grew appends what is new.
#[utoipa::path(post, path = "/v1/sessions/{id}/bootstrap", tag = "engine",
    params(("id" = String, Path, description = "Session id (it wins over the file header's)")),
    request_body = BootstrapRequest,
    responses(
        (status = 200, description = "What was stored", body = BootstrapResponse),
        (status = 400, description = "Both or bad inputs"),
        (status = 422, description = "The stored session differs from this history"),
    ))]
pub(super) async fn bootstrap_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<BootstrapRequest>,
) -> Result<Json<BootstrapResponse>, ApiError> {
    let id = session_id(id)?;
    let _ = &body.session_key;
    let messages = body
        .messages
        .as_deref()
        .map(|values| decode_messages(values, "messages"))
        .transpose()?;
    let source = match (body.session_jsonl, messages) {
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest(
                "give either `sessionJsonl` or `messages`, not both".to_owned(),
            ));
        }
        (Some(text), None) => BootstrapSource::File {
            text,
            path: body.session_file,
        },
        (None, Some(messages)) => BootstrapSource::Messages {
            messages,
            source_format: source_format().to_owned(),
        },
        (None, None) if body.session_file.is_some() || body.session_key.is_some() => {
            // OpenClaw passes identities only (its transcript is in its own database): there is
            // nothing to bring in, and the session fills with the host's commits and assembles.
            return Ok(Json(BootstrapResponse {
                bootstrapped: false,
                imported_messages: 0,
                reason: Some(
                    "nothing to bring in: the host sent no history (give `sessionJsonl` or \
                     `messages` to import one)"
                        .to_owned(),
                ),
                import: None,
            }));
        }
        (None, None) => {
            return Err(ApiError::BadRequest(
                "the body needs `sessionJsonl` (a session file's content) or `messages`".to_owned(),
            ));
        }
    };
    let done = state
        .engine
        .bootstrap(&caller.tenant, &id, source)
        .await
        .map_err(failure)?;
    let import = done.import.map(|(outcome, info)| ImportReport {
        session_id: outcome.session_id.into(),
        tenant: caller.tenant.to_string(),
        format: outcome.format.name().to_owned(),
        status: outcome.status.name().to_owned(),
        entries_added: outcome.entries_added,
        entries: info.entry_count,
        messages: info.message_count,
        title: info.title,
        issues: outcome.issues.iter().map(ToString::to_string).collect(),
    });
    Ok(Json(BootstrapResponse {
        bootstrapped: done.already.is_none(),
        imported_messages: done.messages_after.saturating_sub(done.messages_before),
        reason: done.already,
        import,
    }))
}
