//! Helpers shared by the pipeline stage tests: message builders, a readable renderer for
//! snapshots, a pairing check and a proptest strategy for well-formed transcripts.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use proptest::prelude::*;
use serde_json::json;
use skald_core::message::{
    Block, ContentForm, Extra, ImageBlock, ImageSource, Message, Role, StopReason, ToolCall,
    ToolResult,
};
use skald_core::tokens::estimate_string_chars;

pub fn system(text: &str) -> Message {
    Message::text(Role::System, text)
}

pub fn user(text: &str) -> Message {
    Message::text(Role::User, text)
}

pub fn assistant(text: &str) -> Message {
    let mut message = Message::new(Role::Assistant, vec![Block::text(text)]);
    message.meta.stop_reason = Some(StopReason::EndTurn);
    message
}

pub fn call_block(id: &str, name: &str) -> Block {
    Block::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: json!({"path": format!("{id}.txt")}),
        arguments_text: None,
        extra: Extra::new(),
    })
}

/// An assistant message calling `calls` as `(id, tool name)`.
pub fn calls(calls: &[(&str, &str)]) -> Message {
    let mut message = Message::new(
        Role::Assistant,
        calls
            .iter()
            .map(|(id, name)| call_block(id, name))
            .collect(),
    );
    message.meta.stop_reason = Some(StopReason::ToolUse);
    message
}

pub fn result_block(id: &str, name: Option<&str>, content: Vec<Block>) -> Block {
    let content_form = if content.len() == 1 {
        ContentForm::Text
    } else {
        ContentForm::Blocks
    };
    Block::ToolResult(ToolResult {
        call_id: id.into(),
        tool_name: name.map(str::to_owned),
        content: content.into(),
        content_form,
        is_error: None,
        details: None,
        extra: Extra::new(),
    })
}

/// A tool-result message with one text result (OpenClaw style: the tool name is recorded).
pub fn result(id: &str, name: &str, text: &str) -> Message {
    Message::new(
        Role::ToolResult,
        vec![result_block(id, Some(name), vec![Block::text(text)])],
    )
}

/// A tool-result message with one result of several blocks.
pub fn result_of(id: &str, name: Option<&str>, content: Vec<Block>) -> Message {
    Message::new(Role::ToolResult, vec![result_block(id, name, content)])
}

pub fn image() -> Block {
    Block::Image(ImageBlock {
        source: ImageSource::Base64 {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
        },
        extra: Extra::new(),
    })
}

/// `n` characters of numbered lines (`line 0001 xxxx…`), each 32 characters with its newline.
pub fn lines(n: usize) -> String {
    let mut out = String::with_capacity(n + 32);
    let mut index = 0;
    while out.len() < n {
        out.push_str(&format!("line {index:04} {}\n", "x".repeat(21)));
        index += 1;
    }
    out.truncate(n);
    out
}

/// The result blocks of all messages.
pub fn results(messages: &[Message]) -> Vec<&ToolResult> {
    messages
        .iter()
        .flat_map(|message| message.tool_results())
        .collect()
}

