//! The L0 abstract and L1 overview of an entry when the writer gave none: derived from the L2
//! content with no LLM, deterministically, always cut on character boundaries.
//!
//! - L0 ([`derive_abstract`], at most [`MAX_ABSTRACT_CHARS`]): the first sentence, or the first
//!   line when that comes sooner; cut at a word boundary with `…` when still too long.
//! - L1 ([`derive_overview`], at most [`MAX_OVERVIEW_CHARS`]): the leading text, ending at the
//!   last paragraph, line or sentence break that fits, else at a word boundary with `…`.

/// The longest L0 abstract, in characters (OpenViking's `semantic.abstract_max_chars`).
pub const MAX_ABSTRACT_CHARS: usize = 256;

/// The longest L1 overview, in characters (OpenViking's `semantic.overview_max_chars`).
pub const MAX_OVERVIEW_CHARS: usize = 4000;

const ELLIPSIS: char = '…';

/// The L0 abstract of `content`: its first sentence (or first non-empty line), whitespace
/// collapsed, at most [`MAX_ABSTRACT_CHARS`] characters.
pub fn derive_abstract(content: &str) -> String {
    let first_line = content
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    let first_line = first_line.trim_start_matches(['#', '-', '*', '>', ' ']);
    let sentence = first_sentence(first_line);
    let collapsed = collapse_whitespace(sentence);
    cut_at_word(&collapsed, MAX_ABSTRACT_CHARS)
}

/// The L1 overview of `content`: the whole text when it fits in [`MAX_OVERVIEW_CHARS`]
/// characters, else the longest prefix ending at a paragraph, line or sentence break (at least
/// half the budget), else a prefix cut at a word boundary with `…`.
pub fn derive_overview(content: &str) -> String {
    let trimmed = content.trim();
    if trimmed.chars().count() <= MAX_OVERVIEW_CHARS {
        return trimmed.to_owned();
    }
    let prefix = prefix_chars(trimmed, MAX_OVERVIEW_CHARS - 1);
    let half = prefix.len() / 2;
    for breaks in [&["\n\n"][..], &["\n"][..], &[". ", "! ", "? ", "。"][..]] {
        let cut = breaks
            .iter()
            .filter_map(|mark| prefix.rfind(mark).map(|at| at + mark.len()))
            .max();
        if let Some(cut) = cut.filter(|cut| *cut >= half) {
            return prefix.get(..cut).unwrap_or(prefix).trim_end().to_owned();
        }
    }
    cut_at_word(trimmed, MAX_OVERVIEW_CHARS)
}

/// At most `max` characters of `text`: the text itself when it fits, else a prefix ending at a
/// word boundary (or mid-word when the first word alone is too long) followed by `…`.
pub fn cut_at_word(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    if max == 0 {
        return String::new();
    }
    let prefix = prefix_chars(text, max - 1);
    let cut = prefix
        .rfind(char::is_whitespace)
        .filter(|at| *at > 0)
        .unwrap_or(prefix.len());
    let mut out = prefix.get(..cut).unwrap_or(prefix).trim_end().to_owned();
    out.push(ELLIPSIS);
    out
}

/// The first `chars` characters of `text` (all of it when shorter).
pub fn prefix_chars(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((at, _)) => text.get(..at).unwrap_or(text),
        None => text,
    }
}

/// The text up to and including the first sentence end: `.`, `!` or `?` followed by whitespace
/// or the end, or a CJK full stop. Dots inside a word (`v1.2`, `example.com`) do not end a
/// sentence because no whitespace follows them.
fn first_sentence(text: &str) -> &str {
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let end = at + c.len_utf8();
        match c {
            '。' | '！' | '？' => return text.get(..end).unwrap_or(text),
            '.' | '!' | '?' => {
                let next = chars.peek().map(|(_, next)| *next);
                if next.is_none_or(char::is_whitespace) {
                    return text.get(..end).unwrap_or(text);
                }
            }
            _ => {}
        }
    }
    text
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn abstract_is_the_first_sentence() {
        assert_eq!(
            derive_abstract("Alice prefers dark mode. She said so twice."),
            "Alice prefers dark mode."
        );
        assert_eq!(
            derive_abstract("Use v1.2 of example.com for uploads! Then…"),
            "Use v1.2 of example.com for uploads!"
        );
        assert_eq!(
            derive_abstract("\n\n# Deploy notes\nstep one. step two."),
            "Deploy notes"
        );
        assert_eq!(
            derive_abstract("用户喜欢深色模式。其他内容"),
            "用户喜欢深色模式。"
        );
        assert_eq!(derive_abstract("   "), "");
    }

    #[test]
    fn long_abstracts_are_cut_on_a_word_and_char_boundary() {
        let text = "word ".repeat(100);
        let l0 = derive_abstract(&text);
        assert!(l0.chars().count() <= MAX_ABSTRACT_CHARS);
        assert!(l0.ends_with("word…"), "{l0}");
        let cjk = "深".repeat(400);
        let l0 = derive_abstract(&cjk);
        assert_eq!(l0.chars().count(), MAX_ABSTRACT_CHARS);
        assert!(l0.ends_with('…'));
    }

    #[test]
    fn overview_keeps_short_text_and_cuts_long_text_at_a_break() {
        assert_eq!(derive_overview("  short text \n"), "short text");
        let paragraph = format!("{}\n\n", "A sentence that goes on. ".repeat(20));
        let long = paragraph.repeat(20);
        let l1 = derive_overview(&long);
        assert!(l1.chars().count() <= MAX_OVERVIEW_CHARS);
        assert!(l1.ends_with("goes on."), "{}", &l1[l1.len() - 40..]);
        let unbroken = "x".repeat(5000);
        let l1 = derive_overview(&unbroken);
        assert_eq!(l1.chars().count(), MAX_OVERVIEW_CHARS);
        assert!(l1.ends_with('…'));
    }

    #[test]
    fn prefix_chars_never_splits_a_character() {
        assert_eq!(prefix_chars("héllo", 2), "hé");
        assert_eq!(prefix_chars("hi", 10), "hi");
        assert_eq!(cut_at_word("héllo wörld", 8), "héllo…");
        assert_eq!(cut_at_word("abc", 0), "");
    }
}
