//! Resource documents cut into chunks for the memory store: one entry per chunk under
//! `viking://resources/…/<file>/<chunk-slug>`. Pure: the caller reads the file and passes text.
//!
//! - Markdown ([`DocumentKind::Markdown`]) is cut at headings (`#` to `######`, outside fenced
//!   code blocks); each section keeps its heading line, and its slug is the heading's slug
//!   (`installation`, `installation-2` when a heading repeats; `intro` for text before the first
//!   heading). A heading with no body joins the section after it.
//! - Code and plain text ([`DocumentKind::Text`]) are cut at blank lines; consecutive paragraphs
//!   are packed into a chunk while it stays within the budget; slugs are `part-001`, `part-002`…
//! - No chunk exceeds the budget (in characters): an over-long section is split at paragraphs,
//!   an over-long paragraph at line breaks, then at whitespace, and only then mid-word — always
//!   on a character boundary, never inside a UTF-8 sequence.
//!
//! ```
//! use skald_core::memory::chunk::{chunk_document, DocumentKind, DEFAULT_MAX_CHUNK_CHARS};
//!
//! let doc = "# Setup\nRun `make`.\n\n# Auth\nTokens expire after 1 h.\n";
//! let chunks = chunk_document(DocumentKind::Markdown, doc, DEFAULT_MAX_CHUNK_CHARS);
//! let slugs: Vec<&str> = chunks.iter().map(|chunk| chunk.slug.as_str()).collect();
//! assert_eq!(slugs, ["setup", "auth"]);
//! assert_eq!(chunks[1].text, "# Auth\nTokens expire after 1 h.");
//! assert_eq!(chunks[1].title.as_deref(), Some("Auth"));
//! ```

use std::collections::{HashMap, HashSet};

/// The default largest chunk, in characters.
pub const DEFAULT_MAX_CHUNK_CHARS: usize = 3000;

/// The smallest budget [`chunk_document`] honours (a smaller one is raised to it).
pub const MIN_CHUNK_CHARS: usize = 200;

/// The longest slug, in bytes (a URI segment has at most 128).
pub const MAX_SLUG_BYTES: usize = 64;

/// How a document is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    /// At headings.
    Markdown,
    /// At blank lines (code, logs, plain text).
    Text,
}

impl DocumentKind {
    /// The kind of a file by its name: `.md`, `.markdown`, `.mdx` are Markdown, the rest text.
    pub fn of_file_name(name: &str) -> DocumentKind {
        let lower = name.to_lowercase();
        if [".md", ".markdown", ".mdx"]
            .iter()
            .any(|extension| lower.ends_with(extension))
        {
            DocumentKind::Markdown
        } else {
            DocumentKind::Text
        }
    }
}

/// One piece of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// A name for the chunk, unique within its document: letters, digits and `-`.
    pub slug: String,
    /// The heading of a Markdown section (without the `#`s).
    pub title: Option<String>,
    /// The text, trimmed, at most the budget's characters, never empty.
    pub text: String,
}

/// Cuts `text` into chunks of at most `max_chars` characters (at least [`MIN_CHUNK_CHARS`]).
/// Whitespace-only text gives no chunks.
pub fn chunk_document(kind: DocumentKind, text: &str, max_chars: usize) -> Vec<Chunk> {
    let max_chars = max_chars.max(MIN_CHUNK_CHARS);
    let text = text.replace("\r\n", "\n");
    let mut chunks = match kind {
        DocumentKind::Markdown => markdown_chunks(&text, max_chars),
        DocumentKind::Text => text_chunks(&text, max_chars),
    };
    make_slugs_unique(&mut chunks);
    chunks
}

/// A URI-safe slug of `text`: lowercase letters and digits of any script, runs of anything else
/// as one `-`, at most [`MAX_SLUG_BYTES`] bytes; `None` when nothing is left.
pub fn slugify(text: &str) -> Option<String> {
    let mut slug = String::new();
    let mut dash = false;
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            if dash && !slug.is_empty() {
                push_within(&mut slug, '-');
            }
            dash = false;
            if !push_within(&mut slug, c) {
                break;
            }
        } else {
            dash = true;
        }
    }
    let slug = slug.trim_end_matches('-').to_owned();
    (!slug.is_empty()).then_some(slug)
}

