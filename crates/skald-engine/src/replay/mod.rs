//! `replay`: re-creates each model call of a real transcript and runs a policy's pipeline call
//! after call as a host would (state kept: refs, sticky decisions, the pruning clock driven by the
//! transcript's timestamps), then measures what the provider would have billed and what the model
//! could still see.
//!
//! Measures, per policy:
//! - input tokens (BPE) summed over calls and the peak context;
//! - prompt-cache accounting ([`CacheAccount`]) and cost under [`Pricing`];
//! - retention: for every identifier (seed 001's pattern) an assistant message uses that first
//!   appeared in an earlier tool result of that call's request, whether the assembled request
//!   still shows it (`visible`) or shows it or a ref to the output it came from (`recoverable`);
//!   each use that is only recoverable is charged as one fetch of up to 2,000 tokens;
//! - what the stages did and how long `assemble` took;
//! - with a [`HostFit`] (from the transcript's recorded usage), the same calls billed as the
//!   host's provider billed them: its prefix, tokenizer, cache breakpoints and TTL
//!   ([`HostFigures`], `host`), so `none` can be checked against [`Billed`] and a policy's saving
//!   read as a share of the real bill.

mod host;
mod prefix;

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use skald_core::codec::claude_code::request_start;
use skald_core::identifiers::extract_identifiers;
use skald_core::ids::Tenant;
use skald_core::message::{Block, Message, Role, ToolSpec};
use skald_core::pipeline::offload::text_of;
use skald_core::pipeline::policy::Policy;
use skald_core::refs::contains_ref;
use skald_core::tokens::{Encoding, TokenCounter, message_fingerprint};
use skald_store::RefStore;

use crate::EngineError;
use crate::accounting::{CacheAccount, Pricing, Segment};
use crate::assemble::{AssembleRequest, assemble};
use crate::session::SessionState;

pub use host::{
    HostBill, HostCall, HostFigures, HostFit, ProviderCache, RecordedCall, fit_host, provider_view,
};
pub use prefix::PrefixBreaks;
use prefix::PrefixTracker;

/// How calls are replayed and billed.
#[derive(Debug, Clone)]
pub struct ReplaySettings {
    /// The context window every replayed call is assembled for, in tokens.
    pub context_window_tokens: u64,
    /// How long the prompt cache stays warm after a request, in milliseconds (5 minutes by
    /// default).
    pub cache_ttl_ms: i64,
    /// The prices the replayed calls and the transcript's own calls are costed at.
    pub pricing: Pricing,
    /// Most tokens one fetch of an offloaded output is charged.
    pub fetch_penalty_max_tokens: u64,
    /// The BPE encoding input tokens are counted with.
    pub encoding: Encoding,
    /// Milliseconds between calls when a transcript has no timestamps.
    pub default_call_gap_ms: i64,
    /// The tenant the replay's refs are stored under.
    pub tenant: Tenant,
    /// The host as its recorded usage shows it ([`host_fit`]); with it, every policy's calls are
    /// also billed as the host's provider billed them ([`PolicyFigures::host`]).
    pub host: Option<HostFit>,
    /// How the transcript's provider caches prompts (Anthropic's for Claude Code's transcripts),
    /// for the `host` figures.
    pub provider_cache: ProviderCache,
}

impl Default for ReplaySettings {
    fn default() -> ReplaySettings {
        ReplaySettings {
            context_window_tokens: 200_000,
            cache_ttl_ms: 300_000,
            pricing: Pricing::default(),
            fetch_penalty_max_tokens: 2_000,
            encoding: Encoding::O200kBase,
            default_call_gap_ms: 10_000,
            // "replay" is a well-formed name; the fallback is never taken.
            tenant: Tenant::parse("replay").unwrap_or_default(),
            host: None,
            provider_cache: ProviderCache::default(),
        }
    }
}

/// Identifier uses and what a request kept of them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Retention {
    /// Share of uses the request still shows.
    pub visible: f64,
    /// Share of uses the request shows or can fetch through a ref.
    pub recoverable: f64,
    /// Identifier uses counted: identifiers an assistant message uses that first appeared in an
    /// earlier tool result of the same request.
    pub uses: u64,
    /// Uses whose identifier the assembled request still shows: as one of its identifiers, or
    /// verbatim as the directory of a path it shows.
    pub visible_uses: u64,
    /// Uses whose identifier the assembled request shows, or whose tool result it holds as a ref
    /// the model can fetch.
    pub recoverable_uses: u64,
    /// The first identifiers (up to [`MISSED_EXAMPLES`]) used while the request did not show
    /// them: what to look at when visible retention drops.
    pub missed: Vec<String>,
}

