//! `Engine::complete_turn`: one model call for a stored session with overflow recovery (seed 003 §4),
//! every path against a local OpenAI-compatible server the test scripts — the answer, the
//! branches (direct retry, overflow compaction, persistent truncation, giving up), the errors
//! that are not overflows, cancellation, the iteration cap — and what each path leaves in the
//! session and sends on the wire.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use skald_core::compaction::{
    CompactionOutcome, CompactionSettings, CompactionTrigger, SkipReason,
};
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_core::pipeline::policy::Policy;
use skald_core::session::{COMPACTION_SUMMARY_PREFIX, EntryKind, SessionHeader};
use skald_engine::memory::MemoryIdentity;
use skald_engine::recovery::{
    CONTEXT_OVERFLOW_MESSAGE, OverflowSource, PrepareContext, RecoveryAction, RecoveryError,
    RecoverySettings, TurnDriver, TurnOutcome,
};
use skald_engine::{Engine, EngineConfig, ModelTurn, SessionState, Stores};
use skald_llm::{
    ExtractiveSummarizer, FixedJitter, LlmError, OpenAiCompatible, ProviderConfig, ProviderKind,
    RetryPolicy, Summarizer, SummaryRequest,
};
use skald_store::sessions::{NewSession, SessionStore};
use skald_store::{ManualClock, RefSettings, RefStore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const TENANT: &str = "acme";
const SESSION: &str = "s-recovery";
/// [`TENANT`] and [`SESSION`] as the engine takes them.
static TENANT_ID: std::sync::LazyLock<skald_core::ids::Tenant> =
    std::sync::LazyLock::new(|| tenant_named(TENANT));
static SESSION_ID: std::sync::LazyLock<skald_core::ids::SessionId> =
    std::sync::LazyLock::new(|| session_named(SESSION));
/// Host-only data that must never appear in a request body.
const SECRET: &str = "HOST-ONLY-DETAILS-9c1e";
const SYSTEM_PROMPT: &str = "You are a build assistant. Answer briefly.";

// ------------------------------------------------------------------------------------------
// The scripted provider
// ------------------------------------------------------------------------------------------

/// Answers requests in order from a list; a request past its end gets a 500 that names the
/// problem (the test then fails on the unexpected error).
struct Script {
    responses: Mutex<VecDeque<ResponseTemplate>>,
}

impl Respond for Script {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        self.responses
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| {
                ResponseTemplate::new(500).set_body_string("the test script has no more answers")
            })
    }
}

async fn scripted(responses: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(Script {
            responses: Mutex::new(responses.into()),
        })
        .mount(&server)
        .await;
    server
}

fn answer(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-ok",
        "object": "chat.completion",
        "created": 1_770_000_000,
        "model": "test-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 2_000, "completion_tokens": 12, "total_tokens": 2_012}
    }))
}

/// OpenAI's own overflow answer, with the figures it states.
fn overflow(limit: u64, requested: u64) -> ResponseTemplate {
    ResponseTemplate::new(400).set_body_json(json!({
        "error": {
            "message": format!(
                "This model's maximum context length is {limit} tokens. However, you requested \
                 {requested} tokens ({} in the messages, 1000 in the completion). Please reduce \
                 the length of the messages or completion.",
                requested.saturating_sub(1000)
            ),
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded"
        }
    }))
}

/// An overflow that states no figures.
fn bare_overflow() -> ResponseTemplate {
    ResponseTemplate::new(400).set_body_json(json!({
        "error": {
            "message": "The prompt is too long for this model.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded"
        }
    }))
}

/// A gateway that reports the overflow inside a 200 answer: stop reason `error`.
fn overflow_as_assistant_error() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-err",
        "object": "chat.completion",
        "created": 1_770_000_000,
        "model": "test-model",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
            },
            "finish_reason": "error"
        }]
    }))
}

fn rate_limited() -> ResponseTemplate {
    ResponseTemplate::new(429).set_body_json(json!({
        "error": {
            "message": "Rate limit reached for requests per min (RPM): Limit 3, Used 3.",
            "type": "requests",
            "code": "rate_limit_exceeded"
        }
    }))
}

fn client(server: &MockServer, attempts: u32) -> OpenAiCompatible {
    let mut config = ProviderConfig::new(ProviderKind::OpenAi, "test-model");
    config.base_url = server.uri();
    OpenAiCompatible::with_api_key(config, Some("sk-test".to_owned()))
        .unwrap()
        .with_retry_policy(RetryPolicy {
            attempts,
            min_delay_ms: 0,
            max_delay_ms: 0,
            jitter: 0.0,
            max_retry_after_ms: 0,
        })
        .with_jitter(Arc::new(FixedJitter(0.5)))
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|request| serde_json::from_slice(&request.body).unwrap())
        .collect()
}

/// What every request body must satisfy: no `details`, every tool call answered right after
/// its assistant message and every result answering a call.
fn assert_wire_clean(body: &Value) {
    let text = body.to_string();
    assert!(!text.contains(SECRET), "details reached the wire");
    let messages = body["messages"].as_array().unwrap();
    let mut open: Vec<String> = Vec::new();
    for message in messages {
        match message["role"].as_str().unwrap() {
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap().to_owned();
                assert!(
                    open.contains(&id),
                    "result {id} answers no pending call: {text}"
                );
                open.retain(|pending| *pending != id);
            }
            _ => {
                assert!(
                    open.is_empty(),
                    "calls {open:?} have no result before the next message"
                );
                if let Some(calls) = message["tool_calls"].as_array() {
                    open = calls
                        .iter()
                        .map(|call| call["id"].as_str().unwrap().to_owned())
                        .collect();
                }
            }
        }
    }
    assert!(open.is_empty(), "calls {open:?} were never answered");
}

