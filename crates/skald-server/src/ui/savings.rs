//! `/ui/savings`: what skald saved, from the live sessions — per day and per session, the cost
//! against the same calls without skald under the same prompt caching (`WithoutSkald`), and the
//! tokens skald's pipeline took out; the prompt cache's own saving apart, never credited to
//! skald; over the tenant's most recently active sessions (`Engine::savings`), and the chart
//! `skald replay --chart` draws (`skald_engine::chart::line_chart`) of one session's calls: raw
//! history against sent.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use maud::{Markup, PreEscaped, html};
use serde::Deserialize;
use skald_engine::chart::line_chart;
use skald_engine::timeline::CallTotals;

use super::{UiCaller, UiError, encode, page};
use crate::error::ApiError;
use crate::routes::{failure, session_id};
use crate::state::AppState;

/// Sessions the overview reads at most (the most recently active).
pub const SAVINGS_SESSIONS: usize = 50;

/// `/ui/savings` parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavingsQuery {
    /// The session the chart draws (default: the most recently active one with calls).
    session: Option<String>,
    /// A session skald did not serve, to estimate by a replay what skald would have saved it.
    estimate: Option<String>,
}

fn dollars(value: f64) -> String {
    format!("${value:.4}")
}

fn share_f64(part: f64, whole: f64) -> String {
    if whole <= 0.0 {
        return "–".to_owned();
    }
    format!("{:.1} %", part * 100.0 / whole)
}

fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "–".to_owned();
    }
    format!("{:.0} %", part as f64 * 100.0 / whole as f64)
}

/// What skald saved a session: its dollars, or, for a session with calls skald assembled none
/// of, that it did not serve it (it saved nothing there, and the page says why).
fn skald_saved(totals: &CallTotals) -> String {
    if totals.calls_with_usage > 0 && totals.served_calls == 0 {
        "not served by skald".to_owned()
    } else {
        dollars(totals.skald_saved_usd())
    }
}

