//! Every stage copies only the messages it rewrites. The engine holds a session's context and
//! gives each request a clone of it; a message's blocks ([`Content`]) are shared between the two
//! until one writes, so a stage that takes `&mut` of a message it leaves as it was (a mutable walk
//! over every message) would copy the whole session's text on every request. These cases run
//! each stage on a clone and check, message by message, that what came out unchanged still
//! shares its blocks with what the engine holds, and that what the engine holds did not change.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pipeline_common;

use pipeline_common::*;
use skald_core::message::{Block, Content, Message};
use skald_core::pipeline::offload::{
    ArgumentsCache, MIN_ARGUMENTS_THRESHOLD, OffloadCache, OffloadSettings, offload,
    offload_arguments,
};
use skald_core::pipeline::prune::{
    PruneClock, PruneEnv, PruneMarks, PruneSettings, prune_with_marks,
};
use skald_core::pipeline::truncate::{TruncateMemory, TruncateSettings, truncate_with_memory};
use skald_core::pipeline::turn_limit::{TurnLimitSettings, limit_turns};
use skald_core::repair::{RepairSettings, repair};

/// 1 system message + 12 turns of (user, call, result, answer); the results of turns 3 and 7 are
/// long enough to offload, the others are not.
fn conversation() -> Vec<Message> {
    let mut messages = vec![system("You are a careful agent.")];
    for turn in 0..12 {
        let id = format!("c{turn}");
        messages.push(user(&format!("step {turn}")));
        messages.push(calls(&[(&id, "read")]));
        let size = if turn == 3 || turn == 7 { 40_000 } else { 600 };
        messages.push(result(&id, "read", &lines(size)));
        messages.push(assistant("ok"));
    }
    messages
}

/// The indexes of the messages whose blocks `after` no longer shares with `before`.
fn copied(before: &[Message], after: &[Message]) -> Vec<usize> {
    assert_eq!(before.len(), after.len(), "these cases drop no message");
    before
        .iter()
        .zip(after)
        .enumerate()
        .filter(|(_, (held, out))| !Content::ptr_eq(&held.content, &out.content))
        .map(|(index, _)| index)
        .collect()
}

/// The two long results' messages.
const LONG_RESULTS: [usize; 2] = [1 + 3 * 4 + 2, 1 + 7 * 4 + 2];

#[test]
fn repair_and_turn_limit_copy_nothing_from_a_clean_conversation() {
    let held = conversation();
    let (repaired, report) = repair(held.clone(), &RepairSettings::default());
    assert!(report.is_clean());
    assert_eq!(copied(&held, &repaired), Vec::<usize>::new());
    let settings = TurnLimitSettings {
        limit: Some(100),
        batch: 0.into(),
    };
    let (limited, _) = limit_turns(held.clone(), &settings);
    assert_eq!(copied(&held, &limited), Vec::<usize>::new());
}

#[test]
fn offload_copies_only_the_messages_whose_results_it_replaces() {
    let held = conversation();
    let snapshot = held.clone().into_iter().map(deep_copy).collect::<Vec<_>>();
    let settings = OffloadSettings::default();
    let mut cache = OffloadCache::default();
    for pass in ["first sight", "repeat from the cache"] {
        let out = offload(held.clone(), &settings, &mut cache, |_, _| true);
        assert_eq!(out.report.offloaded.len(), 2, "{pass}");
        assert_eq!(
            copied(&held, &out.messages),
            LONG_RESULTS.to_vec(),
            "{pass}"
        );
        assert_eq!(
            held, snapshot,
            "{pass}: what the engine holds did not change"
        );
    }
    // With arguments offloading on, the calls' short arguments are left alone, and not copied.
    let settings = OffloadSettings {
        arguments_threshold: MIN_ARGUMENTS_THRESHOLD,
        ..settings
    };
    let mut arguments = ArgumentsCache::default();
    let out = offload_arguments(held.clone(), &settings, &mut arguments, |_, _| true);
    assert!(out.report.offloaded.is_empty());
    assert_eq!(copied(&held, &out.messages), Vec::<usize>::new());
}

#[test]
fn prune_and_truncate_copy_nothing_they_leave_alone() {
    let held = conversation();
    let env = PruneEnv {
        context_window_tokens: 200_000,
        now_ms: 0,
        clock: PruneClock::default(),
    };
    let mut marks = PruneMarks::default();
    let pruned = prune_with_marks(
        held.clone(),
        &PruneSettings::default(),
        env,
        &mut marks,
        &mut |_| String::new(),
    );
    assert_eq!(copied(&held, &pruned.messages), Vec::<usize>::new());
    let mut memory = TruncateMemory::default();
    let truncated = truncate_with_memory(
        held.clone(),
        &TruncateSettings::default(),
        200_000,
        &mut memory,
    );
    assert_eq!(copied(&held, &truncated.messages), Vec::<usize>::new());
}

/// A message with blocks of its own, shared with nothing.
fn deep_copy(message: Message) -> Message {
    let blocks: Vec<Block> = message.content.iter().cloned().collect();
    Message {
        content: blocks.into(),
        ..message
    }
}
