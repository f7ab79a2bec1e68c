//! The search primitives of the PostgreSQL memory store ([`SearchPrimitives`]), inside one
//! `REPEATABLE READ` snapshot: FTS5's document counts and BM25 over `memory_terms`
//! ([`super::fts`]), vector candidates by cosine over the tenant's vectors, rows by id. The
//! ranking itself is [`crate::memories::search`]'s, as for SQLite.
//!
//! A tenant's live vectors are cached per server, keyed by the tenant's `memory_tenants.writes`
//! counter as the snapshot reads it: every memory write of the tenant (from any server) bumps
//! it under the row's lock, so a cached copy is used only for the very state it was read from.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use tokio_postgres::types::ToSql;

use super::fts::{self, COLUMNS, decode_positions};
use super::rows::{LIVE, load_many};
use crate::memories::rows::prefix_end;
use crate::memories::search::{
    SearchPrimitives, TextCandidate, TextRequest, VectorRequest, rank_by_cosine,
};
use crate::memories::{Memory, MemoryError, SearchFilter};
use crate::postgres::{Conn, fail};

fn failed(action: &'static str) -> impl FnOnce(crate::BackendError) -> MemoryError {
    fail::<MemoryError>(action)
}

/// A tenant's live vectors: version id and components.
type TenantVectors = Arc<Vec<(i64, Vec<f32>)>>;

/// Vectors of at most this many tenants are kept; past it the cache starts over.
const MAX_CACHED_VECTOR_TENANTS: usize = 16;

/// Each tenant's live vectors, with the `writes` counter they were read at.
#[derive(Default)]
pub(super) struct VectorCache {
    tenants: Mutex<HashMap<String, (i64, TenantVectors)>>,
}

/// The primitives of one search.
pub(super) struct Snapshot<'a, 'c> {
    conn: RefCell<&'c mut Conn>,
    vectors: &'a VectorCache,
    totals: RefCell<Option<Totals>>,
    term_documents: RefCell<HashMap<String, i64>>,
    phrases: RefCell<HashMap<String, Vec<String>>>,
}

/// The index's counts in this snapshot.
#[derive(Debug, Clone, Copy)]
struct Totals {
    /// Rows FTS5's BM25 counts (every version ever indexed; see `postgres::schema`).
    bm25_rows: i64,
    /// Tokens of those rows.
    bm25_tokens: i64,
    /// Live versions of every tenant: what the ranking policy counts as indexed documents.
    live: i64,
}

/// Parameters built alongside SQL text.
struct Sql {
    text: String,
    values: Vec<Box<dyn ToSql + Sync>>,
}

impl Sql {
    fn push(&mut self, value: impl ToSql + Sync + 'static) -> String {
        self.values.push(Box::new(value));
        format!("${}", self.values.len())
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.values.iter().map(|value| value.as_ref()).collect()
    }
}

/// The conditions (on alias `m`) of a filter, as the SQLite store's `filter_sql`.
fn filter_sql(filter: &SearchFilter, sql: &mut Sql) -> String {
    let mut conditions = String::new();
    if !filter.categories.is_empty() {
        let names: Vec<String> = filter
            .categories
            .iter()
            .map(|category| category.name().to_owned())
            .collect();
        let at = sql.push(names);
        conditions.push_str(&format!(" AND m.category = ANY({at})"));
    }
    if let Some(under) = &filter.under {
        let prefix = under.descendant_prefix();
        let end = prefix_end(&prefix);
        let (a, b, c) = (
            sql.push(under.as_str().to_owned()),
            sql.push(prefix),
            sql.push(end),
        );
        conditions.push_str(&format!(
            " AND (m.uri = {a} OR (m.uri >= {b} AND m.uri < {c}))"
        ));
    }
    if let Some(from) = filter.created_from_ms {
        let at = sql.push(from);
        conditions.push_str(&format!(" AND m.created_at_ms >= {at}"));
    }
    if let Some(until) = filter.created_until_ms {
        let at = sql.push(until);
        conditions.push_str(&format!(" AND m.created_at_ms < {at}"));
    }
    conditions
}

/// A candidate document's postings for the query's tokens.
struct Doc {
    tokens: i64,
    parent: String,
    offsets: HashMap<(String, i16), Vec<i32>>,
}

impl Doc {
    fn frequencies(&self, phrase: &[String]) -> [usize; COLUMNS] {
        let lookup = |token: &str, col: i16| -> Option<&[i32]> {
            self.offsets
                .get(&(token.to_owned(), col))
                .map(Vec::as_slice)
        };
        let mut counts = [0; COLUMNS];
        for (col, count) in (0_i16..).zip(counts.iter_mut()) {
            *count = fts::occurrences(phrase, col, &lookup);
        }
        counts
    }
}

