//! The memory API over real HTTP, with the semantics of the `skald` memory commands: remember,
//! search finds it, read its levels, forget it and search no longer does; ls and tree; a
//! document added as a resource and re-added; the history of writes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api_support;
mod common;
mod holding_store;

use api_support::*;
use common::TestServer;
use serde_json::json;

#[tokio::test]
async fn remember_search_read_forget() {
    let server = TestServer::open().await;
    let api = Api::new(server.url(""), None);
    let (status, remembered) = api
        .post(
            "/v1/memory/remember",
            json!({"content": "Alice deploys the billing service with make deploy-billing.",
                   "type": "entities", "priority": 8}),
        )
        .await;
    assert_eq!(status, 200, "{remembered}");
    assert_eq!(remembered["outcome"], "added");
    assert_eq!(remembered["category"], "entities");
    assert_eq!(remembered["priority"], 8);
    assert_eq!(remembered["embedded"], false);
    let uri = remembered["uri"].as_str().unwrap().to_owned();
    assert!(
        uri.starts_with("viking://user/default/memories/entities/alice-deploys-the-billing"),
        "{uri}"
    );
    // The same content again is merged, not stored twice.
    let (_, again) = api
        .post(
            "/v1/memory/remember",
            json!({"content": "Alice deploys the billing service with make deploy-billing."}),
        )
        .await;
    assert_eq!(again["outcome"], "merged");
    assert_eq!(again["uri"], uri.as_str());

    let (status, found) = api
        .post(
            "/v1/memory/search",
            json!({"query": "how is billing deployed?"}),
        )
        .await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["mode"], "full-text");
    assert_eq!(found["results"][0]["uri"], uri.as_str());
    assert_eq!(found["results"][0]["rank"], 1);
    let (_, by_category) = api
        .post(
            "/v1/memory/search",
            json!({"query": "billing deployed", "category": ["preferences", "events"]}),
        )
        .await;
    assert_eq!(by_category["results"], json!([]));

    let (status, read) = api
        .get(&format!("/v1/memory/read?uri={uri}&level=l2"))
        .await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(
        read["text"],
        "Alice deploys the billing service with make deploy-billing."
    );
    assert_eq!(read["level"], "l2");
    assert_eq!(read["version"], 1);
    let (_, abstract_) = api
        .get(&format!("/v1/memory/read?uri={uri}&level=l0"))
        .await;
    assert!(!abstract_["text"].as_str().unwrap().is_empty());

    let (status, forgotten) = api.post("/v1/memory/forget", json!({"uri": uri})).await;
    assert_eq!(status, 200, "{forgotten}");
    assert_eq!(forgotten[0]["uri"], uri.as_str());
    let (_, after) = api
        .post(
            "/v1/memory/search",
            json!({"query": "how is billing deployed?"}),
        )
        .await;
    assert_eq!(after["results"], json!([]));
    let (status, gone) = api.get(&format!("/v1/memory/read?uri={uri}")).await;
    assert_eq!(status, 404, "{gone}");
    let (status, twice) = api.post("/v1/memory/forget", json!({"uri": uri})).await;
    assert_eq!(status, 404, "{twice}");

    let (_, history) = api.get("/v1/memory/history?limit=10").await;
    let actions: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["forgotten", "merged", "added"]);
    let (_, versions) = api.get(&format!("/v1/memory/history?uri={uri}")).await;
    assert_eq!(versions[0]["status"], "forgotten");
    server.shutdown().await;
}

