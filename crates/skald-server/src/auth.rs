//! Who is calling: the API key of a request and the tenant it belongs to.
//!
//! A skald key (`sk-skald-…`) is read from `x-skald-key`, or — the virtual-key pattern, when
//! skald holds the provider key — from `Authorization: Bearer` or Anthropic's `x-api-key`. Which
//! header carried it is remembered so the proxy strips exactly that header and never sends a
//! skald key upstream; a provider key in the other header passes through untouched.
//!
//! With no live key in the store the server runs open (tenant `default`); `skald serve` allows
//! that only on a loopback address.

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use skald_core::ids::Tenant;
use skald_engine::storage::{KEY_PREFIX, KeyError};

use crate::error::ApiError;
use crate::state::AppState;

/// The header a skald key goes in when the provider key uses `Authorization`.
pub const SKALD_KEY_HEADER: &str = "x-skald-key";

/// The tenant of an open server (no keys).
pub const OPEN_TENANT: &str = skald_core::ids::DEFAULT_TENANT;

/// Where the request's skald key was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// No key: the server runs open.
    None,
    /// `x-skald-key`.
    SkaldHeader,
    /// `Authorization: Bearer sk-skald-…`.
    Bearer,
    /// `x-api-key: sk-skald-…` (Anthropic clients).
    XApiKey,
}

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Parsed once here; every store call of the request trusts it.
    pub tenant: Tenant,
    /// The key's id (`None` on an open server).
    pub key_id: Option<String>,
    /// Which header carried the key, so the proxy strips exactly that one before going upstream.
    pub key_source: KeySource,
}

/// Finds the skald key among the headers, without checking it.
pub fn find_key(headers: &HeaderMap) -> Result<Option<(String, KeySource)>, ApiError> {
    if let Some(value) = headers.get(SKALD_KEY_HEADER) {
        let key = value.to_str().map_err(|_| {
            ApiError::Unauthorized(format!("the {SKALD_KEY_HEADER} header is not ASCII text"))
        })?;
        return Ok(Some((key.trim().to_owned(), KeySource::SkaldHeader)));
    }
    let bearer = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|token| token.starts_with(KEY_PREFIX));
    if let Some(token) = bearer {
        return Ok(Some((token.to_owned(), KeySource::Bearer)));
    }
    let api_key = headers
        .get("x-api-key")
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|token| token.starts_with(KEY_PREFIX));
    Ok(api_key.map(|token| (token.to_owned(), KeySource::XApiKey)))
}

/// Authenticates a request's headers against the key store.
pub fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let found = find_key(headers)?;
    let Some((secret, source)) = found else {
        if state.auth_required() {
            return Err(ApiError::Unauthorized(format!(
                "this server requires an API key: send it in the {SKALD_KEY_HEADER} header, or \
                 as `Authorization: Bearer {KEY_PREFIX}…` (`skald keys create` makes one)"
            )));
        }
        return Ok(Caller {
            tenant: Tenant::default(),
            key_id: None,
            key_source: KeySource::None,
        });
    };
    match state.keys.authenticate(&secret) {
        Ok(key) => Ok(Caller {
            // The key store checked the name when the key was made.
            tenant: Tenant::parse(key.tenant).map_err(|error| {
                ApiError::Internal(format!("the API key's stored tenant is not valid: {error}"))
            })?,
            key_id: Some(key.id),
            key_source: source,
        }),
        Err(KeyError::Unknown) => Err(ApiError::Unauthorized(
            "unknown API key: no skald key has this secret".to_owned(),
        )),
        Err(KeyError::Revoked { id }) => {
            Err(ApiError::Unauthorized(format!("API key {id} was revoked")))
        }
        Err(
            error @ (KeyError::NoSuchId(_)
            | KeyError::AlreadyRevoked(_)
            | KeyError::InvalidName(_)
            | KeyError::Random(_)
            | KeyError::Storage(_)),
        ) => Err(ApiError::Internal(format!(
            "checking the API key failed: {error}"
        ))),
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Caller, ApiError> {
        authenticate(state, &parts.headers)
    }
}
