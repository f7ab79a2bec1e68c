//! A readable text rendering of what a model sees: one block per message, a header naming the
//! role, then every content block in order.
//!
//! This is the layout `skald context` prints on a terminal and the form snapshot tests keep of
//! model-visible contexts (a diff of this text reads like a diff of the conversation, which raw
//! JSON does not). Only model-visible content is shown: tool-result `details`, usage, ids of
//! entries and other metadata never appear, and images are placeholders (their bytes are noise
//! here).
//!
//! ```
//! use skald_core::message::{Message, Role};
//! use skald_core::render::render_messages;
//!
//! let text = render_messages(&[Message::text(Role::User, "List the files.")]);
//! assert_eq!(text, "=== [1] user ===\nList the files.\n");
//! ```

use serde_json::Value;

use crate::message::{Block, ImageBlock, ImageSource, Message, ToolCall, ToolResult};

/// Tool-call arguments whose compact JSON is at most this many characters stay on one line;
/// longer ones are pretty-printed so each field is on its own line.
const INLINE_ARGUMENTS_CHARS: usize = 100;

/// Renders `messages` as text: for each, `=== [n] role ===` (n counts from 1), then its blocks;
/// messages are separated by a blank line. Pure and deterministic.
pub fn render_messages(messages: &[Message]) -> String {
    let mut out = String::new();
    for (index, message) in messages.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        render_message(index + 1, message, &mut out);
    }
    out
}

/// What a context carries besides its messages: the heading of [`render_context`].
#[derive(Debug, Clone, Copy)]
pub struct ContextHeading<'a> {
    /// The session the context is of.
    pub session_id: &'a str,
    /// The name of the policy that built it.
    pub policy: &'a str,
    /// skald's estimate of the messages and the system prompt addition, in tokens.
    pub estimated_tokens: u64,
    /// What the engine adds to the host's system prompt.
    pub system_prompt_addition: Option<&'a str>,
    /// Names of the tools the engine adds to the request.
    pub tools: &'a [String],
}

/// A whole context as a person reads it (`skald context --text` and the dashboard's session
/// page): a summary line, the system prompt addition and the tools the engine adds, then the
/// messages as [`render_messages`] writes them.
pub fn render_context(heading: &ContextHeading<'_>, messages: &[Message]) -> String {
    let mut out = format!(
        "session {} · policy {} · {} messages · ~{} tokens\n",
        heading.session_id,
        heading.policy,
        messages.len(),
        heading.estimated_tokens
    );
    if let Some(addition) = heading.system_prompt_addition {
        out.push_str(&format!("\n--- system prompt addition ---\n{addition}\n"));
    }
    if !heading.tools.is_empty() {
        out.push_str(&format!(
            "\n--- tools added ---\n{}\n",
            heading.tools.join(", ")
        ));
    }
    out.push('\n');
    out.push_str(&render_messages(messages));
    out
}

fn render_message(number: usize, message: &Message, out: &mut String) {
    out.push_str(&format!("=== [{number}] {} ===\n", message.role.name()));
    if message.content.is_empty() {
        out.push_str("(no content)\n");
        return;
    }
    for block in &message.content {
        render_block(block, out);
    }
}

fn render_block(block: &Block, out: &mut String) {
    match block {
        Block::Text(text) => push_text(&text.text, out),
        Block::Thinking(thinking) => {
            out.push_str("[thinking]\n");
            push_text(&thinking.thinking, out);
            out.push_str("[/thinking]\n");
        }
        Block::Image(image) => {
            out.push_str(&image_placeholder(image));
            out.push('\n');
        }
        Block::ToolCall(call) => render_tool_call(call, out),
        Block::ToolResult(result) => render_tool_result(result, out),
        Block::Opaque(value) => {
            let kind = value.get("type").and_then(Value::as_str).unwrap_or("?");
            out.push_str(&format!("[{kind} block, not rendered]\n"));
        }
    }
}

