//! Provider configuration: the `[llm]` table of `skald.toml` (and its optional `[llm.summary]`
//! table for a cheaper summary model), checked when it is read so that a typo fails at start-up
//! with a message naming the field, not at the first model call.
//!
//! ```toml
//! [llm]
//! kind = "anthropic"                 # or "openai" (any Chat Completions server)
//! model = "claude-sonnet-4-5"
//! api_key_env = "ANTHROPIC_API_KEY"  # the key itself never sits in the file
//! context_window_tokens = 200000
//!
//! [llm.summary]                      # every field not given is the chat model's
//! model = "claude-haiku-4-5"
//! max_output_tokens = 2048
//! ```

use std::collections::BTreeMap;
use std::fmt;

use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::LlmError;

/// Which wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// OpenAI Chat Completions (OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp, DeepSeek…).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl ProviderKind {
    /// The name used in configuration files.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    /// The provider's public endpoint, used when `base_url` is not given.
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "https://api.openai.com/v1",
            ProviderKind::Anthropic => "https://api.anthropic.com",
        }
    }

    /// Reads a kind as configuration files spell it (case-insensitive; `openai-compatible` is
    /// accepted for `openai`).
    pub fn parse(raw: &str) -> Result<ProviderKind, LlmError> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "openai" | "openai-compatible" | "openai_compatible" => Ok(ProviderKind::OpenAi),
            "anthropic" => Ok(ProviderKind::Anthropic),
            _ => Err(LlmError::Config {
                message: format!(
                    "kind: unknown provider kind {raw:?}, expected \"openai\" (any Chat Completions server) or \"anthropic\""
                ),
            }),
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Overall request timeout when the configuration does not give one.
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;
/// Connection timeout when the configuration does not give one.
pub const DEFAULT_CONNECT_TIMEOUT_SECS: u64 = 10;
/// Output limit when the configuration does not give one.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4_096;

