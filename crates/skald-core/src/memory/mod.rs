//! Long-term memory, the pure part: the `viking://` URI layout entries live under ([`uri`]),
//! resource documents cut into chunks ([`chunk`]),
//! the L0/L1 levels derived without an LLM ([`levels`]), duplicate detection ([`dedup`]), query
//! analysis for full-text search ([`query`]), reciprocal rank fusion ([`fusion`]) and BM25 on an
//! absolute scale ([`bm25`]); recall and
//! session-start injection ([`recall`]), the agent's memory tools ([`tools`]), and tool and
//! skill memories ([`usage`]); on the write path, the deterministic extractor ([`extract`]), the
//! two-threshold upload planner ([`upload`]) and the write settings ([`write`](mod@write)).
//!
//! The store (`skald_store::memories`) keeps the entries; everything here is a computation on
//! values, so the store, the engine's recall and the CLI agree on what a URI, a duplicate or a
//! query term is.
//!
//! ```
//! use skald_core::memory::uri::{MemoryCategory, MemoryUri};
//! use skald_core::memory::levels::derive_abstract;
//! use skald_core::memory::query::QueryPlan;
//!
//! let uri = MemoryUri::parse("viking://user/alice/memories/preferences/editor-theme.md").unwrap();
//! assert_eq!(uri.category(), Some(MemoryCategory::Preferences));
//! assert_eq!(uri.parent().unwrap().as_str(), "viking://user/alice/memories/preferences");
//! assert!(MemoryUri::parse("viking://user/alice/notes/x").is_err());
//!
//! assert_eq!(derive_abstract("Alice prefers dark mode. She said so twice."), "Alice prefers dark mode.");
//!
//! // Content words for BM25; the date becomes a time window for a second ranking.
//! let plan = QueryPlan::new("What did Alice paint on 8 May, 2023?");
//! assert_eq!(plan.terms(), ["alice", "paint"]);
//! assert_eq!(plan.dates().len(), 1);
//! ```

pub mod bm25;
pub mod chunk;
pub mod dedup;
pub mod extract;
pub mod fusion;
pub mod levels;
pub mod query;
pub mod recall;
pub mod skill_use;
pub mod tool_advice;
pub mod tools;
pub mod upload;
pub mod uri;
pub mod usage;
pub mod write;
