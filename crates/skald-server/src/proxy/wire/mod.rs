//! The wire APIs the proxy speaks, one implementation of [`WireApi`] each: OpenAI Chat
//! Completions ([`chat`]), Anthropic Messages ([`messages`]) and OpenAI Responses
//! ([`responses`]). Everything that differs between them lives here — the configured upstream,
//! paths, the provider-key header, request and answer codecs (through `skald_core::codec`),
//! usage, the tool spec shape, skald's calls taken out of an answer, the error shapes, the
//! client's own session id, and the events of a streamed answer ([`StreamRewriter`]'s per-API
//! half) — so the proxy's handler, exchange and stream code are the same for all three.

pub mod chat;
pub mod messages;
pub mod responses;

use axum::http::{HeaderMap, HeaderName};
use bytes::Bytes;
use serde_json::Value;
use skald_core::message::{Conversation, Message};
use skald_engine::SkaldTools;

use super::sse::SseEvent;
use super::stream::StreamRewriter;
use crate::config::{ServerConfig, Upstream};
use crate::error::ApiError;

/// The wire API of one proxied request.
pub type Api = &'static dyn WireApi;

/// OpenAI Chat Completions (`POST /v1/chat/completions`).
pub static CHAT: Api = &chat::ChatCompletions;
/// Anthropic Messages (`POST /v1/messages`).
pub static MESSAGES: Api = &messages::AnthropicMessages;
/// OpenAI Responses (`POST /v1/responses`), to the OpenAI upstream.
pub static RESPONSES: Api = &responses::Responses;

/// What one provider API is on the wire (see the module docs).
pub trait WireApi: Send + Sync + 'static {
    /// The API's name, for messages.
    fn name(&self) -> &'static str;

    /// The configuration table that names this API's upstream.
    fn table(&self) -> &'static str;

    /// A base URL to suggest for the table.
    fn example_base_url(&self) -> &'static str;

    /// The codec's origin mark (also the session's source format).
    fn origin(&self) -> &'static str;

    /// The configured upstream, when there is one.
    fn configured<'c>(&self, config: &'c ServerConfig) -> Option<&'c Upstream>;

    /// Decodes a request body; the error names the field.
    fn decode_request(&self, body: &Value) -> Result<Conversation, String>;

    /// Encodes `conversation` as this API's request body, with the fields the client sent that
    /// skald does not model kept as they were.
    fn encode_request(&self, conversation: &Conversation) -> Value;

    /// A skald tool, given as an OpenAI function spec, as this API defines tools.
    fn tool_from_function_spec(&self, tool: Value) -> Value;

    /// Where a model call goes below the base URL.
    fn generate_path(&self) -> &'static str;

    /// Where the models list is below the base URL.
    fn models_path(&self) -> &'static str;

    /// The event that closes a whole streamed answer, as the API names it.
    fn final_event(&self) -> &'static str;

    /// The header a provider key goes in.
    fn key_header(&self) -> HeaderName;

    /// A provider key as that header's value.
    fn key_text(&self, key: &str) -> String;

    /// The answer's message (its usage included), from a non-streamed response body.
    fn decode_answer(&self, body: &Value) -> Option<Message>;

    /// The client's view of a non-streamed answer: skald's tool calls taken out, and the stop
    /// reason no longer asking for tools when none of the client's are left.
    fn strip_skald_calls(&self, answer: &mut Value, skald: &SkaldTools);

    /// An error event in the API's stream format, for a failure after the answer started.
    fn error_event(&self, message: &str) -> Vec<Bytes>;

    /// The host's name and its own conversation id, when the request carries one (see
    /// `proxy::identity`).
    fn client_session(&self, headers: &HeaderMap, body: &Value) -> Option<(&'static str, String)>;

    /// Whether skald's own error bodies carry the API's `"type": "error"` mark.
    fn marks_errors(&self) -> bool {
        false
    }

    /// Whether the request asks for extended thinking: then every assistant tool call in the
    /// request must be the model's own (recall is given as text instead).
    fn thinking_enabled(&self, _request: &Conversation) -> bool {
        false
    }

    /// Whether the client keeps no history of its own and continues from the answer's id, so
    /// skald records the answer.
    fn records_answer(&self, _body: &Value) -> bool {
        false
    }

    /// The answer the request continues from, when it sends only what is new.
    fn previous_response_id(&self, _body: &Value) -> Option<String> {
        None
    }

    /// The bytes to send the client now for one upstream event of a streamed answer.
    fn on_stream_event(&self, rewriter: &mut StreamRewriter, event: SseEvent) -> Option<Bytes>;

    /// A held end-of-answer event as the client gets it once the answer is over.
    fn finish_held_event(&self, _rewriter: &mut StreamRewriter, _data: &mut Value) {}
}

