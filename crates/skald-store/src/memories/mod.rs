//! The memory store: long-term memories under `viking://` URIs, per tenant, in the same
//! database file as the ref and session stores.
//!
//! What this module owns:
//! - [`MemoryStore`], the interface the engine (write path, recall, agent tools) and the CLI use,
//!   and [`SqliteMemoryStore`], the product behind it.
//! - The policies every backend shares: [`search`] ranks and fuses (over the
//!   [`search::SearchPrimitives`] a backend provides: candidates with raw scores, document
//!   counts, rows by id) and [`dedup`] decides what is a duplicate on the write path (over the
//!   [`dedup::DuplicatePrimitives`] lookups). A second backend implements the primitives, not
//!   the policies, so it returns the same hits in the same order with the same scores.
//! - **Entries.** Each lives at an entry location of the layout
//!   ([`MemoryUri::is_entry_location`]) and has an L0 abstract (≤ 256 chars), an L1 overview
//!   (≤ 4,000 chars) and L2 content; a writer that gives no L0/L1 gets them derived without an
//!   LLM ([`skald_core::memory::levels`]). Its category follows from the URI. It records when it
//!   was created (the caller may date it, e.g. by the session it came from), when this version
//!   was written, its sources (session and entry ids; merged duplicates add theirs), a priority
//!   (0–10) and its tenant.
//! - **Add-only.** [`MemoryStore::update`] writes a new version that supersedes the live one;
//!   [`MemoryStore::forget`] marks the live version forgotten. No version is ever changed or
//!   removed (the schema's triggers refuse it, whoever asks): [`MemoryStore::history`] reads
//!   every version. Only the derived search data of a version that stops being live is dropped.
//! - **Never stored twice.** [`MemoryStore::add`] compares new content with the live entries of
//!   the same owner ([`MemoryUri::dedup_root`]: a user's or agent's memories, one skill, one tool,
//!   the resources, one session): an exact duplicate (same normalised text) or a near duplicate
//!   (word-pair Jaccard ≥ [`MemorySettings::near_duplicate_threshold`]) is merged into the entry
//!   already there — the new sources are recorded on it — and [`AddOutcome::Merged`] says which.
//! - **Search.** [`MemoryStore::search`]: BM25 over SQLite FTS5 (porter stemming, unicode61),
//!   a second BM25 ranking inside the dates the query names, the BM25 ranking re-ordered by
//!   directory (a directory where several entries match lifts them all), and cosine similarity
//!   over stored vectors when the caller passes a query vector. The BM25 and cosine scores are
//!   combined by min-max score fusion ([`VectorFusion::Score`], the default) into one relevance
//!   ranking, which is fused with the date and directory rankings by reciprocal rank fusion
//!   (k = 60); [`VectorFusion::Rank`] makes the vector ranking one more RRF list instead.
//!   Filters: categories, a directory, a creation-time range. Everything works with no vectors.
//! - **A tree.** [`MemoryStore::ls`] and [`MemoryStore::tree`] list directories as they follow
//!   from the live entries' URIs.
//!
//! Bad input (a directory where an entry belongs, an over-long L0, a vector with a NaN…) is a
//! [`MemoryError`] that names the problem, and nothing is written.
//!
//! ```
//! use skald_core::ids::Tenant;
//! use skald_core::memory::uri::MemoryUri;
//! use skald_store::memories::{
//!     AddOutcome, DuplicateKind, MemoryStore, NewMemory, SearchQuery, SqliteMemoryStore,
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = SqliteMemoryStore::in_memory()?;
//! let (acme, globex) = (Tenant::parse("acme")?, Tenant::parse("globex")?);
//! let uri = MemoryUri::parse("viking://user/alice/memories/preferences/editor.md")?;
//! store.add(&acme, NewMemory::new(uri.clone(), "Alice prefers dark mode in every editor."))?;
//!
//! // The same fact again, elsewhere: merged into the entry already there, not stored twice.
//! let again = MemoryUri::parse("viking://user/alice/memories/preferences/theme.md")?;
//! let outcome = store.add(&acme, NewMemory::new(again, "alice prefers dark mode in every editor"))?;
//! assert!(matches!(outcome, AddOutcome::Merged(ref merge) if merge.kind == DuplicateKind::Exact));
//!
//! // An update is a new version; the old one stays readable.
//! store.update(&acme, NewMemory::new(uri.clone(), "Alice prefers light mode since May."))?;
//! assert_eq!(store.history(&acme, &uri)?.len(), 2);
//!
//! let hits = store.search(&acme, &SearchQuery::text("which mode does alice prefer", 5))?;
//! assert_eq!(hits[0].memory.l2, "Alice prefers light mode since May.");
//!
//! // Nothing crosses tenants; a forgotten entry is gone from search and reads.
//! assert!(store.search(&globex, &SearchQuery::text("alice", 5))?.is_empty());
//! store.forget(&acme, &uri)?;
//! assert!(store.get(&acme, &uri).is_err());
//! # Ok(())
//! # }
//! ```

