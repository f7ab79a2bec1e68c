//! Checks of a [`SessionStore`]: create/get/list, appends read back in order, the leaf,
//! `entries_after`, append-only history, tenant isolation, ids checked before storage, writes to
//! a missing session `NotFound`, reads beside appends on other threads, and durability across a
//! reopen. Each check panics with the violated property.
//!
//! Append-only is checked in two ways: the trait has no method that changes or removes an entry
//! (so no caller can), and every write that would reuse an id, name an unknown parent or rewrite
//! a branch leaves the entries already stored exactly as they were.

use std::collections::BTreeMap;

use skald_core::message::{Extra, Message, Role};
use skald_core::session::{Entry, EntryKind, SessionHeader};

use super::{
    NewSessionStore, SessionCheck, TENANT_A, TENANT_B, session_id, tenant_a, tenant_b, tenant_named,
};
use crate::sessions::{NewSession, SessionError, SessionStore, SessionSwitches};

/// Every check but [`survives_reopen`], by name.
pub const CHECKS: &[(&str, SessionCheck)] = &[
    ("create_get_list", create_get_list),
    ("appends_read_back_in_order", appends_read_back_in_order),
    ("leaf_moves", leaf_moves),
    (
        "entries_after_is_the_tail_of_a_full_read",
        entries_after_is_the_tail_of_a_full_read,
    ),
    ("history_is_append_only", history_is_append_only),
    ("tenants_are_isolated", tenants_are_isolated),
    (
        "invalid_ids_are_refused_before_storage",
        invalid_ids_are_refused_before_storage,
    ),
    (
        "writes_to_missing_sessions_are_not_found",
        writes_to_missing_sessions_are_not_found,
    ),
    ("reads_run_beside_appends", reads_run_beside_appends),
    (
        "switches_are_kept_apart_from_the_entries",
        switches_are_kept_apart_from_the_entries,
    ),
];

/// Runs every check of [`CHECKS`], each on a fresh store from `new`.
pub fn run_all(new: &NewSessionStore<'_>) {
    for (_, check) in CHECKS {
        check(new);
    }
}

fn header(id: &str) -> SessionHeader {
    SessionHeader {
        id: id.into(),
        cwd: Some("/work/conformance".into()),
        ..SessionHeader::default()
    }
}

fn session(id: &str) -> NewSession {
    let mut new = NewSession::new(header(id), "openclaw-session");
    new.title = Some(format!("title of {id}"));
    new.source = Some(format!("/transcripts/{id}.jsonl"));
    new
}

fn entry(id: &str, parent: Option<&str>, role: Role, text: &str) -> Entry {
    Entry {
        id: id.into(),
        parent_id: parent.map(str::to_owned),
        timestamp: "2026-02-03T09:00:00.000Z".into(),
        kind: EntryKind::Message(Message::text(role, text)),
        extra: Extra::new(),
    }
}

/// A chain `e1 ← e2 ← … ← en` of alternating user and assistant messages.
fn chain(prefix: &str, n: usize) -> Vec<Entry> {
    (1..=n)
        .map(|i| {
            let parent = (i > 1).then(|| format!("{prefix}{}", i - 1));
            let role = if i % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            entry(
                &format!("{prefix}{i}"),
                parent.as_deref(),
                role,
                &format!("message {i} of {prefix}"),
            )
        })
        .collect()
}

fn ids(entries: &[Entry]) -> Vec<&str> {
    entries.iter().map(|entry| entry.id.as_str()).collect()
}

fn leaf(store: &dyn SessionStore, tenant: &str, id: &str) -> Option<String> {
    store
        .get(&tenant_named(tenant), &session_id(id))
        .unwrap_or_else(|error| panic!("get({tenant}, {id}) failed: {error}"))
        .leaf_id
}

fn entries(store: &dyn SessionStore, tenant: &str, id: &str) -> Vec<Entry> {
    store
        .entries(&tenant_named(tenant), &session_id(id))
        .unwrap_or_else(|error| panic!("entries({tenant}, {id}) failed: {error}"))
}

