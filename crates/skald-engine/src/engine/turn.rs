//! [`Turn`]: a caller's hold on one session for a whole model request it drives itself (the
//! proxy: it forwards raw JSON, streams, and runs skald's tools between upstream calls). The
//! turn holds the session's state lock from the request's sync to its last record, and its
//! methods are the writes such a request makes: the client's conversation brought in
//! ([`Turn::sync`]), skald's own tool rounds ([`Turn::record_hidden`]), the answer a
//! history-less client continues from ([`Turn::record_answer`]), and the tool statistics.
//!
//! Bringing a client's conversation in is cheap on every request: the engine's
//! `sync_conversation` reads the session back and matches every message; the turn remembers
//! what it synced last ([`SyncMark`]: a full-content fingerprint per message and the session's
//! state after) so that a request that repeats or extends that conversation, with the session
//! unchanged since, costs one row read and an append of its new tail — nothing is read back or
//! written for a request that brings nothing new.

use std::ops::{Deref, DerefMut};

use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::usage::ToolCallReport;
use skald_core::message::{Block, ImageSource, Message};
use skald_store::memories::MemoryError;
use skald_store::sessions::SessionStore;
use xxhash_rust::xxh3::Xxh3;

use super::row_memo::RowScope;
use super::{Engine, OwnedSlotGuard};
use crate::ingest;
use crate::memory::{MemoryIdentity, ToolMemoryUpdate};
use crate::{EngineError, SessionState, SyncMark};

/// What a sync did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synced {
    /// Leading request messages that were already in the session (the system prompt included):
    /// `messages[matched..]` is what the request brought.
    pub matched: usize,
    /// Client messages appended.
    pub appended: usize,
    /// Whether the fast path was enough.
    pub fast: bool,
}

/// A client's request brought into its session ([`Turn::bring_in`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BroughtIn {
    /// The whole conversation as the client means it (with what a `previous_response_id` stood
    /// for).
    pub messages: Vec<Message>,
    /// What the sync did.
    pub synced: Synced,
}

/// Why a client's request could not be brought into its session; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum BringInError {
    /// The request continues from an answer the session does not hold.
    #[error("previous_response_id {response_id:?} is not an answer skald recorded in the session")]
    UnknownResponse {
        /// The id the client sent.
        response_id: String,
    },
    /// Reading or writing the session failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// One request's hold on its session (see the module docs). Dereferences to the session's
/// state, which a [`TurnDriver`](crate::TurnDriver) prepares calls with.
pub struct Turn {
    engine: Engine,
    tenant: Tenant,
    session: SessionId,
    /// The request reads the session's row once (declared before `state`: fields drop in order,
    /// so the scope closes while the state lock is still held).
    _row: RowScope,
    state: OwnedSlotGuard,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn")
            .field("tenant", &self.tenant)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Deref for Turn {
    type Target = SessionState;
    fn deref(&self) -> &SessionState {
        &self.state
    }
}

impl DerefMut for Turn {
    fn deref_mut(&mut self) -> &mut SessionState {
        &mut self.state
    }
}

/// Another request held the session for the whole wait of [`Engine::try_begin_turn`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "session \"{}\" is busy with another request (waited {waited:?} for it to finish)",
    session.as_str()
)]
pub struct SessionBusy {
    /// The session that is held.
    pub session: SessionId,
    /// How long the request waited.
    pub waited: std::time::Duration,
}

impl Engine {
    /// Waits for the session's state (calls of the session before this one finish first) and
    /// holds it for a request the caller drives.
    pub async fn begin_turn(&self, tenant: &Tenant, session: &SessionId) -> Turn {
        let state = self.slot(tenant, session).lock_owned().await;
        self.turn(tenant, session, state)
    }

