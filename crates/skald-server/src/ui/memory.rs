//! The memory pages: `/ui/memory` browses `viking://` one directory at a time (each directory
//! with its entry count, each entry with its abstract) and as a tree of `<details>` (directories
//! open without a script, entries linked at L0, L1 and L2) and searches it (the engine's memory
//! search, for the server's `[memory]` user and agent) and lists the latest memory writes;
//! `/ui/memory/read` shows one entry at L0, L1 or L2 and the history of its writes (every
//! version, with its status and when it ended), with a button that forgets it
//! (`POST /ui/memory/forget`, the engine's forget, with the login's CSRF token).

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;
use skald_core::memory::uri::MemoryUri;
use skald_engine::memory::manage;
use skald_engine::storage::{DirEntryKind, MemoryLevel, SearchFilter, TreeNode, WriteAction};

use super::{UiCaller, UiError, encode, page};
use crate::error::ApiError;
use crate::routes::failure;
use crate::routes::memory::{identity, parse_uri};
use crate::state::AppState;

/// How many results a search shows.
const SEARCH_RESULTS: usize = 20;
/// How many of the latest memory writes the page lists.
const RECENT_WRITES: usize = 20;
/// Levels of the tree under the directory shown.
const TREE_DEPTH: usize = 6;
/// Nodes of the tree drawn at most (the rest is reachable by opening a directory).
const TREE_NODES: usize = 1_000;

/// The tree as nested `<details>` (a directory opens without a script), entries linked to their
/// page; `budget` counts down the nodes still drawn.
fn tree_markup(node: &TreeNode, depth: usize, budget: &mut usize) -> Markup {
    if *budget == 0 {
        return html! {};
    }
    *budget -= 1;
    let name = if depth == 0 {
        node.entry.uri.as_str().to_owned()
    } else {
        node.entry.uri.name().unwrap_or("").to_owned()
    };
    match &node.entry.kind {
        DirEntryKind::Directory { entries } => html! {
            details.dir open[depth == 0] {
                summary { (name) " " span.muted { "(" (entries) ")" } " "
                    a href=(memory_link(&node.entry.uri, true)) { "list" } }
                @if node.children.is_empty() && *entries > 0 {
                    p.muted { a href=(memory_link(&node.entry.uri, true)) { "open to see more" } }
                }
                ul { @for child in &node.children { li { (tree_markup(child, depth + 1, budget)) } } }
            }
        },
        DirEntryKind::Entry { l0, category, .. } => html! {
            a href=(memory_link(&node.entry.uri, false)) { (name) }
            " " span.muted { (category.name()) } " — " (l0)
            " " a href={ (memory_link(&node.entry.uri, false)) "&level=l0" } { "L0" }
            " " a href={ (memory_link(&node.entry.uri, false)) "&level=l1" } { "L1" }
            " " a href={ (memory_link(&node.entry.uri, false)) "&level=l2" } { "L2" }
        },
    }
}

fn action_name(action: WriteAction) -> &'static str {
    match action {
        WriteAction::Added => "added",
        WriteAction::Updated => "updated",
        WriteAction::Merged => "merged",
        WriteAction::Forgotten => "forgotten",
    }
}

/// `/ui/memory` parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrowseQuery {
    /// The directory to list (default `viking://`).
    uri: Option<String>,
    /// What to search for.
    q: Option<String>,
}

fn memory_link(uri: &MemoryUri, directory: bool) -> String {
    if directory {
        format!("/ui/memory?uri={}", encode(uri.as_str()))
    } else {
        format!("/ui/memory/read?uri={}", encode(uri.as_str()))
    }
}