/// `create` stores the header and listing fields, `get` returns them, `list` shows the tenant's
/// sessions, a second `create` of the same id is refused, and an unknown id is `NotFound`.
pub fn create_get_list(new: &NewSessionStore<'_>) {
    let store = new();
    let store = store.as_ref();
    assert!(
        store.list(&tenant_a()).unwrap().is_empty(),
        "a fresh store lists no sessions"
    );
    let created = store.create(&tenant_a(), session("s1")).unwrap();
    assert_eq!(created.tenant, TENANT_A, "create returns the tenant");
    assert_eq!(created.id, "s1", "the session id is the header's id");
    assert_eq!(created.header, header("s1"), "create keeps the header");
    assert_eq!(created.source_format, "openclaw-session");
    assert_eq!(created.title.as_deref(), Some("title of s1"));
    assert_eq!(created.source.as_deref(), Some("/transcripts/s1.jsonl"));
    assert_eq!(created.leaf_id, None, "an empty session has no leaf");
    assert_eq!((created.entry_count, created.message_count), (0, 0));
    assert_eq!(
        store.get(&tenant_a(), &session_id("s1")).unwrap(),
        created,
        "get returns what create returned"
    );

    let mut with_entries = session("s2");
    with_entries.entries = chain("e", 3);
    let second = store.create(&tenant_a(), with_entries).unwrap();
    assert_eq!(
        second.leaf_id.as_deref(),
        Some("e3"),
        "create with entries puts the leaf on the last one"
    );
    assert_eq!((second.entry_count, second.message_count), (3, 3));
    assert_eq!(ids(&entries(store, TENANT_A, "s2")), ["e1", "e2", "e3"]);

    let mut listed: Vec<String> = store
        .list(&tenant_a())
        .unwrap()
        .into_iter()
        .map(|info| info.id)
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        ["s1", "s2"],
        "list shows every session of the tenant"
    );

    let again = store.create(&tenant_a(), session("s1"));
    assert!(
        matches!(again, Err(SessionError::AlreadyExists { .. })),
        "a second create of the same id is AlreadyExists, got {again:?}"
    );
    assert_eq!(
        store.get(&tenant_a(), &session_id("s1")).unwrap(),
        created,
        "a refused create changes nothing"
    );
    let missing = store.get(&tenant_a(), &session_id("nope"));
    assert!(
        matches!(missing, Err(SessionError::NotFound { .. })),
        "get of an unknown session is NotFound, got {missing:?}"
    );
    let missing = store.load(&tenant_a(), &session_id("nope"));
    assert!(
        matches!(missing, Err(SessionError::NotFound { .. })),
        "load of an unknown session is NotFound, got {missing:?}"
    );
}

/// Appended entries read back exactly as given, in append order, across several appends; the
/// counts follow.
pub fn appends_read_back_in_order(new: &NewSessionStore<'_>) {
    let store = new();
    let store = store.as_ref();
    store.create(&tenant_a(), session("s1")).unwrap();
    let all = chain("e", 7);
    store
        .append(&tenant_a(), &session_id("s1"), &all[..3])
        .unwrap();
    store
        .append(&tenant_a(), &session_id("s1"), &all[3..4])
        .unwrap();
    store
        .append(&tenant_a(), &session_id("s1"), &all[4..])
        .unwrap();
    assert_eq!(
        entries(store, TENANT_A, "s1"),
        all,
        "entries read back exactly as appended, in append order"
    );
    let loaded = store.load(&tenant_a(), &session_id("s1")).unwrap();
    assert_eq!(
        loaded.entries(),
        all.as_slice(),
        "load has the same entries"
    );
    let info = store.get(&tenant_a(), &session_id("s1")).unwrap();
    assert_eq!((info.entry_count, info.message_count), (7, 7));

    // Append order, not id order or parent order: a second root and a side branch.
    let side = vec![
        entry("zz-root", None, Role::User, "a second root"),
        entry("aa-side", Some("e2"), Role::Assistant, "a branch off e2"),
    ];
    store.append(&tenant_a(), &session_id("s1"), &side).unwrap();
    let read = entries(store, TENANT_A, "s1");
    assert_eq!(
        ids(&read),
        [
            "e1", "e2", "e3", "e4", "e5", "e6", "e7", "zz-root", "aa-side"
        ],
        "entries come back in append order"
    );
    let message = store
        .append_message(
            &tenant_a(),
            &session_id("s1"),
            Message::text(Role::User, "appended"),
        )
        .unwrap();
    let read = entries(store, TENANT_A, "s1");
    assert_eq!(
        read.last(),
        Some(&message),
        "append_message's entry is stored as returned, last"
    );
    assert_eq!(
        message.parent_id.as_deref(),
        Some("aa-side"),
        "append_message hangs the message under the leaf"
    );
    let path = store.path(&tenant_a(), &session_id("s1"), None).unwrap();
    assert_eq!(
        ids(&path),
        ["e1", "e2", "aa-side", message.id.as_str()],
        "the path runs from the root to the leaf"
    );
}

