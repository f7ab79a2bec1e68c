//! A session's memory is archived when it ends (issue 28, gap 1): the host says so
//! (`Engine::end_session`), or nothing happened in it for `idle_archive_secs`
//! (`Engine::archive_idle_sessions`). A session far below the upload threshold, never compacted,
//! still leaves its memories; each span is archived once, and what follows a span later is a
//! span of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod memory_common;

use std::sync::Arc;

use memory_common::alice_config;
use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::uri::MemoryCategory;
use skald_core::message::{Message, Role};
use skald_engine::{
    ArchiveOrigin, CompactInput, Engine, EngineError, ExtractionStatus, ManualClock,
    SessionEndOutcome, SessionEndReason, Stores, ViewOptions,
};
use skald_store::sessions::SessionError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const HOUR_MS: i64 = 3_600_000;

fn tenant() -> Tenant {
    Tenant::parse(memory_common::TENANT).unwrap()
}

fn session(id: &str) -> SessionId {
    SessionId::parse(id).unwrap()
}

/// An engine and its session store on one manual clock (the store stamps a session's
/// `updated_at` with it, the sweep measures idleness with it).
fn engine() -> (Engine, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(memory_common::MAY_1_2023));
    (engine_on(&clock, true), clock)
}

fn engine_on(clock: &Arc<ManualClock>, memory: bool) -> Engine {
    let mut config = alice_config("none", clock.clone());
    config.memory.enabled = memory;
    let stores = Stores {
        sessions: skald_store::test_stores::session_store_with_clock(clock.clone()),
        ..Stores::in_memory().unwrap()
    };
    Engine::new(stores, config, TaskTracker::new()).unwrap()
}

/// A short conversation: a preference said once, a question and its answer.
fn short_conversation() -> Vec<Message> {
    vec![
        Message::text(Role::User, "I prefer dark mode in every editor."),
        Message::text(Role::Assistant, "Noted: dark mode everywhere."),
        Message::text(Role::User, "How do I list the open ports on this box?"),
        Message::text(Role::Assistant, "Run `ss -tlnp`."),
    ]
}

fn archived(outcome: &SessionEndOutcome) -> &skald_engine::ArchiveOutcome {
    match outcome {
        SessionEndOutcome::Archived { archive } => archive,
        SessionEndOutcome::NothingNew | SessionEndOutcome::MemoryOff => {
            panic!("expected an archive, got {outcome:?}")
        }
    }
}

async fn dark_mode_memories(engine: &Engine) -> usize {
    let found = engine
        .search_memories(
            &tenant(),
            &memory_common::identity(),
            "dark mode editor",
            skald_store::memories::SearchFilter {
                categories: vec![MemoryCategory::Preferences],
                ..Default::default()
            },
            10,
        )
        .await
        .unwrap();
    found.results.len()
}

#[tokio::test]
async fn a_short_session_leaves_its_memories_when_the_host_ends_it() {
    let (engine, _) = engine();
    let id = session("s-short");
    engine
        .ingest(&tenant(), &id, short_conversation())
        .await
        .unwrap();
    assert_eq!(dark_mode_memories(&engine).await, 0);

    let outcome = engine
        .end_session(&tenant(), &id, SessionEndReason::New)
        .await
        .unwrap();
    let archive = archived(&outcome);
    assert_eq!(archive.status, ExtractionStatus::Done, "{archive:?}");
    assert_eq!(
        archive.origin,
        ArchiveOrigin::SessionEnd {
            reason: SessionEndReason::New
        }
    );
    assert_eq!(archive.range.messages, 4);
    assert!(
        archive.archive.iter().any(|uri| uri
            .as_str()
            .starts_with("viking://session/s-short/archive_")),
        "{archive:?}"
    );
    assert_eq!(dark_mode_memories(&engine).await, 1);

    // The session itself is as it was: its context still holds every message.
    let view = engine
        .view(&tenant(), &id, ViewOptions::default())
        .await
        .unwrap();
    assert_eq!(view.view.messages.len(), 4);
}

