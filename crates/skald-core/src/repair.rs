//! Transcript repair: makes a transcript acceptable to strict providers before it is sent, and says
//! what it changed and why.
//!
//! Anthropic-compatible APIs reject a request unless every tool call of an assistant message is
//! answered by a result in the message right after it, and every result answers such a call. Session
//! files break this: results end up after a user turn, get written twice, outlive their call, or
//! never arrive. Two stages fix it (seed 001's `repairToolUseResultPairing`, OpenClaw §3.6):
//!
//! 1. [`sanitize_tool_calls`] drops tool-call blocks that cannot be sent (empty id, a name outside
//!    `^[A-Za-z0-9_-]+$` or longer than 64 after trimming, a name not in the allowlist, an id repeated
//!    within one message), trims names, and drops assistant messages this leaves empty.
//! 2. [`repair_pairing`] puts each assistant's results directly after it, in call order, in one
//!    [`Role::ToolResult`] message; inserts a synthetic error result for a call without one; drops
//!    duplicate results (the first result of a call wins) and orphans (no call to answer).
//!
//! Both are pure functions from messages to messages plus a [`RepairReport`]; [`repair`] runs both.
//! Nothing else is reordered: messages other than tool results keep their relative order, and a
//! turn that is already valid (results right after the call, in call order, possibly split over
//! several consecutive `ToolResult` messages as OpenAI writes them) is left exactly as it was.
//!
//! Rules worth knowing:
//! - Assistant messages that stopped with [`StopReason::Error`] or [`StopReason::Aborted`] are left
//!   alone: their calls may be partial, so they get no synthetic result, and results that answer
//!   only them are orphans (OpenClaw #4597).
//! - A result answers the most recent call with its id that is still open, wherever it sits after
//!   that call. Ids may be reused across turns (Kimi-style `functions.bash:0`); each reuse opens the
//!   id again, so each turn keeps its own result.
//! - Only [`Role::ToolResult`] messages are searched for results; decoders put every result there.
//! - An assistant message without tool calls that sits between a call and its result (older
//!   Codex sends `[assistant tool_calls][assistant text][tool]`) is merged into the calling
//!   assistant message, its blocks before the calls. Moving the result up instead would leave the
//!   text after it, and a request that ended on a tool result would end on an assistant turn: the
//!   upstream takes its own text as the last word and loops. Only assistant messages on the
//!   stretch from the call to its last result, with nothing but tool results, custom messages and
//!   such assistant messages before them, are merged; a user turn in between stops the stretch.
//! - Text or other blocks that share a `ToolResult` message with results go after the results of
//!   the turn they are merged into. If all results of such a message are dropped, its other blocks
//!   stay where they were, as a [`Role::User`] message.
//! - Runs are linear in the number of blocks (hash maps by call id) and move blocks rather than
//!   clone them; a transcript that needs nothing is returned as it came, without rebuilding.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::message::{
    Block, ContentForm, Extra, Message, MessageMeta, Role, StopReason, ToolCall, ToolResult,
};

/// Text of the synthetic result inserted for a call that has none.
pub const MISSING_RESULT_TEXT: &str = "[skald] missing tool result in session history; inserted synthetic error result for transcript repair.";

/// Longest tool name providers accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// What repair may assume about the tools on offer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairSettings {
    /// When set, tool calls whose name is not in this list (compared case-insensitively, after
    /// trimming) are dropped.
    pub allowed_tool_names: Option<Vec<String>>,
}

/// What repair did, with one human-readable reason per change naming the call ids involved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RepairReport {
    /// Results moved to directly after their call, or into call order.
    pub moved: usize,
    /// Synthetic error results inserted for calls without a result.
    pub inserted: usize,
    /// Results dropped because an earlier result already answered the call.
    pub dropped_duplicates: usize,
    /// Results dropped because no open call has their id.
    pub dropped_orphans: usize,
    /// Tool-call blocks dropped as invalid (id, name, allowlist, repeated id).
    pub dropped_invalid_calls: usize,
    /// Assistant messages dropped because dropping invalid calls left them empty.
    pub dropped_empty_messages: usize,
    /// Tool names that had surrounding whitespace trimmed.
    pub trimmed_names: usize,
    /// Assistant messages without tool calls merged into the assistant message whose calls they
    /// sat between and the results (see the module docs).
    pub merged_assistant_messages: usize,
    /// One line per change, saying what was done to which message and why.
    pub reasons: Vec<String>,
}

