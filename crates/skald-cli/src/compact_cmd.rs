//! `skald compact`: a manual compaction of a stored session through `Engine::compact` (the
//! server's compact route makes the same call), with the summarizer the configuration names (an
//! LLM, else the extractive one), Ctrl-C wired to the engine's cancellation token, and the typed
//! outcome printed. `--compare` hands over to [`crate::compare_cmd`]. After a compaction the
//! compacted span is archived under `viking://session/{id}/archive_NNN` and its memories
//! extracted (`Engine::compact` with `archive`; `--no-archive` skips it),
//! with the deterministic extractor unless `--extract-with llm` names the summary model (the
//! engine's `EngineConfig::extractor`).
//!
//! Exit status: 0 when the session was compacted or the compaction was skipped (nothing to do is
//! not a failure), [`EXIT_CANCELLED`] when work started and was abandoned (the session is
//! unchanged), [`EXIT_OVER_TARGET`] when the history was replaced but the context is still over
//! `window − reserve`, 130 after Ctrl-C, 1 on errors.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use serde_json::json;
use skald_core::compaction::{CancelReason, CompactionOutcome, CompactionTrigger};
use skald_core::memory::write::WriteSettings;
use skald_engine::CompactInput;
use skald_engine::{CompactReport, MemoryWriteError};
use skald_llm::{DeterministicExtractor, LlmExtractor, MemoryExtractor, client_from_config};
use tokio_util::sync::CancellationToken;

use crate::compare_cmd;
use crate::config::Config;
use crate::home::Home;
use crate::local::{self, Models, StoreKind, StoreLocation};
use crate::output::{self, Mode};
use crate::remote::{self, Remote};

/// Exit status of a compaction that started and was abandoned (timeout, summarizer failures,
/// quality guard, a context that would not shrink).
pub const EXIT_CANCELLED: u8 = 3;
/// Exit status of a compaction that replaced the history but left the context over
/// `window − reserve` (the kept turns, the summary and the prefix take more even when shrunk).
pub const EXIT_OVER_TARGET: u8 = 4;
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
    /// The tenant the session belongs to (default: default; with --url the key's).
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
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
    /// What extracts memories from the compacted span: `deterministic` (patterns, no LLM; the
    /// default) or `llm` (the model of [llm.summary], else [llm]).
    #[arg(long, value_name = "EXTRACTOR", value_parser = ["deterministic", "llm"])]
    pub extract_with: Option<String>,
    /// The user whose memories are written (`viking://user/{user}/…`; default: [memory] user
    /// in skald.toml, else `default`).
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
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

/// The server's compact answer, as far as `compact` reads it.
#[derive(Debug, Deserialize)]
struct CompactAnswer {
    report: CompactReport,
}

pub fn run(
    args: &CompactArgs,
    home: &Home,
    config: Option<&Config>,
    remote: Option<&Remote>,
    mode: Mode,
) -> Result<ExitCode> {
    let missing_session = || {
        anyhow::anyhow!(
            "name the session to compact (`skald sessions` lists them), or use --compare FILE"
        )
    };
    if let Some(remote) = remote {
        if args.compare.is_some() {
            bail!(
                "--compare measures transcript files on this machine and uses no store; drop \
                 --url (or unset SKALD_URL)"
            );
        }
        let session_id = args.session.as_deref().ok_or_else(missing_session)?;
        return compact_remote(args, session_id, remote, mode);
    }
    let Some(config) = config else {
        bail!("the configuration was not loaded");
    };
    if let Some(path) = &args.compare {
        return compare_cmd::run(path, args, config, mode);
    }
    let session_id = args.session.as_deref().ok_or_else(missing_session)?;
    let tenant = local::tenant_arg(args.tenant.as_deref())?;
    let session = local::session_arg(session_id, "SESSION")?;
    let window_tokens = config.window_tokens(args.window);
    if window_tokens < 1_000 {
        bail!("--window is {window_tokens} tokens: a context window is at least 1000 tokens");
    }
    let agents_md = read_agents_md(args)?;
    let location = StoreLocation::of(config);
    local::require_session_store(home, &location)?;
    let stores = local::open_stores(home, &location, StoreKind::Sessions, &config.refs)?;
    // An unknown session fails here, before a summarizer (and its key) is even looked at.
    stores.sessions.get(&tenant, &session)?;
    let models = Models {
        summarizer: true,
        // The archive's memories are written without vectors, as they always were here.
        embedder: false,
    };
    let mut engine_config = local::engine_config(config, args.window, true, models)?;
    // What archives the span is settled before the compaction, so a bad memory setting is known
    // first; it does not stop the compaction (the report says the span was not archived).
    let archive = (!args.no_archive).then(|| span_archive(args, config));
    if let Some(Ok((extractor, settings))) = &archive {
        engine_config.extractor = extractor.clone();
        // The engine writes the memories of its `[memory]` user: `--user`'s.
        engine_config.memory.user = settings.user.clone();
        engine_config.memory.write = settings.clone();
    }
    let engine = local::engine(stores, engine_config)?;
    let input = CompactInput {
        window_tokens: Some(window_tokens),
        trigger: CompactionTrigger::Manual,
        custom_instructions: args.instructions.clone(),
        agents_md,
        context_tokens: None,
        archive: matches!(archive, Some(Ok(_))),
    };

    let runtime = runtime()?;
    let cancel = CancellationToken::new();
    cancel_on_ctrl_c(&runtime, cancel.clone());
    let spinner = spinner(
        mode,
        &format!("compacting with {}", engine.config().summarizer.name()),
    );
    let compaction = runtime.block_on(engine.compact(&tenant, &session, &input, &cancel));
    spinner.finish_and_clear();
    let compaction =
        compaction.with_context(|| format!("cannot compact session {session_id:?}"))?;
    let aborted = matches!(
        &compaction.result.outcome,
        CompactionOutcome::Cancelled {
            reason: CancelReason::Aborted,
            ..
        }
    );
    let mut report = compaction.report(&session, &tenant, window_tokens);
    if let (Some(Err(error)), Some(_)) = (&archive, &compaction.result.checkpoint_entry_id) {
        report.memory_error = Some(format!("{error:#}"));
    }
    if let Some(error) = &report.memory_error {
        eprintln!("skald: the compaction was written but its span was not archived: {error}");
    }
    print(&report, aborted, mode)
}

