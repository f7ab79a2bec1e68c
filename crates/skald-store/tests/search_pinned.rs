//! Search results pinned to the last bit: hits, order and every score of a few queries over one
//! corpus, under each fusion setting. The ranking policy is meant to change only on purpose; a
//! refactoring of how the store computes it (the split of the policy from the SQLite backend)
//! must leave every line of these snapshots as it is.
//!
//! The PostgreSQL store must give the very same lines (its BM25 is FTS5's, recomputed): the
//! `postgres_*` tests run each corpus on it and compare, when `SKALD_TEST_DATABASE_URL` is set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pg;

use std::fmt::Write as _;
use std::sync::Arc;

use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use skald_store::memories::{
    MemorySettings, MemoryStore, NewMemory, SearchFilter, SearchHit, SearchQuery,
    SqliteMemoryStore, VectorFusion,
};
use skald_store::{ManualClock, PgMemoryStore};

const T0: i64 = 1_700_000_000_000;
const DAY: i64 = 24 * 60 * 60 * 1000;

fn uri(text: &str) -> MemoryUri {
    MemoryUri::parse(text).unwrap()
}

/// An entry of the corpus: URI, content, creation time, vector, given L0.
type Entry = (
    &'static str,
    &'static str,
    i64,
    Option<[f32; 3]>,
    Option<&'static str>,
);

/// Entries in several directories, a few with given abstracts, some with vectors, over months;
/// `with_other_tenant` adds a second tenant's entries, so the full-text index holds more rows
/// than the searched tenant's (the tenant-restricted query path).
fn corpus(settings: MemorySettings, with_other_tenant: bool) -> SqliteMemoryStore {
    let clock = Arc::new(ManualClock::new(T0));
    fill(
        SqliteMemoryStore::in_memory_with(settings, clock).unwrap(),
        with_other_tenant,
    )
}

/// The corpus written into `store`.
fn fill<S: MemoryStore>(store: S, with_other_tenant: bool) -> S {
    let entries: [Entry; 11] = [
        (
            "viking://user/alice/memories/events/rome.md",
            "Alice flew to Rome for a pottery workshop with her sister.",
            T0,
            Some([0.9, 0.1, 0.0]),
            None,
        ),
        (
            "viking://user/alice/memories/events/lyon.md",
            "Alice took a pottery class in Lyon and bought a small kiln.",
            T0 + 40 * DAY,
            Some([0.7, 0.3, 0.1]),
            None,
        ),
        (
            "viking://user/alice/memories/preferences/clay.md",
            "Alice prefers stoneware clay for pottery and dislikes porcelain.",
            T0 + 80 * DAY,
            None,
            Some("Stoneware over porcelain"),
        ),
        (
            "viking://user/alice/memories/preferences/editor.md",
            "Alice prefers dark mode in every editor and a large font.",
            T0 + 81 * DAY,
            Some([0.0, 0.2, 0.9]),
            None,
        ),
        (
            "viking://user/alice/memories/entities/bob.md",
            "Bob is Alice's brother; he repairs kilns in Marseille.",
            T0 + 90 * DAY,
            Some([0.4, 0.4, 0.4]),
            None,
        ),
        (
            "viking://agent/main/memories/cases/kiln.md",
            "The kiln controller failed during a pottery firing; a new thermocouple fixed it.",
            T0 + 120 * DAY,
            Some([0.5, 0.5, 0.0]),
            Some("Kiln thermocouple failure"),
        ),
        (
            "viking://agent/main/memories/cases/editor.md",
            "The editor lost the dark theme after an update; reinstalling the theme fixed it.",
            T0 + 121 * DAY,
            None,
            None,
        ),
        (
            "viking://resources/studio/glaze.md",
            "Glaze firing happens in the studio kiln on Fridays.",
            T0 + 130 * DAY,
            Some([0.6, 0.2, 0.2]),
            None,
        ),
        (
            "viking://resources/studio/wheel.md",
            "Pottery wheel maintenance checklist for the studio.",
            T0 + 131 * DAY,
            None,
            None,
        ),
        (
            "viking://resources/studio/class.md",
            "The pottery class meets on Tuesdays in the studio.",
            T0 + 132 * DAY,
            Some([0.8, 0.0, 0.2]),
            None,
        ),
        (
            "viking://resources/garden/roses.md",
            "Prune the roses in March and water them in the evening.",
            T0 + 140 * DAY,
            None,
            None,
        ),
    ];
    for (at, content, created, vector, l0) in entries {
        let mut memory = NewMemory::new(uri(at), content).created_at(created);
        if let Some(vector) = vector {
            memory = memory.with_embedding(vector.to_vec());
        }
        if let Some(l0) = l0 {
            memory = memory.with_l0(l0);
        }
        store.add(&tenant_named("acme"), memory).unwrap();
    }
    if with_other_tenant {
        for (at, content) in [
            (
                "viking://user/carol/memories/events/kiln.md",
                "Carol fired her first pottery in a gas kiln.",
            ),
            (
                "viking://resources/notes/pottery.md",
                "Pottery notes: wedging, throwing, trimming, glazing.",
            ),
        ] {
            store
                .add(&tenant_named("globex"), NewMemory::new(uri(at), content))
                .unwrap();
        }
    }
    store
}

/// Every field of every hit, floats in their shortest exact form.
fn render(hits: &[SearchHit]) -> String {
    let mut out = String::new();
    for hit in hits {
        writeln!(
            out,
            "{} score={:?} text={:?} bm25={:?} relevance={:?} date={:?} vector={:?} cosine={:?} \
             directory={:?}",
            hit.memory.uri,
            hit.score,
            hit.text_rank,
            hit.bm25,
            hit.text_relevance,
            hit.date_rank,
            hit.vector_rank,
            hit.cosine,
            hit.directory_rank
        )
        .unwrap();
    }
    out
}

