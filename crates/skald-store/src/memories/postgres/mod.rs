//! [`PgMemoryStore`]: the memory store on PostgreSQL, with the SQLite store's tables, rules and
//! ranking. The policies stay above the backend ([`super::search`], [`super::dedup`]); here are
//! the primitives: `rows` (decoding, loading by id), `write` (the write path and its indexes),
//! `read` (listings, history, statistics), `search` (the search primitives) and `fts` (FTS5's
//! tokens and BM25 rebuilt, so the ranking is SQLite's to the last bit).
//!
//! Every write takes the tenant's `memory_tenants` row lock first, so a tenant's memory writes
//! take turns across servers and each duplicate check sees every earlier write; searches read
//! one `REPEATABLE READ` snapshot.

pub(crate) mod fts;
mod leases;
mod read;
mod rows;
mod search;
pub(crate) mod write;

use std::sync::Arc;

use skald_core::ids::Tenant;
use skald_core::memory::uri::MemoryUri;

use super::lease::{LeaseState, check_lease, check_result, expiry};
use super::{
    AddOutcome, DirEntry, Memory, MemoryError, MemorySettings, MemoryStats, MemoryStore,
    MemoryWrite, NewMemory, SearchHit, SearchQuery, TreeNode, UpdateOutcome, validate_new,
    validate_vector,
};
use crate::clock::{Clock, SystemClock};
use crate::postgres::{Conn, Database, fail};

/// The memory store on PostgreSQL. `Send + Sync`: share it with an `Arc`.
pub struct PgMemoryStore {
    database: Database,
    clock: Arc<dyn Clock>,
    settings: MemorySettings,
    vectors: search::VectorCache,
}

impl std::fmt::Debug for PgMemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgMemoryStore")
            .field("database", &self.database)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl PgMemoryStore {
    /// The memory store in `database`, with default settings.
    pub fn new(database: Database) -> Result<PgMemoryStore, MemoryError> {
        PgMemoryStore::with(database, MemorySettings::default(), Arc::new(SystemClock))
    }

    /// [`PgMemoryStore::new`] with settings and the clock write times come from.
    pub fn with(
        database: Database,
        settings: MemorySettings,
        clock: Arc<dyn Clock>,
    ) -> Result<PgMemoryStore, MemoryError> {
        settings.validate()?;
        Ok(PgMemoryStore {
            database,
            clock,
            settings,
            vectors: search::VectorCache::default(),
        })
    }

    /// The settings the store runs with.
    pub fn settings(&self) -> &MemorySettings {
        &self.settings
    }

    /// Runs `work` in one write transaction holding the tenant's memory lock, and commits it.
    fn write<T>(
        &self,
        tenant: &Tenant,
        work: impl FnOnce(&mut Conn, i64) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let now = self.clock.now_ms();
        self.database.write(|conn| {
            conn.execute(
                "INSERT INTO memory_tenants (tenant, writes) VALUES ($1, 1) \
                 ON CONFLICT (tenant) DO UPDATE SET writes = memory_tenants.writes + 1",
                &[&tenant.as_str()],
            )
            .map_err(fail::<MemoryError>("locking the tenant's memories"))?;
            work(conn, now)
        })
    }
}

impl MemoryStore for PgMemoryStore {
    fn add(&self, tenant: &Tenant, memory: NewMemory) -> Result<AddOutcome, MemoryError> {
        validate_new(&memory)?;
        let threshold = self.settings.near_duplicate_threshold;
        self.write(tenant, |conn, now| {
            write::add(conn, tenant, memory, now, threshold)
        })
    }

    fn add_many(
        &self,
        tenant: &Tenant,
        memories: Vec<NewMemory>,
    ) -> Result<Vec<AddOutcome>, MemoryError> {
        self.add_many_while(tenant, memories, &|| true)
    }

