//! One proxied request from the moment its session is locked: the engine's [`TurnLoop`] prepares
//! each upstream call (session context, the two-threshold upload, threshold compaction, the
//! pipeline, memory) and decides what each answer leads to (skald's tool calls run and the call
//! continued, an overflow recovered from and retried, usage fed to calibration); this module
//! does the I/O around it: the call encoded back into the client's API with every field the
//! client sent, forwarded, its answer read, and the answer the client gets, whole or streamed
//! (`streamed`).

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;
use skald_core::codec::openai;
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Block, ContentForm, Conversation, Message, Role};
use skald_engine::error_with_causes;
use skald_engine::memory::MemoryIdentity;
use skald_engine::recovery::{RecallHook, RecoveryAction, RecoveryReport};
use skald_engine::{
    CONTEXT_OVERFLOW_MESSAGE, FailedCall, LlmError, MemoryHooks, PrepareContext, PrepareInput,
    PreparedCall, RecoveryError, RecoverySettings, SkaldTools, TurnLoop, WholeAnswer,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::body::{self, Fault, FaultKind};
use super::spelling::ClientMessages;
use super::upstream::response_headers;
use super::wire::Api;
use crate::error::ApiError;
use crate::metrics::{Metrics, ProxyNote};
use crate::state::AppState;
use skald_engine::Turn;

mod streamed;

pub use streamed::stream;

/// Everything about one request that outlives its parsing.
pub struct Exchange {
    pub api: Api,
    pub state: AppState,
    pub tenant: Tenant,
    pub session_id: SessionId,
    pub url: String,
    /// The headers of every upstream call (auth settled, skald's own removed).
    pub headers: HeaderMap,
    /// The client's request without its messages (they are in the session): model, tools and
    /// every other field, re-encoded around each prepared call.
    pub request: Conversation,
    /// The client's tools as sent, for the request's size and so that a skald tool of the same
    /// name is not offered.
    pub client_tools: Vec<Value>,
    /// The client's messages, for their spelling (see [`ClientMessages`]).
    pub client_messages: ClientMessages,
    /// The client's system prompt (see [`HostPrompt`]).
    pub host_prompt: HostPrompt,
    pub identity: Option<MemoryIdentity>,
    pub now_ms: i64,
    pub settings: RecoverySettings,
    /// Whether the answer is recorded in the session (a Responses client with `store` on).
    pub records_answer: bool,
}

/// A response the client gets instead of the normal flow's answer (an upstream error as it came,
/// or skald's own).
type Early = Response;

/// What of the driver's report the metrics already counted, and what the request's log line
/// says about its upstream calls.
#[derive(Debug, Default)]
struct Noted {
    compactions: usize,
    upload: bool,
    upstream_status: Option<u16>,
    upstream_ms: f64,
    upstream_calls: u32,
    tokens_saved: u64,
}

/// An upstream call that answered 2xx.
struct Sent {
    response: reqwest::Response,
    /// The skald tools the call offered.
    skald: SkaldTools,
}

impl Exchange {
    fn prepare_context(&self) -> PrepareContext<'_> {
        self.state.engine.prepare_context(PrepareInput {
            tenant: &self.tenant,
            session: &self.session_id,
            model: self.request.model.as_deref(),
            system_prompt: self.host_prompt.text.as_deref(),
            tools: &self.client_tools,
            host_prefix_tokens: None,
            fetch_available: true,
            now_ms: self.now_ms,
            agents_md: None,
            settings: &self.settings,
        })
    }

    /// What memory does around the turn's calls, when memory is on (see
    /// [`skald_engine::Engine::memory_hooks`]).
    fn memory_hooks<'a>(&'a self, recall: Option<&'a RecallHook<'a>>) -> MemoryHooks<'a> {
        self.state
            .engine
            .memory_hooks(self.identity.is_some(), recall)
    }

    /// Recall for every call of the turn, with skald's memory tools offered (memory on).
    fn recall_hook(&self) -> Option<RecallHook<'_>> {
        self.identity.as_ref().map(|identity| {
            self.state
                .engine
                .recall_hook(identity, true, !self.thinking_enabled())
        })
    }

    /// The request's turn loop over `prepare` and `memory`.
    fn turn_loop<'c>(
        &'c self,
        prepare: &'c PrepareContext<'c>,
        memory: MemoryHooks<'c>,
    ) -> Result<TurnLoop<'c>, RecoveryError> {
        TurnLoop::new(prepare, memory)
    }

    /// Whether the client asked Anthropic for extended thinking (`thinking` of type `enabled`
    /// or `adaptive`): then every assistant tool call in the request must be the model's own.
    fn thinking_enabled(&self) -> bool {
        self.api.thinking_enabled(&self.request)
    }

    /// The body of one upstream call (see [`Exchange::encode_parts`]).
    fn encode(&self, call: &mut PreparedCall) -> Value {
        let messages = std::mem::take(&mut call.request.messages);
        let addition = call.system_addition.take();
        // The prepared tools are skald's, as OpenAI function specs; the client's go in front as
        // it sent them.
        let skald_tools = std::mem::take(&mut call.request.tools);
        self.encode_parts(messages, addition.as_deref(), skald_tools)
    }

    /// A request body in the client's API: the client's system prompt, then `messages` (in the
    /// client's spelling, and marked as the client's format, so the fields the client put on
    /// them are written back), skald's system prompt `addition` on the leading system message,
    /// the client's tools as sent then `skald_tools` (OpenAI function specs), and every other
    /// field of the client's request.
    pub fn encode_parts(
        &self,
        prepared: Vec<Message>,
        addition: Option<&str>,
        skald_tools: Vec<Value>,
    ) -> Value {
        let origin = self.api.origin();
        let mut messages = self.host_prompt.messages.clone();
        messages.extend(prepared);
        self.client_messages.restore(&mut messages);
        for message in &mut messages {
            if !message.extra.contains_key(openai::ORIGIN_KEY) {
                message.extra.insert(
                    openai::ORIGIN_KEY.to_owned(),
                    Value::String(origin.to_owned()),
                );
            }
        }
        if let Some(addition) = addition {
            add_to_system_prompt(&mut messages, addition, origin);
        }
        // The client's tools go back as it sent them (decoding and encoding them again on every
        // call would give the same JSON, slower); skald's follow.
        let conversation = Conversation {
            messages,
            tools: Vec::new(),
            model: self.request.model.clone(),
            extra: self.request.extra.clone(),
        };
        let mut body = self.api.encode_request(&conversation);
        let mut tools = self.client_tools.clone();
        tools.extend(
            skald_tools
                .into_iter()
                .map(|tool| self.api.tool_from_function_spec(tool)),
        );
        if let (Some(body), false) = (body.as_object_mut(), tools.is_empty()) {
            body.insert("tools".to_owned(), Value::Array(tools));
        }
        body
    }

    /// Prepares and sends calls until one is answered 2xx, recovering from overflows on the way.
    async fn send(
        &self,
        turn_loop: &mut TurnLoop<'_>,
        session: &mut Turn,
        cancel: &CancellationToken,
        noted: &mut Noted,
    ) -> Result<Sent, Early> {
        let metrics = &self.state.metrics;
        loop {
            let prepared = turn_loop.prepare(session, cancel).await;
            self.note_report(turn_loop.report(), noted);
            let mut call = prepared.map_err(recovery_failure)?;
            let saved_chars = call.assemble.offload.chars_saved()
                + call
                    .assemble
                    .prune
                    .chars_before
                    .saturating_sub(call.assemble.prune.chars_after)
                + call
                    .assemble
                    .truncate
                    .chars_before
                    .saturating_sub(call.assemble.truncate.chars_after);
            metrics
                .tokens_saved
                .inc_by((saved_chars / skald_core::tokens::CHARS_PER_TOKEN) as u64);
            metrics.refs_stored.inc_by(call.assemble.refs_stored as u64);
            let body = match serde_json::to_vec(&self.encode(&mut call)) {
                Ok(body) => body,
                Err(error) => {
                    return Err(ApiError::Internal(format!(
                        "cannot serialize the upstream request: {error}"
                    ))
                    .into_response());
                }
            };
            drop(call);
            noted.tokens_saved += (saved_chars / skald_core::tokens::CHARS_PER_TOKEN) as u64;
            let response = self
                .post(body, noted)
                .await
                .map_err(IntoResponse::into_response)?;
            if response.status().is_success() {
                return Ok(Sent {
                    response,
                    skald: turn_loop.skald_tools().clone(),
                });
            }
            let status = response.status();
            let headers = response_headers(response.headers());
            let body = self
                .read_body(response)
                .await
                .map_err(IntoResponse::into_response)?;
            let error = LlmError::from_provider(
                Some(status.as_u16()),
                &String::from_utf8_lossy(&body),
                None,
            );
            let failed = turn_loop.on_failed_call(session, error, cancel).await;
            self.note_report(turn_loop.report(), noted);
            match failed {
                FailedCall::PassOn(_) => return Err(raw_response(status, headers, body)),
                FailedCall::Retry(action) => {
                    Metrics::outcome(&metrics.overflow_recoveries, action_name(action))
                }
                FailedCall::GaveUp(error) => {
                    Metrics::outcome(&metrics.overflow_recoveries, "gave_up");
                    return Err(match error {
                        RecoveryError::ContextOverflow { .. }
                        | RecoveryError::IterationLimit { .. } => {
                            overflow_response(status, headers, &body)
                        }
                        other @ (RecoveryError::Llm { .. }
                        | RecoveryError::Aborted { .. }
                        | RecoveryError::Settings(_)
                        | RecoveryError::Engine(_)) => recovery_failure(other),
                    });
                }
            }
        }
    }

    /// One upstream call: the request sent and its answer's headers awaited, within the
    /// timeouts; the call is noted for the log line.
    async fn post(&self, body: Vec<u8>, noted: &mut Noted) -> Result<reqwest::Response, ApiError> {
        let timeouts = self.state.config.timeouts;
        let started = std::time::Instant::now();
        let sent = self
            .state
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            // Uncompressed, please: a compressor in front of a stream may hold its events back.
            // An upstream that compresses anyway is decoded (see `body`).
            .header(reqwest::header::ACCEPT_ENCODING, "identity")
            .body(body)
            .send();
        let answered = tokio::time::timeout(timeouts.first_byte, sent).await;
        noted.upstream_calls += 1;
        noted.upstream_ms += started.elapsed().as_secs_f64() * 1e3;
        match answered {
            Ok(Ok(response)) => {
                noted.upstream_status = Some(response.status().as_u16());
                Ok(response)
            }
            Ok(Err(error)) if error.is_connect() && error.is_timeout() => Err(self
                .fail(Fault::new(
                    FaultKind::NoAnswer,
                    format!(
                        "cannot connect to the upstream at {} within {:?}: {}",
                        self.url,
                        timeouts.connect,
                        error_with_causes(&error)
                    ),
                ))
                .into_api_error()),
            Ok(Err(error)) => Err(self
                .fail(Fault::new(
                    FaultKind::Unreachable,
                    format!(
                        "cannot reach the upstream at {}: {}",
                        self.url,
                        error_with_causes(&error)
                    ),
                ))
                .into_api_error()),
            Err(_) => Err(self
                .fail(Fault::new(
                    FaultKind::NoAnswer,
                    format!(
                        "the upstream at {} did not answer within {:?} (the proxy's first-byte \
                         timeout)",
                        self.url, timeouts.first_byte
                    ),
                ))
                .into_api_error()),
        }
    }

    /// A whole answer's body, decoded, with at most the idle timeout between two of its
    /// pieces; a fault is recorded as the call's failure.
    async fn read_body(&self, response: reqwest::Response) -> Result<Bytes, ApiError> {
        body::read_whole(response, self.state.config.timeouts.idle)
            .await
            .map_err(|fault| self.fail(fault).into_api_error())
    }

    /// Records `fault` as this request's failed upstream call.
    fn fail(&self, fault: Fault) -> Fault {
        fault.record(&self.state.metrics, self.session_id.as_str());
        fault
    }

    /// Ends a stream the client is reading on `fault`: recorded as a failed call, and the API's
    /// own error event sent, so the client does not take what it got for a whole answer.
    async fn fail_stream(&self, sender: &mpsc::Sender<Bytes>, fault: Fault) {
        let fault = self.fail(fault);
        for bytes in self.api.error_event(&fault.message) {
            if sender.send(bytes).await.is_err() {
                return;
            }
        }
    }

    /// Records the answer the client got in the session when the client keeps no history of its
    /// own (see [`Exchange::records_answer`]); a failure is logged, never the request's.
    fn record_answer(&self, session: &mut Turn, response: &Value) {
        if !self.records_answer {
            return;
        }
        let Some(id) = response.get("id").and_then(Value::as_str) else {
            return;
        };
        let Some(message) = self.api.decode_answer(response) else {
            return;
        };
        if let Err(error) = session.record_answer(message, id) {
            tracing::warn!(session = self.session_id.as_str(), %error, "recording the answer failed");
        }
    }

    /// `response` with the request's notes for its log line.
    fn noted(&self, mut response: Response, noted: &Noted) -> Response {
        response.extensions_mut().insert(ProxyNote {
            session: self.session_id.to_string(),
            upstream_status: noted.upstream_status,
            upstream_ms: noted.upstream_ms,
            upstream_calls: noted.upstream_calls,
            tokens_saved: noted.tokens_saved,
        });
        response
    }

    /// Counts in the metrics what the driver did since the last look: the upload step of the
    /// turn's first call, and the compactions.
    fn note_report(&self, report: &RecoveryReport, noted: &mut Noted) {
        if let (Some(step), false) = (&report.upload, noted.upload) {
            noted.upload = true;
            self.state.metrics.upload_step(step);
        }
        let compactions = &report.compactions;
        for record in compactions.iter().skip(noted.compactions) {
            let outcome = match &record.outcome {
                skald_core::compaction::CompactionOutcome::Compacted { .. } => "compacted",
                skald_core::compaction::CompactionOutcome::Skipped { .. } => "skipped",
                skald_core::compaction::CompactionOutcome::Cancelled { .. } => "failed",
            };
            Metrics::outcome(&self.state.metrics.compactions, outcome);
        }
        noted.compactions = compactions.len();
    }

    /// Counts skald's tool calls the turn loop ran.
    fn note_skald_calls(&self, ran: usize) {
        self.state.metrics.tool_interceptions.inc_by(ran as u64);
    }
}

