//! The engine API: OpenClaw's `ContextEngine` over HTTP, one route per method, on sessions
//! stored per tenant. Messages are OpenClaw `AgentMessage` JSON in and out.
//!
//! - `POST /v1/sessions/{id}/messages` — `ingest` / `ingestBatch`.
//! - `POST /v1/sessions/{id}/assemble` — the model's view of the session for the next call
//!   (`skald_engine::prepare_view`: the pipeline with its refs stored first, then memory).
//! - `POST /v1/sessions/{id}/compact` — `compact`, with the compacted span archived to memory.
//! - `POST /v1/sessions/{id}/after-turn` — `afterTurn`: sync, calibration, tool statistics, the
//!   two-threshold memory upload.
//! - `POST /v1/sessions/{id}/bootstrap` — `bootstrap` from a session file's content or messages.
//! - `GET /v1/sessions`, `GET /v1/sessions/{id}`, `…/entries`, `…/context` — reads.
//!
//! Each handler is a mapping: it checks its whole input (the session id, the body) and
//! translates it to one [`skald_engine::Engine`] call in the caller's tenant — which holds the
//! session's state while it runs, so requests of one session are serialised — and translates
//! the answer back.

use std::collections::HashSet;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use skald_core::codec::Format;
use skald_core::codec::openclaw::{
    decode_agent_message_at, encode_agent_messages, encode_entry, encode_header,
};
use skald_core::compaction::{CompactionOutcome, CompactionTrigger};
use skald_core::memory::usage::ToolCallReport;
use skald_core::message::{Message, ToolSpec};
use skald_core::time::format_rfc3339_seconds;
use skald_engine::after_turn::AfterTurn;
use skald_engine::compact::CompactReport;
use skald_engine::ingest;
use skald_engine::memory::{MemoryIdentity, RecallReport, SessionMemoryReport};
use skald_engine::{
    AssembleInput, BootstrapSource, CompactInput, ModelView, SessionOverview, View, ViewOptions,
};
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, ApiPath, ApiQuery, engine_error, session_id};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::state::AppState;

/// The smallest token budget a request may give.
pub const MIN_TOKEN_BUDGET: u64 = 1_000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(ingest_route))
        .routes(routes!(assemble_route))
        .routes(routes!(compact_route))
        .routes(routes!(after_turn_route))
        .routes(routes!(bootstrap_route))
        .routes(routes!(list_sessions))
        .routes(routes!(session_info))
        .routes(routes!(session_entries))
        .routes(routes!(session_context_route))
}

// ---------------------------------------------------------------------------------------------
// Shared pieces

/// The session format sessions created through the engine API are stored as.
fn source_format() -> &'static str {
    Format::OpenClawSession.name()
}

/// Decodes OpenClaw `AgentMessage`s; the error names the field (`messages[2].content[0].text`).
fn decode_messages(values: &[Value], root: &str) -> Result<Vec<Message>, ApiError> {
    values
        .iter()
        .enumerate()
        .map(|(index, value)| {
            decode_agent_message_at(value, &format!("{root}[{index}]"))
                .map_err(|error| ApiError::BadRequest(format!("not an AgentMessage: {error}")))
        })
        .collect()
}

/// The token budget of a request, checked (`None`: the engine's window).
fn token_budget(budget: Option<u64>) -> Result<Option<u64>, ApiError> {
    match budget {
        Some(tokens) if tokens < MIN_TOKEN_BUDGET => Err(ApiError::BadRequest(format!(
            "tokenBudget is {tokens} tokens: a context window is at least {MIN_TOKEN_BUDGET} \
             tokens"
        ))),
        budget => Ok(budget),
    }
}

/// A tool skald asks the host to offer the model.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ToolDefinition {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    #[schema(value_type = Object)]
    pub parameters: Value,
}

impl From<&ToolSpec> for ToolDefinition {
    fn from(spec: &ToolSpec) -> ToolDefinition {
        ToolDefinition {
            name: spec.name.clone(),
            description: spec.description.clone(),
            parameters: spec.parameters.clone(),
        }
    }
}

/// What skald did to build a view, beyond OpenClaw's fields.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ViewReport {
    /// Estimated tokens of the session's context before the pipeline.
    pub tokens_before: u64,
    /// Estimated tokens the pipeline took out.
    pub tokens_saved: u64,
    /// Originals stored in the ref store by this view.
    pub refs_stored: usize,
    /// Tool results replaced by `[REF_ID: …]` placeholders.
    pub offloaded: usize,
    /// Tool results trimmed or cleared by pruning.
    pub pruned: usize,
    /// Tool results truncated.
    pub truncated: usize,
    /// What memory added, when it took part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryReport>,
}

