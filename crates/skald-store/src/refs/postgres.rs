//! [`PgRefStore`]: the ref store on PostgreSQL, with the rules of the SQLite one (see
//! [`SqliteRefStore`](super::SqliteRefStore)): a put returns once its transaction is committed
//! (flushed to the WAL), a re-put refreshes the expiry only when that gains more than 1/24 of the
//! TTL, an expired ref read is removed and reported [`StoreError::Expired`], content is checked
//! against its id on every read, and an LRU of decoded payloads sits in front. Refs are
//! content-addressed and their expiry only ever moves later, so the cache of one server stays
//! true whatever another server writes.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use skald_core::ids::Tenant;
use skald_core::refs::{CanonicalPayload, RefId, RefPayload};

use super::sqlite::decode_row;
use super::{RefSettings, RefStats, RefStore};
use crate::StoreError;
use crate::cache::RefCache;
use crate::clock::{Clock, SystemClock};
use crate::codec;
use crate::postgres::{Database, fail, len_i64, unsigned};

/// The ref store on PostgreSQL. `Send + Sync`: share it with an `Arc`.
pub struct PgRefStore {
    database: Database,
    cache: Mutex<RefCache>,
    clock: Arc<dyn Clock>,
    ttl_ms: i64,
    refresh_slack_ms: i64,
}

impl std::fmt::Debug for PgRefStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgRefStore")
            .field("database", &self.database)
            .field("ttl_ms", &self.ttl_ms)
            .finish_non_exhaustive()
    }
}

impl PgRefStore {
    /// The ref store in `database`.
    pub fn new(database: Database, settings: RefSettings) -> Result<PgRefStore, StoreError> {
        PgRefStore::with_clock(database, settings, Arc::new(SystemClock))
    }

    /// [`PgRefStore::new`] with the clock expiry is measured on.
    pub fn with_clock(
        database: Database,
        settings: RefSettings,
        clock: Arc<dyn Clock>,
    ) -> Result<PgRefStore, StoreError> {
        settings.validate()?;
        let capacity = NonZeroUsize::new(settings.cache_entries).unwrap_or(NonZeroUsize::MIN);
        Ok(PgRefStore {
            database,
            cache: Mutex::new(RefCache::new(capacity, settings.cache_bytes)),
            clock,
            ttl_ms: settings.ttl_ms(),
            refresh_slack_ms: settings.ttl_ms() / 24,
        })
    }

    /// Removes every expired ref of every tenant; returns how many were removed.
    pub fn purge_expired(&self) -> Result<u64, StoreError> {
        let now = self.clock.now_ms();
        let removed = self
            .database
            .conn::<StoreError>("purging expired refs")?
            .execute("DELETE FROM refs WHERE expires_at_ms <= $1", &[&now])
            .map_err(fail::<StoreError>("purging expired refs"))?;
        self.cache().remove_expired(now);
        Ok(removed)
    }

    fn cache(&self) -> MutexGuard<'_, RefCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl RefStore for PgRefStore {
    fn put(&self, tenant: &Tenant, payload: &RefPayload) -> Result<RefId, StoreError> {
        let canonical = CanonicalPayload::of(payload);
        self.put_many(tenant, &[&canonical])?;
        Ok(canonical.id().clone())
    }

