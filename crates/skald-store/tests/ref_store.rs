//! Behaviour of the SQLite ref store: id validation, tenant isolation, expiry, the
//! cache, compression, content fidelity, statistics, concurrency and damaged data.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use skald_core::message::{Block, Extra, ImageBlock, ImageSource};
use skald_core::refs::{CanonicalPayload, RefId, RefPayload, placeholder};
use skald_store::{
    Codec, DEFAULT_TTL, ManualClock, RefSettings, RefStats, RefStore, SCHEMA_VERSION,
    SqliteRefStore, StoreError,
};

const T0: i64 = 1_700_000_000_000;
const HOUR_MS: i64 = 60 * 60 * 1000;
const DAY_MS: i64 = 24 * HOUR_MS;

fn store_with(settings: RefSettings) -> (SqliteRefStore, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0));
    let store = SqliteRefStore::in_memory_with_clock(settings, clock.clone()).unwrap();
    (store, clock)
}

fn store() -> (SqliteRefStore, Arc<ManualClock>) {
    store_with(RefSettings::default())
}

fn text(text: &str) -> RefPayload {
    RefPayload::new(vec![Block::text(text)])
}

fn log_output(lines: usize) -> RefPayload {
    let log: String = (0..lines)
        .map(|n| {
            format!(
                "2026-04-17T10:00:{:02}Z INFO worker-{} processed batch {n}\n",
                n % 60,
                n % 4
            )
        })
        .collect();
    text(&log)
}

/// xorshift64: deterministic "random" bytes without a dependency.
fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect()
}

/// Random bytes as printable ASCII, the way a token, key or binary dump shows up in a tool's text.
fn random_text(seed: u64, len: usize) -> String {
    random_bytes(seed, len)
        .into_iter()
        .map(|byte| char::from(b' ' + byte % 95))
        .collect()
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn image(media_type: &str, data: String) -> Block {
    Block::Image(ImageBlock {
        source: ImageSource::Base64 {
            media_type: media_type.into(),
            data,
        },
        extra: Extra::new(),
    })
}

// ---------------------------------------------------------------- ids and tenants

#[test]
fn path_traversal_and_malformed_ids_are_invalid_ids() {
    let (store, _) = store();
    let id = store
        .put(&tenant_named("acme"), &text("secret output"))
        .unwrap();
    let upper = id.as_str().to_uppercase();
    let short = &id.as_str()[..63];
    let long = format!("{id}0");
    let with_ext = format!("{id}.json");
    let traversal_in_token = "[REF_ID: ../../x] (Summary: y)".to_owned();
    let slashed = format!("{}/..", &id.as_str()[..61]);
    for bad in [
        "../../x",
        "../../outside",
        "/etc/passwd",
        "refs/../../outside.json",
        "..%2F..%2Fx",
        "",
        "   ",
        upper.as_str(),
        short,
        long.as_str(),
        with_ext.as_str(),
        traversal_in_token.as_str(),
        slashed.as_str(),
    ] {
        let error = store.get(&tenant_named("acme"), bad).unwrap_err();
        assert!(
            matches!(error, StoreError::InvalidId(_)),
            "{bad:?}: {error}"
        );
        let error = store.info(&tenant_named("acme"), bad).unwrap_err();
        assert!(
            matches!(error, StoreError::InvalidId(_)),
            "{bad:?}: {error}"
        );
    }
    let message = store
        .get(&tenant_named("acme"), &upper)
        .unwrap_err()
        .to_string();
    assert!(message.contains("lowercase hex"), "{message}");
    let message = store
        .get(&tenant_named("acme"), short)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("64") && message.contains("63"),
        "{message}"
    );
    // Nothing was touched: the one ref is still there and readable by its real id.
    assert_eq!(store.stats(&tenant_named("acme")).unwrap().count, 1);
    assert_eq!(
        store.get(&tenant_named("acme"), id.as_str()).unwrap(),
        text("secret output")
    );
}

