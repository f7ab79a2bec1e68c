//! The view of a stored session for a call, through the engine — the pipeline, then memory
//! (snapshot, recall, skill memories, tools) — and what the engine keeps of a session so later
//! calls send the same bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod memory_common;

use std::sync::Arc;

use memory_common::*;
use serde_json::json;
use skald_core::memory::recall::{RecallLeaving, RecallSettings};
use skald_core::memory::tools::MEMORY_TOOL_NAMES;
use skald_core::memory::usage::SKILL_MEMORY_MARKER;
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_core::session::SessionHeader;
use skald_engine::recovery::RecoverySettings;
use skald_engine::storage::MemoryStore;
use skald_engine::{
    AssembleInput, Engine, ManualClock, PrepareInput, SessionState, Stores, TurnLoop, View,
    ViewOptions,
};
use skald_store::sessions::{NewSession, SessionStore};
use skald_store::{RefSettings, RefStore};
use tokio_util::task::TaskTracker;

const SESSION: &str = "s1";
/// [`TENANT`] and [`SESSION`] as the engine takes them.
static TENANT_ID: std::sync::LazyLock<skald_core::ids::Tenant> =
    std::sync::LazyLock::new(|| tenant_named(TENANT));
static SESSION_ID: std::sync::LazyLock<skald_core::ids::SessionId> =
    std::sync::LazyLock::new(|| session_named(SESSION));

/// The stores of one deployment: the test session (created empty), refs, and `memories`.
#[derive(Clone)]
struct Deployment {
    sessions: Arc<dyn SessionStore>,
    refs: Arc<dyn RefStore>,
    memories: Arc<dyn MemoryStore>,
}

fn deployment(memories: Arc<dyn MemoryStore>) -> Deployment {
    let sessions = skald_store::test_stores::session_store();
    let header = SessionHeader {
        id: SESSION.to_owned(),
        ..SessionHeader::default()
    };
    sessions
        .create(
            &tenant_named(TENANT),
            NewSession::new(header, "openclaw-session"),
        )
        .unwrap();
    Deployment {
        sessions,
        refs: skald_store::test_stores::ref_store(RefSettings::default()),
        memories,
    }
}

/// An engine over `deployment` running `policy`, with Alice's memories (agent `main`) recalled
/// with `recall`, its clock at [`MAY_1_2023`] until the test moves it. Two engines over one
/// deployment are two servers (or one restarted): each decides a session's view afresh.
fn engine(
    deployment: &Deployment,
    policy: &str,
    recall: RecallSettings,
) -> (Engine, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(MAY_1_2023));
    let mut config = alice_config(policy, clock.clone());
    config.memory.recall = recall;
    let stores = Stores {
        sessions: deployment.sessions.clone(),
        refs: deployment.refs.clone(),
        memories: deployment.memories.clone(),
    };
    (
        Engine::new(stores, config, TaskTracker::new()).unwrap(),
        clock,
    )
}

/// The stored session's view for the next call, the decisions it makes kept by the engine.
async fn next_call(engine: &Engine, options: ViewOptions) -> View {
    let input = AssembleInput {
        options,
        ..AssembleInput::default()
    };
    engine
        .assemble(&TENANT_ID, &SESSION_ID, input)
        .await
        .unwrap()
        .view
}

/// Memory on, every tool the host could run.
fn with_memory() -> ViewOptions {
    ViewOptions {
        with_memory: true,
        ..ViewOptions::default()
    }
}

fn skill_read(call_id: &str) -> Vec<Message> {
    vec![
        Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: call_id.into(),
                name: "read".into(),
                arguments: json!({"path": "skills/pptx/SKILL.md"}),
                arguments_text: None,
                extra: Extra::new(),
            })],
        ),
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: call_id.into(),
                tool_name: Some("read".into()),
                content: vec![Block::text("## Create Presentation\nUse python-pptx.\n")].into(),
                content_form: ContentForm::Text,
                is_error: None,
                details: None,
                extra: Extra::new(),
            })],
        ),
    ]
}

