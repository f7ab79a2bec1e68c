//! The use cases behind a host's own hooks (Claude Code's plugin): recall for a submitted
//! prompt, a host transcript compacted by skald's summarizer with its summary handed back
//! within the host's limit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::uri::MemoryCategory;
use skald_core::pipeline::policy::Policy;
use skald_engine::{Engine, EngineConfig, Stores};
use tokio_util::sync::CancellationToken;

/// An engine over the stores of `SKALD_TEST_STORE` (skald_store::test_stores).
fn engine() -> Engine {
    let stores = skald_store::test_stores::stores();
    let stores = Stores {
        sessions: stores.sessions,
        refs: stores.refs,
        memories: stores.memories,
    };
    let config = EngineConfig::new(Policy::preset("skald").unwrap());
    Engine::new(stores, config, tokio_util::task::TaskTracker::new()).unwrap()
}

/// An OpenAI Chat transcript of `turns` user turns, each with a tool call whose output names a
/// file, and an answer.
fn transcript(turns: usize) -> String {
    let mut messages = vec![json!({"role": "system", "content": "You are a coding agent."})];
    for turn in 0..turns {
        messages.push(json!({"role": "user", "content": format!("Fix the failing test number {turn} in src/module_{turn}.rs, and never touch Cargo.lock.")}));
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{turn}"), "type": "function", "function": {"name": "bash", "arguments": format!("{{\"command\": \"cargo test module_{turn}\"}}")}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("call_{turn}"), "content": format!("{}test module_{turn}::works ... FAILED\nsrc/module_{turn}.rs:42: assertion failed", "running 40 tests, compiling the workspace first\n".repeat(60))}));
        messages.push(json!({"role": "assistant", "content": format!("I fixed src/module_{turn}.rs: the assertion at line 42 compared the wrong field.")}));
    }
    json!({"messages": messages}).to_string()
}

#[tokio::test]
async fn a_host_transcript_is_compacted_whole_and_its_summary_comes_back_within_the_limit() {
    let engine = engine();
    let tenant = Tenant::parse("t").unwrap();
    let session = SessionId::parse("0b6f3c1e-claude-session").unwrap();
    assert_eq!(
        engine
            .compaction_summary(&tenant, &session, 10_000)
            .unwrap(),
        None
    );
    let compacted = engine
        .compact_transcript(&tenant, &session, &transcript(4), &CancellationToken::new())
        .await
        .unwrap();
    assert!(compacted.entries_imported > 0);
    assert_eq!(
        compacted.compaction.result.outcome.name(),
        "compacted",
        "{:?}",
        compacted.compaction.result.outcome
    );
    let summary = engine
        .compaction_summary(&tenant, &session, 10_000)
        .unwrap()
        .expect("a summary after the compaction");
    // The last turn is summarised too: the host drops its whole history.
    assert!(summary.contains("src/module_3.rs"), "{summary}");
    assert!(summary.contains("src/module_0.rs"), "{summary}");
    let short = engine
        .compaction_summary(&tenant, &session, 300)
        .unwrap()
        .unwrap();
    assert!(short.chars().count() <= 300, "{short}");
    // The span left the context for memory: its archive is written.
    assert!(compacted.compaction.memory_archive.is_some());
}

#[tokio::test]
async fn a_prompt_gets_the_memories_recalled_for_it_and_a_greeting_gets_none() {
    let engine = engine();
    let tenant = Tenant::parse("t").unwrap();
    let identity = engine.memory_identity().unwrap();
    engine
        .remember(
            &tenant,
            &identity,
            "The staging cluster's database password rotates every Tuesday at 09:00 UTC",
            MemoryCategory::Entities,
            None,
        )
        .await
        .unwrap();
    let recall = engine
        .recall_for_prompt(&tenant, "When does the staging database password rotate?")
        .await
        .unwrap()
        .expect("the memory is recalled");
    assert!(
        recall.context.contains("Tuesday at 09:00 UTC"),
        "{}",
        recall.context
    );
    assert!(
        recall.context.contains("search_memories"),
        "{}",
        recall.context
    );
    assert_eq!(recall.report.kept.len(), 1);
    assert_eq!(engine.recall_for_prompt(&tenant, "hi").await.unwrap(), None);
}

#[tokio::test]
async fn an_output_a_hook_offloads_is_fetched_back_exactly_as_the_model_was_shown_it() {
    let engine = engine();
    let tenant = Tenant::parse("t").unwrap();
    // A tool whose output is Claude Code's record of a Bash call (`jq .toolUseResult`): the
    // model is shown the whole object, stderr and flags included, not its stdout alone.
    let stdout = "test api::case ... ok\n".repeat(400);
    let text = serde_json::to_string_pretty(&json!({
        "stdout": stdout,
        "stderr": "warning: unused import `std::fmt`\n",
        "interrupted": false,
        "isImage": false,
        "noOutputExpected": false,
    }))
    .unwrap();
    let offloaded = engine.offload_output(&tenant, &text).unwrap().unwrap();
    let fetched = engine
        .run_tool(
            &tenant,
            None,
            "fetch_original_data",
            &json!({"ref_ids": [offloaded.ref_id], "max_chars": 1_000_000}),
        )
        .await;
    assert!(!fetched.is_error, "{}", fetched.text);
    let (header, body) = fetched.text.split_once('\n').unwrap();
    let mut read_back: String = body
        .split_inclusive('\n')
        .map(|line| line.split_once("| ").unwrap().1)
        .collect();
    if header.contains("; no line break at the end") {
        read_back.pop();
    }
    assert_eq!(read_back, text);
}

