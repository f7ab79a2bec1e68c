//! A session's model calls, read back from what the session stores: each assistant message of
//! the active path is one call, with the usage its provider reported (uncached, cache reads and
//! writes: what was sent, and how much of it the cache held), its cost at the engine's
//! [`Pricing`], and the raw history the call stood on (the estimate of every message before it,
//! before any policy or compaction), and what skald's pipeline did on the request when skald
//! assembled it (the answer's [`AssembleRecord`]); each compaction checkpoint between them, with its summary,
//! sizes, trigger (an `overflow` one is an overflow recovery) and summarizer. The dashboard's
//! timeline and [`Engine::call_timeline`](crate::Engine::call_timeline) read it a page at a
//! time, newest first; [`savings`] sums it per session and per day for the savings overview
//! ([`Engine::savings`](crate::Engine::savings)), and [`call_series`] is its chart's data.
//!
//! **What skald saved** is the session's cost against the same session without skald, under
//! the same prompt caching ([`WithoutSkald`]): each call skald assembled is billed again with
//! the tokens its pipeline took out put back, cached as the provider cached the call; a call
//! skald did not assemble costs the same either way, so a session skald never served saved
//! nothing. What the prompt cache saved (the input sent, uncached, against its bill) is the
//! provider's and is kept apart.

use serde_json::Value;
use skald_core::assemble_record::AssembleRecord;
use skald_core::message::{Role, Usage};
use skald_core::session::{Entry, EntryKind, Session};
use skald_core::tokens::estimate_message_tokens;
use skald_store::sessions::tokens_after;

use crate::accounting::{CACHE_HIT_SLACK_TOKENS, Pricing};
use crate::compact::DETAILS_KEY;

/// One model call: an assistant message of the active path.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The call's number in the session, from 1.
    pub number: usize,
    /// The assistant message's entry.
    pub entry_id: String,
    /// When the answer was stored (the entry's timestamp).
    pub timestamp: String,
    /// The model that answered, when the host said.
    pub model: Option<String>,
    /// Estimated tokens (chars/4) of every message before the call on the active path: the raw
    /// history, before any policy or compaction.
    pub raw_tokens: u64,
    /// What the provider reported; `None` when the host stored no usage.
    pub usage: Option<Usage>,
    /// Dollars of the call's input at the engine's prices (`None` without usage).
    pub input_cost_usd: Option<f64>,
    /// Dollars the same call would have cost without skald, under the same caching (`None`
    /// without usage; equal to `input_cost_usd` when skald did not assemble it).
    pub without_skald_cost_usd: Option<f64>,
    /// What skald's pipeline did on the request (`None` when skald did not assemble it, or the
    /// answer was stored before skald kept this).
    pub assemble: Option<AssembleRecord>,
}

impl CallRecord {
    /// Input tokens the provider read: uncached, cache reads and cache writes.
    pub fn sent_tokens(&self) -> Option<u64> {
        self.usage.map(|usage| usage.total_input())
    }
}

/// A compaction checkpoint of the active path.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionRecord {
    /// The checkpoint entry.
    pub entry_id: String,
    /// When it was written.
    pub timestamp: String,
    /// The summary the model sees in place of the history before the first kept entry.
    pub summary: String,
    /// The context's size before, as recorded.
    pub tokens_before: Option<u64>,
    /// The context's size after, when skald wrote the checkpoint.
    pub tokens_after: Option<u64>,
    /// The first entry kept verbatim.
    pub first_kept_entry_id: Option<String>,
    /// What started it (`threshold`, `manual`, `overflow` — an overflow recovery), when skald
    /// wrote it.
    pub trigger: Option<String>,
    /// The summarizer that wrote the summary, when skald wrote it.
    pub summarizer: Option<String>,
    /// A degraded summary accepted after an overflow.
    pub degraded: bool,
}

/// One event of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub enum TimelineEvent {
    /// A model call.
    Call(CallRecord),
    /// A compaction.
    Compaction(CompactionRecord),
}

