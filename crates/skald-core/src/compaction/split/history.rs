//! Pruning the history to its share of the context window before summarising: the oldest
//! chunks go first ([`prune_history_for_context_share`]), and tool results whose call was dropped
//! go with it, so the kept history still pairs every result with its call.

use std::collections::HashSet;

use super::chunk::normalize_parts;
use super::split_messages_by_token_share;
use crate::compaction::settings::CompactionSettings;
use crate::message::{Block, ContentForm, Message, Role};
use crate::repair::{RepairReport, repair_pairing};
use crate::tokens::estimate_messages_tokens;

/// What [`prune_history_for_context_share`] kept and dropped.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPrune {
    /// The newer history, pairing repaired.
    pub kept: Vec<Message>,
    /// The oldest history, pairing repaired: summarised first, its summary passed on as the
    /// previous summary of the main pass.
    pub dropped: Vec<Message>,
    /// How many chunks were dropped from the front.
    pub dropped_chunks: usize,
    /// Their size.
    pub dropped_tokens: u64,
    /// The size of what is kept.
    pub kept_tokens: u64,
    /// The budget the kept history was brought under.
    pub budget_tokens: u64,
    /// Repairs made to `kept` after the cut (orphan results of dropped calls move to `dropped`
    /// first, so this is normally clean).
    pub repair: RepairReport,
}

/// The history budget when new content is large: `floor(window × max_history_share × margin)`,
/// at least 1.
pub fn history_budget_tokens(window_tokens: u64, settings: &CompactionSettings) -> u64 {
    ((window_tokens as f64 * settings.max_history_share * settings.safety_margin).floor() as u64)
        .max(1)
}

/// Drops the oldest part of `messages` until the rest is within
/// [`history_budget_tokens`] (`pruneHistoryForContextShare`): split by token share into
/// `settings.parts`, drop the first part, repeat; stop when one part is left. Results left in the
/// kept part whose calls were dropped follow their calls into `dropped`; both sides then get
/// [`repair_pairing`].
pub fn prune_history_for_context_share(
    messages: Vec<Message>,
    window_tokens: u64,
    settings: &CompactionSettings,
) -> HistoryPrune {
    let budget_tokens = history_budget_tokens(window_tokens, settings);
    let parts = normalize_parts(settings.parts, messages.len());
    let mut kept = messages;
    let mut dropped: Vec<Message> = Vec::new();
    let mut dropped_chunks = 0;
    while !kept.is_empty() && estimate_messages_tokens(&kept) > budget_tokens {
        let pieces = split_messages_by_token_share(&kept, parts);
        if pieces.len() <= 1 {
            break;
        }
        let Some(first) = pieces.into_iter().next() else {
            break;
        };
        dropped.extend(kept.drain(first));
        dropped_chunks += 1;
        move_orphaned_results(&mut kept, &mut dropped);
    }
    let (dropped, _) = repair_pairing(dropped);
    let (kept, repair) = repair_pairing(kept);
    HistoryPrune {
        dropped_tokens: estimate_messages_tokens(&dropped),
        kept_tokens: estimate_messages_tokens(&kept),
        kept,
        dropped,
        dropped_chunks,
        budget_tokens,
        repair,
    }
}

