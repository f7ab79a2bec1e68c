//! [`SqliteMemoryStore`]: the memory store on SQLite, in the same database file as the other
//! stores. Tables (see `schema.rs`): `memories` (one row per version, never deleted; only the
//! status and the vector of a row change), `memory_merges` (duplicates merged into a version),
//! `memory_bands` (MinHash LSH keys of live versions, for near-duplicate candidates) and
//! `memories_fts` (a contentless FTS5 index of live versions, rowid = version id).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params, params_from_iter};
use serde_json::{Value, json};
use skald_core::memory::dedup::{Fingerprint, content_hash, jaccard_of, shingles};
use skald_core::memory::fusion::{
    RRF_K, RankedList, ScoredList, min_max_score_fusion, reciprocal_rank_fusion,
};
use skald_core::memory::levels::{derive_abstract, derive_overview};
use skald_core::memory::query::QueryPlan;
use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use xxhash_rust::xxh3::xxh3_64;

use super::{
    AddOutcome, DEFAULT_PRIORITY, DirEntry, DirEntryKind, DuplicateKind, MAX_SEARCH_LIMIT, Memory,
    MemoryError, MemorySettings, MemorySource, MemoryStats, MemoryStatus, MemoryStore, MemoryWrite,
    Merge, NewMemory, SearchFilter, SearchHit, SearchQuery, TreeNode, UpdateOutcome, VectorFusion,
    WriteAction, validate_new, validate_vector,
};
use crate::clock::{Clock, SystemClock};
use crate::schema;
use crate::tenant::validate_tenant;

/// The condition of a live version, spelled exactly as the partial indexes are, so SQLite
/// uses them.
const LIVE: &str = "superseded_by IS NULL AND forgotten_at_ms IS NULL";

/// The columns [`memory_from_row`] reads, in order.
const COLUMNS: &str = "id, tenant, uri, version, category, l0, l1, l2, priority, source, \
                       created_at_ms, updated_at_ms, supersedes, superseded_by, \
                       superseded_at_ms, forgotten_at_ms, content_hash, length(embedding)";

/// At most this many near-duplicate candidates are compared word by word.
const MAX_NEAR_CANDIDATES: usize = 64;

/// The memory store on SQLite: one connection behind a mutex. `Send + Sync`: share it with an
/// `Arc`. Several processes may open the same file; every write takes SQLite's write lock for
/// its whole check-then-insert, so two writers never both add the same entry.
pub struct SqliteMemoryStore {
    conn: Mutex<Connection>,
    clock: Arc<dyn Clock>,
    settings: MemorySettings,
    path: Option<PathBuf>,
    /// Commits made through this store; with SQLite's `data_version` (commits by other
    /// connections) it tells when [`IndexCounts`] are stale.
    writes: AtomicU64,
    counts: Mutex<Option<IndexCounts>>,
    vectors: Mutex<Option<VectorCache>>,
}

/// A tenant's live vectors: version id and components.
type TenantVectors = Arc<Vec<(i64, Vec<f32>)>>;

/// Live vectors per tenant, kept until the database changes.
struct VectorCache {
    generation: (i64, u64),
    tenants: HashMap<String, TenantVectors>,
}

/// Vectors of at most this many tenants are kept; past it the cache starts over.
const MAX_CACHED_VECTOR_TENANTS: usize = 16;

/// Row counts of the full-text index that searches need, kept until the database changes:
/// counting a common term's rows walks its whole doclist, and the same names recur in query
/// after query.
struct IndexCounts {
    /// `(data_version, writes)` when counted.
    generation: (i64, u64),
    /// Live (indexed) versions of every tenant: FTS5's row count, which its BM25 uses.
    indexed: i64,
    tenants: HashMap<String, i64>,
    /// Indexed rows holding each term (every tenant, as FTS5's IDF counts them).
    terms: HashMap<String, i64>,
}

/// At most this many term counts are kept; past it they are counted again.
const MAX_COUNTED_TERMS: usize = 4096;

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
        crate::schema::create_parent_dir(path)?;
        let conn = Connection::open(path).map_err(MemoryError::storage("opening the database"))?;
        SqliteMemoryStore::with_connection(conn, settings, clock, Some(path.to_path_buf()))
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
        let conn = Connection::open_in_memory()
            .map_err(MemoryError::storage("opening an in-memory database"))?;
        SqliteMemoryStore::with_connection(conn, settings, clock, None)
    }

    fn with_connection(
        mut conn: Connection,
        settings: MemorySettings,
        clock: Arc<dyn Clock>,
        path: Option<PathBuf>,
    ) -> Result<SqliteMemoryStore, MemoryError> {
        schema::prepare(&mut conn)?;
        Ok(SqliteMemoryStore {
            conn: Mutex::new(conn),
            clock,
            settings,
            path,
            writes: AtomicU64::new(0),
            counts: Mutex::new(None),
            vectors: Mutex::new(None),
        })
    }

    /// The database file, or `None` for an in-memory store.
    pub fn database_path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The settings the store runs with.
    pub fn settings(&self) -> &MemorySettings {
        &self.settings
    }

    // A panic while the lock was held cannot leave SQLite inconsistent (an open transaction is
    // rolled back when dropped), so a poisoned lock is used as it is.
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `work` in one write transaction and commits it. An error rolls everything back.
    fn write<T>(
        &self,
        work: impl FnOnce(&Connection, i64) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let now = self.clock.now_ms();
        let mut conn = self.conn();
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

    /// Runs `work` on one consistent snapshot of the database.
    fn read<T>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction()
            .map_err(MemoryError::storage("starting a memory read"))?;
        work(&tx)
    }

    fn add_in(
        &self,
        tx: &Connection,
        tenant: &str,
        memory: NewMemory,
        now: i64,
    ) -> Result<AddOutcome, MemoryError> {
        let dedup_root = dedup_root(&memory.uri)?;
        let hash = content_hash(&memory.content);
        if let Some(id) = find_exact(tx, tenant, &dedup_root, &hash)? {
            record_merge(tx, id, now, DuplicateKind::Exact, &memory)?;
            return merged(tx, memory.uri, id, DuplicateKind::Exact);
        }
        if live_id(tx, tenant, &memory.uri)?.is_some() {
            return Err(MemoryError::AlreadyExists { uri: memory.uri });
        }
        let words = shingles(&memory.content);
        let fingerprint = Fingerprint::of_shingles(&words);
        if let (Some(threshold), Some(fingerprint)) =
            (self.settings.near_duplicate_threshold, &fingerprint)
        {
            let bands = fingerprint.bands_in(&dedup_root);
            if let Some((id, similarity)) = find_near(tx, tenant, &bands, &words, threshold)? {
                let kind = DuplicateKind::Near { similarity };
                record_merge(tx, id, now, kind, &memory)?;
                return merged(tx, memory.uri, id, kind);
            }
        }
        check_path_conflicts(tx, tenant, &memory.uri)?;
        let previous = latest_version(tx, tenant, &memory.uri)?;
        let created_at_ms = memory.created_at_ms.unwrap_or(now);
        let priority = memory.priority.unwrap_or(DEFAULT_PRIORITY);
        let id = insert_version(
            tx,
            tenant,
            &memory,
            InsertDetails {
                dedup_root: &dedup_root,
                hash: &hash,
                version: previous.as_ref().map_or(1, |p| p.version + 1),
                supersedes: previous.as_ref().map(|p| p.id),
                priority,
                source: &memory.source,
                created_at_ms,
                now,
                fingerprint: fingerprint.as_ref(),
            },
        )?;
        Ok(AddOutcome::Added(load_by_id(tx, id)?))
    }
}

/// Where a full-text ranking looks.
#[derive(Clone, Copy)]
struct TextScope<'a> {
    tenant: &'a str,
    /// The tenant holds every indexed row.
    whole_index: bool,
    filter: &'a SearchFilter,
    depth: usize,
}

/// An entry of the BM25 ranking.
struct Ranked {
    id: i64,
    /// FTS5's bm25: negative, lower is better.
    bm25: f64,
    parent: String,
}

/// How many of a directory's best entries make up its score.
const DIRECTORY_SCORE_ENTRIES: usize = 3;

