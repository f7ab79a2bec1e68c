//! `skald compact`: a manual compaction of a stored session through `skald_engine::compact`,
//! with the summarizer the configuration names (an LLM, else the extractive one), Ctrl-C wired
//! to the engine's cancellation token, and the typed outcome printed. `--compare` hands over to
//! [`crate::compare_cmd`]. After a compaction the compacted span is archived under
//! `viking://session/{id}/archive_NNN` and its memories extracted
//! (`skald_engine::memory_write::archive_compacted_span`; `--no-archive` skips it), with the
//! deterministic extractor unless `--extract-with llm` names the summary model.
//!
//! Exit status: 0 when the session was compacted or the compaction was skipped (nothing to do is
//! not a failure), [`EXIT_CANCELLED`] when work started and was abandoned (the session is
//! unchanged), 130 after Ctrl-C, 1 on errors.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::Value;
use skald_core::compaction::{CancelReason, CompactionOutcome, CompactionTrigger};
use skald_core::memory::write::WriteSettings;
use skald_engine::compact::{CompactRequest, CompactResult, compact_session};
use skald_engine::memory_write::{ArchiveOutcome, MemoryWriter, archive_compacted_span};
use skald_llm::{DeterministicExtractor, LlmExtractor, MemoryExtractor, client_from_config};
use skald_store::SqliteMemoryStore;
use skald_store::sessions::SessionStore;
use skald_store::{DATABASE_FILE, RefSettings, SqliteRefStore};
use tokio_util::sync::CancellationToken;

use crate::compare_cmd;
use crate::config::Config;
use crate::home::Home;
use crate::output::{self, Mode};
use crate::sessions_cmd::open_existing_store;

/// Exit status of a compaction that started and was abandoned (timeout, summarizer failures,
/// quality guard, a context that would not shrink).
pub const EXIT_CANCELLED: u8 = 3;
/// Exit status after Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The session id (`skald sessions` lists them).
    #[arg(
        value_name = "SESSION",
        required_unless_present = "compare",
        conflicts_with = "compare"
    )]
    pub session: Option<String>,
    /// What the summary should focus on (cut to [compaction] max_custom_instructions_chars and
    /// passed to the summarizer as untrusted data).
    #[arg(long, value_name = "TEXT")]
    pub instructions: Option<String>,
    /// The model's context window in tokens (default: [llm] context_window_tokens of the
    /// configuration, else 200000).
    #[arg(long, value_name = "TOKENS")]
    pub window: Option<u64>,
    /// The tenant the session belongs to.
    #[arg(long, default_value = "default")]
    pub tenant: String,
    /// The workspace's AGENTS.md: its "Session Startup" and "Red Lines" sections are appended
    /// to the summary as critical rules.
    #[arg(long, value_name = "FILE")]
    pub agents_md: Option<PathBuf>,
    /// Instead of compacting a stored session, measure the extractive summary against Claude
    /// Code's own compactions: a Claude Code session JSONL (its `<session>/subagents/` folder
    /// holds `agent-acompact-*.jsonl`), or a directory of them.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["instructions", "agents_md"])]
    pub compare: Option<PathBuf>,
    /// With --compare: write every summary compared into this directory
    /// (`<session>.<n>.<summary>.md`).
    #[arg(long, value_name = "DIR", requires = "compare")]
    pub save_summaries: Option<PathBuf>,
    /// Do not archive the compacted span to long-term memory nor extract memories from it.
    #[arg(long, conflicts_with = "compare")]
    pub no_archive: bool,
    /// What extracts memories from the compacted span: `deterministic` (patterns, no LLM) or
    /// `llm` (the model of [llm.summary], else [llm]).
    #[arg(long, value_name = "EXTRACTOR", default_value = "deterministic", value_parser = ["deterministic", "llm"])]
    pub extract_with: String,
    /// The user whose memories are written (`viking://user/{user}/…`; default: [memory] user
    /// in skald.toml, else `default`).
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
}

/// What `skald compact` prints.
#[derive(Debug, Serialize)]
pub struct CompactReport {
    pub session_id: String,
    pub tenant: String,
    /// `compacted`, `skipped` or `cancelled`.
    pub outcome: &'static str,
    /// Why it was skipped or cancelled, for people (`None` when compacted).
    pub reason: Option<String>,
    /// The same reason, typed (`{"kind": "nothing_to_compact"}`…).
    pub reason_detail: Option<Value>,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub summary: Option<String>,
    /// The entry the model sees first after the summary.
    pub first_kept_entry_id: Option<String>,
    /// The compaction entry written (only when compacted).
    pub checkpoint_entry_id: Option<String>,
    /// Entries copied onto a new branch because the kept tail had to be shrunk.
    pub rewritten_entries: usize,
    /// `extractive` or `llm:<model>`.
    pub summarizer: String,
    pub window_tokens: u64,
    /// What the compaction did (stages, calls, quality audit, identifiers, files).
    pub details: Option<Value>,
    /// The archive of the compacted span and the memories extracted from it (also recorded in
    /// the session; a failure is retried by the next archive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_archive: Option<ArchiveOutcome>,
    /// The archive could not even be recorded (the stores failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_error: Option<String>,
}

