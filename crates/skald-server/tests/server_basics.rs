//! The server's frame: health, metrics, the OpenAPI document, JSON errors for unknown routes,
//! and API keys scoping requests to a tenant.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::TestServer;
use serde_json::Value;

#[tokio::test]
async fn healthz_answers_and_an_unknown_route_is_a_json_404() {
    let server = TestServer::open().await;
    let client = reqwest::Client::new();
    let health: Value = client
        .get(server.url("/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["auth_required"], false);

    let missing = client.get(server.url("/v1/nope")).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["type"], "not_found");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/v1/nope")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn openapi_lists_exactly_the_served_routes() {
    let server = TestServer::open().await;
    let client = reqwest::Client::new();
    let document: Value = client
        .get(server.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths = document["paths"].as_object().unwrap();
    assert!(paths.contains_key("/healthz"));
    assert!(paths.contains_key("/metrics"));
    // Every documented GET without path parameters is served.
    for (path, item) in paths {
        if item.get("get").is_some() && !path.contains('{') {
            let status = client.get(server.url(path)).send().await.unwrap().status();
            assert_ne!(status, 404, "{path} is documented but not served");
        }
    }
    assert_eq!(
        document,
        serde_json::to_value(skald_server::openapi()).unwrap()
    );
}

#[tokio::test]
async fn metrics_count_requests_by_route_template() {
    let server = TestServer::open().await;
    let client = reqwest::Client::new();
    for _ in 0..3 {
        client.get(server.url("/healthz")).send().await.unwrap();
    }
    let text = client
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = text
        .lines()
        .find(|line| {
            line.starts_with("skald_http_requests_total{") && line.contains("route=\"/healthz\"")
        })
        .unwrap_or_else(|| panic!("no healthz counter in:\n{text}"));
    assert!(line.ends_with(" 3"), "{line}");
    assert!(text.contains("skald_http_request_duration_seconds_bucket"));
}

#[tokio::test]
async fn with_keys_every_request_needs_a_live_key() {
    let state = common::test_state(common::default_config());
    let created = state.keys.create(&tenant_named("acme"), "test").unwrap();
    let server = TestServer::start(state).await;
    let client = reqwest::Client::new();

    let refused = client.get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("x-skald-key")
    );

    let wrong = client
        .get(server.url("/metrics"))
        .header("x-skald-key", "sk-skald-0000")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let ok = client
        .get(server.url("/metrics"))
        .header("x-skald-key", &created.secret)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);

    server.state.keys.revoke(&created.key.id).unwrap();
    let revoked = client
        .get(server.url("/metrics"))
        .bearer_auth(&created.secret)
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 401);
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

/// `[refs]` reaches the stores the server opens: a ref is kept as long as `ServerConfig::refs`
/// says, and a setting the stores refuse stops the server opening, naming it.
#[test]
fn the_servers_stores_keep_refs_as_its_config_says() {
    use skald_core::pipeline::policy::Policy;
    use skald_engine::storage::RefSettings;
    use skald_server::{AppState, ServerConfig};

    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("skald.sqlite3");
    let mut config = ServerConfig::new(Policy::preset("skald").unwrap());
    config.refs.ttl = std::time::Duration::from_secs(900);
    let state = AppState::open(&database, config.clone()).unwrap();
    let output: String = (0..400)
        .map(|line| {
            format!(
                "INFO step {line}: processed batch {} of 400\n",
                line * 7 % 400
            )
        })
        .collect();
    let tenant = skald_core::ids::Tenant::default();
    let offloaded = state
        .engine
        .offload_output(&tenant, &output)
        .unwrap()
        .expect("a long output is offloaded");
    let store = skald_store::SqliteRefStore::open(&database, RefSettings::default()).unwrap();
    let info = store.info(&tenant, &offloaded.ref_id).unwrap();
    assert_eq!(info.expires_at_ms - info.created_at_ms, 900_000);

    config.refs.cache_entries = 0;
    let refused = AppState::open(&database, config).err().expect("refused");
    assert!(refused.to_string().contains("cache_entries"), "{refused}");
}