/// `GET /ui/memory`: a directory of `viking://`, and a search.
pub async fn browse(
    State(state): State<AppState>,
    caller: UiCaller,
    query: Result<Query<BrowseQuery>, QueryRejection>,
) -> Result<Markup, UiError> {
    let Query(query) = query?;
    let dir = match query
        .uri
        .as_deref()
        .map(str::trim)
        .filter(|uri| !uri.is_empty())
    {
        Some(text) => parse_uri(text, "uri")?,
        None => MemoryUri::root(),
    };
    let rows = state
        .engine
        .list_memories(&caller.0.tenant, &dir)
        .map_err(failure)?;
    let needle = query.q.as_deref().map(str::trim).unwrap_or("");
    let results = if needle.is_empty() {
        None
    } else {
        let identity = identity(&state, None, None)?;
        let filter = SearchFilter {
            categories: manage::memory_categories(),
            ..SearchFilter::default()
        };
        Some(
            state
                .engine
                .search_memories(&caller.0.tenant, &identity, needle, filter, SEARCH_RESULTS)
                .await
                .map_err(failure)?,
        )
    };
    let writes = state
        .engine
        .recent_memory_writes(&caller.0.tenant, RECENT_WRITES)
        .map_err(failure)?;
    let tree = state
        .engine
        .memory_tree(&caller.0.tenant, &dir, TREE_DEPTH)
        .map_err(failure)?;
    let mut budget = TREE_NODES;
    let tree = tree_markup(&tree, 0, &mut budget);
    let mut crumbs = Vec::new();
    let mut at = Some(dir.clone());
    while let Some(uri) = at {
        at = uri.parent();
        crumbs.push(uri);
    }
    crumbs.reverse();
    let body = html! {
        form.inline #memory-search method="get" action="/ui/memory" {
            input type="search" name="q" value=(needle) placeholder="search memories";
            " " button type="submit" { "Search" }
        }
        @if let Some(report) = &results {
            h2 { "Results for “" (report.query) "” (" (report.mode) ")" }
            @if report.results.is_empty() {
                p.muted #no-results { "Nothing matches." }
            } @else {
                table #results {
                    thead { tr { th { "#" } th { "Memory" } th { "Category" } th { "Abstract" } th { "Score" } } }
                    tbody { @for row in &report.results { tr {
                        td.num { (row.rank) }
                        td { a href=(memory_link(&row.uri, false)) { (row.uri.as_str()) } }
                        td { (row.category.name()) }
                        td { (row.l0) }
                        td.num { (row.score) }
                    } } }
                }
            }
        }
        h2 {
            @for (index, crumb) in crumbs.iter().enumerate() {
                @if index > 0 { " › " }
                a href=(memory_link(crumb, true)) { (crumb.name().unwrap_or(crumb.as_str())) }
            }
        }
        @if rows.is_empty() {
            p.muted #empty-directory { "Nothing here yet." }
        } @else {
            table #listing {
                thead { tr { th { "Name" } th { "Entries / category" } th { "Abstract (L0)" } th { "Updated" } } }
                tbody { @for row in &rows {
                    @let directory = row.kind == "directory";
                    tr {
                        td { a href=(memory_link(&row.uri, directory)) { (row.name) } }
                        td { @if let Some(entries) = row.entries { (entries) " entries" }
                             @if let Some(category) = row.category { (category.name()) } }
                        td { (row.l0.as_deref().unwrap_or("")) }
                        td { (row.updated_at.as_deref().unwrap_or("")) }
                    }
                } }
            }
        }
        h2 { "Tree" }
        div #tree { (tree) }
        @if budget == 0 { p.muted { "The first " (TREE_NODES) " nodes are drawn; open a directory for the rest." } }
        h2 { "Latest writes" }
        @if writes.is_empty() {
            p.muted #no-writes { "No memory was written yet." }
        } @else {
            table #writes {
                thead { tr { th { "When (UTC)" } th { "What" } th { "Memory" } th { "Version" } th { "Abstract" } } }
                tbody { @for write in &writes { tr {
                    td { (write.at) }
                    td { (action_name(write.action)) }
                    td { a href=(memory_link(&write.uri, false)) { (write.uri.as_str()) } }
                    td.num { (write.version) }
                    td { (write.l0) }
                } } }
            }
        }
    };
    Ok(page(Some(&caller), "Memory", body))
}

