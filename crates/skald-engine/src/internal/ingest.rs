//! Getting what a host or a client sends into a stored session.
//!
//! Two shapes of input arrive:
//! - **Messages one at a time** (OpenClaw's `ingest` / `ingestBatch`): [`ingest_messages`]
//!   appends them under the leaf; messages the active path already ends with are a re-send (a
//!   batch retried after a restart, or after another server stored it), not new ones.
//! - **A finished turn, once** (OpenClaw's `commitTurn`): [`commit_turn`] appends the turn's
//!   messages and a record of its advancement key in one atomic write; the same key again is a
//!   duplicate that writes nothing, across restarts (the record is in the session).
//! - **A whole conversation** on every call (an OpenAI or Anthropic request through the proxy,
//!   an `assemble` that carries the host's messages): [`sync_conversation`] lines the client's
//!   history up with the session's active path and appends only what is new. Where the two
//!   differ (the client edited, rewound or regenerated) the client's history wins as a new
//!   branch from the last message they share; the old branch stays in the tree.
//!
//! Matching knows what skald itself changed: a tool result matches by its call id even when
//! skald's persistent truncation rewrote its content, and messages skald appended that the client
//! never saw ([`append_hidden`]: the proxy's own tool calls and their results) are skipped on the
//! stored side while they stay in the model's context. The system messages a conversation opens
//! with are the host's prompt, sent again with every request, and never take part ([`prompt_len`]);
//! a system message later on (a harness's reminder) is history and is stored like any other.
//!
//! A sync whose conversation holds nothing new writes nothing.
//!
//! Through the engine ([`Engine::sync`](crate::Engine::sync) runs [`sync_conversation`]):
//!
//! ```
//! use skald_core::ids::{SessionId, Tenant};
//! use skald_core::message::{Message, Role};
//! use skald_core::pipeline::policy::Policy;
//! use skald_engine::{Engine, EngineConfig};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let skald = Engine::in_memory(EngineConfig::new(Policy::preset("skald").unwrap())).unwrap();
//! let (acme, s1) = (Tenant::parse("acme").unwrap(), SessionId::parse("s1").unwrap());
//! let mut conversation = vec![
//!     Message::text(Role::System, "You are terse."),
//!     Message::text(Role::User, "list the files"),
//! ];
//! let first = skald.sync(&acme, &s1, &conversation, "openai").await.unwrap();
//! assert!(first.created);
//! assert_eq!(first.appended, 1); // the system prompt is the host's, not the session's
//!
//! conversation.push(Message::text(Role::Assistant, "a.txt b.txt"));
//! conversation.push(Message::text(Role::User, "and the hidden ones?"));
//! let next = skald.sync(&acme, &s1, &conversation, "openai").await.unwrap();
//! assert_eq!((next.matched, next.appended), (1, 2));
//!
//! // The same request again (a client retry) writes nothing.
//! let again = skald.sync(&acme, &s1, &conversation, "openai").await.unwrap();
//! assert_eq!((again.matched, again.appended), (3, 0));
//! assert_eq!(skald.stored_context(&acme, &s1).unwrap().len(), 3);
//! # });
//! ```

use std::collections::HashSet;

use serde_json::Value;
use skald_core::assemble_record::AssembleRecord;
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Message, Role};
use skald_core::session::{Entry, EntryKind, Session, SessionHeader};
use skald_core::session_id::content_key;
use skald_store::sessions::{NewSession, SessionError, SessionInfo, SessionStore};

use crate::session::RelayedAnswer;
use crate::{EngineError, SessionState};

/// The entry field (beside the message, never part of it) that marks a message the client
/// never saw.
pub const HIDDEN_ENTRY_KEY: &str = "skaldHidden";

/// The entry field naming the provider response an answer came from (a Responses client may
/// continue from it with `previous_response_id`).
pub const RESPONSE_ID_ENTRY_KEY: &str = "skaldResponseId";

/// What [`Engine::sync`](crate::Engine::sync) did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SyncOutcome {
    /// The session did not exist and was created.
    pub created: bool,
    /// Client messages found on the session's active path.
    pub matched: usize,
    /// Client messages appended.
    pub appended: usize,
    /// Where the client's history left the stored one: the entry the new branch grows from
    /// (`Some("")` never occurs; `None` with `forked` means a new root).
    pub forked_at: Option<String>,
    /// Whether the client's history diverged and a new branch was started.
    pub forked: bool,
}

