//! [`SqliteMemoryStore`]: the memory store on SQLite, in the same database file as the other
//! stores. Tables (see `schema.rs`): `memories` (one row per version, never deleted; only the
//! status and the vector of a row change), `memory_merges` (duplicates merged into a version),
//! `memory_bands` (MinHash LSH keys of live versions, for near-duplicate candidates) and
//! `memories_fts` (a contentless FTS5 index of live versions, rowid = version id).
//!
//! The ranking and duplicate policies are not here: [`super::search`] and [`super::dedup`] hold
//! them, over primitives this backend provides. Here: the connection and its transactions
//! (this file), reading and decoding rows (`rows`), the write path (`write`), listings and
//! statistics (`read`) and the search primitives with their caches (`search`).

mod leases;
pub(crate) mod read;
pub(crate) mod rows;
mod search;
mod write;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, TransactionBehavior};
use skald_core::ids::Tenant;
use skald_core::memory::uri::MemoryUri;

use super::lease::{LeaseState, check_lease, check_result, expiry};
use super::{
    AddOutcome, DirEntry, Memory, MemoryError, MemorySettings, MemoryStats, MemoryStore,
    MemoryWrite, NewMemory, SearchHit, SearchQuery, TreeNode, UpdateOutcome, validate_new,
    validate_vector,
};
use crate::clock::{Clock, SystemClock};
use crate::sqlite::pool::{ConnectionId, Connections};
use search::{IndexCounts, VectorCache};

/// The memory store on SQLite: a writer connection and, for a database file, a pool of readers
/// that searches and reads use beside it ([see the crate
/// documentation](crate#how-storage-is-laid-out)). `Send + Sync`: share it with an `Arc`. Several
/// processes may open the same file; every write takes SQLite's write lock for its whole
/// check-then-insert, so two writers never both add the same entry.
pub struct SqliteMemoryStore {
    connections: Connections,
    clock: Arc<dyn Clock>,
    settings: MemorySettings,
    path: Option<PathBuf>,
    /// Commits made through this store; with `epoch` it tells when the search caches
    /// ([`IndexCounts`], [`VectorCache`]) are stale.
    writes: AtomicU64,
    /// Bumped whenever a connection finds the database changed since it last looked (SQLite's
    /// `data_version`: commits by any other connection, this store's writer or another
    /// process); see `search::CacheKey`.
    epoch: AtomicU64,
    /// The `data_version` each connection saw at its last search.
    seen: Mutex<HashMap<ConnectionId, i64>>,
    counts: Mutex<Option<IndexCounts>>,
    vectors: Mutex<Option<VectorCache>>,
}

impl std::fmt::Debug for SqliteMemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteMemoryStore")
            .field("path", &self.path)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl SqliteMemoryStore {
    /// Opens (creating if needed) the database at `path` with default settings, creating its
    /// parent directory too. Use the file of the other stores ([`crate::DATABASE_FILE`]).
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteMemoryStore, MemoryError> {
        SqliteMemoryStore::open_with(path, MemorySettings::default(), Arc::new(SystemClock))
    }

    /// [`SqliteMemoryStore::open`] with settings and the clock write times come from.
    pub fn open_with(
        path: impl AsRef<Path>,
        settings: MemorySettings,
        clock: Arc<dyn Clock>,
    ) -> Result<SqliteMemoryStore, MemoryError> {
        settings.validate()?;
        let path = path.as_ref();
        let connections = Connections::open::<MemoryError>(path)?;
        Ok(SqliteMemoryStore::with_connections(
            connections,
            settings,
            clock,
            Some(path.to_path_buf()),
        ))
    }

    /// A store that lives in memory and disappears when dropped (tests, evaluations).
    pub fn in_memory() -> Result<SqliteMemoryStore, MemoryError> {
        SqliteMemoryStore::in_memory_with(MemorySettings::default(), Arc::new(SystemClock))
    }

    /// [`SqliteMemoryStore::in_memory`] with settings and a clock.
    pub fn in_memory_with(
        settings: MemorySettings,
        clock: Arc<dyn Clock>,
    ) -> Result<SqliteMemoryStore, MemoryError> {
        settings.validate()?;
        let connections = Connections::in_memory::<MemoryError>()?;
        Ok(SqliteMemoryStore::with_connections(
            connections,
            settings,
            clock,
            None,
        ))
    }

    fn with_connections(
        connections: Connections,
        settings: MemorySettings,
        clock: Arc<dyn Clock>,
        path: Option<PathBuf>,
    ) -> SqliteMemoryStore {
        SqliteMemoryStore {
            connections,
            clock,
            settings,
            path,
            writes: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            seen: Mutex::new(HashMap::new()),
            counts: Mutex::new(None),
            vectors: Mutex::new(None),
        }
    }

    /// The database file, or `None` for an in-memory store.
    pub fn database_path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The settings the store runs with.
    pub fn settings(&self) -> &MemorySettings {
        &self.settings
    }

    /// Runs `work` in one write transaction and commits it. An error rolls everything back.
    fn write<T>(
        &self,
        work: impl FnOnce(&Connection, i64) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let now = self.clock.now_ms();
        let mut conn = self.connections.writer();
        // IMMEDIATE takes the write lock before the checks read anything, so what they saw is
        // still true when the inserts run, even with another process on the same file.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(MemoryError::storage("starting a memory write"))?;
        let value = work(&tx, now)?;
        tx.commit()
            .map_err(MemoryError::storage("committing a memory write"))?;
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok(value)
    }

    /// Runs `work` in one write transaction that changes no memory (a lease), so the search
    /// caches stay valid.
    fn write_lease<T>(
        &self,
        work: impl FnOnce(&Connection, i64) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let now = self.clock.now_ms();
        let mut conn = self.connections.writer();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(MemoryError::storage("starting a lease write"))?;
        let value = work(&tx, now)?;
        tx.commit()
            .map_err(MemoryError::storage("committing a lease write"))?;
        Ok(value)
    }

    /// Runs `work` on one consistent snapshot of the database, on a reader.
    fn read<T>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        self.read_on(|tx, _| work(tx))
    }

    /// [`SqliteMemoryStore::read`], telling `work` which connection it runs on.
    fn read_on<T>(
        &self,
        work: impl FnOnce(&Connection, ConnectionId) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        self.connections.read(|conn, id| {
            let tx = conn
                .transaction()
                .map_err(MemoryError::storage("starting a memory read"))?;
            work(&tx, id)
        })
    }
}

