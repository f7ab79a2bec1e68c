//! Digests of tool output: a short, deterministic, content-aware summary of a text, the
//! `Summary` in `[REF_ID: …] (Summary: …)` placeholders and the no-LLM fallback wherever a
//! summary is needed.
//!
//! This module owns content-kind detection and the summary strategies of SCCS's
//! `SummaryExtractor` (seed 000), plus what the seed leaves out: the exact strings a model later
//! needs. Six kinds, tried in this order: JSON, unified diff (a kind of code), log, table,
//! Markdown, code, plain text. (The seed's table lists Markdown and tables before logs; line
//! regularity is the stronger signal, so logs and tables go first here.)
//!
//! | kind | detected by | summary |
//! | --- | --- | --- |
//! | [`ContentKind::Json`] | parses as a JSON object/array (or JSON Lines) | array length and element types, or keys with sampled values |
//! | [`ContentKind::Table`] | the first line has a separator and column counts agree | rows, columns, header |
//! | [`ContentKind::Log`] | level keywords plus timestamps | counts per level, time range, error types |
//! | [`ContentKind::Markdown`] | headings plus lists, code fences or links | headings, code-block languages, list and link counts |
//! | [`ContentKind::Code`] | braces/semicolons and keyword density; unified diffs | language, function names, imports; files and +/- for diffs |
//! | [`ContentKind::PlainText`] | none of the above | lines, error and path counts, listings, grep hits, first and key lines |
//!
//! Output inside an envelope ([`crate::tool_output`]: Codex's `{"output": "…", "metadata":
//! {"exit_code": 0}}` JSON string, its Responses `Output:` header) is digested as the output it
//! holds, its kind detected on that text, with the envelope's exit code.
//!
//! Every summary also keeps, inside the same character budget, the exit code, the test/build
//! status line, the first error line (for a Python traceback, the exception line rather than the
//! `Traceback` header), failing test names, and the identifiers ([`crate::identifiers`]: hashes,
//! URLs, absolute paths, `host:port`, plus relative paths) the output mentions, ranked so the ones
//! an agent is likely to reuse come first: those on the error line and its location, project
//! frames before library frames, build artefacts and memory addresses last. Space is given in
//! priority order (kind and size, then those facts, the kind's own lists, identifiers, details;
//! below 120 characters the facts go first), each part within a cap, and what is left lets cut
//! parts grow. The budget ([`DigestSettings::summary_max_chars`], default 300 characters) is never
//! exceeded; a cut never splits a character, prefers a word end and is marked with `…`; an
//! identifier is shown whole or not at all. Output is one line and depends only on the input (no
//! hash-map order leaks).
//!
//! Cost is bounded: a text is split into lines once, a whole-text literal search finds the few
//! lines that can state an error, and of texts over 18 KiB only the first 12 KiB and last 6 KiB
//! are analysed line by line (kind, identifiers, names); the counts a summary states always
//! cover the whole text. A 100 kB output digests in well under a millisecond (`benches/digest.rs`).
//!
//! ```
//! use skald_core::digest::{ContentKind, DigestSettings, digest};
//!
//! let out = "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  \
//!            File \"/repo/app/models.py\", line 3, in <module>\nValueError: bad id 123456\n</output>";
//! let d = digest(out, &DigestSettings::default());
//! assert_eq!(d.kind, ContentKind::PlainText);
//! assert!(d.summary.contains("exit 1"));
//! assert!(d.summary.contains("ValueError: bad id 123456"));
//! assert!(d.summary.contains("/repo/app/models.py"));
//! assert!(d.summary.chars().count() <= 300);
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use regex::Regex;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::identifiers::{
    self, contains_short, is_pure_hex, mentions_identifier, normalize_identifier,
};
use crate::message::{Block, ImageSource};
use crate::swar::{bytes_equal, load_word, lower_bytes, upper_bytes};

/// The seed's default `sccsSummaryMaxChars`.
pub const DEFAULT_SUMMARY_MAX_CHARS: usize = 300;

/// The seed's lower bound for `sccsSummaryMaxChars`.
pub const MIN_SUMMARY_MAX_CHARS: usize = 50;

/// The mark left where text was cut.
pub const CUT_MARK: char = '…';

/// Why digest settings were rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestSettingsError {
    #[error(
        "summary_max_chars: expected at least {minimum} characters, found {found}; a shorter \
         summary cannot hold a kind, a status and one identifier"
    )]
    SummaryMaxCharsTooSmall { found: usize, minimum: usize },
}

/// How digests are made. Construct with [`DigestSettings::new`], which validates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestSettings {
    summary_max_chars: usize,
}

impl DigestSettings {
    /// Settings with a summary budget of `summary_max_chars` characters (at least
    /// [`MIN_SUMMARY_MAX_CHARS`]).
    pub fn new(summary_max_chars: usize) -> Result<DigestSettings, DigestSettingsError> {
        if summary_max_chars < MIN_SUMMARY_MAX_CHARS {
            return Err(DigestSettingsError::SummaryMaxCharsTooSmall {
                found: summary_max_chars,
                minimum: MIN_SUMMARY_MAX_CHARS,
            });
        }
        Ok(DigestSettings { summary_max_chars })
    }

    /// The most characters (Unicode scalar values) a summary may have.
    pub fn summary_max_chars(&self) -> usize {
        self.summary_max_chars
    }
}

impl Default for DigestSettings {
    fn default() -> DigestSettings {
        DigestSettings {
            summary_max_chars: DEFAULT_SUMMARY_MAX_CHARS,
        }
    }
}

/// What a text is, as far as summarising goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ContentKind {
    Json,
    Markdown,
    Table,
    Log,
    Code,
    PlainText,
}

impl ContentKind {
    /// A short, stable name for reports.
    pub fn name(self) -> &'static str {
        match self {
            ContentKind::Json => "json",
            ContentKind::Markdown => "markdown",
            ContentKind::Table => "table",
            ContentKind::Log => "log",
            ContentKind::Code => "code",
            ContentKind::PlainText => "text",
        }
    }

    /// The kind [`digest`] would pick for `text`.
    pub fn detect(text: &str) -> ContentKind {
        detect(&Input::new(text)).kind()
    }
}

/// A summary of a text and the kind it was summarised as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    pub kind: ContentKind,
    /// One line, at most [`DigestSettings::summary_max_chars`] characters.
    pub summary: String,
}

/// Summarises `text` within `settings`' budget.
pub fn digest(text: &str, settings: &DigestSettings) -> Digest {
    digest_with_notes(text, &[], settings)
}

/// Summarises a tool result's blocks: text blocks joined with newlines, images (and blocks that
/// are neither text nor image) noted as `[image: media/type]` / `[type]` at the front of the
/// summary, where the budget cannot push them out.
pub fn digest_blocks(blocks: &[Block], settings: &DigestSettings) -> Digest {
    // One text block (the usual tool result) is read where it is, not copied.
    let mut texts = blocks.iter().filter_map(|block| match block {
        Block::Text(text) => Some(text.text.as_str()),
        Block::Image(_)
        | Block::Thinking(_)
        | Block::ToolCall(_)
        | Block::ToolResult(_)
        | Block::Opaque(_) => None,
    });
    let single = match (texts.next(), texts.next()) {
        (Some(only), None) => Some(only),
        (Some(_), Some(_)) | (None, _) => None,
    };
    let mut text = String::new();
    let mut notes = Vec::new();
    for block in blocks {
        match block {
            Block::Text(block) => {
                if single.is_some() {
                    continue;
                }
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&block.text);
            }
            Block::Image(image) => notes.push(format!("[image: {}]", image_label(&image.source))),
            Block::Opaque(value) => {
                let kind = value.get("type").and_then(Value::as_str).unwrap_or("block");
                notes.push(format!("[{}]", clean_inline(kind, 40)));
            }
            Block::Thinking(_) => notes.push("[thinking]".to_owned()),
            Block::ToolCall(call) => {
                notes.push(format!("[tool call: {}]", clean_inline(&call.name, 40)));
            }
            Block::ToolResult(result) => {
                let inner = digest_blocks(&result.content, settings);
                notes.push(format!("[tool result: {}]", inner.summary));
            }
        }
    }
    digest_with_notes(single.unwrap_or(&text), &notes, settings)
}

fn image_label(source: &ImageSource) -> String {
    match source {
        ImageSource::Base64 { media_type, .. } => clean_inline(media_type, 40),
        ImageSource::Url { url } => match url.strip_prefix("data:") {
            Some(rest) => clean_inline(rest.split([';', ',']).next().unwrap_or("url"), 40),
            None => "url".to_owned(),
        },
    }
}

fn digest_with_notes(text: &str, notes: &[String], settings: &DigestSettings) -> Digest {
    // Output inside an envelope (Codex's JSON string, its Responses header) is digested as the
    // output it holds, with the exit code the envelope states.
    let unwrapped = crate::tool_output::unwrap(text);
    let mut input = Input::new(unwrapped.as_ref().map_or(text, |inner| &inner.body));
    if let Some(code) = unwrapped
        .as_ref()
        .and_then(|inner| inner.exit_code.as_deref())
    {
        input.wrapper_exit = input.wrapper_exit.or(Some(code));
    }
    let detected = detect(&input);
    let kind = detected.kind();
    let shape = shape_of(&detected, &input);
    let facts = Facts::new(&input, kind);
    Digest {
        kind,
        summary: assemble(settings.summary_max_chars, notes, &shape, &facts),
    }
}

// ---------------------------------------------------------------------------------------------
// Input: harness envelopes unwrapped, line-number gutters stripped, lines indexed once.

/// Per-line checks look at most this many bytes of a line: what makes a line an error, a
/// heading or a log entry is at its start, and a megabyte-long line must not cost more.
const LINE_HEAD_BYTES: usize = 256;

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
const MAX_ITEMS: usize = 40;

struct Line<'a> {
    /// The line without its gutter and line terminator.
    text: &'a str,
    /// `text` without its leading whitespace: most checks look at it, so it is cut once.
    trimmed_start: &'a str,
    /// Byte offset of `text` in the body.
    start: usize,
    /// The line holds one of the substrings every error line holds ([`ERROR_TRIGGER_RE`]).
    trigger: bool,
    /// [`error_rank`] of the line (only computed for trigger lines).
    rank: Option<u8>,
}

/// The text as analysed.
struct Input<'a> {
    body: &'a str,
    /// Content lines, with harness tag lines (`<output_head>`) left out.
    lines: Vec<Line<'a>>,
    /// Exit code stated by a wrapper (`<returncode>1</returncode>`).
    wrapper_exit: Option<&'a str>,
    chars: usize,
    total_lines: usize,
    /// Lines `..head_lines` and `tail_from..` are the sample; the whole text when they meet.
    head_lines: usize,
    tail_from: usize,
}

