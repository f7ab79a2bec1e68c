//! The last resort of overflow recovery (seed 003 §4's fallback, OpenClaw's
//! `truncateOversizedToolResultsInSession`): the session's tool results cut **persistently**, as
//! a plan of entry rewrites the driver writes as one new branch, with every original kept as a
//! [`NewRef`] whose id the truncation marker names.
//!
//! Two passes, both over the stored messages of the model-visible path (never over something
//! the pipeline already changed, so each result gets exactly one ref of its stored content):
//! - **Oversized:** every result over the per-result budget of the effective window (the
//!   configured window, or the provider's stated limit when smaller) with the recovery settings,
//!   whose `min_keep_chars` is 0 (seed 003 §2.3: "the recovery path uses 0").
//! - **Aggregate:** while the context is still over its target, the budget is halved and applied
//!   to results from the oldest to the newest, stopping as soon as the context fits, down to
//!   [`AGGREGATE_FLOOR_CHARS`]. Older output goes first: the newest result is the one the model
//!   is acting on.
//!
//! The target is what fits under the window once the reply's reserve is left free, scaled by what
//! the provider counted against what skald estimated when the provider said how many tokens it
//! was sent (an estimate that undercounts must shrink further).

use std::collections::BTreeMap;

use serde::Serialize;
use skald_core::message::{Block, Message};
use skald_core::pipeline::truncate::{MARKER_RESERVE_CHARS, result_budget_chars};
use skald_core::pipeline::{TruncateSettings, truncate};
use skald_core::refs::NewRef;
use skald_core::session::{EntryKind, Session};
use skald_core::tokens::estimate_message_tokens;

/// The smallest per-result budget the aggregate pass goes down to: the marker (about 170
/// characters) and a few lines of the output's head.
pub const AGGREGATE_FLOOR_CHARS: usize = 2 * MARKER_RESERVE_CHARS;

/// What the fallback must achieve, in estimated tokens.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TruncationGoal {
    /// The window the per-result budget is computed for.
    pub window_tokens: u64,
    /// Estimated tokens the messages plus `overhead_tokens` must get under.
    pub target_tokens: u64,
    /// Estimated tokens of the request outside the session's messages (system prompt, tools).
    pub overhead_tokens: u64,
}

/// The rewrites to write, and what they do.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionTruncation {
    /// Entry id → the stored message with its results cut.
    pub rewrites: BTreeMap<String, EntryKind>,
    /// Originals of every cut result (one per result block), to store before the rewrite.
    pub new_refs: Vec<NewRef>,
    pub summary: TruncationSummary,
}

/// What the fallback truncation did, in figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TruncationSummary {
    /// The window the per-result budget was computed for.
    pub window_tokens: u64,
    /// The per-result budget of the oversized pass.
    pub budget_chars: usize,
    /// The smallest budget the aggregate pass used (`budget_chars` when it did not run).
    pub smallest_budget_chars: usize,
    /// Estimated tokens the request had to get under.
    pub target_tokens: u64,
    /// Estimated tokens of the request before and after.
    pub tokens_before: u64,
    /// Estimated tokens of the request after the cut.
    pub tokens_after: u64,
    /// Tool-result blocks cut.
    pub results: usize,
    /// Text characters of the cut results, before and after.
    pub chars_before: usize,
    /// Text characters of the cut results after the cut.
    pub chars_after: usize,
    /// Still over the target with every result at the floor.
    pub still_over_target: bool,
}

/// A tool-result message of the context and its current (possibly cut) form.
struct Candidate {
    entry_id: String,
    stored: Message,
    current: Option<Cut>,
    tokens_now: u64,
}

struct Cut {
    message: Message,
    new_refs: Vec<NewRef>,
    results: usize,
    chars_before: usize,
    chars_after: usize,
    /// The text characters of the largest cut result: what a smaller budget is compared with.
    largest_chars: usize,
}

