//! What per-turn recall costs the prompt cache, through the Anthropic proxy: an agent's
//! conversation of user turns, each a tool loop, against skald with memory on, and an upstream
//! that bills every request as Anthropic's prompt cache would — the longest common prefix with
//! the previous request (tools, system, then message by message) is read from the cache, the
//! rest written to it.
//!
//! ```text
//! cargo run --release -p skald-server --example recall_cache -- [--policy skald] [--turns 20] [--calls 6] [--host-prefix-tokens 20000] [--output-chars 4000]
//! ```
//!
//! It runs the same conversation twice, each on a fresh server: with earlier turns' recalls
//! kept where they were injected (`max_kept_tokens` = 8,000, the default), and with each
//! turn's recall sent with its own calls only (`max_kept_tokens` = 0, as before skald kept
//! them). Every user turn asks about one of the facts remembered beforehand, so recall injects
//! on every turn.
//!
//! What it leaves out: the conversation, its tool outputs and its facts are synthetic; the
//! cache is modelled as a prefix of whole messages (Anthropic's own matches at its
//! breakpoints, and expires after 5 minutes, which a run this fast never reaches); the host's
//! prefix is one system prompt of `--host-prefix-tokens`; tokens are characters / 4.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use skald_core::pipeline::policy::Policy;
use skald_server::{AppState, ServerConfig, Upstream};

/// The allocator of the `skald` binary, so the run is the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Anthropic's prices for a Sonnet-class model, dollars per million tokens.
const INPUT_PRICE: f64 = 3.0;
const CACHE_WRITE_PRICE: f64 = 3.75;
const CACHE_READ_PRICE: f64 = 0.30;
const OUTPUT_PRICE: f64 = 15.0;

/// Tokens of each answer the scripted model gives.
const OUTPUT_TOKENS: u64 = 60;

struct Args {
    policy: String,
    turns: usize,
    calls: usize,
    host_prefix_tokens: usize,
    output_chars: usize,
}

