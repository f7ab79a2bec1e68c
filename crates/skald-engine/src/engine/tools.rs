//! skald's own tools as a use case of [`Engine`]: their definitions ([`Engine::tool_specs`]) and
//! running one call of them ([`Engine::run_tool`]) — `fetch_original_data` against the tenant's
//! refs, the memory tools against its memories. The proxy runs the calls it intercepts through
//! here, and so does every host that runs skald's tools itself (the OpenClaw plugin through
//! `POST /v1/tools/{name}`), so a tool behaves the same whoever runs it.

use std::time::Instant;

use serde_json::Value;
use skald_core::digest::digest_blocks;
use skald_core::fetch::{FetchArgs, tool_spec as fetch_tool_spec};
use skald_core::ids::Tenant;
use skald_core::memory::tools::{
    SEARCH_DOCS_TOOL_NAME, is_memory_tool, parse_search_docs, parse_tool_call, search_docs_spec,
    tool_specs as memory_tool_specs,
};
use skald_core::memory::usage::ToolCallReport;
use skald_core::message::{Block, ToolSpec};
use skald_core::pipeline::offload::FETCH_TOOL_NAME;
use skald_core::refs::{RefPayload, placeholder};

use skald_llm::Embedder;
use skald_store::RefStore;
use skald_store::memories::MemoryStore;

use super::Engine;
use crate::memory::{MemoryIdentity, execute_memory_tool, execute_search_docs};
use crate::{EngineError, execute_fetch};

/// One skald tool call, run.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRun {
    /// The tool result's text for the model.
    pub text: String,
    /// Whether the result is an error (the model should correct its call).
    pub is_error: bool,
    /// The call as the tool statistics record it.
    pub report: ToolCallReport,
}

/// A tool output a host ran, stored and replaced by its placeholder ([`Engine::offload_output`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffloadedOutput {
    /// `[REF_ID: …] (Summary: …)`: what the model reads instead of the output.
    pub placeholder: String,
    /// The ref holding the original, which `fetch_original_data` gives back.
    pub ref_id: String,
}

impl Engine {
    /// Stores one tool output a host ran itself and gives the placeholder that stands for it —
    /// the offload stage's threshold and digest, for a host whose own hook replaces the output
    /// before its model sees it (Claude Code's `PostToolUse`). The original is stored before the
    /// placeholder is returned; an output under the policy's threshold, or a policy that does
    /// not offload, is `None`: it stays as it is.
    pub fn offload_output(
        &self,
        tenant: &Tenant,
        text: &str,
    ) -> Result<Option<OffloadedOutput>, EngineError> {
        let settings = &self.config().policy.offload;
        if !settings.enabled || text.chars().count() <= settings.compress_threshold {
            return Ok(None);
        }
        let digest = settings
            .digest_settings()
            .map_err(|error| EngineError::InvalidInput {
                field: "offload.summary_max_chars",
                reason: error.to_string(),
            })?;
        let blocks = vec![Block::text(text.to_owned())];
        let summary = digest_blocks(&blocks, &digest).summary;
        let id = self.refs().put(tenant, &RefPayload::new(blocks))?;
        Ok(Some(OffloadedOutput {
            placeholder: placeholder(&id, &summary),
            ref_id: id.as_str().to_owned(),
        }))
    }

