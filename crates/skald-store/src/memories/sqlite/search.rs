//! The search primitives of the SQLite memory store ([`SearchPrimitives`]): FTS5 candidates
//! with their bm25 scores, the index's document counts, vector candidates by cosine, and rows by
//! id. The ranking itself is [`crate::memories::search`]'s.
//!
//! Two caches live here, shared by the store's connections and dropped when the database
//! changes ([`CacheKey`]): the index's row counts (counting a common term's rows walks its whole
//! doclist, and the same names recur in query after query) and each tenant's live vectors (a
//! search compares them in memory instead of reading every blob again).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, params_from_iter};
use skald_core::memory::query::QueryPlan;

use super::SqliteMemoryStore;
use super::rows::{LIVE, load_many, prefix_end, tenant_token, vector_from_bytes};
use crate::memories::search::{
    SearchPrimitives, TextCandidate, TextRequest, VectorRequest, rank_by_cosine,
};
use crate::memories::{Memory, MemoryError, SearchFilter};
use crate::sqlite::pool::ConnectionId;

/// Which database state cached data belongs to.
///
/// SQLite's `data_version` tells a connection whether any other connection committed since it
/// last looked, but its values are the connection's own: two connections' values cannot be
/// compared, so they cannot key a cache the readers share. Instead each connection compares its
/// `data_version` with the one it saw at its previous search; when it changed (or the connection
/// is new), the connection bumps the store's epoch and uses a key of its own for this search
/// ([`CacheKey::Private`]), which no other search matches. When it did not change, the key is
/// the epoch and the store's commit count read *before* the search's snapshot began
/// ([`CacheKey::Shared`]).
///
/// Why that is safe: after a commit, every connection's first search sees its `data_version`
/// changed and goes private, bumping the epoch; so a shared key read after the commit is larger
/// than any shared key read before it, and two searches share a key only if no commit came
/// between their snapshots. The commit count covers the one case `data_version` misses: an
/// in-memory store reads on its writer, whose own commits do not change its `data_version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CacheKey {
    Shared { epoch: u64, writes: u64 },
    Private(u64),
}

/// A tenant's live vectors: version id and components.
pub(super) type TenantVectors = Arc<Vec<(i64, Vec<f32>)>>;

/// Live vectors per tenant, kept until the database changes.
pub(super) struct VectorCache {
    key: CacheKey,
    tenants: HashMap<String, TenantVectors>,
}

/// Vectors of at most this many tenants are kept; past it the cache starts over.
const MAX_CACHED_VECTOR_TENANTS: usize = 16;

/// Row counts of the full-text index that searches need, kept until the database changes:
/// counting a common term's rows walks its whole doclist, and the same names recur in query
/// after query.
pub(super) struct IndexCounts {
    /// The database state counted.
    key: CacheKey,
    /// Live (indexed) versions of every tenant: FTS5's row count, which its BM25 uses.
    indexed: i64,
    tenants: HashMap<String, i64>,
    /// Indexed rows holding each term (every tenant, as FTS5's IDF counts them).
    terms: HashMap<String, i64>,
}

/// At most this many term counts are kept; past it they are counted again.
const MAX_COUNTED_TERMS: usize = 4096;

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

/// The primitives of one search: the store's caches and the read transaction the search runs in.
pub(super) struct Snapshot<'a> {
    store: &'a SqliteMemoryStore,
    tx: &'a Connection,
    key: CacheKey,
}

