//! Memory store speed: search at 10,000 memories (BM25, date ranking, directory ranking; and
//! hybrid with 384-dimension vectors) and ingest (memories per second, in batches, no vectors).
//!
//! Two synthetic corpora of conversation turns, from a fixed seed so every run measures the same
//! store:
//! - `zipf`: like natural text — words drawn from a Zipf distribution over 20,000 words whose
//!   most frequent 100 are English function words, with the speaker's name in front of every
//!   turn; questions name a speaker and three content words (rank above 100) drawn from the
//!   same distribution.
//! - `dense`: a worst case — content words from only 84, so every question word is in about
//!   1,500 of the 10,000 memories and each query makes FTS5 score thousands of rows.
//!
//! With `SKALD_TEST_DATABASE_URL` set, the search groups run on PostgreSQL too
//! (`memory_store/pg_*`, each store in a schema of its own, dropped at the end).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use skald_core::memory::uri::MemoryUri;
use skald_store::memories::{MemorySettings, MemorySource, MemoryStore, NewMemory, SearchQuery};
use skald_store::{Database, ManualClock, PgMemoryStore, SqliteMemoryStore};

const MEMORIES: usize = 10_000;
const TURNS_PER_SESSION: usize = 25;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;
const T0: i64 = 1_672_531_200_000; // 2023-01-01

const WORDS: &[&str] = &[
    "painting",
    "camping",
    "adoption",
    "pottery",
    "guitar",
    "studio",
    "dance",
    "store",
    "shelter",
    "marathon",
    "garden",
    "recipe",
    "violin",
    "museum",
    "beach",
    "hiking",
    "kids",
    "puppy",
    "festival",
    "concert",
    "workshop",
    "mentor",
    "project",
    "support",
    "group",
    "family",
    "friends",
    "sunrise",
    "lake",
    "mountain",
    "library",
    "novel",
    "poem",
    "game",
    "team",
    "coach",
    "school",
    "career",
    "interview",
    "trip",
    "city",
    "Paris",
    "Rome",
    "Tokyo",
    "volunteer",
    "charity",
    "race",
    "trophy",
    "photo",
    "book",
    "movie",
    "song",
    "class",
    "bakery",
    "cake",
    "cookies",
    "yoga",
    "meditation",
    "therapy",
    "counseling",
    "community",
    "parade",
    "pride",
    "sculpture",
    "canvas",
    "colors",
    "flowers",
    "bowl",
    "vase",
    "clay",
    "business",
    "launch",
    "customers",
    "designs",
    "fashion",
    "hoodie",
    "sneakers",
    "car",
    "accident",
    "hospital",
    "doctor",
    "recovery",
    "promotion",
    "startup",
    "investors",
];
const FILLER: &[&str] = &[
    "I",
    "really",
    "love",
    "the",
    "new",
    "and",
    "it",
    "was",
    "so",
    "great",
    "we",
    "went",
    "to",
    "last",
    "week",
    "with",
    "my",
    "yesterday",
    "that",
    "sounds",
    "amazing",
    "thanks",
    "for",
    "sharing",
    "what",
    "about",
    "you",
    "have",
    "been",
    "up",
    "lately",
    "such",
    "a",
    "fun",
    "time",
];

/// A small deterministic generator (SplitMix64), so the corpus is the same on every run.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

/// Zipf(1) over `VOCABULARY` pronounceable words, by inverse transform on the cumulative weights.
struct Zipf {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

const VOCABULARY: usize = 20_000;

impl Zipf {
    fn new() -> Zipf {
        let mut words: Vec<String> = FUNCTION_WORDS.iter().map(|w| (*w).to_owned()).collect();
        let consonants = [
            "b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v",
        ];
        let vowels = ["a", "e", "i", "o", "u", "ai", "ou"];
        let mut rng = Seeded(3);
        while words.len() < VOCABULARY {
            let syllables = 2 + (rng.next() % 3) as usize;
            let word: String = (0..syllables)
                .map(|_| format!("{}{}", rng.pick(&consonants), rng.pick(&vowels)))
                .collect();
            words.push(word);
        }
        let mut total = 0.0;
        let cumulative = (1..=VOCABULARY)
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect();
        Zipf { words, cumulative }
    }

    fn rank(&self, rng: &mut Seeded) -> usize {
        let total = self.cumulative[VOCABULARY - 1];
        let target = (rng.next() % 1_000_000_000) as f64 / 1e9 * total;
        self.cumulative
            .partition_point(|c| *c < target)
            .min(VOCABULARY - 1)
    }

    fn draw(&self, rng: &mut Seeded) -> &str {
        &self.words[self.rank(rng)]
    }

