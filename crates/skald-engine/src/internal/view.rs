//! The model's view of a stored session for one call: the context rebuilt from the session's
//! leaf ([`session_context`](skald_core::session::session_context), only when the session changed since the state's
//! last view), skill memories appended to `SKILL.md` reads, the policy's pipeline
//! ([`assemble`], refs stored first), then what long-term memory gives the call — the
//! session-start snapshot (profile and tool memories for the system prompt, the `memory_ls`
//! listing), the turn's recall and the memory tools. [`prepare_view`] is the one place that
//! builds it: `Engine::complete_turn`, the server's engine API and its proxy all send what it returns.
//!
//! Nothing here is stored in the session: injected memory and appended skill memories exist for
//! the call only. Decisions that shape the bytes of a request are kept in the [`SessionState`]
//! (offloads, the session-start snapshot, each skill read's appendix), so a later call repeats
//! them and the provider's prompt cache keeps its prefix.

use std::sync::LazyLock;

use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::recall::{
    KeepTerms, KeptRecallReport, Placement, RecallSettings, simulated_calls_as_text,
};
use skald_core::memory::tools::tool_specs as memory_tool_specs;
use skald_core::message::{Message, Role, ToolSpec};
use skald_core::pipeline::policy::{OffloadSchedule, Policy};
use skald_core::pipeline::schedule::expected_remaining_calls;
use skald_core::tokens::estimate::estimate_messages_chars;
use skald_core::tokens::{CHARS_PER_TOKEN, estimate_string_chars};
use skald_llm::Embedder;
use skald_store::MemoryStore;
use skald_store::RefStore;
use skald_store::sessions::SessionStore;

use crate::EngineError;
use crate::assemble::{AssembleReport, AssembleRequest, assemble, estimate_with_memo};
use crate::memory::{
    MemoryIdentity, RecallReport, SessionMemoryReport, SkillAugmentation, augment_skill_reads_with,
    recall_injection_memo, session_start_memory,
};
use crate::session::SessionState;

/// The memory tools, built once: every call of a session with recall offers them.
static MEMORY_TOOL_SPECS: LazyLock<Vec<ToolSpec>> = LazyLock::new(memory_tool_specs);

/// Skill-read decisions kept per session at most; past it they are forgotten (a read seen
/// again is decided again).
const MAX_SKILL_DECISIONS: usize = 10_000;

/// Recall on every model call: the session-start snapshot (profile and tool memories in the
/// system prompt, the `memory_ls` listing after the first user message; taken once per
/// [`SessionState`] so the prompt cache holds), skill memories on `SKILL.md` reads, and the
/// per-turn `search_memories` injection, which later calls send again where it went (see
/// [`skald_core::memory::recall::KeptRecalls`]). The session never stores injected messages.
#[derive(Clone, Copy)]
pub struct RecallHook<'a> {
    /// The memory store recall, the session-start snapshot and skill memories read from.
    pub store: &'a dyn MemoryStore,
    /// Vectors for the query when the memories have them; text search alone without one.
    pub embedder: Option<&'a dyn Embedder>,
    /// The user and agent of the session: only what they may see is recalled or listed.
    pub identity: &'a MemoryIdentity,
    /// What recall and the session-start injection include, and their budgets.
    pub settings: &'a RecallSettings,
    /// Offer the five memory tools to the model (the host must then run them, e.g. with
    /// [`Engine::memory_tool`](crate::Engine::memory_tool)).
    pub offer_tools: bool,
    /// Inject recall and the session-start listing as simulated tool calls (seed 002's form).
    /// `false` gives them as user text instead
    /// ([`skald_core::memory::recall::simulated_calls_as_text`]): a request with Anthropic's
    /// extended thinking on refuses a tool call the model did not sign.
    pub simulated_calls: bool,
}

