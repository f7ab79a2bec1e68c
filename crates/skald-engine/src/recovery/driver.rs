//! [`TurnDriver`]: the state machine of one turn's calls — prepare a call (threshold
//! compaction, the pipeline, memory), and recover from an overflow (compact, or truncate as the
//! fallback) — with the helpers it runs.

use std::collections::HashSet;

use super::*;

/// One turn's preparation and overflow recovery, for a caller that makes the model calls
/// itself; the engine's [`TurnLoop`](crate::TurnLoop) drives it for every caller:
///
/// 1. [`TurnDriver::prepare`] gives the next request (the first one after the upload planner
///    and the threshold compaction);
/// 2. the caller sends it; on success the turn is over ([`TurnDriver::into_report`]);
/// 3. on a context overflow, [`TurnDriver::recover`] compacts or truncates (seed 003 §4) and
///    returns `Ok` when the caller should prepare and send again, or the error that ends the
///    turn; any other failure ends it with [`TurnDriver::failed`].
///
/// A caller that continues a turn after running tools itself (the proxy executing skald's
/// tools) calls [`TurnDriver::prepare`] again: every call counts towards `max_iterations`.
pub struct TurnDriver<'c> {
    ctx: &'c PrepareContext<'c>,
    memory: MemoryHooks<'c>,
    /// The host's prompt and tools, measured once: they are the same on every call.
    host: HostMeasure,
    turn: RecoveryState,
    iteration: u32,
    /// The threshold compaction of the current call compacted (branch A on its overflow).
    compacted_this_attempt: bool,
}

