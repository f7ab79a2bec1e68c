//! BM25 on an absolute scale: how relevant a hit is to its query, not only how it ranks among
//! the other hits of the same search.
//!
//! A raw BM25 score has no fixed range (it grows with the number and rarity of the query's
//! words), and the store's fused score is a rank, so the best hit of a search for something
//! never remembered still looks best. [`relative_score`] divides a hit's BM25 by the query's
//! [`reference_score`]: what a memory of average length that names the query's
//! [`REFERENCE_TERMS`] most informative words once each would score. It is 1 (capped) for a
//! memory that matches the query as well as that; a long memory (a session archive) that names
//! one of the query's words in passing scores a small fraction, because BM25 discounts a word
//! by the length of the text it occurs in and weighs it by its rarity.
//!
//! The IDF is FTS5's, so a backend computes the reference from the same document counts its
//! BM25 used: `ln((N - n + 0.5) / (n + 0.5))`, clamped to 10⁻⁶ (a word in half the documents or
//! more says nothing). Which of the query's words make the reference is [`reference_score`]'s.
//!
//! ```
//! use skald_core::memory::bm25::{fts5_idf, reference_score, relative_score};
//!
//! // 1,000 memories; the query's words are in 3, 40 and 900 of them.
//! let reference = reference_score(1000, &[3, 40, 900]);
//! // A memory of average length naming the two specific words once scores their IDFs.
//! let both = fts5_idf(1000, 3) + fts5_idf(1000, 40);
//! assert!(relative_score(both, reference).unwrap() > 0.99);
//! // Naming only the common one is nothing.
//! assert!(relative_score(fts5_idf(1000, 900), reference).unwrap() < 0.001);
//! ```

/// How many of the query's words the reference counts: a query made of several messages has
/// many words, and a memory about it shares a few of its most specific ones, not all of them.
pub const REFERENCE_TERMS: usize = 3;

/// FTS5's floor for the IDF of a word in half the documents or more.
pub const MIN_IDF: f64 = 1e-6;

/// Below this many documents every word found has FTS5's floor IDF (one document of two is
/// already half), so BM25 weighs all words alike and so does the reference.
pub const MIN_IDF_DOCUMENTS: i64 = 3;

/// FTS5's IDF of a word found in `with_term` of `documents` documents.
pub fn fts5_idf(documents: i64, with_term: i64) -> f64 {
    let documents = documents.max(0) as f64;
    let with_term = with_term.max(0) as f64;
    let idf = ((documents - with_term + 0.5) / (with_term + 0.5)).ln();
    if idf > 0.0 { idf } else { MIN_IDF }
}

/// The BM25 score a memory of average length that names each of the query's
/// [`REFERENCE_TERMS`] most informative words once (in a field of weight 1) gets, with FTS5's
/// `k1` and `b`: a single occurrence in a text of average length scores exactly the word's IDF,
/// so the reference is a sum of IDFs. `term_documents` gives, for each of the query's words, how
/// many of the `documents` hold it.
///
/// Which words count: the known ones with a positive IDF, most informative first; a word in half
/// the documents or more counts for nothing (its IDF is the floor). Words found in no memory only
/// fill the reference up when fewer than [`REFERENCE_TERMS`] known words count, at their IDF: a
/// long query names words no memory holds (a new identifier, a typo) without being about
/// nothing, but a short one whose specific words are all unknown is about nothing stored. A
/// query of common words only has a reference of 0. In an index of fewer than
/// [`MIN_IDF_DOCUMENTS`] documents, where IDF cannot tell words apart, every word counts at the
/// floor: the relative score is then BM25's length-normalised term frequency, averaged over at
/// most [`REFERENCE_TERMS`] of the query's words.
pub fn reference_score(documents: i64, term_documents: &[i64]) -> f64 {
    if documents < MIN_IDF_DOCUMENTS {
        return MIN_IDF * term_documents.len().min(REFERENCE_TERMS) as f64;
    }
    let mut known: Vec<f64> = term_documents
        .iter()
        .filter(|with_term| **with_term > 0)
        .map(|with_term| fts5_idf(documents, *with_term))
        .filter(|idf| *idf > MIN_IDF)
        .collect();
    known.sort_by(|a, b| b.total_cmp(a));
    known.truncate(REFERENCE_TERMS);
    let unknown = term_documents
        .iter()
        .filter(|with_term| **with_term <= 0)
        .count();
    let fill = REFERENCE_TERMS.saturating_sub(known.len()).min(unknown);
    known.iter().sum::<f64>() + fill as f64 * fts5_idf(documents, 0)
}

/// `score` (BM25, higher is better) relative to the query's `reference`, from 0 to 1; 0 when the
/// reference is not positive (no word of the query says anything), `None` for a score that is
/// not a number.
pub fn relative_score(score: f64, reference: f64) -> Option<f64> {
    if !score.is_finite() {
        return None;
    }
    if reference <= 0.0 {
        return Some(0.0);
    }
    Some((score / reference).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn idf_is_fts5s_with_its_floor() {
        assert!((fts5_idf(10, 1) - (9.5f64 / 1.5).ln()).abs() < 1e-12);
        assert_eq!(fts5_idf(10, 5), MIN_IDF);
        assert_eq!(fts5_idf(1, 1), MIN_IDF);
        assert_eq!(fts5_idf(0, 0), MIN_IDF);
        // An unknown word is the most informative.
        assert!(fts5_idf(10, 0) > fts5_idf(10, 1));
    }

    #[test]
    fn the_reference_counts_the_three_most_informative_words() {
        let idf = |n| fts5_idf(100, n);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        // Known words: the three rarest count.
        assert!(close(
            reference_score(100, &[1, 2, 3, 4]),
            idf(1) + idf(2) + idf(3)
        ));
        // Common words count for nothing.
        assert!(close(reference_score(100, &[1, 60]), idf(1)));
        assert_eq!(reference_score(100, &[60, 80]), 0.0);
        // Unknown words fill up to three.
        assert!(close(reference_score(100, &[0, 5]), idf(5) + idf(0)));
        assert!(close(
            reference_score(100, &[0, 0, 0, 0, 5]),
            idf(5) + 2.0 * idf(0)
        ));
        assert!(close(
            reference_score(100, &[0, 1, 2, 3]),
            idf(1) + idf(2) + idf(3)
        ));
        assert_eq!(reference_score(100, &[]), 0.0);
        // Two documents: no word is informative, all count alike.
        assert!(close(reference_score(2, &[1, 2, 0, 1]), 3.0 * MIN_IDF));
        assert!(close(reference_score(1, &[1]), MIN_IDF));
        assert_eq!(relative_score(4.5, 9.0), Some(0.5));
        assert_eq!(relative_score(20.0, 9.0), Some(1.0));
        assert_eq!(relative_score(1.0, 0.0), Some(0.0));
        assert_eq!(relative_score(f64::NAN, 1.0), None);
    }
}
