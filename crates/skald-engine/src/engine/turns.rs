//! The turn use cases of [`Engine`]: compaction ([`Engine::compact`]: compact, archive the
//! span, report), a finished turn ([`Engine::after_turn`]), the executor of skald's fetch tool
//! ([`Engine::fetch`]), and what a caller that sends the model calls itself (the proxy) needs
//! to drive a [`TurnLoop`](crate::TurnLoop): [`Engine::prepare_context`],
//! [`Engine::recall_hook`] and [`Engine::memory_hooks`]; and a call counted without a session
//! ([`Engine::prepare_detached`]: a token count of a request as skald would send it).

use serde_json::Value;
use skald_core::compaction::CompactionTrigger;
use skald_core::ids::{SessionId, Tenant};
use skald_core::refs::{RefId, RefPayload};
use skald_store::StoreError;
use tokio_util::sync::CancellationToken;

use super::Engine;
use crate::after_turn::{AfterTurn, AfterTurnMemory, AfterTurnOutcome, after_turn};
use crate::compact::{CompactRequest, Compaction, SpanArchive, compact_and_archive};
use crate::memory::MemoryIdentity;
use crate::{
    AssembleRequest, EngineError, FetchOutput, MemoryHooks, PrepareContext, RecallHook,
    RecoverySettings, SessionState, assemble, execute_fetch, function_spec,
};
use skald_core::memory::tools::tool_specs as memory_tool_specs;
use skald_core::message::Message;

/// A request prepared detached from any session ([`Engine::prepare_detached`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DetachedCall {
    /// The messages through the pipeline (the originals of anything offloaded stored first).
    pub messages: Vec<Message>,
    /// skald's addition to the system prompt (the REF_ID instruction), apart from the host's.
    pub system_addition: Option<String>,
    /// skald's tools the call would offer, as OpenAI function specs, none the host defined
    /// itself.
    pub skald_tools: Vec<Value>,
}

/// A manual or threshold compaction of a stored session.
#[derive(Debug, Clone)]
pub struct CompactInput {
    /// The model's context window (default: the engine's).
    pub window_tokens: Option<u64>,
    /// `Manual` compacts whatever the size; `Threshold` only when the context is over it.
    pub trigger: CompactionTrigger,
    /// Instructions given with this compaction.
    pub custom_instructions: Option<String>,
    /// The workspace's AGENTS.md, for the critical-rules appendix.
    pub agents_md: Option<String>,
    /// What the context really costs when the host knows it (provider-reported tokens).
    pub context_tokens: Option<u64>,
    /// Whether the replaced span is archived and its memories extracted (only when memory is
    /// on).
    pub archive: bool,
}

/// One model call a caller sends itself: everything [`PrepareContext`] needs that is the
/// call's, not the engine's.
#[derive(Debug, Clone, Copy)]
pub struct PrepareInput<'a> {
    /// Whose session.
    pub tenant: &'a Tenant,
    /// Which session.
    pub session: &'a SessionId,
    /// The model the requests go to, when known (calibration is per model).
    pub model: Option<&'a str>,
    /// The host's system prompt.
    pub system_prompt: Option<&'a str>,
    /// The host's tools as sent (counted in the request's size; a skald tool of the same name
    /// is not offered again).
    pub tools: &'a [Value],
    /// The host's prompt and tools in tokens when the caller knows them better than their
    /// characters tell (see [`PrepareContext::host_prefix_tokens`]).
    pub host_prefix_tokens: Option<u64>,
    /// Whether the caller runs `fetch_original_data`.
    pub fetch_available: bool,
    /// When the call is made (epoch ms).
    pub now_ms: i64,
    /// The workspace's AGENTS.md, for compaction's critical-rules appendix.
    pub agents_md: Option<&'a str>,
    /// How overflows are recovered from.
    pub settings: &'a RecoverySettings,
}

impl Engine {
    /// Compacts the session (see `compact_and_archive`): the summary checkpoint written, the
    /// session's state told, and — memory on and `archive` asked — the replaced span archived
    /// and its memories extracted. Cancelling `cancel` abandons the compaction with the session
    /// unchanged.
    pub async fn compact(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        input: &CompactInput,
        cancel: &CancellationToken,
    ) -> Result<Compaction, EngineError> {
        let config = self.config();
        let request = CompactRequest {
            tenant,
            session_id: session,
            window_tokens: input.window_tokens.unwrap_or(config.window_tokens),
            trigger: input.trigger,
            settings: &config.compaction,
            custom_instructions: input.custom_instructions.as_deref(),
            agents_md: input.agents_md.as_deref(),
            rules_files: &[],
            context_tokens: input.context_tokens,
        };
        let archive = (config.memory.enabled && input.archive).then_some(SpanArchive {
            writer: self.writer(),
            system_prompt: None,
        });
        let slot = self.slot(tenant, session);
        let mut state = slot.lock().await;
        let _row = self.row_scope(tenant, session);
        compact_and_archive(
            self.sessions(),
            self.refs(),
            config.summarizer.as_ref(),
            &request,
            archive,
            Some(&mut state),
            cancel,
        )
        .await
    }