impl<'c> TurnDriver<'c> {
    /// A driver for one turn; refuses settings that cannot work.
    pub fn new(
        ctx: &'c PrepareContext<'c>,
        memory: MemoryHooks<'c>,
    ) -> Result<TurnDriver<'c>, RecoveryError> {
        ctx.settings.validate()?;
        Ok(TurnDriver {
            ctx,
            memory,
            host: HostMeasure::of(ctx),
            turn: RecoveryState {
                report: RecoveryReport::default(),
                threshold_checked: false,
                truncation_attempted: false,
                compaction_overflowed: false,
            },
            iteration: 0,
            compacted_this_attempt: false,
        })
    }

    /// The next model call: the session's context through the pipeline and memory. Before the
    /// turn's first call the upload planner runs, and once per turn the threshold compaction
    /// (on the calibrated size, see [`SessionState::calibrated_tokens`]). The call's estimate is
    /// recorded for the model ([`SessionState::record_counted`]): a caller that reads the
    /// provider's usage feeds it back with [`SessionState::observe_usage`].
    pub async fn prepare(
        &mut self,
        state: &mut SessionState,
        cancel: &CancellationToken,
    ) -> Result<PreparedCall, RecoveryError> {
        let ctx = self.ctx;
        let memory = self.memory;
        self.iteration += 1;
        let iteration = self.iteration;
        let turn = &mut self.turn;
        if cancel.is_cancelled() {
            return Err(turn.aborted());
        }
        // The call as the session stands: what the model would get, and its measured size.
        let mut call =
            prepare_call_with_memory(ctx, &self.host, memory, state, &mut turn.report).await?;
        // The points where the turn may rewrite the session, each once and before the call is
        // sent: the upload plan (the turn's first call) and the threshold compaction (once per
        // turn). Each decides on the measured size; when one rewrites the session, the call is
        // built again from the session it left, so what is sent always matches what is stored.
        if iteration == 1 && plan_upload(ctx, memory, state, &call, &mut turn.report).await {
            call =
                prepare_call_with_memory(ctx, &self.host, memory, state, &mut turn.report).await?;
        }
        self.compacted_this_attempt = false;
        if !turn.threshold_checked {
            // Once per turn: a context still over the threshold after compacting would trigger
            // again on every retry and never get smaller that way.
            turn.threshold_checked = true;
            let calibrated = state.calibrated_tokens(ctx.model, call.request_tokens);
            if should_compact(calibrated, ctx.window_tokens, ctx.compaction) {
                let record = run_compaction(
                    ctx,
                    memory,
                    &mut turn.report.memory_errors,
                    state,
                    CompactionTrigger::Threshold,
                    ctx.window_tokens,
                    Some(calibrated),
                    iteration,
                    cancel,
                )
                .await?;
                if cancel.is_cancelled() {
                    turn.report.compactions.push(record);
                    return Err(turn.aborted());
                }
                self.compacted_this_attempt = record.is_compacted();
                turn.note_compaction(record);
                if self.compacted_this_attempt {
                    call =
                        prepare_call_with_memory(ctx, &self.host, memory, state, &mut turn.report)
                            .await?;
                }
            }
        }
        turn.report.attempts += 1;
        state.record_counted(ctx.model, call.request_tokens);
        Ok(call)
    }

    /// The call `call` overflowed (`error` is a [`LlmError::ContextOverflow`] or an
    /// assistant-error overflow): follows the seed's decision tree. `Ok` means the session was
    /// made smaller (or the call had just been compacted): prepare and send again. An error
    /// ends the turn: [`RecoveryError::ContextOverflow`] when every step is spent,
    /// [`RecoveryError::IterationLimit`] at `max_iterations`.
    pub async fn recover(
        &mut self,
        state: &mut SessionState,
        call: CallSize,
        error: LlmError,
        source: OverflowSource,
        cancel: &CancellationToken,
    ) -> Result<RecoveryAction, RecoveryError> {
        let ctx = self.ctx;
        let memory = self.memory;
        let iteration = self.iteration;
        let turn = &mut self.turn;
        let (requested_tokens, limit_tokens) = overflow_counts(&error);
        let mut record = OverflowRecord {
            attempt: iteration,
            source,
            requested_tokens,
            limit_tokens,
            message: error.to_string(),
            estimated_tokens: call.request_tokens,
            action: RecoveryAction::GaveUp,
        };
        if iteration >= ctx.settings.max_iterations {
            record.action = RecoveryAction::IterationLimit;
            turn.report.overflows.push(record);
            return Err(RecoveryError::IterationLimit {
                iterations: iteration,
                last_error: error,
                report: Box::new(std::mem::take(&mut turn.report)),
            });
        }

        let under_cap =
            turn.report.overflow_compaction_attempts < ctx.settings.max_overflow_compactions;
        let action = if self.compacted_this_attempt && under_cap {
            turn.report.overflow_compaction_attempts += 1;
            RecoveryAction::DirectRetry
        } else if under_cap && !turn.compaction_overflowed {
            turn.report.overflow_compaction_attempts += 1;
            let window = compaction_window(ctx.window_tokens, limit_tokens, ctx.compaction);
            let compaction = run_compaction(
                ctx,
                memory,
                &mut turn.report.memory_errors,
                state,
                CompactionTrigger::Overflow,
                window,
                requested_tokens,
                iteration,
                cancel,
            )
            .await?;
            if cancel.is_cancelled() {
                turn.report.compactions.push(compaction);
                turn.report.overflows.push(record);
                return Err(turn.aborted());
            }
            let compacted = compaction.is_compacted();
            turn.note_compaction(compaction);
            if compacted {
                RecoveryAction::Compacted
            } else {
                turn.fallback(ctx, state, call, &record, cancel)?
            }
        } else {
            turn.fallback(ctx, state, call, &record, cancel)?
        };
        record.action = action;
        turn.report.overflows.push(record);
        match action {
            RecoveryAction::DirectRetry | RecoveryAction::Compacted | RecoveryAction::Truncated => {
                Ok(action)
            }
            RecoveryAction::GaveUp | RecoveryAction::IterationLimit => {
                Err(RecoveryError::ContextOverflow {
                    last_error: error,
                    report: Box::new(std::mem::take(&mut turn.report)),
                })
            }
        }
    }

    /// Ends the turn on a provider failure that is not an overflow ([`LlmError::Aborted`]
    /// becomes [`RecoveryError::Aborted`]).
    pub fn failed(mut self, error: LlmError) -> RecoveryError {
        if matches!(error, LlmError::Aborted) {
            return self.turn.aborted();
        }
        RecoveryError::Llm {
            source: error,
            report: Box::new(self.turn.report),
        }
    }

    /// Ends the turn because the caller cancelled.
    pub fn aborted(mut self) -> RecoveryError {
        self.turn.aborted()
    }

    /// What recovery did so far.
    pub fn report(&self) -> &RecoveryReport {
        &self.turn.report
    }

    /// What recovery did during the turn.
    pub fn into_report(self) -> RecoveryReport {
        self.turn.report
    }
}

