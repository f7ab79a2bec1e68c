//! Reading the PostgreSQL memory store's rows: reading a row's columns (the checking and the
//! making of a [`Memory`] are `memories::rows`', shared with SQLite), loading versions by id
//! with their merges' sources, the live entry at a URI.

use std::collections::HashMap;

use skald_core::memory::uri::MemoryUri;
use tokio_postgres::Row;

pub(crate) use crate::memories::rows::LIVE;
use crate::memories::rows::{
    MemoryColumns, absent, add_merged_sources, empty_source_sql, in_order,
};
use crate::memories::{Memory, MemoryError};
use crate::postgres::{Conn, fail};

/// The columns [`memory_from_row`] reads, in order.
pub(super) const COLUMNS: &str = "id, tenant, uri, version, category, l0, l1, l2, priority, \
     source, created_at_ms, updated_at_ms, supersedes, superseded_by, superseded_at_ms, \
     forgotten_at_ms, content_hash, cardinality(embedding)";

fn corrupt(error: tokio_postgres::Error) -> MemoryError {
    MemoryError::Corrupt(format!("a memory row: {error}"))
}

/// A row of [`COLUMNS`], with its own source only.
pub(super) fn memory_from_row(row: &Row) -> Result<Memory, MemoryError> {
    let dimensions: Option<i32> = row.try_get(17).map_err(corrupt)?;
    MemoryColumns {
        id: row.try_get(0).map_err(corrupt)?,
        tenant: row.try_get(1).map_err(corrupt)?,
        uri: row.try_get(2).map_err(corrupt)?,
        version: row.try_get(3).map_err(corrupt)?,
        category: row.try_get(4).map_err(corrupt)?,
        l0: row.try_get(5).map_err(corrupt)?,
        l1: row.try_get(6).map_err(corrupt)?,
        l2: row.try_get(7).map_err(corrupt)?,
        priority: row.try_get(8).map_err(corrupt)?,
        source: row.try_get(9).map_err(corrupt)?,
        created_at_ms: row.try_get(10).map_err(corrupt)?,
        updated_at_ms: row.try_get(11).map_err(corrupt)?,
        supersedes: row.try_get(12).map_err(corrupt)?,
        superseded_by: row.try_get(13).map_err(corrupt)?,
        superseded_at_ms: row.try_get(14).map_err(corrupt)?,
        forgotten_at_ms: row.try_get(15).map_err(corrupt)?,
        content_hash: row.try_get(16).map_err(corrupt)?,
        embedding_dimensions: dimensions.map(i64::from),
    }
    .into_memory()
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
    let merges = conn
        .query(
            concat!(
                "SELECT memory_id, source FROM memory_merges WHERE memory_id = ANY($1) \
                 AND source <> ",
                empty_source_sql!(),
                " ORDER BY seq"
            ),
            &[&ids],
        )
        .map_err(fail::<MemoryError>("reading merges"))?;
    add_merged_sources(
        &mut by_id,
        merges
            .iter()
            .map(|row| (row.get::<_, i64>(0), row.get::<_, String>(1))),
    )?;
    in_order(ids, by_id)
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
    Err(absent(tenant, uri, forgotten))
}