/// The leaf is the last appended entry; `set_leaf` moves it to any stored entry or to none, the
/// next message hangs under it, and an unknown entry is refused without moving it.
pub fn leaf_moves(new: &NewSessionStore<'_>) {
    let store = new();
    let store = store.as_ref();
    store.create(&tenant_a(), session("s1")).unwrap();
    store
        .append(&tenant_a(), &session_id("s1"), &chain("e", 4))
        .unwrap();
    assert_eq!(leaf(store, TENANT_A, "s1").as_deref(), Some("e4"));

    store
        .set_leaf(&tenant_a(), &session_id("s1"), Some("e2"))
        .unwrap();
    assert_eq!(
        leaf(store, TENANT_A, "s1").as_deref(),
        Some("e2"),
        "set_leaf moves the leaf"
    );
    let context = store.context(&tenant_a(), &session_id("s1"), None).unwrap();
    assert_eq!(context.len(), 2, "the context follows the leaf");
    let child = store
        .append_message(
            &tenant_a(),
            &session_id("s1"),
            Message::text(Role::User, "from e2"),
        )
        .unwrap();
    assert_eq!(
        child.parent_id.as_deref(),
        Some("e2"),
        "a message hangs under the moved leaf"
    );
    assert_eq!(leaf(store, TENANT_A, "s1"), Some(child.id.clone()));
    assert_eq!(
        store
            .context(&tenant_a(), &session_id("s1"), Some("e4"))
            .unwrap()
            .len(),
        4,
        "the old branch is still readable by its leaf"
    );

    let refused = store.set_leaf(&tenant_a(), &session_id("s1"), Some("no-such-entry"));
    assert!(
        refused.is_err(),
        "set_leaf to an unknown entry is refused, got {refused:?}"
    );
    assert_eq!(
        leaf(store, TENANT_A, "s1"),
        Some(child.id.clone()),
        "a refused set_leaf does not move the leaf"
    );
    let unknown = store.context(&tenant_a(), &session_id("s1"), Some("no-such-entry"));
    assert!(
        matches!(unknown, Err(SessionError::UnknownEntry { .. })),
        "an explicit unknown leaf is UnknownEntry, not an empty context: {unknown:?}"
    );

    store
        .set_leaf(&tenant_a(), &session_id("s1"), None)
        .unwrap();
    assert_eq!(
        leaf(store, TENANT_A, "s1"),
        None,
        "set_leaf(None) clears it"
    );
    let root = store
        .append_message(
            &tenant_a(),
            &session_id("s1"),
            Message::text(Role::User, "new root"),
        )
        .unwrap();
    assert_eq!(
        root.parent_id, None,
        "after set_leaf(None) a message is a root"
    );
    assert_eq!(
        entries(store, TENANT_A, "s1").len(),
        6,
        "moving the leaf removes nothing"
    );
}

