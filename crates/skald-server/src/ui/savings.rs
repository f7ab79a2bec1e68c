//! `/ui/savings`: what skald saved, from the live sessions — tokens and cost per day and per
//! session (the raw history each call stood on against the input its provider read, and the
//! share the prompt cache held), over the tenant's most recently active sessions
//! (`Engine::savings`), and the chart `skald replay --chart` draws
//! (`skald_engine::chart::line_chart`) of one session's calls: raw history against sent.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use maud::{Markup, PreEscaped, html};
use serde::Deserialize;
use skald_engine::chart::line_chart;
use skald_engine::timeline::CallTotals;

use super::{UiCaller, UiError, encode, page};
use crate::routes::{engine_error, session_id};
use crate::state::AppState;

/// Sessions the overview reads at most (the most recently active).
pub const SAVINGS_SESSIONS: usize = 50;

/// `/ui/savings` parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavingsQuery {
    /// The session the chart draws (default: the most recently active one with calls).
    session: Option<String>,
}

fn dollars(value: f64) -> String {
    format!("${value:.4}")
}

fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "–".to_owned();
    }
    format!("{:.0} %", part as f64 * 100.0 / whole as f64)
}

fn saved(totals: &CallTotals) -> (u64, f64) {
    (
        totals.raw_tokens.saturating_sub(totals.sent_tokens),
        totals.raw_cost_usd - totals.input_cost_usd,
    )
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
        .map_err(engine_error)?;
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
                .map_err(engine_error)?;
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
    let totals = &savings.totals;
    let (tokens_saved, dollars_saved) = saved(totals);
    let body = html! {
        p #savings-totals {
            (totals.calls_with_usage) " calls with reported usage: " (totals.sent_tokens)
            " input tokens sent against " (totals.raw_tokens) " of raw history — "
            strong { (tokens_saved) " tokens saved (" (share(tokens_saved, totals.raw_tokens)) ")" }
            "; " (share(totals.cache_read_tokens, totals.sent_tokens)) " of the input read from the cache. "
            "Input cost " (dollars(totals.input_cost_usd)) " against " (dollars(totals.raw_cost_usd))
            " for the raw history uncached: " strong { (dollars(dollars_saved)) " saved" } "."
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
                thead { tr { th { "Day" } th { "Calls" } th { "Raw (tokens)" } th { "Sent" } th { "Saved" } th { "Cached" } th { "Cost" } th { "Saved ($)" } } }
                tbody {
                    @for day in &savings.days {
                        tr {
                            td { (day.day) } td.num { (day.calls) } td.num { (day.raw_tokens) } td.num { (day.sent_tokens) }
                            td.num { (day.raw_tokens.saturating_sub(day.sent_tokens)) }
                            td.num { (share(day.cache_read_tokens, day.sent_tokens)) }
                            td.num { (dollars(day.input_cost_usd)) }
                            td.num { (dollars(day.raw_cost_usd - day.input_cost_usd)) }
                        }
                    }
                }
            }
        }
        h2 { "Per session" }
        table #per-session {
            thead { tr { th { "Session" } th { "Calls" } th { "Raw (tokens)" } th { "Sent" } th { "Saved" } th { "Cached" } th { "Cost" } th { "Saved ($)" } th { "Chart" } } }
            tbody {
                @for (info, session_totals) in &savings.sessions {
                    @let (session_tokens, session_dollars) = saved(session_totals);
                    tr {
                        td { a href={ "/ui/sessions/" (encode(&info.id)) } { (info.id) } }
                        td.num { (session_totals.calls_with_usage) }
                        td.num { (session_totals.raw_tokens) }
                        td.num { (session_totals.sent_tokens) }
                        td.num { (session_tokens) }
                        td.num { (share(session_totals.cache_read_tokens, session_totals.sent_tokens)) }
                        td.num { (dollars(session_totals.input_cost_usd)) }
                        td.num { (dollars(session_dollars)) }
                        td { a href={ "/ui/savings?session=" (encode(&info.id)) } { "draw" } }
                    }
                }
            }
        }
        @if let Some(svg) = chart {
            h2 { "Per call" }
            div #chart { (PreEscaped(svg)) }
        }
        p.muted { "Raw: every message before a call, before any policy or compaction (chars/4). "
            "Sent: the input the provider reported. Costs at the engine's input prices "
            "(cache writes and reads at their multipliers); the raw history is costed uncached." }
    };
    Ok(page(Some(&caller), "Savings", body))
}
