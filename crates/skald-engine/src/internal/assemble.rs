//! `assemble`: the pipeline over a session's messages for one model request — repair, turn
//! limit, offload, pruning, truncation — with the originals of everything taken out stored before
//! the result is returned.

use std::collections::HashSet;
use std::time::Instant;

use serde::Serialize;
use skald_core::assemble_record::AssembleRecord;
use skald_core::fetch;
use skald_core::identity::quick_message_identity;
use skald_core::ids::Tenant;
use skald_core::message::{Message, Role, ToolSpec};
use skald_core::pipeline::offload::{
    OffloadReport, REF_ID_INSTRUCTION, eligible_results, offload, offload_arguments,
    offloadable_argument_chars,
};
use skald_core::pipeline::policy::{OffloadSchedule, Policy};
use skald_core::pipeline::prune::{
    PruneEnv, PruneReport, default_cleared_summary, prune_with_marks,
};
use skald_core::pipeline::schedule::{Pending, RequestShape, plan_rewrite};
use skald_core::pipeline::truncate::{TruncateReport, truncate_with_memory};
use skald_core::pipeline::turn_limit::{TurnLimitReport, limit_turns};
use skald_core::refs::{CanonicalPayload, NewRef};
use skald_core::repair::{RepairReport, RepairSettings, repair};
use skald_core::tokens::estimate_message_tokens;
use skald_store::RefStore;
use skald_store::sessions::SessionSwitches;

use crate::EngineError;
use crate::session::SessionState;

/// What the caller knows about this request.
#[derive(Debug, Clone, Copy)]
pub struct AssembleRequest<'a> {
    /// The tenant whose ref store receives the originals.
    pub tenant: &'a Tenant,
    /// The model's context window in tokens.
    pub context_window_tokens: u64,
    /// When the request is made (epoch ms): drives the prompt-cache clocks.
    pub now_ms: i64,
    /// Whether the host will run `fetch_original_data` (it is added to the tools). Without it,
    /// nothing is offloaded: a ref the model cannot fetch would lose data.
    pub fetch_available: bool,
    /// Estimated tokens the host sends before the messages (its system prompt and tool
    /// definitions), 0 when unknown: the cost-aware schedule counts them as rewritten to the
    /// prompt cache when the first offload adds skald's tool and instruction in front of them.
    pub host_prefix_tokens: u64,
}

/// Every stage's report for one request.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AssembleReport {
    /// What repair did to the call/result pairing; `None` when the policy does not repair.
    pub repair: Option<RepairReport>,
    /// What the turn limit dropped from the front of the conversation.
    pub turn_limit: TurnLimitReport,
    /// Tool results and call arguments replaced by refs; empty when the policy does not offload or
    /// the host cannot fetch.
    pub offload: OffloadReport,
    /// What pruning trimmed or cleared of old tool results.
    pub prune: PruneReport,
    /// What truncation cut from tool results over the per-result budget.
    pub truncate: TruncateReport,
    /// Refs stored by this request (first-time offloads, prunes and truncations).
    pub refs_stored: usize,
    /// The session's switches this request honoured: with `pause_offload` the offload stage did
    /// not run (a person paused it), whatever the policy says.
    pub switches: SessionSwitches,
    /// Wall time of each step, in microseconds.
    pub timings_us: StageTimings,
}

impl AssembleReport {
    /// The compact record of this report kept on the answer to the request it assembled (see
    /// [`AssembleRecord`]): `messages` are the assembled messages (an offload in an assistant
    /// message is of a call's arguments), `tokens_raw` and `tokens_sent` the estimates before
    /// and after the pipeline.
    pub fn record(
        &self,
        messages: &[Message],
        tokens_raw: u64,
        tokens_sent: u64,
    ) -> AssembleRecord {
        let count = |value: usize| value as u64;
        let mut record = AssembleRecord {
            tokens_raw,
            tokens_sent,
            offloaded_tokens: self.offload.chars_saved().div_ceil(4) as u64,
            deferred: count(self.offload.deferred),
            trimmed: count(self.prune.trimmed),
            cleared: count(self.prune.cleared),
            truncated: count(self.truncate.truncated),
            turns_dropped: count(self.turn_limit.turns_dropped),
            refs_stored: count(self.refs_stored),
            offload_paused: self.switches.pause_offload,
            compaction_paused: self.switches.pause_compaction,
            ..AssembleRecord::default()
        };
        for offloaded in &self.offload.offloaded {
            let of_arguments = messages
                .get(offloaded.message_index)
                .is_some_and(|message| message.role == Role::Assistant);
            if of_arguments {
                record.arguments_offloaded += 1;
            } else {
                record.offloaded_refs.push(offloaded.ref_id.clone());
            }
        }
        if let Some(repair) = &self.repair {
            record.repaired = count(repair.reasons.len());
            for reason in &repair.reasons {
                record.push_reason(reason);
            }
        }
        for reason in &self.turn_limit.reasons {
            record.push_reason(reason);
        }
        for change in &self.prune.changes {
            record.push_reason(&change.reason);
        }
        for change in &self.truncate.changes {
            record.push_reason(&change.reason);
        }
        record
    }
}

