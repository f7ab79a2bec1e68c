//! The engine's turn loop, through `Engine`: one request's model calls as a caller with its own
//! I/O drives them (the proxy), the answers scripted. skald's own tool calls run as a hidden
//! round the next call sees, a mixed answer goes to the client without them, the round cap
//! ends a loop of skald's calls, an overflow is recovered from or given up on, anything else is
//! passed on, and a streamed round continues the same way. Around it: a client's request brought
//! into its session (`Turn::bring_in`), skald's system addition kept apart from the host's
//! prompt, and a call prepared detached from any session (a token count).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{
    Block, ContentForm, Extra, Message, Role, StopReason, ToolCall, ToolResult, Usage,
};
use skald_core::pipeline::offload::FETCH_TOOL_NAME;
use skald_core::pipeline::policy::Policy;
use skald_core::refs::ref_ids_in;
use skald_engine::{
    Engine, EngineConfig, FailedCall, MAX_TOOL_ROUNDS, PrepareInput, PreparedCall, RecoveryError,
    RecoverySettings, StreamedAnswer, StreamedRound, Turn, TurnLoop, WholeAnswer,
};
use skald_llm::LlmError;
use tokio_util::sync::CancellationToken;

fn tenant() -> Tenant {
    Tenant::parse("acme").unwrap()
}

fn session_id() -> SessionId {
    SessionId::parse("loop").unwrap()
}

fn build_log() -> String {
    let mut text: String = (0..400)
        .map(|i| format!("2026-01-01 INFO compiling crate_{i:03} ok\n"))
        .collect();
    text.push_str("error[E0425]: cannot find value `ledger_total` in src/ledger.rs:42\n");
    text
}

/// A session whose build log the `sccs` policy offloads, so every call offers
/// `fetch_original_data`.
async fn engine_with_offloaded_log() -> Engine {
    let engine = Engine::in_memory(EngineConfig::new(Policy::preset("sccs").unwrap())).unwrap();
    let messages = vec![
        Message::text(Role::User, "why does the build fail?"),
        Message::new(
            Role::Assistant,
            vec![Block::ToolCall(tool_call(
                "c1",
                "bash",
                json!({"command": "make"}),
            ))],
        ),
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: "c1".into(),
                tool_name: Some("bash".into()),
                content: vec![Block::text(build_log())].into(),
                content_form: ContentForm::Blocks,
                is_error: None,
                details: None,
                extra: Extra::new(),
            })],
        ),
    ];
    engine
        .ingest(&tenant(), &session_id(), messages)
        .await
        .unwrap();
    engine
}

fn tool_call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
        arguments_text: None,
        extra: Extra::new(),
    }
}

fn answer(blocks: Vec<Block>) -> Message {
    let mut message = Message::new(Role::Assistant, blocks);
    message.meta.usage = Some(Usage {
        input: 1_000,
        output: 20,
        ..Usage::default()
    });
    message
}

/// The ref of the log the session's view names.
fn offloaded_ref(call: &PreparedCall) -> String {
    offloaded_ref_in(&call.request.messages)
}

/// The first ref a tool result of `messages` names.
fn offloaded_ref_in(messages: &[Message]) -> String {
    messages
        .iter()
        .flat_map(|message| {
            message.content.iter().flat_map(|block| match block {
                Block::ToolResult(result) => result
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        Block::Text(text) => Some(ref_ids_in(&text.text)),
                        Block::Image(_)
                        | Block::Thinking(_)
                        | Block::ToolCall(_)
                        | Block::ToolResult(_)
                        | Block::Opaque(_) => None,
                    })
                    .flatten()
                    .collect::<Vec<_>>(),
                Block::Text(_)
                | Block::Image(_)
                | Block::Thinking(_)
                | Block::ToolCall(_)
                | Block::Opaque(_) => Vec::new(),
            })
        })
        .next()
        .expect("the log is offloaded")
        .to_string()
}

