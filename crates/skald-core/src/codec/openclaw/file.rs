//! The session file as a whole: [`decode_session`] reads the header line and one entry per
//! line (versions 1 to 4), migrating versions 1 and 2 the way pi's `SessionManager` does and reporting by line what
//! is wrong with a line or with the tree the lines form (duplicate ids, parents that point
//! nowhere, cycles); [`encode_session`] writes it back.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::Fields;
use super::OpenClawError;
use super::entry::{decode_entry_object, encode_entry, encode_header};
use crate::codec::LineIssue;
use crate::codec::json::{FieldError, Path, kind, kind_of};
use crate::session::{CURRENT_VERSION, EntryKind, Session, SessionHeader};

/// A decoded session and what the reader had to say about it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRead {
    /// The header and entries read, with version 1 and 2 files migrated to the current version.
    pub session: Session,
    /// Problems, by line: lines skipped, entries whose body did not decode (kept as
    /// [`EntryKind::Other`], out of the context), duplicate ids, parents that point nowhere,
    /// `parentId` cycles, compactions whose `firstKeptEntryId` points nowhere.
    pub issues: Vec<LineIssue>,
    /// Entries that never reach the model (model, thinking-level and label changes, session info,
    /// `custom` state, unknown types).
    pub ignored_lines: usize,
    /// The file's version when it was older than [`CURRENT_VERSION`] and was migrated.
    pub migrated_from: Option<u64>,
}

/// Reads a session file: a header on the first non-blank line, then one entry per line.
///
/// Bad entry lines are reported in [`SessionRead::issues`] and skipped; only a missing or invalid
/// header (or a version newer than [`CURRENT_VERSION`], 4) fails the whole read. Versions 1 and 2 are migrated as pi
/// does: version 1 entries get ids and parents from line order (ids are the entry's position as 8
/// hex digits, since core has no randomness) and `firstKeptEntryIndex` becomes
/// `firstKeptEntryId`; version 2 `hookMessage` roles become `custom`.
pub fn decode_session(input: &str) -> Result<SessionRead, OpenClawError> {
    // Editors on Windows may prepend a byte-order mark; it is not part of the JSON.
    let input = input.strip_prefix('\u{feff}').unwrap_or(input);
    let mut lines = input
        .split('\n')
        .enumerate()
        .map(|(index, text)| (index + 1, text.strip_suffix('\r').unwrap_or(text)))
        .filter(|(_, text)| !text.trim().is_empty());
    let Some((header_line, header_text)) = lines.next() else {
        return Err(OpenClawError::Empty);
    };
    let (header, version) = decode_header(header_text, header_line)?;

    let mut issues = Vec::new();
    let mut raw: Vec<(usize, Map<String, Value>)> = Vec::new();
    for (line, text) in lines {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(obj)) => raw.push((line, obj)),
            Ok(other) => issues.push(LineIssue {
                line,
                message: format!(
                    "expected a JSON object (a session entry), found {}; line skipped",
                    kind(&other)
                ),
            }),
            Err(err) => issues.push(LineIssue {
                line,
                message: format!(
                    "expected a JSON object (a session entry), found invalid JSON ({err}); line skipped"
                ),
            }),
        }
    }
    if version < 2 {
        migrate_v1_to_v2(&mut raw);
    }
    if version < 3 {
        migrate_v2_to_v3(&mut raw);
    }

    let mut session = Session::new(header);
    let mut entry_lines = Vec::new();
    let mut ignored_lines = 0;
    for (line, obj) in &raw {
        match decode_entry_object(obj) {
            Err(err) => issues.push(LineIssue {
                line: *line,
                message: format!("{err}; line skipped"),
            }),
            Ok((entry, body_error)) => {
                match body_error {
                    Some(err) => issues.push(LineIssue {
                        line: *line,
                        message: format!(
                            "{err}; entry {:?} is kept as written but left out of the model context",
                            entry.id
                        ),
                    }),
                    None if !entry.kind.feeds_context() => ignored_lines += 1,
                    None => {}
                }
                session.push_entry(entry);
                entry_lines.push(*line);
            }
        }
    }
    issues.extend(tree_issues(&session, &entry_lines));
    issues.sort_by_key(|issue| issue.line);
    Ok(SessionRead {
        session,
        issues,
        ignored_lines,
        migrated_from: (version < CURRENT_VERSION).then_some(version),
    })
}

