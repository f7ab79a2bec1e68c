//! The two-threshold upload planner (seed 002): one named case per transition.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use skald_core::memory::upload::{
    DropReason, IdleReason, UploadDecision, UploadInputs, UploadRange, UploadSettings,
    UploadSettingsError, UploadState, UploadStatus, plan_upload, upload_may_start,
};
use skald_core::memory::write::WriteSettings;
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};

const WINDOW: u64 = 1000;

fn with_id(mut message: Message, id: &str) -> Message {
    message.meta.id = Some(id.to_owned());
    message
}

/// system, then six turns: user `uN`, assistant `aN` (turn 2 also calls a tool: `a2` → `t2`
/// → `b2`).
fn conversation() -> Vec<Message> {
    let mut messages = vec![with_id(
        Message::text(Role::System, "You are helpful."),
        "s0",
    )];
    for turn in 1..=6 {
        messages.push(with_id(
            Message::text(Role::User, format!("question {turn}")),
            &format!("u{turn}"),
        ));
        if turn == 4 {
            let call = ToolCall {
                id: "c4".into(),
                name: "bash".into(),
                arguments: json!({"command": "ls"}),
                arguments_text: None,
                extra: Extra::new(),
            };
            let result = ToolResult {
                call_id: "c4".into(),
                tool_name: Some("bash".into()),
                content: vec![Block::text("a.txt")].into(),
                content_form: ContentForm::Blocks,
                is_error: None,
                details: None,
                extra: Extra::new(),
            };
            messages.push(with_id(
                Message::new(Role::Assistant, vec![Block::ToolCall(call)]),
                "a4",
            ));
            messages.push(with_id(
                Message::new(Role::ToolResult, vec![Block::ToolResult(result)]),
                "t4",
            ));
            messages.push(with_id(Message::text(Role::Assistant, "done"), "b4"));
        } else {
            messages.push(with_id(
                Message::text(Role::Assistant, format!("answer {turn}")),
                &format!("a{turn}"),
            ));
        }
    }
    messages
}

fn plan(messages: &[Message], tokens: u64, state: Option<&UploadState>) -> UploadDecision {
    plan_upload(
        &UploadInputs {
            messages,
            first_uploadable: 1,
            context_tokens: tokens,
            window_tokens: WINDOW,
            state,
        },
        &UploadSettings::default(),
    )
}

fn ids(messages: &[Message], range: std::ops::Range<usize>) -> Vec<&str> {
    messages[range]
        .iter()
        .map(|m| m.meta.id.as_deref().unwrap())
        .collect()
}

fn started(messages: &[Message]) -> UploadRange {
    match plan(messages, 500, None) {
        UploadDecision::StartUpload { range, .. } => range,
        other @ (UploadDecision::DropRange { .. } | UploadDecision::Nothing { .. }) => {
            panic!("{other:?}")
        }
    }
}

fn state(range: UploadRange, status: UploadStatus) -> UploadState {
    UploadState {
        upload_id: "upload-1".into(),
        status,
        range,
    }
}

#[test]
fn below_the_first_threshold_nothing_happens() {
    assert_eq!(
        plan(&conversation(), 499, None),
        UploadDecision::Nothing {
            reason: IdleReason::BelowUploadThreshold
        }
    );
}

#[test]
fn at_half_the_window_an_upload_starts_for_the_older_messages() {
    let messages = conversation();
    let UploadDecision::StartUpload {
        range,
        indices,
        retry_of,
    } = plan(&messages, 500, None)
    else {
        panic!("expected an upload");
    };
    // The last three user turns stay; the system prompt is not part of a range.
    assert_eq!(
        ids(&messages, indices.clone()),
        ["u1", "a1", "u2", "a2", "u3", "a3"]
    );
    assert_eq!(range.first_entry_id, "u1");
    assert_eq!(range.last_entry_id, "a3");
    assert_eq!(range.end_entry_id, "u4");
    assert_eq!(range.messages, 6);
    assert_eq!(retry_of, None);
}

#[test]
fn an_upload_never_splits_a_tool_call_from_its_result() {
    // A user message arrived between a call and its result (a host that appends as things
    // happen): keeping only the last turn would cut between them, so the range ends before the
    // call instead.
    let mut messages = conversation();
    let result_at = messages
        .iter()
        .position(|m| m.meta.id.as_deref() == Some("t4"))
        .unwrap();
    let result = messages.remove(result_at);
    messages.push(with_id(Message::text(Role::User, "question 7"), "u7"));
    messages.push(result);
    messages.push(with_id(Message::text(Role::Assistant, "answer 7"), "a7"));
    let settings = UploadSettings {
        keep_recent_turns: 1,
        ..UploadSettings::default()
    };
    let decision = plan_upload(
        &UploadInputs {
            messages: &messages,
            first_uploadable: 1,
            context_tokens: 600,
            window_tokens: WINDOW,
            state: None,
        },
        &settings,
    );
    let UploadDecision::StartUpload { range, indices, .. } = decision else {
        panic!("{decision:?}");
    };
    assert_eq!(range.end_entry_id, "a4", "{range:?}");
    assert!(!ids(&messages, indices).contains(&"a4"));
}

