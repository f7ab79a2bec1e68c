//! `skald compact --compare`: skald's extractive compaction against Claude Code's own, at the
//! point where Claude Code compacted a real session.
//!
//! A Claude Code session marks each compaction with a `compact_boundary` line; the span the model
//! saw before it (from the previous boundary) is what was compacted, and
//! `<session>/subagents/agent-acompact-*.jsonl` holds Claude Code's compaction prompt and the
//! summary its model wrote (the `isCompactSummary` line after the boundary is that summary as
//! injected, used when no acompact file matches). For each boundary this module summarises the
//! same span with the extractive summarizer — at Claude Code's summary length, and through the
//! real `compact_session` path on an in-memory store at skald's default budget — and measures
//! each summary: length in tokens (chars/4 estimate and o200k BPE), the share of the span's
//! distinct exact identifiers it keeps verbatim, and which of the five required sections it has.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::Value;
use skald_core::codec::claude_code::{self, is_compact_boundary, request_start};
use skald_core::codec::{self, Format};
use skald_core::compaction::{CompactionOutcome, CompactionSettings, CompactionTrigger};
use skald_core::extractive::{ExtractiveInput, span_text, summarize};
use skald_core::identifiers::{extract_identifiers, mentions_identifier};
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Message, Role};
use skald_core::pipeline::policy::Policy;
use skald_core::summary::{REQUIRED_SECTIONS, missing_sections};
use skald_core::tokens::bpe::Encoding;
use skald_core::tokens::{CHARS_PER_TOKEN, estimate_messages_tokens, estimate_string_chars};
use skald_engine::{CompactInput, Engine, EngineConfig};
use tokio_util::sync::CancellationToken;

use crate::compact_cmd::{CompactArgs, runtime};
use crate::config::Config;
use crate::local;
use crate::output::{self, Mode};

/// The prefix of Claude Code's compaction agent transcripts in `<session>/subagents/`.
const ACOMPACT_PREFIX: &str = "agent-acompact-";

/// The tenant and session of the throwaway in-memory store the engine path runs on.
const SCRATCH_TENANT: &str = "compare";
const SCRATCH_SESSION: &str = "compare";

/// One compaction of one Claude Code session, measured.
#[derive(Debug, Serialize)]
pub struct CompareReport {
    /// The session's file name without `.jsonl`.
    pub session: String,
    pub file: String,
    /// 1 for the session's first compaction, 2 for the second…
    pub compaction: usize,
    /// `auto` or `manual`, as Claude Code recorded it.
    pub trigger: Option<String>,
    /// The context size Claude Code reported when it compacted.
    pub claude_pre_tokens: Option<u64>,
    pub span: SpanReport,
    /// Claude Code's summary, then ours.
    pub summaries: Vec<SummaryReport>,
}

/// What was compacted.
#[derive(Debug, Serialize)]
pub struct SpanReport {
    /// Index of the first message of the span in the decoded transcript.
    pub start: usize,
    /// Index of the `compact_boundary` (the span ends just before it).
    pub end: usize,
    /// Messages a model sees in the span.
    pub messages: usize,
    /// chars/4 estimate of the span's messages (`details` excluded).
    pub estimated_tokens: u64,
    /// Distinct exact identifiers in the span's text.
    pub identifiers: usize,
}

/// One summary of the span, measured.
#[derive(Debug, Serialize)]
pub struct SummaryReport {
    /// `claude_code`, `extractive_same_length` or `extractive_engine`.
    pub name: &'static str,
    /// Claude Code's: `acompact` (its compaction agent's answer) or `injected` (the summary line
    /// after the boundary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
    /// The extractive summary's character budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_chars: Option<usize>,
    /// The engine path's outcome (`compacted`, `skipped`, `cancelled`) and its reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The engine path's context before and after (the kept recent turns stay verbatim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_tokens_before: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_tokens_after: Option<u64>,
    /// Messages the engine summarised and kept verbatim after the summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summarized_messages: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preserved_messages: Option<usize>,
    /// Identifiers the whole context after the engine's compaction keeps (summary and kept
    /// turns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identifiers_kept_in_context: Option<usize>,
    pub chars: usize,
    /// chars/4, CJK-weighted (skald's estimate).
    pub tokens_estimate: u64,
    /// BPE tokens (o200k_base).
    pub tokens_o200k: u64,
    pub identifiers_kept: usize,
    /// `identifiers_kept / span.identifiers` (`None` when the span has none).
    pub identifiers_share: Option<f64>,
    /// The required sections present, in order.
    pub sections: Vec<&'static str>,
    pub missing_sections: Vec<&'static str>,
    /// The summary itself (`--save-summaries` writes it; too long for the report).
    #[serde(skip)]
    pub text: String,
}

