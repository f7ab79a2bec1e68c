//! The OpenAI-compatible embedder against a local server the test scripts: what it sends, how
//! it batches, how it puts answers back in order, when it retries, and which errors it types.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use serde_json::{Value, json};
use skald_llm::embed::l2_normalize;
use skald_llm::{
    Embedder, EmbeddingConfig, FixedJitter, LlmError, OpenAiEmbedder, OpenAiEmbeddingConfig,
    embedder_from_config,
};
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const ENDPOINT: &str = "/embeddings";

/// The vector the fake server gives a text before normalisation: its length, its first byte
/// and a constant, so each test text gets a distinct, predictable direction.
fn raw_vector(text: &str) -> Vec<f32> {
    vec![
        text.len() as f32,
        f32::from(text.bytes().next().unwrap_or(0)),
        1.0,
    ]
}

fn expected_vector(text: &str) -> Vec<f32> {
    let mut vector = raw_vector(text);
    l2_normalize(&mut vector);
    vector
}

/// Answers an embeddings request as a server would, listing the entries in reverse order
/// (their `index` says where they belong) when `reversed`.
struct FakeEmbeddings {
    reversed: bool,
}

impl Respond for FakeEmbeddings {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let inputs = body["input"].as_array().unwrap();
        let mut data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(index, text)| {
                json!({"object": "embedding", "index": index, "embedding": raw_vector(text.as_str().unwrap())})
            })
            .collect();
        if self.reversed {
            data.reverse();
        }
        ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": 3, "total_tokens": 3}
        }))
    }
}

async fn mount_fake(server: &MockServer, reversed: bool) {
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(FakeEmbeddings { reversed })
        .mount(server)
        .await;
}

async fn mount_once(server: &MockServer, template: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(template)
        .up_to_n_times(1)
        .mount(server)
        .await;
}

fn config(server: &MockServer) -> OpenAiEmbeddingConfig {
    let mut config = OpenAiEmbeddingConfig::new("test-embed");
    config.base_url = format!("{}/v1", server.uri());
    config
        .headers
        .insert("x-skald-test".to_owned(), "yes".to_owned());
    config
}

fn embedder(config: OpenAiEmbeddingConfig) -> OpenAiEmbedder {
    OpenAiEmbedder::with_api_key(config, Some("sk-test".to_owned()))
        .unwrap()
        .with_retry_policy(fast_retry(3))
        .with_jitter(Arc::new(FixedJitter(0.5)))
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|text| (*text).to_owned()).collect()
}

async fn mount_fake_under_v1(server: &MockServer, reversed: bool) {
    Mock::given(method("POST"))
        .and(path(format!("/v1{ENDPOINT}")))
        .respond_with(FakeEmbeddings { reversed })
        .mount(server)
        .await;
}

#[tokio::test]
async fn the_request_carries_model_inputs_key_and_headers_and_vectors_come_back_normalised() {
    let server = MockServer::start().await;
    mount_fake_under_v1(&server, false).await;
    let embedder = embedder(config(&server));
    let input = texts(&["a cat", "stock prices"]);
    let vectors = embedder
        .embed(&input, &CancellationToken::new())
        .await
        .unwrap();

    assert_eq!(
        vectors,
        vec![expected_vector("a cat"), expected_vector("stock prices")]
    );
    for vector in &vectors {
        let norm: f32 = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-6, "norm {norm}");
    }
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.url.path(), "/v1/embeddings");
    let header = |name: &str| sent.headers.get(name).unwrap().to_str().unwrap().to_owned();
    assert_eq!(header("authorization"), "Bearer sk-test");
    assert_eq!(header("content-type"), "application/json");
    assert_eq!(header("x-skald-test"), "yes");
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(
        body,
        json!({"model": "test-embed", "input": ["a cat", "stock prices"], "encoding_format": "float"})
    );
    assert_eq!(embedder.name(), "test-embed");
}

