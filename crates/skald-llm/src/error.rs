//! `LlmError`: what went wrong with a provider call, typed by what the caller should do next
//! (compact, wait, fix the key, fix the request, retry, give up), and the mapping from an HTTP
//! status and error body to it.

use crate::overflow::{self, ErrorClass};

/// Longest provider error text kept in an error message; bodies can be whole HTML pages.
const MAX_ERROR_MESSAGE_CHARS: usize = 2_000;

/// Why a provider call failed.
///
/// Variants are split by the action they call for: [`LlmError::ContextOverflow`] means "shrink
/// the context and try again", [`LlmError::RateLimited`] "wait", [`LlmError::Auth`] and
/// [`LlmError::QuotaExceeded`] "a human must fix the account", [`LlmError::BadRequest`] and
/// [`LlmError::InvalidRequest`] "the request is wrong", and [`LlmError::Server`],
/// [`LlmError::Timeout`] and [`LlmError::Transport`] "try again later" (the client already retried
/// them, see [`crate::retry`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// The prompt does not fit the model's context window. The token counts are those the
    /// provider's message states, when it states them.
    #[error("context overflow: {message}")]
    ContextOverflow {
        /// The prompt size the provider says it was sent.
        requested_tokens: Option<u64>,
        /// The context window the provider says the model has.
        limit_tokens: Option<u64>,
        /// The provider's error text, cut to a readable length.
        message: String,
    },
    /// Too many requests or tokens per unit of time (HTTP 429 and its spellings). Retried by the
    /// client; returned once the retries are spent or the wait asked for is too long.
    #[error("rate limited{}: {message}", retry_after_note(*retry_after_ms))]
    RateLimited {
        /// How long the provider asked to wait (`Retry-After` and its relatives), in milliseconds.
        retry_after_ms: Option<u64>,
        /// The provider's error text, cut to a readable length.
        message: String,
    },
    /// The account has no credit or quota left (HTTP 402, `insufficient_quota`). Never retried:
    /// waiting does not help.
    #[error("quota or billing limit reached: {message}")]
    QuotaExceeded {
        /// The provider's error text, cut to a readable length.
        message: String,
    },
    /// The key is missing, wrong or not allowed to use the model (HTTP 401, 403).
    #[error("authentication failed (HTTP {status}): {message}")]
    Auth {
        /// The HTTP status (401 or 403).
        status: u16,
        /// The provider's error text, cut to a readable length.
        message: String,
    },
    /// The provider rejected the request as malformed (HTTP 400, 404, 422…), for a reason other
    /// than its size.
    #[error("bad request (HTTP {status}): {message}")]
    BadRequest {
        /// The HTTP status the provider answered with.
        status: u16,
        /// The provider's error text, cut to a readable length.
        message: String,
    },
    /// The provider failed (HTTP 5xx, 529 overloaded, or an error event in a stream, which
    /// has no status and is reported as 500).
    #[error("server error (HTTP {status}){}: {message}", retry_after_note(*retry_after_ms))]
    Server {
        /// The HTTP status (500 for an error event inside a stream).
        status: u16,
        /// How long the provider asked to wait, in milliseconds, when it said.
        retry_after_ms: Option<u64>,
        /// The provider's error text, cut to a readable length.
        message: String,
    },
    /// No answer within the configured time.
    #[error("timed out: {message}")]
    Timeout {
        /// What did not arrive in time and the limit it missed, or the provider's text for an
        /// HTTP 408.
        message: String,
    },
    /// The caller's cancellation token fired.
    #[error("aborted by the caller")]
    Aborted,
    /// The connection failed (DNS, refused, reset, TLS) or broke mid-answer.
    #[error("transport error: {message}")]
    Transport {
        /// The underlying error and its causes.
        message: String,
    },
    /// The provider answered something that is not a valid response of its API.
    #[error("invalid response from the provider: {message}")]
    InvalidResponse {
        /// What was wrong with the answer.
        message: String,
    },
    /// skald was asked to send something it cannot express (a tool spec without a name…);
    /// nothing was sent.
    #[error("invalid request: {message}")]
    InvalidRequest {
        /// What could not be expressed.
        message: String,
    },
    /// The provider configuration is unusable (bad URL, unknown kind, missing key variable…).
    #[error("invalid LLM configuration: {message}")]
    Config {
        /// Which setting is wrong and why.
        message: String,
    },
}

