//! Ad-hoc check against the real trajectories in the shared data folder (not part of the project):
//! every file must be detected as its format and decode with no issues. Ignored by default; run
//! `SKALD_SHARED_DATA=/path/to/shared/data cargo test -p skald-core --test import_real_data -- --ignored --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use skald_core::codec::{self, Format, claude_code};
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

#[test]
#[ignore = "reads the shared real-data folder"]
fn every_real_trajectory_decodes_cleanly() {
    let root = data_dir().join("trajectories");
    let mut files = Vec::new();
    files_under(&root, &mut files);
    files.sort();
    if files.is_empty() {
        eprintln!("no data under {}; nothing to check", root.display());
        return;
    }

    let mut totals: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for path in &files {
        let input = std::fs::read_to_string(path).unwrap();
        let relative = path.strip_prefix(&root).unwrap().display().to_string();
        let expected = if relative.starts_with("claude-code") {
            Format::ClaudeCode
        } else if relative.starts_with("mini-swe-agent") {
            Format::MiniSweAgent
        } else {
            Format::SweAgent
        };
        let started = std::time::Instant::now();
        let format = codec::detect(&input).unwrap();
        let detect_time = started.elapsed();
        assert_eq!(format, expected, "{relative}");
        let decoded = codec::decode_as(format, &input).unwrap();
        assert!(
            decoded.issues.is_empty(),
            "{relative}: {:?}",
            decoded.issues
        );

        let messages = &decoded.conversation.messages;
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for message in messages {
            *counts.entry(message.role.name().to_owned()).or_default() += 1;
        }
        let calls: usize = messages.iter().map(|m| m.tool_calls().count()).sum();
        let results: usize = messages.iter().map(|m| m.tool_results().count()).sum();
        let failed: usize = messages
            .iter()
            .flat_map(|m| m.tool_results())
            .filter(|r| r.failed())
            .count();
        counts.insert("tool_calls".into(), calls);
        counts.insert("tool_results".into(), results);
        counts.insert("failed_results".into(), failed);
        counts.insert("ignored_lines".into(), decoded.ignored_lines);

        // Every result answers a call made before it, and call ids are known.
        let mut seen = std::collections::HashSet::new();
        let mut orphans = 0;
        for message in messages {
            for call in message.tool_calls() {
                seen.insert(call.id.clone());
            }
            for result in message.tool_results() {
                if !seen.contains(&result.call_id) {
                    orphans += 1;
                }
            }
        }
        assert_eq!(orphans, 0, "{relative}: results without a call");

        // Claude Code: one assistant message per API call, no two with the same id in a row.
        if format == Format::ClaudeCode {
            let assistants: Vec<_> = messages
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .collect();
            let mut ids: Vec<_> = assistants
                .iter()
                .filter_map(|m| m.meta.id.clone())
                .collect();
            let before = ids.len();
            ids.sort();
            ids.dedup();
            assert_eq!(
                before,
                ids.len(),
                "{relative}: an API call split over messages"
            );
            assert!(assistants.iter().all(|m| m.meta.usage.is_some()));
            let boundaries = messages
                .iter()
                .filter(|m| claude_code::is_compact_boundary(m))
                .count();
            counts.insert("compact_boundaries".into(), boundaries);
            if let Some(last) = messages.iter().rposition(|m| m.role == Role::Assistant) {
                counts.insert(
                    "last_request_start".into(),
                    claude_code::request_start(messages, last),
                );
            }
        }
        let text_chars: usize = messages
            .iter()
            .flat_map(|m| m.content.iter())
            .map(|b| match b {
                Block::Text(t) => t.text.len(),
                Block::ToolResult(r) => r.text_chars(),
                Block::Image(_) | Block::Thinking(_) | Block::ToolCall(_) | Block::Opaque(_) => 0,
            })
            .sum();
        println!(
            "{relative}: {} messages, {text_chars} text chars, detect {detect_time:?}, {counts:?}",
            messages.len()
        );
        let total = totals.entry(format.name().to_owned()).or_default();
        *total.entry("files".into()).or_default() += 1;
        *total.entry("messages".into()).or_default() += messages.len();
        for (key, value) in counts {
            if key != "last_request_start" {
                *total.entry(key).or_default() += value;
            }
        }
    }
    for (format, total) in totals {
        println!("TOTAL {format}: {total:?}");
    }
}
