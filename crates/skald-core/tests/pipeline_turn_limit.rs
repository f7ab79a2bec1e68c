//! History turn limit (seed 003 §2.1): one test per behaviour, mirroring OpenClaw's
//! `limithistoryturns` and `history` tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pipeline_common;

use pipeline_common::*;
use skald_core::message::{Message, Role};
use skald_core::pipeline::turn_limit::{
    BatchRule, TurnBatch, TurnLimitSettings, TurnLimitSettingsError, limit_turns, turns_to_drop,
};

fn limit(n: usize) -> TurnLimitSettings {
    TurnLimitSettings {
        limit: Some(n),
        batch: 0.into(),
    }
}

/// `turns` user turns, each: user, assistant call, result, assistant answer.
fn conversation(turns: usize) -> Vec<Message> {
    let mut messages = vec![system("be brief")];
    for turn in 0..turns {
        let id = format!("c{turn}");
        messages.push(user(&format!("question {turn}")));
        messages.push(calls(&[(&id, "read")]));
        messages.push(result(&id, "read", &format!("output {turn}")));
        messages.push(assistant(&format!("answer {turn}")));
    }
    messages
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| format!("{}:{}", m.role.name(), m.plain_text()))
        .collect()
}

#[test]
fn turn_limit_none_or_zero_leaves_messages_unchanged() {
    for settings in [TurnLimitSettings::default(), limit(0)] {
        let messages = conversation(5);
        let ptr = messages.as_ptr();
        let (out, report) = limit_turns(messages.clone(), &settings);
        assert_eq!(out, messages);
        assert!(report.is_noop());
        assert_eq!(report.summary(), "unchanged");
        let (out, _) = limit_turns(messages, &settings);
        assert_eq!(out.as_ptr(), ptr, "an unchanged list is moved, not rebuilt");
    }
}

#[test]
fn turn_limit_keeps_everything_within_the_limit() {
    let messages = conversation(3);
    let (out, report) = limit_turns(messages.clone(), &limit(3));
    assert_eq!(out, messages);
    assert_eq!(report.turns_before, 3);
    assert!(report.is_noop());
    let (out, _) = limit_turns(Vec::new(), &limit(3));
    assert!(out.is_empty());
}

#[test]
fn turn_limit_cuts_on_user_boundary() {
    let (out, report) = limit_turns(conversation(5), &limit(2));
    assert_eq!(
        texts(&out),
        vec![
            "system:be brief",
            "user:question 3",
            "assistant:",
            "tool_result:",
            "assistant:answer 3",
            "user:question 4",
            "assistant:",
            "tool_result:",
            "assistant:answer 4",
        ]
    );
    assert_eq!(
        out[1].role,
        Role::User,
        "the kept history starts at a user turn"
    );
    pairing(&out).unwrap();
    assert_eq!(report.turns_before, 5);
    assert_eq!(report.turns_dropped, 3);
    assert_eq!(report.messages_dropped, 12);
    assert_eq!(report.system_messages_kept, 1);
    assert_eq!(report.dropped, Some(1..13));
    assert_eq!(report.summary(), "dropped 3 turns (12 messages)");
    assert!(report.reasons[0].contains("keep the last 2 user turns"));
}

#[test]
fn turn_limit_tool_results_are_not_user_turns() {
    // Anthropic puts results in user messages; decoders make them tool_result messages, so a turn
    // with many tool rounds is still one turn.
    let mut messages = vec![user("fix the build")];
    for round in 0..4 {
        let id = format!("r{round}");
        messages.push(calls(&[(&id, "bash")]));
        messages.push(result(&id, "bash", "ok"));
    }
    messages.push(user("thanks"));
    messages.push(assistant("welcome"));
    let (out, report) = limit_turns(messages.clone(), &limit(2));
    assert_eq!(out, messages);
    assert_eq!(report.turns_before, 2);
    let (out, report) = limit_turns(messages, &limit(1));
    assert_eq!(texts(&out), vec!["user:thanks", "assistant:welcome"]);
    assert_eq!(report.messages_dropped, 9);
}

#[test]
fn turn_limit_keeps_leading_system_messages_only() {
    let messages = vec![
        system("prompt"),
        system("tools policy"),
        assistant("hello, how can I help?"),
        user("one"),
        system("mid-history note"),
        assistant("a1"),
        user("two"),
        assistant("a2"),
    ];
    let (out, report) = limit_turns(messages, &limit(1));
    assert_eq!(
        texts(&out),
        vec![
            "system:prompt",
            "system:tools policy",
            "user:two",
            "assistant:a2"
        ]
    );
    assert_eq!(report.system_messages_kept, 2);
    assert_eq!(report.dropped, Some(2..6));
}

#[test]
fn turn_limit_without_system_prompt_starts_at_the_user_turn() {
    let mut messages = conversation(3);
    messages.remove(0);
    let (out, _) = limit_turns(messages, &limit(1));
    assert_eq!(out[0].plain_text(), "question 2");
    assert_eq!(out.len(), 4);
}

