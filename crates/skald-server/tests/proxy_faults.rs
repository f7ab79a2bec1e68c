//! The proxy under upstream faults, end to end over real HTTP: reqwest → skald → a scripted
//! upstream that misbehaves on purpose. Answers compressed unasked (decoded, or a clear 502),
//! streams that end without their final event, 2xx bodies that are not JSON, slow whole
//! answers (the idle timeout is between bytes), a session held by a hung call, a skald key in
//! two headers, and a graceful stop while a stream is in flight. Every fault reaches the client
//! in its API's own error shape and is counted as a failed call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod upstream;

use std::io::Write;
use std::time::Duration;

use common::{TestServer, default_config};
use serde_json::{Value, json};
use skald_server::ServerConfig;
use skald_server::config::UpstreamTimeouts;
use upstream::{
    Reply, RespItem, Upstream, anthropic_sse_text, anthropic_text, assert_no_skald_key,
    openai_sse_text, openai_text, responses_sse, responses_text,
};

/// Generous bound for what should take milliseconds.
const PROMPTLY: Duration = Duration::from_secs(5);

fn config_for(upstream: &Upstream) -> ServerConfig {
    upstream.proxied(default_config())
}

async fn start(config: ServerConfig) -> TestServer {
    TestServer::start(common::test_state(config)).await
}

async fn post(server: &TestServer, path: &str, session: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(server.url(path))
        .header("x-skald-session", session)
        .header("authorization", "Bearer sk-provider-123")
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The `data:` payloads of an SSE body, parsed (`[DONE]` as a string).
fn sse_data(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|event| {
            event
                .lines()
                .find_map(|line| line.strip_prefix("data: "))
                .map(|data| serde_json::from_str(data).unwrap_or(Value::String(data.to_owned())))
        })
        .collect()
}

fn input_text(role: &str, text: &str) -> Value {
    json!({"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]})
}

/// One of the six API variants: the route, a request, and the upstream's plain answer.
struct Variant {
    name: &'static str,
    path: &'static str,
    request: Value,
    /// The JSON answer, or the SSE events (each without its blank line).
    answer: Answer,
}

enum Answer {
    Json(Value),
    Sse(Vec<String>),
}

impl Answer {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Answer::Json(value) => value.to_string().into_bytes(),
            Answer::Sse(events) => events
                .iter()
                .map(|event| format!("{event}\n\n"))
                .collect::<String>()
                .into_bytes(),
        }
    }

    fn content_type(&self) -> &'static str {
        match self {
            Answer::Json(_) => "application/json",
            Answer::Sse(_) => "text/event-stream",
        }
    }
}

