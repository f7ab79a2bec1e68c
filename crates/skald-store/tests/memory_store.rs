//! The memory store's promises, one test each: URIs checked before storage, the tree, add-only
//! history, forgetting, duplicate merging, tenants, search filters and fusion, and bad input that
//! changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use skald_store::ManualClock;
use skald_store::memories::{
    AddOutcome, DirEntryKind, DuplicateKind, MemoryError, MemorySettings, MemorySource,
    MemoryStatus, MemoryStore, NewMemory, SearchFilter, SearchQuery, SqliteMemoryStore,
    UpdateOutcome, VectorFusion, WriteAction,
};

const T0: i64 = 1_700_000_000_000;
const DAY: i64 = 24 * 60 * 60 * 1000;

fn uri(text: &str) -> MemoryUri {
    MemoryUri::parse(text).unwrap()
}

fn store() -> (SqliteMemoryStore, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0));
    let store =
        SqliteMemoryStore::in_memory_with(MemorySettings::default(), clock.clone()).unwrap();
    (store, clock)
}

fn add(store: &SqliteMemoryStore, at: &str, content: &str) -> AddOutcome {
    store
        .add(&tenant_named("acme"), NewMemory::new(uri(at), content))
        .unwrap()
}

fn added_id(outcome: &AddOutcome) -> i64 {
    match outcome {
        AddOutcome::Added(memory) => memory.id,
        AddOutcome::Merged(merge) => panic!(
            "expected an added entry, got a merge into {}",
            merge.into.uri
        ),
    }
}

fn stored_rows(store: &SqliteMemoryStore) -> u64 {
    let stats = store.stats(&tenant_named("acme")).unwrap();
    stats.live + stats.superseded + stats.forgotten
}

#[test]
fn entries_get_derived_levels_category_and_timestamps() {
    let (store, _) = store();
    let content = "Alice prefers dark mode in every editor. She asked for it on three machines.";
    let memory = add(
        &store,
        "viking://user/alice/memories/preferences/editor.md",
        content,
    );
    let memory = memory.memory();
    assert_eq!(memory.l0, "Alice prefers dark mode in every editor.");
    assert_eq!(memory.l1, content);
    assert_eq!(memory.l2, content);
    assert_eq!(memory.category, MemoryCategory::Preferences);
    assert_eq!(memory.version, 1);
    assert_eq!(memory.priority, 5);
    assert_eq!((memory.created_at_ms, memory.updated_at_ms), (T0, T0));
    assert_eq!(memory.status, MemoryStatus::Live);

    let given = NewMemory::new(
        uri("viking://agent/main/memories/cases/ci.md"),
        "The CI cache key ignored the target triple, so ARM builds reused x86 artifacts.",
    )
    .with_l0("CI cache key bug")
    .with_l1("ARM builds reused x86 artifacts until the key included the triple.")
    .with_priority(9)
    .with_source(MemorySource::new("sess-1", ["e1", "e2"]))
    .created_at(T0 - DAY);
    let stored = store.add(&tenant_named("acme"), given).unwrap();
    let stored = stored.memory();
    assert_eq!(stored.l0, "CI cache key bug");
    assert_eq!(stored.priority, 9);
    assert_eq!(stored.created_at_ms, T0 - DAY);
    assert_eq!(stored.category, MemoryCategory::Cases);
    assert_eq!(stored.source_entry_ids().collect::<Vec<_>>(), ["e1", "e2"]);
    assert_eq!(
        store.get(&tenant_named("acme"), &stored.uri).unwrap(),
        *stored
    );
}