/// What [`Engine::ingest`](crate::Engine::ingest) did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IngestOutcome {
    /// The session did not exist and was created (source format `openclaw-session`).
    pub created: bool,
    /// Messages appended under the leaf (the re-sends not counted).
    pub ingested: usize,
    /// Messages equal to the one before them (a re-send), not stored again.
    pub duplicates: usize,
}

/// Brings the stored session in line with a client's whole conversation: creates the session if
/// needed, appends the client's messages that are new, and forks a branch where the client's
/// history leaves the stored one (see the module docs).
pub fn sync_conversation(
    held: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    messages: &[Message],
    source_format: &str,
) -> Result<SyncOutcome, EngineError> {
    let client: Vec<&Message> = messages.iter().skip(prompt_len(messages)).collect();
    let created = create_if_missing(sessions, tenant, session_id, source_format)?;
    let relayed = relayed_usage(held, client.iter().copied());
    let mut pending = held.pending_assemble.take();
    let session = match held.stored_session(sessions, tenant, session_id) {
        Ok(session) => session,
        Err(error) => {
            held.pending_assemble = pending;
            return Err(error.into());
        }
    };
    let path = session.path_to(None);
    let stored: Vec<(&str, &Message)> = path
        .iter()
        .filter(|entry| !is_hidden(entry))
        .filter_map(|entry| {
            entry
                .kind
                .as_message()
                .map(|message| (entry.id.as_str(), message))
        })
        .collect();
    let stored_prompt = stored
        .iter()
        .take_while(|(_, message)| is_prompt(message))
        .count();
    let stored = stored.get(stored_prompt..).unwrap_or_default();
    let matched = stored
        .iter()
        .zip(&client)
        .take_while(|((_, stored), client)| same_message(stored, client))
        .count();
    let mut new: Vec<Message> = client
        .get(matched..)
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(offset, message)| with_relayed_usage(message, matched + offset, &relayed))
        .collect();
    attach_pending_assemble(&mut pending, &mut new);
    let diverged = matched < stored.len();
    if !diverged && new.is_empty() {
        held.pending_assemble = pending;
        return Ok(SyncOutcome {
            created,
            matched,
            appended: 0,
            forked_at: None,
            forked: false,
        });
    }
    let parent = if diverged {
        // The last shared message: the client's history continues from there (hidden messages
        // and checkpoints after it belong to the abandoned continuation).
        matched
            .checked_sub(1)
            .and_then(|last| stored.get(last))
            .map(|(id, _)| (*id).to_owned())
    } else {
        session.leaf_id().map(str::to_owned)
    };
    if diverged && new.is_empty() {
        // The client's history is a prefix of the stored one (a regenerate): move back to it.
        sessions.set_leaf(tenant, session_id, parent.as_deref())?;
    } else {
        let entries = chain(session, parent.clone(), new.clone(), false);
        sessions.append(tenant, session_id, &entries)?;
    }
    held.pending_assemble = pending;
    Ok(SyncOutcome {
        created,
        matched,
        appended: new.len(),
        forked_at: if diverged { parent } else { None },
        forked: diverged,
    })
}

/// Appends the messages a client added after a conversation already synced, under the leaf,
/// exactly as [`sync_conversation`] would have appended them (the host's prompt left out) but
/// without reading the session back to match: for a caller that knows the session is still in
/// line with the conversation's earlier part (the proxy's [`crate::SyncMark`]). No re-send
/// detection either: a client that says the same thing twice said it twice. `info` is the
/// session's row as the caller just read it (its check of the mark), so it is not read again.
/// The number of messages appended.
pub fn append_synced_tail(
    state: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    info: &SessionInfo,
    tail: &[Message],
) -> Result<usize, EngineError> {
    // A repeated request brings nothing: no need to read the session back.
    if tail.is_empty() {
        return Ok(0);
    }
    let relayed = relayed_usage(state, tail.iter());
    let mut pending = state.pending_assemble.take();
    let session = match state.stored_session_as_of(sessions, tenant, session_id, info) {
        Ok(session) => session,
        Err(error) => {
            state.pending_assemble = pending;
            return Err(error.into());
        }
    };
    let starts_the_conversation = !session
        .path_to(None)
        .iter()
        .any(|entry| entry.kind.as_message().is_some());
    let skip = if starts_the_conversation {
        prompt_len(tail)
    } else {
        0
    };
    let mut new: Vec<Message> = tail
        .get(skip..)
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(offset, message)| with_relayed_usage(message, skip + offset, &relayed))
        .collect();
    attach_pending_assemble(&mut pending, &mut new);
    if new.is_empty() {
        state.pending_assemble = pending;
        return Ok(0);
    }
    let count = new.len();
    let entries = chain(session, session.leaf_id().map(str::to_owned), new, false);
    state.pending_assemble = pending;
    sessions.append(tenant, session_id, &entries)?;
    Ok(count)
}

