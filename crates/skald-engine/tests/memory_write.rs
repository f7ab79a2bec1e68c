//! The memory write path through the engine (seed 002, Component 1): a compaction archives
//! the span it replaced and extracts its memories, a failed extraction is recorded and retried
//! by the next archive, and a finished turn past half the window uploads older turns in the
//! background (the two-threshold upload). Two engines over one set of stores are two servers,
//! or one server restarted. The archive of a turn's threshold compaction, the host's system
//! prompt in front, is tested with the turn loop (`recovery.rs`); a span archived twice, or by
//! two writers at once, with the memory writer (`memory_write/tests.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod memory_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use memory_common::{MAY_1_2023, TENANT, alice_config, turn_ends_at, upload_statuses};
use serde_json::json;
use skald_core::compaction::CompactionTrigger;
use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::extract::{ExistingMemory, MemoryCandidate};
use skald_core::memory::upload::DropReason;
use skald_core::memory::uri::MemoryUri;
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_engine::memory::{
    EXTRACTION_CUSTOM_TYPE, INTERRUPTED_ERROR, UPLOAD_CUSTOM_TYPE, recorded_outcomes,
};
use skald_engine::storage::MemoryLevel;
use skald_engine::{
    CompactInput, Compaction, Engine, EngineConfig, ExtractionStatus, FailedStage, ManualClock,
    Stores,
};
use skald_llm::{DeterministicExtractor, Embedder, LlmError, MemoryExtractor};
use skald_store::RefSettings;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const SESSION: &str = "s-mem";

fn tenant() -> Tenant {
    Tenant::parse(TENANT).unwrap()
}

fn session() -> SessionId {
    SessionId::parse(SESSION).unwrap()
}

/// One deployment's stores; every engine of a test is built over the same ones.
fn stores() -> Stores {
    Stores {
        sessions: skald_store::test_stores::session_store(),
        refs: skald_store::test_stores::ref_store(RefSettings::default()),
        memories: skald_store::test_stores::memory_store(),
    }
}

/// An engine over `stores` writing Alice's memories, extracting with `extractor`, configured
/// further by `configure`; uploads keep the two newest turns in the context.
fn engine_with(
    stores: &Stores,
    extractor: Arc<dyn MemoryExtractor>,
    configure: impl FnOnce(&mut EngineConfig),
) -> Engine {
    let mut config = alice_config("none", Arc::new(ManualClock::new(MAY_1_2023)));
    config.extractor = extractor;
    config.memory.write.upload.keep_recent_turns = 2;
    configure(&mut config);
    Engine::new(stores.clone(), config, TaskTracker::new()).unwrap()
}

fn engine(stores: &Stores, extractor: Arc<dyn MemoryExtractor>) -> Engine {
    engine_with(stores, extractor, |_| {})
}

fn deterministic() -> Arc<dyn MemoryExtractor> {
    Arc::new(DeterministicExtractor::default())
}

fn tool_turn(turn: usize) -> Vec<Message> {
    let id = format!("call_{turn}");
    vec![
        Message::new(
            Role::Assistant,
            vec![
                Block::text(format!("Checking job {turn}.")),
                Block::ToolCall(ToolCall {
                    id: id.clone(),
                    name: "bash".into(),
                    arguments: json!({"command": format!("cat /var/log/job-{turn}.log")}),
                    arguments_text: None,
                    extra: Extra::new(),
                }),
            ],
        ),
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: id,
                tool_name: Some("bash".into()),
                content: vec![Block::text(format!(
                    "job {turn} output: Remember that I like light mode. {}",
                    "ok ".repeat(300)
                ))]
                .into(),
                content_form: ContentForm::Blocks,
                is_error: None,
                details: None,
                extra: Extra::new(),
            })],
        ),
        Message::text(
            Role::Assistant,
            format!("Job {turn} looks fine. TODO: update the changelog for job {turn}."),
        ),
    ]
}

/// Six user turns; the first two carry things to remember, every turn runs a tool.
fn conversation() -> Vec<Message> {
    let asks = [
        "Remember that I prefer tabs over spaces in every repository.",
        "My sister Alice is reviewing the Apollo release. Check job 1.",
        "Check job 2 please.",
        "Check job 3 please.",
        "Check job 4 please.",
        "Check job 5 please.",
    ];
    let mut messages = Vec::new();
    for (turn, ask) in asks.iter().enumerate() {
        messages.push(Message::text(Role::User, *ask));
        messages.extend(tool_turn(turn));
    }
    messages
}