/// One provider endpoint and model, validated.
///
/// Build it from TOML (see the module docs), or by hand and then call
/// [`ProviderConfig::validate`]. `Debug` never prints the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    /// Which API the endpoint speaks, and so which client serves it.
    pub kind: ProviderKind,
    /// The API root without a trailing slash: requests go to `{base_url}/chat/completions`
    /// (OpenAI) or `{base_url}/v1/messages` (Anthropic).
    pub base_url: String,
    /// The model name sent with every request, as the provider spells it.
    pub model: String,
    /// The environment variable holding the key (the recommended way).
    pub api_key_env: Option<String>,
    /// The key itself. Discouraged: configuration files get committed and shared.
    pub api_key: Option<String>,
    /// Longest time for one attempt, until the whole answer arrived.
    pub timeout_secs: u64,
    /// Longest time to open the connection.
    pub connect_timeout_secs: u64,
    /// Output limit sent when a request does not set its own.
    pub max_output_tokens: u32,
    /// The model's context window, when known; the engine's budgets use it.
    pub context_window_tokens: Option<u64>,
    /// Extra HTTP headers sent with every request (`anthropic-beta`, `OpenAI-Organization`,
    /// a gateway's routing header…).
    pub headers: BTreeMap<String, String>,
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key_env", &self.api_key_env)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout_secs", &self.timeout_secs)
            .field("connect_timeout_secs", &self.connect_timeout_secs)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("context_window_tokens", &self.context_window_tokens)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ProviderConfig {
    /// A configuration with every default: the kind's public endpoint, no key, default timeouts.
    pub fn new(kind: ProviderKind, model: impl Into<String>) -> ProviderConfig {
        ProviderConfig {
            kind,
            base_url: kind.default_base_url().to_owned(),
            model: model.into(),
            api_key_env: None,
            api_key: None,
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            connect_timeout_secs: DEFAULT_CONNECT_TIMEOUT_SECS,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            context_window_tokens: None,
            headers: BTreeMap::new(),
        }
    }

    /// Checks every field; the error names the first bad one and what was expected.
    pub fn validate(&self) -> Result<(), LlmError> {
        let config = |message: String| Err(LlmError::Config { message });
        match reqwest::Url::parse(&self.base_url) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => {}
            Ok(url) => {
                return config(format!(
                    "base_url: {:?} must be an http:// or https:// URL with a host (scheme was {:?})",
                    self.base_url,
                    url.scheme()
                ));
            }
            Err(error) => {
                return config(format!(
                    "base_url: {:?} is not a valid URL ({error})",
                    self.base_url
                ));
            }
        }
        if self.model.trim().is_empty() {
            return config("model: must name the model (for example \"gpt-4o\")".to_owned());
        }
        if self.timeout_secs == 0 {
            return config("timeout_secs: must be at least 1".to_owned());
        }
        if self.connect_timeout_secs == 0 {
            return config("connect_timeout_secs: must be at least 1".to_owned());
        }
        if self.max_output_tokens == 0 {
            return config("max_output_tokens: must be at least 1".to_owned());
        }
        if self.context_window_tokens == Some(0) {
            return config("context_window_tokens: must be at least 1 when given".to_owned());
        }
        if let Some(name) = &self.api_key_env {
            if name.trim().is_empty() || name.contains('=') || name.contains('\0') {
                return config(format!(
                    "api_key_env: {name:?} is not an environment variable name"
                ));
            }
        }
        if let Some(key) = &self.api_key {
            if HeaderValue::from_str(key).is_err() {
                return config(
                    "api_key: contains characters an HTTP header cannot carry".to_owned(),
                );
            }
        }
        for (name, value) in &self.headers {
            if HeaderName::from_bytes(name.as_bytes()).is_err() {
                return config(format!("headers: {name:?} is not a valid HTTP header name"));
            }
            if HeaderValue::from_str(value).is_err() {
                return config(format!(
                    "headers.{name}: the value contains characters an HTTP header cannot carry"
                ));
            }
        }
        Ok(())
    }

    /// The API key: read from [`ProviderConfig::api_key_env`] through `lookup` (the environment,
    /// in [`ProviderConfig::resolve_api_key`]), else [`ProviderConfig::api_key`], else `None`
    /// (local servers such as Ollama need none). A named variable that is unset or empty is an
    /// error naming it: silently sending no key would only fail later as a 401.
    pub fn resolve_api_key_with(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<String>, LlmError> {
        if let Some(name) = &self.api_key_env {
            return match lookup(name) {
                Some(key) if !key.trim().is_empty() => {
                    if HeaderValue::from_str(key.trim()).is_err() {
                        return Err(LlmError::Config {
                            message: format!(
                                "the environment variable {name} (api_key_env) holds characters an HTTP header cannot carry"
                            ),
                        });
                    }
                    Ok(Some(key.trim().to_owned()))
                }
                Some(_) | None => Err(LlmError::Config {
                    message: format!(
                        "the environment variable {name} (api_key_env for the {} model {:?}) is not set or empty; export it with the API key",
                        self.kind, self.model
                    ),
                }),
            };
        }
        Ok(self
            .api_key
            .as_ref()
            .map(|key| key.trim().to_owned())
            .filter(|key| !key.is_empty()))
    }

    /// [`ProviderConfig::resolve_api_key_with`] over the process environment.
    pub fn resolve_api_key(&self) -> Result<Option<String>, LlmError> {
        self.resolve_api_key_with(|name| std::env::var(name).ok())
    }

    /// Builds and validates a configuration from a table's fields. `table` names the table in
    /// error messages (`llm`, `llm.summary`).
    fn from_raw(raw: RawProviderConfig, table: &str) -> Result<ProviderConfig, LlmError> {
        let in_table = |error: LlmError| {
            if let LlmError::Config { message } = error {
                LlmError::Config {
                    message: format!("{table}.{message}"),
                }
            } else {
                error
            }
        };
        let kind_name = raw.kind.ok_or_else(|| LlmError::Config {
            message: format!("{table}.kind: missing, expected \"openai\" or \"anthropic\""),
        })?;
        let kind = ProviderKind::parse(&kind_name).map_err(in_table)?;
        let model = raw.model.ok_or_else(|| LlmError::Config {
            message: format!("{table}.model: missing, expected the model's name"),
        })?;
        let defaults = ProviderConfig::new(kind, model);
        let config = ProviderConfig {
            base_url: raw.base_url.map_or(defaults.base_url.clone(), |url| {
                url.trim().trim_end_matches('/').to_owned()
            }),
            api_key_env: raw.api_key_env,
            api_key: raw.api_key,
            timeout_secs: raw.timeout_secs.unwrap_or(defaults.timeout_secs),
            connect_timeout_secs: raw
                .connect_timeout_secs
                .unwrap_or(defaults.connect_timeout_secs),
            max_output_tokens: raw.max_output_tokens.unwrap_or(defaults.max_output_tokens),
            context_window_tokens: raw.context_window_tokens,
            headers: raw.headers.unwrap_or_default(),
            ..defaults
        };
        config.validate().map_err(in_table)?;
        Ok(config)
    }
}

