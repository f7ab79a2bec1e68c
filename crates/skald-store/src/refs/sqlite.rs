//! [`SqliteRefStore`]: the ref store on SQLite.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rusqlite::{OptionalExtension, TransactionBehavior, params};
use skald_core::refs::{CanonicalPayload, RefId, RefPayload};

use super::{RefInfo, RefSettings, RefStats, RefStore};
use crate::StoreError;
use crate::cache::{CacheStats, RefCache};
use crate::clock::{Clock, SystemClock};
use crate::codec::{self, Codec};
use crate::sqlite::pool::Connections;
use skald_core::ids::Tenant;

/// The ref store on SQLite: one database file (or memory), a writer connection with a pool of
/// readers beside it ([see the crate documentation](crate#how-storage-is-laid-out)), and an LRU
/// cache of decoded payloads in front of them. `Send + Sync`: share it with an `Arc`.
pub struct SqliteRefStore {
    connections: Connections,
    cache: Mutex<RefCache>,
    clock: Arc<dyn Clock>,
    ttl_ms: i64,
    /// A re-put moves the expiry only when that gains more than this (1/24 of the TTL).
    refresh_slack_ms: i64,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for SqliteRefStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteRefStore")
            .field("path", &self.path)
            .field("ttl_ms", &self.ttl_ms)
            .finish_non_exhaustive()
    }
}

/// A row as read from `refs`.
struct Row {
    codec: String,
    content: Vec<u8>,
    original_bytes: i64,
    stored_bytes: i64,
    created_at_ms: i64,
    expires_at_ms: i64,
}

/// A write [`SqliteRefStore::put_many`] must make: an insert with the compressed content, or
/// (no content yet) a refresh of the expiry.
struct Write<'a> {
    payload: &'a CanonicalPayload,
    encoded: Option<(Codec, Vec<u8>)>,
}

impl SqliteRefStore {
    /// Opens (creating if needed) the database at `path`, creating its parent directory too.
    pub fn open(
        path: impl AsRef<Path>,
        settings: RefSettings,
    ) -> Result<SqliteRefStore, StoreError> {
        SqliteRefStore::open_with_clock(path, settings, Arc::new(SystemClock))
    }

    /// [`SqliteRefStore::open`] with the clock expiry is measured on.
    pub fn open_with_clock(
        path: impl AsRef<Path>,
        settings: RefSettings,
        clock: Arc<dyn Clock>,
    ) -> Result<SqliteRefStore, StoreError> {
        settings.validate()?;
        let path = path.as_ref();
        let connections = Connections::open::<StoreError>(path)?;
        Ok(SqliteRefStore::with_connections(
            connections,
            &settings,
            clock,
            Some(path.to_path_buf()),
        ))
    }

    /// A store that lives in memory and disappears when dropped; for tests.
    pub fn in_memory(settings: RefSettings) -> Result<SqliteRefStore, StoreError> {
        SqliteRefStore::in_memory_with_clock(settings, Arc::new(SystemClock))
    }

    /// [`SqliteRefStore::in_memory`] with the clock expiry is measured on.
    pub fn in_memory_with_clock(
        settings: RefSettings,
        clock: Arc<dyn Clock>,
    ) -> Result<SqliteRefStore, StoreError> {
        settings.validate()?;
        let connections = Connections::in_memory::<StoreError>()?;
        Ok(SqliteRefStore::with_connections(
            connections,
            &settings,
            clock,
            None,
        ))
    }

    fn with_connections(
        connections: Connections,
        settings: &RefSettings,
        clock: Arc<dyn Clock>,
        path: Option<PathBuf>,
    ) -> SqliteRefStore {
        // validate() has rejected 0; 1 keeps this total without an unwrap.
        let capacity = NonZeroUsize::new(settings.cache_entries).unwrap_or(NonZeroUsize::MIN);
        SqliteRefStore {
            connections,
            cache: Mutex::new(RefCache::new(capacity, settings.cache_bytes)),
            clock,
            ttl_ms: settings.ttl_ms(),
            refresh_slack_ms: settings.ttl_ms() / 24,
            path,
        }
    }

    /// The database file, or `None` for an in-memory store.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Now, by the store's clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Stores `payload` for `tenant` and returns its id once the content is committed and synced
    /// to disk. Re-putting stored content refreshes its expiry to now + TTL without rewriting it;
    /// to spare a disk write on every request, a re-put that would move the expiry by less than
    /// 1/24 of the TTL (1 h of the default 24 h) leaves it as it is.
    pub fn put(&self, tenant: &Tenant, payload: &RefPayload) -> Result<RefId, StoreError> {
        let canonical = CanonicalPayload::of(payload);
        self.put_many(tenant, &[&canonical])?;
        Ok(canonical.id().clone())
    }

