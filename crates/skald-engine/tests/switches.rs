//! A session's switches (`Engine::set_switches`): a paused offload leaves every output whole and
//! the assemble report says so; a paused compaction is skipped — asked for, over a budget — with
//! the reason `paused` and nothing written; unpausing brings both back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use skald_core::compaction::{
    CompactionOutcome, CompactionSettings, CompactionTrigger, SkipReason,
};
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::Message;
use skald_core::pipeline::policy::Policy;
use skald_engine::{AssembleInput, CompactInput, Engine, EngineConfig, EngineError};
use skald_store::sessions::{SessionError, SessionSwitches};
use tokio_util::sync::CancellationToken;

mod build_logs;
use build_logs::build_log_conversation;

const LOG_LINE: &str = "compiling module skald_switches ... ok\n";

fn tenant(name: &str) -> Tenant {
    Tenant::parse(name).unwrap()
}

fn session(id: &str) -> SessionId {
    SessionId::parse(id).unwrap()
}

/// Six turns, each a command with a large output.
fn conversation() -> Vec<Message> {
    build_log_conversation(6, LOG_LINE)
}

fn engine() -> Engine {
    let mut config = EngineConfig::new(Policy::preset("sccs").unwrap());
    config.compaction = CompactionSettings {
        reserve_tokens: 2_000,
        ..CompactionSettings::default()
    };
    config.window_tokens = 32_000;
    Engine::in_memory(config).unwrap()
}

async fn seeded(engine: &Engine, id: &str) -> SessionId {
    let id = session(id);
    engine
        .ingest(&tenant("acme"), &id, conversation())
        .await
        .unwrap();
    id
}

fn whole_outputs(messages: &[Message]) -> usize {
    skald_core::render::render_messages(messages)
        .matches(&LOG_LINE.repeat(200))
        .count()
}

fn manual() -> CompactInput {
    CompactInput {
        window_tokens: None,
        trigger: CompactionTrigger::Manual,
        custom_instructions: None,
        agents_md: None,
        context_tokens: None,
        archive: false,
    }
}

#[tokio::test]
async fn a_paused_offload_leaves_every_output_whole_and_the_report_says_so() {
    let engine = engine();
    let id = seeded(&engine, "paused-offload").await;
    let paused = SessionSwitches {
        pause_compaction: false,
        pause_offload: true,
    };
    let info = engine
        .set_switches(&tenant("acme"), &id, paused)
        .await
        .unwrap();
    assert_eq!(info.switches, paused);

    let assembly = engine
        .assemble(&tenant("acme"), &id, AssembleInput::default())
        .await
        .unwrap();
    let report = &assembly.view.view.report;
    assert!(report.switches.pause_offload, "the report names the pause");
    assert!(
        report.offload.offloaded.is_empty(),
        "nothing is offloaded while paused: {:?}",
        report.offload.offloaded
    );
    assert_eq!(whole_outputs(&assembly.view.view.messages), 6);

    engine
        .set_switches(&tenant("acme"), &id, SessionSwitches::default())
        .await
        .unwrap();
    let assembly = engine
        .assemble(&tenant("acme"), &id, AssembleInput::default())
        .await
        .unwrap();
    let report = &assembly.view.view.report;
    assert!(!report.switches.pause_offload);
    assert!(
        !report.offload.offloaded.is_empty(),
        "unpaused, the policy offloads again"
    );
    assert!(whole_outputs(&assembly.view.view.messages) < 6);
}

#[tokio::test]
async fn a_paused_compaction_is_skipped_with_its_reason_and_writes_nothing() {
    let engine = engine();
    let id = seeded(&engine, "paused-compaction").await;
    engine
        .set_switches(
            &tenant("acme"),
            &id,
            // Offload paused too, so the view is over the budget below.
            SessionSwitches {
                pause_compaction: true,
                pause_offload: true,
            },
        )
        .await
        .unwrap();
    let before = engine.session_info(&tenant("acme"), &id).unwrap();

    let asked = engine
        .compact(&tenant("acme"), &id, &manual(), &CancellationToken::new())
        .await
        .unwrap();
    assert!(
        matches!(
            asked.result.outcome,
            CompactionOutcome::Skipped {
                reason: SkipReason::Paused,
                tokens_before
            } if tokens_before > 0
        ),
        "{:?}",
        asked.result.outcome
    );

    // Over the host's budget, assemble would compact; paused, it says why it did not.
    let input = AssembleInput {
        budget_tokens: Some(1_000),
        ..AssembleInput::default()
    };
    let assembly = engine.assemble(&tenant("acme"), &id, input).await.unwrap();
    let fit = assembly
        .fit_to_budget
        .expect("the view was over the budget");
    let outcome = &fit.compaction.as_ref().unwrap().result.outcome;
    assert!(
        matches!(
            outcome,
            CompactionOutcome::Skipped {
                reason: SkipReason::Paused,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(
        SkipReason::Paused.describe(),
        "compaction is paused for this session"
    );
    let after = engine.session_info(&tenant("acme"), &id).unwrap();
    assert_eq!(
        (after.entry_count, after.leaf_id.clone()),
        (before.entry_count, before.leaf_id.clone()),
        "a paused compaction writes nothing"
    );

    engine
        .set_switches(&tenant("acme"), &id, SessionSwitches::default())
        .await
        .unwrap();
    let unpaused = engine
        .compact(&tenant("acme"), &id, &manual(), &CancellationToken::new())
        .await
        .unwrap();
    assert!(
        unpaused.result.outcome.is_compacted(),
        "{:?}",
        unpaused.result.outcome
    );
}

#[tokio::test]
async fn switches_of_a_missing_or_foreign_session_are_not_found() {
    let engine = engine();
    let id = seeded(&engine, "mine").await;
    let paused = SessionSwitches {
        pause_compaction: true,
        pause_offload: true,
    };
    for (who, which) in [("acme", "missing"), ("other", "mine")] {
        let refused = engine
            .set_switches(&tenant(who), &session(which), paused)
            .await;
        assert!(
            matches!(
                refused,
                Err(EngineError::Session(SessionError::NotFound { .. }))
            ),
            "{who}/{which}: {refused:?}"
        );
    }
    assert_eq!(
        engine.session_info(&tenant("acme"), &id).unwrap().switches,
        SessionSwitches::default()
    );
}
