//! Upstream answer bodies as the proxy reads them, and what can go wrong with an upstream call
//! ([`Fault`]).
//!
//! A body is decoded whatever `content-encoding` the upstream chose: skald asks for `identity`
//! (a compressor in front of a stream may hold its events back), but a provider or a proxy in
//! front of it may compress anyway. gzip, deflate and zstd are decoded — the encodings skald
//! already decodes on requests, with the crates it already has; any other encoding (brotli) is
//! a clear 502 rather than a new dependency for something no provider sends unasked.
//!
//! Bodies are read within the idle timeout *between* pieces: a slow body that keeps coming is
//! waited for, one that stalls is not.

use std::io::Write;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use skald_engine::error_with_causes;

use crate::error::ApiError;
use crate::metrics::Metrics;

/// What went wrong with an upstream call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The upstream could not be reached (refused, DNS, TLS).
    Unreachable,
    /// No answer's headers within the connect or first-byte timeout.
    NoAnswer,
    /// Nothing came for the idle timeout.
    Stalled,
    /// The connection broke (a body shorter than its `content-length`, a reset).
    BrokeOff,
    /// A `content-encoding` skald cannot decode, or bytes that are not what it says.
    Undecodable,
    /// A 2xx answer whose body is not JSON (cut short, or an HTML page from a proxy).
    NotJson,
    /// A stream that ended without the API's final event.
    Incomplete,
    /// A stream the upstream ended with the API's own error event (the client got it).
    ErrorEvent,
    /// skald is stopping (SIGTERM) while the answer streams.
    ShuttingDown,
}

impl FaultKind {
    /// The `outcome` label of `skald_proxy_upstream_faults_total`.
    pub fn label(self) -> &'static str {
        match self {
            FaultKind::Unreachable => "unreachable",
            FaultKind::NoAnswer => "no_answer",
            FaultKind::Stalled => "stalled",
            FaultKind::BrokeOff => "broke_off",
            FaultKind::Undecodable => "undecodable",
            FaultKind::NotJson => "not_json",
            FaultKind::Incomplete => "incomplete_stream",
            FaultKind::ErrorEvent => "error_event",
            FaultKind::ShuttingDown => "shutting_down",
        }
    }
}

/// A failed upstream call: what kind of failure, and the message the client gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub message: String,
}

impl Fault {
    pub fn new(kind: FaultKind, message: String) -> Fault {
        Fault { kind, message }
    }

    /// The fault of a call cut off because skald is stopping.
    pub fn shutting_down() -> Fault {
        Fault::new(
            FaultKind::ShuttingDown,
            "skald is shutting down: the call was cut off before the answer's end; send the \
             request again once the server is back"
                .to_owned(),
        )
    }

    /// Counts the fault (the call failed, whatever status the client already got) and logs it.
    pub fn record(&self, metrics: &Metrics, session: &str) {
        Metrics::outcome(&metrics.upstream_faults, self.kind.label());
        tracing::warn!(
            session,
            fault = self.kind.label(),
            "upstream answer failed: {}",
            self.message
        );
    }

    /// The error a client gets when no part of the answer went out yet.
    pub fn into_api_error(self) -> ApiError {
        match self.kind {
            FaultKind::Stalled | FaultKind::NoAnswer => ApiError::GatewayTimeout(self.message),
            FaultKind::ShuttingDown => ApiError::Unavailable(self.message),
            FaultKind::Unreachable
            | FaultKind::BrokeOff
            | FaultKind::Undecodable
            | FaultKind::NotJson
            | FaultKind::Incomplete
            | FaultKind::ErrorEvent => ApiError::BadGateway(self.message),
        }
    }
}

