//! The session store: append-only entry trees per tenant, the leaf pointer, contexts rebuilt as
//! OpenClaw builds them, branch rewrites that keep the old branch, and imports that never
//! duplicate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use skald_core::codec::openclaw::decode_session;
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolResult};
use skald_core::session::{Entry, EntryKind, SessionHeader};
use skald_store::sessions::import::{ImportError, ImportOptions, ImportStatus, import_transcript};
use skald_store::sessions::{
    BRANCH_REWRITE_CUSTOM_TYPE, CompactionCheckpoint, NewSession, SessionError, SessionStore,
    SqliteSessionStore, tokens_after,
};
use skald_store::{ManualClock, RefSettings, SqliteRefStore};

const FIXTURE: &str = include_str!("fixtures/branching_session.jsonl");
const FIXTURE_ID: &str = "3f2a9c1e-7b4d-4e8a-9c2f-1a2b3c4d5e6f";

fn store() -> SqliteSessionStore {
    SqliteSessionStore::in_memory_with_clock(Arc::new(ManualClock::new(1_770_000_000_000))).unwrap()
}

fn header(id: &str) -> SessionHeader {
    SessionHeader {
        id: id.into(),
        ..SessionHeader::default()
    }
}

fn new_session(store: &SqliteSessionStore, tenant: &str, id: &str) {
    store
        .create(
            &tenant_named(tenant),
            NewSession::new(header(id), "openclaw-session"),
        )
        .unwrap();
}

fn user(text: &str) -> Message {
    Message::text(Role::User, text)
}

fn assistant(text: &str) -> Message {
    Message::text(Role::Assistant, text)
}

fn entry(id: &str, parent: Option<&str>, message: Message) -> Entry {
    Entry {
        id: id.into(),
        parent_id: parent.map(str::to_owned),
        timestamp: "2026-02-03T09:00:00.000Z".into(),
        kind: EntryKind::Message(message),
        extra: Extra::new(),
    }
}

fn tool_result(call_id: &str, text: &str) -> Message {
    Message::new(
        Role::ToolResult,
        vec![Block::ToolResult(ToolResult {
            call_id: call_id.into(),
            tool_name: Some("bash".into()),
            content: vec![Block::text(text)].into(),
            content_form: ContentForm::Blocks,
            is_error: Some(false),
            details: None,
            extra: Extra::new(),
        })],
    )
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(Message::plain_text).collect()
}

fn import_options() -> ImportOptions {
    ImportOptions {
        source: Some("fixture.jsonl".into()),
        session_id: None,
        now_ms: 1_770_000_000_000,
    }
}

