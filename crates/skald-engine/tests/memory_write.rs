//! The memory write path: archives of compacted spans, extraction and its failure records,
//! retries, idempotence, and the two-threshold background upload (seed 002, Component 1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use serde_json::json;
use skald_core::compaction::{CompactionSettings, CompactionTrigger};
use skald_core::memory::extract::{ExistingMemory, MemoryCandidate};
use skald_core::memory::upload::{DropReason, UploadSettings};
use skald_core::memory::uri::MemoryUri;
use skald_core::memory::write::WriteSettings;
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_core::session::SessionHeader;
use skald_core::session::session_context;
use skald_engine::SessionState;
use skald_engine::internal::compact::{CompactRequest, compact_session};
use skald_engine::internal::memory_write::{
    EXTRACTION_CUSTOM_TYPE, ExtractionStatus, FailedStage, INTERRUPTED_ERROR, MemoryWriter,
    UPLOAD_CUSTOM_TYPE, UploadDriver, archive_compacted_span, recorded_outcomes,
    retry_pending_extractions,
};
use skald_llm::{
    DeterministicExtractor, Embedder, ExtractiveSummarizer, LlmError, MemoryExtractor,
};
use skald_store::memories::MemoryStore;
use skald_store::sessions::{NewSession, SessionStore};
use skald_store::{RefSettings, RefStore};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

const TENANT: &str = "acme";
const SESSION: &str = "s-mem";
const SYSTEM_PROMPT: &str = "You are a careful coding agent for the Apollo repository.";

struct Fixture {
    sessions: Arc<dyn SessionStore>,
    refs: Arc<dyn RefStore>,
    memories: Arc<dyn MemoryStore>,
}

fn fixture() -> Fixture {
    Fixture {
        sessions: skald_store::test_stores::session_store(),
        refs: skald_store::test_stores::ref_store(RefSettings::default()),
        memories: skald_store::test_stores::memory_store(),
    }
}

fn settings() -> WriteSettings {
    WriteSettings {
        user: "alice".into(),
        ..WriteSettings::default()
    }
}

