//! `POST /v1/sessions/{id}/after-turn`: OpenClaw's `afterTurn` (sync, calibration, tool
//! statistics, the two-threshold memory upload).

use super::*;

// ---------------------------------------------------------------------------------------------
// POST /v1/sessions/{id}/after-turn

/// OpenClaw's `afterTurn` parameters, and skald's tool reports.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AfterTurnRequest {
    /// The session's messages after the turn (synced like assemble's).
    #[schema(value_type = Option<Vec<Object>>)]
    pub messages: Option<Vec<Value>>,
    /// How many of `messages` were there before the turn's prompt: the tool results after
    /// them feed the tool statistics (when `toolReports` is not given).
    pub pre_prompt_message_count: Option<usize>,
    /// OpenClaw's summary of an automatic compaction; informational.
    pub auto_compaction_summary: Option<String>,
    /// A heartbeat turn: nothing is recorded.
    #[serde(default)]
    pub is_heartbeat: bool,
    /// The model's context window in tokens (default: the server's window).
    pub token_budget: Option<u64>,
    /// What the host knows about the context: the last call's usage, its token count and window.
    pub runtime_context: Option<RuntimeContext>,
    /// The turn's tool calls, when the host measured them (durations); instead of the ones
    /// read from the new messages.
    pub tool_reports: Option<Vec<ToolReport>>,
    /// OpenClaw's session key; accepted, not used.
    pub session_key: Option<String>,
    /// OpenClaw's session target; accepted, not used.
    #[schema(value_type = Option<Object>)]
    pub session_target: Option<Map<String, Value>>,
    /// OpenClaw's runtime settings (runtime, resolved model, limits); accepted, not used.
    #[schema(value_type = Option<Object>)]
    pub runtime_settings: Option<Map<String, Value>>,
    /// OpenClaw's session file path; accepted, not used.
    pub session_file: Option<String>,
}

/// OpenClaw's `ContextEngineRuntimeContext` (a record: keys skald does not read are
/// accepted).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContext {
    /// The prompt-cache state, whose last call's usage calibrates skald's estimates.
    pub prompt_cache: Option<PromptCache>,
    /// The context's size in tokens, as the host counts it.
    pub current_token_count: Option<u64>,
    /// The model's context window in tokens, when the top-level `tokenBudget` is not given.
    pub token_budget: Option<u64>,
    /// Every other key of the record; accepted, not read.
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub other: Map<String, Value>,
}

/// OpenClaw's prompt-cache state.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptCache {
    /// The provider's usage of the turn's last call.
    pub last_call_usage: Option<LastCallUsage>,
    /// Every other key of the record; accepted, not read.
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub other: Map<String, Value>,
}

/// The provider's usage of the turn's last call.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LastCallUsage {
    /// Uncached input tokens.
    pub input: Option<u64>,
    /// Output tokens; accepted, not used.
    pub output: Option<u64>,
    /// Input tokens read from the provider's cache.
    pub cache_read: Option<u64>,
    /// Input tokens written to the provider's cache.
    pub cache_write: Option<u64>,
    /// The provider's total; accepted, not used (the input is the sum of `input`, `cacheRead` and
    /// `cacheWrite`).
    pub total: Option<u64>,
    /// OpenClaw's reading of the context's use (tokens against the window); accepted, not used.
    #[schema(value_type = Option<Object>)]
    pub context_usage: Option<Value>,
}

impl LastCallUsage {
    /// Everything the provider read: uncached input, cache reads and cache writes.
    fn input_tokens(&self) -> u64 {
        self.input.unwrap_or(0) + self.cache_read.unwrap_or(0) + self.cache_write.unwrap_or(0)
    }
}

/// One tool call of the turn.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolReport {
    /// The tool's name, as the model called it.
    pub tool: String,
    /// Whether the call succeeded.
    pub success: bool,
    /// How long the call took, in milliseconds, when the host timed it.
    pub duration_ms: Option<u64>,
    /// The error text, when the call failed.
    pub error: Option<String>,
}