/// The BM25 ranking re-ordered by directory: directories scored by the sum of their best
/// [`DIRECTORY_SCORE_ENTRIES`] entries' BM25 relevance, entries ordered by their directory's
/// rank, then by their own. A directory where several entries match lifts all of them, as
/// OpenViking's hierarchical retrieval propagates a directory's score to its children.
fn directory_ranking(text: &[Ranked]) -> Vec<i64> {
    let mut scores: HashMap<&str, (f64, usize)> = HashMap::new();
    for entry in text {
        let slot = scores.entry(entry.parent.as_str()).or_insert((0.0, 0));
        if slot.1 < DIRECTORY_SCORE_ENTRIES {
            slot.0 -= entry.bm25;
            slot.1 += 1;
        }
    }
    let mut directories: Vec<(&str, f64)> = scores
        .into_iter()
        .map(|(parent, (score, _))| (parent, score))
        .collect();
    directories.sort_by(|(a, x), (b, y)| y.total_cmp(x).then(a.cmp(b)));
    let rank: HashMap<&str, usize> = directories
        .iter()
        .enumerate()
        .map(|(index, (parent, _))| (*parent, index))
        .collect();
    let mut order: Vec<(usize, usize, i64)> = text
        .iter()
        .enumerate()
        .map(|(own, entry)| {
            (
                rank.get(entry.parent.as_str())
                    .copied()
                    .unwrap_or(usize::MAX),
                own,
                entry.id,
            )
        })
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, _, id)| id).collect()
}

/// The relevance ranking of [`VectorFusion::Score`]: the text candidates' BM25 relevance (FTS5's
/// bm25 negated) and the vector candidates' cosines, min-max fused with the vectors' `share`.
fn relevance_by_score(text: &[Ranked], vectors: &[(i64, f32)], share: f64) -> Vec<i64> {
    let text_scores: Vec<(i64, f64)> = text
        .iter()
        .map(|ranked| (ranked.id, -ranked.bm25))
        .collect();
    let vector_scores: Vec<(i64, f64)> = vectors
        .iter()
        .map(|(id, cosine)| (*id, f64::from(*cosine)))
        .collect();
    min_max_score_fusion(&[
        ScoredList {
            weight: 1.0 - share,
            items: &text_scores,
        },
        ScoredList {
            weight: share,
            items: &vector_scores,
        },
    ])
    .into_iter()
    .map(|entry| entry.item)
    .collect()
}

/// A version's identity, for writing the next one.
struct VersionRef {
    id: i64,
    version: u32,
}

/// What [`insert_version`] needs besides the new memory.
struct InsertDetails<'a> {
    dedup_root: &'a str,
    hash: &'a str,
    version: u32,
    supersedes: Option<i64>,
    priority: u8,
    source: &'a MemorySource,
    created_at_ms: i64,
    now: i64,
    fingerprint: Option<&'a Fingerprint>,
}

fn dedup_root(uri: &MemoryUri) -> Result<String, MemoryError> {
    uri.require_entry()?;
    Ok(uri
        .dedup_root()
        .map_or_else(|| uri.as_str().to_owned(), |root| root.as_str().to_owned()))
}

fn source_json(source: &MemorySource) -> String {
    json!({"session_id": source.session_id, "entry_ids": source.entry_ids}).to_string()
}

fn source_from_json(text: &str) -> Result<MemorySource, MemoryError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|error| MemoryError::Corrupt(format!("a stored memory source: {error}")))?;
    let session_id = value
        .get("session_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let entry_ids = value
        .get("entry_ids")
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Ok(MemorySource {
        session_id,
        entry_ids,
    })
}