/// The turn's memory upload step (seed 002's two-threshold upload), run once, before the turn's
/// first call is sent: the planner decides on `call`'s calibrated size, collects finished
/// uploads, starts one, or drops an uploaded range from the live context through a checkpoint.
/// Its outcome goes in `report`. Returns whether the session was rewritten (a range dropped), so
/// the call must be built again.
async fn plan_upload(
    ctx: &PrepareContext<'_>,
    memory: MemoryHooks<'_>,
    state: &mut SessionState,
    call: &PreparedCall,
    report: &mut RecoveryReport,
) -> bool {
    let Some(uploads) = memory.uploads else {
        return false;
    };
    let context_tokens = state.calibrated_tokens(ctx.model, call.request_tokens);
    match uploads
        .before_request(
            state,
            ctx.sessions,
            ctx.tenant,
            ctx.session_id,
            context_tokens,
            ctx.window_tokens,
        )
        .await
    {
        Ok(step) => {
            let rewritten = step.dropped.is_some();
            report.upload = Some(step);
            rewritten
        }
        Err(error) => {
            report.memory_errors.push(error.to_string());
            false
        }
    }
}

/// The state of one turn's recovery.
struct RecoveryState {
    report: RecoveryReport,
    threshold_checked: bool,
    /// The fallback runs once per turn (`toolResultTruncationAttempted`).
    truncation_attempted: bool,
    /// A compaction failed because its own summarizer call overflowed: compacting again would too.
    compaction_overflowed: bool,
}

impl RecoveryState {
    fn aborted(&mut self) -> RecoveryError {
        RecoveryError::Aborted {
            report: Box::new(std::mem::take(&mut self.report)),
        }
    }

    fn note_compaction(&mut self, record: CompactionRecord) {
        if record.summarizer_overflowed && !record.is_compacted() {
            self.compaction_overflowed = true;
        }
        self.report.compactions.push(record);
    }

    /// The fallback: truncate once, else give up.
    fn fallback(
        &mut self,
        ctx: &PrepareContext<'_>,
        state: &mut SessionState,
        call: CallSize,
        overflow: &OverflowRecord,
        cancel: &CancellationToken,
    ) -> Result<RecoveryAction, RecoveryError> {
        if self.truncation_attempted {
            return Ok(RecoveryAction::GaveUp);
        }
        self.truncation_attempted = true;
        if cancel.is_cancelled() {
            return Err(self.aborted());
        }
        let record = truncate_session(ctx, state, call, overflow)?;
        let truncated = record.truncated();
        self.report.truncation = Some(record);
        Ok(if truncated {
            RecoveryAction::Truncated
        } else {
            RecoveryAction::GaveUp
        })
    }
}

/// One request, ready to send, with skald's estimate of its size.
#[derive(Debug, Clone)]
pub struct PreparedCall {
    /// System prompt: the context's [`PrepareContext::system_prompt`] with skald's additions
    /// (the REF_ID instruction, memory's profile); only the additions when it has none.
    /// Tools: the skald tools offered (`offered_tools`) as OpenAI function specs; the host's own
    /// ([`PrepareContext::tools`]) go in front of them, as the caller holds them
    /// ([`PreparedCall::into_request`] puts them there).
    pub request: ChatRequest,
    /// skald's additions to the system prompt alone (what `request.system` adds after the host's
    /// prompt and a blank line), for a caller that sends the host's prompt as the host wrote it.
    pub system_addition: Option<String>,
    /// The skald tools this call offers that the host did not define itself
    /// (`fetch_original_data` once refs exist, the memory tools with a recall hook).
    pub offered_tools: Vec<ToolSpec>,
    /// What the pipeline did to the session's messages.
    pub assemble: AssembleReport,
    /// Estimated tokens of the assembled session messages (without what memory injects).
    pub message_tokens: u64,
    /// Estimated tokens of the whole request: messages, system prompt and tools.
    pub request_tokens: u64,
}