/// Issue 28, gap 3, on the hooks' path: the CLAUDE.md files a Claude Code transcript says were
/// loaded (its `instructions` attachment, written as Claude Code 2.1.332 writes it) are the
/// critical rules of the compaction `PreCompact` and `SessionEnd` ask for, though the
/// transcript's messages do not hold them.
#[tokio::test]
async fn a_claude_code_transcripts_claude_md_reaches_the_summary_of_its_compaction() {
    let engine = engine();
    let tenant = Tenant::parse("t").unwrap();
    let session = SessionId::parse("5d1c-claude-rules").unwrap();
    let mut lines = vec![
        json!({"type": "queue-operation", "operation": "enqueue",
        "timestamp": "2026-12-07T23:33:04.978Z", "sessionId": "5d1c-claude-rules",
        "content": "Fix the failing tests."}),
        json!({"parentUuid": null, "type": "attachment", "uuid": "a-1",
        "timestamp": "2026-12-07T23:33:05.063Z", "sessionId": "5d1c-claude-rules",
        "attachment": {"type": "instructions", "files": [{"path": "/work/app/CLAUDE.md",
            "type": "Project", "content": "# Project rules\n\n## Red Lines\n\nNever push to main."}]}}),
    ];
    for turn in 0..4 {
        lines.push(json!({"type": "user", "uuid": format!("u-{turn}"),
            "timestamp": format!("2026-12-07T23:3{turn}:10.000Z"),
            "message": {"role": "user", "content": format!("Fix the failing test number {turn} in src/module_{turn}.rs.")}}));
        lines.push(json!({"type": "assistant", "uuid": format!("a-{turn}"),
            "timestamp": format!("2026-12-07T23:3{turn}:20.000Z"),
            "message": {"id": format!("msg_{turn}"), "role": "assistant", "model": "claude-test",
                "content": [{"type": "text", "text": format!("I fixed src/module_{turn}.rs: {}", "the assertion compared the wrong field. ".repeat(40))}],
                "usage": {"input_tokens": 10, "output_tokens": 10}}}));
    }
    let transcript: String = lines.iter().map(|line| format!("{line}\n")).collect();
    let compacted = engine
        .compact_transcript(&tenant, &session, &transcript, &CancellationToken::new())
        .await
        .unwrap();
    assert!(compacted.compaction.result.outcome.is_compacted());
    let summary = engine
        .compaction_summary(&tenant, &session, 10_000)
        .unwrap()
        .unwrap();
    assert!(
        summary.contains("<workspace-critical-rules>\nFrom /work/app/CLAUDE.md:\n## Red Lines\n\nNever push to main."),
        "{summary}"
    );
}

/// Issue 28, gap 7: what the hooks give Claude Code matches what the proxy gives a model — the
/// recall query is made of the user's last five messages (a follow-up that names nothing still
/// recalls what the earlier prompt was about), a session starts with the profile, the tool
/// memories and the memory listing, and the calls `PostToolUse` reports become tool memories.
#[tokio::test]
async fn the_hooks_recall_over_earlier_prompts_start_with_memory_and_record_tool_calls() {
    let engine = engine();
    let tenant = Tenant::parse("t").unwrap();
    let identity = engine.memory_identity().unwrap();
    assert_eq!(engine.memory_at_session_start(&tenant).unwrap(), None);
    engine
        .remember(
            &tenant,
            &identity,
            "The staging cluster's database password rotates every Tuesday at 09:00 UTC",
            MemoryCategory::Entities,
            None,
        )
        .await
        .unwrap();
    engine
        .remember(
            &tenant,
            &identity,
            "Ana Lindqvist, platform engineer; prefers answers in Swedish.",
            MemoryCategory::Profile,
            None,
        )
        .await
        .unwrap();
    let follow_up = "Please say that once more.";
    assert_eq!(
        engine.recall_for_prompt(&tenant, follow_up).await.unwrap(),
        None
    );
    let earlier = ["When does the staging database password rotate?".to_owned()];
    let recall = engine
        .recall_for_prompt_after(&tenant, &earlier, follow_up)
        .await
        .unwrap()
        .expect("recalled from the earlier prompt");
    assert!(
        recall.context.contains("Tuesday at 09:00 UTC"),
        "{}",
        recall.context
    );

    let report = |success: bool, command: &str| {
        skald_core::memory::usage::ToolCallReport::new(
            "Bash",
            success,
            None,
            (!success).then(|| "bash: line 1: psql: command not found".to_owned()),
        )
        .with_arguments(&json!({ "command": command }))
    };
    let reports: Vec<_> = (0..3)
        .flat_map(|_| {
            [
                report(true, "cargo test -q"),
                report(false, "psql -c 'select 1'"),
            ]
        })
        .collect();
    let written = engine.record_host_tool_calls(&tenant, &reports).unwrap();
    assert_eq!(written.updated.len(), 1);
    let start = engine
        .memory_at_session_start(&tenant)
        .unwrap()
        .expect("memory to start with");
    assert!(
        start.contains("## User Profile\n- Ana Lindqvist"),
        "{start}"
    );
    assert!(
        start.contains("### Bash") && start.contains("- Worked: `cargo test` (3 of 3 ok)"),
        "{start}"
    );
    assert!(
        start.contains("## What long-term memory holds (memory_ls viking://)"),
        "{start}"
    );
}
