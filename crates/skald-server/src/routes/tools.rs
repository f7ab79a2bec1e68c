//! The tools API: skald's own tools for a host that runs its model's tool calls itself (the
//! OpenClaw plugin, and any agent with its own loop). `GET /v1/tools` lists their definitions,
//! `POST /v1/tools/{name}` runs one call — through [`skald_engine::Engine::run_tool`], the
//! executor the proxy uses for the calls it intercepts, in the caller's tenant.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::engine::ToolDefinition;
use super::memory::identity;
use super::{ApiJson, ApiPath};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// The tools API's routes with their OpenAPI operations.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_tools))
        .routes(routes!(run_tool))
}

/// skald's tools on this server.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolList {
    /// `fetch_original_data`, then the memory tools when the server's memory is on.
    pub tools: Vec<ToolDefinition>,
}

/// Lists skald's tools as a host offers them to its model.
#[utoipa::path(get, path = "/v1/tools", tag = "tools",
    responses((status = 200, description = "The definitions", body = ToolList)))]
async fn list_tools(State(state): State<AppState>, _caller: Caller) -> Json<ToolList> {
    Json(ToolList {
        tools: state
            .engine
            .tool_specs()
            .iter()
            .map(ToolDefinition::from)
            .collect(),
    })
}

/// One call of a skald tool.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallRequest {
    /// The model's arguments (a JSON object), as it wrote them.
    #[schema(value_type = Object)]
    pub arguments: Map<String, Value>,
    /// The user whose memories the memory tools act on (default: the server's `[memory]` user).
    pub user: Option<String>,
    /// The agent whose memories the memory tools act on (default: the server's `[memory]`
    /// agent).
    pub agent: Option<String>,
}

/// What the tool answered.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallResponse {
    /// The tool result's text, for the model.
    pub content: String,
    /// Whether the result is an error the model should correct (bad arguments, an unknown or
    /// foreign ref, memory off): a tool-level failure, not an HTTP one.
    pub is_error: bool,
}

/// Runs one call of `fetch_original_data` or a memory tool, as the model made it. A call the
/// tool refuses (bad arguments, an id not in this key's store) is a 200 with `isError` and a
/// text that says what was wrong, so the host hands it to the model as it would any tool error.
#[utoipa::path(post, path = "/v1/tools/{name}", tag = "tools",
    params(("name" = String, Path, description = "The tool's name")),
    request_body = ToolCallRequest,
    responses(
        (status = 200, description = "The tool's answer", body = ToolCallResponse),
        (status = 400, description = "A malformed body, user or agent"),
        (status = 404, description = "Not one of skald's tools"),
    ))]
async fn run_tool(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<ToolCallRequest>,
) -> Result<Json<ToolCallResponse>, ApiError> {
    let specs = state.engine.tool_specs();
    if !specs.iter().any(|spec| spec.name == name) {
        let known: Vec<&str> = specs.iter().map(|spec| spec.name.as_str()).collect();
        return Err(ApiError::NotFound(format!(
            "no tool {name:?} on this server: skald's tools here are {}",
            known.join(", ")
        )));
    }
    let identity = identity(&state, body.user.as_deref(), body.agent.as_deref())?;
    let run = state
        .engine
        .run_tool(
            &caller.tenant,
            Some(&identity),
            &name,
            &Value::Object(body.arguments),
        )
        .await;
    state.metrics.tool_interceptions.inc();
    Ok(Json(ToolCallResponse {
        content: run.text,
        is_error: run.is_error,
    }))
}
