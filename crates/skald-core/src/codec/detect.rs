//! Format detection from content alone: which of the [`Format`]s an input is, decided from the
//! shape of its JSON, never from a file name.
//!
//! JSON Lines inputs (OpenClaw and Claude Code sessions, which reach several megabytes) are told
//! apart by their first few lines only; single JSON documents are parsed once.

use serde_json::{Map, Value};

use super::Format;
use super::json::{json_error_message, kind};

/// The formats [`detect`] knows, in the order error messages list them.
const SUPPORTED: [Format; 8] = [
    Format::OpenAiRequest,
    Format::OpenAiResponse,
    Format::AnthropicRequest,
    Format::AnthropicResponse,
    Format::OpenClawSession,
    Format::ClaudeCode,
    Format::MiniSweAgent,
    Format::SweAgent,
];

/// How many non-blank lines of a JSON Lines input are looked at before giving up.
const JSONL_PROBE_LINES: usize = 20;

/// Entry types a Claude Code session line may have (`summary` is written by older versions,
/// `attachment` — the instruction files loaded, among others — by 2.1).
const CLAUDE_CODE_TYPES: [&str; 8] = [
    "user",
    "assistant",
    "progress",
    "system",
    "file-history-snapshot",
    "queue-operation",
    "summary",
    "attachment",
];

/// Why an input's format could not be told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DetectError {
    /// Nothing but whitespace.
    #[error(
        "empty input; expected JSON or JSON Lines in one of: {}",
        supported_list()
    )]
    Empty,
    /// Neither one JSON document nor JSON Lines.
    #[error(
        "not JSON: line {line}, column {column}: {message}; expected JSON or JSON Lines in one of: {}",
        supported_list()
    )]
    NotJson {
        /// The 1-based line of the input where the JSON parser stopped.
        line: usize,
        /// The 1-based column on that line.
        column: usize,
        /// What the JSON parser found wrong.
        message: String,
    },
    /// A JSON document whose shape matches no format.
    #[error(
        "{shape} matches no supported format; expected one of: {}",
        supported_list()
    )]
    UnknownDocument {
        /// What the document looks like (its type, or an object's first keys), to say why no
        /// format matched.
        shape: String,
    },
    /// JSON Lines whose lines match no session format.
    #[error(
        "JSON Lines whose line {line} is {shape} match no supported session format; expected one of: {}",
        supported_list()
    )]
    UnknownLines {
        /// The first line that matched no session format.
        line: usize,
        /// What that line looks like, to say why no format matched.
        shape: String,
    },
}

fn supported_list() -> String {
    SUPPORTED
        .iter()
        .map(|format| format.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Tells the format of `input` from its content.
///
/// JSON Lines: a first object `{"type":"session"}` is an OpenClaw session; lines with a
/// `sessionId` and a Claude Code entry type make a Claude Code session. A JSON document is, in
/// order: a mini-swe-agent trajectory (`trajectory_format` or assistant `extra.response`), a
/// SWE-agent trajectory (`history` and `trajectory`), an OpenAI response (`choices`), an Anthropic
/// response (`type: "message"`, `role: "assistant"`), an Anthropic request (`messages` plus a
/// top-level `system`, Anthropic-only block types or `input_schema` tools) or else, with
/// `messages`, an OpenAI request.
pub fn detect(input: &str) -> Result<Format, DetectError> {
    let text = input.strip_prefix('\u{feff}').unwrap_or(input);
    let mut lines = non_blank_lines(text);
    let Some((_, first_line)) = lines.next() else {
        return Err(DetectError::Empty);
    };
    let has_second_line = lines.next().is_some();

    match serde_json::from_str::<Value>(first_line) {
        Ok(first) if has_second_line => match first {
            // One object per line: a session log.
            Value::Object(_) => detect_lines(text),
            // A document that happens to begin with a complete value on its own line.
            Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Array(_) => detect_whole(text),
        },
        Ok(first) => detect_document(&first),
        Err(_) => detect_whole(text),
    }
}

/// Parses the whole input as one document; if that fails, JSON Lines whose first line is broken
/// are still recognised from the lines after it.
fn detect_whole(text: &str) -> Result<Format, DetectError> {
    match serde_json::from_str::<Value>(text) {
        Ok(document) => detect_document(&document),
        Err(error) => {
            let lines_parse = non_blank_lines(text)
                .take(JSONL_PROBE_LINES)
                .any(|(_, line)| {
                    matches!(serde_json::from_str::<Value>(line), Ok(Value::Object(_)))
                });
            if lines_parse {
                detect_lines(text)
            } else {
                Err(DetectError::NotJson {
                    line: error.line(),
                    column: error.column(),
                    message: json_error_message(&error),
                })
            }
        }
    }
}

fn non_blank_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line))
        .filter(|(_, line)| !line.trim().is_empty())
}

