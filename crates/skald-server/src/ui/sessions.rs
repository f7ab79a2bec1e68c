//! The sessions pages: `/ui` (the tenant's sessions, their context now against the raw history,
//! searchable by id or title) and `/ui/sessions/{id}` (the context as the model sees it now, in
//! the readable rendering `skald context --text` prints, each placeholder linked to its
//! original; what the pipeline did to build it — the context route's report; the compaction
//! checkpoints of the session; its switches, set with `POST /ui/sessions/{id}/switches`).

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;
use skald_core::ids::SessionId;
use skald_core::refs::{REF_PREFIX, RefId};
use skald_core::render::{ContextHeading, render_context};
use skald_core::session::EntryKind;
use skald_core::time::format_rfc3339_seconds;
use skald_engine::storage::{SessionInfo, SessionSwitches};
use skald_engine::{View, ViewOptions};

use super::{UiCaller, UiError, encode, page};
use crate::error::ApiError;
use crate::routes::engine::view_report;
use crate::routes::{failure, session_id};
use crate::state::AppState;

/// `/ui` parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only sessions whose id or title contains this (case-insensitive).
    q: Option<String>,
    /// The page, from 1 ([`SESSIONS_PER_PAGE`] sessions each).
    page: Option<usize>,
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
        .map_err(failure)?)
}

fn matches(info: &SessionInfo, needle: &str) -> bool {
    let needle = needle.to_lowercase();
    info.id.to_lowercase().contains(&needle)
        || info
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

/// Sessions on one page of `/ui`: only these are sized (their context rebuilt and the
/// pipeline run), so the list costs the same whatever the tenant holds.
pub const SESSIONS_PER_PAGE: usize = 25;

/// `GET /ui`: the caller's sessions, most recently active first, a page at a time.
pub async fn list(
    State(state): State<AppState>,
    caller: UiCaller,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Markup, UiError> {
    let Query(query) = query?;
    let needle = query.q.as_deref().map(str::trim).unwrap_or("");
    let matching: Vec<SessionInfo> = state
        .engine
        .session_infos(&caller.0.tenant)
        .map_err(failure)?
        .into_iter()
        .filter(|info| needle.is_empty() || matches(info, needle))
        .collect();
    let page_number = query.page.unwrap_or(1).max(1);
    let pages = matching.len().div_ceil(SESSIONS_PER_PAGE).max(1);
    let mut rows = Vec::with_capacity(SESSIONS_PER_PAGE);
    for info in matching
        .iter()
        .skip((page_number - 1).saturating_mul(SESSIONS_PER_PAGE))
        .take(SESSIONS_PER_PAGE)
    {
        let id = session_id(info.id.clone())?;
        let overview = state
            .engine
            .session_overview(&caller.0.tenant, &id)
            .map_err(failure)?;
        let now = current_view(&state, &caller, &id)
            .await?
            .view
            .estimated_tokens();
        rows.push((overview, now));
    }
    let page_link = |number: usize| format!("/ui?q={}&page={number}", encode(needle));
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
                    th { "Saved" } th { "Paused" } th { "Last activity (UTC)" }
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
                            td { (paused_label(overview.info.switches)) }
                            td { (format_rfc3339_seconds(overview.info.updated_at_ms)) }
                        }
                    }
                }
            }
            @if pages > 1 {
                p #pages {
                    "Page " (page_number) " of " (pages) " (" (matching.len()) " sessions)"
                    @if page_number > 1 { " · " a rel="prev" href=(page_link(page_number - 1)) { "newer" } }
                    @if page_number < pages { " · " a rel="next" href=(page_link(page_number + 1)) { "older" } }
                }
            }
        }
    };
    Ok(page(Some(&caller), "Sessions", body))
}

/// What a session's switches pause, for a listing.
fn paused_label(switches: SessionSwitches) -> &'static str {
    match (switches.pause_compaction, switches.pause_offload) {
        (true, true) => "compaction, offload",
        (true, false) => "compaction",
        (false, true) => "offload",
        (false, false) => "–",
    }
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

/// `/ui/sessions/{id}` parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShowQuery {
    /// The page of the model-call timeline, from 1 (newest first).
    calls: Option<usize>,
}

