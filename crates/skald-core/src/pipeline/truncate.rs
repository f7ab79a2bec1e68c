//! Per-result truncation (seed 003 §2.3, OpenClaw `tool-result-truncation.ts`): no single tool
//! result may take more than a share of the context window, and nothing cut is lost — the
//! original goes into a [`NewRef`] and the truncation marker names its ref id (unless the policy
//! emulates OpenClaw, which keeps nothing).
//!
//! Rules this module owns:
//! - **Budget.** [`result_budget_chars`]: `floor(window_tokens × 0.3) × 4` characters, capped at
//!   `hard_max_chars` — 400,000 by default (seed 003's `HARD_MAX_TOOL_RESULT_CHARS`); OpenClaw
//!   2026.9 caps at 16,000, 32,000 from 100k-token windows and 64,000 from 200k (`window_caps`) —
//!   and never below `min_keep_chars` (2,000) + room for the marker, so a tiny window still shows
//!   2,000 characters.
//!   The budget bounds the result's text blocks, marker included: a truncated result never
//!   exceeds it. Non-text blocks (images, opaque blocks) are kept as they are and not counted.
//! - **Characters** are estimator characters ([`crate::tokens::estimate_string_chars`]: CJK code
//!   points weigh 4), the same unit as `window_tokens × 4`, so CJK output is not let through at
//!   four times its token cost. For ASCII they are plain characters.
//! - **Head, or head and tail.** When the last 2,000 characters of a text hold an error
//!   (error/exception/failed/fatal/traceback/panic/stack trace/errno/exit code), a closing JSON
//!   `}`, or a conclusion (total/summary/result/complete/finished/done), the cut keeps head +
//!   marker + tail, the tail taking 30% of the kept part and at most 4,000 characters; otherwise
//!   head + marker. A cut moves back to a newline when one lies within the last 20% of the kept
//!   head (and forward to one within the first 20% of the kept tail), so lines are not split.
//! - **Several text blocks** share the budget in proportion to their size: blocks of at most
//!   `min_keep_chars` are kept whole, larger ones are each cut to their share, each with its own
//!   marker. When that cannot work (the small blocks take over half the budget, or a share would
//!   not fit a marker), the text blocks are joined with newlines into one block, cut as one.
//! - **Aggregate budget** (off by default; OpenClaw 2026.9): see [`aggregate`].
//! - **Originals.** By default the original goes into a ref the marker names. With
//!   `keep_originals = false` (OpenClaw) nothing is stored and the cut ends with OpenClaw's notice
//!   (see [`notice`]).
//! - **Deterministic.** The same result, window and settings always give the same bytes (the ref
//!   id is the hash of the original), and a truncated result is within budget, so running the
//!   stage again changes nothing: the cached prompt prefix stays stable.
//!
//! Cost: results within budget are skipped after an O(1) size check or one pass over their text;
//! only a truncated result is copied (its kept parts) and hashed for its ref id.

use serde::{Deserialize, Serialize};

use crate::message::{Block, Message, TextBlock, ToolResult};

pub mod aggregate;
pub mod notice;

use crate::refs::{NewRef, REF_PREFIX, RefId, RefPayload};
use crate::tokens::estimate::is_cjk;
use crate::tokens::{CHARS_PER_TOKEN, IMAGE_CHARS, estimate_string_chars};
pub use aggregate::{AggregateSettings, TruncateMemory, aggregate_budget_chars};

/// Largest share of the context window one tool result may take.
pub const DEFAULT_MAX_CONTEXT_SHARE: f64 = 0.3;
/// Absolute cap on one tool result, in characters (seed 003 §2.3).
pub const DEFAULT_HARD_MAX_CHARS: usize = 400_000;
/// Characters a truncated result keeps at least.
pub const DEFAULT_MIN_KEEP_CHARS: usize = 2_000;
/// How much of the end of a text is searched for signs that the tail matters.
pub const IMPORTANT_TAIL_WINDOW_CHARS: usize = 2_000;
/// The tail's share of the kept part in head-and-tail mode.
pub const TAIL_SHARE: f64 = 0.3;
/// Longest tail kept in head-and-tail mode.
pub const TAIL_MAX_CHARS: usize = 4_000;
/// A cut moves to a newline lying within this fraction of the kept part's end.
pub const NEWLINE_WINDOW: f64 = 0.2;
/// Room reserved for the truncation marker (it is about 170 characters).
pub const MARKER_RESERVE_CHARS: usize = 256;
/// A block share smaller than marker + this is not worth a marker of its own.
const MIN_BLOCK_CONTENT_CHARS: usize = 64;

