//! The recent turns that stay verbatim: [`split_preserved_recent_turns`] finds where the last
//! `keep_turns` user turns begin, moving the boundary back so no kept tool result loses its call.

use std::collections::HashSet;
use std::ops::Range;

use serde::Serialize;

use super::TurnSplit;
use crate::compaction::settings::MAX_KEEP_RECENT_TURNS;
use crate::message::{Message, Role};

/// Where the verbatim tail starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreservedSplit {
    /// Leading system messages: kept in front of the summary, never summarised.
    pub pinned_prefix: usize,
    /// Index of the first message kept verbatim (`messages.len()` when none is).
    pub boundary: usize,
    /// Fewer user turns than asked for: the last `2 × N` user and assistant messages are kept
    /// instead (the seed's fallback), and the user messages before them are listed in
    /// `pinned_user_messages` so their words survive verbatim in the summary's appendix.
    pub fallback: bool,
    /// Indices of user messages before the boundary whose text is quoted verbatim in the
    /// summary's appendix: those the fallback leaves out of the tail, and the asks a
    /// [`TurnSplit`] moved into the summarised span.
    pub pinned_user_messages: Vec<usize>,
    /// The boundary moved back this many times so that no kept result lost its call.
    pub moved_for_pairing: usize,
    /// Set when the boundary was moved forward inside the preserved turns
    /// ([`cut_preserved_turns`](super::cut_preserved_turns)).
    pub turn_split: Option<TurnSplit>,
}

impl PreservedSplit {
    /// The range that is summarised.
    pub fn summarizable(&self) -> Range<usize> {
        self.pinned_prefix..self.boundary.max(self.pinned_prefix)
    }
}

/// Keeps the last `keep_turns` user turns verbatim (`splitPreservedRecentTurns`, at most 12): the
/// tail starts at the `keep_turns`-th last user message. With fewer user turns than that, the tail
/// is the last `2 × keep_turns` user and assistant messages and the earlier user messages are
/// pinned (see [`PreservedSplit`]). The tail is always a suffix — a checkpoint names its first
/// entry — so a result in the tail whose call lies before it moves the boundary back to that call:
/// a call is never split from its result. Leading system messages are pinned in front.
pub fn split_preserved_recent_turns(messages: &[Message], keep_turns: usize) -> PreservedSplit {
    let keep_turns = keep_turns.min(MAX_KEEP_RECENT_TURNS);
    let pinned_prefix = messages
        .iter()
        .take_while(|message| message.role == Role::System)
        .count();
    let mut split = PreservedSplit {
        pinned_prefix,
        boundary: messages.len(),
        fallback: false,
        pinned_user_messages: Vec::new(),
        moved_for_pairing: 0,
        turn_split: None,
    };
    if keep_turns == 0 {
        return split;
    }
    let users: Vec<usize> = (pinned_prefix..messages.len())
        .filter(|&i| messages.get(i).is_some_and(|m| m.role == Role::User))
        .collect();
    if users.len() >= keep_turns {
        if let Some(&start) = users.get(users.len() - keep_turns) {
            split.boundary = start;
        }
    } else {
        let conversation: Vec<usize> = (pinned_prefix..messages.len())
            .filter(|&i| {
                messages
                    .get(i)
                    .is_some_and(|m| matches!(m.role, Role::User | Role::Assistant))
            })
            .collect();
        let from = conversation.len().saturating_sub(2 * keep_turns);
        let Some(&start) = conversation.get(from) else {
            return split;
        };
        split.boundary = start;
        split.fallback = true;
    }
    loop {
        let earliest_call = earliest_call_of_tail_results(messages, split.boundary);
        match earliest_call {
            Some(index) if index < split.boundary => {
                split.boundary = index;
                split.moved_for_pairing += 1;
            }
            Some(_) | None => break,
        }
    }
    split.boundary = split.boundary.max(pinned_prefix);
    if split.fallback {
        split.pinned_user_messages = users
            .into_iter()
            .filter(|&index| index < split.boundary)
            .collect();
    }
    split
}

/// The index of the earliest assistant message whose call is answered by a result at or after
/// `boundary` while the call itself lies before it.
fn earliest_call_of_tail_results(messages: &[Message], boundary: usize) -> Option<usize> {
    let tail_ids: HashSet<&str> = messages
        .get(boundary..)?
        .iter()
        .filter(|message| message.role == Role::ToolResult)
        .flat_map(|message| message.tool_results().map(|result| result.call_id.as_str()))
        .collect();
    if tail_ids.is_empty() {
        return None;
    }
    let tail_call_ids: HashSet<&str> = messages
        .get(boundary..)?
        .iter()
        .flat_map(|message| message.tool_calls().map(|call| call.id.as_str()))
        .collect();
    messages
        .get(..boundary)?
        .iter()
        .enumerate()
        .filter(|(_, message)| message.role == Role::Assistant)
        .find(|(_, message)| {
            message.tool_calls().any(|call| {
                tail_ids.contains(call.id.as_str()) && !tail_call_ids.contains(call.id.as_str())
            })
        })
        .map(|(index, _)| index)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::compaction::split::tests::{calls, result, text};

    #[test]
    fn preserved_split_keeps_last_n_user_turns() {
        let messages = vec![
            Message::text(Role::System, "sys"),
            text(Role::User, 10),
            text(Role::Assistant, 10),
            text(Role::User, 10),
            calls(&["a"]),
            result("a", 10),
            text(Role::User, 10),
            text(Role::Assistant, 10),
        ];
        let split = split_preserved_recent_turns(&messages, 2);
        assert_eq!(split.pinned_prefix, 1);
        assert_eq!(split.boundary, 3);
        assert_eq!(split.summarizable(), 1..3);
        assert!(!split.fallback);
        let none = split_preserved_recent_turns(&messages, 0);
        assert_eq!(none.boundary, messages.len());
        // More turns than exist: fallback.
        let all = split_preserved_recent_turns(&messages, 12);
        assert!(all.fallback);
    }

    #[test]
    fn preserved_split_moves_back_for_a_displaced_result() {
        // The result of call "a" was written after the next user message.
        let messages = vec![
            text(Role::User, 10),
            calls(&["a"]),
            text(Role::User, 10),
            result("a", 10),
            text(Role::Assistant, 10),
        ];
        let split = split_preserved_recent_turns(&messages, 1);
        assert_eq!(split.boundary, 1);
        assert_eq!(split.moved_for_pairing, 1);
    }

    #[test]
    fn preserved_split_fallback_keeps_last_two_n_and_pins_users() {
        // One user ask, then a long agentic turn.
        let mut messages = vec![text(Role::User, 10)];
        for i in 0..10 {
            let id = format!("c{i}");
            messages.push(calls(&[id.as_str()]));
            messages.push(result(&id, 10));
        }
        let split = split_preserved_recent_turns(&messages, 3);
        assert!(split.fallback);
        // Last 6 user/assistant messages are the last 6 assistants: c4..c9 at 9, 11, ... 19.
        assert_eq!(split.boundary, 9);
        assert_eq!(split.pinned_user_messages, vec![0]);
    }
}
