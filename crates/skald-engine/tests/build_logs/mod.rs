//! A conversation of build-log turns shared by the engine tests that need outputs large enough
//! to offload: each turn asks for a job's log, runs `cat`, gets `log_line` 200 times and an
//! error line, and answers about it.

use serde_json::json;
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};

/// `turns` turns, each a command with a large output (`log_line` × 200) and an answer about it.
pub fn build_log_conversation(turns: usize, log_line: &str) -> Vec<Message> {
    let mut messages = Vec::new();
    for turn in 0..turns {
        let id = format!("call_{turn}");
        messages.push(Message::text(
            Role::User,
            format!("Step {turn}: check the build log for job {turn}."),
        ));
        messages.push(Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: id.clone(),
                name: "bash".into(),
                arguments: json!({ "command": format!("cat build-{turn}.log") }),
                arguments_text: None,
                extra: Extra::new(),
            })],
        ));
        messages.push(Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: id,
                tool_name: Some("bash".into()),
                content: vec![Block::text(format!(
                    "build {turn}\n{}error: linker failed\n",
                    log_line.repeat(200)
                ))]
                .into(),
                content_form: ContentForm::Text,
                is_error: None,
                details: None,
                extra: Extra::new(),
            })],
        ));
        messages.push(Message::text(
            Role::Assistant,
            format!("Job {turn} failed at the linker; fixing the flag next."),
        ));
    }
    messages
}
