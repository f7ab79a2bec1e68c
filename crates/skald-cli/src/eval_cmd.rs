//! `skald eval locomo`: retrieval recall of the memory store on LoCoMo. Each conversation's turns
//! become memories in a fresh in-memory store (one tenant per conversation, each turn a
//! session-archive memory dated by its session), then every question is searched, and the evidence turns it cites (corrected by the
//! errors file) are looked for in the results — at turn level and at session level, by question
//! category — with the search latency and the ingest rate.
//!
//! Definitions (also in `--help`):
//! - turn recall@k: the share of a question's evidence turns among the turns of the first k hits
//!   (a hit that merged duplicate turns covers each of them), averaged over questions;
//! - session recall@k: the share of the question's evidence sessions among the first k distinct
//!   sessions of the ranking (sessions in the order their turns first appear in the hits).
//!
//! Questions whose evidence names no turn of the conversation are not scored (and counted).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::Value;
use skald_core::ids::Tenant;
use skald_core::memory::levels::{MAX_OVERVIEW_CHARS, cut_at_word};
use skald_core::memory::uri::MemoryUri;
use skald_llm::{EmbeddingConfig, LocalEmbeddingConfig, embedder_from_config};
use skald_store::SystemClock;
use skald_store::memories::{
    AddOutcome, DEFAULT_VECTOR_SHARE, DEFAULT_VECTOR_WEIGHT, DuplicateKind, MemorySettings,
    MemorySource, MemoryStore, NewMemory, SearchQuery, SqliteMemoryStore, VectorFusion,
};

use crate::config::Config;
use crate::home::Home;
use crate::memory_cmd::Embedding;
use crate::output::{self, Mode};

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
    /// sessions of the ranking. Also: recall by question category (1 multi-hop, 2 temporal,
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
fn vector_fusion(mode: Option<FusionArg>, weight: Option<f64>) -> VectorFusion {
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

/// How deep each question's ranking goes (enough hits for ten distinct sessions).
const SEARCH_DEPTH: usize = 50;

const CUTOFFS: [usize; 3] = [1, 5, 10];

/// A turn, by session and position (`D{session}:{turn}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TurnRef {
    pub session: u32,
    pub turn: u32,
}

