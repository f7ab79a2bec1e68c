//! How often one request reads its session's row, through `Engine` over a store that counts
//! them: a proxied request — the client's conversation brought in, a call prepared with memory
//! on, skald's hidden round recorded, the answer — reads it once; a write another process makes
//! between two requests is seen by the next one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult, Usage};
use skald_core::pipeline::offload::FETCH_TOOL_NAME;
use skald_core::pipeline::policy::Policy;
use skald_core::refs::ref_ids_in;
use skald_core::session::{Entry, EntryKind, Session};
use skald_engine::{
    Engine, EngineConfig, PrepareInput, RecoverySettings, Stores, TurnLoop, WholeAnswer,
};
use skald_store::SqliteSessionStore;
use skald_store::sessions::{
    BranchRewrite, CompactionCheckpoint, NewSession, SessionError, SessionInfo, SessionStore,
    SessionSwitches,
};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A session store that counts its row reads.
struct CountingRows {
    inner: SqliteSessionStore,
    gets: AtomicUsize,
}

impl SessionStore for CountingRows {
    fn create(&self, tenant: &Tenant, session: NewSession) -> Result<SessionInfo, SessionError> {
        self.inner.create(tenant, session)
    }
    fn append(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        entries: &[Entry],
    ) -> Result<(), SessionError> {
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
        self.gets.fetch_add(1, Ordering::SeqCst);
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

fn tenant() -> Tenant {
    Tenant::parse("acme").unwrap()
}

fn session_id() -> SessionId {
    SessionId::parse("rows").unwrap()
}

fn build_log() -> String {
    let mut text: String = (0..400)
        .map(|i| format!("2026-01-01 INFO compiling crate_{i:03} ok\n"))
        .collect();
    text.push_str("error[E0425]: cannot find value `ledger_total` in src/ledger.rs:42\n");
    text
}

fn engine(rows: Arc<CountingRows>) -> Engine {
    let stores = Stores {
        sessions: rows,
        ..Stores::in_memory().unwrap()
    };
    Engine::new(
        stores,
        EngineConfig::new(Policy::preset("sccs").unwrap()),
        TaskTracker::new(),
    )
    .unwrap()
}

/// The conversation a client sends: its prompt, a question, a `make` call and its build log.
fn conversation() -> Vec<Message> {
    vec![
        Message::text(Role::System, "You are a build assistant."),
        Message::text(Role::User, "why does the build fail?"),
        Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                arguments: json!({"command": "make"}),
                arguments_text: None,
                extra: Extra::new(),
            })],
        ),
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: "c1".into(),
                tool_name: Some("bash".into()),
                content: vec![Block::text(build_log())].into(),
                content_form: ContentForm::Blocks,
                is_error: None,
                details: None,
                extra: Extra::new(),
            })],
        ),
    ]
}

fn answer(blocks: Vec<Block>) -> Message {
    let mut message = Message::new(Role::Assistant, blocks);
    message.meta.usage = Some(Usage {
        input: 1_000,
        output: 20,
        ..Usage::default()
    });
    message
}

