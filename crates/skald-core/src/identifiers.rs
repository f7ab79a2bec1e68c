//! Opaque identifiers in free text: hashes, URLs, absolute paths, Windows paths, `host:port`
//! pairs and long numbers — the exact strings a summary must not lose or "reconstruct".
//!
//! This module owns one pattern, taken from OpenClaw's compaction (`extractOpaqueIdentifiers`),
//! and the rules around it: how a match is sanitised, how two spellings of one identifier are
//! compared, and a separate, clearly named extractor for *relative* paths (`src/foo.rs`), which
//! the OpenClaw pattern deliberately does not match. Compaction's quality guard, `skald replay`'s
//! retention measure and the tool-output digests all use it, so it is written to run over
//! megabytes: one regex compiled once, ASCII-only classes (which keep the regex engine on its fast
//! DFA path), no per-match allocation beyond the returned strings.
//!
//! Differences from the seed, on purpose:
//! - Identifiers are returned **as written**. The seed uppercases pure hex while extracting; here
//!   that normalisation is [`normalize_identifier`], used for deduplication and by
//!   [`mentions_identifier`], so a caller that shows an identifier shows the real string.
//! - Lengths count characters (`char`s), where JavaScript counts UTF-16 units; identifiers are
//!   ASCII in practice, so the `>= 4` filter agrees.
//! - A URL ends at a control character as well as at whitespace (`\S+` would run on through
//!   an ANSI colour code), and matches that are not identifiers are dropped
//!   ([`is_junk_identifier`]): runs of one letter (pytest's `EEEEEEEE` progress), and "drive
//!   paths" that are JSON-escaped text (`lines:\n\n` yields `s:\n\n`).
//!
//! ```
//! use skald_core::identifiers::{extract_identifiers, mentions_identifier};
//!
//! let text = "commit 3f2a9c1d0b (see https://example.com/pr/7). Edited /srv/app/main.py";
//! let ids = extract_identifiers(text);
//! assert_eq!(ids, ["3f2a9c1d0b", "https://example.com/pr/7", "/srv/app/main.py"]);
//! assert!(mentions_identifier("Reverted 3F2A9C1D0B.", "3f2a9c1d0b"));
//! ```

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use crate::swar::{bytes_between, bytes_equal, hex_bytes, load_word};

/// How many identifiers compaction's quality guard checks (OpenClaw's
/// `MAX_EXTRACTED_IDENTIFIERS`).
pub const MAX_GUARD_IDENTIFIERS: usize = 12;

/// Identifiers shorter than this (in characters, after sanitising) are dropped.
pub const MIN_IDENTIFIER_CHARS: usize = 4;

/// OpenClaw's identifier pattern, one alternative per line. JavaScript's `\w`, `\d` and `\b` are
/// ASCII-only, so they are spelled as ASCII classes here; Rust's would be Unicode-aware (and
/// slower). Alternatives are tried in order at each position (leftmost-first, as in JavaScript),
/// so an 8+ digit number is taken by the hex alternative and `\b[0-9]{6,}\b` only ever yields six
/// or seven digit numbers.
pub const IDENTIFIER_PATTERN: &str = concat!(
    r"[A-Fa-f0-9]{8,}",
    r"|https?://[^\s\p{Cc}]+",
    r"|/[A-Za-z0-9_.-]{2,}(?:/[A-Za-z0-9_.-]+)+",
    r"|[A-Za-z]:\\[A-Za-z0-9_\\.-]+",
    r"|[A-Za-z0-9._-]+\.[A-Za-z0-9._/-]+:[0-9]{1,5}",
    r"|(?-u:\b)[0-9]{6,}(?-u:\b)",
);

/// Candidate relative paths: a run of path characters with at least one slash. Whether the
/// candidate is a relative path with an extension is decided in code ([`path_like_candidate`]),
/// which is simpler and faster than expressing it in the pattern.
const PATH_LIKE_PATTERN: &str = r"[A-Za-z0-9_.~+-]*/[A-Za-z0-9_.~/+-]*";

#[allow(clippy::expect_used)] // The patterns are constants covered by tests.
static IDENTIFIER_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(IDENTIFIER_PATTERN).expect("identifier pattern compiles"));