/// `entries_after(skip)` is exactly the entries of a full read from `skip` on, for every `skip`
/// (past the end: none), after several appends and a branch rewrite.
pub fn entries_after_is_the_tail_of_a_full_read(new: &NewSessionStore<'_>) {
    let store = new();
    let store = store.as_ref();
    store.create(&tenant_a(), session("s1")).unwrap();
    assert!(
        store
            .entries_after(&tenant_a(), &session_id("s1"), 0)
            .unwrap()
            .is_empty()
    );
    store
        .append(&tenant_a(), &session_id("s1"), &chain("e", 5))
        .unwrap();
    store
        .append_message(
            &tenant_a(),
            &session_id("s1"),
            Message::text(Role::User, "more"),
        )
        .unwrap();
    let rewrites = BTreeMap::from([(
        "e4".to_owned(),
        EntryKind::Message(Message::text(Role::Assistant, "shorter")),
    )]);
    store
        .rewrite_branch(&tenant_a(), &session_id("s1"), rewrites, "conformance")
        .unwrap();
    let full = entries(store, TENANT_A, "s1");
    for skip in 0..=full.len() + 2 {
        let tail = store
            .entries_after(&tenant_a(), &session_id("s1"), skip as u64)
            .unwrap();
        let expected = full.get(skip..).unwrap_or_default();
        assert_eq!(
            tail, expected,
            "entries_after({skip}) must equal the full read from entry {skip} on"
        );
    }
    let far = store
        .entries_after(&tenant_a(), &session_id("s1"), u64::MAX)
        .unwrap();
    assert!(far.is_empty(), "entries_after(u64::MAX) is empty");
}

/// No write changes or removes a stored entry: a reused id, an unknown parent (even later in a
/// batch whose first entries are fine), a compaction and a branch rewrite all leave every stored
/// entry as it was; the rewrite adds a new branch and the old one stays readable.
pub fn history_is_append_only(new: &NewSessionStore<'_>) {
    let store = new();
    let store = store.as_ref();
    store.create(&tenant_a(), session("s1")).unwrap();
    store
        .append(&tenant_a(), &session_id("s1"), &chain("e", 4))
        .unwrap();
    let before = entries(store, TENANT_A, "s1");

    let reuse = entry("e2", Some("e4"), Role::User, "a different e2");
    let refused = store.append(&tenant_a(), &session_id("s1"), &[reuse]);
    assert!(
        matches!(refused, Err(SessionError::DuplicateEntryId { .. })),
        "appending an id the session has is DuplicateEntryId, got {refused:?}"
    );
    assert_eq!(
        entries(store, TENANT_A, "s1"),
        before,
        "a refused append with a reused id changes nothing"
    );

    let batch = vec![
        entry("ok1", Some("e4"), Role::User, "fine"),
        entry("bad", Some("nowhere"), Role::Assistant, "orphan"),
    ];
    let refused = store.append(&tenant_a(), &session_id("s1"), &batch);
    assert!(
        matches!(refused, Err(SessionError::UnknownParent { .. })),
        "an unknown parent is UnknownParent, got {refused:?}"
    );
    assert_eq!(
        entries(store, TENANT_A, "s1"),
        before,
        "a refused batch appends nothing, not even its valid first entries"
    );
    let twice = vec![
        entry("dup", Some("e4"), Role::User, "one"),
        entry("dup", Some("e4"), Role::User, "two"),
    ];
    let refused = store.append(&tenant_a(), &session_id("s1"), &twice);
    assert!(
        matches!(refused, Err(SessionError::DuplicateEntryId { .. })),
        "a batch reusing an id of itself is DuplicateEntryId, got {refused:?}"
    );
    assert_eq!(entries(store, TENANT_A, "s1"), before);

    let old_context = store.context(&tenant_a(), &session_id("s1"), None).unwrap();
    let rewrites = BTreeMap::from([(
        "e3".to_owned(),
        EntryKind::Message(Message::text(Role::User, "rewritten e3")),
    )]);
    let rewrite = store
        .rewrite_branch(&tenant_a(), &session_id("s1"), rewrites, "conformance")
        .unwrap();
    let after = entries(store, TENANT_A, "s1");
    assert_eq!(
        after.get(..before.len()),
        Some(before.as_slice()),
        "a branch rewrite keeps every entry as it was, in place"
    );
    assert!(
        after.len() > before.len(),
        "a branch rewrite appends the new branch"
    );
    assert_eq!(leaf(store, TENANT_A, "s1"), Some(rewrite.leaf_id.clone()));
    assert_eq!(rewrite.fork_parent_id.as_deref(), Some("e2"));
    assert_eq!(
        store
            .context(&tenant_a(), &session_id("s1"), Some("e4"))
            .unwrap(),
        old_context,
        "the old branch still gives the old context"
    );
    let new_context = store.context(&tenant_a(), &session_id("s1"), None).unwrap();
    assert_eq!(
        new_context.get(2).map(Message::plain_text).as_deref(),
        Some("rewritten e3"),
        "the new branch has the rewrite"
    );
    let unknown = BTreeMap::from([(
        "nope".to_owned(),
        EntryKind::Message(Message::text(Role::User, "x")),
    )]);
    let refused = store.rewrite_branch(&tenant_a(), &session_id("s1"), unknown, "conformance");
    assert!(refused.is_err(), "rewriting an unknown entry is refused");
    assert_eq!(
        entries(store, TENANT_A, "s1"),
        after,
        "a refused rewrite changes nothing"
    );
}

