//! Expanding the paths a user names into the transcript files to read.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// File names that look like transcripts when a directory is walked.
fn looks_like_transcript(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with(".jsonl") || name.ends_with(".json") || name.ends_with(".traj")
}

/// Files named directly are taken as they are; directories are walked recursively for `.jsonl`,
/// `.json` and `.traj` files, in sorted order so output is stable.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        let meta =
            std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        if meta.is_dir() {
            walk(path, &mut files)?;
        } else {
            files.push(path.clone());
        }
    }
    if files.is_empty() {
        bail!("no transcript files found in the paths given (looked for .jsonl, .json, .traj)");
    }
    Ok(files)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list directory {}", dir.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()
        .with_context(|| format!("cannot list directory {}", dir.display()))?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, files)?;
        } else if looks_like_transcript(&path) {
            files.push(path);
        }
    }
    Ok(())
}

/// Reads a transcript as UTF-8 text, naming the file in every error.
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    String::from_utf8(bytes).map_err(|error| {
        anyhow::anyhow!(
            "{} is not UTF-8 text (invalid byte at offset {})",
            path.display(),
            error.utf8_error().valid_up_to()
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn walks_directories_in_sorted_order_and_keeps_named_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        for name in ["b.jsonl", "a.json", "notes.txt", "sub/c.traj"] {
            std::fs::write(dir.path().join(name), "{}").unwrap();
        }
        let files = expand(&[dir.path().to_path_buf()]).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|p| {
                p.strip_prefix(dir.path())
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(names, ["a.json", "b.jsonl", "sub/c.traj"]);
        let named = expand(&[dir.path().join("notes.txt")]).unwrap();
        assert_eq!(named.len(), 1);
    }

    #[test]
    fn missing_path_names_the_path() {
        let error = expand(&[PathBuf::from("/nonexistent/x.jsonl")]).unwrap_err();
        assert!(format!("{error:#}").contains("/nonexistent/x.jsonl"));
    }

    #[test]
    fn non_utf8_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.jsonl");
        std::fs::write(&path, [b'{', 0xff, b'}']).unwrap();
        let error = read_text(&path).unwrap_err();
        assert!(error.to_string().contains("offset 1"));
    }
}
