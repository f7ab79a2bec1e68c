//! TEMPORARY stand-in for `skald_engine::ingest` (the integrator's, coming to main) with its
//! announced signatures, so the engine API can be written and tested now. Delete this file and
//! point `routes::engine` at `skald_engine::ingest` when main has it.

use skald_core::codec::openclaw::SessionHeader;
use skald_core::message::Message;
use skald_engine::EngineError;
use skald_store::sessions::{NewSession, SessionError, SessionStore};

/// What [`sync_conversation`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOutcome {
    pub created: bool,
    pub matched: usize,
    pub appended: usize,
    pub forked_at: Option<String>,
}

/// What [`ingest_messages`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestOutcome {
    pub created: bool,
    pub ingested: usize,
    pub duplicates: usize,
}

fn ensure_session(
    sessions: &dyn SessionStore,
    tenant: &str,
    session_id: &str,
    source_format: &str,
) -> Result<bool, EngineError> {
    match sessions.get(tenant, session_id) {
        Ok(_) => Ok(false),
        Err(SessionError::NotFound { .. }) => {
            let header = SessionHeader {
                id: session_id.to_owned(),
                ..SessionHeader::default()
            };
            sessions.create(tenant, NewSession::new(header, source_format))?;
            Ok(true)
        }
        Err(error) => Err(error.into()),
    }
}

fn without_id(message: &Message) -> Message {
    let mut message = message.clone();
    message.meta.id = None;
    message
}

/// Brings the stored session in line with a client's full conversation.
pub fn sync_conversation(
    sessions: &dyn SessionStore,
    tenant: &str,
    session_id: &str,
    messages: &[Message],
    source_format: &str,
) -> Result<SyncOutcome, EngineError> {
    let created = ensure_session(sessions, tenant, session_id, source_format)?;
    let session = sessions.load(tenant, session_id)?;
    let stored: Vec<(String, Message)> = session
        .path_to(None)
        .into_iter()
        .filter_map(|entry| Some((entry.id.clone(), without_id(entry.kind.as_message()?))))
        .collect();
    let matched = stored
        .iter()
        .zip(messages)
        .take_while(|((_, kept), given)| *kept == without_id(given))
        .count();
    let mut forked_at = None;
    if matched < stored.len() && matched < messages.len() {
        let parent = matched
            .checked_sub(1)
            .and_then(|index| stored.get(index))
            .map(|(id, _)| id.clone());
        sessions.set_leaf(tenant, session_id, parent.as_deref())?;
        forked_at = Some(parent.unwrap_or_default());
    }
    let new = messages.get(matched..).unwrap_or(&[]);
    let appended = if matched < stored.len() && forked_at.is_none() {
        0
    } else {
        for message in new {
            sessions.append_message(tenant, session_id, without_id(message))?;
        }
        new.len()
    };
    Ok(SyncOutcome {
        created,
        matched,
        appended,
        forked_at,
    })
}

/// OpenClaw `ingest`/`ingestBatch`: append to the leaf; a message equal to the leaf's message
/// is a duplicate.
pub fn ingest_messages(
    sessions: &dyn SessionStore,
    tenant: &str,
    session_id: &str,
    messages: Vec<Message>,
) -> Result<IngestOutcome, EngineError> {
    let created = ensure_session(sessions, tenant, session_id, "openclaw-session")?;
    let session = sessions.load(tenant, session_id)?;
    let mut leaf = session
        .path_to(None)
        .last()
        .and_then(|entry| entry.kind.as_message())
        .map(without_id);
    let mut outcome = IngestOutcome {
        created,
        ingested: 0,
        duplicates: 0,
    };
    for message in messages {
        let message = without_id(&message);
        if leaf.as_ref() == Some(&message) {
            outcome.duplicates += 1;
            continue;
        }
        sessions.append_message(tenant, session_id, message.clone())?;
        leaf = Some(message);
        outcome.ingested += 1;
    }
    Ok(outcome)
}
