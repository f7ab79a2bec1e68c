//! The deterministic memory extractor: one named case per kind of memory, and the negatives
//! (questions, hypotheticals, tool output, remarks about the conversation).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use skald_core::memory::extract::{
    CandidateAction, ExtractSettings, ExtractionKind, MemoryCandidate, extract_memories, slug,
};
use skald_core::memory::uri::MemoryCategory;
use skald_core::message::{
    Block, ContentForm, Extra, Message, Role, Timestamp, ToolCall, ToolResult,
};

/// 2026-03-14T10:00:00Z, a Saturday.
const SAID_AT: i64 = 1_773_482_400_000;

fn user(id: &str, text: &str) -> Message {
    let mut message = Message::text(Role::User, text);
    message.meta.id = Some(id.to_owned());
    message.meta.timestamp = Some(Timestamp::Millis(SAID_AT));
    message
}

fn assistant(id: &str, text: &str) -> Message {
    let mut message = Message::text(Role::Assistant, text);
    message.meta.id = Some(id.to_owned());
    message
}

fn extract(messages: &[Message]) -> Vec<MemoryCandidate> {
    extract_memories(messages, &ExtractSettings::default())
}

fn only(messages: &[Message]) -> MemoryCandidate {
    let found = extract(messages);
    assert_eq!(found.len(), 1, "{found:#?}");
    found.into_iter().next().unwrap()
}

#[test]
fn explicit_remember_request_becomes_a_memory_with_its_source() {
    let found = only(&[user(
        "u1",
        "Please remember that I like dark mode in every editor.",
    )]);
    assert_eq!(found.kind, ExtractionKind::Remember);
    assert_eq!(found.category, MemoryCategory::Preferences);
    assert_eq!(found.action, CandidateAction::Add);
    assert_eq!(
        found.content,
        "The user asked to remember: I like dark mode in every editor."
    );
    assert_eq!(found.source_entry_ids, ["u1"]);
    assert_eq!(found.created_at_ms, Some(SAID_AT));
    assert_eq!(
        found.uri("alice", "main").unwrap().as_str(),
        "viking://user/alice/memories/preferences/like-dark-mode-every-editor.md"
    );
}

#[test]
fn dont_forget_and_a_polite_question_form_are_requests() {
    let found = extract(&[
        user(
            "u1",
            "Don't forget the staging database is db-staging:5432.",
        ),
        user("u2", "Could you remember that project Apollo is on hold?"),
    ]);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!(found[0].category, MemoryCategory::Entities);
    assert!(found[0].content.contains("db-staging:5432"));
    assert!(found[1].content.contains("Project Apollo is on hold"));
}

#[test]
fn chinese_remember_request() {
    let found = only(&[user("u1", "记住我喜欢深色模式。")]);
    assert_eq!(found.kind, ExtractionKind::Remember);
    assert_eq!(found.category, MemoryCategory::Preferences);
    assert!(found.content.contains("我喜欢深色模式"));
}

#[test]
fn assistant_confirmation_is_a_source_and_fills_a_bare_request() {
    let found = only(&[
        user("u1", "We deploy from the release branch. Remember this."),
        assistant(
            "a1",
            "Got it — I'll remember that deploys go out from the release branch.",
        ),
    ]);
    assert_eq!(found.source_entry_ids, ["u1", "a1"]);
    assert_eq!(
        found.content,
        "The user asked to remember: Deploys go out from the release branch."
    );
}

#[test]
fn advice_to_the_listener_is_not_a_request_but_a_standing_rule_is() {
    assert!(extract(&[user("u1", "Remember to stay positive and motivate others.")]).is_empty());
    let rule = only(&[user(
        "u2",
        "Remember to always run cargo fmt before a commit.",
    )]);
    assert_eq!(rule.kind, ExtractionKind::Remember);
}

#[test]
fn assistant_text_alone_is_never_a_memory() {
    assert!(
        extract(&[assistant(
            "a1",
            "I prefer tabs. I'll remember that you like Rust."
        )])
        .is_empty()
    );
}

