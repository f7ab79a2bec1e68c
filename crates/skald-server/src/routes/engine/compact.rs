//! `POST /v1/sessions/{id}/compact`: OpenClaw's `compact`, with the compacted span archived to
//! memory.

use super::*;

// ---------------------------------------------------------------------------------------------
// POST /v1/sessions/{id}/compact

/// OpenClaw's `compact` parameters.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CompactRequestBody {
    /// The model's context window in tokens (default: the server's window).
    pub token_budget: Option<u64>,
    /// Compact even below the threshold (`/compact`).
    #[serde(default)]
    pub force: bool,
    /// Why the host compacts: `manual` (compact whatever the size), `threshold` (only above
    /// the window less the reserve) or `overflow` (the provider refused the request as too
    /// long: compact whatever the size, and accept the seed's degraded results — a summary that
    /// failed the quality guard, the last-resort note — so that the session can go on). Absent:
    /// `manual` when `force`, else `threshold`.
    pub trigger: Option<CompactTriggerName>,
    /// OpenClaw's reason for forcing; informational.
    pub force_reason: Option<String>,
    /// Instructions for this summary.
    pub custom_instructions: Option<String>,
    /// The workspace's AGENTS.md: its "Session Startup" and "Red Lines" sections are appended
    /// to the summary as critical rules.
    pub agents_md: Option<String>,
    /// Archive the compacted span to memory and extract memories from it (default: when the
    /// server's memory is on).
    pub archive: Option<bool>,
    /// What the context really costs (the provider's last input tokens), when known.
    pub current_token_count: Option<u64>,
    /// OpenClaw's compaction target; informational.
    pub compaction_target: Option<String>,
    /// OpenClaw's preflight trigger; informational.
    pub preflight_compaction_trigger: Option<String>,
    /// OpenClaw's runtime context; informational.
    #[schema(value_type = Option<Object>)]
    pub runtime_context: Option<Map<String, Value>>,
    /// OpenClaw's session key; accepted, not used.
    pub session_key: Option<String>,
    /// OpenClaw's agent id; informational.
    pub agent_id: Option<String>,
    /// OpenClaw's session target; accepted, not used.
    #[schema(value_type = Option<Object>)]
    pub session_target: Option<Map<String, Value>>,
    /// OpenClaw's runtime settings (runtime, resolved model, limits); accepted, not used.
    #[schema(value_type = Option<Object>)]
    pub runtime_settings: Option<Map<String, Value>>,
    /// OpenClaw's session file path; accepted, not used.
    pub session_file: Option<String>,
}

/// The `trigger` of a compact request, as the wire spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CompactTriggerName {
    /// A person or host asked.
    Manual,
    /// The context grew above the threshold.
    Threshold,
    /// The provider refused the request as too long.
    Overflow,
}

impl CompactTriggerName {
    /// The compaction trigger a request names, or implies by `force` when it names none.
    fn resolve(trigger: Option<CompactTriggerName>, force: bool) -> CompactionTrigger {
        match trigger {
            Some(CompactTriggerName::Manual) => CompactionTrigger::Manual,
            Some(CompactTriggerName::Threshold) => CompactionTrigger::Threshold,
            Some(CompactTriggerName::Overflow) => CompactionTrigger::Overflow,
            None if force => CompactionTrigger::Manual,
            None => CompactionTrigger::Threshold,
        }
    }
}

/// OpenClaw's `CompactResult`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactResponse {
    /// False when a compaction was attempted and failed (the session is unchanged).
    pub ok: bool,
    /// Whether a checkpoint was written and the context is now smaller.
    pub compacted: bool,
    /// Why nothing was compacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The summary and token counts; given for every outcome, with only `tokensBefore` set unless
    /// compacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<CompactResultBody>,
    /// skald's whole record of the compaction, as `skald compact --json` prints it (its own
    /// snake_case fields).
    #[schema(value_type = Object)]
    pub report: CompactReport,
}

