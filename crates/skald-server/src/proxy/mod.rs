//! The LLM proxy: `POST /v1/chat/completions` (OpenAI) and `POST /v1/messages` (Anthropic).
//! A client points its SDK's base URL at skald and changes nothing else.
//!
//! Per request: the caller is authenticated (`Caller`), the body decoded with the API's codec
//! (a malformed one is refused before anything is stored), the session found (`x-skald-session`,
//! else derived from the conversation's opening) and locked for the whole request, the client's
//! conversation synced into it, and then every upstream call is prepared by the engine exactly
//! as for a turn of its own — session context with the compaction checkpoint first, the
//! two-threshold memory upload, threshold compaction, the pipeline (offload, pruning,
//! truncation, refs stored first), recall — and encoded back into the client's API with every
//! field the client sent (`exchange`).
//! skald's tools (`fetch_original_data`, the memory tools) are run by the proxy and the upstream
//! call continued, so the client never sees a tool it did not define, streaming included
//! (`stream`); an upstream context overflow is recovered from and retried. What the client
//! sees is the upstream's answer, byte for byte wherever skald had nothing to change.

mod body;
mod count;
mod exchange;
mod identity;
mod spelling;
mod sse;
mod stream;
mod upstream;
mod wire;

use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;
use skald_engine::{BringInError, RecoverySettings};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

pub use skald_engine::MAX_TOOL_ROUNDS;
pub use upstream::SESSION_HEADER;
pub use wire::{Api, CHAT, MESSAGES, RESPONSES, WireApi};

/// The proxy's routes with their OpenAPI operations: chat completions, messages, responses (and
/// the WebSocket `GET /v1/responses` it refuses), Anthropic's token count and the models list.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(chat_completions))
        .routes(routes!(messages))
        .routes(routes!(responses, responses_websocket))
        .routes(routes!(count_tokens))
        .routes(routes!(models))
}

/// What a proxied request asks of the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// A model call: synced into its session, prepared, answered (skald's tools run).
    Generate,
    /// A token count of the request as skald would send it, detached from any session.
    CountTokens,
}

/// OpenAI Chat Completions through skald: the request runs through the engine (offload,
/// pruning, compaction, recall) and goes to `[proxy.openai]`; the answer comes back as the
/// upstream gave it (streamed when `stream` is true), without skald's own tool calls.
#[utoipa::path(post, path = "/v1/chat/completions", tag = "proxy",
    params(("x-skald-session" = Option<String>, Header,
        description = "The session; derived from the conversation's first messages when absent")),
    request_body(content = Object, description = "A Chat Completions request", content_type = "application/json"),
    responses(
        (status = 200, description = "The upstream's answer (JSON, or an SSE stream)", body = Object),
        (status = 400, description = "Malformed JSON or not a Chat Completions request"),
        (status = 401, description = "A key is required"),
        (status = 403, description = "A Host or cross-site Origin the server does not answer (see [server] allowed_hosts, allowed_origins)"),
        (status = 408, description = "The request body did not arrive within body_read_timeout_secs"),
        (status = 415, description = "The body is not JSON (content-type)"),
        (status = 413, description = "The body is over the size limit"),
        (status = 409, description = "The session is busy with another request past the bounded wait"),
        (status = 422, description = "No upstream configured, or no provider key for a skald bearer key"),
        (status = 502, description = "The upstream cannot be reached, or its answer is not one"),
        (status = 503, description = "The server is stopping: the call was still running at the end of the shutdown grace"),
        (status = 504, description = "The upstream did not answer in time")))]
async fn chat_completions(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    proxy(state, caller, CHAT, Route::Generate, uri, headers, body).await
}

/// Anthropic Messages through skald: as `/v1/chat/completions`, to `[proxy.anthropic]`.
#[utoipa::path(post, path = "/v1/messages", tag = "proxy",
    params(("x-skald-session" = Option<String>, Header,
        description = "The session; derived from the conversation's first messages when absent")),
    request_body(content = Object, description = "A Messages request", content_type = "application/json"),
    responses(
        (status = 200, description = "The upstream's answer (JSON, or an SSE stream)", body = Object),
        (status = 400, description = "Malformed JSON or not a Messages request"),
        (status = 401, description = "A key is required"),
        (status = 403, description = "A Host or cross-site Origin the server does not answer (see [server] allowed_hosts, allowed_origins)"),
        (status = 408, description = "The request body did not arrive within body_read_timeout_secs"),
        (status = 415, description = "The body is not JSON (content-type)"),
        (status = 413, description = "The body is over the size limit"),
        (status = 409, description = "The session is busy with another request past the bounded wait"),
        (status = 422, description = "No upstream configured, or no provider key for a skald key in x-api-key"),
        (status = 502, description = "The upstream cannot be reached, or its answer is not one"),
        (status = 503, description = "The server is stopping: the call was still running at the end of the shutdown grace"),
        (status = 504, description = "The upstream did not answer in time")))]
