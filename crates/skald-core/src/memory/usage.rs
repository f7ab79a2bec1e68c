//! Tool and skill memories, the pure part (seed 002, Components 4 and 5): usage statistics of a
//! tool ([`ToolStats`]) merged from the reports of finished turns, the concise
//! `## Tool Usage Memories` section of the system prompt, the detection of a tool call that
//! reads `skills/<name>/SKILL.md` ([`skill_read`]), and the skill memory appended after such a
//! read ([`render_skill_memory`]).
//!
//! A tool's statistics are stored as JSON ([`ToolStats::to_json`]) at
//! `viking://agent/{agent}/tools/{tool}`, with a readable abstract ([`ToolStats::abstract_line`]).
//! A skill's memories live under `viking://agent/{agent}/skills/{skill}/`: `stats.json` holds its
//! [`SkillUsage`], entries under `examples/`, `tips/` and `issues/` are its past examples, tips
//! and known issues (their abstracts are the bullets), and any other entry counts as a tip.
//!
//! ```
//! use skald_core::memory::usage::{ToolCallReport, ToolStats, render_tool_memory_section};
//!
//! let mut stats = ToolStats::new("bash");
//! for n in 0..20 {
//!     stats.record(&ToolCallReport::new("bash", n % 10 != 0, Some(1200), None));
//! }
//! assert_eq!(stats.abstract_line(), "bash: 20 calls, 90% ok, avg 1.2 s");
//! let section = render_tool_memory_section(&[stats], 10).unwrap();
//! assert!(section.starts_with("## Tool Usage Memories\n### bash\n- Called 20 times, 90% success rate"));
//! ```

use std::cmp::Reverse;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::levels::cut_at_word;
use super::tool_advice::{PatternStats, advice_lines, argument_pattern, record_pattern};
use super::uri::{MemoryCategory, MemoryUri};
use crate::message::ToolCall;

/// The entry of a skill's usage counts, directly in its directory.
pub const SKILL_STATS_FILE: &str = "stats.json";

/// Whether skald wrote the entry at `uri` itself, about how the agent used its tools: a tool's
/// statistics or a skill's usage counts. Everything else — the user's memories, the agent's
/// cases, patterns and skill tips, resources, session archives — holds what the user or the
/// agent said or wrote.
pub fn is_system_memory(uri: &MemoryUri) -> bool {
    match uri.category() {
        Some(MemoryCategory::Tools) => true,
        // `viking://agent/{agent}/skills/{skill}/stats.json`.
        Some(MemoryCategory::Skills) => uri.depth() == 5 && uri.name() == Some(SKILL_STATS_FILE),
        Some(
            MemoryCategory::Profile
            | MemoryCategory::Preferences
            | MemoryCategory::Entities
            | MemoryCategory::Events
            | MemoryCategory::Cases
            | MemoryCategory::Patterns
            | MemoryCategory::Resources
            | MemoryCategory::Session,
        )
        | None => false,
    }
}

/// At most this many distinct error patterns are kept per tool (the rarest go first).
pub const MAX_ERROR_PATTERNS: usize = 8;

/// An error pattern keeps at most this many characters.
pub const MAX_ERROR_CHARS: usize = 120;

/// A tool with fewer calls is left out of the system prompt: too little to learn from.
pub const MIN_CALLS_FOR_MEMORY: u64 = 3;

/// Common issues shown per tool.
pub const MAX_ISSUES_SHOWN: usize = 3;

/// What happened in one tool call of a finished turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallReport {
    /// The tool's name.
    pub tool: String,
    /// Whether the call succeeded.
    pub success: bool,
    /// How long the call took, when the host measured it.
    pub duration_ms: Option<u64>,
    /// The error text, when it failed.
    pub error: Option<String>,
    /// The call's argument pattern ([`argument_pattern`]), when its arguments are known.
    pub pattern: Option<String>,
}

