//! A scripted provider the proxy tests put behind skald: an axum server on an ephemeral loopback
//! port that records every request it gets (path, headers, JSON body) and answers from a script —
//! JSON with a status, an SSE stream sent one event per chunk (optionally pausing after the
//! first events until the test opens a gate), or an answer computed from the request. With the
//! script empty it answers a short text in the request's own API, streamed when asked.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// One request the upstream got.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// The names of the tools the request offered (both APIs).
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|tool| {
                        tool.pointer("/function/name")
                            .or_else(|| tool.get("name"))
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// One scripted answer.
#[derive(Clone)]
pub enum Reply {
    Json(u16, Value),
    /// SSE events (each `event:`/`data:` text without the blank line), one per chunk.
    Sse(Vec<String>),
    /// The first events, then a pause until `gate` is notified, then the rest.
    GatedSse {
        first: Vec<String>,
        gate: Arc<Notify>,
        rest: Vec<String>,
    },
    /// An answer computed from the request body.
    Dynamic(Arc<dyn Fn(&Value) -> Reply + Send + Sync>),
    /// No answer at all (not even headers) for a very long time: an upstream that hangs.
    Hang,
    /// Any answer, byte for byte: a status, headers, and the body in pieces sent `gap` apart
    /// (the body ends cleanly after the last one; no `content-length` unless given).
    Raw {
        status: u16,
        headers: Vec<(&'static str, String)>,
        pieces: Vec<Vec<u8>>,
        gap: std::time::Duration,
    },
}

#[derive(Clone, Default)]
struct Shared {
    requests: Arc<Mutex<Vec<Recorded>>>,
    script: Arc<Mutex<VecDeque<Reply>>>,
}

/// The running upstream; dropping it stops it.
pub struct Upstream {
    pub addr: SocketAddr,
    shared: Shared,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl Upstream {
    pub async fn start() -> Upstream {
        let shared = Shared::default();
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await
                .unwrap();
        });
        Upstream {
            addr,
            shared,
            _shutdown: tx,
        }
    }

    /// `config` with the proxy's OpenAI and Anthropic upstreams both pointed here, and no
    /// provider key of skald's (the client's own passes through).
    pub fn proxied(&self, mut config: skald_server::ServerConfig) -> skald_server::ServerConfig {
        config.openai = Some(skald_server::Upstream {
            base_url: self.openai_base(),
            api_key: None,
        });
        config.anthropic = Some(skald_server::Upstream {
            base_url: self.anthropic_base(),
            api_key: None,
        });
        config
    }

    /// The OpenAI base URL (`…/v1`).
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The Anthropic base URL.
    pub fn anthropic_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn push(&self, reply: Reply) {
        self.shared.script.lock().unwrap().push_back(reply);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }
}

async fn answer(
    axum::extract::State(shared): axum::extract::State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(Recorded {
        path: uri.path().to_owned(),
        headers,
        body: body.clone(),
    });
    let scripted = shared.script.lock().unwrap().pop_front();
    let mut reply = scripted.unwrap_or_else(|| default_reply(uri.path(), &body));
    while let Reply::Dynamic(compute) = reply {
        reply = compute(&body);
    }
    if let Reply::Hang = reply {
        // Far longer than any test: the proxy's timeouts (or the client) must end the wait.
        tokio::time::sleep(std::time::Duration::from_secs(600)).await;
        return Response::builder().status(504).body(Body::empty()).unwrap();
    }
    respond(reply, &body)
}

fn respond(reply: Reply, body: &Value) -> Response {
    match reply {
        Reply::Hang => Response::builder().status(504).body(Body::empty()).unwrap(),
        Reply::Json(status, value) => Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .header("content-type", "application/json")
            .header("x-request-id", "req-upstream")
            .body(Body::from(value.to_string()))
            .unwrap(),
        Reply::Sse(events) => sse(events, None, Vec::new()),
        Reply::GatedSse { first, gate, rest } => sse(first, Some(gate), rest),
        Reply::Dynamic(compute) => respond(compute(body), body),
        Reply::Raw {
            status,
            headers,
            pieces,
            gap,
        } => raw(status, headers, pieces, gap),
    }
}

fn raw(
    status: u16,
    headers: Vec<(&'static str, String)>,
    pieces: Vec<Vec<u8>>,
    gap: std::time::Duration,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        for (n, piece) in pieces.into_iter().enumerate() {
            if n > 0 {
                tokio::time::sleep(gap).await;
            }
            if tx.send(Bytes::from(piece)).await.is_err() {
                return;
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<Bytes, Infallible>(bytes), rx))
    });
    let mut response = Response::builder().status(status);
    for (name, value) in headers {
        response = response.header(name, value);
    }
    response.body(Body::from_stream(stream)).unwrap()
}

