//! `Engine::call_timeline`: each assistant message of the active path is a call with its
//! reported usage, its cost at the configured prices and the raw history before it; compactions
//! sit between the calls with their trigger and sizes; pages come newest first; an answer to a
//! request skald assembled carries what the pipeline did on it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use skald_core::compaction::{CompactionSettings, CompactionTrigger};
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Message, Role, Usage};
use skald_core::pipeline::policy::Policy;
use skald_core::tokens::estimate_message_tokens;
use skald_engine::TurnAnchors;
use skald_engine::timeline::{CallRecord, TimelineEvent};
use skald_engine::{AssembleInput, CompactInput, Engine, EngineConfig, Pricing};
use tokio_util::sync::CancellationToken;

fn answer(turn: u64) -> Message {
    let mut message = Message::text(
        Role::Assistant,
        format!("Answer {turn}: {}", "the build is green. ".repeat(200)),
    );
    message.meta.usage = Some(Usage {
        input: 100 + turn,
        output: 50,
        cache_read: 1_000 * turn,
        cache_write: 10,
        cache_write_1h: 0,
    });
    message.meta.model = Some("claude-test".to_owned());
    message
}

fn conversation(turns: u64) -> Vec<Message> {
    let mut messages = Vec::new();
    for turn in 1..=turns {
        messages.push(Message::text(
            Role::User,
            format!("Question {turn}: {}", "why is the build red? ".repeat(200)),
        ));
        messages.push(answer(turn));
    }
    messages
}

fn engine() -> Engine {
    let mut config = EngineConfig::new(Policy::preset("skald").unwrap());
    config.pricing = Pricing {
        input_per_million: 2.0,
        ..Pricing::default()
    };
    config.compaction = CompactionSettings {
        reserve_tokens: 2_000,
        ..CompactionSettings::default()
    };
    config.window_tokens = 16_000;
    Engine::in_memory(config).unwrap()
}

#[tokio::test]
async fn each_answer_is_a_call_with_its_usage_cost_and_raw_history() {
    let engine = engine();
    let (tenant, session) = (
        Tenant::parse("acme").unwrap(),
        SessionId::parse("calls").unwrap(),
    );
    let messages = conversation(5);
    engine
        .ingest(&tenant, &session, messages.clone())
        .await
        .unwrap();

    let timeline = engine.call_timeline(&tenant, &session, 1, 2).unwrap();
    assert_eq!((timeline.page, timeline.pages), (1, 3));
    let numbers: Vec<usize> = timeline
        .events
        .iter()
        .map(|event| match event {
            TimelineEvent::Call(call) => call.number,
            TimelineEvent::Compaction(_) => 0,
        })
        .collect();
    assert_eq!(numbers, [5, 4], "newest first");
    let TimelineEvent::Call(last) = &timeline.events[0] else {
        panic!("a call");
    };
    let raw_before_last: u64 = messages[..9].iter().map(estimate_message_tokens).sum();
    assert_eq!(last.raw_tokens, raw_before_last);
    assert_eq!(last.sent_tokens(), Some(105 + 5_000 + 10));
    let pricing = engine.config().pricing;
    assert_eq!(last.input_cost_usd, Some(pricing.cost(105, 10, 5_000)));
    assert_eq!(last.model.as_deref(), Some("claude-test"));

    let totals = timeline.totals;
    assert_eq!((totals.calls, totals.calls_with_usage), (5, 5));
    assert_eq!(totals.cache_read_tokens, 15_000);
    assert_eq!(totals.uncached_tokens, 515);
    assert_eq!(
        totals.sent_tokens,
        totals.cache_read_tokens + totals.cache_write_tokens + totals.uncached_tokens
    );
    let past_the_end = engine.call_timeline(&tenant, &session, 99, 2).unwrap();
    assert_eq!(past_the_end.page, 3, "a page past the end is the last");
    assert_eq!(past_the_end.events.len(), 1);
}

