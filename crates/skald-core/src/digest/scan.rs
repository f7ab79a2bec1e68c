//! One pass over the lines collecting what detection and the strategies need.
//!
//! Markdown headings, list items, fences and links; code-like lines and votes for a language;
//! diff headers, hunks and +/- counts: all gathered by [`Scan::over`] in a single pass, so
//! detection does not read the text once per kind. What is decided by how many lines have some
//! shape (a log level, a grep hit, a listing entry) is decided after the pass, testing only as
//! many lines as the decision needs.

use super::input::{LINE_HEAD_BYTES, Line};
use super::lines::{find_timestamp, grep_hit, is_bare_name, is_ls_long, log_level};
use super::text::{prefix_bytes, trim_end_fast};

#[derive(Default)]
pub(super) struct Scan<'a> {
    pub(super) nonempty: usize,
    // Markdown (headings only outside code fences).
    pub(super) headings: Vec<&'a str>,
    pub(super) list_items: usize,
    pub(super) fences: usize,
    pub(super) fence_langs: Vec<&'a str>,
    pub(super) links: usize,
    // Code (outside fences).
    pub(super) nonempty_outside_fences: usize,
    pub(super) code_lines: usize,
    /// Lines voting for each of [`LANGUAGES`].
    pub(super) lang_votes: [usize; LANGUAGES.len()],
    /// The lines outside fences. What is decided by whether enough of them have some shape (a
    /// log level, a grep hit, a listing entry) is decided after the pass ([`Scan::reaches`]),
    /// looking at only as many of them as the decision needs.
    content_lines: Vec<&'a str>,
    /// `content_lines` trimmed at both ends, as the pass found them: the tests that look at
    /// trimmed lines (grep hits, listings) do not trim them again.
    trimmed_content_lines: Vec<&'a str>,
    // Diff.
    pub(super) diff_headers: usize,
    pub(super) hunks: usize,
    pub(super) added: usize,
    pub(super) removed: usize,
}

/// What a pass over lines looks for: everything (detection), or only what a Markdown or diff
/// summary counts (the exact pass over a sampled text).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum ScanFor {
    Detection,
    Markdown,
    Diff,
}