/// Runs `body` with a turn loop over the engine's session.
macro_rules! with_loop {
    ($engine:expr, |$turn_loop:ident, $turn:ident| $body:block) => {{
        let engine = $engine;
        let (tenant, session) = (tenant(), session_id());
        let settings = RecoverySettings::default();
        let mut $turn: Turn = engine.begin_turn(&tenant, &session).await;
        let prepare = engine.prepare_context(PrepareInput {
            tenant: &tenant,
            session: &session,
            model: Some("scripted"),
            system_prompt: Some("You are a build assistant."),
            tools: &[],
            host_prefix_tokens: None,
            fetch_available: true,
            now_ms: 1_770_000_000_000,
            agents_md: None,
            settings: &settings,
        });
        let mut $turn_loop = TurnLoop::new(&prepare, engine.memory_hooks(false, None)).unwrap();
        $body
    }};
}

#[tokio::test]
async fn a_call_of_skalds_fetch_runs_as_a_hidden_round_the_next_call_sees() {
    let cancel = CancellationToken::new();
    with_loop!(engine_with_offloaded_log().await, |turn_loop, turn| {
        let first = turn_loop.prepare(&mut turn, &cancel).await.unwrap();
        assert!(turn_loop.skald_tools().contains(FETCH_TOOL_NAME));
        let id = offloaded_ref(&first);
        let fetch = answer(vec![
            Block::text("Let me read the whole log."),
            Block::ToolCall(tool_call("f1", FETCH_TOOL_NAME, json!({"ref_ids": [id]}))),
        ]);
        let step = turn_loop
            .on_whole_answer(&mut turn, &fetch, &cancel)
            .await
            .unwrap();
        assert!(
            matches!(step, WholeAnswer::Continue { skald_calls_ran: 1 }),
            "{step:?}"
        );

        let second = turn_loop.prepare(&mut turn, &cancel).await.unwrap();
        let tail = &second.request.messages[second.request.messages.len() - 2..];
        assert_eq!(tail[0].role, Role::Assistant);
        assert_eq!(tail[0].meta.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(tail[0].plain_text(), "Let me read the whole log.");
        assert_eq!(tail[0].tool_calls().next().unwrap().id, "f1");
        let Block::ToolResult(result) = &tail[1].content[0] else {
            panic!("the fetch's result follows its call: {:?}", tail[1]);
        };
        assert_eq!(result.call_id, "f1");
        assert!(
            result.content.iter().any(|block| matches!(block,
                Block::Text(text) if text.text.contains("cannot find value `ledger_total`"))),
            "the original comes back whole: {:?}",
            result.content
        );

        let done = answer(vec![Block::text("`ledger_total` is undefined at line 42.")]);
        let step = turn_loop
            .on_whole_answer(&mut turn, &done, &cancel)
            .await
            .unwrap();
        assert!(
            matches!(step, WholeAnswer::Final { skald_calls_ran: 0 }),
            "{step:?}"
        );
    });
}

#[tokio::test]
async fn an_answer_calling_the_clients_tools_too_goes_to_the_client_after_skalds_round() {
    let cancel = CancellationToken::new();
    with_loop!(engine_with_offloaded_log().await, |turn_loop, turn| {
        let first = turn_loop.prepare(&mut turn, &cancel).await.unwrap();
        let id = offloaded_ref(&first);
        let mixed = answer(vec![
            Block::ToolCall(tool_call("f1", FETCH_TOOL_NAME, json!({"ref_ids": [id]}))),
            Block::ToolCall(tool_call("b1", "bash", json!({"command": "cargo check"}))),
        ]);
        let step = turn_loop
            .on_whole_answer(&mut turn, &mixed, &cancel)
            .await
            .unwrap();
        assert!(
            matches!(step, WholeAnswer::Final { skald_calls_ran: 1 }),
            "{step:?}"
        );
        // skald's round is in the session for the model's next call; the client's call is not
        // (it comes back with the client's next request).
        let next = turn_loop.prepare(&mut turn, &cancel).await.unwrap();
        let last = next.request.messages.last().unwrap();
        assert_eq!(last.role, Role::ToolResult);
        let calls: Vec<&str> = next
            .request
            .messages
            .iter()
            .flat_map(Message::tool_calls)
            .map(|call| call.id.as_str())
            .collect();
        assert_eq!(calls, ["c1", "f1"]);
    });
}

#[tokio::test]
async fn a_loop_of_skalds_calls_ends_at_the_round_cap() {
    let cancel = CancellationToken::new();
    with_loop!(engine_with_offloaded_log().await, |turn_loop, turn| {
        let mut continued = 0;
        loop {
            let call = turn_loop.prepare(&mut turn, &cancel).await.unwrap();
            let id = offloaded_ref(&call);
            let fetch = answer(vec![Block::ToolCall(tool_call(
                &format!("f{continued}"),
                FETCH_TOOL_NAME,
                json!({"ref_ids": [id], "grep": format!("crate_{continued:03}")}),
            ))]);
            match turn_loop
                .on_whole_answer(&mut turn, &fetch, &cancel)
                .await
                .unwrap()
            {
                WholeAnswer::Continue { skald_calls_ran: 1 } => continued += 1,
                WholeAnswer::Final { skald_calls_ran: 1 } => break,
                other @ (WholeAnswer::Final { .. }
                | WholeAnswer::Continue { .. }
                | WholeAnswer::Retry(_)
                | WholeAnswer::GaveUp(_)) => panic!("unexpected step {other:?}"),
            }
        }
        assert_eq!(continued + 1, MAX_TOOL_ROUNDS);
    });
}

#[tokio::test]
async fn an_error_that_is_not_an_overflow_is_passed_on_and_an_unrecoverable_overflow_given_up() {
    let cancel = CancellationToken::new();
    let engine = Engine::in_memory(EngineConfig::new(Policy::preset("sccs").unwrap())).unwrap();
    engine
        .ingest(
            &tenant(),
            &session_id(),
            vec![Message::text(Role::User, "hello")],
        )
        .await
        .unwrap();
    with_loop!(engine, |turn_loop, turn| {
        turn_loop.prepare(&mut turn, &cancel).await.unwrap();
        let limited = LlmError::from_provider(
            Some(429),
            r#"{"error": {"type": "rate_limit_error", "message": "slow down"}}"#,
            None,
        );
        assert!(matches!(
            turn_loop.on_failed_call(&mut turn, limited, &cancel).await,
            FailedCall::PassOn(_)
        ));
        // One short message: nothing to compact and nothing to truncate.
        let overflow = LlmError::from_provider(
            Some(400),
            r#"{"error": {"type": "invalid_request_error", "message": "prompt is too long: 250000 tokens > 200000 maximum"}}"#,
            None,
        );
        let step = turn_loop.on_failed_call(&mut turn, overflow, &cancel).await;
        assert!(
            matches!(
                step,
                FailedCall::GaveUp(RecoveryError::ContextOverflow { .. })
            ),
            "{step:?}"
        );
        let FailedCall::GaveUp(error) = step else {
            unreachable!()
        };
        let report = error.report().unwrap();
        assert_eq!(report.overflows.len(), 1);
        assert_eq!(report.compactions.len(), 1, "compaction was tried first");
    });
}

#[tokio::test]
async fn an_overflowing_call_is_recovered_from_and_prepared_again() {
    let cancel = CancellationToken::new();
    with_loop!(engine_with_offloaded_log().await, |turn_loop, turn| {
        let first = turn_loop.prepare(&mut turn, &cancel).await.unwrap();
        let overflow = LlmError::ContextOverflow {
            requested_tokens: Some(first.request_tokens * 4),
            limit_tokens: Some(first.request_tokens / 2),
            message: "prompt is too long".to_owned(),
        };
        let step = turn_loop.on_failed_call(&mut turn, overflow, &cancel).await;
        let FailedCall::Retry(action) = step else {
            panic!("the session can be made smaller: {step:?}");
        };
        let overflows = &turn_loop.report().overflows;
        assert_eq!(overflows.len(), 1);
        assert_eq!(overflows[0].action, action);
        assert_eq!(overflows[0].estimated_tokens, first.request_tokens);
        turn_loop.prepare(&mut turn, &cancel).await.unwrap();
        assert_eq!(turn_loop.report().attempts, 2);
    });
}

#[tokio::test]
async fn a_streamed_round_of_skalds_calls_continues_and_a_plain_one_ends() {
    let cancel = CancellationToken::new();
    with_loop!(engine_with_offloaded_log().await, |turn_loop, turn| {
        let first = turn_loop.prepare(&mut turn, &cancel).await.unwrap();
        let id = offloaded_ref(&first);
        let step = turn_loop
            .on_streamed_answer(
                &mut turn,
                StreamedRound {
                    content: vec![Block::text("Reading the log.")],
                    skald_calls: vec![tool_call("f1", FETCH_TOOL_NAME, json!({"ref_ids": [id]}))],
                    client_calls: 0,
                    usage: None,
                },
            )
            .await
            .unwrap();
        assert_eq!(step, StreamedAnswer::Continue { skald_calls_ran: 1 });
        turn_loop.prepare(&mut turn, &cancel).await.unwrap();
        let step = turn_loop
            .on_streamed_answer(
                &mut turn,
                StreamedRound {
                    content: vec![Block::text("Line 42.")],
                    ..StreamedRound::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(step, StreamedAnswer::Final { skald_calls_ran: 0 });
    });
}

#[tokio::test]
async fn a_prepared_call_carries_skalds_system_addition_apart_from_the_hosts_prompt() {
    let cancel = CancellationToken::new();
    with_loop!(engine_with_offloaded_log().await, |turn_loop, turn| {
        let call = turn_loop.prepare(&mut turn, &cancel).await.unwrap();
        let addition = call
            .system_addition
            .clone()
            .expect("the REF_ID instruction");
        assert!(addition.contains("REF_ID"), "{addition}");
        assert_eq!(
            call.request.system.as_deref(),
            Some(format!("You are a build assistant.\n\n{addition}").as_str())
        );
    });
}

#[tokio::test]
async fn a_request_continuing_from_an_unknown_response_is_refused_and_changes_nothing() {
    let engine = engine_with_offloaded_log().await;
    let (tenant, session) = (tenant(), session_id());
    let before = engine.load_session(&tenant, &session).unwrap();
    let mut turn = engine.begin_turn(&tenant, &session).await;
    let refused = turn.bring_in(
        vec![Message::text(Role::User, "and now?")],
        Some("resp_unknown"),
        "openai-responses",
        None,
    );
    assert!(
        matches!(&refused, Err(skald_engine::BringInError::UnknownResponse { response_id })
            if response_id == "resp_unknown"),
        "{refused:?}"
    );
    drop(turn);
    let after = engine.load_session(&tenant, &session).unwrap();
    assert_eq!(after.entries().len(), before.entries().len());

    let mut turn = engine.begin_turn(&tenant, &session).await;
    let brought = turn
        .bring_in(
            vec![
                Message::text(Role::System, "You are a build assistant."),
                Message::text(Role::User, "why does the build fail?"),
            ],
            None,
            "openai",
            None,
        )
        .unwrap();
    assert_eq!(brought.messages.len(), 2);
    assert_eq!(brought.synced.matched, 2, "{:?}", brought.synced);
}

#[tokio::test]
async fn a_detached_call_is_prepared_without_a_session_and_leaves_the_hosts_tools_to_it() {
    let engine = Engine::in_memory(EngineConfig::new(Policy::preset("sccs").unwrap())).unwrap();
    let conversation = vec![
        Message::text(Role::User, "count this"),
        Message::new(
            Role::Assistant,
            vec![Block::ToolCall(tool_call(
                "c1",
                "bash",
                json!({"command": "make"}),
            ))],
        ),
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: "c1".into(),
                tool_name: Some("bash".into()),
                content: vec![Block::text(build_log())].into(),
                content_form: ContentForm::Blocks,
                is_error: None,
                details: None,
                extra: Extra::new(),
            })],
        ),
    ];
    let own_fetch = [json!({"name": FETCH_TOOL_NAME, "input_schema": {"type": "object"}})];
    let call = engine
        .prepare_detached(&tenant(), None, conversation.clone(), &own_fetch, true, 0)
        .unwrap();
    assert!(call.system_addition.is_some());
    let names: Vec<&str> = call
        .skald_tools
        .iter()
        .filter_map(|tool| tool.pointer("/function/name").and_then(Value::as_str))
        .collect();
    assert!(!names.contains(&FETCH_TOOL_NAME), "{names:?}");
    assert!(names.contains(&"search_memories"), "{names:?}");
    let offloaded = offloaded_ref_in(&call.messages);
    assert!(
        engine
            .read_ref(
                &tenant(),
                &skald_core::refs::RefId::parse(&offloaded).unwrap()
            )
            .is_ok()
    );
    assert!(engine.list_sessions(&tenant()).unwrap().is_empty());
}
