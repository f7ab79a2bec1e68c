//! What one line states, read near its start: a log level, a timestamp, an error trigger, a grep
//! hit, an `ls -l` entry, a bare file name.
//!
//! These tests run on (nearly) every line, by the scan, the summaries and the facts alike, so
//! each looks at a bounded prefix of the line and most reject a line in a few word-at-a-time
//! operations. The error ranks are computed here, once, for the lines a whole-text literal search
//! finds ([`annotate_error_ranks`]).

use std::sync::LazyLock;

use regex::Regex;

use crate::swar::{bytes_equal, load_word, lower_bytes, upper_bytes};

use super::facts::error_rank;
use super::input::{LINE_HEAD_BYTES, Line};
use super::text::prefix_bytes;

fn level_name(word: &[u8]) -> Option<&'static str> {
    let level = match word {
        b"FATAL" | b"CRITICAL" | b"fatal" | b"critical" => "FATAL",
        b"ERROR" | b"error" => "ERROR",
        b"WARN" | b"WARNING" | b"warn" | b"warning" => "WARN",
        b"INFO" | b"info" => "INFO",
        b"DEBUG" | b"debug" => "DEBUG",
        b"TRACE" | b"trace" => "TRACE",
        _ => return None,
    };
    Some(level)
}

/// Levels from most to least severe, the order the log summary lists them in.
pub(super) const LEVEL_ORDER: [&str; 6] = ["FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"];

/// A log line states its level near its start; further in, a level word is prose.
const LEVEL_WITHIN_BYTES: usize = 48;

const WORD: u8 = 1;
const LEVEL_UPPER: u8 = 2;
const LEVEL_LOWER: u8 = 4;

/// Byte classes for [`log_level`]'s scan: word bytes, and the first letters of level names.
static BYTE_CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        if byte.is_ascii_alphanumeric() || byte == b'_' {
            table[b] |= WORD;
        }
        if matches!(byte, b'F' | b'C' | b'E' | b'W' | b'I' | b'D' | b'T') {
            table[b] |= LEVEL_UPPER;
        }
        if matches!(byte, b'f' | b'c' | b'e' | b'w' | b'i' | b'd' | b't') {
            table[b] |= LEVEL_LOWER;
        }
        b += 1;
    }
    table
};

/// The log level a line states near its start: an uppercase level word (`ERROR`, `[WARN]`), a
/// lowercase one in brackets (`[error]`), or logfmt's `level=error`.
pub(super) fn log_level(line: &str) -> Option<&'static str> {
    let bytes = prefix_bytes(line, LEVEL_WITHIN_BYTES).as_bytes();
    if !may_state_level(bytes) {
        return None;
    }
    let mut previous = 0u8;
    for (i, &b) in bytes.iter().enumerate() {
        let class = BYTE_CLASS.get(usize::from(b)).copied().unwrap_or(0);
        let word_start = previous & WORD == 0;
        previous = class;
        if !word_start || class & (LEVEL_UPPER | LEVEL_LOWER) == 0 {
            continue;
        }
        // A lowercase level only counts after `[`, `level=` or `level="`.
        let lowercase = class & LEVEL_LOWER != 0;
        let before = i.checked_sub(1).and_then(|p| bytes.get(p));
        if lowercase && !matches!(before, Some(b'[' | b'=' | b'"')) {
            continue;
        }
        if let Some(level) = level_at(bytes, i, lowercase) {
            return Some(level);
        }
    }
    None
}

/// Whether `bytes` has what every level [`log_level`] finds needs: four uppercase letters in a
/// row, a lowercase letter right after `[`, or logfmt's `level=`. Tested eight bytes at a time:
/// most lines have none of them, and are then done with in a few operations per word.
fn may_state_level(bytes: &[u8]) -> bool {
    let mut previous_upper = 0u64;
    let mut pos = 0;
    while pos < bytes.len() {
        let word = load_word(bytes, pos);
        let upper = upper_bytes(word);
        let run_of_four = upper
            & (upper << 8 | previous_upper >> 56)
            & (upper << 16 | previous_upper >> 48)
            & (upper << 24 | previous_upper >> 40);
        let brackets = bytes_equal(word, b'[');
        // Lane `i` of the word one byte on is the byte after lane `i`.
        let lowercase_after = if brackets == 0 {
            0
        } else {
            brackets & lower_bytes(load_word(bytes, pos + 1))
        };
        if run_of_four | lowercase_after != 0 {
            return true;
        }
        let mut equals = bytes_equal(word, b'=');
        while equals != 0 {
            let at = pos + (equals.trailing_zeros() / 8) as usize;
            if at >= 5 && bytes.get(at - 5..at) == Some(b"level".as_slice()) {
                return true;
            }
            equals &= equals - 1;
        }
        previous_upper = upper;
        pos += 8;
    }
    false
}

