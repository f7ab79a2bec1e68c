//! The span being summarised, read once into turns that say who wrote each piece of text: the
//! user's own words, harness wrappers around them, the assistant's prose, system rules, tool
//! calls, tool output (untrusted: never a source of rules or asks) and earlier summaries (flagged
//! by the host, or recognisable by their wrapper or their five sections).

use std::collections::HashMap;

use serde_json::Value;

use crate::message::{Block, Message, Role, ToolCall, ToolResult, join_text};
use crate::session::{BRANCH_SUMMARY_PREFIX, COMPACTION_SUMMARY_PREFIX};
use crate::summary::missing_sections;

use super::text::{UserText, split_user_text};

/// What one message contributes, classified by author.
#[derive(Debug, Default)]
pub(super) struct Turn<'a> {
    /// Position of the message in the span.
    pub index: usize,
    /// Words the user wrote (harness wrappers removed); empty for other roles.
    pub user_own: String,
    /// Harness text in a user turn (reminders, project memory, meta messages): system-level.
    pub harness: String,
    /// The assistant's prose.
    pub assistant: String,
    /// A system message's text.
    pub system: String,
    /// An earlier compaction summary carried in the span.
    pub summary: Option<String>,
    pub calls: Vec<&'a ToolCall>,
    pub results: Vec<&'a ToolResult>,
    pub is_assistant: bool,
}

impl Turn<'_> {
    /// An assistant message that answers rather than acts: prose and no tool call.
    pub fn is_final_answer(&self) -> bool {
        self.is_assistant && self.calls.is_empty() && !self.assistant.trim().is_empty()
    }
}

/// The span read into turns.
#[derive(Debug, Default)]
pub(super) struct Span<'a> {
    pub turns: Vec<Turn<'a>>,
    /// Tool results by the id of the call they answer (the first one, if repeated).
    results: HashMap<&'a str, &'a ToolResult>,
}

impl<'a> Span<'a> {
    pub fn read(messages: &'a [Message]) -> Span<'a> {
        let turns: Vec<Turn<'a>> = messages
            .iter()
            .enumerate()
            .map(|(index, message)| read_turn(index, message))
            .collect();
        let mut results = HashMap::new();
        for result in turns.iter().flat_map(|turn| turn.results.iter().copied()) {
            results.entry(result.call_id.as_str()).or_insert(result);
        }
        Span { turns, results }
    }

    /// 0 for the first message, 99 for the last: how recent a position is.
    pub fn recency(&self, index: usize) -> i64 {
        let len = self.turns.len().max(1);
        i64::try_from(index.min(len - 1) * 100 / len).unwrap_or(99)
    }

    /// Index of the last assistant answer (prose without tool calls).
    pub fn last_final_answer(&self) -> Option<usize> {
        self.turns
            .iter()
            .rposition(Turn::is_final_answer)
            .and_then(|position| self.turns.get(position).map(|turn| turn.index))
    }

    /// The result that answers the call with `call_id`, if the span holds it.
    pub fn result_for(&self, call_id: &str) -> Option<&'a ToolResult> {
        self.results.get(call_id).copied()
    }
}

fn flag(message: &Message, key: &str) -> bool {
    message.extra.get(key) == Some(&Value::Bool(true))
}

fn read_turn(index: usize, message: &Message) -> Turn<'_> {
    let mut turn = Turn {
        index,
        ..Turn::default()
    };
    for block in &message.content {
        match block {
            Block::ToolCall(call) => turn.calls.push(call),
            Block::ToolResult(result) => turn.results.push(result),
            Block::Text(_) | Block::Image(_) | Block::Thinking(_) | Block::Opaque(_) => {}
        }
    }
    let text = join_text(&message.content);
    match &message.role {
        Role::Assistant => {
            turn.is_assistant = true;
            turn.assistant = text;
        }
        Role::System => turn.system = text,
        // Text next to tool results in a user turn (Anthropic, Claude Code) is the user side.
        Role::User | Role::ToolResult => {
            if flag(message, "isCompactSummary") {
                turn.summary = Some(text);
            } else if let Some(summary) = carried_summary(&text) {
                turn.summary = Some(summary.to_owned());
            } else if flag(message, "isMeta") {
                turn.harness = text;
            } else {
                let UserText { own, harness } = split_user_text(&text);
                turn.user_own = own;
                turn.harness = harness;
            }
        }
        Role::Custom(name) => match name.as_str() {
            "compactionSummary" | "branchSummary" => {
                turn.summary = message
                    .extra
                    .get("summary")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| (!text.is_empty()).then_some(text));
            }
            // Boundaries and other host entries carry nothing a summary keeps.
            _ => {}
        },
    }
    turn
}