/// Plans the fallback truncation of `session`'s active path, whose model-visible messages are
/// `context` (from [`crate::compact::session_context`]).
pub(crate) fn plan_session_truncation(
    session: &Session,
    context: &[Message],
    goal: TruncationGoal,
    settings: &TruncateSettings,
) -> SessionTruncation {
    let window = goal.window_tokens;
    let budget = result_budget_chars(window, settings);
    let floor = AGGREGATE_FLOOR_CHARS.max(settings.min_keep_chars + MARKER_RESERVE_CHARS);
    let mut total = goal.overhead_tokens;
    let mut candidates: Vec<Candidate> = Vec::new();
    for message in context {
        let tokens = estimate_message_tokens(message);
        total += tokens;
        if let Some(candidate) = candidate(session, message, tokens) {
            candidates.push(candidate);
        }
    }
    let tokens_before = total;
    let mut summary = TruncationSummary {
        window_tokens: window,
        budget_chars: budget,
        smallest_budget_chars: budget,
        target_tokens: goal.target_tokens,
        tokens_before,
        ..TruncationSummary::default()
    };
    if settings.enabled && window > 0 {
        for candidate in &mut candidates {
            apply(candidate, budget, window, settings, &mut total);
        }
        let mut level = budget / 2;
        while total > goal.target_tokens && level >= floor {
            summary.smallest_budget_chars = level;
            for candidate in &mut candidates {
                if total <= goal.target_tokens {
                    break;
                }
                apply(candidate, level, window, settings, &mut total);
            }
            level /= 2;
        }
    }
    summary.tokens_after = total;
    summary.still_over_target = total > goal.target_tokens;
    let mut plan = SessionTruncation::default();
    for candidate in candidates {
        let Some(cut) = candidate.current else {
            continue;
        };
        summary.results += cut.results;
        summary.chars_before += cut.chars_before;
        summary.chars_after += cut.chars_after;
        plan.new_refs.extend(cut.new_refs);
        plan.rewrites
            .insert(candidate.entry_id, EntryKind::Message(cut.message));
    }
    plan.summary = summary;
    plan
}

/// The context message as a candidate when it holds tool results and is a stored message entry.
fn candidate(session: &Session, message: &Message, tokens: u64) -> Option<Candidate> {
    let has_result = message
        .content
        .iter()
        .any(|block| matches!(block, Block::ToolResult(_)));
    if !has_result {
        return None;
    }
    let entry_id = message.meta.id.clone()?;
    let stored = session.entry(&entry_id)?.kind.as_message()?.clone();
    Some(Candidate {
        entry_id,
        stored,
        current: None,
        tokens_now: tokens,
    })
}