#[test]
fn tree_listing_follows_the_uris() {
    let (store, _) = store();
    add(
        &store,
        "viking://user/alice/memories/preferences/editor.md",
        "Alice prefers dark mode.",
    );
    add(
        &store,
        "viking://user/alice/memories/events/2023/trip.md",
        "Alice went to Rome in May.",
    );
    add(
        &store,
        "viking://user/alice/memories/events/2024/move.md",
        "Alice moved to Lyon.",
    );
    add(
        &store,
        "viking://agent/main/tools/run_shell",
        "Long commands need a timeout flag.",
    );
    add(
        &store,
        "viking://resources/docs/auth.md",
        "Tokens expire after one hour.",
    );

    let root: Vec<String> = store
        .ls(&tenant_named("acme"), &MemoryUri::root())
        .unwrap()
        .iter()
        .map(|entry| entry.uri.to_string())
        .collect();
    assert_eq!(
        root,
        ["viking://agent", "viking://resources", "viking://user"]
    );

    let memories = store
        .ls(&tenant_named("acme"), &uri("viking://user/alice/memories"))
        .unwrap();
    let listed: Vec<(String, DirEntryKind)> = memories
        .into_iter()
        .map(|e| (e.uri.to_string(), e.kind))
        .collect();
    assert_eq!(
        listed[0],
        (
            "viking://user/alice/memories/events".to_owned(),
            DirEntryKind::Directory { entries: 2 }
        )
    );
    assert_eq!(listed[1].0, "viking://user/alice/memories/preferences");

    let events = store
        .ls(
            &tenant_named("acme"),
            &uri("viking://user/alice/memories/events/2023"),
        )
        .unwrap();
    assert!(
        matches!(&events[0].kind, DirEntryKind::Entry { l0, .. } if l0 == "Alice went to Rome in May.")
    );
    // An entry lists as itself; an empty directory lists nothing.
    assert_eq!(
        store
            .ls(
                &tenant_named("acme"),
                &uri("viking://agent/main/tools/run_shell")
            )
            .unwrap()
            .len(),
        1
    );
    assert!(
        store
            .ls(&tenant_named("acme"), &uri("viking://user/bob"))
            .unwrap()
            .is_empty()
    );

    let tree = store
        .tree(&tenant_named("acme"), &uri("viking://user/alice"), 8)
        .unwrap();
    insta::assert_snapshot!(tree.render(), @r"
    viking://user/alice/ (3)
      memories/ (3)
        events/ (2)
          2023/ (1)
            trip.md — Alice went to Rome in May.
          2024/ (1)
            move.md — Alice moved to Lyon.
        preferences/ (1)
          editor.md — Alice prefers dark mode.
    ");
    let shallow = store
        .tree(&tenant_named("acme"), &MemoryUri::root(), 1)
        .unwrap();
    assert_eq!(shallow.children.len(), 3);
    assert!(
        shallow
            .children
            .iter()
            .all(|child| child.children.is_empty())
    );
}

#[test]
fn an_update_supersedes_and_history_keeps_every_version() {
    let (store, clock) = store();
    let at = uri("viking://user/alice/memories/preferences/theme.md");
    let first = store
        .add(
            &tenant_named("acme"),
            NewMemory::new(at.clone(), "Alice prefers dark mode.")
                .with_source(MemorySource::new("s1", ["a"])),
        )
        .unwrap();
    clock.advance(DAY);
    let outcome = store
        .update(
            &tenant_named("acme"),
            NewMemory::new(at.clone(), "Alice switched to light mode."),
        )
        .unwrap();
    let UpdateOutcome::Updated { memory, previous } = outcome else {
        panic!("expected a new version");
    };
    assert_eq!(memory.version, 2);
    assert_eq!(memory.supersedes, Some(first.memory().id));
    assert_eq!(
        memory.created_at_ms, T0,
        "the entry's creation time is kept"
    );
    assert_eq!(memory.updated_at_ms, T0 + DAY);
    assert_eq!(
        memory.source_entry_ids().collect::<Vec<_>>(),
        ["a"],
        "sources are inherited"
    );
    assert_eq!(
        previous.status,
        MemoryStatus::Superseded {
            by: memory.id,
            at_ms: T0 + DAY
        }
    );

    let history = store.history(&tenant_named("acme"), &at).unwrap();
    assert_eq!(
        history.iter().map(|m| m.l2.as_str()).collect::<Vec<_>>(),
        ["Alice prefers dark mode.", "Alice switched to light mode."]
    );
    assert_eq!(
        store.get(&tenant_named("acme"), &at).unwrap().l2,
        "Alice switched to light mode."
    );
    // Search sees only the live version.
    let hits = store
        .search(&tenant_named("acme"), &SearchQuery::text("dark", 10))
        .unwrap();
    assert!(hits.is_empty(), "{hits:?}");
    // Writing the same again writes nothing.
    let again = store
        .update(
            &tenant_named("acme"),
            NewMemory::new(at.clone(), "Alice switched to light mode."),
        )
        .unwrap();
    assert!(matches!(again, UpdateOutcome::Unchanged(_)));
    assert_eq!(store.history(&tenant_named("acme"), &at).unwrap().len(), 2);
    // Updating what does not exist is an error.
    let missing = store
        .update(
            &tenant_named("acme"),
            NewMemory::new(
                uri("viking://user/alice/memories/preferences/none.md"),
                "x y",
            ),
        )
        .unwrap_err();
    assert!(matches!(missing, MemoryError::NotFound { .. }), "{missing}");
}

#[test]
fn forget_marks_a_tombstone_and_keeps_the_row() {
    let (store, clock) = store();
    let at = uri("viking://user/alice/memories/entities/bob.md");
    add(&store, at.as_str(), "Bob leads the payments team.");
    clock.advance(1000);
    let forgotten = store.forget(&tenant_named("acme"), &at).unwrap();
    assert_eq!(
        forgotten.status,
        MemoryStatus::Forgotten { at_ms: T0 + 1000 }
    );
    let error = store.get(&tenant_named("acme"), &at).unwrap_err();
    assert!(
        matches!(error, MemoryError::Forgotten { at_ms, .. } if at_ms == T0 + 1000),
        "{error}"
    );
    assert!(error.to_string().contains("history"));
    assert!(
        store
            .search(
                &tenant_named("acme"),
                &SearchQuery::text("payments team", 5)
            )
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .ls(&tenant_named("acme"), &uri("viking://user/alice"))
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.history(&tenant_named("acme"), &at).unwrap().len(), 1);
    assert!(matches!(
        store.forget(&tenant_named("acme"), &at),
        Err(MemoryError::Forgotten { .. })
    ));
    let stats = store.stats(&tenant_named("acme")).unwrap();
    assert_eq!((stats.live, stats.forgotten), (0, 1));
    // The URI can hold a new entry again, as version 2.
    let again = add(&store, at.as_str(), "Bob moved to the data team.");
    assert_eq!(again.memory().version, 2);
    assert_eq!(again.memory().supersedes, Some(forgotten.id));
}

#[test]
fn rows_are_never_deleted_or_rewritten_even_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skald.sqlite3");
    let store = SqliteMemoryStore::open(&path).unwrap();
    store
        .add(
            &tenant_named("acme"),
            NewMemory::new(uri("viking://resources/a.md"), "Some resource text."),
        )
        .unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let delete = conn.execute("DELETE FROM memories", []).unwrap_err();
    assert!(delete.to_string().contains("add-only"), "{delete}");
    let rewrite = conn
        .execute("UPDATE memories SET l2 = 'changed'", [])
        .unwrap_err();
    assert!(rewrite.to_string().contains("add-only"), "{rewrite}");
    conn.execute("UPDATE memories SET forgotten_at_ms = 1", [])
        .unwrap();
    let twice = conn
        .execute("UPDATE memories SET forgotten_at_ms = 2", [])
        .unwrap_err();
    assert!(twice.to_string().contains("stays as it is"), "{twice}");
}