/// The client's system prompt: its leading system messages, as sent. The session holds the
/// conversation only (the engine's sync leaves the host's prompt out, as it is sent again with
/// every request), so every upstream call puts them back in front. Their text is the turn's
/// system prompt for the engine: counted in each request's size and given to the memory archive.
#[derive(Debug, Clone, Default)]
pub struct HostPrompt {
    messages: Vec<Message>,
    text: Option<String>,
}

impl HostPrompt {
    /// The system messages `messages` opens with.
    pub fn of(messages: &[Message]) -> HostPrompt {
        // The engine's own notion of the host's prompt, which its sync leaves out.
        HostPrompt {
            messages: messages
                .get(..skald_engine::prompt_len(messages))
                .unwrap_or_default()
                .to_vec(),
            text: skald_engine::prompt_text(messages),
        }
    }
}

/// Adds skald's addition to the system prompt: to the leading system message when there is
/// one (as more text, in the form it has), else as a new one in front.
fn add_to_system_prompt(messages: &mut Vec<Message>, addition: &str, origin: &str) {
    match messages
        .first_mut()
        .filter(|message| message.role == Role::System)
    {
        Some(system) => match (system.content_form, system.content.as_mut_slice()) {
            (ContentForm::Text, [Block::Text(text)]) => {
                text.text.push_str("\n\n");
                text.text.push_str(addition);
            }
            _ => {
                system.content_form = ContentForm::Blocks;
                system.content.push(Block::text(addition));
            }
        },
        None => {
            let mut system = Message::text(Role::System, addition);
            system.extra.insert(
                openai::ORIGIN_KEY.to_owned(),
                Value::String(origin.to_owned()),
            );
            messages.insert(0, system);
        }
    }
}

