//! [`plan_compaction`]: everything about a compaction that can be decided without a summarizer —
//! whether to run at all, what is kept verbatim, what is pruned first, how the rest is split
//! into parts and chunks, what the summary must keep, and whether the kept tail must itself be
//! shrunk. The plan is a value; [`super::run::CompactionRun`] walks it.
//!
//! Order (seed 001's "把所有东西串起来"): leading system messages are pinned; the last
//! `keep_recent_turns` user turns are kept verbatim; the rest is the span to summarise (details
//! stripped, pairing repaired). When the new content — everything that is not summarised — is
//! over `window × max_history_share × margin`, the oldest part of the span is pruned and
//! summarised first, its summary becoming the previous summary of the main pass. The span is
//! summarised in stages with an adaptive chunk size.
//!
//! **Split turns** (seed 003 §3.2 step 5, pi's `findCutPoint`): a few user turns can hold a
//! whole session of autonomous tool work, and keeping them whole leaves nothing to summarise —
//! the "nothing to compact" death spiral. So the boundary moves forward *inside* the preserved
//! turns ([`super::split::cut_preserved_turns`]) when
//! - the preserved turns are over the tail budget (below): the kept part is what fits it; or
//! - nothing before them can be summarised while a compaction must run (manual, overflow, or a
//!   threshold trigger above the threshold), or less than the preserved turns hold over
//!   `keep_recent_tokens` (a session its host has just compacted, then a few long turns of tool
//!   work: a summary of the little before them would only add to the context): the kept part
//!   is what fits `keep_recent_tokens`.
//!
//! The cut lands on the earliest safe cut point whose kept part fits: a user or assistant
//! message with no tool call and result on both sides of it, never past the latest assistant
//! step. The cut-off turn prefix is summarised **as part of the span** (not as a stage of its
//! own): one summary, one quality guard, one set of appendices. The span's latest user ask is
//! then the cut turn's ask, so the guard checks that the summary reflects it; the summarizer is
//! told the turn continues after the summary; and the asks moved into the span are quoted
//! verbatim in the appendix for pinned user messages, so the user's words are never lost.
//!
//! When the kept tail — after any cut — still leaves no room under the threshold, compacting
//! the history cannot help (the next request would trigger again): the tail is shrunk
//! ([`super::tail::shrink_tail`]: its largest tool results truncated, then the middles of its
//! largest texts cut, down to common sizes chosen so that the tail fits), and the originals
//! come back as [`crate::refs::NewRef`]s. With split turns this happens only when even the
//! smallest kept part (the latest assistant step on) is over budget.
//!
//! Every ref id the summarised span names (outputs offloaded or truncated before) is listed in
//! [`CompactionPlan::offloaded_refs`]; the summary lists each under `## Exact identifiers`, so
//! the originals stay reachable once the span is gone.

use serde::Serialize;

use super::appendices::{
    Appendices, FileLists, RulesFile, collect_file_ops, collect_tool_failures, host_rules_in,
    pinned_user_texts, rules_in_summary, rules_of_files, without_critical_rules,
    workspace_critical_rules,
};
use super::asks::latest_user_ask;
use super::outcome::{CompactionOutcome, CompactionTrigger, SkipReason, TailTruncation};
use super::prompts::{Language, detect_language, resolve_custom_instructions, summary_message};
use super::settings::{CompactionSettings, CompactionSettingsError};
use super::split::{
    PreservedSplit, StagePlan, TurnSplitReason, compute_adaptive_chunk_ratio, cut_preserved_turns,
    history_budget_tokens, max_chunk_tokens, plan_stages, prune_history_for_context_share,
    split_preserved_recent_turns, strip_details,
};
use super::tail::shrink_tail;
use crate::identifiers::{MAX_GUARD_IDENTIFIERS, extract_identifiers};
use crate::message::{Block, Message, Role, join_text};
use crate::refs::ref_ids_in;
use crate::repair::repair_pairing;
use crate::tokens::estimate_message_tokens;

/// Room left for the summary when judging whether the kept tail fits under the threshold.
pub const SUMMARY_ROOM_TOKENS: u64 = 4_096;

/// Longest identifier the summary is asked to keep (a SHA-512 in hex is 128; long URLs fit).
pub const MAX_IDENTIFIER_CHARS: usize = 256;