#[test]
fn exact_duplicates_are_merged_with_their_source() {
    let (store, _) = store();
    let first = add(
        &store,
        "viking://user/alice/memories/preferences/editor.md",
        "Alice prefers dark mode!",
    );
    let second = store
        .add(
            &tenant_named("acme"),
            NewMemory::new(
                uri("viking://user/alice/memories/preferences/theme.md"),
                "alice prefers   DARK mode",
            )
            .with_source(MemorySource::new("s2", ["m7"])),
        )
        .unwrap();
    let AddOutcome::Merged(merge) = second else {
        panic!("expected a merge");
    };
    assert_eq!(merge.kind, DuplicateKind::Exact);
    assert_eq!(
        merge.requested_uri.as_str(),
        "viking://user/alice/memories/preferences/theme.md"
    );
    assert_eq!(merge.into.id, first.memory().id);
    assert_eq!(merge.into.source_entry_ids().collect::<Vec<_>>(), ["m7"]);
    assert!(matches!(
        store.get(
            &tenant_named("acme"),
            &uri("viking://user/alice/memories/preferences/theme.md")
        ),
        Err(MemoryError::NotFound { .. })
    ));
    let stats = store.stats(&tenant_named("acme")).unwrap();
    assert_eq!((stats.live, stats.merged), (1, 1));
    // Re-adding at the same URI is idempotent: a merge, not an error.
    let again = add(
        &store,
        "viking://user/alice/memories/preferences/editor.md",
        "Alice prefers dark mode!",
    );
    assert!(matches!(again, AddOutcome::Merged(_)));
    // Another owner keeps its own copy.
    let other = add(
        &store,
        "viking://user/bob/memories/preferences/editor.md",
        "Alice prefers dark mode!",
    );
    assert!(matches!(other, AddOutcome::Added(_)));
}

#[test]
fn near_duplicates_are_merged_and_the_threshold_is_configurable() {
    let text = "The deploy script must run migrations before restarting the web workers, otherwise requests fail for a minute and the on-call engineer gets paged at night";
    let near = "The deploy script must run migrations before restarting the API workers, otherwise requests fail for a minute and the on-call engineer gets paged at night";
    let (store, _) = store();
    add(
        &store,
        "viking://agent/main/memories/patterns/deploy.md",
        text,
    );
    let outcome = add(
        &store,
        "viking://agent/main/memories/patterns/deploy-2.md",
        near,
    );
    let AddOutcome::Merged(merge) = outcome else {
        panic!("expected a near-duplicate merge");
    };
    let DuplicateKind::Near { similarity } = merge.kind else {
        panic!("expected a near duplicate, got {:?}", merge.kind);
    };
    assert!((0.8..1.0).contains(&similarity), "{similarity}");
    assert_eq!(merge.into.l2, text);

    // Exact-only settings store it; a threshold of 0.95 does too.
    for threshold in [None, Some(0.95)] {
        let settings = MemorySettings {
            near_duplicate_threshold: threshold,
            ..MemorySettings::default()
        };
        let strict =
            SqliteMemoryStore::in_memory_with(settings, Arc::new(ManualClock::new(T0))).unwrap();
        strict
            .add(
                &tenant_named("acme"),
                NewMemory::new(uri("viking://agent/main/memories/patterns/a"), text),
            )
            .unwrap();
        let outcome = strict
            .add(
                &tenant_named("acme"),
                NewMemory::new(uri("viking://agent/main/memories/patterns/b"), near),
            )
            .unwrap();
        assert!(matches!(outcome, AddOutcome::Added(_)), "{threshold:?}");
    }
    for bad in [0.2, 1.5, f64::NAN] {
        let settings = MemorySettings {
            near_duplicate_threshold: Some(bad),
            ..MemorySettings::default()
        };
        let error = SqliteMemoryStore::in_memory_with(settings, Arc::new(ManualClock::new(T0)))
            .unwrap_err();
        assert!(
            matches!(error, MemoryError::InvalidSettings(_)),
            "{bad}: {error}"
        );
    }
    // Short texts differing in one word are different statements.
    add(
        &store,
        "viking://user/alice/memories/preferences/tea.md",
        "I like green tea",
    );
    let coffee = add(
        &store,
        "viking://user/alice/memories/preferences/coffee.md",
        "I like green coffee",
    );
    assert!(matches!(coffee, AddOutcome::Added(_)));
}

