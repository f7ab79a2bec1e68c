//! Per-turn recall, session-start injection, skill and tool memories against an in-memory store
//! (seed 002, Components 2–5).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod memory_common;

use memory_common::*;
use serde_json::json;
use skald_core::memory::recall::{DropReason, RecallLevel, RecallSettings, SkipReason};
use skald_core::memory::usage::ToolCallReport;
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_core::render::render_messages;
use skald_engine::internal::memory::{
    augment_skill_reads, load_tool_stats, recall_for_turn, recall_for_turn_memo, record_skill_use,
    record_tool_reports, session_start_memory,
};
use skald_store::memories::{MemoryStore, NewMemory};

fn conversation() -> Vec<Message> {
    vec![
        Message::text(Role::System, "You are a helpful SRE assistant."),
        Message::text(Role::User, "The billing service feels slow today."),
        Message::text(Role::Assistant, "Which part is slow?"),
        Message::text(
            Role::User,
            "How do I optimise the billing database queries on invoices?",
        ),
    ]
}

#[tokio::test]
async fn recall_injects_a_simulated_search_after_the_latest_user_message() {
    let store = fixture_store();
    let outcome = recall_for_turn(
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &RecallSettings::default(),
        conversation(),
    )
    .await;
    let report = &outcome.report;
    assert_eq!(report.skipped, None);
    assert_eq!(report.error, None);
    assert_eq!(
        report.query.as_deref(),
        Some(
            "How do I optimise the billing database queries on invoices?\nThe billing service feels slow today."
        )
    );
    assert!(report.tokens_injected > 0 && report.tokens_injected <= 1600);
    assert_eq!(outcome.messages.len(), 6);
    assert_eq!(outcome.messages[4].role, Role::Assistant);
    assert_eq!(outcome.messages[5].role, Role::ToolResult);
    insta::assert_snapshot!(render_messages(&outcome.messages));
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
    let outcome = recall_for_turn(
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &RecallSettings::default(),
        messages,
    )
    .await;
    let query = outcome.report.query.unwrap();
    assert_eq!(query.lines().count(), 5);
    assert!(query.starts_with("Tell me about invoices setup"));
    assert!(!query.contains("kafka"));
}

#[tokio::test]
async fn recall_injection_is_for_this_call_only_and_byte_identical() {
    let store = fixture_store();
    let settings = RecallSettings::default();
    let first = recall_for_turn(
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &settings,
        conversation(),
    )
    .await;
    let again = recall_for_turn(
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &settings,
        conversation(),
    )
    .await;
    assert_eq!(first.messages, again.messages);
    // The next turn: the caller's stored messages never held the injection, and the new one
    // goes after the new latest user message.
    let mut next = conversation();
    next.push(Message::text(
        Role::Assistant,
        "Add an index on customer_id.",
    ));
    next.push(Message::text(
        Role::User,
        "Did that index fix the invoices queries?",
    ));
    let later = recall_for_turn(
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &settings,
        next.clone(),
    )
    .await;
    assert_eq!(later.messages.len(), next.len() + 2);
    assert_eq!(&later.messages[..next.len()], &next[..]);
    let calls: Vec<&ToolCall> = later
        .messages
        .iter()
        .flat_map(Message::tool_calls)
        .collect();
    assert_eq!(calls.len(), 1);
}

#[tokio::test]
async fn greetings_skip_recall_and_say_why() {
    let store = fixture_store();
    for text in ["hello", "谢谢", "thanks!"] {
        let messages = vec![Message::text(Role::User, text)];
        let outcome = recall_for_turn(
            &store,
            None,
            &tenant_named(TENANT),
            &identity(),
            &RecallSettings::default(),
            messages.clone(),
        )
        .await;
        assert!(
            matches!(outcome.report.skipped, Some(SkipReason::Greeting { .. })),
            "{text}: {:?}",
            outcome.report
        );
        assert_eq!(outcome.messages, messages);
        assert_eq!(outcome.report.query, None);
    }
}

#[tokio::test]
async fn messages_of_three_chars_or_fewer_skip_recall() {
    let store = fixture_store();
    let messages = vec![
        Message::text(Role::User, "How do I optimise the billing database?"),
        Message::text(Role::User, "why"),
    ];
    let outcome = recall_for_turn(
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &RecallSettings::default(),
        messages.clone(),
    )
    .await;
    assert_eq!(
        outcome.report.skipped,
        Some(SkipReason::TooShort { chars: 3, min: 4 })
    );
    assert_eq!(outcome.messages, messages);
}

