//! Managing a tenant's memories by hand: what the `skald` memory commands (`search`, `ls`, `read`,
//! `history`, `remember`, `forget`, `add`) and the server's memory API both do, with the same
//! semantics and the same output fields. The CLI prints these reports; the server returns them
//! as JSON.
//!
//! Every function takes the store, the tenant and (where it matters) the [`MemoryIdentity`]
//! whose memories it acts on; an embedder is optional (without one, search is full-text only
//! and nothing is embedded). Arguments are checked before the store is touched, so bad input
//! writes nothing.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::{Deserialize, Serialize};
use skald_core::ids::Tenant;
use skald_core::memory::chunk::{Chunk, DocumentKind, MIN_CHUNK_CHARS, chunk_document, slugify};
use skald_core::memory::dedup::content_hash;
use skald_core::memory::levels::{MAX_ABSTRACT_CHARS, cut_at_word, derive_abstract};
use skald_core::memory::uri::{MAX_DEPTH, MAX_SEGMENT_LEN, MemoryCategory, MemoryUri, UriError};
use skald_core::time::format_rfc3339_seconds;
use skald_llm::Embedder;
use skald_store::memories::{
    AddOutcome, DirEntry, DirEntryKind, DuplicateKind, Memory, MemoryError, MemoryLevel,
    MemorySource, MemoryStatus, MemoryStore, MemoryWrite, NewMemory, SearchFilter, SearchHit,
    SearchQuery, TreeNode, WriteAction,
};
use tokio_util::sync::CancellationToken;

use super::MemoryIdentity;

mod add;

pub use add::*;

/// The entry that holds a directory's L0/L1 (`skald add` and the resources API write one in
/// every directory they create; reading a directory reads it). A segment may not start with
/// `.`, so OpenViking's `.abstract.md`/`.overview.md` sidecars become this one entry.
pub const OVERVIEW_NAME: &str = "_overview";

/// Why a memory operation could not be done. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    /// The store refused or failed (unknown URI, conflict, storage…).
    #[error(transparent)]
    Store(#[from] MemoryError),
    /// A URI is not a valid `viking://` URI, or names a directory where an entry is needed.
    #[error(transparent)]
    Uri(#[from] UriError),
    /// A request field is unusable; the message says which and why.
    #[error("{field}: {reason}")]
    InvalidInput {
        /// The request field at fault (`query`, `content`, `priority`, `category`…).
        field: &'static str,
        /// What is wrong with it and what is accepted, for people.
        reason: String,
    },
    /// The embedder failed or answered with the wrong number of vectors.
    #[error("embedding with {embedder}: {message}")]
    Embedding {
        /// The embedder's name.
        embedder: String,
        /// What went wrong.
        message: String,
    },
    /// Documents added at once cut into more chunks than one request may write.
    #[error(
        "the documents cut into {chunks} chunks; at most {limit} are added at once \
         (MAX_RESOURCE_CHUNKS): add them in parts, or with a larger max_chunk_chars"
    )]
    TooManyChunks {
        /// The chunks the documents cut into.
        chunks: usize,
        /// [`MAX_RESOURCE_CHUNKS`].
        limit: usize,
    },
    /// A directory was read and has no `_overview` entry.
    #[error("{uri} is a directory with no overview; list it with ls or tree")]
    DirectoryWithoutOverview {
        /// The directory that was asked for.
        uri: MemoryUri,
    },
    /// A recursive forget found nothing live.
    #[error("no memory at or below {uri} for tenant {tenant:?}")]
    NothingToForget {
        /// The URI that was asked for.
        uri: MemoryUri,
        /// The tenant whose memories were searched.
        tenant: String,
    },
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ManageError {
    ManageError::InvalidInput {
        field,
        reason: reason.into(),
    }
}

