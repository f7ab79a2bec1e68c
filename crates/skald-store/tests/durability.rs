//! A ref id is handed out only once its content is durable: a process killed with SIGKILL right
//! after `put` returned must not lose the ref. The SCCS store this replaces wrote to disk
//! fire-and-forget after handing out the id; this is the test that defect would fail.
//!
//! The same holds for a batch: every ref of a `put_many` is durable once it returns.
//!
//! The test binary re-invokes itself with [`CHILD_ENV`] set, selecting `durability_child` (or
//! `durability_batch_child`) as the only test to run; in an ordinary run those functions see no
//! variable and return at once.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use skald_core::message::Block;
use skald_core::refs::{CanonicalPayload, RefPayload};
use skald_store::{RefSettings, SqliteRefStore};

const CHILD_ENV: &str = "SKALD_STORE_DURABILITY_CHILD_DB";
const SIGKILL: i32 = 9;

fn payload(n: u64) -> RefPayload {
    RefPayload::new(vec![Block::text(
        format!("tool output number {n}\n").repeat(200),
    )])
}

/// Child mode: put refs one after another, printing each id as soon as `put` returns, until
/// killed (or, should the parent be gone, for at most a minute).
#[test]
fn durability_child() {
    let Some(db) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let store = SqliteRefStore::open(db, RefSettings::default()).unwrap();
    let mut stdout = std::io::stdout().lock();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut n = 0;
    while Instant::now() < deadline {
        let id = store.put(&tenant_named("acme"), &payload(n)).unwrap();
        writeln!(stdout, "PUT {n} {id}").unwrap();
        stdout.flush().unwrap();
        n += 1;
    }
}

/// Child mode for batches: puts three refs at a time with `put_many`, printing their ids as
/// soon as it returns.
#[test]
fn durability_batch_child() {
    let Some(db) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let store = SqliteRefStore::open(db, RefSettings::default()).unwrap();
    let mut stdout = std::io::stdout().lock();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut n = 0;
    while Instant::now() < deadline {
        let batch: Vec<CanonicalPayload> = (n..n + 3)
            .map(|k| CanonicalPayload::of(&payload(k)))
            .collect();
        store
            .put_many(&tenant_named("acme"), &batch.iter().collect::<Vec<_>>())
            .unwrap();
        for (k, canonical) in (n..).zip(&batch) {
            writeln!(stdout, "PUT {k} {}", canonical.id()).unwrap();
        }
        stdout.flush().unwrap();
        n += 3;
    }
}

#[test]
fn put_survives_sigkill_right_after_it_returns() {
    kill_child_then_read_every_printed_ref("durability_child");
}

#[test]
fn put_many_survives_sigkill_right_after_it_returns() {
    kill_child_then_read_every_printed_ref("durability_batch_child");
}

fn kill_child_then_read_every_printed_ref(child_test: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("refs.sqlite3");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([child_test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &db)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();

    // Kill the child the moment the first id arrives, then collect every id it had printed by
    // then: each of them was printed after its `put` returned.
    let mut printed = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        let Some(rest) = line.strip_prefix("PUT ") else {
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

    let store = SqliteRefStore::open(&db, RefSettings::default()).unwrap();
    for (n, id) in &printed {
        assert_eq!(
            store.get(&tenant_named("acme"), id).unwrap(),
            payload(*n),
            "ref {n} ({id}) was lost"
        );
    }
    assert!(store.stats(&tenant_named("acme")).unwrap().count >= printed.len() as u64);
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
