//! What recall and the session-start snapshot must not inject: a session archive about something
//! else (recall's relevance floor, on the store's real BM25), and a `memory_ls` listing of a
//! store that holds only skald's own tool statistics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod memory_common;

use std::sync::Arc;

use memory_common::*;
use skald_core::ids::SessionId;
use skald_core::memory::recall::{DropReason, RecallSettings};
use skald_core::memory::uri::MemoryUri;
use skald_core::memory::usage::ToolCallReport;
use skald_core::message::{Message, Role};
use skald_engine::memory::RecallReport;
use skald_engine::storage::{MemoryStore, NewMemory};
use skald_engine::{Engine, ManualClock, ModelView, Stores, ViewOptions};
use tokio_util::task::TaskTracker;

const ARCHIVE: &str = "viking://session/s-42/archive_001";

/// The fixture memories (billing, Postgres, a lunch, skills) and the archive of a long session
/// about a flaky CI test: nothing the billing memories are about.
async fn store_with_an_archive() -> Arc<dyn MemoryStore> {
    let store = fixture_store();
    let transcript = [
        "user: The integration test test_upload_resume is flaky on CI again today.",
        "assistant: Let me look at the CI logs. The flaky test fails with a timeout when the \
         upload server starts late.",
        "user: It passes locally every time. Only CI runners fail, maybe one run in five.",
        "assistant: The CI runners are slower; the test waits 2 seconds for the upload server. \
         I will make the flaky test wait for the server's readiness probe instead of sleeping.",
        "user: Good. Also rerun the CI job twice to check the flaky test is fixed.",
        "assistant: Both CI runs passed. The flaky test now waits for readiness; the timeout \
         was the cause. I noted the fix in the test's docstring.",
        "user: Thanks. Next we should look at the slow Docker image build on the runners.",
        "assistant: The image build reinstalls every dependency; caching the layer with the \
         lock file first would save most of it. I can do that in the next session.",
    ]
    .join("\n");
    store
        .add(
            &tenant_named(TENANT),
            NewMemory::new(MemoryUri::parse(ARCHIVE).unwrap(), transcript)
                .with_l0("Session archive: fixing the flaky upload test on CI.")
                .created_at(MAY_1_2023 + 20 * DAY_MS),
        )
        .unwrap();
    record_tool_reports(
        &store,
        &[
            ToolCallReport::new("bash", true, Some(900), None),
            ToolCallReport::new("bash", true, Some(1100), None),
            ToolCallReport::new("bash", false, Some(400), Some("exit status 1".into())),
        ],
    )
    .await;
    store
}

/// An engine over `memories` (sessions and refs in memory) recalling Alice's memories (agent
/// `main`) with `recall`.
fn engine(memories: &Arc<dyn MemoryStore>, recall: RecallSettings) -> Engine {
    let clock = Arc::new(ManualClock::new(MAY_1_2023 + 30 * DAY_MS));
    let mut config = alice_config("none", clock);
    config.memory.recall = recall;
    let stores = Stores {
        memories: memories.clone(),
        ..Stores::in_memory().unwrap()
    };
    Engine::new(stores, config, TaskTracker::new()).unwrap()
}

/// Adds `reports` to agent `main`'s tool statistics, as a turn of the engine records them.
async fn record_tool_reports(store: &Arc<dyn MemoryStore>, reports: &[ToolCallReport]) {
    let skald = engine(store, RecallSettings::default());
    let session = SessionId::parse("tools").unwrap();
    let turn = skald.begin_turn(&tenant_named(TENANT), &session).await;
    turn.record_tool_reports("main", reports).unwrap();
}

/// The first view of a new session with memory on: with `prompt`, an empty session and recall
/// for the prompt the host is about to send; without, a session of one greeting (recall skips
/// it), which the session-start snapshot's listing follows.
async fn first_view(
    store: &Arc<dyn MemoryStore>,
    recall: RecallSettings,
    prompt: Option<&str>,
) -> ModelView {
    let options = ViewOptions {
        with_memory: true,
        pending_prompt: prompt.map(str::to_owned),
        ..ViewOptions::default()
    };
    let skald = engine(store, recall);
    let session = SessionId::parse("s-new").unwrap();
    let messages = match prompt {
        Some(_) => Vec::new(),
        None => vec![Message::text(Role::User, "Hello.")],
    };
    skald
        .ingest(&tenant_named(TENANT), &session, messages)
        .await
        .unwrap();
    skald
        .view(&tenant_named(TENANT), &session, options)
        .await
        .unwrap()
        .view
}

/// Per-turn recall for `text`, the host's next prompt: what it kept and dropped, and whether it
/// injected anything.
async fn recall(store: &Arc<dyn MemoryStore>, text: &str) -> (RecallReport, bool) {
    let view = first_view(store, RecallSettings::default(), Some(text)).await;
    let report = view.memory.unwrap().recall;
    let injected = report.tokens_injected > 0;
    (report, injected)
}

