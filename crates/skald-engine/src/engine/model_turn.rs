//! [`Engine::complete_turn`]: a turn whose model calls the engine makes itself, with a
//! [`ChatModel`] the caller hands it — the library's one call for an agent that keeps its own
//! loop and wants skald to decide what the model sees. It drives the same [`TurnLoop`] the proxy
//! drives with its own I/O: the threshold compaction, overflow recovery (seed 003 §4), skald's
//! own tool calls run as hidden rounds, usage fed to calibration, and with memory on the
//! two-threshold upload, the archive of every compacted span and recall. The answer is appended
//! to the session as a child of its leaf (after skald's rounds, without skald's calls).

use serde_json::Value;
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::Block;
use skald_llm::ChatModel;
use tokio_util::sync::CancellationToken;

use super::turn_loop::{FailedCall, TurnLoop, WholeAnswer};
use super::{Engine, PrepareInput};
use crate::memory::MemoryIdentity;
use crate::recovery::{RecoveryError, RecoverySettings, TurnOutcome};

/// One turn the engine makes the model calls of ([`Engine::complete_turn`]). The policy, the
/// compaction settings, the window and the summarizer are the engine's.
#[derive(Clone, Copy)]
pub struct ModelTurn<'a> {
    /// The model answering the turn.
    pub model: &'a dyn ChatModel,
    /// The host's system prompt (skald's additions are appended to it).
    pub system_prompt: Option<&'a str>,
    /// The host's tools as OpenAI function specs (skald adds `fetch_original_data` once refs
    /// exist and `fetch_available`, and the memory tools with memory on).
    pub tools: &'a [Value],
    /// The answer's output limit; `None` leaves it to the provider configuration's.
    pub max_output_tokens: Option<u32>,
    /// The sampling temperature; `None` leaves it to the provider's default.
    pub temperature: Option<f32>,
    /// Whether skald's `fetch_original_data` may be offered; without it nothing is offloaded.
    pub fetch_available: bool,
    /// When the turn is made (epoch ms), for the prompt-cache clocks.
    pub now_ms: i64,
    /// The workspace's AGENTS.md, for the summary's critical-rules appendix.
    pub agents_md: Option<&'a str>,
    /// How many overflow compactions and model calls the turn may make.
    pub settings: &'a RecoverySettings,
    /// Long-term memory around the turn, for this identity: the upload before the first call,
    /// the archive of every compacted span, recall and the memory tools. `None`: memory off.
    pub memory: Option<&'a MemoryIdentity>,
}

impl std::fmt::Debug for ModelTurn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelTurn")
            .field("model", &self.model.model_name())
            .field("tools", &self.tools.len())
            .field("fetch_available", &self.fetch_available)
            .field("memory", &self.memory)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Makes the model calls of one turn for the session's current context with `input.model`
    /// and appends the answer (see the module docs). The session is held for the whole turn. An
    /// overflow nothing could recover from is [`RecoveryError::ContextOverflow`] (the seed's
    /// message); every other provider error comes back as it is, and nothing the user gave is
    /// lost either way.
    pub async fn complete_turn(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        input: ModelTurn<'_>,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, RecoveryError> {
        let mut turn = self.begin_turn(tenant, session).await;
        let prepare = self.prepare_context(PrepareInput {
            tenant,
            session,
            model: Some(input.model.model_name()),
            system_prompt: input.system_prompt,
            tools: input.tools,
            host_prefix_tokens: None,
            fetch_available: input.fetch_available,
            now_ms: input.now_ms,
            agents_md: input.agents_md,
            settings: input.settings,
        });
        let recall = input
            .memory
            .map(|identity| self.recall_hook(identity, true, true));
        let hooks = self.memory_hooks(input.memory.is_some(), recall.as_ref());
        let mut calls = TurnLoop::new(&prepare, hooks)?;
        loop {
            let call = calls.prepare(&mut turn, cancel).await?;
            let mut request = call.into_request(input.tools);
            request.max_output_tokens = input.max_output_tokens;
            request.temperature = input.temperature;
            let mut response = match input.model.complete(&request, cancel).await {
                Ok(response) => response,
                Err(error) => match calls.on_failed_call(&mut turn, error, cancel).await {
                    FailedCall::PassOn(error) => return Err(calls.failed(error)),
                    FailedCall::Retry(_) => continue,
                    FailedCall::GaveUp(error) => return Err(error),
                },
            };
            drop(request);
            if cancel.is_cancelled() && response.overflow_error().is_none() {
                return Err(calls.aborted());
            }
            match calls
                .on_whole_answer(&mut turn, &response.message, cancel)
                .await?
            {
                WholeAnswer::Final { skald_calls_ran } => {
                    if skald_calls_ran > 0 {
                        // skald's calls are in the session as the hidden round before this
                        // answer.
                        let skald = calls.skald_tools();
                        response.message.content.retain(|block| match block {
                            Block::ToolCall(call) => !skald.contains(&call.name),
                            Block::Text(_)
                            | Block::Image(_)
                            | Block::Thinking(_)
                            | Block::ToolResult(_)
                            | Block::Opaque(_) => true,
                        });
                    }
                    let entry = self.sessions().append_message(
                        tenant,
                        session,
                        response.message.clone(),
                    )?;
                    return Ok(TurnOutcome {
                        response,
                        entry_id: entry.id,
                        recovery: calls.into_report(),
                    });
                }
                WholeAnswer::Continue { .. } | WholeAnswer::Retry(_) => {}
                WholeAnswer::GaveUp(error) => return Err(error),
            }
        }
    }
}
