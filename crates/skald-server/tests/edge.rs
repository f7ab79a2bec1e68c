//! Safe by default on a developer's machine: what the edge refuses before any route runs — a
//! page reaching an open server under a rebound name, a cross-site "simple" request, a
//! cross-origin change, an unauthenticated MCP session, a body over the limit or one that
//! never ends — and that every refusal is a JSON error that changed nothing and sent nothing
//! upstream. (The same attacks from a real Chromium page: `skald-cli`'s `tests/browser_attacks.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod upstream;

use std::time::Duration;

use common::{TestServer, default_config, test_state};
use serde_json::{Value, json};
use skald_core::ids::Tenant;
use skald_server::{ServerConfig, Upstream as UpstreamConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use upstream::Upstream;

fn tenant(name: &str) -> Tenant {
    Tenant::parse(name).unwrap()
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn json_error(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status(), status);
    assert!(
        response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.contains("json")),
        "a {status} answer that is not JSON"
    );
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    body
}

/// A server that proxies Anthropic's API to a scripted upstream with a provider key of its own
/// (`api_key_env`): what a page that can reach it could spend.
async fn proxying_server(upstream: &Upstream, config: ServerConfig) -> TestServer {
    let mut config = config;
    config.anthropic = Some(UpstreamConfig {
        base_url: upstream.anthropic_base(),
        api_key: Some("sk-ant-the-users-own-credits".to_owned()),
    });
    config.openai = Some(UpstreamConfig {
        base_url: upstream.openai_base(),
        api_key: Some("sk-openai-the-users-own-credits".to_owned()),
    });
    TestServer::start(test_state(config)).await
}

fn anthropic_request() -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "spend the user's credits"}]
    })
}