#[tokio::test]
async fn texts_go_in_batches_of_the_configured_size_and_come_back_in_order() {
    let server = MockServer::start().await;
    mount_fake(&server, false).await;
    let mut config = config(&server);
    config.base_url = server.uri();
    config.batch_size = 2;
    let input = texts(&["one", "two", "three", "four", "five"]);
    let vectors = embedder(config)
        .embed(&input, &CancellationToken::new())
        .await
        .unwrap();

    let expected: Vec<Vec<f32>> = input.iter().map(|text| expected_vector(text)).collect();
    assert_eq!(vectors, expected);
    assert_eq!(request_count(&server).await, 3);
    let batches: Vec<Value> = [
        request_body(&server, 0).await,
        request_body(&server, 1).await,
        request_body(&server, 2).await,
    ]
    .iter()
    .map(|body| body["input"].clone())
    .collect();
    assert_eq!(
        batches,
        vec![
            json!(["one", "two"]),
            json!(["three", "four"]),
            json!(["five"])
        ]
    );
}

#[tokio::test]
async fn entries_answered_out_of_order_are_placed_by_their_index() {
    let server = MockServer::start().await;
    mount_fake(&server, true).await;
    let mut config = config(&server);
    config.base_url = server.uri();
    let input = texts(&["alpha", "be", "c"]);
    let vectors = embedder(config)
        .embed(&input, &CancellationToken::new())
        .await
        .unwrap();
    let expected: Vec<Vec<f32>> = input.iter().map(|text| expected_vector(text)).collect();
    assert_eq!(vectors, expected);
}

#[tokio::test]
async fn no_texts_send_no_request() {
    let server = MockServer::start().await;
    mount_fake(&server, false).await;
    let mut config = config(&server);
    config.base_url = server.uri();
    let vectors = embedder(config)
        .embed(&[], &CancellationToken::new())
        .await
        .unwrap();
    assert!(vectors.is_empty());
    assert_eq!(request_count(&server).await, 0);
}

#[tokio::test]
async fn a_server_error_then_success_is_retried() {
    let server = MockServer::start().await;
    mount_once(&server, ResponseTemplate::new(503).set_body_string("busy")).await;
    mount_once(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after-ms", "5")
            .set_body_json(json!({"error": {"message": "Rate limit reached for requests", "code": "rate_limit_exceeded"}})),
    )
    .await;
    mount_fake(&server, false).await;
    let mut config = config(&server);
    config.base_url = server.uri();
    let vectors = embedder(config)
        .embed(&texts(&["retry me"]), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(vectors, vec![expected_vector("retry me")]);
    assert_eq!(request_count(&server).await, 3);
}

#[tokio::test]
async fn retries_stop_after_the_last_attempt() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("boom"))
        .mount(&server)
        .await;
    let mut config = config(&server);
    config.base_url = server.uri();
    let error = embedder(config)
        .embed(&texts(&["x"]), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::Server { status: 500, .. }),
        "{error:?}"
    );
    assert_eq!(request_count(&server).await, 3);
}