#[test]
fn placeholders_and_padded_ids_resolve() {
    let (store, _) = store();
    let payload = text("tool output");
    let id = store.put(&tenant_named("acme"), &payload).unwrap();
    assert_eq!(id, payload.id(), "the id is the payload's SHA-256");
    for form in [
        id.to_string(),
        format!("  {id}\n"),
        format!("[REF_ID: {id}]"),
        placeholder(&id, "text: 1 line"),
    ] {
        assert_eq!(
            store.get(&tenant_named("acme"), &form).unwrap(),
            payload,
            "{form}"
        );
    }
}

#[test]
fn refs_do_not_cross_tenants() {
    let (store, _) = store();
    let payload = text("acme's build log");
    let id = store.put(&tenant_named("acme"), &payload).unwrap();
    let error = store.get(&tenant_named("globex"), id.as_str()).unwrap_err();
    assert!(matches!(error, StoreError::NotFound { .. }), "{error}");
    assert!(error.to_string().contains("globex"), "{error}");
    assert_eq!(store.stats(&tenant_named("globex")).unwrap().count, 0);

    // The same content stored by the other tenant is a separate row with the same id.
    assert_eq!(store.put(&tenant_named("globex"), &payload).unwrap(), id);
    assert_eq!(store.stats(&tenant_named("acme")).unwrap().count, 1);
    assert_eq!(store.stats(&tenant_named("globex")).unwrap().count, 1);
    // Cached for one tenant is still not visible to a third.
    assert_eq!(
        store.get(&tenant_named("acme"), id.as_str()).unwrap(),
        payload
    );
    assert!(matches!(
        store.get(&tenant_named("initech"), id.as_str()),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn unknown_id_is_not_found() {
    let (store, _) = store();
    let id = RefId::of_bytes(b"never stored");
    let error = store.get(&tenant_named("acme"), id.as_str()).unwrap_err();
    assert!(matches!(error, StoreError::NotFound { .. }), "{error}");
}

// ---------------------------------------------------------------- expiry

#[test]
fn expired_ref_is_a_distinct_error_then_gone() {
    let (store, clock) = store();
    let payload = log_output(50);
    let id = store.put(&tenant_named("acme"), &payload).unwrap();
    clock.set(T0 + DAY_MS - 1);
    assert_eq!(
        store.get(&tenant_named("acme"), id.as_str()).unwrap(),
        payload
    );
    let hits = store.cache_stats().hits;
    clock.set(T0 + DAY_MS);
    // The cached copy is not served past expiry either.
    let error = store.get(&tenant_named("acme"), id.as_str()).unwrap_err();
    let StoreError::Expired { expired_at, .. } = &error else {
        panic!("expected Expired, got {error}");
    };
    assert_eq!(*expired_at, T0 + DAY_MS);
    assert!(
        error.to_string().contains("2023-11-15T22:13:20.000Z"),
        "{error}"
    );
    assert_eq!(store.cache_stats().hits, hits);
    assert_eq!(
        store.stats(&tenant_named("acme")).unwrap().count,
        0,
        "removed on that read"
    );
    assert_eq!(store.cache_stats().entries, 0);
    assert!(matches!(
        store.get(&tenant_named("acme"), id.as_str()),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn re_put_refreshes_expiry() {
    let (store, clock) = store();
    let payload = text("still needed");
    let id = store.put(&tenant_named("acme"), &payload).unwrap();
    assert_eq!(
        store.get(&tenant_named("acme"), id.as_str()).unwrap(),
        payload
    );
    // A re-put soon after is not worth a disk write: the expiry stays where it was.
    clock.advance(30 * 60 * 1000);
    store.put(&tenant_named("acme"), &payload).unwrap();
    assert_eq!(
        store
            .info(&tenant_named("acme"), id.as_str())
            .unwrap()
            .expires_at_ms,
        T0 + DAY_MS
    );
    clock.set(T0 + 20 * HOUR_MS);
    assert_eq!(store.put(&tenant_named("acme"), &payload).unwrap(), id);
    clock.advance(20 * HOUR_MS);
    // 40 h after the first put: alive, from the cache and from SQLite alike.
    assert_eq!(
        store.get(&tenant_named("acme"), id.as_str()).unwrap(),
        payload
    );
    let info = store.info(&tenant_named("acme"), id.as_str()).unwrap();
    assert_eq!(info.created_at_ms, T0);
    assert_eq!(info.expires_at_ms, T0 + 20 * HOUR_MS + DAY_MS);
    clock.set(info.expires_at_ms);
    assert!(matches!(
        store.get(&tenant_named("acme"), id.as_str()),
        Err(StoreError::Expired { .. })
    ));
    // Putting it again after expiry makes it fetchable again.
    store.put(&tenant_named("acme"), &payload).unwrap();
    assert_eq!(
        store.get(&tenant_named("acme"), id.as_str()).unwrap(),
        payload
    );
}

fn canonical(payloads: &[RefPayload]) -> Vec<CanonicalPayload> {
    payloads.iter().map(CanonicalPayload::of).collect()
}

#[test]
fn put_many_stores_every_payload_of_a_batch_once() {
    let (store, _) = store();
    let payloads = [text("first"), log_output(300), text("third"), text("first")];
    let batch = canonical(&payloads);
    store
        .put_many(&tenant_named("acme"), &batch.iter().collect::<Vec<_>>())
        .unwrap();
    for (payload, canonical) in payloads.iter().zip(&batch) {
        assert_eq!(canonical.id(), &payload.id());
        assert_eq!(
            &store
                .get(&tenant_named("acme"), canonical.id().as_str())
                .unwrap(),
            payload
        );
    }
    // The duplicate is stored once, and a later put finds every ref already there.
    assert_eq!(store.stats(&tenant_named("acme")).unwrap().count, 3);
    assert_eq!(
        store.put(&tenant_named("acme"), &payloads[1]).unwrap(),
        payloads[1].id()
    );
    assert_eq!(store.stats(&tenant_named("acme")).unwrap().count, 3);
    assert!(matches!(
        store.get(&tenant_named("globex"), batch[0].id().as_str()),
        Err(StoreError::NotFound { .. })
    ));
    store.put_many(&tenant_named("acme"), &[]).unwrap();
}

#[test]
fn put_many_refreshes_stale_expiries_and_leaves_fresh_ones() {
    let (store, clock) = store();
    let old = text("stored early");
    let id = store.put(&tenant_named("acme"), &old).unwrap();
    clock.advance(2 * HOUR_MS);
    let recent = text("stored later");
    let recent_id = store.put(&tenant_named("acme"), &recent).unwrap();
    clock.advance(30 * 60 * 1000);
    let batch = canonical(&[old, recent, text("new")]);
    store
        .put_many(&tenant_named("acme"), &batch.iter().collect::<Vec<_>>())
        .unwrap();
    let now = T0 + 2 * HOUR_MS + 30 * 60 * 1000;
    // Moved by more than 1/24 of the TTL: refreshed; by less: left alone (no write).
    assert_eq!(
        store
            .info(&tenant_named("acme"), id.as_str())
            .unwrap()
            .expires_at_ms,
        now + DAY_MS
    );
    assert_eq!(
        store
            .info(&tenant_named("acme"), recent_id.as_str())
            .unwrap()
            .expires_at_ms,
        T0 + 2 * HOUR_MS + DAY_MS
    );
    let new = store
        .info(&tenant_named("acme"), batch[2].id().as_str())
        .unwrap();
    assert_eq!((new.created_at_ms, new.expires_at_ms), (now, now + DAY_MS));
    // After expiry a batch stores the ref again.
    clock.set(now + DAY_MS);
    assert!(matches!(
        store.get(&tenant_named("acme"), id.as_str()),
        Err(StoreError::Expired { .. })
    ));
    store
        .put_many(
            &tenant_named("acme"),
            &batch.iter().take(1).collect::<Vec<_>>(),
        )
        .unwrap();
    assert_eq!(
        store.get(&tenant_named("acme"), id.as_str()).unwrap(),
        text("stored early")
    );
}

/// A store that implements only what the trait requires, to exercise its default `put_many`.
struct PutOnly {
    inner: SqliteRefStore,
    puts: std::sync::atomic::AtomicUsize,
}

impl RefStore for PutOnly {
    fn put(
        &self,
        tenant: &skald_core::ids::Tenant,
        payload: &RefPayload,
    ) -> Result<RefId, StoreError> {
        self.puts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.put(tenant, payload)
    }

    fn get(&self, tenant: &skald_core::ids::Tenant, id: &str) -> Result<RefPayload, StoreError> {
        self.inner.get(tenant, id)
    }

    fn stats(&self, tenant: &skald_core::ids::Tenant) -> Result<RefStats, StoreError> {
        self.inner.stats(tenant)
    }
}

#[test]
fn the_default_put_many_puts_each_payload() {
    let (inner, _) = store();
    let store = PutOnly {
        inner,
        puts: Default::default(),
    };
    let payloads = [
        text("a"),
        RefPayload::new(vec![
            Block::text("b"),
            image("image/png", base64(&random_bytes(5, 100))),
        ]),
    ];
    let batch = canonical(&payloads);
    store
        .put_many(&tenant_named("acme"), &batch.iter().collect::<Vec<_>>())
        .unwrap();
    assert_eq!(store.puts.load(std::sync::atomic::Ordering::Relaxed), 2);
    for payload in &payloads {
        assert_eq!(
            &store
                .get(&tenant_named("acme"), payload.id().as_str())
                .unwrap(),
            payload
        );
    }
}

#[test]
fn ttl_below_ten_minutes_is_rejected() {
    let short = RefSettings {
        ttl: Duration::from_secs(10 * 60 - 1),
        ..RefSettings::default()
    };
    for error in [
        short.validate().unwrap_err(),
        SqliteRefStore::in_memory(short.clone()).unwrap_err(),
        SqliteRefStore::open(
            tempfile::tempdir().unwrap().path().join("refs.sqlite3"),
            short,
        )
        .unwrap_err(),
    ] {
        assert!(matches!(error, StoreError::InvalidSettings(_)), "{error}");
        assert!(error.to_string().contains("at least 600 s"), "{error}");
    }
    let too_long = RefSettings {
        ttl: Duration::from_secs(400 * 24 * 60 * 60),
        ..RefSettings::default()
    };
    assert!(matches!(
        too_long.validate(),
        Err(StoreError::InvalidSettings(_))
    ));
    let no_cache = RefSettings {
        cache_entries: 0,
        ..RefSettings::default()
    };
    assert!(matches!(
        no_cache.validate(),
        Err(StoreError::InvalidSettings(_))
    ));
    assert_eq!(RefSettings::default().ttl, DEFAULT_TTL);
    assert_eq!(DEFAULT_TTL, Duration::from_secs(24 * 60 * 60));
}

#[test]
fn minimum_ttl_is_honoured() {
    let (store, clock) = store_with(RefSettings {
        ttl: Duration::from_secs(10 * 60),
        ..RefSettings::default()
    });
    let id = store
        .put(&tenant_named("acme"), &text("short-lived"))
        .unwrap();
    clock.advance(10 * 60 * 1000 - 1);
    assert!(store.get(&tenant_named("acme"), id.as_str()).is_ok());
    clock.advance(1);
    assert!(matches!(
        store.get(&tenant_named("acme"), id.as_str()),
        Err(StoreError::Expired { .. })
    ));
}

#[test]
fn purge_removes_only_expired_refs_of_every_tenant() {
    let (store, clock) = store();
    let old_a = store.put(&tenant_named("acme"), &text("old a")).unwrap();
    let old_b = store.put(&tenant_named("globex"), &text("old b")).unwrap();
    assert!(
        store.get(&tenant_named("acme"), old_a.as_str()).is_ok(),
        "cached"
    );
    clock.advance(12 * HOUR_MS);
    let new_a = store.put(&tenant_named("acme"), &text("new a")).unwrap();
    clock.advance(12 * HOUR_MS);
    let stats = store.stats(&tenant_named("acme")).unwrap();
    assert_eq!((stats.count, stats.expired), (2, 1));
    assert_eq!(store.purge_expired().unwrap(), 2);
    assert_eq!(store.purge_expired().unwrap(), 0);
    assert_eq!(
        store.cache_stats().entries,
        0,
        "the purged entry left the cache"
    );
    assert!(matches!(
        store.get(&tenant_named("acme"), old_a.as_str()),
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.get(&tenant_named("globex"), old_b.as_str()),
        Err(StoreError::NotFound { .. })
    ));
    assert!(store.get(&tenant_named("acme"), new_a.as_str()).is_ok());
    assert_eq!(store.purge_expired_at(T0 + 36 * HOUR_MS).unwrap(), 1);
}

// ---------------------------------------------------------------- cache

#[test]
fn cache_is_bounded_by_entries() {
    let (store, _) = store_with(RefSettings {
        cache_entries: 3,
        ..RefSettings::default()
    });
    let payloads: Vec<RefPayload> = (0..10).map(|n| text(&format!("output {n}"))).collect();
    let ids: Vec<RefId> = payloads
        .iter()
        .map(|payload| store.put(&tenant_named("acme"), payload).unwrap())
        .collect();
    assert_eq!(store.cache_stats().entries, 0, "puts do not fill the cache");
    for (id, payload) in ids.iter().zip(&payloads) {
        assert_eq!(
            &store.get(&tenant_named("acme"), id.as_str()).unwrap(),
            payload
        );
    }
    let stats = store.cache_stats();
    assert_eq!((stats.entries, stats.capacity), (3, 3));
    assert_eq!((stats.hits, stats.misses), (0, 10));
    // The three most recent are served from memory; evicted ones still come from SQLite.
    for (id, payload) in ids.iter().zip(&payloads).rev() {
        assert_eq!(
            &store.get(&tenant_named("acme"), id.as_str()).unwrap(),
            payload
        );
    }
    let stats = store.cache_stats();
    assert_eq!(stats.entries, 3);
    assert_eq!(stats.hits, 3);
}

#[test]
fn cache_is_bounded_by_bytes() {
    let (store, _) = store_with(RefSettings {
        cache_bytes: 4096,
        ..RefSettings::default()
    });
    let big = log_output(200);
    let small = text("small");
    let big_id = store.put(&tenant_named("acme"), &big).unwrap();
    let small_id = store.put(&tenant_named("acme"), &small).unwrap();
    assert_eq!(
        store.get(&tenant_named("acme"), big_id.as_str()).unwrap(),
        big
    );
    assert_eq!(
        store.get(&tenant_named("acme"), small_id.as_str()).unwrap(),
        small
    );
    let stats = store.cache_stats();
    assert_eq!(stats.entries, 1, "the big payload is never cached");
    assert!(stats.bytes <= 4096);
    assert_eq!(
        store.get(&tenant_named("acme"), big_id.as_str()).unwrap(),
        big
    );
}

// ---------------------------------------------------------------- content

#[test]
fn zstd_is_used_when_it_makes_content_smaller() {
    let (store, _) = store();
    let log = log_output(400);
    let id = store.put(&tenant_named("acme"), &log).unwrap();
    let info = store.info(&tenant_named("acme"), id.as_str()).unwrap();
    assert_eq!(info.codec, Codec::Zstd);
    assert_eq!(info.original_bytes, log.to_bytes().len() as u64);
    assert!(
        info.stored_bytes * 5 < info.original_bytes,
        "{} -> {}",
        info.original_bytes,
        info.stored_bytes
    );
    assert_eq!(store.get(&tenant_named("acme"), id.as_str()).unwrap(), log);
}

#[test]
fn incompressible_content_is_stored_raw() {
    let (store, _) = store();
    // A random token: zstd's frame header alone makes it larger, so it is stored as it is.
    let token = text(&random_text(7, 200));
    let id = store.put(&tenant_named("acme"), &token).unwrap();
    let info = store.info(&tenant_named("acme"), id.as_str()).unwrap();
    assert_eq!(info.codec, Codec::Raw);
    assert_eq!(info.stored_bytes, info.original_bytes);
    assert_eq!(
        store.get(&tenant_named("acme"), id.as_str()).unwrap(),
        token
    );

    // Larger random text still has redundancy (95 symbols in 8-bit bytes): whichever codec is
    // chosen, it never stores more than the original and always round-trips.
    for (seed, len) in [(1, 1_000), (2, 65_536)] {
        let noise = RefPayload::new(vec![
            Block::text(random_text(seed, len)),
            Block::text(base64(&random_bytes(seed + 100, len))),
        ]);
        let id = store.put(&tenant_named("acme"), &noise).unwrap();
        let info = store.info(&tenant_named("acme"), id.as_str()).unwrap();
        assert!(info.stored_bytes <= info.original_bytes);
        assert_eq!(
            info.codec == Codec::Zstd,
            info.stored_bytes < info.original_bytes
        );
        assert_eq!(
            store.get(&tenant_named("acme"), id.as_str()).unwrap(),
            noise
        );
    }
}

#[test]
fn every_block_round_trips_images_included() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("refs.sqlite3");
    let payload = RefPayload::new(vec![
        Block::text("screenshot of the failing page:"),
        image("image/png", base64(&random_bytes(3, 30_000))),
        Block::text("and the reference rendering:"),
        Block::Image(ImageBlock {
            source: ImageSource::Url {
                url: "https://example.invalid/reference.png".into(),
            },
            extra: Extra::new(),
        }),
        image("image/jpeg", base64(&random_bytes(4, 500))),
        Block::text("ünïcödé, 漢字, emoji 🚀, quotes \" and \\ backslashes\n\ttabs"),
    ]);
    let id = {
        let store = SqliteRefStore::open(&path, RefSettings::default()).unwrap();
        let id = store.put(&tenant_named("acme"), &payload).unwrap();
        assert_eq!(
            store.get(&tenant_named("acme"), id.as_str()).unwrap(),
            payload,
            "cached"
        );
        id
    };
    let store = SqliteRefStore::open(&path, RefSettings::default()).unwrap();
    let back = store.get(&tenant_named("acme"), id.as_str()).unwrap();
    assert_eq!(back, payload, "from disk");
    assert_eq!(back.blocks.len(), 6);
    assert_eq!(back.id(), id);
}

#[test]
fn stats_count_and_size_per_tenant() {
    let (store, _) = store();
    let payloads = [log_output(300), text("tiny"), text(&random_text(9, 150))];
    let mut original = 0;
    let mut stored = 0;
    for payload in &payloads {
        let id = store.put(&tenant_named("acme"), payload).unwrap();
        let info = store.info(&tenant_named("acme"), id.as_str()).unwrap();
        original += info.original_bytes;
        stored += info.stored_bytes;
    }
    store.put(&tenant_named("acme"), &payloads[0]).unwrap();
    store
        .put(&tenant_named("globex"), &text("globex only"))
        .unwrap();
    let stats = store.stats(&tenant_named("acme")).unwrap();
    assert_eq!(stats.count, 3, "a re-put is not a new ref");
    assert_eq!(stats.original_bytes, original);
    assert_eq!(stats.stored_bytes, stored);
    assert_eq!(stats.expired, 0);
    assert!(stats.stored_bytes < stats.original_bytes);
    assert_eq!(
        RefStore::stats(&store, &tenant_named("nobody"))
            .unwrap()
            .count,
        0
    );

    let all = store.stats_by_tenant().unwrap();
    assert_eq!(all.keys().collect::<Vec<_>>(), ["acme", "globex"]);
    assert_eq!(all["acme"], stats);
    assert_eq!(all["globex"].count, 1);
}

// ---------------------------------------------------------------- files, threads, damage

#[test]
fn file_store_persists_creates_its_directory_and_records_schema_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir
        .path()
        .join("data")
        .join("nested")
        .join(skald_store::DATABASE_FILE);
    let payload = log_output(20);
    let id = {
        let store = SqliteRefStore::open(&path, RefSettings::default()).unwrap();
        assert_eq!(store.path(), Some(path.as_path()));
        store.put(&tenant_named("acme"), &payload).unwrap()
    };
    let store = SqliteRefStore::open(&path, RefSettings::default()).unwrap();
    assert_eq!(
        store.get(&tenant_named("acme"), id.as_str()).unwrap(),
        payload
    );

    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    drop(store);
    let error = SqliteRefStore::open(&path, RefSettings::default()).unwrap_err();
    assert!(
        matches!(error, StoreError::UnsupportedSchema { .. }),
        "{error}"
    );
}

#[test]
fn store_is_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SqliteRefStore>();
    assert_send_sync::<Arc<dyn RefStore>>();

    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn RefStore> = Arc::new(
        SqliteRefStore::open(dir.path().join("refs.sqlite3"), RefSettings::default()).unwrap(),
    );
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for n in 0..25 {
                    // Half the content is shared between threads, so puts race on the same rows.
                    let payload = text(&format!("output {}", n + (thread % 2) * 1000));
                    let id = store.put(&tenant_named("acme"), &payload).unwrap();
                    assert_eq!(
                        store.get(&tenant_named("acme"), id.as_str()).unwrap(),
                        payload
                    );
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(store.stats(&tenant_named("acme")).unwrap().count, 50);
}

#[test]
fn damaged_rows_and_files_are_corrupt_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("refs.sqlite3");
    let store = SqliteRefStore::open(&path, RefSettings::default()).unwrap();
    let compressed = store.put(&tenant_named("acme"), &log_output(100)).unwrap();
    let raw = store.put(&tenant_named("acme"), &text("plain")).unwrap();

    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE refs SET content = x'0badc0de' WHERE id = ?1",
        [compressed.as_str()],
    )
    .unwrap();
    conn.execute(
        "UPDATE refs SET content = CAST('[{\"type\":\"text\",\"text\":\"PLAIN\"}]' AS BLOB)
         WHERE id = ?1",
        [raw.as_str()],
    )
    .unwrap();
    drop(conn);
    for id in [&compressed, &raw] {
        let error = store.get(&tenant_named("acme"), id.as_str()).unwrap_err();
        assert!(matches!(error, StoreError::Corrupt(_)), "{error}");
        assert!(error.to_string().contains(id.as_str()), "{error}");
        // The damaged row is gone, so putting the content again repairs the ref.
        assert!(matches!(
            store.get(&tenant_named("acme"), id.as_str()),
            Err(StoreError::NotFound { .. })
        ));
    }
    store.put(&tenant_named("acme"), &log_output(100)).unwrap();
    assert_eq!(
        store
            .get(&tenant_named("acme"), compressed.as_str())
            .unwrap(),
        log_output(100)
    );

    let junk = dir.path().join("junk.sqlite3");
    std::fs::write(&junk, vec![b'x'; 8192]).unwrap();
    let error = SqliteRefStore::open(&junk, RefSettings::default()).unwrap_err();
    assert!(matches!(error, StoreError::Corrupt(_)), "{error}");
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
