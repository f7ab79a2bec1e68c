//! [`TurnLoop`]: one request's model calls, from the first prepared call to the answer the
//! client gets, as a state machine the caller drives with the I/O it does itself (encoding a
//! call in its wire API, sending it, reading the answer, streaming it to its client).
//!
//! The caller asks for the next call ([`TurnLoop::prepare`]), sends it, and tells the loop what
//! came back: a failed call ([`TurnLoop::on_failed_call`]) or an answer, read whole
//! ([`TurnLoop::on_whole_answer`]) or streamed ([`TurnLoop::on_streamed_answer`]). The loop
//! decides what happens next and does the session's part of it: it feeds the provider's usage to
//! calibration, recovers from an overflow (compaction, else the persistent truncation), runs
//! skald's own tool calls and records them as a hidden round, and says whether to send again or
//! give the client the answer. The round cap ([`MAX_TOOL_ROUNDS`]) lives here, so every path
//! that makes model calls for a session stops at the same place.

use std::collections::HashSet;

use skald_core::memory::usage::ToolCallReport;
use skald_core::message::{
    Block, ContentForm, Extra, Message, MessageMeta, Role, StopReason, ToolCall, ToolResult,
};
use skald_llm::LlmError;
use tokio_util::sync::CancellationToken;

use super::tools::{ToolMemory, run_skald_tool};
use super::turn::note_write;
use crate::recovery::{
    CallSize, MemoryHooks, OverflowSource, PrepareContext, RecoveryAction, RecoveryError,
    RecoveryReport, TurnDriver,
};
use crate::{EngineError, PreparedCall, SessionState, ingest};

/// Model calls one request may make to answer skald's own tool calls before the answer goes to
/// the client as it is (without those calls).
pub const MAX_TOOL_ROUNDS: u32 = 8;

/// The names of the skald tools one call offered: the calls a caller holds back from its client
/// (a stream) or takes out of the answer (a whole one). A tool the client defined itself is
/// never among them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkaldTools {
    names: HashSet<String>,
}

impl SkaldTools {
    /// The tools named `names`.
    pub fn new(names: impl IntoIterator<Item = String>) -> SkaldTools {
        SkaldTools {
            names: names.into_iter().collect(),
        }
    }

    /// Whether a call of `name` is skald's to run.
    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Whether the call offered none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// What to do after a call the provider refused.
#[derive(Debug)]
pub enum FailedCall {
    /// Not an overflow: the client gets the provider's error as it came (end the turn with
    /// [`TurnLoop::failed`] when it is the caller's own).
    PassOn(LlmError),
    /// An overflow the session was made smaller for (or the call had just been compacted):
    /// prepare and send again.
    Retry(RecoveryAction),
    /// An overflow recovery could not get under, or skald's own failure while recovering.
    GaveUp(RecoveryError),
}

/// What to do after an answer read whole.
#[derive(Debug)]
pub enum WholeAnswer {
    /// The answer is the client's. `skald_calls_ran`: skald's calls in it were run and recorded;
    /// the client gets it without them ([`TurnLoop::skald_tools`] names them).
    Final {
        /// skald's calls the answer made (run, recorded, to be taken out of what the client gets).
        skald_calls_ran: usize,
    },
    /// The answer called only skald's tools: they were run and recorded as a hidden round, and
    /// the client never sees this answer: prepare and send again.
    Continue {
        /// skald's calls run.
        skald_calls_ran: usize,
    },
    /// The answer was an overflow (an assistant error) and the session was made smaller:
    /// prepare and send again.
    Retry(RecoveryAction),
    /// The answer was an overflow recovery could not get under: the client gets it as it came.
    GaveUp(RecoveryError),
}

/// What to do after an answer streamed to the client (it saw the answer as it arrived, so an
/// overflow in it cannot be taken back and retried).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamedAnswer {
    /// The answer is the client's: end its stream.
    Final {
        /// skald's calls the answer made (held back from the client, run and recorded).
        skald_calls_ran: usize,
    },
    /// The answer called only skald's tools (run and recorded): continue the same client stream
    /// with the next call.
    Continue {
        /// skald's calls run.
        skald_calls_ran: usize,
    },
}

