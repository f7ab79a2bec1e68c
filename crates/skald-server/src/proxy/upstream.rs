//! What goes upstream besides the body: its headers — the client's own provider auth passed through, or
//! the configured key when the skald key took the provider header's place (a skald key never
//! leaves), the provider headers (`anthropic-version`, `anthropic-beta`, `openai-organization`…)
//! passed on, hop-by-hop and skald's own headers dropped. Also which upstream response headers
//! go back to the client.

use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use skald_engine::storage::KEY_PREFIX;

use super::wire::Api;
use crate::auth::{Caller, KeySource, SKALD_KEY_HEADER};
use crate::config::Upstream;
use crate::error::ApiError;

/// The header naming the session a proxy request belongs to.
pub const SESSION_HEADER: &str = "x-skald-session";

/// A provider key as the header value `api` takes it in.
fn key_value(api: Api, key: &str) -> Result<HeaderValue, ApiError> {
    HeaderValue::from_str(&api.key_text(key)).map_err(|_| {
        ApiError::Internal(format!(
            "the api_key under {} is not a valid header value",
            api.table()
        ))
    })
}

/// Request headers never forwarded: hop-by-hop ones, those reqwest sets itself, and skald's.
fn is_dropped_request_header(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "host"
            | "content-length"
            | "content-type"
            | "transfer-encoding"
            | "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authorization"
            | "proxy-authenticate"
            | "te"
            | "trailer"
            | "upgrade"
            | "expect"
            // skald reads the answer: it must come uncompressed.
            | "accept-encoding"
            // skald decompressed the client's body and sends its own.
            | "content-encoding"
    ) || name.as_str().starts_with("x-skald-")
}

/// The headers of the upstream request.
pub fn upstream_headers(
    api: Api,
    caller: &Caller,
    incoming: &HeaderMap,
    upstream: &Upstream,
) -> Result<HeaderMap, ApiError> {
    let mut out = HeaderMap::with_capacity(incoming.len() + 2);
    for (name, value) in incoming {
        if !is_dropped_request_header(name) {
            out.append(name.clone(), value.clone());
        }
    }
    // The provider-key headers that carried a skald key: the one the caller was authenticated
    // by, and any other — a client may send its key both in `x-skald-key` and where its SDK
    // puts the provider key. Either way the client holds no provider key there, so skald's
    // configured key takes the place (the virtual-key pattern), as it does for a key that came
    // in that header alone.
    let mut carriers: Vec<HeaderName> = match caller.key_source {
        KeySource::Bearer => vec![header::AUTHORIZATION],
        KeySource::XApiKey => vec![HeaderName::from_static("x-api-key")],
        KeySource::None | KeySource::SkaldHeader => Vec::new(),
    };
    if caller.key_source != KeySource::None {
        for name in [header::AUTHORIZATION, HeaderName::from_static("x-api-key")] {
            let carries = incoming
                .get_all(&name)
                .iter()
                .any(|value| carries_skald_key(value.as_bytes()));
            if carries && !carriers.contains(&name) {
                carriers.push(name);
            }
        }
    }
    if let Some(carrier) = carriers.first() {
        // The virtual-key pattern: the client holds only a skald key, skald the provider's.
        for name in &carriers {
            out.remove(name);
        }
        // A client authenticated by `x-skald-key` that still sends a provider key of its own
        // where the API takes it (the skald key was in the other header) keeps it.
        let own_key_left =
            caller.key_source == KeySource::SkaldHeader && out.contains_key(api.key_header());
        if !own_key_left {
            let Some(key) = upstream.api_key.as_deref() else {
                return Err(ApiError::Unprocessable(format!(
                    "the skald key came in the `{carrier}` header, where the provider key \
                     belongs, but skald holds no provider key: set `api_key_env` under {} in \
                     skald.toml to the name of an environment variable holding it, or send your \
                     provider key in `{}` and the skald key in `{SKALD_KEY_HEADER}`",
                    api.table(),
                    api.key_header()
                )));
            };
            out.insert(api.key_header(), key_value(api, key)?);
        }
    } else if !out.contains_key(header::AUTHORIZATION) && !out.contains_key("x-api-key") {
        if let Some(key) = upstream.api_key.as_deref() {
            out.insert(api.key_header(), key_value(api, key)?);
        }
    }
    // Whatever happened above, no header holding a skald key goes out: not the provider
    // headers, not Azure's `api-key`, not a cookie, not a custom header a client was told to
    // carry it in. A header value that is not text is compared as bytes.
    let leaking: Vec<HeaderName> = out
        .keys()
        .filter(|name| {
            out.get_all(*name)
                .iter()
                .any(|value| carries_skald_key(value.as_bytes()))
        })
        .cloned()
        .collect();
    for name in leaking {
        out.remove(&name);
    }
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(out)
}

/// Whether a header value holds a skald key anywhere in it.
fn carries_skald_key(value: &[u8]) -> bool {
    value
        .windows(KEY_PREFIX.len())
        .any(|window| window.eq_ignore_ascii_case(KEY_PREFIX.as_bytes()))
}

