//! Shrinking the kept tail when it alone leaves no room under `window − reserve`: the recent
//! turns a compaction keeps verbatim can themselves be huge (a harness's own summary, a task
//! notification, a pasted log, a long tool output), and compacting the history before them then
//! frees too little — the context stays far above target and the next request compacts again.
//!
//! Two passes, each only when the one before left the tail over its budget:
//! 1. The largest tool results are cut through the truncate stage, down to one common size (the
//!    largest that fits, never below the stage's minimum).
//! 2. The middles of every large text — tool output, user and assistant text alike — are cut
//!    down to one common size (the largest that fits, never below [`MIN_MIDDLE_KEEP_CHARS`]),
//!    keeping the head and the end, with a marker naming the ref that holds the original.
//!
//! Either way skald never loses data: every cut text's original comes back as a
//! [`NewRef`], which the caller stores before anything naming it reaches a model, and the kept
//! messages replace the session's copies on a new branch (the originals stay in the session).

use super::outcome::TailTruncation;
use crate::message::{Block, Message, TextBlock};
use crate::pipeline::truncate::{DEFAULT_MIN_KEEP_CHARS, MARKER_RESERVE_CHARS};
use crate::pipeline::{TruncateReport, TruncateSettings, truncate};
use crate::refs::{NewRef, REF_PREFIX, RefId, RefPayload};
use crate::tokens::{CHARS_PER_TOKEN, estimate_message_tokens, estimate_string_chars};

/// Characters of a text left (head and end together) after its middle is cut.
pub const MIN_MIDDLE_KEEP_CHARS: usize = 600;

/// Share of the kept characters that goes to the head; the rest is the text's end, where
/// errors, results and the last words of a message usually are.
const HEAD_SHARE: f64 = 0.7;

/// Rounds of "cut to a common size, measure, cut deeper": the token estimate of a cut message
/// is not exactly its characters over [`CHARS_PER_TOKEN`] (CJK, markers).
const MIDDLE_CUT_ROUNDS: usize = 4;

fn visible_tokens(messages: &[Message]) -> u64 {
    messages
        .iter()
        .filter(|message| message.is_model_visible())
        .map(estimate_message_tokens)
        .sum()
}

/// The kept tail brought within `budget_tokens` as far as it goes (see the module docs), or
/// `None` when nothing in it could be cut.
pub fn shrink_tail(
    tail: &[Message],
    tail_tokens: u64,
    budget_tokens: u64,
    window_tokens: u64,
) -> Option<TailTruncation> {
    let (mut messages, mut new_refs, report) =
        truncate_results(tail, tail_tokens, budget_tokens, window_tokens)
            .unwrap_or_else(|| (tail.to_vec(), Vec::new(), TruncateReport::default()));
    let mut tokens_after = visible_tokens(&messages);
    let mut middle_cuts = 0;
    if tokens_after > budget_tokens {
        let (cut, refs) = cut_middles(messages, budget_tokens);
        messages = cut;
        middle_cuts = refs.len();
        new_refs.extend(refs);
        tokens_after = visible_tokens(&messages);
    }
    if report.is_noop() && middle_cuts == 0 {
        return None;
    }
    Some(TailTruncation {
        still_over_budget: tokens_after > budget_tokens,
        messages,
        new_refs,
        report,
        middle_cuts,
        tokens_before: tail_tokens,
        tokens_after,
    })
}

