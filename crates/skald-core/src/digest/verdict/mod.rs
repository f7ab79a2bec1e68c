//! Verdicts of test runners, linters and type checkers: the summary line, pass or fail, the
//! first failing test and the first exception, read from the runner's own output.
//!
//! A digest that only sees level words and error lines misreads test output: a passing ExUnit
//! run whose application logged errors looks like a failing log, a failing one loses its
//! `12 failures` tally under the first stack frame, a linter's error count drowns in its paths.
//! Every runner states its verdict in a summary line of its own; this module recognises those
//! lines, table-driven, and the facts put the verdict first.
//!
//! # The tables
//!
//! Each family module (`elixir`, `python`, `rust`, `js`, `jvm`, `native`, `ruby_php`) lists
//! [`Rule`]s: a [`Tool`], a [`Role`] and a pattern.
//!
//! - [`Role::Anchor`]: a summary line that identifies the tool (`43 tests, 0 failures`). Matched
//!   as a whole line (leading and trailing blanks aside) in the last [`SUMMARY_WINDOW_BYTES`].
//! - [`Role::Support`]: a summary line that only counts once an anchor or evidence identified the
//!   tool (unittest's bare `OK`, ruff's and tsc's shared `Found 2 errors.`).
//! - [`Role::Evidence`]: a line that identifies the tool but states no verdict (a tsc error
//!   row); not shown.
//! - [`Role::Failure`]: where the first failing test is named, in a capture group `name`.
//! - [`Role::Exception`]: where the first exception is stated, in `show` (and `msg`, a message
//!   on the next line); rules are tried in table order, the first that matches anywhere wins.
//!
//! The outcome is read from the summary lines shown: a line fails when a capture group whose
//! name starts with `fail` took part in the match and is not the number 0 (`(?P<fail>\d+)
//! failures` fails at `4 failures`, `BUILD (?P<fail>FAILURE)` fails whenever it matches). Where
//! several tools match, the wrapper wins (pre-commit over the linters it runs), then a test
//! runner over a build tool, then the tool whose summary comes last. Carriage returns are removed
//! before matching (colours are gone already: the digest strips them from every input).

mod elixir;
mod js;
mod jvm;
mod native;
mod python;
mod ruby_php;
mod rust;

use std::borrow::Cow;
use std::sync::{LazyLock, OnceLock};

use regex::{Captures, Regex, RegexSet};

use super::input::Input;
use super::text::{clean_inline, suffix_bytes};

/// Summary lines are looked for in this many bytes at the end of the output: runners print
/// them last, and the bound keeps the cost of a digest independent of the output's size.
const SUMMARY_WINDOW_BYTES: usize = 16 * 1024;

/// Most summary lines shown for one verdict.
const MAX_SUMMARY_LINES: usize = 2;

/// The runners and checkers recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tool {
    ExUnit,
    Credo,
    Dialyzer,
    Pytest,
    Unittest,
    Mypy,
    Ruff,
    PreCommit,
    CargoTest,
    Nextest,
    Cargo,
    GoTest,
    Ctest,
    Jest,
    Vitest,
    Mocha,
    Eslint,
    Tsc,
    Maven,
    Gradle,
    Dotnet,
    Rspec,
    Minitest,
    Phpunit,
}