pub mod dedup;
mod error;
pub mod lease;
mod listing;
pub(crate) mod postgres;
mod rows;
pub mod search;
mod sqlite;

use serde::{Deserialize, Serialize};
use skald_core::ids::Tenant;
use skald_core::memory::dedup::{DEFAULT_NEAR_DUPLICATE_THRESHOLD, MIN_NEAR_DUPLICATE_THRESHOLD};
use skald_core::memory::levels::{MAX_ABSTRACT_CHARS, MAX_OVERVIEW_CHARS};
use skald_core::memory::uri::{MemoryCategory, MemoryUri};

pub use error::MemoryError;
pub use lease::LeaseState;
pub use postgres::PgMemoryStore;
pub use sqlite::SqliteMemoryStore;

/// The RRF weight of the vector ranking in [`VectorFusion::Rank`] when none is given.
pub const DEFAULT_VECTOR_WEIGHT: f64 = 0.3;

/// The vector side's share of the relevance score in [`VectorFusion::Score`], the default.
pub const DEFAULT_VECTOR_SHARE: f64 = 0.4;

/// The highest priority.
pub const MAX_PRIORITY: u8 = 10;

/// The priority of an entry written without one.
pub const DEFAULT_PRIORITY: u8 = 5;

/// The largest L2 content accepted, in bytes (a resource chunk, a session archive).
pub const MAX_CONTENT_BYTES: usize = 1 << 20;

/// The most results one search returns.
pub const MAX_SEARCH_LIMIT: usize = 1000;

/// The most dimensions of a stored or query vector.
pub const MAX_VECTOR_DIMENSIONS: usize = 8192;

/// The most sources (merges included) listed with an entry.
pub const MAX_SOURCE_ENTRY_IDS: usize = 1000;

/// Where a memory came from: the session and the session entries it was extracted from (both
/// optional: a memory the user dictated has neither).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MemorySource {
    /// The session the memory was extracted from; `None` when it came from no session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Ids of the session entries it was extracted from, at most [`MAX_SOURCE_ENTRY_IDS`];
    /// empty when none are known.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub entry_ids: Vec<String>,
}

impl MemorySource {
    /// A source in session `session_id`, from the given entries.
    pub fn new(
        session_id: impl Into<String>,
        entry_ids: impl IntoIterator<Item = impl Into<String>>,
    ) -> MemorySource {
        MemorySource {
            session_id: Some(session_id.into()),
            entry_ids: entry_ids.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether it names nothing.
    pub fn is_empty(&self) -> bool {
        self.session_id.is_none() && self.entry_ids.is_empty()
    }
}

/// An entry to write ([`MemoryStore::add`]) or a new version of one ([`MemoryStore::update`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    /// Where it lives: an entry location of the layout.
    pub uri: MemoryUri,
    /// L2: the full content. Not empty, at most [`MAX_CONTENT_BYTES`].
    pub content: String,
    /// L0: an abstract of at most 256 characters; `None` derives the first sentence.
    pub l0: Option<String>,
    /// L1: an overview of at most 4,000 characters; `None` derives the leading text.
    pub l1: Option<String>,
    /// 0 (lowest) to [`MAX_PRIORITY`]; `None`: [`DEFAULT_PRIORITY`] for a new entry, the
    /// previous version's for an update.
    pub priority: Option<u8>,
    /// Where it came from; an empty source on an update keeps the previous version's sources.
    pub source: MemorySource,
    /// When what it records happened or was said (ms since the Unix epoch); `None`: now for a
    /// new entry, the first version's for an update.
    pub created_at_ms: Option<i64>,
    /// An embedding of the content, from whatever model the caller uses.
    pub embedding: Option<Vec<f32>>,
}

impl NewMemory {
    /// An entry with only its content: levels derived, default priority, no source, dated now.
    pub fn new(uri: MemoryUri, content: impl Into<String>) -> NewMemory {
        NewMemory {
            uri,
            content: content.into(),
            l0: None,
            l1: None,
            priority: None,
            source: MemorySource::default(),
            created_at_ms: None,
            embedding: None,
        }
    }

