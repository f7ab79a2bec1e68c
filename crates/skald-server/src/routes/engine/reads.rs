//! The session reads: `GET /v1/sessions`, `GET /v1/sessions/{id}`, `…/entries` and
//! `…/context`.

use super::*;

// ---------------------------------------------------------------------------------------------
// Reads

/// A stored session.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// The session's id, unique within the caller's tenant.
    pub session_id: String,
    /// A human title for listings: an imported session's name or first user message (up to 80
    /// characters); absent when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The format the session came from (`openclaw-session`, `claude-code`…).
    pub source_format: String,
    /// Where an imported session came from (a file path), for listings; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Entries of every branch.
    pub entries: u64,
    /// Message entries of every branch.
    pub messages: u64,
    /// Estimated tokens (chars/4) of the context rebuilt from the leaf, before any policy.
    pub estimated_tokens: u64,
    /// The entry the active branch ends at; absent for a session without entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf_id: Option<String>,
    /// When the session was created, RFC 3339 in UTC to the second.
    pub created_at: String,
    /// When an entry was last appended or the leaf last moved, RFC 3339 in UTC to the second.
    pub updated_at: String,
    /// What a person paused for this session.
    pub switches: super::Switches,
}

impl From<SessionOverview> for SessionSummary {
    fn from(overview: SessionOverview) -> SessionSummary {
        let info = overview.info;
        SessionSummary {
            estimated_tokens: overview.estimated_tokens,
            session_id: info.id,
            title: info.title,
            source_format: info.source_format,
            source: info.source,
            entries: info.entry_count,
            messages: info.message_count,
            leaf_id: info.leaf_id,
            created_at: format_rfc3339_seconds(info.created_at_ms),
            updated_at: format_rfc3339_seconds(info.updated_at_ms),
            switches: info.switches.into(),
        }
    }
}

/// This key's sessions.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    /// Most recently updated first.
    pub sessions: Vec<SessionSummary>,
}

/// The caller's sessions, most recently updated first.
#[utoipa::path(get, path = "/v1/sessions", tag = "engine",
    responses((status = 200, description = "The sessions", body = SessionList)))]
pub(super) async fn list_sessions(
    State(state): State<AppState>,
    caller: Caller,
    _: crate::routes::NoQuery,
) -> Result<Json<SessionList>, ApiError> {
    let sessions = state
        .engine
        .list_sessions(&caller.tenant)
        .map_err(failure)?
        .into_iter()
        .map(SessionSummary::from)
        .collect();
    Ok(Json(SessionList { sessions }))
}

/// One session, without its entries.
#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "engine",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The session", body = SessionSummary),
        (status = 404, description = "No such session"),
    ))]
pub(super) async fn session_info(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<SessionSummary>, ApiError> {
    let id = session_id(id)?;
    let overview = state
        .engine
        .session_overview(&caller.tenant, &id)
        .map_err(failure)?;
    Ok(Json(overview.into()))
}

/// A session's entries as OpenClaw writes them.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionEntries {
    /// The session file's header line.
    #[schema(value_type = Object)]
    pub header: Value,
    /// The entry the active branch ends at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf_id: Option<String>,
    /// Every entry of every branch, in append order (OpenClaw entry objects).
    #[schema(value_type = Vec<Object>)]
    pub entries: Vec<Value>,
}

/// Every entry of the session (every branch), as the lines of an OpenClaw session file.
#[utoipa::path(get, path = "/v1/sessions/{id}/entries", tag = "engine",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The entries", body = SessionEntries),
        (status = 404, description = "No such session"),
    ))]
pub(super) async fn session_entries(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    _: crate::routes::NoQuery,
) -> Result<Json<SessionEntries>, ApiError> {
    let id = session_id(id)?;
    let session = state
        .engine
        .load_session(&caller.tenant, &id)
        .map_err(failure)?;
    Ok(Json(SessionEntries {
        header: encode_header(&session.header),
        leaf_id: session.leaf_id().map(str::to_owned),
        entries: session.entries().iter().map(encode_entry).collect(),
    }))
}

/// `GET …/context` options.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ContextQuery {
    /// Add what memory gives the call (session-start memory, recall, memory tools).
    #[serde(default)]
    pub memory: bool,
    /// The window in tokens (default: the server's window).
    pub token_budget: Option<u64>,
    /// With `memory`: the user whose memories are used (default: the server's `[memory]` user).
    pub user: Option<String>,
    /// With `memory`: the agent whose memories are used (default: the server's `[memory]`
    /// agent).
    pub agent: Option<String>,
}

