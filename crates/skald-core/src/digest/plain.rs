//! Plain text: grep hits, listings, anything else.
//!
//! The fallback kind, so it must say something of any text: grep output as matches per file, a
//! listing (`ls`, `find`) as its entries, anything else as its size, error-line count, first line
//! and most frequent words (read from the first 4 KiB only, which bounds their cost).

use std::collections::HashMap;

use super::input::{Input, MAX_ITEMS};
use super::lines::{grep_hit, is_bare_name, is_ls_long};
use super::ranking::WordHash;
use super::scan::Scan;
use super::show::{Shape, count_of, lines_word};
use super::text::{clean_inline, prefix_bytes, trim_fast};

pub(super) fn plain_summary(input: &Input<'_>, scan: &Scan<'_>) -> Shape {
    let n = scan.nonempty;
    if n >= 3 && scan.grep_lines_reach((n * 6).div_ceil(10)) {
        return grep_summary(input);
    }
    if n >= 3 && scan.listing_lines_reach((n * 8).div_ceil(10)) {
        return listing_summary(input);
    }
    let mut head = format!(
        "text, {}, {} chars",
        lines_word(input.total_lines),
        input.chars
    );
    let errors = input
        .lines
        .iter()
        .filter(|l| matches!(l.rank, Some(0 | 2)))
        .count();
    if errors > 0 {
        head.push_str(&format!(", {}", count_of(errors, "error line")));
    }
    let first = input
        .texts()
        .map(|l| l.trim_matches(|c: char| c.is_whitespace() || "=-_*#~+".contains(c)))
        .find(|l| l.chars().any(char::is_alphanumeric) && !l.starts_with("Traceback ("))
        .map(|l| format!("first: {}", clean_inline(l, 200)));
    let keywords = keywords(input.body);
    let keywords = (!keywords.is_empty()).then(|| format!("keywords: {}", keywords.join(", ")));
    Shape::new(head).details(first.into_iter().chain(keywords))
}

fn grep_summary(input: &Input<'_>) -> Shape {
    let mut files: Vec<(&str, usize)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for line in input.texts() {
        let Some(path) = grep_hit(trim_fast(line)) else {
            continue;
        };
        match index.get(path).and_then(|&i| files.get_mut(i)) {
            Some(entry) => entry.1 += 1,
            None => {
                index.insert(path, files.len());
                files.push((path, 1));
            }
        }
    }
    let matches: usize = files.iter().map(|(_, n)| n).sum();
    let head = format!("grep, {matches} matches in {} files", files.len());
    let items = files
        .iter()
        .take(MAX_ITEMS)
        .map(|(path, count)| {
            let path = clean_inline(path, 160);
            if *count > 1 {
                format!("{path} ({count})")
            } else {
                path
            }
        })
        .collect();
    Shape::new(head).items("files:", items, 6)
}

fn listing_summary(input: &Input<'_>) -> Shape {
    let mut dirs = 0;
    let mut entries = 0;
    let mut names: Vec<String> = Vec::new();
    for line in input.texts() {
        let t = line.trim();
        let (name, dir) = if is_ls_long(t) {
            match ls_name(t) {
                Some("." | "..") | None => continue,
                Some(name) => (name, t.starts_with('d')),
            }
        } else if is_bare_name(t) {
            (t, t.ends_with('/'))
        } else {
            continue;
        };
        entries += 1;
        if dir {
            dirs += 1;
        }
        if names.len() < MAX_ITEMS {
            names.push(clean_inline(name, 160));
        }
    }
    let mut head = format!("listing, {entries} entries");
    if dirs > 0 {
        head.push_str(&format!(" ({dirs} dirs)"));
    }
    Shape::new(head).items("", names, 8)
}

/// The name column of an `ls -l` line (everything after the eighth field).
fn ls_name(t: &str) -> Option<&str> {
    let mut rest = t;
    for _ in 0..8 {
        rest = rest.trim_start();
        rest = rest.get(rest.find(' ')?..)?;
    }
    let name = rest.trim();
    let name = name.split(" -> ").next().unwrap_or(name);
    (!name.is_empty()).then_some(name)
}