impl Tool {
    /// The name a summary shows.
    fn name(self) -> &'static str {
        match self {
            Tool::ExUnit => "mix test",
            Tool::Credo => "credo",
            Tool::Dialyzer => "dialyzer",
            Tool::Pytest => "pytest",
            Tool::Unittest => "unittest",
            Tool::Mypy => "mypy",
            Tool::Ruff => "ruff",
            Tool::PreCommit => "pre-commit",
            Tool::CargoTest => "cargo test",
            Tool::Nextest => "nextest",
            Tool::Cargo => "cargo",
            Tool::GoTest => "go test",
            Tool::Ctest => "ctest",
            Tool::Jest => "jest",
            Tool::Vitest => "vitest",
            Tool::Mocha => "mocha",
            Tool::Eslint => "eslint",
            Tool::Tsc => "tsc",
            Tool::Maven => "maven",
            Tool::Gradle => "gradle",
            Tool::Dotnet => "dotnet",
            Tool::Rspec => "rspec",
            Tool::Minitest => "minitest",
            Tool::Phpunit => "phpunit",
        }
    }

    /// Which tool wins when several match: a wrapper reports on the tools it ran, a test run
    /// includes its build.
    fn rank(self) -> u8 {
        match self {
            Tool::PreCommit => 3,
            Tool::ExUnit
            | Tool::Pytest
            | Tool::Unittest
            | Tool::CargoTest
            | Tool::Nextest
            | Tool::GoTest
            | Tool::Ctest
            | Tool::Jest
            | Tool::Vitest
            | Tool::Mocha
            | Tool::Rspec
            | Tool::Minitest
            | Tool::Phpunit
            | Tool::Maven
            | Tool::Gradle
            | Tool::Dotnet => 2,
            Tool::Credo
            | Tool::Dialyzer
            | Tool::Mypy
            | Tool::Ruff
            | Tool::Cargo
            | Tool::Eslint
            | Tool::Tsc => 1,
        }
    }
}

impl Tool {
    /// Whether the tool states one tally over lines of which only one fails (mocha's
    /// `2 passing` / `1 failing`, unittest's `Ran 3 tests` / `FAILED (failures=1)`).
    fn splits_tally(self) -> bool {
        match self {
            Tool::Mocha | Tool::Unittest => true,
            Tool::ExUnit
            | Tool::Credo
            | Tool::Dialyzer
            | Tool::Pytest
            | Tool::Mypy
            | Tool::Ruff
            | Tool::PreCommit
            | Tool::CargoTest
            | Tool::Nextest
            | Tool::Cargo
            | Tool::GoTest
            | Tool::Ctest
            | Tool::Jest
            | Tool::Vitest
            | Tool::Eslint
            | Tool::Tsc
            | Tool::Maven
            | Tool::Gradle
            | Tool::Dotnet
            | Tool::Rspec
            | Tool::Minitest
            | Tool::Phpunit => false,
        }
    }
}

/// What a rule's pattern finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Anchor,
    Support,
    Evidence,
    Failure,
    Exception,
}

/// One row of a family's table.
pub(super) struct Rule {
    pub(super) tool: Tool,
    pub(super) role: Role,
    pub(super) pattern: &'static str,
}

/// Shorthand for the tables.
pub(super) const fn rule(tool: Tool, role: Role, pattern: &'static str) -> Rule {
    Rule {
        tool,
        role,
        pattern,
    }
}

/// Whether a run passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Passed,
    Failed,
}

/// What a runner's output says of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Verdict {
    pub(super) tool: &'static str,
    pub(super) outcome: Outcome,
    /// The runner's summary lines, joined.
    pub(super) summary: String,
    pub(super) first_failure: Option<String>,
    pub(super) exception: Option<String>,
}

impl Verdict {
    /// The status a summary shows: `passed: 43 tests, 0 failures`.
    pub(super) fn status(&self) -> String {
        let word = match self.outcome {
            Outcome::Passed => "passed",
            Outcome::Failed => "FAILED",
        };
        format!("{word}: {}", self.summary)
    }
}

fn all_rules() -> impl Iterator<Item = &'static Rule> {
    elixir::RULES
        .iter()
        .chain(python::RULES)
        .chain(rust::RULES)
        .chain(js::RULES)
        .chain(jvm::RULES)
        .chain(native::RULES)
        .chain(ruby_php::RULES)
}

/// A rule whose regex is compiled the first time a text needs it. Why: compiling every
/// rule's regex (Unicode classes make each a sizeable automaton) took some 30 ms, which a
/// one-shot process (a `skald hook` digesting one output) paid in full for the few rules one
/// output ever reaches: the set below says which line rules can match, and only the recognised
/// tool's failure and exception rules run.
struct LazyRule {
    tool: Tool,
    role: Role,
    source: String,
    regex: OnceLock<Regex>,
}

