//! Checks of a [`MemoryStore`]: add and read, leases (`super::leases`), versions (an update supersedes, a forget leaves a
//! tombstone, history lists every version), duplicates merged within their owner, `ls`/`tree`,
//! search on a small fixed corpus, tenant isolation across all of these, the documented errors
//! of missing and mismatched items, reads beside writes on other threads, and durability
//! (entries and search results) across a reopen. Each check panics with the violated property.
//!
//! Search ranking is [`crate::memories::search`]'s policy for a backend that provides its
//! primitives, but a backend may rank its own way (BM25, vectors, fusion…). The checks assert
//! only robust facts: for a few queries whose words occur in one entry of the corpus only, that
//! entry comes first; a search returns at most `limit` live entries, each once, best first,
//! each hit's ranks and scores consistent; a vector-only search orders by cosine; forgotten and
//! superseded versions and other tenants' entries are never returned; a reopened store searches
//! exactly as before. Near-duplicate merging depends on a backend's threshold, so only exact
//! duplicates are checked.

use skald_core::memory::uri::{MemoryCategory, MemoryUri};

use super::{MemoryCheck, NewMemoryStore, TENANT_A, TENANT_B, tenant_a, tenant_b, tenant_named};
use crate::memories::{
    AddOutcome, DirEntryKind, DuplicateKind, MemoryError, MemorySource, MemoryStatus, MemoryStore,
    NewMemory, SearchQuery, UpdateOutcome,
};

/// Every check but the durability ones ([`survives_reopen`], [`search_survives_reopen`]), by
/// name.
pub const CHECKS: &[(&str, MemoryCheck)] = &[
    ("add_and_read", add_and_read),
    ("versions_are_kept", versions_are_kept),
    ("exact_duplicates_are_merged", exact_duplicates_are_merged),
    ("ls_and_tree_follow_the_uris", ls_and_tree_follow_the_uris),
    (
        "search_finds_the_relevant_entry_first",
        search_finds_the_relevant_entry_first,
    ),
    ("tenants_are_isolated", tenants_are_isolated),
    ("invalid_input_is_refused", invalid_input_is_refused),
    (
        "missing_items_are_their_documented_errors",
        missing_items_are_their_documented_errors,
    ),
    (
        "search_hits_are_ordered_and_explained",
        search_hits_are_ordered_and_explained,
    ),
    ("reads_run_beside_writes", reads_run_beside_writes),
    (
        "priority_orders_hits_about_equally_relevant",
        priority_orders_hits_about_equally_relevant,
    ),
    (
        "leases_are_claimed_once_and_finished_for_everyone",
        super::leases::leases_are_claimed_once_and_finished_for_everyone,
    ),
    (
        "bad_lease_arguments_are_refused",
        super::leases::bad_lease_arguments_are_refused,
    ),
    (
        "one_of_many_concurrent_claims_wins",
        super::leases::one_of_many_concurrent_claims_wins,
    ),
];

/// Runs every check of [`CHECKS`], each on a fresh store from `new`.
pub fn run_all(new: &NewMemoryStore<'_>) {
    for (_, check) in CHECKS {
        check(new);
    }
}

/// The fixed corpus of the search checks: (URI, content).
pub const CORPUS: &[(&str, &str)] = &[
    (
        "viking://user/alice/memories/preferences/editor.md",
        "Alice prefers dark mode and the Helix editor with relative line numbers.",
    ),
    (
        "viking://user/alice/memories/entities/payments.md",
        "The payments service stores its ledger in a database behind a connection pool of \
         forty connections.",
    ),
    (
        "viking://user/alice/memories/events/kyoto.md",
        "In spring Alice travelled to Kyoto to see the cherry blossoms with her sister.",
    ),
    (
        "viking://agent/main/memories/cases/flaky-ci.md",
        "The flaky integration job failed because every test shared one temporary directory; \
         giving each test its own directory fixed it.",
    ),
    (
        "viking://agent/main/tools/cargo",
        "Cargo builds in continuous integration need the locked flag so the lockfile is never \
         rewritten.",
    ),
    (
        "viking://resources/docs/tokens.md",
        "Access tokens expire after one hour; refresh tokens last thirty days.",
    ),
];

/// Queries of the search check and the corpus URI each must find first.
pub const QUERIES: &[(&str, &str)] = &[
    (
        "which editor does alice prefer",
        "viking://user/alice/memories/preferences/editor.md",
    ),
    (
        "payments ledger database connection pool",
        "viking://user/alice/memories/entities/payments.md",
    ),
    (
        "kyoto cherry blossoms trip",
        "viking://user/alice/memories/events/kyoto.md",
    ),
    (
        "why did the flaky job fail",
        "viking://agent/main/memories/cases/flaky-ci.md",
    ),
    (
        "how long do refresh tokens last",
        "viking://resources/docs/tokens.md",
    ),
];

