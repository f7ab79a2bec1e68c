//! A proxied request's sync ([`Turn::sync`](skald_engine::Turn::sync)) of a conversation skald
//! already holds — what every request of a long session pays before anything else: a
//! full-content fingerprint of each message, compared with the last sync's. The conversation is
//! a screenshot-heavy agent session (ten 600 KB base64 screenshots among 200 messages), where
//! hashing images dominates.
//!
//! Run: `cargo bench -p skald-engine --bench sync`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{Criterion, criterion_group, criterion_main};
use skald_core::message::{Block, Extra, ImageBlock, ImageSource, Message, Role};
use skald_core::pipeline::policy::Policy;
use skald_engine::{Engine, EngineConfig};

fn screenshot(at: usize) -> Message {
    let data: String = (0..600_000)
        .map(|n| char::from(b'A' + ((n * 7 + at) % 26) as u8))
        .collect();
    Message::new(
        Role::User,
        vec![Block::Image(ImageBlock {
            source: ImageSource::Base64 {
                media_type: "image/png".to_owned(),
                data,
            },
            extra: Extra::new(),
        })],
    )
}

fn conversation() -> Vec<Message> {
    let mut messages = vec![Message::text(
        Role::User,
        "Fix the layout of the settings page.",
    )];
    for at in 0..199 {
        messages.push(if at % 20 == 10 {
            screenshot(at)
        } else if at % 2 == 0 {
            Message::text(
                Role::Assistant,
                format!("Step {at}: looking at the page again."),
            )
        } else {
            Message::text(Role::User, format!("Step {at}: the header still overlaps."))
        });
    }
    messages
}

fn benches(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let engine = Engine::in_memory(EngineConfig::new(Policy::preset("skald").unwrap())).unwrap();
    let tenant = skald_core::ids::Tenant::parse("bench").unwrap();
    let session = skald_core::ids::SessionId::parse("screenshots").unwrap();
    let messages = conversation();
    runtime.block_on(async {
        let mut turn = engine.begin_turn(&tenant, &session).await;
        turn.sync(&messages, "anthropic").unwrap();
    });
    c.bench_function("sync/repeat-200-messages-10-screenshots", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut turn = engine.begin_turn(&tenant, &session).await;
                let synced = turn.sync(&messages, "anthropic").unwrap();
                assert!(synced.fast);
            });
        });
    });
}

criterion_group!(sync_benches, benches);
criterion_main!(sync_benches);