/// The words of a URI below the fixed layout, for the `path` column: names of users, agents,
/// skills, tools, entities and files.
fn index_path(uri: &MemoryUri) -> String {
    uri.segments()
        .skip(1)
        .filter(|segment| !matches!(*segment, "memories" | "skills" | "tools"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn vector_from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|chunk| {
            let mut word = [0_u8; 4];
            word.copy_from_slice(chunk);
            f32::from_le_bytes(word)
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let mut dot = 0.0_f32;
    let mut norm_a = 0.0_f32;
    let mut norm_b = 0.0_f32;
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        norm_a += x * x;
        norm_b += y * y;
    }
    if norm_a == 0.0 || norm_b == 0.0 {
        return 0.0;
    }
    dot / (norm_a.sqrt() * norm_b.sqrt())
}

fn status_of(
    superseded_by: Option<i64>,
    superseded_at: Option<i64>,
    forgotten_at: Option<i64>,
) -> MemoryStatus {
    match (superseded_by, forgotten_at) {
        (Some(by), _) => MemoryStatus::Superseded {
            by,
            at_ms: superseded_at.unwrap_or(0),
        },
        (None, Some(at_ms)) => MemoryStatus::Forgotten { at_ms },
        (None, None) => MemoryStatus::Live,
    }
}

/// A row of [`COLUMNS`], with its merges' sources added.
fn memory_from_row(tx: &Connection, row: &rusqlite::Row<'_>) -> Result<Memory, MemoryError> {
    let mut memory = memory_from_row_alone(row)?;
    memory.sources.extend(merged_sources(tx, memory.id)?);
    Ok(memory)
}

/// A row of [`COLUMNS`], with its own source only.
fn memory_from_row_alone(row: &rusqlite::Row<'_>) -> Result<Memory, MemoryError> {
    let read = |error: rusqlite::Error| MemoryError::Corrupt(format!("a memory row: {error}"));
    let id: i64 = row.get(0).map_err(read)?;
    let uri_text: String = row.get(2).map_err(read)?;
    let uri = MemoryUri::parse(&uri_text)
        .map_err(|error| MemoryError::Corrupt(format!("stored URI {uri_text:?}: {error}")))?;
    let category_text: String = row.get(4).map_err(read)?;
    let category = MemoryCategory::from_name(&category_text).ok_or_else(|| {
        MemoryError::Corrupt(format!("stored category {category_text:?} is unknown"))
    })?;
    let version: i64 = row.get(3).map_err(read)?;
    let priority: i64 = row.get(8).map_err(read)?;
    let source_text: String = row.get(9).map_err(read)?;
    let mut sources = Vec::new();
    let own = source_from_json(&source_text)?;
    if !own.is_empty() {
        sources.push(own);
    }
    let embedding_bytes: Option<i64> = row.get(17).map_err(read)?;
    Ok(Memory {
        id,
        tenant: row.get(1).map_err(read)?,
        uri,
        version: u32::try_from(version)
            .map_err(|_| MemoryError::Corrupt(format!("memory {id} has version {version}")))?,
        category,
        l0: row.get(5).map_err(read)?,
        l1: row.get(6).map_err(read)?,
        l2: row.get(7).map_err(read)?,
        priority: u8::try_from(priority)
            .map_err(|_| MemoryError::Corrupt(format!("memory {id} has priority {priority}")))?,
        sources,
        created_at_ms: row.get(10).map_err(read)?,
        updated_at_ms: row.get(11).map_err(read)?,
        supersedes: row.get(12).map_err(read)?,
        status: status_of(
            row.get(13).map_err(read)?,
            row.get(14).map_err(read)?,
            row.get(15).map_err(read)?,
        ),
        content_hash: row.get(16).map_err(read)?,
        embedding_dimensions: embedding_bytes
            .and_then(|bytes| usize::try_from(bytes / 4).ok())
            .filter(|dimensions| *dimensions > 0),
    })
}

fn merged_sources(tx: &Connection, id: i64) -> Result<Vec<MemorySource>, MemoryError> {
    let mut statement = tx
        .prepare_cached("SELECT source FROM memory_merges WHERE memory_id = ?1 ORDER BY rowid")
        .map_err(MemoryError::storage("reading merges"))?;
    let texts = statement
        .query_map([id], |row| row.get::<_, String>(0))
        .map_err(MemoryError::storage("reading merges"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(MemoryError::storage("reading merges"))?;
    let mut sources = Vec::new();
    for text in texts {
        let source = source_from_json(&text)?;
        if !source.is_empty() {
            sources.push(source);
        }
    }
    Ok(sources)
}

/// The versions `ids`, in that order, with two queries whatever their number.
fn load_many(tx: &Connection, ids: &[i64]) -> Result<Vec<Memory>, MemoryError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let placeholders = vec!["?"; ids.len()].join(", ");
    let mut by_id: HashMap<i64, Memory> = HashMap::with_capacity(ids.len());
    {
        let mut statement = tx
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM memories WHERE id IN ({placeholders})"
            ))
            .map_err(MemoryError::storage("reading memories"))?;
        let mut rows = statement
            .query(params_from_iter(ids))
            .map_err(MemoryError::storage("reading memories"))?;
        while let Some(row) = rows
            .next()
            .map_err(MemoryError::storage("reading memories"))?
        {
            let memory = memory_from_row_alone(row)?;
            by_id.insert(memory.id, memory);
        }
    }
    let mut statement = tx
        .prepare_cached(&format!(
            "SELECT memory_id, source FROM memory_merges WHERE memory_id IN ({placeholders}) \
             ORDER BY rowid"
        ))
        .map_err(MemoryError::storage("reading merges"))?;
    let merges = statement
        .query_map(params_from_iter(ids), |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
        })
        .map_err(MemoryError::storage("reading merges"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(MemoryError::storage("reading merges"))?;
    for (id, text) in merges {
        let source = source_from_json(&text)?;
        if let Some(memory) = by_id.get_mut(&id).filter(|_| !source.is_empty()) {
            memory.sources.push(source);
        }
    }
    ids.iter()
        .map(|id| {
            by_id
                .remove(id)
                .ok_or_else(|| MemoryError::Corrupt(format!("memory version {id} vanished")))
        })
        .collect()
}

fn load_by_id(tx: &Connection, id: i64) -> Result<Memory, MemoryError> {
    let mut statement = tx
        .prepare_cached(&format!("SELECT {COLUMNS} FROM memories WHERE id = ?1"))
        .map_err(MemoryError::storage("reading a memory"))?;
    let mut rows = statement
        .query([id])
        .map_err(MemoryError::storage("reading a memory"))?;
    match rows
        .next()
        .map_err(MemoryError::storage("reading a memory"))?
    {
        Some(row) => memory_from_row(tx, row),
        None => Err(MemoryError::Corrupt(format!(
            "memory version {id} vanished"
        ))),
    }
}

fn live_id(tx: &Connection, tenant: &str, uri: &MemoryUri) -> Result<Option<i64>, MemoryError> {
    tx.prepare_cached(&format!(
        "SELECT id FROM memories WHERE tenant = ?1 AND uri = ?2 AND {LIVE}"
    ))
    .and_then(|mut statement| {
        statement
            .query_row(params![tenant, uri.as_str()], |row| row.get(0))
            .optional()
    })
    .map_err(MemoryError::storage("looking up a memory"))
}

fn latest_version(
    tx: &Connection,
    tenant: &str,
    uri: &MemoryUri,
) -> Result<Option<VersionRef>, MemoryError> {
    let found: Option<(i64, i64)> = tx
        .prepare_cached(
            "SELECT id, version FROM memories WHERE tenant = ?1 AND uri = ?2 \
             ORDER BY version DESC LIMIT 1",
        )
        .and_then(|mut statement| {
            statement
                .query_row(params![tenant, uri.as_str()], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .optional()
        })
        .map_err(MemoryError::storage("looking up a memory's versions"))?;
    found
        .map(|(id, version)| {
            u32::try_from(version)
                .map(|version| VersionRef { id, version })
                .map_err(|_| MemoryError::Corrupt(format!("memory {id} has version {version}")))
        })
        .transpose()
}

/// The live entry at `uri`, or why there is none.
fn live_memory(tx: &Connection, tenant: &str, uri: &MemoryUri) -> Result<Memory, MemoryError> {
    if let Some(id) = live_id(tx, tenant, uri)? {
        return load_by_id(tx, id);
    }
    let forgotten: Option<Option<i64>> = tx
        .prepare_cached(
            "SELECT forgotten_at_ms FROM memories WHERE tenant = ?1 AND uri = ?2 \
             ORDER BY version DESC LIMIT 1",
        )
        .and_then(|mut statement| {
            statement
                .query_row(params![tenant, uri.as_str()], |row| row.get(0))
                .optional()
        })
        .map_err(MemoryError::storage("looking up a memory"))?;
    match forgotten {
        Some(Some(at_ms)) => Err(MemoryError::Forgotten {
            uri: uri.clone(),
            at_ms,
        }),
        Some(None) | None => Err(MemoryError::NotFound {
            tenant: tenant.to_owned(),
            uri: uri.clone(),
        }),
    }
}

fn find_exact(
    tx: &Connection,
    tenant: &str,
    dedup_root: &str,
    hash: &str,
) -> Result<Option<i64>, MemoryError> {
    tx.prepare_cached(&format!(
        "SELECT id FROM memories WHERE tenant = ?1 AND dedup_root = ?2 AND content_hash = ?3 \
         AND {LIVE} ORDER BY id LIMIT 1"
    ))
    .and_then(|mut statement| {
        statement
            .query_row(params![tenant, dedup_root, hash], |row| row.get(0))
            .optional()
    })
    .map_err(MemoryError::storage("looking for an exact duplicate"))
}

/// The most similar live entry sharing an LSH band, when its similarity reaches `threshold`.
fn find_near(
    tx: &Connection,
    tenant: &str,
    bands: &[i64],
    words: &HashSet<u64>,
    threshold: f64,
) -> Result<Option<(i64, f64)>, MemoryError> {
    let placeholders = vec!["?"; bands.len()].join(", ");
    let mut statement = tx
        .prepare_cached(&format!(
            "SELECT DISTINCT memory_id FROM memory_bands WHERE tenant = ? AND band IN \
             ({placeholders}) ORDER BY memory_id LIMIT {MAX_NEAR_CANDIDATES}"
        ))
        .map_err(MemoryError::storage("looking for near duplicates"))?;
    let mut values: Vec<SqlValue> = vec![SqlValue::Text(tenant.to_owned())];
    values.extend(bands.iter().map(|band| SqlValue::Integer(*band)));
    let candidates = statement
        .query_map(params_from_iter(values), |row| row.get::<_, i64>(0))
        .map_err(MemoryError::storage("looking for near duplicates"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(MemoryError::storage("looking for near duplicates"))?;
    let mut best: Option<(i64, f64)> = None;
    let mut content = tx
        .prepare_cached(&format!("SELECT l2 FROM memories WHERE id = ?1 AND {LIVE}"))
        .map_err(MemoryError::storage("reading a near-duplicate candidate"))?;
    for id in candidates {
        let text: Option<String> = content
            .query_row([id], |row| row.get(0))
            .optional()
            .map_err(MemoryError::storage("reading a near-duplicate candidate"))?;
        let Some(text) = text else {
            continue;
        };
        let similarity = jaccard_of(words, &shingles(&text));
        if similarity >= threshold && best.is_none_or(|(_, top)| similarity > top) {
            best = Some((id, similarity));
        }
    }
    Ok(best)
}

fn record_merge(
    tx: &Connection,
    id: i64,
    now: i64,
    kind: DuplicateKind,
    memory: &NewMemory,
) -> Result<(), MemoryError> {
    let (kind_name, similarity) = match kind {
        DuplicateKind::Exact => ("exact", 1.0),
        DuplicateKind::Near { similarity } => ("near", similarity),
    };
    tx.prepare_cached(
        "INSERT INTO memory_merges (memory_id, merged_at_ms, kind, similarity, requested_uri, \
         source) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            id,
            now,
            kind_name,
            similarity,
            memory.uri.as_str(),
            source_json(&memory.source)
        ])
    })
    .map_err(MemoryError::storage("recording a merge"))?;
    Ok(())
}

fn merged(
    tx: &Connection,
    requested_uri: MemoryUri,
    id: i64,
    kind: DuplicateKind,
) -> Result<AddOutcome, MemoryError> {
    Ok(AddOutcome::Merged(Merge {
        requested_uri,
        into: load_by_id(tx, id)?,
        kind,
    }))
}

/// The token that stands for a tenant in the full-text index: one word, whatever characters the
/// tenant name has, so a tenant's rows are a phrase query away.
fn tenant_token(tenant: &str) -> String {
    format!("t{:016x}", xxh3_64(tenant.as_bytes()))
}

/// The exclusive upper bound of the URIs starting with `prefix` (which ends with `/`).
fn prefix_end(prefix: &str) -> String {
    match prefix.strip_suffix('/') {
        Some(stem) => format!("{stem}0"),
        None => format!("{prefix}\u{10FFFF}"),
    }
}

/// Refuses an entry inside another entry, or above existing ones.
fn check_path_conflicts(tx: &Connection, tenant: &str, uri: &MemoryUri) -> Result<(), MemoryError> {
    let conflict = |existing: String| -> Result<MemoryError, MemoryError> {
        let existing = MemoryUri::parse(&existing)
            .map_err(|error| MemoryError::Corrupt(format!("stored URI {existing:?}: {error}")))?;
        Ok(MemoryError::PathConflict {
            uri: uri.clone(),
            existing,
        })
    };
    let mut above = tx
        .prepare_cached(&format!(
            "SELECT uri FROM memories WHERE tenant = ?1 AND uri = ?2 AND {LIVE}"
        ))
        .map_err(MemoryError::storage("checking the path"))?;
    for ancestor in uri.ancestors() {
        let found: Option<String> = above
            .query_row(params![tenant, ancestor.as_str()], |row| row.get(0))
            .optional()
            .map_err(MemoryError::storage("checking the path"))?;
        if let Some(existing) = found {
            return Err(conflict(existing)?);
        }
    }
    let prefix = uri.descendant_prefix();
    let below: Option<String> = tx
        .prepare_cached(&format!(
            "SELECT uri FROM memories WHERE tenant = ?1 AND uri >= ?2 AND uri < ?3 AND {LIVE} \
             LIMIT 1"
        ))
        .and_then(|mut statement| {
            statement
                .query_row(params![tenant, prefix, prefix_end(&prefix)], |row| {
                    row.get(0)
                })
                .optional()
        })
        .map_err(MemoryError::storage("checking the path"))?;
    match below {
        Some(existing) => Err(conflict(existing)?),
        None => Ok(()),
    }
}

fn insert_version(
    tx: &Connection,
    tenant: &str,
    memory: &NewMemory,
    details: InsertDetails<'_>,
) -> Result<i64, MemoryError> {
    let category = memory.uri.category().ok_or_else(|| {
        MemoryError::Corrupt(format!("entry location {} has no category", memory.uri))
    })?;
    let parent = memory
        .uri
        .parent()
        .map_or_else(String::new, |parent| parent.as_str().to_owned());
    let l0 = match &memory.l0 {
        Some(l0) => l0.clone(),
        None => derive_abstract(&memory.content),
    };
    let l1 = match &memory.l1 {
        Some(l1) => l1.clone(),
        None => derive_overview(&memory.content),
    };
    let embedding = memory.embedding.as_deref().map(vector_bytes);
    tx.prepare_cached(
        "INSERT INTO memories (tenant, uri, parent, version, category, dedup_root, l0, l1, l2, \
         l0_given, l1_given, content_hash, priority, source, created_at_ms, updated_at_ms, \
         supersedes, embedding) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            tenant,
            memory.uri.as_str(),
            parent,
            details.version,
            category.name(),
            details.dedup_root,
            l0,
            l1,
            memory.content,
            memory.l0.is_some(),
            memory.l1.is_some(),
            details.hash,
            details.priority,
            source_json(details.source),
            details.created_at_ms,
            details.now,
            details.supersedes,
            embedding,
        ])
    })
    .map_err(MemoryError::storage("writing a memory"))?;
    let id = tx.last_insert_rowid();
    // Derived levels repeat L2's words; indexing them again would count those words twice.
    let indexed_l0 = if memory.l0.is_some() { l0.as_str() } else { "" };
    let indexed_l1 = if memory.l1.is_some() { l1.as_str() } else { "" };
    tx.prepare_cached(
        "INSERT INTO memories_fts (rowid, tenant, path, l0, l1, l2) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            id,
            tenant_token(tenant),
            index_path(&memory.uri),
            indexed_l0,
            indexed_l1,
            memory.content
        ])
    })
    .map_err(MemoryError::storage("indexing a memory"))?;
    if let Some(fingerprint) = details.fingerprint {
        let mut statement = tx
            .prepare_cached(
                "INSERT OR IGNORE INTO memory_bands (tenant, band, memory_id) VALUES (?1, ?2, ?3)",
            )
            .map_err(MemoryError::storage("indexing a memory's bands"))?;
        for band in fingerprint.bands_in(details.dedup_root) {
            statement
                .execute(params![tenant, band, id])
                .map_err(MemoryError::storage("indexing a memory's bands"))?;
        }
    }
    Ok(id)
}

