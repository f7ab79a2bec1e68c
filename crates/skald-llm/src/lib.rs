//! skald's LLM providers: an OpenAI-compatible (Chat Completions) client and an Anthropic
//! (Messages) client behind one [`ChatModel`] trait, with timeouts, cancellation,
//! retries (seed 003 §3.3), typed errors, context-overflow detection (seed 003 §4, with every
//! provider form OpenClaw recognises), the [`Summarizer`] trait compaction writes summaries
//! through, and the [`Embedder`] trait memory search turns text into vectors through.
//!
//! - [`config`] reads the `[llm]` / `[llm.summary]` tables of `skald.toml`;
//! - [`chat`] is the provider-neutral interface; [`openai`] and [`anthropic`] implement it,
//!   encoding requests with `skald_core::codec` (tool results' `details` are always stripped);
//! - [`retry`] is the backoff policy, [`error`] the typed errors, [`overflow`] the pure
//!   classification of provider error messages;
//! - [`summarizer`] holds [`Summarizer`] and [`LlmSummarizer`];
//! - [`memory_extract`] holds [`MemoryExtractor`], the seam the memory write path extracts
//!   long-term memories through: [`LlmExtractor`] (structured output, told about similar stored
//!   memories) and [`DeterministicExtractor`] (no LLM);
//! - [`embed`] holds [`Embedder`], the `[embedding]` table ([`EmbeddingConfig`]),
//!   [`OpenAiEmbedder`] (any `/v1/embeddings` server) and, with the `local-embeddings` cargo
//!   feature (off by default: it adds candle and tokenizers to the build), `LocalEmbedder`, a
//!   sentence-transformers model directory run in-process on the CPU. No `[embedding]` table
//!   means no embedder, and [`embedder_from_config`] says so with `None`.
//!
//! # Example
//!
//! Configure a model, see the request it would send, and read an overflow error the way the
//! overflow recovery does (nothing here touches the network):
//!
//! ```
//! use skald_core::message::{Message, Role};
//! use skald_llm::{ChatRequest, LlmConfig, LlmError, OpenAiCompatible, overflow};
//!
//! let config = LlmConfig::from_toml_str(
//!     r#"
//!     [llm]
//!     kind = "openai"
//!     base_url = "http://localhost:11434/v1"   # Ollama needs no key
//!     model = "qwen3:8b"
//!     context_window_tokens = 32768
//!     "#,
//! )?;
//! let chat = config.chat.expect("[llm] is configured");
//! let client = OpenAiCompatible::with_api_key(chat, None)?;
//!
//! let request = ChatRequest {
//!     system: Some("You are terse.".to_owned()),
//!     messages: vec![Message::text(Role::User, "List the files.")],
//!     max_output_tokens: Some(256),
//!     ..ChatRequest::default()
//! };
//! let body = client.request_body(&request, false)?;
//! assert_eq!(body["model"], "qwen3:8b");
//! assert_eq!(body["messages"][0]["role"], "system");
//! assert_eq!(body["max_tokens"], 256);
//!
//! // A provider's 400 that means "compact and retry", with the counts it states:
//! let error = LlmError::from_provider(
//!     Some(400),
//!     r#"{"error":{"message":"This model's maximum context length is 32768 tokens. However, your messages resulted in 40211 tokens.","code":"context_length_exceeded"}}"#,
//!     None,
//! );
//! assert!(matches!(
//!     error,
//!     LlmError::ContextOverflow { requested_tokens: Some(40_211), limit_tokens: Some(32_768), .. }
//! ));
//! // …while a token rate limit is not an overflow, however it is worded.
//! assert_eq!(
//!     overflow::classify_error(Some(429), "Rate limit reached on tokens per min (TPM): Limit 30000"),
//!     overflow::ErrorClass::RateLimited,
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Embeddings: the `[embedding]` table picks an embedder, none when it is absent; every
//! embedder returns one L2-normalised vector per text, in order (nothing here touches the
//! network):
//!
//! ```
//! use skald_llm::{EmbeddingConfig, OpenAiEmbedder, embedder_from_config};
//!
//! assert!(embedder_from_config(EmbeddingConfig::from_toml_str("[llm]\n")?.as_ref())?.is_none());
//!
//! let config = EmbeddingConfig::from_toml_str(
//!     r#"
//!     [embedding]
//!     kind = "openai"
//!     base_url = "http://localhost:11434/v1"   # Ollama
//!     model = "nomic-embed-text"
//!     dimensions = 768                         # every answer is checked against it
//!     batch_size = 32
//!     "#,
//! )?;
//! let Some(EmbeddingConfig::OpenAi(openai)) = config else {
//!     panic!("an OpenAI-compatible embedder is configured");
//! };
//! let embedder = OpenAiEmbedder::with_api_key(openai, None)?;
//! let body = embedder.request_body(&["The user prefers dark mode.".to_owned()]);
//! assert_eq!(body["model"], "nomic-embed-text");
//! assert_eq!(body["input"][0], "The user prefers dark mode.");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ```no_run
//! # async fn run() -> Result<(), skald_llm::LlmError> {
//! use skald_llm::{Embedder, EmbeddingConfig, embedder_from_config};
//! use tokio_util::sync::CancellationToken;
//!
//! // With the `local-embeddings` feature, a sentence-transformers directory works the same.
//! let config = EmbeddingConfig::from_toml_str(
//!     "[embedding]\nkind = \"local\"\npath = \"/models/all-MiniLM-L6-v2\"\n",
//! )?;
//! if let Some(embedder) = embedder_from_config(config.as_ref())? {
//!     let texts = ["a cat sits on the mat".to_owned(), "stock prices fell".to_owned()];
//!     let vectors = embedder.embed(&texts, &CancellationToken::new()).await?;
//!     let cosine: f32 = vectors[0].iter().zip(&vectors[1]).map(|(a, b)| a * b).sum();
//!     println!("{} dimensions, cosine {cosine:.3}", vectors[0].len());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Calling the model (any [`ChatModel`] works the same; `cancel` aborts the request or a retry
//! wait):
//!
//! ```no_run
//! # async fn run() -> Result<(), skald_llm::LlmError> {
//! use skald_core::message::{Message, Role};
//! use skald_llm::{ChatRequest, LlmConfig, client_from_config};
//! use tokio_util::sync::CancellationToken;
//!
//! let config = LlmConfig::from_toml_str(
//!     "[llm]\nkind = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n",
//! )?;
//! let model = client_from_config(config.chat.as_ref().expect("configured"))?;
//! let request = ChatRequest::new(None, vec![Message::text(Role::User, "Hello")]);
//! let cancel = CancellationToken::new();
//!
//! let answer = model.complete(&request, &cancel).await?;
//! println!("{} ({} output tokens)", answer.text(), answer.usage.output);
//! # Ok(())
//! # }
//! ```