/// What every call of the session adds up to.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CallTotals {
    /// Calls (assistant messages) on the active path.
    pub calls: usize,
    /// Calls with reported usage.
    pub calls_with_usage: usize,
    /// Raw history tokens summed over the calls with usage.
    pub raw_tokens: u64,
    /// Input tokens the provider read, summed.
    pub sent_tokens: u64,
    /// Of them, read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Of them, written to the prompt cache.
    pub cache_write_tokens: u64,
    /// Of them, uncached.
    pub uncached_tokens: u64,
    /// Dollars of the input sent, at the engine's prices.
    pub input_cost_usd: f64,
    /// Dollars the raw history would have cost, uncached, at the same prices.
    pub raw_cost_usd: f64,
    /// Calls with usage whose request skald assembled.
    pub served_calls: usize,
    /// Tokens skald's pipeline took out of those calls' requests (its estimates, summed).
    pub skald_removed_tokens: u64,
    /// Dollars the calls with usage would have cost without skald, under the same caching.
    pub without_skald_cost_usd: f64,
    /// Dollars the input sent would have cost with no prompt cache: `uncached_cost_usd -
    /// input_cost_usd` is the cache's saving, not skald's.
    pub uncached_cost_usd: f64,
    /// Compactions on the active path.
    pub compactions: usize,
}

impl CallTotals {
    /// What skald saved: the cost without skald (same caching) less the cost.
    pub fn skald_saved_usd(&self) -> f64 {
        self.without_skald_cost_usd - self.input_cost_usd
    }

    /// What the provider's prompt cache saved on the input sent.
    pub fn cache_saved_usd(&self) -> f64 {
        self.uncached_cost_usd - self.input_cost_usd
    }
}

/// The tokens skald's pipeline took out of a request it assembled (its estimates).
fn removed_tokens(record: &AssembleRecord) -> u64 {
    record.tokens_raw.saturating_sub(record.tokens_sent)
}

/// The calls of a session billed again without skald, under the same caching, in order.
///
/// A call skald assembled sent `tokens_sent` of its history's `tokens_raw` (its
/// [`AssembleRecord`]); without skald it sends the difference too. The cache is the call's own:
/// a cold call (nothing read) is cold without skald; a call that read less than the one before
/// sent while skald took out what it took before broke on the host's side, and reads the same
/// without skald; otherwise the call reads, without skald, what it read plus what skald had
/// taken out of the part cached (and when skald's own rewrite broke the cache, all of the call
/// before). The removed tokens are skald's estimates (chars/4), not the provider's.
#[derive(Debug, Default)]
pub struct WithoutSkald {
    /// The previous call with usage: its recorded input, its input without skald, and what skald
    /// took out of it.
    previous: Option<(u64, u64, u64)>,
}

impl WithoutSkald {
    /// Dollars the call would have cost without skald, at `pricing`.
    pub fn cost(
        &mut self,
        usage: &Usage,
        assemble: Option<&AssembleRecord>,
        pricing: &Pricing,
    ) -> f64 {
        let total = usage.total_input();
        let Some(record) = assemble else {
            self.previous = Some((total, total, 0));
            return pricing.cost_of_usage(usage);
        };
        let removed = removed_tokens(record);
        let without = total + removed;
        let read = match self.previous {
            _ if usage.cache_read == 0 => 0,
            None => usage.cache_read,
            Some((before, before_without, before_removed)) => {
                let broke = usage.cache_read + CACHE_HIT_SLACK_TOKENS < before;
                match (broke, removed == before_removed) {
                    (true, true) => usage.cache_read,
                    (true, false) => before_without,
                    (false, _) => usage.cache_read + before_removed,
                }
            }
        };
        let read = read.min(without.saturating_sub(usage.input));
        let written = without - usage.input - read;
        self.previous = Some((total, without, removed));
        let one_hour_share = if usage.cache_write > 0 {
            usage.cache_write_1h.min(usage.cache_write) as f64 / usage.cache_write as f64
        } else {
            0.0
        };
        pricing.cost(usage.input, written, read)
            + pricing.one_hour_write_surcharge((written as f64 * one_hour_share).round() as u64)
    }
}