#[test]
fn stated_preference_uses_its_topic_as_the_name() {
    let found = only(&[user(
        "u1",
        "I always use tabs over spaces, because they are easier.",
    )]);
    assert_eq!(found.kind, ExtractionKind::Preference);
    assert_eq!(found.category, MemoryCategory::Preferences);
    assert_eq!(found.name, "tabs-spaces");
    assert_eq!(
        found.content,
        "User preference: I always use tabs over spaces, because they are easier."
    );
}

#[test]
fn a_changed_preference_lands_on_the_same_name() {
    let first = only(&[user("u1", "I like dark mode.")]);
    let later = only(&[user("u9", "I hate dark mode.")]);
    assert_eq!(first.name, later.name);
}

#[test]
fn favourite_things_are_named_by_what_they_are() {
    let found = only(&[user("u1", "My favourite editor is Helix.")]);
    assert_eq!(found.name, "favorite-editor");
    assert!(found.content.ends_with("My favourite editor is Helix."));
    let zh = only(&[user("u2", "我最喜欢的编辑器是Helix")]);
    assert_eq!(zh.category, MemoryCategory::Preferences);
}

#[test]
fn dated_event_with_a_relative_date_is_resolved_against_the_message_time() {
    let found = only(&[user(
        "u1",
        "Yesterday I finally shipped the billing migration.",
    )]);
    assert_eq!(found.kind, ExtractionKind::Event);
    assert_eq!(found.category, MemoryCategory::Events);
    assert!(found.name.starts_with("2026/03/13/"), "{}", found.name);
    assert_eq!(
        found.content,
        "On 2026-03-13 (\"Yesterday\", said on 2026-03-14): Yesterday I finally shipped the billing migration."
    );
    assert!(
        found
            .uri("alice", "main")
            .unwrap()
            .as_str()
            .starts_with("viking://user/alice/memories/events/2026/03/13/")
    );
}

#[test]
fn dated_event_with_weekdays_counts_and_explicit_dates() {
    let next = only(&[user("u1", "I have a dentist appointment next Friday.")]);
    assert!(
        next.content.starts_with("On 2026-03-20 "),
        "{}",
        next.content
    );
    let ago = only(&[user("u2", "We moved the office 3 days ago.")]);
    assert!(ago.content.starts_with("On 2026-03-11 "), "{}", ago.content);
    let explicit = only(&[user("u3", "My sister's wedding is on 8 May 2027.")]);
    assert!(
        explicit.content.starts_with("On 2027-05-08: "),
        "{}",
        explicit.content
    );
    let chinese = only(&[user("u4", "我昨天去了北京出差")]);
    assert!(
        chinese.content.starts_with("On 2026-03-13 "),
        "{}",
        chinese.content
    );
}

#[test]
fn relative_date_without_a_timestamp_is_not_guessed() {
    let mut message = user("u1", "Yesterday I finally shipped the billing migration.");
    message.meta.timestamp = None;
    assert!(extract(&[message]).is_empty());
}

#[test]
fn an_instruction_mentioning_a_date_is_not_an_event() {
    assert!(extract(&[user("u1", "Fix the parser logs from 2026-03-10.")]).is_empty());
}

#[test]
fn named_people_with_their_relation() {
    let found = only(&[user(
        "u1",
        "My sister Alice lives in Lyon and works as a nurse.",
    )]);
    assert_eq!(found.kind, ExtractionKind::Entity);
    assert_eq!(found.category, MemoryCategory::Entities);
    assert_eq!(found.name, "alice");
    assert_eq!(
        found.content,
        "Alice: the user's sister. My sister Alice lives in Lyon and works as a nurse."
    );
    let reverse = only(&[user("u2", "Bob Stone is my manager at work.")]);
    assert_eq!(reverse.name, "bob-stone");
}