/// Words in a text's last characters that mean its tail should be kept.
const TAIL_WORDS: &[&str] = &[
    "error",
    "exception",
    "failed",
    "fatal",
    "traceback",
    "panic",
    "stack trace",
    "errno",
    "exit code",
    "total",
    "summary",
    "result",
    "complete",
    "finished",
    "done",
];

/// A larger cap for larger windows (OpenClaw 2026.9's `resolveAutoLiveToolResultMaxChars`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowCap {
    /// The cap applies to windows of at least this many tokens.
    pub from_window_tokens: u64,
    /// The absolute cap in characters for those windows, instead of `hard_max_chars`.
    pub hard_max_chars: usize,
}

/// How large one tool result may be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TruncateSettings {
    /// Whether the stage runs at all.
    pub enabled: bool,
    /// Largest share of the context window (in tokens × 4 characters) one result may take.
    pub max_context_share: f64,
    /// Absolute cap in characters for windows no `window_caps` entry covers.
    pub hard_max_chars: usize,
    /// Caps for larger windows; of the entries whose `from_window_tokens` the window reaches,
    /// the one with the largest threshold applies.
    pub window_caps: Vec<WindowCap>,
    /// Characters kept at least, even when the window share is smaller.
    pub min_keep_chars: usize,
    /// A budget for all tool results of a request together (off by default).
    pub aggregate: AggregateSettings,
    /// Store each cut result's original as a ref the marker names (skald); off, nothing is kept
    /// and the cut ends with OpenClaw's notice.
    pub keep_originals: bool,
}

impl Default for TruncateSettings {
    fn default() -> Self {
        TruncateSettings {
            enabled: true,
            max_context_share: DEFAULT_MAX_CONTEXT_SHARE,
            hard_max_chars: DEFAULT_HARD_MAX_CHARS,
            window_caps: Vec::new(),
            min_keep_chars: DEFAULT_MIN_KEEP_CHARS,
            aggregate: AggregateSettings::default(),
            keep_originals: true,
        }
    }
}

/// A truncation setting that makes no sense.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TruncateSettingsError {
    /// `max_context_share` is not in (0, 1].
    #[error("max_context_share: expected a number greater than 0 and at most 1, found {0}")]
    Share(f64),
    /// `hard_max_chars` leaves no room for the marker a cut result ends with.
    #[error(
        "hard_max_chars: expected at least min_keep_chars + {MARKER_RESERVE_CHARS} (the marker) \
         = {minimum}, found {found}"
    )]
    HardMaxTooSmall {
        /// The smallest cap that holds `min_keep_chars` and the marker.
        minimum: usize,
        /// The cap given.
        found: usize,
    },
    /// A `window_caps` entry leaves no room for the marker.
    #[error(
        "window_caps[{index}].hard_max_chars: expected at least min_keep_chars + \
         {MARKER_RESERVE_CHARS} (the marker) = {minimum}, found {found}"
    )]
    WindowCapTooSmall {
        /// The entry's position.
        index: usize,
        /// The smallest cap that holds `min_keep_chars` and the marker.
        minimum: usize,
        /// The cap given.
        found: usize,
    },
    /// An aggregate setting that makes no sense.
    #[error("aggregate.{0}")]
    Aggregate(String),
}

impl TruncateSettings {
    /// Rejects settings that cannot be what the author meant.
    pub fn validate(&self) -> Result<(), TruncateSettingsError> {
        let share = self.max_context_share;
        if !(share.is_finite() && share > 0.0 && share <= 1.0) {
            return Err(TruncateSettingsError::Share(share));
        }
        let minimum = self.min_keep_chars.saturating_add(MARKER_RESERVE_CHARS);
        if self.hard_max_chars < minimum {
            return Err(TruncateSettingsError::HardMaxTooSmall {
                minimum,
                found: self.hard_max_chars,
            });
        }
        for (index, cap) in self.window_caps.iter().enumerate() {
            if cap.hard_max_chars < minimum {
                return Err(TruncateSettingsError::WindowCapTooSmall {
                    index,
                    minimum,
                    found: cap.hard_max_chars,
                });
            }
        }
        self.aggregate
            .validate()
            .map_err(TruncateSettingsError::Aggregate)
    }