/// How many of the last summarised messages identifiers are extracted from (the seed's
/// `.slice(-10)`).
pub const IDENTIFIER_SOURCE_MESSAGES: usize = 10;

/// What the caller knows beyond the messages.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompactionInputs<'a> {
    /// The summary of the previous compaction, when the messages start after one. The messages
    /// passed to [`plan_compaction`] must not include that summary's own message.
    pub previous_summary: Option<&'a str>,
    /// What the context really costs when the caller knows it (provider-reported input tokens, or
    /// a BPE count with the tool definitions). A figure above the messages' estimate adds the
    /// difference as fixed overhead to every token figure of the plan.
    pub context_tokens: Option<u64>,
    /// Instructions given with this compaction (`/compact …`, `skald compact --instructions`);
    /// they win over the configured ones.
    pub custom_instructions: Option<&'a str>,
    /// The workspace's AGENTS.md text, for the critical-rules appendix (its seed sections).
    pub agents_md: Option<&'a str>,
    /// Rules files the caller read for the host (a Claude Code workspace's CLAUDE.md files, or
    /// what a host's system prompt holds), kept whole in the appendix unless they have the
    /// seed's sections; those the host put in the messages themselves are found there.
    pub rules_files: &'a [RulesFile],
    /// File lists of the previous compaction, carried over.
    pub previous_files: Option<&'a FileLists>,
}

/// A compaction that cannot be planned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// The settings failed validation.
    #[error("compaction settings: {0}")]
    Settings(#[from] CompactionSettingsError),
    /// The context window is 0 (unknown), so there is no threshold to plan against.
    #[error("window_tokens: expected the model's context window (more than 0), found 0")]
    ZeroWindow,
    /// The reserve takes the whole window, leaving nothing for the context.
    #[error(
        "window_tokens: {window} is not above reserve_tokens ({reserve}); lower reserve_tokens \
         for this model or give its real context window"
    )]
    WindowNotAboveReserve {
        /// The model's context window.
        window: u64,
        /// `reserve_tokens` from the settings.
        reserve: u64,
    },
}

/// The oldest history, pruned for `max_history_share` and summarised first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DroppedHistory {
    /// Details stripped, pairing repaired.
    #[serde(skip)]
    pub messages: Vec<Message>,
    /// The summarizer calls that summarise it.
    pub stages: StagePlan,
    /// The share of the window one chunk may take ([`compute_adaptive_chunk_ratio`]).
    pub chunk_ratio: f64,
    /// How many chunks were pruned from the front of the history.
    pub dropped_chunks: usize,
    /// Their size.
    pub dropped_tokens: u64,
    /// Tokens of everything that is not summarised (the trigger of the pruning).
    pub new_content_tokens: u64,
    /// The history budget the pruning brought the rest under
    /// ([`history_budget_tokens`]).
    pub budget_tokens: u64,
}

