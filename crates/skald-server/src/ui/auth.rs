//! Who is looking at the dashboard, and that a change they post is theirs.
//!
//! - A key in a header (an API client) is checked like any API request.
//! - The login form checks a key and starts a *login*: a random token in the `skald_login`
//!   cookie (HttpOnly, SameSite=Strict, path `/ui`) names it in this server's memory, where the
//!   key stays; the browser never holds the key. Every page re-checks the key, so a revoked
//!   key logs its logins out. A login lasts [`LOGIN_LIFETIME`]; a restart ends every login.
//! - With no key in the store the server is open (loopback only): the default tenant.
//!
//! Every form that changes something (pause switches, forget, log out) carries the login's CSRF
//! token (the open server's own for an open server), and a POST whose `Origin` is not the page's
//! own host is refused before anything else: another site's page can neither read the token nor
//! post as the user. A caller with a key header needs no token (a browser never adds one).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::{UiError, login_markup};
use crate::auth::{Caller, SKALD_KEY_HEADER, authenticate, find_key};
use crate::error::ApiError;
use crate::state::AppState;

/// The cookie that names a login.
pub const LOGIN_COOKIE: &str = "skald_login";

/// How long a login lasts.
pub const LOGIN_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// Logins kept at most; past it the oldest is ended.
const MAX_LOGINS: usize = 10_000;

/// The dashboard's logins, in this server's memory.
#[derive(Default)]
pub struct Logins {
    by_token: Mutex<HashMap<String, Login>>,
    /// The CSRF token of an open server's forms, made on first use.
    open_csrf: OnceLock<String>,
}

impl std::fmt::Debug for Logins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logins").finish_non_exhaustive()
    }
}

struct Login {
    secret: String,
    csrf: String,
    started: Instant,
}

/// 32 random bytes, hex.
fn random_token() -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|error| ApiError::Internal(format!("no randomness for a login: {error}")))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

impl Logins {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Login>> {
        // A panic while holding the map leaves it consistent (every change is one insert or
        // remove), so a poisoned lock is still usable.
        self.by_token
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts a login for a checked key; returns its cookie token.
    fn start(&self, secret: &str) -> Result<String, ApiError> {
        let token = random_token()?;
        let csrf = random_token()?;
        let mut logins = self.lock();
        logins.retain(|_, login| login.started.elapsed() < LOGIN_LIFETIME);
        if logins.len() >= MAX_LOGINS {
            let oldest = logins
                .iter()
                .min_by_key(|(_, login)| login.started)
                .map(|(token, _)| token.clone());
            if let Some(oldest) = oldest {
                logins.remove(&oldest);
            }
        }
        logins.insert(
            token.clone(),
            Login {
                secret: secret.to_owned(),
                csrf,
                started: Instant::now(),
            },
        );
        Ok(token)
    }

    /// The key and CSRF token of a live login.
    fn find(&self, token: &str) -> Option<(String, String)> {
        let mut logins = self.lock();
        let live = logins
            .get(token)
            .is_some_and(|login| login.started.elapsed() < LOGIN_LIFETIME);
        if !live {
            logins.remove(token);
            return None;
        }
        logins
            .get(token)
            .map(|login| (login.secret.clone(), login.csrf.clone()))
    }

    fn end(&self, token: &str) {
        self.lock().remove(token);
    }

    fn open_csrf(&self) -> Result<String, ApiError> {
        if let Some(token) = self.open_csrf.get() {
            return Ok(token.clone());
        }
        let made = random_token()?;
        Ok(self.open_csrf.get_or_init(|| made).clone())
    }
}

/// The caller of a dashboard page: the API's [`Caller`], and the CSRF token its forms carry
/// (`None` for a caller with a key header, which needs none).
#[derive(Debug)]
pub struct UiCaller(pub Caller, Option<String>);

impl UiCaller {
    /// The hidden field every changing form carries.
    pub fn csrf_field(&self) -> Markup {
        html! {
            @if let Some(token) = &self.1 { input type="hidden" name="csrf" value=(token); }
        }
    }