/// Which session to view, and how.
#[derive(Clone, Copy)]
pub struct ViewRequest<'a> {
    /// The session store the session is read from.
    pub sessions: &'a dyn SessionStore,
    /// The ref store the originals of what the pipeline takes out are written to before the view is
    /// returned.
    pub refs: &'a dyn RefStore,
    /// The tenant of the session and of the refs and memories read; nothing of another tenant is
    /// read.
    pub tenant: &'a Tenant,
    /// The session to view: its context is rebuilt from the current leaf.
    pub session_id: &'a SessionId,
    /// The pipeline to run over the context.
    pub policy: &'a Policy,
    /// The model's context window in tokens.
    pub window_tokens: u64,
    /// When the call is made (epoch ms), for the prompt-cache clocks.
    pub now_ms: i64,
    /// Whether the host runs `fetch_original_data` (see [`AssembleRequest::fetch_available`]).
    pub fetch_available: bool,
    /// Estimated tokens of the host's system prompt and tools (see
    /// [`AssembleRequest::host_prefix_tokens`]); 0 when unknown.
    pub host_prefix_tokens: u64,
    /// Long-term memory for the call; `None`: none.
    pub memory: Option<&'a RecallHook<'a>>,
    /// The user's prompt when the host sends it after the view (OpenClaw's `assemble` gets it
    /// apart from the messages): recall searches with it. It is not in the returned messages.
    pub pending_prompt: Option<&'a str>,
}

/// What memory added to a view.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemoryViewReport {
    /// What the session-start snapshot holds (taken at the session's first view, then repeated).
    pub session_start: SessionMemoryReport,
    /// What this call's recall searched for, kept and dropped.
    pub recall: RecallReport,
    /// Earlier turns' recalls sent again where they were injected, and those that left.
    pub kept_recalls: KeptRecallReport,
    /// `SKILL.md` reads that got (or would have got) a skill memory.
    pub skills: Vec<SkillAugmentation>,
}

/// A session's context, ready to send.
#[derive(Debug, Clone)]
pub struct ModelView {
    /// The messages, memory's injections included.
    pub messages: Vec<Message>,
    /// What the pipeline adds to the system prompt (the REF_ID instruction once the session has
    /// refs).
    pub pipeline_addition: Option<String>,
    /// What memory adds to the system prompt (the profile and tool memory sections).
    pub memory_addition: Option<String>,
    /// skald's tools for the request: `fetch_original_data` once the session has refs (and the
    /// host runs it), then the memory tools when the hook offers them.
    pub tools: Vec<ToolSpec>,
    /// Estimated tokens of the session's context before the pipeline.
    pub tokens_before: u64,
    /// Estimated tokens of the pipeline's messages, before memory's injections.
    pub message_tokens: u64,
    /// Estimator characters memory added outside recall: its system prompt sections and the
    /// directory listing.
    pub memory_chars: usize,
    /// Estimated tokens of the recalled memories: this turn's and the earlier turns' kept.
    pub recall_tokens: u64,
    /// What each pipeline stage did to the context.
    pub report: AssembleReport,
    /// `None` without a memory hook.
    pub memory: Option<MemoryViewReport>,
}

impl ModelView {
    /// Both additions, the pipeline's first, separated by a blank line.
    pub fn system_prompt_addition(&self) -> Option<String> {
        match (&self.pipeline_addition, &self.memory_addition) {
            (Some(pipeline), Some(memory)) => Some(format!("{pipeline}\n\n{memory}")),
            (Some(one), None) | (None, Some(one)) => Some(one.clone()),
            (None, None) => None,
        }
    }

    /// Estimated tokens of the messages and the system prompt addition (tools excluded).
    pub fn estimated_tokens(&self) -> u64 {
        let pipeline_chars = self
            .pipeline_addition
            .as_deref()
            .map_or(0, estimate_string_chars);
        let added = (pipeline_chars + self.memory_chars).div_ceil(CHARS_PER_TOKEN) as u64;
        self.message_tokens + added + self.recall_tokens
    }

    /// Estimated tokens the pipeline took out of the session's context.
    pub fn tokens_saved(&self) -> u64 {
        self.tokens_before.saturating_sub(self.message_tokens)
    }
}