/// What after-turn recorded.
#[derive(Debug, Default, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AfterTurnResponse {
    /// Set for a heartbeat turn, which records nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub heartbeat: bool,
    /// What syncing the host's messages did, when messages were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncReport>,
    /// The provider's usage paired with skald's estimate of the last assembled view.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<CalibrationReport>,
    /// Tools whose statistics were updated (memory on).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_memories: Vec<String>,
    /// Skills the turn used, whose memories (use counts, what went wrong) were updated.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skill_memories: Vec<String>,
    /// What the two-threshold memory upload did (memory on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upload: Option<UploadReport>,
    /// Memory writes that failed; the turn is recorded without them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub memory_errors: Vec<String>,
}

/// One calibration observation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CalibrationReport {
    /// The model the view was counted for (`unnamed` when the host named none).
    pub model: String,
    /// Tokens skald estimated for the last assembled view.
    pub counted: u64,
    /// Input tokens the provider reported for that call (uncached, cache reads and cache writes).
    pub reported: u64,
}

/// What the upload driver did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UploadReport {
    /// The upload started now (it runs in the background).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// Archives of finished uploads recorded now.
    pub completed: usize,
    /// The checkpoint that took an uploaded range out of the live context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped_checkpoint: Option<String>,
}

/// After a turn (`Engine::after_turn`, the one use case): syncs the session with the host's messages, pairs the provider's usage with
/// skald's estimate of the last view (token calibration), records the turn's tool calls in the
/// agent's tool memories, and runs the two-threshold memory upload (memory on): at 50 % of the
/// window a background upload of the oldest turns starts, at 70 % (or when it is done) they
/// leave the live context through a checkpoint. Uploads run on the server's task tracker, so a
/// graceful shutdown waits for them.
#[utoipa::path(post, path = "/v1/sessions/{id}/after-turn", tag = "engine",
    params(("id" = String, Path, description = "Session id")),
    request_body = AfterTurnRequest,
    responses(
        (status = 200, description = "What was recorded", body = AfterTurnResponse),
        (status = 400, description = "Bad body"),
        (status = 404, description = "No such session (and no messages to create it)"),
    ))]
pub(super) async fn after_turn_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<AfterTurnRequest>,
) -> Result<Json<AfterTurnResponse>, ApiError> {
    let id = session_id(id)?;
    let window = token_budget(
        body.token_budget.or(body
            .runtime_context
            .as_ref()
            .and_then(|context| context.token_budget)),
    )?
    .unwrap_or(state.engine.config().window_tokens);
    let messages = body
        .messages
        .as_deref()
        .map(|values| decode_messages(values, "messages"))
        .transpose()?;
    let explicit_reports: Option<Vec<ToolCallReport>> = body.tool_reports.map(|reports| {
        reports
            .into_iter()
            .map(|report| {
                ToolCallReport::new(
                    report.tool,
                    report.success,
                    report.duration_ms,
                    report.error,
                )
            })
            .collect()
    });
    if body.is_heartbeat {
        return Ok(Json(AfterTurnResponse {
            heartbeat: true,
            ..AfterTurnResponse::default()
        }));
    }
    let _ = (
        &body.auto_compaction_summary,
        &body.session_key,
        &body.session_file,
    );
    let runtime = body.runtime_context.as_ref();
    let turn = AfterTurn {
        messages: messages.as_deref(),
        pre_prompt_message_count: body.pre_prompt_message_count,
        tool_reports: explicit_reports.as_deref(),
        reported_input_tokens: runtime
            .and_then(|context| context.prompt_cache.as_ref())
            .and_then(|cache| cache.last_call_usage.as_ref())
            .map(LastCallUsage::input_tokens),
        current_token_count: runtime.and_then(|context| context.current_token_count),
        window_tokens: window,
        source_format: source_format(),
    };
    let outcome = state
        .engine
        .after_turn(&caller.tenant, &id, &turn)
        .await
        .map_err(failure)?;
    if let Some(step) = &outcome.upload {
        state.metrics.upload_step(step);
    }
    let response = AfterTurnResponse {
        heartbeat: false,
        sync: outcome.sync.map(Into::into),
        calibration: outcome.calibration.map(|observation| CalibrationReport {
            model: observation.model,
            counted: observation.counted,
            reported: observation.reported,
        }),
        tool_memories: outcome.tool_memories,
        skill_memories: outcome.skill_memories,
        upload: outcome.upload.map(|step| UploadReport {
            started: step.started,
            completed: step.completed.len(),
            dropped_checkpoint: step.dropped.map(|dropped| dropped.checkpoint_entry_id),
        }),
        memory_errors: outcome.memory_errors,
    };
    Ok(Json(response))
}