/// How many identifiers [`Retention::missed`] keeps.
pub const MISSED_EXAMPLES: usize = 20;

/// One policy's figures over one or more transcripts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PolicyFigures {
    /// Model calls replayed (one per assistant message with a non-empty request).
    pub calls: u64,
    /// BPE input tokens summed over all calls.
    pub input_tokens: u64,
    /// The largest request of any call, in BPE tokens.
    pub peak_context_tokens: u64,
    /// Input tokens billed as cache reads, summed over calls.
    pub cache_read_tokens: u64,
    /// Input tokens billed as cache writes, summed over calls (everything not read from the cache).
    pub cache_write_tokens: u64,
    /// Tokens charged for fetches: each use only recoverable through a ref costs one fetch of
    /// its original, at most `fetch_penalty_max_tokens`.
    pub fetch_penalty_tokens: u64,
    /// Dollars under the settings' pricing: cache reads, cache writes and the fetch penalty.
    pub cost_usd: f64,
    /// What the requests kept of the identifiers the model went on to use.
    pub retention: Retention,
    /// Distinct refs the pipeline created by offloading results or arguments.
    pub offloads: u64,
    /// Distinct tool calls whose result pruning trimmed.
    pub trims: u64,
    /// Distinct tool calls whose result pruning cleared.
    pub clears: u64,
    /// Distinct tool calls whose result truncation cut.
    pub truncations: u64,
    /// Median wall time of one `assemble`, in milliseconds.
    pub assemble_ms: f64,
    /// Calls whose request did not start with the previous call's, by cause.
    pub prefix_breaks: PrefixBreaks,
    /// The calls billed as the host's provider billed them (with the settings' [`HostFit`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostFigures>,
    /// Context tokens of every call, in order (for charts).
    #[serde(skip)]
    pub context_per_call: Vec<u64>,
    #[serde(skip)]
    assemble_samples: Vec<f64>,
}

impl PolicyFigures {
    /// Adds another transcript's figures.
    pub fn absorb(&mut self, other: PolicyFigures) {
        self.calls += other.calls;
        self.input_tokens += other.input_tokens;
        self.peak_context_tokens = self.peak_context_tokens.max(other.peak_context_tokens);
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.fetch_penalty_tokens += other.fetch_penalty_tokens;
        self.cost_usd += other.cost_usd;
        let r = &mut self.retention;
        r.uses += other.retention.uses;
        r.visible_uses += other.retention.visible_uses;
        r.recoverable_uses += other.retention.recoverable_uses;
        let room = MISSED_EXAMPLES.saturating_sub(r.missed.len());
        r.missed
            .extend(other.retention.missed.into_iter().take(room));
        r.visible = ratio(r.visible_uses, r.uses);
        r.recoverable = ratio(r.recoverable_uses, r.uses);
        self.offloads += other.offloads;
        self.trims += other.trims;
        self.clears += other.clears;
        self.truncations += other.truncations;
        self.prefix_breaks.absorb(other.prefix_breaks);
        self.context_per_call.extend(other.context_per_call);
        self.assemble_samples.extend(other.assemble_samples);
        self.assemble_ms = median(&self.assemble_samples);
        self.host = match (self.host, other.host) {
            (Some(mut mine), Some(theirs)) => {
                mine.absorb(theirs);
                Some(mine)
            }
            (mine, theirs) => mine.or(theirs),
        };
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        1.0
    } else {
        part as f64 / whole as f64
    }
}

fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let value = sorted[sorted.len() / 2];
    (value * 1000.0).round() / 1000.0
}

/// What the transcript's provider actually billed, from its recorded usage.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Billed {
    /// Model calls with recorded usage (assistant messages that have it).
    pub calls: u64,
    /// Input tokens the provider read: uncached, cache reads and cache writes.
    pub input_tokens: u64,
    /// Input tokens the provider read from its cache.
    pub cache_read_tokens: u64,
    /// Input tokens the provider wrote to its cache.
    pub cache_write_tokens: u64,
    /// Of those, the tokens written with a one-hour lifetime (priced apart).
    pub cache_write_1h_tokens: u64,
    /// Input tokens the provider neither read from nor wrote to its cache.
    pub uncached_input_tokens: u64,
    /// Dollars for those tokens under the replay's pricing.
    pub cost_usd: f64,
}

impl Billed {
    /// Adds another transcript's figures to these.
    pub fn absorb(&mut self, other: Billed) {
        self.calls += other.calls;
        self.input_tokens += other.input_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cache_write_1h_tokens += other.cache_write_1h_tokens;
        self.uncached_input_tokens += other.uncached_input_tokens;
        self.cost_usd += other.cost_usd;
    }
}

