//! Facts every kind keeps: exit code, status, first error, failing tests, identifiers.
//!
//! These are the exact strings an agent later needs, whatever the kind; [`Facts`] gathers them
//! apart from the kind's own summary so that assembly can give them space first. The identifiers
//! are ranked in `ranking`.

use std::sync::LazyLock;

use regex::Regex;

use crate::identifiers::contains_short;

use super::ContentKind;
use super::input::{Input, LINE_HEAD_BYTES, Line};
use super::lines::{find_timestamp, log_level};
use super::ranking::rank_identifiers;
use super::scan::first_word;
use super::show::push_unique;
use super::text::{
    clean_inline, prefix_bytes, suffix_bytes, trim_end_fast, trim_fast, trim_start_fast,
};
use super::verdict::{Outcome, Verdict};

#[allow(clippy::expect_used)]
static EXIT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)(?:exit(?:ed with)?[ _](?:code|status)|return ?code|process exited with code)",
        r"\s*[:=]?\s*(-?[0-9]{1,4})\b",
    ))
    .expect("exit pattern compiles")
});

pub(super) struct Facts {
    pub(super) exit_code: Option<String>,
    pub(super) status: Option<String>,
    pub(super) error_line: Option<String>,
    pub(super) failed_tests: Vec<String>,
    /// Identifiers, best first (display strings).
    pub(super) identifiers: Vec<String>,
    pub(super) key_lines: Vec<String>,
}

impl Facts {
    pub(super) fn new(input: &Input<'_>, kind: ContentKind, verdict: Option<&Verdict>) -> Facts {
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
        let mut facts = Facts {
            exit_code,
            status,
            error_line,
            failed_tests: failed_tests(input),
            identifiers: rank_identifiers(input, error_index),
            key_lines: key_lines(input, error_index, kind),
        };
        if let Some(verdict) = verdict {
            facts.apply(verdict);
        }
        facts
    }

    /// Puts a runner's verdict first: its summary as the status, its first exception as the
    /// error, its first failing test first. A passing run shows no error lines: what a passing
    /// run logs at ERROR level is its application's business, not the run's result.
    fn apply(&mut self, verdict: &Verdict) {
        let status = verdict.status();
        // A line the status already shows (`error: test run failed`) is not news.
        if self
            .error_line
            .as_ref()
            .is_some_and(|line| contains_short(&status, line))
        {
            self.error_line = None;
        }
        self.key_lines.retain(|line| !contains_short(&status, line));
        self.status = Some(status);
        match verdict.outcome {
            Outcome::Passed => {
                self.error_line = None;
                self.key_lines.clear();
                self.failed_tests.clear();
            }
            Outcome::Failed => {
                if let Some(exception) = &verdict.exception {
                    if let Some(previous) = self.error_line.replace(exception.clone()) {
                        if !self.key_lines.contains(&previous) && &previous != exception {
                            self.key_lines.insert(0, previous);
                            self.key_lines.truncate(3);
                        }
                    }
                }
                if let Some(first) = &verdict.first_failure {
                    self.failed_tests.retain(|name| name != first);
                    self.failed_tests.insert(0, first.clone());
                }
            }
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
pub(super) fn exception_names(text: &str) -> impl Iterator<Item = &str> {
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
pub(super) fn is_exception_name(word: &str) -> bool {
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
pub(super) fn error_rank(line: &str) -> Option<u8> {
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
        // Elixir's `** (RuntimeError) message`.
        b'*' => t.starts_with("** (") && t.contains(')'),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

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
}