/// A streamed answer as the caller's stream rewriter collected it.
#[derive(Debug, Clone, Default)]
pub struct StreamedRound {
    /// What the answer said besides tool calls, in order: text, thinking, opaque blocks.
    pub content: Vec<Block>,
    /// skald's calls, held back from the client.
    pub skald_calls: Vec<ToolCall>,
    /// Calls of the client's own tools the client was streamed.
    pub client_calls: usize,
    /// What the provider reported for the call.
    pub usage: Option<skald_core::message::Usage>,
}

/// One request's model calls (see the module docs). Built by the caller over the
/// [`PrepareContext`] and [`MemoryHooks`] of its turn ([`Engine::prepare_context`],
/// [`Engine::memory_hooks`]); its methods take the session's state the caller holds (a
/// [`Turn`](super::Turn) dereferences to it).
///
/// [`Engine::prepare_context`]: super::Engine::prepare_context
/// [`Engine::memory_hooks`]: super::Engine::memory_hooks
pub struct TurnLoop<'c> {
    ctx: &'c PrepareContext<'c>,
    memory: MemoryHooks<'c>,
    driver: TurnDriver<'c>,
    /// Hidden rounds run so far.
    rounds: u32,
    /// The skald tools the last prepared call offered.
    offered: SkaldTools,
    /// The size of the last prepared call, which recovery from its overflow plans with.
    last_call: Option<CallSize>,
}

impl std::fmt::Debug for TurnLoop<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnLoop")
            .field("tenant", &self.ctx.tenant)
            .field("session", &self.ctx.session_id)
            .field("rounds", &self.rounds)
            .field("offered", &self.offered)
            .finish_non_exhaustive()
    }
}