/// What memory added to a context, in full (as `skald context --memory` prints it).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextMemory {
    /// The user whose memories were used (the query's, else the server's `[memory]` user).
    pub user: String,
    /// The agent whose memories were used (the query's, else the server's `[memory]` agent).
    pub agent: String,
    /// The session-start snapshot: profile and tool memories, the directory listing.
    #[schema(value_type = Object)]
    pub session_start: SessionMemoryReport,
    /// What recall searched for, injected and dropped.
    #[schema(value_type = Object)]
    pub recall: RecallReport,
    /// Earlier turns' recalls sent again where they were injected, and those that left.
    #[schema(value_type = Object)]
    pub kept_recalls: KeptRecallReport,
}

/// The assembled context of a session.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextResponse {
    /// The session the context is of.
    pub session_id: String,
    /// The name of the server's policy the pipeline ran.
    pub policy: String,
    /// The messages the model would be sent, in order (`AgentMessage`s), memory's injections
    /// included.
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Value>,
    /// skald's estimate of the messages and the system prompt addition (tools excluded), in tokens.
    pub estimated_tokens: u64,
    /// For the host's system prompt (OpenClaw 2026.9 prepends it to its own): the REF_ID
    /// instruction once the session has refs, and
    /// memory's sections with `memory`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt_addition: Option<String>,
    /// skald's tools the model would be offered (`fetch_original_data` once the session has refs;
    /// the memory tools with `memory`).
    pub tools: Vec<ToolDefinition>,
    /// What skald did to build the context.
    pub report: ViewReport,
    /// With `memory`: what memory added, in full.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<ContextMemory>,
}

/// What the next assemble would give the model, computed on a copy of the session's engine
/// state: reading it changes no decision (originals it offloads are stored, as any placeholder
/// handed out must be).
#[utoipa::path(get, path = "/v1/sessions/{id}/context", tag = "engine",
    params(("id" = String, Path, description = "Session id"), ContextQuery),
    responses(
        (status = 200, description = "The context", body = ContextResponse),
        (status = 404, description = "No such session"),
    ))]
pub(super) async fn session_context_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ContextQuery>,
) -> Result<Json<ContextResponse>, ApiError> {
    let id = session_id(id)?;
    let window = token_budget(query.token_budget)?;
    let identity = match (query.memory, &query.user, &query.agent) {
        (_, None, None) => None,
        (false, _, _) => {
            return Err(ApiError::BadRequest(
                "`user` and `agent` choose whose memories `memory=true` adds; without it they \
                 mean nothing"
                    .to_owned(),
            ));
        }
        (true, user, agent) => {
            let memory = &state.engine.config().memory;
            let user = user.as_deref().unwrap_or(&memory.user);
            let agent = agent.as_deref().unwrap_or(&memory.agent);
            Some(MemoryIdentity::new(user, agent).map_err(|error| {
                ApiError::BadRequest(format!(
                    "user {user:?} and agent {agent:?} must each be one URI segment: {error}"
                ))
            })?)
        }
    };
    let options = ViewOptions {
        window_tokens: window,
        available_tools: None,
        with_memory: query.memory,
        identity,
        pending_prompt: None,
    };
    let built = state
        .engine
        .view(&caller.tenant, &id, options)
        .await
        .map_err(failure)?;
    let memory = match (&built.view.memory, &built.identity) {
        (Some(memory), Some(identity)) => Some(ContextMemory {
            user: identity.user().to_owned(),
            agent: identity.agent().to_owned(),
            session_start: memory.session_start.clone(),
            recall: memory.recall.clone(),
            kept_recalls: memory.kept_recalls.clone(),
        }),
        (Some(_), None) | (None, _) => None,
    };
    Ok(Json(ContextResponse {
        session_id: id.into(),
        policy: state.engine.config().policy.name.clone(),
        messages: encode_agent_messages(&built.view.messages),
        estimated_tokens: built.view.estimated_tokens(),
        system_prompt_addition: built.view.system_prompt_addition(),
        report: view_report(&built),
        tools: built.tools.iter().map(ToolDefinition::from).collect(),
        memory,
    }))
}