impl PreparedCall {
    /// The request with the host's `tools` in front of skald's, for a caller that sends
    /// [`PreparedCall::request`] itself.
    pub fn into_request(self, host_tools: &[Value]) -> ChatRequest {
        let mut request = self.request;
        let mut tools = host_tools.to_vec();
        tools.append(&mut request.tools);
        request.tools = tools;
        request
    }

    /// The call's estimated sizes, which recovering from its overflow plans with.
    pub fn size(&self) -> CallSize {
        CallSize {
            request_tokens: self.request_tokens,
            message_tokens: self.message_tokens,
        }
    }
}

/// What recovery needs of a call that overflowed: skald's estimates of its size (the call
/// itself has gone to the provider).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSize {
    /// Estimated tokens of the whole request.
    pub request_tokens: u64,
    /// Estimated tokens of its session messages.
    pub message_tokens: u64,
}

/// The host's system prompt and tool definitions, measured once per turn.
#[derive(Debug, Clone)]
struct HostMeasure {
    /// Estimated tokens of the prompt and the tools, which precede the messages in the request
    /// (their JSON's characters / 4, as skald's estimates).
    prefix_tokens: u64,
    /// Estimated characters of the tools, as the request's overhead counts them.
    tool_chars: usize,
    /// The tools' names: a skald tool the host defines itself is not offered again.
    tool_names: HashSet<String>,
}

impl HostMeasure {
    fn of(ctx: &PrepareContext<'_>) -> HostMeasure {
        let json_chars: usize = ctx.tools.iter().map(|tool| tool.to_string().len()).sum();
        let chars = ctx.system_prompt.map_or(0, str::len) + json_chars;
        HostMeasure {
            prefix_tokens: ctx.host_prefix_tokens.unwrap_or(chars.div_ceil(4) as u64),
            tool_chars: ctx.tools.iter().map(json_estimate_chars).sum(),
            tool_names: ctx
                .tools
                .iter()
                .filter_map(tool_name)
                .map(str::to_owned)
                .collect(),
        }
    }
}

/// The view of the session for this call ([`prepare_view`]: the pipeline, then what recall
/// gives it when a hook is given), as a request. Memory's additions count in the request's
/// size, so the threshold sees what the model will be sent.
async fn prepare_call_with_memory(
    ctx: &PrepareContext<'_>,
    host: &HostMeasure,
    memory: MemoryHooks<'_>,
    state: &mut SessionState,
    report: &mut RecoveryReport,
) -> Result<PreparedCall, RecoveryError> {
    let view = prepare_view(
        &ViewRequest {
            sessions: ctx.sessions,
            refs: ctx.refs,
            tenant: ctx.tenant,
            session_id: ctx.session_id,
            policy: ctx.policy,
            window_tokens: ctx.window_tokens,
            now_ms: ctx.now_ms,
            fetch_available: ctx.fetch_available,
            host_prefix_tokens: host.prefix_tokens,
            memory: memory.recall,
            pending_prompt: None,
        },
        state,
    )
    .await?;
    // The host's prompt and skald's pipeline addition count as overhead, memory's as memory
    // (joined by a blank line).
    let pipeline_addition_chars = view.pipeline_addition.as_deref().map_or(0, |addition| {
        estimate_string_chars(addition) + usize::from(ctx.system_prompt.is_some()) * 2
    });
    let mut tools = Vec::new();
    let mut overhead_chars = ctx.system_prompt.map_or(0, estimate_string_chars)
        + pipeline_addition_chars
        + host.tool_chars;
    // Overhead, not messages: the persistent truncation shrinks the stored messages, and what
    // memory adds must still fit beside them.
    let mut memory_chars = view.memory_chars;
    let mut offered_tools = Vec::new();
    for spec in view.tools {
        if host.tool_names.contains(&spec.name)
            || offered_tools
                .iter()
                .any(|offered: &ToolSpec| offered.name == spec.name)
        {
            continue;
        }
        let (function, chars) = offered_function(&spec);
        tools.push(function);
        if is_memory_tool(&spec.name) {
            memory_chars += chars;
        } else {
            overhead_chars += chars;
        }
        offered_tools.push(spec);
    }
    // skald's additions, in order: the pipeline's (the REF_ID instruction), then memory's.
    let system_addition = match (view.pipeline_addition, view.memory_addition) {
        (Some(pipeline), Some(memory)) => Some(format!("{pipeline}\n\n{memory}")),
        (Some(addition), None) | (None, Some(addition)) => Some(addition),
        (None, None) => None,
    };
    let system = match (ctx.system_prompt, system_addition.as_deref()) {
        (Some(host), Some(addition)) => Some(format!("{host}\n\n{addition}")),
        (Some(host), None) => Some(host.to_owned()),
        (None, Some(addition)) => Some(addition.to_owned()),
        (None, None) => None,
    };
    let overhead_tokens = overhead_chars.div_ceil(CHARS_PER_TOKEN) as u64;
    let memory_tokens = memory_chars.div_ceil(CHARS_PER_TOKEN) as u64 + view.recall_tokens;
    if let Some(memory) = view.memory {
        report.recall = Some(memory.recall);
    }
    Ok(PreparedCall {
        message_tokens: view.message_tokens,
        request_tokens: view.message_tokens + overhead_tokens + memory_tokens,
        offered_tools,
        assemble: view.report,
        system_addition,
        request: ChatRequest {
            system,
            messages: view.messages,
            tools,
            max_output_tokens: None,
            temperature: None,
        },
    })
}