/// Appends messages the client never sees — skald's own tool calls and their results, run by the
/// proxy — under the leaf. They are in the model's context from now on; [`sync_conversation`]
/// skips them when it lines the client's history up.
pub fn append_hidden(
    state: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    messages: Vec<Message>,
) -> Result<Vec<Entry>, EngineError> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let session = state.stored_session(sessions, tenant, session_id)?;
    let entries = chain(
        session,
        session.leaf_id().map(str::to_owned),
        messages,
        true,
    );
    sessions.append(tenant, session_id, &entries)?;
    Ok(entries)
}

/// Appends the model's answer to a client that keeps no history of its own (a Responses request
/// with `store` on): the client continues with `previous_response_id` and sends only what is new,
/// so skald records the answer itself, under the leaf, with the provider's `response_id`
/// ([`conversation_before_response`] finds it again). The client sees this message, so a later
/// request that sends the whole conversation matches it like any other.
pub fn append_answer(
    state: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    answer: Message,
    response_id: &str,
) -> Result<(), EngineError> {
    let session = state.stored_session(sessions, tenant, session_id)?;
    let mut entries = chain(
        session,
        session.leaf_id().map(str::to_owned),
        vec![answer],
        false,
    );
    for entry in &mut entries {
        entry.extra.insert(
            RESPONSE_ID_ENTRY_KEY.to_owned(),
            Value::String(response_id.to_owned()),
        );
    }
    sessions.append(tenant, session_id, &entries)?;
    Ok(())
}

