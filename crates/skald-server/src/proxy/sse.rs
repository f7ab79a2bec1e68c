//! Server-sent events as the proxy relays them: an incremental splitter that cuts the upstream's
//! bytes into whole events as they arrive (an event may span chunks, a chunk may hold several
//! events), keeping each event's raw bytes so an event skald does not change is forwarded byte
//! for byte, and the one-line writer for events it rewrites.

use bytes::{Bytes, BytesMut};

/// One event: its raw bytes (terminator included) and its parsed `event` and `data` fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub raw: Bytes,
    /// The `event:` field (`None` when absent, as in OpenAI's streams).
    pub event: Option<String>,
    /// The `data:` lines, joined by newlines.
    pub data: String,
}

/// Cuts a byte stream into events.
#[derive(Debug, Default)]
pub struct SseSplitter {
    buffer: BytesMut,
}

impl SseSplitter {
    /// Adds `chunk` and returns every event it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = event_end(&self.buffer) {
            let raw = self.buffer.split_to(end).freeze();
            events.push(parse(raw));
        }
        events
    }

    /// What is left when the stream ends: a last event without its blank line, if any.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if self.buffer.iter().all(u8::is_ascii_whitespace) {
            self.buffer.clear();
            return None;
        }
        let mut raw = std::mem::take(&mut self.buffer);
        raw.extend_from_slice(b"\n\n");
        Some(parse(raw.freeze()))
    }
}

/// The end (exclusive) of the first complete event in `buffer`: after a blank line (`\n\n`,
/// `\r\n\r\n` or `\r\r`).
fn event_end(buffer: &[u8]) -> Option<usize> {
    let mut at = 0;
    let mut line_start = 0;
    while at < buffer.len() {
        let byte = buffer.get(at).copied()?;
        if byte == b'\n' || byte == b'\r' {
            let mut next = at + 1;
            if byte == b'\r' && buffer.get(next) == Some(&b'\n') {
                next += 1;
            } else if byte == b'\r' && next == buffer.len() {
                // A `\r` at the end may be the first half of `\r\n`: wait for more.
                return None;
            }
            if at == line_start {
                return Some(next);
            }
            line_start = next;
            at = next;
        } else {
            at += 1;
        }
    }
    None
}

/// The fields of one event (a comment or keep-alive has neither `event` nor `data`).
fn parse(raw: Bytes) -> SseEvent {
    let text = String::from_utf8_lossy(&raw);
    let mut event = None;
    let mut data: Option<String> = None;
    for line in text.split(['\n', '\r']) {
        if line.is_empty() || line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => event = Some(value.to_owned()),
            "data" => match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
    SseEvent {
        raw,
        event,
        data: data.unwrap_or_default(),
    }
}

/// An event written by skald: `event:` (when given) and one `data:` line.
pub fn write_event(event: Option<&str>, data: &str) -> Bytes {
    let mut out = String::with_capacity(data.len() + 32);
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(data);
    out.push_str("\n\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn events_split_across_chunks_come_out_whole_with_their_raw_bytes() {
        let mut splitter = SseSplitter::default();
        assert!(splitter.push(b"event: ping\nda").is_empty());
        let events = splitter.push(b"ta: {\"a\":1}\n\ndata: [DONE]\n\n");
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].event.as_deref(), Some("ping"));
        assert_eq!(events[0].data, "{\"a\":1}");
        assert_eq!(&events[0].raw[..], b"event: ping\ndata: {\"a\":1}\n\n");
        assert_eq!(events[1].data, "[DONE]");
        assert_eq!(splitter.finish(), None);
    }

    #[test]
    fn crlf_and_multiline_data_and_a_last_event_without_its_blank_line() {
        let mut splitter = SseSplitter::default();
        let events = splitter.push(b"data: a\r\ndata: b\r\n\r\ndata: c\r");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "a\nb");
        assert!(splitter.push(b"\n").is_empty());
        let last = splitter.finish().unwrap();
        assert_eq!(last.data, "c");
    }

    #[test]
    fn written_events_parse_back() {
        let raw = write_event(Some("message_stop"), "{\"type\":\"message_stop\"}");
        let mut splitter = SseSplitter::default();
        let events = splitter.push(&raw);
        assert_eq!(events[0].event.as_deref(), Some("message_stop"));
        assert_eq!(events[0].data, "{\"type\":\"message_stop\"}");
    }
}