#[tokio::test]
async fn a_compaction_sits_between_the_calls_with_its_trigger_and_sizes() {
    let engine = engine();
    let (tenant, session) = (
        Tenant::parse("acme").unwrap(),
        SessionId::parse("compacted").unwrap(),
    );
    engine
        .ingest(&tenant, &session, conversation(8))
        .await
        .unwrap();
    let compaction = engine
        .compact(
            &tenant,
            &session,
            &CompactInput {
                window_tokens: None,
                trigger: CompactionTrigger::Manual,
                custom_instructions: None,
                agents_md: None,
                context_tokens: None,
                archive: false,
            },
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(
        compaction.result.outcome.is_compacted(),
        "{:?}",
        compaction.result.outcome
    );
    engine
        .ingest(&tenant, &session, vec![answer(9)])
        .await
        .unwrap();

    let timeline = engine.call_timeline(&tenant, &session, 1, 50).unwrap();
    assert_eq!(timeline.totals.compactions, 1);
    assert_eq!(timeline.totals.calls, 9);
    let at = timeline
        .events
        .iter()
        .position(|event| matches!(event, TimelineEvent::Compaction(_)))
        .unwrap();
    assert_eq!(at, 1, "after the newest call, before the older ones");
    let TimelineEvent::Compaction(record) = &timeline.events[at] else {
        unreachable!()
    };
    assert_eq!(record.trigger.as_deref(), Some("manual"));
    assert!(record.summarizer.is_some());
    let (before, after) = (record.tokens_before.unwrap(), record.tokens_after.unwrap());
    assert!(after < before, "{after} !< {before}");
    assert_eq!(
        Some(record.entry_id.as_str()),
        compaction.result.checkpoint_entry_id.as_deref()
    );
}

#[tokio::test]
async fn savings_sum_each_session_and_each_day_and_the_chart_series_is_oldest_first() {
    let engine = engine();
    let tenant = Tenant::parse("acme").unwrap();
    for (id, turns) in [("first", 3), ("second", 4)] {
        engine
            .ingest(&tenant, &SessionId::parse(id).unwrap(), conversation(turns))
            .await
            .unwrap();
    }
    let savings = engine.savings(&tenant, 10).unwrap();
    assert_eq!(savings.sessions.len(), 2);
    assert_eq!(savings.sessions_not_read, 0);
    for (info, totals) in &savings.sessions {
        let id = SessionId::parse(info.id.as_str()).unwrap();
        let own = engine.call_timeline(&tenant, &id, 1, 10).unwrap().totals;
        assert_eq!(*totals, own, "{}", info.id);
    }
    assert_eq!(savings.totals.calls, 7);
    assert_eq!(savings.totals.cache_read_tokens, 6_000 + 10_000);
    let day_calls: usize = savings.days.iter().map(|day| day.calls).sum();
    assert_eq!(day_calls, 7, "every call falls on one day");
    let day_sent: u64 = savings.days.iter().map(|day| day.sent_tokens).sum();
    assert_eq!(day_sent, savings.totals.sent_tokens);
    assert!(savings.totals.raw_cost_usd > savings.totals.input_cost_usd);
    // skald assembled none of these calls (they were ingested as they are): it saved nothing,
    // whatever the prompt cache saved.
    assert_eq!(savings.totals.served_calls, 0);
    assert_eq!(savings.totals.skald_saved_usd(), 0.0);
    assert!(savings.totals.cache_saved_usd() > 0.0);
    let day_without: f64 = savings
        .days
        .iter()
        .map(|day| day.without_skald_cost_usd)
        .sum();
    assert!((day_without - savings.totals.without_skald_cost_usd).abs() < 1e-9);

    let only_one = engine.savings(&tenant, 1).unwrap();
    assert_eq!(
        (only_one.sessions.len(), only_one.sessions_not_read),
        (1, 1)
    );

    let series = engine
        .call_series(&tenant, &SessionId::parse("second").unwrap())
        .unwrap();
    assert_eq!(series.len(), 4);
    assert!(
        series.windows(2).all(|pair| pair[0].0 < pair[1].0),
        "oldest first: the raw history grows {series:?}"
    );
    assert_eq!(series[0].1, 101 + 1_000 + 10);
}

#[tokio::test]
async fn an_answer_relayed_with_usage_is_stored_with_it_when_the_client_sends_it_back() {
    let engine = engine();
    let (tenant, session) = (
        Tenant::parse("acme").unwrap(),
        SessionId::parse("relayed").unwrap(),
    );
    let question = Message::text(Role::User, "Why is the build red?");
    engine
        .sync(
            &tenant,
            &session,
            std::slice::from_ref(&question),
            "anthropic",
        )
        .await
        .unwrap();
    // The proxy relays the provider's answer and remembers its usage…
    let relayed = answer(1);
    engine
        .slot(&tenant, &session)
        .lock()
        .await
        .remember_answer_usage(&relayed);
    // …and the client sends the answer back without it (and a different one, never relayed).
    let mut echoed = relayed.clone();
    echoed.meta.usage = None;
    echoed.meta.model = None;
    let mut unrelayed = Message::text(Role::Assistant, "An answer skald never relayed.");
    unrelayed.meta.usage = None;
    let conversation = vec![
        question.clone(),
        echoed,
        Message::text(Role::User, "And now?"),
        unrelayed,
    ];
    engine
        .sync(&tenant, &session, &conversation, "anthropic")
        .await
        .unwrap();

    let timeline = engine.call_timeline(&tenant, &session, 1, 10).unwrap();
    assert_eq!(
        (timeline.totals.calls, timeline.totals.calls_with_usage),
        (2, 1)
    );
    let TimelineEvent::Call(first) = &timeline.events[1] else {
        panic!("a call")
    };
    assert_eq!(first.usage, relayed.meta.usage);
    assert_eq!(first.model.as_deref(), Some("claude-test"));
}

mod build_logs;
use build_logs::build_log_conversation;

const LOG_LINE: &str = "compiling module skald_timeline ... ok\n";

/// `turns` turns, each a command with a large output and an answer about it.
fn tool_conversation(turns: usize) -> Vec<Message> {
    build_log_conversation(turns, LOG_LINE)
}

fn offloading_engine() -> Engine {
    let mut config = EngineConfig::new(Policy::preset("sccs").unwrap());
    config.window_tokens = 32_000;
    Engine::in_memory(config).unwrap()
}

/// The last call of the session's timeline.
fn last_call(engine: &Engine, tenant: &Tenant, session: &SessionId) -> CallRecord {
    let timeline = engine.call_timeline(tenant, session, 1, 10).unwrap();
    match timeline.events.first() {
        Some(TimelineEvent::Call(call)) => call.clone(),
        other => panic!("a call, not {other:?}"),
    }
}

#[tokio::test]
async fn an_engine_api_answer_is_stored_with_what_the_pipeline_did_on_its_request() {
    let engine = offloading_engine();
    let (tenant, session) = (
        Tenant::parse("acme").unwrap(),
        SessionId::parse("engine-api-record").unwrap(),
    );
    let mut conversation = tool_conversation(6);
    conversation.push(Message::text(Role::User, "And the next job?"));
    let assembly = engine
        .assemble(
            &tenant,
            &session,
            AssembleInput {
                messages: Some(conversation.clone()),
                ..AssembleInput::default()
            },
        )
        .await
        .unwrap();
    let report = &assembly.view.view.report;
    assert!(!report.offload.offloaded.is_empty(), "the call offloads");
    let before = last_call(&engine, &tenant, &session);
    assert_eq!(before.assemble, None, "answers from before skald assembled");

    // The host sends its answer back with the next assemble.
    conversation.push(Message::text(Role::Assistant, "Job 6 is green."));
    conversation.push(Message::text(Role::User, "Thanks."));
    engine
        .assemble(
            &tenant,
            &session,
            AssembleInput {
                messages: Some(conversation),
                ..AssembleInput::default()
            },
        )
        .await
        .unwrap();

    let call = last_call(&engine, &tenant, &session);
    let record = call
        .assemble
        .clone()
        .expect("the answer carries its record");
    let offloaded: Vec<String> = report
        .offload
        .offloaded
        .iter()
        .map(|offloaded| offloaded.ref_id.clone())
        .collect();
    assert_eq!(record.offloaded_refs, offloaded);
    assert!(record.offloaded_tokens > 0);
    assert!(record.tokens_sent < record.tokens_raw, "{record:?}");
    assert!(
        record
            .summary()
            .starts_with(&format!("offloaded {} (", offloaded.len())),
        "{}",
        record.summary()
    );
}

/// OpenClaw assembles through the engine and commits each finished turn: the committed answer
/// carries the record of the request skald assembled for it.
#[tokio::test]
async fn a_committed_turns_answer_is_stored_with_what_the_pipeline_did_on_its_request() {
    let engine = offloading_engine();
    let (tenant, session) = (
        Tenant::parse("acme").unwrap(),
        SessionId::parse("committed-record").unwrap(),
    );
    let mut conversation = tool_conversation(6);
    conversation.push(Message::text(Role::User, "And the next job?"));
    let assembly = engine
        .assemble(
            &tenant,
            &session,
            AssembleInput {
                messages: Some(conversation),
                ..AssembleInput::default()
            },
        )
        .await
        .unwrap();
    let offloaded = assembly.view.view.report.offload.offloaded.len();
    assert!(offloaded > 0, "the call offloads");
    engine
        .commit_turn(
            &tenant,
            &session,
            "turn-7",
            &TurnAnchors::default(),
            vec![Message::text(Role::Assistant, "Job 6 is green.")],
            "openclaw",
        )
        .await
        .unwrap();
    let record = last_call(&engine, &tenant, &session)
        .assemble
        .expect("the committed answer carries its record");
    assert_eq!(record.offloaded_refs.len(), offloaded);
    assert!(
        record
            .summary()
            .starts_with(&format!("offloaded {offloaded} ("))
    );
}

#[tokio::test]
async fn a_relayed_answer_is_stored_with_the_record_of_the_request_that_produced_it() {
    let engine = offloading_engine();
    let (tenant, session) = (
        Tenant::parse("acme").unwrap(),
        SessionId::parse("proxied-record").unwrap(),
    );
    let mut conversation = tool_conversation(6);
    conversation.push(Message::text(Role::User, "And the next job?"));
    engine
        .sync(&tenant, &session, &conversation, "anthropic")
        .await
        .unwrap();
    // The proxy assembles the request (offloading), relays the answer and remembers it…
    let assembly = engine
        .assemble(&tenant, &session, AssembleInput::default())
        .await
        .unwrap();
    assert!(!assembly.view.view.report.offload.offloaded.is_empty());
    let mut relayed = Message::text(Role::Assistant, "Job 6 is green.");
    relayed.meta.usage = Some(Usage {
        input: 10,
        output: 5,
        cache_read: 100,
        cache_write: 0,
        cache_write_1h: 0,
    });
    engine
        .slot(&tenant, &session)
        .lock()
        .await
        .remember_answer_usage(&relayed);
    // …and the client sends it back without usage with its next request.
    let mut echoed = relayed.clone();
    echoed.meta.usage = None;
    conversation.push(echoed);
    conversation.push(Message::text(Role::User, "Thanks."));
    engine
        .sync(&tenant, &session, &conversation, "anthropic")
        .await
        .unwrap();

    let call = last_call(&engine, &tenant, &session);
    assert_eq!(call.usage, relayed.meta.usage);
    let record = call.assemble.clone().expect("stored with its record");
    assert!(!record.offloaded_refs.is_empty());
    assert!(
        record.summary().starts_with("offloaded "),
        "{}",
        record.summary()
    );
    // The call skald assembled is what it saved on: the same call without skald carries what
    // the pipeline took out, cached as the provider cached the call.
    let totals = engine
        .call_timeline(&tenant, &session, 1, 10)
        .unwrap()
        .totals;
    assert_eq!(totals.served_calls, 1);
    assert_eq!(
        totals.skald_removed_tokens,
        record.tokens_raw - record.tokens_sent
    );
    assert!(totals.skald_saved_usd() > 0.0, "{totals:?}");
    assert_eq!(
        call.without_skald_cost_usd,
        Some(totals.without_skald_cost_usd)
    );
    // The model never sees skald's record: a view's messages carry none.
    let view = engine
        .view(&tenant, &session, skald_engine::ViewOptions::default())
        .await
        .unwrap();
    assert!(
        view.view
            .messages
            .iter()
            .all(|message| message.meta.assemble.is_none())
    );
}