fn push_within(slug: &mut String, c: char) -> bool {
    if slug.len() + c.len_utf8() > MAX_SLUG_BYTES {
        return false;
    }
    slug.push(c);
    true
}

/// The heading text of a Markdown ATX heading line (`## Title ##` → `Title`).
fn heading_of(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let hashes = trimmed.chars().take_while(|c| *c == '#').count();
    if hashes == 0 || hashes > 6 {
        return None;
    }
    let rest = trimmed.get(hashes..)?;
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    Some(rest.trim().trim_end_matches('#').trim())
}

fn is_fence(line: &str) -> bool {
    let trimmed = line.trim_start();
    trimmed.starts_with("```") || trimmed.starts_with("~~~")
}

fn markdown_chunks(text: &str, max_chars: usize) -> Vec<Chunk> {
    // (title, text) of each section, in order.
    let mut sections: Vec<(Option<String>, String)> = vec![(None, String::new())];
    let mut in_fence = false;
    for line in text.split('\n') {
        if is_fence(line) {
            in_fence = !in_fence;
        }
        let heading = if in_fence { None } else { heading_of(line) };
        if let Some(title) = heading {
            let body_is_empty = sections
                .last()
                .is_some_and(|(title, body)| title.is_some() && is_heading_only(body));
            if body_is_empty {
                // A heading with nothing under it is the parent of the next one: keep both.
                if let Some((last_title, body)) = sections.last_mut() {
                    body.push('\n');
                    body.push_str(line);
                    *last_title = Some(title.to_owned());
                }
                continue;
            }
            sections.push((Some(title.to_owned()), line.to_owned()));
            continue;
        }
        if let Some((_, body)) = sections.last_mut() {
            if !body.is_empty() {
                body.push('\n');
            }
            body.push_str(line);
        }
    }
    let mut chunks = Vec::new();
    for (title, body) in sections {
        let body = body.trim();
        if body.is_empty() {
            continue;
        }
        let base = title
            .as_deref()
            .and_then(slugify)
            .unwrap_or_else(|| "intro".to_owned());
        let pieces = pack_paragraphs(body, max_chars);
        let count = pieces.len();
        for (index, piece) in pieces.into_iter().enumerate() {
            let slug = if count == 1 {
                base.clone()
            } else {
                format!("{base}-part-{}", index + 1)
            };
            chunks.push(Chunk {
                slug,
                title: title.clone(),
                text: piece,
            });
        }
    }
    chunks
}

fn is_heading_only(body: &str) -> bool {
    body.lines()
        .filter(|line| !line.trim().is_empty())
        .all(|line| heading_of(line).is_some())
}

fn text_chunks(text: &str, max_chars: usize) -> Vec<Chunk> {
    pack_paragraphs(text.trim(), max_chars)
        .into_iter()
        .enumerate()
        .map(|(index, text)| Chunk {
            slug: format!("part-{:03}", index + 1),
            title: None,
            text,
        })
        .collect()
}

/// Paragraphs (blank-line separated) packed greedily into pieces of at most `max_chars`.
fn pack_paragraphs(text: &str, max_chars: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut current_chars = 0;
    for paragraph in text.split("\n\n").map(str::trim_end) {
        let paragraph = paragraph.trim_start_matches('\n');
        if paragraph.trim().is_empty() {
            continue;
        }
        for part in split_long(paragraph, max_chars) {
            let chars = part.chars().count();
            let joined = if current.is_empty() {
                chars
            } else {
                current_chars + 2 + chars
            };
            if joined > max_chars && !current.is_empty() {
                pieces.push(std::mem::take(&mut current));
                current_chars = 0;
            }
            if !current.is_empty() {
                current.push_str("\n\n");
                current_chars += 2;
            }
            current.push_str(part);
            current_chars += chars;
        }
    }
    if !current.trim().is_empty() {
        pieces.push(current);
    }
    pieces
        .into_iter()
        .map(|piece| piece.trim().to_owned())
        .filter(|piece| !piece.is_empty())
        .collect()
}

