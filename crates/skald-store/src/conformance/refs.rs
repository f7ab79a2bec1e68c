//! Checks of a [`RefStore`]: byte-identical round trips (small, 5 MB repetitive, 5 MB
//! high-entropy, images, non-ASCII), ids that are content hashes, `put_many`, tenant isolation,
//! expiry as a distinct error, stats, ids checked before storage, a never-stored id `NotFound`,
//! reads beside writes on other threads, and durability across a reopen. Each check panics with
//! the violated property.
//!
//! `put_many` is checked for what the trait lets a caller observe: once it returns every payload
//! of the batch reads back. A refused or failed batch cannot be provoked through the trait (the
//! tenant is a [`Tenant`](skald_core::ids::Tenant), well formed by its type), so rollback on a
//! failure is the backend's own tests' business.

use std::sync::Arc;
use std::time::Duration;

use skald_core::message::{Block, Extra, ImageBlock, ImageSource};
use skald_core::refs::{CanonicalPayload, RefId, RefPayload, placeholder};

use super::{NewRefStore, RefCheck, TENANT_A, TENANT_B, tenant_a, tenant_b, tenant_named};
use crate::clock::{Clock, ManualClock};
use crate::refs::RefStore;
use crate::{RefStats, StoreError};

/// When the suite's clock starts (ms since the Unix epoch).
const T0: i64 = 1_770_000_000_000;

/// The size of the large payloads.
pub const LARGE_BYTES: usize = 5 * 1024 * 1024;

/// Every check but [`survives_reopen`], by name; each takes the store's TTL.
pub const CHECKS: &[(&str, RefCheck)] = &[
    ("round_trips_are_byte_identical", |new, _| {
        round_trips_are_byte_identical(new)
    }),
    ("ids_are_content_hashes", |new, _| {
        ids_are_content_hashes(new)
    }),
    ("put_many_stores_the_whole_batch", |new, _| {
        put_many_stores_the_whole_batch(new)
    }),
    ("tenants_are_isolated", |new, _| tenants_are_isolated(new)),
    (
        "expired_is_distinct_from_not_found",
        expired_is_distinct_from_not_found,
    ),
    ("stats_count_what_is_stored", stats_count_what_is_stored),
    ("invalid_ids_are_refused", |new, _| {
        invalid_ids_are_refused(new)
    }),
    ("never_stored_ids_are_not_found", |new, _| {
        never_stored_ids_are_not_found(new)
    }),
    ("reads_run_beside_writes", |new, _| {
        reads_run_beside_writes(new)
    }),
];

/// Runs every check of [`CHECKS`], each on a fresh store from `new`; `ttl` is the TTL of the
/// stores `new` makes.
pub fn run_all(new: &NewRefStore<'_>, ttl: Duration) {
    for (_, check) in CHECKS {
        check(new, ttl);
    }
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(T0))
}

fn fresh(new: &NewRefStore<'_>) -> (Box<dyn RefStore>, Arc<ManualClock>) {
    let clock = clock();
    let shared: Arc<dyn Clock> = clock.clone();
    (new(shared), clock)
}

fn text(text: impl Into<String>) -> RefPayload {
    RefPayload::new(vec![Block::text(text)])
}

/// Text with about 6 bits of entropy per byte from a fixed xorshift generator: compression
/// gains little on it.
pub fn high_entropy_text(bytes: usize, seed: u64) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut state = seed | 1;
    (0..bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(ALPHABET[(state % 64) as usize])
        })
        .collect()
}

fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

fn assert_identical(store: &dyn RefStore, tenant: &str, id: &RefId, original: &RefPayload) {
    let read = store
        .get(&tenant_named(tenant), id.as_str())
        .unwrap_or_else(|error| panic!("get of ref {id} for {tenant:?} failed: {error}"));
    assert!(
        read.to_bytes() == original.to_bytes(),
        "ref {id} must read back byte-identical ({} bytes put, {} read)",
        original.to_bytes().len(),
        read.to_bytes().len()
    );
    assert!(read == *original, "ref {id} must read back equal");
}

