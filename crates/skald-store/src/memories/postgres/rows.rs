//! Reading the PostgreSQL memory store's rows: decoding a row into a [`Memory`], loading
//! versions by id with their merges' sources, the live entry at a URI.

use std::collections::HashMap;

use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use tokio_postgres::Row;

use crate::memories::sqlite::rows::{source_from_json, status_of};
use crate::memories::{Memory, MemoryError, MemorySource};
use crate::postgres::{Conn, fail};

/// The condition of a live version, as the partial indexes spell it.
pub(super) const LIVE: &str = "superseded_by IS NULL AND forgotten_at_ms IS NULL";

/// The columns [`memory_from_row`] reads, in order.
pub(super) const COLUMNS: &str = "id, tenant, uri, version, category, l0, l1, l2, priority, \
     source, created_at_ms, updated_at_ms, supersedes, superseded_by, superseded_at_ms, \
     forgotten_at_ms, content_hash, cardinality(embedding)";

fn corrupt(error: tokio_postgres::Error) -> MemoryError {
    MemoryError::Corrupt(format!("a memory row: {error}"))
}

/// A row of [`COLUMNS`], with its own source only.
pub(super) fn memory_from_row(row: &Row) -> Result<Memory, MemoryError> {
    let id: i64 = row.try_get(0).map_err(corrupt)?;
    let uri_text: String = row.try_get(2).map_err(corrupt)?;
    let uri = MemoryUri::parse(&uri_text)
        .map_err(|error| MemoryError::Corrupt(format!("stored URI {uri_text:?}: {error}")))?;
    let category_text: String = row.try_get(4).map_err(corrupt)?;
    let category = MemoryCategory::from_name(&category_text).ok_or_else(|| {
        MemoryError::Corrupt(format!("stored category {category_text:?} is unknown"))
    })?;
    let version: i64 = row.try_get(3).map_err(corrupt)?;
    let priority: i64 = row.try_get(8).map_err(corrupt)?;
    let source_text: String = row.try_get(9).map_err(corrupt)?;
    let mut sources = Vec::new();
    let own = source_from_json(&source_text)?;
    if !own.is_empty() {
        sources.push(own);
    }
    let dimensions: Option<i32> = row.try_get(17).map_err(corrupt)?;
    Ok(Memory {
        id,
        tenant: row.try_get(1).map_err(corrupt)?,
        uri,
        version: u32::try_from(version)
            .map_err(|_| MemoryError::Corrupt(format!("memory {id} has version {version}")))?,
        category,
        l0: row.try_get(5).map_err(corrupt)?,
        l1: row.try_get(6).map_err(corrupt)?,
        l2: row.try_get(7).map_err(corrupt)?,
        priority: u8::try_from(priority)
            .map_err(|_| MemoryError::Corrupt(format!("memory {id} has priority {priority}")))?,
        sources,
        created_at_ms: row.try_get(10).map_err(corrupt)?,
        updated_at_ms: row.try_get(11).map_err(corrupt)?,
        supersedes: row.try_get(12).map_err(corrupt)?,
        status: status_of(
            row.try_get(13).map_err(corrupt)?,
            row.try_get(14).map_err(corrupt)?,
            row.try_get(15).map_err(corrupt)?,
        ),
        content_hash: row.try_get(16).map_err(corrupt)?,
        embedding_dimensions: dimensions
            .and_then(|dimensions| usize::try_from(dimensions).ok())
            .filter(|dimensions| *dimensions > 0),
    })
}

/// The versions `ids`, in that order, with two queries whatever their number.
pub(super) fn load_many(conn: &mut Conn, ids: &[i64]) -> Result<Vec<Memory>, MemoryError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut by_id: HashMap<i64, Memory> = HashMap::with_capacity(ids.len());
    for row in conn
        .query(
            &format!("SELECT {COLUMNS} FROM memories WHERE id = ANY($1)"),
            &[&ids],
        )
        .map_err(fail::<MemoryError>("reading memories"))?
    {
        let memory = memory_from_row(&row)?;
        by_id.insert(memory.id, memory);
    }
    for row in conn
        .query(
            "SELECT memory_id, source FROM memory_merges WHERE memory_id = ANY($1) ORDER BY seq",
            &[&ids],
        )
        .map_err(fail::<MemoryError>("reading merges"))?
    {
        let id: i64 = row.get(0);
        let text: String = row.get(1);
        let source: MemorySource = source_from_json(&text)?;
        if let Some(memory) = by_id.get_mut(&id).filter(|_| !source.is_empty()) {
            memory.sources.push(source);
        }
    }
    ids.iter()
        .map(|id| {
            by_id
                .get(id)
                .cloned()
                .ok_or_else(|| MemoryError::Corrupt(format!("memory version {id} vanished")))
        })
        .collect()
}

pub(super) fn load_by_id(conn: &mut Conn, id: i64) -> Result<Memory, MemoryError> {
    load_many(conn, &[id])?
        .pop()
        .ok_or_else(|| MemoryError::Corrupt(format!("memory version {id} vanished")))
}

pub(super) fn live_id(
    conn: &mut Conn,
    tenant: &str,
    uri: &MemoryUri,
) -> Result<Option<i64>, MemoryError> {
    Ok(conn
        .query_opt(
            &format!("SELECT id FROM memories WHERE tenant = $1 AND uri = $2 AND {LIVE}"),
            &[&tenant, &uri.as_str()],
        )
        .map_err(fail::<MemoryError>("looking up a memory"))?
        .map(|row| row.get(0)))
}

/// The live entry at `uri`, or why there is none.
pub(super) fn live_memory(
    conn: &mut Conn,
    tenant: &str,
    uri: &MemoryUri,
) -> Result<Memory, MemoryError> {
    if let Some(id) = live_id(conn, tenant, uri)? {
        return load_by_id(conn, id);
    }
    let forgotten: Option<Option<i64>> = conn
        .query_opt(
            "SELECT forgotten_at_ms FROM memories WHERE tenant = $1 AND uri = $2 \
             ORDER BY version DESC LIMIT 1",
            &[&tenant, &uri.as_str()],
        )
        .map_err(fail::<MemoryError>("looking up a memory"))?
        .map(|row| row.get(0));
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