impl TurnRef {
    /// Reads `D3:14`; also the slips found in the data (`D:11:26`, `D8:6; D9:17` gives two).
    pub fn parse_all(text: &str) -> Vec<TurnRef> {
        text.split([';', ',', ' '])
            .filter_map(|part| {
                let rest = part.trim().strip_prefix('D')?;
                let rest = rest.strip_prefix(':').unwrap_or(rest);
                let (session, turn) = rest.split_once(':')?;
                Some(TurnRef {
                    session: session.parse().ok()?,
                    turn: turn.parse().ok()?,
                })
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub id: TurnRef,
    pub dia_id: String,
    pub speaker: String,
    pub text: String,
    /// The description of an image the speaker shared, and what was searched to find it.
    pub caption: Option<String>,
    pub image_query: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub number: u32,
    pub date_ms: Option<i64>,
    pub turns: Vec<Turn>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub text: String,
    pub category: i64,
    pub evidence: Vec<TurnRef>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub sample_id: String,
    pub sessions: Vec<Session>,
    pub questions: Vec<Question>,
}

/// `1:56 pm on 8 May, 2023` → epoch milliseconds (UTC).
pub fn parse_session_date(text: &str) -> Option<i64> {
    chrono::NaiveDateTime::parse_from_str(text.trim(), "%I:%M %p on %d %B, %Y")
        .ok()
        .map(|time| time.and_utc().timestamp_millis())
}

fn evidence_of(value: Option<&Value>) -> Vec<TurnRef> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .flat_map(TurnRef::parse_all)
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the conversations of a LoCoMo file, applying `corrections` (question id → evidence).
pub fn parse_locomo(
    text: &str,
    corrections: &HashMap<String, Vec<TurnRef>>,
) -> Result<Vec<Conversation>> {
    let root: Value = serde_json::from_str(text).context("the LoCoMo file is not JSON")?;
    let Some(items) = root.as_array() else {
        bail!("the LoCoMo file must be a JSON array of conversations");
    };
    let mut conversations = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let sample_id = item
            .get("sample_id")
            .and_then(Value::as_str)
            .map_or_else(|| format!("conv-{index}"), str::to_owned);
        let Some(body) = item.get("conversation").and_then(Value::as_object) else {
            bail!("conversation {index} ({sample_id}) has no `conversation` object");
        };
        let mut sessions = Vec::new();
        for number in 1_u32.. {
            let date_key = format!("session_{number}_date_time");
            let key = format!("session_{number}");
            if !body.contains_key(&date_key) && !body.contains_key(&key) {
                break;
            }
            let date_ms = body
                .get(&date_key)
                .and_then(Value::as_str)
                .and_then(parse_session_date);
            let mut turns = Vec::new();
            for turn in body
                .get(&key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let field = |name: &str| turn.get(name).and_then(Value::as_str).map(str::to_owned);
                let (Some(dia_id), Some(speaker), Some(text)) =
                    (field("dia_id"), field("speaker"), field("text"))
                else {
                    bail!("{sample_id} session {number}: a turn lacks dia_id, speaker or text");
                };
                let Some(id) = TurnRef::parse_all(&dia_id).first().copied() else {
                    bail!(
                        "{sample_id} session {number}: turn id {dia_id:?} is not D<session>:<turn>"
                    );
                };
                turns.push(Turn {
                    id,
                    dia_id,
                    speaker,
                    text,
                    caption: field("blip_caption").filter(|caption| !caption.trim().is_empty()),
                    image_query: field("query").filter(|query| !query.trim().is_empty()),
                });
            }
            sessions.push(Session {
                number,
                date_ms,
                turns,
            });
        }
        let mut questions = Vec::new();
        for (q_index, qa) in item
            .get("qa")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let Some(text) = qa.get("question").and_then(Value::as_str) else {
                continue;
            };
            let id = format!("locomo_{index}_qa{q_index}");
            let evidence = match corrections.get(&id) {
                Some(corrected) => corrected.clone(),
                None => evidence_of(qa.get("evidence")),
            };
            questions.push(Question {
                text: text.to_owned(),
                category: qa.get("category").and_then(Value::as_i64).unwrap_or(0),
                evidence,
            });
        }
        conversations.push(Conversation {
            sample_id,
            sessions,
            questions,
        });
    }
    Ok(conversations)
}

/// Reads an errors file: `question_id` → `correct_evidence`, for entries that have one.
pub fn parse_corrections(text: &str) -> Result<HashMap<String, Vec<TurnRef>>> {
    let root: Value = serde_json::from_str(text).context("the errors file is not JSON")?;
    let Some(items) = root.as_array() else {
        bail!("the errors file must be a JSON array of {{question_id, correct_evidence}}");
    };
    let mut corrections = HashMap::new();
    for item in items {
        let (Some(id), Some(evidence)) = (
            item.get("question_id").and_then(Value::as_str),
            item.get("correct_evidence")
                .filter(|value| value.is_array()),
        ) else {
            continue;
        };
        corrections.insert(id.to_owned(), evidence_of(Some(evidence)));
    }
    Ok(corrections)
}

/// The name a LoCoMo question category has in the paper.
pub fn category_name(category: i64) -> &'static str {
    match category {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        5 => "adversarial",
        _ => "other",
    }
}

fn slug(text: &str) -> String {
    let slug: String = text
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let slug = slug.trim_matches('-').to_owned();
    if slug.is_empty() {
        "speaker".to_owned()
    } else {
        slug
    }
}

fn tenant_of(sample_id: &str, index: usize) -> Result<Tenant> {
    let cleaned: String = sample_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(100)
        .collect();
    let name = if cleaned
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
    {
        cleaned
    } else {
        format!("conversation-{index}")
    };
    Ok(Tenant::parse(name)?)
}

