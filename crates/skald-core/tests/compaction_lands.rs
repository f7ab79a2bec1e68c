//! Compaction lands when it can (issue 16): the ask check skips continuations, the extractive
//! summary carries the latest substantive ask, huge kept turns are offloaded and cut to fit
//! `window − reserve`, a compaction that cannot fit is typed, and the refs the summarised span
//! names are listed as exact identifiers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use skald_core::compaction::*;
use skald_core::extractive::{ExtractiveInput, summarize};
use skald_core::message::{Message, Role};
use skald_core::refs::{RefPayload, placeholder, ref_ids_in};
use skald_core::summary::REQUIRED_SECTIONS;

fn user(text: &str) -> Message {
    Message::text(Role::User, text)
}

fn assistant(text: &str) -> Message {
    Message::text(Role::Assistant, text)
}

fn manual(messages: &[Message], window: u64) -> CompactionPlan {
    plan_compaction(
        messages,
        window,
        &CompactionSettings::default(),
        CompactionTrigger::Manual,
        &CompactionInputs::default(),
    )
    .unwrap()
}

/// Runs `plan` with the extractive summarizer, fed as the engine feeds it.
fn run_extractive(plan: CompactionPlan) -> CompactionOutcome {
    let mut run = CompactionRun::new(plan);
    while let Some(request) = run.next_request() {
        let input = ExtractiveInput {
            previous_summary: request.previous_summary.clone(),
            identifiers: request.identifiers.clone(),
            max_chars: usize::try_from(request.max_output_tokens * 4).unwrap(),
            latest_ask: request.latest_user_ask.clone(),
            ..ExtractiveInput::default()
        };
        run.record(Ok(summarize(&request.messages, &input)));
    }
    run.finish()
}

/// A dev session: an ask, long tool-free work on it, then the turns the issue reproduces with.
fn dev_session_then(turns: &[&str]) -> Vec<Message> {
    let mut messages = vec![user(
        "Migrate the billing service to Postgres and keep the invoice ids stable.",
    )];
    for step in 0..30 {
        messages.push(assistant(&format!(
            "Step {step}: ported table {step}. {}",
            "Details of the port. ".repeat(400)
        )));
        messages.push(user("continue"));
    }
    for turn in turns {
        messages.push(user(turn));
        messages.push(assistant(&format!("Working on it: {turn}.")));
    }
    messages
}

#[test]
fn continuation_asks_are_skipped_by_the_ask_check() {
    let messages = dev_session_then(&[
        "continue",
        "run the tests again",
        "what failed?",
        "fix it and commit",
    ]);
    let plan = manual(&messages, 200_000);
    // The span ends with "continue": the ask it continues is the one checked.
    assert_eq!(
        plan.latest_user_ask.as_deref(),
        Some("Migrate the billing service to Postgres and keep the invoice ids stable.")
    );
    let outcome = run_extractive(plan);
    assert_eq!(outcome.name(), "compacted", "{}", outcome.describe());
    // Chinese continuations too.
    let messages = vec![
        user("请把登录模块迁移到新的数据库"),
        assistant(&"已迁移部分表。".repeat(2_000)),
        user("继续"),
        assistant(&"继续迁移。".repeat(2_000)),
        user("好的"),
        assistant("好的。"),
        user("a"),
        assistant("b"),
        user("c"),
        assistant("d"),
    ];
    let plan = manual(&messages, 200_000);
    assert_eq!(
        plan.latest_user_ask.as_deref(),
        Some("请把登录模块迁移到新的数据库")
    );
}

#[test]
fn extractive_summary_carries_the_latest_substantive_ask() {
    let messages = dev_session_then(&["run the tests again", "what failed?", "fix it"]);
    let outcome = run_extractive(manual(&messages, 200_000));
    let CompactionOutcome::Compacted { summary, .. } = &outcome else {
        panic!("{}", outcome.describe());
    };
    let asks = summary
        .split("## Pending user asks")
        .nth(1)
        .and_then(|rest| rest.split("## Exact identifiers").next())
        .unwrap();
    assert!(
        asks.contains("Migrate the billing service to Postgres"),
        "{asks}"
    );
    assert!(!asks.contains("\"continue\""), "{asks}");
    // Handed over by the caller (a merge sees only partial summaries), it is quoted too.
    let partial = summarize(
        &[user(&REQUIRED_SECTIONS.join("\n- (none)\n"))],
        &ExtractiveInput {
            latest_ask: Some("Rotate the staging keys".to_owned()),
            ..ExtractiveInput::default()
        },
    );
    assert!(partial.contains("\"Rotate the staging keys\""), "{partial}");
}

