//! Building a client from configuration: the one place that maps a [`ProviderKind`] to its
//! implementation, so callers hold an `Arc<dyn ChatModel>` and never name a provider.

use std::sync::Arc;

use crate::anthropic::Anthropic;
use crate::chat::ChatModel;
use crate::config::{ProviderConfig, ProviderKind};
use crate::error::LlmError;
use crate::openai::OpenAiCompatible;

/// The client `config` describes, with its key read from the environment variable it names.
/// Fails with [`LlmError::Config`] on an invalid configuration or a missing key variable.
pub fn client_from_config(config: &ProviderConfig) -> Result<Arc<dyn ChatModel>, LlmError> {
    let api_key = config.resolve_api_key()?;
    client_with_api_key(config, api_key)
}

/// [`client_from_config`] with the key given rather than read from the environment.
pub fn client_with_api_key(
    config: &ProviderConfig,
    api_key: Option<String>,
) -> Result<Arc<dyn ChatModel>, LlmError> {
    Ok(match config.kind {
        ProviderKind::OpenAi => Arc::new(OpenAiCompatible::with_api_key(config.clone(), api_key)?),
        ProviderKind::Anthropic => Arc::new(Anthropic::with_api_key(config.clone(), api_key)?),
    })
}