impl CompactReport {
    fn new(session_id: &str, tenant: &str, window_tokens: u64, result: CompactResult) -> Self {
        let (outcome, reason, reason_detail, summary, details) = match &result.outcome {
            CompactionOutcome::Compacted {
                summary, details, ..
            } => (
                "compacted",
                None,
                None,
                Some(summary.clone()),
                serde_json::to_value(details.as_ref()).ok(),
            ),
            CompactionOutcome::Skipped { reason, .. } => (
                "skipped",
                Some(reason.describe()),
                serde_json::to_value(reason).ok(),
                None,
                None,
            ),
            CompactionOutcome::Cancelled { reason, .. } => (
                "cancelled",
                Some(reason.describe()),
                serde_json::to_value(reason).ok(),
                None,
                None,
            ),
        };
        CompactReport {
            session_id: session_id.to_owned(),
            tenant: tenant.to_owned(),
            outcome,
            reason,
            reason_detail,
            tokens_before: result.outcome.tokens_before(),
            tokens_after: result.outcome.tokens_after(),
            summary,
            first_kept_entry_id: result.first_kept_entry_id,
            checkpoint_entry_id: result.checkpoint_entry_id,
            rewritten_entries: result.rewritten_entries,
            summarizer: result.summarizer,
            window_tokens,
            details,
            memory_archive: None,
            memory_error: None,
        }
    }
}

/// A multi-threaded runtime: the summary call runs on it while a worker waits for Ctrl-C.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Cancels `cancel` on the first Ctrl-C; a second one exits at once, for a summarizer that does
/// not answer its cancellation.
fn cancel_on_ctrl_c(runtime: &tokio::runtime::Runtime, cancel: CancellationToken) {
    runtime.spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        eprintln!("skald: interrupted; abandoning the compaction (Ctrl-C again to quit now)");
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
    });
}

pub fn run(args: &CompactArgs, home: &Home, config: &Config, mode: Mode) -> Result<ExitCode> {
    if let Some(path) = &args.compare {
        return compare_cmd::run(path, args, config, mode);
    }
    let Some(session_id) = args.session.as_deref() else {
        bail!("name the session to compact (`skald sessions` lists them), or use --compare FILE");
    };
    let window_tokens = config.window_tokens(args.window);
    if window_tokens < 1_000 {
        bail!("--window is {window_tokens} tokens: a context window is at least 1000 tokens");
    }
    let agents_md = args
        .agents_md
        .as_ref()
        .map(|path| {
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --agents-md {}", path.display()))
        })
        .transpose()?;
    let sessions = open_existing_store(home)?;
    // An unknown session fails here, before a summarizer (and its key) is even looked at.
    sessions.get(&args.tenant, session_id)?;
    let summarizer = config.summarizer()?;
    let refs_path = home.path.join(DATABASE_FILE);
    let refs = SqliteRefStore::open(&refs_path, RefSettings::default())
        .with_context(|| format!("cannot open the ref store {}", refs_path.display()))?;
    let request = CompactRequest {
        tenant: &args.tenant,
        session_id,
        window_tokens,
        trigger: CompactionTrigger::Manual,
        settings: &config.compaction,
        custom_instructions: args.instructions.as_deref(),
        agents_md: agents_md.as_deref(),
        context_tokens: None,
    };

    let runtime = runtime()?;
    let cancel = CancellationToken::new();
    cancel_on_ctrl_c(&runtime, cancel.clone());
    let spinner = spinner(mode, &format!("compacting with {}", summarizer.name()));
    let result = runtime.block_on(compact_session(
        &sessions,
        &refs,
        summarizer.as_ref(),
        &request,
        &cancel,
    ));
    spinner.finish_and_clear();
    let result = result.with_context(|| format!("cannot compact session {session_id:?}"))?;
    let aborted = matches!(
        &result.outcome,
        CompactionOutcome::Cancelled {
            reason: CancelReason::Aborted,
            ..
        }
    );
    let archive = if result.checkpoint_entry_id.is_some() && !args.no_archive {
        let progress = self::spinner(mode, "archiving the compacted span");
        let archived = archive_span(
            args, home, config, &sessions, session_id, &result, &runtime, &cancel,
        );
        progress.finish_and_clear();
        Some(archived)
    } else {
        None
    };
    let mut report = CompactReport::new(session_id, &args.tenant, window_tokens, result);
    match archive {
        Some(Ok(outcome)) => report.memory_archive = outcome,
        Some(Err(error)) => {
            eprintln!("skald: the compaction was written but its span was not archived: {error:#}");
            report.memory_error = Some(format!("{error:#}"));
        }
        None => {}
    }
    match mode {
        Mode::Json => output::emit(mode, &report, |_| output::table(&[]))?,
        Mode::Table => print!("{}", render(&report)),
    }
    Ok(match report.outcome {
        "cancelled" => {
            eprintln!(
                "skald: compaction cancelled: {}; session {session_id:?} is unchanged",
                report.reason.as_deref().unwrap_or("no reason given")
            );
            ExitCode::from(if aborted {
                EXIT_INTERRUPTED
            } else {
                EXIT_CANCELLED
            })
        }
        _ => ExitCode::SUCCESS,
    })
}