#[allow(clippy::expect_used)]
static DISPLAY_IDENTIFIER_RE: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = IDENTIFIER_PATTERN.replace(
        r"https?://[^\s\p{Cc}]+",
        r#"https?://[^\s\p{Cc}"'<>`\\{}|^]+"#,
    );
    Regex::new(&pattern).expect("display identifier pattern compiles")
});

#[allow(clippy::expect_used)]
static PATH_LIKE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(PATH_LIKE_PATTERN).expect("path-like pattern compiles"));

const LEADING_JUNK: &[char] = &['(', '"', '\'', '`', '[', '{', '<'];
const TRAILING_JUNK: &[char] = &[
    ')', ']', '"', '\'', '`', ',', ';', ':', '.', '!', '?', '<', '>',
];

/// Strips what prose wraps an identifier in: leading ``("'`[{<`` and trailing ``)]"'`,;:.!?<>``
/// (a backtick included in both).
pub fn sanitize_identifier(raw: &str) -> &str {
    raw.trim()
        .trim_start_matches(LEADING_JUNK)
        .trim_end_matches(TRAILING_JUNK)
}

/// True for 8 or more hex digits and nothing else (a hash, a commit id, a long number).
pub fn is_pure_hex(value: &str) -> bool {
    value.len() >= 8 && value.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The spelling identifiers are compared in: pure hex uppercased (a hash is the same hash in
/// either case), everything else unchanged.
pub fn normalize_identifier(value: &str) -> Cow<'_, str> {
    if is_pure_hex(value) && value.bytes().any(|b| b.is_ascii_lowercase()) {
        Cow::Owned(value.to_ascii_uppercase())
    } else {
        Cow::Borrowed(value)
    }
}

/// Every identifier occurrence in `text`, in order, sanitised and length-filtered but not
/// deduplicated, with its byte range in `text`.
pub fn find_identifiers(text: &str) -> impl Iterator<Item = (Range<usize>, &str)> + '_ {
    search_candidates(&IDENTIFIER_RE, text)
}

/// Like [`find_identifiers`], except that a URL ends at the first character a URL cannot hold
/// unescaped (`"'<>` backtick `\{}|^`) instead of at whitespace. OpenClaw's `https?://\S+` runs
/// on through the rest of a minified JSON or HTML line, swallowing every identifier after the
/// URL; a summary that shows identifiers wants them one by one. Only the extent of URLs
/// differs; extraction for comparisons ([`extract_identifiers`]) keeps the seed's pattern.
pub fn find_identifiers_for_display(text: &str) -> impl Iterator<Item = (Range<usize>, &str)> + '_ {
    search_candidates(&DISPLAY_IDENTIFIER_RE, text)
}

/// `pattern` (one of the identifier patterns) over the parts of `text` that can hold a match
/// ([`candidate_spans`]), matches sanitised and placed in `text`.
fn search_candidates<'t>(
    pattern: &'static Regex,
    text: &'t str,
) -> impl Iterator<Item = (Range<usize>, &'t str)> + 't {
    candidate_spans(text).into_iter().flat_map(move |span| {
        let offset = span.start;
        let haystack = text.get(span).unwrap_or("");
        pattern
            .find_iter(haystack)
            .filter_map(move |found| sanitized(haystack, offset, found))
    })
}

/// A match sanitised, with its range in the text its haystack starts `offset` bytes into;
/// `None` when too short or not an identifier ([`is_junk_identifier`]).
fn sanitized<'t>(
    haystack: &'t str,
    offset: usize,
    found: regex::Match<'t>,
) -> Option<(Range<usize>, &'t str)> {
    let raw = found.as_str();
    let clean = sanitize_identifier(raw);
    if clean.chars().count() < MIN_IDENTIFIER_CHARS {
        return None;
    }
    let inner_start = found.start() + (clean.as_ptr() as usize - raw.as_ptr() as usize);
    let before = inner_start
        .checked_sub(1)
        .and_then(|i| haystack.as_bytes().get(i))
        .copied();
    if is_junk_identifier(clean, before) {
        return None;
    }
    // `clean` is a sub-slice of `raw`, so its offset inside `raw` is a pointer difference.
    let start = offset + found.start() + (clean.as_ptr() as usize - raw.as_ptr() as usize);
    Some((start..start + clean.len(), clean))
}

