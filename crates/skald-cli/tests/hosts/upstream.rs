//! The scripted model behind the real-host tests: a plain-`std` HTTP/1.1 server on an ephemeral
//! loopback port that answers Anthropic Messages (`POST /v1/messages`) and OpenAI Responses
//! (`POST /v1/responses`), streamed (SSE) or as JSON, like a model following a fixed script.
//!
//! The script is driven by the request, never by a call counter: the next step is the number of
//! the host's own tool results already in the request (skald's hidden `fetch_original_data`
//! round is not counted), so retries and skald's continuation calls stay deterministic. At the
//! script's `fetch_at` step, when the request offers `fetch_original_data` and carries a
//! `[REF_ID: …]` placeholder, the model calls `fetch_original_data` once per upstream.
//!
//! It simulates prompt caching and reports usage like the real providers, so a run's cost can be
//! read from its log. Tokens are counted as characters / 4 of a canonical serialization
//! (`cache_control` removed, a string `content` written as one text block):
//! - Anthropic: the cacheable prefix is tools, then system blocks, then message blocks; every
//!   block with `cache_control` is a breakpoint. The longest prefix written by an earlier
//!   request within 5 minutes and ending at a breakpoint or up to 20 blocks before one is read (`cache_read_input_tokens`, TTL refreshed), the
//!   rest up to the last breakpoint is written (`cache_creation_input_tokens`), the tail after
//!   the last breakpoint is `input_tokens`.
//! - OpenAI Responses: automatic prefix caching. The longest common prefix with any earlier
//!   request (tools, `instructions`, then `input` items) counts as cached in whole 128-token
//!   blocks once the request and the prefix are at least 1024 tokens
//!   (`usage.input_tokens_details.cached_tokens`, out of `input_tokens`).
//!
//! Besides: `HEAD /` → 200, `POST …/count_tokens` → `{input_tokens}`, `GET …/models` → empty
//! list, a WebSocket upgrade on `GET /v1/responses` → 426 (Codex 0.169 then falls back to POST
//! at once; a 404 costs it three tries, a 400 fails the turn). Every request is recorded with its
//! arrival time and computed usage.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Anthropic's cache lifetime (the default `ephemeral` TTL).
const ANTHROPIC_TTL: Duration = Duration::from_secs(300);
/// OpenAI keeps prefixes for 5–10 minutes; the simulation uses 5.
const OPENAI_TTL: Duration = Duration::from_secs(300);
/// How many blocks before a breakpoint Anthropic looks for an earlier cache write.
const LOOKBACK: usize = 20;
/// Characters per simulated token.
const CHARS_PER_TOKEN: usize = 4;
/// The scripted large output: `seq 1 4000` prints 18,893 characters, above skald's offload
/// threshold (a few thousand) and below Claude Code's own `<persisted-output>` cut (30,000
/// characters in 2.1.332) and Codex's default `exec_command` truncation (it is asked for
/// `max_output_tokens: 10000`).
pub const LARGE_COMMAND: &str = "seq 1 4000";
/// The id prefix of the scripted `fetch_original_data` call.
pub const FETCH_ID: &str = "fetch_call";
/// The id prefix of the scripted `ToolSearch` call that loads a deferred fetch tool (Claude
/// Code 2.1.332 defers MCP tools behind `ToolSearch`).
pub const TOOL_SEARCH_ID: &str = "toolsearch_call";
/// The final answer starts with this.
pub const FINAL_TEXT: &str = "All done:";

/// Numbers the answers: Claude Code merges streamed messages that share an id into one
/// assistant turn, so every answer needs its own.
static ANSWERS: AtomicUsize = AtomicUsize::new(0);

fn answer_id(prefix: &str) -> String {
    format!("{prefix}_{:06}", ANSWERS.fetch_add(1, Ordering::SeqCst))
}

/// Which API a request spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Anthropic,
    Responses,
    Other,
}