/// The directory of a memory category for `identity` (the user's categories under
/// `viking://user/{user}/memories`, the agent's under `viking://agent/{agent}`, the shared
/// resources and session archives at the root).
pub fn category_dir(
    identity: &MemoryIdentity,
    category: MemoryCategory,
) -> Result<MemoryUri, UriError> {
    match category {
        MemoryCategory::Profile
        | MemoryCategory::Preferences
        | MemoryCategory::Entities
        | MemoryCategory::Events => identity
            .user_root()
            .join(&format!("memories/{}", category.name())),
        MemoryCategory::Cases | MemoryCategory::Patterns => identity
            .agent_root()
            .join(&format!("memories/{}", category.name())),
        MemoryCategory::Skills => identity.agent_root().join("skills"),
        MemoryCategory::Tools => identity.agent_root().join("tools"),
        MemoryCategory::Resources => MemoryUri::root().join("resources"),
        MemoryCategory::Session => MemoryUri::root().join("session"),
    }
}

/// Parses a category name, naming the accepted ones when it is unknown.
pub fn parse_category(text: &str) -> Result<MemoryCategory, ManageError> {
    MemoryCategory::from_name(text.trim()).ok_or_else(|| {
        invalid(
            "category",
            format!(
                "unknown category {text:?}; the categories are {}",
                MemoryCategory::ALL.map(MemoryCategory::name).join(", ")
            ),
        )
    })
}

/// One vector per text, in order.
pub async fn embed_texts(
    embedder: &dyn Embedder,
    texts: &[String],
) -> Result<Vec<Vec<f32>>, ManageError> {
    let failed = |message: String| ManageError::Embedding {
        embedder: embedder.name().to_owned(),
        message,
    };
    let vectors = embedder
        .embed(texts, &CancellationToken::new())
        .await
        .map_err(|error| failed(error.to_string()))?;
    if vectors.len() != texts.len() {
        return Err(failed(format!(
            "returned {} vectors for {} texts",
            vectors.len(),
            texts.len()
        )));
    }
    Ok(vectors)
}

async fn embed_one(embedder: &dyn Embedder, text: &str) -> Result<Vec<f32>, ManageError> {
    embed_texts(embedder, &[text.to_owned()])
        .await?
        .pop()
        .ok_or_else(|| ManageError::Embedding {
            embedder: embedder.name().to_owned(),
            message: "returned no vector".to_owned(),
        })
}

// ---------------------------------------------------------------------------------------------
// search

/// The results of a search.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchReport {
    /// The query text as given.
    pub query: String,
    /// "hybrid" (full text and vectors) or "full-text".
    pub mode: String,
    /// The embedder that embedded the query (`None` in full-text mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedder: Option<String>,
    /// The results `identity` may see, best first, at most `limit` of them.
    pub results: Vec<SearchRow>,
}

/// One search result.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchRow {
    /// Position in the results, from 1.
    pub rank: usize,
    /// The entry's `viking://` URI.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub uri: MemoryUri,
    /// The entry's memory category.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub category: MemoryCategory,
    /// The fused rank score, rounded to four decimals; higher is better, comparable within one
    /// search only.
    pub score: f64,
    /// The entry's abstract (L0); read the rest with `read`.
    pub l0: String,
    /// The entry's priority, 0 (lowest) to 10 (highest).
    pub priority: u8,
    /// When what the entry records happened, RFC 3339 in UTC to the second.
    pub created_at: String,
    /// When its current version was written, RFC 3339 in UTC to the second.
    pub updated_at: String,
}

/// The default categories of a search: every category but the resources (documents are
/// searched on their own).
pub fn memory_categories() -> Vec<MemoryCategory> {
    MemoryCategory::ALL
        .into_iter()
        .filter(|category| *category != MemoryCategory::Resources)
        .collect()
}