/// Whether a match of the identifier pattern is no identifier at all, given the byte before it:
///
/// - whitespace or a control character in it (only a URL could hold one, and URLs end there);
/// - a run of one character (`EEEEEEEE`, pytest's progress line for a run of errors) or hex
///   letters without a digit, two letters at most (`FFFFEEEE`): progress marks, not hashes;
/// - a Windows path whose drive letter ends a word (`lines:\n` gives `s:\n`) or that holds an
///   escaped newline or tab (`\n` or `\t` not followed by a letter): JSON-escaped text, not a
///   path.
pub fn is_junk_identifier(id: &str, before: Option<u8>) -> bool {
    if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return true;
    }
    let mut chars = id.chars();
    let first = chars.next();
    if first.is_some_and(|first| chars.all(|c| c == first)) {
        return true;
    }
    if is_pure_hex(id) && !id.bytes().any(|b| b.is_ascii_digit()) {
        let mut letters: Vec<u8> = id.bytes().map(|b| b.to_ascii_lowercase()).collect();
        letters.sort_unstable();
        letters.dedup();
        if letters.len() <= 2 {
            return true;
        }
    }
    let bytes = id.as_bytes();
    let drive_path = bytes.len() > 3
        && bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && bytes.get(1) == Some(&b':')
        && bytes.get(2) == Some(&b'\\');
    if drive_path {
        let word_before = before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
        let escaped = bytes.windows(2).enumerate().any(|(i, pair)| {
            matches!(pair, [b'\\', b'n' | b'r' | b't'])
                && !bytes.get(i + 2).is_some_and(u8::is_ascii_alphabetic)
        });
        return word_before || escaped;
    }
    false
}

/// Tokens closer than this are searched as one span: a search has a fixed cost, and scanning a
/// short gap costs less.
const SPAN_MERGE_GAP: usize = 32;

/// Byte ranges of `text`, in order, outside which no identifier pattern can match.
///
/// No alternative of the pattern matches ASCII whitespace, so every match lies inside one
/// whitespace-separated token, and searching a run of whole tokens finds exactly the matches a
/// search of the whole text finds there (a span's edges, like whitespace, are not word
/// characters for `\b`). A token can hold a match only if it has 8 hex digits or 6 digits in a
/// row (hashes, numbers), two slashes (absolute paths), or a `:` followed by a digit, `/` or
/// `\` (`host:port`, `://`, `C:\`) — so only if it has a `/`, such a `:` or six hex digits
/// in a row. Those are looked for eight bytes at a time; the few tokens that have one are checked
/// exactly, and the regex runs over those that pass: in prose and code, a few percent of the
/// text.
fn candidate_spans(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut spans: Vec<Range<usize>> = Vec::new();
    let mut pos = 0;
    // Bytes before `settled` belong to tokens already decided.
    let mut settled = 0;
    // Hex bytes, and hex bytes preceded by one, of the previous word: for runs that cross into
    // this one.
    let mut previous_hex = 0u64;
    let mut previous_pairs = 0u64;
    while pos < bytes.len() {
        let word = load_word(bytes, pos);
        let hex = hex_bytes(word);
        let pairs = hex & (hex << 8 | previous_hex >> 56);
        let run_of_six =
            pairs & (pairs << 16 | previous_pairs >> 48) & (pairs << 32 | previous_pairs >> 32);
        let colons = bytes_equal(word, b':');
        let colon_hits = if colons == 0 {
            0
        } else {
            // Lane `i` of the word one byte on is the byte after lane `i`.
            let next = load_word(bytes, pos + 1);
            let digits = bytes_between(next, b'0', b'9');
            colons & (digits | bytes_equal(next, b'/') | bytes_equal(next, b'\\'))
        };
        let trigger = run_of_six | colon_hits | bytes_equal(word, b'/');
        if trigger == 0 {
            previous_hex = hex;
            previous_pairs = pairs;
            pos += 8;
            continue;
        }
        let at = pos + (trigger.trailing_zeros() / 8) as usize;
        let start = bytes
            .get(settled..at)
            .and_then(|before| before.iter().rposition(|b| is_space(*b)))
            .map_or(settled, |i| settled + i + 1);
        let end = bytes
            .get(at..)
            .and_then(|after| after.iter().position(|b| is_space(*b)))
            .map_or(bytes.len(), |i| at + i);
        if bytes.get(start..end).is_some_and(token_may_match) {
            match spans.last_mut() {
                Some(last) if start <= last.end + SPAN_MERGE_GAP => last.end = end,
                Some(_) | None => spans.push(start..end),
            }
        }
        // `end` is whitespace (or the end): no run of hex digits continues past it.
        settled = end;
        pos = end;
        previous_hex = 0;
        previous_pairs = 0;
    }
    spans
}

