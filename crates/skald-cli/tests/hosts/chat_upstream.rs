//! The scripted OpenAI Chat Completions model behind the OpenClaw tests: a plain-`std` HTTP/1.1
//! server on an ephemeral loopback port answering `POST /v1/chat/completions` (streamed SSE or
//! JSON) and `GET /v1/models`.
//!
//! What it answers is decided by the request, never by a call counter (except the one scripted
//! overflow): the turn is named by a keyword in the latest user message, and the step within the
//! turn by the tool results after it. Every request is recorded with its body.
//!
//! Turns (keyword in the user's message → what the model does):
//! - `BIG`: runs `exec` with `seq 1 4000` (18,893 characters, above skald's offload threshold),
//!   then answers.
//! - `FETCH`: calls `fetch_original_data` on the first `[REF_ID: …]` in the request (lines
//!   3990–4000), then answers with what came back.
//! - `REMEMBER`: calls `commit_memory` with the user's editor, then answers.
//! - `OVERFLOW`: the first request of the turn is refused as a context overflow (the OpenAI
//!   error shape), later ones are answered.
//! - anything else: a text answer.
//!
//! A request with skald's summarizer instructions as its system prompt (a skald whose
//! `[llm.summary]` is this upstream) is refused with a 400 that is not an overflow: every
//! summary call fails.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// The final answers start with this.
pub const FINAL_TEXT: &str = "All done:";
/// The fact the `REMEMBER` turn stores.
pub const REMEMBERED: &str = "The user's editor is helix";
/// The line range the `FETCH` turn asks for.
pub const FETCH_LINES: &str = "3990:4000";

/// One request the upstream got.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub path: String,
    pub body: Value,
    /// What the upstream answered: `tool:<name>`, `text`, `overflow`.
    pub answered: String,
}

impl ChatRequest {
    /// The request's messages.
    pub fn messages(&self) -> Vec<Value> {
        self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The names of the tools offered.
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// The whole body as text (to look for placeholders and originals).
    pub fn text(&self) -> String {
        self.body.to_string()
    }

    /// The latest user message's text.
    pub fn last_user_text(&self) -> String {
        last_user_text(&self.messages())
    }
}

#[derive(Default)]
struct State {
    requests: Vec<ChatRequest>,
    overflowed: bool,
}

struct Shared {
    state: Mutex<State>,
    stop: AtomicBool,
}

/// The running upstream; dropping it stops it.
pub struct ChatUpstream {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl ChatUpstream {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the scripted upstream");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            stop: AtomicBool::new(false),
        });
        let accept = Arc::clone(&shared);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if accept.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let shared = Arc::clone(&accept);
                std::thread::spawn(move || {
                    let _ = serve(stream, &shared);
                });
            }
        });
        Self { addr, shared }
    }

    /// `http://127.0.0.1:PORT/v1`
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The model calls, in arrival order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.shared.state.lock().unwrap().requests.clone()
    }

    /// The model calls of the turn whose user message holds `keyword`.
    pub fn turn(&self, keyword: &str) -> Vec<ChatRequest> {
        self.requests()
            .into_iter()
            .filter(|request| request.last_user_text().contains(keyword))
            .collect()
    }

    /// One line per request, for failure messages.
    pub fn dump(&self) -> String {
        self.requests()
            .iter()
            .map(|request| {
                format!(
                    "{} {} msgs={} tools={:?} ref={} user={:?}",
                    request.path,
                    request.answered,
                    request.messages().len(),
                    request.tool_names(),
                    request.text().contains("[REF_ID: "),
                    request
                        .last_user_text()
                        .chars()
                        .take(80)
                        .collect::<String>()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for ChatUpstream {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => String::new(),
    }
}

/// OpenClaw adds its own runtime notes as user messages (active exec sessions, sub-agents);
/// they are not what the user said.
const HOST_CONTEXT: &str = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>";

fn is_user_turn(message: &Value) -> bool {
    message["role"] == "user" && !text_of(&message["content"]).starts_with(HOST_CONTEXT)
}

fn last_user_text(messages: &[Value]) -> String {
    messages
        .iter()
        .rev()
        .find(|message| is_user_turn(message))
        .map(|message| text_of(&message["content"]))
        .unwrap_or_default()
}

/// Tool results after the latest user message, by the name of the call they answer.
fn results_after_user(messages: &[Value]) -> Vec<String> {
    let start = messages
        .iter()
        .rposition(is_user_turn)
        .map_or(0, |index| index + 1);
    let mut names = std::collections::HashMap::new();
    let mut results = Vec::new();
    for message in &messages[start..] {
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            if let (Some(id), Some(name)) = (call["id"].as_str(), call["function"]["name"].as_str())
            {
                names.insert(id.to_owned(), name.to_owned());
            }
        }
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap_or_default();
            results.push(names.get(id).cloned().unwrap_or_default());
        }
    }
    results
}

/// The first real ref id (64 hex digits) after a `[REF_ID: ` in `text` (skald's instructions
/// show the token with a `<id>` stand-in).
pub fn first_ref_id(text: &str) -> Option<String> {
    text.match_indices("[REF_ID: ").find_map(|(at, token)| {
        let id: String = text[at + token.len()..]
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .collect();
        (id.len() == 64).then_some(id)
    })
}

enum Answer {
    Tool {
        name: &'static str,
        arguments: Value,
    },
    Text(String),
    Overflow,
    /// A summary call, refused.
    SummaryRefused,
}

/// How skald's summarizer instructions begin (`skald_core::compaction::prompts`).
pub const SUMMARIZER_INSTRUCTIONS: &str = "You summarise the earlier part of a conversation";

fn decide(shared: &Shared, body: &Value) -> Answer {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let summary_call = messages.iter().any(|message| {
        message["role"] == "system"
            && message["content"]
                .to_string()
                .contains(SUMMARIZER_INSTRUCTIONS)
    });
    if summary_call {
        return Answer::SummaryRefused;
    }
    let user = last_user_text(&messages);
    let done = results_after_user(&messages);
    let offered = |name: &str| {
        body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|tool| tool["function"]["name"] == name)
    };
    if user.contains("OVERFLOW") {
        let mut state = shared.state.lock().unwrap();
        if !state.overflowed {
            state.overflowed = true;
            return Answer::Overflow;
        }
        return Answer::Text(format!("{FINAL_TEXT} recovered from the overflow"));
    }
    if user.contains("BIG") && done.is_empty() && offered("exec") {
        return Answer::Tool {
            name: "exec",
            arguments: json!({"command": "seq 1 4000"}),
        };
    }
    if user.contains("FETCH") && done.is_empty() {
        let request_text = body.to_string();
        if let (Some(id), true) = (first_ref_id(&request_text), offered("fetch_original_data")) {
            return Answer::Tool {
                name: "fetch_original_data",
                arguments: json!({"ref_ids": [id], "lines": FETCH_LINES}),
            };
        }
        return Answer::Text(format!("{FINAL_TEXT} nothing to fetch"));
    }
    if user.contains("REMEMBER") && done.is_empty() && offered("commit_memory") {
        return Answer::Tool {
            name: "commit_memory",
            arguments: json!({"memory_content": REMEMBERED, "memory_type": "preference", "category": "editor"}),
        };
    }
    Answer::Text(format!("{FINAL_TEXT} ok"))
}