#[test]
fn appended_messages_chain_under_the_leaf_with_pi_style_ids() {
    let store = store();
    new_session(&store, "acme", "s1");
    let first = store
        .append_message(&tenant_named("acme"), &session_named("s1"), user("hello"))
        .unwrap();
    let second = store
        .append_message(&tenant_named("acme"), &session_named("s1"), assistant("hi"))
        .unwrap();
    for id in [&first.id, &second.id] {
        assert_eq!(id.len(), 8);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
    }
    assert_ne!(first.id, second.id);
    assert_eq!(first.parent_id, None);
    assert_eq!(second.parent_id.as_deref(), Some(first.id.as_str()));
    assert_eq!(first.timestamp, "2026-02-02T02:40:00.000Z");

    let info = store
        .get(&tenant_named("acme"), &session_named("s1"))
        .unwrap();
    assert_eq!(info.leaf_id.as_deref(), Some(second.id.as_str()));
    assert_eq!((info.entry_count, info.message_count), (2, 2));
    assert_eq!(
        texts(
            &store
                .context(&tenant_named("acme"), &session_named("s1"), None)
                .unwrap()
        ),
        ["hello", "hi"]
    );
    assert_eq!(
        store
            .path(&tenant_named("acme"), &session_named("s1"), Some(&first.id))
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn generated_ids_stay_unique_over_many_appends() {
    let store = store();
    new_session(&store, "acme", "s1");
    let mut ids = std::collections::HashSet::new();
    for n in 0..300 {
        let entry = store
            .append_message(
                &tenant_named("acme"),
                &session_named("s1"),
                user(&format!("message {n}")),
            )
            .unwrap();
        assert!(ids.insert(entry.id));
    }
    assert_eq!(
        store
            .entries(&tenant_named("acme"), &session_named("s1"))
            .unwrap()
            .len(),
        300
    );
}

#[test]
fn entries_after_reads_only_what_was_appended_since() {
    let store = store();
    new_session(&store, "acme", "s");
    for text in ["one", "two", "three"] {
        store
            .append_message(&tenant_named("acme"), &session_named("s"), user(text))
            .unwrap();
    }
    let all = store
        .entries(&tenant_named("acme"), &session_named("s"))
        .unwrap();
    assert_eq!(
        store
            .entries_after(&tenant_named("acme"), &session_named("s"), 0)
            .unwrap(),
        all
    );
    assert_eq!(
        store
            .entries_after(&tenant_named("acme"), &session_named("s"), 2)
            .unwrap(),
        all[2..]
    );
    assert!(
        store
            .entries_after(&tenant_named("acme"), &session_named("s"), 3)
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .entries_after(&tenant_named("acme"), &session_named("s"), u64::MAX)
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store.entries_after(&tenant_named("other"), &session_named("s"), 0),
        Err(SessionError::NotFound { .. })
    ));
}

#[test]
fn a_bad_parent_is_an_error_and_changes_nothing() {
    let store = store();
    new_session(&store, "acme", "s1");
    store
        .append(
            &tenant_named("acme"),
            &session_named("s1"),
            &[entry("a0000001", None, user("hello"))],
        )
        .unwrap();
    let before = store
        .load(&tenant_named("acme"), &session_named("s1"))
        .unwrap();

    // The first entry of the batch is fine, the second names a parent nobody stored: the batch
    // is refused as a whole.
    let batch = [
        entry("a0000002", Some("a0000001"), assistant("hi")),
        entry("a0000003", Some("ffffffff"), user("orphan")),
    ];
    let error = store
        .append(&tenant_named("acme"), &session_named("s1"), &batch)
        .unwrap_err();
    assert!(
        matches!(&error, SessionError::UnknownParent { id, parent, .. }
            if id == "a0000003" && parent == "ffffffff"),
        "{error}"
    );
    assert!(error.to_string().contains("\"ffffffff\""), "{error}");
    assert_eq!(
        store
            .load(&tenant_named("acme"), &session_named("s1"))
            .unwrap(),
        before
    );
    let info = store
        .get(&tenant_named("acme"), &session_named("s1"))
        .unwrap();
    assert_eq!(
        (info.entry_count, info.leaf_id.as_deref()),
        (1, Some("a0000001"))
    );
}

#[test]
fn duplicate_ids_and_unreadable_entries_are_refused() {
    let store = store();
    new_session(&store, "acme", "s1");
    store
        .append(
            &tenant_named("acme"),
            &session_named("s1"),
            &[entry("a0000001", None, user("hello"))],
        )
        .unwrap();
    let error = store
        .append(
            &tenant_named("acme"),
            &session_named("s1"),
            &[entry("a0000001", None, user("again"))],
        )
        .unwrap_err();
    assert!(
        matches!(error, SessionError::DuplicateEntryId { .. }),
        "{error}"
    );
    let error = store
        .append(
            &tenant_named("acme"),
            &session_named("s1"),
            &[
                entry("a0000002", Some("a0000001"), user("x")),
                entry("a0000002", Some("a0000001"), user("y")),
            ],
        )
        .unwrap_err();
    assert!(
        matches!(error, SessionError::DuplicateEntryId { .. }),
        "{error}"
    );
    let untyped = Entry {
        kind: EntryKind::Other(Extra::new()),
        ..entry("a0000003", Some("a0000001"), user("x"))
    };
    let error = store
        .append(&tenant_named("acme"), &session_named("s1"), &[untyped])
        .unwrap_err();
    assert!(
        matches!(error, SessionError::InvalidEntry { .. }),
        "{error}"
    );
    let error = store
        .append(
            &tenant_named("acme"),
            &session_named("s1"),
            &[entry("", None, user("x"))],
        )
        .unwrap_err();
    assert!(
        matches!(error, SessionError::InvalidEntryId { .. }),
        "{error}"
    );
    assert_eq!(
        store
            .get(&tenant_named("acme"), &session_named("s1"))
            .unwrap()
            .entry_count,
        1
    );
}

#[test]
fn tenants_are_isolated() {
    let store = store();
    new_session(&store, "acme", "shared-id");
    store
        .append_message(
            &tenant_named("acme"),
            &session_named("shared-id"),
            user("acme secret"),
        )
        .unwrap();
    // The same id is a different session for another tenant, and acme's is invisible to it.
    assert!(matches!(
        store.get(&tenant_named("globex"), &session_named("shared-id")),
        Err(SessionError::NotFound { .. })
    ));
    assert!(matches!(
        store.context(&tenant_named("globex"), &session_named("shared-id"), None),
        Err(SessionError::NotFound { .. })
    ));
    assert!(matches!(
        store.append_message(
            &tenant_named("globex"),
            &session_named("shared-id"),
            user("x")
        ),
        Err(SessionError::NotFound { .. })
    ));
    new_session(&store, "globex", "shared-id");
    store
        .append_message(
            &tenant_named("globex"),
            &session_named("shared-id"),
            user("globex data"),
        )
        .unwrap();
    assert_eq!(
        texts(
            &store
                .context(&tenant_named("acme"), &session_named("shared-id"), None)
                .unwrap()
        ),
        ["acme secret"]
    );
    assert_eq!(
        texts(
            &store
                .context(&tenant_named("globex"), &session_named("shared-id"), None)
                .unwrap()
        ),
        ["globex data"]
    );
    assert_eq!(store.list(&tenant_named("acme")).unwrap().len(), 1);
    assert_eq!(store.list(&tenant_named("globex")).unwrap().len(), 1);
    assert!(store.list(&tenant_named("initech")).unwrap().is_empty());
    // An acme entry id is no parent for globex.
    let acme_leaf = store
        .get(&tenant_named("acme"), &session_named("shared-id"))
        .unwrap()
        .leaf_id
        .unwrap();
    let error = store
        .append(
            &tenant_named("globex"),
            &session_named("shared-id"),
            &[entry("c0000001", Some(&acme_leaf), user("x"))],
        )
        .unwrap_err();
    assert!(
        matches!(error, SessionError::UnknownParent { .. }),
        "{error}"
    );
}

#[test]
fn sessions_are_created_once_and_ids_are_checked() {
    let store = store();
    new_session(&store, "acme", "s1");
    let error = store
        .create(
            &tenant_named("acme"),
            NewSession::new(header("s1"), "openclaw-session"),
        )
        .unwrap_err();
    assert!(
        matches!(error, SessionError::AlreadyExists { .. }),
        "{error}"
    );
    let error = store
        .create(
            &tenant_named("acme"),
            NewSession::new(header("../s2"), "openclaw-session"),
        )
        .unwrap_err();
    assert!(
        matches!(error, SessionError::InvalidSessionId { .. }),
        "{error}"
    );
    let error = store
        .get(&tenant_named("acme"), &session_named("nope"))
        .unwrap_err();
    assert!(error.to_string().contains("no session \"nope\""), "{error}");
}

#[test]
fn the_trigger_refuses_updates_and_deletes_of_entries() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("skald.sqlite3");
    let store = SqliteSessionStore::open(&db).unwrap();
    new_session(&store, "acme", "s1");
    let first = store
        .append_message(
            &tenant_named("acme"),
            &session_named("s1"),
            user("original"),
        )
        .unwrap();

    // Whoever writes to the file, not only this crate, cannot rewrite history in place.
    let raw = rusqlite::Connection::open(&db).unwrap();
    let update = raw
        .execute(
            "UPDATE session_entries SET body = '{}' WHERE id = ?1",
            [&first.id],
        )
        .unwrap_err();
    assert!(update.to_string().contains("append-only"), "{update}");
    let delete = raw.execute("DELETE FROM session_entries", []).unwrap_err();
    assert!(delete.to_string().contains("append-only"), "{delete}");
    assert_eq!(
        texts(
            &store
                .context(&tenant_named("acme"), &session_named("s1"), None)
                .unwrap()
        ),
        ["original"]
    );
}

