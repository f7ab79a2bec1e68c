//! The sessions pages: `/ui` (the tenant's sessions, their context now against the raw history,
//! searchable by id or title) and `/ui/sessions/{id}` (the context as the model sees it now, in
//! the readable rendering `skald context --text` prints, each placeholder linked to its
//! original; what the pipeline did to build it — the context route's report; the compaction
//! checkpoints of the session).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use maud::{Markup, html};
use serde::Deserialize;
use skald_core::ids::SessionId;
use skald_core::refs::{REF_PREFIX, RefId};
use skald_core::render::{ContextHeading, render_context};
use skald_core::session::EntryKind;
use skald_core::time::format_rfc3339_seconds;
use skald_engine::{SessionOverview, View, ViewOptions};

use super::{UiCaller, UiError, encode, page};
use crate::routes::engine::view_report;
use crate::routes::{engine_error, session_id};
use crate::state::AppState;

/// `/ui` parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only sessions whose id or title contains this (case-insensitive).
    q: Option<String>,
}

/// The view the next model call would get, with every tool and no memory (what
/// `GET /v1/sessions/{id}/context` answers without options).
async fn current_view(
    state: &AppState,
    caller: &UiCaller,
    id: &SessionId,
) -> Result<View, UiError> {
    let options = ViewOptions {
        window_tokens: None,
        available_tools: None,
        with_memory: false,
        identity: None,
        pending_prompt: None,
    };
    Ok(state
        .engine
        .view(&caller.0.tenant, id, options)
        .await
        .map_err(engine_error)?)
}

fn matches(overview: &SessionOverview, needle: &str) -> bool {
    let needle = needle.to_lowercase();
    overview.info.id.to_lowercase().contains(&needle)
        || overview
            .info
            .title
            .as_deref()
            .is_some_and(|title| title.to_lowercase().contains(&needle))
}

fn saved_percent(now: u64, raw: u64) -> String {
    if raw == 0 || now >= raw {
        return "–".to_owned();
    }
    format!("{:.0} %", (raw - now) as f64 * 100.0 / raw as f64)
}

/// `GET /ui`: the caller's sessions, most recently active first.
pub async fn list(
    State(state): State<AppState>,
    caller: UiCaller,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Markup, UiError> {
    let Query(query) = query?;
    let needle = query.q.as_deref().map(str::trim).unwrap_or("");
    let overviews: Vec<SessionOverview> = state
        .engine
        .list_sessions(&caller.0.tenant)
        .map_err(engine_error)?
        .into_iter()
        .filter(|overview| needle.is_empty() || matches(overview, needle))
        .collect();
    let mut rows = Vec::with_capacity(overviews.len());
    for overview in overviews {
        let id = session_id(overview.info.id.clone())?;
        let now = current_view(&state, &caller, &id)
            .await?
            .view
            .estimated_tokens();
        rows.push((overview, now));
    }
    let body = html! {
        form.inline method="get" action="/ui" {
            input type="search" name="q" value=(needle) placeholder="id or title";
            " " button type="submit" { "Search" }
        }
        @if rows.is_empty() {
            p.muted #no-sessions { @if needle.is_empty() { "No sessions yet." } @else { "No session matches." } }
        } @else {
            table #sessions {
                thead { tr {
                    th { "Session" } th { "Source" } th { "Messages" }
                    th title="skald's estimate of what the next model call is sent" { "Context now (tokens)" }
                    th title="the history rebuilt from the leaf, before any policy" { "Raw (tokens)" }
                    th { "Saved" } th { "Last activity (UTC)" }
                } }
                tbody {
                    @for (overview, now) in &rows {
                        tr {
                            td {
                                a href={ "/ui/sessions/" (encode(&overview.info.id)) } { (overview.info.id) }
                                @if let Some(title) = &overview.info.title { br; span.muted { (title) } }
                            }
                            td { (overview.info.source_format)
                                @if let Some(source) = &overview.info.source { br; span.muted { (source) } } }
                            td.num { (overview.info.message_count) }
                            td.num { (now) }
                            td.num { (overview.estimated_tokens) }
                            td.num { (saved_percent(*now, overview.estimated_tokens)) }
                            td { (format_rfc3339_seconds(overview.info.updated_at_ms)) }
                        }
                    }
                }
            }
        }
    };
    Ok(page(Some(&caller.0), "Sessions", body))
}

