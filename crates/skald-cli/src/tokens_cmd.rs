//! `skald tokens`: how close skald's token counts come to what providers billed.
//!
//! For every assistant call that records provider usage, the request is the model-visible
//! conversation before it (since the latest compact boundary); its real input is the provider's
//! uncached + cache-read + cache-write input tokens. Three counts are compared with it: the chars/4
//! estimate, the exact BPE count, and the BPE count corrected by per-model calibration that has
//! learned only from earlier calls (online, in the order the files are given), as a running engine
//! would.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use skald_core::codec::{self, claude_code};
use skald_core::message::{Message, Role};
use skald_core::tokens::{Calibration, TokenCounter, estimate_messages_tokens};

use crate::files;
use crate::inspect::{EncodingChoice, conversation_model, parse_encoding_choice};
use crate::output::{self, Mode};

#[derive(Debug, Args)]
pub struct TokensArgs {
    /// Transcript files or directories with provider usage (Claude Code, mini-swe-agent, …).
    #[arg(required = true, value_name = "FILE")]
    pub paths: Vec<PathBuf>,
    /// BPE used for exact counts: auto (from the transcript's model), o200k_base or cl100k_base.
    #[arg(long, default_value = "auto", value_parser = parse_encoding_choice)]
    pub encoding: EncodingChoice,
}

/// Absolute percentage errors of one counting method.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorFigures {
    pub mean_ape_pct: f64,
    pub p90_ape_pct: f64,
}

/// The three methods compared over a set of calls.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub calls: usize,
    pub chars4: ErrorFigures,
    pub bpe: ErrorFigures,
    pub calibrated: ErrorFigures,
}

#[derive(Debug, Serialize)]
pub struct FileRow {
    pub file: String,
    pub format: &'static str,
    #[serde(flatten)]
    pub comparison: Comparison,
}

#[derive(Debug, Serialize)]
pub struct TokensReport {
    pub files: Vec<FileRow>,
    pub by_format: BTreeMap<&'static str, Comparison>,
    pub all: Comparison,
}

/// Absolute percentage errors of each method for a set of calls.
#[derive(Debug, Default, Clone)]
struct Errors {
    chars4: Vec<f64>,
    bpe: Vec<f64>,
    calibrated: Vec<f64>,
}

impl Errors {
    fn push(&mut self, real: u64, chars4: u64, bpe: u64, calibrated: u64) {
        let ape = |x: u64| (x as f64 - real as f64).abs() / real as f64 * 100.0;
        self.chars4.push(ape(chars4));
        self.bpe.push(ape(bpe));
        self.calibrated.push(ape(calibrated));
    }

    fn extend(&mut self, other: &Errors) {
        self.chars4.extend_from_slice(&other.chars4);
        self.bpe.extend_from_slice(&other.bpe);
        self.calibrated.extend_from_slice(&other.calibrated);
    }

    fn comparison(&self) -> Comparison {
        Comparison {
            calls: self.chars4.len(),
            chars4: figures(&self.chars4),
            bpe: figures(&self.bpe),
            calibrated: figures(&self.calibrated),
        }
    }
}

fn figures(values: &[f64]) -> ErrorFigures {
    if values.is_empty() {
        return ErrorFigures {
            mean_ape_pct: 0.0,
            p90_ape_pct: 0.0,
        };
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (0.9 * sorted.len() as f64).ceil() as usize;
    let p90 = sorted
        .get(rank.clamp(1, sorted.len()) - 1)
        .copied()
        .unwrap_or(0.0);
    let round = |x: f64| (x * 100.0).round() / 100.0;
    ErrorFigures {
        mean_ape_pct: round(values.iter().sum::<f64>() / values.len() as f64),
        p90_ape_pct: round(p90),
    }
}

/// Measures every call with usage in `messages`, feeding `calibration` as it goes.
fn measure(
    messages: &[Message],
    model_hint: Option<&str>,
    counter: &mut TokenCounter,
    calibration: &mut Calibration,
) -> Errors {
    let mut errors = Errors::default();
    for (index, message) in messages.iter().enumerate() {
        if message.role != Role::Assistant {
            continue;
        }
        let Some(usage) = message.meta.usage else {
            continue;
        };
        let real = usage.total_input();
        if real == 0 {
            continue;
        }
        let start = claude_code::request_start(messages, index);
        let request: Vec<Message> = messages
            .get(start..index)
            .unwrap_or_default()
            .iter()
            .filter(|m| m.is_model_visible())
            .cloned()
            .collect();
        let model = message
            .meta
            .model
            .as_deref()
            .or(model_hint)
            .unwrap_or("unknown");
        let chars4 = estimate_messages_tokens(&request);
        let bpe = counter.count_request(&request);
        let calibrated = calibration.correct(model, bpe);
        calibration.observe(model, bpe, real);
        errors.push(real, chars4, bpe, calibrated);
    }
    errors
}

pub fn run(args: &TokensArgs, mode: Mode) -> Result<ExitCode> {
    let paths = files::expand(&args.paths)?;
    let progress = ProgressBar::new(paths.len() as u64).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut calibration = Calibration::new();
    let mut rows = Vec::new();
    let mut by_format: BTreeMap<&'static str, Errors> = BTreeMap::new();
    let mut all = Errors::default();
    let mut failed = false;
    for path in &paths {
        let file = path.display().to_string();
        progress.set_message(file.clone());
        let decoded = match files::read_text(path)
            .and_then(|text| codec::decode(&text).map_err(anyhow::Error::from))
        {
            Ok(decoded) => decoded,
            Err(error) => {
                progress.suspend(|| eprintln!("skald: {file}: {error:#}"));
                failed = true;
                progress.inc(1);
                continue;
            }
        };
        let model_hint = conversation_model(&decoded).map(str::to_owned);
        let mut counter = TokenCounter::new(args.encoding.resolve(model_hint.as_deref()));
        let errors = measure(
            &decoded.conversation.messages,
            model_hint.as_deref(),
            &mut counter,
            &mut calibration,
        );
        progress.inc(1);
        if errors.chars4.is_empty() {
            continue;
        }
        all.extend(&errors);
        by_format
            .entry(decoded.format.name())
            .or_default()
            .extend(&errors);
        rows.push(FileRow {
            file,
            format: decoded.format.name(),
            comparison: errors.comparison(),
        });
    }
    progress.finish_and_clear();
    if rows.is_empty() {
        bail!(
            "no assistant call with provider-reported usage in the files given \
             (Claude Code and mini-swe-agent transcripts record it)"
        );
    }
    let report = TokensReport {
        files: rows,
        by_format: by_format
            .into_iter()
            .map(|(format, errors)| (format, errors.comparison()))
            .collect(),
        all: all.comparison(),
    };
    output::emit(mode, &report, render)?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn render(report: &TokensReport) -> comfy_table::Table {
    let mut table = output::table(&[
        "transcripts",
        "calls",
        "chars/4\nmean / p90 APE %",
        "BPE\nmean / p90 APE %",
        "calibrated\nmean / p90 APE %",
    ]);
    let cell = |f: &ErrorFigures| format!("{:.1} / {:.1}", f.mean_ape_pct, f.p90_ape_pct);
    let mut row = |name: String, c: &Comparison| {
        table.add_row(vec![
            name,
            c.calls.to_string(),
            cell(&c.chars4),
            cell(&c.bpe),
            cell(&c.calibrated),
        ]);
    };
    for file in &report.files {
        row(file.file.clone(), &file.comparison);
    }
    for (format, comparison) in &report.by_format {
        row(format!("all {format}"), comparison);
    }
    row("all".to_owned(), &report.all);
    table
}
