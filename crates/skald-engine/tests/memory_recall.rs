//! Per-turn recall, session-start injection, skill and tool memories as the engine puts them in
//! a call (seed 002, Components 2–5): each case is the host's conversation sent to
//! `Engine::assemble` with memory on, and what the view for the next call holds. Snapshot tests
//! show the exact messages the model gets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod memory_common;

use std::sync::Arc;

use memory_common::*;
use serde_json::json;
use skald_core::ids::SessionId;
use skald_core::memory::recall::{DropReason, RecallLevel, RecallSettings, SkipReason};
use skald_core::memory::uri::MemoryUri;
use skald_core::memory::usage::ToolCallReport;
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_core::render::render_messages;
use skald_engine::storage::{MemoryLevel, MemoryStore, NewMemory};
use skald_engine::{AssembleInput, Engine, ManualClock, ModelView, Stores, ViewOptions};
use skald_llm::Embedder;
use tokio_util::task::TaskTracker;

/// The memory tool recall simulates a call of.
const SEARCH_MEMORIES: &str = "search_memories";

const SESSION: &str = "s-recall";

fn session() -> SessionId {
    SessionId::parse(SESSION).unwrap()
}

fn conversation() -> Vec<Message> {
    vec![
        Message::text(Role::User, "The billing service feels slow today."),
        Message::text(Role::Assistant, "Which part is slow?"),
        Message::text(
            Role::User,
            "How do I optimise the billing database queries on invoices?",
        ),
    ]
}

/// An engine over `memories` (sessions and refs of its own) recalling Alice's memories (agent
/// `main`) with `recall`, queries embedded by `embedder` when there is one.
fn engine_with(
    memories: &Arc<dyn MemoryStore>,
    recall: RecallSettings,
    embedder: Option<Arc<dyn Embedder>>,
) -> Engine {
    let clock = Arc::new(ManualClock::new(MAY_1_2023 + 30 * DAY_MS));
    let mut config = alice_config("none", clock);
    config.memory.recall = recall;
    config.embedder = embedder;
    let stores = Stores {
        memories: memories.clone(),
        ..Stores::in_memory().unwrap()
    };
    Engine::new(stores, config, TaskTracker::new()).unwrap()
}

fn engine(memories: &Arc<dyn MemoryStore>) -> Engine {
    engine_with(memories, RecallSettings::default(), None)
}

/// The host sends its whole conversation, `messages`: the view for the next call, memory on.
async fn call(skald: &Engine, messages: Vec<Message>) -> ModelView {
    call_in(skald, &session(), messages).await
}

/// [`call`] in `session`.
async fn call_in(skald: &Engine, session: &SessionId, messages: Vec<Message>) -> ModelView {
    let input = AssembleInput {
        messages: Some(messages),
        source_format: "openclaw-session".into(),
        options: ViewOptions {
            with_memory: true,
            ..ViewOptions::default()
        },
        ..AssembleInput::default()
    };
    skald
        .assemble(&tenant_named(TENANT), session, input)
        .await
        .unwrap()
        .view
        .view
}

/// The view's `search_memories` calls: the recalls it carries.
fn recall_calls(view: &ModelView) -> usize {
    view.messages
        .iter()
        .flat_map(Message::tool_calls)
        .filter(|call| call.name == SEARCH_MEMORIES)
        .count()
}

/// The tool results of a `search_memories` call, as the model reads them.
fn recalled_memories(message: &Message) -> Vec<serde_json::Value> {
    let result = message.tool_results().next().unwrap();
    let body: serde_json::Value =
        serde_json::from_str(&skald_core::message::join_text(&result.content)).unwrap();
    body["memories"].as_array().unwrap().clone()
}

#[tokio::test]
async fn recall_injects_a_simulated_search_after_the_latest_user_message() {
    let store = fixture_store();
    let view = call(&engine(&store), conversation()).await;
    let report = &view.memory.as_ref().unwrap().recall;
    assert_eq!(report.skipped, None);
    assert_eq!(report.error, None);
    assert_eq!(
        report.query.as_deref(),
        Some(
            "How do I optimise the billing database queries on invoices?\nThe billing service feels slow today."
        )
    );
    assert!(report.tokens_injected > 0 && report.tokens_injected <= 1600);
    // The question, then the search and its result: the last two messages.
    let [.., question, search, found] = view.messages.as_slice() else {
        panic!("{:#?}", view.messages);
    };
    assert_eq!(question.plain_text(), conversation()[2].plain_text());
    assert_eq!(search.role, Role::Assistant);
    assert_eq!(found.role, Role::ToolResult);
    assert_eq!(recall_calls(&view), 1);
    insta::assert_snapshot!(render_messages(&view.messages));
}

