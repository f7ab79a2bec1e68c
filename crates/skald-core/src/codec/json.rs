//! JSON reading and writing helpers every codec shares.
//!
//! This module owns:
//! - [`Path`], where a value sits in the input, rendered (`messages[3].content[1]`) only when an
//!   error needs it;
//! - the pieces of "`path`: expected …, found …" errors: [`kind`] describes a JSON value and
//!   [`FieldError`] carries path, expectation and finding. Error *types* stay per codec: each one
//!   turns a [`FieldError`] into its own error with its own wording;
//! - typed reads of required and optional fields ([`required_str`], [`optional_str`],
//!   [`optional_array`]…) and of `content` in the spellings all formats share ([`content`]);
//! - the `extra` plumbing: the rest of an object after its typed fields ([`rest`]), written back
//!   without codec hints ([`write_extra`]), and `content` written in the spelling it was read in
//!   ([`content_as_spelled`]).

use std::fmt;

use serde_json::{Map, Value};

use crate::message::{Block, ContentForm, Extra, TextBlock, is_hint_key};

/// Where in the input a value sits, rendered only when an error needs it.
#[derive(Clone, Copy)]
pub(crate) enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl<'a> Path<'a> {
    pub(crate) fn key(&'a self, key: &'a str) -> Path<'a> {
        Path::Key(self, key)
    }

    pub(crate) fn index(&'a self, index: usize) -> Path<'a> {
        Path::Index(self, index)
    }

    /// `messages[1].content`, or `top level` for the root itself.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        match self {
            Path::Root => out.push_str("top level"),
            Path::Key(..) | Path::Index(..) => self.write(&mut out),
        }
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Path::Root => {}
            Path::Key(parent, key) => {
                parent.write(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Path::Index(parent, index) => {
                parent.write(out);
                out.push_str(&format!("[{index}]"));
            }
        }
    }
}

/// "a number", "an object"…: what a JSON value is, for "expected …, found …" messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// [`kind`] of a field that may be absent ("nothing").
pub(crate) fn kind_of(value: Option<&Value>) -> &'static str {
    value.map_or("nothing", kind)
}

/// A field that is absent or has the wrong shape. Displays as "`path`: expected …, found …"
/// ("found nothing" when absent); codecs that word a missing field otherwise look at `found`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub(crate) path: String,
    pub(crate) expected: &'static str,
    /// What was there instead; `None` when the field is absent.
    pub(crate) found: Option<&'static str>,
}

impl FieldError {
    /// The field at `path` holds `found` (`None`: nothing) instead of `expected`.
    pub(crate) fn new(path: Path<'_>, expected: &'static str, found: Option<&Value>) -> FieldError {
        FieldError {
            path: path.render(),
            expected,
            found: found.map(kind),
        }
    }

    /// What was found, as the messages say it.
    pub(crate) fn found(&self) -> &'static str {
        self.found.unwrap_or("nothing")
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: expected {}, found {}",
            self.path,
            self.expected,
            self.found()
        )
    }
}

/// The value at `path` is `found` where `expected` was wanted.
pub(crate) fn wrong(path: Path<'_>, expected: &'static str, found: &Value) -> FieldError {
    FieldError::new(path, expected, Some(found))
}

pub(crate) fn as_object<'v>(
    value: &'v Value,
    path: Path<'_>,
    expected: &'static str,
) -> Result<&'v Map<String, Value>, FieldError> {
    value
        .as_object()
        .ok_or_else(|| wrong(path, expected, value))
}

pub(crate) fn required<'v>(
    obj: &'v Map<String, Value>,
    key: &str,
    path: Path<'_>,
    expected: &'static str,
) -> Result<&'v Value, FieldError> {
    obj.get(key)
        .ok_or_else(|| FieldError::new(path.key(key), expected, None))
}