/// Everything decided before the first summarizer call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionPlan {
    /// The settings the plan was made with.
    pub settings: CompactionSettings,
    /// What started the compaction.
    pub trigger: CompactionTrigger,
    /// The model's context window.
    pub window_tokens: u64,
    /// The size above which the threshold trigger compacts.
    pub threshold_tokens: u64,
    /// What the context takes now: the estimate of its model-visible messages plus
    /// `overhead_tokens`.
    pub tokens_before: u64,
    /// Tokens outside the messages (from [`CompactionInputs::context_tokens`]).
    pub overhead_tokens: u64,
    /// Set when nothing will be attempted.
    pub skip: Option<SkipReason>,
    /// Messages planned over.
    pub message_count: usize,
    /// Where the preserved recent turns begin.
    pub split: PreservedSplit,
    /// `MessageMeta::id` of the first kept message.
    pub first_kept_entry: Option<String>,
    /// Tokens of the leading system messages kept in front of the summary.
    pub prefix_tokens: u64,
    /// Tokens of the messages kept verbatim after the summary.
    pub tail_tokens: u64,
    /// Most tokens the kept tail may take (see the module docs): `(threshold − overhead −
    /// prefix − SUMMARY_ROOM_TOKENS) / safety_margin`.
    pub tail_budget_tokens: u64,
    /// Set when the tail alone was over its budget and had tool results to truncate.
    #[serde(skip)]
    pub tail_truncation: Option<TailTruncation>,
    /// The oldest history, when it had to be pruned for `max_history_share` and is summarised
    /// first.
    pub dropped: Option<DroppedHistory>,
    /// The messages summarised in the main pass: details stripped, pairing repaired.
    #[serde(skip)]
    pub span: Vec<Message>,
    /// Its size.
    pub span_tokens: u64,
    /// The summarizer calls that summarise it.
    pub stages: StagePlan,
    /// The share of the window one chunk may take.
    pub chunk_ratio: f64,
    /// Identifiers the summary must keep (checked under the strict policy).
    pub identifiers: Vec<String>,
    /// The latest substantive user ask of the span (continuations skipped,
    /// [`super::asks::latest_user_ask`]), which the summary must reflect.
    pub latest_user_ask: Option<String>,
    /// The ref ids the summarised history names (offloaded and truncated outputs), in order of
    /// appearance: each is listed under `## Exact identifiers`.
    pub offloaded_refs: Vec<String>,
    /// The language the summary is written in, from the span's prose.
    pub language: Language,
    /// Instructions for the summarizer: the ones given with this compaction, else the configured
    /// ones.
    pub custom_instructions: Option<String>,
    /// The summary of the previous compaction, merged into this one.
    pub previous_summary: Option<String>,
    /// What is appended to the summary after it is written.
    pub appendices: Appendices,
}

impl CompactionPlan {
    /// Index of the first message kept verbatim.
    pub fn first_kept_index(&self) -> usize {
        self.split.boundary
    }

    /// True when the plan calls the summarizer at least once.
    pub fn needs_summarizer(&self) -> bool {
        self.skip.is_none() && (!self.span.is_empty() || self.dropped.is_some())
    }

    /// The context size after compacting with `summary` (appendices included): the pinned
    /// prefix, the summary message, the kept tail (truncated when planned) and the overhead.
    pub fn tokens_after(&self, summary: &str) -> u64 {
        let tail = self
            .tail_truncation
            .as_ref()
            .map_or(self.tail_tokens, |truncation| truncation.tokens_after);
        self.overhead_tokens
            + self.prefix_tokens
            + estimate_message_tokens(&summary_message(summary))
            + tail
    }

    /// The outcome when the plan decided to skip.
    pub fn skipped(&self) -> Option<CompactionOutcome> {
        self.skip.clone().map(|reason| CompactionOutcome::Skipped {
            reason,
            tokens_before: self.tokens_before,
        })
    }
}

fn visible_tokens(messages: &[Message]) -> u64 {
    messages
        .iter()
        .filter(|message| message.is_model_visible())
        .map(estimate_message_tokens)
        .sum()
}