#[test]
fn while_an_upload_runs_below_the_second_threshold_nothing_happens() {
    let messages = conversation();
    let running = state(started(&messages), UploadStatus::Running);
    assert_eq!(
        plan(&messages, 650, Some(&running)),
        UploadDecision::Nothing {
            reason: IdleReason::UploadRunning
        }
    );
}

#[test]
fn at_the_second_threshold_the_range_leaves_even_while_the_upload_runs() {
    let messages = conversation();
    let running = state(started(&messages), UploadStatus::Running);
    let UploadDecision::DropRange {
        upload_id,
        indices,
        reason,
        ..
    } = plan(&messages, 700, Some(&running))
    else {
        panic!("expected a drop");
    };
    assert_eq!(upload_id, "upload-1");
    assert_eq!(reason, DropReason::ForcedAtDropThreshold);
    assert_eq!(
        ids(&messages, indices),
        ["u1", "a1", "u2", "a2", "u3", "a3"]
    );
}

#[test]
fn a_completed_upload_below_the_second_threshold_drops_only_its_range() {
    let mut messages = conversation();
    let done = state(started(&messages), UploadStatus::Done);
    // Newer messages arrived after the upload started: they are not in its range.
    messages.push(with_id(Message::text(Role::User, "question 7"), "u7"));
    messages.push(with_id(Message::text(Role::Assistant, "answer 7"), "a7"));
    let UploadDecision::DropRange {
        indices, reason, ..
    } = plan(&messages, 550, Some(&done))
    else {
        panic!("expected a drop");
    };
    assert_eq!(reason, DropReason::UploadCompleted);
    assert_eq!(
        ids(&messages, indices.clone()),
        ["u1", "a1", "u2", "a2", "u3", "a3"]
    );
    assert!(indices.end < messages.len() - 2);
}

#[test]
fn a_completed_upload_whose_range_left_allows_the_next_one() {
    let messages = conversation();
    let mut range = started(&messages);
    range.first_entry_id = "gone".into();
    let done = state(range, UploadStatus::Done);
    assert!(matches!(
        plan(&messages, 500, Some(&done)),
        UploadDecision::StartUpload { retry_of: None, .. }
    ));
    assert_eq!(
        plan(&messages, 100, Some(&done)),
        UploadDecision::Nothing {
            reason: IdleReason::BelowUploadThreshold
        }
    );
}

#[test]
fn a_failed_upload_is_started_again_for_the_same_range() {
    let messages = conversation();
    let range = started(&messages);
    let failed = state(range.clone(), UploadStatus::Failed);
    let UploadDecision::StartUpload {
        range: again,
        retry_of,
        ..
    } = plan(&messages, 520, Some(&failed))
    else {
        panic!("expected a retry");
    };
    assert_eq!(again, range);
    assert_eq!(retry_of.as_deref(), Some("upload-1"));
    // At the second threshold the range leaves anyway: the failure stays recorded.
    assert!(matches!(
        plan(&messages, 800, Some(&failed)),
        UploadDecision::DropRange {
            reason: DropReason::ForcedAtDropThreshold,
            ..
        }
    ));
}

#[test]
fn nothing_to_upload_when_only_recent_turns_are_there() {
    let messages: Vec<Message> = conversation().into_iter().take(5).collect();
    assert_eq!(
        plan(&messages, 900, None),
        UploadDecision::Nothing {
            reason: IdleReason::NothingToUpload
        }
    );
}

#[test]
fn settings_are_validated_and_read_from_toml() {
    assert!(UploadSettings::default().validate().is_ok());
    let inverted = UploadSettings {
        upload_ratio: 0.7,
        drop_ratio: 0.5,
        ..UploadSettings::default()
    };
    assert!(matches!(
        inverted.validate(),
        Err(UploadSettingsError::Ratios { .. })
    ));
    let nan = UploadSettings {
        upload_ratio: f64::NAN,
        ..UploadSettings::default()
    };
    assert!(nan.validate().is_err());

    let settings: WriteSettings =
        toml::from_str("user = \"alice\"\n[upload]\nupload_ratio = 0.4\ndrop_ratio = 0.8\n")
            .unwrap();
    assert_eq!(settings.user, "alice");
    assert_eq!(settings.upload.upload_ratio, 0.4);
    assert!(settings.validate().is_ok());
    assert!(toml::from_str::<WriteSettings>("usr = \"alice\"").is_err());
    let bad_user = WriteSettings {
        user: "a/b".into(),
        ..WriteSettings::default()
    };
    assert!(bad_user.validate().is_err());
}

#[test]
fn the_quick_check_agrees_with_the_planner_with_nothing_on_record() {
    let settings = UploadSettings::default();
    let messages = conversation();
    for tokens in [0, 499, 500, 501, 699, 700, 1000, 5000] {
        let may = upload_may_start(tokens, WINDOW, &settings);
        let planned = plan(&messages, tokens, None);
        let idle_below = matches!(
            planned,
            UploadDecision::Nothing {
                reason: IdleReason::BelowUploadThreshold
            }
        );
        assert_eq!(may, !idle_below, "at {tokens} tokens: {planned:?}");
    }
    assert!(!upload_may_start(900, 0, &settings));
    let off = UploadSettings {
        enabled: false,
        ..UploadSettings::default()
    };
    assert!(!upload_may_start(900, WINDOW, &off));
}