#[test]
fn the_session_store_shares_the_ref_store_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("skald.sqlite3");
    let refs = SqliteRefStore::open(&db, RefSettings::default()).unwrap();
    let id = refs
        .put(
            &tenant_named("acme"),
            &skald_core::refs::RefPayload::new(vec![Block::text("x")]),
        )
        .unwrap();
    let sessions = SqliteSessionStore::open(&db).unwrap();
    new_session(&sessions, "acme", "s1");
    sessions
        .append_message(&tenant_named("acme"), &session_named("s1"), user("hi"))
        .unwrap();
    drop(sessions);
    assert_eq!(
        refs.get(&tenant_named("acme"), id.as_str()).unwrap().text(),
        "x"
    );
    let reopened = SqliteSessionStore::open(&db).unwrap();
    assert_eq!(
        texts(
            &reopened
                .context(&tenant_named("acme"), &session_named("s1"), None)
                .unwrap()
        ),
        ["hi"]
    );
    let raw = rusqlite::Connection::open(&db).unwrap();
    let mode: String = raw
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn a_compaction_checkpoint_replaces_the_history_before_its_first_kept_entry() {
    let store = store();
    new_session(&store, "acme", "s1");
    let ask = store
        .append_message(&tenant_named("acme"), &session_named("s1"), user("old ask"))
        .unwrap();
    store
        .append_message(
            &tenant_named("acme"),
            &session_named("s1"),
            assistant("old answer"),
        )
        .unwrap();
    let kept = store
        .append_message(
            &tenant_named("acme"),
            &session_named("s1"),
            user("recent ask"),
        )
        .unwrap();
    let checkpoint = store
        .append_compaction(
            &tenant_named("acme"),
            &session_named("s1"),
            CompactionCheckpoint {
                summary: "## Decisions\n- none".into(),
                first_kept_entry_id: Some(kept.id.clone()),
                tokens_before: 900,
                tokens_after: 120,
                details: Some(json!({"readFiles": ["a.rs"]})),
            },
        )
        .unwrap();
    store
        .append_message(
            &tenant_named("acme"),
            &session_named("s1"),
            assistant("after"),
        )
        .unwrap();

    let stored = store
        .entries(&tenant_named("acme"), &session_named("s1"))
        .unwrap()
        .into_iter()
        .find(|e| e.id == checkpoint.id)
        .unwrap();
    assert_eq!(tokens_after(&stored), Some(120));
    assert!(matches!(
        &stored.kind,
        EntryKind::Compaction { tokens_before: Some(900), first_kept_entry_id: Some(k), .. } if *k == kept.id
    ));
    let context = store
        .context(&tenant_named("acme"), &session_named("s1"), None)
        .unwrap();
    assert_eq!(context.len(), 3);
    assert!(
        context[0]
            .plain_text()
            .contains("<summary>\n## Decisions\n- none\n</summary>")
    );
    assert_eq!(texts(&context[1..]), ["recent ask", "after"]);

    // The first kept entry must be on the active path.
    store
        .set_leaf(&tenant_named("acme"), &session_named("s1"), Some(&ask.id))
        .unwrap();
    let side = store
        .append_message(
            &tenant_named("acme"),
            &session_named("s1"),
            assistant("side"),
        )
        .unwrap();
    let off_path = CompactionCheckpoint {
        summary: "s".into(),
        first_kept_entry_id: Some(kept.id.clone()),
        tokens_before: 1,
        tokens_after: 1,
        details: None,
    };
    let error = store
        .append_compaction(
            &tenant_named("acme"),
            &session_named("s1"),
            off_path.clone(),
        )
        .unwrap_err();
    assert!(
        matches!(&error, SessionError::NotOnActivePath { id, leaf: Some(leaf), .. }
            if *id == kept.id && *leaf == side.id),
        "{error}"
    );
    let unknown = CompactionCheckpoint {
        first_kept_entry_id: Some("deadbeef".into()),
        ..off_path
    };
    let error = store
        .append_compaction(&tenant_named("acme"), &session_named("s1"), unknown)
        .unwrap_err();
    assert!(
        matches!(error, SessionError::UnknownEntry { .. }),
        "{error}"
    );
}

