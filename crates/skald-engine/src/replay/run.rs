//! The replay's run: each recorded model call of a transcript made again through the product's
//! own path — an [`Engine`] over in-memory stores, the client's request brought into the session
//! ([`Turn::bring_in`]) and the engine's [`TurnLoop`] preparing every call (the pipeline, memory
//! recall and the memory upload, skald's threshold compaction) — with a scripted model that
//! answers each call with the transcript's recorded answer. When that answer uses an identifier
//! the prepared request no longer shows but holds behind a ref, the model first fetches it
//! (`fetch_original_data`, grepping for what it needs): the hidden round is run and recorded by
//! the loop and billed as the extra call it is.
//!
//! Every model call the loop makes is billed ([`Meter`]): by the replay's own cache, and with a
//! [`HostFit`](super::HostFit) as the host's provider billed it.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use serde_json::json;
use skald_core::codec::claude_code::request_start;
use skald_core::identifiers::extract_identifiers;
use skald_core::ids::SessionId;
use skald_core::message::{Block, Extra, Message, Role, ToolCall, Usage};
use skald_core::pipeline::offload::{FETCH_TOOL_NAME, text_of};
use skald_core::pipeline::policy::Policy;
use skald_core::pipeline::prune::PruneAction;
use skald_core::refs::{RefId, ref_ids_in};
use skald_core::tokens::{TokenCounter, message_fingerprint};
use tokio_util::sync::CancellationToken;

use super::prefix::{ObservedCall, PrefixTracker};
use super::{
    HostBill, HostCall, MISSED_EXAMPLES, MessageFacts, PolicyFigures, ReplaySettings, Source,
    assistant_text, call_request, call_time, median, ratio, shows, tools_segment,
};
use crate::accounting::{CacheAccount, Segment};
use crate::engine::{BringInError, Engine, EngineConfig, OpenError, PrepareInput};
use crate::recovery::{RecoveryError, RecoverySettings};
use crate::{EngineError, MemoryIdentityError, PreparedCall, TurnLoop, WholeAnswer, ingest};

