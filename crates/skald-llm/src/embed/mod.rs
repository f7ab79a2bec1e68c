//! Text embeddings for memory search: the [`Embedder`] trait, its two implementations — an
//! OpenAI-compatible `/embeddings` endpoint ([`OpenAiEmbedder`]) and, with the
//! `local-embeddings` feature, a sentence-transformers model directory run in-process with
//! candle (`LocalEmbedder`) — and [`embedder_from_config`], which maps the `[embedding]` table
//! to one of them. No table means no embedder, and every caller works without one.
//!
//! Every embedder returns one L2-normalised vector per text, in the order of the texts, all of
//! the same size, so callers compare vectors with a plain dot product.

pub mod config;
#[cfg(feature = "local-embeddings")]
pub mod local;
pub mod openai;

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

pub use config::{
    DEFAULT_EMBEDDING_BATCH_SIZE, DEFAULT_EMBEDDING_TIMEOUT_SECS, EmbedderKind, EmbeddingConfig,
    LocalEmbeddingConfig, OpenAiEmbeddingConfig,
};
#[cfg(feature = "local-embeddings")]
pub use local::{LocalEmbedder, Pooling};
pub use openai::OpenAiEmbedder;

use crate::error::LlmError;

/// Turns texts into vectors.
///
/// `embed` batches internally (the configured batch size), returns exactly one vector per
/// text in the order given, each L2-normalised (a zero vector stays zero) and of the same size,
/// and returns `Ok(vec![])` for no texts without doing any work. `cancel` aborts a request in
/// flight, a retry wait, or the batches not yet run, with [`LlmError::Aborted`].
#[async_trait]
pub trait Embedder: Send + Sync {
    /// The model's name, for logs and for telling vectors of different models apart.
    fn name(&self) -> &str;

    /// The size of the vectors, when known: always for a local model, for an endpoint when
    /// configured or once the first answer arrived.
    fn dimensions(&self) -> Option<usize>;

    /// One vector per text, in order.
    async fn embed(
        &self,
        texts: &[String],
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<f32>>, LlmError>;
}

/// Scales `vector` to unit length in place. A zero (or non-finite) vector is left as it is:
/// there is no direction to keep, and dividing would fill it with NaN.
pub fn l2_normalize(vector: &mut [f32]) {
    let norm = vector
        .iter()
        .map(|value| f64::from(*value) * f64::from(*value))
        .sum::<f64>()
        .sqrt();
    if norm.is_finite() && norm > 0.0 {
        for value in vector.iter_mut() {
            *value = (f64::from(*value) / norm) as f32;
        }
    }
}

/// The embedder `config` describes, with its key read from the environment; `None` when no
/// embedder is configured. A local model is loaded here (it reads the model files: call this
/// at start-up, or inside `spawn_blocking` from async code).
///
/// Fails with [`LlmError::Config`] on an invalid configuration, a missing key variable, a
/// model directory that cannot be loaded, or `kind = "local"` in a build without the
/// `local-embeddings` feature.
pub fn embedder_from_config(
    config: Option<&EmbeddingConfig>,
) -> Result<Option<Arc<dyn Embedder>>, LlmError> {
    let Some(config) = config else {
        return Ok(None);
    };
    let embedder: Arc<dyn Embedder> = match config {
        EmbeddingConfig::OpenAi(openai) => Arc::new(OpenAiEmbedder::new(openai.clone())?),
        EmbeddingConfig::Local(local) => local_embedder(local)?,
    };
    Ok(Some(embedder))
}

#[cfg(feature = "local-embeddings")]
fn local_embedder(config: &LocalEmbeddingConfig) -> Result<Arc<dyn Embedder>, LlmError> {
    Ok(Arc::new(LocalEmbedder::load(config)?))
}

#[cfg(not(feature = "local-embeddings"))]
fn local_embedder(config: &LocalEmbeddingConfig) -> Result<Arc<dyn Embedder>, LlmError> {
    Err(LlmError::Config {
        message: format!(
            "embedding.kind: \"local\" (the model in {}) needs skald built with the `local-embeddings` feature; use kind = \"openai\" with an embeddings server, or remove [embedding]",
            config.path.display()
        ),
    })
}

/// Why a vector size is expected, for the error message of a mismatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExpectedSize {
    /// `dimensions` in `[embedding]`.
    Configured(usize),
    /// The size of an earlier answer of the same model.
    Seen(usize),
    /// Nothing known yet: the vectors only have to agree with each other.
    Unknown,
}