async fn seed(engine: &Engine, messages: Vec<Message>) {
    let outcome = engine
        .ingest(&tenant(), &session(), messages)
        .await
        .unwrap();
    assert!(outcome.created);
}

/// Four more user turns, each running a tool, after the stored ones.
async fn more_turns(engine: &Engine, turns: std::ops::Range<usize>) {
    let mut messages = Vec::new();
    for turn in turns {
        messages.push(Message::text(
            Role::User,
            format!("Check job {turn} please."),
        ));
        messages.extend(tool_turn(turn));
    }
    engine
        .ingest(&tenant(), &session(), messages)
        .await
        .unwrap();
}

/// A manual compaction of the session, its span archived.
async fn compact(engine: &Engine) -> Compaction {
    let input = CompactInput {
        window_tokens: Some(200_000),
        trigger: CompactionTrigger::Manual,
        custom_instructions: None,
        agents_md: None,
        context_tokens: None,
        archive: true,
    };
    let compaction = engine
        .compact(&tenant(), &session(), &input, &CancellationToken::new())
        .await
        .unwrap();
    assert!(
        compaction.result.outcome.is_compacted(),
        "{:?}",
        compaction.result.outcome
    );
    assert_eq!(compaction.memory_error, None);
    compaction
}

fn archive_uri(number: u32) -> MemoryUri {
    MemoryUri::parse(&format!("viking://session/{SESSION}/archive_{number:03}")).unwrap()
}

/// The text of the memory at `uri` at `level`.
fn memory_text(engine: &Engine, uri: &MemoryUri, level: MemoryLevel) -> String {
    engine.read_memory(&tenant(), uri, level).unwrap().text
}

fn custom_entries(engine: &Engine, custom: &str) -> Vec<serde_json::Value> {
    engine
        .load_session(&tenant(), &session())
        .unwrap()
        .entries()
        .iter()
        .filter_map(|entry| entry.kind.custom_data(custom).cloned())
        .collect()
}

/// The ids of the session's context from its leaf.
fn context_ids(engine: &Engine) -> Vec<String> {
    engine
        .stored_context(&tenant(), &session())
        .unwrap()
        .iter()
        .filter_map(|m| m.meta.id.clone())
        .collect()
}

/// Every archive outcome the session recorded: the span's first archive and the attempt.
fn recorded(engine: &Engine) -> Vec<(ExtractionStatus, String, u32)> {
    recorded_outcomes(&engine.load_session(&tenant(), &session()).unwrap())
        .iter()
        .map(|o| (o.status, o.archive[0].as_str().to_owned(), o.attempts))
        .collect()
}

/// Fails its first `failures` calls, then extracts deterministically.
struct Flaky {
    failures: u32,
    calls: AtomicU32,
}

#[async_trait]
impl MemoryExtractor for Flaky {
    fn name(&self) -> &str {
        "flaky"
    }

    async fn extract(
        &self,
        span: &[Message],
        existing: &[ExistingMemory],
        cancel: &CancellationToken,
    ) -> Result<Vec<MemoryCandidate>, LlmError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.failures {
            return Err(LlmError::Server {
                status: 503,
                retry_after_ms: None,
                message: "extraction model unavailable".into(),
            });
        }
        DeterministicExtractor::default()
            .extract(span, existing, cancel)
            .await
    }
}

/// Extracts only once the test adds a permit: an upload that is still running.
struct Gated {
    gate: Arc<Semaphore>,
}

#[async_trait]
impl MemoryExtractor for Gated {
    fn name(&self) -> &str {
        "gated"
    }

    async fn extract(
        &self,
        span: &[Message],
        existing: &[ExistingMemory],
        cancel: &CancellationToken,
    ) -> Result<Vec<MemoryCandidate>, LlmError> {
        let _permit = self.gate.acquire().await.map_err(|_| LlmError::Aborted)?;
        DeterministicExtractor::default()
            .extract(span, existing, cancel)
            .await
    }
}

struct FixedEmbedder;

#[async_trait]
impl Embedder for FixedEmbedder {
    fn name(&self) -> &str {
        "fixed"
    }

    fn dimensions(&self) -> Option<usize> {
        Some(3)
    }

    async fn embed(
        &self,
        texts: &[String],
        _cancel: &CancellationToken,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        Ok(texts.iter().map(|_| vec![0.6, 0.8, 0.0]).collect())
    }
}

