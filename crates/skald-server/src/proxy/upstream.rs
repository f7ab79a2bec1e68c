//! The two proxied APIs and what goes upstream besides the body: which configured upstream a
//! request goes to, its URL, and its headers — the client's own provider auth passed through, or
//! the configured key when the skald key took the provider header's place (a skald key never
//! leaves), the provider headers (`anthropic-version`, `anthropic-beta`, `openai-organization`…)
//! passed on, hop-by-hop and skald's own headers dropped. Also which upstream response headers
//! go back to the client.

use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use serde_json::{Value, json};
use skald_core::codec::{anthropic, openai, responses};
use skald_core::message::Conversation;
use skald_store::keys::KEY_PREFIX;

use crate::auth::{Caller, KeySource, SKALD_KEY_HEADER};
use crate::config::{ServerConfig, Upstream};
use crate::error::ApiError;

/// The header naming the session a proxy request belongs to.
pub const SESSION_HEADER: &str = "x-skald-session";

/// Which provider API a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions (`POST /v1/chat/completions`).
    OpenAi,
    /// Anthropic Messages (`POST /v1/messages`).
    Anthropic,
    /// OpenAI Responses (`POST /v1/responses`), to the OpenAI upstream.
    Responses,
}

impl Api {
    /// The configuration table that names this API's upstream.
    pub fn table(self) -> &'static str {
        match self {
            Api::OpenAi | Api::Responses => "[proxy.openai]",
            Api::Anthropic => "[proxy.anthropic]",
        }
    }

    /// The API's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenAi => "Chat Completions",
            Api::Anthropic => "Messages",
            Api::Responses => "Responses",
        }
    }

    /// The codec's origin mark (also the session's source format).
    pub fn origin(self) -> &'static str {
        match self {
            Api::OpenAi => openai::ORIGIN,
            Api::Responses => responses::ORIGIN,
            Api::Anthropic => anthropic::ORIGIN,
        }
    }

    /// The configured upstream, or the error saying what to configure.
    pub fn upstream(self, config: &ServerConfig) -> Result<&Upstream, ApiError> {
        let upstream = match self {
            Api::OpenAi | Api::Responses => config.openai.as_ref(),
            Api::Anthropic => config.anthropic.as_ref(),
        };
        upstream.ok_or_else(|| {
            ApiError::Unprocessable(format!(
                "no upstream is configured for this API: set `base_url` under {} in skald.toml \
                 (e.g. {})",
                self.table(),
                match self {
                    Api::OpenAi | Api::Responses => "https://api.openai.com/v1",
                    Api::Anthropic => "https://api.anthropic.com",
                }
            ))
        })
    }

    /// Decodes a request body; the error names the field.
    pub fn decode_request(self, body: &Value) -> Result<Conversation, String> {
        match self {
            Api::OpenAi => openai::decode_request(body).map_err(|error| error.to_string()),
            Api::Responses => responses::decode_request(body).map_err(|error| error.to_string()),
            Api::Anthropic => anthropic::decode_request(body).map_err(|error| error.to_string()),
        }
    }

    /// Encodes `conversation` as this API's request body, with the fields the client sent that
    /// skald does not model kept as they were.
    pub fn encode_request(self, conversation: &Conversation) -> Value {
        match self {
            Api::OpenAi => openai::encode_request(conversation),
            Api::Responses => responses::encode_request(conversation),
            Api::Anthropic => anthropic::encode_request(conversation),
        }
    }

    /// A skald tool, given as an OpenAI function spec, as this API defines tools.
    pub fn from_function_spec(self, tool: Value) -> Value {
        match self {
            Api::OpenAi => tool,
            Api::Responses => responses::tool_from_function_spec(tool),
            Api::Anthropic => {
                let Value::Object(mut outer) = tool else {
                    return tool;
                };
                let Some(Value::Object(mut function)) = outer.remove("function") else {
                    return Value::Object(outer);
                };
                let schema = function
                    .remove("parameters")
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                function.insert("input_schema".to_owned(), schema);
                Value::Object(function)
            }
        }
    }

    /// `{base_url}/chat/completions`, `{base_url}/v1/messages` or `{base_url}/responses`, with the
    /// client's query string.
    pub fn url(self, upstream: &Upstream, query: Option<&str>) -> String {
        self.url_for(upstream, self.generate_path(), query)
    }

    /// Where a model call goes below the base URL.
    pub fn generate_path(self) -> &'static str {
        match self {
            Api::OpenAi => "/chat/completions",
            Api::Responses => "/responses",
            Api::Anthropic => "/v1/messages",
        }
    }

    /// The event that closes a whole streamed answer, as the API names it.
    pub fn final_event(self) -> &'static str {
        match self {
            Api::OpenAi => "data: [DONE]",
            Api::Responses => "response.completed",
            Api::Anthropic => "message_stop",
        }
    }

    /// Where the models list is below the base URL.
    pub fn models_path(self) -> &'static str {
        match self {
            Api::OpenAi | Api::Responses => "/models",
            Api::Anthropic => "/v1/models",
        }
    }

    /// `{base_url}{path}`, with the client's query string.
    pub fn url_for(self, upstream: &Upstream, path: &str, query: Option<&str>) -> String {
        let base = upstream.base_url.trim_end_matches('/');
        match query.filter(|query| !query.is_empty()) {
            Some(query) => format!("{base}{path}?{query}"),
            None => format!("{base}{path}"),
        }
    }

    /// The header a provider key goes in.
    fn key_header(self) -> HeaderName {
        match self {
            Api::OpenAi | Api::Responses => header::AUTHORIZATION,
            Api::Anthropic => HeaderName::from_static("x-api-key"),
        }
    }

    fn key_value(self, key: &str) -> Result<HeaderValue, ApiError> {
        let text = match self {
            Api::OpenAi | Api::Responses => format!("Bearer {key}"),
            Api::Anthropic => key.to_owned(),
        };
        HeaderValue::from_str(&text).map_err(|_| {
            ApiError::Internal(format!(
                "the api_key under {} is not a valid header value",
                self.table()
            ))
        })
    }
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
            out.insert(api.key_header(), api.key_value(key)?);
        }
    } else if !out.contains_key(header::AUTHORIZATION) && !out.contains_key("x-api-key") {
        if let Some(key) = upstream.api_key.as_deref() {
            out.insert(api.key_header(), api.key_value(key)?);
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
    fn skald_tools_are_written_in_each_apis_shape() {
        let function = serde_json::json!({"type": "function", "function": {
            "name": "fetch_original_data", "description": "d", "parameters": {"type": "object"}}});
        assert_eq!(Api::OpenAi.from_function_spec(function.clone()), function);
        assert_eq!(
            Api::Anthropic.from_function_spec(function),
            serde_json::json!({"name": "fetch_original_data", "description": "d",
                               "input_schema": {"type": "object"}})
        );
    }

    #[test]
    fn urls_join_the_base_and_keep_the_query() {
        let up = upstream(None);
        assert_eq!(
            Api::OpenAi.url(&up, None),
            "http://127.0.0.1:9/v1/chat/completions"
        );
        assert_eq!(
            Api::Anthropic.url(&up, Some("beta=true")),
            "http://127.0.0.1:9/v1/v1/messages?beta=true"
        );
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
            Api::OpenAi,
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
            Api::Anthropic,
            &caller(KeySource::XApiKey),
            &incoming,
            &upstream(Some("sk-ant-configured")),
        )
        .unwrap();
        assert_eq!(out["x-api-key"], "sk-ant-configured");
        assert_eq!(out["anthropic-version"], "2023-06-01");

        let refused = upstream_headers(
            Api::OpenAi,
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
            Api::OpenAi,
            &caller(KeySource::SkaldHeader),
            &incoming,
            &upstream(Some("sk-configured")),
        )
        .unwrap();
        assert_eq!(out["authorization"], "Bearer sk-configured");
        let refused = upstream_headers(
            Api::OpenAi,
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
            Api::Anthropic,
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
            Api::OpenAi,
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
            Api::OpenAi,
            &caller(KeySource::None),
            &headers(&[("authorization", "Bearer sk-skald-abc")]),
            &upstream(None),
        )
        .unwrap();
        assert!(out.get("authorization").is_none());
    }
}