impl RepairReport {
    /// True when repair changed nothing.
    pub fn is_clean(&self) -> bool {
        self.moved == 0
            && self.inserted == 0
            && self.dropped_duplicates == 0
            && self.dropped_orphans == 0
            && self.dropped_invalid_calls == 0
            && self.dropped_empty_messages == 0
            && self.trimmed_names == 0
            && self.merged_assistant_messages == 0
    }

    /// One line for tables: `clean`, or the non-zero counts (`inserted 1, moved 2`).
    pub fn summary(&self) -> String {
        let counts = [
            ("moved", self.moved),
            ("inserted", self.inserted),
            ("dropped duplicates", self.dropped_duplicates),
            ("dropped orphans", self.dropped_orphans),
            ("dropped invalid calls", self.dropped_invalid_calls),
            ("dropped empty messages", self.dropped_empty_messages),
            ("trimmed names", self.trimmed_names),
            ("merged assistant messages", self.merged_assistant_messages),
        ];
        let parts: Vec<String> = counts
            .iter()
            .filter(|(_, count)| *count > 0)
            .map(|(name, count)| format!("{name} {count}"))
            .collect();
        if parts.is_empty() {
            "clean".to_owned()
        } else {
            parts.join(", ")
        }
    }

    /// Adds `other`'s counts and reasons to this report.
    pub fn merge(&mut self, other: RepairReport) {
        self.moved += other.moved;
        self.inserted += other.inserted;
        self.dropped_duplicates += other.dropped_duplicates;
        self.dropped_orphans += other.dropped_orphans;
        self.dropped_invalid_calls += other.dropped_invalid_calls;
        self.dropped_empty_messages += other.dropped_empty_messages;
        self.trimmed_names += other.trimmed_names;
        self.merged_assistant_messages += other.merged_assistant_messages;
        self.reasons.extend(other.reasons);
    }
}

/// Runs [`sanitize_tool_calls`] then [`repair_pairing`].
pub fn repair(messages: Vec<Message>, settings: &RepairSettings) -> (Vec<Message>, RepairReport) {
    let (messages, mut report) = sanitize_tool_calls(messages, settings);
    let (messages, pairing) = repair_pairing(messages);
    report.merge(pairing);
    (messages, report)
}

// ---------------------------------------------------------------------------------------------
// Stage 1: tool-call validation
// ---------------------------------------------------------------------------------------------

enum Verdict {
    Keep,
    Trim,
    Drop,
}

fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_LEN
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// Why `call` cannot be sent, if it cannot; `earlier_ids` are the ids of the calls kept so far in
/// the same message.
fn invalid_call_reason(
    call: &ToolCall,
    allowed: Option<&HashSet<String>>,
    earlier_ids: &[&str],
) -> Option<String> {
    let name = call.name.trim();
    if call.id.trim().is_empty() {
        return Some(format!("tool call {name:?} has an empty id; dropped"));
    }
    if !valid_tool_name(name) {
        return Some(format!(
            "call {}: tool name {:?} is not 1-{MAX_TOOL_NAME_LEN} characters of [A-Za-z0-9_-]; dropped",
            call.id, call.name
        ));
    }
    if let Some(allowed) = allowed {
        if !allowed.contains(&name.to_ascii_lowercase()) {
            return Some(format!(
                "call {}: tool {name:?} is not in the allowed tools; dropped",
                call.id
            ));
        }
    }
    if earlier_ids.contains(&call.id.as_str()) {
        return Some(format!(
            "call {}: the same id appears earlier in the message; dropped",
            call.id
        ));
    }
    None
}