/// Checks that `vectors` has one vector per `expected_count` text, all of one size (as
/// `expected` says) with finite values, and normalises them. `source` names where they came
/// from.
pub(crate) fn checked_vectors(
    mut vectors: Vec<Vec<f32>>,
    expected_count: usize,
    expected: ExpectedSize,
    source: &str,
) -> Result<Vec<Vec<f32>>, LlmError> {
    if vectors.len() != expected_count {
        return Err(LlmError::InvalidResponse {
            message: format!(
                "{source} returned {} embeddings for {expected_count} texts",
                vectors.len()
            ),
        });
    }
    let (dimensions, why) = match expected {
        ExpectedSize::Configured(size) => (size, "`dimensions` in [embedding]"),
        ExpectedSize::Seen(size) => (size, "the size of its earlier vectors"),
        ExpectedSize::Unknown => (
            vectors.first().map_or(0, Vec::len),
            "the size of the answer's first vector",
        ),
    };
    for (index, vector) in vectors.iter_mut().enumerate() {
        if vector.len() != dimensions {
            return Err(LlmError::InvalidResponse {
                message: format!(
                    "embedding dimension mismatch: {source} returned {} values for text {index}, expected {dimensions} ({why})",
                    vector.len()
                ),
            });
        }
        if vector.iter().any(|value| !value.is_finite()) {
            return Err(LlmError::InvalidResponse {
                message: format!("{source} returned a non-finite value for text {index}"),
            });
        }
        l2_normalize(vector);
    }
    Ok(vectors)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn normalised_vectors_have_unit_length() {
        let mut vector = vec![3.0, 4.0];
        l2_normalize(&mut vector);
        assert_eq!(vector, vec![0.6, 0.8]);
        let mut zero = vec![0.0, 0.0, 0.0];
        l2_normalize(&mut zero);
        assert_eq!(zero, vec![0.0, 0.0, 0.0]);
        let mut tiny = vec![1e-30, 0.0];
        l2_normalize(&mut tiny);
        assert_eq!(tiny, vec![1.0, 0.0]);
    }

    #[test]
    fn checked_vectors_refuses_wrong_counts_sizes_and_values() {
        let ok = checked_vectors(
            vec![vec![2.0, 0.0], vec![0.0, 5.0]],
            2,
            ExpectedSize::Configured(2),
            "test",
        )
        .unwrap();
        assert_eq!(ok, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        let count = checked_vectors(vec![vec![1.0]], 2, ExpectedSize::Unknown, "test").unwrap_err();
        assert!(
            matches!(&count, LlmError::InvalidResponse { message } if message.contains("1 embeddings for 2 texts")),
            "{count:?}"
        );
        let ragged = checked_vectors(
            vec![vec![1.0, 0.0], vec![1.0]],
            2,
            ExpectedSize::Unknown,
            "test",
        )
        .unwrap_err();
        assert!(
            matches!(&ragged, LlmError::InvalidResponse { message } if message.contains("dimension mismatch")),
            "{ragged:?}"
        );
        let configured =
            checked_vectors(vec![vec![1.0, 0.0]], 1, ExpectedSize::Seen(3), "test").unwrap_err();
        assert!(
            matches!(&configured, LlmError::InvalidResponse { message } if message.contains("returned 2 values for text 0, expected 3 (the size of its earlier")),
            "{configured:?}"
        );
        let nan =
            checked_vectors(vec![vec![f32::NAN]], 1, ExpectedSize::Unknown, "test").unwrap_err();
        assert!(matches!(nan, LlmError::InvalidResponse { .. }));
    }

    #[test]
    fn no_configuration_means_no_embedder() {
        assert!(embedder_from_config(None).unwrap().is_none());
    }

    #[cfg(not(feature = "local-embeddings"))]
    #[test]
    fn a_local_model_without_the_feature_is_a_clear_error() {
        let config = EmbeddingConfig::Local(LocalEmbeddingConfig::new("/models/minilm"));
        let Err(LlmError::Config { message }) = embedder_from_config(Some(&config)) else {
            panic!("expected a config error");
        };
        assert!(message.contains("`local-embeddings` feature"), "{message}");
    }
}
