//! `skald add FILE|DIR`: documents into the memory store as resources.
//!
//! Each text file is cut by `skald_core::memory::chunk` (Markdown at headings, anything else at
//! blank lines, chunks of at most `--max-chunk-chars`) and each chunk becomes an entry at
//! `<root>/<dir>/…/<file>/<chunk-slug>` (root `viking://resources`, or `--to`). Every directory
//! written — each file's directory of chunks included — gets an `_overview` entry
//! ([`OVERVIEW_NAME`]): its L0 says what is in it in one line, its L2 lists the children with
//! their abstracts (so `skald read DIR --level l0|l1|l2` works on directories, and `skald ls`
//! shows a directory's abstract).
//!
//! Adding again mirrors the source: an unchanged chunk writes nothing, a changed one becomes a
//! new version, and entries under the added URI that no longer come from a file are forgotten.
//! Hidden files and directories (`.git`…), `target`, `node_modules` and `__pycache__` are not
//! read; symbolic links are not followed; binary files and files over [`MAX_FILE_BYTES`] are
//! skipped with a note. All new entries are written in one transaction.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use skald_core::memory::chunk::{
    Chunk, DEFAULT_MAX_CHUNK_CHARS, DocumentKind, MIN_CHUNK_CHARS, chunk_document,
};
use skald_core::memory::levels::{MAX_ABSTRACT_CHARS, cut_at_word, derive_abstract};
use skald_core::memory::uri::{MAX_DEPTH, MAX_SEGMENT_LEN, MemoryCategory, MemoryUri};
use skald_store::memories::{AddOutcome, MemoryError, MemoryStore, NewMemory};

use crate::config::Config;
use crate::home::Home;
use crate::memory_cmd::{
    Embedding, Identity, IdentityArgs, OVERVIEW_NAME, live_entries, open_store, parse_uri,
};
use crate::output::{self, Mode};

/// Files larger than this are skipped.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Directories never read.
const SKIPPED_DIRECTORIES: [&str; 3] = ["target", "node_modules", "__pycache__"];

#[derive(Debug, Args)]
pub struct AddArgs {
    /// A file or a directory to add.
    #[arg(value_name = "FILE|DIR")]
    pub path: PathBuf,
    /// The resources directory to add under (default: viking://resources). The file or
    /// directory keeps its name below it.
    #[arg(long, value_name = "URI")]
    pub to: Option<String>,
    /// The largest chunk, in characters.
    #[arg(long, default_value_t = DEFAULT_MAX_CHUNK_CHARS, value_name = "N")]
    pub max_chunk_chars: usize,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

/// A file skipped, and why.
#[derive(Debug, Serialize)]
struct Skipped {
    path: String,
    reason: String,
}

#[derive(Debug, Serialize)]
struct AddReport {
    /// The URI the file or directory was added at.
    root: MemoryUri,
    files: usize,
    chunks: usize,
    /// `_overview` entries (one per directory, files' chunk directories included).
    directories: usize,
    /// Entries stored new.
    added: usize,
    /// Entries whose content changed: new versions.
    updated: usize,
    unchanged: usize,
    /// New entries that duplicated an existing resource and were merged into it.
    merged: usize,
    /// Entries under `root` that no longer come from a file.
    forgotten: usize,
    /// Vectors stored (an embedder is configured).
    embedded: usize,
    skipped: Vec<Skipped>,
}

/// An entry `add` wants to exist.
#[derive(Debug, Clone)]
struct Planned {
    uri: MemoryUri,
    l0: String,
    content: String,
}

/// A file read and cut.
struct FileChunks {
    dir: MemoryUri,
    name: String,
    chunks: Vec<(Chunk, String)>,
}

/// A path segment for a file or directory name: characters the URI layout refuses become `-`,
/// leading dots go, at most [`MAX_SEGMENT_LEN`] bytes.
pub fn segment_of(name: &str) -> String {
    let allowed =
        |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '@' | '+' | '=' | ',');
    let mapped: String = name
        .chars()
        .map(|c| if allowed(c) { c } else { '-' })
        .collect();
    let mut segment = String::new();
    for c in mapped.trim_start_matches('.').chars() {
        if segment.len() + c.len_utf8() > MAX_SEGMENT_LEN {
            break;
        }
        segment.push(c);
    }
    if segment.is_empty() {
        "unnamed".to_owned()
    } else if segment == OVERVIEW_NAME {
        format!("{OVERVIEW_NAME}-file")
    } else {
        segment
    }
}