impl LazyRule {
    fn new(tool: Tool, role: Role, source: String) -> LazyRule {
        LazyRule {
            tool,
            role,
            source,
            regex: OnceLock::new(),
        }
    }

    #[allow(clippy::expect_used)] // The tables are constants, every pattern compiled by the tests.
    fn regex(&self) -> &Regex {
        self.regex
            .get_or_init(|| Regex::new(&self.source).expect("verdict pattern compiles"))
    }
}

struct Compiled {
    /// Every line rule, for one pass that says which can match at all.
    lines_set: RegexSet,
    /// Summary, support and evidence rules, in the set's order.
    lines: Vec<LazyRule>,
    /// Failure and exception rules.
    finds: Vec<LazyRule>,
}

/// A line rule's pattern as matched: a whole line, blanks at either end aside.
fn line_pattern(pattern: &str) -> String {
    format!(r"(?m)^[ \t]*(?:{pattern})[ \t]*$")
}

/// `pattern` widened for the set that says which line rules can match: each Unicode class
/// escape replaced by a class that is cheap to compile and matches at least as much — `\d`,
/// `\w` and `\s` also match any non-ASCII character, `\S` any character but an ASCII blank —
/// so the set flags every rule whose own regex matches (that regex then decides), without
/// compiling Unicode's digit, word and space tables, most of the set's cost. Widening inside a
/// negated class would narrow it: the rule tables have no such escape there (a test checks).
fn prefilter_pattern(pattern: &str) -> String {
    const NON_ASCII: &str = r"\x{80}-\x{10FFFF}";
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut class_depth = 0usize;
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(escaped) = chars.next() else {
                    out.push(c);
                    break;
                };
                let class = match escaped {
                    'd' => format!("0-9{NON_ASCII}"),
                    'w' => format!("0-9A-Za-z_{NON_ASCII}"),
                    's' => format!(r"\t\n\x0B\x0C\r {NON_ASCII}"),
                    // A nested class, which the regex crate unions inside a class too.
                    'S' => {
                        out.push_str(r"[^\t\n\x0B\x0C\r ]");
                        continue;
                    }
                    _ => {
                        out.push(c);
                        out.push(escaped);
                        continue;
                    }
                };
                if class_depth > 0 {
                    out.push_str(&class);
                } else {
                    out.push('[');
                    out.push_str(&class);
                    out.push(']');
                }
            }
            '[' => {
                class_depth += 1;
                out.push(c);
            }
            ']' if class_depth > 0 => {
                class_depth -= 1;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

#[allow(clippy::expect_used)] // The tables are constants, every pattern compiled by the tests.
static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    let mut lines = Vec::new();
    let mut finds = Vec::new();
    for rule in all_rules() {
        match rule.role {
            Role::Anchor | Role::Support | Role::Evidence => lines.push(LazyRule::new(
                rule.tool,
                rule.role,
                line_pattern(rule.pattern),
            )),
            Role::Failure | Role::Exception => finds.push(LazyRule::new(
                rule.tool,
                rule.role,
                format!("(?m){}", rule.pattern),
            )),
        }
    }
    let lines_set = RegexSet::new(lines.iter().map(|rule| prefilter_pattern(&rule.source)))
        .expect("verdict patterns compile as a set");
    Compiled {
        lines_set,
        lines,
        finds,
    }
});

/// A summary line found: where, by which rule, what it says.
struct Found<'a> {
    at: usize,
    tool: Tool,
    role: Role,
    text: &'a str,
    failed: bool,
}

/// Whether a summary line's captures say the run failed (see the module documentation).
fn fails(regex: &Regex, captures: &Captures<'_>) -> bool {
    regex.capture_names().flatten().any(|name| {
        name.starts_with("fail")
            && captures
                .name(name)
                .is_some_and(|m| m.as_str().parse::<u64>().ok().is_none_or(|n| n != 0))
    })
}

