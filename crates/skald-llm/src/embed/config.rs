//! The `[embedding]` table of `skald.toml`: which embedder turns text into vectors for memory
//! search, checked when it is read so that a typo fails at start-up with a message naming the
//! field. No table means no embedder: everything still works, search is full-text only.
//!
//! An OpenAI-compatible `/embeddings` endpoint (OpenAI, Azure OpenAI, Ollama, vLLM, llama.cpp,
//! text-embeddings-inference, most gateways):
//!
//! ```toml
//! [embedding]
//! kind = "openai"
//! base_url = "http://localhost:11434/v1"   # default: https://api.openai.com/v1
//! model = "nomic-embed-text"
//! api_key_env = "OPENAI_API_KEY"           # optional: local servers need no key
//! dimensions = 768                         # optional: every answer is checked against it
//! batch_size = 64                          # texts per request
//! ```
//!
//! A sentence-transformers model directory run in-process (the `local-embeddings` feature):
//!
//! ```toml
//! [embedding]
//! kind = "local"
//! path = "/models/all-MiniLM-L6-v2"        # config.json, tokenizer.json, model.safetensors
//! batch_size = 32
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

use crate::config::{DEFAULT_CONNECT_TIMEOUT_SECS, ProviderConfig, ProviderKind};
use crate::error::LlmError;

/// Texts per request (or per forward pass) when the configuration does not say.
pub const DEFAULT_EMBEDDING_BATCH_SIZE: usize = 64;
/// Longest time for one embeddings request when the configuration does not say: an embedding
/// call sits on a memory write or a recall, so it should fail fast rather than hang a turn.
pub const DEFAULT_EMBEDDING_TIMEOUT_SECS: u64 = 60;

/// Which kind of embedder a configuration describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmbedderKind {
    /// An OpenAI-compatible `POST {base_url}/embeddings`.
    OpenAi,
    /// A sentence-transformers model directory run in-process.
    Local,
}

impl EmbedderKind {
    /// The name used in configuration files.
    pub fn name(self) -> &'static str {
        match self {
            EmbedderKind::OpenAi => "openai",
            EmbedderKind::Local => "local",
        }
    }

    /// Reads a kind as configuration files spell it (case-insensitive; `openai-compatible` is
    /// accepted for `openai`).
    pub fn parse(raw: &str) -> Result<EmbedderKind, LlmError> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "openai" | "openai-compatible" | "openai_compatible" => Ok(EmbedderKind::OpenAi),
            "local" => Ok(EmbedderKind::Local),
            _ => Err(LlmError::Config {
                message: format!(
                    "kind: unknown embedder kind {raw:?}, expected \"openai\" (any /v1/embeddings server) or \"local\" (a sentence-transformers model directory)"
                ),
            }),
        }
    }

    fn other(self) -> EmbedderKind {
        match self {
            EmbedderKind::OpenAi => EmbedderKind::Local,
            EmbedderKind::Local => EmbedderKind::OpenAi,
        }
    }
}

impl fmt::Display for EmbedderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An OpenAI-compatible embeddings endpoint, validated. `Debug` prints header names only.
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAiEmbeddingConfig {
    /// The API root without a trailing slash: requests go to `{base_url}/embeddings`.
    pub base_url: String,
    /// The embedding model sent with every request, as the server spells it.
    pub model: String,
    /// The environment variable holding the key; `None` sends no key.
    pub api_key_env: Option<String>,
    /// The vector size the model answers with. Every answer is checked against it; when `None`
    /// the size of the first answer is taken and later ones are checked against that.
    pub dimensions: Option<usize>,
    /// Send `dimensions` in the request, asking the model to shorten its vectors (OpenAI's
    /// `text-embedding-3-*` can; most other models reject the field).
    pub request_dimensions: bool,
    /// Texts per request.
    pub batch_size: usize,
    /// Longest time for one attempt of one request.
    pub timeout_secs: u64,
    /// Longest time to open the connection.
    pub connect_timeout_secs: u64,
    /// Extra HTTP headers sent with every request (a gateway's routing header…).
    pub headers: BTreeMap<String, String>,
}