/// A non-streamed answer, after skald's tools.
pub async fn complete(exchange: Exchange, mut session: Turn) -> Response {
    let prepare = exchange.prepare_context();
    let recall = exchange.recall_hook();
    let mut noted = Noted::default();
    let mut turn_loop = match exchange.turn_loop(&prepare, exchange.memory_hooks(recall.as_ref())) {
        Ok(turn_loop) => turn_loop,
        Err(error) => return exchange.noted(recovery_failure(error), &noted),
    };
    let cancel = CancellationToken::new();
    let response = tokio::select! {
        response = answer_whole(
            &exchange,
            &mut turn_loop,
            &mut session,
            &cancel,
            &mut noted,
            None,
        ) => response,
        () = exchange.state.shutdown.cancelled() => {
            exchange.fail(Fault::shutting_down()).into_api_error().into_response()
        }
    };
    exchange.noted(response, &noted)
}

/// The whole-answer loop: sends (or takes `first`, already sent), reads the JSON answer, and
/// does what the turn loop decides about it until the answer is the client's.
async fn answer_whole(
    exchange: &Exchange,
    turn_loop: &mut TurnLoop<'_>,
    session: &mut Turn,
    cancel: &CancellationToken,
    noted: &mut Noted,
    mut first: Option<Sent>,
) -> Response {
    loop {
        let sent = match first.take() {
            Some(sent) => sent,
            None => match exchange.send(turn_loop, session, cancel, noted).await {
                Ok(sent) => sent,
                Err(early) => return early,
            },
        };
        let status = sent.response.status();
        let headers = response_headers(sent.response.headers());
        let body = match exchange.read_body(sent.response).await {
            Ok(body) => body,
            Err(error) => return error.into_response(),
        };
        let mut value = match serde_json::from_slice::<Value>(&body) {
            Ok(value) => value,
            // A success that is not JSON is no answer (cut short, or a proxy's HTML page): the
            // client gets a 502 rather than a 200 it cannot read.
            Err(error) if status.is_success() => {
                let fault = Fault::new(
                    FaultKind::NotJson,
                    format!(
                        "the upstream answered {status} with a body that is not JSON \
                         ({} bytes{}): {error}",
                        body.len(),
                        headers
                            .get(axum::http::header::CONTENT_TYPE)
                            .and_then(|value| value.to_str().ok())
                            .map(|kind| format!(", content-type {kind}"))
                            .unwrap_or_default()
                    ),
                );
                return exchange.fail(fault).into_api_error().into_response();
            }
            Err(_) => return raw_response(status, headers, body),
        };
        let Some(message) = exchange.api.decode_answer(&value) else {
            return raw_response(status, headers, body);
        };
        let step = turn_loop.on_whole_answer(session, &message, cancel).await;
        exchange.note_report(turn_loop.report(), noted);
        match step {
            Err(error) => {
                return ApiError::Internal(format!("recording skald's tool calls failed: {error}"))
                    .into_response();
            }
            Ok(WholeAnswer::Retry(action)) => {
                Metrics::outcome(
                    &exchange.state.metrics.overflow_recoveries,
                    action_name(action),
                );
            }
            Ok(WholeAnswer::GaveUp(_)) => {
                Metrics::outcome(&exchange.state.metrics.overflow_recoveries, "gave_up");
                return raw_response(status, headers, body);
            }
            Ok(WholeAnswer::Continue { skald_calls_ran }) => {
                // Only skald's tools: the client never sees this answer, the model gets the
                // results.
                exchange.note_skald_calls(skald_calls_ran);
            }
            Ok(WholeAnswer::Final { skald_calls_ran: 0 }) => {
                exchange.record_answer(session, &value);
                return raw_response(status, headers, body);
            }
            Ok(WholeAnswer::Final { skald_calls_ran }) => {
                // The client's tools too (or no rounds left): the client gets the answer
                // without skald's calls.
                exchange.note_skald_calls(skald_calls_ran);
                exchange.api.strip_skald_calls(&mut value, &sent.skald);
                exchange.record_answer(session, &value);
                return json_response(status, headers, &value);
            }
        }
    }
}

