//! Talking to a `skald serve` instead of the data directory (`--url` / `SKALD_URL`, with
//! `--key` / `SKALD_API_KEY`): a small JSON client over the server's routes, and the refusal of
//! flags a server cannot honour.
//!
//! The session, memory and ref commands call [`Remote::get`] / [`Remote::post`] and print what
//! the server answers with the same structs and the same table code as on the local store, so
//! `--json` output is identical either way. A server error (`{"error": {"type", "message"}}`)
//! becomes that message; a server that cannot be reached is named by its URL.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use skald_server::auth::SKALD_KEY_HEADER;

/// How long to wait for the TCP (and TLS) connection; a request itself may take as long as the
/// server needs (a compaction with an LLM summarizer takes minutes).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most characters of a non-JSON error body quoted in an error.
const MAX_QUOTED_BODY_CHARS: usize = 300;

/// A skald server and the key to call it with.
pub struct Remote {
    base: Url,
    key: Option<String>,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is a secret: never printed.
        f.debug_struct("Remote")
            .field("base", &self.base.as_str())
            .field("key", &self.key.as_ref().map(|_| "…"))
            .finish()
    }
}

impl Remote {
    /// A client for the server at `url` (`http://127.0.0.1:7420`; a trailing `/` or `/v1` is
    /// dropped), sending `key` in `x-skald-key` when given.
    pub fn new(url: &str, key: Option<&str>) -> Result<Remote> {
        let trimmed = url.trim().trim_end_matches('/');
        let trimmed = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
        let base = Url::parse(trimmed).with_context(|| {
            format!(
                "--url {url:?} is not a URL; give the server's address, e.g. http://127.0.0.1:7420"
            )
        })?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            bail!(
                "--url {url:?} is not an http(s) URL; give the server's address, e.g. \
                 http://127.0.0.1:7420"
            );
        }
        let key = match key.map(str::trim) {
            Some("") => bail!("--key is empty; give the API key `skald keys create` printed"),
            Some(key) if !key.is_ascii() || key.chars().any(char::is_control) => {
                bail!("--key is not a skald API key (it holds characters a header cannot carry)")
            }
            other => other.map(str::to_owned),
        };
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("skald-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("cannot build the HTTP client")?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        Ok(Remote {
            base,
            key,
            client,
            runtime,
        })
    }

    /// The server's address, as given.
    pub fn base(&self) -> &str {
        self.base.as_str()
    }

    /// The URL of a route: `segments` are percent-encoded one by one (`["v1", "sessions", id]`).
    fn url(&self, segments: &[&str]) -> Result<Url> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| anyhow!("{} cannot take a path", self.base))?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    /// `GET` a route with query parameters (`None` values are left out).
    pub fn get<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, Option<String>)],
    ) -> Result<T> {
        let mut url = self.url(segments)?;
        {
            let mut pairs = url.query_pairs_mut();
            for (name, value) in query {
                if let Some(value) = value {
                    pairs.append_pair(name, value);
                }
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        self.send(Method::GET, url, None::<&()>)
    }

    /// `POST` a JSON body to a route.
    pub fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        segments: &[&str],
        body: &B,
    ) -> Result<T> {
        let url = self.url(segments)?;
        self.send(Method::POST, url, Some(body))
    }

    fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<&B>,
    ) -> Result<T> {
        let mut request = self.client.request(method, url.clone());
        if let Some(key) = &self.key {
            request = request.header(SKALD_KEY_HEADER, key);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let (status, bytes) = self
            .runtime
            .block_on(async {
                let response = request.send().await?;
                let status = response.status();
                let bytes = response.bytes().await?;
                Ok::<_, reqwest::Error>((status, bytes))
            })
            .map_err(|error| self.unreachable(&error))?;
        if !status.is_success() {
            return Err(server_error(status, &bytes, &url));
        }
        serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "the server at {} answered {} with something this skald does not understand \
                 (is it the same skald version?): {}",
                self.base,
                url.path(),
                quote(&bytes)
            )
        })
    }

    /// The error of a request that got no answer.
    fn unreachable(&self, error: &reqwest::Error) -> anyhow::Error {
        // The innermost cause says what happened (connection refused, DNS, TLS…).
        let mut cause: &dyn std::error::Error = error;
        while let Some(source) = cause.source() {
            cause = source;
        }
        anyhow!(
            "cannot reach the skald server at {} ({cause}); is `skald serve` running there? \
             (--url or SKALD_URL)",
            self.base
        )
    }
}