// ---------------------------------------------------------------------------------------------
// Compaction archives the span it replaced
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_compacted_span_is_archived_with_its_tool_calls_then_extracted() {
    let stores = stores();
    let skald = engine_with(&stores, deterministic(), |config| {
        config.embedder = Some(Arc::new(FixedEmbedder));
    });
    seed(&skald, conversation()).await;
    let first_user_entry = skald.stored_context(&tenant(), &session()).unwrap()[0]
        .meta
        .id
        .clone()
        .unwrap();
    let outcome = compact(&skald).await.memory_archive.unwrap();
    assert_eq!(outcome.status, ExtractionStatus::Done, "{outcome:?}");
    assert_eq!(outcome.archive, [archive_uri(1)]);

    let archive = skald
        .read_memory(&tenant(), &archive_uri(1), MemoryLevel::L2)
        .unwrap();
    assert!(
        archive.text.contains("cat /var/log/job-0.log"),
        "tool calls are archived"
    );
    assert!(
        archive.text.contains("job 0 output"),
        "tool results are archived"
    );
    assert_eq!(archive.sources[0].session_id.as_deref(), Some(SESSION));
    let abstract_ = memory_text(&skald, &archive_uri(1), MemoryLevel::L0);
    assert!(
        abstract_.starts_with(&format!("Session {SESSION} archive 001")),
        "{abstract_}"
    );

    // The user's request became a preference; the tool output saying "remember" did not.
    let uris: Vec<&str> = outcome.memories.iter().map(|m| m.uri.as_str()).collect();
    let preference =
        "viking://user/alice/memories/preferences/prefer-tabs-spaces-every-repository.md";
    assert!(uris.contains(&preference), "{uris:?}");
    assert!(
        uris.contains(&"viking://user/alice/memories/entities/alice.md"),
        "{uris:?}"
    );
    assert!(
        !uris.iter().any(|uri| uri.contains("light-mode")),
        "{uris:?}"
    );
    let preference = skald
        .read_memory(
            &tenant(),
            &MemoryUri::parse(preference).unwrap(),
            MemoryLevel::L2,
        )
        .unwrap();
    assert_eq!(preference.sources[0].entry_ids, [first_user_entry]);
    assert!(skald.memory_stats(&tenant()).unwrap().with_embedding >= 2);

    let records = custom_entries(&skald, EXTRACTION_CUSTOM_TYPE);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["status"], "done");
    assert_eq!(records[0]["attempts"], 1);
}

/// Regression: the engine's writer wrote the memories of `[memory.write]`'s user ("default"
/// unless set there too) while recall read `[memory]`'s, so an engine configured for Alice
/// never recalled what it extracted from her sessions.
#[tokio::test]
async fn an_engine_configured_for_alice_writes_the_memories_recall_reads() {
    let stores = stores();
    let skald = engine_with(&stores, deterministic(), |config| {
        assert_eq!(config.memory.write.user, "default");
    });
    seed(&skald, conversation()).await;
    let outcome = compact(&skald).await.memory_archive.unwrap();
    let users: Vec<&str> = outcome
        .memories
        .iter()
        .filter_map(|m| m.uri.as_str().strip_prefix("viking://user/"))
        .map(|rest| rest.split('/').next().unwrap())
        .collect();
    assert!(!users.is_empty(), "{outcome:?}");
    assert!(users.iter().all(|user| *user == "alice"), "{users:?}");
}

#[tokio::test]
async fn nothing_that_left_the_context_is_lost() {
    let stores = stores();
    let skald = engine(&stores, deterministic());
    seed(&skald, conversation()).await;
    let before = skald.stored_context(&tenant(), &session()).unwrap();
    compact(&skald).await;
    let after = skald.stored_context(&tenant(), &session()).unwrap();
    let archive = memory_text(&skald, &archive_uri(1), MemoryLevel::L2);
    let kept: Vec<Option<&str>> = after.iter().map(|m| m.meta.id.as_deref()).collect();
    let left: Vec<&Message> = before
        .iter()
        .filter(|m| !kept.contains(&m.meta.id.as_deref()))
        .collect();
    assert!(left.len() >= 6, "{}", left.len());
    for message in left {
        for block in &message.content {
            let text = match block {
                Block::Text(text) => text.text.clone(),
                Block::ToolResult(result) => skald_core::message::join_text(&result.content),
                Block::ToolCall(call) => call.arguments["command"].as_str().unwrap().to_owned(),
                Block::Image(_) | Block::Thinking(_) | Block::Opaque(_) => continue,
            };
            assert!(
                archive.contains(text.trim()),
                "missing from the archive: {text}"
            );
        }
    }
}