/// `spec` as an OpenAI function spec and its estimated size.
fn offered_function(spec: &ToolSpec) -> (Value, usize) {
    if let Some((_, function, chars)) = MEMORY_FUNCTIONS
        .iter()
        .find(|(name, _, _)| *name == spec.name)
    {
        return (function.clone(), *chars);
    }
    let function = function_spec(spec);
    let chars = json_estimate_chars(&function);
    (function, chars)
}

/// The memory tools as function specs with their estimated sizes, built once: every call of a
/// session with recall offers them.
static MEMORY_FUNCTIONS: LazyLock<Vec<(String, Value, usize)>> = LazyLock::new(|| {
    memory_tool_specs()
        .iter()
        .map(|spec| {
            let function = function_spec(spec);
            let chars = json_estimate_chars(&function);
            (spec.name.clone(), function, chars)
        })
        .collect()
});

/// The name of an OpenAI function spec (or a bare `{name, …}`).
fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("function")
        .unwrap_or(tool)
        .get("name")
        .and_then(Value::as_str)
}

/// A skald tool as an OpenAI function spec (the shape the proxy writes into each API's own).
pub fn function_spec(spec: &ToolSpec) -> Value {
    let mut function = serde_json::Map::new();
    function.insert("name".to_owned(), Value::String(spec.name.clone()));
    if let Some(description) = &spec.description {
        function.insert("description".to_owned(), Value::String(description.clone()));
    }
    if !spec.parameters.is_null() {
        function.insert("parameters".to_owned(), spec.parameters.clone());
    }
    json!({"type": "function", "function": Value::Object(function)})
}

fn overflow_counts(error: &LlmError) -> (Option<u64>, Option<u64>) {
    match error {
        LlmError::ContextOverflow {
            requested_tokens,
            limit_tokens,
            ..
        } => (*requested_tokens, *limit_tokens),
        LlmError::RateLimited { .. }
        | LlmError::QuotaExceeded { .. }
        | LlmError::Auth { .. }
        | LlmError::BadRequest { .. }
        | LlmError::Server { .. }
        | LlmError::Timeout { .. }
        | LlmError::Aborted
        | LlmError::Transport { .. }
        | LlmError::InvalidResponse { .. }
        | LlmError::InvalidRequest { .. }
        | LlmError::Config { .. } => (None, None),
    }
}

