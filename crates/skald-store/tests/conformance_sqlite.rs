//! The conformance suite (`skald_store::conformance`) on the SQLite stores: every check on
//! in-memory stores and on stores in temporary database files, the durability checks on a file
//! reopened, and proof that the suite can fail: wrappers that break one property each must make
//! their check panic.
//!
//! The suite is behind the `conformance` feature, which this crate's tests get from its
//! dev-dependency on itself (see `Cargo.toml`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use skald_core::ids::{SessionId, Tenant};
use skald_core::message::Message;
use skald_core::refs::{RefId, RefPayload};
use skald_core::session::{Entry, EntryKind, Session};
use skald_store::conformance::{
    self, NewKeyStore, NewMemoryStore, NewRefStore, NewSessionStore, tenant_a,
};
use skald_store::keys::{ApiKey, CreatedKey, KeyError};
use skald_store::sessions::{
    BranchRewrite, CompactionCheckpoint, NewSession, SessionError, SessionInfo, SessionStore,
    SessionSwitches,
};
use skald_store::{
    Clock, DEFAULT_TTL, KeyStore, MemoryStore, RefSettings, RefStats, RefStore, SqliteKeyStore,
    SqliteMemoryStore, SqliteRefStore, SqliteSessionStore, StoreError,
};

/// A check of one of the suite's `CHECKS` lists, over a factory of type `F`.
type Check<F> = fn(&F);

/// Runs every named check, then fails naming each that panicked (so one run shows them all).
fn run_checks<F: ?Sized>(checks: &[(&str, Check<F>)], factory: &F) {
    let failed: Vec<&str> = checks
        .iter()
        .filter(|(_, check)| catch_unwind(AssertUnwindSafe(|| check(factory))).is_err())
        .map(|(name, _)| *name)
        .collect();
    assert!(failed.is_empty(), "conformance checks failed: {failed:?}");
}

fn run_ref_checks(factory: &NewRefStore<'_>, ttl: Duration) {
    let failed: Vec<&str> = conformance::refs::CHECKS
        .iter()
        .filter(|(_, check)| catch_unwind(AssertUnwindSafe(|| check(factory, ttl))).is_err())
        .map(|(name, _)| *name)
        .collect();
    assert!(
        failed.is_empty(),
        "ref conformance checks failed: {failed:?}"
    );
}

/// A temporary directory handing out a new database file on every call; the files go with it.
struct Files {
    dir: tempfile::TempDir,
    next: AtomicUsize,
}

impl Files {
    fn new() -> Files {
        Files {
            dir: tempfile::tempdir().unwrap(),
            next: AtomicUsize::new(0),
        }
    }

    fn fresh(&self) -> PathBuf {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.dir.path().join(format!("store-{n}.sqlite3"))
    }

    /// The one file the durability checks reopen.
    fn reopened(&self) -> PathBuf {
        self.dir.path().join("reopened.sqlite3")
    }
}

fn ref_settings() -> RefSettings {
    RefSettings::default()
}

// ---- in memory ----

#[test]
fn sessions_in_memory() {
    run_checks(conformance::sessions::CHECKS, &|| {
        Box::new(SqliteSessionStore::in_memory().unwrap()) as Box<dyn SessionStore>
    });
}

#[test]
fn refs_in_memory() {
    run_ref_checks(
        &|clock| {
            Box::new(SqliteRefStore::in_memory_with_clock(ref_settings(), clock).unwrap())
                as Box<dyn RefStore>
        },
        DEFAULT_TTL,
    );
}

#[test]
fn refs_in_memory_with_the_shortest_ttl_and_no_cache() {
    let settings = RefSettings {
        ttl: skald_store::MIN_TTL,
        cache_bytes: 0,
        ..RefSettings::default()
    };
    run_ref_checks(
        &|clock| {
            Box::new(SqliteRefStore::in_memory_with_clock(settings.clone(), clock).unwrap())
                as Box<dyn RefStore>
        },
        skald_store::MIN_TTL,
    );
}

#[test]
fn memories_in_memory() {
    run_checks(conformance::memories::CHECKS, &|| {
        Box::new(SqliteMemoryStore::in_memory().unwrap()) as Box<dyn MemoryStore>
    });
}

#[test]
fn keys_in_memory() {
    run_checks(conformance::keys::CHECKS, &|| {
        Box::new(SqliteKeyStore::in_memory().unwrap()) as Box<dyn KeyStore>
    });
}

// ---- on disk: every check on a new file, durability on one reopened file ----

