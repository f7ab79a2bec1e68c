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

use std::collections::HashSet;
use std::ops::Range;

use serde::Serialize;

use super::settings::{CompactionSettings, MAX_KEEP_RECENT_TURNS};
use crate::message::{Block, ContentForm, Message, Role};
use crate::repair::{RepairReport, repair_pairing};
use crate::tokens::{estimate_message_tokens, estimate_messages_tokens};

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

// ---------------------------------------------------------------------------------------------
// Units: a tool call never leaves its results
// ---------------------------------------------------------------------------------------------

/// A run of message indices that must stay together, and its estimated tokens.
#[derive(Debug, Clone)]
struct Unit {
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
fn units_of(messages: &[Message], indices: &[usize]) -> Vec<Unit> {
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
fn to_ranges(groups: Vec<Vec<usize>>) -> Vec<Range<usize>> {
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
fn group_by_max(units: Vec<Unit>, effective_max: u64) -> Vec<Vec<usize>> {
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

fn normalize_parts(parts: usize, len: usize) -> usize {
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

fn effective_max(max_tokens: u64, settings: &CompactionSettings) -> u64 {
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

// ---------------------------------------------------------------------------------------------
// Recent turns
// ---------------------------------------------------------------------------------------------

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
    /// ([`cut_preserved_turns`]).
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

// ---------------------------------------------------------------------------------------------
// Split turns: cutting inside the preserved turns
// ---------------------------------------------------------------------------------------------

/// Why the boundary moved forward inside the preserved turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnSplitReason {
    /// The preserved turns alone were over the tail budget.
    TailOverBudget,
    /// Everything after the pinned prefix was in the preserved turns (a few user turns of long
    /// autonomous tool work), so without a cut there was nothing to summarise.
    NothingElseToSummarize,
}

/// A boundary moved forward inside the preserved recent turns (pi's split turn): the kept part
/// starts at a later safe cut point and everything before it, the start of the cut turn
/// included, is summarised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnSplit {
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
    pinned.extend(
        (from..cut).filter(|&index| messages.get(index).is_some_and(super::plan::is_user_ask)),
    );
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

// ---------------------------------------------------------------------------------------------
// History pruning for the context share
// ---------------------------------------------------------------------------------------------

/// What [`prune_history_for_context_share`] kept and dropped.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPrune {
    /// The newer history, pairing repaired.
    pub kept: Vec<Message>,
    /// The oldest history, pairing repaired: summarised first, its summary passed on as the
    /// previous summary of the main pass.
    pub dropped: Vec<Message>,
    pub dropped_chunks: usize,
    pub dropped_tokens: u64,
    pub kept_tokens: u64,
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
                    content: others,
                    meta: meta.clone(),
                    content_form: ContentForm::Blocks,
                    extra: extra.clone(),
                });
            }
            dropped.push(Message {
                role,
                content: results,
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

// ---------------------------------------------------------------------------------------------
// Stages and the fallback plan
// ---------------------------------------------------------------------------------------------

/// How far down the fallback ladder a summary went (`summarizeWithFallback`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FallbackLevel {
    /// Level 1: every message summarised.
    #[default]
    Full,
    /// Level 2: only the messages that are not oversized, with a note for each oversized one.
    SmallOnly,
    /// Level 3: no summarizer call worked; a plain note ([`fallback_note`]).
    Note,
}

/// One part of a staged summary and its fallback plan. Indices are into the messages the stage
/// plan was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartPlan {
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

    use serde_json::json;

    use super::*;
    use crate::message::{Extra, StopReason, ToolCall, ToolResult};

    fn text(role: Role, chars: usize) -> Message {
        Message::text(role, "x".repeat(chars))
    }

    fn calls(ids: &[&str]) -> Message {
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

    fn result(id: &str, chars: usize) -> Message {
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: id.into(),
                tool_name: Some("read".into()),
                content: vec![Block::text("y".repeat(chars))],
                content_form: Default::default(),
                is_error: None,
                details: Some(json!({"secret": 1})),
                extra: Extra::new(),
            })],
        )
    }

    fn settings() -> CompactionSettings {
        CompactionSettings::default()
    }

    #[test]
    fn strip_details_removes_host_only_payloads() {
        let stripped = strip_details(vec![result("a", 3)]);
        let details = stripped[0].tool_results().next().unwrap().details.clone();
        assert_eq!(details, None);
    }

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