/// Writes a session file: the header line, then one line per entry, each ending in `\n`. The
/// header says the session's version, [`CURRENT_VERSION`] (4) for every session read or built
/// here: what OpenClaw 2026.9 writes and reads.
pub fn encode_session(session: &Session) -> String {
    let mut out = encode_header(&session.header).to_string();
    out.push('\n');
    for entry in session.entries() {
        out.push_str(&encode_entry(entry).to_string());
        out.push('\n');
    }
    out
}

fn decode_header(text: &str, line: usize) -> Result<(SessionHeader, u64), OpenClawError> {
    let invalid = |message: String| OpenClawError::InvalidHeader { line, message };
    let value: Value = serde_json::from_str(text).map_err(|err| {
        invalid(format!(
            "expected a JSON object {{\"type\":\"session\",...}}, found invalid JSON ({err})"
        ))
    })?;
    let Value::Object(obj) = &value else {
        return Err(invalid(format!(
            "expected a JSON object {{\"type\":\"session\",...}}, found {}",
            kind(&value)
        )));
    };
    let mut fields = Fields::new(obj, Path::Root);
    match fields.take("type") {
        Some(Value::String(kind)) if kind == "session" => {}
        other => {
            return Err(invalid(format!(
                "type: expected \"session\", found {}",
                match other {
                    Some(Value::String(kind)) => format!("{kind:?}"),
                    other => kind_of(other).to_owned(),
                }
            )));
        }
    }
    let version = match fields.take("version") {
        // pi: "v1 sessions don't have this".
        None => 1,
        Some(raw) => match raw.as_u64() {
            Some(version @ 1..=CURRENT_VERSION) => version,
            Some(version) if version > CURRENT_VERSION => {
                return Err(OpenClawError::UnsupportedVersion { line, version });
            }
            Some(_) | None => {
                return Err(invalid(format!(
                    "version: expected an integer from 1 to {CURRENT_VERSION}, found {}",
                    kind(raw)
                )));
            }
        },
    };
    let header = header_fields(&mut fields).map_err(|err| invalid(err.to_string()))?;
    Ok((header, version))
}

fn header_fields(fields: &mut Fields<'_>) -> Result<SessionHeader, FieldError> {
    Ok(SessionHeader {
        version: CURRENT_VERSION,
        id: fields.required_str("id")?,
        timestamp: fields.optional_str("timestamp")?,
        cwd: fields.optional_str("cwd")?,
        parent_session: fields.optional_str("parentSession")?,
        extra: fields.rest(),
    })
}

/// pi's `migrateV1ToV2`: ids and parents from line order, `firstKeptEntryIndex` (an index into the
/// file's entries, header = 0) → `firstKeptEntryId`.
fn migrate_v1_to_v2(raw: &mut [(usize, Map<String, Value>)]) {
    let is_header =
        |obj: &Map<String, Value>| obj.get("type").and_then(Value::as_str) == Some("session");
    let mut ids: Vec<Option<String>> = Vec::with_capacity(raw.len());
    let mut previous: Option<String> = None;
    for (position, (_, obj)) in raw.iter_mut().enumerate() {
        if is_header(obj) {
            ids.push(None);
            continue;
        }
        // The entry's position among the file's lines, counting the header as 0: unique, and
        // the same on every read.
        let id = format!("{:08x}", position + 1);
        obj.insert("id".to_owned(), Value::from(id.clone()));
        obj.insert(
            "parentId".to_owned(),
            previous.clone().map_or(Value::Null, Value::from),
        );
        previous = Some(id.clone());
        ids.push(Some(id));
    }
    for (_, obj) in raw.iter_mut() {
        if obj.get("type").and_then(Value::as_str) != Some("compaction") {
            continue;
        }
        let Some(index) = obj.get("firstKeptEntryIndex").filter(|v| v.is_number()) else {
            continue;
        };
        let target = index
            .as_u64()
            .and_then(|index| usize::try_from(index).ok())
            .and_then(|index| index.checked_sub(1))
            .and_then(|position| ids.get(position).cloned().flatten());
        if let Some(target) = target {
            obj.insert("firstKeptEntryId".to_owned(), Value::from(target));
        }
        obj.remove("firstKeptEntryIndex");
    }
}