    /// Stores every payload of `payloads` for `tenant`, as [`SqliteRefStore::put`] does each, and
    /// returns once all of them are committed and synced to disk. The writes of the batch share
    /// one transaction, so a batch costs one sync however many refs it holds, and a batch whose
    /// refs are all stored and fresh writes nothing. On an error nothing of the batch may be
    /// relied on (the transaction is rolled back; refs already stored stay stored).
    pub fn put_many(
        &self,
        tenant: &Tenant,
        payloads: &[&CanonicalPayload],
    ) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        let expires_at = now.saturating_add(self.ttl_ms);
        // The same content may come twice in one batch (two identical outputs): once is enough.
        let mut seen = std::collections::HashSet::with_capacity(payloads.len());
        let payloads: Vec<&CanonicalPayload> = payloads
            .iter()
            .copied()
            .filter(|payload| seen.insert(payload.id()))
            .collect();

        // Offloading is deterministic, so the same outputs are put again on every request of a
        // session. A refresh is a write with an fsync; skip it while the stored expiry is within
        // a small fraction of the TTL of the new one, and never compress content already stored.
        // Read on a reader: the write below checks again inside its transaction.
        let stored_expiries: Vec<Option<i64>> = self.connections.read(|conn, _| {
            let mut select = conn
                .prepare_cached("SELECT expires_at_ms FROM refs WHERE tenant = ?1 AND id = ?2")
                .map_err(StoreError::storage("reading a ref"))?;
            payloads
                .iter()
                .map(|payload| {
                    select
                        .query_row(params![tenant.as_str(), payload.id().as_str()], |row| {
                            row.get(0)
                        })
                        .optional()
                        .map_err(StoreError::storage("reading a ref"))
                })
                .collect::<Result<_, _>>()
        })?;
        let mut writes: Vec<Write<'_>> = Vec::new();
        let mut fresh: Vec<(&RefId, i64)> = Vec::new();
        for (payload, stored) in payloads.iter().zip(stored_expiries) {
            match stored {
                Some(stored) if stored >= expires_at.saturating_sub(self.refresh_slack_ms) => {
                    fresh.push((payload.id(), stored));
                }
                Some(_) => writes.push(Write {
                    payload,
                    encoded: None,
                }),
                None => {
                    // Compress outside the connection lock: it is the slow part of a put.
                    writes.push(Write {
                        payload,
                        encoded: Some(codec::encode(payload.bytes())),
                    });
                }
            }
        }
        if !writes.is_empty() {
            self.write_batch(tenant, &mut writes, now, expires_at)?;
        }
        // The commit (autocommit or the batch's transaction, with synchronous=FULL) is on disk.
        let mut cache = self.cache();
        for (id, expiry) in fresh {
            cache.refresh(tenant, id, expiry);
        }
        for write in &writes {
            cache.refresh(tenant, write.payload.id(), expires_at);
        }
        Ok(())
    }

    /// The refreshes and inserts of one [`SqliteRefStore::put_many`], in one transaction.
    fn write_batch(
        &self,
        tenant: &str,
        writes: &mut [Write<'_>],
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        let mut conn = self.connections.writer();
        let transaction = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::storage("starting to store refs"))?;
        for write in writes.iter_mut() {
            let id = write.payload.id().as_str();
            if write.encoded.is_none() {
                let updated = transaction
                    .prepare_cached(
                        "UPDATE refs SET expires_at_ms = MAX(expires_at_ms, ?3)
                         WHERE tenant = ?1 AND id = ?2",
                    )
                    .and_then(|mut update| update.execute(params![tenant, id, expires_at]))
                    .map_err(StoreError::storage("refreshing a ref"))?;
                if updated > 0 {
                    continue;
                }
                // 0: another process purged it since the read; store it again.
                write.encoded = Some(codec::encode(write.payload.bytes()));
            }
            let Some((codec, stored)) = &write.encoded else {
                continue;
            };
            transaction
                .prepare_cached(
                    "INSERT INTO refs (tenant, id, codec, content, original_bytes, stored_bytes,
                                       created_at_ms, expires_at_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                     ON CONFLICT (tenant, id) DO UPDATE
                     SET expires_at_ms = MAX(refs.expires_at_ms, excluded.expires_at_ms)",
                )
                .and_then(|mut insert| {
                    insert.execute(params![
                        tenant,
                        id,
                        codec.as_str(),
                        stored,
                        len_i64(write.payload.bytes().len()),
                        len_i64(stored.len()),
                        now,
                        expires_at
                    ])
                })
                .map_err(StoreError::storage("storing a ref"))?;
        }
        transaction
            .commit()
            .map_err(StoreError::storage("committing stored refs"))
    }

    /// The payload stored under `id` for `tenant`. `id` is parsed with [`RefId::parse`] before
    /// anything else. An expired ref is removed and reported as [`StoreError::Expired`]; after
    /// that it is [`StoreError::NotFound`].
    pub fn get(&self, tenant: &Tenant, id: &str) -> Result<RefPayload, StoreError> {
        let id = RefId::parse(id)?;
        let now = self.clock.now_ms();
        if let Some(payload) = self.cache().get(tenant, &id, now) {
            return Ok(payload);
        }
        let row = self.live_row(tenant, &id, now, true)?;
        let payload = match decode_row(&id, row.codec.as_str(), row.content, row.original_bytes) {
            Ok(payload) => payload,
            Err(reason) => {
                // Unreadable content is worth nothing, and a row in its place would make every
                // re-put skip the write: remove it so the next put stores the content afresh.
                self.connections
                    .writer()
                    .execute(
                        "DELETE FROM refs WHERE tenant = ?1 AND id = ?2",
                        params![tenant.as_str(), id.as_str()],
                    )
                    .map_err(StoreError::storage("removing a corrupt ref"))?;
                return Err(StoreError::Corrupt(format!(
                    "ref {id}: {reason}; the row has been removed, put the content again"
                )));
            }
        };
        let bytes = usize::try_from(row.original_bytes).unwrap_or(usize::MAX);
        self.cache()
            .insert(tenant, &id, payload.clone(), row.expires_at_ms, bytes);
        Ok(payload)
    }

    /// What is known about a stored ref, without decoding it. Expiry applies as in
    /// [`SqliteRefStore::get`].
    pub fn info(&self, tenant: &Tenant, id: &str) -> Result<RefInfo, StoreError> {
        let id = RefId::parse(id)?;
        let row = self.live_row(tenant, &id, self.clock.now_ms(), false)?;
        let codec = Codec::parse(&row.codec).ok_or_else(|| unknown_codec(&id, &row.codec))?;
        Ok(RefInfo {
            id,
            codec,
            original_bytes: u64::try_from(row.original_bytes).unwrap_or(0),
            stored_bytes: u64::try_from(row.stored_bytes).unwrap_or(0),
            created_at_ms: row.created_at_ms,
            expires_at_ms: row.expires_at_ms,
        })
    }

    /// Reads the row of a ref that has not expired at `now`, deleting it if it has.
    fn live_row(
        &self,
        tenant: &str,
        id: &RefId,
        now: i64,
        with_content: bool,
    ) -> Result<Row, StoreError> {
        let row = self.connections.read(|conn, _| {
            conn.query_row(
                "SELECT codec, CASE WHEN ?3 THEN content ELSE x'' END, original_bytes,
                        stored_bytes, created_at_ms, expires_at_ms
                 FROM refs WHERE tenant = ?1 AND id = ?2",
                params![tenant, id.as_str(), with_content],
                |row| {
                    Ok(Row {
                        codec: row.get(0)?,
                        content: row.get(1)?,
                        original_bytes: row.get(2)?,
                        stored_bytes: row.get(3)?,
                        created_at_ms: row.get(4)?,
                        expires_at_ms: row.get(5)?,
                    })
                },
            )
            .optional()
            .map_err(StoreError::storage("reading a ref"))
        })?;
        let Some(row) = row else {
            return Err(StoreError::NotFound {
                tenant: tenant.to_owned(),
                id: id.clone(),
            });
        };
        if row.expires_at_ms <= now {
            // Conditional, so a refresh committed in between (by this store's writer or by
            // another process) survives.
            self.connections
                .writer()
                .execute(
                    "DELETE FROM refs WHERE tenant = ?1 AND id = ?2 AND expires_at_ms <= ?3",
                    params![tenant, id.as_str(), now],
                )
                .map_err(StoreError::storage("removing an expired ref"))?;
            self.cache().remove(tenant, id);
            return Err(StoreError::Expired {
                tenant: tenant.to_owned(),
                id: id.clone(),
                expired_at: row.expires_at_ms,
            });
        }
        Ok(row)
    }

    /// Removes every ref, of every tenant, that has expired by the store's clock; returns how
    /// many were removed. Meant for a periodic maintenance task.
    pub fn purge_expired(&self) -> Result<u64, StoreError> {
        self.purge_expired_at(self.clock.now_ms())
    }

    /// [`SqliteRefStore::purge_expired`] as of `now_ms`.
    pub fn purge_expired_at(&self, now_ms: i64) -> Result<u64, StoreError> {
        let removed = self
            .connections
            .writer()
            .execute(
                "DELETE FROM refs WHERE expires_at_ms <= ?1",
                params![now_ms],
            )
            .map_err(StoreError::storage("purging expired refs"))?;
        self.cache().remove_expired(now_ms);
        Ok(u64::try_from(removed).unwrap_or(u64::MAX))
    }

    /// Counts and sizes of what `tenant` has stored.
    pub fn stats(&self, tenant: &Tenant) -> Result<RefStats, StoreError> {
        let now = self.clock.now_ms();
        self.connections.read(|conn, _| {
            conn.query_row(
                "SELECT COUNT(*), COALESCE(SUM(original_bytes), 0), COALESCE(SUM(stored_bytes), 0),
                        COALESCE(SUM(expires_at_ms <= ?2), 0)
                 FROM refs WHERE tenant = ?1",
                params![tenant.as_str(), now],
                stats_from_row,
            )
            .map_err(StoreError::storage("reading ref statistics"))
        })
    }

    /// [`SqliteRefStore::stats`] for every tenant that has refs, by tenant name.
    pub fn stats_by_tenant(&self) -> Result<BTreeMap<String, RefStats>, StoreError> {
        let now = self.clock.now_ms();
        self.connections.read(|conn, _| {
            let mut statement = conn
                .prepare(
                    "SELECT COUNT(*), COALESCE(SUM(original_bytes), 0),
                            COALESCE(SUM(stored_bytes), 0), COALESCE(SUM(expires_at_ms <= ?1), 0),
                            tenant
                     FROM refs GROUP BY tenant",
                )
                .map_err(StoreError::storage("reading ref statistics"))?;
            let rows = statement
                .query_map(params![now], |row| Ok((row.get(4)?, stats_from_row(row)?)))
                .map_err(StoreError::storage("reading ref statistics"))?;
            rows.collect::<Result<BTreeMap<String, RefStats>, _>>()
                .map_err(StoreError::storage("reading ref statistics"))
        })
    }

    /// How the in-memory cache is doing.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache().stats()
    }

    // A panic while the lock was held at worst leaves the cache's byte count off, so a poisoned
    // lock is used as it is.
    fn cache(&self) -> MutexGuard<'_, RefCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl RefStore for SqliteRefStore {
    fn put(&self, tenant: &Tenant, payload: &RefPayload) -> Result<RefId, StoreError> {
        SqliteRefStore::put(self, tenant, payload)
    }

    fn put_many(&self, tenant: &Tenant, payloads: &[&CanonicalPayload]) -> Result<(), StoreError> {
        SqliteRefStore::put_many(self, tenant, payloads)
    }

    fn get(&self, tenant: &Tenant, id: &str) -> Result<RefPayload, StoreError> {
        SqliteRefStore::get(self, tenant, id)
    }

    fn stats(&self, tenant: &Tenant) -> Result<RefStats, StoreError> {
        SqliteRefStore::stats(self, tenant)
    }
}