fn uri(text: &str) -> MemoryUri {
    MemoryUri::parse(text).unwrap_or_else(|error| panic!("{text} is not a memory URI: {error}"))
}

fn add_corpus(store: &dyn MemoryStore, tenant: &str) {
    for (at, content) in CORPUS {
        let outcome = store
            .add(&tenant_named(tenant), NewMemory::new(uri(at), *content))
            .unwrap();
        assert!(
            matches!(outcome, AddOutcome::Added(_)),
            "corpus entry {at} must be added, not merged: {outcome:?}"
        );
    }
}

fn search_uris(store: &dyn MemoryStore, tenant: &str, text: &str, limit: usize) -> Vec<String> {
    store
        .search(&tenant_named(tenant), &SearchQuery::text(text, limit))
        .unwrap_or_else(|error| panic!("search {text:?} failed: {error}"))
        .into_iter()
        .map(|hit| hit.memory.uri.to_string())
        .collect()
}

/// `add` stores a live version 1 with the category of its URI, the given levels, priority and
/// source; `get` returns exactly it; a different entry at a live URI is `AlreadyExists`; an
/// unknown URI is `NotFound`.
pub fn add_and_read(new: &NewMemoryStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let at = uri("viking://agent/main/memories/cases/ci-cache.md");
    let given = NewMemory::new(
        at.clone(),
        "The CI cache key ignored the target triple, so ARM builds reused x86 artifacts.",
    )
    .with_l0("CI cache key bug")
    .with_l1("ARM builds reused x86 artifacts until the key included the triple.")
    .with_priority(9)
    .with_source(MemorySource::new("sess-1", ["e1", "e2"]))
    .created_at(1_700_000_000_000);
    let outcome = store.add(&tenant_a(), given).unwrap();
    let AddOutcome::Added(memory) = outcome else {
        panic!("a new entry is Added, got {outcome:?}");
    };
    assert_eq!(memory.tenant, TENANT_A);
    assert_eq!(memory.uri, at);
    assert_eq!(memory.version, 1, "a new entry is version 1");
    assert_eq!(memory.status, MemoryStatus::Live);
    assert_eq!(
        memory.category,
        MemoryCategory::Cases,
        "category from the URI"
    );
    assert_eq!(memory.l0, "CI cache key bug");
    assert_eq!(
        memory.l1,
        "ARM builds reused x86 artifacts until the key included the triple."
    );
    assert!(memory.l2.starts_with("The CI cache key"));
    assert_eq!(memory.priority, 9);
    assert_eq!(memory.created_at_ms, 1_700_000_000_000);
    assert_eq!(memory.source_entry_ids().collect::<Vec<_>>(), ["e1", "e2"]);
    assert_eq!(memory.supersedes, None);
    assert_eq!(
        store.get(&tenant_a(), &at).unwrap(),
        memory,
        "get returns the entry as add returned it"
    );

    let derived = store
        .add(
            &tenant_a(),
            NewMemory::new(
                uri("viking://user/alice/memories/profile/job.md"),
                "Alice is a site reliability engineer. She joined in 2021.",
            ),
        )
        .unwrap();
    let derived = derived.memory();
    assert!(!derived.l0.is_empty(), "a missing L0 is derived");
    assert!(!derived.l1.is_empty(), "a missing L1 is derived");

    let taken = store.add(
        &tenant_a(),
        NewMemory::new(at.clone(), "Something unrelated about kiln temperatures."),
    );
    assert!(
        matches!(taken, Err(MemoryError::AlreadyExists { .. })),
        "add at a URI holding a different live entry is AlreadyExists, got {taken:?}"
    );
    assert_eq!(
        store.get(&tenant_a(), &at).unwrap(),
        memory,
        "and changes nothing"
    );
    let missing = store.get(&tenant_a(), &uri("viking://resources/none.md"));
    assert!(
        matches!(missing, Err(MemoryError::NotFound { .. })),
        "get of an unknown URI is NotFound, got {missing:?}"
    );
}

