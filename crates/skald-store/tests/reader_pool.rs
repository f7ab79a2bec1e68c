//! The reader pool of the file-backed SQLite stores: reads run on read-only connections beside
//! the writer, and every read sees every write that returned before it began, whichever thread
//! made it — including the memory store's search caches, shared by the readers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use skald_core::memory::uri::MemoryUri;
use skald_core::message::Block;
use skald_core::message::{Message, Role};
use skald_core::refs::RefPayload;
use skald_core::session::SessionHeader;
use skald_store::keys::{KeyError, SqliteKeyStore};
use skald_store::memories::{
    MemorySettings, MemoryStore, NewMemory, SearchQuery, SqliteMemoryStore,
};
use skald_store::sessions::{NewSession, SessionStore, SqliteSessionStore};
use skald_store::{RefSettings, SqliteRefStore, SystemClock};

fn database() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skald.sqlite3");
    (dir, path)
}

fn uri(text: &str) -> MemoryUri {
    MemoryUri::parse(text).unwrap()
}

fn payload(n: usize) -> RefPayload {
    RefPayload::new(vec![Block::text(format!("output {n}\n").repeat(40))])
}

#[test]
fn a_ref_put_on_one_thread_is_read_on_another() {
    let (_dir, path) = database();
    let store = SqliteRefStore::open(&path, RefSettings::default()).unwrap();
    let (sent, received) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for n in 0..20 {
                let id = store.put(&tenant_named("acme"), &payload(n)).unwrap();
                sent.send((n, id)).unwrap();
            }
            drop(sent);
        });
        scope.spawn(|| {
            for (n, id) in received {
                assert_eq!(
                    store.get(&tenant_named("acme"), id.as_str()).unwrap(),
                    payload(n)
                );
                assert!(
                    store.stats(&tenant_named("acme")).unwrap().count > u64::try_from(n).unwrap()
                );
            }
        });
    });
}

#[test]
fn readers_run_while_a_writer_writes_and_never_see_less_than_was_committed() {
    let (_dir, path) = database();
    let store = SqliteRefStore::open(&path, RefSettings::default()).unwrap();
    let committed = std::sync::atomic::AtomicU64::new(0);
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                let mut reads = 0;
                while !done.load(Ordering::SeqCst) || reads == 0 {
                    // Whatever was committed before this read began is in it.
                    let before = committed.load(Ordering::SeqCst);
                    let count = store.stats(&tenant_named("acme")).unwrap().count;
                    assert!(
                        count >= before,
                        "a read saw {count} refs after {before} commits"
                    );
                    reads += 1;
                }
            });
        }
        scope.spawn(|| {
            for n in 0..50 {
                store.put(&tenant_named("acme"), &payload(n)).unwrap();
                committed.fetch_add(1, Ordering::SeqCst);
            }
            done.store(true, Ordering::SeqCst);
        });
    });
    assert_eq!(store.stats(&tenant_named("acme")).unwrap().count, 50);
}

#[test]
fn a_session_appended_on_one_thread_is_loaded_on_another() {
    let (_dir, path) = database();
    let store = SqliteSessionStore::open(&path).unwrap();
    let header = SessionHeader {
        id: "s1".into(),
        ..SessionHeader::default()
    };
    store
        .create(
            &tenant_named("acme"),
            NewSession::new(header, "openclaw-session"),
        )
        .unwrap();
    let (sent, received) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for n in 0..20 {
                let entry = store
                    .append_message(
                        &tenant_named("acme"),
                        &session_named("s1"),
                        Message::text(Role::User, format!("turn {n}")),
                    )
                    .unwrap();
                sent.send((n, entry.id)).unwrap();
            }
            drop(sent);
        });
        scope.spawn(|| {
            for (n, id) in received {
                let session = store
                    .load(&tenant_named("acme"), &session_named("s1"))
                    .unwrap();
                assert!(session.entries().len() > n, "entry {n} is not loaded yet");
                assert!(session.entries().iter().any(|entry| entry.id == id));
            }
        });
    });
}

#[test]
fn a_key_created_on_one_thread_authenticates_on_another() {
    let (_dir, path) = database();
    let keys = SqliteKeyStore::open(&path).unwrap();
    let (sent, received) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for n in 0..10 {
                let created = keys
                    .create(&tenant_named("acme"), &format!("agent {n}"))
                    .unwrap();
                sent.send(created).unwrap();
            }
            drop(sent);
        });
        scope.spawn(|| {
            for created in received {
                assert_eq!(
                    keys.authenticate(&created.secret).unwrap().id,
                    created.key.id
                );
                keys.revoke(&created.key.id).unwrap();
                assert!(matches!(
                    keys.authenticate(&created.secret),
                    Err(KeyError::Revoked { .. })
                ));
            }
        });
    });
    assert!(!keys.any_active().unwrap());
}

#[test]
fn searches_on_other_threads_see_each_memory_once_its_add_returned() {
    // The searches warm the shared term-count and vector caches between the writes; a write
    // must make every reader drop what it cached, whichever reader cached it.
    let (_dir, path) = database();
    // Exact duplicates only: the entries are alike on purpose.
    let settings = MemorySettings {
        near_duplicate_threshold: None,
        ..MemorySettings::default()
    };
    let store = SqliteMemoryStore::open_with(&path, settings, Arc::new(SystemClock)).unwrap();
    let (sent, received) = mpsc::channel::<(usize, MemoryUri)>();
    let received = std::sync::Mutex::new(received);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for n in 0..12 {
                let at = uri(&format!("viking://resources/kiln/{n}.md"));
                let mut vector = vec![0.0_f32; 12];
                vector[n] = 1.0;
                store
                    .add(
                        &tenant_named("acme"),
                        NewMemory::new(at.clone(), format!("kiln firing log number {n} glaze"))
                            .with_embedding(vector),
                    )
                    .unwrap();
                sent.send((n, at)).unwrap();
            }
            drop(sent);
        });
        for _ in 0..3 {
            scope.spawn(|| {
                loop {
                    let next = received.lock().unwrap().recv();
                    let Ok((n, at)) = next else {
                        break;
                    };
                    let mut vector = vec![0.0_f32; 12];
                    vector[n] = 1.0;
                    let by_vector = store
                        .search(
                            &tenant_named("acme"),
                            &SearchQuery::text("", 50).with_vector(vector),
                        )
                        .unwrap();
                    assert_eq!(
                        by_vector[0].memory.uri, at,
                        "the new vector is not searched"
                    );
                    let by_text = store
                        .search(&tenant_named("acme"), &SearchQuery::text("kiln glaze", 50))
                        .unwrap();
                    assert!(by_text.iter().any(|hit| hit.memory.uri == at));
                    // A second search, with caches warm, still sees it.
                    let again = store
                        .search(&tenant_named("acme"), &SearchQuery::text("kiln glaze", 50))
                        .unwrap();
                    assert!(again.iter().any(|hit| hit.memory.uri == at));
                    assert_eq!(store.get(&tenant_named("acme"), &at).unwrap().uri, at);
                }
            });
        }
    });
    let hits = store
        .search(&tenant_named("acme"), &SearchQuery::text("kiln", 50))
        .unwrap();
    assert_eq!(hits.len(), 12);
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

/// A session id of the tests, parsed (it is well formed).
fn session_named(id: &str) -> skald_core::ids::SessionId {
    skald_core::ids::SessionId::parse(id).unwrap()
}