async fn messages(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    proxy(state, caller, MESSAGES, Route::Generate, uri, headers, body).await
}

/// OpenAI Responses through skald (stateless, `store: false` with the full `input` every call,
/// as Codex sends it; a `previous_response_id` is resolved from skald's own session): as
/// `/v1/chat/completions`, to `[proxy.openai]`'s `{base_url}/responses`.
#[utoipa::path(post, path = "/v1/responses", tag = "proxy",
    params(("x-skald-session" = Option<String>, Header,
        description = "The session when the client sends no id of its own (Codex's thread id); derived from the conversation's first messages when absent")),
    request_body(content = Object, description = "A Responses request (JSON, or zstd / gzip with content-encoding)", content_type = "application/json"),
    responses(
        (status = 200, description = "The upstream's answer (JSON, or an SSE stream)", body = Object),
        (status = 400, description = "Malformed JSON, not a Responses request, or a previous_response_id skald does not hold"),
        (status = 401, description = "A key is required"),
        (status = 403, description = "A Host or cross-site Origin the server does not answer (see [server] allowed_hosts, allowed_origins)"),
        (status = 408, description = "The request body did not arrive within body_read_timeout_secs"),
        (status = 415, description = "The body is not JSON (content-type)"),
        (status = 413, description = "The body is over the size limit"),
        (status = 409, description = "The session is busy with another request past the bounded wait"),
        (status = 422, description = "No upstream configured"),
        (status = 502, description = "The upstream cannot be reached, or its answer is not one"),
        (status = 503, description = "The server is stopping: the call was still running at the end of the shutdown grace"),
        (status = 504, description = "The upstream did not answer in time")))]
async fn responses(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    proxy(
        state,
        caller,
        RESPONSES,
        Route::Generate,
        uri,
        headers,
        body,
    )
    .await
}

/// The Responses WebSocket transport is not served: the upgrade is refused with 426, which
/// Codex takes as "use HTTP" and falls back to `POST /v1/responses` at once (a 404 costs it
/// three attempts and an error item; a 400 fails its turn).
#[utoipa::path(get, path = "/v1/responses", tag = "proxy",
    responses((status = 426, description = "WebSocket not offered: use POST /v1/responses")))]
async fn responses_websocket() -> ApiError {
    ApiError::UpgradeRequired(
        "skald serves the Responses API over HTTP only: POST /v1/responses (streamed with \
         `stream: true`)"
            .to_owned(),
    )
}

/// Anthropic's token count, for the request as skald would send it upstream (the client's
/// messages through the pipeline, skald's system prompt addition and tools added); no session
/// is read or written.
#[utoipa::path(post, path = "/v1/messages/count_tokens", tag = "proxy",
    request_body(content = Object, description = "A Messages count_tokens request", content_type = "application/json"),
    responses(
        (status = 200, description = "The upstream's count", body = Object),
        (status = 400, description = "Malformed JSON or not a Messages request"),
        (status = 401, description = "A key is required"),
        (status = 422, description = "No upstream configured"),
        (status = 502, description = "The upstream cannot be reached")))]
async fn count_tokens(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    proxy(
        state,
        caller,
        MESSAGES,
        Route::CountTokens,
        uri,
        headers,
        body,
    )
    .await
}

/// The upstream's models list, passed through (Anthropic's when the client sends
/// `anthropic-version`, else OpenAI's).
#[utoipa::path(get, path = "/v1/models", tag = "proxy",
    responses(
        (status = 200, description = "The upstream's list", body = Object),
        (status = 401, description = "A key is required"),
        (status = 422, description = "No upstream configured"),
        (status = 502, description = "The upstream cannot be reached")))]
