//! A probe of the server's edge: malformed requests over every route family, what a web page
//! could send (a forged `Host`, a cross-site `Origin`, a "simple" non-JSON body), and a flood of
//! MCP `initialize`s, against an in-process server with the proxy in front of an upstream that
//! counts what reaches it.
//!
//! ```text
//! cargo run --release -p skald-server --example edge_probe
//! ```
//!
//! Prints, and writes as JSON with `--json`: malformed requests tried, answered 5xx, answered
//! with a body that is not JSON, accepted (2xx); the stores before and after (they must be
//! equal); web-page attacks tried and succeeded (answered 2xx, or reaching the upstream);
//! MCP sessions open after 1,000 unauthenticated `initialize`s on a keyed server, and after
//! 1,000 on an open one (bounded by `mcp_sessions_per_key`). The browser's own view of the same
//! attacks is `skald-cli`'s `tests/browser_attacks.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use skald_core::pipeline::policy::Policy;
use skald_server::{AppState, ServerConfig, Upstream};

/// An upstream that counts every request and answers each with a short Anthropic message.
type Failure = Box<dyn std::error::Error>;

async fn counting_upstream() -> Result<(String, Arc<AtomicUsize>), Failure> {
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    let app = axum::Router::new().fallback(move || {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
            axum::Json(json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "probe",
                "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1}
            }))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((format!("http://{addr}"), count))
}

async fn start(state: AppState) -> Result<String, Failure> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(skald_server::serve(
        listener,
        state,
        std::future::pending::<()>(),
    ));
    Ok(format!("http://{addr}"))
}

#[derive(Default, Debug)]
struct Tally {
    tried: usize,
    server_errors: usize,
    not_json: usize,
    accepted: usize,
    accepted_examples: Vec<String>,
}

impl Tally {
    async fn record(&mut self, name: &str, response: reqwest::Response) {
        self.tried += 1;
        let status = response.status();
        let json = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.contains("json"));
        let body = response.text().await.unwrap_or_default();
        if status.is_server_error() {
            self.server_errors += 1;
        }
        // The fetch route and the tools answer a well-formed call that cannot be served with
        // 200 and the error inside (one answer or error per id; a tool result flagged as an
        // error, for the model to read): such an answer is a refusal too.
        let refused_inside = serde_json::from_str::<Value>(&body).is_ok_and(|value| {
            value["is_error"] == true
                || value["isError"] == true
                || (value["found"] == 0
                    && value["failed"].as_u64().is_some_and(|failed| failed > 0))
        });
        if status.is_success() && !refused_inside {
            self.accepted += 1;
            if self.accepted_examples.len() < 20 {
                self.accepted_examples.push(format!("{name} → {status}"));
            }
        } else if !json || serde_json::from_str::<Value>(&body).is_err() {
            self.not_json += 1;
            if self.accepted_examples.len() < 20 {
                self.accepted_examples
                    .push(format!("{name} → {status} not JSON: {body:.80}"));
            }
        }
    }
}