/// Why a replay stopped; nothing outside its own in-memory stores was touched.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The replay's in-memory stores could not be opened.
    #[error("cannot open the replay's in-memory stores: {0}")]
    Open(#[from] OpenError),
    /// The engine failed on one of the replayed calls.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The turn loop refused a call (its settings, or skald's own failure while preparing).
    #[error("the turn loop: {0}")]
    Turn(#[from] RecoveryError),
}

impl From<BringInError> for ReplayError {
    fn from(error: BringInError) -> ReplayError {
        match error {
            BringInError::Engine(error) => ReplayError::Engine(error),
            // The replay never continues from a response id.
            BringInError::UnknownResponse { response_id } => {
                ReplayError::Engine(EngineError::InvalidInput {
                    field: "previous_response_id",
                    reason: format!("{response_id:?} is not in the replayed session"),
                })
            }
        }
    }
}

/// The session every replayed call of a transcript goes to.
const REPLAY_SESSION: &str = "replay";

/// Whether `policy` is the baseline: the host alone, without skald. Its calls go through the
/// same loop with skald's memory and threshold compaction off (the host compacted on its own,
/// as the transcript shows).
pub fn is_baseline(policy: &Policy) -> bool {
    policy.name == "none"
}

/// Replays every recorded call of `messages` under `policy` through the engine's turn loop (see
/// the module docs).
pub async fn replay(
    messages: &[Message],
    policy: &Policy,
    settings: &ReplaySettings,
) -> Result<PolicyFigures, ReplayError> {
    let skald = !is_baseline(policy);
    let mut config = EngineConfig::new(policy.clone());
    config.window_tokens = settings.context_window_tokens;
    // A replay's window is its own setting (`--window`), whatever model the transcript names.
    config.windows_by_model = false;
    config.pricing = settings.pricing;
    config.memory.enabled = skald && settings.memory;
    config.compaction.enabled = skald && settings.compaction;
    let engine = Engine::in_memory(config)?;
    let identity = match engine.config().memory.enabled {
        false => None,
        true => Some(engine.memory_identity().map_err(|source| {
            let memory = &engine.config().memory;
            EngineError::MemoryIdentity(Box::new(MemoryIdentityError {
                user: memory.user.clone(),
                agent: memory.agent.clone(),
                source,
            }))
        })?),
    };
    let session = SessionId::parse(REPLAY_SESSION).map_err(|error| EngineError::InvalidInput {
        field: "session",
        reason: error.to_string(),
    })?;
    let tenant = &settings.tenant;
    let recovery = RecoverySettings::default();
    let cancel = CancellationToken::new();
    // Anthropic wants a thinking model's tool calls to be its own: recall then goes into the
    // system prompt instead of a simulated call (as the proxy does).
    let simulated_calls = !messages.iter().any(|message| {
        message
            .content
            .iter()
            .any(|b| matches!(b, Block::Thinking(_)))
    });
    let host_prefix_tokens = settings.host.as_ref().map(|fit| fit.prefix_tokens);
    let mut meter = Meter::new(settings);
    let mut clock_ms: i64 = 0;

    for (index, message) in messages.iter().enumerate() {
        if message.role != Role::Assistant {
            continue;
        }
        meter.scan(messages, index);
        let start = request_start(messages, index);
        let request = call_request(messages, index);
        if request.is_empty() {
            continue;
        }
        let now_ms = call_time(message, clock_ms, settings);
        clock_ms = now_ms;
        // The host's prompt goes with every request and never into the session (as the proxy
        // holds it): billed in front of each call's messages.
        let host_prompt: Vec<Message> = request
            .get(..ingest::prompt_len(&request))
            .unwrap_or_default()
            .to_vec();
        let host_text = ingest::prompt_text(&request);
        let mut turn = engine.begin_turn(tenant, &session).await;
        turn.bring_in(request, None, "replay", identity.as_ref())?;
        let prepare = engine.prepare_context(PrepareInput {
            tenant,
            session: &session,
            model: None,
            system_prompt: host_text.as_deref(),
            tools: &[],
            host_prefix_tokens,
            fetch_available: true,
            now_ms,
            agents_md: None,
            settings: &recovery,
        });
        let recall = identity
            .as_ref()
            .map(|identity| engine.recall_hook(identity, true, simulated_calls));
        let hooks = engine.memory_hooks(identity.is_some(), recall.as_ref());
        let mut turn_loop = TurnLoop::new(&prepare, hooks)?;
        // The host's provider refused the host's request with an overflow: a failure of
        // another request than skald's, which skald's recovery must not act on. The call is
        // billed and the answer stays history, as the transcript has it.
        let host_overflow = skald_llm::overflow::assistant_error_overflow(message).is_some();
        let mut fetched = false;
        let mut model_calls = 0u32;
        loop {
            let compacted_before = compactions(&turn_loop);
            let started = Instant::now();
            let call = turn_loop.prepare(&mut turn, &cancel).await?;
            meter.figures.assemble_samples.push(round_ms(started));
            let report = turn_loop.report();
            let observed = CallNotes {
                message_index: index,
                request_start: start,
                now_ms,
                first: model_calls == 0,
                compacted: compactions(&turn_loop) > compacted_before,
                dropped: model_calls == 0
                    && report
                        .upload
                        .as_ref()
                        .is_some_and(|upload| upload.dropped.is_some()),
                recall_tokens: report
                    .recall
                    .as_ref()
                    .filter(|recall| !recall.kept.is_empty())
                    .map(|recall| recall.tokens_injected),
            };
            let billed = meter.bill(&host_prompt, &call, message, &observed);
            model_calls += 1;
            if host_overflow {
                break;
            }
            let fetch = !fetched
                && !billed.missing.is_empty()
                && call.offered_tools.iter().any(|t| t.name == FETCH_TOOL_NAME);
            let mut answer = if fetch {
                fetched = true;
                fetch_answer(&billed.missing, settings)
            } else {
                message.clone()
            };
            // The provider reports the request it was sent, not the host's recorded one: the
            // usage calibration learns from is the call's as billed (none without a host fit,
            // whose recorded usage would be another request's).
            answer.meta.usage = billed.usage.map(|usage| Usage {
                output: message.meta.usage.map_or(0, |recorded| recorded.output),
                ..usage
            });
            match turn_loop
                .on_whole_answer(&mut turn, &answer, &cancel)
                .await?
            {
                WholeAnswer::Continue { .. } if fetch => {
                    meter.figures.hidden_rounds += 1;
                    meter.figures.fetch_penalty_tokens += billed.input_tokens;
                }
                // The recorded answer called skald's own tools (a transcript recorded through
                // skald with its tools shown to the client): it was the answer all the same.
                // An overflow is not the recorded answer's to cause (see `host_overflow`); were
                // the loop to see one, the recorded call has no other answer to give.
                WholeAnswer::Continue { .. }
                | WholeAnswer::Final { .. }
                | WholeAnswer::Retry(_)
                | WholeAnswer::GaveUp(_) => break,
            }
        }
        meter.figures.compactions += compactions(&turn_loop) as u64;
        drop(turn_loop);
        drop(turn);
        // An upload's extraction runs in the background; the next call's recall sees its
        // memories as it would after the seconds between two real calls.
        engine.uploads().wait_finished(tenant, &session).await;
    }
    Ok(meter.finish())
}

/// Compactions the loop ran that wrote a checkpoint.
fn compactions(turn_loop: &TurnLoop<'_>) -> usize {
    turn_loop
        .report()
        .compactions
        .iter()
        .filter(|record| record.is_compacted())
        .count()
}

fn round_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}