#[tokio::test]
async fn recall_query_uses_the_last_five_user_messages() {
    let store = fixture_store();
    let mut messages = Vec::new();
    for topic in ["kafka", "redis", "nginx", "grafana", "billing", "invoices"] {
        messages.push(Message::text(
            Role::User,
            format!("Tell me about {topic} setup"),
        ));
        messages.push(Message::text(Role::Assistant, "Sure."));
    }
    messages.push(Message::text(
        Role::User,
        "Tell me about invoices setup again",
    ));
    let view = call(&engine(&store), messages).await;
    let query = view.memory.unwrap().recall.query.unwrap();
    assert_eq!(query.lines().count(), 5);
    assert!(query.starts_with("Tell me about invoices setup again"));
    assert!(!query.contains("kafka"));
    assert!(!query.contains("redis"));
}

#[tokio::test]
async fn recall_is_sent_with_the_call_never_stored_and_the_same_bytes_again() {
    let store = fixture_store();
    let skald = engine(&store);
    let first = call(&skald, conversation()).await;
    let again = call(&skald, conversation()).await;
    assert_eq!(first.messages, again.messages);
    // The stored session never holds an injection.
    let stored = skald
        .stored_context(&tenant_named(TENANT), &session())
        .unwrap();
    let texts: Vec<String> = stored.iter().map(Message::plain_text).collect();
    let sent: Vec<String> = conversation().iter().map(Message::plain_text).collect();
    assert_eq!(texts, sent);
    assert!(stored.iter().all(|m| m.tool_calls().next().is_none()));
    // The next turn: the new recall goes after the new latest user message; this turn's stays
    // where it was sent or is reported gone (see `a_second_turn_with_profile_listing_and_recall`).
    let mut next = conversation();
    next.push(Message::text(
        Role::Assistant,
        "Add an index on customer_id.",
    ));
    next.push(Message::text(
        Role::User,
        "Did that index fix the invoices queries?",
    ));
    let later = call(&skald, next).await;
    let [.., question, search, _] = later.messages.as_slice() else {
        panic!("{:#?}", later.messages);
    };
    assert_eq!(
        question.plain_text(),
        "Did that index fix the invoices queries?"
    );
    assert_eq!(search.tool_calls().next().unwrap().name, SEARCH_MEMORIES);
    let kept = &later.memory.as_ref().unwrap().kept_recalls;
    assert_eq!(kept.kept + kept.left.len(), 1, "{kept:?}");
    assert_eq!(recall_calls(&later), 1 + kept.kept);
}

#[tokio::test]
async fn greetings_skip_recall_and_say_why() {
    let store = fixture_store();
    for text in ["hello", "谢谢", "thanks!"] {
        let view = call(&engine(&store), vec![Message::text(Role::User, text)]).await;
        let report = &view.memory.as_ref().unwrap().recall;
        assert!(
            matches!(report.skipped, Some(SkipReason::Greeting { .. })),
            "{text}: {report:?}"
        );
        assert_eq!(report.query, None);
        assert_eq!(recall_calls(&view), 0, "{text}");
    }
}

#[tokio::test]
async fn messages_of_three_chars_or_fewer_skip_recall() {
    let store = fixture_store();
    let messages = vec![
        Message::text(Role::User, "How do I optimise the billing database?"),
        Message::text(Role::Assistant, "Which queries?"),
        Message::text(Role::User, "why"),
    ];
    let view = call(&engine(&store), messages).await;
    assert_eq!(
        view.memory.as_ref().unwrap().recall.skipped,
        Some(SkipReason::TooShort { chars: 3, min: 4 })
    );
    assert_eq!(recall_calls(&view), 0);
}

