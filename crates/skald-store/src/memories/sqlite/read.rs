//! Listings and statistics of the SQLite memory store: history, directory listings and trees,
//! recent writes and counts. Each function runs inside the read transaction its caller opened.

use rusqlite::{Connection, params};
use skald_core::memory::uri::MemoryUri;

use super::rows::{LIVE, live_id, load_by_id, load_many, prefix_end};
use crate::memories::listing::{ListedRow, WriteRow, build_tree, children, writes_of};
use crate::memories::{
    DirEntry, DirEntryKind, Memory, MemoryError, MemoryStats, MemoryWrite, TreeNode,
};

/// Every version at `uri`, oldest first.
pub(super) fn history(
    tx: &Connection,
    tenant: &str,
    uri: &MemoryUri,
) -> Result<Vec<Memory>, MemoryError> {
    let ids: Vec<i64> = tx
        .prepare_cached("SELECT id FROM memories WHERE tenant = ?1 AND uri = ?2 ORDER BY version")
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
}

/// The live entry at `dir`, or the children of the directory `dir`.
pub(super) fn ls(
    tx: &Connection,
    tenant: &str,
    dir: &MemoryUri,
) -> Result<Vec<DirEntry>, MemoryError> {
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
}

/// The live entry at `dir`, or the tree below the directory `dir`, `max_depth` levels deep.
pub(super) fn tree(
    tx: &Connection,
    tenant: &str,
    dir: &MemoryUri,
    max_depth: usize,
) -> Result<TreeNode, MemoryError> {
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
}

/// The tenant's latest `limit` writes, newest first.
pub(super) fn recent_writes(
    tx: &Connection,
    tenant: &str,
    limit: usize,
) -> Result<Vec<MemoryWrite>, MemoryError> {
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
    let rows: Vec<WriteRow> = rows
        .into_iter()
        .map(
            |(at_ms, action, id, requested, kind, similarity)| WriteRow {
                at_ms,
                action,
                id,
                requested,
                kind,
                similarity,
            },
        )
        .collect();
    writes_of(rows, |ids| load_many(tx, ids))
}

/// Counts of the tenant's versions by status, merges and vectors.
pub(super) fn stats(tx: &Connection, tenant: &str) -> Result<MemoryStats, MemoryError> {
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
            ListedRow::from_columns(uri, &category, l0, priority, updated_at_ms)
        })
        .collect()
}