/// One proxied request as the proxy drives it: brought in, prepared with memory on, a hidden
/// fetch round when `fetch`, then the final answer. Returns the final answer and the messages
/// of the request's first upstream call.
async fn request(engine: &Engine, messages: Vec<Message>, fetch: bool) -> (Message, Vec<Message>) {
    let (tenant, session) = (tenant(), session_id());
    let identity = engine.memory_identity().unwrap();
    let settings = RecoverySettings::default();
    let cancel = CancellationToken::new();
    let mut turn = engine.begin_turn(&tenant, &session).await;
    turn.bring_in(messages, None, "chat-completions", Some(&identity))
        .unwrap();
    let recall = engine.recall_hook(&identity, true, true);
    let prepare = engine.prepare_context(PrepareInput {
        tenant: &tenant,
        session: &session,
        model: Some("scripted"),
        system_prompt: Some("You are a build assistant."),
        tools: &[],
        host_prefix_tokens: None,
        fetch_available: true,
        now_ms: 1_770_000_000_000,
        agents_md: None,
        settings: &settings,
    });
    let mut turn_loop = TurnLoop::new(&prepare, engine.memory_hooks(true, Some(&recall))).unwrap();
    let call = turn_loop.prepare(&mut turn, &cancel).await.unwrap();
    if fetch {
        // The log's placeholder, in its tool result.
        let id = call
            .request
            .messages
            .iter()
            .flat_map(|message| &message.content)
            .filter_map(|block| match block {
                Block::ToolResult(result) => Some(&result.content),
                Block::Text(_)
                | Block::Image(_)
                | Block::Thinking(_)
                | Block::ToolCall(_)
                | Block::Opaque(_) => None,
            })
            .flatten()
            .filter_map(Block::as_text)
            .flat_map(|text| ref_ids_in(&text.text))
            .next()
            .expect("the build log is offloaded")
            .to_string();
        let fetching = answer(vec![Block::ToolCall(ToolCall {
            id: "f1".into(),
            name: FETCH_TOOL_NAME.into(),
            arguments: json!({"ref_ids": [id], "grep": "error"}),
            arguments_text: None,
            extra: Extra::new(),
        })]);
        let step = turn_loop
            .on_whole_answer(&mut turn, &fetching, &cancel)
            .await
            .unwrap();
        assert!(matches!(step, WholeAnswer::Continue { .. }), "{step:?}");
        turn_loop.prepare(&mut turn, &cancel).await.unwrap();
    }
    let done = answer(vec![Block::text("`ledger_total` is undefined at line 42.")]);
    let step = turn_loop
        .on_whole_answer(&mut turn, &done, &cancel)
        .await
        .unwrap();
    assert!(matches!(step, WholeAnswer::Final { .. }), "{step:?}");
    (done, call.request.messages)
}

#[tokio::test]
async fn a_proxied_request_reads_its_sessions_row_once() {
    let rows = Arc::new(CountingRows {
        inner: SqliteSessionStore::in_memory().unwrap(),
        gets: AtomicUsize::new(0),
    });
    let engine = engine(rows.clone());
    let mut messages = conversation();

    // The first request creates the session, offloads the log and runs a hidden fetch round.
    let (first, _) = request(&engine, messages.clone(), true).await;
    assert_eq!(rows.gets.swap(0, Ordering::SeqCst), 1, "first request");

    // The client's next request extends the conversation with the answer and a new question.
    messages.push(first);
    messages.push(Message::text(Role::User, "and how do I fix it?"));
    let (second, _) = request(&engine, messages.clone(), false).await;
    assert_eq!(rows.gets.swap(0, Ordering::SeqCst), 1, "second request");

    // A request that brings nothing new reads it once too.
    messages.push(second);
    request(&engine, messages, false).await;
    assert_eq!(rows.gets.swap(0, Ordering::SeqCst), 1, "third request");
}

#[tokio::test]
async fn a_switch_set_elsewhere_between_two_requests_is_honoured_by_the_next() {
    let rows = Arc::new(CountingRows {
        inner: SqliteSessionStore::in_memory().unwrap(),
        gets: AtomicUsize::new(0),
    });
    let engine = engine(rows.clone());
    let mut messages = conversation();
    let (first, upstream) = request(&engine, messages.clone(), false).await;
    let whole_log = |upstream: &[Message]| {
        upstream.iter().any(|message| {
            message.content.iter().any(|block| match block {
                Block::ToolResult(result) => result.content.iter().any(|block| {
                    block
                        .as_text()
                        .is_some_and(|text| text.text.contains("compiling crate_200"))
                }),
                Block::Text(_)
                | Block::Image(_)
                | Block::Thinking(_)
                | Block::ToolCall(_)
                | Block::Opaque(_) => false,
            })
        })
    };
    assert!(!whole_log(&upstream), "the log is offloaded at first");

    // Another server (the dashboard's pause button) pauses offloading behind this engine.
    rows.inner
        .set_switches(
            &tenant(),
            &session_id(),
            SessionSwitches {
                pause_offload: true,
                ..SessionSwitches::default()
            },
        )
        .unwrap();

    messages.push(first);
    messages.push(Message::text(Role::User, "and how do I fix it?"));
    let (_, upstream) = request(&engine, messages, false).await;
    assert!(whole_log(&upstream), "offloading is paused: {upstream:?}");
}
