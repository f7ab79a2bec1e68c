//! What an OpenClaw host needs beyond the engine routes' basics: `tokenBudget` taken as the host
//! means it (the tokens the returned messages may take, down to 1; a view over it compacts the
//! session to fit), memory switched off for one call, commits placed by the host's transcript
//! anchors (a rewind continues from the earlier turn), and skald's tools run over HTTP
//! (`GET /v1/tools`, `POST /v1/tools/{name}`) by the executor the proxy uses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api_support;
mod common;

use api_support::*;
use common::TestServer;
use serde_json::json;

async fn start() -> (TestServer, Api) {
    let mut config = common::default_config();
    config.engine.compaction.reserve_tokens = 2_000;
    let server = TestServer::start(common::test_state(config)).await;
    let api = Api::new(server.url(""), None);
    (server, api)
}

#[tokio::test]
async fn assemble_over_the_hosts_token_budget_compacts_the_session_to_fit() {
    let (server, api) = start().await;
    // Thirty turns of talk: nothing to offload, only compaction can make it fit.
    let mut messages = Vec::new();
    for turn in 0..30_i64 {
        let words =
            format!("design note {turn}: the cache key must include the tenant. ").repeat(12);
        messages.push(user(&format!("Question {turn}: {words}"), turn * 10));
        messages.push(assistant_text(
            &format!("Answer {turn}: {words}"),
            turn * 10 + 1,
        ));
    }
    let (status, _) = api
        .post("/v1/sessions/long/messages", json!({"messages": messages}))
        .await;
    assert_eq!(status, 200);
    let (_, roomy) = api
        .post(
            "/v1/sessions/long/assemble",
            json!({"tokenBudget": 500_000}),
        )
        .await;
    assert!(roomy.get("fitToBudget").is_none(), "{roomy}");
    let before = roomy["estimatedTokens"].as_u64().unwrap();

    let budget = before / 2;
    let (status, fitted) = api
        .post("/v1/sessions/long/assemble", json!({"tokenBudget": budget}))
        .await;
    assert_eq!(status, 200, "{fitted}");
    assert_eq!(
        fitted["fitToBudget"]["outcome"], "compacted",
        "{}",
        fitted["fitToBudget"]
    );
    assert_eq!(fitted["fitToBudget"]["tokensBefore"], before);
    let after = fitted["estimatedTokens"].as_u64().unwrap();
    assert!(
        after <= budget,
        "{after} tokens still over the budget of {budget}"
    );
    // The compaction is the session's: a checkpoint, and the summary first in the view.
    let (_, entries) = api.get("/v1/sessions/long/entries").await;
    assert!(entries.to_string().contains("\"type\":\"compaction\""));
    assert_eq!(fitted["messages"][0]["role"], "user");
    server.shutdown().await;
}

