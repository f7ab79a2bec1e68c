//! The `openclaw` preset against OpenClaw 2026.9 as installed (openclaw@2026.9.6,
//! `tool-result-truncation`, `tool-result-limits`, `limitHistoryTurns`): one test per behaviour
//! that differs from seed 003 (whose constants the `openclaw-seed` preset keeps).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pipeline_common;

use pipeline_common::*;
use skald_core::message::{Block, Message};
use skald_core::pipeline::policy::Policy;
use skald_core::pipeline::prune::{
    DEFAULT_HARD_CLEAR_PLACEHOLDER, IMAGE_REMOVED_MARKER, PruneClock, PruneEnv, PruneMark,
    PruneMarks, PruneSettings, default_cleared_summary, prune, prune_with_marks,
};
use skald_core::pipeline::truncate::aggregate::AGGREGATE_ELISION_MARKER;
use skald_core::pipeline::truncate::notice::notice;
use skald_core::pipeline::truncate::{
    TruncateMemory, TruncateMode, aggregate_budget_chars, result_budget_chars, truncate,
    truncate_with_memory,
};
use skald_core::tokens::estimate_string_chars;

const MINUTE: i64 = 60_000;
const START: i64 = 1_700_000_000_000;

fn openclaw() -> Policy {
    Policy::preset("openclaw").unwrap()
}

/// A user message, then `n` rounds of one `read` call and its result of `size` characters.
fn rounds(n: usize, size: usize) -> Vec<Message> {
    let mut messages = vec![user("go")];
    for round in 0..n {
        let id = format!("c{round}");
        messages.push(calls(&[(&id, "read")]));
        messages.push(result(&id, "read", &lines(size)));
    }
    messages
}

fn env(window: u64, now_ms: i64, clock: PruneClock) -> PruneEnv {
    PruneEnv {
        context_window_tokens: window,
        now_ms,
        clock,
    }
}

fn prune_sticky(
    messages: Vec<Message>,
    settings: &PruneSettings,
    env: PruneEnv,
    marks: &mut PruneMarks,
) -> skald_core::pipeline::prune::PruneOutcome {
    prune_with_marks(messages, settings, env, marks, &mut |r| {
        default_cleared_summary(r)
    })
}

/// Prunes `build()` once the cache has expired in a `window`-token window, then again a minute
/// later (cache warm) in a window so large that a fresh prune would change nothing: returns
/// both outcomes.
fn prune_twice(
    build: impl Fn() -> Vec<Message>,
    window: u64,
    marks: &mut PruneMarks,
) -> (
    skald_core::pipeline::prune::PruneOutcome,
    skald_core::pipeline::prune::PruneOutcome,
) {
    let settings = openclaw().prune;
    let first = prune_sticky(
        build(),
        &settings,
        env(window, START + 5 * MINUTE, PruneClock::touched(START)),
        marks,
    );
    let mut next = build();
    next.push(calls(&[("late", "read")]));
    next.push(result("late", "read", "fresh"));
    let second = prune_sticky(
        next,
        &settings,
        env(10_000_000, START + 6 * MINUTE, first.clock),
        marks,
    );
    (first, second)
}

fn texts(messages: &[Message]) -> Vec<String> {
    results(messages).iter().map(|r| result_text(r)).collect()
}