#[tokio::test]
async fn a_skill_read_keeps_the_appendix_it_got_first_while_the_memory_changes() {
    let store = fixture_store();
    let deployment = deployment(store.clone());
    set_skill_usage(store.as_ref(), "pptx", 1, 1);
    let sessions = &deployment.sessions;
    sessions
        .append_message(
            &tenant_named(TENANT),
            &session_named(SESSION),
            Message::text(Role::User, "Make a deck."),
        )
        .unwrap();
    for message in skill_read("call_1") {
        sessions
            .append_message(&tenant_named(TENANT), &session_named(SESSION), message)
            .unwrap();
    }
    let (skald, _) = engine(&deployment, "none", RecallSettings::default());
    let first = next_call(&skald, with_memory()).await;
    let text_of = |messages: &[Message]| {
        messages
            .iter()
            .flat_map(Message::tool_results)
            .find(|result| result.call_id == "call_1")
            .map(|result| skald_core::message::join_text(&result.content))
            .unwrap()
    };
    let first_text = text_of(&first.view.messages);
    assert!(first_text.contains(SKILL_MEMORY_MARKER), "{first_text}");
    // The stored session holds the read as the tool returned it.
    let stored = sessions
        .context(&tenant_named(TENANT), &session_named(SESSION), None)
        .unwrap();
    assert!(!text_of(&stored).contains(SKILL_MEMORY_MARKER));

    // Three more uses, all failed.
    set_skill_usage(store.as_ref(), "pptx", 4, 1);
    let second = next_call(&skald, with_memory()).await;
    assert_eq!(text_of(&second.view.messages), first_text);
    // Another engine over the same stores decides again, with what is remembered now.
    let (restarted, _) = engine(&deployment, "none", RecallSettings::default());
    let fresh = next_call(&restarted, with_memory()).await;
    assert_ne!(text_of(&fresh.view.messages), first_text);

    let memory = first.view.memory.unwrap();
    assert_eq!(memory.skills.len(), 1);
    let tools: Vec<&str> = first.tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(tools, MEMORY_TOOL_NAMES.to_vec());
}

#[tokio::test]
async fn a_pending_prompt_drives_recall_and_is_not_in_the_messages() {
    let deployment = deployment(fixture_store());
    for message in [
        Message::text(Role::User, "Hello there."),
        Message::text(Role::Assistant, "Hi!"),
    ] {
        deployment
            .sessions
            .append_message(&tenant_named(TENANT), &session_named(SESSION), message)
            .unwrap();
    }
    let (skald, _) = engine(&deployment, "none", RecallSettings::default());
    let prompt = "How do I optimise the billing database queries on invoices?";
    // A host that runs none of skald's tools.
    let options = ViewOptions {
        available_tools: Some(Default::default()),
        pending_prompt: Some(prompt.into()),
        ..with_memory()
    };
    let view = skald
        .view(&TENANT_ID, &SESSION_ID, options)
        .await
        .unwrap()
        .view;
    let memory = view.memory.as_ref().unwrap();
    assert_eq!(
        memory.recall.query.as_deref().map(|q| q.contains(prompt)),
        Some(true)
    );
    assert!(!memory.recall.kept.is_empty());
    assert!(view.recall_tokens > 0);
    assert!(
        !view
            .messages
            .iter()
            .any(|message| message.plain_text() == prompt)
    );
    // The recall comes last, for the prompt the host sends after it.
    assert_eq!(
        view.messages.last().map(|m| m.role.clone()),
        Some(Role::ToolResult)
    );
    assert!(view.tools.is_empty());
    assert!(view.estimated_tokens() > view.message_tokens);

    let without = skald
        .view(&TENANT_ID, &SESSION_ID, ViewOptions::default())
        .await
        .unwrap()
        .view;
    assert!(without.memory.is_none());
    assert_eq!(without.messages.len(), 2);
    assert_eq!(without.estimated_tokens(), without.message_tokens);
}

/// The messages the proxy's path prepares for the next call of the stored session, on a fresh
/// engine: recall's memories as a simulated `search_memories` call, or (`simulated_calls`
/// false: what the proxy does when the client asked for extended thinking) as user text.
async fn prepared_messages(deployment: &Deployment, simulated_calls: bool) -> Vec<Message> {
    let (skald, _) = engine(deployment, "none", RecallSettings::default());
    let identity = identity();
    let settings = RecoverySettings::default();
    let mut turn = skald.begin_turn(&TENANT_ID, &SESSION_ID).await;
    let context = skald.prepare_context(PrepareInput {
        tenant: &TENANT_ID,
        session: &SESSION_ID,
        model: None,
        system_prompt: None,
        tools: &[],
        host_prefix_tokens: None,
        fetch_available: true,
        now_ms: skald.now_ms(),
        agents_md: None,
        settings: &settings,
    });
    let hook = skald.recall_hook(&identity, true, simulated_calls);
    let hooks = skald.memory_hooks(false, Some(&hook));
    let mut turn_loop = TurnLoop::new(&context, hooks).unwrap();
    let call = turn_loop
        .prepare(&mut turn, &tokio_util::sync::CancellationToken::new())
        .await
        .unwrap();
    call.request.messages
}

