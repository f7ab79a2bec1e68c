//! Reference ids and placeholders: how an offloaded or truncated tool output is named in the
//! context, and the exact bytes a ref id is the hash of.
//!
//! A ref id is the lowercase hex SHA-256 (64 characters) of a [`RefPayload`]'s bytes. Parsing is
//! strict — anything that is not exactly that (after unwrapping a `[REF_ID: …]` token) is rejected
//! here, before it can reach storage: this closes the path-traversal defect the SCCS reviewers
//! found (`../../x` as an id).
//!
//! ```
//! use skald_core::refs::{RefId, RefPayload, placeholder};
//! use skald_core::message::Block;
//!
//! let payload = RefPayload::new(vec![Block::text("a very long tool output")]);
//! let id = payload.id();
//! assert_eq!(id.as_str().len(), 64);
//! let text = placeholder(&id, "log: 1 line");
//! assert_eq!(RefId::parse(&text).unwrap(), id);
//! assert!(RefId::parse("../../etc/passwd").is_err());
//! ```

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::message::{Block, Content, Extra, ImageBlock, ImageSource, TextBlock};
use crate::swar::{bytes_between, bytes_equal};

/// The opening of a placeholder token.
pub const REF_PREFIX: &str = "[REF_ID: ";

/// A validated reference id: 64 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RefId(String);

/// Why a string is not a ref id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefIdError {
    /// The string is empty.
    #[error("ref id is empty")]
    Empty,
    /// The string is not 64 characters long.
    #[error(
        "ref id {shown:?} is not a ref id: expected 64 lowercase hex characters (a SHA-256), \
         found {len} characters"
    )]
    WrongLength {
        /// The start of the string, cut for the message.
        shown: String,
        /// Its length in characters.
        len: usize,
    },
    /// The string has a character that is not lowercase hex.
    #[error(
        "ref id {shown:?} is not a ref id: expected only lowercase hex characters 0-9a-f, \
         found {found:?} at position {position}"
    )]
    BadCharacter {
        /// The start of the string, cut for the message.
        shown: String,
        /// The first character that is not lowercase hex.
        found: char,
        /// Its position in the string, counting characters from 0.
        position: usize,
    },
}

/// At most 80 characters of untrusted input, for error messages.
fn shown(raw: &str) -> String {
    raw.chars().take(80).collect()
}

impl RefId {
    /// Parses a bare id or a `[REF_ID: <id>]` / `[REF_ID: <id>] (Summary: …)` token.
    pub fn parse(raw: &str) -> Result<RefId, RefIdError> {
        let trimmed = raw.trim();
        let candidate = match trimmed.strip_prefix(REF_PREFIX) {
            Some(rest) => rest.split(']').next().unwrap_or(rest).trim(),
            None => trimmed,
        };
        if candidate.is_empty() {
            return Err(RefIdError::Empty);
        }
        let len = candidate.chars().count();
        if len != 64 {
            return Err(RefIdError::WrongLength {
                shown: shown(raw),
                len,
            });
        }
        if let Some((position, found)) = candidate
            .chars()
            .enumerate()
            .find(|(_, c)| !matches!(c, '0'..='9' | 'a'..='f'))
        {
            return Err(RefIdError::BadCharacter {
                shown: shown(raw),
                found,
                position,
            });
        }
        Ok(RefId(candidate.to_owned()))
    }

    /// The id of `bytes`: their lowercase hex SHA-256.
    pub fn of_bytes(bytes: &[u8]) -> RefId {
        let digest = Sha256::digest(bytes);
        let mut hex = String::with_capacity(64);
        for byte in digest.iter() {
            hex.push(char::from(HEX[usize::from(byte >> 4)]));
            hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        RefId(hex)
    }

    /// The id as its 64 hex characters.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl std::fmt::Display for RefId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Original content a stage took out of the context, to be stored under `id` before the
/// stage's output is shown to a model (a ref id is handed out only once its content is durable).
///
/// The canonical bytes are computed once, here, and travel with the ref: hashing gives the id,
/// and the store writes the same bytes without serialising the payload again.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRef {
    /// The id the payload is stored under: the SHA-256 of its canonical bytes.
    pub id: RefId,
    /// The original content.
    pub payload: RefPayload,
    canonical: CanonicalPayload,
}

impl NewRef {
    /// A ref for `payload`, its canonical bytes and id computed here, once.
    pub fn new(payload: RefPayload) -> NewRef {
        let canonical = CanonicalPayload::of(&payload);
        NewRef {
            id: canonical.id.clone(),
            payload,
            canonical,
        }
    }