/// What is put reads back byte-identical: small text, 5 MB of repetitive text, 5 MB of
/// high-entropy text, an image, non-ASCII text and several blocks; by bare id and by
/// `[REF_ID: …]` token.
pub fn round_trips_are_byte_identical(new: &NewRefStore<'_>) {
    let (store, _) = fresh(new);
    let store = store.as_ref();
    let image = Block::Image(ImageBlock {
        source: ImageSource::Base64 {
            media_type: "image/png".into(),
            data: high_entropy_text(4096, 7),
        },
        extra: Extra::new(),
    });
    let repetitive = "error: disk full on /var/lib/skald\n".repeat(LARGE_BYTES / 34 + 1);
    let payloads = [
        text("ok"),
        text(repetitive),
        text(high_entropy_text(LARGE_BYTES, 42)),
        text("Grüße, 東京, emoji 🦀, quotes \" and \\ backslashes\n\ttabs\u{0}nul"),
        RefPayload::new(vec![Block::text("before"), image, Block::text("after")]),
    ];
    for payload in &payloads {
        let id = store.put(&tenant_a(), payload).unwrap();
        assert_identical(store, TENANT_A, &id, payload);
        let token = placeholder(&id, "summary");
        let by_token = store.get(&tenant_a(), &token).unwrap();
        assert!(
            by_token == *payload,
            "get by [REF_ID: …] token returns the same payload as by bare id"
        );
    }
    // Everything is still there after the others were stored.
    for payload in &payloads {
        assert_identical(store, TENANT_A, &payload.id(), payload);
    }
}

/// The id `put` returns is the payload's content hash ([`RefPayload::id`]): the same content
/// gives the same id (and is stored once), different content a different id.
pub fn ids_are_content_hashes(new: &NewRefStore<'_>) {
    let (store, _) = fresh(new);
    let store = store.as_ref();
    let payload = text("the same content");
    let first = store.put(&tenant_a(), &payload).unwrap();
    assert_eq!(first, payload.id(), "the id is the payload's content hash");
    assert_eq!(
        first,
        RefId::of_bytes(&payload.to_bytes()),
        "the id is the SHA-256 of the canonical bytes"
    );
    let second = store.put(&tenant_a(), &text("the same content")).unwrap();
    assert_eq!(first, second, "the same content gets the same id");
    let other = store.put(&tenant_a(), &text("other content")).unwrap();
    assert_ne!(first, other, "different content gets a different id");
    assert_eq!(
        store.stats(&tenant_a()).unwrap().count,
        2,
        "content put twice is stored once"
    );
    let for_b = store.put(&tenant_b(), &payload).unwrap();
    assert_eq!(first, for_b, "the id does not depend on the tenant");
}

/// After `put_many` returns every payload of the batch reads back byte-identical under its id;
/// duplicates in a batch and an empty batch are fine.
pub fn put_many_stores_the_whole_batch(new: &NewRefStore<'_>) {
    let (store, _) = fresh(new);
    let store = store.as_ref();
    let payloads: Vec<RefPayload> = (0..20)
        .map(|i| {
            text(format!(
                "batch item {i}: {}",
                high_entropy_text(2000, i + 1)
            ))
        })
        .collect();
    let canonical: Vec<CanonicalPayload> = payloads.iter().map(CanonicalPayload::of).collect();
    let mut batch: Vec<&CanonicalPayload> = canonical.iter().collect();
    batch.push(&canonical[0]);
    store.put_many(&tenant_a(), &[]).unwrap();
    store.put_many(&tenant_a(), &batch).unwrap();
    for (payload, canonical) in payloads.iter().zip(&canonical) {
        assert_eq!(*canonical.id(), payload.id());
        assert_identical(store, TENANT_A, canonical.id(), payload);
    }
    assert_eq!(
        store.stats(&tenant_a()).unwrap().count,
        20,
        "a batch stores each distinct payload once"
    );
}

/// A ref stored for tenant A is `NotFound` for tenant B (not `Expired`, not the content), even
/// when B stores the same content later and then has its own copy; stats are per tenant.
pub fn tenants_are_isolated(new: &NewRefStore<'_>) {
    let (store, _) = fresh(new);
    let store = store.as_ref();
    let payload = text("tenant a's secret tool output");
    let id = store.put(&tenant_a(), &payload).unwrap();
    let other = store.get(&tenant_b(), id.as_str());
    assert!(
        matches!(other, Err(StoreError::NotFound { .. })),
        "tenant B reading tenant A's ref must be NotFound, got {other:?}"
    );
    let token = placeholder(&id, "x");
    assert!(
        matches!(
            store.get(&tenant_b(), &token),
            Err(StoreError::NotFound { .. })
        ),
        "also by token"
    );
    assert_eq!(
        store.stats(&tenant_b()).unwrap(),
        RefStats::default(),
        "tenant B's stats count nothing of tenant A's"
    );
    store.put_many(&tenant_b(), &[]).unwrap();
    assert!(matches!(
        store.get(&tenant_b(), id.as_str()),
        Err(StoreError::NotFound { .. })
    ));

    // B stores the same content: its own copy; A's is unaffected.
    assert_eq!(store.put(&tenant_b(), &payload).unwrap(), id);
    assert_identical(store, TENANT_B, &id, &payload);
    assert_identical(store, TENANT_A, &id, &payload);
    assert_eq!(store.stats(&tenant_a()).unwrap().count, 1);
    assert_eq!(store.stats(&tenant_b()).unwrap().count, 1);
}

