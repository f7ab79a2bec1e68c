//! Input: the text as analysed.
//!
//! mini-swe-agent's `<returncode>…</returncode><output>…</output>` wrapper is unwrapped (its exit
//! code kept), harness tag lines (`<output_head>`) dropped, line-number gutters (`cat -n`, Claude
//! Code's Read tool) stripped, and the lines indexed once, each with its error rank. Every later
//! step reads an [`Input`], never the raw text, so this work is done once per digest. Of a long
//! text it also fixes the sample (its first and last parts) that detection, identifier ranking
//! and the sampled lists look at, which is what bounds the cost of a digest.

use super::lines::annotate_error_ranks;
use super::text::{leading_spaces, prefix_bytes, suffix_bytes, trim_fast, trim_start_fast};

/// Per-line checks look at most this many bytes of a line: what makes a line an error, a
/// heading or a log entry is at its start, and a megabyte-long line must not cost more.
pub(super) const LINE_HEAD_BYTES: usize = 256;

/// Texts up to `SAMPLE_HEAD_BYTES + SAMPLE_TAIL_BYTES` are analysed whole. Of a longer text,
/// kind detection, identifier ranking and the lists a summary samples (function names, headings)
/// look at the lines in its first and last parts, cut at line ends: a summary shows a handful of
/// items, and the ends of an output are where its command, its errors and its totals are. The
/// numbers a summary states (lines, characters, levels, matches, rows, error lines, the first
/// error) always count the whole text. This bounds the cost of a digest (see the `digest`
/// bench) whatever the size of the output.
const SAMPLE_HEAD_BYTES: usize = 12 * 1024;
const SAMPLE_TAIL_BYTES: usize = 6 * 1024;

/// At most this many items of one list are considered for a summary.
pub(super) const MAX_ITEMS: usize = 40;

pub(super) struct Line<'a> {
    /// The line without its gutter and line terminator.
    pub(super) text: &'a str,
    /// `text` without its leading whitespace: most checks look at it, so it is cut once.
    pub(super) trimmed_start: &'a str,
    /// Byte offset of `text` in the body.
    pub(super) start: usize,
    /// The line holds one of the substrings every error line holds (`lines::ERROR_TRIGGER_RE`).
    pub(super) trigger: bool,
    /// [`error_rank`](super::facts::error_rank) of the line (only computed for trigger lines).
    pub(super) rank: Option<u8>,
}

/// The text as analysed.
pub(super) struct Input<'a> {
    pub(super) body: &'a str,
    /// Content lines, with harness tag lines (`<output_head>`) left out.
    pub(super) lines: Vec<Line<'a>>,
    /// Exit code stated by a wrapper (`<returncode>1</returncode>`).
    pub(super) wrapper_exit: Option<&'a str>,
    pub(super) chars: usize,
    pub(super) total_lines: usize,
    /// Lines `..head_lines` and `tail_from..` are the sample; the whole text when they meet.
    pub(super) head_lines: usize,
    pub(super) tail_from: usize,
}