impl<'a> Snapshot<'a> {
    /// The primitives of a search in the read transaction `tx` (begun, nothing read yet) on the
    /// connection `connection`.
    pub(super) fn new(
        store: &'a SqliteMemoryStore,
        tx: &'a Connection,
        connection: ConnectionId,
    ) -> Result<Snapshot<'a>, MemoryError> {
        // Read before the snapshot begins: a commit after these reads is then either in the
        // snapshot and seen below as a changed data_version, or not in it at all.
        let epoch = store.epoch.load(Ordering::SeqCst);
        let writes = store.writes.load(Ordering::SeqCst);
        // The pragma reads the database header, so it begins the transaction's snapshot.
        let data_version: i64 = tx
            .query_row("PRAGMA data_version", [], |row| row.get(0))
            .map_err(MemoryError::storage("reading the data version"))?;
        let unchanged = store
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(connection, data_version)
            == Some(data_version);
        let key = if unchanged {
            CacheKey::Shared { epoch, writes }
        } else {
            CacheKey::Private(store.epoch.fetch_add(1, Ordering::SeqCst))
        };
        Ok(Snapshot { store, tx, key })
    }

    /// Runs `work` on the index counts of the current database state, counting the live
    /// versions afresh when the state has changed since they were counted.
    fn with_counts<T>(
        &self,
        work: impl FnOnce(&mut IndexCounts) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let mut cache = self
            .store
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let counts = match cache.take() {
            Some(counts) if counts.key == self.key => counts,
            Some(_) | None => {
                let indexed: i64 = self
                    .tx
                    .prepare_cached(&format!("SELECT count(*) FROM memories WHERE {LIVE}"))
                    .and_then(|mut statement| statement.query_row([], |row| row.get(0)))
                    .map_err(MemoryError::storage("counting indexed memories"))?;
                IndexCounts {
                    key: self.key,
                    indexed,
                    tenants: HashMap::new(),
                    terms: HashMap::new(),
                }
            }
        };
        work(cache.insert(counts))
    }

    /// Whether the tenant holds every indexed row: then restricting a full-text match to it
    /// changes nothing but costs a walk of its whole doclist.
    fn tenant_holds_whole_index(&self, tenant: &str) -> Result<bool, MemoryError> {
        self.with_counts(|counts| {
            let tenant_rows = match counts.tenants.get(tenant) {
                Some(rows) => *rows,
                None => {
                    let rows: i64 = self
                        .tx
                        .prepare_cached(&format!(
                            "SELECT count(*) FROM memories WHERE tenant = ?1 AND {LIVE}"
                        ))
                        .and_then(|mut statement| statement.query_row([tenant], |row| row.get(0)))
                        .map_err(MemoryError::storage("counting a tenant's memories"))?;
                    counts.tenants.insert(tenant.to_owned(), rows);
                    rows
                }
            };
            Ok(tenant_rows == counts.indexed)
        })
    }

    /// The tenant's live vectors, read once per database state.
    fn tenant_vectors(&self, tenant: &str) -> Result<TenantVectors, MemoryError> {
        let mut cache = self
            .store
            .vectors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let cached = match cache.take() {
            Some(cached) if cached.key == self.key => cached,
            Some(_) | None => VectorCache {
                key: self.key,
                tenants: HashMap::new(),
            },
        };
        let cached = cache.insert(cached);
        if let Some(vectors) = cached.tenants.get(tenant) {
            return Ok(Arc::clone(vectors));
        }
        let mut statement = self
            .tx
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

impl SearchPrimitives for Snapshot<'_> {
    fn indexed_documents(&self) -> Result<i64, MemoryError> {
        self.with_counts(|counts| Ok(counts.indexed))
    }

    fn documents_with_term(&self, term: &str) -> Result<i64, MemoryError> {
        self.with_counts(|counts| {
            if let Some(rows) = counts.terms.get(term) {
                return Ok(*rows);
            }
            let Some(single) = QueryPlan::fts_query_of(&[term]) else {
                return Ok(0);
            };
            let rows: i64 = self
                .tx
                .prepare_cached("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?1")
                .and_then(|mut statement| statement.query_row([single], |row| row.get(0)))
                .map_err(MemoryError::storage("counting a term's rows"))?;
            if counts.terms.len() >= MAX_COUNTED_TERMS {
                counts.terms.clear();
            }
            counts.terms.insert(term.to_owned(), rows);
            Ok(rows)
        })
    }

    /// The BM25 ranking by FTS5 of the tenant's live entries.
    ///
    /// The tenant is part of the full-text query (its token column), so FTS5 only scores the
    /// tenant's rows. With no filter, the best `depth` rows are picked inside FTS5 and only they
    /// are joined with `memories`; a filter needs the join first, so it is applied to every
    /// match before the cut.
    fn text_candidates(
        &self,
        request: &TextRequest<'_>,
    ) -> Result<Vec<TextCandidate>, MemoryError> {
        let TextRequest {
            tenant,
            terms,
            filter,
            windows,
            weights,
            depth,
        } = *request;
        let Some(fts_query) = QueryPlan::fts_query_of(terms) else {
            return Ok(Vec::new());
        };
        let bm25 = format!(
            "bm25(memories_fts, 0.0, {}, {}, {}, {})",
            weights.path, weights.l0, weights.l1, weights.l2
        );
        let matched = if self.tenant_holds_whole_index(tenant)? {
            fts_query
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
        let mut statement = self
            .tx
            .prepare_cached(&sql)
            .map_err(MemoryError::storage("preparing a full-text search"))?;
        statement
            .query_map(params_from_iter(values), |row| {
                Ok(TextCandidate {
                    id: row.get(0)?,
                    bm25: row.get(1)?,
                    parent: row.get(2)?,
                })
            })
            .map_err(MemoryError::storage("running a full-text search"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(MemoryError::storage("running a full-text search"))
    }

    /// Every cached vector of the tenant compared with the query; a filter is checked in SQL
    /// (no vectors read).
    fn vector_candidates(
        &self,
        request: &VectorRequest<'_>,
    ) -> Result<Vec<(i64, f32)>, MemoryError> {
        let VectorRequest {
            tenant,
            vector,
            filter,
            depth,
        } = *request;
        let vectors = self.tenant_vectors(tenant)?;
        let allowed: Option<HashSet<i64>> = if *filter == SearchFilter::default() {
            None
        } else {
            let mut values: Vec<SqlValue> = vec![SqlValue::Text(tenant.to_owned())];
            let conditions = filter_sql(filter, &mut values);
            let sql = format!(
                "SELECT m.id FROM memories m WHERE m.tenant = ? AND m.superseded_by IS NULL \
                 AND m.forgotten_at_ms IS NULL AND m.embedding IS NOT NULL{conditions}"
            );
            let mut statement = self
                .tx
                .prepare_cached(&sql)
                .map_err(MemoryError::storage("preparing a vector search"))?;
            let ids = statement
                .query_map(params_from_iter(values), |row| row.get::<_, i64>(0))
                .map_err(MemoryError::storage("running a vector search"))?
                .collect::<Result<HashSet<_>, _>>()
                .map_err(MemoryError::storage("running a vector search"))?;
            Some(ids)
        };
        rank_by_cosine(vectors.iter(), allowed.as_ref(), vector, depth)
    }

    fn load(&self, ids: &[i64]) -> Result<Vec<Memory>, MemoryError> {
        load_many(self.tx, ids)
    }

    fn priorities(&self, ids: &[i64]) -> Result<HashMap<i64, u8>, MemoryError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let placeholders = vec!["?"; ids.len()].join(", ");
        let mut statement = self
            .tx
            .prepare_cached(&format!(
                "SELECT id, priority FROM memories WHERE id IN ({placeholders})"
            ))
            .map_err(MemoryError::storage("reading priorities"))?;
        let rows = statement
            .query_map(params_from_iter(ids), |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
            })
            .map_err(MemoryError::storage("reading priorities"))?;
        let mut priorities = HashMap::with_capacity(ids.len());
        for row in rows {
            let (id, priority) = row.map_err(MemoryError::storage("reading priorities"))?;
            let priority = u8::try_from(priority).map_err(|_| {
                MemoryError::Corrupt(format!("memory {id} has priority {priority}"))
            })?;
            priorities.insert(id, priority);
        }
        Ok(priorities)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::memories::{MemoryStore, NewMemory};
    use crate::sqlite::pool::open_reader;
    use skald_core::memory::uri::MemoryUri;

    /// A tenant name of the tests, parsed (it is well formed).
    fn tenant_named(name: &str) -> skald_core::ids::Tenant {
        skald_core::ids::Tenant::parse(name).unwrap()
    }

    fn add(store: &SqliteMemoryStore, name: &str) {
        let uri = MemoryUri::parse(&format!("viking://resources/{name}.md")).unwrap();
        store
            .add(
                &tenant_named("acme"),
                NewMemory::new(uri, format!("notes about {name}")),
            )
            .unwrap();
    }

    /// What a search on `conn` (as reader `slot`) counts, and with which cache key.
    fn indexed_on(
        store: &SqliteMemoryStore,
        conn: &mut Connection,
        slot: usize,
    ) -> (i64, CacheKey) {
        let tx = conn.transaction().unwrap();
        let snapshot = Snapshot::new(store, &tx, ConnectionId::reader(slot)).unwrap();
        (snapshot.indexed_documents().unwrap(), snapshot.key)
    }

    #[test]
    fn no_connection_reuses_counts_from_before_a_commit_by_another_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite3");
        let store = SqliteMemoryStore::open(&path).unwrap();
        // Another process on the same file: its commits move no counter of `store`.
        let other = SqliteMemoryStore::open(&path).unwrap();
        add(&store, "kiln");
        let mut a = open_reader(&path).unwrap();
        let mut b = open_reader(&path).unwrap();

        let (count, key) = indexed_on(&store, &mut a, 0);
        assert_eq!(count, 1);
        assert!(
            matches!(key, CacheKey::Private(_)),
            "a new connection shares nothing"
        );
        let (count, key) = indexed_on(&store, &mut a, 0);
        assert_eq!(count, 1);
        let CacheKey::Shared { epoch, .. } = key else {
            panic!("an unchanged connection shares the cache: {key:?}");
        };
        let (_, key) = indexed_on(&store, &mut b, 1);
        assert!(matches!(key, CacheKey::Private(_)));

        add(&other, "glaze");
        // Both connections see the commit: each goes private once, then shares a newer key.
        for (conn, slot) in [(&mut a, 0), (&mut b, 1)] {
            let (count, key) = indexed_on(&store, conn, slot);
            assert_eq!(count, 2, "connection {slot} counted the old state");
            assert!(matches!(key, CacheKey::Private(_)));
        }
        for (conn, slot) in [(&mut a, 0), (&mut b, 1)] {
            let (count, key) = indexed_on(&store, conn, slot);
            assert_eq!(count, 2, "connection {slot} reused the old counts");
            assert!(
                matches!(key, CacheKey::Shared { epoch: newer, .. } if newer > epoch),
                "{key:?}"
            );
        }
    }
}