/// Drops tool-call blocks that cannot be sent, trims tool names, and drops assistant messages left
/// empty by this. Only assistant messages are touched.
pub fn sanitize_tool_calls(
    messages: Vec<Message>,
    settings: &RepairSettings,
) -> (Vec<Message>, RepairReport) {
    let allowed: Option<HashSet<String>> = settings.allowed_tool_names.as_ref().map(|names| {
        names
            .iter()
            .map(|name| name.trim().to_ascii_lowercase())
            .collect()
    });
    let mut report = RepairReport::default();
    let messages = messages
        .into_iter()
        .enumerate()
        .filter_map(|(index, mut message)| {
            if message.role != Role::Assistant || message.tool_calls().next().is_none() {
                return Some(message);
            }
            let mut verdicts = Vec::new();
            let mut kept_ids: Vec<&str> = Vec::new();
            for call in message.tool_calls() {
                let verdict = match invalid_call_reason(call, allowed.as_ref(), &kept_ids) {
                    Some(reason) => {
                        report.dropped_invalid_calls += 1;
                        report.reasons.push(reason);
                        Verdict::Drop
                    }
                    None => {
                        kept_ids.push(&call.id);
                        if call.name.trim().len() == call.name.len() {
                            Verdict::Keep
                        } else {
                            report.trimmed_names += 1;
                            report.reasons.push(format!(
                                "call {}: trimmed whitespace around tool name {:?}",
                                call.id, call.name
                            ));
                            Verdict::Trim
                        }
                    }
                };
                verdicts.push(verdict);
            }
            if verdicts
                .iter()
                .all(|verdict| matches!(verdict, Verdict::Keep))
            {
                return Some(message);
            }
            let mut verdicts = verdicts.into_iter();
            message.content.retain_mut(|block| {
                let Some(call) = block.as_tool_call_mut() else {
                    return true;
                };
                match verdicts.next() {
                    Some(Verdict::Keep) | None => true,
                    Some(Verdict::Trim) => {
                        call.name = call.name.trim().to_owned();
                        true
                    }
                    Some(Verdict::Drop) => false,
                }
            });
            if message.content.is_empty() {
                report.dropped_empty_messages += 1;
                report.reasons.push(format!(
                    "assistant message {index}: empty after dropping invalid tool calls; dropped"
                ));
                return None;
            }
            Some(message)
        })
        .collect();
    (messages, report)
}

// ---------------------------------------------------------------------------------------------
// Stage 2: call/result pairing
// ---------------------------------------------------------------------------------------------

/// Where one result block goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dest {
    /// Answers the call in this slot.
    Slot(usize),
    Duplicate,
    Orphan,
}

/// An assistant message whose calls expect results.
struct Turn {
    /// Index of the assistant message.
    assistant: usize,
    /// Its calls occupy slots `first_slot..first_slot + calls`.
    first_slot: usize,
    calls: usize,
    /// One past the last message of the run after the assistant: the consecutive `ToolResult`
    /// (and custom) messages where its results belong.
    run_end: usize,
    in_place: bool,
}

/// How a message is carried to the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Unchanged.
    Keep,
    /// A `ToolResult` message whose blocks are redistributed.
    Split,
}

fn is_incomplete(message: &Message) -> bool {
    message
        .meta
        .stop_reason
        .as_ref()
        .is_some_and(StopReason::is_incomplete)
}

fn synthetic_result(call: &ToolCall) -> ToolResult {
    ToolResult {
        call_id: call.id.clone(),
        tool_name: Some(call.name.clone()),
        content: vec![Block::text(MISSING_RESULT_TEXT)].into(),
        content_form: ContentForm::Text,
        is_error: Some(true),
        details: None,
        extra: Extra::new(),
    }
}

/// Everything decided about a transcript before any message is moved.
struct Analysis {
    turns: Vec<Turn>,
    /// Turn index of each slot.
    slot_turn: Vec<usize>,
    /// True for slots that no result answers.
    missing: Vec<bool>,
    /// Destination of every result block of every `ToolResult` message, in transcript order.
    dests: Vec<Dest>,
    /// Per message: index of its first entry in `dests`.
    dest_start: Vec<usize>,
    plans: Vec<Plan>,
    /// Per message: the turn index when the message is the assistant of a rebuilt turn.
    rebuilt_turn_at: HashMap<usize, usize>,
    /// Assistant messages without calls merged into a rebuilt turn's assistant: message index →
    /// index of the assistant message they join.
    merge_into: HashMap<usize, usize>,
}

