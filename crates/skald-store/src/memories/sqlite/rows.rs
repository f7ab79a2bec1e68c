//! Reading the SQLite memory store's rows: the column list, decoding a row into a [`Memory`],
//! loading versions by id with their merges' sources, the live entry at a URI, and the small
//! encodings shared by the write and read paths (sources as JSON, vectors as little-endian
//! bytes, the tenant's full-text token, URI prefix bounds).

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use serde_json::{Value, json};
use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use xxhash_rust::xxh3::xxh3_64;

use crate::memories::{Memory, MemoryError, MemorySource, MemoryStatus};

/// The condition of a live version, spelled exactly as the partial indexes are, so SQLite
/// uses them.
pub(super) const LIVE: &str = "superseded_by IS NULL AND forgotten_at_ms IS NULL";

/// The columns [`memory_from_row`] reads, in order.
pub(super) const COLUMNS: &str = "id, tenant, uri, version, category, l0, l1, l2, priority, source, \
                       created_at_ms, updated_at_ms, supersedes, superseded_by, \
                       superseded_at_ms, forgotten_at_ms, content_hash, length(embedding)";

pub(crate) fn source_json(source: &MemorySource) -> String {
    json!({"session_id": source.session_id, "entry_ids": source.entry_ids}).to_string()
}

pub(crate) fn source_from_json(text: &str) -> Result<MemorySource, MemoryError> {
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

pub(super) fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(super) fn vector_from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|chunk| {
            let mut word = [0_u8; 4];
            word.copy_from_slice(chunk);
            f32::from_le_bytes(word)
        })
        .collect()
}

pub(crate) fn status_of(
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
pub(super) fn memory_from_row(
    tx: &Connection,
    row: &rusqlite::Row<'_>,
) -> Result<Memory, MemoryError> {
    let mut memory = memory_from_row_alone(row)?;
    memory.sources.extend(merged_sources(tx, memory.id)?);
    Ok(memory)
}

/// A row of [`COLUMNS`], with its own source only.
pub(super) fn memory_from_row_alone(row: &rusqlite::Row<'_>) -> Result<Memory, MemoryError> {
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

pub(super) fn merged_sources(tx: &Connection, id: i64) -> Result<Vec<MemorySource>, MemoryError> {
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
pub(super) fn load_many(tx: &Connection, ids: &[i64]) -> Result<Vec<Memory>, MemoryError> {
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

pub(super) fn load_by_id(tx: &Connection, id: i64) -> Result<Memory, MemoryError> {
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

pub(super) fn live_id(
    tx: &Connection,
    tenant: &str,
    uri: &MemoryUri,
) -> Result<Option<i64>, MemoryError> {
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

/// The live entry at `uri`, or why there is none.
pub(super) fn live_memory(
    tx: &Connection,
    tenant: &str,
    uri: &MemoryUri,
) -> Result<Memory, MemoryError> {
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

/// The token that stands for a tenant in the full-text index: one word, whatever characters the
/// tenant name has, so a tenant's rows are a phrase query away.
pub(crate) fn tenant_token(tenant: &str) -> String {
    format!("t{:016x}", xxh3_64(tenant.as_bytes()))
}

/// The exclusive upper bound of the URIs starting with `prefix` (which ends with `/`).
pub(crate) fn prefix_end(prefix: &str) -> String {
    match prefix.strip_suffix('/') {
        Some(stem) => format!("{stem}0"),
        None => format!("{prefix}\u{10FFFF}"),
    }
}
