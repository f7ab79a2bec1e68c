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
//! ANSI escapes (colours) are removed first. Test runners, linters and type checkers are
//! recognised by their own summary lines (`verdict`): the digest then leads with the runner, its
//! verdict and tally (`mix test, 25 lines; passed: 38 tests, 0 failures`), the first exception
//! and the first failing test; a passing run shows no error lines, whatever its logs say.
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
//!
//! # How a digest is made
//!
//! [`digest`] and [`digest_blocks`] unwrap a tool-output envelope, then run one fixed flow, each
//! step in a submodule of its own:
//!
//! 1. `input`: the text as analysed. A `<returncode>` wrapper is unwrapped, harness tag lines are
//!    dropped, line-number gutters stripped, the lines indexed once (each line the error-trigger
//!    search finds gets its error rank) and, for a long text, the head and tail sample fixed.
//! 2. `detect`: the kind, from a JSON parse (`json`), one pass over the sampled lines (`scan`,
//!    whose per-line tests are in `lines`) and a table check (`table`).
//! 3. `show`: the kind's own summary as a head, a labelled list of items and details, made by
//!    `json`, `table`, `structured` (logs, Markdown, diffs, code) or `plain` (grep hits,
//!    listings, other text).
//! 4. `facts`: what every kind keeps (exit code, status line, first error, failing tests, further
//!    error lines) and the identifiers, ranked by `ranking`.
//!    A runner's verdict (`verdict`, its tables in one module per family) replaces the kind's
//!    head and leads the facts.
//! 5. `assemble`: all of it fitted into the budget by priority and shown by display slot, cut
//!    with the helpers of `text`.

mod assemble;
mod detect;
mod facts;
mod input;
mod json;
mod lines;
mod plain;
mod ranking;
mod scan;
mod show;
mod structured;
mod table;
mod text;
mod verdict;

use serde_json::Value;

use crate::message::{Block, ImageSource};

use assemble::assemble;
use detect::detect;
use facts::Facts;
use input::Input;
use show::{lines_word, shape_of};
use text::{clean_inline, strip_ansi};
use verdict::{Outcome, recognize};

/// The seed's default `sccsSummaryMaxChars`.
pub const DEFAULT_SUMMARY_MAX_CHARS: usize = 300;

/// The seed's lower bound for `sccsSummaryMaxChars`.
pub const MIN_SUMMARY_MAX_CHARS: usize = 50;

/// The mark left where text was cut.
pub const CUT_MARK: char = '…';

/// Why digest settings were rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestSettingsError {
    /// `summary_max_chars` is too small for a useful digest.
    #[error(
        "summary_max_chars: expected at least {minimum} characters, found {found}; a shorter \
         summary cannot hold a kind, a status and one identifier"
    )]
    SummaryMaxCharsTooSmall {
        /// The budget given.
        found: usize,
        /// The smallest budget that holds a kind, a status and one identifier.
        minimum: usize,
    },
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
    /// A JSON document (an object or array).
    Json,
    /// Markdown: headings, lists, fenced code.
    Markdown,
    /// Rows of columns separated by tabs, pipes, commas, semicolons or spaces.
    Table,
    /// Log lines (a build, a test run, a service log).
    Log,
    /// Source code or a diff.
    Code,
    /// Anything else: prose or unstructured output.
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
    /// The kind the text was read as, which decided how it was summarised.
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
    let mut texts = blocks
        .iter()
        .filter_map(Block::as_text)
        .map(|text| text.text.as_str());
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
    // Colours are for terminals: a summary neither shows nor reads them.
    let plain = strip_ansi(unwrapped.as_ref().map_or(text, |inner| &inner.body));
    let mut input = Input::new(&plain);
    if let Some(code) = unwrapped
        .as_ref()
        .and_then(|inner| inner.exit_code.as_deref())
    {
        input.wrapper_exit = input.wrapper_exit.or(Some(code));
    }
    let detected = detect(&input);
    let kind = detected.kind();
    let mut shape = shape_of(&detected, &input);
    // A runner's own verdict outranks what the kind reads: a passing test run whose app logged
    // errors is a pass, not a log of errors.
    let verdict = recognize(&input);
    if let Some(verdict) = &verdict {
        shape.head = format!("{}, {}", verdict.tool, lines_word(input.total_lines));
        match verdict.outcome {
            Outcome::Passed => {
                // The kind's lists and first line are what the run logged (error types, an
                // `ERROR` line): beside a pass they read as a failure.
                shape.items.clear();
                shape.primary = 0;
                shape.details.clear();
            }
            Outcome::Failed => {}
        }
    }
    let facts = Facts::new(&input, kind, verdict.as_ref());
    Digest {
        kind,
        summary: assemble(settings.summary_max_chars, notes, &shape, &facts),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

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
}