#[test]
fn set_leaf_selects_a_branch_and_refuses_unknown_entries() {
    let store = store();
    new_session(&store, "acme", "s1");
    let root = store
        .append_message(&tenant_named("acme"), &session_named("s1"), user("root"))
        .unwrap();
    let a = store
        .append_message(&tenant_named("acme"), &session_named("s1"), assistant("a"))
        .unwrap();
    store
        .set_leaf(&tenant_named("acme"), &session_named("s1"), Some(&root.id))
        .unwrap();
    store
        .append_message(&tenant_named("acme"), &session_named("s1"), assistant("b"))
        .unwrap();
    assert_eq!(
        texts(
            &store
                .context(&tenant_named("acme"), &session_named("s1"), None)
                .unwrap()
        ),
        ["root", "b"]
    );
    assert_eq!(
        texts(
            &store
                .context(&tenant_named("acme"), &session_named("s1"), Some(&a.id))
                .unwrap()
        ),
        ["root", "a"]
    );
    let error = store
        .set_leaf(
            &tenant_named("acme"),
            &session_named("s1"),
            Some("00000bad"),
        )
        .unwrap_err();
    assert!(
        matches!(error, SessionError::UnknownEntry { .. }),
        "{error}"
    );
    let error = store
        .context(
            &tenant_named("acme"),
            &session_named("s1"),
            Some("00000bad"),
        )
        .unwrap_err();
    assert!(
        matches!(error, SessionError::UnknownEntry { .. }),
        "{error}"
    );
    store
        .set_leaf(&tenant_named("acme"), &session_named("s1"), None)
        .unwrap();
    let new_root = store
        .append_message(&tenant_named("acme"), &session_named("s1"), user("fresh"))
        .unwrap();
    assert_eq!(new_root.parent_id, None);
}