impl SummaryReport {
    fn measure(name: &'static str, summary: &str, identifiers: &[String]) -> SummaryReport {
        let kept = kept_identifiers(summary, identifiers);
        let missing = missing_sections(summary);
        SummaryReport {
            name,
            source: None,
            budget_chars: None,
            outcome: None,
            reason: None,
            context_tokens_before: None,
            context_tokens_after: None,
            summarized_messages: None,
            preserved_messages: None,
            identifiers_kept_in_context: None,
            chars: summary.chars().count(),
            tokens_estimate: estimate_string_chars(summary).div_ceil(CHARS_PER_TOKEN) as u64,
            tokens_o200k: Encoding::O200kBase.count_text(summary),
            identifiers_kept: kept,
            identifiers_share: share(kept, identifiers.len()),
            sections: REQUIRED_SECTIONS
                .iter()
                .copied()
                .filter(|heading| !missing.contains(heading))
                .collect(),
            missing_sections: missing,
            text: summary.to_owned(),
        }
    }
}

fn kept_identifiers(text: &str, identifiers: &[String]) -> usize {
    identifiers
        .iter()
        .filter(|identifier| mentions_identifier(text, identifier))
        .count()
}

/// `part / whole`, rounded to four decimals so reports are stable.
fn share(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| (part as f64 / whole as f64 * 10_000.0).round() / 10_000.0)
}

pub fn run(path: &Path, args: &CompactArgs, config: &Config, mode: Mode) -> Result<ExitCode> {
    let window_tokens = config.window_tokens(args.window);
    if window_tokens < 1_000 {
        bail!("--window is {window_tokens} tokens: a context window is at least 1000 tokens");
    }
    let files = session_files(path)?;
    let runtime = runtime()?;
    let progress = progress_bar(mode, files.len());
    let mut reports = Vec::new();
    for file in &files {
        progress.set_message(file_stem(file));
        let found = compare_file(file, &config.compaction, window_tokens, &runtime)
            .with_context(|| format!("cannot compare {}", file.display()))?;
        if found.is_empty() && files.len() == 1 {
            bail!(
                "{} has no compact_boundary line: Claude Code never compacted this session",
                file.display()
            );
        }
        reports.extend(found);
        progress.inc(1);
    }
    progress.finish_and_clear();
    if let Some(dir) = &args.save_summaries {
        save_summaries(dir, &reports)?;
    }
    output::emit(mode, &reports, |reports| render_table(reports))?;
    Ok(ExitCode::SUCCESS)
}

/// The transcripts to compare: the file itself, or every `*.jsonl` of a directory whose
/// `<stem>/subagents/` holds an acompact file.
fn session_files(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !path.is_dir() {
        bail!("--compare {}: no such file or directory", path.display());
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("cannot read the directory {}", path.display()))?
        .flatten()
        .map(|entry| entry.path())
        .filter(|file| file.extension().is_some_and(|ext| ext == "jsonl") && file.is_file())
        .filter(|file| !acompact_files(file).is_empty())
        .collect();
    files.sort();
    if files.is_empty() {
        bail!(
            "{} holds no Claude Code session with a <session>/subagents/{ACOMPACT_PREFIX}*.jsonl \
             file",
            path.display()
        );
    }
    Ok(files)
}

fn file_stem(file: &Path) -> String {
    file.file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `<dir>/<stem>/subagents/agent-acompact-*.jsonl` of a transcript `<dir>/<stem>.jsonl`.
fn acompact_files(transcript: &Path) -> Vec<PathBuf> {
    let subagents = transcript.with_extension("").join("subagents");
    let Ok(entries) = std::fs::read_dir(&subagents) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|file| {
            file.file_name().is_some_and(|name| {
                let name = name.to_string_lossy();
                name.starts_with(ACOMPACT_PREFIX) && name.ends_with(".jsonl")
            })
        })
        .collect();
    files.sort();
    files
}

/// Claude Code's compaction agent's answer (its summary) and when it finished.
struct AgentSummary {
    text: String,
    finished_ms: Option<i64>,
}

fn read_agent_summary(file: &Path) -> Result<Option<AgentSummary>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let decoded = claude_code::decode(&text)
        .with_context(|| format!("{} is not a Claude Code transcript", file.display()))?;
    Ok(decoded
        .conversation
        .messages
        .iter()
        .rev()
        .find(|message| message.role == Role::Assistant)
        .map(|answer| AgentSummary {
            text: answer.plain_text().trim().to_owned(),
            finished_ms: answer
                .meta
                .timestamp
                .as_ref()
                .and_then(|timestamp| timestamp.millis()),
        })
        .filter(|summary| !summary.text.is_empty()))
}