pub fn result_text(result: &ToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(Block::as_text)
        .map(|text| text.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Estimator characters of a result's text blocks (what truncation budgets).
pub fn text_weight(result: &ToolResult) -> usize {
    result
        .content
        .iter()
        .filter_map(Block::as_text)
        .map(|text| estimate_string_chars(&text.text))
        .sum()
}

/// Every call has a result and every result a call.
pub fn pairing(messages: &[Message]) -> Result<(), String> {
    let calls: HashSet<&str> = messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|c| c.id.as_str())
        .collect();
    let answered: HashSet<&str> = results(messages)
        .iter()
        .map(|r| r.call_id.as_str())
        .collect();
    if let Some(missing) = calls.iter().find(|id| !answered.contains(*id)) {
        return Err(format!("call {missing} has no result"));
    }
    if let Some(orphan) = answered.iter().find(|id| !calls.contains(*id)) {
        return Err(format!("result {orphan} has no call"));
    }
    Ok(())
}

/// Messages as readable text: role, then content, one line per text line.
pub fn render(messages: &[Message]) -> String {
    let mut out = String::new();
    for (index, message) in messages.iter().enumerate() {
        out.push_str(&format!("#{index} {}\n", message.role.name()));
        render_blocks(&message.content, "  ", &mut out);
    }
    out
}

fn render_blocks(blocks: &[Block], indent: &str, out: &mut String) {
    for block in blocks {
        match block {
            Block::Text(text) => {
                for line in text.text.split('\n') {
                    let gap = if line.is_empty() { "" } else { " " };
                    out.push_str(&format!("{indent}|{gap}{line}\n"));
                }
            }
            Block::Thinking(thinking) => {
                out.push_str(&format!("{indent}(thinking) {}\n", thinking.thinking))
            }
            Block::Image(_) => out.push_str(&format!("{indent}[image]\n")),
            Block::ToolCall(call) => out.push_str(&format!(
                "{indent}-> {}#{} {}\n",
                call.name, call.id, call.arguments
            )),
            Block::ToolResult(result) => {
                out.push_str(&format!(
                    "{indent}<- #{} {}\n",
                    result.call_id,
                    result.tool_name.as_deref().unwrap_or("?")
                ));
                render_blocks(&result.content, &format!("{indent}   "), out);
            }
            Block::Opaque(value) => out.push_str(&format!("{indent}[opaque {value}]\n")),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Arbitrary well-formed transcripts
// ---------------------------------------------------------------------------------------------

/// Tool output of about `size` characters in one of several shapes.
fn make_text(size: usize, shape: u8) -> String {
    match shape % 6 {
        0 => lines(size),
        1 => format!("{}\nError: build failed with exit code 2\n", lines(size)),
        2 => format!("{{\"items\": \"{}\"}}", "y".repeat(size)),
        3 => "日本語のテキスト、".repeat(size / 9 + 1),
        4 => "z".repeat(size),
        _ => format!(
            "{}\nSummary: done",
            "é😀 mixed ünïcödé\n".repeat(size / 18 + 1)
        ),
    }
}

fn arb_result_content() -> impl Strategy<Value = Vec<Block>> {
    (
        prop::collection::vec((0usize..40_000, any::<u8>()), 1..4),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(texts, with_image, with_opaque)| {
            let mut blocks: Vec<Block> = texts
                .into_iter()
                .map(|(size, shape)| Block::text(make_text(size, shape)))
                .collect();
            if with_image {
                blocks.insert(blocks.len() / 2, image());
            }
            if with_opaque {
                blocks.push(Block::Opaque(json!({"type": "document", "title": "x"})));
            }
            blocks
        })
}

/// One assistant step: how many calls, whether results are combined in one message
/// (Anthropic) or one message each (OpenAI/OpenClaw), whether results carry the tool name.
fn arb_step() -> impl Strategy<Value = (Vec<Vec<Block>>, bool, bool)> {
    (
        prop::collection::vec(arb_result_content(), 0..4),
        any::<bool>(),
        any::<bool>(),
    )
}

const TOOL_NAMES: &[&str] = &["read", "bash", "Grep", "web_fetch"];

/// Well-formed transcripts: optional system prompt, optional bootstrap reads before the first
/// user message, then user turns of assistant steps with their results right after the calls.
pub fn arb_transcript() -> impl Strategy<Value = Vec<Message>> {
    (
        any::<bool>(),
        prop::option::of(arb_step()),
        prop::collection::vec(
            ("[a-z ]{0,20}", prop::collection::vec(arb_step(), 0..3)),
            0..7,
        ),
    )
        .prop_map(|(with_system, bootstrap, turns)| {
            let mut messages = Vec::new();
            let mut next_id = 0usize;
            let mut push_step =
                |messages: &mut Vec<Message>,
                 (contents, combined, named): (Vec<Vec<Block>>, bool, bool)| {
                    if contents.is_empty() {
                        messages.push(assistant("thinking aloud"));
                        return;
                    }
                    let ids: Vec<(String, &str)> = contents
                        .iter()
                        .map(|_| {
                            next_id += 1;
                            (
                                format!("call_{next_id}"),
                                TOOL_NAMES[next_id % TOOL_NAMES.len()],
                            )
                        })
                        .collect();
                    let refs: Vec<(&str, &str)> =
                        ids.iter().map(|(id, name)| (id.as_str(), *name)).collect();
                    messages.push(calls(&refs));
                    let blocks: Vec<Block> = ids
                        .iter()
                        .zip(contents)
                        .map(|((id, name), content)| {
                            result_block(id, named.then_some(*name), content)
                        })
                        .collect();
                    if combined {
                        messages.push(Message::new(Role::ToolResult, blocks));
                    } else {
                        for block in blocks {
                            messages.push(Message::new(Role::ToolResult, vec![block]));
                        }
                    }
                };
            if with_system {
                messages.push(system("You are a careful agent."));
            }
            if let Some(step) = bootstrap {
                push_step(&mut messages, step);
            }
            for (text, steps) in turns {
                messages.push(user(&text));
                for step in steps {
                    push_step(&mut messages, step);
                }
                messages.push(assistant("done"));
            }
            messages
        })
}