/// The messages of a request body, decoded back into skald's model.
fn sent_messages(body: &Value) -> Vec<Message> {
    skald_core::codec::openai::decode_request(body)
        .unwrap()
        .messages
}

// ------------------------------------------------------------------------------------------
// Sessions
// ------------------------------------------------------------------------------------------

fn stores() -> (Arc<dyn SessionStore>, Arc<dyn RefStore>) {
    let clock = Arc::new(ManualClock::new(1_770_000_000_000));
    (
        skald_store::test_stores::session_store_with_clock(clock.clone()),
        skald_store::test_stores::ref_store_with_clock(RefSettings::default(), clock),
    )
}

/// A build log of about `chars` characters, numbered lines, with an error at the end.
fn build_log(turn: usize, chars: usize) -> String {
    let mut log = format!("build {turn} commit 9f8e7d6c5b4a{turn:04}\n");
    let mut line = 0;
    while log.len() < chars.saturating_sub(60) {
        line += 1;
        log.push_str(&format!(
            "[{line:04}] compiling crate module_{turn}_{line}\n"
        ));
    }
    log.push_str(&format!(
        "error: linker failed at /srv/app/src/main_{turn}.rs\n"
    ));
    log
}

/// One user turn: the ask, a `bash` call, its output (with host-only `details`), a reply.
fn turn(turn: usize, output_chars: usize) -> Vec<Message> {
    let id = format!("call_{turn}");
    vec![
        Message::text(
            Role::User,
            format!("Step {turn}: never touch /etc/passwd. Check the build log for job {turn}."),
        ),
        Message::new(
            Role::Assistant,
            vec![
                Block::text(format!("Reading build {turn}.")),
                Block::ToolCall(ToolCall {
                    id: id.clone(),
                    name: "bash".into(),
                    arguments: json!({ "command": format!("cat /var/log/build-{turn}.log") }),
                    arguments_text: None,
                    extra: Extra::new(),
                }),
            ],
        ),
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: id,
                tool_name: Some("bash".into()),
                content: vec![Block::text(build_log(turn, output_chars))].into(),
                content_form: ContentForm::Blocks,
                is_error: Some(false),
                details: Some(json!({ "raw": SECRET }).into()),
                extra: Extra::new(),
            })],
        ),
        Message::text(
            Role::Assistant,
            format!("Build {turn} fails to link /srv/app/src/main_{turn}.rs."),
        ),
    ]
}

/// A session of one turn per output size, ending with a question to answer.
fn seed(store: &dyn SessionStore, outputs: &[usize]) {
    let header = SessionHeader {
        id: SESSION.into(),
        ..SessionHeader::default()
    };
    store
        .create(
            &tenant_named(TENANT),
            NewSession::new(header, "openclaw-session"),
        )
        .unwrap();
    for (index, size) in outputs.iter().enumerate() {
        for message in turn(index, *size) {
            store
                .append_message(&tenant_named(TENANT), &session_named(SESSION), message)
                .unwrap();
        }
    }
    store
        .append_message(
            &tenant_named(TENANT),
            &session_named(SESSION),
            Message::text(Role::User, "Which builds failed, and why?"),
        )
        .unwrap();
}

/// Entry count and leaf: what "the session is unchanged" compares.
fn shape(store: &dyn SessionStore) -> (u64, Option<String>) {
    let info = store
        .get(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap();
    (info.entry_count, info.leaf_id)
}

/// Every entry of `before` is still stored, unchanged.
fn assert_nothing_lost(store: &dyn SessionStore, before: &[skald_core::session::Entry]) {
    let after = store
        .entries(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap();
    for entry in before {
        assert!(
            after.iter().any(|kept| kept == entry),
            "entry {} was lost or changed",
            entry.id
        );
    }
}

// ------------------------------------------------------------------------------------------
// The turn
// ------------------------------------------------------------------------------------------

/// What a test varies.
struct Setup {
    window: u64,
    compaction: CompactionSettings,
    settings: RecoverySettings,
    policy: Policy,
}

impl Setup {
    fn new(window: u64, reserve: u64) -> Setup {
        Setup {
            window,
            compaction: CompactionSettings {
                reserve_tokens: reserve,
                ..CompactionSettings::default()
            },
            settings: RecoverySettings::default(),
            policy: Policy::preset("none").unwrap(),
        }
    }
}

struct Env {
    sessions: Arc<dyn SessionStore>,
    refs: Arc<dyn RefStore>,
    server: MockServer,
    model: OpenAiCompatible,
}

async fn env(outputs: &[usize], script: Vec<ResponseTemplate>) -> Env {
    let (sessions, refs) = stores();
    seed(&sessions, outputs);
    let server = scripted(script).await;
    let model = client(&server, 1);
    Env {
        sessions,
        refs,
        server,
        model,
    }
}

async fn run(
    env: &Env,
    setup: &Setup,
    summarizer: impl Summarizer + 'static,
    cancel: &CancellationToken,
) -> Result<TurnOutcome, RecoveryError> {
    let tools = [json!({
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}
        }
    })];
    let engine = engine(env, setup, Arc::new(summarizer), None);
    engine
        .complete_turn(
            &TENANT_ID,
            &SESSION_ID,
            model_turn(env, setup, &tools, None),
            cancel,
        )
        .await
}

