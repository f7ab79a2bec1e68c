//! Imperative clauses: whether a sentence the user (or a system message) wrote states a rule,
//! where that rule starts, and the key under which repeats of it meet.
//!
//! A rule may open the sentence ("Never push to main."), follow a label ("Step 3: never touch
//! /etc/passwd.", "Note: …", "Important - …", "注意：…"), follow fillers ("ok, please never…"),
//! or open a later clause after a comma, semicolon, colon or dash ("If CI fails, don't retry.").
//! A later clause needs a strong cue (always, never, don't, must…), because words such as
//! "only" or "use" open descriptions there as often as rules. Numbered labels ("Step 3:",
//! "Rule 2 -", "第3步：") are dropped from the rule as shown: they number a message, not the
//! rule, and keeping them would make the same rule said in six steps six items.

use crate::tokens::estimate::is_cjk;

use super::text::{fold_case, fold_key, has_phrase};

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
    "again",
    "thanks",
    "thank you",
    "sure",
    "yes",
    "right",
    "now",
];

/// Labels a rule may follow, when a separator (`:`, `-`, `—`, `：`…) comes after them.
const WORD_LABELS: &[&str] = &[
    "very important",
    "important",
    "note",
    "nb",
    "n.b.",
    "reminder",
    "remember",
    "rule",
    "rules",
    "warning",
    "caution",
    "constraint",
    "requirement",
    "ps",
    "p.s.",
    "fyi",
    "tip",
    "注意",
    "重要",
    "提醒",
    "规则",
    "备注",
    "要求",
];

/// A sentence that starts with one of these (after labels and fillers) is a rule.
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

/// The cues that make a later clause a rule on their own.
const STRONG_CUES: &[&str] = &[
    "always",
    "never",
    "don't",
    "do not",
    "dont",
    "must",
    "make sure",
    "ensure",
    "avoid",
    "remember to",
    "be sure",
    "refrain",
];

/// Openings that look imperative but state no rule.
const NOT_RULES: &[&str] = &[
    "never mind",
    "don't worry",
    "do not worry",
    "dont worry",
    "don't know",
    "dont know",
];

/// A sentence that contains one of these anywhere is a rule.
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

/// Separators after which a clause starts.
const CLAUSE_BREAKS: &[&str] = &[",", ";", ":", "，", "；", "：", " - ", " – ", " — "];

/// Longest numbered label, in characters ("Step 12 of 20").
const MAX_LABEL_CHARS: usize = 24;

/// A rule found in a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Imperative<'a> {
    /// The sentence as a summary shows it: numbered labels dropped, word labels kept.
    pub shown: &'a str,
    /// The rule itself, past labels and fillers: what repeats of it share.
    pub core: &'a str,
}

impl Imperative<'_> {
    /// The key under which two statements of this rule are one item.
    pub fn key(&self) -> String {
        fold_key(self.core)
    }
}

/// The rule `sentence` states, if it is an imperative one.
pub(super) fn imperative(sentence: &str) -> Option<Imperative<'_>> {
    let sentence = sentence.trim();
    if sentence.chars().count() < 4 || sentence.ends_with(['?', '？']) {
        return None;
    }
    let lead = skip_lead(sentence);
    let found = Imperative {
        shown: lead.shown,
        core: lead.core,
    };
    if lead.core.is_empty() || opens_non_rule(lead.core) {
        return None;
    }
    if CHINESE_CUES.iter().any(|cue| sentence.contains(cue)) || lead.core.starts_with('别') {
        return Some(found);
    }
    let folded = fold_case(sentence);
    if opens_with_cue(lead.core) || ANYWHERE_CUES.iter().any(|cue| has_phrase(&folded, cue)) {
        return Some(found);
    }
    later_clause_is_rule(lead.core).then_some(found)
}

/// True when `text` opens with an imperative cue word ("never", "don't"…): a word, not an
/// identifier, so it may be capitalised.
pub(super) fn opens_with_cue(text: &str) -> bool {
    opens_with_any(text, LEADING_CUES)
}

/// True when `text` opens with one of `cues` used as a command: "always"/"never" followed by a
/// verb in the third person ("Always serializes to…", "never fails") describe a habit.
fn opens_with_any(text: &str, cues: &[&str]) -> bool {
    cues.iter().any(|cue| {
        strip_phrase(text, cue).is_some_and(|after| {
            let describes = matches!(*cue, "always" | "never") && third_person(after);
            !describes
        })
    })
}

/// True when the next word looks like an English verb in the third person singular.
fn third_person(text: &str) -> bool {
    let word = text
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches(|c: char| !c.is_alphanumeric());
    word.len() >= 2
        && word != "as"
        && word.chars().all(|c| c.is_ascii_lowercase())
        && word.ends_with('s')
        && !word.ends_with("ss")
        && !word.ends_with("us")
}

/// Where the shown text and the rule start, past labels and fillers.
struct Lead<'a> {
    shown: &'a str,
    core: &'a str,
    /// A "please" was among the fillers: what follows is a request even without a strong cue.
    please: bool,
}