impl<'a> Input<'a> {
    fn new(text: &'a str) -> Input<'a> {
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
    fn sample(&self) -> impl Iterator<Item = &Line<'a>> + '_ {
        let head = self.lines.get(..self.head_lines).unwrap_or(&[]);
        let tail = self.lines.get(self.tail_from..).unwrap_or(&[]);
        head.iter().chain(tail)
    }

    fn is_sampled(&self) -> bool {
        self.tail_from > self.head_lines
    }

    /// Byte ranges of the body the sample covers: its lines, and within them no more than the
    /// sample's byte budget (a single huge line is cut at a space).
    fn sample_windows(&self) -> Vec<(usize, &'a str)> {
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

    fn texts(&self) -> impl DoubleEndedIterator<Item = &'a str> + '_ {
        self.lines.iter().map(|line| line.text)
    }

    fn nonempty(&self) -> impl Iterator<Item = &'a str> + '_ {
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

// ---------------------------------------------------------------------------------------------
// One pass over the lines collecting what detection and the strategies need.

#[derive(Default)]
struct Scan<'a> {
    nonempty: usize,
    // Markdown (headings only outside code fences).
    headings: Vec<&'a str>,
    list_items: usize,
    fences: usize,
    fence_langs: Vec<&'a str>,
    links: usize,
    // Code (outside fences).
    nonempty_outside_fences: usize,
    code_lines: usize,
    /// Lines voting for each of [`LANGUAGES`].
    lang_votes: [usize; LANGUAGES.len()],
    /// The lines outside fences. What is decided by whether enough of them have some shape (a
    /// log level, a grep hit, a listing entry) is decided after the pass ([`Scan::reaches`]),
    /// looking at only as many of them as the decision needs.
    content_lines: Vec<&'a str>,
    /// `content_lines` trimmed at both ends, as the pass found them: the tests that look at
    /// trimmed lines (grep hits, listings) do not trim them again.
    trimmed_content_lines: Vec<&'a str>,
    // Diff.
    diff_headers: usize,
    hunks: usize,
    added: usize,
    removed: usize,
}

/// What a pass over lines looks for: everything (detection), or only what a Markdown or diff
/// summary counts (the exact pass over a sampled text).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ScanFor {
    Detection,
    Markdown,
    Diff,
}

impl<'a> Scan<'a> {
    fn over<'l>(lines: impl Iterator<Item = &'l Line<'a>>, purpose: ScanFor) -> Scan<'a>
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
    fn is_log(&self, nonempty: usize) -> bool {
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
    fn grep_lines_reach(&self, needed: usize) -> bool {
        reaches_in(&self.trimmed_content_lines, needed, |t| {
            grep_hit(t).is_some()
        })
    }

    /// Whether at least `needed` content lines are `ls -l` lines.
    fn ls_long_lines_reach(&self, needed: usize) -> bool {
        reaches_in(&self.trimmed_content_lines, needed, is_ls_long)
    }

    /// Whether at least `needed` content lines are `ls -l` lines or bare file names.
    fn listing_lines_reach(&self, needed: usize) -> bool {
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
fn links_over<'l, 'a: 'l>(lines: impl Iterator<Item = &'l Line<'a>>) -> usize {
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
fn first_word(t: &str) -> &str {
    let head = prefix_bytes(t, 64);
    let end = head
        .bytes()
        .position(|b| matches!(b, b' ' | b'(' | b'<' | b'{' | b':' | b'\t'))
        .unwrap_or(head.len());
    head.get(..end).unwrap_or("")
}

/// Every language [`keyword_language`] names, by the index it returns (`code`: keywords many
/// languages share).
const LANGUAGES: [&str; 8] = [
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

fn level_name(word: &[u8]) -> Option<&'static str> {
    let level = match word {
        b"FATAL" | b"CRITICAL" | b"fatal" | b"critical" => "FATAL",
        b"ERROR" | b"error" => "ERROR",
        b"WARN" | b"WARNING" | b"warn" | b"warning" => "WARN",
        b"INFO" | b"info" => "INFO",
        b"DEBUG" | b"debug" => "DEBUG",
        b"TRACE" | b"trace" => "TRACE",
        _ => return None,
    };
    Some(level)
}

/// Levels from most to least severe, the order the log summary lists them in.
const LEVEL_ORDER: [&str; 6] = ["FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"];

/// A log line states its level near its start; further in, a level word is prose.
const LEVEL_WITHIN_BYTES: usize = 48;

const WORD: u8 = 1;
const LEVEL_UPPER: u8 = 2;
const LEVEL_LOWER: u8 = 4;

/// Byte classes for [`log_level`]'s scan: word bytes, and the first letters of level names.
static BYTE_CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        if byte.is_ascii_alphanumeric() || byte == b'_' {
            table[b] |= WORD;
        }
        if matches!(byte, b'F' | b'C' | b'E' | b'W' | b'I' | b'D' | b'T') {
            table[b] |= LEVEL_UPPER;
        }
        if matches!(byte, b'f' | b'c' | b'e' | b'w' | b'i' | b'd' | b't') {
            table[b] |= LEVEL_LOWER;
        }
        b += 1;
    }
    table
};

/// The log level a line states near its start: an uppercase level word (`ERROR`, `[WARN]`), a
/// lowercase one in brackets (`[error]`), or logfmt's `level=error`.
fn log_level(line: &str) -> Option<&'static str> {
    let bytes = prefix_bytes(line, LEVEL_WITHIN_BYTES).as_bytes();
    if !may_state_level(bytes) {
        return None;
    }
    let mut previous = 0u8;
    for (i, &b) in bytes.iter().enumerate() {
        let class = BYTE_CLASS.get(usize::from(b)).copied().unwrap_or(0);
        let word_start = previous & WORD == 0;
        previous = class;
        if !word_start || class & (LEVEL_UPPER | LEVEL_LOWER) == 0 {
            continue;
        }
        // A lowercase level only counts after `[`, `level=` or `level="`.
        let lowercase = class & LEVEL_LOWER != 0;
        let before = i.checked_sub(1).and_then(|p| bytes.get(p));
        if lowercase && !matches!(before, Some(b'[' | b'=' | b'"')) {
            continue;
        }
        if let Some(level) = level_at(bytes, i, lowercase) {
            return Some(level);
        }
    }
    None
}

/// Whether `bytes` has what every level [`log_level`] finds needs: four uppercase letters in a
/// row, a lowercase letter right after `[`, or logfmt's `level=`. Tested eight bytes at a time:
/// most lines have none of them, and are then done with in a few operations per word.
fn may_state_level(bytes: &[u8]) -> bool {
    let mut previous_upper = 0u64;
    let mut pos = 0;
    while pos < bytes.len() {
        let word = load_word(bytes, pos);
        let upper = upper_bytes(word);
        let run_of_four = upper
            & (upper << 8 | previous_upper >> 56)
            & (upper << 16 | previous_upper >> 48)
            & (upper << 24 | previous_upper >> 40);
        let brackets = bytes_equal(word, b'[');
        // Lane `i` of the word one byte on is the byte after lane `i`.
        let lowercase_after = if brackets == 0 {
            0
        } else {
            brackets & lower_bytes(load_word(bytes, pos + 1))
        };
        if run_of_four | lowercase_after != 0 {
            return true;
        }
        let mut equals = bytes_equal(word, b'=');
        while equals != 0 {
            let at = pos + (equals.trailing_zeros() / 8) as usize;
            if at >= 5 && bytes.get(at - 5..at) == Some(b"level".as_slice()) {
                return true;
            }
            equals &= equals - 1;
        }
        previous_upper = upper;
        pos += 8;
    }
    false
}

/// The level word starting at `i`, if it is one in a position that makes it a level.
fn level_at(bytes: &[u8], i: usize, lowercase: bool) -> Option<&'static str> {
    let logfmt = i >= 6 && bytes.get(i - 6..i) == Some(b"level=".as_slice());
    let quoted_logfmt = i >= 7 && bytes.get(i - 7..i) == Some(b"level=\"".as_slice());
    let bracketed = i >= 1 && bytes.get(i - 1) == Some(&b'[');
    if lowercase && !bracketed && !logfmt && !quoted_logfmt {
        return None;
    }
    let len = bytes.get(i..).map_or(0, |rest| {
        rest.iter().take_while(|c| c.is_ascii_alphabetic()).count()
    });
    if !(4..=8).contains(&len) {
        return None;
    }
    let word = bytes.get(i..i + len)?;
    let after = bytes.get(i + len).copied();
    let closed = !lowercase || logfmt || quoted_logfmt || after == Some(b']');
    let bounded = after.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == b'_'));
    let cased = lowercase || word.iter().all(u8::is_ascii_uppercase);
    if closed && bounded && cased {
        level_name(word)
    } else {
        None
    }
}

/// Substrings without which a line has no [`error_rank`]: the ranks are computed only for the
/// lines a whole-text literal search finds.
#[allow(clippy::expect_used)]
static ERROR_TRIGGER_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        "rror|ERR|FAIL|FATAL|fatal|CRITICAL|critical|panic|xception|Traceback|KeyboardInterrupt",
        "|E   |No such file|command not found|Permission denied|cannot access",
    ))
    .expect("error trigger pattern compiles")
});

fn annotate_error_ranks(body: &str, lines: &mut [Line<'_>]) {
    let mut cursor = 0;
    let mut from = 0;
    while let Some(found) = ERROR_TRIGGER_RE.find_at(body, from) {
        from = found.end();
        let Some(line) = line_at(lines, &mut cursor, found.start()) else {
            continue;
        };
        let end = line.start + line.text.len();
        if found.start() < end {
            line.trigger = true;
            line.rank = error_rank(line.trimmed_start);
            // One rank per line: continue after it.
            from = from.max(end);
        }
    }
}

/// The line containing byte `pos` (or the gutter before it), for positions visited in
/// ascending order: `cursor` carries the search forward.
fn line_at<'l, 'a>(
    lines: &'l mut [Line<'a>],
    cursor: &mut usize,
    pos: usize,
) -> Option<&'l mut Line<'a>> {
    while lines.get(*cursor + 1).is_some_and(|next| next.start <= pos) {
        *cursor += 1;
    }
    let line = lines.get_mut(*cursor)?;
    (line.start <= pos).then_some(line)
}

/// A timestamp near the start of a line (its first 48 bytes): `HH:MM:SS`, extended left over
/// an ISO date and right over a fraction and `Z`.
fn find_timestamp(line: &str) -> Option<&str> {
    let bytes = prefix_bytes(line, 48).as_bytes();
    // `HH:MM:SS` has two colons: most lines have fewer, counted eight bytes at a time.
    let mut colons = 0;
    let mut pos = 0;
    while colons < 2 && pos < bytes.len() {
        colons += bytes_equal(load_word(bytes, pos), b':').count_ones();
        pos += 8;
    }
    if colons < 2 {
        return None;
    }
    let digit = |k: usize| bytes.get(k).is_some_and(u8::is_ascii_digit);
    let colon = |k: usize| bytes.get(k) == Some(&b':');
    let mut from = 0;
    while let Some(found) = memchr::memchr(b':', bytes.get(from..)?) {
        let c = from + found;
        from = c + 1;
        let Some(h) = c.checked_sub(2) else {
            continue;
        };
        let is_time = digit(h)
            && digit(h + 1)
            && digit(c + 1)
            && digit(c + 2)
            && colon(c + 3)
            && digit(c + 4)
            && digit(c + 5)
            && !h.checked_sub(1).is_some_and(digit);
        if !is_time {
            continue;
        }
        let mut start = h;
        if let Some(date_start) = h.checked_sub(11) {
            let is_date = (0..10).all(|k| match k {
                4 | 7 => matches!(bytes.get(date_start + k), Some(b'-' | b'/')),
                _ => digit(date_start + k),
            });
            if is_date && matches!(bytes.get(h - 1), Some(b'T' | b' ')) {
                start = date_start;
            }
        }
        let mut end = h + 8;
        while let Some(&b) = bytes.get(end) {
            let fraction = (b == b'.' || b == b',') && digit(end + 1);
            if fraction || b.is_ascii_digit() || b == b'Z' {
                end += 1;
            } else {
                break;
            }
        }
        return line.get(start..end);
    }
    None
}

