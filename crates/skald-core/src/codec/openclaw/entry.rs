//! One line of a session file ↔ one [`Entry`] or [`SessionHeader`]: [`decode_entry`],
//! [`encode_entry`] and [`encode_header`]. The envelope (`id`, `parentId`, `timestamp`) is read
//! strictly and the body leniently, so a line whose body does not decode stays in the tree as an
//! [`EntryKind::Other`].

use serde_json::{Map, Value};

use super::message::{decode_content, decode_message, encode_agent_message, write_content};
use super::{Fields, OpenClawError};
use crate::codec::json::{FieldError, Path, as_object, rest, write_extra};
use crate::message::Extra;
use crate::session::{Entry, EntryKind, SessionHeader};

/// Reads one entry line's JSON. Unlike [`decode_session`], a known entry type whose body does not
/// decode is an error here rather than an [`EntryKind::Other`].
///
/// [`decode_session`]: super::decode_session
pub fn decode_entry(value: &Value) -> Result<Entry, OpenClawError> {
    let obj = as_object(value, Path::Root.key("entry"), "an object with a \"type\"")?;
    let (entry, body_error) = decode_entry_object(obj)?;
    match body_error {
        Some(err) => Err(err.into()),
        None => Ok(entry),
    }
}

const ENVELOPE_KEYS: [&str; 3] = ["id", "parentId", "timestamp"];

/// Decodes the envelope strictly and the body leniently: a body that does not decode gives an
/// [`EntryKind::Other`] plus the reason, so the tree stays connected.
pub(super) fn decode_entry_object(
    obj: &Map<String, Value>,
) -> Result<(Entry, Option<FieldError>), FieldError> {
    let mut fields = Fields::new(obj, Path::Root);
    let kind_name = fields.required_str("type")?;
    if kind_name == "session" {
        return Err(FieldError {
            path: "type".to_owned(),
            expected: "an entry type",
            found: Some("a second \"session\" header"),
        });
    }
    let id = fields.required_str("id")?;
    let parent_id = match fields.take("parentId") {
        Some(Value::String(parent)) => Some(parent.clone()),
        Some(Value::Null) => None,
        other => {
            return Err(fields.error("parentId", "a string or null", other));
        }
    };
    let timestamp = fields.required_str("timestamp")?;
    let (kind, extra, body_error) = match decode_kind(&kind_name, &mut fields) {
        // An unknown type keeps its whole body in `Other`; nothing is left for `extra`.
        Ok(kind @ EntryKind::Other(_)) => (kind, Extra::new(), None),
        Ok(kind) => (kind, fields.rest(), None),
        Err(err) => (
            EntryKind::Other(rest(obj, &ENVELOPE_KEYS)),
            Extra::new(),
            Some(err),
        ),
    };
    Ok((
        Entry {
            id,
            parent_id,
            timestamp,
            kind,
            extra,
        },
        body_error,
    ))
}

fn decode_kind(kind: &str, fields: &mut Fields<'_>) -> Result<EntryKind, FieldError> {
    Ok(match kind {
        "message" => match fields.take("message") {
            Some(value) => EntryKind::Message(decode_message(value, Path::Root.key("message"))?),
            None => {
                return Err(fields.error("message", "an AgentMessage object", None));
            }
        },
        "compaction" => EntryKind::Compaction {
            summary: fields.required_str("summary")?,
            first_kept_entry_id: fields.lenient_str("firstKeptEntryId"),
            tokens_before: fields.lenient_u64("tokensBefore"),
            details: fields.take_owned("details"),
            from_hook: fields.lenient_bool("fromHook"),
        },
        "reset" => EntryKind::Reset {
            reason: fields.lenient_str("reason"),
            first_kept_entry_id: fields.lenient_str("firstKeptEntryId"),
        },
        "branch_summary" => EntryKind::BranchSummary {
            from_id: fields.required_str("fromId")?,
            summary: fields.required_str("summary")?,
            details: fields.take_owned("details"),
            from_hook: fields.lenient_bool("fromHook"),
        },
        "custom" => EntryKind::Custom {
            custom_type: fields.required_str("customType")?,
            data: fields.take_owned("data"),
        },
        "custom_message" => {
            let custom_type = fields.required_str("customType")?;
            let content = fields.take("content");
            let (content, content_form) = decode_content(content, Path::Root.key("content"))?;
            EntryKind::CustomMessage {
                custom_type,
                content,
                content_form,
                display: fields.lenient_bool("display"),
                details: fields.take_owned("details"),
            }
        }
        "thinking_level_change" => EntryKind::ThinkingLevelChange {
            thinking_level: fields.required_str("thinkingLevel")?,
        },
        "model_change" => EntryKind::ModelChange {
            provider: fields.required_str("provider")?,
            model_id: fields.required_str("modelId")?,
        },
        "label" => EntryKind::Label {
            target_id: fields.required_str("targetId")?,
            label: fields.lenient_str("label"),
        },
        "session_info" => EntryKind::SessionInfo {
            name: fields.lenient_str("name"),
        },
        _ => EntryKind::Other(rest(fields.obj, &ENVELOPE_KEYS)),
    })
}