fn skip_lead(sentence: &str) -> Lead<'_> {
    let mut lead = Lead {
        shown: sentence,
        core: trim_to_word(sentence),
        please: false,
    };
    loop {
        if let Some(after) = numbered_label(lead.core) {
            lead.shown = after.trim_start();
            lead.core = trim_to_word(after);
        } else if let Some(after) = word_label(lead.core) {
            lead.core = trim_to_word(after);
        } else if let Some((filler, after)) = filler(lead.core) {
            lead.please |= filler == "please" || filler == "pls";
            lead.core = trim_to_word(after);
        } else {
            return lead;
        }
    }
}

/// True when a clause after the first opens with a strong cue (or with any cue after "please").
fn later_clause_is_rule(core: &str) -> bool {
    clause_starts(core).into_iter().any(|start| {
        let clause = core.get(start..).unwrap_or("");
        let lead = skip_lead(clause);
        if opens_non_rule(lead.core) {
            return false;
        }
        let cues = if lead.please {
            LEADING_CUES
        } else {
            STRONG_CUES
        };
        opens_with_any(lead.core, cues)
    })
}

/// Byte offsets where a clause after the first starts.
fn clause_starts(text: &str) -> Vec<usize> {
    let mut starts: Vec<usize> = CLAUSE_BREAKS
        .iter()
        .flat_map(|separator| {
            text.match_indices(separator)
                .map(move |(at, matched)| (at + matched.len(), *separator))
        })
        .filter(|(end, separator)| {
            // "10:30" and "a,b" are not clause breaks; a CJK separator always is.
            separator.chars().any(is_cjk_punctuation)
                || separator.starts_with(' ')
                || text
                    .get(*end..)
                    .and_then(|tail| tail.chars().next())
                    .is_some_and(char::is_whitespace)
        })
        .map(|(end, _)| end)
        .collect();
    starts.sort_unstable();
    starts.dedup();
    starts
}

fn is_cjk_punctuation(c: char) -> bool {
    matches!(c, '，' | '；' | '：')
}

fn opens_non_rule(core: &str) -> bool {
    NOT_RULES
        .iter()
        .any(|phrase| strip_phrase(core, phrase).is_some())
}

/// `text` from its first letter, digit or CJK character on.
fn trim_to_word(text: &str) -> &str {
    text.trim_start_matches(|c: char| !c.is_alphanumeric())
}

/// The text after a numbered label: one or two words holding a digit ("Step 3", "Rule 2",
/// "#4", "(1)", "第3步") followed by `:`, `：`, `)` or a spaced dash. ("Use Python 3: …" is
/// three words and stays: a longer run is more likely part of the sentence than a number.)
fn numbered_label(text: &str) -> Option<&str> {
    let (label, after, separator) = label_and_rest(text)?;
    // "1463: msg = …" is a numbered line of code and "10: …" a time; a bare number is a label
    // only before `)` ("1) never…").
    let bare_number = label.chars().all(|c| c.is_ascii_digit());
    if bare_number && !matches!(separator, ')' | '）') {
        return None;
    }
    let words = label.split_whitespace().count();
    let plain = label.chars().all(|c| {
        c.is_alphanumeric() || c.is_whitespace() || matches!(c, '#' | '(' | '.' | '/') || is_cjk(c)
    });
    (label.chars().any(|c| c.is_ascii_digit()) && plain && (1..=2).contains(&words))
        .then_some(after)
}

/// The label before the first label separator within [`MAX_LABEL_CHARS`], the rest, and the
/// separator.
fn label_and_rest(text: &str) -> Option<(&str, &str, char)> {
    for (at, c) in text.char_indices().take(MAX_LABEL_CHARS + 1) {
        let after = text.get(at + c.len_utf8()..)?;
        let separated = match c {
            '：' | ')' | '）' => true,
            ':' => after.is_empty() || after.starts_with(char::is_whitespace),
            '-' | '–' | '—' => {
                at > 0 && text.get(..at)?.ends_with(' ') && after.starts_with(' ')
            }
            _ => false,
        };
        if separated {
            return Some((text.get(..at)?.trim(), after, c));
        }
    }
    None
}

/// The text after a word label ("Note:", "Important -", "注意：").
fn word_label(text: &str) -> Option<&str> {
    WORD_LABELS.iter().find_map(|label| {
        let after = strip_phrase(text, label)?.trim_start();
        let mut chars = after.chars();
        match chars.next()? {
            ':' | '：' | '-' | '–' | '—' | ',' | '，' => Some(chars.as_str()),
            _ => None,
        }
    })
}

/// The filler `text` opens with, and the text after it (commas and spaces skipped).
fn filler(text: &str) -> Option<(&'static str, &str)> {
    FILLERS.iter().find_map(|word| {
        let after = strip_phrase(text, word)?;
        // "so" in "so that" or "now" in "now the build…" is only a filler before a break or a
        // cue; requiring the break or a following word keeps "ok" alone from vanishing.
        let rest = after.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ',' | '，'));
        (!rest.is_empty()).then_some((*word, rest))
    })
}