    /// [`Engine::begin_turn`], waiting at most `wait` for the request holding the session: a
    /// call that hangs upstream must not hold every later request of its session for as long
    /// as the upstream's own timeout.
    pub async fn try_begin_turn(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        wait: std::time::Duration,
    ) -> Result<Turn, SessionBusy> {
        let slot = self.slot(tenant, session);
        match tokio::time::timeout(wait, slot.lock_owned()).await {
            Ok(state) => Ok(self.turn(tenant, session, state)),
            Err(_) => Err(SessionBusy {
                session: session.clone(),
                waited: wait,
            }),
        }
    }

    fn turn(&self, tenant: &Tenant, session: &SessionId, state: OwnedSlotGuard) -> Turn {
        Turn {
            engine: self.clone(),
            tenant: tenant.clone(),
            session: session.clone(),
            _row: self.row_scope(tenant, session),
            state,
        }
    }
}

impl Turn {
    /// Brings the request's `messages` into the session (see the module docs).
    pub fn sync(
        &mut self,
        messages: &[Message],
        source_format: &str,
    ) -> Result<Synced, EngineError> {
        let sessions = self.engine.sessions();
        sync(
            &mut self.state,
            sessions,
            &self.tenant,
            &self.session,
            messages,
            source_format,
        )
    }

    /// Brings a client's request into the session: `messages` as the client sent them (its
    /// system prompt first), continued from the answer recorded under `previous_response_id`
    /// when the client sends only what is new (a Responses client with `store` on: the
    /// conversation up to that answer goes between the client's prompt and its new messages),
    /// synced ([`Turn::sync`]), and the results of the client's own tool calls among what it
    /// brought added to `identity`'s tool statistics (memory on). Returns the whole conversation
    /// as the client means it.
    pub fn bring_in(
        &mut self,
        messages: Vec<Message>,
        previous_response_id: Option<&str>,
        source_format: &str,
        identity: Option<&MemoryIdentity>,
    ) -> Result<BroughtIn, BringInError> {
        let messages = match previous_response_id {
            None => messages,
            Some(previous) => {
                let earlier = self
                    .conversation_before_response(previous)?
                    .ok_or_else(|| BringInError::UnknownResponse {
                        response_id: previous.to_owned(),
                    })?;
                let prompt = ingest::prompt_len(&messages);
                let mut whole: Vec<Message> = messages.get(..prompt).unwrap_or_default().to_vec();
                whole.extend(earlier);
                whole.extend(messages.into_iter().skip(prompt));
                whole
            }
        };
        let synced = self.sync(&messages, source_format)?;
        if let Some(identity) = identity {
            self.record_client_tool_results(identity, &messages, synced);
        }
        Ok(BroughtIn { messages, synced })
    }

    /// The client's conversation up to and including the answer recorded under `response_id`
    /// ([`Turn::record_answer`]); `None` when the session holds no such answer.
    pub fn conversation_before_response(
        &mut self,
        response_id: &str,
    ) -> Result<Option<Vec<Message>>, EngineError> {
        ingest::conversation_before_response(
            &mut self.state,
            self.engine.sessions(),
            &self.tenant,
            &self.session,
            response_id,
        )
    }

    /// Records a round of skald's own tool calls and their results as hidden entries (the
    /// model's next call sees them, the client's next sync skips them).
    pub fn record_hidden(&mut self, messages: Vec<Message>) -> Result<(), EngineError> {
        let sessions = self.engine.sessions();
        ingest::append_hidden(
            &mut self.state,
            sessions,
            &self.tenant,
            &self.session,
            messages,
        )?;
        note_write(&mut self.state, sessions, &self.tenant, &self.session)
    }

    /// Records the answer a client got under its response id, for a client that keeps no
    /// history of its own and continues from the id.
    pub fn record_answer(
        &mut self,
        message: Message,
        response_id: &str,
    ) -> Result<(), EngineError> {
        ingest::append_answer(
            &mut self.state,
            self.engine.sessions(),
            &self.tenant,
            &self.session,
            message,
            response_id,
        )
    }

