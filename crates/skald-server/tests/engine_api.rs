//! The engine API against OpenClaw's ContextEngine contract (openclaw.md §1.4), over real HTTP:
//! ingest and ingestBatch, assemble with a large tool result offloaded behind a placeholder and
//! fetched back sliced, compact and the summary first in the next assemble, after-turn with
//! usage and tool statistics, bootstrap of a session file, and the reads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api_support;
mod common;

use api_support::*;
use common::TestServer;
use serde_json::{Value, json};
use skald_core::codec::openclaw::decode_agent_message;
use skald_core::memory::extract::{ExistingMemory, MemoryCandidate};
use skald_core::message::Message;
use skald_core::render::render_messages;
use skald_core::session::{COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX};
use skald_llm::{DeterministicExtractor, LlmError, MemoryExtractor, Summarizer, SummaryRequest};
use skald_server::AppState;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

fn server_config() -> skald_server::ServerConfig {
    let mut config = common::default_config();
    config.engine.compaction.reserve_tokens = 2_000;
    config
}

async fn start() -> (TestServer, Api) {
    let server = TestServer::start(common::test_state(server_config())).await;
    let api = Api::new(server.url(""), None);
    (server, api)
}

#[tokio::test]
async fn ingest_answers_ingested_and_a_repeated_message_is_a_duplicate() {
    let (server, api) = start().await;
    let (status, body) = api
        .post(
            "/v1/sessions/s1/messages",
            json!({"message": user("hello", 0)}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"ingested": true}));
    let (_, again) = api
        .post(
            "/v1/sessions/s1/messages",
            json!({"message": user("hello", 0)}),
        )
        .await;
    assert_eq!(again, json!({"ingested": false}));

    let (status, batch) = api
        .post(
            "/v1/sessions/s1/messages",
            json!({"messages": [assistant_text("hi", 1), user("list files", 2)]}),
        )
        .await;
    assert_eq!(status, 200, "{batch}");
    assert_eq!(batch, json!({"ingestedCount": 2}));

    // A heartbeat is not stored.
    let (_, heartbeat) = api
        .post(
            "/v1/sessions/s1/messages",
            json!({"message": user("ping", 3), "isHeartbeat": true}),
        )
        .await;
    assert_eq!(heartbeat, json!({"ingested": false}));

    let (_, info) = api.get("/v1/sessions/s1").await;
    assert_eq!(info["messages"], 3);
    assert_eq!(info["sourceFormat"], "openclaw-session");
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(list["sessions"][0]["sessionId"], "s1");
    let (_, entries) = api.get("/v1/sessions/s1/entries").await;
    assert_eq!(entries["header"]["id"], "s1");
    let entries = entries["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0]["type"], "message");
    assert_eq!(entries[0]["message"]["content"][0]["text"], "hello");
    assert_eq!(entries[1]["parentId"], entries[0]["id"]);
    server.shutdown().await;
}