/// What a compaction produced.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactResultBody {
    /// The summary that now stands for the compacted history (absent unless compacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The first entry the model still sees after the summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_kept_entry_id: Option<String>,
    /// Tokens the context took before: skald's estimate, or `currentTokenCount` when given and
    /// larger.
    pub tokens_before: u64,
    /// Tokens the context takes after (absent unless compacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    /// skald's record: the checkpoint entry, the summarizer, and the memory archive of the
    /// compacted span.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub details: Option<Value>,
}

/// Compacts the session's active branch: the history before the recent turns becomes a summary
/// (the configured summarizer), written as a checkpoint; the span it replaced is archived to
/// memory when memory is on. Below the threshold nothing happens unless `force` or a `manual` or
/// `overflow` trigger. A compaction that fails writes nothing and says why (`ok: false`); after
/// an `overflow`, a degraded summary is written instead of failing.
#[utoipa::path(post, path = "/v1/sessions/{id}/compact", tag = "engine",
    params(("id" = String, Path, description = "Session id")),
    request_body = CompactRequestBody,
    responses(
        (status = 200, description = "The outcome", body = CompactResponse),
        (status = 400, description = "Bad body or token budget"),
        (status = 404, description = "No such session"),
    ))]
pub(super) async fn compact_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<CompactRequestBody>,
) -> Result<Json<CompactResponse>, ApiError> {
    let id = session_id(id)?;
    let window = token_budget(body.token_budget)?;
    let input = CompactInput {
        window_tokens: window,
        trigger: CompactTriggerName::resolve(body.trigger, body.force),
        custom_instructions: body.custom_instructions,
        agents_md: body.agents_md,
        context_tokens: body.current_token_count,
        archive: body.archive.unwrap_or(true),
    };
    let compaction = state
        .engine
        .compact(&caller.tenant, &id, &input, &CancellationToken::new())
        .await
        .map_err(failure)?;
    let window = window.unwrap_or(state.engine.config().window_tokens);
    let report = compaction.report(&id, &caller.tenant, window);
    let archive = match (&compaction.memory_error, &compaction.memory_archive) {
        (Some(error), _) => serde_json::json!({ "error": error }),
        (None, Some(outcome)) => serde_json::to_value(outcome).unwrap_or(Value::Null),
        (None, None) => Value::Null,
    };
    let result = compaction.result;
    let response = match &result.outcome {
        CompactionOutcome::Compacted {
            tokens_before,
            tokens_after,
            summary,
            ..
        } => {
            Metrics::outcome(&state.metrics.compactions, "compacted");
            CompactResponse {
                ok: true,
                compacted: true,
                reason: None,
                result: Some(CompactResultBody {
                    summary: Some(summary.clone()),
                    first_kept_entry_id: result.first_kept_entry_id.clone(),
                    tokens_before: *tokens_before,
                    tokens_after: Some(*tokens_after),
                    details: Some(serde_json::json!({
                        "checkpointEntryId": result.checkpoint_entry_id,
                        "summarizer": result.summarizer,
                        "rewrittenEntries": result.rewritten_entries,
                        "memoryArchive": archive,
                    })),
                }),
                report,
            }
        }
        CompactionOutcome::Skipped {
            reason,
            tokens_before,
        } => {
            Metrics::outcome(&state.metrics.compactions, "skipped");
            not_compacted(true, reason.describe(), *tokens_before, report)
        }
        CompactionOutcome::Cancelled {
            reason,
            tokens_before,
        } => {
            Metrics::outcome(&state.metrics.compactions, "failed");
            not_compacted(false, reason.describe(), *tokens_before, report)
        }
    };
    Ok(Json(response))
}

/// The answer for a compaction that wrote nothing: skipped (`ok`) or cancelled (not `ok`), with
/// its reason and the context's size.
fn not_compacted(
    ok: bool,
    reason: String,
    tokens_before: u64,
    report: CompactReport,
) -> CompactResponse {
    CompactResponse {
        ok,
        compacted: false,
        reason: Some(reason),
        result: Some(CompactResultBody {
            summary: None,
            first_kept_entry_id: None,
            tokens_before,
            tokens_after: None,
            details: None,
        }),
        report,
    }
}