/// What memory added to a view.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryReport {
    pub user: String,
    pub agent: String,
    /// The query recall searched with (none when it skipped the turn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recall_query: Option<String>,
    /// URIs of the memories recall injected.
    pub recalled: Vec<String>,
    pub recall_tokens: u64,
    pub profile_entries: usize,
    pub directory_entries: usize,
    /// `SKILL.md` reads given their skill memory.
    pub skill_reads: usize,
    /// Reads that failed; their part was left out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// What the view did, as the routes report it.
fn view_report(built: &View) -> ViewReport {
    let view = &built.view;
    let (user, agent) = built
        .identity
        .as_ref()
        .map_or(("", ""), |identity| (identity.user(), identity.agent()));
    let memory = view.memory.as_ref().map(|memory| MemoryReport {
        user: user.to_owned(),
        agent: agent.to_owned(),
        recall_query: memory.recall.query.clone(),
        recalled: memory
            .recall
            .kept
            .iter()
            .map(|kept| kept.uri.clone())
            .collect(),
        recall_tokens: memory.recall.tokens_injected,
        profile_entries: memory.session_start.profile_entries,
        directory_entries: memory.session_start.directory_entries,
        skill_reads: memory
            .skills
            .iter()
            .filter(|skill| skill.appended_chars > 0)
            .count(),
        errors: memory
            .session_start
            .errors
            .iter()
            .cloned()
            .chain(memory.recall.error.clone())
            .chain(memory.skills.iter().filter_map(|skill| skill.error.clone()))
            .collect(),
    });
    ViewReport {
        tokens_before: view.tokens_before,
        tokens_saved: view.tokens_saved(),
        refs_stored: view.report.refs_stored,
        offloaded: view.report.offload.offloaded.len(),
        pruned: view.report.prune.trimmed + view.report.prune.cleared,
        truncated: view.report.truncate.truncated,
        memory,
    }
}

fn record_view_metrics(metrics: &Metrics, view: &ModelView) {
    metrics.tokens_saved.inc_by(view.tokens_saved());
    metrics.refs_stored.inc_by(view.report.refs_stored as u64);
}

/// What bringing the session in line with the host's messages did.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncReport {
    /// The session did not exist and was created.
    pub created: bool,
    /// Messages already stored on the active branch.
    pub matched: usize,
    /// Messages appended.
    pub appended: usize,
    /// Whether the host's history diverged from the stored one and a new branch started.
    pub forked: bool,
    /// The entry the new branch grows from (absent with `forked`: a new root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_at: Option<String>,
}

