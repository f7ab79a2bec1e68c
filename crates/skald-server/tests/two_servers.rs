//! Two servers over one store, as a deployment behind a load balancer runs them: what one
//! server told a client it had done, the other finds done — a client may send its next request
//! to either, the moment it has the answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod slow_sessions;
mod upstream;

use std::time::Duration;

use common::{TestServer, default_config};
use futures::StreamExt;
use serde_json::{Value, json};
use skald_server::AppState;
use slow_sessions::SlowWrites;
use upstream::{Reply, RespItem, Upstream, responses_sse, responses_text};

/// Long enough that a client reading an answer's events sees its final one well before a write
/// started after it could finish.
const SLOW_WRITE: Duration = Duration::from_millis(400);

/// Two servers proxying to `upstream` over the same stores; the first one's session writes are
/// slow.
async fn two_servers(upstream: &Upstream) -> (TestServer, TestServer) {
    let stores = skald_store::test_stores::stores();
    let over = |sessions| skald_engine::Stores {
        sessions,
        refs: stores.refs.clone(),
        memories: stores.memories.clone(),
    };
    let a = AppState::from_stores(
        over(SlowWrites::new(stores.sessions.clone(), SLOW_WRITE)),
        stores.keys.clone(),
        upstream.proxied(default_config()),
    )
    .unwrap();
    let b = AppState::from_stores(
        over(stores.sessions.clone()),
        stores.keys.clone(),
        upstream.proxied(default_config()),
    )
    .unwrap();
    (TestServer::start(a).await, TestServer::start(b).await)
}

fn input_text(role: &str, text: &str) -> Value {
    json!({"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]})
}

async fn post(server: &TestServer, session: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(server.url("/v1/responses"))
        .header("x-skald-session", session)
        .header("authorization", "Bearer sk-provider-123")
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_is_stored_before_its_final_event_so_the_other_server_continues_from_it()
{
    let upstream = Upstream::start().await;
    let (a, b) = two_servers(&upstream).await;
    upstream.push(Reply::Sse(responses_sse(
        "resp_across",
        &[RespItem::Text("It is 4.")],
    )));
    upstream.push(Reply::Json(200, responses_text("resp_next", "It is 6.")));

    let first = json!({"model": "gpt-test", "stream": true,
                       "input": [input_text("user", "What is 2+2?")]});
    let response = post(&a, "s-across", &first).await;
    assert_eq!(response.status(), 200);
    // A client acts on the final event, not on the connection's close: read up to it only.
    let mut events = response.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("response.completed") {
        let chunk = events
            .next()
            .await
            .expect("the stream ended before its final event")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }

    let second = json!({"model": "gpt-test", "previous_response_id": "resp_across",
                        "input": [input_text("user", "And 3+3?")]});
    let response = post(&b, "s-across", &second).await;
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        status, 200,
        "the other server did not find the answer the client had: {body}"
    );
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    let input = sent[1].body["input"].to_string();
    let asked = input.find("What is 2+2?").unwrap();
    let answered = input.find("It is 4.").expect(&input);
    let next = input.find("And 3+3?").unwrap();
    assert!(asked < answered && answered < next, "{input}");
    drop(events);
}