#[test]
fn openclaw_pruning_is_sticky_across_calls() {
    assert!(openclaw().prune.sticky);
    // Soft trims: six 20k results fill a 50k-token window to 60%; the three old ones are
    // trimmed.
    let mut marks = PruneMarks::default();
    let (first, second) = prune_twice(|| rounds(6, 20_000), 50_000, &mut marks);
    assert_eq!(first.report.trimmed, 3);
    assert_eq!(marks.get("c0"), Some(PruneMark::Trimmed));
    assert!(second.report.skipped_by_ttl, "the cache is warm");
    assert_eq!(second.report.trimmed + second.report.cleared, 0);
    assert_eq!(second.report.sticky, 3);
    assert_eq!(texts(&second.messages)[..6], texts(&first.messages)[..]);
    assert_eq!(
        second.clock, first.clock,
        "repeating a prune does not restart the clock"
    );

    // Hard clears: twenty 4k results (never trimmed) in a 20k-token window; the oldest are
    // cleared until the fill is under 50%, and stay cleared.
    let mut marks = PruneMarks::default();
    let (first, second) = prune_twice(|| rounds(20, 4_000), 20_000, &mut marks);
    assert!(first.report.cleared > 0);
    assert_eq!(marks.get("c0"), Some(PruneMark::Cleared));
    let before = texts(&first.messages);
    let after = texts(&second.messages);
    assert_eq!(after[..20], before[..]);
    assert_eq!(after[0], DEFAULT_HARD_CLEAR_PLACEHOLDER);
    assert_eq!(second.report.sticky, first.report.cleared);

    // Without marks (seed 003) the same late request shows every result in full again.
    let seed = prune(
        rounds(20, 4_000),
        &Policy::preset("openclaw-seed").unwrap().prune,
        env(10_000_000, START + 6 * MINUTE, first.clock),
    );
    assert!(seed.report.is_noop());
}

#[test]
fn openclaw_trims_image_bearing_results() {
    let settings = PruneSettings {
        hard_clear: skald_core::pipeline::prune::HardClearSettings {
            enabled: false,
            ..Default::default()
        },
        ..openclaw().prune
    };
    let mut messages = vec![
        user("look"),
        calls(&[("shot", "screenshot")]),
        result_of(
            "shot",
            Some("screenshot"),
            vec![Block::text("a small caption"), image()],
        ),
        calls(&[("big", "screenshot")]),
        result_of(
            "big",
            Some("screenshot"),
            vec![Block::text(lines(10_000)), image()],
        ),
    ];
    messages.extend(rounds(3, 20_000).into_iter().skip(1));
    let out = prune_sticky(
        messages,
        &settings,
        env(50_000, START + 5 * MINUTE, PruneClock::touched(START)),
        &mut PruneMarks::default(),
    );
    let shot = results(&out.messages)[0];
    // A short result loses only its image: one text block, the image a marker.
    assert_eq!(shot.content.len(), 1);
    assert_eq!(
        result_text(shot),
        format!("a small caption\n{IMAGE_REMOVED_MARKER}")
    );
    let big = results(&out.messages)[1];
    assert_eq!(big.content.len(), 1);
    let text = result_text(big);
    assert!(text.contains("[Tool result trimmed: kept first 1500 chars and last 1500 chars"));
    assert!(
        text.contains(IMAGE_REMOVED_MARKER),
        "the tail shows the marker"
    );
    // The seed protects both.
    let seed = Policy::preset("openclaw-seed").unwrap().prune;
    assert!(!seed.trim_images);
}

#[test]
fn openclaw_per_result_cap_by_window() {
    let truncate = openclaw().truncate;
    // min(floor(window × 0.3) × 4, 16k; 32k from 100k tokens; 64k from 200k).
    assert_eq!(result_budget_chars(8_000, &truncate), 9_600);
    assert_eq!(result_budget_chars(32_000, &truncate), 16_000);
    assert_eq!(result_budget_chars(99_999, &truncate), 16_000);
    assert_eq!(result_budget_chars(100_000, &truncate), 32_000);
    assert_eq!(result_budget_chars(128_000, &truncate), 32_000);
    assert_eq!(result_budget_chars(200_000, &truncate), 64_000);
    assert_eq!(result_budget_chars(1_000_000, &truncate), 64_000);
    // A 20k result in a 32k window is cut to 16k with OpenClaw's notice, and nothing is kept.
    let messages = vec![
        user("go"),
        calls(&[("big", "bash")]),
        result("big", "bash", &lines(20_000)),
    ];
    let out = truncate_with_memory(messages, &truncate, 32_000, &mut TruncateMemory::default());
    assert_eq!(out.report.truncated, 1);
    assert!(out.new_refs.is_empty());
    assert_eq!(out.report.changes[0].ref_id, None);
    let text = result_text(results(&out.messages)[0]);
    assert!(estimate_string_chars(&text) <= 16_000);
    let kept = text.find("[... ").unwrap();
    assert!(text.ends_with("more characters truncated; rerun with narrower args if needed]"));
    assert_eq!(&text[kept..], notice(20_000 - kept));
}

