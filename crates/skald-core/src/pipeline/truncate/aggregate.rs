//! The aggregate tool-result budget (OpenClaw 2026.9, `buildAggregateToolResultReplacements`):
//! after the per-result cuts, all tool results of a request together may hold at most
//! `max(per-result budget × 4, window × 4 × 0.5)` characters of text.
//!
//! The algorithm is OpenClaw's live one (`truncateOversizedToolResultsInMessages` with the
//! session's projection state):
//! - Nothing happens when fewer than two results hold text, or their text fits the budget.
//! - **Protected:** the trailing results (those after the last assistant message — the ones the
//!   model is about to read), and every result a previous request of the session already sent
//!   (OpenClaw freezes each result's projection once it is sent, so its bytes never change).
//! - The excess is taken from the other results **oldest first**: each is cut (head or head and
//!   tail, with no minimum kept) to whatever leaves the rest of the excess for the results after
//!   it, the cut never going below the marker; if that is not enough, a second pass replaces
//!   results by [`AGGREGATE_ELISION_MARKER`] where that is shorter still.
//! - A result cut this way is frozen: later requests repeat the same bytes ([`TruncateMemory`]).
//!
//! In a live tool loop every new result arrives trailing and is frozen before it stops trailing,
//! so the aggregate budget only bites on histories a session did not send itself (a restored or
//! imported session, a host that dropped its state). skald reproduces exactly that.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::message::{Block, Content, Message, Role, TextBlock, ToolResult};
use crate::refs::{NewRef, REF_PREFIX, RefPayload};
use crate::tokens::{CHARS_PER_TOKEN, estimate_string_chars};

use super::{
    TruncateChange, TruncateMode, TruncateReport, TruncateSettings, result_budget_chars,
    text_blocks, truncate_result,
};

/// What replaces a result elided for the aggregate budget (OpenClaw's text).
pub const AGGREGATE_ELISION_MARKER: &str = "[tool result elided: aggregate tool-result budget exceeded; rerun the command if the output is needed]";

/// The aggregate budget's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AggregateSettings {
    /// Whether all results of a request share a budget.
    pub enabled: bool,
    /// The budget is at least this many per-result budgets (OpenClaw: 4).
    pub per_result_multiple: usize,
    /// … and at least this share of the window's characters (OpenClaw: 0.5).
    pub window_share: f64,
}

impl Default for AggregateSettings {
    fn default() -> Self {
        AggregateSettings {
            enabled: false,
            per_result_multiple: 4,
            window_share: 0.5,
        }
    }
}

impl AggregateSettings {
    /// Rejects settings that cannot be what the author meant.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.window_share.is_finite() && (0.0..=1.0).contains(&self.window_share)) {
            return Err(format!(
                "window_share: expected a ratio between 0 and 1, found {}",
                self.window_share
            ));
        }
        if self.enabled && self.per_result_multiple == 0 && self.window_share == 0.0 {
            return Err(
                "per_result_multiple and window_share are both 0: the budget would be 0".to_owned(),
            );
        }
        Ok(())
    }
}

/// `max(per-result budget × per_result_multiple, floor(window × 4 × window_share))` characters.
pub fn aggregate_budget_chars(window_tokens: u64, settings: &TruncateSettings) -> usize {
    let per_result = result_budget_chars(window_tokens, settings);
    let window_chars = usize::try_from(window_tokens)
        .unwrap_or(usize::MAX)
        .saturating_mul(CHARS_PER_TOKEN);
    let share = (window_chars as f64 * settings.aggregate.window_share).floor();
    let share = if share.is_finite() && share > 0.0 {
        share as usize
    } else {
        0
    };
    per_result
        .saturating_mul(settings.aggregate.per_result_multiple)
        .max(share)
        .max(1)
}

/// What a session's earlier requests sent, for the aggregate budget: the results already sent
/// (their bytes are frozen) and the cuts made to fit the budget, repeated byte for byte.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TruncateMemory {
    sent: HashSet<String>,
    frozen_cuts: HashMap<String, Content>,
}

impl TruncateMemory {
    /// True when the result answering `call_id` was sent by an earlier request.
    pub fn was_sent(&self, call_id: &str) -> bool {
        self.sent.contains(call_id)
    }

    /// Bytes this memory holds, for memory accounting.
    pub fn approx_bytes(&self) -> usize {
        let sent: usize = self.sent.iter().map(|id| id.len() + 32).sum();
        let cuts: usize = self
            .frozen_cuts
            .iter()
            .map(|(id, blocks)| id.len() + text_blocks(blocks).map(str::len).sum::<usize>() + 64)
            .sum();
        sent + cuts
    }

    pub(super) fn remember_sent(&mut self, messages: &[Message]) {
        for message in messages {
            for result in message.tool_results() {
                if !self.sent.contains(&result.call_id) {
                    self.sent.insert(result.call_id.clone());
                }
            }
        }
    }
}

/// True when an earlier request cut `result` for the aggregate budget.
pub(super) fn is_frozen(result: &ToolResult, memory: &TruncateMemory) -> bool {
    memory.frozen_cuts.contains_key(&result.call_id)
}

/// Puts back the cut an earlier request made to `result` for the aggregate budget; false when
/// there was none.
pub(super) fn repeat_frozen(result: &mut ToolResult, memory: &TruncateMemory) -> bool {
    match memory.frozen_cuts.get(&result.call_id) {
        Some(content) => {
            result.content = content.clone();
            true
        }
        None => false,
    }
}

/// A result the aggregate pass may cut.
struct Candidate {
    message: usize,
    block: usize,
    chars: usize,
    cut_before: bool,
}