/// Sums the usage the transcript recorded for its model calls (one per assistant message).
pub fn billed(messages: &[Message], pricing: &Pricing) -> Option<Billed> {
    let mut billed = Billed::default();
    for message in messages.iter().filter(|m| m.role == Role::Assistant) {
        let Some(usage) = message.meta.usage else {
            continue;
        };
        billed.calls += 1;
        billed.input_tokens += usage.total_input();
        billed.cache_read_tokens += usage.cache_read;
        billed.cache_write_tokens += usage.cache_write;
        billed.cache_write_1h_tokens += usage.cache_write_1h.min(usage.cache_write);
        billed.uncached_input_tokens += usage.input;
        billed.cost_usd += pricing.cost_of_usage(&usage);
    }
    (billed.calls > 0).then_some(billed)
}

/// The host as the transcript's recorded usage shows it: each call with usage, its request's
/// messages counted as the provider kept them, fitted by [`fit_host`]; `None` when no call
/// recorded usage.
pub fn host_fit(messages: &[Message], settings: &ReplaySettings) -> Option<HostFit> {
    let mut counter = TokenCounter::new(settings.encoding);
    let mut calls = Vec::new();
    let mut previous: Vec<u128> = Vec::new();
    let mut clock_ms: i64 = 0;
    for (index, message) in messages.iter().enumerate() {
        if message.role != Role::Assistant {
            continue;
        }
        let request = call_request(messages, index);
        if request.is_empty() {
            continue;
        }
        let at_ms = call_time(message, clock_ms, settings);
        clock_ms = at_ms;
        let Some(usage) = message.meta.usage else {
            continue;
        };
        let view = provider_view(&request, settings.provider_cache);
        let fingerprints: Vec<u128> = view.iter().map(message_fingerprint).collect();
        calls.push(RecordedCall {
            message_index: index,
            at_ms,
            counted_tokens: counter.count_messages(&view),
            recorded_tokens: usage.total_input(),
            cache_read_tokens: usage.cache_read,
            one_hour_writes: usage.cache_write_1h > 0,
            extends_previous: !previous.is_empty() && fingerprints.starts_with(&previous),
        });
        previous = fingerprints;
    }
    fit_host(&calls, settings.cache_ttl_ms, settings.provider_cache)
}

/// When the call answered by `message` was made: its timestamp, else the settings' gap after the
/// call before (`clock_ms`).
fn call_time(message: &Message, clock_ms: i64, settings: &ReplaySettings) -> i64 {
    message
        .meta
        .timestamp
        .as_ref()
        .and_then(|t| t.millis())
        .unwrap_or(clock_ms + settings.default_call_gap_ms)
}

/// The messages the call answered by `messages[index]` was sent: those since the last
/// compaction boundary the model could see.
fn call_request(messages: &[Message], index: usize) -> Vec<Message> {
    let start = request_start(messages, index);
    messages
        .get(start.min(index)..index)
        .unwrap_or_default()
        .iter()
        .filter(|m| m.is_model_visible())
        .cloned()
        .collect()
}

/// Where an identifier first appeared.
#[derive(Debug, Clone)]
enum Source {
    ToolResult {
        message_index: usize,
        call_id: String,
    },
    Elsewhere,
}

/// The text an assistant message shows a reader: text, thinking and tool-call arguments.
fn assistant_text(message: &Message) -> String {
    let mut out = String::new();
    for block in &message.content {
        match block {
            Block::Text(text) => out.push_str(&text.text),
            Block::Thinking(thinking) => out.push_str(&thinking.thinking),
            Block::ToolCall(call) => out.push_str(&call.arguments.to_string()),
            Block::ToolResult(result) => out.push_str(&text_of(result)),
            Block::Image(_) | Block::Opaque(_) => {}
        }
        out.push('\n');
    }
    out
}

/// Identifiers and token counts of messages, remembered by content fingerprint across calls.
#[derive(Default)]
struct MessageFacts {
    identifiers: HashMap<u128, Vec<String>>,
}

impl MessageFacts {
    fn identifiers(&mut self, fingerprint: u128, message: &Message) -> &[String] {
        self.identifiers
            .entry(fingerprint)
            .or_insert_with(|| extract_identifiers(&assistant_text(message)))
    }
}