impl fmt::Debug for OpenAiEmbeddingConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEmbeddingConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key_env", &self.api_key_env)
            .field("dimensions", &self.dimensions)
            .field("request_dimensions", &self.request_dimensions)
            .field("batch_size", &self.batch_size)
            .field("timeout_secs", &self.timeout_secs)
            .field("connect_timeout_secs", &self.connect_timeout_secs)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl OpenAiEmbeddingConfig {
    /// A configuration with every default: OpenAI's public endpoint, no key, no fixed size.
    pub fn new(model: impl Into<String>) -> OpenAiEmbeddingConfig {
        OpenAiEmbeddingConfig {
            base_url: ProviderKind::OpenAi.default_base_url().to_owned(),
            model: model.into(),
            api_key_env: None,
            dimensions: None,
            request_dimensions: false,
            batch_size: DEFAULT_EMBEDDING_BATCH_SIZE,
            timeout_secs: DEFAULT_EMBEDDING_TIMEOUT_SECS,
            connect_timeout_secs: DEFAULT_CONNECT_TIMEOUT_SECS,
            headers: BTreeMap::new(),
        }
    }

    /// The endpoint as a chat provider configuration, so the embedder shares the chat clients'
    /// HTTP transport, validation and key lookup.
    pub(crate) fn provider_config(&self) -> ProviderConfig {
        ProviderConfig {
            base_url: self.base_url.clone(),
            api_key_env: self.api_key_env.clone(),
            timeout_secs: self.timeout_secs,
            connect_timeout_secs: self.connect_timeout_secs,
            headers: self.headers.clone(),
            ..ProviderConfig::new(ProviderKind::OpenAi, self.model.clone())
        }
    }

    /// Checks every field; the error names the first bad one and what was expected.
    pub fn validate(&self) -> Result<(), LlmError> {
        self.provider_config().validate()?;
        validate_sizes(self.dimensions, self.batch_size)?;
        if self.request_dimensions && self.dimensions.is_none() {
            return Err(LlmError::Config {
                message: "request_dimensions: needs dimensions, the size to ask for".to_owned(),
            });
        }
        Ok(())
    }

    /// The API key, from [`OpenAiEmbeddingConfig::api_key_env`] in the environment (an unset
    /// or empty variable is an error naming it), or `None` when no variable is named.
    pub fn resolve_api_key(&self) -> Result<Option<String>, LlmError> {
        self.provider_config().resolve_api_key()
    }
}

/// A sentence-transformers model directory run in-process, validated (the directory itself is
/// read when the model is loaded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalEmbeddingConfig {
    /// The directory holding `config.json`, `tokenizer.json` and `model.safetensors` (and,
    /// optionally, sentence-transformers' `modules.json`, `sentence_bert_config.json` and
    /// `1_Pooling/config.json`).
    pub path: PathBuf,
    /// The name the embedder reports; the directory's name when `None`.
    pub model: Option<String>,
    /// The vector size expected; loading fails when the model's differs.
    pub dimensions: Option<usize>,
    /// Texts per forward pass.
    pub batch_size: usize,
}

impl LocalEmbeddingConfig {
    /// A configuration for the model in `path`, with every default.
    pub fn new(path: impl Into<PathBuf>) -> LocalEmbeddingConfig {
        LocalEmbeddingConfig {
            path: path.into(),
            model: None,
            dimensions: None,
            batch_size: DEFAULT_EMBEDDING_BATCH_SIZE,
        }
    }

    /// Checks every field; the error names the first bad one and what was expected.
    pub fn validate(&self) -> Result<(), LlmError> {
        if self.path.as_os_str().is_empty() {
            return Err(LlmError::Config {
                message: "path: must name the model directory".to_owned(),
            });
        }
        if self
            .model
            .as_ref()
            .is_some_and(|name| name.trim().is_empty())
        {
            return Err(LlmError::Config {
                message: "model: must not be empty when given".to_owned(),
            });
        }
        validate_sizes(self.dimensions, self.batch_size)
    }

    /// The name the embedder reports: `model`, else the directory's name, else its path.
    pub fn display_name(&self) -> String {
        self.model.clone().unwrap_or_else(|| {
            self.path.file_name().map_or_else(
                || self.path.display().to_string(),
                |name| name.to_string_lossy().into_owned(),
            )
        })
    }
}

fn validate_sizes(dimensions: Option<usize>, batch_size: usize) -> Result<(), LlmError> {
    if dimensions == Some(0) {
        return Err(LlmError::Config {
            message: "dimensions: must be at least 1 when given".to_owned(),
        });
    }
    if batch_size == 0 {
        return Err(LlmError::Config {
            message: "batch_size: must be at least 1".to_owned(),
        });
    }
    Ok(())
}

