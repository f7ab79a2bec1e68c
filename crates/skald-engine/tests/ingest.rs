//! Getting hosts' and clients' messages into stored sessions: OpenClaw's one-at-a-time ingest and
//! the proxy's whole-conversation sync, with the cases a real client produces (retries, edits,
//! regenerates, skald's own truncations and hidden tool calls).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_core::pipeline::policy::Policy;
use skald_core::session::EntryKind;
use skald_core::session::{Entry, Session};
use skald_engine::{Engine, EngineConfig, IngestOutcome, Stores, SyncOutcome};
use skald_store::SessionStore;
use skald_store::sessions::{
    BranchRewrite, CompactionCheckpoint, NewSession, SessionError, SessionInfo, SessionSwitches,
};
use tokio_util::task::TaskTracker;

fn call(id: &str) -> Message {
    Message::new(
        Role::Assistant,
        vec![Block::ToolCall(ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments: serde_json::json!({"command": "ls"}),
            arguments_text: None,
            extra: Extra::new(),
        })],
    )
}

fn result(role: Role, id: &str, text: &str) -> Message {
    Message::new(
        role,
        vec![Block::ToolResult(ToolResult {
            call_id: id.into(),
            tool_name: None,
            content: vec![Block::text(text)].into(),
            content_form: ContentForm::Text,
            is_error: None,
            details: None,
            extra: Extra::new(),
        })],
    )
}

fn texts(sessions: &dyn SessionStore, session: &str) -> Vec<String> {
    sessions
        .context(&tenant_named("t"), &session_named(session), None)
        .unwrap()
        .iter()
        .map(|message| {
            let text = message.plain_text();
            if text.is_empty() {
                format!("{:?}", message.role)
            } else {
                text
            }
        })
        .collect()
}

/// An engine over `sessions` (refs and memories in memory). A new engine holds nothing of a
/// session: what it does starts from a fresh read of the store, as a restarted server's or
/// another server's over the same store.
fn engine(sessions: &Arc<dyn SessionStore>) -> Engine {
    let stores = Stores {
        sessions: sessions.clone(),
        ..Stores::in_memory().unwrap()
    };
    let config = EngineConfig::new(Policy::preset("none").unwrap());
    Engine::new(stores, config, TaskTracker::new()).unwrap()
}

/// Syncs `messages` into session "s" of tenant "t" as an OpenAI client's, from a fresh read of
/// the session (no state held from an earlier call).
async fn sync(sessions: &Arc<dyn SessionStore>, messages: &[Message]) -> SyncOutcome {
    sync_as(sessions, messages, "openai").await
}

/// [`sync`] as a client of `format`.
async fn sync_as(
    sessions: &Arc<dyn SessionStore>,
    messages: &[Message],
    format: &str,
) -> SyncOutcome {
    engine(sessions)
        .sync(&tenant_named("t"), &session_named("s"), messages, format)
        .await
        .unwrap()
}

/// Records skald's own tool round (`messages`) in session "s" of tenant "t" as the proxy does:
/// hidden entries the model sees and the client's next sync skips.
async fn record_hidden(sessions: &Arc<dyn SessionStore>, messages: Vec<Message>) {
    let skald = engine(sessions);
    let mut turn = skald
        .begin_turn(&tenant_named("t"), &session_named("s"))
        .await;
    turn.record_hidden(messages).unwrap();
}

fn conversation() -> Vec<Message> {
    vec![
        Message::text(Role::System, "be brief"),
        Message::text(Role::User, "what is here?"),
        call("c1"),
        result(Role::ToolResult, "c1", "a.txt\nb.txt"),
        Message::text(Role::Assistant, "two files"),
    ]
}

#[tokio::test]
async fn a_conversation_that_grows_appends_only_its_new_messages() {
    let sessions = skald_store::test_stores::session_store();
    let mut messages = conversation();
    let first = sync(&sessions, &messages).await;
    assert!(first.created);
    assert_eq!((first.matched, first.appended, first.forked), (0, 4, false));
    messages.push(Message::text(Role::User, "delete b.txt"));
    let second = sync(&sessions, &messages).await;
    assert_eq!(
        (second.created, second.matched, second.appended),
        (false, 4, 1)
    );
    assert_eq!(
        sessions
            .entries(&tenant_named("t"), &session_named("s"))
            .unwrap()
            .len(),
        5
    );
}