impl<'a> Scan<'a> {
    pub(super) fn over<'l>(lines: impl Iterator<Item = &'l Line<'a>>, purpose: ScanFor) -> Scan<'a>
    where
        'a: 'l,
    {
        let mut scan = Scan::default();
        if purpose == ScanFor::Detection {
            scan.content_lines.reserve(lines.size_hint().0);
            scan.trimmed_content_lines.reserve(lines.size_hint().0);
        }
        let mut in_fence = false;
        for &Line {
            text: line,
            trimmed_start,
            ..
        } in lines
        {
            let trimmed = trim_end_fast(trimmed_start);
            if trimmed.is_empty() {
                continue;
            }
            scan.nonempty += 1;
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                scan.fences += 1;
                if !in_fence {
                    scan.fence_language(trimmed);
                }
                in_fence = !in_fence;
                continue;
            }
            if purpose == ScanFor::Markdown {
                scan.links += count_links(prefix_bytes(line, 4 * LINE_HEAD_BYTES));
            }
            if in_fence {
                continue;
            }
            scan.nonempty_outside_fences += 1;
            match purpose {
                ScanFor::Detection => {
                    scan.markdown_line(line, trimmed_start, trimmed);
                    scan.code_line(trimmed);
                    scan.content_lines.push(line);
                    scan.trimmed_content_lines.push(trimmed);
                    scan.diff_line(line);
                }
                ScanFor::Markdown => scan.markdown_line(line, trimmed_start, trimmed),
                ScanFor::Diff => scan.diff_line(line),
            }
        }
        scan
    }

    fn fence_language(&mut self, fence: &'a str) {
        let lang = fence.trim_start_matches(['`', '~']).trim();
        let lang = lang.split_whitespace().next().unwrap_or("");
        if !lang.is_empty() && lang.len() <= 20 && !self.fence_langs.contains(&lang) {
            self.fence_langs.push(lang);
        }
    }

    fn markdown_line(&mut self, line: &'a str, trimmed_start: &'a str, trimmed: &'a str) {
        let hashes = line.bytes().take_while(|b| *b == b'#').count();
        if (1..=6).contains(&hashes) && line.as_bytes().get(hashes) == Some(&b' ') {
            if line.get(hashes..).is_some_and(|t| !t.trim().is_empty()) {
                self.headings.push(trimmed);
            }
            return;
        }
        let t = trimmed_start;
        let bullet = t.starts_with("- ") || t.starts_with("* ") || t.starts_with("+ ");
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        let numbered = (1..=3).contains(&digits)
            && matches!(t.as_bytes().get(digits), Some(b'.' | b')'))
            && t.as_bytes().get(digits + 1) == Some(&b' ');
        if bullet || numbered {
            self.list_items += 1;
        }
    }

    fn code_line(&mut self, t: &str) {
        let lang = keyword_language(first_word(t), t);
        if let Some(lang) = lang {
            if let Some(votes) = self.lang_votes.get_mut(lang) {
                *votes += 1;
            }
        }
        let structural = t.ends_with('{')
            || t.ends_with('}')
            || t.ends_with(';')
            || t.starts_with("//")
            || t.starts_with("/*")
            || (t.ends_with(':') && lang.is_some())
            || t == "end"
            || t.ends_with(" do");
        if structural || lang.is_some() {
            self.code_lines += 1;
        }
    }

    /// Whether the scanned text is a log: lines stating a level make up 10% of the `nonempty`
    /// lines of a text whose lines are 30% timestamped, or 60% of any text of three lines or
    /// more.
    ///
    /// Both counts stop once they are settled: whether 30% of the lines are timestamped is
    /// known after at most 70% of them fail, and the level count stops likewise.
    pub(super) fn is_log(&self, nonempty: usize) -> bool {
        let timed = self.reaches((nonempty * 3).div_ceil(10), |line| {
            find_timestamp(line).is_some()
        });
        let timed = timed.then_some(nonempty.div_ceil(10));
        let leveled = (nonempty >= 3).then_some((nonempty * 6).div_ceil(10));
        let Some(needed) = timed.into_iter().chain(leveled).min() else {
            return false;
        };
        self.reaches(needed.max(1), |line| log_level(line).is_some())
    }

    /// Whether at least `needed` of the content lines pass `test`; lines are tested only until
    /// that is settled either way.
    fn reaches(&self, needed: usize, test: impl Fn(&'a str) -> bool) -> bool {
        reaches_in(&self.content_lines, needed, test)
    }

    /// Whether at least `needed` content lines are grep hits (`path:12:…`).
    pub(super) fn grep_lines_reach(&self, needed: usize) -> bool {
        reaches_in(&self.trimmed_content_lines, needed, |t| {
            grep_hit(t).is_some()
        })
    }

    /// Whether at least `needed` content lines are `ls -l` lines.
    pub(super) fn ls_long_lines_reach(&self, needed: usize) -> bool {
        reaches_in(&self.trimmed_content_lines, needed, is_ls_long)
    }

    /// Whether at least `needed` content lines are `ls -l` lines or bare file names.
    pub(super) fn listing_lines_reach(&self, needed: usize) -> bool {
        reaches_in(&self.trimmed_content_lines, needed, |t| {
            is_ls_long(t) || is_bare_name(t)
        })
    }

    fn diff_line(&mut self, line: &str) {
        if line.starts_with("diff --git ") || line.starts_with("+++ ") {
            self.diff_headers += 1;
        } else if line.starts_with("@@ ") {
            self.hunks += 1;
        } else if line.starts_with('+') {
            self.added += 1;
        } else if line.starts_with('-') && !line.starts_with("--- ") {
            self.removed += 1;
        }
    }
}