    /// The absolute cap for a window of `window_tokens`: the `window_caps` entry with the
    /// largest threshold the window reaches, else `hard_max_chars`.
    pub fn hard_max_for(&self, window_tokens: u64) -> usize {
        self.window_caps
            .iter()
            .filter(|cap| window_tokens >= cap.from_window_tokens)
            .max_by_key(|cap| cap.from_window_tokens)
            .map_or(self.hard_max_chars, |cap| cap.hard_max_chars)
    }
}

/// The most characters one tool result's text may take for a window of `window_tokens`.
pub fn result_budget_chars(window_tokens: u64, settings: &TruncateSettings) -> usize {
    let share_tokens = (window_tokens as f64 * settings.max_context_share).floor();
    let share_chars = if share_tokens.is_finite() && share_tokens > 0.0 {
        (share_tokens as usize).saturating_mul(CHARS_PER_TOKEN)
    } else {
        0
    };
    share_chars
        .min(settings.hard_max_for(window_tokens))
        .max(settings.min_keep_chars.saturating_add(MARKER_RESERVE_CHARS))
}

/// How a result was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TruncateMode {
    /// The beginning of each cut block was kept.
    Head,
    /// At least one block kept its beginning and its end (the end looked important).
    HeadAndTail,
    /// The text blocks were joined into one block and cut as one.
    Joined,
    /// Cut further to bring all results under the aggregate budget.
    Aggregate,
    /// Replaced by the elision notice to bring all results under the aggregate budget.
    Elided,
    /// A cut an earlier request made to fit the aggregate budget, repeated (frozen).
    Frozen,
}

/// One truncated result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TruncateChange {
    /// The index of the message holding the result.
    pub message_index: usize,
    /// Index of the result block within its message.
    pub block_index: usize,
    /// The id of the call the result answers.
    pub call_id: String,
    /// The tool that produced the result, when known.
    pub tool_name: Option<String>,
    /// How the text was cut.
    pub mode: TruncateMode,
    /// Text characters of the result before and after.
    pub chars_before: usize,
    /// Text characters after the cut (see `chars_before`).
    pub chars_after: usize,
    /// The ref holding the original (also in [`TruncateOutcome::new_refs`]); `None` when the
    /// policy keeps no originals.
    pub ref_id: Option<String>,
    /// Why the result was cut, with the numbers that decided it.
    pub reason: String,
}

/// What truncation did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TruncateReport {
    /// The per-result budget used (0 when the stage did not run).
    pub budget_chars: usize,
    /// The budget of all results together (0 when there is none).
    pub aggregate_budget_chars: usize,
    /// How many results were cut.
    pub truncated: usize,
    /// How many of them were cut (or elided) for the aggregate budget, frozen cuts included.
    pub aggregate_truncated: usize,
    /// Text characters of the truncated results, before and after.
    pub chars_before: usize,
    /// Text characters of the cut results after the cut (see `chars_before`).
    pub chars_after: usize,
    /// Every cut, in message order.
    pub changes: Vec<TruncateChange>,
}

impl TruncateReport {
    /// True when no result was cut.
    pub fn is_noop(&self) -> bool {
        self.truncated == 0
    }

    /// One line for tables.
    pub fn summary(&self) -> String {
        if self.is_noop() {
            "unchanged".to_owned()
        } else {
            format!(
                "truncated {} results ({} -> {} chars)",
                self.truncated, self.chars_before, self.chars_after
            )
        }
    }
}

/// Messages after truncation, what changed, and the originals to store before the messages are
/// shown to a model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TruncateOutcome {
    /// The messages after truncation.
    pub messages: Vec<Message>,
    /// What was cut and why.
    pub report: TruncateReport,
    /// The originals of the cut results, to store before the messages reach a model.
    pub new_refs: Vec<NewRef>,
}

/// Cuts every tool result whose text exceeds [`result_budget_chars`] for `context_window_tokens`
/// (and, with an aggregate budget, as if each request were the session's first). A window of 0
/// means "unknown" and changes nothing.
pub fn truncate(
    messages: Vec<Message>,
    settings: &TruncateSettings,
    context_window_tokens: u64,
) -> TruncateOutcome {
    truncate_with_memory(
        messages,
        settings,
        context_window_tokens,
        &mut TruncateMemory::default(),
    )
}