#[test]
fn projects_and_places() {
    let project = only(&[user("u1", "Project Apollo moved to the new cluster.")]);
    assert_eq!(project.name, "project-apollo");
    assert_eq!(
        project.content,
        "Project Apollo: Project Apollo moved to the new cluster."
    );
    let suffix = only(&[user("u3", "I'm leading the Apollo project at work now.")]);
    assert_eq!(suffix.name, "project-apollo");
    let home = only(&[user("u2", "I live in Berlin with two cats.")]);
    assert_eq!(home.category, MemoryCategory::Profile);
    assert_eq!(home.name, "location");
}

#[test]
fn the_word_project_in_a_plan_or_at_a_sentence_start_names_no_project() {
    // Seen in a real Claude Code session: a pasted task plan became "Project Add", "Project
    // Close", "Project Launch" and "Project The".
    let found = extract(&[user(
        "u1",
        "Tasks:\n- gqc.5: Add project-level review page (depends on gqc.4).\n\
         - gqc.6: Close project review session (depends on gqc.4, gqc.5).\n\
         - gqc.7: Launch project review conversation (depends on gqc.5).\n\
         The project had no existing LiveView tests at all.",
    )]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn statements_about_the_same_entity_are_one_candidate() {
    let found = extract(&[
        user("u1", "My sister Alice lives in Lyon."),
        user("u2", "My sister Alice just got a new job."),
    ]);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].source_entry_ids, ["u1", "u2"]);
    assert!(found[0].content.contains("new job"));
    assert!(found[0].content.contains("Lyon"));
}

#[test]
fn questions_are_not_memories() {
    assert!(
        extract(&[
            user("u1", "Do I prefer tabs?"),
            user("u2", "What did I do yesterday?"),
            user("u3", "is my sister Alice coming"),
        ])
        .is_empty()
    );
}

#[test]
fn hypotheticals_are_not_memories() {
    assert!(
        extract(&[
            user("u1", "If I liked dark mode, would that change anything."),
            user("u2", "Suppose I moved to Berlin tomorrow."),
            user("u3", "如果我喜欢深色模式"),
        ])
        .is_empty()
    );
}

#[test]
fn remarks_about_the_conversation_are_not_preferences() {
    assert!(
        extract(&[
            user("u1", "I like that idea."),
            user("u2", "I love how you fixed it."),
            user("u3", "I never said that."),
        ])
        .is_empty()
    );
}

#[test]
fn tool_output_is_never_a_source() {
    let call = ToolCall {
        id: "c1".into(),
        name: "read_file".into(),
        arguments: json!({"path": "notes.md"}),
        arguments_text: None,
        extra: Extra::new(),
    };
    let result = ToolResult {
        call_id: "c1".into(),
        tool_name: Some("read_file".into()),
        content: vec![Block::text(
            "Remember that I like dark mode. My sister Alice lives in Lyon. I prefer tabs.",
        )]
        .into(),
        content_form: ContentForm::Blocks,
        is_error: None,
        details: None,
        extra: Extra::new(),
    };
    let messages = vec![
        user("u1", "read notes.md"),
        Message::new(Role::Assistant, vec![Block::ToolCall(call)]),
        Message::new(Role::ToolResult, vec![Block::ToolResult(result)]),
    ];
    assert!(extract(&messages).is_empty());
}

#[test]
fn injected_blocks_in_user_text_are_not_sources() {
    let text =
        "<relevant-memories>\nRemember that I like dark mode.\n</relevant-memories>\nok go on";
    assert!(extract(&[user("u1", text)]).is_empty());
}

#[test]
fn the_number_of_candidates_is_capped() {
    let messages: Vec<Message> = (0..10)
        .map(|i| {
            user(
                &format!("u{i}"),
                &format!("Remember that code {i} means stop{i}."),
            )
        })
        .collect();
    let found = extract_memories(&messages, &ExtractSettings { max_candidates: 3 });
    assert_eq!(found.len(), 3);
    assert!(found[0].content.contains("Code 0"));
}

#[test]
fn slugs_are_stable_uri_segments() {
    assert_eq!(slug("The Dark Mode, in VS Code!"), "dark-mode-vs-code");
    assert_eq!(slug("it"), "it");
    assert_eq!(slug("深色模式"), "深色模式");
    assert_eq!(slug("?!"), "");
}
