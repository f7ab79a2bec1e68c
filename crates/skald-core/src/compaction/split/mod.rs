//! How the history is cut up for summarising (seed 001's `compaction.ts` and the splitting parts
//! of `compaction-safeguard.ts`): what stays verbatim, what is pruned first when new content is
//! large, how a span is split into parts and chunks a summarizer can take, and the three-level
//! fallback for messages too large to summarise.
//!
//! Functions that split return index ranges into the slice they were given, so a plan can name
//! its pieces without copying messages. A tool call and its results are never separated: an
//! assistant message whose calls completed, together with the tool-result messages right after
//! it, is one unit for every split here (OpenClaw's newer planner does the same; the seed's
//! version could split them). Calls of an assistant message that stopped with an error or an
//! abort expect no result and pin nothing.
//!
//! The parts, private (every item has one path: here): `chunk` (units, chunks, parts, the
//! oversized test), `recent` (the verbatim recent turns), `turn_split` (cutting inside them),
//! `history` (pruning to the context share) and `stages` (the summarizer calls and fallback
//! levels). This file keeps [`strip_details`] and the two limits they share.

use crate::message::{Block, Message};

mod chunk;
mod history;
mod recent;
mod stages;
mod turn_split;

pub use chunk::{
    chunk_messages_by_max_tokens, compute_adaptive_chunk_ratio, fallback_note,
    is_oversized_for_summary, max_chunk_tokens, oversized_note, split_messages_by_token_share,
};
pub use history::{HistoryPrune, history_budget_tokens, prune_history_for_context_share};
pub use recent::{PreservedSplit, split_preserved_recent_turns};
pub use stages::{FallbackLevel, PartPlan, StagePlan, plan_part, plan_stages};
pub use turn_split::{TurnSplit, TurnSplitReason, cut_preserved_turns, turn_cut_points};

/// A message whose estimate, with the margin, is over this share of the window is too large to
/// summarise (`isOversizedForSummary`).
pub const OVERSIZED_SHARE: f64 = 0.5;

/// Below this many messages a span is summarised in one pass, never split into parts
/// (`minMessagesForSplit`).
pub const MIN_MESSAGES_FOR_SPLIT: usize = 4;

/// Removes every tool result's host-only `details` ("details stripped before estimating and
/// summarising"). The estimator never counts `details` anyway; stripping makes sure no copy
/// handed to a summarizer carries them.
pub fn strip_details(mut messages: Vec<Message>) -> Vec<Message> {
    for message in &mut messages {
        for block in &mut message.content {
            if let Block::ToolResult(result) = block {
                result.details = None;
            }
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;
    use crate::compaction::settings::CompactionSettings;
    use crate::message::Role;
    use crate::message::{Extra, StopReason, ToolCall, ToolResult};

    pub(super) fn text(role: Role, chars: usize) -> Message {
        Message::text(role, "x".repeat(chars))
    }

    pub(super) fn calls(ids: &[&str]) -> Message {
        let mut message = Message::new(
            Role::Assistant,
            ids.iter()
                .map(|id| {
                    Block::ToolCall(ToolCall {
                        id: (*id).into(),
                        name: "read".into(),
                        arguments: json!({"path": "a"}),
                        arguments_text: None,
                        extra: Extra::new(),
                    })
                })
                .collect(),
        );
        message.meta.stop_reason = Some(StopReason::ToolUse);
        message
    }

    pub(super) fn result(id: &str, chars: usize) -> Message {
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: id.into(),
                tool_name: Some("read".into()),
                content: vec![Block::text("y".repeat(chars))].into(),
                content_form: Default::default(),
                is_error: None,
                details: Some(json!({"secret": 1}).into()),
                extra: Extra::new(),
            })],
        )
    }

    pub(super) fn settings() -> CompactionSettings {
        CompactionSettings::default()
    }

    #[test]
    fn strip_details_removes_host_only_payloads() {
        let stripped = strip_details(vec![result("a", 3)]);
        let details = stripped[0].tool_results().next().unwrap().details.clone();
        assert_eq!(details, None);
    }
}