/// Archives the span a compaction replaced and extracts its memories into the memory store in
/// the same database file.
#[allow(clippy::too_many_arguments)]
fn archive_span(
    args: &CompactArgs,
    home: &Home,
    config: &Config,
    sessions: &dyn SessionStore,
    session_id: &str,
    result: &CompactResult,
    runtime: &tokio::runtime::Runtime,
    cancel: &CancellationToken,
) -> Result<Option<ArchiveOutcome>> {
    let extractor: std::sync::Arc<dyn MemoryExtractor> = match args.extract_with.as_str() {
        "llm" => {
            let provider = config.llm.summary_or_chat().context(
                "--extract-with llm needs a model: configure [llm] (or [llm.summary]) in skald.toml",
            )?;
            std::sync::Arc::new(LlmExtractor::new(client_from_config(provider)?))
        }
        _ => std::sync::Arc::new(DeterministicExtractor::default()),
    };
    let path = home.path.join(DATABASE_FILE);
    let memories = SqliteMemoryStore::open(&path)
        .with_context(|| format!("cannot open the memory store {}", path.display()))?;
    let settings = WriteSettings {
        user: args
            .user
            .clone()
            .unwrap_or_else(|| config.memory.user.clone()),
        ..config.memory.write.clone()
    };
    let writer = MemoryWriter::new(std::sync::Arc::new(memories), extractor, settings)?;
    Ok(runtime.block_on(archive_compacted_span(
        sessions,
        &writer,
        &args.tenant,
        session_id,
        result,
        None,
        cancel,
    ))?)
}

/// A spinner on stderr while work runs, only for a person at a terminal.
pub fn spinner(mode: Mode, message: &str) -> ProgressBar {
    if mode == Mode::Json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let spinner = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    spinner.set_message(message.to_owned());
    spinner.enable_steady_tick(Duration::from_millis(120));
    spinner
}

/// The terminal form: the outcome as a two-column table, then the summary.
fn render(report: &CompactReport) -> String {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    let dash = || "-".to_owned();
    let rows = [
        ("session", report.session_id.clone()),
        ("outcome", report.outcome.to_owned()),
        ("reason", report.reason.clone().unwrap_or_else(dash)),
        (
            "tokens",
            format!("{} -> {}", report.tokens_before, report.tokens_after),
        ),
        ("summarizer", report.summarizer.clone()),
        (
            "checkpoint entry",
            report.checkpoint_entry_id.clone().unwrap_or_else(dash),
        ),
        (
            "first kept entry",
            report.first_kept_entry_id.clone().unwrap_or_else(dash),
        ),
    ];
    for (name, value) in rows {
        table.add_row(vec![name.to_owned(), value]);
    }
    if report.rewritten_entries > 0 {
        table.add_row(vec![
            "tail rewritten".to_owned(),
            format!(
                "{} entries on a new branch (largest tool results truncated, originals in the \
                 ref store)",
                report.rewritten_entries
            ),
        ]);
    }
    if let Some(archive) = &report.memory_archive {
        let uris: Vec<&str> = archive.archive.iter().map(|uri| uri.as_str()).collect();
        table.add_row(vec![
            "archive".to_owned(),
            if uris.is_empty() {
                "-".to_owned()
            } else {
                uris.join("\n")
            },
        ]);
        let memories = match (&archive.error, archive.memories.len()) {
            (Some(error), _) => format!("extraction failed (recorded, retried next time): {error}"),
            (None, count) => format!("{count} written by {}", archive.extractor),
        };
        table.add_row(vec!["memories".to_owned(), memories]);
    }
    let mut out = format!("{table}\n");
    if let Some(summary) = &report.summary {
        out.push_str(&format!("\n--- summary ---\n{}\n", summary.trim_end()));
    }
    out
}