fn stored_sessions(server: &TestServer) -> usize {
    server
        .state
        .engine
        .list_sessions(&Tenant::default())
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_page_under_a_rebound_name_is_refused_on_every_route_of_an_open_server() {
    let upstream = Upstream::start().await;
    let server = proxying_server(&upstream, default_config()).await;
    let port = server.addr.port();
    // What a DNS-rebinding page sends: its own name, now resolving to 127.0.0.1.
    let forged = format!("attacker.example:{port}");
    for (method, path, body) in [
        ("GET", "/v1/sessions", None),
        ("GET", "/ui", None),
        ("GET", "/ui/memory", None),
        ("GET", "/metrics", None),
        ("POST", "/v1/messages", Some(anthropic_request())),
        (
            "POST",
            "/v1/messages/count_tokens",
            Some(anthropic_request()),
        ),
        (
            "POST",
            "/v1/memory/remember",
            Some(json!({"content": "planted by a web page"})),
        ),
        (
            "POST",
            "/mcp",
            Some(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "page", "version": "1"}}}),
            ),
        ),
    ] {
        let mut request = client()
            .request(method.parse().unwrap(), server.url(path))
            .header("host", &forged)
            .header("accept", "application/json, text/event-stream");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let body = json_error(request.send().await.unwrap(), 403).await;
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("attacker.example"),
            "{method} {path}: {body}"
        );
    }
    assert_eq!(
        upstream.request_count(),
        0,
        "a refused request went upstream"
    );
    assert_eq!(stored_sessions(&server), 0);
    // The same requests under the server's own names are answered.
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
    ] {
        let answer = client()
            .get(server.url("/v1/sessions"))
            .header("host", host)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_cross_site_text_plain_post_to_the_proxy_is_refused_and_never_forwarded() {
    let upstream = Upstream::start().await;
    let server = proxying_server(&upstream, default_config()).await;
    // A page's "simple" request: no preflight, so the browser sends it anywhere.
    for path in [
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/sessions/demo/messages",
    ] {
        for content_type in [
            Some("text/plain;charset=UTF-8"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            None,
        ] {
            let mut request = client()
                .post(server.url(path))
                .body(anthropic_request().to_string());
            if let Some(content_type) = content_type {
                request = request.header("content-type", content_type);
            }
            let body = json_error(request.send().await.unwrap(), 415).await;
            assert_eq!(body["error"]["type"], "unsupported_media_type", "{path}");
        }
    }
    assert_eq!(
        upstream.request_count(),
        0,
        "a refused request went upstream"
    );
    assert_eq!(stored_sessions(&server), 0, "a refused request was stored");
    server.shutdown().await;
}

#[tokio::test]
async fn a_cross_origin_request_that_changes_something_is_refused() {
    let upstream = Upstream::start().await;
    let server = proxying_server(&upstream, default_config()).await;
    for origin in ["https://attacker.example", "null", "http://localhost:3000"] {
        for (path, body) in [
            ("/v1/messages", anthropic_request()),
            (
                "/v1/memory/remember",
                json!({"content": "planted by a web page"}),
            ),
            (
                "/v1/sessions/demo/messages",
                json!({"message": {"role": "user", "content": "hi", "timestamp": 1}}),
            ),
        ] {
            let response = client()
                .post(server.url(path))
                .header("origin", origin)
                .json(&body)
                .send()
                .await
                .unwrap();
            json_error(response, 403).await;
        }
    }
    // Fetch metadata alone (a browser that left out Origin) is refused too.
    let response = client()
        .post(server.url("/v1/memory/remember"))
        .header("sec-fetch-site", "cross-site")
        .json(&json!({"content": "planted by a web page"}))
        .send()
        .await
        .unwrap();
    json_error(response, 403).await;
    assert_eq!(upstream.request_count(), 0);
    assert_eq!(stored_sessions(&server), 0);
    let found: Value = client()
        .post(server.url("/v1/memory/search"))
        .json(&json!({"query": "planted web page"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        found["results"].as_array().map(Vec::len),
        Some(0),
        "a refused request planted a memory: {found}"
    );
    // A request from the server's own page (the dashboard) passes, as do SDKs (no Origin).
    let own = format!("http://{}", server.addr);
    let response = client()
        .post(server.url("/v1/sessions/demo/messages"))
        .header("origin", own)
        .json(&json!({"message": {"role": "user", "content": "hi", "timestamp": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    server.shutdown().await;
}

#[tokio::test]
async fn allowed_hosts_and_origins_admit_what_they_name_and_nothing_else() {
    let mut config = default_config();
    config.edge.allowed_hosts = vec!["skald.internal".to_owned()];
    config.edge.allowed_origins = vec!["http://localhost:3000".to_owned()];
    let server = TestServer::start(test_state(config)).await;
    let port = server.addr.port();
    let named = client()
        .get(server.url("/v1/sessions"))
        .header("host", format!("skald.internal:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(named.status(), 200);
    let other = client()
        .get(server.url("/v1/sessions"))
        .header("host", format!("other.internal:{port}"))
        .send()
        .await
        .unwrap();
    json_error(other, 403).await;
    let allowed_page = client()
        .post(server.url("/v1/sessions/demo/messages"))
        .header("origin", "http://localhost:3000")
        .json(&json!({"message": {"role": "user", "content": "hi", "timestamp": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(allowed_page.status(), 200);
    let other_page = client()
        .post(server.url("/v1/sessions/demo/messages"))
        .header("origin", "http://localhost:3001")
        .json(&json!({"message": {"role": "user", "content": "hi", "timestamp": 1}}))
        .send()
        .await
        .unwrap();
    json_error(other_page, 403).await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_keyed_server_answers_any_name_but_still_refuses_cross_origin_changes() {
    let state = test_state(default_config());
    let key = state.keys.create(&tenant("team"), "team").unwrap();
    let server = TestServer::start(state).await;
    let port = server.addr.port();
    let by_name = client()
        .get(server.url("/v1/sessions"))
        .header("host", format!("skald.team.example:{port}"))
        .header("x-skald-key", &key.secret)
        .send()
        .await
        .unwrap();
    assert_eq!(by_name.status(), 200);
    let cross = client()
        .post(server.url("/v1/sessions/demo/messages"))
        .header("x-skald-key", &key.secret)
        .header("origin", "https://attacker.example")
        .json(&json!({"message": {"role": "user", "content": "hi", "timestamp": 1}}))
        .send()
        .await
        .unwrap();
    json_error(cross, 403).await;
    server.shutdown().await;
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}})
}

async fn mcp_post(
    server: &TestServer,
    key: Option<&str>,
    session: Option<&str>,
    body: &Value,
) -> reqwest::Response {
    let mut request = client()
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(body);
    if let Some(key) = key {
        request = request.header("x-skald-key", key);
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.unwrap()
}

async fn open_mcp_sessions(server: &TestServer, key: Option<&str>) -> i64 {
    let mut request = client().get(server.url("/metrics"));
    if let Some(key) = key {
        request = request.header("x-skald-key", key);
    }
    let text = request.send().await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("skald_mcp_sessions "))
        .map(|value| value.trim().parse().unwrap())
        .unwrap()
}

#[tokio::test]
async fn mcp_initialize_needs_a_key_on_a_keyed_server_and_opens_no_session_without_one() {
    let state = test_state(default_config());
    let key = state.keys.create(&tenant("team"), "team").unwrap();
    let server = TestServer::start(state).await;
    for id in 0..200 {
        let response = mcp_post(&server, None, None, &initialize(id)).await;
        assert!(response.headers().get("mcp-session-id").is_none());
        json_error(response, 401).await;
    }
    let wrong = mcp_post(&server, Some("sk-skald-0000"), None, &initialize(1)).await;
    json_error(wrong, 401).await;
    assert_eq!(open_mcp_sessions(&server, Some(&key.secret)).await, 0);
    // With the key a session opens, and the gauge counts it.
    let response = mcp_post(&server, Some(&key.secret), None, &initialize(7)).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("mcp-session-id").is_some());
    assert_eq!(open_mcp_sessions(&server, Some(&key.secret)).await, 1);
    server.shutdown().await;
}

#[tokio::test]
async fn mcp_sessions_are_capped_per_key_and_a_session_is_its_keys_alone() {
    let mut config = default_config();
    config.edge.mcp_sessions_per_key = 3;
    let state = test_state(config);
    let alice = state.keys.create(&tenant("alice"), "alice").unwrap();
    let bob = state.keys.create(&tenant("bob"), "bob").unwrap();
    let server = TestServer::start(state).await;
    let mut ids = Vec::new();
    for id in 0..10 {
        let response = mcp_post(&server, Some(&alice.secret), None, &initialize(id)).await;
        assert_eq!(response.status(), 200);
        ids.push(
            response.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(open_mcp_sessions(&server, Some(&alice.secret)).await, 3);
    let list = json!({"jsonrpc": "2.0", "id": 99, "method": "tools/list"});
    // The oldest sessions were closed to make room; the newest still answers.
    let closed = mcp_post(&server, Some(&alice.secret), Some(&ids[0]), &list).await;
    json_error(closed, 404).await;
    let newest = ids.last().unwrap();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = mcp_post(&server, Some(&alice.secret), Some(newest), &initialized).await;
    assert!(accepted.status().is_success(), "{}", accepted.status());
    let listed = mcp_post(&server, Some(&alice.secret), Some(newest), &list).await;
    assert_eq!(listed.status(), 200);
    // Bob cannot use Alice's session, and his sessions do not count against hers.
    let foreign = mcp_post(&server, Some(&bob.secret), Some(newest), &list).await;
    json_error(foreign, 404).await;
    let bobs = mcp_post(&server, Some(&bob.secret), None, &initialize(1)).await;
    assert_eq!(bobs.status(), 200);
    assert_eq!(open_mcp_sessions(&server, Some(&alice.secret)).await, 4);
    server.shutdown().await;
}

#[tokio::test]
async fn the_mcp_transports_own_errors_are_json() {
    let server = TestServer::open().await;
    // No `accept: text/event-stream`: the transport refuses (406) in plain text of its own.
    let unacceptable = client()
        .post(server.url("/mcp"))
        .header("accept", "application/json")
        .json(&initialize(1))
        .send()
        .await
        .unwrap();
    assert!(unacceptable.status().is_client_error());
    let status = unacceptable.status().as_u16();
    json_error(unacceptable, status).await;
    // A session that does not exist.
    let unknown = mcp_post(
        &server,
        None,
        Some("no-such-session"),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let status = unknown.status().as_u16();
    assert!(unknown.status().is_client_error());
    json_error(unknown, status).await;
    // Not JSON-RPC at all.
    let garbage = mcp_post(&server, None, None, &json!({"hello": "world"})).await;
    let status = garbage.status().as_u16();
    assert!(garbage.status().is_client_error());
    json_error(garbage, status).await;
    server.shutdown().await;
}

/// Sends `head` (and `body`) on a raw connection and reads what comes back within `wait`.
async fn raw_exchange(server: &TestServer, head: &str, body: &[u8], wait: Duration) -> String {
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    let read = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    answer.extend_from_slice(&buffer[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n")
                        && String::from_utf8_lossy(&answer).contains("}}")
                    {
                        break;
                    }
                }
            }
        }
    };
    tokio::time::timeout(wait, read)
        .await
        .expect("the server did not answer: it is waiting on the client's body");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_content_length_over_the_limit_is_refused_before_the_body_is_read() {
    let server = TestServer::open().await;
    let head = format!(
        "POST /v1/sessions/demo/messages HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         content-length: 10000000000\r\n\r\n",
        server.addr
    );
    let answer = raw_exchange(&server, &head, b"{", Duration::from_secs(20)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");
    assert_eq!(stored_sessions(&server), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn a_body_that_never_finishes_is_answered_408_at_the_read_deadline() {
    let mut config = default_config();
    config.edge.body_read_timeout = Duration::from_secs(1);
    let server = TestServer::start(test_state(config)).await;
    let head = format!(
        "POST /v1/sessions/demo/messages HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         content-length: 1000\r\n\r\n",
        server.addr
    );
    let answer = raw_exchange(&server, &head, b"{\"message\":", Duration::from_secs(20)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
    assert_eq!(stored_sessions(&server), 0);
    server.shutdown().await;
}