    /// skald's tools a host can offer its model: `fetch_original_data`, then, when the engine's
    /// memory is on, the five memory tools and `search_docs` (the documents added with
    /// `skald add`). The proxy offers the memory tools only: `search_docs` is for a host that
    /// runs skald's tools itself (MCP, the OpenClaw plugin).
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        skald_tool_specs(self.config().memory.enabled)
    }

    /// Checks a call's arguments against the tool's schema without running it: `Err` says what
    /// is wrong (an unknown tool, a missing or misspelt argument, a wrong type), as a protocol
    /// that separates bad calls from failed ones (MCP's invalid params) needs.
    pub fn check_tool_arguments(&self, name: &str, arguments: &Value) -> Result<(), String> {
        if name == FETCH_TOOL_NAME {
            return FetchArgs::from_json(arguments)
                .map(|_| ())
                .map_err(|error| format!("{FETCH_TOOL_NAME}: {error}"));
        }
        if name == SEARCH_DOCS_TOOL_NAME && self.config().memory.enabled {
            return parse_search_docs(arguments)
                .map(|_| ())
                .map_err(|error| error.to_string());
        }
        if is_memory_tool(name) && self.config().memory.enabled {
            return parse_tool_call(name, arguments)
                .map(|_| ())
                .map_err(|error| error.to_string());
        }
        let known: Vec<String> = self.tool_specs().into_iter().map(|s| s.name).collect();
        Err(format!(
            "unknown tool {name:?}: skald's tools are {}",
            known.join(", ")
        ))
    }

    /// Runs one call of a skald tool for `tenant` (the memory tools for `identity`). A name
    /// that is not one of [`Engine::tool_specs`] is an error result that lists them, never a
    /// panic: the name comes from a model.
    pub async fn run_tool(
        &self,
        tenant: &Tenant,
        identity: Option<&MemoryIdentity>,
        name: &str,
        arguments: &Value,
    ) -> ToolRun {
        let memory_enabled = self.config().memory.enabled;
        let memory = identity
            .filter(|_| memory_enabled)
            .map(|identity| ToolMemory {
                store: self.memories(),
                embedder: self.config().embedder.as_deref(),
                identity,
                now_ms: self.now_ms(),
            });
        run_skald_tool(self.refs(), memory_enabled, memory, tenant, name, arguments).await
    }
}

/// skald's tools: `fetch_original_data`, then with memory on the memory tools and `search_docs`.
fn skald_tool_specs(memory_enabled: bool) -> Vec<ToolSpec> {
    let mut specs = vec![fetch_tool_spec()];
    if memory_enabled {
        specs.extend(memory_tool_specs());
        specs.push(search_docs_spec());
    }
    specs
}

/// The memories skald's memory tools work on.
#[derive(Clone, Copy)]
pub(crate) struct ToolMemory<'a> {
    pub store: &'a dyn MemoryStore,
    pub embedder: Option<&'a dyn Embedder>,
    pub identity: &'a MemoryIdentity,
    /// When the call is made (epoch ms): the time a committed memory is written at.
    pub now_ms: i64,
}

/// Runs one call of a skald tool: `fetch_original_data` against `refs`, the memory tools and
/// `search_docs` against `memory` (none: memory is not on for the call). The one executor of
/// skald's tools, for [`Engine::run_tool`] and the turn loop.
pub(crate) async fn run_skald_tool(
    refs: &dyn RefStore,
    memory_enabled: bool,
    memory: Option<ToolMemory<'_>>,
    tenant: &Tenant,
    name: &str,
    arguments: &Value,
) -> ToolRun {
    let started = Instant::now();
    let not_enabled = || {
        (
            format!("{name}: memory is not enabled on this server"),
            true,
        )
    };
    let (text, is_error) = if name == FETCH_TOOL_NAME {
        let output = execute_fetch(refs, tenant, arguments);
        let failed = output.is_error();
        (output.text, failed)
    } else if name == SEARCH_DOCS_TOOL_NAME {
        match memory {
            Some(memory) => {
                let output = execute_search_docs(
                    memory.store,
                    memory.embedder,
                    tenant,
                    memory.identity,
                    arguments,
                )
                .await;
                (output.text, output.is_error)
            }
            None => not_enabled(),
        }
    } else if is_memory_tool(name) {
        match memory {
            Some(memory) => {
                let output = execute_memory_tool(
                    memory.store,
                    memory.embedder,
                    tenant,
                    memory.identity,
                    name,
                    arguments,
                    memory.now_ms,
                )
                .await;
                (output.text, output.is_error)
            }
            None => not_enabled(),
        }
    } else {
        let known: Vec<String> = skald_tool_specs(memory_enabled)
            .into_iter()
            .map(|s| s.name)
            .collect();
        (
            format!(
                "unknown tool {name:?}: skald's tools are {}",
                known.join(", ")
            ),
            true,
        )
    };
    let duration_ms = u64::try_from(started.elapsed().as_millis()).ok();
    let report = ToolCallReport::new(
        name.to_owned(),
        !is_error,
        duration_ms,
        is_error.then(|| text.chars().take(200).collect()),
    )
    .with_arguments(arguments);
    ToolRun {
        text,
        is_error,
        report,
    }
}
