//! How many summarizer calls a span takes and in what shape: [`plan_stages`] splits it into
//! parts (merged by a final call) and [`plan_part`] picks the fallback level of one part — whole,
//! without its oversized messages, or only a note ([`FallbackLevel`]).

use std::ops::Range;

use serde::Serialize;

use super::chunk::{effective_max, group_by_max, normalize_parts, to_ranges, units_of};
use super::{
    MIN_MESSAGES_FOR_SPLIT, is_oversized_for_summary, oversized_note, split_messages_by_token_share,
};
use crate::compaction::settings::CompactionSettings;
use crate::message::Message;
use crate::tokens::estimate_messages_tokens;

/// How far down the fallback ladder a summary went (`summarizeWithFallback`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FallbackLevel {
    /// Level 1: every message summarised.
    #[default]
    Full,
    /// Level 2: only the messages that are not oversized, with a note for each oversized one.
    SmallOnly,
    /// Level 3: no summarizer call worked; a plain note ([`fallback_note`](super::fallback_note)).
    Note,
}

/// One part of a staged summary and its fallback plan. Indices are into the messages the stage
/// plan was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartPlan {
    /// The messages of the part.
    pub range: Range<usize>,
    /// Level 1: chunks summarised in turn, each with the summary so far as previous summary.
    pub chunks: Vec<Range<usize>>,
    /// Level 2: chunks of the messages that are not oversized.
    pub small_chunks: Vec<Vec<usize>>,
    /// Level 2: one note per oversized message, appended to its summary.
    pub oversized_notes: Vec<String>,
}

impl PartPlan {
    /// Messages in the part.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// True when the part holds no message.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// Oversized messages in the part.
    pub fn oversized(&self) -> usize {
        self.oversized_notes.len()
    }
}

/// How a span is summarised (`summarizeInStages`): one part when it is small, else `parts`
/// parts summarised separately and merged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StagePlan {
    /// The parts, in order; one part is summarised without a merge.
    pub parts: Vec<PartPlan>,
    /// Tokens one request may carry.
    pub max_chunk_tokens: u64,
}

impl StagePlan {
    /// True when partial summaries are merged by one more call.
    pub fn merges(&self) -> bool {
        self.parts.len() > 1
    }

    /// Summarizer calls when nothing fails: every level-1 chunk, plus the merge.
    pub fn expected_calls(&self) -> usize {
        let chunks: usize = self.parts.iter().map(|part| part.chunks.len()).sum();
        chunks + usize::from(self.merges())
    }
}

/// Plans the staged summary of `messages`: a single part when there are fewer than
/// [`MIN_MESSAGES_FOR_SPLIT`] messages, `parts` is 1, or everything fits one request; otherwise
/// split by token share. Each part gets its chunks and its level-2 plan.
pub fn plan_stages(
    messages: &[Message],
    window_tokens: u64,
    max_chunk_tokens: u64,
    settings: &CompactionSettings,
) -> StagePlan {
    let mut plan = StagePlan {
        parts: Vec::new(),
        max_chunk_tokens,
    };
    if messages.is_empty() {
        return plan;
    }
    let parts = normalize_parts(settings.parts, messages.len());
    let total = estimate_messages_tokens(messages);
    let single = parts <= 1 || messages.len() < MIN_MESSAGES_FOR_SPLIT || total <= max_chunk_tokens;
    let whole = std::iter::once(0..messages.len()).collect();
    let ranges = if single {
        whole
    } else {
        let split = split_messages_by_token_share(messages, parts);
        if split.len() <= 1 { whole } else { split }
    };
    plan.parts = ranges
        .into_iter()
        .map(|range| plan_part(messages, range, window_tokens, max_chunk_tokens, settings))
        .collect();
    plan
}

/// The fallback plan of one part.
pub fn plan_part(
    messages: &[Message],
    range: Range<usize>,
    window_tokens: u64,
    max_chunk_tokens: u64,
    settings: &CompactionSettings,
) -> PartPlan {
    let effective = effective_max(max_chunk_tokens, settings);
    let indices: Vec<usize> = range.clone().filter(|&i| i < messages.len()).collect();
    let chunks = to_ranges(group_by_max(units_of(messages, &indices), effective));
    let mut small = Vec::new();
    let mut oversized_notes = Vec::new();
    for &index in &indices {
        let Some(message) = messages.get(index) else {
            continue;
        };
        if is_oversized_for_summary(message, window_tokens, settings) {
            oversized_notes.push(oversized_note(message));
        } else {
            small.push(index);
        }
    }
    let small_chunks = group_by_max(units_of(messages, &small), effective);
    PartPlan {
        range,
        chunks,
        small_chunks,
        oversized_notes,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::compaction::split::tests::{settings, text};
    use crate::message::Role;

    #[test]
    fn stage_plan_single_part_when_small() {
        let messages: Vec<Message> = (0..3).map(|_| text(Role::User, 400)).collect();
        let plan = plan_stages(&messages, 200_000, 10_000, &settings());
        assert_eq!(plan.parts.len(), 1);
        assert!(!plan.merges());
        assert_eq!(plan.expected_calls(), 1);
    }

    #[test]
    fn stage_plan_splits_into_parts_with_fallback_notes() {
        let mut messages: Vec<Message> = (0..6).map(|_| text(Role::User, 4000)).collect();
        messages.push(text(Role::Assistant, 60_000));
        let plan = plan_stages(&messages, 20_000, 2_000, &settings());
        assert_eq!(plan.parts.len(), 2);
        assert!(plan.merges());
        let last = plan.parts.last().unwrap();
        assert_eq!(last.oversized(), 1);
        assert!(!last.small_chunks.iter().flatten().any(|&i| i == 6));
    }
}