#[tokio::test]
async fn threshold_drops_weak_matches_and_other_users_never_show() {
    let store = fixture_store();
    let outcome = recall_for_turn(
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &RecallSettings::default(),
        vec![Message::text(
            Role::User,
            "Why are the invoices queries on the billing database slow?",
        )],
    )
    .await;
    let report = &outcome.report;
    let lunch = "viking://user/alice/memories/events/2023/05/12/team-lunch.md";
    assert!(
        report
            .dropped
            .iter()
            .any(|d| d.uri == lunch && d.reason == DropReason::BelowThreshold),
        "{report:#?}"
    );
    assert!(report.kept.iter().all(|k| k.uri != lunch));
    let text = render_messages(&outcome.messages);
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
    let outcome = recall_for_turn(
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &settings,
        conversation(),
    )
    .await;
    let report = &outcome.report;
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
    let result = outcome.messages[5].tool_results().next().unwrap();
    let body: serde_json::Value =
        serde_json::from_str(&skald_core::message::join_text(&result.content)).unwrap();
    for memory in body["memories"].as_array().unwrap() {
        let uri =
            skald_core::memory::uri::MemoryUri::parse(memory["uri"].as_str().unwrap()).unwrap();
        let stored = store.get(&tenant_named(TENANT), &uri).unwrap();
        let shown = memory["abstract"]
            .as_str()
            .or(memory["overview"].as_str())
            .or(memory["content"].as_str())
            .unwrap();
        assert!([&stored.l0, &stored.l1, &stored.l2].contains(&&shown.to_owned()));
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
        let outcome = recall_for_turn(
            &store,
            None,
            &tenant_named(TENANT),
            &identity(),
            &settings,
            conversation(),
        )
        .await;
        let text = render_messages(&outcome.messages[5..]);
        assert!(text.contains(field), "{level:?}: {text}");
        assert!(outcome.report.kept.iter().all(|k| k.level <= level));
    }
}

#[tokio::test]
async fn search_failure_injects_nothing_and_reports_it() {
    let store = FailingSearch(fixture_store());
    let outcome = recall_for_turn(
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &RecallSettings::default(),
        conversation(),
    )
    .await;
    assert_eq!(outcome.messages, conversation());
    assert!(
        outcome
            .report
            .error
            .as_deref()
            .unwrap()
            .contains("disk I/O")
    );
}

#[tokio::test]
async fn embedder_failure_falls_back_to_text_search() {
    let store = fixture_store();
    let outcome = recall_for_turn(
        &store,
        Some(&FailingEmbedder),
        &tenant_named(TENANT),
        &identity(),
        &RecallSettings::default(),
        conversation(),
    )
    .await;
    assert!(outcome.report.embedding_error.is_some());
    assert!(!outcome.report.kept.is_empty());
}

#[tokio::test]
async fn vectors_keep_a_semantic_match_with_no_shared_words() {
    let store = fixture_store();
    let embedder = KeywordEmbedder;
    let uri = skald_core::memory::uri::MemoryUri::parse(
        "viking://user/alice/memories/preferences/background.md",
    )
    .unwrap();
    store
        .add(
            &tenant_named(TENANT),
            NewMemory::new(uri.clone(), "Alice likes a black background theme.")
                .created_at(DAY_MS)
                .with_embedding(embed(&embedder, "dark mode colours").await),
        )
        .unwrap();
    let messages = vec![Message::text(Role::User, "dark mode colours")];
    let outcome = recall_for_turn(
        &store,
        Some(&embedder),
        &tenant_named(TENANT),
        &identity(),
        &RecallSettings::default(),
        messages,
    )
    .await;
    let kept = outcome
        .report
        .kept
        .iter()
        .find(|k| k.uri == uri.as_str())
        .expect("kept by cosine");
    assert_eq!(kept.relevance.term_coverage, 0.0);
    assert!(kept.relevance.cosine.unwrap() > 0.99);
}