/// What the loop knows of one model call besides its request.
struct CallNotes {
    /// The recorded call's answer in the transcript.
    message_index: usize,
    /// Where the recorded call's request starts in the transcript.
    request_start: usize,
    now_ms: i64,
    /// The recorded call's first model call (not the one after a hidden round).
    first: bool,
    /// skald compacted the session before this call.
    compacted: bool,
    /// Memory's upload dropped a range from the context before this call.
    dropped: bool,
    /// Estimated tokens of the memories recall injected into this call, when it injected any.
    recall_tokens: Option<u64>,
}

/// One model call billed.
struct CallBill {
    /// What the recorded answer uses that the request holds only behind a ref (on the recorded
    /// call's first model call).
    missing: Vec<Missing>,
    /// The input the host's provider would have reported for it (with a host fit).
    usage: Option<Usage>,
    /// Its input tokens, as the replay's own cache billed them.
    input_tokens: u64,
}

/// An identifier the recorded answer uses that the request holds only behind a ref.
struct Missing {
    identifier: String,
    ref_id: RefId,
}

/// The model's answer that fetches what it is missing: one `fetch_original_data` call per ref,
/// grepping for the identifiers it needs with a little context, at most
/// `fetch_penalty_max_tokens` of each original.
fn fetch_answer(missing: &[Missing], settings: &ReplaySettings) -> Message {
    let mut by_ref: Vec<(&RefId, Vec<String>)> = Vec::new();
    for item in missing {
        let pattern = regex::escape(&item.identifier);
        match by_ref.iter_mut().find(|(id, _)| *id == &item.ref_id) {
            Some((_, patterns)) => patterns.push(pattern),
            None => by_ref.push((&item.ref_id, vec![pattern])),
        }
    }
    let max_chars = (settings.fetch_penalty_max_tokens * 4).max(200);
    let calls: Vec<Block> = by_ref
        .into_iter()
        .enumerate()
        .map(|(n, (ref_id, patterns))| {
            Block::ToolCall(ToolCall {
                id: format!("replay_fetch_{n}"),
                name: FETCH_TOOL_NAME.to_owned(),
                arguments: json!({
                    "ref_ids": [ref_id.as_str()],
                    "grep": patterns.join("|"),
                    "context": 2,
                    "max_chars": max_chars,
                }),
                arguments_text: None,
                extra: Extra::new(),
            })
        })
        .collect();
    Message::new(Role::Assistant, calls)
}

/// The replay's measurements over one policy's calls.
struct Meter<'s> {
    settings: &'s ReplaySettings,
    account: CacheAccount,
    counter: TokenCounter,
    facts: MessageFacts,
    figures: PolicyFigures,
    first_seen: HashMap<String, Source>,
    scanned: usize,
    trimmed: HashSet<String>,
    cleared: HashSet<String>,
    truncated: HashSet<String>,
    offloaded: HashSet<String>,
    prefix: PrefixTracker,
    host_bill: Option<HostBill>,
}