#[tokio::test]
async fn a_retry_of_the_same_request_writes_nothing() {
    let sessions = skald_store::test_stores::session_store();
    let messages = conversation();
    sync(&sessions, &messages).await;
    let before = sessions
        .get(&tenant_named("t"), &session_named("s"))
        .unwrap();
    let again = sync(&sessions, &messages).await;
    assert_eq!((again.matched, again.appended, again.forked), (4, 0, false));
    assert_eq!(
        sessions
            .get(&tenant_named("t"), &session_named("s"))
            .unwrap(),
        before
    );
}

#[tokio::test]
async fn a_tool_result_skald_truncated_still_matches_the_clients_original() {
    let sessions = skald_store::test_stores::session_store();
    let mut messages = conversation();
    sync(&sessions, &messages).await;
    // Overflow recovery rewrote the stored result persistently (a new branch).
    let stored = sessions
        .entries(&tenant_named("t"), &session_named("s"))
        .unwrap();
    let result_entry = stored
        .iter()
        .find(|entry| matches!(&entry.kind, EntryKind::Message(m) if m.role == Role::ToolResult))
        .unwrap();
    let rewrites = BTreeMap::from([(
        result_entry.id.clone(),
        EntryKind::Message(result(Role::ToolResult, "c1", "[truncated: ref …]")),
    )]);
    sessions
        .rewrite_branch(
            &tenant_named("t"),
            &session_named("s"),
            rewrites,
            "test truncation",
        )
        .unwrap();
    messages.push(Message::text(Role::User, "and now?"));
    let outcome = sync(&sessions, &messages).await;
    assert_eq!(
        (outcome.matched, outcome.appended, outcome.forked),
        (4, 1, false)
    );
    let context = sessions
        .context(&tenant_named("t"), &session_named("s"), None)
        .unwrap();
    let kept = context.iter().any(|message| {
        message.content.iter().any(|block| {
            matches!(block, Block::ToolResult(result)
                if matches!(result.content.first(), Some(Block::Text(t)) if t.text.contains("[truncated")))
        })
    });
    assert!(
        kept,
        "the model still sees the truncated result, not a re-sent original"
    );
}

#[tokio::test]
async fn hidden_messages_stay_in_context_but_are_skipped_when_matching() {
    let sessions = skald_store::test_stores::session_store();
    let mut messages = vec![Message::text(Role::User, "what did the log say?")];
    sync(&sessions, &messages).await;
    // The proxy ran skald's fetch tool for the model; the client never saw it.
    record_hidden(
        &sessions,
        vec![
            call("skald-1"),
            result(Role::ToolResult, "skald-1", "line 12: error"),
        ],
    )
    .await;
    messages.push(Message::text(Role::Assistant, "line 12 has the error"));
    messages.push(Message::text(Role::User, "fix it"));
    let outcome = sync(&sessions, &messages).await;
    assert_eq!(
        (outcome.matched, outcome.appended, outcome.forked),
        (1, 2, false)
    );
    let context = sessions
        .context(&tenant_named("t"), &session_named("s"), None)
        .unwrap();
    assert_eq!(
        context.len(),
        5,
        "the hidden call and result are in the model's context"
    );
    assert_eq!(context[1].role, Role::Assistant);
    assert_eq!(context[2].role, Role::ToolResult);
}

