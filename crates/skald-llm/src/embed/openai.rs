//! The OpenAI-compatible embedder: `POST {base_url}/embeddings` with `{model, input: [...],
//! encoding_format: "float"}`, which OpenAI, Azure OpenAI, Ollama, vLLM, llama.cpp's server,
//! text-embeddings-inference and most gateways speak. Texts go in batches of the configured
//! size, one request after the other, each through the chat clients' transport (same retries,
//! timeouts, typed errors); answers are put back in input order by their `index`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::config::OpenAiEmbeddingConfig;
use super::{Embedder, ExpectedSize, checked_vectors};
use crate::error::{LlmError, cut_chars};
use crate::http::{Transport, endpoint};
use crate::openai::{auth_headers, embedded_error};
use crate::retry::{JitterSource, RetryPolicy};

/// An embeddings client for one model of an OpenAI-compatible server.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    config: OpenAiEmbeddingConfig,
    transport: Transport,
    endpoint: String,
    /// The vector size of the first answer when none is configured (0 until then), so a model
    /// swapped behind the same name is caught rather than mixed into an index.
    seen_dimensions: AtomicUsize,
}

impl OpenAiEmbedder {
    /// An embedder for `config`, with the key read from the environment variable it names.
    pub fn new(config: OpenAiEmbeddingConfig) -> Result<OpenAiEmbedder, LlmError> {
        let key = config.resolve_api_key()?;
        OpenAiEmbedder::with_api_key(config, key)
    }

    /// An embedder for `config` with the key given (or none, for servers that need none).
    pub fn with_api_key(
        config: OpenAiEmbeddingConfig,
        api_key: Option<String>,
    ) -> Result<OpenAiEmbedder, LlmError> {
        config.validate()?;
        let transport = Transport::new(
            &config.provider_config(),
            auth_headers(&config.base_url, api_key)?,
        )?;
        let endpoint = endpoint(&config.base_url, &["embeddings"])?;
        Ok(OpenAiEmbedder {
            config,
            transport,
            endpoint,
            seen_dimensions: AtomicUsize::new(0),
        })
    }

    /// Replaces the retry policy (default: seed 003's 3 attempts, 500–5000 ms, 0.2 jitter).
    pub fn with_retry_policy(mut self, policy: RetryPolicy) -> OpenAiEmbedder {
        self.transport.retry = policy;
        self
    }

    /// Replaces the source of retry jitter (tests pass a [`crate::retry::FixedJitter`]).
    pub fn with_jitter(mut self, jitter: Arc<dyn JitterSource>) -> OpenAiEmbedder {
        self.transport.jitter = jitter;
        self
    }

    /// Replaces the per-attempt timeout the configuration's `timeout_secs` set.
    pub fn with_request_timeout(mut self, timeout: Duration) -> OpenAiEmbedder {
        self.transport.timeout = timeout;
        self
    }

    /// The configuration the embedder was built from.
    pub fn config(&self) -> &OpenAiEmbeddingConfig {
        &self.config
    }

    /// The JSON body sent for one batch of texts.
    pub fn request_body(&self, batch: &[String]) -> Value {
        let mut body = json!({
            "model": self.config.model,
            "input": batch,
            // The wire default, said out loud: the official Python client asks for base64, and
            // a gateway copying that default would answer with strings.
            "encoding_format": "float",
        });
        if let (true, Some(dimensions), Value::Object(fields)) = (
            self.config.request_dimensions,
            self.config.dimensions,
            &mut body,
        ) {
            fields.insert("dimensions".to_owned(), Value::from(dimensions));
        }
        body
    }

    fn expected_size(&self) -> ExpectedSize {
        match (
            self.config.dimensions,
            self.seen_dimensions.load(Ordering::Relaxed),
        ) {
            (Some(configured), _) => ExpectedSize::Configured(configured),
            (None, 0) => ExpectedSize::Unknown,
            (None, seen) => ExpectedSize::Seen(seen),
        }
    }

    fn source(&self) -> String {
        format!(
            "the embedding model {:?} at {}",
            self.config.model, self.endpoint
        )
    }

    /// One batch, sent (with retries), decoded, checked and normalised.
    async fn embed_batch(
        &self,
        batch: &[String],
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        let body = self.request_body(batch);
        let answer = self
            .transport
            .post_json(&self.endpoint, &body, cancel)
            .await?;
        let vectors = decode_embeddings(&answer, batch.len())?;
        let expected = self.expected_size();
        let vectors = checked_vectors(vectors, batch.len(), expected, &self.source())?;
        if let (ExpectedSize::Unknown, Some(first)) = (expected, vectors.first()) {
            let size = first.len();
            // Two first calls racing may both have learnt a size; they must agree.
            match self.seen_dimensions.compare_exchange(
                0,
                size,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {}
                Err(seen) if seen == size => {}
                Err(seen) => {
                    return Err(LlmError::InvalidResponse {
                        message: format!(
                            "embedding dimension mismatch: {} returned {size} values, expected {seen} (the size of its earlier vectors)",
                            self.source()
                        ),
                    });
                }
            }
        }
        Ok(vectors)
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn name(&self) -> &str {
        &self.config.model
    }

    fn dimensions(&self) -> Option<usize> {
        match self.expected_size() {
            ExpectedSize::Configured(size) | ExpectedSize::Seen(size) => Some(size),
            ExpectedSize::Unknown => None,
        }
    }

    async fn embed(
        &self,
        texts: &[String],
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.config.batch_size.max(1)) {
            if cancel.is_cancelled() {
                return Err(LlmError::Aborted);
            }
            vectors.extend(self.embed_batch(batch, cancel).await?);
        }
        Ok(vectors)
    }
}

