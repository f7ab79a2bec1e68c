//! The engine API: OpenClaw's `ContextEngine` over HTTP, one route per method, on sessions
//! stored per tenant. Messages are OpenClaw `AgentMessage` JSON in and out.
//!
//! - `POST /v1/sessions/{id}/messages` — `ingest` / `ingestBatch`.
//! - `POST /v1/sessions/{id}/assemble` — the model's view of the session for the next call
//!   (`skald_engine::prepare_view`: the pipeline with its refs stored first, then memory).
//! - `POST /v1/sessions/{id}/commit-turn` — `commitTurn`: one finished turn and its advancement
//!   key in one write; the same key again is a duplicate that writes nothing.
//! - `POST /v1/sessions/{id}/compact` — `compact`, with the compacted span archived to memory.
//! - `POST /v1/sessions/{id}/after-turn` — `afterTurn`: sync, calibration, tool statistics, the
//!   two-threshold memory upload.
//! - `POST /v1/sessions/{id}/end` — the session ended (OpenClaw's `session_end`): what of it
//!   no archive covers yet goes to memory.
//! - `POST /v1/sessions/{id}/bootstrap` — `bootstrap` from a session file's content or messages.
//! - `GET /v1/sessions`, `GET /v1/sessions/{id}`, `…/entries`, `…/context` — reads.
//! - `PUT /v1/sessions/{id}/switches` — pause or resume the session's compaction and offload.
//! - `GET /v1/sessions/{id}/export` — the session and its refs' originals as a JSON-lines file.
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
use skald_engine::memory::{KeptRecallReport, MemoryIdentity, RecallReport, SessionMemoryReport};
use skald_engine::{AfterTurn, CompactReport, SyncOutcome};
use skald_engine::{
    AssembleInput, BootstrapSource, CompactInput, ModelView, SessionOverview, View, ViewOptions,
};
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, ApiPath, ApiQuery, failure, session_id};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::state::AppState;

/// The smallest token budget a request may give.
pub const MIN_TOKEN_BUDGET: u64 = 1_000;

mod after_turn;
mod bootstrap;
mod calls;
mod commit;
mod compact;
mod end;
mod export;
mod reads;
mod switches;

pub use after_turn::*;
pub use bootstrap::*;
pub use calls::*;
pub use commit::*;
pub use compact::*;
pub use end::*;
pub use export::*;
pub use reads::*;
pub use switches::*;

/// The engine API's routes with their OpenAPI operations: ingest, assemble, compact, after-turn,
/// bootstrap and the session reads.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(calls::ingest_route))
        .routes(routes!(calls::assemble_route))
        .routes(routes!(commit::commit_turn_route))
        .routes(routes!(compact::compact_route))
        .routes(routes!(after_turn::after_turn_route))
        .routes(routes!(end::end_session_route))
        .routes(routes!(bootstrap::bootstrap_route))
        .routes(routes!(reads::list_sessions))
        .routes(routes!(reads::session_info))
        .routes(routes!(reads::session_entries))
        .routes(routes!(reads::session_context_route))
        .routes(routes!(switches::set_switches_route))
        .routes(routes!(export::export_route))
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
        .map(|(index, value)| decode_host_message(value, &format!("{root}[{index}]")))
        .collect()
}

/// Decodes one `AgentMessage` a host sent. A user, assistant, system or tool-result message
/// without `content` is refused: the stored format keeps such a line as it was written, but a
/// host that sends one has lost what the message said, and storing it would put an empty turn
/// in the session (or fork it, where it stands for a message the session holds).
fn decode_host_message(value: &Value, path: &str) -> Result<Message, ApiError> {
    if let Some(object) = value.as_object() {
        let role = object.get("role").and_then(Value::as_str);
        let needs_content = matches!(role, Some("user" | "assistant" | "system" | "toolResult"));
        let has_content = object.contains_key("content")
            || (role == Some("toolResult")
                && object.contains_key(skald_core::codec::openclaw::SKALD_CONTENT_KEY));
        if needs_content && !has_content {
            return Err(ApiError::BadRequest(format!(
                "not an AgentMessage: {path} has no content: a {} message needs `content` (a \
                 string or an array of content blocks)",
                role.unwrap_or_default()
            )));
        }
    }
    decode_agent_message_at(value, path)
        .map_err(|error| ApiError::BadRequest(format!("not an AgentMessage: {error}")))
}

/// The token budget of a request, checked (`None`: the engine's window).
fn token_budget(budget: Option<u64>) -> Result<Option<u64>, ApiError> {
    window_field("tokenBudget", budget)
}

/// A context window the request names in `field`, checked (`None`: not given).
fn window_field(field: &str, window: Option<u64>) -> Result<Option<u64>, ApiError> {
    match window {
        Some(tokens) if tokens < MIN_TOKEN_BUDGET => Err(ApiError::BadRequest(format!(
            "{field} is {tokens} tokens: a context window is at least {MIN_TOKEN_BUDGET} tokens"
        ))),
        window => Ok(window),
    }
}

/// A tool skald asks the host to offer the model.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ToolDefinition {
    /// The tool's name, as the model calls it (`fetch_original_data`, `search_memories`…).
    pub name: String,
    /// What the tool does, for the model; absent when the tool has no description.
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
    /// The user whose memories the view could see: the one the context route's query named, else
    /// the server's `[memory]` user.
    pub user: String,
    /// The agent whose memories the view could see: the one the context route's query named, else
    /// the server's `[memory]` agent.
    pub agent: String,
    /// The query recall searched with (none when it skipped the turn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recall_query: Option<String>,
    /// URIs of the memories recall injected.
    pub recalled: Vec<String>,
    /// Estimated tokens of the memories recall injected.
    pub recall_tokens: u64,
    /// Earlier turns' recalls sent again where they were first injected (so the prompt cache
    /// keeps its prefix).
    pub kept_recalls: usize,
    /// Their estimated tokens.
    pub kept_recall_tokens: u64,
    /// Earlier turns' recalls that left with this call: the cache had gone cold, they were over
    /// `max_kept_tokens` (a prefix break), or the message they followed left the context.
    pub left_recalls: usize,
    /// Profile entries in the system prompt addition's `## User Profile` section.
    pub profile_entries: usize,
    /// Nodes of the `memory_ls` listing injected at the session's start.
    pub directory_entries: usize,
    /// `SKILL.md` reads given their skill memory.
    pub skill_reads: usize,
    /// Reads that failed; their part was left out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// What the view did, as the routes report it.
pub(crate) fn view_report(built: &View) -> ViewReport {
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
        kept_recalls: memory.kept_recalls.kept,
        kept_recall_tokens: memory.kept_recalls.kept_tokens,
        left_recalls: memory.kept_recalls.left.len(),
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

impl From<SyncOutcome> for SyncReport {
    fn from(outcome: SyncOutcome) -> SyncReport {
        SyncReport {
            created: outcome.created,
            matched: outcome.matched,
            appended: outcome.appended,
            forked: outcome.forked,
            forked_at: outcome.forked_at,
        }
    }
}