/// Pass 1: the tail's largest tool results truncated to one common size, the largest that brings
/// the tail within `budget_tokens` (never below the truncate stage's minimum), through
/// [`truncate`]. `None` when no result can be cut.
fn truncate_results(
    tail: &[Message],
    tail_tokens: u64,
    budget_tokens: u64,
    window_tokens: u64,
) -> Option<(Vec<Message>, Vec<NewRef>, TruncateReport)> {
    let needed_chars = tail_tokens
        .saturating_sub(budget_tokens)
        .saturating_mul(CHARS_PER_TOKEN as u64);
    let sizes: Vec<u64> = tail
        .iter()
        .flat_map(|message| message.tool_results())
        .map(|result| {
            result
                .content
                .iter()
                .filter_map(Block::as_text)
                .map(|text| estimate_string_chars(&text.text) as u64)
                .sum()
        })
        .collect();
    let floor = (DEFAULT_MIN_KEEP_CHARS + MARKER_RESERVE_CHARS) as u64;
    let largest = sizes.iter().copied().max()?;
    if largest <= floor {
        return None;
    }
    let freed = |cap: u64| -> u64 { sizes.iter().map(|size| size.saturating_sub(cap)).sum() };
    // The largest cap that frees enough; the floor when none does.
    let (mut low, mut high) = (floor, largest);
    if freed(floor) >= needed_chars {
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if freed(middle) >= needed_chars {
                low = middle;
            } else {
                high = middle;
            }
        }
    }
    let settings = TruncateSettings {
        enabled: true,
        max_context_share: 1.0,
        hard_max_chars: usize::try_from(low).unwrap_or(usize::MAX),
        min_keep_chars: DEFAULT_MIN_KEEP_CHARS,
        ..TruncateSettings::default()
    };
    let outcome = truncate(tail.to_vec(), &settings, window_tokens);
    if outcome.report.is_noop() {
        return None;
    }
    Some((outcome.messages, outcome.new_refs, outcome.report))
}

/// Where a cuttable text sits: a text block of a message, or a text block of a tool result.
#[derive(Debug, Clone, Copy)]
struct TextAt {
    message: usize,
    block: usize,
    inner: Option<usize>,
    chars: usize,
}

fn texts(messages: &[Message]) -> Vec<TextAt> {
    let mut out = Vec::new();
    for (message_index, message) in messages.iter().enumerate() {
        if !message.is_model_visible() {
            continue;
        }
        for (block_index, block) in message.content.iter().enumerate() {
            match block {
                Block::Text(text) => out.push(TextAt {
                    message: message_index,
                    block: block_index,
                    inner: None,
                    chars: text.text.chars().count(),
                }),
                Block::ToolResult(result) => {
                    for (inner, inner_block) in result.content.iter().enumerate() {
                        if let Block::Text(text) = inner_block {
                            out.push(TextAt {
                                message: message_index,
                                block: block_index,
                                inner: Some(inner),
                                chars: text.text.chars().count(),
                            });
                        }
                    }
                }
                Block::Image(_) | Block::Thinking(_) | Block::ToolCall(_) | Block::Opaque(_) => {}
            }
        }
    }
    out
}

fn text_block_mut<'m>(messages: &'m mut [Message], at: &TextAt) -> Option<&'m mut TextBlock> {
    let block = messages.get_mut(at.message)?.content.get_mut(at.block)?;
    let block = match (block, at.inner) {
        (Block::ToolResult(result), Some(inner)) => result.content.get_mut(inner)?,
        (block, None) => block,
        (_, Some(_)) => return None,
    };
    match block {
        Block::Text(text) => Some(text),
        Block::Image(_)
        | Block::Thinking(_)
        | Block::ToolCall(_)
        | Block::ToolResult(_)
        | Block::Opaque(_) => None,
    }
}

/// The marker standing where the middle of a text was cut.
pub fn middle_cut_marker(omitted: usize, id: &RefId) -> String {
    format!(
        "\n[... {omitted} chars cut from the middle to fit the context; full text: \
         {REF_PREFIX}{id}] - call fetch_original_data with this ref id to read it ...]\n"
    )
}

/// `text` with its middle cut so that about `keep` characters of it remain (head and end),
/// the marker naming `id` between them; `None` when it is short enough already.
fn cut_middle(text: &str, keep: usize, id: &RefId) -> Option<String> {
    let total = text.chars().count();
    if total <= keep + MARKER_RESERVE_CHARS {
        return None;
    }
    let head_chars = (keep as f64 * HEAD_SHARE) as usize;
    let tail_chars = keep.saturating_sub(head_chars);
    let head_end = text
        .char_indices()
        .nth(head_chars)
        .map_or(text.len(), |(at, _)| at);
    let tail_start = text
        .char_indices()
        .nth(total - tail_chars)
        .map_or(text.len(), |(at, _)| at)
        .max(head_end);
    let head = text.get(..head_end).unwrap_or_default();
    let tail = text.get(tail_start..).unwrap_or_default();
    let omitted = total - head_chars - tail_chars;
    Some(format!("{head}{}{tail}", middle_cut_marker(omitted, id)))
}