/// Compacts the session on the server (`POST /v1/sessions/{id}/compact`, forced as a manual
/// compaction is), which summarises with its own summarizer and archives with its own memory
/// settings.
fn compact_remote(
    args: &CompactArgs,
    session_id: &str,
    remote: &Remote,
    mode: Mode,
) -> Result<ExitCode> {
    remote::refuse("--tenant", args.tenant.is_some(), remote::TENANT_FROM_KEY)?;
    let server_memory = "the server archives and extracts with its own [memory] settings";
    remote::refuse("--extract-with", args.extract_with.is_some(), server_memory)?;
    remote::refuse("--user", args.user.is_some(), server_memory)?;
    let agents_md = read_agents_md(args)?;
    let mut body = json!({"force": true, "archive": !args.no_archive});
    if let Some(window) = args.window {
        if window < 1_000 {
            bail!("--window is {window} tokens: a context window is at least 1000 tokens");
        }
        body["tokenBudget"] = json!(window);
    }
    if let Some(instructions) = &args.instructions {
        body["customInstructions"] = json!(instructions);
    }
    if let Some(agents_md) = agents_md {
        body["agentsMd"] = json!(agents_md);
    }
    let spinner = spinner(mode, &format!("compacting on {}", remote.base()));
    let answer = remote.post::<_, CompactAnswer>(&["v1", "sessions", session_id, "compact"], &body);
    spinner.finish_and_clear();
    let answer = answer.with_context(|| format!("cannot compact session {session_id:?}"))?;
    if let Some(error) = &answer.report.memory_error {
        eprintln!("skald: the compaction was written but its span was not archived: {error}");
    }
    print(&answer.report, false, mode)
}

/// Prints the report; the exit status says whether the compaction was cancelled.
fn print(report: &CompactReport, aborted: bool, mode: Mode) -> Result<ExitCode> {
    match mode {
        Mode::Json => output::emit(mode, report, |_| output::table(&[]))?,
        Mode::Table => print!("{}", render(report)),
    }
    if report.outcome == "compacted_over_target" {
        eprintln!(
            "skald: compacted, but not to target: {}",
            report.reason.as_deref().unwrap_or("no reason given")
        );
        return Ok(ExitCode::from(EXIT_OVER_TARGET));
    }
    if !report.cancelled() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "skald: compaction cancelled: {}; session {:?} is unchanged",
        report.reason.as_deref().unwrap_or("no reason given"),
        report.session_id
    );
    Ok(ExitCode::from(if aborted {
        EXIT_INTERRUPTED
    } else {
        EXIT_CANCELLED
    }))
}

/// The content of --agents-md, if given.
fn read_agents_md(args: &CompactArgs) -> Result<Option<String>> {
    args.agents_md
        .as_ref()
        .map(|path| {
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --agents-md {}", path.display()))
        })
        .transpose()
}

/// What archives the span a compaction replaced and extracts its memories: the extractor
/// `--extract-with` names, and the `[memory.write]` settings for `--user` (checked here, as the
/// engine's writer would check them).
fn span_archive(
    args: &CompactArgs,
    config: &Config,
) -> Result<(Arc<dyn MemoryExtractor>, WriteSettings)> {
    let extractor: Arc<dyn MemoryExtractor> = match args.extract_with.as_deref() {
        Some("llm") => {
            let provider = config.llm.summary_or_chat().context(
                "--extract-with llm needs a model: configure [llm] (or [llm.summary]) in skald.toml",
            )?;
            Arc::new(LlmExtractor::new(client_from_config(provider)?))
        }
        Some(_) | None => Arc::new(DeterministicExtractor::default()),
    };
    let settings = WriteSettings {
        user: args
            .user
            .clone()
            .unwrap_or_else(|| config.memory.user.clone()),
        ..config.memory.write.clone()
    };
    settings.validate().map_err(MemoryWriteError::from)?;
    Ok((extractor, settings))
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
        ("outcome", report.outcome.clone()),
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