#[tokio::test]
async fn an_edited_history_becomes_a_new_branch_and_the_old_one_stays() {
    let sessions = skald_store::test_stores::session_store();
    let mut messages = conversation();
    messages.push(Message::text(Role::User, "delete b.txt"));
    sync(&sessions, &messages).await;
    let old_leaf = sessions
        .get(&tenant_named("t"), &session_named("s"))
        .unwrap()
        .leaf_id
        .unwrap();
    // The user edited their last message.
    messages.pop();
    messages.push(Message::text(Role::User, "delete a.txt"));
    let outcome = sync(&sessions, &messages).await;
    assert!(outcome.forked);
    assert_eq!((outcome.matched, outcome.appended), (4, 1));
    assert_eq!(texts(&sessions, "s").last().unwrap(), "delete a.txt");
    let old = sessions
        .context(&tenant_named("t"), &session_named("s"), Some(&old_leaf))
        .unwrap();
    assert_eq!(old.last().unwrap().plain_text(), "delete b.txt");
}

#[tokio::test]
async fn a_regenerate_moves_back_to_the_shorter_history_without_writing_messages() {
    let sessions = skald_store::test_stores::session_store();
    let messages = conversation();
    sync(&sessions, &messages).await;
    let entries_before = sessions
        .entries(&tenant_named("t"), &session_named("s"))
        .unwrap()
        .len();
    // The client asks for the last answer again: its history stops before that answer.
    let outcome = sync(&sessions, &messages[..4]).await;
    assert!(outcome.forked);
    assert_eq!((outcome.matched, outcome.appended), (3, 0));
    assert_eq!(
        sessions
            .entries(&tenant_named("t"), &session_named("s"))
            .unwrap()
            .len(),
        entries_before
    );
    assert_eq!(
        sessions
            .context(&tenant_named("t"), &session_named("s"), None)
            .unwrap()
            .len(),
        3
    );
}

#[tokio::test]
async fn anthropic_tool_results_in_user_messages_match_openai_tool_messages() {
    let sessions = skald_store::test_stores::session_store();
    let openai = conversation();
    sync(&sessions, &openai).await;
    let mut anthropic = openai.clone();
    anthropic[3] = result(Role::User, "c1", "a.txt\nb.txt");
    let outcome = sync_as(&sessions, &anthropic, "anthropic").await;
    assert_eq!((outcome.matched, outcome.forked), (4, false));
}

#[tokio::test]
async fn a_message_spelled_differently_is_the_same_message() {
    let sessions = skald_store::test_stores::session_store();
    let as_string = vec![Message::text(Role::User, "hello there")];
    sync(&sessions, &as_string).await;
    let mut as_blocks = Message::new(Role::User, vec![Block::text("hello there")]);
    as_blocks
        .extra
        .insert("name".into(), serde_json::json!("alice"));
    let outcome = sync(&sessions, &[as_blocks]).await;
    assert_eq!(
        (outcome.matched, outcome.appended, outcome.forked),
        (1, 0, false)
    );
}

