//! Transcript repair: one test per behaviour, plus property tests over arbitrary transcripts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::json;
use skald_core::message::{
    Block, ContentForm, Extra, Message, Role, StopReason, ToolCall, ToolResult,
};
use skald_core::repair::{
    MISSING_RESULT_TEXT, RepairReport, RepairSettings, repair, repair_pairing, sanitize_tool_calls,
};

fn call_block(id: &str, name: &str) -> Block {
    Block::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: json!({"arg": id}),
        arguments_text: None,
        extra: Extra::new(),
    })
}

fn assistant(calls: &[(&str, &str)]) -> Message {
    let mut content = vec![Block::text("let me look")];
    content.extend(calls.iter().map(|(id, name)| call_block(id, name)));
    let mut message = Message::new(Role::Assistant, content);
    message.meta.stop_reason = Some(StopReason::ToolUse);
    message
}

fn result_block(id: &str) -> Block {
    Block::ToolResult(ToolResult {
        call_id: id.into(),
        tool_name: None,
        content: vec![Block::text(format!("output of {id}"))].into(),
        content_form: ContentForm::Text,
        is_error: None,
        details: None,
        extra: Extra::new(),
    })
}

/// One `ToolResult` message holding results for `ids` (Anthropic style when several).
fn results(ids: &[&str]) -> Message {
    Message::new(
        Role::ToolResult,
        ids.iter().map(|id| result_block(id)).collect(),
    )
}

fn user(text: &str) -> Message {
    Message::text(Role::User, text)
}

fn no_settings() -> RepairSettings {
    RepairSettings::default()
}

/// Call ids of the result blocks of a message.
fn result_ids(message: &Message) -> Vec<String> {
    message.tool_results().map(|r| r.call_id.clone()).collect()
}

fn call_ids(message: &Message) -> Vec<String> {
    message.tool_calls().map(|c| c.id.clone()).collect()
}

fn roles(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| m.role.name().to_owned()).collect()
}

#[test]
fn valid_transcript_is_unchanged_with_clean_report() {
    let mut tool_a = results(&["a"]);
    tool_a.meta.id = Some("tool-a".into());
    let messages = vec![
        Message::text(Role::System, "be brief"),
        user("list files"),
        assistant(&[("a", "ls")]),
        tool_a,
        assistant(&[("b", "read"), ("c", "read")]),
        // OpenAI style: one message per result, in call order.
        results(&["b"]),
        results(&["c"]),
        Message::text(Role::Assistant, "done"),
        user("thanks"),
        assistant(&[("d", "grep"), ("e", "grep")]),
        // Anthropic style: one message with all results, then text.
        Message::new(
            Role::ToolResult,
            vec![
                result_block("d"),
                result_block("e"),
                Block::text("also: hurry"),
            ],
        ),
    ];
    let (out, report) = repair(messages.clone(), &no_settings());
    assert!(report.is_clean(), "{report:?}");
    assert!(report.reasons.is_empty());
    assert_eq!(out, messages);
}

#[test]
fn custom_messages_between_call_and_result_are_tolerated() {
    let messages = vec![
        user("go"),
        assistant(&[("a", "ls")]),
        Message::text(Role::Custom("bashExecution".into()), "host note"),
        results(&["a"]),
    ];
    let (out, report) = repair(messages.clone(), &no_settings());
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(out, messages);
}

#[test]
fn displaced_result_moves_directly_after_its_call() {
    let messages = vec![
        user("go"),
        assistant(&[("a", "ls")]),
        user("are you there?"),
        results(&["a"]),
        Message::text(Role::Assistant, "yes"),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.moved, 1);
    assert_eq!(report.inserted, 0);
    assert_eq!(
        roles(&out),
        ["user", "assistant", "tool_result", "user", "assistant"]
    );
    assert_eq!(result_ids(&out[2]), ["a"]);
    assert_eq!(out[3].plain_text(), "are you there?");
    assert!(report.reasons.iter().any(|r| r.contains("call a")));
}

