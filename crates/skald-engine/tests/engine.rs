//! The engine end to end on small conversations: what the model sees after assemble, that
//! every ref it sees is stored and fetchable, that decisions repeat byte for byte, and replay.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_core::pipeline::policy::Policy;
use skald_core::refs::{RefId, ref_ids_in};
use skald_engine::SessionState;
use skald_engine::internal::assemble::{AssembleRequest, Assembled, assemble};
use skald_engine::internal::fetch::execute_fetch;
use skald_engine::replay::{ReplaySettings, replay};

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

fn request(now_ms: i64) -> AssembleRequest<'static> {
    AssembleRequest {
        tenant: &ACME,
        context_window_tokens: 200_000,
        now_ms,
        fetch_available: true,
        host_prefix_tokens: 0,
    }
}

/// The model-visible layout as a reader sees it.
fn render(assembled: &Assembled) -> String {
    let mut out = String::new();
    if let Some(addition) = &assembled.system_prompt_addition {
        out.push_str(&format!("[system addition] {} chars\n", addition.len()));
    }
    for tool in &assembled.tools {
        out.push_str(&format!("[tool] {}\n", tool.name));
    }
    for message in &assembled.messages {
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
fn full_text(assembled: &Assembled) -> String {
    assembled
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

#[test]
fn skald_policy_layout_after_assemble() {
    let store = skald_store::test_stores::ref_store(Default::default());
    let policy = Policy::preset("skald").unwrap();
    let mut state = SessionState::default();
    let assembled = assemble(&store, &policy, &mut state, session(), request(0)).unwrap();
    insta::assert_snapshot!("skald_layout", render(&assembled));
}

#[test]
fn every_ref_the_model_sees_is_stored_and_fetchable() {
    let store = skald_store::test_stores::ref_store(Default::default());
    let policy = Policy::preset("skald").unwrap();
    let mut state = SessionState::default();
    let assembled = assemble(&store, &policy, &mut state, session(), request(0)).unwrap();
    let visible = full_text(&assembled);
    let ids = ref_ids_in(&visible);
    assert!(
        ids.len() >= 2,
        "pytest log and the old write's content leave: {visible}"
    );
    for id in &ids {
        let payload = store.get(&tenant_named("acme"), id.as_str()).unwrap();
        assert!(!payload.text().is_empty());
        // Another tenant sees nothing.
        assert!(store.get(&tenant_named("other"), id.as_str()).is_err());
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
    let fetched = execute_fetch(
        &store,
        &tenant_named("acme"),
        &json!({"ref_ids": [log_id.as_str()], "grep": "FAILED", "context": 0}),
    );
    assert_eq!(fetched.found_ids, 1);
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
    fail: bool,
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
        if self.fail {
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

fn recorder(fail: bool) -> BatchRecorder {
    BatchRecorder {
        inner: skald_store::test_stores::ref_store(Default::default()),
        batches: Default::default(),
        fail,
    }
}

#[test]
fn the_refs_of_one_request_are_stored_in_one_batch() {
    let store = recorder(false);
    let policy = Policy::preset("skald").unwrap();
    let mut state = SessionState::default();
    let assembled = assemble(&store, &policy, &mut state, session(), request(0)).unwrap();
    let stored = assembled.report.refs_stored;
    assert!(stored >= 2, "{stored}");
    assert_eq!(*store.batches.lock().unwrap(), vec![stored]);
    for id in ref_ids_in(&full_text(&assembled)) {
        assert!(
            store.inner.get(&tenant_named("acme"), id.as_str()).is_ok(),
            "{id} not stored"
        );
    }
    // The next request has nothing new to store and does not call the store.
    assemble(&store, &policy, &mut state, session(), request(1_000)).unwrap();
    assert_eq!(store.batches.lock().unwrap().len(), 1);
}

#[test]
fn a_failed_batch_fails_the_request_and_hands_out_no_ref() {
    let store = recorder(true);
    let policy = Policy::preset("skald").unwrap();
    let mut state = SessionState::default();
    let error = assemble(&store, &policy, &mut state, session(), request(0)).unwrap_err();
    assert!(error.to_string().contains("disk on fire"), "{error}");
    assert_eq!(state.stored_ref_count(), 0);
    // Once the store works again, the same request stores every ref it names.
    let store = BatchRecorder {
        fail: false,
        ..store
    };
    let assembled = assemble(&store, &policy, &mut state, session(), request(1_000)).unwrap();
    for id in ref_ids_in(&full_text(&assembled)) {
        assert!(
            store.inner.get(&tenant_named("acme"), id.as_str()).is_ok(),
            "{id} not stored"
        );
    }
}

#[test]
fn fetch_reports_each_bad_id_on_its_own() {
    let store = skald_store::test_stores::ref_store(Default::default());
    let unknown = RefId::of_bytes(b"never stored");
    let out = execute_fetch(
        &store,
        &tenant_named("acme"),
        &json!({"ref_ids": ["../../etc/passwd", unknown.as_str()]}),
    );
    assert_eq!((out.found_ids, out.failed_ids), (0, 2));
    assert!(out.is_error());
    assert!(out.text.contains("../../etc/passwd"), "{}", out.text);
    assert!(out.text.contains(unknown.as_str()), "{}", out.text);
    let bad = execute_fetch(&store, &tenant_named("acme"), &json!({"ids": []}));
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

#[test]
fn decisions_repeat_byte_for_byte_as_the_session_grows() {
    let store = skald_store::test_stores::ref_store(Default::default());
    let policy = cache_aware_policy();
    let mut state = SessionState::default();
    let mut messages = session();
    let first = assemble(&store, &policy, &mut state, messages.clone(), request(0)).unwrap();
    messages.push(Message::text(Role::Assistant, "Tests pass now."));
    messages.push(Message::text(Role::User, "Thanks. Also run the linter."));
    let second = assemble(&store, &policy, &mut state, messages, request(30_000)).unwrap();
    // The write call (index 6) was the newest assistant turn in the first request; now that it
    // is answered, its long content leaves. Everything before it repeats exactly: the cache
    // miss covers only the messages from that call on.
    assert_eq!(second.messages[..6], first.messages[..6]);
    assert_ne!(second.messages[6], first.messages[6]);
    assert!(
        second.messages[6].tool_calls().next().unwrap().arguments["content"]
            .as_str()
            .unwrap()
            .starts_with("[REF_ID: ")
    );
    // A third request repeats the second byte for byte.
    let mut third_input = session();
    third_input.push(Message::text(Role::Assistant, "Tests pass now."));
    third_input.push(Message::text(Role::User, "Thanks. Also run the linter."));
    let third = assemble(&store, &policy, &mut state, third_input, request(60_000)).unwrap();
    assert_eq!(third.messages, second.messages);
    assert_eq!(second.system_prompt_addition, first.system_prompt_addition);
    assert_eq!(third.report.refs_stored, 0, "nothing new to store");
}

#[test]
fn a_fresh_result_stays_visible_until_the_model_has_answered_it() {
    let store = skald_store::test_stores::ref_store(Default::default());
    let policy = cache_aware_policy();
    let mut state = SessionState::default();
    let file = source_file(40);
    assert!(file.len() > 2_000 && file.len() < 6_000);
    let mut messages = vec![
        Message::text(Role::User, "Read the module."),
        call("r1", "read", json!({"path": "src/m.py"})),
        result("r1", "read", &file),
    ];
    let fresh = assemble(&store, &policy, &mut state, messages.clone(), request(0)).unwrap();
    assert!(
        full_text(&fresh).contains("def helper_39"),
        "fresh result is shown in full"
    );
    messages.push(call("r2", "bash", json!({"command": "ls"})));
    messages.push(result("r2", "bash", "src\ntests"));
    let later = assemble(&store, &policy, &mut state, messages, request(5_000)).unwrap();
    let text = full_text(&later);
    assert!(
        !text.contains("def helper_39"),
        "answered result left: {text}"
    );
    assert!(text.contains("[REF_ID: "));
}

#[test]
fn nothing_is_offloaded_when_the_host_cannot_run_fetch() {
    let store = skald_store::test_stores::ref_store(Default::default());
    let policy = Policy::preset("sccs").unwrap();
    let mut state = SessionState::default();
    let request = AssembleRequest {
        fetch_available: false,
        ..request(0)
    };
    let assembled = assemble(&store, &policy, &mut state, session(), request).unwrap();
    assert!(!render(&assembled).contains("[REF_ID: "));
    assert!(assembled.tools.is_empty());
    assert!(assembled.system_prompt_addition.is_none());
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

#[test]
fn openclaw_policy_keeps_pruned_results_pruned_across_assembles() {
    // OpenClaw 2026.9 prunes once the cache is cold and keeps the result pruned on later
    // requests, cache warm or not; the seed's version shows it in full again.
    let store = skald_store::test_stores::ref_store(Default::default());
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
    let at = |now_ms: i64| AssembleRequest {
        tenant: &ACME,
        context_window_tokens: 50_000,
        now_ms,
        fetch_available: true,
        host_prefix_tokens: 0,
    };
    let first_result = |assembled: &Assembled| {
        assembled
            .messages
            .iter()
            .flat_map(|m| m.tool_results())
            .next()
            .map(|r| r.content.clone())
            .unwrap()
    };
    for (preset, stays) in [("openclaw", true), ("openclaw-seed", false)] {
        let policy = Policy::preset(preset).unwrap();
        let mut state = SessionState::default();
        // The first request starts the cache clock; six minutes later it has expired.
        assemble(&store, &policy, &mut state, messages.clone(), at(0)).unwrap();
        let cold = assemble(&store, &policy, &mut state, messages.clone(), at(360_000)).unwrap();
        assert_eq!(cold.report.prune.trimmed, 3, "{preset}");
        let warm = assemble(&store, &policy, &mut state, messages.clone(), at(420_000)).unwrap();
        assert_eq!(warm.report.prune.trimmed, 0, "{preset}");
        assert_eq!(
            first_result(&warm) == first_result(&cold),
            stays,
            "{preset}: the trimmed result {}",
            if stays { "stays trimmed" } else { "comes back" }
        );
    }
}

#[test]
fn cost_aware_schedule_offloads_only_what_pays_and_keeps_it_offloaded() {
    let store = skald_store::test_stores::ref_store(Default::default());
    // Later rewrites weighed at a quarter of the run so far (the preset weighs them at twice
    // it, and a young read would leave after one turn: `a_young_read_leaves_after_one_turn`).
    let policy = Policy::from_toml(
        "preset = \"skald\"\n[schedule]\nmode = \"cost-aware\"\nremaining_calls_ratio = 0.25\n",
    )
    .unwrap();
    let at = |now_ms: i64| AssembleRequest {
        tenant: &ACME,
        context_window_tokens: 200_000,
        now_ms,
        fetch_available: true,
        host_prefix_tokens: 0,
    };
    let refs = |assembled: &Assembled| render(assembled).matches("[REF_ID: ").count();

    // A short session without large outputs never gets the fetch tool: nothing pays for it.
    let mut state = SessionState::default();
    let quiet = vec![Message::text(Role::User, "hi")];
    let first = assemble(&store, &policy, &mut state, quiet, at(0)).unwrap();
    assert!(first.tools.is_empty() && first.system_prompt_addition.is_none());

    // A huge output leaves before it enters the cache, and the tool arrives with it.
    let mut state = SessionState::default();
    let mut messages = vec![
        Message::text(Role::User, "look at the log"),
        call("c1", "bash", json!({"command": "pytest"})),
        result("c1", "bash", &pytest_log(400)),
    ];
    let first = assemble(&store, &policy, &mut state, messages.clone(), at(0)).unwrap();
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
        let assembled = assemble(
            &store,
            &policy,
            &mut state,
            messages[..end].to_vec(),
            at(10_000 * (call_number as i64 + 1)),
        )
        .unwrap();
        seen = refs(&assembled);
    }
    assert_eq!(
        seen, 1,
        "the read stays: its rewrite does not pay in a short run"
    );

    // Once the cache has expired, rewriting costs nothing: it leaves, and stays out.
    let cold = assemble(&store, &policy, &mut state, messages.clone(), at(3_600_000)).unwrap();
    assert_eq!(refs(&cold), 2);
    let warm = assemble(&store, &policy, &mut state, messages.clone(), at(3_610_000)).unwrap();
    assert_eq!(render(&warm), render(&cold), "decisions are sticky");
}

/// Under the preset, a rewrite after the session's first offload is weighed at the run's
/// expected length: a medium read the model has answered leaves one turn later, while only it
/// and the answer after it are cached (a cheap rewrite), instead of staying for the whole run.
#[test]
fn a_young_read_leaves_after_one_turn() {
    let store = skald_store::test_stores::ref_store(Default::default());
    let policy = Policy::preset("skald").unwrap();
    let at = |now_ms: i64| AssembleRequest {
        tenant: &ACME,
        context_window_tokens: 200_000,
        now_ms,
        fetch_available: true,
        host_prefix_tokens: 0,
    };
    let refs = |assembled: &Assembled| render(assembled).matches("[REF_ID: ").count();
    let mut state = SessionState::default();
    let mut messages = vec![
        Message::text(Role::User, "look at the log"),
        call("c1", "bash", json!({"command": "pytest"})),
        result("c1", "bash", &pytest_log(400)),
        call("c2", "read", json!({"path": "/src/lib.rs"})),
        result("c2", "read", &source_file(32)),
    ];
    let first = assemble(&store, &policy, &mut state, messages.clone(), at(0)).unwrap();
    assert_eq!(refs(&first), 1, "the read is new: the model sees it whole");
    messages.push(Message::text(Role::Assistant, "x".repeat(4_000)));
    messages.push(Message::text(Role::User, "next"));
    let second = assemble(&store, &policy, &mut state, messages.clone(), at(10_000)).unwrap();
    assert_eq!(refs(&second), 2, "answered, the read leaves");
}