/// A turn as text: the speaker, what they said and the image they shared, if any (what a
/// memory of the turn holds: a photo is part of what was said).
fn spoken(turn: &Turn) -> String {
    let image = match (&turn.image_query, &turn.caption) {
        (Some(query), Some(caption)) => format!(" [shared an image of {query}: {caption}]"),
        (Some(query), None) => format!(" [shared an image of {query}]"),
        (None, Some(caption)) => format!(" [shared an image: {caption}]"),
        (None, None) => String::new(),
    };
    format!("{}: {}{image}", turn.speaker, turn.text)
}

/// The memories of one session: each turn with its context as L1.
pub fn session_memories(
    conversation: &Conversation,
    session: &Session,
    context_before: usize,
    context_after: usize,
) -> Result<Vec<NewMemory>> {
    let sample = slug(&conversation.sample_id);
    let mut memories = Vec::new();
    for (position, turn) in session.turns.iter().enumerate() {
        let uri = MemoryUri::parse_entry(&format!(
            "viking://session/{sample}-session-{}/{}",
            session.number,
            turn.dia_id
                .replace(|c: char| !c.is_alphanumeric() && c != ':', "-")
        ))?;
        let content = spoken(turn);
        let mut memory = NewMemory::new(uri, content).with_source(MemorySource::new(
            format!("{sample}:session_{}", session.number),
            [turn.dia_id.clone()],
        ));
        if let Some(date) = session.date_ms {
            memory = memory.created_at(date);
        }
        if context_before + context_after > 0 {
            let first = position.saturating_sub(context_before);
            let last = (position + context_after + 1).min(session.turns.len());
            let lines: Vec<String> = session
                .turns
                .get(first..last)
                .unwrap_or_default()
                .iter()
                .map(spoken)
                .collect();
            memory = memory.with_l1(cut_at_word(&lines.join("\n"), MAX_OVERVIEW_CHARS));
        }
        memories.push(memory);
    }
    Ok(memories)
}

/// Recall sums of one group of questions.
#[derive(Debug, Clone, Default)]
struct Tally {
    questions: usize,
    turn: [f64; 3],
    session: [f64; 3],
    /// Questions with at least one, and with all, evidence turns in the first 10 hits.
    any_at_10: usize,
    all_at_10: usize,
}

impl Tally {
    fn add(&mut self, turn: [f64; 3], session: [f64; 3]) {
        self.questions += 1;
        for i in 0..3 {
            self.turn[i] += turn[i];
            self.session[i] += session[i];
        }
        if turn[2] > 0.0 {
            self.any_at_10 += 1;
        }
        if turn[2] >= 1.0 {
            self.all_at_10 += 1;
        }
    }

