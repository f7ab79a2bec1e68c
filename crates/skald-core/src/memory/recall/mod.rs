//! Per-turn recall and session-start injection, the pure part (seed 002, Components 2 and 3):
//! the settings, the query built from the last user messages, when recall is skipped, how
//! relevant a found memory is, which memories fit the token budget at which level, and the
//! model-visible messages — a simulated `search_memories` call with its result, the profile
//! section of the system prompt, and a simulated `memory_ls` of `viking://`.
//!
//! The engine (`skald_engine::memory`) searches the store and hands the hits here as
//! [`RecallCandidate`]s; nothing in this module reads or writes anything.
//!
//! **Relevance.** The store's fused score (reciprocal rank fusion) says how a hit ranks against
//! the other hits of the same search, not whether it is relevant at all: the best hit of a search
//! for something never remembered still has the top score. So the threshold applies to absolute
//! measures instead: a hit is kept when its text clears both text floors, or its vector the
//! cosine floor:
//! - **term coverage** ([`term_coverage`]): the share of the query's content words (after
//!   [`QueryPlan`]'s stopwords, with a light suffix stemmer) that occur in the memory's text or
//!   the informative part of its URI ([`informative_path`]), counted against at most
//!   [`COVERAGE_SATURATION_TERMS`] words. A query made of five
//!   messages has many words and a relevant memory shares a few of them, so matching three is
//!   full coverage; one word of a long query is 0.33, below the default bar of 0.5 — the
//!   one-common-word matches users complained of as noisy recall. Measured on LoCoMo (1,155
//!   questions, the question as query, the store's top 10 hits; the ignored test
//!   `memory_threshold_locomo` in skald-engine): 0.5 keeps 96% of the evidence hits and drops
//!   19% of the others; 0.67 drops 70% of the others but also 32% of the evidence.
//!   Coverage alone cannot tell a memory about the query from a long text that names the
//!   query's words in passing: a session archive holds most words of a short query somewhere,
//!   and was recalled with full coverage about something else entirely.
//! - **relative BM25** ([`crate::memory::bm25`], the store's `SearchHit::text_relevance`): the
//!   hit's BM25 against what a memory of average length naming the query's three most
//!   informative words once scores. BM25 discounts a word by the length of the text it is in
//!   and weighs it by its rarity, so a passing mention in a long archive, or a word most
//!   memories hold, scores a small share. The floor, [`RecallSettings::min_text_relevance`],
//!   is 0.6, measured with `skald eval locomo` (the question as the query, default settings;
//!   each question also asked of another conversation's memories, where everything injected
//!   is noise): from no floor to 0.6 the questions of another conversation that got anything
//!   injected fall from 674 to 257 of 1,155 (the memories injected there from 2,925 to 705),
//!   while the questions that got nothing from their own conversation rise from 3 to 30 and
//!   the injection precision goes from 0.678 to 0.687; 0.7 would lose 74 questions for 178.
//! - **cosine similarity** of the query's and the memory's embeddings, when both exist
//!   (OpenViking's recall thresholds are cosine values: 0.15 for its plugin's default, 0.35 for
//!   its experience memory; skald uses 0.35).
//!
//! **Budget.** Kept memories fill [`RecallSettings::max_tokens`] tier by tier, as OpenViking's
//! context assembly does: every memory first at L0 (a memory whose abstract does not fit is
//! dropped, never cut), then each in rank order deepened to L1, then to L2, up to
//! [`RecallSettings::level`], while the whole entry still fits.
//!
//! The parts, private (every item has one path: here): `settings` (`[memory.recall]`),
//! `trigger` (whether to recall, and the query), `relevance` (the two measures), `select` (the
//! budget), `inject` (the simulated call and where it goes), `kept` (each turn's recall sent
//! again where it was injected, so the prompt cache keeps its prefix) and `session_start` (the
//! profile section and the directory listing).
//!
//! ```
//! use skald_core::memory::recall::{RecallSettings, SkipReason, recall_query};
//! use skald_core::message::{Message, Role};
//!
//! let settings = RecallSettings::default();
//! let messages = vec![
//!     Message::text(Role::User, "How do I optimise the database?"),
//!     Message::text(Role::Assistant, "Which one?"),
//!     Message::text(Role::User, "The Postgres one behind billing"),
//! ];
//! let query = recall_query(&messages, &settings).unwrap();
//! assert_eq!(query, "The Postgres one behind billing\nHow do I optimise the database?");
//!
//! let greeting = vec![Message::text(Role::User, "thanks!")];
//! assert!(matches!(recall_query(&greeting, &settings), Err(SkipReason::Greeting { .. })));
//! ```
//!
//! [`QueryPlan`]: crate::memory::query::QueryPlan

mod inject;
mod kept;
mod relevance;
mod select;
mod session_start;
mod settings;
#[cfg(test)]
mod test_support;
mod trigger;

pub use inject::{
    insert_after_first_user, insert_after_latest_user, is_simulated, recall_messages,
    render_result_json, search_result_text, simulated_call, simulated_call_id,
    simulated_calls_as_text,
};
pub use kept::{KeepTerms, KeptRecallReport, KeptRecalls, LeftRecall, Placement, RecallLeaving};
pub use relevance::{RecallCandidate, Relevance, informative_path, stem, term_coverage};
pub use select::{
    DropReason, SelectedMemory, Selection, format_date, memory_json, select_memories,
};
pub use session_start::{
    CLI_MEMORY_SECTION, ListingEntry, PROFILE_FILE, ProfileEntry, directory_messages,
    listing_result_text, render_profile_section,
};
pub use settings::{DEFAULT_MIN_TEXT_RELEVANCE, RecallLevel, RecallSettings, RecallSettingsError};
pub use trigger::{SkipReason, is_greeting, recall_query, user_text};

/// The name of the recall tool, real (the agent may call it) and simulated (per-turn recall).
pub const SEARCH_TOOL_NAME: &str = "search_memories";

/// The name of the listing tool, real and simulated (directory pre-injection).
pub const LS_TOOL_NAME: &str = "memory_ls";

/// Term coverage counts matched words against at most this many query words.
pub const COVERAGE_SATURATION_TERMS: usize = 3;

/// At most this many characters of one user message go into a recall query: a pasted log
/// would otherwise drown the question.
pub const MAX_QUERY_MESSAGE_CHARS: usize = 500;

/// Id prefix of the simulated calls (followed by 16 hex digits of a hash of what they ask).
pub const SIMULATED_CALL_PREFIX: &str = "skald_mem_";