impl From<ingest::SyncOutcome> for SyncReport {
    fn from(outcome: ingest::SyncOutcome) -> SyncReport {
        SyncReport {
            created: outcome.created,
            matched: outcome.matched,
            appended: outcome.appended,
            forked: outcome.forked,
            forked_at: outcome.forked_at,
        }
    }
}

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
    One {
        /// False when the message equals the session's last message (a duplicate) or the
        /// turn is a heartbeat.
        ingested: bool,
    },
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
async fn ingest_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<IngestRequest>,
) -> Result<Json<IngestResponse>, ApiError> {
    let id = session_id(id)?;
    let _ = body.session_key;
    let (messages, batch) = match (body.message, body.messages) {
        (Some(message), None) => {
            let decoded = decode_agent_message_at(&message, "message")
                .map_err(|error| ApiError::BadRequest(format!("not an AgentMessage: {error}")))?;
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
            .map_err(engine_error)?
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
    /// The model's context window in tokens (default: the server's window).
    pub token_budget: Option<u64>,
    /// The host's whole conversation. Synced into the session first: what is new is appended,
    /// and where it diverges from the stored history a new branch starts (the host's view wins).
    #[schema(value_type = Option<Vec<Object>>)]
    pub messages: Option<Vec<Value>>,
    /// The tools the host will run. skald's tools missing from it are not offered, and without
    /// `fetch_original_data` nothing is moved out of the context (a ref the model cannot fetch
    /// would lose data). Absent: the host runs every tool skald offers.
    pub available_tools: Option<HashSet<String>>,
    /// The model the view is for (calibrates `estimatedTokens` once usage was reported).
    pub model: Option<String>,
    /// The user's prompt, sent by the host after the view: recall searches with it.
    pub prompt: Option<String>,
    /// OpenClaw's citations mode; accepted, not used.
    #[schema(value_type = Option<Object>)]
    pub citations_mode: Option<Value>,
    /// OpenClaw's session key; informational.
    pub session_key: Option<String>,
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
    /// To append to the host's system prompt: the REF_ID instruction once the session has
    /// refs, the user's profile and tool memories when memory is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt_addition: Option<String>,
    /// skald's tools the host should offer the model and run (`fetch_original_data` once the
    /// session has refs: `GET /v1/refs/{id}` answers it; the memory tools when memory is on).
    pub tools: Vec<ToolDefinition>,
    /// What the messages sync did, when messages were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncReport>,
    pub report: ViewReport,
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
async fn assemble_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<AssembleRequest>,
) -> Result<Json<AssembleResponse>, ApiError> {
    let id = session_id(id)?;
    let _ = (&body.citations_mode, &body.session_key);
    let window = token_budget(body.token_budget)?;
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
            with_memory: state.engine.config().memory.enabled,
            identity: None,
            pending_prompt: body.prompt,
        },
    };
    let assembly = state
        .engine
        .assemble(&caller.tenant, &id, input)
        .await
        .map_err(engine_error)?;
    let built = &assembly.view;
    record_view_metrics(&state.metrics, &built.view);
    Ok(Json(AssembleResponse {
        messages: encode_agent_messages(&built.view.messages),
        estimated_tokens: assembly.estimated_tokens,
        system_prompt_addition: built.view.system_prompt_addition(),
        report: view_report(built),
        tools: built.tools.iter().map(ToolDefinition::from).collect(),
        sync: assembly.sync.map(Into::into),
    }))
}

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
    pub session_key: Option<String>,
    pub session_file: Option<String>,
}

/// OpenClaw's `CompactResult`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactResponse {
    /// False when a compaction was attempted and failed (the session is unchanged).
    pub ok: bool,
    pub compacted: bool,
    /// Why nothing was compacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The first entry the model still sees after the summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_kept_entry_id: Option<String>,
    pub tokens_before: u64,
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
/// memory when memory is on. Below the threshold nothing happens unless `force`. A compaction
/// that fails writes nothing and says why (`ok: false`).
#[utoipa::path(post, path = "/v1/sessions/{id}/compact", tag = "engine",
    params(("id" = String, Path, description = "Session id")),
    request_body = CompactRequestBody,
    responses(
        (status = 200, description = "The outcome", body = CompactResponse),
        (status = 400, description = "Bad body or token budget"),
        (status = 404, description = "No such session"),
    ))]
async fn compact_route(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<CompactRequestBody>,
) -> Result<Json<CompactResponse>, ApiError> {
    let id = session_id(id)?;
    let window = token_budget(body.token_budget)?;
    let input = CompactInput {
        window_tokens: window,
        trigger: if body.force {
            CompactionTrigger::Manual
        } else {
            CompactionTrigger::Threshold
        },
        custom_instructions: body.custom_instructions,
        agents_md: body.agents_md,
        context_tokens: body.current_token_count,
        archive: body.archive.unwrap_or(true),
    };
    let compaction = state
        .engine
        .compact(&caller.tenant, &id, &input, &CancellationToken::new())
        .await
        .map_err(engine_error)?;
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
            CompactResponse {
                ok: true,
                compacted: false,
                reason: Some(reason.describe()),
                result: Some(CompactResultBody {
                    summary: None,
                    first_kept_entry_id: None,
                    tokens_before: *tokens_before,
                    tokens_after: None,
                    details: None,
                }),
                report,
            }
        }
        CompactionOutcome::Cancelled {
            reason,
            tokens_before,
        } => {
            Metrics::outcome(&state.metrics.compactions, "failed");
            CompactResponse {
                ok: false,
                compacted: false,
                reason: Some(reason.describe()),
                result: Some(CompactResultBody {
                    summary: None,
                    first_kept_entry_id: None,
                    tokens_before: *tokens_before,
                    tokens_after: None,
                    details: None,
                }),
                report,
            }
        }
    };
    Ok(Json(response))
}

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
    pub runtime_context: Option<RuntimeContext>,
    /// The turn's tool calls, when the host measured them (durations); instead of the ones
    /// read from the new messages.
    pub tool_reports: Option<Vec<ToolReport>>,
    pub session_key: Option<String>,
    pub session_file: Option<String>,
}