    /// Gives the L0 abstract (1 to 256 characters) instead of deriving it.
    pub fn with_l0(mut self, l0: impl Into<String>) -> NewMemory {
        self.l0 = Some(l0.into());
        self
    }

    /// Gives the L1 overview (1 to 4,000 characters) instead of deriving it.
    pub fn with_l1(mut self, l1: impl Into<String>) -> NewMemory {
        self.l1 = Some(l1.into());
        self
    }

    /// Sets the priority, 0 (lowest) to [`MAX_PRIORITY`].
    pub fn with_priority(mut self, priority: u8) -> NewMemory {
        self.priority = Some(priority);
        self
    }

    /// Records where the memory came from.
    pub fn with_source(mut self, source: MemorySource) -> NewMemory {
        self.source = source;
        self
    }

    /// Dates the memory at `created_at_ms` (ms since the Unix epoch), e.g. the time of the
    /// session it was drawn from, instead of now.
    pub fn created_at(mut self, created_at_ms: i64) -> NewMemory {
        self.created_at_ms = Some(created_at_ms);
        self
    }

    /// Stores `embedding` as the entry's vector (1 to [`MAX_VECTOR_DIMENSIONS`] finite
    /// components, not all zero).
    pub fn with_embedding(mut self, embedding: Vec<f32>) -> NewMemory {
        self.embedding = Some(embedding);
        self
    }
}

/// Whether a version is the live one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum MemoryStatus {
    /// The current version of its URI.
    Live,
    /// Replaced by version `by` (a [`Memory::id`]) at `at_ms`.
    Superseded {
        /// The [`Memory::id`] of the version that replaced it.
        by: i64,
        /// When it was replaced, in ms since the Unix epoch.
        at_ms: i64,
    },
    /// Forgotten at `at_ms`; search and reads no longer see it.
    Forgotten {
        /// When it was forgotten, in ms since the Unix epoch.
        at_ms: i64,
    },
}

/// Which level of an entry to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryLevel {
    /// The abstract (≤ 256 chars).
    L0,
    /// The overview (≤ 4,000 chars).
    L1,
    /// The full content.
    L2,
}

/// One version of an entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memory {
    /// The version's id, unique in the database.
    pub id: i64,
    /// The tenant the entry belongs to.
    pub tenant: String,
    /// Where the entry lives: an entry location of the layout.
    pub uri: MemoryUri,
    /// 1 for the first version of the URI, then 2, 3…
    pub version: u32,
    /// The category, as the URI decides it ([`MemoryUri::category`]).
    pub category: MemoryCategory,
    /// The abstract.
    pub l0: String,
    /// The overview.
    pub l1: String,
    /// The full content.
    pub l2: String,
    /// 0 (lowest) to [`MAX_PRIORITY`].
    pub priority: u8,
    /// The version's own source first (when it has one), then those of merged duplicates.
    pub sources: Vec<MemorySource>,
    /// When what it records happened (ms since the Unix epoch).
    pub created_at_ms: i64,
    /// When this version was written (ms since the Unix epoch).
    pub updated_at_ms: i64,
    /// Whether this version is live, superseded or forgotten.
    pub status: MemoryStatus,
    /// The [`Memory::id`] of the version this one replaced; `None` for a first version.
    pub supersedes: Option<i64>,
    /// SHA-256 of the normalised L2 ([`skald_core::memory::dedup::content_hash`]).
    pub content_hash: String,
    /// The dimensions of its stored vector, if any.
    pub embedding_dimensions: Option<usize>,
}

impl Memory {
    /// The text at `level`.
    pub fn text(&self, level: MemoryLevel) -> &str {
        match level {
            MemoryLevel::L0 => &self.l0,
            MemoryLevel::L1 => &self.l1,
            MemoryLevel::L2 => &self.l2,
        }
    }

    /// Every session entry id the entry was drawn from (its own and merged sources).
    pub fn source_entry_ids(&self) -> impl Iterator<Item = &str> {
        self.sources
            .iter()
            .flat_map(|source| source.entry_ids.iter().map(String::as_str))
    }
}

/// How a duplicate matched.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DuplicateKind {
    /// Same normalised text.
    Exact,
    /// Word-pair Jaccard similarity at or above the threshold.
    Near {
        /// The word-pair Jaccard similarity of the written content to the entry's L2, 0.0 to 1.0.
        similarity: f64,
    },
}

