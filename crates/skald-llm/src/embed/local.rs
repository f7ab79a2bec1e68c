//! The in-process embedder (feature `local-embeddings`): a sentence-transformers model
//! directory — `config.json`, `tokenizer.json`, `model.safetensors`, and optionally
//! `modules.json`, `sentence_bert_config.json` and `1_Pooling/config.json` — run on the CPU
//! with candle's BERT. It computes what `SentenceTransformer.encode(…, normalize_embeddings=True)`
//! computes for such a model: tokens truncated to the model's `max_seq_length`, the encoder's
//! last hidden states pooled (mean over the attention mask, or the `[CLS]` token when the
//! pooling configuration says so), then L2-normalised.
//!
//! Inference runs in tokio's blocking pool so it never stalls the async runtime. Texts are
//! sorted by token count before batching, so each batch pads to a similar length, and the
//! vectors are put back in input order.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokenizers::{Encoding, Tokenizer, TruncationParams};
use tokio_util::sync::CancellationToken;

use super::config::LocalEmbeddingConfig;
use super::{Embedder, ExpectedSize, checked_vectors};
use crate::error::LlmError;

/// The files every model directory must hold.
const CONFIG_FILE: &str = "config.json";
const TOKENIZER_FILE: &str = "tokenizer.json";
const WEIGHTS_FILE: &str = "model.safetensors";
/// What a model directory holds, for error messages.
const DIRECTORY_HINT: &str = "a sentence-transformers model directory holds config.json, tokenizer.json and model.safetensors";

/// How token vectors become one text vector (sentence-transformers' `Pooling` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The mean of the token vectors the attention mask keeps (all-MiniLM, most models).
    Mean,
    /// The `[CLS]` token's vector (the BGE family).
    Cls,
}

/// A BERT sentence-embedding model loaded from a directory, ready to embed on the CPU.
pub struct LocalEmbedder {
    name: String,
    batch_size: usize,
    model: Arc<LocalModel>,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("name", &self.name)
            .field("dimensions", &self.model.dimensions)
            .field("pooling", &self.model.pooling)
            .field("max_sequence_tokens", &self.model.max_sequence_tokens)
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

struct LocalModel {
    bert: BertModel,
    tokenizer: Tokenizer,
    pooling: Pooling,
    pad_id: u32,
    dimensions: usize,
    max_sequence_tokens: usize,
    device: Device,
    /// Names the model in error messages.
    source: String,
}

impl LocalEmbedder {
    /// Loads the model directory `config.path` names (it reads the whole weights file: call it
    /// at start-up, or from `spawn_blocking` in async code).
    ///
    /// Fails with [`LlmError::Config`] naming the file and what is wrong with it when the
    /// directory is missing, a required file is missing or unreadable, the model is not a BERT
    /// model, uses a sentence-transformers module skald does not run (a `Dense` layer, max
    /// pooling…), or its size differs from the configured `dimensions`.
    pub fn load(config: &LocalEmbeddingConfig) -> Result<LocalEmbedder, LlmError> {
        config.validate().map_err(|error| {
            if let LlmError::Config { message } = error {
                path_error(&format!("embedding.{message}"))
            } else {
                error
            }
        })?;
        let dir = config.path.as_path();
        match std::fs::metadata(dir) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => {
                return Err(path_error(&format!(
                    "{} is not a directory ({DIRECTORY_HINT})",
                    dir.display()
                )));
            }
            Err(error) => {
                return Err(path_error(&format!(
                    "{} cannot be opened: {error} ({DIRECTORY_HINT})",
                    dir.display()
                )));
            }
        }
        let bert_config: BertConfig = read_json(&dir.join(CONFIG_FILE), "a BERT config.json")?;
        match bert_config.model_type.as_deref() {
            None | Some("bert") => {}
            Some(other) => {
                return Err(path_error(&format!(
                    "{} says model_type {other:?}; only BERT models (all-MiniLM-L6-v2, bge-small-en-v1.5, e5-small-v2…) run in-process",
                    dir.join(CONFIG_FILE).display()
                )));
            }
        }
        let pooling = pooling_of(dir)?;
        let max_sequence_tokens = max_sequence_tokens(dir, &bert_config)?;
        let dimensions = bert_config.hidden_size;
        if let Some(configured) = config.dimensions {
            if configured != dimensions {
                return Err(LlmError::Config {
                    message: format!(
                        "embedding.dimensions: {configured} is configured, but the model in {} makes {dimensions}-dimensional vectors",
                        dir.display()
                    ),
                });
            }
        }
        let (tokenizer, pad_id) = load_tokenizer(dir, &bert_config, max_sequence_tokens)?;
        let device = Device::Cpu;
        let bert = load_weights(dir, &bert_config, &device)?;
        let name = config.display_name();
        Ok(LocalEmbedder {
            batch_size: config.batch_size.max(1),
            model: Arc::new(LocalModel {
                bert,
                tokenizer,
                pooling,
                pad_id,
                dimensions,
                max_sequence_tokens,
                device,
                source: format!("the local embedding model {name:?}"),
            }),
            name,
        })
    }