#[tokio::test]
async fn profile_and_tool_memories_are_injected_at_session_start() {
    let store = fixture_store();
    let reports: Vec<ToolCallReport> = (0..12)
        .map(|n| {
            let error = (n % 4 == 0).then(|| "bash: line 3: psql: command not found".to_owned());
            ToolCallReport::new("bash", error.is_none(), Some(1200 + n * 10), error)
        })
        .chain((0..4).map(|_| ToolCallReport::new("read", true, Some(15), None)))
        .collect();
    record_tool_reports(&store, &tenant_named(TENANT), "main", &reports).unwrap();
    let session = session_start_memory(
        &store,
        &tenant_named(TENANT),
        &identity(),
        &RecallSettings::default(),
    );
    assert!(session.report.errors.is_empty(), "{:?}", session.report);
    assert_eq!(session.report.profile_entries, 2);
    let prompt = session.system_prompt_addition.clone().unwrap();
    assert!(prompt.starts_with("## User Profile\nAlice Martin"));
    insta::assert_snapshot!("session_start_system_prompt", prompt);
    insta::assert_snapshot!(
        "session_start_directory",
        render_messages(&session.apply(conversation()))
    );
}

#[tokio::test]
async fn session_start_snapshot_is_sticky_across_turns() {
    let store = fixture_store();
    let settings = RecallSettings::default();
    let session = session_start_memory(&store, &tenant_named(TENANT), &identity(), &settings);
    // A memory written during the session does not change what this session was given.
    store
        .add(
            &tenant_named(TENANT),
            NewMemory::new(
                skald_core::memory::uri::MemoryUri::parse(
                    "viking://user/alice/memories/profile/pets.md",
                )
                .unwrap(),
                "Alice has a cat named Miso.",
            ),
        )
        .unwrap();
    let mut turn_two = conversation();
    turn_two.push(Message::text(Role::Assistant, "Let me look."));
    turn_two.push(Message::text(Role::User, "Any news?"));
    let one = session.apply(conversation());
    let two = session.apply(turn_two);
    assert_eq!(&two[..one.len()], &one[..]);
    let fresh = session_start_memory(&store, &tenant_named(TENANT), &identity(), &settings);
    assert_ne!(fresh.system_prompt_addition, session.system_prompt_addition);
}

#[tokio::test]
async fn session_start_injects_nothing_when_switched_off_or_empty() {
    let store = skald_store::test_stores::memory_store();
    let session = session_start_memory(
        &store,
        &tenant_named(TENANT),
        &identity(),
        &RecallSettings::default(),
    );
    assert_eq!(session.system_prompt_addition, None);
    assert!(session.directory_messages.is_empty());
    let off = RecallSettings {
        profile: false,
        directory: false,
        tool_memory: false,
        ..RecallSettings::default()
    };
    let session = session_start_memory(&fixture_store(), &tenant_named(TENANT), &identity(), &off);
    assert_eq!(session.system_prompt_addition, None);
    assert!(session.directory_messages.is_empty());
}

fn skill_read_messages(original: &str) -> Vec<Message> {
    vec![
        Message::text(Role::User, "Make a deck for the Q3 review."),
        Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "read".into(),
                arguments: json!({"path": "/home/alice/.openclaw/skills/pptx/SKILL.md"}),
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

#[tokio::test]
async fn skill_augmentation_keeps_the_original_intact() {
    let store = fixture_store();
    for success in [true, true, true, false] {
        record_skill_use(&store, &tenant_named(TENANT), "main", "pptx", success).unwrap();
    }
    let original = "## Create Presentation\nCreate a PowerPoint presentation with python-pptx.\n";
    let mut messages = skill_read_messages(original);
    let done = augment_skill_reads(&store, &tenant_named(TENANT), &identity(), &mut messages);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].skill, "pptx");
    assert!(done[0].appended_chars > 0);
    let result = messages[2].tool_results().next().unwrap();
    let text = skald_core::message::join_text(&result.content);
    assert!(text.starts_with(original));
    assert_eq!(result.content.len(), 1);
    insta::assert_snapshot!(render_messages(&messages));
    // Once only: a second pass changes nothing.
    let before = messages.clone();
    assert!(
        augment_skill_reads(&store, &tenant_named(TENANT), &identity(), &mut messages).is_empty()
    );
    assert_eq!(messages, before);
}

