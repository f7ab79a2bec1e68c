//! `skald eval locomo`: retrieval recall of the memory store on LoCoMo. Each conversation's turns
//! become memories in a fresh in-memory store (one tenant per conversation, each turn a
//! session-archive memory dated by its session), then every question is searched, and the evidence turns it cites (corrected by the
//! errors file) are looked for in the results — at turn level and at session level, by question
//! category — with the search latency and the ingest rate.
//!
//! Definitions (also in `--help`; injection precision in [`injection`]):
//! - turn recall@k: the share of a question's evidence turns among the turns of the first k hits
//!   (a hit that merged duplicate turns covers each of them), averaged over questions;
//! - session recall@k: the share of the question's evidence sessions among the first k distinct
//!   sessions of the ranking (sessions in the order their turns first appear in the hits).
//!
//! Questions whose evidence names no turn of the conversation are not scored (and counted).
//!
//! This module holds the arguments and the command; [`locomo`] reads the data set, [`evaluate`]
//! measures, [`render`] prints.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use skald_engine::memory::manage;
use skald_engine::storage::{DEFAULT_VECTOR_SHARE, DEFAULT_VECTOR_WEIGHT, VectorFusion};
use skald_llm::{Embedder, EmbeddingConfig, LocalEmbeddingConfig, embedder_from_config};

use crate::config::Config;
use crate::home::Home;
use crate::output::{self, Mode};

mod evaluate;
mod injection;
mod locomo;
mod render;

use evaluate::evaluate;
use locomo::{parse_corrections, parse_locomo};
use render::{render_table, summary_line};

#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(subcommand)]
    pub benchmark: Benchmark,
}

#[derive(Debug, Subcommand)]
pub enum Benchmark {
    /// Retrieval recall of the memory store on LoCoMo (long multi-session conversations).
    ///
    /// Every turn of each conversation becomes a memory (under viking://session/…, dated by its
    /// session, with the two turns before and the one after as its L1 overview), in a fresh
    /// in-memory store with one tenant per conversation; then every question is asked. Every question is searched (BM25, a
    /// second ranking inside the dates the question names, fused by reciprocal rank fusion) and
    /// the turns its evidence cites are looked for in the results.
    ///
    /// turn recall@k: share of the evidence turns among the first k hits, averaged over
    /// questions. session recall@k: share of the evidence sessions among the first k distinct
    /// sessions of the ranking. Injection precision: each question also goes through per-turn
    /// recall as the engine runs it (default [memory.recall] settings: its relevance floor,
    /// max_results and token budget); the share of the injected memories that come from an
    /// evidence session (turn precision: that hold an evidence turn), and the questions that
    /// got nothing injected. Also: recall by question category (1 multi-hop, 2 temporal,
    /// 3 open-domain, 4 single-hop, 5 adversarial), search latency p50/p95 and the ingest
    /// rate. --errors applies the correct_evidence of a locomo-audit errors file
    /// (question_id locomo_{conversation index}_qa{question index}).
    ///
    /// Hybrid search: --embedder embeds every memory and question with the [embedding] of
    /// skald.toml, --model-dir with a local sentence-transformers directory (a build with the
    /// local-embeddings feature). --fusion score (the default) combines the min-max normalised
    /// BM25 and cosine scores, the vector side weighing --vector-weight (0.4); --fusion rank
    /// makes the vector ranking one more RRF list of weight --vector-weight (0.3). --embed-context
    /// embeds each turn with its context instead of alone.
    ///
    /// Examples:
    ///   skald eval locomo ../shared/data/locomo/locomo-dev.json
    ///   skald eval locomo locomo-dev.json --errors locomo-dev-errors.json --json
    #[command(verbatim_doc_comment)]
    Locomo(LocomoArgs),
}

#[derive(Debug, Args)]
pub struct LocomoArgs {
    /// A LoCoMo JSON file: an array of conversations with `conversation` and `qa`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Corrections to the evidence: a JSON array of {question_id, correct_evidence}.
    #[arg(long, value_name = "FILE")]
    pub errors: Option<PathBuf>,
    /// Turns before each turn in its L1 overview (its context); 0 indexes turns alone.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub context_before: usize,
    /// Turns after each turn in its L1 overview.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub context_after: usize,
    /// Do not rank a second time inside the dates a question names.
    #[arg(long)]
    pub no_date_ranking: bool,
    /// RRF weight of the directory ranking (0 turns it off; default: the store's).
    #[arg(long, value_name = "W")]
    pub directory_weight: Option<f64>,
    /// How hybrid runs combine the vector ranking with the text ranking (default: the
    /// store's, score).
    #[arg(long, value_enum, value_name = "MODE")]
    pub fusion: Option<FusionArg>,
    /// The vector side's weight in hybrid runs: its share of the relevance score (0 to 1) with
    /// --fusion score, its RRF weight with --fusion rank (default: 0.4 and 0.3).
    #[arg(long, value_name = "W")]
    pub vector_weight: Option<f64>,
    /// BM25 weight of the L1 overview, which holds the turn's context (default: the store's).
    #[arg(long, value_name = "W")]
    pub l1_weight: Option<f64>,
    /// BM25 weight of the URI's words (speaker, session, turn id; default: the store's).
    #[arg(long, value_name = "W")]
    pub path_weight: Option<f64>,
    /// Hybrid search: embed every memory and question with the embedder of [embedding] in
    /// skald.toml, and fuse the vector ranking with the full-text ones.
    #[arg(long, conflicts_with = "model_dir")]
    pub embedder: bool,
    /// Hybrid search with a local sentence-transformers model directory (config.json,
    /// tokenizer.json, model.safetensors); needs a build with the `local-embeddings` feature.
    #[arg(long, value_name = "DIR")]
    pub model_dir: Option<PathBuf>,
    /// With an embedder: embed each turn with its context (its L1 overview) instead of alone.
    #[arg(long)]
    pub embed_context: bool,
    /// Run on PostgreSQL (postgres://…; a schema of its own, dropped at the end) instead of an
    /// in-memory SQLite store: the ranking is above the backend, so the figures must match.
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// The relevance floor of the injection measured (memory.recall.min_text_relevance, 0 to
    /// 1; 0 turns it off; default: recall's).
    #[arg(long, value_name = "X")]
    pub min_text_relevance: Option<f64>,
}