    /// How token vectors are pooled, as the model directory says.
    pub fn pooling(&self) -> Pooling {
        self.model.pooling
    }

    /// The longest input in tokens (special tokens included); longer texts are truncated, as
    /// sentence-transformers truncates them.
    pub fn max_sequence_tokens(&self) -> usize {
        self.model.max_sequence_tokens
    }

    /// [`Embedder::embed`] on the calling thread, for callers outside an async runtime (and
    /// benchmarks). It blocks for the whole computation.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        self.model
            .embed(texts, self.batch_size, &CancellationToken::new())
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn name(&self) -> &str {
        &self.name
    }

    fn dimensions(&self) -> Option<usize> {
        Some(self.model.dimensions)
    }

    async fn embed(
        &self,
        texts: &[String],
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        if cancel.is_cancelled() {
            return Err(LlmError::Aborted);
        }
        let model = Arc::clone(&self.model);
        let texts = texts.to_vec();
        let batch_size = self.batch_size;
        let task_cancel = cancel.clone();
        let task =
            tokio::task::spawn_blocking(move || model.embed(&texts, batch_size, &task_cancel));
        tokio::select! {
            biased;
            // The task sees the same token and stops before its next batch.
            () = cancel.cancelled() => Err(LlmError::Aborted),
            joined = task => joined.map_err(|error| LlmError::InvalidResponse {
                message: format!("the local embedding task of {:?} failed: {error}", self.name),
            })?,
        }
    }
}

impl LocalModel {
    fn embed(
        &self,
        texts: &[String],
        batch_size: usize,
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings = self
            .tokenizer
            .encode_batch_fast(inputs, true)
            .map_err(|error| LlmError::InvalidRequest {
                message: format!("{} cannot tokenize the texts: {error}", self.source),
            })?;
        let mut by_length: Vec<(usize, Encoding)> = encodings.into_iter().enumerate().collect();
        by_length.sort_by_key(|(_, encoding)| encoding.len());
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for batch in by_length.chunks(batch_size.max(1)) {
            if cancel.is_cancelled() {
                return Err(LlmError::Aborted);
            }
            let rows = self
                .forward(batch)
                .map_err(|error| LlmError::InvalidResponse {
                    message: format!("{} failed: {error}", self.source),
                })?;
            for ((index, _), row) in batch.iter().zip(rows) {
                if let Some(slot) = slots.get_mut(*index) {
                    *slot = Some(row);
                }
            }
        }
        let vectors = slots
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| LlmError::InvalidResponse {
                message: format!("{} left a text without a vector", self.source),
            })?;
        checked_vectors(
            vectors,
            texts.len(),
            ExpectedSize::Configured(self.dimensions),
            &self.source,
        )
    }

    /// The pooled (not yet normalised) vectors of one batch, in batch order.
    fn forward(&self, batch: &[(usize, Encoding)]) -> candle_core::Result<Vec<Vec<f32>>> {
        let width = batch
            .iter()
            .map(|(_, encoding)| encoding.len())
            .max()
            .unwrap_or(0);
        if width == 0 {
            // Only a tokenizer without [CLS]/[SEP] post-processing gives an empty text no
            // tokens; such a text has no direction, and candle is not asked about empty shapes.
            return Ok(vec![vec![0.0; self.dimensions]; batch.len()]);
        }
        let cells = batch.len() * width;
        let (mut ids, mut type_ids, mut mask) = (
            Vec::with_capacity(cells),
            Vec::with_capacity(cells),
            Vec::with_capacity(cells),
        );
        for (_, encoding) in batch {
            let padding = width.saturating_sub(encoding.len());
            ids.extend_from_slice(encoding.get_ids());
            ids.extend(std::iter::repeat_n(self.pad_id, padding));
            type_ids.extend_from_slice(encoding.get_type_ids());
            type_ids.extend(std::iter::repeat_n(0u32, padding));
            mask.extend_from_slice(encoding.get_attention_mask());
            mask.extend(std::iter::repeat_n(0u32, padding));
        }
        let shape = (batch.len(), width);
        let ids = Tensor::from_vec(ids, shape, &self.device)?;
        let type_ids = Tensor::from_vec(type_ids, shape, &self.device)?;
        let mask = Tensor::from_vec(mask, shape, &self.device)?;
        let hidden = self.bert.forward(&ids, &type_ids, Some(&mask))?;
        let pooled = match self.pooling {
            Pooling::Mean => {
                let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
                let sums = hidden.broadcast_mul(&mask)?.sum(1)?;
                // Every text has at least [CLS] and [SEP]; the floor only guards the division.
                let counts = mask.sum(1)?.maximum(1e-9f32)?;
                sums.broadcast_div(&counts)?
            }
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
        };
        pooled.to_vec2::<f32>()
    }
}