/// `text` after `phrase` when it opens with it on a word boundary, ASCII letters compared
/// without case and `’` read as `'`.
pub(super) fn strip_phrase<'a>(text: &'a str, phrase: &str) -> Option<&'a str> {
    let mut rest = text;
    for wanted in phrase.chars() {
        let mut chars = rest.chars();
        let got = chars.next()?;
        let same = got == wanted
            || got.to_ascii_lowercase() == wanted
            || (wanted == '\'' && matches!(got, '\u{2019}' | '\u{2018}'));
        if !same {
            return None;
        }
        rest = chars.as_str();
    }
    let needs_boundary = phrase
        .chars()
        .last()
        .is_some_and(|c| c.is_alphanumeric() && !is_cjk(c));
    let boundary = rest
        .chars()
        .next()
        .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
    (!needs_boundary || boundary).then_some(rest)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn shown(sentence: &str) -> Option<&str> {
        imperative(sentence).map(|found| found.shown)
    }

    #[test]
    fn sentences_opening_with_a_cue_are_rules() {
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
            "Don’t touch the lockfile.",
            "**Never** force-push.",
            "Always focus on the parser first.",
            "Never as root.",
        ] {
            assert_eq!(shown(rule), Some(rule), "{rule}");
        }
    }

    #[test]
    fn chinese_cues_are_rules() {
        for rule in [
            "必须使用 rustls。",
            "不要修改迁移文件",
            "请使用中文回答",
            "别动配置文件",
            "注意：不要删",
        ] {
            assert_eq!(shown(rule), Some(rule), "{rule}");
        }
    }

    #[test]
    fn numbered_labels_are_dropped_from_the_rule() {
        assert_eq!(
            shown("Step 3: never touch /etc/passwd."),
            Some("never touch /etc/passwd.")
        );
        assert_eq!(
            shown("Rule 2 - always sign commits."),
            Some("always sign commits.")
        );
        assert_eq!(shown("(1) never push to main"), Some("never push to main"));
        assert_eq!(
            shown("Rule #4: keep the API stable"),
            Some("keep the API stable")
        );
        assert_eq!(shown("2) always sign commits"), Some("always sign commits"));
        assert_eq!(
            shown("第3步：不要修改 /etc/passwd。"),
            Some("不要修改 /etc/passwd。")
        );
        // The same rule in two steps has one key.
        let a = imperative("Step 3: never touch /etc/passwd.").unwrap();
        let b = imperative("Step 4: Never touch /etc/passwd.").unwrap();
        assert_eq!(a.key(), b.key());
    }

    #[test]
    fn numbered_lines_of_code_keep_their_number() {
        let line = "1463: msg = 'The precision must be {} or \"{}\".'.format(";
        assert_eq!(shown(line), Some(line));
    }

    #[test]
    fn word_labels_are_kept_but_do_not_hide_the_rule() {
        for rule in [
            "Note: never commit secrets.",
            "Important - only edit files under src/.",
            "IMPORTANT: use the staging database.",
            "Remember: never commit secrets.",
            "注意：请只修改 src 目录。",
        ] {
            assert_eq!(shown(rule), Some(rule), "{rule}");
        }
        assert_eq!(
            imperative("Note: never commit secrets.").unwrap().key(),
            imperative("never commit secrets").unwrap().key()
        );
    }

    #[test]
    fn a_rule_after_a_comma_or_semicolon_counts() {
        for rule in [
            "ok, never push to main",
            "Sure thing, never push to main.",
            "Looks good; always rebase before merging.",
            "If CI fails, don't retry it blindly.",
            "For the deploy script: never run it on Fridays.",
            "I had a look, please use the new API.",
        ] {
            assert_eq!(shown(rule), Some(rule), "{rule}");
        }
        // Fillers do not make a different rule.
        assert_eq!(
            imperative("ok, never push to main").unwrap().key(),
            imperative("Never push to main.").unwrap().key()
        );
    }

    #[test]
    fn descriptions_and_questions_are_not_rules() {
        for text in [
            "The test always fails on CI.",
            "I don't know why it breaks.",
            "Can you never do that?",
            "Fix the bug in the parser.",
            "Step 3: check the build log for job 3.",
            "The build is green, only one test is flaky.",
            "I ran it, use of memory grew to 2 GB.",
            "Thanks, don't worry about it.",
            "Oh, never mind.",
            "It started at 10:30 and never finished",
            "1475: # Always serializes to an integer value.",
            "Never fails locally, only on CI.",
            "It is cached; always is, since 2.0.",
            "这个测试总是失败",
            "ok",
            "ok, ",
        ] {
            assert_eq!(shown(text), None, "{text}");
        }
    }

    #[test]
    fn phrases_strip_on_word_boundaries() {
        assert_eq!(strip_phrase("Never push", "never"), Some(" push"));
        assert_eq!(strip_phrase("Neverland", "never"), None);
        assert_eq!(strip_phrase("Don’t", "don't"), Some(""));
        assert_eq!(strip_phrase("注意：x", "注意"), Some("：x"));
    }
}
