//! Local embedding throughput on the CPU: all-MiniLM-L6-v2 (the directory `SKALD_TEST_MINILM`
//! names) over short memory-like texts, in batches of 32, and one short query alone (what a
//! recall waits for). Without the variable the benchmark says so and measures nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use skald_llm::{LocalEmbedder, LocalEmbeddingConfig};

/// Short texts of 6–14 words, the length of an L0 abstract or a chat message.
fn short_texts(count: usize) -> Vec<String> {
    let subjects = ["The user", "Alice", "The build", "Our team", "The agent"];
    let verbs = ["prefers", "reported", "fixed", "deployed", "asked about"];
    let objects = [
        "dark mode in every editor",
        "the flaky integration test on CI last Tuesday",
        "a memory leak in the session store",
        "the new release to staging",
        "how to rotate the API keys safely",
    ];
    (0..count)
        .map(|n| {
            format!(
                "{} {} {} (note {n}).",
                subjects[n % subjects.len()],
                verbs[(n / 5) % verbs.len()],
                objects[(n / 25 + n) % objects.len()]
            )
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let Some(dir) = std::env::var_os("SKALD_TEST_MINILM") else {
        eprintln!(
            "local_embed: set SKALD_TEST_MINILM to an all-MiniLM-L6-v2 directory; nothing measured"
        );
        return;
    };
    let mut config = LocalEmbeddingConfig::new(PathBuf::from(dir));
    config.batch_size = 32;
    let embedder = LocalEmbedder::load(&config).unwrap();

    let texts = short_texts(64);
    let mut group = c.benchmark_group("local_embed");
    group.sample_size(10);
    group.throughput(Throughput::Elements(texts.len() as u64));
    group.bench_function("minilm_64_short_texts_batch_32", |b| {
        b.iter(|| embedder.embed_blocking(black_box(&texts)).unwrap());
    });
    let query = vec!["what editor theme does the user like?".to_owned()];
    group.throughput(Throughput::Elements(1));
    group.bench_function("minilm_one_query", |b| {
        b.iter(|| embedder.embed_blocking(black_box(&query)).unwrap());
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
