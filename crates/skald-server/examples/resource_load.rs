//! Load generator for resource ingestion: `POST /v1/memory/resources` with a Markdown document of
//! N repeated sections (the same heading each time, a body that differs a little), against a
//! skald server in the same process on a fresh SQLite file per run.
//!
//! ```text
//! cargo run --release -p skald-server --example resource_load -- [--sections 500,1000,2000,3000] [--runs 3] [--identical]
//! ```
//!
//! `--identical` makes every section the same text (heading and body), so each chunk after the
//! first is an exact duplicate that the store merges.
//!
//! Prints, for each section count, the wall time of every run and their median, the chunks the
//! report counted and the time per section, so a superlinear cost shows as a growing
//! per-section time.

/// The allocator of the `skald` binary, so the figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use skald_core::pipeline::policy::Policy;
use skald_server::{AppState, ServerConfig};

struct Args {
    sections: Vec<usize>,
    runs: usize,
    identical: bool,
}

fn args() -> Args {
    let mut parsed = Args {
        sections: vec![500, 1_000, 2_000, 3_000],
        runs: 3,
        identical: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--identical" {
            parsed.identical = true;
            continue;
        }
        let value = args.next().unwrap_or_default();
        match flag.as_str() {
            "--sections" => {
                parsed.sections = value
                    .split(',')
                    .filter_map(|count| count.trim().parse().ok())
                    .collect();
            }
            "--runs" => parsed.runs = value.parse().unwrap_or(3).max(1),
            _ => {
                eprintln!(
                    "usage: resource_load [--sections 500,1000,2000,3000] [--runs 3] [--identical]"
                );
                std::process::exit(2);
            }
        }
    }
    parsed
}

/// A Markdown document of `sections` sections, every one under the heading `## Notes`, each body a
/// few sentences that differ by the section's number (or, `identical`, do not).
pub fn document(sections: usize, identical: bool) -> String {
    let mut text = String::from("# Runbook\n\nThe notes of the on-call rotation.\n\n");
    for section in 0..sections {
        let at = if identical { 0 } else { section };
        text.push_str(&format!(
            "## Notes\n\nEntry {at}: the deploy of build {at} went out at step {}. Checked the \
             dashboards, the error rate of shard {} stayed flat, and the rollback plan for \
             release {at} was reviewed by the team.\n\n",
            at % 17,
            at % 31
        ));
    }
    text
}

/// One run: a fresh store, the document posted once; the wall time and the report.
async fn run(
    sections: usize,
    identical: bool,
) -> Result<(Duration, Value), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let config = ServerConfig::new(Policy::preset("skald")?);
    let state = AppState::open(&dir.path().join("skald.db"), config)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1/memory/resources", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(skald_server::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    let body = serde_json::to_vec(
        &json!({"name": "runbook.md", "content": document(sections, identical)}),
    )?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()?;
    let started = Instant::now();
    let response = client
        .post(&url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await?;
    let status = response.status();
    let report: Value = response.json().await?;
    let elapsed = started.elapsed();
    let _ = stop.send(());
    let _ = server.await;
    if !status.is_success() {
        return Err(format!("{sections} sections: status {status}: {report}").into());
    }
    Ok((elapsed, report))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args();
    println!(
        "POST /v1/memory/resources, SQLite file, {} run(s) each, {} sections",
        args.runs,
        if args.identical {
            "identical"
        } else {
            "varied"
        }
    );
    for &sections in &args.sections {
        let mut times = Vec::new();
        let mut chunks = Value::Null;
        for _ in 0..args.runs {
            let (elapsed, report) = run(sections, args.identical).await?;
            chunks = report["chunks"].clone();
            times.push(elapsed);
        }
        times.sort();
        let median = times[times.len() / 2];
        let shown: Vec<String> = times
            .iter()
            .map(|time| format!("{:.3}", time.as_secs_f64()))
            .collect();
        println!(
            "sections={sections:<6} chunks={chunks:<6} median={:>8.3} s  per section={:>7.3} ms  runs=[{}] s",
            median.as_secs_f64(),
            median.as_secs_f64() * 1e3 / sections.max(1) as f64,
            shown.join(", ")
        );
    }
    Ok(())
}
