//! What both memory backends do with a row once they have read it: the columns checked and made
//! a [`Memory`] ([`MemoryColumns`]), merges' sources added and versions put back in the order
//! asked for, the error of a URI with no live entry, and the small encodings both store (sources
//! as JSON, the tenant's full-text token, URI prefix bounds). A backend keeps only its
//! statements and the reading of its own column types.

use std::collections::HashMap;

use serde_json::{Value, json};
use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use xxhash_rust::xxh3::xxh3_64;

use super::{Memory, MemoryError, MemorySource, MemoryStatus};

/// The condition of a live version, spelled exactly as the partial indexes are, so the
/// database uses them.
pub(crate) const LIVE: &str = "superseded_by IS NULL AND forgotten_at_ms IS NULL";

/// A memory row as a backend read it (the columns every backend selects, in their order),
/// not yet checked.
pub(crate) struct MemoryColumns {
    pub id: i64,
    pub tenant: String,
    pub uri: String,
    pub version: i64,
    pub category: String,
    pub l0: String,
    pub l1: String,
    pub l2: String,
    pub priority: i64,
    pub source: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub supersedes: Option<i64>,
    pub superseded_by: Option<i64>,
    pub superseded_at_ms: Option<i64>,
    pub forgotten_at_ms: Option<i64>,
    pub content_hash: String,
    /// The stored vector's dimensions (`None` or 0: no vector).
    pub embedding_dimensions: Option<i64>,
}

impl MemoryColumns {
    /// The version the row holds, with its own source only; a value no writer stores is
    /// [`MemoryError::Corrupt`].
    pub(crate) fn into_memory(self) -> Result<Memory, MemoryError> {
        let id = self.id;
        let uri = MemoryUri::parse(&self.uri)
            .map_err(|error| MemoryError::Corrupt(format!("stored URI {:?}: {error}", self.uri)))?;
        let category = MemoryCategory::from_name(&self.category).ok_or_else(|| {
            MemoryError::Corrupt(format!("stored category {:?} is unknown", self.category))
        })?;
        let mut sources = Vec::new();
        let own = source_from_json(&self.source)?;
        if !own.is_empty() {
            sources.push(own);
        }
        let (version, priority) = (self.version, self.priority);
        Ok(Memory {
            id,
            tenant: self.tenant,
            uri,
            version: u32::try_from(version)
                .map_err(|_| MemoryError::Corrupt(format!("memory {id} has version {version}")))?,
            category,
            l0: self.l0,
            l1: self.l1,
            l2: self.l2,
            priority: u8::try_from(priority).map_err(|_| {
                MemoryError::Corrupt(format!("memory {id} has priority {priority}"))
            })?,
            sources,
            created_at_ms: self.created_at_ms,
            updated_at_ms: self.updated_at_ms,
            supersedes: self.supersedes,
            status: status_of(
                self.superseded_by,
                self.superseded_at_ms,
                self.forgotten_at_ms,
            ),
            content_hash: self.content_hash,
            embedding_dimensions: self
                .embedding_dimensions
                .and_then(|dimensions| usize::try_from(dimensions).ok())
                .filter(|dimensions| *dimensions > 0),
        })
    }
}

/// Adds the sources of `merges` (memory id, stored source; in merge order) to the versions
/// they were merged into.
pub(crate) fn add_merged_sources(
    by_id: &mut HashMap<i64, Memory>,
    merges: impl IntoIterator<Item = (i64, String)>,
) -> Result<(), MemoryError> {
    for (id, text) in merges {
        let source = source_from_json(&text)?;
        if let Some(memory) = by_id.get_mut(&id).filter(|_| !source.is_empty()) {
            memory.sources.push(source);
        }
    }
    Ok(())
}

/// The versions `ids`, in that order (an id given twice, twice), from those read; one not read
/// vanished (corrupt).
pub(crate) fn in_order(
    ids: &[i64],
    mut by_id: HashMap<i64, Memory>,
) -> Result<Vec<Memory>, MemoryError> {
    let mut left: HashMap<i64, usize> = HashMap::with_capacity(ids.len());
    for id in ids {
        *left.entry(*id).or_default() += 1;
    }
    ids.iter()
        .map(|id| {
            let last = left.get_mut(id).is_some_and(|count| {
                *count -= 1;
                *count == 0
            });
            let memory = if last {
                by_id.remove(id)
            } else {
                by_id.get(id).cloned()
            };
            memory.ok_or_else(|| MemoryError::Corrupt(format!("memory version {id} vanished")))
        })
        .collect()
}