/// `n` old results of `size` characters each (every one answered), then a trailing result.
fn history(n: usize, size: usize) -> Vec<Message> {
    let mut messages = vec![user("go")];
    for round in 0..n {
        let id = format!("c{round}");
        messages.push(calls(&[(&id, "read")]));
        messages.push(result(&id, "read", &lines(size)));
    }
    messages.push(calls(&[("new", "read")]));
    messages.push(result("new", "read", &lines(size)));
    messages
}

#[test]
fn openclaw_aggregate_budget_truncates_oldest_unsent_first() {
    let settings = openclaw().truncate;
    // 32k window: per result 16,000, all results together max(64,000, 64,000) = 64,000.
    assert_eq!(aggregate_budget_chars(32_000, &settings), 64_000);
    // Seven results of 15,000 (105,000 chars) never sent before (a restored session): the
    // excess of 41,000 comes off the oldest, the trailing result stays whole.
    let out = truncate(history(6, 15_000), &settings, 32_000);
    let sizes: Vec<usize> = results(&out.messages)
        .iter()
        .map(|r| estimate_string_chars(&result_text(r)))
        .collect();
    assert_eq!(sizes[6], 15_000, "the trailing result is protected");
    assert!(sizes.iter().sum::<usize>() <= 64_000, "{sizes:?}");
    assert!(sizes[0] < 200 && sizes[1] < 200, "oldest first: {sizes:?}");
    assert_eq!(sizes[3..], [15_000, 15_000, 15_000, 15_000]);
    assert_eq!(out.report.aggregate_truncated, 3);
    assert!(
        out.report
            .changes
            .iter()
            .all(|c| c.mode == TruncateMode::Aggregate)
    );
    assert!(result_text(results(&out.messages)[0]).contains("more characters truncated"));
    // The seed has no aggregate budget.
    let seed = truncate(
        history(6, 15_000),
        &Policy::preset("openclaw-seed").unwrap().truncate,
        32_000,
    );
    assert!(seed.report.is_noop());
}

#[test]
fn openclaw_aggregate_budget_freezes_sent_results() {
    let settings = openclaw().truncate;
    let mut memory = TruncateMemory::default();
    // A live session: each request's new result arrives trailing, so it is never cut, and once
    // sent it is frozen — the aggregate budget never rewrites what the provider has cached.
    let mut messages = vec![user("go")];
    for round in 0..7 {
        let id = format!("c{round}");
        messages.push(calls(&[(&id, "read")]));
        messages.push(result(&id, "read", &lines(15_000)));
        let out = truncate_with_memory(messages.clone(), &settings, 32_000, &mut memory);
        assert!(out.report.is_noop(), "round {round}: {:?}", out.report);
    }
    assert!(memory.was_sent("c0"));
    // A cut made for the budget is repeated on the next request, even when the budget would
    // allow more then.
    let mut restored = TruncateMemory::default();
    let first = truncate_with_memory(history(6, 15_000), &settings, 32_000, &mut restored);
    let cut = result_text(results(&first.messages)[0]);
    let second = truncate_with_memory(history(1, 15_000), &settings, 32_000, &mut restored);
    assert_eq!(result_text(results(&second.messages)[0]), cut);
    assert_eq!(second.report.changes[0].mode, TruncateMode::Frozen);
    // Elision replaces a result outright only where a cut is not enough; its text is OpenClaw's.
    assert!(AGGREGATE_ELISION_MARKER.starts_with("[tool result elided"));
}

#[test]
fn openclaw_seed_truncation_keeps_the_original_as_a_ref() {
    let seed = Policy::preset("openclaw-seed").unwrap().truncate;
    let messages = vec![
        user("go"),
        calls(&[("big", "bash")]),
        result("big", "bash", &lines(500_000)),
    ];
    let out = truncate(messages, &seed, 2_000_000);
    assert_eq!(out.report.budget_chars, 400_000);
    assert_eq!(out.new_refs.len(), 1);
    assert!(result_text(results(&out.messages)[0]).contains("[REF_ID: "));
}
