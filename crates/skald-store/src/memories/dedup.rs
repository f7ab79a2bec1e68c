//! The write path's duplicate policy, over any backend: whether a new memory is a duplicate of a
//! live entry of the same owner, exact or near, or a new entry. A backend provides only the
//! lookups of [`DuplicatePrimitives`]; the order of the checks and the similarity measure live
//! here, so every backend merges alike.
//!
//! The order ([`place`]): an exact duplicate (same normalised text, same owner) is merged first,
//! wherever it lives; then a different live entry at the URI refuses the write
//! ([`MemoryError::AlreadyExists`]); then, when near-duplicate merging is on, the most similar
//! live entry sharing a MinHash LSH band is merged when its word-pair Jaccard similarity reaches
//! the threshold.

use std::collections::HashSet;

use skald_core::memory::dedup::{Fingerprint, content_hash, jaccard_of, shingles};
use skald_core::memory::uri::MemoryUri;

use super::{DuplicateKind, MemoryError, NewMemory};

/// At most this many near-duplicate candidates are compared word by word.
pub const MAX_NEAR_CANDIDATES: usize = 64;

/// The lookups the duplicate policy needs, all inside the write transaction that will store the
/// outcome (so what they find is still true when it is written).
pub trait DuplicatePrimitives {
    /// The live version of the tenant with this owner ([`dedup_root`]) and content hash
    /// ([`content_hash`]); the lowest id when there are several.
    fn exact_duplicate(
        &self,
        tenant: &str,
        dedup_root: &str,
        content_hash: &str,
    ) -> Result<Option<i64>, MemoryError>;

    /// The id of the live version at `uri`.
    fn live_id(&self, tenant: &str, uri: &MemoryUri) -> Result<Option<i64>, MemoryError>;

    /// Live versions of the tenant that share any of `bands` (their fingerprint's
    /// [`Fingerprint::bands_in`] their owner), as `(id, L2 content)`: the first
    /// [`MAX_NEAR_CANDIDATES`] ids sharing a band, ascending, of which the live ones.
    fn near_candidates(
        &self,
        tenant: &str,
        bands: &[i64],
    ) -> Result<Vec<(i64, String)>, MemoryError>;
}

/// Where a new memory goes.
#[derive(Debug)]
pub enum Placement {
    /// Merge it into the live version `id`.
    Duplicate {
        /// The [`Memory::id`](super::Memory::id) of the live version to merge into.
        id: i64,
        /// Whether it is an exact or a near duplicate.
        kind: DuplicateKind,
    },
    /// Store it as a new entry; what the backend indexes it by.
    New {
        /// The owner the entry's duplicates are looked for under ([`dedup_root`]).
        dedup_root: String,
        /// SHA-256 of the normalised content ([`content_hash`]), for exact duplicates.
        content_hash: String,
        /// `None` for content too short to fingerprint. Boxed: a fingerprint is a few hundred
        /// bytes, which the other outcomes need not carry.
        fingerprint: Option<Box<Fingerprint>>,
    },
}

/// The owner whose live entries a memory at `uri` is compared with: its
/// [`MemoryUri::dedup_root`], or the URI itself when it has none.
pub fn dedup_root(uri: &MemoryUri) -> Result<String, MemoryError> {
    uri.require_entry()?;
    Ok(uri
        .dedup_root()
        .map_or_else(|| uri.as_str().to_owned(), |root| root.as_str().to_owned()))
}

/// Decides where `memory` goes, in the order the module documentation gives;
/// `near_duplicate_threshold` is [`MemorySettings::near_duplicate_threshold`](super::MemorySettings).
pub fn place(
    backend: &impl DuplicatePrimitives,
    tenant: &str,
    memory: &NewMemory,
    near_duplicate_threshold: Option<f64>,
) -> Result<Placement, MemoryError> {
    let dedup_root = dedup_root(&memory.uri)?;
    let hash = content_hash(&memory.content);
    if let Some(id) = backend.exact_duplicate(tenant, &dedup_root, &hash)? {
        return Ok(Placement::Duplicate {
            id,
            kind: DuplicateKind::Exact,
        });
    }
    if backend.live_id(tenant, &memory.uri)?.is_some() {
        return Err(MemoryError::AlreadyExists {
            uri: memory.uri.clone(),
        });
    }
    let words = shingles(&memory.content);
    let fingerprint = Fingerprint::of_shingles(&words);
    if let (Some(threshold), Some(fingerprint)) = (near_duplicate_threshold, &fingerprint) {
        let bands = fingerprint.bands_in(&dedup_root);
        let candidates = backend.near_candidates(tenant, &bands)?;
        if let Some((id, similarity)) = most_similar(&words, candidates, threshold) {
            return Ok(Placement::Duplicate {
                id,
                kind: DuplicateKind::Near { similarity },
            });
        }
    }
    Ok(Placement::New {
        dedup_root,
        content_hash: hash,
        fingerprint: fingerprint.map(Box::new),
    })
}

/// The candidate most similar to `words` when its similarity reaches `threshold`; the first
/// of equally similar ones.
fn most_similar(
    words: &HashSet<u64>,
    candidates: Vec<(i64, String)>,
    threshold: f64,
) -> Option<(i64, f64)> {
    let mut best: Option<(i64, f64)> = None;
    for (id, text) in candidates {
        let similarity = jaccard_of(words, &shingles(&text));
        if similarity >= threshold && best.is_none_or(|(_, top)| similarity > top) {
            best = Some((id, similarity));
        }
    }
    best
}
