//! Stores for test suites, on the backend the environment names, so a suite written once runs
//! on SQLite and again, unchanged, on PostgreSQL: `SKALD_TEST_STORE=postgres` (with
//! `SKALD_TEST_DATABASE_URL`) gives every store in a schema of its own in that database;
//! unset or `sqlite`, a store in memory. Test support (it panics when the backend cannot be
//! had), behind the `test-stores` feature.
//!
//! The PostgreSQL schemas are left behind (a test cannot know when the last handle of its store
//! goes): point the variable at a database kept for the purpose; `.ci/run` makes one, runs the
//! suites, and drops it.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::clock::{Clock, SystemClock};
use crate::keys::{KeyStore, PgKeyStore, SqliteKeyStore};
use crate::memories::{MemorySettings, MemoryStore, PgMemoryStore, SqliteMemoryStore};
use crate::postgres::Database;
use crate::refs::{PgRefStore, RefSettings, RefStore, SqliteRefStore};
use crate::sessions::{PgSessionStore, SessionStore, SqliteSessionStore};

/// The variable that picks the backend: `sqlite` (the default) or `postgres`.
pub const STORE_VAR: &str = "SKALD_TEST_STORE";

/// The variable naming the PostgreSQL database of `SKALD_TEST_STORE=postgres`.
pub const DATABASE_URL_VAR: &str = "SKALD_TEST_DATABASE_URL";

/// The backend of this test run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestBackend {
    /// SQLite in memory.
    Sqlite,
    /// A fresh schema per store in the database at this URL.
    Postgres(String),
}

/// The backend `SKALD_TEST_STORE` names; panics on anything else, or on `postgres` without
/// `SKALD_TEST_DATABASE_URL`.
pub fn backend() -> TestBackend {
    match std::env::var(STORE_VAR).as_deref() {
        Err(_) | Ok("") | Ok("sqlite") => TestBackend::Sqlite,
        Ok("postgres") => match std::env::var(DATABASE_URL_VAR) {
            Ok(url) if !url.is_empty() => TestBackend::Postgres(url),
            Ok(_) | Err(_) => panic!("{STORE_VAR}=postgres needs {DATABASE_URL_VAR}"),
        },
        Ok(other) => panic!("{STORE_VAR} is {other:?}: it is `sqlite` or `postgres`"),
    }
}

/// A database in a schema no other test uses.
fn fresh_database(url: &str) -> Database {
    static MADE: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    let schema = format!(
        "t{}_{}_{nanos}",
        std::process::id(),
        MADE.fetch_add(1, Ordering::SeqCst)
    );
    Database::connect_in_schema(url, &schema)
        .unwrap_or_else(|error| panic!("cannot open a test schema in {url}: {error}"))
}

/// The four stores of one test, in one database (one schema on PostgreSQL).
pub struct TestStores {
    /// The session store.
    pub sessions: Arc<dyn SessionStore>,
    /// The ref store (default settings).
    pub refs: Arc<dyn RefStore>,
    /// The memory store (default settings).
    pub memories: Arc<dyn MemoryStore>,
    /// The key store.
    pub keys: Arc<dyn KeyStore>,
}

/// Every store, empty, with default settings.
pub fn stores() -> TestStores {
    match backend() {
        TestBackend::Sqlite => TestStores {
            sessions: Arc::new(SqliteSessionStore::in_memory().expect("session store")),
            refs: Arc::new(SqliteRefStore::in_memory(RefSettings::default()).expect("ref store")),
            memories: Arc::new(SqliteMemoryStore::in_memory().expect("memory store")),
            keys: Arc::new(SqliteKeyStore::in_memory().expect("key store")),
        },
        TestBackend::Postgres(url) => {
            let database = fresh_database(&url);
            TestStores {
                sessions: Arc::new(PgSessionStore::new(database.clone())),
                refs: Arc::new(
                    PgRefStore::new(database.clone(), RefSettings::default()).expect("ref store"),
                ),
                memories: Arc::new(PgMemoryStore::new(database.clone()).expect("memory store")),
                keys: Arc::new(PgKeyStore::new(database)),
            }
        }
    }
}

/// An empty session store.
pub fn session_store() -> Arc<dyn SessionStore> {
    session_store_with_clock(Arc::new(SystemClock))
}

/// An empty session store whose times come from `clock`.
pub fn session_store_with_clock(clock: Arc<dyn Clock>) -> Arc<dyn SessionStore> {
    match backend() {
        TestBackend::Sqlite => {
            Arc::new(SqliteSessionStore::in_memory_with_clock(clock).expect("session store"))
        }
        TestBackend::Postgres(url) => {
            Arc::new(PgSessionStore::with_clock(fresh_database(&url), clock))
        }
    }
}

/// An empty ref store with `settings`.
pub fn ref_store(settings: RefSettings) -> Arc<dyn RefStore> {
    ref_store_with_clock(settings, Arc::new(SystemClock))
}

/// An empty ref store with `settings`, its times (and expiry) on `clock`.
pub fn ref_store_with_clock(settings: RefSettings, clock: Arc<dyn Clock>) -> Arc<dyn RefStore> {
    match backend() {
        TestBackend::Sqlite => {
            Arc::new(SqliteRefStore::in_memory_with_clock(settings, clock).expect("ref store"))
        }
        TestBackend::Postgres(url) => Arc::new(
            PgRefStore::with_clock(fresh_database(&url), settings, clock).expect("ref store"),
        ),
    }
}

/// An empty memory store with default settings.
pub fn memory_store() -> Arc<dyn MemoryStore> {
    memory_store_with(MemorySettings::default(), Arc::new(SystemClock))
}

/// An empty memory store with `settings`, its times on `clock`.
pub fn memory_store_with(settings: MemorySettings, clock: Arc<dyn Clock>) -> Arc<dyn MemoryStore> {
    match backend() {
        TestBackend::Sqlite => {
            Arc::new(SqliteMemoryStore::in_memory_with(settings, clock).expect("memory store"))
        }
        TestBackend::Postgres(url) => Arc::new(
            PgMemoryStore::with(fresh_database(&url), settings, clock).expect("memory store"),
        ),
    }
}
