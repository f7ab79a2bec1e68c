//! The conformance suite (`skald_store::conformance`) on the PostgreSQL stores, exactly as
//! `conformance_sqlite.rs` runs it on SQLite: every check on a fresh store, the durability checks
//! on stores reopened over the same schema. Each store gets a schema of its own (so tests run in
//! parallel), dropped when the test ends.
//!
//! Needs a PostgreSQL server: `SKALD_TEST_DATABASE_URL` (e.g.
//! `postgres://postgres@127.0.0.1:5432/postgres`). Without it each test says so and passes;
//! `.ci/run` sets it and fails unless these tests ran and passed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pg;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use pg::Schemas;
use skald_store::conformance::{self, NewRefStore};
use skald_store::{
    DEFAULT_TTL, KeyStore, MemoryStore, PgKeyStore, PgMemoryStore, PgRefStore, PgSessionStore,
    RefSettings, RefStore, SessionStore,
};

type Check<F> = fn(&F);

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

#[test]
fn sessions_on_postgres() {
    let Some(schemas) = Schemas::new("sessions") else {
        return;
    };
    run_checks(conformance::sessions::CHECKS, &|| {
        Box::new(PgSessionStore::new(schemas.fresh())) as Box<dyn SessionStore>
    });
    let reopened = schemas.name_of_reopened();
    conformance::sessions::survives_reopen(&|| {
        Box::new(PgSessionStore::new(schemas.open(&reopened)))
    });
}

#[test]
fn refs_on_postgres() {
    let Some(schemas) = Schemas::new("refs") else {
        return;
    };
    run_ref_checks(
        &|clock| {
            Box::new(
                PgRefStore::with_clock(schemas.fresh(), RefSettings::default(), clock).unwrap(),
            ) as Box<dyn RefStore>
        },
        DEFAULT_TTL,
    );
    let reopened = schemas.name_of_reopened();
    conformance::refs::survives_reopen(
        &|clock| {
            Box::new(
                PgRefStore::with_clock(schemas.open(&reopened), RefSettings::default(), clock)
                    .unwrap(),
            )
        },
        DEFAULT_TTL,
    );
}

#[test]
fn refs_on_postgres_with_the_shortest_ttl_and_no_cache() {
    let Some(schemas) = Schemas::new("refs_short") else {
        return;
    };
    let settings = RefSettings {
        ttl: skald_store::MIN_TTL,
        cache_bytes: 0,
        ..RefSettings::default()
    };
    run_ref_checks(
        &|clock| {
            Box::new(PgRefStore::with_clock(schemas.fresh(), settings.clone(), clock).unwrap())
                as Box<dyn RefStore>
        },
        skald_store::MIN_TTL,
    );
}

#[test]
fn memories_on_postgres() {
    let Some(schemas) = Schemas::new("memories") else {
        return;
    };
    run_checks(conformance::memories::CHECKS, &|| {
        Box::new(PgMemoryStore::new(schemas.fresh()).unwrap()) as Box<dyn MemoryStore>
    });
    let reopened = schemas.name_of_reopened();
    conformance::memories::survives_reopen(&|| {
        Box::new(PgMemoryStore::new(schemas.open(&reopened)).unwrap())
    });
    conformance::memories::search_survives_reopen(&|| {
        Box::new(PgMemoryStore::new(schemas.open(&reopened)).unwrap())
    });
}

#[test]
fn keys_on_postgres() {
    let Some(schemas) = Schemas::new("keys") else {
        return;
    };
    run_checks(conformance::keys::CHECKS, &|| {
        Box::new(PgKeyStore::new(schemas.fresh())) as Box<dyn KeyStore>
    });
    let reopened = schemas.name_of_reopened();
    conformance::keys::survives_reopen(&|| Box::new(PgKeyStore::new(schemas.open(&reopened))));
}

/// All four stores share one schema in production: the durability checks on that.
#[test]
fn every_store_survives_reopen_on_one_shared_postgres_schema() {
    let Some(schemas) = Schemas::new("shared") else {
        return;
    };
    let shared = schemas.name_of_reopened();
    conformance::sessions::survives_reopen(&|| {
        Box::new(PgSessionStore::new(schemas.open(&shared)))
    });
    conformance::refs::survives_reopen(
        &|clock| {
            Box::new(
                PgRefStore::with_clock(schemas.open(&shared), RefSettings::default(), clock)
                    .unwrap(),
            )
        },
        DEFAULT_TTL,
    );
    conformance::memories::survives_reopen(&|| {
        Box::new(PgMemoryStore::new(schemas.open(&shared)).unwrap())
    });
    conformance::keys::survives_reopen(&|| Box::new(PgKeyStore::new(schemas.open(&shared))));
}

#[test]
fn many_store_calls_in_one_poll_of_an_async_task_do_not_spin_for_ever() {
    let Some(schemas) = Schemas::new("coop_budget") else {
        return;
    };
    let sessions = PgSessionStore::new(schemas.fresh());
    let (done, finished) = std::sync::mpsc::channel();
    // An engine call in async code calls the synchronous store on a tokio worker: hundreds of
    // calls without an await between them spend the task's cooperative budget.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let tenant = skald_core::ids::Tenant::parse("t").unwrap();
            let session = skald_core::ids::SessionId::parse("s").unwrap();
            for _ in 0..400 {
                assert!(sessions.get(&tenant, &session).is_err());
            }
        });
        let _ = done.send(());
    });
    assert!(
        finished.recv_timeout(Duration::from_secs(60)).is_ok(),
        "400 store calls in one poll did not finish within 60 s"
    );
}
