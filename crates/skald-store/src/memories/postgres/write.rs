//! The write path of the PostgreSQL memory store, as the SQLite store's (`sqlite/write.rs`):
//! adding (with the duplicate lookups [`crate::memories::dedup`] asks for), updating,
//! forgetting, storing vectors, and the indexes a version is written to (`memory_terms` with
//! `memory_index_totals`, LSH bands). Each function runs inside the write transaction its caller
//! opened, which holds the tenant's `memory_tenants` row lock.

use std::cell::RefCell;

use skald_core::memory::dedup::{Fingerprint, content_hash};
use skald_core::memory::levels::{derive_abstract, derive_overview};
use skald_core::memory::uri::MemoryUri;

use super::fts::{self, encode_positions};
use super::rows::{LIVE, live_id, live_memory, load_by_id};
use crate::memories::dedup::{self, DuplicatePrimitives, MAX_NEAR_CANDIDATES, Placement};
use crate::memories::rows::{prefix_end, source_json, tenant_token};
use crate::memories::{
    AddOutcome, DEFAULT_PRIORITY, DuplicateKind, Memory, MemoryError, MemorySource, Merge,
    NewMemory, UpdateOutcome,
};
use crate::postgres::{Conn, fail};

fn failed(action: &'static str) -> impl FnOnce(crate::BackendError) -> MemoryError {
    fail::<MemoryError>(action)
}

struct Duplicates<'a, 'c> {
    conn: RefCell<&'a mut &'c mut Conn>,
}

impl DuplicatePrimitives for Duplicates<'_, '_> {
    fn exact_duplicate(
        &self,
        tenant: &str,
        dedup_root: &str,
        content_hash: &str,
    ) -> Result<Option<i64>, MemoryError> {
        Ok(self
            .conn
            .borrow_mut()
            .query_opt(
                &format!(
                    "SELECT id FROM memories WHERE tenant = $1 AND dedup_root = $2 \
                     AND content_hash = $3 AND {LIVE} ORDER BY id LIMIT 1"
                ),
                &[&tenant, &dedup_root, &content_hash],
            )
            .map_err(failed("looking for an exact duplicate"))?
            .map(|row| row.get(0)))
    }

    fn live_id(&self, tenant: &str, uri: &MemoryUri) -> Result<Option<i64>, MemoryError> {
        live_id(&mut self.conn.borrow_mut(), tenant, uri)
    }

    fn near_candidates(
        &self,
        tenant: &str,
        bands: &[i64],
    ) -> Result<Vec<(i64, String)>, MemoryError> {
        let limit = i64::try_from(MAX_NEAR_CANDIDATES).unwrap_or(i64::MAX);
        Ok(self
            .conn
            .borrow_mut()
            .query(
                &format!(
                    "SELECT m.id, m.l2 FROM (SELECT DISTINCT memory_id FROM memory_bands \
                     WHERE tenant = $1 AND band = ANY($2) ORDER BY memory_id LIMIT $3) b \
                     JOIN memories m ON m.id = b.memory_id WHERE {LIVE} ORDER BY m.id"
                ),
                &[&tenant, &bands, &limit],
            )
            .map_err(failed("looking for near duplicates"))?
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect())
    }
}