impl ToolCallReport {
    /// A report of one call.
    pub fn new(
        tool: impl Into<String>,
        success: bool,
        duration_ms: Option<u64>,
        error: Option<String>,
    ) -> ToolCallReport {
        ToolCallReport {
            tool: tool.into(),
            success,
            duration_ms,
            error,
            pattern: None,
        }
    }

    /// The report with the argument pattern of the call's `arguments` (its parsed JSON).
    pub fn with_arguments(mut self, arguments: &Value) -> ToolCallReport {
        self.pattern = argument_pattern(arguments);
        self
    }
}

/// An error pattern and how often it occurred.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCount {
    /// The error's first line with numbers replaced by `N` ([`error_pattern`]).
    pub pattern: String,
    /// How many calls failed with it.
    pub count: u64,
}

/// Usage statistics of one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolStats {
    /// The tool's name.
    pub tool: String,
    /// Calls recorded.
    pub calls: u64,
    /// Calls that succeeded.
    pub successes: u64,
    /// Sum of the durations of the calls that reported one.
    pub total_duration_ms: u64,
    /// Calls that reported a duration, the divisor of the average.
    pub timed_calls: u64,
    /// The most frequent error patterns, most frequent first, at most
    /// [`MAX_ERROR_PATTERNS`].
    #[serde(default)]
    pub errors: Vec<ErrorCount>,
    /// How the calls went by argument pattern, most used first (the advice of the tool's
    /// section; `tool_advice`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patterns: Vec<PatternStats>,
}

impl ToolStats {
    /// Empty statistics for `tool`.
    pub fn new(tool: impl Into<String>) -> ToolStats {
        ToolStats {
            tool: tool.into(),
            calls: 0,
            successes: 0,
            total_duration_ms: 0,
            timed_calls: 0,
            errors: Vec::new(),
            patterns: Vec::new(),
        }
    }

    /// Adds one call.
    pub fn record(&mut self, report: &ToolCallReport) {
        self.calls = self.calls.saturating_add(1);
        if report.success {
            self.successes = self.successes.saturating_add(1);
        }
        if let Some(duration) = report.duration_ms {
            self.total_duration_ms = self.total_duration_ms.saturating_add(duration);
            self.timed_calls = self.timed_calls.saturating_add(1);
        }
        let failure = report
            .error
            .as_deref()
            .filter(|_| !report.success)
            .map(error_pattern)
            .filter(|pattern| !pattern.is_empty());
        if let Some(arguments) = &report.pattern {
            record_pattern(
                &mut self.patterns,
                arguments,
                report.success,
                failure.as_deref(),
            );
        }
        if let Some(pattern) = failure {
            match self
                .errors
                .iter_mut()
                .find(|known| known.pattern == pattern)
            {
                Some(known) => known.count = known.count.saturating_add(1),
                None => {
                    // A new pattern takes the place of the rarest one (the newest of those), so
                    // a pattern that starts to recur can always get in.
                    if self.errors.len() >= MAX_ERROR_PATTERNS {
                        self.errors.pop();
                    }
                    self.errors.push(ErrorCount { pattern, count: 1 });
                }
            }
            // Stable sort: among equal counts the older pattern stays ahead.
            self.errors.sort_by_key(|known| Reverse(known.count));
        }
    }

    /// Successful calls in percent, rounded down (0 for a tool never called).
    pub fn success_percent(&self) -> u64 {
        (self.successes.saturating_mul(100))
            .checked_div(self.calls)
            .unwrap_or(0)
    }

    /// The mean duration of the timed calls.
    pub fn average_duration_ms(&self) -> Option<u64> {
        self.total_duration_ms.checked_div(self.timed_calls)
    }

    /// One line, the entry's L0: `bash: 42 calls, 95% ok, avg 1.2 s`.
    pub fn abstract_line(&self) -> String {
        let mut line = format!(
            "{}: {} calls, {}% ok",
            self.tool,
            self.calls,
            self.success_percent()
        );
        if let Some(average) = self.average_duration_ms() {
            line.push_str(&format!(", avg {}", seconds(average)));
        }
        line
    }