/// Searches what `identity` may see (its user's and agent's memories, the resources and the
/// session archives), best first, at most `limit` results.
pub(crate) async fn search_memories(
    store: &dyn MemoryStore,
    embedder: Option<&dyn Embedder>,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    text: &str,
    filter: SearchFilter,
    limit: usize,
) -> Result<SearchReport, ManageError> {
    if text.trim().is_empty() {
        return Err(invalid("query", "the query is empty; say what to look for"));
    }
    // Other users' and agents' memories of the tenant are not this identity's: ask for more and
    // keep the first `limit` that are.
    let mut query = SearchQuery::text(text, (limit * 4).clamp(1, 400)).with_filter(filter);
    if let Some(embedder) = embedder {
        query = query.with_vector(embed_one(embedder, text).await?);
    }
    let hits: Vec<SearchHit> = match crate::blocking(|| store.search(tenant, &query)) {
        Ok(hits) => hits,
        // Only stopwords and no vector: nothing can match.
        Err(MemoryError::InvalidInput { field: "query", .. }) => Vec::new(),
        Err(error) => return Err(error.into()),
    };
    let results = hits
        .into_iter()
        .filter(|hit| identity.can_see(&hit.memory.uri))
        .take(limit)
        .enumerate()
        .map(|(index, hit)| SearchRow {
            rank: index + 1,
            uri: hit.memory.uri,
            category: hit.memory.category,
            score: (hit.score * 10_000.0).round() / 10_000.0,
            l0: hit.memory.l0,
            priority: hit.memory.priority,
            created_at: format_rfc3339_seconds(hit.memory.created_at_ms),
            updated_at: format_rfc3339_seconds(hit.memory.updated_at_ms),
        })
        .collect();
    Ok(SearchReport {
        query: text.to_owned(),
        mode: if embedder.is_some() {
            "hybrid"
        } else {
            "full-text"
        }
        .to_owned(),
        embedder: embedder.map(|embedder| embedder.name().to_owned()),
        results,
    })
}

// ---------------------------------------------------------------------------------------------
// ls

/// One line of a directory listing.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LsRow {
    /// The directory's or entry's `viking://` URI.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub uri: MemoryUri,
    /// The last URI segment, with a trailing `/` for a directory (`viking://` for the root).
    pub name: String,
    /// "directory" or "entry".
    #[serde(rename = "type")]
    pub kind: String,
    /// Directories: live entries below it at any depth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entries: Option<u64>,
    /// Entries: their memory category; `None` for directories.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub category: Option<MemoryCategory>,
    /// Entries: the abstract; directories: the abstract of their `_overview`, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l0: Option<String>,
    /// Entries: their priority, 0 (lowest) to 10 (highest); `None` for directories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// Entries: when their current version was written, RFC 3339 in UTC to the second; `None` for
    /// directories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

fn directory_abstract(store: &dyn MemoryStore, tenant: &Tenant, dir: &MemoryUri) -> Option<String> {
    let overview = dir.join(OVERVIEW_NAME).ok()?;
    store.get(tenant, &overview).ok().map(|memory| memory.l0)
}

fn ls_row(store: &dyn MemoryStore, tenant: &Tenant, entry: DirEntry) -> LsRow {
    let name = entry.uri.name().unwrap_or("viking://").to_owned();
    match entry.kind {
        DirEntryKind::Directory { entries } => LsRow {
            l0: directory_abstract(store, tenant, &entry.uri),
            uri: entry.uri,
            name: format!("{name}/"),
            kind: "directory".to_owned(),
            entries: Some(entries),
            category: None,
            priority: None,
            updated_at: None,
        },
        DirEntryKind::Entry {
            category,
            l0,
            priority,
            updated_at_ms,
        } => LsRow {
            uri: entry.uri,
            name,
            kind: "entry".to_owned(),
            entries: None,
            category: Some(category),
            l0: Some(l0),
            priority: Some(priority),
            updated_at: Some(format_rfc3339_seconds(updated_at_ms)),
        },
    }
}

/// The directories and entries directly in `dir`, directories first.
pub(crate) fn list_directory(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    dir: &MemoryUri,
) -> Result<Vec<LsRow>, ManageError> {
    Ok(store
        .ls(tenant, dir)?
        .into_iter()
        .map(|entry| ls_row(store, tenant, entry))
        .collect())
}

// ---------------------------------------------------------------------------------------------
// read

/// One level of an entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReadReport {
    /// The URI asked for.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub uri: MemoryUri,
    /// The entry the text came from (the `_overview` entry for a directory).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub entry: MemoryUri,
    /// "l0", "l1" or "l2".
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub level: MemoryLevel,
    /// The entry's text at `level`.
    pub text: String,
    /// The entry's memory category.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub category: MemoryCategory,
    /// The entry's live version number (1 for the first write).
    pub version: u32,
    /// The entry's priority, 0 (lowest) to 10 (highest).
    pub priority: u8,
    /// When what the entry records happened, RFC 3339 in UTC to the second.
    pub created_at: String,
    /// When its live version was written, RFC 3339 in UTC to the second.
    pub updated_at: String,
    /// Where the version came from (session and entry ids): its own source first, then those of
    /// merged duplicates; empty for a memory written by hand with no duplicate merged.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub sources: Vec<MemorySource>,
}

