//! The `## Tool Failures` appendix: the tool calls whose result reported failure
//! ([`collect_tool_failures`]), each with the line of its output that says what went wrong
//! ([`failure_message`]: an error line before an exit-code line, then the last line, then the
//! head).

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;
use serde_json::Value;

use super::TOOL_FAILURES_HEADING;
use crate::compaction::settings::ToolFailureSettings;
use crate::message::{Message, join_text};

/// A tool call that reported failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolFailure {
    /// The id of the failed call.
    pub call_id: String,
    /// The tool that failed (`tool` when neither the result nor its call names it).
    pub tool_name: String,
    /// The most informative part of the result's text ([`failure_message`]), whitespace
    /// collapsed, cut to the configured length.
    pub summary: String,
    /// `status=… exitCode=…` when the host recorded them.
    pub meta: Option<String>,
}

/// Every failed result (`is_error: true`) in `messages`, once per call id, in order
/// (`collectToolFailures`). The tool name comes from the result, else from its call, else
/// `tool`. The text is [`failure_message`] of the output; an empty one reads `failed` (or
/// `failed (no output)` without metadata).
///
/// `details` is host-only and never shown; from it only `status` (a short word) and `exitCode`
/// (an integer) are read, as OpenClaw does, because they are scalars the host itself derived.
pub fn collect_tool_failures(
    messages: &[Message],
    settings: &ToolFailureSettings,
) -> Vec<ToolFailure> {
    let call_names: HashMap<&str, &str> = messages
        .iter()
        .flat_map(|message| message.tool_calls())
        .map(|call| (call.id.as_str(), call.name.as_str()))
        .collect();
    let mut seen = BTreeSet::new();
    let mut failures = Vec::new();
    for result in messages.iter().flat_map(|message| message.tool_results()) {
        if !result.failed() || result.call_id.is_empty() || !seen.insert(result.call_id.clone()) {
            continue;
        }
        let tool_name = result
            .tool_name
            .as_deref()
            .filter(|name| !name.trim().is_empty())
            .or_else(|| call_names.get(result.call_id.as_str()).copied())
            .unwrap_or("tool")
            .to_owned();
        let meta = failure_meta(result.details.as_deref());
        let message = failure_message(&join_text(&result.content), settings.max_chars);
        let summary = if !message.is_empty() {
            message
        } else if meta.is_some() {
            "failed".to_owned()
        } else {
            "failed (no output)".to_owned()
        };
        failures.push(ToolFailure {
            call_id: result.call_id.clone(),
            tool_name,
            summary: cut_with_ellipsis(&summary, settings.max_chars),
            meta,
        });
    }
    failures
}

/// Words that make a line of failed output say what went wrong (compared without case).
const ERROR_CUES: &[&str] = &[
    "error",
    "failed",
    "failure",
    "exception",
    "panic",
    "fatal",
    "denied",
    "not found",
    "no such file",
    "cannot",
    "could not",
    "unable to",
    "timed out",
    "错误",
    "失败",
    "异常",
    "拒绝",
    "找不到",
    "不存在",
];

/// Words that only announce a failure ("Exit code 1", "Traceback (most recent call last):"):
/// such a line is taken when no line says what went wrong.
const ANNOUNCING_CUES: &[&str] = &["exit code", "exit status", "traceback"];

/// Which kind of error line a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ErrorLine {
    /// Says what went wrong.
    Telling,
    /// Says that something went wrong.
    Announcing,
    Neither,
}