fn variants() -> Vec<Variant> {
    let chat = |stream: bool| {
        json!({"model": "gpt-test", "stream": stream,
               "messages": [{"role": "user", "content": "Say hello."}]})
    };
    let messages = |stream: bool| {
        json!({"model": "claude-test", "max_tokens": 64, "stream": stream,
               "messages": [{"role": "user", "content": "Say hello."}]})
    };
    let responses = |stream: bool| {
        json!({"model": "gpt-test", "stream": stream,
               "input": [input_text("user", "Say hello.")]})
    };
    vec![
        Variant {
            name: "chat json",
            path: "/v1/chat/completions",
            request: chat(false),
            answer: Answer::Json(openai_text("Hello there")),
        },
        Variant {
            name: "chat sse",
            path: "/v1/chat/completions",
            request: chat(true),
            answer: Answer::Sse(openai_sse_text(&["Hello", " there"])),
        },
        Variant {
            name: "messages json",
            path: "/v1/messages",
            request: messages(false),
            answer: Answer::Json(anthropic_text("Hello there")),
        },
        Variant {
            name: "messages sse",
            path: "/v1/messages",
            request: messages(true),
            answer: Answer::Sse(anthropic_sse_text(&["Hello", " there"])),
        },
        Variant {
            name: "responses json",
            path: "/v1/responses",
            request: responses(false),
            answer: Answer::Json(responses_text("resp_gz", "Hello there")),
        },
        Variant {
            name: "responses sse",
            path: "/v1/responses",
            request: responses(true),
            answer: Answer::Sse(responses_sse("resp_gz_s", &[RespItem::Text("Hello there")])),
        },
    ]
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// `body` as an answer with this content type and encoding, in pieces of `piece` bytes.
fn encoded_reply(content_type: &str, encoding: &str, body: Vec<u8>, piece: usize) -> Reply {
    Reply::Raw {
        status: 200,
        headers: vec![
            ("content-type", content_type.to_owned()),
            ("content-encoding", encoding.to_owned()),
        ],
        pieces: body.chunks(piece).map(<[u8]>::to_vec).collect(),
        gap: Duration::from_millis(5),
    }
}

/// How many faults of this kind `/metrics` counted.
fn faults(server: &TestServer, kind: &str) -> u64 {
    let text = server.state.metrics.render();
    let series = format!("skald_proxy_upstream_faults_total{{outcome=\"{kind}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .map_or(0, |count| count.trim().parse().unwrap())
}

#[tokio::test]
async fn a_gzipped_upstream_answer_reaches_the_client_decoded_on_all_six_api_variants() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    for (n, variant) in variants().into_iter().enumerate() {
        let plain = variant.answer.bytes();
        upstream.push(encoded_reply(
            variant.answer.content_type(),
            "gzip",
            gzip(&plain),
            40,
        ));
        let session = format!("s-gzip-{n}");
        let response = post(&server, variant.path, &session, &variant.request).await;
        assert_eq!(response.status(), 200, "{}", variant.name);
        assert!(
            response.headers().get("content-encoding").is_none(),
            "{}",
            variant.name
        );
        let body = response.bytes().await.unwrap();
        let text = std::str::from_utf8(&body).unwrap_or_else(|_| {
            panic!(
                "{}: the client got undecoded bytes: {:?}",
                variant.name,
                &body[..body.len().min(40)]
            )
        });
        match &variant.answer {
            Answer::Json(value) => {
                let got: Value = serde_json::from_str(text).unwrap();
                assert_eq!(&got, value, "{}", variant.name);
            }
            Answer::Sse(_) => {
                assert!(text.contains("Hello"), "{}: {text}", variant.name);
                let data = sse_data(text);
                assert!(
                    !data.iter().any(|event| event.get("error").is_some()
                        || event["type"] == "error"
                        || event["type"] == "response.failed"),
                    "{}: {text}",
                    variant.name
                );
            }
        }
    }
    // skald asked for it uncompressed every time.
    for request in upstream.requests() {
        assert_eq!(request.header("accept-encoding"), Some("identity"));
    }
    assert_eq!(faults(&server, "undecodable"), 0);

    // The session read the decoded answer: the Responses answer (store on) was recorded, so
    // the client can continue from its id.
    let next = json!({"model": "gpt-test", "previous_response_id": "resp_gz",
                      "input": [input_text("user", "Again.")]});
    let response = post(&server, "/v1/responses", "s-gzip-4", &next).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let sent = upstream.requests();
    assert!(
        sent.last()
            .unwrap()
            .body
            .to_string()
            .contains("Hello there"),
        "the recorded answer did not go up"
    );
}

#[tokio::test]
async fn zstd_and_deflate_answers_are_decoded_and_brotli_is_a_clear_502() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let plain = openai_text("Hello there");
    let chat = json!({"model": "gpt-test", "messages": [{"role": "user", "content": "Hi."}]});

    let zstd = zstd::encode_all(plain.to_string().as_bytes(), 3).unwrap();
    upstream.push(encoded_reply("application/json", "zstd", zstd, 16));
    let response = post(&server, "/v1/chat/completions", "s-zstd", &chat).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), plain);

    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    zlib.write_all(plain.to_string().as_bytes()).unwrap();
    upstream.push(encoded_reply(
        "application/json",
        "deflate",
        zlib.finish().unwrap(),
        16,
    ));
    let response = post(&server, "/v1/chat/completions", "s-deflate", &chat).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), plain);

    // An encoding skald cannot decode: a JSON 502 saying so, on a stream request too, before
    // any event.
    for (n, variant) in variants().into_iter().enumerate() {
        upstream.push(encoded_reply(
            variant.answer.content_type(),
            "br",
            vec![0x1b, 0x2f, 0x00, 0x00],
            4,
        ));
        let response = post(
            &server,
            variant.path,
            &format!("s-br-{n}"),
            &variant.request,
        )
        .await;
        assert_eq!(response.status(), 502, "{}", variant.name);
        let body: Value = response.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("\"br\"") && message.contains("cannot decode"),
            "{}: {message}",
            variant.name
        );
        if variant.path == "/v1/messages" {
            assert_eq!(body["type"], "error", "{}: {body}", variant.name);
        }
    }
    assert_eq!(faults(&server, "undecodable"), 6);
}