#[test]
fn result_after_a_later_assistant_moves_back_to_its_call() {
    let messages = vec![
        assistant(&[("a", "ls")]),
        user("meanwhile"),
        Message::text(Role::Assistant, "waiting"),
        results(&["a"]),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.moved, 1);
    assert_eq!(
        roles(&out),
        ["assistant", "tool_result", "user", "assistant"]
    );
    assert_eq!(result_ids(&out[1]), ["a"]);
}

#[test]
fn results_follow_in_call_order_in_one_message() {
    let messages = vec![
        assistant(&[("a", "ls"), ("b", "cat"), ("c", "grep")]),
        results(&["c"]),
        results(&["a"]),
        user("interjection"),
        results(&["b"]),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(roles(&out), ["assistant", "tool_result", "user"]);
    assert_eq!(result_ids(&out[1]), ["a", "b", "c"]);
    // "a" came after "c" and "b" came after a user message.
    assert_eq!(report.moved, 2, "{report:?}");
    assert_eq!(report.inserted, 0);
}

#[test]
fn text_sharing_a_result_message_is_kept_after_the_results() {
    let messages = vec![
        assistant(&[("a", "ls"), ("b", "cat")]),
        Message::new(
            Role::ToolResult,
            vec![Block::text("note first"), result_block("b")],
        ),
        user("later"),
        results(&["a"]),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(roles(&out), ["assistant", "tool_result", "user"]);
    let merged = &out[1];
    assert_eq!(result_ids(merged), ["a", "b"]);
    assert!(matches!(merged.content.last(), Some(Block::Text(t)) if t.text == "note first"));
    assert!(report.moved >= 1);
}

#[test]
fn text_before_results_is_moved_after_them() {
    let messages = vec![
        assistant(&[("a", "ls")]),
        Message::new(
            Role::ToolResult,
            vec![Block::text("hello"), result_block("a")],
        ),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert!(!report.is_clean());
    assert_eq!(out.len(), 2);
    assert_eq!(result_ids(&out[1]), ["a"]);
    assert!(matches!(out[1].content.last(), Some(Block::Text(t)) if t.text == "hello"));
}

#[test]
fn text_only_tool_message_before_results_is_reported() {
    let messages = vec![
        assistant(&[("a", "ls")]),
        Message::new(Role::ToolResult, vec![Block::text("progress")]),
        results(&["a"]),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.moved, 1, "{report:?}");
    assert_eq!(result_ids(&out[1]), ["a"]);
    assert_eq!(out[2].plain_text(), "progress");
}

#[test]
fn missing_result_gets_a_synthetic_error_result() {
    let messages = vec![
        user("go"),
        assistant(&[("a", "ls"), ("b", "cat")]),
        results(&["a"]),
        user("next"),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.inserted, 1);
    assert_eq!(report.moved, 0);
    assert_eq!(roles(&out), ["user", "assistant", "tool_result", "user"]);
    assert_eq!(result_ids(&out[2]), ["a", "b"]);
    let synthetic = out[2].tool_results().nth(1).unwrap();
    assert_eq!(synthetic.is_error, Some(true));
    assert_eq!(synthetic.tool_name.as_deref(), Some("cat"));
    assert_eq!(synthetic.text_chars(), MISSING_RESULT_TEXT.chars().count());
    assert!(report.reasons.iter().any(|r| r.contains("call b")));
}

#[test]
fn call_at_the_end_gets_a_synthetic_result() {
    let (out, report) = repair(vec![user("go"), assistant(&[("a", "ls")])], &no_settings());
    assert_eq!(report.inserted, 1);
    assert_eq!(roles(&out), ["user", "assistant", "tool_result"]);
    assert!(out[2].tool_results().all(ToolResult::failed));
}

#[test]
fn duplicate_results_are_dropped_keeping_the_first() {
    let mut first = results(&["a"]);
    if let Some(Block::ToolResult(result)) = first.content.first_mut() {
        result.content = vec![Block::text("first")].into();
    }
    let messages = vec![
        assistant(&[("a", "ls")]),
        first,
        results(&["a"]),
        user("ok"),
        results(&["a"]),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.dropped_duplicates, 2);
    assert_eq!(report.dropped_orphans, 0);
    assert_eq!(roles(&out), ["assistant", "tool_result", "user"]);
    assert_eq!(
        out[1].tool_results().next().unwrap().content,
        vec![Block::text("first")]
    );
}

#[test]
fn duplicate_inside_one_message_is_dropped() {
    let messages = vec![assistant(&[("a", "ls")]), results(&["a", "a"])];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.dropped_duplicates, 1);
    assert_eq!(result_ids(&out[1]), ["a"]);
}

#[test]
fn orphan_results_are_dropped() {
    let messages = vec![
        results(&["early"]),
        user("go"),
        assistant(&[("a", "ls")]),
        results(&["a", "zzz"]),
        results(&["nobody"]),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.dropped_orphans, 3);
    assert_eq!(roles(&out), ["user", "assistant", "tool_result"]);
    assert_eq!(result_ids(&out[2]), ["a"]);
    for id in ["early", "zzz", "nobody"] {
        assert!(report.reasons.iter().any(|r| r.contains(id)), "{id}");
    }
}

#[test]
fn text_of_a_message_whose_results_all_drop_stays_as_user_text() {
    let messages = vec![
        assistant(&[("a", "ls")]),
        results(&["a"]),
        Message::new(
            Role::ToolResult,
            vec![result_block("ghost"), Block::text("keep me")],
        ),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.dropped_orphans, 1);
    assert_eq!(roles(&out), ["assistant", "tool_result", "user"]);
    assert_eq!(out[2].plain_text(), "keep me");
}

#[test]
fn errored_and_aborted_assistants_are_left_alone() {
    for reason in [StopReason::Error, StopReason::Aborted] {
        let mut broken = assistant(&[("a", "ls")]);
        broken.meta.stop_reason = Some(reason.clone());
        let messages = vec![user("go"), broken, user("retry")];
        let (out, report) = repair(messages.clone(), &no_settings());
        assert!(report.is_clean(), "{reason:?}: {report:?}");
        assert_eq!(out, messages);
    }
}

#[test]
fn orphan_after_aborted_assistant_is_dropped() {
    let mut aborted = assistant(&[("a", "ls")]);
    aborted.meta.stop_reason = Some(StopReason::Aborted);
    let messages = vec![user("go"), aborted, results(&["a"]), user("retry")];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.dropped_orphans, 1);
    assert_eq!(report.inserted, 0);
    assert_eq!(roles(&out), ["user", "assistant", "user"]);
    assert!(report.reasons.iter().any(|r| r.contains("aborted")));
}

#[test]
fn result_after_aborted_assistant_answers_another_open_call() {
    let mut aborted = assistant(&[("a", "ls")]);
    aborted.meta.stop_reason = Some(StopReason::Error);
    let messages = vec![assistant(&[("a", "ls")]), aborted, results(&["a"])];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.dropped_orphans, 0);
    assert_eq!(report.moved, 1);
    assert_eq!(roles(&out), ["assistant", "tool_result", "assistant"]);
}