/// Tenant B never sees, reads, appends to, moves, rewrites or lists tenant A's session, even
/// under the same session id; B's own session of that id is separate.
pub fn tenants_are_isolated(new: &NewSessionStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let mut a = session("shared");
    a.entries = chain("e", 3);
    let a_info = store.create(&tenant_a(), a).unwrap();
    let a_entries = entries(store, TENANT_A, "shared");

    let not_found = |what: &str, result: Result<(), SessionError>| {
        assert!(
            matches!(result, Err(SessionError::NotFound { .. })),
            "tenant B's {what} of tenant A's session must be NotFound, got {result:?}"
        );
    };
    not_found(
        "get",
        store.get(&tenant_b(), &session_id("shared")).map(drop),
    );
    not_found(
        "load",
        store.load(&tenant_b(), &session_id("shared")).map(drop),
    );
    not_found(
        "entries",
        store.entries(&tenant_b(), &session_id("shared")).map(drop),
    );
    not_found(
        "entries_after",
        store
            .entries_after(&tenant_b(), &session_id("shared"), 0)
            .map(drop),
    );
    not_found(
        "path",
        store
            .path(&tenant_b(), &session_id("shared"), None)
            .map(drop),
    );
    not_found(
        "context",
        store
            .context(&tenant_b(), &session_id("shared"), None)
            .map(drop),
    );
    not_found(
        "append",
        store.append(
            &tenant_b(),
            &session_id("shared"),
            &[entry("b1", Some("e3"), Role::User, "intrusion")],
        ),
    );
    not_found(
        "append_message",
        store
            .append_message(
                &tenant_b(),
                &session_id("shared"),
                Message::text(Role::User, "intrusion"),
            )
            .map(drop),
    );
    not_found(
        "set_leaf",
        store.set_leaf(&tenant_b(), &session_id("shared"), Some("e1")),
    );
    let rewrites = BTreeMap::from([(
        "e2".to_owned(),
        EntryKind::Message(Message::text(Role::User, "intrusion")),
    )]);
    not_found(
        "rewrite_branch",
        store
            .rewrite_branch(&tenant_b(), &session_id("shared"), rewrites, "intrusion")
            .map(drop),
    );
    assert!(
        store.list(&tenant_b()).unwrap().is_empty(),
        "tenant B lists none of tenant A's sessions"
    );
    assert_eq!(
        store.get(&tenant_a(), &session_id("shared")).unwrap(),
        a_info,
        "tenant B's attempts change nothing of tenant A's session"
    );
    assert_eq!(entries(store, TENANT_A, "shared"), a_entries);

    let mut b = session("shared");
    b.entries = vec![entry("e1", None, Role::User, "tenant b's own e1")];
    store.create(&tenant_b(), b).unwrap();
    assert_eq!(
        ids(&entries(store, TENANT_B, "shared")),
        ["e1"],
        "tenant B's session of the same id has only B's entries"
    );
    assert_eq!(
        entries(store, TENANT_A, "shared"),
        a_entries,
        "tenant B creating the same session id does not touch tenant A's"
    );
    let listed_b: Vec<String> = store
        .list(&tenant_b())
        .unwrap()
        .into_iter()
        .map(|info| info.tenant)
        .collect();
    assert_eq!(listed_b, [TENANT_B], "tenant B lists only its own session");
    let listed_a = store.list(&tenant_a()).unwrap();
    assert_eq!(
        listed_a.len(),
        1,
        "tenant A still lists only its own session"
    );
    assert_eq!(listed_a[0].entry_count, 3);
}

