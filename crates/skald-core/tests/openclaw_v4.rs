//! OpenClaw 2026.9 session files (version 4): the header, `reset` boundaries, `leaf` navigation
//! records and opaque records. The expected paths and contexts were checked against OpenClaw
//! 2026.9.6's own `buildSessionContext` / `selectSessionTranscriptLeafControlledPath` run over
//! the same lines.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use skald_core::codec::openclaw::{decode_session, encode_entry, encode_session};
use skald_core::message::{Message, Role};
use skald_core::session::{EntryKind, LeafControl, Session};

const V4: &str = include_str!("fixtures/openclaw/session_v4.jsonl");

fn lines_as_values(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Each context message as `role: text` (tool calls as `call:<id>`), to compare briefly.
fn brief(context: &[Message]) -> Vec<String> {
    context
        .iter()
        .map(|message| {
            let calls: Vec<String> = message
                .tool_calls()
                .map(|call| format!("call:{}", call.id))
                .collect();
            let results: Vec<String> = message
                .tool_results()
                .map(|result| format!("result:{}", result.call_id))
                .collect();
            let text = [vec![message.plain_text()], calls, results]
                .concat()
                .into_iter()
                .filter(|part| !part.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            format!("{}: {text}", message.role.name())
        })
        .collect()
}

fn ids(path: &[&skald_core::session::Entry]) -> Vec<String> {
    path.iter().map(|entry| entry.id.clone()).collect()
}

fn line(kind: &str, id: &str, parent: Option<&str>, body: Value) -> String {
    let mut object =
        json!({"type": kind, "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:00Z"});
    if let (Value::Object(fields), Value::Object(extra)) = (&mut object, body) {
        fields.extend(extra);
    }
    object.to_string()
}

fn user(id: &str, parent: Option<&str>, text: &str) -> String {
    line(
        "message",
        id,
        parent,
        json!({"message": {"role": "user", "content": text, "timestamp": 1}}),
    )
}

fn assistant(id: &str, parent: Option<&str>, text: &str) -> String {
    line(
        "message",
        id,
        parent,
        json!({"message": {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": 2}}),
    )
}

fn leaf(id: &str, parent: Option<&str>, target: Option<&str>) -> String {
    line("leaf", id, parent, json!({ "targetId": target }))
}

fn file(lines: &[String]) -> String {
    let mut text = r#"{"type":"session","version":4,"id":"s-v4"}"#.to_owned();
    for each in lines {
        text.push('\n');
        text.push_str(each);
    }
    text.push('\n');
    text
}

#[test]
fn v4_session_reads_and_round_trips() {
    let read = decode_session(V4).unwrap();
    assert_eq!(read.issues, vec![], "the fixture is clean");
    assert_eq!(read.migrated_from, None);
    assert_eq!(read.session.header.version, 4);
    assert_eq!(read.session.entries().len(), 14);
    let resets: Vec<&EntryKind> = read
        .session
        .entries()
        .iter()
        .map(|entry| &entry.kind)
        .filter(|kind| matches!(kind, EntryKind::Reset { .. }))
        .collect();
    assert_eq!(
        resets,
        [&EntryKind::Reset {
            reason: Some("reset".to_owned()),
            first_kept_entry_id: Some("1a000000-0000-4000-8000-000000000001".to_owned()),
        }]
    );
    // Line by line, the same JSON values.
    let encoded = encode_session(&read.session);
    assert_eq!(lines_as_values(&encoded), lines_as_values(V4));
    // And reading what was written gives the same session.
    assert_eq!(decode_session(&encoded).unwrap().session, read.session);
    let rebuilt =
        Session::from_entries(read.session.header.clone(), read.session.entries().to_vec());
    assert_eq!(rebuilt, read.session);
}

#[test]
fn v4_reset_starts_a_new_active_path() {
    let read = decode_session(V4).unwrap();
    let session = &read.session;
    // The last `leaf` record points before the reset: OpenClaw ignores it, so the conversation
    // stays on the branch after the reset.
    assert_eq!(
        session.leaf_id(),
        Some("2b000000-0000-4000-8000-000000000005")
    );
    assert_eq!(
        brief(&session.build_context(None)),
        [
            // Carried over by the reset's firstKeptEntryId: user and assistant messages and the
            // result of a carried call; the custom message before the reset is not.
            "user: list the files",
            "assistant: call:call_ls",
            "tool_result: result:call_ls",
            "assistant: a.txt and b.txt",
            "user: now count them",
            "assistant: counting again: 2",
        ]
    );

    // A reset without firstKeptEntryId carries nothing over.
    let plain = file(&[
        user("u1", None, "old question"),
        assistant("a1", Some("u1"), "old answer"),
        line("reset", "r1", Some("a1"), json!({"reason": "new"})),
        user("u2", Some("r1"), "new question"),
    ]);
    let session = decode_session(&plain).unwrap().session;
    assert_eq!(brief(&session.build_context(None)), ["user: new question"]);
    // The entries before it are still in the session (nothing is lost) and on its path.
    assert_eq!(ids(&session.path_to(None)), ["u1", "a1", "r1", "u2"]);

    // A compaction after a reset is the boundary that counts.
    let compacted = file(&[
        user("u1", None, "old question"),
        line(
            "reset",
            "r1",
            Some("u1"),
            json!({"reason": "idle", "firstKeptEntryId": "u1"}),
        ),
        user("u2", Some("r1"), "second"),
        line(
            "compaction",
            "c1",
            Some("u2"),
            json!({"summary": "asked twice", "firstKeptEntryId": "u2", "tokensBefore": 9}),
        ),
        user("u3", Some("c1"), "third"),
    ]);
    let context = decode_session(&compacted)
        .unwrap()
        .session
        .build_context(None);
    assert_eq!(context.len(), 3);
    assert!(context[0].plain_text().contains("asked twice"));
    assert_eq!(brief(&context[1..]), ["user: second", "user: third"]);
}

#[test]
fn v4_leaf_entry_moves_the_active_path() {
    // A `leaf` record back to a1, then an append under the record: the branch u2/a2 is left.
    let moved = file(&[
        user("u1", None, "first question"),
        assistant("a1", Some("u1"), "first answer"),
        user("u2", Some("a1"), "abandoned question"),
        assistant("a2", Some("u2"), "abandoned answer"),
        leaf("l1", Some("a2"), Some("a1")),
        user("u3", Some("l1"), "second question"),
    ]);
    let read = decode_session(&moved).unwrap();
    assert_eq!(read.issues, vec![]);
    let mut session = read.session;
    assert!(session.is_leaf_controlled());
    assert_eq!(session.leaf_id(), Some("u3"));
    assert_eq!(ids(&session.path_to(None)), ["u1", "a1", "u3"]);
    let u3 = session.entry("u3").unwrap().clone();
    assert_eq!(
        u3.parent_id.as_deref(),
        Some("l1"),
        "the file's parent is kept"
    );
    assert_eq!(
        session.parent_of(&u3),
        Some("a1"),
        "the path's parent is the target"
    );
    assert_eq!(
        brief(&session.build_context(None)),
        [
            "user: first question",
            "assistant: first answer",
            "user: second question"
        ]
    );
    // skald's own append continues the active path.
    let id = session.fresh_id(7);
    session
        .append_message(
            &id,
            "2026-01-01T00:00:09Z",
            Message::text(Role::Assistant, "ok"),
        )
        .unwrap();
    assert_eq!(ids(&session.path_to(None)), ["u1", "a1", "u3", id.as_str()]);

    // Just after the record (nothing appended yet), the leaf is its target.
    let only_moved = file(&[
        user("u1", None, "q"),
        assistant("a1", Some("u1"), "a"),
        user("u2", Some("a1"), "dropped"),
        leaf("l1", Some("u2"), Some("a1")),
    ]);
    let session = decode_session(&only_moved).unwrap().session;
    assert_eq!(session.leaf_id(), Some("a1"));
    assert_eq!(
        brief(&session.build_context(None)),
        ["user: q", "assistant: a"]
    );

    // A null target empties the conversation; a record naming an unknown entry moves nothing.
    let emptied = file(&[
        user("u1", None, "first question"),
        assistant("a1", Some("u1"), "first answer"),
        leaf("l1", Some("a1"), None),
        user("u2", Some("l1"), "fresh start"),
        leaf("l2", Some("u2"), Some("nowhere")),
    ]);
    let session = decode_session(&emptied).unwrap().session;
    assert_eq!(session.leaf_id(), Some("u2"));
    assert_eq!(brief(&session.build_context(None)), ["user: fresh start"]);

    // The record's fields, read the way OpenClaw reads them.
    let control = session.entry("l1").unwrap().kind.leaf_control();
    assert_eq!(
        control,
        Some(LeafControl {
            target_id: None,
            append_parent_id: None,
            side: false
        })
    );
}

#[test]
fn v4_unknown_entry_kept_verbatim() {
    let read = decode_session(V4).unwrap();
    let fence = read
        .session
        .entry("3c000000-0000-4000-8000-000000000001")
        .unwrap();
    let EntryKind::Other(body) = &fence.kind else {
        panic!("an unknown type stays opaque: {:?}", fence.kind);
    };
    assert_eq!(body.get("type"), Some(&json!("openclaw.turn-fence")));
    let original = lines_as_values(V4)
        .into_iter()
        .find(|value| value["id"] == "3c000000-0000-4000-8000-000000000001")
        .unwrap();
    assert_eq!(encode_entry(fence), original);
    // `leaf` records and malformed ones are kept whole too.
    let odd = file(&[
        user("u1", None, "q"),
        line(
            "leaf",
            "l1",
            Some("u1"),
            json!({"targetId": 42, "why": ["kept"]}),
        ),
    ]);
    let read = decode_session(&odd).unwrap();
    assert_eq!(read.issues, vec![]);
    let l1 = read.session.entry("l1").unwrap();
    assert_eq!(l1.kind.leaf_control(), None, "OpenClaw ignores this shape");
    assert_eq!(
        encode_entry(l1),
        serde_json::from_str::<Value>(odd.lines().nth(2).unwrap()).unwrap()
    );
    assert!(!read.session.is_leaf_controlled());
}
