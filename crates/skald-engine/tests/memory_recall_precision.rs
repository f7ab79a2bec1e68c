//! What recall and the session-start snapshot must not inject: a session archive about something
//! else (recall's relevance floor, on the store's real BM25), and a `memory_ls` listing of a
//! store that holds only skald's own tool statistics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod memory_common;

use memory_common::*;
use skald_core::memory::recall::{DropReason, RecallSettings};
use skald_core::memory::uri::MemoryUri;
use skald_core::memory::usage::ToolCallReport;
use skald_core::message::{Message, Role};
use skald_engine::internal::memory::{
    recall_for_turn, record_skill_use, record_tool_reports, session_start_memory,
};
use skald_engine::memory::RecallOutcome;
use skald_store::memories::{MemoryStore, NewMemory};

const ARCHIVE: &str = "viking://session/s-42/archive_001";

/// The fixture memories (billing, Postgres, a lunch, skills) and the archive of a long session
/// about a flaky CI test: nothing the billing memories are about.
fn store_with_an_archive() -> std::sync::Arc<dyn skald_store::MemoryStore> {
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
        &tenant_named(TENANT),
        "main",
        &[
            ToolCallReport::new("bash", true, Some(900), None),
            ToolCallReport::new("bash", true, Some(1100), None),
            ToolCallReport::new("bash", false, Some(400), Some("exit status 1".into())),
        ],
    )
    .unwrap();
    store
}

async fn recall(store: &dyn skald_store::MemoryStore, text: &str) -> RecallOutcome {
    recall_for_turn(
        store,
        None,
        &tenant_named(TENANT),
        &identity(),
        &RecallSettings::default(),
        vec![Message::text(Role::User, text)],
    )
    .await
}

#[tokio::test]
async fn unrelated_archive_is_not_recalled() {
    let store = store_with_an_archive();
    // Stopwords only: the store still searches for them (the long archive holds them all, and
    // coverage used to call that a full match), but they are evidence of nothing.
    let outcome = recall(&store, "What was it that you did there, and why?").await;
    assert!(outcome.report.kept.is_empty(), "{:#?}", outcome.report);
    assert_eq!(outcome.messages.len(), 1);
    // One word in common ("today", in passing): half of this short query's words, which
    // coverage alone let through.
    let outcome = recall(&store, "What is the plan for today?").await;
    let report = &outcome.report;
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
    assert_eq!(outcome.messages.len(), 1);
}

#[tokio::test]
async fn related_memory_passes_the_floor() {
    let store = store_with_an_archive();
    // A short memory about the question.
    let outcome = recall(
        &store,
        "How do I optimise the billing database queries on invoices?",
    )
    .await;
    let kept: Vec<&str> = outcome
        .report
        .kept
        .iter()
        .map(|kept| kept.uri.as_str())
        .collect();
    assert!(
        kept.contains(&"viking://user/alice/memories/entities/billing-db.md"),
        "{:#?}",
        outcome.report
    );
    assert!(!kept.contains(&ARCHIVE));
    // The long archive, when the question is about it: its words recur, so its length does
    // not sink it.
    let outcome = recall(&store, "Why did the flaky upload test fail on CI?").await;
    let report = &outcome.report;
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
    assert_eq!(outcome.messages.len(), 3);
}

#[tokio::test]
async fn no_snapshot_when_only_tool_statistics_exist() {
    let store = empty_store();
    let tenant = tenant_named(TENANT);
    let reports: Vec<ToolCallReport> = (0..4)
        .map(|n| ToolCallReport::new("bash", n != 0, Some(1000), None))
        .collect();
    record_tool_reports(&store, &tenant, "main", &reports).unwrap();
    record_skill_use(&store, &tenant, "main", "pptx", true).unwrap();
    let session = session_start_memory(&store, &tenant, &identity(), &RecallSettings::default());
    assert!(session.directory_messages.is_empty(), "{session:#?}");
    assert_eq!(session.report.directory_entries, 0);
    assert!(
        session.report.errors.is_empty(),
        "{:?}",
        session.report.errors
    );
    // The statistics still do their own job, in the system prompt.
    let prompt = session.system_prompt_addition.unwrap();
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
            &tenant,
            "main",
            &[ToolCallReport::new("bash", true, Some(1000), None)],
        )
        .unwrap();
        store
            .add(
                &tenant,
                NewMemory::new(MemoryUri::parse(uri).unwrap(), "Prefers dark mode."),
            )
            .unwrap();
        let session =
            session_start_memory(&store, &tenant, &identity(), &RecallSettings::default());
        assert_eq!(session.directory_messages.len(), 2, "{uri}: {session:#?}");
        assert!(session.report.directory_entries > 0);
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
    assert!(
        session_start_memory(&store, &tenant, &identity(), &off)
            .directory_messages
            .is_empty()
    );
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
