//! `POST /v1/sessions/{id}/messages` (OpenClaw's `ingest` / `ingestBatch`) and
//! `POST /v1/sessions/{id}/assemble` (the model's view for the next call).

use super::*;
use skald_core::codec::openclaw::make_host_valid;

// ---------------------------------------------------------------------------------------------
// POST /v1/sessions/{id}/messages

/// OpenClaw's `ingest` (`message`) or `ingestBatch` (`messages`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IngestRequest {
    /// One OpenClaw `AgentMessage`.
    #[schema(value_type = Option<Object>)]
    pub message: Option<Value>,
    /// A batch of `AgentMessage`s, in order.
    #[schema(value_type = Option<Vec<Object>>)]
    pub messages: Option<Vec<Value>>,
    /// A heartbeat turn: its messages are checked but not stored.
    #[serde(default)]
    pub is_heartbeat: bool,
    /// OpenClaw's session key; informational.
    pub session_key: Option<String>,
}

/// `{"ingested": bool}` for one message, `{"ingestedCount": n}` for a batch.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum IngestResponse {
    /// The answer to `message` (OpenClaw's `ingest`).
    One {
        /// False when the message equals the session's last message (a duplicate) or the
        /// turn is a heartbeat.
        ingested: bool,
    },
    /// The answer to `messages` (OpenClaw's `ingestBatch`).
    #[serde(rename_all = "camelCase")]
    Batch {
        /// Messages stored (duplicates of the message before them are not).
        ingested_count: usize,
    },
}

/// Stores messages at the end of the session (created on first use). A message equal to the
/// session's last message is a duplicate and is not stored again. Heartbeat turns
/// (`isHeartbeat`) are not stored at all: they say nothing the model needs later.
#[utoipa::path(post, path = "/v1/sessions/{id}/messages", tag = "engine",
    params(("id" = String, Path, description = "Session id: [A-Za-z0-9._:-], up to 128 characters")),
    request_body = IngestRequest,
    responses(
        (status = 200, description = "What was stored", body = IngestResponse),
        (status = 400, description = "Not one of message/messages, or not an AgentMessage"),
        (status = 401, description = "A key is required"),
    ))]
pub(super) async fn ingest_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<IngestRequest>,
) -> Result<Json<IngestResponse>, ApiError> {
    let id = session_id(id)?;
    let _ = body.session_key;
    let (messages, batch) = match (body.message, body.messages) {
        (Some(message), None) => {
            let decoded = decode_host_message(&message, "message")?;
            (vec![decoded], false)
        }
        (None, Some(messages)) => (decode_messages(&messages, "messages")?, true),
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest(
                "give either `message` (ingest) or `messages` (ingestBatch), not both".to_owned(),
            ));
        }
        (None, None) => {
            return Err(ApiError::BadRequest(
                "the body needs `message` (one AgentMessage) or `messages` (a batch)".to_owned(),
            ));
        }
    };
    let stored = if body.is_heartbeat {
        0
    } else {
        state
            .engine
            .ingest(&caller.tenant, &id, messages)
            .await
            .map_err(failure)?
            .ingested
    };
    Ok(Json(if batch {
        IngestResponse::Batch {
            ingested_count: stored,
        }
    } else {
        IngestResponse::One {
            ingested: stored > 0,
        }
    }))
}

// ---------------------------------------------------------------------------------------------
// POST /v1/sessions/{id}/assemble

/// OpenClaw's `assemble` parameters.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AssembleRequest {
    /// The tokens the returned messages may take, as OpenClaw means it: the window less the
    /// reserve, the rendered prompt and the turn's pending messages (it can be as low as 1). A
    /// view over it compacts the session first (`fitToBudget` in the answer says how that went).
    /// The pipeline's own thresholds stay relative to the model's window (`[engine]
    /// window_tokens`, or `runtimeContext.modelContextWindow`).
    pub token_budget: Option<u64>,
    /// Whether this call uses long-term memory (recall, profile, memory tools); only narrows
    /// the server's `[memory]` setting (default: as the server).
    pub memory: Option<bool>,
    /// The host's whole conversation. Synced into the session first: what is new is appended,
    /// and where it diverges from the stored history a new branch starts (the host's view wins).
    #[schema(value_type = Option<Vec<Object>>)]
    pub messages: Option<Vec<Value>>,
    /// The tools the host will run. skald's tools missing from it are not offered, and without
    /// `fetch_original_data` nothing is moved out of the context (a ref the model cannot fetch
    /// would lose data). Absent: the host runs every tool skald offers.
    #[serde(default, deserialize_with = "tool_names")]
    #[schema(value_type = Option<Vec<String>>)]
    pub available_tools: Option<HashSet<String>>,
    /// The model the view is for (calibrates `estimatedTokens` once usage was reported).
    pub model: Option<String>,
    /// The user's prompt, sent by the host after the view: recall searches with it.
    pub prompt: Option<String>,
    /// The workspace's AGENTS.md: its "Session Startup" and "Red Lines" sections are appended to
    /// the summary of a compaction this call makes to fit `tokenBudget`.
    pub agents_md: Option<String>,
    /// OpenClaw's memory citations mode (`off`, `inline`, `block`…); accepted, not used.
    pub citations_mode: Option<String>,
    /// OpenClaw's session key; informational.
    pub session_key: Option<String>,
    /// OpenClaw's runtime settings (runtime, resolved model, limits); accepted, not used.
    #[schema(value_type = Option<Object>)]
    pub runtime_settings: Option<Map<String, Value>>,
    /// OpenClaw's runtime context (transcript storage, prompt-cache usage, …); accepted, not
    /// used by assemble.
    #[schema(value_type = Option<Object>)]
    pub runtime_context: Option<Map<String, Value>>,
}