#[tokio::test]
async fn a_non_json_or_cut_short_upstream_200_is_a_502_in_the_apis_error_shape() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let html = |body: &str| Reply::Raw {
        status: 200,
        headers: vec![("content-type", "text/html".to_owned())],
        pieces: vec![body.as_bytes().to_vec()],
        gap: Duration::ZERO,
    };
    let chat = json!({"model": "gpt-test", "messages": [{"role": "user", "content": "Hi."}]});
    upstream.push(html("<html><body>502 Bad Gateway</body></html>"));
    let response = post(&server, "/v1/chat/completions", "s-html", &chat).await;
    assert_eq!(response.status(), 502);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "upstream_error", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("not JSON") && message.contains("text/html"),
        "{message}"
    );

    // A JSON answer cut short (the body ended cleanly, half of it missing): Anthropic's shape.
    let whole = anthropic_text("Hello there").to_string();
    upstream.push(Reply::Raw {
        status: 200,
        headers: vec![("content-type", "application/json".to_owned())],
        pieces: vec![whole.as_bytes()[..whole.len() / 2].to_vec()],
        gap: Duration::ZERO,
    });
    let messages = json!({"model": "claude-test", "max_tokens": 64,
                          "messages": [{"role": "user", "content": "Hi."}]});
    let response = post(&server, "/v1/messages", "s-cut", &messages).await;
    assert_eq!(response.status(), 502);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not JSON"),
        "{body}"
    );
    assert_eq!(faults(&server, "not_json"), 2);
}

fn idle_timeout(upstream: &Upstream, idle: Duration) -> ServerConfig {
    let mut config = config_for(upstream);
    config.timeouts = UpstreamTimeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_secs(5),
        idle,
    };
    config
}

#[tokio::test]
async fn the_idle_timeout_is_measured_between_the_bytes_of_a_whole_answer() {
    let upstream = Upstream::start().await;
    let server = start(idle_timeout(&upstream, Duration::from_millis(400))).await;
    // Eight pieces 150 ms apart: over a second in all, never 400 ms without a byte.
    let answer = openai_text("Hello there, slowly");
    let text = answer.to_string();
    let piece = text.len().div_ceil(8);
    upstream.push(Reply::Raw {
        status: 200,
        headers: vec![("content-type", "application/json".to_owned())],
        pieces: text.as_bytes().chunks(piece).map(<[u8]>::to_vec).collect(),
        gap: Duration::from_millis(150),
    });
    let chat = json!({"model": "gpt-test", "messages": [{"role": "user", "content": "Hi."}]});
    let response = post(&server, "/v1/chat/completions", "s-slow", &chat).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), answer);

    // A body that stops for longer than the idle timeout is cut, with a 504 saying why.
    upstream.push(Reply::Raw {
        status: 200,
        headers: vec![("content-type", "application/json".to_owned())],
        pieces: vec![
            text.as_bytes()[..10].to_vec(),
            text.as_bytes()[10..].to_vec(),
        ],
        gap: Duration::from_secs(3),
    });
    let response = tokio::time::timeout(
        PROMPTLY,
        post(&server, "/v1/chat/completions", "s-stall", &chat),
    )
    .await
    .expect("the idle timeout ends the wait");
    assert_eq!(response.status(), 504);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("idle timeout"),
        "{body}"
    );
    assert_eq!(faults(&server, "stalled"), 1);
}