/// A write that was merged into an existing entry instead of being stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Merge {
    /// Where the caller asked to write.
    pub requested_uri: MemoryUri,
    /// The live entry it was merged into, with the new source added.
    pub into: Memory,
    /// Whether the write was an exact or a near duplicate of it.
    pub kind: DuplicateKind,
}

/// What [`MemoryStore::add`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AddOutcome {
    /// Stored as a new entry (or a new version of a forgotten one).
    Added(Memory),
    /// A duplicate of a live entry: merged, not stored.
    Merged(Merge),
}

impl AddOutcome {
    /// The entry that holds the content now.
    pub fn memory(&self) -> &Memory {
        match self {
            AddOutcome::Added(memory) => memory,
            AddOutcome::Merged(merge) => &merge.into,
        }
    }
}

/// What [`MemoryStore::update`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum UpdateOutcome {
    /// A new version was written; `previous` is now superseded.
    Updated {
        /// The new live version.
        memory: Memory,
        /// The version it replaced, as stored now: [`MemoryStatus::Superseded`] by `memory`.
        previous: Box<Memory>,
    },
    /// Content, levels, priority and source equal the live version's: nothing was written.
    Unchanged(Memory),
}

impl UpdateOutcome {
    /// The live version after the update.
    pub fn memory(&self) -> &Memory {
        match self {
            UpdateOutcome::Updated { memory, .. } | UpdateOutcome::Unchanged(memory) => memory,
        }
    }
}

/// One line of a directory listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirEntry {
    /// The directory's or the entry's URI.
    pub uri: MemoryUri,
    /// Whether it is a directory or an entry, with what a listing shows of it.
    #[serde(flatten)]
    pub kind: DirEntryKind,
}

/// A directory or an entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DirEntryKind {
    /// A directory, with the number of live entries below it at any depth.
    Directory {
        /// Live entries at any depth below the directory.
        entries: u64,
    },
    /// An entry, with its abstract.
    Entry {
        /// The entry's category.
        category: MemoryCategory,
        /// The live version's L0 abstract.
        l0: String,
        /// The live version's priority, 0 to [`MAX_PRIORITY`].
        priority: u8,
        /// When the live version was written, in ms since the Unix epoch.
        updated_at_ms: i64,
    },
}

/// A directory and what is below it, to a depth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeNode {
    /// This directory or entry.
    #[serde(flatten)]
    pub entry: DirEntry,
    /// Empty for entries, and for directories at the depth limit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<TreeNode>,
}

impl TreeNode {
    /// An indented text rendering: one line per node, directories with a trailing `/` and
    /// their entry count, entries with their abstract.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_into(&mut out, 0);
        out
    }

    fn render_into(&self, out: &mut String, depth: usize) {
        let indent = "  ".repeat(depth);
        let name = if depth == 0 {
            self.entry.uri.as_str().to_owned()
        } else {
            self.entry.uri.name().unwrap_or("").to_owned()
        };
        match &self.entry.kind {
            DirEntryKind::Directory { entries } => {
                let slash = if name.ends_with('/') { "" } else { "/" };
                out.push_str(&format!("{indent}{name}{slash} ({entries})\n"));
            }
            DirEntryKind::Entry { l0, .. } => {
                out.push_str(&format!("{indent}{name} — {l0}\n"));
            }
        }
        for child in &self.children {
            child.render_into(out, depth + 1);
        }
    }
}

/// What to search for.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchQuery {
    /// Natural-language text; analysed by [`skald_core::memory::query::QueryPlan`].
    pub text: String,
    /// A query vector from the same model as the stored vectors (optional).
    pub vector: Option<Vec<f32>>,
    /// Which entries may be returned; the default filters nothing.
    pub filter: SearchFilter,
    /// How many hits to return, 1 to [`MAX_SEARCH_LIMIT`].
    pub limit: usize,
    /// Rank a second time within the dates the text names (on by default through
    /// [`SearchQuery::text`]).
    pub date_ranking: bool,
}

impl SearchQuery {
    /// A text query with no filter, date ranking on.
    pub fn text(text: impl Into<String>, limit: usize) -> SearchQuery {
        SearchQuery {
            text: text.into(),
            vector: None,
            filter: SearchFilter::default(),
            limit,
            date_ranking: true,
        }
    }