/// Reads `level` of the entry at `uri`; a directory reads its `_overview` entry.
pub(crate) fn read_memory(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    uri: &MemoryUri,
    level: MemoryLevel,
) -> Result<ReadReport, ManageError> {
    let direct = if uri.is_entry_location() {
        store.get(tenant, uri).map_err(Some)
    } else {
        Err(None)
    };
    let memory = match direct {
        Ok(memory) => memory,
        Err(error) => {
            let overview = uri
                .join(OVERVIEW_NAME)
                .ok()
                .and_then(|overview| store.get(tenant, &overview).ok());
            match (overview, error) {
                (Some(memory), _) => memory,
                (None, Some(error)) => return Err(error.into()),
                (None, None) => {
                    return Err(ManageError::DirectoryWithoutOverview { uri: uri.clone() });
                }
            }
        }
    };
    Ok(ReadReport {
        uri: uri.clone(),
        entry: memory.uri.clone(),
        level,
        text: memory.text(level).to_owned(),
        category: memory.category,
        version: memory.version,
        priority: memory.priority,
        created_at: format_rfc3339_seconds(memory.created_at_ms),
        updated_at: format_rfc3339_seconds(memory.updated_at_ms),
        sources: memory.sources,
    })
}

// ---------------------------------------------------------------------------------------------
// history

/// One write of the tenant's memories.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WriteRow {
    /// When the write happened, RFC 3339 in UTC to the second.
    pub at: String,
    /// added, updated, merged or forgotten.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub action: WriteAction,
    /// The entry written, updated, forgotten or merged into.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub uri: MemoryUri,
    /// For a merge: where the writer asked to write; `None` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub requested_uri: Option<MemoryUri>,
    /// For a merge: how the duplicate matched (same text, or near with its similarity); `None`
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub duplicate: Option<DuplicateKind>,
    /// The version the write concerns.
    pub version: u32,
    /// The entry's memory category.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub category: MemoryCategory,
    /// That version's abstract.
    pub l0: String,
}

impl From<MemoryWrite> for WriteRow {
    fn from(write: MemoryWrite) -> WriteRow {
        WriteRow {
            at: format_rfc3339_seconds(write.at_ms),
            action: write.action,
            uri: write.uri,
            requested_uri: write.requested_uri,
            duplicate: write.duplicate,
            version: write.version,
            category: write.category,
            l0: write.l0,
        }
    }
}

/// One version of an entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VersionRow {
    /// The version number, from 1.
    pub version: u32,
    /// live, superseded or forgotten.
    pub status: String,
    /// When this version was written, RFC 3339 in UTC to the second.
    pub written_at: String,
    /// When a later version superseded it or it was forgotten; `None` while it is live.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// This version's priority, 0 (lowest) to 10 (highest).
    pub priority: u8,
    /// This version's abstract.
    pub l0: String,
    /// This version's full content.
    pub l2: String,
}

impl From<Memory> for VersionRow {
    fn from(memory: Memory) -> VersionRow {
        let (status, ended_at) = match memory.status {
            MemoryStatus::Live => ("live", None),
            MemoryStatus::Superseded { at_ms, .. } => {
                ("superseded", Some(format_rfc3339_seconds(at_ms)))
            }
            MemoryStatus::Forgotten { at_ms } => ("forgotten", Some(format_rfc3339_seconds(at_ms))),
        };
        VersionRow {
            version: memory.version,
            status: status.to_owned(),
            written_at: format_rfc3339_seconds(memory.updated_at_ms),
            ended_at,
            priority: memory.priority,
            l0: memory.l0,
            l2: memory.l2,
        }
    }
}

/// The tenant's most recent writes, newest first.
pub(crate) fn recent_writes(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    limit: usize,
) -> Result<Vec<WriteRow>, ManageError> {
    Ok(store
        .recent_writes(tenant, limit)?
        .into_iter()
        .map(WriteRow::from)
        .collect())
}