#[tokio::test]
async fn a_stream_that_ends_without_its_final_event_reaches_the_client_as_an_error() {
    let upstream = Upstream::start().await;
    let server = start(config_for(&upstream)).await;
    let cut = |mut events: Vec<String>, last: &str| {
        let at = events
            .iter()
            .rposition(|event| event.contains(last))
            .unwrap();
        events.truncate(at);
        Reply::Sse(events)
    };
    // Chat Completions without `data: [DONE]`.
    upstream.push(cut(openai_sse_text(&["Hello", " there"]), "[DONE]"));
    let chat = json!({"model": "gpt-test", "stream": true,
                      "messages": [{"role": "user", "content": "Hi."}]});
    let body = post(&server, "/v1/chat/completions", "s-cut-c", &chat)
        .await
        .text()
        .await
        .unwrap();
    let data = sse_data(&body);
    let error = data
        .iter()
        .find(|event| event.get("error").is_some())
        .unwrap_or_else(|| panic!("no error event in {body}"));
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[DONE]"),
        "{error}"
    );
    assert!(
        !data
            .iter()
            .any(|event| event["choices"][0]["finish_reason"] == "stop"),
        "the cut answer was closed as complete: {body}"
    );

    // Messages without `message_stop`.
    upstream.push(cut(
        anthropic_sse_text(&["Hello", " there"]),
        "message_stop",
    ));
    let messages = json!({"model": "claude-test", "max_tokens": 64, "stream": true,
                          "messages": [{"role": "user", "content": "Hi."}]});
    let body = post(&server, "/v1/messages", "s-cut-m", &messages)
        .await
        .text()
        .await
        .unwrap();
    let data = sse_data(&body);
    let last = data.last().unwrap();
    assert_eq!(last["type"], "error", "{body}");
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap()
            .contains("message_stop"),
        "{last}"
    );

    // Responses without `response.completed` (store on: nothing is recorded as the answer).
    upstream.push(cut(
        responses_sse("resp_cut", &[RespItem::Text("Hello there")]),
        "response.completed",
    ));
    let responses = json!({"model": "gpt-test", "stream": true,
                           "input": [input_text("user", "Hi.")]});
    let body = post(&server, "/v1/responses", "s-cut-r", &responses)
        .await
        .text()
        .await
        .unwrap();
    let data = sse_data(&body);
    let last = data.last().unwrap();
    assert_eq!(last["type"], "response.failed", "{body}");
    assert!(
        !data
            .iter()
            .any(|event| event["type"] == "response.completed"),
        "{body}"
    );
    let next = json!({"model": "gpt-test", "previous_response_id": "resp_cut",
                      "input": [input_text("user", "Again.")]});
    let response = post(&server, "/v1/responses", "s-cut-r", &next).await;
    assert_eq!(response.status(), 400, "a cut answer was recorded as whole");

    assert_eq!(faults(&server, "incomplete_stream"), 3);
}