fn analyse(messages: &[Message], report: &mut RepairReport) -> Analysis {
    let mut turns: Vec<Turn> = Vec::new();
    let mut slot_turn: Vec<usize> = Vec::new();
    let mut missing: Vec<bool> = Vec::new();
    let mut dests: Vec<Dest> = Vec::new();
    let mut dest_start: Vec<usize> = Vec::with_capacity(messages.len());
    // Open calls by id, and ids whose call has been answered since it was last opened.
    let mut open: HashMap<&str, usize> = HashMap::new();
    let mut answered: HashSet<&str> = HashSet::new();
    // Call ids of error/aborted assistant messages, only to explain orphans.
    let mut incomplete_ids: HashSet<&str> = HashSet::new();

    for (index, message) in messages.iter().enumerate() {
        dest_start.push(dests.len());
        match message.role {
            Role::Assistant => {
                if is_incomplete(message) {
                    incomplete_ids.extend(message.tool_calls().map(|call| call.id.as_str()));
                    continue;
                }
                let first_slot = slot_turn.len();
                for call in message.tool_calls() {
                    let slot = slot_turn.len();
                    slot_turn.push(turns.len());
                    missing.push(true);
                    // A reused id opens the call again; an earlier call still open stays missing.
                    open.insert(call.id.as_str(), slot);
                    answered.remove(call.id.as_str());
                }
                let calls = slot_turn.len() - first_slot;
                if calls > 0 {
                    let run_end = messages
                        .iter()
                        .enumerate()
                        .skip(index + 1)
                        .find(|(_, next)| !matches!(next.role, Role::ToolResult | Role::Custom(_)))
                        .map_or(messages.len(), |(end, _)| end);
                    turns.push(Turn {
                        assistant: index,
                        first_slot,
                        calls,
                        run_end,
                        in_place: false,
                    });
                }
            }
            Role::ToolResult => {
                for result in message.tool_results() {
                    let id = result.call_id.as_str();
                    let dest = if let Some(slot) = open.remove(id) {
                        answered.insert(id);
                        if let Some(flag) = missing.get_mut(slot) {
                            *flag = false;
                        }
                        Dest::Slot(slot)
                    } else if answered.contains(id) {
                        report.dropped_duplicates += 1;
                        report.reasons.push(format!(
                            "result for call {id}: the call already has an earlier result; dropped"
                        ));
                        Dest::Duplicate
                    } else {
                        report.dropped_orphans += 1;
                        let why = if incomplete_ids.contains(id) {
                            "its call is in an errored or aborted assistant message"
                        } else {
                            "no earlier tool call has this id"
                        };
                        report
                            .reasons
                            .push(format!("result for call {id}: {why}; dropped"));
                        Dest::Orphan
                    };
                    dests.push(dest);
                }
            }
            Role::System | Role::User | Role::Custom(_) => {}
        }
    }
    dest_start.push(dests.len());

    let mut plans: Vec<Plan> = messages
        .iter()
        .map(|message| {
            if message.role == Role::ToolResult && message.tool_results().next().is_some() {
                Plan::Split
            } else {
                Plan::Keep
            }
        })
        .collect();
    for turn in &mut turns {
        turn.in_place = turn_in_place(messages, turn, &dests, &dest_start, &mut plans);
    }
    let merge_into = assistant_merges(messages, &turns, &slot_turn, &dests, &dest_start, report);
    // A merged assistant message no longer separates its turn's results from the call: the run
    // goes on past it, so results there are not reported as moved.
    for turn in &mut turns {
        while turn.run_end < messages.len()
            && (merge_into.get(&turn.run_end) == Some(&turn.assistant)
                || messages
                    .get(turn.run_end)
                    .is_some_and(|next| matches!(next.role, Role::ToolResult | Role::Custom(_))))
        {
            turn.run_end += 1;
        }
    }

    // Explain what rebuilding a turn moves and inserts.
    let mut latest_slot: Vec<Option<usize>> = vec![None; turns.len()];
    let mut text_seen: Vec<bool> = vec![false; turns.len()];
    for (index, message) in messages.iter().enumerate() {
        if plans.get(index) != Some(&Plan::Split) {
            // Blocks of kept `ToolResult` messages inside a rebuilt turn's run end up after the
            // merged results; note them so that results after them count as moved.
            if message.role == Role::ToolResult {
                mark_text_seen(&turns, index, &mut text_seen);
            }
            continue;
        }
        let mut dest_index = dest_start.get(index).copied().unwrap_or(0);
        for block in &message.content {
            let Block::ToolResult(result) = block else {
                mark_text_seen(&turns, index, &mut text_seen);
                continue;
            };
            let dest = dests.get(dest_index).copied().unwrap_or(Dest::Orphan);
            dest_index += 1;
            let Dest::Slot(slot) = dest else { continue };
            let Some(&turn_index) = slot_turn.get(slot) else {
                continue;
            };
            let Some(turn) = turns.get(turn_index) else {
                continue;
            };
            let in_run = index < turn.run_end;
            let out_of_order = latest_slot[turn_index].is_some_and(|latest| slot < latest);
            let after_text = in_run && text_seen[turn_index];
            if !in_run || out_of_order || after_text {
                report.moved += 1;
                let why = if !in_run {
                    "moved to directly after its tool call"
                } else if out_of_order {
                    "moved into call order"
                } else {
                    "moved ahead of other content so results come first"
                };
                report
                    .reasons
                    .push(format!("result for call {}: {why}", result.call_id));
            } else {
                latest_slot[turn_index] = Some(slot);
            }
        }
    }
    let mut rebuilt_turn_at = HashMap::new();
    for (turn_index, turn) in turns.iter().enumerate() {
        if turn.in_place {
            continue;
        }
        rebuilt_turn_at.insert(turn.assistant, turn_index);
        let Some(assistant) = messages.get(turn.assistant) else {
            continue;
        };
        for (offset, call) in assistant.tool_calls().enumerate() {
            if missing.get(turn.first_slot + offset) == Some(&true) {
                report.inserted += 1;
                report.reasons.push(format!(
                    "call {} ({}): no result in the transcript; inserted a synthetic error result",
                    call.id, call.name
                ));
            }
        }
    }
    Analysis {
        turns,
        slot_turn,
        missing,
        dests,
        dest_start,
        plans,
        rebuilt_turn_at,
        merge_into,
    }
}