/// [`truncate`] for one request of a session whose earlier requests `memory` remembers: with an
/// aggregate budget, results sent before keep the bytes they were sent with (see
/// [`aggregate`]). The caller keeps `memory` for the session's next request.
pub fn truncate_with_memory(
    mut messages: Vec<Message>,
    settings: &TruncateSettings,
    context_window_tokens: u64,
    memory: &mut TruncateMemory,
) -> TruncateOutcome {
    let mut report = TruncateReport::default();
    let mut new_refs = Vec::new();
    if !settings.enabled || context_window_tokens == 0 {
        return TruncateOutcome {
            messages,
            report,
            new_refs,
        };
    }
    let budget = result_budget_chars(context_window_tokens, settings);
    report.budget_chars = budget;
    let aggregate = settings.aggregate.enabled;
    for (message_index, message) in messages.iter_mut().enumerate() {
        // Read before writing: the messages share their blocks with the ones the engine holds
        // until written, and most of a long session is left as it is.
        let writes = |result: &ToolResult| {
            aggregate && aggregate::is_frozen(result, memory) || may_exceed(result, budget)
        };
        if !message.tool_results().any(writes) {
            continue;
        }
        for (block_index, block) in message.content.iter_mut().enumerate() {
            let Block::ToolResult(result) = block else {
                continue;
            };
            if aggregate && aggregate::repeat_frozen(result, memory) {
                report.truncated += 1;
                report.aggregate_truncated += 1;
                report.changes.push(TruncateChange {
                    message_index,
                    block_index,
                    call_id: result.call_id.clone(),
                    tool_name: result.tool_name.clone(),
                    mode: TruncateMode::Frozen,
                    chars_before: 0,
                    chars_after: text_blocks(&result.content)
                        .map(estimate_string_chars)
                        .sum(),
                    ref_id: None,
                    reason: "cut on an earlier request to fit the aggregate budget; repeated \
                             byte for byte"
                        .to_owned(),
                });
                continue;
            }
            let Some(cut) = truncate_result(result, budget, settings.min_keep_chars, settings)
            else {
                continue;
            };
            report.truncated += 1;
            report.chars_before += cut.before;
            report.chars_after += cut.after;
            report.changes.push(TruncateChange {
                message_index,
                block_index,
                call_id: result.call_id.clone(),
                tool_name: result.tool_name.clone(),
                mode: cut.mode,
                chars_before: cut.before,
                chars_after: cut.after,
                ref_id: cut.new_ref.as_ref().map(|r| r.id.to_string()),
                reason: format!(
                    "result text of {} chars exceeds the per-result budget of {budget} chars",
                    cut.before
                ),
            });
            new_refs.extend(cut.new_ref);
        }
    }
    if aggregate {
        let aggregate_budget = aggregate_budget_chars(context_window_tokens, settings);
        report.aggregate_budget_chars = aggregate_budget;
        aggregate::apply(
            &mut messages,
            settings,
            aggregate_budget,
            memory,
            &mut report,
            &mut new_refs,
        );
        memory.remember_sent(&messages);
    }
    TruncateOutcome {
        messages,
        report,
        new_refs,
    }
}

pub(super) struct Cut {
    /// The original, when the policy keeps originals.
    pub(super) new_ref: Option<NewRef>,
    pub(super) mode: TruncateMode,
    pub(super) before: usize,
    pub(super) after: usize,
}

/// What a cut ends with: a marker naming the original's ref, or OpenClaw's notice.
#[derive(Clone, Copy)]
enum Marker<'a> {
    Ref(&'a RefId),
    Notice,
}

impl Marker<'_> {
    /// Length of the marker for any omitted count up to `omitted`.
    fn len(self, omitted: usize) -> usize {
        match self {
            Marker::Ref(_) => marker_len(omitted),
            Marker::Notice => notice::notice_len(omitted),
        }
    }
}

/// How the budget is spread over a result's text blocks.
enum Plan {
    /// `allocs[i]` is the budget of content block `i` (`None`: keep the block whole).
    PerBlock(Vec<Option<usize>>),
    Joined,
}

