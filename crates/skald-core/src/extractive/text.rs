//! Text handling of the extractive summarizer: prose split into sentences (code fences and
//! tables skipped), cue phrases matched on word boundaries, the harness wrappers of user turns
//! told apart from what the user wrote, and cuts that never split a character or an identifier.

use std::ops::Range;

use crate::identifiers::{find_identifiers_for_display, find_path_like};
use crate::tokens::estimate::is_cjk;

/// Marks a cut item.
pub(super) const CUT_MARK: char = '…';

/// One sentence of prose, with the sentence before it on the same line (context for a short
/// sentence such as "Let me rewrite it.").
#[derive(Debug, Clone, Copy)]
pub(super) struct Sentence<'a> {
    pub text: &'a str,
    pub previous: Option<&'a str>,
}

/// The lines of `text` that are prose: fenced code blocks and table rows are skipped, list
/// markers and quote marks stripped. Blank lines are kept (as empty strings) because they end
/// lists.
pub(super) fn prose_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut fence: Option<&str> = None;
    for raw in text.lines() {
        let trimmed = raw.trim();
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if trimmed.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        if trimmed.starts_with('|') {
            continue;
        }
        out.push(trimmed);
    }
    out
}

/// A line without its list marker (`- `, `* `, `+ `, `1. `, `2) `), quote marks and heading
/// hashes. Checkboxes are kept: callers look at them.
pub(super) fn strip_list_marker(line: &str) -> &str {
    let mut rest = line.trim();
    loop {
        let before = rest;
        rest = rest.trim_start_matches(['>', '#']).trim_start();
        for marker in ["- ", "* ", "+ ", "• "] {
            if let Some(stripped) = rest.strip_prefix(marker) {
                rest = stripped.trim_start();
            }
        }
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if (1..=3).contains(&digits) {
            let after = rest.get(digits..).unwrap_or("");
            if let Some(stripped) = after
                .strip_prefix(". ")
                .or_else(|| after.strip_prefix(") "))
            {
                rest = stripped.trim_start();
            }
        }
        if rest == before {
            return rest;
        }
    }
}

/// True for `- [ ]`-style unchecked boxes; returns the item text.
pub(super) fn unchecked_box(line: &str) -> Option<&str> {
    let rest = strip_list_marker(line);
    rest.strip_prefix("[ ]")
        .map(str::trim)
        .filter(|item| !item.is_empty())
}

/// True for `- [x]`-style checked boxes; returns the item text.
pub(super) fn checked_box(line: &str) -> Option<&str> {
    let rest = strip_list_marker(line);
    rest.strip_prefix("[x]")
        .or_else(|| rest.strip_prefix("[X]"))
        .map(str::trim)
        .filter(|item| !item.is_empty())
}

/// The sentences of one line: split after `.`, `!`, `?` followed by a space, and after the CJK
/// terminators `。！？；`.
pub(super) fn split_sentences(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = line.char_indices().peekable();
    while let Some((index, c)) = chars.next() {
        let end = index + c.len_utf8();
        let boundary = match c {
            '。' | '！' | '？' | '；' => true,
            '!' | '?' => chars.peek().is_none_or(|(_, next)| next.is_whitespace()),
            '.' => {
                chars.peek().is_none_or(|(_, next)| next.is_whitespace())
                    && !is_abbreviation(line.get(start..index).unwrap_or(""))
            }
            _ => false,
        };
        if boundary {
            if let Some(piece) = line.get(start..end) {
                push_trimmed(&mut out, piece);
            }
            start = end;
        }
    }
    if let Some(piece) = line.get(start..) {
        push_trimmed(&mut out, piece);
    }
    out
}

/// True when the period ending `head` is part of an ellipsis or an abbreviation (`e.g.`,
/// `i.e.`, `etc.`, `vs.`, `No.`) rather than the end of a sentence.
fn is_abbreviation(head: &str) -> bool {
    if head.ends_with('.') {
        return true;
    }
    let word = head
        .rsplit(char::is_whitespace)
        .next()
        .unwrap_or("")
        .trim_start_matches(['(', '[', '"', '\'']);
    let folded = word.to_ascii_lowercase();
    matches!(
        folded.as_str(),
        "e.g" | "i.e" | "etc" | "vs" | "no" | "cf" | "approx"
    )
}

fn push_trimmed<'a>(out: &mut Vec<&'a str>, piece: &'a str) {
    let piece = piece.trim();
    if !piece.is_empty() {
        out.push(piece);
    }
}