/// Whether `bytes` look like text: valid UTF-8 with no NUL byte.
fn as_text(bytes: Vec<u8>) -> Option<String> {
    if bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// The abstract of a chunk: its heading, then the first sentence of its body.
fn chunk_abstract(chunk: &Chunk) -> String {
    let body: String = chunk
        .text
        .lines()
        .skip_while(|line| line.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let first = derive_abstract(&body);
    let text = match (&chunk.title, first.is_empty()) {
        (Some(title), false) => format!("{title} — {first}"),
        (Some(title), true) => title.clone(),
        (None, _) => derive_abstract(&chunk.text),
    };
    let text = cut_at_word(&text, MAX_ABSTRACT_CHARS);
    if text.trim().is_empty() {
        chunk.slug.clone()
    } else {
        text
    }
}

/// Every file below `dir`, with the path segments from `dir` (sorted, hidden and skipped
/// directories left out, links not followed).
fn walk(dir: &Path, prefix: &[String], files: &mut Vec<(Vec<String>, PathBuf)>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the directory {}", dir.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot read the directory {}", dir.display()))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let kind = entry
            .file_type()
            .with_context(|| format!("cannot read {}", entry.path().display()))?;
        let mut segments = prefix.to_vec();
        segments.push(segment_of(&name));
        if kind.is_dir() {
            if !SKIPPED_DIRECTORIES.contains(&name.as_str()) {
                walk(&entry.path(), &segments, files)?;
            }
        } else if kind.is_file() {
            files.push((segments, entry.path()));
        }
    }
    Ok(())
}

/// The `_overview` entries of every directory from `root` down, from the files' chunks.
fn overviews(root: &MemoryUri, files: &[FileChunks]) -> Result<Vec<Planned>> {
    // Each directory's children: name → (URI, is a directory).
    let mut children: BTreeMap<MemoryUri, BTreeMap<String, MemoryUri>> = BTreeMap::new();
    let mut abstracts: BTreeMap<MemoryUri, String> = BTreeMap::new();
    let mut planned = Vec::new();
    for file in files {
        let mut lines = vec![format!(
            "{} — {} chunk{}:",
            file.name,
            file.chunks.len(),
            if file.chunks.len() == 1 { "" } else { "s" }
        )];
        for (chunk, l0) in &file.chunks {
            lines.push(format!("- {}: {l0}", chunk.slug));
        }
        let first = file.chunks.first().map_or("", |(_, l0)| l0.as_str());
        let l0 = cut_at_word(&format!("{}: {first}", file.name), MAX_ABSTRACT_CHARS);
        abstracts.insert(file.dir.clone(), l0.clone());
        planned.push(Planned {
            uri: file.dir.join(OVERVIEW_NAME)?,
            l0,
            content: lines.join("\n"),
        });
        let mut child = file.dir.clone();
        while child != *root {
            let Some(parent) = child.parent() else { break };
            let name = child.name().unwrap_or("").to_owned();
            children
                .entry(parent.clone())
                .or_default()
                .insert(name, child.clone());
            if !root.contains(&parent) {
                break;
            }
            child = parent;
        }
    }
    // Deepest first, so a directory's children have their abstracts.
    let mut dirs: Vec<&MemoryUri> = children.keys().collect();
    dirs.sort_by_key(|dir| std::cmp::Reverse(dir.depth()));
    for dir in dirs {
        let Some(kids) = children.get(dir) else {
            continue;
        };
        let name = dir.name().unwrap_or("resources");
        let names: Vec<String> = kids.keys().map(|kid| format!("{kid}/")).collect();
        let items = if kids.len() == 1 { "item" } else { "items" };
        let l0 = cut_at_word(
            &format!("{name}/ — {} {items}: {}", kids.len(), names.join(", ")),
            MAX_ABSTRACT_CHARS,
        );
        let mut lines = vec![format!("{name}/ — {} {items}:", kids.len())];
        for (kid, uri) in kids {
            let kid_l0 = abstracts.get(uri).map_or("", String::as_str);
            lines.push(format!("- {kid}/: {kid_l0}"));
        }
        abstracts.insert(dir.clone(), l0.clone());
        planned.push(Planned {
            uri: dir.join(OVERVIEW_NAME)?,
            l0,
            content: lines.join("\n"),
        });
    }
    Ok(planned)
}