/// The window an overflow compaction plans for: the provider's stated limit when it is smaller
/// than the configured window (the provider knows its model) and still leaves room above the
/// reserve; the configured window otherwise.
fn compaction_window(window: u64, limit: Option<u64>, settings: &CompactionSettings) -> u64 {
    match limit {
        Some(limit) if limit < window && limit > settings.reserve_tokens => limit,
        Some(_) | None => window,
    }
}

/// Runs one compaction through a summarizer that notes whether a summary call overflowed, and
/// lets the session state know about refs a tail truncation stored.
#[allow(clippy::too_many_arguments)]
async fn run_compaction(
    ctx: &PrepareContext<'_>,
    memory: MemoryHooks<'_>,
    memory_errors: &mut Vec<String>,
    state: &mut SessionState,
    trigger: CompactionTrigger,
    window_tokens: u64,
    context_tokens: Option<u64>,
    attempt: u32,
    cancel: &CancellationToken,
) -> Result<CompactionRecord, RecoveryError> {
    let watch = OverflowWatch {
        inner: ctx.summarizer,
        overflowed: AtomicBool::new(false),
    };
    // A host that loads its rules files into the system prompt rather than the messages.
    let rules_files = ctx
        .system_prompt
        .map(host_rules_in_text)
        .unwrap_or_default();
    let request = CompactRequest {
        tenant: ctx.tenant,
        session_id: ctx.session_id,
        window_tokens,
        trigger,
        settings: ctx.compaction,
        custom_instructions: None,
        agents_md: ctx.agents_md,
        rules_files: &rules_files,
        context_tokens,
    };
    let archive = memory.writer.map(|writer| SpanArchive {
        writer,
        system_prompt: ctx.system_prompt,
    });
    let Compaction {
        result,
        memory_archive,
        memory_error,
    } = compact_and_archive(
        ctx.sessions,
        ctx.refs,
        &watch,
        &request,
        archive,
        Some(state),
        cancel,
    )
    .await?;
    memory_errors.extend(memory_error);
    Ok(CompactionRecord {
        attempt,
        trigger,
        window_tokens,
        outcome: result.outcome,
        checkpoint_entry_id: result.checkpoint_entry_id,
        summarizer_overflowed: watch.overflowed.load(Ordering::Relaxed),
        memory_archive,
    })
}

/// The fallback: plans the persistent truncation and writes it — originals first, then the
/// branch.
fn truncate_session(
    ctx: &PrepareContext<'_>,
    state: &mut SessionState,
    call: CallSize,
    overflow: &OverflowRecord,
) -> Result<TruncationRecord, RecoveryError> {
    let window = match overflow.limit_tokens {
        Some(limit) if limit > 0 => limit.min(ctx.window_tokens),
        Some(_) | None => ctx.window_tokens,
    };
    let goal = truncation::TruncationGoal {
        window_tokens: window,
        target_tokens: truncation_target(window, ctx.compaction, overflow),
        overhead_tokens: call.request_tokens.saturating_sub(call.message_tokens),
    };
    let session = ctx.sessions.load(ctx.tenant, ctx.session_id)?;
    let context = session_context(&session, None);
    let plan =
        truncation::plan_session_truncation(&session, &context, goal, &ctx.settings.truncate);
    let mut record = TruncationRecord {
        attempt: overflow.attempt,
        summary: plan.summary,
        ref_ids: Vec::new(),
        rewritten_entries: plan.rewrites.len(),
        marker_entry_id: None,
        leaf_entry_id: None,
    };
    if plan.rewrites.is_empty() {
        return Ok(record);
    }
    // Originals first: no marker naming a ref is stored before the ref is.
    for new_ref in &plan.new_refs {
        ctx.refs.put(ctx.tenant, &new_ref.payload)?;
        let id = new_ref.id.to_string();
        state.stored_refs.insert(id.clone());
        record.ref_ids.push(id);
    }
    let rewrite = ctx.sessions.rewrite_branch(
        ctx.tenant,
        ctx.session_id,
        plan.rewrites,
        TRUNCATION_REASON,
    )?;
    record.marker_entry_id = Some(rewrite.marker_id);
    record.leaf_entry_id = Some(rewrite.leaf_id);
    Ok(record)
}

