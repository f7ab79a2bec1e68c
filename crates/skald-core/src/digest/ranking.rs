//! Which identifiers a summary shows, best first.
//!
//! Identifiers are weighed by the lines they appear on (the first error line and its location
//! highest, diff headers lowest), then plain before noise (library paths, build artefacts,
//! memory addresses), repeated before single, first seen before later: an identifier the agent
//! will reuse should be visible in the digest of the output it first appeared in.

use std::collections::HashMap;

use crate::identifiers::{self, contains_short, is_pure_hex, normalize_identifier};

use super::facts::is_exception_name;
use super::input::{Input, LINE_HEAD_BYTES, Line, MAX_ITEMS};
use super::scan::first_word;
use super::text::{clean_inline, prefix_bytes};

/// Lines that point at a place: traceback frames, compiler locations, stack frames, pytest's
/// `path:line: Error` lines.
fn is_pointer_line(t: &str) -> bool {
    let marked = match t.as_bytes().first() {
        Some(b'F') => t.starts_with("File \"") || t.starts_with("FAILED"),
        Some(b'-') => t.starts_with("--> "),
        Some(b'a') => t.starts_with("at "),
        Some(b't') => t.starts_with("thread '") && t.contains("panicked at"),
        Some(_) | None => false,
    };
    if marked {
        return true;
    }
    // `path:12: SomeError` — the location is the first word.
    let location = first_word_until_space(t);
    let Some((path, line)) = location.strip_suffix(':').and_then(|l| l.rsplit_once(':')) else {
        return false;
    };
    if path.is_empty() || line.is_empty() || !line.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let what = t.get(location.len()..).unwrap_or("").trim_start();
    let word = first_word(what);
    is_exception_name(word) || word == "error" || word == "warning"
}

/// A line's text up to its first space (at most 256 bytes).
fn first_word_until_space(t: &str) -> &str {
    let head = prefix_bytes(t, LINE_HEAD_BYTES);
    // The space is usually a few bytes in: a byte loop beats setting up a memchr.
    match head.bytes().position(|b| b == b' ') {
        Some(i) => head.get(..i).unwrap_or(head),
        None => head,
    }
}

/// Diff headers name files the diff summary already lists; as identifiers their `a/…`, `b/…`
/// and mode numbers are noise.
fn is_diff_header(t: &str) -> bool {
    match t.as_bytes().first() {
        Some(b'd') => t.starts_with("diff --git "),
        Some(b'-') => t.starts_with("--- a/") || t.starts_with("--- /dev/null"),
        Some(b'+') => t.starts_with("+++ b/") || t.starts_with("+++ /dev/null"),
        Some(b'i') => t.starts_with("index ") && t.contains(".."),
        Some(_) | None => false,
    }
}

/// A line weight [`line_weights`] leaves to [`sampled_line_weight`]: most lines hold no
/// identifier, and their weight is never asked for.
const WEIGHED_WHEN_ASKED: u8 = u8::MAX;

/// The weight of a sampled line that is neither the error line nor its location.
fn sampled_line_weight(line: &Line<'_>) -> u8 {
    let t = line.trimmed_start;
    if is_diff_header(t) {
        0
    } else if line.rank.is_some() || is_pointer_line(t) {
        2
    } else {
        1
    }
}

/// How much each line's identifiers matter: 3 on the first error line and the location that
/// belongs to it (the deepest traceback frame before it, a compiler location right after it),
/// 2 on other error or pointer lines, 1 elsewhere, 0 where they are noise. Sampled lines other
/// than those are [`WEIGHED_WHEN_ASKED`].
fn line_weights(input: &Input<'_>, error_index: Option<usize>) -> Vec<u8> {
    let lines = &input.lines;
    // Only sampled lines hold identifiers that get ranked.
    let mut weights: Vec<u8> = vec![1; lines.len()];
    let sampled = (0..input.head_lines).chain(input.tail_from..lines.len());
    for i in sampled {
        if let Some(w) = weights.get_mut(i) {
            *w = WEIGHED_WHEN_ASKED;
        }
    }
    if let Some(error) = error_index {
        let starts_with =
            |i: usize, p: &str| lines.get(i).is_some_and(|l| l.trimmed_start.starts_with(p));
        // The frame the exception was raised in, and the deepest frame in the project's own
        // code (the one an agent edits), which differ when the error surfaces in a library.
        let frames = (error.saturating_sub(60)..error)
            .rev()
            .filter(|&i| starts_with(i, "File \""));
        let mut deepest = None;
        let mut project = None;
        for i in frames {
            deepest = deepest.or(Some(i));
            if lines.get(i).is_some_and(|l| !is_library_path(l.text)) {
                project = Some(i);
                break;
            }
        }
        let location = (error + 1..(error + 4).min(lines.len())).find(|&i| {
            lines
                .get(i)
                .is_some_and(|l| is_pointer_line(l.trimmed_start))
        });
        for i in [Some(error), deepest, project, location]
            .into_iter()
            .flatten()
        {
            if let Some(w) = weights.get_mut(i) {
                *w = 3;
            }
        }
    }
    weights
}

