//! The engine end to end on small conversations, through `Engine::assemble` (the host sends its
//! whole conversation each call, as OpenClaw does): what the model sees, that every ref it sees
//! is stored and fetchable, that decisions repeat byte for byte, and replay.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;
use skald_core::ids::SessionId;
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_core::pipeline::policy::Policy;
use skald_core::refs::{RefId, ref_ids_in};
use skald_engine::replay::{ReplaySettings, replay};
use skald_engine::{
    AssembleInput, Engine, EngineConfig, EngineError, ManualClock, Stores, ToolRun, View,
    ViewOptions,
};
use skald_store::RefStore;
use tokio_util::task::TaskTracker;

fn call(id: &str, name: &str, arguments: serde_json::Value) -> Message {
    Message::new(
        Role::Assistant,
        vec![Block::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            arguments_text: None,
            extra: Extra::new(),
        })],
    )
}

fn result(id: &str, name: &str, text: &str) -> Message {
    Message::new(
        Role::ToolResult,
        vec![Block::ToolResult(ToolResult {
            call_id: id.into(),
            tool_name: Some(name.into()),
            content: vec![Block::text(text)].into(),
            content_form: ContentForm::Blocks,
            is_error: Some(false),
            details: Some(json!({"fullOutputPath": "/tmp/x.log"}).into()),
            extra: Extra::new(),
        })],
    )
}

fn pytest_log(lines: usize) -> String {
    let mut text: String = (0..lines)
        .map(|i| format!("tests/test_ledger.py::test_case_{i:03} PASSED\n"))
        .collect();
    text.push_str("FAILED tests/test_ledger.py::test_rounding - AssertionError: 10.01 != 10.00\n");
    text.push_str("1 failed, 200 passed in 0.84s\n");
    text
}

fn source_file(lines: usize) -> String {
    let mut text = String::from("from decimal import Decimal, ROUND_HALF_EVEN\n\n");
    for i in 0..lines {
        text.push_str(&format!(
            "def helper_{i}(value):\n    return Decimal(value).quantize(Decimal('0.01'))\n\n"
        ));
    }
    text
}

fn session() -> Vec<Message> {
    vec![
        Message::text(Role::System, "You are a careful coding agent."),
        Message::text(Role::User, "Fix the failing test in tests/test_ledger.py."),
        call("c1", "bash", json!({"command": "pytest -q"})),
        result("c1", "bash", &pytest_log(200)),
        call("c2", "read", json!({"path": "src/ledger/rounding.py"})),
        result("c2", "read", &source_file(40)),
        call(
            "c3",
            "write",
            json!({"path": "src/ledger/rounding.py", "content": source_file(30)}),
        ),
        result("c3", "write", "Wrote src/ledger/rounding.py"),
    ]
}

/// The tenant of the requests, as the engine takes it.
static ACME: std::sync::LazyLock<skald_core::ids::Tenant> =
    std::sync::LazyLock::new(|| tenant_named("acme"));

/// An engine over `refs` (sessions and memories in memory) running `policy`, memory off, its
/// clock in the test's hands.
struct Harness {
    engine: Engine,
    clock: Arc<ManualClock>,
}

/// How one call is made: when, the model's window, and whether the host runs the fetch tool.
#[derive(Clone, Copy)]
struct Call {
    now_ms: i64,
    window_tokens: u64,
    fetch_available: bool,
}

/// A call at `now_ms` with a 200k window from a host that runs the fetch tool.
fn at(now_ms: i64) -> Call {
    Call {
        now_ms,
        window_tokens: 200_000,
        fetch_available: true,
    }
}

fn harness(refs: Arc<dyn RefStore>, policy: Policy) -> Harness {
    let clock = Arc::new(ManualClock::new(0));
    let mut config = EngineConfig::new(policy);
    config.memory.enabled = false;
    config.clock = clock.clone();
    let stores = Stores {
        refs,
        ..Stores::in_memory().unwrap()
    };
    Harness {
        engine: Engine::new(stores, config, TaskTracker::new()).unwrap(),
        clock,
    }
}