fn path_error(message: &str) -> LlmError {
    let message = if message.starts_with("embedding.") {
        message.to_owned()
    } else {
        format!("embedding.path: {message}")
    };
    LlmError::Config { message }
}

fn read_json<T: DeserializeOwned>(file: &Path, what: &str) -> Result<T, LlmError> {
    let text = std::fs::read_to_string(file).map_err(|error| {
        path_error(&format!(
            "{} cannot be read: {error} ({DIRECTORY_HINT})",
            file.display()
        ))
    })?;
    serde_json::from_str(&text)
        .map_err(|error| path_error(&format!("{} is not {what}: {error}", file.display())))
}

/// sentence-transformers' `modules.json`: the pipeline a model runs.
#[derive(Debug, Deserialize)]
struct ModuleEntry {
    #[serde(default)]
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

/// The parts of `1_Pooling/config.json` that choose the pooling.
#[derive(Debug, Default, Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
}

/// The pooling the directory's modules ask for: mean when it has no `modules.json` (a plain
/// Hugging Face BERT directory), else what its `Pooling` module's configuration says. A module
/// skald does not run is refused: its vectors would silently differ from the model's.
fn pooling_of(dir: &Path) -> Result<Pooling, LlmError> {
    let modules_file = dir.join("modules.json");
    if !modules_file.exists() {
        return Ok(Pooling::Mean);
    }
    let modules: Vec<ModuleEntry> =
        read_json(&modules_file, "a sentence-transformers modules.json")?;
    let mut pooling_dir: Option<PathBuf> = None;
    for module in &modules {
        let kind = module.kind.rsplit('.').next().unwrap_or(&module.kind);
        match kind {
            "Transformer" | "Normalize" => {}
            "Pooling" => pooling_dir = Some(dir.join(&module.path)),
            other => {
                return Err(path_error(&format!(
                    "{} lists a {other} module; skald runs only Transformer, Pooling and Normalize modules",
                    modules_file.display()
                )));
            }
        }
    }
    let Some(pooling_dir) = pooling_dir else {
        return Ok(Pooling::Mean);
    };
    let pooling_file = pooling_dir.join("config.json");
    if !pooling_file.exists() {
        return Ok(Pooling::Mean);
    }
    let config: PoolingConfig = read_json(&pooling_file, "a sentence-transformers pooling config")?;
    let unsupported = config.pooling_mode_max_tokens
        || config.pooling_mode_mean_sqrt_len_tokens
        || config.pooling_mode_weightedmean_tokens
        || config.pooling_mode_lasttoken;
    match (
        config.pooling_mode_mean_tokens,
        config.pooling_mode_cls_token,
        unsupported,
    ) {
        (true, false, false) => Ok(Pooling::Mean),
        (false, true, false) => Ok(Pooling::Cls),
        (false, false, false) => Ok(Pooling::Mean),
        (_, _, true) | (true, true, false) => Err(path_error(&format!(
            "{} asks for a pooling skald does not run; supported: mean tokens or the CLS token alone",
            pooling_file.display()
        ))),
    }
}

