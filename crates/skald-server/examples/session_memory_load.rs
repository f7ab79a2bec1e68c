//! Load generator for the memory bound: many sessions through the OpenAI proxy, each a
//! conversation that grows by a large tool output per request, against a skald server in the
//! same process whose session cache is capped at `--cap-mib`; reports the process's peak RSS
//! (VmHWM) against the cap, with the engine's own gauge of its cached sessions.
//!
//! ```text
//! cargo run --release -p skald-server --example session_memory_load -- [--cap-mib 64] [--sessions 100] [--outputs 50] [--output-kib 16] [--ref-cache-mib N] [--clients 4]
//! ```
//!
//! `--ref-cache-mib` sets the ref store's payload cache (default: the store's default). The
//! upstream answers at once; the clients (`--clients` sessions at a time) and the upstream share the process,
//! so the peak includes them — the RSS before skald serves anything (the tokenizer tables loaded)
//! is printed as the baseline.

/// The allocator of the `skald` binary, so the figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;

use axum::body::Bytes;
use axum::response::IntoResponse;
use serde_json::{Value, json};
use skald_core::pipeline::policy::Policy;
use skald_server::{AppState, ServerConfig, Upstream};

struct Args {
    cap_mib: usize,
    sessions: usize,
    outputs: usize,
    output_kib: usize,
    ref_cache_mib: Option<usize>,
    clients: usize,
}

fn args() -> Args {
    let mut parsed = Args {
        cap_mib: 64,
        sessions: 100,
        outputs: 50,
        output_kib: 16,
        ref_cache_mib: None,
        clients: 4,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().and_then(|value| value.parse::<usize>().ok());
        match (flag.as_str(), value) {
            ("--cap-mib", Some(value)) if value > 0 => parsed.cap_mib = value,
            ("--sessions", Some(value)) => parsed.sessions = value,
            ("--outputs", Some(value)) => parsed.outputs = value,
            ("--output-kib", Some(value)) => parsed.output_kib = value,
            ("--ref-cache-mib", Some(value)) => parsed.ref_cache_mib = Some(value),
            ("--clients", Some(value)) if value > 0 => parsed.clients = value,
            _ => {
                eprintln!(
                    "usage: session_memory_load [--cap-mib N] [--sessions N] [--outputs N] [--output-kib N] [--ref-cache-mib N] [--clients N]"
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

/// A large tool output: log lines that differ per session and call.
fn output(session: usize, call: usize, kib: usize) -> String {
    let mut text = String::with_capacity(kib * 1024);
    let mut line = 0;
    while text.len() < kib * 1024 {
        text.push_str(&format!(
            "{line:05} s{session} c{call}: compiled module_{line} in {}.{:03}s, warnings: {}\n",
            line % 7,
            (line * 37) % 1000,
            line % 3
        ));
        line += 1;
    }
    text
}

fn body(messages: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "model": "gpt-test",
        "messages": messages,
        "tools": [{"type": "function", "function": {"name": "bash", "description": "Run a command",
                   "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}],
    }))
    .unwrap_or_default()
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with(field))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

/// One session's conversation, one request per output.
async fn session(client: reqwest::Client, url: String, at: usize, outputs: usize, kib: usize) {
    let mut messages = vec![
        json!({"role": "system", "content": format!("You are a build agent for project {at}.")}),
        json!({"role": "user", "content": "Build every module and tell me what failed."}),
    ];
    for call in 0..outputs {
        let id = format!("call_{at}_{call}");
        messages.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
            "type": "function", "function": {"name": "bash",
            "arguments": format!("{{\"command\":\"make module-{call}\"}}")}}]}),
        );
        messages
            .push(json!({"role": "tool", "tool_call_id": id, "content": output(at, call, kib)}));
        let response = client
            .post(&url)
            .header("content-type", "application/json")
            .header("authorization", "Bearer sk-provider")
            .header("x-skald-session", format!("load-{at}"))
            .body(body(&messages))
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
        messages.push(json!({"role": "assistant", "content": "ok"}));
    }
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
    config.engine.max_cached_bytes = args.cap_mib * 1024 * 1024;
    let database = dir.path().join("skald.db");
    let mut ref_settings = skald_store::RefSettings::default();
    if let Some(mib) = args.ref_cache_mib {
        ref_settings.cache_bytes = mib * 1024 * 1024;
    }
    let refs = Arc::new(skald_store::SqliteRefStore::open(&database, ref_settings)?);
    let stores = skald_engine::Stores {
        sessions: Arc::new(skald_store::SqliteSessionStore::open(&database)?),
        refs: refs.clone(),
        memories: Arc::new(skald_store::SqliteMemoryStore::open(&database)?),
    };
    let keys = Arc::new(skald_store::SqliteKeyStore::open(&database)?);
    let state = AppState::from_stores(stores, keys, config)?;
    let engine = state.engine.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1/chat/completions", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(skald_server::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    let before_tables = status_kib("VmRSS:");
    // The BPE tables are loaded once per process, whatever the load: part of the baseline.
    for encoding in [
        skald_core::tokens::Encoding::O200kBase,
        skald_core::tokens::Encoding::Cl100kBase,
    ] {
        encoding.count_text("warm up the tokenizer tables");
    }
    let baseline = status_kib("VmRSS:");
    println!(
        "RSS before the tokenizer tables {:.0} MiB, after {:.0} MiB",
        before_tables as f64 / 1024.0,
        baseline as f64 / 1024.0
    );
    let client = reqwest::Client::new();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut peak_gauge = 0usize;
    let mut workers = Vec::new();
    for _ in 0..args.clients {
        let (client, url, next) = (client.clone(), url.clone(), next.clone());
        let (outputs, kib, sessions) = (args.outputs, args.output_kib, args.sessions);
        workers.push(tokio::spawn(async move {
            loop {
                let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if at >= sessions {
                    break;
                }
                session(client.clone(), url.clone(), at, outputs, kib).await;
            }
        }));
    }
    while workers.iter().any(|worker| !worker.is_finished()) {
        peak_gauge = peak_gauge.max(engine.cached_session_bytes());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for worker in workers {
        worker.await?;
    }
    let cap = (args.cap_mib * 1024) as f64;
    let peak = status_kib("VmHWM:") as f64;
    println!(
        "cap={} MiB sessions={} ({} at a time) outputs={} output={} KiB: peak RSS {:.0} MiB ({:.2}x cap), baseline RSS {:.0} MiB, \
         peak RSS over baseline {:.0} MiB ({:.2}x cap); gauge peak {:.0} MiB, cached sessions at the end {}; ref cache {:.0} MiB in {} entries",
        args.cap_mib,
        args.sessions,
        args.clients,
        args.outputs,
        args.output_kib,
        peak / 1024.0,
        peak / cap,
        baseline as f64 / 1024.0,
        (peak - baseline as f64) / 1024.0,
        (peak - baseline as f64) / cap,
        peak_gauge as f64 / 1048576.0,
        engine.cached_sessions(),
        refs.cache_stats().bytes as f64 / 1048576.0,
        refs.cache_stats().entries,
    );
    let _ = stop.send(());
    let _ = server.await;
    Ok(())
}