/// Seed 003 §2.3: persistent truncation finds the first oversized tool result, branches from its
/// parent, re-appends every later entry (the oversized one truncated) and makes the new branch
/// the active one; the session stays append-only.
#[test]
fn seed_003_persistent_truncation_forks_from_the_first_rewritten_entry_and_keeps_the_old_branch() {
    let store = store();
    new_session(&store, "acme", "s1");
    let ask = store
        .append_message(&tenant_named("acme"), &session_named("s1"), user("run it"))
        .unwrap();
    let call = store
        .append_message(
            &tenant_named("acme"),
            &session_named("s1"),
            Message::new(
                Role::Assistant,
                vec![Block::ToolCall(skald_core::message::ToolCall {
                    id: "call_1".into(),
                    name: "bash".into(),
                    arguments: json!({"command": "make"}),
                    arguments_text: None,
                    extra: Extra::new(),
                })],
            ),
        )
        .unwrap();
    let huge = store
        .append_message(
            &tenant_named("acme"),
            &session_named("s1"),
            tool_result("call_1", &"log line\n".repeat(1000)),
        )
        .unwrap();
    let answer = store
        .append_message(
            &tenant_named("acme"),
            &session_named("s1"),
            assistant("built"),
        )
        .unwrap();
    let compaction = store
        .append_compaction(
            &tenant_named("acme"),
            &session_named("s1"),
            CompactionCheckpoint {
                summary: "built once".into(),
                first_kept_entry_id: Some(huge.id.clone()),
                tokens_before: 3000,
                tokens_after: 2500,
                details: None,
            },
        )
        .unwrap();
    let before = store
        .entries(&tenant_named("acme"), &session_named("s1"))
        .unwrap();
    let old_context = store
        .context(&tenant_named("acme"), &session_named("s1"), None)
        .unwrap();

    let rewrites = BTreeMap::from([(
        huge.id.clone(),
        EntryKind::Message(tool_result("call_1", "log line\n[truncated]")),
    )]);
    let rewrite = store
        .rewrite_branch(
            &tenant_named("acme"),
            &session_named("s1"),
            rewrites,
            "context overflow",
        )
        .unwrap();

    // The fork hangs where the first rewritten entry hung.
    assert_eq!(rewrite.fork_parent_id.as_deref(), Some(call.id.as_str()));
    let originals: Vec<&str> = rewrite.copies.iter().map(|(o, _)| o.as_str()).collect();
    assert_eq!(
        originals,
        [huge.id.as_str(), answer.id.as_str(), compaction.id.as_str()]
    );

    // Every old entry is still there, unchanged, in its place.
    let after = store
        .entries(&tenant_named("acme"), &session_named("s1"))
        .unwrap();
    assert_eq!(&after[..before.len()], &before[..]);
    assert_eq!(after.len(), before.len() + 1 + 3);
    assert_eq!(
        store
            .context(
                &tenant_named("acme"),
                &session_named("s1"),
                Some(&compaction.id)
            )
            .unwrap(),
        old_context
    );

    // The marker says what happened and why; it is not in the model's context.
    let marker = after.iter().find(|e| e.id == rewrite.marker_id).unwrap();
    let EntryKind::Custom { custom_type, data } = &marker.kind else {
        panic!("marker is {:?}", marker.kind);
    };
    assert_eq!(custom_type, BRANCH_REWRITE_CUSTOM_TYPE);
    assert_eq!(
        data.as_ref().unwrap(),
        &json!({"reason": "context overflow", "rewrittenEntryIds": [huge.id]})
    );
    assert_eq!(marker.parent_id.as_deref(), Some(call.id.as_str()));

    // The new branch is the active one; its compaction keeps from the copy, not the original.
    let info = store
        .get(&tenant_named("acme"), &session_named("s1"))
        .unwrap();
    assert_eq!(info.leaf_id.as_deref(), Some(rewrite.leaf_id.as_str()));
    let copy_of = |id: &str| {
        rewrite
            .copies
            .iter()
            .find(|(o, _)| o == id)
            .map(|(_, c)| c.clone())
            .unwrap()
    };
    let new_compaction = after
        .iter()
        .find(|e| e.id == copy_of(&compaction.id))
        .unwrap();
    assert!(matches!(
        &new_compaction.kind,
        EntryKind::Compaction { first_kept_entry_id: Some(k), .. } if *k == copy_of(&huge.id)
    ));
    assert_eq!(tokens_after(new_compaction), Some(2500));
    let context = store
        .context(&tenant_named("acme"), &session_named("s1"), None)
        .unwrap();
    assert_eq!(context.len(), old_context.len());
    assert!(context[0].plain_text().contains("built once"));
    assert_eq!(
        context[1].tool_results().next().unwrap().content,
        vec![Block::text("log line\n[truncated]")]
    );
    assert_eq!(context[2].plain_text(), "built");
    let path = store
        .path(&tenant_named("acme"), &session_named("s1"), None)
        .unwrap();
    assert_eq!(path.first().unwrap().id, ask.id);
}

#[test]
fn rewrite_branch_refuses_entries_off_the_active_path() {
    let store = store();
    new_session(&store, "acme", "s1");
    let root = store
        .append_message(&tenant_named("acme"), &session_named("s1"), user("root"))
        .unwrap();
    let old = store
        .append_message(
            &tenant_named("acme"),
            &session_named("s1"),
            assistant("old"),
        )
        .unwrap();
    store
        .set_leaf(&tenant_named("acme"), &session_named("s1"), Some(&root.id))
        .unwrap();
    store
        .append_message(
            &tenant_named("acme"),
            &session_named("s1"),
            assistant("new"),
        )
        .unwrap();
    let before = store
        .load(&tenant_named("acme"), &session_named("s1"))
        .unwrap();
    let replace =
        |id: &str| BTreeMap::from([(id.to_owned(), EntryKind::Message(assistant("replacement")))]);
    let error = store
        .rewrite_branch(
            &tenant_named("acme"),
            &session_named("s1"),
            replace(&old.id),
            "r",
        )
        .unwrap_err();
    assert!(
        matches!(error, SessionError::NotOnActivePath { .. }),
        "{error}"
    );
    let error = store
        .rewrite_branch(
            &tenant_named("acme"),
            &session_named("s1"),
            replace("deadbeef"),
            "r",
        )
        .unwrap_err();
    assert!(
        matches!(error, SessionError::UnknownEntry { .. }),
        "{error}"
    );
    let error = store
        .rewrite_branch(
            &tenant_named("acme"),
            &session_named("s1"),
            BTreeMap::new(),
            "r",
        )
        .unwrap_err();
    assert!(matches!(error, SessionError::NothingToRewrite), "{error}");
    assert_eq!(
        store
            .load(&tenant_named("acme"), &session_named("s1"))
            .unwrap(),
        before
    );

    // Rewriting the root forks a new root.
    let rewrite = store
        .rewrite_branch(
            &tenant_named("acme"),
            &session_named("s1"),
            replace(&root.id),
            "r",
        )
        .unwrap();
    assert_eq!(rewrite.fork_parent_id, None);
    assert_eq!(
        texts(
            &store
                .context(&tenant_named("acme"), &session_named("s1"), None)
                .unwrap()
        ),
        ["replacement", "new"]
    );
}