#[tokio::test]
async fn the_models_reported_usage_calibrates_the_sessions_next_count() {
    let env = env(&[800, 800], vec![answer("Builds 0 and 1 fail to link.")]).await;
    let setup = Setup::new(8_192, 1_024);
    let engine = engine(
        &env,
        &setup,
        Arc::new(ExtractiveSummarizer::default()),
        None,
    );
    engine
        .complete_turn(
            &TENANT_ID,
            &SESSION_ID,
            model_turn(&env, &setup, &[], None),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    // The scripted provider reported 2,000 input tokens for what skald counted.
    let slot = engine.slot(&TENANT_ID, &SESSION_ID);
    let mut state = slot.lock().await;
    let corrected =
        state.calibrated_tokens(Some(skald_llm::ChatModel::model_name(&env.model)), 1_000);
    assert_ne!(corrected, 1_000, "the reported usage was not fed back");
    assert!(
        state.observe_usage(1).is_none(),
        "the call's count was paired already"
    );
}

/// The engine every test runs its turn on: the env's stores (and `memories`, else an empty
/// memory store), the setup's policy, compaction settings and window, and `summarizer`.
fn engine(
    env: &Env,
    setup: &Setup,
    summarizer: Arc<dyn Summarizer>,
    memories: Option<Arc<dyn skald_store::memories::MemoryStore>>,
) -> Engine {
    let mut config = EngineConfig::new(setup.policy.clone());
    config.compaction = setup.compaction.clone();
    config.window_tokens = setup.window;
    config.summarizer = summarizer;
    let stores = Stores {
        sessions: env.sessions.clone(),
        refs: env.refs.clone(),
        memories: memories.unwrap_or_else(skald_store::test_stores::memory_store),
    };
    Engine::new(stores, config, TaskTracker::new()).unwrap()
}

/// The turn every test runs: the env's model, the setup's recovery settings.
fn model_turn<'a>(
    env: &'a Env,
    setup: &'a Setup,
    tools: &'a [Value],
    memory: Option<&'a MemoryIdentity>,
) -> ModelTurn<'a> {
    ModelTurn {
        model: &env.model,
        system_prompt: Some(SYSTEM_PROMPT),
        tools,
        max_output_tokens: Some(1_000),
        temperature: None,
        fetch_available: true,
        now_ms: 1_770_000_000_000,
        agents_md: None,
        settings: &setup.settings,
        memory,
    }
}

/// A summarizer that fails with a context overflow: the compaction itself is too large.
struct OverflowingSummarizer;

#[async_trait]
impl Summarizer for OverflowingSummarizer {
    fn name(&self) -> &str {
        "overflowing"
    }

    async fn summarize(
        &self,
        _request: &SummaryRequest,
        _cancel: &CancellationToken,
    ) -> Result<String, LlmError> {
        Err(LlmError::ContextOverflow {
            requested_tokens: Some(40_000),
            limit_tokens: Some(8_192),
            message: "prompt is too long: 40000 tokens > 8192 maximum".into(),
        })
    }
}

/// A summarizer during whose call the user presses stop: it cancels the turn and returns the
/// abort the cancellation causes.
struct StopDuringSummary {
    cancel: CancellationToken,
}

#[async_trait]
impl Summarizer for StopDuringSummary {
    fn name(&self) -> &str {
        "stopped"
    }

    async fn summarize(
        &self,
        _request: &SummaryRequest,
        cancel: &CancellationToken,
    ) -> Result<String, LlmError> {
        self.cancel.cancel();
        cancel.cancelled().await;
        Err(LlmError::Aborted)
    }
}

fn overflow_actions(outcome: &skald_engine::RecoveryReport) -> Vec<RecoveryAction> {
    outcome
        .overflows
        .iter()
        .map(|record| record.action)
        .collect()
}

fn body_chars(body: &Value) -> usize {
    body.to_string().len()
}