    /// A word drawn from the distribution below its function words: what a question asks about.
    fn draw_content(&self, rng: &mut Seeded) -> &str {
        loop {
            let rank = self.rank(rng);
            if rank >= FUNCTION_WORDS.len() {
                return &self.words[rank];
            }
        }
    }
}

/// The 100 most frequent English words (function words), in frequency order.
const FUNCTION_WORDS: &[&str] = &[
    "the", "be", "to", "of", "and", "a", "in", "that", "have", "i", "it", "for", "not", "on",
    "with", "he", "as", "you", "do", "at", "this", "but", "his", "by", "from", "they", "we", "say",
    "her", "she", "or", "an", "will", "my", "one", "all", "would", "there", "their", "what", "so",
    "up", "out", "if", "about", "who", "get", "which", "go", "me", "when", "make", "can", "like",
    "time", "no", "just", "him", "know", "take", "people", "into", "year", "your", "good", "some",
    "could", "them", "see", "other", "than", "then", "now", "look", "only", "come", "its", "over",
    "think", "also", "back", "after", "use", "two", "how", "our", "work", "first", "well", "way",
    "even", "new", "want", "because", "any", "these", "give", "day", "most", "us",
];

fn zipf_text(zipf: &Zipf, rng: &mut Seeded, speaker: &str) -> String {
    let length = 10 + (rng.next() % 30) as usize;
    let words: Vec<&str> = (0..length).map(|_| zipf.draw(rng)).collect();
    format!("{speaker}: {}.", words.join(" "))
}

fn turn_text(rng: &mut Seeded, n: usize) -> String {
    let length = 12 + (rng.next() % 30) as usize;
    let mut words: Vec<&str> = Vec::with_capacity(length + 2);
    for _ in 0..length {
        let word = if rng.next() % 3 == 0 {
            rng.pick(WORDS)
        } else {
            rng.pick(FILLER)
        };
        words.push(word);
    }
    format!("{} (turn {n}).", words.join(" "))
}

#[derive(Clone, Copy)]
enum Corpus<'a> {
    Zipf(&'a Zipf),
    Dense,
}

fn memory(corpus: Corpus<'_>, rng: &mut Seeded, n: usize, vectors: bool) -> NewMemory {
    let session = n / TURNS_PER_SESSION;
    let speaker = if n % 2 == 0 { "caroline" } else { "melanie" };
    let text = match corpus {
        Corpus::Zipf(zipf) => zipf_text(zipf, rng, speaker),
        Corpus::Dense => turn_text(rng, n),
    };
    let uri = MemoryUri::parse(&format!(
        "viking://user/{speaker}/memories/events/conv/session-{session}/D{session}:{n}"
    ))
    .unwrap();
    let mut memory = NewMemory::new(uri, text)
        .with_source(MemorySource::new(
            format!("s{session}"),
            [format!("D{session}:{n}")],
        ))
        .created_at(T0 + session as i64 * 3 * DAY_MS);
    if vectors {
        memory = memory.with_embedding(vector(rng));
    }
    memory
}

fn vector(rng: &mut Seeded) -> Vec<f32> {
    (0..384)
        .map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}

fn filled_store(corpus: Corpus<'_>, vectors: bool) -> SqliteMemoryStore {
    let store = SqliteMemoryStore::in_memory_with(
        MemorySettings::default(),
        Arc::new(ManualClock::new(T0)),
    )
    .unwrap();
    fill(store, corpus, vectors)
}

/// The PostgreSQL databases the `pg_*` groups made, to drop at the end.
struct PgSchemas {
    url: String,
    made: Vec<String>,
}

impl PgSchemas {
    fn from_env() -> Option<PgSchemas> {
        let url = std::env::var("SKALD_TEST_DATABASE_URL").ok()?;
        Some(PgSchemas {
            url,
            made: Vec::new(),
        })
    }