    /// The payload's canonical bytes and their id, as computed when the ref was made.
    pub fn canonical(&self) -> &CanonicalPayload {
        &self.canonical
    }
}

/// A payload's canonical bytes ([`RefPayload::to_bytes`]) together with their id. Built only
/// from a payload, and immutable, so the id always is the hash of the bytes: a store can take
/// both as they are instead of serialising and hashing again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalPayload {
    id: RefId,
    bytes: Vec<u8>,
}

impl CanonicalPayload {
    /// The canonical bytes of `payload` and their hash.
    pub fn of(payload: &RefPayload) -> CanonicalPayload {
        let bytes = payload.to_bytes();
        CanonicalPayload {
            id: RefId::of_bytes(&bytes),
            bytes,
        }
    }

    /// The SHA-256 of [`CanonicalPayload::bytes`].
    pub fn id(&self) -> &RefId {
        &self.id
    }

    /// The bytes a store writes, exactly as hashed.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// The placeholder that stands in the context for an offloaded output.
pub fn placeholder(id: &RefId, summary: &str) -> String {
    format!("{REF_PREFIX}{id}] (Summary: {summary})")
}

/// True when `text` already carries a ref placeholder (so it is never offloaded again).
pub fn contains_ref(text: &str) -> bool {
    text.contains(REF_PREFIX)
}

/// Every ref id named in `text`, in order of appearance (malformed tokens are skipped).
pub fn ref_ids_in(text: &str) -> Vec<RefId> {
    text.match_indices(REF_PREFIX)
        .filter_map(|(start, _)| text.get(start..).and_then(|rest| RefId::parse(rest).ok()))
        .collect()
}

/// The original content of a tool output, as stored behind a ref: every block, images included.
#[derive(Debug, Clone, PartialEq)]
pub struct RefPayload {
    /// The original blocks of the output, in order (shared with the message they came from
    /// until one of the two writes).
    pub blocks: Content,
}

/// Why stored bytes are not a payload.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// The stored bytes are not JSON.
    #[error("stored ref content is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The stored JSON is not an array of blocks this format writes.
    #[error("stored ref content: {0}")]
    Shape(String),
}

impl RefPayload {
    /// A payload holding `blocks`.
    pub fn new(blocks: impl Into<Content>) -> RefPayload {
        RefPayload {
            blocks: blocks.into(),
        }
    }

    /// The canonical bytes: a JSON array of `{"type":"text","text":…}` and
    /// `{"type":"image",…}` objects (other blocks as their JSON). Deterministic, so equal content
    /// always has the same id.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Written directly rather than through a `serde_json::Value`: building the value would
        // copy every string of the payload once more. Strings and nested values go through
        // serde_json's own writer, so the bytes are those `serde_json::to_vec` gives for the
        // equivalent value (keys in the order below).
        let capacity = self.blocks.iter().map(block_size_hint).sum::<usize>() + 2;
        let mut out = Vec::with_capacity(capacity);
        match write_blocks(&mut out, &self.blocks) {
            Ok(()) => out,
            Err(_) => Vec::new(),
        }
    }

    /// The id of this payload.
    pub fn id(&self) -> RefId {
        RefId::of_bytes(&self.to_bytes())
    }

    /// Reads bytes written by [`RefPayload::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<RefPayload, PayloadError> {
        let value: Value = serde_json::from_slice(bytes)?;
        let Value::Array(items) = value else {
            return Err(PayloadError::Shape(
                "expected a JSON array of blocks".into(),
            ));
        };
        let blocks = items
            .into_iter()
            .enumerate()
            .map(|(index, item)| block_from_json(index, item))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RefPayload {
            blocks: blocks.into(),
        })
    }

    /// The text of the payload's text blocks, joined by newlines.
    pub fn text(&self) -> String {
        crate::message::join_text(&self.blocks)
    }
}

