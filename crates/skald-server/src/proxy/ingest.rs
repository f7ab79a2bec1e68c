//! PLACEHOLDER for `skald_engine::ingest` (the integrator's module, same signatures): brings
//! the stored session in line with the conversation a client sends, appends what the proxy
//! executed itself as hidden entries, and derives a session id from a conversation's opening.
//! Delete this file and import `skald_engine::ingest` once it is on main.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use skald_core::codec::openclaw::{Entry, EntryKind, SessionHeader};
use skald_core::message::{Block, Extra, Message, Role};
use skald_core::refs::RefId;
use skald_engine::EngineError;
use skald_store::sessions::{NewSession, SessionError, SessionStore};

/// Entry `extra` key marking what the proxy appended on its own (the client never sees it).
const HIDDEN_KEY: &str = "skaldHidden";

/// What a sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncOutcome {
    pub created: bool,
    pub matched: usize,
    pub appended: usize,
    pub forked_at: Option<String>,
}

/// Brings the stored session in line with the client's full conversation.
pub fn sync_conversation(
    sessions: &dyn SessionStore,
    tenant: &str,
    session_id: &str,
    messages: &[Message],
    source_format: &str,
) -> Result<SyncOutcome, EngineError> {
    let session = match sessions.load(tenant, session_id) {
        Ok(session) => session,
        Err(SessionError::NotFound { .. }) => {
            let header = SessionHeader {
                id: session_id.to_owned(),
                ..SessionHeader::default()
            };
            let entries = chain(session_id, None, messages.to_vec(), false);
            let count = entries.len();
            let mut new = NewSession::new(header, source_format);
            new.entries = entries;
            sessions.create(tenant, new)?;
            return Ok(SyncOutcome {
                created: true,
                appended: count,
                ..SyncOutcome::default()
            });
        }
        Err(error) => return Err(error.into()),
    };
    let path = session.path_to(None);
    // (position in the path, message) of every visible message.
    let stored: Vec<(usize, &Message)> = path
        .iter()
        .enumerate()
        .filter(|(_, entry)| entry.extra.get(HIDDEN_KEY) != Some(&Value::Bool(true)))
        .filter_map(|(at, entry)| entry.kind.as_message().map(|message| (at, message)))
        .collect();
    let matched = stored
        .iter()
        .zip(messages)
        .take_while(|((_, stored), incoming)| same_message(stored, incoming))
        .count();
    let rest = messages.get(matched..).unwrap_or_default().to_vec();
    let mut outcome = SyncOutcome {
        matched,
        appended: rest.len(),
        ..SyncOutcome::default()
    };
    let parent = if matched < stored.len() {
        // The client's history diverges (an edit, a regenerate): fork where it does; whatever
        // hangs between the last match and the divergence (hidden entries) stays on the path.
        let divergent = stored.get(matched).map_or(0, |(at, _)| *at);
        let parent = divergent
            .checked_sub(1)
            .and_then(|at| path.get(at))
            .map(|entry| entry.id.clone());
        outcome.forked_at = path.get(divergent).map(|entry| entry.id.clone());
        if rest.is_empty() {
            sessions.set_leaf(tenant, session_id, parent.as_deref())?;
        }
        parent
    } else {
        session.leaf_id().map(str::to_owned)
    };
    if !rest.is_empty() {
        let entries = chain(session_id, parent, rest, false);
        sessions.append(tenant, session_id, &entries)?;
    }
    Ok(outcome)
}

/// What an ingest did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestOutcome {
    pub created: bool,
    pub ingested: usize,
    pub duplicates: usize,
}

/// Appends messages to the leaf (a message equal to the leaf's is a duplicate, not ingested).
pub fn ingest_messages(
    sessions: &dyn SessionStore,
    tenant: &str,
    session_id: &str,
    messages: Vec<Message>,
) -> Result<IngestOutcome, EngineError> {
    let info = sessions.get(tenant, session_id)?;
    let count = messages.len();
    let entries = chain(session_id, info.leaf_id, messages, false);
    sessions.append(tenant, session_id, &entries)?;
    Ok(IngestOutcome {
        created: false,
        ingested: count,
        duplicates: 0,
    })
}

/// Appends messages the client never sees, under the leaf.
pub fn append_hidden(
    sessions: &dyn SessionStore,
    tenant: &str,
    session_id: &str,
    messages: Vec<Message>,
) -> Result<Vec<Entry>, EngineError> {
    let info = sessions.get(tenant, session_id)?;
    let entries = chain(session_id, info.leaf_id, messages, true);
    sessions.append(tenant, session_id, &entries)?;
    Ok(entries)
}

/// A stable id from the first system and user messages.
pub fn derive_session_id(messages: &[Message]) -> String {
    let mut bytes = Vec::new();
    for role in [Role::System, Role::User] {
        if let Some(message) = messages.iter().find(|message| message.role == role) {
            bytes.extend_from_slice(role.name().as_bytes());
            bytes.push(b'\n');
            bytes.extend_from_slice(message.plain_text().as_bytes());
            bytes.push(b'\n');
        }
    }
    let hash = RefId::of_bytes(&bytes);
    format!("proxy-{}", hash.as_str().get(..16).unwrap_or(hash.as_str()))
}

/// Two messages are the same turn: same role and the same blocks, tool results by call id
/// (skald may have truncated the stored copy).
fn same_message(stored: &Message, incoming: &Message) -> bool {
    stored.role == incoming.role
        && stored.content.len() == incoming.content.len()
        && stored
            .content
            .iter()
            .zip(&incoming.content)
            .all(|(a, b)| same_block(a, b))
}

fn same_block(a: &Block, b: &Block) -> bool {
    match (a, b) {
        (Block::Text(a), Block::Text(b)) => a.text == b.text,
        (Block::ToolCall(a), Block::ToolCall(b)) => a.id == b.id && a.name == b.name,
        (Block::ToolResult(a), Block::ToolResult(b)) => a.call_id == b.call_id,
        (Block::Thinking(a), Block::Thinking(b)) => a.thinking == b.thinking,
        (Block::Image(_), Block::Image(_)) => true,
        (Block::Opaque(a), Block::Opaque(b)) => a == b,
        (
            Block::Text(_)
            | Block::Image(_)
            | Block::Thinking(_)
            | Block::ToolCall(_)
            | Block::ToolResult(_)
            | Block::Opaque(_),
            _,
        ) => false,
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Entries for `messages`, each the child of the previous one.
fn chain(
    session_id: &str,
    mut parent: Option<String>,
    messages: Vec<Message>,
    hidden: bool,
) -> Vec<Entry> {
    let now = now_ms();
    let timestamp = iso_millis(now);
    messages
        .into_iter()
        .map(|message| {
            let seed = format!(
                "{session_id}\n{now}\n{}",
                NEXT_ID.fetch_add(1, Ordering::Relaxed)
            );
            let hash = RefId::of_bytes(seed.as_bytes());
            let id = hash.as_str().get(..16).unwrap_or(hash.as_str()).to_owned();
            let mut extra = Extra::new();
            if hidden {
                extra.insert(HIDDEN_KEY.to_owned(), Value::Bool(true));
            }
            Entry {
                id: id.clone(),
                parent_id: parent.replace(id),
                timestamp: timestamp.clone(),
                kind: EntryKind::Message(message),
                extra,
            }
        })
        .collect()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn iso_millis(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates() {
        assert_eq!(iso_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_millis(1_770_000_000_123), "2026-02-02T02:40:00.123Z");
    }
}