/// Every version of the entry at `uri`, newest first.
pub(crate) fn entry_versions(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    uri: &MemoryUri,
) -> Result<Vec<VersionRow>, ManageError> {
    uri.require_entry()?;
    let mut versions: Vec<VersionRow> = store
        .history(tenant, uri)?
        .into_iter()
        .map(VersionRow::from)
        .collect();
    versions.reverse();
    Ok(versions)
}

// ---------------------------------------------------------------------------------------------
// remember

/// The file name `remember` gives a memory: up to eight of its words as a slug, then eight hex
/// digits of its normalised content hash, so the same content always gets the same name and
/// different contents never share one.
pub fn memory_file_name(content: &str) -> String {
    let words: Vec<&str> = content.split_whitespace().take(8).collect();
    let words = slugify(&words.join(" ")).unwrap_or_else(|| "memory".to_owned());
    let words = skald_core::memory::levels::prefix_chars(&words, 48).trim_end_matches('-');
    let hash = content_hash(content);
    format!("{words}-{}.md", hash.get(..8).unwrap_or(&hash))
}

/// What `remember` wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RememberReport {
    /// "added" (stored as a new entry) or "merged" (a duplicate of `uri`, which now records
    /// this write too).
    pub outcome: String,
    /// Where the memory lives now.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub uri: MemoryUri,
    /// Where it would have been stored.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub requested_uri: MemoryUri,
    /// How the write matched its duplicate (`None` when it was added).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub duplicate: Option<DuplicateKind>,
    /// The memory category it was stored under.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub category: MemoryCategory,
    /// The stored entry's abstract.
    pub l0: String,
    /// The stored entry's priority, 0 (lowest) to 10 (highest).
    pub priority: u8,
    /// Whether the stored entry has a vector (an embedder was given).
    pub embedded: bool,
}

/// Remembers `content` as a memory of `category` for `identity` (in the user's or the agent's
/// directory, as the category says), merged into a live duplicate if there is one.
pub(crate) async fn remember(
    store: &dyn MemoryStore,
    embedder: Option<&dyn Embedder>,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    content: &str,
    category: MemoryCategory,
    priority: Option<u8>,
) -> Result<RememberReport, ManageError> {
    let content = content.trim();
    if content.is_empty() {
        return Err(invalid(
            "content",
            "the content is empty; say what to remember",
        ));
    }
    if priority.is_some_and(|priority| priority > 10) {
        return Err(invalid(
            "priority",
            "the priority is 0 (lowest) to 10 (highest)",
        ));
    }
    let uri = category_dir(identity, category)?.join(&memory_file_name(content))?;
    let mut memory = NewMemory::new(uri.clone(), content);
    if let Some(priority) = priority {
        memory = memory.with_priority(priority);
    }
    if let Some(embedder) = embedder {
        memory = memory.with_embedding(embed_one(embedder, content).await?);
    }
    let outcome = store.add(tenant, memory)?;
    let (name, duplicate) = match &outcome {
        AddOutcome::Added(_) => ("added", None),
        AddOutcome::Merged(merge) => ("merged", Some(merge.kind)),
    };
    let stored = outcome.memory();
    Ok(RememberReport {
        outcome: name.to_owned(),
        uri: stored.uri.clone(),
        requested_uri: uri,
        duplicate,
        category: stored.category,
        l0: stored.l0.clone(),
        priority: stored.priority,
        embedded: stored.embedding_dimensions.is_some(),
    })
}

// ---------------------------------------------------------------------------------------------
// forget

/// An entry forgotten.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ForgetReport {
    /// The entry forgotten.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub uri: MemoryUri,
    /// When it was forgotten, RFC 3339 in UTC to the second.
    pub forgotten_at: String,
    /// The version that was live when it was forgotten.
    pub version: u32,
    /// That version's abstract.
    pub l0: String,
}

impl From<Memory> for ForgetReport {
    fn from(memory: Memory) -> ForgetReport {
        let at_ms = match memory.status {
            MemoryStatus::Forgotten { at_ms } => at_ms,
            MemoryStatus::Live | MemoryStatus::Superseded { .. } => memory.updated_at_ms,
        };
        ForgetReport {
            uri: memory.uri,
            forgotten_at: format_rfc3339_seconds(at_ms),
            version: memory.version,
            l0: memory.l0,
        }
    }
}