impl<'a> Input<'a> {
    pub(super) fn new(text: &'a str) -> Input<'a> {
        let (body, wrapper_exit) = unwrap_returncode(text);
        let numbered = has_line_gutter(body);
        // One vectorised search for all line ends, and room for every line up front.
        let ends = memchr::memchr_iter(b'\n', body.as_bytes()).map(|i| i + 1);
        let ends = ends.chain((!body.is_empty() && !body.ends_with('\n')).then_some(body.len()));
        let mut lines = Vec::with_capacity(memchr::memchr_iter(b'\n', body.as_bytes()).count() + 1);
        let mut total_lines = 0;
        let mut offset = 0;
        for end in ends {
            let start = offset;
            let raw = body.get(start..end).unwrap_or("");
            offset = end;
            total_lines += 1;
            let line = raw.strip_suffix('\n').unwrap_or(raw);
            let line = line.strip_suffix('\r').unwrap_or(line);
            let (line, gutter) = if numbered {
                let n = gutter_len(line).unwrap_or(0);
                (line.get(n..).unwrap_or(line), n)
            } else {
                (line, 0)
            };
            let trimmed_start = trim_start_fast(line);
            if trimmed_start.starts_with('<') && is_harness_tag(line) {
                continue;
            }
            lines.push(Line {
                text: line,
                trimmed_start,
                start: start + gutter,
                trigger: false,
                rank: None,
            });
        }
        annotate_error_ranks(body, &mut lines);
        let (head_lines, tail_from) = if body.len() <= SAMPLE_HEAD_BYTES + SAMPLE_TAIL_BYTES {
            (lines.len(), lines.len())
        } else {
            let head = lines.partition_point(|line| line.start < SAMPLE_HEAD_BYTES);
            let tail_start = body.len() - SAMPLE_TAIL_BYTES;
            // The first line that starts inside the tail part, so no line is cut.
            let tail = lines.partition_point(|line| line.start < tail_start);
            (head, tail.max(head))
        };
        Input {
            body,
            lines,
            wrapper_exit,
            chars: body.chars().count(),
            total_lines,
            head_lines,
            tail_from,
        }
    }

    /// The lines analysed in detail (all of them for texts of moderate size).
    pub(super) fn sample(&self) -> impl Iterator<Item = &Line<'a>> + '_ {
        let head = self.lines.get(..self.head_lines).unwrap_or(&[]);
        let tail = self.lines.get(self.tail_from..).unwrap_or(&[]);
        head.iter().chain(tail)
    }

    pub(super) fn is_sampled(&self) -> bool {
        self.tail_from > self.head_lines
    }

    /// Byte ranges of the body the sample covers: its lines, and within them no more than the
    /// sample's byte budget (a single huge line is cut at a space).
    pub(super) fn sample_windows(&self) -> Vec<(usize, &'a str)> {
        let body = self.body;
        if body.len() <= SAMPLE_HEAD_BYTES + SAMPLE_TAIL_BYTES {
            return vec![(0, body)];
        }
        let head = prefix_bytes(body, SAMPLE_HEAD_BYTES);
        let head = head
            .rfind('\n')
            .or_else(|| head.rfind(' '))
            .and_then(|i| head.get(..i))
            .unwrap_or(head);
        let tail = suffix_bytes(body, SAMPLE_TAIL_BYTES);
        let tail = tail
            .find('\n')
            .or_else(|| tail.find(' '))
            .and_then(|i| tail.get(i + 1..))
            .unwrap_or(tail);
        vec![(0, head), (body.len() - tail.len(), tail)]
    }

    pub(super) fn texts(&self) -> impl DoubleEndedIterator<Item = &'a str> + '_ {
        self.lines.iter().map(|line| line.text)
    }

    pub(super) fn nonempty(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.lines
            .iter()
            .filter(|line| !line.trimmed_start.is_empty())
            .map(|line| line.text)
    }
}

/// mini-swe-agent wraps command output as `<returncode>N</returncode>\n<output>…</output>`.
fn unwrap_returncode(text: &str) -> (&str, Option<&str>) {
    let trimmed = text.trim_start();
    let Some(rest) = trimmed.strip_prefix("<returncode>") else {
        return (text, None);
    };
    let Some((code, rest)) = rest.split_once("</returncode>") else {
        return (text, None);
    };
    let code = code.trim();
    let code = (!code.is_empty() && code.len() <= 6).then_some(code);
    let rest = rest.trim_start_matches(['\r', '\n']);
    let body = match rest.strip_prefix("<output>") {
        Some(inner) => {
            let inner = inner.trim_end();
            inner.strip_suffix("</output>").unwrap_or(inner)
        }
        None => rest,
    };
    (body.trim_start_matches(['\r', '\n']), code)
}

/// Lines that are only a harness tag (`<output_head>`, `</output_tail>`, `<warning>`).
fn is_harness_tag(line: &str) -> bool {
    if !trim_start_fast(line).starts_with('<') {
        return false;
    }
    let t = trim_fast(line);
    t.len() >= 3
        && t.len() <= 40
        && t.starts_with('<')
        && t.ends_with('>')
        && t.get(1..t.len() - 1).is_some_and(|inner| {
            let inner = inner.strip_prefix('/').unwrap_or(inner);
            !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        })
}

/// `cat -n` and Claude Code's Read tool put each line's number in a gutter: `   12→text` or
/// `    12\ttext`. Detected on the first lines, so analysis sees the content.
fn has_line_gutter(body: &str) -> bool {
    let mut seen = 0;
    let mut numbered = 0;
    for line in body.lines().filter(|l| !l.trim().is_empty()).take(20) {
        seen += 1;
        if gutter_len(line).is_some() {
            numbered += 1;
        }
    }
    seen >= 2 && numbered * 10 >= seen * 8
}

fn gutter_len(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    let spaces = leading_spaces(bytes);
    let digits = bytes
        .get(spaces..)?
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || digits > 7 {
        return None;
    }
    let rest = line.get(spaces + digits..)?;
    let after = rest.strip_prefix('→').or_else(|| rest.strip_prefix('\t'))?;
    Some(line.len() - after.len())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn returncode_wrappers_are_unwrapped() {
        let (body, code) =
            unwrap_returncode("<returncode>0</returncode>\n<output>\nfile.txt\n</output>");
        assert_eq!((body, code), ("file.txt\n", Some("0")));
        let (body, code) = unwrap_returncode("<returncode>1</returncode>\nno output tag");
        assert_eq!((body, code), ("no output tag", Some("1")));
        assert_eq!(unwrap_returncode("plain"), ("plain", None));
        assert_eq!(unwrap_returncode("<returncode>1"), ("<returncode>1", None));
    }

    #[test]
    fn line_number_gutters_are_stripped() {
        let input = Input::new("     1→use std::io;\n     2→\n     3→fn main() {}\n");
        let texts: Vec<&str> = input.texts().collect();
        assert_eq!(texts, ["use std::io;", "", "fn main() {}"]);
        let input = Input::new("    10\tdef f():\n    11\t    return 1\n");
        assert_eq!(input.texts().next(), Some("def f():"));
        // Numbers that are content, not a gutter, stay.
        let input = Input::new("12 apples\n13 pears\n");
        assert_eq!(input.texts().next(), Some("12 apples"));
    }

    #[test]
    fn harness_tag_lines_are_dropped() {
        let input = Input::new(
            "<output_head>\nfirst\n<elided_chars>\n10 characters elided\n</elided_chars>\n<output_tail>\nlast",
        );
        let texts: Vec<&str> = input.texts().collect();
        assert_eq!(texts, ["first", "10 characters elided", "last"]);
    }

    #[test]
    fn sampled_inputs_cover_both_ends() {
        let mut text = String::new();
        for i in 0..5000 {
            text.push_str(&format!("line {i} with /srv/path/{i}\n"));
        }
        let input = Input::new(&text);
        assert!(input.is_sampled());
        let windows = input.sample_windows();
        assert_eq!(windows.len(), 2);
        let (head_offset, head) = windows.first().copied().unwrap();
        let (tail_offset, tail) = windows.last().copied().unwrap();
        assert_eq!(head_offset, 0);
        assert!(head.len() <= SAMPLE_HEAD_BYTES);
        assert!(tail.len() <= SAMPLE_TAIL_BYTES);
        assert_eq!(tail_offset + tail.len(), text.len());
        assert!(tail.starts_with("line "));
        assert!(input.sample().count() < input.lines.len());
    }
}
