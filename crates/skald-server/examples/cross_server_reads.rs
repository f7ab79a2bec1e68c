//! Probe of reads across servers: two skald servers over one store (a SQLite file, or a
//! PostgreSQL database with `--database`), one conversation whose turns alternate between them
//! as a load balancer would send them. Each turn is a streamed Responses call that continues
//! from the previous answer by `previous_response_id` alone — an answer the *other* server
//! relayed a moment before — sent the moment the client has the previous stream's final event.
//! A turn the server refuses because it does not find that answer is a stale read.
//!
//! ```text
//! cargo run --release -p skald-server --example cross_server_reads -- [--turns 400] [--database postgres://…]
//! ```
//!
//! The upstream answers at once, in the same process.

/// The allocator of the `skald` binary, so the timing is the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Bytes;
use axum::response::IntoResponse;
use futures::StreamExt;
use serde_json::{Value, json};
use skald_core::pipeline::policy::Policy;
use skald_server::{AppState, ServerConfig, Upstream};

struct Args {
    turns: usize,
    database: Option<String>,
}

fn args() -> Args {
    let mut parsed = Args {
        turns: 400,
        database: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--turns", Some(value)) if value.parse::<usize>().is_ok_and(|n| n > 0) => {
                parsed.turns = value.parse().unwrap_or(parsed.turns);
            }
            ("--database", Some(url)) => parsed.database = Some(url),
            _ => {
                eprintln!("usage: cross_server_reads [--turns N] [--database postgres://…]");
                std::process::exit(2);
            }
        }
    }
    parsed
}

/// One SSE event.
fn event(kind: &str, mut data: Value, sequence: &mut u64) -> String {
    data["type"] = json!(kind);
    data["sequence_number"] = json!(*sequence);
    *sequence += 1;
    format!("event: {kind}\ndata: {data}\n\n")
}

/// A streamed Responses answer `resp_{n}` saying `answer {n}`.
async fn upstream_answer(
    axum::extract::State(next): axum::extract::State<Arc<AtomicUsize>>,
    _body: Bytes,
) -> impl IntoResponse {
    let n = next.fetch_add(1, Ordering::Relaxed);
    let id = format!("resp_{n}");
    let text = format!("answer {n}");
    let item = json!({"id": format!("msg_{n}"), "type": "message", "status": "completed",
                      "role": "assistant",
                      "content": [{"type": "output_text", "text": text, "annotations": []}]});
    let envelope = |status: &str, output: Vec<Value>| {
        json!({"id": id, "object": "response", "created_at": 1770000000, "status": status,
               "model": "gpt-test", "output": output, "tools": [], "store": true,
               "usage": {"input_tokens": 100, "output_tokens": 3, "total_tokens": 103}})
    };
    let events = [
        (
            "response.created",
            json!({"response": envelope("in_progress", vec![])}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": item}),
        ),
        (
            "response.output_text.delta",
            json!({"item_id": format!("msg_{n}"), "output_index": 0, "content_index": 0,
                   "delta": text}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 0, "item": item}),
        ),
        (
            "response.completed",
            json!({"response": envelope("completed", vec![item.clone()])}),
        ),
    ];
    let mut sequence = 0;
    let body: String = events
        .into_iter()
        .map(|(kind, data)| event(kind, data, &mut sequence))
        .collect();
    ([("content-type", "text/event-stream")], body)
}

/// A server over `database` (PostgreSQL), or over the SQLite file `file`.
fn server_state(
    database: Option<&skald_store::Database>,
    file: &std::path::Path,
    config: &ServerConfig,
) -> Result<AppState, Box<dyn std::error::Error>> {
    Ok(match database {
        Some(database) => {
            let stores = skald_engine::Stores::open_postgres(database)?;
            let keys = Arc::new(skald_store::PgKeyStore::new(database.clone()));
            AppState::from_stores(stores, keys, config.clone())?
        }
        None => AppState::open(file, config.clone())?,
    })
}

/// Sends one turn; `Ok` once the stream's final event arrived, `Err` with the refusal's status
/// and body.
async fn turn(
    client: &reqwest::Client,
    url: &str,
    at: usize,
    previous: Option<&str>,
) -> Result<(), (u16, String)> {
    let mut body = json!({"model": "gpt-test", "stream": true,
        "input": [{"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": format!("question {at}")}]}]});
    if let Some(previous) = previous {
        body["previous_response_id"] = json!(previous);
    }
    let response = client
        .post(url)
        .header("x-skald-session", "cross-server")
        .header("authorization", "Bearer sk-provider")
        .json(&body)
        .send()
        .await
        .map_err(|error| (0, error.to_string()))?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err((status, response.text().await.unwrap_or_default()));
    }
    // Acts on the final event, as an SDK does, not on the connection's close.
    let mut events = response.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("response.completed") {
        match events.next().await {
            Some(Ok(chunk)) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            Some(Err(error)) => return Err((200, error.to_string())),
            None => return Err((200, format!("the stream ended early: {seen}"))),
        }
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args();
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let upstream_addr = upstream.local_addr()?;
    let answers = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        let app = axum::Router::new()
            .fallback(upstream_answer)
            .with_state(answers);
        let _ = axum::serve(upstream, app).await;
    });
    let mut config = ServerConfig::new(Policy::preset("skald")?);
    config.openai = Some(Upstream {
        base_url: format!("http://{upstream_addr}/v1"),
        api_key: None,
    });
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("skald.db");
    let schema = format!("cross_server_reads_{}", std::process::id());
    let database = match &args.database {
        Some(url) => Some(skald_store::Database::connect_in_schema(url, &schema)?),
        None => None,
    };
    let mut urls = Vec::new();
    let mut servers = Vec::new();
    for _ in 0..2 {
        // Each server its own engine and pool, as two processes would have.
        let own = match &args.database {
            Some(url) => Some(skald_store::Database::connect_in_schema(url, &schema)?),
            None => None,
        };
        let state = server_state(own.as_ref().or(database.as_ref()), &file, &config)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        urls.push(format!("http://{}/v1/responses", listener.local_addr()?));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(skald_server::serve(listener, state, async move {
            let _ = stopped.await;
        }));
        servers.push((stop, server));
    }
    let client = reqwest::Client::new();
    let mut stale = 0;
    let mut other_failures = Vec::new();
    let mut previous: Option<String> = None;
    let mut answered = 0;
    for at in 0..args.turns {
        let url = &urls[at % 2];
        match turn(&client, url, at, previous.as_deref()).await {
            Ok(()) => {
                previous = Some(format!("resp_{answered}"));
                answered += 1;
            }
            Err((400, body)) if body.contains("not an answer skald recorded") => {
                stale += 1;
                // The answer is there once its write is done: the next turn continues from it.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err((status, body)) => other_failures.push(format!("{status}: {body}")),
        }
    }
    println!(
        "store: {}; turns alternating between 2 servers, each continuing from the answer the \
         other relayed: {} — stale reads (the answer not found) {} of {}, other failures {}",
        if args.database.is_some() {
            "PostgreSQL"
        } else {
            "SQLite file"
        },
        args.turns,
        stale,
        args.turns.saturating_sub(1),
        other_failures.len()
    );
    for failure in other_failures.iter().take(5) {
        println!("  {failure}");
    }
    for (stop, server) in servers {
        let _ = stop.send(());
        let _ = server.await;
    }
    if let Some(url) = &args.database {
        drop(database);
        skald_store::Database::drop_schema(url, &schema)?;
    }
    Ok(())
}