    /// The stored form (the entry's L2).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads the stored form back.
    pub fn from_json(text: &str) -> Result<ToolStats, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// `1.2 s` (one decimal) from a second up, `15 ms` below.
fn seconds(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms} ms");
    }
    let tenths = ms.saturating_add(50) / 100;
    format!("{}.{} s", tenths / 10, tenths % 10)
}

/// The pattern an error is counted under: its first non-empty line, numbers replaced by `N`
/// (so `exit code 127` and `line 42` group with their kind), at most [`MAX_ERROR_CHARS`].
pub fn error_pattern(error: &str) -> String {
    let line = error
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    let mut out = String::with_capacity(line.len());
    let mut in_number = false;
    for c in line.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('N');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    cut_at_word(&out, MAX_ERROR_CHARS)
}

/// `existing` statistics with `reports` added, one entry per tool, in the order tools first
/// appear (existing ones first).
pub fn merge_reports(existing: Vec<ToolStats>, reports: &[ToolCallReport]) -> Vec<ToolStats> {
    let mut all = existing;
    for report in reports {
        match all.iter_mut().find(|stats| stats.tool == report.tool) {
            Some(stats) => stats.record(report),
            None => {
                let mut stats = ToolStats::new(report.tool.clone());
                stats.record(report);
                all.push(stats);
            }
        }
    }
    all
}

/// The `## Tool Usage Memories` section (seed 002's format): the most used tools first, at most
/// `max_tools`, each with its call count and success rate, its average time, and its most
/// common issues. Tools with fewer than [`MIN_CALLS_FOR_MEMORY`] calls are left out. `None` when
/// no tool qualifies.
pub fn render_tool_memory_section(stats: &[ToolStats], max_tools: usize) -> Option<String> {
    let mut ranked: Vec<&ToolStats> = stats
        .iter()
        .filter(|stats| stats.calls >= MIN_CALLS_FOR_MEMORY)
        .collect();
    ranked.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.tool.cmp(&b.tool)));
    ranked.truncate(max_tools);
    if ranked.is_empty() {
        return None;
    }
    let mut out = String::from("## Tool Usage Memories\n");
    for stats in ranked {
        out.push_str(&format!("### {}\n", stats.tool));
        out.push_str(&format!(
            "- Called {} times, {}% success rate\n",
            stats.calls,
            stats.success_percent()
        ));
        if let Some(average) = stats.average_duration_ms() {
            out.push_str(&format!(
                "- Average time: {}\n",
                seconds(average).replace(' ', "")
            ));
        }
        let issues: Vec<&ErrorCount> = stats.errors.iter().take(MAX_ISSUES_SHOWN).collect();
        if !issues.is_empty() {
            out.push_str("- Common issues:\n");
            for issue in issues {
                let times = if issue.count == 1 {
                    "once".to_owned()
                } else {
                    format!("{} times", issue.count)
                };
                out.push_str(&format!("  - {} ({times})\n", issue.pattern));
            }
        }
        for line in advice_lines(&stats.patterns) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    Some(out.trim_end().to_owned())
}

/// How often a skill was used and how often that went well (`stats.json` of a skill).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SkillUsage {
    /// Times the skill was used.
    pub uses: u64,
    /// Uses that went well.
    pub successes: u64,
}

impl SkillUsage {
    /// Successes as a whole percentage of uses (0 when never used).
    pub fn success_percent(&self) -> u64 {
        (self.successes.saturating_mul(100))
            .checked_div(self.uses)
            .unwrap_or(0)
    }
}

/// What is remembered about one skill.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SkillMemory {
    /// How often it was used and how well, when recorded.
    pub usage: Option<SkillUsage>,
    /// Past examples (with their dates when known).
    pub examples: Vec<String>,
    /// Advice on using the skill.
    pub tips: Vec<String>,
    /// Problems met when using it.
    pub known_issues: Vec<String>,
}