/// An update writes version 2 superseding version 1; an identical update writes nothing; a
/// forget marks the live version forgotten (reads then say `Forgotten`, search and `ls` no longer
/// see it); history lists every version oldest first; a new add after a forget is the next
/// version.
pub fn versions_are_kept(new: &NewMemoryStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let at = uri("viking://user/alice/memories/preferences/theme.md");
    let first = store
        .add(
            &tenant_a(),
            NewMemory::new(at.clone(), "Alice prefers dark mode in her terminal.")
                .with_source(MemorySource::new("s1", ["a"])),
        )
        .unwrap()
        .memory()
        .clone();
    let outcome = store
        .update(
            &tenant_a(),
            NewMemory::new(at.clone(), "Alice switched to light mode in her terminal."),
        )
        .unwrap();
    let UpdateOutcome::Updated { memory, previous } = outcome else {
        panic!("an update with new content writes a new version, got {outcome:?}");
    };
    assert_eq!(memory.version, 2, "an update is the next version");
    assert_eq!(
        memory.supersedes,
        Some(first.id),
        "and supersedes the live one"
    );
    assert_ne!(memory.id, first.id, "a version has its own id");
    assert_eq!(previous.id, first.id);
    assert!(
        matches!(previous.status, MemoryStatus::Superseded { by, .. } if by == memory.id),
        "the previous version is superseded by the new one: {:?}",
        previous.status
    );
    assert_eq!(
        store.get(&tenant_a(), &at).unwrap(),
        memory,
        "get reads the live version"
    );
    assert!(
        !search_uris(store, TENANT_A, "dark", 10).contains(&at.to_string()),
        "search does not return a superseded version"
    );
    let again = store
        .update(
            &tenant_a(),
            NewMemory::new(at.clone(), "Alice switched to light mode in her terminal."),
        )
        .unwrap();
    assert!(
        matches!(again, UpdateOutcome::Unchanged(_)),
        "an identical update writes nothing, got {again:?}"
    );
    let missing = store.update(
        &tenant_a(),
        NewMemory::new(
            uri("viking://user/alice/memories/preferences/none.md"),
            "x y",
        ),
    );
    assert!(
        matches!(missing, Err(MemoryError::NotFound { .. })),
        "updating no entry is NotFound, got {missing:?}"
    );

    let forgotten = store.forget(&tenant_a(), &at).unwrap();
    assert_eq!(
        forgotten.id, memory.id,
        "forget returns the version it forgot"
    );
    assert!(
        matches!(forgotten.status, MemoryStatus::Forgotten { .. }),
        "the forgotten version is marked Forgotten: {:?}",
        forgotten.status
    );
    let read = store.get(&tenant_a(), &at);
    assert!(
        matches!(read, Err(MemoryError::Forgotten { .. })),
        "get of a forgotten entry is Forgotten, got {read:?}"
    );
    assert!(
        matches!(
            store.forget(&tenant_a(), &at),
            Err(MemoryError::Forgotten { .. })
        ),
        "forgetting twice is Forgotten"
    );
    assert!(
        search_uris(store, TENANT_A, "light mode terminal", 10).is_empty(),
        "search does not return a forgotten entry"
    );
    assert!(
        store
            .ls(
                &tenant_a(),
                &uri("viking://user/alice/memories/preferences")
            )
            .unwrap()
            .is_empty(),
        "ls does not list a forgotten entry"
    );

    let history = store.history(&tenant_a(), &at).unwrap();
    assert_eq!(
        history.iter().map(|m| m.version).collect::<Vec<_>>(),
        [1, 2],
        "history lists every version, oldest first"
    );
    assert_eq!(history[0].l2, first.l2, "old versions keep their content");
    assert!(matches!(history[0].status, MemoryStatus::Superseded { .. }));
    assert!(matches!(history[1].status, MemoryStatus::Forgotten { .. }));

    let back = store
        .add(
            &tenant_a(),
            NewMemory::new(at.clone(), "Alice uses the system theme now."),
        )
        .unwrap();
    assert_eq!(
        back.memory().version,
        3,
        "an add after a forget is the next version"
    );
    assert_eq!(store.history(&tenant_a(), &at).unwrap().len(), 3);
    let stats = store.stats(&tenant_a()).unwrap();
    assert_eq!(
        (stats.live, stats.superseded, stats.forgotten),
        (1, 1, 1),
        "stats count the versions by status"
    );
}