impl<'c> TurnLoop<'c> {
    /// The loop of one request: `prepare` and `memory` as for a [`TurnDriver`]. With a recall
    /// hook, skald's memory tools work on its store for its identity, and the tool statistics
    /// are kept. Refuses recovery settings that cannot work.
    pub fn new(
        prepare: &'c PrepareContext<'c>,
        memory: MemoryHooks<'c>,
    ) -> Result<TurnLoop<'c>, RecoveryError> {
        Ok(TurnLoop {
            ctx: prepare,
            memory,
            driver: TurnDriver::new(prepare, memory)?,
            rounds: 0,
            offered: SkaldTools::default(),
            last_call: None,
        })
    }

    /// The next model call (see [`TurnDriver::prepare`]); every call of the request counts
    /// towards the recovery's `max_iterations`.
    pub async fn prepare(
        &mut self,
        state: &mut SessionState,
        cancel: &CancellationToken,
    ) -> Result<PreparedCall, RecoveryError> {
        let call = self.driver.prepare(state, cancel).await?;
        self.offered = SkaldTools::new(call.offered_tools.iter().map(|tool| tool.name.clone()));
        self.last_call = Some(call.size());
        Ok(call)
    }

    /// The skald tools the last prepared call offered.
    pub fn skald_tools(&self) -> &SkaldTools {
        &self.offered
    }

    /// What recovery did so far (compactions, the upload step, overflows).
    pub fn report(&self) -> &RecoveryReport {
        self.driver.report()
    }

    /// The provider refused the last prepared call with `error`: an overflow is recovered from
    /// (seed 003 §4), anything else goes back to the client.
    pub async fn on_failed_call(
        &mut self,
        state: &mut SessionState,
        error: LlmError,
        cancel: &CancellationToken,
    ) -> FailedCall {
        if !error.is_context_overflow() {
            return FailedCall::PassOn(error);
        }
        match self
            .recover(state, error, OverflowSource::PromptError, cancel)
            .await
        {
            Ok(action) => FailedCall::Retry(action),
            Err(error) => FailedCall::GaveUp(error),
        }
    }

    /// The last prepared call's answer, read whole: its usage fed back, an overflow recovered
    /// from, skald's calls run and recorded. `Err` is a failure to record skald's round.
    pub async fn on_whole_answer(
        &mut self,
        state: &mut SessionState,
        answer: &Message,
        cancel: &CancellationToken,
    ) -> Result<WholeAnswer, EngineError> {
        let (skald_calls, client_calls) = self.partition(answer);
        observe(state, answer, &skald_calls);
        if let Some(error) = skald_llm::overflow::assistant_error_overflow(answer) {
            return Ok(
                match self
                    .recover(state, error, OverflowSource::AssistantError, cancel)
                    .await
                {
                    Ok(action) => WholeAnswer::Retry(action),
                    Err(error) => WholeAnswer::GaveUp(error),
                },
            );
        }
        let ran = skald_calls.len();
        Ok(
            match self
                .run_round(state, answer, skald_calls, client_calls)
                .await?
            {
                Round::None => WholeAnswer::Final { skald_calls_ran: 0 },
                Round::Continue => WholeAnswer::Continue {
                    skald_calls_ran: ran,
                },
                Round::Final => WholeAnswer::Final {
                    skald_calls_ran: ran,
                },
            },
        )
    }

    /// The last prepared call's answer, streamed to the client as it came: its usage fed back,
    /// skald's calls (held back from the client) run and recorded. `Err` is a failure to record
    /// skald's round.
    pub async fn on_streamed_answer(
        &mut self,
        state: &mut SessionState,
        round: StreamedRound,
    ) -> Result<StreamedAnswer, EngineError> {
        let mut said = Message::new(Role::Assistant, round.content);
        said.meta.usage = round.usage;
        // What the client was streamed: the round's text and thinking (its own calls went to it
        // as they came, skald's were held back).
        observe(state, &said, &[]);
        let ran = round.skald_calls.len();
        Ok(
            match self
                .run_round(state, &said, round.skald_calls, round.client_calls)
                .await?
            {
                Round::None | Round::Final => StreamedAnswer::Final {
                    skald_calls_ran: ran,
                },
                Round::Continue => StreamedAnswer::Continue {
                    skald_calls_ran: ran,
                },
            },
        )
    }

    /// skald's and the client's calls of `answer`.
    fn partition(&self, answer: &Message) -> (Vec<ToolCall>, usize) {
        let mut skald = Vec::new();
        let mut client = 0;
        for call in answer.tool_calls() {
            if self.offered.contains(&call.name) {
                skald.push(call.clone());
            } else {
                client += 1;
            }
        }
        (skald, client)
    }

    /// Runs skald's calls of one answer and records them with what the answer said as a hidden
    /// round: the model's next call sees them, the client's next sync skips them.
    async fn run_round(
        &mut self,
        state: &mut SessionState,
        answer: &Message,
        skald_calls: Vec<ToolCall>,
        client_calls: usize,
    ) -> Result<Round, EngineError> {
        if skald_calls.is_empty() {
            return Ok(Round::None);
        }
        let mut messages = Vec::with_capacity(skald_calls.len() + 1);
        messages.push(hidden_assistant(answer, &skald_calls));
        let mut reports = Vec::with_capacity(skald_calls.len());
        for call in &skald_calls {
            let (result, report) = self.run_call(call).await;
            messages.push(result);
            reports.push(report);
        }
        let ctx = self.ctx;
        ingest::append_hidden(state, ctx.sessions, ctx.tenant, ctx.session_id, messages)?;
        note_write(state, ctx.sessions, ctx.tenant, ctx.session_id)?;
        self.record_tool_statistics(&reports);
        self.rounds += 1;
        // The client's tools too, or no rounds left: the client gets the answer without skald's
        // calls. Its text and thinking come back in the client's next request, but the model's
        // next call needs this turn's thinking before skald's results now, so the hidden round
        // holds them too.
        Ok(if client_calls == 0 && self.rounds < MAX_TOOL_ROUNDS {
            Round::Continue
        } else {
            Round::Final
        })
    }

    /// One skald call, run by the engine's one executor of skald's tools.
    async fn run_call(&self, call: &ToolCall) -> (Message, ToolCallReport) {
        let memory = self.memory.recall.map(|recall| ToolMemory {
            store: recall.store,
            embedder: recall.embedder,
            identity: recall.identity,
            now_ms: self.ctx.now_ms,
        });
        let run = run_skald_tool(
            self.ctx.refs,
            memory.is_some(),
            memory,
            self.ctx.tenant,
            &call.name,
            &call.arguments,
        )
        .await;
        let result = Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: call.id.clone(),
                tool_name: Some(call.name.clone()),
                content: vec![Block::text(run.text)].into(),
                content_form: ContentForm::Text,
                is_error: run.is_error.then_some(true),
                details: None,
                extra: Extra::new(),
            })],
        );
        (result, run.report)
    }

    /// Adds `reports` to the agent's tool statistics (memory on); a failure to record them is
    /// logged, never the request's.
    fn record_tool_statistics(&self, reports: &[ToolCallReport]) {
        let Some(recall) = self.memory.recall else {
            return;
        };
        if reports.is_empty() {
            return;
        }
        if let Err(error) = crate::memory::record_tool_reports(
            recall.store,
            self.ctx.tenant,
            recall.identity.agent(),
            reports,
        ) {
            tracing::warn!(%error, "recording tool statistics failed");
        }
    }

    /// Ends the turn on a provider failure that is not an overflow (see [`TurnDriver::failed`]).
    pub fn failed(self, error: LlmError) -> RecoveryError {
        self.driver.failed(error)
    }

    /// Ends the turn because the caller cancelled.
    pub fn aborted(self) -> RecoveryError {
        self.driver.aborted()
    }

    /// What recovery did during the turn.
    pub fn into_report(self) -> RecoveryReport {
        self.driver.into_report()
    }

    async fn recover(
        &mut self,
        state: &mut SessionState,
        error: LlmError,
        source: OverflowSource,
        cancel: &CancellationToken,
    ) -> Result<RecoveryAction, RecoveryError> {
        let size = self.last_call.unwrap_or(CallSize {
            request_tokens: 0,
            message_tokens: 0,
        });
        self.driver
            .recover(state, size, error, source, cancel)
            .await
    }
}

