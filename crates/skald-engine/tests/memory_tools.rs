//! The five memory tools, run by the engine over an in-memory store (seed 002, Component 3
//! and `commit_memory`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod memory_common;

use memory_common::*;
use std::sync::Arc;

use serde_json::{Value, json};
use skald_core::memory::tools::tool_specs;
use skald_core::memory::uri::MemoryUri;
use skald_engine::memory::MemoryToolOutput;
use skald_engine::storage::MemoryStore;
use skald_engine::{Engine, EngineConfig, ManualClock, Stores};
use skald_llm::embed::Embedder;
use tokio_util::task::TaskTracker;

/// 2023-06-15T12:00:00Z.
const NOW: i64 = 1_686_830_400_000;

/// An engine over `store` whose clock reads [`NOW`], with `embedder` (none: full-text only).
fn engine(store: &Arc<dyn MemoryStore>, embedder: Option<Arc<dyn Embedder>>) -> Engine {
    let stores = Stores {
        memories: store.clone(),
        ..Stores::in_memory().unwrap()
    };
    let config = EngineConfig {
        embedder,
        ..alice_config("skald", Arc::new(ManualClock::new(NOW)))
    };
    Engine::new(stores, config, TaskTracker::new()).unwrap()
}

/// The memory tool `name` run by the engine, for Alice.
async fn run(store: &Arc<dyn MemoryStore>, name: &str, arguments: Value) -> MemoryToolOutput {
    engine(store, None)
        .memory_tool(&tenant_named(TENANT), &identity(), name, &arguments)
        .await
}

fn body(output: &MemoryToolOutput) -> Value {
    serde_json::from_str(&output.text).unwrap()
}

#[tokio::test]
async fn search_memories_returns_abstracts_best_first() {
    let store = fixture_store();
    let output = run(
        &store,
        "search_memories",
        json!({"query": "invoices queries slow", "max_results": 2}),
    )
    .await;
    assert!(!output.is_error, "{}", output.text);
    insta::assert_snapshot!(output.text);
    let events = run(
        &store,
        "search_memories",
        json!({"query": "billing database", "category": "events"}),
    )
    .await;
    let memories = body(&events)["memories"].as_array().unwrap().clone();
    assert!(!memories.is_empty());
    assert!(memories.iter().all(|m| m["category"] == "events"));
    let under = run(
        &store,
        "search_memories",
        json!({"query": "billing database", "path": "viking://resources"}),
    )
    .await;
    let memories = body(&under)["memories"].as_array().unwrap().clone();
    assert_eq!(memories.len(), 1);
    assert_eq!(memories[0]["uri"], "viking://resources/docs/runbook.md");
}

#[tokio::test]
async fn search_memories_never_shows_other_users() {
    let store = fixture_store();
    let output = run(
        &store,
        "search_memories",
        json!({"query": "Bob billing notes"}),
    )
    .await;
    assert!(!output.text.contains("/user/bob/"), "{}", output.text);
    let output = run(
        &store,
        "search_memories",
        json!({"query": "billing", "path": "viking://user/bob"}),
    )
    .await;
    assert!(output.is_error);
    assert!(
        output
            .text
            .contains("outside this session's memory; you can use viking://user/alice/…")
    );
}

#[tokio::test]
async fn memory_ls_lists_what_the_session_may_see() {
    let store = fixture_store();
    let output = run(
        &store,
        "memory_ls",
        json!({"path": "viking://user/alice/memories"}),
    )
    .await;
    assert!(!output.is_error, "{}", output.text);
    insta::assert_snapshot!(output.text);
    let root = run(&store, "memory_ls", json!({})).await;
    assert!(!root.text.contains("/user/bob"));
    assert!(root.text.contains("\"path\":\"viking://\""));
    let cases = run(
        &store,
        "memory_ls",
        json!({"path": "viking://", "category": "cases"}),
    )
    .await;
    let entries = body(&cases)["entries"].as_array().unwrap().clone();
    assert!(
        entries
            .iter()
            .any(|e| e["uri"] == "viking://agent/main/memories/cases/slow-invoices.md")
    );
    assert!(
        entries
            .iter()
            .all(|e| e.get("abstract").is_none() || e["uri"].as_str().unwrap().contains("/cases/"))
    );
    let bob = run(&store, "memory_ls", json!({"path": "viking://user/bob"})).await;
    assert!(bob.is_error);
}

#[tokio::test]
async fn memory_read_reads_each_level() {
    let store = fixture_store();
    let uri = "viking://user/alice/memories/entities/billing-db.md";
    let full = run(&store, "memory_read", json!({"uri": uri})).await;
    assert!(!full.is_error, "{}", full.text);
    insta::assert_snapshot!(full.text);
    let abstract_only = run(&store, "memory_read", json!({"uri": uri, "level": "l0"})).await;
    assert_eq!(
        body(&abstract_only)["abstract"],
        "Billing database: Postgres 15 behind pgbouncer."
    );
    let missing = run(
        &store,
        "memory_read",
        json!({"uri": "viking://user/alice/memories/entities/nope.md"}),
    )
    .await;
    assert!(missing.is_error);
    assert!(missing.text.contains("no memory at"));
    assert!(missing.text.contains("memory_ls"));
    let directory = run(
        &store,
        "memory_read",
        json!({"uri": "viking://user/alice/memories"}),
    )
    .await;
    assert!(directory.text.contains("is a directory"));
}

