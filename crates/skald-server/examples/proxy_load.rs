//! Load generator for the proxy: an upstream that answers at once, skald in front of it on a
//! database file, and clients in the same process.
//!
//! ```text
//! cargo run --release -p skald-server --example proxy_load -- [--requests 2000] [--concurrency 32] [--soak-seconds 60] [--growing 500]
//!     [--database postgres://…] [--instances 2]
//! ```
//!
//! `--database URL` puts skald's stores in that PostgreSQL database (a schema of its own,
//! dropped at the end) instead of a SQLite file; `--instances N` runs N servers over it (each
//! with its own pool and engine, as separate processes would be), and every client sends its
//! requests round robin across them, so one conversation's calls alternate between servers.
//!
//! 1. **Overhead**: one client, the same 50-message conversation `--requests` times, straight to
//!    the upstream and through skald (steady state: nothing new to store); then a growing
//!    conversation (`--growing` requests, each adding the previous answer and a new question). Percentiles of
//!    the latency and of skald's overhead (through skald minus direct).
//! 2. **Throughput**: `--concurrency` clients, each on its own session, for `--requests` × 2
//!    requests; requests per second, direct and through skald.
//! 3. **Memory**: the throughput load for `--soak-seconds`, the process's RSS every few seconds.

/// The allocator of the `skald` binary, so the figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::response::IntoResponse;
use serde_json::{Value, json};
use skald_core::pipeline::policy::Policy;
use skald_server::{AppState, ServerConfig, Upstream};

struct Args {
    requests: usize,
    concurrency: usize,
    soak_seconds: u64,
    growing: usize,
    database: Option<String>,
    instances: usize,
}

fn args() -> Args {
    let mut parsed = Args {
        requests: 2_000,
        concurrency: 32,
        soak_seconds: 60,
        growing: 500,
        database: None,
        instances: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let text = args.next();
        if flag == "--database" {
            parsed.database = text;
            continue;
        }
        let value = text.and_then(|value| value.parse::<u64>().ok());
        match (flag.as_str(), value) {
            ("--instances", Some(value)) if value >= 1 => parsed.instances = value as usize,
            ("--requests", Some(value)) => parsed.requests = value as usize,
            ("--concurrency", Some(value)) => parsed.concurrency = value as usize,
            ("--soak-seconds", Some(value)) => parsed.soak_seconds = value,
            ("--growing", Some(value)) => parsed.growing = value as usize,
            _ => {
                eprintln!(
                    "usage: proxy_load [--requests N] [--concurrency N] [--soak-seconds N] [--growing N] \
                     [--database postgres://…] [--instances N]"
                );
                std::process::exit(2);
            }
        }
    }
    parsed
}

const ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1770000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"ok","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":3000,"completion_tokens":1,"total_tokens":3001}}"#;

async fn upstream_answer(_body: Bytes) -> impl IntoResponse {
    ([("content-type", "application/json")], ANSWER)
}

/// A 50-message coding conversation: a system prompt, then turns of a question, a tool call,
/// its result (every fifth one a 9,000-character log that skald offloads) and an answer.
fn conversation(session: usize, messages: usize) -> Vec<Value> {
    let mut out = vec![json!({"role": "system", "content": format!(
        "You are a coding agent working in /srv/project-{session}. Be brief and exact.")})];
    let mut turn = 0;
    while out.len() < messages {
        let call = format!("call_{session}_{turn}");
        out.push(json!({"role": "user", "content": format!(
            "Step {turn}: look at src/module_{turn}.rs and tell me what the function parse_{turn} does.")}));
        out.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": call,
            "type": "function", "function": {"name": "bash",
            "arguments": format!("{{\"command\":\"cat src/module_{turn}.rs\"}}")}}]}),
        );
        let result = if turn % 5 == 0 {
            (0..200)
                .map(|line| format!("{line:04}: let value_{line} = parse_{turn}(input, {line});\n"))
                .collect::<String>()
        } else {
            format!(
                "fn parse_{turn}(input: &str) -> Result<Ast, Error> {{ tokenize(input)?.parse() }}"
            )
        };
        out.push(json!({"role": "tool", "tool_call_id": call, "content": result}));
        out.push(json!({"role": "assistant", "content": format!(
            "parse_{turn} tokenizes the input and parses it into an Ast; errors propagate.")}));
        turn += 1;
    }
    out.truncate(messages - 1);
    out.push(json!({"role": "user", "content": "Summarize what you found so far."}));
    out
}