fn sse(first: Vec<String>, gate: Option<Arc<Notify>>, rest: Vec<String>) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        for event in first {
            if tx.send(Bytes::from(format!("{event}\n\n"))).await.is_err() {
                return;
            }
        }
        if let Some(gate) = gate {
            gate.notified().await;
        }
        for event in rest {
            if tx.send(Bytes::from(format!("{event}\n\n"))).await.is_err() {
                return;
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<Bytes, Infallible>(bytes), rx))
    });
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

fn default_reply(path: &str, body: &Value) -> Reply {
    let streaming = body["stream"] == true;
    if path.ends_with("/responses") {
        return if streaming {
            Reply::Sse(responses_sse("resp_default", &[RespItem::Text("ok")]))
        } else {
            Reply::Json(200, responses_text("resp_default", "ok"))
        };
    }
    let anthropic = path.ends_with("/messages");
    match (anthropic, streaming) {
        (false, false) => Reply::Json(200, openai_text("ok")),
        (false, true) => Reply::Sse(openai_sse_text(&["o", "k"])),
        (true, false) => Reply::Json(200, anthropic_text("ok")),
        (true, true) => Reply::Sse(anthropic_sse_text(&["o", "k"])),
    }
}

// ---------------------------------------------------------------------------------------------
// OpenAI answers
// ---------------------------------------------------------------------------------------------

pub fn openai_text(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1770000000, "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": null},
                     "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 5, "total_tokens": 125},
        "system_fingerprint": "fp_test"
    })
}

/// An answer calling tools: `(id, name, arguments JSON)`.
pub fn openai_tool_calls(calls: &[(&str, &str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, arguments)| {
            json!({"id": id, "type": "function",
                   "function": {"name": name, "arguments": arguments.to_string()}})
        })
        .collect();
    json!({
        "id": "chatcmpl-2", "object": "chat.completion", "created": 1770000000, "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls,
                     "refusal": null}, "logprobs": null, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 130, "completion_tokens": 9, "total_tokens": 139}
    })
}

