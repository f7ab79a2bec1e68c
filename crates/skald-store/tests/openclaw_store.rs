//! OpenClaw 2026.9's SQLite transcript store, read back and imported: the tests build a small
//! `openclaw-agent.sqlite` with OpenClaw's own `transcript_events` DDL
//! (`fixtures/openclaw_transcript_events.sql`, copied from OpenClaw 2026.9.6's schema), plain
//! and zstd-compressed rows as OpenClaw writes them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};
use serde_json::{Value, json};
use skald_core::ids::{SessionId, Tenant};
use skald_store::sessions::import::{ImportOptions, ImportStatus, import_transcript};
use skald_store::sessions::openclaw_store::{OpenClawStore, OpenClawStoreError, is_sqlite};
use skald_store::sessions::{SessionStore, SqliteSessionStore};

const TRANSCRIPT_EVENTS: &str = include_str!("fixtures/openclaw_transcript_events.sql");

/// A navigation projection that passes OpenClaw's CHECK on compressed rows.
const NAVIGATION: &str = r#"{"version":1,"report":{"kind":"canonical"},"navigation":{},"reset":{},"model":{},"modelBytes":10,"modelWithoutCheckpointBytes":10,"withoutCustomDataBytes":10}"#;

fn header(id: &str) -> Value {
    json!({"type": "session", "version": 4, "id": id, "timestamp": "2026-11-27T12:00:00.000Z", "cwd": "/work"})
}

fn message(id: &str, parent: Option<&str>, role: &str, text: &str) -> Value {
    let message = match role {
        "user" => json!({"role": "user", "content": text, "timestamp": 1}),
        _ => {
            json!({"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": 2})
        }
    };
    json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-11-27T12:00:01.000Z", "message": message})
}

struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn create_store() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openclaw-agent.sqlite");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(TRANSCRIPT_EVENTS).unwrap();
    Db { _dir: dir, path }
}

/// Appends an event as OpenClaw does: as text, or (`compress`) as a zstd frame with its length
/// and a navigation projection.
fn put(path: &Path, session: &str, seq: i64, event: &Value, compress: bool) {
    let conn = Connection::open(path).unwrap();
    // OpenClaw's row references its `session_windows` row, a table of OpenClaw's metadata these
    // tests leave out.
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    let text = event.to_string();
    if compress {
        let frame = zstd::bulk::compress(text.as_bytes(), 1).unwrap();
        conn.execute(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at, event_zstd, \
             event_utf8_bytes, navigation_json) VALUES (?1, ?2, NULL, ?3, ?4, ?5, ?6)",
            params![session, seq, seq, frame, text.len() as i64, NAVIGATION],
        )
        .unwrap();
    } else {
        conn.execute(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at, \
             event_utf8_bytes) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![session, seq, text, seq, text.len() as i64],
        )
        .unwrap();
    }
}

fn two_sessions() -> Db {
    let db = create_store();
    put(&db.path, "s-one", 0, &header("s-one"), false);
    put(
        &db.path,
        "s-one",
        1,
        &message("u1", None, "user", "hello"),
        false,
    );
    let long = "x".repeat(2000);
    put(
        &db.path,
        "s-one",
        2,
        &message("a1", Some("u1"), "assistant", &long),
        true,
    );
    put(&db.path, "s-two", 0, &header("s-two"), false);
    put(
        &db.path,
        "s-two",
        1,
        &message("v1", None, "user", "other"),
        true,
    );
    db
}

fn import_all(db: &Db, sessions: &SqliteSessionStore) -> Vec<(String, ImportStatus, usize)> {
    let store = OpenClawStore::open(&db.path).unwrap();
    store
        .session_ids()
        .unwrap()
        .into_iter()
        .map(|id| {
            let text = store.session_jsonl(&id).unwrap();
            let options = ImportOptions {
                source: Some(db.path.display().to_string()),
                session_id: Some(SessionId::parse(id.as_str()).unwrap()),
                now_ms: 0,
            };
            let outcome = import_transcript(sessions, &Tenant::default(), &text, &options).unwrap();
            (id, outcome.status, outcome.entries_added)
        })
        .collect()
}

