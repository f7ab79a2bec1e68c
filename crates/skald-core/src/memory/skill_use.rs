//! Skill memories written from what a turn did (issue 28, gap 2; seed 002's skill memories):
//! a skill is **used** when a tool call reads its `skills/<name>/SKILL.md` (any read or shell
//! tool, as [`skill_read`] detects it) or calls Claude Code's `Skill` tool with it, and the use
//! **went well** when none of the turn's tool calls after it failed; otherwise it went wrong
//! with the first failure's error pattern. The engine adds each use to the skill's
//! `stats.json` ([`SkillUsage`](super::usage::SkillUsage)) and a failure to its `issues/`.
//!
//! ```
//! use serde_json::json;
//! use skald_core::memory::skill_use::skill_uses_in;
//! use skald_core::message::{Block, Extra, Message, Role, ToolCall};
//!
//! let call = |id: &str, name: &str, arguments| Message::new(Role::Assistant, vec![Block::ToolCall(ToolCall {
//!     id: id.into(), name: name.into(), arguments, arguments_text: None, extra: Extra::new() })]);
//! let messages = vec![call("c1", "read", json!({"path": "skills/pptx/SKILL.md"}))];
//! let uses = skill_uses_in(&messages, 0);
//! assert_eq!((uses[0].skill.as_str(), uses[0].success), ("pptx", true));
//! ```

use std::collections::HashMap;

use serde_json::Value;

use super::usage::{error_pattern, skill_read};
use crate::message::{Message, ToolCall, join_text};

/// Claude Code's tool that loads a skill (`{"skill": "<name>"}`).
const SKILL_TOOL: &str = "Skill";

/// One use of a skill in a turn, and how it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillUse {
    /// The skill's name (its directory under `skills/`).
    pub skill: String,
    /// No tool call after the skill was loaded failed.
    pub success: bool,
    /// The error pattern of the first call that failed after it.
    pub error: Option<String>,
}

/// The skill a tool call loads: a `SKILL.md` read, or Claude Code's `Skill` tool.
pub fn skill_of_call(call: &ToolCall) -> Option<String> {
    if call.name == SKILL_TOOL {
        let name = call.arguments.get("skill").and_then(Value::as_str)?.trim();
        // `plugin:skill` names the plugin's skill: the skill is its last part.
        let name = name.rsplit(':').next().unwrap_or(name);
        return (!name.is_empty() && !name.contains('/')).then(|| name.to_owned());
    }
    skill_read(call)
}

/// The skills used in `messages[new_from..]` (what one turn added), each once — at its first
/// load — with the outcome of the tool calls after it in those messages.
pub fn skill_uses_in(messages: &[Message], new_from: usize) -> Vec<SkillUse> {
    let new = messages.get(new_from..).unwrap_or_default();
    let failures: HashMap<&str, String> = new
        .iter()
        .flat_map(Message::tool_results)
        .filter(|result| result.failed())
        .map(|result| (result.call_id.as_str(), join_text(&result.content)))
        .collect();
    let calls: Vec<&ToolCall> = new.iter().flat_map(Message::tool_calls).collect();
    let mut uses: Vec<SkillUse> = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        let Some(skill) = skill_of_call(call) else {
            continue;
        };
        if uses.iter().any(|known| known.skill == skill) {
            continue;
        }
        let error = calls
            .get(index + 1..)
            .unwrap_or_default()
            .iter()
            .find_map(|later| failures.get(later.id.as_str()))
            .map(|text| error_pattern(text))
            .filter(|pattern| !pattern.is_empty());
        uses.push(SkillUse {
            skill,
            success: error.is_none(),
            error,
        });
    }
    uses
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::message::{Block, ContentForm, Extra, Role, ToolResult};
    use serde_json::json;

    fn call(id: &str, name: &str, arguments: Value) -> Message {
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

    fn result(id: &str, text: &str, failed: bool) -> Message {
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: id.into(),
                tool_name: None,
                content: vec![Block::text(text)].into(),
                content_form: ContentForm::Text,
                is_error: Some(failed),
                details: None,
                extra: Extra::new(),
            })],
        )
    }

    #[test]
    fn a_skill_that_was_followed_by_a_failure_went_wrong_with_that_error() {
        let messages = vec![
            Message::text(Role::User, "old turn"),
            call("c0", "read", json!({"path": "skills/docx/SKILL.md"})),
            result("c0", "# docx", false),
            Message::text(Role::User, "Make the deck."),
            call("c1", "bash", json!({"command": "cat skills/pptx/SKILL.md"})),
            result("c1", "# pptx", false),
            call("c2", "bash", json!({"command": "python make_deck.py"})),
            result(
                "c2",
                "ModuleNotFoundError: No module named 'pptx' (line 3)",
                true,
            ),
            call("c3", "Skill", json!({"skill": "anthropic:xlsx"})),
            result("c3", "loaded", false),
            call("c4", "read", json!({"path": "skills/pptx/SKILL.md"})),
            result("c4", "# pptx", false),
        ];
        let uses = skill_uses_in(&messages, 3);
        assert_eq!(
            uses,
            vec![
                SkillUse {
                    skill: "pptx".into(),
                    success: false,
                    error: Some("ModuleNotFoundError: No module named 'pptx' (line N)".into()),
                },
                SkillUse {
                    skill: "xlsx".into(),
                    success: true,
                    error: None,
                },
            ],
            "the docx read is an earlier turn's; pptx counted once"
        );
    }
}
