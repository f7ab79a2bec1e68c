//! `prepare_view`: the one builder of a stored session's view for a call — the pipeline, then
//! memory (snapshot, recall, skill memories, tools) — and what the session state keeps so later
//! calls send the same bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod memory_common;

use memory_common::*;
use serde_json::json;
use skald_core::memory::recall::{RecallLeaving, RecallSettings};
use skald_core::memory::tools::MEMORY_TOOL_NAMES;
use skald_core::memory::usage::SKILL_MEMORY_MARKER;
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_core::pipeline::policy::Policy;
use skald_core::session::SessionHeader;
use skald_engine::internal::memory::record_skill_use;
use skald_engine::internal::view::{ViewRequest, prepare_view};
use skald_engine::{RecallHook, SessionState};
use skald_store::sessions::{NewSession, SessionStore};
use skald_store::{RefSettings, RefStore};
use std::sync::Arc;

const SESSION: &str = "s1";
/// [`TENANT`] and [`SESSION`] as the engine takes them.
static TENANT_ID: std::sync::LazyLock<skald_core::ids::Tenant> =
    std::sync::LazyLock::new(|| tenant_named(TENANT));
static SESSION_ID: std::sync::LazyLock<skald_core::ids::SessionId> =
    std::sync::LazyLock::new(|| session_named(SESSION));

fn stores() -> (Arc<dyn SessionStore>, Arc<dyn RefStore>) {
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
    (
        sessions,
        skald_store::test_stores::ref_store(RefSettings::default()),
    )
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

fn request<'a>(
    sessions: &'a dyn SessionStore,
    refs: &'a dyn RefStore,
    policy: &'a Policy,
    memory: Option<&'a RecallHook<'a>>,
    pending_prompt: Option<&'a str>,
) -> ViewRequest<'a> {
    ViewRequest {
        sessions,
        refs,
        tenant: &TENANT_ID,
        session_id: &SESSION_ID,
        policy,
        window_tokens: 200_000,
        now_ms: MAY_1_2023,
        fetch_available: true,
        host_prefix_tokens: 0,
        memory,
        pending_prompt,
    }
}

#[tokio::test]
async fn a_skill_read_keeps_the_appendix_it_got_first_while_the_memory_changes() {
    let (sessions, refs) = stores();
    let store = fixture_store();
    record_skill_use(&store, &tenant_named(TENANT), "main", "pptx", true).unwrap();
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
    let policy = Policy::preset("none").unwrap();
    let identity = identity();
    let settings = RecallSettings::default();
    let hook = RecallHook {
        store: &store,
        embedder: None,
        identity: &identity,
        settings: &settings,
        offer_tools: true,
        simulated_calls: true,
    };
    let mut state = SessionState::default();
    let first = prepare_view(
        &request(&sessions, &refs, &policy, Some(&hook), None),
        &mut state,
    )
    .await
    .unwrap();
    let text_of = |messages: &[Message]| {
        messages
            .iter()
            .flat_map(Message::tool_results)
            .find(|result| result.call_id == "call_1")
            .map(|result| skald_core::message::join_text(&result.content))
            .unwrap()
    };
    let first_text = text_of(&first.messages);
    assert!(first_text.contains(SKILL_MEMORY_MARKER), "{first_text}");
    // The stored session holds the read as the tool returned it.
    let stored = sessions
        .context(&tenant_named(TENANT), &session_named(SESSION), None)
        .unwrap();
    assert!(!text_of(&stored).contains(SKILL_MEMORY_MARKER));

    for _ in 0..3 {
        record_skill_use(&store, &tenant_named(TENANT), "main", "pptx", false).unwrap();
    }
    let second = prepare_view(
        &request(&sessions, &refs, &policy, Some(&hook), None),
        &mut state,
    )
    .await
    .unwrap();
    assert_eq!(text_of(&second.messages), first_text);
    // A new session state decides again, with what is remembered now.
    let fresh = prepare_view(
        &request(&sessions, &refs, &policy, Some(&hook), None),
        &mut SessionState::default(),
    )
    .await
    .unwrap();
    assert_ne!(text_of(&fresh.messages), first_text);

    let memory = first.memory.unwrap();
    assert_eq!(memory.skills.len(), 1);
    let tools: Vec<&str> = first.tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(tools, MEMORY_TOOL_NAMES.to_vec());
}

#[tokio::test]
async fn a_pending_prompt_drives_recall_and_is_not_in_the_messages() {
    let (sessions, refs) = stores();
    let store = fixture_store();
    sessions
        .append_message(
            &tenant_named(TENANT),
            &session_named(SESSION),
            Message::text(Role::User, "Hello there."),
        )
        .unwrap();
    sessions
        .append_message(
            &tenant_named(TENANT),
            &session_named(SESSION),
            Message::text(Role::Assistant, "Hi!"),
        )
        .unwrap();
    let policy = Policy::preset("none").unwrap();
    let identity = identity();
    let settings = RecallSettings::default();
    let hook = RecallHook {
        store: &store,
        embedder: None,
        identity: &identity,
        settings: &settings,
        offer_tools: false,
        simulated_calls: true,
    };
    let prompt = "How do I optimise the billing database queries on invoices?";
    let view = prepare_view(
        &request(&sessions, &refs, &policy, Some(&hook), Some(prompt)),
        &mut SessionState::default(),
    )
    .await
    .unwrap();
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

    let without = prepare_view(
        &request(&sessions, &refs, &policy, None, None),
        &mut SessionState::default(),
    )
    .await
    .unwrap();
    assert!(without.memory.is_none());
    assert_eq!(without.messages.len(), 2);
    assert_eq!(without.estimated_tokens(), without.message_tokens);
}