fn openai_chunk(id: &str, delta: Value, finish: Option<&str>) -> String {
    format!(
        "data: {}",
        json!({"id": id, "object": "chat.completion.chunk", "created": 1770000000,
               "model": "gpt-test",
               "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    )
}

pub fn openai_sse_text(pieces: &[&str]) -> Vec<String> {
    openai_sse_text_with_id("chatcmpl-s1", pieces)
}

pub fn openai_sse_text_with_id(id: &str, pieces: &[&str]) -> Vec<String> {
    let mut events = vec![openai_chunk(
        id,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    for piece in pieces {
        events.push(openai_chunk(id, json!({"content": piece}), None));
    }
    events.push(openai_chunk(id, json!({}), Some("stop")));
    events.push(format!(
        "data: {}",
        json!({"id": id, "object": "chat.completion.chunk", "created": 1770000000,
               "model": "gpt-test", "choices": [],
               "usage": {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102}})
    ));
    events.push("data: [DONE]".to_owned());
    events
}

/// A stream that says `text`, then calls tools `(id, name, arguments JSON)` in pieces.
pub fn openai_sse_tool_calls(id: &str, text: &str, calls: &[(&str, &str, Value)]) -> Vec<String> {
    let mut events = vec![openai_chunk(
        id,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    if !text.is_empty() {
        events.push(openai_chunk(id, json!({"content": text}), None));
    }
    for (index, (call_id, name, arguments)) in calls.iter().enumerate() {
        events.push(openai_chunk(
            id,
            json!({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                   "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
        let text = arguments.to_string();
        let (head, tail) = text.split_at(text.len() / 2);
        for part in [head, tail] {
            events.push(openai_chunk(
                id,
                json!({"tool_calls": [{"index": index, "function": {"arguments": part}}]}),
                None,
            ));
        }
    }
    events.push(openai_chunk(id, json!({}), Some("tool_calls")));
    events.push("data: [DONE]".to_owned());
    events
}

// ---------------------------------------------------------------------------------------------
// Anthropic answers
// ---------------------------------------------------------------------------------------------

pub fn anthropic_text(text: &str) -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 120, "output_tokens": 5}
    })
}

pub fn anthropic_tool_uses(text: Option<&str>, calls: &[(&str, &str, Value)]) -> Value {
    let mut content = Vec::new();
    if let Some(text) = text {
        content.push(json!({"type": "text", "text": text}));
    }
    for (id, name, input) in calls {
        content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
    }
    json!({
        "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-test",
        "content": content, "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 130, "output_tokens": 9}
    })
}

fn anthropic_event(kind: &str, data: Value) -> String {
    format!("event: {kind}\ndata: {data}")
}

fn anthropic_start(id: &str) -> String {
    anthropic_event(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message",
               "role": "assistant", "content": [], "model": "claude-test", "stop_reason": null,
               "stop_sequence": null, "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    )
}

fn anthropic_end(reason: &str) -> Vec<String> {
    vec![
        anthropic_event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
                   "usage": {"output_tokens": 7}}),
        ),
        anthropic_event("message_stop", json!({"type": "message_stop"})),
    ]
}

pub fn anthropic_sse_text(pieces: &[&str]) -> Vec<String> {
    anthropic_sse_text_with_id("msg_s1", pieces)
}

pub fn anthropic_sse_text_with_id(id: &str, pieces: &[&str]) -> Vec<String> {
    let mut events = vec![
        anthropic_start(id),
        anthropic_event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
        ),
        anthropic_event("ping", json!({"type": "ping"})),
    ];
    for piece in pieces {
        events.push(anthropic_event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    events.push(anthropic_event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.extend(anthropic_end("end_turn"));
    events
}

/// A stream that says `text` (block 0), then calls tools `(id, name, input)`.
pub fn anthropic_sse_tool_uses(id: &str, text: &str, calls: &[(&str, &str, Value)]) -> Vec<String> {
    let mut events = vec![anthropic_start(id)];
    let mut index = 0;
    if !text.is_empty() {
        events.push(anthropic_event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
        ));
        events.push(anthropic_event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": text}}),
        ));
        events.push(anthropic_event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        index += 1;
    }
    for (call_id, name, input) in calls {
        events.push(anthropic_event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}}),
        ));
        let text = input.to_string();
        let (head, tail) = text.split_at(text.len() / 2);
        for part in [head, tail] {
            events.push(anthropic_event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta", "partial_json": part}}),
            ));
        }
        events.push(anthropic_event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    events.extend(anthropic_end("tool_use"));
    events
}

// ---------------------------------------------------------------------------------------------
// OpenAI Responses answers
// ---------------------------------------------------------------------------------------------

/// One output item of a Responses answer.
#[derive(Debug, Clone)]
pub enum RespItem<'a> {
    /// A reasoning item with this `encrypted_content`.
    Reasoning(&'a str),
    /// An assistant message with this text.
    Text(&'a str),
    /// A function call `(call_id, name, arguments JSON)`.
    Call(&'a str, &'a str, Value),
}

impl RespItem<'_> {
    /// The item as the finished `output` holds it; `n` numbers its item id.
    fn done(&self, n: usize) -> Value {
        match self {
            RespItem::Reasoning(encrypted) => json!({
                "id": format!("rs_{n}"), "type": "reasoning", "summary": [],
                "encrypted_content": encrypted}),
            RespItem::Text(text) => json!({
                "id": format!("msg_{n}"), "type": "message", "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}),
            RespItem::Call(call_id, name, arguments) => json!({
                "id": format!("fc_{n}"), "type": "function_call", "status": "completed",
                "call_id": call_id, "name": name, "arguments": arguments.to_string()}),
        }
    }
}

fn responses_envelope(id: &str, status: &str, output: Vec<Value>) -> Value {
    let mut response = json!({
        "id": id, "object": "response", "created_at": 1770000000, "status": status,
        "model": "gpt-test", "output": output, "parallel_tool_calls": true,
        "tool_choice": "auto", "tools": [], "store": false
    });
    if status == "completed" {
        response["usage"] = json!({"input_tokens": 120, "input_tokens_details": {"cached_tokens": 0},
                                   "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                                   "total_tokens": 125});
    }
    response
}

/// A whole Responses answer with `items` as its output.
pub fn responses_answer(id: &str, items: &[RespItem]) -> Value {
    let output = items
        .iter()
        .enumerate()
        .map(|(n, item)| item.done(n))
        .collect();
    responses_envelope(id, "completed", output)
}

/// A whole Responses answer saying `text`.
pub fn responses_text(id: &str, text: &str) -> Value {
    responses_answer(id, &[RespItem::Text(text)])
}

/// A Responses event stream: `response.created`, `response.in_progress`, every item's events
/// (added, deltas, done) and `response.completed` (with usage), `sequence_number` from 0.
pub fn responses_sse(id: &str, items: &[RespItem]) -> Vec<String> {
    let mut sequence = 0u64;
    let mut events = Vec::new();
    let mut push = |kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(sequence);
        sequence += 1;
        events.push(format!("event: {kind}\ndata: {data}"));
    };
    push(
        "response.created",
        json!({"response": responses_envelope(id, "in_progress", vec![])}),
    );
    push(
        "response.in_progress",
        json!({"response": responses_envelope(id, "in_progress", vec![])}),
    );
    let mut output = Vec::new();
    for (n, item) in items.iter().enumerate() {
        let done = item.done(n);
        let item_id = done["id"].clone();
        match item {
            RespItem::Reasoning(_) => {
                push(
                    "response.output_item.added",
                    json!({"output_index": n, "item": done}),
                );
            }
            RespItem::Text(text) => {
                let mut added = done.clone();
                added["status"] = json!("in_progress");
                added["content"] = json!([]);
                push(
                    "response.output_item.added",
                    json!({"output_index": n, "item": added}),
                );
                let empty = json!({"type": "output_text", "text": "", "annotations": []});
                push(
                    "response.content_part.added",
                    json!({"item_id": item_id, "output_index": n, "content_index": 0, "part": empty}),
                );
                let (head, tail) = text.split_at(text.len() / 2);
                for piece in [head, tail] {
                    push(
                        "response.output_text.delta",
                        json!({"item_id": item_id, "output_index": n, "content_index": 0,
                               "delta": piece, "logprobs": []}),
                    );
                }
                push(
                    "response.output_text.done",
                    json!({"item_id": item_id, "output_index": n, "content_index": 0,
                           "text": text, "logprobs": []}),
                );
                push(
                    "response.content_part.done",
                    json!({"item_id": item_id, "output_index": n, "content_index": 0,
                           "part": done["content"][0]}),
                );
            }
            RespItem::Call(_, _, arguments) => {
                let mut added = done.clone();
                added["status"] = json!("in_progress");
                added["arguments"] = json!("");
                push(
                    "response.output_item.added",
                    json!({"output_index": n, "item": added}),
                );
                let text = arguments.to_string();
                let (head, tail) = text.split_at(text.len() / 2);
                for piece in [head, tail] {
                    push(
                        "response.function_call_arguments.delta",
                        json!({"item_id": item_id, "output_index": n, "delta": piece}),
                    );
                }
                push(
                    "response.function_call_arguments.done",
                    json!({"item_id": item_id, "output_index": n, "arguments": text}),
                );
            }
        }
        push(
            "response.output_item.done",
            json!({"output_index": n, "item": done}),
        );
        output.push(done);
    }
    push(
        "response.completed",
        json!({"response": responses_envelope(id, "completed", output)}),
    );
    events
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// OpenAI's context overflow (HTTP 400).
pub fn openai_overflow() -> Reply {
    Reply::Json(
        400,
        json!({"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9500 tokens. Please reduce the length of the messages.",
                         "type": "invalid_request_error", "param": "messages",
                         "code": "context_length_exceeded"}}),
    )
}

/// Anthropic's context overflow (HTTP 400).
pub fn anthropic_overflow() -> Reply {
    Reply::Json(
        400,
        json!({"type": "error", "error": {"type": "invalid_request_error",
               "message": "prompt is too long: 9500 tokens > 8192 maximum"}}),
    )
}

/// The first `[REF_ID: …]` id in a request body.
pub fn first_ref_id(body: &Value) -> Option<String> {
    let text = body.to_string();
    text.match_indices("[REF_ID: ").find_map(|(at, marker)| {
        let id = text.get(at + marker.len()..at + marker.len() + 64)?;
        id.bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
            .then(|| id.to_owned())
    })
}

/// A reply calling skald's fetch tool (as `make` spells it) on the first ref the request carries.
pub fn fetch_reply(make: fn(&str) -> Reply) -> Reply {
    Reply::Dynamic(Arc::new(move |body: &Value| {
        make(&first_ref_id(body).expect("the request carries a ref"))
    }))
}

/// No request the upstream got carried a skald key (`secret`, or any `sk-skald` key) or a skald
/// header.
pub fn assert_no_skald_key(upstream: &Upstream, secret: &str) {
    for request in upstream.requests() {
        for (name, value) in &request.headers {
            let value = value.to_str().unwrap_or_default();
            assert!(!value.contains(secret), "{name}: {value}");
            assert!(!value.contains("sk-skald"), "{name}: {value}");
            assert!(!name.as_str().starts_with("x-skald"), "{name}");
        }
    }
}