#[tokio::test]
async fn ingest_skips_a_resent_message_and_counts_it() {
    let sessions = skald_store::test_stores::session_store();
    let skald = engine(&sessions);
    let first = skald
        .ingest(
            &tenant_named("t"),
            &session_named("s"),
            vec![Message::text(Role::User, "hi")],
        )
        .await
        .unwrap();
    assert_eq!(
        (first.created, first.ingested, first.duplicates),
        (true, 1, 0)
    );
    let again = skald
        .ingest(
            &tenant_named("t"),
            &session_named("s"),
            vec![
                Message::text(Role::User, "hi"),
                Message::text(Role::Assistant, "hello"),
                Message::text(Role::Assistant, "hello"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        (again.created, again.ingested, again.duplicates),
        (false, 1, 2)
    );
    assert_eq!(texts(&sessions, "s"), vec!["hi", "hello"]);
}

/// A turn's fast path (the request goes on from what the previous one synced: only its tail is
/// appended) stores what a full sync stores, a late system message and repeats included.
#[tokio::test]
async fn a_synced_tail_is_stored_as_a_sync_would_store_it_repeats_included() {
    let tail = [
        Message::text(Role::User, "again"),
        Message::text(Role::System, "a late system prompt"),
        Message::text(Role::User, "again"),
    ];
    let mut whole = conversation();
    whole.extend(tail.iter().cloned());
    let by_tail = skald_store::test_stores::session_store();
    let skald = engine(&by_tail);
    let mut turn = skald
        .begin_turn(&tenant_named("t"), &session_named("s"))
        .await;
    let first = turn.sync(&conversation(), "openai").unwrap();
    assert!(!first.fast);
    // A late system message is history (only the opening prompt is the host's).
    let grown = turn.sync(&whole, "openai").unwrap();
    assert!(grown.fast, "{grown:?}");
    assert_eq!((grown.matched, grown.appended), (5, 3));
    let by_sync = skald_store::test_stores::session_store();
    sync(&by_sync, &whole).await;
    assert_eq!(texts(&by_tail, "s"), texts(&by_sync, "s"));
    assert_eq!(texts(&by_tail, "s").len(), 7);
    // The same request again appends nothing, and a full sync finds everything in place.
    let again = turn.sync(&whole, "openai").unwrap();
    assert_eq!((again.fast, again.appended), (true, 0));
    drop(turn);
    let next = sync(&by_tail, &whole).await;
    assert_eq!((next.matched, next.appended, next.forked), (7, 0, false));
}

#[test]
fn a_derived_session_id_follows_the_conversation_not_its_length() {
    use skald_core::session_id::derive as derive_session_id;
    let messages = conversation();
    let id = derive_session_id(&messages);
    assert!(id.starts_with("conv-"));
    skald_store::sessions::validate_session_id(&id).unwrap();
    assert_eq!(id, derive_session_id(&messages[..2]));
    let mut other = messages.clone();
    other[1] = Message::text(Role::User, "something else");
    assert_ne!(id, derive_session_id(&other));
}

#[tokio::test]
async fn sessions_of_one_tenant_are_invisible_to_another() {
    let sessions = skald_store::test_stores::session_store();
    engine(&sessions)
        .sync(
            &tenant_named("a"),
            &session_named("s"),
            &conversation(),
            "openai",
        )
        .await
        .unwrap();
    let other = engine(&sessions)
        .sync(
            &tenant_named("b"),
            &session_named("s"),
            &conversation()[..2],
            "openai",
        )
        .await
        .unwrap();
    assert!(other.created);
    assert_eq!(
        sessions
            .context(&tenant_named("b"), &session_named("s"), None)
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_system_message_later_in_the_conversation_is_history_and_is_stored() {
    let sessions = skald_store::test_stores::session_store();
    let mut messages = conversation();
    messages.push(Message::text(Role::System, "reminder: the tests are slow"));
    messages.push(Message::text(Role::User, "run them"));
    let outcome = sync(&sessions, &messages).await;
    assert_eq!(
        outcome.appended, 6,
        "only the opening system prompt is left out"
    );
    let context = sessions
        .context(&tenant_named("t"), &session_named("s"), None)
        .unwrap();
    assert_eq!(context[4].role, Role::System);
    assert_eq!(context[4].plain_text(), "reminder: the tests are slow");
    let again = sync(&sessions, &messages).await;
    assert_eq!((again.matched, again.appended, again.forked), (6, 0, false));
}

/// The engine keeps the session it read between calls and catches up with what was appended:
/// a whole client life (retry, growth, an edit that forks, a regenerate that rewinds, hidden
/// calls) synced with one held state gives what syncing each time from a fresh read gives.
#[tokio::test]
async fn syncs_with_a_held_session_decide_as_syncs_from_a_fresh_read() {
    let mut grown = conversation();
    grown.push(Message::text(Role::User, "and the sizes?"));
    grown.push(Message::text(Role::Assistant, "1 kB each"));
    let mut edited = grown.clone();
    edited[1] = Message::text(Role::User, "what is in /tmp?");
    let steps = [
        conversation(),
        conversation(),
        grown.clone(),
        edited.clone(),
        edited[..3].to_vec(),
        grown.clone(),
    ];
    let with_held = skald_store::test_stores::session_store();
    let fresh = skald_store::test_stores::session_store();
    // One engine over `with_held` for the whole life: it holds the session between calls.
    let held = engine(&with_held);
    for (step, messages) in steps.iter().enumerate() {
        let a = held
            .sync(&tenant_named("t"), &session_named("s"), messages, "openai")
            .await
            .unwrap();
        let b = sync(&fresh, messages).await;
        assert_eq!(
            (a.created, a.matched, a.appended, a.forked),
            (b.created, b.matched, b.appended, b.forked),
            "step {step}"
        );
        assert_eq!(texts(&with_held, "s"), texts(&fresh, "s"), "step {step}");
        if step == 2 {
            let round = || {
                vec![
                    call("skald-1"),
                    result(Role::ToolResult, "skald-1", "line 1"),
                ]
            };
            // The held engine's own turn records it (its state sees the write); the other
            // store gets it from another engine.
            let mut turn = held
                .begin_turn(&tenant_named("t"), &session_named("s"))
                .await;
            turn.record_hidden(round()).unwrap();
            drop(turn);
            record_hidden(&fresh, round()).await;
        }
    }
    assert_eq!(
        with_held
            .load(&tenant_named("t"), &session_named("s"))
            .unwrap()
            .entries()
            .len(),
        fresh
            .load(&tenant_named("t"), &session_named("s"))
            .unwrap()
            .entries()
            .len()
    );
}

/// Regression: an Anthropic user message `[tool_result, text]` was stored as its first result
/// only; the text (the user's next instruction) was lost from the session and from upstream.
#[tokio::test]
async fn text_beside_a_tool_result_is_stored_and_in_the_context() {
    let sessions = skald_store::test_stores::session_store();
    let body = serde_json::json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": "delete a.txt"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "rm a.txt"}},
                {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"command": "ls"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "removed"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "b.txt"},
                {"type": "text", "text": "now delete b.txt"}
            ]}
        ]
    });
    let messages = skald_core::codec::anthropic::decode_request(&body)
        .unwrap()
        .messages;
    let outcome = sync_as(&sessions, &messages, "anthropic").await;
    assert_eq!(outcome.appended, 3);
    let context = sessions
        .context(&tenant_named("t"), &session_named("s"), None)
        .unwrap();
    let last = context.last().unwrap();
    assert_eq!(last.role, Role::ToolResult);
    assert_eq!(last.plain_text(), "now delete b.txt");
    let ids: Vec<&str> = last.tool_results().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["toolu_1", "toolu_2"]);
    // A retry matches what was stored: nothing is appended again.
    let again = sync_as(&sessions, &messages, "anthropic").await;
    assert_eq!((again.matched, again.appended, again.forked), (3, 0, false));
}

