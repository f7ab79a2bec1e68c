//! Two engines over one store — two servers over one PostgreSQL database when
//! `SKALD_TEST_DATABASE_URL` is set (each with its own connection pool, as two processes have),
//! else two over one SQLite file — writing one session and reading it alternately: every read
//! on one engine sees what the other acknowledged just before, although each holds the
//! session's state (the stored session, its rebuilt context) from its own earlier calls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Message, Role};
use skald_core::pipeline::policy::Policy;
use skald_engine::TurnAnchors;
use skald_engine::{AssembleInput, Engine, EngineConfig, Stores, ViewOptions};
use skald_store::memories::{PgMemoryStore, SqliteMemoryStore};
use skald_store::postgres::Database;
use skald_store::refs::{PgRefStore, RefSettings, SqliteRefStore};
use skald_store::sessions::{PgSessionStore, SqliteSessionStore};
use std::sync::Arc;

/// Where the two engines' stores live; dropping it removes what the test made.
enum Shared {
    Postgres {
        url: String,
        schema: String,
    },
    /// The directory of the SQLite file, removed when dropped.
    Sqlite {
        _dir: tempfile::TempDir,
    },
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Shared::Postgres { url, schema } = self {
            let _ = Database::drop_schema(url, schema);
        }
    }
}

fn engine_over(stores: Stores) -> Engine {
    let config = EngineConfig::new(Policy::preset("skald").unwrap());
    Engine::new(stores, config, tokio_util::task::TaskTracker::new()).unwrap()
}

/// Two engines, each with stores of its own over one database.
fn two_engines() -> (Engine, Engine, Shared) {
    match std::env::var("SKALD_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos();
            let schema = format!("shared_{}_{nanos}", std::process::id());
            let open = || {
                let database = Database::connect_in_schema(&url, &schema).unwrap();
                engine_over(Stores {
                    sessions: Arc::new(PgSessionStore::new(database.clone())),
                    refs: Arc::new(
                        PgRefStore::new(database.clone(), RefSettings::default()).unwrap(),
                    ),
                    memories: Arc::new(PgMemoryStore::new(database).unwrap()),
                })
            };
            let (first, second) = (open(), open());
            (first, second, Shared::Postgres { url, schema })
        }
        Ok(_) | Err(_) => {
            // CI sets the variable: there this test is the two-server one on PostgreSQL.
            assert!(
                std::env::var_os("CI").is_none(),
                "SKALD_TEST_DATABASE_URL is not set in CI"
            );
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("skald.sqlite3");
            let open = || {
                engine_over(Stores {
                    sessions: Arc::new(SqliteSessionStore::open(&path).unwrap()),
                    refs: Arc::new(SqliteRefStore::open(&path, RefSettings::default()).unwrap()),
                    memories: Arc::new(SqliteMemoryStore::open(&path).unwrap()),
                })
            };
            let (first, second) = (open(), open());
            (first, second, Shared::Sqlite { _dir: dir })
        }
    }
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(Message::plain_text).collect()
}

/// Every read the reader answers from its state or the store holds everything said so far.
async fn reads_see(
    reader: &Engine,
    tenant: &Tenant,
    session: &SessionId,
    said: &[String],
    round: usize,
) {
    let view = reader
        .view(tenant, session, ViewOptions::default())
        .await
        .unwrap();
    assert_eq!(&texts(&view.view.messages), said, "view, round {round}");
    let assembled = reader
        .assemble(tenant, session, AssembleInput::default())
        .await
        .unwrap();
    assert_eq!(
        &texts(&assembled.view.view.messages),
        said,
        "assemble, round {round}"
    );
    let overview = reader.session_overview(tenant, session).unwrap();
    assert_eq!(
        overview.info.message_count as usize,
        said.len(),
        "overview, round {round}"
    );
    let loaded = reader.load_session(tenant, session).unwrap();
    let path: Vec<String> = loaded
        .path_to(None)
        .iter()
        .filter_map(|entry| entry.kind.as_message())
        .map(Message::plain_text)
        .collect();
    assert_eq!(&path, said, "entries, round {round}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_over_one_store_writing_and_reading_alternately_never_read_stale() {
    let (first, second, _shared) = two_engines();
    let engines = [&first, &second];
    let tenant = Tenant::parse("acme").unwrap();
    let session = SessionId::parse("shared-1").unwrap();
    let mut said: Vec<String> = Vec::new();
    for round in 0..24 {
        let (writer, reader) = (engines[round % 2], engines[(round + 1) % 2]);
        // Each kind of acknowledged write in turn: ingest, a committed turn, a synced
        // conversation (assemble with the host's messages).
        match round % 3 {
            0 => {
                let message = format!("ingested {round}");
                let stored = writer
                    .ingest(&tenant, &session, vec![Message::text(Role::User, &message)])
                    .await
                    .unwrap();
                assert_eq!(stored.ingested, 1);
                said.push(message);
            }
            1 => {
                let turn = [format!("asked {round}"), format!("answered {round}")];
                writer
                    .commit_turn(
                        &tenant,
                        &session,
                        &format!("turn-{round}"),
                        &TurnAnchors::default(),
                        vec![
                            Message::text(Role::User, &turn[0]),
                            Message::text(Role::Assistant, &turn[1]),
                        ],
                        "openclaw-session",
                    )
                    .await
                    .unwrap();
                said.extend(turn);
            }
            _ => {
                let message = format!("appended {round}");
                let mut conversation: Vec<Message> = said
                    .iter()
                    .map(|text| {
                        let role = if text.starts_with("answered") {
                            Role::Assistant
                        } else {
                            Role::User
                        };
                        Message::text(role, text)
                    })
                    .collect();
                conversation.push(Message::text(Role::User, &message));
                let synced = writer
                    .sync(&tenant, &session, &conversation, "openclaw-session")
                    .await
                    .unwrap();
                assert_eq!(
                    (synced.appended, synced.forked),
                    (1, false),
                    "round {round}"
                );
                said.push(message);
            }
        }
        reads_see(reader, &tenant, &session, &said, round).await;
        // The writer reads too, so both hold the session's state into the next round.
        reads_see(writer, &tenant, &session, &said, round).await;
    }
}