impl std::fmt::Debug for dyn WireApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The configured upstream of `api`, or the error saying what to configure.
pub fn upstream(api: Api, config: &ServerConfig) -> Result<&Upstream, ApiError> {
    api.configured(config).ok_or_else(|| {
        ApiError::Unprocessable(format!(
            "no upstream is configured for this API: set `base_url` under {} in skald.toml \
             (e.g. {})",
            api.table(),
            api.example_base_url()
        ))
    })
}

/// `{base_url}{path}`, with the client's query string.
pub fn url_for(upstream: &Upstream, path: &str, query: Option<&str>) -> String {
    let base = upstream.base_url.trim_end_matches('/');
    match query.filter(|query| !query.is_empty()) {
        Some(query) => format!("{base}{path}?{query}"),
        None => format!("{base}{path}"),
    }
}

/// Where `api`'s model calls go: `{base_url}/chat/completions`, `{base_url}/v1/messages` or
/// `{base_url}/responses`, with the client's query string.
pub fn generate_url(api: Api, upstream: &Upstream, query: Option<&str>) -> String {
    url_for(upstream, api.generate_path(), query)
}

/// The client's own conversation id in an OpenAI request (Chat Completions or Responses):
/// Codex's `session-id` / `thread-id` headers (older versions `conversation_id`), else the
/// body's `prompt_cache_key` — under `codex` when Codex says it is (`originator`), else `openai`.
fn openai_client_session(headers: &HeaderMap, body: &Value) -> Option<(&'static str, String)> {
    header_text(headers, "session-id")
        .or_else(|| header_text(headers, "thread-id"))
        .or_else(|| header_text(headers, "conversation_id"))
        .or_else(|| {
            body.get("prompt_cache_key")
                .and_then(Value::as_str)
                .filter(|key| !key.trim().is_empty())
                .map(str::to_owned)
        })
        .map(|id| {
            let codex =
                header_text(headers, "originator").is_some_and(|who| who.starts_with("codex"));
            (if codex { "codex" } else { "openai" }, id)
        })
}

/// A header's trimmed text, when it has some.
fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|value| !value.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    fn upstream(key: Option<&str>) -> Upstream {
        Upstream {
            base_url: "http://127.0.0.1:9/v1/".to_owned(),
            api_key: key.map(str::to_owned),
        }
    }

    #[test]
    fn skald_tools_are_written_in_each_apis_shape() {
        let function = serde_json::json!({"type": "function", "function": {
            "name": "fetch_original_data", "description": "d", "parameters": {"type": "object"}}});
        assert_eq!(CHAT.tool_from_function_spec(function.clone()), function);
        assert_eq!(
            MESSAGES.tool_from_function_spec(function),
            serde_json::json!({"name": "fetch_original_data", "description": "d",
                               "input_schema": {"type": "object"}})
        );
    }

    #[test]
    fn urls_join_the_base_and_keep_the_query() {
        let up = upstream(None);
        assert_eq!(
            generate_url(CHAT, &up, None),
            "http://127.0.0.1:9/v1/chat/completions"
        );
        assert_eq!(
            generate_url(MESSAGES, &up, Some("beta=true")),
            "http://127.0.0.1:9/v1/v1/messages?beta=true"
        );
    }

    fn skald() -> SkaldTools {
        SkaldTools::new(["fetch_original_data".to_owned()])
    }

    #[test]
    fn openai_answers_lose_skald_calls_and_keep_the_clients() {
        let mut mixed = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "fetch_original_data", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}}]});
        CHAT.strip_skald_calls(&mut mixed, &skald());
        let calls = mixed["choices"][0]["message"]["tool_calls"]
            .as_array()
            .unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0]["id"], "b");
        assert_eq!(mixed["choices"][0]["finish_reason"], "tool_calls");

        let mut only = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "x", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "fetch_original_data", "arguments": "{}"}}]}}]});
        CHAT.strip_skald_calls(&mut only, &skald());
        assert!(only["choices"][0]["message"].get("tool_calls").is_none());
        assert_eq!(only["choices"][0]["finish_reason"], "stop");
    }

    #[test]
    fn anthropic_answers_lose_skald_blocks() {
        let mut answer = json!({"type": "message", "stop_reason": "tool_use", "content": [
            {"type": "text", "text": "checking"},
            {"type": "tool_use", "id": "a", "name": "fetch_original_data", "input": {}}]});
        MESSAGES.strip_skald_calls(&mut answer, &skald());
        assert_eq!(answer["content"].as_array().unwrap().len(), 1);
        assert_eq!(answer["stop_reason"], "end_turn");
    }
}