#[tokio::test]
async fn a_session_ended_twice_is_archived_once_and_later_messages_make_a_span_of_their_own() {
    let (engine, _) = engine();
    let id = session("s-twice");
    engine
        .ingest(&tenant(), &id, short_conversation())
        .await
        .unwrap();
    let first = engine
        .end_session(&tenant(), &id, SessionEndReason::Ended)
        .await
        .unwrap();
    let first_range = archived(&first).range.clone();
    assert_eq!(
        engine
            .end_session(&tenant(), &id, SessionEndReason::Ended)
            .await
            .unwrap(),
        SessionEndOutcome::NothingNew
    );

    // The session goes on; its next end archives only what came after the first span.
    engine
        .ingest(
            &tenant(),
            &id,
            vec![
                Message::text(Role::User, "My colleague Priya owns the billing service."),
                Message::text(Role::Assistant, "Got it."),
            ],
        )
        .await
        .unwrap();
    let second = engine
        .end_session(&tenant(), &id, SessionEndReason::Reset)
        .await
        .unwrap();
    let second = archived(&second);
    assert_eq!(second.range.messages, 2, "{second:?}");
    assert_ne!(second.range.first_entry_id, first_range.first_entry_id);
    assert_ne!(second.archive, archived(&first).archive);
    assert_eq!(dark_mode_memories(&engine).await, 1, "no memory twice");
}