/// A ref read after its TTL ran out is `Expired` — a distinct error, not `NotFound` and not the
/// content — and `NotFound` after that; a ref is fine just before its expiry; a re-put refreshes
/// the expiry; another tenant gets `NotFound`, never `Expired`.
pub fn expired_is_distinct_from_not_found(new: &NewRefStore<'_>, ttl: Duration) {
    let (store, clock) = fresh(new);
    let store = store.as_ref();
    let ttl = ttl_ms(ttl);
    let payload = text("short-lived");
    let id = store.put(&tenant_a(), &payload).unwrap();

    clock.set(T0 + ttl - 1);
    assert_identical(store, TENANT_A, &id, &payload);
    clock.set(T0 + ttl + 1);
    let expired = store.get(&tenant_a(), id.as_str());
    match expired {
        Err(StoreError::Expired { id: ref got, .. }) => {
            assert_eq!(*got, id, "Expired names the ref");
        }
        ref other => panic!("a ref read after its TTL must be Expired, got {other:?}"),
    }
    let after = store.get(&tenant_a(), id.as_str());
    assert!(
        matches!(after, Err(StoreError::NotFound { .. })),
        "an expired ref is removed once reported: the next read is NotFound, got {after:?}"
    );

    // A re-put in the second half of the TTL moves the expiry.
    let refreshed = text("refreshed");
    let start = T0 + 10 * ttl;
    clock.set(start);
    let refreshed_id = store.put(&tenant_a(), &refreshed).unwrap();
    clock.set(start + ttl / 2);
    store.put(&tenant_a(), &refreshed).unwrap();
    clock.set(start + ttl + 1);
    assert_identical(store, TENANT_A, &refreshed_id, &refreshed);

    // Another tenant learns nothing from an expired ref.
    let secret = text("tenant a, expiring");
    let start = T0 + 20 * ttl;
    clock.set(start);
    let secret_id = store.put(&tenant_a(), &secret).unwrap();
    clock.set(start + ttl + 1);
    let other = store.get(&tenant_b(), secret_id.as_str());
    assert!(
        matches!(other, Err(StoreError::NotFound { .. })),
        "tenant B reading tenant A's expired ref must be NotFound, got {other:?}"
    );
    assert!(
        matches!(
            store.get(&tenant_a(), secret_id.as_str()),
            Err(StoreError::Expired { .. })
        ),
        "tenant B's read does not consume tenant A's Expired"
    );
}

/// `stats` counts distinct refs and their canonical bytes per tenant, a re-put adds nothing, and
/// refs past their TTL count as `expired` until they are removed (`count - expired` is what a
/// reader can still get).
pub fn stats_count_what_is_stored(new: &NewRefStore<'_>, ttl: Duration) {
    let (store, clock) = fresh(new);
    let store = store.as_ref();
    assert_eq!(store.stats(&tenant_a()).unwrap(), RefStats::default());
    let payloads = [
        text("first"),
        text("x".repeat(100_000)),
        text(high_entropy_text(10_000, 3)),
    ];
    for payload in &payloads {
        store.put(&tenant_a(), payload).unwrap();
    }
    store.put(&tenant_a(), &payloads[0]).unwrap();
    let original: u64 = payloads
        .iter()
        .map(|payload| payload.to_bytes().len() as u64)
        .sum();
    let stats = store.stats(&tenant_a()).unwrap();
    assert_eq!(stats.count, 3, "three distinct refs");
    assert_eq!(
        stats.original_bytes, original,
        "original_bytes is the sum of the canonical sizes"
    );
    assert!(stats.stored_bytes > 0, "stored_bytes counts something");
    assert_eq!(stats.expired, 0, "nothing has expired yet");

    clock.set(T0 + ttl_ms(ttl) + 1);
    let fresh_payload = text("put after the others expired");
    store.put(&tenant_a(), &fresh_payload).unwrap();
    let stats = store.stats(&tenant_a()).unwrap();
    assert!(stats.expired <= stats.count);
    assert_eq!(
        stats.count - stats.expired,
        1,
        "only the ref put after the TTL ran out is live: {stats:?}"
    );
}

