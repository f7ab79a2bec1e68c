//! What makes two memories the same: exact duplicates share the hash of their normalised text
//! ([`content_hash`]); near duplicates have a word-shingle Jaccard similarity at or above a
//! threshold ([`jaccard`]), found among candidates that share a MinHash LSH band
//! ([`Fingerprint::bands`]).
//!
//! Normalisation ([`normalize`]) keeps only the words: lower case, letters and digits of any
//! script, single spaces. So `"Alice likes  dark mode!"` and `"alice likes dark mode"` are exact
//! duplicates. Shingles are overlapping pairs of words; a text of fewer than
//! [`MIN_NEAR_DUPLICATE_WORDS`] words is only ever compared exactly, since one changed word in a
//! very short text is a different statement ("I like tea" / "I like coffee").
//!
//! Banding: a signature of [`SIGNATURE_LEN`] minimum hashes is cut into [`BANDS`] bands of
//! [`ROWS_PER_BAND`]. Two texts with Jaccard similarity `s` share at least one band with
//! probability `1 - (1 - s^4)^8`: 0.99 at s = 0.8, 0.89 at s = 0.7, 0.41 at s = 0.5. So the store
//! accepts thresholds from [`MIN_NEAR_DUPLICATE_THRESHOLD`] up; below that, near duplicates
//! would be missed too often to promise anything.

use std::collections::HashSet;

use sha2::{Digest, Sha256};
use xxhash_rust::xxh3::xxh3_64;

/// Minimum hashes in a signature.
pub const SIGNATURE_LEN: usize = 32;

/// LSH bands per signature.
pub const BANDS: usize = 8;

/// Signature rows in each band.
pub const ROWS_PER_BAND: usize = SIGNATURE_LEN / BANDS;

/// Texts with fewer words are compared exactly only.
pub const MIN_NEAR_DUPLICATE_WORDS: usize = 4;

/// The lowest near-duplicate threshold the banding supports (see the module docs).
pub const MIN_NEAR_DUPLICATE_THRESHOLD: f64 = 0.6;

/// The default near-duplicate threshold: word-pair Jaccard similarity of at least 0.8 (one
/// changed word in a sentence of about twenty).
pub const DEFAULT_NEAR_DUPLICATE_THRESHOLD: f64 = 0.8;

/// The words of `text`, lower-cased, joined by single spaces.
pub fn normalize(text: &str) -> String {
    words(text).collect::<Vec<_>>().join(" ")
}

/// The words of `text`: maximal runs of letters and digits, lower-cased.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
}

/// The SHA-256 (lower-case hex) of the normalised text: equal for exact duplicates.
pub fn content_hash(text: &str) -> String {
    let digest = Sha256::digest(normalize(text).as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The overlapping word pairs of `text`, hashed. Empty for texts of fewer than
/// [`MIN_NEAR_DUPLICATE_WORDS`] words.
pub fn shingles(text: &str) -> HashSet<u64> {
    let words: Vec<String> = words(text).collect();
    if words.len() < MIN_NEAR_DUPLICATE_WORDS {
        return HashSet::new();
    }
    words
        .windows(2)
        .map(|pair| xxh3_64(pair.join(" ").as_bytes()))
        .collect()
}

/// The Jaccard similarity of the shingle sets of two texts (0 when either has none).
pub fn jaccard(a: &str, b: &str) -> f64 {
    jaccard_of(&shingles(a), &shingles(b))
}

/// The Jaccard similarity of two shingle sets (0 when either is empty).
pub fn jaccard_of(a: &HashSet<u64>, b: &HashSet<u64>) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let common = a.intersection(b).count();
    let union = a.len() + b.len() - common;
    common as f64 / union as f64
}

/// The MinHash signature of a text, for finding near-duplicate candidates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    signature: [u64; SIGNATURE_LEN],
}

/// Fixed odd multipliers and offsets of the hash permutations (from a SplitMix64 sequence), so
/// signatures are identical across runs, builds and machines.
fn permutation(index: usize) -> (u64, u64) {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(index as u64 + 1);
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (next() | 1, next())
}

/// A bijective finaliser (MurmurHash3's), so the minimum of a permutation depends on all bits.
fn mix(mut z: u64) -> u64 {
    z ^= z >> 33;
    z = z.wrapping_mul(0xff51_afd7_ed55_8ccd);
    z ^= z >> 33;
    z = z.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    z ^ (z >> 33)
}