    fn figures(&self) -> RecallFigures {
        let mean = |sum: f64| {
            if self.questions == 0 {
                0.0
            } else {
                round4(sum / self.questions as f64)
            }
        };
        RecallFigures {
            questions: self.questions,
            session_recall_at_1: mean(self.session[0]),
            session_recall_at_5: mean(self.session[1]),
            session_recall_at_10: mean(self.session[2]),
            turn_recall_at_1: mean(self.turn[0]),
            turn_recall_at_5: mean(self.turn[1]),
            turn_recall_at_10: mean(self.turn[2]),
            turn_any_at_10: mean(self.any_at_10 as f64),
            turn_all_at_10: mean(self.all_at_10 as f64),
        }
    }
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RecallFigures {
    pub questions: usize,
    pub session_recall_at_1: f64,
    pub session_recall_at_5: f64,
    pub session_recall_at_10: f64,
    pub turn_recall_at_1: f64,
    pub turn_recall_at_5: f64,
    pub turn_recall_at_10: f64,
    /// Share of questions with at least one evidence turn in the first 10 hits.
    pub turn_any_at_10: f64,
    /// Share of questions with every evidence turn in the first 10 hits.
    pub turn_all_at_10: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CategoryFigures {
    pub category: i64,
    pub name: &'static str,
    #[serde(flatten)]
    pub recall: RecallFigures,
}

#[derive(Debug, Clone, Serialize)]
pub struct LocomoReport {
    pub file: String,
    pub errors_file: Option<String>,
    pub conversations: usize,
    pub turns: usize,
    pub memories_stored: usize,
    pub merged_exact: usize,
    pub merged_near: usize,
    pub questions: usize,
    pub questions_scored: usize,
    pub questions_without_evidence: usize,
    pub evidence_corrections: usize,
    pub evidence_turns_missing: usize,
    pub session_recall_at_1: f64,
    pub session_recall_at_5: f64,
    pub session_recall_at_10: f64,
    pub turn_recall_at_1: f64,
    pub turn_recall_at_5: f64,
    pub turn_recall_at_10: f64,
    pub turn_any_at_10: f64,
    pub turn_all_at_10: f64,
    pub by_category: Vec<CategoryFigures>,
    pub search_depth: usize,
    pub search_p50_ms: f64,
    pub search_p95_ms: f64,
    pub ingest_seconds: f64,
    pub ingest_memories_per_s: f64,
    pub context_before: usize,
    pub context_after: usize,
    pub date_ranking: bool,
    pub directory_weight: f64,
    /// "score" or "rank" (see `--fusion`).
    pub fusion: &'static str,
    /// The vector share (score fusion) or RRF weight (rank fusion).
    pub vector_weight: f64,
    pub l1_weight: f64,
    pub path_weight: f64,
    /// "hybrid" (full text and vectors) or "full-text".
    pub mode: &'static str,
    pub embedder: Option<String>,
    /// Time spent embedding the questions (not in the search latency).
    pub query_embed_seconds: f64,
}

/// Recall at each cutoff of `found` (the ranked turns or sessions; `None` separates hits for
/// turn ranking) against `wanted`.
fn recall_at(ranked: &[Vec<TurnRef>], evidence: &HashSet<TurnRef>) -> ([f64; 3], [f64; 3]) {
    let sessions_wanted: HashSet<u32> = evidence.iter().map(|turn| turn.session).collect();
    let mut session_order: Vec<u32> = Vec::new();
    for hit in ranked {
        for turn in hit {
            if !session_order.contains(&turn.session) {
                session_order.push(turn.session);
            }
        }
    }
    let mut turn = [0.0; 3];
    let mut session = [0.0; 3];
    for (slot, cutoff) in CUTOFFS.iter().enumerate() {
        let covered: HashSet<TurnRef> = ranked.iter().take(*cutoff).flatten().copied().collect();
        let found = evidence.intersection(&covered).count();
        turn[slot] = found as f64 / evidence.len().max(1) as f64;
        let top: HashSet<u32> = session_order.iter().take(*cutoff).copied().collect();
        let found = sessions_wanted.intersection(&top).count();
        session[slot] = found as f64 / sessions_wanted.len().max(1) as f64;
    }
    (turn, session)
}

fn percentile(sorted: &[f64], share: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() - 1) as f64 * share).round() as usize;
    sorted.get(index).copied().unwrap_or(0.0)
}