#[test]
fn huge_kept_turns_are_offloaded_and_cut_to_fit() {
    // The kept turns: a harness's own summary, a task notification and a huge answer, each far
    // larger than the window leaves.
    let mut messages = dev_session_then(&[]);
    let mut harness_summary = user(&format!(
        "Summary of earlier work: {}",
        "x ".repeat(150_000)
    ));
    harness_summary
        .extra
        .insert("isCompactSummary".into(), serde_json::Value::Bool(true));
    messages.push(harness_summary);
    messages.push(user("Check the export job."));
    messages.push(user(&format!(
        "<task-notification>\n<status>completed</status>\n</task-notification>\n{}",
        "output ".repeat(40_000)
    )));
    // The latest assistant step, which every compaction keeps, is itself huge.
    messages.push(assistant(&"Export log line.\n".repeat(30_000)));
    let window = 100_000;
    let plan = manual(&messages, window);
    let threshold = plan.threshold_tokens;
    assert!(plan.tokens_before > 2 * threshold);
    let truncation = plan.tail_truncation.clone().unwrap();
    assert!(truncation.middle_cuts >= 1, "{}", truncation.middle_cuts);
    let outcome = run_extractive(plan);
    assert_eq!(outcome.name(), "compacted", "{}", outcome.describe());
    assert!(outcome.tokens_after() <= threshold);
    // Nothing is lost: every marker names a ref whose original is handed back to store.
    let context = compacted_context(&messages, &outcome).unwrap();
    let named: Vec<_> = context
        .iter()
        .skip(1)
        .flat_map(|message| ref_ids_in(&message.plain_text()))
        .collect();
    assert!(!named.is_empty());
    for id in &named {
        assert!(truncation.new_refs.iter().any(|new_ref| &new_ref.id == id));
    }
}

#[test]
fn compaction_that_cannot_fit_is_typed() {
    // A pinned system prompt larger than window − reserve: nothing a compaction may touch.
    let mut messages = vec![Message::text(Role::System, "rule ".repeat(120_000))];
    messages.extend(dev_session_then(&["a", "b", "c"]));
    let outcome = run_extractive(manual(&messages, 128_000));
    assert_eq!(outcome.name(), "compacted_over_target");
    assert!(outcome.is_compacted());
    let CompactionOutcome::Compacted {
        over_target: Some(over),
        ..
    } = &outcome
    else {
        panic!("{}", outcome.describe());
    };
    assert_eq!(over.target_tokens, 108_000);
    assert!(over.tokens_after > over.target_tokens);
    assert!(over.fixed_tokens > over.target_tokens);
    assert!(outcome.describe().contains("over window − reserve"));
}

#[test]
fn offloaded_ref_ids_listed_as_exact_identifiers() {
    let ids: Vec<String> = (0..3)
        .map(|n| {
            RefPayload::new(vec![skald_core::message::Block::text(format!(
                "output {n}"
            ))])
            .id()
            .to_string()
        })
        .collect();
    let mut messages = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        messages.push(user(&format!("Look at output {n}.")));
        messages.push(assistant(&format!(
            "It was offloaded: {} {}",
            placeholder(&skald_core::refs::RefId::parse(id).unwrap(), "a log"),
            "padding ".repeat(3_000)
        )));
    }
    messages.extend(dev_session_then(&["a", "b", "c"]).into_iter().skip(1));
    let plan = manual(&messages, 200_000);
    assert_eq!(plan.offloaded_refs, ids);
    let outcome = run_extractive(plan);
    let CompactionOutcome::Compacted {
        summary, details, ..
    } = &outcome
    else {
        panic!("{}", outcome.describe());
    };
    let section = summary
        .split("## Exact identifiers")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    for id in &ids {
        assert!(section.contains(id.as_str()), "{id} missing:\n{section}");
    }
    assert_eq!(details.offloaded_refs, ids);
}
