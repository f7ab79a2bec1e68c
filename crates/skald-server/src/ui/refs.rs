//! `/ui/refs/{id}`: the original behind a placeholder, sliced with the fetch tool's `lines` and
//! `grep` (and `context`, `max_chars`: by default the page shows what the model would get)
//! (the engine's ref read, sliced as the model would get it), with a form to slice it again.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::json;
use skald_core::fetch::{FetchArgs, render_payload};

use super::{UiCaller, UiError, page};
use crate::error::ApiError;
use crate::routes::failure;
use crate::state::AppState;

/// The slice asked for (empty fields, as a form sends them, mean "not given").
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceQuery {
    /// 1-based inclusive line range: `120:180`, `120:`, `:50`.
    lines: Option<String>,
    /// A regular expression: only matching lines, with context around each.
    grep: Option<String>,
    /// Lines of context around each grep match.
    context: Option<String>,
    /// Cap on the characters shown (default: the tool's, what the model would get).
    max_chars: Option<String>,
}

/// A whole number from a form field, or a 400 naming the field.
fn number(field: &str, text: &str, meaning: &str) -> Result<u64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::BadRequest(format!("{field} is {text:?}: it is {meaning}")))
}

fn given(field: &Option<String>) -> Option<&str> {
    field
        .as_deref()
        .map(str::trim)
        .filter(|text| !text.is_empty())
}

/// `GET /ui/refs/{id}`: the original, whole or sliced.
pub async fn show(
    State(state): State<AppState>,
    caller: UiCaller,
    Path(raw): Path<String>,
    query: Result<Query<SliceQuery>, QueryRejection>,
) -> Result<Markup, UiError> {
    let Query(query) = query?;
    let id = skald_core::refs::RefId::parse(&raw)
        .map_err(|error| ApiError::BadRequest(error.to_string()))?;
    let mut arguments = json!({"ref_ids": [id.as_str()]});
    if let Some(lines) = given(&query.lines) {
        arguments["lines"] = json!(lines);
    }
    if let Some(grep) = given(&query.grep) {
        arguments["grep"] = json!(grep);
    }
    if let Some(context) = given(&query.context) {
        arguments["context"] = json!(number("context", context, "a number of lines (0 to 50)")?);
    }
    if let Some(max_chars) = given(&query.max_chars) {
        arguments["max_chars"] = json!(number(
            "max_chars",
            max_chars,
            "a number of characters (at least 200)"
        )?);
    }
    // The arguments are checked before the store is read: a bad slice is a 400 however the ref
    // stands. Then the same read and slicing as `GET /v1/refs/{id}` (an unknown ref is a 404,
    // an expired one a 410).
    let args = FetchArgs::from_json(&arguments)
        .map_err(|error| ApiError::BadRequest(format!("bad slice: {error}")))?;
    let payload = state
        .engine
        .read_ref(&caller.0.tenant, &id)
        .map_err(failure)?;
    let text = render_payload(&id, &payload, &args);
    let body = html! {
        form.inline #slice method="get" action={ "/ui/refs/" (id.as_str()) } {
            label { "lines " input type="text" name="lines" value=(given(&query.lines).unwrap_or("")) placeholder="120:180"; }
            " "
            label { "grep " input type="text" name="grep" value=(given(&query.grep).unwrap_or("")) placeholder="regular expression"; }
            " "
            label { "context " input type="text" name="context" size="3" value=(given(&query.context).unwrap_or("")) placeholder="2"; }
            " "
            label { "max chars " input type="text" name="max_chars" size="7" value=(given(&query.max_chars).unwrap_or("")) placeholder="20000"; }
            " " button type="submit" { "Show" }
            " " a href={ "/ui/refs/" (id.as_str()) } { "whole" }
        }
        pre #original { (text) }
    };
    Ok(page(Some(&caller), "Original", body))
}