async fn models(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let anthropic_client = headers.contains_key("anthropic-version");
    let api = match (
        anthropic_client,
        state.config.anthropic.is_some(),
        state.config.openai.is_some(),
    ) {
        (true, true, _) | (false, true, false) => MESSAGES,
        (true, false, _) | (false, _, true) | (false, false, false) => CHAT,
    };
    let forwarded = async {
        let upstream = wire::upstream(api, &state.config)?;
        let upstream_headers = upstream::upstream_headers(api, &caller, &headers, upstream)?;
        let url = wire::url_for(upstream, api.models_path(), uri.query());
        count::models(&state, &url, upstream_headers).await
    };
    match forwarded.await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn proxy(
    state: AppState,
    caller: Caller,
    api: Api,
    route: Route,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let response = match start(state, caller, api, route, uri, headers, body).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    };
    in_api_shape(api, response).await
}

/// skald's own error replies in the error shape of the client's API, so its SDK reads them as
/// it reads the provider's: OpenAI's is skald's own (`{"error": {"type", "message"}}`);
/// Anthropic's adds `"type": "error"` at the top ([`WireApi::marks_errors`]). Upstream answers
/// pass as they came.
async fn in_api_shape(api: Api, response: Response) -> Response {
    let own_error = response
        .extensions()
        .get::<crate::metrics::ErrorNote>()
        .is_some();
    if !(api.marks_errors() && own_error) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // skald's error bodies are small JSON it wrote itself, held in memory.
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let body = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(mut object)) => {
            object.insert("type".to_owned(), Value::String("error".to_owned()));
            Bytes::from(Value::Object(object).to_string())
        }
        Ok(_) | Err(_) => bytes,
    };
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// Everything that can refuse the request before the session is touched, then the exchange.
async fn start(
    state: AppState,
    caller: Caller,
    api: Api,
    route: Route,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(format!(
                "the request body is over the server's size limit of {} bytes",
                state.config.max_body_bytes
            ))
        } else {
            ApiError::BadRequest(format!(
                "the request body cannot be read: {}",
                rejection.body_text()
            ))
        }
    })?;
    let body = decompress(&headers, body, state.config.max_body_bytes)?;
    let value: Value = serde_json::from_slice(&body)
        .map_err(|error| ApiError::BadRequest(format!("the request body is not JSON: {error}")))?;
    let mut request = api.decode_request(&value).map_err(|error| {
        ApiError::BadRequest(format!(
            "the request body is not a valid {} request: {error}",
            api.name()
        ))
    })?;
    // A malformed request is refused for what it is before the configuration is looked at.
    let upstream = wire::upstream(api, &state.config)?;
    let upstream_headers = upstream::upstream_headers(api, &caller, &headers, upstream)?;
    let url = match route {
        Route::Generate => wire::generate_url(api, upstream, uri.query()),
        Route::CountTokens => wire::url_for(upstream, "/v1/messages/count_tokens", uri.query()),
    };
    let streaming = value.get("stream") == Some(&Value::Bool(true));
    let messages = std::mem::take(&mut request.messages);
    let session_id = identity::session_id(api, &headers, &value, &messages)?;
    let client_tools = match value.get("tools") {
        Some(Value::Array(tools)) => tools.clone(),
        Some(_) | None => Vec::new(),
    };
    // A Responses client with `store` on (the API's default) may continue from this answer by
    // its id alone: skald records it.
    let records_answer = api.records_answer(&value);
    let previous = api.previous_response_id(&value);
    // The body and its JSON tree are copies of the conversation `request` and `messages` now
    // hold: let go of them before the call, which may take minutes, so what a request holds
    // while it waits on the upstream is its decoded messages, not also what they came from.
    drop(value);
    drop(body);
    let identity = if state.engine.config().memory.enabled {
        match state.engine.memory_identity() {
            Ok(identity) => Some(identity),
            Err(error) => {
                tracing::warn!(%error, "the [memory] user or agent is not a valid name; memory is off");
                None
            }
        }
    } else {
        None
    };

    let mut exchange = exchange::Exchange {
        api,
        state: state.clone(),
        tenant: caller.tenant,
        session_id,
        url,
        headers: upstream_headers,
        request,
        client_tools,
        host_prompt: exchange::HostPrompt::of(&messages),
        client_messages: spelling::ClientMessages::default(),
        identity,
        now_ms: state.engine.now_ms(),
        settings: RecoverySettings::default(),
        records_answer,
    };
    if route == Route::CountTokens {
        let conversation = messages
            .get(skald_engine::prompt_len(&messages)..)
            .unwrap_or_default()
            .to_vec();
        exchange.client_messages = spelling::ClientMessages::new(messages);
        return Ok(count::count_tokens(exchange, conversation).await);
    }

    // A session's requests run one after the other (each builds on the state the one before
    // left). One that finds its session held past the bounded wait is refused with 409 rather
    // than run on a fork: a fork would answer from a context missing the running call's turn
    // and leave two diverging branches for the client's next request to reconcile, while a
    // 409 changes nothing and the client (its SDK retries 409s) sends it again once the
    // session is free.
    let mut session = state
        .engine
        .try_begin_turn(
            &exchange.tenant,
            &exchange.session_id,
            state.config.session_busy_wait,
        )
        .await
        .map_err(|busy| {
            ApiError::Conflict(format!(
                "{busy}: skald runs one request of a session at a time; send this one again \
                 once the other is answered, or give it its own session ({SESSION_HEADER})"
            ))
        })?;
    if previous.is_some() {
        // The conversation is brought in as if the client had sent it whole; the upstream gets
        // skald's context, never the reference.
        exchange.request.extra.remove("previous_response_id");
    }
    let brought = session
        .bring_in(
            messages,
            previous.as_deref(),
            api.origin(),
            exchange.identity.as_ref(),
        )
        .map_err(|error| match error {
            BringInError::UnknownResponse { response_id } => ApiError::BadRequest(format!(
                "previous_response_id {response_id:?} is not an answer skald recorded in session \
                 {:?}: skald rewrites every request's context, so it cannot continue from a \
                 response the upstream stored; send the whole conversation in `input` (with \
                 `store: false`, as Codex does), or continue only from responses made through \
                 skald with `store` on, in the same session (the client's session id, or \
                 {SESSION_HEADER})",
                exchange.session_id.as_str()
            )),
            BringInError::Engine(error) => {
                ApiError::Internal(format!("syncing the conversation failed: {error}"))
            }
        })?;
    let messages = brought.messages;
    exchange.client_messages = spelling::ClientMessages::new(messages);
    if !streaming {
        return Ok(exchange::complete(exchange, session).await);
    }
    let (head, response) = tokio::sync::oneshot::channel();
    state.tasks.spawn(exchange::stream(exchange, session, head));
    response
        .await
        .map_err(|_| ApiError::Internal("the streaming task ended before answering".to_owned()))
}

