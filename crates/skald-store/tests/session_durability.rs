//! An appended entry is durable when `append_message` returns: a process killed with SIGKILL
//! right after it must not lose the entry, nor leave a half-written batch.
//!
//! The test binary re-invokes itself with [`CHILD_ENV`] set, selecting `session_durability_child`
//! as the only test to run; in an ordinary run that function sees no variable and returns at once.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use skald_core::message::{Message, Role};
use skald_core::session::{EntryKind, SessionHeader};
use skald_store::sessions::{NewSession, SessionStore, SqliteSessionStore};

const CHILD_ENV: &str = "SKALD_SESSION_DURABILITY_CHILD_DB";
const SIGKILL: i32 = 9;

fn message(n: u64) -> Message {
    Message::text(Role::User, format!("message number {n}\n").repeat(50))
}

/// Child mode: append messages one after another, printing each entry id as soon as
/// `append_message` returns, until killed (or, should the parent be gone, for at most a minute).
#[test]
fn session_durability_child() {
    let Some(db) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let store = SqliteSessionStore::open(db).unwrap();
    let header = SessionHeader {
        id: "durable".into(),
        ..SessionHeader::default()
    };
    store
        .create(
            &tenant_named("acme"),
            NewSession::new(header, "openclaw-session"),
        )
        .unwrap();
    let mut stdout = std::io::stdout().lock();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut n = 0;
    while Instant::now() < deadline {
        let entry = store
            .append_message(&tenant_named("acme"), &session_named("durable"), message(n))
            .unwrap();
        writeln!(stdout, "APPENDED {n} {}", entry.id).unwrap();
        stdout.flush().unwrap();
        n += 1;
    }
}

#[test]
fn append_survives_sigkill_right_after_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("skald.sqlite3");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "session_durability_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &db)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();

    // Kill the child the moment the first id arrives, then collect every id it had printed by
    // then: each was printed after its append returned.
    let mut printed = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        let Some(rest) = line.strip_prefix("APPENDED ") else {
            continue;
        };
        let (n, id) = rest.split_once(' ').unwrap();
        if printed.is_empty() {
            child.kill().unwrap();
        }
        printed.push((n.parse::<u64>().unwrap(), id.to_owned()));
    }
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(SIGKILL),
        "child was not killed: {status}"
    );
    assert!(!printed.is_empty(), "child printed no id");

    let store = SqliteSessionStore::open(&db).unwrap();
    let entries = store
        .entries(&tenant_named("acme"), &session_named("durable"))
        .unwrap();
    for (n, id) in &printed {
        let entry = entries
            .iter()
            .find(|entry| &entry.id == id)
            .unwrap_or_else(|| panic!("entry {n} ({id}) was lost"));
        assert_eq!(entry.kind, EntryKind::Message(message(*n)));
    }
    // The counts agree with the rows: no append was half done.
    let info = store
        .get(&tenant_named("acme"), &session_named("durable"))
        .unwrap();
    assert_eq!(info.entry_count, entries.len() as u64);
    assert_eq!(
        info.leaf_id.as_deref(),
        entries.last().map(|entry| entry.id.as_str())
    );
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

/// A session id of the tests, parsed (it is well formed).
fn session_named(id: &str) -> skald_core::ids::SessionId {
    skald_core::ids::SessionId::parse(id).unwrap()
}