/// The JSON routes, each with bodies of fields of the wrong type.
fn json_routes() -> Vec<(&'static str, &'static str, Vec<Value>)> {
    vec![
        (
            "POST",
            "/v1/sessions/probe/messages",
            vec![
                json!({"message": 5}),
                json!({"messages": "x"}),
                json!({"message": {"role": "user"}}),
                json!({"messages": [{"role": 1, "content": "x"}]}),
                json!({"message": {"role": "user", "content": 7}}),
            ],
        ),
        (
            "POST",
            "/v1/sessions/probe/assemble",
            vec![
                json!({"tokenBudget": "big"}),
                json!({"messages": {}}),
                json!({"runtimeContext": "x"}),
                json!({"citationsMode": {}}),
                json!({"messages": [{"role": "assistant"}]}),
                json!({"availableTools": {"a": 1}}),
            ],
        ),
        (
            "POST",
            "/v1/sessions/probe/commit-turn",
            vec![
                json!({"messages": []}),
                json!({"advancementKey": "", "messages": []}),
                json!({"advancementKey": "k", "messages": [{"role": "user"}]}),
                json!({"advancementKey": "k", "messages": [], "admission": 3}),
            ],
        ),
        (
            "POST",
            "/v1/sessions/probe/compact",
            vec![
                json!({"force": "yes"}),
                json!({"sessionKey": 1}),
                json!({"sessionTarget": [1]}),
            ],
        ),
        (
            "POST",
            "/v1/sessions/probe/after-turn",
            vec![
                json!({"messages": 1}),
                json!({"prePromptMessageCount": -1, "messages": []}),
                json!({"sessionTarget": "x", "messages": []}),
            ],
        ),
        (
            "POST",
            "/v1/sessions/probe/bootstrap",
            vec![
                json!({"sessionJsonl": 5}),
                json!({"messages": "x"}),
                json!({"sessionTarget": 1}),
            ],
        ),
        (
            "PUT",
            "/v1/sessions/probe/switches",
            vec![
                json!([true, true]),
                json!({"pauseCompaction": "yes"}),
                json!({"pauseOffload": null}),
            ],
        ),
        (
            "POST",
            "/v1/memory/remember",
            vec![
                json!({"content": ""}),
                json!({"content": "x", "priority": 11}),
                json!({"content": "x", "user": "a/b"}),
                json!({"content": "x", "type": "nonsense"}),
            ],
        ),
        (
            "POST",
            "/v1/memory/search",
            vec![
                json!({"query": ""}),
                json!({"query": "x", "limit": 0}),
                json!({"query": "x", "path": "http://x"}),
            ],
        ),
        (
            "POST",
            "/v1/memory/forget",
            vec![json!({"uri": "nope"}), json!({"uri": 5})],
        ),
        (
            "POST",
            "/v1/memory/resources",
            vec![
                json!({"uri": "viking://user/x", "name": "a.md", "content": "t"}),
                json!({"documents": "x"}),
            ],
        ),
        (
            "POST",
            "/v1/refs/fetch",
            vec![json!({"ref_ids": ["nothex"]}), json!({"ref_ids": 5})],
        ),
        (
            "POST",
            "/v1/tools/fetch_original_data",
            vec![
                json!({"arguments": {"ref_ids": 5}}),
                json!({"arguments": "x"}),
            ],
        ),
        (
            "POST",
            "/v1/tools/no_such_tool",
            vec![json!({"arguments": {}})],
        ),
        (
            "POST",
            "/v1/messages",
            vec![
                json!({"messages": "x"}),
                json!({"model": 5, "messages": []}),
            ],
        ),
        (
            "POST",
            "/v1/messages/count_tokens",
            vec![json!({"messages": 5})],
        ),
        (
            "POST",
            "/v1/chat/completions",
            vec![
                json!({"messages": {"a": 1}}),
                json!({"model": "m", "messages": [{"role": 5}]}),
            ],
        ),
        (
            "POST",
            "/v1/responses",
            vec![json!({"input": 5}), json!({"input": [{"type": 7}]})],
        ),
    ]
}

/// The proxy's routes.
const PROXY_ROUTES: &[&str] = &[
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/chat/completions",
    "/v1/responses",
];

/// GETs with a bad path or query.
const BAD_GETS: &[&str] = &[
    "/v1/memory/ls?user=a/b",
    "/v1/memory/ls?agent=a/b",
    "/v1/memory/ls?uri=nope",
    "/v1/memory/read?uri=nope",
    "/v1/memory/read?uri=viking://resources&level=l9",
    "/v1/memory/tree?depth=x",
    "/v1/memory/history?limit=-1",
    "/v1/refs/nothex",
    "/v1/sessions/a%20b/context",
    "/v1/sessions?unknown=1",
    "/v1/sessions/probe/entries?after=-1",
];

async fn send(
    client: &reqwest::Client,
    method: &str,
    url: &str,
    content_type: Option<&str>,
    body: Option<String>,
    headers: &[(&str, String)],
) -> Result<reqwest::Response, Failure> {
    let mut request = client.request(method.parse()?, url);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    if let Some(body) = body {
        request = request.body(body);
    }
    Ok(request.send().await?)
}

