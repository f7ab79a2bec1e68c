//! The write path of the SQLite memory store: adding (with the duplicate lookups the policy in
//! [`crate::memories::dedup`] asks for), updating, forgetting and storing vectors, and the
//! indexes a version is written to (FTS5, LSH bands). Each function runs inside the write
//! transaction its caller opened.

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use skald_core::memory::dedup::{Fingerprint, content_hash};
use skald_core::memory::levels::{derive_abstract, derive_overview};
use skald_core::memory::uri::MemoryUri;

use super::rows::{
    LIVE, live_id, live_memory, load_by_id, prefix_end, source_json, tenant_token, vector_bytes,
};
use crate::memories::dedup::{self, DuplicatePrimitives, MAX_NEAR_CANDIDATES, Placement};
use crate::memories::{
    AddOutcome, DEFAULT_PRIORITY, DuplicateKind, Memory, MemoryError, MemorySource, Merge,
    NewMemory, UpdateOutcome,
};

/// The duplicate lookups of [`dedup::place`], inside a write transaction.
struct Duplicates<'a> {
    tx: &'a Connection,
}

impl DuplicatePrimitives for Duplicates<'_> {
    fn exact_duplicate(
        &self,
        tenant: &str,
        dedup_root: &str,
        content_hash: &str,
    ) -> Result<Option<i64>, MemoryError> {
        self.tx
            .prepare_cached(&format!(
                "SELECT id FROM memories WHERE tenant = ?1 AND dedup_root = ?2 \
                 AND content_hash = ?3 AND {LIVE} ORDER BY id LIMIT 1"
            ))
            .and_then(|mut statement| {
                statement
                    .query_row(params![tenant, dedup_root, content_hash], |row| row.get(0))
                    .optional()
            })
            .map_err(MemoryError::storage("looking for an exact duplicate"))
    }

    fn live_id(&self, tenant: &str, uri: &MemoryUri) -> Result<Option<i64>, MemoryError> {
        live_id(self.tx, tenant, uri)
    }

    fn near_candidates(
        &self,
        tenant: &str,
        bands: &[i64],
    ) -> Result<Vec<(i64, String)>, MemoryError> {
        let placeholders = vec!["?"; bands.len()].join(", ");
        let mut statement = self
            .tx
            .prepare_cached(&format!(
                "SELECT DISTINCT memory_id FROM memory_bands WHERE tenant = ? AND band IN \
                 ({placeholders}) ORDER BY memory_id LIMIT {MAX_NEAR_CANDIDATES}"
            ))
            .map_err(MemoryError::storage("looking for near duplicates"))?;
        let mut values: Vec<SqlValue> = vec![SqlValue::Text(tenant.to_owned())];
        values.extend(bands.iter().map(|band| SqlValue::Integer(*band)));
        let ids = statement
            .query_map(params_from_iter(values), |row| row.get::<_, i64>(0))
            .map_err(MemoryError::storage("looking for near duplicates"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(MemoryError::storage("looking for near duplicates"))?;
        let mut content = self
            .tx
            .prepare_cached(&format!("SELECT l2 FROM memories WHERE id = ?1 AND {LIVE}"))
            .map_err(MemoryError::storage("reading a near-duplicate candidate"))?;
        let mut candidates = Vec::with_capacity(ids.len());
        for id in ids {
            let text: Option<String> = content
                .query_row([id], |row| row.get(0))
                .optional()
                .map_err(MemoryError::storage("reading a near-duplicate candidate"))?;
            if let Some(text) = text {
                candidates.push((id, text));
            }
        }
        Ok(candidates)
    }
}

/// Adds `memory`, or merges it into the live duplicate [`dedup::place`] finds.
pub(super) fn add(
    tx: &Connection,
    tenant: &str,
    memory: NewMemory,
    now: i64,
    near_duplicate_threshold: Option<f64>,
) -> Result<AddOutcome, MemoryError> {
    let (dedup_root, hash, fingerprint) = match dedup::place(
        &Duplicates { tx },
        tenant,
        &memory,
        near_duplicate_threshold,
    )? {
        Placement::Duplicate { id, kind } => {
            record_merge(tx, id, now, kind, &memory)?;
            return merged(tx, memory.uri, id, kind);
        }
        Placement::New {
            dedup_root,
            content_hash,
            fingerprint,
        } => (dedup_root, content_hash, fingerprint),
    };
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
            fingerprint: fingerprint.as_deref(),
        },
    )?;
    Ok(AddOutcome::Added(load_by_id(tx, id)?))
}

/// Writes `memory` as the next version of the live entry at its URI, superseding that one.
pub(super) fn update(
    tx: &Connection,
    tenant: &str,
    memory: &NewMemory,
    now: i64,
) -> Result<UpdateOutcome, MemoryError> {
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
    let dedup_root = dedup::dedup_root(&memory.uri)?;
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
        memory,
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
}

/// Marks the live entry at `uri` forgotten and drops its search data.
pub(super) fn forget(
    tx: &Connection,
    tenant: &str,
    uri: &MemoryUri,
    now: i64,
) -> Result<Memory, MemoryError> {
    let live = live_memory(tx, tenant, uri)?;
    tx.prepare_cached("UPDATE memories SET forgotten_at_ms = ?1 WHERE id = ?2")
        .and_then(|mut statement| statement.execute(params![now, live.id]))
        .map_err(MemoryError::storage("forgetting a memory"))?;
    unindex(tx, tenant, live.id, &live.l2)?;
    load_by_id(tx, live.id)
}

/// Stores the vector of the live entry at `uri`.
pub(super) fn set_embedding(
    tx: &Connection,
    tenant: &str,
    uri: &MemoryUri,
    vector: &[f32],
) -> Result<(), MemoryError> {
    let live = live_memory(tx, tenant, uri)?;
    tx.prepare_cached("UPDATE memories SET embedding = ?1 WHERE id = ?2")
        .and_then(|mut statement| statement.execute(params![vector_bytes(vector), live.id]))
        .map_err(MemoryError::storage("storing a vector"))?;
    Ok(())
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

/// The words of a URI below the fixed layout, for the `path` column: names of users, agents,
/// skills, tools, entities and files.
fn index_path(uri: &MemoryUri) -> String {
    uri.segments()
        .skip(1)
        .filter(|segment| !matches!(*segment, "memories" | "skills" | "tools"))
        .collect::<Vec<_>>()
        .join(" ")
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
