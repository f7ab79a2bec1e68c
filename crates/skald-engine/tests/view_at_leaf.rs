//! `Engine::view_at_leaf`: the view of a session as it was at an earlier entry (or on another
//! branch) is built by the same code as the view of its leaf, and changes nothing stored.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Message, Role};
use skald_core::pipeline::policy::Policy;
use skald_engine::{Engine, EngineConfig, EngineError, ViewOptions};
use skald_store::sessions::SessionError;

fn tenant() -> Tenant {
    Tenant::parse("acme").unwrap()
}

fn session() -> SessionId {
    SessionId::parse("branches").unwrap()
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(Message::plain_text).collect()
}

async fn seeded() -> Engine {
    let engine = Engine::in_memory(EngineConfig::new(Policy::preset("sccs").unwrap())).unwrap();
    let conversation = vec![
        Message::text(Role::User, "first question"),
        Message::text(Role::Assistant, "first answer"),
        Message::text(Role::User, "second question"),
        Message::text(Role::Assistant, "second answer"),
    ];
    engine
        .ingest(&tenant(), &session(), conversation)
        .await
        .unwrap();
    engine
}

#[tokio::test]
async fn the_view_at_an_earlier_entry_holds_the_path_to_it_and_nothing_stored_moves() {
    let engine = seeded().await;
    let stored = engine.load_session(&tenant(), &session()).unwrap();
    let first_answer = stored
        .entries()
        .iter()
        .find(|entry| {
            entry
                .kind
                .as_message()
                .is_some_and(|message| message.plain_text() == "first answer")
        })
        .unwrap()
        .id
        .clone();
    let leaf_before = engine.session_info(&tenant(), &session()).unwrap().leaf_id;

    let earlier = engine
        .view_at_leaf(&tenant(), &session(), &first_answer, ViewOptions::default())
        .await
        .unwrap();
    assert_eq!(
        texts(&earlier.view.messages),
        ["first question", "first answer"]
    );

    let now = engine
        .view(&tenant(), &session(), ViewOptions::default())
        .await
        .unwrap();
    assert_eq!(
        texts(&now.view.messages),
        [
            "first question",
            "first answer",
            "second question",
            "second answer"
        ]
    );
    let info = engine.session_info(&tenant(), &session()).unwrap();
    assert_eq!(info.leaf_id, leaf_before, "the stored leaf did not move");
    assert_eq!(info.entry_count, stored.entries().len() as u64);
}

#[tokio::test]
async fn a_leaf_the_session_does_not_hold_is_named_in_the_error() {
    let engine = seeded().await;
    let error = engine
        .view_at_leaf(&tenant(), &session(), "deadbeef", ViewOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            &error,
            EngineError::Session(SessionError::UnknownEntry { id, .. }) if id == "deadbeef"
        ),
        "{error:?}"
    );
}
