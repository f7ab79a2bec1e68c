//! Decisions stated in the assistant's prose: choices ("I'll use…", "switching to…", "instead
//! of…"), diagnoses ("the root cause is…", "the fix is…") and, weaker, actions it announced and
//! outcomes it reported. Each sentence is scored by the strength of its cue and its recency;
//! a short sentence carries the sentence before it as context.

use super::span::Span;
use super::text::{
    compact_spaces, fold_case, has_phrase, join_prose, sentences, starts_with_phrase,
};
use super::todos::is_todo_statement;
use super::{Body, Candidate, actions::SPAN_GROUP};

/// Cues of a choice or a diagnosis.
const STRONG_CUES: &[&str] = &[
    "decided",
    "decide to",
    "decision",
    "instead of",
    "rather than",
    "switching to",
    "switch to",
    "switched to",
    "going with",
    "go with",
    "chose",
    "choose",
    "opted",
    "the fix is",
    "the fix was",
    "fix is to",
    "root cause",
    "the problem is",
    "the problem was",
    "the issue is",
    "the issue was",
    "the cause is",
    "caused by",
    "because",
    "i'll use",
    "i will use",
    "we'll use",
    "let's use",
    "approach",
    "the solution",
    "workaround",
    "turns out",
    "决定",
    "改用",
    "换成",
    "改为",
    "而不是",
    "根本原因",
    "原因是",
    "问题在于",
    "修复方法",
    "解决方案",
    "采用",
    "选择",
    "方案",
];

/// Cues of a plan or a constraint the assistant found.
const MEDIUM_CUES: &[&str] = &[
    "i need to",
    "we need to",
    "need to",
    "i'll",
    "i will",
    "we'll",
    "let's",
    "should",
    "doesn't support",
    "does not support",
    "not supported",
    "requires",
    "fixed",
    "resolved",
    "must",
    "which means",
    "需要",
    "应该",
    "我会",
    "我将",
    "我来",
    "修复",
    "解决",
    "不支持",
];

/// Outcomes worth a line when there is room.
const OUTCOME_CUES: &[&str] = &[
    "tests pass",
    "all green",
    "committed",
    "pushed",
    "passes",
    "succeeded",
    "works now",
    "通过",
    "成功",
];

/// Verbs of narration ("let me read…"): an announcement made of these is not a decision.
const NARRATION_VERBS: &[&str] = &[
    "read",
    "check",
    "look",
    "see",
    "view",
    "run",
    "wait",
    "verify",
    "explore",
    "examine",
    "find",
    "search",
    "start",
    "continue",
    "inspect",
    "compile",
    "test",
    "review",
    "understand",
    "get",
    "fetch",
    "open",
    "try",
    "first",
    "also",
    "now",
    "re-run",
    "rerun",
    "confirm",
    "grep",
    "list",
    "take",
    "plan",
    "think",
    "analyze",
    "analyse",
    "investigate",
    "dig",
    "figure",
];

/// Sentences shorter than this are context, not decisions.
const MIN_SENTENCE_CHARS: usize = 12;
/// A matched sentence shorter than this borrows the sentence before it.
const SHORT_SENTENCE_CHARS: usize = 90;
/// The borrowed sentence must be shorter than this.
const MAX_CONTEXT_CHARS: usize = 200;

/// 3 for a choice or diagnosis, 2 for a plan, 1 for an announced action or an outcome, 0 for
/// narration.
pub(super) fn strength(sentence: &str) -> i64 {
    let folded = fold_case(sentence);
    if STRONG_CUES.iter().any(|cue| has_phrase(&folded, cue)) {
        return 3;
    }
    // "Now let me update x.rs:" introduces a tool call; it is narration with a plan's words.
    let introduces_call = folded.trim_end().ends_with(':');
    let announced = [
        "let me",
        "now let me",
        "next, let me",
        "i'll now",
        "now i'll",
        "let's",
        "now let's",
        "first, let me",
    ]
    .iter()
    .find(|lead| starts_with_phrase(&folded, lead))
    .map(|lead| folded.get(lead.len()..).unwrap_or("").trim_start());
    if let Some(rest) = announced {
        let verb = rest.split_whitespace().next().unwrap_or("");
        let verb = verb.trim_matches(|c: char| !c.is_alphanumeric() && c != '-');
        return i64::from(!NARRATION_VERBS.contains(&verb) && !verb.is_empty() && !introduces_call);
    }
    if MEDIUM_CUES.iter().any(|cue| has_phrase(&folded, cue)) {
        return if introduces_call { 1 } else { 2 };
    }
    i64::from(OUTCOME_CUES.iter().any(|cue| has_phrase(&folded, cue)))
}

/// Decision candidates from the assistant's prose, and the previous summary's decisions.
pub(super) fn decision_candidates(span: &Span<'_>, previous: &[String]) -> Vec<Candidate> {
    let mut out = Vec::new();
    for turn in span.turns.iter().filter(|turn| turn.is_assistant) {
        let recency = span.recency(turn.index);
        // The candidate made from the previous sentence, which a following one extends.
        let mut open: Option<(usize, &str)> = None;
        for sentence in sentences(&turn.assistant) {
            let matched = open.take();
            if sentence.text.chars().count() < MIN_SENTENCE_CHARS
                || sentence.text.ends_with(['?', '？'])
            {
                continue;
            }
            let strength = strength(sentence.text);
            // "Next step: …" is a TODO, not a decision.
            if strength == 0 || is_todo_statement(sentence.text) {
                continue;
            }
            let score = strength * 100 + recency;
            // A decision that follows another on the same line extends it.
            let extends = matched
                .filter(|(_, last)| sentence.previous == Some(*last))
                .map(|(slot, _)| slot);
            if let Some(Candidate {
                body: Body::Text(text),
                score: best,
                ..
            }) = extends.and_then(|slot| out.get_mut(slot))
            {
                *text = join_prose(text, &compact_spaces(sentence.text));
                *best = (*best).max(score);
                open = extends.map(|slot| (slot, sentence.text));
                continue;
            }
            let text = match sentence.previous {
                Some(context)
                    if sentence.text.chars().count() < SHORT_SENTENCE_CHARS
                        && context.chars().count() < MAX_CONTEXT_CHARS =>
                {
                    join_prose(context, sentence.text)
                }
                Some(_) | None => sentence.text.to_owned(),
            };
            open = Some((out.len(), sentence.text));
            out.push(Candidate {
                body: Body::Text(compact_spaces(&text)),
                score,
                order: (SPAN_GROUP, u64::try_from(turn.index).unwrap_or(u64::MAX)),
            });
        }
    }
    for (position, item) in previous.iter().enumerate() {
        out.push(Candidate {
            body: Body::Text(item.clone()),
            // Between the span's plans and its announced actions: newer decisions win.
            score: 150 - i64::try_from(position.min(40)).unwrap_or(40),
            order: (0, u64::try_from(position).unwrap_or(u64::MAX)),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cue_strengths() {
        assert_eq!(strength("I'll use rustls instead of openssl."), 3);
        assert_eq!(strength("The root cause is a stale cache."), 3);
        assert_eq!(strength("I need to rewrite the migration."), 2);
        assert_eq!(strength("Let me force a clean recompile."), 1);
        assert_eq!(strength("Now let me update tool-call-capture.sh:"), 0);
        assert_eq!(strength("I need to source it from bash properly:"), 1);
        assert_eq!(strength("Let me read the file first."), 0);
        assert_eq!(strength("All tests pass now."), 1);
        assert_eq!(strength("The file has 20 lines."), 0);
        assert_eq!(strength("我们决定改用 SQLite。"), 3);
    }
}