fn tools_segment(tools: &[ToolSpec], counter: &mut TokenCounter) -> Option<Segment> {
    if tools.is_empty() {
        return None;
    }
    let text: String = tools
        .iter()
        .map(|tool| format!("{} {:?} {}", tool.name, tool.description, tool.parameters))
        .collect();
    let message = Message::text(Role::System, text);
    Some(Segment {
        fingerprint: message_fingerprint(&message) ^ 0x7001,
        tokens: counter.count_message(&message),
    })
}

/// Replays every assistant call of `messages` under `policy`.
pub fn replay_policy<S: RefStore + ?Sized>(
    messages: &[Message],
    policy: &Policy,
    settings: &ReplaySettings,
    store: &S,
) -> Result<PolicyFigures, EngineError> {
    let mut state = SessionState::default();
    let mut account = CacheAccount::new(settings.cache_ttl_ms);
    let mut counter = TokenCounter::new(settings.encoding);
    let mut facts = MessageFacts::default();
    let mut figures = PolicyFigures::default();
    let mut first_seen: HashMap<String, Source> = HashMap::new();
    let mut scanned = 0usize;
    let mut original_tokens: HashMap<String, u64> = HashMap::new();
    let mut trimmed: HashSet<String> = HashSet::new();
    let mut cleared: HashSet<String> = HashSet::new();
    let mut truncated: HashSet<String> = HashSet::new();
    let mut offloaded: HashSet<String> = HashSet::new();
    let mut clock_ms: i64 = 0;
    let mut prefix = PrefixTracker::default();
    let mut host_bill = settings
        .host
        .clone()
        .map(|fit| HostBill::new(fit, settings.provider_cache));

    for (index, message) in messages.iter().enumerate() {
        if message.role != Role::Assistant {
            continue;
        }
        // Record where identifiers first appeared, for everything before this call.
        for earlier in messages.get(scanned..index).unwrap_or_default() {
            if earlier.is_model_visible() {
                // Each result's identifiers are attributed to that result's call; whatever else
                // the message says counts as "elsewhere".
                for result in earlier.tool_results() {
                    for identifier in extract_identifiers(&text_of(result)) {
                        first_seen
                            .entry(identifier)
                            .or_insert_with(|| Source::ToolResult {
                                message_index: scanned,
                                call_id: result.call_id.clone(),
                            });
                    }
                }
                for identifier in extract_identifiers(&assistant_text(earlier)) {
                    first_seen.entry(identifier).or_insert(Source::Elsewhere);
                }
            }
            scanned += 1;
        }
        let start = request_start(messages, index);
        let request = call_request(messages, index);
        if request.is_empty() {
            continue;
        }
        let now_ms = call_time(message, clock_ms, settings);
        clock_ms = now_ms;
        let assembled = assemble(
            store,
            policy,
            &mut state,
            request,
            AssembleRequest {
                tenant: &settings.tenant,
                context_window_tokens: settings.context_window_tokens,
                now_ms,
                fetch_available: true,
                // The transcript's host prompt and tools are not billed here either.
                host_prefix_tokens: 0,
            },
        )?;
        figures.assemble_samples.push(assembled.elapsed_ms);
        for item in &assembled.report.offload.offloaded {
            offloaded.insert(item.ref_id.clone());
        }
        for change in &assembled.report.prune.changes {
            match change.action {
                skald_core::pipeline::prune::PruneAction::Trimmed => {
                    trimmed.insert(change.call_id.clone());
                }
                skald_core::pipeline::prune::PruneAction::Cleared => {
                    cleared.insert(change.call_id.clone());
                }
            }
        }
        for change in &assembled.report.truncate.changes {
            truncated.insert(change.call_id.clone());
        }

        // Bill the request: tools, system addition, then each message.
        let mut leading = Vec::with_capacity(2);
        leading.extend(tools_segment(&assembled.tools, &mut counter));
        if let Some(addition) = &assembled.system_prompt_addition {
            let system = Message::text(Role::System, addition.clone());
            leading.push(Segment {
                fingerprint: message_fingerprint(&system),
                tokens: counter.count_message(&system),
            });
        }
        let mut segments = Vec::with_capacity(assembled.messages.len() + leading.len());
        segments.extend_from_slice(&leading);
        let mut visible_identifiers: HashSet<&str> = HashSet::new();
        let mut fingerprints = Vec::with_capacity(assembled.messages.len());
        for assembled_message in &assembled.messages {
            let fingerprint = message_fingerprint(assembled_message);
            fingerprints.push(fingerprint);
            segments.push(Segment {
                fingerprint,
                tokens: counter.count_message(assembled_message),
            });
        }
        for (assembled_message, fingerprint) in assembled.messages.iter().zip(&fingerprints) {
            facts.identifiers(*fingerprint, assembled_message);
        }
        prefix.observe(
            leading.iter().map(|segment| segment.fingerprint).collect(),
            &fingerprints,
            &assembled.messages,
            &assembled.report,
        );
        for fingerprint in &fingerprints {
            if let Some(ids) = facts.identifiers.get(fingerprint) {
                visible_identifiers.extend(ids.iter().map(String::as_str));
            }
        }
        let bill = account.bill(segments, now_ms);
        figures.calls += 1;
        figures.input_tokens += bill.total_tokens;
        figures.peak_context_tokens = figures.peak_context_tokens.max(bill.total_tokens);
        figures.cache_read_tokens += bill.cache_read_tokens;
        figures.cache_write_tokens += bill.cache_write_tokens;
        figures.context_per_call.push(bill.total_tokens);
        let mut cost = settings
            .pricing
            .cost(0, bill.cache_write_tokens, bill.cache_read_tokens);

        let mut fetched_tokens = 0;

        // Retention of the identifiers this call uses.
        let refs_by_call: HashMap<&str, bool> = assembled
            .messages
            .iter()
            .flat_map(|m| m.tool_results())
            .map(|r| (r.call_id.as_str(), contains_ref(&text_of(r))))
            .collect();
        let used: HashSet<String> = extract_identifiers(&assistant_text(message))
            .into_iter()
            .collect();
        for identifier in used {
            let Some(Source::ToolResult {
                message_index,
                call_id,
            }) = first_seen.get(&identifier)
            else {
                continue;
            };
            if *message_index < start {
                continue;
            }
            figures.retention.uses += 1;
            let visible = shows(&visible_identifiers, &identifier);
            let recoverable =
                visible || refs_by_call.get(call_id.as_str()).copied().unwrap_or(false);
            if visible {
                figures.retention.visible_uses += 1;
            } else if figures.retention.missed.len() < MISSED_EXAMPLES {
                figures.retention.missed.push(identifier.clone());
            }
            if recoverable {
                figures.retention.recoverable_uses += 1;
            }
            if recoverable && !visible {
                let tokens = *original_tokens.entry(call_id.clone()).or_insert_with(|| {
                    messages
                        .get(*message_index)
                        .and_then(|m| m.tool_results().find(|r| &r.call_id == call_id))
                        .map_or(0, |r| settings.encoding.count_text(&text_of(r)))
                });
                let penalty = tokens.min(settings.fetch_penalty_max_tokens);
                figures.fetch_penalty_tokens += penalty;
                fetched_tokens += penalty;
                cost += settings.pricing.cost(0, penalty, 0);
            }
        }
        figures.cost_usd += cost;
        if let Some(host) = &mut host_bill {
            let call = HostCall {
                message_index: index,
                leading: &leading,
                messages: &assembled.messages,
                now_ms,
                fetch_tokens: fetched_tokens,
            };
            host.bill(&call, &mut counter, &settings.pricing);
        }
    }
    figures.host = host_bill.map(|host| host.figures);
    figures.prefix_breaks = prefix.breaks;
    figures.retention.visible = ratio(figures.retention.visible_uses, figures.retention.uses);
    figures.retention.recoverable =
        ratio(figures.retention.recoverable_uses, figures.retention.uses);
    figures.offloads = offloaded.len() as u64;
    figures.trims = trimmed.len() as u64;
    figures.clears = cleared.len() as u64;
    figures.truncations = truncated.len() as u64;
    figures.assemble_ms = median(&figures.assemble_samples);
    Ok(figures)
}

/// Whether a request whose identifiers are `visible` shows `identifier` verbatim: as one of
/// them, or as the directory part of one (a request showing `/srv/app/lib/foo.ex` shows
/// `/srv/app`, which a model that wrote the directory could read there).
fn shows(visible: &HashSet<&str>, identifier: &str) -> bool {
    visible.contains(identifier)
        || (identifier.contains('/')
            && visible.iter().any(|shown| {
                shown
                    .strip_prefix(identifier)
                    .is_some_and(|rest| rest.starts_with('/'))
            }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_of_a_visible_path_is_visible() {
        let visible: HashSet<&str> = ["/home/u/project/lib/foo.ex", "deadbeef12"].into();
        assert!(shows(&visible, "/home/u/project/lib/foo.ex"));
        assert!(shows(&visible, "/home/u/project"));
        assert!(
            !shows(&visible, "/home/u/proj"),
            "a prefix that is not a directory is not shown"
        );
        assert!(!shows(&visible, "/home/u/project/lib/bar.ex"));
        assert!(!shows(&visible, "deadbeef"), "only paths have directories");
    }
}