/// A page of a session's timeline, newest first, and the whole session's totals.
#[derive(Debug, Clone, PartialEq)]
pub struct CallTimeline {
    /// The events of the page, newest first.
    pub events: Vec<TimelineEvent>,
    /// The page shown, from 1.
    pub page: usize,
    /// Pages in all.
    pub pages: usize,
    /// The totals of every call of the active path.
    pub totals: CallTotals,
}

/// Builds the page `page` (from 1; past the end: the last) of `per_page` events of the
/// session's active path, newest first. One pass over the path.
pub fn call_timeline(
    session: &Session,
    pricing: &Pricing,
    page: usize,
    per_page: usize,
) -> CallTimeline {
    let mut events = Vec::new();
    let mut totals = CallTotals::default();
    let mut raw_tokens = 0u64;
    let mut without_skald = WithoutSkald::default();
    for entry in session.path_to(None) {
        match &entry.kind {
            EntryKind::Message(message) => {
                if message.role == Role::Assistant {
                    totals.calls += 1;
                    let usage = message.meta.usage;
                    let assemble = message.meta.assemble.as_deref();
                    let input_cost_usd = usage.map(|usage| pricing.cost_of_usage(&usage));
                    let without_skald_cost_usd =
                        usage.map(|usage| without_skald.cost(&usage, assemble, pricing));
                    if let Some(usage) = usage {
                        totals.served_calls += usize::from(assemble.is_some());
                        totals.skald_removed_tokens += assemble.map_or(0, removed_tokens);
                        totals.without_skald_cost_usd += without_skald_cost_usd.unwrap_or(0.0);
                        totals.uncached_cost_usd += pricing.cost(usage.total_input(), 0, 0);
                        totals.calls_with_usage += 1;
                        totals.raw_tokens += raw_tokens;
                        totals.sent_tokens += usage.total_input();
                        totals.cache_read_tokens += usage.cache_read;
                        totals.cache_write_tokens += usage.cache_write;
                        totals.uncached_tokens += usage.input;
                        totals.input_cost_usd += input_cost_usd.unwrap_or(0.0);
                        totals.raw_cost_usd += pricing.cost(raw_tokens, 0, 0);
                    }
                    events.push(TimelineEvent::Call(CallRecord {
                        number: totals.calls,
                        entry_id: entry.id.clone(),
                        timestamp: entry.timestamp.clone(),
                        model: message.meta.model.clone(),
                        raw_tokens,
                        usage,
                        input_cost_usd,
                        without_skald_cost_usd,
                        assemble: assemble.cloned(),
                    }));
                }
                raw_tokens += estimate_message_tokens(message);
            }
            EntryKind::Compaction {
                summary,
                first_kept_entry_id,
                tokens_before,
                details,
                ..
            } => {
                totals.compactions += 1;
                events.push(TimelineEvent::Compaction(compaction_record(
                    entry,
                    summary,
                    first_kept_entry_id.as_deref(),
                    *tokens_before,
                    details.as_ref(),
                )));
            }
            EntryKind::Reset { .. }
            | EntryKind::BranchSummary { .. }
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. }
            | EntryKind::Other(_) => {}
        }
    }
    let per_page = per_page.max(1);
    let pages = events.len().div_ceil(per_page).max(1);
    let page = page.clamp(1, pages);
    let events = events
        .into_iter()
        .rev()
        .skip((page - 1).saturating_mul(per_page))
        .take(per_page)
        .collect();
    CallTimeline {
        events,
        page,
        pages,
        totals,
    }
}

