//! Timestamps as formats write them: parsing RFC 3339 text to epoch milliseconds.

/// Parses an RFC 3339 / ISO 8601 timestamp (`2026-02-10T21:11:56.906Z`) to epoch milliseconds.
pub fn parse_rfc3339_millis(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|parsed| parsed.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_zulu_and_offsets() {
        assert_eq!(parse_rfc3339_millis("1970-01-01T00:00:01.500Z"), Some(1500));
        assert_eq!(parse_rfc3339_millis("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_rfc3339_millis("yesterday"), None);
    }
}