/// The summary a user message carries rather than words the user wrote: an earlier compaction's
/// summary where it stands in the context (wrapped in pi's compaction or branch summary text),
/// or a bare summary with every required section (the partial summaries a staged compaction
/// merges arrive as user messages). Read as a previous summary, never as an ask.
fn carried_summary(text: &str) -> Option<&str> {
    let trimmed = text.trim();
    for prefix in [COMPACTION_SUMMARY_PREFIX, BRANCH_SUMMARY_PREFIX] {
        // The wrapper's first line identifies it; spacing before `<summary>` may vary.
        let intro = prefix.lines().next().unwrap_or(prefix);
        if let Some(rest) = trimmed.strip_prefix(intro) {
            let rest = rest.trim_start();
            let inner = rest.strip_prefix("<summary>").unwrap_or(rest);
            let inner = inner
                .rfind("</summary>")
                .and_then(|end| inner.get(..end))
                .unwrap_or(inner);
            return Some(inner.trim());
        }
    }
    let bare = trimmed.starts_with("## ") && missing_sections(trimmed).is_empty();
    bare.then_some(trimmed)
}

/// Appends the string leaves of a JSON value, one per line (tool-call arguments as a model
/// wrote them, without JSON escaping).
pub(super) fn push_string_leaves(value: &Value, out: &mut String) {
    match value {
        Value::String(text) => {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
        Value::Array(items) => items.iter().for_each(|item| push_string_leaves(item, out)),
        Value::Object(fields) => fields
            .values()
            .for_each(|item| push_string_leaves(item, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The text of a tool call's arguments (string leaves).
pub(super) fn arguments_text(call: &ToolCall) -> String {
    let mut out = String::new();
    push_string_leaves(&call.arguments, &mut out);
    out
}

/// The text a tool result shows a model (`details` never included).
pub(super) fn result_text(result: &ToolResult) -> String {
    join_text(&result.content)
}

/// First string among `keys` in a tool call's arguments.
pub(super) fn argument_str<'v>(call: &'v ToolCall, keys: &[&str]) -> Option<&'v str> {
    let fields = call.arguments.as_object()?;
    keys.iter()
        .find_map(|key| fields.get(*key).and_then(Value::as_str))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::session::{BRANCH_SUMMARY_SUFFIX, COMPACTION_SUMMARY_SUFFIX};

    const FIVE: &str = "## Decisions\n- a\n## Open TODOs\n- (none)\n## Constraints/Rules\n- (none)\n## Pending user asks\n- (none)\n## Exact identifiers\n- (none)";

    #[test]
    fn wrapped_and_bare_summaries_are_recognised() {
        let wrapped = format!(
            "{COMPACTION_SUMMARY_PREFIX}{FIVE}\n\n## Tool Failures\n- x{COMPACTION_SUMMARY_SUFFIX}"
        );
        assert_eq!(
            carried_summary(&wrapped),
            Some(format!("{FIVE}\n\n## Tool Failures\n- x").as_str())
        );
        let branch = format!("{BRANCH_SUMMARY_PREFIX}Went back.{BRANCH_SUMMARY_SUFFIX}");
        assert_eq!(carried_summary(&branch), Some("Went back."));
        assert_eq!(carried_summary(FIVE), Some(FIVE));
    }

    #[test]
    fn user_text_with_some_headings_is_the_users() {
        assert_eq!(
            carried_summary("## Decisions\n- use serde\nWhat next?"),
            None
        );
        assert_eq!(carried_summary("Please fix the build."), None);
        let messages = vec![Message::text(Role::User, "## Decisions\nkeep it")];
        let span = Span::read(&messages);
        assert_eq!(span.turns[0].user_own, "## Decisions\nkeep it");
        assert!(span.turns[0].summary.is_none());
    }
}