/// The request body as JSON bytes: a body sent with `content-encoding: zstd` or `gzip` (Codex
/// can compress its requests) is decompressed, within the same size limit as a plain one.
fn decompress(headers: &HeaderMap, body: Bytes, limit: usize) -> Result<Bytes, ApiError> {
    use std::io::Read;

    let encoding = match headers.get(axum::http::header::CONTENT_ENCODING) {
        None => return Ok(body),
        Some(value) => value
            .to_str()
            .map_err(|_| {
                ApiError::BadRequest("the content-encoding header is not text".to_owned())
            })?
            .trim()
            .to_ascii_lowercase(),
    };
    let mut out = Vec::new();
    let read = match encoding.as_str() {
        "" | "identity" => return Ok(body),
        "zstd" => zstd::stream::read::Decoder::new(body.as_ref())
            .and_then(|decoder| decoder.take(limit as u64 + 1).read_to_end(&mut out)),
        "gzip" | "x-gzip" => flate2::read::GzDecoder::new(body.as_ref())
            .take(limit as u64 + 1)
            .read_to_end(&mut out),
        "deflate" => flate2::read::ZlibDecoder::new(body.as_ref())
            .take(limit as u64 + 1)
            .read_to_end(&mut out),
        other => {
            return Err(ApiError::BadRequest(format!(
                "content-encoding {other:?} is not supported: send the body plain, or as zstd, \
                 gzip or deflate"
            )));
        }
    };
    read.map_err(|error| {
        ApiError::BadRequest(format!("the request body is not valid {encoding}: {error}"))
    })?;
    if out.len() > limit {
        return Err(ApiError::PayloadTooLarge(format!(
            "the request body is over the server's size limit of {limit} bytes once decompressed"
        )));
    }
    Ok(Bytes::from(out))
}