/// `GET /ui/sessions/{id}`: one session's calls, context now and compactions.
pub async fn show(
    State(state): State<AppState>,
    caller: UiCaller,
    Path(raw): Path<String>,
    query: Result<Query<ShowQuery>, QueryRejection>,
) -> Result<Markup, UiError> {
    let Query(query) = query?;
    let id = session_id(raw)?;
    let timeline = state
        .engine
        .call_timeline(
            &caller.0.tenant,
            &id,
            query.calls.unwrap_or(1),
            super::timeline::CALLS_PER_PAGE,
        )
        .map_err(failure)?;
    let calls_link = |page: usize| format!("/ui/sessions/{}?calls={page}", encode(id.as_str()));
    let overview = state
        .engine
        .session_overview(&caller.0.tenant, &id)
        .map_err(failure)?;
    let session = state
        .engine
        .load_session(&caller.0.tenant, &id)
        .map_err(failure)?;
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
                @if built.view.report.switches.pause_offload { "; offload skipped: paused for this session" }
            } }
            tr { th { "Last activity" } td { (format_rfc3339_seconds(info.updated_at_ms)) " UTC" } }
        }
        p { a #export href={ "/ui/sessions/" (encode(id.as_str())) "/export" } download { "Export this session" } " (its entries and the originals of its refs, JSON lines)" }
        h2 { "Switches" }
        form #switches method="post" action={ "/ui/sessions/" (encode(id.as_str())) "/switches" } {
            (caller.csrf_field())
            label { input type="checkbox" name="pause_compaction" value="on" checked[info.switches.pause_compaction]; " Pause compaction" }
            " "
            label { input type="checkbox" name="pause_offload" value="on" checked[info.switches.pause_offload]; " Pause offload" }
            " " button type="submit" { "Save" }
        }
        p.muted #switch-state {
            @if info.switches.pause_compaction { "Compaction is paused: every compaction of this session is skipped (reason: paused). " }
            @if info.switches.pause_offload { "Offload is paused: the next calls send every tool output whole. " }
            @if !info.switches.pause_compaction && !info.switches.pause_offload { "Nothing is paused." }
        }
        (super::timeline::section(&timeline, calls_link))
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
    Ok(page(Some(&caller), &format!("Session {id}"), body))
}

/// `GET /ui/sessions/{id}/export`: the session as a file to download (what
/// `GET /v1/sessions/{id}/export` answers).
pub async fn export(
    State(state): State<AppState>,
    caller: UiCaller,
    Path(raw): Path<String>,
) -> Result<Response, UiError> {
    let id = session_id(raw)?;
    let export = state
        .engine
        .export_session(&caller.0.tenant, &id)
        .await
        .map_err(failure)?;
    Ok(crate::routes::engine::export_response(
        id.as_str(),
        &export,
    )?)
}

/// The switches form's fields (a checkbox is absent when unchecked).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchesForm {
    /// `on` to pause compaction.
    pause_compaction: Option<String>,
    /// `on` to pause offload.
    pause_offload: Option<String>,
    /// The login's CSRF token.
    csrf: Option<String>,
}

/// A checkbox's value: `on` when checked, absent when not; anything else is refused.
fn checkbox(field: &str, value: Option<&str>) -> Result<bool, UiError> {
    match value {
        None => Ok(false),
        Some("on") => Ok(true),
        Some(other) => Err(ApiError::BadRequest(format!(
            "{field} is {other:?}: a checkbox is \"on\" or absent"
        ))
        .into()),
    }
}

/// `POST /ui/sessions/{id}/switches`: sets the session's pauses (the engine's
/// `set_switches`), then shows the session.
pub async fn set_switches(
    State(state): State<AppState>,
    caller: UiCaller,
    Path(raw): Path<String>,
    form: Result<Form<SwitchesForm>, FormRejection>,
) -> Result<Response, UiError> {
    let Form(form) = form?;
    caller.check_csrf(form.csrf.as_deref())?;
    let id = session_id(raw)?;
    let switches = SessionSwitches {
        pause_compaction: checkbox("pause_compaction", form.pause_compaction.as_deref())?,
        pause_offload: checkbox("pause_offload", form.pause_offload.as_deref())?,
    };
    state
        .engine
        .set_switches(&caller.0.tenant, &id, switches)
        .await
        .map_err(failure)?;
    Ok(Redirect::to(&format!("/ui/sessions/{}", encode(id.as_str()))).into_response())
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