pub(crate) fn required_str<'v>(
    obj: &'v Map<String, Value>,
    key: &str,
    path: Path<'_>,
) -> Result<&'v str, FieldError> {
    let value = required(obj, key, path, "a string")?;
    value
        .as_str()
        .ok_or_else(|| wrong(path.key(key), "a string", value))
}

pub(crate) fn required_object<'v>(
    obj: &'v Map<String, Value>,
    key: &str,
    path: Path<'_>,
    expected: &'static str,
) -> Result<&'v Map<String, Value>, FieldError> {
    as_object(required(obj, key, path, expected)?, path.key(key), expected)
}

pub(crate) fn required_array<'v>(
    obj: &'v Map<String, Value>,
    key: &str,
    path: Path<'_>,
    expected: &'static str,
) -> Result<&'v [Value], FieldError> {
    let value = required(obj, key, path, expected)?;
    value
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| wrong(path.key(key), expected, value))
}

/// An optional object: absent or `null` is `None`.
pub(crate) fn optional_object<'v>(
    value: Option<&'v Value>,
    path: Path<'_>,
    expected: &'static str,
) -> Result<Option<&'v Map<String, Value>>, FieldError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(obj)) => Ok(Some(obj)),
        Some(other) => Err(wrong(path, expected, other)),
    }
}

/// An optional string field. When it is a string it counts as consumed; a null stays for `extra`.
pub(crate) fn optional_str<'o>(
    obj: &'o Map<String, Value>,
    key: &'o str,
    path: Path<'_>,
    consumed: &mut Vec<&'o str>,
) -> Result<Option<String>, FieldError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => {
            consumed.push(key);
            Ok(Some(text.clone()))
        }
        Some(other) => Err(wrong(path.key(key), "a string", other)),
    }
}

/// An optional array field. A non-empty array counts as consumed; an empty or null one stays for
/// `extra`, so it is written back as it was.
pub(crate) fn optional_array<'o>(
    obj: &'o Map<String, Value>,
    key: &'o str,
    path: Path<'_>,
    expected: &'static str,
    consumed: &mut Vec<&'o str>,
) -> Result<&'o [Value], FieldError> {
    match obj.get(key) {
        Some(Value::Array(items)) if !items.is_empty() => {
            consumed.push(key);
            Ok(items)
        }
        Some(Value::Array(_) | Value::Null) | None => Ok(&[]),
        Some(other) => Err(wrong(path.key(key), expected, other)),
    }
}

/// Decodes every item of an array with `decode`, which gets the item's path (`path[index]`).
pub(crate) fn each<T, E>(
    items: &[Value],
    path: Path<'_>,
    decode: impl Fn(&Value, Path<'_>) -> Result<T, E>,
) -> Result<Vec<T>, E> {
    items
        .iter()
        .enumerate()
        .map(|(index, item)| decode(item, path.index(index)))
        .collect()
}

/// A token count: absent or null is 0.
pub(crate) fn count(
    obj: &Map<String, Value>,
    key: &str,
    path: Path<'_>,
) -> Result<u64, FieldError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(value) => value
            .as_u64()
            .ok_or_else(|| wrong(path.key(key), "a non-negative integer", value)),
    }
}