/// Regression: with Anthropic's extended thinking on, a request whose recall came as a
/// simulated `search_memories` call (an assistant tool call without a signed thinking block) is
/// refused by the provider. Without simulated calls, the same memories come as user text.
#[tokio::test]
async fn recall_without_simulated_calls_is_user_text_and_no_unsigned_tool_call() {
    let deployment = deployment(fixture_store());
    deployment
        .sessions
        .append_message(
            &tenant_named(TENANT),
            &session_named(SESSION),
            Message::text(
                Role::User,
                "How do I optimise the billing database queries on invoices?",
            ),
        )
        .unwrap();
    let as_calls = prepared_messages(&deployment, true).await;
    assert!(as_calls.iter().any(|m| m.tool_calls().next().is_some()));
    let as_text = prepared_messages(&deployment, false).await;
    assert!(
        as_text
            .iter()
            .all(|m| m.tool_calls().next().is_none() && m.tool_results().next().is_none()),
        "{as_text:?}"
    );
    let last = as_text.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert!(
        last.plain_text()
            .contains("<skald-memory tool=\"search_memories\"")
    );
    // The same memories reach the model.
    let recalled = as_calls
        .iter()
        .flat_map(Message::tool_results)
        .map(|result| skald_core::message::join_text(&result.content))
        .collect::<Vec<_>>();
    assert!(!recalled.is_empty());
    let all_text: String = as_text.iter().map(Message::plain_text).collect();
    for result in recalled {
        assert!(all_text.contains(&result), "{result}");
    }
}

#[tokio::test]
async fn the_pipeline_reports_what_it_saved_and_offers_the_fetch_tool() {
    let deployment = deployment(empty_store());
    let log = "2026-01-01 INFO step ok\n".repeat(2_000);
    let mut read = skill_read("c1");
    if let Some(Block::ToolCall(call)) = read[0].content.first_mut() {
        call.name = "bash".into();
        call.arguments = json!({"command": "make"});
    }
    if let Some(Block::ToolResult(result)) = read[1].content.first_mut() {
        result.content = vec![Block::text(log)].into();
    }
    append(
        &*deployment.sessions,
        Message::text(Role::User, "run the build"),
    );
    for message in read {
        append(&*deployment.sessions, message);
    }
    append(
        &*deployment.sessions,
        Message::text(Role::Assistant, "built"),
    );
    let (sccs, _) = engine(&deployment, "sccs", RecallSettings::default());
    let view = next_call(&sccs, ViewOptions::default()).await;
    assert_eq!(view.view.report.refs_stored, 1);
    assert!(
        view.view.tokens_saved() > 1_000,
        "{}",
        view.view.tokens_saved()
    );
    assert_eq!(view.tools[0].name, "fetch_original_data");
    assert!(
        view.view
            .system_prompt_addition()
            .unwrap()
            .contains("REF_ID")
    );
    // The engine holds the session's state with the ref it stored.
    let held = sccs.begin_turn(&TENANT_ID, &SESSION_ID).await;
    assert_eq!(held.stored_ref_count(), 1);
}

/// The questions of the prefix-stability tests: each one finds memories of the fixture store.
const BILLING_QUESTIONS: [&str; 10] = [
    "How is the billing database set up?",
    "Which Postgres version does the billing database run?",
    "What sits in front of the billing database, pgbouncer?",
    "Why were the invoices queries on the billing database slow?",
    "When was the index on customer_id added to the invoices table?",
    "When did Alice migrate the billing database to Postgres 15?",
    "Was the billing database migrated from Postgres 13?",
    "Does the invoices table of the billing database have more indexes?",
    "Who runs the billing database migration on Postgres?",
    "Is pgbouncer still in front of the billing Postgres database?",
];

/// Appends `message` to the test session.
fn append(sessions: &dyn SessionStore, message: Message) {
    sessions
        .append_message(&tenant_named(TENANT), &session_named(SESSION), message)
        .unwrap();
}