/// `/ui/memory/read` parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadQuery {
    /// The entry.
    uri: String,
    /// l0, l1 or l2 (default l2).
    level: Option<String>,
}

/// The forget form's field.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgetForm {
    /// The entry to forget (one entry: the dashboard does not forget whole directories).
    uri: String,
    /// The login's CSRF token.
    csrf: Option<String>,
}

/// `POST /ui/memory/forget`: forgets one entry (its versions stay in the history, as with
/// `POST /v1/memory/forget`), then shows its directory.
pub async fn forget(
    State(state): State<AppState>,
    caller: UiCaller,
    form: Result<Form<ForgetForm>, FormRejection>,
) -> Result<Response, UiError> {
    let Form(form) = form?;
    caller.check_csrf(form.csrf.as_deref())?;
    let uri = parse_uri(&form.uri, "uri")?;
    state
        .engine
        .forget_memories(&caller.0.tenant, &uri, false)
        .map_err(failure)?;
    let back = uri.parent().unwrap_or_else(MemoryUri::root);
    Ok(Redirect::to(&memory_link(&back, true)).into_response())
}

/// `GET /ui/memory/read`: one entry at a level, with links to the other levels.
pub async fn read(
    State(state): State<AppState>,
    caller: UiCaller,
    query: Result<Query<ReadQuery>, QueryRejection>,
) -> Result<Markup, UiError> {
    let Query(query) = query?;
    let uri = parse_uri(&query.uri, "uri")?;
    let level = match query.level.as_deref().unwrap_or("l2") {
        "l0" => MemoryLevel::L0,
        "l1" => MemoryLevel::L1,
        "l2" => MemoryLevel::L2,
        other => {
            return Err(ApiError::BadRequest(format!(
                "level is {other:?}: it is l0 (abstract), l1 (overview) or l2 (full)"
            ))
            .into());
        }
    };
    let report = state
        .engine
        .read_memory(&caller.0.tenant, &uri, level)
        .map_err(failure)?;
    let versions = state
        .engine
        .memory_versions(&caller.0.tenant, &uri)
        .map_err(failure)?;
    let link = |name: &str| format!("/ui/memory/read?uri={}&level={name}", encode(uri.as_str()));
    let body = html! {
        p {
            "Level: "
            a href=(link("l0")) { "L0 abstract" } " · "
            a href=(link("l1")) { "L1 overview" } " · "
            a href=(link("l2")) { "L2 full" }
            @if let Some(parent) = uri.parent() { " · " a href=(memory_link(&parent, true)) { "up" } }
        }
        table {
            tr { th { "Category" } td { (report.category.name()) } }
            tr { th { "Version" } td { (report.version) } }
            tr { th { "Priority" } td { (report.priority) } }
            tr { th { "Updated" } td { (report.updated_at) } }
        }
        pre #memory-text { (report.text) }
        h2 { "History of writes" }
        table #versions {
            thead { tr { th { "Version" } th { "Status" } th { "Written" } th { "Ended" } th { "Priority" } th { "Abstract (L0)" } } }
            tbody { @for version in &versions { tr {
                td.num { (version.version) }
                td { (version.status) }
                td { (version.written_at) }
                td { (version.ended_at.as_deref().unwrap_or("–")) }
                td.num { (version.priority) }
                td { details { summary { (version.l0) } pre { (version.l2) } } }
            } } }
        }
        form #forget method="post" action="/ui/memory/forget" {
            input type="hidden" name="uri" value=(uri.as_str());
            (caller.csrf_field())
            button type="submit" { "Forget this memory" }
        }
    };
    Ok(page(Some(&caller), uri.as_str(), body))
}