/// `path:line:` or `path/with/slash:` at the start of a grep hit; returns the path. grep's
/// own notes (`grep: x.pyc: binary file matches`, `Binary file x matches`) count as hits.
fn grep_hit(t: &str) -> Option<&str> {
    let head = prefix_bytes(t, LINE_HEAD_BYTES);
    if let Some(rest) = head.strip_prefix("grep: ") {
        return rest.split(':').next();
    }
    if let Some(rest) = head.strip_prefix("Binary file ") {
        return rest.strip_suffix(" matches");
    }
    // The path ends at the first `:` and holds no space: stop at whichever comes first (in
    // prose and code, a space within a few bytes).
    let colon = head.bytes().position(|b| b == b':' || b == b' ')?;
    if head.as_bytes().get(colon) != Some(&b':') {
        return None;
    }
    let path = head.get(..colon)?;
    let rest = head.get(colon + 1..)?;
    if path.is_empty() || !path.contains('.') {
        return None;
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let has_line = digits > 0 && rest.as_bytes().get(digits) == Some(&b':');
    (has_line || path.contains('/')).then_some(path)
}

/// `drwxr-xr-x  5 user staff 160 Jan  1 10:00 name`.
fn is_ls_long(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() > 11
        && matches!(
            b.first(),
            Some(b'd' | b'-' | b'l' | b'c' | b'b' | b'p' | b's')
        )
        && b.get(1..10).is_some_and(|perm| {
            perm.iter()
                .all(|c| matches!(c, b'r' | b'w' | b'x' | b'-' | b's' | b'S' | b't' | b'T'))
        })
}

/// One file name per line (`ls`, `find`): short, no spaces, nothing code-like.
fn is_bare_name(t: &str) -> bool {
    t.len() <= 120
        && t.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/'))
        && !t.bytes().any(|b| {
            matches!(
                b,
                b' ' | b'(' | b')' | b'{' | b'}' | b';' | b'=' | b'"' | b'<' | b'>' | b',' | b':'
            )
        })
}

// ---------------------------------------------------------------------------------------------
// Detection.

enum Detected<'a> {
    Json(JsonShape),
    Table(TableShape),
    Log,
    Markdown(Scan<'a>),
    Diff(Scan<'a>),
    Code(Scan<'a>),
    Plain(Scan<'a>),
}

impl Detected<'_> {
    fn kind(&self) -> ContentKind {
        match self {
            Detected::Json(_) => ContentKind::Json,
            Detected::Table(_) => ContentKind::Table,
            Detected::Log => ContentKind::Log,
            Detected::Markdown(_) => ContentKind::Markdown,
            Detected::Diff(_) | Detected::Code(_) => ContentKind::Code,
            Detected::Plain(_) => ContentKind::PlainText,
        }
    }
}

fn detect<'a>(input: &Input<'a>) -> Detected<'a> {
    if let Some(json) = json_shape(input) {
        return Detected::Json(json);
    }
    let scan = Scan::over(input.sample(), ScanFor::Detection);
    let n = scan.nonempty;
    if n == 0 {
        return Detected::Plain(scan);
    }
    if scan.diff_headers >= 1 && scan.hunks >= 1 {
        return Detected::Diff(scan);
    }
    if scan.is_log(n) {
        return Detected::Log;
    }
    if let Some(table) = table_shape(input) {
        return Detected::Table(table);
    }
    let codeish = scan.code_lines * 10 >= scan.nonempty_outside_fences.max(1) * 3;
    if !scan.headings.is_empty() && !codeish {
        // Links matter only here (and in the Markdown summary): counted only now.
        let mut scan = scan;
        scan.links = links_over(input.sample());
        if scan.list_items + scan.fences + scan.links >= 1 {
            return Detected::Markdown(scan);
        }
        return not_markdown(scan, codeish, n);
    }
    not_markdown(scan, codeish, n)
}

/// The rest of [`detect`], once the text is known not to be Markdown.
fn not_markdown(scan: Scan<'_>, codeish: bool, n: usize) -> Detected<'_> {
    // `hits * 2 < n`: fewer than half the lines.
    let half = n.div_ceil(2);
    if codeish && !scan.grep_lines_reach(half) && !scan.ls_long_lines_reach(half) {
        return Detected::Code(scan);
    }
    Detected::Plain(scan)
}

// ---------------------------------------------------------------------------------------------
// What every kind shows: a head, a labelled list of items, details.

struct Shape {
    head: String,
    /// Label of the item list (`keys:`, `fns:`); may be empty.
    label: &'static str,
    items: Vec<String>,
    /// How many items rank above the identifiers.
    primary: usize,
    details: Vec<String>,
}

impl Shape {
    fn new(head: String) -> Shape {
        Shape {
            head,
            label: "",
            items: Vec::new(),
            primary: 0,
            details: Vec::new(),
        }
    }

    fn items(mut self, label: &'static str, items: Vec<String>, primary: usize) -> Shape {
        self.label = label;
        self.items = items;
        self.primary = primary;
        self
    }

    fn details(mut self, details: impl IntoIterator<Item = String>) -> Shape {
        self.details.extend(details);
        self
    }
}

fn shape_of(detected: &Detected<'_>, input: &Input<'_>) -> Shape {
    // Markdown and diff summaries state counts the sample cannot give.
    let full = |purpose| {
        input
            .is_sampled()
            .then(|| Scan::over(input.lines.iter(), purpose))
    };
    match detected {
        Detected::Json(json) => json_summary(json),
        Detected::Table(table) => table_summary(table),
        Detected::Log => log_summary(input),
        Detected::Markdown(scan) => {
            markdown_summary(input, full(ScanFor::Markdown).as_ref().unwrap_or(scan))
        }
        Detected::Diff(scan) => diff_summary(input, full(ScanFor::Diff).as_ref().unwrap_or(scan)),
        Detected::Code(scan) => code_summary(input, scan),
        Detected::Plain(scan) => plain_summary(input, scan),
    }
}

/// `1 line`, `2 lines`.
fn count_of(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn lines_word(n: usize) -> String {
    count_of(n, "line")
}

/// Pushes `item` unless present or the list is full.
fn push_unique(list: &mut Vec<String>, item: String) {
    if list.len() < MAX_ITEMS && !item.is_empty() && !list.contains(&item) {
        list.push(item);
    }
}

// ---------------------------------------------------------------------------------------------
// JSON.
//
// The summary needs the shape of a document, not its values: a serde visitor reads the text
// once, renders the few fields it shows and skips everything else without allocating (serde's
// `IgnoredAny`), several times faster than building a `serde_json::Value`. serde_json's
// recursion limit bounds nesting, so hostile input cannot exhaust the stack.

/// How many array elements contribute their keys to an array summary.
const JSON_KEY_ELEMENTS: usize = 20;

enum JsonShape {
    Object {
        len: usize,
        /// `key=value`, `key[n]`, `key{a,b,…}` for the first fields.
        fields: Vec<String>,
    },
    Array {
        len: usize,
        types: BTreeMap<&'static str, usize>,
        keys: Vec<String>,
        /// The first element's fields, when it is an object.
        first: Option<Vec<String>>,
    },
    Scalar(&'static str),
    Lines {
        records: usize,
        keys: Vec<String>,
    },
}

fn json_shape(input: &Input<'_>) -> Option<JsonShape> {
    let trimmed = input.body.trim();
    let first = *trimmed.as_bytes().first()?;
    let last = *trimmed.as_bytes().last()?;
    if matches!((first, last), (b'{', b'}') | (b'[', b']')) {
        let mut deserializer = serde_json::Deserializer::from_str(trimmed);
        if let Ok(shape) = TopSeed.deserialize(&mut deserializer) {
            if deserializer.end().is_ok() {
                return Some(shape);
            }
        }
    }
    if first != b'{' {
        return None;
    }
    // JSON Lines: every non-empty line is an object (the first 50 are parsed).
    let mut records = 0;
    let mut keys: Vec<String> = Vec::new();
    for line in input.nonempty() {
        if records < 50 {
            let mut deserializer = serde_json::Deserializer::from_str(line);
            let element = ElementSeed {
                keys: true,
                fields: false,
            }
            .deserialize(&mut deserializer)
            .ok()?;
            deserializer.end().ok()?;
            if element.kind != "object" {
                return None;
            }
            for key in element.keys {
                push_unique(&mut keys, key);
            }
        } else if !line.trim_start().starts_with('{') {
            return None;
        }
        records += 1;
    }
    (records >= 2).then_some(JsonShape::Lines { records, keys })
}

/// The whole document.
struct TopSeed;

impl<'de> DeserializeSeed<'de> for TopSeed {
    type Value = JsonShape;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<JsonShape, D::Error> {
        deserializer.deserialize_any(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = JsonShape;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonShape, A::Error> {
        let (len, fields) = read_fields(&mut map, true)?;
        Ok(JsonShape::Object { len, fields })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonShape, A::Error> {
        let mut len = 0;
        let mut types: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut keys: Vec<String> = Vec::new();
        let mut first = None;
        while let Some(element) = seq.next_element_seed(ElementSeed {
            keys: len < JSON_KEY_ELEMENTS,
            fields: len == 0,
        })? {
            *types.entry(element.kind).or_default() += 1;
            for key in element.keys {
                push_unique(&mut keys, key);
            }
            if len == 0 {
                first = element.fields;
            }
            len += 1;
        }
        Ok(JsonShape::Array {
            len,
            types,
            keys,
            first,
        })
    }

    fn visit_bool<E>(self, _: bool) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("bool"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("number"))
    }
    fn visit_str<E>(self, _: &str) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("string"))
    }
    fn visit_unit<E>(self) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("null"))
    }
}

/// Reads an object's entries: its size, and (when `render`) the first fields rendered.
fn read_fields<'de, A: MapAccess<'de>>(
    map: &mut A,
    render: bool,
) -> Result<(usize, Vec<String>), A::Error> {
    let mut len = 0;
    let mut fields = Vec::new();
    while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
        if render && fields.len() < MAX_ITEMS {
            let value = map.next_value_seed(FieldSeed)?;
            fields.push(format!("{}{value}", clean_inline(&key, 40)));
        } else {
            map.next_value::<IgnoredAny>()?;
        }
        len += 1;
    }
    Ok((len, fields))
}

/// One array element: its type, and on request its keys and rendered fields.
struct ElementSeed {
    keys: bool,
    fields: bool,
}

struct Element {
    kind: &'static str,
    keys: Vec<String>,
    fields: Option<Vec<String>>,
}

impl Element {
    fn of(kind: &'static str) -> Element {
        Element {
            kind,
            keys: Vec::new(),
            fields: None,
        }
    }
}

impl<'de> DeserializeSeed<'de> for ElementSeed {
    type Value = Element;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Element, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ElementSeed {
    type Value = Element;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Element, A::Error> {
        let mut keys = Vec::new();
        let mut fields = Vec::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if self.fields && fields.len() < MAX_ITEMS {
                let value = map.next_value_seed(FieldSeed)?;
                fields.push(format!("{}{value}", clean_inline(&key, 40)));
            } else {
                map.next_value::<IgnoredAny>()?;
            }
            if self.keys && keys.len() < MAX_ITEMS {
                keys.push(clean_inline(&key, 40));
            }
        }
        Ok(Element {
            kind: "object",
            keys,
            fields: self.fields.then_some(fields),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Element, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Element::of("array"))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Element, E> {
        Ok(Element::of("bool"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Element, E> {
        Ok(Element::of("number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Element, E> {
        Ok(Element::of("number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Element, E> {
        Ok(Element::of("number"))
    }
    fn visit_str<E>(self, _: &str) -> Result<Element, E> {
        Ok(Element::of("string"))
    }
    fn visit_unit<E>(self) -> Result<Element, E> {
        Ok(Element::of("null"))
    }
}

/// A field's value as shown after its key: `="text"`, `=404`, `[n]`, `{a,b,c,…}`.
struct FieldSeed;

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed {
    type Value = String;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
        let mut keys: Vec<String> = Vec::new();
        let mut len = 0;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if keys.len() < 3 {
                keys.push(clean_inline(&key, 20));
            }
            map.next_value::<IgnoredAny>()?;
            len += 1;
        }
        let more = if len > 3 { ",…" } else { "" };
        Ok(format!("{{{}{more}}}", keys.join(",")))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<String, A::Error> {
        let mut len = 0;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            len += 1;
        }
        Ok(format!("[{len}]"))
    }

    fn visit_bool<E>(self, v: bool) -> Result<String, E> {
        Ok(format!("={v}"))
    }
    fn visit_i64<E>(self, v: i64) -> Result<String, E> {
        Ok(format!("={v}"))
    }
    fn visit_u64<E>(self, v: u64) -> Result<String, E> {
        Ok(format!("={v}"))
    }
    fn visit_f64<E>(self, v: f64) -> Result<String, E> {
        // serde_json's own spelling (`1.0`, not `1`).
        let number =
            serde_json::Number::from_f64(v).map_or_else(|| v.to_string(), |n| n.to_string());
        Ok(format!("={number}"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(format!("=\"{}\"", clean_inline(v, 80)))
    }
    fn visit_unit<E>(self) -> Result<String, E> {
        Ok("=null".to_owned())
    }
}

fn json_summary(json: &JsonShape) -> Shape {
    match json {
        JsonShape::Array { len: 0, .. } => Shape::new("json array, empty".to_owned()),
        JsonShape::Array {
            len,
            types,
            keys,
            first,
        } => {
            let mut by_count: Vec<(&str, usize)> = types.iter().map(|(t, n)| (*t, *n)).collect();
            by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let dist: Vec<String> = by_count.iter().map(|(t, n)| format!("{n} {t}")).collect();
            let first = first
                .as_ref()
                .filter(|fields| !fields.is_empty())
                .map(|fields| format!("first: {}", fields.join(", ")));
            Shape::new(format!("json array of {len}: {}", dist.join(", ")))
                .items("keys:", keys.clone(), 6)
                .details(first)
        }
        JsonShape::Object { len, fields } => Shape::new(format!(
            "json object, {}",
            count_of(*len, "key")
        ))
        .items("", fields.clone(), 5),
        JsonShape::Scalar(kind) => Shape::new(format!("json {kind}")),
        JsonShape::Lines { records, keys } => {
            Shape::new(format!("jsonl, {records} records")).items("keys:", keys.clone(), 6)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tables.

struct TableShape {
    separator: &'static str,
    rows: usize,
    header: Vec<String>,
    first_row: Option<String>,
}

fn split_row<'a>(line: &'a str, separator: &str) -> Vec<&'a str> {
    match separator {
        "|" => {
            let t = line.trim();
            let t = t.strip_prefix('|').unwrap_or(t);
            let t = t.strip_suffix('|').unwrap_or(t);
            t.split('|').map(str::trim).collect()
        }
        "  " => line
            .split("  ")
            .map(str::trim)
            .filter(|cell| !cell.is_empty())
            .collect(),
        "," => split_csv(line),
        other => line.split(other).map(str::trim).collect(),
    }
}

/// `split_row(line, separator).len()`, without collecting the cells.
fn count_cells(line: &str, separator: &str) -> usize {
    match separator {
        "|" => {
            let t = line.trim();
            let t = t.strip_prefix('|').unwrap_or(t);
            let t = t.strip_suffix('|').unwrap_or(t);
            t.split('|').count()
        }
        "  " => line
            .split("  ")
            .filter(|cell| !cell.trim().is_empty())
            .count(),
        "," => {
            let mut cells = 1;
            let mut quoted = false;
            for b in line.bytes() {
                match b {
                    b'"' => quoted = !quoted,
                    b',' if !quoted => cells += 1,
                    _ => {}
                }
            }
            cells
        }
        other => line.split(other).count(),
    }
}

/// Splits on commas outside double quotes.
fn split_csv(line: &str) -> Vec<&str> {
    let mut cells = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, b) in line.bytes().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b',' if !quoted => {
                cells.push(line.get(start..i).unwrap_or("").trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    cells.push(line.get(start..).unwrap_or("").trim());
    cells
}

/// A separator-ruled row (`|---|:--:|`, `+----+`).
fn is_rule(row: &str) -> bool {
    row.bytes()
        .all(|b| matches!(b, b'|' | b'-' | b':' | b' ' | b'+' | b'='))
}

fn table_shape(input: &Input<'_>) -> Option<TableShape> {
    let mut rows = input.nonempty();
    let header_line = rows.next()?;
    // Column agreement is checked on a sample; a table's regularity shows in its first rows.
    let sample: Vec<&str> = rows.take(200).collect();
    if sample.len() < 2 || header_line.len() > 4 * LINE_HEAD_BYTES {
        return None;
    }
    for separator in ["\t", "|", ",", ";", "  "] {
        if separator == "  " && header_line.starts_with(' ') {
            continue;
        }
        let header = split_row(header_line, separator);
        let min_cols = if separator == "  " { 3 } else { 2 };
        if header.len() < min_cols || header.iter().any(|c| c.is_empty()) {
            continue;
        }
        let agreeing = sample
            .iter()
            .filter(|row| count_cells(row, separator) == header.len())
            .count();
        if agreeing * 10 < sample.len() * 9 {
            continue;
        }
        let data_rows = input.nonempty().skip(1).filter(|r| !is_rule(r));
        let first_row = input.nonempty().skip(1).find(|r| !is_rule(r)).map(|row| {
            split_row(row, separator)
                .iter()
                .map(|c| clean_inline(c, 30))
                .collect::<Vec<_>>()
                .join(" | ")
        });
        return Some(TableShape {
            separator,
            rows: data_rows.count(),
            header: header.iter().map(|c| clean_inline(c, 40)).collect(),
            first_row,
        });
    }
    None
}

fn table_summary(table: &TableShape) -> Shape {
    let format = match table.separator {
        "\t" => "tsv",
        "|" => "pipe",
        "," => "csv",
        ";" => "semicolon",
        _ => "columns",
    };
    let head = format!(
        "table ({format}), {} rows x {} cols",
        table.rows,
        table.header.len()
    );
    Shape::new(head)
        .items("cols:", table.header.clone(), 8)
        .details(table.first_row.iter().map(|row| format!("row 1: {row}")))
}

// ---------------------------------------------------------------------------------------------
// Logs, Markdown, diffs, code.

fn log_summary(input: &Input<'_>) -> Shape {
    let mut level_counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    let levels: Vec<Option<&'static str>> = input.texts().map(log_level).collect();
    for level in levels.iter().flatten() {
        *level_counts.entry(level).or_default() += 1;
    }
    let counts: Vec<String> = LEVEL_ORDER
        .iter()
        .filter_map(|level| level_counts.get(level).map(|n| format!("{level} {n}")))
        .collect();
    let mut head = format!(
        "log, {}: {}",
        lines_word(input.total_lines),
        counts.join(", ")
    );
    let first = input.texts().take(200).find_map(find_timestamp);
    let last = input.texts().rev().take(200).find_map(find_timestamp);
    if let (Some(first), Some(last)) = (first, last) {
        if first == last {
            head.push_str(&format!("; at {first}"));
        } else {
            head.push_str(&format!("; {first} to {last}"));
        }
    }
    // Error types: exception-like words on error lines, most frequent first.
    let mut types: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (index, (line, level)) in input.lines.iter().zip(&levels).enumerate() {
        if !matches!(level, Some("ERROR" | "FATAL")) {
            continue;
        }
        for name in exception_names(prefix_bytes(line.text, 4 * LINE_HEAD_BYTES)) {
            types.entry(name).or_insert((0, index)).0 += 1;
        }
    }
    let mut types: Vec<(&str, (usize, usize))> = types.into_iter().collect();
    types.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)));
    let items = types
        .into_iter()
        .take(MAX_ITEMS)
        .map(|(name, (n, _))| {
            if n > 1 {
                format!("{name} x{n}")
            } else {
                name.to_owned()
            }
        })
        .collect();
    Shape::new(head).items("error types:", items, 2)
}

fn markdown_summary(input: &Input<'_>, scan: &Scan<'_>) -> Shape {
    let mut head = format!("markdown, {}", lines_word(input.total_lines));
    let blocks = scan.fences / 2;
    if blocks > 0 {
        head.push_str(&format!(", {blocks} code blocks"));
        if !scan.fence_langs.is_empty() {
            head.push_str(&format!(" ({})", scan.fence_langs.join(", ")));
        }
    }
    if scan.list_items > 0 {
        head.push_str(&format!(", {} list items", scan.list_items));
    }
    if scan.links > 0 {
        head.push_str(&format!(", {} links", scan.links));
    }
    // The `#` marks cost characters and say little once the list is flat.
    let headings = scan
        .headings
        .iter()
        .take(MAX_ITEMS)
        .map(|h| clean_inline(h.trim_start_matches('#').trim_start(), 60))
        .collect();
    Shape::new(head).items("headings:", headings, 3)
}

fn diff_summary(input: &Input<'_>, scan: &Scan<'_>) -> Shape {
    let mut files: Vec<String> = Vec::new();
    let mut changes: Vec<String> = Vec::new();
    for line in input.texts() {
        if let Some(rest) = line.strip_prefix("+++ ") {
            let path = rest.split('\t').next().unwrap_or(rest).trim();
            if path != "/dev/null" {
                push_unique(
                    &mut files,
                    clean_inline(path.strip_prefix("b/").unwrap_or(path), 160),
                );
            }
        } else if let Some(rest) = line.strip_prefix("--- ") {
            // A deleted file has only a `---` side.
            let path = rest.split('\t').next().unwrap_or(rest).trim();
            if path != "/dev/null" && !line.starts_with("--- a/") {
                push_unique(&mut files, clean_inline(path, 160));
            }
        } else if (line.starts_with('+') || line.starts_with('-'))
            && changes.len() < 4
            && line.get(1..).is_some_and(|l| l.trim().len() > 2)
        {
            changes.push(clean_inline(line, 80));
        }
    }
    let head = format!(
        "diff, {} files, {} hunks, +{} -{}",
        files.len(),
        scan.hunks,
        scan.added,
        scan.removed
    );
    let primary = files.len().min(6);
    let changes = (!changes.is_empty()).then(|| format!("changes: {}", changes.join(" | ")));
    Shape::new(head)
        .items("files:", files, primary)
        .details(changes)
}

/// A function or type a line defines: `pub async fn name`, `def name(`, `class Name:`,
/// `func (r *T) Name(`, `impl<T> Name`, `defmodule A.B do`.
enum Definition<'a> {
    Function(&'a str),
    Type(&'a str),
}

/// Words that may precede a definition keyword (a `match`, which compiles to a few
/// comparisons).
fn is_modifier(word: &str) -> bool {
    matches!(
        word,
        "pub"
            | "pub(crate)"
            | "pub(super)"
            | "export"
            | "default"
            | "async"
            | "static"
            | "abstract"
            | "public"
            | "private"
            | "protected"
            | "final"
            | "unsafe"
            | "extern"
            | "inline"
            | "virtual"
            | "override"
    )
}

/// `text.split_whitespace()`, classifying ASCII bytes without decoding them.
fn whitespace_words(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let word = trim_start_fast(rest);
        let bytes = word.as_bytes();
        let mut end = 0;
        while let Some(&b) = bytes.get(end) {
            if b < 0x80 {
                if is_ascii_space(b) {
                    break;
                }
                end += 1;
            } else {
                let c = word.get(end..).and_then(|tail| tail.chars().next())?;
                if c.is_whitespace() {
                    break;
                }
                end += c.len_utf8();
            }
        }
        let (word, after) = word.split_at_checked(end)?;
        rest = after;
        (!word.is_empty()).then_some(word)
    })
}

fn definition(line: &str) -> Option<Definition<'_>> {
    // Every modifier and definition keyword starts with a lowercase ASCII letter: most lines
    // are rejected on their first byte.
    if !trim_start_fast(line)
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_lowercase)
    {
        return None;
    }
    let mut words = whitespace_words(prefix_bytes(line, LINE_HEAD_BYTES));
    let mut keyword = words.next()?;
    while is_modifier(keyword) {
        keyword = words.next()?;
    }
    let is_function = matches!(
        keyword,
        "fn" | "def" | "defp" | "func" | "function" | "defmacro" | "function*"
    );
    let is_type = matches!(
        keyword,
        "class" | "struct" | "enum" | "trait" | "interface" | "defmodule" | "impl" | "type"
    ) || keyword.starts_with("impl<");
    if !is_function && !is_type {
        return None;
    }
    let mut name = words.next()?;
    if keyword == "func" && name.starts_with('(') {
        // A Go method: skip the receiver.
        name = words
            .find(|w| w.ends_with(')'))
            .and_then(|_| words.next())?;
    }
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '?' | '!' | ':')))
        .unwrap_or(name.len());
    let name = name.get(..end)?.trim_end_matches(':');
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    Some(if is_function {
        Definition::Function(name)
    } else {
        Definition::Type(name)
    })
}

fn code_summary(input: &Input<'_>, scan: &Scan<'_>) -> Shape {
    // Names are unique, so the order is total and the winner does not depend on the order of
    // the list.
    let language = LANGUAGES
        .iter()
        .zip(&scan.lang_votes)
        .filter(|(lang, votes)| **lang != "code" && **votes > 0)
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(lang, _)| *lang);
    let mut functions: Vec<String> = Vec::new();
    let mut types: Vec<String> = Vec::new();
    let mut imports: Vec<String> = Vec::new();
    for line in input.sample() {
        let t = line.trimmed_start;
        match definition(t) {
            Some(Definition::Function(name)) => push_unique(&mut functions, name.to_owned()),
            Some(Definition::Type(name)) => push_unique(&mut types, name.to_owned()),
            None => {
                let is_import = match t.as_bytes().first() {
                    Some(b'u') => t.starts_with("use "),
                    Some(b'i') => t.starts_with("import "),
                    Some(b'f') => t.starts_with("from "),
                    Some(b'#') => t.starts_with("#include "),
                    Some(b'r') => t.starts_with("require "),
                    Some(b'a') => t.starts_with("alias "),
                    Some(b'c') => t.starts_with("const ") && t.contains("require("),
                    Some(_) | None => false,
                };
                if is_import && imports.len() < 12 {
                    push_unique(&mut imports, clean_inline(t.trim_end_matches(';'), 60));
                }
            }
        }
        if functions.len() >= MAX_ITEMS && types.len() >= MAX_ITEMS && imports.len() >= 12 {
            break;
        }
    }
    let mut head = match language {
        Some(lang) => format!("{lang} code, {}", lines_word(input.total_lines)),
        None => format!("code, {}", lines_word(input.total_lines)),
    };
    if !types.is_empty() {
        let shown: Vec<&str> = types.iter().take(2).map(String::as_str).collect();
        head.push_str(&format!("; types: {}", shown.join(", ")));
    }
    let imports = (!imports.is_empty()).then(|| format!("imports: {}", imports.join(", ")));
    Shape::new(head)
        .items("fns:", functions, 6)
        .details(imports)
}

// ---------------------------------------------------------------------------------------------
// Plain text: grep hits, listings, anything else.

fn plain_summary(input: &Input<'_>, scan: &Scan<'_>) -> Shape {
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

// ---------------------------------------------------------------------------------------------
// Facts every kind keeps: exit code, status, first error, failing tests, identifiers.

#[allow(clippy::expect_used)]
static EXIT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)(?:exit(?:ed with)?[ _](?:code|status)|return ?code|process exited with code)",
        r"\s*[:=]?\s*(-?[0-9]{1,4})\b",
    ))
    .expect("exit pattern compiles")
});