    /// after_turn for a client that runs its own tools: the results of its tool calls arrive
    /// with its next request (`messages[synced.matched..]`) and go to `identity`'s tool
    /// statistics, the skills they used to its skill memories. A failure to record them is
    /// logged, never the request's.
    pub fn record_client_tool_results(
        &self,
        identity: &MemoryIdentity,
        messages: &[Message],
        synced: Synced,
    ) {
        let reports = crate::memory::tool_reports_in(messages, synced.matched);
        self.record_tool_statistics(identity, &reports);
        let uses = skald_core::memory::skill_use::skill_uses_in(messages, synced.matched);
        if let Err(error) = crate::memory::record_skill_uses(
            self.engine.memories(),
            &self.tenant,
            identity.agent(),
            &uses,
        ) {
            tracing::warn!(%error, "recording skill memories failed");
        }
    }

    /// Adds `reports` to `identity`'s tool statistics; a failure is logged, never the request's.
    pub(crate) fn record_tool_statistics(
        &self,
        identity: &MemoryIdentity,
        reports: &[ToolCallReport],
    ) {
        if reports.is_empty() {
            return;
        }
        if let Err(error) = self.record_tool_reports(identity.agent(), reports) {
            tracing::warn!(%error, "recording tool statistics failed");
        }
    }

    /// Adds the turn's tool calls to `agent`'s tool statistics.
    pub fn record_tool_reports(
        &self,
        agent: &str,
        reports: &[ToolCallReport],
    ) -> Result<ToolMemoryUpdate, MemoryError> {
        crate::memory::record_tool_reports(self.engine.memories(), &self.tenant, agent, reports)
    }
}

/// Brings `messages` into the session.
fn sync(
    state: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    messages: &[Message],
    source_format: &str,
) -> Result<Synced, EngineError> {
    let fingerprints: Vec<u128> = messages.iter().map(fingerprint).collect();
    if let Some(mark) = state.sync_mark() {
        if fingerprints.starts_with(&mark.fingerprints) {
            let info = sessions.get(tenant, session_id)?;
            if info.entry_count == mark.entry_count && info.leaf_id == mark.leaf_id {
                let matched = mark.fingerprints.len();
                let tail = messages.get(matched..).unwrap_or_default();
                let appended =
                    ingest::append_synced_tail(state, sessions, tenant, session_id, &info, tail)?;
                if !tail.is_empty() {
                    remember(state, sessions, tenant, session_id, fingerprints)?;
                }
                return Ok(Synced {
                    matched,
                    appended,
                    fast: true,
                });
            }
        }
    }
    let outcome =
        ingest::sync_conversation(state, sessions, tenant, session_id, messages, source_format)?;
    remember(state, sessions, tenant, session_id, fingerprints)?;
    Ok(Synced {
        matched: leading_messages(messages, outcome.matched),
        appended: outcome.appended,
        fast: false,
    })
}

/// How many of `messages` lead up to and include the `matched`-th message after the host's
/// system prompt (the engine's sync counts only the conversation; [`Synced::matched`] indexes the
/// request's messages).
fn leading_messages(messages: &[Message], matched: usize) -> usize {
    if matched == 0 {
        return 0;
    }
    (ingest::prompt_len(messages) + matched).min(messages.len())
}

/// Notes the session's state after a write of the turn's own (hidden entries), so the next
/// request's sync still takes the fast path.
pub(crate) fn note_write(
    state: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
) -> Result<(), EngineError> {
    let Some(fingerprints) = state.sync_mark().map(|mark| mark.fingerprints.clone()) else {
        return Ok(());
    };
    remember(state, sessions, tenant, session_id, fingerprints)
}

fn remember(
    state: &mut SessionState,
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    fingerprints: Vec<u128>,
) -> Result<(), EngineError> {
    let info = sessions.get(tenant, session_id)?;
    state.set_sync_mark(Some(SyncMark {
        fingerprints,
        entry_count: info.entry_count,
        leaf_id: info.leaf_id,
    }));
    Ok(())
}

