//! Cutting a span into pieces a summarizer can take: units that keep a tool call with its
//! results, chunks under a token limit ([`chunk_messages_by_max_tokens`]), parts of equal token
//! share ([`split_messages_by_token_share`]), the chunk size for a window
//! ([`compute_adaptive_chunk_ratio`], [`max_chunk_tokens`]) and what counts as too large to
//! summarise at all ([`is_oversized_for_summary`]).

use std::ops::Range;

use super::OVERSIZED_SHARE;
use crate::compaction::settings::CompactionSettings;
use crate::message::{Message, Role};
use crate::tokens::{estimate_message_tokens, estimate_messages_tokens};

/// A run of message indices that must stay together, and its estimated tokens.
#[derive(Debug, Clone)]
pub(super) struct Unit {
    indices: Vec<usize>,
    tokens: u64,
}

fn pins_results(message: &Message) -> bool {
    message.role == Role::Assistant
        && message.tool_calls().next().is_some()
        && !message
            .meta
            .stop_reason
            .as_ref()
            .is_some_and(|reason| reason.is_incomplete())
}

/// The units of `messages` restricted to `indices` (ascending). Tool-result messages join the
/// unit of an assistant with completed calls when they directly follow it (in `messages` and in
/// `indices`).
pub(super) fn units_of(messages: &[Message], indices: &[usize]) -> Vec<Unit> {
    let mut units: Vec<Unit> = Vec::new();
    let mut open = false;
    let mut previous: Option<usize> = None;
    for &index in indices {
        let Some(message) = messages.get(index) else {
            continue;
        };
        let tokens = estimate_message_tokens(message);
        let adjacent = previous.is_some_and(|p| p + 1 == index);
        let joins = open && adjacent && message.role == Role::ToolResult;
        match (joins, units.last_mut()) {
            (true, Some(unit)) => {
                unit.indices.push(index);
                unit.tokens += tokens;
            }
            (true, None) | (false, _) => {
                open = pins_results(message);
                units.push(Unit {
                    indices: vec![index],
                    tokens,
                });
            }
        }
        previous = Some(index);
    }
    units
}

fn all_indices(len: usize) -> Vec<usize> {
    (0..len).collect()
}

/// Contiguous groups back to ranges (a group of a contiguous input is contiguous).
pub(super) fn to_ranges(groups: Vec<Vec<usize>>) -> Vec<Range<usize>> {
    groups
        .into_iter()
        .filter_map(|group| {
            let first = *group.first()?;
            let last = *group.last()?;
            Some(first..last + 1)
        })
        .collect()
}