/// The fields of a provider table as written; every one optional so that `[llm.summary]` can
/// give only what differs from `[llm]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProviderConfig {
    kind: Option<String>,
    base_url: Option<String>,
    model: Option<String>,
    api_key_env: Option<String>,
    api_key: Option<String>,
    timeout_secs: Option<u64>,
    connect_timeout_secs: Option<u64>,
    max_output_tokens: Option<u32>,
    context_window_tokens: Option<u64>,
    headers: Option<BTreeMap<String, String>>,
}

impl RawProviderConfig {
    /// `self` with every field it does not give taken from `base`. A summary model on another
    /// provider does not inherit the chat model's key or headers: they belong to that provider.
    fn or(self, base: &RawProviderConfig) -> RawProviderConfig {
        let same_provider = self.kind.is_none() && self.base_url.is_none();
        let key_given = self.api_key_env.is_some() || self.api_key.is_some();
        let (api_key_env, api_key) = if key_given || !same_provider {
            (self.api_key_env, self.api_key)
        } else {
            (base.api_key_env.clone(), base.api_key.clone())
        };
        RawProviderConfig {
            kind: self.kind.or_else(|| base.kind.clone()),
            base_url: self.base_url.or_else(|| base.base_url.clone()),
            model: self.model.or_else(|| base.model.clone()),
            api_key_env,
            api_key,
            timeout_secs: self.timeout_secs.or(base.timeout_secs),
            connect_timeout_secs: self.connect_timeout_secs.or(base.connect_timeout_secs),
            max_output_tokens: self.max_output_tokens.or(base.max_output_tokens),
            context_window_tokens: self.context_window_tokens.or(base.context_window_tokens),
            headers: match (self.headers, same_provider) {
                (Some(headers), _) => Some(headers),
                (None, true) => base.headers.clone(),
                (None, false) => None,
            },
        }
    }
}

/// The `[llm]` table: the chat model, and the model that writes compaction summaries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LlmConfig {
    /// `[llm]` itself; `None` when the table is absent or only holds `[llm.summary]`.
    pub chat: Option<ProviderConfig>,
    /// `[llm.summary]`, with the fields it does not give taken from `[llm]` (except the key and
    /// headers when it names another provider).
    pub summary: Option<ProviderConfig>,
}

impl LlmConfig {
    /// The model that writes summaries: `[llm.summary]`, else the chat model.
    pub fn summary_or_chat(&self) -> Option<&ProviderConfig> {
        self.summary.as_ref().or(self.chat.as_ref())
    }

    /// Reads the `[llm]` table of a whole `skald.toml`; a file without one gives the empty
    /// configuration (no LLM: the engine uses its no-LLM implementations).
    pub fn from_toml_str(skald_toml: &str) -> Result<LlmConfig, LlmError> {
        let document: toml::Table =
            toml::from_str(skald_toml).map_err(|error| LlmError::Config {
                message: format!("skald.toml is not valid TOML: {error}"),
            })?;
        match document.get("llm") {
            None => Ok(LlmConfig::default()),
            Some(toml::Value::Table(table)) => {
                let value = serde_json::to_value(table).map_err(|error| LlmError::Config {
                    message: format!("llm: {error}"),
                })?;
                LlmConfig::from_table(value)
            }
            Some(other) => Err(LlmError::Config {
                message: format!("llm: expected a table, found a {}", other.type_str()),
            }),
        }
    }

    /// Reads the `[llm]` table given as a JSON-like value (what `serde` hands over).
    fn from_table(value: Value) -> Result<LlmConfig, LlmError> {
        let Value::Object(mut fields) = value else {
            return Err(LlmError::Config {
                message: "llm: expected a table".to_owned(),
            });
        };
        let summary = fields.remove("summary");
        let chat_raw = raw_from(Value::Object(fields), "llm")?;
        // Any field at all means the table meant to configure a chat model.
        let chat_given = chat_raw != RawProviderConfig::default();
        let chat = chat_given
            .then(|| ProviderConfig::from_raw(chat_raw.clone(), "llm"))
            .transpose()?;
        let summary = match summary {
            None => None,
            Some(value @ Value::Object(_)) => {
                let raw = raw_from(value, "llm.summary")?.or(&chat_raw);
                Some(ProviderConfig::from_raw(raw, "llm.summary")?)
            }
            Some(_) => {
                return Err(LlmError::Config {
                    message: "llm.summary: expected a table".to_owned(),
                });
            }
        };
        Ok(LlmConfig { chat, summary })
    }
}

