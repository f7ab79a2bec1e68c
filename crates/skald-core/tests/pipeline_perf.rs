//! Timing of the stages on a 300-message, ~1 MB conversation when nothing needs to change: the
//! path every request takes. Ignored by default (timings need a release build):
//! `cargo test --release -p skald-core --test pipeline_perf -- --ignored --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pipeline_common;

use std::time::{Duration, Instant};

use pipeline_common::*;
use skald_core::message::Message;
use skald_core::pipeline::prune::{PruneClock, PruneEnv, PruneMode, PruneSettings, prune};
use skald_core::pipeline::truncate::{TruncateSettings, truncate};
use skald_core::pipeline::turn_limit::{TurnLimitSettings, limit_turns};
use skald_core::tokens::estimate_messages_chars;

/// 1 system message + 50 turns of (user, 2 × (call, 10,000-char result), answer) = 301 messages.
fn conversation() -> Vec<Message> {
    let mut messages = vec![system("You are a careful agent.")];
    for turn in 0..50 {
        messages.push(user(&format!("step {turn}")));
        for round in 0..2 {
            let id = format!("c{turn}_{round}");
            messages.push(calls(&[(&id, "read")]));
            messages.push(result(&id, "read", &lines(10_000)));
        }
        messages.push(assistant("ok"));
    }
    messages
}

/// Median time of `runs` calls of `stage`, threading the messages through without cloning.
fn median(
    mut messages: Vec<Message>,
    runs: usize,
    mut stage: impl FnMut(Vec<Message>) -> Vec<Message>,
) -> Duration {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        messages = stage(messages);
        times.push(start.elapsed());
    }
    times.sort();
    times[runs / 2]
}

#[test]
#[ignore = "timing; run in release"]
fn unchanged_pass_over_300_messages_is_well_under_a_millisecond() {
    let messages = conversation();
    let chars = estimate_messages_chars(&messages);
    eprintln!("{} messages, {chars} chars", messages.len());
    assert!(messages.len() >= 300 && chars >= 1_000_000);

    let turn_limit = TurnLimitSettings {
        limit: Some(100),
        batch: 0.into(),
    };
    let always = PruneSettings {
        mode: PruneMode::Always,
        ..PruneSettings::default()
    };
    let cache_ttl = PruneSettings::default();
    // 2M tokens: the context fills 12.5% of the window, below the soft-trim ratio.
    let roomy = PruneEnv {
        context_window_tokens: 2_000_000,
        now_ms: 1_000,
        clock: PruneClock::touched(0),
    };
    let truncate_settings = TruncateSettings::default();

    let timings = [
        (
            "turn_limit (within limit)",
            median(messages.clone(), 200, |m| limit_turns(m, &turn_limit).0),
        ),
        (
            "prune (cache warm)",
            median(messages.clone(), 200, |m| {
                prune(m, &cache_ttl, roomy).messages
            }),
        ),
        (
            "prune (below soft-trim ratio)",
            median(messages.clone(), 200, |m| prune(m, &always, roomy).messages),
        ),
        (
            "truncate (all within budget)",
            median(messages.clone(), 200, |m| {
                truncate(m, &truncate_settings, 200_000).messages
            }),
        ),
    ];
    for (name, time) in &timings {
        eprintln!("{name:32} {time:?}");
    }
    if !cfg!(debug_assertions) {
        for (name, time) in &timings {
            assert!(*time < Duration::from_micros(500), "{name}: {time:?}");
        }
    }

    // For reference: the paths that do change something.
    let tight = PruneEnv {
        context_window_tokens: 200_000,
        ..roomy
    };
    let start = Instant::now();
    let out = prune(messages.clone(), &always, tight);
    eprintln!(
        "prune (trimming {} results)       {:?}",
        out.report.trimmed,
        start.elapsed()
    );
    let start = Instant::now();
    let out = truncate(messages, &truncate_settings, 5_000);
    eprintln!(
        "truncate ({} results, with refs)  {:?}",
        out.report.truncated,
        start.elapsed()
    );
}