#[tokio::test]
async fn a_second_request_on_a_session_held_by_a_hung_call_gets_a_409_naming_it_after_the_bounded_wait()
 {
    let upstream = Upstream::start().await;
    let mut config = config_for(&upstream);
    // The default first-byte timeout (600 s): only the bounded wait can answer the second.
    config.session_busy_wait = Duration::from_millis(300);
    let server = start(config).await;
    upstream.push(Reply::Hang);
    let chat = json!({"model": "gpt-test", "messages": [{"role": "user", "content": "Hi."}]});
    let url = server.url("/v1/chat/completions");
    let hung = {
        let chat = chat.clone();
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(url)
                .header("x-skald-session", "s-busy")
                .json(&chat)
                .send()
                .await
        })
    };
    for _ in 0..250 {
        if upstream.request_count() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        upstream.request_count(),
        1,
        "the first call reached the upstream"
    );

    let started = std::time::Instant::now();
    for (path, request) in [
        ("/v1/chat/completions", chat.clone()),
        (
            "/v1/messages",
            json!({"model": "claude-test", "max_tokens": 64,
                   "messages": [{"role": "user", "content": "Hi."}]}),
        ),
    ] {
        let response = tokio::time::timeout(PROMPTLY, post(&server, path, "s-busy", &request))
            .await
            .expect("the bounded wait answers the second request");
        assert_eq!(response.status(), 409, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["type"], "session_busy", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("s-busy"), "{message}");
        if path == "/v1/messages" {
            assert_eq!(body["type"], "error", "{body}");
        }
    }
    assert!(started.elapsed() >= Duration::from_millis(600), "it waited");
    // Refused, it went nowhere; another session is not held at all.
    assert_eq!(upstream.request_count(), 1);
    let response = post(&server, "/v1/chat/completions", "s-free", &chat).await;
    assert_eq!(response.status(), 200);
    hung.abort();
}

#[tokio::test]
async fn a_skald_key_in_both_x_skald_key_and_authorization_reaches_the_upstream_as_the_configured_provider_key()
 {
    let upstream = Upstream::start().await;
    let mut config = config_for(&upstream);
    config.openai.as_mut().unwrap().api_key = Some("sk-openai-configured".to_owned());
    config.anthropic.as_mut().unwrap().api_key = Some("sk-ant-configured".to_owned());
    let state = common::test_state(config);
    let tenant = skald_core::ids::Tenant::parse("acme").unwrap();
    let key = state.keys.create(&tenant, "both").unwrap();
    let server = TestServer::start(state).await;
    let client = reqwest::Client::new();
    let chat = json!({"model": "gpt-test", "messages": [{"role": "user", "content": "Hi."}]});
    let response = client
        .post(server.url("/v1/chat/completions"))
        .header("x-skald-key", &key.secret)
        .bearer_auth(&key.secret)
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let messages = json!({"model": "claude-test", "max_tokens": 64,
                          "messages": [{"role": "user", "content": "Hi."}]});
    let response = client
        .post(server.url("/v1/messages"))
        .header("x-skald-key", &key.secret)
        .header("x-api-key", &key.secret)
        .header("anthropic-version", "2023-06-01")
        .json(&messages)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let sent = upstream.requests();
    assert_eq!(
        sent[0].header("authorization"),
        Some("Bearer sk-openai-configured")
    );
    assert_eq!(sent[1].header("x-api-key"), Some("sk-ant-configured"));
    assert_no_skald_key(&upstream, &key.secret);
}