/// `availableTools` as a list of names. An empty JSON object is what a JavaScript `Set` becomes
/// when a host serialises it as it is (`{}`: the names are lost), so it means the same as no
/// list: the host runs every tool skald offers. An object with keys is refused.
fn tool_names<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<HashSet<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Names {
        List(HashSet<String>),
        SerialisedSet(Map<String, Value>),
    }
    match Option::<Names>::deserialize(deserializer)? {
        Some(Names::List(names)) => Ok(Some(names)),
        Some(Names::SerialisedSet(set)) if set.is_empty() => Ok(None),
        Some(Names::SerialisedSet(_)) => Err(serde::de::Error::custom(
            "expected a list of tool names, found an object with keys",
        )),
        None => Ok(None),
    }
}

/// OpenClaw's `AssembleResult`, with skald's tools and report.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AssembleResponse {
    /// The messages to send, in order (`AgentMessage`s).
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Value>,
    /// skald's estimate of the messages and the system prompt addition, corrected by the
    /// usage reported for this model in after-turn.
    pub estimated_tokens: u64,
    /// For the host's system prompt (OpenClaw 2026.9 prepends it to its own): the REF_ID
    /// instruction once the session has refs, the user's profile and tool memories when memory is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt_addition: Option<String>,
    /// skald's tools the host should offer the model and run (`fetch_original_data` once the
    /// session has refs: `GET /v1/refs/{id}` answers it; the memory tools when memory is on).
    pub tools: Vec<ToolDefinition>,
    /// What the messages sync did, when messages were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncReport>,
    /// Why the messages given were not synced: the session is fed by `commit-turn`, and the
    /// committed turns are the source of the context (the host's projection of the
    /// conversation, with its rewritten tool-call ids, would fork it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_skipped: Option<String>,
    /// The view was over `tokenBudget` and the session was compacted to fit it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit_to_budget: Option<FitToBudget>,
    /// What skald did to build the view.
    pub report: ViewReport,
}

/// A compaction run because the view was over the host's budget.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FitToBudget {
    /// `compacted`, `skipped`, `cancelled` or `failed`.
    pub outcome: String,
    /// The view's tokens before the compaction.
    pub tokens_before: u64,
    /// Why nothing was compacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The model's view of the session for the next call: the stored context (a compaction's
/// summary first), the policy's pipeline — offloaded and truncated originals are stored before
/// their placeholders are returned —, and, when memory is on, the session-start memory, the
/// memories recalled for the latest user messages (or `prompt`), skill memories on `SKILL.md`
/// reads and the memory tools. Nothing memory adds is stored in the session.
#[utoipa::path(post, path = "/v1/sessions/{id}/assemble", tag = "engine",
    params(("id" = String, Path, description = "Session id")),
    request_body = AssembleRequest,
    responses(
        (status = 200, description = "The view", body = AssembleResponse),
        (status = 400, description = "Bad messages or token budget"),
        (status = 404, description = "No such session (and no messages to create it)"),
    ))]
pub(super) async fn assemble_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<AssembleRequest>,
) -> Result<Json<AssembleResponse>, ApiError> {
    let id = session_id(id)?;
    let _ = (&body.citations_mode, &body.session_key);
    let window = window_field(
        "runtimeContext.modelContextWindow",
        body.runtime_context
            .as_ref()
            .and_then(|context| context.get("modelContextWindow"))
            .and_then(Value::as_u64),
    )?;
    let messages = body
        .messages
        .as_deref()
        .map(|values| decode_messages(values, "messages"))
        .transpose()?;
    let input = AssembleInput {
        messages,
        source_format: source_format().to_owned(),
        model: body.model,
        options: ViewOptions {
            window_tokens: window,
            available_tools: body.available_tools,
            with_memory: state.engine.config().memory.enabled && body.memory.unwrap_or(true),
            identity: None,
            pending_prompt: body.prompt,
        },
        budget_tokens: body.token_budget,
        agents_md: body.agents_md,
    };
    let assembly = state
        .engine
        .assemble(&caller.tenant, &id, input)
        .await
        .map_err(failure)?;
    let built = &assembly.view;
    record_view_metrics(&state.metrics, &built.view);
    let mut messages = encode_agent_messages(&built.view.messages);
    // The host runs these messages: each in the shape its runtime reads (what is stored keeps
    // its own shape).
    messages.iter_mut().for_each(make_host_valid);
    Ok(Json(AssembleResponse {
        messages,
        estimated_tokens: assembly.estimated_tokens,
        system_prompt_addition: built.view.system_prompt_addition(),
        report: view_report(built),
        tools: built.tools.iter().map(ToolDefinition::from).collect(),
        sync: assembly.sync.map(Into::into),
        sync_skipped: assembly.fed_by_commits.then(|| {
            "the session is fed by commit-turn: its committed turns are the context's source"
                .to_owned()
        }),
        fit_to_budget: assembly.fit_to_budget.as_ref().map(|fit| FitToBudget {
            outcome: match &fit.compaction {
                Ok(compaction) => compaction.result.outcome.name().to_owned(),
                Err(_) => "failed".to_owned(),
            },
            tokens_before: fit.view_tokens_before,
            reason: match &fit.compaction {
                Ok(compaction) => match &compaction.result.outcome {
                    CompactionOutcome::Compacted { .. } => None,
                    CompactionOutcome::Skipped { reason, .. } => Some(reason.describe()),
                    CompactionOutcome::Cancelled { reason, .. } => Some(reason.describe()),
                },
                Err(error) => Some(error.clone()),
            },
        }),
    }))
}