// Every public item says what it is; `clippy -D warnings` turns a new undocumented one into an
// error.
#![warn(missing_docs)]

pub mod anthropic;
pub mod chat;
pub mod client;
pub mod config;
pub mod embed;
pub mod error;
mod http;
pub mod memory_extract;
pub mod openai;
pub mod overflow;
pub mod retry;
pub mod summarizer;

pub use anthropic::Anthropic;
pub use chat::{ChatModel, ChatRequest, ChatResponse, strip_details};
pub use client::{client_from_config, client_with_api_key};
pub use config::{LlmConfig, ProviderConfig, ProviderKind};
#[cfg(feature = "local-embeddings")]
pub use embed::LocalEmbedder;
pub use embed::{
    Embedder, EmbedderKind, EmbeddingConfig, LocalEmbeddingConfig, OpenAiEmbedder,
    OpenAiEmbeddingConfig, embedder_from_config,
};
pub use error::LlmError;
pub use memory_extract::{DeterministicExtractor, LlmExtractor, MemoryExtractor};
pub use openai::OpenAiCompatible;
pub use overflow::{ErrorClass, classify_error, parse_overflow_counts};
pub use retry::{FixedJitter, JitterSource, RandomJitter, RetryPolicy};
pub use summarizer::{ExtractiveSummarizer, LlmSummarizer, Summarizer, SummaryRequest};
