//! The Exact identifiers section's candidates: the caller's must-keep identifiers verbatim, then
//! every identifier [`crate::identifiers`] finds in the span, ranked by who used it (the user,
//! then the assistant's prose, its tool calls, earlier summaries and system text, and last tool
//! output alone), then how often and how recently.
//!
//! An identifier is shown whole, as written at its first occurrence, and slightly widened
//! where the seed's pattern stops short of what a reader needs: a UUID whole rather than its
//! two hex runs, a relative path with its leading directories (`lib/app/x.ex`, where the pattern
//! matches `/app/x.ex`), a URL without the JSON quote the pattern swallows after it.

use std::collections::HashMap;
use std::ops::Range;

use serde_json::Value;

use crate::identifiers::{find_identifiers, normalize_identifier, sanitize_identifier};

use super::previous::PreviousSummary;
use super::span::{Span, result_text};

/// Who used an identifier, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    ToolOutput = 1,
    SystemOrPrevious = 2,
    ToolCall = 3,
    Assistant = 4,
    User = 5,
}

/// Longest widening of an identifier to its left (a relative path's leading directories).
const MAX_LEFT_EXTENSION: usize = 80;

/// One identifier to show, with the spelling the seed's pattern found (for coverage checks).
#[derive(Debug, Clone)]
pub(super) struct IdCandidate {
    pub display: String,
    pub seed: String,
    pub score: i64,
    pub must_keep: bool,
}

#[derive(Debug)]
struct Stat {
    display: String,
    seed: String,
    source: Source,
    count: u32,
    last: usize,
}

#[derive(Debug, Default)]
struct Tally {
    stats: Vec<Stat>,
    by_key: HashMap<String, usize>,
}

impl Tally {
    fn scan(&mut self, text: &str, source: Source, position: usize) {
        for (range, seed) in find_identifiers(text) {
            let key = normalize_identifier(seed).into_owned();
            match self.by_key.get(&key) {
                Some(&slot) => {
                    if let Some(stat) = self.stats.get_mut(slot) {
                        stat.count = stat.count.saturating_add(1);
                        stat.source = stat.source.max(source);
                        stat.last = stat.last.max(position);
                    }
                }
                None => {
                    self.by_key.insert(key, self.stats.len());
                    self.stats.push(Stat {
                        display: display_form(text, range, seed),
                        seed: seed.to_owned(),
                        source,
                        count: 1,
                        last: position,
                    });
                }
            }
        }
    }

    fn add_verbatim(&mut self, item: &str, source: Source, position: usize) {
        let key = normalize_identifier(item).into_owned();
        if self.by_key.contains_key(&key) {
            return;
        }
        self.by_key.insert(key, self.stats.len());
        self.stats.push(Stat {
            display: item.to_owned(),
            seed: item.to_owned(),
            source,
            count: 1,
            last: position,
        });
    }
}

/// Argument fields that carry a body (file contents, replacement text, patches) rather than
/// a target the model chose: identifiers inside them rank with system text.
const BODY_KEYS: &[&str] = &[
    "content",
    "new_string",
    "old_string",
    "new_str",
    "old_str",
    "file_text",
    "text",
    "patch",
    "input",
    "body",
    "code",
];

