//! Tool output that arrives inside an envelope, and the text inside it.
//!
//! Some harnesses do not send a command's output as it was printed:
//! - Codex on the chat wire sends a JSON string, `{"output":"<the output, \n escaped>",
//!   "metadata":{"exit_code":0,"duration_seconds":0.1}}`: one line of JSON whose every line break
//!   is an escape, so a digest sees "code, 1 line" and a `grep` over lines finds nothing.
//! - Codex's Responses `function_call_output.output` is plain text with a header (`Chunk ID: …`,
//!   `Wall time: …`, `Process exited with code 0`, `Original token count: N`) and then `Output:`
//!   followed by the output.
//!
//! [`unwrap`] finds the output inside both, with the exit code the envelope states. The rule for
//! the JSON form: the text is one JSON object and its main field — the first of [`MAIN_FIELDS`]
//! holding a string — holds a long string (a line break in it, or at least [`LONG_CHARS`]
//! characters). Anything else is not an envelope and is read as it is. The digest summarises the
//! inner text (keeping the exit code). Nothing else unwraps: neither host unwraps these before
//! its model reads them, so the envelope is what the model was shown, and it is the original
//! that is stored and that fetch gives back (naming the envelope and its exit code). A JSON
//! object in a tool result — Claude Code's `toolUseResult` record (`stdout`, `stderr`,
//! `interrupted`…) printed by a tool, say — is likewise kept whole; only a host's own record
//! that the host itself turns into the model's text (that record in Claude Code's PostToolUse
//! hook input) is read as the host reads it, by the hook.

use std::borrow::Cow;

use serde_json::{Map, Value};

/// The fields that hold the output of a JSON envelope, in the order they are looked for.
pub const MAIN_FIELDS: [&str; 5] = ["output", "content", "stdout", "text", "result"];

/// A main field without a line break is output only from this many characters on: a short
/// one-line string is more likely a value of a JSON answer than a command's output.
pub const LONG_CHARS: usize = 200;

/// The output inside an envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwrapped<'a> {
    /// The output as printed (escapes decoded).
    pub body: Cow<'a, str>,
    /// The exit code the envelope states.
    pub exit_code: Option<String>,
    /// What the envelope was, for a reader: `JSON field "output"` or `Codex output header`.
    pub envelope: String,
}

/// The output inside `text` when `text` is one of the envelopes of the module docs.
pub fn unwrap(text: &str) -> Option<Unwrapped<'_>> {
    json_envelope(text).or_else(|| codex_header(text))
}

fn json_envelope(text: &str) -> Option<Unwrapped<'static>> {
    let trimmed = text.trim();
    if !(trimmed.starts_with('{') && trimmed.ends_with('}')) {
        return None;
    }
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(trimmed) else {
        return None;
    };
    let (key, body) = MAIN_FIELDS.iter().find_map(|key| match fields.get(*key) {
        Some(Value::String(body)) => Some((*key, body)),
        Some(_) | None => None,
    })?;
    if !body.contains('\n') && body.chars().count() < LONG_CHARS {
        return None;
    }
    Some(Unwrapped {
        body: Cow::Owned(body.clone()),
        exit_code: json_exit_code(&fields),
        envelope: format!("JSON field {key:?}"),
    })
}

/// `exit_code` (or a spelling of it) at the top or under `metadata`.
fn json_exit_code(fields: &Map<String, Value>) -> Option<String> {
    const KEYS: [&str; 4] = ["exit_code", "exitCode", "returncode", "return_code"];
    let metadata = match fields.get("metadata") {
        Some(Value::Object(metadata)) => Some(metadata),
        Some(_) | None => None,
    };
    [Some(fields), metadata]
        .into_iter()
        .flatten()
        .flat_map(|object| KEYS.iter().filter_map(|key| object.get(*key)))
        .find_map(|code| match code {
            Value::Number(number) => Some(number.to_string()),
            Value::String(text) if !text.is_empty() && text.len() <= 6 => Some(text.clone()),
            Value::Null
            | Value::Bool(_)
            | Value::String(_)
            | Value::Array(_)
            | Value::Object(_) => None,
        })
}

/// Header lines Codex writes before `Output:`.
const CODEX_HEADER_PREFIXES: [&str; 5] = [
    "Chunk ID:",
    "Wall time:",
    "Process exited with code",
    "Process running with session ID",
    "Original token count:",
];

fn codex_header(text: &str) -> Option<Unwrapped<'_>> {
    let mut exit_code = None;
    let mut rest = text;
    let mut header_lines = 0;
    loop {
        let (line, after) = match rest.split_once('\n') {
            Some((line, after)) => (line, after),
            None => (rest, ""),
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line == "Output:" {
            // At least one known header line: `Output:` alone starts many texts.
            return (header_lines > 0).then(|| Unwrapped {
                body: Cow::Borrowed(after),
                exit_code,
                envelope: "Codex output header".to_owned(),
            });
        }
        if !CODEX_HEADER_PREFIXES
            .iter()
            .any(|prefix| line.starts_with(prefix))
        {
            return None;
        }
        if let Some(code) = line.strip_prefix("Process exited with code") {
            exit_code = Some(code.trim().to_owned()).filter(|code| !code.is_empty());
        }
        header_lines += 1;
        if after.is_empty() {
            return None;
        }
        rest = after;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn codex_chat_json_output_is_unwrapped_with_its_exit_code() {
        let text =
            r#"{"output":"a.txt\nb.txt\n","metadata":{"exit_code":0,"duration_seconds":0.1}}"#;
        let out = unwrap(text).unwrap();
        assert_eq!(out.body, "a.txt\nb.txt\n");
        assert_eq!(out.exit_code.as_deref(), Some("0"));
        assert_eq!(out.envelope, "JSON field \"output\"");
    }

    #[test]
    fn short_one_line_fields_and_other_json_are_not_envelopes() {
        assert!(unwrap(r#"{"output":"ok","metadata":{"exit_code":0}}"#).is_none());
        assert!(unwrap(r#"{"name":"x","value":"a\nb"}"#).is_none());
        assert!(unwrap(r#"[{"output":"a\nb"}]"#).is_none());
        assert!(unwrap("plain text\nOutput:\nx").is_none());
    }

    #[test]
    fn codex_responses_header_is_unwrapped_with_its_exit_code() {
        let text = "Chunk ID: 3f2a\nWall time: 0.1 seconds\nProcess exited with code 2\nOriginal token count: 12\nOutput:\nerror: no such file\n";
        let out = unwrap(text).unwrap();
        assert_eq!(out.body, "error: no such file\n");
        assert_eq!(out.exit_code.as_deref(), Some("2"));
    }
}