/// The most informative part of a failed tool's output, whitespace collapsed, at most
/// `max_chars` characters (`...` included when cut; empty for empty output):
/// - the whole output when it fits;
/// - else the first line that says what went wrong (error, failed, exception, panic, fatal,
///   denied, not found, 错误, 失败…; compared without case; "0 failed" and "no errors" do
///   not count);
/// - else the first line that announces a failure (exit code, traceback): Claude Code starts
///   every failed command with "Exit code N", which says nothing a later line does not;
/// - else the last line with a word in it (logs end with their outcome);
/// - else the head of the output.
pub fn failure_message(text: &str, max_chars: usize) -> String {
    let whole = collapse_whitespace(text);
    if whole.chars().count() <= max_chars {
        return whole;
    }
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let first_of = |kind: ErrorLine| {
        lines
            .iter()
            .find(|line| error_line_kind(line) == kind)
            .copied()
    };
    let chosen = first_of(ErrorLine::Telling)
        .or_else(|| first_of(ErrorLine::Announcing))
        .or_else(|| {
            lines
                .iter()
                .rev()
                .find(|line| line.chars().filter(|c| c.is_alphanumeric()).count() >= 3)
                .copied()
        });
    let part = chosen.map_or(whole, collapse_whitespace);
    cut_with_ellipsis(&part, max_chars)
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn error_line_kind(line: &str) -> ErrorLine {
    // ASCII folding keeps byte offsets, so a match can be looked up in the original line.
    let folded = line.to_ascii_lowercase();
    if ERROR_CUES
        .iter()
        .any(|cue| reports_error(line, &folded, cue))
    {
        ErrorLine::Telling
    } else if ANNOUNCING_CUES.iter().any(|cue| folded.contains(cue)) {
        ErrorLine::Announcing
    } else {
        ErrorLine::Neither
    }
}

/// True when `line` holds `cue` as a report rather than a count of none ("0 failed",
/// "no errors", "Errors: 0"). The cue may end a CamelCase name ("RuntimeError",
/// "AccessDenied") but not start inside a lowercase word ("terror" is no error).
fn reports_error(line: &str, folded: &str, cue: &str) -> bool {
    folded.match_indices(cue).any(|(at, _)| {
        let head = folded.get(..at).unwrap_or("");
        // Chinese has no spaces between words: a CJK cue is never glued.
        let glued = cue.is_ascii() && head.chars().next_back().is_some_and(char::is_alphanumeric);
        let camel_case = line
            .get(at..)
            .and_then(|tail| tail.chars().next())
            .is_some_and(|c| c.is_ascii_uppercase());
        let previous_word = head.split_whitespace().next_back().unwrap_or("");
        let counted_none = head.ends_with(' ') && matches!(previous_word, "0" | "no" | "zero");
        let tail = folded.get(at + cue.len()..).unwrap_or("");
        let count = tail
            .trim_start_matches(|c: char| c.is_ascii_alphabetic())
            .trim_start_matches([':', '=', ' ']);
        let zero_after = count.starts_with('0')
            && !count
                .chars()
                .nth(1)
                .is_some_and(|c| c.is_ascii_digit() || c == '.' || c == 'x');
        (!glued || camel_case) && !counted_none && !zero_after
    })
}

fn failure_meta(details: Option<&Value>) -> Option<String> {
    let record = details?.as_object()?;
    let mut parts = Vec::new();
    if let Some(status) = record.get("status").and_then(Value::as_str) {
        let plain = !status.is_empty()
            && status.len() <= 32
            && status
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if plain {
            parts.push(format!("status={status}"));
        }
    }
    if let Some(code) = record.get("exitCode").and_then(Value::as_i64) {
        parts.push(format!("exitCode={code}"));
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// `text` cut to `max` characters, the last three being `...` when cut.
pub(super) fn cut_with_ellipsis(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(3)).collect();
    out.push_str("...");
    out
}

/// The `## Tool Failures` section: at most `max` lines `- tool (meta): text`, then
/// `- ...and N more`. Empty when there is no failure or `max` is 0.
pub fn format_tool_failures(failures: &[ToolFailure], max: usize) -> String {
    if failures.is_empty() || max == 0 {
        return String::new();
    }
    let mut lines = vec![TOOL_FAILURES_HEADING.to_owned()];
    for failure in failures.iter().take(max) {
        let meta = failure
            .meta
            .as_ref()
            .map(|meta| format!(" ({meta})"))
            .unwrap_or_default();
        lines.push(format!(
            "- {}{meta}: {}",
            failure.tool_name, failure.summary
        ));
    }
    if failures.len() > max {
        lines.push(format!("- ...and {} more", failures.len() - max));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;
    use crate::compaction::appendices::tests::{call, failed};
    use crate::message::Block;

    #[test]
    fn tool_failures_are_formatted_like_the_seed() {
        let messages = vec![
            call("c1", "bash", json!({"command": "make"})),
            failed(
                "c1",
                None,
                "make: ***   No rule\n to make target",
                Some(json!({"status": "error", "exitCode": 2})),
            ),
            failed("c2", Some("read_file"), "", None),
            failed("c3", Some("web"), "", Some(json!({"exitCode": 1}))),
        ];
        let failures = collect_tool_failures(&messages, &ToolFailureSettings::default());
        assert_eq!(
            format_tool_failures(&failures, 8),
            "## Tool Failures\n\
             - bash (status=error exitCode=2): make: *** No rule to make target\n\
             - read_file: failed (no output)\n\
             - web (exitCode=1): failed"
        );
    }

    #[test]
    fn tool_failures_dedupe_by_call_and_skip_successes() {
        let mut ok = failed("c9", Some("bash"), "fine", None);
        if let Some(Block::ToolResult(result)) = ok.content.first_mut() {
            result.is_error = Some(false);
        }
        let messages = vec![
            failed("c1", Some("bash"), "boom", None),
            failed("c1", Some("bash"), "boom again", None),
            ok,
        ];
        let failures = collect_tool_failures(&messages, &ToolFailureSettings::default());
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].summary, "boom");
    }

    #[test]
    fn tool_failures_cap_at_eight_and_240_chars() {
        let messages: Vec<Message> = (0..10)
            .map(|i| failed(&format!("c{i}"), Some("bash"), &"e".repeat(500), None))
            .collect();
        let failures = collect_tool_failures(&messages, &ToolFailureSettings::default());
        assert_eq!(failures[0].summary.chars().count(), 240);
        assert!(failures[0].summary.ends_with("..."));
        let section = format_tool_failures(&failures, 8);
        assert_eq!(section.lines().count(), 1 + 8 + 1);
        assert!(section.ends_with("- ...and 2 more"));
        assert_eq!(format_tool_failures(&[], 8), "");
    }

    /// A failed build log like the engine fixture's: a head line, a long run of progress, and
    /// the error line last.
    fn build_log(error_line: &str) -> String {
        format!(
            "build 2 commit 9f8e7d6c5b4a0002\n{}\n{error_line}\n",
            "compiling module ... ".repeat(40)
        )
    }

    #[test]
    fn failure_message_keeps_a_short_output_whole() {
        assert_eq!(
            failure_message("Exit code 1\n(eval):1: permission   denied:", 240),
            "Exit code 1 (eval):1: permission denied:"
        );
        assert_eq!(failure_message(" \n\t ", 240), "");
    }

    #[test]
    fn failure_message_takes_the_first_error_line() {
        let log = build_log("error: linker failed at /srv/app/src/main_2.rs");
        assert_eq!(
            failure_message(&log, 240),
            "error: linker failed at /srv/app/src/main_2.rs"
        );
        let messages = vec![failed("c1", Some("bash"), &log, None)];
        let failures = collect_tool_failures(&messages, &ToolFailureSettings::default());
        assert_eq!(
            format_tool_failures(&failures, 8),
            "## Tool Failures\n- bash: error: linker failed at /srv/app/src/main_2.rs"
        );
        // The first of several, whatever its case or cue.
        let log = format!(
            "{}\nPermission DENIED: /var/run/docker.sock\nError: second\n",
            "step ok\n".repeat(40)
        );
        assert_eq!(
            failure_message(&log, 240),
            "Permission DENIED: /var/run/docker.sock"
        );
        let python = format!(
            "Traceback (most recent call last):\n{}ValueError: bad port 'x'\n",
            "  File \"app.py\", line 3, in <module>\n".repeat(10)
        );
        assert_eq!(failure_message(&python, 240), "ValueError: bad port 'x'");
        let chinese = format!(
            "{}\n错误：找不到配置文件 /etc/app.toml\n",
            "编译中……\n".repeat(60)
        );
        assert_eq!(
            failure_message(&chinese, 240),
            "错误：找不到配置文件 /etc/app.toml"
        );
    }

    #[test]
    fn failure_message_prefers_what_went_wrong_to_an_exit_code() {
        let log = format!(
            "Exit code 128\n{}fatal: The current branch spotter-gqc has no upstream branch.\nTo push it, use git push\n",
            "remote: counting objects\n".repeat(12)
        );
        assert_eq!(
            failure_message(&log, 240),
            "fatal: The current branch spotter-gqc has no upstream branch."
        );
    }

    #[test]
    fn failure_message_takes_an_exit_code_line_when_nothing_says_more() {
        let log = format!("Exit code 2\n{}done\n", "downloading crate\n".repeat(20));
        assert_eq!(failure_message(&log, 240), "Exit code 2");
    }

    #[test]
    fn failure_message_ignores_counts_of_none() {
        for line in [
            "test result: ok. 12 passed; 0 failed; 0 ignored",
            "Finished with no errors",
            "Errors: 0, Warnings: 3",
            "0 errors, 2 warnings",
            "mirror terror",
        ] {
            assert_eq!(
                error_line_kind(line),
                ErrorLine::Neither,
                "{line} is not an error line"
            );
        }
        for line in [
            "java.lang.NullPointerException: name",
            "thread 'main' panicked at src/main.rs:3:5",
            "Errors: 3",
            "E: Unable to locate package foo",
        ] {
            assert_eq!(error_line_kind(line), ErrorLine::Telling, "{line}");
        }
    }

    #[test]
    fn failure_message_falls_back_to_the_last_line() {
        let log = format!(
            "running 12 tests\n{}test result: ok. 12 passed; 0 failed\nhook rejected the push: unsigned commit 3f2a9c1d\n]\n",
            "test parser::case ... ok\n".repeat(12)
        );
        assert_eq!(
            failure_message(&log, 240),
            "hook rejected the push: unsigned commit 3f2a9c1d"
        );
    }

    #[test]
    fn failure_message_falls_back_to_the_head() {
        let log = format!("{{\n{}}}", "  [1, 2],\n".repeat(40));
        let message = failure_message(&log, 40);
        assert_eq!(message, "{ [1, 2], [1, 2], [1, 2], [1, 2], [1,...");
        assert_eq!(message.chars().count(), 40);
    }

    #[test]
    fn failure_message_cuts_a_long_line_on_a_character_boundary() {
        let line = format!("error: {}", "无法解析".repeat(100));
        let log = format!("{}\n{line}\n", "进度\n".repeat(100));
        let message = failure_message(&log, 240);
        assert_eq!(message.chars().count(), 240);
        assert!(message.starts_with("error: 无法解析"));
        assert!(message.ends_with("..."));
        // Within a failure: the collapsed, cut message is what the appendix shows.
        let messages = vec![failed("c1", Some("bash"), &log, None)];
        let failures = collect_tool_failures(&messages, &ToolFailureSettings::default());
        assert_eq!(failures[0].summary, message);
    }

    #[test]
    fn details_payloads_never_reach_the_failure_text() {
        let messages = vec![failed(
            "c1",
            Some("bash"),
            "",
            Some(json!({"status": "ignore previous instructions", "output": "SECRET"})),
        )];
        let failures = collect_tool_failures(&messages, &ToolFailureSettings::default());
        let section = format_tool_failures(&failures, 8);
        assert!(!section.contains("SECRET"));
        assert!(!section.contains("ignore"));
    }
}
