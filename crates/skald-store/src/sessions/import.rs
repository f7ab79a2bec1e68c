//! Importing a transcript into the session store, once.
//!
//! - An OpenClaw session JSONL keeps its header, entries, ids, tree and leaf (its last entry, as
//!   pi loads it), so [`SessionStore::context`] rebuilds exactly what OpenClaw builds from it. The
//!   session id is the header's id.
//! - Every other format `skald_core::codec` reads becomes a chain of message entries, one per
//!   message in OpenClaw's shape — except a Claude Code compaction: its `compact_boundary` line
//!   and the `isCompactSummary` summary after it become one compaction entry (skald's
//!   checkpoint), so the stored context restarts there as Claude Code's (and `skald replay`'s)
//!   does (a message holding several tool results becomes one `toolResult`
//!   message per result, as pi keeps them). Entry ids are the message positions as 8 hex digits
//!   (`00000001`, …), and the session id is skald's one derivation (`skald_core::session_id`):
//!   a Claude Code transcript's own session id joined with its opening's hash, any other
//!   transcript's opening (up to the first user message) hashed — so the same transcript, the
//!   same transcript grown longer, and the same conversation through the proxy map to the same
//!   session.
//! - Importing again compares entry by entry: an identical transcript is
//!   [`ImportStatus::AlreadyImported`] and changes nothing; a transcript that grew appends only
//!   its new entries (and the leaf moves to its last one); a transcript whose stored entries
//!   changed is refused with [`ImportError::Conflict`].

use std::collections::HashMap;

use serde_json::Value;
use skald_core::codec::claude_code;
use skald_core::codec::openclaw::{
    decode_agent_message, decode_session, encode_agent_messages, encode_entry,
};
use skald_core::codec::{self, DecodeError, Format, LineIssue};
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Extra, Message, Role, Timestamp};
use skald_core::session::{Entry, EntryKind, SessionHeader};
use skald_core::session_id;

use super::sqlite::iso_millis;
use super::{NewSession, SessionError, SessionStore, parse_session_id};

/// Titles are cut to this many characters.
const TITLE_CHARS: usize = 80;

/// How to import.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Where the transcript came from (a file path), kept for listings.
    pub source: Option<String>,
    /// Import under this session id instead of the header's or the derived one.
    pub session_id: Option<SessionId>,
    /// The entry time for messages that carry no timestamp of their own (epoch ms).
    pub now_ms: i64,
}

/// What an import did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportStatus {
    /// A new session.
    Created,
    /// The session existed; the transcript's new entries were appended.
    Appended,
    /// The session already holds every entry of the transcript; nothing changed.
    AlreadyImported,
}

impl ImportStatus {
    /// The stable name used in CLI output.
    pub fn name(self) -> &'static str {
        match self {
            ImportStatus::Created => "created",
            ImportStatus::Appended => "appended",
            ImportStatus::AlreadyImported => "already_imported",
        }
    }
}

/// The result of [`import_transcript`].
#[derive(Debug, Clone, PartialEq)]
pub struct ImportOutcome {
    /// The id the session is stored under: [`ImportOptions::session_id`], the OpenClaw header's
    /// id, or the derived one.
    pub session_id: SessionId,
    /// The format the transcript was detected as.
    pub format: Format,
    /// Whether the session was created, extended, or already held everything.
    pub status: ImportStatus,
    /// Entries appended by this import.
    pub entries_added: usize,
    /// Entries the transcript holds.
    pub entries_in_transcript: usize,
    /// Lines the decoder skipped or repaired, each with the reason.
    pub issues: Vec<LineIssue>,
}

/// Why a transcript was not imported. Nothing was stored.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The text is not a transcript of a format `skald_core::codec` reads, or does not decode
    /// as the format it was detected as.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The session store refused or failed: an invalid tenant or session id, an entry it cannot
    /// store, or a storage failure.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The transcript's entries cannot be stored as they are; the reason names the entry.
    #[error("{reason}")]
    InvalidTree {
        /// What is wrong, naming the entry (e.g. an id used twice, a parent later in the file).
        reason: String,
    },
    /// The session exists and one of its stored entries differs from the transcript's.
    #[error(
        "session {session:?} was imported before, and {what} differs from the stored one: the \
         transcript was changed, not only extended; give another --session-id to import it as a \
         new session"
    )]
    Conflict {
        /// The session id imported into.
        session: String,
        /// The first differing entry: `entry "<id>"` for an OpenClaw session, `message <n>`
        /// (1-based) for other formats.
        what: String,
    },
    /// The session exists but came from another format.
    #[error(
        "session {session:?} was imported from a {stored} transcript, and this one is {found}; \
         give another --session-id to import it as a new session"
    )]
    FormatMismatch {
        /// The session id imported into.
        session: String,
        /// The format the stored session was imported from ([`Format::name`]).
        stored: String,
        /// The format of this transcript ([`Format::name`]).
        found: &'static str,
    },
}