/// OpenClaw's `ContextEngineRuntimeContext` (a record: keys skald does not read are
/// accepted).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContext {
    pub prompt_cache: Option<PromptCache>,
    /// The context's size in tokens, as the host counts it.
    pub current_token_count: Option<u64>,
    pub token_budget: Option<u64>,
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub other: Map<String, Value>,
}

/// OpenClaw's prompt-cache state.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptCache {
    pub last_call_usage: Option<LastCallUsage>,
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub other: Map<String, Value>,
}

/// The provider's usage of the turn's last call.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LastCallUsage {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub cache_read: Option<u64>,
    pub cache_write: Option<u64>,
    pub total: Option<u64>,
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
    pub tool: String,
    pub success: bool,
    pub duration_ms: Option<u64>,
    pub error: Option<String>,
}

/// What after-turn recorded.
#[derive(Debug, Default, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AfterTurnResponse {
    /// Set for a heartbeat turn, which records nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub heartbeat: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncReport>,
    /// The provider's usage paired with skald's estimate of the last assembled view.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<CalibrationReport>,
    /// Tools whose statistics were updated (memory on).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_memories: Vec<String>,
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
    pub model: String,
    pub counted: u64,
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

/// After a turn (`skald_engine::after_turn`, the one use case): syncs the session with the host's messages, pairs the provider's usage with
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
async fn after_turn_route(
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
        .map_err(engine_error)?;
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
        upload: outcome.upload.map(|step| UploadReport {
            started: step.started,
            completed: step.completed.len(),
            dropped_checkpoint: step.dropped.map(|dropped| dropped.checkpoint_entry_id),
        }),
        memory_errors: outcome.memory_errors,
    };
    Ok(Json(response))
}

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
    pub session_key: Option<String>,
    /// The file's path on the host, kept as the session's source for listings (send its
    /// content in `sessionJsonl`).
    pub session_file: Option<String>,
}

/// OpenClaw's `BootstrapResult`, with what an import of `sessionJsonl` did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapResponse {
    /// Whether anything was stored.
    pub bootstrapped: bool,
    /// Messages stored by this call.
    pub imported_messages: u64,
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
    pub session_id: String,
    pub tenant: String,
    /// The transcript's format (`openclaw-session`, `openai-request`…).
    pub format: String,
    /// `created`, `appended` or `already_imported`.
    pub status: String,
    /// Entries this call stored.
    pub entries_added: usize,
    /// Entries the session holds now, of every branch.
    pub entries: u64,
    pub messages: u64,
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
async fn bootstrap_route(
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
        .map_err(engine_error)?;
    let import = done.import.map(|(outcome, info)| ImportReport {
        session_id: outcome.session_id,
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

// ---------------------------------------------------------------------------------------------
// Reads

/// A stored session.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub source_format: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Entries of every branch.
    pub entries: u64,
    /// Message entries of every branch.
    pub messages: u64,
    /// Estimated tokens (chars/4) of the context rebuilt from the leaf, before any policy.
    pub estimated_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
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
async fn list_sessions(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<SessionList>, ApiError> {
    let sessions = state
        .engine
        .list_sessions(&caller.tenant)
        .map_err(engine_error)?
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
async fn session_info(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<SessionSummary>, ApiError> {
    let id = session_id(id)?;
    let overview = state
        .engine
        .session_overview(&caller.tenant, &id)
        .map_err(engine_error)?;
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
async fn session_entries(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<SessionEntries>, ApiError> {
    let id = session_id(id)?;
    let session = state
        .engine
        .load_session(&caller.tenant, &id)
        .map_err(engine_error)?;
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
    pub user: String,
    pub agent: String,
    /// The session-start snapshot: profile and tool memories, the directory listing.
    #[schema(value_type = Object)]
    pub session_start: SessionMemoryReport,
    /// What recall searched for, injected and dropped.
    #[schema(value_type = Object)]
    pub recall: RecallReport,
}

/// The assembled context of a session.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextResponse {
    pub session_id: String,
    pub policy: String,
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Value>,
    pub estimated_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt_addition: Option<String>,
    pub tools: Vec<ToolDefinition>,
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
async fn session_context_route(
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
        .map_err(engine_error)?;
    let memory = match (&built.view.memory, &built.identity) {
        (Some(memory), Some(identity)) => Some(ContextMemory {
            user: identity.user().to_owned(),
            agent: identity.agent().to_owned(),
            session_start: memory.session_start.clone(),
            recall: memory.recall.clone(),
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
