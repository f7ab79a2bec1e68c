//! Timestamps as formats write them: parsing RFC 3339 text to epoch milliseconds, and writing
//! epoch milliseconds as RFC 3339 for people.

/// Parses an RFC 3339 / ISO 8601 timestamp (`2026-02-10T21:11:56.906Z`) to epoch milliseconds.
pub fn parse_rfc3339_millis(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|parsed| parsed.timestamp_millis())
}

/// Epoch milliseconds as RFC 3339 in UTC to the second (`2026-02-10T21:11:56Z`); the number
/// itself when it is outside the calendar's range.
pub fn format_rfc3339_seconds(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |time| time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_to_the_second_in_utc() {
        assert_eq!(format_rfc3339_seconds(1_500), "1970-01-01T00:00:01Z");
        assert_eq!(format_rfc3339_seconds(i64::MAX), i64::MAX.to_string());
    }

    #[test]
    fn parses_zulu_and_offsets() {
        assert_eq!(parse_rfc3339_millis("1970-01-01T00:00:01.500Z"), Some(1500));
        assert_eq!(parse_rfc3339_millis("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_rfc3339_millis("yesterday"), None);
    }
}