/// The agent summary written for the boundary at `boundary_ms`: the latest one that finished
/// before it (the boundary is written once the summary is back), or the first unused one when
/// times are missing.
fn take_agent_summary(
    summaries: &mut Vec<AgentSummary>,
    boundary_ms: Option<i64>,
) -> Option<AgentSummary> {
    let index = match boundary_ms {
        Some(boundary) => summaries
            .iter()
            .enumerate()
            .filter(|(_, summary)| summary.finished_ms.is_none_or(|done| done <= boundary))
            .max_by_key(|(_, summary)| summary.finished_ms)
            .map(|(index, _)| index),
        None => (!summaries.is_empty()).then_some(0),
    }?;
    (index < summaries.len()).then(|| summaries.remove(index))
}

/// Every compaction of one transcript, measured.
fn compare_file(
    file: &Path,
    settings: &CompactionSettings,
    window_tokens: u64,
    runtime: &tokio::runtime::Runtime,
) -> Result<Vec<CompareReport>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    match codec::detect(&text) {
        Ok(Format::ClaudeCode) => {}
        Ok(other) => bail!("this is {} input, not a Claude Code session", other.name()),
        Err(error) => bail!("not a Claude Code session: {error}"),
    }
    let decoded = claude_code::decode(&text).context("not a Claude Code session")?;
    let messages = decoded.conversation.messages;
    let mut agent_summaries = Vec::new();
    for acompact in acompact_files(file) {
        agent_summaries.extend(read_agent_summary(&acompact)?);
    }
    agent_summaries.sort_by_key(|summary| summary.finished_ms);

    let boundaries: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, message)| is_compact_boundary(message))
        .map(|(index, _)| index)
        .collect();
    let mut reports = Vec::new();
    for (number, &boundary) in boundaries.iter().enumerate() {
        let Some(marker) = messages.get(boundary) else {
            continue;
        };
        let start = request_start(&messages, boundary);
        let span = messages.get(start..boundary).unwrap_or_default();
        let boundary_ms = marker
            .meta
            .timestamp
            .as_ref()
            .and_then(|timestamp| timestamp.millis());
        let (claude_text, source) = match take_agent_summary(&mut agent_summaries, boundary_ms) {
            Some(agent) => (agent.text, "acompact"),
            None => match injected_summary(&messages, boundary) {
                Some(injected) => (injected, "injected"),
                None => continue,
            },
        };
        let metadata = marker.extra.get("compactMetadata");
        let identifiers = extract_identifiers(&span_text(span));
        let mut claude = SummaryReport::measure("claude_code", &claude_text, &identifiers);
        claude.source = Some(source);

        let budget_chars = claude_text.chars().count();
        let ours = summarize(
            span,
            &ExtractiveInput {
                max_chars: budget_chars,
                ..ExtractiveInput::default()
            },
        );
        let mut same_length = SummaryReport::measure("extractive_same_length", &ours, &identifiers);
        same_length.budget_chars = Some(budget_chars);

        let engine = runtime.block_on(engine_summary(span, settings, window_tokens))?;
        let mut engine_report = SummaryReport::measure(
            "extractive_engine",
            engine.summary.as_deref().unwrap_or_default(),
            &identifiers,
        );
        engine_report.outcome = Some(engine.outcome);
        engine_report.reason = engine.reason;
        engine_report.context_tokens_before = Some(engine.tokens_before);
        engine_report.context_tokens_after = Some(engine.tokens_after);
        engine_report.summarized_messages = engine.summarized_messages;
        engine_report.preserved_messages = engine.preserved_messages;
        engine_report.identifiers_kept_in_context =
            Some(kept_identifiers(&engine.context_text, &identifiers));

        let visible: Vec<Message> = span
            .iter()
            .filter(|message| message.is_model_visible())
            .cloned()
            .collect();
        reports.push(CompareReport {
            session: file_stem(file),
            file: file.display().to_string(),
            compaction: number + 1,
            trigger: metadata
                .and_then(|metadata| metadata.get("trigger"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            claude_pre_tokens: metadata
                .and_then(|metadata| metadata.get("preTokens"))
                .and_then(Value::as_u64),
            span: SpanReport {
                start,
                end: boundary,
                messages: visible.len(),
                estimated_tokens: estimate_messages_tokens(&visible),
                identifiers: identifiers.len(),
            },
            summaries: vec![claude, same_length, engine_report],
        });
    }
    Ok(reports)
}

/// The summary Claude Code injected after the boundary (its first user line).
fn injected_summary(messages: &[Message], boundary: usize) -> Option<String> {
    messages
        .get(boundary + 1..)?
        .iter()
        .take_while(|message| !is_compact_boundary(message))
        .find(|message| message.role == Role::User)
        .map(|message| message.plain_text().trim().to_owned())
}

/// What the real compaction path made of the span.
struct EngineSummary {
    outcome: &'static str,
    reason: Option<String>,
    summary: Option<String>,
    tokens_before: u64,
    tokens_after: u64,
    summarized_messages: Option<usize>,
    preserved_messages: Option<usize>,
    /// The text of the whole context after compacting (summary and kept turns).
    context_text: String,
}

/// A manual compaction of the span, stored as a session of an in-memory engine, through
/// [`Engine::compact`] with the extractive summarizer and the configured settings.
async fn engine_summary(
    span: &[Message],
    settings: &CompactionSettings,
    window_tokens: u64,
) -> Result<EngineSummary> {
    let mut config = EngineConfig::new(Policy::preset("skald")?);
    config.compaction = settings.clone();
    config.window_tokens = window_tokens;
    config.memory.enabled = false;
    let engine = Engine::in_memory(config)?;
    let (tenant, session) = (
        Tenant::parse(SCRATCH_TENANT)?,
        SessionId::parse(SCRATCH_SESSION)?,
    );
    let visible: Vec<Message> = span
        .iter()
        .filter(|message| message.is_model_visible())
        .cloned()
        .collect();
    engine
        .ingest(&tenant, &session, visible)
        .await
        .map_err(local::store_error)?;
    let input = CompactInput {
        window_tokens: Some(window_tokens),
        trigger: CompactionTrigger::Manual,
        custom_instructions: None,
        agents_md: None,
        context_tokens: None,
        archive: false,
    };
    let result = engine
        .compact(&tenant, &session, &input, &CancellationToken::new())
        .await
        .map_err(local::store_error)?
        .result;
    let after = engine
        .stored_context(&tenant, &session)
        .map_err(local::store_error)?;
    let (outcome, reason, summary, counts) = match &result.outcome {
        CompactionOutcome::Compacted {
            summary, details, ..
        } => (
            "compacted",
            None,
            Some(summary.clone()),
            Some((
                details.summarized_messages + details.dropped_messages,
                details.preserved_messages,
            )),
        ),
        CompactionOutcome::Skipped { reason, .. } => {
            ("skipped", Some(reason.describe()), None, None)
        }
        CompactionOutcome::Cancelled { reason, .. } => {
            ("cancelled", Some(reason.describe()), None, None)
        }
    };
    Ok(EngineSummary {
        outcome,
        reason,
        summary,
        tokens_before: result.outcome.tokens_before(),
        tokens_after: result.outcome.tokens_after(),
        summarized_messages: counts.map(|(summarized, _)| summarized),
        preserved_messages: counts.map(|(_, preserved)| preserved),
        context_text: span_text(&after),
    })
}

/// Writes every summary compared as `<session>.<n>.<name>.md`.
fn save_summaries(dir: &Path, reports: &[CompareReport]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for report in reports {
        for summary in &report.summaries {
            let out = dir.join(format!(
                "{}.{}.{}.md",
                report.session, report.compaction, summary.name
            ));
            std::fs::write(&out, &summary.text)
                .with_context(|| format!("cannot write {}", out.display()))?;
        }
    }
    Ok(())
}

fn progress_bar(mode: Mode, sessions: usize) -> ProgressBar {
    if mode == Mode::Json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    ProgressBar::new(sessions as u64).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    )
}