struct Facts {
    exit_code: Option<String>,
    status: Option<String>,
    error_line: Option<String>,
    failed_tests: Vec<String>,
    /// Identifiers, best first (display strings).
    identifiers: Vec<String>,
    key_lines: Vec<String>,
}

impl Facts {
    fn new(input: &Input<'_>, kind: ContentKind) -> Facts {
        let exit_code = input.wrapper_exit.map(str::to_owned).or_else(|| {
            let head = prefix_bytes(input.body, 2048);
            let tail = suffix_bytes(input.body, 2048);
            EXIT_RE
                .captures(head)
                .or_else(|| EXIT_RE.captures(tail))
                .and_then(|c| c.get(1))
                .map(|m| m.as_str().to_owned())
        });
        let error_index = first_error_line(&input.lines, kind);
        let error_line = error_index
            .and_then(|i| input.lines.get(i))
            .map(|line| clean_inline(error_display(line.text, kind), 400));
        let status = input
            .texts()
            .rev()
            .take(40)
            .find(|l| is_status_line(l))
            .map(|l| clean_inline(l.trim_matches(|c: char| c == '=' || c.is_whitespace()), 200));
        Facts {
            exit_code,
            status,
            error_line,
            failed_tests: failed_tests(input),
            identifiers: rank_identifiers(input, error_index),
            key_lines: key_lines(input, error_index, kind),
        }
    }
}