/// `--fusion`: the store's [`VectorFusion`] modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FusionArg {
    /// Min-max normalised BM25 and cosine scores, combined convexly.
    Score,
    /// The vector ranking as one more list of the reciprocal rank fusion.
    Rank,
}

/// The store setting for `--fusion` and `--vector-weight` (each defaulting to the store's).
pub(super) fn vector_fusion(mode: Option<FusionArg>, weight: Option<f64>) -> VectorFusion {
    let mode = mode.unwrap_or(match VectorFusion::default() {
        VectorFusion::Score { .. } => FusionArg::Score,
        VectorFusion::Rank { .. } => FusionArg::Rank,
    });
    match mode {
        FusionArg::Score => VectorFusion::Score {
            share: weight.unwrap_or(DEFAULT_VECTOR_SHARE),
        },
        FusionArg::Rank => VectorFusion::Rank {
            weight: weight.unwrap_or(DEFAULT_VECTOR_WEIGHT),
        },
    }
}

/// The embedder of `[embedding]`, with the runtime its calls run on. The benchmark embeds the
/// memories and questions itself, outside an engine, so it can time the embedding apart from the
/// search.
pub struct Embedding {
    runtime: tokio::runtime::Runtime,
    embedder: Arc<dyn Embedder>,
}

impl Embedding {
    /// `None` when no `[embedding]` is configured.
    pub fn from_config(config: &Config) -> Result<Option<Embedding>> {
        let embedder = embedder_from_config(config.embedding.as_ref())
            .context("cannot use the embedder configured in [embedding]")?;
        embedder.map(Embedding::new).transpose()
    }

    pub fn new(embedder: Arc<dyn Embedder>) -> Result<Embedding> {
        Ok(Embedding {
            runtime: crate::compact_cmd::runtime()?,
            embedder,
        })
    }

    pub fn name(&self) -> &str {
        self.embedder.name()
    }

    /// The embedder, for an engine configured with it.
    pub fn shared(&self) -> Arc<dyn Embedder> {
        self.embedder.clone()
    }

    /// The embedder itself, for the engine's async calls run through [`Embedding::block_on`].
    pub fn embedder(&self) -> &dyn Embedder {
        self.embedder.as_ref()
    }

    /// Runs an engine future on this embedding's runtime.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// One vector per text, in order.
    pub fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(self.block_on(manage::embed_texts(self.embedder(), texts))?)
    }
}

fn read(path: &Path, what: &str) -> Result<String> {
    std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the {what} {}", path.display()))
}

pub fn run(
    args: &EvalArgs,
    config_path: Option<&Path>,
    home: &Home,
    mode: Mode,
) -> Result<ExitCode> {
    match &args.benchmark {
        Benchmark::Locomo(locomo) => {
            let embedding = if locomo.embedder {
                let config = Config::load(config_path, home)?;
                if config.embedding.is_none() {
                    bail!(
                        "--embedder needs an [embedding] table in the configuration ({}); or \
                         give --model-dir DIR",
                        config
                            .path
                            .as_deref()
                            .map_or_else(|| "none found".to_owned(), |p| p.display().to_string())
                    );
                }
                Embedding::from_config(&config)?
            } else if let Some(dir) = &locomo.model_dir {
                let config = EmbeddingConfig::Local(LocalEmbeddingConfig::new(dir.clone()));
                let embedder = embedder_from_config(Some(&config))
                    .with_context(|| format!("cannot load the model in {}", dir.display()))?
                    .context("no embedder")?;
                Some(Embedding::new(embedder)?)
            } else {
                None
            };
            run_locomo(locomo, embedding.as_ref(), mode)
        }
    }
}

fn run_locomo(args: &LocomoArgs, embedding: Option<&Embedding>, mode: Mode) -> Result<ExitCode> {
    let corrections = match &args.errors {
        Some(path) => parse_corrections(&read(path, "errors file")?)
            .with_context(|| format!("in {}", path.display()))?,
        None => HashMap::new(),
    };
    let conversations = parse_locomo(&read(&args.file, "LoCoMo file")?, &corrections)
        .with_context(|| format!("in {}", args.file.display()))?;
    let progress = if mode == Mode::Json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0).with_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} questions {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        )
    };
    let mut report = evaluate(&conversations, args, embedding, &progress)?;
    report.evidence_corrections = corrections.len();
    output::emit(mode, &report, render_table)?;
    if mode == Mode::Table {
        println!("{}", summary_line(&report));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn fusion_flags_choose_the_store_setting() {
        assert_eq!(
            vector_fusion(None, None),
            VectorFusion::Score {
                share: DEFAULT_VECTOR_SHARE
            }
        );
        assert_eq!(
            vector_fusion(None, Some(0.25)),
            VectorFusion::Score { share: 0.25 }
        );
        assert_eq!(
            vector_fusion(Some(FusionArg::Rank), None),
            VectorFusion::Rank {
                weight: DEFAULT_VECTOR_WEIGHT
            }
        );
        assert_eq!(
            vector_fusion(Some(FusionArg::Rank), Some(0.5)),
            VectorFusion::Rank { weight: 0.5 }
        );
    }
}
