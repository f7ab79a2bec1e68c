//! How relevant a found memory is, on absolute measures rather than the store's rank score:
//! term coverage of the query's content words ([`term_coverage`], with the light [`stem`]mer and
//! the informative part of a URI, [`informative_path`]), the store's BM25 relative to the
//! query's reference score ([`crate::memory::bm25`]) and the cosine similarity of embeddings,
//! combined in [`Relevance`].

use serde::Serialize;

use super::{COVERAGE_SATURATION_TERMS, RecallLevel, RecallSettings};
use crate::memory::dedup::words;
use crate::memory::query::is_stopword;

/// A light suffix stemmer for matching query words with memory words (`likes`, `liked`,
/// `liking` → `lik`; `paintings` → `paint`): a plural ending, then `ing`/`ed`, then a final
/// `e`/`y`, each only when 3 characters remain. Both sides go through it, so only agreement
/// matters. Words of 3 characters or fewer and non-ASCII words stay as they are.
pub fn stem(word: &str) -> &str {
    if word.len() <= 3 || !word.is_ascii() {
        return word;
    }
    let strip = |word: &'_ str, suffixes: &[&str]| -> usize {
        suffixes
            .iter()
            .find(|suffix| word.ends_with(*suffix) && word.len() >= suffix.len() + 3)
            .map_or(0, |suffix| suffix.len())
    };
    let mut end = word.len();
    if !word.ends_with("ss") {
        end -= strip(word, &["ies", "es", "s"]);
    }
    let rest = word.get(..end).unwrap_or(word);
    end -= strip(rest, &["ing", "ed"]);
    let rest = word.get(..end).unwrap_or(word);
    end -= strip(rest, &["e", "y"]);
    word.get(..end).unwrap_or(word)
}

/// How many of `terms` occur in `text`, and the coverage: matched / min(terms,
/// [`COVERAGE_SATURATION_TERMS`]), at most 1. A term matches a word of the text with the same
/// [`stem`]. A term in a script written without spaces (CJK) is a whole run of characters
/// ("如何优化数据库"), so it matches when at least half of its character pairs occur in the
/// text.
pub fn term_coverage(terms: &[String], text: &str) -> (usize, f64) {
    if terms.is_empty() {
        return (0, 0.0);
    }
    let stems: std::collections::HashSet<String> =
        words(text).map(|word| stem(&word).to_owned()).collect();
    let lowered = text.to_lowercase();
    let matched = terms
        .iter()
        .filter(|term| {
            if term.chars().any(crate::tokens::estimate::is_cjk) {
                cjk_pairs_found(term, &lowered)
            } else {
                stems.contains(stem(term))
            }
        })
        .count();
    let denominator = terms.len().min(COVERAGE_SATURATION_TERMS);
    (matched, (matched as f64 / denominator as f64).min(1.0))
}

/// Whether at least half of the adjacent character pairs of `term` occur in `text` (the whole
/// term, when it has one or two characters).
fn cjk_pairs_found(term: &str, text: &str) -> bool {
    let chars: Vec<char> = term.chars().collect();
    if chars.len() <= 2 {
        return text.contains(term);
    }
    let pairs: Vec<String> = chars.windows(2).map(|pair| pair.iter().collect()).collect();
    let found = pairs
        .iter()
        .filter(|pair| text.contains(pair.as_str()))
        .count();
    found * 2 >= pairs.len()
}

/// The informative part of a memory URI: the segments below its fixed layout (the user's name,
/// `memories` and the category say nothing about the content, and would match every memory of
/// a user named in the query), without a `.md` extension.
pub fn informative_path(uri: &str) -> String {
    let Ok(parsed) = crate::memory::uri::MemoryUri::parse(uri) else {
        return String::new();
    };
    let segments: Vec<&str> = parsed.segments().collect();
    let skip = match segments.as_slice() {
        ["user" | "agent", _, "memories", ..] => 4,
        ["agent", _, "skills" | "tools", ..] => 3,
        ["session", ..] => 2,
        ["resources", ..] => 1,
        _ => segments.len(),
    };
    segments
        .iter()
        .skip(skip)
        .map(|segment| segment.strip_suffix(".md").unwrap_or(segment))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A memory a search found, as recall needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallCandidate {
    /// The memory's `viking://` URI.
    pub uri: String,
    /// Its category (`preferences`, `events`…).
    pub category: String,
    /// Its abstract: one line.
    pub l0: String,
    /// Its overview: a paragraph.
    pub l1: String,
    /// Its full content.
    pub l2: String,
    /// When what it records happened (ms since the Unix epoch).
    pub created_at_ms: i64,
    /// The cosine similarity to the query vector, when the search had one and the memory a
    /// vector.
    pub cosine: Option<f32>,
    /// Its BM25 score relative to the query's reference score, 0 to 1
    /// ([`crate::memory::bm25::relative_score`]), when the full-text search found it.
    pub text_relevance: Option<f64>,
}

impl RecallCandidate {
    pub(super) fn text(&self, level: RecallLevel) -> &str {
        match level {
            RecallLevel::L0 => &self.l0,
            RecallLevel::L1 => &self.l1,
            RecallLevel::L2 => &self.l2,
        }
    }
}

/// How relevant a candidate is (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Relevance {
    /// How many of the query's content words occur in the memory's text or URI.
    pub matched_terms: usize,
    /// The matched share of the query's content words, counted against at most
    /// [`COVERAGE_SATURATION_TERMS`](super::COVERAGE_SATURATION_TERMS) words.
    pub term_coverage: f64,
    /// The store's BM25 score relative to the query's reference score, when the full-text
    /// search found the memory.
    pub text_relevance: Option<f64>,
    /// The cosine similarity of the query's and the memory's embeddings, when both exist.
    pub cosine: Option<f32>,
}