#[tokio::test]
async fn working_memory_stays_in_the_compacted_context() {
    let stores = stores();
    let skald = engine(&stores, deterministic());
    seed(&skald, conversation()).await;
    compact(&skald).await;
    let context = skald.stored_context(&tenant(), &session()).unwrap();
    let summary = context[0].plain_text();
    assert!(summary.contains("## Open TODOs"), "{summary}");
    assert!(summary.contains("update the changelog"), "{summary}");
    assert!(summary.contains("## Pending user asks"), "{summary}");
}

#[tokio::test]
async fn a_failed_extraction_is_recorded_then_retried_by_the_next_archive() {
    let stores = stores();
    let skald = engine(
        &stores,
        Arc::new(Flaky {
            failures: 1,
            calls: AtomicU32::new(0),
        }),
    );
    seed(&skald, conversation()).await;
    let failed = compact(&skald).await.memory_archive.unwrap();
    assert_eq!(failed.status, ExtractionStatus::Failed);
    assert_eq!(failed.failed_stage, Some(FailedStage::Extraction));
    assert!(
        failed
            .error
            .as_deref()
            .unwrap()
            .contains("extraction model unavailable")
    );
    // The archive was written: only the extraction is retried.
    assert_eq!(failed.archive, [archive_uri(1)]);
    let records = custom_entries(&skald, EXTRACTION_CUSTOM_TYPE);
    assert_eq!(records[0]["status"], "failed");
    assert_eq!(records[0]["failed_stage"], "extraction");

    more_turns(&skald, 6..10).await;
    let second = compact(&skald).await.memory_archive.unwrap();
    assert!(second.is_done(), "{second:?}");
    assert_eq!(second.archive, [archive_uri(2)]);
    // The first span was retried before the second was archived, into its own archive.
    let outcomes = recorded_outcomes(&skald.load_session(&tenant(), &session()).unwrap());
    assert!(!outcomes[1].memories.is_empty(), "{:?}", outcomes[1]);
    assert_eq!(
        recorded(&skald),
        [
            (
                ExtractionStatus::Failed,
                archive_uri(1).as_str().to_owned(),
                1
            ),
            (
                ExtractionStatus::Done,
                archive_uri(1).as_str().to_owned(),
                2
            ),
            (
                ExtractionStatus::Done,
                archive_uri(2).as_str().to_owned(),
                1
            ),
        ]
    );
    assert!(
        skald
            .read_memory(&tenant(), &archive_uri(3), MemoryLevel::L2)
            .is_err()
    );
}

#[tokio::test]
async fn failures_past_the_attempt_limit_stay_recorded_but_are_not_retried() {
    let stores = stores();
    let skald = engine_with(
        &stores,
        Arc::new(Flaky {
            failures: 100,
            calls: AtomicU32::new(0),
        }),
        |config| config.memory.write.max_extraction_attempts = 2,
    );
    seed(&skald, conversation()).await;
    compact(&skald).await;
    more_turns(&skald, 6..10).await;
    compact(&skald).await;
    more_turns(&skald, 10..14).await;
    compact(&skald).await;
    // The first span's second attempt was its last; the second span's second came with the
    // third compaction.
    let failed = ExtractionStatus::Failed;
    let [one, two, three] = [1, 2, 3].map(|n| archive_uri(n).as_str().to_owned());
    assert_eq!(
        recorded(&skald),
        [
            (failed, one.clone(), 1),
            (failed, one, 2),
            (failed, two.clone(), 1),
            (failed, two, 2),
            (failed, three, 1),
        ]
    );
}

