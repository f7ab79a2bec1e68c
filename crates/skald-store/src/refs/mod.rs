//! The ref store: originals of offloaded and truncated tool outputs, per tenant, under their
//! content hash, with a time to live. [`RefStore`] is the interface the engine sees;
//! [`SqliteRefStore`] is the product behind it.

mod postgres;
mod sqlite;

use std::time::Duration;

use skald_core::ids::Tenant;
use skald_core::refs::{CanonicalPayload, RefId, RefPayload};

use crate::StoreError;
use crate::codec::Codec;

pub use postgres::PgRefStore;
pub use sqlite::SqliteRefStore;

/// How long a ref lives after its last put, unless configured otherwise.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// The shortest time to live accepted: a model must have time to ask for the original.
pub const MIN_TTL: Duration = Duration::from_secs(10 * 60);
/// The longest time to live accepted.
pub const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 60 * 60);
/// Entries the in-memory cache holds, unless configured otherwise.
pub const DEFAULT_CACHE_ENTRIES: usize = 10_000;
/// Payload bytes the in-memory cache holds, unless configured otherwise: with images in tool
/// output, an entry bound alone would let the cache grow to gigabytes.
pub const DEFAULT_CACHE_BYTES: usize = 256 * 1024 * 1024;

/// What the engine needs from a ref store; implemented by [`SqliteRefStore`], and by any fake a
/// test of the engine wants.
pub trait RefStore: Send + Sync {
    /// Stores `payload` for `tenant` and returns its id, only once the content is durably
    /// committed. Putting content that is already stored refreshes its expiry.
    fn put(&self, tenant: &Tenant, payload: &RefPayload) -> Result<RefId, StoreError>;

    /// Stores every payload of `payloads` (canonical bytes with their id, as a stage's
    /// [`NewRef`](skald_core::refs::NewRef) carries them) for `tenant`, returning only once all
    /// are durably committed. [`SqliteRefStore`] commits a batch at once (one sync); this
    /// default puts them one by one.
    fn put_many(&self, tenant: &Tenant, payloads: &[&CanonicalPayload]) -> Result<(), StoreError> {
        for payload in payloads {
            let decoded = RefPayload::from_bytes(payload.bytes())
                .map_err(|error| StoreError::Corrupt(format!("ref {}: {error}", payload.id())))?;
            self.put(tenant, &decoded)?;
        }
        Ok(())
    }

    /// The payload stored under `id` for `tenant`. `id` is untrusted text (a bare id or a
    /// `[REF_ID: …]` token) and is parsed before storage is touched.
    fn get(&self, tenant: &Tenant, id: &str) -> Result<RefPayload, StoreError>;

    /// Counts and sizes of what `tenant` has stored.
    fn stats(&self, tenant: &Tenant) -> Result<RefStats, StoreError>;
}

/// Settings of a [`SqliteRefStore`]; checked by [`RefSettings::validate`] when a store opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefSettings {
    /// How long a ref lives after its last put; between [`MIN_TTL`] and [`MAX_TTL`].
    pub ttl: Duration,
    /// The in-memory cache's bound in entries; at least 1.
    pub cache_entries: usize,
    /// The in-memory cache's bound in payload bytes (original sizes); a payload larger than this
    /// is never cached. 0 turns caching off.
    pub cache_bytes: usize,
}

impl Default for RefSettings {
    fn default() -> RefSettings {
        RefSettings {
            ttl: DEFAULT_TTL,
            cache_entries: DEFAULT_CACHE_ENTRIES,
            cache_bytes: DEFAULT_CACHE_BYTES,
        }
    }
}

impl RefSettings {
    /// Checks the settings: [`StoreError::InvalidSettings`], naming the setting and its accepted
    /// range, if `ttl` is outside [`MIN_TTL`]..=[`MAX_TTL`] or `cache_entries` is 0.
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.ttl < MIN_TTL {
            return Err(StoreError::InvalidSettings(format!(
                "ttl is {} s; it must be at least {} s (10 minutes) so a model has time to fetch \
                 what it was shown",
                self.ttl.as_secs(),
                MIN_TTL.as_secs()
            )));
        }
        if self.ttl > MAX_TTL {
            return Err(StoreError::InvalidSettings(format!(
                "ttl is {} s; it must be at most {} s (365 days)",
                self.ttl.as_secs(),
                MAX_TTL.as_secs()
            )));
        }
        if self.cache_entries == 0 {
            return Err(StoreError::InvalidSettings(
                "cache_entries is 0; it must be at least 1 (to turn the cache off, set \
                 cache_bytes to 0)"
                    .into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }
}

/// Counts and sizes of stored refs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RefStats {
    /// Refs stored, expired ones not yet removed included.
    pub count: u64,
    /// Sum of the canonical payload sizes.
    pub original_bytes: u64,
    /// Sum of the sizes as stored (after compression).
    pub stored_bytes: u64,
    /// How many of `count` have expired and wait for a read or [`SqliteRefStore::purge_expired`]
    /// to remove them.
    pub expired: u64,
}

/// What the store knows about one ref, without its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefInfo {
    /// The ref's id (the hash of its canonical payload).
    pub id: RefId,
    /// How the content is encoded on disk.
    pub codec: Codec,
    /// Size of the canonical payload, in bytes.
    pub original_bytes: u64,
    /// Size of the content as stored (after compression, if any), in bytes.
    pub stored_bytes: u64,
    /// When the ref was first stored, in milliseconds since the Unix epoch; a re-put does not
    /// change it.
    pub created_at_ms: i64,
    /// When the ref expires, in milliseconds since the Unix epoch: its last put plus the TTL (a
    /// put never moves it earlier).
    pub expires_at_ms: i64,
}