/// Runs the whole evaluation on parsed conversations.
pub fn evaluate(
    conversations: &[Conversation],
    args: &LocomoArgs,
    embedding: Option<&Embedding>,
    progress: &ProgressBar,
) -> Result<LocomoReport> {
    let mut settings = MemorySettings {
        vector_fusion: vector_fusion(args.fusion, args.vector_weight),
        ..MemorySettings::default()
    };
    if let Some(weight) = args.directory_weight {
        settings.directory_weight = weight;
    }
    if let Some(weight) = args.l1_weight {
        settings.weights.l1 = weight;
    }
    if let Some(weight) = args.path_weight {
        settings.weights.path = weight;
    }
    let mut tally = Tally::default();
    let mut by_category: BTreeMap<i64, Tally> = BTreeMap::new();
    let mut latencies: Vec<f64> = Vec::new();
    let (mut turns, mut stored, mut merged_exact, mut merged_near) = (0, 0, 0, 0);
    let (mut without_evidence, mut missing) = (0, 0);
    let mut ingest_seconds = 0.0;
    let mut query_embed_seconds = 0.0;
    let total_questions: usize = conversations.iter().map(|c| c.questions.len()).sum();
    progress.set_length(total_questions as u64);
    // One store, one tenant per conversation, every conversation written before any question
    // is asked: FTS5's BM25 statistics cover the whole index, so asking in between would make
    // each conversation's ranking depend on the order the conversations were read in.
    let store = SqliteMemoryStore::in_memory_with(settings, Arc::new(SystemClock))?;
    let mut memory_turns: HashMap<i64, Vec<TurnRef>> = HashMap::new();
    for (index, conversation) in conversations.iter().enumerate() {
        let tenant = tenant_of(&conversation.sample_id, index)?;
        progress.set_message(format!("ingesting {}", conversation.sample_id));
        let mut batches = Vec::new();
        for session in &conversation.sessions {
            batches.push(session_memories(
                conversation,
                session,
                args.context_before,
                args.context_after,
            )?);
        }
        let started = Instant::now();
        for mut batch in batches {
            turns += batch.len();
            if let Some(embedding) = embedding {
                let texts: Vec<String> = batch
                    .iter()
                    .map(|memory| match (&memory.l1, args.embed_context) {
                        (Some(context), true) => context.clone(),
                        (Some(_) | None, _) => memory.content.clone(),
                    })
                    .collect();
                for (memory, vector) in batch.iter_mut().zip(embedding.embed(&texts)?) {
                    memory.embedding = Some(vector);
                }
            }
            for outcome in store.add_many(&tenant, batch)? {
                match &outcome {
                    AddOutcome::Added(_) => stored += 1,
                    AddOutcome::Merged(merge) => match merge.kind {
                        DuplicateKind::Exact => merged_exact += 1,
                        DuplicateKind::Near { .. } => merged_near += 1,
                    },
                }
                let memory = outcome.memory();
                let covered = memory
                    .source_entry_ids()
                    .flat_map(TurnRef::parse_all)
                    .collect();
                memory_turns.insert(memory.id, covered);
            }
        }
        ingest_seconds += started.elapsed().as_secs_f64();
    }
    for (index, conversation) in conversations.iter().enumerate() {
        let tenant = tenant_of(&conversation.sample_id, index)?;
        let known: HashSet<TurnRef> = conversation
            .sessions
            .iter()
            .flat_map(|session| session.turns.iter().map(|turn| turn.id))
            .collect();
        progress.set_message(format!("asking {}", conversation.sample_id));
        let mut question_vectors = match embedding {
            Some(embedding) => {
                let started = Instant::now();
                let texts: Vec<String> = conversation
                    .questions
                    .iter()
                    .map(|q| q.text.clone())
                    .collect();
                let vectors = embedding.embed(&texts)?;
                query_embed_seconds += started.elapsed().as_secs_f64();
                vectors.into_iter().map(Some).collect()
            }
            None => vec![None; conversation.questions.len()],
        }
        .into_iter();
        for question in &conversation.questions {
            let vector = question_vectors.next().flatten();
            progress.inc(1);
            let evidence: HashSet<TurnRef> = question
                .evidence
                .iter()
                .copied()
                .filter(|turn| {
                    let exists = known.contains(turn);
                    if !exists {
                        missing += 1;
                    }
                    exists
                })
                .collect();
            if evidence.is_empty() {
                without_evidence += 1;
                continue;
            }
            let mut query = SearchQuery::text(&question.text, SEARCH_DEPTH);
            query.date_ranking = !args.no_date_ranking;
            if let Some(vector) = vector {
                query = query.with_vector(vector);
            }
            let started = Instant::now();
            let hits = match store.search(&tenant, &query) {
                Ok(hits) => hits,
                // A question with no content words and no vector cannot be searched: no hits.
                Err(skald_store::MemoryError::InvalidInput { field: "query", .. }) => Vec::new(),
                Err(error) => return Err(error.into()),
            };
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            let ranked: Vec<Vec<TurnRef>> = hits
                .iter()
                .map(|hit| {
                    memory_turns
                        .get(&hit.memory.id)
                        .cloned()
                        .unwrap_or_default()
                })
                .collect();
            let (turn, session) = recall_at(&ranked, &evidence);
            tally.add(turn, session);
            by_category
                .entry(question.category)
                .or_default()
                .add(turn, session);
        }
    }
    progress.finish_and_clear();
    latencies.sort_by(f64::total_cmp);
    let overall = tally.figures();
    Ok(LocomoReport {
        file: args.file.display().to_string(),
        errors_file: args.errors.as_ref().map(|path| path.display().to_string()),
        conversations: conversations.len(),
        turns,
        memories_stored: stored,
        merged_exact,
        merged_near,
        questions: total_questions,
        questions_scored: overall.questions,
        questions_without_evidence: without_evidence,
        evidence_corrections: 0,
        evidence_turns_missing: missing,
        session_recall_at_1: overall.session_recall_at_1,
        session_recall_at_5: overall.session_recall_at_5,
        session_recall_at_10: overall.session_recall_at_10,
        turn_recall_at_1: overall.turn_recall_at_1,
        turn_recall_at_5: overall.turn_recall_at_5,
        turn_recall_at_10: overall.turn_recall_at_10,
        turn_any_at_10: overall.turn_any_at_10,
        turn_all_at_10: overall.turn_all_at_10,
        by_category: by_category
            .iter()
            .map(|(category, tally)| CategoryFigures {
                category: *category,
                name: category_name(*category),
                recall: tally.figures(),
            })
            .collect(),
        search_depth: SEARCH_DEPTH,
        search_p50_ms: round4(percentile(&latencies, 0.5)),
        search_p95_ms: round4(percentile(&latencies, 0.95)),
        ingest_seconds: round4(ingest_seconds),
        ingest_memories_per_s: if ingest_seconds > 0.0 {
            (turns as f64 / ingest_seconds).round()
        } else {
            0.0
        },
        context_before: args.context_before,
        context_after: args.context_after,
        date_ranking: !args.no_date_ranking,
        directory_weight: store.settings().directory_weight,
        fusion: match store.settings().vector_fusion {
            VectorFusion::Score { .. } => "score",
            VectorFusion::Rank { .. } => "rank",
        },
        vector_weight: match store.settings().vector_fusion {
            VectorFusion::Score { share } => share,
            VectorFusion::Rank { weight } => weight,
        },
        l1_weight: store.settings().weights.l1,
        path_weight: store.settings().weights.path,
        mode: if embedding.is_some() {
            "hybrid"
        } else {
            "full-text"
        },
        embedder: embedding.map(|embedding| embedding.name().to_owned()),
        query_embed_seconds: round4(query_embed_seconds),
    })
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

/// What the table does not show, on a line under it.
fn summary_line(report: &LocomoReport) -> String {
    format!(
        "{} conversations, {} turns ({} stored, {} exact + {} near duplicates merged); \
         {} questions scored, {} without evidence; search p50 {:.2} ms, p95 {:.2} ms \
         (depth {}); ingest {:.0} memories/s; {}{}",
        report.conversations,
        report.turns,
        report.memories_stored,
        report.merged_exact,
        report.merged_near,
        report.questions_scored,
        report.questions_without_evidence,
        report.search_p50_ms,
        report.search_p95_ms,
        report.search_depth,
        report.ingest_memories_per_s,
        report.mode,
        report
            .embedder
            .as_deref()
            .map_or_else(String::new, |name| format!(" ({name})")),
    )
}

fn render_table(report: &LocomoReport) -> comfy_table::Table {
    let mut table = output::table(&[
        "questions",
        "n",
        "session R@1",
        "session R@5",
        "session R@10",
        "turn R@1",
        "turn R@5",
        "turn R@10",
    ]);
    let row = |label: String, figures: &RecallFigures| {
        vec![
            label,
            figures.questions.to_string(),
            format!("{:.3}", figures.session_recall_at_1),
            format!("{:.3}", figures.session_recall_at_5),
            format!("{:.3}", figures.session_recall_at_10),
            format!("{:.3}", figures.turn_recall_at_1),
            format!("{:.3}", figures.turn_recall_at_5),
            format!("{:.3}", figures.turn_recall_at_10),
        ]
    };
    for category in &report.by_category {
        table.add_row(row(
            format!("{} {}", category.category, category.name),
            &category.recall,
        ));
    }
    let overall = RecallFigures {
        questions: report.questions_scored,
        session_recall_at_1: report.session_recall_at_1,
        session_recall_at_5: report.session_recall_at_5,
        session_recall_at_10: report.session_recall_at_10,
        turn_recall_at_1: report.turn_recall_at_1,
        turn_recall_at_5: report.turn_recall_at_5,
        turn_recall_at_10: report.turn_recall_at_10,
        turn_any_at_10: report.turn_any_at_10,
        turn_all_at_10: report.turn_all_at_10,
    };
    table.add_row(row("all".to_owned(), &overall));
    table
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn turn_refs_read_the_slips_found_in_the_data() {
        let turn = |session, turn| TurnRef { session, turn };
        assert_eq!(TurnRef::parse_all("D3:14"), [turn(3, 14)]);
        assert_eq!(TurnRef::parse_all("D:11:26"), [turn(11, 26)]);
        assert_eq!(TurnRef::parse_all("D8:6; D9:17"), [turn(8, 6), turn(9, 17)]);
        assert!(TurnRef::parse_all("D").is_empty());
    }

    #[test]
    fn session_dates_parse() {
        assert_eq!(
            parse_session_date("1:56 pm on 8 May, 2023"),
            Some(1_683_554_160_000)
        );
        assert!(parse_session_date("10:37 am on 27 June, 2023").is_some());
        assert_eq!(parse_session_date("sometime"), None);
    }

    #[test]
    fn hybrid_evaluation_embeds_memories_and_questions() {
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/locomo/tiny.json"
        );
        let conversations =
            parse_locomo(&std::fs::read_to_string(fixture).unwrap(), &HashMap::new()).unwrap();
        let args = LocomoArgs {
            file: PathBuf::from(fixture),
            errors: None,
            context_before: 2,
            context_after: 1,
            no_date_ranking: false,
            directory_weight: None,
            fusion: None,
            vector_weight: None,
            l1_weight: None,
            path_weight: None,
            embedder: false,
            model_dir: None,
            embed_context: false,
        };
        let embedding =
            Embedding::new(std::sync::Arc::new(crate::memory_cmd::WordsEmbedder)).unwrap();
        let hybrid = evaluate(
            &conversations,
            &args,
            Some(&embedding),
            &ProgressBar::hidden(),
        )
        .unwrap();
        assert_eq!(hybrid.mode, "hybrid");
        assert_eq!(hybrid.embedder.as_deref(), Some("words"));
        let text = evaluate(&conversations, &args, None, &ProgressBar::hidden()).unwrap();
        assert_eq!(text.mode, "full-text");
        assert_eq!(hybrid.questions_scored, text.questions_scored);
        assert!(hybrid.turn_recall_at_10 > 0.0);
    }

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

    #[test]
    fn recall_counts_turns_and_distinct_sessions() {
        let turn = |session, turn| TurnRef { session, turn };
        let evidence: HashSet<TurnRef> = [turn(1, 2), turn(3, 1)].into();
        // Hits: D2:1, then D1:2 and D1:5 merged, then D3:1.
        let ranked = vec![
            vec![turn(2, 1)],
            vec![turn(1, 2), turn(1, 5)],
            vec![turn(3, 1)],
        ];
        let (turns, sessions) = recall_at(&ranked, &evidence);
        assert_eq!(turns, [0.0, 1.0, 1.0]);
        assert_eq!(sessions, [0.0, 1.0, 1.0]);
        let (turns, _) = recall_at(&ranked[1..], &evidence);
        assert_eq!(turns, [0.5, 1.0, 1.0]);
    }
}
