//! The user side of a summary: constraints (imperative sentences the user wrote, then
//! system-level rules from system messages and harness reminders) and the pending asks (what
//! the user asked that no assistant answer has followed yet). Tool output is never read here:
//! an imperative sentence in a tool result is data, not a rule.

use super::span::Span;
use super::text::{
    compact_spaces, cut_to_chars, fold_case, has_phrase, sentences, starts_with_phrase,
};
use super::{Body, Candidate};

const USER_RULE_SCORE: i64 = 300;
const PREVIOUS_RULE_SCORE: i64 = 200;
const SYSTEM_RULE_SCORE: i64 = 100;
const ASK_SCORE: i64 = 400;
const PREVIOUS_ASK_SCORE: i64 = 250;

/// Words that may precede an imperative without changing it ("please never…", "and always…").
const FILLERS: &[&str] = &[
    "please",
    "pls",
    "and",
    "also",
    "but",
    "so",
    "ok",
    "okay",
    "then",
    "oh",
    "btw",
    "remember:",
    "note:",
    "important:",
    "rule:",
    "again,",
    "and,",
    "also,",
    "please,",
];

/// An English sentence that starts with one of these (after fillers) is a rule.
const LEADING_CUES: &[&str] = &[
    "always",
    "never",
    "don't",
    "do not",
    "dont",
    "must",
    "make sure",
    "ensure",
    "only",
    "avoid",
    "use",
    "keep",
    "stop",
    "prefer",
    "remember to",
    "be sure",
    "stick to",
    "refrain",
    "no need to",
];

/// An English sentence that contains one of these anywhere is a rule.
const ANYWHERE_CUES: &[&str] = &[
    "must",
    "mustn't",
    "make sure",
    "at all times",
    "under no circumstances",
    "not allowed",
    "forbidden",
    "is required to",
    "are required to",
    "you should",
    "we should",
    "should never",
    "should always",
    "you always",
    "you never",
    "we always",
    "we never",
    "please never",
    "please always",
    "please don't",
    "please do not",
    "but don't",
    "but do not",
    "and don't",
    "and do not",
];

/// Chinese rule markers, anywhere in the sentence.
const CHINESE_CUES: &[&str] = &[
    "必须",
    "务必",
    "禁止",
    "不要",
    "不许",
    "不准",
    "一定要",
    "只能",
    "只用",
    "千万",
    "记得",
    "确保",
    "请勿",
    "严禁",
    "请使用",
    "请用",
    "请保持",
    "请遵守",
    "请只",
    "请始终",
    "永远不",
];

/// True for an imperative sentence that states a rule.
pub(super) fn is_rule(sentence: &str) -> bool {
    let sentence = sentence.trim();
    if sentence.chars().count() < 4 || sentence.ends_with(['?', '？']) {
        return false;
    }
    let folded = fold_case(sentence);
    if CHINESE_CUES.iter().any(|cue| folded.contains(cue)) || folded.starts_with('别') {
        return true;
    }
    let mut rest = folded.trim_start_matches(|c: char| !c.is_alphanumeric());
    loop {
        let before = rest;
        for filler in FILLERS {
            if starts_with_phrase(rest, filler) {
                rest = rest
                    .get(filler.len()..)
                    .unwrap_or("")
                    .trim_start_matches(|c: char| c.is_whitespace() || c == ',');
            }
        }
        if rest == before {
            break;
        }
    }
    LEADING_CUES.iter().any(|cue| starts_with_phrase(rest, cue))
        || ANYWHERE_CUES.iter().any(|cue| has_phrase(&folded, cue))
}

fn rule_candidates_of(text: &str, index: usize, score: i64, group: u32, out: &mut Vec<Candidate>) {
    for sentence in sentences(text) {
        if is_rule(sentence.text) {
            out.push(Candidate {
                body: Body::Text(compact_spaces(sentence.text)),
                score,
                order: (group, u64::try_from(index).unwrap_or(u64::MAX)),
            });
        }
    }
}

/// Constraints: the user's rules first, then the previous summary's, then at most
/// `max_system_rules` from system messages and harness text (the most recent kept).
pub(super) fn rule_candidates(
    span: &Span<'_>,
    previous: &[String],
    max_system_rules: usize,
) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut system = Vec::new();
    for turn in &span.turns {
        let recency = span.recency(turn.index);
        rule_candidates_of(
            &turn.user_own,
            turn.index,
            USER_RULE_SCORE + recency,
            2,
            &mut out,
        );
        rule_candidates_of(
            &turn.system,
            turn.index,
            SYSTEM_RULE_SCORE + recency,
            0,
            &mut system,
        );
        rule_candidates_of(
            &turn.harness,
            turn.index,
            SYSTEM_RULE_SCORE + recency,
            0,
            &mut system,
        );
    }
    let skip = system.len().saturating_sub(max_system_rules);
    out.extend(system.into_iter().skip(skip));
    for (position, item) in previous.iter().enumerate() {
        out.push(Candidate {
            body: Body::Text(item.clone()),
            score: PREVIOUS_RULE_SCORE - i64::try_from(position.min(100)).unwrap_or(100),
            order: (1, u64::try_from(position).unwrap_or(u64::MAX)),
        });
    }
    out
}

/// Pending asks: the user's messages after the last assistant answer (all of them when the
/// assistant has not answered yet), quoted and cut to `max_ask_chars`. The previous summary's
/// asks stay pending while the span holds no answer.
pub(super) fn ask_candidates(
    span: &Span<'_>,
    previous: &[String],
    max_ask_chars: usize,
) -> Vec<Candidate> {
    let answered_at = span.last_final_answer();
    let mut out = Vec::new();
    if answered_at.is_none() {
        for (position, item) in previous.iter().enumerate() {
            out.push(Candidate {
                body: Body::Text(item.clone()),
                score: PREVIOUS_ASK_SCORE - i64::try_from(position.min(100)).unwrap_or(100),
                order: (0, u64::try_from(position).unwrap_or(u64::MAX)),
            });
        }
    }
    for turn in &span.turns {
        if answered_at.is_some_and(|answer| turn.index < answer) || turn.user_own.is_empty() {
            continue;
        }
        let compact = compact_spaces(&turn.user_own);
        // Two characters go to the quotes.
        let Some(quoted) = cut_to_chars(&compact, max_ask_chars.saturating_sub(2)) else {
            continue;
        };
        out.push(Candidate {
            body: Body::Text(format!("\"{quoted}\"")),
            score: ASK_SCORE + span.recency(turn.index),
            order: (1, u64::try_from(turn.index).unwrap_or(u64::MAX)),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imperative_sentences_are_rules() {
        for rule in [
            "Always run the tests before committing.",
            "Never push to main.",
            "Please don't touch the migrations.",
            "Do not use unwrap in library code.",
            "You must keep the API stable.",
            "Make sure the output is JSON.",
            "Only change files under src/.",
            "Please use rustls, not openssl.",
            "And never log secrets.",
            "必须使用 rustls。",
            "不要修改迁移文件",
            "请使用中文回答",
            "别动配置文件",
        ] {
            assert!(is_rule(rule), "{rule}");
        }
    }

    #[test]
    fn descriptions_and_questions_are_not_rules() {
        for text in [
            "The test always fails on CI.",
            "I don't know why it breaks.",
            "Can you never do that?",
            "Fix the bug in the parser.",
            "这个测试总是失败",
            "ok",
        ] {
            assert!(!is_rule(text), "{text}");
        }
    }
}