#[test]
fn tenants_are_isolated() {
    let (store, _) = store();
    let at = uri("viking://user/alice/memories/preferences/editor.md");
    store
        .add(
            &tenant_named("acme"),
            NewMemory::new(at.clone(), "Alice prefers dark mode."),
        )
        .unwrap();
    // The same URI and content in another tenant is a separate entry, not a merge.
    let other = store
        .add(
            &tenant_named("globex"),
            NewMemory::new(at.clone(), "Alice prefers dark mode."),
        )
        .unwrap();
    assert!(matches!(other, AddOutcome::Added(_)));
    store.forget(&tenant_named("globex"), &at).unwrap();
    assert_eq!(
        store.get(&tenant_named("acme"), &at).unwrap().l2,
        "Alice prefers dark mode."
    );
    assert!(store.get(&tenant_named("initech"), &at).is_err());
    assert!(
        store
            .search(&tenant_named("initech"), &SearchQuery::text("dark mode", 5))
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .ls(&tenant_named("initech"), &MemoryUri::root())
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .search(&tenant_named("acme"), &SearchQuery::text("dark mode", 5))
            .unwrap()
            .len(),
        1
    );
}

fn search_fixture() -> SqliteMemoryStore {
    let (store, _) = store();
    for (at, content, created) in [
        (
            "viking://user/alice/memories/events/rome.md",
            "Alice flew to Rome for a pottery workshop.",
            T0,
        ),
        (
            "viking://user/alice/memories/events/lyon.md",
            "Alice took a pottery class in Lyon.",
            T0 + 40 * DAY,
        ),
        (
            "viking://user/alice/memories/preferences/clay.md",
            "Alice prefers stoneware clay for pottery.",
            T0 + 80 * DAY,
        ),
        (
            "viking://agent/main/memories/cases/kiln.md",
            "The kiln controller failed during a pottery firing.",
            T0 + 120 * DAY,
        ),
    ] {
        store
            .add(
                &tenant_named("acme"),
                NewMemory::new(uri(at), content).created_at(created),
            )
            .unwrap();
    }
    store
}