fn serve(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_owned();
        let path = parts.next().unwrap_or_default().to_owned();
        let mut length = 0;
        let mut chunked = false;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
                if name == "content-length" {
                    length = value.parse().unwrap_or(0);
                } else if name == "transfer-encoding" && value.contains("chunked") {
                    chunked = true;
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        if chunked {
            loop {
                let mut size = String::new();
                reader.read_line(&mut size)?;
                let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                    .unwrap_or(0);
                let mut chunk = vec![0; size + 2];
                reader.read_exact(&mut chunk)?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        }
        let mut out = stream.try_clone()?;
        if method == "GET" {
            respond(
                &mut out,
                200,
                "application/json",
                json!({"object": "list", "data": []}).to_string().as_bytes(),
            )?;
            continue;
        }
        if !path.ends_with("/chat/completions") {
            respond(
                &mut out,
                404,
                "application/json",
                br#"{"error":{"message":"no route"}}"#,
            )?;
            continue;
        }
        let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let answer = decide(shared, &value);
        let answered = match &answer {
            Answer::Tool { name, .. } => format!("tool:{name}"),
            Answer::Text(_) => "text".to_owned(),
            Answer::Overflow => "overflow".to_owned(),
            Answer::SummaryRefused => "summary_refused".to_owned(),
        };
        shared.state.lock().unwrap().requests.push(ChatRequest {
            path: path.clone(),
            body: value.clone(),
            answered,
        });
        let prompt_tokens = body.len() / 4;
        let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": 12, "total_tokens": prompt_tokens + 12});
        let model = value["model"].clone();
        let (message, finish) = match answer {
            Answer::Overflow => {
                let error = json!({"error": {
                    "message": format!("This model's maximum context length is 128000 tokens. However, your messages resulted in {} tokens. Please reduce the length of the messages.", 128_000 + prompt_tokens),
                    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}});
                respond(
                    &mut out,
                    400,
                    "application/json",
                    error.to_string().as_bytes(),
                )?;
                continue;
            }
            Answer::SummaryRefused => {
                let error = json!({"error": {
                    "message": "this model writes no summaries (scripted)",
                    "type": "invalid_request_error", "code": "scripted_refusal"}});
                respond(
                    &mut out,
                    400,
                    "application/json",
                    error.to_string().as_bytes(),
                )?;
                continue;
            }
            Answer::Tool { name, arguments } => (
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "id": format!("call_{}_{}", name.replace('_', ""), shared.state.lock().unwrap().requests.len()),
                    "type": "function",
                    "function": {"name": name, "arguments": arguments.to_string()}}]}),
                "tool_calls",
            ),
            Answer::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        };
        if value["stream"].as_bool().unwrap_or(false) {
            let mut delta = message.clone();
            if let Some(calls) = delta["tool_calls"].as_array_mut() {
                for (index, call) in calls.iter_mut().enumerate() {
                    call["index"] = json!(index);
                }
            }
            let chunk = json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
            let last = json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage});
            let sse = format!("data: {chunk}\n\ndata: {last}\n\ndata: [DONE]\n\n");
            respond(&mut out, 200, "text/event-stream", sse.as_bytes())?;
        } else {
            let answer = json!({"id": "chatcmpl-scripted", "object": "chat.completion", "created": 1, "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage});
            respond(
                &mut out,
                200,
                "application/json",
                answer.to_string().as_bytes(),
            )?;
        }
    }
}

fn respond(
    out: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        _ => "Not Found",
    };
    write!(
        out,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )?;
    out.write_all(body)?;
    out.flush()
}