#[tokio::test]
async fn threshold_drops_weak_matches_and_other_users_never_show() {
    let store = fixture_store();
    let view = call(
        &engine(&store),
        vec![Message::text(
            Role::User,
            "Why are the invoices queries on the billing database slow?",
        )],
    )
    .await;
    let report = &view.memory.as_ref().unwrap().recall;
    let lunch = "viking://user/alice/memories/events/2023/05/12/team-lunch.md";
    assert!(
        report
            .dropped
            .iter()
            .any(|d| d.uri == lunch && d.reason == DropReason::BelowThreshold),
        "{report:#?}"
    );
    assert!(report.kept.iter().all(|k| k.uri != lunch));
    let text = render_messages(&view.messages);
    assert!(!text.contains("/user/bob/"), "{text}");
    assert!(text.contains("billing-db.md"));
}

#[tokio::test]
async fn budget_limits_what_is_injected_without_cutting_entries() {
    let store = fixture_store();
    let settings = RecallSettings {
        max_tokens: 60,
        level: RecallLevel::L2,
        ..RecallSettings::default()
    };
    let skald = engine_with(&store, settings, None);
    let view = call(&skald, conversation()).await;
    let report = &view.memory.as_ref().unwrap().recall;
    assert!(report.tokens_injected <= 60, "{report:#?}");
    assert!(!report.kept.is_empty());
    assert!(
        report
            .dropped
            .iter()
            .any(|d| d.reason == DropReason::OverBudget),
        "{report:#?}"
    );
    // Every injected text is a whole level of its memory.
    for memory in recalled_memories(view.messages.last().unwrap()) {
        let uri = MemoryUri::parse(memory["uri"].as_str().unwrap()).unwrap();
        let levels = [MemoryLevel::L0, MemoryLevel::L1, MemoryLevel::L2].map(|level| {
            skald
                .read_memory(&tenant_named(TENANT), &uri, level)
                .unwrap()
                .text
        });
        let shown = memory["abstract"]
            .as_str()
            .or(memory["overview"].as_str())
            .or(memory["content"].as_str())
            .unwrap();
        assert!(levels.contains(&shown.to_owned()), "{shown}");
    }
}

#[tokio::test]
async fn level_setting_chooses_abstract_overview_or_content() {
    let store = fixture_store();
    for (level, field) in [
        (RecallLevel::L0, "\"abstract\""),
        (RecallLevel::L1, "\"overview\""),
        (RecallLevel::L2, "\"content\""),
    ] {
        let settings = RecallSettings {
            level,
            ..RecallSettings::default()
        };
        let view = call(&engine_with(&store, settings, None), conversation()).await;
        let recalled = &view.messages[view.messages.len() - 2..];
        let text = render_messages(recalled);
        assert!(text.contains(field), "{level:?}: {text}");
        let report = &view.memory.as_ref().unwrap().recall;
        assert!(report.kept.iter().all(|k| k.level <= level));
    }
}

#[tokio::test]
async fn search_failure_injects_nothing_and_reports_it() {
    let store: Arc<dyn MemoryStore> = Arc::new(FailingSearch(fixture_store()));
    let view = call(&engine(&store), conversation()).await;
    assert_eq!(recall_calls(&view), 0);
    assert_eq!(
        view.messages.last().unwrap().plain_text(),
        conversation()[2].plain_text()
    );
    let report = &view.memory.as_ref().unwrap().recall;
    assert!(report.error.as_deref().unwrap().contains("disk I/O"));
}

#[tokio::test]
async fn embedder_failure_falls_back_to_text_search() {
    let store = fixture_store();
    let skald = engine_with(
        &store,
        RecallSettings::default(),
        Some(Arc::new(FailingEmbedder)),
    );
    let view = call(&skald, conversation()).await;
    let report = &view.memory.as_ref().unwrap().recall;
    assert!(report.embedding_error.is_some());
    assert!(!report.kept.is_empty());
    assert_eq!(recall_calls(&view), 1);
}

#[tokio::test]
async fn vectors_keep_a_semantic_match_with_no_shared_words() {
    let store = fixture_store();
    let uri = MemoryUri::parse("viking://user/alice/memories/preferences/background.md").unwrap();
    store
        .add(
            &tenant_named(TENANT),
            NewMemory::new(uri.clone(), "Alice likes a black background theme.")
                .created_at(DAY_MS)
                .with_embedding(embed(&KeywordEmbedder, "dark mode colours").await),
        )
        .unwrap();
    let skald = engine_with(
        &store,
        RecallSettings::default(),
        Some(Arc::new(KeywordEmbedder)),
    );
    let view = call(&skald, vec![Message::text(Role::User, "dark mode colours")]).await;
    let report = view.memory.unwrap().recall;
    let kept = report
        .kept
        .iter()
        .find(|k| k.uri == uri.as_str())
        .expect("kept by cosine");
    assert_eq!(kept.relevance.term_coverage, 0.0);
    assert!(kept.relevance.cosine.unwrap() > 0.99);
}