/// The verdict `input` states, if it is the output of a runner or checker this module knows.
pub(super) fn recognize(input: &Input<'_>) -> Option<Verdict> {
    let clean = without_returns(input.body);
    let window = suffix_bytes(&clean, SUMMARY_WINDOW_BYTES);
    let compiled = &*COMPILED;
    let mut found: Vec<Found<'_>> = Vec::new();
    for index in compiled.lines_set.matches(window).iter() {
        let Some(rule) = compiled.lines.get(index) else {
            continue;
        };
        let regex = rule.regex();
        for captures in regex.captures_iter(window) {
            let Some(whole) = captures.get(0) else {
                continue;
            };
            found.push(Found {
                at: whole.start(),
                tool: rule.tool,
                role: rule.role,
                text: whole.as_str(),
                failed: fails(regex, &captures),
            });
        }
    }
    let identifying = |f: &Found<'_>| matches!(f.role, Role::Anchor | Role::Evidence);
    let tool = found
        .iter()
        .filter(|f| identifying(f))
        .max_by_key(|f| (f.tool.rank(), f.at))
        .map(|f| f.tool)?;
    let mut shown: Vec<&Found<'_>> = found
        .iter()
        .filter(|f| f.tool == tool && matches!(f.role, Role::Anchor | Role::Support))
        .collect();
    shown.sort_by_key(|f| f.at);
    shown.dedup_by(|a, b| a.text.trim() == b.text.trim());
    if shown.is_empty() {
        return None;
    }
    let outcome = if shown.iter().any(|f| f.failed) {
        Outcome::Failed
    } else {
        Outcome::Passed
    };
    let summary = if tool == Tool::PreCommit {
        hook_tally(&shown)
    } else {
        summary_text(&shown, outcome, tool.splits_tally())
    };
    let (first_failure, exception) = match outcome {
        Outcome::Passed => (None, None),
        Outcome::Failed => {
            let exception = if tool == Tool::PreCommit {
                // A hook's own tally (`Found 3 errors.`) is what the agent needs from it.
                inner_tally(&found).or_else(|| find(tool, Role::Exception, &clean))
            } else {
                find(tool, Role::Exception, &clean)
            };
            (find(tool, Role::Failure, &clean), exception)
        }
    };
    Some(Verdict {
        tool: display_name(tool, &clean),
        outcome,
        summary,
        first_failure,
        exception,
    })
}

/// `cargo` runs clippy as well as the compiler; clippy's lints name themselves.
fn display_name(tool: Tool, clean: &str) -> &'static str {
    match tool {
        Tool::Cargo if clean.contains("clippy::") => "clippy",
        Tool::ExUnit
        | Tool::Credo
        | Tool::Dialyzer
        | Tool::Pytest
        | Tool::Unittest
        | Tool::Mypy
        | Tool::Ruff
        | Tool::PreCommit
        | Tool::CargoTest
        | Tool::Nextest
        | Tool::Cargo
        | Tool::GoTest
        | Tool::Ctest
        | Tool::Jest
        | Tool::Vitest
        | Tool::Mocha
        | Tool::Eslint
        | Tool::Tsc
        | Tool::Maven
        | Tool::Gradle
        | Tool::Dotnet
        | Tool::Rspec
        | Tool::Minitest
        | Tool::Phpunit => tool.name(),
    }
}

