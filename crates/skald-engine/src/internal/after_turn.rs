//! `after_turn`: what the engine learns when a host's turn is over (OpenClaw's `afterTurn`, the
//! engine API's `POST …/after-turn`), in one place.
//!
//! 1. The turn's messages, when the host sends them, are synced into the session
//!    ([`crate::ingest::sync_conversation`]: only what is new is appended).
//! 2. The provider's reported input tokens for the turn's last call feed the session's
//!    calibration ([`SessionState::observe_usage`]).
//! 3. With memory on: the turn's tool calls update the agent's tool statistics, and the
//!    two-threshold memory upload runs on the context's size (the host's figure when it gives
//!    one, else skald's estimate of the session's context).
//!
//! Memory failures never fail the turn: they are reported in [`AfterTurnOutcome::memory_errors`].

use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::usage::ToolCallReport;
use skald_core::message::Message;
use skald_core::tokens::estimate::estimate_messages_tokens;
use skald_store::memories::MemoryStore;
use skald_store::sessions::SessionStore;

use crate::ingest::{SyncOutcome, sync_conversation};
use crate::memory::{record_skill_uses, record_tool_reports, tool_reports_in};
use crate::memory_write::{UploadDriver, UploadStep};
use crate::{EngineError, SessionState, UsageObservation};
use skald_core::memory::skill_use::skill_uses_in;

/// What the host says about the finished turn.
#[derive(Debug, Clone, Copy)]
pub struct AfterTurn<'a> {
    /// The session's messages after the turn, when the host sends them.
    pub messages: Option<&'a [Message]>,
    /// How many of `messages` were there before the turn's prompt: the tool results after them
    /// are the turn's (when `tool_reports` is not given).
    pub pre_prompt_message_count: Option<usize>,
    /// The turn's tool calls as the host measured them (durations), instead of the ones read
    /// from the new messages.
    pub tool_reports: Option<&'a [ToolCallReport]>,
    /// The input tokens the provider reported for the turn's last call.
    pub reported_input_tokens: Option<u64>,
    /// The context's size as the host counts it.
    pub current_token_count: Option<u64>,
    /// The model's context window in tokens.
    pub window_tokens: u64,
    /// The session's source format, if the sync creates it.
    pub source_format: &'a str,
}

/// Long-term memory for [`Engine::after_turn`](crate::Engine::after_turn); `None` when memory is off.
#[derive(Clone, Copy)]
pub struct AfterTurnMemory<'a> {
    /// The memory store that receives the tool statistics and the upload's archives and memories.
    pub store: &'a dyn MemoryStore,
    /// The agent whose tool statistics the turn updates.
    pub agent: &'a str,
    /// The upload driver that runs the two-threshold upload for the session.
    pub uploads: &'a UploadDriver,
}

/// What [`Engine::after_turn`](crate::Engine::after_turn) did.
#[derive(Debug, Clone, Default)]
pub struct AfterTurnOutcome {
    /// The sync of the host's messages (when it sent them).
    pub sync: Option<SyncOutcome>,
    /// The provider's usage paired with skald's count of the last assembled view.
    pub calibration: Option<UsageObservation>,
    /// Tools whose statistics were updated.
    pub tool_memories: Vec<String>,
    /// Skills the turn used, whose memories (counts, issues) were updated.
    pub skill_memories: Vec<String>,
    /// What the two-threshold upload did (memory on and it ran).
    pub upload: Option<UploadStep>,
    /// Memory writes that failed; the turn is recorded without them.
    pub memory_errors: Vec<String>,
}

/// Records a finished turn (see the module docs). `Err` only when the session cannot be read or
/// written (an unknown session without messages to create it is `SessionError::NotFound`).
pub async fn after_turn(
    state: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    turn: &AfterTurn<'_>,
    memory: Option<AfterTurnMemory<'_>>,
) -> Result<AfterTurnOutcome, EngineError> {
    let mut outcome = AfterTurnOutcome::default();
    match turn.messages {
        Some(messages) => {
            outcome.sync = Some(sync_conversation(
                state,
                sessions,
                tenant,
                session_id,
                messages,
                turn.source_format,
            )?);
        }
        None => {
            sessions.get(tenant, session_id)?;
        }
    }
    let reported = turn.reported_input_tokens.filter(|tokens| *tokens > 0);
    if let Some(reported) = reported {
        outcome.calibration = state.observe_usage(reported);
    }
    let Some(memory) = memory else {
        return Ok(outcome);
    };
    let reports = match (
        turn.tool_reports,
        turn.messages,
        turn.pre_prompt_message_count,
    ) {
        (Some(reports), _, _) => reports.to_vec(),
        (None, Some(messages), Some(from)) => tool_reports_in(messages, from),
        (None, _, _) => Vec::new(),
    };
    if !reports.is_empty() {
        match record_tool_reports(memory.store, tenant, memory.agent, &reports) {
            Ok(update) => {
                outcome.tool_memories = update
                    .updated
                    .iter()
                    .map(|stats| stats.tool.clone())
                    .collect();
                outcome.memory_errors.extend(
                    update
                        .skipped
                        .into_iter()
                        .map(|(tool, why)| format!("tool {tool:?}: {why}")),
                );
            }
            Err(error) => outcome
                .memory_errors
                .push(format!("tool statistics: {error}")),
        }
    }
    if let (Some(messages), Some(from)) = (turn.messages, turn.pre_prompt_message_count) {
        let uses = skill_uses_in(messages, from);
        match record_skill_uses(memory.store, tenant, memory.agent, &uses) {
            Ok(skills) => outcome.skill_memories = skills,
            Err(error) => outcome
                .memory_errors
                .push(format!("skill memories: {error}")),
        }
    }
    let context_tokens = match reported.or(turn.current_token_count) {
        Some(tokens) => tokens,
        None => {
            let context = state.session_context(sessions, tenant, session_id)?;
            estimate_messages_tokens(&context)
        }
    };
    match memory
        .uploads
        .before_request(
            state,
            sessions,
            tenant,
            session_id,
            context_tokens,
            turn.window_tokens,
        )
        .await
    {
        Ok(step) => outcome.upload = Some(step),
        Err(error) => outcome
            .memory_errors
            .push(format!("memory upload: {error}")),
    }
    Ok(outcome)
}