#[test]
fn an_imported_openclaw_session_rebuilds_the_context_openclaw_builds() {
    let store = store();
    let outcome =
        import_transcript(&store, &tenant_named("acme"), FIXTURE, &import_options()).unwrap();
    assert_eq!(outcome.session_id, FIXTURE_ID);
    assert_eq!(outcome.status, ImportStatus::Created);
    assert_eq!(outcome.entries_added, 18);
    assert!(outcome.issues.is_empty(), "{:?}", outcome.issues);

    let read = decode_session(FIXTURE).unwrap();
    // Entries, ids, tree and leaf are kept exactly.
    assert_eq!(
        store
            .entries(&tenant_named("acme"), &session_named(FIXTURE_ID))
            .unwrap(),
        read.session.entries()
    );
    let loaded = store
        .load(&tenant_named("acme"), &session_named(FIXTURE_ID))
        .unwrap();
    assert_eq!(loaded.header, read.session.header);
    assert_eq!(loaded.leaf_id(), read.session.leaf_id());
    assert_eq!(loaded.leaf_id(), Some("b1000012"));

    // The context has the compaction summary, the kept entries, the branch summary and the
    // custom message, and not the abandoned branch.
    let expected = read.session.build_context(None);
    let context = store
        .context(&tenant_named("acme"), &session_named(FIXTURE_ID), None)
        .unwrap();
    assert_eq!(context, expected);
    let ids: Vec<&str> = context
        .iter()
        .map(|m| m.meta.id.as_deref().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "b1000007", "b1000005", "b1000006", "b100000b", "b100000c", "b100000d", "b100000e",
            "b100000f", "b1000012"
        ]
    );
    // And from the abandoned branch's leaf, what OpenClaw would build there.
    assert_eq!(
        store
            .context(
                &tenant_named("acme"),
                &session_named(FIXTURE_ID),
                Some("b100000a")
            )
            .unwrap(),
        read.session.build_context(Some("b100000a"))
    );

    let info = store
        .get(&tenant_named("acme"), &session_named(FIXTURE_ID))
        .unwrap();
    assert_eq!(info.source_format, "openclaw-session");
    assert_eq!(info.source.as_deref(), Some("fixture.jsonl"));
    assert_eq!(
        info.title.as_deref(),
        Some("Deploy the api service to staging. Never touch prod.")
    );
    assert_eq!((info.entry_count, info.message_count), (18, 12));
}

#[test]
fn importing_the_same_session_again_does_not_duplicate() {
    let store = store();
    import_transcript(&store, &tenant_named("acme"), FIXTURE, &import_options()).unwrap();
    let before = store
        .load(&tenant_named("acme"), &session_named(FIXTURE_ID))
        .unwrap();
    let again =
        import_transcript(&store, &tenant_named("acme"), FIXTURE, &import_options()).unwrap();
    assert_eq!(again.status, ImportStatus::AlreadyImported);
    assert_eq!(again.entries_added, 0);
    assert_eq!(
        store
            .load(&tenant_named("acme"), &session_named(FIXTURE_ID))
            .unwrap(),
        before
    );
    // Another tenant gets its own copy.
    let other =
        import_transcript(&store, &tenant_named("globex"), FIXTURE, &import_options()).unwrap();
    assert_eq!(other.status, ImportStatus::Created);
}

#[test]
fn a_grown_session_file_appends_only_its_new_entries() {
    let store = store();
    let lines: Vec<&str> = FIXTURE.lines().collect();
    let shorter = format!("{}\n", lines[..10].join("\n"));
    let first =
        import_transcript(&store, &tenant_named("acme"), &shorter, &import_options()).unwrap();
    assert_eq!(first.entries_added, 9);
    assert_eq!(
        store
            .get(&tenant_named("acme"), &session_named(FIXTURE_ID))
            .unwrap()
            .leaf_id
            .as_deref(),
        Some("b1000009")
    );
    let grown =
        import_transcript(&store, &tenant_named("acme"), FIXTURE, &import_options()).unwrap();
    assert_eq!(grown.status, ImportStatus::Appended);
    assert_eq!(grown.entries_added, 9);
    assert_eq!(
        store
            .context(&tenant_named("acme"), &session_named(FIXTURE_ID), None)
            .unwrap(),
        decode_session(FIXTURE).unwrap().session.build_context(None)
    );
}