/// Why there is no live entry at `uri`: `newest_forgotten_at` is the newest version's
/// `forgotten_at_ms` (`None`: no version at all).
pub(crate) fn absent(
    tenant: &str,
    uri: &MemoryUri,
    newest_forgotten_at: Option<Option<i64>>,
) -> MemoryError {
    match newest_forgotten_at {
        Some(Some(at_ms)) => MemoryError::Forgotten {
            uri: uri.clone(),
            at_ms,
        },
        Some(None) | None => MemoryError::NotFound {
            tenant: tenant.to_owned(),
            uri: uri.clone(),
        },
    }
}

/// A source as stored.
pub(crate) fn source_json(source: &MemorySource) -> String {
    json!({"session_id": source.session_id, "entry_ids": source.entry_ids}).to_string()
}

/// How [`source_json`] stores an empty source (a merge that came with none, as every resource
/// chunk's does), as a SQL string literal. Reads of merged sources leave these rows out in SQL,
/// through a partial index of the merges that have a source (`memory_merges_with_source`, whose
/// condition spells the same constant — an index's condition serves only a query that states
/// it, which a bound parameter does not): an entry that many duplicates were merged into is
/// then read without visiting a row per merge, which kept a document of repeated sections
/// quadratic. A row stored otherwise is still parsed and dropped when empty.
macro_rules! empty_source_sql {
    () => {
        r#"'{"session_id":null,"entry_ids":[]}'"#
    };
}
pub(crate) use empty_source_sql;

/// A stored source read back.
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

/// A version's status from its three status columns.
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn columns(id: i64) -> MemoryColumns {
        MemoryColumns {
            id,
            tenant: "t".into(),
            uri: format!("viking://user/alice/memories/events/e{id}.md"),
            version: 1,
            category: "events".into(),
            l0: "a".into(),
            l1: "b".into(),
            l2: "c".into(),
            priority: 2,
            source: source_json(&MemorySource {
                session_id: Some("s".into()),
                entry_ids: vec!["e1".into()],
            }),
            created_at_ms: 1,
            updated_at_ms: 2,
            supersedes: None,
            superseded_by: None,
            superseded_at_ms: None,
            forgotten_at_ms: None,
            content_hash: "h".into(),
            embedding_dimensions: Some(0),
        }
    }

    #[test]
    fn versions_come_back_in_the_order_asked_an_id_given_twice_twice() {
        let by_id: HashMap<i64, Memory> = [3, 5]
            .into_iter()
            .map(|id| (id, columns(id).into_memory().unwrap()))
            .collect();
        let ids: Vec<i64> = in_order(&[5, 3, 5], by_id.clone())
            .unwrap()
            .iter()
            .map(|memory| memory.id)
            .collect();
        assert_eq!(ids, [5, 3, 5]);
        assert!(matches!(
            in_order(&[3, 4], by_id),
            Err(MemoryError::Corrupt(message)) if message.contains("4 vanished")
        ));
    }

    #[test]
    fn a_row_no_writer_stores_is_corrupt() {
        let memory = columns(1).into_memory().unwrap();
        assert_eq!(memory.embedding_dimensions, None);
        assert_eq!(memory.sources.len(), 1);
        for bad in [
            MemoryColumns {
                category: "nope".into(),
                ..columns(1)
            },
            MemoryColumns {
                priority: 300,
                ..columns(1)
            },
            MemoryColumns {
                uri: "http://x".into(),
                ..columns(1)
            },
        ] {
            assert!(matches!(bad.into_memory(), Err(MemoryError::Corrupt(_))));
        }
    }

    #[test]
    fn no_live_entry_is_forgotten_when_the_newest_version_was() {
        let uri = MemoryUri::parse("viking://user/alice/memories/events/e.md").unwrap();
        assert!(matches!(
            absent("t", &uri, Some(Some(7))),
            MemoryError::Forgotten { at_ms: 7, .. }
        ));
        assert!(matches!(
            absent("t", &uri, Some(None)),
            MemoryError::NotFound { .. }
        ));
        assert!(matches!(
            absent("t", &uri, None),
            MemoryError::NotFound { .. }
        ));
    }

    #[test]
    fn the_empty_source_literal_is_how_an_empty_source_is_stored_and_both_schemas_index_it() {
        let stored = source_json(&MemorySource::default());
        assert_eq!(empty_source_sql!(), format!("'{stored}'"));
        let condition = format!("WHERE source <> {}", empty_source_sql!());
        let sqlite = crate::schema::MIGRATIONS.join("\n");
        let postgres = crate::postgres::schema::MIGRATIONS.join("\n");
        for schema in [sqlite, postgres] {
            assert!(
                schema.contains("memory_merges_with_source") && schema.contains(&condition),
                "{schema}"
            );
        }
    }
}