/// `GET /ui/savings`.
pub async fn show(
    State(state): State<AppState>,
    caller: UiCaller,
    query: Result<Query<SavingsQuery>, QueryRejection>,
) -> Result<Markup, UiError> {
    let Query(query) = query?;
    let savings = state
        .engine
        .savings(&caller.0.tenant, SAVINGS_SESSIONS)
        .map_err(failure)?;
    let charted = match query.session {
        Some(raw) => Some(session_id(raw)?),
        None => savings
            .sessions
            .iter()
            .find(|(_, totals)| totals.calls_with_usage > 0)
            .map(|(info, _)| session_id(info.id.clone()))
            .transpose()?,
    };
    let chart = match &charted {
        Some(id) => {
            let series = state
                .engine
                .call_series(&caller.0.tenant, id)
                .map_err(failure)?;
            let raw: Vec<u64> = series.iter().map(|(raw, _)| *raw).collect();
            let sent: Vec<u64> = series.iter().map(|(_, sent)| *sent).collect();
            Some(line_chart(
                &format!("Session {id}: raw history vs input sent, per call"),
                "input tokens",
                &[("raw history".to_owned(), raw), ("sent".to_owned(), sent)],
            ))
        }
        None => None,
    };
    let estimate = match query.estimate {
        Some(raw) => {
            let id = session_id(raw)?;
            let engine = state.engine.clone();
            let tenant = caller.0.tenant.clone();
            let estimated_id = id.clone();
            // A replay is CPU work of up to seconds on a long session: off the async workers.
            let runtime = tokio::runtime::Handle::current();
            let estimate = tokio::task::spawn_blocking(move || {
                runtime.block_on(engine.would_have_saved(&tenant, &estimated_id))
            })
            .await
            .map_err(|error| ApiError::Internal(format!("the replay stopped: {error}")))?
            .map_err(failure)?;
            Some((id, estimate))
        }
        None => None,
    };
    let totals = &savings.totals;
    let body = html! {
        p #savings-totals {
            (totals.calls_with_usage) " calls with reported usage, " (totals.served_calls)
            " of them assembled by skald, which took " (totals.skald_removed_tokens)
            " tokens out of their requests. Input cost " (dollars(totals.input_cost_usd))
            " against " (dollars(totals.without_skald_cost_usd))
            " for the same calls without skald, cached the same way: "
            strong #skald-saved { (dollars(totals.skald_saved_usd())) " saved by skald" } "."
        }
        p #cache-saved {
            "The provider's prompt cache held " (share(totals.cache_read_tokens, totals.sent_tokens))
            " of the input sent and saved " (dollars(totals.cache_saved_usd()))
            " on it (against the same input uncached) — the cache's saving, with or without skald, "
            "not counted as skald's."
        }
        @if savings.sessions_not_read > 0 {
            p.muted { "Over the " (SAVINGS_SESSIONS) " most recently active sessions; "
                (savings.sessions_not_read) " older ones are not counted." }
        }
        h2 { "Per day (UTC)" }
        @if savings.days.is_empty() {
            p.muted #no-days { "No call with reported usage yet." }
        } @else {
            table #days {
                thead { tr { th { "Day" } th { "Calls" } th { "By skald" } th { "Raw (tokens)" } th { "Sent" } th { "Taken out" } th { "Cached" } th { "Cost" } th { "Without skald" } th { "Saved by skald" } } }
                tbody {
                    @for day in &savings.days {
                        tr {
                            td { (day.day) } td.num { (day.calls) } td.num { (day.served_calls) }
                            td.num { (day.raw_tokens) } td.num { (day.sent_tokens) }
                            td.num { (day.skald_removed_tokens) }
                            td.num { (share(day.cache_read_tokens, day.sent_tokens)) }
                            td.num { (dollars(day.input_cost_usd)) }
                            td.num { (dollars(day.without_skald_cost_usd)) }
                            td.num { (dollars(day.skald_saved_usd())) }
                        }
                    }
                }
            }
        }
        h2 { "Per session" }
        table #per-session {
            thead { tr { th { "Session" } th { "Calls" } th { "By skald" } th { "Raw (tokens)" } th { "Sent" } th { "Taken out" } th { "Cached" } th { "Cost" } th { "Without skald" } th { "Saved by skald" } th { "Chart" } } }
            tbody {
                @for (info, session_totals) in &savings.sessions {
                    @let not_served = session_totals.calls_with_usage > 0 && session_totals.served_calls == 0;
                    tr {
                        td { a href={ "/ui/sessions/" (encode(&info.id)) } { (info.id) } }
                        td.num { (session_totals.calls_with_usage) }
                        td.num { (session_totals.served_calls) }
                        td.num { (session_totals.raw_tokens) }
                        td.num { (session_totals.sent_tokens) }
                        td.num { (session_totals.skald_removed_tokens) }
                        td.num { (share(session_totals.cache_read_tokens, session_totals.sent_tokens)) }
                        td.num { (dollars(session_totals.input_cost_usd)) }
                        td.num { (dollars(session_totals.without_skald_cost_usd)) }
                        td.num {
                            (skald_saved(session_totals))
                            @if not_served {
                                " · " a.estimate href={ "/ui/savings?estimate=" (encode(&info.id)) } { "estimate by replay" }
                            }
                        }
                        td { a href={ "/ui/savings?session=" (encode(&info.id)) } { "draw" } }
                    }
                }
            }
        }
        @if let Some((id, estimate)) = &estimate {
            h2 { "Had skald served " (id) }
            @match estimate {
                Some(estimate) => p #estimate {
                    "An estimate by replay, not a saving skald made: the session's "
                    (estimate.calls) " calls replayed under the " code { (estimate.policy) }
                    " policy and billed as its host was billed (its prefix, tokenizer and prompt "
                    "caching, read from the usage it recorded) would cost "
                    strong { (dollars(estimate.policy_usd)) }
                    " against " (dollars(estimate.none_usd)) " replayed without skald — "
                    strong { (dollars(estimate.saved_usd())) " it would have saved" }
                    ". The provider billed " (dollars(estimate.billed_usd))
                    " for these calls (the replay without skald comes to "
                    (share_f64(estimate.none_usd, estimate.billed_usd)) " of that)."
                },
                None => p.muted #estimate { "The session recorded no usage: there is no bill to replay it against." },
            }
        }
        @if let Some(svg) = chart {
            h2 { "Per call" }
            div #chart { (PreEscaped(svg)) }
        }
        p.muted { "Raw: every message before a call, before any policy or compaction (chars/4). "
            "Sent: the input the provider reported. Taken out: what skald's pipeline took out of "
            "the requests it assembled (its estimates). Without skald: each call skald assembled "
            "billed again with what it took out put back, cached as the provider cached the call; "
            "a call skald did not assemble costs the same either way. Costs at the engine's input "
            "prices (cache writes and reads at their multipliers, one-hour writes at theirs)." }
    };
    Ok(page(Some(&caller), "Savings", body))
}
