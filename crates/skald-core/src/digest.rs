//! Digests of tool output: a short, deterministic, content-aware summary of a text, the
//! `Summary` in `[REF_ID: …] (Summary: …)` placeholders and the no-LLM fallback wherever a
//! summary is needed.
//!
//! This module owns content-kind detection and the summary strategies of SCCS's
//! `SummaryExtractor` (seed 000), plus what the seed leaves out: the exact strings a model later
//! needs. Six kinds, detected in this order (the seed's table order, except that tables and logs
//! are tried before Markdown and code, because their line regularity is the stronger signal, and
//! a unified diff counts as code):
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
//! Every summary then keeps, inside the same character budget and in this order of priority: the
//! exit code, the test/build status line, the first error line (for a Python traceback, the
//! exception line rather than the `Traceback` header), failing test names, and the identifiers
//! ([`crate::identifiers`]: hashes, URLs, absolute paths, `host:port`, plus relative paths) the
//! output mentions, ranked so the ones an agent is likely to reuse come first. The budget
//! ([`DigestSettings::summary_max_chars`], default 300 characters) is never exceeded; a cut never
//! splits a character and is marked with `…`. Output is a single line and depends only on the
//! input (no hash-map order leaks).
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
use serde_json::Value;

use crate::identifiers::{self, mentions_identifier, normalize_identifier};
use crate::message::{Block, ImageSource};

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
    let mut text = String::new();
    let mut notes = Vec::new();
    for block in blocks {
        match block {
            Block::Text(block) => {
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
    digest_with_notes(&text, &notes, settings)
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
    let input = Input::new(text);
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

/// Identifiers are collected from the whole text up to this size, and from its first and last
/// parts beyond it (a digest shows a handful of them; the ends of an output are where its
/// command, its errors and its summary are).
const ID_SCAN_BYTES: usize = 64 * 1024;

/// At most this many items of one list are considered for a summary.
const MAX_ITEMS: usize = 40;

struct Line<'a> {
    /// The line without its gutter and line terminator.
    text: &'a str,
    /// Byte offset of `text` in the body.
    start: usize,
    /// [`error_rank`] of the line.
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
}

impl<'a> Input<'a> {
    fn new(text: &'a str) -> Input<'a> {
        let (body, wrapper_exit) = unwrap_returncode(text);
        let numbered = has_line_gutter(body);
        let mut lines = Vec::new();
        let mut total_lines = 0;
        let mut offset = 0;
        for raw in body.split_inclusive('\n') {
            let start = offset;
            offset += raw.len();
            total_lines += 1;
            let line = raw.strip_suffix('\n').unwrap_or(raw);
            let line = line.strip_suffix('\r').unwrap_or(line);
            let (line, gutter) = if numbered {
                let n = gutter_len(line).unwrap_or(0);
                (line.get(n..).unwrap_or(line), n)
            } else {
                (line, 0)
            };
            if is_harness_tag(line) {
                continue;
            }
            lines.push(Line {
                text: line,
                start: start + gutter,
                rank: error_rank(line),
            });
        }
        Input {
            body,
            lines,
            wrapper_exit,
            chars: body.chars().count(),
            total_lines,
        }
    }

    fn texts(&self) -> impl DoubleEndedIterator<Item = &'a str> + '_ {
        self.lines.iter().map(|line| line.text)
    }

    fn nonempty(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.texts().filter(|t| !t.trim().is_empty())
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
    let t = line.trim();
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
    let spaces = bytes.iter().take_while(|b| **b == b' ').count();
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
    lang_votes: BTreeMap<&'static str, usize>,
    // Log.
    level_counts: BTreeMap<&'static str, usize>,
    level_lines: usize,
    ts_lines: usize,
    first_ts: Option<&'a str>,
    last_ts: Option<&'a str>,
    // Diff.
    diff_headers: usize,
    hunks: usize,
    added: usize,
    removed: usize,
    // Plain-text shapes.
    grep_lines: usize,
    ls_long_lines: usize,
    bare_names: usize,
}

impl<'a> Scan<'a> {
    fn new(input: &Input<'a>) -> Scan<'a> {
        let mut scan = Scan::default();
        let mut in_fence = false;
        for line in input.texts() {
            let trimmed = line.trim();
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
            scan.links += prefix_bytes(line, 4 * LINE_HEAD_BYTES)
                .matches("](")
                .count();
            if in_fence {
                continue;
            }
            scan.nonempty_outside_fences += 1;
            scan.markdown_line(line, trimmed);
            scan.code_line(trimmed);
            scan.log_line(line);
            scan.diff_line(line);
            scan.plain_line(trimmed);
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

    fn markdown_line(&mut self, line: &'a str, trimmed: &'a str) {
        let hashes = line.bytes().take_while(|b| *b == b'#').count();
        if (1..=6).contains(&hashes) && line.as_bytes().get(hashes) == Some(&b' ') {
            if line.get(hashes..).is_some_and(|t| !t.trim().is_empty()) {
                self.headings.push(trimmed);
            }
            return;
        }
        let t = line.trim_start();
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
        let head = prefix_bytes(t, 64);
        let first = head.split([' ', '(', '<', '{', ':']).next().unwrap_or("");
        let lang = keyword_language(first, t);
        if let Some(lang) = lang {
            *self.lang_votes.entry(lang).or_default() += 1;
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

    fn log_line(&mut self, line: &'a str) {
        if let Some(level) = log_level(line) {
            *self.level_counts.entry(level).or_default() += 1;
            self.level_lines += 1;
        }
        if let Some(ts) = find_timestamp(line) {
            self.ts_lines += 1;
            if self.first_ts.is_none() {
                self.first_ts = Some(ts);
            }
            self.last_ts = Some(ts);
        }
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

    fn plain_line(&mut self, t: &str) {
        if grep_hit(t).is_some() {
            self.grep_lines += 1;
        }
        if is_ls_long(t) {
            self.ls_long_lines += 1;
        } else if is_bare_name(t) {
            self.bare_names += 1;
        }
    }
}

/// The language a line's first word suggests, if it is a keyword of one (`code` for keywords
/// many languages share).
fn keyword_language(first: &str, line: &str) -> Option<&'static str> {
    let lang = match first {
        "fn" | "pub" | "impl" | "mod" | "use" | "let" | "match" | "struct" | "enum" | "trait"
        | "#[derive" | "#[cfg" => "rust",
        "def" if line.ends_with(':') => "python",
        "class" if line.ends_with(':') => "python",
        "def" | "defp" | "defmodule" | "alias" | "defstruct" | "defmacro" => "elixir",
        "import" | "from" if line.contains(" from ") || line.ends_with(';') => "javascript",
        "import" | "from" | "elif" | "except" | "raise" => "python",
        "function" | "const" | "var" | "export" => "javascript",
        "func" | "package" => "go",
        "#include" | "#define" | "void" | "int" | "static" => "c",
        "public" | "private" | "protected" | "class" | "interface" => "java",
        "return" | "if" | "for" | "while" | "else" | "try" | "catch" | "switch" | "case"
        | "async" | "await" | "type" | "@impl" | "@doc" | "@spec" => "code",
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

/// The log level a line states near its start: an uppercase level word (`ERROR`, `[WARN]`), a
/// lowercase one in brackets (`[error]`), or logfmt's `level=error`.
fn log_level(line: &str) -> Option<&'static str> {
    let bytes = prefix_bytes(line, 100).as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let at_word_start = i == 0 || bytes.get(i - 1).is_some_and(|p| !p.is_ascii_alphanumeric());
        if !at_word_start || !b.is_ascii_alphabetic() {
            i += 1;
            continue;
        }
        let len = bytes.get(i..).map_or(0, |rest| {
            rest.iter().take_while(|c| c.is_ascii_alphabetic()).count()
        });
        let word = bytes.get(i..i + len).unwrap_or(&[]);
        let before = i.checked_sub(1).and_then(|p| bytes.get(p)).copied();
        let after = bytes.get(i + len).copied();
        let uppercase = word.iter().all(u8::is_ascii_uppercase);
        let bracketed = before == Some(b'[') && after == Some(b']');
        let logfmt = i >= 6 && bytes.get(i - 6..i) == Some(b"level=".as_slice());
        let bounded = after.is_none_or(|c| !c.is_ascii_alphanumeric());
        if bounded && (uppercase || bracketed || logfmt) {
            if let Some(level) = level_name(word) {
                return Some(level);
            }
        }
        i += len.max(1);
    }
    None
}

/// A timestamp in a line's first 120 bytes: `HH:MM:SS`, extended left over an ISO date and
/// right over a fraction and `Z`.
fn find_timestamp(line: &str) -> Option<&str> {
    let bytes = prefix_bytes(line, 120).as_bytes();
    let digit = |k: usize| bytes.get(k).is_some_and(u8::is_ascii_digit);
    let colon = |k: usize| bytes.get(k) == Some(&b':');
    let mut from = 0;
    while let Some(found) = bytes.get(from..)?.iter().position(|b| *b == b':') {
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

/// `path:line:` or `path/with/slash:` at the start of a grep hit; returns the path.
fn grep_hit(t: &str) -> Option<&str> {
    let head = prefix_bytes(t, LINE_HEAD_BYTES);
    let (path, rest) = head.split_once(':')?;
    if path.is_empty() || path.contains(' ') || !path.contains('.') {
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
    Log(Scan<'a>),
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
            Detected::Log(_) => ContentKind::Log,
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
    let scan = Scan::new(input);
    let n = scan.nonempty;
    if n == 0 {
        return Detected::Plain(scan);
    }
    if scan.diff_headers >= 1 && scan.hunks >= 1 {
        return Detected::Diff(scan);
    }
    let timed_log = scan.ts_lines * 10 >= n * 3 && scan.level_lines * 10 >= n;
    let leveled_log = n >= 3 && scan.level_lines * 10 >= n * 6;
    if scan.level_lines >= 1 && (timed_log || leveled_log) {
        return Detected::Log(scan);
    }
    if let Some(table) = table_shape(input) {
        return Detected::Table(table);
    }
    let codeish = scan.code_lines * 10 >= scan.nonempty_outside_fences.max(1) * 3;
    let markdown_features = scan.list_items + scan.fences + scan.links;
    if !scan.headings.is_empty() && markdown_features >= 1 && !codeish {
        return Detected::Markdown(scan);
    }
    if codeish && scan.grep_lines * 2 < n && scan.ls_long_lines * 2 < n {
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
    match detected {
        Detected::Json(json) => json_summary(json),
        Detected::Table(table) => table_summary(table),
        Detected::Log(scan) => log_summary(input, scan),
        Detected::Markdown(scan) => markdown_summary(input, scan),
        Detected::Diff(scan) => diff_summary(input, scan),
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

enum JsonShape {
    Value(Value),
    Lines { records: usize, keys: Vec<String> },
}

fn json_shape(input: &Input<'_>) -> Option<JsonShape> {
    let trimmed = input.body.trim();
    let first = *trimmed.as_bytes().first()?;
    let last = *trimmed.as_bytes().last()?;
    if matches!((first, last), (b'{', b'}') | (b'[', b']')) {
        if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
            return Some(JsonShape::Value(value));
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
            let value: Value = serde_json::from_str(line).ok()?;
            for key in value.as_object()?.keys() {
                push_unique(&mut keys, clean_inline(key, 40));
            }
        } else if !line.trim_start().starts_with('{') {
            return None;
        }
        records += 1;
    }
    (records >= 2).then_some(JsonShape::Lines { records, keys })
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `key=value` for scalars, `key[n]` for arrays, `key{a,b,…}` for objects.
fn json_field(key: &str, value: &Value) -> String {
    let key = clean_inline(key, 40);
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => format!("{key}={value}"),
        Value::String(s) => format!("{key}=\"{}\"", clean_inline(s, 80)),
        Value::Array(items) => format!("{key}[{}]", items.len()),
        Value::Object(map) => {
            let inner: Vec<String> = map.keys().take(3).map(|k| clean_inline(k, 20)).collect();
            let more = if map.len() > 3 { ",…" } else { "" };
            format!("{key}{{{}{more}}}", inner.join(","))
        }
    }
}

fn json_summary(json: &JsonShape) -> Shape {
    match json {
        JsonShape::Value(Value::Array(items)) if items.is_empty() => {
            Shape::new("json array, empty".to_owned())
        }
        JsonShape::Value(Value::Array(items)) => {
            let mut types: BTreeMap<&'static str, usize> = BTreeMap::new();
            for item in items {
                *types.entry(json_type(item)).or_default() += 1;
            }
            let mut by_count: Vec<(&str, usize)> = types.into_iter().collect();
            by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let dist: Vec<String> = by_count.iter().map(|(t, n)| format!("{n} {t}")).collect();
            let mut keys: Vec<String> = Vec::new();
            for map in items.iter().take(20).filter_map(Value::as_object) {
                for key in map.keys() {
                    push_unique(&mut keys, clean_inline(key, 40));
                }
            }
            let first = items.first().and_then(Value::as_object).map(|map| {
                let fields: Vec<String> = map
                    .iter()
                    .take(MAX_ITEMS)
                    .map(|(k, v)| json_field(k, v))
                    .collect();
                format!("first: {}", fields.join(", "))
            });
            Shape::new(format!(
                "json array of {}: {}",
                items.len(),
                dist.join(", ")
            ))
            .items("keys:", keys, 6)
            .details(first)
        }
        JsonShape::Value(Value::Object(map)) => {
            let fields = map
                .iter()
                .take(MAX_ITEMS)
                .map(|(k, v)| json_field(k, v))
                .collect();
            Shape::new(format!("json object, {} keys", map.len())).items("", fields, 5)
        }
        JsonShape::Value(other) => Shape::new(format!("json {}", json_type(other))),
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
            .filter(|row| split_row(row, separator).len() == header.len())
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

fn log_summary(input: &Input<'_>, scan: &Scan<'_>) -> Shape {
    let counts: Vec<String> = LEVEL_ORDER
        .iter()
        .filter_map(|level| scan.level_counts.get(level).map(|n| format!("{level} {n}")))
        .collect();
    let mut head = format!(
        "log, {}: {}",
        lines_word(input.total_lines),
        counts.join(", ")
    );
    if let (Some(first), Some(last)) = (scan.first_ts, scan.last_ts) {
        if first == last {
            head.push_str(&format!("; at {first}"));
        } else {
            head.push_str(&format!("; {first} to {last}"));
        }
    }
    // Error types: exception-like words on error lines, most frequent first.
    let mut types: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (index, line) in input.texts().enumerate() {
        if !matches!(log_level(line), Some("ERROR" | "FATAL")) {
            continue;
        }
        let head = prefix_bytes(line, 4 * LINE_HEAD_BYTES);
        for word in head.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')) {
            let base = word.rsplit('.').next().unwrap_or(word);
            if is_exception_name(base) {
                types.entry(base).or_insert((0, index)).0 += 1;
            }
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
    let headings = scan
        .headings
        .iter()
        .take(MAX_ITEMS)
        .map(|h| clean_inline(h, 60))
        .collect();
    Shape::new(head).items("headings:", headings, 4)
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

#[allow(clippy::expect_used)] // Constant patterns, exercised by the tests.
static FUNCTION_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:export\s+)?(?:default\s+)?(?:async\s+)?",
        r"(?:static\s+)?(?:fn|def|defp|func|function|defmacro)\s+(?:\([^)]*\)\s*)?",
        r"([A-Za-z_][A-Za-z0-9_?!]*)",
    ))
    .expect("function pattern compiles")
});

#[allow(clippy::expect_used)]
static TYPE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:export\s+)?(?:default\s+)?(?:abstract\s+)?",
        r"(?:class|struct|enum|trait|interface|defmodule|impl(?:<[^>]*>)?)\s+",
        r"([A-Za-z_][A-Za-z0-9_.:]*)",
    ))
    .expect("type pattern compiles")
});

/// First words that can start a function or type definition; the regexes only run on lines
/// that start with one (running them on every line would dominate the digest's cost).
fn may_define(first: &str) -> bool {
    matches!(
        first,
        "pub"
            | "pub(crate)"
            | "fn"
            | "def"
            | "defp"
            | "func"
            | "function"
            | "defmacro"
            | "export"
            | "async"
            | "static"
            | "default"
            | "abstract"
            | "class"
            | "struct"
            | "enum"
            | "trait"
            | "interface"
            | "defmodule"
    ) || first.starts_with("impl")
}

fn code_summary(input: &Input<'_>, scan: &Scan<'_>) -> Shape {
    let language = scan
        .lang_votes
        .iter()
        .filter(|(lang, _)| **lang != "code")
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(lang, _)| *lang);
    let mut functions: Vec<String> = Vec::new();
    let mut types: Vec<String> = Vec::new();
    let mut imports: Vec<String> = Vec::new();
    for line in input.texts() {
        let t = line.trim_start();
        let first = prefix_bytes(t, 64).split([' ', '<']).next().unwrap_or("");
        if may_define(first) {
            let head = prefix_bytes(line, LINE_HEAD_BYTES);
            if let Some(name) = FUNCTION_RE.captures(head).and_then(|c| c.get(1)) {
                push_unique(&mut functions, name.as_str().to_owned());
                continue;
            }
            if let Some(name) = TYPE_RE.captures(head).and_then(|c| c.get(1)) {
                push_unique(&mut types, name.as_str().trim_end_matches(':').to_owned());
                continue;
            }
        }
        let is_import = [
            "use ",
            "import ",
            "from ",
            "#include ",
            "require ",
            "alias ",
        ]
        .iter()
        .any(|p| t.starts_with(p))
            || (t.starts_with("const ") && t.contains("require("));
        if is_import && imports.len() < 12 {
            push_unique(&mut imports, clean_inline(t.trim_end_matches(';'), 60));
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
    if n >= 3 && scan.grep_lines * 10 >= n * 6 {
        return grep_summary(input, scan);
    }
    if n >= 3 && (scan.ls_long_lines + scan.bare_names) * 10 >= n * 8 {
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
        .find(|l| l.chars().any(char::is_alphanumeric) && error_rank(l) != Some(1))
        .map(|l| format!("first: {}", clean_inline(l, 200)));
    let keywords = keywords(input.body);
    let keywords = (!keywords.is_empty()).then(|| format!("keywords: {}", keywords.join(", ")));
    Shape::new(head).details(first.into_iter().chain(keywords))
}

fn grep_summary(input: &Input<'_>, scan: &Scan<'_>) -> Shape {
    let mut files: Vec<(&str, usize)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for line in input.texts() {
        let Some(path) = grep_hit(line.trim()) else {
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
    let head = format!("grep, {} matches in {} files", scan.grep_lines, files.len());
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

const STOPWORDS: &[&str] = &[
    "about", "after", "also", "been", "before", "being", "could", "does", "each", "false", "from",
    "have", "here", "into", "just", "like", "more", "most", "must", "none", "null", "only",
    "other", "over", "same", "should", "some", "such", "than", "that", "their", "them", "then",
    "there", "these", "they", "this", "those", "true", "under", "until", "very", "want", "were",
    "what", "when", "where", "which", "while", "will", "with", "would", "your",
];

/// The most frequent words (four letters or more, stopwords out) of the text's first 8 KiB.
fn keywords(body: &str) -> Vec<String> {
    let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
    let words = prefix_bytes(body, 8 * 1024)
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| w.len() >= 4 && w.chars().count() >= 4 && w.chars().any(char::is_alphabetic));
    for (position, word) in words.enumerate() {
        let word = word.to_lowercase();
        if STOPWORDS.contains(&word.as_str()) || word.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        counts.entry(word).or_insert((0, position)).0 += 1;
    }
    let mut ranked: Vec<(String, (usize, usize))> =
        counts.into_iter().filter(|(_, (n, _))| *n >= 2).collect();
    ranked.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)));
    ranked
        .into_iter()
        .take(6)
        .map(|(w, _)| clean_inline(&w, 30))
        .collect()
}

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
            .take(200)
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

/// `ValueError`, `django.core.exceptions.FieldError`'s last part, `NullPointerException`.
fn is_exception_name(word: &str) -> bool {
    word.len() > 5
        && (word.ends_with("Error") || word.ends_with("Exception"))
        && word.bytes().next().is_some_and(|b| b.is_ascii_uppercase())
        && word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// How strongly a line states an error: 0 for an error statement (`error[E…]:`, `ValueError:`,
/// `panicked at`), 1 for a traceback header, 2 for weaker signs (`FAILED`, `[ERROR]`, `No such
/// file or directory`); `None` for other lines.
fn error_rank(line: &str) -> Option<u8> {
    let t = line.trim_start();
    let head = prefix_bytes(t, LINE_HEAD_BYTES);
    let first = head.split([':', ' ', '(']).next().unwrap_or("");
    let exception = {
        let name = first.rsplit('.').next().unwrap_or(first);
        (is_exception_name(name) || name == "KeyboardInterrupt")
            && head
                .get(first.len()..)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
    };
    let strong = exception
        || [
            "error[", "error:", "Error:", "ERROR:", "FATAL", "fatal:", "panic:", "E   ",
        ]
        .iter()
        .any(|p| t.starts_with(p))
        || t.starts_with("npm ERR!")
        || (t.starts_with("thread '") && head.contains("panicked at"))
        || head.contains(": error:")
        || head.contains(": error TS")
        || head.contains(": fatal error:");
    if strong {
        return Some(0);
    }
    if t.starts_with("Traceback (most recent call last)") {
        return Some(1);
    }
    let weak = ["FAILED", "FAIL:", "--- FAIL", "ERROR "]
        .iter()
        .any(|p| t.starts_with(p))
        || head.contains("[ERROR]")
        || head.contains(" ERROR ")
        || head.contains("No such file or directory")
        || head.contains("command not found")
        || head.contains("Permission denied");
    weak.then_some(2)
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
    let t = line.trim();
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
        || (t.starts_with("Ran ") && t.contains(" test"))
        || t == "OK"
        || t.starts_with("error: could not compile");
    if known {
        return true;
    }
    let counted = [" passed", " failed", " error", " skipped", " xfailed"]
        .iter()
        .any(|word| {
            t.match_indices(word).any(|(pos, _)| {
                t.get(..pos)
                    .and_then(|before| before.bytes().next_back())
                    .is_some_and(|b| b.is_ascii_digit())
            })
        });
    counted && (t.contains(" in ") || t.starts_with('=') || t.contains(", "))
}

/// Names of failing tests: pytest, cargo, go, unittest/Django.
fn failed_tests(input: &Input<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in input.texts() {
        let t = line.trim();
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
        }
    }
    out
}

/// Lines that point at a place: traceback frames, compiler locations, stack frames, pytest's
/// `path:line: Error` lines.
fn is_pointer_line(t: &str) -> bool {
    let head = prefix_bytes(t, LINE_HEAD_BYTES);
    t.starts_with("File \"")
        || t.starts_with("--> ")
        || t.starts_with("at ")
        || t.starts_with("FAILED")
        || head.contains("panicked at")
        || head.split_once(": ").is_some_and(|(location, what)| {
            let at_line = location.rsplit_once(':').is_some_and(|(path, line)| {
                !path.is_empty()
                    && !path.contains(' ')
                    && !line.is_empty()
                    && line.bytes().all(|b| b.is_ascii_digit())
            });
            let word = what.split([':', ' ']).next().unwrap_or("");
            at_line && (is_exception_name(word) || word == "error" || word == "warning")
        })
}

/// Diff headers name files the diff summary already lists; as identifiers their `a/…`, `b/…`
/// and mode numbers are noise.
fn is_diff_header(t: &str) -> bool {
    t.starts_with("diff --git ")
        || t.starts_with("--- a/")
        || t.starts_with("+++ b/")
        || t.starts_with("--- /dev/null")
        || t.starts_with("+++ /dev/null")
        || (t.starts_with("index ") && t.contains(".."))
}

/// How much each line's identifiers matter: 3 on the first error line and the location that
/// belongs to it (the deepest traceback frame before it, a compiler location right after it),
/// 2 on other error or pointer lines, 1 elsewhere, 0 where they are noise.
fn line_weights(lines: &[Line<'_>], error_index: Option<usize>) -> Vec<u8> {
    let mut weights: Vec<u8> = lines
        .iter()
        .map(|line| {
            let t = line.text.trim_start();
            if is_diff_header(t) {
                0
            } else if line.rank.is_some() || is_pointer_line(t) {
                2
            } else {
                1
            }
        })
        .collect();
    if let Some(error) = error_index {
        let starts_with = |i: usize, p: &str| {
            lines
                .get(i)
                .is_some_and(|l| l.text.trim_start().starts_with(p))
        };
        let frame = (error.saturating_sub(40)..error)
            .rev()
            .find(|&i| starts_with(i, "File \""));
        let location = (error + 1..(error + 4).min(lines.len())).find(|&i| {
            lines
                .get(i)
                .is_some_and(|l| is_pointer_line(l.text.trim_start()))
        });
        for i in [Some(error), frame, location].into_iter().flatten() {
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
}

/// The parts of the body identifiers are collected from: all of it up to [`ID_SCAN_BYTES`],
/// else its first and last parts, cut at line ends so no identifier is split.
fn id_windows(body: &str) -> Vec<(usize, &str)> {
    if body.len() <= ID_SCAN_BYTES {
        return vec![(0, body)];
    }
    let head = prefix_bytes(body, ID_SCAN_BYTES * 5 / 8);
    let head = head.rfind('\n').and_then(|i| head.get(..i)).unwrap_or(head);
    let tail = suffix_bytes(body, ID_SCAN_BYTES * 3 / 8);
    let tail = tail
        .find('\n')
        .and_then(|i| tail.get(i + 1..))
        .unwrap_or(tail);
    vec![(0, head), (body.len() - tail.len(), tail)]
}

/// Identifiers (OpenClaw's pattern) and relative paths, best first: by the weight of the lines
/// they appear on, then the most repeated (counting up to three), then by first appearance.
fn rank_identifiers<'a>(input: &Input<'a>, error_index: Option<usize>) -> Vec<String> {
    let body: &'a str = input.body;
    let weights = line_weights(&input.lines, error_index);
    let weight_at = |pos: usize| -> u8 {
        let i = input.lines.partition_point(|line| line.start <= pos);
        match i
            .checked_sub(1)
            .map(|i| (input.lines.get(i), weights.get(i)))
        {
            Some((Some(line), Some(w))) if pos <= line.start + line.text.len() => *w,
            Some(_) | None => 1,
        }
    };
    let mut candidates: Vec<Candidate<'a>> = Vec::new();
    let mut seed_index: HashMap<std::borrow::Cow<'a, str>, usize> = HashMap::new();
    let mut path_index: HashMap<&'a str, usize> = HashMap::new();
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
                candidates.push(Candidate {
                    display,
                    first: pos,
                    count: 1,
                    weight,
                });
                Some(candidates.len() - 1)
            }
            None => None,
        }
    };
    for (offset, window) in id_windows(body) {
        for (range, id) in identifiers::find_identifiers(window) {
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
    candidates.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then(b.count.min(3).cmp(&a.count.min(3)))
            .then(a.first.cmp(&b.first))
            .then(a.display.cmp(b.display))
    });
    candidates
        .into_iter()
        .take(MAX_ITEMS)
        .map(|c| clean_inline(c.display, 400))
        .collect()
}

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
    /// Most characters this unit may take before every other unit had its turn.
    cap: usize,
    given: usize,
}

/// Fewest characters worth showing of a unit that may be cut.
const MIN_CUT_UNIT: usize = 12;

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
        (self.budget * percent / 100).max(MIN_CUT_UNIT)
    }

    /// A unit that may be cut, taking at most `cap` characters in the first pass.
    fn cuttable(&mut self, display: u8, text: String, cap: usize) {
        self.push(display, 0, "", text, cap, false);
    }

    /// An all-or-nothing member of a labelled group; too long (over 40% of the budget) and it is
    /// left out.
    fn member(&mut self, display: u8, label: &'static str, text: String) {
        if text.chars().count() <= self.budget * 2 / 5 {
            self.push(display, display, label, text, usize::MAX, true);
        }
    }

    fn push(
        &mut self,
        display: u8,
        group: u8,
        label: &'static str,
        text: String,
        cap: usize,
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
            cap: if whole { chars } else { cap.min(chars) },
            text,
            given: 0,
        });
    }
}

fn assemble(budget: usize, notes: &[String], shape: &Shape, facts: &Facts) -> String {
    let mut units = Units {
        budget,
        list: Vec::new(),
    };
    for note in notes {
        let cap = units.pct(30);
        units.cuttable(SLOT_NOTES, note.clone(), cap);
    }
    let cap = units.pct(35);
    units.cuttable(SLOT_HEAD, shape.head.clone(), cap);
    if let Some(code) = &facts.exit_code {
        units.cuttable(SLOT_EXIT, format!("exit {code}"), 12);
    }
    if let Some(status) = &facts.status {
        let cap = units.pct(25);
        units.cuttable(SLOT_STATUS, status.clone(), cap);
    }
    if let Some(error) = &facts.error_line {
        if facts.status.as_ref() != Some(error) {
            let cap = units.pct(40);
            units.cuttable(SLOT_ERROR, error.clone(), cap);
        }
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
        units.cuttable(SLOT_DETAILS, detail.clone(), budget);
    }
    for item in shape.items.iter().skip(shape.primary) {
        units.member(SLOT_ITEMS, shape.label, item.clone());
    }
    for line in &facts.key_lines {
        let cap = units.pct(30);
        units.cuttable(SLOT_KEY_LINES, line.clone(), cap);
    }
    allocate(budget, &mut units.list);
    render(&mut units.list, budget)
}

/// Gives each unit its space: a first pass within caps, in priority order, leaving out
/// identifiers the summary already shows; a second pass lets cut units grow into what is left.
fn allocate(budget: usize, units: &mut [Unit]) {
    let mut used = 0usize;
    let mut open_groups: Vec<u8> = Vec::new();
    let mut shown = String::new();
    for unit in units.iter_mut() {
        if unit.whole && unit.display == SLOT_IDS && mentions_identifier(&shown, &unit.text) {
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
        let enough = if unit.whole {
            give == unit.chars
        } else {
            give >= unit.chars.min(MIN_CUT_UNIT)
        };
        if give == 0 || !enough {
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

fn render(units: &mut [Unit], budget: usize) -> String {
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

/// `text` if it has at most `max` characters, else its first `max - 1` characters and `…`.
fn cut(text: &str, max: usize) -> String {
    if max == 0 {
        return String::new();
    }
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some(_) => {
            let keep = text
                .char_indices()
                .nth(max - 1)
                .map(|(i, _)| i)
                .unwrap_or(text.len());
            let mut out = text.get(..keep).unwrap_or("").trim_end().to_owned();
            out.push(CUT_MARK);
            out
        }
    }
}

/// One line of display text: control characters become spaces, runs of whitespace collapse,
/// at most `max` characters (cut marked). Reads no further than it needs to, so a megabyte-long
/// line costs no more than a short one.
fn clean_inline(text: &str, max: usize) -> String {
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