    fn filled(&mut self, corpus: Corpus<'_>, vectors: bool) -> PgMemoryStore {
        let schema = format!("bench_memory_{}_{}", std::process::id(), self.made.len());
        let database = Database::connect_in_schema(&self.url, &schema).unwrap();
        self.made.push(schema);
        let store = PgMemoryStore::with(
            database,
            MemorySettings::default(),
            Arc::new(ManualClock::new(T0)),
        )
        .unwrap();
        fill(store, corpus, vectors)
    }
}

impl Drop for PgSchemas {
    fn drop(&mut self) {
        for schema in &self.made {
            let _ = Database::drop_schema(&self.url, schema);
        }
    }
}

fn fill<S: MemoryStore>(store: S, corpus: Corpus<'_>, vectors: bool) -> S {
    let mut rng = Seeded(7);
    let all: Vec<NewMemory> = (0..MEMORIES)
        .map(|n| memory(corpus, &mut rng, n, vectors))
        .collect();
    for batch in all.chunks(TURNS_PER_SESSION) {
        store
            .add_many(&tenant_named("bench"), batch.to_vec())
            .unwrap();
    }
    store
}

const QUESTIONS: &[&str] = &[
    "When did Caroline go to the pride parade?",
    "What did Melanie paint after the camping trip with her kids?",
    "Which city did they visit for the pottery workshop?",
    "What did Caroline say about the adoption interview on 8 May, 2023?",
    "How is the bakery business doing with new customers?",
    "What song did Melanie play on the violin at the concert?",
];

fn zipf_questions(zipf: &Zipf) -> Vec<String> {
    let mut rng = Seeded(5);
    (0..64)
        .map(|n| {
            let speaker = if n % 2 == 0 { "Caroline" } else { "Melanie" };
            let words: Vec<&str> = (0..3).map(|_| zipf.draw_content(&mut rng)).collect();
            format!("What did {speaker} say about the {}?", words.join(" "))
        })
        .collect()
}

fn search(c: &mut Criterion) {
    let zipf = Zipf::new();
    let questions = zipf_questions(&zipf);
    let dense_questions: Vec<String> = QUESTIONS.iter().map(|q| (*q).to_owned()).collect();
    for (name, corpus, questions) in [
        ("zipf", Corpus::Zipf(&zipf), &questions),
        ("dense", Corpus::Dense, &dense_questions),
    ] {
        let store = filled_store(corpus, false);
        let mut group = c.benchmark_group(format!("memory_store/search_10k_{name}"));
        for (label, limit) in [("limit_10", 10), ("limit_50", 50)] {
            let mut next = 0;
            group.bench_function(label, |b| {
                b.iter(|| {
                    next = (next + 1) % questions.len();
                    let query = SearchQuery::text(&questions[next], limit);
                    black_box(store.search(&tenant_named("bench"), &query).unwrap())
                });
            });
        }
        group.finish();
    }

    let hybrid = filled_store(Corpus::Zipf(&zipf), true);
    let mut rng = Seeded(99);
    let query_vector = vector(&mut rng);
    bench_hybrid(
        c,
        "memory_store/hybrid_10k_zipf_384d",
        &hybrid,
        &questions,
        &query_vector,
    );

    let Some(mut schemas) = PgSchemas::from_env() else {
        return;
    };
    for (name, corpus, questions) in [
        ("zipf", Corpus::Zipf(&zipf), &questions),
        ("dense", Corpus::Dense, &dense_questions),
    ] {
        let store = schemas.filled(corpus, false);
        let mut group = c.benchmark_group(format!("memory_store/pg_search_10k_{name}"));
        let mut next = 0;
        group.bench_function("limit_10", |b| {
            b.iter(|| {
                next = (next + 1) % questions.len();
                let query = SearchQuery::text(&questions[next], 10);
                black_box(store.search(&tenant_named("bench"), &query).unwrap())
            });
        });
        group.finish();
    }
    let hybrid = schemas.filled(Corpus::Zipf(&zipf), true);
    bench_hybrid(
        c,
        "memory_store/pg_hybrid_10k_zipf_384d",
        &hybrid,
        &questions,
        &query_vector,
    );
}

fn bench_hybrid(
    c: &mut Criterion,
    name: &str,
    store: &dyn MemoryStore,
    questions: &[String],
    query_vector: &[f32],
) {
    let mut group = c.benchmark_group(name);
    let mut next = 0;
    group.bench_function("limit_10", |b| {
        b.iter(|| {
            next = (next + 1) % questions.len();
            let query = SearchQuery::text(&questions[next], 10).with_vector(query_vector.to_vec());
            black_box(store.search(&tenant_named("bench"), &query).unwrap())
        });
    });
    group.finish();
}

fn ingest(c: &mut Criterion) {
    let zipf = Zipf::new();
    let mut group = c.benchmark_group("memory_store/ingest");
    group.throughput(Throughput::Elements(1000));
    group.bench_function("zipf_1000_memories_batches_of_25_into_5k", |b| {
        b.iter_batched(
            || {
                // A store that already holds 5,000 memories, and 1,000 new ones to add.
                let corpus = Corpus::Zipf(&zipf);
                let store = SqliteMemoryStore::in_memory_with(
                    MemorySettings::default(),
                    Arc::new(ManualClock::new(T0)),
                )
                .unwrap();
                let mut rng = Seeded(11);
                let old: Vec<NewMemory> = (0..5000)
                    .map(|n| memory(corpus, &mut rng, n, false))
                    .collect();
                for batch in old.chunks(TURNS_PER_SESSION) {
                    store
                        .add_many(&tenant_named("bench"), batch.to_vec())
                        .unwrap();
                }
                let new: Vec<NewMemory> = (5000..6000)
                    .map(|n| memory(corpus, &mut rng, n, false))
                    .collect();
                (store, new)
            },
            |(store, new)| {
                for batch in new.chunks(TURNS_PER_SESSION) {
                    store
                        .add_many(&tenant_named("bench"), batch.to_vec())
                        .unwrap();
                }
                store
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = search, ingest
}
criterion_main!(benches);

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