#[test]
fn turn_limit_batch_zero_is_classic() {
    for turns in 0..12 {
        let (out, _) = limit_turns(conversation(turns), &limit(4));
        let users = out.iter().filter(|m| m.role == Role::User).count();
        assert_eq!(users, turns.min(4));
    }
}

#[test]
fn turn_limit_batch_evicts_in_steps_keeping_prefix_stable() {
    let settings = TurnLimitSettings {
        limit: Some(4),
        batch: 2.into(),
    };
    settings.validate().unwrap();
    let mut kept_counts = Vec::new();
    let mut first_kept = Vec::new();
    for turns in 1..=13 {
        let (out, report) = limit_turns(conversation(turns), &settings);
        let users = out.iter().filter(|m| m.role == Role::User).count();
        kept_counts.push(users);
        first_kept.push(out[1].plain_text());
        assert_eq!(report.turns_dropped, turns_to_drop(turns, 4, 2));
        pairing(&out).unwrap();
    }
    assert_eq!(
        kept_counts,
        vec![1, 2, 3, 4, 5, 6, 4, 5, 6, 4, 5, 6, 4],
        "keeps up to limit + batch turns, then drops back to the limit at once"
    );
    // The first kept message (the cache prefix after the system prompt) changes only every
    // batch + 1 turns.
    assert_eq!(first_kept[6], "question 3");
    assert_eq!(first_kept[7], "question 3");
    assert_eq!(first_kept[8], "question 3");
    assert_eq!(first_kept[9], "question 6");
}

#[test]
fn turn_limit_settings_load_and_validate() {
    let settings: TurnLimitSettings = serde_json::from_str(r#"{"limit": 6, "batch": 3}"#).unwrap();
    assert_eq!(settings.limit, Some(6));
    settings.validate().unwrap();
    let defaults: TurnLimitSettings = serde_json::from_str("{}").unwrap();
    assert_eq!(defaults, TurnLimitSettings::default());
    assert_eq!(defaults.limit, None, "the seed's default is no limit");
    let unknown = serde_json::from_str::<TurnLimitSettings>(r#"{"limt": 6}"#).unwrap_err();
    assert!(
        unknown.to_string().contains("unknown field `limt`"),
        "{unknown}"
    );

    let error = TurnLimitSettings {
        limit: None,
        batch: 2.into(),
    }
    .validate()
    .unwrap_err();
    assert_eq!(error, TurnLimitSettingsError::BatchWithoutLimit(2));
    assert!(error.to_string().starts_with("batch:"));
    assert!(
        TurnLimitSettings {
            limit: Some(2),
            batch: 1_000_000.into()
        }
        .validate()
        .is_err()
    );
}

#[test]
fn openclaw_history_limit_is_batched() {
    // OpenClaw 2026.9 `limitHistoryTurns(messages, 4)`: nothing is cut up to ceil(4 × 1.5) = 6
    // user turns; above that it keeps 4 + (turns − 4) mod 3.
    let settings = TurnLimitSettings {
        limit: Some(4),
        batch: TurnBatch::Rule(BatchRule::Half),
    };
    settings.validate().unwrap();
    let kept: Vec<usize> = (1..=13)
        .map(|turns| {
            let (out, _) = limit_turns(conversation(turns), &settings);
            pairing(&out).unwrap();
            assert_eq!(out[0].plain_text(), "be brief", "the prelude stays");
            out.iter().filter(|m| m.role == Role::User).count()
        })
        .collect();
    assert_eq!(kept, vec![1, 2, 3, 4, 5, 6, 4, 5, 6, 4, 5, 6, 4]);
    // A limit of 5 tolerates ceil(7.5) = 8 turns, then drops 4 at once.
    let five = TurnLimitSettings {
        limit: Some(5),
        batch: TurnBatch::Rule(BatchRule::Half),
    };
    let (out, report) = limit_turns(conversation(9), &five);
    assert_eq!(report.turns_dropped, 4);
    assert_eq!(out.iter().filter(|m| m.role == Role::User).count(), 5);
    // The rule parses from TOML and needs no limit to be valid (a preset sets it, a user the
    // limit).
    let parsed: TurnLimitSettings = toml::from_str("batch = \"half\"").unwrap();
    assert_eq!(parsed.batch, TurnBatch::Rule(BatchRule::Half));
    parsed.validate().unwrap();
    let (out, report) = limit_turns(conversation(30), &parsed);
    assert!(report.is_noop());
    assert_eq!(out.len(), 121);
}

#[test]
fn turn_limit_keeps_a_leading_host_summary() {
    // OpenClaw keeps its compactionSummary prelude; any leading non-user/assistant message is
    // prelude.
    let mut messages = conversation(3);
    messages.insert(
        1,
        Message::text(Role::Custom("compactionSummary".into()), "summary"),
    );
    let (out, report) = limit_turns(messages, &limit(1));
    assert_eq!(report.system_messages_kept, 2);
    assert_eq!(out[1].plain_text(), "summary");
    assert_eq!(out[2].plain_text(), "question 2");
}