fn render_table(reports: &[CompareReport]) -> comfy_table::Table {
    let mut table = output::table(&[
        "session",
        "summary",
        "tokens (chars/4)",
        "tokens (o200k)",
        "identifiers kept",
        "sections",
    ]);
    for report in reports {
        let session = format!(
            "{} #{} ({}, {} msgs, ~{} tok, {} ids)",
            report.session.chars().take(8).collect::<String>(),
            report.compaction,
            report.trigger.as_deref().unwrap_or("?"),
            report.span.messages,
            report.span.estimated_tokens,
            report.span.identifiers
        );
        for summary in &report.summaries {
            let name = match (summary.name, summary.source, summary.outcome) {
                ("claude_code", Some(source), _) => format!("Claude Code ({source})"),
                ("extractive_same_length", ..) => "extractive, Claude Code's length".to_owned(),
                ("extractive_engine", _, Some(outcome)) => format!(
                    "extractive, engine default: {outcome}, context {} -> {} tok, {} ids kept \
                     in context",
                    summary.context_tokens_before.unwrap_or(0),
                    summary.context_tokens_after.unwrap_or(0),
                    summary.identifiers_kept_in_context.unwrap_or(0)
                ),
                (name, ..) => name.to_owned(),
            };
            table.add_row(vec![
                session.clone(),
                name,
                summary.tokens_estimate.to_string(),
                summary.tokens_o200k.to_string(),
                format!(
                    "{}/{} ({:.1}%)",
                    summary.identifiers_kept,
                    report.span.identifiers,
                    summary.identifiers_share.unwrap_or(0.0) * 100.0
                ),
                format!("{}/{}", summary.sections.len(), REQUIRED_SECTIONS.len()),
            ]);
        }
    }
    table
}