#[test]
fn tool_use_stop_reason_is_still_repaired() {
    let (out, report) = repair(vec![assistant(&[("a", "ls")])], &no_settings());
    assert_eq!(report.inserted, 1);
    assert_eq!(out.len(), 2);
}

#[test]
fn reused_call_ids_pair_per_turn() {
    let messages = vec![
        assistant(&[("functions.bash:0", "bash")]),
        results(&["functions.bash:0"]),
        assistant(&[("functions.bash:0", "bash")]),
        results(&["functions.bash:0"]),
    ];
    let (out, report) = repair(messages.clone(), &no_settings());
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(out, messages);
}

#[test]
fn invalid_tool_calls_are_dropped() {
    let long = "x".repeat(65);
    let messages = vec![
        Message::new(
            Role::Assistant,
            vec![
                Block::text("trying"),
                call_block("", "ls"),
                call_block("  ", "ls"),
                call_block("b", "bad name"),
                call_block("c", &long),
                call_block("d", ""),
                call_block("e", "read"),
                call_block("e", "read"),
            ],
        ),
        results(&["e", "b", "c"]),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.dropped_invalid_calls, 6, "{report:?}");
    assert_eq!(call_ids(&out[0]), ["e"]);
    // Results of dropped calls become orphans.
    assert_eq!(report.dropped_orphans, 2);
    assert_eq!(result_ids(&out[1]), ["e"]);
    assert_eq!(out.len(), 2);
}

