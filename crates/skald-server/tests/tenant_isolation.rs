//! Two keys of two tenants: everything tenant A wrote — sessions, refs, memories, resources —
//! is not found or empty for tenant B, over every route family, and B's writes under the same
//! names leave A's untouched.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api_support;
mod common;

use api_support::*;
use common::TestServer;
use serde_json::json;

#[tokio::test]
async fn a_tenants_sessions_refs_and_memories_do_not_exist_for_another() {
    let state = common::test_state(common::default_config());
    let key_a = state
        .keys
        .create(&tenant_named("tenant-a"), "a")
        .unwrap()
        .secret;
    let key_b = state
        .keys
        .create(&tenant_named("tenant-b"), "b")
        .unwrap()
        .secret;
    let server = TestServer::start(state).await;
    let a = Api::new(server.url(""), Some(key_a));
    let b = Api::new(server.url(""), Some(key_b));
    let anonymous = Api::new(server.url(""), None);

    // Tenant A writes a session with a ref, a memory and a resource.
    let (status, assembled) = a
        .post(
            "/v1/sessions/shared-name/assemble",
            json!({"messages": build_conversation()}),
        )
        .await;
    assert_eq!(status, 200, "{assembled}");
    let ref_id = first_ref_id(&assembled["messages"]).unwrap();
    let (_, remembered) = a
        .post(
            "/v1/memory/remember",
            json!({"content": "Tenant A's deploy password lives in the vault under ops/a."}),
        )
        .await;
    let memory_uri = remembered["uri"].as_str().unwrap().to_owned();
    let (status, _) = a
        .post(
            "/v1/memory/resources",
            json!({"name": "runbook.md", "content": "# Runbook\n\nRestart the vault with care.\n"}),
        )
        .await;
    assert_eq!(status, 200);

    // Without a key: nothing.
    let (status, _) = anonymous.get("/v1/sessions").await;
    assert_eq!(status, 401);

    // Sessions.
    let (_, list) = b.get("/v1/sessions").await;
    assert_eq!(list, json!({"sessions": []}));
    for path in [
        "/v1/sessions/shared-name",
        "/v1/sessions/shared-name/entries",
        "/v1/sessions/shared-name/context",
    ] {
        let (status, body) = b.get(path).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    for (path, body) in [
        ("/v1/sessions/shared-name/assemble", json!({})),
        ("/v1/sessions/shared-name/compact", json!({"force": true})),
        ("/v1/sessions/shared-name/after-turn", json!({})),
    ] {
        let (status, answer) = b.post(path, body).await;
        assert_eq!(status, 404, "{path}: {answer}");
    }
    // B's own session of the same name is another session.
    let (_, ingested) = b
        .post(
            "/v1/sessions/shared-name/messages",
            json!({"message": user("B's first message", 0)}),
        )
        .await;
    assert_eq!(ingested, json!({"ingested": true}));
    let (_, b_info) = b.get("/v1/sessions/shared-name").await;
    assert_eq!(b_info["messages"], 1);
    let (_, a_info) = a.get("/v1/sessions/shared-name").await;
    assert_eq!(a_info["messages"], 4);

    // Refs.
    let (status, body) = b.get(&format!("/v1/refs/{ref_id}")).await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = a.get(&format!("/v1/refs/{ref_id}")).await;
    assert_eq!(status, 200);

    // Memories.
    let (_, found) = b
        .post(
            "/v1/memory/search",
            json!({"query": "deploy password vault", "path": "viking://"}),
        )
        .await;
    assert_eq!(found["results"], json!([]), "{found}");
    let (_, ls) = b.get("/v1/memory/ls").await;
    assert_eq!(ls, json!([]));
    let (_, tree) = b.get("/v1/memory/tree").await;
    assert_eq!(tree["entries"], 0, "{tree}");
    let (_, history) = b.get("/v1/memory/history").await;
    assert_eq!(history, json!([]));
    let (status, _) = b.get(&format!("/v1/memory/read?uri={memory_uri}")).await;
    assert_eq!(status, 404);
    let (status, _) = b
        .get("/v1/memory/read?uri=viking://resources/runbook.md")
        .await;
    assert_eq!(status, 404);
    let (status, _) = b
        .post("/v1/memory/forget", json!({"uri": memory_uri}))
        .await;
    assert_eq!(status, 404);
    let (status, _) = b
        .post(
            "/v1/memory/forget",
            json!({"uri": "viking://resources", "recursive": true}),
        )
        .await;
    assert_eq!(status, 404);
    // A still has everything.
    let (status, read) = a.get(&format!("/v1/memory/read?uri={memory_uri}")).await;
    assert_eq!(status, 200, "{read}");
    let (_, a_found) = a
        .post(
            "/v1/memory/search",
            json!({"query": "deploy password vault"}),
        )
        .await;
    assert_eq!(a_found["results"][0]["uri"], memory_uri.as_str());
    server.shutdown().await;
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