#[tokio::test]
async fn unrelated_archive_is_not_recalled() {
    let store = store_with_an_archive().await;
    // Stopwords only: the store still searches for them (the long archive holds them all, and
    // coverage used to call that a full match), but they are evidence of nothing.
    let (report, injected) = recall(&store, "What was it that you did there, and why?").await;
    assert!(report.kept.is_empty(), "{report:#?}");
    assert!(!injected);
    // One word in common ("today", in passing): half of this short query's words, which
    // coverage alone let through.
    let (report, injected) = recall(&store, "What is the plan for today?").await;
    assert!(report.kept.is_empty(), "{report:#?}");
    let archive = report
        .dropped
        .iter()
        .find(|dropped| dropped.uri == ARCHIVE)
        .expect("the archive is a hit");
    assert_eq!(archive.reason, DropReason::BelowThreshold);
    assert!(archive.relevance.term_coverage >= 0.5, "{archive:?}");
    let floor = RecallSettings::default().min_text_relevance;
    assert!(
        archive
            .relevance
            .text_relevance
            .is_some_and(|relevance| relevance < floor),
        "{archive:?}"
    );
    assert!(!injected);
}

#[tokio::test]
async fn related_memory_passes_the_floor() {
    let store = store_with_an_archive().await;
    // A short memory about the question.
    let (report, _) = recall(
        &store,
        "How do I optimise the billing database queries on invoices?",
    )
    .await;
    let kept: Vec<&str> = report.kept.iter().map(|kept| kept.uri.as_str()).collect();
    assert!(
        kept.contains(&"viking://user/alice/memories/entities/billing-db.md"),
        "{report:#?}"
    );
    assert!(!kept.contains(&ARCHIVE));
    // The long archive, when the question is about it: its words recur, so its length does
    // not sink it.
    let (report, injected) = recall(&store, "Why did the flaky upload test fail on CI?").await;
    let archive = report
        .kept
        .iter()
        .find(|kept| kept.uri == ARCHIVE)
        .unwrap_or_else(|| panic!("{report:#?}"));
    let relevance = archive.relevance.text_relevance.unwrap();
    assert!(
        relevance >= RecallSettings::default().min_text_relevance,
        "{relevance}"
    );
    assert!(injected);
}

#[tokio::test]
async fn no_snapshot_when_only_tool_statistics_exist() {
    let store = empty_store();
    let reports: Vec<ToolCallReport> = (0..4)
        .map(|n| ToolCallReport::new("bash", n != 0, Some(1000), None))
        .collect();
    record_tool_reports(&store, &reports).await;
    set_skill_usage(store.as_ref(), "pptx", 1, 1);
    let view = first_view(&store, RecallSettings::default(), None).await;
    let session = view.memory.as_ref().unwrap().session_start.clone();
    assert_eq!(view.messages.len(), 1, "only the greeting: {view:#?}");
    assert_eq!(session.directory_entries, 0);
    assert!(session.errors.is_empty(), "{:?}", session.errors);
    // The statistics still do their own job, in the system prompt.
    let prompt = view.memory_addition.unwrap();
    assert!(prompt.contains("## Tool Usage Memories"), "{prompt}");
}

#[tokio::test]
async fn snapshot_when_a_user_memory_exists() {
    let tenant = tenant_named(TENANT);
    // A user's memory, the agent's skill tip, a session archive: each is worth listing.
    for uri in [
        "viking://user/alice/memories/preferences/editor.md",
        "viking://agent/main/skills/pptx/tips/dark-theme.md",
        "viking://session/s-1/archive_001",
    ] {
        let store = empty_store();
        record_tool_reports(
            &store,
            &[ToolCallReport::new("bash", true, Some(1000), None)],
        )
        .await;
        store
            .add(
                &tenant,
                NewMemory::new(MemoryUri::parse(uri).unwrap(), "Prefers dark mode."),
            )
            .unwrap();
        let view = first_view(&store, RecallSettings::default(), None).await;
        // The greeting, then the listing as a simulated `memory_ls` call and its result.
        assert_eq!(view.messages.len(), 3, "{uri}: {view:#?}");
        assert!(view.memory.unwrap().session_start.directory_entries > 0);
    }
    // Listing off: nothing, whatever the store holds.
    let store = empty_store();
    store
        .add(
            &tenant,
            NewMemory::new(
                MemoryUri::parse("viking://user/alice/memories/preferences/editor.md").unwrap(),
                "Prefers dark mode.",
            ),
        )
        .unwrap();
    let off = RecallSettings {
        directory: false,
        ..RecallSettings::default()
    };
    assert_eq!(first_view(&store, off, None).await.messages.len(), 1);
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
