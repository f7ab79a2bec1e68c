//! The measuring of `skald eval locomo`: every conversation written into one in-memory store,
//! every question searched, and the recall of its evidence turns and sessions tallied overall
//! and by category, with what per-turn recall would inject ([`super::injection`]), the search
//! latency and the ingest rate.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use anyhow::Result;
use indicatif::ProgressBar;
use serde::Serialize;
use skald_engine::ScratchMemoryStore;
use skald_engine::storage::{
    AddOutcome, DuplicateKind, MemoryError, MemorySettings, MemoryStore, SearchQuery, VectorFusion,
};

use skald_core::memory::recall::RecallSettings;

use super::injection::{Injected, Injector};
use super::locomo::{Conversation, TurnRef, category_name, session_memories, tenant_of};
use super::{Embedding, LocomoArgs, vector_fusion};

/// How deep each question's ranking goes (enough hits for ten distinct sessions).
const SEARCH_DEPTH: usize = 50;

const CUTOFFS: [usize; 3] = [1, 5, 10];

/// Recall sums of one group of questions, and what recall injected for them.
#[derive(Debug, Clone, Default)]
struct Tally {
    questions: usize,
    turn: [f64; 3],
    session: [f64; 3],
    /// Questions with at least one, and with all, evidence turns in the first 10 hits.
    any_at_10: usize,
    all_at_10: usize,
    injected: Injected,
    nothing_injected: usize,
}

impl Tally {
    fn add(&mut self, turn: [f64; 3], session: [f64; 3], injected: Injected) {
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
        self.injected.memories += injected.memories;
        self.injected.from_evidence_sessions += injected.from_evidence_sessions;
        self.injected.holding_evidence_turns += injected.holding_evidence_turns;
        if injected.memories == 0 {
            self.nothing_injected += 1;
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
            injection_precision: share(
                self.injected.from_evidence_sessions,
                self.injected.memories,
            ),
            injection_turn_precision: share(
                self.injected.holding_evidence_turns,
                self.injected.memories,
            ),
            memories_injected: self.injected.memories,
            nothing_injected: self.nothing_injected,
        }
    }
}

/// `part / whole`, rounded; 0 when there is no whole.
fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        round4(part as f64 / whole as f64)
    }
}

/// What recall injected for questions asked of another conversation.
#[derive(Debug, Clone, Copy, Default)]
struct Unrelated {
    memories: usize,
    questions_with_injection: usize,
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
    /// Share of the memories recall injected that come from an evidence session.
    pub injection_precision: f64,
    /// Share of the memories recall injected that hold an evidence turn.
    pub injection_turn_precision: f64,
    /// Memories recall injected, over every question.
    pub memories_injected: usize,
    /// Questions for which recall injected nothing.
    pub nothing_injected: usize,
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
    /// Share of the memories per-turn recall injected (the engine's own selection, floor and
    /// budget) that come from one of the question's evidence sessions.
    pub injection_precision: f64,
    /// Share of them that hold one of the question's evidence turns.
    pub injection_turn_precision: f64,
    pub memories_injected: usize,
    /// Scored questions for which recall injected nothing.
    pub questions_nothing_injected: usize,
    /// Every scored question is also asked of the next conversation's memories (other people,
    /// other events: nothing there is about it): the memories recall injected there, all noise…
    pub unrelated_memories_injected: usize,
    /// …and the questions for which it injected any.
    pub unrelated_questions_with_injection: usize,
    /// The recall settings the injection ran with.
    pub injection_min_term_coverage: f64,
    pub injection_min_text_relevance: f64,
    pub injection_max_results: usize,
    pub injection_max_tokens: u64,
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
    // `--database`: the same on PostgreSQL, in a schema of its own dropped at the end.
    let scratch = ScratchMemoryStore::open(args.database.as_deref(), settings)?;
    let store: &dyn MemoryStore = scratch.store();
    let mut memory_turns: HashMap<i64, Vec<TurnRef>> = HashMap::new();
    // The same by URI, which is what recall reports.
    let mut uri_turns: HashMap<String, Vec<TurnRef>> = HashMap::new();
    let mut recall_settings = RecallSettings::default();
    if let Some(floor) = args.min_text_relevance {
        recall_settings.min_text_relevance = floor;
    }
    let injector = Injector::new(scratch.shared(), recall_settings, embedding)?;
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
                let covered: Vec<TurnRef> = memory
                    .source_entry_ids()
                    .flat_map(TurnRef::parse_all)
                    .collect();
                uri_turns.insert(memory.uri.to_string(), covered.clone());
                memory_turns.insert(memory.id, covered);
            }
        }
        ingest_seconds += started.elapsed().as_secs_f64();
    }
    let mut unrelated = Unrelated::default();
    for (index, conversation) in conversations.iter().enumerate() {
        let tenant = tenant_of(&conversation.sample_id, index)?;
        let next = (index + 1) % conversations.len();
        let unrelated_tenant = match conversations.get(next) {
            Some(other) if next != index => Some(tenant_of(&other.sample_id, next)?),
            Some(_) | None => None,
        };
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
                Err(MemoryError::InvalidInput { field: "query", .. }) => Vec::new(),
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
            let injected = injector.inject(&tenant, &question.text, &evidence, &uri_turns)?;
            // The same question asked of another conversation's memories: the store holds
            // nothing about it there, so whatever recall injects is noise.
            if let Some(other) = &unrelated_tenant {
                let noise = injector.inject(other, &question.text, &evidence, &uri_turns)?;
                unrelated.memories += noise.memories;
                unrelated.questions_with_injection += usize::from(noise.memories > 0);
            }
            tally.add(turn, session, injected);
            by_category
                .entry(question.category)
                .or_default()
                .add(turn, session, injected);
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
        injection_precision: overall.injection_precision,
        injection_turn_precision: overall.injection_turn_precision,
        memories_injected: overall.memories_injected,
        questions_nothing_injected: overall.nothing_injected,
        unrelated_memories_injected: unrelated.memories,
        unrelated_questions_with_injection: unrelated.questions_with_injection,
        injection_min_term_coverage: injector.settings().min_term_coverage,
        injection_min_text_relevance: injector.settings().min_text_relevance,
        injection_max_results: injector.settings().max_results,
        injection_max_tokens: injector.settings().max_tokens,
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
        directory_weight: settings.directory_weight,
        fusion: match settings.vector_fusion {
            VectorFusion::Score { .. } => "score",
            VectorFusion::Rank { .. } => "rank",
        },
        vector_weight: match settings.vector_fusion {
            VectorFusion::Score { share } => share,
            VectorFusion::Rank { weight } => weight,
        },
        l1_weight: settings.weights.l1,
        path_weight: settings.weights.path,
        mode: if embedding.is_some() {
            "hybrid"
        } else {
            "full-text"
        },
        embedder: embedding.map(|embedding| embedding.name().to_owned()),
        query_embed_seconds: round4(query_embed_seconds),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::path::PathBuf;

    use super::*;
    use crate::eval_cmd::locomo::parse_locomo;

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
            database: None,
            min_text_relevance: None,
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