/// Regression (issue 27): each user turn's simulated `search_memories` pair left the next
/// turn's request, which then shared with the previous one only the messages before that pair:
/// the provider wrote the previous turn's whole tool loop to its cache again, every user turn.
/// Over ten agent turns with recall hits on each, two calls and a tool loop a turn, every
/// request starts with the previous one — messages, system prompt addition and tools.
#[tokio::test]
async fn every_call_starts_with_the_previous_one_over_ten_turns_with_recall_on_each() {
    let deployment = deployment(fixture_store());
    let sessions = deployment.sessions.clone();
    // Placement is under test, not relevance: every question's hits are kept.
    let settings = RecallSettings {
        min_text_relevance: 0.0,
        ..RecallSettings::default()
    };
    let (skald, clock) = engine(&deployment, "none", settings);
    let mut previous: Option<skald_engine::ModelView> = None;
    let mut now_ms = MAY_1_2023;
    for (turn, question) in BILLING_QUESTIONS.iter().enumerate() {
        append(&*sessions, Message::text(Role::User, *question));
        for call in 0..2 {
            now_ms += 20_000;
            clock.set(now_ms);
            let view = next_call(&skald, with_memory()).await.view;
            let memory = view.memory.as_ref().unwrap();
            assert!(
                !memory.recall.kept.is_empty(),
                "turn {turn}: {:?}",
                memory.recall
            );
            assert_eq!(memory.kept_recalls.kept, turn, "turn {turn}");
            assert!(memory.kept_recalls.left.is_empty());
            if let Some(previous) = &previous {
                assert!(
                    view.messages.starts_with(&previous.messages),
                    "turn {turn} call {call}: the request does not start with the previous one"
                );
                assert_eq!(
                    view.system_prompt_addition(),
                    previous.system_prompt_addition()
                );
                assert_eq!(view.tools, previous.tools);
            }
            previous = Some(view);
            // The turn's tool loop: a command and its 8,000-character output, which the
            // `none` policy keeps (its rewrite would cost more than keeping the recall).
            let mut round = skill_read(&format!("call_{turn}_{call}"));
            if let Some(Block::ToolCall(tool_call)) = round[0].content.first_mut() {
                tool_call.name = "bash".into();
                tool_call.arguments = json!({"command": format!("make check STEP={call}")});
            }
            if let Some(Block::ToolResult(result)) = round[1].content.first_mut() {
                result.content = vec![Block::text(
                    format!("turn {turn} step {call}: module checked, ok\n").repeat(250),
                )]
                .into();
            }
            for message in round {
                append(&*sessions, message);
            }
        }
        append(
            &*sessions,
            Message::text(Role::Assistant, format!("Turn {turn} is done.")),
        );
    }
    let last = previous.unwrap();
    let searches = last
        .messages
        .iter()
        .filter(|message| {
            message.content.iter().any(
                |block| matches!(block, Block::ToolCall(call) if call.name == "search_memories"),
            )
        })
        .count();
    assert_eq!(searches, 10);
    // The earlier recalls are counted in what the request holds.
    assert!(last.recall_tokens > last.memory.as_ref().unwrap().recall.tokens_injected);

    // After the prompt cache's lifetime, the earlier recalls leave (nothing cached is lost).
    append(
        &*sessions,
        Message::text(Role::User, "And the billing database backups on Postgres?"),
    );
    clock.set(now_ms + 600_000);
    let view = next_call(&skald, with_memory()).await.view;
    let kept = &view.memory.as_ref().unwrap().kept_recalls;
    assert_eq!(kept.kept, 0);
    assert_eq!(kept.left.len(), 10);
    assert!(
        kept.left
            .iter()
            .all(|left| left.cause == RecallLeaving::CacheCold)
    );
}

#[test]
fn usage_is_paired_with_the_last_count_once() {
    let mut state = SessionState::default();
    assert_eq!(state.observe_usage(1_200), None);
    state.record_counted(Some("gpt-x"), 1_000);
    let observed = state.observe_usage(1_200).unwrap();
    assert_eq!(
        (observed.model.as_str(), observed.counted),
        ("gpt-x", 1_000)
    );
    assert_eq!(state.observe_usage(1_200), None);
    assert_eq!(state.calibrated_tokens(Some("gpt-x"), 1_000), 1_200);
    assert_eq!(state.calibrated_tokens(Some("other"), 1_000), 1_000);
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

/// A session id of the tests, parsed (it is well formed).
fn session_named(id: &str) -> skald_core::ids::SessionId {
    skald_core::ids::SessionId::parse(id).unwrap()
}