#[tokio::test]
async fn after_a_compaction_the_end_archives_only_the_kept_messages() {
    let (engine, _) = engine();
    let id = session("s-compacted");
    let mut conversation = Vec::new();
    for turn in 0..8 {
        conversation.push(Message::text(
            Role::User,
            format!("Step {turn}: look at service number {turn} and say what it does."),
        ));
        conversation.push(Message::text(
            Role::Assistant,
            format!(
                "Service {turn} handles queue {turn}. {}",
                "detail ".repeat(200)
            ),
        ));
    }
    engine.ingest(&tenant(), &id, conversation).await.unwrap();
    let compaction = engine
        .compact(
            &tenant(),
            &id,
            &CompactInput {
                window_tokens: None,
                trigger: skald_core::compaction::CompactionTrigger::Manual,
                custom_instructions: None,
                agents_md: None,
                context_tokens: None,
                archive: true,
            },
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let compacted = compaction
        .memory_archive
        .expect("the compaction archived its span");
    let kept = compaction.result.first_kept_entry_id.clone().unwrap();

    let end = engine
        .end_session(&tenant(), &id, SessionEndReason::Ended)
        .await
        .unwrap();
    let tail = archived(&end);
    assert_eq!(tail.range.first_entry_id, kept, "{tail:?}");
    assert_eq!(
        compacted.range.messages + tail.range.messages,
        16,
        "every message archived once: {compacted:?} {tail:?}"
    );
}

/// The session ids the sweep archived.
async fn sweep(engine: &Engine, idle_ms: u64) -> Vec<String> {
    let swept = engine
        .archive_idle_sessions(&tenant(), idle_ms)
        .await
        .unwrap();
    for (_, outcome) in &swept {
        assert_eq!(
            archived(outcome).origin,
            ArchiveOrigin::SessionEnd {
                reason: SessionEndReason::Idle
            }
        );
    }
    swept
        .into_iter()
        .map(|(id, _)| id.as_str().to_owned())
        .collect()
}

#[tokio::test]
async fn the_idle_sweep_archives_each_session_idle_long_enough_once() {
    let (engine, clock) = engine();
    let (quiet, busy) = (session("s-quiet"), session("s-busy"));
    for id in [&quiet, &busy] {
        engine
            .ingest(&tenant(), id, short_conversation())
            .await
            .unwrap();
    }
    let idle_ms = 30 * 60 * 1000;
    let minutes = |n: i64| n * 60 * 1000;
    clock.advance(minutes(20));
    assert!(sweep(&engine, idle_ms).await.is_empty(), "nothing idle yet");

    clock.advance(minutes(20));
    engine
        .ingest(
            &tenant(),
            &busy,
            vec![Message::text(
                Role::User,
                "and one more question about ports",
            )],
        )
        .await
        .unwrap();
    assert_eq!(sweep(&engine, idle_ms).await, ["s-quiet"]);
    assert!(sweep(&engine, idle_ms).await.is_empty(), "never twice");

    clock.advance(minutes(40));
    assert_eq!(sweep(&engine, idle_ms).await, ["s-busy"]);
    assert_eq!(
        dark_mode_memories(&engine).await,
        1,
        "merged, not stored twice"
    );

    // A session last changed more than a week ago is not the sweep's (an import of old
    // transcripts), however much of it is unarchived.
    engine
        .ingest(&tenant(), &session("s-imported"), short_conversation())
        .await
        .unwrap();
    clock.advance(skald_engine::IDLE_ARCHIVE_HORIZON_MS + HOUR_MS);
    assert!(sweep(&engine, idle_ms).await.is_empty());
}

#[tokio::test]
async fn ending_an_unknown_session_is_an_error_and_memory_off_archives_nothing() {
    let (engine, _) = engine();
    let error = engine
        .end_session(&tenant(), &session("s-nope"), SessionEndReason::Ended)
        .await
        .unwrap_err();
    assert!(
        matches!(error, EngineError::Session(SessionError::NotFound { .. })),
        "{error:?}"
    );

    let clock = Arc::new(ManualClock::new(memory_common::MAY_1_2023));
    let off = engine_on(&clock, false);
    let id = session("s-off");
    off.ingest(&tenant(), &id, short_conversation())
        .await
        .unwrap();
    assert_eq!(
        off.end_session(&tenant(), &id, SessionEndReason::Ended)
            .await
            .unwrap(),
        SessionEndOutcome::MemoryOff
    );
    assert!(
        off.archive_idle_sessions(&tenant(), 0)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Two servers over one database end the same session at once (OpenClaw's `session_end` and
/// an idle sweep, say): the span's lease lets one of them archive it; the other's attempt is
/// recorded as not run and, retried, takes the finished outcome. One archive, no memory twice.
#[tokio::test]
async fn two_servers_ending_one_session_at_once_archive_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skald.sqlite3");
    let clock = Arc::new(ManualClock::new(memory_common::MAY_1_2023));
    let server = || {
        Engine::new(
            Stores::open_sqlite(&path).unwrap(),
            alice_config("none", clock.clone()),
            TaskTracker::new(),
        )
        .unwrap()
    };
    let (one, two) = (server(), server());
    let id = session("s-two");
    one.ingest(&tenant(), &id, short_conversation())
        .await
        .unwrap();
    let acme = tenant();
    let (first, second) = tokio::join!(
        one.end_session(&acme, &id, SessionEndReason::Ended),
        two.end_session(&acme, &id, SessionEndReason::Idle),
    );
    let outcomes = [first.unwrap(), second.unwrap()];
    let done = outcomes
        .iter()
        .filter(|outcome| {
            matches!(outcome, SessionEndOutcome::Archived { archive }
                if archive.status == ExtractionStatus::Done && !archive.archive.is_empty())
        })
        .count();
    assert!(done >= 1, "{outcomes:?}");
    // Whatever the second found, a later end has nothing left to do and nothing is doubled.
    for server in [&one, &two] {
        assert_eq!(
            server
                .end_session(&tenant(), &id, SessionEndReason::Ended)
                .await
                .unwrap(),
            SessionEndOutcome::NothingNew
        );
    }
    let archives = one
        .list_memories(
            &tenant(),
            &skald_core::memory::uri::MemoryUri::parse("viking://session/s-two").unwrap(),
        )
        .unwrap();
    assert_eq!(archives.len(), 1, "{archives:?}");
    assert_eq!(dark_mode_memories(&one).await, 1);
}