/// Moves tool-result messages of `kept` that answer only calls in `dropped` (and no earlier call
/// in `kept`) to the end of `dropped`, where repair puts them after their calls.
fn move_orphaned_results(kept: &mut Vec<Message>, dropped: &mut Vec<Message>) {
    let dropped_calls: HashSet<String> = dropped
        .iter()
        .flat_map(|message| message.tool_calls().map(|call| call.id.clone()))
        .collect();
    if dropped_calls.is_empty() {
        return;
    }
    let mut kept_calls: HashSet<String> = HashSet::new();
    let mut remaining = Vec::with_capacity(kept.len());
    for message in kept.drain(..) {
        let orphaned = message.role == Role::ToolResult
            && message.tool_results().next().is_some()
            && message.tool_results().all(|result| {
                dropped_calls.contains(&result.call_id) && !kept_calls.contains(&result.call_id)
            });
        kept_calls.extend(message.tool_calls().map(|call| call.id.clone()));
        if orphaned {
            // Only the results follow their calls: what shares the message with them (Anthropic's
            // `[tool_result, text]`, the user's next instruction) stays in the kept history.
            let Message {
                role,
                content,
                meta,
                content_form,
                extra,
            } = message;
            let (results, others): (Vec<Block>, Vec<Block>) = content
                .into_iter()
                .partition(|block| matches!(block, Block::ToolResult(_)));
            if !others.is_empty() {
                remaining.push(Message {
                    role: Role::User,
                    content: others.into(),
                    meta: meta.clone(),
                    content_form: ContentForm::Blocks,
                    extra: extra.clone(),
                });
            }
            dropped.push(Message {
                role,
                content: results.into(),
                meta,
                content_form,
                extra,
            });
        } else {
            remaining.push(message);
        }
    }
    *kept = remaining;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::compaction::split::tests::{calls, result, settings, text};

    #[test]
    fn prune_history_drops_oldest_chunks_until_within_budget() {
        // Seed test: 4 × 4000 chars, window 2000, share 0.5 → 2 chunks dropped, [4] kept.
        let messages: Vec<Message> = (0..4)
            .map(|i| Message::text(Role::User, format!("{i}{}", "x".repeat(3999))))
            .collect();
        let pruned = prune_history_for_context_share(messages.clone(), 2_000, &settings());
        assert_eq!(pruned.dropped_chunks, 2);
        assert_eq!(pruned.kept, messages[3..].to_vec());
        assert_eq!(pruned.dropped, messages[..3].to_vec());
        assert_eq!(pruned.budget_tokens, 1_200);
    }

    #[test]
    fn prune_history_within_budget_changes_nothing() {
        let messages: Vec<Message> = (0..4).map(|_| text(Role::User, 100)).collect();
        let pruned = prune_history_for_context_share(messages.clone(), 200_000, &settings());
        assert_eq!(pruned.dropped_chunks, 0);
        assert_eq!(pruned.kept, messages);
        assert!(pruned.dropped.is_empty());
    }

    #[test]
    fn prune_history_keeps_result_whose_call_is_kept() {
        let messages = vec![
            text(Role::User, 4000),
            text(Role::User, 4000),
            calls(&["a"]),
            result("a", 4000),
        ];
        let pruned = prune_history_for_context_share(messages, 3_000, &settings());
        assert!(pruned.kept.iter().any(|m| m.tool_calls().count() == 1));
        assert!(pruned.kept.iter().any(|m| m.role == Role::ToolResult));
        assert!(pruned.repair.is_clean());
    }

    #[test]
    fn prune_history_moves_orphaned_results_of_a_dropped_call() {
        // Call "a" is in the dropped part; two displaced results of it sit in the kept part.
        let messages = vec![
            calls(&["a", "b"]),
            text(Role::User, 8000),
            result("a", 10),
            result("b", 10),
            text(Role::User, 8000),
        ];
        let pruned = prune_history_for_context_share(messages, 4_000, &settings());
        assert!(
            pruned.kept.iter().all(|m| m.role != Role::ToolResult),
            "{:?}",
            pruned.kept
        );
        let dropped_results: usize = pruned
            .dropped
            .iter()
            .map(|m| m.tool_results().count())
            .sum();
        assert_eq!(dropped_results, 2);
    }

    #[test]
    fn prune_history_keeps_text_beside_orphaned_results() {
        // Anthropic's `[tool_result, text]`: the results follow their dropped call, the user's
        // instruction beside them stays in the kept history.
        let mut beside = result("a", 10);
        beside.content.push(Block::text("now delete b.txt"));
        let messages = vec![
            calls(&["a"]),
            text(Role::User, 8000),
            beside,
            text(Role::User, 8000),
        ];
        let pruned = prune_history_for_context_share(messages, 4_000, &settings());
        assert!(pruned.kept.iter().all(|m| m.role != Role::ToolResult));
        assert!(
            pruned
                .kept
                .iter()
                .any(|m| m.role == Role::User && m.plain_text() == "now delete b.txt"),
            "{:?}",
            pruned.kept
        );
        assert!(pruned.dropped.iter().any(|m| m.tool_results().count() == 1));
    }
}
