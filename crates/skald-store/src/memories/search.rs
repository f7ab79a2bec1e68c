//! The memory search policy, over any backend: which query terms count, the BM25, date,
//! directory and vector rankings, and how they are fused into one list of hits. A backend
//! provides only the [`SearchPrimitives`] (candidates with their raw scores, document counts,
//! rows by id); everything that decides what a search returns lives here, once, so every
//! backend ranks alike.
//!
//! The policy, step by step ([`search`]):
//! 1. The query is analysed ([`QueryPlan`]): its terms and the dates it names.
//! 2. Terms in half the indexed documents or more, and terms in none, are dropped (unless no
//!    term is left): BM25 gives them no weight, but matching them costs a walk of every document
//!    that has them.
//! 3. Full-text candidates for the kept terms: the BM25 ranking; again within the dates the
//!    query names (the date ranking); and the BM25 ranking re-ordered by directory.
//! 4. Vector candidates by cosine when the query has a vector.
//! 5. Fusion: by [`VectorFusion::Score`] the BM25 and cosine scores are min-max fused into one
//!    relevance ranking; then the rankings are fused by reciprocal rank fusion (k = 60).
//! 6. Priority: each fused score is scaled by its entry's priority ([`priority_weight`]: ±20 %
//!    at the ends of the 0–10 scale, 1 at the default 5), and the hits sorted again.

use std::collections::{HashMap, HashSet};

use skald_core::ids::Tenant;
use skald_core::memory::bm25::{reference_score, relative_score};
use skald_core::memory::fusion::{
    RRF_K, RankedList, ScoredList, min_max_score_fusion, reciprocal_rank_fusion,
};
use skald_core::memory::query::QueryPlan;

use super::{
    ColumnWeights, DEFAULT_PRIORITY, MAX_SEARCH_LIMIT, Memory, MemoryError, MemorySettings,
    SearchFilter, SearchHit, SearchQuery, VectorFusion, validate_vector,
};

/// What a backend provides for a search. Every call of one search reads the same consistent
/// snapshot of the store (the backend makes one value of this trait per search, inside one read
/// transaction), so the counts, candidates and rows agree with each other.
///
/// Only live versions (neither superseded nor forgotten) are documents, candidates or vectors.
/// Version ids are the store's [`Memory::id`]s.
pub trait SearchPrimitives {
    /// How many documents the full-text index's BM25 computes its IDF over (N). For SQLite's
    /// FTS5 that is every live version of every tenant: the IDF is index-wide.
    fn indexed_documents(&self) -> Result<i64, MemoryError>;

    /// How many of those documents hold `term` (n of the IDF), counted as the BM25 counts them.
    fn documents_with_term(&self, term: &str) -> Result<i64, MemoryError>;

    /// The full-text candidates of the request: the tenant's live versions matching any of the
    /// terms, under the filter and within the windows, at most `depth` of them, best first
    /// (ties by ascending id).
    fn text_candidates(&self, request: &TextRequest<'_>)
    -> Result<Vec<TextCandidate>, MemoryError>;

    /// The vector candidates of the request: the tenant's live versions with a vector of the
    /// query's dimensions, under the filter, as `(id, cosine)`, best first (ties by ascending
    /// id), at most `depth` of them. When the tenant has vectors but none of the query's
    /// dimensions (and the filter lets some through), it is [`MemoryError::DimensionMismatch`];
    /// [`rank_by_cosine`] does all of this for a backend that compares vectors itself.
    fn vector_candidates(
        &self,
        request: &VectorRequest<'_>,
    ) -> Result<Vec<(i64, f32)>, MemoryError>;

    /// The versions `ids`, in that order, each with every source (its own and its merges').
    fn load(&self, ids: &[i64]) -> Result<Vec<Memory>, MemoryError>;

    /// The priority of each of the versions `ids` (0 to [`MAX_PRIORITY`](super::MAX_PRIORITY)), without reading
    /// their text; a version not found is absent.
    fn priorities(&self, ids: &[i64]) -> Result<HashMap<i64, u8>, MemoryError>;
}

/// How much a step of priority away from [`DEFAULT_PRIORITY`] scales a hit's fused score: at
/// the ends of the scale (0 and 10) ±20 %, enough to order two hits about equally relevant by
/// what the user or agent marked important, not enough to lift an unrelated one over a match.
pub const PRIORITY_WEIGHT_PER_STEP: f64 = 0.04;

/// Fused candidates past the limit whose priority is read, so that a high-priority hit just
/// below the cut can take its place: with RRF's k = 60 a ×1.2 score lifts a hit by at most
/// about a fifth of (60 + its rank) places.
const PRIORITY_REACH: usize = 16;

/// The factor a hit's fused score is multiplied by for its entry's `priority`.
pub fn priority_weight(priority: u8) -> f64 {
    1.0 + (f64::from(priority) - f64::from(DEFAULT_PRIORITY)) * PRIORITY_WEIGHT_PER_STEP
}

/// What [`SearchPrimitives::text_candidates`] searches for.
#[derive(Debug, Clone, Copy)]
pub struct TextRequest<'a> {
    /// The tenant searched, already validated; no other tenant's versions are candidates.
    pub tenant: &'a str,
    /// Terms of the query (as [`QueryPlan::terms`] gives them, so already normalised); a
    /// document matches when it holds any of them. Never empty.
    pub terms: &'a [&'a str],
    /// The query's filter, already validated: categories, directory, creation-time range.
    pub filter: &'a SearchFilter,
    /// Creation-time windows `[start, end)` in ms since the Unix epoch; a document matches when
    /// it was created in any of them. Empty: no restriction.
    pub windows: &'a [(i64, i64)],
    /// The BM25 weights of the indexed fields.
    pub weights: ColumnWeights,
    /// The most candidates to return: [`MemorySettings::candidates`], or the query's limit if
    /// that is larger.
    pub depth: usize,
}