/// Adds `reports` to agent `main`'s tool statistics, as a turn of the engine records them.
async fn record_tool_reports(skald: &Engine, reports: &[ToolCallReport]) {
    let turn = skald
        .begin_turn(&tenant_named(TENANT), &SessionId::parse("tools").unwrap())
        .await;
    turn.record_tool_reports("main", reports).unwrap();
}

#[tokio::test]
async fn profile_and_tool_memories_are_injected_at_session_start() {
    let store = fixture_store();
    let skald = engine(&store);
    let reports: Vec<ToolCallReport> = (0..12)
        .map(|n| {
            let error = (n % 4 == 0).then(|| "bash: line 3: psql: command not found".to_owned());
            ToolCallReport::new("bash", error.is_none(), Some(1200 + n * 10), error)
        })
        .chain((0..4).map(|_| ToolCallReport::new("read", true, Some(15), None)))
        .collect();
    record_tool_reports(&skald, &reports).await;
    let view = call(&skald, conversation()).await;
    let session = &view.memory.as_ref().unwrap().session_start;
    assert!(session.errors.is_empty(), "{session:?}");
    assert_eq!(session.profile_entries, 2);
    let prompt = view.memory_addition.clone().unwrap();
    assert!(prompt.starts_with("## User Profile\nAlice Martin"));
    insta::assert_snapshot!("session_start_system_prompt", prompt);
    insta::assert_snapshot!("session_start_directory", render_messages(&view.messages));
}

#[tokio::test]
async fn session_start_snapshot_is_sticky_across_turns() {
    let store = fixture_store();
    let skald = engine(&store);
    let one = call(&skald, conversation()).await;
    // A memory written during the session does not change what this session was given.
    skald
        .remember(
            &tenant_named(TENANT),
            &identity(),
            "Alice has a cat named Miso.",
            skald_core::memory::uri::MemoryCategory::Profile,
            None,
        )
        .await
        .unwrap();
    let mut turn_two = conversation();
    turn_two.push(Message::text(Role::Assistant, "Let me look."));
    turn_two.push(Message::text(Role::User, "Any news on the invoices index?"));
    let two = call(&skald, turn_two).await;
    // The same system prompt addition, and the same listing after the first user message.
    assert_eq!(two.memory_addition, one.memory_addition);
    assert_eq!(&two.messages[..3], &one.messages[..3]);
    // A new session starts with what is remembered now.
    let fresh = call_in(
        &skald,
        &SessionId::parse("s-fresh").unwrap(),
        conversation(),
    )
    .await;
    assert_ne!(fresh.memory_addition, one.memory_addition);
    assert!(fresh.memory_addition.unwrap().contains("Miso"));
}

#[tokio::test]
async fn session_start_injects_nothing_when_switched_off_or_empty() {
    let off = RecallSettings {
        profile: false,
        directory: false,
        tool_memory: false,
        ..RecallSettings::default()
    };
    for (store, settings) in [
        (empty_store(), RecallSettings::default()),
        (fixture_store(), off),
    ] {
        let view = call(&engine_with(&store, settings, None), conversation()).await;
        let session = &view.memory.as_ref().unwrap().session_start;
        assert_eq!(view.memory_addition, None);
        assert_eq!(session.directory_entries, 0);
        assert!(
            view.messages
                .iter()
                .flat_map(Message::tool_calls)
                .all(|call| call.name == SEARCH_MEMORIES),
            "{:#?}",
            view.messages
        );
    }
}