#[test]
fn sixty_four_character_names_are_valid() {
    let name = "a".repeat(64);
    let messages = vec![assistant(&[("a", &name)]), results(&["a"])];
    let (_, report) = repair(messages, &no_settings());
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn tool_names_are_trimmed() {
    let messages = vec![assistant(&[("a", "  read \n")]), results(&["a"])];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.trimmed_names, 1);
    assert_eq!(report.dropped_invalid_calls, 0);
    assert_eq!(out[0].tool_calls().next().unwrap().name, "read");
    assert!(!report.is_clean());
}

#[test]
fn allowlist_is_case_insensitive() {
    let settings = RepairSettings {
        allowed_tool_names: Some(vec!["Read".into(), " bash ".into()]),
    };
    let messages = vec![
        assistant(&[("a", "read"), ("b", "BASH"), ("c", "write")]),
        results(&["a", "b", "c"]),
    ];
    let (out, report) = repair(messages, &settings);
    assert_eq!(report.dropped_invalid_calls, 1);
    assert_eq!(report.dropped_orphans, 1);
    assert_eq!(call_ids(&out[0]), ["a", "b"]);
    assert_eq!(result_ids(&out[1]), ["a", "b"]);
    assert!(report.reasons.iter().any(|r| r.contains("call c")));
}

#[test]
fn assistant_left_empty_is_dropped() {
    let messages = vec![
        user("go"),
        Message::new(Role::Assistant, vec![call_block("a", "no such tool!")]),
        results(&["a"]),
        user("again"),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.dropped_invalid_calls, 1);
    assert_eq!(report.dropped_empty_messages, 1);
    assert_eq!(report.dropped_orphans, 1);
    assert_eq!(roles(&out), ["user", "user"]);
}

#[test]
fn stages_can_run_alone() {
    let messages = vec![assistant(&[("a", " ls")])];
    let (sanitized, report) = sanitize_tool_calls(messages, &no_settings());
    assert_eq!(report.trimmed_names, 1);
    assert_eq!(report.inserted, 0);
    let (paired, report) = repair_pairing(sanitized);
    assert_eq!(report.inserted, 1);
    assert_eq!(paired.len(), 2);
}

#[test]
fn merged_message_adopts_the_first_source_metadata() {
    let mut first = results(&["b"]);
    first.meta.id = Some("first-source".into());
    let mut second = results(&["a"]);
    second.meta.id = Some("second-source".into());
    let messages = vec![
        assistant(&[("a", "ls"), ("b", "cat")]),
        first,
        user("x"),
        second,
    ];
    let (out, _) = repair(messages, &no_settings());
    assert_eq!(out[1].meta.id.as_deref(), Some("first-source"));
}