/// The client's conversation up to and including the answer of `response_id` (see
/// [`append_answer`]): the messages of the active path the client saw, the host's prompt
/// excluded. `None` when the session holds no such answer.
pub fn conversation_before_response(
    state: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    response_id: &str,
) -> Result<Option<Vec<Message>>, EngineError> {
    let session = match state.stored_session(sessions, tenant, session_id) {
        Ok(session) => session,
        Err(SessionError::NotFound { .. }) => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    let path = session.path_to(None);
    let Some(end) = path.iter().position(|entry| {
        entry
            .extra
            .get(RESPONSE_ID_ENTRY_KEY)
            .and_then(Value::as_str)
            == Some(response_id)
    }) else {
        return Ok(None);
    };
    Ok(Some(
        path.iter()
            .take(end + 1)
            .filter(|entry| !is_hidden(entry))
            .filter_map(|entry| entry.kind.as_message().cloned())
            .collect(),
    ))
}

/// OpenClaw's `ingest` / `ingestBatch`: appends messages under the leaf, creating the session if
/// needed. What the session already ends with is a re-send and is not stored again: the
/// longest run of the request's first messages equal to the last messages of the active path
/// (a batch retried after skald restarted, or after another server sharing the store stored it;
/// for one message, the leaf's), and then a message equal to the one before it in the batch.
/// An append that collides with entries another writer stored a moment before (the same
/// request on another server) is decided again on the session read anew, as
/// [`commit_turn`]'s is.
pub fn ingest_messages(
    state: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    messages: Vec<Message>,
) -> Result<IngestOutcome, EngineError> {
    let created = create_if_missing(sessions, tenant, session_id, "openclaw-session")?;
    let mut messages = messages;
    attach_pending_assemble(&mut state.pending_assemble, &mut messages);
    let outcome = decide_again(|| ingest_once(state, sessions, tenant, session_id, &messages))?;
    Ok(IngestOutcome { created, ..outcome })
}

fn ingest_once(
    state: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    messages: &[Message],
) -> Result<IngestOutcome, EngineError> {
    let session = state.stored_session(sessions, tenant, session_id)?;
    let stored = already_stored(session, messages);
    let mut previous: Option<&Message> = stored.checked_sub(1).and_then(|last| messages.get(last));
    let mut fresh = Vec::new();
    let mut duplicates = stored;
    for message in messages.get(stored..).unwrap_or_default() {
        if previous.is_some_and(|before| same_resent(before, message)) {
            duplicates += 1;
            continue;
        }
        previous = Some(message);
        fresh.push(message.clone());
    }
    let ingested = fresh.len();
    if !fresh.is_empty() {
        let entries = chain(session, session.leaf_id().map(str::to_owned), fresh, false);
        sessions.append(tenant, session_id, &entries)?;
    }
    Ok(IngestOutcome {
        created: false,
        ingested,
        duplicates,
    })
}

/// How many of `messages`' first ones the session's active path already ends with: the longest
/// such run, hidden entries (skald's own tool rounds) and records between messages skipped.
fn already_stored(session: &Session, messages: &[Message]) -> usize {
    let path = session.path_to(None);
    let mut tail: Vec<&Message> = path
        .iter()
        .rev()
        .filter(|entry| !is_hidden(entry))
        .filter_map(|entry| entry.kind.as_message())
        .take(messages.len())
        .collect();
    tail.reverse();
    (1..=tail.len())
        .rev()
        .find(|&run| {
            let ends = tail.get(tail.len() - run..).unwrap_or_default();
            ends.iter()
                .zip(messages)
                .all(|(stored, sent)| same_resent(stored, sent))
        })
        .unwrap_or(0)
}

/// Whether `sent` says what `stored` said: the same role and content (a re-send of it).
fn same_resent(stored: &Message, sent: &Message) -> bool {
    stored.role == sent.role && stored.content == sent.content
}

/// How often a write that lost a race with another writer is decided again.
const WRITE_ATTEMPTS: usize = 5;

/// Runs `attempt` — a decision made on the session as read, and the append it makes — again
/// when the append collided with entries another writer stored in between. Entry ids are
/// derived from the session as read, so two writers that read the same session (two servers
/// over one shared store, or a retry on one while the first attempt is still running on
/// another) make the same ids, and the store refuses the second append whole; decided again on
/// the session read anew, the same request finds its messages (or its key) stored.
fn decide_again<T>(mut attempt: impl FnMut() -> Result<T, EngineError>) -> Result<T, EngineError> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        match attempt() {
            Err(EngineError::Session(SessionError::DuplicateEntryId { .. }))
                if attempts < WRITE_ATTEMPTS => {}
            outcome => return outcome,
        }
    }
}

/// `customType` of the entry that records a committed turn's advancement key (see
/// [`commit_turn`]).
pub const TURN_COMMIT_CUSTOM_TYPE: &str = "skald.turn_commit";

/// The longest advancement key accepted, in bytes.
pub const MAX_ADVANCEMENT_KEY_LEN: usize = 512;

/// Whether [`Engine::commit_turn`](crate::Engine::commit_turn) wrote the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitStatus {
    /// The turn's messages and its key were stored, in one write.
    Committed,
    /// A turn with this key was committed before: nothing was written.
    Duplicate,
}

/// Where the host's transcript put a committed turn (OpenClaw's admission and terminal
/// anchors), so that a host that rewinds — a retried or edited message continuing from an
/// earlier point — continues skald's session from the same point.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnAnchors {
    /// The host's entry the turn's first message follows (`admission.effectiveParentId`).
    pub parent_entry: Option<String>,
    /// The host's entry of the turn's last message (`terminal.entryId`).
    pub terminal_entry: Option<String>,
}

/// Where [`Engine::commit_turn`](crate::Engine::commit_turn) attached the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitPlacement {
    /// After the session's leaf: the host continued where the last commit ended (or named no
    /// anchor).
    Continued,
    /// After an earlier committed turn, on a new branch: the host rewound to it. The turns
    /// after it stay in the session, off the active path.
    Branched,
    /// After the leaf, although the host continued from an entry skald cannot place (inside a
    /// turn, or from before skald held the session).
    UnknownParent,
    /// Nothing was written (a duplicate).
    None,
}

/// What [`Engine::commit_turn`](crate::Engine::commit_turn) did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CommitOutcome {
    /// Whether the turn was stored now or had been before.
    pub status: CommitStatus,
    /// The session did not exist and was created.
    pub created: bool,
    /// Messages stored by this call (0 for a duplicate).
    pub committed: usize,
    /// Where the turn went.
    pub placement: CommitPlacement,
}

