//! `assemble` on the largest real Claude Code session in `../shared/data`, under the `skald`
//! policy: a full pass with a cold session state (every decision made from scratch), and one new
//! turn appended to an already assembled session (decisions cached: the cost follows the turn).
//! And the engine's own path (`Engine::assemble`) on the same session stored: a request for a
//! session the engine holds, which reads its context from the held copy and runs the pipeline on
//! its remembered decisions — what every call of a long session pays before its new messages.
//!
//! Run: `cargo bench -p skald-engine --bench assemble`. Skipped when the data is absent.
//!
//! Measured with the allocator the `skald` binary runs with (mimalloc): allocation is a fifth of
//! a cold pass, and glibc's malloc makes it about 20 % slower.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::Path;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use skald_core::codec;
use skald_core::message::{Message, Role};
use skald_core::pipeline::policy::Policy;
use skald_engine::internal::assemble::{AssembleRequest, assemble};
use skald_engine::{AssembleInput, Engine, EngineConfig, SessionState, ViewOptions};
use skald_store::SqliteRefStore;

/// The tenant of the requests, as the engine takes it.
static BENCH: std::sync::LazyLock<skald_core::ids::Tenant> =
    std::sync::LazyLock::new(|| tenant_named("bench"));

fn largest_session() -> Option<String> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/trajectories/claude-code");
    let path = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))?;
    std::fs::read_to_string(path).ok()
}

fn request(now_ms: i64) -> AssembleRequest<'static> {
    AssembleRequest {
        tenant: &BENCH,
        context_window_tokens: 200_000,
        now_ms,
        fetch_available: true,
        host_prefix_tokens: 0,
    }
}

fn benches(c: &mut Criterion) {
    let Some(text) = largest_session() else {
        eprintln!("skipping: ../shared/data/trajectories/claude-code not found");
        return;
    };
    // The whole session as one request (compact boundary ignored: the worst case).
    let messages: Vec<Message> = codec::decode(&text)
        .unwrap()
        .conversation
        .messages
        .into_iter()
        .filter(Message::is_model_visible)
        .collect();
    let split = messages.iter().rposition(|m| m.role == Role::User).unwrap();
    let history = messages[..split].to_vec();
    eprintln!(
        "{} messages; the new turn has {}",
        messages.len(),
        messages.len() - split
    );
    let policy = Policy::preset("skald").unwrap();
    let store = SqliteRefStore::in_memory(Default::default()).unwrap();
    // Store every ref once, as the first request of a real session would.
    let mut warm = SessionState::default();
    assemble(&store, &policy, &mut warm, history.clone(), request(0)).unwrap();

    for label in ["cold", "one new turn"] {
        let mut state = if label == "cold" {
            SessionState::default()
        } else {
            warm.clone()
        };
        let out = assemble(
            &store,
            &policy,
            &mut state,
            messages.clone(),
            request(3_000),
        )
        .unwrap();
        eprintln!("{label}: {:?}", out.report.timings_us);
    }
    c.bench_function("assemble/full-pass-cold-state", |b| {
        b.iter_batched(
            || messages.clone(),
            |messages| {
                let mut state = SessionState::default();
                assemble(&store, &policy, &mut state, messages, request(1_000)).unwrap()
            },
            BatchSize::LargeInput,
        )
    });
    c.bench_function("assemble/one-new-turn", |b| {
        b.iter_batched(
            || (warm.clone(), messages.clone()),
            |(mut state, messages)| {
                assemble(&store, &policy, &mut state, messages, request(2_000)).unwrap()
            },
            BatchSize::LargeInput,
        )
    });

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let engine = Engine::in_memory(EngineConfig::new(policy.clone())).unwrap();
    let session = skald_core::ids::SessionId::parse("bench-session").unwrap();
    runtime
        .block_on(engine.ingest(&BENCH, &session, messages.clone()))
        .unwrap();
    let held_request = || AssembleInput {
        messages: None,
        source_format: String::new(),
        model: None,
        options: ViewOptions::default(),
        budget_tokens: None,
        agents_md: None,
    };
    // The first request reads the session and makes every decision; the bench is of the next.
    runtime
        .block_on(engine.assemble(&BENCH, &session, held_request()))
        .unwrap();
    c.bench_function("engine-assemble/held-session", |b| {
        b.iter(|| {
            runtime
                .block_on(engine.assemble(&BENCH, &session, held_request()))
                .unwrap()
        })
    });
}

criterion_group!(assemble_benches, benches);
criterion_main!(assemble_benches);

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