/// A full-text candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCandidate {
    /// The version's [`Memory::id`].
    pub id: i64,
    /// The BM25 score as SQLite's FTS5 reports it: negative, lower is better. A backend whose
    /// BM25 is positive (higher is better) negates it.
    pub bm25: f64,
    /// The URI of the entry's directory (for the directory ranking).
    pub parent: String,
}

/// What [`SearchPrimitives::vector_candidates`] searches for.
#[derive(Debug, Clone, Copy)]
pub struct VectorRequest<'a> {
    /// The tenant searched, already validated; no other tenant's versions are candidates.
    pub tenant: &'a str,
    /// The query vector, already validated: 1 to
    /// [`MAX_VECTOR_DIMENSIONS`](super::MAX_VECTOR_DIMENSIONS) finite components, not all zero.
    pub vector: &'a [f32],
    /// The query's filter, already validated: categories, directory, creation-time range.
    pub filter: &'a SearchFilter,
    /// The most candidates to return: [`MemorySettings::candidates`], or the query's limit if
    /// that is larger.
    pub depth: usize,
}

/// Searches the tenant's live memories: [`check`], then [`search_checked`]. This is all of
/// [`MemoryStore::search`](super::MemoryStore::search) but the snapshot `backend` reads.
pub fn search(
    backend: &impl SearchPrimitives,
    settings: &MemorySettings,
    tenant: &Tenant,
    query: &SearchQuery,
) -> Result<Vec<SearchHit>, MemoryError> {
    let plan = check(query)?;
    search_checked(backend, settings, tenant, query, &plan)
}

/// Checks the query and analyses its text, before a backend reads anything: bad input is
/// refused without touching storage (the tenant is a [`Tenant`], well formed by its type).
pub fn check(query: &SearchQuery) -> Result<QueryPlan, MemoryError> {
    validate_query(query)?;
    let plan = QueryPlan::new(&query.text);
    if plan.is_empty() && query.vector.is_none() {
        return Err(MemoryError::InvalidInput {
            field: "query",
            reason: "the query has no words to search for and no vector".to_owned(),
        });
    }
    Ok(plan)
}