/// The whitespace tokens are separated by (what no match holds).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Whether a token has what every match needs (see [`candidate_spans`]).
fn token_may_match(token: &[u8]) -> bool {
    let mut hex_run = 0;
    let mut digit_run = 0;
    let mut slashes = 0;
    for (i, &b) in token.iter().enumerate() {
        hex_run = if b.is_ascii_hexdigit() {
            hex_run + 1
        } else {
            0
        };
        digit_run = if b.is_ascii_digit() { digit_run + 1 } else { 0 };
        if b == b'/' {
            slashes += 1;
        }
        let port_scheme_or_drive = b == b':'
            && token
                .get(i + 1)
                .is_some_and(|next| next.is_ascii_digit() || matches!(next, b'/' | b'\\'));
        if hex_run >= 8 || digit_run >= 6 || slashes >= 2 || port_scheme_or_drive {
            return true;
        }
    }
    false
}

/// The identifiers of `text`, each once (compared under [`normalize_identifier`]), in order of
/// first appearance and spelled as first written.
pub fn extract_identifiers(text: &str) -> Vec<String> {
    extract_identifiers_limited(text, usize::MAX)
}

/// Like [`extract_identifiers`], but stops after `max` distinct identifiers. Compaction's
/// quality guard uses [`MAX_GUARD_IDENTIFIERS`].
pub fn extract_identifiers_limited(text: &str, max: usize) -> Vec<String> {
    dedupe(find_identifiers(text).map(|(_, id)| id), max, true)
}

/// True when `haystack` contains `identifier`, ignoring ASCII case for pure-hex identifiers (so
/// a hash written in either case counts), exactly otherwise.
pub fn mentions_identifier(haystack: &str, identifier: &str) -> bool {
    if identifier.is_empty() {
        return true;
    }
    if !is_pure_hex(identifier) {
        return contains_short(haystack, identifier);
    }
    let needle = identifier.as_bytes();
    let Some(&first) = needle.first() else {
        return true;
    };
    let (lower, upper) = (first.to_ascii_lowercase(), first.to_ascii_uppercase());
    haystack
        .as_bytes()
        .windows(needle.len())
        .any(|window| match window.first() {
            Some(&b) if b == lower || b == upper => window.eq_ignore_ascii_case(needle),
            Some(_) | None => false,
        })
}

/// Haystacks up to this many bytes are searched by [`contains_short`]'s first-byte scan; longer
/// ones by `memchr::memmem`, whose setup then pays off.
const SHORT_HAYSTACK_BYTES: usize = 1024;

/// Whether `needle` occurs in `haystack`, for the many searches of a short needle in a short
/// text (a summary line, one identifier in another): setting up a two-way or SIMD searcher
/// costs more than the search. Candidates are found with `memchr` on the needle's first byte
/// and compared in place; long haystacks go to `memchr::memmem`.
pub(crate) fn contains_short(haystack: &str, needle: &str) -> bool {
    let (haystack, needle) = (haystack.as_bytes(), needle.as_bytes());
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    let Some(last_start) = haystack.len().checked_sub(needle.len()) else {
        return false;
    };
    if haystack.len() > SHORT_HAYSTACK_BYTES {
        return memchr::memmem::find(haystack, needle).is_some();
    }
    let mut from = 0;
    while let Some(found) = haystack
        .get(from..=last_start)
        .and_then(|starts| memchr::memchr(first, starts))
    {
        let at = from + found;
        if haystack.get(at + 1..at + needle.len()) == Some(rest) {
            return true;
        }
        from = at + 1;
    }
    false
}