/// Adds `memory`, or merges it into the live duplicate [`dedup::place`] finds.
pub(super) fn add(
    mut conn: &mut Conn,
    tenant: &str,
    memory: NewMemory,
    now: i64,
    near_duplicate_threshold: Option<f64>,
) -> Result<AddOutcome, MemoryError> {
    let placement = dedup::place(
        &Duplicates {
            conn: RefCell::new(&mut conn),
        },
        tenant,
        &memory,
        near_duplicate_threshold,
    )?;
    let (dedup_root, hash, fingerprint) = match placement {
        Placement::Duplicate { id, kind } => {
            record_merge(conn, id, now, kind, &memory)?;
            return Ok(AddOutcome::Merged(Merge {
                requested_uri: memory.uri,
                into: load_by_id(conn, id)?,
                kind,
            }));
        }
        Placement::New {
            dedup_root,
            content_hash,
            fingerprint,
        } => (dedup_root, content_hash, fingerprint),
    };
    check_path_conflicts(conn, tenant, &memory.uri)?;
    let previous = latest_version(conn, tenant, &memory.uri)?;
    let id = insert_version(
        conn,
        tenant,
        &memory,
        InsertDetails {
            id: None,
            dedup_root: &dedup_root,
            hash: &hash,
            version: previous.as_ref().map_or(1, |(_, version)| version + 1),
            supersedes: previous.as_ref().map(|(id, _)| *id),
            priority: memory.priority.unwrap_or(DEFAULT_PRIORITY),
            source: &memory.source,
            created_at_ms: memory.created_at_ms.unwrap_or(now),
            now,
            fingerprint: fingerprint.as_deref(),
        },
    )?;
    Ok(AddOutcome::Added(load_by_id(conn, id)?))
}