fn uris(hits: &[skald_store::memories::SearchHit]) -> Vec<String> {
    hits.iter()
        .map(|hit| hit.memory.uri.name().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn full_text_search_filters_by_category_prefix_and_time() {
    let store = search_fixture();
    let all = store
        .search(&tenant_named("acme"), &SearchQuery::text("pottery", 10))
        .unwrap();
    assert_eq!(all.len(), 4);
    assert!(
        all.iter()
            .all(|hit| hit.bm25.is_some() && hit.vector_rank.is_none())
    );

    let only = |filter: SearchFilter| {
        uris(
            &store
                .search(
                    &tenant_named("acme"),
                    &SearchQuery::text("pottery", 10).with_filter(filter),
                )
                .unwrap(),
        )
    };
    let mut events = only(SearchFilter {
        categories: vec![MemoryCategory::Events],
        ..SearchFilter::default()
    });
    events.sort();
    assert_eq!(events, ["lyon.md", "rome.md"]);
    assert_eq!(
        only(SearchFilter {
            under: Some(uri("viking://agent")),
            ..SearchFilter::default()
        }),
        ["kiln.md"]
    );
    assert_eq!(
        only(SearchFilter {
            under: Some(uri("viking://user/alice/memories/preferences/clay.md")),
            ..SearchFilter::default()
        }),
        ["clay.md"]
    );
    let mut window = only(SearchFilter {
        created_from_ms: Some(T0 + DAY),
        created_until_ms: Some(T0 + 100 * DAY),
        ..SearchFilter::default()
    });
    window.sort();
    assert_eq!(window, ["clay.md", "lyon.md"]);
    // Stemming: "classes" finds "class".
    assert_eq!(
        uris(
            &store
                .search(
                    &tenant_named("acme"),
                    &SearchQuery::text("pottery classes in Lyon?", 1)
                )
                .unwrap()
        ),
        ["lyon.md"]
    );
}

#[test]
fn a_named_date_ranks_memories_of_that_time_higher() {
    let store = search_fixture();
    let date = chrono::DateTime::from_timestamp_millis(T0 + 40 * DAY).unwrap();
    let question = format!(
        "Where did Alice do pottery on {}?",
        date.format("%-d %B, %Y")
    );
    let hits = store
        .search(&tenant_named("acme"), &SearchQuery::text(&question, 4))
        .unwrap();
    assert_eq!(
        hits[0].memory.uri.name(),
        Some("lyon.md"),
        "{:?}",
        uris(&hits)
    );
    assert_eq!(hits[0].date_rank, Some(0));
    let mut plain = SearchQuery::text(&question, 4);
    plain.date_ranking = false;
    let hits = store.search(&tenant_named("acme"), &plain).unwrap();
    assert!(hits.iter().all(|hit| hit.date_rank.is_none()));
}

#[test]
fn vectors_fuse_with_text_by_reciprocal_rank() {
    // Only the text and vector rankings, so the fused scores are easy to check.
    let settings = MemorySettings {
        directory_weight: 0.0,
        vector_fusion: VectorFusion::Rank {
            weight: skald_store::memories::DEFAULT_VECTOR_WEIGHT,
        },
        ..MemorySettings::default()
    };
    let store =
        SqliteMemoryStore::in_memory_with(settings, Arc::new(ManualClock::new(T0))).unwrap();
    // Text ranks a then b; vectors rank c then b (a has no vector). b is in both lists, so
    // fusion puts it first; then a (1/61 from text) before c (0.3/61 from vectors).
    for (name, content, vector) in [
        ("a", "garden garden garden tomatoes", None),
        (
            "b",
            "garden tomatoes and basil seedlings",
            Some([0.6, 0.8, 0.0]),
        ),
        ("c", "watering schedule for basil", Some([0.0, 1.0, 0.0])),
    ] {
        let at = uri(&format!("viking://user/alice/memories/events/{name}"));
        let mut memory = NewMemory::new(at, content);
        memory.embedding = vector.map(|v| v.to_vec());
        store.add(&tenant_named("acme"), memory).unwrap();
    }
    let text_only = store
        .search(&tenant_named("acme"), &SearchQuery::text("garden", 3))
        .unwrap();
    assert_eq!(uris(&text_only), ["a", "b"]);
    let vector_only = store
        .search(
            &tenant_named("acme"),
            &SearchQuery::text("", 3).with_vector(vec![0.1, 1.0, 0.0]),
        )
        .unwrap();
    assert_eq!(uris(&vector_only), ["c", "b"]);
    let hybrid = store
        .search(
            &tenant_named("acme"),
            &SearchQuery::text("garden", 3).with_vector(vec![0.1, 1.0, 0.0]),
        )
        .unwrap();
    assert_eq!(uris(&hybrid), ["b", "a", "c"]);
    let b = &hybrid[0];
    assert_eq!((b.text_rank, b.vector_rank), (Some(1), Some(1)));
    // Second in both lists: 1/62 from the text ranking, 0.3/62 from the vector ranking (its
    // default weight).
    let expected = (1.0 + skald_store::memories::DEFAULT_VECTOR_WEIGHT) / 62.0;
    assert!((b.score - expected).abs() < 1e-12, "{}", b.score);
    assert!(b.cosine.unwrap() > 0.8);

    let mismatch = store
        .search(
            &tenant_named("acme"),
            &SearchQuery::text("garden", 3).with_vector(vec![1.0, 0.0]),
        )
        .unwrap_err();
    assert!(
        matches!(mismatch, MemoryError::DimensionMismatch { query: 2, ref stored } if stored == &[3]),
        "{mismatch}"
    );
    // Vectors can be set later; entries without one are simply not in the vector ranking.
    let d = uri("viking://user/alice/memories/events/d");
    store
        .add(
            &tenant_named("acme"),
            NewMemory::new(d.clone(), "unrelated note about taxes"),
        )
        .unwrap();
    assert!(
        store
            .search(
                &tenant_named("acme"),
                &SearchQuery::text("", 4).with_vector(vec![0.0, 0.0, 1.0])
            )
            .unwrap()
            .iter()
            .all(|hit| hit.memory.uri != d)
    );
    store
        .set_embedding(&tenant_named("acme"), &d, &[0.0, 0.0, 1.0])
        .unwrap();
    let first = store
        .search(
            &tenant_named("acme"),
            &SearchQuery::text("", 1).with_vector(vec![0.0, 0.0, 1.0]),
        )
        .unwrap();
    assert_eq!(first[0].memory.uri, d);
    assert_eq!(first[0].memory.embedding_dimensions, Some(3));
}

/// Text barely prefers `t` over `v`; the query vector is `v`'s. With `fusion`, the hybrid order.
fn hybrid_order(fusion: VectorFusion) -> (Vec<String>, Vec<skald_store::memories::SearchHit>) {
    let settings = MemorySettings {
        directory_weight: 0.0,
        vector_fusion: fusion,
        ..MemorySettings::default()
    };
    let store =
        SqliteMemoryStore::in_memory_with(settings, Arc::new(ManualClock::new(T0))).unwrap();
    for (name, content, vector) in [
        ("t", "garden garden tomatoes", [0.0, 1.0, 0.0]),
        ("v", "garden basil seeds", [1.0, 0.0, 0.0]),
        (
            "y",
            "a long note that mentions the garden once among many other words about taxes, \
             cars, invoices, the weather and the neighbours",
            [0.0, 0.0, 1.0],
        ),
    ] {
        let at = uri(&format!("viking://user/alice/memories/events/{name}"));
        store
            .add(
                &tenant_named("acme"),
                NewMemory::new(at, content).with_embedding(vector.to_vec()),
            )
            .unwrap();
    }
    let text_only = store
        .search(&tenant_named("acme"), &SearchQuery::text("garden", 3))
        .unwrap();
    assert_eq!(uris(&text_only), ["t", "v", "y"]);
    let hits = store
        .search(
            &tenant_named("acme"),
            &SearchQuery::text("garden", 3).with_vector(vec![1.0, 0.0, 0.0]),
        )
        .unwrap();
    (uris(&hits), hits)
}

#[test]
fn score_fusion_by_default_lifts_a_hit_far_ahead_in_the_vector_ranking() {
    assert_eq!(
        MemorySettings::default().vector_fusion,
        VectorFusion::Score {
            share: skald_store::memories::DEFAULT_VECTOR_SHARE
        }
    );
    // Rank fusion sees t first in the heavier list and v first in the lighter one: t wins.
    let (by_rank, _) = hybrid_order(VectorFusion::Rank { weight: 0.3 });
    assert_eq!(by_rank, ["t", "v", "y"]);
    // Score fusion sees v a little behind in text and far ahead in vectors: v wins.
    let (by_score, hits) = hybrid_order(VectorFusion::default());
    assert_eq!(by_score, ["v", "t", "y"]);
    // The hit still reports its own rank in each ranking, not its place in the relevance list.
    let v = &hits[0];
    assert_eq!((v.text_rank, v.vector_rank), (Some(1), Some(0)));
    assert!((v.cosine.unwrap() - 1.0).abs() < 1e-6);
    assert!(v.bm25.unwrap() < 0.0);
    assert_eq!((hits[1].text_rank, hits[1].vector_rank), (Some(0), Some(1)));
    // Share 0 is text only; share 1 is vectors only.
    let (text_share, _) = hybrid_order(VectorFusion::Score { share: 0.0 });
    assert_eq!(text_share, ["t", "v", "y"]);
    let (vector_share, _) = hybrid_order(VectorFusion::Score { share: 1.0 });
    assert_eq!(vector_share[0], "v");
}

#[test]
fn vector_fusion_settings_out_of_range_are_refused() {
    for fusion in [
        VectorFusion::Score { share: 1.5 },
        VectorFusion::Score { share: -0.1 },
        VectorFusion::Score { share: f64::NAN },
        VectorFusion::Rank { weight: -1.0 },
        VectorFusion::Rank {
            weight: f64::INFINITY,
        },
    ] {
        let settings = MemorySettings {
            vector_fusion: fusion,
            ..MemorySettings::default()
        };
        let error = SqliteMemoryStore::in_memory_with(settings, Arc::new(ManualClock::new(T0)))
            .unwrap_err();
        assert!(
            matches!(error, MemoryError::InvalidSettings(_)),
            "{fusion:?}: {error}"
        );
    }
}

#[test]
fn a_directory_where_several_entries_match_lifts_them() {
    let (store, _) = store();
    for (at, content) in [
        (
            "viking://resources/notes/glaze.md",
            "Pottery glaze recipes.",
        ),
        (
            "viking://resources/studio/class.md",
            "The pottery class meets on Tuesdays.",
        ),
        (
            "viking://resources/studio/kiln.md",
            "Glaze firing happens in the studio kiln.",
        ),
        (
            "viking://resources/studio/wheel.md",
            "Pottery wheel maintenance checklist.",
        ),
        (
            "viking://resources/garden/roses.md",
            "Prune the roses in March.",
        ),
        (
            "viking://resources/garden/tomatoes.md",
            "Tomatoes need sun and water.",
        ),
        (
            "viking://resources/garden/compost.md",
            "Turn the compost every week.",
        ),
        (
            "viking://resources/kitchen/bread.md",
            "Sourdough bread needs a starter.",
        ),
        (
            "viking://resources/kitchen/soup.md",
            "Lentil soup with cumin.",
        ),
        ("viking://resources/travel/rome.md", "Rome trip in May."),
    ] {
        store
            .add(&tenant_named("acme"), NewMemory::new(uri(at), content))
            .unwrap();
    }
    let hits = store
        .search(
            &tenant_named("acme"),
            &SearchQuery::text("pottery glaze", 10),
        )
        .unwrap();
    let glaze = hits
        .iter()
        .find(|hit| hit.memory.uri.name() == Some("glaze.md"))
        .unwrap();
    assert_eq!(
        glaze.text_rank,
        Some(0),
        "alone, the notes entry matches best"
    );
    // The studio, with three matching entries, outranks the notes folder as a directory.
    assert_eq!(glaze.directory_rank, Some(3));
    let studio_best = hits
        .iter()
        .find(|hit| hit.directory_rank == Some(0))
        .unwrap();
    assert_eq!(
        studio_best.memory.uri.parent().unwrap().as_str(),
        "viking://resources/studio"
    );
    assert!(
        hits.iter()
            .all(|hit| hit.memory.uri.name() != Some("roses.md"))
    );

    let settings = MemorySettings {
        directory_weight: 0.0,
        ..MemorySettings::default()
    };
    let flat = SqliteMemoryStore::in_memory_with(settings, Arc::new(ManualClock::new(T0))).unwrap();
    flat.add(
        &tenant_named("acme"),
        NewMemory::new(uri("viking://resources/a.md"), "pottery"),
    )
    .unwrap();
    let hits = flat
        .search(&tenant_named("acme"), &SearchQuery::text("pottery", 10))
        .unwrap();
    assert_eq!(hits[0].directory_rank, None);
}

#[test]
fn terms_in_half_the_memories_or_more_do_not_count() {
    // "alice" is in every memory (FTS5 gives it an IDF of 10^-6), so only "rome" decides.
    let (store, _) = store();
    for (name, content) in [
        ("a", "Alice Alice Alice likes tea."),
        ("b", "Alice flew to Rome."),
        ("c", "Alice reads."),
    ] {
        store
            .add(
                &tenant_named("acme"),
                NewMemory::new(
                    uri(&format!("viking://user/alice/memories/events/{name}")),
                    content,
                ),
            )
            .unwrap();
    }
    let hits = store
        .search(&tenant_named("acme"), &SearchQuery::text("Alice Rome", 10))
        .unwrap();
    assert_eq!(uris(&hits), ["b"]);
    // A query of such terms alone still searches them.
    assert_eq!(
        store
            .search(&tenant_named("acme"), &SearchQuery::text("Alice", 10))
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn bad_input_is_refused_with_a_clear_error_and_changes_nothing() {
    let (store, _) = store();
    add(
        &store,
        "viking://user/alice/memories/events/trip.md",
        "Alice went to Rome.",
    );
    let before = stored_rows(&store);
    let cases: Vec<(NewMemory, &str)> = vec![
        (
            NewMemory::new(uri("viking://user/alice/memories/events"), "x"),
            "is a directory",
        ),
        (
            NewMemory::new(uri("viking://user/alice/memories/events/empty.md"), "  \n"),
            "content is empty",
        ),
        (
            NewMemory::new(
                uri("viking://user/alice/memories/events/big.md"),
                "x".repeat(2 << 20),
            ),
            "at most 1048576",
        ),
        (
            NewMemory::new(uri("viking://user/alice/memories/events/l0.md"), "ok")
                .with_l0("y".repeat(300)),
            "L0 abstract has 300",
        ),
        (
            NewMemory::new(uri("viking://user/alice/memories/events/l1.md"), "ok")
                .with_l1("y".repeat(4001)),
            "L1 overview has 4001",
        ),
        (
            NewMemory::new(uri("viking://user/alice/memories/events/p.md"), "ok").with_priority(11),
            "from 0 to 10",
        ),
        (
            NewMemory::new(uri("viking://user/alice/memories/events/s.md"), "ok")
                .with_source(MemorySource::new("bad session", ["e"])),
            "source.session_id",
        ),
        (
            NewMemory::new(uri("viking://user/alice/memories/events/v.md"), "ok")
                .with_embedding(vec![1.0, f32::NAN]),
            "component 1",
        ),
        (
            NewMemory::new(uri("viking://user/alice/memories/events/z.md"), "ok")
                .with_embedding(vec![0.0; 4]),
            "all zeros",
        ),
        (
            NewMemory::new(
                uri("viking://user/alice/memories/events/trip.md"),
                "Alice went to Paris instead.",
            ),
            "already lives at",
        ),
        (
            NewMemory::new(
                uri("viking://user/alice/memories/events/trip.md/notes"),
                "Nested under an entry.",
            ),
            "conflicts with the entry",
        ),
    ];
    for (memory, expected) in cases {
        let error = store
            .add(&tenant_named("acme"), memory)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(expected),
            "expected {expected:?} in {error:?}"
        );
        assert_eq!(stored_rows(&store), before);
    }
    add(&store, "viking://resources/docs/a.md", "A document.");
    let above = store
        .add(
            &tenant_named("acme"),
            NewMemory::new(uri("viking://resources/docs"), "A file where a folder is."),
        )
        .unwrap_err();
    assert!(matches!(above, MemoryError::PathConflict { .. }), "{above}");

    // A batch with one bad memory writes none of them, and says which.
    let before = stored_rows(&store);
    let batch = vec![
        NewMemory::new(uri("viking://resources/b.md"), "First fine document."),
        NewMemory::new(uri("viking://resources/c.md"), "Second fine document."),
        NewMemory::new(
            uri("viking://resources/docs/a.md/x"),
            "Nested under an entry.",
        ),
    ];
    let error = store.add_many(&tenant_named("acme"), batch).unwrap_err();
    assert!(
        matches!(error, MemoryError::InBatch { index: 2, .. }),
        "{error}"
    );
    assert_eq!(stored_rows(&store), before);

    for (query, expected) in [
        (SearchQuery::text("rome", 0), "limit is 0"),
        (SearchQuery::text("rome", 5000), "limit is 5000"),
        (SearchQuery::text("?!", 5), "no words"),
        (
            SearchQuery::text("rome", 5).with_vector(vec![]),
            "0 dimensions",
        ),
        (
            SearchQuery::text("rome", 5).with_filter(SearchFilter {
                created_from_ms: Some(5),
                created_until_ms: Some(5),
                ..SearchFilter::default()
            }),
            "time range",
        ),
    ] {
        let error = store
            .search(&tenant_named("acme"), &query)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(expected),
            "expected {expected:?} in {error:?}"
        );
    }
    assert!(matches!(
        store.forget(&tenant_named("acme"), &uri("viking://user/alice")),
        Err(MemoryError::InvalidUri(_))
    ));
    assert!(matches!(
        store.forget(
            &tenant_named("acme"),
            &uri("viking://user/alice/memories/events/none.md")
        ),
        Err(MemoryError::NotFound { .. })
    ));
}

#[test]
fn add_many_merges_within_the_batch_and_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skald.sqlite3");
    let store = SqliteMemoryStore::open(&path).unwrap();
    let outcomes = store
        .add_many(
            &tenant_named("acme"),
            vec![
                NewMemory::new(uri("viking://session/s1/D1:1"), "Thanks, see you soon!")
                    .with_source(MemorySource::new("s1", ["D1:1"])),
                NewMemory::new(uri("viking://session/s1/D1:2"), "Thanks! See you soon.")
                    .with_source(MemorySource::new("s1", ["D1:2"])),
            ],
        )
        .unwrap();
    assert!(matches!(outcomes[0], AddOutcome::Added(_)));
    assert!(matches!(outcomes[1], AddOutcome::Merged(_)));
    let id = added_id(&outcomes[0]);
    drop(store);
    let reopened = SqliteMemoryStore::open(&path).unwrap();
    let memory = reopened
        .get(&tenant_named("acme"), &uri("viking://session/s1/D1:1"))
        .unwrap();
    assert_eq!(memory.id, id);
    assert_eq!(
        memory.source_entry_ids().collect::<Vec<_>>(),
        ["D1:1", "D1:2"]
    );
    let hits = reopened
        .search(&tenant_named("acme"), &SearchQuery::text("see you", 5))
        .unwrap();
    assert_eq!(hits.len(), 1);
}

#[test]
fn a_second_connection_sees_what_the_first_wrote_after_its_own_searches() {
    // Each store caches term counts and vectors per database state; a write through another
    // connection to the same file must not leave them stale.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skald.sqlite3");
    let reader = SqliteMemoryStore::open(&path).unwrap();
    let writer = SqliteMemoryStore::open(&path).unwrap();
    let first = uri("viking://resources/a.md");
    writer
        .add(
            &tenant_named("acme"),
            NewMemory::new(first, "kiln firing schedule").with_embedding(vec![1.0, 0.0]),
        )
        .unwrap();
    let query = SearchQuery::text("kiln glaze", 5).with_vector(vec![0.0, 1.0]);
    assert_eq!(
        reader.search(&tenant_named("acme"), &query).unwrap().len(),
        1
    );
    let second = uri("viking://resources/b.md");
    writer
        .add(
            &tenant_named("acme"),
            NewMemory::new(second.clone(), "glaze recipes").with_embedding(vec![0.0, 1.0]),
        )
        .unwrap();
    let hits = reader.search(&tenant_named("acme"), &query).unwrap();
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0].memory.uri, second);
    assert_eq!(hits[0].vector_rank, Some(0));
}