    /// Records a finished turn (see `after_turn`): the host's messages synced, calibration
    /// against the provider's usage, tool statistics and the two-threshold upload (memory on).
    pub async fn after_turn(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        turn: &AfterTurn<'_>,
    ) -> Result<AfterTurnOutcome, EngineError> {
        let config = self.config();
        let memory = config.memory.enabled.then(|| AfterTurnMemory {
            store: self.memories(),
            agent: &config.memory.agent,
            uploads: self.uploads(),
        });
        let slot = self.slot(tenant, session);
        let mut state = slot.lock().await;
        let _row = self.row_scope(tenant, session);
        after_turn(&mut state, self.sessions(), tenant, session, turn, memory).await
    }

    /// Runs one `fetch_original_data` call with the model's JSON arguments, in `tenant`'s refs.
    pub fn fetch(&self, tenant: &Tenant, arguments: &Value) -> FetchOutput {
        execute_fetch(self.refs(), tenant, arguments)
    }

    /// One stored original, whole (the caller renders the slice it wants).
    pub fn read_ref(&self, tenant: &Tenant, id: &RefId) -> Result<RefPayload, StoreError> {
        self.refs().get(tenant, id.as_str())
    }

    /// A request as skald would send it, detached from any session: `conversation` through the
    /// pipeline (originals stored first, as for a call), skald's system prompt addition, and the
    /// tools it would offer beside the host's `host_tools` (the memory tools with `memory` on).
    /// Nothing of a session is read or written: a count is often of a text that is no
    /// conversation at all (Claude Code counts a file before reading it).
    pub fn prepare_detached(
        &self,
        tenant: &Tenant,
        model: Option<&str>,
        conversation: Vec<Message>,
        host_tools: &[Value],
        memory: bool,
        now_ms: i64,
    ) -> Result<DetachedCall, EngineError> {
        let mut detached = SessionState::default();
        let assembled = assemble(
            self.refs(),
            &self.config().policy,
            &mut detached,
            conversation,
            AssembleRequest {
                tenant,
                context_window_tokens: self.window_for(model),
                now_ms,
                fetch_available: true,
                host_prefix_tokens: 0,
            },
        )?;
        let mut skald_tools: Vec<Value> = assembled.tools.iter().map(function_spec).collect();
        if memory {
            skald_tools.extend(memory_tool_specs().iter().map(function_spec));
        }
        let host_names: Vec<&str> = host_tools
            .iter()
            .filter_map(|tool| {
                tool.get("function")
                    .unwrap_or(tool)
                    .get("name")
                    .and_then(Value::as_str)
            })
            .collect();
        skald_tools.retain(|tool| {
            tool.pointer("/function/name")
                .and_then(Value::as_str)
                .is_none_or(|name| !host_names.contains(&name))
        });
        Ok(DetachedCall {
            messages: assembled.messages,
            system_addition: assembled.system_prompt_addition,
            skald_tools,
        })
    }

    /// What preparing the calls of `input` needs: the call's own settings and the engine's
    /// stores, policy, compaction settings, window and summarizer.
    pub fn prepare_context<'a>(&'a self, input: PrepareInput<'a>) -> PrepareContext<'a> {
        let config = self.config();
        PrepareContext {
            window_tokens: self.window_for(input.model),
            model: input.model,
            sessions: self.sessions(),
            refs: self.refs(),
            tenant: input.tenant,
            session_id: input.session,
            summarizer: config.summarizer.as_ref(),
            policy: &config.policy,
            compaction: &config.compaction,
            system_prompt: input.system_prompt,
            tools: input.tools,
            host_prefix_tokens: input.host_prefix_tokens,
            fetch_available: input.fetch_available,
            now_ms: input.now_ms,
            agents_md: input.agents_md,
            settings: input.settings,
        }
    }

    /// Recall over `identity`'s memories with the configured settings and embedder.
    /// `simulated_calls`: see [`RecallHook::simulated_calls`].
    pub fn recall_hook<'a>(
        &'a self,
        identity: &'a MemoryIdentity,
        offer_tools: bool,
        simulated_calls: bool,
    ) -> RecallHook<'a> {
        let config = self.config();
        RecallHook {
            store: self.memories(),
            embedder: config.embedder.as_deref(),
            identity,
            settings: &config.memory.recall,
            offer_tools,
            simulated_calls,
        }
    }

    /// What memory does around a turn's calls when `on`: the engine's writer archives the span
    /// of every compaction, the upload driver runs before the first call, and `recall` is what
    /// the model is given.
    pub fn memory_hooks<'a>(
        &'a self,
        on: bool,
        recall: Option<&'a RecallHook<'a>>,
    ) -> MemoryHooks<'a> {
        MemoryHooks {
            writer: on.then_some(self.writer()),
            uploads: on.then_some(self.uploads().as_ref()),
            recall,
        }
    }
}