/// Drops the search data of a version that stops being live (the row itself stays).
fn unindex(tx: &Connection, tenant: &str, id: i64, l2: &str) -> Result<(), MemoryError> {
    tx.prepare_cached("DELETE FROM memories_fts WHERE rowid = ?1")
        .and_then(|mut statement| statement.execute([id]))
        .map_err(MemoryError::storage("unindexing a memory"))?;
    if let Some(fingerprint) = Fingerprint::of(l2) {
        let dedup_root: String = tx
            .prepare_cached("SELECT dedup_root FROM memories WHERE id = ?1")
            .and_then(|mut statement| statement.query_row([id], |row| row.get(0)))
            .map_err(MemoryError::storage("unindexing a memory"))?;
        let mut statement = tx
            .prepare_cached(
                "DELETE FROM memory_bands WHERE tenant = ?1 AND band = ?2 AND memory_id = ?3",
            )
            .map_err(MemoryError::storage("unindexing a memory"))?;
        for band in fingerprint.bands_in(&dedup_root) {
            statement
                .execute(params![tenant, band, id])
                .map_err(MemoryError::storage("unindexing a memory"))?;
        }
    }
    Ok(())
}

/// The SQL conditions (on alias `m`) and parameters of a filter.
fn filter_sql(filter: &SearchFilter, values: &mut Vec<SqlValue>) -> String {
    let mut sql = String::new();
    if !filter.categories.is_empty() {
        let placeholders = vec!["?"; filter.categories.len()].join(", ");
        sql.push_str(&format!(" AND m.category IN ({placeholders})"));
        values.extend(
            filter
                .categories
                .iter()
                .map(|category| SqlValue::Text(category.name().to_owned())),
        );
    }
    if let Some(under) = &filter.under {
        let prefix = under.descendant_prefix();
        sql.push_str(" AND (m.uri = ? OR (m.uri >= ? AND m.uri < ?))");
        values.push(SqlValue::Text(under.as_str().to_owned()));
        values.push(SqlValue::Text(prefix.clone()));
        values.push(SqlValue::Text(prefix_end(&prefix)));
    }
    if let Some(from) = filter.created_from_ms {
        sql.push_str(" AND m.created_at_ms >= ?");
        values.push(SqlValue::Integer(from));
    }
    if let Some(until) = filter.created_until_ms {
        sql.push_str(" AND m.created_at_ms < ?");
        values.push(SqlValue::Integer(until));
    }
    sql
}