#[test]
fn sqlite_transcript_store_imports_every_session() {
    let db = two_sessions();
    let head = std::fs::read(&db.path).unwrap();
    assert!(is_sqlite(&head));
    assert!(!is_sqlite(br#"{"type":"session"}"#));
    let sessions = SqliteSessionStore::in_memory().unwrap();
    let done = import_all(&db, &sessions);
    assert_eq!(
        done,
        [
            ("s-one".to_owned(), ImportStatus::Created, 2),
            ("s-two".to_owned(), ImportStatus::Created, 1)
        ]
    );
    let one = sessions
        .load(&Tenant::default(), &SessionId::parse("s-one").unwrap())
        .unwrap();
    assert_eq!(one.header.cwd.as_deref(), Some("/work"));
    let context = one.build_context(None);
    assert_eq!(context.len(), 2);
    assert_eq!(context[0].plain_text(), "hello");
    assert_eq!(context[1].plain_text().len(), 2000);
}

#[test]
fn sqlite_zstd_rows_decode() {
    let db = two_sessions();
    let store = OpenClawStore::open(&db.path).unwrap();
    let text = store.session_jsonl("s-two").unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        lines,
        [header("s-two"), message("v1", None, "user", "other")]
    );

    // A session whose header row is gone gets a version-4 header with its id.
    put(
        &db.path,
        "s-bare",
        5,
        &message("w1", None, "user", "bare"),
        true,
    );
    let bare = store.session_jsonl("s-bare").unwrap();
    assert!(
        bare.starts_with(r#"{"type":"session","version":4,"id":"s-bare"}"#),
        "{bare}"
    );
}

#[test]
fn sqlite_import_twice_changes_nothing() {
    let db = two_sessions();
    let sessions = SqliteSessionStore::in_memory().unwrap();
    import_all(&db, &sessions);
    let again = import_all(&db, &sessions);
    assert!(
        again
            .iter()
            .all(|(_, status, added)| *status == ImportStatus::AlreadyImported && *added == 0),
        "{again:?}"
    );
    // The host goes on: a reset, a message, and a `leaf` record back to the reset's branch.
    put(
        &db.path,
        "s-one",
        3,
        &json!({"type": "reset", "id": "r1", "parentId": "a1", "timestamp": "2026-11-27T12:00:02.000Z", "reason": "new"}),
        false,
    );
    put(
        &db.path,
        "s-one",
        4,
        &message("u2", Some("r1"), "user", "again"),
        false,
    );
    put(
        &db.path,
        "s-one",
        5,
        &message("a2", Some("u2"), "assistant", "dropped"),
        false,
    );
    put(
        &db.path,
        "s-one",
        6,
        &json!({"type": "leaf", "id": "l1", "parentId": "a2", "timestamp": "2026-11-27T12:00:03.000Z", "targetId": "u2"}),
        false,
    );
    let grown = import_all(&db, &sessions);
    assert_eq!(grown[0], ("s-one".to_owned(), ImportStatus::Appended, 4));
    assert_eq!(grown[1].1, ImportStatus::AlreadyImported);
    let tenant = Tenant::default();
    let one = SessionId::parse("s-one").unwrap();
    // The stored leaf is where OpenClaw's navigation puts it: the `leaf` record's target.
    assert_eq!(
        sessions.get(&tenant, &one).unwrap().leaf_id.as_deref(),
        Some("u2")
    );
    let context = sessions.load(&tenant, &one).unwrap().build_context(None);
    let texts: Vec<String> = context.iter().map(|m| m.plain_text()).collect();
    assert_eq!(texts, ["again"]);
}

#[test]
fn sqlite_bad_input_is_a_clear_error() {
    // A SQLite file of some other program.
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.sqlite");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (body TEXT);")
        .unwrap();
    let error = OpenClawStore::open(&other).unwrap_err();
    assert!(
        matches!(error, OpenClawStoreError::NotATranscriptStore { .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("no transcript_events table"),
        "{error}"
    );

    // A row whose compressed payload is damaged names its session and seq.
    let db = two_sessions();
    let conn = Connection::open(&db.path).unwrap();
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    conn.execute(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at, event_zstd, \
             event_utf8_bytes, navigation_json) VALUES ('s-two', 2, NULL, 9, X'28B52FFD00', 40, ?1)",
            params![NAVIGATION],
        )
        .unwrap();
    let store = OpenClawStore::open(&db.path).unwrap();
    let error = store.session_jsonl("s-two").unwrap_err();
    assert!(
        matches!(&error, OpenClawStoreError::CorruptRow { session, seq: 2, .. } if session == "s-two"),
        "{error}"
    );
    assert!(error.to_string().contains("zstd"), "{error}");

    let error = store.session_jsonl("nope").unwrap_err();
    assert!(error.to_string().contains(r#""s-one", "s-two""#), "{error}");

    // The host's file is not written: opening it read-only leaves it byte for byte the same.
    let before = std::fs::read(&db.path).unwrap();
    let _ = store.session_ids().unwrap();
    drop(store);
    assert_eq!(std::fs::read(&db.path).unwrap(), before);
}