#[test]
fn sessions_on_disk() {
    let files = Files::new();
    run_checks(conformance::sessions::CHECKS, &|| {
        Box::new(SqliteSessionStore::open(files.fresh()).unwrap()) as Box<dyn SessionStore>
    });
    conformance::sessions::survives_reopen(&|| {
        Box::new(SqliteSessionStore::open(files.reopened()).unwrap())
    });
}

#[test]
fn refs_on_disk() {
    let files = Files::new();
    run_ref_checks(
        &|clock| {
            Box::new(SqliteRefStore::open_with_clock(files.fresh(), ref_settings(), clock).unwrap())
                as Box<dyn RefStore>
        },
        DEFAULT_TTL,
    );
    conformance::refs::survives_reopen(
        &|clock| {
            Box::new(
                SqliteRefStore::open_with_clock(files.reopened(), ref_settings(), clock).unwrap(),
            )
        },
        DEFAULT_TTL,
    );
}

#[test]
fn memories_on_disk() {
    let files = Files::new();
    run_checks(conformance::memories::CHECKS, &|| {
        Box::new(SqliteMemoryStore::open(files.fresh()).unwrap()) as Box<dyn MemoryStore>
    });
    conformance::memories::survives_reopen(&|| {
        Box::new(SqliteMemoryStore::open(files.reopened()).unwrap())
    });
    conformance::memories::search_survives_reopen(&|| {
        Box::new(SqliteMemoryStore::open(files.reopened()).unwrap())
    });
}

#[test]
fn keys_on_disk() {
    let files = Files::new();
    run_checks(conformance::keys::CHECKS, &|| {
        Box::new(SqliteKeyStore::open(files.fresh()).unwrap()) as Box<dyn KeyStore>
    });
    conformance::keys::survives_reopen(&|| {
        Box::new(SqliteKeyStore::open(files.reopened()).unwrap())
    });
}

/// All four stores share one database file in production: the durability checks on that.
#[test]
fn every_store_survives_reopen_on_one_shared_file() {
    let files = Files::new();
    let path = files.reopened();
    conformance::sessions::survives_reopen(&|| Box::new(SqliteSessionStore::open(&path).unwrap()));
    conformance::refs::survives_reopen(
        &|clock| Box::new(SqliteRefStore::open_with_clock(&path, ref_settings(), clock).unwrap()),
        DEFAULT_TTL,
    );
    conformance::memories::survives_reopen(&|| Box::new(SqliteMemoryStore::open(&path).unwrap()));
    conformance::memories::search_survives_reopen(&|| {
        Box::new(SqliteMemoryStore::open(&path).unwrap())
    });
    conformance::keys::survives_reopen(&|| Box::new(SqliteKeyStore::open(&path).unwrap()));
}

// ---- the suite can fail ----

/// A session store that files every tenant's sessions under one tenant: a cross-tenant leak.
struct LeakySessions(SqliteSessionStore);