    /// Adds a query vector, for the vector ranking.
    pub fn with_vector(mut self, vector: Vec<f32>) -> SearchQuery {
        self.vector = Some(vector);
        self
    }

    /// Restricts the search to the entries `filter` lets through.
    pub fn with_filter(mut self, filter: SearchFilter) -> SearchQuery {
        self.filter = filter;
        self
    }
}

/// Which entries a search may return. Empty fields do not filter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SearchFilter {
    /// Any of these categories.
    pub categories: Vec<MemoryCategory>,
    /// At or below this URI.
    pub under: Option<MemoryUri>,
    /// Created at or after (ms since the Unix epoch).
    pub created_from_ms: Option<i64>,
    /// Created before (exclusive).
    pub created_until_ms: Option<i64>,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    /// The live version that matched, with all its sources.
    pub memory: Memory,
    /// The fused score (`Σ weight / (60 + rank)` over the rankings fused); comparable within one
    /// search only.
    pub score: f64,
    /// 0-based rank in the BM25 ranking; `None` when the hit is not among the full-text
    /// candidates.
    pub text_rank: Option<usize>,
    /// FTS5's bm25 value at `text_rank` (negative, lower is better); `None` with `text_rank`.
    pub bm25: Option<f64>,
    /// The hit's BM25 on an absolute scale, 0 to 1: relative to the query's reference score
    /// (what a memory of average length naming the query's three most informative words once
    /// each scores; [`skald_core::memory::bm25`]). Unlike `score`, it says how relevant the hit
    /// is, not how it ranks; recall's relevance floor reads it. `None` when no full-text ranking
    /// (the plain one or the one inside the query's dates) found the hit.
    pub text_relevance: Option<f64>,
    /// 0-based rank in the BM25 ranking restricted to the query's dates.
    pub date_rank: Option<usize>,
    /// 0-based rank in the vector ranking; `None` when the query has no vector or the hit is not
    /// among the vector candidates.
    pub vector_rank: Option<usize>,
    /// The cosine similarity of the hit's vector to the query vector; `None` with `vector_rank`.
    pub cosine: Option<f32>,
    /// 0-based rank in the BM25 ranking re-ordered by directory relevance.
    pub directory_rank: Option<usize>,
}

/// What one write did ([`MemoryStore::recent_writes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteAction {
    /// A new entry (or a new version of a forgotten one).
    Added,
    /// A new version that superseded the live one.
    Updated,
    /// A duplicate merged into the live entry; nothing new was stored.
    Merged,
    /// The live version was forgotten.
    Forgotten,
}

/// One write of a tenant's memories, as [`MemoryStore::recent_writes`] lists them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryWrite {
    /// When it happened (ms since the Unix epoch).
    pub at_ms: i64,
    /// What the write did.
    pub action: WriteAction,
    /// The entry written, updated, forgotten, or merged into.
    pub uri: MemoryUri,
    /// For a merge: where the writer asked to write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_uri: Option<MemoryUri>,
    /// For a merge: how the duplicate matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<DuplicateKind>,
    /// The version concerned (its [`Memory::id`] and number).
    pub memory_id: i64,
    /// That version's number at its URI ([`Memory::version`]).
    pub version: u32,
    /// The entry's category.
    pub category: MemoryCategory,
    /// That version's abstract.
    pub l0: String,
}

/// Counts of a tenant's versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct MemoryStats {
    /// Live versions: one per entry that search and reads see.
    pub live: u64,
    /// Versions replaced by a newer version at their URI.
    pub superseded: u64,
    /// Versions forgotten and not replaced since.
    pub forgotten: u64,
    /// Writes merged into an existing entry.
    pub merged: u64,
    /// Live entries with a stored vector.
    pub with_embedding: u64,
}

/// BM25 weights of the indexed fields. L0 and L1 are indexed only when the writer gave them
/// (derived levels repeat L2's words, which would count them twice).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColumnWeights {
    /// The words of the URI below its fixed layout (names of users, entities, files).
    pub path: f64,
    /// The L0 abstract, when the writer gave one.
    pub l0: f64,
    /// The L1 overview, when the writer gave one.
    pub l1: f64,
    /// The L2 content.
    pub l2: f64,
}

impl Default for ColumnWeights {
    fn default() -> ColumnWeights {
        ColumnWeights {
            path: 0.5,
            l0: 1.0,
            l1: 0.4,
            l2: 1.0,
        }
    }
}