/// Every sentence of the prose of `text`, with its predecessor on the same line.
pub(super) fn sentences(text: &str) -> Vec<Sentence<'_>> {
    let mut out = Vec::new();
    for line in prose_lines(text) {
        let line = strip_list_marker(line);
        let mut previous = None;
        for sentence in split_sentences(line) {
            out.push(Sentence {
                text: sentence,
                previous,
            });
            previous = Some(sentence);
        }
    }
    out
}

/// Lowercased text for cue matching, with typographic apostrophes made ASCII.
pub(super) fn fold_case(text: &str) -> String {
    text.to_lowercase().replace(['\u{2019}', '\u{2018}'], "'")
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// True when `folded` (from [`fold_case`]) contains `phrase` starting on a word boundary and, if
/// the phrase ends in a word character, ending on one. CJK phrases match anywhere.
pub(super) fn has_phrase(folded: &str, phrase: &str) -> bool {
    if phrase.chars().any(is_cjk) {
        return folded.contains(phrase);
    }
    let needs_end = phrase.chars().last().is_some_and(is_word_char);
    folded.match_indices(phrase).any(|(index, _)| {
        let before_ok = folded
            .get(..index)
            .and_then(|head| head.chars().next_back())
            .is_none_or(|c| !is_word_char(c));
        let after_ok = !needs_end
            || folded
                .get(index + phrase.len()..)
                .and_then(|tail| tail.chars().next())
                .is_none_or(|c| !is_word_char(c));
        before_ok && after_ok
    })
}

/// True when `folded` starts with `phrase` on a word boundary.
pub(super) fn starts_with_phrase(folded: &str, phrase: &str) -> bool {
    folded.starts_with(phrase)
        && (phrase.chars().last().is_none_or(|c| !is_word_char(c))
            || folded
                .get(phrase.len()..)
                .and_then(|tail| tail.chars().next())
                .is_none_or(|c| !is_word_char(c)))
}

/// The first of `phrases` that `folded` contains, by [`has_phrase`].
pub(super) fn any_phrase(folded: &str, phrases: &[&str]) -> bool {
    phrases.iter().any(|phrase| has_phrase(folded, phrase))
}

/// Harness wrappers Claude Code and similar hosts put in user turns. Their content is not what
/// the user asked; rules inside them (project memory, reminders) are system-level.
const HARNESS_TAGS: &[&str] = &[
    "system-reminder",
    "local-command-caveat",
    "local-command-stdout",
    "local-command-stderr",
    "task-notification",
    "command-message",
    "bash-input",
    "bash-stdout",
    "bash-stderr",
    "user-prompt-submit-hook",
];

/// Wrappers that make the whole turn the harness's, including the text after them (Claude
/// Code follows a task notification with "Read the output file…").
const HARNESS_TURN_TAGS: &[&str] = &["task-notification", "local-command-stdout"];

/// Wrappers whose content *is* the user's: a slash command and its arguments.
const USER_TAGS: &[&str] = &["command-name", "command-args"];

/// A user turn split into what the user wrote and what the harness added around it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct UserText {
    pub own: String,
    pub harness: String,
}

/// Splits a user text block into the user's own words and harness wrappers.
pub(crate) fn split_user_text(text: &str) -> UserText {
    let mut out = UserText::default();
    if HARNESS_TURN_TAGS
        .iter()
        .any(|tag| text.contains(&format!("<{tag}>")))
    {
        out.harness = text.trim().to_owned();
        return out;
    }
    let mut rest = text;
    while let Some((start, tag)) = next_known_tag(rest) {
        push_own(&mut out.own, rest.get(..start).unwrap_or(""));
        let after_open = rest.get(start + tag.len() + 2..).unwrap_or("");
        let close = format!("</{tag}>");
        let (inner, tail) = match after_open.find(&close) {
            Some(end) => (
                after_open.get(..end).unwrap_or(""),
                after_open.get(end + close.len()..).unwrap_or(""),
            ),
            None => (after_open, ""),
        };
        if USER_TAGS.contains(&tag) {
            push_own(&mut out.own, inner);
        } else {
            push_own(&mut out.harness, inner);
        }
        rest = tail;
    }
    push_own(&mut out.own, rest);
    // Interruption markers are the harness speaking.
    let own: Vec<&str> = out
        .own
        .lines()
        .filter(|line| {
            let line = line.trim();
            !(line.starts_with("[Request interrupted") || line.starts_with("[Request cancelled"))
        })
        .collect();
    out.own = own.join("\n").trim().to_owned();
    out.harness = out.harness.trim().to_owned();
    out
}

