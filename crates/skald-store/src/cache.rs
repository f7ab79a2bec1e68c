//! The in-memory cache in front of SQLite: decoded payloads keyed by (tenant, id), bounded by
//! entry count and by bytes, never trusted past an entry's expiry.

use std::num::NonZeroUsize;

use lru::LruCache;
use skald_core::refs::{RefId, RefPayload};

type Key = (String, RefId);

struct Entry {
    payload: RefPayload,
    expires_at_ms: i64,
    bytes: usize,
}

/// Counters for a caller who wants to see whether the cache is working.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Payloads in the cache now.
    pub entries: usize,
    /// The most entries the cache holds: [`RefSettings::cache_entries`](crate::RefSettings::cache_entries).
    pub capacity: usize,
    /// Sum of the original sizes of the cached payloads.
    pub bytes: usize,
    /// [`SqliteRefStore::get`](crate::SqliteRefStore::get) calls answered from the cache since the
    /// store was opened.
    pub hits: u64,
    /// [`SqliteRefStore::get`](crate::SqliteRefStore::get) calls that had to read the database
    /// since the store was opened: the ref was not cached, or its cached entry had expired.
    pub misses: u64,
}

pub(crate) struct RefCache {
    entries: LruCache<Key, Entry>,
    bytes: usize,
    max_bytes: usize,
    hits: u64,
    misses: u64,
}

impl RefCache {
    pub(crate) fn new(capacity: NonZeroUsize, max_bytes: usize) -> RefCache {
        RefCache {
            entries: LruCache::new(capacity),
            bytes: 0,
            max_bytes,
            hits: 0,
            misses: 0,
        }
    }

    /// The payload if cached and not expired at `now_ms`. An expired entry is dropped and
    /// reported as a miss: the database decides, since another process may have refreshed it.
    pub(crate) fn get(&mut self, tenant: &str, id: &RefId, now_ms: i64) -> Option<RefPayload> {
        let key = (tenant.to_owned(), id.clone());
        let fresh = self
            .entries
            .get(&key)
            .map(|entry| entry.expires_at_ms > now_ms);
        match fresh {
            Some(true) => {
                self.hits += 1;
                self.entries.peek(&key).map(|entry| entry.payload.clone())
            }
            Some(false) => {
                self.misses += 1;
                self.remove_key(&key);
                None
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    pub(crate) fn insert(
        &mut self,
        tenant: &str,
        id: &RefId,
        payload: RefPayload,
        expires_at_ms: i64,
        bytes: usize,
    ) {
        let key = (tenant.to_owned(), id.clone());
        if bytes > self.max_bytes {
            // Too big to keep without pushing out everything else; served from SQLite.
            self.remove_key(&key);
            return;
        }
        let entry = Entry {
            payload,
            expires_at_ms,
            bytes,
        };
        self.bytes += bytes;
        if let Some((_, displaced)) = self.entries.push(key, entry) {
            self.bytes -= displaced.bytes;
        }
        while self.bytes > self.max_bytes {
            match self.entries.pop_lru() {
                Some((_, evicted)) => self.bytes -= evicted.bytes,
                None => break,
            }
        }
    }

    /// Moves a cached entry's expiry forward after a re-put.
    pub(crate) fn refresh(&mut self, tenant: &str, id: &RefId, expires_at_ms: i64) {
        let key = (tenant.to_owned(), id.clone());
        if let Some(entry) = self.entries.peek_mut(&key) {
            entry.expires_at_ms = entry.expires_at_ms.max(expires_at_ms);
        }
    }

    pub(crate) fn remove(&mut self, tenant: &str, id: &RefId) {
        self.remove_key(&(tenant.to_owned(), id.clone()));
    }

    pub(crate) fn remove_expired(&mut self, now_ms: i64) {
        let expired: Vec<Key> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.expires_at_ms <= now_ms)
            .map(|(key, _)| key.clone())
            .collect();
        for key in expired {
            self.remove_key(&key);
        }
    }

    fn remove_key(&mut self, key: &Key) {
        if let Some(entry) = self.entries.pop(key) {
            self.bytes -= entry.bytes;
        }
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            entries: self.entries.len(),
            capacity: self.entries.cap().get(),
            bytes: self.bytes,
            hits: self.hits,
            misses: self.misses,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use skald_core::message::Block;

    fn payload(text: &str) -> (RefId, RefPayload) {
        let payload = RefPayload::new(vec![Block::text(text)]);
        (payload.id(), payload)
    }

    #[test]
    fn bounded_by_entries_and_bytes() {
        let mut cache = RefCache::new(NonZeroUsize::new(2).unwrap(), 100);
        for text in ["a", "b", "c"] {
            let (id, p) = payload(text);
            cache.insert("t", &id, p, 1_000, 10);
        }
        assert_eq!(cache.stats().entries, 2);
        assert_eq!(cache.stats().bytes, 20);
        let (big_id, big) = payload("big");
        cache.insert("t", &big_id, big.clone(), 1_000, 95);
        assert_eq!(
            cache.stats().entries,
            1,
            "byte bound evicts the older entries"
        );
        assert_eq!(cache.stats().bytes, 95);
        let (huge_id, huge) = payload("huge");
        cache.insert("t", &huge_id, huge, 1_000, 101);
        assert!(
            cache.get("t", &huge_id, 0).is_none(),
            "larger than the bound"
        );
        assert_eq!(cache.get("t", &big_id, 0), Some(big));
    }

    #[test]
    fn expiry_and_refresh() {
        let mut cache = RefCache::new(NonZeroUsize::new(4).unwrap(), 1_000);
        let (id, p) = payload("a");
        cache.insert("t", &id, p.clone(), 100, 1);
        assert_eq!(cache.get("t", &id, 99), Some(p.clone()));
        assert!(cache.get("other", &id, 99).is_none());
        cache.refresh("t", &id, 200);
        assert_eq!(cache.get("t", &id, 150), Some(p));
        assert!(cache.get("t", &id, 200).is_none());
        assert_eq!(cache.stats().entries, 0);
        assert_eq!(cache.stats().bytes, 0);
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses), (2, 2));
    }
}