fn queries() -> Vec<(&'static str, SearchQuery)> {
    let date = chrono::DateTime::from_timestamp_millis(T0 + 40 * DAY).unwrap();
    let dated = format!(
        "Where did Alice take a pottery class on {}?",
        date.format("%-d %B, %Y")
    );
    vec![
        ("text", SearchQuery::text("pottery kiln studio", 10)),
        (
            "common_and_rare_terms",
            SearchQuery::text("Alice pottery Marseille brother", 10),
        ),
        ("dated", SearchQuery::text(&dated, 10)),
        (
            "hybrid",
            SearchQuery::text("pottery class kiln", 10).with_vector(vec![0.8, 0.1, 0.1]),
        ),
        (
            "vector_only",
            SearchQuery::text("", 5).with_vector(vec![0.1, 0.2, 0.9]),
        ),
        (
            "filtered",
            SearchQuery::text("pottery kiln editor dark", 10).with_filter(SearchFilter {
                categories: vec![MemoryCategory::Cases, MemoryCategory::Events],
                under: None,
                created_from_ms: Some(T0 + DAY),
                created_until_ms: None,
            }),
        ),
        (
            "under",
            SearchQuery::text("pottery kiln", 10)
                .with_filter(SearchFilter {
                    under: Some(uri("viking://resources")),
                    ..SearchFilter::default()
                })
                .with_vector(vec![0.5, 0.3, 0.2]),
        ),
    ]
}

fn run(store: &dyn MemoryStore) -> String {
    let mut out = String::new();
    for (name, query) in queries() {
        let hits = store.search(&tenant_named("acme"), &query).unwrap();
        writeln!(out, "## {name}\n{}", render(&hits)).unwrap();
    }
    out
}

#[test]
fn search_results_with_default_settings_are_pinned() {
    insta::assert_snapshot!(run(&corpus(MemorySettings::default(), true)));
}

#[test]
fn search_results_of_a_tenant_holding_the_whole_index_are_pinned() {
    insta::assert_snapshot!(run(&corpus(MemorySettings::default(), false)));
}

#[test]
fn search_results_with_rank_fusion_are_pinned() {
    let settings = MemorySettings {
        vector_fusion: VectorFusion::Rank { weight: 0.3 },
        ..MemorySettings::default()
    };
    insta::assert_snapshot!(run(&corpus(settings, true)));
}

#[test]
fn search_results_without_the_directory_ranking_are_pinned() {
    let settings = MemorySettings {
        directory_weight: 0.0,
        candidates: 4,
        ..MemorySettings::default()
    };
    insta::assert_snapshot!(run(&corpus(settings, true)));
}

#[test]
fn a_database_file_searched_on_readers_gives_the_same_results() {
    // The file-backed store searches on its reader pool, with the caches shared by the
    // readers: the same hits and scores as the in-memory store, cold and warm.
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let on_file = fill(
        SqliteMemoryStore::open_with(
            dir.path().join("skald.sqlite3"),
            MemorySettings::default(),
            clock,
        )
        .unwrap(),
        true,
    );
    let expected = run(&corpus(MemorySettings::default(), true));
    assert_eq!(run(&on_file), expected);
    assert_eq!(run(&on_file), expected, "the warm caches changed a result");
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

/// The settings of each pinned snapshot.
fn pinned_settings() -> Vec<(MemorySettings, bool)> {
    vec![
        (MemorySettings::default(), true),
        (MemorySettings::default(), false),
        (
            MemorySettings {
                vector_fusion: VectorFusion::Rank { weight: 0.3 },
                ..MemorySettings::default()
            },
            true,
        ),
        (
            MemorySettings {
                directory_weight: 0.0,
                candidates: 4,
                ..MemorySettings::default()
            },
            true,
        ),
    ]
}

#[test]
fn postgres_search_results_are_sqlites_to_the_last_bit() {
    let Some(schemas) = pg::Schemas::new("pinned") else {
        return;
    };
    for (settings, with_other_tenant) in pinned_settings() {
        let clock = Arc::new(ManualClock::new(T0));
        let on_postgres = fill(
            PgMemoryStore::with(schemas.fresh(), settings, clock).unwrap(),
            with_other_tenant,
        );
        let expected = run(&corpus(settings, with_other_tenant));
        assert_eq!(run(&on_postgres), expected, "{settings:?}");
        assert_eq!(
            run(&on_postgres),
            expected,
            "the warm caches changed a result"
        );
    }
}

/// Updates and forgets take rows out of the index; FTS5's BM25 still counts them in its totals,
/// and PostgreSQL's must too.
fn churn(store: &dyn MemoryStore) {
    let acme = tenant_named("acme");
    store
        .update(
            &acme,
            NewMemory::new(
                uri("viking://user/alice/memories/events/lyon.md"),
                "Alice took a second pottery class in Lyon; the kiln broke.",
            ),
        )
        .unwrap();
    store
        .forget(
            &acme,
            &uri("viking://user/alice/memories/preferences/editor.md"),
        )
        .unwrap();
}

#[test]
fn postgres_search_results_after_updates_and_forgets_are_sqlites() {
    let Some(schemas) = pg::Schemas::new("churn") else {
        return;
    };
    let clock = Arc::new(ManualClock::new(T0));
    let on_postgres = fill(
        PgMemoryStore::with(schemas.fresh(), MemorySettings::default(), clock).unwrap(),
        true,
    );
    let on_sqlite = corpus(MemorySettings::default(), true);
    churn(&on_postgres);
    churn(&on_sqlite);
    assert_eq!(run(&on_postgres), run(&on_sqlite));
}
