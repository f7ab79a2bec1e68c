//! The HTTP side both clients share: one reqwest client (rustls) per provider, POSTing JSON with
//! timeouts, cancellation and retries, turning error answers into [`LlmError`]s, and reading
//! server-sent events incrementally into a provider decoder.

use std::error::Error as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::ProviderConfig;
use crate::error::{LlmError, cut_chars};
use crate::retry::{self, JitterSource, RandomJitter, RetryPolicy};

/// Everything a client needs to talk HTTP to one provider.
#[derive(Clone)]
pub(crate) struct Transport {
    client: reqwest::Client,
    headers: HeaderMap,
    /// Per attempt: whole answer (non-streaming); start of the answer and each gap between two
    /// chunks (streaming).
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub jitter: Arc<dyn JitterSource>,
}

impl std::fmt::Debug for Transport {
    /// Header names only: their values carry keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .finish()
    }
}

/// `{base_url}/{segments…}`, keeping a query the base URL carries (Azure's `api-version`).
pub(crate) fn endpoint(base_url: &str, segments: &[&str]) -> Result<String, LlmError> {
    let mut url = reqwest::Url::parse(base_url).map_err(|error| LlmError::Config {
        message: format!("base_url: {base_url:?} is not a valid URL ({error})"),
    })?;
    url.path_segments_mut()
        .map_err(|()| LlmError::Config {
            message: format!("base_url: {base_url:?} cannot have a path"),
        })?
        .pop_if_empty()
        .extend(segments);
    Ok(url.into())
}

impl Transport {
    /// A transport for `config` sending `auth_headers` (the key, already resolved) and the
    /// configured extra headers, which win over the client's own.
    pub fn new(
        config: &ProviderConfig,
        auth_headers: Vec<(HeaderName, HeaderValue)>,
    ) -> Result<Transport, LlmError> {
        config.validate()?;
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(config.connect_timeout_secs))
            .build()
            .map_err(|error| LlmError::Config {
                message: format!("cannot build the HTTP client: {}", error_chain(&error)),
            })?;
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        for (name, mut value) in auth_headers {
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        for (name, value) in &config.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| LlmError::Config {
                message: format!("headers: {name:?} is not a valid HTTP header name"),
            })?;
            let mut value = HeaderValue::from_str(value).map_err(|_| LlmError::Config {
                message: format!("headers.{name}: the value is not a valid HTTP header value"),
            })?;
            // Extra headers may carry keys too (Azure's `api-key`, gateway tokens).
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        Ok(Transport {
            client,
            headers,
            timeout: Duration::from_secs(config.timeout_secs),
            retry: RetryPolicy::default(),
            jitter: Arc::new(RandomJitter::default()),
        })
    }

    /// POSTs `body` and returns the JSON answer, retrying transient failures.
    pub async fn post_json(
        &self,
        url: &str,
        body: &Value,
        cancel: &CancellationToken,
    ) -> Result<Value, LlmError> {
        let bytes = serialize(body)?;
        retry::retry(&self.retry, self.jitter.as_ref(), cancel, |_| {
            self.attempt_json(url, bytes.clone())
        })
        .await
    }

    async fn attempt_json(&self, url: &str, body: Vec<u8>) -> Result<Value, LlmError> {
        let exchange = async {
            let response = self.send(url, body, "application/json").await?;
            let response = check_status(response).await?;
            let bytes = response.bytes().await.map_err(transport_error)?;
            serde_json::from_slice::<Value>(&bytes).map_err(|error| LlmError::InvalidResponse {
                message: format!(
                    "the answer is not JSON ({error}): {}",
                    cut_chars(&String::from_utf8_lossy(&bytes), 300)
                ),
            })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| timeout_error(url, self.timeout, "a complete answer"))?
    }

    async fn send(
        &self,
        url: &str,
        body: Vec<u8>,
        accept: &'static str,
    ) -> Result<reqwest::Response, LlmError> {
        self.client
            .post(url)
            .headers(self.headers.clone())
            .header(reqwest::header::ACCEPT, HeaderValue::from_static(accept))
            .body(body)
            .send()
            .await
            .map_err(transport_error)
    }
}

fn serialize(body: &Value) -> Result<Vec<u8>, LlmError> {
    serde_json::to_vec(body).map_err(|error| LlmError::InvalidRequest {
        message: format!("cannot serialize the request: {error}"),
    })
}

/// The response itself when its status is a success; otherwise the typed error its body and
/// `retry-after` headers describe.
async fn check_status(response: reqwest::Response) -> Result<reqwest::Response, LlmError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let retry_after = retry::retry_after_ms(
        header("retry-after-ms").as_deref(),
        header("retry-after").as_deref(),
        SystemTime::now(),
    );
    // A body that cannot be read still leaves the status to classify by.
    let body = response.text().await.unwrap_or_default();
    Err(LlmError::from_provider(
        Some(status.as_u16()),
        &body,
        retry_after,
    ))
}

/// A reqwest failure as a typed error: timeouts apart, everything is a transport problem.
fn transport_error(error: reqwest::Error) -> LlmError {
    let message = error_chain(&error);
    if error.is_timeout() {
        LlmError::Timeout { message }
    } else if error.is_builder() {
        LlmError::InvalidRequest { message }
    } else {
        LlmError::Transport { message }
    }
}

fn timeout_error(url: &str, timeout: Duration, what: &str) -> LlmError {
    LlmError::Timeout {
        message: format!("no {what} from {url} within {} ms", timeout.as_millis()),
    }
}

/// An error and its causes, `: `-separated (reqwest's own message alone rarely says why).
fn error_chain(error: &reqwest::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}