/// Pass 2: every text over a common size has its middle cut (see the module docs), the size the
/// largest that brings the tail within `budget_tokens`, never below
/// [`MIN_MIDDLE_KEEP_CHARS`]. Returns the messages and the originals of the cut texts.
fn cut_middles(mut messages: Vec<Message>, budget_tokens: u64) -> (Vec<Message>, Vec<NewRef>) {
    let originals = messages.clone();
    let found = texts(&originals);
    let floor = MIN_MIDDLE_KEEP_CHARS;
    let largest = found.iter().map(|at| at.chars).max().unwrap_or(0);
    if largest <= floor + MARKER_RESERVE_CHARS {
        return (messages, Vec::new());
    }
    let cost = |keep: usize| keep + MARKER_RESERVE_CHARS;
    let freed = |keep: usize| -> u64 {
        found
            .iter()
            .map(|at| at.chars.saturating_sub(cost(keep)) as u64)
            .sum()
    };
    let mut needed = visible_tokens(&messages)
        .saturating_sub(budget_tokens)
        .saturating_mul(CHARS_PER_TOKEN as u64);
    let mut new_refs = Vec::new();
    for _ in 0..MIDDLE_CUT_ROUNDS {
        // The largest size that frees enough; the floor when none does.
        let (mut low, mut high) = (floor, largest);
        if freed(floor) >= needed {
            while high - low > 1 {
                let middle = low + (high - low) / 2;
                if freed(middle) >= needed {
                    low = middle;
                } else {
                    high = middle;
                }
            }
        }
        messages = originals.clone();
        new_refs.clear();
        for at in &found {
            let Some(block) = text_block_mut(&mut messages, at) else {
                continue;
            };
            if at.chars <= cost(low) {
                continue;
            }
            let new_ref = NewRef::new(RefPayload::new(vec![Block::Text(block.clone())]));
            if let Some(cut) = cut_middle(&block.text, low, &new_ref.id) {
                block.text = cut;
                new_refs.push(new_ref);
            }
        }
        let tokens = visible_tokens(&messages);
        if tokens <= budget_tokens || low == floor {
            break;
        }
        needed += (tokens - budget_tokens).saturating_mul(CHARS_PER_TOKEN as u64);
    }
    (messages, new_refs)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::message::Role;
    use crate::refs::ref_ids_in;

    #[test]
    fn a_cut_middle_keeps_head_end_and_names_the_original() {
        let text = format!("HEAD{}END", "x".repeat(10_000));
        let id = RefPayload::new(vec![Block::text(text.clone())]).id();
        let cut = cut_middle(&text, 1_000, &id).unwrap();
        assert!(cut.starts_with("HEAD"));
        assert!(cut.ends_with("END"));
        assert_eq!(ref_ids_in(&cut), std::slice::from_ref(&id));
        assert!(cut.chars().count() < 1_000 + MARKER_RESERVE_CHARS);
        assert_eq!(cut_middle("short", 1_000, &id), None);
        // Characters, not bytes.
        let chinese = "数据".repeat(3_000);
        assert!(cut_middle(&chinese, 1_000, &id).is_some());
    }

    #[test]
    fn huge_user_and_assistant_texts_are_cut_to_the_budget() {
        let tail = vec![
            Message::text(Role::User, "A".repeat(200_000)),
            Message::text(Role::Assistant, "B".repeat(100_000)),
            Message::text(Role::User, "short ask"),
        ];
        let tokens = visible_tokens(&tail);
        let shrunk = shrink_tail(&tail, tokens, 10_000, 100_000).unwrap();
        assert!(shrunk.tokens_after <= 10_000, "{}", shrunk.tokens_after);
        assert!(!shrunk.still_over_budget);
        assert_eq!(shrunk.middle_cuts, 2);
        assert_eq!(shrunk.new_refs.len(), 2);
        assert_eq!(shrunk.messages[2], tail[2]);
        // Every original is behind the ref its marker names.
        for (message, original) in shrunk.messages.iter().zip(&tail).take(2) {
            let ids = ref_ids_in(&message.plain_text());
            let stored = shrunk.new_refs.iter().find(|r| r.id == ids[0]).unwrap();
            assert_eq!(stored.payload.text(), original.plain_text());
        }
    }
}