/// A header whose session id is invalid is refused by `create`, invalid entry ids by `append`,
/// each with its own error, and nothing is stored. (Every other method takes a [`Tenant`] and a
/// [`SessionId`], well formed by their types: a bad name never reaches a store.)
pub fn invalid_ids_are_refused_before_storage(new: &NewSessionStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let long = "s".repeat(129);
    for id in [
        "",
        "../etc/passwd",
        "a b",
        "-leading-dash",
        "a/b",
        long.as_str(),
    ] {
        let refused = store.create(&tenant_a(), session(id));
        assert!(
            matches!(refused, Err(SessionError::InvalidSessionId { .. })),
            "create of session id {id:?} is InvalidSessionId, got {refused:?}"
        );
    }
    assert!(
        store.list(&tenant_a()).unwrap().is_empty(),
        "refused creates store nothing"
    );

    store.create(&tenant_a(), session("s1")).unwrap();
    let long_entry = "e".repeat(129);
    for id in ["", "a b", "tab\there", long_entry.as_str()] {
        let refused = store.append(
            &tenant_a(),
            &session_id("s1"),
            &[entry(id, None, Role::User, "x")],
        );
        assert!(
            matches!(refused, Err(SessionError::InvalidEntryId { .. })),
            "an entry id {id:?} is InvalidEntryId, got {refused:?}"
        );
    }
    assert!(
        entries(store, TENANT_A, "s1").is_empty(),
        "refused appends store nothing"
    );
}

/// Every write to a session that does not exist is `NotFound` (not a storage error) and creates
/// nothing; a leaf that names no entry of an existing session is `UnknownEntry`.
pub fn writes_to_missing_sessions_are_not_found(new: &NewSessionStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let not_found = |what: &str, result: Result<(), SessionError>| {
        assert!(
            matches!(&result, Err(SessionError::NotFound { id, .. }) if id == "missing"),
            "{what} of a missing session is NotFound naming it, got {result:?}"
        );
    };
    not_found(
        "append_message",
        store
            .append_message(
                &tenant_a(),
                &session_id("missing"),
                Message::text(Role::User, "hello"),
            )
            .map(drop),
    );
    not_found(
        "append",
        store.append(&tenant_a(), &session_id("missing"), &chain("m", 1)),
    );
    not_found(
        "set_leaf",
        store.set_leaf(&tenant_a(), &session_id("missing"), None),
    );
    not_found(
        "entries_after",
        store
            .entries_after(&tenant_a(), &session_id("missing"), 0)
            .map(drop),
    );
    assert!(
        store.list(&tenant_a()).unwrap().is_empty(),
        "the refused writes created no session"
    );
    store.create(&tenant_a(), session("s1")).unwrap();
    let unknown = store.set_leaf(&tenant_a(), &session_id("s1"), Some("no-such-entry"));
    assert!(
        matches!(unknown, Err(SessionError::UnknownEntry { .. })),
        "set_leaf to an entry the session lacks is UnknownEntry, got {unknown:?}"
    );
}