/// The same content added again at another URI of the same owner is merged into the live entry
/// (its source recorded there), not stored twice; under another owner it is a new entry.
pub fn exact_duplicates_are_merged(new: &NewMemoryStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let at = uri("viking://user/alice/memories/preferences/editor.md");
    let original = store
        .add(
            &tenant_a(),
            NewMemory::new(at.clone(), "Alice prefers dark mode in every editor.")
                .with_source(MemorySource::new("s1", ["a1"])),
        )
        .unwrap()
        .memory()
        .clone();
    let elsewhere = uri("viking://user/alice/memories/preferences/theme.md");
    let outcome = store
        .add(
            &tenant_a(),
            NewMemory::new(elsewhere.clone(), "alice prefers dark mode in every editor")
                .with_source(MemorySource::new("s2", ["b7"])),
        )
        .unwrap();
    let AddOutcome::Merged(merge) = outcome else {
        panic!("an exact duplicate of a live entry is Merged, got {outcome:?}");
    };
    assert_eq!(merge.kind, DuplicateKind::Exact);
    assert_eq!(merge.requested_uri, elsewhere);
    assert_eq!(merge.into.uri, at, "merged into the entry already there");
    assert_eq!(merge.into.id, original.id, "no new version is written");
    assert!(
        merge.into.source_entry_ids().any(|id| id == "b7"),
        "the duplicate's source is recorded on the entry"
    );
    assert!(
        matches!(
            store.get(&tenant_a(), &elsewhere),
            Err(MemoryError::NotFound { .. })
        ),
        "nothing is stored at the duplicate's URI"
    );
    assert_eq!(store.history(&tenant_a(), &at).unwrap().len(), 1);
    assert_eq!(store.stats(&tenant_a()).unwrap().live, 1);

    let other_owner = uri("viking://user/bob/memories/preferences/editor.md");
    let outcome = store
        .add(
            &tenant_a(),
            NewMemory::new(other_owner, "Alice prefers dark mode in every editor."),
        )
        .unwrap();
    assert!(
        matches!(outcome, AddOutcome::Added(_)),
        "the same content under another owner is a new entry, got {outcome:?}"
    );
}

/// `ls` lists directories (with the count of live entries below) then entries, as they follow
/// from live URIs; an entry lists as itself, an unknown directory as nothing; `tree` nests the
/// same and stops at its depth.
pub fn ls_and_tree_follow_the_uris(new: &NewMemoryStore<'_>) {
    let store = new();
    let store = store.as_ref();
    add_corpus(store, TENANT_A);
    let root: Vec<String> = store
        .ls(&tenant_a(), &MemoryUri::root())
        .unwrap()
        .into_iter()
        .map(|entry| entry.uri.to_string())
        .collect();
    assert_eq!(
        root,
        ["viking://agent", "viking://resources", "viking://user"],
        "ls of the root lists the top directories in name order"
    );
    let memories = store
        .ls(&tenant_a(), &uri("viking://user/alice/memories"))
        .unwrap();
    let listed: Vec<(String, DirEntryKind)> = memories
        .into_iter()
        .map(|entry| (entry.uri.to_string(), entry.kind))
        .collect();
    assert_eq!(
        listed,
        [
            (
                "viking://user/alice/memories/entities".to_owned(),
                DirEntryKind::Directory { entries: 1 }
            ),
            (
                "viking://user/alice/memories/events".to_owned(),
                DirEntryKind::Directory { entries: 1 }
            ),
            (
                "viking://user/alice/memories/preferences".to_owned(),
                DirEntryKind::Directory { entries: 1 }
            ),
        ],
        "ls lists the directories below with their entry counts"
    );
    let events = store
        .ls(&tenant_a(), &uri("viking://user/alice/memories/events"))
        .unwrap();
    assert_eq!(events.len(), 1);
    assert!(
        matches!(&events[0].kind, DirEntryKind::Entry { category, .. } if *category == MemoryCategory::Events),
        "an entry lists as an entry: {:?}",
        events[0]
    );
    let tool = store
        .ls(&tenant_a(), &uri("viking://agent/main/tools/cargo"))
        .unwrap();
    assert_eq!(tool.len(), 1, "an entry URI lists as itself");
    assert!(
        store
            .ls(&tenant_a(), &uri("viking://user/nobody"))
            .unwrap()
            .is_empty(),
        "a directory with no entries lists nothing"
    );

    let tree = store.tree(&tenant_a(), &MemoryUri::root(), 8).unwrap();
    assert!(
        matches!(tree.entry.kind, DirEntryKind::Directory { entries } if entries == CORPUS.len() as u64),
        "the root counts every live entry: {:?}",
        tree.entry.kind
    );
    assert_eq!(tree.children.len(), 3);
    let shallow = store.tree(&tenant_a(), &MemoryUri::root(), 1).unwrap();
    assert!(
        shallow
            .children
            .iter()
            .all(|child| child.children.is_empty()),
        "tree stops at its depth"
    );
    let alone = store
        .tree(&tenant_a(), &uri("viking://user/alice"), 0)
        .unwrap();
    assert!(alone.children.is_empty(), "depth 0 is the directory alone");
}

