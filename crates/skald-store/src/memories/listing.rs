//! What both memory backends do with listing rows once they have read them: a directory level
//! grouped from its live entries ([`children`]) and the tree below it ([`build_tree`]), a listed
//! row's columns checked ([`ListedRow::from_columns`]), and the recent-writes events made
//! [`MemoryWrite`]s ([`writes_of`]). A backend keeps only its statements.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use skald_core::memory::uri::{MemoryCategory, MemoryUri};

use super::{
    DirEntry, DirEntryKind, DuplicateKind, MAX_SEARCH_LIMIT, Memory, MemoryError, MemoryWrite,
    TreeNode, WriteAction,
};

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

/// One directory level of a listing: the child of `dir` each live entry below it falls in;
/// directories first by name, then entries by priority (highest first) and name.
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
    // Directories first, by name; then entries, the higher priority first and by name among
    // equals (the sort is stable), so what the user or agent marked important leads a listing.
    out.sort_by_key(|(entry, _)| match entry.kind {
        DirEntryKind::Directory { .. } => (false, Reverse(0)),
        DirEntryKind::Entry { priority, .. } => (true, Reverse(priority)),
    });
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

impl ListedRow {
    /// A listed row from its columns (uri, category, l0, priority, updated_at_ms) as read.
    pub(crate) fn from_columns(
        uri: String,
        category: &str,
        l0: String,
        priority: i64,
        updated_at_ms: i64,
    ) -> Result<ListedRow, MemoryError> {
        Ok(ListedRow {
            uri: MemoryUri::parse(&uri)
                .map_err(|error| MemoryError::Corrupt(format!("stored URI {uri:?}: {error}")))?,
            category: MemoryCategory::from_name(category).ok_or_else(|| {
                MemoryError::Corrupt(format!("stored category {category:?} is unknown"))
            })?,
            l0,
            priority: u8::try_from(priority).unwrap_or(u8::MAX),
            updated_at_ms,
        })
    }
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

/// One event of a backend's recent-writes query: when, what (`added`, `updated`, `merged`,
/// `forgotten`), the version, and for a merge the URI asked for and the duplicate's kind.
pub(crate) struct WriteRow {
    pub at_ms: i64,
    pub action: String,
    pub id: i64,
    pub requested: Option<String>,
    pub kind: Option<String>,
    pub similarity: Option<f64>,
}

/// The events as [`MemoryWrite`]s, in their order, with the versions they name (read once each
/// through `load`).
pub(crate) fn writes_of(
    rows: Vec<WriteRow>,
    load: impl FnOnce(&[i64]) -> Result<Vec<Memory>, MemoryError>,
) -> Result<Vec<MemoryWrite>, MemoryError> {
    let mut unique: Vec<i64> = rows.iter().map(|row| row.id).collect();
    unique.sort_unstable();
    unique.dedup();
    let memories: HashMap<i64, Memory> = load(&unique)?
        .into_iter()
        .map(|memory| (memory.id, memory))
        .collect();
    let mut writes = Vec::with_capacity(rows.len());
    for row in rows {
        let id = row.id;
        let memory = memories.get(&id).ok_or_else(|| {
            MemoryError::Corrupt(format!("a write names memory {id}, which is missing"))
        })?;
        let action = match row.action.as_str() {
            "added" => WriteAction::Added,
            "updated" => WriteAction::Updated,
            "merged" => WriteAction::Merged,
            _ => WriteAction::Forgotten,
        };
        let requested_uri = row
            .requested
            .map(|text| {
                MemoryUri::parse(&text)
                    .map_err(|error| MemoryError::Corrupt(format!("stored URI {text:?}: {error}")))
            })
            .transpose()?;
        let duplicate = match row.kind.as_deref() {
            Some("exact") => Some(DuplicateKind::Exact),
            Some(_) => Some(DuplicateKind::Near {
                similarity: row.similarity.unwrap_or(0.0),
            }),
            None => None,
        };
        writes.push(MemoryWrite {
            at_ms: row.at_ms,
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