/// What a round of skald's calls leads to.
enum Round {
    /// The answer called none of skald's tools.
    None,
    /// Only skald's: send again.
    Continue,
    /// The client's too, or the round cap reached.
    Final,
}

/// Feeds the provider's count of the call to calibration and remembers the answer's usage for
/// the message the client will send back (the answer as the client gets it: without skald's
/// calls).
fn observe(state: &mut SessionState, answer: &Message, skald_calls: &[ToolCall]) {
    if let Some(usage) = answer.meta.usage {
        state.observe_usage(usage.total_input());
    }
    if skald_calls.is_empty() {
        state.remember_answer_usage(answer);
        return;
    }
    let mut seen = answer.clone();
    seen.content.retain(|block| match block {
        Block::ToolCall(call) => !skald_calls.iter().any(|skald| skald.id == call.id),
        Block::Text(_)
        | Block::Image(_)
        | Block::Thinking(_)
        | Block::ToolResult(_)
        | Block::Opaque(_) => true,
    });
    state.remember_answer_usage(&seen);
}

/// An assistant message for the session holding `calls` after what the answer said (its text,
/// thinking and opaque blocks such as reasoning items): built from the typed parts only, so no
/// field of the provider's response envelope ends up in a later request.
pub fn hidden_assistant(answer: &Message, calls: &[ToolCall]) -> Message {
    let mut content: Vec<Block> = Vec::new();
    for block in &answer.content {
        match block {
            Block::Text(text) if !text.text.is_empty() => {
                content.push(Block::text(text.text.clone()))
            }
            Block::Thinking(thinking) => content.push(Block::Thinking(thinking.clone())),
            // Redacted thinking, a Responses reasoning item (its encrypted content is what lets
            // a stateless client's reasoning model go on), a server tool's block.
            Block::Opaque(value) => content.push(Block::Opaque(value.clone())),
            Block::Text(_) | Block::Image(_) | Block::ToolCall(_) | Block::ToolResult(_) => {}
        }
    }
    for call in calls {
        content.push(Block::ToolCall(ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            arguments_text: call.arguments_text.clone(),
            extra: Extra::new(),
        }));
    }
    Message {
        meta: MessageMeta {
            stop_reason: Some(StopReason::ToolUse),
            ..MessageMeta::default()
        },
        ..Message::new(Role::Assistant, content)
    }
}