/// The part of an error line worth showing: pytest's `E   ` marker and a log line's leading
/// timestamp (the head shows the time range) go.
fn error_display(line: &str, kind: ContentKind) -> &str {
    let t = line.trim_start();
    let t = t.strip_prefix("E   ").unwrap_or(t);
    match find_timestamp(t) {
        Some(ts) if kind == ContentKind::Log && t.starts_with(ts) => t
            .get(ts.len()..)
            .unwrap_or(t)
            .trim_start_matches([' ', ']', '|', '-']),
        Some(_) | None => t,
    }
}

/// The exception names a text mentions (`ConnectionError`, `NullPointerException`), found from
/// their `Error`/`Exception` endings.
fn exception_names(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("Error")
        .map(|(i, m)| i + m.len())
        .chain(text.match_indices("Exception").map(|(i, m)| i + m.len()))
        .filter_map(move |end| {
            let word_end = text.get(end..)?.bytes().next();
            if word_end.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return None;
            }
            let before = text.get(..end)?;
            let start = before
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = before.get(start..)?;
            is_exception_name(name).then_some(name)
        })
}

/// `ValueError`, `django.core.exceptions.FieldError`'s last part, `NullPointerException`.
fn is_exception_name(word: &str) -> bool {
    word.len() > 5
        && (word.ends_with("Error") || word.ends_with("Exception"))
        && word.bytes().next().is_some_and(|b| b.is_ascii_uppercase())
        && word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// What follows `: ` in a line that states an error (`foo.c:3:1: error: …`,
/// `ls: x: No such file or directory`).
const STRONG_AFTER_COLON: [&str; 3] = ["error:", "error TS", "fatal error:"];
const WEAK_AFTER_COLON: [&str; 4] = [
    "No such file or directory",
    "command not found",
    "Permission denied",
    "cannot access",
];

/// How strongly a line states an error: 0 for an error statement (`error[E…]:`, `ValueError:`,
/// `panicked at`), 1 for a traceback header, 2 for weaker signs (`FAILED`, an `ERROR` level,
/// `No such file or directory`); `None` for other lines. Runs on every line the trigger search
/// finds (in a test run, most of them), so prefixes are only compared when the first byte
/// allows them.
fn error_rank(line: &str) -> Option<u8> {
    let t = trim_start_fast(line);
    let head = prefix_bytes(t, LINE_HEAD_BYTES);
    let first_byte = *t.as_bytes().first()?;
    // unittest's `ERROR: test_x (module.Class)` heads a failure; the exception line under it is
    // the statement.
    let test_header = t.starts_with("ERROR: test") || t.starts_with("FAIL: test");
    let strong = match first_byte {
        b'e' => t.starts_with("error[") || t.starts_with("error:"),
        b'E' => {
            t.starts_with("Error:")
                || (t.starts_with("ERROR:") && !test_header)
                || t.starts_with("E   ")
        }
        b'F' => t.starts_with("FATAL"),
        b'f' => t.starts_with("fatal:"),
        b'p' => t.starts_with("panic:"),
        b'n' => t.starts_with("npm ERR!"),
        b't' => t.starts_with("thread '") && head.contains("panicked at"),
        _ => false,
    } || (first_byte.is_ascii_alphabetic() && starts_with_exception(head));
    if strong {
        return Some(0);
    }
    if first_byte == b'T' && t.starts_with("Traceback (most recent call last)") {
        return Some(1);
    }
    let mut weak = test_header
        || match first_byte {
            b'F' => t.starts_with("FAILED") || t.starts_with("FAIL:"),
            b'-' => t.starts_with("--- FAIL"),
            b'E' => t.starts_with("ERROR "),
            _ => false,
        };
    // One pass over the `: ` separators finds both compiler-style and shell-style errors.
    let bytes = head.as_bytes();
    let mut from = 0;
    while let Some(found) = head.get(from..).and_then(|rest| rest.find(':')) {
        let colon = from + found;
        from = colon + 1;
        if bytes.get(colon + 1) != Some(&b' ') {
            continue;
        }
        let after = head.get(colon + 2..).unwrap_or("");
        if STRONG_AFTER_COLON.iter().any(|p| after.starts_with(p)) {
            return Some(0);
        }
        weak |= WEAK_AFTER_COLON.iter().any(|p| after.starts_with(p));
    }
    if weak || matches!(log_level(t), Some("ERROR" | "FATAL")) {
        return Some(2);
    }
    None
}

/// `ValueError: …`, `django.core.exceptions.FieldError: …`, a bare `KeyboardInterrupt`.
fn starts_with_exception(head: &str) -> bool {
    let word = first_word(head);
    let rest = head.get(word.len()..).unwrap_or("");
    if !(rest.is_empty() || rest.starts_with(':')) {
        return false;
    }
    let name = word.rsplit('.').next().unwrap_or(word);
    is_exception_name(name) || name == "KeyboardInterrupt"
}

/// The first error line of the strongest rank present. Code, Markdown and JSON only count error
/// statements: source text mentions errors all the time.
fn first_error_line(lines: &[Line<'_>], kind: ContentKind) -> Option<usize> {
    let allowed = |rank: u8| match kind {
        ContentKind::Code | ContentKind::Markdown | ContentKind::Json => rank == 0,
        ContentKind::Table | ContentKind::Log | ContentKind::PlainText => true,
    };
    let mut best: Option<(u8, usize)> = None;
    for (index, line) in lines.iter().enumerate() {
        let Some(rank) = line.rank.filter(|r| allowed(*r)) else {
            continue;
        };
        if best.is_none_or(|(r, _)| rank < r) {
            best = Some((rank, index));
            if rank == 0 {
                break;
            }
        }
    }
    best.map(|(_, index)| index)
}

/// Error lines after the first: at most three, each once (traceback headers are not news).
fn key_lines(input: &Input<'_>, error_index: Option<usize>, kind: ContentKind) -> Vec<String> {
    let shown = error_index
        .and_then(|i| input.lines.get(i))
        .map(|line| clean_inline(error_display(line.text, kind), 200));
    let mut out: Vec<String> = Vec::new();
    for line in &input.lines {
        if !matches!(line.rank, Some(0 | 2)) {
            continue;
        }
        let display = clean_inline(error_display(line.text, kind), 200);
        if shown.as_ref() != Some(&display) {
            push_unique(&mut out, display);
        }
        if out.len() == 3 {
            break;
        }
    }
    out
}

/// Test and build summary lines: `2 failed, 10 passed in 0.3s`, `test result: FAILED. …`.
fn is_status_line(line: &str) -> bool {
    let t = trim_fast(line);
    if t.is_empty() || t.len() > 300 {
        return false;
    }
    let known = [
        "test result:",
        "Tests:",
        "BUILD ",
        "OK (",
        "FAILED (",
        "Finished ",
    ]
    .iter()
    .any(|p| t.starts_with(p))
        || (t.starts_with("Ran ") && contains_short(t, " test"))
        || t == "OK";
    if known {
        return true;
    }
    // `<number> passed`, `<number> failed`, …: a digit, a space, a counted word.
    let bytes = t.as_bytes();
    // Spaces are found with memchr; the byte before each must be a digit.
    let counted = memchr::memchr_iter(b' ', bytes).any(|space| {
        space
            .checked_sub(1)
            .and_then(|i| bytes.get(i))
            .is_some_and(u8::is_ascii_digit)
            && t.get(space + 1..).is_some_and(|rest| {
                [
                    "passed",
                    "failed",
                    "error",
                    "skipped",
                    "xfailed",
                    "deselected",
                ]
                .iter()
                .any(|word| rest.starts_with(word))
            })
    });
    counted && (contains_short(t, " in ") || t.starts_with('=') || contains_short(t, ", "))
}

/// Names of failing tests: pytest, cargo, go, unittest/Django.
fn failed_tests(input: &Input<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // Every test-failure line holds `FAIL` or `ERR`, so only trigger lines can be one.
    for line in input.lines.iter().filter(|line| line.trigger) {
        let t = trim_end_fast(line.trimmed_start);
        let name = if let Some(rest) = t.strip_prefix("FAILED ") {
            // pytest short summary: `FAILED path::test - message`.
            rest.split(" - ")
                .next()
                .map(str::trim)
                .filter(|id| id.contains("::") || id.contains('/'))
        } else if let Some(rest) = t.strip_prefix("--- FAIL: ") {
            rest.split(' ').next()
        } else if let Some(rest) = t
            .strip_prefix("FAIL: ")
            .or_else(|| t.strip_prefix("ERROR: "))
        {
            // unittest: `FAIL: test_x (module.Class)`.
            (rest.contains(" (") && rest.ends_with(')')).then_some(rest)
        } else if let Some(rest) = t.strip_prefix("test ") {
            rest.strip_suffix(" ... FAILED")
        } else {
            // pytest -v: `tests/test_x.py::test_a FAILED`.
            t.strip_suffix(" FAILED")
                .and_then(|id| id.split(' ').next())
                .filter(|id| id.contains("::"))
        };
        if let Some(name) = name {
            push_unique(&mut out, clean_inline(name, 160));
            if out.len() >= 20 {
                break;
            }
        }
    }
    out
}

/// Lines that point at a place: traceback frames, compiler locations, stack frames, pytest's
/// `path:line: Error` lines.
fn is_pointer_line(t: &str) -> bool {
    let marked = match t.as_bytes().first() {
        Some(b'F') => t.starts_with("File \"") || t.starts_with("FAILED"),
        Some(b'-') => t.starts_with("--> "),
        Some(b'a') => t.starts_with("at "),
        Some(b't') => t.starts_with("thread '") && t.contains("panicked at"),
        Some(_) | None => false,
    };
    if marked {
        return true;
    }
    // `path:12: SomeError` — the location is the first word.
    let location = first_word_until_space(t);
    let Some((path, line)) = location.strip_suffix(':').and_then(|l| l.rsplit_once(':')) else {
        return false;
    };
    if path.is_empty() || line.is_empty() || !line.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let what = t.get(location.len()..).unwrap_or("").trim_start();
    let word = first_word(what);
    is_exception_name(word) || word == "error" || word == "warning"
}

/// A line's text up to its first space (at most 256 bytes).
fn first_word_until_space(t: &str) -> &str {
    let head = prefix_bytes(t, LINE_HEAD_BYTES);
    // The space is usually a few bytes in: a byte loop beats setting up a memchr.
    match head.bytes().position(|b| b == b' ') {
        Some(i) => head.get(..i).unwrap_or(head),
        None => head,
    }
}

/// Diff headers name files the diff summary already lists; as identifiers their `a/…`, `b/…`
/// and mode numbers are noise.
fn is_diff_header(t: &str) -> bool {
    match t.as_bytes().first() {
        Some(b'd') => t.starts_with("diff --git "),
        Some(b'-') => t.starts_with("--- a/") || t.starts_with("--- /dev/null"),
        Some(b'+') => t.starts_with("+++ b/") || t.starts_with("+++ /dev/null"),
        Some(b'i') => t.starts_with("index ") && t.contains(".."),
        Some(_) | None => false,
    }
}

/// A line weight [`line_weights`] leaves to [`sampled_line_weight`]: most lines hold no
/// identifier, and their weight is never asked for.
const WEIGHED_WHEN_ASKED: u8 = u8::MAX;

/// The weight of a sampled line that is neither the error line nor its location.
fn sampled_line_weight(line: &Line<'_>) -> u8 {
    let t = line.trimmed_start;
    if is_diff_header(t) {
        0
    } else if line.rank.is_some() || is_pointer_line(t) {
        2
    } else {
        1
    }
}

/// How much each line's identifiers matter: 3 on the first error line and the location that
/// belongs to it (the deepest traceback frame before it, a compiler location right after it),
/// 2 on other error or pointer lines, 1 elsewhere, 0 where they are noise. Sampled lines other
/// than those are [`WEIGHED_WHEN_ASKED`].
fn line_weights(input: &Input<'_>, error_index: Option<usize>) -> Vec<u8> {
    let lines = &input.lines;
    // Only sampled lines hold identifiers that get ranked.
    let mut weights: Vec<u8> = vec![1; lines.len()];
    let sampled = (0..input.head_lines).chain(input.tail_from..lines.len());
    for i in sampled {
        if let Some(w) = weights.get_mut(i) {
            *w = WEIGHED_WHEN_ASKED;
        }
    }
    if let Some(error) = error_index {
        let starts_with =
            |i: usize, p: &str| lines.get(i).is_some_and(|l| l.trimmed_start.starts_with(p));
        // The frame the exception was raised in, and the deepest frame in the project's own
        // code (the one an agent edits), which differ when the error surfaces in a library.
        let frames = (error.saturating_sub(60)..error)
            .rev()
            .filter(|&i| starts_with(i, "File \""));
        let mut deepest = None;
        let mut project = None;
        for i in frames {
            deepest = deepest.or(Some(i));
            if lines.get(i).is_some_and(|l| !is_library_path(l.text)) {
                project = Some(i);
                break;
            }
        }
        let location = (error + 1..(error + 4).min(lines.len())).find(|&i| {
            lines
                .get(i)
                .is_some_and(|l| is_pointer_line(l.trimmed_start))
        });
        for i in [Some(error), deepest, project, location]
            .into_iter()
            .flatten()
        {
            if let Some(w) = weights.get_mut(i) {
                *w = 3;
            }
        }
    }
    weights
}

struct Candidate<'a> {
    display: &'a str,
    first: usize,
    count: usize,
    weight: u8,
    /// Library code, build artefacts, memory addresses: rarely what an agent reuses.
    noise: bool,
}

/// Paths inside installed libraries and toolchains rather than the project: one pass over the
/// path's segments (this runs for every identifier candidate).
fn is_library_path(text: &str) -> bool {
    if text.starts_with("/usr/") || (text.contains('<') && contains_short(text, "<frozen ")) {
        return true;
    }
    let mut previous = "";
    for segment in text.split('/') {
        let library = matches!(
            segment,
            "site-packages" | "dist-packages" | "node_modules" | ".rustup" | "rustc"
        ) || segment.starts_with("miniconda")
            || segment.starts_with("anaconda")
            || (previous == "lib" && segment.starts_with("python"))
            || (previous == ".cargo" && segment == "registry");
        if library {
            return true;
        }
        previous = segment;
    }
    false
}

/// Identifiers an agent almost never reuses: compiled artefacts, library paths, `0x…` memory
/// addresses, and the tails OpenClaw's pattern cuts out of relative paths (`/spotter/telemetry`
/// from `lib/spotter/telemetry/`), which the relative path itself covers when it is shown.
fn is_noise_identifier(id: &str, preceded_by: &[u8]) -> bool {
    let fragment = id.starts_with('/')
        && preceded_by
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    let extension = id.rsplit_once('.').map_or("", |(_, ext)| ext);
    let artefact = matches!(
        extension,
        "pyc" | "pyo" | "o" | "class" | "d" | "rlib" | "rmeta"
    ) || (id.contains('_') && contains_short(id, "__pycache__"))
        || contains_short(id, "/.git/");
    let address = preceded_by.ends_with(b"0x") && is_pure_hex(id);
    fragment || artefact || address || is_library_path(id)
}

/// Identifiers (OpenClaw's pattern) and relative paths, best first: by the weight of the lines
/// they appear on, then plain before noise, then repeated before single, then by first
/// appearance. (Tuned on the shared real trajectories: how often an identifier the assistant
/// later uses, first seen in a tool result, is visible in that result's digest.)
fn rank_identifiers<'a>(input: &Input<'a>, error_index: Option<usize>) -> Vec<String> {
    let body: &'a str = input.body;
    let weights = line_weights(input, error_index);
    let weight_at = |pos: usize| -> u8 {
        let i = input.lines.partition_point(|line| line.start <= pos);
        match i
            .checked_sub(1)
            .map(|i| (input.lines.get(i), weights.get(i)))
        {
            Some((Some(line), Some(&WEIGHED_WHEN_ASKED)))
                if pos <= line.start + line.text.len() =>
            {
                sampled_line_weight(line)
            }
            Some((Some(line), Some(w))) if pos <= line.start + line.text.len() => *w,
            Some(_) | None => 1,
        }
    };
    let mut candidates: Vec<Candidate<'a>> = Vec::new();
    let mut seed_index: HashMap<std::borrow::Cow<'a, str>, usize, WordHash> = HashMap::default();
    let mut path_index: HashMap<&'a str, usize, WordHash> = HashMap::default();
    let mut note = |index: Option<usize>, display: &'a str, pos: usize, upgrade: bool| {
        let weight = weight_at(pos);
        match index.and_then(|i| candidates.get_mut(i)) {
            Some(candidate) => {
                candidate.count += 1;
                if weight > candidate.weight {
                    candidate.weight = weight;
                    if upgrade {
                        candidate.display = display;
                    }
                }
                None
            }
            None if weight > 0 => {
                let before = body.get(pos.saturating_sub(2)..pos).unwrap_or("");
                candidates.push(Candidate {
                    display,
                    first: pos,
                    count: 1,
                    weight,
                    noise: is_noise_identifier(display, before.as_bytes()),
                });
                Some(candidates.len() - 1)
            }
            None => None,
        }
    };
    for (offset, window) in input.sample_windows() {
        for (range, id) in identifiers::find_identifiers_for_display(window) {
            let key = normalize_identifier(id);
            let pos = offset + range.start;
            let display = body.get(pos..offset + range.end).unwrap_or(id);
            if let Some(i) = note(seed_index.get(&key).copied(), display, pos, false) {
                seed_index.insert(key, i);
            }
        }
        for (range, path) in identifiers::find_path_like(window) {
            // Shown with the `:line` that follows where it matters most: `src/a.rs:12` covers
            // both the path and the `a.rs:12` OpenClaw's pattern finds there.
            let pos = offset + range.start;
            let end = offset + range.end;
            let suffix = line_suffix_len(body.get(end..).unwrap_or(""));
            let display = body.get(pos..end + suffix).unwrap_or(path);
            if let Some(i) = note(path_index.get(path).copied(), display, pos, true) {
                path_index.insert(path, i);
            }
        }
    }
    let order = |a: &Candidate<'_>, b: &Candidate<'_>| {
        b.weight
            .cmp(&a.weight)
            .then(a.noise.cmp(&b.noise))
            .then(b.count.min(2).cmp(&a.count.min(2)))
            .then(a.first.cmp(&b.first))
            .then(a.display.cmp(b.display))
    };
    // Only the best few can be shown; ordering the rest is wasted work.
    if candidates.len() > MAX_ITEMS {
        candidates.select_nth_unstable_by(MAX_ITEMS, order);
        candidates.truncate(MAX_ITEMS);
    }
    candidates.sort_by(order);
    let mut ranked: Vec<&str> = candidates.iter().map(|c| c.display).collect();
    prefer_containing(&mut ranked);
    ranked
        .into_iter()
        .map(|display| clean_inline(display, 400))
        .collect()
}