/// A body decoder for one `content-encoding`, fed piece by piece (so streams stay streams).
enum Decoder {
    Identity,
    Gzip(flate2::write::GzDecoder<Vec<u8>>),
    Deflate(flate2::write::ZlibDecoder<Vec<u8>>),
    Zstd(Box<zstd::stream::write::Decoder<'static, Vec<u8>>>),
}

impl Decoder {
    /// The decoder for the answer's `content-encoding` (one encoding, or none).
    fn for_headers(headers: &reqwest::header::HeaderMap) -> Result<Decoder, Fault> {
        let mut codings = Vec::new();
        for value in headers.get_all(reqwest::header::CONTENT_ENCODING) {
            let text = value.to_str().map_err(|_| {
                Fault::new(
                    FaultKind::Undecodable,
                    "the upstream's content-encoding header is not text".to_owned(),
                )
            })?;
            codings.extend(
                text.split(',')
                    .map(|coding| coding.trim().to_ascii_lowercase())
                    .filter(|coding| !coding.is_empty() && coding != "identity"),
            );
        }
        let unsupported = |what: String| {
            Fault::new(
                FaultKind::Undecodable,
                format!(
                    "the upstream answered with content-encoding {what}, which skald cannot \
                     decode (it decodes gzip, deflate and zstd, and asks for identity): \
                     configure the upstream, or the proxy in front of it, not to compress"
                ),
            )
        };
        let decoder = match codings.as_slice() {
            [] => Decoder::Identity,
            [one] => match one.as_str() {
                "gzip" | "x-gzip" => Decoder::Gzip(flate2::write::GzDecoder::new(Vec::new())),
                "deflate" => Decoder::Deflate(flate2::write::ZlibDecoder::new(Vec::new())),
                "zstd" => Decoder::Zstd(Box::new(
                    zstd::stream::write::Decoder::new(Vec::new()).map_err(|error| {
                        Fault::new(
                            FaultKind::Undecodable,
                            format!("cannot start a zstd decoder: {error}"),
                        )
                    })?,
                )),
                other => return Err(unsupported(format!("{other:?}"))),
            },
            several => return Err(unsupported(format!("{several:?} (several)"))),
        };
        Ok(decoder)
    }

    fn name(&self) -> &'static str {
        match self {
            Decoder::Identity => "identity",
            Decoder::Gzip(_) => "gzip",
            Decoder::Deflate(_) => "deflate",
            Decoder::Zstd(_) => "zstd",
        }
    }

    /// The decoded bytes `chunk` completes (may be empty).
    fn push(&mut self, chunk: Bytes) -> Result<Bytes, Fault> {
        let name = self.name();
        let invalid = |error: std::io::Error| {
            Fault::new(
                FaultKind::Undecodable,
                format!("the upstream's answer is not valid {name}: {error}"),
            )
        };
        let out = match self {
            Decoder::Identity => return Ok(chunk),
            Decoder::Gzip(decoder) => {
                decoder.write_all(&chunk).map_err(invalid)?;
                decoder.flush().map_err(invalid)?;
                decoder.get_mut()
            }
            Decoder::Deflate(decoder) => {
                decoder.write_all(&chunk).map_err(invalid)?;
                decoder.flush().map_err(invalid)?;
                decoder.get_mut()
            }
            Decoder::Zstd(decoder) => {
                decoder.write_all(&chunk).map_err(invalid)?;
                decoder.flush().map_err(invalid)?;
                decoder.get_mut()
            }
        };
        Ok(Bytes::from(std::mem::take(out)))
    }

    /// What is left once the body ended.
    fn finish(self) -> Result<Bytes, Fault> {
        let name = self.name();
        let invalid = |error: std::io::Error| {
            Fault::new(
                FaultKind::Undecodable,
                format!("the upstream's answer is not valid {name}: {error}"),
            )
        };
        let rest = match self {
            Decoder::Identity => Vec::new(),
            Decoder::Gzip(decoder) => decoder.finish().map_err(invalid)?,
            Decoder::Deflate(decoder) => decoder.finish().map_err(invalid)?,
            Decoder::Zstd(mut decoder) => {
                decoder.flush().map_err(invalid)?;
                decoder.into_inner()
            }
        };
        Ok(Bytes::from(rest))
    }
}

/// An upstream answer's body, decoded, read piece by piece.
pub struct UpstreamBody {
    response: reqwest::Response,
    /// `None` once the body ended.
    decoder: Option<Decoder>,
}

