//! What the recall tests share: a recall candidate built from its levels.

use super::RecallCandidate;

/// A preference memory at `uri` with the three levels given, dated 2023-05-08, no vector and
/// no BM25 score (coverage alone judges its text).
pub(super) fn candidate(uri: &str, l0: &str, l1: &str, l2: &str) -> RecallCandidate {
    RecallCandidate {
        uri: uri.into(),
        category: "preferences".into(),
        l0: l0.into(),
        l1: l1.into(),
        l2: l2.into(),
        created_at_ms: 1_683_504_000_000,
        cosine: None,
        text_relevance: None,
    }
}
