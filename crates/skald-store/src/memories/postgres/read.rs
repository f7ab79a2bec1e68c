//! Listings and statistics of the PostgreSQL memory store: history, directory listings and
//! trees (grouped by `memories::listing`, shared with SQLite), recent writes and counts. Each
//! function runs inside the read transaction its caller opened.

use skald_core::memory::uri::MemoryUri;

use super::rows::{LIVE, live_id, load_by_id, load_many};
use crate::memories::listing::{ListedRow, WriteRow, build_tree, children, writes_of};
use crate::memories::rows::prefix_end;
use crate::memories::{
    DirEntry, DirEntryKind, Memory, MemoryError, MemoryStats, MemoryWrite, TreeNode,
};
use crate::postgres::{Conn, fail, unsigned};

fn failed(action: &'static str) -> impl FnOnce(crate::BackendError) -> MemoryError {
    fail::<MemoryError>(action)
}

pub(super) fn history(
    conn: &mut Conn,
    tenant: &str,
    uri: &MemoryUri,
) -> Result<Vec<Memory>, MemoryError> {
    let ids: Vec<i64> = conn
        .query(
            "SELECT id FROM memories WHERE tenant = $1 AND uri = $2 ORDER BY version",
            &[&tenant, &uri.as_str()],
        )
        .map_err(failed("reading a memory's history"))?
        .iter()
        .map(|row| row.get(0))
        .collect();
    if ids.is_empty() {
        return Err(MemoryError::NotFound {
            tenant: tenant.to_owned(),
            uri: uri.clone(),
        });
    }
    load_many(conn, &ids)
}

fn entry_of(memory: Memory) -> DirEntry {
    DirEntry {
        uri: memory.uri,
        kind: DirEntryKind::Entry {
            category: memory.category,
            l0: memory.l0,
            priority: memory.priority,
            updated_at_ms: memory.updated_at_ms,
        },
    }
}

pub(super) fn ls(
    conn: &mut Conn,
    tenant: &str,
    dir: &MemoryUri,
) -> Result<Vec<DirEntry>, MemoryError> {
    let entry = if dir.is_entry_location() {
        live_id(conn, tenant, dir)?
    } else {
        None
    };
    if let Some(id) = entry {
        return Ok(vec![entry_of(load_by_id(conn, id)?)]);
    }
    let rows = listed_rows(conn, tenant, dir)?;
    Ok(children(dir, &rows)?
        .into_iter()
        .map(|(entry, _)| entry)
        .collect())
}

pub(super) fn tree(
    conn: &mut Conn,
    tenant: &str,
    dir: &MemoryUri,
    max_depth: usize,
) -> Result<TreeNode, MemoryError> {
    if let Some(id) = live_id(conn, tenant, dir)? {
        return Ok(TreeNode {
            entry: entry_of(load_by_id(conn, id)?),
            children: Vec::new(),
        });
    }
    let rows = listed_rows(conn, tenant, dir)?;
    let all: Vec<usize> = (0..rows.len()).collect();
    let root = DirEntry {
        uri: dir.clone(),
        kind: DirEntryKind::Directory {
            entries: rows.len() as u64,
        },
    };
    build_tree(root, &rows, &all, max_depth)
}

pub(super) fn recent_writes(
    conn: &mut Conn,
    tenant: &str,
    limit: usize,
) -> Result<Vec<MemoryWrite>, MemoryError> {
    let sql = "SELECT at, action, id, requested, kind, similarity FROM ( \
             SELECT m.updated_at_ms AS at, \
               CASE WHEN p.id IS NULL THEN 'added' ELSE 'updated' END AS action, \
               m.id AS id, NULL::TEXT AS requested, NULL::TEXT AS kind, \
               NULL::DOUBLE PRECISION AS similarity, 0 AS seq, 0::BIGINT AS sub \
             FROM memories m LEFT JOIN memories p \
               ON p.id = m.supersedes AND p.superseded_by = m.id \
             WHERE m.tenant = $1 \
             UNION ALL \
             SELECT g.merged_at_ms, 'merged', g.memory_id, g.requested_uri, g.kind, \
               g.similarity, 1, g.seq \
             FROM memory_merges g JOIN memories m ON m.id = g.memory_id \
             WHERE m.tenant = $1 \
             UNION ALL \
             SELECT m.forgotten_at_ms, 'forgotten', m.id, NULL, NULL, NULL, 2, 0 \
             FROM memories m WHERE m.tenant = $1 AND m.forgotten_at_ms IS NOT NULL \
           ) w ORDER BY at DESC, id DESC, seq DESC, sub DESC LIMIT $2";
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = conn
        .query(sql, &[&tenant, &limit])
        .map_err(failed("reading recent memory writes"))?;
    let rows: Vec<WriteRow> = rows
        .iter()
        .map(|row| WriteRow {
            at_ms: row.get(0),
            action: row.get(1),
            id: row.get(2),
            requested: row.get(3),
            kind: row.get(4),
            similarity: row.get(5),
        })
        .collect();
    writes_of(rows, |ids| load_many(conn, ids))
}

pub(super) fn stats(conn: &mut Conn, tenant: &str) -> Result<MemoryStats, MemoryError> {
    let row = conn
        .query_one(
            &format!(
                "SELECT COUNT(*) FILTER (WHERE {LIVE}), \
                        COUNT(*) FILTER (WHERE superseded_by IS NOT NULL), \
                        COUNT(*) FILTER (WHERE superseded_by IS NULL \
                                         AND forgotten_at_ms IS NOT NULL), \
                        COUNT(*) FILTER (WHERE {LIVE} AND embedding IS NOT NULL), \
                        (SELECT COUNT(*) FROM memory_merges g JOIN memories m \
                           ON m.id = g.memory_id WHERE m.tenant = $1) \
                 FROM memories WHERE tenant = $1"
            ),
            &[&tenant],
        )
        .map_err(failed("counting memories"))?;
    Ok(MemoryStats {
        live: unsigned(row.get(0)),
        superseded: unsigned(row.get(1)),
        forgotten: unsigned(row.get(2)),
        with_embedding: unsigned(row.get(3)),
        merged: unsigned(row.get(4)),
    })
}

fn listed_rows(
    conn: &mut Conn,
    tenant: &str,
    dir: &MemoryUri,
) -> Result<Vec<ListedRow>, MemoryError> {
    let prefix = dir.descendant_prefix();
    conn.query(
        &format!(
            "SELECT uri, category, l0, priority, updated_at_ms FROM memories \
             WHERE tenant = $1 AND uri >= $2 AND uri < $3 AND {LIVE} ORDER BY uri"
        ),
        &[&tenant, &prefix, &prefix_end(&prefix)],
    )
    .map_err(failed("listing memories"))?
    .iter()
    .map(|row| {
        let category: String = row.get(1);
        ListedRow::from_columns(row.get(0), &category, row.get(2), row.get(3), row.get(4))
    })
    .collect()
}