fn detect_lines(text: &str) -> Result<Format, DetectError> {
    let mut first_object: Option<(usize, String)> = None;
    for (line_number, line) in non_blank_lines(text).take(JSONL_PROBE_LINES) {
        let Ok(Value::Object(object)) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let entry_type = object.get("type").and_then(Value::as_str);
        if first_object.is_none() {
            if entry_type == Some("session") {
                return Ok(Format::OpenClawSession);
            }
            first_object = Some((line_number, describe_object(&object)));
        }
        match entry_type {
            Some(kind) if CLAUDE_CODE_TYPES.contains(&kind) => {
                if object.get("sessionId").is_some_and(Value::is_string) {
                    return Ok(Format::ClaudeCode);
                }
                // A snapshot or summary line without `sessionId` may open a Claude Code session.
            }
            Some(_) | None => break,
        }
    }
    let (line, shape) = first_object.unwrap_or((1, "not a JSON object".to_owned()));
    Err(DetectError::UnknownLines { line, shape })
}

fn detect_document(document: &Value) -> Result<Format, DetectError> {
    let object = match document {
        Value::Object(object) => object,
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            return Err(DetectError::UnknownDocument {
                shape: format!("a JSON document that is {}", kind(document)),
            });
        }
    };
    let entry_type = object.get("type").and_then(Value::as_str);

    // A one-line session log parses as a single document.
    if entry_type == Some("session")
        && (object.contains_key("version") || object.contains_key("id"))
    {
        return Ok(Format::OpenClawSession);
    }
    if entry_type.is_some_and(|kind| CLAUDE_CODE_TYPES.contains(&kind))
        && object.get("sessionId").is_some_and(Value::is_string)
    {
        return Ok(Format::ClaudeCode);
    }

    if is_mini_swe(object) {
        return Ok(Format::MiniSweAgent);
    }
    if object.contains_key("history") && object.contains_key("trajectory") {
        return Ok(Format::SweAgent);
    }
    if object.get("choices").is_some_and(Value::is_array) {
        return Ok(Format::OpenAiResponse);
    }
    if entry_type == Some("message")
        && object.get("role").and_then(Value::as_str) == Some("assistant")
    {
        return Ok(Format::AnthropicResponse);
    }
    if object.get("messages").is_some_and(Value::is_array) {
        return Ok(if has_anthropic_signals(object) {
            Format::AnthropicRequest
        } else {
            Format::OpenAiRequest
        });
    }
    Err(DetectError::UnknownDocument {
        shape: describe_object(object),
    })
}

fn is_mini_swe(object: &Map<String, Value>) -> bool {
    if object
        .get("trajectory_format")
        .and_then(Value::as_str)
        .is_some_and(|format| format.starts_with("mini-swe-agent"))
    {
        return true;
    }
    let Some(messages) = object.get("messages").and_then(Value::as_array) else {
        return false;
    };
    messages.iter().any(|message| {
        message.get("role").and_then(Value::as_str) == Some("assistant")
            && message
                .get("extra")
                .is_some_and(|extra| extra.get("response").is_some())
    })
}

/// Anthropic-only features of a request: a top-level `system`, block types OpenAI does not have,
/// images given by `source`, tools described by `input_schema`.
fn has_anthropic_signals(object: &Map<String, Value>) -> bool {
    if object.contains_key("system") {
        return true;
    }
    let tools_have_schema = object
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| tools.iter().any(|tool| tool.get("input_schema").is_some()));
    if tools_have_schema {
        return true;
    }
    let messages = object
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    messages
        .iter()
        .filter_map(|message| message.get("content").and_then(Value::as_array))
        .flatten()
        .any(|block| match block.get("type").and_then(Value::as_str) {
            Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking" | "document") => {
                true
            }
            Some("image") => block.get("source").is_some(),
            Some(_) | None => false,
        })
}

/// A short description of an object for error messages: its first few keys.
fn describe_object(object: &Map<String, Value>) -> String {
    const SHOWN: usize = 6;
    if object.is_empty() {
        return "an empty JSON object".to_owned();
    }
    let mut keys: Vec<String> = object
        .keys()
        .take(SHOWN)
        .map(|key| format!("\"{key}\""))
        .collect();
    if object.len() > SHOWN {
        keys.push(format!("… ({} keys)", object.len()));
    }
    format!("a JSON object with keys {}", keys.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_input_is_empty() {
        assert_eq!(detect(" \n\t\n"), Err(DetectError::Empty));
    }

    #[test]
    fn errors_name_the_supported_formats() {
        let message = detect("{\"hello\": 1}").err().map(|e| e.to_string());
        let message = message.unwrap_or_default();
        assert!(message.contains("\"hello\""), "{message}");
        assert!(message.contains("claude-code"), "{message}");
        assert!(message.contains("openai-request"), "{message}");
    }
}