/// The upstream response headers passed back to the client: everything but hop-by-hop ones and
/// the body's framing (the proxy may change the body, and axum frames it).
pub fn response_headers(upstream: &reqwest::header::HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(upstream.len());
    for (name, value) in upstream {
        let dropped = matches!(
            name.as_str(),
            "content-length"
                | "transfer-encoding"
                | "connection"
                | "keep-alive"
                | "proxy-connection"
                | "te"
                | "trailer"
                | "upgrade"
                | "content-encoding"
        );
        if !dropped {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::super::wire::{CHAT, MESSAGES};
    use super::*;

    fn caller(source: KeySource) -> Caller {
        Caller {
            tenant: skald_core::ids::Tenant::parse("acme").unwrap(),
            key_id: None,
            key_source: source,
        }
    }

    fn upstream(key: Option<&str>) -> Upstream {
        Upstream {
            base_url: "http://127.0.0.1:9/v1/".to_owned(),
            api_key: key.map(str::to_owned),
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn the_clients_own_key_passes_and_skald_headers_stay_home() {
        let incoming = headers(&[
            ("authorization", "Bearer sk-openai-123"),
            ("x-skald-key", "sk-skald-abc"),
            ("x-skald-session", "s1"),
            ("openai-organization", "org-1"),
            ("connection", "keep-alive"),
            ("accept-encoding", "gzip"),
        ]);
        let out = upstream_headers(
            CHAT,
            &caller(KeySource::SkaldHeader),
            &incoming,
            &upstream(Some("sk-configured")),
        )
        .unwrap();
        assert_eq!(out["authorization"], "Bearer sk-openai-123");
        assert_eq!(out["openai-organization"], "org-1");
        assert!(out.get("x-skald-key").is_none());
        assert!(out.get("x-skald-session").is_none());
        assert!(out.get("connection").is_none());
        assert!(out.get("accept-encoding").is_none());
    }

    #[test]
    fn a_skald_key_in_the_provider_header_is_replaced_by_the_configured_key() {
        let incoming = headers(&[
            ("x-api-key", "sk-skald-abc"),
            ("anthropic-version", "2023-06-01"),
        ]);
        let out = upstream_headers(
            MESSAGES,
            &caller(KeySource::XApiKey),
            &incoming,
            &upstream(Some("sk-ant-configured")),
        )
        .unwrap();
        assert_eq!(out["x-api-key"], "sk-ant-configured");
        assert_eq!(out["anthropic-version"], "2023-06-01");

        let refused = upstream_headers(
            CHAT,
            &caller(KeySource::Bearer),
            &headers(&[("authorization", "Bearer sk-skald-abc")]),
            &upstream(None),
        )
        .unwrap_err();
        assert!(refused.to_string().contains("api_key_env"), "{refused}");
        assert!(refused.to_string().contains("[proxy.openai]"), "{refused}");
    }

    #[test]
    fn a_skald_key_in_both_its_own_header_and_the_provider_header_gets_the_configured_key() {
        let incoming = headers(&[
            ("x-skald-key", "sk-skald-abc"),
            ("authorization", "Bearer sk-skald-abc"),
        ]);
        let out = upstream_headers(
            CHAT,
            &caller(KeySource::SkaldHeader),
            &incoming,
            &upstream(Some("sk-configured")),
        )
        .unwrap();
        assert_eq!(out["authorization"], "Bearer sk-configured");
        let refused = upstream_headers(
            CHAT,
            &caller(KeySource::SkaldHeader),
            &incoming,
            &upstream(None),
        )
        .unwrap_err();
        assert!(refused.to_string().contains("api_key_env"), "{refused}");
    }

    #[test]
    fn a_provider_key_of_the_clients_own_beside_a_skald_key_in_the_other_header_passes() {
        let out = upstream_headers(
            MESSAGES,
            &caller(KeySource::SkaldHeader),
            &headers(&[
                ("x-skald-key", "sk-skald-abc"),
                ("authorization", "Bearer sk-skald-abc"),
                ("x-api-key", "sk-ant-own"),
            ]),
            &upstream(None),
        )
        .unwrap();
        assert_eq!(out["x-api-key"], "sk-ant-own");
        assert!(out.get("authorization").is_none());
    }

    #[test]
    fn a_skald_key_in_any_header_never_leaves() {
        let out = upstream_headers(
            CHAT,
            &caller(KeySource::SkaldHeader),
            &headers(&[
                ("x-skald-key", "sk-skald-abc"),
                ("api-key", "sk-skald-abc"),
                ("cookie", "session=1; skald=sk-skald-abc"),
                ("x-custom-auth", "Bearer SK-SKALD-abc"),
                ("authorization", "Bearer sk-openai-123"),
                ("openai-organization", "org-1"),
            ]),
            &upstream(None),
        )
        .unwrap();
        for name in ["api-key", "cookie", "x-custom-auth", "x-skald-key"] {
            assert!(out.get(name).is_none(), "{name} went upstream");
        }
        assert_eq!(out["authorization"], "Bearer sk-openai-123");
        assert_eq!(out["openai-organization"], "org-1");
    }

    #[test]
    fn a_skald_key_never_leaves_even_when_the_caller_was_not_authenticated_by_it() {
        let out = upstream_headers(
            CHAT,
            &caller(KeySource::None),
            &headers(&[("authorization", "Bearer sk-skald-abc")]),
            &upstream(None),
        )
        .unwrap();
        assert!(out.get("authorization").is_none());
    }
}
