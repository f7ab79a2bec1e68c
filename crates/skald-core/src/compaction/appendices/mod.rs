//! What a compaction appends to the summary the summarizer wrote (seed 001, "压缩完的摘要还附加了
//! 什么"): the tool calls that failed (`## Tool Failures`), the files read and modified
//! (`<read-files>`, `<modified-files>`), the workspace's critical rules from AGENTS.md
//! (`<workspace-critical-rules>`), and — when the recent-turn split had to fall back — the earlier
//! user messages verbatim. These are collected from the messages, not asked of the summarizer, so
//! they are exact whatever the summary says.
//!
//! All inputs are values: the AGENTS.md text is read by the caller.
//!
//! The parts, private (every item has one path: here): `failures` (`## Tool Failures`), `files`
//! (the file lists), `rules` (AGENTS.md) and `host_rules` (the rules files a host put in the
//! conversation: Claude Code's CLAUDE.md block, Codex's AGENTS.md message). This file holds the headings and limits, the pinned
//! user messages, and [`finish_summary`], which appends everything in the seed's order.

use serde::Serialize;

use crate::message::{Message, Role};

mod failures;
mod files;
mod host_rules;
mod rules;

use failures::cut_with_ellipsis;
pub use failures::{ToolFailure, collect_tool_failures, failure_message, format_tool_failures};
pub use files::{
    FileAccess, FileLists, FileOps, collect_file_ops, file_accesses, format_file_lists,
};
pub use host_rules::{
    RulesFile, host_rules_in, host_rules_in_text, rules_in_summary, rules_of_files,
    without_critical_rules,
};
pub use rules::{format_critical_rules, markdown_sections, workspace_critical_rules};

/// Heading of the tool-failure appendix.
pub const TOOL_FAILURES_HEADING: &str = "## Tool Failures";
/// Heading of the verbatim user messages kept by the recent-turn fallback.
pub const PINNED_USER_HEADING: &str = "## Earlier user messages (verbatim)";
/// Characters of one pinned user message.
pub const MAX_PINNED_USER_CHARS: usize = 2_000;
/// AGENTS.md sections appended, and the older names used when none of them exists.
pub const CRITICAL_RULE_SECTIONS: [&str; 2] = ["Session Startup", "Red Lines"];
/// The older names of those sections, used when an AGENTS.md has neither.
pub const LEGACY_CRITICAL_RULE_SECTIONS: [&str; 2] = ["Every Session", "Safety"];
/// Marker after critical rules cut to their limit.
pub const TRUNCATED_MARKER: &str = "\n...[truncated]...";

/// The verbatim text of the user messages at `indices`, each cut to
/// [`MAX_PINNED_USER_CHARS`] characters.
pub fn pinned_user_texts(messages: &[Message], indices: &[usize]) -> Vec<String> {
    indices
        .iter()
        .filter_map(|&index| messages.get(index))
        .filter(|message| message.role == Role::User)
        .map(|message| message.plain_text().trim().to_owned())
        .filter(|text| !text.is_empty())
        .map(|text| cut_with_ellipsis(&text, MAX_PINNED_USER_CHARS))
        .collect()
}

/// The pinned user messages section, each message a block quote.
pub fn format_pinned_user_messages(texts: &[String]) -> String {
    if texts.is_empty() {
        return String::new();
    }
    let mut out = PINNED_USER_HEADING.to_owned();
    for text in texts {
        out.push('\n');
        let quoted: Vec<String> = text.lines().map(|line| format!("> {line}")).collect();
        out.push_str(&quoted.join("\n"));
        out.push('\n');
    }
    out.trim_end().to_owned()
}

/// Everything appended to a summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Appendices {
    /// User messages the recent-turn fallback keeps verbatim, each cut to
    /// [`MAX_PINNED_USER_CHARS`].
    pub pinned_user_messages: Vec<String>,
    /// The failed tool calls, oldest first.
    pub tool_failures: Vec<ToolFailure>,
    /// Failures listed at most (the rest are counted).
    pub max_tool_failures: usize,
    /// The files read and modified.
    pub files: FileLists,
    /// The AGENTS.md sections, already cut to their limit.
    pub critical_rules: Option<String>,
}

/// The summary followed by its appendices, in the seed's order (pinned user messages, tool
/// failures, file lists, workspace rules), separated by blank lines; empty parts are left out.
pub fn finish_summary(summary: &str, appendices: &Appendices) -> String {
    let parts = [
        summary.trim().to_owned(),
        format_pinned_user_messages(&appendices.pinned_user_messages),
        format_tool_failures(&appendices.tool_failures, appendices.max_tool_failures),
        format_file_lists(&appendices.files),
        format_critical_rules(appendices.critical_rules.as_deref()),
    ];
    parts
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::Value;

    use super::*;
    use crate::message::{Block, Extra, ToolCall, ToolResult};

    pub(super) fn call(id: &str, name: &str, arguments: Value) -> Message {
        Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: id.into(),
                name: name.into(),
                arguments,
                arguments_text: None,
                extra: Extra::new(),
            })],
        )
    }

    pub(super) fn failed(
        id: &str,
        name: Option<&str>,
        text: &str,
        details: Option<Value>,
    ) -> Message {
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: id.into(),
                tool_name: name.map(str::to_owned),
                content: if text.is_empty() {
                    Vec::new().into()
                } else {
                    vec![Block::text(text)].into()
                },
                content_form: Default::default(),
                is_error: Some(true),
                details: details.map(std::sync::Arc::new),
                extra: Extra::new(),
            })],
        )
    }

    #[test]
    fn finish_summary_appends_in_seed_order() {
        let appendices = Appendices {
            pinned_user_messages: vec!["Fix the build.\nThen deploy.".into()],
            tool_failures: vec![ToolFailure {
                call_id: "c1".into(),
                tool_name: "bash".into(),
                summary: "exit 1".into(),
                meta: None,
            }],
            max_tool_failures: 8,
            files: FileLists {
                read: vec!["a.rs".into()],
                modified: Vec::new(),
            },
            critical_rules: Some("## Red Lines\nNo force pushes.".into()),
        };
        let finished = finish_summary("## Decisions\n- x\n", &appendices);
        assert_eq!(
            finished,
            "## Decisions\n- x\n\n## Earlier user messages (verbatim)\n> Fix the build.\n> Then deploy.\n\n## Tool Failures\n- bash: exit 1\n\n<read-files>\na.rs\n</read-files>\n\n<workspace-critical-rules>\n## Red Lines\nNo force pushes.\n</workspace-critical-rules>"
        );
        assert_eq!(finish_summary("only", &Appendices::default()), "only");
    }
}