impl<'s> Meter<'s> {
    fn new(settings: &'s ReplaySettings) -> Meter<'s> {
        Meter {
            settings,
            account: CacheAccount::new(settings.cache_ttl_ms),
            counter: TokenCounter::new(settings.encoding),
            facts: MessageFacts::default(),
            figures: PolicyFigures::default(),
            first_seen: HashMap::new(),
            scanned: 0,
            trimmed: HashSet::new(),
            cleared: HashSet::new(),
            truncated: HashSet::new(),
            offloaded: HashSet::new(),
            prefix: PrefixTracker::default(),
            host_bill: settings
                .host
                .clone()
                .map(|fit| HostBill::new(fit, settings.provider_cache)),
        }
    }

    /// Records where identifiers first appeared, for everything before the call answered by
    /// `messages[index]`.
    fn scan(&mut self, messages: &[Message], index: usize) {
        for earlier in messages.get(self.scanned..index).unwrap_or_default() {
            if earlier.is_model_visible() {
                // Each result's identifiers are attributed to that result's call; whatever else
                // the message says counts as "elsewhere".
                for result in earlier.tool_results() {
                    for identifier in extract_identifiers(&text_of(result)) {
                        self.first_seen
                            .entry(identifier)
                            .or_insert_with(|| Source::ToolResult {
                                message_index: self.scanned,
                                call_id: result.call_id.clone(),
                            });
                    }
                }
                for identifier in extract_identifiers(&assistant_text(earlier)) {
                    self.first_seen
                        .entry(identifier)
                        .or_insert(Source::Elsewhere);
                }
            }
            self.scanned += 1;
        }
    }

    /// Bills one model call: its tools, skald's system addition, then each message. On the
    /// recorded call's first model call, also measures what it kept of the identifiers the
    /// recorded `answer` uses, and returns those it shows only behind a ref.
    fn bill(
        &mut self,
        host_prompt: &[Message],
        call: &PreparedCall,
        answer: &Message,
        notes: &CallNotes,
    ) -> CallBill {
        let report = &call.assemble;
        for item in &report.offload.offloaded {
            self.offloaded.insert(item.ref_id.clone());
        }
        for change in &report.prune.changes {
            match change.action {
                PruneAction::Trimmed => self.trimmed.insert(change.call_id.clone()),
                PruneAction::Cleared => self.cleared.insert(change.call_id.clone()),
            };
        }
        for change in &report.truncate.changes {
            self.truncated.insert(change.call_id.clone());
        }
        if let Some(tokens) = notes.recall_tokens {
            self.figures.recalls += 1;
            self.figures.recall_tokens += tokens;
        }

        let sent: Vec<Message>;
        let messages = if host_prompt.is_empty() {
            &call.request.messages
        } else {
            sent = host_prompt
                .iter()
                .chain(&call.request.messages)
                .cloned()
                .collect();
            &sent
        };
        let mut leading = Vec::with_capacity(2);
        leading.extend(tools_segment(&call.offered_tools, &mut self.counter));
        if let Some(addition) = &call.system_addition {
            let system = Message::text(Role::System, addition.clone());
            leading.push(Segment {
                fingerprint: message_fingerprint(&system),
                tokens: self.counter.count_message(&system),
            });
        }
        let mut segments = Vec::with_capacity(messages.len() + leading.len());
        segments.extend_from_slice(&leading);
        let mut fingerprints = Vec::with_capacity(messages.len());
        for message in messages {
            let fingerprint = message_fingerprint(message);
            fingerprints.push(fingerprint);
            segments.push(Segment {
                fingerprint,
                tokens: self.counter.count_message(message),
            });
            self.facts.identifiers(fingerprint, message);
        }
        self.prefix.observe(ObservedCall {
            leading: leading.iter().map(|segment| segment.fingerprint).collect(),
            fingerprints: &fingerprints,
            messages,
            report,
            compacted: notes.compacted,
            dropped: notes.dropped,
            recalled: notes.recall_tokens.is_some(),
        });
        let bill = self.account.bill(segments, notes.now_ms);
        let figures = &mut self.figures;
        figures.input_tokens += bill.total_tokens;
        figures.peak_context_tokens = figures.peak_context_tokens.max(bill.total_tokens);
        figures.cache_read_tokens += bill.cache_read_tokens;
        figures.cache_write_tokens += bill.cache_write_tokens;
        figures.cost_usd +=
            self.settings
                .pricing
                .cost(0, bill.cache_write_tokens, bill.cache_read_tokens);
        let usage = self.host_bill.as_mut().map(|host| {
            let call = HostCall {
                message_index: notes.message_index,
                leading: &leading,
                messages,
                now_ms: notes.now_ms,
                fetch_tokens: 0,
            };
            host.bill(&call, &mut self.counter, &self.settings.pricing)
        });
        if !notes.first {
            return CallBill {
                missing: Vec::new(),
                usage,
                input_tokens: bill.total_tokens,
            };
        }
        figures.calls += 1;
        figures.context_per_call.push(bill.total_tokens);
        CallBill {
            missing: self.retention(messages, &fingerprints, answer, notes.request_start),
            usage,
            input_tokens: bill.total_tokens,
        }
    }

    /// What the request (`messages`, fingerprinted) kept of the identifiers `answer` uses that
    /// first appeared in a tool result since `start`; returns those only behind a ref.
    fn retention(
        &mut self,
        messages: &[Message],
        fingerprints: &[u128],
        answer: &Message,
        start: usize,
    ) -> Vec<Missing> {
        let mut visible: HashSet<&str> = HashSet::new();
        for fingerprint in fingerprints {
            if let Some(ids) = self.facts.identifiers.get(fingerprint) {
                visible.extend(ids.iter().map(String::as_str));
            }
        }
        // The ref each tool call's result went behind, if it did.
        let refs_by_call: HashMap<&str, Option<RefId>> = messages
            .iter()
            .flat_map(|m| m.tool_results())
            .map(|r| {
                (
                    r.call_id.as_str(),
                    ref_ids_in(&text_of(r)).into_iter().next(),
                )
            })
            .collect();
        let used: HashSet<String> = extract_identifiers(&assistant_text(answer))
            .into_iter()
            .collect();
        let mut used: Vec<String> = used.into_iter().collect();
        // In a fixed order: the fetch the model makes must not depend on hashing.
        used.sort();
        let retention = &mut self.figures.retention;
        let mut missing = Vec::new();
        for identifier in used {
            let Some(Source::ToolResult {
                message_index,
                call_id,
            }) = self.first_seen.get(&identifier)
            else {
                continue;
            };
            if *message_index < start {
                continue;
            }
            retention.uses += 1;
            let shown = shows(&visible, &identifier);
            let behind_ref = refs_by_call.get(call_id.as_str()).cloned().flatten();
            if shown {
                retention.visible_uses += 1;
            } else if retention.missed.len() < MISSED_EXAMPLES {
                retention.missed.push(identifier.clone());
            }
            if shown || behind_ref.is_some() {
                retention.recoverable_uses += 1;
            }
            if let (false, Some(ref_id)) = (shown, behind_ref) {
                missing.push(Missing { identifier, ref_id });
            }
        }
        missing
    }

    fn finish(mut self) -> PolicyFigures {
        let mut figures = self.figures;
        figures.host = self.host_bill.take().map(|host| host.figures);
        figures.prefix_breaks = self.prefix.breaks;
        figures.retention.visible = ratio(figures.retention.visible_uses, figures.retention.uses);
        figures.retention.recoverable =
            ratio(figures.retention.recoverable_uses, figures.retention.uses);
        figures.offloads = self.offloaded.len() as u64;
        figures.trims = self.trimmed.len() as u64;
        figures.clears = self.cleared.len() as u64;
        figures.truncations = self.truncated.len() as u64;
        figures.assemble_ms = median(&figures.assemble_samples);
        figures
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::Value;

    use super::*;

    /// The JSON arguments of the fetch calls of `answer`.
    fn fetch_arguments(answer: &Message) -> Vec<Value> {
        answer
            .tool_calls()
            .map(|call| call.arguments.clone())
            .collect()
    }

    #[test]
    fn the_fetch_greps_each_ref_once_for_every_identifier_it_needs() {
        let a = RefId::parse(&"a".repeat(64)).unwrap();
        let b = RefId::parse(&"b".repeat(64)).unwrap();
        let missing = [
            Missing {
                identifier: "src/main.rs".to_owned(),
                ref_id: a.clone(),
            },
            Missing {
                identifier: "deadbeef12".to_owned(),
                ref_id: b.clone(),
            },
            Missing {
                identifier: "lib/a+b.rs".to_owned(),
                ref_id: a.clone(),
            },
        ];
        let answer = fetch_answer(&missing, &ReplaySettings::default());
        let arguments = fetch_arguments(&answer);
        assert_eq!(arguments.len(), 2, "one call per ref");
        assert_eq!(arguments[0]["ref_ids"], json!([a.as_str()]));
        assert_eq!(arguments[0]["grep"], json!(r"src/main\.rs|lib/a\+b\.rs"));
        assert_eq!(arguments[1]["grep"], json!("deadbeef12"));
        assert_eq!(arguments[0]["max_chars"], json!(8_000));
        assert!(answer.tool_calls().all(|call| call.name == FETCH_TOOL_NAME));
    }
}