    fn add_many_while(
        &self,
        tenant: &Tenant,
        memories: Vec<NewMemory>,
        keep_going: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<AddOutcome>, MemoryError> {
        let in_batch = |index: usize, uri: &MemoryUri, error: MemoryError| MemoryError::InBatch {
            index,
            uri: uri.clone(),
            source: Box::new(error),
        };
        for (index, memory) in memories.iter().enumerate() {
            validate_new(memory).map_err(|error| in_batch(index, &memory.uri, error))?;
        }
        let threshold = self.settings.near_duplicate_threshold;
        self.write(tenant, |conn, now| {
            let mut outcomes = Vec::with_capacity(memories.len());
            for (index, memory) in memories.into_iter().enumerate() {
                if !keep_going() {
                    // The error rolls the transaction back: nothing of the batch stays.
                    return Err(MemoryError::Cancelled);
                }
                let uri = memory.uri.clone();
                let outcome = write::add(conn, tenant, memory, now, threshold)
                    .map_err(|error| in_batch(index, &uri, error))?;
                outcomes.push(outcome);
            }
            Ok(outcomes)
        })
    }

    fn update(&self, tenant: &Tenant, memory: NewMemory) -> Result<UpdateOutcome, MemoryError> {
        validate_new(&memory)?;
        self.write(tenant, |conn, now| {
            write::update(conn, tenant, &memory, now)
        })
    }

    fn forget(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Memory, MemoryError> {
        uri.require_entry()?;
        self.write(tenant, |conn, now| write::forget(conn, tenant, uri, now))
    }

    fn get(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Memory, MemoryError> {
        self.database
            .read(|conn| rows::live_memory(conn, tenant, uri))
    }

    fn history(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Vec<Memory>, MemoryError> {
        self.database.read(|conn| read::history(conn, tenant, uri))
    }

    fn ls(&self, tenant: &Tenant, dir: &MemoryUri) -> Result<Vec<DirEntry>, MemoryError> {
        self.database.read(|conn| read::ls(conn, tenant, dir))
    }

    fn tree(
        &self,
        tenant: &Tenant,
        dir: &MemoryUri,
        max_depth: usize,
    ) -> Result<TreeNode, MemoryError> {
        self.database
            .read(|conn| read::tree(conn, tenant, dir, max_depth))
    }

    fn search(&self, tenant: &Tenant, query: &SearchQuery) -> Result<Vec<SearchHit>, MemoryError> {
        let plan = super::search::check(query)?;
        self.database.read(|conn| {
            let snapshot = search::Snapshot::new(conn, &self.vectors);
            super::search::search_checked(&snapshot, &self.settings, tenant, query, &plan)
        })
    }

    fn set_embedding(
        &self,
        tenant: &Tenant,
        uri: &MemoryUri,
        vector: &[f32],
    ) -> Result<(), MemoryError> {
        validate_vector("embedding", vector)?;
        self.write(tenant, |conn, _| {
            write::set_embedding(conn, tenant, uri, vector)
        })
    }

    fn recent_writes(
        &self,
        tenant: &Tenant,
        limit: usize,
    ) -> Result<Vec<MemoryWrite>, MemoryError> {
        super::listing::recent_writes_limit(limit)?;
        self.database
            .read(|conn| read::recent_writes(conn, tenant, limit))
    }

    fn stats(&self, tenant: &Tenant) -> Result<MemoryStats, MemoryError> {
        self.database.read(|conn| read::stats(conn, tenant))
    }

    // Leases change no memory: they do not take the tenant's memory lock (nor bump the counter
    // that keys the vector cache).
    fn claim_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<LeaseState, MemoryError> {
        check_lease(name, holder)?;
        let now = self.clock.now_ms();
        let expires_at_ms = expiry(now, ttl_ms)?;
        self.database
            .write(|conn| leases::claim(conn, tenant, name, holder, now, expires_at_ms))
    }

    fn finish_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
        result: &str,
    ) -> Result<bool, MemoryError> {
        check_lease(name, holder)?;
        check_result(result)?;
        self.database
            .write(|conn| leases::finish(conn, tenant, name, holder, result))
    }

    fn release_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
    ) -> Result<bool, MemoryError> {
        check_lease(name, holder)?;
        self.database
            .write(|conn| leases::release(conn, tenant, name, holder))
    }

    fn lease(&self, tenant: &Tenant, name: &str, viewer: &str) -> Result<LeaseState, MemoryError> {
        check_lease(name, viewer)?;
        let now = self.clock.now_ms();
        let row = self.database.read(|conn| leases::row(conn, tenant, name))?;
        Ok(row.map_or(LeaseState::Free, |row| row.state_for(viewer, now)))
    }
}