fn scan_arguments(tally: &mut Tally, value: &Value, key: Option<&str>, at: usize) {
    match value {
        Value::String(text) => {
            let source = if key.is_some_and(|key| BODY_KEYS.contains(&key)) {
                Source::SystemOrPrevious
            } else {
                Source::ToolCall
            };
            tally.scan(text, source, at);
        }
        Value::Array(items) => items
            .iter()
            .for_each(|item| scan_arguments(tally, item, key, at)),
        Value::Object(fields) => fields
            .iter()
            .for_each(|(name, item)| scan_arguments(tally, item, Some(name), at)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(group, len)| group.len() == len && group.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_path_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'~' | b'/' | b'-')
}

/// How to show the identifier the seed's pattern found at `range` of `text`.
fn display_form(text: &str, range: Range<usize>, seed: &str) -> String {
    let bytes = text.as_bytes();
    if seed.starts_with("http://") || seed.starts_with("https://") {
        // A quote or a backslash means the pattern ran on into the JSON or code around the
        // URL; `<…>` and `${…}` templates are the URL as written and stay.
        let end = seed.find(['"', '\'', '`', '\\']).unwrap_or(seed.len());
        let clean = sanitize_identifier(seed.get(..end).unwrap_or(seed));
        return if clean.len() > "https://".len() {
            clean.to_owned()
        } else {
            seed.to_owned()
        };
    }
    if seed.bytes().all(|b| b.is_ascii_hexdigit()) {
        let is_uuid_byte = |b: &u8| b.is_ascii_hexdigit() || *b == b'-';
        let start = bytes.get(..range.start).map_or(range.start, |head| {
            range.start - head.iter().rev().take_while(|b| is_uuid_byte(b)).count()
        });
        let end = bytes.get(range.end..).map_or(range.end, |tail| {
            range.end + tail.iter().take_while(|b| is_uuid_byte(b)).count()
        });
        if let Some(wide) = text.get(start..end).map(|wide| wide.trim_matches('-')) {
            if is_uuid(wide) {
                return wide.to_owned();
            }
        }
        return seed.to_owned();
    }
    let before = bytes.get(..range.start).unwrap_or_default();
    if seed.starts_with('/') || before.last() == Some(&b'/') {
        let widened = before
            .iter()
            .rev()
            .take_while(|b| is_path_byte(**b))
            .count();
        if widened > 0 && widened <= MAX_LEFT_EXTENSION {
            if let Some(wide) = text.get(range.start - widened..range.end) {
                let wide = wide.trim_start_matches(['.', '-']);
                if wide.len() > seed.len() && !wide.starts_with("//") {
                    return wide.to_owned();
                }
            }
        }
    }
    seed.to_owned()
}

/// Identifier candidates, best first: must-keep ones in the caller's order, then the rest.
pub(super) fn identifier_candidates(
    span: &Span<'_>,
    must_keep: &[String],
    previous: &PreviousSummary,
) -> Vec<IdCandidate> {
    let mut tally = Tally::default();
    for turn in &span.turns {
        let at = turn.index;
        tally.scan(&turn.user_own, Source::User, at);
        tally.scan(&turn.assistant, Source::Assistant, at);
        for call in &turn.calls {
            scan_arguments(&mut tally, &call.arguments, None, at);
        }
        tally.scan(&turn.system, Source::SystemOrPrevious, at);
        tally.scan(&turn.harness, Source::SystemOrPrevious, at);
        if let Some(summary) = &turn.summary {
            tally.scan(summary, Source::SystemOrPrevious, at);
        }
        for result in &turn.results {
            tally.scan(&result_text(result), Source::ToolOutput, at);
        }
    }
    // Earlier summaries precede the span: they rank as old.
    for item in previous.sections.iter().flatten() {
        tally.scan(item, Source::SystemOrPrevious, 0);
    }
    tally.scan(&previous.other, Source::SystemOrPrevious, 0);
    if let Some(listed) = previous.sections.get(4) {
        for item in listed {
            let bare = item.trim_matches('`');
            if !bare.is_empty() && !bare.contains(char::is_whitespace) {
                tally.add_verbatim(bare, Source::SystemOrPrevious, 0);
            }
        }
    }

    let mut out: Vec<IdCandidate> = Vec::new();
    let mut kept: Vec<String> = Vec::new();
    for id in must_keep {
        let id = id.trim();
        let key = normalize_identifier(id).into_owned();
        if id.is_empty() || kept.contains(&key) {
            continue;
        }
        kept.push(key);
        out.push(IdCandidate {
            display: id.to_owned(),
            seed: id.to_owned(),
            score: i64::MAX,
            must_keep: true,
        });
    }

    let mut ranked: Vec<(usize, IdCandidate)> = tally
        .stats
        .into_iter()
        .enumerate()
        .filter(|(_, stat)| !kept.contains(&normalize_identifier(&stat.seed).into_owned()))
        .map(|(first, stat)| {
            let frequency = i64::from(stat.count.max(1).ilog2().min(6));
            let score =
                stat.source as i64 * 10_000 + frequency * 300 + span.recency(stat.last) * 10;
            (
                first,
                IdCandidate {
                    display: stat.display,
                    seed: stat.seed,
                    score,
                    must_keep: false,
                },
            )
        })
        .collect();
    ranked.sort_by(|(a_first, a), (b_first, b)| b.score.cmp(&a.score).then(a_first.cmp(b_first)));
    out.extend(ranked.into_iter().map(|(_, candidate)| candidate));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> Vec<String> {
        find_identifiers(text)
            .map(|(range, seed)| display_form(text, range, seed))
            .collect()
    }

    #[test]
    fn display_widens_where_the_pattern_stops_short() {
        assert_eq!(
            shown("edit lib/app/transcripts/annotation.ex now"),
            ["lib/app/transcripts/annotation.ex"]
        );
        assert_eq!(
            shown("id 123e4567-e89b-12d3-a456-426614174000 here"),
            [
                "123e4567-e89b-12d3-a456-426614174000",
                "123e4567-e89b-12d3-a456-426614174000"
            ]
        );
        assert_eq!(
            shown(r#"{"u":"http://localhost:4318"}"#),
            ["http://localhost:4318"]
        );
        assert_eq!(shown("at lib/decoder.ex:264"), ["lib/decoder.ex:264"]);
        assert_eq!(shown("plain /srv/app/x.py"), ["/srv/app/x.py"]);
    }
}