fn push_own(out: &mut String, piece: &str) {
    let piece = piece.trim();
    if piece.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push(' ');
    }
    out.push_str(piece);
}

/// The earliest `<tag>` of a known wrapper in `text`, with its byte offset.
fn next_known_tag(text: &str) -> Option<(usize, &'static str)> {
    HARNESS_TAGS
        .iter()
        .chain(USER_TAGS)
        .filter_map(|tag| text.find(&format!("<{tag}>")).map(|at| (at, *tag)))
        .min_by_key(|(at, _)| *at)
}

/// `first` and `second` joined as prose: with a space, except after CJK text (Chinese does not
/// put spaces between sentences).
pub(super) fn join_prose(first: &str, second: &str) -> String {
    let cjk_end = first.chars().next_back().is_some_and(is_cjk);
    let mut out = String::with_capacity(first.len() + second.len() + 1);
    out.push_str(first);
    if !cjk_end && !first.is_empty() {
        out.push(' ');
    }
    out.push_str(second);
    out
}

/// Whitespace runs collapsed to one space, `**` emphasis removed.
pub(super) fn compact_spaces(text: &str) -> String {
    let without_bold = text.replace("**", "");
    let mut out = String::with_capacity(without_bold.len());
    for word in without_bold.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Byte ranges of `text` an item cut must not split: identifiers and relative paths.
fn protected_ranges(text: &str) -> Vec<Range<usize>> {
    let mut ranges: Vec<Range<usize>> = find_identifiers_for_display(text)
        .map(|(range, _)| range)
        .chain(find_path_like(text).map(|(range, _)| range))
        .collect();
    ranges.sort_by_key(|range| range.start);
    ranges
}

/// `text` cut to at most `max_chars` characters (the cut mark included): never inside a
/// character or an identifier, at a word end when one is near, trailing punctuation dropped.
/// `None` when nothing meaningful is left.
pub(super) fn cut_to_chars(text: &str, max_chars: usize) -> Option<String> {
    if text.chars().count() <= max_chars {
        return Some(text.to_owned());
    }
    let keep = max_chars.checked_sub(1)?;
    let mut end = text
        .char_indices()
        .nth(keep)
        .map_or(text.len(), |(index, _)| index);
    for range in protected_ranges(text) {
        if range.start < end && end < range.end {
            end = range.start;
        }
    }
    let head = text.get(..end)?;
    // Prefer a word end when it costs less than a third of the kept text.
    let head = match head.rfind(char::is_whitespace) {
        Some(space) if space * 3 >= end * 2 => head.get(..space).unwrap_or(head),
        Some(_) | None => head,
    };
    let head = head.trim_end_matches(|c: char| {
        c.is_whitespace() || matches!(c, ',' | ';' | ':' | '(' | '[' | '{' | '-' | '，' | '、')
    });
    if head.chars().count() < 8 {
        return None;
    }
    Some(format!("{head}{CUT_MARK}"))
}

/// A key under which two spellings of one item compare equal: lowercase letters, digits and
/// CJK characters only.
pub(super) fn fold_key(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Words that carry no topic, left out of [`content_words`].
const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "with",
    "that",
    "this",
    "from",
    "into",
    "then",
    "now",
    "all",
    "are",
    "was",
    "were",
    "will",
    "have",
    "has",
    "had",
    "not",
    "but",
    "you",
    "your",
    "our",
    "its",
    "let",
    "can",
    "should",
    "would",
    "could",
    "also",
    "still",
    "need",
    "needs",
    "next",
    "step",
    "steps",
    "todo",
    "done",
    "completed",
    "complete",
    "finished",
    "pending",
    "progress",
    "remaining",
];

/// The topic words of `text`: ASCII words of three or more letters (lowercased, stopwords
/// dropped) and CJK character pairs. Used to tell whether a later sentence reports an item done.
pub(super) fn content_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let folded = fold_case(text);
    for word in folded.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')) {
        let word = word.trim_matches('.');
        if word.len() >= 3 && word.is_ascii() && !STOPWORDS.contains(&word) {
            out.push(stem(word).to_owned());
        }
    }
    let cjk: Vec<char> = folded.chars().collect();
    for pair in cjk.windows(2) {
        if let [a, b] = pair {
            if is_cjk(*a) && is_cjk(*b) {
                out.push([*a, *b].iter().collect());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A crude English stem, enough for "port"/"ported"/"ports" or "remove"/"removed" to meet: one
/// suffix off, keeping at least three letters.
fn stem(word: &str) -> &str {
    ["ing", "ed", "es", "s", "e"]
        .iter()
        .find_map(|suffix| word.strip_suffix(suffix).filter(|stem| stem.len() >= 3))
        .unwrap_or(word)
}

/// Share of `item`'s topic words found in `other`'s (0 when `item` has none).
pub(super) fn word_overlap(item: &[String], other: &[String]) -> f64 {
    if item.is_empty() {
        return 0.0;
    }
    let shared = item
        .iter()
        .filter(|word| other.binary_search(word).is_ok())
        .count();
    shared as f64 / item.len() as f64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn sentences_split_on_terminators_and_skip_code() {
        let text = "First one. Second one! Is it?\n```\nlet x = 1. y\n```\n| a | b |\n- Third 第一句。第二句";
        let got: Vec<&str> = sentences(text).iter().map(|s| s.text).collect();
        assert_eq!(
            got,
            [
                "First one.",
                "Second one!",
                "Is it?",
                "Third 第一句。",
                "第二句"
            ]
        );
        // A period inside a file name does not end a sentence.
        assert_eq!(split_sentences("Edit main.rs now."), ["Edit main.rs now."]);
        assert_eq!(
            split_sentences("It uses ALTER TABLE ... modify, e.g. here. Done."),
            ["It uses ALTER TABLE ... modify, e.g. here.", "Done."]
        );
    }

    #[test]
    fn phrases_match_on_word_boundaries() {
        assert!(has_phrase("i'll use serde here", "i'll use"));
        assert!(!has_phrase("always", "way"));
        assert!(!has_phrase("mustard", "must"));
        assert!(has_phrase("you must not", "must"));
        assert!(has_phrase("请务必保留", "务必"));
        assert!(starts_with_phrase("never push", "never"));
        assert!(!starts_with_phrase("neverland", "never"));
    }

    #[test]
    fn user_text_loses_harness_wrappers_and_keeps_commands() {
        let text = "<system-reminder>Always be nice.</system-reminder>Fix the bug\n[Request interrupted by user]";
        let split = split_user_text(text);
        assert_eq!(split.own, "Fix the bug");
        assert_eq!(split.harness, "Always be nice.");
        let command = split_user_text(
            "<command-name>/compact</command-name>\n<command-message>compact</command-message>\n<command-args>keep going</command-args>",
        );
        assert_eq!(command.own, "/compact keep going");
        // An unclosed wrapper swallows the rest rather than leaking into the user's words.
        assert_eq!(split_user_text("hi <system-reminder>x").own, "hi");
        let notification = split_user_text(
            "<task-notification>\n<status>completed</status>\n</task-notification>\nRead the output file: /tmp/x/y",
        );
        assert!(notification.own.is_empty());
    }

    #[test]
    fn cuts_respect_characters_words_and_identifiers() {
        let text = "Moved the cache to /var/lib/skald/cache/objects and restarted";
        let cut = cut_to_chars(text, 30).unwrap();
        assert!(cut.chars().count() <= 30);
        assert_eq!(cut, "Moved the cache to…");
        let chinese = "我们决定把缓存目录迁移到新的磁盘上以便扩容";
        let cut = cut_to_chars(chinese, 10).unwrap();
        assert_eq!(cut.chars().count(), 10);
        assert!(cut.ends_with(CUT_MARK));
        assert_eq!(cut_to_chars("short", 10).unwrap(), "short");
        assert!(cut_to_chars("/a/very/long/identifier/only", 10).is_none());
    }

    #[test]
    fn list_markers_and_boxes() {
        assert_eq!(strip_list_marker("  - 1. > text"), "text");
        assert_eq!(unchecked_box("- [ ] write tests"), Some("write tests"));
        assert_eq!(checked_box("* [x] write tests"), Some("write tests"));
        assert_eq!(unchecked_box("- [x] done"), None);
    }

    #[test]
    fn overlap_of_content_words() {
        let item = content_words("Add tests for the parser");
        let later = content_words("Tests for the parser are added and pass");
        assert!(word_overlap(&item, &later) >= 0.6);
        assert_eq!(
            content_words("Ported the CLI"),
            content_words("port the cli")
        );
        let zh = content_words("补充解析器测试");
        assert!(word_overlap(&zh, &content_words("解析器测试已补充")) > 0.5);
    }
}