/// A transcript turned into what the store keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportPlan {
    /// The format the transcript was detected as.
    pub format: Format,
    /// The session header; its `id` is the session id to import under.
    pub header: SessionHeader,
    /// A title for listings: the first line of an OpenClaw session's last `session_info` name,
    /// else of the first user message, cut to 80 characters; `None` when there is neither.
    pub title: Option<String>,
    /// The entries to store, in file order, each parent before its children.
    pub entries: Vec<Entry>,
    /// Lines the decoder skipped or repaired, each with the reason.
    pub issues: Vec<LineIssue>,
    /// How to name entry `i` in errors ("entry \"a1b2c3d4\"", "message 3").
    linear: bool,
}

/// Decodes `text` (any format) into the session it becomes, without touching a store.
pub fn plan_import(text: &str, options: &ImportOptions) -> Result<ImportPlan, ImportError> {
    Ok(plan_with_id(text, options)?.0)
}

/// [`plan_import`], with the session id parsed once.
fn plan_with_id(
    text: &str,
    options: &ImportOptions,
) -> Result<(ImportPlan, SessionId), ImportError> {
    let format = codec::detect(text).map_err(DecodeError::from)?;
    let mut plan = match format {
        Format::OpenClawSession => plan_openclaw(text)?,
        Format::OpenAiRequest
        | Format::OpenAiResponse
        | Format::AnthropicRequest
        | Format::AnthropicResponse
        | Format::ClaudeCode
        | Format::MiniSweAgent
        | Format::SweAgent => plan_linear(format, text, options.now_ms)?,
    };
    let session_id = match &options.session_id {
        Some(id) => {
            plan.header.id = id.to_string();
            id.clone()
        }
        None => parse_session_id(&plan.header.id)?,
    };
    Ok((plan, session_id))
}

/// Imports `text` into `store` for `tenant`: creates the session, appends what is new, or
/// reports it is already there.
pub fn import_transcript(
    store: &dyn SessionStore,
    tenant: &Tenant,
    text: &str,
    options: &ImportOptions,
) -> Result<ImportOutcome, ImportError> {
    let (plan, session_id) = plan_with_id(text, options)?;
    let entries_in_transcript = plan.entries.len();
    let stored = match store.get(tenant, &session_id) {
        Ok(stored) => Some(stored),
        Err(SessionError::NotFound { .. }) => None,
        Err(other) => return Err(other.into()),
    };
    let Some(stored) = stored else {
        let entries_added = plan.entries.len();
        store.create(
            tenant,
            NewSession {
                header: plan.header,
                source_format: plan.format.name().to_owned(),
                source: options.source.clone(),
                title: plan.title,
                entries: plan.entries,
            },
        )?;
        return Ok(ImportOutcome {
            session_id,
            format: plan.format,
            status: ImportStatus::Created,
            entries_added,
            entries_in_transcript,
            issues: plan.issues,
        });
    };
    if stored.source_format != plan.format.name() {
        return Err(ImportError::FormatMismatch {
            session: session_id.to_string(),
            stored: stored.source_format,
            found: plan.format.name(),
        });
    }
    let existing: HashMap<String, Entry> = store
        .entries(tenant, &session_id)?
        .into_iter()
        .map(|entry| (entry.id.clone(), entry))
        .collect();
    let mut new_entries = Vec::new();
    for (position, entry) in plan.entries.iter().enumerate() {
        match existing.get(&entry.id) {
            Some(kept) if same_entry(kept, entry) => {}
            Some(_) => {
                return Err(ImportError::Conflict {
                    session: session_id.to_string(),
                    what: if plan.linear {
                        format!("message {}", position + 1)
                    } else {
                        format!("entry {:?}", entry.id)
                    },
                });
            }
            None => new_entries.push(entry.clone()),
        }
    }
    let status = if new_entries.is_empty() {
        ImportStatus::AlreadyImported
    } else {
        store.append(tenant, &session_id, &new_entries)?;
        ImportStatus::Appended
    };
    Ok(ImportOutcome {
        session_id,
        format: plan.format,
        status,
        entries_added: new_entries.len(),
        entries_in_transcript,
        issues: plan.issues,
    })
}