impl<'a, 'c> Snapshot<'a, 'c> {
    pub(super) fn new(conn: &'c mut Conn, vectors: &'a VectorCache) -> Snapshot<'a, 'c> {
        Snapshot {
            conn: RefCell::new(conn),
            vectors,
            totals: RefCell::new(None),
            term_documents: RefCell::new(HashMap::new()),
            phrases: RefCell::new(HashMap::new()),
        }
    }

    /// The index's counts, read once per search.
    fn totals(&self) -> Result<Totals, MemoryError> {
        if let Some(totals) = *self.totals.borrow() {
            return Ok(totals);
        }
        let row = self
            .conn
            .borrow_mut()
            .query_one(
                "SELECT documents, tokens, live FROM memory_index_totals",
                &[],
            )
            .map_err(failed("reading the index totals"))?;
        let totals = Totals {
            bm25_rows: row.get(0),
            bm25_tokens: row.get(1),
            live: row.get(2),
        };
        *self.totals.borrow_mut() = Some(totals);
        Ok(totals)
    }

    fn phrase(&self, term: &str) -> Result<Vec<String>, MemoryError> {
        if let Some(phrase) = self.phrases.borrow().get(term) {
            return Ok(phrase.clone());
        }
        let phrase = fts::phrase(term)?;
        self.phrases
            .borrow_mut()
            .insert(term.to_owned(), phrase.clone());
        Ok(phrase)
    }

    /// Documents (of every tenant) holding `phrase`.
    fn count_documents(&self, phrase: &[String]) -> Result<i64, MemoryError> {
        let Some((first, rest)) = phrase.split_first() else {
            return Ok(0);
        };
        let mut conn = self.conn.borrow_mut();
        if rest.is_empty() {
            return Ok(conn
                .query_one(
                    "SELECT COUNT(DISTINCT memory_id) FROM memory_terms WHERE term = $1",
                    &[first],
                )
                .map_err(failed("counting a term's rows"))?
                .get(0));
        }
        let rows = conn
            .query(
                "SELECT memory_id, term, col, positions FROM memory_terms WHERE term = ANY($1) \
                 AND memory_id IN (SELECT memory_id FROM memory_terms WHERE term = $2)",
                &[&phrase, first],
            )
            .map_err(failed("counting a phrase's rows"))?;
        drop(conn);
        let docs = group(rows.iter().map(|row| {
            (
                row.get::<_, i64>(0),
                row.get::<_, String>(1),
                row.get::<_, i16>(2),
                row.get::<_, String>(3),
                0,
                String::new(),
            )
        }))?;
        Ok(docs
            .values()
            .filter(|doc| doc.frequencies(phrase).iter().any(|count| *count > 0))
            .count() as i64)
    }
}

/// Candidate rows grouped by document.
fn group(
    rows: impl Iterator<Item = (i64, String, i16, String, i64, String)>,
) -> Result<HashMap<i64, Doc>, MemoryError> {
    let mut docs: HashMap<i64, Doc> = HashMap::new();
    for (id, term, col, positions, tokens, parent) in rows {
        let doc = docs.entry(id).or_insert_with(|| Doc {
            tokens,
            parent,
            offsets: HashMap::new(),
        });
        doc.offsets
            .insert((term, col), decode_positions(&positions)?);
    }
    Ok(docs)
}

impl SearchPrimitives for Snapshot<'_, '_> {
    fn indexed_documents(&self) -> Result<i64, MemoryError> {
        Ok(self.totals()?.live)
    }

