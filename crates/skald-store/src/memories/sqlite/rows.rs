//! Reading the SQLite memory store's rows: the column list, reading a row's columns (the
//! checking and the making of a [`Memory`] are `memories::rows`', shared with PostgreSQL),
//! loading versions by id with their merges' sources, the live entry at a URI, and vectors as
//! little-endian bytes.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use skald_core::memory::uri::MemoryUri;

pub(crate) use crate::memories::rows::{
    LIVE, prefix_end, source_from_json, source_json, tenant_token,
};
use crate::memories::rows::{
    MemoryColumns, absent, add_merged_sources, empty_source_sql, in_order,
};
use crate::memories::{Memory, MemoryError, MemorySource};

/// The columns [`memory_from_row`] reads, in order.
pub(super) const COLUMNS: &str = "id, tenant, uri, version, category, l0, l1, l2, priority, source, \
                       created_at_ms, updated_at_ms, supersedes, superseded_by, \
                       superseded_at_ms, forgotten_at_ms, content_hash, length(embedding)";

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
    let embedding_bytes: Option<i64> = row.get(17).map_err(read)?;
    MemoryColumns {
        id: row.get(0).map_err(read)?,
        tenant: row.get(1).map_err(read)?,
        uri: row.get(2).map_err(read)?,
        version: row.get(3).map_err(read)?,
        category: row.get(4).map_err(read)?,
        l0: row.get(5).map_err(read)?,
        l1: row.get(6).map_err(read)?,
        l2: row.get(7).map_err(read)?,
        priority: row.get(8).map_err(read)?,
        source: row.get(9).map_err(read)?,
        created_at_ms: row.get(10).map_err(read)?,
        updated_at_ms: row.get(11).map_err(read)?,
        supersedes: row.get(12).map_err(read)?,
        superseded_by: row.get(13).map_err(read)?,
        superseded_at_ms: row.get(14).map_err(read)?,
        forgotten_at_ms: row.get(15).map_err(read)?,
        content_hash: row.get(16).map_err(read)?,
        // Vectors are stored as little-endian f32s: four bytes a dimension.
        embedding_dimensions: embedding_bytes.map(|bytes| bytes / 4),
    }
    .into_memory()
}

pub(super) fn merged_sources(tx: &Connection, id: i64) -> Result<Vec<MemorySource>, MemoryError> {
    let mut statement = tx
        .prepare_cached(concat!(
            "SELECT source FROM memory_merges WHERE memory_id = ?1 AND source <> ",
            empty_source_sql!(),
            " ORDER BY rowid"
        ))
        .map_err(MemoryError::storage("reading merges"))?;
    let texts = statement
        .query_map(params![id], |row| row.get::<_, String>(0))
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
             AND source <> {} ORDER BY rowid",
            empty_source_sql!()
        ))
        .map_err(MemoryError::storage("reading merges"))?;
    let merges = statement
        .query_map(params_from_iter(ids), |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
        })
        .map_err(MemoryError::storage("reading merges"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(MemoryError::storage("reading merges"))?;
    add_merged_sources(&mut by_id, merges)?;
    in_order(ids, by_id)
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
    Err(absent(tenant, uri, forgotten))
}