fn raw_from(value: Value, table: &str) -> Result<RawProviderConfig, LlmError> {
    RawProviderConfig::deserialize(value).map_err(|error| LlmError::Config {
        message: format!("{table}: {error}"),
    })
}

impl<'de> Deserialize<'de> for LlmConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let fields = Map::<String, Value>::deserialize(deserializer)?;
        LlmConfig::from_table(Value::Object(fields)).map_err(serde::de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for ProviderConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = RawProviderConfig::deserialize(deserializer)?;
        ProviderConfig::from_raw(raw, "llm").map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn config_error(toml: &str) -> String {
        match LlmConfig::from_toml_str(toml) {
            Err(LlmError::Config { message }) => message,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn a_minimal_table_gets_the_kinds_defaults() {
        let config = LlmConfig::from_toml_str(
            "[llm]\nkind = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n",
        )
        .unwrap();
        let chat = config.chat.unwrap();
        assert_eq!(chat.kind, ProviderKind::Anthropic);
        assert_eq!(chat.base_url, "https://api.anthropic.com");
        assert_eq!(chat.timeout_secs, DEFAULT_TIMEOUT_SECS);
        assert_eq!(chat.max_output_tokens, DEFAULT_MAX_OUTPUT_TOKENS);
        assert!(config.summary.is_none());
    }

    #[test]
    fn no_llm_table_means_no_model() {
        let config = LlmConfig::from_toml_str("[policy]\npreset = \"skald\"\n").unwrap();
        assert_eq!(config, LlmConfig::default());
        assert!(config.summary_or_chat().is_none());
    }

    #[test]
    fn summary_inherits_what_it_does_not_give() {
        let config = LlmConfig::from_toml_str(
            r#"
[llm]
kind = "openai"
base_url = "http://localhost:11434/v1/"
model = "qwen3:32b"
api_key_env = "OLLAMA_KEY"
timeout_secs = 60
headers = { "x-route" = "a" }

[llm.summary]
model = "qwen3:8b"
max_output_tokens = 1024
"#,
        )
        .unwrap();
        let chat = config.chat.clone().unwrap();
        assert_eq!(chat.base_url, "http://localhost:11434/v1");
        let summary = config.summary_or_chat().unwrap();
        assert_eq!(summary.model, "qwen3:8b");
        assert_eq!(summary.base_url, "http://localhost:11434/v1");
        assert_eq!(summary.api_key_env.as_deref(), Some("OLLAMA_KEY"));
        assert_eq!(summary.timeout_secs, 60);
        assert_eq!(summary.max_output_tokens, 1024);
        assert_eq!(
            summary.headers.get("x-route").map(String::as_str),
            Some("a")
        );
    }

    #[test]
    fn a_summary_on_another_provider_does_not_inherit_the_key() {
        let config = LlmConfig::from_toml_str(
            r#"
[llm]
kind = "openai"
model = "gpt-4o"
api_key_env = "OPENAI_API_KEY"

[llm.summary]
kind = "anthropic"
model = "claude-haiku-4-5"
"#,
        )
        .unwrap();
        let summary = config.summary.unwrap();
        assert_eq!(summary.kind, ProviderKind::Anthropic);
        assert_eq!(summary.base_url, "https://api.anthropic.com");
        assert_eq!(summary.api_key_env, None);
    }

    #[test]
    fn summary_alone_is_allowed() {
        let config =
            LlmConfig::from_toml_str("[llm.summary]\nkind = \"openai\"\nmodel = \"gpt-4o-mini\"\n")
                .unwrap();
        assert!(config.chat.is_none());
        assert_eq!(config.summary_or_chat().unwrap().model, "gpt-4o-mini");
    }

    #[test]
    fn unknown_kind_is_named() {
        let message = config_error("[llm]\nkind = \"gemini\"\nmodel = \"x\"\n");
        assert!(
            message.starts_with("llm.kind: unknown provider kind \"gemini\""),
            "{message}"
        );
    }

    #[test]
    fn bad_url_is_named() {
        let message = config_error(
            "[llm]\nkind = \"openai\"\nmodel = \"x\"\nbase_url = \"localhost:8080\"\n",
        );
        assert!(message.starts_with("llm.base_url:"), "{message}");
        let message =
            config_error("[llm]\nkind = \"openai\"\nmodel = \"x\"\nbase_url = \"not a url\"\n");
        assert!(message.contains("is not a valid URL"), "{message}");
        let message =
            config_error("[llm]\nkind = \"openai\"\nmodel = \"x\"\nbase_url = \"ftp://h/v1\"\n");
        assert!(message.contains("http:// or https://"), "{message}");
    }

    #[test]
    fn zero_timeout_is_rejected() {
        let message = config_error("[llm]\nkind = \"openai\"\nmodel = \"x\"\ntimeout_secs = 0\n");
        assert_eq!(message, "llm.timeout_secs: must be at least 1");
    }

    #[test]
    fn missing_model_and_kind_are_named() {
        assert_eq!(
            config_error("[llm]\nkind = \"openai\"\n"),
            "llm.model: missing, expected the model's name"
        );
        assert!(config_error("[llm]\nmodel = \"x\"\n").starts_with("llm.kind: missing"));
        assert!(
            config_error(
                "[llm]\nkind = \"openai\"\nmodel = \"x\"\n[llm.summary]\nbase_url = \"nope\"\n"
            )
            .starts_with("llm.summary.base_url:")
        );
    }

    #[test]
    fn a_typo_in_a_field_name_is_an_error() {
        let message = config_error("[llm]\nkind = \"openai\"\nmodel = \"x\"\ntimeout = 5\n");
        assert!(message.contains("unknown field `timeout`"), "{message}");
    }

    #[test]
    fn bad_header_is_rejected() {
        let message = config_error(
            "[llm]\nkind = \"openai\"\nmodel = \"x\"\nheaders = { \"bad header\" = \"v\" }\n",
        );
        assert!(
            message.contains("not a valid HTTP header name"),
            "{message}"
        );
    }

    #[test]
    fn the_key_comes_from_the_named_variable() {
        let mut config = ProviderConfig::new(ProviderKind::OpenAi, "gpt-4o");
        config.api_key_env = Some("MY_KEY".to_owned());
        let key = config
            .resolve_api_key_with(|name| (name == "MY_KEY").then(|| " sk-123 \n".to_owned()))
            .unwrap();
        assert_eq!(key.as_deref(), Some("sk-123"));
        let missing = config.resolve_api_key_with(|_| None).unwrap_err();
        let LlmError::Config { message } = missing else {
            panic!("expected a config error");
        };
        assert!(message.contains("MY_KEY"), "{message}");
        assert!(message.contains("not set"), "{message}");
        let empty = config.resolve_api_key_with(|_| Some("  ".to_owned()));
        assert!(empty.is_err());
    }

    #[test]
    fn an_inline_key_is_used_when_no_variable_is_named_and_never_printed() {
        let mut config = ProviderConfig::new(ProviderKind::Anthropic, "claude");
        assert_eq!(config.resolve_api_key_with(|_| None).unwrap(), None);
        config.api_key = Some("sk-secret".to_owned());
        assert_eq!(
            config.resolve_api_key_with(|_| None).unwrap().as_deref(),
            Some("sk-secret")
        );
        assert!(!format!("{config:?}").contains("sk-secret"));
    }

    #[test]
    fn provider_config_deserializes_on_its_own() {
        let config: ProviderConfig =
            toml::from_str("kind = \"OpenAI-compatible\"\nmodel = \"m\"\n").unwrap();
        assert_eq!(config.kind, ProviderKind::OpenAi);
        let error = toml::from_str::<ProviderConfig>(
            "kind = \"openai\"\nmodel = \"m\"\ntimeout_secs = 0\n",
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("timeout_secs: must be at least 1")
        );
    }

    #[test]
    fn llm_config_embeds_in_a_larger_config() {
        #[derive(Deserialize)]
        struct SkaldToml {
            #[serde(default)]
            llm: LlmConfig,
        }
        let parsed: SkaldToml =
            toml::from_str("[llm]\nkind = \"anthropic\"\nmodel = \"claude\"\n").unwrap();
        assert_eq!(parsed.llm.chat.unwrap().kind, ProviderKind::Anthropic);
        let parsed: SkaldToml = toml::from_str("").unwrap();
        assert!(parsed.llm.chat.is_none());
    }
}