/// Writes one entry as the JSON object of its line.
pub fn encode_entry(entry: &Entry) -> Value {
    let mut out = Map::new();
    if let Some(kind) = match &entry.kind {
        EntryKind::Other(body) => body.get("type").cloned(),
        EntryKind::Message(_)
        | EntryKind::Compaction { .. }
        | EntryKind::Reset { .. }
        | EntryKind::BranchSummary { .. }
        | EntryKind::Custom { .. }
        | EntryKind::CustomMessage { .. }
        | EntryKind::ThinkingLevelChange { .. }
        | EntryKind::ModelChange { .. }
        | EntryKind::Label { .. }
        | EntryKind::SessionInfo { .. } => entry.kind.type_name().map(Value::from),
    } {
        out.insert("type".to_owned(), kind);
    }
    out.insert("id".to_owned(), Value::from(entry.id.clone()));
    out.insert(
        "parentId".to_owned(),
        entry
            .parent_id
            .as_ref()
            .map_or(Value::Null, |parent| Value::from(parent.clone())),
    );
    out.insert("timestamp".to_owned(), Value::from(entry.timestamp.clone()));
    match &entry.kind {
        EntryKind::Message(message) => put(&mut out, "message", encode_agent_message(message)),
        EntryKind::Compaction {
            summary,
            first_kept_entry_id,
            tokens_before,
            details,
            from_hook,
        } => {
            put(&mut out, "summary", Value::from(summary.clone()));
            if let Some(kept) = first_kept_entry_id {
                put(&mut out, "firstKeptEntryId", Value::from(kept.clone()));
            }
            if let Some(tokens) = tokens_before {
                put(&mut out, "tokensBefore", Value::from(*tokens));
            }
            if let Some(details) = details {
                put(&mut out, "details", details.clone());
            }
            if let Some(from_hook) = from_hook {
                put(&mut out, "fromHook", Value::Bool(*from_hook));
            }
        }
        EntryKind::Reset {
            reason,
            first_kept_entry_id,
        } => {
            if let Some(reason) = reason {
                put(&mut out, "reason", Value::from(reason.clone()));
            }
            if let Some(kept) = first_kept_entry_id {
                put(&mut out, "firstKeptEntryId", Value::from(kept.clone()));
            }
        }
        EntryKind::BranchSummary {
            from_id,
            summary,
            details,
            from_hook,
        } => {
            put(&mut out, "fromId", Value::from(from_id.clone()));
            put(&mut out, "summary", Value::from(summary.clone()));
            if let Some(details) = details {
                put(&mut out, "details", details.clone());
            }
            if let Some(from_hook) = from_hook {
                put(&mut out, "fromHook", Value::Bool(*from_hook));
            }
        }
        EntryKind::Custom { custom_type, data } => {
            put(&mut out, "customType", Value::from(custom_type.clone()));
            if let Some(data) = data {
                put(&mut out, "data", data.clone());
            }
        }
        EntryKind::CustomMessage {
            custom_type,
            content,
            content_form,
            display,
            details,
        } => {
            put(&mut out, "customType", Value::from(custom_type.clone()));
            write_content(&mut out, "content", content, *content_form);
            if let Some(display) = display {
                put(&mut out, "display", Value::Bool(*display));
            }
            if let Some(details) = details {
                put(&mut out, "details", details.clone());
            }
        }
        EntryKind::ThinkingLevelChange { thinking_level } => {
            put(
                &mut out,
                "thinkingLevel",
                Value::from(thinking_level.clone()),
            );
        }
        EntryKind::ModelChange { provider, model_id } => {
            put(&mut out, "provider", Value::from(provider.clone()));
            put(&mut out, "modelId", Value::from(model_id.clone()));
        }
        EntryKind::Label { target_id, label } => {
            put(&mut out, "targetId", Value::from(target_id.clone()));
            if let Some(label) = label {
                put(&mut out, "label", Value::from(label.clone()));
            }
        }
        EntryKind::SessionInfo { name } => {
            if let Some(name) = name {
                put(&mut out, "name", Value::from(name.clone()));
            }
        }
        EntryKind::Other(body) => write_extra(&mut out, body),
    }
    write_extra(&mut out, &entry.extra);
    Value::Object(out)
}

fn put(out: &mut Map<String, Value>, key: &str, value: Value) {
    out.insert(key.to_owned(), value);
}

/// Writes the header line's JSON object.
pub fn encode_header(header: &SessionHeader) -> Value {
    let mut out = Map::new();
    out.insert("type".to_owned(), Value::from("session"));
    out.insert("version".to_owned(), Value::from(header.version));
    out.insert("id".to_owned(), Value::from(header.id.clone()));
    let optional = [
        ("timestamp", &header.timestamp),
        ("cwd", &header.cwd),
        ("parentSession", &header.parent_session),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            out.insert(key.to_owned(), Value::from(value.clone()));
        }
    }
    write_extra(&mut out, &header.extra);
    Value::Object(out)
}