/// Plans the compaction of `messages` (the model context since the last compaction) for a
/// model with a `window_tokens` context window.
pub fn plan_compaction(
    messages: &[Message],
    window_tokens: u64,
    settings: &CompactionSettings,
    trigger: CompactionTrigger,
    inputs: &CompactionInputs<'_>,
) -> Result<CompactionPlan, PlanError> {
    settings.validate()?;
    if window_tokens == 0 {
        return Err(PlanError::ZeroWindow);
    }
    if window_tokens <= settings.reserve_tokens {
        return Err(PlanError::WindowNotAboveReserve {
            window: window_tokens,
            reserve: settings.reserve_tokens,
        });
    }
    // The previous summary is in the context too (as its first message), and the new summary
    // replaces it: counted outside the messages, it would stay in every figure as overhead (with
    // a provider figure) or be missing from the context before (without one), and the summary
    // that takes its place would look like growth.
    let previous_summary_tokens = inputs
        .previous_summary
        .filter(|summary| !summary.trim().is_empty())
        .map_or(0, |summary| {
            estimate_message_tokens(&summary_message(summary))
        });
    let estimate = visible_tokens(messages) + previous_summary_tokens;
    let overhead_tokens = inputs
        .context_tokens
        .map_or(0, |reported| reported.saturating_sub(estimate));
    let tokens_before = estimate + overhead_tokens;
    let threshold_tokens = settings.threshold_tokens(window_tokens);

    let mut split = split_preserved_recent_turns(messages, settings.keep_recent_turns);
    let prefix = messages.get(..split.pinned_prefix).unwrap_or_default();
    let prefix_tokens = visible_tokens(prefix);
    let room = threshold_tokens
        .saturating_sub(overhead_tokens + prefix_tokens)
        .saturating_sub(SUMMARY_ROOM_TOKENS);
    let tail_budget_tokens = (room as f64 / settings.safety_margin).floor() as u64;

    let below_threshold = trigger == CompactionTrigger::Threshold
        && (!settings.enabled || tokens_before <= threshold_tokens);
    let mut span = summarisable_span(messages.get(split.summarizable()).unwrap_or_default());
    if !below_threshold {
        let cut = split_turn(messages, &split, &span, tail_budget_tokens, settings);
        if let Some(cut) = cut {
            split = cut;
            span = summarisable_span(messages.get(split.summarizable()).unwrap_or_default());
        }
    }
    let summarized_range = messages.get(split.summarizable()).unwrap_or_default();
    let tail = messages.get(split.boundary..).unwrap_or_default();
    let tail_tokens = visible_tokens(tail);

    let mut plan = CompactionPlan {
        settings: settings.clone(),
        trigger,
        window_tokens,
        threshold_tokens,
        tokens_before,
        overhead_tokens,
        skip: None,
        message_count: messages.len(),
        first_kept_entry: tail.first().and_then(|message| message.meta.id.clone()),
        split,
        prefix_tokens,
        tail_tokens,
        tail_budget_tokens,
        tail_truncation: None,
        dropped: None,
        span: Vec::new(),
        span_tokens: 0,
        stages: StagePlan::default(),
        chunk_ratio: settings.base_chunk_ratio,
        identifiers: Vec::new(),
        latest_user_ask: None,
        offloaded_refs: Vec::new(),
        language: detect_language(messages),
        custom_instructions: resolve_custom_instructions(
            inputs.custom_instructions,
            settings.custom_instructions.as_deref(),
            settings.max_custom_instructions_chars,
        ),
        // Its critical rules are appended again at the end (`critical_rules`), not summarised.
        previous_summary: inputs
            .previous_summary
            .map(without_critical_rules)
            .filter(|text| !text.is_empty()),
        appendices: Appendices::default(),
    };

    if trigger == CompactionTrigger::Threshold {
        if !settings.enabled {
            plan.skip = Some(SkipReason::Disabled);
            return Ok(plan);
        }
        if tokens_before <= threshold_tokens {
            plan.skip = Some(SkipReason::BelowThreshold {
                context_tokens: tokens_before,
                threshold_tokens,
            });
            return Ok(plan);
        }
    }

    if tail_tokens > tail_budget_tokens {
        plan.tail_truncation = shrink_tail(tail, tail_tokens, tail_budget_tokens, window_tokens);
    }

    if !has_history(&span) {
        if plan.tail_truncation.is_none() {
            plan.skip = Some(if tail_tokens > tail_budget_tokens {
                SkipReason::TailTooLarge {
                    tail_tokens,
                    budget_tokens: tail_budget_tokens,
                }
            } else {
                SkipReason::NothingToCompact
            });
        }
        return Ok(plan);
    }

    let span_tokens: u64 = span.iter().map(estimate_message_tokens).sum();
    let new_content_tokens = tokens_before.saturating_sub(span_tokens);
    let history_budget = history_budget_tokens(window_tokens, settings);
    if new_content_tokens > history_budget {
        let pruned = prune_history_for_context_share(span, window_tokens, settings);
        span = pruned.kept;
        if !pruned.dropped.is_empty() {
            let ratio = compute_adaptive_chunk_ratio(&pruned.dropped, window_tokens, settings);
            let max_chunk = max_chunk_tokens(window_tokens, ratio, settings);
            plan.dropped = Some(DroppedHistory {
                stages: plan_stages(&pruned.dropped, window_tokens, max_chunk, settings),
                messages: pruned.dropped,
                chunk_ratio: ratio,
                dropped_chunks: pruned.dropped_chunks,
                dropped_tokens: pruned.dropped_tokens,
                new_content_tokens,
                budget_tokens: pruned.budget_tokens,
            });
        }
    }

    plan.chunk_ratio = compute_adaptive_chunk_ratio(&span, window_tokens, settings);
    let max_chunk = max_chunk_tokens(window_tokens, plan.chunk_ratio, settings);
    plan.stages = plan_stages(&span, window_tokens, max_chunk, settings);
    plan.span_tokens = span.iter().map(estimate_message_tokens).sum();
    plan.identifiers = identifiers_of(&span);
    plan.latest_user_ask = latest_user_ask(&span);
    let dropped_messages = plan
        .dropped
        .as_ref()
        .map(|dropped| dropped.messages.as_slice());
    plan.offloaded_refs = ref_ids_of(dropped_messages.unwrap_or_default().iter().chain(&span));
    plan.span = span;

    let mut files = collect_file_ops(summarized_range);
    if let Some(previous) = inputs.previous_files {
        files.extend_with(previous);
    }
    plan.appendices = Appendices {
        pinned_user_messages: pinned_user_texts(messages, &plan.split.pinned_user_messages),
        tool_failures: collect_tool_failures(summarized_range, &settings.tool_failures),
        max_tool_failures: settings.tool_failures.max_failures,
        files: files.lists(),
        critical_rules: critical_rules(messages, inputs, settings.max_critical_rules_chars),
    };
    Ok(plan)
}