/// How the store deduplicates and ranks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemorySettings {
    /// Word-pair Jaccard similarity from which a write is merged into an existing entry, from
    /// 0.6 to 1.0; `None` merges exact duplicates only.
    pub near_duplicate_threshold: Option<f64>,
    /// The BM25 weights of the indexed fields; finite and not negative.
    pub weights: ColumnWeights,
    /// How deep each ranking goes before fusion (at least the search limit).
    pub candidates: usize,
    /// The RRF weight of the directory ranking (the BM25 ranking re-ordered by how well each
    /// entry's directory matches as a whole); 0 turns it off.
    pub directory_weight: f64,
    /// How the vector ranking (when the query has a vector) joins the text ranking.
    pub vector_fusion: VectorFusion,
}

/// How hybrid search combines the cosine ranking with the BM25 ranking.
///
/// Small sentence embedders rank conversational memories worse than BM25 on average, so the
/// vector side refines the text ranking rather than outvoting it; but when it puts a hit far
/// ahead of the rest (a paraphrase BM25 cannot match), that margin is worth keeping, which
/// rank fusion throws away. On LoCoMo with all-MiniLM-L6-v2, score fusion at share 0.4 is the
/// first setting to reach both recall targets (README).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum VectorFusion {
    /// The vector ranking is one more list of the reciprocal rank fusion, of this weight (the
    /// BM25 ranking's is 1); 0 turns it off.
    Rank {
        /// The RRF weight of the vector ranking; finite and not negative.
        weight: f64,
    },
    /// Min-max score fusion ([`skald_core::memory::fusion::min_max_score_fusion`]): the BM25
    /// scores of the text candidates and the cosines of the vector candidates are each mapped to
    /// [0, 1] within the query, and `(1 - share) × text + share × vector` orders the relevance
    /// ranking that takes the BM25 ranking's place in the reciprocal rank fusion. `share` is
    /// from 0 (text only) to 1 (vectors only).
    Score {
        /// The vector side's share of the relevance score, 0 to 1.
        share: f64,
    },
}

impl Default for VectorFusion {
    fn default() -> VectorFusion {
        VectorFusion::Score {
            share: DEFAULT_VECTOR_SHARE,
        }
    }
}

impl Default for MemorySettings {
    fn default() -> MemorySettings {
        MemorySettings {
            near_duplicate_threshold: Some(DEFAULT_NEAR_DUPLICATE_THRESHOLD),
            weights: ColumnWeights::default(),
            candidates: 100,
            directory_weight: 0.5,
            vector_fusion: VectorFusion::default(),
        }
    }
}

impl MemorySettings {
    /// Checks every setting, naming the one out of range.
    pub fn validate(&self) -> Result<(), MemoryError> {
        if let Some(threshold) = self
            .near_duplicate_threshold
            .filter(|threshold| !(MIN_NEAR_DUPLICATE_THRESHOLD..=1.0).contains(threshold))
        {
            return Err(MemoryError::InvalidSettings(format!(
                "near_duplicate_threshold is {threshold}; it must be from \
                 {MIN_NEAR_DUPLICATE_THRESHOLD} to 1.0 (or none for exact duplicates only)"
            )));
        }
        let weights = self.weights;
        for (name, weight) in [
            ("path", weights.path),
            ("l0", weights.l0),
            ("l1", weights.l1),
            ("l2", weights.l2),
        ] {
            if !weight.is_finite() || weight < 0.0 {
                return Err(MemoryError::InvalidSettings(format!(
                    "the {name} weight is {weight}; weights are finite and not negative"
                )));
            }
        }
        match self.vector_fusion {
            VectorFusion::Rank { weight } => {
                if !weight.is_finite() || weight < 0.0 {
                    return Err(MemoryError::InvalidSettings(format!(
                        "the vector ranking's weight is {weight}; it is finite and not negative"
                    )));
                }
            }
            VectorFusion::Score { share } => {
                if !(0.0..=1.0).contains(&share) {
                    return Err(MemoryError::InvalidSettings(format!(
                        "the vector share of score fusion is {share}; it must be from 0 to 1"
                    )));
                }
            }
        }
        if !self.directory_weight.is_finite() || self.directory_weight < 0.0 {
            return Err(MemoryError::InvalidSettings(format!(
                "directory_weight is {}; it is finite and not negative",
                self.directory_weight
            )));
        }
        if self.candidates == 0 || self.candidates > 10 * MAX_SEARCH_LIMIT {
            return Err(MemoryError::InvalidSettings(format!(
                "candidates is {}; it must be from 1 to {}",
                self.candidates,
                10 * MAX_SEARCH_LIMIT
            )));
        }
        Ok(())
    }
}

