//! Text helpers: cutting at a character boundary with the `…` mark, one-line display text, fast
//! trims, and prefixes and suffixes bounded in bytes.
//!
//! Everything a summary shows goes through [`cut`] or [`clean_inline`], which is how a summary
//! stays one printable line and never splits a character.

use std::borrow::Cow;

use super::CUT_MARK;

/// `text` if it has at most `max` characters, else a prefix and `…` in `max` characters: cut
/// after a word when one ends in the last third of the room, else mid-word.
pub(super) fn cut(text: &str, max: usize) -> String {
    if max == 0 {
        return String::new();
    }
    if text.char_indices().nth(max).is_none() {
        return text.to_owned();
    }
    let room = text
        .char_indices()
        .nth(max - 1)
        .map_or(text.len(), |(i, _)| i);
    let prefix = text.get(..room).unwrap_or("");
    let floor = prefix.len() * 2 / 3;
    let at_word = prefix
        .rfind([' ', ','])
        .filter(|&i| i >= floor && i > 0)
        .and_then(|i| prefix.get(..i));
    let mut out = at_word
        .unwrap_or(prefix)
        .trim_end_matches([' ', ',', ';', ':'])
        .to_owned();
    out.push(CUT_MARK);
    out
}

/// One line of display text: control characters become spaces, runs of whitespace collapse,
/// at most `max` characters (cut marked). Reads no further than it needs to, so a megabyte-long
/// line costs no more than a short one.
pub(super) fn clean_inline(text: &str, max: usize) -> String {
    // Most display text is short, printable ASCII with single spaces: copy it as is.
    let head = prefix_bytes(text, max);
    let bytes = head.as_bytes();
    // Printable, spaces single and not at either end; one pass.
    let mut previous_space = true;
    let plain = head.len() == text.len()
        && bytes.last() != Some(&b' ')
        && bytes.iter().all(|&b| {
            let space = b == b' ';
            let fine = (0x21..0x7f).contains(&b) || (space && !previous_space);
            previous_space = space;
            fine
        });
    if plain {
        return head.to_owned();
    }
    let mut out = String::new();
    let mut count = 0;
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            pending_space = count > 0;
            continue;
        }
        if pending_space {
            out.push(' ');
            count += 1;
            pending_space = false;
        }
        out.push(c);
        count += 1;
        if count > max {
            break;
        }
    }
    cut(&out, max)
}

/// The ASCII bytes `char::is_whitespace` accepts.
pub(super) fn is_ascii_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r')
}

/// `text.trim_start()`, without decoding characters while the text starts with ASCII (most
/// lines): only a non-ASCII byte at the cut needs the Unicode-aware trim.
#[inline]
pub(super) fn trim_start_fast(text: &str) -> &str {
    let bytes = text.as_bytes();
    let start = match bytes.first() {
        Some(&b) if b < 0x80 && !is_ascii_space(b) => return text,
        Some(_) => {
            // Indentation is mostly spaces.
            let spaces = leading_spaces(bytes);
            bytes
                .get(spaces..)
                .and_then(|rest| rest.iter().position(|b| !is_ascii_space(*b)))
                .map_or(bytes.len(), |i| spaces + i)
        }
        None => return text,
    };
    match text.as_bytes().get(start) {
        Some(&b) if b >= 0x80 => text.trim_start(),
        Some(_) | None => text.get(start..).unwrap_or(""),
    }
}

/// How many bytes of `bytes` are spaces before the first other byte: counted eight bytes at a
/// time, where the first byte that differs from a space ends them (indentation, gutters).
#[inline]
pub(super) fn leading_spaces(bytes: &[u8]) -> usize {
    let mut spaces = 0;
    while let Some(chunk) = bytes.get(spaces..spaces + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let differs = u64::from_le_bytes(word) ^ 0x2020_2020_2020_2020;
        if differs != 0 {
            return spaces + (differs.trailing_zeros() / 8) as usize;
        }
        spaces += 8;
    }
    spaces
        + bytes
            .get(spaces..)
            .unwrap_or_default()
            .iter()
            .take_while(|b| **b == b' ')
            .count()
}

/// `text.trim_end()`, with the same fast path as [`trim_start_fast`].
pub(super) fn trim_end_fast(text: &str) -> &str {
    let end = text
        .bytes()
        .rposition(|b| !is_ascii_space(b))
        .map_or(0, |i| i + 1);
    match end.checked_sub(1).and_then(|i| text.as_bytes().get(i)) {
        Some(&b) if b >= 0x80 => text.trim_end(),
        Some(_) | None => text.get(..end).unwrap_or(""),
    }
}

