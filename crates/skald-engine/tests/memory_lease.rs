//! Several servers over one store upload a conversation's span once: two engines, each with
//! stores of its own over one database, take turns on one conversation while an upload runs on
//! one of them. On a SQLite file always, and on PostgreSQL too when `SKALD_TEST_DATABASE_URL`
//! is set (a schema of its own, dropped at the end). The span's lease itself — two servers'
//! writers archiving one span at once — is tested with the memory writer
//! (`memory_write/tests.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod memory_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use memory_common::{MAY_1_2023, alice_config, turn_ends_at, upload_statuses};
use serde_json::json;
use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::extract::{ExistingMemory, MemoryCandidate};
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_engine::{Engine, ManualClock, Stores};
use skald_llm::{DeterministicExtractor, LlmError, MemoryExtractor};
use skald_store::Database;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const SESSION: &str = "s-lease";

fn tenant() -> Tenant {
    Tenant::parse("acme").unwrap()
}

fn session() -> SessionId {
    SessionId::parse(SESSION).unwrap()
}

/// Two servers' stores over one database, and what to clean up.
struct Deployment {
    stores: [Stores; 2],
    _dir: Option<tempfile::TempDir>,
    schema: Option<(String, String)>,
}

impl Drop for Deployment {
    fn drop(&mut self) {
        if let Some((url, schema)) = &self.schema {
            let _ = Database::drop_schema(url, schema);
        }
    }
}

fn on_sqlite() -> Deployment {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skald.sqlite3");
    let server = || Stores::open_sqlite(&path).unwrap();
    Deployment {
        stores: [server(), server()],
        _dir: Some(dir),
        schema: None,
    }
}

fn on_postgres(test: &str) -> Option<Deployment> {
    let Some(url) = std::env::var("SKALD_TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
    else {
        // CI sets the variable; a CI run without it would pass these tests untested.
        assert!(
            std::env::var_os("CI").is_none(),
            "SKALD_TEST_DATABASE_URL is not set in CI"
        );
        return None;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let schema = format!("lease_{test}_{}_{nanos}", std::process::id());
    let server = || {
        let database = Database::connect_in_schema(&url, &schema).unwrap();
        Stores::open_postgres(&database).unwrap()
    };
    Some(Deployment {
        stores: [server(), server()],
        _dir: None,
        schema: Some((url, schema)),
    })
}

/// Counts its calls; each waits for a permit of `gate` (an extraction still running).
struct Counting {
    calls: AtomicU32,
    gate: Arc<Semaphore>,
}

impl Counting {
    fn new() -> Arc<Counting> {
        Arc::new(Counting {
            calls: AtomicU32::new(0),
            gate: Arc::new(Semaphore::new(0)),
        })
    }
}

#[async_trait]
impl MemoryExtractor for Counting {
    fn name(&self) -> &str {
        "counting"
    }

    async fn extract(
        &self,
        span: &[Message],
        existing: &[ExistingMemory],
        cancel: &CancellationToken,
    ) -> Result<Vec<MemoryCandidate>, LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let _permit = self.gate.acquire().await.map_err(|_| LlmError::Aborted)?;
        DeterministicExtractor::default()
            .extract(span, existing, cancel)
            .await
    }
}

/// A server: an engine over `stores` writing Alice's memories with `extractor`, its uploads
/// keeping the two newest turns in the context.
fn server(stores: &Stores, extractor: Arc<Counting>) -> Engine {
    let mut config = alice_config("none", Arc::new(ManualClock::new(MAY_1_2023)));
    config.extractor = extractor;
    config.memory.write.upload.keep_recent_turns = 2;
    Engine::new(stores.clone(), config, TaskTracker::new()).unwrap()
}

/// Six user turns, each running a tool; the first ones say things to remember.
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
        let id = format!("call_{turn}");
        messages.push(Message::text(Role::User, *ask));
        messages.push(Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: id.clone(),
                name: "bash".into(),
                arguments: json!({"command": format!("cat /var/log/job-{turn}.log")}),
                arguments_text: None,
                extra: Extra::new(),
            })],
        ));
        messages.push(Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: id,
                tool_name: Some("bash".into()),
                content: vec![Block::text(format!("job {turn}: {}", "ok ".repeat(300)))].into(),
                content_form: ContentForm::Blocks,
                is_error: None,
                details: None,
                extra: Extra::new(),
            })],
        ));
        messages.push(Message::text(
            Role::Assistant,
            format!("Job {turn} is fine."),
        ));
    }
    messages
}

async fn an_upload_running_on_one_server_is_not_run_again_by_the_other(deployment: Deployment) {
    let extractor = Counting::new();
    let [one, two] = &deployment.stores;
    let (one, two) = (
        server(one, extractor.clone()),
        server(two, extractor.clone()),
    );
    one.ingest(&tenant(), &session(), conversation())
        .await
        .unwrap();
    let started = turn_ends_at(&one, &session(), 520).await;
    assert_eq!(started.started.as_deref(), Some("upload-001"));
    while extractor.calls.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    // The next turn of the conversation reaches the other server while the upload runs there:
    // not taken for an interrupted upload, not started again.
    let meanwhile = turn_ends_at(&two, &session(), 560).await;
    assert!(meanwhile.completed.is_empty(), "{meanwhile:?}");
    assert_eq!(meanwhile.started, None);
    assert!(!two.upload_running(&tenant(), &session()));
    assert_eq!(upload_statuses(&two, &session()), ["upload-001 running"]);

    extractor.gate.add_permits(10);
    one.upload_finished(&tenant(), &session()).await;
    // The other server collects the finished upload from the store and drops its range.
    let collected = turn_ends_at(&two, &session(), 560).await;
    assert_eq!(collected.completed.len(), 1, "{collected:?}");
    assert!(collected.completed[0].is_done(), "{collected:?}");
    assert!(collected.dropped.is_some(), "{collected:?}");
    assert_eq!(
        upload_statuses(&one, &session()),
        ["upload-001 running", "upload-001 done"]
    );
    assert_eq!(extractor.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_upload_running_on_one_server_is_not_run_again_by_the_other_on_sqlite() {
    an_upload_running_on_one_server_is_not_run_again_by_the_other(on_sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_running_on_one_server_is_not_run_again_by_the_other_on_postgres() {
    let Some(deployment) = on_postgres("upload") else {
        eprintln!("skipped: SKALD_TEST_DATABASE_URL is not set");
        return;
    };
    an_upload_running_on_one_server_is_not_run_again_by_the_other(deployment).await;
}