// ------------------------------------------------------------------------------------------
// Paths
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn an_answer_without_overflow_is_appended_and_nothing_is_recovered() {
    let env = env(&[800, 800], vec![answer("Builds 0 and 1 fail to link.")]).await;
    let before = shape(&env.sessions);
    let setup = Setup::new(8_192, 1_024);
    let outcome = run(
        &env,
        &setup,
        ExtractiveSummarizer::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert!(outcome.recovery.is_clean(), "{:?}", outcome.recovery);
    assert_eq!(outcome.recovery.attempts, 1);
    assert_eq!(outcome.response.text(), "Builds 0 and 1 fail to link.");
    assert_eq!(outcome.usage().total_input(), 2_000);
    assert_eq!(outcome.usage().output, 12);
    // The answer is the new leaf, a child of the old one.
    let after = shape(&env.sessions);
    assert_eq!(after.0, before.0 + 1);
    assert_eq!(after.1.as_deref(), Some(outcome.entry_id.as_str()));
    let context = env
        .sessions
        .context(&tenant_named(TENANT), &session_named(SESSION), None)
        .unwrap();
    assert_eq!(
        context.last().unwrap().plain_text(),
        "Builds 0 and 1 fail to link."
    );
    let sent = bodies(&env.server).await;
    assert_eq!(sent.len(), 1);
    assert_wire_clean(&sent[0]);
    assert_eq!(sent[0]["messages"][0]["role"], "system");
    assert_eq!(sent[0]["messages"][0]["content"], SYSTEM_PROMPT);
    assert_eq!(sent[0]["tools"][0]["function"]["name"], "bash");
    assert_eq!(sent[0]["max_tokens"], 1_000);
}

#[tokio::test]
async fn an_overflow_is_compacted_and_the_smaller_retry_starts_with_the_summary() {
    // About 6,600 estimated tokens, under the threshold (8,192 - 512); the provider counts
    // 9,000. The long logs are in the turns the compaction summarises.
    let env = env(
        &[8_000, 8_000, 8_000, 300, 300, 300],
        vec![overflow(8_192, 9_000), answer("Every build fails to link.")],
    )
    .await;
    let entries_before = env
        .sessions
        .entries(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap();
    let setup = Setup::new(8_192, 512);
    let outcome = run(
        &env,
        &setup,
        ExtractiveSummarizer::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let report = &outcome.recovery;
    assert_eq!(report.attempts, 2);
    assert_eq!(report.overflow_compaction_attempts, 1);
    assert_eq!(overflow_actions(report), [RecoveryAction::Compacted]);
    let overflow = &report.overflows[0];
    assert_eq!(overflow.source, OverflowSource::PromptError);
    assert_eq!(overflow.requested_tokens, Some(9_000));
    assert_eq!(overflow.limit_tokens, Some(8_192));
    assert_eq!(report.compactions.len(), 1);
    let compaction = &report.compactions[0];
    assert_eq!(compaction.trigger, CompactionTrigger::Overflow);
    assert!(compaction.is_compacted(), "{:?}", compaction.outcome);
    assert!(report.truncation.is_none());

    let sent = bodies(&env.server).await;
    assert_eq!(sent.len(), 2);
    for body in &sent {
        assert_wire_clean(body);
    }
    assert!(
        body_chars(&sent[1]) < body_chars(&sent[0]),
        "the retry is not smaller: {} >= {}",
        body_chars(&sent[1]),
        body_chars(&sent[0])
    );
    assert_eq!(sent[1]["messages"][0]["content"], SYSTEM_PROMPT);
    let retried = sent_messages(&sent[1]);
    let first = retried[1].plain_text();
    assert!(
        first.starts_with(COMPACTION_SUMMARY_PREFIX),
        "the retry does not start with the summary: {first}"
    );
    insta::assert_snapshot!(
        "retry_after_overflow_compaction",
        skald_core::render::render_messages(&retried)
    );

    // The checkpoint and the answer were appended; every earlier entry is still there.
    assert_nothing_lost(&env.sessions, &entries_before);
    let session = env
        .sessions
        .load(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap();
    assert_eq!(session.leaf_id(), Some(outcome.entry_id.as_str()));
    assert_eq!(session.entries().len(), entries_before.len() + 2);
}

#[tokio::test]
async fn an_overflow_after_a_threshold_compaction_in_the_same_attempt_is_retried_directly() {
    // About 9,400 estimated tokens: over the threshold of 8,192 - 1,024.
    let env = env(
        &[4_000, 4_000, 4_000, 8_000, 8_000, 8_000],
        vec![overflow(8_192, 9_000), answer("Done.")],
    )
    .await;
    let setup = Setup::new(8_192, 1_024);
    let outcome = run(
        &env,
        &setup,
        ExtractiveSummarizer::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let report = &outcome.recovery;
    assert_eq!(report.compactions.len(), 1, "a second compaction ran");
    assert_eq!(report.compactions[0].trigger, CompactionTrigger::Threshold);
    assert!(report.compactions[0].is_compacted());
    assert_eq!(overflow_actions(report), [RecoveryAction::DirectRetry]);
    assert_eq!(report.overflow_compaction_attempts, 1);
    assert_eq!(report.attempts, 2);
    let sent = bodies(&env.server).await;
    assert_eq!(sent.len(), 2);
    // A direct retry sends the same request again.
    assert_eq!(sent[0], sent[1]);
    assert_wire_clean(&sent[1]);
}

#[tokio::test]
async fn three_overflow_compactions_then_truncation_then_an_answer() {
    // A provider with a large hidden overhead (a server-side prompt skald cannot see): it keeps
    // counting far more than the messages while they shrink. Each compaction knows that
    // overhead from the figures and shrinks the kept tail further; then the count is spent and
    // the fallback truncates what is left.
    let env = env(
        &[4_000, 4_000, 4_000, 24_000, 24_000, 24_000],
        vec![
            overflow(32_000, 33_000),
            overflow(32_000, 32_600),
            overflow(32_000, 32_300),
            overflow(32_000, 32_100),
            answer("Builds 3 to 5 fail to link."),
        ],
    )
    .await;
    // The agent is inside its answer: it has just read one more log, and sending that result is
    // what overflows. Compactions cut down to that latest step; its result is what is left to
    // truncate.
    for message in turn(6, 24_000).into_iter().skip(1).take(2) {
        env.sessions
            .append_message(&tenant_named(TENANT), &session_named(SESSION), message)
            .unwrap();
    }
    let entries_before = env
        .sessions
        .entries(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap();
    let setup = Setup::new(32_000, 2_000);
    let outcome = run(
        &env,
        &setup,
        ExtractiveSummarizer::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let report = &outcome.recovery;
    assert_eq!(
        overflow_actions(report),
        [
            RecoveryAction::Compacted,
            RecoveryAction::Compacted,
            RecoveryAction::Compacted,
            RecoveryAction::Truncated
        ],
        "{report:#?}"
    );
    assert_eq!(report.overflow_compaction_attempts, 3);
    assert_eq!(report.compactions.len(), 3);
    assert!(report.compactions.iter().all(|compaction| {
        compaction.trigger == CompactionTrigger::Overflow && compaction.is_compacted()
    }));
    let truncation = report.truncation.as_ref().unwrap();
    assert!(truncation.truncated());
    assert_eq!(truncation.attempt, 4);
    assert_eq!(report.attempts, 5);
    assert_eq!(outcome.response.text(), "Builds 3 to 5 fail to link.");

    let sent = bodies(&env.server).await;
    assert_eq!(sent.len(), 5);
    for pair in sent.windows(2) {
        assert!(body_chars(&pair[1]) < body_chars(&pair[0]));
    }
    for body in &sent {
        assert_wire_clean(body);
    }
    // Refs exist from the truncations: the model is offered the tool that reads them.
    let last = &sent[4];
    let tools: Vec<&str> = last["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["bash", "fetch_original_data"]);
    assert_nothing_lost(&env.sessions, &entries_before);
}

#[tokio::test]
async fn a_compaction_that_cannot_shrink_falls_back_to_persistent_truncation() {
    // Two turns and the question: everything is in the preserved recent turns, which fit the
    // compaction's budget, so there is nothing to compact; one log of 50,000 characters is over
    // the per-result budget. The provider states no figures.
    let env = env(
        &[50_000, 1_000],
        vec![bare_overflow(), answer("Build 1 fails to link.")],
    )
    .await;
    let entries_before = env
        .sessions
        .entries(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap();
    let context_before = env
        .sessions
        .context(&tenant_named(TENANT), &session_named(SESSION), None)
        .unwrap();
    let old_leaf = shape(&env.sessions).1;
    let setup = Setup::new(32_000, 2_000);
    let outcome = run(
        &env,
        &setup,
        ExtractiveSummarizer::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let report = &outcome.recovery;
    assert_eq!(report.compactions.len(), 1);
    assert!(
        matches!(
            report.compactions[0].outcome,
            CompactionOutcome::Skipped {
                reason: SkipReason::NothingToCompact,
                ..
            }
        ),
        "{:?}",
        report.compactions[0].outcome
    );
    assert_eq!(overflow_actions(report), [RecoveryAction::Truncated]);
    let truncation = report.truncation.as_ref().unwrap();
    assert_eq!(truncation.summary.results, 1);
    assert_eq!(truncation.summary.budget_chars, 38_400);
    assert_eq!(truncation.ref_ids.len(), 1);

    // The original is in the ref store, and the marker the model sees names it.
    let original = env
        .refs
        .get(&tenant_named(TENANT), &truncation.ref_ids[0])
        .unwrap();
    assert!(
        original
            .text()
            .contains("error: linker failed at /srv/app/src/main_0.rs")
    );
    let sent = bodies(&env.server).await;
    assert_eq!(sent.len(), 2);
    assert_wire_clean(&sent[1]);
    let retry = sent[1].to_string();
    assert!(retry.contains(&truncation.ref_ids[0]));
    assert!(body_chars(&sent[1]) < body_chars(&sent[0]));

    // The truncation is a new branch; the old one is still there, whole.
    assert_nothing_lost(&env.sessions, &entries_before);
    let old_branch = env
        .sessions
        .context(
            &tenant_named(TENANT),
            &session_named(SESSION),
            old_leaf.as_deref(),
        )
        .unwrap();
    assert_eq!(old_branch, context_before);
    let session = env
        .sessions
        .load(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap();
    let marker = session
        .entry(truncation.marker_entry_id.as_deref().unwrap())
        .unwrap();
    assert!(
        matches!(&marker.kind, EntryKind::Custom { custom_type, .. } if custom_type == "skald.branch_rewrite")
    );
}

#[tokio::test]
async fn when_everything_is_spent_the_turn_ends_with_the_seeds_message_and_nothing_is_lost() {
    let env = env(
        &[1_500; 6],
        vec![
            overflow(8_192, 9_000),
            overflow(8_192, 9_000),
            overflow(8_192, 9_000),
        ],
    )
    .await;
    let entries_before = env
        .sessions
        .entries(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap();
    let setup = Setup::new(8_192, 1_024);
    let error = run(
        &env,
        &setup,
        ExtractiveSummarizer::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(error.to_string(), CONTEXT_OVERFLOW_MESSAGE);
    let RecoveryError::ContextOverflow { last_error, report } = &error else {
        panic!("expected ContextOverflow, got {error:?}");
    };
    assert!(last_error.is_context_overflow());
    // Compacted once, down to the latest assistant step (a split turn: every log went into the
    // summary); the second compaction has nothing left to summarise and the fallback finds no
    // tool result left to truncate, so everything is spent.
    assert_eq!(
        overflow_actions(report),
        [RecoveryAction::Compacted, RecoveryAction::GaveUp],
        "{report:#?}"
    );
    assert_eq!(report.compactions.len(), 2);
    assert_eq!(report.overflow_compaction_attempts, 2);
    assert!(!report.truncation.as_ref().unwrap().truncated());
    assert_eq!(report.attempts, 2);
    let sent = bodies(&env.server).await;
    assert_eq!(sent.len() as u32, report.attempts);
    for body in &sent {
        assert_wire_clean(body);
    }
    // Nothing the user gave is lost: every entry is still stored as it was, and the question
    // is still the last thing on the active branch.
    assert_nothing_lost(&env.sessions, &entries_before);
    let context = env
        .sessions
        .context(&tenant_named(TENANT), &session_named(SESSION), None)
        .unwrap();
    assert_eq!(
        context.last().unwrap().plain_text(),
        "Which builds failed, and why?"
    );
}

#[tokio::test]
async fn an_overflow_reported_as_an_assistant_error_with_status_200_is_recovered() {
    let env = env(
        &[800; 6],
        vec![overflow_as_assistant_error(), answer("All six fail.")],
    )
    .await;
    let setup = Setup::new(8_192, 1_024);
    let outcome = run(
        &env,
        &setup,
        ExtractiveSummarizer::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let report = &outcome.recovery;
    assert_eq!(report.overflows.len(), 1);
    assert_eq!(report.overflows[0].source, OverflowSource::AssistantError);
    assert_eq!(report.overflows[0].requested_tokens, Some(9_000));
    assert_eq!(overflow_actions(report), [RecoveryAction::Compacted]);
    assert_eq!(outcome.response.text(), "All six fail.");
    // The failed answer is not part of the session.
    let context = env
        .sessions
        .context(&tenant_named(TENANT), &session_named(SESSION), None)
        .unwrap();
    assert!(
        context
            .iter()
            .all(|message| !message.plain_text().contains("maximum context length"))
    );
}

#[tokio::test]
async fn a_rate_limit_is_not_an_overflow_and_is_returned_typed() {
    let (sessions, refs) = stores();
    seed(&sessions, &[800; 6]);
    let server = scripted(vec![rate_limited(), rate_limited()]).await;
    // The client retries once itself.
    let env = Env {
        sessions,
        refs,
        model: client(&server, 2),
        server,
    };
    let before = shape(&env.sessions);
    let setup = Setup::new(8_192, 1_024);
    let error = run(
        &env,
        &setup,
        ExtractiveSummarizer::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    let RecoveryError::Llm { source, report } = &error else {
        panic!("expected Llm, got {error:?}");
    };
    assert!(matches!(source, LlmError::RateLimited { .. }), "{source:?}");
    assert!(report.overflows.is_empty());
    assert!(report.compactions.is_empty());
    assert_eq!(bodies(&env.server).await.len(), 2);
    assert_eq!(shape(&env.sessions), before);
}

#[tokio::test]
async fn cancelling_during_the_overflow_compaction_leaves_the_session_unchanged() {
    let env = env(
        &[800; 6],
        vec![overflow(8_192, 9_000), answer("never sent")],
    )
    .await;
    let before = shape(&env.sessions);
    let entries_before = env
        .sessions
        .entries(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap();
    let cancel = CancellationToken::new();
    let summarizer = StopDuringSummary {
        cancel: cancel.clone(),
    };
    let setup = Setup::new(8_192, 1_024);
    let error = run(&env, &setup, summarizer, &cancel).await.unwrap_err();
    let RecoveryError::Aborted { report } = &error else {
        panic!("expected Aborted, got {error:?}");
    };
    assert_eq!(report.attempts, 1);
    assert_eq!(bodies(&env.server).await.len(), 1);
    assert_eq!(shape(&env.sessions), before);
    assert_eq!(
        env.sessions
            .entries(&tenant_named(TENANT), &session_named(SESSION))
            .unwrap(),
        entries_before
    );
}

#[tokio::test]
async fn the_iteration_cap_ends_the_loop() {
    let env = env(
        &[800; 6],
        vec![
            overflow(8_192, 9_000),
            overflow(8_192, 9_000),
            answer("never sent"),
        ],
    )
    .await;
    let mut setup = Setup::new(8_192, 1_024);
    setup.settings.max_iterations = 2;
    let error = run(
        &env,
        &setup,
        ExtractiveSummarizer::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    let RecoveryError::IterationLimit {
        iterations,
        last_error,
        report,
    } = &error
    else {
        panic!("expected IterationLimit, got {error:?}");
    };
    assert_eq!(*iterations, 2);
    assert!(last_error.is_context_overflow());
    assert_eq!(report.attempts, 2);
    assert_eq!(
        overflow_actions(report),
        [RecoveryAction::Compacted, RecoveryAction::IterationLimit]
    );
    assert_eq!(bodies(&env.server).await.len(), 2);
}

#[tokio::test]
async fn a_compaction_that_itself_overflowed_goes_straight_to_the_fallback() {
    // Over the threshold: the threshold compaction runs first, and its summarizer overflows.
    let env = env(
        &[4_000, 4_000, 4_000, 8_000, 8_000, 8_000],
        vec![overflow(8_192, 12_000), answer("Done.")],
    )
    .await;
    let setup = Setup::new(8_192, 1_024);
    let outcome = run(
        &env,
        &setup,
        OverflowingSummarizer,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let report = &outcome.recovery;
    assert_eq!(report.compactions.len(), 1, "{report:#?}");
    assert_eq!(report.compactions[0].trigger, CompactionTrigger::Threshold);
    assert!(!report.compactions[0].is_compacted());
    assert!(report.compactions[0].summarizer_overflowed);
    assert_eq!(report.overflow_compaction_attempts, 0);
    assert_eq!(overflow_actions(report), [RecoveryAction::Truncated]);
    let sent = bodies(&env.server).await;
    assert_eq!(sent.len(), 2);
    assert!(body_chars(&sent[1]) < body_chars(&sent[0]));
    for body in &sent {
        assert_wire_clean(body);
    }
}

#[tokio::test]
async fn an_unknown_session_is_an_error_before_any_call() {
    let (sessions, refs) = stores();
    let server = scripted(vec![answer("never sent")]).await;
    let env = Env {
        sessions,
        refs,
        model: client(&server, 1),
        server,
    };
    let setup = Setup::new(8_192, 1_024);
    let error = run(
        &env,
        &setup,
        ExtractiveSummarizer::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, RecoveryError::Engine(_)), "{error:?}");
    assert!(error.report().is_none());
    assert_eq!(bodies(&env.server).await.len(), 0);
}

// ------------------------------------------------------------------------------------------
// The memory write path around a turn
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn with_memory_on_the_compacted_span_is_archived_and_the_turn_goes_on() {
    use skald_engine::ExtractionStatus;
    use skald_store::memories::MemoryStore;

    let env = env(
        &[8_000, 8_000, 8_000, 300, 300, 300],
        vec![overflow(8_192, 9_000), answer("Every build fails to link.")],
    )
    .await;
    let setup = Setup::new(8_192, 512);
    let memories = skald_store::test_stores::memory_store();
    let engine = engine(
        &env,
        &setup,
        Arc::new(ExtractiveSummarizer::default()),
        Some(memories.clone()),
    );
    let identity = MemoryIdentity::new("alice", "main").unwrap();
    let outcome = engine
        .complete_turn(
            &TENANT_ID,
            &SESSION_ID,
            model_turn(&env, &setup, &[], Some(&identity)),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.response.text(), "Every build fails to link.");
    let report = &outcome.recovery;
    assert!(
        report.memory_errors.is_empty(),
        "{:?}",
        report.memory_errors
    );
    // The request was over half the window: the upload driver ran first.
    assert!(report.upload.is_some());
    let compaction = report
        .compactions
        .iter()
        .find(|record| record.is_compacted())
        .unwrap();
    let archive = compaction.memory_archive.as_ref().unwrap();
    assert_eq!(archive.status, ExtractionStatus::Done, "{archive:?}");
    let stored = memories
        .get(&tenant_named(TENANT), &archive.archive[0])
        .unwrap();
    assert!(stored.l2.contains(SYSTEM_PROMPT));
    assert!(
        archive.archive[0]
            .as_str()
            .starts_with(&format!("viking://session/{SESSION}/archive_")),
        "{}",
        archive.archive[0]
    );
}

#[tokio::test]
async fn with_memory_on_each_call_gets_the_profile_and_recalled_memories_but_the_session_keeps_neither()
 {
    use skald_core::memory::uri::MemoryUri;
    use skald_store::memories::{MemoryStore, NewMemory};

    let env = env(
        &[300],
        vec![answer("Use the release profile."), answer("Done.")],
    )
    .await;
    env.sessions
        .append_message(
            &tenant_named(TENANT),
            &session_named(SESSION),
            Message::text(
                Role::User,
                "Why is the linker failing on the release build?",
            ),
        )
        .unwrap();
    let memories = skald_store::test_stores::memory_store();
    let profile = MemoryUri::parse("viking://user/alice/memories/profile/profile.md").unwrap();
    memories
        .add(
            &tenant_named(TENANT),
            NewMemory::new(profile, "Alice maintains the build system of Acme."),
        )
        .unwrap();
    let case = MemoryUri::parse("viking://agent/main/memories/cases/linker-release.md").unwrap();
    memories
        .add(
            &tenant_named(TENANT),
            NewMemory::new(
                case,
                "The release build linker failed on lld 17; pinning lld 16 in rust-toolchain fixed it.",
            ),
        )
        .unwrap();
    let identity = MemoryIdentity::new("alice", "main").unwrap();
    let setup = Setup::new(200_000, 4_096);
    let engine = engine(
        &env,
        &setup,
        Arc::new(ExtractiveSummarizer::default()),
        Some(memories.clone()),
    );
    let turn = model_turn(&env, &setup, &[], Some(&identity));
    let before = env
        .sessions
        .load(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap()
        .entries()
        .len();
    let outcome = engine
        .complete_turn(&TENANT_ID, &SESSION_ID, turn, &CancellationToken::new())
        .await
        .unwrap();
    let recall = outcome.recovery.recall.as_ref().unwrap();
    assert_eq!(recall.kept.len(), 1, "{recall:?}");
    assert!(recall.kept[0].uri.ends_with("linker-release.md"));

    let sent = bodies(&env.server).await;
    let body = &sent[0];
    let text = body.to_string();
    assert!(
        text.contains("Alice maintains the build system"),
        "profile in the system prompt"
    );
    assert!(text.contains("pinning lld 16"), "the recalled memory");
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["function"]["name"].as_str())
        .collect();
    for name in [
        "search_memories",
        "memory_ls",
        "memory_read",
        "commit_memory",
        "memory_forget",
    ] {
        assert!(tools.contains(&name), "{name} offered: {tools:?}");
    }
    let messages = sent_messages(body);
    let recall_at = messages
        .iter()
        .position(|m| m.tool_calls().any(|call| call.name == "search_memories"))
        .unwrap();
    let last_user = messages.iter().rposition(|m| m.role == Role::User).unwrap();
    assert!(
        recall_at > last_user,
        "recall comes after the latest user message"
    );

    // Only the answer was stored: nothing injected reaches the session.
    let session = env
        .sessions
        .load(&tenant_named(TENANT), &session_named(SESSION))
        .unwrap();
    assert_eq!(session.entries().len(), before + 1);
    let stored: String = session
        .build_context(None)
        .iter()
        .map(|message| format!("{message:?}"))
        .collect();
    assert!(!stored.contains("search_memories") && !stored.contains("Alice maintains"));

    // The next call sends the same session-start snapshot, byte for byte, even after the
    // profile changed: the prompt cache holds.
    let profile = MemoryUri::parse("viking://user/alice/memories/profile/profile.md").unwrap();
    memories
        .update(
            &tenant_named(TENANT),
            NewMemory::new(profile, "Alice now leads the platform team."),
        )
        .unwrap();
    env.sessions
        .append_message(
            &tenant_named(TENANT),
            &session_named(SESSION),
            Message::text(Role::User, "And on debug builds?"),
        )
        .unwrap();
    engine
        .complete_turn(&TENANT_ID, &SESSION_ID, turn, &CancellationToken::new())
        .await
        .unwrap();
    let sent = bodies(&env.server).await;
    assert_eq!(
        sent[0]["messages"][0], sent[1]["messages"][0],
        "same system prompt"
    );
    assert!(!sent[1].to_string().contains("platform team"));
}

/// A caller that sends the requests itself (the proxy): each prepared call's estimate is
/// recorded for the context's model, the provider's reported usage pairs with it, and the next
/// turn's threshold decision uses the calibrated size.
#[tokio::test]
async fn a_driver_records_each_calls_count_and_reported_usage_calibrates_the_next_threshold() {
    let (sessions, refs) = stores();
    seed(&sessions, &[3_000, 3_000]);
    let summarizer = ExtractiveSummarizer::default();
    let cancel = CancellationToken::new();
    let mut state = SessionState::default();

    let roomy = Setup::new(1_000_000, CompactionSettings::default().reserve_tokens);
    let first_ctx = driver_context(&sessions, &refs, &summarizer, &roomy, "gpt-test");
    let mut first = TurnDriver::new(&first_ctx, Default::default()).unwrap();
    let call = first.prepare(&mut state, &cancel).await.unwrap();
    let counted = call.request_tokens;
    assert!(first.report().compactions.is_empty());
    let observed = state.observe_usage(counted * 4).unwrap();
    assert_eq!(
        (observed.model.as_str(), observed.counted, observed.reported),
        ("gpt-test", counted, counted * 4)
    );
    assert_eq!(
        state.calibrated_tokens(Some("gpt-test"), counted),
        counted * 4
    );

    // A window skald's estimate fits in and the provider's count does not.
    let tight = Setup::new(counted * 2, counted / 2);
    let other_ctx = driver_context(&sessions, &refs, &summarizer, &tight, "another-model");
    let mut other = TurnDriver::new(&other_ctx, Default::default()).unwrap();
    other.prepare(&mut state, &cancel).await.unwrap();
    assert!(other.report().compactions.is_empty());

    let next_ctx = driver_context(&sessions, &refs, &summarizer, &tight, "gpt-test");
    let mut next = TurnDriver::new(&next_ctx, Default::default()).unwrap();
    next.prepare(&mut state, &cancel).await.unwrap();
    let compactions = &next.report().compactions;
    assert_eq!(compactions.len(), 1, "{compactions:?}");
    assert_eq!(compactions[0].trigger, CompactionTrigger::Threshold);
}

/// What a driver of the test session needs, for `model`.
fn driver_context<'a>(
    sessions: &'a dyn SessionStore,
    refs: &'a dyn RefStore,
    summarizer: &'a dyn Summarizer,
    setup: &'a Setup,
    model: &'a str,
) -> PrepareContext<'a> {
    PrepareContext {
        model: Some(model),
        sessions,
        refs,
        tenant: &TENANT_ID,
        session_id: &SESSION_ID,
        summarizer,
        policy: &setup.policy,
        compaction: &setup.compaction,
        window_tokens: setup.window,
        system_prompt: Some(SYSTEM_PROMPT),
        tools: &[],
        host_prefix_tokens: None,
        fetch_available: true,
        now_ms: 1_770_000_000_000,
        agents_md: None,
        settings: &setup.settings,
    }
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

/// A session id of the tests, parsed (it is well formed).
fn session_named(id: &str) -> skald_core::ids::SessionId {
    skald_core::ids::SessionId::parse(id).unwrap()
}

/// Answers the first request by fetching the first ref it names, and the next with text.
struct FetchFirstRef {
    calls: Mutex<u32>,
}

impl Respond for FetchFirstRef {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut calls = self.calls.lock().unwrap();
        *calls += 1;
        if *calls > 1 {
            return answer("Build 1 fails: undefined reference to `ledger_total`.");
        }
        let body = String::from_utf8_lossy(&request.body).into_owned();
        let Some(id) = skald_core::refs::ref_ids_in(&body).into_iter().next() else {
            return ResponseTemplate::new(500).set_body_string("the request names no ref");
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-fetch",
            "object": "chat.completion",
            "created": 1_770_000_000,
            "model": "test-model",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": "Reading the log.", "tool_calls": [{
                    "id": "call_fetch", "type": "function", "function": {
                        "name": "fetch_original_data",
                        "arguments": json!({"ref_ids": [id.to_string()], "grep": "error"}).to_string()
                    }
                }]},
                "finish_reason": "tool_calls"
            }],
            "usage": {"prompt_tokens": 1_500, "completion_tokens": 30, "total_tokens": 1_530}
        }))
    }
}

#[tokio::test]
async fn a_call_of_skalds_fetch_is_run_in_a_hidden_round_and_the_turn_goes_on_to_the_answer() {
    let (sessions, refs) = stores();
    seed(&sessions, &[6_000, 6_000]);
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(FetchFirstRef {
            calls: Mutex::new(0),
        })
        .mount(&server)
        .await;
    let env = Env {
        sessions,
        refs,
        model: client(&server, 1),
        server,
    };
    let mut setup = Setup::new(200_000, 1_024);
    setup.policy = Policy::preset("sccs").unwrap();
    let summarizer = ExtractiveSummarizer::default();
    let outcome = run(&env, &setup, summarizer, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        outcome.response.text(),
        "Build 1 fails: undefined reference to `ledger_total`."
    );
    assert_eq!(outcome.recovery.attempts, 2);
    let sent = bodies(&env.server).await;
    assert_eq!(sent.len(), 2);
    for body in &sent {
        assert_wire_clean(body);
    }
    // The second call continues from skald's round: the fetch call, then its result.
    let second = sent_messages(&sent[1]);
    let fetched = &second[second.len() - 1];
    assert_eq!(fetched.role, Role::ToolResult);
    let Block::ToolResult(result) = &fetched.content[0] else {
        panic!("a tool result: {fetched:?}");
    };
    assert_eq!(result.call_id, "call_fetch");
    let text: String = result
        .content
        .iter()
        .map(|block| match block {
            Block::Text(text) => text.text.as_str(),
            Block::Image(_)
            | Block::Thinking(_)
            | Block::ToolCall(_)
            | Block::ToolResult(_)
            | Block::Opaque(_) => "",
        })
        .collect();
    assert!(
        text.contains("error: linker failed at /srv/app/src/main_"),
        "the fetched original's error line: {text}"
    );
    assert_eq!(
        second[second.len() - 2].tool_calls().next().unwrap().name,
        "fetch_original_data"
    );
    // The session keeps the hidden round before the answer, whose leaf it is.
    let context = env
        .sessions
        .context(&tenant_named(TENANT), &session_named(SESSION), None)
        .unwrap();
    let last = context.last().unwrap();
    assert_eq!(
        last.plain_text(),
        "Build 1 fails: undefined reference to `ledger_total`."
    );
    assert!(
        context[context.len() - 3]
            .tool_calls()
            .any(|call| call.name == "fetch_original_data")
    );
}