/// Cuts the oldest unsent, non-trailing results until all results fit `budget` (see the module
/// docs), records those cuts in `memory`, and reports them.
pub(super) fn apply(
    messages: &mut [Message],
    settings: &TruncateSettings,
    budget: usize,
    memory: &mut TruncateMemory,
    report: &mut TruncateReport,
    new_refs: &mut Vec<NewRef>,
) {
    let last_assistant = messages.iter().rposition(|m| m.role == Role::Assistant);
    let already_cut: HashSet<(usize, usize)> = report
        .changes
        .iter()
        .map(|c| (c.message_index, c.block_index))
        .collect();
    let mut total = 0usize;
    let mut with_text = 0usize;
    let mut candidates = Vec::new();
    for (message_index, message) in messages.iter().enumerate() {
        for (block_index, block) in message.content.iter().enumerate() {
            let Block::ToolResult(result) = block else {
                continue;
            };
            let chars: usize = text_blocks(&result.content)
                .map(estimate_string_chars)
                .sum();
            if chars == 0 {
                continue;
            }
            total += chars;
            with_text += 1;
            let trailing = last_assistant.is_none_or(|last| message_index > last);
            if trailing
                || memory.sent.contains(&result.call_id)
                || memory.frozen_cuts.contains_key(&result.call_id)
            {
                continue;
            }
            candidates.push(Candidate {
                message: message_index,
                block: block_index,
                chars,
                cut_before: already_cut.contains(&(message_index, block_index)),
            });
        }
    }
    if with_text < 2 || total <= budget {
        return;
    }
    let mut excess = total - budget;
    let floor = super::notice::notice_len(1);
    for clear in [false, true] {
        for candidate in &mut candidates {
            if excess == 0 {
                break;
            }
            let Some(result) = messages
                .get_mut(candidate.message)
                .and_then(|m| m.content.get_mut(candidate.block))
                .and_then(Block::as_tool_result_mut)
            else {
                continue;
            };
            let before = candidate.chars;
            let (mode, ref_id) = if clear {
                let Some(ref_id) = elide(result, settings, new_refs) else {
                    continue;
                };
                (TruncateMode::Elided, ref_id)
            } else {
                if before <= floor {
                    continue;
                }
                let target = floor.max(before.saturating_sub(excess));
                let Some(cut) = truncate_result(result, target, 0, settings) else {
                    continue;
                };
                let ref_id = cut.new_ref.as_ref().map(|r| r.id.to_string());
                new_refs.extend(cut.new_ref);
                (TruncateMode::Aggregate, ref_id)
            };
            let after: usize = text_blocks(&result.content)
                .map(estimate_string_chars)
                .sum();
            if after >= before {
                continue;
            }
            excess = excess.saturating_sub(before - after);
            candidate.chars = after;
            if !candidate.cut_before {
                candidate.cut_before = true;
                report.truncated += 1;
            }
            report.aggregate_truncated += 1;
            report.chars_before += before;
            report.chars_after += after;
            memory
                .frozen_cuts
                .insert(result.call_id.clone(), result.content.clone());
            report.changes.push(TruncateChange {
                message_index: candidate.message,
                block_index: candidate.block,
                call_id: result.call_id.clone(),
                tool_name: result.tool_name.clone(),
                mode,
                chars_before: before,
                chars_after: after,
                ref_id,
                reason: format!(
                    "tool results hold {total} chars, over the aggregate budget of {budget} \
                     chars; cut oldest first"
                ),
            });
        }
    }
}

/// Replaces `result`'s text by the elision marker (naming a ref of what it held, when the policy
/// keeps originals); `None` when that would not make it shorter. The inner `Option` is the ref.
fn elide(
    result: &mut ToolResult,
    settings: &TruncateSettings,
    new_refs: &mut Vec<NewRef>,
) -> Option<Option<String>> {
    let before: usize = text_blocks(&result.content)
        .map(estimate_string_chars)
        .sum();
    let marker_len = if settings.keep_originals {
        elided_with_ref(&crate::refs::RefId::of_bytes(b"")).len()
    } else {
        AGGREGATE_ELISION_MARKER.len()
    };
    if marker_len >= before {
        return None;
    }
    let original = std::mem::take(&mut result.content);
    let (text, ref_id) = if settings.keep_originals {
        let new_ref = NewRef::new(RefPayload::new(original.clone()));
        let text = elided_with_ref(&new_ref.id);
        let id = new_ref.id.to_string();
        new_refs.push(new_ref);
        (text, Some(id))
    } else {
        (AGGREGATE_ELISION_MARKER.to_owned(), None)
    };
    let mut text = Some(text);
    let mut content = Vec::with_capacity(original.len());
    // By reference: the original may be shared with the message the engine holds, and its text
    // is not kept here.
    for block in original.iter() {
        match block {
            // The first text block carries the marker; the others go.
            Block::Text(first) => {
                if let Some(text) = text.take() {
                    content.push(Block::Text(TextBlock {
                        text,
                        extra: first.extra.clone(),
                    }));
                }
            }
            Block::Image(_)
            | Block::Thinking(_)
            | Block::ToolCall(_)
            | Block::ToolResult(_)
            | Block::Opaque(_) => content.push(block.clone()),
        }
    }
    result.content = content.into();
    Some(ref_id)
}

fn elided_with_ref(id: &crate::refs::RefId) -> String {
    format!(
        "[tool result elided: aggregate tool-result budget exceeded; full output: \
         {REF_PREFIX}{id}] - call fetch_original_data with this ref id to read it.]"
    )
}