/// The `<workspace-critical-rules>` of a compaction of `messages`: the AGENTS.md sections the
/// caller gave, then the rules files the caller read and those the host put in the messages
/// (Claude Code's CLAUDE.md block, Codex's AGENTS.md message), within `max_chars`; with none of
/// them, the rules the previous summary carried, so that they outlive their source.
fn critical_rules(
    messages: &[Message],
    inputs: &CompactionInputs<'_>,
    max_chars: usize,
) -> Option<String> {
    let explicit = inputs
        .agents_md
        .and_then(|text| workspace_critical_rules(text, max_chars));
    let mut files = inputs.rules_files.to_vec();
    for found in host_rules_in(messages) {
        if !files.iter().any(|file| file.source == found.source) {
            files.push(found);
        }
    }
    let room = explicit.as_ref().map_or(max_chars, |rules| {
        max_chars.saturating_sub(rules.chars().count() + 2)
    });
    let hosts = rules_of_files(&files, room);
    match (explicit, hosts) {
        (Some(explicit), Some(hosts)) => Some(format!("{explicit}\n\n{hosts}")),
        (Some(one), None) | (None, Some(one)) => Some(one),
        (None, None) => inputs
            .previous_summary
            .and_then(rules_in_summary)
            .map(str::to_owned),
    }
}

/// The visible messages of `range`, details stripped and pairing repaired.
fn summarisable_span(range: &[Message]) -> Vec<Message> {
    let visible: Vec<Message> = range
        .iter()
        .filter(|message| message.is_model_visible())
        .cloned()
        .collect();
    repair_pairing(strip_details(visible)).0
}

fn has_history(span: &[Message]) -> bool {
    span.iter().any(|message| {
        matches!(
            message.role,
            Role::User | Role::Assistant | Role::ToolResult
        )
    })
}

/// The split turn of the plan, if any (see the module docs): when the preserved turns are over
/// the tail budget, the cut keeps what fits it; when nothing before them could be summarised,
/// or less than the preserved turns hold over `keep_recent_tokens` (a summary of it alone would
/// not shrink the context), the cut keeps what fits `keep_recent_tokens` (and the tail budget).
fn split_turn(
    messages: &[Message],
    split: &PreservedSplit,
    span: &[Message],
    tail_budget_tokens: u64,
    settings: &CompactionSettings,
) -> Option<PreservedSplit> {
    let tail_tokens = visible_tokens(messages.get(split.boundary..)?);
    if tail_tokens > tail_budget_tokens {
        return cut_preserved_turns(
            messages,
            split,
            tail_budget_tokens,
            TurnSplitReason::TailOverBudget,
        );
    }
    let reason = if !has_history(span) {
        TurnSplitReason::NothingElseToSummarize
    } else {
        let span_tokens: u64 = span.iter().map(estimate_message_tokens).sum();
        let over_keep = tail_tokens.saturating_sub(settings.keep_recent_tokens);
        if span_tokens >= over_keep {
            return None;
        }
        TurnSplitReason::LittleElseToSummarize
    };
    cut_preserved_turns(
        messages,
        split,
        tail_budget_tokens.min(settings.keep_recent_tokens),
        reason,
    )
}