/// `[memory] teach_cli` (issue 28, gap 9; seed 002's first recommendation): an agent with a
/// shell and no memory tools is told at session start which `skald` commands reach its memory,
/// even when memory holds nothing yet, after the profile and tool sections; off, no word of it.
#[tokio::test]
async fn teach_cli_names_the_memory_commands_in_the_session_start_prompt() {
    let taught = RecallSettings {
        teach_cli: true,
        ..RecallSettings::default()
    };
    let empty = call(
        &engine_with(&empty_store(), taught.clone(), None),
        conversation(),
    )
    .await;
    let prompt = empty.memory_addition.clone().unwrap();
    for command in [
        "skald search --query",
        "skald ls viking://",
        "skald read",
        "skald remember --content",
    ] {
        assert!(prompt.contains(command), "{command} missing: {prompt}");
    }
    assert!(empty.memory.as_ref().unwrap().session_start.cli_taught);

    let full = call(&engine_with(&fixture_store(), taught, None), conversation()).await;
    let prompt = full.memory_addition.clone().unwrap();
    assert!(prompt.starts_with("## User Profile"), "{prompt}");
    assert!(
        prompt.ends_with(skald_core::memory::recall::CLI_MEMORY_SECTION),
        "{prompt}"
    );

    let untaught = call(&engine(&fixture_store()), conversation()).await;
    assert!(!untaught.memory_addition.unwrap().contains("skald search"));
    assert!(!untaught.memory.unwrap().session_start.cli_taught);
}

fn skill_read_messages(path: &str, original: &str) -> Vec<Message> {
    vec![
        Message::text(Role::User, "Make a deck for the Q3 review."),
        Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "read".into(),
                arguments: json!({ "path": path }),
                arguments_text: None,
                extra: Extra::new(),
            })],
        ),
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: "call_1".into(),
                tool_name: Some("read".into()),
                content: vec![Block::text(original)].into(),
                content_form: ContentForm::Text,
                is_error: None,
                details: None,
                extra: Extra::new(),
            })],
        ),
    ]
}

/// The view's result of the conversation's `read` call.
fn read_result(view: &ModelView) -> &ToolResult {
    view.messages
        .iter()
        .flat_map(Message::tool_results)
        .find(|result| result.call_id == "call_1")
        .unwrap()
}

#[tokio::test]
async fn skill_augmentation_keeps_the_original_intact() {
    let store = fixture_store();
    set_skill_usage(store.as_ref(), "pptx", 4, 3);
    let skald = engine(&store);
    let original = "## Create Presentation\nCreate a PowerPoint presentation with python-pptx.\n";
    let messages = skill_read_messages("/home/alice/.openclaw/skills/pptx/SKILL.md", original);
    let view = call(&skald, messages.clone()).await;
    let skills = &view.memory.as_ref().unwrap().skills;
    assert_eq!(skills.len(), 1);
    assert_eq!(skills[0].skill, "pptx");
    assert!(skills[0].appended_chars > 0);
    let result = read_result(&view);
    assert!(skald_core::message::join_text(&result.content).starts_with(original));
    assert_eq!(result.content.len(), 1);
    insta::assert_snapshot!(render_messages(&view.messages));
    // Once only: the next call sends the same result, and the session keeps the original.
    let again = call(&skald, messages).await;
    assert_eq!(read_result(&again), result);
    let stored = skald
        .stored_context(&tenant_named(TENANT), &session())
        .unwrap();
    let stored_result = stored[2].tool_results().next().unwrap();
    assert_eq!(
        skald_core::message::join_text(&stored_result.content),
        original
    );
}

#[tokio::test]
async fn skill_reads_with_no_memory_and_other_reads_are_untouched() {
    let store = fixture_store();
    let unknown = skill_read_messages("skills/unknown/SKILL.md", "# Other skill");
    let view = call(&engine(&store), unknown.clone()).await;
    let skills = &view.memory.as_ref().unwrap().skills;
    assert_eq!(skills.len(), 1);
    assert_eq!(skills[0].appended_chars, 0);
    assert_eq!(
        read_result(&view).content,
        unknown[2].tool_results().next().unwrap().content
    );

    let readme = skill_read_messages("skills/pptx/README.md", "# Readme");
    let view = call(&engine(&store), readme.clone()).await;
    assert!(view.memory.as_ref().unwrap().skills.is_empty());
    assert_eq!(
        read_result(&view).content,
        readme[2].tool_results().next().unwrap().content
    );
}

