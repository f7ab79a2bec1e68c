//! The memory writer on its own, where no use case of the engine reaches it: one span archived
//! again by hand — by this writer or another server's — and one span archived by two servers'
//! writers at once (each with stores of its own over one database: a SQLite file, and
//! PostgreSQL when `SKALD_TEST_DATABASE_URL` is set, in a schema of its own dropped at the end).
//! The engine's paths to the writer (a compaction's archive, the two-threshold upload, two
//! engines over one store) are tested through `Engine` in `tests/memory_write.rs` and
//! `tests/memory_lease.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use serde_json::json;
use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::extract::{ExistingMemory, MemoryCandidate};
use skald_core::memory::write::WriteSettings;
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_core::session::{SessionHeader, session_context};
use skald_llm::{DeterministicExtractor, LlmError, MemoryExtractor};
use skald_store::Database;
use skald_store::memories::{MemoryStore, PgMemoryStore, SqliteMemoryStore};
use skald_store::sessions::{NewSession, PgSessionStore, SessionStore, SqliteSessionStore};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::ARCHIVING_ELSEWHERE;
use super::writer::{ArchiveOrigin, ArchiveSpan, MemoryWriter, SpanRange};

const SESSION: &str = "s-lease";

fn tenant() -> Tenant {
    Tenant::parse("acme").unwrap()
}

fn session() -> SessionId {
    SessionId::parse(SESSION).unwrap()
}

/// One server's view of the shared database: stores of its own.
struct Server {
    sessions: Arc<dyn SessionStore>,
    memories: Arc<dyn MemoryStore>,
}

/// Two servers over one database, and what to clean up.
struct Deployment {
    servers: [Server; 2],
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
    let server = || Server {
        sessions: Arc::new(SqliteSessionStore::open(&path).unwrap()),
        memories: Arc::new(SqliteMemoryStore::open(&path).unwrap()),
    };
    Deployment {
        servers: [server(), server()],
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
    let schema = format!("writer_{test}_{}_{nanos}", std::process::id());
    let server = || {
        let database = Database::connect_in_schema(&url, &schema).unwrap();
        Server {
            sessions: Arc::new(PgSessionStore::new(database.clone())),
            memories: Arc::new(PgMemoryStore::new(database).unwrap()),
        }
    };
    Some(Deployment {
        servers: [server(), server()],
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
    fn new(permits: usize) -> Arc<Counting> {
        Arc::new(Counting {
            calls: AtomicU32::new(0),
            gate: Arc::new(Semaphore::new(permits)),
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

fn writer(server: &Server, extractor: Arc<Counting>) -> MemoryWriter {
    let settings = WriteSettings {
        user: "alice".into(),
        ..WriteSettings::default()
    };
    MemoryWriter::new(server.memories.clone(), extractor, settings).unwrap()
}

/// Three user turns, each running a tool; the first ones say things to remember.
fn conversation() -> Vec<Message> {
    let asks = [
        "Remember that I prefer tabs over spaces in every repository.",
        "My sister Alice is reviewing the Apollo release. Check job 1.",
        "Check job 2 please.",
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

fn seed(server: &Server) {
    let header = SessionHeader {
        id: SESSION.into(),
        ..SessionHeader::default()
    };
    server
        .sessions
        .create(&tenant(), NewSession::new(header, "openclaw-session"))
        .unwrap();
    for message in conversation() {
        server
            .sessions
            .append_message(&tenant(), &session(), message)
            .unwrap();
    }
}

/// The first eight messages of the stored conversation, as a span that left the context.
fn span(server: &Server) -> ArchiveSpan {
    let stored = server.sessions.load(&tenant(), &session()).unwrap();
    let messages: Vec<Message> = session_context(&stored, None).into_iter().take(8).collect();
    ArchiveSpan {
        session_id: session(),
        range: SpanRange {
            first_entry_id: messages[0].meta.id.clone().unwrap(),
            last_entry_id: messages[7].meta.id.clone().unwrap(),
            end_entry_id: None,
            messages: 8,
        },
        messages,
        summary: None,
        origin: ArchiveOrigin::Compaction {
            checkpoint_entry_id: "c1".into(),
        },
        archived: Vec::new(),
        previous_attempts: 0,
    }
}

#[tokio::test]
async fn a_span_archived_again_by_hand_gives_its_outcome_and_writes_nothing() {
    let deployment = on_sqlite();
    let [one, two] = &deployment.servers;
    seed(one);
    let extractor = Counting::new(10);
    let (here, elsewhere) = (
        writer(one, extractor.clone()),
        writer(two, extractor.clone()),
    );
    assert_ne!(elsewhere.holder(), here.holder());
    let span = span(one);
    let cancel = CancellationToken::new();
    let first = here.archive(&tenant(), &span, &cancel).await;
    assert!(first.is_done(), "{first:?}");
    let stats = one.memories.stats(&tenant()).unwrap();
    // By this writer or another server's: the span's lease is finished.
    assert_eq!(here.archive(&tenant(), &span, &cancel).await, first);
    assert_eq!(elsewhere.archive(&tenant(), &span, &cancel).await, first);
    assert_eq!(extractor.calls.load(Ordering::SeqCst), 1);
    assert_eq!(one.memories.stats(&tenant()).unwrap(), stats);
}

async fn one_span_archived_by_two_servers_at_once_is_extracted_once(deployment: Deployment) {
    let [one, two] = &deployment.servers;
    seed(one);
    let extractor = Counting::new(0);
    let (first, second) = (
        writer(one, extractor.clone()),
        writer(two, extractor.clone()),
    );
    let span = span(one);
    let cancel = CancellationToken::new();
    let running = {
        let (first, span, cancel) = (first.clone(), span.clone(), cancel.clone());
        tokio::spawn(async move { first.archive(&tenant(), &span, &cancel).await })
    };
    while extractor.calls.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    // The first server is extracting: the second writes nothing and says why, without
    // spending an attempt.
    let stats = two.memories.stats(&tenant()).unwrap();
    let meanwhile = second.archive(&tenant(), &span, &cancel).await;
    assert!(!meanwhile.is_done());
    assert!(
        meanwhile
            .error
            .as_deref()
            .unwrap()
            .starts_with(ARCHIVING_ELSEWHERE),
        "{meanwhile:?}"
    );
    assert_eq!(meanwhile.attempts, 0);
    assert_eq!(two.memories.stats(&tenant()).unwrap(), stats);

    extractor.gate.add_permits(10);
    let done = running.await.unwrap();
    assert!(done.is_done(), "{done:?}");
    assert!(!done.memories.is_empty(), "{done:?}");
    // Afterwards either server gets the recorded outcome back, and nothing is extracted again.
    let after = two.memories.stats(&tenant()).unwrap();
    assert_eq!(second.archive(&tenant(), &span, &cancel).await, done);
    assert_eq!(first.archive(&tenant(), &span, &cancel).await, done);
    assert_eq!(extractor.calls.load(Ordering::SeqCst), 1);
    assert_eq!(two.memories.stats(&tenant()).unwrap(), after);
}

#[tokio::test]
async fn one_span_archived_by_two_servers_at_once_is_extracted_once_on_sqlite() {
    one_span_archived_by_two_servers_at_once_is_extracted_once(on_sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_span_archived_by_two_servers_at_once_is_extracted_once_on_postgres() {
    let Some(deployment) = on_postgres("span") else {
        eprintln!("skipped: SKALD_TEST_DATABASE_URL is not set");
        return;
    };
    one_span_archived_by_two_servers_at_once_is_extracted_once(deployment).await;
}