/// Identifiers of the last [`IDENTIFIER_SOURCE_MESSAGES`] messages' text and tool output (at
/// most [`MAX_GUARD_IDENTIFIERS`]), leaving out matches longer than
/// [`MAX_IDENTIFIER_CHARS`]: a run of thousands of hex digits is a blob, not something a summary
/// can be asked to copy.
pub fn identifiers_of(span: &[Message]) -> Vec<String> {
    let start = span.len().saturating_sub(IDENTIFIER_SOURCE_MESSAGES);
    let text: Vec<String> = span
        .get(start..)
        .unwrap_or_default()
        .iter()
        .map(message_text)
        .filter(|text| !text.trim().is_empty())
        .collect();
    extract_identifiers(&text.join("\n"))
        .into_iter()
        .filter(|id| id.chars().count() <= MAX_IDENTIFIER_CHARS && !is_escape_residue(id))
        .take(MAX_GUARD_IDENTIFIERS)
        .collect()
}

/// Every distinct ref id the messages' text and tool output name, in order of appearance.
fn ref_ids_of<'m>(messages: impl Iterator<Item = &'m Message>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    messages
        .flat_map(|message| ref_ids_in(&message_text(message)))
        .map(|id| id.as_str().to_owned())
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

/// A Windows-path match made of escape sequences of JSON shown as text (`d:\n\n`): once `\n`,
/// `\t`, `\r` and `\\` are taken out, nothing alphanumeric is left after the drive letter.
fn is_escape_residue(id: &str) -> bool {
    let Some((drive, rest)) = id.split_once(":\\") else {
        return false;
    };
    if drive.len() != 1 {
        return false;
    }
    let mut remaining = String::from("\\");
    remaining.push_str(rest);
    for escape in ["\\\\", "\\n", "\\t", "\\r"] {
        remaining = remaining.replace(escape, "");
    }
    !remaining.chars().any(char::is_alphanumeric)
}

/// A message's text blocks and its tool results' text (`extractMessageText`).
fn message_text(message: &Message) -> String {
    let mut parts = Vec::new();
    for block in &message.content {
        match block {
            Block::Text(text) => parts.push(text.text.trim().to_owned()),
            Block::ToolResult(result) => parts.push(join_text(&result.content).trim().to_owned()),
            Block::Image(_) | Block::Thinking(_) | Block::ToolCall(_) | Block::Opaque(_) => {}
        }
    }
    parts.retain(|part| !part.is_empty());
    parts.join("\n")
}

/// The context after a compaction: the pinned prefix, the summary message, then the kept tail
/// (truncated when the outcome says so). `None` unless `outcome` is
/// [`CompactionOutcome::Compacted`] for these `messages`.
pub fn compacted_context(
    messages: &[Message],
    outcome: &CompactionOutcome,
) -> Option<Vec<Message>> {
    let CompactionOutcome::Compacted {
        summary,
        first_kept_index,
        tail_truncation,
        details,
        ..
    } = outcome
    else {
        return None;
    };
    let mut out: Vec<Message> = messages.get(..details.pinned_prefix)?.to_vec();
    out.push(summary_message(summary));
    match tail_truncation {
        Some(truncation) => out.extend(truncation.messages.iter().cloned()),
        None => out.extend(messages.get(*first_kept_index..)?.iter().cloned()),
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_residue_is_not_an_identifier() {
        assert!(is_escape_residue("d:\\n\\n"));
        assert!(is_escape_residue("x:\\\\\\t"));
        assert!(!is_escape_residue("C:\\Users\\me\\report.docx"));
        assert!(!is_escape_residue("C:\\new"));
        assert!(!is_escape_residue("/srv/app"));
        let span = vec![Message::text(
            Role::ToolResult,
            "{\"text\":\"line d:\\n\\n next\"} see /srv/app/main.py",
        )];
        assert_eq!(identifiers_of(&span), ["/srv/app/main.py"]);
    }
}