/// Where an assemble spent its time, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct StageTimings {
    /// Repairing the call/result pairing.
    pub repair: u64,
    /// Applying the turn limit.
    pub turn_limit: u64,
    /// Offloading results and arguments to refs (the stored originals excluded).
    pub offload: u64,
    /// Time in the pruning stage (trimming and clearing old results).
    pub prune: u64,
    /// Time in the truncation stage.
    pub truncate: u64,
    /// Storing the request's new refs in the ref store (one batch).
    pub store: u64,
    /// Estimating the tokens of the assembled messages.
    pub estimate: u64,
}

/// Microseconds since `start`, and restarts it.
fn lap(start: &mut Instant) -> u64 {
    let now = Instant::now();
    let micros = now.duration_since(*start).as_micros() as u64;
    *start = now;
    micros
}

/// The context for one model request.
#[derive(Debug, Clone)]
pub struct Assembled {
    /// The messages to send, in order, with what the pipeline took out replaced by refs or markers.
    pub messages: Vec<Message>,
    /// For the host's system prompt (OpenClaw 2026.9 prepends it to its own): the REF_ID
    /// instruction, from the first call when the policy offloads, else once anything is a ref.
    pub system_prompt_addition: Option<String>,
    /// Tools to add to the request (`fetch_original_data`, when the instruction is added).
    pub tools: Vec<ToolSpec>,
    /// skald's estimate of the tokens of `messages` (estimator characters / 4, not BPE), without
    /// the system prompt addition and tools.
    pub estimated_tokens: u64,
    /// What each stage did, for logs and the engine API.
    pub report: AssembleReport,
    /// Wall time of the pipeline, for reports.
    pub elapsed_ms: f64,
}

/// Sums the token estimates of `messages`, estimating only messages not seen before: a request
/// costs work in proportion to what is new in it.
pub(crate) fn estimate_with_memo(
    memo: &mut std::collections::HashMap<u128, u64>,
    messages: &[Message],
) -> u64 {
    if memo.len() > 100_000 {
        memo.clear();
    }
    messages
        .iter()
        .map(|message| {
            *memo
                .entry(quick_message_identity(message))
                .or_insert_with(|| estimate_message_tokens(message))
        })
        .sum()
}

/// Index of the `keep`-th assistant message from the end (results at or after it are recent).
fn recent_cutoff(messages: &[Message], keep: usize) -> usize {
    if keep == 0 {
        return messages.len();
    }
    messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.role == Role::Assistant)
        .nth(keep - 1)
        .map_or(0, |(index, _)| index)
}