#[tokio::test]
async fn tool_reports_merge_into_versioned_stats() {
    let store = fixture_store();
    let skald = engine(&store);
    record_tool_reports(
        &skald,
        &[
            ToolCallReport::new("bash", true, Some(1000), None),
            ToolCallReport::new("bash", false, Some(2000), Some("exit status 1".into())),
        ],
    )
    .await;
    record_tool_reports(
        &skald,
        &[
            ToolCallReport::new("bash", true, Some(600), None),
            ToolCallReport::new("bad tool name", true, None, None),
        ],
    )
    .await;
    let uri = MemoryUri::parse("viking://agent/main/tools/bash").unwrap();
    let bash = skald
        .read_memory(&tenant_named(TENANT), &uri, MemoryLevel::L0)
        .unwrap();
    assert_eq!(bash.version, 2);
    assert_eq!(bash.text, "bash: 3 calls, 66% ok, avg 1.2 s");
    assert_eq!(
        skald
            .memory_versions(&tenant_named(TENANT), &uri)
            .unwrap()
            .len(),
        2
    );
    let (stats, problems) = skald.tool_stats(&tenant_named(TENANT), "main").unwrap();
    assert!(problems.is_empty());
    assert_eq!(stats.len(), 1, "the bad tool name is not kept: {stats:?}");
    assert_eq!(stats[0].calls, 3);
    assert_eq!(stats[0].errors[0].pattern, "exit status N");
}

#[tokio::test]
async fn a_second_turn_with_profile_listing_and_recall() {
    let store = fixture_store();
    let settings = RecallSettings {
        directory_max_chars: 600,
        ..RecallSettings::default()
    };
    let skald = engine_with(&store, settings, None);
    let first = call(&skald, conversation()).await;
    let mut messages = conversation();
    messages.push(Message::text(
        Role::Assistant,
        "Check the invoices index first.",
    ));
    messages.push(Message::text(
        Role::User,
        "Did we already fix slow invoices queries before?",
    ));
    // The listing stays after the first user message, and this turn's recall goes after the
    // latest user message. The first turn's recall left: with no prompt cache to keep warm,
    // sending it again costs more than it saves.
    let second = call(&skald, messages).await;
    assert_eq!(&second.messages[..3], &first.messages[..3]);
    let kept = &second.memory.as_ref().unwrap().kept_recalls;
    assert_eq!((kept.kept, kept.left.len()), (0, 1), "{kept:?}");
    assert_eq!(recall_calls(&second), 1);
    assert_eq!(second.memory_addition, first.memory_addition);
    insta::assert_snapshot!(render_messages(&second.messages));
}

#[tokio::test]
async fn the_calls_of_one_turn_reuse_its_recall_and_a_new_question_searches_again() {
    let store = fixture_store();
    let skald = engine(&store);
    let first = call(&skald, conversation()).await;
    let first_report = first.memory.as_ref().unwrap().recall.clone();
    assert!(first_report.tokens_injected > 0);
    // A memory that would change the ranking arrives mid-turn: the turn keeps what it injected.
    store
        .add(
            &tenant_named(TENANT),
            NewMemory::new(
                MemoryUri::parse("viking://user/alice/memories/preferences/billing-queries")
                    .unwrap(),
                "Billing database queries on invoices: always use the invoices_by_customer index.",
            ),
        )
        .unwrap();
    // The same turn's next call: the model ran a tool.
    let mut longer = conversation();
    longer.push(Message::text(
        Role::Assistant,
        "Looking at the invoices table.",
    ));
    let second = call(&skald, longer.clone()).await;
    assert_eq!(second.memory.as_ref().unwrap().recall, first_report);
    assert_eq!(second.messages[..first.messages.len()], first.messages[..]);

    longer.push(Message::text(
        Role::User,
        "Which index should the billing invoices queries use?",
    ));
    let third = call(&skald, longer).await;
    let third_report = &third.memory.as_ref().unwrap().recall;
    assert_ne!(third_report.query, first_report.query);
    assert!(
        third_report
            .kept
            .iter()
            .any(|memory| memory.uri.ends_with("billing-queries")),
        "{third_report:?}"
    );
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

/// One `bash` call of `command` and its result (failed with `output` when `failed`).
fn bash_call(id: &str, command: &str, output: &str, failed: bool) -> Vec<Message> {
    vec![
        Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: id.into(),
                name: "bash".into(),
                arguments: json!({ "command": command }),
                arguments_text: None,
                extra: Extra::new(),
            })],
        ),
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: id.into(),
                tool_name: None,
                content: vec![Block::text(output)].into(),
                content_form: ContentForm::Text,
                is_error: Some(failed),
                details: None,
                extra: Extra::new(),
            })],
        ),
    ]
}