/// A memory's priority weighs in the ranking (issue 28, gap 10): of two entries that match a
/// query alike, the one marked important comes first, whatever order they were written in; at
/// the default priority the order is the relevance's alone; a high priority does not lift an
/// entry that does not match over one that does; and a listing shows the important first.
pub fn priority_orders_hits_about_equally_relevant(new: &NewMemoryStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let tenant = tenant_a();
    let add = |name: &str, text: &str, priority: Option<u8>| {
        let uri =
            MemoryUri::parse(&format!("viking://user/alice/memories/entities/{name}.md")).unwrap();
        let memory = NewMemory::new(uri, text);
        let memory = match priority {
            Some(priority) => memory.with_priority(priority),
            None => memory,
        };
        store.add(&tenant, memory).unwrap();
    };
    add(
        "first",
        "The staging cluster runs in the Frankfurt region.",
        None,
    );
    add(
        "second",
        "The staging cluster runs in the Dublin region.",
        None,
    );
    let default_order = search_uris(store, TENANT_A, "staging cluster region", 5);
    assert_eq!(default_order.len(), 2, "{default_order:?}");
    let last = default_order[1].clone();
    let name = last
        .rsplit('/')
        .next()
        .unwrap()
        .trim_end_matches(".md")
        .to_owned();
    let text = if name == "first" {
        "The staging cluster runs in the Frankfurt region."
    } else {
        "The staging cluster runs in the Dublin region."
    };
    // The same entry again, marked important: a new version at priority 9.
    let uri = MemoryUri::parse(&last).unwrap();
    store
        .update(&tenant, NewMemory::new(uri, text).with_priority(9))
        .unwrap();
    let weighted = search_uris(store, TENANT_A, "staging cluster region", 5);
    assert_eq!(weighted.first(), Some(&last), "{weighted:?}");
    // An important entry that does not match the query stays out of the way.
    add("unrelated", "Lunch is at noon on Fridays.", Some(10));
    let hits = search_uris(store, TENANT_A, "staging cluster region", 5);
    assert!(
        !hits.iter().any(|uri| uri.ends_with("unrelated.md")),
        "{hits:?}"
    );
    // A listing leads with the entries marked important, then the rest by name.
    let dir = MemoryUri::parse("viking://user/alice/memories/entities").unwrap();
    let listed: Vec<String> = store
        .ls(&tenant, &dir)
        .unwrap()
        .into_iter()
        .map(|entry| entry.uri.as_str().rsplit('/').next().unwrap().to_owned())
        .collect();
    let other = if name == "first" {
        "second.md"
    } else {
        "first.md"
    };
    assert_eq!(
        listed,
        [
            "unrelated.md".to_owned(),
            format!("{name}.md"),
            other.to_owned()
        ]
    );
}

/// On [`CORPUS`], each query of [`QUERIES`] finds its entry first; a search returns at most
/// `limit` hits, each a live entry of the tenant, each once.
pub fn search_finds_the_relevant_entry_first(new: &NewMemoryStore<'_>) {
    let store = new();
    let store = store.as_ref();
    add_corpus(store, TENANT_A);
    for (query, expected) in QUERIES {
        let hits = search_uris(store, TENANT_A, query, 5);
        assert_eq!(
            hits.first().map(String::as_str),
            Some(*expected),
            "search {query:?} must find {expected} first; got {hits:?}"
        );
        let mut unique = hits.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            hits.len(),
            "each entry at most once: {hits:?}"
        );
    }
    let hits = store
        .search(&tenant_a(), &SearchQuery::text("alice", 1))
        .unwrap();
    assert!(hits.len() <= 1, "a search returns at most limit hits");
    let hits = store
        .search(&tenant_a(), &SearchQuery::text("alice tokens cargo", 100))
        .unwrap();
    for hit in &hits {
        assert_eq!(hit.memory.tenant, TENANT_A);
        assert_eq!(
            hit.memory.status,
            MemoryStatus::Live,
            "search returns live entries"
        );
    }
}