/// Runs the policy's pipeline over `messages` and stores what it takes out.
pub fn assemble<S: RefStore + ?Sized>(
    store: &S,
    policy: &Policy,
    state: &mut SessionState,
    messages: Vec<Message>,
    request: AssembleRequest<'_>,
) -> Result<Assembled, EngineError> {
    let started = Instant::now();
    let mut clock = started;
    let mut report = AssembleReport::default();
    let mut new_refs: Vec<NewRef> = Vec::new();
    // The run's calls so far, this one included: what the cost-aware schedule and the keep of
    // earlier recalls expect the rest of the run from.
    state.requests_assembled += 1;

    let messages = if policy.repair {
        let (messages, repaired) = repair(messages, &RepairSettings::default());
        report.repair = Some(repaired);
        messages
    } else {
        messages
    };
    report.timings_us.repair = lap(&mut clock);

    let (messages, turns) = limit_turns(messages, &policy.turn_limit);
    report.turn_limit = turns;
    report.timings_us.turn_limit = lap(&mut clock);

    report.switches = state.switches;
    let messages =
        if policy.offload.enabled && request.fetch_available && !state.switches.pause_offload {
            let outcome = run_offload(policy, state, messages, &request);
            report.offload = outcome.report;
            new_refs.extend(outcome.new_refs);
            outcome.messages
        } else {
            messages
        };
    report.timings_us.offload = lap(&mut clock);

    let env = PruneEnv {
        context_window_tokens: request.context_window_tokens,
        now_ms: request.now_ms,
        clock: state.prune_clock,
    };
    let pruned = prune_with_marks(
        messages,
        &policy.prune,
        env,
        &mut state.prune_marks,
        &mut |result| default_cleared_summary(result),
    );
    state.prune_clock = pruned.clock;
    report.prune = pruned.report;
    new_refs.extend(pruned.new_refs);
    report.timings_us.prune = lap(&mut clock);

    let truncated = truncate_with_memory(
        pruned.messages,
        &policy.truncate,
        request.context_window_tokens,
        &mut state.truncate_memory,
    );
    report.truncate = truncated.report;
    new_refs.extend(truncated.new_refs);
    let messages = truncated.messages;
    report.timings_us.truncate = lap(&mut clock);

    // A ref id reaches the model only once its original is durably stored: the whole batch is
    // committed (one sync) before anything is returned.
    let mut batch: Vec<&CanonicalPayload> = Vec::with_capacity(new_refs.len());
    for canonical in new_refs.iter().map(NewRef::canonical) {
        if !state.stored_refs.contains(canonical.id().as_str())
            && !batch.iter().any(|queued| queued.id() == canonical.id())
        {
            batch.push(canonical);
        }
    }
    if !batch.is_empty() {
        if let Err(error) = crate::blocking(|| store.put_many(request.tenant, &batch)) {
            // The offload memos already hold placeholders for these refs, and would hand them
            // out on the next request without offering the refs again: forget them, so the
            // next request recomputes (the same) placeholders and stores their refs first.
            state.offload_cache = Default::default();
            state.arguments_cache = Default::default();
            return Err(error.into());
        }
        for canonical in &batch {
            state.stored_refs.insert(canonical.id().to_string());
        }
        report.refs_stored += batch.len();
    }
    report.timings_us.store = lap(&mut clock);

    // The instruction and the tool are there from a session's first call when the policy
    // offloads (and from its first ref otherwise), and stay for good: adding them at the first
    // offload would change the start of every later request — tools and system prompt come
    // before the messages — and void the whole cached prefix once per session.
    // Under the cost-aware schedule they arrive with the first ref instead: that first offload
    // was chosen knowing it rewrites the prefix, and a session that never offloads never pays —
    // unless the host's own prefix dwarfs them (at least `HOST_PREFIX_PER_TOOL` times their
    // size, as Claude Code's ~25k-token prompt and tools): then they add at most 5 % per call
    // from the start, and adding them later would rewrite all of it.
    let has_refs = !state.stored_refs.is_empty();
    let from_start = fetch_tool_from_start(policy, &request);
    let (system_prompt_addition, tools) = if (has_refs || from_start) && request.fetch_available {
        (
            Some(REF_ID_INSTRUCTION.to_owned()),
            vec![fetch::tool_spec()],
        )
    } else {
        (None, Vec::new())
    };
    state.fetch_tool_sent = !tools.is_empty();
    state.last_request_ms = Some(request.now_ms);
    // This request reads or writes the provider's prompt cache: the pruning clock starts again.
    state.prune_clock.touch(request.now_ms);
    let estimated_tokens = estimate_with_memo(&mut state.estimates, &messages);
    report.timings_us.estimate = lap(&mut clock);
    Ok(Assembled {
        messages,
        system_prompt_addition,
        tools,
        estimated_tokens,
        report,
        elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

/// Offload under the policy's schedule.
fn run_offload(
    policy: &Policy,
    state: &mut SessionState,
    messages: Vec<Message>,
    request: &AssembleRequest<'_>,
) -> skald_core::pipeline::offload::OffloadOutcome {
    match &policy.schedule {
        OffloadSchedule::Immediate => {
            let outcome = offload(
                messages,
                &policy.offload,
                &mut state.offload_cache,
                |_, _| true,
            );
            for item in &outcome.report.offloaded {
                state.offloaded_calls.insert(item.call_id.clone());
            }
            outcome
        }
        OffloadSchedule::CacheAware {
            keep_recent_assistants,
            immediate_over_chars,
        } => {
            // A result leaves once it is older than the last `keep_recent_assistants` assistant
            // turns: the model saw it in full while it acted on it, and the cache miss its
            // leaving causes covers only the few messages after it. Decisions are sticky.
            let cutoff = recent_cutoff(&messages, *keep_recent_assistants);
            let sticky = &state.offloaded_calls;
            let mut outcome = offload(
                messages,
                &policy.offload,
                &mut state.offload_cache,
                |index, result| {
                    index < cutoff
                        || sticky.contains(&result.call_id)
                        || result.text_chars() > *immediate_over_chars
                },
            );
            // The bulk of old tool calls (a written file, an edit's text) follows the same rule.
            let arguments = offload_arguments(
                outcome.messages,
                &policy.offload,
                &mut state.arguments_cache,
                |index, call| index < cutoff || sticky.contains(&call.id),
            );
            outcome.messages = arguments.messages;
            outcome.new_refs.extend(arguments.new_refs);
            outcome.report.offloaded.extend(arguments.report.offloaded);
            for item in &outcome.report.offloaded {
                let call_id = item.call_id.split('#').next().unwrap_or(&item.call_id);
                state.offloaded_calls.insert(call_id.to_owned());
            }
            outcome
        }
        OffloadSchedule::CostAware {
            keep_recent_assistants,
            immediate_over_chars,
            remaining_calls_ratio,
            first_offload_calls_ratio,
            first_offload_min_calls,
            fetch_tool_from_start: _,
            estimate_margin,
        } => cost_aware_offload(
            policy,
            state,
            messages,
            request,
            CostAwareKnobs {
                keep_recent_assistants: *keep_recent_assistants,
                immediate_over_chars: *immediate_over_chars,
                remaining_calls_ratio: *remaining_calls_ratio,
                first_offload_calls_ratio: first_offload_calls_ratio
                    .unwrap_or(*remaining_calls_ratio),
                first_offload_min_calls: *first_offload_min_calls,
                estimate_margin: *estimate_margin,
            },
        ),
    }
}

/// The `cost-aware` schedule's settings.
#[derive(Debug, Clone, Copy)]
struct CostAwareKnobs {
    keep_recent_assistants: usize,
    immediate_over_chars: usize,
    remaining_calls_ratio: f64,
    first_offload_calls_ratio: f64,
    first_offload_min_calls: f64,
    estimate_margin: f64,
}

/// The sticky mark of an offloaded call's arguments, apart from its result's (the call id): a
/// call whose result left keeps its arguments until they pay for leaving, and the other way round.
fn arguments_mark(call_id: &str) -> String {
    format!("{call_id}#arguments")
}

/// How many times the fetch tool's size the host's own prefix must be for the cost-aware
/// schedule to send the tool from a session's first call.
const HOST_PREFIX_PER_TOOL: u64 = 20;

/// Whether the fetch tool and its instruction are in every request of the session from its
/// first call: when the policy says so, or when the host's own prefix dwarfs them (at least
/// `HOST_PREFIX_PER_TOOL` times their size, as Claude Code's ~25k-token prompt and tools).
fn fetch_tool_from_start(policy: &Policy, request: &AssembleRequest<'_>) -> bool {
    policy.offload.enabled
        && (policy.schedule.fetch_tool_from_start()
            || request.host_prefix_tokens >= HOST_PREFIX_PER_TOOL * fetch_tool_tokens())
}

/// Estimated tokens of the fetch tool's definition and the REF_ID instruction, which the first
/// offload of a cost-aware session adds to every later request. Sized once: both are constants.
fn fetch_tool_tokens() -> u64 {
    static TOKENS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOKENS.get_or_init(|| {
        let spec = fetch::tool_spec();
        let chars = spec.name.len()
            + spec.description.as_ref().map_or(0, String::len)
            + spec.parameters.to_string().len()
            + REF_ID_INSTRUCTION.len();
        chars.div_ceil(4) as u64
    })
}

/// Offload under the `cost-aware` schedule: the results (and long arguments) the model has seen
/// become pending; [`plan_rewrite`] says which of them leave in this request, weighing the
/// tokens they remove over the calls the run is expected to make against the cache write their
/// rewrite causes. Offloaded ones stay offloaded.
fn cost_aware_offload(
    policy: &Policy,
    state: &mut SessionState,
    messages: Vec<Message>,
    request: &AssembleRequest<'_>,
    knobs: CostAwareKnobs,
) -> skald_core::pipeline::offload::OffloadOutcome {
    let settings = &policy.offload;
    let cutoff = recent_cutoff(&messages, knobs.keep_recent_assistants);

    // What the prompt cache holds: the leading messages this request shares with the previous
    // one, sent within the TTL. Decisions are sticky and per message, so equal inputs give
    // equal outputs up to the first new decision.
    if state.estimates.len() > 100_000 {
        state.estimates.clear();
    }
    let identities: Vec<u128> = messages.iter().map(quick_message_identity).collect();
    let message_tokens: Vec<u64> = messages
        .iter()
        .zip(&identities)
        .map(|(message, identity)| {
            *state
                .estimates
                .entry(*identity)
                .or_insert_with(|| estimate_message_tokens(message))
        })
        .collect();
    let warm = state.cache_warm_at(request.now_ms, policy.cache_ttl_ms);
    let cached_messages = if warm {
        identities
            .iter()
            .zip(&state.previous_offload_input)
            .take_while(|(now, before)| now == before)
            .count()
    } else {
        0
    };
    state.previous_offload_input = identities;

    // Pending: what the model has seen (older than the recent turns, or too large to keep for
    // them) and has not left yet.
    let placeholder = settings.placeholder_chars();
    let saved = |chars: usize| (chars.saturating_sub(placeholder) / 4) as u64;
    let mut pending: Vec<Pending> = Vec::new();
    let mut keys: Vec<(usize, String, bool)> = Vec::new();
    for result in eligible_results(&messages, settings, &mut state.offload_cache) {
        let recent = result.message_index >= cutoff && result.chars <= knobs.immediate_over_chars;
        if recent || state.offloaded_calls.contains(&result.call_id) {
            continue;
        }
        pending.push(Pending {
            message_index: result.message_index,
            saved_tokens: saved(result.chars),
        });
        keys.push((result.message_index, result.call_id, false));
    }
    for (message_index, message) in messages.iter().enumerate().take(cutoff) {
        if message.role != Role::Assistant {
            continue;
        }
        for call in message.tool_calls() {
            let chars = offloadable_argument_chars(call, settings);
            if chars == 0 || state.offloaded_calls.contains(&arguments_mark(&call.id)) {
                continue;
            }
            pending.push(Pending {
                message_index,
                saved_tokens: saved(chars),
            });
            keys.push((message_index, call.id.clone(), true));
        }
    }
    // The tool is in this request already when it was in the last one or goes in from the
    // start; otherwise the first offload brings it.
    let first_offload_tokens =
        (!state.fetch_tool_sent && !fetch_tool_from_start(policy, request)).then(fetch_tool_tokens);
    let shape = RequestShape {
        message_tokens: &message_tokens,
        cached_messages,
        cached_host_tokens: if warm { request.host_prefix_tokens } else { 0 },
        first_offload_tokens,
        calls_so_far: state.requests_assembled,
        min_remaining_calls: if first_offload_tokens.is_some() {
            knobs.first_offload_min_calls
        } else {
            0.0
        },
    };
    let ratio = if shape.first_offload_tokens.is_some() {
        knobs.first_offload_calls_ratio
    } else {
        knobs.remaining_calls_ratio
    };
    let plan = plan_rewrite(
        &shape,
        &pending,
        policy.prices,
        ratio,
        knobs.estimate_margin,
    );
    let mut leaving_results: HashSet<(usize, &str)> = HashSet::new();
    let mut leaving_arguments: HashSet<(usize, &str)> = HashSet::new();
    for index in plan.iter().flat_map(|plan| plan.leave.iter()) {
        if let Some((message_index, call_id, is_arguments)) = keys.get(*index) {
            if *is_arguments {
                leaving_arguments.insert((*message_index, call_id.as_str()));
            } else {
                leaving_results.insert((*message_index, call_id.as_str()));
            }
        }
    }

    let sticky = &state.offloaded_calls;
    let mut outcome = offload(
        messages,
        settings,
        &mut state.offload_cache,
        |index, result| {
            sticky.contains(&result.call_id)
                || leaving_results.contains(&(index, result.call_id.as_str()))
        },
    );
    let arguments = offload_arguments(
        outcome.messages,
        settings,
        &mut state.arguments_cache,
        |index, call| {
            sticky.contains(&arguments_mark(&call.id))
                || leaving_arguments.contains(&(index, call.id.as_str()))
        },
    );
    for item in &outcome.report.offloaded {
        state.offloaded_calls.insert(item.call_id.clone());
    }
    for item in &arguments.report.offloaded {
        let call_id = item.call_id.split('#').next().unwrap_or(&item.call_id);
        state.offloaded_calls.insert(arguments_mark(call_id));
    }
    outcome.messages = arguments.messages;
    outcome.new_refs.extend(arguments.new_refs);
    outcome.report.offloaded.extend(arguments.report.offloaded);
    outcome.report.deferred += arguments.report.deferred;
    outcome
}