#[tokio::test]
async fn assemble_offloads_a_large_result_and_the_refs_api_gives_it_back_sliced() {
    let (server, api) = start().await;
    let (status, body) = api
        .post(
            "/v1/sessions/build/assemble",
            json!({"messages": build_conversation(), "model": "gpt-test"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["sync"]["created"], true);
    assert_eq!(body["sync"]["appended"], 4);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert!(body["estimatedTokens"].as_u64().unwrap() > 0);
    let placeholder = messages[2]["content"][0]["text"].as_str().unwrap();
    assert!(placeholder.starts_with("[REF_ID: "), "{placeholder}");
    assert!(placeholder.len() < 1_000, "{placeholder}");
    assert!(
        body["systemPromptAddition"]
            .as_str()
            .unwrap()
            .contains("REF_ID")
    );
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools[0], "fetch_original_data");
    assert!(tools.contains(&"search_memories"), "{tools:?}");
    assert_eq!(body["report"]["refsStored"], 1);
    assert!(body["report"]["tokensSaved"].as_u64().unwrap() > 2_000);

    // The stored session keeps the original.
    let (_, entries) = api.get("/v1/sessions/build/entries").await;
    assert_eq!(
        entries["entries"][2]["message"]["content"][0]["text"],
        build_log()
    );

    let id = first_ref_id(&body["messages"]).unwrap();
    let (status, whole) = api.get(&format!("/v1/refs/{id}")).await;
    assert_eq!(status, 200, "{whole}");
    assert_eq!(whole["id"], id.as_str());
    assert!(whole["text"].as_str().unwrap().contains("[300] compiling"));
    let (_, sliced) = api
        .get(&format!("/v1/refs/{id}?grep=error&context=1"))
        .await;
    let text = sliced["text"].as_str().unwrap();
    assert!(text.contains("150| [150] error: linker failed"), "{text}");
    assert!(text.contains("149| ") && text.contains("151| "), "{text}");
    assert!(!text.contains("[010]"), "{text}");
    let (_, lines) = api.get(&format!("/v1/refs/{id}?lines=2:3")).await;
    let text = lines["text"].as_str().unwrap();
    assert!(text.contains("2| [002]") && text.contains("3| [003]"));
    assert!(!text.contains("[004]"), "{text}");

    // A host that does not run the fetch tool gets no placeholders.
    let (_, unfetchable) = api
        .post(
            "/v1/sessions/build2/assemble",
            json!({"messages": build_conversation(), "availableTools": ["bash"]}),
        )
        .await;
    assert!(first_ref_id(&unfetchable["messages"]).is_none());
    assert_eq!(unfetchable["tools"], json!([]));

    let metrics = reqwest::get(server.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let refs_line = metrics
        .lines()
        .find(|line| line.starts_with("skald_refs_stored_total"))
        .unwrap();
    assert!(refs_line.ends_with(" 1"), "{refs_line}");
    assert!(
        metrics
            .lines()
            .any(|line| line.starts_with("skald_tokens_saved_total") && !line.ends_with(" 0"))
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_assembled_context_renders_as_the_model_reads_it() {
    let (server, api) = start().await;
    let (_, body) = api
        .post(
            "/v1/sessions/render/assemble",
            json!({"messages": build_conversation()}),
        )
        .await;
    let messages: Vec<Message> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|value| decode_agent_message(value).unwrap())
        .collect();
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    let rendering = format!(
        "--- system prompt addition ---\n{}\n\n--- tools ---\n{}\n\n{}",
        body["systemPromptAddition"].as_str().unwrap_or(""),
        tools.join(", "),
        render_messages(&messages)
    );
    insta::assert_snapshot!("assembled_build_conversation", rendering);
    // GET …/context shows the same view without changing the session's state.
    let (_, context) = api.get("/v1/sessions/render/context").await;
    assert_eq!(context["messages"], body["messages"]);
    assert_eq!(context["policy"], "skald");
    server.shutdown().await;
}

#[tokio::test]
async fn compact_writes_a_summary_and_the_next_assemble_starts_with_it() {
    let (server, api) = start().await;
    let (status, _) = api
        .post(
            "/v1/sessions/long/messages",
            json!({"messages": long_conversation()}),
        )
        .await;
    assert_eq!(status, 200);
    let (_, before) = api.get("/v1/sessions/long").await;

    // Below the threshold nothing happens without force.
    let (_, skipped) = api
        .post("/v1/sessions/long/compact", json!({"tokenBudget": 200_000}))
        .await;
    assert_eq!(skipped["ok"], true);
    assert_eq!(skipped["compacted"], false);
    assert!(skipped["reason"].as_str().unwrap().contains("threshold"));
    let (_, unchanged) = api.get("/v1/sessions/long").await;
    assert_eq!(unchanged["entries"], before["entries"]);

    let (status, body) = api
        .post(
            "/v1/sessions/long/compact",
            json!({"tokenBudget": 32_000, "force": true,
                   "customInstructions": "Keep every file path."}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ok"], true, "{body}");
    assert_eq!(body["compacted"], true);
    let result = &body["result"];
    let summary = result["summary"].as_str().unwrap();
    assert!(summary.contains("/etc/passwd") || summary.contains("/srv/app"));
    assert!(result["firstKeptEntryId"].is_string());
    assert!(result["tokensAfter"].as_u64().unwrap() < result["tokensBefore"].as_u64().unwrap());
    assert!(result["details"]["checkpointEntryId"].is_string());
    // Memory is on: the compacted span was archived.
    assert_eq!(result["details"]["memoryArchive"]["status"], "done");

    let (_, assembled) = api
        .post("/v1/sessions/long/assemble", json!({"tokenBudget": 32_000}))
        .await;
    let first = &assembled["messages"][0];
    // pi's convertToLlm: the summary reaches the model as a user message wrapping it.
    assert_eq!(first["role"], "user", "{first}");
    let text = first["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text,
        format!("{COMPACTION_SUMMARY_PREFIX}{summary}{COMPACTION_SUMMARY_SUFFIX}")
    );
    let (_, entries) = api.get("/v1/sessions/long/entries").await;
    let last = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["type"] == "compaction")
        .unwrap()
        .clone();
    assert_eq!(last["firstKeptEntryId"], result["firstKeptEntryId"]);

    let metrics = reqwest::get(server.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("skald_compactions_total{outcome=\"compacted\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("skald_compactions_total{outcome=\"skipped\"} 1"));
    server.shutdown().await;
}

/// A summarizer whose provider is down.
struct DownSummarizer;

#[async_trait::async_trait]
impl Summarizer for DownSummarizer {
    fn name(&self) -> &str {
        "down"
    }

    async fn summarize(
        &self,
        _request: &SummaryRequest,
        _cancel: &CancellationToken,
    ) -> Result<String, LlmError> {
        Err(LlmError::Server {
            status: 503,
            retry_after_ms: None,
            message: "upstream unavailable".into(),
        })
    }
}

#[tokio::test]
async fn a_failed_compaction_is_ok_false_with_its_reason_and_writes_nothing() {
    let mut config = server_config();
    config.engine.summarizer = Arc::new(DownSummarizer);
    let server = TestServer::start(common::test_state(config)).await;
    let api = Api::new(server.url(""), None);
    api.post(
        "/v1/sessions/long/messages",
        json!({"messages": long_conversation()}),
    )
    .await;
    let (_, before) = api.get("/v1/sessions/long/entries").await;
    let (status, body) = api
        .post(
            "/v1/sessions/long/compact",
            json!({"tokenBudget": 32_000, "force": true}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ok"], false, "{body}");
    assert_eq!(body["compacted"], false);
    assert!(
        body["reason"]
            .as_str()
            .unwrap()
            .contains("upstream unavailable"),
        "{body}"
    );
    let (_, after) = api.get("/v1/sessions/long/entries").await;
    assert_eq!(after, before);
    let metrics = server.state.metrics.render();
    assert!(metrics.contains("skald_compactions_total{outcome=\"failed\"} 1"));
    server.shutdown().await;
}

/// OpenClaw compacts after the provider refused a request as too long (`trigger: "overflow"`):
/// the request cannot go out as it is, so when every summary call fails the seed's last-resort
/// note stands for the history instead of the compaction failing (issue 28, gap 4). A trigger
/// the route does not know is refused, naming the field, and changes nothing.
#[tokio::test]
async fn an_overflow_compaction_whose_summaries_all_fail_writes_the_last_resort_note() {
    let mut config = server_config();
    config.engine.summarizer = Arc::new(DownSummarizer);
    let server = TestServer::start(common::test_state(config)).await;
    let api = Api::new(server.url(""), None);
    api.post(
        "/v1/sessions/long/messages",
        json!({"messages": long_conversation()}),
    )
    .await;
    let (_, before) = api.get("/v1/sessions/long/entries").await;
    for (trigger, said_too) in [(json!("panic"), "unknown variant `panic`"), (json!(3), "")] {
        let (status, body) = api
            .post(
                "/v1/sessions/long/compact",
                json!({"tokenBudget": 32_000, "force": true, "trigger": trigger}),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        let said = body.to_string();
        assert!(
            said.contains("trigger") && said.contains(said_too),
            "{said}"
        );
    }
    let (_, unchanged) = api.get("/v1/sessions/long/entries").await;
    assert_eq!(unchanged, before);

    let (status, body) = api
        .post(
            "/v1/sessions/long/compact",
            json!({"tokenBudget": 32_000, "force": true, "trigger": "overflow"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["ok"], &body["compacted"]),
        (&json!(true), &json!(true)),
        "{body}"
    );
    let summary = body["result"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("Summary unavailable"),
        "the last-resort note should stand for the history: {summary}"
    );
    assert_eq!(
        body["report"]["details"]["trigger"], "overflow",
        "{}",
        body["report"]
    );
    let (_, after) = api.get("/v1/sessions/long/entries").await;
    let checkpoints = after["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["type"] == "compaction")
        .count();
    assert_eq!(checkpoints, 1, "{after}");
    server.shutdown().await;
}

#[tokio::test]
async fn after_turn_feeds_usage_to_calibration_and_tool_statistics_to_memory() {
    let (server, api) = start().await;
    let conversation = build_conversation();
    let (_, assembled) = api
        .post(
            "/v1/sessions/turn/assemble",
            json!({"messages": conversation, "model": "gpt-test"}),
        )
        .await;
    let counted = assembled["estimatedTokens"].as_u64().unwrap();
    let reported = counted * 3 / 2;
    let (status, body) = api
        .post(
            "/v1/sessions/turn/after-turn",
            json!({
                "messages": conversation,
                "prePromptMessageCount": 1,
                "tokenBudget": 200_000,
                "runtimeContext": {
                    "promptCache": {
                        "retention": "short",
                        "lastCallUsage": {"input": reported - 10, "output": 30, "cacheRead": 10,
                                          "cacheWrite": 0, "total": reported + 30}
                    },
                    "cwd": "/work",
                    "somethingNew": {"any": "thing"}
                }
            }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["sync"]["matched"], 4);
    assert_eq!(body["sync"]["appended"], 0);
    assert_eq!(
        body["calibration"],
        json!({"model": "gpt-test", "counted": counted, "reported": reported})
    );
    assert_eq!(body["toolMemories"], json!(["bash"]));
    assert!(body["upload"].is_object(), "{body}");

    let (_, tools) = api.get("/v1/memory/ls?category=tools").await;
    assert_eq!(tools[0]["name"], "bash", "{tools}");
    assert!(
        tools[0]["l0"].as_str().unwrap().contains("1 call"),
        "{tools}"
    );

    // The same view again, for the same model: the estimate is corrected by what was learnt.
    let (_, calibrated) = api
        .post("/v1/sessions/turn/assemble", json!({"model": "gpt-test"}))
        .await;
    let estimate = calibrated["estimatedTokens"].as_u64().unwrap();
    assert!(estimate.abs_diff(reported) <= 1, "{estimate} vs {reported}");
    // Another model has learnt nothing.
    let (_, other) = api
        .post("/v1/sessions/turn/assemble", json!({"model": "other"}))
        .await;
    assert_eq!(other["estimatedTokens"].as_u64().unwrap(), counted);

    // A heartbeat records nothing.
    let (_, heartbeat) = api
        .post(
            "/v1/sessions/turn/after-turn",
            json!({"isHeartbeat": true, "messages": [user("ping", 99)]}),
        )
        .await;
    assert_eq!(heartbeat, json!({"heartbeat": true}));
    server.shutdown().await;
}

/// An extractor that takes its time, and says when it finished.
struct SlowExtractor {
    finished: Arc<AtomicBool>,
}

#[async_trait::async_trait]
impl MemoryExtractor for SlowExtractor {
    fn name(&self) -> &str {
        "slow"
    }

    async fn extract(
        &self,
        span: &[Message],
        existing: &[ExistingMemory],
        cancel: &CancellationToken,
    ) -> Result<Vec<MemoryCandidate>, LlmError> {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let candidates = DeterministicExtractor::default()
            .extract(span, existing, cancel)
            .await;
        self.finished.store(true, Ordering::SeqCst);
        candidates
    }
}

#[tokio::test]
async fn an_upload_started_by_after_turn_finishes_before_shutdown_returns() {
    let finished = Arc::new(AtomicBool::new(false));
    let mut config = server_config();
    config.engine.memory.write.upload.enabled = true;
    config.engine.extractor = Arc::new(SlowExtractor {
        finished: finished.clone(),
    });
    let state = common::test_state(config);
    let server = TestServer::start(state.clone()).await;
    let api = Api::new(server.url(""), None);
    let (status, body) = api
        .post(
            "/v1/sessions/up/after-turn",
            json!({
                "messages": long_conversation(),
                "tokenBudget": 20_000,
                "runtimeContext": {"currentTokenCount": 12_000}
            }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let started = body["upload"]["started"].as_str();
    assert!(started.is_some(), "{body}");
    assert!(
        !finished.load(Ordering::SeqCst),
        "the upload ran in the request"
    );
    server.shutdown().await;
    assert!(
        finished.load(Ordering::SeqCst),
        "shutdown did not wait for the upload"
    );
    assert!(
        !state
            .engine
            .upload_running(&tenant_named("default"), &session_named("up"))
    );
    let metrics = state.metrics.render();
    assert!(
        metrics.contains("skald_memory_uploads_total{outcome=\"started\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn assemble_with_a_diverging_history_makes_the_hosts_view_a_new_branch() {
    let (server, api) = start().await;
    let first = vec![
        user("Name a colour.", 0),
        assistant_text("Blue.", 1),
        user("Another one.", 2),
    ];
    let (_, one) = api
        .post("/v1/sessions/edit/assemble", json!({"messages": first}))
        .await;
    assert_eq!(one["sync"]["appended"], 3);
    // The host edited its last message: the stored branch stays, the host's view wins.
    let edited = vec![
        user("Name a colour.", 0),
        assistant_text("Blue.", 1),
        user("Name a fruit instead.", 3),
    ];
    let (status, two) = api
        .post("/v1/sessions/edit/assemble", json!({"messages": edited}))
        .await;
    assert_eq!(status, 200, "{two}");
    assert_eq!(two["sync"]["forked"], true, "{two}");
    assert_eq!(two["sync"]["matched"], 2);
    assert_eq!(
        two["messages"][2]["content"][0]["text"],
        "Name a fruit instead."
    );
    let (_, entries) = api.get("/v1/sessions/edit/entries").await;
    let texts: Vec<&str> = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|entry| entry["message"]["content"][0]["text"].as_str())
        .collect();
    assert!(texts.contains(&"Another one.") && texts.contains(&"Name a fruit instead."));
    server.shutdown().await;
}

const SESSION_FILE: &str = r#"{"type":"session","version":3,"id":"0c1d2e3f-aaaa-bbbb-cccc-000000000001","timestamp":"2026-03-08T12:15:35.580Z","cwd":"/work/app"}
{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-03-08T12:15:36.000Z","message":{"role":"user","content":[{"type":"text","text":"Where is the service configured?"}],"timestamp":1772972136000}}
{"type":"message","id":"b2c3d4e5","parentId":"a1b2c3d4","timestamp":"2026-03-08T12:15:37.000Z","message":{"role":"assistant","content":[{"type":"text","text":"In /etc/app/config.toml, section [server]."}],"api":"openai-responses","provider":"openai","model":"gpt-test","usage":{"input":12,"output":9,"cacheRead":0,"cacheWrite":0,"totalTokens":21,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1772972137000}}
{"type":"custom","customType":"model-snapshot","data":{"provider":"openai","modelId":"gpt-test"},"id":"c3d4e5f6","parentId":"b2c3d4e5","timestamp":"2026-03-08T12:15:37.500Z"}
"#;

#[tokio::test]
async fn bootstrap_imports_a_session_file_once() {
    let (server, api) = start().await;
    let (status, body) = api
        .post(
            "/v1/sessions/boot/bootstrap",
            json!({"sessionJsonl": SESSION_FILE, "sessionFile": "/home/a/.openclaw/x.jsonl"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"bootstrapped": true, "importedMessages": 2, "import": {
            "sessionId": "boot", "tenant": "default", "format": "openclaw-session",
            "status": "created", "entriesAdded": 3, "entries": 3, "messages": 2,
            "title": "Where is the service configured?", "issues": []}})
    );
    // The host's file path is the session's source; the summary estimates its context.
    let (_, info) = api.get("/v1/sessions/boot").await;
    assert_eq!(info["source"], "/home/a/.openclaw/x.jsonl");
    assert!(info["estimatedTokens"].as_u64().unwrap() > 10, "{info}");
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(
        list["sessions"][0]["estimatedTokens"],
        info["estimatedTokens"]
    );
    let (_, again) = api
        .post(
            "/v1/sessions/boot/bootstrap",
            json!({"sessionJsonl": SESSION_FILE}),
        )
        .await;
    assert_eq!(again["bootstrapped"], false);
    assert_eq!(again["importedMessages"], 0);
    assert!(again["reason"].as_str().unwrap().contains("already"));
    assert_eq!(again["import"]["status"], "already_imported");
    assert_eq!(again["import"]["entriesAdded"], 0);

    let (_, entries) = api.get("/v1/sessions/boot/entries").await;
    let ids: Vec<&str> = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a1b2c3d4", "b2c3d4e5", "c3d4e5f6"]);
    assert_eq!(entries["entries"][2]["customType"], "model-snapshot");
    let (_, context) = api.get("/v1/sessions/boot/context").await;
    assert_eq!(context["messages"].as_array().unwrap().len(), 2);

    // From messages: idempotent too.
    let messages = json!({"messages": [user("a", 0), assistant_text("b", 1)]});
    let (_, first) = api
        .post("/v1/sessions/boot2/bootstrap", messages.clone())
        .await;
    assert_eq!(first, json!({"bootstrapped": true, "importedMessages": 2}));
    let (_, second) = api.post("/v1/sessions/boot2/bootstrap", messages).await;
    assert_eq!(second["bootstrapped"], false);
    assert_eq!(second["importedMessages"], 0);
    server.shutdown().await;
}

/// OpenClaw 2026.9's session format: a reset that carries the conversation over, an opaque
/// record, and `leaf` records (the last one, pointing before the reset, is ignored as OpenClaw
/// ignores it).
const SESSION_FILE_V4: &str =
    include_str!("../../skald-core/tests/fixtures/openclaw/session_v4.jsonl");

#[tokio::test]
async fn bootstrap_takes_a_v4_session_file() {
    let (server, api) = start().await;
    let (status, body) = api
        .post(
            "/v1/sessions/boot-v4/bootstrap",
            json!({"sessionJsonl": SESSION_FILE_V4}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["bootstrapped"], true);
    assert_eq!(body["import"]["entriesAdded"], 14);
    assert_eq!(body["import"]["issues"], json!([]));
    let (_, context) = api.get("/v1/sessions/boot-v4/context").await;
    let texts: Vec<String> = context["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| {
            let content = &message["content"];
            content
                .as_str()
                .or_else(|| content[0]["text"].as_str())
                .unwrap_or("(call)")
                .to_owned()
        })
        .collect();
    assert_eq!(
        texts,
        [
            "list the files",
            "(call)",
            "a.txt\nb.txt",
            "a.txt and b.txt",
            "now count them",
            "counting again: 2"
        ],
        "{context}"
    );
    let (_, again) = api
        .post(
            "/v1/sessions/boot-v4/bootstrap",
            json!({"sessionJsonl": SESSION_FILE_V4}),
        )
        .await;
    assert_eq!(again["import"]["status"], "already_imported");
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_sessions_are_404_for_every_session_route() {
    let (server, api) = start().await;
    for path in [
        "/v1/sessions/nope",
        "/v1/sessions/nope/entries",
        "/v1/sessions/nope/context",
    ] {
        let (status, body) = api.get(path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert!(message(&body).contains("nope"), "{body}");
    }
    for (path, body) in [
        ("/v1/sessions/nope/assemble", json!({})),
        ("/v1/sessions/nope/compact", json!({"force": true})),
        ("/v1/sessions/nope/after-turn", json!({})),
    ] {
        let (status, answer) = api.post(path, body).await;
        assert_eq!(status, 404, "{path}: {answer}");
    }
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(list, json!({"sessions": []}));
    server.shutdown().await;
}

#[tokio::test]
async fn openapi_documents_the_engine_memory_and_refs_routes() {
    let document: Value = serde_json::to_value(skald_server::openapi()).unwrap();
    let paths = document["paths"].as_object().unwrap();
    for path in [
        "/v1/sessions",
        "/v1/sessions/{id}",
        "/v1/sessions/{id}/messages",
        "/v1/sessions/{id}/assemble",
        "/v1/sessions/{id}/compact",
        "/v1/sessions/{id}/after-turn",
        "/v1/sessions/{id}/bootstrap",
        "/v1/sessions/{id}/entries",
        "/v1/sessions/{id}/context",
        "/v1/memory/ls",
        "/v1/memory/tree",
        "/v1/memory/read",
        "/v1/memory/search",
        "/v1/memory/remember",
        "/v1/memory/forget",
        "/v1/memory/resources",
        "/v1/memory/history",
        "/v1/refs/{id}",
        "/v1/refs/fetch",
    ] {
        assert!(paths.contains_key(path), "{path} is not documented");
    }
    let schemas = document["components"]["schemas"].as_object().unwrap();
    for schema in [
        "AssembleRequest",
        "AssembleResponse",
        "CompactResponse",
        "SearchReport",
        "RememberReport",
        "FetchedRef",
    ] {
        assert!(schemas.contains_key(schema), "{schema} has no schema");
    }
}

#[tokio::test]
async fn compact_reports_what_skald_compact_prints_and_takes_agents_md_and_archive() {
    let (server, api) = start().await;
    api.post(
        "/v1/sessions/long/messages",
        json!({"messages": long_conversation()}),
    )
    .await;
    let agents_md = "# Agents\n\n## Red Lines\n\n- Never push to main without a review.\n";
    let (status, body) = api
        .post(
            "/v1/sessions/long/compact",
            json!({"tokenBudget": 32_000, "force": true, "agentsMd": agents_md,
                   "archive": false}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let report = &body["report"];
    assert_eq!(report["session_id"], "long");
    assert_eq!(report["tenant"], "default");
    assert_eq!(report["outcome"], "compacted");
    assert_eq!(report["window_tokens"], 32_000);
    assert_eq!(report["summary"], body["result"]["summary"]);
    assert_eq!(
        report["checkpoint_entry_id"],
        body["result"]["details"]["checkpointEntryId"]
    );
    assert!(
        report["summary"]
            .as_str()
            .unwrap()
            .contains("Never push to main without a review"),
        "{report:#}"
    );
    // Not archived when asked not to, though memory is on.
    assert!(report.get("memory_archive").is_none(), "{report:#}");
    assert_eq!(body["result"]["details"]["memoryArchive"], Value::Null);

    let (_, skipped) = api
        .post("/v1/sessions/long/compact", json!({"tokenBudget": 200_000}))
        .await;
    assert_eq!(skipped["report"]["outcome"], "skipped");
    assert!(skipped["report"]["reason_detail"]["kind"].is_string());
    server.shutdown().await;
}

#[tokio::test]
async fn the_context_route_names_whose_memories_it_used() {
    let (server, api) = start().await;
    api.post(
        "/v1/sessions/mem/messages",
        json!({"messages": build_conversation()}),
    )
    .await;
    api.post(
        "/v1/memory/remember",
        json!({"content": "Dana owns the build pipeline and its linker flags.",
               "type": "profile", "user": "dana"}),
    )
    .await;
    let (status, context) = api
        .get("/v1/sessions/mem/context?memory=true&user=dana")
        .await;
    assert_eq!(status, 200, "{context}");
    assert_eq!(context["memory"]["user"], "dana");
    assert_eq!(context["memory"]["agent"], "default");
    assert_eq!(context["memory"]["sessionStart"]["profile_entries"], 1);
    assert!(context["memory"]["recall"].is_object());
    assert_eq!(context["report"]["memory"]["user"], "dana");
    assert!(
        context["systemPromptAddition"]
            .as_str()
            .unwrap()
            .contains("Dana owns the build pipeline")
    );
    // The server's own user has no profile.
    let (_, own) = api.get("/v1/sessions/mem/context?memory=true").await;
    assert_eq!(own["memory"]["user"], "default");
    assert_eq!(own["memory"]["sessionStart"]["profile_entries"], 0);
    let (_, plain) = api.get("/v1/sessions/mem/context").await;
    assert!(plain.get("memory").is_none());

    for bad in [
        "/v1/sessions/mem/context?user=dana",
        "/v1/sessions/mem/context?memory=true&user=a/b",
    ] {
        let (status, body) = api.get(bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn the_fetch_tool_route_answers_as_fetch_original_data_does() {
    let (server, api) = start().await;
    let (_, body) = api
        .post(
            "/v1/sessions/build/assemble",
            json!({"messages": build_conversation()}),
        )
        .await;
    let id = first_ref_id(&body["messages"]).unwrap();
    let unknown = "0".repeat(64);
    let (status, answer) = api
        .post(
            "/v1/refs/fetch",
            json!({"ref_ids": [format!("[REF_ID: {id}]"), unknown, "not-an-id"],
                   "grep": "error", "context": 1}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["found"], 1);
    assert_eq!(answer["failed"], 2);
    let text = answer["text"].as_str().unwrap();
    assert!(text.contains("150| [150] error: linker failed"), "{text}");
    assert!(text.contains(&format!("=== REF_ID {unknown}")), "{text}");
    assert!(text.contains("=== not-an-id"), "{text}");
    // The same text as the single-ref route for a found ref.
    let (_, single) = api
        .get(&format!("/v1/refs/{id}?grep=error&context=1"))
        .await;
    assert!(text.starts_with(single["text"].as_str().unwrap()), "{text}");

    let (status, refused) = api
        .post("/v1/refs/fetch", json!({"ref_ids": [id], "slice": "1:2"}))
        .await;
    assert_eq!(status, 400, "{refused}");
    assert!(message(&refused).contains("slice"), "{refused}");
    server.shutdown().await;
}

/// A conversation whose tool output is `lines` lines of a build log (about 40 bytes each).
fn conversation_with_output(lines: usize) -> Vec<Value> {
    let log: Vec<String> = (1..=lines)
        .map(|n| format!("[{n:06}] compiling crate_{n} ... ok"))
        .collect();
    vec![
        user("Run the build and tell me what fails.", 0),
        assistant_call("call_1", "bash", json!({"command": "make build"}), 1),
        tool_result("call_1", "bash", &log.join("\n"), false, 2),
        assistant_text("The build passes.", 3),
    ]
}

#[tokio::test]
async fn session_states_stay_within_the_byte_budget_and_an_evicted_one_answers_the_same() {
    // Each session holds a ~1 MB output (twice: the stored session and its context); the budget
    // has room for about three of them.
    let mut config = server_config();
    config.engine.max_cached_bytes = 7_000_000;
    let state = common::test_state(config);
    let server = TestServer::start(state.clone()).await;
    let api = Api::new(server.url(""), None);
    let conversation = conversation_with_output(25_000);
    let mut first = Value::Null;
    for index in 0..8 {
        let (status, body) = api
            .post(
                &format!("/v1/sessions/big{index}/assemble"),
                json!({"messages": conversation, "model": "gpt-test"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        if index == 0 {
            first = body;
        }
        assert!(state.engine.cached_session_bytes() <= 7_000_000);
    }
    assert!(
        state.engine.cached_sessions() < 8,
        "{}",
        state.engine.cached_sessions()
    );
    assert!(state.engine.cached_session_bytes() >= 2_000_000);

    // big0 was evicted: its state is rebuilt from the store and the answer is the same.
    let (status, again) = api
        .post(
            "/v1/sessions/big0/assemble",
            json!({"messages": conversation, "model": "gpt-test"}),
        )
        .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["sync"]["appended"], 0);
    for field in [
        "messages",
        "systemPromptAddition",
        "tools",
        "estimatedTokens",
    ] {
        assert_eq!(again[field], first[field], "{field}");
    }

    let metrics = reqwest::get(server.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let gauge = |name: &str| -> usize {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(
        gauge("skald_cached_sessions"),
        state.engine.cached_sessions()
    );
    assert_eq!(
        gauge("skald_cached_session_bytes"),
        state.engine.cached_session_bytes()
    );
    server.shutdown().await;
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

/// A session id of the tests, parsed (it is well formed).
fn session_named(id: &str) -> skald_core::ids::SessionId {
    skald_core::ids::SessionId::parse(id).unwrap()
}

#[tokio::test]
async fn a_batch_resent_after_a_restart_is_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("skald.sqlite3");
    let batch = json!({"messages": [
        user("list the files", 0),
        assistant_call("call1", "bash", json!({"command": "ls"}), 1),
        tool_result("call1", "bash", "Cargo.toml\nsrc", false, 2),
        assistant_text("Two entries.", 3),
    ]});
    let server = TestServer::start(AppState::open(&database, server_config()).unwrap()).await;
    let api = Api::new(server.url(""), None);
    let (status, body) = api
        .post(
            "/v1/sessions/s-batch/messages",
            json!({"message": user("hello", 0)}),
        )
        .await;
    assert_eq!((status.as_u16(), body), (200, json!({"ingested": true})));
    let (status, body) = api
        .post("/v1/sessions/s-batch/messages", batch.clone())
        .await;
    assert_eq!((status.as_u16(), body), (200, json!({"ingestedCount": 4})));
    server.shutdown().await;

    // The host never saw that answer (skald was killed): it sends the batch again to the
    // restarted server, over the same database.
    let server = TestServer::start(AppState::open(&database, server_config()).unwrap()).await;
    let api = Api::new(server.url(""), None);
    let (status, body) = api.post("/v1/sessions/s-batch/messages", batch).await;
    assert_eq!((status.as_u16(), body), (200, json!({"ingestedCount": 0})));
    let (_, info) = api.get("/v1/sessions/s-batch").await;
    assert_eq!(info["messages"], 5, "{info}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_retried_commit_is_a_duplicate_and_the_turn_is_stored_once_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("skald.sqlite3");
    let turn = json!({
        "advancementKey": "turn-1:5f2c",
        "messages": [
            user("list the files", 0),
            assistant_call("call1", "bash", json!({"command": "ls"}), 1),
            tool_result("call1", "bash", "Cargo.toml\nsrc", false, 2),
            assistant_text("Two entries.", 3),
        ],
        // The host's anchors (without entry ids here: placed after the leaf) and identities.
        "admission": {"agentId": "main", "sessionId": "s-commit", "generation": 1, "rawSeq": 4},
        "terminal": {"agentId": "main", "sessionId": "s-commit", "generation": 1, "rawSeq": 8},
        "sessionKey": "agent:main:main",
        "agentId": "main",
        "runtimeContext": {"transcriptStorage": {"kind": "sqlite"}},
    });
    let server = TestServer::start(AppState::open(&database, server_config()).unwrap()).await;
    let api = Api::new(server.url(""), None);
    let (status, body) = api
        .post("/v1/sessions/s-commit/commit-turn", turn.clone())
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"status": "committed", "committedMessages": 4, "placement": "continued"})
    );
    let (_, again) = api
        .post("/v1/sessions/s-commit/commit-turn", turn.clone())
        .await;
    assert_eq!(
        again,
        json!({"status": "duplicate", "committedMessages": 0, "placement": "none"})
    );
    server.shutdown().await;

    // The host retries after skald restarted: still a duplicate, the turn still stored once.
    let server = TestServer::start(AppState::open(&database, server_config()).unwrap()).await;
    let api = Api::new(server.url(""), None);
    let (status, retried) = api.post("/v1/sessions/s-commit/commit-turn", turn).await;
    assert_eq!(status, 200, "{retried}");
    assert_eq!(retried["status"], "duplicate");
    let (_, info) = api.get("/v1/sessions/s-commit").await;
    assert_eq!(info["messages"], 4, "{info}");

    // The next turn, under its own key, follows the first on the same branch.
    let (_, next) = api
        .post(
            "/v1/sessions/s-commit/commit-turn",
            json!({"advancementKey": "turn-2:77aa", "messages": [user("thanks", 4), assistant_text("You're welcome.", 5)]}),
        )
        .await;
    assert_eq!(next["status"], "committed", "{next}");
    let (_, assembled) = api.post("/v1/sessions/s-commit/assemble", json!({})).await;
    let texts: Vec<String> = assembled["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        texts,
        [
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "user",
            "assistant"
        ]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_commit_with_a_bad_key_or_an_unknown_field_is_refused_and_writes_nothing() {
    let (server, api) = start().await;
    for (body, says) in [
        (
            json!({"advancementKey": "", "messages": [user("hi", 0)]}),
            "invalid advancementKey: it must not be empty",
        ),
        (
            json!({"advancementKey": "k\u{7}", "messages": [user("hi", 0)]}),
            "invalid advancementKey: it must not hold control characters",
        ),
        (
            json!({"advancementKey": "k".repeat(513), "messages": [user("hi", 0)]}),
            "invalid advancementKey: it has 513 bytes",
        ),
        (
            json!({"advancementKey": "k", "messages": [user("hi", 0)], "sessionFile": "x"}),
            "unknown field `sessionFile`",
        ),
        (
            json!({"advancementKey": "k", "messages": [user("hi", 0), "not a message"]}),
            "not an AgentMessage",
        ),
    ] {
        let (status, answer) = api.post("/v1/sessions/s-bad/commit-turn", body).await;
        assert_eq!(status, 400, "{says}: {answer}");
        assert!(message(&answer).contains(says), "{answer}");
    }
    let (status, _) = api.get("/v1/sessions/s-bad").await;
    assert_eq!(status, 404, "nothing was written");
    server.shutdown().await;
}

/// The fields OpenClaw 2026.9 sends with each method, as a host passes them through.
fn openclaw_runtime_settings() -> Value {
    json!({"schemaVersion": 1, "runtime": "pi", "model": {"requested": "gpt", "resolved": "gpt",
        "provider": "openai", "family": "gpt"}, "limits": {"promptTokenBudget": 93346,
        "maxOutputTokens": 8192}})
}

#[tokio::test]
async fn openclaws_host_fields_are_accepted_by_every_method_and_unknown_fields_still_refused() {
    let (server, api) = start().await;
    let runtime_context = json!({"transcriptStorage": {"kind": "sqlite"}, "currentTokenCount": 900,
        "promptCache": {"lastCallUsage": {"input": 800, "output": 20, "cacheRead": 100,
        "cacheWrite": 0, "total": 920, "contextUsage": {"used": 900, "window": 128000}},
        "lastCacheTouchAt": 1770000000000u64}});
    let (status, bootstrapped) = api
        .post(
            "/v1/sessions/s-host/bootstrap",
            json!({"sessionKey": "agent:main:main", "sessionFile": "agent:main:main",
                "sessionTarget": {"kind": "session"}, "agentId": "main"}),
        )
        .await;
    assert_eq!(status, 200, "{bootstrapped}");
    assert_eq!(bootstrapped["bootstrapped"], false);
    assert!(
        bootstrapped["reason"]
            .as_str()
            .unwrap()
            .starts_with("nothing to bring in")
    );
    let (status, assembled) = api
        .post(
            "/v1/sessions/s-host/assemble",
            json!({"messages": build_conversation(), "availableTools": {}, "prompt": "why?",
                "runtimeSettings": openclaw_runtime_settings(),
                "runtimeContext": runtime_context.clone(), "sessionKey": "agent:main:main"}),
        )
        .await;
    assert_eq!(status, 200, "{assembled}");
    // A serialised `Set` says nothing about the host's tools: all of skald's are offered.
    assert!(
        assembled["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"] == "fetch_original_data"),
        "{assembled}"
    );
    let (status, after) = api
        .post(
            "/v1/sessions/s-host/after-turn",
            json!({"sessionFile": "agent:main:main", "runtimeContext": runtime_context,
                "runtimeSettings": openclaw_runtime_settings(),
                "sessionTarget": {"kind": "session"}}),
        )
        .await;
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["calibration"]["reported"], 900, "{after}");
    let (status, compacted) = api
        .post(
            "/v1/sessions/s-host/compact",
            json!({"sessionKey": "agent:main:main", "agentId": "main",
                "sessionTarget": {"kind": "session"}, "runtimeSettings": openclaw_runtime_settings()}),
        )
        .await;
    assert_eq!(status, 200, "{compacted}");

    for (route, body, says) in [
        (
            "assemble",
            json!({"availableTools": {"bash": true}}),
            "expected a list of tool names",
        ),
        (
            "assemble",
            json!({"tokenBudgett": 5000}),
            "unknown field `tokenBudgett`",
        ),
        (
            "compact",
            json!({"sessionKey": "k", "forse": true}),
            "unknown field `forse`",
        ),
        ("bootstrap", json!({}), "the body needs `sessionJsonl`"),
    ] {
        let (status, refused) = api
            .post(&format!("/v1/sessions/s-host/{route}"), body)
            .await;
        assert_eq!(status, 400, "{route}: {refused}");
        assert!(message(&refused).contains(says), "{route}: {refused}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn every_message_assemble_returns_is_one_openclaws_runtime_can_read() {
    let (server, api) = start().await;
    let (status, _) = api
        .post(
            "/v1/memory/remember",
            json!({"content": "The staging database lives on db-7.internal:5432", "type": "entities"}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, assembled) = api
        .post(
            "/v1/sessions/s-valid/assemble",
            json!({"messages": [user("where does the staging database live?", 0)],
                "prompt": "where does the staging database live?"}),
        )
        .await;
    assert_eq!(status, 200, "{assembled}");
    let messages = assembled["messages"].as_array().unwrap();
    // Memory's simulated calls are there (skald wrote them: no provider fields of their own).
    assert!(
        messages
            .iter()
            .any(|message| message["role"] == "toolResult"),
        "{assembled}"
    );
    for message in messages {
        assert!(message["timestamp"].is_number(), "{message}");
        match message["role"].as_str().unwrap() {
            "toolResult" => {
                assert!(message["content"].is_array(), "{message}");
                assert!(message["isError"].is_boolean(), "{message}");
            }
            "assistant" => {
                assert!(message["content"].is_array(), "{message}");
                for field in ["api", "provider", "model", "stopReason"] {
                    assert!(message[field].is_string(), "{field}: {message}");
                }
                assert!(message["usage"]["cost"].is_object(), "{message}");
            }
            _ => {}
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_session_fed_by_commits_is_the_source_and_the_hosts_rewritten_ids_do_not_fork_it() {
    let (server, api) = start().await;
    let turn = json!({"advancementKey": "t1", "messages": [
        user("list the files", 0),
        assistant_call("call_mock1", "bash", json!({"command": "ls"}), 1),
        tool_result("call_mock1", "bash", "Cargo.toml\nsrc", false, 2),
        assistant_text("Two entries.", 3),
    ]});
    let (status, _) = api.post("/v1/sessions/s-fed/commit-turn", turn).await;
    assert_eq!(status, 200);
    let (_, before) = api.get("/v1/sessions/s-fed").await;

    // OpenClaw's projection of the same history: its sanitiser rewrote the tool-call ids.
    let projection = json!([
        user("list the files", 0),
        assistant_call("callmock1", "bash", json!({"command": "ls"}), 1),
        tool_result("callmock1", "bash", "Cargo.toml\nsrc", false, 2),
        assistant_text("Two entries.", 3),
    ]);
    let (status, assembled) = api
        .post(
            "/v1/sessions/s-fed/assemble",
            json!({"messages": projection, "prompt": "and the tests?"}),
        )
        .await;
    assert_eq!(status, 200, "{assembled}");
    assert!(assembled.get("sync").is_none(), "{assembled}");
    assert!(
        assembled["syncSkipped"]
            .as_str()
            .unwrap()
            .contains("commit-turn")
    );
    let (_, after) = api.get("/v1/sessions/s-fed").await;
    assert_eq!(
        after["entries"], before["entries"],
        "nothing was forked or appended"
    );
    let ids: Vec<&str> = assembled["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["toolCallId"].as_str())
        .collect();
    assert_eq!(
        ids,
        ["call_mock1"],
        "the committed turn is what the model sees"
    );
    server.shutdown().await;
}