/// Where one candidate contains another (`/tmp/run/x/__init__.py` and `/tmp/run`), showing the
/// longer one shows both: it takes the better rank of the two. Lengths are capped so a long URL
/// does not displace several short identifiers.
fn prefer_containing(ranked: &mut Vec<&str>) {
    let mut i = 0;
    while i < ranked.len() {
        let Some(&current) = ranked.get(i) else {
            break;
        };
        let longer = ranked
            .iter()
            .enumerate()
            .skip(i + 1)
            .filter(|(_, other)| {
                // Only a longer one can contain it: the length test spares setting up a search.
                (current.len()..=current.len() + 60).contains(&other.len())
                    && contains_short(other, current)
            })
            .max_by_key(|(j, other)| (other.len(), std::cmp::Reverse(*j)))
            .map(|(j, _)| j);
        if let Some(j) = longer {
            let replacement = ranked.remove(j);
            if let Some(slot) = ranked.get_mut(i) {
                *slot = replacement;
            }
        }
        i += 1;
    }
}

/// A word-at-a-time multiplicative hash (FxHash's) for the candidate and keyword maps: keys are
/// short and hashed hundreds of times per digest, where SipHash's flood resistance costs more
/// than it protects (the maps hold at most the words of the bounded sample). No order leaks
/// from the maps, so the hash never shows in a digest.
#[derive(Default)]
struct WordHasher(u64);