/// Roughly the canonical size of a block, to size the output once.
fn block_size_hint(block: &Block) -> usize {
    let content = match block {
        Block::Text(text) => text.text.len(),
        Block::Image(image) => match &image.source {
            ImageSource::Base64 { data, .. } => data.len(),
            ImageSource::Url { url } => url.len(),
        },
        Block::Thinking(thinking) => thinking.thinking.len(),
        Block::ToolResult(result) => result.content.iter().map(block_size_hint).sum(),
        Block::ToolCall(_) | Block::Opaque(_) => 0,
    };
    content + content / 16 + 48
}

/// `[block,block,…]`.
fn write_blocks(out: &mut Vec<u8>, blocks: &[Block]) -> serde_json::Result<()> {
    out.push(b'[');
    for (index, block) in blocks.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_block(out, block)?;
    }
    out.push(b']');
    Ok(())
}

/// `text` as a JSON string, escaped exactly as serde_json escapes it (`\"`, `\\`, `\n`, `\r`,
/// `\t`, `\b`, `\f`, other control characters as `\u00xx`, everything else as it is). The
/// large texts of a payload are mostly runs with nothing to escape: those are found eight bytes
/// at a time and copied whole.
fn write_json_string(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // Bytes before `copied` are in `out`.
    let mut copied = 0;
    let mut chunks = bytes.chunks_exact(8);
    let mut base = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        let mut special =
            bytes_between(word, 0, 0x1f) | bytes_equal(word, b'"') | bytes_equal(word, b'\\');
        while special != 0 {
            let at = base + (special.trailing_zeros() / 8) as usize;
            write_escaped(out, bytes, &mut copied, at);
            special &= special - 1;
        }
        base += 8;
    }
    for at in base..bytes.len() {
        if bytes
            .get(at)
            .is_some_and(|&b| b < 0x20 || b == b'"' || b == b'\\')
        {
            write_escaped(out, bytes, &mut copied, at);
        }
    }
    out.extend_from_slice(bytes.get(copied..).unwrap_or_default());
    out.push(b'"');
}

/// Copies `bytes[*copied..at]` to `out`, then the escape of `bytes[at]`.
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8], copied: &mut usize, at: usize) {
    let Some(&byte) = bytes.get(at) else {
        return;
    };
    out.extend_from_slice(bytes.get(*copied..at).unwrap_or_default());
    match byte {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        0x08 => out.extend_from_slice(b"\\b"),
        0x0c => out.extend_from_slice(b"\\f"),
        _ => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(byte >> 4)],
            HEX[usize::from(byte & 0x0f)],
        ]),
    }
    *copied = at + 1;
}