/// Common English words of four to six letters, lowercase and sorted (binary-searched).
const STOPWORDS: &[&str] = &[
    "about", "after", "also", "been", "before", "being", "could", "does", "each", "false", "from",
    "have", "here", "into", "just", "like", "more", "most", "must", "none", "null", "only",
    "other", "over", "same", "should", "some", "such", "than", "that", "their", "them", "then",
    "there", "these", "they", "this", "those", "true", "under", "until", "very", "want", "were",
    "what", "when", "where", "which", "while", "will", "with", "would", "your",
];

/// A word of at most eight ASCII bytes as one integer, first byte highest: integers compare as
/// the words do, and equal only for equal words.
const fn packed_word(word: &[u8]) -> u64 {
    let mut packed = 0u64;
    let mut i = 0;
    while i < 8 {
        packed <<= 8;
        if i < word.len() {
            packed |= word[i] as u64;
        }
        i += 1;
    }
    packed
}

/// [`STOPWORDS`] packed, in the same (sorted) order.
static STOPWORD_KEYS: [u64; STOPWORDS.len()] = {
    let mut keys = [0u64; STOPWORDS.len()];
    let mut i = 0;
    while i < STOPWORDS.len() {
        keys[i] = packed_word(STOPWORDS[i].as_bytes());
        i += 1;
    }
    keys
};

fn is_stopword(word: &str) -> bool {
    if word.len() > 6 || !word.is_ascii() {
        return false;
    }
    let mut lower = [0u8; 6];
    for (slot, b) in lower.iter_mut().zip(word.bytes()) {
        *slot = b.to_ascii_lowercase();
    }
    let lower = lower.get(..word.len()).unwrap_or(&[]);
    STOPWORD_KEYS.binary_search(&packed_word(lower)).is_ok()
}

/// The non-empty runs of alphanumeric characters and `_` in `text`: what
/// `text.split(|c: char| !c.is_alphanumeric() && c != '_')` yields, empty pieces left out.
#[cfg(test)]
fn words_of(text: &str) -> impl Iterator<Item = &str> {
    classified_words(text).map(|(word, _, _)| word)
}

/// The words of `text` (as `words_of` splits them), each with the union and the intersection
/// of its bytes' [`KEYWORD_CLASS`]es, in one pass: ASCII bytes are classified by table without
/// decoding, and a word's classes are gathered while it is found.
fn classified_words(text: &str) -> impl Iterator<Item = (&str, u8, u8)> {
    let bytes = text.as_bytes();
    let mut at = 0;
    let class_of = |b: u8| KEYWORD_CLASS.get(usize::from(b)).copied().unwrap_or(0);
    std::iter::from_fn(move || {
        let start = loop {
            let &b = bytes.get(at)?;
            if b < 0x80 {
                if class_of(b) & WORD_CHAR != 0 {
                    break at;
                }
                at += 1;
            } else {
                let c = text.get(at..).and_then(|rest| rest.chars().next())?;
                if is_alphanumeric_beyond_ascii(c) {
                    break at;
                }
                at += c.len_utf8();
            }
        };
        let (mut any, mut all) = (0u8, u8::MAX);
        while let Some(&b) = bytes.get(at) {
            if b < 0x80 {
                let class = class_of(b);
                if class & WORD_CHAR == 0 {
                    break;
                }
                any |= class;
                all &= class;
                at += 1;
            } else {
                let Some(c) = text.get(at..).and_then(|rest| rest.chars().next()) else {
                    break;
                };
                if !is_alphanumeric_beyond_ascii(c) {
                    break;
                }
                // Every byte of a non-ASCII character is in the class NON_ASCII alone.
                any |= NON_ASCII;
                all &= NON_ASCII;
                at += c.len_utf8();
            }
        }
        Some((text.get(start..at)?, any, all))
    })
}

/// `c.is_alphanumeric()` for a character beyond ASCII. The symbols common in tool output —
/// arrows (the `→` of numbered file listings), mathematical operators, box drawing and block
/// elements, U+2190–U+22FF and U+2500–U+259F, none of them a letter or a number — are answered
/// without searching Unicode's tables.
fn is_alphanumeric_beyond_ascii(c: char) -> bool {
    !matches!(c, '\u{2190}'..='\u{22FF}' | '\u{2500}'..='\u{259F}') && c.is_alphanumeric()
}