/// The summary lines shown: all of them when few, else the first failing one and the last. Of a
/// failed run, lines that passed are about something else (another package, another test
/// binary, the build's warnings) and left out, unless the tool splits one tally over lines.
fn summary_text(shown: &[&Found<'_>], outcome: Outcome, splits_tally: bool) -> String {
    let shown: Vec<&Found<'_>> = match outcome {
        Outcome::Failed if !splits_tally => shown.iter().copied().filter(|f| f.failed).collect(),
        Outcome::Failed | Outcome::Passed => shown.to_vec(),
    };
    let picked: Vec<&Found<'_>> = if shown.len() <= MAX_SUMMARY_LINES {
        shown
    } else {
        let first = shown
            .iter()
            .find(|f| f.failed)
            .or_else(|| shown.first())
            .copied();
        let last = shown.last().copied();
        let mut picked: Vec<&Found<'_>> = first.into_iter().chain(last).collect();
        picked.dedup_by_key(|f| f.at);
        picked
    };
    // `FAILED: error: could not compile …` says "error" twice.
    picked
        .iter()
        .map(|f| display_line(f.text, 160))
        .map(|line| match line.strip_prefix("error: ") {
            Some(rest) => rest.to_owned(),
            None => line,
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// pre-commit's hook lines as a tally (`1 of 6 hooks failed: ruff`); a hand-written hook's own
/// line as it is.
fn hook_tally(shown: &[&Found<'_>]) -> String {
    let mut hooks = 0;
    let mut skipped = 0;
    let mut failed: Vec<&str> = Vec::new();
    let mut prose: Vec<String> = Vec::new();
    for found in shown {
        let text = found.text.trim();
        match text.find("....") {
            Some(dots) => {
                hooks += 1;
                if found.failed {
                    failed.push(text.get(..dots).unwrap_or(text).trim());
                } else if text.ends_with("Skipped") {
                    skipped += 1;
                }
            }
            None => prose.push(display_line(text, 160)),
        }
    }
    let mut parts = prose;
    if hooks > 0 {
        let mut tally = if failed.is_empty() {
            format!("{hooks} hooks passed")
        } else {
            format!(
                "{} of {hooks} hooks failed: {}",
                failed.len(),
                failed.join(", ")
            )
        };
        if skipped > 0 {
            tally.push_str(&format!(" ({skipped} skipped)"));
        }
        parts.push(clean_inline(&tally, 160));
    }
    parts.join("; ")
}

/// A failing summary line of another tool that a wrapper ran, as `tool: line`.
fn inner_tally(found: &[Found<'_>]) -> Option<String> {
    found
        .iter()
        .filter(|f| f.tool != Tool::PreCommit && f.failed)
        .min_by_key(|f| f.at)
        .map(|f| format!("{}: {}", f.tool.name(), display_line(f.text, 120)))
}

/// The first match of `tool`'s rules of `role`, in table order, as display text.
fn find(tool: Tool, role: Role, clean: &str) -> Option<String> {
    COMPILED
        .finds
        .iter()
        .filter(|rule| rule.tool == tool && rule.role == role)
        .find_map(|rule| {
            rule.regex().captures_iter(clean).find_map(|captures| {
                let main = captures
                    .name("name")
                    .or_else(|| captures.name("show"))?
                    .as_str();
                if role == Role::Exception && is_wrapup(main) {
                    return None;
                }
                let text = match captures.name("msg") {
                    Some(msg) if !msg.as_str().trim().is_empty() => {
                        format!(
                            "{}: {}",
                            main.trim().trim_end_matches(':'),
                            msg.as_str().trim()
                        )
                    }
                    Some(_) | None => main.to_owned(),
                };
                let shown = display_line(&text, 200);
                (!shown.is_empty()).then_some(shown)
            })
        })
}

/// Closing lines that restate a failure rather than say what it was.
fn is_wrapup(line: &str) -> bool {
    let t = line.trim_start();
    [
        "error: could not compile",
        "error: aborting due to",
        "error: test failed",
        "error: Recipe",
        "error: process didn't exit successfully",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

/// One line of display text: decorations (`===`, a trailing `:`) and a Maven level tag
/// (`[INFO] `) trimmed, and cut at an escaped newline (`\n` written out), which only
/// JSON-escaped text inside an output holds.
fn display_line(text: &str, max: usize) -> String {
    let text = text.split("\\n").next().unwrap_or(text).trim();
    let text = ["[INFO] ", "[WARNING] ", "[ERROR] "]
        .iter()
        .find_map(|tag| text.strip_prefix(tag))
        .unwrap_or(text);
    clean_inline(
        text.trim_matches(|c: char| c == '=' || c == ':' || c.is_whitespace()),
        max,
    )
}

/// `text` without carriage returns, which `(?m)$` would not match before.
fn without_returns(text: &str) -> Cow<'_, str> {
    if text.contains('\r') {
        Cow::Owned(text.replace('\r', ""))
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn every_pattern_compiles_with_the_groups_its_role_reads() {
        for rule in all_rules() {
            let source = match rule.role {
                Role::Anchor | Role::Support | Role::Evidence => line_pattern(rule.pattern),
                Role::Failure | Role::Exception => format!("(?m){}", rule.pattern),
            };
            let regex = Regex::new(&source).unwrap_or_else(|e| panic!("{}: {e}", rule.pattern));
            let names: Vec<&str> = regex.capture_names().flatten().collect();
            match rule.role {
                Role::Failure => assert!(names.contains(&"name"), "{}", rule.pattern),
                Role::Exception => assert!(names.contains(&"show"), "{}", rule.pattern),
                Role::Anchor | Role::Support | Role::Evidence => {}
            }
        }
        assert!(!COMPILED.lines.is_empty());
    }

    #[test]
    fn the_prefilter_widens_only_where_widening_cannot_narrow() {
        for rule in all_rules() {
            // No class escape inside a negated class.
            let mut rest = rule.pattern;
            while let Some(at) = rest.find("[^") {
                let class = &rest[at..];
                let end = class.find(']').unwrap_or(class.len());
                for escape in [r"\d", r"\w", r"\s", r"\S"] {
                    assert!(!class[..end].contains(escape), "{}", rule.pattern);
                }
                rest = &class[2..];
            }
        }
        assert_eq!(prefilter_pattern(r"a\d+"), r"a[0-9\x{80}-\x{10FFFF}]+");
        assert_eq!(
            prefilter_pattern(r"[\w.]"),
            r"[0-9A-Za-z_\x{80}-\x{10FFFF}.]"
        );
        assert_eq!(prefilter_pattern(r"\S+\.\t"), r"[^\t\n\x0B\x0C\r ]+\.\t");
        assert_eq!(
            prefilter_pattern(r"[\w\\]"),
            r"[0-9A-Za-z_\x{80}-\x{10FFFF}\\]"
        );
    }

    #[test]
    fn the_set_flags_every_line_rule_its_own_regex_matches_non_ascii_digits_included() {
        let compiled = &*COMPILED;
        let lines = [
            "===== 3 failed, 10 passed in 1.20s =====",
            "===== ٣ failed, ١٠ passed in 1.20s =====",
            "test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out",
            "Tests:       1 failed, 5 passed, 6 total",
            "  résumé_spec.rb:12 ✗ fails",
        ];
        for line in lines {
            let flagged: Vec<usize> = compiled.lines_set.matches(line).iter().collect();
            for (index, rule) in compiled.lines.iter().enumerate() {
                if rule.regex().is_match(line) {
                    assert!(flagged.contains(&index), "{line:?}: {}", rule.source);
                }
            }
        }
    }

    #[test]
    fn carriage_returns_are_removed() {
        assert_eq!(
            without_returns("5 tests, 0 failures\r\n"),
            "5 tests, 0 failures\n"
        );
        assert!(matches!(without_returns("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn outcome_comes_from_fail_groups() {
        let input = Input::new("Running ExUnit with seed: 1\n\n...\n\n5 tests, 0 failures\n");
        let verdict = recognize(&input).unwrap();
        assert_eq!(verdict.outcome, Outcome::Passed);
        assert_eq!(verdict.summary, "5 tests, 0 failures");
        let input = Input::new("5 tests, 2 failures\n");
        assert_eq!(recognize(&input).unwrap().outcome, Outcome::Failed);
        assert!(recognize(&Input::new("we ran tests, no failures")).is_none());
    }

    #[test]
    fn support_lines_need_their_tool() {
        assert!(recognize(&Input::new("OK\n")).is_none());
        assert!(recognize(&Input::new("Found 2 errors.\n")).is_none());
    }
}