/// The level word starting at `i`, if it is one in a position that makes it a level.
fn level_at(bytes: &[u8], i: usize, lowercase: bool) -> Option<&'static str> {
    let logfmt = i >= 6 && bytes.get(i - 6..i) == Some(b"level=".as_slice());
    let quoted_logfmt = i >= 7 && bytes.get(i - 7..i) == Some(b"level=\"".as_slice());
    let bracketed = i >= 1 && bytes.get(i - 1) == Some(&b'[');
    if lowercase && !bracketed && !logfmt && !quoted_logfmt {
        return None;
    }
    let len = bytes.get(i..).map_or(0, |rest| {
        rest.iter().take_while(|c| c.is_ascii_alphabetic()).count()
    });
    if !(4..=8).contains(&len) {
        return None;
    }
    let word = bytes.get(i..i + len)?;
    let after = bytes.get(i + len).copied();
    let closed = !lowercase || logfmt || quoted_logfmt || after == Some(b']');
    let bounded = after.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == b'_'));
    let cased = lowercase || word.iter().all(u8::is_ascii_uppercase);
    if closed && bounded && cased {
        level_name(word)
    } else {
        None
    }
}

/// Substrings without which a line has no [`error_rank`]: the ranks are computed only for the
/// lines a whole-text literal search finds.
#[allow(clippy::expect_used)]
static ERROR_TRIGGER_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        "rror|ERR|FAIL|FATAL|fatal|CRITICAL|critical|panic|xception|Traceback|KeyboardInterrupt",
        "|E   |No such file|command not found|Permission denied|cannot access",
    ))
    .expect("error trigger pattern compiles")
});

pub(super) fn annotate_error_ranks(body: &str, lines: &mut [Line<'_>]) {
    let mut cursor = 0;
    let mut from = 0;
    while let Some(found) = ERROR_TRIGGER_RE.find_at(body, from) {
        from = found.end();
        let Some(line) = line_at(lines, &mut cursor, found.start()) else {
            continue;
        };
        let end = line.start + line.text.len();
        if found.start() < end {
            line.trigger = true;
            line.rank = error_rank(line.trimmed_start);
            // One rank per line: continue after it.
            from = from.max(end);
        }
    }
}

/// The line containing byte `pos` (or the gutter before it), for positions visited in
/// ascending order: `cursor` carries the search forward.
fn line_at<'l, 'a>(
    lines: &'l mut [Line<'a>],
    cursor: &mut usize,
    pos: usize,
) -> Option<&'l mut Line<'a>> {
    while lines.get(*cursor + 1).is_some_and(|next| next.start <= pos) {
        *cursor += 1;
    }
    let line = lines.get_mut(*cursor)?;
    (line.start <= pos).then_some(line)
}