#[tokio::test]
async fn a_token_budget_of_one_is_the_hosts_to_give_and_never_an_error() {
    let (server, api) = start().await;
    api.post(
        "/v1/sessions/s/messages",
        json!({"message": user("hello", 1)}),
    )
    .await;
    let (status, body) = api
        .post("/v1/sessions/s/assemble", json!({"tokenBudget": 1}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["messages"][0]["content"][0]["text"], "hello");
    // A window the host names is still checked.
    let (status, body) = api
        .post(
            "/v1/sessions/s/assemble",
            json!({"runtimeContext": {"modelContextWindow": 10}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("modelContextWindow"), "{body}");
    server.shutdown().await;
}

#[tokio::test]
async fn memory_false_leaves_memory_out_of_one_assemble() {
    let (server, api) = start().await;
    api.post(
        "/v1/sessions/s/messages",
        json!({"message": user("hello", 1)}),
    )
    .await;
    let (_, with) = api.post("/v1/sessions/s/assemble", json!({})).await;
    assert!(with["report"]["memory"].is_object(), "{with}");
    let (_, without) = api
        .post("/v1/sessions/s/assemble", json!({"memory": false}))
        .await;
    assert!(without["report"].get("memory").is_none(), "{without}");
    let names: Vec<&str> = without["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    // No memory tool; the fetch tool comes with the session's first offload.
    assert!(
        names.iter().all(|name| *name == "fetch_original_data"),
        "{names:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_tools_route_runs_skalds_tools_and_says_what_was_wrong() {
    let (server, api) = start().await;
    let (status, listed) = api.get("/v1/tools").await;
    assert_eq!(status, 200);
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "fetch_original_data",
            "search_memories",
            "memory_ls",
            "memory_read",
            "commit_memory",
            "memory_forget",
            "search_docs"
        ]
    );

    // A memory written through the tool is found through the tool.
    let (status, written) = api
        .post(
            "/v1/tools/commit_memory",
            json!({"arguments": {"memory_content": "The user's editor is helix", "memory_type": "preference", "category": "editor"}}),
        )
        .await;
    assert_eq!(status, 200, "{written}");
    assert_eq!(written["isError"], false, "{written}");
    let (_, found) = api
        .post(
            "/v1/tools/search_memories",
            json!({"arguments": {"query": "editor"}}),
        )
        .await;
    assert!(
        found["content"].as_str().unwrap().contains("helix"),
        "{found}"
    );

    // The model's mistakes are tool errors it can correct, not HTTP failures.
    let (status, wrong) = api
        .post(
            "/v1/tools/search_memories",
            json!({"arguments": {"qeury": "editor"}}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(wrong["isError"], true);
    assert!(
        wrong["content"].as_str().unwrap().contains("qeury"),
        "{wrong}"
    );
    let (_, missing) = api
        .post(
            "/v1/tools/fetch_original_data",
            json!({"arguments": {"ref_ids": ["0".repeat(64)]}}),
        )
        .await;
    assert_eq!(missing["isError"], true, "{missing}");

    // What is not a tool call at all is an HTTP error that says so.
    let (status, unknown) = api.post("/v1/tools/rm_rf", json!({"arguments": {}})).await;
    assert_eq!(status, 404);
    assert!(
        unknown.to_string().contains("fetch_original_data"),
        "{unknown}"
    );
    let (status, malformed) = api
        .post("/v1/tools/memory_ls", json!({"arguments": [], "extra": 1}))
        .await;
    assert_eq!(status, 400, "{malformed}");
    server.shutdown().await;
}

/// One commit-turn body: a user question and its answer, with OpenClaw's anchors.
fn turn(key: &str, parent: &str, terminal: &str, text: &str, at: i64) -> serde_json::Value {
    json!({
        "advancementKey": key,
        "admission": {"entryId": format!("{key}-user"), "effectiveParentId": parent},
        "terminal": {"entryId": terminal},
        "messages": [user(&format!("question {text}"), at), assistant_text(&format!("answer {text}"), at + 1)],
    })
}

#[tokio::test]
async fn a_host_that_rewinds_continues_from_the_earlier_turn_on_a_branch() {
    let (server, api) = start().await;
    let commit = |body: serde_json::Value| {
        let api = &api;
        async move { api.post("/v1/sessions/r/commit-turn", body).await }
    };
    let (_, first) = commit(turn("a", "h0", "hA", "A", 10)).await;
    assert_eq!(first["placement"], "continued", "{first}");
    let (_, second) = commit(turn("b", "hA", "hB", "B", 20)).await;
    assert_eq!(second["placement"], "continued", "{second}");
    // The user edits question B: the host's new turn follows A's end, not B's.
    let (_, edited) = commit(turn("c", "hA", "hC", "C", 30)).await;
    assert_eq!(edited["placement"], "branched", "{edited}");
    let (_, view) = api
        .post("/v1/sessions/r/assemble", json!({"memory": false}))
        .await;
    let texts: Vec<String> = view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message.to_string())
        .collect();
    let joined = texts.join("\n");
    assert!(
        joined.contains("question A") && joined.contains("question C"),
        "{joined}"
    );
    assert!(
        !joined.contains("question B"),
        "the abandoned turn is off the path: {joined}"
    );
    // B is kept, on its branch: nothing a host committed is lost.
    let (_, entries) = api.get("/v1/sessions/r/entries").await;
    assert!(entries.to_string().contains("question B"));
    // The next turn continues the new branch.
    let (_, next) = commit(turn("d", "hC", "hD", "D", 40)).await;
    assert_eq!(next["placement"], "continued", "{next}");
    // A parent skald cannot place (inside a turn) goes after the leaf, and says so.
    let (_, unknown) = commit(turn("e", "h-inside-a-turn", "hE", "E", 50)).await;
    assert_eq!(unknown["placement"], "unknown_parent", "{unknown}");
    server.shutdown().await;
}