/// `max_seq_length` of `sentence_bert_config.json`, else the model's position limit; never
/// more than the position limit, which an input longer than would overrun.
fn max_sequence_tokens(dir: &Path, config: &BertConfig) -> Result<usize, LlmError> {
    #[derive(Deserialize)]
    struct SentenceBertConfig {
        max_seq_length: Option<usize>,
    }
    let file = dir.join("sentence_bert_config.json");
    let configured = if file.exists() {
        read_json::<SentenceBertConfig>(&file, "a sentence-transformers sentence_bert_config.json")?
            .max_seq_length
    } else {
        None
    };
    let limit = config.max_position_embeddings;
    let tokens = configured.map_or(limit, |tokens| tokens.min(limit));
    if tokens < 2 {
        return Err(path_error(&format!(
            "the model in {} allows {tokens} tokens, too few for [CLS] and [SEP]",
            dir.display()
        )));
    }
    Ok(tokens)
}

/// The tokenizer, truncating at `max_tokens` and padding nothing (batches are padded here, to
/// their own longest text: a file's fixed padding to 128 would waste most of the work), and
/// the id padding uses.
fn load_tokenizer(
    dir: &Path,
    config: &BertConfig,
    max_tokens: usize,
) -> Result<(Tokenizer, u32), LlmError> {
    let file = dir.join(TOKENIZER_FILE);
    if !file.exists() {
        return Err(path_error(&format!(
            "{} has no {TOKENIZER_FILE} ({DIRECTORY_HINT}; a model with only vocab.txt needs its tokenizer.json exported)",
            dir.display()
        )));
    }
    let mut tokenizer = Tokenizer::from_file(&file).map_err(|error| {
        path_error(&format!(
            "{} is not a tokenizers tokenizer.json: {error}",
            file.display()
        ))
    })?;
    let pad_id = match tokenizer.get_padding() {
        Some(padding) => padding.pad_id,
        None => u32::try_from(config.pad_token_id).map_err(|_| {
            path_error(&format!(
                "{} has pad_token_id {}, beyond any vocabulary",
                dir.join(CONFIG_FILE).display(),
                config.pad_token_id
            ))
        })?,
    };
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            ..TruncationParams::default()
        }))
        .map_err(|error| {
            path_error(&format!(
                "{}: cannot truncate at {max_tokens} tokens: {error}",
                file.display()
            ))
        })?;
    Ok((tokenizer, pad_id))
}

fn load_weights(dir: &Path, config: &BertConfig, device: &Device) -> Result<BertModel, LlmError> {
    let file = dir.join(WEIGHTS_FILE);
    if !file.exists() {
        let hint = if dir.join("pytorch_model.bin").exists() {
            "only pytorch_model.bin is there; skald reads safetensors only (convert it, or take the model's model.safetensors)"
        } else {
            DIRECTORY_HINT
        };
        return Err(path_error(&format!(
            "{} has no {WEIGHTS_FILE} ({hint})",
            dir.display()
        )));
    }
    // Read, not memory-mapped: mapping needs `unsafe`, which the workspace forbids.
    let bytes = std::fs::read(&file)
        .map_err(|error| path_error(&format!("{} cannot be read: {error}", file.display())))?;
    let weights =
        VarBuilder::from_buffered_safetensors(bytes, DType::F32, device).map_err(|error| {
            path_error(&format!(
                "{} is not a safetensors file: {error}",
                file.display()
            ))
        })?;
    BertModel::load(weights, config).map_err(|error| {
        path_error(&format!(
            "{} does not hold the BERT weights config.json describes: {error}",
            file.display()
        ))
    })
}