impl Fingerprint {
    /// The fingerprint of `text`, or `None` when it is too short for near-duplicate detection.
    pub fn of(text: &str) -> Option<Fingerprint> {
        Fingerprint::of_shingles(&shingles(text))
    }

    /// The fingerprint of a shingle set, or `None` when it is empty.
    pub fn of_shingles(shingles: &HashSet<u64>) -> Option<Fingerprint> {
        if shingles.is_empty() {
            return None;
        }
        let mut signature = [u64::MAX; SIGNATURE_LEN];
        for (index, slot) in signature.iter_mut().enumerate() {
            let (multiplier, offset) = permutation(index);
            *slot = shingles
                .iter()
                .map(|shingle| mix(shingle.wrapping_mul(multiplier).wrapping_add(offset)))
                .min()
                .unwrap_or(u64::MAX);
        }
        Some(Fingerprint { signature })
    }

    /// One key per band; two texts are near-duplicate candidates when any key is equal. The
    /// band's index is mixed in, so equal rows in different bands do not collide.
    pub fn bands(&self) -> [i64; BANDS] {
        let mut keys = [0_i64; BANDS];
        for (band, key) in keys.iter_mut().enumerate() {
            let mut bytes = Vec::with_capacity(8 * (ROWS_PER_BAND + 1));
            bytes.extend_from_slice(&(band as u64).to_le_bytes());
            for row in self
                .signature
                .iter()
                .skip(band * ROWS_PER_BAND)
                .take(ROWS_PER_BAND)
            {
                bytes.extend_from_slice(&row.to_le_bytes());
            }
            *key = i64::from_le_bytes(xxh3_64(&bytes).to_le_bytes());
        }
        keys
    }

    /// [`Fingerprint::bands`] with `scope` mixed in, so texts in different scopes (a store's
    /// owners) never share a key.
    pub fn bands_in(&self, scope: &str) -> [i64; BANDS] {
        let salt = xxh3_64(scope.as_bytes());
        self.bands().map(|key| {
            i64::from_le_bytes((u64::from_le_bytes(key.to_le_bytes()) ^ salt).to_le_bytes())
        })
    }

    /// The share of equal signature rows: an estimate of the Jaccard similarity.
    pub fn estimated_similarity(&self, other: &Fingerprint) -> f64 {
        let equal = self
            .signature
            .iter()
            .zip(other.signature.iter())
            .filter(|(a, b)| a == b)
            .count();
        equal as f64 / SIGNATURE_LEN as f64
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const BASE: &str = "The user prefers dark mode in every editor and asks for it whenever a new \
                        machine is set up for the team";

    #[test]
    fn exact_duplicates_share_the_normalised_hash() {
        assert_eq!(
            normalize("Alice likes  dark mode!"),
            "alice likes dark mode"
        );
        assert_eq!(
            content_hash("Alice likes  dark mode!"),
            content_hash("alice likes dark mode")
        );
        assert_ne!(
            content_hash("Alice likes dark mode"),
            content_hash("Alice likes light mode")
        );
        assert_eq!(content_hash("x").len(), 64);
    }

    #[test]
    fn one_changed_word_is_a_near_duplicate_and_another_topic_is_not() {
        let changed = BASE.replace("editor", "IDE");
        let similarity = jaccard(BASE, &changed);
        assert!(
            similarity >= DEFAULT_NEAR_DUPLICATE_THRESHOLD,
            "{similarity}"
        );
        let other =
            "The build fails on ARM runners because the cache key ignores the target triple";
        assert!(jaccard(BASE, other) < 0.1);
        let a = Fingerprint::of(BASE).unwrap();
        let b = Fingerprint::of(&changed).unwrap();
        assert!(a.bands().iter().any(|band| b.bands().contains(band)));
        assert!(a.estimated_similarity(&b) > 0.5);
        let c = Fingerprint::of(other).unwrap();
        assert!(!a.bands().iter().any(|band| c.bands().contains(band)));
    }

    #[test]
    fn short_texts_are_compared_exactly_only() {
        assert!(Fingerprint::of("I like tea").is_none());
        assert_eq!(jaccard("I like tea", "I like tea"), 0.0);
        assert!(Fingerprint::of("I like green tea").is_some());
    }

    #[test]
    fn fingerprints_are_deterministic() {
        assert_eq!(Fingerprint::of(BASE), Fingerprint::of(BASE));
        assert_eq!(
            Fingerprint::of(BASE).unwrap().bands(),
            Fingerprint::of(BASE).unwrap().bands()
        );
    }
}
