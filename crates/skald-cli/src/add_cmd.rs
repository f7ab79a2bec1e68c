//! `skald add FILE|DIR`: documents into the memory store as resources.
//!
//! What is written is `Engine::add_documents` (the
//! server's resources API makes the same call); this command walks and reads the files. Each text file is cut by
//! `skald_core::memory::chunk` (Markdown at headings, anything else at
//! blank lines, chunks of at most `--max-chunk-chars`) and each chunk becomes an entry at
//! `<root>/<dir>/…/<file>/<chunk-slug>` (root `viking://resources`, or `--to`). Every directory
//! written — each file's directory of chunks included — gets an `_overview` entry
//! ([`manage::OVERVIEW_NAME`]): its L0 says what is in it in one line, its L2 lists the children with
//! their abstracts (so `skald read DIR --level l0|l1|l2` works on directories, and `skald ls`
//! shows a directory's abstract).
//!
//! Adding again mirrors the source: an unchanged chunk writes nothing, a changed one becomes a
//! new version, and entries under the added URI that no longer come from a file are forgotten.
//! Hidden files and directories (`.git`…), `target`, `node_modules` and `__pycache__` are not
//! read; symbolic links are not followed; binary files and files over [`MAX_FILE_BYTES`] are
//! skipped with a note. All new entries are written in one transaction.
//!
//! With `--url` the files are read here the same way and sent to the server's
//! `POST /v1/memory/resources` (as `documents`, with the files skipped here), which runs the same
//! `add_documents` on its store.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::json;
use skald_core::memory::chunk::{DEFAULT_MAX_CHUNK_CHARS, MIN_CHUNK_CHARS};
use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use skald_engine::memory::manage::{AddReport, Document, Skipped, segment_of};

use crate::config::Config;
use crate::home::Home;
use crate::local;
use crate::memory_cmd::{Identity, IdentityArgs, memory_engine, parse_uri};
use crate::output::{self, Mode};
use crate::remote::Remote;

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

/// Whether `bytes` look like text: valid UTF-8 with no NUL byte.
fn as_text(bytes: Vec<u8>) -> Option<String> {
    if bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
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

/// What `add` read: the root's name and parent, the documents (each with its path below the
/// added directory), and the files left out.
struct Gathered {
    /// A file was added, not a directory.
    single_file: bool,
    parent: MemoryUri,
    name: String,
    root: MemoryUri,
    documents: Vec<(String, Document)>,
    skipped: Vec<Skipped>,
}

pub fn run(
    args: &AddArgs,
    home: &Home,
    config: Option<&Config>,
    remote: Option<&Remote>,
    mode: Mode,
) -> Result<ExitCode> {
    let report = match (remote, config) {
        (Some(remote), _) => add_remote(args, remote)?,
        (None, Some(config)) => add_local(args, home, config)?,
        (None, None) => bail!("the configuration was not loaded"),
    };
    print(&report, mode)
}

fn add_remote(args: &AddArgs, remote: &Remote) -> Result<AddReport> {
    args.identity.check_remote_uri_only("resources route")?;
    let gathered = gather(args)?;
    let mut body = json!({
        "name": gathered.name,
        "skipped": gathered.skipped,
        "maxChunkChars": args.max_chunk_chars,
    });
    match (gathered.single_file, gathered.documents.as_slice()) {
        // A file added on its own is the root: its chunks go right below it.
        (true, [(_, document)]) => {
            body["content"] = json!(document.text);
            body["source"] = json!(document.shown);
        }
        _ => {
            let documents: Vec<_> = gathered
                .documents
                .iter()
                .map(|(path, document)| {
                    json!({"path": path, "content": document.text, "source": document.shown})
                })
                .collect();
            body["documents"] = json!(documents);
        }
    }
    if args.to.is_some() {
        body["uri"] = json!(gathered.parent.as_str());
    }
    remote.post(&["v1", "memory", "resources"], &body)
}

fn add_local(args: &AddArgs, home: &Home, config: &Config) -> Result<AddReport> {
    let identity = Identity::resolve(&args.identity, config)?;
    let gathered = gather(args)?;
    let documents: Vec<Document> = gathered
        .documents
        .into_iter()
        .map(|(_, document)| document)
        .collect();
    let (root, skipped) = (gathered.root, gathered.skipped);
    let engine = memory_engine(home, config, true)?;
    Ok(local::block_on(engine.add_documents(
        &identity.tenant,
        &root,
        documents,
        args.max_chunk_chars,
        skipped,
    ))??)
}

/// Reads the file or the directory's files, checking the arguments first.
fn gather(args: &AddArgs) -> Result<Gathered> {
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
    let mut documents: Vec<(String, Document)> = Vec::new();
    for (segments, path) in sources {
        let shown = path.display().to_string();
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if size > MAX_FILE_BYTES {
            skipped.push(Skipped {
                path: shown,
                reason: format!("{size} bytes; files over {MAX_FILE_BYTES} bytes are not added"),
            });
            continue;
        }
        let bytes = std::fs::read(&path).with_context(|| format!("cannot read {shown}"))?;
        let Some(text) = as_text(bytes) else {
            skipped.push(Skipped {
                path: shown,
                reason: "binary (not UTF-8 text)".to_owned(),
            });
            continue;
        };
        let file_name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Its path below the added directory, as the server's `documents` take it.
        let relative = path
            .strip_prefix(&absolute)
            .map(|relative| {
                relative
                    .components()
                    .map(|part| part.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .unwrap_or_default();
        documents.push((
            relative,
            Document {
                segments,
                file_name,
                text,
                shown,
            },
        ));
    }
    Ok(Gathered {
        single_file: !metadata.is_dir(),
        parent,
        name,
        root,
        documents,
        skipped,
    })
}

fn print(report: &AddReport, mode: Mode) -> Result<ExitCode> {
    output::emit(mode, report, |report| {
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
    fn binary_content_is_not_text() {
        assert_eq!(as_text(b"hello".to_vec()).as_deref(), Some("hello"));
        assert!(as_text(vec![0x89, b'P', b'N', b'G', 0, 1]).is_none());
        assert!(as_text(vec![0xff, 0xfe, b'a']).is_none());
    }
}