/// pi's `migrateV2ToV3`: the `hookMessage` role was renamed `custom`.
fn migrate_v2_to_v3(raw: &mut [(usize, Map<String, Value>)]) {
    for (_, obj) in raw.iter_mut() {
        if obj.get("type").and_then(Value::as_str) != Some("message") {
            continue;
        }
        if let Some(Value::Object(message)) = obj.get_mut("message") {
            if message.get("role").and_then(Value::as_str) == Some("hookMessage") {
                message.insert("role".to_owned(), Value::from("custom"));
            }
        }
    }
}

/// Duplicate ids, parents and kept entries that point nowhere, and `parentId` cycles.
fn tree_issues(session: &Session, lines: &[usize]) -> Vec<LineIssue> {
    let mut issues = Vec::new();
    let line_of = |position: usize| lines.get(position).copied().unwrap_or(0);
    let mut first_seen: HashMap<&str, usize> = HashMap::new();
    for (position, entry) in session.entries().iter().enumerate() {
        let line = line_of(position);
        match first_seen.get(entry.id.as_str()) {
            Some(&first) => issues.push(LineIssue {
                line,
                message: format!(
                    "duplicate entry id {:?} (first on line {first}); lookups by id find this later entry",
                    entry.id
                ),
            }),
            None => {
                first_seen.insert(&entry.id, line);
            }
        }
        if let Some(parent) = &entry.parent_id {
            if session.position(parent).is_none() {
                issues.push(LineIssue {
                    line,
                    message: format!(
                        "parentId {parent:?} points to no entry; the path to the root stops at this entry"
                    ),
                });
            }
        }
        if let EntryKind::Compaction {
            first_kept_entry_id: Some(kept),
            ..
        } = &entry.kind
        {
            if session.position(kept).is_none() {
                issues.push(LineIssue {
                    line,
                    message: format!(
                        "firstKeptEntryId {kept:?} points to no entry; no entry before this compaction is kept"
                    ),
                });
            }
        }
    }

    // Iterative three-state walk: every entry is visited once, so this is linear.
    const NEW: u8 = 0;
    const ON_WALK: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; session.entries().len()];
    for start in 0..session.entries().len() {
        let mut walk = Vec::new();
        let mut position = Some(start);
        while let Some(at) = position {
            match state.get(at).copied() {
                Some(NEW) => {}
                Some(ON_WALK) => {
                    if let Some(entry) = session.entries().get(at) {
                        issues.push(LineIssue {
                            line: line_of(at),
                            message: format!(
                                "entry {:?} is its own ancestor (a parentId cycle); paths through it stop where the cycle closes",
                                entry.id
                            ),
                        });
                    }
                    break;
                }
                Some(_) | None => break,
            }
            if let Some(slot) = state.get_mut(at) {
                *slot = ON_WALK;
            }
            walk.push(at);
            position = session
                .entries()
                .get(at)
                .and_then(|entry| entry.parent_id.as_deref())
                .and_then(|parent| session.position(parent));
        }
        for at in walk {
            if let Some(slot) = state.get_mut(at) {
                *slot = DONE;
            }
        }
    }
    issues
}
