//! Advice in a tool's memory, learned without a model (issue 28, gap 10; seed 002's tool
//! memories "what worked, what failed"): each call is counted under its **argument pattern** —
//! for a shell command the program and its subcommand (`cargo test`, `git push`), for any other
//! tool the names of the arguments it was given (`file_path, limit`) — with how many calls of
//! the pattern succeeded and the error the last failed one got. The system prompt's tool
//! section then says which patterns worked and which failed, and with what.
//!
//! ```
//! use serde_json::json;
//! use skald_core::memory::tool_advice::argument_pattern;
//!
//! assert_eq!(
//!     argument_pattern(&json!({"command": "cd app && RUST_LOG=debug cargo test -p core"})),
//!     Some("cargo test".to_owned())
//! );
//! assert_eq!(
//!     argument_pattern(&json!({"file_path": "/a.rs", "limit": 20})),
//!     Some("file_path, limit".to_owned())
//! );
//! ```

use std::cmp::Reverse;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Patterns kept per tool; a new one takes the place of the least used.
pub const MAX_PATTERNS: usize = 12;

/// A pattern needs this many calls before it is advice.
pub const MIN_PATTERN_CALLS: u64 = 2;

/// Patterns named per line of advice.
const PATTERNS_SHOWN: usize = 3;

/// Characters of a pattern.
const MAX_PATTERN_CHARS: usize = 60;

/// The arguments that hold a shell command.
const COMMAND_FIELDS: [&str; 4] = ["command", "cmd", "script", "commands"];

/// Words that run the command after them (`sudo make`, `env X=1 make`).
const WRAPPERS: [&str; 6] = ["sudo", "env", "time", "nohup", "exec", "command"];

/// How the calls of one argument pattern went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatternStats {
    /// The pattern ([`argument_pattern`]).
    pub pattern: String,
    /// Calls made with it.
    pub calls: u64,
    /// Of those, the calls that succeeded.
    pub successes: u64,
    /// The error pattern of its latest failed call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The pattern a call's `arguments` (its parsed JSON object) is counted under: a shell
/// command's program and subcommand, else the sorted names of its arguments. `None` for
/// arguments that are not an object, or an empty one.
pub fn argument_pattern(arguments: &Value) -> Option<String> {
    let object = arguments.as_object()?;
    for field in COMMAND_FIELDS {
        let command = match object.get(field) {
            Some(Value::String(text)) => Some(text.as_str()),
            Some(Value::Array(parts)) => parts.first().and_then(Value::as_str),
            Some(_) | None => None,
        };
        if let Some(pattern) = command.and_then(shell_pattern) {
            return Some(pattern);
        }
    }
    if object.is_empty() {
        return None;
    }
    let mut names: Vec<&str> = object.keys().map(String::as_str).collect();
    names.sort_unstable();
    Some(cut(&names.join(", ")))
}

/// The program and subcommand of the first command of a shell line that is not a `cd`.
fn shell_pattern(command: &str) -> Option<String> {
    let line = command
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    let segment = line
        .split(['&', '|', ';'])
        .map(str::trim)
        .find(|segment| !segment.is_empty() && !segment.starts_with("cd ") && *segment != "cd")?;
    let mut words = segment
        .split_whitespace()
        .skip_while(|word| is_assignment(word) || WRAPPERS.contains(word) || word.starts_with('-'));
    let program = words.next()?;
    let program = program.rsplit('/').next().unwrap_or(program);
    let program = program.trim_matches(|c| c == '"' || c == '\'' || c == '(');
    if program.is_empty() {
        return None;
    }
    let pattern = match words.next().filter(|word| is_subcommand(word)) {
        Some(subcommand) => format!("{program} {subcommand}"),
        None => program.to_owned(),
    };
    Some(cut(&pattern))
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// A word that names what a program does (`test`, `run`, `status`, `get-pods`), not a flag,
/// path or value (a value usually has a digit, a dot, a slash or a capital in it).
fn is_subcommand(word: &str) -> bool {
    word.len() <= 24
        && word.starts_with(|c: char| c.is_ascii_lowercase())
        && word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == '-' || c == ':')
}

fn cut(text: &str) -> String {
    text.chars().take(MAX_PATTERN_CHARS).collect()
}

