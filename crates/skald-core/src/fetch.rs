//! `fetch_original_data`: the tool through which a model takes back what was offloaded or
//! truncated — its definition, its argument parsing, and the slicing of an original (`lines`,
//! `grep` with context, `max_chars`) so a model takes the part it needs instead of pulling 100 kB
//! back into its context. Looking the ref up is the caller's job (the store does I/O).
//!
//! An original is given back as the model was shown it, byte for byte: its own lines, also when
//! it is output inside an envelope ([`crate::tool_output::unwrap`]: a JSON object whose main
//! field is a long string, Codex's `Output:` header) — the model saw the envelope, so the
//! envelope is the original; the header names it and its exit code (the digest, not the
//! original, is what looks inside).
//!
//! ```
//! use skald_core::fetch::{FetchArgs, render_payload};
//! use skald_core::message::Block;
//! use skald_core::refs::RefPayload;
//! use serde_json::json;
//!
//! let payload = RefPayload::new(vec![Block::text("a\nb\nerror: boom\nc")]);
//! let id = payload.id();
//! let args = FetchArgs::from_json(&json!({"ref_ids": [id.as_str()], "grep": "error", "context": 0})).unwrap();
//! let text = render_payload(&id, &payload, &args);
//! assert!(text.contains("3| error: boom"));
//! ```

use regex::Regex;
use serde_json::{Value, json};

use crate::message::{Block, Extra, ImageSource, ToolSpec};
use crate::pipeline::offload::FETCH_TOOL_NAME;
use crate::refs::{RefId, RefIdError, RefPayload};

/// Default cap on the characters returned per ref.
pub const DEFAULT_MAX_CHARS: usize = 20_000;
/// Smallest `max_chars` a caller may ask for.
pub const MIN_MAX_CHARS: usize = 200;
/// Default lines of context around a `grep` match.
pub const DEFAULT_CONTEXT: usize = 2;
/// Most ref ids one call may name.
pub const MAX_REF_IDS: usize = 20;

/// The tool's definition, to add to a request's tools.
///
/// Kept small on purpose: a session that offloads carries it in every request, and on a host
/// that sends no tools of its own its arrival rewrites the whole cached prefix, a cost the first
/// offload must pay back (`pipeline::schedule`). The argument parser enforces what the schema
/// leaves out (at most [`MAX_REF_IDS`] ids, the `lines` syntax).
pub fn tool_spec() -> ToolSpec {
    ToolSpec {
        name: FETCH_TOOL_NAME.to_owned(),
        description: Some(
            "Read the original behind [REF_ID: …] placeholders. Prefer a slice: `lines` \
             (\"120:180\") or `grep` (regex; `context` lines around). Lines are numbered."
                .to_owned(),
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "ref_ids": {"type": "array", "items": {"type": "string"}},
                "lines": {"type": "string"},
                "grep": {"type": "string"},
                "context": {"type": "integer", "minimum": 0, "maximum": 50},
                "max_chars": {"type": "integer", "minimum": MIN_MAX_CHARS}
            },
            "required": ["ref_ids"],
            "additionalProperties": false
        }),
        extra: Extra::new(),
    }
}

/// An inclusive, 1-based line range; either end may be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRange {
    /// The first line shown, 1-based (1 when the range was written `:50`).
    pub start: usize,
    /// The last line shown, inclusive; `None` runs to the end of the output.
    pub end: Option<usize>,
}

impl LineRange {
    /// Parses `"120:180"`, `"120:"`, `":50"` or `"42"`.
    pub fn parse(raw: &str) -> Result<LineRange, FetchArgsError> {
        let bad = || FetchArgsError::Lines(raw.to_owned());
        let number = |s: &str| -> Result<Option<usize>, FetchArgsError> {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            match s.parse::<usize>() {
                Ok(0) | Err(_) => Err(bad()),
                Ok(n) => Ok(Some(n)),
            }
        };
        let (start, end) = match raw.split_once(':') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(raw)?.ok_or_else(bad)?;
                (Some(n), Some(n))
            }
        };
        let start = start.unwrap_or(1);
        if end.is_some_and(|end| end < start) {
            return Err(bad());
        }
        Ok(LineRange { start, end })
    }
}