struct Candidate<'a> {
    display: &'a str,
    first: usize,
    count: usize,
    weight: u8,
    /// Library code, build artefacts, memory addresses: rarely what an agent reuses.
    noise: bool,
}

/// Paths inside installed libraries and toolchains rather than the project: one pass over the
/// path's segments (this runs for every identifier candidate).
fn is_library_path(text: &str) -> bool {
    if text.starts_with("/usr/") || (text.contains('<') && contains_short(text, "<frozen ")) {
        return true;
    }
    let mut previous = "";
    for segment in text.split('/') {
        let library = matches!(
            segment,
            "site-packages" | "dist-packages" | "node_modules" | ".rustup" | "rustc"
        ) || segment.starts_with("miniconda")
            || segment.starts_with("anaconda")
            || (previous == "lib" && segment.starts_with("python"))
            || (previous == ".cargo" && segment == "registry");
        if library {
            return true;
        }
        previous = segment;
    }
    false
}

/// Identifiers an agent almost never reuses: compiled artefacts, library paths, `0x…` memory
/// addresses, and the tails OpenClaw's pattern cuts out of relative paths (`/spotter/telemetry`
/// from `lib/spotter/telemetry/`), which the relative path itself covers when it is shown.
fn is_noise_identifier(id: &str, preceded_by: &[u8]) -> bool {
    let fragment = id.starts_with('/')
        && preceded_by
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    let extension = id.rsplit_once('.').map_or("", |(_, ext)| ext);
    let artefact = matches!(
        extension,
        "pyc" | "pyo" | "o" | "class" | "d" | "rlib" | "rmeta"
    ) || (id.contains('_') && contains_short(id, "__pycache__"))
        || contains_short(id, "/.git/");
    let address = preceded_by.ends_with(b"0x") && is_pure_hex(id);
    fragment || artefact || address || is_library_path(id)
}

/// Identifiers (OpenClaw's pattern) and relative paths, best first: by the weight of the lines
/// they appear on, then plain before noise, then repeated before single, then by first
/// appearance. (Tuned on the shared real trajectories: how often an identifier the assistant
/// later uses, first seen in a tool result, is visible in that result's digest.)
pub(super) fn rank_identifiers<'a>(input: &Input<'a>, error_index: Option<usize>) -> Vec<String> {
    let body: &'a str = input.body;
    let weights = line_weights(input, error_index);
    let weight_at = |pos: usize| -> u8 {
        let i = input.lines.partition_point(|line| line.start <= pos);
        match i
            .checked_sub(1)
            .map(|i| (input.lines.get(i), weights.get(i)))
        {
            Some((Some(line), Some(&WEIGHED_WHEN_ASKED)))
                if pos <= line.start + line.text.len() =>
            {
                sampled_line_weight(line)
            }
            Some((Some(line), Some(w))) if pos <= line.start + line.text.len() => *w,
            Some(_) | None => 1,
        }
    };
    let mut candidates: Vec<Candidate<'a>> = Vec::new();
    let mut seed_index: HashMap<std::borrow::Cow<'a, str>, usize, WordHash> = HashMap::default();
    let mut path_index: HashMap<&'a str, usize, WordHash> = HashMap::default();
    let mut note = |index: Option<usize>, display: &'a str, pos: usize, upgrade: bool| {
        let weight = weight_at(pos);
        match index.and_then(|i| candidates.get_mut(i)) {
            Some(candidate) => {
                candidate.count += 1;
                if weight > candidate.weight {
                    candidate.weight = weight;
                    if upgrade {
                        candidate.display = display;
                    }
                }
                None
            }
            None if weight > 0 => {
                let before = body.get(pos.saturating_sub(2)..pos).unwrap_or("");
                candidates.push(Candidate {
                    display,
                    first: pos,
                    count: 1,
                    weight,
                    noise: is_noise_identifier(display, before.as_bytes()),
                });
                Some(candidates.len() - 1)
            }
            None => None,
        }
    };
    for (offset, window) in input.sample_windows() {
        for (range, id) in identifiers::find_identifiers_for_display(window) {
            let key = normalize_identifier(id);
            let pos = offset + range.start;
            let display = body.get(pos..offset + range.end).unwrap_or(id);
            if let Some(i) = note(seed_index.get(&key).copied(), display, pos, false) {
                seed_index.insert(key, i);
            }
        }
        for (range, path) in identifiers::find_path_like(window) {
            // Shown with the `:line` that follows where it matters most: `src/a.rs:12` covers
            // both the path and the `a.rs:12` OpenClaw's pattern finds there.
            let pos = offset + range.start;
            let end = offset + range.end;
            let suffix = line_suffix_len(body.get(end..).unwrap_or(""));
            let display = body.get(pos..end + suffix).unwrap_or(path);
            if let Some(i) = note(path_index.get(path).copied(), display, pos, true) {
                path_index.insert(path, i);
            }
        }
    }
    let order = |a: &Candidate<'_>, b: &Candidate<'_>| {
        b.weight
            .cmp(&a.weight)
            .then(a.noise.cmp(&b.noise))
            .then(b.count.min(2).cmp(&a.count.min(2)))
            .then(a.first.cmp(&b.first))
            .then(a.display.cmp(b.display))
    };
    // Only the best few can be shown; ordering the rest is wasted work.
    if candidates.len() > MAX_ITEMS {
        candidates.select_nth_unstable_by(MAX_ITEMS, order);
        candidates.truncate(MAX_ITEMS);
    }
    candidates.sort_by(order);
    let mut ranked: Vec<&str> = candidates.iter().map(|c| c.display).collect();
    prefer_containing(&mut ranked);
    ranked
        .into_iter()
        .map(|display| clean_inline(display, 400))
        .collect()
}