/// The assistant messages without tool calls that sit between a rebuilt turn's calls and its
/// last result, mapped to the turn's assistant message (see the module docs for why they merge).
fn assistant_merges(
    messages: &[Message],
    turns: &[Turn],
    slot_turn: &[usize],
    dests: &[Dest],
    dest_start: &[usize],
    report: &mut RepairReport,
) -> HashMap<usize, usize> {
    // The last message holding a result of each turn.
    let mut last_result: Vec<Option<usize>> = vec![None; turns.len()];
    for index in 0..messages.len() {
        let start = dest_start.get(index).copied().unwrap_or(0);
        let end = dest_start.get(index + 1).copied().unwrap_or(start);
        for dest in dests.get(start..end).into_iter().flatten() {
            let Dest::Slot(slot) = dest else { continue };
            if let Some(last) = slot_turn
                .get(*slot)
                .and_then(|turn_index| last_result.get_mut(*turn_index))
            {
                *last = Some(index);
            }
        }
    }
    let mut merges = HashMap::new();
    for (turn, last) in turns.iter().zip(last_result) {
        let Some(last) = last.filter(|_| !turn.in_place) else {
            continue;
        };
        for index in turn.assistant + 1..last {
            let Some(message) = messages.get(index) else {
                break;
            };
            match message.role {
                Role::ToolResult | Role::Custom(_) => {}
                Role::Assistant
                    if message.tool_calls().next().is_none() && !is_incomplete(message) =>
                {
                    merges.insert(index, turn.assistant);
                    report.merged_assistant_messages += 1;
                    report.reasons.push(format!(
                        "assistant message {index}: sat between tool calls of message {} and \
                         their results; merged into that message ahead of its calls so the \
                         results stay last",
                        turn.assistant
                    ));
                }
                Role::Assistant | Role::User | Role::System => break,
            }
        }
    }
    merges
}