impl UpstreamBody {
    /// The body of `response`; a fault when its encoding cannot be decoded.
    pub fn new(response: reqwest::Response) -> Result<UpstreamBody, Fault> {
        let decoder = Decoder::for_headers(response.headers())?;
        Ok(UpstreamBody {
            response,
            decoder: Some(decoder),
        })
    }

    /// The next decoded piece (possibly empty), `None` at the end; waits at most `idle` for the
    /// upstream's next bytes.
    pub async fn next(&mut self, idle: Duration) -> Result<Option<Bytes>, Fault> {
        let Some(decoder) = self.decoder.as_mut() else {
            return Ok(None);
        };
        match tokio::time::timeout(idle, self.response.chunk()).await {
            Ok(Ok(Some(chunk))) => decoder.push(chunk).map(Some),
            Ok(Ok(None)) => match self.decoder.take() {
                Some(decoder) => decoder.finish().map(Some),
                None => Ok(None),
            },
            Ok(Err(error)) => Err(Fault::new(
                FaultKind::BrokeOff,
                format!(
                    "the upstream's answer broke off: {}",
                    error_with_causes(&error)
                ),
            )),
            Err(_) => Err(Fault::new(
                FaultKind::Stalled,
                format!(
                    "the upstream's answer stalled: nothing for {idle:?} (the proxy's idle \
                     timeout)"
                ),
            )),
        }
    }
}

/// A whole answer's body, decoded, with at most `idle` between two pieces of it.
pub async fn read_whole(response: reqwest::Response, idle: Duration) -> Result<Bytes, Fault> {
    let mut body = UpstreamBody::new(response)?;
    // A body that comes in one piece (most do) is passed on as it is, without a copy.
    let mut first: Option<Bytes> = None;
    let mut joined: Option<BytesMut> = None;
    while let Some(piece) = body.next(idle).await? {
        if piece.is_empty() {
            continue;
        }
        match (&mut joined, first.take()) {
            (Some(joined), _) => joined.extend_from_slice(&piece),
            (None, None) => first = Some(piece),
            (None, Some(earlier)) => {
                let mut both = BytesMut::with_capacity(earlier.len() + piece.len());
                both.extend_from_slice(&earlier);
                both.extend_from_slice(&piece);
                joined = Some(both);
            }
        }
    }
    Ok(match joined {
        Some(joined) => joined.freeze(),
        None => first.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn headers(encoding: &str) -> reqwest::header::HeaderMap {
        let mut map = reqwest::header::HeaderMap::new();
        map.insert(
            reqwest::header::CONTENT_ENCODING,
            reqwest::header::HeaderValue::from_str(encoding).unwrap(),
        );
        map
    }

    fn decode_in_pieces(encoding: &str, encoded: &[u8]) -> Vec<u8> {
        let mut decoder = Decoder::for_headers(&headers(encoding)).unwrap();
        let mut out = Vec::new();
        for piece in encoded.chunks(7) {
            out.extend_from_slice(&decoder.push(Bytes::copy_from_slice(piece)).unwrap());
        }
        out.extend_from_slice(&decoder.finish().unwrap());
        out
    }

    #[test]
    fn gzip_deflate_and_zstd_decode_piece_by_piece() {
        let plain = b"data: {\"a\":1}\n\ndata: [DONE]\n\n".repeat(20);
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(&plain).unwrap();
        assert_eq!(decode_in_pieces("gzip", &gzip.finish().unwrap()), plain);
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(&plain).unwrap();
        assert_eq!(decode_in_pieces("Deflate", &zlib.finish().unwrap()), plain);
        let zstd = zstd::encode_all(plain.as_slice(), 3).unwrap();
        assert_eq!(decode_in_pieces(" zstd ", &zstd), plain);
        assert_eq!(decode_in_pieces("identity", &plain), plain);
    }

    #[test]
    fn brotli_and_stacked_encodings_are_refused_by_name() {
        for encoding in ["br", "gzip, zstd", "compress"] {
            let Err(fault) = Decoder::for_headers(&headers(encoding)) else {
                panic!("{encoding} was accepted");
            };
            assert_eq!(fault.kind, FaultKind::Undecodable);
            assert!(fault.message.contains("cannot decode"), "{}", fault.message);
        }
    }
}