impl Harness {
    /// The host's whole conversation of `session`, sent as one `assemble` call.
    async fn try_assemble(
        &self,
        session: &str,
        messages: Vec<Message>,
        call: Call,
    ) -> Result<View, EngineError> {
        self.clock.set(call.now_ms);
        let available_tools = (!call.fetch_available).then(HashSet::<String>::new);
        let input = AssembleInput {
            messages: Some(messages),
            source_format: "openclaw".into(),
            model: None,
            options: ViewOptions {
                window_tokens: Some(call.window_tokens),
                available_tools,
                ..ViewOptions::default()
            },
            budget_tokens: None,
            agents_md: None,
        };
        let session = SessionId::parse(session).unwrap();
        Ok(self.engine.assemble(&ACME, &session, input).await?.view)
    }

    async fn assemble(&self, session: &str, messages: Vec<Message>, call: Call) -> View {
        self.try_assemble(session, messages, call).await.unwrap()
    }

    async fn fetch(&self, tenant: &str, arguments: serde_json::Value) -> ToolRun {
        self.engine
            .run_tool(
                &tenant_named(tenant),
                None,
                "fetch_original_data",
                &arguments,
            )
            .await
    }
}

/// The model-visible layout as a reader sees it.
fn render(assembled: &View) -> String {
    let mut out = String::new();
    if let Some(addition) = &assembled.view.pipeline_addition {
        out.push_str(&format!("[system addition] {} chars\n", addition.len()));
    }
    for tool in &assembled.tools {
        out.push_str(&format!("[tool] {}\n", tool.name));
    }
    for message in &assembled.view.messages {
        out.push_str(&format!("[{}]\n", message.role.name()));
        for block in &message.content {
            match block {
                Block::Text(text) => out.push_str(&format!("  {}\n", clip(&text.text))),
                Block::ToolCall(call) => out.push_str(&format!(
                    "  -> {}({})\n",
                    call.name,
                    clip(&call.arguments.to_string())
                )),
                Block::ToolResult(result) => {
                    for inner in &result.content {
                        if let Block::Text(text) = inner {
                            out.push_str(&format!(
                                "  <- {}: {}\n",
                                result.call_id,
                                clip(&text.text)
                            ));
                        }
                    }
                }
                Block::Image(_) | Block::Thinking(_) | Block::Opaque(_) => {
                    out.push_str("  (other)\n")
                }
            }
        }
    }
    out
}