fn compaction_record(
    entry: &Entry,
    summary: &str,
    first_kept_entry_id: Option<&str>,
    tokens_before: Option<u64>,
    details: Option<&Value>,
) -> CompactionRecord {
    let skald = details.and_then(|details| details.get(DETAILS_KEY));
    let inner = skald.and_then(|skald| skald.get("details"));
    CompactionRecord {
        entry_id: entry.id.clone(),
        timestamp: entry.timestamp.clone(),
        summary: summary.to_owned(),
        tokens_before,
        tokens_after: tokens_after(entry),
        first_kept_entry_id: first_kept_entry_id.map(str::to_owned),
        trigger: inner
            .and_then(|inner| inner.get("trigger"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        summarizer: skald
            .and_then(|skald| skald.get("summarizer"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        degraded: inner
            .and_then(|inner| inner.get("degraded"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
    }
}

/// One day's calls, over the sessions read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DaySavings {
    /// The day, `YYYY-MM-DD` (UTC, from the answers' entry timestamps).
    pub day: String,
    /// Calls with reported usage that day.
    pub calls: usize,
    /// Raw history tokens summed over those calls.
    pub raw_tokens: u64,
    /// Input tokens the provider read.
    pub sent_tokens: u64,
    /// Of them, read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Dollars of the input sent.
    pub input_cost_usd: f64,
    /// Dollars the raw history would have cost, uncached.
    pub raw_cost_usd: f64,
    /// Calls skald assembled that day.
    pub served_calls: usize,
    /// Tokens skald's pipeline took out of their requests.
    pub skald_removed_tokens: u64,
    /// Dollars those calls would have cost without skald, under the same caching.
    pub without_skald_cost_usd: f64,
    /// Dollars the input sent would have cost with no prompt cache.
    pub uncached_cost_usd: f64,
}

impl DaySavings {
    /// What skald saved that day.
    pub fn skald_saved_usd(&self) -> f64 {
        self.without_skald_cost_usd - self.input_cost_usd
    }
}

/// What skald saved across sessions, per session and per day.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Savings {
    /// Each session read, most recently active first, with its totals.
    pub sessions: Vec<(skald_store::sessions::SessionInfo, CallTotals)>,
    /// Each day with calls, newest first.
    pub days: Vec<DaySavings>,
    /// Everything summed.
    pub totals: CallTotals,
    /// Sessions the tenant holds beyond the ones read.
    pub sessions_not_read: usize,
}

/// Adds `totals` to `sum`.
fn absorb(sum: &mut CallTotals, totals: &CallTotals) {
    sum.calls += totals.calls;
    sum.calls_with_usage += totals.calls_with_usage;
    sum.raw_tokens += totals.raw_tokens;
    sum.sent_tokens += totals.sent_tokens;
    sum.cache_read_tokens += totals.cache_read_tokens;
    sum.cache_write_tokens += totals.cache_write_tokens;
    sum.uncached_tokens += totals.uncached_tokens;
    sum.input_cost_usd += totals.input_cost_usd;
    sum.raw_cost_usd += totals.raw_cost_usd;
    sum.served_calls += totals.served_calls;
    sum.skald_removed_tokens += totals.skald_removed_tokens;
    sum.without_skald_cost_usd += totals.without_skald_cost_usd;
    sum.uncached_cost_usd += totals.uncached_cost_usd;
    sum.compactions += totals.compactions;
}

/// Per session and per day, over `sessions` (each with its stored session).
pub fn savings(
    sessions: Vec<(skald_store::sessions::SessionInfo, Session)>,
    pricing: &Pricing,
) -> Savings {
    let mut out = Savings::default();
    let mut days: std::collections::BTreeMap<String, DaySavings> = Default::default();
    for (info, session) in sessions {
        let timeline = call_timeline(&session, pricing, 1, usize::MAX);
        for event in &timeline.events {
            let TimelineEvent::Call(call) = event else {
                continue;
            };
            let Some(usage) = call.usage else { continue };
            let day_key = call.timestamp.get(..10).unwrap_or("unknown").to_owned();
            let day = days.entry(day_key.clone()).or_insert_with(|| DaySavings {
                day: day_key,
                ..DaySavings::default()
            });
            day.calls += 1;
            day.raw_tokens += call.raw_tokens;
            day.sent_tokens += usage.total_input();
            day.cache_read_tokens += usage.cache_read;
            day.input_cost_usd += call.input_cost_usd.unwrap_or(0.0);
            day.raw_cost_usd += pricing.cost(call.raw_tokens, 0, 0);
            day.served_calls += usize::from(call.assemble.is_some());
            day.skald_removed_tokens += call.assemble.as_ref().map_or(0, removed_tokens);
            day.without_skald_cost_usd += call.without_skald_cost_usd.unwrap_or(0.0);
            day.uncached_cost_usd += pricing.cost(usage.total_input(), 0, 0);
        }
        absorb(&mut out.totals, &timeline.totals);
        out.sessions.push((info, timeline.totals));
    }
    out.days = days.into_values().rev().collect();
    out
}

/// The calls of a session, oldest first, as (raw history, input sent) pairs; a call without
/// reported usage is left out.
pub fn call_series(session: &Session, pricing: &Pricing) -> Vec<(u64, u64)> {
    let timeline = call_timeline(session, pricing, 1, usize::MAX);
    timeline
        .events
        .iter()
        .rev()
        .filter_map(|event| match event {
            TimelineEvent::Call(call) => call.sent_tokens().map(|sent| (call.raw_tokens, sent)),
            TimelineEvent::Compaction(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn usage(input: u64, read: u64, write: u64) -> Usage {
        Usage {
            input,
            output: 0,
            cache_read: read,
            cache_write: write,
            cache_write_1h: 0,
        }
    }

    fn served(raw: u64, sent: u64) -> AssembleRecord {
        AssembleRecord {
            tokens_raw: raw,
            tokens_sent: sent,
            ..AssembleRecord::default()
        }
    }

    #[test]
    fn a_call_skald_did_not_assemble_costs_the_same_without_it() {
        let pricing = Pricing::default();
        let mut without = WithoutSkald::default();
        for call in [
            usage(3, 0, 20_000),
            usage(3, 20_000, 500),
            usage(3, 20_500, 800),
        ] {
            assert_eq!(
                without.cost(&call, None, &pricing),
                pricing.cost_of_usage(&call)
            );
        }
    }

    #[test]
    fn what_skald_took_out_of_the_cached_part_is_read_without_skald() {
        let pricing = Pricing::default();
        let mut without = WithoutSkald::default();
        // First call: cold; skald took 5,000 out.
        let first = without.cost(
            &usage(0, 0, 20_000),
            Some(&served(25_000, 20_000)),
            &pricing,
        );
        assert!((first - pricing.cost(0, 25_000, 0)).abs() < 1e-12);
        // Second: the previous request read whole; without skald the 5,000 were cached too,
        // and the 6,000 it takes out now of the new part are written.
        let second = without.cost(
            &usage(0, 20_000, 1_000),
            Some(&served(32_000, 26_000)),
            &pricing,
        );
        assert!((second - pricing.cost(0, 2_000, 25_000)).abs() < 1e-12);
    }

    #[test]
    fn a_break_of_the_hosts_making_breaks_the_call_without_skald_too() {
        let pricing = Pricing::default();
        let mut without = WithoutSkald::default();
        without.cost(
            &usage(0, 0, 40_000),
            Some(&served(45_000, 40_000)),
            &pricing,
        );
        // skald took out what it took before, yet only 20,000 were read: the host's doing.
        let broken = without.cost(
            &usage(0, 20_000, 21_000),
            Some(&served(46_000, 41_000)),
            &pricing,
        );
        assert!((broken - pricing.cost(0, 26_000, 20_000)).abs() < 1e-12);
    }

    #[test]
    fn a_break_of_skalds_own_rewrite_is_not_charged_to_the_call_without_skald() {
        let pricing = Pricing::default();
        let mut without = WithoutSkald::default();
        without.cost(
            &usage(0, 0, 40_000),
            Some(&served(40_000, 40_000)),
            &pricing,
        );
        // skald offloaded 10,000 this call, which rewrote the cache from 20,000 on.
        let rewritten = without.cost(
            &usage(0, 20_000, 11_000),
            Some(&served(41_000, 31_000)),
            &pricing,
        );
        // Without skald the call reads all of the one before and writes the 1,000 it added.
        assert!((rewritten - pricing.cost(0, 1_000, 40_000)).abs() < 1e-12);
    }
}