impl MemoryStore for SqliteMemoryStore {
    fn add(&self, tenant: &Tenant, memory: NewMemory) -> Result<AddOutcome, MemoryError> {
        validate_new(&memory)?;
        let threshold = self.settings.near_duplicate_threshold;
        self.write(|tx, now| write::add(tx, tenant, memory, now, threshold))
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
        self.write(|tx, now| {
            let mut outcomes = Vec::with_capacity(memories.len());
            for (index, memory) in memories.into_iter().enumerate() {
                if !keep_going() {
                    // The error rolls the transaction back: nothing of the batch stays.
                    return Err(MemoryError::Cancelled);
                }
                let uri = memory.uri.clone();
                let outcome = write::add(tx, tenant, memory, now, threshold)
                    .map_err(|error| in_batch(index, &uri, error))?;
                outcomes.push(outcome);
            }
            Ok(outcomes)
        })
    }

    fn update(&self, tenant: &Tenant, memory: NewMemory) -> Result<UpdateOutcome, MemoryError> {
        validate_new(&memory)?;
        self.write(|tx, now| write::update(tx, tenant, &memory, now))
    }

    fn forget(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Memory, MemoryError> {
        uri.require_entry()?;
        self.write(|tx, now| write::forget(tx, tenant, uri, now))
    }

    fn get(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Memory, MemoryError> {
        self.read(|tx| rows::live_memory(tx, tenant, uri))
    }

    fn history(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Vec<Memory>, MemoryError> {
        self.read(|tx| read::history(tx, tenant, uri))
    }

    fn ls(&self, tenant: &Tenant, dir: &MemoryUri) -> Result<Vec<DirEntry>, MemoryError> {
        self.read(|tx| read::ls(tx, tenant, dir))
    }

    fn tree(
        &self,
        tenant: &Tenant,
        dir: &MemoryUri,
        max_depth: usize,
    ) -> Result<TreeNode, MemoryError> {
        self.read(|tx| read::tree(tx, tenant, dir, max_depth))
    }

    fn search(&self, tenant: &Tenant, query: &SearchQuery) -> Result<Vec<SearchHit>, MemoryError> {
        let plan = super::search::check(query)?;
        self.read_on(|tx, id| {
            let snapshot = search::Snapshot::new(self, tx, id)?;
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
        self.write(|tx, _| write::set_embedding(tx, tenant, uri, vector))
    }

    fn recent_writes(
        &self,
        tenant: &Tenant,
        limit: usize,
    ) -> Result<Vec<MemoryWrite>, MemoryError> {
        super::listing::recent_writes_limit(limit)?;
        self.read(|tx| read::recent_writes(tx, tenant, limit))
    }

    fn stats(&self, tenant: &Tenant) -> Result<MemoryStats, MemoryError> {
        self.read(|tx| read::stats(tx, tenant))
    }

    fn claim_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<LeaseState, MemoryError> {
        check_lease(name, holder)?;
        self.write_lease(|tx, now| {
            leases::claim(tx, tenant, name, holder, now, expiry(now, ttl_ms)?)
        })
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
        self.write_lease(|tx, _| leases::finish(tx, tenant, name, holder, result))
    }

    fn release_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
    ) -> Result<bool, MemoryError> {
        check_lease(name, holder)?;
        self.write_lease(|tx, _| leases::release(tx, tenant, name, holder))
    }

    fn lease(&self, tenant: &Tenant, name: &str, viewer: &str) -> Result<LeaseState, MemoryError> {
        check_lease(name, viewer)?;
        let now = self.clock.now_ms();
        let row = self.read(|tx| leases::row(tx, tenant, name))?;
        Ok(row.map_or(LeaseState::Free, |row| row.state_for(viewer, now)))
    }
}