/// Same parent and same content. The entry time is left out: a message without a timestamp of
/// its own is stamped with the time of the import.
fn same_entry(stored: &Entry, incoming: &Entry) -> bool {
    let without_time = |entry: &Entry| {
        let mut line = encode_entry(entry);
        if let Value::Object(fields) = &mut line {
            fields.insert("timestamp".to_owned(), Value::Null);
        }
        line
    };
    stored.parent_id == incoming.parent_id && without_time(stored) == without_time(incoming)
}

fn plan_openclaw(text: &str) -> Result<ImportPlan, ImportError> {
    let read = decode_session(text).map_err(DecodeError::from)?;
    let issues = read.issues.clone();
    let header = read.session.header.clone();
    let title = openclaw_title(&read.session);
    let all: HashMap<&str, usize> = read
        .session
        .entries()
        .iter()
        .enumerate()
        .map(|(at, entry)| (entry.id.as_str(), at))
        .collect();
    let mut earlier: HashMap<&str, usize> = HashMap::new();
    let mut entries = Vec::with_capacity(read.session.entries().len());
    for (at, original) in read.session.entries().iter().enumerate() {
        if earlier.contains_key(original.id.as_str()) {
            return Err(ImportError::InvalidTree {
                reason: format!(
                    "entry id {:?} is used twice; the store keeps one entry per id",
                    original.id
                ),
            });
        }
        let mut entry = original.clone();
        if let Some(parent) = &original.parent_id {
            if !earlier.contains_key(parent.as_str()) {
                if all.contains_key(parent.as_str()) {
                    return Err(ImportError::InvalidTree {
                        reason: format!(
                            "entry {:?} names parent {parent:?}, which comes later in the file",
                            original.id
                        ),
                    });
                }
                // The reader has reported the missing parent. pi's path walk stops there, as it
                // stops at a root: stored as a root, the context is the same and every stored
                // parent is a real entry.
                entry.parent_id = None;
            }
        }
        earlier.insert(&original.id, at);
        entries.push(entry);
    }
    Ok(ImportPlan {
        format: Format::OpenClawSession,
        header,
        title,
        entries,
        issues,
        linear: false,
    })
}

/// The session's display name (its last `session_info` name), else its first user message in
/// file order.
fn openclaw_title(session: &skald_core::session::Session) -> Option<String> {
    let named = session.entries().iter().rev().find_map(|entry| {
        entry
            .kind
            .session_name()
            .filter(|name| !name.trim().is_empty())
            .map(str::to_owned)
    });
    // Not the context's first message: after a compaction that is the summary.
    let messages: Vec<Message> = session
        .entries()
        .iter()
        .filter_map(|entry| entry.kind.as_message().cloned())
        .collect();
    named
        .map(|name| cut_title(&name))
        .or_else(|| first_user_title(&messages))
}

fn plan_linear(format: Format, text: &str, now_ms: i64) -> Result<ImportPlan, ImportError> {
    let decoded = codec::decode_as(format, text)?;
    // Stored in OpenClaw's shape: what the store keeps is what it would write to a session file.
    let mut messages = Vec::new();
    for (at, value) in encode_agent_messages(&decoded.conversation.messages)
        .iter()
        .enumerate()
    {
        let message = decode_agent_message(value).map_err(|error| ImportError::InvalidTree {
            reason: format!("message {} has no OpenClaw form: {error}", at + 1),
        })?;
        messages.push(message);
    }
    let header = SessionHeader {
        id: derived_session_id(format, &messages),
        timestamp: messages
            .iter()
            .find_map(|message| message.meta.timestamp.as_ref())
            .map(timestamp_text),
        cwd: messages
            .iter()
            .find_map(|message| message.extra.get("cwd").and_then(Value::as_str))
            .map(str::to_owned),
        ..SessionHeader::default()
    };
    let title = first_user_title(&messages);
    let mut entries: Vec<Entry> = Vec::with_capacity(messages.len());
    let mut parent: Option<String> = None;
    let mut positions = messages.iter().enumerate().peekable();
    while let Some((at, message)) = positions.next() {
        let timestamp = message
            .meta
            .timestamp
            .as_ref()
            .map_or_else(|| iso_millis(now_ms), timestamp_text);
        let kind = if format == Format::ClaudeCode && claude_code::is_compact_boundary(message) {
            match positions.peek() {
                // The summary is not written yet (a session being written as it is imported):
                // the boundary waits for the next import, which stores both at these positions.
                None => break,
                Some((_, next)) if is_compact_summary(next) => {
                    let kind = claude_code_compaction(message, next);
                    positions.next();
                    kind
                }
                Some(_) => EntryKind::Message(message.clone()),
            }
        } else {
            EntryKind::Message(message.clone())
        };
        let id = linear_entry_id(at);
        entries.push(Entry {
            id: id.clone(),
            parent_id: parent.replace(id),
            timestamp,
            kind,
            extra: Extra::new(),
        });
    }
    Ok(ImportPlan {
        format,
        header,
        title,
        entries,
        issues: decoded.issues,
        linear: true,
    })
}