/// The `[embedding]` table: one embedder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmbeddingConfig {
    /// `kind = "openai"`: an OpenAI-compatible `/v1/embeddings` server.
    OpenAi(OpenAiEmbeddingConfig),
    /// `kind = "local"`: a sentence-transformers directory run in-process (needs the
    /// `local-embeddings` feature to be usable).
    Local(LocalEmbeddingConfig),
}

impl EmbeddingConfig {
    /// Which kind of embedder this is.
    pub fn kind(&self) -> EmbedderKind {
        match self {
            EmbeddingConfig::OpenAi(_) => EmbedderKind::OpenAi,
            EmbeddingConfig::Local(_) => EmbedderKind::Local,
        }
    }

    /// The configured vector size, when given.
    pub fn dimensions(&self) -> Option<usize> {
        match self {
            EmbeddingConfig::OpenAi(config) => config.dimensions,
            EmbeddingConfig::Local(config) => config.dimensions,
        }
    }

    /// Texts per request or forward pass.
    pub fn batch_size(&self) -> usize {
        match self {
            EmbeddingConfig::OpenAi(config) => config.batch_size,
            EmbeddingConfig::Local(config) => config.batch_size,
        }
    }

    /// Checks every field (see each kind's `validate`).
    pub fn validate(&self) -> Result<(), LlmError> {
        match self {
            EmbeddingConfig::OpenAi(config) => config.validate(),
            EmbeddingConfig::Local(config) => config.validate(),
        }
    }

    /// Reads the `[embedding]` table of a whole `skald.toml`; `None` when there is none (no
    /// embedder: memory search is full-text only).
    pub fn from_toml_str(skald_toml: &str) -> Result<Option<EmbeddingConfig>, LlmError> {
        let document: toml::Table =
            toml::from_str(skald_toml).map_err(|error| LlmError::Config {
                message: format!("skald.toml is not valid TOML: {error}"),
            })?;
        match document.get("embedding") {
            None => Ok(None),
            Some(toml::Value::Table(table)) => {
                let raw: RawEmbeddingConfig = toml::Value::Table(table.clone())
                    .try_into()
                    .map_err(|error: toml::de::Error| LlmError::Config {
                        message: format!("{TABLE}: {}", error.message()),
                    })?;
                EmbeddingConfig::from_raw(raw).map(Some)
            }
            Some(other) => Err(LlmError::Config {
                message: format!("{TABLE}: expected a table, found a {}", other.type_str()),
            }),
        }
    }

    fn from_raw(raw: RawEmbeddingConfig) -> Result<EmbeddingConfig, LlmError> {
        let in_table = |error: LlmError| {
            if let LlmError::Config { message } = error {
                LlmError::Config {
                    message: format!("{TABLE}.{message}"),
                }
            } else {
                error
            }
        };
        let kind_name = raw.kind.as_deref().ok_or_else(|| LlmError::Config {
            message: format!("{TABLE}.kind: missing, expected \"openai\" or \"local\""),
        })?;
        let kind = EmbedderKind::parse(kind_name).map_err(in_table)?;
        let not_for = |field: &str, given: bool| {
            if given {
                Err(LlmError::Config {
                    message: format!(
                        "{TABLE}.{field}: does not apply to kind = \"{kind}\", only to kind = \"{}\"",
                        kind.other()
                    ),
                })
            } else {
                Ok(())
            }
        };
        let config = match kind {
            EmbedderKind::OpenAi => {
                not_for("path", raw.path.is_some())?;
                let model = raw.model.ok_or_else(|| LlmError::Config {
                    message: format!(
                        "{TABLE}.model: missing, expected the embedding model's name (for example \"text-embedding-3-small\")"
                    ),
                })?;
                let defaults = OpenAiEmbeddingConfig::new(model);
                EmbeddingConfig::OpenAi(OpenAiEmbeddingConfig {
                    base_url: raw.base_url.map_or(defaults.base_url.clone(), |url| {
                        url.trim().trim_end_matches('/').to_owned()
                    }),
                    api_key_env: raw.api_key_env,
                    dimensions: raw.dimensions,
                    request_dimensions: raw.request_dimensions.unwrap_or(false),
                    batch_size: raw.batch_size.unwrap_or(defaults.batch_size),
                    timeout_secs: raw.timeout_secs.unwrap_or(defaults.timeout_secs),
                    connect_timeout_secs: raw
                        .connect_timeout_secs
                        .unwrap_or(defaults.connect_timeout_secs),
                    headers: raw.headers.unwrap_or_default(),
                    ..defaults
                })
            }
            EmbedderKind::Local => {
                not_for("base_url", raw.base_url.is_some())?;
                not_for("api_key_env", raw.api_key_env.is_some())?;
                not_for("request_dimensions", raw.request_dimensions.is_some())?;
                not_for("timeout_secs", raw.timeout_secs.is_some())?;
                not_for("connect_timeout_secs", raw.connect_timeout_secs.is_some())?;
                not_for("headers", raw.headers.is_some())?;
                let path = raw.path.ok_or_else(|| LlmError::Config {
                    message: format!(
                        "{TABLE}.path: missing, expected the sentence-transformers model directory"
                    ),
                })?;
                EmbeddingConfig::Local(LocalEmbeddingConfig {
                    path,
                    model: raw.model,
                    dimensions: raw.dimensions,
                    batch_size: raw.batch_size.unwrap_or(DEFAULT_EMBEDDING_BATCH_SIZE),
                })
            }
        };
        config.validate().map_err(in_table)?;
        Ok(config)
    }
}