/// One block as a JSON object with `type` first, then the fields in a fixed order.
fn write_block(out: &mut Vec<u8>, block: &Block) -> serde_json::Result<()> {
    match block {
        Block::Text(text) => {
            out.extend_from_slice(br#"{"type":"text","text":"#);
            write_json_string(out, &text.text);
        }
        Block::Image(image) => match &image.source {
            ImageSource::Base64 { media_type, data } => {
                out.extend_from_slice(br#"{"type":"image","media_type":"#);
                serde_json::to_writer(&mut *out, media_type)?;
                out.extend_from_slice(br#","data":"#);
                write_json_string(out, data);
            }
            ImageSource::Url { url } => {
                out.extend_from_slice(br#"{"type":"image","url":"#);
                serde_json::to_writer(&mut *out, url)?;
            }
        },
        Block::Thinking(thinking) => {
            out.extend_from_slice(br#"{"type":"thinking","thinking":"#);
            write_json_string(out, &thinking.thinking);
        }
        Block::ToolCall(call) => {
            out.extend_from_slice(br#"{"type":"tool_call","id":"#);
            serde_json::to_writer(&mut *out, &call.id)?;
            out.extend_from_slice(br#","name":"#);
            serde_json::to_writer(&mut *out, &call.name)?;
            out.extend_from_slice(br#","arguments":"#);
            serde_json::to_writer(&mut *out, &call.arguments)?;
        }
        Block::ToolResult(result) => {
            out.extend_from_slice(br#"{"type":"tool_result","call_id":"#);
            serde_json::to_writer(&mut *out, &result.call_id)?;
            out.extend_from_slice(br#","content":"#);
            write_blocks(out, &result.content)?;
        }
        Block::Opaque(value) => {
            out.extend_from_slice(br#"{"type":"opaque","value":"#);
            serde_json::to_writer(&mut *out, value)?;
        }
    }
    out.push(b'}');
    Ok(())
}

fn block_from_json(index: usize, item: Value) -> Result<Block, PayloadError> {
    let Value::Object(mut object) = item else {
        return Err(PayloadError::Shape(format!(
            "block {index}: expected an object"
        )));
    };
    let take_str = |key: &str, object: &mut Map<String, Value>| match object.remove(key) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(PayloadError::Shape(format!(
            "block {index}: expected a string field {key:?}"
        ))),
    };
    let kind = take_str("type", &mut object)?;
    match kind.as_str() {
        "text" => Ok(Block::Text(TextBlock {
            text: take_str("text", &mut object)?,
            extra: Extra::new(),
        })),
        "image" => {
            let source = if object.contains_key("url") {
                ImageSource::Url {
                    url: take_str("url", &mut object)?,
                }
            } else {
                ImageSource::Base64 {
                    media_type: take_str("media_type", &mut object)?,
                    data: take_str("data", &mut object)?,
                }
            };
            Ok(Block::Image(ImageBlock {
                source,
                extra: Extra::new(),
            }))
        }
        _ => {
            object.insert("type".into(), Value::String(kind));
            Ok(Block::Opaque(Value::Object(object)))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const ID: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn id_is_sha256_hex_of_bytes() {
        assert_eq!(RefId::of_bytes(b"test").as_str(), ID);
    }

    #[test]
    fn parse_accepts_bare_ids_and_tokens() {
        assert_eq!(RefId::parse(ID).unwrap().as_str(), ID);
        assert_eq!(
            RefId::parse(&format!("[REF_ID: {ID}]")).unwrap().as_str(),
            ID
        );
        let token = placeholder(&RefId::parse(ID).unwrap(), "json: 3 keys");
        assert_eq!(RefId::parse(&token).unwrap().as_str(), ID);
        assert_eq!(RefId::parse(&format!("  {ID}\n")).unwrap().as_str(), ID);
    }

    #[test]
    fn path_traversal_and_malformed_ids_are_rejected() {
        for bad in [
            "../../x",
            "../../outside",
            "/etc/passwd",
            &ID.to_uppercase(),
            &ID[..63],
            &format!("{ID}0"),
            &format!("{}/..", &ID[..61]),
            "[REF_ID: ../../x]",
        ] {
            assert!(RefId::parse(bad).is_err(), "{bad} was accepted");
        }
        assert_eq!(RefId::parse("  "), Err(RefIdError::Empty));
        let error = RefId::parse(&ID.to_uppercase()).unwrap_err().to_string();
        assert!(error.contains("lowercase hex"), "{error}");
    }

    #[test]
    fn ref_ids_are_found_in_text() {
        let text = format!("see [REF_ID: {ID}] (Summary: x) and [REF_ID: nope]");
        assert_eq!(ref_ids_in(&text), vec![RefId::parse(ID).unwrap()]);
        assert!(contains_ref(&text));
        assert!(!contains_ref("plain"));
    }

    /// The encoding `to_bytes` had before it wrote bytes directly: every existing ref id is the
    /// hash of these bytes, so the direct writer must reproduce them exactly.
    fn reference_bytes(blocks: &[Block]) -> Vec<u8> {
        use serde_json::json;
        fn block_to_json(block: &Block) -> Value {
            match block {
                Block::Text(text) => json!({"type": "text", "text": text.text}),
                Block::Image(image) => match &image.source {
                    ImageSource::Base64 { media_type, data } => {
                        json!({"type": "image", "media_type": media_type, "data": data})
                    }
                    ImageSource::Url { url } => json!({"type": "image", "url": url}),
                },
                Block::Thinking(thinking) => {
                    json!({"type": "thinking", "thinking": thinking.thinking})
                }
                Block::ToolCall(call) => json!({
                    "type": "tool_call", "id": call.id, "name": call.name,
                    "arguments": call.arguments
                }),
                Block::ToolResult(result) => {
                    let content: Vec<Value> = result.content.iter().map(block_to_json).collect();
                    json!({"type": "tool_result", "call_id": result.call_id, "content": content})
                }
                Block::Opaque(value) => json!({"type": "opaque", "value": value}),
            }
        }
        let blocks: Vec<Value> = blocks.iter().map(block_to_json).collect();
        serde_json::to_vec(&blocks).unwrap()
    }

    #[test]
    fn canonical_bytes_are_unchanged_for_every_block_kind() {
        use crate::message::{ContentForm, ThinkingBlock, ToolCall, ToolResult};
        let awkward =
            "quote \" back\\slash \u{0} \u{1f} tab\t nl\n cr\r \u{7f} é 日本 🦀 </script>";
        let arguments = serde_json::json!({"z": 1, "a": [true, null, 1.5, -3], "path": awkward});
        let call = ToolCall {
            id: "call_1".into(),
            name: "write".into(),
            arguments,
            arguments_text: Some("ignored".into()),
            extra: Extra::new(),
        };
        let inner = ToolResult {
            call_id: "call_0".into(),
            tool_name: Some("bash".into()),
            content: vec![Block::text(awkward), Block::text("")].into(),
            content_form: ContentForm::Blocks,
            is_error: Some(true),
            details: None,
            extra: Extra::new(),
        };
        let blocks = [
            Block::text(awkward),
            Block::text(""),
            Block::Image(ImageBlock {
                source: ImageSource::Base64 {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                },
                extra: Extra::new(),
            }),
            Block::Image(ImageBlock {
                source: ImageSource::Url {
                    url: "https://example.com/a\"b.png".into(),
                },
                extra: Extra::new(),
            }),
            Block::Thinking(ThinkingBlock {
                thinking: awkward.into(),
                signature: Some("sig".into()),
                extra: Extra::new(),
            }),
            Block::ToolCall(call),
            Block::ToolResult(inner),
            Block::Opaque(
                serde_json::json!({"type": "document", "b": {"y": 2, "x": [1]}, "a": awkward}),
            ),
        ];
        for end in 0..=blocks.len() {
            let payload = RefPayload::new(blocks[..end].to_vec());
            assert_eq!(
                String::from_utf8(payload.to_bytes()).unwrap(),
                String::from_utf8(reference_bytes(&payload.blocks)).unwrap()
            );
        }
        // Pinned bytes: this payload's bytes, and so its id, must never change.
        let payload = RefPayload::new(vec![Block::text("line 1\nline 2")]);
        assert_eq!(
            payload.to_bytes(),
            br#"[{"type":"text","text":"line 1\nline 2"}]"#
        );
    }

    #[test]
    fn strings_are_escaped_exactly_as_serde_json_escapes_them() {
        let mut texts: Vec<String> = (0u8..=0x7f).map(|b| char::from(b).to_string()).collect();
        // Every byte at every offset of a word, among text that needs no escaping.
        for b in 0u8..=0x7f {
            for offset in 0..17 {
                let mut text = "abcdefghijklmnopq".to_owned();
                text.insert(offset, char::from(b));
                texts.push(text);
            }
        }
        texts.extend(
            [
                "",
                "é日本🦀 plain",
                "a\u{7f}b\u{80}c",
                "\"\"\\\\\n\n",
                "tail\u{1}",
            ]
            .map(String::from),
        );
        texts.push("x".repeat(1000) + "\u{0}" + &"y\t".repeat(300));
        for text in texts {
            let mut out = Vec::new();
            write_json_string(&mut out, &text);
            assert_eq!(out, serde_json::to_vec(&text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn new_ref_carries_the_canonical_bytes_of_its_payload() {
        let payload = RefPayload::new(vec![Block::text("some output")]);
        let new_ref = NewRef::new(payload.clone());
        assert_eq!(new_ref.canonical().bytes(), payload.to_bytes().as_slice());
        assert_eq!(new_ref.canonical().id(), &payload.id());
        assert_eq!(new_ref.id, payload.id());
        assert_eq!(CanonicalPayload::of(&payload), new_ref.canonical().clone());
    }

    #[test]
    fn payload_round_trips_text_and_images() {
        let payload = RefPayload::new(vec![
            Block::text("line 1\nline 2"),
            Block::Image(ImageBlock {
                source: ImageSource::Base64 {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                },
                extra: Extra::new(),
            }),
        ]);
        let back = RefPayload::from_bytes(&payload.to_bytes()).unwrap();
        assert_eq!(back, payload);
        assert_eq!(back.id(), payload.id());
        assert_eq!(back.text(), "line 1\nline 2");
        assert!(RefPayload::from_bytes(b"{}").is_err());
        assert!(RefPayload::from_bytes(b"not json").is_err());
    }
}