/// The interface of a memory store. Every method takes the tenant; an entry of one tenant does
/// not exist for any other. Writes are atomic (a failed write changes nothing) and durable when
/// they return.
pub trait MemoryStore: Send + Sync {
    /// Writes a new entry, or merges it into a live duplicate of the same owner. Refused when a
    /// different live entry is at the URI ([`MemoryError::AlreadyExists`]: use `update`), or
    /// when the URI is inside or above another entry ([`MemoryError::PathConflict`]).
    fn add(&self, tenant: &Tenant, memory: NewMemory) -> Result<AddOutcome, MemoryError>;

    /// [`MemoryStore::add`] for many entries in one transaction, in order (later ones can merge
    /// into earlier ones). If any fails, nothing is written and the error names its index.
    fn add_many(
        &self,
        tenant: &Tenant,
        memories: Vec<NewMemory>,
    ) -> Result<Vec<AddOutcome>, MemoryError>;

    /// [`MemoryStore::add_many`] that gives up when `keep_going` says so: it is asked before
    /// each entry, inside the transaction, and a `false` rolls everything back and answers
    /// [`MemoryError::Cancelled`], so nothing of the batch is written. For a batch whose
    /// requester may leave (a client that disconnects) and that should then stop costing.
    fn add_many_while(
        &self,
        tenant: &Tenant,
        memories: Vec<NewMemory>,
        keep_going: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<AddOutcome>, MemoryError> {
        if !keep_going() {
            return Err(MemoryError::Cancelled);
        }
        self.add_many(tenant, memories)
    }

    /// Writes a new version of the live entry at `memory.uri`, superseding it. No duplicate
    /// check: an update is an explicit decision about this entry.
    fn update(&self, tenant: &Tenant, memory: NewMemory) -> Result<UpdateOutcome, MemoryError>;

    /// Marks the live entry at `uri` forgotten and returns that version.
    fn forget(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Memory, MemoryError>;

    /// The live entry at `uri`.
    fn get(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Memory, MemoryError>;

    /// Every version ever written at `uri`, oldest first (superseded and forgotten included).
    fn history(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Vec<Memory>, MemoryError>;

    /// The directories and entries directly in `dir`, directories first, then by name. A
    /// directory exists while a live entry is below it; an entry URI lists as itself.
    fn ls(&self, tenant: &Tenant, dir: &MemoryUri) -> Result<Vec<DirEntry>, MemoryError>;

    /// `dir` and everything below it, down to `max_depth` levels (0: `dir` alone).
    fn tree(
        &self,
        tenant: &Tenant,
        dir: &MemoryUri,
        max_depth: usize,
    ) -> Result<TreeNode, MemoryError>;

    /// The live entries that best match `query`, best first (see the module docs).
    fn search(&self, tenant: &Tenant, query: &SearchQuery) -> Result<Vec<SearchHit>, MemoryError>;

    /// Stores (or replaces) the vector of the live entry at `uri`. Vectors are derived data, so
    /// replacing one (a new embedding model) is not a new version.
    fn set_embedding(
        &self,
        tenant: &Tenant,
        uri: &MemoryUri,
        vector: &[f32],
    ) -> Result<(), MemoryError>;

    /// Counts of the tenant's versions.
    fn stats(&self, tenant: &Tenant) -> Result<MemoryStats, MemoryError>;

    /// The tenant's most recent writes across all entries, newest first: adds, updates, merges
    /// and forgets, at most `limit` (1 to [`MAX_SEARCH_LIMIT`]). A store that keeps no such log
    /// refuses with [`MemoryError::InvalidInput`].
    fn recent_writes(
        &self,
        tenant: &Tenant,
        limit: usize,
    ) -> Result<Vec<MemoryWrite>, MemoryError> {
        let _ = (tenant, limit);
        Err(MemoryError::invalid(
            "recent_writes",
            "this memory store does not list its writes",
        ))
    }

    /// Claims the tenant's lease `name` for `holder` for `ttl_ms` (see [`lease`]), in one
    /// atomic step: a lease nobody holds, one whose time ran out, or the holder's own (renewed)
    /// becomes [`LeaseState::Claimed`]; otherwise the answer is who holds it
    /// ([`LeaseState::Held`]) or the result it was finished with ([`LeaseState::Finished`]).
    /// Of several callers claiming at once, one gets it.
    fn claim_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<LeaseState, MemoryError>;

    /// Stores `result` on the lease `holder` holds (its time may have run out, as long as no one
    /// took it over) and keeps it: every later claim answers [`LeaseState::Finished`]. `false`
    /// when the lease is not `holder`'s (nothing is written).
    fn finish_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
        result: &str,
    ) -> Result<bool, MemoryError>;

    /// Gives up the lease `holder` holds, unfinished, so the next claim takes it. `false` when
    /// it is not `holder`'s.
    fn release_lease(&self, tenant: &Tenant, name: &str, holder: &str)
    -> Result<bool, MemoryError>;

    /// The lease `name` as `viewer` sees it now, without claiming it.
    fn lease(&self, tenant: &Tenant, name: &str, viewer: &str) -> Result<LeaseState, MemoryError>;
}

/// Checks what a writer gives before anything is read or written.
fn validate_new(memory: &NewMemory) -> Result<(), MemoryError> {
    memory.uri.require_entry()?;
    if memory.content.trim().is_empty() {
        return Err(MemoryError::invalid(
            "content",
            "the L2 content is empty; a memory records something",
        ));
    }
    if memory.content.len() > MAX_CONTENT_BYTES {
        return Err(MemoryError::invalid(
            "content",
            format!(
                "the L2 content is {} bytes; at most {MAX_CONTENT_BYTES} are accepted (split a \
                 document into several resources)",
                memory.content.len()
            ),
        ));
    }
    if let Some(l0) = &memory.l0 {
        let chars = l0.chars().count();
        if chars > MAX_ABSTRACT_CHARS || l0.trim().is_empty() {
            return Err(MemoryError::invalid(
                "l0",
                format!(
                    "the L0 abstract has {chars} characters; it must have 1 to \
                     {MAX_ABSTRACT_CHARS} (or leave it out to derive it)"
                ),
            ));
        }
    }
    if let Some(l1) = &memory.l1 {
        let chars = l1.chars().count();
        if chars > MAX_OVERVIEW_CHARS || l1.trim().is_empty() {
            return Err(MemoryError::invalid(
                "l1",
                format!(
                    "the L1 overview has {chars} characters; it must have 1 to \
                     {MAX_OVERVIEW_CHARS} (or leave it out to derive it)"
                ),
            ));
        }
    }
    if let Some(priority) = memory.priority.filter(|priority| *priority > MAX_PRIORITY) {
        return Err(MemoryError::invalid(
            "priority",
            format!("the priority is {priority}; it must be from 0 to {MAX_PRIORITY}"),
        ));
    }
    validate_source(&memory.source)?;
    if let Some(vector) = &memory.embedding {
        validate_vector("embedding", vector)?;
    }
    Ok(())
}

fn validate_source(source: &MemorySource) -> Result<(), MemoryError> {
    if let Some(session) = &source.session_id {
        crate::sessions::validate_session_id(session)
            .map_err(|error| MemoryError::invalid("source.session_id", error.to_string()))?;
    }
    if source.entry_ids.len() > MAX_SOURCE_ENTRY_IDS {
        return Err(MemoryError::invalid(
            "source.entry_ids",
            format!(
                "{} entry ids; at most {MAX_SOURCE_ENTRY_IDS} are accepted",
                source.entry_ids.len()
            ),
        ));
    }
    for id in &source.entry_ids {
        if let Err(error) = crate::sessions::validate_entry_id(id) {
            return Err(MemoryError::invalid("source.entry_ids", error.to_string()));
        }
    }
    Ok(())
}

/// A vector is usable when it has 1 to [`MAX_VECTOR_DIMENSIONS`] finite components, not all zero.
fn validate_vector(field: &'static str, vector: &[f32]) -> Result<(), MemoryError> {
    if vector.is_empty() || vector.len() > MAX_VECTOR_DIMENSIONS {
        return Err(MemoryError::invalid(
            field,
            format!(
                "the vector has {} dimensions; it must have 1 to {MAX_VECTOR_DIMENSIONS}",
                vector.len()
            ),
        ));
    }
    if let Some(index) = vector.iter().position(|x| !x.is_finite()) {
        return Err(MemoryError::invalid(
            field,
            format!("component {index} of the vector is not a finite number"),
        ));
    }
    if vector.iter().all(|x| *x == 0.0) {
        return Err(MemoryError::invalid(
            field,
            "the vector is all zeros, so it has no direction to compare",
        ));
    }
    Ok(())
}