/// `text` in pieces of at most `max_chars` characters, cut at the last line break, else the
/// last whitespace, in the second half of each piece; else exactly at the budget.
fn split_long(text: &str, max_chars: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.chars().count() > max_chars {
        let limit = rest
            .char_indices()
            .nth(max_chars)
            .map_or(rest.len(), |(at, _)| at);
        let window = rest.get(..limit).unwrap_or(rest);
        let half = window.len() / 2;
        let cut = window
            .rfind('\n')
            .filter(|at| *at >= half)
            .or_else(|| window.rfind(char::is_whitespace).filter(|at| *at >= half))
            .unwrap_or(limit);
        let (piece, tail) = rest.split_at(cut);
        if !piece.trim().is_empty() {
            pieces.push(piece.trim_end());
        }
        rest = tail.trim_start();
    }
    if !rest.trim().is_empty() {
        pieces.push(rest);
    }
    pieces
}

/// Makes every slug unique within the document: a repeated slug gets the first free `-2`,
/// `-3`… suffix. Linear in the number of chunks: the taken slugs are a set, and each base slug
/// remembers the next suffix to try, so a slug is never compared with every earlier one.
fn make_slugs_unique(chunks: &mut [Chunk]) {
    let mut taken: HashSet<String> = HashSet::with_capacity(chunks.len());
    let mut next_suffix: HashMap<String, usize> = HashMap::new();
    for chunk in chunks.iter_mut() {
        if taken.insert(chunk.slug.clone()) {
            continue;
        }
        let n = next_suffix.entry(chunk.slug.clone()).or_insert(2);
        let mut slug = format!("{}-{n}", chunk.slug);
        while taken.contains(&slug) {
            *n += 1;
            slug = format!("{}-{n}", chunk.slug);
        }
        *n += 1;
        taken.insert(slug.clone());
        chunk.slug = slug;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn slugs(chunks: &[Chunk]) -> Vec<&str> {
        chunks.iter().map(|chunk| chunk.slug.as_str()).collect()
    }

    #[test]
    fn markdown_is_cut_at_headings_with_the_preface_as_intro() {
        let doc = "Welcome to the project.\n\n# Install\n\nRun make.\n\n## Linux\napt install x\n\n# Install\nAgain.\n";
        let chunks = chunk_document(DocumentKind::Markdown, doc, DEFAULT_MAX_CHUNK_CHARS);
        assert_eq!(slugs(&chunks), ["intro", "install", "linux", "install-2"]);
        assert_eq!(chunks[0].title, None);
        assert_eq!(chunks[1].text, "# Install\n\nRun make.");
        assert_eq!(chunks[2].title.as_deref(), Some("Linux"));
    }

    #[test]
    fn a_heading_without_a_body_joins_the_next_section() {
        let doc = "# Guide\n## Auth\nTokens expire.\n";
        let chunks = chunk_document(DocumentKind::Markdown, doc, DEFAULT_MAX_CHUNK_CHARS);
        assert_eq!(slugs(&chunks), ["auth"]);
        assert_eq!(chunks[0].text, "# Guide\n## Auth\nTokens expire.");
    }

    #[test]
    fn headings_inside_code_fences_do_not_cut() {
        let doc = "# Script\n```sh\n# not a heading\necho hi\n```\n";
        let chunks = chunk_document(DocumentKind::Markdown, doc, DEFAULT_MAX_CHUNK_CHARS);
        assert_eq!(slugs(&chunks), ["script"]);
        assert!(chunks[0].text.contains("# not a heading"));
        assert_eq!(heading_of("#hashtag"), None);
        assert_eq!(heading_of("####### seven"), None);
        assert_eq!(heading_of("## Title ##"), Some("Title"));
    }

    #[test]
    fn text_is_packed_by_paragraphs_within_the_budget() {
        let paragraph = "word ".repeat(40); // 200 chars
        let doc = [paragraph.trim(); 5].join("\n\n");
        let chunks = chunk_document(DocumentKind::Text, &doc, 450);
        assert_eq!(slugs(&chunks), ["part-001", "part-002", "part-003"]);
        for chunk in &chunks {
            assert!(chunk.text.chars().count() <= 450, "{}", chunk.text.len());
        }
        assert_eq!(chunks[0].text.matches("\n\n").count(), 1);
    }

    #[test]
    fn a_long_section_is_split_and_numbered() {
        let doc = format!("# Big\n{}", "line of text\n".repeat(100));
        let chunks = chunk_document(DocumentKind::Markdown, &doc, 300);
        assert!(chunks.len() > 3);
        assert_eq!(chunks[0].slug, "big-part-1");
        assert!(chunks.iter().all(|chunk| chunk.text.chars().count() <= 300));
        assert!(
            chunks
                .iter()
                .all(|chunk| chunk.title.as_deref() == Some("Big"))
        );
    }

    #[test]
    fn multibyte_text_without_spaces_is_cut_on_char_boundaries() {
        let doc = "日本語のテキスト".repeat(100);
        let chunks = chunk_document(DocumentKind::Text, &doc, 250);
        let total: usize = chunks.iter().map(|chunk| chunk.text.chars().count()).sum();
        assert_eq!(total, doc.chars().count());
        assert!(chunks.iter().all(|chunk| chunk.text.chars().count() <= 250));
        let joined: String = chunks.iter().map(|chunk| chunk.text.as_str()).collect();
        assert_eq!(joined, doc);
    }

    #[test]
    fn empty_documents_have_no_chunks() {
        assert!(chunk_document(DocumentKind::Text, " \n\n\t", 1000).is_empty());
        assert!(chunk_document(DocumentKind::Markdown, "", 1000).is_empty());
    }

    #[test]
    fn the_budget_has_a_floor() {
        let doc = "x".repeat(1000);
        let chunks = chunk_document(DocumentKind::Text, &doc, 1);
        assert_eq!(chunks.len(), 5);
    }

    #[test]
    fn slugs_are_uri_safe_and_bounded() {
        assert_eq!(
            slugify("Getting Started!").as_deref(),
            Some("getting-started")
        );
        assert_eq!(
            slugify("  API: v2 / Auth  ").as_deref(),
            Some("api-v2-auth")
        );
        assert_eq!(slugify("Über Größe").as_deref(), Some("über-größe"));
        assert_eq!(slugify("!!!"), None);
        let long = slugify(&"é".repeat(100)).unwrap();
        assert!(long.len() <= MAX_SLUG_BYTES);
        let markdown = chunk_document(DocumentKind::Markdown, "# !!!\nbody\n", 1000);
        assert_eq!(slugs(&markdown), ["intro"]);
    }

    #[test]
    fn document_kinds_follow_the_file_name() {
        assert_eq!(
            DocumentKind::of_file_name("README.md"),
            DocumentKind::Markdown
        );
        assert_eq!(DocumentKind::of_file_name("a.MDX"), DocumentKind::Markdown);
        assert_eq!(DocumentKind::of_file_name("main.rs"), DocumentKind::Text);
    }

    #[test]
    fn repeated_headings_get_the_first_free_suffix() {
        let doc = "# A\none\n\n# A 2\ntwo\n\n# A\nthree\n\n# A\nfour\n\n# A 3\nfive\n";
        let chunks = chunk_document(DocumentKind::Markdown, doc, 1000);
        assert_eq!(slugs(&chunks), ["a", "a-2", "a-3", "a-4", "a-3-2"]);
    }

    #[test]
    fn crlf_line_endings_cut_like_lf() {
        let doc = "# A\r\none\r\n\r\n# B\r\ntwo\r\n";
        let chunks = chunk_document(DocumentKind::Markdown, doc, 1000);
        assert_eq!(slugs(&chunks), ["a", "b"]);
        assert_eq!(chunks[1].text, "# B\ntwo");
    }
}