/// The parsed arguments of one call.
#[derive(Debug, Clone)]
pub struct FetchArgs {
    /// The refs to fetch, as the model wrote them; [`FetchArgs::parsed_ids`] checks each.
    pub ref_ids: Vec<String>,
    /// Only these lines of each original.
    pub lines: Option<LineRange>,
    /// Only the lines matching this expression, with `context` lines around each match.
    pub grep: Option<Regex>,
    /// Lines shown before and after each `grep` match (at most 50).
    pub context: usize,
    /// The most characters of one original's body shown; the rest is cut on a line with a note
    /// saying how to narrow the request.
    pub max_chars: usize,
}

/// Arguments a model got wrong; the message is written for the model to correct itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchArgsError {
    /// The arguments are not a JSON object.
    #[error("arguments must be a JSON object with \"ref_ids\"")]
    NotAnObject,
    /// `ref_ids` is missing, empty, too long or not all strings.
    #[error("\"ref_ids\" must be a non-empty array of strings (at most {MAX_REF_IDS})")]
    RefIds,
    /// An argument the tool does not define.
    #[error("unknown argument {0:?}: expected ref_ids, lines, grep, context or max_chars")]
    Unknown(String),
    /// `lines` is not a line range.
    #[error("\"lines\" {0:?} is not a line range: use \"120:180\", \"120:\" or \":50\" (1-based)")]
    Lines(String),
    /// `grep` does not compile as a regular expression.
    #[error("\"grep\" is not a valid regular expression: {0}")]
    Grep(String),
    /// `context` or `max_chars` is not a non-negative integer.
    #[error("\"{0}\" must be a non-negative integer")]
    Integer(&'static str),
    /// `max_chars` is below the smallest useful slice.
    #[error("\"max_chars\" must be at least {MIN_MAX_CHARS}")]
    MaxCharsTooSmall,
}

impl FetchArgs {
    /// Reads the tool call's arguments.
    pub fn from_json(value: &Value) -> Result<FetchArgs, FetchArgsError> {
        let object = value.as_object().ok_or(FetchArgsError::NotAnObject)?;
        if let Some(key) = object.keys().find(|k| {
            !matches!(
                k.as_str(),
                "ref_ids" | "lines" | "grep" | "context" | "max_chars"
            )
        }) {
            return Err(FetchArgsError::Unknown(key.clone()));
        }
        let ref_ids: Vec<String> = match object.get("ref_ids") {
            Some(Value::Array(items)) if !items.is_empty() && items.len() <= MAX_REF_IDS => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or(FetchArgsError::RefIds)?,
            // A lone string is what a model most often sends by mistake; accept it.
            Some(Value::String(one)) => vec![one.clone()],
            _ => return Err(FetchArgsError::RefIds),
        };
        let lines = match object.get("lines") {
            None | Some(Value::Null) => None,
            Some(Value::String(raw)) => Some(LineRange::parse(raw)?),
            Some(other) => return Err(FetchArgsError::Lines(other.to_string())),
        };
        let grep = match object.get("grep") {
            None | Some(Value::Null) => None,
            Some(Value::String(pattern)) => Some(
                regex::RegexBuilder::new(pattern)
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| FetchArgsError::Grep(e.to_string()))?,
            ),
            Some(_) => return Err(FetchArgsError::Grep("expected a string".into())),
        };
        let integer = |key: &'static str, default: usize| match object.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(value) => value
                .as_u64()
                .map(|n| n as usize)
                .ok_or(FetchArgsError::Integer(key)),
        };
        let context = integer("context", DEFAULT_CONTEXT)?.min(50);
        let max_chars = integer("max_chars", DEFAULT_MAX_CHARS)?;
        if max_chars < MIN_MAX_CHARS {
            return Err(FetchArgsError::MaxCharsTooSmall);
        }
        Ok(FetchArgs {
            ref_ids,
            lines,
            grep,
            context,
            max_chars,
        })
    }

    /// Parses every requested id; an invalid one gets its own error, the others still resolve.
    pub fn parsed_ids(&self) -> Vec<(String, Result<RefId, RefIdError>)> {
        self.ref_ids
            .iter()
            .map(|raw| (raw.clone(), RefId::parse(raw)))
            .collect()
    }
}