/// Ranks and fuses the backend's candidates for a query [`check`] accepted (`plan` is what it
/// returned), as the module documentation describes.
pub fn search_checked(
    backend: &impl SearchPrimitives,
    settings: &MemorySettings,
    tenant: &Tenant,
    query: &SearchQuery,
    plan: &QueryPlan,
) -> Result<Vec<SearchHit>, MemoryError> {
    let depth = settings.candidates.max(query.limit);
    let mut text: Vec<TextCandidate> = Vec::new();
    let mut dated_candidates: Vec<TextCandidate> = Vec::new();
    let terms = informative_terms(backend, plan.terms())?;
    if !terms.is_empty() {
        let mut request = TextRequest {
            tenant,
            terms: &terms,
            filter: &query.filter,
            windows: &[],
            weights: settings.weights,
            depth,
        };
        text = backend.text_candidates(&request)?;
        if query.date_ranking && !plan.dates().is_empty() {
            let windows: Vec<(i64, i64)> = plan
                .dates()
                .iter()
                .map(|window| (window.start_ms, window.end_ms))
                .collect();
            request.windows = &windows;
            dated_candidates = backend.text_candidates(&request)?;
        }
    }
    let dated: Vec<i64> = dated_candidates
        .iter()
        .map(|candidate| candidate.id)
        .collect();
    let by_directory = if settings.directory_weight > 0.0 {
        directory_ranking(&text)
    } else {
        Vec::new()
    };
    let vectors = match &query.vector {
        Some(vector) => backend.vector_candidates(&VectorRequest {
            tenant,
            vector,
            filter: &query.filter,
            depth,
        })?,
        None => Vec::new(),
    };
    let text_ids: Vec<i64> = text.iter().map(|candidate| candidate.id).collect();
    let vector_ids: Vec<i64> = vectors.iter().map(|(id, _)| *id).collect();
    let (scored_relevance, vector_rank_weight) = match settings.vector_fusion {
        VectorFusion::Score { share } if !vectors.is_empty() => {
            (Some(relevance_by_score(&text, &vectors, share)), 0.0)
        }
        VectorFusion::Score { .. } => (None, 0.0),
        VectorFusion::Rank { weight } => (None, weight),
    };
    // Score fusion replaces the BM25 list by the relevance list and leaves the vector list
    // empty, so the lists keep their places (and `ranks` their meaning) either way.
    let fused = reciprocal_rank_fusion(
        &[
            RankedList::new(scored_relevance.as_deref().unwrap_or(&text_ids)),
            RankedList::new(&dated),
            RankedList {
                weight: vector_rank_weight,
                items: if scored_relevance.is_some() {
                    &[]
                } else {
                    &vector_ids
                },
            },
            RankedList {
                weight: settings.directory_weight,
                items: &by_directory,
            },
        ],
        RRF_K,
    );
    let positions = |ids: &[i64]| -> HashMap<i64, usize> {
        ids.iter()
            .enumerate()
            .rev()
            .map(|(rank, id)| (*id, rank))
            .collect()
    };
    let (text_positions, vector_positions) = if scored_relevance.is_some() {
        (positions(&text_ids), positions(&vector_ids))
    } else {
        (HashMap::new(), HashMap::new())
    };
    // Both full-text rankings run the same FTS5 query (the dates only filter rows), so a hit
    // the date ranking alone found has the same BM25 it would have had in the plain one.
    let bm25_of: HashMap<i64, f64> = dated_candidates
        .iter()
        .chain(&text)
        .map(|candidate| (candidate.id, candidate.bm25))
        .collect();
    let reference = if bm25_of.is_empty() {
        0.0
    } else {
        query_reference(backend, plan.terms())?
    };
    // Priority weighs in (see `PRIORITY_WEIGHT_PER_STEP`): the candidates that could reach the
    // limit are scaled by their entry's priority and sorted again; equal scores keep the
    // fusion's order. At the default priority nothing moves.
    let reach = query.limit.saturating_mul(2).saturating_add(PRIORITY_REACH);
    let mut top: Vec<_> = fused.into_iter().take(reach).collect();
    let candidate_ids: Vec<i64> = top.iter().map(|entry| entry.item).collect();
    let priorities = backend.priorities(&candidate_ids)?;
    for entry in &mut top {
        let priority = priorities
            .get(&entry.item)
            .copied()
            .unwrap_or(DEFAULT_PRIORITY);
        entry.score *= priority_weight(priority);
    }
    top.sort_by(|a, b| b.score.total_cmp(&a.score));
    top.truncate(query.limit);
    let ids: Vec<i64> = top.iter().map(|entry| entry.item).collect();
    let memories = backend.load(&ids)?;
    Ok(top
        .into_iter()
        .zip(memories)
        .map(|(entry, memory)| {
            let rank = |list: usize| entry.ranks.get(list).copied().flatten();
            let (text_rank, vector_rank) = if scored_relevance.is_some() {
                (
                    text_positions.get(&entry.item).copied(),
                    vector_positions.get(&entry.item).copied(),
                )
            } else {
                (rank(0), rank(2))
            };
            SearchHit {
                memory,
                score: entry.score,
                text_rank,
                bm25: text_rank
                    .and_then(|at| text.get(at))
                    .map(|candidate| candidate.bm25),
                text_relevance: bm25_of
                    .get(&entry.item)
                    .and_then(|bm25| relative_score(-bm25, reference)),
                date_rank: rank(1),
                vector_rank,
                cosine: vector_rank.and_then(|at| vectors.get(at)).map(|(_, c)| *c),
                directory_rank: rank(3),
            }
        })
        .collect())
}

