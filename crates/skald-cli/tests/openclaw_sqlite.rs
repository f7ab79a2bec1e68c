//! `skald import` of OpenClaw 2026.9's SQLite transcript store: a small `openclaw-agent.sqlite`
//! the test builds with OpenClaw's own `transcript_events` DDL, text and zstd rows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rusqlite::{Connection, params};
use serde_json::{Value, json};

const TRANSCRIPT_EVENTS: &str =
    include_str!("../../skald-store/tests/fixtures/openclaw_transcript_events.sql");

/// A navigation projection that passes OpenClaw's CHECK on compressed rows.
const NAVIGATION: &str = r#"{"version":1,"report":{"kind":"canonical"},"navigation":{},"reset":{},"model":{},"modelBytes":10,"modelWithoutCheckpointBytes":10,"withoutCustomDataBytes":10}"#;

fn skald(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skald"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("SKALD_HOME")
        .output()
        .unwrap()
}

fn json_out(output: &Output) -> Value {
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

fn put(conn: &Connection, session: &str, seq: i64, event: &Value, compress: bool) {
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

fn entry(id: &str, parent: Option<&str>, role: &str, text: &str) -> Value {
    let message = match role {
        "user" => json!({"role": "user", "content": text, "timestamp": 1}),
        _ => {
            json!({"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": 2})
        }
    };
    json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-11-27T12:00:01.000Z", "message": message})
}

fn build_store(dir: &Path) -> PathBuf {
    let path = dir.join("openclaw-agent.sqlite");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(TRANSCRIPT_EVENTS).unwrap();
    // The rows reference OpenClaw's `session_windows`, which this test leaves out.
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    for (session, text) in [("oc-alpha", "alpha"), ("oc-beta", "beta")] {
        put(
            &conn,
            session,
            0,
            &json!({"type": "session", "version": 4, "id": session, "timestamp": "2026-11-27T12:00:00.000Z"}),
            false,
        );
        put(&conn, session, 1, &entry("u1", None, "user", text), false);
        let long = format!("{text} {}", "y".repeat(1500));
        put(
            &conn,
            session,
            2,
            &entry("a1", Some("u1"), "assistant", &long),
            true,
        );
    }
    path
}

#[test]
fn cli_imports_an_openclaw_sqlite_store() {
    let home = tempfile::tempdir().unwrap();
    let store = build_store(home.path());
    let path = store.to_str().unwrap();

    let imported = json_out(&skald(home.path(), &["import", path, "--json"]));
    let rows = imported.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{imported}");
    for (row, id) in rows.iter().zip(["oc-alpha", "oc-beta"]) {
        assert_eq!(row["session_id"], id);
        assert_eq!(row["format"], "openclaw-session");
        assert_eq!(row["status"], "created");
        assert_eq!(row["entries_added"], 2);
    }

    // Again: nothing changes.
    let again = json_out(&skald(home.path(), &["import", path, "--json"]));
    assert!(
        again
            .as_array()
            .unwrap()
            .iter()
            .all(|row| row["status"] == "already_imported" && row["entries_added"] == 0),
        "{again}"
    );

    // The host goes on in one session; --session imports just that one, and only what is new.
    let conn = Connection::open(&store).unwrap();
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    put(
        &conn,
        "oc-beta",
        3,
        &entry("u2", Some("a1"), "user", "more"),
        false,
    );
    drop(conn);
    let grown = json_out(&skald(
        home.path(),
        &["import", path, "--session", "oc-beta", "--json"],
    ));
    assert_eq!(grown[0]["status"], "appended");
    assert_eq!(grown[0]["entries_added"], 1);
    assert_eq!(grown.as_array().unwrap().len(), 1);

    let context = json_out(&skald(home.path(), &["context", "oc-beta", "--json"]));
    let text = context.to_string();
    assert!(text.contains("more") && text.contains("beta yyy"), "{text}");
}

#[test]
fn cli_refuses_a_bad_sqlite_store_and_stores_nothing() {
    let home = tempfile::tempdir().unwrap();
    let other = home.path().join("notes.sqlite");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (body TEXT);")
        .unwrap();
    let output = skald(home.path(), &["import", other.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not OpenClaw's transcript store"),
        "{stderr}"
    );

    // One corrupt row in the second session: neither session is stored.
    let store = build_store(home.path());
    let conn = Connection::open(&store).unwrap();
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    conn.execute(
        "INSERT INTO transcript_events (session_id, seq, event_json, created_at, event_utf8_bytes) \
         VALUES ('oc-beta', 3, '{not json', 3, 9)",
        [],
    )
    .unwrap();
    drop(conn);
    let output = skald(home.path(), &["import", store.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("\"oc-beta\", transcript event seq 3") && stderr.contains("not valid JSON"),
        "{stderr}"
    );
    let sessions = json_out(&skald(home.path(), &["sessions", "--json"]));
    assert_eq!(sessions.as_array().unwrap().len(), 0, "{sessions}");

    // --session names a session the store lacks.
    let output = skald(
        home.path(),
        &["import", store.to_str().unwrap(), "--session", "nope"],
    );
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("no transcript for session \"nope\""));
}