/// Puts `merged`'s blocks into `target` ahead of its first tool call (after any thinking, which
/// providers require first).
fn merge_assistant(target: &mut Message, merged: Message) {
    let at = target
        .content
        .iter()
        .position(|block| matches!(block, Block::ToolCall(_)))
        .unwrap_or(target.content.len());
    let had_content = !target.content.is_empty() && at > 0;
    let single_text = merged.content_form == ContentForm::Text
        && matches!(merged.content.as_slice(), [Block::Text(_)]);
    target.content.splice(at..at, merged.content);
    target.content_form = match target.content_form {
        // A tool-call-only message (OpenAI `content: null`) now has text: spell it as the text
        // message spelled it when that is one string.
        ContentForm::Null | ContentForm::Absent if !had_content && single_text => ContentForm::Text,
        ContentForm::Null | ContentForm::Absent | ContentForm::Text | ContentForm::Blocks => {
            ContentForm::Blocks
        }
    };
}

/// Records that message `index`, if it lies in a turn's run, puts non-result content there.
fn mark_text_seen(turns: &[Turn], index: usize, text_seen: &mut [bool]) {
    // Runs do not overlap and turns are in transcript order: the run containing `index`, if any,
    // belongs to the last turn whose assistant precedes it.
    let position = turns.partition_point(|turn| turn.assistant < index);
    if let Some(turn_index) = position.checked_sub(1) {
        if turns
            .get(turn_index)
            .is_some_and(|turn| index < turn.run_end)
        {
            if let Some(seen) = text_seen.get_mut(turn_index) {
                *seen = true;
            }
        }
    }
}

/// True when the turn's results already are, in call order, the only result blocks of the first
/// `ToolResult` messages after the assistant (custom messages between them allowed), with other
/// blocks only after the last result. Marks those messages [`Plan::Keep`].
fn turn_in_place(
    messages: &[Message],
    turn: &Turn,
    dests: &[Dest],
    dest_start: &[usize],
    plans: &mut [Plan],
) -> bool {
    let mut expected = turn.first_slot;
    let end = turn.first_slot + turn.calls;
    let mut prefix = Vec::new();
    for index in turn.assistant + 1..turn.run_end {
        let Some(message) = messages.get(index) else {
            return false;
        };
        if message.role != Role::ToolResult {
            continue;
        }
        let mut dest_index = dest_start.get(index).copied().unwrap_or(0);
        let mut other_seen = false;
        for block in &message.content {
            match block {
                Block::ToolResult(_) => {
                    if other_seen || dests.get(dest_index) != Some(&Dest::Slot(expected)) {
                        return false;
                    }
                    dest_index += 1;
                    expected += 1;
                }
                Block::Text(_)
                | Block::Image(_)
                | Block::Thinking(_)
                | Block::ToolCall(_)
                | Block::Opaque(_) => other_seen = true,
            }
        }
        prefix.push(index);
        if expected == end {
            for index in prefix {
                if let Some(plan) = plans.get_mut(index) {
                    *plan = Plan::Keep;
                }
            }
            return true;
        }
        if other_seen {
            return false;
        }
    }
    false
}

/// A rebuilt turn's merged result message while it is being filled.
struct Merged {
    /// Index of the placeholder message in the output.
    position: usize,
    /// Whether a source message's metadata has been adopted.
    adopted: bool,
    trailing: Vec<Block>,
}