/// Issue 28, gap 10: a tool's memory holds advice learned without a model — which argument
/// patterns of its calls worked and which failed, with the error they got — and the next
/// session's system prompt says it.
#[tokio::test]
async fn tool_memories_say_which_argument_patterns_worked_and_which_failed() {
    let store = empty_store();
    let skald = engine(&store);
    let mut messages = vec![Message::text(
        Role::User,
        "Run the tests and check the database.",
    )];
    for n in 0..3 {
        messages.extend(bash_call(
            &format!("call_t{n}"),
            "cd /repo && cargo test -p core",
            "test result: ok. 12 passed",
            false,
        ));
        messages.extend(bash_call(
            &format!("call_p{n}"),
            "psql -h db -c 'select 1'",
            "bash: line 1: psql: command not found",
            true,
        ));
    }
    messages.push(Message::text(
        Role::Assistant,
        "Tests pass; psql is missing.",
    ));
    let turn = skald_engine::AfterTurn {
        messages: Some(&messages),
        pre_prompt_message_count: Some(0),
        tool_reports: None,
        reported_input_tokens: None,
        current_token_count: None,
        window_tokens: 200_000,
        source_format: "openclaw-session",
    };
    skald
        .after_turn(
            &tenant_named(TENANT),
            &SessionId::parse("s-tools").unwrap(),
            &turn,
        )
        .await
        .unwrap();
    let view = call_in(&skald, &SessionId::parse("s-next").unwrap(), conversation()).await;
    let prompt = view.memory_addition.unwrap();
    assert!(
        prompt.contains("### bash\n- Called 6 times, 50% success rate")
            && prompt.contains("- Worked: `cargo test` (3 of 3 ok)")
            && prompt.contains(
                "- Failed: `psql` (3 of 3 failed: bash: line N: psql: command not found)"
            ),
        "{prompt}"
    );
}

/// Issue 28, gap 2: a skill's memory is written from the turns that use it — a turn that read
/// `skills/pptx/SKILL.md` and then had a call fail counts a use that went wrong and keeps what
/// went wrong under the skill's `issues/`; the next read of the skill gets it appended.
#[tokio::test]
async fn a_turn_that_uses_a_skill_writes_its_use_and_what_went_wrong() {
    let store = empty_store();
    let skald = engine(&store);
    let mut messages = skill_read_messages(
        "/work/skills/pptx/SKILL.md",
        "# PPTX skill\nUse python-pptx.",
    );
    messages.extend(bash_call(
        "call_deck",
        "python make_deck.py",
        "ModuleNotFoundError: No module named 'pptx'",
        true,
    ));
    messages.push(Message::text(Role::Assistant, "python-pptx is missing."));
    let turn = skald_engine::AfterTurn {
        messages: Some(&messages),
        pre_prompt_message_count: Some(0),
        tool_reports: None,
        reported_input_tokens: None,
        current_token_count: None,
        window_tokens: 200_000,
        source_format: "openclaw-session",
    };
    let outcome = skald
        .after_turn(
            &tenant_named(TENANT),
            &SessionId::parse("s-skill").unwrap(),
            &turn,
        )
        .await
        .unwrap();
    assert_eq!(outcome.skill_memories, ["pptx"]);
    let dir = MemoryUri::parse("viking://agent/main/skills/pptx").unwrap();
    let listed: Vec<String> = skald
        .list_memories(&tenant_named(TENANT), &dir)
        .unwrap()
        .into_iter()
        .map(|row| row.uri.to_string())
        .collect();
    assert!(
        listed.contains(&"viking://agent/main/skills/pptx/issues".to_owned())
            && listed.contains(&"viking://agent/main/skills/pptx/stats.json".to_owned()),
        "{listed:?}"
    );
    // The next session that reads the skill is told how it went.
    let view = call_in(
        &skald,
        &SessionId::parse("s-skill-next").unwrap(),
        skill_read_messages(
            "/work/skills/pptx/SKILL.md",
            "# PPTX skill\nUse python-pptx.",
        ),
    )
    .await;
    let appended = skald_core::message::join_text(&read_result(&view).content);
    assert!(
        appended.contains("No module named 'pptx'") && appended.contains("0%"),
        "{appended}"
    );
}
