//! `context_appended`: what a session's context gained since an earlier leaf, for a reader that
//! holds the earlier context (the engine's per-session cache) and extends it instead of
//! rebuilding it. Over random sessions of messages, custom messages, branch summaries,
//! compactions, resets and leaf moves, whenever it answers, the earlier context followed by its
//! answer is the context rebuilt from the new leaf.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use skald_core::message::{Block, ContentForm, Message, Role};
use skald_core::session::{EntryKind, Session, SessionHeader, context_appended, session_context};

/// One step of a random session's life.
#[derive(Debug, Clone)]
enum Step {
    User(u8),
    Assistant(u8),
    CustomMessage(u8),
    BranchSummary(u8),
    /// A compaction keeping from the `n`-th entry of the path back (0: none kept).
    Compaction(u8),
    Reset(u8),
    /// The leaf moves back `n` entries along the path (a new branch starts there).
    Back(u8),
    /// A system message (pinned in front of a later compaction's summary).
    System(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => any::<u8>().prop_map(Step::User),
        6 => any::<u8>().prop_map(Step::Assistant),
        1 => any::<u8>().prop_map(Step::CustomMessage),
        1 => any::<u8>().prop_map(Step::BranchSummary),
        1 => any::<u8>().prop_map(Step::Compaction),
        1 => any::<u8>().prop_map(Step::Reset),
        1 => any::<u8>().prop_map(Step::Back),
        1 => any::<u8>().prop_map(Step::System),
    ]
}

/// Applies `step` to `session`; `next` numbers the entries.
fn apply(session: &mut Session, step: &Step, next: &mut u32) {
    let id = format!("{:08x}", *next);
    *next += 1;
    let path: Vec<String> = session
        .path_to(None)
        .iter()
        .map(|entry| entry.id.clone())
        .collect();
    let back_from = |n: u8| -> Option<String> {
        let n = usize::from(n) % (path.len() + 1);
        (n > 0).then(|| path.get(path.len() - n).cloned()).flatten()
    };
    let kind = match step {
        Step::User(n) => EntryKind::Message(Message::text(Role::User, format!("user {n} {id}"))),
        Step::Assistant(n) => EntryKind::Message(Message::text(
            Role::Assistant,
            format!("assistant {n} {id}"),
        )),
        Step::System(n) => {
            EntryKind::Message(Message::text(Role::System, format!("system {n} {id}")))
        }
        Step::CustomMessage(n) => EntryKind::CustomMessage {
            custom_type: "test".into(),
            content: vec![Block::text(format!("custom {n}"))],
            content_form: ContentForm::Blocks,
            display: Some(true),
            details: None,
        },
        Step::BranchSummary(n) => EntryKind::BranchSummary {
            from_id: path.last().cloned().unwrap_or_default(),
            summary: format!("branch {n}"),
            details: None,
            from_hook: None,
        },
        Step::Compaction(n) => EntryKind::Compaction {
            summary: format!("summary {n}"),
            first_kept_entry_id: back_from(*n),
            tokens_before: None,
            details: None,
            from_hook: None,
        },
        Step::Reset(n) => EntryKind::Reset {
            reason: Some("reset".into()),
            first_kept_entry_id: back_from(*n),
        },
        Step::Back(n) => {
            let leaf = back_from(n.saturating_add(1));
            session.set_leaf(leaf.as_deref()).unwrap();
            return;
        }
    };
    session.append(&id, "2026-12-03T00:00:00Z", kind).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_earlier_context_and_what_was_appended_are_the_rebuilt_context(
        before in proptest::collection::vec(step(), 0..24),
        after in proptest::collection::vec(step(), 0..12),
    ) {
        let mut session = Session::new(SessionHeader::default());
        let mut next = 0;
        for step in &before {
            apply(&mut session, step, &mut next);
        }
        let Some(since) = session.path_to(None).last().map(|entry| entry.id.clone()) else {
            return Ok(());
        };
        let held = session_context(&session, Some(&since));
        for step in &after {
            apply(&mut session, step, &mut next);
        }
        let rebuilt = session_context(&session, None);
        if let Some(appended) = context_appended(&session, &since, None) {
            let mut extended = held.clone();
            extended.extend(appended);
            prop_assert_eq!(extended, rebuilt);
        }
    }
}

#[test]
fn plain_appends_extend_and_a_new_compaction_or_another_branch_rebuilds() {
    let mut session = Session::new(SessionHeader::default());
    let mut next = 0;
    for step in [Step::User(1), Step::Assistant(2), Step::User(3)] {
        apply(&mut session, &step, &mut next);
    }
    let since = session.path_to(None).last().unwrap().id.clone();
    apply(&mut session, &Step::Assistant(4), &mut next);
    let appended = context_appended(&session, &since, None).expect("a plain append extends");
    assert_eq!(appended.len(), 1);
    assert!(appended[0].plain_text().starts_with("assistant 4"));

    apply(&mut session, &Step::Compaction(1), &mut next);
    assert_eq!(
        context_appended(&session, &since, None),
        None,
        "a compaction rebuilds"
    );

    let mut branched = Session::new(SessionHeader::default());
    let mut next = 0;
    for step in [Step::User(1), Step::Assistant(2), Step::User(3)] {
        apply(&mut branched, &step, &mut next);
    }
    let since = branched.path_to(None).last().unwrap().id.clone();
    apply(&mut branched, &Step::Back(1), &mut next);
    apply(&mut branched, &Step::User(5), &mut next);
    assert_eq!(
        context_appended(&branched, &since, None),
        None,
        "another branch rebuilds"
    );
}