/// Tenant B never reads, lists, searches, updates, forgets or merges into tenant A's entries,
/// even at the same URI with the same content; stats are per tenant.
pub fn tenants_are_isolated(new: &NewMemoryStore<'_>) {
    let store = new();
    let store = store.as_ref();
    add_corpus(store, TENANT_A);
    let (at, content) = CORPUS[0];
    let at = uri(at);
    let a_entry = store.get(&tenant_a(), &at).unwrap();

    let read = store.get(&tenant_b(), &at);
    assert!(
        matches!(read, Err(MemoryError::NotFound { .. })),
        "tenant B's get of tenant A's entry is NotFound, got {read:?}"
    );
    let history = store.history(&tenant_b(), &at);
    assert!(
        matches!(history, Err(MemoryError::NotFound { .. }))
            || matches!(&history, Ok(versions) if versions.is_empty()),
        "tenant B's history of tenant A's entry is NotFound or empty, got {history:?}"
    );
    assert!(
        store
            .ls(&tenant_b(), &MemoryUri::root())
            .unwrap()
            .is_empty(),
        "tenant B lists none of tenant A's directories"
    );
    let tree = store.tree(&tenant_b(), &MemoryUri::root(), 8).unwrap();
    assert!(
        tree.children.is_empty(),
        "tenant B's tree has none of tenant A's entries: {tree:?}"
    );
    for (query, _) in QUERIES {
        assert!(
            search_uris(store, TENANT_B, query, 10).is_empty(),
            "tenant B's search {query:?} finds none of tenant A's entries"
        );
    }
    let update = store.update(&tenant_b(), NewMemory::new(at.clone(), "intrusion"));
    assert!(
        matches!(update, Err(MemoryError::NotFound { .. })),
        "tenant B's update of tenant A's entry is NotFound, got {update:?}"
    );
    let forget = store.forget(&tenant_b(), &at);
    assert!(
        matches!(forget, Err(MemoryError::NotFound { .. })),
        "tenant B's forget of tenant A's entry is NotFound, got {forget:?}"
    );
    assert_eq!(
        store.stats(&tenant_b()).unwrap(),
        Default::default(),
        "tenant B's stats count nothing of tenant A's"
    );

    let outcome = store
        .add(&tenant_b(), NewMemory::new(at.clone(), content))
        .unwrap();
    let AddOutcome::Added(b_entry) = outcome else {
        panic!(
            "tenant B's copy of tenant A's content must be a new entry, not merged: {outcome:?}"
        );
    };
    assert_eq!(b_entry.tenant, TENANT_B);
    assert_eq!(b_entry.version, 1, "tenant B's entry has its own versions");
    assert_eq!(
        store.get(&tenant_a(), &at).unwrap(),
        a_entry,
        "nothing tenant B did changed tenant A's entry"
    );
    store.forget(&tenant_b(), &at).unwrap();
    assert_eq!(store.get(&tenant_a(), &at).unwrap(), a_entry);
    assert_eq!(store.history(&tenant_a(), &at).unwrap().len(), 1);
    assert_eq!(store.stats(&tenant_a()).unwrap().live, CORPUS.len() as u64);
}

/// Directory URIs where an entry belongs, empty content and out-of-range fields are refused,
/// and nothing is written. (The tenant is a [`Tenant`], well formed by its type.)
pub fn invalid_input_is_refused(new: &NewMemoryStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let at = uri("viking://resources/doc.md");
    let refused = store.add(
        &tenant_a(),
        NewMemory::new(uri("viking://user/alice/memories"), "a directory"),
    );
    assert!(refused.is_err(), "add at a directory URI is refused");
    let refused = store.add(&tenant_a(), NewMemory::new(at.clone(), "   "));
    assert!(
        matches!(refused, Err(MemoryError::InvalidInput { .. })),
        "empty content is InvalidInput, got {refused:?}"
    );
    let refused = store.add(
        &tenant_a(),
        NewMemory::new(at.clone(), "content").with_priority(11),
    );
    assert!(
        matches!(refused, Err(MemoryError::InvalidInput { .. })),
        "priority 11 is InvalidInput, got {refused:?}"
    );
    assert_eq!(
        store.stats(&tenant_a()).unwrap(),
        Default::default(),
        "refused writes store nothing"
    );
    store
        .add(&tenant_a(), NewMemory::new(at.clone(), "content"))
        .unwrap();
    let below = store.add(
        &tenant_a(),
        NewMemory::new(uri("viking://resources/doc.md/part.md"), "inside an entry"),
    );
    assert!(
        matches!(below, Err(MemoryError::PathConflict { .. })),
        "a URI below an entry is PathConflict, got {below:?}"
    );
}

/// What one handle wrote (entries, an update, a forget, a merge) is read back through a
/// reopened handle, and search still finds it. `open` returns a new handle on the same
/// persistent storage on every call.
pub fn survives_reopen(open: &NewMemoryStore<'_>) {
    let at = uri(CORPUS[0].0);
    let (live, history) = {
        let store = open();
        add_corpus(store.as_ref(), TENANT_A);
        store
            .update(
                &tenant_a(),
                NewMemory::new(at.clone(), "Alice prefers the Helix editor in light mode."),
            )
            .unwrap();
        store.forget(&tenant_a(), &uri(CORPUS[5].0)).unwrap();
        (
            store.get(&tenant_a(), &at).unwrap(),
            store.history(&tenant_a(), &at).unwrap(),
        )
    };
    let store = open();
    let store = store.as_ref();
    assert_eq!(
        store.get(&tenant_a(), &at).unwrap(),
        live,
        "the live version survives"
    );
    assert_eq!(
        store.history(&tenant_a(), &at).unwrap(),
        history,
        "every version survives"
    );
    assert!(matches!(
        store.get(&tenant_a(), &uri(CORPUS[5].0)),
        Err(MemoryError::Forgotten { .. })
    ));
    assert_eq!(
        search_uris(store, TENANT_A, "kyoto cherry blossoms", 5)
            .first()
            .map(String::as_str),
        Some(CORPUS[2].0),
        "search works after a reopen"
    );
    assert!(
        store
            .ls(&tenant_b(), &MemoryUri::root())
            .unwrap()
            .is_empty()
    );
}