#[test]
fn recent_writes_list_adds_updates_merges_and_forgets_newest_first() {
    let (store, clock) = store();
    let editor = "viking://user/alice/memories/preferences/editor.md";
    add(&store, editor, "Alice prefers dark mode in every editor.");
    clock.advance(1000);
    let merged = add(
        &store,
        "viking://user/alice/memories/preferences/theme.md",
        "alice prefers dark mode in every editor",
    );
    assert!(matches!(merged, AddOutcome::Merged(_)));
    clock.advance(1000);
    store
        .update(
            &tenant_named("acme"),
            NewMemory::new(uri(editor), "Alice prefers light mode."),
        )
        .unwrap();
    clock.advance(1000);
    store.forget(&tenant_named("acme"), &uri(editor)).unwrap();
    clock.advance(1000);
    add(&store, editor, "Alice has no editor preference now.");

    let writes = store.recent_writes(&tenant_named("acme"), 10).unwrap();
    let actions: Vec<(WriteAction, u32)> = writes.iter().map(|w| (w.action, w.version)).collect();
    assert_eq!(
        actions,
        [
            (WriteAction::Added, 3),
            (WriteAction::Forgotten, 2),
            (WriteAction::Updated, 2),
            (WriteAction::Merged, 1),
            (WriteAction::Added, 1),
        ]
    );
    let merge = &writes[3];
    assert_eq!(merge.uri.as_str(), editor);
    assert_eq!(
        merge.requested_uri.as_ref().map(MemoryUri::as_str),
        Some("viking://user/alice/memories/preferences/theme.md")
    );
    assert_eq!(merge.duplicate, Some(DuplicateKind::Exact));
    assert_eq!(writes[0].at_ms, T0 + 4000);
    assert_eq!(
        store.recent_writes(&tenant_named("acme"), 2).unwrap().len(),
        2
    );
    assert!(
        store
            .recent_writes(&tenant_named("globex"), 10)
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store.recent_writes(&tenant_named("acme"), 0),
        Err(MemoryError::InvalidInput { field: "limit", .. })
    ));
}

#[test]
fn a_small_store_still_finds_matches_when_other_query_words_match_nothing() {
    let (store, _) = store();
    add(
        &store,
        "viking://user/alice/memories/profile/allergy.md",
        "Alice is allergic to peanuts",
    );
    // "peanuts" is in every row (no IDF) and "allergy" stems differently from "allergic" (in
    // no row): the words that match are kept.
    let hits = store
        .search(
            &tenant_named("acme"),
            &SearchQuery::text("peanuts allergy", 5),
        )
        .unwrap();
    assert_eq!(hits.len(), 1);
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
