//! Listings and statistics of the PostgreSQL memory store: history, directory listings and
//! trees (grouped by the SQLite store's own functions), recent writes and counts. Each function
//! runs inside the read transaction its caller opened.

use std::collections::HashMap;

use skald_core::memory::uri::{MemoryCategory, MemoryUri};

use super::rows::{LIVE, live_id, load_by_id, load_many};
use crate::memories::rows::prefix_end;
use crate::memories::sqlite::read::{ListedRow, build_tree, children};
use crate::memories::{
    DirEntry, DirEntryKind, DuplicateKind, Memory, MemoryError, MemoryStats, MemoryWrite, TreeNode,
    WriteAction,
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
    let mut unique: Vec<i64> = rows.iter().map(|row| row.get(2)).collect();
    unique.sort_unstable();
    unique.dedup();
    let memories: HashMap<i64, Memory> = load_many(conn, &unique)?
        .into_iter()
        .map(|memory| (memory.id, memory))
        .collect();
    let mut writes = Vec::with_capacity(rows.len());
    for row in rows {
        let (at_ms, action, id): (i64, String, i64) = (row.get(0), row.get(1), row.get(2));
        let (requested, kind, similarity): (Option<String>, Option<String>, Option<f64>) =
            (row.get(3), row.get(4), row.get(5));
        let memory = memories.get(&id).ok_or_else(|| {
            MemoryError::Corrupt(format!("a write names memory {id}, which is missing"))
        })?;
        let action = match action.as_str() {
            "added" => WriteAction::Added,
            "updated" => WriteAction::Updated,
            "merged" => WriteAction::Merged,
            _ => WriteAction::Forgotten,
        };
        let requested_uri = requested
            .map(|text| {
                MemoryUri::parse(&text)
                    .map_err(|error| MemoryError::Corrupt(format!("stored URI {text:?}: {error}")))
            })
            .transpose()?;
        let duplicate = match kind.as_deref() {
            Some("exact") => Some(DuplicateKind::Exact),
            Some(_) => Some(DuplicateKind::Near {
                similarity: similarity.unwrap_or(0.0),
            }),
            None => None,
        };
        writes.push(MemoryWrite {
            at_ms,
            action,
            uri: memory.uri.clone(),
            requested_uri,
            duplicate,
            memory_id: id,
            version: memory.version,
            category: memory.category,
            l0: memory.l0.clone(),
        });
    }
    Ok(writes)
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
        let (uri, category): (String, String) = (row.get(0), row.get(1));
        let priority: i64 = row.get(3);
        Ok(ListedRow {
            uri: MemoryUri::parse(&uri)
                .map_err(|error| MemoryError::Corrupt(format!("stored URI {uri:?}: {error}")))?,
            category: MemoryCategory::from_name(&category).ok_or_else(|| {
                MemoryError::Corrupt(format!("stored category {category:?} is unknown"))
            })?,
            l0: row.get(2),
            priority: u8::try_from(priority).unwrap_or(u8::MAX),
            updated_at_ms: row.get(4),
        })
    })
    .collect()
}
