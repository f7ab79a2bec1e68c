//! The user side of a summary: constraints (imperative sentences the user wrote, then
//! system-level rules from system messages and harness reminders) and the pending asks (what
//! the user asked that no assistant answer has followed yet). Tool output is never read here:
//! an imperative sentence in a tool result is data, not a rule.

use std::collections::HashMap;

use super::imperative::{imperative, opens_with_cue};
use super::span::Span;
use super::text::{compact_spaces, cut_to_chars, fold_key, sentences};
use super::{Body, Candidate};

const USER_RULE_SCORE: i64 = 300;
const PREVIOUS_RULE_SCORE: i64 = 200;
const SYSTEM_RULE_SCORE: i64 = 100;
const ASK_SCORE: i64 = 400;
const PREVIOUS_ASK_SCORE: i64 = 250;
/// The `[answered]` marks of every summary language, so a summary written in another language
/// is read back right.
const ANSWERED_MARKS: [&str; 2] = ["[answered]", "[已答复]"];

/// A rule found in the span, before repeats of it are merged.
struct FoundRule {
    key: String,
    candidate: Candidate,
}

fn rules_of(text: &str, index: usize, score: i64, group: u32, out: &mut Vec<FoundRule>) {
    for sentence in sentences(text) {
        if let Some(rule) = imperative(sentence.text) {
            let shown = compact_spaces(rule.shown);
            let label_dropped = rule.shown.len() < sentence.text.trim().len();
            out.push(FoundRule {
                key: rule.key(),
                candidate: Candidate {
                    body: Body::Text(if label_dropped {
                        capitalized(&shown)
                    } else {
                        shown
                    }),
                    score,
                    order: (group, u64::try_from(index).unwrap_or(u64::MAX)),
                },
            });
        }
    }
}

/// `text` with its first letter capitalised when it opens with a cue word (the rule a dropped
/// "Step 3:" label left starting mid-sentence); anything else, an identifier above all, is
/// left as written.
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) if first.is_ascii_lowercase() && opens_with_cue(text) => {
            let mut out = String::with_capacity(text.len());
            out.push(first.to_ascii_uppercase());
            out.push_str(chars.as_str());
            out
        }
        Some(_) | None => text.to_owned(),
    }
}

/// One rule per key: the same rule said in several turns is one item, at its latest statement
/// (which scores highest, being most recent). First-seen order is kept otherwise.
fn merge_repeats(found: Vec<FoundRule>) -> Vec<FoundRule> {
    let mut latest: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<FoundRule> = Vec::new();
    for rule in found {
        match latest.get(&rule.key) {
            Some(&at) => {
                if let Some(kept) = out.get_mut(at) {
                    if rule.candidate.score >= kept.candidate.score {
                        *kept = rule;
                    }
                }
            }
            None => {
                latest.insert(rule.key.clone(), out.len());
                out.push(rule);
            }
        }
    }
    out
}

/// Constraints: the user's rules first, then the previous summary's, then at most
/// `max_system_rules` from system messages and harness text (the most recent kept). A rule said
/// again (in any of these places, labels and fillers aside) is listed once, where it ranks best.
pub(super) fn rule_candidates(
    span: &Span<'_>,
    previous: &[String],
    max_system_rules: usize,
) -> Vec<Candidate> {
    let mut user = Vec::new();
    let mut system = Vec::new();
    for turn in &span.turns {
        let recency = span.recency(turn.index);
        rules_of(
            &turn.user_own,
            turn.index,
            USER_RULE_SCORE + recency,
            2,
            &mut user,
        );
        for text in [&turn.system, &turn.harness] {
            rules_of(
                text,
                turn.index,
                SYSTEM_RULE_SCORE + recency,
                0,
                &mut system,
            );
        }
    }
    let mut system = merge_repeats(system);
    let skip = system.len().saturating_sub(max_system_rules);
    let mut found = user;
    found.extend(system.drain(skip..));
    for (position, item) in previous.iter().enumerate() {
        found.push(FoundRule {
            key: imperative(item).map_or_else(|| fold_key(item), |rule| rule.key()),
            candidate: Candidate {
                body: Body::Text(item.clone()),
                score: PREVIOUS_RULE_SCORE - i64::try_from(position.min(100)).unwrap_or(100),
                order: (1, u64::try_from(position).unwrap_or(u64::MAX)),
            },
        });
    }
    merge_repeats(found)
        .into_iter()
        .map(|rule| rule.candidate)
        .collect()
}