/// What the stores hold, as the API shows it.
async fn everything(client: &reqwest::Client, base: &str) -> Result<Value, Failure> {
    let mut all = json!({});
    for path in [
        "/v1/sessions",
        "/v1/memory/tree?depth=24",
        "/v1/memory/history",
    ] {
        let text = client
            .get(format!("{base}{path}"))
            .send()
            .await?
            .text()
            .await?;
        all[path] = serde_json::from_str(&text).unwrap_or(Value::String(text));
    }
    Ok(all)
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let as_json = std::env::args().any(|arg| arg == "--json");
    let (upstream, upstream_calls) = counting_upstream().await?;
    let mut config = ServerConfig::new(Policy::preset("skald")?);
    config.anthropic = Some(Upstream {
        base_url: upstream.clone(),
        api_key: Some("sk-ant-the-users-own".to_owned()),
    });
    config.openai = Some(Upstream {
        base_url: format!("{upstream}/v1"),
        api_key: Some("sk-the-users-own".to_owned()),
    });
    let state = AppState::in_memory(config.clone())?;
    let base = start(state).await?;
    let client = reqwest::Client::new();
    // Something to protect: a session and a memory.
    send(
        &client,
        "POST",
        &format!("{base}/v1/sessions/probe/messages"),
        Some("application/json"),
        Some(
            json!({"message": {"role": "user", "content": "keep me", "timestamp": 1}}).to_string(),
        ),
        &[],
    )
    .await?;
    send(
        &client,
        "POST",
        &format!("{base}/v1/memory/remember"),
        Some("application/json"),
        Some(json!({"content": "The user keeps a secret."}).to_string()),
        &[],
    )
    .await?;
    let before = everything(&client, &base).await?;

    let mut malformed = Tally::default();
    for (method, path, wrong_types) in json_routes() {
        let url = format!("{base}{path}");
        let mut bodies: Vec<(String, Option<&str>, String)> = vec![
            (
                "invalid JSON".into(),
                Some("application/json"),
                "{\"a\":".into(),
            ),
            ("an array".into(), Some("application/json"), "[]".into()),
            ("a string".into(), Some("application/json"), "\"x\"".into()),
            ("null".into(), Some("application/json"), "null".into()),
            (
                "an unknown field".into(),
                Some("application/json"),
                "{\"unknownFieldX\": 1}".into(),
            ),
            ("text/plain".into(), Some("text/plain"), "{}".into()),
            (
                "a form".into(),
                Some("application/x-www-form-urlencoded"),
                "a=1".into(),
            ),
            ("no content-type".into(), None, "{}".into()),
        ];
        // The proxy forwards fields it does not know (an API's new parameters) on purpose.
        if PROXY_ROUTES.contains(&path) {
            bodies.retain(|(name, _, _)| name != "an unknown field");
        }
        for (index, body) in wrong_types.into_iter().enumerate() {
            bodies.push((
                format!("wrong type #{index}"),
                Some("application/json"),
                body.to_string(),
            ));
        }
        for (name, content_type, body) in bodies {
            let response = send(&client, method, &url, content_type, Some(body), &[]).await?;
            malformed
                .record(&format!("{method} {path} with {name}"), response)
                .await;
        }
        // A bad session id in the path.
        if path.contains("/probe/") {
            let bad = url.replace("/probe/", "/a%20b/");
            let response = send(
                &client,
                method,
                &bad,
                Some("application/json"),
                Some("{}".into()),
                &[],
            )
            .await?;
            malformed
                .record(&format!("{method} {path} with a bad id"), response)
                .await;
        }
        let response = send(&client, "DELETE", &url, None, None, &[]).await?;
        malformed.record(&format!("DELETE {path}"), response).await;
    }
    for path in BAD_GETS {
        let response = send(&client, "GET", &format!("{base}{path}"), None, None, &[]).await?;
        malformed.record(&format!("GET {path}"), response).await;
    }
    for (name, body) in [
        ("MCP: not JSON-RPC", json!({"hello": 1})),
        (
            "MCP: tools/call without a session",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}),
        ),
    ] {
        let response = send(
            &client,
            "POST",
            &format!("{base}/mcp"),
            Some("application/json"),
            Some(body.to_string()),
            &[("accept", "application/json, text/event-stream".to_owned())],
        )
        .await?;
        malformed.record(name, response).await;
    }
    let response = send(&client, "GET", &format!("{base}/mcp"), None, None, &[]).await?;
    malformed
        .record("MCP: GET without a session", response)
        .await;
    let after = everything(&client, &base).await?;
    let changed: Vec<String> = before
        .as_object()
        .map(|paths| {
            paths
                .iter()
                .filter(|(path, value)| after.get(path.as_str()) != Some(*value))
                .map(|(path, value)| format!("{path}: {value} → {}", after[path.as_str()]))
                .collect()
        })
        .unwrap_or_default();
    let upstream_before = upstream_calls.load(Ordering::SeqCst);

    // What a web page could send: every changing JSON route with a forged Host, a cross-site
    // Origin, and as a "simple" text/plain request; every read with a forged Host.
    let port = base.rsplit(':').next().unwrap_or_default().to_owned();
    let mut attacks = 0usize;
    let mut attacks_succeeded = Vec::new();
    for (method, path, _) in json_routes() {
        let url = format!("{base}{path}");
        let valid = "{}".to_owned();
        for (name, content_type, headers) in [
            (
                "forged Host",
                "application/json",
                vec![("host", format!("attacker.example:{port}"))],
            ),
            (
                "cross-site Origin",
                "application/json",
                vec![("origin", "https://attacker.example".to_owned())],
            ),
            ("text/plain", "text/plain", vec![]),
        ] {
            attacks += 1;
            let response = send(
                &client,
                method,
                &url,
                Some(content_type),
                Some(valid.clone()),
                &headers,
            )
            .await?;
            if response.status().is_success() {
                attacks_succeeded.push(format!("{name} {method} {path}"));
            }
        }
    }
    for path in [
        "/v1/sessions",
        "/v1/sessions/probe/context",
        "/ui",
        "/ui/memory",
        "/v1/memory/tree",
        "/metrics",
    ] {
        attacks += 1;
        let response = send(
            &client,
            "GET",
            &format!("{base}{path}"),
            None,
            None,
            &[("host", format!("attacker.example:{port}"))],
        )
        .await?;
        if response.status().is_success() {
            attacks_succeeded.push(format!("forged Host GET {path}"));
        }
    }
    let reached_upstream = upstream_calls.load(Ordering::SeqCst) - upstream_before;

    // 1,000 unauthenticated initializes on a keyed server; 1,000 on an open one.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}})
    .to_string();
    let keyed_state = AppState::in_memory(config.clone())?;
    let tenant = skald_core::ids::Tenant::parse("probe")?;
    let key = keyed_state.keys.create(&tenant, "probe")?.secret;
    let keyed = start(keyed_state).await?;
    let mut open_states = Vec::new();
    for (server, headers) in [(&keyed, vec![]), (&base, vec![])] {
        for _ in 0..1000 {
            let mut headers: Vec<(&str, String)> = headers.clone();
            headers.push(("accept", "application/json, text/event-stream".to_owned()));
            send(
                &client,
                "POST",
                &format!("{server}/mcp"),
                Some("application/json"),
                Some(initialize.clone()),
                &headers,
            )
            .await?;
        }
        let key_header: Vec<(&str, String)> = if server == &keyed {
            vec![("x-skald-key", key.clone())]
        } else {
            vec![]
        };
        let metrics = send(
            &client,
            "GET",
            &format!("{server}/metrics"),
            None,
            None,
            &key_header,
        )
        .await?
        .text()
        .await?;
        let open: i64 = metrics
            .lines()
            .find_map(|line| line.strip_prefix("skald_mcp_sessions "))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(-1);
        open_states.push(open);
    }

    let report = json!({
        "malformed": {
            "tried": malformed.tried, "server_errors": malformed.server_errors,
            "not_json": malformed.not_json, "accepted": malformed.accepted,
            "examples": malformed.accepted_examples,
        },
        "stores_unchanged": before == after,
        "changed": changed,
        "attacks": {"tried": attacks, "succeeded": attacks_succeeded.len(),
                    "reached_upstream": reached_upstream, "examples": attacks_succeeded},
        "mcp_sessions_after_1000_unauthenticated_initializes_on_a_keyed_server": open_states[0],
        "mcp_sessions_after_1000_initializes_on_an_open_server": open_states[1],
        "mcp_sessions_per_key": config.edge.mcp_sessions_per_key,
    });
    if as_json {
        println!("{report:#}");
    } else {
        println!(
            "malformed requests: {} tried, {} answered 5xx, {} answered without a JSON error, {} accepted",
            malformed.tried, malformed.server_errors, malformed.not_json, malformed.accepted
        );
        for example in &malformed.accepted_examples {
            println!("  {example}");
        }
        println!("stores unchanged by them: {}", before == after);
        for change in &changed {
            println!("  {change:.400}");
        }
        println!(
            "web-page requests: {attacks} tried, {} answered 2xx, {reached_upstream} reached the upstream",
            attacks_succeeded.len()
        );
        for example in &attacks_succeeded {
            println!("  {example}");
        }
        println!(
            "MCP sessions after 1,000 unauthenticated initializes on a keyed server: {}; after \
             1,000 on an open server: {} (cap {} per key)",
            open_states[0], open_states[1], config.edge.mcp_sessions_per_key
        );
    }
    Ok(())
}
