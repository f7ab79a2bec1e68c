//! The dashboard at `/ui`: what skald did to each session, readable by a person in a browser.
//!
//! Server-rendered HTML (`maud`: the templates are Rust, checked at compile time and escaped by
//! default) with one small stylesheet inlined in every page and no script: the pages are plain
//! links and GET forms, so they are compiled into the binary, need no build step or JavaScript
//! toolchain, and work offline. Every page reads through [`skald_engine::Engine`] — the same
//! calls as the JSON routes — and nothing here decides anything the engine does not.
//!
//! Auth is the API's: a skald key in a header, or a login the form starts (`ui::auth`: a token
//! in a cookie, the key kept server-side, a CSRF token in every changing form); with no key in
//! the store the server is open (which `skald serve` allows only on loopback). Every page is
//! scoped to the key's tenant.

mod auth;
mod memory;
mod refs;
mod savings;
mod sessions;
mod timeline;

pub use auth::{LOGIN_COOKIE, Logins, UiCaller};

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::{DOCTYPE, Markup, html};

use crate::error::ApiError;
use crate::state::AppState;

/// The dashboard's routes.
pub fn router() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/ui", get(sessions::list))
        .route("/ui/", get(sessions::list))
        .route("/ui/sessions/{id}", get(sessions::show))
        .route("/ui/sessions/{id}/switches", post(sessions::set_switches))
        .route("/ui/sessions/{id}/export", get(sessions::export))
        .route("/ui/refs/{id}", get(refs::show))
        .route("/ui/savings", get(savings::show))
        .route("/ui/memory", get(memory::browse))
        .route("/ui/memory/read", get(memory::read))
        .route("/ui/memory/forget", post(memory::forget))
        .route("/ui/login", get(auth::login_page).post(auth::login))
        .route("/ui/logout", post(auth::logout))
}

/// A dashboard page that failed: the API's error, shown as a page with the same status.
#[derive(Debug)]
pub enum UiError {
    /// The server needs a key and the request brought none: the login form, 401.
    LoginRequired,
    /// Anything the API would refuse, with its status and message.
    Api(ApiError),
}

impl From<ApiError> for UiError {
    fn from(error: ApiError) -> UiError {
        UiError::Api(error)
    }
}

impl From<QueryRejection> for UiError {
    fn from(rejection: QueryRejection) -> UiError {
        UiError::Api(ApiError::BadRequest(format!(
            "bad query string: {}",
            rejection.body_text()
        )))
    }
}

impl From<FormRejection> for UiError {
    fn from(rejection: FormRejection) -> UiError {
        UiError::Api(ApiError::BadRequest(format!(
            "bad form: {}",
            rejection.body_text()
        )))
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        match self {
            UiError::LoginRequired => (
                StatusCode::UNAUTHORIZED,
                login_markup("This server needs a skald key."),
            )
                .into_response(),
            UiError::Api(error @ ApiError::Unauthorized(_)) => {
                // A stale or revoked cookie is dropped, so the form is not shown forever.
                let mut response =
                    (StatusCode::UNAUTHORIZED, login_markup(&error.to_string())).into_response();
                response
                    .headers_mut()
                    .insert(header::SET_COOKIE, auth::clear_cookie());
                response
            }
            UiError::Api(error) => {
                let status = error.status();
                let body = page(
                    None,
                    &format!(
                        "{} {}",
                        status.as_u16(),
                        status.canonical_reason().unwrap_or("")
                    ),
                    html! {
                        p.error { (error.to_string()) }
                        p { a href="/ui" { "Back to the sessions" } }
                    },
                );
                (status, body).into_response()
            }
        }
    }
}

fn login_markup(message: &str) -> Markup {
    page(
        None,
        "Log in",
        html! {
            @if !message.is_empty() { p.error { (message) } }
            form method="post" action="/ui/login" {
                label { "skald key " input type="password" name="key" autocomplete="off" placeholder="sk-skald-…"; }
                " " button type="submit" { "Log in" }
            }
            p.muted { "The key is kept in a cookie for /ui only; log out to drop it." }
        },
    )
}

/// The style of every page: small, inlined, so the dashboard has no asset to fetch.
const STYLE: &str = "\
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}\
header{background:#243447;color:#fff;padding:.5em 1em;display:flex;gap:1.2em;align-items:center}\
header a{color:#fff;text-decoration:none;font-weight:600}header .tenant{margin-left:auto;opacity:.8}\
header form{margin:0}main{padding:1em 1.5em;max-width:1200px}\
table{border-collapse:collapse;width:100%;background:#fff}th,td{border-bottom:1px solid #ddd;\
padding:.35em .6em;text-align:left;vertical-align:top}th{background:#eef1f4}td.num{text-align:right}\
pre{background:#fff;border:1px solid #ddd;padding:.8em;white-space:pre-wrap;word-break:break-word}\
a.ref{background:#fff3c4;border-radius:3px}.error{color:#a40000;font-weight:600}.muted{color:#666}\
form.inline{margin:.6em 0}#tree ul{list-style:none;margin:0;padding-left:1.2em}\
details.dir>summary{cursor:pointer}input[type=text],input[type=search]{padding:.25em;min-width:16em}";

/// A whole page: the header (sessions, memory, the tenant, log out) and `body`.
fn page(caller: Option<&UiCaller>, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · skald" }
                style { (maud::PreEscaped(STYLE)) }
            }
            body {
                header {
                    a href="/ui" { "skald" }
                    a href="/ui" { "Sessions" }
                    a href="/ui/savings" { "Savings" }
                    a href="/ui/memory" { "Memory" }
                    @if let Some(caller) = caller {
                        span.tenant { "tenant " (caller.0.tenant.as_str()) }
                        @if caller.0.key_id.is_some() {
                            form method="post" action="/ui/logout" {
                                (caller.csrf_field())
                                button type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// Percent-encodes `text` for a query-string value or a path segment.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