/// A timestamp near the start of a line (its first 48 bytes): `HH:MM:SS`, extended left over
/// an ISO date and right over a fraction and `Z`.
pub(super) fn find_timestamp(line: &str) -> Option<&str> {
    let bytes = prefix_bytes(line, 48).as_bytes();
    // `HH:MM:SS` has two colons: most lines have fewer, counted eight bytes at a time.
    let mut colons = 0;
    let mut pos = 0;
    while colons < 2 && pos < bytes.len() {
        colons += bytes_equal(load_word(bytes, pos), b':').count_ones();
        pos += 8;
    }
    if colons < 2 {
        return None;
    }
    let digit = |k: usize| bytes.get(k).is_some_and(u8::is_ascii_digit);
    let colon = |k: usize| bytes.get(k) == Some(&b':');
    let mut from = 0;
    while let Some(found) = memchr::memchr(b':', bytes.get(from..)?) {
        let c = from + found;
        from = c + 1;
        let Some(h) = c.checked_sub(2) else {
            continue;
        };
        let is_time = digit(h)
            && digit(h + 1)
            && digit(c + 1)
            && digit(c + 2)
            && colon(c + 3)
            && digit(c + 4)
            && digit(c + 5)
            && !h.checked_sub(1).is_some_and(digit);
        if !is_time {
            continue;
        }
        let mut start = h;
        if let Some(date_start) = h.checked_sub(11) {
            let is_date = (0..10).all(|k| match k {
                4 | 7 => matches!(bytes.get(date_start + k), Some(b'-' | b'/')),
                _ => digit(date_start + k),
            });
            if is_date && matches!(bytes.get(h - 1), Some(b'T' | b' ')) {
                start = date_start;
            }
        }
        let mut end = h + 8;
        while let Some(&b) = bytes.get(end) {
            let fraction = (b == b'.' || b == b',') && digit(end + 1);
            if fraction || b.is_ascii_digit() || b == b'Z' {
                end += 1;
            } else {
                break;
            }
        }
        return line.get(start..end);
    }
    None
}

