//! How many real sessions leave memories behind (issue 28, gap 1's measure): every transcript
//! given (files, or the files of directories, one level deep) is imported into an in-memory
//! engine with the default configuration, as `skald import` stores it, and then ended
//! (`Engine::end_session`, what OpenClaw's `session_end`, Claude Code's `SessionEnd` or the idle
//! sweep does). For each it prints the context's estimated size, whether that size ever reaches
//! the two-threshold upload (50 % of the 200k default window) — before session ends, the only
//! automatic way into memory short of a compaction — the archive entries the end wrote (under
//! `viking://session/…`, which search and recall read) and the memories extracted from them
//! (the default extractor, deterministic: stated preferences, "remember" requests, dated
//! events, named people and projects).
//! Then the distribution of the pauses between two timestamped messages of one session: what
//! `[memory] idle_archive_secs` must stay above so that a session being worked on is not
//! archived in the middle.
//!
//! ```text
//! cargo run --release -p skald-engine --example session_end_memories -- \
//!     ../shared/data/trajectories/claude-code ../shared/data/trajectories/mini-swe-agent \
//!     ../shared/data/trajectories/swe-agent
//! ```
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use skald_core::ids::{SessionId, Tenant};
use skald_core::pipeline::policy::Policy;
use skald_core::tokens::estimate_messages_tokens;
use skald_engine::transcripts::ImportOptions;
use skald_engine::{
    DEFAULT_WINDOW_TOKENS, Engine, EngineConfig, ExtractionStatus, SessionEndOutcome,
    SessionEndReason,
};

fn transcripts(arguments: &[String]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for argument in arguments {
        let path = Path::new(argument);
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("cannot list {}", path.display()))?
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.is_file())
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.to_path_buf());
        }
    }
    if files.is_empty() {
        bail!("usage: session_end_memories <transcript files or directories>…");
    }
    Ok(files)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let files = transcripts(&arguments)?;
    let engine = Engine::in_memory(EngineConfig::new(Policy::preset("skald")?))?;
    let tenant = Tenant::parse("measure")?;
    let upload_at = DEFAULT_WINDOW_TOKENS / 2;
    let (mut sessions, mut above_upload, mut archived, mut with_memories, mut memories) =
        (0, 0, 0, 0, 0);
    let mut gaps_ms: Vec<i64> = Vec::new();
    println!(
        "{:<48} {:>6} {:>9} {:>7} {:>8} {:>9}",
        "transcript", "msgs", "tokens", "upload", "archive", "memories"
    );
    for (index, file) in files.iter().enumerate() {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let session = SessionId::parse(format!("t{index}"))?;
        let imported = engine.import(
            &tenant,
            &text,
            &ImportOptions {
                source: Some(file.display().to_string()),
                session_id: Some(session.clone()),
                now_ms: engine.now_ms(),
            },
        );
        if let Err(error) = imported {
            println!("{:<48} not a transcript skald reads: {error}", short(file));
            continue;
        }
        let context = engine.stored_context(&tenant, &session)?;
        let stamps: Vec<i64> = context
            .iter()
            .filter_map(|message| message.meta.timestamp.as_ref()?.millis())
            .collect();
        gaps_ms.extend(
            stamps
                .windows(2)
                .map(|pair| pair[1] - pair[0])
                .filter(|gap| *gap >= 0),
        );
        let tokens = estimate_messages_tokens(&context);
        let reaches_upload = tokens >= upload_at;
        let (archive_entries, extracted) = match engine
            .end_session(&tenant, &session, SessionEndReason::Ended)
            .await?
        {
            SessionEndOutcome::Archived { archive } if archive.status == ExtractionStatus::Done => {
                (archive.archive.len(), archive.memories.len())
            }
            SessionEndOutcome::Archived { archive } => {
                println!(
                    "{:<48} the archive failed: {:?}",
                    short(file),
                    archive.error
                );
                (archive.archive.len(), 0)
            }
            SessionEndOutcome::NothingNew | SessionEndOutcome::MemoryOff => (0, 0),
        };
        archived += usize::from(archive_entries > 0);
        sessions += 1;
        above_upload += usize::from(reaches_upload);
        with_memories += usize::from(extracted > 0);
        memories += extracted;
        println!(
            "{:<48} {:>6} {:>9} {:>7} {:>8} {:>9}",
            short(file),
            context.len(),
            tokens,
            if reaches_upload { "yes" } else { "no" },
            archive_entries,
            extracted
        );
    }
    println!();
    println!(
        "{sessions} sessions: {above_upload} reach the upload threshold ({upload_at} tokens); \
         ended, {archived} leave a searchable archive and {with_memories} extracted memories \
         ({memories} in all)"
    );
    gaps_ms.sort_unstable();
    if !gaps_ms.is_empty() {
        let at = |share: f64| {
            let index = ((gaps_ms.len() as f64 * share).ceil() as usize).clamp(1, gaps_ms.len());
            gaps_ms[index - 1] as f64 / 1000.0
        };
        println!(
            "pauses between messages ({}): p50 {:.1} s, p99 {:.1} s, p99.9 {:.1} s, longest {:.1} s; \
             over 30 min: {}",
            gaps_ms.len(),
            at(0.5),
            at(0.99),
            at(0.999),
            at(1.0),
            gaps_ms.iter().filter(|gap| **gap > 1_800_000).count()
        );
    }
    Ok(())
}

fn short(path: &Path) -> String {
    let name = path
        .file_name()
        .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
    if name.chars().count() > 48 {
        format!("{}…", name.chars().take(47).collect::<String>())
    } else {
        name
    }
}