fn validate_query(query: &SearchQuery) -> Result<(), MemoryError> {
    if query.limit == 0 || query.limit > MAX_SEARCH_LIMIT {
        return Err(MemoryError::InvalidInput {
            field: "limit",
            reason: format!(
                "the limit is {}; it must be from 1 to {MAX_SEARCH_LIMIT}",
                query.limit
            ),
        });
    }
    if let Some(vector) = &query.vector {
        validate_vector("query vector", vector)?;
    }
    if let (Some(from), Some(until)) = (query.filter.created_from_ms, query.filter.created_until_ms)
    {
        if from < until {
            return Ok(());
        }
        return Err(MemoryError::InvalidInput {
            field: "filter",
            reason: format!("the time range starts at {from} ms, not before its end {until} ms"),
        });
    }
    Ok(())
}

/// The query's terms that can change the ranking.
///
/// BM25 (FTS5's, as Lucene's) gives a term found in half the indexed documents or more an IDF
/// of about zero (FTS5 clamps `log((N - n + 0.5) / (n + 0.5))` to 10⁻⁶), so it adds nothing to
/// any score but makes the index score every document it is in (a user's name in all of their
/// memories). Such terms, and terms in no document, are dropped, unless no term is left.
fn informative_terms<'a>(
    backend: &impl SearchPrimitives,
    terms: &'a [String],
) -> Result<Vec<&'a str>, MemoryError> {
    let all = || terms.iter().map(String::as_str).collect();
    if terms.len() < 2 {
        return Ok(all());
    }
    let indexed = backend.indexed_documents()?;
    let mut kept = Vec::new();
    for term in terms {
        let documents = backend.documents_with_term(term)?;
        // A term in no document matches nothing; counting it as informative would drop the
        // terms that do match (a small store, where every match is in half the documents).
        if documents > 0 && 2 * documents < indexed {
            kept.push(term.as_str());
        }
    }
    if kept.is_empty() {
        return Ok(all());
    }
    Ok(kept)
}

/// The query's reference BM25 score ([`reference_score`]) from the document count of each of
/// its terms as FTS5 computes it, terms the full-text query left out included (too common to
/// count, or in no memory: [`reference_score`] says how those count).
fn query_reference(backend: &impl SearchPrimitives, terms: &[String]) -> Result<f64, MemoryError> {
    let indexed = backend.indexed_documents()?;
    let mut term_documents = Vec::with_capacity(terms.len());
    for term in terms {
        term_documents.push(backend.documents_with_term(term)?);
    }
    Ok(reference_score(indexed, &term_documents))
}

/// How many of a directory's best entries make up its score.
const DIRECTORY_SCORE_ENTRIES: usize = 3;

/// The BM25 ranking re-ordered by directory: directories scored by the sum of their best
/// [`DIRECTORY_SCORE_ENTRIES`] entries' BM25 relevance, entries ordered by their directory's
/// rank, then by their own. A directory where several entries match lifts all of them, as
/// OpenViking's hierarchical retrieval propagates a directory's score to its children.
fn directory_ranking(text: &[TextCandidate]) -> Vec<i64> {
    let mut scores: HashMap<&str, (f64, usize)> = HashMap::new();
    for entry in text {
        let slot = scores.entry(entry.parent.as_str()).or_insert((0.0, 0));
        if slot.1 < DIRECTORY_SCORE_ENTRIES {
            slot.0 -= entry.bm25;
            slot.1 += 1;
        }
    }
    let mut directories: Vec<(&str, f64)> = scores
        .into_iter()
        .map(|(parent, (score, _))| (parent, score))
        .collect();
    directories.sort_by(|(a, x), (b, y)| y.total_cmp(x).then(a.cmp(b)));
    let rank: HashMap<&str, usize> = directories
        .iter()
        .enumerate()
        .map(|(index, (parent, _))| (*parent, index))
        .collect();
    let mut order: Vec<(usize, usize, i64)> = text
        .iter()
        .enumerate()
        .map(|(own, entry)| {
            (
                rank.get(entry.parent.as_str())
                    .copied()
                    .unwrap_or(usize::MAX),
                own,
                entry.id,
            )
        })
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, _, id)| id).collect()
}