/// Estimator characters of a text can be at most this many times its UTF-8 length (a CJK code
/// point is 3 or 4 bytes and weighs 4), so a text of `budget / 2` bytes never needs measuring.
const MAX_CHARS_PER_BYTE: usize = 2;

/// False when `result`'s text is certainly within `budget` characters (a bound from its length,
/// without measuring).
fn may_exceed(result: &ToolResult, budget: usize) -> bool {
    let bytes: usize = text_blocks(&result.content).map(str::len).sum();
    bytes.saturating_mul(MAX_CHARS_PER_BYTE) > budget
}

/// Cuts `result`'s text to `budget` characters, keeping at least `min_keep` of each cut text
/// where the budget allows.
pub(super) fn truncate_result(
    result: &mut ToolResult,
    budget: usize,
    min_keep: usize,
    settings: &TruncateSettings,
) -> Option<Cut> {
    if !may_exceed(result, budget) {
        return None;
    }
    let weights: Vec<Option<usize>> = result
        .content
        .iter()
        .map(|block| {
            block
                .as_text()
                .map(|text| estimate_string_chars(&text.text))
        })
        .collect();
    let before: usize = weights.iter().flatten().sum();
    if before <= budget {
        return None;
    }
    let original = std::mem::take(&mut result.content);
    let (new_ref, content, mode) = if settings.keep_originals {
        let new_ref = NewRef::new(RefPayload::new(original));
        let marker = Marker::Ref(&new_ref.id);
        let (content, mode) = cut_planned(
            &new_ref.payload.blocks,
            &weights,
            before,
            budget,
            min_keep,
            marker,
        );
        (Some(new_ref), content, mode)
    } else {
        let (content, mode) = cut_planned(
            &original,
            &weights,
            before,
            budget,
            min_keep,
            Marker::Notice,
        );
        (None, content, mode)
    };
    let after = text_blocks(&content).map(estimate_string_chars).sum();
    result.content = content.into();
    Some(Cut {
        new_ref,
        mode,
        before,
        after,
    })
}

fn cut_planned(
    original: &[Block],
    weights: &[Option<usize>],
    before: usize,
    budget: usize,
    min_keep: usize,
    marker: Marker<'_>,
) -> (Vec<Block>, TruncateMode) {
    match plan(weights, before, budget, min_keep, marker) {
        Plan::PerBlock(allocs) => cut_blocks(original, &allocs, marker, min_keep),
        Plan::Joined => cut_joined(original, budget, marker, min_keep),
    }
}

pub(super) fn text_blocks(blocks: &[Block]) -> impl Iterator<Item = &str> {
    blocks
        .iter()
        .filter_map(Block::as_text)
        .map(|text| text.text.as_str())
}

fn plan(
    weights: &[Option<usize>],
    total: usize,
    budget: usize,
    min_keep: usize,
    marker: Marker<'_>,
) -> Plan {
    let texts = weights.iter().flatten().count();
    if texts == 1 {
        return Plan::PerBlock(weights.iter().map(|w| w.map(|_| budget)).collect());
    }
    let marker = marker.len(total);
    let small_limit = min_keep.max(marker + MIN_BLOCK_CONTENT_CHARS);
    let small_sum: usize = weights
        .iter()
        .flatten()
        .filter(|w| **w <= small_limit)
        .sum();
    let big_sum = total - small_sum;
    if big_sum == 0 || small_sum > budget / 2 {
        return Plan::Joined;
    }
    let rest = (budget - small_sum) as u128;
    let mut allocs = Vec::with_capacity(weights.len());
    for weight in weights {
        allocs.push(match weight {
            Some(w) if *w > small_limit => {
                let share = (rest * *w as u128 / big_sum as u128) as usize;
                if share < marker + MIN_BLOCK_CONTENT_CHARS {
                    return Plan::Joined;
                }
                Some(share)
            }
            Some(_) | None => None,
        });
    }
    Plan::PerBlock(allocs)
}