/// A hash of everything a message says (role, every block's full content), unlike the engine's
/// cheap identities that read only lengths and edges: an edit in the middle of a message must
/// not go unnoticed.
fn fingerprint(message: &Message) -> u128 {
    let mut hasher = Xxh3::new();
    hasher.update(message.role.name().as_bytes());
    blocks(&mut hasher, &message.content);
    hasher.digest128()
}

fn blocks(hasher: &mut Xxh3, content: &[Block]) {
    for block in content {
        match block {
            Block::Text(text) => field(hasher, b't', text.text.as_bytes()),
            Block::Thinking(thinking) => {
                field(hasher, b'k', thinking.thinking.as_bytes());
                field(
                    hasher,
                    b's',
                    thinking.signature.as_deref().unwrap_or_default().as_bytes(),
                );
            }
            Block::ToolCall(call) => {
                field(hasher, b'c', call.id.as_bytes());
                field(hasher, b'n', call.name.as_bytes());
                json_field(hasher, b'a', &call.arguments);
            }
            Block::ToolResult(result) => {
                field(hasher, b'r', result.call_id.as_bytes());
                field(hasher, b'e', &[u8::from(result.failed())]);
                blocks(hasher, &result.content);
                hasher.update(b"/r");
            }
            // An image's own bytes, not a formatted copy of them: a screenshot's base64 can be
            // megabytes, hashed on every request of the conversation.
            Block::Image(image) => match &image.source {
                ImageSource::Base64 { media_type, data } => {
                    field(hasher, b'i', media_type.as_bytes());
                    field(hasher, b'b', data.as_bytes());
                }
                ImageSource::Url { url } => field(hasher, b'u', url.as_bytes()),
            },
            Block::Opaque(value) => json_field(hasher, b'o', value),
        }
    }
}