/// The relevance ranking of [`VectorFusion::Score`]: the text candidates' BM25 relevance (FTS5's
/// bm25 negated) and the vector candidates' cosines, min-max fused with the vectors' `share`.
fn relevance_by_score(text: &[TextCandidate], vectors: &[(i64, f32)], share: f64) -> Vec<i64> {
    let text_scores: Vec<(i64, f64)> = text
        .iter()
        .map(|candidate| (candidate.id, -candidate.bm25))
        .collect();
    let vector_scores: Vec<(i64, f64)> = vectors
        .iter()
        .map(|(id, cosine)| (*id, f64::from(*cosine)))
        .collect();
    min_max_score_fusion(&[
        ScoredList {
            weight: 1.0 - share,
            items: &text_scores,
        },
        ScoredList {
            weight: share,
            items: &vector_scores,
        },
    ])
    .into_iter()
    .map(|entry| entry.item)
    .collect()
}

/// [`SearchPrimitives::vector_candidates`] by comparing every vector: the `(id, vector)` pairs
/// of the tenant's live versions (`allowed`, when given, says which ids the filter lets
/// through), ranked by cosine with `query`, best first, ties by id, cut at `depth`.
pub fn rank_by_cosine<'v>(
    vectors: impl IntoIterator<Item = &'v (i64, Vec<f32>)>,
    allowed: Option<&HashSet<i64>>,
    query: &[f32],
    depth: usize,
) -> Result<Vec<(i64, f32)>, MemoryError> {
    let mut scored: Vec<(i64, f32)> = Vec::new();
    let mut other_dimensions: Vec<usize> = Vec::new();
    for (id, vector) in vectors {
        if allowed.is_some_and(|ids| !ids.contains(id)) {
            continue;
        }
        if vector.len() != query.len() {
            if !other_dimensions.contains(&vector.len()) {
                other_dimensions.push(vector.len());
            }
            continue;
        }
        scored.push((*id, cosine(query, vector)));
    }
    if scored.is_empty() && !other_dimensions.is_empty() {
        other_dimensions.sort_unstable();
        return Err(MemoryError::DimensionMismatch {
            query: query.len(),
            stored: other_dimensions,
        });
    }
    scored.sort_by(|(id_a, a), (id_b, b)| b.total_cmp(a).then(id_a.cmp(id_b)));
    scored.truncate(depth);
    Ok(scored)
}

/// The cosine similarity of two vectors of the same length; 0 when either is all zeros.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let mut dot = 0.0_f32;
    let mut norm_a = 0.0_f32;
    let mut norm_b = 0.0_f32;
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        norm_a += x * x;
        norm_b += y * y;
    }
    if norm_a == 0.0 || norm_b == 0.0 {
        return 0.0;
    }
    dot / (norm_a.sqrt() * norm_b.sqrt())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn candidate(id: i64, bm25: f64, parent: &str) -> TextCandidate {
        TextCandidate {
            id,
            bm25,
            parent: parent.to_owned(),
        }
    }

    #[test]
    fn a_directory_of_several_matches_comes_first() {
        let text = [
            candidate(1, -3.0, "a"),
            candidate(2, -2.0, "b"),
            candidate(3, -1.5, "b"),
            candidate(4, -1.0, "c"),
        ];
        assert_eq!(directory_ranking(&text), vec![2, 3, 1, 4]);
    }

    #[test]
    fn cosine_ranking_cuts_at_depth_and_names_other_dimensions() {
        let vectors = vec![
            (1, vec![1.0, 0.0]),
            (2, vec![0.0, 1.0]),
            (3, vec![1.0, 1.0]),
        ];
        let ranked = rank_by_cosine(&vectors, None, &[1.0, 0.0], 2).unwrap();
        assert_eq!(ranked.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [1, 3]);
        let allowed = HashSet::from([2]);
        let ranked = rank_by_cosine(&vectors, Some(&allowed), &[1.0, 0.0], 2).unwrap();
        assert_eq!(ranked, vec![(2, 0.0)]);
        let error = rank_by_cosine(&vectors, None, &[1.0, 0.0, 0.0], 2).unwrap_err();
        assert!(
            matches!(&error, MemoryError::DimensionMismatch { query: 3, stored } if stored == &[2]),
            "{error}"
        );
    }
}
