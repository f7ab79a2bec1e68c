//! Logs, Markdown, diffs, code: the kinds summarised by their own structure.
//!
//! A log by its counts per level, time range and error types; Markdown by its headings,
//! code-block languages, list items and links; a diff by its files and +/- counts; code by its
//! language, function and type names, and imports.

use std::collections::BTreeMap;

use super::facts::exception_names;
use super::input::{Input, LINE_HEAD_BYTES, MAX_ITEMS};
use super::lines::{LEVEL_ORDER, find_timestamp, log_level};
use super::scan::{LANGUAGES, Scan};
use super::show::{Shape, lines_word, push_unique};
use super::text::{clean_inline, is_ascii_space, prefix_bytes, trim_start_fast};

pub(super) fn log_summary(input: &Input<'_>) -> Shape {
    let mut level_counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    let levels: Vec<Option<&'static str>> = input.texts().map(log_level).collect();
    for level in levels.iter().flatten() {
        *level_counts.entry(level).or_default() += 1;
    }
    let counts: Vec<String> = LEVEL_ORDER
        .iter()
        .filter_map(|level| level_counts.get(level).map(|n| format!("{level} {n}")))
        .collect();
    let mut head = format!(
        "log, {}: {}",
        lines_word(input.total_lines),
        counts.join(", ")
    );
    let first = input.texts().take(200).find_map(find_timestamp);
    let last = input.texts().rev().take(200).find_map(find_timestamp);
    if let (Some(first), Some(last)) = (first, last) {
        if first == last {
            head.push_str(&format!("; at {first}"));
        } else {
            head.push_str(&format!("; {first} to {last}"));
        }
    }
    // Error types: exception-like words on error lines, most frequent first.
    let mut types: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (index, (line, level)) in input.lines.iter().zip(&levels).enumerate() {
        if !matches!(level, Some("ERROR" | "FATAL")) {
            continue;
        }
        for name in exception_names(prefix_bytes(line.text, 4 * LINE_HEAD_BYTES)) {
            types.entry(name).or_insert((0, index)).0 += 1;
        }
    }
    let mut types: Vec<(&str, (usize, usize))> = types.into_iter().collect();
    types.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)));
    let items = types
        .into_iter()
        .take(MAX_ITEMS)
        .map(|(name, (n, _))| {
            if n > 1 {
                format!("{name} x{n}")
            } else {
                name.to_owned()
            }
        })
        .collect();
    Shape::new(head).items("error types:", items, 2)
}

pub(super) fn markdown_summary(input: &Input<'_>, scan: &Scan<'_>) -> Shape {
    let mut head = format!("markdown, {}", lines_word(input.total_lines));
    let blocks = scan.fences / 2;
    if blocks > 0 {
        head.push_str(&format!(", {blocks} code blocks"));
        if !scan.fence_langs.is_empty() {
            head.push_str(&format!(" ({})", scan.fence_langs.join(", ")));
        }
    }
    if scan.list_items > 0 {
        head.push_str(&format!(", {} list items", scan.list_items));
    }
    if scan.links > 0 {
        head.push_str(&format!(", {} links", scan.links));
    }
    // The `#` marks cost characters and say little once the list is flat.
    let headings = scan
        .headings
        .iter()
        .take(MAX_ITEMS)
        .map(|h| clean_inline(h.trim_start_matches('#').trim_start(), 60))
        .collect();
    Shape::new(head).items("headings:", headings, 3)
}

