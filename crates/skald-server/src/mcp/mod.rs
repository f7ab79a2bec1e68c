//! skald's tools over MCP, with the official Rust SDK (`rmcp`): `fetch_original_data`, the
//! memory tools and `search_docs`, listed from [`Engine::tool_specs`] and run by
//! [`Engine::run_tool`] — the definitions and the executor the proxy and the tools API use — so a
//! host that keeps its own loop (Claude Code without the proxy, Cursor, any MCP client) gets the
//! same tools.
//!
//! Two transports: stdio (`skald mcp`, one tenant for the process) and streamable HTTP at `/mcp`
//! on `skald serve`, where every request is authenticated by its skald key like any route and
//! acts in that key's tenant (a ref of another tenant does not exist). A call whose arguments
//! do not fit the tool's schema is a JSON-RPC error (invalid params) that says what was wrong; a
//! well-formed call the tool cannot serve (an unknown ref, memory off) is a tool result flagged
//! as an error, for the model to read.
//!
//! `sessions` is the gate in front of the HTTP transport: it authenticates every request before
//! the transport sees it and bounds the sessions each key holds.
//!
//! [`Engine::tool_specs`]: skald_engine::Engine::tool_specs
//! [`Engine::run_tool`]: skald_engine::Engine::run_tool

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use skald_core::ids::Tenant;
use tokio_util::sync::CancellationToken;

use crate::auth::authenticate;
use crate::state::AppState;

mod sessions;

pub use sessions::{McpSessions, gate};

/// What the server tells an MCP client it is for.
const INSTRUCTIONS: &str = "skald keeps the originals of tool outputs it moved out of the \
    conversation (shown as [REF_ID: …] placeholders) and the user's long-term memory. Call \
    fetch_original_data with a REF_ID for an original (a slice with `lines` or `grep`); search \
    and read memories with search_memories, memory_ls and memory_read; keep a fact with \
    commit_memory; forget one with memory_forget; search the documents added to skald with \
    search_docs.";

/// The MCP server: one per stdio process, one per HTTP session.
#[derive(Clone)]
pub struct SkaldMcp {
    state: AppState,
    /// The tenant of every call (stdio); `None`: each HTTP request's key says.
    tenant: Option<Tenant>,
}

impl SkaldMcp {
    /// A server whose calls all act in `tenant` (a local process: `skald mcp`).
    pub fn local(state: AppState, tenant: Tenant) -> SkaldMcp {
        SkaldMcp {
            state,
            tenant: Some(tenant),
        }
    }

    /// A server whose calls act in the tenant of each HTTP request's skald key.
    pub fn over_http(state: AppState) -> SkaldMcp {
        SkaldMcp {
            state,
            tenant: None,
        }
    }

    /// The caller's tenant: the process's, or the one the request's key belongs to.
    fn tenant(&self, context: &RequestContext<RoleServer>) -> Result<Tenant, ErrorData> {
        if let Some(tenant) = &self.tenant {
            return Ok(tenant.clone());
        }
        let parts = context
            .extensions
            .get::<axum::http::request::Parts>()
            .ok_or_else(|| ErrorData::internal_error("the request's headers are missing", None))?;
        authenticate(&self.state, &parts.headers)
            .map(|caller| caller.tenant)
            .map_err(|error| ErrorData::invalid_request(error.to_string(), None))
    }
}

impl ServerHandler for SkaldMcp {
    fn get_info(&self) -> ServerConfig {
        let mut server = Implementation::default();
        server.name = "skald".to_owned();
        server.version = env!("CARGO_PKG_VERSION").to_owned();
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(server)
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.tenant(&context)?;
        let tools = self
            .state
            .engine
            .tool_specs()
            .into_iter()
            .map(|spec| {
                let schema = match spec.parameters {
                    Value::Object(schema) => schema,
                    // skald's schemas are objects; anything else is described, not dropped.
                    other @ (Value::Null
                    | Value::Bool(_)
                    | Value::Number(_)
                    | Value::String(_)
                    | Value::Array(_)) => {
                        let mut schema = serde_json::Map::new();
                        schema.insert("type".to_owned(), Value::String("object".to_owned()));
                        schema.insert("description".to_owned(), Value::String(other.to_string()));
                        schema
                    }
                };
                Tool::new(
                    spec.name,
                    spec.description.unwrap_or_default(),
                    Arc::new(schema),
                )
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tenant = self.tenant(&context)?;
        let engine = &self.state.engine;
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        engine
            .check_tool_arguments(&request.name, &arguments)
            .map_err(|reason| ErrorData::invalid_params(reason, None))?;
        let identity = engine
            .memory_identity()
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        let run = engine
            .run_tool(&tenant, Some(&identity), &request.name, &arguments)
            .await;
        self.state.metrics.tool_interceptions.inc();
        let content = vec![ContentBlock::text(run.text)];
        Ok(if run.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }
}

/// The streamable-HTTP MCP endpoint, to nest at `/mcp` behind [`gate`] with the
/// [`McpSessions`] returned beside it: each session gets its own [`SkaldMcp`], each request is
/// authenticated by its key. Cancelling `shutdown` ends the sessions' open streams, so a
/// graceful stop is not held up by a client that keeps one.
pub fn http_service(
    state: AppState,
    shutdown: CancellationToken,
) -> (
    StreamableHttpService<SkaldMcp, LocalSessionManager>,
    Arc<McpSessions>,
) {
    let edge = &state.config.edge;
    // The edge (`crate::edge`) checks `Host` and `Origin` of every route, `/mcp` included, with
    // `[server] allowed_hosts`; the transport's own loopback-only check would refuse those.
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown)
        .disable_allowed_hosts()
        .with_max_request_body_bytes(state.config.max_body_bytes);
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(edge.mcp_session_idle);
    let manager = Arc::new(manager);
    let sessions = Arc::new(McpSessions::new(
        manager.clone(),
        edge.mcp_sessions_per_key,
        edge.mcp_session_idle,
    ));
    let service = StreamableHttpService::new(
        move || Ok(SkaldMcp::over_http(state.clone())),
        manager,
        config,
    );
    (service, sessions)
}