    fn documents_with_term(&self, term: &str) -> Result<i64, MemoryError> {
        if let Some(count) = self.term_documents.borrow().get(term) {
            return Ok(*count);
        }
        let phrase = self.phrase(term)?;
        let count = self.count_documents(&phrase)?;
        self.term_documents
            .borrow_mut()
            .insert(term.to_owned(), count);
        Ok(count)
    }

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
        let phrases: Vec<Vec<String>> = terms
            .iter()
            .map(|term| self.phrase(term))
            .collect::<Result<_, _>>()?;
        let tokens: Vec<String> = phrases
            .iter()
            .flatten()
            .cloned()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql {
            text: String::new(),
            values: Vec::new(),
        };
        let tenant_at = sql.push(tenant.to_owned());
        let tokens_at = sql.push(tokens);
        let mut conditions = filter_sql(filter, &mut sql);
        if !windows.is_empty() {
            let mut any = Vec::new();
            for (start, end) in windows {
                let (a, b) = (sql.push(*start), sql.push(*end));
                any.push(format!(
                    "(m.created_at_ms >= {a} AND m.created_at_ms < {b})"
                ));
            }
            conditions.push_str(&format!(" AND ({})", any.join(" OR ")));
        }
        sql.text = format!(
            "SELECT t.memory_id, t.term, t.col, t.positions, m.fts_tokens, m.parent \
             FROM memory_terms t JOIN memories m ON m.id = t.memory_id \
             WHERE t.tenant = {tenant_at} AND t.term = ANY({tokens_at}){conditions}"
        );
        let rows = self
            .conn
            .borrow_mut()
            .query(&sql.text, &sql.params())
            .map_err(failed("running a full-text search"))?;
        let docs = group(rows.iter().map(|row| {
            (
                row.get(0),
                row.get(1),
                row.get(2),
                row.get(3),
                row.get(4),
                row.get(5),
            )
        }))?;
        if docs.is_empty() {
            return Ok(Vec::new());
        }
        let totals = self.totals()?;
        let avgdl = totals.bm25_tokens as f64 / totals.bm25_rows as f64;
        let idfs: Vec<f64> = terms
            .iter()
            .map(|term| Ok(fts::idf(totals.bm25_rows, self.documents_with_term(term)?)))
            .collect::<Result<_, MemoryError>>()?;
        let weights = [0.0, weights.path, weights.l0, weights.l1, weights.l2];
        let mut candidates: Vec<TextCandidate> = docs
            .into_iter()
            .filter_map(|(id, doc)| {
                let frequencies: Vec<[usize; COLUMNS]> = phrases
                    .iter()
                    .map(|phrase| doc.frequencies(phrase))
                    .collect();
                let matched = frequencies
                    .iter()
                    .any(|counts| counts.iter().any(|count| *count > 0));
                matched.then(|| TextCandidate {
                    id,
                    bm25: fts::bm25(&frequencies, &idfs, &weights, doc.tokens, avgdl),
                    parent: doc.parent,
                })
            })
            .collect();
        candidates.sort_by(|a, b| a.bm25.total_cmp(&b.bm25).then(a.id.cmp(&b.id)));
        candidates.truncate(depth);
        Ok(candidates)
    }

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
            let mut sql = Sql {
                text: String::new(),
                values: Vec::new(),
            };
            let tenant_at = sql.push(tenant.to_owned());
            let conditions = filter_sql(filter, &mut sql);
            sql.text = format!(
                "SELECT m.id FROM memories m WHERE m.tenant = {tenant_at} AND \
                 m.superseded_by IS NULL AND m.forgotten_at_ms IS NULL \
                 AND m.embedding IS NOT NULL{conditions}"
            );
            Some(
                self.conn
                    .borrow_mut()
                    .query(&sql.text, &sql.params())
                    .map_err(failed("running a vector search"))?
                    .iter()
                    .map(|row| row.get(0))
                    .collect(),
            )
        };
        rank_by_cosine(vectors.iter(), allowed.as_ref(), vector, depth)
    }

    fn load(&self, ids: &[i64]) -> Result<Vec<Memory>, MemoryError> {
        load_many(&mut self.conn.borrow_mut(), ids)
    }

    fn priorities(&self, ids: &[i64]) -> Result<HashMap<i64, u8>, MemoryError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let rows = self
            .conn
            .borrow_mut()
            .query(
                "SELECT id, priority FROM memories WHERE id = ANY($1)",
                &[&ids],
            )
            .map_err(fail::<MemoryError>("reading priorities"))?;
        let mut priorities = HashMap::with_capacity(ids.len());
        for row in rows {
            let corrupt = |error: tokio_postgres::Error| MemoryError::Corrupt(error.to_string());
            let id: i64 = row.try_get(0).map_err(corrupt)?;
            let priority: i64 = row.try_get(1).map_err(corrupt)?;
            let priority = u8::try_from(priority).map_err(|_| {
                MemoryError::Corrupt(format!("memory {id} has priority {priority}"))
            })?;
            priorities.insert(id, priority);
        }
        Ok(priorities)
    }
}

impl Snapshot<'_, '_> {
    /// The tenant's live vectors in this snapshot, from the cache when it holds this state.
    fn tenant_vectors(&self, tenant: &str) -> Result<TenantVectors, MemoryError> {
        let writes: i64 = self
            .conn
            .borrow_mut()
            .query_opt(
                "SELECT writes FROM memory_tenants WHERE tenant = $1",
                &[&tenant],
            )
            .map_err(failed("reading vectors"))?
            .map_or(0, |row| row.get(0));
        let cached = self
            .vectors
            .tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tenant)
            .filter(|(at, _)| *at == writes)
            .map(|(_, vectors)| Arc::clone(vectors));
        if let Some(vectors) = cached {
            return Ok(vectors);
        }
        let vectors: TenantVectors = Arc::new(
            self.conn
                .borrow_mut()
                .query(
                    &format!(
                        "SELECT id, embedding FROM memories WHERE tenant = $1 AND {LIVE} \
                         AND embedding IS NOT NULL ORDER BY id"
                    ),
                    &[&tenant],
                )
                .map_err(failed("reading vectors"))?
                .iter()
                .map(|row| (row.get(0), row.get(1)))
                .collect(),
        );
        let mut tenants = self
            .vectors
            .tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if tenants.len() >= MAX_CACHED_VECTOR_TENANTS {
            tenants.clear();
        }
        tenants.insert(tenant.to_owned(), (writes, Arc::clone(&vectors)));
        Ok(vectors)
    }
}