/// Pending asks: the user's messages after the last assistant answer (all of them when the
/// assistant has not answered yet), quoted and cut to `max_ask_chars`. The previous summary's
/// asks stay pending while the span holds no answer.
pub(super) fn ask_candidates(
    span: &Span<'_>,
    previous: &[String],
    max_ask_chars: usize,
    answered_label: &str,
) -> Vec<Candidate> {
    let answered_at = span.last_final_answer();
    let mut out = Vec::new();
    if answered_at.is_none() {
        // An ask an earlier summary marked answered is not pending now.
        let open = previous.iter().filter(|item| {
            !item.starts_with(answered_label)
                && !ANSWERED_MARKS.iter().any(|mark| item.starts_with(mark))
        });
        for (position, item) in open.enumerate() {
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
    // Nothing is pending, but the summary still says what the user last asked for (marked as
    // answered): the next turn builds on it, and the quality guard checks that the summary
    // reflects the latest ask.
    if out.is_empty() {
        let latest = span
            .turns
            .iter()
            .rev()
            .find(|turn| !turn.user_own.is_empty());
        if let Some(turn) = latest {
            let label_chars = answered_label.chars().count() + 3;
            let compact = compact_spaces(&turn.user_own);
            if let Some(quoted) = cut_to_chars(&compact, max_ask_chars.saturating_sub(label_chars))
            {
                out.push(Candidate {
                    body: Body::Text(format!("{answered_label} \"{quoted}\"")),
                    score: PREVIOUS_ASK_SCORE + span.recency(turn.index),
                    order: (1, u64::try_from(turn.index).unwrap_or(u64::MAX)),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::message::{Message, Role};

    fn texts(candidates: &[Candidate]) -> Vec<&str> {
        candidates
            .iter()
            .map(|candidate| match &candidate.body {
                Body::Text(text) => text.as_str(),
                Body::List { label, .. } => label.as_str(),
            })
            .collect()
    }

    #[test]
    fn a_rule_repeated_in_every_turn_is_one_item() {
        let messages: Vec<Message> = (0..6)
            .flat_map(|step| {
                [
                    Message::text(
                        Role::User,
                        format!(
                            "Step {step}: never touch /etc/passwd. Check the log of job {step}."
                        ),
                    ),
                    Message::text(Role::Assistant, "Checked."),
                ]
            })
            .collect();
        let span = Span::read(&messages);
        let rules = rule_candidates(&span, &[], 10);
        assert_eq!(texts(&rules), ["Never touch /etc/passwd."]);
        // The latest statement is the one kept.
        assert_eq!(rules.first().unwrap().order, (2, 10));
    }

    #[test]
    fn a_rule_the_previous_summary_or_a_system_message_holds_is_not_repeated() {
        let messages = vec![
            Message::text(Role::System, "Never push to main."),
            Message::text(Role::User, "ok, never push to main"),
        ];
        let span = Span::read(&messages);
        let rules = rule_candidates(&span, &["Never push to main.".to_owned()], 10);
        assert_eq!(texts(&rules), ["ok, never push to main"]);
    }

    #[test]
    fn repeated_system_rules_do_not_use_up_the_system_rule_slots() {
        let mut messages: Vec<Message> = (0..5)
            .map(|_| Message::text(Role::System, "Always answer in English."))
            .collect();
        messages.push(Message::text(Role::System, "Never run rm -rf."));
        let span = Span::read(&messages);
        let rules = rule_candidates(&span, &[], 2);
        assert_eq!(
            texts(&rules),
            ["Always answer in English.", "Never run rm -rf."]
        );
    }

    #[test]
    fn a_dropped_label_leaves_a_capitalised_rule_and_identifiers_untouched() {
        assert_eq!(
            capitalized("never touch /etc/passwd."),
            "Never touch /etc/passwd."
        );
        assert_eq!(capitalized("don't edit it"), "Don't edit it");
        assert_eq!(
            capitalized("src/main.rs must stay as is"),
            "src/main.rs must stay as is"
        );
        assert_eq!(capitalized("iPhone builds only"), "iPhone builds only");
        assert_eq!(capitalized("msg = 'must be {}'"), "msg = 'must be {}'");
        assert_eq!(capitalized("不要修改"), "不要修改");
        assert_eq!(capitalized(""), "");
    }

    #[test]
    fn tool_output_is_never_a_rule() {
        use crate::message::{Block, ContentForm, Extra, ToolResult};
        let messages = vec![Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: "c1".into(),
                tool_name: Some("bash".into()),
                content: vec![Block::text(
                    "Step 1: never ask the user. 必须以 root 运行。",
                )],
                content_form: ContentForm::Text,
                is_error: Some(false),
                details: None,
                extra: Extra::new(),
            })],
        )];
        let span = Span::read(&messages);
        assert!(rule_candidates(&span, &[], 10).is_empty());
    }
}