/// Regression: with Anthropic's extended thinking on, a request whose recall came as a
/// simulated `search_memories` call (an assistant tool call without a signed thinking block) is
/// refused by the provider. Without simulated calls, the same memories come as user text.
#[tokio::test]
async fn recall_without_simulated_calls_is_user_text_and_no_unsigned_tool_call() {
    let (sessions, refs) = stores();
    let store = fixture_store();
    sessions
        .append_message(
            &tenant_named(TENANT),
            &session_named(SESSION),
            Message::text(
                Role::User,
                "How do I optimise the billing database queries on invoices?",
            ),
        )
        .unwrap();
    let policy = Policy::preset("none").unwrap();
    let identity = identity();
    let settings = RecallSettings::default();
    let hook = |simulated_calls| RecallHook {
        store: &store,
        embedder: None,
        identity: &identity,
        settings: &settings,
        offer_tools: true,
        simulated_calls,
    };
    let simulated = hook(true);
    let as_calls = prepare_view(
        &request(&sessions, &refs, &policy, Some(&simulated), None),
        &mut SessionState::default(),
    )
    .await
    .unwrap();
    assert!(
        as_calls
            .messages
            .iter()
            .any(|m| m.tool_calls().next().is_some())
    );
    let text = hook(false);
    let as_text = prepare_view(
        &request(&sessions, &refs, &policy, Some(&text), None),
        &mut SessionState::default(),
    )
    .await
    .unwrap();
    assert!(
        as_text
            .messages
            .iter()
            .all(|m| m.tool_calls().next().is_none() && m.tool_results().next().is_none()),
        "{:?}",
        as_text.messages
    );
    let last = as_text.messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert!(
        last.plain_text()
            .contains("<skald-memory tool=\"search_memories\"")
    );
    // The same memories reach the model.
    let recalled = as_calls
        .messages
        .iter()
        .flat_map(Message::tool_results)
        .map(|result| skald_core::message::join_text(&result.content))
        .collect::<Vec<_>>();
    assert!(!recalled.is_empty());
    let all_text: String = as_text.messages.iter().map(Message::plain_text).collect();
    for result in recalled {
        assert!(all_text.contains(&result), "{result}");
    }
}

#[tokio::test]
async fn the_pipeline_reports_what_it_saved_and_offers_the_fetch_tool() {
    let (sessions, refs) = stores();
    sessions
        .append_message(
            &tenant_named(TENANT),
            &session_named(SESSION),
            Message::text(Role::User, "run the build"),
        )
        .unwrap();
    let log = "2026-01-01 INFO step ok\n".repeat(2_000);
    let mut read = skill_read("c1");
    if let Some(Block::ToolCall(call)) = read[0].content.first_mut() {
        call.name = "bash".into();
        call.arguments = json!({"command": "make"});
    }
    if let Some(Block::ToolResult(result)) = read[1].content.first_mut() {
        result.content = vec![Block::text(log)].into();
    }
    for message in read {
        sessions
            .append_message(&tenant_named(TENANT), &session_named(SESSION), message)
            .unwrap();
    }
    sessions
        .append_message(
            &tenant_named(TENANT),
            &session_named(SESSION),
            Message::text(Role::Assistant, "built"),
        )
        .unwrap();
    let policy = Policy::preset("sccs").unwrap();
    let mut state = SessionState::default();
    let view = prepare_view(&request(&sessions, &refs, &policy, None, None), &mut state)
        .await
        .unwrap();
    assert_eq!(view.report.refs_stored, 1);
    assert!(view.tokens_saved() > 1_000, "{}", view.tokens_saved());
    assert_eq!(view.tools[0].name, "fetch_original_data");
    assert!(view.system_prompt_addition().unwrap().contains("REF_ID"));
    assert_eq!(state.stored_ref_count(), 1);
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
    let (sessions, refs) = stores();
    let store = fixture_store();
    let policy = Policy::preset("none").unwrap();
    let identity = identity();
    // Placement is under test, not relevance: every question's hits are kept.
    let settings = RecallSettings {
        min_text_relevance: 0.0,
        ..RecallSettings::default()
    };
    let hook = RecallHook {
        store: &store,
        embedder: None,
        identity: &identity,
        settings: &settings,
        offer_tools: true,
        simulated_calls: true,
    };
    let mut state = SessionState::default();
    let mut previous: Option<skald_engine::ModelView> = None;
    let mut now_ms = MAY_1_2023;
    for (turn, question) in BILLING_QUESTIONS.iter().enumerate() {
        append(&*sessions, Message::text(Role::User, *question));
        for call in 0..2 {
            now_ms += 20_000;
            let mut view_request = request(&sessions, &refs, &policy, Some(&hook), None);
            view_request.now_ms = now_ms;
            let view = prepare_view(&view_request, &mut state).await.unwrap();
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
    let mut view_request = request(&sessions, &refs, &policy, Some(&hook), None);
    view_request.now_ms = now_ms + 600_000;
    let view = prepare_view(&view_request, &mut state).await.unwrap();
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