pub fn run(args: &AddArgs, home: &Home, config: &Config, mode: Mode) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let metadata = std::fs::metadata(&args.path)
        .with_context(|| format!("no file or directory at {}", args.path.display()))?;
    let parent = match &args.to {
        Some(text) => {
            let uri = parse_uri(text, "--to")?;
            if uri.category() != Some(MemoryCategory::Resources) {
                bail!(
                    "--to {text:?} is not under viking://resources; documents are added as \
                     resources (for example --to viking://resources/my-project)"
                );
            }
            uri
        }
        None => MemoryUri::parse("viking://resources")?,
    };
    if args.max_chunk_chars < MIN_CHUNK_CHARS {
        bail!(
            "--max-chunk-chars is {}; it must be at least {MIN_CHUNK_CHARS}",
            args.max_chunk_chars
        );
    }
    let absolute = args
        .path
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", args.path.display()))?;
    let name = absolute
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".to_owned());
    let root = parent
        .join(&segment_of(&name))
        .with_context(|| format!("cannot add {} under {parent}", args.path.display()))?;
    let mut sources: Vec<(Vec<String>, PathBuf)> = Vec::new();
    if metadata.is_dir() {
        walk(&absolute, &[], &mut sources)?;
    } else {
        sources.push((Vec::new(), absolute.clone()));
    }

    let mut skipped = Vec::new();
    let mut files: Vec<FileChunks> = Vec::new();
    let mut seen_dirs: HashSet<MemoryUri> = HashSet::new();
    for (segments, path) in sources {
        let shown = path.display().to_string();
        let mut skip = |reason: String| {
            skipped.push(Skipped {
                path: shown.clone(),
                reason,
            });
        };
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if size > MAX_FILE_BYTES {
            skip(format!(
                "{size} bytes; files over {MAX_FILE_BYTES} bytes are not added"
            ));
            continue;
        }
        let bytes = std::fs::read(&path).with_context(|| format!("cannot read {shown}"))?;
        let Some(text) = as_text(bytes) else {
            skip("binary (not UTF-8 text)".to_owned());
            continue;
        };
        let dir = if segments.is_empty() {
            Ok(root.clone())
        } else {
            root.join(&segments.join("/"))
        };
        let dir = match dir {
            Ok(dir) if dir.depth() < MAX_DEPTH => dir,
            Ok(_) | Err(_) => {
                skip("its path is too deep or too long for a memory URI".to_owned());
                continue;
            }
        };
        if !seen_dirs.insert(dir.clone()) {
            skip(format!("another file already maps to {dir}"));
            continue;
        }
        let file_name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let chunks = chunk_document(
            DocumentKind::of_file_name(&file_name),
            &text,
            args.max_chunk_chars,
        );
        if chunks.is_empty() {
            skip("empty".to_owned());
            continue;
        }
        let chunks = chunks
            .into_iter()
            .map(|chunk| {
                let l0 = chunk_abstract(&chunk);
                (chunk, l0)
            })
            .collect();
        files.push(FileChunks {
            dir,
            name: file_name,
            chunks,
        });
    }

    let mut planned: Vec<Planned> = Vec::new();
    for file in &files {
        for (chunk, l0) in &file.chunks {
            planned.push(Planned {
                uri: file.dir.join(&chunk.slug)?,
                l0: l0.clone(),
                content: chunk.text.clone(),
            });
        }
    }
    let chunk_count = planned.len();
    let overview_entries = overviews(&root, &files)?;
    let directories = overview_entries.len();
    planned.extend(overview_entries);

    let embedding = Embedding::from_config(config)?;
    let store = open_store(home)?;
    let tenant = identity.tenant.as_str();
    let (mut to_add, mut to_update, mut unchanged) = (Vec::new(), Vec::new(), 0);
    for entry in &planned {
        match store.get(tenant, &entry.uri) {
            Ok(live) if live.l2 == entry.content && live.l0 == entry.l0 => unchanged += 1,
            Ok(_) => to_update.push(entry.clone()),
            Err(MemoryError::NotFound { .. } | MemoryError::Forgotten { .. }) => {
                to_add.push(entry.clone());
            }
            Err(error) => return Err(error.into()),
        }
    }
    let wanted: BTreeSet<&MemoryUri> = planned.iter().map(|entry| &entry.uri).collect();
    let stale: Vec<MemoryUri> = live_entries(&store, tenant, &root)?
        .into_iter()
        .filter(|uri| !wanted.contains(uri))
        .collect();

    let texts: Vec<String> = to_add
        .iter()
        .chain(&to_update)
        .map(|entry| entry.content.clone())
        .collect();
    let mut vectors = match &embedding {
        Some(embedding) if !texts.is_empty() => embedding.embed(&texts)?.into_iter(),
        Some(_) | None => Vec::new().into_iter(),
    };
    let embedded = vectors.len();
    let mut new_memory = |entry: &Planned| {
        let mut memory =
            NewMemory::new(entry.uri.clone(), entry.content.clone()).with_l0(entry.l0.clone());
        if let Some(vector) = vectors.next() {
            memory = memory.with_embedding(vector);
        }
        memory
    };
    let additions: Vec<NewMemory> = to_add.iter().map(&mut new_memory).collect();
    let updates: Vec<NewMemory> = to_update.iter().map(&mut new_memory).collect();
    // New entries first, in one transaction: a conflict there stops everything before any
    // update or forget.
    let outcomes = store.add_many(tenant, additions)?;
    let merged = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, AddOutcome::Merged(_)))
        .count();
    for update in updates {
        store.update(tenant, update)?;
    }
    for uri in &stale {
        store.forget(tenant, uri)?;
    }

    let report = AddReport {
        root,
        files: files.len(),
        chunks: chunk_count,
        directories,
        added: outcomes.len() - merged,
        updated: to_update.len(),
        unchanged,
        merged,
        forgotten: stale.len(),
        embedded,
        skipped,
    };
    output::emit(mode, &report, |report| {
        let mut table = output::table(&[
            "added at",
            "files",
            "chunks",
            "added",
            "updated",
            "unchanged",
            "merged",
            "forgotten",
        ]);
        table.add_row(vec![
            report.root.to_string(),
            report.files.to_string(),
            report.chunks.to_string(),
            report.added.to_string(),
            report.updated.to_string(),
            report.unchanged.to_string(),
            report.merged.to_string(),
            report.forgotten.to_string(),
        ]);
        table
    })?;
    if mode == Mode::Table {
        for skipped in &report.skipped {
            println!("skipped {}: {}", skipped.path, skipped.reason);
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn file_names_become_uri_segments() {
        assert_eq!(segment_of("auth.md"), "auth.md");
        assert_eq!(segment_of("my notes (v2).txt"), "my-notes--v2-.txt");
        assert_eq!(segment_of(".env"), "env");
        assert_eq!(segment_of("_overview"), "_overview-file");
        assert_eq!(segment_of("..."), "unnamed");
        assert!(segment_of(&"é".repeat(200)).len() <= MAX_SEGMENT_LEN);
        for name in ["a:b", "日本語.md", "x?y#z"] {
            let segment = segment_of(name);
            assert!(
                MemoryUri::parse(&format!("viking://resources/{segment}")).is_ok(),
                "{name}"
            );
        }
    }

    #[test]
    fn binary_content_is_not_text() {
        assert_eq!(as_text(b"hello".to_vec()).as_deref(), Some("hello"));
        assert!(as_text(vec![0x89, b'P', b'N', b'G', 0, 1]).is_none());
        assert!(as_text(vec![0xff, 0xfe, b'a']).is_none());
    }

    #[test]
    fn chunk_abstracts_name_the_heading_and_the_first_sentence() {
        let chunk = Chunk {
            slug: "auth".to_owned(),
            title: Some("Auth".to_owned()),
            text: "# Auth\nTokens expire after one hour. Refresh them.".to_owned(),
        };
        assert_eq!(
            chunk_abstract(&chunk),
            "Auth — Tokens expire after one hour."
        );
    }
}