#[tokio::test]
async fn commit_memory_adds_merges_and_updates() {
    let store = fixture_store();
    let added = run(
        &store,
        "commit_memory",
        json!({"memory_content": "Alice wants no confirmation prompts before deploys.",
               "memory_type": "preference", "priority": "high", "category": "deploys"}),
    )
    .await;
    assert!(!added.is_error, "{}", added.text);
    insta::assert_snapshot!("commit_added", added.text);
    let uri = MemoryUri::parse("viking://user/alice/memories/preferences/deploys.md").unwrap();
    let stored = store.get(&tenant_named(TENANT), &uri).unwrap();
    assert_eq!(stored.priority, 8);
    assert_eq!(stored.created_at_ms, NOW);

    let merged = run(
        &store,
        "commit_memory",
        json!({"memory_content": "alice prefers dark mode in every editor",
               "memory_type": "preference", "category": "theme"}),
    )
    .await;
    insta::assert_snapshot!("commit_merged", merged.text);
    assert_eq!(
        body(&merged)["uri"],
        "viking://user/alice/memories/preferences/editor.md"
    );

    let updated = run(
        &store,
        "commit_memory",
        json!({"memory_content": "Alice now wants a confirmation prompt before production deploys only.",
               "memory_type": "preferences", "category": "deploys"}),
    )
    .await;
    insta::assert_snapshot!("commit_updated", updated.text);
    assert_eq!(store.history(&tenant_named(TENANT), &uri).unwrap().len(), 2);

    let event = run(
        &store,
        "commit_memory",
        json!({"memory_content": "Alice rotated the pgbouncer credentials.", "memory_type": "event"}),
    )
    .await;
    let event_uri = body(&event)["uri"].as_str().unwrap().to_owned();
    // Dated by the engine's clock.
    assert!(
        event_uri.starts_with(
            "viking://user/alice/memories/events/2023/06/15/alice-rotated-pgbouncer-credentials-"
        ),
        "{event_uri}"
    );
    let case = run(
        &store,
        "commit_memory",
        json!({"memory_content": "CI failed on node 22; pinning node 20 fixed it.", "memory_type": "case", "priority": 3}),
    )
    .await;
    assert!(
        body(&case)["uri"]
            .as_str()
            .unwrap()
            .starts_with("viking://agent/main/memories/cases/ci-failed-node-22-")
    );
}

#[tokio::test]
async fn commit_memory_embeds_when_an_embedder_is_given() {
    let store = fixture_store();
    let output = engine(&store, Some(Arc::new(KeywordEmbedder)))
        .memory_tool(
            &tenant_named(TENANT),
            &identity(),
            "commit_memory",
            &json!({"memory_content": "Alice's pager rotation is every other week.", "memory_type": "entity", "category": "pager"}),
        )
        .await;
    assert!(!output.is_error, "{}", output.text);
    let uri = MemoryUri::parse("viking://user/alice/memories/entities/pager.md").unwrap();
    assert_eq!(
        store
            .get(&tenant_named(TENANT), &uri)
            .unwrap()
            .embedding_dimensions,
        Some(32)
    );
}

#[tokio::test]
async fn memory_forget_forgets_own_entries_only() {
    let store = fixture_store();
    let uri = "viking://user/alice/memories/preferences/editor.md";
    let output = run(&store, "memory_forget", json!({"uri": uri})).await;
    assert!(!output.is_error, "{}", output.text);
    assert_eq!(
        output.text,
        "{\"success\":true,\"forgotten\":\"viking://user/alice/memories/preferences/editor.md\",\"version\":1}"
    );
    assert!(
        store
            .get(&tenant_named(TENANT), &MemoryUri::parse(uri).unwrap())
            .is_err()
    );
    let again = run(&store, "memory_forget", json!({"uri": uri})).await;
    assert!(again.is_error);
    assert!(again.text.contains("forgotten"));
    for other in [
        "viking://user/bob/memories/entities/billing.md",
        "viking://resources/docs/runbook.md",
    ] {
        let refused = run(&store, "memory_forget", json!({"uri": other})).await;
        assert!(refused.is_error);
        assert!(
            refused
                .text
                .contains("cannot be forgotten from this session")
        );
    }
}

#[tokio::test]
async fn bad_arguments_are_tool_errors_the_model_can_fix() {
    let store = fixture_store();
    for (name, arguments, expected) in [
        (
            "search_memories",
            json!({}),
            "missing required argument \\\"query\\\"",
        ),
        (
            "search_memories",
            json!({"query": "x", "limit": 3}),
            "unknown argument \\\"limit\\\"",
        ),
        (
            "memory_ls",
            json!({"path": "user/alice"}),
            "must start with viking://",
        ),
        (
            "memory_read",
            json!({"uri": 42}),
            "\\\"uri\\\" must be a string",
        ),
        (
            "commit_memory",
            json!({"memory_content": "x", "memory_type": "todo"}),
            "one of profile, preference",
        ),
        ("memory_forget", json!("{not json"), "must be a JSON object"),
        ("memory_delete", json!({}), "unknown tool"),
    ] {
        let output = run(&store, name, arguments.clone()).await;
        assert!(output.is_error, "{name} {arguments}");
        assert!(
            output.text.starts_with("{\"success\":false,\"error\":"),
            "{}",
            output.text
        );
        assert!(output.text.contains(expected), "{name}: {}", output.text);
    }
    // Nothing was written by any of them.
    assert_eq!(store.stats(&tenant_named(TENANT)).unwrap().live, 12);
}

#[test]
fn tool_definitions_are_stable() {
    let rendered: Vec<String> = tool_specs()
        .iter()
        .map(|spec| {
            format!(
                "## {}\n{}\n{}",
                spec.name,
                spec.description.as_deref().unwrap_or(""),
                serde_json::to_string_pretty(&spec.parameters).unwrap()
            )
        })
        .collect();
    insta::assert_snapshot!(rendered.join("\n\n"));
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