fn retry_after_note(retry_after_ms: Option<u64>) -> String {
    retry_after_ms.map_or_else(String::new, |ms| format!(" (retry after {ms} ms)"))
}

impl LlmError {
    /// True when the same request may succeed if sent again: server errors, rate limits,
    /// timeouts and transport failures. Never an abort, an overflow, a bad request or an auth or
    /// billing problem.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::RateLimited { .. }
            | LlmError::Server { .. }
            | LlmError::Timeout { .. }
            | LlmError::Transport { .. } => true,
            LlmError::ContextOverflow { .. }
            | LlmError::QuotaExceeded { .. }
            | LlmError::Auth { .. }
            | LlmError::BadRequest { .. }
            | LlmError::Aborted
            | LlmError::InvalidResponse { .. }
            | LlmError::InvalidRequest { .. }
            | LlmError::Config { .. } => false,
        }
    }

    /// True for [`LlmError::ContextOverflow`].
    pub fn is_context_overflow(&self) -> bool {
        matches!(self, LlmError::ContextOverflow { .. })
    }

    /// How long the provider asked us to wait before the next attempt, if it said.
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            LlmError::RateLimited { retry_after_ms, .. }
            | LlmError::Server { retry_after_ms, .. } => *retry_after_ms,
            LlmError::ContextOverflow { .. }
            | LlmError::QuotaExceeded { .. }
            | LlmError::Auth { .. }
            | LlmError::BadRequest { .. }
            | LlmError::Timeout { .. }
            | LlmError::Aborted
            | LlmError::Transport { .. }
            | LlmError::InvalidResponse { .. }
            | LlmError::InvalidRequest { .. }
            | LlmError::Config { .. } => None,
        }
    }

    /// The error for a failed provider answer: HTTP `status` (`None` for an error that arrived
    /// inside a stream or an assistant message) and the error `body` as received. The body is
    /// classified with [`overflow::classify_error`]; the message is the provider's own error
    /// text (`error.message` of a JSON body) when there is one.
    pub fn from_provider(status: Option<u16>, body: &str, retry_after_ms: Option<u64>) -> LlmError {
        let message = provider_message(body);
        let class = overflow::classify_error(status, body);
        LlmError::from_class(class, status, message, body, retry_after_ms)
    }

    /// The error for `class`; `raw` is searched for token counts when it is an overflow.
    pub(crate) fn from_class(
        class: ErrorClass,
        status: Option<u16>,
        message: String,
        raw: &str,
        retry_after_ms: Option<u64>,
    ) -> LlmError {
        // Errors reported without a status (stream error events) are named by their class.
        let status_or = |default: u16| status.unwrap_or(default);
        match class {
            ErrorClass::ContextOverflow => {
                let (requested_tokens, limit_tokens) = overflow::parse_overflow_counts(raw);
                LlmError::ContextOverflow {
                    requested_tokens,
                    limit_tokens,
                    message,
                }
            }
            ErrorClass::RateLimited => LlmError::RateLimited {
                retry_after_ms,
                message,
            },
            ErrorClass::Billing => LlmError::QuotaExceeded { message },
            ErrorClass::Auth => LlmError::Auth {
                status: status_or(401),
                message,
            },
            ErrorClass::BadRequest => LlmError::BadRequest {
                status: status_or(400),
                message,
            },
            ErrorClass::Server => LlmError::Server {
                status: status_or(500),
                retry_after_ms,
                message,
            },
            ErrorClass::Timeout => LlmError::Timeout { message },
            ErrorClass::Unknown => match status {
                Some(status) if (400..500).contains(&status) => {
                    LlmError::BadRequest { status, message }
                }
                Some(status) => LlmError::Server {
                    status,
                    retry_after_ms,
                    message,
                },
                None => LlmError::InvalidResponse { message },
            },
        }
    }
}