/// Groups of units, each at most `effective_max` tokens unless one unit alone is larger, in
/// which case it closes its own group.
pub(super) fn group_by_max(units: Vec<Unit>, effective_max: u64) -> Vec<Vec<usize>> {
    let mut groups = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut current_tokens = 0u64;
    for unit in units {
        if !current.is_empty() && current_tokens + unit.tokens > effective_max {
            groups.push(std::mem::take(&mut current));
            current_tokens = 0;
        }
        let oversized = unit.tokens > effective_max;
        current.extend(unit.indices);
        current_tokens += unit.tokens;
        if oversized {
            groups.push(std::mem::take(&mut current));
            current_tokens = 0;
        }
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

pub(super) fn normalize_parts(parts: usize, len: usize) -> usize {
    parts.min(len).max(1)
}

/// Splits `messages` into chunks of at most `max_tokens` each, after dividing the limit by the
/// safety margin (`chunkMessagesByMaxTokens`: `effectiveMax = floor(max / 1.2)`, at least 1). A
/// unit larger than the limit gets a chunk of its own.
pub fn chunk_messages_by_max_tokens(
    messages: &[Message],
    max_tokens: u64,
    settings: &CompactionSettings,
) -> Vec<Range<usize>> {
    let effective_max = effective_max(max_tokens, settings);
    let units = units_of(messages, &all_indices(messages.len()));
    to_ranges(group_by_max(units, effective_max))
}

pub(super) fn effective_max(max_tokens: u64, settings: &CompactionSettings) -> u64 {
    ((max_tokens as f64 / settings.safety_margin).floor() as u64).max(1)
}

/// Splits `messages` into at most `parts` consecutive pieces of about equal tokens
/// (`splitMessagesByTokenShare`): a piece closes before the unit that would take it past
/// `total / parts`, and the last piece takes the rest. Empty input gives no piece.
pub fn split_messages_by_token_share(messages: &[Message], parts: usize) -> Vec<Range<usize>> {
    let units = units_of(messages, &all_indices(messages.len()));
    to_ranges(group_by_share(units, parts))
}

fn group_by_share(units: Vec<Unit>, parts: usize) -> Vec<Vec<usize>> {
    let count: usize = units.iter().map(|unit| unit.indices.len()).sum();
    if count == 0 {
        return Vec::new();
    }
    let parts = normalize_parts(parts, count);
    let total: u64 = units.iter().map(|unit| unit.tokens).sum();
    let target = total as f64 / parts as f64;
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut current_tokens = 0u64;
    for unit in units {
        if groups.len() + 1 < parts
            && !current.is_empty()
            && (current_tokens + unit.tokens) as f64 > target
        {
            groups.push(std::mem::take(&mut current));
            current_tokens = 0;
        }
        current.extend(unit.indices);
        current_tokens += unit.tokens;
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

/// The share of the window one chunk may fill (`computeAdaptiveChunkRatio`): the base ratio,
/// reduced when the average message (with the margin) is over 10% of the window, by twice that
/// average share, never below the minimum ratio.
pub fn compute_adaptive_chunk_ratio(
    messages: &[Message],
    window_tokens: u64,
    settings: &CompactionSettings,
) -> f64 {
    let base = settings.base_chunk_ratio;
    if messages.is_empty() || window_tokens == 0 {
        return base;
    }
    let average = estimate_messages_tokens(messages) as f64 / messages.len() as f64;
    let average_share = average * settings.safety_margin / window_tokens as f64;
    if average_share > 0.1 {
        let reduction = average_share * 2.0;
        // Saturating explicitly: `base − (base − min)` is not exactly `min` in floating point.
        if reduction >= base - settings.min_chunk_ratio {
            return settings.min_chunk_ratio;
        }
        return (base - reduction).max(settings.min_chunk_ratio);
    }
    base
}

/// Tokens of history one summarizer request may carry: `floor(window × ratio) − overhead`, at
/// least 1.
pub fn max_chunk_tokens(window_tokens: u64, ratio: f64, settings: &CompactionSettings) -> u64 {
    let share = (window_tokens as f64 * ratio).floor() as u64;
    share
        .saturating_sub(settings.summarization_overhead_tokens)
        .max(1)
}

/// True when one message, with the margin, is over half the window: too large to summarise.
pub fn is_oversized_for_summary(
    message: &Message,
    window_tokens: u64,
    settings: &CompactionSettings,
) -> bool {
    estimate_message_tokens(message) as f64 * settings.safety_margin
        > window_tokens as f64 * OVERSIZED_SHARE
}

/// The note standing for an oversized message in a level-2 summary:
/// `[Large <role> (~NK tokens) omitted from summary]`.
pub fn oversized_note(message: &Message) -> String {
    let thousands = (estimate_message_tokens(message) as f64 / 1000.0).round() as u64;
    format!(
        "[Large {} (~{thousands}K tokens) omitted from summary]",
        message.role.name()
    )
}

/// The last-resort text when no summarizer call succeeded (level 3).
pub fn fallback_note(messages: usize, oversized: usize) -> String {
    format!(
        "Context contained {messages} messages ({oversized} oversized). Summary unavailable due \
         to size limits."
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::compaction::split::tests::{calls, result, settings, text};
    use crate::message::StopReason;

    #[test]
    fn split_by_token_share_gives_two_even_parts() {
        // Seed test: four 4000-char messages split into [1,2] and [3,4].
        let messages: Vec<Message> = (0..4).map(|_| text(Role::User, 4000)).collect();
        assert_eq!(
            split_messages_by_token_share(&messages, 2),
            vec![0..2, 2..4]
        );
        assert_eq!(split_messages_by_token_share(&messages, 1), vec![0..4]);
        assert_eq!(split_messages_by_token_share(&messages, 9).len(), 4);
        assert!(split_messages_by_token_share(&[], 2).is_empty());
    }

    #[test]
    fn split_never_separates_a_call_from_its_results() {
        let messages = vec![
            text(Role::User, 4000),
            calls(&["a", "b"]),
            result("a", 4000),
            result("b", 4000),
            text(Role::Assistant, 4000),
        ];
        let parts = split_messages_by_token_share(&messages, 2);
        assert_eq!(parts, vec![0..1, 1..5]);
        let chunks = chunk_messages_by_max_tokens(&messages, 1300, &settings());
        assert!(chunks.contains(&(1..4)), "{chunks:?}");
    }

    #[test]
    fn aborted_calls_do_not_pin_results() {
        let mut aborted = calls(&["a"]);
        aborted.meta.stop_reason = Some(StopReason::Aborted);
        let messages = vec![aborted, result("a", 4000)];
        let chunks = chunk_messages_by_max_tokens(&messages, 1000, &settings());
        assert_eq!(chunks, vec![0..1, 1..2]);
    }

    #[test]
    fn chunking_divides_the_limit_by_the_margin() {
        // 1200 tokens / 1.2 = 1000 effective: two 504-token messages do not fit together.
        let messages: Vec<Message> = (0..3).map(|_| text(Role::User, 2000)).collect();
        assert_eq!(
            chunk_messages_by_max_tokens(&messages, 1200, &settings()),
            vec![0..1, 1..2, 2..3]
        );
        assert_eq!(
            chunk_messages_by_max_tokens(&messages, 1300, &settings()),
            vec![0..2, 2..3]
        );
    }

    #[test]
    fn an_oversized_message_closes_its_own_chunk() {
        let messages = vec![
            text(Role::User, 100),
            text(Role::User, 40_000),
            text(Role::User, 100),
        ];
        assert_eq!(
            chunk_messages_by_max_tokens(&messages, 1200, &settings()),
            vec![0..1, 1..2, 2..3]
        );
    }

    #[test]
    fn adaptive_ratio_base_reduced_and_minimum() {
        let s = settings();
        assert_eq!(compute_adaptive_chunk_ratio(&[], 100_000, &s), 0.4);
        let small: Vec<Message> = (0..10).map(|_| text(Role::User, 400)).collect();
        assert_eq!(compute_adaptive_chunk_ratio(&small, 100_000, &s), 0.4);
        // Average 5004 tokens × 1.2 / 50_000 = 0.12 → 0.4 − 0.24 = 0.16.
        let medium: Vec<Message> = (0..2).map(|_| text(Role::User, 20_000)).collect();
        let ratio = compute_adaptive_chunk_ratio(&medium, 50_000, &s);
        assert!((ratio - 0.159_808).abs() < 1e-3, "{ratio}");
        // Average over 20% of the window: clamped to the minimum.
        let huge = vec![text(Role::User, 400_000)];
        assert_eq!(compute_adaptive_chunk_ratio(&huge, 100_000, &s), 0.15);
    }

    #[test]
    fn max_chunk_tokens_subtracts_overhead() {
        let s = settings();
        assert_eq!(max_chunk_tokens(200_000, 0.4, &s), 80_000 - 4096);
        assert_eq!(max_chunk_tokens(8_000, 0.4, &s), 1);
    }

    #[test]
    fn oversized_means_over_half_the_window_with_margin() {
        let s = settings();
        // 40_000 chars + 16 overhead = 10_004 tokens; × 1.2 = 12_005 > 10_000.
        let big = text(Role::Assistant, 40_000);
        assert!(is_oversized_for_summary(&big, 20_000, &s));
        assert!(!is_oversized_for_summary(&big, 30_000, &s));
        assert_eq!(
            oversized_note(&big),
            "[Large assistant (~10K tokens) omitted from summary]"
        );
        assert_eq!(
            fallback_note(5, 2),
            "Context contained 5 messages (2 oversized). Summary unavailable due to size limits."
        );
    }
}