/// OpenClaw's `commitTurn`: the turn's `messages` appended under the leaf together with an entry
/// recording `advancement_key`, in one atomic write; a key already recorded anywhere in the
/// session (any branch) makes the call a [`CommitStatus::Duplicate`] that writes nothing — a host
/// that retries a commit after a crash, or after skald restarted, finds its turn stored once.
/// The key is checked first: 1 to [`MAX_ADVANCEMENT_KEY_LEN`] bytes, no control characters.
///
/// The turn goes after the session's leaf, unless `anchors` say the host continued from the end
/// of an earlier committed turn: then it starts a branch there ([`CommitPlacement::Branched`]).
#[allow(clippy::too_many_arguments)]
pub fn commit_turn(
    state: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    advancement_key: &str,
    anchors: &TurnAnchors,
    messages: Vec<Message>,
    source_format: &str,
) -> Result<CommitOutcome, EngineError> {
    // The turn's answer is the answer to the request skald assembled last (a host such as
    // OpenClaw commits its turns instead of sending them back through assemble).
    let mut messages = messages;
    attach_pending_assemble(&mut state.pending_assemble, &mut messages);
    // Another server sharing the store may have committed the same turn a moment before: the
    // same key is then a duplicate, and another turn goes after the one that won.
    decide_again(|| {
        commit_turn_once(
            state,
            sessions,
            tenant,
            session_id,
            advancement_key,
            anchors,
            messages.clone(),
            source_format,
        )
    })
}

#[allow(clippy::too_many_arguments)]
fn commit_turn_once(
    state: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    advancement_key: &str,
    anchors: &TurnAnchors,
    messages: Vec<Message>,
    source_format: &str,
) -> Result<CommitOutcome, EngineError> {
    check_advancement_key(advancement_key)?;
    let created = create_if_missing(sessions, tenant, session_id, source_format)?;
    let session = state.stored_session(sessions, tenant, session_id)?;
    let committed_before = session.entries().iter().any(|entry| {
        entry
            .kind
            .custom_data(TURN_COMMIT_CUSTOM_TYPE)
            .and_then(|data| data.get("advancementKey"))
            .and_then(Value::as_str)
            == Some(advancement_key)
    });
    if committed_before {
        return Ok(CommitOutcome {
            status: CommitStatus::Duplicate,
            created,
            committed: 0,
            placement: CommitPlacement::None,
        });
    }
    let leaf = session.leaf_id().map(str::to_owned);
    let (parent, placement) = place_turn(session, anchors, leaf);
    let committed = messages.len();
    let mut entries = chain(session, parent, messages, false);
    let parent = entries
        .last()
        .map(|entry| entry.id.clone())
        .or_else(|| session.leaf_id().map(str::to_owned));
    let mut candidate = (session.entries().len() as u32)
        .wrapping_add(entries.len() as u32)
        .wrapping_mul(2_246_822_519);
    let marker_id = loop {
        let id = session.fresh_id(candidate);
        candidate = candidate.wrapping_add(1);
        if entries.iter().all(|entry| entry.id != id) {
            break id;
        }
    };
    entries.push(Entry {
        id: marker_id,
        parent_id: parent,
        timestamp: crate::memory_write::now_iso(),
        kind: EntryKind::Custom {
            custom_type: TURN_COMMIT_CUSTOM_TYPE.to_owned(),
            data: Some(turn_record(advancement_key, committed, anchors)),
        },
        extra: skald_core::message::Extra::new(),
    });
    sessions.append(tenant, session_id, &entries)?;
    Ok(CommitOutcome {
        status: CommitStatus::Committed,
        created,
        committed,
        placement,
    })
}

/// The data of a turn's commit entry: its key, its size and the host's anchors.
fn turn_record(advancement_key: &str, committed: usize, anchors: &TurnAnchors) -> Value {
    let mut record = serde_json::json!({
        "advancementKey": advancement_key,
        "messages": committed,
    });
    if let Some(parent) = &anchors.parent_entry {
        record["hostParentEntryId"] = Value::String(parent.clone());
    }
    if let Some(terminal) = &anchors.terminal_entry {
        record["hostTerminalEntryId"] = Value::String(terminal.clone());
    }
    record
}