/// One request the upstream got.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Since the upstream started.
    pub at: Duration,
    pub method: String,
    /// Path with its query.
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Null` when there was none or it was not JSON).
    pub body: Value,
    pub body_len: usize,
    pub api: Api,
    /// The simulated usage reported to the caller (model calls only).
    pub usage: Option<Value>,
    /// What the script answered (`tool Bash`, `fetch`, `text`, …).
    pub answer: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// A model call of the host's agent loop (it offers tools); not a side call.
    pub fn is_model_call(&self) -> bool {
        self.method == "POST"
            && self.api != Api::Other
            && !self.path.contains("count_tokens")
            && self.body["tools"].as_array().is_some_and(|t| !t.is_empty())
    }

    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|tool| tool.get("name").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// One line for failure output.
    pub fn summary(&self) -> String {
        format!(
            "{:>8.3}s {} {} {}B tools={} items={} -> {}",
            self.at.as_secs_f64(),
            self.method,
            self.path,
            self.body_len,
            self.tool_names().len(),
            items(&self.body).len(),
            self.answer
        )
    }
}

/// The messages (Anthropic) or input items (Responses) of a request.
pub fn items(body: &Value) -> Vec<Value> {
    body.get("messages")
        .or_else(|| body.get("input"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// One scripted step of the agent loop.
#[derive(Debug, Clone)]
pub enum Step {
    /// The large shell output.
    Large,
    /// A small shell command.
    Echo(String),
    /// Read a file (Claude Code's `Read`; `cat` for Codex).
    Read(String),
}

/// The model's script: the steps, then a text answer.
#[derive(Debug, Clone)]
pub struct Script {
    pub steps: Vec<Step>,
    /// At this step (number of host tool results in the request) call `fetch_original_data`
    /// once, if the request offers it and carries a ref.
    pub fetch_at: Option<usize>,
}

impl Script {
    /// A large output, then `small` small steps (echo and read alternating), then the answer.
    pub fn new(read_file: &str, small: usize) -> Self {
        let mut steps = vec![Step::Large];
        for k in 1..=small {
            if k % 2 == 0 {
                steps.push(Step::Read(read_file.to_owned()));
            } else {
                steps.push(Step::Echo(format!("echo step-{k}-ok")));
            }
        }
        Self {
            steps,
            fetch_at: Some(2.min(small)),
        }
    }

    /// Model calls the host makes for this script, without skald's hidden ones.
    pub fn host_calls(&self) -> usize {
        self.steps.len() + 1
    }
}

#[derive(Default)]
struct State {
    requests: Vec<Recorded>,
    /// Anthropic: prefix hash → (tokens, expiry).
    anthropic_cache: HashMap<u64, (usize, Instant)>,
    /// Responses: earlier serialized prompts with their expiry.
    openai_prompts: Vec<(String, Instant)>,
    fetched: bool,
}

struct Shared {
    script: Script,
    state: Mutex<State>,
    started: Instant,
    stop: AtomicBool,
}

/// The running upstream; dropping it stops it.
pub struct Upstream {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Upstream {
    pub fn start(script: Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the scripted upstream");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            script,
            state: Mutex::new(State::default()),
            started: Instant::now(),
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

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.state.lock().unwrap().requests.clone()
    }

    /// The host's model calls (side calls, `count_tokens`, probes left out).
    pub fn model_calls(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(Recorded::is_model_call)
            .collect()
    }

    /// Every recorded request, one line each (for failure messages).
    pub fn dump(&self) -> String {
        let lines: Vec<String> = self.requests().iter().map(Recorded::summary).collect();
        format!(
            "upstream saw {} requests:\n{}",
            lines.len(),
            lines.join("\n")
        )
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------------

fn serve(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    for _ in 0..200 {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.clone())
    };
    let mut body = Vec::new();
    if let Some(length) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        for _ in 0..1_000_000 {
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
    let mut out = stream;
    // Compressed bodies are not decoded (no host sends them today): answer 415 so it shows.
    if let Some(encoding) = get("content-encoding") {
        record(
            shared,
            &method,
            &path,
            &headers,
            Value::Null,
            body.len(),
            None,
            "415",
        );
        return respond_json(
            &mut out,
            415,
            &json!({"error": {"message": format!("scripted upstream cannot decode {encoding}")}}),
        );
    }
    let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let route = path.split('?').next().unwrap_or_default().to_owned();
    if method == "HEAD" {
        record(
            shared,
            &method,
            &path,
            &headers,
            value,
            body.len(),
            None,
            "200",
        );
        return out.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    }
    if method == "GET" {
        if get("upgrade").is_some() {
            record(shared, &method, &path, &headers, value, 0, None, "426");
            return out.write_all(
                b"HTTP/1.1 426 Upgrade Required\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
        record(shared, &method, &path, &headers, value, 0, None, "models");
        if route.ends_with("/models") {
            return respond_json(&mut out, 200, &json!({"object": "list", "data": []}));
        }
        return respond_json(&mut out, 404, &json!({"error": {"message": "no route"}}));
    }
    if route.ends_with("/count_tokens") {
        let tokens = body.len() / CHARS_PER_TOKEN;
        record(
            shared,
            &method,
            &path,
            &headers,
            value,
            body.len(),
            None,
            "count",
        );
        return respond_json(&mut out, 200, &json!({"input_tokens": tokens}));
    }
    let api = if route.ends_with("/v1/messages") {
        Api::Anthropic
    } else if route.ends_with("/responses") {
        Api::Responses
    } else {
        record(
            shared,
            &method,
            &path,
            &headers,
            value,
            body.len(),
            None,
            "404",
        );
        return respond_json(&mut out, 404, &json!({"error": {"message": "no route"}}));
    };
    let (answer, label) = decide(shared, api, &value);
    let usage = {
        let mut state = shared.state.lock().unwrap();
        match api {
            Api::Anthropic => anthropic_usage(&mut state, &value),
            Api::Responses | Api::Other => openai_usage(&mut state, &value),
        }
    };
    let stream_wanted = value["stream"].as_bool().unwrap_or(false);
    record_full(
        shared,
        &method,
        &path,
        &headers,
        value.clone(),
        body.len(),
        api,
        Some(usage.clone()),
        &label,
    );
    match (api, stream_wanted) {
        (Api::Anthropic, false) => respond_json(&mut out, 200, &anthropic_json(&answer, &usage)),
        (Api::Anthropic, true) => respond_sse(&mut out, &anthropic_sse(&answer, &usage)),
        (_, false) => respond_json(
            &mut out,
            200,
            &responses_json(&responses_item(&answer), &answer_id("resp"), &usage, &value),
        ),
        (_, true) => respond_sse(&mut out, &responses_sse(&answer, &usage, &value)),
    }
}

#[allow(clippy::too_many_arguments)]
fn record(
    shared: &Shared,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: Value,
    body_len: usize,
    usage: Option<Value>,
    answer: &str,
) {
    record_full(
        shared,
        method,
        path,
        headers,
        body,
        body_len,
        Api::Other,
        usage,
        answer,
    );
}

#[allow(clippy::too_many_arguments)]
fn record_full(
    shared: &Shared,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: Value,
    body_len: usize,
    api: Api,
    usage: Option<Value>,
    answer: &str,
) {
    let entry = Recorded {
        at: shared.started.elapsed(),
        method: method.to_owned(),
        path: path.to_owned(),
        headers: headers.to_vec(),
        body,
        body_len,
        api,
        usage,
        answer: answer.to_owned(),
    };
    shared.state.lock().unwrap().requests.push(entry);
}

fn respond_json(out: &mut TcpStream, status: u16, body: &Value) -> std::io::Result<()> {
    let text = body.to_string();
    write!(
        out,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    )?;
    out.flush()
}

fn respond_sse(out: &mut TcpStream, events: &[(String, Value)]) -> std::io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
    )?;
    for (name, data) in events {
        write!(out, "event: {name}\ndata: {data}\n\n")?;
        out.flush()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The script
// ---------------------------------------------------------------------------------------------

/// What the model answers.
#[derive(Debug, Clone)]
enum Answer {
    Text(String),
    /// id, name, arguments
    Tool(String, String, Value),
}

/// The ids of the tool calls whose results a request carries (both APIs).
fn result_ids(body: &Value) -> Vec<String> {
    let mut ids = Vec::new();
    for item in items(body) {
        if item["type"] == "function_call_output" {
            ids.push(item["call_id"].as_str().unwrap_or_default().to_owned());
        }
        if let Some(blocks) = item["content"].as_array() {
            for block in blocks {
                if block["type"] == "tool_result" {
                    ids.push(block["tool_use_id"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
    }
    ids
}

fn decide(shared: &Shared, api: Api, body: &Value) -> (Answer, String) {
    let names: Vec<String> = body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        // A side call (title, summary, …).
        return (Answer::Text("ok".to_owned()), "side text".to_owned());
    }
    let ids = result_ids(body);
    let fetched_here = ids.iter().any(|id| id.starts_with(FETCH_ID));
    let searched_here = ids.iter().any(|id| id.starts_with(TOOL_SEARCH_ID));
    let step = ids
        .iter()
        .filter(|id| !id.starts_with(FETCH_ID) && !id.starts_with(TOOL_SEARCH_ID))
        .count();
    let script = &shared.script;
    // A deferred MCP fetch tool (named in the request, not offered yet) is loaded first, as a
    // model does: `ToolSearch` with `select:<name>`.
    let text = body.to_string();
    let deferred_fetch = deferred_mcp_fetch(&text);
    if let Some(deferred_fetch) = deferred_fetch.filter(|_| {
        script.fetch_at == Some(step)
            && !fetched_here
            && !searched_here
            && names.iter().any(|n| n == "ToolSearch")
            && !names.iter().any(|n| n.ends_with("fetch_original_data"))
            && first_ref_id(body).is_some()
    }) {
        return (
            Answer::Tool(
                format!("{TOOL_SEARCH_ID}_{step}"),
                "ToolSearch".to_owned(),
                json!({"query": format!("select:{deferred_fetch}"), "max_results": 1}),
            ),
            "tool search".to_owned(),
        );
    }
    // skald's fetch tool under whatever name the host offers it: `fetch_original_data` from
    // skald's proxy, `mcp__skald__fetch_original_data` from Claude Code's MCP client.
    let fetch_tool = names.iter().find(|n| n.ends_with("fetch_original_data"));
    let ref_id = match fetch_tool {
        Some(_) if script.fetch_at == Some(step) && !fetched_here => first_ref_id(body),
        Some(_) | None => None,
    };
    if let (Some(id), Some(fetch_tool)) = (ref_id, fetch_tool) {
        let mut state = shared.state.lock().unwrap();
        if !state.fetched {
            state.fetched = true;
            return (
                Answer::Tool(
                    format!("{FETCH_ID}_{step}"),
                    fetch_tool.clone(),
                    json!({"ref_ids": [id], "grep": "^3999$", "context": 1}),
                ),
                "fetch".to_owned(),
            );
        }
    }
    let id = match api {
        Api::Anthropic => format!("toolu_step_{step}"),
        Api::Responses | Api::Other => format!("call_step_{step}"),
    };
    let Some(current) = script.steps.get(step) else {
        return (
            Answer::Text(format!(
                "{FINAL_TEXT} the script ran {step} tool steps. Final answer."
            )),
            format!("step {step}: text"),
        );
    };
    let shell = |command: &str| match api {
        Api::Anthropic => (
            "Bash".to_owned(),
            json!({"command": command, "description": format!("scripted step {step}")}),
        ),
        Api::Responses | Api::Other => (
            "exec_command".to_owned(),
            json!({"cmd": command, "max_output_tokens": 10000}),
        ),
    };
    let (name, args) = match current {
        Step::Large => shell(LARGE_COMMAND),
        Step::Echo(command) => shell(command),
        Step::Read(path) => match api {
            Api::Anthropic => ("Read".to_owned(), json!({"file_path": path})),
            Api::Responses | Api::Other => shell(&format!("cat {path}")),
        },
    };
    let label = format!("step {step}: {name}");
    (Answer::Tool(id, name, args), label)
}

/// The name of an MCP server's `fetch_original_data` a request lists as deferred
/// (`mcp__plugin_skald_skald__fetch_original_data` from skald's Claude Code plugin).
fn deferred_mcp_fetch(text: &str) -> Option<&str> {
    let end = text.find("__fetch_original_data")? + "__fetch_original_data".len();
    let start = text[..end].rfind("mcp__")?;
    let name = &text[start..end];
    name.bytes()
        .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
        .then_some(name)
}

/// The first `[REF_ID: <64 hex>]` id in a request body.
pub fn first_ref_id(body: &Value) -> Option<String> {
    let text = body.to_string();
    text.match_indices("[REF_ID: ").find_map(|(at, marker)| {
        let id = text.get(at + marker.len()..at + marker.len() + 64)?;
        id.bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
            .then(|| id.to_owned())
    })
}

// ---------------------------------------------------------------------------------------------
// Prompt-cache simulation
// ---------------------------------------------------------------------------------------------

/// A block without `cache_control`.
fn strip_cache_control(value: &Value) -> Value {
    let mut value = value.clone();
    if let Some(object) = value.as_object_mut() {
        object.remove("cache_control");
    }
    value
}

/// The cacheable segments of an Anthropic request in cache order (tools, system, messages),
/// each with whether it is a breakpoint.
pub fn anthropic_segments(body: &Value) -> Vec<(String, bool)> {
    let mut segments = Vec::new();
    let marked = |block: &Value| block.get("cache_control").is_some_and(|c| !c.is_null());
    for tool in body["tools"].as_array().into_iter().flatten() {
        segments.push((strip_cache_control(tool).to_string(), marked(tool)));
    }
    match &body["system"] {
        Value::String(text) => {
            segments.push((json!({"type": "text", "text": text}).to_string(), false))
        }
        Value::Array(blocks) => {
            for block in blocks {
                segments.push((strip_cache_control(block).to_string(), marked(block)));
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => {}
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or_default();
        match &message["content"] {
            Value::String(text) => segments.push((
                format!("{role}:{}", json!({"type": "text", "text": text})),
                false,
            )),
            Value::Array(blocks) => {
                for block in blocks {
                    segments.push((
                        format!("{role}:{}", strip_cache_control(block)),
                        marked(block),
                    ));
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => {}
        }
    }
    segments
}

fn anthropic_usage(state: &mut State, body: &Value) -> Value {
    let now = Instant::now();
    state.anthropic_cache.retain(|_, (_, expiry)| *expiry > now);
    let segments = anthropic_segments(body);
    let mut hasher = DefaultHasher::new();
    let mut chars = 0;
    // (prefix hash, prefix tokens) after every segment.
    let mut prefixes = Vec::new();
    for (text, _) in &segments {
        text.hash(&mut hasher);
        chars += text.len();
        prefixes.push((hasher.finish(), chars / CHARS_PER_TOKEN));
    }
    let breakpoints: Vec<usize> = segments
        .iter()
        .enumerate()
        .filter(|(_, (_, marked))| *marked)
        .map(|(index, _)| index)
        .collect();
    let total = chars / CHARS_PER_TOKEN;
    // Like the API: at each breakpoint, look back up to 20 blocks for a prefix written earlier.
    let read = breakpoints
        .iter()
        .flat_map(|&at| (at.saturating_sub(LOOKBACK)..=at).rev())
        .filter(|&index| state.anthropic_cache.contains_key(&prefixes[index].0))
        .map(|index| prefixes[index].1)
        .max()
        .unwrap_or(0);
    let last = breakpoints.last().map_or(0, |&at| prefixes[at].1);
    for &at in &breakpoints {
        let (hash, tokens) = prefixes[at];
        state
            .anthropic_cache
            .insert(hash, (tokens, now + ANTHROPIC_TTL));
    }
    for (hash, _) in &prefixes {
        // A hit refreshes the entry's TTL.
        if let Some(entry) = state.anthropic_cache.get_mut(hash) {
            entry.1 = now + ANTHROPIC_TTL;
        }
    }
    json!({
        "input_tokens": total - last.max(read),
        "cache_creation_input_tokens": last.saturating_sub(read),
        "cache_read_input_tokens": read,
        "output_tokens": 20,
    })
}

/// The prompt of a Responses request as the cache sees it (tools, instructions, input).
pub fn openai_prompt(body: &Value) -> String {
    let mut prompt = String::new();
    prompt.push_str(&body["tools"].to_string());
    prompt.push_str(&body["instructions"].to_string());
    for item in items(body) {
        prompt.push_str(&item.to_string());
    }
    prompt
}

fn openai_usage(state: &mut State, body: &Value) -> Value {
    let now = Instant::now();
    state.openai_prompts.retain(|(_, expiry)| *expiry > now);
    let prompt = openai_prompt(body);
    let total = prompt.len() / CHARS_PER_TOKEN;
    let common = state
        .openai_prompts
        .iter()
        .map(|(earlier, _)| common_prefix(earlier, &prompt))
        .max()
        .unwrap_or(0)
        / CHARS_PER_TOKEN;
    let cached = if total >= 1024 && common >= 1024 {
        common / 128 * 128
    } else {
        0
    };
    state.openai_prompts.push((prompt, now + OPENAI_TTL));
    json!({
        "input_tokens": total,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": total + 20,
    })
}

/// The length in bytes of the common prefix of two strings.
pub fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

// ---------------------------------------------------------------------------------------------
// Wire formats
// ---------------------------------------------------------------------------------------------

fn anthropic_json(answer: &Answer, usage: &Value) -> Value {
    let (content, stop) = match answer {
        Answer::Text(text) => (json!([{"type": "text", "text": text}]), "end_turn"),
        Answer::Tool(id, name, input) => (
            json!([{"type": "tool_use", "id": id, "name": name, "input": input}]),
            "tool_use",
        ),
    };
    json!({"id": answer_id("msg"), "type": "message", "role": "assistant", "model": "scripted",
           "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage})
}

fn anthropic_sse(answer: &Answer, usage: &Value) -> Vec<(String, Value)> {
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(1);
    let mut events = vec![(
        "message_start".to_owned(),
        json!({"type": "message_start", "message": {"id": answer_id("msg"), "type": "message",
               "role": "assistant", "model": "scripted", "content": [], "stop_reason": null,
               "stop_sequence": null, "usage": start_usage}}),
    )];
    let (block, delta, stop) = match answer {
        Answer::Text(text) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": text}),
            "end_turn",
        ),
        Answer::Tool(id, name, input) => (
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        ),
    };
    events.push((
        "content_block_start".to_owned(),
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
    ));
    events.push((
        "content_block_delta".to_owned(),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
    ));
    events.push((
        "content_block_stop".to_owned(),
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        "message_delta".to_owned(),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": usage["output_tokens"]}}),
    ));
    events.push(("message_stop".to_owned(), json!({"type": "message_stop"})));
    events
}

fn responses_item(answer: &Answer) -> Value {
    match answer {
        Answer::Text(text) => {
            json!({"type": "message", "id": answer_id("msg"), "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]})
        }
        Answer::Tool(id, name, args) => json!({"type": "function_call", "id": format!("fc_{id}"),
            "call_id": id, "name": name, "arguments": args.to_string(), "status": "completed"}),
    }
}

fn responses_json(item: &Value, id: &str, usage: &Value, body: &Value) -> Value {
    json!({"id": id, "object": "response", "created_at": 0, "status": "completed",
           "model": body["model"], "output": [item], "usage": usage})
}

fn responses_sse(answer: &Answer, usage: &Value, body: &Value) -> Vec<(String, Value)> {
    let done = responses_item(answer);
    let id = answer_id("resp");
    let mut events: Vec<(String, Value)> = Vec::new();
    let mut push = |name: &str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(events.len());
        events.push((name.to_owned(), data));
    };
    let mut created = responses_json(&done, &id, usage, body);
    created["status"] = json!("in_progress");
    created["output"] = json!([]);
    created["usage"] = Value::Null;
    push("response.created", json!({"response": created}));
    let item_id = done["id"].clone();
    match answer {
        Answer::Tool(_, _, args) => {
            let mut added = done.clone();
            added["arguments"] = json!("");
            added["status"] = json!("in_progress");
            push(
                "response.output_item.added",
                json!({"output_index": 0, "item": added}),
            );
            push(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": 0, "delta": args.to_string()}),
            );
            push(
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": 0, "arguments": args.to_string()}),
            );
        }
        Answer::Text(text) => {
            let mut added = done.clone();
            added["content"] = json!([]);
            added["status"] = json!("in_progress");
            push(
                "response.output_item.added",
                json!({"output_index": 0, "item": added}),
            );
            push(
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": []}}),
            );
            push(
                "response.output_text.delta",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0, "delta": text}),
            );
            push(
                "response.output_text.done",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0, "text": text}),
            );
            push(
                "response.content_part.done",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                       "part": done["content"][0]}),
            );
        }
    }
    push(
        "response.output_item.done",
        json!({"output_index": 0, "item": done}),
    );
    push(
        "response.completed",
        json!({"response": responses_json(&done, &id, usage, body)}),
    );
    events
}