/// Whether at least `needed` of `lines` pass `test`; lines are tested only until that is settled
/// either way.
fn reaches_in<'a>(lines: &[&'a str], needed: usize, test: impl Fn(&'a str) -> bool) -> bool {
    let mut found = 0;
    for (checked, line) in lines.iter().enumerate() {
        if found >= needed {
            return true;
        }
        if found + (lines.len() - checked) < needed {
            return false;
        }
        if test(line) {
            found += 1;
        }
    }
    found >= needed
}

/// The Markdown links [`Scan::over`] counts for its Markdown pass: in every non-empty line but
/// the fences themselves.
pub(super) fn links_over<'l, 'a: 'l>(lines: impl Iterator<Item = &'l Line<'a>>) -> usize {
    lines
        .filter(|line| {
            let trimmed = trim_end_fast(line.trimmed_start);
            !trimmed.is_empty() && !trimmed.starts_with("```") && !trimmed.starts_with("~~~")
        })
        .map(|line| count_links(prefix_bytes(line.text, 4 * LINE_HEAD_BYTES)))
        .sum()
}

/// Markdown links (`](`) in a line.
fn count_links(line: &str) -> usize {
    let bytes = line.as_bytes();
    memchr::memchr_iter(b']', bytes)
        .filter(|&at| bytes.get(at + 1) == Some(&b'('))
        .count()
}

/// The first word of a line: up to a space or an opening bracket.
pub(super) fn first_word(t: &str) -> &str {
    let head = prefix_bytes(t, 64);
    let end = head
        .bytes()
        .position(|b| matches!(b, b' ' | b'(' | b'<' | b'{' | b':' | b'\t'))
        .unwrap_or(head.len());
    head.get(..end).unwrap_or("")
}

/// Every language [`keyword_language`] names, by the index it returns (`code`: keywords many
/// languages share).
pub(super) const LANGUAGES: [&str; 8] = [
    "rust",
    "python",
    "elixir",
    "javascript",
    "go",
    "c",
    "java",
    "code",
];
const RUST: usize = 0;
const PYTHON: usize = 1;
const ELIXIR: usize = 2;
const JAVASCRIPT: usize = 3;
const GO: usize = 4;
const C: usize = 5;
const JAVA: usize = 6;
const SHARED: usize = 7;

