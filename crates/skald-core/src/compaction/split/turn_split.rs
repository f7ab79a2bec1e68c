//! Cutting inside the preserved turns when they alone are too large: the points where a cut
//! leaves every tool call with its results ([`turn_cut_points`]) and the cut that keeps the
//! earliest part that fits ([`cut_preserved_turns`], described by a [`TurnSplit`]).

use serde::Serialize;

use super::PreservedSplit;
use crate::message::{Message, Role};
use crate::tokens::estimate_message_tokens;

/// Why the boundary moved forward inside the preserved turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnSplitReason {
    /// The preserved turns alone were over the tail budget.
    TailOverBudget,
    /// Everything after the pinned prefix was in the preserved turns (a few user turns of long
    /// autonomous tool work), so without a cut there was nothing to summarise.
    NothingElseToSummarize,
    /// What lay before the preserved turns was smaller than the part of them over
    /// `keep_recent_tokens`: summarising it alone could not shrink the context (a session whose
    /// host has just compacted it, followed by a few long turns of tool work).
    LittleElseToSummarize,
}

/// A boundary moved forward inside the preserved recent turns (pi's split turn): the kept part
/// starts at a later safe cut point and everything before it, the start of the cut turn
/// included, is summarised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnSplit {
    /// Why the boundary moved.
    pub reason: TurnSplitReason,
    /// Where the preserved turns started before the cut.
    pub preserved_from: usize,
    /// The user message that opens the turn the cut falls in (pi's `turnStartIndex`); `None`
    /// when the cut falls on a user message, so that only whole turns moved.
    pub turn_start: Option<usize>,
    /// Most tokens the kept part was to take.
    pub budget_tokens: u64,
    /// Tokens of the preserved turns before the cut.
    pub preserved_tokens: u64,
    /// Tokens of the kept part after it.
    pub kept_tokens: u64,
    /// Even the smallest part a cut may keep (from the latest assistant step on) is over the
    /// budget; the cut keeps that part.
    pub over_budget: bool,
}

/// Where the kept tail may start inside `messages[from..]`, ascending: a user or assistant
/// message after `from` such that no tool call id has its call or a result on both sides of
/// it. Results of the previous step all come before the cut, and every call after it keeps its
/// results (whatever the call's stop reason: a kept orphan result would break the request).
pub fn turn_cut_points(messages: &[Message], from: usize) -> Vec<usize> {
    let Some(tail) = messages.get(from..) else {
        return Vec::new();
    };
    // For each call id, the first and last positions (in `tail`) of its call and results.
    let mut spans: std::collections::HashMap<&str, (usize, usize)> =
        std::collections::HashMap::new();
    for (position, message) in tail.iter().enumerate() {
        let ids = message
            .tool_calls()
            .map(|call| call.id.as_str())
            .chain(message.tool_results().map(|result| result.call_id.as_str()));
        for id in ids {
            spans
                .entry(id)
                .and_modify(|(_, last)| *last = position)
                .or_insert((position, position));
        }
    }
    // reach_from[p]: the furthest position tied to an id first seen at p.
    let mut reach_from = vec![0usize; tail.len()];
    for (first, last) in spans.into_values() {
        if let Some(reach) = reach_from.get_mut(first) {
            *reach = (*reach).max(last);
        }
    }
    let mut cuts = Vec::new();
    let mut reach = 0usize;
    for (position, message) in tail.iter().enumerate() {
        if position > 0 && reach < position && matches!(message.role, Role::User | Role::Assistant)
        {
            cuts.push(from + position);
        }
        reach = reach.max(reach_from.get(position).copied().unwrap_or(0));
    }
    cuts
}

