//! Ref store latency: a new put (compress, insert, fsync), a re-put (refresh only), and a get
//! from the cache and from SQLite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use skald_core::message::Block;
use skald_core::refs::RefPayload;
use skald_store::{RefSettings, SqliteRefStore};

/// A tool output of about 16 KiB, the size offloading typically handles.
fn output(n: u64) -> RefPayload {
    let log: String = (0..300)
        .map(|line| format!("2026-04-17T10:00:00Z INFO run {n} step {line}: ok\n"))
        .collect();
    RefPayload::new(vec![Block::text(log)])
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store =
        SqliteRefStore::open(dir.path().join("refs.sqlite3"), RefSettings::default()).unwrap();
    let uncached = SqliteRefStore::open(
        dir.path().join("uncached.sqlite3"),
        RefSettings {
            cache_bytes: 0,
            ..RefSettings::default()
        },
    )
    .unwrap();

    let mut n = 0;
    c.bench_function("ref_store/put_new_16k_fsync", |b| {
        b.iter(|| {
            n += 1;
            store.put(&tenant_named("bench"), &output(n)).unwrap()
        });
    });
    let payload = output(0);
    let id = store.put(&tenant_named("bench"), &payload).unwrap();
    uncached.put(&tenant_named("bench"), &payload).unwrap();
    c.bench_function("ref_store/re_put_16k", |b| {
        b.iter(|| {
            store
                .put(&tenant_named("bench"), black_box(&payload))
                .unwrap()
        });
    });
    c.bench_function("ref_store/get_cached_16k", |b| {
        b.iter(|| {
            store
                .get(&tenant_named("bench"), black_box(id.as_str()))
                .unwrap()
        });
    });
    c.bench_function("ref_store/get_sqlite_16k", |b| {
        b.iter(|| {
            uncached
                .get(&tenant_named("bench"), black_box(id.as_str()))
                .unwrap()
        });
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