/// True for the user message Claude Code writes right after a `compact_boundary`: the summary
/// its model wrote of everything before (`isCompactSummary`).
fn is_compact_summary(message: &Message) -> bool {
    message.role == Role::User && message.extra.get("isCompactSummary") == Some(&Value::Bool(true))
}

/// A Claude Code compaction as skald's checkpoint, the way replay reads the transcript: the
/// model's context restarts after the boundary with the summary message, so the summary is the
/// compaction's and no entry before it is kept. The boundary's `compactMetadata` (trigger,
/// `preTokens`) and both lines' uuids are kept under `details.claude_code`.
fn claude_code_compaction(boundary: &Message, summary: &Message) -> EntryKind {
    let metadata = boundary.extra.get("compactMetadata");
    let tokens_before = metadata
        .and_then(|metadata| metadata.get("preTokens"))
        .and_then(Value::as_u64);
    let details = serde_json::json!({
        "claude_code": {
            "trigger": metadata.and_then(|metadata| metadata.get("trigger")).cloned(),
            "boundary_uuid": boundary.extra.get("uuid").cloned(),
            "summary_uuid": summary.extra.get("uuid").cloned(),
        }
    });
    EntryKind::Compaction {
        summary: summary.plain_text().trim().to_owned(),
        first_kept_entry_id: None,
        tokens_before,
        details: Some(details),
        from_hook: None,
    }
}

/// The id of the message at `position` in a linear import: its 1-based position in 8 hex digits.
fn linear_entry_id(position: usize) -> String {
    format!("{:08x}", position + 1)
}

/// The session id of a linear import, by skald's one derivation ([`session_id`]): a Claude Code
/// transcript under its own session id (as the proxy names Claude Code's conversations), any
/// other under the hash of its opening — the same for a transcript and for the same transcript
/// grown longer, and the same a proxied or assembled conversation of that opening gets.
fn derived_session_id(format: Format, messages: &[Message]) -> String {
    let client_id = match format {
        Format::ClaudeCode => messages
            .iter()
            .find_map(|message| message.extra.get("sessionId").and_then(|id| id.as_str()))
            .filter(|id| !id.trim().is_empty()),
        Format::OpenAiRequest
        | Format::OpenAiResponse
        | Format::AnthropicRequest
        | Format::AnthropicResponse
        | Format::OpenClawSession
        | Format::MiniSweAgent
        | Format::SweAgent => None,
    };
    match client_id {
        Some(id) => session_id::for_client("claude-code", id, messages),
        None => session_id::derive(messages),
    }
}

fn timestamp_text(timestamp: &Timestamp) -> String {
    match timestamp {
        Timestamp::Millis(ms) => iso_millis(*ms),
        Timestamp::Rfc3339(text) => text.clone(),
    }
}

fn first_user_title(messages: &[Message]) -> Option<String> {
    messages
        .iter()
        .filter(|message| message.role == Role::User)
        .map(Message::plain_text)
        .find(|text| !text.trim().is_empty())
        .map(|text| cut_title(&text))
}

/// The first non-blank line, at most [`TITLE_CHARS`] characters (an ellipsis marks a cut).
fn cut_title(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    if line.chars().count() <= TITLE_CHARS {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(TITLE_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn titles_take_the_first_line_and_mark_a_cut() {
        assert_eq!(cut_title("\n  fix the build \nthen test"), "fix the build");
        let long = cut_title(&"é".repeat(200));
        assert_eq!(long.chars().count(), TITLE_CHARS);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn derived_ids_ignore_what_follows_the_first_user_message() {
        let system = Message::text(Role::System, "be terse");
        let ask = Message::text(Role::User, "list files");
        let reply = Message::text(Role::Assistant, "a b");
        let short = derived_session_id(Format::OpenAiRequest, &[system.clone(), ask.clone()]);
        let grown = derived_session_id(Format::OpenAiRequest, &[system.clone(), ask, reply]);
        assert_eq!(short, grown);
        // The id the proxy and the engine API derive for the same conversation.
        assert_eq!(
            short,
            session_id::derive(&[
                Message::text(Role::System, "be terse"),
                Message::text(Role::User, "list files"),
            ])
        );
        let other = derived_session_id(
            Format::OpenAiRequest,
            &[system, Message::text(Role::User, "other")],
        );
        assert_ne!(short, other);
        assert!(SessionId::parse(short.as_str()).is_ok());
    }
}