fn stats_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RefStats> {
    let count: i64 = row.get(0)?;
    let original_bytes: i64 = row.get(1)?;
    let stored_bytes: i64 = row.get(2)?;
    let expired: i64 = row.get(3)?;
    let unsigned = |value: i64| u64::try_from(value).unwrap_or(0);
    Ok(RefStats {
        count: unsigned(count),
        original_bytes: unsigned(original_bytes),
        stored_bytes: unsigned(stored_bytes),
        expired: unsigned(expired),
    })
}

/// Turns a stored row back into the payload, checking it is what was put under `id`; the error
/// says what is wrong with the row.
pub(super) fn decode_row(
    id: &RefId,
    codec_name: &str,
    content: Vec<u8>,
    original_bytes: i64,
) -> Result<RefPayload, String> {
    let codec = Codec::parse(codec_name).ok_or_else(|| format!("unknown codec {codec_name:?}"))?;
    let original_len = usize::try_from(original_bytes)
        .map_err(|_| format!("recorded size {original_bytes} is negative"))?;
    let bytes = codec::decode(codec, content, original_len)?;
    if RefId::of_bytes(&bytes) != *id {
        return Err("stored content does not hash to its id".into());
    }
    RefPayload::from_bytes(&bytes).map_err(|error| error.to_string())
}

fn unknown_codec(id: &RefId, name: &str) -> StoreError {
    StoreError::Corrupt(format!("ref {id}: unknown codec {name:?}"))
}

fn len_i64(len: usize) -> i64 {
    i64::try_from(len).unwrap_or(i64::MAX)
}