/// Three-dimensional vectors for the first corpus entries, for the vector checks.
const VECTORS: &[[f32; 3]] = &[
    [1.0, 0.0, 0.0],
    [0.6, 0.8, 0.0],
    [0.0, 1.0, 0.0],
    [0.0, 0.6, 0.8],
];

fn add_vectors(store: &dyn MemoryStore, tenant: &str) {
    for ((at, _), vector) in CORPUS.iter().zip(VECTORS) {
        store
            .set_embedding(&tenant_named(tenant), &uri(at), vector)
            .unwrap_or_else(|error| panic!("set_embedding of {at} failed: {error}"));
    }
}

/// Operations on entries that are not there name why: `update`, `forget`, `history` and
/// `set_embedding` of an unknown URI are `NotFound`; reads and writes of a forgotten entry are
/// `Forgotten`; a query vector of dimensions no stored vector has is `DimensionMismatch` naming
/// both. None of them is a storage error, and none writes anything.
pub fn missing_items_are_their_documented_errors(new: &NewMemoryStore<'_>) {
    let store = new();
    let store = store.as_ref();
    add_corpus(store, TENANT_A);
    add_vectors(store, TENANT_A);
    let before = store.stats(&tenant_a()).unwrap();
    let unknown = uri("viking://resources/never/written.md");
    let not_found = |what: &str, result: Result<(), MemoryError>| {
        assert!(
            matches!(&result, Err(MemoryError::NotFound { uri, .. }) if *uri == unknown),
            "{what} of an unknown URI is NotFound naming it, got {result:?}"
        );
    };
    not_found("get", store.get(&tenant_a(), &unknown).map(drop));
    not_found(
        "update",
        store
            .update(&tenant_a(), NewMemory::new(unknown.clone(), "new content"))
            .map(drop),
    );
    not_found("forget", store.forget(&tenant_a(), &unknown).map(drop));
    not_found("history", store.history(&tenant_a(), &unknown).map(drop));
    not_found(
        "set_embedding",
        store.set_embedding(&tenant_a(), &unknown, &[1.0, 0.0, 0.0]),
    );

    let forgotten = uri(CORPUS[5].0);
    store.forget(&tenant_a(), &forgotten).unwrap();
    let after_forget = store.stats(&tenant_a()).unwrap();
    let gone = |what: &str, result: Result<(), MemoryError>| {
        assert!(
            matches!(&result, Err(MemoryError::Forgotten { uri, .. }) if *uri == forgotten),
            "{what} of a forgotten entry is Forgotten naming it, got {result:?}"
        );
    };
    gone("get", store.get(&tenant_a(), &forgotten).map(drop));
    gone(
        "update",
        store
            .update(&tenant_a(), NewMemory::new(forgotten.clone(), "again"))
            .map(drop),
    );
    gone("forget", store.forget(&tenant_a(), &forgotten).map(drop));

    let mismatch = store.search(
        &tenant_a(),
        &SearchQuery::text("", 5).with_vector(vec![1.0, 0.0]),
    );
    assert!(
        matches!(
            &mismatch,
            Err(MemoryError::DimensionMismatch { query: 2, stored }) if stored == &[3]
        ),
        "a 2-dimensional query against 3-dimensional vectors is DimensionMismatch, got \
         {mismatch:?}"
    );
    assert_eq!(
        (before.live, before.superseded),
        (after_forget.live + 1, after_forget.superseded),
        "only the forget wrote anything"
    );
    assert_eq!(
        store.stats(&tenant_a()).unwrap(),
        after_forget,
        "the refused operations wrote nothing"
    );
}

fn assert_hits_consistent(hits: &[crate::memories::SearchHit], limit: usize, what: &str) {
    assert!(hits.len() <= limit, "{what}: more hits than the limit");
    let mut seen = std::collections::HashSet::new();
    for pair in hits.windows(2) {
        assert!(
            pair[0].score >= pair[1].score,
            "{what}: hits are best first: {} before {}",
            pair[0].score,
            pair[1].score
        );
    }
    for hit in hits {
        assert!(seen.insert(hit.memory.id), "{what}: a hit came twice");
        assert_eq!(
            hit.memory.status,
            MemoryStatus::Live,
            "{what}: a hit is live"
        );
        assert_eq!(
            hit.text_rank.is_some(),
            hit.bm25.is_some(),
            "{what}: a text rank comes with its BM25 score"
        );
        assert_eq!(
            hit.vector_rank.is_some(),
            hit.cosine.is_some(),
            "{what}: a vector rank comes with its cosine"
        );
        assert!(
            hit.text_rank.is_some() || hit.vector_rank.is_some(),
            "{what}: a hit was found by text or by vector"
        );
    }
}