/// Cuts the candidate's stored message to `budget` characters per result, when that is smaller
/// than what it has now, and keeps `total` up to date.
fn apply(
    candidate: &mut Candidate,
    budget: usize,
    window: u64,
    settings: &TruncateSettings,
    total: &mut u64,
) {
    if candidate
        .current
        .as_ref()
        .is_some_and(|cut| cut.largest_chars <= budget)
    {
        return;
    }
    let capped = TruncateSettings {
        hard_max_chars: budget.min(settings.hard_max_chars),
        // The budget is the cap whatever the window.
        window_caps: Vec::new(),
        ..settings.clone()
    };
    let outcome = truncate(vec![candidate.stored.clone()], &capped, window);
    if outcome.report.is_noop() {
        return;
    }
    let Some(message) = outcome.messages.into_iter().next() else {
        return;
    };
    let tokens = estimate_message_tokens(&message);
    *total = total.saturating_sub(candidate.tokens_now) + tokens;
    candidate.tokens_now = tokens;
    candidate.current = Some(Cut {
        message,
        new_refs: outcome.new_refs,
        results: outcome.report.truncated,
        chars_before: outcome.report.chars_before,
        chars_after: outcome.report.chars_after,
        largest_chars: outcome
            .report
            .changes
            .iter()
            .map(|change| change.chars_after)
            .max()
            .unwrap_or(0),
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use skald_core::message::{ContentForm, Extra, Role, ToolCall, ToolResult};
    use skald_core::session::SessionHeader;

    fn result(id: &str, chars: usize) -> Message {
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: id.into(),
                tool_name: Some("bash".into()),
                content: vec![Block::text(format!(
                    "{id}\n{}",
                    "output line\n".repeat(chars / 12)
                ))]
                .into(),
                content_form: ContentForm::Blocks,
                is_error: None,
                details: None,
                extra: Extra::new(),
            })],
        )
    }

    fn call(id: &str) -> Message {
        Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: id.into(),
                name: "bash".into(),
                arguments: serde_json::json!({"command": "ls"}),
                arguments_text: None,
                extra: Extra::new(),
            })],
        )
    }

    /// A session of `results` (calls and results alternating) and its context.
    fn session(results: &[(&str, usize)]) -> (Session, Vec<Message>) {
        let mut session = Session::new(SessionHeader::default());
        let mut counter = 0u32;
        let mut push = |session: &mut Session, message: Message| {
            counter += 1;
            let id = session.fresh_id(counter);
            session
                .append(&id, "2026-01-01T00:00:00.000Z", EntryKind::Message(message))
                .unwrap();
        };
        push(&mut session, Message::text(Role::User, "go"));
        for (id, chars) in results {
            push(&mut session, call(id));
            push(&mut session, result(id, *chars));
        }
        let context = skald_core::session::session_context(&session, None);
        (session, context)
    }

    fn text_chars(entry: &EntryKind) -> usize {
        let EntryKind::Message(message) = entry else {
            panic!("not a message")
        };
        message
            .content
            .iter()
            .filter_map(Block::as_tool_result)
            .map(|result| skald_core::message::join_text(&result.content).len())
            .sum()
    }

    fn recovery_settings() -> TruncateSettings {
        TruncateSettings {
            min_keep_chars: 0,
            ..TruncateSettings::default()
        }
    }

    #[test]
    fn an_oversized_result_is_cut_to_the_window_share_with_its_original_as_a_ref() {
        let (session, context) = session(&[("a", 30_000), ("b", 1_000)]);
        let goal = TruncationGoal {
            window_tokens: 8_192,
            target_tokens: u64::MAX,
            overhead_tokens: 0,
        };
        let plan = plan_session_truncation(&session, &context, goal, &recovery_settings());
        assert_eq!(plan.rewrites.len(), 1);
        assert_eq!(plan.new_refs.len(), 1);
        assert_eq!(plan.summary.budget_chars, 9_828);
        let rewritten = plan.rewrites.values().next().unwrap();
        assert!(text_chars(rewritten) <= 9_828);
        assert!(
            plan.new_refs[0]
                .payload
                .text()
                .starts_with("a\noutput line"),
            "the ref holds the original"
        );
        assert!(!plan.summary.still_over_target);
    }

    #[test]
    fn the_aggregate_pass_cuts_older_results_first_until_the_context_fits() {
        let (session, context) = session(&[("a", 6_000), ("b", 6_000), ("c", 6_000)]);
        // About 4,600 tokens in all; each result is under the per-result budget.
        let goal = TruncationGoal {
            window_tokens: 8_192,
            target_tokens: 3_500,
            overhead_tokens: 0,
        };
        let plan = plan_session_truncation(&session, &context, goal, &recovery_settings());
        assert!(plan.summary.tokens_before > 4_000);
        assert!(plan.summary.tokens_after <= 3_500, "{:?}", plan.summary);
        // At each budget the oldest result goes first: it ends up the shortest.
        let result_ids: Vec<String> = context
            .iter()
            .filter(|message| message.role == Role::ToolResult)
            .map(|message| message.meta.id.clone().unwrap())
            .collect();
        let chars_of = |id: &String| plan.rewrites.get(id).map(text_chars);
        let oldest = chars_of(&result_ids[0]).unwrap();
        let newest = chars_of(&result_ids[2]).unwrap_or(6_000);
        assert!(oldest < newest, "{oldest} !< {newest}");
        assert!(plan.summary.smallest_budget_chars < plan.summary.budget_chars / 2);
    }

    #[test]
    fn nothing_oversized_and_a_fitting_context_plans_nothing() {
        let (session, context) = session(&[("a", 3_000)]);
        let goal = TruncationGoal {
            window_tokens: 8_192,
            target_tokens: 7_000,
            overhead_tokens: 100,
        };
        let plan = plan_session_truncation(&session, &context, goal, &recovery_settings());
        assert!(plan.rewrites.is_empty());
        assert!(plan.new_refs.is_empty());
    }

    #[test]
    fn the_aggregate_pass_stops_at_the_floor() {
        let (session, context) = session(&[("a", 6_000), ("b", 6_000)]);
        let goal = TruncationGoal {
            window_tokens: 8_192,
            target_tokens: 10,
            overhead_tokens: 0,
        };
        let plan = plan_session_truncation(&session, &context, goal, &recovery_settings());
        assert!(plan.summary.still_over_target);
        assert_eq!(plan.rewrites.len(), 2);
        assert!(plan.summary.smallest_budget_chars >= AGGREGATE_FLOOR_CHARS);
        for rewritten in plan.rewrites.values() {
            assert!(text_chars(rewritten) <= plan.summary.smallest_budget_chars);
        }
    }

    #[test]
    fn entries_that_are_not_stored_messages_are_left_alone() {
        let (session, _) = session(&[("a", 30_000)]);
        // A context message whose id names no entry (a host-built message) is not a candidate.
        let mut stray = result("z", 30_000);
        stray.meta.id = Some("ffffffff".into());
        let goal = TruncationGoal {
            window_tokens: 8_192,
            target_tokens: u64::MAX,
            overhead_tokens: 0,
        };
        let plan = plan_session_truncation(&session, &[stray], goal, &recovery_settings());
        assert!(plan.rewrites.is_empty());
    }
}