/// `path:line:` or `path/with/slash:` at the start of a grep hit; returns the path. grep's
/// own notes (`grep: x.pyc: binary file matches`, `Binary file x matches`) count as hits.
pub(super) fn grep_hit(t: &str) -> Option<&str> {
    let head = prefix_bytes(t, LINE_HEAD_BYTES);
    if let Some(rest) = head.strip_prefix("grep: ") {
        return rest.split(':').next();
    }
    if let Some(rest) = head.strip_prefix("Binary file ") {
        return rest.strip_suffix(" matches");
    }
    // The path ends at the first `:` and holds no space: stop at whichever comes first (in
    // prose and code, a space within a few bytes).
    let colon = head.bytes().position(|b| b == b':' || b == b' ')?;
    if head.as_bytes().get(colon) != Some(&b':') {
        return None;
    }
    let path = head.get(..colon)?;
    let rest = head.get(colon + 1..)?;
    if path.is_empty() || !path.contains('.') {
        return None;
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let has_line = digits > 0 && rest.as_bytes().get(digits) == Some(&b':');
    (has_line || path.contains('/')).then_some(path)
}

/// `drwxr-xr-x  5 user staff 160 Jan  1 10:00 name`.
pub(super) fn is_ls_long(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() > 11
        && matches!(
            b.first(),
            Some(b'd' | b'-' | b'l' | b'c' | b'b' | b'p' | b's')
        )
        && b.get(1..10).is_some_and(|perm| {
            perm.iter()
                .all(|c| matches!(c, b'r' | b'w' | b'x' | b'-' | b's' | b'S' | b't' | b'T'))
        })
}

/// One file name per line (`ls`, `find`): short, no spaces, nothing code-like.
pub(super) fn is_bare_name(t: &str) -> bool {
    t.len() <= 120
        && t.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/'))
        && !t.bytes().any(|b| {
            matches!(
                b,
                b' ' | b'(' | b')' | b'{' | b'}' | b';' | b'=' | b'"' | b'<' | b'>' | b',' | b':'
            )
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn log_levels() {
        assert_eq!(
            log_level("2024-05-01T10:00:00Z INFO server: up"),
            Some("INFO")
        );
        assert_eq!(log_level("[WARN] disk slow"), Some("WARN"));
        assert_eq!(log_level("WARNING:root:slow"), Some("WARN"));
        assert_eq!(
            log_level("2024/05/01 10:00:00 [error] 12#0: boom"),
            Some("ERROR")
        );
        assert_eq!(log_level("ts=1 level=debug msg=x"), Some("DEBUG"));
        assert_eq!(log_level("ts=1 level=\"info\" msg=x"), Some("INFO"));
        assert_eq!(log_level("CRITICAL: out of memory"), Some("FATAL"));
        assert_eq!(log_level("the error is here"), None);
        assert_eq!(log_level("Information only"), None);
        assert_eq!(log_level("LOG_ERROR_COUNT=3"), None);
        assert_eq!(log_level(&format!("{} ERROR late", "x".repeat(60))), None);
    }

    #[test]
    fn timestamps() {
        assert_eq!(
            find_timestamp("2024-05-01T10:00:01.120Z INFO"),
            Some("2024-05-01T10:00:01.120Z")
        );
        assert_eq!(
            find_timestamp("2024-05-01 10:00:01,5 - x"),
            Some("2024-05-01 10:00:01,5")
        );
        assert_eq!(
            find_timestamp("Mar  3 10:12:00 host sshd"),
            Some("10:12:00")
        );
        assert_eq!(find_timestamp("at 10:12 sharp"), None);
        assert_eq!(find_timestamp("version 1:2:3"), None);
        assert_eq!(find_timestamp("id 123:45:67"), None);
        // Only the first 48 bytes are looked at.
        let late = format!("{}10:12:00", " ".repeat(40));
        assert_eq!(find_timestamp(&late), Some("10:12:00"));
        assert_eq!(find_timestamp(&format!(" {late}")), None);
        assert_eq!(find_timestamp("a:b 10:12:00"), Some("10:12:00"));
    }

    #[test]
    fn every_error_line_holds_a_trigger() {
        // `annotate_error_ranks` only ranks lines the trigger regex finds.
        for line in [
            "error[E0425]: x",
            "ValueError: bad",
            "KeyboardInterrupt",
            "thread 'main' panicked at x",
            "E   assert 1",
            "npm ERR! x",
            "Traceback (most recent call last):",
            "FAILED x",
            "--- FAIL: T",
            "ls: x: No such file or directory",
            "sh: x: command not found",
            "cat: x: Permission denied",
            "[error] x",
            "CRITICAL x",
            "fatal: x",
            "panic: x",
        ] {
            assert!(ERROR_TRIGGER_RE.is_match(line), "{line}");
        }
    }

    /// [`log_level`]'s scan without the word-at-a-time test in front of it.
    fn log_level_unfiltered(line: &str) -> Option<&'static str> {
        let bytes = prefix_bytes(line, LEVEL_WITHIN_BYTES).as_bytes();
        (0..bytes.len()).find_map(|i| {
            let class = BYTE_CLASS[usize::from(bytes[i])];
            let word_start = i == 0 || BYTE_CLASS[usize::from(bytes[i - 1])] & WORD == 0;
            let lowercase = class & LEVEL_LOWER != 0;
            if !word_start || class & (LEVEL_UPPER | LEVEL_LOWER) == 0 {
                return None;
            }
            let before = i.checked_sub(1).map(|p| bytes[p]);
            if lowercase && !matches!(before, Some(b'[' | b'=' | b'"')) {
                return None;
            }
            level_at(bytes, i, lowercase)
        })
    }

    #[test]
    fn the_level_prefilter_passes_every_line_that_states_a_level() {
        let lines = [
            "2024-01-01 12:00:00 ERROR db: down",
            "[warn] disk",
            "level=error msg=x",
            "level=\"info\" x",
            "x = y; WARNING: deprecated",
            "                                   [error] late",
            "                                          ERROR",
            "                                           ERROR",
            "ÉÉ [debug] x",
            "CRITICAL",
            "FATAL!",
            "the error was fine",
            "ERRORS are words",
            "[Info] mixed",
        ];
        let mut levels = 0;
        for line in lines {
            let bytes = prefix_bytes(line, LEVEL_WITHIN_BYTES).as_bytes();
            assert_eq!(log_level(line), log_level_unfiltered(line), "{line:?}");
            if log_level_unfiltered(line).is_some() {
                levels += 1;
                assert!(may_state_level(bytes), "{line:?}");
            }
        }
        assert!(levels >= 9, "{levels}");
        assert!(!may_state_level(b"fn main() { let x = 1; }"));
    }

    proptest::proptest! {
        #[test]
        fn the_level_prefilter_never_hides_a_level(
            line in "(ERROR|WARN|INFO|DEBUG|TRACE|FATAL|CRITICAL|error|warn|info|Debug|level=|level=\"|[A-Z]{1,5}|[a-z ]{1,6}|[\\[\\]=\"_:.é ]){0,24}"
        ) {
            proptest::prop_assert_eq!(log_level(&line), log_level_unfiltered(&line));
        }
    }
}