/// The vectors of an embeddings answer, in input order: `data[i].index` says which text each
/// one belongs to (servers may answer out of order); an entry without `index` is taken at its
/// position. Every text must get exactly one vector.
fn decode_embeddings(answer: &Value, expected_count: usize) -> Result<Vec<Vec<f32>>, LlmError> {
    if let Some(error) = embedded_error(answer) {
        return Err(error);
    }
    let invalid = |message: String| LlmError::InvalidResponse { message };
    let data = answer
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            invalid(format!(
                "not an embeddings answer (no `data` array): {}",
                cut_chars(&answer.to_string(), 300)
            ))
        })?;
    if data.len() != expected_count {
        return Err(invalid(format!(
            "the embeddings answer has {} entries for {expected_count} texts",
            data.len()
        )));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected_count];
    for (position, item) in data.iter().enumerate() {
        let index = match item.get("index") {
            None | Some(Value::Null) => position,
            Some(index) => index
                .as_u64()
                .and_then(|index| usize::try_from(index).ok())
                .ok_or_else(|| {
                    invalid(format!(
                        "data[{position}].index is {index}, not a non-negative integer"
                    ))
                })?,
        };
        let slot = slots.get_mut(index).ok_or_else(|| {
            invalid(format!(
                "data[{position}].index is {index}, but only {expected_count} texts were sent"
            ))
        })?;
        if slot.is_some() {
            return Err(invalid(format!(
                "data[{position}].index {index} appears twice in the embeddings answer"
            )));
        }
        *slot = Some(embedding_values(item.get("embedding"), position)?);
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(index, slot)| {
            slot.ok_or_else(|| {
                invalid(format!(
                    "the embeddings answer has no vector for text {index}"
                ))
            })
        })
        .collect()
}

fn embedding_values(embedding: Option<&Value>, position: usize) -> Result<Vec<f32>, LlmError> {
    let invalid = |message: String| LlmError::InvalidResponse { message };
    match embedding {
        Some(Value::Array(values)) => values
            .iter()
            .enumerate()
            .map(|(at, value)| {
                value.as_f64().map(|value| value as f32).ok_or_else(|| {
                    invalid(format!(
                        "data[{position}].embedding[{at}] is {value}, not a number"
                    ))
                })
            })
            .collect(),
        Some(Value::String(_)) => Err(invalid(format!(
            "data[{position}].embedding is a string (base64?) although encoding_format \"float\" was asked for"
        ))),
        Some(other) => Err(invalid(format!(
            "data[{position}].embedding is {}, not an array of numbers",
            cut_chars(&other.to_string(), 100)
        ))),
        None => Err(invalid(format!("data[{position}] has no embedding"))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn invalid_message(result: Result<Vec<Vec<f32>>, LlmError>) -> String {
        match result {
            Err(LlmError::InvalidResponse { message }) => message,
            other => panic!("expected an invalid response, got {other:?}"),
        }
    }

    #[test]
    fn entries_are_put_back_in_input_order() {
        let answer = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]},
        ]});
        assert_eq!(
            decode_embeddings(&answer, 2).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
        let without_index = json!({"data": [{"embedding": [1.0]}, {"embedding": [2.0]}]});
        assert_eq!(
            decode_embeddings(&without_index, 2).unwrap(),
            vec![vec![1.0], vec![2.0]]
        );
    }

    #[test]
    fn malformed_answers_are_named() {
        let message = invalid_message(decode_embeddings(&json!({"object": "list"}), 1));
        assert!(message.contains("no `data` array"), "{message}");
        let message = invalid_message(decode_embeddings(&json!({"data": []}), 1));
        assert!(message.contains("0 entries for 1 texts"), "{message}");
        let twice =
            json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]});
        let message = invalid_message(decode_embeddings(&twice, 2));
        assert!(message.contains("appears twice"), "{message}");
        let beyond = json!({"data": [{"index": 5, "embedding": [1.0]}]});
        let message = invalid_message(decode_embeddings(&beyond, 1));
        assert!(message.contains("only 1 texts were sent"), "{message}");
        let negative = json!({"data": [{"index": -1, "embedding": [1.0]}]});
        let message = invalid_message(decode_embeddings(&negative, 1));
        assert!(message.contains("not a non-negative integer"), "{message}");
        let base64 = json!({"data": [{"index": 0, "embedding": "AACAPw=="}]});
        let message = invalid_message(decode_embeddings(&base64, 1));
        assert!(message.contains("is a string"), "{message}");
        let text = json!({"data": [{"index": 0, "embedding": [1.0, "x"]}]});
        let message = invalid_message(decode_embeddings(&text, 1));
        assert!(message.contains("embedding[1] is \"x\""), "{message}");
        let missing = json!({"data": [{"index": 0}]});
        let message = invalid_message(decode_embeddings(&missing, 1));
        assert!(message.contains("has no embedding"), "{message}");
    }

    #[test]
    fn an_error_inside_a_success_answer_is_typed() {
        let answer = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}});
        assert!(matches!(
            decode_embeddings(&answer, 1),
            Err(LlmError::Auth { .. })
        ));
    }

    #[test]
    fn dimensions_are_only_sent_when_asked() {
        let mut config = OpenAiEmbeddingConfig::new("text-embedding-3-small");
        config.dimensions = Some(256);
        let texts = ["a".to_owned()];
        let embedder = OpenAiEmbedder::with_api_key(config.clone(), None).unwrap();
        assert_eq!(embedder.request_body(&texts).get("dimensions"), None);
        config.request_dimensions = true;
        let embedder = OpenAiEmbedder::with_api_key(config, None).unwrap();
        assert_eq!(
            embedder.request_body(&texts),
            json!({"model": "text-embedding-3-small", "input": ["a"], "encoding_format": "float", "dimensions": 256})
        );
    }
}
