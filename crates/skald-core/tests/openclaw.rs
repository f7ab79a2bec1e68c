//! Tests of the pi / OpenClaw session codec: round trips, the model context rebuilt from a leaf,
//! migrations, bad-line reporting, appends, `AgentMessage` conversion, and no-panic properties.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Value, json};
use skald_core::codec::openclaw::{
    OpenClawError, decode_agent_message, decode_agent_message_at, decode_session,
    encode_agent_message, encode_agent_messages, encode_session,
};
use skald_core::message::{
    Block, ContentForm, ImageSource, Message, Role, StopReason, Timestamp, ToolResult, Usage,
};
use skald_core::session::{
    self, BRANCH_SUMMARY_PREFIX, COMPACTION_SUMMARY_PREFIX, EntryKind, Session, SessionEditError,
    SessionHeader,
};

const V3: &str = include_str!("fixtures/openclaw/session_v3.jsonl");
const V1: &str = include_str!("fixtures/openclaw/session_v1.jsonl");
const V2: &str = include_str!("fixtures/openclaw/session_v2.jsonl");
const BAD: &str = include_str!("fixtures/openclaw/bad_lines.jsonl");

fn lines_as_values(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Messages as readable text for snapshots.
fn render(messages: &[Message]) -> String {
    let mut out = String::new();
    for (index, message) in messages.iter().enumerate() {
        let mut head = format!("#{index} {}", message.role.name());
        if let Some(id) = &message.meta.id {
            head.push_str(&format!(" [entry {id}]"));
        }
        if let Some(reason) = &message.meta.stop_reason {
            head.push_str(&format!(" stop={reason:?}"));
        }
        if let Some(model) = &message.meta.model {
            head.push_str(&format!(" model={model}"));
        }
        out.push_str(&head);
        out.push('\n');
        render_blocks(&message.content, "  ", &mut out);
    }
    out
}

fn render_blocks(blocks: &[Block], indent: &str, out: &mut String) {
    for block in blocks {
        match block {
            Block::Text(text) => {
                for line in text.text.lines() {
                    let gap = if line.is_empty() { "" } else { " " };
                    out.push_str(&format!("{indent}|{gap}{line}\n"));
                }
            }
            Block::Thinking(thinking) => out.push_str(&format!(
                "{indent}(thinking{}) {}\n",
                if thinking.signature.is_some() {
                    ", signed"
                } else {
                    ""
                },
                thinking.thinking
            )),
            Block::Image(image) => match &image.source {
                ImageSource::Base64 { media_type, data } => out.push_str(&format!(
                    "{indent}[image {media_type}, {} base64 chars]\n",
                    data.len()
                )),
                ImageSource::Url { url } => out.push_str(&format!("{indent}[image {url}]\n")),
            },
            Block::ToolCall(call) => out.push_str(&format!(
                "{indent}-> {}#{} {}\n",
                call.name, call.id, call.arguments
            )),
            Block::ToolResult(result) => {
                out.push_str(&format!(
                    "{indent}<- #{} {} error={:?}\n",
                    result.call_id,
                    result.tool_name.as_deref().unwrap_or("?"),
                    result.is_error
                ));
                render_blocks(&result.content, &format!("{indent}   "), out);
            }
            Block::Opaque(value) => out.push_str(&format!(
                "{indent}[opaque {}]\n",
                value["type"].as_str().unwrap_or("?")
            )),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Round trip and coverage
// ---------------------------------------------------------------------------------------------

#[test]
fn v3_fixture_round_trips_line_by_line() {
    let read = decode_session(V3).unwrap();
    assert_eq!(read.issues, vec![], "the fixture is clean");
    // Version 3 becomes 4 by its number alone: OpenClaw 2026.9 migrates nothing else.
    assert_eq!(read.migrated_from, Some(3));
    let encoded = encode_session(&read.session);
    assert!(encoded.ends_with('\n'));
    let mut original = lines_as_values(V3);
    if let Some(Value::Object(header)) = original.first_mut() {
        header.insert("version".to_owned(), Value::from(4));
    }
    let written = lines_as_values(&encoded);
    assert_eq!(original.len(), written.len());
    for (line, (want, got)) in original.iter().zip(&written).enumerate() {
        assert_eq!(want, got, "line {} differs", line + 1);
    }
    // Decoding what we wrote gives the same session, and so does rebuilding it from its entries.
    assert_eq!(decode_session(&encoded).unwrap().session, read.session);
    let rebuilt =
        Session::from_entries(read.session.header.clone(), read.session.entries().to_vec());
    assert_eq!(rebuilt, read.session);
    // A byte-order mark and CRLF line ends change nothing.
    let windows = format!("\u{feff}{}", V3.replace('\n', "\r\n"));
    assert_eq!(decode_session(&windows).unwrap(), read);
}

#[test]
fn v3_fixture_covers_every_entry_and_block_type() {
    let read = decode_session(V3).unwrap();
    let mut kinds = Vec::new();
    let mut blocks = Vec::new();
    let mut roles = Vec::new();
    for entry in read.session.entries() {
        let kind = match &entry.kind {
            EntryKind::Message(message) => {
                roles.push(message.role.name().to_owned());
                for block in &message.content {
                    collect_block_kind(block, &mut blocks);
                }
                "message"
            }
            EntryKind::Compaction { .. } => "compaction",
            EntryKind::Reset { .. } => "reset",
            EntryKind::BranchSummary { .. } => "branch_summary",
            EntryKind::Custom { .. } => "custom",
            EntryKind::CustomMessage { .. } => "custom_message",
            EntryKind::ThinkingLevelChange { .. } => "thinking_level_change",
            EntryKind::ModelChange { .. } => "model_change",
            EntryKind::Label { .. } => "label",
            EntryKind::SessionInfo { .. } => "session_info",
            EntryKind::Other(_) => "other",
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            "branch_summary",
            "compaction",
            "custom",
            "custom_message",
            "label",
            "message",
            "model_change",
            "other",
            "session_info",
            "thinking_level_change"
        ]
    );
    blocks.sort_unstable();
    blocks.dedup();
    assert_eq!(
        blocks,
        [
            "image",
            "opaque",
            "text",
            "thinking",
            "tool_call",
            "tool_result"
        ]
    );
    for role in [
        "user",
        "assistant",
        "tool_result",
        "bashExecution",
        "custom",
    ] {
        assert!(roles.iter().any(|seen| seen == role), "no {role} message");
    }
    // Model and thinking changes, two custom states, two labels, session info, one unknown type.
    assert_eq!(read.ignored_lines, 8);
}

fn collect_block_kind(block: &Block, out: &mut Vec<&'static str>) {
    let kind = match block {
        Block::Text(_) => "text",
        Block::Image(_) => "image",
        Block::Thinking(_) => "thinking",
        Block::ToolCall(_) => "tool_call",
        Block::ToolResult(result) => {
            for inner in &result.content {
                collect_block_kind(inner, out);
            }
            "tool_result"
        }
        Block::Opaque(_) => "opaque",
    };
    out.push(kind);
}

#[test]
fn decoded_fields_land_in_typed_homes() {
    let session = decode_session(V3).unwrap().session;
    assert_eq!(
        session.header.parent_session.as_deref(),
        Some("/home/dev/.openclaw/agents/main/sessions/older.jsonl")
    );
    let EntryKind::Message(assistant) = &session.entry("a0000005").unwrap().kind else {
        panic!("a0000005 is a message");
    };
    assert_eq!(assistant.meta.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(
        assistant.meta.usage,
        Some(Usage {
            input: 12310,
            output: 191,
            cache_read: 1536,
            cache_write: 0,
            cache_write_1h: 0,
        })
    );
    assert_eq!(assistant.meta.provider.as_deref(), Some("anthropic"));
    assert_eq!(
        assistant.meta.timestamp,
        Some(Timestamp::Millis(1_772_972_162_000))
    );
    assert_eq!(assistant.extra["api"], "anthropic-messages");
    assert_eq!(assistant.extra["usage"]["totalTokens"], 14037);
    let call = assistant.tool_calls().next().unwrap();
    assert_eq!(call.id, "call_sE22|fc_0b65");
    assert_eq!(call.arguments["file_path"], "/home/dev/clawd/SOUL.md");
    assert!(call.extra.contains_key("partialJson"));
    assert!(call.extra.contains_key("thoughtSignature"));

    let EntryKind::Message(result) = &session.entry("b0000004").unwrap().kind else {
        panic!("b0000004 is a message");
    };
    assert_eq!(result.role, Role::ToolResult);
    let result = result.tool_results().next().unwrap();
    assert_eq!(result.call_id, "toolu_01");
    assert_eq!(result.tool_name.as_deref(), Some("bash"));
    assert!(result.failed());
    assert_eq!(result.details.as_deref(), Some(&json!({"exitCode": 2})));

    let EntryKind::Compaction {
        first_kept_entry_id,
        tokens_before,
        from_hook,
        ..
    } = &session.entry("b0000008").unwrap().kind
    else {
        panic!("b0000008 is a compaction");
    };
    assert_eq!(first_kept_entry_id.as_deref(), Some("b0000002"));
    assert_eq!(*tokens_before, Some(48213));
    assert_eq!(*from_hook, Some(true));
    let label = session.entry("b0000012").unwrap();
    assert_eq!(label.extra["openclawTrace"], "t-99");
    let EntryKind::Other(body) = &session.entry("b0000011").unwrap().kind else {
        panic!("b0000011 is an unknown type");
    };
    assert_eq!(body["advancementKey"], "turn-7");
}

// ---------------------------------------------------------------------------------------------
// Tree and context
// ---------------------------------------------------------------------------------------------

#[test]
fn tree_has_a_branch_and_the_leaf_is_the_last_entry() {
    let session = decode_session(V3).unwrap().session;
    let children: Vec<&str> = session
        .children("a0000007")
        .iter()
        .map(|entry| entry.id.as_str())
        .collect();
    assert_eq!(children, ["a0000008", "b0000001"]);
    assert_eq!(session.leaf_id(), Some("b0000012"));
    let path: Vec<&str> = session
        .path_to(None)
        .iter()
        .map(|entry| entry.id.as_str())
        .collect();
    assert_eq!(path.first(), Some(&"a0000001"));
    assert_eq!(path.last(), Some(&"b0000012"));
    assert!(
        !path.contains(&"a0000008"),
        "the other branch is not on the path"
    );
    assert!(session.path_to(Some("nope")).is_empty());
}

#[test]
fn context_of_the_current_leaf_starts_with_the_compaction_summary() {
    let session = decode_session(V3).unwrap().session;
    let messages = session.build_context(None);
    let first = messages.first().unwrap();
    assert_eq!(first.role, Role::User);
    assert_eq!(
        first.plain_text(),
        "The conversation history before this point was compacted into the following summary:\n\n<summary>\n## Decisions\n- Summarise the repository instead of editing SOUL.md.\n## Open TODOs\n- Read README.md\n</summary>"
    );
    assert_eq!(first.meta.id.as_deref(), Some("b0000008"));
    // Kept from firstKeptEntryId (b0000002): the branch summary before it is summarised away.
    assert_eq!(messages[1].meta.id.as_deref(), Some("b0000002"));
    assert!(
        messages
            .iter()
            .all(|message| !message.plain_text().starts_with(BRANCH_SUMMARY_PREFIX))
    );
    // bashExecution with excludeFromContext stays out.
    assert!(
        messages
            .iter()
            .all(|message| message.meta.id.as_deref() != Some("b0000006"))
    );
    assert!(messages.iter().all(Message::is_model_visible));
    insta::assert_snapshot!("openclaw_context_current_leaf", render(&messages));
}

#[test]
fn context_of_the_abandoned_branch_has_no_compaction() {
    let session = decode_session(V3).unwrap().session;
    let messages = session.build_context(Some("a0000009"));
    assert!(
        messages
            .iter()
            .all(|message| !message.plain_text().starts_with(COMPACTION_SUMMARY_PREFIX))
    );
    insta::assert_snapshot!("openclaw_context_abandoned_branch", render(&messages));
}

#[test]
fn branch_summary_becomes_a_wrapped_user_message() {
    let session = decode_session(V3).unwrap().session;
    // Leaf b0000002: the branch summary is on the path and no compaction is.
    let messages = session.build_context(Some("b0000002"));
    let ids: Vec<&str> = messages
        .iter()
        .filter_map(|message| message.meta.id.as_deref())
        .collect();
    assert_eq!(
        ids,
        [
            "a0000004", "a0000005", "a0000006", "a0000007", "b0000001", "b0000002"
        ]
    );
    assert_eq!(
        messages[4].plain_text(),
        "The following is a summary of a branch that this conversation came back from:\n\n<summary>\nTried to edit SOUL.md from a picture; the provider call failed.</summary>"
    );
    assert_eq!(messages[4].role, Role::User);
}

// ---------------------------------------------------------------------------------------------
// Migrations and headers
// ---------------------------------------------------------------------------------------------

#[test]
fn version_1_is_migrated_with_ids_from_line_order() {
    let read = decode_session(V1).unwrap();
    assert_eq!(read.issues, vec![]);
    assert_eq!(read.migrated_from, Some(1));
    let session = &read.session;
    assert_eq!(session.header.version, 4);
    let ids: Vec<(&str, Option<&str>)> = session
        .entries()
        .iter()
        .map(|entry| (entry.id.as_str(), entry.parent_id.as_deref()))
        .collect();
    assert_eq!(
        ids,
        [
            ("00000001", None),
            ("00000002", Some("00000001")),
            ("00000003", Some("00000002")),
            ("00000004", Some("00000003")),
            ("00000005", Some("00000004")),
            ("00000006", Some("00000005")),
            ("00000007", Some("00000006")),
        ]
    );
    let EntryKind::Compaction {
        first_kept_entry_id,
        ..
    } = &session.entry("00000005").unwrap().kind
    else {
        panic!("00000005 is a compaction");
    };
    assert_eq!(first_kept_entry_id.as_deref(), Some("00000003"));
    let compaction = session.entry("00000005").unwrap();
    assert!(!compaction.extra.contains_key("firstKeptEntryIndex"));
    let EntryKind::Message(hook) = &session.entry("00000006").unwrap().kind else {
        panic!("expected a message");
    };
    assert_eq!(hook.role, Role::Custom("custom".into()));

    let texts: Vec<String> = session
        .build_context(None)
        .iter()
        .map(Message::plain_text)
        .collect();
    assert_eq!(
        texts,
        [
            format!(
                "{COMPACTION_SUMMARY_PREFIX}The user greeted the assistant.{}",
                session::COMPACTION_SUMMARY_SUFFIX
            ),
            "a parser".to_owned(),
            "Which grammar?".to_owned(),
            "Hook: lint passed.".to_owned(),
            "JSON".to_owned(),
        ]
    );

    // Written back as version 4, and reading that again changes nothing.
    let encoded = encode_session(session);
    assert!(encoded.starts_with(r#"{"type":"session","version":4,"id":"5d1c0b8e-v1""#));
    let again = decode_session(&encoded).unwrap();
    assert_eq!(again.migrated_from, None);
    assert_eq!(&again.session, session);
}

#[test]
fn version_2_hook_messages_become_custom() {
    let read = decode_session(V2).unwrap();
    assert_eq!(read.issues, vec![]);
    assert_eq!(read.migrated_from, Some(2));
    let EntryKind::Message(hook) = &read.session.entry("e2e2e2e2").unwrap().kind else {
        panic!("expected a message");
    };
    assert_eq!(hook.role, Role::Custom("custom".into()));
    assert_eq!(hook.content_form, ContentForm::Blocks);
    let context = read.session.build_context(None);
    assert_eq!(context.len(), 2);
    assert_eq!(context[1].role, Role::User);
    assert_eq!(context[1].plain_text(), "Hook: 3 warnings.");
    assert_eq!(context[1].meta.id.as_deref(), Some("e2e2e2e2"));
}

#[test]
fn header_problems_are_errors() {
    assert_eq!(decode_session("").unwrap_err(), OpenClawError::Empty);
    assert_eq!(decode_session("\n  \n").unwrap_err(), OpenClawError::Empty);
    let cases = [
        ("\n{not json", 2, "found invalid JSON"),
        ("[]", 1, "found an array"),
        (
            r#"{"type":"message","id":"x"}"#,
            1,
            r#"type: expected "session", found "message""#,
        ),
        (
            r#"{"type":"session","version":3}"#,
            1,
            "id: expected a string, found nothing",
        ),
        (
            r#"{"type":"session","version":"3","id":"x"}"#,
            1,
            "version: expected an integer from 1 to 4, found a string",
        ),
        (
            r#"{"type":"session","version":0,"id":"x"}"#,
            1,
            "version: expected an integer from 1 to 4, found a number",
        ),
        (
            r#"{"type":"session","version":3,"id":"x","cwd":7}"#,
            1,
            "cwd: expected a string, found a number",
        ),
    ];
    for (input, line, needle) in cases {
        let OpenClawError::InvalidHeader { line: got, message } =
            decode_session(input).unwrap_err()
        else {
            panic!("{input}: expected an invalid-header error");
        };
        assert_eq!(got, line, "{input}");
        assert!(message.contains(needle), "{input}: {message}");
    }
    let newer = decode_session(r#"{"type":"session","version":5,"id":"x"}"#).unwrap_err();
    assert_eq!(
        newer,
        OpenClawError::UnsupportedVersion {
            line: 1,
            version: 5
        }
    );
    assert!(newer.to_string().contains("versions 1 to 4"));
}

// ---------------------------------------------------------------------------------------------
// Bad lines
// ---------------------------------------------------------------------------------------------

#[test]
fn bad_lines_are_reported_with_line_numbers() {
    let read = decode_session(BAD).unwrap();
    let issues: Vec<String> = read.issues.iter().map(ToString::to_string).collect();
    let expected = [
        (3, "found invalid JSON"),
        (
            4,
            "expected a JSON object (a session entry), found an array; line skipped",
        ),
        (6, "id: expected a string, found nothing; line skipped"),
        (
            7,
            "message.content[1].text: expected a string, found a number; entry \"c0000002\" is kept as written",
        ),
        (9, "duplicate entry id \"c0000001\" (first on line 2)"),
        (10, "parentId \"zzzzzzzz\" points to no entry"),
        (11, "firstKeptEntryId \"00000000\" points to no entry"),
        (
            12,
            "parentId: expected a string or null, found a number; line skipped",
        ),
        (
            13,
            "entry \"c0000007\" is its own ancestor (a parentId cycle)",
        ),
        (
            15,
            "type: expected an entry type, found a second \"session\" header; line skipped",
        ),
        (16, "message.toolCallId: expected a string, found nothing"),
        (
            17,
            "message: expected an AgentMessage object, found nothing",
        ),
    ];
    assert_eq!(issues.len(), expected.len(), "{issues:#?}");
    for ((line, needle), issue) in expected.iter().zip(&read.issues) {
        assert_eq!(issue.line, *line, "{issues:#?}");
        assert!(
            issue.message.contains(needle),
            "line {line}: {}",
            issue.message
        );
    }
    assert!(issues[0].starts_with("line 3: "));

    let session = &read.session;
    // Skipped lines are gone; entries whose body failed stay, verbatim, to keep the tree whole.
    assert!(session.entry("c0000006").is_none());
    assert!(matches!(
        session.entry("c0000002").unwrap().kind,
        EntryKind::Other(_)
    ));
    // The later duplicate wins, as in pi.
    assert_eq!(
        session.entry("c0000001").unwrap().timestamp,
        "2026-01-01T00:00:05.000Z"
    );
    // Walks terminate on cycles.
    assert_eq!(session.path_to(Some("c0000008")).len(), 2);
    // The leaf is the last entry read; its body failed, so it adds nothing, but its parents do.
    assert_eq!(session.leaf_id(), Some("c000000a"));
    let texts: Vec<String> = session
        .build_context(None)
        .iter()
        .map(Message::plain_text)
        .collect();
    assert_eq!(texts, ["duplicate id", "ok"]);

    // Malformed bodies are written back as they were read.
    let written = lines_as_values(&encode_session(session));
    let original_line_7: Value = serde_json::from_str(BAD.lines().nth(6).unwrap()).unwrap();
    assert!(written.contains(&original_line_7));
}

// ---------------------------------------------------------------------------------------------
// Appends
// ---------------------------------------------------------------------------------------------

#[test]
fn append_takes_fresh_caller_ids_and_moves_the_leaf() {
    let mut session = Session::new(SessionHeader {
        id: "s1".into(),
        timestamp: Some("2026-04-01T00:00:00.000Z".into()),
        cwd: Some("/w".into()),
        ..SessionHeader::default()
    });
    assert_eq!(session.leaf_id(), None);
    assert!(session.build_context(None).is_empty());

    let first = session.fresh_id(0xdead_beef);
    assert_eq!(first, "deadbeef");
    session
        .append_message(
            &first,
            "2026-04-01T00:00:01.000Z",
            Message::text(Role::User, "hi"),
        )
        .unwrap();
    // A taken candidate moves on to the next free id.
    assert_eq!(session.fresh_id(0xdead_beef), "deadbef0");
    assert_eq!(session.fresh_id(u32::MAX), "ffffffff");

    let reply = session.fresh_id(1);
    let entry = session
        .append_message(
            &reply,
            "2026-04-01T00:00:02.000Z",
            Message::new(Role::Assistant, vec![Block::text("hello")]),
        )
        .unwrap();
    assert_eq!(entry.parent_id.as_deref(), Some("deadbeef"));
    assert_eq!(session.leaf_id(), Some("00000001"));

    assert_eq!(
        session
            .append("DEADBEEF", "t", EntryKind::SessionInfo { name: None })
            .unwrap_err(),
        SessionEditError::InvalidId {
            id: "DEADBEEF".into()
        }
    );
    assert!(matches!(
        session.append("deadbeef", "t", EntryKind::SessionInfo { name: None }),
        Err(SessionEditError::DuplicateId { .. })
    ));
    assert!(matches!(
        session.set_leaf(Some("ffffffff")),
        Err(SessionEditError::UnknownEntry { .. })
    ));
    assert!(!session.is_fresh_id("deadbeef"));
    assert!(session.is_fresh_id("0000abcd"));

    // Branch from the first message.
    session.set_leaf(Some("deadbeef")).unwrap();
    session
        .append_message(
            "0000abcd",
            "2026-04-01T00:00:03.000Z",
            Message::new(Role::Assistant, vec![Block::text("hello again")]),
        )
        .unwrap();
    assert_eq!(session.children("deadbeef").len(), 2);
    let texts: Vec<String> = session
        .build_context(None)
        .iter()
        .map(Message::plain_text)
        .collect();
    assert_eq!(texts, ["hi", "hello again"]);

    // A reset leaf starts a new root.
    session.set_leaf(None).unwrap();
    let root = session
        .append(
            "0000abce",
            "2026-04-01T00:00:04.000Z",
            EntryKind::ThinkingLevelChange {
                thinking_level: "off".into(),
            },
        )
        .unwrap();
    assert_eq!(root.parent_id, None);

    let read = decode_session(&encode_session(&session)).unwrap();
    assert_eq!(read.issues, vec![]);
    assert_eq!(read.session, session);
}

// ---------------------------------------------------------------------------------------------
// AgentMessage
// ---------------------------------------------------------------------------------------------

#[test]
fn agent_message_errors_name_the_field() {
    let cases = [
        (
            json!(3),
            "message: expected an object with a \"role\", found a number",
        ),
        (
            json!({"content": "x"}),
            "message.role: expected a string, found nothing",
        ),
        (
            json!({"role": "user", "content": 5}),
            "message.content: expected a string or an array of content blocks, found a number",
        ),
        (
            json!({"role": "user", "content": ["x"]}),
            "message.content[0]: expected an object with a \"type\", found a string",
        ),
        (
            json!({"role": "assistant", "content": [{"type": "toolCall", "id": "c", "name": "n"}]}),
            "message.content[0].arguments: expected the tool arguments",
        ),
        (
            json!({"role": "assistant", "content": [{"type": "toolCall", "name": "n", "arguments": {}}]}),
            "message.content[0].id: expected a string, found nothing",
        ),
        (
            json!({"role": "user", "content": [{"type": "image", "data": "AA=="}]}),
            "message.content[0].mimeType: expected a string",
        ),
        (
            json!({"role": "user", "content": [{"type": "image"}]}),
            "message.content[0].data: expected a string (base64 image data), found nothing",
        ),
        (
            json!({"role": "toolResult", "toolCallId": "c", "isError": "no"}),
            "message.isError: expected a boolean, found a string",
        ),
        (
            json!({"role": "toolResult", "toolCallId": "c", "toolName": 1}),
            "message.toolName: expected a string, found a number",
        ),
    ];
    for (value, needle) in cases {
        let err = decode_agent_message(&value).unwrap_err().to_string();
        assert!(err.starts_with(needle), "{value}: {err}");
    }
    let err = decode_agent_message_at(&json!({"role": "user", "content": [1]}), "messages[3]")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "messages[3].content[0]: expected an object with a \"type\", found a number"
    );
}

#[test]
fn agent_messages_round_trip_including_odd_shapes() {
    let values = [
        json!({"role": "user", "content": "plain", "timestamp": 1}),
        json!({"role": "user", "content": [{"type": "image", "url": "https://x/y.png"}]}),
        json!({"role": "assistant", "content": null, "stopReason": "end_turn"}),
        json!({"role": "assistant", "content": [], "usage": {"input": 1, "output": 2, "cacheRead": 3}, "timestamp": 1.5}),
        json!({"role": "assistant", "content": [], "usage": {"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4}, "timestamp": "2026-01-01T00:00:00Z"}),
        json!({"role": "toolResult", "toolCallId": "c1", "content": "done", "details": null}),
        json!({"role": "system", "content": "be brief"}),
        json!({"role": "branchSummary", "summary": "s", "fromId": "a1b2c3d4", "timestamp": 5}),
        json!({"role": "compactionSummary", "summary": "s", "tokensBefore": 10, "timestamp": 5}),
        json!({"role": "somethingNew", "content": {"weird": true}, "x": 1}),
        json!({"role": "custom", "customType": "t", "content": [{"type": "text", "text": "a", "extra": 1}], "display": true}),
    ];
    for value in values {
        let message = decode_agent_message(&value).unwrap();
        assert_eq!(encode_agent_message(&message), value);
    }
}

#[test]
fn custom_roles_convert_like_pi() {
    let convert = |value: Value| {
        session::convert_to_llm(&decode_agent_message(&value).unwrap()).map(|m| m.plain_text())
    };
    assert_eq!(
        convert(
            json!({"role": "bashExecution", "command": "false", "output": "", "exitCode": 1, "cancelled": false, "truncated": false})
        ),
        Some("Ran `false`\n(no output)\n\nCommand exited with code 1".to_owned())
    );
    assert_eq!(
        convert(json!({"role": "bashExecution", "command": "sleep 9", "output": "zz", "exitCode": null, "cancelled": true, "truncated": true, "fullOutputPath": "/tmp/o"})),
        Some("Ran `sleep 9`\n```\nzz\n```\n\n(command cancelled)\n\n[Output truncated. Full output: /tmp/o]".to_owned())
    );
    assert_eq!(
        convert(
            json!({"role": "bashExecution", "command": "ls", "output": "a", "excludeFromContext": true})
        ),
        None
    );
    assert_eq!(
        convert(json!({"role": "compactionSummary", "summary": "S", "tokensBefore": 1})),
        Some(format!(
            "{COMPACTION_SUMMARY_PREFIX}S{}",
            session::COMPACTION_SUMMARY_SUFFIX
        ))
    );
    assert_eq!(
        convert(json!({"role": "branchSummary", "summary": "B", "fromId": "x"})),
        Some(format!(
            "{BRANCH_SUMMARY_PREFIX}B{}",
            session::BRANCH_SUMMARY_SUFFIX
        ))
    );
    assert_eq!(
        convert(json!({"role": "hookMessage", "customType": "h", "content": "H", "display": true})),
        Some("H".to_owned())
    );
    assert_eq!(
        convert(json!({"role": "unknownThing", "content": "?"})),
        None
    );
}

#[test]
fn foreign_messages_encode_to_pi_shapes() {
    // An assistant message from another format: pi's usage needs totalTokens and cost.
    let mut assistant = Message::new(Role::Assistant, vec![Block::text("hi")]);
    assistant.meta.usage = Some(Usage {
        input: 1,
        output: 2,
        cache_read: 3,
        cache_write: 4,
        cache_write_1h: 0,
    });
    assistant.meta.stop_reason = Some(StopReason::MaxTokens);
    let value = encode_agent_message(&assistant);
    assert_eq!(value["usage"]["totalTokens"], 10);
    assert_eq!(value["usage"]["cost"]["total"], 0);
    assert_eq!(value["stopReason"], "length");

    // Anthropic-style: two results and a text in one user message.
    let result = |id: &str| {
        Block::ToolResult(ToolResult {
            call_id: id.into(),
            tool_name: None,
            content: vec![Block::text(format!("out {id}"))].into(),
            content_form: ContentForm::Blocks,
            is_error: None,
            details: None,
            extra: Default::default(),
        })
    };
    let mixed = Message::new(
        Role::User,
        vec![result("a"), result("b"), Block::text("and then?")],
    );
    let values = encode_agent_messages(&[mixed]);
    assert_eq!(
        values,
        [
            json!({"role": "toolResult", "toolCallId": "a", "content": [{"type": "text", "text": "out a"}]}),
            json!({"role": "toolResult", "toolCallId": "b", "content": [{"type": "text", "text": "out b"}]}),
            json!({"role": "user", "content": [{"type": "text", "text": "and then?"}]}),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        // Quarters are exact in binary, so text → value → text never depends on float parsing.
        (-4000i32..4000).prop_map(|n| Value::from(f64::from(n) / 4.0)),
        "[a-zA-Z_]{0,8}".prop_map(Value::from),
        prop_oneof![
            Just("user"),
            Just("assistant"),
            Just("toolResult"),
            Just("bashExecution"),
            Just("custom"),
            Just("text"),
            Just("image"),
            Just("thinking"),
            Just("toolCall"),
            Just("message"),
            Just("compaction"),
            Just("branch_summary"),
            Just("custom_message"),
            Just("label"),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            Just("type".to_owned()),
            Just("role".to_owned()),
            Just("content".to_owned()),
            Just("text".to_owned()),
            Just("id".to_owned()),
            Just("parentId".to_owned()),
            Just("timestamp".to_owned()),
            Just("message".to_owned()),
            Just("usage".to_owned()),
            Just("input".to_owned()),
            Just("toolCallId".to_owned()),
            Just("arguments".to_owned()),
            Just("name".to_owned()),
            Just("summary".to_owned()),
            Just("firstKeptEntryId".to_owned()),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// Values shaped like pi messages, so the round-trip property is exercised on decodable input.
fn agent_message_value() -> impl Strategy<Value = Value> {
    let text = "[a-z ]{0,12}";
    let block = prop_oneof![
        text.prop_map(|t| json!({"type": "text", "text": t})),
        (text, prop::option::of("[a-z]{1,4}")).prop_map(|(t, s)| match s {
            Some(s) => json!({"type": "thinking", "thinking": t, "thinkingSignature": s}),
            None => json!({"type": "thinking", "thinking": t}),
        }),
        "[A-Za-z0-9]{0,8}"
            .prop_map(|d| json!({"type": "image", "data": d, "mimeType": "image/png"})),
        ("[a-z0-9]{1,6}", json_value()).prop_map(
            |(id, args)| json!({"type": "toolCall", "id": id, "name": "read", "arguments": args})
        ),
        json_value().prop_map(|v| json!({"type": "mystery", "v": v})),
    ];
    let content = prop_oneof![
        text.prop_map(Value::from),
        prop::collection::vec(block, 0..4).prop_map(Value::Array),
        Just(Value::Null),
    ];
    let role = prop_oneof![
        Just("user"),
        Just("assistant"),
        Just("toolResult"),
        Just("custom"),
        Just("bashExecution"),
    ];
    let stop = prop_oneof![
        Just("stop"),
        Just("toolUse"),
        Just("error"),
        Just("aborted"),
        Just("length"),
        Just("end_turn"),
    ];
    (
        role,
        prop::option::of(content),
        prop::option::of(stop),
        prop::option::of(json_value()),
        prop::option::of(any::<i64>()),
        prop::option::of((0u64..1000, 0u64..1000, json_value())),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(role, content, stop, details, timestamp, usage, is_error)| {
            let mut obj = serde_json::Map::new();
            obj.insert("role".into(), Value::from(role));
            if role == "toolResult" {
                obj.insert("toolCallId".into(), Value::from("call_1"));
                if let Some(is_error) = is_error {
                    obj.insert("isError".into(), Value::from(is_error));
                }
                if let Some(details) = details {
                    obj.insert("details".into(), details);
                }
            }
            if let Some(content) = content {
                obj.insert("content".into(), content);
            }
            if let Some(stop) = stop {
                obj.insert("stopReason".into(), Value::from(stop));
            }
            if let Some((input, output, rest)) = usage {
                obj.insert(
                    "usage".into(),
                    json!({"input": input, "output": output, "cacheRead": 0, "cacheWrite": 1, "totalTokens": rest}),
                );
            }
            if let Some(timestamp) = timestamp {
                obj.insert("timestamp".into(), Value::from(timestamp));
            }
            Value::Object(obj)
        })
}

/// Entry lines with valid envelopes drawn from a small id pool, so duplicates, dangling parents,
/// cycles and compactions pointing anywhere all occur.
fn entry_line() -> impl Strategy<Value = Value> {
    let id = prop_oneof![Just("a"), Just("b"), Just("c"), Just("d"), Just("e")];
    let parent = prop::option::of(prop_oneof![Just("a"), Just("b"), Just("c"), Just("z")]);
    let kind = prop_oneof![
        Just("message"),
        Just("compaction"),
        Just("branch_summary"),
        Just("custom_message"),
        Just("custom"),
        Just("label"),
        Just("mystery"),
    ];
    (
        kind,
        id,
        parent,
        agent_message_value(),
        prop::option::of(prop_oneof![Just("a"), Just("b"), Just("c"), Just("q")]),
        json_value(),
    )
        .prop_map(|(kind, id, parent, message, kept, noise)| {
            let mut obj = serde_json::Map::new();
            obj.insert("type".into(), Value::from(kind));
            obj.insert("id".into(), Value::from(id));
            obj.insert("parentId".into(), parent.map_or(Value::Null, Value::from));
            obj.insert("timestamp".into(), Value::from("2026-01-01T00:00:00Z"));
            obj.insert("message".into(), message);
            obj.insert("summary".into(), Value::from("sum"));
            obj.insert("fromId".into(), Value::from("a"));
            obj.insert("customType".into(), Value::from("t"));
            obj.insert("content".into(), Value::from("c"));
            obj.insert("targetId".into(), Value::from("b"));
            if let Some(kept) = kept {
                obj.insert("firstKeptEntryId".into(), Value::from(kept));
            }
            obj.insert("noise".into(), noise);
            Value::Object(obj)
        })
}

proptest! {
    #[test]
    fn entry_shaped_sessions_never_panic(lines in prop::collection::vec(entry_line(), 0..16)) {
        let mut input = String::from(r#"{"type":"session","version":3,"id":"p"}"#);
        for line in &lines {
            input.push('\n');
            input.push_str(&line.to_string());
        }
        let read = decode_session(&input).unwrap();
        for entry in read.session.entries() {
            let _ = read.session.build_context(Some(&entry.id));
            prop_assert!(read.session.path_to(Some(&entry.id)).len() <= read.session.entries().len());
        }
        let _ = read.session.build_context(None);
        let written = encode_session(&read.session);
        for (want, got) in lines.iter().zip(lines_as_values(&written).iter().skip(1)) {
            prop_assert_eq!(want, got);
        }
        prop_assert_eq!(decode_session(&written).unwrap().session, read.session);
    }

    #[test]
    fn decode_session_never_panics_on_any_string(input in ".{0,400}") {
        if let Ok(read) = decode_session(&input) {
            let _ = read.session.build_context(None);
            let _ = encode_session(&read.session);
        }
    }

    #[test]
    fn decode_session_never_panics_on_json_lines(lines in prop::collection::vec(json_value(), 0..12)) {
        let mut input = String::from(r#"{"type":"session","version":3,"id":"p"}"#);
        for line in &lines {
            input.push('\n');
            input.push_str(&line.to_string());
        }
        let read = decode_session(&input).unwrap();
        for entry in read.session.entries() {
            let _ = read.session.build_context(Some(&entry.id));
        }
        let _ = read.session.build_context(None);
        // Whatever was read is written and read back the same.
        let again = decode_session(&encode_session(&read.session)).unwrap();
        prop_assert_eq!(again.session, read.session);
    }

    #[test]
    fn decode_agent_message_never_panics(value in json_value()) {
        if let Ok(message) = decode_agent_message(&value) {
            prop_assert_eq!(encode_agent_message(&message), value);
        }
    }

    #[test]
    fn pi_shaped_messages_round_trip(value in agent_message_value()) {
        let message = decode_agent_message(&value);
        prop_assert!(message.is_ok(), "{:?}", message);
        let message = message.unwrap();
        prop_assert_eq!(encode_agent_message(&message), value.clone());
        let _ = session::convert_to_llm(&message);
    }
}

#[test]
fn one_hour_cache_writes_survive_a_stored_session() {
    // A Claude Code answer imported into the store keeps what its cache writes cost.
    let mut assistant = Message::new(Role::Assistant, vec![Block::text("hi")]);
    let usage = Usage {
        input: 3,
        output: 20,
        cache_read: 17_842,
        cache_write: 8_037,
        cache_write_1h: 8_037,
    };
    assistant.meta.usage = Some(usage);
    let value = encode_agent_message(&assistant);
    assert_eq!(value["usage"]["skaldCacheWrite1h"], 8_037);
    assert_eq!(
        decode_agent_message(&value).unwrap().meta.usage,
        Some(usage)
    );
    // Without one-hour writes the key is not written: pi's own usage object, unchanged.
    assistant.meta.usage = Some(Usage {
        cache_write_1h: 0,
        ..usage
    });
    let value = encode_agent_message(&assistant);
    assert!(value["usage"].get("skaldCacheWrite1h").is_none(), "{value}");
}