/// A session's switches start off, read back as set (from `get` and `list`), change neither its
/// entries, its leaf nor its activity time, belong to its tenant only, and a missing session's
/// are `NotFound`.
pub fn switches_are_kept_apart_from_the_entries(new: &NewSessionStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let mut with_entries = session("s1");
    with_entries.entries = chain("e", 3);
    let created = store.create(&tenant_a(), with_entries).unwrap();
    assert_eq!(
        created.switches,
        SessionSwitches::default(),
        "a new session has every switch off"
    );
    let paused = SessionSwitches {
        pause_compaction: true,
        pause_offload: false,
    };
    let after = store
        .set_switches(&tenant_a(), &session_id("s1"), paused)
        .unwrap();
    assert_eq!(
        after.switches, paused,
        "set_switches returns the new switches"
    );
    let read = store.get(&tenant_a(), &session_id("s1")).unwrap();
    assert_eq!(read.switches, paused, "get reads the switches back");
    assert_eq!(
        (
            read.leaf_id.as_deref(),
            read.entry_count,
            read.updated_at_ms
        ),
        (Some("e3"), 3, created.updated_at_ms),
        "switches change neither the leaf, the entries nor the activity time"
    );
    assert_eq!(ids(&entries(store, TENANT_A, "s1")), ["e1", "e2", "e3"]);
    let listed = store.list(&tenant_a()).unwrap();
    assert_eq!(listed[0].switches, paused, "list reads the switches too");
    let both = SessionSwitches {
        pause_compaction: false,
        pause_offload: true,
    };
    store
        .set_switches(&tenant_a(), &session_id("s1"), both)
        .unwrap();
    assert_eq!(
        store.get(&tenant_a(), &session_id("s1")).unwrap().switches,
        both,
        "a second set replaces the first"
    );
    let foreign = store.set_switches(&tenant_b(), &session_id("s1"), paused);
    assert!(
        matches!(foreign, Err(SessionError::NotFound { .. })),
        "tenant B cannot set tenant A's switches, got {foreign:?}"
    );
    let missing = store.set_switches(&tenant_a(), &session_id("missing"), paused);
    assert!(
        matches!(missing, Err(SessionError::NotFound { .. })),
        "set_switches of a missing session is NotFound, got {missing:?}"
    );
    assert_eq!(
        store.get(&tenant_a(), &session_id("s1")).unwrap().switches,
        both,
        "refused sets change nothing"
    );
}

/// Loads and `entries_after` on several threads while another thread appends: each read has
/// every entry whose append returned before the read began, in append order.
pub fn reads_run_beside_appends(new: &NewSessionStore<'_>) {
    let store = new();
    let store = store.as_ref();
    store.create(&tenant_a(), session("busy")).unwrap();
    let appended = std::sync::Mutex::new(Vec::new());
    super::reads_beside_writes(
        24,
        3,
        &|step| {
            let message = Message::text(Role::User, format!("message {step}"));
            let entry = store
                .append_message(&tenant_a(), &session_id("busy"), message)
                .unwrap();
            appended.lock().unwrap().push(entry.id);
        },
        &|written| {
            let expected: Vec<String> = appended.lock().unwrap()[..written].to_vec();
            let loaded = entries(store, TENANT_A, "busy");
            let loaded: Vec<&str> = ids(&loaded);
            assert!(
                loaded.len() >= written && loaded[..written] == expected[..],
                "a load after {written} appends returned must start with them, in order: \
                 {loaded:?}"
            );
            let tail = store
                .entries_after(&tenant_a(), &session_id("busy"), (written - 1) as u64)
                .unwrap();
            assert_eq!(
                tail.first().map(|entry| entry.id.as_str()),
                expected.last().map(String::as_str),
                "entries_after skips exactly the entries before it"
            );
        },
    );
}

/// What one handle wrote (a session, appends, a moved leaf, a rewrite) is read back through a
/// reopened handle. `open` returns a new handle on the same persistent storage on every call.
pub fn survives_reopen(open: &NewSessionStore<'_>) {
    let (info, all) = {
        let store = open();
        let mut new = session("durable");
        new.entries = chain("e", 3);
        store.create(&tenant_a(), new).unwrap();
        store
            .append_message(
                &tenant_a(),
                &session_id("durable"),
                Message::text(Role::User, "appended"),
            )
            .unwrap();
        store
            .set_leaf(&tenant_a(), &session_id("durable"), Some("e2"))
            .unwrap();
        let rewrites = BTreeMap::from([(
            "e2".to_owned(),
            EntryKind::Message(Message::text(Role::Assistant, "rewritten")),
        )]);
        store
            .rewrite_branch(&tenant_a(), &session_id("durable"), rewrites, "conformance")
            .unwrap();
        (
            store.get(&tenant_a(), &session_id("durable")).unwrap(),
            store.entries(&tenant_a(), &session_id("durable")).unwrap(),
        )
    };
    let store = open();
    assert_eq!(
        store.get(&tenant_a(), &session_id("durable")).unwrap(),
        info,
        "a reopened store has the session as it was written (leaf included)"
    );
    assert_eq!(
        store.entries(&tenant_a(), &session_id("durable")).unwrap(),
        all,
        "a reopened store has every entry, in order"
    );
    assert!(
        store.list(&tenant_b()).unwrap().is_empty(),
        "reopening does not move sessions across tenants"
    );
}