/// Moves each assistant's results directly after it in call order, inserts synthetic error
/// results for calls without one, and drops duplicate and orphan results.
pub fn repair_pairing(messages: Vec<Message>) -> (Vec<Message>, RepairReport) {
    let mut report = RepairReport::default();
    let analysis = analyse(&messages, &mut report);
    if report.is_clean() && analysis.turns.iter().all(|turn| turn.in_place) {
        return (messages, report);
    }
    let Analysis {
        turns,
        slot_turn,
        missing,
        dests,
        dest_start,
        plans,
        rebuilt_turn_at,
        merge_into,
    } = analysis;
    // Where each rebuilt turn's assistant landed in the output.
    let mut assistant_out: HashMap<usize, usize> = HashMap::new();

    let mut results: Vec<Option<ToolResult>> = Vec::new();
    results.resize_with(slot_turn.len(), || None);
    let mut merged: HashMap<usize, Merged> = HashMap::new();
    let mut out: Vec<Message> = Vec::with_capacity(messages.len() + rebuilt_turn_at.len());

    for (index, message) in messages.into_iter().enumerate() {
        if let Some(target) = merge_into
            .get(&index)
            .and_then(|assistant| assistant_out.get(assistant))
            .and_then(|position| out.get_mut(*position))
        {
            merge_assistant(target, message);
            continue;
        }
        if plans.get(index) != Some(&Plan::Split) {
            let rebuilt = rebuilt_turn_at.get(&index).copied();
            if let (Some(turn_index), Some(turn)) = (
                rebuilt,
                rebuilt.and_then(|turn_index| turns.get(turn_index)),
            ) {
                for (offset, call) in message.tool_calls().enumerate() {
                    let slot = turn.first_slot + offset;
                    if missing.get(slot) == Some(&true) {
                        if let Some(entry) = results.get_mut(slot) {
                            *entry = Some(synthetic_result(call));
                        }
                    }
                }
                assistant_out.insert(index, out.len());
                out.push(message);
                merged.insert(
                    turn_index,
                    Merged {
                        position: out.len(),
                        adopted: false,
                        trailing: Vec::new(),
                    },
                );
                out.push(Message::new(
                    Role::ToolResult,
                    Vec::with_capacity(turn.calls),
                ));
            } else {
                out.push(message);
            }
            continue;
        }

        let Message {
            role,
            content,
            meta,
            content_form,
            extra,
        } = message;
        let mut dest_index = dest_start.get(index).copied().unwrap_or(0);
        let mut first_turn: Option<usize> = None;
        let mut last_turn: Option<usize> = None;
        let mut others: Vec<Block> = Vec::new();
        for block in content {
            match block {
                Block::ToolResult(result) => {
                    let dest = dests.get(dest_index).copied().unwrap_or(Dest::Orphan);
                    dest_index += 1;
                    if let Dest::Slot(slot) = dest {
                        let turn_index = slot_turn.get(slot).copied();
                        first_turn = first_turn.or(turn_index);
                        last_turn = turn_index.or(last_turn);
                        if let Some(entry) = results.get_mut(slot) {
                            *entry = Some(result);
                        }
                    }
                }
                other @ (Block::Text(_)
                | Block::Image(_)
                | Block::Thinking(_)
                | Block::ToolCall(_)
                | Block::Opaque(_)) => others.push(other),
            }
        }
        let mut meta = Some((meta, content_form, extra));
        if let Some(target) = first_turn.and_then(|turn| merged.get_mut(&turn)) {
            if !target.adopted {
                target.adopted = true;
                if let (Some(placeholder), Some((meta, content_form, extra))) =
                    (out.get_mut(target.position), meta.take())
                {
                    placeholder.meta = meta;
                    placeholder.content_form = content_form;
                    placeholder.extra = extra;
                }
            }
        }
        match last_turn.and_then(|turn| merged.get_mut(&turn)) {
            Some(target) => target.trailing.append(&mut others),
            None if !others.is_empty() => {
                let (meta, content_form, extra) = meta
                    .unwrap_or_else(|| (MessageMeta::default(), ContentForm::Blocks, Extra::new()));
                // The results it carried were dropped; what is left is not a tool result.
                let role = if role == Role::ToolResult {
                    Role::User
                } else {
                    role
                };
                out.push(Message {
                    role,
                    content: others.into(),
                    meta,
                    content_form,
                    extra,
                });
            }
            None => {}
        }
    }

    for (turn_index, target) in merged {
        let Some(turn) = turns.get(turn_index) else {
            continue;
        };
        let Some(placeholder) = out.get_mut(target.position) else {
            continue;
        };
        let slots = turn.first_slot..turn.first_slot + turn.calls;
        let mut content: Vec<Block> = results
            .get_mut(slots)
            .into_iter()
            .flatten()
            .filter_map(Option::take)
            .map(Block::ToolResult)
            .collect();
        content.extend(target.trailing);
        if content.len() > 1 && placeholder.content_form == ContentForm::Text {
            placeholder.content_form = ContentForm::Blocks;
        }
        placeholder.content = content.into();
    }
    (out, report)
}