/// The error a server's non-2xx answer stands for: its JSON error's message, else the status
/// and the start of the body.
fn server_error(status: StatusCode, bytes: &[u8], url: &Url) -> anyhow::Error {
    let message = serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|body| {
            body.get("error")
                .and_then(|error| error.get("message"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        });
    match message {
        Some(message) if status == StatusCode::UNAUTHORIZED => {
            anyhow!("{message} (give the key with --key or SKALD_API_KEY)")
        }
        Some(message) => anyhow!("{message}"),
        None => anyhow!(
            "the server answered {status} to {}: {}",
            url.path(),
            quote(bytes)
        ),
    }
}

fn quote(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut quoted: String = text.chars().take(MAX_QUOTED_BODY_CHARS).collect();
    if text.chars().count() > MAX_QUOTED_BODY_CHARS {
        quoted.push('…');
    }
    quoted
}

/// Refuses a flag that has no meaning against a server, saying why.
pub fn refuse(flag: &str, given: bool, why: &str) -> Result<()> {
    if given {
        bail!("{flag} cannot be used with --url: {why}");
    }
    Ok(())
}

/// The reason `--tenant` is refused with `--url`.
pub const TENANT_FROM_KEY: &str =
    "the server takes the tenant from the API key (--key or SKALD_API_KEY)";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn urls_are_normalised_and_segments_encoded() {
        for url in [
            "http://127.0.0.1:7420",
            "http://127.0.0.1:7420/",
            "http://127.0.0.1:7420/v1",
            " http://127.0.0.1:7420/v1/ ",
        ] {
            let remote = Remote::new(url, None).unwrap();
            assert_eq!(
                remote.url(&["v1", "sessions", "a b/c"]).unwrap().as_str(),
                "http://127.0.0.1:7420/v1/sessions/a%20b%2Fc",
                "{url}"
            );
        }
        let prefixed = Remote::new("https://example.test/skald/", None).unwrap();
        assert_eq!(
            prefixed.url(&["v1", "memory", "ls"]).unwrap().as_str(),
            "https://example.test/skald/v1/memory/ls"
        );
    }

    #[test]
    fn bad_urls_and_keys_are_refused() {
        for (url, key, expected) in [
            ("127.0.0.1:7420", None, "http"),
            ("not a url", None, "not a URL"),
            ("ftp://host", None, "http(s)"),
            ("http://host", Some(" "), "--key is empty"),
            ("http://host", Some("sk-skald-é"), "not a skald API key"),
        ] {
            let error = Remote::new(url, key).unwrap_err().to_string();
            assert!(error.contains(expected), "{url} {key:?}: {error}");
        }
    }

    #[test]
    fn error_bodies_become_their_message() {
        let url = Url::parse("http://h/v1/memory/read").unwrap();
        let body = br#"{"error":{"type":"not_found","message":"no memory at viking://x"}}"#;
        assert_eq!(
            server_error(StatusCode::NOT_FOUND, body, &url).to_string(),
            "no memory at viking://x"
        );
        let denied = br#"{"error":{"type":"unauthorized","message":"a key is required"}}"#;
        assert!(
            server_error(StatusCode::UNAUTHORIZED, denied, &url)
                .to_string()
                .contains("--key or SKALD_API_KEY")
        );
        let html = server_error(StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>", &url);
        assert_eq!(
            html.to_string(),
            "the server answered 502 Bad Gateway to /v1/memory/read: <html>bad gateway</html>"
        );
    }
}
