//! How ref content is laid out on disk: zstd when it makes the bytes smaller, raw otherwise.

/// zstd's default level: most of the gain of higher levels on text, at a fraction of the time.
const ZSTD_LEVEL: i32 = 3;

/// The encoding of a stored ref's content, as named in the `codec` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// The canonical payload bytes as they are.
    Raw,
    /// A zstd frame of the canonical payload bytes.
    Zstd,
}

impl Codec {
    /// The name stored in the `codec` column: `"raw"` or `"zstd"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Zstd => "zstd",
        }
    }

    /// The codec named `name` as [`Codec::as_str`] writes it; `None` for any other name (a row
    /// written by a newer skald, or damaged).
    pub fn parse(name: &str) -> Option<Codec> {
        match name {
            "raw" => Some(Codec::Raw),
            "zstd" => Some(Codec::Zstd),
            _ => None,
        }
    }
}

/// The bytes to store for `original`, and how they are encoded.
pub(crate) fn encode(original: &[u8]) -> (Codec, Vec<u8>) {
    match zstd::bulk::compress(original, ZSTD_LEVEL) {
        Ok(compressed) if compressed.len() < original.len() => (Codec::Zstd, compressed),
        // A compressor failure costs space, never the put.
        Ok(_) | Err(_) => (Codec::Raw, original.to_vec()),
    }
}

/// The original bytes back from `stored`; `original_len` bounds decompression, so a damaged
/// row cannot make the store allocate more than the size it recorded.
pub(crate) fn decode(
    codec: Codec,
    stored: Vec<u8>,
    original_len: usize,
) -> Result<Vec<u8>, String> {
    let bytes = match codec {
        Codec::Raw => stored,
        Codec::Zstd => zstd::bulk::decompress(&stored, original_len)
            .map_err(|error| format!("zstd content does not decompress: {error}"))?,
    };
    if bytes.len() != original_len {
        return Err(format!(
            "content is {} bytes, the recorded original size is {original_len}",
            bytes.len()
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn round_trips_both_codecs() {
        let text = "repeated line\n".repeat(200).into_bytes();
        let (codec, stored) = encode(&text);
        assert_eq!(codec, Codec::Zstd);
        assert_eq!(decode(codec, stored, text.len()).unwrap(), text);

        let tiny = b"[]".to_vec();
        let (codec, stored) = encode(&tiny);
        assert_eq!(codec, Codec::Raw);
        assert_eq!(decode(codec, stored, tiny.len()).unwrap(), tiny);
    }

    #[test]
    fn damaged_content_is_an_error_not_a_panic() {
        assert!(decode(Codec::Zstd, b"not zstd".to_vec(), 10).is_err());
        assert!(decode(Codec::Raw, b"short".to_vec(), 10).is_err());
        let text = "x".repeat(1000).into_bytes();
        let (_, stored) = encode(&text);
        assert!(decode(Codec::Zstd, stored, 10).is_err());
        assert_eq!(Codec::parse("gzip"), None);
        assert_eq!(Codec::parse(Codec::Zstd.as_str()), Some(Codec::Zstd));
    }
}