/// Hits come best first (the score never rises), each once, live, and explained: a text rank
/// with its BM25 score, a vector rank with its cosine. A text-only search has no vector ranks; a
/// vector-only search has no text ranks and orders by cosine.
pub fn search_hits_are_ordered_and_explained(new: &NewMemoryStore<'_>) {
    let store = new();
    let store = store.as_ref();
    add_corpus(store, TENANT_A);
    add_vectors(store, TENANT_A);
    for (text, _) in QUERIES {
        let hits = store
            .search(&tenant_a(), &SearchQuery::text(*text, 3))
            .unwrap();
        assert_hits_consistent(&hits, 3, text);
        assert!(
            hits.iter().all(|hit| hit.vector_rank.is_none()),
            "{text}: a text-only search has no vector ranks"
        );
        let hybrid = store
            .search(
                &tenant_a(),
                &SearchQuery::text(*text, 10).with_vector(vec![0.3, 0.9, 0.1]),
            )
            .unwrap();
        assert_hits_consistent(&hybrid, 10, text);
    }
    let by_vector = store
        .search(
            &tenant_a(),
            &SearchQuery::text("", 10).with_vector(vec![0.1, 0.9, 0.2]),
        )
        .unwrap();
    assert_hits_consistent(&by_vector, 10, "vector only");
    assert_eq!(
        by_vector.len(),
        VECTORS.len(),
        "a vector-only search finds every entry with a vector"
    );
    for pair in by_vector.windows(2) {
        assert!(
            pair[0].cosine >= pair[1].cosine,
            "a vector-only search orders by cosine: {:?} before {:?}",
            pair[0].cosine,
            pair[1].cosine
        );
    }
    assert!(by_vector.iter().all(|hit| hit.text_rank.is_none()));
}

/// Gets and searches on several threads while another thread adds entries: each read finds
/// every entry whose add returned before the read began, by URI and by search.
pub fn reads_run_beside_writes(new: &NewMemoryStore<'_>) {
    let store = new();
    let store = store.as_ref();
    // Words no other entry has, so no backend merges one entry into another.
    let words = |step: usize| -> String {
        (0..6)
            .map(|k| format!("w{:x}", (step * 7919 + k * 104_729) % 1_000_003))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let at = |step: usize| uri(&format!("viking://resources/log/{step}.md"));
    super::reads_beside_writes(
        16,
        3,
        &|step| {
            let content = format!("pottery kiln log {}", words(step));
            let outcome = store
                .add(&tenant_a(), NewMemory::new(at(step), content))
                .unwrap();
            assert!(
                matches!(outcome, AddOutcome::Added(_)),
                "entry {step} added"
            );
        },
        &|written| {
            let last = written - 1;
            let read = store.get(&tenant_a(), &at(last));
            assert!(
                matches!(&read, Ok(memory) if memory.uri == at(last)),
                "entry {last} was added before this read began, got {read:?}"
            );
            let found = search_uris(store, TENANT_A, &words(last), 5);
            assert_eq!(
                found.first().map(String::as_str),
                Some(at(last).as_str()),
                "a search for entry {last}'s own words finds it first"
            );
            let all = search_uris(store, TENANT_A, "kiln", 100);
            assert!(
                all.len() >= written,
                "{written} adds returned but a search finds {}",
                all.len()
            );
        },
    );
}

/// Searches through a reopened handle return exactly what they returned before it closed:
/// the same hits in the same order, with the same scores (the full-text index and the vectors
/// are as durable as the entries). `open` returns a new handle on the same persistent storage
/// on every call.
pub fn search_survives_reopen(open: &NewMemoryStore<'_>) {
    // A tenant of its own, so this check and [`survives_reopen`] can share one storage.
    const TENANT: &str = "conformance-search-reopen";
    let queries: Vec<SearchQuery> = QUERIES
        .iter()
        .map(|(text, _)| SearchQuery::text(*text, 5))
        .chain([
            SearchQuery::text("alice editor tokens", 5).with_vector(vec![0.2, 0.9, 0.1]),
            SearchQuery::text("", 5).with_vector(vec![0.9, 0.1, 0.3]),
        ])
        .collect();
    let before: Vec<_> = {
        let store = open();
        add_corpus(store.as_ref(), TENANT);
        add_vectors(store.as_ref(), TENANT);
        queries
            .iter()
            .map(|query| store.search(&tenant_named(TENANT), query).unwrap())
            .collect()
    };
    let store = open();
    for (query, hits) in queries.iter().zip(&before) {
        assert_eq!(
            &store.search(&tenant_named(TENANT), query).unwrap(),
            hits,
            "search {:?} returns the same after a reopen",
            query.text
        );
    }
}