/// `text.trim()`, with the fast path of [`trim_start_fast`].
pub(super) fn trim_fast(text: &str) -> &str {
    trim_end_fast(trim_start_fast(text))
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub(super) fn prefix_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or("")
}

/// The longest suffix of `text` of at most `max` bytes that starts on a character boundary.
pub(super) fn suffix_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text.get(start..).unwrap_or("")
}

/// `text` without ANSI escape sequences (colours, cursor moves), which terminals hide and a
/// summary must not show or read as text (`\x1b[31m` would glue `31m` to the next word).
pub(super) fn strip_ansi(text: &str) -> Cow<'_, str> {
    if memchr::memchr(0x1b, text.as_bytes()).is_none() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.peek() {
                Some('[') => {
                    chars.next();
                    // CSI: parameters and intermediates up to a final byte in `@`..`~`.
                    for next in chars.by_ref() {
                        if ('@'..='~').contains(&next) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    chars.next();
                    // OSC: up to BEL or ST (`ESC \`).
                    while let Some(next) = chars.next() {
                        if next == '\u{7}' {
                            break;
                        }
                        if next == '\u{1b}' {
                            chars.next();
                            break;
                        }
                    }
                }
                Some(_) => {
                    // A two-character escape (`ESC =`).
                    chars.next();
                }
                None => {}
            },
            other => out.push(other),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn cut_respects_characters_words_and_the_mark() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("exactly10!", 10), "exactly10!");
        assert_eq!(cut("hello brave new world", 12), "hello brave…");
        assert_eq!(cut("abcdefghijklmnop", 5), "abcd…");
        assert_eq!(cut("错误信息很长很长", 4), "错误信…");
        assert_eq!(cut("anything", 1), "…");
        assert_eq!(cut("anything", 0), "");
        for max in 1..30 {
            assert!(
                cut("数据 /a/b 错误 words and more words", max)
                    .chars()
                    .count()
                    <= max
            );
        }
    }

    #[test]
    fn ansi_escapes_are_stripped() {
        assert_eq!(
            strip_ansi("\u{1b}[32m43 tests, 0 failures\u{1b}[0m\r\n"),
            "43 tests, 0 failures\r\n"
        );
        assert_eq!(strip_ansi("\u{1b}]0;title\u{7}x"), "x");
        assert_eq!(strip_ansi("a\u{1b}=b\u{1b}"), "ab");
        assert!(matches!(strip_ansi("plain"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn clean_inline_makes_one_printable_line() {
        assert_eq!(clean_inline("  a\tb\n\nc  ", 20), "a b c");
        assert_eq!(clean_inline("x\u{0}y\u{1b}[0m", 20), "x y [0m");
        assert_eq!(clean_inline("abcdefghij", 5), "abcd…");
        assert_eq!(clean_inline("plain text", 10), "plain text");
        for text in [
            "", " a", "a ", "a  b", "a b c", "é x", "\tx", "x\u{7f}", "~!", "  ",
        ] {
            let expected = if text.bytes().all(|b| (0x21..0x7f).contains(&b) || b == b' ')
                && !text.contains("  ")
                && !text.starts_with(' ')
                && !text.ends_with(' ')
            {
                text.to_owned()
            } else {
                let collapsed: Vec<&str> = text
                    .split(|c: char| c.is_whitespace() || c.is_control())
                    .filter(|w| !w.is_empty())
                    .collect();
                collapsed.join(" ")
            };
            assert_eq!(clean_inline(text, 20), expected, "{text:?}");
        }
    }

    #[test]
    fn leading_spaces_are_counted_across_words() {
        for n in 0..20 {
            for rest in ["", "x", "\tx", "é", "12→a"] {
                let text = format!("{}{rest}", " ".repeat(n));
                assert_eq!(leading_spaces(text.as_bytes()), n, "{text:?}");
            }
        }
    }

    #[test]
    fn fast_trims_agree_with_the_standard_ones() {
        for text in [
            "",
            " ",
            "\u{b} a \u{b}",
            "\u{3000}x\u{85}",
            " \t y z\r\n",
            "é ",
            " é",
            "        ",
            "                ",
            "         x",
            "        \ty",
            "           \u{3000}z",
            "                    fn main() {",
        ] {
            assert_eq!(trim_fast(text), text.trim(), "{text:?}");
            assert_eq!(trim_start_fast(text), text.trim_start(), "{text:?}");
            assert_eq!(trim_end_fast(text), text.trim_end(), "{text:?}");
        }
    }
}