/// The live entries at or below `dir` (none when nothing is there).
pub(crate) fn live_entries(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    dir: &MemoryUri,
) -> Result<Vec<MemoryUri>, ManageError> {
    fn collect(node: &TreeNode, out: &mut Vec<MemoryUri>) {
        match node.entry.kind {
            DirEntryKind::Entry { .. } => out.push(node.entry.uri.clone()),
            DirEntryKind::Directory { .. } => {}
        }
        for child in &node.children {
            collect(child, out);
        }
    }
    let tree = match store.tree(tenant, dir, MAX_DEPTH) {
        Ok(tree) => tree,
        Err(MemoryError::NotFound { .. }) => return Ok(Vec::new()),
        Err(error) => return Err(error.into()),
    };
    let mut out = Vec::new();
    collect(&tree, &mut out);
    Ok(out)
}

/// Forgets the entry at `uri`, or with `recursive` every live entry at or below it.
pub(crate) fn forget(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    uri: &MemoryUri,
    recursive: bool,
) -> Result<Vec<ForgetReport>, ManageError> {
    if !recursive {
        uri.require_entry()?;
        return Ok(vec![store.forget(tenant, uri)?.into()]);
    }
    let entries = live_entries(store, tenant, uri)?;
    if entries.is_empty() {
        return Err(ManageError::NothingToForget {
            uri: uri.clone(),
            tenant: tenant.to_string(),
        });
    }
    let mut reports = Vec::new();
    for entry in entries {
        reports.push(store.forget(tenant, &entry)?.into());
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn file_names_become_uri_segments() {
        assert_eq!(segment_of("auth.md"), "auth.md");
        assert_eq!(segment_of("my notes (v2).txt"), "my-notes--v2-.txt");
        assert_eq!(segment_of(".env"), "env");
        assert_eq!(segment_of("_overview"), "_overview-file");
        assert_eq!(segment_of("..."), "unnamed");
        assert!(segment_of(&"é".repeat(200)).len() <= MAX_SEGMENT_LEN);
        for name in ["a:b", "日本語.md", "x?y#z"] {
            let segment = segment_of(name);
            assert!(
                MemoryUri::parse(&format!("viking://resources/{segment}")).is_ok(),
                "{name}"
            );
        }
    }

    #[test]
    fn chunk_abstracts_name_the_heading_and_the_first_sentence() {
        let chunk = Chunk {
            slug: "auth".to_owned(),
            title: Some("Auth".to_owned()),
            text: "# Auth\nTokens expire after one hour. Refresh them.".to_owned(),
        };
        assert_eq!(
            chunk_abstract(&chunk),
            "Auth — Tokens expire after one hour."
        );
    }

    #[test]
    fn remembered_names_are_stable_slugs_with_a_content_hash() {
        let name = memory_file_name("Alice prefers dark mode in every editor.");
        assert!(
            name.starts_with("alice-prefers-dark-mode-in-every-editor-"),
            "{name}"
        );
        assert!(name.ends_with(".md"));
        assert_eq!(
            name,
            memory_file_name("alice prefers  dark mode in every editor")
        );
        assert_ne!(
            name,
            memory_file_name("Alice prefers light mode in every editor.")
        );
        assert!(memory_file_name("!!!").starts_with("memory-"));
        assert!(memory_file_name(&"long ".repeat(100)).len() < 70);
    }

    #[test]
    fn categories_map_to_the_users_and_the_agents_directories() {
        let identity = MemoryIdentity::new("alice", "main").unwrap();
        let dir = |category| category_dir(&identity, category).unwrap().to_string();
        assert_eq!(
            dir(MemoryCategory::Preferences),
            "viking://user/alice/memories/preferences"
        );
        assert_eq!(
            dir(MemoryCategory::Cases),
            "viking://agent/main/memories/cases"
        );
        assert_eq!(dir(MemoryCategory::Tools), "viking://agent/main/tools");
        assert_eq!(dir(MemoryCategory::Resources), "viking://resources");
        let error = parse_category("memos").unwrap_err().to_string();
        assert!(
            error.contains("memos") && error.contains("preferences"),
            "{error}"
        );
    }
}