/// A turn as OpenClaw's `ingestBatch` sends it: the prompt, a tool round and the answer.
fn batch() -> Vec<Message> {
    vec![
        Message::text(Role::User, "what is here?"),
        call("c1"),
        result(Role::ToolResult, "c1", "a.txt\nb.txt"),
        Message::text(Role::Assistant, "two files"),
    ]
}

/// Ingests `messages` into session "s" of tenant "t" with a state of its own: what a server
/// that just started (or another server over the same store) holds.
async fn ingest_fresh(sessions: &Arc<dyn SessionStore>, messages: Vec<Message>) -> IngestOutcome {
    engine(sessions)
        .ingest(&tenant_named("t"), &session_named("s"), messages)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_batch_resent_after_a_restart_is_recognised_and_stored_once() {
    let sessions = skald_store::test_stores::session_store();
    ingest_fresh(&sessions, vec![Message::text(Role::User, "hello")]).await;
    let first = ingest_fresh(&sessions, batch()).await;
    assert_eq!((first.ingested, first.duplicates), (4, 0));
    // The answer was lost (kill -9): the host sends the same batch again to the restarted server.
    let again = ingest_fresh(&sessions, batch()).await;
    assert_eq!(
        (again.created, again.ingested, again.duplicates),
        (false, 0, 4)
    );
    assert_eq!(
        texts(&sessions, "s"),
        [
            "hello",
            "what is here?",
            "Assistant",
            "ToolResult",
            "two files"
        ]
    );
    // A batch that repeats the stored tail and goes on stores only what follows it.
    let mut longer = batch();
    longer.drain(..2);
    longer.push(Message::text(Role::User, "delete b.txt"));
    let grown = ingest_fresh(&sessions, longer).await;
    assert_eq!((grown.ingested, grown.duplicates), (1, 2));
    assert_eq!(
        sessions
            .get(&tenant_named("t"), &session_named("s"))
            .unwrap()
            .message_count,
        6
    );
}

#[tokio::test]
async fn a_batch_another_server_stored_first_is_taken_as_done_not_refused() {
    let inner = skald_store::test_stores::session_store();
    ingest_fresh(&inner, vec![Message::text(Role::User, "hello")]).await;
    // This server reads the session, then the other server stores the same batch (the host's
    // retry of a request still running there), then this server appends.
    let raced: Arc<dyn SessionStore> = Arc::new(RacedStore {
        inner: inner.clone(),
        first: std::sync::Mutex::new(Some(batch())),
    });
    let outcome = engine(&raced)
        .ingest(&tenant_named("t"), &session_named("s"), batch())
        .await
        .expect("a batch the other server stored is done, not refused");
    assert_eq!((outcome.ingested, outcome.duplicates), (0, 4));
    assert_eq!(
        inner
            .get(&tenant_named("t"), &session_named("s"))
            .unwrap()
            .message_count,
        5
    );
}

/// A session store where another writer (a second server over the same store) ingests a batch
/// between this writer's read and its first append.
struct RacedStore {
    inner: std::sync::Arc<dyn SessionStore>,
    first: std::sync::Mutex<Option<Vec<Message>>>,
}

impl SessionStore for RacedStore {
    fn create(&self, tenant: &Tenant, session: NewSession) -> Result<SessionInfo, SessionError> {
        self.inner.create(tenant, session)
    }

    fn append(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        entries: &[Entry],
    ) -> Result<(), SessionError> {
        let first = self.first.lock().unwrap().take();
        if let Some(messages) = first {
            // The other server: an engine of its own over the same store, on a thread and
            // runtime of its own (this call is the first server's, inside its runtime).
            let inner = self.inner.clone();
            let (tenant, session) = (tenant.clone(), session.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    engine(&inner)
                        .ingest(&tenant, &session, messages)
                        .await
                        .unwrap()
                })
            })
            .join()
            .unwrap();
        }
        self.inner.append(tenant, session, entries)
    }

    fn append_message(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        message: Message,
    ) -> Result<Entry, SessionError> {
        self.inner.append_message(tenant, session, message)
    }

    fn append_compaction(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        checkpoint: CompactionCheckpoint,
    ) -> Result<Entry, SessionError> {
        self.inner.append_compaction(tenant, session, checkpoint)
    }

    fn rewrite_branch(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        rewrites: BTreeMap<String, EntryKind>,
        reason: &str,
    ) -> Result<BranchRewrite, SessionError> {
        self.inner.rewrite_branch(tenant, session, rewrites, reason)
    }

    fn set_leaf(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<(), SessionError> {
        self.inner.set_leaf(tenant, session, leaf)
    }

    fn get(&self, tenant: &Tenant, session: &SessionId) -> Result<SessionInfo, SessionError> {
        self.inner.get(tenant, session)
    }

    fn list(&self, tenant: &Tenant) -> Result<Vec<SessionInfo>, SessionError> {
        self.inner.list(tenant)
    }

    fn set_switches(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        switches: SessionSwitches,
    ) -> Result<SessionInfo, SessionError> {
        self.inner.set_switches(tenant, session, switches)
    }

    fn load(&self, tenant: &Tenant, session: &SessionId) -> Result<Session, SessionError> {
        self.inner.load(tenant, session)
    }

    fn entries_after(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        skip: u64,
    ) -> Result<Vec<Entry>, SessionError> {
        self.inner.entries_after(tenant, session, skip)
    }
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

/// A session id of the tests, parsed (it is well formed).
fn session_named(id: &str) -> skald_core::ids::SessionId {
    skald_core::ids::SessionId::parse(id).unwrap()
}