fn args() -> Result<Args, String> {
    let mut parsed = Args {
        policy: "skald".to_owned(),
        turns: 20,
        calls: 6,
        host_prefix_tokens: 20_000,
        output_chars: 4_000,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        if flag == "--policy" {
            parsed.policy = value;
            continue;
        }
        let number: usize = value
            .parse()
            .map_err(|_| format!("{flag}: expected a number, found {value:?}"))?;
        match flag.as_str() {
            "--turns" => parsed.turns = number.max(1),
            "--calls" => parsed.calls = number.max(1),
            "--host-prefix-tokens" => parsed.host_prefix_tokens = number,
            "--output-chars" => parsed.output_chars = number,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(parsed)
}

/// What the simulated provider billed, and the next answer it gives.
#[derive(Default)]
struct Billing {
    previous: Vec<String>,
    input: u64,
    cache_write: u64,
    cache_read: u64,
    output: u64,
    calls: u64,
    /// Calls whose request did not start with the whole previous request.
    prefix_breaks: u64,
    next_answers: std::collections::VecDeque<Value>,
}

type Shared = Arc<Mutex<Billing>>;

fn tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// The request as the cache sees it: tools, system, then each message.
fn prefix_elements(body: &Value) -> Vec<String> {
    let mut elements = vec![body["tools"].to_string(), body["system"].to_string()];
    if let Some(messages) = body["messages"].as_array() {
        elements.extend(messages.iter().map(Value::to_string));
    }
    elements
}

async fn upstream(State(shared): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let Ok(mut billing) = shared.lock() else {
        return Json(
            json!({"type": "error", "error": {"type": "api_error", "message": "poisoned"}}),
        );
    };
    let elements = prefix_elements(&body);
    let common = elements
        .iter()
        .zip(&billing.previous)
        .take_while(|(now, before)| now == before)
        .count();
    if common < billing.previous.len() {
        billing.prefix_breaks += 1;
    }
    let read: u64 = elements[..common].iter().map(|e| tokens(e)).sum();
    let written: u64 = elements[common..].iter().map(|e| tokens(e)).sum();
    billing.cache_read += read;
    billing.cache_write += written;
    billing.input += read + written;
    billing.output += OUTPUT_TOKENS;
    billing.calls += 1;
    billing.previous = elements;
    let mut answer = billing.next_answers.pop_front().unwrap_or_else(
        || json!({"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}),
    );
    answer["id"] = json!(format!("msg_{}", billing.calls));
    answer["type"] = json!("message");
    answer["role"] = json!("assistant");
    answer["model"] = json!("claude-sim");
    answer["stop_sequence"] = Value::Null;
    answer["usage"] = json!({"input_tokens": 0, "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read, "output_tokens": OUTPUT_TOKENS});
    Json(answer)
}

/// The facts remembered before the conversation, and the question of each turn about one.
fn fact(turn: usize) -> (String, String) {
    let services = [
        "billing",
        "gateway",
        "search",
        "ingest",
        "scheduler",
        "mailer",
        "ledger",
        "catalog",
        "payments",
        "reports",
    ];
    let service = services[turn % services.len()];
    let n = turn / services.len();
    (
        format!(
            "The {service} service shard {n} runs on host {service}-{n}.internal port {} and its \
             owner is team-{service}-{n}; deploys of {service} shard {n} go through the \
             {service}-{n}-release pipeline.",
            8000 + turn
        ),
        format!(
            "Fix the failing {service} shard {n} deploy: which host and port does the \
             {service} service shard {n} run on, and who owns it?"
        ),
    )
}

/// A tool output of about `chars` characters.
fn tool_output(turn: usize, call: usize, chars: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    while out.len() < chars {
        out.push_str(&format!(
            "{turn:03}.{call:02}.{line:04} INFO checked module_{line}.rs of step {call}: ok\n"
        ));
        line += 1;
    }
    out
}

struct Outcome {
    billing: Billing,
    recalls_kept: u64,
}

async fn run(args: &Args, max_kept_tokens: u64) -> Result<Outcome, Box<dyn std::error::Error>> {
    let shared: Shared = Arc::new(Mutex::new(Billing::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let upstream_addr = listener.local_addr()?;
    let app = axum::Router::new()
        .fallback(axum::routing::post(upstream))
        .with_state(shared.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let dir = tempfile::tempdir()?;
    let mut config = ServerConfig::new(Policy::preset(&args.policy)?);
    config.anthropic = Some(Upstream {
        base_url: format!("http://{upstream_addr}"),
        api_key: None,
    });
    config.engine.memory.recall.max_kept_tokens = max_kept_tokens;
    let state = AppState::open(&dir.path().join("skald.db"), config)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(skald_server::serve(listener, state, async move {
        let _ = stopped.await;
    }));

    let client = reqwest::Client::new();
    for turn in 0..args.turns {
        let (content, _) = fact(turn);
        let response = client
            .post(format!("{base}/v1/memory/remember"))
            .json(&json!({"content": content, "type": "entities"}))
            .send()
            .await?;
        if !response.status().is_success() {
            return Err(format!("remember: {}", response.text().await?).into());
        }
    }

    let system = "You are a coding agent. Follow the repository's conventions.\n"
        .repeat(args.host_prefix_tokens * 4 / 61 + 1);
    let tools = json!([{"name": "bash", "description": "Run a shell command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]);
    let mut messages: Vec<Value> = Vec::new();
    let mut recalls_kept = 0;
    let progress = indicatif::ProgressBar::new((args.turns * args.calls) as u64);
    for turn in 0..args.turns {
        let (_, question) = fact(turn);
        messages.push(json!({"role": "user", "content": question}));
        for call in 0..args.calls {
            let last = call + 1 == args.calls;
            let id = format!("toolu_{turn}_{call}");
            let answer = if last {
                json!({"content": [{"type": "text", "text": format!("Turn {turn} is fixed.")}],
                       "stop_reason": "end_turn"})
            } else {
                json!({"content": [{"type": "tool_use", "id": id, "name": "bash",
                        "input": {"command": format!("make check STEP={call}")}}],
                       "stop_reason": "tool_use"})
            };
            shared
                .lock()
                .map_err(|_| "poisoned")?
                .next_answers
                .push_back(answer);
            let body = json!({"model": "claude-sim", "max_tokens": 1024, "system": system,
                              "tools": tools, "messages": messages});
            let response = client
                .post(format!("{base}/v1/messages"))
                .header("x-skald-session", "recall-cache")
                .header("x-api-key", "sk-ant-sim")
                .json(&body)
                .send()
                .await?;
            let status = response.status();
            let reply: Value = response.json().await?;
            if !status.is_success() {
                return Err(format!("turn {turn} call {call}: {status} {reply}").into());
            }
            messages.push(json!({"role": "assistant", "content": reply["content"]}));
            if !last {
                messages.push(json!({"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": id, "content": tool_output(turn, call, args.output_chars)}]}));
            }
            progress.inc(1);
        }
    }
    progress.finish_and_clear();
    let context = client
        .get(format!(
            "{base}/v1/sessions/recall-cache/context?memory=true"
        ))
        .send()
        .await?
        .json::<Value>()
        .await?;
    if let Some(kept) = context["memory"]["keptRecalls"]["kept"].as_u64() {
        recalls_kept = kept;
    }
    let _ = stop.send(());
    let _ = server.await;
    let billing = std::mem::take(&mut *shared.lock().map_err(|_| "poisoned")?);
    Ok(Outcome {
        billing,
        recalls_kept,
    })
}

fn cost(billing: &Billing) -> f64 {
    (billing.cache_write as f64 * CACHE_WRITE_PRICE
        + billing.cache_read as f64 * CACHE_READ_PRICE
        + (billing.input - billing.cache_write - billing.cache_read) as f64 * INPUT_PRICE
        + billing.output as f64 * OUTPUT_PRICE)
        / 1e6
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args()?;
    println!(
        "policy {}, {} user turns of {} calls each, host prefix {} tokens, tool outputs {} chars; \
         Anthropic prices ($/M: input {INPUT_PRICE}, cache write {CACHE_WRITE_PRICE}, cache read {CACHE_READ_PRICE}, output {OUTPUT_PRICE})",
        args.policy, args.turns, args.calls, args.host_prefix_tokens, args.output_chars
    );
    println!(
        "{:<34} {:>6} {:>13} {:>12} {:>13} {:>9} {:>11}",
        "recall", "calls", "cache write", "cache read", "prefix breaks", "cost $", "kept at end"
    );
    for (name, max_kept) in [
        ("each turn's, its own calls only", 0),
        ("kept where injected (default)", 8_000),
    ] {
        let outcome = run(&args, max_kept).await?;
        let billing = &outcome.billing;
        println!(
            "{:<34} {:>6} {:>13} {:>12} {:>13} {:>9.4} {:>11}",
            name,
            billing.calls,
            billing.cache_write,
            billing.cache_read,
            billing.prefix_breaks,
            cost(billing),
            outcome.recalls_kept
        );
    }
    Ok(())
}