/// Where a turn continues: after the commit entry of the turn the host's transcript ended at
/// the turn's parent entry, when skald knows it, else after the leaf.
fn place_turn(
    session: &Session,
    anchors: &TurnAnchors,
    leaf: Option<String>,
) -> (Option<String>, CommitPlacement) {
    let Some(host_parent) = &anchors.parent_entry else {
        return (leaf, CommitPlacement::Continued);
    };
    let commits: Vec<(&str, Option<&str>)> = session
        .entries()
        .iter()
        .filter_map(|entry| {
            let data = entry.kind.custom_data(TURN_COMMIT_CUSTOM_TYPE)?;
            Some((
                entry.id.as_str(),
                data.get("hostTerminalEntryId").and_then(Value::as_str),
            ))
        })
        .collect();
    match commits
        .iter()
        .rev()
        .find(|(_, terminal)| *terminal == Some(host_parent.as_str()))
    {
        Some((commit_entry, _)) if leaf.as_deref() == Some(*commit_entry) => {
            (leaf, CommitPlacement::Continued)
        }
        Some((commit_entry, _)) => (Some((*commit_entry).to_owned()), CommitPlacement::Branched),
        // The session's first turn, or a host that names a parent before its first commit:
        // nothing to place it against.
        None if commits.is_empty() => (leaf, CommitPlacement::Continued),
        None => (leaf, CommitPlacement::UnknownParent),
    }
}

/// Whether the session is fed by [`commit_turn`]: it holds a turn committed by a host. Such a
/// session is the source of the host's context; the host's own copy of the conversation (a
/// projection that may rewrite tool-call ids) is not synced into it.
pub fn fed_by_commits(session: &Session) -> bool {
    session
        .entries()
        .iter()
        .any(|entry| entry.kind.custom_data(TURN_COMMIT_CUSTOM_TYPE).is_some())
}

/// Refuses an advancement key that is empty, too long or holds control characters.
fn check_advancement_key(key: &str) -> Result<(), EngineError> {
    let reason = if key.is_empty() {
        Some("it must not be empty".to_owned())
    } else if key.len() > MAX_ADVANCEMENT_KEY_LEN {
        Some(format!(
            "it has {} bytes, at most {MAX_ADVANCEMENT_KEY_LEN} are accepted",
            key.len()
        ))
    } else if key.chars().any(char::is_control) {
        Some("it must not hold control characters".to_owned())
    } else {
        None
    };
    match reason {
        Some(reason) => Err(EngineError::InvalidInput {
            field: "advancementKey",
            reason,
        }),
        None => Ok(()),
    }
}