/// Renders the requested slice of one original, with numbered lines and a header.
///
/// The lines are the original's own, byte for byte what the model was shown before the
/// placeholder replaced it (a line break ends a line; a `\r` before it stays in the line, and
/// the header says when the last line has no line break), so the whole original can be read
/// back exactly. Output inside an envelope is not unwrapped here — the model saw the envelope
/// — but the header names it and the exit code it states.
pub fn render_payload(id: &RefId, payload: &RefPayload, args: &FetchArgs) -> String {
    let text = payload.text();
    let envelope = crate::tool_output::unwrap(&text);
    let lines: Vec<&str> = text
        .split_inclusive('\n')
        .map(|line| line.strip_suffix('\n').unwrap_or(line))
        .collect();
    let total = lines.len();
    let (from, to) = match args.lines {
        Some(range) => (
            range.start.min(total.max(1)),
            range.end.unwrap_or(total).min(total),
        ),
        None => (1, total),
    };
    let width = total.max(1).to_string().len();
    let mut body = String::new();
    let mut shown_lines = 0usize;
    match &args.grep {
        None => {
            for number in from..=to {
                if let Some(line) = lines.get(number - 1) {
                    body.push_str(&format!("{number:>width$}| {line}\n"));
                    shown_lines += 1;
                }
            }
        }
        Some(pattern) => {
            let mut keep = vec![false; total + 1];
            let mut matches = 0usize;
            for number in from..=to {
                let Some(line) = lines.get(number - 1) else {
                    continue;
                };
                if pattern.is_match(line.strip_suffix('\r').unwrap_or(line)) {
                    matches += 1;
                    let lo = number.saturating_sub(args.context).max(from);
                    let hi = (number + args.context).min(to);
                    for flag in keep.iter_mut().take(hi + 1).skip(lo) {
                        *flag = true;
                    }
                }
            }
            let mut previous: Option<usize> = None;
            for number in from..=to {
                if !keep.get(number).copied().unwrap_or(false) {
                    continue;
                }
                if previous.is_some_and(|p| p + 1 != number) {
                    body.push_str("--\n");
                }
                if let Some(line) = lines.get(number - 1) {
                    body.push_str(&format!("{number:>width$}| {line}\n"));
                    shown_lines += 1;
                }
                previous = Some(number);
            }
            if matches == 0 {
                body.push_str(&format!("(no line matches /{}/)\n", pattern.as_str()));
            }
        }
    }
    let mut header = format!(
        "=== REF_ID {id}: {total} lines, {} chars",
        text.chars().count()
    );
    if !text.is_empty() && !text.ends_with('\n') {
        header.push_str("; no line break at the end");
    }
    if let Some(inner) = &envelope {
        header.push_str(&format!("; output inside {}", inner.envelope));
        if let Some(code) = &inner.exit_code {
            header.push_str(&format!(", exit code {code}"));
        }
    }
    if args.lines.is_some() {
        header.push_str(&format!("; lines {from}-{to}"));
    }
    if let Some(pattern) = &args.grep {
        header.push_str(&format!(
            "; grep /{}/ ({shown_lines} lines shown)",
            pattern.as_str()
        ));
    }
    header.push_str(" ===\n");
    for block in &payload.blocks {
        if let Block::Image(image) = block {
            let what = match &image.source {
                ImageSource::Base64 { media_type, data } => {
                    format!("{media_type}, {} bytes base64", data.len())
                }
                ImageSource::Url { url } => url.clone(),
            };
            header.push_str(&format!("[image in the original: {what}]\n"));
        }
    }
    let mut out = header;
    if body.chars().count() > args.max_chars {
        let cut: String = body.chars().take(args.max_chars).collect();
        let cut = match cut.rfind('\n') {
            Some(newline) if newline > 0 => cut[..=newline].to_owned(),
            _ => cut,
        };
        let shown = cut.lines().count();
        out.push_str(&cut);
        out.push_str(&format!(
            "[… cut at max_chars={}: {shown} of {shown_lines} lines shown; ask for a narrower \
             `lines` range or a `grep` pattern]\n",
            args.max_chars
        ));
    } else {
        out.push_str(&body);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn payload(lines: usize) -> RefPayload {
        let text: Vec<String> = (1..=lines).map(|i| format!("line {i}")).collect();
        RefPayload::new(vec![Block::text(text.join("\n"))])
    }

    fn args(value: Value) -> FetchArgs {
        FetchArgs::from_json(&value).unwrap()
    }

    #[test]
    fn tool_spec_requires_ref_ids() {
        let spec = tool_spec();
        assert_eq!(spec.name, "fetch_original_data");
        assert_eq!(spec.parameters["required"], json!(["ref_ids"]));
    }

    #[test]
    fn lines_slice_is_inclusive_and_numbered() {
        let p = payload(300);
        let id = p.id();
        let out = render_payload(
            &id,
            &p,
            &args(json!({"ref_ids": [id.as_str()], "lines": "120:122"})),
        );
        assert!(
            out.contains("120| line 120\n121| line 121\n122| line 122\n"),
            "{out}"
        );
        assert!(!out.contains("line 123"));
        assert!(out.contains("300 lines"));
    }

    #[test]
    fn open_ended_and_single_line_ranges() {
        assert_eq!(
            LineRange::parse("120:").unwrap(),
            LineRange {
                start: 120,
                end: None
            }
        );
        assert_eq!(
            LineRange::parse(":5").unwrap(),
            LineRange {
                start: 1,
                end: Some(5)
            }
        );
        assert_eq!(
            LineRange::parse("7").unwrap(),
            LineRange {
                start: 7,
                end: Some(7)
            }
        );
        for bad in ["0:3", "5:2", "a:b", "", "1:2:3"] {
            assert!(LineRange::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn grep_returns_matches_with_context_and_separators() {
        let p = payload(100);
        let id = p.id();
        let out = render_payload(
            &id,
            &p,
            &args(json!({"ref_ids": [id.as_str()], "grep": "^line (10|50)$", "context": 1})),
        );
        assert!(
            out.contains(" 9| line 9\n 10| line 10\n 11| line 11\n--\n 49| line 49"),
            "{out}"
        );
        let none = render_payload(
            &id,
            &p,
            &args(json!({"ref_ids": [id.as_str()], "grep": "zzz"})),
        );
        assert!(none.contains("no line matches"));
    }

    #[test]
    fn max_chars_cuts_on_a_line_and_says_how_to_narrow() {
        let p = payload(5_000);
        let id = p.id();
        let out = render_payload(
            &id,
            &p,
            &args(json!({"ref_ids": [id.as_str()], "max_chars": 500})),
        );
        assert!(out.len() < 900, "{}", out.len());
        assert!(out.contains("cut at max_chars=500"));
        assert!(out.contains("narrower"));
    }

    #[test]
    fn bad_arguments_say_what_to_send() {
        let cases = [
            (json!("x"), FetchArgsError::NotAnObject),
            (json!({}), FetchArgsError::RefIds),
            (json!({"ref_ids": []}), FetchArgsError::RefIds),
            (json!({"ref_ids": [1]}), FetchArgsError::RefIds),
            (
                json!({"ref_ids": ["a"], "path": "x"}),
                FetchArgsError::Unknown("path".into()),
            ),
            (
                json!({"ref_ids": ["a"], "lines": "x"}),
                FetchArgsError::Lines("x".into()),
            ),
            (
                json!({"ref_ids": ["a"], "max_chars": 10}),
                FetchArgsError::MaxCharsTooSmall,
            ),
            (
                json!({"ref_ids": ["a"], "context": -1}),
                FetchArgsError::Integer("context"),
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(
                FetchArgs::from_json(&value).unwrap_err(),
                expected,
                "{value}"
            );
        }
        assert!(matches!(
            FetchArgs::from_json(&json!({"ref_ids": ["a"], "grep": "("})),
            Err(FetchArgsError::Grep(_))
        ));
        // A single id as a bare string is accepted.
        assert_eq!(
            args(json!({"ref_ids": "abc"})).ref_ids,
            vec!["abc".to_owned()]
        );
    }

    #[test]
    fn invalid_ids_are_reported_per_id() {
        let good = payload(1).id();
        let a = args(json!({"ref_ids": [good.as_str(), "../../x"]}));
        let parsed = a.parsed_ids();
        assert!(parsed[0].1.is_ok());
        assert!(parsed[1].1.is_err());
    }
}