#[tokio::test]
async fn a_rejected_key_is_an_auth_error_and_is_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {
            "message": "Incorrect API key provided: sk-test.",
            "type": "invalid_request_error",
            "code": "invalid_api_key"
        }})))
        .mount(&server)
        .await;
    let mut config = config(&server);
    config.base_url = server.uri();
    let error = embedder(config)
        .embed(&texts(&["x"]), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        error,
        LlmError::Auth {
            status: 401,
            message: "Incorrect API key provided: sk-test.".to_owned()
        }
    );
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn an_unknown_model_is_a_bad_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(404).set_body_json(
            json!({"error": {"message": "model \"nomic-embed-txt\" not found, try pulling it first"}}),
        ))
        .mount(&server)
        .await;
    let mut config = config(&server);
    config.base_url = server.uri();
    let error = embedder(config)
        .embed(&texts(&["x"]), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, LlmError::BadRequest { status: 404, message } if message.contains("not found")),
        "{error:?}"
    );
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn vectors_of_another_size_than_configured_are_a_dimension_mismatch() {
    let server = MockServer::start().await;
    mount_fake(&server, false).await;
    let mut config = config(&server);
    config.base_url = server.uri();
    config.dimensions = Some(1536);
    let embedder = embedder(config);
    assert_eq!(embedder.dimensions(), Some(1536));
    let error = embedder
        .embed(&texts(&["x"]), &CancellationToken::new())
        .await
        .unwrap_err();
    let LlmError::InvalidResponse { message } = &error else {
        panic!("expected an invalid response, got {error:?}");
    };
    assert!(
        message.contains("dimension mismatch")
            && message.contains("returned 3 values for text 0, expected 1536")
            && message.contains("`dimensions` in [embedding]"),
        "{message}"
    );
    // Not retried: the same model answers the same size.
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn without_configured_dimensions_the_first_answer_sets_them() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(200)
            .set_body_json(json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}]})),
    )
    .await;
    mount_fake(&server, false).await;
    let mut config = config(&server);
    config.base_url = server.uri();
    let embedder = embedder(config);
    assert_eq!(embedder.dimensions(), None);
    let first = embedder
        .embed(&texts(&["x"]), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(first, vec![vec![1.0, 0.0]]);
    assert_eq!(embedder.dimensions(), Some(2));
    // The model behind the name changed: three values now.
    let error = embedder
        .embed(&texts(&["y"]), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, LlmError::InvalidResponse { message } if message.contains("expected 2 (the size of its earlier vectors)")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_short_answer_is_an_invalid_response() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}]})),
        )
        .mount(&server)
        .await;
    let mut config = config(&server);
    config.base_url = server.uri();
    let error = embedder(config)
        .embed(&texts(&["x", "y"]), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, LlmError::InvalidResponse { message } if message.contains("1 entries for 2 texts")),
        "{error:?}"
    );
}

#[tokio::test]
async fn cancelling_during_backoff_aborts_without_another_attempt() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
        .mount(&server)
        .await;
    let mut config = config(&server);
    config.base_url = server.uri();
    let embedder = embedder(config).with_retry_policy(slow_retry());
    let cancel = CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        let server = &server;
        async move {
            wait_for_requests(server, 1).await;
            cancel.cancel();
        }
    };
    let input = texts(&["x"]);
    let (outcome, ()) = tokio::join!(embedder.embed(&input, &cancel), canceller);
    assert_eq!(outcome.unwrap_err(), LlmError::Aborted);
    assert_eq!(request_count(&server).await, 1);
}

#[tokio::test]
async fn the_configured_embedder_is_built_from_skald_toml() {
    let server = MockServer::start().await;
    mount_fake(&server, false).await;
    let toml = format!(
        "[embedding]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"nomic-embed-text\"\ndimensions = 3\nbatch_size = 1\n",
        server.uri()
    );
    let config = EmbeddingConfig::from_toml_str(&toml).unwrap();
    let embedder = embedder_from_config(config.as_ref()).unwrap().unwrap();
    assert_eq!(embedder.name(), "nomic-embed-text");
    assert_eq!(embedder.dimensions(), Some(3));
    let vectors = embedder
        .embed(&texts(&["a", "b"]), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(vectors, vec![expected_vector("a"), expected_vector("b")]);
    assert_eq!(request_count(&server).await, 2);
    // No key variable named: none sent.
    let requests = server.received_requests().await.unwrap();
    assert!(requests[0].headers.get("authorization").is_none());
}

#[tokio::test]
async fn a_missing_key_variable_fails_at_construction() {
    let mut config = OpenAiEmbeddingConfig::new("text-embedding-3-small");
    config.api_key_env = Some("SKALD_TEST_SURELY_UNSET_EMBEDDING_KEY".to_owned());
    let error = embedder_from_config(Some(&EmbeddingConfig::OpenAi(config)))
        .err()
        .unwrap();
    assert!(
        matches!(&error, LlmError::Config { message } if message.contains("SKALD_TEST_SURELY_UNSET_EMBEDDING_KEY")),
        "{error:?}"
    );
}