/// Whether an entry holds a message the client never saw.
pub fn is_hidden(entry: &Entry) -> bool {
    entry
        .extra
        .get(HIDDEN_ENTRY_KEY)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Creates the session unless it exists; whether it was created.
fn create_if_missing(
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    source_format: &str,
) -> Result<bool, EngineError> {
    match sessions.get(tenant, session_id) {
        Ok(_) => Ok(false),
        Err(SessionError::NotFound { .. }) => {
            match create(sessions, tenant, session_id, source_format) {
                Ok(()) => Ok(true),
                // Another server sharing the store created it in between.
                Err(EngineError::Session(SessionError::AlreadyExists { .. })) => Ok(false),
                Err(error) => Err(error),
            }
        }
        Err(error) => Err(error.into()),
    }
}

fn create(
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    source_format: &str,
) -> Result<(), EngineError> {
    let header = SessionHeader {
        id: session_id.to_string(),
        timestamp: Some(crate::memory_write::now_iso()),
        ..SessionHeader::default()
    };
    match sessions.create(tenant, NewSession::new(header, source_format)) {
        Ok(_) => Ok(()),
        // Another request of the same session created it first.
        Err(SessionError::AlreadyExists { .. }) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Entries for `messages`, each the child of the one before, the first under `parent`, with ids
/// new to the session.
fn chain(
    session: &Session,
    parent: Option<String>,
    messages: Vec<Message>,
    hidden: bool,
) -> Vec<Entry> {
    let timestamp = crate::memory_write::now_iso();
    let mut taken: HashSet<String> = HashSet::new();
    let mut parent = parent;
    let mut candidate = (session.entries().len() as u32)
        .wrapping_mul(2_654_435_761)
        .wrapping_add(0x5bd1_e995);
    let mut entries = Vec::with_capacity(messages.len());
    for message in messages {
        let id = loop {
            let id = session.fresh_id(candidate);
            candidate = candidate
                .wrapping_mul(1_664_525)
                .wrapping_add(1_013_904_223);
            if taken.insert(id.clone()) {
                break id;
            }
        };
        let mut extra = skald_core::message::Extra::new();
        if hidden {
            extra.insert(HIDDEN_ENTRY_KEY.to_owned(), Value::Bool(true));
        }
        entries.push(Entry {
            id: id.clone(),
            parent_id: parent.take(),
            timestamp: timestamp.clone(),
            kind: EntryKind::Message(message),
            extra,
        });
        parent = Some(id);
    }
    entries
}

/// The host's prompt: the system messages a conversation opens with, sent again with every
/// request and never part of the session's history. A system message later in the conversation
/// (a harness's reminder) is history like any other message and is stored.
pub fn prompt_len(messages: &[Message]) -> usize {
    messages
        .iter()
        .take_while(|message| is_prompt(message))
        .count()
}

fn is_prompt(message: &Message) -> bool {
    message.role == Role::System
}

/// The text of the host's prompt (`messages[..prompt_len(messages)]`), its messages' texts
/// joined by blank lines; `None` when it says nothing. What a turn's calls take as the host's
/// system prompt (counted in each request's size, given to the memory archive).
pub fn prompt_text(messages: &[Message]) -> Option<String> {
    let text = messages
        .get(..prompt_len(messages))
        .unwrap_or_default()
        .iter()
        .map(Message::plain_text)
        .filter(|text| !text.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    (!text.is_empty()).then_some(text)
}

/// What skald remembered for the answers among `messages` (by index) the client sends back
/// without it ([`SessionState::remember_answer_usage`]).
fn relayed_usage<'m>(
    state: &SessionState,
    messages: impl Iterator<Item = &'m Message>,
) -> Vec<(usize, RelayedAnswer)> {
    messages
        .enumerate()
        .filter(|(_, message)| {
            message.role == Role::Assistant
                && (message.meta.usage.is_none() || message.meta.assemble.is_none())
        })
        .filter_map(|(index, message)| {
            state
                .usage_of_answer(message)
                .map(|relayed| (index, relayed))
        })
        .collect()
}

/// `message` (the client's `index`-th) with the usage, model and assemble record skald
/// remembered for it, where the client sent it back without them.
fn with_relayed_usage(
    message: &Message,
    index: usize,
    relayed: &[(usize, RelayedAnswer)],
) -> Message {
    let mut message = message.clone();
    if let Some((_, relayed)) = relayed.iter().find(|(at, _)| *at == index) {
        if message.meta.usage.is_none() {
            message.meta.usage = relayed.usage;
        }
        if message.meta.model.is_none() {
            message.meta.model = relayed.model.clone();
        }
        if message.meta.assemble.is_none() {
            message.meta.assemble = relayed.assemble.clone().map(Box::new);
        }
    }
    message
}

/// Stores the pending assemble record (what the pipeline did on the latest assembled request)
/// on the first new answer without one: the answer to that request, for a host that sends its
/// answers back through the engine API's assemble, ingests them or commits its turns. Taken
/// when used.
fn attach_pending_assemble(pending: &mut Option<AssembleRecord>, new: &mut [Message]) {
    if pending.is_none() {
        return;
    }
    if let Some(answer) = new
        .iter_mut()
        .find(|message| message.role == Role::Assistant && message.meta.assemble.is_none())
    {
        answer.meta.assemble = pending.take().map(Box::new);
    }
}

/// Whether a stored message and a client's are the same turn. Tool results match by call id (skald
/// may have truncated the stored one); everything else by role and content, ignoring how the
/// format spelled it (a string or blocks, extra fields, timestamps).
fn same_message(stored: &Message, client: &Message) -> bool {
    same_role(&stored.role, &client.role) && content_key(stored) == content_key(client)
}

fn same_role(a: &Role, b: &Role) -> bool {
    a == b || (is_user_side(a) && is_user_side(b))
}

/// Anthropic carries tool results in user messages, OpenAI in tool messages: one side of the
/// conversation either way.
fn is_user_side(role: &Role) -> bool {
    matches!(role, Role::User | Role::ToolResult)
}