/// The language a line's first word suggests (its index in [`LANGUAGES`]), if it is a keyword of
/// one (`code` for keywords many languages share).
fn keyword_language(first: &str, line: &str) -> Option<usize> {
    let lang = match first {
        "fn" | "pub" | "impl" | "mod" | "use" | "let" | "match" | "struct" | "enum" | "trait"
        | "#[derive" | "#[cfg" => RUST,
        "def" if line.ends_with(':') => PYTHON,
        "class" if line.ends_with(':') => PYTHON,
        "def" | "defp" | "defmodule" | "alias" | "defstruct" | "defmacro" => ELIXIR,
        "import" | "from" if line.contains(" from ") || line.ends_with(';') => JAVASCRIPT,
        "import" | "from" | "elif" | "except" | "raise" => PYTHON,
        "function" | "const" | "var" | "export" => JAVASCRIPT,
        "func" | "package" => GO,
        "#include" | "#define" | "void" | "int" | "static" => C,
        "public" | "private" | "protected" | "class" | "interface" => JAVA,
        "return" | "if" | "for" | "while" | "else" | "try" | "catch" | "switch" | "case"
        | "async" | "await" | "type" | "@impl" | "@doc" | "@spec" => SHARED,
        _ => return None,
    };
    Some(lang)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    use crate::digest::detect::{Detected, detect};
    use crate::digest::input::Input;
    use crate::digest::text::trim_fast;

    /// The log decision as it was made before [`Scan::is_log`]: from the full counts.
    fn is_log_by_counting(scan: &Scan<'_>, n: usize) -> bool {
        let levels = scan
            .content_lines
            .iter()
            .filter(|l| log_level(l).is_some())
            .count();
        let timestamps = scan
            .content_lines
            .iter()
            .filter(|l| find_timestamp(l).is_some())
            .count();
        let timed_log = timestamps * 10 >= n * 3 && levels * 10 >= n;
        let leveled_log = n >= 3 && levels * 10 >= n * 6;
        levels >= 1 && (timed_log || leveled_log)
    }

    proptest::proptest! {
        #[test]
        fn the_log_decision_stops_early_but_decides_as_the_counts_do(
            kinds in proptest::collection::vec(0u8..6, 0..40)
        ) {
            let text: String = kinds
                .iter()
                .map(|kind| match kind {
                    0 => "2024-01-01 10:00:00 INFO started\n",
                    1 => "[error] no timestamp\n",
                    2 => "12:30:45 plain with a time\n",
                    3 => "just words\n",
                    4 => "\n",
                    _ => "```\n",
                })
                .collect();
            let input = Input::new(&text);
            let scan = Scan::over(input.sample(), ScanFor::Detection);
            let n = scan.nonempty;
            proptest::prop_assert_eq!(scan.is_log(n), is_log_by_counting(&scan, n));
        }
    }

    #[test]
    fn links_are_counted_alike_on_demand_and_by_the_markdown_pass() {
        let text = "# T\n[a](x) and [b](y)\n```\n[c](z)\n```\n- [d](w)\n  \n~~~ [e](v)\n";
        let input = Input::new(text);
        let full = Scan::over(input.sample(), ScanFor::Markdown);
        assert_eq!(full.links, 4);
        assert_eq!(links_over(input.sample()), full.links);
        let Detected::Markdown(detected) = detect(&input) else {
            panic!("not detected as Markdown");
        };
        assert_eq!(detected.links, 4);
    }

    proptest::proptest! {
        #[test]
        fn shape_thresholds_stop_early_but_decide_as_the_counts_do(
            kinds in proptest::collection::vec(0u8..7, 0..30)
        ) {
            let text: String = kinds
                .iter()
                .map(|kind| match kind {
                    0 => "src/a.rs:12: let x = 1;\n",
                    1 => "drwxr-xr-x  2 user staff  64 Jan  1 10:00 dir\n",
                    2 => "notes.txt\n",
                    3 => "some words here\n",
                    4 => "fn x() {\n",
                    5 => "  \n",
                    _ => "```\n",
                })
                .collect();
            let input = Input::new(&text);
            let scan = Scan::over(input.sample(), ScanFor::Detection);
            let count = |test: &dyn Fn(&str) -> bool| {
                scan.content_lines.iter().filter(|l| test(trim_fast(l))).count()
            };
            let grep = count(&|t| grep_hit(t).is_some());
            let ls = count(&|t| is_ls_long(t));
            let listing = count(&|t| is_ls_long(t) || is_bare_name(t));
            for needed in 0..=scan.content_lines.len() + 1 {
                proptest::prop_assert_eq!(scan.grep_lines_reach(needed), grep >= needed);
                proptest::prop_assert_eq!(scan.ls_long_lines_reach(needed), ls >= needed);
                proptest::prop_assert_eq!(scan.listing_lines_reach(needed), listing >= needed);
            }
        }
    }

    #[test]
    fn language_indices_name_their_languages() {
        let named = [
            (RUST, "rust"),
            (PYTHON, "python"),
            (ELIXIR, "elixir"),
            (JAVASCRIPT, "javascript"),
            (GO, "go"),
            (C, "c"),
            (JAVA, "java"),
            (SHARED, "code"),
        ];
        for (index, name) in named {
            assert_eq!(LANGUAGES[index], name);
        }
        assert_eq!(keyword_language("fn", "fn main() {"), Some(RUST));
        assert_eq!(keyword_language("def", "def f():"), Some(PYTHON));
        assert_eq!(keyword_language("def", "def f do"), Some(ELIXIR));
        assert_eq!(keyword_language("banana", "banana"), None);
    }
}