/// Every relative path occurrence in `text` (`src/foo.rs`, `./tests/test_x.py`,
/// `django/db/models/query.py`), in order, with its byte range. A relative path here has at least
/// one slash, does not start with `/` (absolute paths are [`find_identifiers`]' business), and
/// its last segment has an extension that starts with a letter. A trailing `:line[:col]` is not
/// part of the path.
pub fn find_path_like(text: &str) -> impl Iterator<Item = (Range<usize>, &str)> + '_ {
    PATH_LIKE_RE.find_iter(text).filter_map(|found| {
        let path = path_like_candidate(found.as_str())?;
        let start = found.start();
        Some((start..start + path.len(), path))
    })
}

/// The relative paths of `text` (see [`find_path_like`]), each once, in order of first
/// appearance. Not part of OpenClaw's pattern: digests use it to keep the paths an agent is most
/// likely to reuse (grep hits, compiler locations, failing test files).
pub fn extract_path_like(text: &str) -> Vec<String> {
    dedupe(
        find_path_like(text).map(|(_, path)| path),
        usize::MAX,
        false,
    )
}

/// The relative path a path-like candidate holds, if it is one.
fn path_like_candidate(candidate: &str) -> Option<&str> {
    // Absolute paths, and URL tails (`https://host/x.rs` yields the candidate `//host/x.rs`),
    // start with a slash.
    if candidate.starts_with('/') {
        return None;
    }
    let path = candidate.trim_end_matches(['.', '-', '+', '~']);
    if path.contains("//") || !path.contains('/') {
        return None;
    }
    let (_, last) = path.rsplit_once('/')?;
    let (stem, extension) = last.rsplit_once('.')?;
    let stem_ok = !stem.is_empty() && stem != ".";
    let extension_ok = (1..=10).contains(&extension.len())
        && extension
            .as_bytes()
            .first()
            .is_some_and(u8::is_ascii_alphabetic)
        && extension.bytes().all(|b| b.is_ascii_alphanumeric());
    (stem_ok && extension_ok).then_some(path)
}