/// Message or result `content` in the spellings every format shares: absent, `null`, a bare
/// string (one text block), or an array whose items `block` decodes. Anything else is an error
/// naming `expected`.
pub(crate) fn content<E: From<FieldError>>(
    value: Option<&Value>,
    path: Path<'_>,
    expected: &'static str,
    block: impl Fn(&Value, Path<'_>) -> Result<Block, E>,
) -> Result<(Vec<Block>, ContentForm), E> {
    match value {
        None => Ok((Vec::new(), ContentForm::Absent)),
        Some(Value::Null) => Ok((Vec::new(), ContentForm::Null)),
        Some(Value::String(text)) => Ok((vec![Block::text(text.clone())], ContentForm::Text)),
        Some(Value::Array(items)) => Ok((each(items, path, block)?, ContentForm::Blocks)),
        Some(other @ (Value::Bool(_) | Value::Number(_) | Value::Object(_))) => {
            Err(wrong(path, expected, other).into())
        }
    }
}

/// A `{"type": "text", "text": …}` part or block, spelled alike in every format; its other fields
/// are its extra.
pub(crate) fn text_block(obj: &Map<String, Value>, path: Path<'_>) -> Result<Block, FieldError> {
    Ok(Block::Text(TextBlock {
        text: required_str(obj, "text", path)?.to_owned(),
        extra: rest(obj, &["type", "text"]),
    }))
}

/// The fields of `obj` not in `consumed`, in their original order.
pub(crate) fn rest(obj: &Map<String, Value>, consumed: &[&str]) -> Extra {
    obj.iter()
        .filter(|(key, _)| !consumed.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// Stores `fields` as an object under `key`, when there are any.
pub(crate) fn insert_nonempty(extra: &mut Extra, key: &str, fields: Extra) {
    if !fields.is_empty() {
        extra.insert(key.to_owned(), Value::Object(fields.into_inner()));
    }
}

/// Copies `extra` into `out`, skipping codec hints and keys the typed part already wrote.
pub(crate) fn write_extra(out: &mut Map<String, Value>, extra: &Map<String, Value>) {
    for (key, value) in extra {
        if !is_hint_key(key) && !out.contains_key(key) {
            out.insert(key.clone(), value.clone());
        }
    }
}

pub(crate) fn insert_opt_str(out: &mut Map<String, Value>, key: &str, value: Option<&str>) {
    if let Some(value) = value {
        out.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

/// Writes `value` under `key` when there is one and it is not what `out` already states there.
pub(crate) fn insert_changed_str(
    out: &mut Map<String, Value>,
    key: &str,
    value: Option<&str>,
    stated: Option<&str>,
) {
    if value.is_some() && value != stated {
        insert_opt_str(out, key, value);
    }
}

/// The object under `key`, created (or put in place of a value that is not one) when missing.
pub(crate) fn object_entry<'m>(
    out: &'m mut Map<String, Value>,
    key: &str,
) -> Option<&'m mut Map<String, Value>> {
    let slot = out.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// The `content` value for encoded parts, spelled as the decoder found it: empty content as it was
/// (`None` leaves the key out), a lone plain text part as a bare string when it was one, else the
/// array.
pub(crate) fn content_as_spelled(parts: Vec<Value>, form: ContentForm) -> Option<Value> {
    if parts.is_empty() {
        return match form {
            ContentForm::Absent => None,
            ContentForm::Null => Some(Value::Null),
            ContentForm::Text => Some(Value::String(String::new())),
            ContentForm::Blocks => Some(Value::Array(Vec::new())),
        };
    }
    if form == ContentForm::Text {
        if let [part] = parts.as_slice() {
            if let Some(text) = plain_text(part) {
                return Some(Value::String(text.to_owned()));
            }
        }
    }
    Some(Value::Array(parts))
}

/// The text of a part that is exactly `{"type": "text", "text": …}`.
fn plain_text(part: &Value) -> Option<&str> {
    let obj = part.as_object()?;
    if obj.len() != 2 || obj.get("type").and_then(Value::as_str) != Some("text") {
        return None;
    }
    obj.get("text").and_then(Value::as_str)
}

/// serde_json's message without its trailing "at line L column C", which callers report
/// themselves (a JSONL line number means more than serde's "line 1").
pub(crate) fn json_error_message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(position) => text.get(..position).unwrap_or(&text).to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_error_message_drops_position() {
        let error = serde_json::from_str::<Value>("{nope").err();
        let text = error.map(|e| json_error_message(&e)).unwrap_or_default();
        assert!(!text.contains("line"), "{text}");
        assert!(!text.is_empty());
    }
}