#[tokio::test]
async fn skill_reads_with_no_memory_and_other_reads_are_untouched() {
    let store = fixture_store();
    let mut messages = skill_read_messages("# Other skill");
    if let Some(Block::ToolCall(call)) = messages[1].content.first_mut() {
        call.arguments = json!({"path": "skills/unknown/SKILL.md"});
    }
    let before = messages.clone();
    let done = augment_skill_reads(&store, &tenant_named(TENANT), &identity(), &mut messages);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].appended_chars, 0);
    assert_eq!(messages, before);
    let mut readme = skill_read_messages("# Readme");
    if let Some(Block::ToolCall(call)) = readme[1].content.first_mut() {
        call.arguments = json!({"path": "skills/pptx/README.md"});
    }
    assert!(
        augment_skill_reads(&store, &tenant_named(TENANT), &identity(), &mut readme).is_empty()
    );
}

#[tokio::test]
async fn tool_reports_merge_into_versioned_stats() {
    let store = fixture_store();
    let first = [
        ToolCallReport::new("bash", true, Some(1000), None),
        ToolCallReport::new("bash", false, Some(2000), Some("exit status 1".into())),
    ];
    record_tool_reports(&store, &tenant_named(TENANT), "main", &first).unwrap();
    let second = [
        ToolCallReport::new("bash", true, Some(600), None),
        ToolCallReport::new("bad tool name", true, None, None),
    ];
    let update = record_tool_reports(&store, &tenant_named(TENANT), "main", &second).unwrap();
    assert_eq!(update.skipped.len(), 1);
    assert_eq!(update.skipped[0].0, "bad tool name");
    let uri = skald_core::memory::uri::MemoryUri::parse("viking://agent/main/tools/bash").unwrap();
    let memory = store.get(&tenant_named(TENANT), &uri).unwrap();
    assert_eq!(memory.version, 2);
    assert_eq!(memory.l0, "bash: 3 calls, 66% ok, avg 1.2 s");
    assert_eq!(store.history(&tenant_named(TENANT), &uri).unwrap().len(), 2);
    let (stats, problems) = load_tool_stats(&store, &tenant_named(TENANT), "main").unwrap();
    assert!(problems.is_empty());
    assert_eq!(stats.len(), 1);
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
    let session = session_start_memory(&store, &tenant_named(TENANT), &identity(), &settings);
    let mut messages = conversation();
    messages.push(Message::text(
        Role::Assistant,
        "Check the invoices index first.",
    ));
    messages.push(Message::text(
        Role::User,
        "Did we already fix slow invoices queries before?",
    ));
    // The system prompt addition goes into the system message; the listing stays after the
    // first user message; recall goes after the latest one.
    if let Some(Block::Text(system)) = messages[0].content.first_mut() {
        system.text.push_str("\n\n");
        system
            .text
            .push_str(session.system_prompt_addition.as_deref().unwrap());
    }
    let with_listing = session.apply(messages);
    let outcome = recall_for_turn(
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &settings,
        with_listing.clone(),
    )
    .await;
    assert_eq!(&outcome.messages[..7], &with_listing[..7]);
    insta::assert_snapshot!(render_messages(&outcome.messages));
}

#[tokio::test]
async fn the_calls_of_one_turn_reuse_its_recall_and_a_new_question_searches_again() {
    let store = fixture_store();
    let settings = RecallSettings::default();
    let mut memo = None;
    let first = recall_for_turn_memo(
        &mut memo,
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &settings,
        conversation(),
    )
    .await;
    assert!(first.report.tokens_injected > 0);
    // A memory that would change the ranking arrives mid-turn: the turn keeps what it injected.
    store
        .add(
            &tenant_named(TENANT),
            NewMemory::new(
                skald_core::memory::uri::MemoryUri::parse(
                    "viking://user/alice/memories/preferences/billing-queries",
                )
                .unwrap(),
                "Billing database queries on invoices: always use the invoices_by_customer index.",
            ),
        )
        .unwrap();
    let mut longer = conversation();
    longer.push(Message::text(
        Role::Assistant,
        "Looking at the invoices table.",
    ));
    let second = recall_for_turn_memo(
        &mut memo,
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &settings,
        longer,
    )
    .await;
    assert_eq!(second.report, first.report);
    assert_eq!(second.messages[..first.messages.len()], first.messages[..]);

    let mut next = conversation();
    next.push(Message::text(
        Role::User,
        "Which index should the billing invoices queries use?",
    ));
    let third = recall_for_turn_memo(
        &mut memo,
        &store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &settings,
        next,
    )
    .await;
    assert_ne!(third.report.query, first.report.query);
    assert!(
        third
            .report
            .kept
            .iter()
            .any(|memory| memory.uri.ends_with("billing-queries")),
        "{:?}",
        third.report
    );
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