#[test]
fn an_edited_session_file_is_a_conflict_and_changes_nothing() {
    let store = store();
    import_transcript(&store, &tenant_named("acme"), FIXTURE, &import_options()).unwrap();
    let before = store
        .load(&tenant_named("acme"), &session_named(FIXTURE_ID))
        .unwrap();
    let edited = FIXTURE.replace("Pods are healthy.", "Pods are broken.")
        + r#"{"type":"message","id":"b1000013","parentId":"b1000012","timestamp":"2026-02-03T09:00:19.000Z","message":{"role":"user","content":"more","timestamp":1770109219000}}"#
        + "\n";
    let error =
        import_transcript(&store, &tenant_named("acme"), &edited, &import_options()).unwrap_err();
    assert!(
        matches!(&error, ImportError::Conflict { what, .. } if what == "entry \"b1000005\""),
        "{error}"
    );
    assert_eq!(
        store
            .load(&tenant_named("acme"), &session_named(FIXTURE_ID))
            .unwrap(),
        before
    );
    // Under another id it is a new session.
    let options = ImportOptions {
        session_id: Some(session_named("edited-copy")),
        ..import_options()
    };
    let outcome = import_transcript(&store, &tenant_named("acme"), &edited, &options).unwrap();
    assert_eq!(outcome.status, ImportStatus::Created);
    assert_eq!(
        store
            .load(&tenant_named("acme"), &session_named("edited-copy"))
            .unwrap()
            .header
            .id,
        "edited-copy"
    );
}

#[test]
fn other_formats_become_a_chain_of_messages_and_grow_in_place() {
    let request = |messages: &str| {
        format!(
            r#"{{"model":"gpt-4o","messages":[{{"role":"system","content":"Be terse."}},{{"role":"user","content":"List the files."}}{messages}]}}"#
        )
    };
    let short = request("");
    let grown = request(
        r#",{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"a.txt\nb.txt"}"#,
    );
    let store = store();
    let first =
        import_transcript(&store, &tenant_named("acme"), &short, &import_options()).unwrap();
    assert!(
        first.session_id.starts_with("conv-"),
        "{}",
        first.session_id
    );
    assert_eq!(first.entries_added, 2);
    let second =
        import_transcript(&store, &tenant_named("acme"), &grown, &import_options()).unwrap();
    assert_eq!(second.session_id, first.session_id);
    assert_eq!(second.status, ImportStatus::Appended);
    assert_eq!(second.entries_added, 2);
    let path = store
        .path(&tenant_named("acme"), &first.session_id, None)
        .unwrap();
    let ids: Vec<&str> = path.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["00000001", "00000002", "00000003", "00000004"]);
    let context = store
        .context(&tenant_named("acme"), &first.session_id, None)
        .unwrap();
    let roles: Vec<&str> = context.iter().map(|m| m.role.name()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool_result"]);
    let info = store.get(&tenant_named("acme"), &first.session_id).unwrap();
    assert_eq!(info.source_format, "openai-request");
    assert_eq!(info.title.as_deref(), Some("List the files."));
    let again =
        import_transcript(&store, &tenant_named("acme"), &grown, &import_options()).unwrap();
    assert_eq!(again.status, ImportStatus::AlreadyImported);
}

#[test]
fn a_file_with_a_reused_entry_id_is_refused() {
    let store = store();
    let doubled = format!("{FIXTURE}{}\n", FIXTURE.lines().nth(2).unwrap());
    let error =
        import_transcript(&store, &tenant_named("acme"), &doubled, &import_options()).unwrap_err();
    assert!(matches!(error, ImportError::InvalidTree { .. }), "{error}");
    assert!(error.to_string().contains("used twice"), "{error}");
    assert!(store.list(&tenant_named("acme")).unwrap().is_empty());
}

#[test]
fn a_ref_store_database_of_schema_1_gains_the_session_tables_and_keeps_its_refs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("skald.sqlite3");
    {
        // The database as the first release wrote it: only the ref store, user_version 1.
        let raw = rusqlite::Connection::open(&db).unwrap();
        raw.execute_batch(
            "CREATE TABLE refs (
                tenant TEXT NOT NULL, id TEXT NOT NULL,
                codec TEXT NOT NULL CHECK (codec IN ('raw', 'zstd')), content BLOB NOT NULL,
                original_bytes INTEGER NOT NULL, stored_bytes INTEGER NOT NULL,
                created_at_ms INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL,
                PRIMARY KEY (tenant, id));
             CREATE INDEX refs_by_expiry ON refs (expires_at_ms);
             INSERT INTO refs VALUES ('acme', 'x', 'raw', x'00', 1, 1, 0, 0);
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let store = SqliteSessionStore::open(&db).unwrap();
    new_session(&store, "acme", "s1");
    let raw = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = raw
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, skald_store::SCHEMA_VERSION);
    let refs: i64 = raw
        .query_row("SELECT COUNT(*) FROM refs", [], |row| row.get(0))
        .unwrap();
    assert_eq!(refs, 1);
}