#[tokio::test]
async fn ls_and_tree_show_what_is_stored() {
    let server = TestServer::open().await;
    let api = Api::new(server.url(""), None);
    let (_, empty) = api.get("/v1/memory/ls").await;
    assert_eq!(empty, json!([]));
    for (content, kind) in [
        ("The user prefers dark mode in every editor.", "preferences"),
        ("The user prefers tabs over spaces.", "preference"),
        (
            "Fixed the flaky CI job by pinning the runner image.",
            "cases",
        ),
    ] {
        let (status, body) = api
            .post(
                "/v1/memory/remember",
                json!({"content": content, "type": kind, "user": "alice", "agent": "main"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let (_, root) = api.get("/v1/memory/ls").await;
    let names: Vec<&str> = root
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["agent/", "user/"]);
    assert_eq!(root[1]["entries"], 2);
    let (_, preferences) = api
        .get("/v1/memory/ls?category=preferences&user=alice")
        .await;
    assert_eq!(preferences.as_array().unwrap().len(), 2);
    assert_eq!(preferences[0]["type"], "entry");
    let (_, by_uri) = api
        .get("/v1/memory/ls?uri=viking://agent/main/memories/cases")
        .await;
    assert_eq!(by_uri.as_array().unwrap().len(), 1);

    let (status, tree) = api.get("/v1/memory/tree?depth=8").await;
    assert_eq!(status, 200, "{tree}");
    assert_eq!(tree["uri"], "viking://");
    assert_eq!(tree["entries"], 3);
    let rendered = tree.to_string();
    assert!(rendered.contains("viking://user/alice/memories/preferences"));
    let (_, shallow) = api.get("/v1/memory/tree?uri=viking://user&depth=1").await;
    assert_eq!(shallow["children"][0]["uri"], "viking://user/alice");
    assert!(shallow["children"][0].get("children").is_none());
    server.shutdown().await;
}

const GUIDE: &str = "# Deploy guide\n\nDeploys go through the release train every Tuesday.\n\n\
## Billing\n\nThe billing service deploys with `make deploy-billing` after the migration check.\n\n\
## Search\n\nThe search cluster is reindexed nightly at 02:00 UTC.\n";

#[tokio::test]
async fn a_resource_is_chunked_searchable_and_mirrored_on_re_add() {
    let server = TestServer::open().await;
    let api = Api::new(server.url(""), None);
    let request = json!({"uri": "viking://resources/ops", "name": "deploy.md", "content": GUIDE,
                         "maxChunkChars": 200});
    let (status, added) = api.post("/v1/memory/resources", request.clone()).await;
    assert_eq!(status, 200, "{added}");
    assert_eq!(added["root"], "viking://resources/ops/deploy.md");
    assert_eq!(added["files"], 1);
    assert!(added["chunks"].as_u64().unwrap() >= 2, "{added}");
    assert_eq!(
        added["added"].as_u64().unwrap(),
        added["chunks"].as_u64().unwrap() + added["directories"].as_u64().unwrap()
    );
    let (_, again) = api.post("/v1/memory/resources", request).await;
    assert_eq!(again["added"], 0);
    assert_eq!(again["unchanged"], added["added"]);

    let (_, found) = api
        .post(
            "/v1/memory/search",
            json!({"query": "when is the search cluster reindexed", "path": "viking://resources/ops"}),
        )
        .await;
    let top = found["results"][0]["uri"].as_str().unwrap();
    assert!(
        top.starts_with("viking://resources/ops/deploy.md/"),
        "{found}"
    );
    // Resources are not among the default categories of a search.
    let (_, memories_only) = api
        .post(
            "/v1/memory/search",
            json!({"query": "when is the search cluster reindexed"}),
        )
        .await;
    assert_eq!(memories_only["results"], json!([]));
    let (_, overview) = api
        .get("/v1/memory/read?uri=viking://resources/ops/deploy.md&level=l0")
        .await;
    assert!(
        overview["entry"]
            .as_str()
            .unwrap()
            .ends_with("deploy.md/_overview")
    );

    // A shorter document forgets the chunks that are gone.
    let (_, shrunk) = api
        .post(
            "/v1/memory/resources",
            json!({"uri": "viking://resources/ops", "name": "deploy.md",
                   "content": "# Deploy guide\n\nDeploys go through the release train every Tuesday.\n",
                   "maxChunkChars": 200}),
        )
        .await;
    assert!(shrunk["forgotten"].as_u64().unwrap() >= 1, "{shrunk}");
    let (_, forgotten) = api
        .post(
            "/v1/memory/forget",
            json!({"uri": "viking://resources/ops", "recursive": true}),
        )
        .await;
    assert!(!forgotten.as_array().unwrap().is_empty());
    server.shutdown().await;
}

#[tokio::test]
async fn a_directory_of_documents_is_added_in_one_request() {
    let server = TestServer::open().await;
    let api = Api::new(server.url(""), None);
    let request = json!({
        "uri": "viking://resources/ops",
        "name": "handbook",
        "documents": [
            {"path": "deploy.md", "content": GUIDE, "source": "/srv/handbook/deploy.md"},
            {"path": "oncall/pager.txt", "content": "Page the secondary after 15 minutes.\n"},
            {"path": "empty.md", "content": ""},
        ],
        "skipped": [{"path": "/srv/handbook/logo.png", "reason": "binary (not UTF-8 text)"}],
        "maxChunkChars": 200,
    });
    let (status, added) = api.post("/v1/memory/resources", request.clone()).await;
    assert_eq!(status, 200, "{added}");
    assert_eq!(added["root"], "viking://resources/ops/handbook");
    assert_eq!(added["files"], 2, "{added}");
    assert_eq!(
        added["skipped"],
        json!([{"path": "/srv/handbook/logo.png", "reason": "binary (not UTF-8 text)"},
               {"path": "empty.md", "reason": "empty"}])
    );
    let (_, listed) = api
        .get("/v1/memory/ls?uri=viking://resources/ops/handbook")
        .await;
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["deploy.md/", "oncall/", "_overview"], "{listed}");
    let (_, pager) = api
        .get("/v1/memory/ls?uri=viking://resources/ops/handbook/oncall/pager.txt")
        .await;
    assert!(!pager.as_array().unwrap().is_empty(), "{pager}");

    // Without a document the directory is mirrored as empty: everything below it is forgotten.
    let (_, emptied) = api
        .post(
            "/v1/memory/resources",
            json!({"uri": "viking://resources/ops", "name": "handbook", "documents": []}),
        )
        .await;
    assert_eq!(emptied["forgotten"], added["added"], "{emptied}");

    for (body, expected) in [
        (
            json!({"name": "h", "content": "x", "documents": []}),
            "either `content`",
        ),
        (json!({"name": "h"}), "either `content`"),
        (
            json!({"name": "h", "documents": [{"path": "../etc/passwd", "content": "x"}]}),
            "relative path",
        ),
        (
            json!({"name": "h", "documents": [{"path": "a//b.md", "content": "x"}]}),
            "relative path",
        ),
    ] {
        let (status, answer) = api.post("/v1/memory/resources", body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(message(&answer).contains(expected), "{answer}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_document_of_more_chunks_than_one_request_may_add_is_refused_and_changes_nothing() {
    let server = TestServer::open().await;
    let api = Api::new(server.url(""), None);
    let limit = skald_engine::memory::manage::MAX_RESOURCE_CHUNKS;
    let content: String = (0..=limit)
        .map(|at| format!("# Step {at}\nDo {at}.\n\n"))
        .collect();
    let (status, refused) = api
        .post(
            "/v1/memory/resources",
            json!({"name": "steps.md", "content": content}),
        )
        .await;
    assert_eq!(status, 413, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("{} chunks", limit + 1))
            && message.contains(&format!("at most {limit}"))
            && message.contains("MAX_RESOURCE_CHUNKS"),
        "{refused}"
    );
    let (_, listed) = api.get("/v1/memory/ls?uri=viking://resources").await;
    assert_eq!(listed, json!([]));
    let (_, writes) = api.get("/v1/memory/history").await;
    assert_eq!(writes, json!([]));
}

#[tokio::test]
async fn a_resource_request_whose_client_disconnects_stops_and_writes_nothing() {
    use tokio::io::AsyncWriteExt;

    let mut state_stores = skald_store::test_stores::stores();
    let holding = holding_store::HoldingStore::new(state_stores.memories.clone());
    state_stores.memories = holding.clone();
    let stores = skald_engine::Stores {
        sessions: state_stores.sessions,
        refs: state_stores.refs,
        memories: state_stores.memories,
    };
    let state =
        skald_server::AppState::from_stores(stores, state_stores.keys, common::default_config())
            .unwrap();
    let server = TestServer::start(state).await;
    let content: String = (0..200)
        .map(|at| format!("# Step {at}\nDo {at}.\n\n"))
        .collect();
    let body = serde_json::to_vec(&json!({"name": "steps.md", "content": content})).unwrap();
    let mut client = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST /v1/memory/resources HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        server.addr,
        body.len()
    );
    client.write_all(head.as_bytes()).await.unwrap();
    client.write_all(&body).await.unwrap();
    // The chunks' transaction is under way (its first entry written); the client leaves.
    holding
        .wait_for("the batch to be held", |store| {
            store.holding.load(std::sync::atomic::Ordering::SeqCst)
        })
        .await;
    drop(client);
    holding
        .wait_for("the batch to end", |store| {
            store.ended.lock().unwrap().is_some()
        })
        .await;
    let ended = holding.ended.lock().unwrap().clone().unwrap();
    assert!(
        ended
            .as_ref()
            .is_err_and(|error| error.contains("cancelled")),
        "{ended:?}"
    );
    let api = Api::new(server.url(""), None);
    let (_, listed) = api.get("/v1/memory/ls?uri=viking://resources").await;
    assert_eq!(listed, json!([]), "nothing of the document stays");
}
