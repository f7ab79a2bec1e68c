//! Byte tests eight bytes at a time ("SIMD within a register"), for the scans that run over
//! every line of a tool output: a word of text is tested with a handful of integer operations
//! instead of a loop with a branch per byte, in safe, portable code.
//!
//! A word holds bytes `pos..pos + 8` of a text in little-endian order (byte `i` in bits
//! `8 * i ..`). The tests return the top bit of every byte lane that passes, other bits clear, so
//! masks combine with `&` and `|`, and `trailing_zeros() / 8` is the first passing lane.

pub(crate) const LANES_01: u64 = 0x0101_0101_0101_0101;
const LANES_7F: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const LANES_80: u64 = 0x8080_8080_8080_8080;

/// Eight bytes from `pos` (zeros past the end of `bytes`) as one word.
pub(crate) fn load_word(bytes: &[u8], pos: usize) -> u64 {
    let mut word = [0u8; 8];
    if let Some(chunk) = bytes.get(pos..pos + 8) {
        word.copy_from_slice(chunk);
        return u64::from_le_bytes(word);
    }
    let Some(missing) = (pos + 8).checked_sub(bytes.len()).filter(|&m| m < 8) else {
        return 0;
    };
    if let Some(last) = bytes.len().checked_sub(8).and_then(|at| bytes.get(at..)) {
        // The last eight bytes, shifted down so the lanes past the end are zeros.
        word.copy_from_slice(last);
        return u64::from_le_bytes(word) >> (8 * missing);
    }
    for (slot, b) in word.iter_mut().zip(bytes.get(pos..).unwrap_or_default()) {
        *slot = *b;
    }
    u64::from_le_bytes(word)
}

/// Lanes equal to `byte`.
pub(crate) fn bytes_equal(word: u64, byte: u8) -> u64 {
    let x = word ^ (LANES_01 * u64::from(byte));
    let nonzero = ((x & LANES_7F).wrapping_add(LANES_7F) | x) & LANES_80;
    !nonzero & LANES_80
}

/// Lanes of `word` in `lo..=hi`, both ASCII (below 0x80).
pub(crate) fn bytes_between(word: u64, lo: u8, hi: u8) -> u64 {
    // On the low seven bits of each lane neither sum carries out of its lane.
    let low = word & LANES_7F;
    let at_least_lo = low.wrapping_add(LANES_01 * u64::from(0x80 - lo));
    let above_hi = low.wrapping_add(LANES_01 * u64::from(0x7f - hi));
    at_least_lo & !above_hi & !word & LANES_80
}

/// Lanes holding an ASCII hex digit.
pub(crate) fn hex_bytes(word: u64) -> u64 {
    // Setting bit 5 folds `A`-`F` onto `a`-`f` (and nothing else onto them); non-ASCII lanes
    // keep their top bit and fail both ranges.
    bytes_between(word, b'0', b'9') | bytes_between(word | (LANES_01 * 0x20), b'a', b'f')
}

/// Lanes holding an ASCII uppercase letter.
pub(crate) fn upper_bytes(word: u64) -> u64 {
    bytes_between(word, b'A', b'Z')
}

/// Lanes holding an ASCII lowercase letter.
pub(crate) fn lower_bytes(word: u64) -> u64 {
    bytes_between(word, b'a', b'z')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn every_test_agrees_with_its_byte_test_in_every_lane() {
        for lane in 0..8 {
            for b in 0..=255u8 {
                // The byte under test in one lane, awkward neighbours in the others.
                let mut word = [0xffu8, b'9', b'/', 0x80, b'a', b':', 0, b'Z'];
                word[lane] = b;
                let word = u64::from_le_bytes(word);
                let bit = 0x80u64 << (8 * lane);
                assert_eq!(hex_bytes(word) & bit != 0, b.is_ascii_hexdigit(), "{b:#x}");
                assert_eq!(
                    upper_bytes(word) & bit != 0,
                    b.is_ascii_uppercase(),
                    "{b:#x}"
                );
                assert_eq!(
                    lower_bytes(word) & bit != 0,
                    b.is_ascii_lowercase(),
                    "{b:#x}"
                );
                let digit = bytes_between(word, b'0', b'9');
                assert_eq!(digit & bit != 0, b.is_ascii_digit(), "{b:#x}");
                for probe in [b'/', b':', 0, 0x80, 0xff, b'a'] {
                    assert_eq!(bytes_equal(word, probe) & bit != 0, b == probe, "{b:#x}");
                }
                // Only top bits are ever set.
                assert_eq!(hex_bytes(word) & !LANES_80, 0);
                assert_eq!(bytes_equal(word, b) & !LANES_80, 0);
            }
        }
    }

    #[test]
    fn words_past_the_end_are_zero_padded() {
        assert_eq!(load_word(b"abc", 1), u64::from_le_bytes(*b"bc\0\0\0\0\0\0"));
        assert_eq!(load_word(b"abc", 3), 0);
        assert_eq!(load_word(b"abc", 9), 0);
        assert_eq!(
            load_word(b"0123456789", 1),
            u64::from_le_bytes(*b"12345678")
        );
    }
}