/// Counts one call of `pattern` into `patterns` (most used first): a new pattern takes the
/// place of the least used when [`MAX_PATTERNS`] are kept.
pub fn record_pattern(
    patterns: &mut Vec<PatternStats>,
    pattern: &str,
    success: bool,
    error: Option<&str>,
) {
    let index = match patterns.iter().position(|known| known.pattern == pattern) {
        Some(index) => index,
        None => {
            if patterns.len() >= MAX_PATTERNS {
                patterns.pop();
            }
            patterns.push(PatternStats {
                pattern: pattern.to_owned(),
                calls: 0,
                successes: 0,
                last_error: None,
            });
            patterns.len() - 1
        }
    };
    if let Some(stats) = patterns.get_mut(index) {
        stats.calls = stats.calls.saturating_add(1);
        if success {
            stats.successes = stats.successes.saturating_add(1);
        } else if let Some(error) = error.filter(|error| !error.is_empty()) {
            stats.last_error = Some(error.to_owned());
        }
    }
    // Stable: among equal counts the older pattern stays ahead.
    patterns.sort_by_key(|known| Reverse(known.calls));
}

/// The advice lines of a tool's section: the patterns that worked (at least
/// [`MIN_PATTERN_CALLS`] calls, four in five or more succeeded) and those that failed (half or
/// more failed), each with its count and, for a failure, the error it got.
pub fn advice_lines(patterns: &[PatternStats]) -> Vec<String> {
    let enough = |stats: &&PatternStats| stats.calls >= MIN_PATTERN_CALLS;
    let worked: Vec<String> = patterns
        .iter()
        .filter(enough)
        .filter(|stats| stats.successes.saturating_mul(5) >= stats.calls.saturating_mul(4))
        .take(PATTERNS_SHOWN)
        .map(|stats| {
            format!(
                "`{}` ({} of {} ok)",
                stats.pattern, stats.successes, stats.calls
            )
        })
        .collect();
    let failed: Vec<String> = patterns
        .iter()
        .filter(enough)
        .filter(|stats| stats.successes.saturating_mul(2) <= stats.calls)
        .take(PATTERNS_SHOWN)
        .map(|stats| {
            let failures = stats.calls - stats.successes;
            match &stats.last_error {
                Some(error) => format!(
                    "`{}` ({failures} of {} failed: {error})",
                    stats.pattern, stats.calls
                ),
                None => format!("`{}` ({failures} of {} failed)", stats.pattern, stats.calls),
            }
        })
        .collect();
    let mut lines = Vec::new();
    if !worked.is_empty() {
        lines.push(format!("- Worked: {}", worked.join(", ")));
    }
    if !failed.is_empty() {
        lines.push(format!("- Failed: {}", failed.join("; ")));
    }
    lines
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn a_shell_calls_pattern_is_its_program_and_subcommand() {
        for (command, pattern) in [
            ("cargo test -p skald-core", "cargo test"),
            ("cd /repo && git status --short", "git status"),
            ("sudo -n apt-get install -y jq", "apt-get install"),
            ("FOO=1 BAR=2 make check", "make check"),
            ("/usr/bin/python3 -m pytest tests/", "python3"),
            ("ls -la /tmp", "ls"),
            ("psql -h db -c 'select 1'", "psql"),
            ("npm run build | tee log", "npm run"),
            ("echo step-1-ok", "echo"),
        ] {
            assert_eq!(
                argument_pattern(&json!({ "command": command })).as_deref(),
                Some(pattern),
                "{command}"
            );
        }
        assert_eq!(
            argument_pattern(&json!({"commands": ["kubectl get pods", "x"]})).as_deref(),
            Some("kubectl get")
        );
        // A command with no words is counted by its argument names.
        assert_eq!(
            argument_pattern(&json!({"command": "  "})).as_deref(),
            Some("command")
        );
        assert_eq!(argument_pattern(&json!({})), None);
        assert_eq!(argument_pattern(&json!("ls")), None);
        assert_eq!(
            argument_pattern(&json!({"path": "a", "offset": 3})).as_deref(),
            Some("offset, path")
        );
    }

    #[test]
    fn patterns_are_counted_and_the_least_used_leaves_first() {
        let mut patterns = Vec::new();
        for _ in 0..3 {
            record_pattern(&mut patterns, "cargo test", true, None);
        }
        for _ in 0..2 {
            record_pattern(
                &mut patterns,
                "psql",
                false,
                Some("bash: psql: command not found"),
            );
        }
        record_pattern(&mut patterns, "make", false, None);
        assert_eq!(patterns[0].pattern, "cargo test");
        assert_eq!(
            patterns[1].last_error.as_deref(),
            Some("bash: psql: command not found")
        );
        for n in 0..MAX_PATTERNS {
            record_pattern(&mut patterns, &format!("tool{n}"), true, None);
        }
        assert_eq!(patterns.len(), MAX_PATTERNS);
        assert!(patterns.iter().any(|stats| stats.pattern == "cargo test"));
        assert_eq!(
            advice_lines(&patterns[..2]),
            vec![
                "- Worked: `cargo test` (3 of 3 ok)".to_owned(),
                "- Failed: `psql` (2 of 2 failed: bash: psql: command not found)".to_owned(),
            ]
        );
    }
}