const TABLE: &str = "embedding";

/// The fields of `[embedding]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEmbeddingConfig {
    kind: Option<String>,
    base_url: Option<String>,
    model: Option<String>,
    api_key_env: Option<String>,
    dimensions: Option<usize>,
    request_dimensions: Option<bool>,
    batch_size: Option<usize>,
    path: Option<PathBuf>,
    timeout_secs: Option<u64>,
    connect_timeout_secs: Option<u64>,
    headers: Option<BTreeMap<String, String>>,
}

impl<'de> Deserialize<'de> for EmbeddingConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = RawEmbeddingConfig::deserialize(deserializer)?;
        EmbeddingConfig::from_raw(raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn config_error(toml: &str) -> String {
        match EmbeddingConfig::from_toml_str(toml) {
            Err(LlmError::Config { message }) => message,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn no_embedding_table_means_no_embedder() {
        assert_eq!(
            EmbeddingConfig::from_toml_str("[llm]\nkind = \"openai\"\nmodel = \"m\"\n").unwrap(),
            None
        );
    }

    #[test]
    fn an_openai_table_gets_the_defaults() {
        let config = EmbeddingConfig::from_toml_str(
            "[embedding]\nkind = \"openai\"\nmodel = \"text-embedding-3-small\"\n",
        )
        .unwrap()
        .unwrap();
        let EmbeddingConfig::OpenAi(openai) = &config else {
            panic!("expected an OpenAI configuration, got {config:?}");
        };
        assert_eq!(openai.base_url, "https://api.openai.com/v1");
        assert_eq!(openai.batch_size, DEFAULT_EMBEDDING_BATCH_SIZE);
        assert_eq!(openai.timeout_secs, DEFAULT_EMBEDDING_TIMEOUT_SECS);
        assert_eq!(openai.dimensions, None);
        assert!(!openai.request_dimensions);
        assert_eq!(config.kind(), EmbedderKind::OpenAi);
    }

    #[test]
    fn every_openai_field_is_read() {
        let config = EmbeddingConfig::from_toml_str(
            r#"
[embedding]
kind = "OpenAI-compatible"
base_url = "http://localhost:11434/v1/"
model = "nomic-embed-text"
api_key_env = "EMBED_KEY"
dimensions = 768
request_dimensions = true
batch_size = 16
timeout_secs = 5
connect_timeout_secs = 2
headers = { "x-route" = "embed" }
"#,
        )
        .unwrap()
        .unwrap();
        let expected = OpenAiEmbeddingConfig {
            base_url: "http://localhost:11434/v1".to_owned(),
            model: "nomic-embed-text".to_owned(),
            api_key_env: Some("EMBED_KEY".to_owned()),
            dimensions: Some(768),
            request_dimensions: true,
            batch_size: 16,
            timeout_secs: 5,
            connect_timeout_secs: 2,
            headers: BTreeMap::from([("x-route".to_owned(), "embed".to_owned())]),
        };
        assert_eq!(config, EmbeddingConfig::OpenAi(expected));
        assert_eq!(config.dimensions(), Some(768));
        assert_eq!(config.batch_size(), 16);
    }

    #[test]
    fn a_local_table_names_its_directory() {
        let config = EmbeddingConfig::from_toml_str(
            "[embedding]\nkind = \"local\"\npath = \"/models/all-MiniLM-L6-v2\"\nbatch_size = 8\n",
        )
        .unwrap()
        .unwrap();
        let EmbeddingConfig::Local(local) = &config else {
            panic!("expected a local configuration, got {config:?}");
        };
        assert_eq!(local.path, PathBuf::from("/models/all-MiniLM-L6-v2"));
        assert_eq!(local.batch_size, 8);
        assert_eq!(local.display_name(), "all-MiniLM-L6-v2");
        let named = LocalEmbeddingConfig {
            model: Some("minilm".to_owned()),
            ..local.clone()
        };
        assert_eq!(named.display_name(), "minilm");
    }

    #[test]
    fn missing_fields_are_named() {
        assert!(
            config_error("[embedding]\nmodel = \"m\"\n").starts_with("embedding.kind: missing")
        );
        assert!(
            config_error("[embedding]\nkind = \"openai\"\n")
                .starts_with("embedding.model: missing")
        );
        assert!(
            config_error("[embedding]\nkind = \"local\"\n").starts_with("embedding.path: missing")
        );
    }

    #[test]
    fn an_unknown_kind_is_named() {
        let message = config_error("[embedding]\nkind = \"cohere\"\nmodel = \"m\"\n");
        assert!(
            message.starts_with("embedding.kind: unknown embedder kind \"cohere\""),
            "{message}"
        );
    }

    #[test]
    fn fields_of_the_other_kind_are_refused() {
        let message = config_error(
            "[embedding]\nkind = \"openai\"\nmodel = \"m\"\npath = \"/models/minilm\"\n",
        );
        assert!(
            message.starts_with("embedding.path: does not apply to kind = \"openai\""),
            "{message}"
        );
        let message = config_error(
            "[embedding]\nkind = \"local\"\npath = \"/m\"\nbase_url = \"http://h/v1\"\n",
        );
        assert!(
            message.starts_with("embedding.base_url: does not apply to kind = \"local\""),
            "{message}"
        );
    }

    #[test]
    fn bad_values_are_refused_with_the_field_named() {
        assert_eq!(
            config_error("[embedding]\nkind = \"openai\"\nmodel = \"m\"\nbatch_size = 0\n"),
            "embedding.batch_size: must be at least 1"
        );
        assert_eq!(
            config_error("[embedding]\nkind = \"local\"\npath = \"/m\"\ndimensions = 0\n"),
            "embedding.dimensions: must be at least 1 when given"
        );
        assert!(
            config_error("[embedding]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"nope\"\n")
                .starts_with("embedding.base_url:")
        );
        assert_eq!(
            config_error(
                "[embedding]\nkind = \"openai\"\nmodel = \"m\"\nrequest_dimensions = true\n"
            ),
            "embedding.request_dimensions: needs dimensions, the size to ask for"
        );
        assert_eq!(
            config_error("[embedding]\nkind = \"local\"\npath = \"\"\n"),
            "embedding.path: must name the model directory"
        );
    }

    #[test]
    fn a_typo_in_a_field_name_is_an_error() {
        let message = config_error("[embedding]\nkind = \"openai\"\nmodel = \"m\"\nbatch = 5\n");
        assert!(message.contains("unknown field `batch`"), "{message}");
        let message = config_error("embedding = 3\n");
        assert_eq!(message, "embedding: expected a table, found a integer");
    }

    #[test]
    fn embedding_config_embeds_in_a_larger_config() {
        #[derive(Deserialize)]
        struct SkaldToml {
            embedding: Option<EmbeddingConfig>,
        }
        let parsed: SkaldToml =
            toml::from_str("[embedding]\nkind = \"local\"\npath = \"/m\"\n").unwrap();
        assert_eq!(parsed.embedding.unwrap().kind(), EmbedderKind::Local);
        let parsed: SkaldToml = toml::from_str("").unwrap();
        assert!(parsed.embedding.is_none());
        let error = toml::from_str::<SkaldToml>(
            "[embedding]\nkind = \"openai\"\nmodel = \"m\"\nbatch_size = 0\n",
        )
        .err()
        .unwrap();
        assert!(
            error.to_string().contains("embedding.batch_size"),
            "{error}"
        );
    }

    #[test]
    fn the_key_variable_is_resolved_like_the_chat_models() {
        let mut config = OpenAiEmbeddingConfig::new("m");
        assert_eq!(config.resolve_api_key().unwrap(), None);
        config.api_key_env = Some("SKALD_TEST_SURELY_UNSET_EMBED_KEY".to_owned());
        let LlmError::Config { message } = config.resolve_api_key().unwrap_err() else {
            panic!("expected a config error");
        };
        assert!(
            message.contains("SKALD_TEST_SURELY_UNSET_EMBED_KEY"),
            "{message}"
        );
    }
}
