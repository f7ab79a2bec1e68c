//! The dashboard at `/ui`: what skald did to each session, readable by a person in a browser.
//!
//! Server-rendered HTML (`maud`: the templates are Rust, checked at compile time and escaped by
//! default) with one small stylesheet inlined in every page and no script: the pages are plain
//! links and GET forms, so they are compiled into the binary, need no build step or JavaScript
//! toolchain, and work offline. Every page reads through [`skald_engine::Engine`] — the same
//! calls as the JSON routes — and nothing here decides anything the engine does not.
//!
//! Auth is the API's: a skald key in a header, or in the `skald_key` cookie the login form sets
//! (HttpOnly, SameSite=Strict, path `/ui`); with no key in the store the server is open (which
//! `skald serve` allows only on loopback). Every page is scoped to the key's tenant.

mod memory;
mod refs;
mod sessions;

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::{DOCTYPE, Markup, html};
use serde::Deserialize;

use crate::auth::{Caller, SKALD_KEY_HEADER, authenticate, find_key};
use crate::error::ApiError;
use crate::state::AppState;

/// The cookie the login form sets.
pub const KEY_COOKIE: &str = "skald_key";

/// The dashboard's routes.
pub fn router() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/ui", get(sessions::list))
        .route("/ui/", get(sessions::list))
        .route("/ui/sessions/{id}", get(sessions::show))
        .route("/ui/refs/{id}", get(refs::show))
        .route("/ui/memory", get(memory::browse))
        .route("/ui/memory/read", get(memory::read))
        .route("/ui/memory/forget", post(memory::forget))
        .route("/ui/login", get(login_page).post(login))
        .route("/ui/logout", post(logout))
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
                    .insert(header::SET_COOKIE, clear_cookie());
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

/// The caller of a dashboard page: the API's [`Caller`], from a key header or the cookie.
#[derive(Debug)]
pub struct UiCaller(pub Caller);

impl FromRequestParts<AppState> for UiCaller {
    type Rejection = UiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<UiCaller, UiError> {
        if find_key(&parts.headers)?.is_some() {
            return Ok(UiCaller(authenticate(state, &parts.headers)?));
        }
        if let Some(secret) = cookie(&parts.headers, KEY_COOKIE) {
            let mut headers = HeaderMap::new();
            let value = HeaderValue::from_str(secret).map_err(|_| {
                ApiError::Unauthorized("the skald_key cookie is not a key".to_owned())
            })?;
            headers.insert(SKALD_KEY_HEADER, value);
            return Ok(UiCaller(authenticate(state, &headers)?));
        }
        if state.auth_required() {
            return Err(UiError::LoginRequired);
        }
        Ok(UiCaller(authenticate(state, &parts.headers)?))
    }
}

/// The value of cookie `name`, if the request has it.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim())
}

fn clear_cookie() -> HeaderValue {
    HeaderValue::from_static("skald_key=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The login form's fields.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoginForm {
    /// A skald key (`sk-skald-…`).
    key: String,
}

async fn login_page() -> Markup {
    login_markup("")
}

/// Checks the key like any API request; a good one is kept in the cookie.
async fn login(
    State(state): State<AppState>,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Result<Response, UiError> {
    let Form(form) = form?;
    let secret = form.key.trim();
    // A cookie value cannot hold every character; a skald key never needs one of those.
    if secret.is_empty()
        || !secret
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(ApiError::Unauthorized(
            "that is not a skald key: a key is `sk-skald-` and letters, digits, - and _ \
             (`skald keys create` makes one)"
                .to_owned(),
        )
        .into());
    }
    let mut headers = HeaderMap::new();
    let value = HeaderValue::from_str(secret)
        .map_err(|_| ApiError::Unauthorized("that is not a skald key".to_owned()))?;
    headers.insert(SKALD_KEY_HEADER, value);
    authenticate(&state, &headers)?;
    let cookie = HeaderValue::from_str(&format!(
        "{KEY_COOKIE}={secret}; Path=/ui; HttpOnly; SameSite=Strict"
    ))
    .map_err(|_| ApiError::Unauthorized("that is not a skald key".to_owned()))?;
    let mut response = Redirect::to("/ui").into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

async fn logout() -> Response {
    let mut response = Redirect::to("/ui/login").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, clear_cookie());
    response
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
form.inline{margin:.6em 0}input[type=text],input[type=search]{padding:.25em;min-width:16em}";

/// A whole page: the header (sessions, memory, the tenant, log out) and `body`.
fn page(caller: Option<&Caller>, title: &str, body: Markup) -> Markup {
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
                    a href="/ui/memory" { "Memory" }
                    @if let Some(caller) = caller {
                        span.tenant { "tenant " (caller.tenant.as_str()) }
                        @if caller.key_id.is_some() {
                            form method="post" action="/ui/logout" { button type="submit" { "Log out" } }
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