impl WordHasher {
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for WordHasher {
    fn finish(&self) -> u64 {
        // The multiply leaves its best bits at the top; the table indexes by the bottom ones.
        self.0.rotate_left(26)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            for (slot, b) in word.iter_mut().zip(rest) {
                *slot = *b;
            }
            self.mix(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.mix(u64::from(byte));
    }

    fn write_usize(&mut self, value: usize) {
        self.mix(value as u64);
    }
}

type WordHash = std::hash::BuildHasherDefault<WordHasher>;

/// Length of a `:123` or `:123:45` suffix.
fn line_suffix_len(rest: &str) -> usize {
    let mut len = 0;
    for _ in 0..2 {
        let Some(after) = rest.get(len..).and_then(|r| r.strip_prefix(':')) else {
            break;
        };
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 7 {
            break;
        }
        len += 1 + digits;
    }
    len
}

// ---------------------------------------------------------------------------------------------
// Assembly within the budget.

/// One unit of the summary. Units get space in priority order (the order they are pushed) and
/// render in display order; units of one group render together, joined by `, ` after the
/// group's label.
struct Unit {
    display: u8,
    group: u8,
    label: &'static str,
    text: String,
    chars: usize,
    /// All-or-nothing: an identifier cut short is a different identifier.
    whole: bool,
    /// Fewest characters worth showing; with less room the unit is left out.
    min: usize,
    /// Most characters this unit may take before every other unit had its turn.
    cap: usize,
    given: usize,
}

/// Fewest characters worth showing of a line that may be cut.
const MIN_CUT_LINE: usize = 24;

/// Below this budget the facts (status, error, exit code) go before the kind and size.
const SMALL_BUDGET: usize = 120;

// Display slots, in the order a reader sees them.
const SLOT_NOTES: u8 = 0;
const SLOT_HEAD: u8 = 1;
const SLOT_EXIT: u8 = 2;
const SLOT_STATUS: u8 = 3;
const SLOT_ERROR: u8 = 4;
const SLOT_FAILED: u8 = 5;
const SLOT_ITEMS: u8 = 6;
const SLOT_IDS: u8 = 7;
const SLOT_DETAILS: u8 = 8;
const SLOT_KEY_LINES: u8 = 9;

struct Units {
    budget: usize,
    list: Vec<Unit>,
}

impl Units {
    fn pct(&self, percent: usize) -> usize {
        self.budget * percent / 100
    }

    /// A unit that may be cut: at most `cap` characters in the first pass, at least `min`.
    fn cuttable(&mut self, display: u8, text: String, cap: usize, min: usize) {
        self.push(display, 0, "", text, cap, min, false);
    }

    /// An all-or-nothing member of a labelled group; too long (over 40% of the budget) and it is
    /// left out.
    fn member(&mut self, display: u8, label: &'static str, text: String) {
        if text.chars().count() <= self.budget * 2 / 5 {
            self.push(display, display, label, text, usize::MAX, 0, true);
        }
    }

    #[allow(clippy::too_many_arguments)] // A private constructor; the two wrappers name the uses.
    fn push(
        &mut self,
        display: u8,
        group: u8,
        label: &'static str,
        text: String,
        cap: usize,
        min: usize,
        whole: bool,
    ) {
        let chars = text.chars().count();
        if chars == 0 {
            return;
        }
        self.list.push(Unit {
            display,
            group,
            label,
            chars,
            whole,
            min: if whole { chars } else { min.min(chars) },
            cap: if whole {
                chars
            } else {
                cap.max(min).min(chars)
            },
            text,
            given: 0,
        });
    }
}

/// The kind and size a head starts with (`text, 27 lines`, `json object, 7 keys`): the least
/// of it worth showing.
fn head_min(head: &str) -> usize {
    let mut separators = head.match_indices([',', ':', ';']).map(|(i, _)| i);
    let end = separators.nth(1).unwrap_or(head.len());
    head.get(..end).map_or(0, |part| part.chars().count())
}

fn assemble(budget: usize, notes: &[String], shape: &Shape, facts: &Facts) -> String {
    let mut units = Units {
        budget,
        list: Vec::new(),
    };
    for note in notes {
        let cap = units.pct(30);
        units.cuttable(SLOT_NOTES, note.clone(), cap, 12);
    }
    let has_facts = facts.status.is_some() || facts.error_line.is_some();
    let head_first = budget >= SMALL_BUDGET || !has_facts;
    let push_head = |units: &mut Units| {
        let cap = units.pct(35);
        units.cuttable(SLOT_HEAD, shape.head.clone(), cap, head_min(&shape.head));
    };
    if head_first {
        push_head(&mut units);
    }
    if let Some(code) = &facts.exit_code {
        units.cuttable(SLOT_EXIT, format!("exit {code}"), 12, 12);
    }
    if let Some(status) = &facts.status {
        // A test tally cut short misleads (`2 failed, 1…`): it is shown whole when it can be.
        let cap = units.pct(60);
        let min = status.chars().count().min(cap).max(MIN_CUT_LINE);
        units.cuttable(SLOT_STATUS, status.clone(), cap, min);
    }
    if let Some(error) = &facts.error_line {
        if facts.status.as_ref() != Some(error) {
            let cap = units.pct(40).max(MIN_CUT_LINE + 16);
            units.cuttable(SLOT_ERROR, error.clone(), cap, MIN_CUT_LINE);
        }
    }
    if !head_first {
        push_head(&mut units);
    }
    for test in facts.failed_tests.iter().take(3) {
        units.member(SLOT_FAILED, "failed:", test.clone());
    }
    for item in shape.items.iter().take(shape.primary) {
        units.member(SLOT_ITEMS, shape.label, item.clone());
    }
    for id in &facts.identifiers {
        units.member(SLOT_IDS, "ids:", id.clone());
    }
    for detail in &shape.details {
        units.cuttable(SLOT_DETAILS, detail.clone(), budget, MIN_CUT_LINE);
    }
    for item in shape.items.iter().skip(shape.primary) {
        units.member(SLOT_ITEMS, shape.label, item.clone());
    }
    for line in &facts.key_lines {
        let cap = units.pct(30);
        units.cuttable(SLOT_KEY_LINES, line.clone(), cap, MIN_CUT_LINE);
    }
    allocate(budget, &mut units.list);
    render(&units.list, budget)
}

/// Gives each unit its space: a first pass within caps, in priority order, leaving out
/// identifiers and test names the summary already shows; a second pass lets cut units grow
/// into what is left.
fn allocate(budget: usize, units: &mut [Unit]) {
    let mut used = 0usize;
    let mut open_groups: Vec<u8> = Vec::new();
    let mut shown = String::new();
    for unit in units.iter_mut() {
        let skippable = matches!(unit.display, SLOT_IDS | SLOT_FAILED);
        if unit.whole && skippable && mentions_identifier(&shown, &unit.text) {
            continue;
        }
        let separator = if used == 0 { 0 } else { 2 };
        let opens_group = unit.group == 0 || !open_groups.contains(&unit.group);
        let label = if opens_group && !unit.label.is_empty() {
            unit.label.chars().count() + 1
        } else {
            0
        };
        let room = budget.saturating_sub(used + separator + label);
        let give = unit.cap.min(room);
        if give == 0 || give < unit.min {
            continue;
        }
        unit.given = give;
        used += separator + label + give;
        if unit.group != 0 && opens_group {
            open_groups.push(unit.group);
        }
        shown.push_str(&cut(&unit.text, give));
        shown.push('\n');
    }
    for unit in units.iter_mut() {
        if unit.given == 0 || unit.given >= unit.chars {
            continue;
        }
        let extra = (unit.chars - unit.given).min(budget.saturating_sub(used));
        unit.given += extra;
        used += extra;
    }
}

fn render(units: &[Unit], budget: usize) -> String {
    let mut order: Vec<(u8, usize, &Unit)> = units
        .iter()
        .enumerate()
        .filter(|(_, unit)| unit.given > 0)
        .map(|(priority, unit)| (unit.display, priority, unit))
        .collect();
    order.sort_by_key(|(display, priority, _)| (*display, *priority));
    let mut out = String::new();
    let mut previous_group = 0u8;
    for (_, _, unit) in order {
        if unit.group != 0 && unit.group == previous_group {
            out.push_str(", ");
        } else {
            if !out.is_empty() {
                out.push_str("; ");
            }
            if !unit.label.is_empty() {
                out.push_str(unit.label);
                out.push(' ');
            }
        }
        out.push_str(&cut(&unit.text, unit.given));
        previous_group = unit.group;
    }
    // The allocation already fits; this only guards the invariant.
    cut(&out, budget)
}

// ---------------------------------------------------------------------------------------------
// Text helpers.

/// `text` if it has at most `max` characters, else a prefix and `…` in `max` characters: cut
/// after a word when one ends in the last third of the room, else mid-word.
fn cut(text: &str, max: usize) -> String {
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
fn clean_inline(text: &str, max: usize) -> String {
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
fn is_ascii_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r')
}

/// `text.trim_start()`, without decoding characters while the text starts with ASCII (most
/// lines): only a non-ASCII byte at the cut needs the Unicode-aware trim.
#[inline]
fn trim_start_fast(text: &str) -> &str {
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
fn leading_spaces(bytes: &[u8]) -> usize {
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
fn trim_end_fast(text: &str) -> &str {
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
fn trim_fast(text: &str) -> &str {
    trim_end_fast(trim_start_fast(text))
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
fn prefix_bytes(text: &str, max: usize) -> &str {
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
fn suffix_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text.get(start..).unwrap_or("")
}

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
    fn log_levels() {
        assert_eq!(
            log_level("2024-05-01T10:00:00Z INFO server: up"),
            Some("INFO")
        );
        assert_eq!(log_level("[WARN] disk slow"), Some("WARN"));
        assert_eq!(log_level("WARNING:root:slow"), Some("WARN"));
        assert_eq!(
            log_level("2024/05/01 10:00:00 [error] 12#0: boom"),
            Some("ERROR")
        );
        assert_eq!(log_level("ts=1 level=debug msg=x"), Some("DEBUG"));
        assert_eq!(log_level("ts=1 level=\"info\" msg=x"), Some("INFO"));
        assert_eq!(log_level("CRITICAL: out of memory"), Some("FATAL"));
        assert_eq!(log_level("the error is here"), None);
        assert_eq!(log_level("Information only"), None);
        assert_eq!(log_level("LOG_ERROR_COUNT=3"), None);
        assert_eq!(log_level(&format!("{} ERROR late", "x".repeat(60))), None);
    }

    #[test]
    fn timestamps() {
        assert_eq!(
            find_timestamp("2024-05-01T10:00:01.120Z INFO"),
            Some("2024-05-01T10:00:01.120Z")
        );
        assert_eq!(
            find_timestamp("2024-05-01 10:00:01,5 - x"),
            Some("2024-05-01 10:00:01,5")
        );
        assert_eq!(
            find_timestamp("Mar  3 10:12:00 host sshd"),
            Some("10:12:00")
        );
        assert_eq!(find_timestamp("at 10:12 sharp"), None);
        assert_eq!(find_timestamp("version 1:2:3"), None);
        assert_eq!(find_timestamp("id 123:45:67"), None);
        // Only the first 48 bytes are looked at.
        let late = format!("{}10:12:00", " ".repeat(40));
        assert_eq!(find_timestamp(&late), Some("10:12:00"));
        assert_eq!(find_timestamp(&format!(" {late}")), None);
        assert_eq!(find_timestamp("a:b 10:12:00"), Some("10:12:00"));
    }

    #[test]
    fn error_ranks() {
        for strong in [
            "error[E0425]: cannot find value",
            "error: linker failed",
            "ValueError: bad",
            "django.core.exceptions.FieldError: x",
            "KeyboardInterrupt",
            "thread 'main' panicked at src/main.rs:2:5:",
            "panic: runtime error",
            "src/a.c:3:1: error: expected ';'",
            "src/a.ts(3,1): error TS2304: x",
            "E       assert 1 == 2",
            "npm ERR! code ELIFECYCLE",
            "fatal: not a git repository",
        ] {
            assert_eq!(error_rank(strong), Some(0), "{strong}");
        }
        assert_eq!(error_rank("Traceback (most recent call last):"), Some(1));
        for weak in [
            "FAILED tests/test_a.py::test_b - x",
            "--- FAIL: TestAdd (0.00s)",
            "ERROR: test_x (mod.Class)",
            "ls: cannot access 'x': No such file or directory",
            "bash: foo: command not found",
            "2024-05-01 10:00:00 [ERROR] job failed",
        ] {
            assert_eq!(error_rank(weak), Some(2), "{weak}");
        }
        for none in [
            "",
            "all good",
            "    raise ValueError(\"x\")",
            "let e = Error::new();",
            "errors: 0",
            "MyErrorHandler: registered",
        ] {
            assert_eq!(error_rank(none), None, "{none}");
        }
    }

    #[test]
    fn every_error_line_holds_a_trigger() {
        // `annotate_error_ranks` only ranks lines the trigger regex finds.
        for line in [
            "error[E0425]: x",
            "ValueError: bad",
            "KeyboardInterrupt",
            "thread 'main' panicked at x",
            "E   assert 1",
            "npm ERR! x",
            "Traceback (most recent call last):",
            "FAILED x",
            "--- FAIL: T",
            "ls: x: No such file or directory",
            "sh: x: command not found",
            "cat: x: Permission denied",
            "[error] x",
            "CRITICAL x",
            "fatal: x",
            "panic: x",
        ] {
            assert!(ERROR_TRIGGER_RE.is_match(line), "{line}");
        }
    }

    #[test]
    fn status_lines() {
        for status in [
            "==== 2 failed, 10 passed in 0.31s ====",
            "test result: FAILED. 2 passed; 1 failed; 0 ignored",
            "Ran 4 tests in 0.010s",
            "FAILED (failures=1)",
            "OK",
            "Tests:       1 failed, 9 passed, 10 total",
            "Finished `dev` profile [unoptimized] target(s) in 2.31s",
        ] {
            assert!(is_status_line(status), "{status}");
        }
        for other in [
            "passed the butter",
            "3 files changed",
            "error: could not compile `x`",
        ] {
            assert!(!is_status_line(other), "{other}");
        }
    }

    #[test]
    fn definitions() {
        let cases = [
            ("pub async fn load(path: &str) {", "load", true),
            ("fn main() {", "main", true),
            ("def get(self, key):", "get", true),
            ("  defp summarise(text), do: x", "summarise", true),
            (
                "func (s *Server) Serve(l net.Listener) error {",
                "Serve",
                true,
            ),
            (
                "export default async function handler(req) {",
                "handler",
                true,
            ),
            ("class Store:", "Store", false),
            ("pub struct Config {", "Config", false),
            ("impl<T> Cache<T> {", "Cache", false),
            ("defmodule Spotter.Repo do", "Spotter.Repo", false),
        ];
        for (line, name, function) in cases {
            match definition(line) {
                Some(Definition::Function(found)) if function => assert_eq!(found, name, "{line}"),
                Some(Definition::Type(found)) if !function => assert_eq!(found, name, "{line}"),
                Some(Definition::Function(_) | Definition::Type(_)) | None => {
                    panic!("{line}: wrong definition")
                }
            }
        }
        assert!(definition("let x = 1;").is_none());
        assert!(definition("fn").is_none());
        assert!(definition("class 1x").is_none());
    }

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

    /// [`log_level`]'s scan without the word-at-a-time test in front of it.
    fn log_level_unfiltered(line: &str) -> Option<&'static str> {
        let bytes = prefix_bytes(line, LEVEL_WITHIN_BYTES).as_bytes();
        (0..bytes.len()).find_map(|i| {
            let class = BYTE_CLASS[usize::from(bytes[i])];
            let word_start = i == 0 || BYTE_CLASS[usize::from(bytes[i - 1])] & WORD == 0;
            let lowercase = class & LEVEL_LOWER != 0;
            if !word_start || class & (LEVEL_UPPER | LEVEL_LOWER) == 0 {
                return None;
            }
            let before = i.checked_sub(1).map(|p| bytes[p]);
            if lowercase && !matches!(before, Some(b'[' | b'=' | b'"')) {
                return None;
            }
            level_at(bytes, i, lowercase)
        })
    }

    #[test]
    fn the_level_prefilter_passes_every_line_that_states_a_level() {
        let lines = [
            "2024-01-01 12:00:00 ERROR db: down",
            "[warn] disk",
            "level=error msg=x",
            "level=\"info\" x",
            "x = y; WARNING: deprecated",
            "                                   [error] late",
            "                                          ERROR",
            "                                           ERROR",
            "ÉÉ [debug] x",
            "CRITICAL",
            "FATAL!",
            "the error was fine",
            "ERRORS are words",
            "[Info] mixed",
        ];
        let mut levels = 0;
        for line in lines {
            let bytes = prefix_bytes(line, LEVEL_WITHIN_BYTES).as_bytes();
            assert_eq!(log_level(line), log_level_unfiltered(line), "{line:?}");
            if log_level_unfiltered(line).is_some() {
                levels += 1;
                assert!(may_state_level(bytes), "{line:?}");
            }
        }
        assert!(levels >= 9, "{levels}");
        assert!(!may_state_level(b"fn main() { let x = 1; }"));
    }

    proptest::proptest! {
        #[test]
        fn the_level_prefilter_never_hides_a_level(
            line in "(ERROR|WARN|INFO|DEBUG|TRACE|FATAL|CRITICAL|error|warn|info|Debug|level=|level=\"|[A-Z]{1,5}|[a-z ]{1,6}|[\\[\\]=\"_:.é ]){0,24}"
        ) {
            proptest::prop_assert_eq!(log_level(&line), log_level_unfiltered(&line));
        }
    }

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
    fn whitespace_words_split_like_the_standard_splitter() {
        for text in [
            "",
            "   ",
            "pub async fn name(x)",
            "\tdef  f(\u{b}a):\u{85}b\u{3000}c ",
            "é\u{a0}ü x",
            "word",
        ] {
            let expected: Vec<&str> = text.split_whitespace().collect();
            assert_eq!(
                whitespace_words(text).collect::<Vec<_>>(),
                expected,
                "{text:?}"
            );
        }
        for modifier in ["pub", "pub(crate)", "async", "static", "export", "override"] {
            assert!(is_modifier(modifier));
        }
        assert!(!is_modifier("fn") && !is_modifier("pub(in") && !is_modifier("Pub"));
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

    #[test]
    fn containing_candidates_take_the_better_rank() {
        let mut ranked = vec!["/tmp/run", "a.rs:3", "/tmp/run/x/init.py", "src/a.rs:3"];
        prefer_containing(&mut ranked);
        assert_eq!(ranked, ["/tmp/run/x/init.py", "src/a.rs:3"]);
    }

    #[test]
    fn head_minimum_is_kind_and_size() {
        assert_eq!(
            head_min("text, 27 lines, 1177 chars"),
            "text, 27 lines".len()
        );
        assert_eq!(head_min("json object, 7 keys"), "json object, 7 keys".len());
        assert_eq!(head_min("log, 8 lines: ERROR 3"), "log, 8 lines".len());
        assert_eq!(head_min("json null"), "json null".len());
    }

    #[test]
    fn noise_identifiers() {
        assert!(is_noise_identifier("/x/__pycache__/a.cpython-39.pyc", b" "));
        assert!(is_noise_identifier("78effdf94340", b"0x"));
        assert!(!is_noise_identifier("78effdf94340", b"  "));
        assert!(is_noise_identifier("/spotter/telemetry", b"ib"));
        assert!(!is_noise_identifier("/srv/app/main.py", b" \""));
        assert!(is_noise_identifier(
            "/opt/miniconda3/envs/testbed/lib/python3.9/unittest/case.py",
            b" \""
        ));
    }

    #[test]
    fn urls_in_minified_json_are_found_one_by_one() {
        let json = r#"[{"id":1,"url":"https://api.example.com/items/1","tags":["a"]},{"id":2,"url":"https://api.example.com/items/2"}]"#;
        let d = super::digest(json, &DigestSettings::default());
        assert!(
            d.summary.contains("https://api.example.com/items/2"),
            "{}",
            d.summary
        );
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
