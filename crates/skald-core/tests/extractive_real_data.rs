//! Ad-hoc measure on the real Claude Code sessions in the shared data folder (not part of the
//! project): at the point where Claude Code compacted each session, the extractive summary of
//! the compacted span against Claude Code's own summary — length (estimated tokens), share of
//! the span's exact identifiers kept verbatim, and which of the five required sections each has.
//! Ignored by default; run
//! `cargo test -p skald-core --test extractive_real_data -- --ignored --nocapture`
//! (`SKALD_SHARED_DATA` overrides the data folder). The summaries are written next to the test
//! binary's temporary folder for reading.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use skald_core::codec::{self, claude_code};
use skald_core::extractive::{ExtractiveInput, span_text, summarize};
use skald_core::identifiers::{extract_identifiers, mentions_identifier};
use skald_core::message::{Message, Role};
use skald_core::summary::{REQUIRED_SECTIONS, missing_sections};
use skald_core::tokens::{CHARS_PER_TOKEN, estimate_string_chars};

fn data_dir() -> PathBuf {
    std::env::var_os("SKALD_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"))
}

struct Measure {
    tokens: usize,
    kept: usize,
    sections: usize,
}

fn measure(summary: &str, identifiers: &[String]) -> Measure {
    Measure {
        tokens: estimate_string_chars(summary).div_ceil(CHARS_PER_TOKEN),
        kept: identifiers
            .iter()
            .filter(|id| mentions_identifier(summary, id))
            .count(),
        sections: REQUIRED_SECTIONS.len() - missing_sections(summary).len(),
    }
}

fn row(name: &str, m: &Measure, total: usize) -> String {
    format!(
        "{name:<34} {:>7} {:>5}/{:<5} {:>6.1}% {:>5}/5",
        m.tokens,
        m.kept,
        total,
        100.0 * m.kept as f64 / total.max(1) as f64,
        m.sections
    )
}

/// Claude Code's summary as the model saw it after the boundary, and the compacted span.
fn compaction_point(messages: &[Message]) -> Option<(usize, usize, String)> {
    let boundary = messages.iter().position(claude_code::is_compact_boundary)?;
    let start = claude_code::request_start(messages, boundary);
    let summary = messages
        .get(boundary + 1..)?
        .iter()
        .find(|message| message.role == Role::User)?
        .plain_text();
    Some((start, boundary, summary))
}

#[test]
#[ignore = "reads the shared real-data folder"]
fn extractive_summary_against_claude_code_compactions() {
    let root = data_dir().join("trajectories/claude-code");
    let mut sessions: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("claude-code data folder")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.join("subagents").is_dir())
        .collect();
    sessions.sort();
    assert!(
        !sessions.is_empty(),
        "no Claude Code session with subagents"
    );
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("extractive_real_data");
    std::fs::create_dir_all(&out_dir).unwrap();

    println!(
        "{:<34} {:>7} {:>11} {:>7} {:>7}",
        "summary", "tokens", "ids kept", "share", "sections"
    );
    for dir in sessions {
        let transcript = dir.with_extension("jsonl");
        let Ok(text) = std::fs::read_to_string(&transcript) else {
            continue;
        };
        let decoded = codec::decode(&text).unwrap();
        let messages = decoded.conversation.messages;
        let Some((start, boundary, claude_summary)) = compaction_point(&messages) else {
            continue;
        };
        let span = messages.get(start..boundary).unwrap();
        let identifiers = extract_identifiers(&span_text(span));
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        println!(
            "-- {name}: messages {start}..{boundary}, {} distinct identifiers",
            identifiers.len()
        );

        // Claude Code's compaction agent output (analysis included) for reference.
        let agent_output = std::fs::read_dir(dir.join("subagents"))
            .unwrap()
            .flatten()
            .map(|entry| entry.path())
            .find(|path| {
                path.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("agent-acompact-"))
            })
            .and_then(|path| std::fs::read_to_string(path).ok())
            .and_then(|text| codec::decode(&text).ok())
            .and_then(|decoded| {
                decoded
                    .conversation
                    .messages
                    .iter()
                    .rev()
                    .find(|message| message.role == Role::Assistant)
                    .map(Message::plain_text)
            })
            .unwrap_or_default();

        let claude = measure(&claude_summary, &identifiers);
        println!(
            "{}",
            row("claude code (as injected)", &claude, identifiers.len())
        );
        if !agent_output.is_empty() {
            let agent = measure(&agent_output, &identifiers);
            println!(
                "{}",
                row("claude code (agent output)", &agent, identifiers.len())
            );
        }

        let same_length = claude_summary.chars().count();
        for (label, max_chars) in [
            ("extractive, same length", same_length),
            ("extractive, half length", same_length / 2),
            ("extractive, quarter length", same_length / 4),
        ] {
            let input = ExtractiveInput {
                max_chars,
                ..ExtractiveInput::default()
            };
            let ours = summarize(span, &input);
            assert!(ours.chars().count() <= max_chars, "{label}: over budget");
            assert_eq!(ours, summarize(span, &input), "{label}: not deterministic");
            let m = measure(&ours, &identifiers);
            println!("{}", row(label, &m, identifiers.len()));
            assert_eq!(m.sections, 5, "{label}: sections missing");
            if max_chars == same_length {
                assert!(
                    m.kept > claude.kept,
                    "{name}: ours kept {} identifiers, Claude Code {}",
                    m.kept,
                    claude.kept
                );
            }
            let file = out_dir.join(format!("{name}.{}.md", max_chars));
            std::fs::write(&file, &ours).unwrap();
        }
    }
    println!("summaries written under {}", out_dir.display());
}