fn writer(fixture: &Fixture, extractor: Arc<dyn MemoryExtractor>) -> MemoryWriter {
    MemoryWriter::new(fixture.memories.clone(), extractor, settings()).unwrap()
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

fn seed(fixture: &Fixture, messages: Vec<Message>) {
    let header = SessionHeader {
        id: SESSION.into(),
        ..SessionHeader::default()
    };
    fixture
        .sessions
        .create(
            &tenant_named(TENANT),
            NewSession::new(header, "openclaw-session"),
        )
        .unwrap();
    for message in messages {
        fixture
            .sessions
            .append_message(&tenant_named(TENANT), &session_named(SESSION), message)
            .unwrap();
    }
}

async fn compact(fixture: &Fixture) -> skald_engine::internal::compact::CompactResult {
    let settings = CompactionSettings::default();
    let request = CompactRequest {
        tenant: &tenant_named(TENANT),
        session_id: &session_named(SESSION),
        window_tokens: 200_000,
        trigger: CompactionTrigger::Manual,
        settings: &settings,
        custom_instructions: None,
        agents_md: None,
        context_tokens: None,
    };
    let result = compact_session(
        &fixture.sessions,
        &fixture.refs,
        &ExtractiveSummarizer::default(),
        &request,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert!(result.outcome.is_compacted(), "{:?}", result.outcome);
    result
}

fn archive_uri(number: u32) -> MemoryUri {
    MemoryUri::parse(&format!("viking://session/{SESSION}/archive_{number:03}")).unwrap()
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

fn custom_entries(fixture: &Fixture, custom: &str) -> Vec<serde_json::Value> {
    fixture
        .sessions
        .entries(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap()
        .into_iter()
        .filter_map(|entry| entry.kind.custom_data(custom).cloned())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The compaction hook
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_compacted_span_is_archived_with_system_prompt_and_tool_calls_then_extracted() {
    let fixture = fixture();
    seed(&fixture, conversation());
    let result = compact(&fixture).await;
    let writer = writer(&fixture, Arc::new(DeterministicExtractor::default()))
        .with_embedder(Arc::new(FixedEmbedder));
    let outcome = archive_compacted_span(
        &fixture.sessions,
        &writer,
        &tenant_named(TENANT),
        &session_named(SESSION),
        &result,
        Some(SYSTEM_PROMPT),
        &CancellationToken::new(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(outcome.status, ExtractionStatus::Done, "{outcome:?}");
    assert_eq!(outcome.archive, [archive_uri(1)]);

    let archive = fixture
        .memories
        .get(&tenant_named(TENANT), &archive_uri(1))
        .unwrap();
    assert!(archive.l2.contains(SYSTEM_PROMPT));
    assert!(
        archive.l2.contains("cat /var/log/job-0.log"),
        "tool calls are archived"
    );
    assert!(
        archive.l2.contains("job 0 output"),
        "tool results are archived"
    );
    assert!(
        archive
            .l0
            .starts_with(&format!("Session {SESSION} archive 001")),
        "{}",
        archive.l0
    );
    assert_eq!(archive.sources[0].session_id.as_deref(), Some(SESSION));

    // The user's request became a preference; the tool output saying "remember" did not.
    let uris: Vec<&str> = outcome.memories.iter().map(|m| m.uri.as_str()).collect();
    assert!(
        uris.contains(
            &"viking://user/alice/memories/preferences/prefer-tabs-spaces-every-repository.md"
        ),
        "{uris:?}"
    );
    assert!(
        uris.contains(&"viking://user/alice/memories/entities/alice.md"),
        "{uris:?}"
    );
    assert!(
        !uris.iter().any(|uri| uri.contains("light-mode")),
        "{uris:?}"
    );
    let preference = fixture
        .memories
        .get(&tenant_named(TENANT), &MemoryUri::parse(uris[0]).unwrap())
        .unwrap();
    let first_user_entry = fixture
        .sessions
        .entries(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap()[0]
        .id
        .clone();
    assert_eq!(preference.sources[0].entry_ids, [first_user_entry]);
    assert!(
        fixture
            .memories
            .stats(&tenant_named(TENANT))
            .unwrap()
            .with_embedding
            >= 2
    );

    let records = custom_entries(&fixture, EXTRACTION_CUSTOM_TYPE);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["status"], "done");
    assert_eq!(records[0]["attempts"], 1);
}

#[tokio::test]
async fn nothing_that_left_the_context_is_lost() {
    let fixture = fixture();
    seed(&fixture, conversation());
    let before = fixture
        .sessions
        .context(&tenant_named(TENANT), &session_named(SESSION), None)
        .unwrap();
    let result = compact(&fixture).await;
    let after = session_context(
        &fixture
            .sessions
            .load(&tenant_named(TENANT), &session_named(SESSION))
            .unwrap(),
        None,
    );
    let writer = writer(&fixture, Arc::new(DeterministicExtractor::default()));
    archive_compacted_span(
        &fixture.sessions,
        &writer,
        &tenant_named(TENANT),
        &session_named(SESSION),
        &result,
        None,
        &CancellationToken::new(),
    )
    .await
    .unwrap()
    .unwrap();
    let archive = fixture
        .memories
        .get(&tenant_named(TENANT), &archive_uri(1))
        .unwrap()
        .l2;
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
    let fixture = fixture();
    seed(&fixture, conversation());
    compact(&fixture).await;
    let context = session_context(
        &fixture
            .sessions
            .load(&tenant_named(TENANT), &session_named(SESSION))
            .unwrap(),
        None,
    );
    let summary = context[0].plain_text();
    assert!(summary.contains("## Open TODOs"), "{summary}");
    assert!(summary.contains("update the changelog"), "{summary}");
    assert!(summary.contains("## Pending user asks"), "{summary}");
}

#[tokio::test]
async fn a_failed_extraction_is_recorded_then_retried_before_the_next_archive() {
    let fixture = fixture();
    seed(&fixture, conversation());
    let result = compact(&fixture).await;
    let flaky = Arc::new(Flaky {
        failures: 1,
        calls: AtomicU32::new(0),
    });
    let writer = writer(&fixture, flaky.clone());
    let failed = archive_compacted_span(
        &fixture.sessions,
        &writer,
        &tenant_named(TENANT),
        &session_named(SESSION),
        &result,
        None,
        &CancellationToken::new(),
    )
    .await
    .unwrap()
    .unwrap();
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
    let records = custom_entries(&fixture, EXTRACTION_CUSTOM_TYPE);
    assert_eq!(records[0]["status"], "failed");
    assert_eq!(records[0]["failed_stage"], "extraction");

    let retried = retry_pending_extractions(
        &fixture.sessions,
        &writer,
        &tenant_named(TENANT),
        &session_named(SESSION),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(retried.len(), 1);
    assert_eq!(retried[0].status, ExtractionStatus::Done);
    assert_eq!(retried[0].attempts, 2);
    assert_eq!(retried[0].archive, [archive_uri(1)]);
    assert!(!retried[0].memories.is_empty());
    // Nothing left to retry, and no second archive.
    assert!(
        retry_pending_extractions(
            &fixture.sessions,
            &writer,
            &tenant_named(TENANT),
            &session_named(SESSION),
            &CancellationToken::new()
        )
        .await
        .unwrap()
        .is_empty()
    );
    assert!(
        fixture
            .memories
            .get(&tenant_named(TENANT), &archive_uri(2))
            .is_err()
    );
}

// ---------------------------------------------------------------------------------------------
// The two-threshold upload
// ---------------------------------------------------------------------------------------------

fn upload_writer(fixture: &Fixture, extractor: Arc<dyn MemoryExtractor>) -> MemoryWriter {
    let settings = WriteSettings {
        upload: UploadSettings {
            keep_recent_turns: 2,
            ..UploadSettings::default()
        },
        ..settings()
    };
    MemoryWriter::new(fixture.memories.clone(), extractor, settings).unwrap()
}

fn context_ids(fixture: &Fixture) -> Vec<String> {
    session_context(
        &fixture
            .sessions
            .load(&tenant_named(TENANT), &session_named(SESSION))
            .unwrap(),
        None,
    )
    .iter()
    .filter_map(|m| m.meta.id.clone())
    .collect()
}

fn upload_statuses(fixture: &Fixture) -> Vec<String> {
    custom_entries(fixture, UPLOAD_CUSTOM_TYPE)
        .iter()
        .map(|data| {
            format!(
                "{} {}",
                data["upload_id"].as_str().unwrap(),
                data["status"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn a_pending_failure_is_retried_automatically_by_the_next_archive() {
    let fixture = fixture();
    seed(&fixture, conversation());
    let first = compact(&fixture).await;
    let writer = writer(
        &fixture,
        Arc::new(Flaky {
            failures: 1,
            calls: AtomicU32::new(0),
        }),
    );
    archive_compacted_span(
        &fixture.sessions,
        &writer,
        &tenant_named(TENANT),
        &session_named(SESSION),
        &first,
        None,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    for turn in 6..10 {
        fixture
            .sessions
            .append_message(
                &tenant_named(TENANT),
                &session_named(SESSION),
                Message::text(Role::User, format!("Check job {turn} please.")),
            )
            .unwrap();
        for message in tool_turn(turn) {
            fixture
                .sessions
                .append_message(&tenant_named(TENANT), &session_named(SESSION), message)
                .unwrap();
        }
    }
    let second = compact(&fixture).await;
    archive_compacted_span(
        &fixture.sessions,
        &writer,
        &tenant_named(TENANT),
        &session_named(SESSION),
        &second,
        None,
        &CancellationToken::new(),
    )
    .await
    .unwrap()
    .unwrap();
    let outcomes = recorded_outcomes(
        &fixture
            .sessions
            .load(&tenant_named(TENANT), &session_named(SESSION))
            .unwrap(),
    );
    let statuses: Vec<(ExtractionStatus, u32)> =
        outcomes.iter().map(|o| (o.status, o.attempts)).collect();
    assert_eq!(
        statuses,
        [
            (ExtractionStatus::Failed, 1),
            (ExtractionStatus::Done, 2),
            (ExtractionStatus::Done, 1)
        ]
    );
    assert!(
        fixture
            .memories
            .get(&tenant_named(TENANT), &archive_uri(2))
            .is_ok()
    );
}

#[tokio::test]
async fn archiving_the_same_span_twice_duplicates_nothing() {
    let fixture = fixture();
    seed(&fixture, conversation());
    let result = compact(&fixture).await;
    let writer = writer(&fixture, Arc::new(DeterministicExtractor::default()));
    let cancel = CancellationToken::new();
    let first = archive_compacted_span(
        &fixture.sessions,
        &writer,
        &tenant_named(TENANT),
        &session_named(SESSION),
        &result,
        None,
        &cancel,
    )
    .await
    .unwrap()
    .unwrap();
    let stats = fixture.memories.stats(&tenant_named(TENANT)).unwrap();
    // The hook skips a span recorded done…
    assert!(
        archive_compacted_span(
            &fixture.sessions,
            &writer,
            &tenant_named(TENANT),
            &session_named(SESSION),
            &result,
            None,
            &cancel
        )
        .await
        .unwrap()
        .is_none()
    );
    // …and archiving it again by hand, by this writer or another one (another server over the
    // same store), gives the recorded outcome and writes nothing: the span's lease is finished.
    let session = fixture
        .sessions
        .load(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap();
    let span = skald_engine::internal::memory_write::ArchiveSpan {
        session_id: session_named(SESSION),
        messages: session_context(&session, None)
            .into_iter()
            .skip(1)
            .collect(),
        summary: None,
        range: first.range.clone(),
        origin: first.origin.clone(),
        archived: Vec::new(),
        previous_attempts: 0,
    };
    let elsewhere = self::writer(&fixture, Arc::new(DeterministicExtractor::default()));
    assert_ne!(elsewhere.holder(), writer.holder());
    let here = writer.archive(&tenant_named(TENANT), &span, &cancel).await;
    let there = elsewhere
        .archive(&tenant_named(TENANT), &span, &cancel)
        .await;
    assert_eq!(here, first);
    assert_eq!(there, first);
    assert_eq!(
        fixture.memories.stats(&tenant_named(TENANT)).unwrap(),
        stats
    );
    assert!(
        fixture
            .memories
            .get(&tenant_named(TENANT), &archive_uri(2))
            .is_err()
    );
}

#[tokio::test]
async fn the_upload_starts_at_half_the_window_without_blocking_the_request() {
    let fixture = fixture();
    let mut held = SessionState::default();
    seed(&fixture, conversation());
    let gate = Arc::new(Semaphore::new(0));
    let driver = UploadDriver::new(upload_writer(
        &fixture,
        Arc::new(Gated { gate: gate.clone() }),
    ));
    let before = context_ids(&fixture);

    let below = driver
        .before_request(
            &mut held,
            &fixture.sessions,
            &tenant_named(TENANT),
            &session_named(SESSION),
            499,
            1000,
        )
        .await
        .unwrap();
    assert_eq!(below.started, None);
    // The extractor is held: before_request returns while the upload runs.
    let step = driver
        .before_request(
            &mut held,
            &fixture.sessions,
            &tenant_named(TENANT),
            &session_named(SESSION),
            500,
            1000,
        )
        .await
        .unwrap();
    assert_eq!(step.started.as_deref(), Some("upload-001"));
    assert!(step.dropped.is_none());
    assert!(driver.is_running(&tenant_named(TENANT), &session_named(SESSION)));
    assert_eq!(
        context_ids(&fixture),
        before,
        "nothing leaves the context at 50 %"
    );
    assert_eq!(upload_statuses(&fixture), ["upload-001 running"]);
    let record = &custom_entries(&fixture, UPLOAD_CUSTOM_TYPE)[0];
    assert_eq!(record["range"]["first_entry_id"], before[0].as_str());
    // A second request below 70 % waits for it.
    let waiting = driver
        .before_request(
            &mut held,
            &fixture.sessions,
            &tenant_named(TENANT),
            &session_named(SESSION),
            650,
            1000,
        )
        .await
        .unwrap();
    assert_eq!(waiting, Default::default());
    gate.add_permits(10);
}

#[tokio::test]
async fn at_seventy_percent_the_range_leaves_while_the_upload_runs() {
    let fixture = fixture();
    let mut held = SessionState::default();
    seed(&fixture, conversation());
    let gate = Arc::new(Semaphore::new(0));
    let driver = UploadDriver::new(upload_writer(
        &fixture,
        Arc::new(Gated { gate: gate.clone() }),
    ));
    driver
        .before_request(
            &mut held,
            &fixture.sessions,
            &tenant_named(TENANT),
            &session_named(SESSION),
            500,
            1000,
        )
        .await
        .unwrap();
    let before = context_ids(&fixture);
    let record = custom_entries(&fixture, UPLOAD_CUSTOM_TYPE)[0].clone();
    let end = record["range"]["end_entry_id"].as_str().unwrap().to_owned();

    // Newer messages arrive while the upload runs.
    let newer = fixture
        .sessions
        .append_message(
            &tenant_named(TENANT),
            &session_named(SESSION),
            Message::text(Role::User, "And job 9?"),
        )
        .unwrap();
    let step = driver
        .before_request(
            &mut held,
            &fixture.sessions,
            &tenant_named(TENANT),
            &session_named(SESSION),
            700,
            1000,
        )
        .await
        .unwrap();
    let dropped = step.dropped.unwrap();
    assert_eq!(dropped.reason, DropReason::ForcedAtDropThreshold);
    assert!(dropped.upload_running);
    assert!(driver.is_running(&tenant_named(TENANT), &session_named(SESSION)));

    let session = fixture
        .sessions
        .load(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap();
    let context = session_context(&session, None);
    let summary = context[0].plain_text();
    assert!(
        summary.contains(&format!("viking://session/{SESSION}/")),
        "{summary}"
    );
    assert!(
        summary.contains("update the changelog for job 0"),
        "{summary}"
    );
    let after = context_ids(&fixture);
    let end_at = before.iter().position(|id| *id == end).unwrap();
    assert_eq!(
        after[1..after.len() - 1],
        before[end_at..],
        "the kept turns stay, in order"
    );
    assert_eq!(after.last(), Some(&newer.id), "newer messages stay");

    // The upload finishes later; its range already left, so only its state is recorded.
    gate.add_permits(10);
    driver
        .wait_finished(&tenant_named(TENANT), &session_named(SESSION))
        .await;
    let step = driver
        .before_request(
            &mut held,
            &fixture.sessions,
            &tenant_named(TENANT),
            &session_named(SESSION),
            300,
            1000,
        )
        .await
        .unwrap();
    assert_eq!(step.completed.len(), 1);
    assert!(step.completed[0].is_done(), "{:?}", step.completed[0]);
    assert!(step.dropped.is_none());
    assert_eq!(
        upload_statuses(&fixture),
        ["upload-001 running", "upload-001 done"]
    );
    assert!(
        fixture
            .memories
            .get(&tenant_named(TENANT), &archive_uri(1))
            .unwrap()
            .l2
            .contains("prefer tabs over spaces")
    );
}

#[tokio::test]
async fn a_completed_upload_below_seventy_percent_drops_only_its_range() {
    let fixture = fixture();
    let mut held = SessionState::default();
    seed(&fixture, conversation());
    let driver = UploadDriver::new(upload_writer(
        &fixture,
        Arc::new(DeterministicExtractor::default()),
    ));
    driver
        .before_request(
            &mut held,
            &fixture.sessions,
            &tenant_named(TENANT),
            &session_named(SESSION),
            550,
            1000,
        )
        .await
        .unwrap();
    driver
        .wait_finished(&tenant_named(TENANT), &session_named(SESSION))
        .await;
    let before = context_ids(&fixture);
    let record = custom_entries(&fixture, UPLOAD_CUSTOM_TYPE)[0].clone();
    let end = record["range"]["end_entry_id"].as_str().unwrap().to_owned();
    let newer = fixture
        .sessions
        .append_message(
            &tenant_named(TENANT),
            &session_named(SESSION),
            Message::text(Role::User, "Next, job 10."),
        )
        .unwrap();

    let step = driver
        .before_request(
            &mut held,
            &fixture.sessions,
            &tenant_named(TENANT),
            &session_named(SESSION),
            600,
            1000,
        )
        .await
        .unwrap();
    assert_eq!(step.completed.len(), 1);
    assert_eq!(
        step.dropped.as_ref().unwrap().reason,
        DropReason::UploadCompleted
    );
    assert!(!step.dropped.as_ref().unwrap().upload_running);
    let after = context_ids(&fixture);
    let end_at = before.iter().position(|id| *id == end).unwrap();
    assert_eq!(after[1..after.len() - 1], before[end_at..]);
    assert_eq!(after.last(), Some(&newer.id));
    assert_eq!(
        upload_statuses(&fixture),
        ["upload-001 running", "upload-001 done"]
    );
    // The extraction is recorded like a compaction's.
    let outcomes = recorded_outcomes(
        &fixture
            .sessions
            .load(&tenant_named(TENANT), &session_named(SESSION))
            .unwrap(),
    );
    assert_eq!(outcomes.len(), 1);
    assert!(
        outcomes[0]
            .memories
            .iter()
            .any(|m| m.uri.as_str().contains("/preferences/"))
    );
}

#[tokio::test]
async fn a_crash_mid_upload_leaves_a_recorded_state_that_is_retried() {
    let fixture = fixture();
    let mut held = SessionState::default();
    seed(&fixture, conversation());
    {
        let gate = Arc::new(Semaphore::new(0));
        let crashed = UploadDriver::new(upload_writer(&fixture, Arc::new(Gated { gate })));
        crashed
            .before_request(
                &mut held,
                &fixture.sessions,
                &tenant_named(TENANT),
                &session_named(SESSION),
                520,
                1000,
            )
            .await
            .unwrap();
        // The process ends here: the driver and its task are gone.
    }
    assert_eq!(upload_statuses(&fixture), ["upload-001 running"]);

    let driver = UploadDriver::new(upload_writer(
        &fixture,
        Arc::new(DeterministicExtractor::default()),
    ));
    let step = driver
        .before_request(
            &mut held,
            &fixture.sessions,
            &tenant_named(TENANT),
            &session_named(SESSION),
            520,
            1000,
        )
        .await
        .unwrap();
    assert_eq!(step.completed.len(), 1);
    assert_eq!(step.completed[0].error.as_deref(), Some(INTERRUPTED_ERROR));
    // The failed range is still in the context: the upload starts again, as a retry.
    assert_eq!(step.started.as_deref(), Some("upload-002"));
    let records = custom_entries(&fixture, UPLOAD_CUSTOM_TYPE);
    assert_eq!(records[2]["retry_of"], "upload-001");
    driver
        .wait_finished(&tenant_named(TENANT), &session_named(SESSION))
        .await;
    let step = driver
        .before_request(
            &mut held,
            &fixture.sessions,
            &tenant_named(TENANT),
            &session_named(SESSION),
            520,
            1000,
        )
        .await
        .unwrap();
    assert!(step.completed[0].is_done());
    assert_eq!(step.completed[0].attempts, 2);
    assert_eq!(step.dropped.unwrap().reason, DropReason::UploadCompleted);
    assert_eq!(
        upload_statuses(&fixture),
        [
            "upload-001 running",
            "upload-001 failed",
            "upload-002 running",
            "upload-002 done"
        ]
    );
}

#[tokio::test]
async fn failures_past_the_attempt_limit_stay_recorded_but_are_not_retried() {
    let fixture = fixture();
    seed(&fixture, conversation());
    let result = compact(&fixture).await;
    let settings = WriteSettings {
        max_extraction_attempts: 2,
        ..settings()
    };
    let writer = MemoryWriter::new(
        fixture.memories.clone(),
        Arc::new(Flaky {
            failures: 100,
            calls: AtomicU32::new(0),
        }),
        settings,
    )
    .unwrap();
    let cancel = CancellationToken::new();
    archive_compacted_span(
        &fixture.sessions,
        &writer,
        &tenant_named(TENANT),
        &session_named(SESSION),
        &result,
        None,
        &cancel,
    )
    .await
    .unwrap();
    let retried = retry_pending_extractions(
        &fixture.sessions,
        &writer,
        &tenant_named(TENANT),
        &session_named(SESSION),
        &cancel,
    )
    .await
    .unwrap();
    assert_eq!(retried[0].attempts, 2);
    assert!(
        retry_pending_extractions(
            &fixture.sessions,
            &writer,
            &tenant_named(TENANT),
            &session_named(SESSION),
            &cancel
        )
        .await
        .unwrap()
        .is_empty()
    );
    let outcomes = recorded_outcomes(
        &fixture
            .sessions
            .load(&tenant_named(TENANT), &session_named(SESSION))
            .unwrap(),
    );
    assert_eq!(outcomes.len(), 2);
    assert!(
        outcomes
            .iter()
            .all(|outcome| outcome.status == ExtractionStatus::Failed)
    );
}

#[tokio::test]
async fn an_archive_over_the_store_limit_is_split_into_parts_and_keeps_everything() {
    let fixture = fixture();
    let mut messages = conversation();
    let huge: String = (0..40_000)
        .map(|i| format!("line {i:06} of the huge build log\n"))
        .collect();
    assert!(huge.len() > skald_store::memories::MAX_CONTENT_BYTES);
    // Turn 0's tool output is the huge log.
    if let Some(Block::ToolResult(result)) = messages[2].content.get_mut(0) {
        result.content = vec![Block::text(huge.clone())].into();
    }
    seed(&fixture, messages);
    // Compacting 1.3 MB is slow in a debug build: the span is archived directly.
    let span: Vec<Message> = fixture
        .sessions
        .context(&tenant_named(TENANT), &session_named(SESSION), None)
        .unwrap()
        .into_iter()
        .take(8)
        .collect();
    let range = skald_engine::internal::memory_write::SpanRange {
        first_entry_id: span[0].meta.id.clone().unwrap(),
        last_entry_id: span[7].meta.id.clone().unwrap(),
        end_entry_id: None,
        messages: span.len(),
    };
    let writer = writer(&fixture, Arc::new(DeterministicExtractor::default()));
    let outcome = writer
        .archive(
            &tenant_named(TENANT),
            &skald_engine::internal::memory_write::ArchiveSpan {
                session_id: session_named(SESSION),
                messages: span,
                summary: None,
                range,
                origin: skald_engine::internal::memory_write::ArchiveOrigin::Upload {
                    upload_id: "upload-001".into(),
                },
                archived: Vec::new(),
                previous_attempts: 0,
            },
            &CancellationToken::new(),
        )
        .await;
    assert!(outcome.is_done(), "{outcome:?}");
    assert!(outcome.archive.len() >= 2, "{:?}", outcome.archive);
    assert_eq!(
        outcome.archive[0].as_str(),
        format!("viking://session/{SESSION}/archive_001/part_001")
    );
    let whole: String = outcome
        .archive
        .iter()
        .map(|uri| fixture.memories.get(&tenant_named(TENANT), uri).unwrap().l2)
        .collect();
    assert!(whole.contains("line 000000 of the huge build log"));
    assert!(whole.contains("line 039999 of the huge build log"));
    assert!(whole.contains("Remember that I prefer tabs"));
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

/// A session id of the tests, parsed (it is well formed).
fn session_named(id: &str) -> skald_core::ids::SessionId {
    skald_core::ids::SessionId::parse(id).unwrap()
}