fn dedupe<'a>(items: impl Iterator<Item = &'a str>, max: usize, normalize: bool) -> Vec<String> {
    let mut seen: HashSet<Cow<'a, str>> = HashSet::new();
    let mut out = Vec::new();
    for item in items {
        if out.len() >= max {
            break;
        }
        let key = if normalize {
            normalize_identifier(item)
        } else {
            Cow::Borrowed(item)
        };
        if seen.insert(key) {
            out.push(item.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn ids(text: &str) -> Vec<String> {
        extract_identifiers(text)
    }

    #[test]
    fn short_substring_search_agrees_with_str_contains() {
        let long = format!("{}/.git/x", "ab/".repeat(400));
        let haystacks = [
            "",
            "a",
            "/srv/app/.git/HEAD",
            "aaab",
            "src/a.rs:12 and src/a.rs",
            "é→/.git/",
            long.as_str(),
        ];
        let needles = [
            "", "a", "aab", "/.git/", "src/a.rs", "→/", "x", "zz", "ab/ab/",
        ];
        for haystack in haystacks {
            for needle in needles {
                assert_eq!(
                    contains_short(haystack, needle),
                    haystack.contains(needle),
                    "{needle:?} in {haystack:?}"
                );
            }
        }
    }

    #[test]
    fn hex_alternative_matches_hashes_as_written() {
        assert_eq!(ids("commit deadBEEF42 merged"), ["deadBEEF42"]);
        assert_eq!(
            ids("sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
            ["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]
        );
        // Seven hex digits are too short for this alternative (and, with letters, for any).
        assert!(ids("short abc1234 id").is_empty());
    }

    #[test]
    fn hex_alternative_splits_uuids_like_the_seed() {
        assert_eq!(
            ids("id=123e4567-e89b-12d3-a456-426614174000"),
            ["123e4567", "426614174000"]
        );
    }

    #[test]
    fn url_alternative_takes_the_whole_url_minus_trailing_punctuation() {
        assert_eq!(
            ids("see (https://example.com/a?b=1&c=2), or http://localhost:8080/x."),
            ["https://example.com/a?b=1&c=2", "http://localhost:8080/x"]
        );
    }

    #[test]
    fn absolute_path_alternative_needs_two_segments() {
        assert_eq!(
            ids("edited /home/user/project/src/main.rs and /tmp/x.log"),
            ["/home/user/project/src/main.rs", "/tmp/x.log"]
        );
        // One segment is not a path by this pattern.
        assert!(ids("ran /bin").is_empty());
    }

    #[test]
    fn windows_path_alternative() {
        assert_eq!(
            ids(r"opened C:\Users\me\report.docx today"),
            [r"C:\Users\me\report.docx"]
        );
    }

    #[test]
    fn host_port_alternative_also_catches_file_and_line() {
        assert_eq!(
            ids("listening on api.internal:8443; panic at main.rs:42"),
            ["api.internal:8443", "main.rs:42"]
        );
        // A relative directory before the file is not part of this alternative.
        assert_eq!(ids("src/lib.rs:7:3"), ["lib.rs:7"]);
    }

    #[test]
    fn long_number_alternative_needs_word_boundaries() {
        assert_eq!(ids("order 1234567 shipped"), ["1234567"]);
        assert_eq!(ids("order 123456 shipped"), ["123456"]);
        assert!(ids("order 12345 shipped").is_empty());
        assert!(ids("order x1234567 shipped").is_empty());
        // Eight digits or more are hex by the first alternative; same result.
        assert_eq!(ids("pid 12345678"), ["12345678"]);
    }

    #[test]
    fn relative_paths_are_not_identifiers_by_the_seed_pattern() {
        assert!(ids("changed src/foo.rs and tests/it.rs").is_empty());
    }

    #[test]
    fn sanitising_strips_wrappers_and_drops_short_results() {
        assert_eq!(sanitize_identifier("(\"`/a/b`\")."), "/a/b");
        assert_eq!(sanitize_identifier("<https://x.y/z>"), "https://x.y/z");
        assert_eq!(ids("`/ab/cd`"), ["/ab/cd"]);
    }

    #[test]
    fn dedupe_compares_hex_case_insensitively_and_keeps_first_spelling() {
        assert_eq!(
            ids("abcdef0123 ABCDEF0123 /xx/yy /xx/yy abcdef0123"),
            ["abcdef0123", "/xx/yy"]
        );
    }

    #[test]
    fn limited_extraction_stops_at_max() {
        let text = (0..20)
            .map(|i| format!("/dir/file{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let limited = extract_identifiers_limited(&text, MAX_GUARD_IDENTIFIERS);
        assert_eq!(limited.len(), 12);
        assert_eq!(limited.first().map(String::as_str), Some("/dir/file0"));
        assert_eq!(limited.last().map(String::as_str), Some("/dir/file11"));
        assert!(extract_identifiers_limited(&text, 0).is_empty());
    }

    #[test]
    fn normalisation_uppercases_only_pure_hex() {
        assert_eq!(normalize_identifier("deadbeef"), "DEADBEEF");
        assert_eq!(normalize_identifier("/a/deadbeef"), "/a/deadbeef");
        assert_eq!(normalize_identifier("abc"), "abc");
        assert!(matches!(normalize_identifier("DEADBEEF"), Cow::Borrowed(_)));
    }

    #[test]
    fn mentions_compares_under_normalisation() {
        assert!(mentions_identifier("hash DEADBEEF01 kept", "deadbeef01"));
        assert!(mentions_identifier("hash deadbeef01 kept", "DEADBEEF01"));
        assert!(!mentions_identifier("hash deadbeef0 kept", "deadbeef01"));
        assert!(mentions_identifier("at /srv/App/x", "/srv/App/x"));
        assert!(!mentions_identifier("at /srv/app/x", "/srv/App/x"));
        assert!(mentions_identifier("", ""));
        assert!(!mentions_identifier("", "deadbeef01"));
    }

    #[test]
    fn find_identifiers_reports_byte_ranges_of_sanitised_matches() {
        let text = "é (https://a.b/c) 0123456789";
        let found: Vec<_> = find_identifiers(text).collect();
        assert_eq!(found.len(), 2);
        for (range, id) in &found {
            assert_eq!(&text[range.clone()], *id);
        }
    }

    #[test]
    fn display_variant_ends_urls_where_urls_cannot_continue() {
        let text = r#"{"u":"https://a.example/x","v":"https://b.example/y","h":"deadbeef01"}"#;
        // The seed's URL alternative swallows the rest of the line...
        assert_eq!(extract_identifiers(text).len(), 1);
        // ...the display variant finds each identifier.
        let shown: Vec<&str> = find_identifiers_for_display(text)
            .map(|(_, id)| id)
            .collect();
        assert_eq!(
            shown,
            ["https://a.example/x", "https://b.example/y", "deadbeef01"]
        );
        // Elsewhere the two agree.
        let plain = "see https://x.org/a?b=1 and /srv/app/main.py:12";
        let seed: Vec<&str> = find_identifiers(plain).map(|(_, id)| id).collect();
        let display: Vec<&str> = find_identifiers_for_display(plain)
            .map(|(_, id)| id)
            .collect();
        assert_eq!(seed, display);
    }

    #[test]
    fn path_like_finds_relative_paths_with_extensions() {
        assert_eq!(
            extract_path_like(
                "M src/foo.rs\n./tests/test_x.py:12: in test_a\n--> crates/core/src/lib.rs:3:5"
            ),
            ["src/foo.rs", "./tests/test_x.py", "crates/core/src/lib.rs"]
        );
        assert_eq!(
            extract_path_like("django/db/models/sql/query.py:        obj = 1"),
            ["django/db/models/sql/query.py"]
        );
    }

    #[test]
    fn path_like_rejects_absolute_urls_fractions_and_extensionless() {
        assert!(extract_path_like("/usr/lib/x.so").is_empty());
        assert!(extract_path_like("https://example.com/a/b.html").is_empty());
        assert!(extract_path_like("1/2.5 and/or km/h.").is_empty());
        assert!(extract_path_like("src/bin").is_empty());
        assert!(extract_path_like("a//b.rs").is_empty());
    }

    #[test]
    fn path_like_strips_sentence_punctuation_and_dedupes() {
        assert_eq!(
            extract_path_like("See src/a.rs. Then src/a.rs, and (lib/b.py)"),
            ["src/a.rs", "lib/b.py"]
        );
    }

    /// The search of the whole text, without the candidate spans.
    fn whole_text(pattern: &'static Regex, text: &str) -> Vec<(Range<usize>, String)> {
        pattern
            .find_iter(text)
            .filter_map(|found| sanitized(text, 0, found))
            .map(|(range, id)| (range, id.to_owned()))
            .collect()
    }

    fn spanned(pattern: &'static Regex, text: &str) -> Vec<(Range<usize>, String)> {
        search_candidates(pattern, text)
            .map(|(range, id)| (range, id.to_owned()))
            .collect()
    }

    #[test]
    fn candidate_spans_find_what_the_whole_text_search_finds() {
        let text = "x 0123456789abcdef y /a/b z http://h:80/p q C:\\w\\x host.io:443 \
                    12345 123456 1234567 x1234567 deadbee deadbeef ab/cd a:b é/ü/x\u{a0}/y/z \
                    \t\n\r\u{b}\u{c}/tmp/x";
        for pattern in [&*IDENTIFIER_RE, &*DISPLAY_IDENTIFIER_RE] {
            let expected = whole_text(pattern, text);
            assert!(expected.len() >= 8, "{expected:?}");
            assert_eq!(spanned(pattern, text), expected);
            for cut in 0..text.len() {
                if let (Some(head), Some(tail)) = (text.get(..cut), text.get(cut..)) {
                    assert_eq!(spanned(pattern, head), whole_text(pattern, head));
                    assert_eq!(spanned(pattern, tail), whole_text(pattern, tail));
                }
            }
        }
        assert!(candidate_spans("plain words only: here, and there").is_empty());
    }

    proptest::proptest! {
        #[test]
        fn candidate_spans_never_change_what_is_found(
            text in "([0-9a-fA-F]{1,12}|[0-9]{1,9}|https?://|[/:.\\\\_é\u{a0}gxz-]|[ \t\n\u{b}]){0,60}"
        ) {
            for pattern in [&*IDENTIFIER_RE, &*DISPLAY_IDENTIFIER_RE] {
                proptest::prop_assert_eq!(spanned(pattern, &text), whole_text(pattern, &text));
            }
        }
    }

    #[test]
    fn json_escaped_text_yields_no_drive_paths() {
        assert!(ids(r#"Pre-commit validation failed:\n\n[DIALYZER]"#).is_empty());
        assert!(ids(r#"lines = src.split('\\n')  # lines:\\n\\n"#).is_empty());
        assert!(ids(r"e:\n\n1").is_empty());
        assert!(ids(r"x = 'C:\t'").is_empty());
        // Real drive paths stay, `\n` before a letter included.
        assert_eq!(
            ids(r"saved C:\Users\nina\out.txt"),
            [r"C:\Users\nina\out.txt"]
        );
    }

    #[test]
    fn progress_runs_are_not_hashes() {
        assert!(ids("tests/test_api.py ....EEEEEEEEEEEE....").is_empty());
        assert!(ids("FFFFFFFFEEEE and 00000000").is_empty());
        assert_eq!(
            ids("commit deadbeef and cafe1234"),
            ["deadbeef", "cafe1234"]
        );
    }

    #[test]
    fn urls_end_at_control_characters() {
        assert_eq!(
            ids("see \u{1b}[4mhttps://example.com/docs\u{1b}[0m now"),
            ["https://example.com/docs"]
        );
    }

    /// A run of one character, ignoring case (`EEEE`, `eeEE`).
    fn one_character_run(id: &str) -> bool {
        let mut chars = id.chars().map(|c| c.to_ascii_lowercase());
        let first = chars.next();
        first.is_some_and(|first| chars.all(|c| c == first))
    }

    fn assert_real(id: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        proptest::prop_assert!(
            !id.chars().any(|c| c.is_whitespace() || c.is_control()),
            "whitespace or control in {:?}",
            id
        );
        proptest::prop_assert!(!one_character_run(id), "a run of one character: {:?}", id);
        Ok(())
    }

    proptest::proptest! {
        #[test]
        fn extracted_identifiers_are_real_identifiers(
            text in "([A-Za-z]{1,6}|[0-9a-fA-F]{1,12}|[EF.]{4,16}|https?://|\\\\[ntr]|[/:._-]|[ \t\n\u{b}\u{1b}\u{7f}\u{85}\u{a0}]|\\[[0-9;]{0,4}m|é){0,60}"
        ) {
            for id in extract_identifiers(&text) {
                assert_real(&id)?;
            }
            for (_, id) in find_identifiers_for_display(&text) {
                assert_real(id)?;
            }
            for id in extract_path_like(&text) {
                assert_real(&id)?;
            }
        }

        #[test]
        fn identifiers_of_any_text_are_real_identifiers(text in proptest::prelude::any::<String>()) {
            for (_, id) in find_identifiers(&text).chain(find_identifiers_for_display(&text)) {
                assert_real(id)?;
            }
            for id in extract_path_like(&text) {
                assert_real(&id)?;
            }
        }
    }

    #[test]
    fn extraction_handles_empty_cjk_and_binaryish_text() {
        assert!(ids("").is_empty());
        // ASCII classes, as in JavaScript: a non-ASCII segment ends the path.
        assert_eq!(ids("文件 /数据/x 和 /data/logs/日志.txt"), ["/data/logs"]);
        let binaryish: String = (0u8..=255).map(char::from).collect();
        let _ = ids(&binaryish);
        let _ = extract_path_like(&binaryish);
    }
}