/// Moves `split.boundary` forward to the earliest safe cut point ([`turn_cut_points`]) whose
/// kept part fits `budget_tokens`, never past the latest assistant step: the last assistant
/// message (with its results and anything after it) is always kept. When even that part is over
/// the budget, the cut keeps it and the split says so (`over_budget`); the caller may then
/// truncate its tool results. The user asks moved into the summarised span (not harness text)
/// are added to `pinned_user_messages`, so the summary's appendix quotes them verbatim.
/// `None` when no cut point lies after the boundary, or the preserved turns already fit.
pub fn cut_preserved_turns(
    messages: &[Message],
    split: &PreservedSplit,
    budget_tokens: u64,
    reason: TurnSplitReason,
) -> Option<PreservedSplit> {
    let from = split.boundary;
    let visible_tokens = |message: &Message| {
        if message.is_model_visible() {
            estimate_message_tokens(message)
        } else {
            0
        }
    };
    let preserved_tokens: u64 = messages.get(from..)?.iter().map(visible_tokens).sum();
    if preserved_tokens <= budget_tokens {
        return None;
    }
    let last_assistant = messages
        .iter()
        .rposition(|message| message.role == Role::Assistant)?;
    let cuts: Vec<usize> = turn_cut_points(messages, from)
        .into_iter()
        .filter(|&cut| cut <= last_assistant)
        .collect();
    let minimal = *cuts.last()?;
    // Kept tokens of each cut, from the suffix sums of the preserved turns.
    let mut kept = preserved_tokens;
    let mut next = from;
    let mut chosen = None;
    for &cut in &cuts {
        kept -= messages
            .get(next..cut)
            .unwrap_or_default()
            .iter()
            .map(visible_tokens)
            .sum::<u64>();
        next = cut;
        if kept <= budget_tokens {
            chosen = Some((cut, kept));
            break;
        }
    }
    let over_budget = chosen.is_none();
    let (cut, kept_tokens) = chosen.unwrap_or((minimal, kept));
    let turn_start = match messages.get(cut) {
        Some(message) if message.role == Role::User => None,
        Some(_) | None => messages
            .get(from..cut)?
            .iter()
            .rposition(|message| message.role == Role::User)
            .map(|position| from + position),
    };
    let mut pinned = split.pinned_user_messages.clone();
    pinned.extend((from..cut).filter(|&index| {
        messages
            .get(index)
            .is_some_and(crate::compaction::asks::is_user_ask)
    }));
    Some(PreservedSplit {
        boundary: cut,
        pinned_user_messages: pinned,
        turn_split: Some(TurnSplit {
            reason,
            preserved_from: from,
            turn_start,
            budget_tokens,
            preserved_tokens,
            kept_tokens,
            over_budget,
        }),
        ..split.clone()
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::compaction::split::split_preserved_recent_turns;
    use crate::compaction::split::tests::{calls, result, text};
    use crate::message::StopReason;
    use crate::tokens::estimate_messages_tokens;

    #[test]
    fn turn_cut_points_skip_results_and_open_calls() {
        let messages = vec![
            text(Role::User, 10),
            calls(&["a", "b"]),
            result("a", 10),
            result("b", 10),
            text(Role::Assistant, 10),
            calls(&["c"]),
            text(Role::User, 10),
            result("c", 10),
            text(Role::Assistant, 10),
        ];
        assert_eq!(turn_cut_points(&messages, 0), vec![1, 4, 5, 8]);
        assert_eq!(turn_cut_points(&messages, 4), vec![5, 8]);
        assert!(turn_cut_points(&messages, 9).is_empty());
        assert!(turn_cut_points(&messages, 99).is_empty());
        // An aborted call's result still rides with it.
        let mut aborted = calls(&["x"]);
        aborted.meta.stop_reason = Some(StopReason::Aborted);
        let messages = vec![
            text(Role::User, 10),
            aborted,
            result("x", 10),
            text(Role::User, 10),
        ];
        assert_eq!(turn_cut_points(&messages, 0), vec![1, 3]);
    }

    #[test]
    fn cut_preserved_turns_keeps_the_earliest_part_that_fits() {
        let mut messages = vec![text(Role::User, 40)];
        for i in 0..6 {
            let id = format!("c{i}");
            messages.push(calls(&[id.as_str()]));
            messages.push(result(&id, 4_000));
        }
        messages.push(text(Role::Assistant, 40));
        let split = split_preserved_recent_turns(&messages, 1);
        assert_eq!(split.boundary, 0);
        let tokens = |from: usize| estimate_messages_tokens(&messages[from..]);
        // Room for two steps and the answer.
        let budget = tokens(9);
        let cut = cut_preserved_turns(&messages, &split, budget, TurnSplitReason::TailOverBudget)
            .unwrap();
        assert_eq!(cut.boundary, 9);
        let turn = cut.turn_split.clone().unwrap();
        assert_eq!(turn.turn_start, Some(0));
        assert_eq!(turn.kept_tokens, budget);
        assert_eq!(turn.preserved_tokens, tokens(0));
        assert!(!turn.over_budget);
        assert_eq!(cut.pinned_user_messages, vec![0]);
        // Nothing fits: the latest assistant step alone is kept.
        let cut =
            cut_preserved_turns(&messages, &split, 0, TurnSplitReason::TailOverBudget).unwrap();
        assert_eq!(cut.boundary, messages.len() - 1);
        assert!(cut.turn_split.unwrap().over_budget);
        // Everything fits: no cut.
        let fits = tokens(0);
        assert_eq!(
            cut_preserved_turns(&messages, &split, fits, TurnSplitReason::TailOverBudget),
            None
        );
    }
}