/// Where one candidate contains another (`/tmp/run/x/__init__.py` and `/tmp/run`), showing the
/// longer one shows both: it takes the better rank of the two. Lengths are capped so a long URL
/// does not displace several short identifiers.
fn prefer_containing(ranked: &mut Vec<&str>) {
    let mut i = 0;
    while i < ranked.len() {
        let Some(&current) = ranked.get(i) else {
            break;
        };
        let longer = ranked
            .iter()
            .enumerate()
            .skip(i + 1)
            .filter(|(_, other)| {
                // Only a longer one can contain it: the length test spares setting up a search.
                (current.len()..=current.len() + 60).contains(&other.len())
                    && contains_short(other, current)
            })
            .max_by_key(|(j, other)| (other.len(), std::cmp::Reverse(*j)))
            .map(|(j, _)| j);
        if let Some(j) = longer {
            let replacement = ranked.remove(j);
            if let Some(slot) = ranked.get_mut(i) {
                *slot = replacement;
            }
        }
        i += 1;
    }
}

/// A word-at-a-time multiplicative hash (FxHash's) for the candidate and keyword maps: keys are
/// short and hashed hundreds of times per digest, where SipHash's flood resistance costs more
/// than it protects (the maps hold at most the words of the bounded sample). No order leaks
/// from the maps, so the hash never shows in a digest.
#[derive(Default)]
pub(super) struct WordHasher(u64);

impl WordHasher {
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for WordHasher {
    fn finish(&self) -> u64 {
        // The multiply leaves its best bits at the top; the table indexes by the bottom ones.
        self.0.rotate_left(26)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            for (slot, b) in word.iter_mut().zip(rest) {
                *slot = *b;
            }
            self.mix(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.mix(u64::from(byte));
    }

    fn write_usize(&mut self, value: usize) {
        self.mix(value as u64);
    }
}

pub(super) type WordHash = std::hash::BuildHasherDefault<WordHasher>;

/// Length of a `:123` or `:123:45` suffix.
fn line_suffix_len(rest: &str) -> usize {
    let mut len = 0;
    for _ in 0..2 {
        let Some(after) = rest.get(len..).and_then(|r| r.strip_prefix(':')) else {
            break;
        };
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 7 {
            break;
        }
        len += 1 + digits;
    }
    len
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn containing_candidates_take_the_better_rank() {
        let mut ranked = vec!["/tmp/run", "a.rs:3", "/tmp/run/x/init.py", "src/a.rs:3"];
        prefer_containing(&mut ranked);
        assert_eq!(ranked, ["/tmp/run/x/init.py", "src/a.rs:3"]);
    }

    #[test]
    fn noise_identifiers() {
        assert!(is_noise_identifier("/x/__pycache__/a.cpython-39.pyc", b" "));
        assert!(is_noise_identifier("78effdf94340", b"0x"));
        assert!(!is_noise_identifier("78effdf94340", b"  "));
        assert!(is_noise_identifier("/spotter/telemetry", b"ib"));
        assert!(!is_noise_identifier("/srv/app/main.py", b" \""));
        assert!(is_noise_identifier(
            "/opt/miniconda3/envs/testbed/lib/python3.9/unittest/case.py",
            b" \""
        ));
    }
}