/// Reads `stream` until its text holds `needle`.
async fn read_until(
    stream: &mut (impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    text: &mut String,
    needle: &str,
) {
    use futures::StreamExt;
    while !text.contains(needle) {
        let chunk = tokio::time::timeout(PROMPTLY, stream.next())
            .await
            .expect("the stream goes on")
            .expect("the stream is not over")
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

/// Reads `stream` to its end (an error ends it too: the text so far is what the client got).
async fn read_rest(
    stream: &mut (impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    text: &mut String,
) {
    use futures::StreamExt;
    while let Some(Ok(chunk)) = stream.next().await {
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

#[tokio::test]
async fn a_graceful_stop_lets_calls_finish_within_its_grace_and_ends_the_rest_in_their_apis_terms()
{
    let upstream = Upstream::start().await;
    let mut config = config_for(&upstream);
    let grace = Duration::from_millis(1500);
    config.shutdown_grace = grace;
    let state = common::test_state(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(skald_server::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    let never = std::sync::Arc::new(tokio::sync::Notify::new());
    let soon = std::sync::Arc::new(tokio::sync::Notify::new());
    let held = |events: Vec<String>, first: usize, gate: &std::sync::Arc<tokio::sync::Notify>| {
        Reply::GatedSse {
            first: events[..first].to_vec(),
            gate: gate.clone(),
            rest: events[first..].to_vec(),
        }
    };
    let chat = json!({"model": "gpt-test", "stream": true,
                      "messages": [{"role": "user", "content": "Hi."}]});
    let streams = [
        (
            "/v1/chat/completions",
            chat.clone(),
            held(openai_sse_text(&["Hel", "lo"]), 2, &never),
        ),
        (
            "/v1/messages",
            json!({"model": "claude-test", "max_tokens": 64, "stream": true,
                   "messages": [{"role": "user", "content": "Hi."}]}),
            held(anthropic_sse_text(&["Hel", "lo"]), 4, &never),
        ),
        (
            "/v1/responses",
            json!({"model": "gpt-test", "stream": true,
                   "input": [input_text("user", "Hi.")]}),
            held(
                responses_sse("resp_stop", &[RespItem::Text("Hello")]),
                5,
                &never,
            ),
        ),
        // One that the upstream finishes within the grace.
        (
            "/v1/chat/completions",
            chat,
            held(openai_sse_text(&["Hel", "lo"]), 2, &soon),
        ),
    ];
    let client = reqwest::Client::new();
    let mut open = Vec::new();
    for (n, (path, request, reply)) in streams.into_iter().enumerate() {
        upstream.push(reply);
        let response = client
            .post(format!("http://{addr}{path}"))
            .header("x-skald-session", format!("s-stop-{n}"))
            .json(&request)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let mut body = Box::pin(response.bytes_stream());
        let mut text = String::new();
        read_until(&mut body, &mut text, "delta").await;
        open.push((path, body, text));
    }
    // And a whole answer the upstream never starts.
    upstream.push(Reply::Hang);
    let hung = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .post(format!("http://{addr}/v1/chat/completions"))
                .header("x-skald-session", "s-stop-hung")
                .json(&json!({"model": "gpt-test",
                              "messages": [{"role": "user", "content": "Hi."}]}))
                .send()
                .await
        })
    };
    for _ in 0..250 {
        if upstream.request_count() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(upstream.request_count(), 5);

    let stopping = std::time::Instant::now();
    stop.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    soon.notify_one();
    let (_, mut body, mut text) = open.pop().unwrap();
    tokio::time::timeout(PROMPTLY, read_rest(&mut body, &mut text))
        .await
        .unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert!(!text.contains("shutting down"), "{text}");

    for (path, mut body, mut text) in open {
        tokio::time::timeout(PROMPTLY, read_rest(&mut body, &mut text))
            .await
            .unwrap_or_else(|_| panic!("{path}: the stream did not end when skald stopped"));
        let data = sse_data(&text);
        let error = data
            .iter()
            .find(|event| {
                event.get("error").is_some_and(Value::is_object)
                    || event["response"]["error"].is_object()
            })
            .unwrap_or_else(|| panic!("{path}: no error event in {text}"));
        assert!(
            error.to_string().contains("shutting down"),
            "{path}: {error}"
        );
        match path {
            "/v1/messages" => assert_eq!(data.last().unwrap()["type"], "error", "{text}"),
            "/v1/responses" => {
                assert_eq!(data.last().unwrap()["type"], "response.failed", "{text}");
            }
            _ => assert_eq!(data.last().unwrap(), "[DONE]", "{text}"),
        }
    }
    let response = tokio::time::timeout(PROMPTLY, hung)
        .await
        .expect("the hung call was answered")
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "shutting_down", "{body}");
    tokio::time::timeout(PROMPTLY, serving)
        .await
        .expect("serve returned within its grace")
        .unwrap()
        .unwrap();
    assert!(stopping.elapsed() < grace + Duration::from_secs(1));
}