fn body(messages: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "model": "gpt-test",
        "messages": messages,
        "tools": [{"type": "function", "function": {"name": "bash", "description": "Run a command",
                   "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}],
        "temperature": 0
    }))
    .unwrap_or_default()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn report(name: &str, mut samples: Vec<Duration>) -> Vec<Duration> {
    samples.sort();
    println!(
        "{name:<34} n={:<6} p50={:>8.3} ms  p90={:>8.3} ms  p99={:>8.3} ms  max={:>8.3} ms",
        samples.len(),
        percentile(&samples, 0.5).as_secs_f64() * 1e3,
        percentile(&samples, 0.9).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3,
        samples.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
    samples
}

async fn send(client: &reqwest::Client, url: &str, session: &str, body: Vec<u8>) -> Duration {
    let started = Instant::now();
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("authorization", "Bearer sk-provider")
        .header("x-skald-session", session)
        .body(body)
        .send()
        .await;
    match response {
        Ok(response) => {
            let status = response.status();
            let _ = response.bytes().await;
            assert!(status.is_success(), "status {status}");
        }
        Err(error) => panic!("request failed: {error}"),
    }
    started.elapsed()
}

/// CPU seconds the whole process used so far (user + system; clients and upstream included).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command name.
    let ticks = |at: usize| {
        fields
            .get(at)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

/// `clients` tasks sending `total` requests between them (or until `until`); requests per second.
async fn load(
    client: &reqwest::Client,
    urls: &[String],
    clients: usize,
    total: Option<usize>,
    until: Option<Instant>,
    bodies: Arc<Vec<Vec<u8>>>,
    tag: &str,
) -> f64 {
    let sent = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client_index in 0..clients {
        let client = client.clone();
        let urls = urls.to_vec();
        let sent = sent.clone();
        let bodies = bodies.clone();
        let session = format!("{tag}-{client_index}");
        tasks.push(tokio::spawn(async move {
            loop {
                let done = sent.fetch_add(1, Ordering::Relaxed) as usize;
                if total.is_some_and(|total| done >= total)
                    || until.is_some_and(|until| Instant::now() >= until)
                {
                    break;
                }
                let body = bodies[client_index % bodies.len()].clone();
                send(&client, &urls[done % urls.len()], &session, body).await;
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let count = sent.load(Ordering::Relaxed).saturating_sub(clients as u64);
    count as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args();
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let upstream_addr = upstream.local_addr()?;
    tokio::spawn(async move {
        let app = axum::Router::new().fallback(upstream_answer);
        let _ = axum::serve(upstream, app).await;
    });

    let dir = tempfile::tempdir()?;
    let mut config = ServerConfig::new(Policy::preset("skald")?);
    config.openai = Some(Upstream {
        base_url: format!("http://{upstream_addr}/v1"),
        api_key: None,
    });
    let schema = format!("proxy_load_{}", std::process::id());
    let mut proxied_urls = Vec::new();
    let mut servers = Vec::new();
    for _ in 0..args.instances {
        let state = match &args.database {
            Some(url) => {
                let database = skald_store::Database::connect_in_schema(url, &schema)?;
                let stores = skald_engine::Stores::open_postgres(&database)?;
                let keys = Arc::new(skald_store::PgKeyStore::new(database));
                AppState::from_stores(stores, keys, config.clone())?
            }
            None => AppState::open(&dir.path().join("skald.db"), config.clone())?,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        proxied_urls.push(format!(
            "http://{}/v1/chat/completions",
            listener.local_addr()?
        ));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(skald_server::serve(listener, state, async move {
            let _ = stopped.await;
        }));
        servers.push((stop, server));
    }
    println!(
        "store: {}, {} instance(s)",
        args.database
            .as_deref()
            .map_or("SQLite file", |_| "PostgreSQL"),
        args.instances
    );

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()?;
    let direct = format!("http://{upstream_addr}/v1/chat/completions");
    let directs = [direct.clone()];
    let proxied = proxied_urls.clone();
    let fifty = body(&conversation(0, 50));
    println!(
        "conversation: 50 messages, {} bytes; requests per measurement: {}",
        fifty.len(),
        args.requests
    );

    // Warm up both paths (connections, the session's first store, the memo caches).
    for at in 0..50 {
        send(&client, &direct, "warm", fifty.clone()).await;
        send(
            &client,
            &proxied[at % proxied.len()],
            "steady",
            fifty.clone(),
        )
        .await;
    }

    println!("\n== latency, one client ==");
    let mut direct_samples = Vec::with_capacity(args.requests);
    let mut proxied_samples = Vec::with_capacity(args.requests);
    for at in 0..args.requests {
        direct_samples.push(send(&client, &direct, "d", fifty.clone()).await);
        let url = &proxied[at % proxied.len()];
        proxied_samples.push(send(&client, url, "steady", fifty.clone()).await);
    }
    let direct_sorted = report("direct to upstream", direct_samples);
    let proxied_sorted = report("through skald (nothing new)", proxied_samples);
    for p in [0.5, 0.9, 0.99] {
        let overhead = percentile(&proxied_sorted, p).saturating_sub(percentile(&direct_sorted, p));
        println!(
            "overhead p{:<2}                        {:>8.3} ms",
            (p * 100.0) as u32,
            overhead.as_secs_f64() * 1e3
        );
    }

    // A conversation that grows by an answer and a question per request, from 50 messages.
    let mut growing = conversation(1, 50);
    let mut grow_samples = Vec::with_capacity(args.requests);
    let grow_requests = args.growing.max(1);
    for turn in 0..grow_requests {
        let url = &proxied[turn % proxied.len()];
        grow_samples.push(send(&client, url, "growing", body(&growing)).await);
        growing.push(json!({"role": "assistant", "content": "ok"}));
        growing.push(json!({"role": "user", "content": format!("Next: step {turn}?")}));
    }
    let p50_of = |slice: &[Duration]| {
        let mut sorted = slice.to_vec();
        sorted.sort();
        percentile(&sorted, 0.5).as_secs_f64() * 1e3
    };
    let window = grow_samples.len().min(100);
    let (first, last) = (
        p50_of(&grow_samples[..window]),
        p50_of(&grow_samples[grow_samples.len() - window..]),
    );
    report(
        &format!("through skald (growing 50→{})", 50 + 2 * grow_requests),
        grow_samples,
    );
    println!("growing: p50 of the first {window} {first:.3} ms, of the last {window} {last:.3} ms");

    println!("\n== throughput, {} clients ==", args.concurrency);
    let bodies: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..args.concurrency)
            .map(|session| body(&conversation(100 + session, 50)))
            .collect(),
    );
    let total = args.requests * 2;
    let cpu = cpu_seconds();
    let direct_rate = load(
        &client,
        &directs,
        args.concurrency,
        Some(total),
        None,
        bodies.clone(),
        "t",
    )
    .await;
    let direct_cpu = (cpu_seconds() - cpu) / total as f64;
    println!(
        "direct to upstream                 {direct_rate:>8.0} req/s  cpu {:.3} ms/request",
        direct_cpu * 1e3
    );
    // The first request of each session stores its conversation; measure after it.
    load(
        &client,
        &proxied,
        args.concurrency,
        Some(args.concurrency * 2),
        None,
        bodies.clone(),
        "t",
    )
    .await;
    let cpu = cpu_seconds();
    let proxied_rate = load(
        &client,
        &proxied,
        args.concurrency,
        Some(total),
        None,
        bodies.clone(),
        "t",
    )
    .await;
    let proxied_cpu = (cpu_seconds() - cpu) / total as f64;
    println!(
        "through skald                      {proxied_rate:>8.0} req/s  cpu {:.3} ms/request \
         (client, skald and upstream; skald's share {:.3} ms)",
        proxied_cpu * 1e3,
        (proxied_cpu - direct_cpu) * 1e3
    );
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    println!(
        "cpu-bound capacity at {cores} idle cores: {:.0} req/s through skald (load average now: {})",
        cores / proxied_cpu,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );

    println!("\n== memory, {} s of load ==", args.soak_seconds);
    let started = Instant::now();
    let end = started + Duration::from_secs(args.soak_seconds);
    let sampler = tokio::spawn(async move {
        let mut samples = Vec::new();
        while Instant::now() < end {
            samples.push((started.elapsed().as_secs(), rss_kib()));
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        samples.push((started.elapsed().as_secs(), rss_kib()));
        samples
    });
    let rate = load(
        &client,
        &proxied,
        args.concurrency,
        None,
        Some(end),
        bodies,
        "t",
    )
    .await;
    let samples = sampler.await?;
    println!("through skald                      {rate:>8.0} req/s over the soak");
    for (second, kib) in samples {
        println!("  t={second:>4} s  rss={:>7.1} MiB", kib as f64 / 1024.0);
    }
    for (stop, server) in servers {
        let _ = stop.send(());
        let _ = server.await;
    }
    if let Some(url) = &args.database {
        skald_store::Database::drop_schema(url, &schema)?;
    }
    Ok(())
}