/// Builds the model's view of the stored session (see the module docs). Fails only when the
/// session cannot be read or the ref store cannot keep an original (then no placeholder naming
/// it is handed out); memory failures are reported in [`MemoryViewReport`] and leave their part
/// out.
pub async fn prepare_view(
    request: &ViewRequest<'_>,
    state: &mut SessionState,
) -> Result<ModelView, EngineError> {
    let mut messages =
        state.session_context(request.sessions, request.tenant, request.session_id)?;
    let mut memory_report = request.memory.map(|_| MemoryViewReport::default());
    if let (Some(hook), Some(report)) = (request.memory, memory_report.as_mut()) {
        if state.skill_memories.len() > MAX_SKILL_DECISIONS {
            state.skill_memories.clear();
        }
        report.skills = augment_skill_reads_with(
            hook.store,
            request.tenant,
            hook.identity,
            &mut messages,
            &mut state.skill_memories,
        );
    }
    let tokens_before = estimate_with_memo(&mut state.estimates, &messages);
    // Before the pipeline restarts the clock: whether this request finds the cache warm.
    let cache_warm = state.cache_warm_at(request.now_ms, request.policy.cache_ttl_ms);
    let assembled = assemble(
        request.refs,
        request.policy,
        state,
        messages,
        AssembleRequest {
            tenant: request.tenant,
            context_window_tokens: request.window_tokens,
            now_ms: request.now_ms,
            fetch_available: request.fetch_available,
            host_prefix_tokens: request.host_prefix_tokens,
        },
    )?;
    // Kept until the answer to this request is stored (see `SessionState::pending_assemble`).
    state.pending_assemble = Some(assembled.report.record(
        &assembled.messages,
        tokens_before,
        assembled.estimated_tokens,
    ));
    let mut view = ModelView {
        messages: assembled.messages,
        pipeline_addition: assembled.system_prompt_addition,
        memory_addition: None,
        tools: assembled.tools,
        tokens_before,
        message_tokens: assembled.estimated_tokens,
        memory_chars: 0,
        recall_tokens: 0,
        report: assembled.report,
        memory: None,
    };
    let (Some(hook), Some(mut report)) = (request.memory, memory_report) else {
        return Ok(view);
    };
    let session_memory = state.session_memory.get_or_insert_with(|| {
        session_start_memory(hook.store, request.tenant, hook.identity, hook.settings)
    });
    if let Some(addition) = &session_memory.system_prompt_addition {
        view.memory_chars += estimate_string_chars(addition);
        view.memory_addition = Some(addition.clone());
    }
    view.memory_chars += estimate_messages_chars(&session_memory.directory_messages);
    report.session_start = session_memory.report.clone();
    let mut messages = std::mem::take(&mut view.messages);
    let prompt = request
        .pending_prompt
        .filter(|prompt| !prompt.trim().is_empty())
        .map(|prompt| Message::text(Role::User, prompt));
    if let Some(prompt) = &prompt {
        messages.push(prompt.clone());
    }
    let messages = session_memory.apply(messages);
    let (injection, recall) = recall_injection_memo(
        &mut state.recall_memo,
        hook.store,
        hook.embedder,
        request.tenant,
        hook.identity,
        hook.settings,
        &messages,
    )
    .await;
    // A pending prompt is sent after the view: its recall goes before it, where the model reads
    // it, and stays there once the host stores the prompt.
    let placement = match prompt {
        Some(_) => Placement::BeforeAnchor,
        None => Placement::AfterAnchor,
    };
    let terms = KeepTerms {
        cache_warm,
        max_kept_tokens: hook.settings.max_kept_tokens,
        prices: request.policy.prices,
        expected_remaining_calls: expected_remaining_calls(
            state.requests_assembled,
            remaining_calls_ratio(request.policy),
        ),
    };
    let (messages, kept) = state.kept_recalls.place(
        messages,
        placement,
        injection,
        recall.tokens_injected,
        &terms,
    );
    view.messages = messages;
    if let Some(prompt) = &prompt {
        if let Some(at) = view.messages.iter().rposition(|message| message == prompt) {
            view.messages.remove(at);
        }
    }
    view.recall_tokens = recall.tokens_injected + kept.kept_tokens;
    report.recall = recall;
    report.kept_recalls = kept;
    if hook.offer_tools {
        for spec in MEMORY_TOOL_SPECS.iter() {
            if !view.tools.iter().any(|tool| tool.name == spec.name) {
                view.tools.push(spec.clone());
            }
        }
    }
    if !hook.simulated_calls {
        view.messages = simulated_calls_as_text(std::mem::take(&mut view.messages));
    }
    view.memory = Some(report);
    Ok(view)
}

/// How many calls a run is expected to make after this one, per call so far, when weighing a
/// recall's keep (see [`skald_core::memory::recall::KeptRecalls`]). Keeping a recall is an
/// offload decision turned around — its tokens read on every later call against a rewrite of
/// what follows it now — and such decisions are many and small, so their expectation counts:
/// the cost-aware schedule's own ratio for later rewrites, else the 2 skald's preset weighs
/// them at ([`skald_core::pipeline::schedule`]).
fn remaining_calls_ratio(policy: &Policy) -> f64 {
    match &policy.schedule {
        OffloadSchedule::CostAware {
            remaining_calls_ratio,
            ..
        } => *remaining_calls_ratio,
        OffloadSchedule::Immediate | OffloadSchedule::CacheAware { .. } => 2.0,
    }
}