pub(super) fn diff_summary(input: &Input<'_>, scan: &Scan<'_>) -> Shape {
    let mut files: Vec<String> = Vec::new();
    let mut changes: Vec<String> = Vec::new();
    for line in input.texts() {
        if let Some(rest) = line.strip_prefix("+++ ") {
            let path = rest.split('\t').next().unwrap_or(rest).trim();
            if path != "/dev/null" {
                push_unique(
                    &mut files,
                    clean_inline(path.strip_prefix("b/").unwrap_or(path), 160),
                );
            }
        } else if let Some(rest) = line.strip_prefix("--- ") {
            // A deleted file has only a `---` side.
            let path = rest.split('\t').next().unwrap_or(rest).trim();
            if path != "/dev/null" && !line.starts_with("--- a/") {
                push_unique(&mut files, clean_inline(path, 160));
            }
        } else if (line.starts_with('+') || line.starts_with('-'))
            && changes.len() < 4
            && line.get(1..).is_some_and(|l| l.trim().len() > 2)
        {
            changes.push(clean_inline(line, 80));
        }
    }
    let head = format!(
        "diff, {} files, {} hunks, +{} -{}",
        files.len(),
        scan.hunks,
        scan.added,
        scan.removed
    );
    let primary = files.len().min(6);
    let changes = (!changes.is_empty()).then(|| format!("changes: {}", changes.join(" | ")));
    Shape::new(head)
        .items("files:", files, primary)
        .details(changes)
}

/// A function or type a line defines: `pub async fn name`, `def name(`, `class Name:`,
/// `func (r *T) Name(`, `impl<T> Name`, `defmodule A.B do`.
enum Definition<'a> {
    Function(&'a str),
    Type(&'a str),
}

/// Words that may precede a definition keyword (a `match`, which compiles to a few
/// comparisons).
fn is_modifier(word: &str) -> bool {
    matches!(
        word,
        "pub"
            | "pub(crate)"
            | "pub(super)"
            | "export"
            | "default"
            | "async"
            | "static"
            | "abstract"
            | "public"
            | "private"
            | "protected"
            | "final"
            | "unsafe"
            | "extern"
            | "inline"
            | "virtual"
            | "override"
    )
}

/// `text.split_whitespace()`, classifying ASCII bytes without decoding them.
fn whitespace_words(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let word = trim_start_fast(rest);
        let bytes = word.as_bytes();
        let mut end = 0;
        while let Some(&b) = bytes.get(end) {
            if b < 0x80 {
                if is_ascii_space(b) {
                    break;
                }
                end += 1;
            } else {
                let c = word.get(end..).and_then(|tail| tail.chars().next())?;
                if c.is_whitespace() {
                    break;
                }
                end += c.len_utf8();
            }
        }
        let (word, after) = word.split_at_checked(end)?;
        rest = after;
        (!word.is_empty()).then_some(word)
    })
}

fn definition(line: &str) -> Option<Definition<'_>> {
    // Every modifier and definition keyword starts with a lowercase ASCII letter: most lines
    // are rejected on their first byte.
    if !trim_start_fast(line)
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_lowercase)
    {
        return None;
    }
    let mut words = whitespace_words(prefix_bytes(line, LINE_HEAD_BYTES));
    let mut keyword = words.next()?;
    while is_modifier(keyword) {
        keyword = words.next()?;
    }
    let is_function = matches!(
        keyword,
        "fn" | "def" | "defp" | "func" | "function" | "defmacro" | "function*"
    );
    let is_type = matches!(
        keyword,
        "class" | "struct" | "enum" | "trait" | "interface" | "defmodule" | "impl" | "type"
    ) || keyword.starts_with("impl<");
    if !is_function && !is_type {
        return None;
    }
    let mut name = words.next()?;
    if keyword == "func" && name.starts_with('(') {
        // A Go method: skip the receiver.
        name = words
            .find(|w| w.ends_with(')'))
            .and_then(|_| words.next())?;
    }
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '?' | '!' | ':')))
        .unwrap_or(name.len());
    let name = name.get(..end)?.trim_end_matches(':');
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    Some(if is_function {
        Definition::Function(name)
    } else {
        Definition::Type(name)
    })
}