/// Text as written, ending in exactly one newline (an empty text shows as `(empty text)`, so a
/// blank block is visible).
fn push_text(text: &str, out: &mut String) {
    if text.is_empty() {
        out.push_str("(empty text)\n");
        return;
    }
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

fn render_tool_call(call: &ToolCall, out: &mut String) {
    out.push_str(&format!("[tool call {} id={}]\n", call.name, call.id));
    let arguments = match &call.arguments {
        // Arguments that were not valid JSON are kept as the string the model wrote.
        Value::String(raw) => raw.clone(),
        other @ (Value::Null
        | Value::Bool(_)
        | Value::Number(_)
        | Value::Array(_)
        | Value::Object(_)) => {
            let compact = other.to_string();
            if compact.chars().count() <= INLINE_ARGUMENTS_CHARS {
                compact
            } else {
                serde_json::to_string_pretty(other).unwrap_or(compact)
            }
        }
    };
    push_text(&arguments, out);
}

fn render_tool_result(result: &ToolResult, out: &mut String) {
    let mut header = format!("[tool result id={}", result.call_id);
    if let Some(name) = &result.tool_name {
        header.push_str(&format!(" tool={name}"));
    }
    if result.failed() {
        header.push_str(" error");
    }
    header.push_str("]\n");
    out.push_str(&header);
    if result.content.is_empty() {
        out.push_str("(no content)\n");
    }
    for block in &result.content {
        render_block(block, out);
    }
}

fn image_placeholder(image: &ImageBlock) -> String {
    match &image.source {
        ImageSource::Base64 { media_type, data } => {
            format!("[image {media_type}, {} base64 chars]", data.len())
        }
        ImageSource::Url { url } if url.starts_with("data:") => {
            format!("[image data URL, {} chars]", url.len())
        }
        ImageSource::Url { url } => format!("[image {url}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ContentForm, Extra, Role, TextBlock, ThinkingBlock};

    #[test]
    fn a_context_has_its_summary_addition_and_tools_before_the_messages() {
        let tools = vec!["fetch_original_data".to_owned()];
        let heading = ContextHeading {
            session_id: "s1",
            policy: "skald",
            estimated_tokens: 12,
            system_prompt_addition: Some("Use the refs."),
            tools: &tools,
        };
        let text = render_context(&heading, &[Message::text(Role::User, "Hi.")]);
        assert_eq!(
            text,
            "session s1 · policy skald · 1 messages · ~12 tokens\n\n--- system prompt addition \
             ---\nUse the refs.\n\n--- tools added ---\nfetch_original_data\n\n=== [1] user \
             ===\nHi.\n"
        );
        let bare = ContextHeading {
            system_prompt_addition: None,
            tools: &[],
            ..heading
        };
        assert_eq!(
            render_context(&bare, &[]),
            "session s1 · policy skald · 0 messages · ~12 tokens\n\n"
        );
    }

    #[test]
    fn empty_input_renders_nothing() {
        assert_eq!(render_messages(&[]), "");
    }

    #[test]
    fn details_never_appear() {
        let result = ToolResult {
            call_id: "c1".into(),
            tool_name: Some("read".into()),
            content: vec![Block::text("visible")].into(),
            content_form: ContentForm::Blocks,
            is_error: Some(true),
            details: Some(serde_json::json!({"secret": "host-only payload"}).into()),
            extra: Extra::new(),
        };
        let text = render_messages(&[Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(result)],
        )]);
        assert_eq!(
            text,
            "=== [1] tool_result ===\n[tool result id=c1 tool=read error]\nvisible\n"
        );
        assert!(!text.contains("host-only"));
    }

    #[test]
    fn long_arguments_are_pretty_printed_and_short_ones_inline() {
        let call = |arguments: Value| {
            Block::ToolCall(ToolCall {
                id: "c".into(),
                name: "bash".into(),
                arguments,
                arguments_text: None,
                extra: Extra::new(),
            })
        };
        let short = render_messages(&[Message::new(
            Role::Assistant,
            vec![call(serde_json::json!({"command": "ls"}))],
        )]);
        assert!(short.contains("{\"command\":\"ls\"}\n"), "{short}");
        let long = render_messages(&[Message::new(
            Role::Assistant,
            vec![call(serde_json::json!({"command": "x".repeat(120)}))],
        )]);
        assert!(long.contains("{\n  \"command\": \"xxx"), "{long}");
    }

    #[test]
    fn blank_blocks_and_messages_stay_visible() {
        let text = render_messages(&[
            Message::new(Role::Assistant, vec![]),
            Message::new(
                Role::Assistant,
                vec![
                    Block::Text(TextBlock {
                        text: String::new(),
                        extra: Extra::new(),
                    }),
                    Block::Thinking(ThinkingBlock {
                        thinking: "hmm\n".into(),
                        signature: Some("sig".into()),
                        extra: Extra::new(),
                    }),
                ],
            ),
        ]);
        assert_eq!(
            text,
            "=== [1] assistant ===\n(no content)\n\n=== [2] assistant ===\n(empty text)\n\
             [thinking]\nhmm\n[/thinking]\n"
        );
    }
}