    /// Refuses a posted form whose token is not this caller's.
    pub fn check_csrf(&self, given: Option<&str>) -> Result<(), UiError> {
        match (&self.1, given) {
            (None, _) => Ok(()),
            (Some(expected), Some(given)) if constant_time_eq(expected, given) => Ok(()),
            (Some(_), Some(_) | None) => Err(UiError::Api(ApiError::Forbidden(
                "the form's CSRF token is missing or not this login's: reload the page and \
                 try again"
                    .to_owned(),
            ))),
        }
    }
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

/// A POST from a page of another origin: its `Origin` names a host that is not this request's.
fn cross_origin(method: &Method, headers: &HeaderMap) -> bool {
    if method != Method::POST {
        return false;
    }
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok());
    match headers
        .get(header::ORIGIN)
        .and_then(|value| value.to_str().ok())
    {
        // No Origin: not a browser's cross-site form (browsers send it on every POST).
        None => false,
        Some(origin) => {
            let origin_host = origin
                .split_once("://")
                .map_or(origin, |(_, rest)| rest)
                .trim_end_matches('/');
            host != Some(origin_host)
        }
    }
}

impl FromRequestParts<AppState> for UiCaller {
    type Rejection = UiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<UiCaller, UiError> {
        if cross_origin(&parts.method, &parts.headers) {
            return Err(UiError::Api(ApiError::Forbidden(
                "a form posted from another site: the dashboard takes changes from its own pages \
                 only"
                    .to_owned(),
            )));
        }
        if find_key(&parts.headers)?.is_some() {
            return Ok(UiCaller(authenticate(state, &parts.headers)?, None));
        }
        if let Some(token) = cookie(&parts.headers, LOGIN_COOKIE) {
            let Some((secret, csrf)) = state.logins.find(token) else {
                return Err(UiError::Api(ApiError::Unauthorized(
                    "your login has ended (it expired, you logged out or the server restarted): \
                     log in again"
                        .to_owned(),
                )));
            };
            let caller = authenticate(state, &key_headers(&secret)?)?;
            return Ok(UiCaller(caller, Some(csrf)));
        }
        if state.auth_required() {
            return Err(UiError::LoginRequired);
        }
        let caller = authenticate(state, &parts.headers)?;
        Ok(UiCaller(caller, Some(state.logins.open_csrf()?)))
    }
}

/// Headers carrying `secret` as the API's key header.
fn key_headers(secret: &str) -> Result<HeaderMap, ApiError> {
    let mut headers = HeaderMap::new();
    let value = HeaderValue::from_str(secret)
        .map_err(|_| ApiError::Unauthorized("that is not a skald key".to_owned()))?;
    headers.insert(SKALD_KEY_HEADER, value);
    Ok(headers)
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

/// The header that drops the login cookie.
pub(super) fn clear_cookie() -> HeaderValue {
    HeaderValue::from_static("skald_login=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The login form's fields.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoginForm {
    /// A skald key (`sk-skald-…`).
    key: String,
}

/// `GET /ui/login`.
pub async fn login_page() -> Markup {
    login_markup("")
}

/// `POST /ui/login`: checks the key like any API request; a good one starts a login.
pub async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Result<Response, UiError> {
    if cross_origin(&Method::POST, &headers) {
        return Err(UiError::Api(ApiError::Forbidden(
            "a login posted from another site".to_owned(),
        )));
    }
    let Form(form) = form?;
    let secret = form.key.trim();
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
    authenticate(&state, &key_headers(secret)?)?;
    let token = state.logins.start(secret)?;
    let cookie = HeaderValue::from_str(&format!(
        "{LOGIN_COOKIE}={token}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}",
        LOGIN_LIFETIME.as_secs()
    ))
    .map_err(|_| ApiError::Internal("a login token is not a header value".to_owned()))?;
    let mut response = Redirect::to("/ui").into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

/// The log-out form's field.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CsrfForm {
    /// The login's CSRF token.
    csrf: Option<String>,
}

/// `POST /ui/logout`: ends the login and drops its cookie.
pub async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Result<UiCaller, UiError>,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Result<Response, UiError> {
    // A login that already ended has nothing to protect: its cookie is dropped all the same.
    if let Ok(caller) = &caller {
        let Form(form) = form?;
        caller.check_csrf(form.csrf.as_deref())?;
    }
    if let Some(token) = cookie(&headers, LOGIN_COOKIE) {
        state.logins.end(token);
    }
    let mut response = Redirect::to("/ui/login").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, clear_cookie());
    Ok(response)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn parts(method: &str, host: &str, origin: Option<&str>) -> (Method, HeaderMap) {
        let mut request = axum::http::Request::builder()
            .method(method)
            .uri("/ui/x")
            .header(header::HOST, host);
        if let Some(origin) = origin {
            request = request.header(header::ORIGIN, origin);
        }
        let parts = request.body(()).unwrap().into_parts().0;
        (parts.method, parts.headers)
    }
    fn cross(parts: (Method, HeaderMap)) -> bool {
        cross_origin(&parts.0, &parts.1)
    }

    #[test]
    fn a_post_from_another_origin_is_cross_origin_and_its_own_is_not() {
        let own = parts("POST", "127.0.0.1:7000", Some("http://127.0.0.1:7000"));
        assert!(!cross(own));
        let other = parts("POST", "127.0.0.1:7000", Some("https://evil.example"));
        assert!(cross(other));
        let null = parts("POST", "127.0.0.1:7000", Some("null"));
        assert!(cross(null));
        assert!(!cross(parts(
            "GET",
            "127.0.0.1:7000",
            Some("https://evil.example")
        )));
        assert!(!cross(parts("POST", "127.0.0.1:7000", None)));
    }

    #[test]
    fn a_login_is_found_by_its_token_until_it_ends() {
        let logins = Logins::default();
        let token = logins.start("sk-skald-secret").unwrap();
        let (secret, csrf) = logins.find(&token).unwrap();
        assert_eq!(secret, "sk-skald-secret");
        assert_eq!(csrf.len(), 64);
        assert_ne!(csrf, token, "the CSRF token is not the cookie");
        assert!(logins.find("not-a-token").is_none());
        logins.end(&token);
        assert!(logins.find(&token).is_none());
    }

    #[test]
    fn the_csrf_check_wants_this_logins_token() {
        let caller = UiCaller(
            Caller {
                tenant: skald_core::ids::Tenant::default(),
                key_id: None,
                key_source: crate::auth::KeySource::None,
            },
            Some("a".repeat(64)),
        );
        assert!(caller.check_csrf(Some(&"a".repeat(64))).is_ok());
        assert!(caller.check_csrf(Some(&"b".repeat(64))).is_err());
        assert!(caller.check_csrf(None).is_err());
        let header_caller = UiCaller(caller.0.clone(), None);
        assert!(header_caller.check_csrf(None).is_ok());
    }
}