impl SkillMemory {
    /// True when nothing at all is remembered about the skill.
    pub fn is_empty(&self) -> bool {
        self.usage.is_none_or(|usage| usage.uses == 0)
            && self.examples.is_empty()
            && self.tips.is_empty()
            && self.known_issues.is_empty()
    }
}

/// The first line of the appended skill memory; its presence marks a result as already
/// augmented (augmenting is done once).
pub const SKILL_MEMORY_MARKER: &str = "\n\n---\n## Skill Memory: ";

/// The text appended after a SKILL.md read (the original stays a byte-exact prefix):
/// a header with the usage (`## Skill Memory: pptx (Used 15 times, 93% success)`), then
/// `## Past Examples`, `## Tips` and `## Known Issues` as seed 002 shows them. `None` when there
/// is nothing remembered.
pub fn render_skill_memory(skill: &str, memory: &SkillMemory) -> Option<String> {
    if memory.is_empty() {
        return None;
    }
    let mut out = format!("{SKILL_MEMORY_MARKER}{skill}");
    if let Some(usage) = memory.usage.filter(|usage| usage.uses > 0) {
        let times = if usage.uses == 1 {
            "once".to_owned()
        } else {
            format!("{} times", usage.uses)
        };
        out.push_str(&format!(
            " (Used {times}, {}% success)",
            usage.success_percent()
        ));
    }
    out.push('\n');
    for (title, items) in [
        ("Past Examples", &memory.examples),
        ("Tips", &memory.tips),
        ("Known Issues", &memory.known_issues),
    ] {
        if items.is_empty() {
            continue;
        }
        out.push_str(&format!("## {title}\n"));
        for item in items {
            out.push_str(&format!("- {}\n", item.trim()));
        }
    }
    Some(out)
}

/// Tool names that read a file given by path.
const FILE_READ_TOOLS: [&str; 10] = [
    "read",
    "read_file",
    "readfile",
    "view",
    "view_file",
    "open_file",
    "cat",
    "fs_read",
    "str_replace_editor",
    "str_replace_based_edit_tool",
];

/// Tool names that run a shell command.
const SHELL_TOOLS: [&str; 7] = [
    "bash",
    "shell",
    "run_shell",
    "exec",
    "execute_command",
    "run_terminal_cmd",
    "terminal",
];

/// Argument names a file-reading tool takes its path in.
const PATH_ARGUMENTS: [&str; 7] = [
    "path",
    "file_path",
    "filePath",
    "file",
    "filename",
    "target_file",
    "absolute_path",
];

/// The skill a tool call reads the `SKILL.md` of, if it is such a read: a file-reading tool
/// (`read`, `read_file`, `view`, `cat`, an editor's `view` command, any tool whose name contains
/// `read`) whose path ends with `skills/<name>/SKILL.md`, or a shell tool running exactly
/// `cat <that path>`.
pub fn skill_read(call: &ToolCall) -> Option<String> {
    let name = call.name.to_ascii_lowercase();
    let arguments = parsed_arguments(&call.arguments)?;
    if SHELL_TOOLS.contains(&name.as_str()) {
        let command = ["command", "cmd"]
            .iter()
            .find_map(|key| arguments.get(*key).and_then(Value::as_str))?;
        return skill_of_cat(command);
    }
    let reads = FILE_READ_TOOLS.contains(&name.as_str()) || name.contains("read");
    if !reads {
        return None;
    }
    if let Some(command) = arguments.get("command").and_then(Value::as_str)
        && command != "view"
    {
        return None;
    }
    PATH_ARGUMENTS
        .iter()
        .find_map(|key| arguments.get(*key).and_then(Value::as_str))
        .and_then(skill_of_path)
}

fn parsed_arguments(arguments: &Value) -> Option<serde_json::Map<String, Value>> {
    match arguments {
        Value::Object(map) => Some(map.clone()),
        Value::String(text) => match serde_json::from_str(text) {
            Ok(Value::Object(map)) => Some(map),
            Ok(_) | Err(_) => None,
        },
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => None,
    }
}

