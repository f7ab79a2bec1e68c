//! Listings and statistics of the SQLite memory store: history, directory listings and trees,
//! recent writes and counts. Each function runs inside the read transaction its caller opened.

use std::collections::{BTreeMap, HashMap};

use rusqlite::{Connection, params};
use skald_core::memory::uri::{MemoryCategory, MemoryUri};

use super::rows::{LIVE, live_id, load_by_id, load_many, prefix_end};
use crate::memories::{
    DirEntry, DirEntryKind, DuplicateKind, MAX_SEARCH_LIMIT, Memory, MemoryError, MemoryStats,
    MemoryWrite, TreeNode, WriteAction,
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

/// Checks the limit of [`MemoryStore::recent_writes`](super::MemoryStore::recent_writes)
/// before anything is read.
pub(crate) fn recent_writes_limit(limit: usize) -> Result<(), MemoryError> {
    if limit == 0 || limit > MAX_SEARCH_LIMIT {
        return Err(MemoryError::InvalidInput {
            field: "limit",
            reason: format!("{limit}; it must be from 1 to {MAX_SEARCH_LIMIT}"),
        });
    }
    Ok(())
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
    let ids: Vec<i64> = rows.iter().map(|row| row.2).collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    let memories: HashMap<i64, Memory> = load_many(tx, &unique)?
        .into_iter()
        .map(|memory| (memory.id, memory))
        .collect();
    let mut writes = Vec::with_capacity(rows.len());
    for (at_ms, action, id, requested, kind, similarity) in rows {
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

/// One directory level of a listing: the child of `dir` each live entry below it falls in.
pub(crate) fn children(
    dir: &MemoryUri,
    rows: &[ListedRow],
) -> Result<Vec<(DirEntry, Vec<usize>)>, MemoryError> {
    let prefix = dir.descendant_prefix();
    let mut groups: BTreeMap<(bool, String), (Option<usize>, Vec<usize>)> = BTreeMap::new();
    for (index, row) in rows.iter().enumerate() {
        let Some(rest) = row.uri.as_str().strip_prefix(prefix.as_str()) else {
            continue;
        };
        match rest.split_once('/') {
            Some((name, _)) => {
                groups
                    .entry((false, name.to_owned()))
                    .or_default()
                    .1
                    .push(index);
            }
            None => {
                groups.entry((true, rest.to_owned())).or_default().0 = Some(index);
            }
        }
    }
    let mut out = Vec::new();
    for ((is_entry, name), (entry, below)) in groups {
        let uri = dir.join(&name)?;
        if is_entry {
            let Some(row) = entry.and_then(|index| rows.get(index)) else {
                continue;
            };
            out.push((
                DirEntry {
                    uri,
                    kind: DirEntryKind::Entry {
                        category: row.category,
                        l0: row.l0.clone(),
                        priority: row.priority,
                        updated_at_ms: row.updated_at_ms,
                    },
                },
                Vec::new(),
            ));
        } else {
            out.push((
                DirEntry {
                    uri,
                    kind: DirEntryKind::Directory {
                        entries: below.len() as u64,
                    },
                },
                below,
            ));
        }
    }
    Ok(out)
}

/// A live entry as listings show it.
pub(crate) struct ListedRow {
    pub(crate) uri: MemoryUri,
    pub(crate) category: MemoryCategory,
    pub(crate) l0: String,
    pub(crate) priority: u8,
    pub(crate) updated_at_ms: i64,
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
            Ok(ListedRow {
                uri: MemoryUri::parse(&uri).map_err(|error| {
                    MemoryError::Corrupt(format!("stored URI {uri:?}: {error}"))
                })?,
                category: MemoryCategory::from_name(&category).ok_or_else(|| {
                    MemoryError::Corrupt(format!("stored category {category:?} is unknown"))
                })?,
                l0,
                priority: u8::try_from(priority).unwrap_or(u8::MAX),
                updated_at_ms,
            })
        })
        .collect()
}

pub(crate) fn build_tree(
    entry: DirEntry,
    rows: &[ListedRow],
    indices: &[usize],
    depth_left: usize,
) -> Result<TreeNode, MemoryError> {
    let mut children_nodes = Vec::new();
    if depth_left > 0 && matches!(entry.kind, DirEntryKind::Directory { .. }) {
        let subset: Vec<ListedRow> = indices
            .iter()
            .filter_map(|index| rows.get(*index))
            .map(|row| ListedRow {
                uri: row.uri.clone(),
                category: row.category,
                l0: row.l0.clone(),
                priority: row.priority,
                updated_at_ms: row.updated_at_ms,
            })
            .collect();
        for (child, below) in children(&entry.uri, &subset)? {
            children_nodes.push(build_tree(child, &subset, &below, depth_left - 1)?);
        }
    }
    Ok(TreeNode {
        entry,
        children: children_nodes,
    })
}