/// `text` with every `[REF_ID: …]` token a link to its original.
fn linked(text: &str) -> Markup {
    let mut parts: Vec<(&str, Option<RefId>)> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(REF_PREFIX) {
        let after = &rest[start..];
        let token = after
            .find(']')
            .and_then(|end| after.get(..=end))
            .and_then(|token| RefId::parse(token).ok().map(|id| (token, id)));
        match token {
            Some((token, id)) => {
                parts.push((&rest[..start], None));
                parts.push((token, Some(id)));
                rest = &after[token.len()..];
            }
            None => {
                // Not a whole token: kept as text, and the search goes on after its prefix.
                let end = start + REF_PREFIX.len();
                parts.push((&rest[..end], None));
                rest = &rest[end..];
            }
        }
    }
    parts.push((rest, None));
    html! {
        @for (chunk, id) in &parts {
            @match id {
                Some(id) => { a.ref href={ "/ui/refs/" (id.as_str()) } { (chunk) } }
                None => { (chunk) }
            }
        }
    }
}

/// `GET /ui/sessions/{id}`: one session's context now and its compactions.
pub async fn show(
    State(state): State<AppState>,
    caller: UiCaller,
    Path(raw): Path<String>,
) -> Result<Markup, UiError> {
    let id = session_id(raw)?;
    let overview = state
        .engine
        .session_overview(&caller.0.tenant, &id)
        .map_err(engine_error)?;
    let session = state
        .engine
        .load_session(&caller.0.tenant, &id)
        .map_err(engine_error)?;
    let built = current_view(&state, &caller, &id).await?;
    let tools: Vec<String> = built.tools.iter().map(|tool| tool.name.clone()).collect();
    let policy = state.engine.config().policy.name.clone();
    let addition = built.view.system_prompt_addition();
    let now = built.view.estimated_tokens();
    let did = view_report(&built);
    let text = render_context(
        &ContextHeading {
            session_id: id.as_str(),
            policy: &policy,
            estimated_tokens: now,
            system_prompt_addition: addition.as_deref(),
            tools: &tools,
        },
        &built.view.messages,
    );
    let compactions: Vec<_> = session
        .entries()
        .iter()
        .filter_map(|entry| match &entry.kind {
            EntryKind::Compaction {
                summary,
                first_kept_entry_id,
                tokens_before,
                ..
            } => Some((entry, summary, first_kept_entry_id, tokens_before)),
            EntryKind::Message(_)
            | EntryKind::Reset { .. }
            | EntryKind::BranchSummary { .. }
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. }
            | EntryKind::Other(_) => None,
        })
        .collect();
    let info = &overview.info;
    let body = html! {
        table #summary {
            tr { th { "Title" } td { (info.title.as_deref().unwrap_or("–")) } }
            tr { th { "Source" } td { (info.source_format) @if let Some(source) = &info.source { " · " (source) } } }
            tr { th { "Messages" } td { (info.message_count) " (" (info.entry_count) " entries)" } }
            tr { th { "Context now" } td #tokens-now { (now) " tokens (policy " (policy) ")" } }
            tr { th { "Raw history" } td { (overview.estimated_tokens) " tokens · saved " (saved_percent(now, overview.estimated_tokens)) } }
            tr { th { "What the pipeline did" } td #pipeline {
                (did.offloaded) " tool results offloaded, " (did.pruned) " pruned, "
                (did.truncated) " truncated; ~" (did.tokens_saved) " tokens taken out of "
                (did.tokens_before)
            } }
            tr { th { "Last activity" } td { (format_rfc3339_seconds(info.updated_at_ms)) " UTC" } }
        }
        h2 { "Compactions" }
        @if compactions.is_empty() {
            p.muted #no-compactions { "None: the history was never summarised." }
        } @else {
            table #compactions {
                thead { tr { th { "When" } th { "Tokens before" } th { "First kept entry" } th { "Summary" } } }
                tbody {
                    @for (entry, summary, first_kept, tokens_before) in &compactions {
                        tr {
                            td { (entry.timestamp) }
                            td.num { @if let Some(tokens) = tokens_before { (tokens) } @else { "–" } }
                            td { (first_kept.as_deref().unwrap_or("none")) }
                            td { pre { (summary) } }
                        }
                    }
                }
            }
        }
        h2 { "Context as the model sees it now" }
        p.muted { "Each highlighted placeholder links to the original skald stored." }
        pre #context { (linked(&text)) }
    };
    Ok(page(Some(&caller.0), &format!("Session {id}"), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_links_and_the_rest_stays_escaped_text() {
        let id = "a".repeat(64);
        let text = format!("<b>x</b> [REF_ID: {id}] (Summary: s) [REF_ID: short] end");
        let html = linked(&text).into_string();
        assert_eq!(
            html,
            format!(
                "&lt;b&gt;x&lt;/b&gt; <a class=\"ref\" href=\"/ui/refs/{id}\">[REF_ID: {id}]</a> \
                 (Summary: s) [REF_ID: short] end"
            )
        );
    }
}
