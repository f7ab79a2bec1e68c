//! Ad-hoc measure on the real trajectories in the shared data folder (not part of the project):
//! how often an identifier the assistant uses later, first seen in a tool result, is still visible
//! in that result's digest; and how long digesting takes. Ignored by default; run
//! `cargo test --release -p skald-core --test digest_real_data -- --ignored --nocapture`
//! (`SKALD_SHARED_DATA` overrides the data folder).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use skald_core::codec;
use skald_core::digest::{DigestSettings, digest_blocks};
use skald_core::identifiers::{
    extract_identifiers, extract_path_like, mentions_identifier, normalize_identifier,
};
use skald_core::message::{Block, Role};

fn data_dir() -> PathBuf {
    std::env::var_os("SKALD_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"))
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn block_text(blocks: &[Block]) -> String {
    let mut out = String::new();
    for block in blocks {
        match block {
            Block::Text(t) => {
                out.push_str(&t.text);
                out.push('\n');
            }
            Block::ToolCall(call) => {
                out.push_str(&call.arguments.to_string());
                out.push('\n');
            }
            Block::ToolResult(result) => out.push_str(&block_text(&result.content)),
            Block::Image(_) | Block::Thinking(_) | Block::Opaque(_) => {}
        }
    }
    out
}

/// Identifiers of a text: OpenClaw's pattern plus relative paths, as (kind, normalised key).
fn ids_of(text: &str) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = extract_identifiers(text)
        .into_iter()
        .map(|id| ("seed", normalize_identifier(&id).into_owned()))
        .collect();
    out.extend(extract_path_like(text).into_iter().map(|p| ("path", p)));
    out
}

#[derive(Default)]
struct Tally {
    used: usize,
    visible: usize,
    head_visible: usize,
}

#[test]
#[ignore = "reads the shared real-data folder"]
fn identifier_retention_on_real_trajectories() {
    let root = data_dir().join("trajectories");
    let mut files = Vec::new();
    files_under(&root, &mut files);
    files.sort();
    let settings = DigestSettings::default();
    let min_chars: usize = std::env::var("MIN_CHARS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let show_misses = std::env::var_os("SHOW_MISSES").is_some();
    let mut tallies: BTreeMap<(String, &'static str), Tally> = BTreeMap::new();
    let mut digested = 0usize;
    let mut digest_time = Duration::ZERO;
    let mut digested_bytes = 0usize;
    for path in &files {
        let Ok(input) = std::fs::read_to_string(path) else {
            continue;
        };
        let Ok(decoded) = codec::decode(&input) else {
            continue;
        };
        let corpus = path
            .strip_prefix(&root)
            .unwrap()
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .into_owned();
        // id -> (digest summary, first 300 chars of the result) of the result it first appeared in.
        let mut origin: HashMap<String, Option<usize>> = HashMap::new();
        let mut digests: Vec<(String, String, String)> = Vec::new();
        let mut counted: HashMap<(String, usize), ()> = HashMap::new();
        for message in &decoded.conversation.messages {
            for block in &message.content {
                if let Block::ToolResult(result) = block {
                    let text = block_text(&result.content);
                    let big = text.chars().count() >= min_chars;
                    let index = if big {
                        let started = Instant::now();
                        let d = digest_blocks(&result.content, &settings);
                        digest_time += started.elapsed();
                        digested_bytes += text.len();
                        digested += 1;
                        let head: String = text.chars().take(300).collect();
                        digests.push((d.summary, head, text.clone()));
                        Some(digests.len() - 1)
                    } else {
                        None
                    };
                    for (_, id) in ids_of(&text) {
                        origin.entry(id).or_insert(index);
                    }
                }
            }
            let text = match message.role {
                Role::Assistant => block_text(&message.content),
                Role::System | Role::User | Role::Custom(_) | Role::ToolResult => {
                    let text = message.plain_text();
                    for (_, id) in ids_of(&text) {
                        origin.entry(id).or_insert(None);
                    }
                    continue;
                }
            };
            for (kind, id) in ids_of(&text) {
                let Some(Some(index)) = origin.get(&id).copied() else {
                    origin.entry(id).or_insert(None);
                    continue;
                };
                if counted.insert((id.clone(), index), ()).is_some() {
                    continue;
                }
                let (summary, head, full) = &digests[index];
                let tally = tallies.entry((corpus.clone(), kind)).or_default();
                tally.used += 1;
                let visible = mentions_identifier(summary, &id);
                if visible {
                    tally.visible += 1;
                } else if show_misses {
                    let line = full
                        .lines()
                        .find(|l| mentions_identifier(l, &id))
                        .unwrap_or("")
                        .chars()
                        .take(160)
                        .collect::<String>();
                    println!("MISS {kind} {id}\n  in: {line}\n  digest: {summary}\n");
                }
                if mentions_identifier(head, &id) {
                    tally.head_visible += 1;
                }
            }
        }
    }
    println!(
        "digested {digested} results >= {min_chars} chars ({digested_bytes} bytes) in {digest_time:?}"
    );
    if digested > 0 {
        println!(
            "  mean {:?} per result, {:.1} MB/s",
            digest_time / digested as u32,
            digested_bytes as f64 / digest_time.as_secs_f64() / 1e6
        );
    }
    let mut total = Tally::default();
    for ((corpus, kind), t) in &tallies {
        println!(
            "{corpus:16} {kind:5} used {:4}  visible in digest {:5.1}%  in first 300 chars {:5.1}%",
            t.used,
            100.0 * t.visible as f64 / t.used.max(1) as f64,
            100.0 * t.head_visible as f64 / t.used.max(1) as f64
        );
        total.used += t.used;
        total.visible += t.visible;
        total.head_visible += t.head_visible;
    }
    println!(
        "{:22} used {:4}  visible in digest {:5.1}%  in first 300 chars {:5.1}%",
        "total",
        total.used,
        100.0 * total.visible as f64 / total.used.max(1) as f64,
        100.0 * total.head_visible as f64 / total.used.max(1) as f64
    );
}