/// Sends `body` to the exchange's URL once and gives the client the upstream's answer as it
/// came (a side call such as a token count: nothing of skald's to run in the answer).
pub async fn forward_raw(exchange: &Exchange, body: Vec<u8>) -> Response {
    let mut noted = Noted::default();
    let answered = match exchange.post(body, &mut noted).await {
        Ok(response) => {
            let status = response.status();
            let headers = response_headers(response.headers());
            exchange
                .read_body(response)
                .await
                .map(|body| raw_response(status, headers, body))
        }
        Err(error) => Err(error),
    };
    let response = answered.unwrap_or_else(IntoResponse::into_response);
    exchange.noted(response, &noted)
}

fn is_event_stream(headers: &reqwest::header::HeaderMap) -> bool {
    headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

fn raw_response(status: StatusCode, headers: HeaderMap, body: Bytes) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

fn json_response(status: StatusCode, headers: HeaderMap, value: &Value) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    raw_response(status, headers, Bytes::from(body))
}

/// The upstream's overflow error when recovery gave up, its message led by the seed's.
fn overflow_response(status: StatusCode, headers: HeaderMap, body: &[u8]) -> Response {
    let Ok(mut value) = serde_json::from_slice::<Value>(body) else {
        return raw_response(status, headers, Bytes::copy_from_slice(body));
    };
    if let Some(Value::String(message)) = value
        .get_mut("error")
        .and_then(|error| error.get_mut("message"))
    {
        *message = format!("{CONTEXT_OVERFLOW_MESSAGE} (upstream: {message})");
    }
    json_response(status, headers, &value)
}

