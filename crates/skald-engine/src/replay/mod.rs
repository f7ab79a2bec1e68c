//! `replay`: makes each model call of a real transcript again through the product's own path — the
//! request brought into a session of an in-memory [`Engine`](crate::Engine), every call prepared
//! by the engine's turn loop (the policy's pipeline, memory recall and upload, skald's threshold
//! compaction, the pruning clock driven by the transcript's timestamps) and answered by a
//! scripted model with the transcript's recorded answer, fetching first what that answer needs
//! and the request holds only behind a ref (see `run`) — then measures what the provider would
//! have billed and what the model could still see.
//!
//! Measures, per policy:
//! - input tokens (BPE) summed over calls and the peak context;
//! - prompt-cache accounting ([`CacheAccount`](crate::CacheAccount)) and cost under [`Pricing`];
//! - retention: for every identifier (seed 001's pattern) an assistant message uses that first
//!   appeared in an earlier tool result of that call's request, whether the assembled request
//!   still shows it (`visible`) or shows it or a ref to the output it came from (`recoverable`);
//!   each use that is only recoverable makes the model fetch it first: a hidden round, billed as
//!   the model call it is;
//! - what the stages did, what memory recalled, the compactions, and how long preparing a call
//!   took;
//! - with a [`HostFit`] (from the transcript's recorded usage), the same calls billed as the
//!   host's provider billed them: its prefix, tokenizer, cache breakpoints and TTL
//!   ([`HostFigures`], `host`), so `none` can be checked against [`Billed`] and a policy's saving
//!   read as a share of the real bill.

mod host;
mod prefix;
mod run;

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use skald_core::codec::claude_code::request_start;
use skald_core::identifiers::extract_identifiers;
use skald_core::ids::Tenant;
use skald_core::message::{Block, Message, Role, ToolSpec};
use skald_core::pipeline::offload::text_of;
use skald_core::tokens::{Encoding, TokenCounter, message_fingerprint};

use crate::accounting::{Pricing, Segment};

pub use host::{
    HostBill, HostCall, HostFigures, HostFit, ProviderCache, RecordedCall, fit_host, provider_view,
};
pub use prefix::PrefixBreaks;
pub use run::{ReplayError, is_baseline, replay};

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
    /// Memory on (recall, the memory tools, the upload), as `skald serve` runs by default; never
    /// for the baseline ([`is_baseline`]).
    pub memory: bool,
    /// skald's threshold compaction on, as `skald serve` runs by default; never for the
    /// baseline.
    pub compaction: bool,
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
            memory: true,
            compaction: true,
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
    /// Recorded calls replayed (one per assistant message with a non-empty request); a hidden
    /// round's call is counted in `hidden_rounds`.
    pub calls: u64,
    /// BPE input tokens summed over all calls.
    pub input_tokens: u64,
    /// The largest request of any call, in BPE tokens.
    pub peak_context_tokens: u64,
    /// Input tokens billed as cache reads, summed over calls.
    pub cache_read_tokens: u64,
    /// Input tokens billed as cache writes, summed over calls (everything not read from the cache).
    pub cache_write_tokens: u64,
    /// Tokens the fetches cost: the input of every hidden round's call (the model fetching what
    /// the request held only behind a ref, grepping at most `fetch_penalty_max_tokens` of each
    /// original), counted in `input_tokens` and `cost_usd` like every call.
    pub fetch_penalty_tokens: u64,
    /// Hidden rounds: model calls answered with a fetch before the recorded answer.
    pub hidden_rounds: u64,
    /// Calls recall injected memories into.
    pub recalls: u64,
    /// Estimated tokens of the memories recall injected, summed over calls.
    pub recall_tokens: u64,
    /// Compactions skald ran (threshold and overflow) that wrote a checkpoint.
    pub compactions: u64,
    /// Dollars under the settings' pricing: cache reads and cache writes of every model call.
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
    /// Median wall time of preparing one model call (the session's context, the pipeline,
    /// recall, the upload's planning), in milliseconds.
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
        self.hidden_rounds += other.hidden_rounds;
        self.recalls += other.recalls;
        self.recall_tokens += other.recall_tokens;
        self.compactions += other.compactions;
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