/// The human-readable part of a provider's error body: `error.message` (OpenAI, Anthropic),
/// `error` as a string, `message` or `detail` of a JSON body, or the body itself, cut to a
/// readable length.
pub fn provider_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let from_json = parsed.as_ref().and_then(|value| {
        let error = value.get("error");
        error
            .and_then(|error| error.get("message"))
            .and_then(serde_json::Value::as_str)
            .or_else(|| error.and_then(serde_json::Value::as_str))
            .or_else(|| value.get("message").and_then(serde_json::Value::as_str))
            .or_else(|| value.get("detail").and_then(serde_json::Value::as_str))
            .map(str::to_owned)
    });
    let text = from_json.unwrap_or_else(|| body.trim().to_owned());
    if text.is_empty() {
        return "(empty error body)".to_owned();
    }
    cut_chars(&text, MAX_ERROR_MESSAGE_CHARS)
}

/// `text` cut to at most `max` characters (on a character boundary), with an ellipsis if cut.
pub(crate) fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", text.get(..end).unwrap_or(text)),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_message_reads_openai_and_anthropic_error_objects() {
        let openai = r#"{"error":{"message":"Invalid API key","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        assert_eq!(provider_message(openai), "Invalid API key");
        let anthropic =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(provider_message(anthropic), "Overloaded");
        assert_eq!(provider_message(r#"{"error":"bad things"}"#), "bad things");
        assert_eq!(provider_message(r#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(provider_message("  plain text\n"), "plain text");
        assert_eq!(provider_message(""), "(empty error body)");
    }

    #[test]
    fn long_bodies_are_cut_on_a_character_boundary() {
        let body = "é".repeat(MAX_ERROR_MESSAGE_CHARS + 10);
        let message = provider_message(&body);
        assert_eq!(message.chars().count(), MAX_ERROR_MESSAGE_CHARS + 1);
        assert!(message.ends_with('…'));
    }

    #[test]
    fn only_transient_failures_are_retryable() {
        let retryable = [
            LlmError::RateLimited {
                retry_after_ms: None,
                message: String::new(),
            },
            LlmError::Server {
                status: 503,
                retry_after_ms: None,
                message: String::new(),
            },
            LlmError::Timeout {
                message: String::new(),
            },
            LlmError::Transport {
                message: String::new(),
            },
        ];
        assert!(retryable.iter().all(LlmError::is_retryable));
        let final_errors = [
            LlmError::Aborted,
            LlmError::ContextOverflow {
                requested_tokens: None,
                limit_tokens: None,
                message: String::new(),
            },
            LlmError::Auth {
                status: 401,
                message: String::new(),
            },
            LlmError::BadRequest {
                status: 400,
                message: String::new(),
            },
            LlmError::QuotaExceeded {
                message: String::new(),
            },
        ];
        assert!(!final_errors.iter().any(LlmError::is_retryable));
    }

    #[test]
    fn from_provider_maps_statuses_to_variants() {
        assert!(matches!(
            LlmError::from_provider(Some(401), "{}", None),
            LlmError::Auth { status: 401, .. }
        ));
        assert!(matches!(
            LlmError::from_provider(Some(503), "unavailable", Some(2000)),
            LlmError::Server {
                status: 503,
                retry_after_ms: Some(2000),
                ..
            }
        ));
        assert!(matches!(
            LlmError::from_provider(Some(429), "slow down", Some(1000)),
            LlmError::RateLimited {
                retry_after_ms: Some(1000),
                ..
            }
        ));
        let overflow = LlmError::from_provider(
            Some(400),
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208000 tokens > 200000 maximum"}}"#,
            None,
        );
        assert_eq!(
            overflow,
            LlmError::ContextOverflow {
                requested_tokens: Some(208_000),
                limit_tokens: Some(200_000),
                message: "prompt is too long: 208000 tokens > 200000 maximum".to_owned(),
            }
        );
    }

    #[test]
    fn an_unclassified_stream_error_is_an_invalid_response() {
        assert!(matches!(
            LlmError::from_provider(None, "something odd", None),
            LlmError::InvalidResponse { .. }
        ));
    }
}