pub(super) fn code_summary(input: &Input<'_>, scan: &Scan<'_>) -> Shape {
    // Names are unique, so the order is total and the winner does not depend on the order of
    // the list.
    let language = LANGUAGES
        .iter()
        .zip(&scan.lang_votes)
        .filter(|(lang, votes)| **lang != "code" && **votes > 0)
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(lang, _)| *lang);
    let mut functions: Vec<String> = Vec::new();
    let mut types: Vec<String> = Vec::new();
    let mut imports: Vec<String> = Vec::new();
    for line in input.sample() {
        let t = line.trimmed_start;
        match definition(t) {
            Some(Definition::Function(name)) => push_unique(&mut functions, name.to_owned()),
            Some(Definition::Type(name)) => push_unique(&mut types, name.to_owned()),
            None => {
                let is_import = match t.as_bytes().first() {
                    Some(b'u') => t.starts_with("use "),
                    Some(b'i') => t.starts_with("import "),
                    Some(b'f') => t.starts_with("from "),
                    Some(b'#') => t.starts_with("#include "),
                    Some(b'r') => t.starts_with("require "),
                    Some(b'a') => t.starts_with("alias "),
                    Some(b'c') => t.starts_with("const ") && t.contains("require("),
                    Some(_) | None => false,
                };
                if is_import && imports.len() < 12 {
                    push_unique(&mut imports, clean_inline(t.trim_end_matches(';'), 60));
                }
            }
        }
        if functions.len() >= MAX_ITEMS && types.len() >= MAX_ITEMS && imports.len() >= 12 {
            break;
        }
    }
    let mut head = match language {
        Some(lang) => format!("{lang} code, {}", lines_word(input.total_lines)),
        None => format!("code, {}", lines_word(input.total_lines)),
    };
    if !types.is_empty() {
        let shown: Vec<&str> = types.iter().take(2).map(String::as_str).collect();
        head.push_str(&format!("; types: {}", shown.join(", ")));
    }
    let imports = (!imports.is_empty()).then(|| format!("imports: {}", imports.join(", ")));
    Shape::new(head)
        .items("fns:", functions, 6)
        .details(imports)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn definitions() {
        let cases = [
            ("pub async fn load(path: &str) {", "load", true),
            ("fn main() {", "main", true),
            ("def get(self, key):", "get", true),
            ("  defp summarise(text), do: x", "summarise", true),
            (
                "func (s *Server) Serve(l net.Listener) error {",
                "Serve",
                true,
            ),
            (
                "export default async function handler(req) {",
                "handler",
                true,
            ),
            ("class Store:", "Store", false),
            ("pub struct Config {", "Config", false),
            ("impl<T> Cache<T> {", "Cache", false),
            ("defmodule Spotter.Repo do", "Spotter.Repo", false),
        ];
        for (line, name, function) in cases {
            match definition(line) {
                Some(Definition::Function(found)) if function => assert_eq!(found, name, "{line}"),
                Some(Definition::Type(found)) if !function => assert_eq!(found, name, "{line}"),
                Some(Definition::Function(_) | Definition::Type(_)) | None => {
                    panic!("{line}: wrong definition")
                }
            }
        }
        assert!(definition("let x = 1;").is_none());
        assert!(definition("fn").is_none());
        assert!(definition("class 1x").is_none());
    }

    #[test]
    fn whitespace_words_split_like_the_standard_splitter() {
        for text in [
            "",
            "   ",
            "pub async fn name(x)",
            "\tdef  f(\u{b}a):\u{85}b\u{3000}c ",
            "é\u{a0}ü x",
            "word",
        ] {
            let expected: Vec<&str> = text.split_whitespace().collect();
            assert_eq!(
                whitespace_words(text).collect::<Vec<_>>(),
                expected,
                "{text:?}"
            );
        }
        for modifier in ["pub", "pub(crate)", "async", "static", "export", "override"] {
            assert!(is_modifier(modifier));
        }
        assert!(!is_modifier("fn") && !is_modifier("pub(in") && !is_modifier("Pub"));
    }
}