/// The most frequent words (four letters or more, stopwords out) of the text's first 4 KiB,
/// counted as written.
fn keywords(body: &str) -> Vec<String> {
    let text = prefix_bytes(body, 4 * 1024);
    // Ranked by count, then first appearance (unique): the map's order never shows.
    let mut counts: HashMap<&str, (usize, usize), WordHash> =
        HashMap::with_capacity_and_hasher(256, WordHash::default());
    // A word's classes tell whether it has a letter and whether it is all hex digits; words
    // with other characters than ASCII take the general path.
    for (word, any, all) in classified_words(text) {
        if word.len() < 4 {
            continue;
        }
        let lettered = if any & NON_ASCII == 0 {
            any & LETTER != 0
        } else {
            word.chars().any(char::is_alphabetic)
        };
        if !lettered || all & HEX_DIGIT != 0 || is_stopword(word) {
            continue;
        }
        let position = word.as_ptr() as usize - text.as_ptr() as usize;
        counts.entry(word).or_insert((0, position)).0 += 1;
    }
    let mut ranked: Vec<(&str, (usize, usize))> =
        counts.into_iter().filter(|(_, (n, _))| *n >= 2).collect();
    ranked.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)));
    ranked
        .into_iter()
        .take(6)
        .map(|(w, _)| clean_inline(w, 30))
        .collect()
}

const LETTER: u8 = 1;
const HEX_DIGIT: u8 = 2;
const NON_ASCII: u8 = 4;
/// ASCII letters, digits and `_`: the bytes words are made of.
const WORD_CHAR: u8 = 8;

/// Byte classes for [`keywords`].
static KEYWORD_CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        if byte.is_ascii_alphabetic() {
            table[b] |= LETTER;
        }
        if byte.is_ascii_hexdigit() {
            table[b] |= HEX_DIGIT;
        }
        if !byte.is_ascii() {
            table[b] |= NON_ASCII;
        }
        if byte.is_ascii_alphanumeric() || byte == b'_' {
            table[b] |= WORD_CHAR;
        }
        b += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn symbol_ranges_answered_without_tables_hold_no_letters_or_numbers() {
        for c in ('\u{2190}'..='\u{22FF}').chain('\u{2500}'..='\u{259F}') {
            assert!(!c.is_alphanumeric(), "{c:?}");
        }
        for c in ['é', 'ж', '字', '٣', 'Ⅻ', '→', '─', '🙂'] {
            assert_eq!(
                is_alphanumeric_beyond_ascii(c),
                c.is_alphanumeric(),
                "{c:?}"
            );
        }
    }

    #[test]
    fn words_split_like_the_standard_splitter() {
        for text in [
            "",
            "word",
            "  two words_here, 错误信息 café-au-lait ½ x\u{0}y ",
            "trailing_",
            "数据/a/b 错误\u{2003}words\u{85}and",
        ] {
            let expected: Vec<&str> = text
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .filter(|w| !w.is_empty())
                .collect();
            assert_eq!(words_of(text).collect::<Vec<_>>(), expected, "{text:?}");
        }
    }

    #[test]
    fn stopwords_are_found_in_any_case_and_nothing_else_is() {
        assert!(STOPWORD_KEYS.windows(2).all(|pair| pair[0] < pair[1]));
        for word in STOPWORDS {
            assert!(is_stopword(word), "{word}");
            assert!(is_stopword(&word.to_uppercase()), "{word}");
            let longer = format!("{word}s");
            assert_eq!(is_stopword(&longer), STOPWORDS.contains(&longer.as_str()));
            let shorter = &word[..word.len() - 1];
            assert_eq!(is_stopword(shorter), STOPWORDS.contains(&shorter));
        }
        for word in [
            "", "a", "abou", "zzzz", "thi", "theirs", "withx", "wïth", "th\u{0}s",
        ] {
            assert!(!is_stopword(word), "{word}");
        }
    }
}