#[test]
fn report_serializes() {
    let (_, report) = repair(vec![assistant(&[("a", "ls")])], &no_settings());
    let value = serde_json::to_value(&report).unwrap();
    assert_eq!(value["inserted"], 1);
    assert!(value["reasons"].as_array().is_some_and(|r| r.len() == 1));
    assert!(RepairReport::default().is_clean());
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Item {
    User,
    Custom,
    /// A ToolResult message with only text.
    ToolText,
    /// An assistant with arbitrary calls (ids collide on purpose, some names invalid).
    Assistant {
        calls: Vec<(u8, u8)>,
        stop: u8,
    },
    /// Results with arbitrary ids, optionally with text.
    Results {
        ids: Vec<(u8, u8)>,
        text: bool,
        text_first: bool,
    },
    /// An assistant and its results: styles 0-2 well formed (Anthropic, OpenAI, Anthropic with
    /// text), 3 text-only message first, 4 results reversed, 5 first result missing.
    Turn {
        calls: u8,
        style: u8,
    },
}

fn item() -> impl Strategy<Value = Item> {
    let id = (0u8..4, 0u8..3);
    prop_oneof![
        Just(Item::User),
        Just(Item::Custom),
        Just(Item::ToolText),
        (prop::collection::vec(id.clone(), 0..4), 0u8..8)
            .prop_map(|(calls, stop)| Item::Assistant { calls, stop }),
        (
            prop::collection::vec(id, 0..4),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(ids, text, text_first)| Item::Results {
                ids,
                text,
                text_first
            }),
        (1u8..4, 0u8..3).prop_map(|(calls, style)| Item::Turn { calls, style }),
        (1u8..4, 0u8..6).prop_map(|(calls, style)| Item::Turn { calls, style }),
    ]
}

fn build(items: &[Item]) -> Vec<Message> {
    let names = ["ls", "cat", "read", "grep", "bad name", "", " trim "];
    let mut messages = Vec::new();
    for (index, item) in items.iter().enumerate() {
        match item {
            Item::User => messages.push(user(&format!("user {index}"))),
            Item::Custom => messages.push(Message::text(Role::Custom("note".into()), "n")),
            Item::ToolText => messages.push(Message::new(
                Role::ToolResult,
                vec![Block::text(format!("text {index}"))],
            )),
            Item::Assistant { calls, stop } => {
                let content: Vec<Block> = calls
                    .iter()
                    .map(|(a, b)| {
                        let name = names[(*a as usize + *b as usize * 3) % names.len()];
                        call_block(&format!("t{a}_{b}"), name)
                    })
                    .collect();
                let mut message = Message::new(Role::Assistant, content);
                message.meta.stop_reason = match stop {
                    0 => Some(StopReason::Error),
                    1 => Some(StopReason::Aborted),
                    2 => None,
                    _ => Some(StopReason::ToolUse),
                };
                messages.push(message);
            }
            Item::Results {
                ids,
                text,
                text_first,
            } => {
                let mut content: Vec<Block> = ids
                    .iter()
                    .map(|(a, b)| result_block(&format!("t{a}_{b}")))
                    .collect();
                if *text {
                    let block = Block::text(format!("text {index}"));
                    if *text_first {
                        content.insert(0, block);
                    } else {
                        content.push(block);
                    }
                }
                messages.push(Message::new(Role::ToolResult, content));
            }
            Item::Turn { calls, style } => {
                let ids: Vec<String> = (0..*calls).map(|j| format!("t{}_{j}", index % 4)).collect();
                messages.push(Message::new(
                    Role::Assistant,
                    ids.iter().map(|id| call_block(id, "read")).collect(),
                ));
                match style {
                    0 => messages.push(Message::new(
                        Role::ToolResult,
                        ids.iter().map(|id| result_block(id)).collect(),
                    )),
                    1 => messages.extend(ids.iter().map(|id| results(&[id.as_str()]))),
                    3 => {
                        messages.push(Message::new(
                            Role::ToolResult,
                            vec![Block::text(format!("text {index}"))],
                        ));
                        messages.extend(ids.iter().map(|id| results(&[id.as_str()])));
                    }
                    4 => messages.extend(ids.iter().rev().map(|id| results(&[id.as_str()]))),
                    5 => messages.extend(ids.iter().skip(1).map(|id| results(&[id.as_str()]))),
                    _ => {
                        let mut content: Vec<Block> =
                            ids.iter().map(|id| result_block(id)).collect();
                        content.push(Block::text(format!("text {index}")));
                        messages.push(Message::new(Role::ToolResult, content));
                    }
                }
            }
        }
    }
    messages
}

/// Every complete assistant's calls are answered, in order, by the `ToolResult` messages right
/// after it (custom messages allowed between), and no result is left anywhere else.
fn assert_well_formed(messages: &[Message]) {
    let mut index = 0;
    while index < messages.len() {
        let message = &messages[index];
        index += 1;
        let complete = !message
            .meta
            .stop_reason
            .as_ref()
            .is_some_and(StopReason::is_incomplete);
        if message.role != Role::Assistant || !complete {
            assert!(
                message.tool_results().next().is_none(),
                "stray result at {}: {message:?}",
                index - 1
            );
            continue;
        }
        let expected: Vec<String> = call_ids(message);
        let mut got: Vec<String> = Vec::new();
        let mut text_seen = false;
        while got.len() < expected.len() && index < messages.len() {
            let next = &messages[index];
            match next.role {
                Role::Custom(_) => {}
                Role::ToolResult => {
                    for block in &next.content {
                        match block {
                            Block::ToolResult(result) => {
                                assert!(!text_seen, "text before a result");
                                got.push(result.call_id.clone());
                            }
                            Block::Text(_)
                            | Block::Image(_)
                            | Block::Thinking(_)
                            | Block::ToolCall(_)
                            | Block::Opaque(_) => text_seen = true,
                        }
                    }
                }
                Role::System | Role::User | Role::Assistant => break,
            }
            index += 1;
        }
        assert_eq!(got, expected, "results of assistant at {}", index);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn repaired_transcripts_are_well_formed_and_stable(items in prop::collection::vec(item(), 0..14)) {
        let messages = build(&items);
        let (out, report) = repair(messages.clone(), &no_settings());
        assert_well_formed(&out);
        if report.is_clean() {
            prop_assert_eq!(&out, &messages);
        }
        // Idempotent: a repaired transcript needs nothing more.
        let (again, second) = repair(out.clone(), &no_settings());
        prop_assert!(second.is_clean(), "{:?}", second);
        prop_assert_eq!(&again, &out);
        // Users, customs and the assistants' calls keep their order.
        let users_before: Vec<String> = messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(Message::plain_text)
            .collect();
        let users_after: Vec<String> = out
            .iter()
            .filter(|m| m.role == Role::User)
            .map(Message::plain_text)
            .filter(|t| t.starts_with("user"))
            .collect();
        let clean_inputs = items
            .iter()
            .all(|item| matches!(item, Item::User | Item::Turn { style: 0..=2, .. }));
        if clean_inputs {
            // Ids repeat across turns only after earlier turns are answered, so these are valid.
            prop_assert!(report.is_clean(), "{:?}", report);
        }
        prop_assert_eq!(users_before, users_after);
    }

    #[test]
    fn no_text_is_lost(items in prop::collection::vec(item(), 0..14)) {
        let messages = build(&items);
        let texts = |messages: &[Message]| {
            let mut all: Vec<String> = messages
                .iter()
                .flat_map(|m| m.content.iter())
                .filter_map(Block::as_text)
                .filter(|t| t.text.starts_with("text "))
                .map(|t| t.text.clone())
                .collect();
            all.sort();
            all
        };
        let (out, _) = repair_pairing(messages.clone());
        prop_assert_eq!(texts(&messages), texts(&out));
    }
}

#[test]
fn large_transcripts_repair_in_linear_time() {
    let mut messages = Vec::new();
    for turn in 0..5_000 {
        let a = format!("a{turn}");
        let b = format!("b{turn}");
        messages.push(assistant(&[(&a, "ls"), (&b, "cat")]));
        if turn % 2 == 0 {
            messages.push(results(&[&a, &b]));
        } else {
            messages.push(user("interjection"));
            messages.push(results(&[&b]));
        }
    }
    let started = std::time::Instant::now();
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.inserted, 2_500);
    assert_eq!(report.moved, 2_500);
    assert_eq!(out.len(), 12_500);
    // Generous even for a debug build; a quadratic pass over 12k messages would blow it.
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

/// Codex 0.80 (chat wire) sends the assistant's commentary as its own message after the tool
/// call and before the result. Moving the result up used to leave the request ending on that
/// assistant text, and the upstream looped on its own last turn.
#[test]
fn codex_080_assistant_text_between_call_and_result_keeps_the_result_last() {
    let body = json!({
        "model": "gpt-5-codex",
        "messages": [
            {"role": "system", "content": "You are Codex, a coding agent."},
            {"role": "user", "content": "list the files"},
            {"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_Jq1", "type": "function",
                "function": {"name": "shell", "arguments": "{\"command\":[\"bash\",\"-lc\",\"ls\"]}"}
            }]},
            {"role": "assistant", "content": "Listing the repository files."},
            {"role": "tool", "tool_call_id": "call_Jq1",
             "content": "{\"output\":\"a.txt\\nb.txt\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.1}}"}
        ],
        "tools": [{"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}],
        "stream": true
    });
    let conversation = skald_core::codec::openai::decode_request(&body).unwrap();
    let (messages, report) = repair(conversation.messages.clone(), &no_settings());
    assert_eq!(
        roles(&messages),
        ["system", "user", "assistant", "tool_result"]
    );
    assert_eq!(report.merged_assistant_messages, 1);
    assert_eq!(report.moved, 0, "{report:?}");
    assert!(!report.is_clean());
    assert!(report.summary().contains("merged assistant messages 1"));
    assert!(
        report
            .reasons
            .iter()
            .any(|reason| reason.contains("merged"))
    );
    // The commentary comes ahead of the call, in the calling message.
    let assistant = &messages[2];
    assert_eq!(assistant.plain_text(), "Listing the repository files.");
    assert!(matches!(assistant.content[0], Block::Text(_)));
    assert!(matches!(assistant.content[1], Block::ToolCall(_)));
    assert_eq!(assistant.content_form, ContentForm::Text);

    let wire = skald_core::codec::openai::encode_request(&skald_core::message::Conversation {
        messages,
        ..conversation
    });
    let sent = wire["messages"].as_array().unwrap();
    assert_eq!(sent.len(), 4);
    assert_eq!(sent[2]["content"], "Listing the repository files.");
    assert_eq!(sent[2]["tool_calls"][0]["id"], "call_Jq1");
    assert_eq!(sent[3]["role"], "tool");
    assert_eq!(sent[3]["tool_call_id"], "call_Jq1");
}

#[test]
fn assistant_text_after_a_user_turn_is_not_merged_into_an_earlier_call() {
    let messages = vec![
        user("go"),
        assistant(&[("a", "ls")]),
        user("interjection"),
        Message::text(Role::Assistant, "noted"),
        results(&["a"]),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.merged_assistant_messages, 0);
    assert_eq!(
        roles(&out),
        ["user", "assistant", "tool_result", "user", "assistant"]
    );
}

#[test]
fn several_assistant_texts_before_partial_results_are_merged_in_order() {
    let messages = vec![
        user("go"),
        assistant(&[("a", "ls"), ("b", "cat")]),
        results(&["a"]),
        Message::text(Role::Assistant, "first"),
        Message::text(Role::Assistant, "second"),
        results(&["b"]),
    ];
    let (out, report) = repair(messages, &no_settings());
    assert_eq!(report.merged_assistant_messages, 2);
    assert_eq!(roles(&out), ["user", "assistant", "tool_result"]);
    assert_eq!(result_ids(&out[2]), ["a", "b"]);
    assert_eq!(out[1].plain_text(), "let me look\nfirst\nsecond");
    assert_eq!(call_ids(&out[1]), ["a", "b"]);
}