/// Estimated tokens the request must get under: the window less the reply's reserve (half the
/// window when the reserve is not smaller than it), scaled down by how much the provider counted
/// over skald's estimate when it said.
fn truncation_target(window: u64, settings: &CompactionSettings, overflow: &OverflowRecord) -> u64 {
    let fit = if window > settings.reserve_tokens {
        window - settings.reserve_tokens
    } else {
        window / 2
    };
    match overflow.requested_tokens {
        Some(requested)
            if requested > overflow.estimated_tokens && overflow.estimated_tokens > 0 =>
        {
            let scaled =
                u128::from(fit) * u128::from(overflow.estimated_tokens) / u128::from(requested);
            u64::try_from(scaled).unwrap_or(fit)
        }
        Some(_) | None => fit,
    }
}

/// A summarizer that remembers whether any call overflowed (OpenClaw's
/// `isCompactionFailureError`: the compaction itself was too large for the model).
struct OverflowWatch<'a> {
    inner: &'a dyn Summarizer,
    overflowed: AtomicBool,
}

#[async_trait]
impl Summarizer for OverflowWatch<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn summarize(
        &self,
        request: &SummaryRequest,
        cancel: &CancellationToken,
    ) -> Result<String, LlmError> {
        let result = self.inner.summarize(request, cancel).await;
        if result.as_ref().is_err_and(LlmError::is_context_overflow) {
            self.overflowed.store(true, Ordering::Relaxed);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overflow(requested: Option<u64>, estimated: u64) -> OverflowRecord {
        OverflowRecord {
            attempt: 1,
            source: OverflowSource::PromptError,
            requested_tokens: requested,
            limit_tokens: Some(8_192),
            message: String::new(),
            estimated_tokens: estimated,
            action: RecoveryAction::GaveUp,
        }
    }

    #[test]
    fn the_target_is_the_window_less_the_reserve_scaled_by_the_providers_count() {
        let settings = CompactionSettings {
            reserve_tokens: 1_192,
            ..CompactionSettings::default()
        };
        assert_eq!(
            truncation_target(8_192, &settings, &overflow(None, 4_000)),
            7_000
        );
        // The provider counted twice what skald estimated: the estimate must halve.
        assert_eq!(
            truncation_target(8_192, &settings, &overflow(Some(8_000), 4_000)),
            3_500
        );
        // An estimate above the provider's count is not relaxed.
        assert_eq!(
            truncation_target(8_192, &settings, &overflow(Some(2_000), 4_000)),
            7_000
        );
        let default = CompactionSettings::default();
        assert_eq!(
            truncation_target(8_192, &default, &overflow(None, 1)),
            4_096
        );
    }

    #[test]
    fn an_overflow_compaction_plans_for_the_providers_limit_when_it_is_usable() {
        let settings = CompactionSettings {
            reserve_tokens: 1_000,
            ..CompactionSettings::default()
        };
        assert_eq!(compaction_window(32_000, Some(8_192), &settings), 8_192);
        assert_eq!(compaction_window(32_000, None, &settings), 32_000);
        assert_eq!(compaction_window(32_000, Some(64_000), &settings), 32_000);
        assert_eq!(compaction_window(32_000, Some(900), &settings), 32_000);
    }

    #[test]
    fn settings_without_iterations_are_refused() {
        let settings = RecoverySettings {
            max_iterations: 0,
            ..RecoverySettings::default()
        };
        assert_eq!(
            settings.validate(),
            Err(RecoverySettingsError::NoIterations)
        );
        assert_eq!(RecoverySettings::default().validate(), Ok(()));
        assert_eq!(RecoverySettings::default().max_overflow_compactions, 3);
        assert_eq!(RecoverySettings::default().max_iterations, 32);
        assert_eq!(RecoverySettings::default().truncate.min_keep_chars, 0);
    }

    #[test]
    fn the_give_up_message_is_the_seeds() {
        assert_eq!(
            CONTEXT_OVERFLOW_MESSAGE,
            "Context overflow: prompt too large for the model. Try /reset (or /new) to start a \
             fresh session, or use a larger-context model."
        );
    }
}