    fn put_many(&self, tenant: &Tenant, payloads: &[&CanonicalPayload]) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        let expires_at = now.saturating_add(self.ttl_ms);
        let mut seen = std::collections::HashSet::with_capacity(payloads.len());
        let payloads: Vec<&CanonicalPayload> = payloads
            .iter()
            .copied()
            .filter(|payload| seen.insert(payload.id()))
            .collect();
        if payloads.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = payloads
            .iter()
            .map(|payload| payload.id().as_str())
            .collect();
        let stored: HashMap<String, i64> = self
            .database
            .conn::<StoreError>("reading a ref")?
            .query(
                "SELECT id, expires_at_ms FROM refs WHERE tenant = $1 AND id = ANY($2)",
                &[&tenant.as_str(), &ids],
            )
            .map_err(fail::<StoreError>("reading a ref"))?
            .into_iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
        let mut fresh: Vec<(&RefId, i64)> = Vec::new();
        let mut writes: Vec<&CanonicalPayload> = Vec::new();
        for payload in payloads {
            match stored.get(payload.id().as_str()) {
                Some(expiry) if *expiry >= expires_at.saturating_sub(self.refresh_slack_ms) => {
                    fresh.push((payload.id(), *expiry));
                }
                Some(_) | None => writes.push(payload),
            }
        }
        if !writes.is_empty() {
            // Compressed before the transaction: the slow part of a put holds no lock.
            let encoded: Vec<_> = writes
                .iter()
                .map(|payload| {
                    if stored.contains_key(payload.id().as_str()) {
                        None
                    } else {
                        Some(codec::encode(payload.bytes()))
                    }
                })
                .collect();
            self.database.write::<_, StoreError>(|conn| {
                for (payload, encoded) in writes.iter().zip(&encoded) {
                    let id = payload.id().as_str();
                    if encoded.is_none() {
                        let updated = conn
                            .execute(
                                "UPDATE refs SET expires_at_ms = GREATEST(expires_at_ms, $3)
                                 WHERE tenant = $1 AND id = $2",
                                &[&tenant.as_str(), &id, &expires_at],
                            )
                            .map_err(fail::<StoreError>("refreshing a ref"))?;
                        if updated > 0 {
                            continue;
                        }
                    }
                    // Purged since the read (or never stored): store it.
                    let (codec, content) = match encoded {
                        Some((codec, content)) => (*codec, content.clone()),
                        None => codec::encode(payload.bytes()),
                    };
                    conn.execute(
                        "INSERT INTO refs (tenant, id, codec, content, original_bytes,
                                           stored_bytes, created_at_ms, expires_at_ms)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                         ON CONFLICT (tenant, id) DO UPDATE
                         SET expires_at_ms = GREATEST(refs.expires_at_ms, excluded.expires_at_ms)",
                        &[
                            &tenant.as_str(),
                            &id,
                            &codec.as_str(),
                            &content,
                            &len_i64(payload.bytes().len()),
                            &len_i64(content.len()),
                            &now,
                            &expires_at,
                        ],
                    )
                    .map_err(fail::<StoreError>("storing a ref"))?;
                }
                Ok(())
            })?;
        }
        let mut cache = self.cache();
        for (id, expiry) in fresh {
            cache.refresh(tenant, id, expiry);
        }
        for payload in writes {
            cache.refresh(tenant, payload.id(), expires_at);
        }
        Ok(())
    }

    fn get(&self, tenant: &Tenant, id: &str) -> Result<RefPayload, StoreError> {
        let id = RefId::parse(id)?;
        let now = self.clock.now_ms();
        if let Some(payload) = self.cache().get(tenant, &id, now) {
            return Ok(payload);
        }
        let mut conn = self.database.conn::<StoreError>("reading a ref")?;
        let row = conn
            .query_opt(
                "SELECT codec, content, original_bytes, expires_at_ms
                 FROM refs WHERE tenant = $1 AND id = $2",
                &[&tenant.as_str(), &id.as_str()],
            )
            .map_err(fail::<StoreError>("reading a ref"))?
            .ok_or_else(|| StoreError::NotFound {
                tenant: tenant.to_string(),
                id: id.clone(),
            })?;
        let (codec_name, content, original_bytes, expires_at_ms): (String, Vec<u8>, i64, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        if expires_at_ms <= now {
            // Conditional, so a refresh committed in between (by any server) survives.
            conn.execute(
                "DELETE FROM refs WHERE tenant = $1 AND id = $2 AND expires_at_ms <= $3",
                &[&tenant.as_str(), &id.as_str(), &now],
            )
            .map_err(fail::<StoreError>("removing an expired ref"))?;
            self.cache().remove(tenant, &id);
            return Err(StoreError::Expired {
                tenant: tenant.to_string(),
                id,
                expired_at: expires_at_ms,
            });
        }
        let payload = match decode_row(&id, &codec_name, content, original_bytes) {
            Ok(payload) => payload,
            Err(reason) => {
                conn.execute(
                    "DELETE FROM refs WHERE tenant = $1 AND id = $2",
                    &[&tenant.as_str(), &id.as_str()],
                )
                .map_err(fail::<StoreError>("removing a corrupt ref"))?;
                return Err(StoreError::Corrupt(format!(
                    "ref {id}: {reason}; the row has been removed, put the content again"
                )));
            }
        };
        let bytes = usize::try_from(original_bytes).unwrap_or(usize::MAX);
        self.cache()
            .insert(tenant, &id, payload.clone(), expires_at_ms, bytes);
        Ok(payload)
    }

    fn stats(&self, tenant: &Tenant) -> Result<RefStats, StoreError> {
        let now = self.clock.now_ms();
        let row = self
            .database
            .conn::<StoreError>("reading ref statistics")?
            .query_one(
                "SELECT COUNT(*)::BIGINT, COALESCE(SUM(original_bytes), 0)::BIGINT,
                        COALESCE(SUM(stored_bytes), 0)::BIGINT,
                        COUNT(*) FILTER (WHERE expires_at_ms <= $2)::BIGINT
                 FROM refs WHERE tenant = $1",
                &[&tenant.as_str(), &now],
            )
            .map_err(fail::<StoreError>("reading ref statistics"))?;
        Ok(RefStats {
            count: unsigned(row.get(0)),
            original_bytes: unsigned(row.get(1)),
            stored_bytes: unsigned(row.get(2)),
            expired: unsigned(row.get(3)),
        })
    }
}