fn cut_blocks(
    original: &[Block],
    allocs: &[Option<usize>],
    marker: Marker<'_>,
    min_keep: usize,
) -> (Vec<Block>, TruncateMode) {
    let mut mode = TruncateMode::Head;
    let content = original
        .iter()
        .zip(allocs)
        .map(|(block, alloc)| match (block, alloc) {
            (Block::Text(text), Some(alloc)) => {
                match cut_text(&text.text, *alloc, marker, min_keep) {
                    Some((cut, kept_tail)) => {
                        if kept_tail {
                            mode = TruncateMode::HeadAndTail;
                        }
                        Block::Text(TextBlock {
                            text: cut,
                            extra: text.extra.clone(),
                        })
                    }
                    None => block.clone(),
                }
            }
            _ => block.clone(),
        })
        .collect();
    (content, mode)
}

fn cut_joined(
    original: &[Block],
    budget: usize,
    marker: Marker<'_>,
    min_keep: usize,
) -> (Vec<Block>, TruncateMode) {
    let joined = text_blocks(original).collect::<Vec<_>>().join("\n");
    let cut = cut_text(&joined, budget, marker, min_keep).map_or(joined, |(cut, _)| cut);
    let mut text = Some(cut);
    let mut content = Vec::with_capacity(original.len());
    for block in original {
        match block {
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
    (content, TruncateMode::Joined)
}

/// The marker standing where `omitted` characters were cut out.
pub fn truncation_marker(omitted: usize, id: &RefId) -> String {
    format!(
        "\n[... {omitted} chars omitted; full output: {REF_PREFIX}{id}] - call \
         fetch_original_data with this ref id to read it ...]\n"
    )
}

/// Length of the marker for any omitted count up to `omitted` (ids are always 64 characters).
fn marker_len(omitted: usize) -> usize {
    truncation_marker(omitted, &RefId::of_bytes(b"")).len()
}

/// `text` cut to at most `alloc` characters, marker included, and whether a tail was kept.
/// `None` when the text already fits.
fn cut_text(
    text: &str,
    alloc: usize,
    marker: Marker<'_>,
    min_keep: usize,
) -> Option<(String, bool)> {
    let id = match marker {
        Marker::Ref(id) => id,
        Marker::Notice => return notice::cut_text(text, alloc, min_keep),
    };
    let total = estimate_string_chars(text);
    if total <= alloc {
        return None;
    }
    let keep = alloc.saturating_sub(marker_len(total));
    if keep > min_keep.saturating_mul(2) && has_important_tail(text) {
        let tail_budget = ((keep as f64 * TAIL_SHARE) as usize).min(TAIL_MAX_CHARS);
        let head_budget = keep - tail_budget;
        if head_budget >= min_keep {
            let head_end = cut_head(text, head_budget);
            let tail_start = cut_tail(text, tail_budget).max(head_end);
            let head = text.get(..head_end).unwrap_or_default();
            let tail = text.get(tail_start..).unwrap_or_default();
            let omitted = total - estimate_string_chars(head) - estimate_string_chars(tail);
            let mut out = String::with_capacity(head.len() + tail.len() + MARKER_RESERVE_CHARS);
            out.push_str(head);
            out.push_str(&truncation_marker(omitted, id));
            out.push_str(tail);
            return Some((out, true));
        }
    }
    let head = text.get(..cut_head(text, keep)).unwrap_or_default();
    let mut out = String::with_capacity(head.len() + MARKER_RESERVE_CHARS);
    out.push_str(head);
    out.push_str(&truncation_marker(total - estimate_string_chars(head), id));
    Some((out, false))
}

/// End (byte index) of a head of at most `budget` characters, moved back to a newline when one
/// lies within the last [`NEWLINE_WINDOW`] of it.
fn cut_head(text: &str, budget: usize) -> usize {
    let end = prefix_end(text, budget);
    let head = text.get(..end).unwrap_or_default();
    let window = (budget as f64 * NEWLINE_WINDOW) as usize;
    let start = suffix_start(head, window);
    match head.get(start..).and_then(|last| last.rfind('\n')) {
        Some(offset) if start + offset > 0 => start + offset,
        Some(_) | None => end,
    }
}

/// Start (byte index) of a tail of at most `budget` characters, moved forward past a newline when
/// one lies within the first [`NEWLINE_WINDOW`] of it.
fn cut_tail(text: &str, budget: usize) -> usize {
    let start = suffix_start(text, budget);
    let tail = text.get(start..).unwrap_or_default();
    let window = (budget as f64 * NEWLINE_WINDOW) as usize;
    let first = tail.get(..prefix_end(tail, window)).unwrap_or_default();
    match first.find('\n') {
        Some(offset) => start + offset + 1,
        None => start,
    }
}

pub(super) fn has_important_tail(text: &str) -> bool {
    let tail = text
        .get(suffix_start(text, IMPORTANT_TAIL_WINDOW_CHARS)..)
        .unwrap_or_default();
    if tail.trim_end().ends_with('}') {
        return true;
    }
    let lower = tail.to_lowercase();
    TAIL_WORDS.iter().any(|word| contains_word(&lower, word))
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// True when `word` occurs in `haystack` with no word character on either side.
fn contains_word(haystack: &str, word: &str) -> bool {
    haystack.match_indices(word).any(|(start, _)| {
        let before = haystack.get(..start).and_then(|s| s.chars().next_back());
        let after = haystack
            .get(start + word.len()..)
            .and_then(|s| s.chars().next());
        !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
    })
}

fn char_weight(c: char) -> usize {
    if is_cjk(c) {
        crate::tokens::estimate::CJK_CHAR_WEIGHT
    } else {
        1
    }
}

/// Byte index where the longest prefix of `text` weighing at most `budget` characters ends.
pub(super) fn prefix_end(text: &str, budget: usize) -> usize {
    if text.is_ascii() {
        return budget.min(text.len());
    }
    let mut used = 0;
    for (index, c) in text.char_indices() {
        used += char_weight(c);
        if used > budget {
            return index;
        }
    }
    text.len()
}

/// Byte index where the longest suffix of `text` weighing at most `budget` characters starts.
pub(super) fn suffix_start(text: &str, budget: usize) -> usize {
    if text.is_ascii() {
        return text.len() - budget.min(text.len());
    }
    let mut used = 0;
    for (index, c) in text.char_indices().rev() {
        used += char_weight(c);
        if used > budget {
            return index + c.len_utf8();
        }
    }
    0
}

/// Estimator characters of blocks, counted as [`crate::tokens::estimate_chars`] counts them.
pub(super) fn content_chars(blocks: &[Block]) -> usize {
    blocks
        .iter()
        .map(|block| match block {
            Block::Text(text) => estimate_string_chars(&text.text),
            Block::Image(_) => IMAGE_CHARS,
            Block::Thinking(thinking) => estimate_string_chars(&thinking.thinking),
            Block::ToolCall(call) => {
                estimate_string_chars(&call.name)
                    + match &call.arguments_text {
                        Some(text) => estimate_string_chars(text),
                        None => json_chars(&call.arguments),
                    }
            }
            Block::ToolResult(result) => content_chars(&result.content),
            Block::Opaque(value) => json_chars(value),
        })
        .sum()
}

fn json_chars(value: &serde_json::Value) -> usize {
    estimate_string_chars(&serde_json::to_string(value).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn weighted_slicing_respects_char_boundaries() {
        let text = "ab你好cd";
        assert_eq!(prefix_end(text, 2), 2);
        assert_eq!(prefix_end(text, 5), 2);
        assert_eq!(prefix_end(text, 6), 5);
        assert_eq!(prefix_end(text, 100), text.len());
        assert_eq!(suffix_start(text, 2), text.len() - 2);
        assert_eq!(suffix_start(text, 6), text.len() - 5);
        assert_eq!(suffix_start(text, 0), text.len());
        assert_eq!(suffix_start("abc", 10), 0);
    }

    #[test]
    fn words_match_only_on_boundaries() {
        assert!(contains_word("build failed.", "failed"));
        assert!(contains_word("exit code 2", "exit code"));
        assert!(!contains_word("terrors", "error"));
        assert!(!contains_word("results_x", "result"));
        assert!(contains_word("错误 error", "error"));
    }

    #[test]
    fn marker_length_is_bounded_by_reserve() {
        assert!(marker_len(usize::MAX) < MARKER_RESERVE_CHARS);
        assert!(marker_len(1) <= marker_len(1_000_000));
    }

    #[test]
    fn content_chars_agrees_with_the_estimator() {
        use crate::message::{Message, Role};
        let blocks = vec![Block::text("hello 你好")];
        let message = Message::new(Role::User, blocks.clone());
        assert_eq!(
            content_chars(&blocks) + crate::tokens::estimate::MESSAGE_OVERHEAD_CHARS,
            crate::tokens::estimate_chars(&message)
        );
    }
}
