//! The session page's timeline of model calls (`Engine::call_timeline`): each call's raw history
//! against what the provider read, cached against uncached, its cost at the configured prices;
//! what each pipeline stage did on the call (its assemble record, one line, the stages'
//! reasons on hover); each compaction between them (an `overflow` one is an overflow recovery) with its summary and
//! sizes. A page of [`CALLS_PER_PAGE`] events, newest first, so a long session loads fast.

use maud::{Markup, html};
use skald_engine::timeline::{CallRecord, CallTimeline, CompactionRecord, TimelineEvent};

/// Events on one page of the timeline.
pub const CALLS_PER_PAGE: usize = 50;

fn dollars(value: f64) -> String {
    format!("${value:.4}")
}

fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "–".to_owned();
    }
    format!("{:.0} %", part as f64 * 100.0 / whole as f64)
}

fn call_row(call: &CallRecord) -> Markup {
    html! {
        tr.call {
            td.num { (call.number) }
            td { (call.timestamp) }
            td { (call.model.as_deref().unwrap_or("–")) }
            td.num { (call.raw_tokens) }
            @match call.usage {
                Some(usage) => {
                    td.num { (usage.total_input()) }
                    td.num { (usage.cache_read) }
                    td.num { (usage.cache_write) }
                    td.num { (usage.input) }
                    td.num { (share(usage.cache_read, usage.total_input())) }
                    td.num { (call.input_cost_usd.map(dollars).unwrap_or_default()) }
                }
                None => { td.muted colspan="6" { "no usage reported" } }
            }
            @match &call.assemble {
                Some(record) => {
                    td.pipeline title=(record.reasons.join("\n")) { (record.summary()) }
                }
                None => { td.muted { "–" } }
            }
        }
    }
}

fn compaction_row(record: &CompactionRecord) -> Markup {
    let trigger = record.trigger.as_deref().unwrap_or("host");
    html! {
        tr.compaction {
            td colspan="11" {
                strong {
                    @if trigger == "overflow" { "Overflow recovery: compaction" } @else { "Compaction (" (trigger) ")" }
                }
                " at " (record.timestamp) ": "
                (record.tokens_before.map_or("?".to_owned(), |tokens| tokens.to_string()))
                " → "
                (record.tokens_after.map_or("?".to_owned(), |tokens| tokens.to_string()))
                " tokens"
                @if let Some(summarizer) = &record.summarizer { ", summary by " (summarizer) }
                @if record.degraded { " (degraded summary accepted)" }
                details { summary { "Summary" } pre { (record.summary) } }
            }
        }
    }
}

/// The timeline section; `link` makes a page's URL from its number.
pub fn section(timeline: &CallTimeline, link: impl Fn(usize) -> String) -> Markup {
    let totals = &timeline.totals;
    html! {
        h2 { "Model calls" }
        p #call-totals {
            (totals.calls) " calls (" (totals.calls_with_usage) " with reported usage), "
            (totals.compactions) " compactions. Input sent " (totals.sent_tokens) " tokens against "
            (totals.raw_tokens) " of raw history; " (share(totals.cache_read_tokens, totals.sent_tokens))
            " read from the cache. Cost of the input " (dollars(totals.input_cost_usd))
            @if totals.served_calls > 0 {
                "; without skald, cached the same way, " (dollars(totals.without_skald_cost_usd))
                " (" (totals.served_calls) " calls assembled by skald)."
            } @else if totals.calls_with_usage > 0 {
                "; skald assembled none of these calls, so it saved nothing here."
            } @else {
                "."
            }
        }
        @if timeline.events.is_empty() {
            p.muted { "No model call recorded yet." }
        } @else {
            table #calls {
                thead { tr {
                    th { "#" } th { "When" } th { "Model" }
                    th title="every message before the call, before any policy or compaction" { "Raw (tokens)" }
                    th title="input tokens the provider read" { "Sent" }
                    th { "Cache read" } th { "Cache write" } th { "Uncached" } th { "Cached" }
                    th title="the input at the configured prices" { "Cost" }
                    th title="what skald's pipeline did on the request, and why (hover)" { "Pipeline" }
                } }
                tbody {
                    @for event in &timeline.events {
                        @match event {
                            TimelineEvent::Call(call) => { (call_row(call)) }
                            TimelineEvent::Compaction(record) => { (compaction_row(record)) }
                        }
                    }
                }
            }
            @if timeline.pages > 1 {
                p #call-pages {
                    "Page " (timeline.page) " of " (timeline.pages)
                    @if timeline.page > 1 { " · " a rel="prev" href=(link(timeline.page - 1)) { "newer" } }
                    @if timeline.page < timeline.pages { " · " a rel="next" href=(link(timeline.page + 1)) { "older" } }
                }
            }
        }
    }
}