impl Relevance {
    /// The candidate's relevance to the query's `terms`. Only content words count: a query
    /// made of stopwords alone ("what is it?", which the store still searches for) matches
    /// every long text and is evidence of nothing.
    pub fn of(candidate: &RecallCandidate, terms: &[String]) -> Relevance {
        let content: Vec<String> = terms
            .iter()
            .filter(|term| !is_stopword(term))
            .cloned()
            .collect();
        let searchable = format!(
            "{}\n{}\n{}\n{}",
            informative_path(&candidate.uri),
            candidate.l0,
            candidate.l1,
            candidate.l2
        );
        let (matched_terms, term_coverage) = term_coverage(&content, &searchable);
        Relevance {
            matched_terms,
            term_coverage,
            text_relevance: candidate.text_relevance,
            cosine: candidate.cosine,
        }
    }

    /// Whether the text or the vector clears its floor. The text needs both of its measures:
    /// coverage says enough of the query's words occur, the relative BM25 that they occur as
    /// they would in a memory about the query, not once in a long text about something else,
    /// nor as words most memories hold. A candidate the full-text search did not score is
    /// judged by coverage alone.
    pub fn passes(&self, settings: &RecallSettings) -> bool {
        let text = self.term_coverage >= settings.min_term_coverage
            && self
                .text_relevance
                .is_none_or(|relevance| relevance >= settings.min_text_relevance);
        text || self
            .cosine
            .is_some_and(|cosine| f64::from(cosine) >= settings.min_cosine)
    }

    /// The score shown to the model, 2 decimals: the better of the text measure (the weaker of
    /// coverage and relative BM25, as both must hold) and the cosine.
    pub fn score(&self) -> f64 {
        let text = self.text_relevance.map_or(self.term_coverage, |relevance| {
            self.term_coverage.min(relevance)
        });
        let best = self
            .cosine
            .map_or(text, |cosine| text.max(f64::from(cosine)))
            .clamp(0.0, 1.0);
        (best * 100.0).round() / 100.0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::super::test_support::candidate;
    use super::*;

    #[test]
    fn term_coverage_saturates_and_stems() {
        let terms: Vec<String> = ["caroline", "likes", "painting"].map(String::from).to_vec();
        assert_eq!(term_coverage(&terms, "Caroline liked painting"), (3, 1.0));
        assert_eq!(
            term_coverage(&terms, "Caroline's paintings"),
            (2, 2.0 / 3.0)
        );
        assert_eq!(term_coverage(&terms, "nothing here"), (0, 0.0));
        let long: Vec<String> = (0..20).map(|n| format!("word{n}")).collect();
        assert_eq!(term_coverage(&long, "word1 word2 word3").1, 1.0);
        for (a, b) in [
            ("likes", "liked"),
            ("liking", "like"),
            ("cities", "city"),
            ("classes", "class"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} {b}");
        }
        assert_eq!(term_coverage(&long, "word1").1, 1.0 / 3.0);
        let cjk = vec!["数据库".to_owned()];
        assert_eq!(term_coverage(&cjk, "用户的数据库是Postgres").0, 1);
        let sentence = vec!["如何优化账单数据库".to_owned()];
        assert_eq!(term_coverage(&sentence, "账单数据库运行在Postgres上").0, 1);
        assert_eq!(term_coverage(&sentence, "用户喜欢深色模式").0, 0);
    }

    #[test]
    fn the_fixed_layout_of_a_uri_is_not_evidence() {
        assert_eq!(
            informative_path("viking://user/alice/memories/events/2023/05/trip.md"),
            "2023 05 trip"
        );
        assert_eq!(informative_path("viking://agent/main/tools/bash"), "bash");
        assert_eq!(informative_path("viking://resources/docs/a.md"), "docs a");
        let memory = candidate(
            "viking://user/alice/memories/preferences/editor.md",
            "Prefers dark mode.",
            "Prefers dark mode.",
            "Prefers dark mode.",
        );
        let terms = vec![
            "alice".to_owned(),
            "memories".to_owned(),
            "editor".to_owned(),
        ];
        assert_eq!(Relevance::of(&memory, &terms).matched_terms, 1);
    }
}
