//! The HTTP side both clients share: one reqwest client (rustls) per provider, POSTing JSON with
//! timeouts, cancellation and retries, turning error answers into [`LlmError`]s, and reading
//! server-sent events incrementally into a provider decoder.

use std::collections::VecDeque;
use std::error::Error as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use eventsource_stream::{Event, Eventsource};
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::chat::{ChatStream, StreamEvent};
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

    /// POSTs `body` and returns the answer's events once it has started (a 2xx status),
    /// retrying transient failures until then. Each event waits at most `timeout`.
    pub async fn post_events(
        &self,
        url: &str,
        body: &Value,
        cancel: &CancellationToken,
    ) -> Result<BoxStream<'static, Result<Event, LlmError>>, LlmError> {
        let bytes = serialize(body)?;
        let response = retry::retry(&self.retry, self.jitter.as_ref(), cancel, |_| {
            let bytes = bytes.clone();
            async move {
                let started = async {
                    let response = self.send(url, bytes, "text/event-stream").await?;
                    check_status(response).await
                };
                tokio::time::timeout(self.timeout, started)
                    .await
                    .map_err(|_| timeout_error(url, self.timeout, "the start of an answer"))?
            }
        })
        .await?;
        Ok(sse_events(
            response,
            self.timeout,
            cancel.clone(),
            url.to_owned(),
        ))
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

/// The server-sent events of `response`, parsed as bytes arrive. Each event waits at most
/// `idle`; `cancel` ends the stream with [`LlmError::Aborted`].
fn sse_events(
    response: reqwest::Response,
    idle: Duration,
    cancel: CancellationToken,
    url: String,
) -> BoxStream<'static, Result<Event, LlmError>> {
    let events = response.bytes_stream().eventsource().boxed();
    stream::unfold(Some(events), move |events| {
        let cancel = cancel.clone();
        let url = url.clone();
        async move {
            let mut events = events?;
            let next = tokio::select! {
                biased;
                () = cancel.cancelled() => Some(Err(LlmError::Aborted)),
                next = tokio::time::timeout(idle, events.next()) => match next {
                    Err(_) => Some(Err(timeout_error(&url, idle, "further answer"))),
                    Ok(None) => None,
                    Ok(Some(Ok(event))) => Some(Ok(event)),
                    Ok(Some(Err(error))) => Some(Err(LlmError::Transport {
                        message: format!("the answer stream broke: {error}"),
                    })),
                },
            };
            match next {
                Some(Ok(event)) => Some((Ok(event), Some(events))),
                // After an error the stream is over.
                Some(Err(error)) => Some((Err(error), None)),
                None => None,
            }
        }
    })
    .boxed()
}

/// A provider's reading of its event stream.
pub(crate) trait StreamDecoder: Send + 'static {
    /// The events one server-sent event yields (a [`StreamEvent::Done`] ends the answer).
    fn on_event(&mut self, event: &Event) -> Result<Vec<StreamEvent>, LlmError>;

    /// Called when the stream ended without a [`StreamEvent::Done`]: the final event if the
    /// answer is complete anyway, else the error.
    fn on_end(&mut self) -> Result<StreamEvent, LlmError>;
}

struct Decoding<D> {
    events: BoxStream<'static, Result<Event, LlmError>>,
    decoder: D,
    pending: VecDeque<StreamEvent>,
    finished: bool,
}

/// Runs `decoder` over `events`, yielding its events one by one. The stream ends after
/// [`StreamEvent::Done`] (the connection is dropped then, whatever follows) or the first error.
pub(crate) fn decode_events<D: StreamDecoder>(
    events: BoxStream<'static, Result<Event, LlmError>>,
    decoder: D,
) -> ChatStream {
    let state = Decoding {
        events,
        decoder,
        pending: VecDeque::new(),
        finished: false,
    };
    stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.pending.pop_front() {
                return Some((Ok(event), state));
            }
            if state.finished {
                return None;
            }
            let outcome = match state.events.next().await {
                Some(Ok(event)) => state.decoder.on_event(&event),
                Some(Err(error)) => Err(error),
                None => {
                    state.finished = true;
                    state.decoder.on_end().map(|last| vec![last])
                }
            };
            match outcome {
                Ok(events) => {
                    state.finished |= events
                        .iter()
                        .any(|event| matches!(event, StreamEvent::Done(_)));
                    state.pending.extend(events);
                }
                Err(error) => {
                    state.finished = true;
                    return Some((Err(error), state));
                }
            }
        }
    })
    .boxed()
}

/// Parses an event's `data` as JSON.
pub(crate) fn event_json(event: &Event) -> Result<Value, LlmError> {
    serde_json::from_str(&event.data).map_err(|error| LlmError::InvalidResponse {
        message: format!(
            "a stream event is not JSON ({error}): {}",
            cut_chars(&event.data, 300)
        ),
    })
}