impl SessionStore for LeakySessions {
    fn create(&self, _: &Tenant, session: NewSession) -> Result<SessionInfo, SessionError> {
        self.0.create(&tenant_a(), session)
    }
    fn append(
        &self,
        _: &Tenant,
        session: &SessionId,
        entries: &[Entry],
    ) -> Result<(), SessionError> {
        self.0.append(&tenant_a(), session, entries)
    }
    fn append_message(
        &self,
        _: &Tenant,
        session: &SessionId,
        message: Message,
    ) -> Result<Entry, SessionError> {
        self.0.append_message(&tenant_a(), session, message)
    }
    fn append_compaction(
        &self,
        _: &Tenant,
        session: &SessionId,
        checkpoint: CompactionCheckpoint,
    ) -> Result<Entry, SessionError> {
        self.0.append_compaction(&tenant_a(), session, checkpoint)
    }
    fn rewrite_branch(
        &self,
        _: &Tenant,
        session: &SessionId,
        rewrites: BTreeMap<String, EntryKind>,
        reason: &str,
    ) -> Result<BranchRewrite, SessionError> {
        self.0
            .rewrite_branch(&tenant_a(), session, rewrites, reason)
    }
    fn set_leaf(
        &self,
        _: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<(), SessionError> {
        self.0.set_leaf(&tenant_a(), session, leaf)
    }
    fn set_switches(
        &self,
        _: &Tenant,
        session: &SessionId,
        switches: SessionSwitches,
    ) -> Result<SessionInfo, SessionError> {
        self.0.set_switches(&tenant_a(), session, switches)
    }
    fn get(&self, _: &Tenant, session: &SessionId) -> Result<SessionInfo, SessionError> {
        self.0.get(&tenant_a(), session)
    }
    fn list(&self, _: &Tenant) -> Result<Vec<SessionInfo>, SessionError> {
        self.0.list(&tenant_a())
    }
    fn load(&self, _: &Tenant, session: &SessionId) -> Result<Session, SessionError> {
        self.0.load(&tenant_a(), session)
    }
}

#[test]
#[should_panic(expected = "tenant B's get of tenant A's session must be NotFound")]
fn a_store_leaking_across_tenants_fails_the_isolation_check() {
    conformance::sessions::tenants_are_isolated(&|| {
        Box::new(LeakySessions(SqliteSessionStore::in_memory().unwrap()))
    });
}

/// A ref store that reports an expired ref as not found, the mistake the distinct error guards
/// against.
struct ExpiryHidingRefs(SqliteRefStore);

impl RefStore for ExpiryHidingRefs {
    fn put(&self, tenant: &Tenant, payload: &RefPayload) -> Result<RefId, StoreError> {
        self.0.put(tenant, payload)
    }
    fn get(&self, tenant: &Tenant, id: &str) -> Result<RefPayload, StoreError> {
        self.0.get(tenant, id).map_err(|error| match error {
            StoreError::Expired { tenant, id, .. } => StoreError::NotFound { tenant, id },
            other @ (StoreError::InvalidId(_)
            | StoreError::InvalidSettings(_)
            | StoreError::NotFound { .. }
            | StoreError::Storage { .. }
            | StoreError::Io { .. }
            | StoreError::UnsupportedSchema { .. }
            | StoreError::Corrupt(_)) => other,
        })
    }
    fn stats(&self, tenant: &Tenant) -> Result<RefStats, StoreError> {
        self.0.stats(tenant)
    }
}

#[test]
#[should_panic(expected = "a ref read after its TTL must be Expired")]
fn a_store_hiding_expiry_fails_the_expiry_check() {
    conformance::refs::expired_is_distinct_from_not_found(
        &|clock: Arc<dyn Clock>| {
            Box::new(ExpiryHidingRefs(
                SqliteRefStore::in_memory_with_clock(ref_settings(), clock).unwrap(),
            ))
        },
        DEFAULT_TTL,
    );
}

/// A key store whose listing is read once and then served from a copy that is never refreshed:
/// the stale read a careless replica or cache gives.
struct StaleListingKeys {
    keys: SqliteKeyStore,
    listed: std::sync::Mutex<Option<Vec<ApiKey>>>,
}

impl KeyStore for StaleListingKeys {
    fn create(&self, tenant: &Tenant, name: &str) -> Result<CreatedKey, KeyError> {
        self.keys.create(tenant, name)
    }
    fn list(&self) -> Result<Vec<ApiKey>, KeyError> {
        let mut listed = self.listed.lock().unwrap();
        if let Some(keys) = listed.as_ref() {
            return Ok(keys.clone());
        }
        let keys = self.keys.list()?;
        *listed = Some(keys.clone());
        Ok(keys)
    }
    fn any_active(&self) -> Result<bool, KeyError> {
        self.keys.any_active()
    }
    fn revoke(&self, id: &str) -> Result<ApiKey, KeyError> {
        self.keys.revoke(id)
    }
    fn authenticate(&self, secret: &str) -> Result<ApiKey, KeyError> {
        self.keys.authenticate(secret)
    }
}

#[test]
#[should_panic(expected = "creates returned shows them all")]
fn a_store_serving_stale_reads_fails_the_concurrency_check() {
    conformance::keys::lookups_run_beside_writes(&|| {
        Box::new(StaleListingKeys {
            keys: SqliteKeyStore::in_memory().unwrap(),
            listed: std::sync::Mutex::new(None),
        })
    });
}

/// The factory types are what a backend's closures coerce to.
#[test]
fn factories_are_plain_closures() {
    let sessions: &NewSessionStore<'_> = &|| Box::new(SqliteSessionStore::in_memory().unwrap());
    let memories: &NewMemoryStore<'_> = &|| Box::new(SqliteMemoryStore::in_memory().unwrap());
    let keys: &NewKeyStore<'_> = &|| Box::new(SqliteKeyStore::in_memory().unwrap());
    conformance::sessions::create_get_list(sessions);
    conformance::memories::add_and_read(memories);
    conformance::keys::any_active_means_a_live_key(keys);
}
