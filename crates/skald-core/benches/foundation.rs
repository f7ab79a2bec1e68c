//! Foundation benchmarks on the largest real Claude Code session in `../shared/data`:
//! decoding, BPE counting from cold, re-counting after one appended turn (the per-message
//! cache means only the new turn is tokenized), and placing every user turn's kept recall in
//! the next request (what memory adds to each call's preparation), and keying a message with a
//! screenshot (what a sync does to every message the client sends).
//!
//! Run: `cargo bench -p skald-core --bench foundation`. Skipped (with a note) when the shared
//! data is not beside the repository.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use skald_core::codec;
use skald_core::memory::recall::{KeepTerms, KeptRecalls, Placement, simulated_call, user_text};
use skald_core::message::{Block, ImageBlock, ImageSource, Message, Role};
use skald_core::session_id::content_key;
use skald_core::tokens::{Encoding, TokenCounter, estimate_messages_tokens};

fn largest_claude_code_session() -> Option<PathBuf> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/trajectories/claude-code");
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .max_by_key(|path| std::fs::metadata(path).map(|m| m.len()).unwrap_or(0))
}

/// Index where the last user turn starts (the last plain user message).
fn last_turn_start(messages: &[Message]) -> usize {
    messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .unwrap_or(messages.len().saturating_sub(1))
}

fn benches(c: &mut Criterion) {
    let Some(path) = largest_claude_code_session() else {
        eprintln!(
            "skipping foundation benchmarks: ../shared/data/trajectories/claude-code not found"
        );
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    eprintln!("session: {} ({} bytes)", path.display(), text.len());

    c.bench_function("decode/claude-code-largest", |b| {
        b.iter(|| codec::decode(std::hint::black_box(&text)).unwrap())
    });

    let messages: Vec<Message> = codec::decode(&text)
        .unwrap()
        .conversation
        .messages
        .into_iter()
        .filter(Message::is_model_visible)
        .collect();
    let split = last_turn_start(&messages);
    eprintln!(
        "messages: {} visible; last turn: {} messages",
        messages.len(),
        messages.len() - split
    );

    c.bench_function("tokens/estimate-full", |b| {
        b.iter(|| estimate_messages_tokens(std::hint::black_box(&messages)))
    });

    let mut group = c.benchmark_group("tokens/bpe");
    group.sample_size(10);
    group.bench_function("count-full-cold", |b| {
        b.iter_batched(
            || TokenCounter::new(Encoding::O200kBase),
            |mut counter| counter.count_messages(&messages),
            BatchSize::SmallInput,
        )
    });
    group.finish();

    let mut warm = TokenCounter::new(Encoding::O200kBase);
    warm.count_messages(&messages[..split]);
    c.bench_function("tokens/bpe/recount-after-one-turn", |b| {
        b.iter_batched(
            || warm.clone(),
            |mut counter| counter.count_messages(&messages),
            BatchSize::LargeInput,
        )
    });

    // Every user turn of the session got a recall that stayed; the next call places them all.
    let terms = KeepTerms {
        cache_warm: true,
        max_kept_tokens: u64::MAX,
        ..KeepTerms::default()
    };
    let mut kept = KeptRecalls::default();
    let mut turns = 0;
    for (at, message) in messages.iter().enumerate() {
        if !user_text(message).is_empty() {
            let pair = simulated_call(
                "search_memories",
                serde_json::json!({"query": format!("turn {at}")}),
                "{\"memories\":[]}".to_owned(),
            );
            kept.place(
                messages[..=at].to_vec(),
                Placement::AfterAnchor,
                pair,
                200,
                &terms,
            );
            turns += 1;
        }
    }
    eprintln!("recall: {turns} user turns, each with a kept recall");
    c.bench_function("recall/place-kept", |b| {
        b.iter_batched(
            || (kept.clone(), messages.clone()),
            |(mut kept, messages)| {
                kept.place(messages, Placement::AfterAnchor, Vec::new(), 0, &terms)
            },
            BatchSize::LargeInput,
        )
    });
}

/// A user message with a 1 MB base64 screenshot: [`content_key`] is how every sync matches the
/// client's messages to the stored ones.
fn content_key_of_an_image(c: &mut Criterion) {
    let screenshot = Message::new(
        Role::User,
        vec![
            Block::text("what is on the screen?"),
            Block::Image(ImageBlock {
                source: ImageSource::Base64 {
                    media_type: "image/png".to_owned(),
                    data: "iVBORw0KGgoAAAANSUhEUgAA".repeat((1 << 20) / 24) + "==",
                },
                extra: Default::default(),
            }),
        ],
    );
    c.bench_function("session/content-key-1mb-image", |b| {
        b.iter(|| content_key(&screenshot))
    });
}

criterion_group!(foundation, benches, content_key_of_an_image);
criterion_main!(foundation);