impl SqliteMemoryStore {
    /// The BM25 ranking of the tenant's live entries for `fts_query` (terms already joined by
    /// `OR`), under the filter and within `windows` (no restriction when empty), best first.
    ///
    /// The tenant is part of the full-text query (its token column), so FTS5 only scores the
    /// tenant's rows. With no filter, the best `depth` rows are picked inside FTS5 and only they
    /// are joined with `memories`; a filter needs the join first, so it is applied to every
    /// match before the cut.
    fn text_ranking(
        &self,
        tx: &Connection,
        scope: &TextScope<'_>,
        fts_query: &str,
        windows: &[(i64, i64)],
    ) -> Result<Vec<Ranked>, MemoryError> {
        let TextScope {
            tenant,
            whole_index,
            filter,
            depth,
        } = *scope;
        let weights = self.settings.weights;
        let bm25 = format!(
            "bm25(memories_fts, 0.0, {}, {}, {}, {})",
            weights.path, weights.l0, weights.l1, weights.l2
        );
        // When the tenant holds every indexed row, restricting the match to it changes nothing
        // but costs a walk of its whole doclist.
        let matched = if whole_index {
            fts_query.to_owned()
        } else {
            format!("tenant : \"{}\" AND ({fts_query})", tenant_token(tenant))
        };
        let mut values: Vec<SqlValue> = vec![SqlValue::Text(matched)];
        let unfiltered = *filter == SearchFilter::default() && windows.is_empty();
        let sql = if unfiltered {
            values.push(SqlValue::Integer(i64::try_from(depth).unwrap_or(i64::MAX)));
            values.push(SqlValue::Text(tenant.to_owned()));
            format!(
                "SELECT m.id, f.score, m.parent FROM \
                 (SELECT rowid, {bm25} AS score FROM memories_fts WHERE memories_fts MATCH ? \
                  ORDER BY score, rowid LIMIT ?) f \
                 JOIN memories m ON m.id = f.rowid WHERE m.tenant = ? ORDER BY f.score, m.id"
            )
        } else {
            values.push(SqlValue::Text(tenant.to_owned()));
            let mut conditions = filter_sql(filter, &mut values);
            if !windows.is_empty() {
                let any: Vec<&str> = windows
                    .iter()
                    .map(|_| "(m.created_at_ms >= ? AND m.created_at_ms < ?)")
                    .collect();
                conditions.push_str(&format!(" AND ({})", any.join(" OR ")));
                for (start, end) in windows {
                    values.push(SqlValue::Integer(*start));
                    values.push(SqlValue::Integer(*end));
                }
            }
            values.push(SqlValue::Integer(i64::try_from(depth).unwrap_or(i64::MAX)));
            format!(
                "SELECT m.id, {bm25} AS score, m.parent \
                 FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid \
                 WHERE memories_fts MATCH ? AND m.tenant = ?{conditions} \
                 ORDER BY score, m.id LIMIT ?"
            )
        };
        let mut statement = tx
            .prepare_cached(&sql)
            .map_err(MemoryError::storage("preparing a full-text search"))?;
        statement
            .query_map(params_from_iter(values), |row| {
                Ok(Ranked {
                    id: row.get(0)?,
                    bm25: row.get(1)?,
                    parent: row.get(2)?,
                })
            })
            .map_err(MemoryError::storage("running a full-text search"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(MemoryError::storage("running a full-text search"))
    }

    /// The query's terms that can change the ranking, and whether the tenant holds every
    /// indexed row (then the full-text query needs no tenant restriction).
    ///
    /// FTS5's BM25 gives a term found in half the indexed rows or more an IDF of 10⁻⁶
    /// (`log((N - n + 0.5) / (n + 0.5))` clamped), so it adds nothing to any score but makes
    /// FTS5 score every row it is in (a user's name in all of their memories). Such terms, and
    /// terms in no row, are dropped, unless no term is left.
    fn informative_terms<'a>(
        &self,
        tx: &Connection,
        tenant: &str,
        terms: &'a [String],
    ) -> Result<(Vec<&'a str>, bool), MemoryError> {
        let generation = self.generation(tx)?;
        let mut cache = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if cache
            .as_ref()
            .is_none_or(|counts| counts.generation != generation)
        {
            let indexed: i64 = tx
                .prepare_cached(&format!("SELECT count(*) FROM memories WHERE {LIVE}"))
                .and_then(|mut statement| statement.query_row([], |row| row.get(0)))
                .map_err(MemoryError::storage("counting indexed memories"))?;
            *cache = Some(IndexCounts {
                generation,
                indexed,
                tenants: HashMap::new(),
                terms: HashMap::new(),
            });
        }
        let Some(counts) = cache.as_mut() else {
            return Ok((terms.iter().map(String::as_str).collect(), false));
        };
        let tenant_rows = match counts.tenants.get(tenant) {
            Some(rows) => *rows,
            None => {
                let rows: i64 = tx
                    .prepare_cached(&format!(
                        "SELECT count(*) FROM memories WHERE tenant = ?1 AND {LIVE}"
                    ))
                    .and_then(|mut statement| statement.query_row([tenant], |row| row.get(0)))
                    .map_err(MemoryError::storage("counting a tenant's memories"))?;
                counts.tenants.insert(tenant.to_owned(), rows);
                rows
            }
        };
        let whole_index = tenant_rows == counts.indexed;
        if terms.len() < 2 {
            return Ok((terms.iter().map(String::as_str).collect(), whole_index));
        }
        let mut count = tx
            .prepare_cached("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?1")
            .map_err(MemoryError::storage("counting a term's rows"))?;
        let mut kept = Vec::new();
        for term in terms {
            let rows = match counts.terms.get(term) {
                Some(rows) => *rows,
                None => {
                    let Some(single) = QueryPlan::fts_query_of(std::slice::from_ref(term)) else {
                        continue;
                    };
                    let rows: i64 = count
                        .query_row([single], |row| row.get(0))
                        .map_err(MemoryError::storage("counting a term's rows"))?;
                    if counts.terms.len() >= MAX_COUNTED_TERMS {
                        counts.terms.clear();
                    }
                    counts.terms.insert(term.clone(), rows);
                    rows
                }
            };
            // A term in no row matches nothing; counting it as informative would drop the
            // terms that do match (a small store, where every match is in half the rows).
            if rows > 0 && 2 * rows < counts.indexed {
                kept.push(term.as_str());
            }
        }
        if kept.is_empty() {
            kept = terms.iter().map(String::as_str).collect();
        }
        Ok((kept, whole_index))
    }

    /// The cosine ranking of live entries with a vector of the query's dimensions.
    fn vector_ranking(
        &self,
        tx: &Connection,
        tenant: &str,
        query: &[f32],
        filter: &SearchFilter,
        depth: usize,
    ) -> Result<Vec<(i64, f32)>, MemoryError> {
        let vectors = self.tenant_vectors(tx, tenant)?;
        // A filter is checked in SQL (no vectors read); the vectors come from the cache.
        let allowed: Option<HashSet<i64>> = if *filter == SearchFilter::default() {
            None
        } else {
            let mut values: Vec<SqlValue> = vec![SqlValue::Text(tenant.to_owned())];
            let conditions = filter_sql(filter, &mut values);
            let sql = format!(
                "SELECT m.id FROM memories m WHERE m.tenant = ? AND m.superseded_by IS NULL \
                 AND m.forgotten_at_ms IS NULL AND m.embedding IS NOT NULL{conditions}"
            );
            let mut statement = tx
                .prepare_cached(&sql)
                .map_err(MemoryError::storage("preparing a vector search"))?;
            let ids = statement
                .query_map(params_from_iter(values), |row| row.get::<_, i64>(0))
                .map_err(MemoryError::storage("running a vector search"))?
                .collect::<Result<HashSet<_>, _>>()
                .map_err(MemoryError::storage("running a vector search"))?;
            Some(ids)
        };
        let mut scored: Vec<(i64, f32)> = Vec::new();
        let mut other_dimensions: Vec<usize> = Vec::new();
        for (id, vector) in vectors.iter() {
            if allowed.as_ref().is_some_and(|ids| !ids.contains(id)) {
                continue;
            }
            if vector.len() != query.len() {
                if !other_dimensions.contains(&vector.len()) {
                    other_dimensions.push(vector.len());
                }
                continue;
            }
            scored.push((*id, cosine(query, vector)));
        }
        if scored.is_empty() && !other_dimensions.is_empty() {
            other_dimensions.sort_unstable();
            return Err(MemoryError::DimensionMismatch {
                query: query.len(),
                stored: other_dimensions,
            });
        }
        scored.sort_by(|(id_a, a), (id_b, b)| b.total_cmp(a).then(id_a.cmp(id_b)));
        scored.truncate(depth);
        Ok(scored)
    }

    /// Which database state cached data belongs to: SQLite's `data_version` (commits by other
    /// connections) and this store's own commits.
    fn generation(&self, tx: &Connection) -> Result<(i64, u64), MemoryError> {
        let data_version: i64 = tx
            .query_row("PRAGMA data_version", [], |row| row.get(0))
            .map_err(MemoryError::storage("reading the data version"))?;
        Ok((data_version, self.writes.load(Ordering::SeqCst)))
    }

    /// The tenant's live vectors, read once per database state: a search then compares vectors
    /// in memory instead of reading every blob again.
    fn tenant_vectors(&self, tx: &Connection, tenant: &str) -> Result<TenantVectors, MemoryError> {
        let generation = self.generation(tx)?;
        let mut cache = self.vectors.lock().unwrap_or_else(PoisonError::into_inner);
        if cache
            .as_ref()
            .is_none_or(|cached| cached.generation != generation)
        {
            *cache = Some(VectorCache {
                generation,
                tenants: HashMap::new(),
            });
        }
        let Some(cached) = cache.as_mut() else {
            return Ok(Arc::new(Vec::new()));
        };
        if let Some(vectors) = cached.tenants.get(tenant) {
            return Ok(Arc::clone(vectors));
        }
        let mut statement = tx
            .prepare_cached(&format!(
                "SELECT id, embedding FROM memories WHERE tenant = ?1 AND {LIVE} \
                 AND embedding IS NOT NULL ORDER BY id"
            ))
            .map_err(MemoryError::storage("reading vectors"))?;
        let mut rows = statement
            .query([tenant])
            .map_err(MemoryError::storage("reading vectors"))?;
        let mut vectors = Vec::new();
        while let Some(row) = rows
            .next()
            .map_err(MemoryError::storage("reading vectors"))?
        {
            let id: i64 = row
                .get(0)
                .map_err(MemoryError::storage("reading vectors"))?;
            let bytes = row
                .get_ref(1)
                .map_err(MemoryError::storage("reading vectors"))?
                .as_blob()
                .map_err(|error| MemoryError::Corrupt(format!("memory {id}'s vector: {error}")))?;
            vectors.push((id, vector_from_bytes(bytes)));
        }
        let vectors = Arc::new(vectors);
        if cached.tenants.len() >= MAX_CACHED_VECTOR_TENANTS {
            cached.tenants.clear();
        }
        cached
            .tenants
            .insert(tenant.to_owned(), Arc::clone(&vectors));
        Ok(vectors)
    }
}

fn validate_query(query: &SearchQuery) -> Result<(), MemoryError> {
    if query.limit == 0 || query.limit > MAX_SEARCH_LIMIT {
        return Err(MemoryError::InvalidInput {
            field: "limit",
            reason: format!(
                "the limit is {}; it must be from 1 to {MAX_SEARCH_LIMIT}",
                query.limit
            ),
        });
    }
    if let Some(vector) = &query.vector {
        validate_vector("query vector", vector)?;
    }
    if let (Some(from), Some(until)) = (query.filter.created_from_ms, query.filter.created_until_ms)
    {
        if from < until {
            return Ok(());
        }
        return Err(MemoryError::InvalidInput {
            field: "filter",
            reason: format!("the time range starts at {from} ms, not before its end {until} ms"),
        });
    }
    Ok(())
}

/// One directory level of a listing: the child of `dir` each live entry below it falls in.
fn children(
    dir: &MemoryUri,
    rows: &[ListedRow],
) -> Result<Vec<(DirEntry, Vec<usize>)>, MemoryError> {
    let prefix = dir.descendant_prefix();
    let mut groups: BTreeMap<(bool, String), (Option<usize>, Vec<usize>)> = BTreeMap::new();
    for (index, row) in rows.iter().enumerate() {
        let Some(rest) = row.uri.as_str().strip_prefix(prefix.as_str()) else {
            continue;
        };
        match rest.split_once('/') {
            Some((name, _)) => {
                groups
                    .entry((false, name.to_owned()))
                    .or_default()
                    .1
                    .push(index);
            }
            None => {
                groups.entry((true, rest.to_owned())).or_default().0 = Some(index);
            }
        }
    }
    let mut out = Vec::new();
    for ((is_entry, name), (entry, below)) in groups {
        let uri = dir.join(&name)?;
        if is_entry {
            let Some(row) = entry.and_then(|index| rows.get(index)) else {
                continue;
            };
            out.push((
                DirEntry {
                    uri,
                    kind: DirEntryKind::Entry {
                        category: row.category,
                        l0: row.l0.clone(),
                        priority: row.priority,
                        updated_at_ms: row.updated_at_ms,
                    },
                },
                Vec::new(),
            ));
        } else {
            out.push((
                DirEntry {
                    uri,
                    kind: DirEntryKind::Directory {
                        entries: below.len() as u64,
                    },
                },
                below,
            ));
        }
    }
    Ok(out)
}

/// A live entry as listings show it.
struct ListedRow {
    uri: MemoryUri,
    category: MemoryCategory,
    l0: String,
    priority: u8,
    updated_at_ms: i64,
}

fn listed_rows(
    tx: &Connection,
    tenant: &str,
    dir: &MemoryUri,
) -> Result<Vec<ListedRow>, MemoryError> {
    let prefix = dir.descendant_prefix();
    let mut statement = tx
        .prepare_cached(&format!(
            "SELECT uri, category, l0, priority, updated_at_ms FROM memories \
             WHERE tenant = ?1 AND uri >= ?2 AND uri < ?3 AND {LIVE} ORDER BY uri"
        ))
        .map_err(MemoryError::storage("listing memories"))?;
    let raw = statement
        .query_map(params![tenant, prefix, prefix_end(&prefix)], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, i64>(3)?,
                row.get::<_, i64>(4)?,
            ))
        })
        .map_err(MemoryError::storage("listing memories"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(MemoryError::storage("listing memories"))?;
    raw.into_iter()
        .map(|(uri, category, l0, priority, updated_at_ms)| {
            Ok(ListedRow {
                uri: MemoryUri::parse(&uri).map_err(|error| {
                    MemoryError::Corrupt(format!("stored URI {uri:?}: {error}"))
                })?,
                category: MemoryCategory::from_name(&category).ok_or_else(|| {
                    MemoryError::Corrupt(format!("stored category {category:?} is unknown"))
                })?,
                l0,
                priority: u8::try_from(priority).unwrap_or(u8::MAX),
                updated_at_ms,
            })
        })
        .collect()
}

fn build_tree(
    entry: DirEntry,
    rows: &[ListedRow],
    indices: &[usize],
    depth_left: usize,
) -> Result<TreeNode, MemoryError> {
    let mut children_nodes = Vec::new();
    if depth_left > 0 && matches!(entry.kind, DirEntryKind::Directory { .. }) {
        let subset: Vec<ListedRow> = indices
            .iter()
            .filter_map(|index| rows.get(*index))
            .map(|row| ListedRow {
                uri: row.uri.clone(),
                category: row.category,
                l0: row.l0.clone(),
                priority: row.priority,
                updated_at_ms: row.updated_at_ms,
            })
            .collect();
        for (child, below) in children(&entry.uri, &subset)? {
            children_nodes.push(build_tree(child, &subset, &below, depth_left - 1)?);
        }
    }
    Ok(TreeNode {
        entry,
        children: children_nodes,
    })
}

impl MemoryStore for SqliteMemoryStore {
    fn add(&self, tenant: &str, memory: NewMemory) -> Result<AddOutcome, MemoryError> {
        validate_tenant(tenant)?;
        validate_new(&memory)?;
        self.write(|tx, now| self.add_in(tx, tenant, memory, now))
    }

    fn add_many(
        &self,
        tenant: &str,
        memories: Vec<NewMemory>,
    ) -> Result<Vec<AddOutcome>, MemoryError> {
        validate_tenant(tenant)?;
        let in_batch = |index: usize, uri: &MemoryUri, error: MemoryError| MemoryError::InBatch {
            index,
            uri: uri.clone(),
            source: Box::new(error),
        };
        for (index, memory) in memories.iter().enumerate() {
            validate_new(memory).map_err(|error| in_batch(index, &memory.uri, error))?;
        }
        self.write(|tx, now| {
            let mut outcomes = Vec::with_capacity(memories.len());
            for (index, memory) in memories.into_iter().enumerate() {
                let uri = memory.uri.clone();
                let outcome = self
                    .add_in(tx, tenant, memory, now)
                    .map_err(|error| in_batch(index, &uri, error))?;
                outcomes.push(outcome);
            }
            Ok(outcomes)
        })
    }

    fn update(&self, tenant: &str, memory: NewMemory) -> Result<UpdateOutcome, MemoryError> {
        validate_tenant(tenant)?;
        validate_new(&memory)?;
        self.write(|tx, now| {
            let previous = live_memory(tx, tenant, &memory.uri)?;
            let l0 = memory
                .l0
                .clone()
                .unwrap_or_else(|| derive_abstract(&memory.content));
            let l1 = memory
                .l1
                .clone()
                .unwrap_or_else(|| derive_overview(&memory.content));
            let priority = memory.priority.unwrap_or(previous.priority);
            let own_source = previous.sources.first().cloned().unwrap_or_default();
            let unchanged = previous.l2 == memory.content
                && previous.l0 == l0
                && previous.l1 == l1
                && previous.priority == priority
                && (memory.source.is_empty() || memory.source == own_source)
                && memory
                    .created_at_ms
                    .is_none_or(|at| at == previous.created_at_ms)
                && memory.embedding.is_none();
            if unchanged {
                return Ok(UpdateOutcome::Unchanged(previous));
            }
            let dedup_root = dedup_root(&memory.uri)?;
            let hash = content_hash(&memory.content);
            // An update without a source keeps every source the entry had, merges included.
            let inherited = MemorySource {
                session_id: previous
                    .sources
                    .iter()
                    .find_map(|source| source.session_id.clone()),
                entry_ids: previous
                    .source_entry_ids()
                    .map(str::to_owned)
                    .collect::<Vec<_>>(),
            };
            let source = if memory.source.is_empty() {
                &inherited
            } else {
                &memory.source
            };
            let next_id: i64 = tx
                .query_row("SELECT COALESCE(MAX(id), 0) + 1 FROM memories", [], |row| {
                    row.get(0)
                })
                .map_err(MemoryError::storage("numbering a memory version"))?;
            tx.prepare_cached(
                "UPDATE memories SET superseded_by = ?1, superseded_at_ms = ?2 WHERE id = ?3",
            )
            .and_then(|mut statement| statement.execute(params![next_id, now, previous.id]))
            .map_err(MemoryError::storage("superseding a memory"))?;
            unindex(tx, tenant, previous.id, &previous.l2)?;
            let fingerprint = Fingerprint::of(&memory.content);
            let id = insert_version(
                tx,
                tenant,
                &memory,
                InsertDetails {
                    dedup_root: &dedup_root,
                    hash: &hash,
                    version: previous.version + 1,
                    supersedes: Some(previous.id),
                    priority,
                    source,
                    created_at_ms: memory.created_at_ms.unwrap_or(previous.created_at_ms),
                    now,
                    fingerprint: fingerprint.as_ref(),
                },
            )?;
            if id != next_id {
                return Err(MemoryError::Corrupt(format!(
                    "a new memory version got id {id}, expected {next_id}"
                )));
            }
            Ok(UpdateOutcome::Updated {
                memory: load_by_id(tx, id)?,
                previous: Box::new(load_by_id(tx, previous.id)?),
            })
        })
    }

    fn forget(&self, tenant: &str, uri: &MemoryUri) -> Result<Memory, MemoryError> {
        validate_tenant(tenant)?;
        uri.require_entry()?;
        self.write(|tx, now| {
            let live = live_memory(tx, tenant, uri)?;
            tx.prepare_cached("UPDATE memories SET forgotten_at_ms = ?1 WHERE id = ?2")
                .and_then(|mut statement| statement.execute(params![now, live.id]))
                .map_err(MemoryError::storage("forgetting a memory"))?;
            unindex(tx, tenant, live.id, &live.l2)?;
            load_by_id(tx, live.id)
        })
    }

    fn get(&self, tenant: &str, uri: &MemoryUri) -> Result<Memory, MemoryError> {
        validate_tenant(tenant)?;
        self.read(|tx| live_memory(tx, tenant, uri))
    }

    fn history(&self, tenant: &str, uri: &MemoryUri) -> Result<Vec<Memory>, MemoryError> {
        validate_tenant(tenant)?;
        self.read(|tx| {
            let ids: Vec<i64> = tx
                .prepare_cached(
                    "SELECT id FROM memories WHERE tenant = ?1 AND uri = ?2 ORDER BY version",
                )
                .and_then(|mut statement| {
                    statement
                        .query_map(params![tenant, uri.as_str()], |row| row.get(0))?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(MemoryError::storage("reading a memory's history"))?;
            if ids.is_empty() {
                return Err(MemoryError::NotFound {
                    tenant: tenant.to_owned(),
                    uri: uri.clone(),
                });
            }
            ids.into_iter().map(|id| load_by_id(tx, id)).collect()
        })
    }

    fn ls(&self, tenant: &str, dir: &MemoryUri) -> Result<Vec<DirEntry>, MemoryError> {
        validate_tenant(tenant)?;
        self.read(|tx| {
            let entry = if dir.is_entry_location() {
                live_id(tx, tenant, dir)?
            } else {
                None
            };
            if let Some(id) = entry {
                let memory = load_by_id(tx, id)?;
                return Ok(vec![DirEntry {
                    uri: memory.uri,
                    kind: DirEntryKind::Entry {
                        category: memory.category,
                        l0: memory.l0,
                        priority: memory.priority,
                        updated_at_ms: memory.updated_at_ms,
                    },
                }]);
            }
            let rows = listed_rows(tx, tenant, dir)?;
            Ok(children(dir, &rows)?
                .into_iter()
                .map(|(entry, _)| entry)
                .collect())
        })
    }

    fn tree(
        &self,
        tenant: &str,
        dir: &MemoryUri,
        max_depth: usize,
    ) -> Result<TreeNode, MemoryError> {
        validate_tenant(tenant)?;
        self.read(|tx| {
            if let Some(id) = live_id(tx, tenant, dir)? {
                let memory = load_by_id(tx, id)?;
                return Ok(TreeNode {
                    entry: DirEntry {
                        uri: memory.uri,
                        kind: DirEntryKind::Entry {
                            category: memory.category,
                            l0: memory.l0,
                            priority: memory.priority,
                            updated_at_ms: memory.updated_at_ms,
                        },
                    },
                    children: Vec::new(),
                });
            }
            let rows = listed_rows(tx, tenant, dir)?;
            let all: Vec<usize> = (0..rows.len()).collect();
            let root = DirEntry {
                uri: dir.clone(),
                kind: DirEntryKind::Directory {
                    entries: rows.len() as u64,
                },
            };
            build_tree(root, &rows, &all, max_depth)
        })
    }

    fn search(&self, tenant: &str, query: &SearchQuery) -> Result<Vec<SearchHit>, MemoryError> {
        validate_tenant(tenant)?;
        validate_query(query)?;
        let plan = QueryPlan::new(&query.text);
        if plan.is_empty() && query.vector.is_none() {
            return Err(MemoryError::InvalidInput {
                field: "query",
                reason: "the query has no words to search for and no vector".to_owned(),
            });
        }
        let depth = self.settings.candidates.max(query.limit);
        self.read(|tx| {
            let mut text: Vec<Ranked> = Vec::new();
            let mut dated: Vec<i64> = Vec::new();
            let (terms, whole_index) = self.informative_terms(tx, tenant, plan.terms())?;
            if let Some(fts_query) = QueryPlan::fts_query_of(&terms) {
                let scope = TextScope {
                    tenant,
                    whole_index,
                    filter: &query.filter,
                    depth,
                };
                text = self.text_ranking(tx, &scope, &fts_query, &[])?;
                if query.date_ranking && !plan.dates().is_empty() {
                    let windows: Vec<(i64, i64)> = plan
                        .dates()
                        .iter()
                        .map(|window| (window.start_ms, window.end_ms))
                        .collect();
                    dated = self
                        .text_ranking(tx, &scope, &fts_query, &windows)?
                        .into_iter()
                        .map(|ranked| ranked.id)
                        .collect();
                }
            }
            let by_directory = if self.settings.directory_weight > 0.0 {
                directory_ranking(&text)
            } else {
                Vec::new()
            };
            let vectors = match &query.vector {
                Some(vector) => self.vector_ranking(tx, tenant, vector, &query.filter, depth)?,
                None => Vec::new(),
            };
            let text_ids: Vec<i64> = text.iter().map(|ranked| ranked.id).collect();
            let vector_ids: Vec<i64> = vectors.iter().map(|(id, _)| *id).collect();
            let (scored_relevance, vector_rank_weight) = match self.settings.vector_fusion {
                VectorFusion::Score { share } if !vectors.is_empty() => {
                    (Some(relevance_by_score(&text, &vectors, share)), 0.0)
                }
                VectorFusion::Score { .. } => (None, 0.0),
                VectorFusion::Rank { weight } => (None, weight),
            };
            // Score fusion replaces the BM25 list by the relevance list and leaves the vector
            // list empty, so the lists keep their places (and `ranks` their meaning) either way.
            let fused = reciprocal_rank_fusion(
                &[
                    RankedList::new(scored_relevance.as_deref().unwrap_or(&text_ids)),
                    RankedList::new(&dated),
                    RankedList {
                        weight: vector_rank_weight,
                        items: if scored_relevance.is_some() {
                            &[]
                        } else {
                            &vector_ids
                        },
                    },
                    RankedList {
                        weight: self.settings.directory_weight,
                        items: &by_directory,
                    },
                ],
                RRF_K,
            );
            let positions = |ids: &[i64]| -> HashMap<i64, usize> {
                ids.iter()
                    .enumerate()
                    .rev()
                    .map(|(rank, id)| (*id, rank))
                    .collect()
            };
            let (text_positions, vector_positions) = if scored_relevance.is_some() {
                (positions(&text_ids), positions(&vector_ids))
            } else {
                (HashMap::new(), HashMap::new())
            };
            let top: Vec<_> = fused.into_iter().take(query.limit).collect();
            let ids: Vec<i64> = top.iter().map(|entry| entry.item).collect();
            let memories = load_many(tx, &ids)?;
            Ok(top
                .into_iter()
                .zip(memories)
                .map(|(entry, memory)| {
                    let rank = |list: usize| entry.ranks.get(list).copied().flatten();
                    let (text_rank, vector_rank) = if scored_relevance.is_some() {
                        (
                            text_positions.get(&entry.item).copied(),
                            vector_positions.get(&entry.item).copied(),
                        )
                    } else {
                        (rank(0), rank(2))
                    };
                    SearchHit {
                        memory,
                        score: entry.score,
                        text_rank,
                        bm25: text_rank
                            .and_then(|at| text.get(at))
                            .map(|ranked| ranked.bm25),
                        date_rank: rank(1),
                        vector_rank,
                        cosine: vector_rank.and_then(|at| vectors.get(at)).map(|(_, c)| *c),
                        directory_rank: rank(3),
                    }
                })
                .collect())
        })
    }

    fn set_embedding(
        &self,
        tenant: &str,
        uri: &MemoryUri,
        vector: &[f32],
    ) -> Result<(), MemoryError> {
        validate_tenant(tenant)?;
        validate_vector("embedding", vector)?;
        self.write(|tx, _| {
            let live = live_memory(tx, tenant, uri)?;
            tx.prepare_cached("UPDATE memories SET embedding = ?1 WHERE id = ?2")
                .and_then(|mut statement| statement.execute(params![vector_bytes(vector), live.id]))
                .map_err(MemoryError::storage("storing a vector"))?;
            Ok(())
        })
    }

    fn recent_writes(&self, tenant: &str, limit: usize) -> Result<Vec<MemoryWrite>, MemoryError> {
        validate_tenant(tenant)?;
        if limit == 0 || limit > MAX_SEARCH_LIMIT {
            return Err(MemoryError::InvalidInput {
                field: "limit",
                reason: format!("{limit}; it must be from 1 to {MAX_SEARCH_LIMIT}"),
            });
        }
        self.read(|tx| {
            // Three kinds of event, each read from where it is recorded: a version's row (added,
            // or updated when the version before it points here), a merge row, a forget mark.
            let sql = "SELECT at, action, id, requested, kind, similarity FROM ( \
                 SELECT m.updated_at_ms AS at, \
                   CASE WHEN p.id IS NULL THEN 'added' ELSE 'updated' END AS action, \
                   m.id AS id, NULL AS requested, NULL AS kind, NULL AS similarity, \
                   0 AS seq, 0 AS sub \
                 FROM memories m LEFT JOIN memories p \
                   ON p.id = m.supersedes AND p.superseded_by = m.id \
                 WHERE m.tenant = ?1 \
                 UNION ALL \
                 SELECT g.merged_at_ms, 'merged', g.memory_id, g.requested_uri, g.kind, \
                   g.similarity, 1, g.rowid \
                 FROM memory_merges g JOIN memories m ON m.id = g.memory_id \
                 WHERE m.tenant = ?1 \
                 UNION ALL \
                 SELECT m.forgotten_at_ms, 'forgotten', m.id, NULL, NULL, NULL, 2, 0 \
                 FROM memories m WHERE m.tenant = ?1 AND m.forgotten_at_ms IS NOT NULL \
               ) ORDER BY at DESC, id DESC, seq DESC, sub DESC LIMIT ?2";
            type Row = (
                i64,
                String,
                i64,
                Option<String>,
                Option<String>,
                Option<f64>,
            );
            let rows: Vec<Row> = tx
                .prepare_cached(sql)
                .and_then(|mut statement| {
                    statement
                        .query_map(params![tenant, limit as i64], |row| {
                            Ok((
                                row.get(0)?,
                                row.get(1)?,
                                row.get(2)?,
                                row.get(3)?,
                                row.get(4)?,
                                row.get(5)?,
                            ))
                        })?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(MemoryError::storage("reading recent memory writes"))?;
            let ids: Vec<i64> = rows.iter().map(|row| row.2).collect();
            let mut unique = ids.clone();
            unique.sort_unstable();
            unique.dedup();
            let memories: HashMap<i64, Memory> = load_many(tx, &unique)?
                .into_iter()
                .map(|memory| (memory.id, memory))
                .collect();
            let mut writes = Vec::with_capacity(rows.len());
            for (at_ms, action, id, requested, kind, similarity) in rows {
                let memory = memories.get(&id).ok_or_else(|| {
                    MemoryError::Corrupt(format!("a write names memory {id}, which is missing"))
                })?;
                let action = match action.as_str() {
                    "added" => WriteAction::Added,
                    "updated" => WriteAction::Updated,
                    "merged" => WriteAction::Merged,
                    _ => WriteAction::Forgotten,
                };
                let requested_uri = requested
                    .map(|text| {
                        MemoryUri::parse(&text).map_err(|error| {
                            MemoryError::Corrupt(format!("stored URI {text:?}: {error}"))
                        })
                    })
                    .transpose()?;
                let duplicate = match kind.as_deref() {
                    Some("exact") => Some(DuplicateKind::Exact),
                    Some(_) => Some(DuplicateKind::Near {
                        similarity: similarity.unwrap_or(0.0),
                    }),
                    None => None,
                };
                writes.push(MemoryWrite {
                    at_ms,
                    action,
                    uri: memory.uri.clone(),
                    requested_uri,
                    duplicate,
                    memory_id: id,
                    version: memory.version,
                    category: memory.category,
                    l0: memory.l0.clone(),
                });
            }
            Ok(writes)
        })
    }

    fn stats(&self, tenant: &str) -> Result<MemoryStats, MemoryError> {
        validate_tenant(tenant)?;
        self.read(|tx| {
            let counts = tx
                .query_row(
                    &format!(
                        "SELECT \
                         COALESCE(SUM({LIVE}), 0), \
                         COALESCE(SUM(superseded_by IS NOT NULL), 0), \
                         COALESCE(SUM(superseded_by IS NULL AND forgotten_at_ms IS NOT NULL), 0), \
                         COALESCE(SUM({LIVE} AND embedding IS NOT NULL), 0) \
                         FROM memories WHERE tenant = ?1"
                    ),
                    [tenant],
                    |row| {
                        Ok((
                            row.get::<_, i64>(0)?,
                            row.get::<_, i64>(1)?,
                            row.get::<_, i64>(2)?,
                            row.get::<_, i64>(3)?,
                        ))
                    },
                )
                .map_err(MemoryError::storage("counting memories"))?;
            let merged: i64 = tx
                .query_row(
                    "SELECT COUNT(*) FROM memory_merges g JOIN memories m ON m.id = g.memory_id \
                     WHERE m.tenant = ?1",
                    [tenant],
                    |row| row.get(0),
                )
                .map_err(MemoryError::storage("counting merges"))?;
            let count = |n: i64| u64::try_from(n).unwrap_or(0);
            Ok(MemoryStats {
                live: count(counts.0),
                superseded: count(counts.1),
                forgotten: count(counts.2),
                merged: count(merged),
                with_embedding: count(counts.3),
            })
        })
    }
}