/// Ids that are not ref ids (`../../x`, upper case, short, empty) are `InvalidId`.
pub fn invalid_ids_are_refused(new: &NewRefStore<'_>) {
    let (store, _) = fresh(new);
    let store = store.as_ref();
    let id = store.put(&tenant_a(), &text("content")).unwrap();
    let upper = id.as_str().to_uppercase();
    for bad in ["", "../../etc/passwd", "abc123", upper.as_str()] {
        let refused = store.get(&tenant_a(), bad);
        assert!(
            matches!(refused, Err(StoreError::InvalidId(_))),
            "get of {bad:?} is InvalidId, got {refused:?}"
        );
    }
}

/// A well-formed id that was never put is `NotFound` (not `Expired`, not a storage error), by bare
/// id and by `[REF_ID: …]` token.
pub fn never_stored_ids_are_not_found(new: &NewRefStore<'_>) {
    let (store, _) = fresh(new);
    let store = store.as_ref();
    store.put(&tenant_a(), &text("something else")).unwrap();
    let never = text("never stored").id();
    for asked in [never.as_str().to_owned(), placeholder(&never, "summary")] {
        let missing = store.get(&tenant_a(), &asked);
        assert!(
            matches!(&missing, Err(StoreError::NotFound { id, .. }) if *id == never),
            "get of a never-stored id {asked:?} is NotFound naming it, got {missing:?}"
        );
    }
}

/// Gets and stats on several threads while another thread puts: each read sees every ref whose
/// put returned before the read began, byte-identical, and the counts never fall behind.
pub fn reads_run_beside_writes(new: &NewRefStore<'_>) {
    let (store, _) = fresh(new);
    let store = store.as_ref();
    let payloads: Vec<RefPayload> = (0..24)
        .map(|step| text(format!("output of step {step}\n").repeat(50)))
        .collect();
    let ids = std::sync::Mutex::new(Vec::new());
    super::reads_beside_writes(
        payloads.len(),
        3,
        &|step| {
            let id = store.put(&tenant_a(), &payloads[step]).unwrap();
            ids.lock().unwrap().push(id);
        },
        &|written| {
            let ids: Vec<RefId> = ids.lock().unwrap()[..written].to_vec();
            let stats = store.stats(&tenant_a()).unwrap();
            assert!(
                stats.count >= written as u64,
                "{written} puts returned but stats count {}",
                stats.count
            );
            for step in [0, written / 2, written - 1] {
                let read = store.get(&tenant_a(), ids[step].as_str());
                assert!(
                    matches!(&read, Ok(payload) if *payload == payloads[step]),
                    "the ref of put {step} (returned before this read) reads back: {:?}",
                    read.map(|payload| payload.id())
                );
            }
        },
    );
}

/// What one handle put (a large payload and a batch) reads back through a reopened handle, with
/// the same stats, and expires on the same schedule. `open` returns a new handle on the same
/// persistent storage on every call (each with the clock it is given).
pub fn survives_reopen(open: &NewRefStore<'_>, ttl: Duration) {
    let clock = clock();
    let shared: Arc<dyn Clock> = clock.clone();
    let large = text(high_entropy_text(LARGE_BYTES, 11));
    let batch: Vec<RefPayload> = (0..5).map(|i| text(format!("batch {i}"))).collect();
    let (large_id, stats) = {
        let store = open(shared.clone());
        let id = store.put(&tenant_a(), &large).unwrap();
        let canonical: Vec<CanonicalPayload> = batch.iter().map(CanonicalPayload::of).collect();
        let refs: Vec<&CanonicalPayload> = canonical.iter().collect();
        store.put_many(&tenant_a(), &refs).unwrap();
        (id, store.stats(&tenant_a()).unwrap())
    };
    let store = open(shared);
    let store = store.as_ref();
    assert_identical(store, TENANT_A, &large_id, &large);
    for payload in &batch {
        assert_identical(store, TENANT_A, &payload.id(), payload);
    }
    assert_eq!(
        store.stats(&tenant_a()).unwrap(),
        stats,
        "a reopened store has the same stats"
    );
    assert!(matches!(
        store.get(&tenant_b(), large_id.as_str()),
        Err(StoreError::NotFound { .. })
    ));
    clock.set(T0 + ttl_ms(ttl) + 1);
    assert!(
        matches!(
            store.get(&tenant_a(), large_id.as_str()),
            Err(StoreError::Expired { .. })
        ),
        "the expiry survives a reopen"
    );
}