#[tokio::test]
async fn a_span_another_server_archived_is_not_archived_again() {
    let stores = stores();
    let here = engine(&stores, deterministic());
    seed(&here, conversation()).await;
    let first = compact(&here).await.memory_archive.unwrap();
    assert!(first.is_done(), "{first:?}");

    // The conversation goes on on another server (or this one, restarted), which compacts next.
    let counted = Arc::new(Flaky {
        failures: 0,
        calls: AtomicU32::new(0),
    });
    let there = engine(&stores, counted.clone());
    more_turns(&there, 6..10).await;
    let second = compact(&there).await.memory_archive.unwrap();
    assert!(second.is_done(), "{second:?}");
    assert_eq!(second.archive, [archive_uri(2)]);
    // One extraction, the new span's: the first span is recorded done and not retried.
    assert_eq!(counted.calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        recorded(&there),
        [
            (
                ExtractionStatus::Done,
                archive_uri(1).as_str().to_owned(),
                1
            ),
            (
                ExtractionStatus::Done,
                archive_uri(2).as_str().to_owned(),
                1
            ),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// The two-threshold upload, from finished turns
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_upload_starts_at_half_the_window_without_blocking_the_turn() {
    let stores = stores();
    let gate = Arc::new(Semaphore::new(0));
    let skald = engine(&stores, Arc::new(Gated { gate: gate.clone() }));
    seed(&skald, conversation()).await;
    let before = context_ids(&skald);

    assert_eq!(turn_ends_at(&skald, &session(), 499).await.started, None);
    // The extractor is held: the turn is recorded while the upload runs.
    let step = turn_ends_at(&skald, &session(), 500).await;
    assert_eq!(step.started.as_deref(), Some("upload-001"));
    assert!(step.dropped.is_none());
    assert!(skald.upload_running(&tenant(), &session()));
    assert_eq!(
        context_ids(&skald),
        before,
        "nothing leaves the context at 50 %"
    );
    assert_eq!(upload_statuses(&skald, &session()), ["upload-001 running"]);
    let record = &custom_entries(&skald, UPLOAD_CUSTOM_TYPE)[0];
    assert_eq!(record["range"]["first_entry_id"], before[0].as_str());
    // The next turn below 70 % waits for it.
    let waiting = turn_ends_at(&skald, &session(), 650).await;
    assert_eq!(waiting, Default::default());
    gate.add_permits(10);
}

#[tokio::test]
async fn at_seventy_percent_the_range_leaves_while_the_upload_runs() {
    let stores = stores();
    let gate = Arc::new(Semaphore::new(0));
    let skald = engine(&stores, Arc::new(Gated { gate: gate.clone() }));
    seed(&skald, conversation()).await;
    turn_ends_at(&skald, &session(), 500).await;
    let before = context_ids(&skald);
    let record = custom_entries(&skald, UPLOAD_CUSTOM_TYPE)[0].clone();
    let end = record["range"]["end_entry_id"].as_str().unwrap().to_owned();

    // Newer messages arrive while the upload runs.
    skald
        .ingest(
            &tenant(),
            &session(),
            vec![Message::text(Role::User, "And job 9?")],
        )
        .await
        .unwrap();
    let newer = context_ids(&skald).pop().unwrap();
    let step = turn_ends_at(&skald, &session(), 700).await;
    let dropped = step.dropped.unwrap();
    assert_eq!(dropped.reason, DropReason::ForcedAtDropThreshold);
    assert!(dropped.upload_running);
    assert!(skald.upload_running(&tenant(), &session()));

    let context = skald.stored_context(&tenant(), &session()).unwrap();
    let summary = context[0].plain_text();
    assert!(
        summary.contains(&format!("viking://session/{SESSION}/")),
        "{summary}"
    );
    assert!(
        summary.contains("update the changelog for job 0"),
        "{summary}"
    );
    let after = context_ids(&skald);
    let end_at = before.iter().position(|id| *id == end).unwrap();
    assert_eq!(
        after[1..after.len() - 1],
        before[end_at..],
        "the kept turns stay, in order"
    );
    assert_eq!(after.last(), Some(&newer), "newer messages stay");

    // The upload finishes later; its range already left, so only its state is recorded.
    gate.add_permits(10);
    skald.upload_finished(&tenant(), &session()).await;
    let step = turn_ends_at(&skald, &session(), 300).await;
    assert_eq!(step.completed.len(), 1);
    assert!(step.completed[0].is_done(), "{:?}", step.completed[0]);
    assert!(step.dropped.is_none());
    assert_eq!(
        upload_statuses(&skald, &session()),
        ["upload-001 running", "upload-001 done"]
    );
    assert!(
        memory_text(&skald, &archive_uri(1), MemoryLevel::L2).contains("prefer tabs over spaces")
    );
}

#[tokio::test]
async fn a_completed_upload_below_seventy_percent_drops_only_its_range() {
    let stores = stores();
    let skald = engine(&stores, deterministic());
    seed(&skald, conversation()).await;
    turn_ends_at(&skald, &session(), 550).await;
    skald.upload_finished(&tenant(), &session()).await;
    let before = context_ids(&skald);
    let record = custom_entries(&skald, UPLOAD_CUSTOM_TYPE)[0].clone();
    let end = record["range"]["end_entry_id"].as_str().unwrap().to_owned();
    skald
        .ingest(
            &tenant(),
            &session(),
            vec![Message::text(Role::User, "Next, job 10.")],
        )
        .await
        .unwrap();
    let newer = context_ids(&skald).pop().unwrap();

    let step = turn_ends_at(&skald, &session(), 600).await;
    assert_eq!(step.completed.len(), 1);
    assert_eq!(
        step.dropped.as_ref().unwrap().reason,
        DropReason::UploadCompleted
    );
    assert!(!step.dropped.as_ref().unwrap().upload_running);
    let after = context_ids(&skald);
    let end_at = before.iter().position(|id| *id == end).unwrap();
    assert_eq!(after[1..after.len() - 1], before[end_at..]);
    assert_eq!(after.last(), Some(&newer));
    assert_eq!(
        upload_statuses(&skald, &session()),
        ["upload-001 running", "upload-001 done"]
    );
    // The extraction is recorded like a compaction's.
    let outcomes = recorded_outcomes(&skald.load_session(&tenant(), &session()).unwrap());
    assert_eq!(outcomes.len(), 1);
    assert!(
        outcomes[0]
            .memories
            .iter()
            .any(|m| m.uri.as_str().contains("/preferences/"))
    );
}

#[tokio::test]
async fn an_upload_cut_short_by_a_restart_is_recorded_and_retried() {
    let stores = stores();
    {
        let gate = Arc::new(Semaphore::new(0));
        let crashed = engine(&stores, Arc::new(Gated { gate }));
        seed(&crashed, conversation()).await;
        turn_ends_at(&crashed, &session(), 520).await;
        assert!(crashed.upload_running(&tenant(), &session()));
        // The process ends here: the engine and its upload are gone.
    }
    let skald = engine(&stores, deterministic());
    assert_eq!(upload_statuses(&skald, &session()), ["upload-001 running"]);
    let step = turn_ends_at(&skald, &session(), 520).await;
    assert_eq!(step.completed.len(), 1);
    assert_eq!(step.completed[0].error.as_deref(), Some(INTERRUPTED_ERROR));
    // The failed range is still in the context: the upload starts again, as a retry.
    assert_eq!(step.started.as_deref(), Some("upload-002"));
    let records = custom_entries(&skald, UPLOAD_CUSTOM_TYPE);
    assert_eq!(records[2]["retry_of"], "upload-001");
    skald.upload_finished(&tenant(), &session()).await;
    let step = turn_ends_at(&skald, &session(), 520).await;
    assert!(step.completed[0].is_done());
    assert_eq!(step.completed[0].attempts, 2);
    assert_eq!(step.dropped.unwrap().reason, DropReason::UploadCompleted);
    assert_eq!(
        upload_statuses(&skald, &session()),
        [
            "upload-001 running",
            "upload-001 failed",
            "upload-002 running",
            "upload-002 done"
        ]
    );
}

#[tokio::test]
async fn an_upload_over_the_store_limit_is_archived_in_parts_and_keeps_everything() {
    let stores = stores();
    let skald = engine(&stores, deterministic());
    let mut messages = conversation();
    let huge: String = (0..40_000)
        .map(|i| format!("line {i:06} of the huge build log\n"))
        .collect();
    assert!(huge.len() > skald_store::memories::MAX_CONTENT_BYTES);
    // Turn 0's tool output is the huge log.
    if let Some(Block::ToolResult(result)) = messages[2].content.get_mut(0) {
        result.content = vec![Block::text(huge.clone())].into();
    }
    seed(&skald, messages).await;
    assert_eq!(
        turn_ends_at(&skald, &session(), 520)
            .await
            .started
            .as_deref(),
        Some("upload-001")
    );
    skald.upload_finished(&tenant(), &session()).await;
    // The parts as the upload wrote them (the next turn would drop the range, summarising
    // 1.3 MB, which is slow in a debug build).
    let parts: Vec<String> = (1..)
        .map(|part| {
            MemoryUri::parse(&format!(
                "viking://session/{SESSION}/archive_001/part_{part:03}"
            ))
            .unwrap()
        })
        .map_while(|uri| skald.read_memory(&tenant(), &uri, MemoryLevel::L2).ok())
        .map(|part| part.text)
        .collect();
    assert!(parts.len() >= 2, "{}", parts.len());
    let whole = parts.concat();
    assert!(whole.contains("line 000000 of the huge build log"));
    assert!(whole.contains("line 039999 of the huge build log"));
    assert!(whole.contains("Remember that I prefer tabs"));
}