/// skald's own failure while preparing a call.
fn recovery_failure(error: RecoveryError) -> Response {
    match error {
        RecoveryError::Aborted { .. } => {
            ApiError::Internal("the request was cancelled".to_owned()).into_response()
        }
        other @ (RecoveryError::ContextOverflow { .. }
        | RecoveryError::Llm { .. }
        | RecoveryError::IterationLimit { .. }
        | RecoveryError::Settings(_)
        | RecoveryError::Engine(_)) => {
            ApiError::Internal(format!("preparing the upstream request failed: {other}"))
                .into_response()
        }
    }
}

fn action_name(action: RecoveryAction) -> &'static str {
    match action {
        RecoveryAction::DirectRetry => "direct_retry",
        RecoveryAction::Compacted => "compacted",
        RecoveryAction::Truncated => "truncated",
        RecoveryAction::GaveUp => "gave_up",
        RecoveryAction::IterationLimit => "iteration_limit",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_prompt_is_the_leading_system_messages() {
        let conversation = [
            Message::text(Role::System, "You are terse."),
            Message::text(Role::System, "Use tools."),
            Message::text(Role::User, "hi"),
            Message::text(Role::System, "a late reminder"),
        ];
        let host = HostPrompt::of(&conversation);
        assert_eq!(host.messages.len(), 2);
        assert_eq!(host.text.as_deref(), Some("You are terse.\n\nUse tools."));

        let none = HostPrompt::of(&conversation[2..]);
        assert_eq!(none.text, None);
        assert!(none.messages.is_empty());
    }
}