#[test]
fn entries_whose_body_did_not_decode_are_kept_as_written_and_stay_out_of_the_context() {
    let text = concat!(
        r#"{"type":"session","version":3,"id":"odd-bodies","timestamp":"2026-02-03T09:00:00.000Z"}"#,
        "\n",
        r#"{"type":"message","id":"d0000001","parentId":null,"timestamp":"2026-02-03T09:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
        "\n",
        r#"{"type":"message","id":"d0000002","parentId":"d0000001","timestamp":"2026-02-03T09:00:02.000Z","message":{"content":"no role"}}"#,
        "\n",
        r#"{"type":"openclaw.future","id":"d0000003","parentId":"d0000002","timestamp":"2026-02-03T09:00:03.000Z","payload":{"x":1}}"#,
        "\n",
    );
    let store = store();
    let outcome =
        import_transcript(&store, &tenant_named("acme"), text, &import_options()).unwrap();
    assert_eq!(outcome.issues.len(), 1, "{:?}", outcome.issues);
    let read = decode_session(text).unwrap();
    assert!(matches!(
        read.session.entries()[1].kind,
        EntryKind::Other(_)
    ));
    assert_eq!(
        store
            .entries(&tenant_named("acme"), &session_named("odd-bodies"))
            .unwrap(),
        read.session.entries()
    );
    assert_eq!(
        texts(
            &store
                .context(&tenant_named("acme"), &session_named("odd-bodies"), None)
                .unwrap()
        ),
        ["hi"]
    );
    let again = import_transcript(&store, &tenant_named("acme"), text, &import_options()).unwrap();
    assert_eq!(again.status, ImportStatus::AlreadyImported);
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

/// A session id of the tests, parsed (it is well formed).
fn session_named(id: &str) -> skald_core::ids::SessionId {
    skald_core::ids::SessionId::parse(id).unwrap()
}

#[test]
fn claude_code_import_stores_compactions_as_checkpoints() {
    let line = |value: serde_json::Value| value.to_string();
    let envelope = |uuid: &str, parent: Option<&str>| {
        json!({"uuid": uuid, "parentUuid": parent, "sessionId": "cc-compact", "cwd": "/w",
               "timestamp": "2026-02-11T21:00:00.000Z", "isSidechain": false})
    };
    let with = |mut base: serde_json::Value, more: serde_json::Value| {
        for (key, value) in more.as_object().unwrap() {
            base[key] = value.clone();
        }
        base
    };
    let mut transcript = vec![
        line(with(
            envelope("u1", None),
            json!({"type": "user", "message": {"role": "user", "content": "Port the CLI."}}),
        )),
        line(with(
            envelope("a1", Some("u1")),
            json!({"type": "assistant", "message": {"id": "m1", "role": "assistant",
                   "model": "claude", "content": [{"type": "text", "text": "Ported."}]}}),
        )),
    ];
    let boundary = line(with(
        envelope("b1", None),
        json!({"type": "system", "subtype": "compact_boundary",
               "content": "Conversation compacted", "isMeta": false,
               "compactMetadata": {"trigger": "auto", "preTokens": 167094}}),
    ));
    let summary = line(with(
        envelope("s1", Some("b1")),
        json!({"type": "user", "isCompactSummary": true, "message": {"role": "user",
               "content": "This session is being continued. Summary: the CLI was ported."}}),
    ));
    let after = line(with(
        envelope("u2", Some("s1")),
        json!({"type": "user", "message": {"role": "user", "content": "Now the tests."}}),
    ));
    transcript.push(boundary);
    let store = store();
    let tenant = tenant_named("acme");
    // A boundary whose summary is not written yet waits for the next import.
    let first =
        import_transcript(&store, &tenant, &transcript.join("\n"), &import_options()).unwrap();
    assert_eq!(first.entries_added, 2);
    transcript.push(summary);
    transcript.push(after);
    let second =
        import_transcript(&store, &tenant, &transcript.join("\n"), &import_options()).unwrap();
    assert_eq!(second.status, ImportStatus::Appended);
    assert_eq!(second.entries_added, 2);
    let entries = store.entries(&tenant, &second.session_id).unwrap();
    let EntryKind::Compaction {
        summary,
        first_kept_entry_id,
        tokens_before,
        details,
        ..
    } = &entries[2].kind
    else {
        panic!("{:?}", entries[2].kind);
    };
    assert_eq!(
        summary,
        "This session is being continued. Summary: the CLI was ported."
    );
    assert_eq!(first_kept_entry_id, &None);
    assert_eq!(tokens_before, &Some(167_094));
    assert_eq!(details.as_ref().unwrap()["claude_code"]["trigger"], "auto");
    // The summary line is the checkpoint's, not a message of its own; the chain continues.
    assert_eq!(entries.len(), 4);
    assert_eq!(
        entries[3].parent_id.as_deref(),
        Some(entries[2].id.as_str())
    );
    // The context restarts at the compaction, as replay reads the transcript.
    let context = store.context(&tenant, &second.session_id, None).unwrap();
    let texts = texts(&context);
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[0].contains("the CLI was ported"));
    assert_eq!(texts[1], "Now the tests.");
    // Importing it again changes nothing.
    let again =
        import_transcript(&store, &tenant, &transcript.join("\n"), &import_options()).unwrap();
    assert_eq!(again.status, ImportStatus::AlreadyImported);
}