/// Writes `memory` as the next version of the live entry at its URI, superseding that one.
pub(super) fn update(
    conn: &mut Conn,
    tenant: &str,
    memory: &NewMemory,
    now: i64,
) -> Result<UpdateOutcome, MemoryError> {
    let previous = live_memory(conn, tenant, &memory.uri)?;
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
    let dedup_root = dedup::dedup_root(&memory.uri)?;
    let hash = content_hash(&memory.content);
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
    // The new version's id first: the old one names it as it stops being live, before the new
    // one takes the URI's live slot.
    let next_id: i64 = conn
        .query_one(
            "SELECT nextval(pg_get_serial_sequence('memories', 'id'))",
            &[],
        )
        .map_err(failed("numbering a memory version"))?
        .get(0);
    conn.execute(
        "UPDATE memories SET superseded_by = $1, superseded_at_ms = $2 WHERE id = $3",
        &[&next_id, &now, &previous.id],
    )
    .map_err(failed("superseding a memory"))?;
    unindex(conn, tenant, previous.id, &previous.l2)?;
    let fingerprint = Fingerprint::of(&memory.content);
    let id = insert_version(
        conn,
        tenant,
        memory,
        InsertDetails {
            id: Some(next_id),
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
    Ok(UpdateOutcome::Updated {
        memory: load_by_id(conn, id)?,
        previous: Box::new(load_by_id(conn, previous.id)?),
    })
}

/// Marks the live entry at `uri` forgotten and drops its search data.
pub(super) fn forget(
    conn: &mut Conn,
    tenant: &str,
    uri: &MemoryUri,
    now: i64,
) -> Result<Memory, MemoryError> {
    let live = live_memory(conn, tenant, uri)?;
    conn.execute(
        "UPDATE memories SET forgotten_at_ms = $1 WHERE id = $2",
        &[&now, &live.id],
    )
    .map_err(failed("forgetting a memory"))?;
    unindex(conn, tenant, live.id, &live.l2)?;
    load_by_id(conn, live.id)
}

/// Stores the vector of the live entry at `uri`.
pub(super) fn set_embedding(
    conn: &mut Conn,
    tenant: &str,
    uri: &MemoryUri,
    vector: &[f32],
) -> Result<(), MemoryError> {
    let live = live_memory(conn, tenant, uri)?;
    conn.execute(
        "UPDATE memories SET embedding = $1 WHERE id = $2",
        &[&vector, &live.id],
    )
    .map_err(failed("storing a vector"))?;
    Ok(())
}

struct InsertDetails<'a> {
    /// The id to take (an update numbered it already); `None`: the next of the sequence.
    id: Option<i64>,
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

/// The words of a URI below the fixed layout, for the `path` column (as the SQLite store).
fn index_path(uri: &MemoryUri) -> String {
    uri.segments()
        .skip(1)
        .filter(|segment| !matches!(*segment, "memories" | "skills" | "tools"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn latest_version(
    conn: &mut Conn,
    tenant: &str,
    uri: &MemoryUri,
) -> Result<Option<(i64, u32)>, MemoryError> {
    conn.query_opt(
        "SELECT id, version FROM memories WHERE tenant = $1 AND uri = $2 \
         ORDER BY version DESC LIMIT 1",
        &[&tenant, &uri.as_str()],
    )
    .map_err(failed("looking up a memory's versions"))?
    .map(|row| {
        let (id, version): (i64, i64) = (row.get(0), row.get(1));
        u32::try_from(version)
            .map(|version| (id, version))
            .map_err(|_| MemoryError::Corrupt(format!("memory {id} has version {version}")))
    })
    .transpose()
}

fn record_merge(
    conn: &mut Conn,
    id: i64,
    now: i64,
    kind: DuplicateKind,
    memory: &NewMemory,
) -> Result<(), MemoryError> {
    let (kind_name, similarity) = match kind {
        DuplicateKind::Exact => ("exact", 1.0),
        DuplicateKind::Near { similarity } => ("near", similarity),
    };
    conn.execute(
        "INSERT INTO memory_merges (memory_id, merged_at_ms, kind, similarity, requested_uri, \
         source) VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &id,
            &now,
            &kind_name,
            &similarity,
            &memory.uri.as_str(),
            &source_json(&memory.source),
        ],
    )
    .map_err(failed("recording a merge"))?;
    Ok(())
}

/// Refuses an entry inside another entry, or above existing ones.
fn check_path_conflicts(conn: &mut Conn, tenant: &str, uri: &MemoryUri) -> Result<(), MemoryError> {
    let conflict = |existing: String| -> MemoryError {
        match MemoryUri::parse(&existing) {
            Ok(existing) => MemoryError::PathConflict {
                uri: uri.clone(),
                existing,
            },
            Err(error) => MemoryError::Corrupt(format!("stored URI {existing:?}: {error}")),
        }
    };
    let ancestors: Vec<String> = uri
        .ancestors()
        .iter()
        .map(|ancestor| ancestor.as_str().to_owned())
        .collect();
    if let Some(row) = conn
        .query_opt(
            &format!(
                "SELECT uri FROM memories WHERE tenant = $1 AND uri = ANY($2) AND {LIVE} LIMIT 1"
            ),
            &[&tenant, &ancestors],
        )
        .map_err(failed("checking the path"))?
    {
        return Err(conflict(row.get(0)));
    }
    let prefix = uri.descendant_prefix();
    match conn
        .query_opt(
            &format!(
                "SELECT uri FROM memories WHERE tenant = $1 AND uri >= $2 AND uri < $3 \
                 AND {LIVE} LIMIT 1"
            ),
            &[&tenant, &prefix, &prefix_end(&prefix)],
        )
        .map_err(failed("checking the path"))?
    {
        Some(row) => Err(conflict(row.get(0))),
        None => Ok(()),
    }
}

fn insert_version(
    conn: &mut Conn,
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
    let postings = postings_of(
        tenant,
        &memory.uri,
        memory.l0.is_some().then_some(l0.as_str()),
        memory.l1.is_some().then_some(l1.as_str()),
        &memory.content,
    )?;
    let version = i64::from(details.version);
    let priority = i64::from(details.priority);
    let row = conn
        .query_one(
            "INSERT INTO memories (id, tenant, uri, parent, version, category, dedup_root, l0, \
             l1, l2, l0_given, l1_given, content_hash, priority, source, created_at_ms, \
             updated_at_ms, supersedes, embedding, fts_tokens) OVERRIDING SYSTEM VALUE \
             VALUES (COALESCE($1, nextval(pg_get_serial_sequence('memories', 'id'))), $2, $3, \
             $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) \
             RETURNING id",
            &[
                &details.id,
                &tenant,
                &memory.uri.as_str(),
                &parent,
                &version,
                &category.name(),
                &details.dedup_root,
                &l0,
                &l1,
                &memory.content,
                &memory.l0.is_some(),
                &memory.l1.is_some(),
                &details.hash,
                &priority,
                &source_json(details.source),
                &details.created_at_ms,
                &details.now,
                &details.supersedes,
                &memory.embedding,
                &postings.tokens,
            ],
        )
        .map_err(failed("writing a memory"))?;
    let id: i64 = row.get(0);
    index(conn, tenant, id, &postings)?;
    if let Some(fingerprint) = details.fingerprint {
        let bands = fingerprint.bands_in(details.dedup_root).to_vec();
        conn.execute(
            "INSERT INTO memory_bands (tenant, band, memory_id) \
             SELECT $1, band, $3 FROM UNNEST($2::BIGINT[]) AS band ON CONFLICT DO NOTHING",
            &[&tenant, &bands, &id],
        )
        .map_err(failed("indexing a memory's bands"))?;
    }
    Ok(id)
}

/// What FTS5 would index of a version: its tenant token, path words, the L0 and L1 its writer
/// gave (derived levels repeat L2's words, which would count them twice) and L2.
pub(crate) fn postings_of(
    tenant: &str,
    uri: &MemoryUri,
    given_l0: Option<&str>,
    given_l1: Option<&str>,
    l2: &str,
) -> Result<fts::Postings, MemoryError> {
    fts::postings([
        &tenant_token(tenant),
        &index_path(uri),
        given_l0.unwrap_or_default(),
        given_l1.unwrap_or_default(),
        l2,
    ])
}

/// Writes a live version's postings and counts it in the index totals.
pub(crate) fn index(
    conn: &mut Conn,
    tenant: &str,
    id: i64,
    postings: &fts::Postings,
) -> Result<(), MemoryError> {
    let mut terms = Vec::with_capacity(postings.terms.len());
    let mut cols = Vec::with_capacity(postings.terms.len());
    let mut positions = Vec::with_capacity(postings.terms.len());
    for ((term, col), offsets) in &postings.terms {
        terms.push(term.as_str());
        cols.push(*col);
        positions.push(encode_positions(offsets));
    }
    conn.execute(
        "INSERT INTO memory_terms (memory_id, tenant, term, col, positions) \
         SELECT $1, $2, * FROM UNNEST($3::TEXT[], $4::SMALLINT[], $5::TEXT[])",
        &[&id, &tenant, &terms, &cols, &positions],
    )
    .map_err(failed("indexing a memory"))?;
    conn.execute(
        "UPDATE memory_index_totals SET documents = documents + 1, tokens = tokens + $1, \
         live = live + 1",
        &[&postings.tokens],
    )
    .map_err(failed("indexing a memory"))?;
    Ok(())
}

/// Drops the search data of a version that stops being live (the row itself stays).
fn unindex(conn: &mut Conn, tenant: &str, id: i64, l2: &str) -> Result<(), MemoryError> {
    conn.execute("DELETE FROM memory_terms WHERE memory_id = $1", &[&id])
        .map_err(failed("unindexing a memory"))?;
    // Only the live count: FTS5's own row and token totals keep a removed row (its
    // contentless-delete index cannot subtract what it no longer holds), and its BM25 reads them.
    conn.execute("UPDATE memory_index_totals SET live = live - 1", &[])
        .map_err(failed("unindexing a memory"))?;
    if let Some(fingerprint) = Fingerprint::of(l2) {
        let dedup_root: String = conn
            .query_one("SELECT dedup_root FROM memories WHERE id = $1", &[&id])
            .map_err(failed("unindexing a memory"))?
            .get(0);
        let bands = fingerprint.bands_in(&dedup_root).to_vec();
        conn.execute(
            "DELETE FROM memory_bands WHERE tenant = $1 AND band = ANY($2) AND memory_id = $3",
            &[&tenant, &bands, &id],
        )
        .map_err(failed("unindexing a memory"))?;
    }
    Ok(())
}