/// The skill name when `path` ends with `skills/<name>/SKILL.md`.
pub fn skill_of_path(path: &str) -> Option<String> {
    let path = path.trim().trim_matches(|c| c == '"' || c == '\'');
    let mut parts = path.rsplit(['/', '\\']);
    let file = parts.next()?;
    let skill = parts.next()?;
    let skills = parts.next()?;
    (file == "SKILL.md" && skills == "skills" && !skill.is_empty() && skill != "." && skill != "..")
        .then(|| skill.to_owned())
}

fn skill_of_cat(command: &str) -> Option<String> {
    let command = command.trim();
    if command.contains(['|', ';', '&', '>', '<', '`', '$', '\n']) {
        return None;
    }
    let mut words = command.split_whitespace();
    if words.next()? != "cat" {
        return None;
    }
    let paths: Vec<&str> = words.filter(|word| !word.starts_with('-')).collect();
    match paths.as_slice() {
        [path] => skill_of_path(path),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::message::Extra;
    use serde_json::json;

    #[test]
    fn tool_statistics_and_skill_counts_are_system_memories() {
        let system = |uri: &str| is_system_memory(&MemoryUri::parse(uri).unwrap());
        assert!(system("viking://agent/coder/tools/bash"));
        assert!(system("viking://agent/coder/skills/pdf/stats.json"));
        assert!(!system("viking://agent/coder/skills/pdf/tips/rotate.md"));
        assert!(!system("viking://agent/coder/memories/cases/flaky-test.md"));
        assert!(!system(
            "viking://user/alice/memories/preferences/editor.md"
        ));
        assert!(!system("viking://session/s1/archive_001"));
        assert!(!system("viking://resources/docs/a.md"));
    }

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments,
            arguments_text: None,
            extra: Extra::new(),
        }
    }

    #[test]
    fn tool_stats_merge_counts_durations_and_errors() {
        let reports = vec![
            ToolCallReport::new("bash", true, Some(1000), None),
            ToolCallReport::new(
                "bash",
                false,
                Some(3000),
                Some("exit code 127\nmore".into()),
            ),
            ToolCallReport::new("bash", false, None, Some("exit code 2".into())),
            ToolCallReport::new("edit", true, Some(10), None),
        ];
        let merged = merge_reports(vec![ToolStats::new("grep")], &reports);
        assert_eq!(
            merged.iter().map(|s| s.tool.as_str()).collect::<Vec<_>>(),
            ["grep", "bash", "edit"]
        );
        let bash = &merged[1];
        assert_eq!((bash.calls, bash.successes, bash.timed_calls), (3, 1, 2));
        assert_eq!(bash.average_duration_ms(), Some(2000));
        assert_eq!(
            bash.errors,
            vec![ErrorCount {
                pattern: "exit code N".into(),
                count: 2
            }]
        );
        assert_eq!(bash.abstract_line(), "bash: 3 calls, 33% ok, avg 2.0 s");
        let again = ToolStats::from_json(&bash.to_json()).unwrap();
        assert_eq!(&again, bash);
    }

    #[test]
    fn error_patterns_are_bounded() {
        let mut stats = ToolStats::new("t");
        for n in 0..20 {
            stats.record(&ToolCallReport::new(
                "t",
                false,
                None,
                Some(format!("error kind{}", char::from(b'a' + n))),
            ));
        }
        stats.record(&ToolCallReport::new(
            "t",
            false,
            None,
            Some("error kindt".into()),
        ));
        assert_eq!(stats.errors.len(), MAX_ERROR_PATTERNS);
        assert_eq!(
            stats.errors[0],
            ErrorCount {
                pattern: "error kindt".into(),
                count: 2
            }
        );
        let long = "x ".repeat(500);
        assert!(error_pattern(&long).chars().count() <= MAX_ERROR_CHARS);
    }

    #[test]
    fn seconds_round_to_one_decimal() {
        assert_eq!(seconds(1234), "1.2 s");
        assert_eq!(seconds(1250), "1.3 s");
        assert_eq!(seconds(999), "999 ms");
        assert_eq!(seconds(1999), "2.0 s");
        assert_eq!(seconds(0), "0 ms");
    }

    #[test]
    fn tool_memory_section_orders_by_use_and_skips_rare_tools() {
        let mut shell = ToolStats::new("run_shell");
        for n in 0..42 {
            let error = (n % 8 == 0).then(|| "No such file or directory".to_owned());
            shell.record(&ToolCallReport::new(
                "run_shell",
                error.is_none(),
                Some(2300),
                error,
            ));
        }
        let mut edit = ToolStats::new("edit_file");
        for _ in 0..5 {
            edit.record(&ToolCallReport::new("edit_file", true, None, None));
        }
        let mut rare = ToolStats::new("rare");
        rare.record(&ToolCallReport::new("rare", true, None, None));
        let section = render_tool_memory_section(&[edit, rare, shell], 10).unwrap();
        assert_eq!(
            section,
            "## Tool Usage Memories\n### run_shell\n- Called 42 times, 85% success rate\n- Average time: 2.3s\n- Common issues:\n  - No such file or directory (6 times)\n### edit_file\n- Called 5 times, 100% success rate"
        );
        assert_eq!(render_tool_memory_section(&[ToolStats::new("x")], 10), None);
    }

    #[test]
    fn skill_reads_are_detected_from_the_paired_call() {
        for (name, arguments) in [
            (
                "read",
                json!({"path": "/home/u/.openclaw/skills/pptx/SKILL.md"}),
            ),
            ("Read", json!({"file_path": "skills/pptx/SKILL.md"})),
            ("read_file", json!("{\"path\":\"./skills/pptx/SKILL.md\"}")),
            (
                "str_replace_based_edit_tool",
                json!({"command": "view", "path": "/a/skills/pptx/SKILL.md"}),
            ),
            (
                "mcp_fs_read_text",
                json!({"path": "C:\\x\\skills\\pptx\\SKILL.md"}),
            ),
            ("bash", json!({"command": "cat ~/skills/pptx/SKILL.md"})),
            ("bash", json!({"command": "cat -n 'skills/pptx/SKILL.md'"})),
        ] {
            assert_eq!(
                skill_read(&call(name, arguments.clone())).as_deref(),
                Some("pptx"),
                "{name} {arguments}"
            );
        }
        for (name, arguments) in [
            ("read", json!({"path": "skills/pptx/README.md"})),
            ("read", json!({"path": "SKILL.md"})),
            ("write", json!({"path": "skills/pptx/SKILL.md"})),
            (
                "str_replace_editor",
                json!({"command": "create", "path": "skills/pptx/SKILL.md"}),
            ),
            (
                "bash",
                json!({"command": "cat skills/pptx/SKILL.md | head"}),
            ),
            ("bash", json!({"command": "rm skills/pptx/SKILL.md"})),
            ("bash", json!({"command": "cat a skills/pptx/SKILL.md"})),
        ] {
            assert_eq!(
                skill_read(&call(name, arguments.clone())),
                None,
                "{name} {arguments}"
            );
        }
    }

    #[test]
    fn skill_memory_renders_the_seed_sections() {
        let memory = SkillMemory {
            usage: Some(SkillUsage {
                uses: 15,
                successes: 14,
            }),
            examples: vec!["Successfully created Q3 financial report (2024-03-01)".into()],
            tips: vec!["User prefers dark theme templates".into()],
            known_issues: vec!["Large images (>10MB) sometimes fail - compress first".into()],
        };
        let text = render_skill_memory("pptx", &memory).unwrap();
        assert_eq!(
            text,
            "\n\n---\n## Skill Memory: pptx (Used 15 times, 93% success)\n## Past Examples\n- Successfully created Q3 financial report (2024-03-01)\n## Tips\n- User prefers dark theme templates\n## Known Issues\n- Large images (>10MB) sometimes fail - compress first\n"
        );
        assert_eq!(render_skill_memory("pptx", &SkillMemory::default()), None);
    }
}