/// A tagged, length-prefixed field: no two different block sequences hash the same input.
fn field(hasher: &mut Xxh3, tag: u8, bytes: &[u8]) {
    hasher.update(&[tag]);
    hasher.update(&(bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

/// A tagged JSON value, written into the hash as it is serialised (no copy of it as a string),
/// then its length: a JSON value ends where its syntax says, so the fields still split one way.
fn json_field(hasher: &mut Xxh3, tag: u8, value: &serde_json::Value) {
    hasher.update(&[tag]);
    let mut writer = HashWriter { hasher, written: 0 };
    // Writing a `Value` into a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut writer, value);
    let written = writer.written;
    hasher.update(&written.to_le_bytes());
}

/// Bytes written go into the hash, counted.
struct HashWriter<'a> {
    hasher: &'a mut Xxh3,
    written: u64,
}

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(bytes);
        self.written += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use skald_core::message::Role;
    use skald_store::SqliteSessionStore;

    use super::*;

    /// A tenant name of the tests, parsed (it is well formed).
    fn tenant_named(name: &str) -> skald_core::ids::Tenant {
        skald_core::ids::Tenant::parse(name).unwrap()
    }

    /// A session id of the tests, parsed (it is well formed).
    fn session_named(id: &str) -> skald_core::ids::SessionId {
        skald_core::ids::SessionId::parse(id).unwrap()
    }

    fn say(role: Role, text: &str) -> Message {
        Message::text(role, text)
    }

    fn image(source: ImageSource) -> Message {
        Message::new(
            Role::User,
            vec![Block::Image(skald_core::message::ImageBlock {
                source,
                extra: skald_core::message::Extra::new(),
            })],
        )
    }

    fn base64(media_type: &str, data: &str) -> ImageSource {
        ImageSource::Base64 {
            media_type: media_type.to_owned(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn fingerprints_tell_images_and_json_blocks_apart_by_every_byte() {
        let data = "iVBORw0KGgo".repeat(10_000);
        let mut edited = data.clone();
        edited.replace_range(55_000..55_001, "Q");
        let distinct = [
            image(base64("image/png", &data)),
            image(base64("image/png", &edited)),
            image(base64("image/jpeg", &data)),
            image(ImageSource::Url {
                url: "https://example.com/a.png".to_owned(),
            }),
            image(ImageSource::Url {
                url: "https://example.com/b.png".to_owned(),
            }),
            // The same bytes split between the two fields another way.
            image(base64("image/pngi", &data[1..])),
            Message::new(
                Role::User,
                vec![Block::Opaque(
                    serde_json::json!({"type": "document", "n": 1}),
                )],
            ),
            Message::new(
                Role::User,
                vec![Block::Opaque(
                    serde_json::json!({"type": "document", "n": 2}),
                )],
            ),
        ];
        let prints: std::collections::HashSet<u128> = distinct.iter().map(fingerprint).collect();
        assert_eq!(prints.len(), distinct.len());
        // And the same content, the same print.
        assert_eq!(
            fingerprint(&image(base64("image/png", &data))),
            fingerprint(&distinct[0])
        );
    }

    #[test]
    fn matched_indexes_the_requests_messages_system_prompt_included() {
        let store = SqliteSessionStore::in_memory().unwrap();
        let mut conversation = vec![
            say(Role::System, "be brief"),
            say(Role::User, "hello there"),
            say(Role::Assistant, "hi"),
        ];
        sync(
            &mut SessionState::default(),
            &store,
            &tenant_named("t"),
            &session_named("s"),
            &conversation,
            "openai",
        )
        .unwrap();
        conversation.push(say(Role::User, "next"));
        // A state without a mark: the engine's sync, which counts the conversation only.
        let mut state = SessionState::default();
        let slow = sync(
            &mut state,
            &store,
            &tenant_named("t"),
            &session_named("s"),
            &conversation,
            "openai",
        )
        .unwrap();
        assert_eq!((slow.fast, slow.matched, slow.appended), (false, 3, 1));
        conversation.push(say(Role::Assistant, "ok"));
        conversation.push(say(Role::User, "ok"));
        let fast = sync(
            &mut state,
            &store,
            &tenant_named("t"),
            &session_named("s"),
            &conversation,
            "openai",
        )
        .unwrap();
        assert_eq!((fast.fast, fast.matched, fast.appended), (true, 4, 2));
        assert_eq!(
            store
                .get(&tenant_named("t"), &session_named("s"))
                .unwrap()
                .message_count,
            5
        );
    }

    #[test]
    fn a_repeated_or_extended_conversation_takes_the_fast_path_and_an_edit_does_not() {
        let store = SqliteSessionStore::in_memory().unwrap();
        let mut state = SessionState::default();
        let mut conversation = vec![say(Role::User, "hello there"), say(Role::Assistant, "hi")];
        let first = sync(
            &mut state,
            &store,
            &tenant_named("t"),
            &session_named("s"),
            &conversation,
            "openai",
        )
        .unwrap();
        assert!(!first.fast);
        let before = store.get(&tenant_named("t"), &session_named("s")).unwrap();

        let again = sync(
            &mut state,
            &store,
            &tenant_named("t"),
            &session_named("s"),
            &conversation,
            "openai",
        )
        .unwrap();
        assert!(again.fast);
        assert_eq!(again.appended, 0);
        assert_eq!(
            store
                .get(&tenant_named("t"), &session_named("s"))
                .unwrap()
                .updated_at_ms,
            before.updated_at_ms
        );

        conversation.push(say(Role::User, "next"));
        let extended = sync(
            &mut state,
            &store,
            &tenant_named("t"),
            &session_named("s"),
            &conversation,
            "openai",
        )
        .unwrap();
        assert_eq!(
            (extended.fast, extended.matched, extended.appended),
            (true, 2, 1)
        );
        assert_eq!(
            store
                .get(&tenant_named("t"), &session_named("s"))
                .unwrap()
                .message_count,
            3
        );

        // The same length and edges, another middle: not the same message.
        conversation[0] = say(Role::User, "hello thEre");
        let edited = sync(
            &mut state,
            &store,
            &tenant_named("t"),
            &session_named("s"),
            &conversation,
            "openai",
        )
        .unwrap();
        assert!(!edited.fast);
        assert_eq!(edited.matched, 0);
    }
}
