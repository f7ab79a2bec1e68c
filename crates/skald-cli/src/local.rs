//! The engine of the local commands: a [`skald_engine::Engine`] configured from skald.toml by
//! [`engine_config`] — the one mapping of the configuration to an [`EngineConfig`], which
//! `skald serve` builds its engine with too, so a command on the local store runs with the
//! settings the server would.

use std::sync::Arc;

use anyhow::{Context, Result};
use skald_core::pipeline::policy::Policy;
use skald_engine::{EngineConfig, MemoryDefaults};
use skald_llm::embedder_from_config;

use crate::config::Config;

/// The configured models an engine is given. Each is built only when the command uses it:
/// building one reads a key from the environment, makes a client or loads a local model, and a
/// command that never calls it should neither fail on its configuration nor pay for it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Models {
    /// The summary model of `[llm.summary]` / `[llm]` (else the extractive summarizer).
    pub summarizer: bool,
    /// The embedder of `[embedding]` (else none: memory search is full-text only).
    pub embedder: bool,
}

impl Models {
    /// Every configured model (the server's engine).
    pub const ALL: Models = Models {
        summarizer: true,
        embedder: true,
    };
}

/// The engine configuration of `config`: its policy (the `skald` preset with the file's
/// overrides), compaction, context window (`window`, else `[llm] context_window_tokens`),
/// `[memory]` owner and settings (`memory`: whether calls get long-term memory), session-cache
/// limit, and the `models` asked for.
pub fn engine_config(
    config: &Config,
    window: Option<u64>,
    memory: bool,
    models: Models,
) -> Result<EngineConfig> {
    let policy = match &config.policy {
        Some(policy) => policy.clone(),
        None => Policy::preset("skald")?,
    };
    let mut engine = EngineConfig::new(policy);
    engine.compaction = config.compaction.clone();
    engine.window_tokens = config.window_tokens(window);
    engine.memory = MemoryDefaults {
        user: config.memory.user.clone(),
        agent: config.memory.agent.clone(),
        recall: config.memory.recall.clone(),
        write: config.memory.write.clone(),
        enabled: memory,
    };
    engine.max_cached_bytes = config.server.max_cached_bytes;
    if models.summarizer {
        engine.summarizer = Arc::from(config.summarizer()?);
    }
    if models.embedder {
        engine.embedder = embedder_from_config(config.embedding.as_ref())
            .context("cannot use the embedder configured in [embedding]")?;
    }
    Ok(engine)
}