/// Every text the request carries, unclipped.
fn full_text(assembled: &View) -> String {
    assembled
        .view
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .map(|block| match block {
            Block::Text(text) => text.text.clone(),
            Block::ToolCall(call) => call.arguments.to_string(),
            Block::ToolResult(result) => skald_core::pipeline::offload::text_of(result),
            Block::Image(_) | Block::Thinking(_) | Block::Opaque(_) => String::new(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn clip(text: &str) -> String {
    let one_line = text.replace('\n', "⏎");
    if one_line.chars().count() > 600 {
        format!(
            "{}… ({} chars)",
            one_line.chars().take(600).collect::<String>(),
            text.chars().count()
        )
    } else {
        one_line
    }
}

#[tokio::test]
async fn skald_policy_layout_after_assemble() {
    let refs = skald_store::test_stores::ref_store(Default::default());
    let skald = harness(refs, Policy::preset("skald").unwrap());
    let assembled = skald.assemble("s1", session(), at(0)).await;
    insta::assert_snapshot!("skald_layout", render(&assembled));
}

#[tokio::test]
async fn every_ref_the_model_sees_is_stored_and_fetchable() {
    let store = skald_store::test_stores::ref_store(Default::default());
    let skald = harness(store.clone(), Policy::preset("skald").unwrap());
    let assembled = skald.assemble("s1", session(), at(0)).await;
    let visible = full_text(&assembled);
    let ids = ref_ids_in(&visible);
    assert!(
        ids.len() >= 2,
        "pytest log and the old write's content leave: {visible}"
    );
    for id in &ids {
        let payload = store.get(&tenant_named("acme"), id.as_str()).unwrap();
        assert!(!payload.text().is_empty());
        // Another tenant sees nothing, stored or fetched.
        assert!(store.get(&tenant_named("other"), id.as_str()).is_err());
        let theirs = skald
            .fetch("other", json!({"ref_ids": [id.as_str()]}))
            .await;
        assert!(theirs.is_error, "{}", theirs.text);
    }
    // The pytest log comes back, sliced.
    let log_id = ids
        .iter()
        .find(|id| {
            store
                .get(&tenant_named("acme"), id.as_str())
                .unwrap()
                .text()
                .contains("PASSED")
        })
        .unwrap();
    let fetched = skald
        .fetch(
            "acme",
            json!({"ref_ids": [log_id.as_str()], "grep": "FAILED", "context": 0}),
        )
        .await;
    assert!(!fetched.is_error, "{}", fetched.text);
    assert!(
        fetched
            .text
            .contains("FAILED tests/test_ledger.py::test_rounding"),
        "{}",
        fetched.text
    );
    assert!(!fetched.text.contains("test_case_000 PASSED"));
}

/// A store that records the batches it is given and can be made to fail.
struct BatchRecorder {
    inner: std::sync::Arc<dyn skald_store::RefStore>,
    batches: std::sync::Mutex<Vec<usize>>,
    fail: std::sync::atomic::AtomicBool,
}

impl skald_store::RefStore for BatchRecorder {
    fn put(
        &self,
        tenant: &skald_core::ids::Tenant,
        payload: &skald_core::refs::RefPayload,
    ) -> Result<RefId, skald_store::StoreError> {
        self.inner.put(tenant, payload)
    }

    fn put_many(
        &self,
        tenant: &skald_core::ids::Tenant,
        payloads: &[&skald_core::refs::CanonicalPayload],
    ) -> Result<(), skald_store::StoreError> {
        self.batches.lock().unwrap().push(payloads.len());
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(skald_store::StoreError::Corrupt("disk on fire".into()));
        }
        self.inner.put_many(tenant, payloads)
    }

    fn get(
        &self,
        tenant: &skald_core::ids::Tenant,
        id: &str,
    ) -> Result<skald_core::refs::RefPayload, skald_store::StoreError> {
        self.inner.get(tenant, id)
    }

    fn stats(
        &self,
        tenant: &skald_core::ids::Tenant,
    ) -> Result<skald_store::RefStats, skald_store::StoreError> {
        self.inner.stats(tenant)
    }
}

fn recorder(fail: bool) -> Arc<BatchRecorder> {
    Arc::new(BatchRecorder {
        inner: skald_store::test_stores::ref_store(Default::default()),
        batches: Default::default(),
        fail: fail.into(),
    })
}

#[tokio::test]
async fn the_refs_of_one_request_are_stored_in_one_batch() {
    let store = recorder(false);
    let skald = harness(store.clone(), Policy::preset("skald").unwrap());
    let assembled = skald.assemble("s1", session(), at(0)).await;
    let stored = assembled.view.report.refs_stored;
    assert!(stored >= 2, "{stored}");
    assert_eq!(*store.batches.lock().unwrap(), vec![stored]);
    for id in ref_ids_in(&full_text(&assembled)) {
        assert!(
            store.inner.get(&tenant_named("acme"), id.as_str()).is_ok(),
            "{id} not stored"
        );
    }
    // The next request has nothing new to store and does not call the store.
    skald.assemble("s1", session(), at(1_000)).await;
    assert_eq!(store.batches.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_failed_batch_fails_the_request_and_hands_out_no_ref() {
    let store = recorder(true);
    let skald = harness(store.clone(), Policy::preset("skald").unwrap());
    let error = skald
        .try_assemble("s1", session(), at(0))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("disk on fire"), "{error}");
    // Once the store works again, the same request stores every ref it names: none was taken
    // for stored when its batch failed.
    store.fail.store(false, std::sync::atomic::Ordering::SeqCst);
    let assembled = skald.assemble("s1", session(), at(1_000)).await;
    let named = ref_ids_in(&full_text(&assembled));
    assert!(named.len() >= 2);
    for id in named {
        assert!(
            store.inner.get(&tenant_named("acme"), id.as_str()).is_ok(),
            "{id} not stored"
        );
    }
}

#[tokio::test]
async fn fetch_reports_each_bad_id_on_its_own() {
    let skald = harness(
        skald_store::test_stores::ref_store(Default::default()),
        Policy::preset("skald").unwrap(),
    );
    let unknown = RefId::of_bytes(b"never stored");
    let out = skald
        .fetch(
            "acme",
            json!({"ref_ids": ["../../etc/passwd", unknown.as_str()]}),
        )
        .await;
    assert!(out.is_error);
    assert!(out.text.contains("../../etc/passwd"), "{}", out.text);
    assert!(out.text.contains(unknown.as_str()), "{}", out.text);
    let bad = skald.fetch("acme", json!({"ids": []})).await;
    assert!(bad.is_error);
    assert!(bad.text.contains("unknown argument"), "{}", bad.text);
}

/// skald's earlier default: a result leaves once the model has answered it, whatever the cache
/// write costs (the `skald` preset now weighs that write: see the cost-aware test below).
fn cache_aware_policy() -> Policy {
    Policy::from_toml(
        "[schedule]\nmode = \"cache-aware\"\nkeep_recent_assistants = 1\nimmediate_over_chars = 6000\n",
    )
    .unwrap()
}

#[tokio::test]
async fn decisions_repeat_byte_for_byte_as_the_session_grows() {
    let refs = skald_store::test_stores::ref_store(Default::default());
    let skald = harness(refs, cache_aware_policy());
    let mut messages = session();
    let first = skald.assemble("s1", messages.clone(), at(0)).await;
    messages.push(Message::text(Role::Assistant, "Tests pass now."));
    messages.push(Message::text(Role::User, "Thanks. Also run the linter."));
    let second = skald.assemble("s1", messages, at(30_000)).await;
    let (first, second_view) = (&first.view, &second.view);
    // The write call (index 5: the host's system prompt is the host's, not in the view) was the
    // newest assistant turn in the first request; now that it is answered, its long content
    // leaves. Everything before it repeats exactly: the cache miss covers only the messages
    // from that call on.
    assert_eq!(second_view.messages[..5], first.messages[..5]);
    assert_ne!(second_view.messages[5], first.messages[5]);
    assert!(
        second_view.messages[5]
            .tool_calls()
            .next()
            .unwrap()
            .arguments["content"]
            .as_str()
            .unwrap()
            .starts_with("[REF_ID: ")
    );
    // A third request repeats the second byte for byte.
    let mut third_input = session();
    third_input.push(Message::text(Role::Assistant, "Tests pass now."));
    third_input.push(Message::text(Role::User, "Thanks. Also run the linter."));
    let third = skald.assemble("s1", third_input, at(60_000)).await;
    assert_eq!(third.view.messages, second_view.messages);
    assert_eq!(second_view.pipeline_addition, first.pipeline_addition);
    assert_eq!(third.view.report.refs_stored, 0, "nothing new to store");
}

#[tokio::test]
async fn a_fresh_result_stays_visible_until_the_model_has_answered_it() {
    let refs = skald_store::test_stores::ref_store(Default::default());
    let skald = harness(refs, cache_aware_policy());
    let file = source_file(40);
    assert!(file.len() > 2_000 && file.len() < 6_000);
    let mut messages = vec![
        Message::text(Role::User, "Read the module."),
        call("r1", "read", json!({"path": "src/m.py"})),
        result("r1", "read", &file),
    ];
    let fresh = skald.assemble("s1", messages.clone(), at(0)).await;
    assert!(
        full_text(&fresh).contains("def helper_39"),
        "fresh result is shown in full"
    );
    messages.push(call("r2", "bash", json!({"command": "ls"})));
    messages.push(result("r2", "bash", "src\ntests"));
    let later = skald.assemble("s1", messages, at(5_000)).await;
    let text = full_text(&later);
    assert!(
        !text.contains("def helper_39"),
        "answered result left: {text}"
    );
    assert!(text.contains("[REF_ID: "));
}

#[tokio::test]
async fn nothing_is_offloaded_when_the_host_cannot_run_fetch() {
    let refs = skald_store::test_stores::ref_store(Default::default());
    let sccs = harness(refs, Policy::preset("sccs").unwrap());
    let call = Call {
        fetch_available: false,
        ..at(0)
    };
    let assembled = sccs.assemble("s1", session(), call).await;
    assert!(!render(&assembled).contains("[REF_ID: "));
    assert!(assembled.tools.is_empty());
    assert!(assembled.view.pipeline_addition.is_none());
}

#[tokio::test]
async fn replay_measures_savings_and_keeps_everything_recoverable() {
    let mut messages = session();
    // A later assistant call that uses identifiers from the earlier outputs.
    messages.push(Message::text(
        Role::Assistant,
        "The failure is in tests/test_ledger.py::test_rounding; /srv/ledger/config.toml is fine.",
    ));
    messages.push(Message::text(Role::User, "Go on."));
    messages.push(Message::text(Role::Assistant, "Done."));
    let settings = ReplaySettings::default();
    let none = replay(&messages, &Policy::preset("none").unwrap(), &settings)
        .await
        .unwrap();
    let skald = replay(&messages, &Policy::preset("skald").unwrap(), &settings)
        .await
        .unwrap();
    assert_eq!(none.calls, skald.calls);
    assert!(
        skald.input_tokens < none.input_tokens,
        "{} !< {}",
        skald.input_tokens,
        none.input_tokens
    );
    assert!(skald.offloads >= 2);
    assert_eq!(skald.retention.recoverable, 1.0);
    assert!(
        none.cache_read_tokens > 0,
        "consecutive calls share their prefix"
    );
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

#[tokio::test]
async fn openclaw_policy_keeps_pruned_results_pruned_across_assembles() {
    // OpenClaw 2026.9 prunes once the cache is cold and keeps the result pruned on later
    // requests, cache warm or not; the seed's version shows it in full again.
    let mut messages = vec![Message::text(Role::User, "go")];
    for round in 0..6 {
        let id = format!("c{round}");
        messages.push(call(
            &id,
            "read",
            json!({"path": format!("/src/{round}.rs")}),
        ));
        messages.push(result(&id, "read", &"x".repeat(20_000)));
    }
    let at = |now_ms: i64| Call {
        window_tokens: 50_000,
        ..at(now_ms)
    };
    let first_result = |assembled: &View| {
        assembled
            .view
            .messages
            .iter()
            .flat_map(|m| m.tool_results())
            .next()
            .map(|r| r.content.clone())
            .unwrap()
    };
    for (preset, stays) in [("openclaw", true), ("openclaw-seed", false)] {
        let refs = skald_store::test_stores::ref_store(Default::default());
        let engine = harness(refs, Policy::preset(preset).unwrap());
        // The first request starts the cache clock; six minutes later it has expired.
        engine.assemble("s1", messages.clone(), at(0)).await;
        let cold = engine.assemble("s1", messages.clone(), at(360_000)).await;
        assert_eq!(cold.view.report.prune.trimmed, 3, "{preset}");
        let warm = engine.assemble("s1", messages.clone(), at(420_000)).await;
        assert_eq!(warm.view.report.prune.trimmed, 0, "{preset}");
        assert_eq!(
            first_result(&warm) == first_result(&cold),
            stays,
            "{preset}: the trimmed result {}",
            if stays { "stays trimmed" } else { "comes back" }
        );
    }
}

#[tokio::test]
async fn cost_aware_schedule_offloads_only_what_pays_and_keeps_it_offloaded() {
    // Later rewrites weighed at a quarter of the run so far (the preset weighs them at twice
    // it, and a young read would leave after one turn: `a_young_read_leaves_after_one_turn`).
    let policy = Policy::from_toml(
        "preset = \"skald\"\n[schedule]\nmode = \"cost-aware\"\nremaining_calls_ratio = 0.25\n",
    )
    .unwrap();
    let skald = harness(
        skald_store::test_stores::ref_store(Default::default()),
        policy,
    );
    let refs = |assembled: &View| render(assembled).matches("[REF_ID: ").count();

    // A short session without large outputs never gets the fetch tool: nothing pays for it.
    let quiet = vec![Message::text(Role::User, "hi")];
    let first = skald.assemble("quiet", quiet, at(0)).await;
    assert!(first.tools.is_empty() && first.view.pipeline_addition.is_none());

    // A huge output leaves before it enters the cache, and the tool arrives with it.
    let mut messages = vec![
        Message::text(Role::User, "look at the log"),
        call("c1", "bash", json!({"command": "pytest"})),
        result("c1", "bash", &pytest_log(400)),
    ];
    let first = skald.assemble("s1", messages.clone(), at(0)).await;
    assert_eq!(refs(&first), 1);
    assert_eq!(first.tools.len(), 1);

    // A medium output the model has answered stays while its rewrite would not pay: the run
    // is young and the cached messages after it are many.
    messages.push(call("c2", "read", json!({"path": "/src/lib.rs"})));
    messages.push(result("c2", "read", &source_file(32)));
    for round in 0..6 {
        messages.push(Message::text(Role::Assistant, "x".repeat(4_000 + round)));
        messages.push(Message::text(Role::User, format!("next {round}")));
    }
    let mut seen = 0;
    for (call_number, end) in (5..=messages.len()).step_by(2).enumerate() {
        let assembled = skald
            .assemble(
                "s1",
                messages[..end].to_vec(),
                at(10_000 * (call_number as i64 + 1)),
            )
            .await;
        seen = refs(&assembled);
    }
    assert_eq!(
        seen, 1,
        "the read stays: its rewrite does not pay in a short run"
    );

    // Once the cache has expired, rewriting costs nothing: it leaves, and stays out.
    let cold = skald.assemble("s1", messages.clone(), at(3_600_000)).await;
    assert_eq!(refs(&cold), 2);
    let warm = skald.assemble("s1", messages.clone(), at(3_610_000)).await;
    assert_eq!(render(&warm), render(&cold), "decisions are sticky");
}

/// Under the preset, a rewrite after the session's first offload is weighed at the run's
/// expected length: a medium read the model has answered leaves one turn later, while only it
/// and the answer after it are cached (a cheap rewrite), instead of staying for the whole run.
#[tokio::test]
async fn a_young_read_leaves_after_one_turn() {
    let skald = harness(
        skald_store::test_stores::ref_store(Default::default()),
        Policy::preset("skald").unwrap(),
    );
    let refs = |assembled: &View| render(assembled).matches("[REF_ID: ").count();
    let mut messages = vec![
        Message::text(Role::User, "look at the log"),
        call("c1", "bash", json!({"command": "pytest"})),
        result("c1", "bash", &pytest_log(400)),
        call("c2", "read", json!({"path": "/src/lib.rs"})),
        result("c2", "read", &source_file(32)),
    ];
    let first = skald.assemble("s1", messages.clone(), at(0)).await;
    assert_eq!(refs(&first), 1, "the read is new: the model sees it whole");
    messages.push(Message::text(Role::Assistant, "x".repeat(4_000)));
    messages.push(Message::text(Role::User, "next"));
    let second = skald.assemble("s1", messages.clone(), at(10_000)).await;
    assert_eq!(refs(&second), 2, "answered, the read leaves");
}

/// A call's window follows its model: an exact `model_windows` entry, else the model's known
/// family, else the configured default (issue 28, gap 5).
#[test]
fn a_calls_window_is_its_models_entry_else_its_familys_else_the_default() {
    let mut config = EngineConfig::new(Policy::preset("skald").unwrap());
    config.window_tokens = 12_000;
    config
        .model_windows
        .insert("claude-sonnet-4-5".into(), 1_000_000);
    let engine = Engine::in_memory(config).unwrap();
    for (model, window) in [
        (Some("claude-sonnet-4-5"), 1_000_000),
        (Some("claude-opus-4-6"), 200_000),
        (Some("google/gemini-3-pro-preview"), 1_048_576),
        (Some("gpt-4o-mini"), 128_000),
        (Some("gpt-test"), 12_000),
        (Some("  "), 12_000),
        (None, 12_000),
    ] {
        assert_eq!(engine.window_for(model), window, "{model:?}");
    }
    // A window the user fixed is every call's.
    let mut fixed = engine.config().clone();
    fixed.windows_by_model = false;
    let fixed = Engine::in_memory(fixed).unwrap();
    assert_eq!(fixed.window_for(Some("claude-sonnet-4-5")), 12_000);
    assert_eq!(fixed.window_for(Some("gpt-4o-mini")), 12_000);
}
