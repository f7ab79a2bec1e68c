//! The memory commands: `skald search`, `ls`, `tree`, `read`, `search-docs`, `history`,
//! `remember` and `forget` over the memory store in the data directory's database (`skald add`
//! is `add_cmd`). What they do is `skald_engine::memory::manage` (the server's memory API runs
//! the same code); this module parses, resolves who they act for ([`Identity`]: `[memory]` in
//! skald.toml, overridden by `--user`/`--agent`/`--tenant`), opens the store and the embedder of
//! `[embedding]` (when configured, queries are embedded and writes store vectors; without one,
//! search is full-text only), and prints.
//!
//! Every argument is checked before the store is opened, so bad input writes nothing.
//!
//! With `--url` each command calls the server's memory API instead (`/v1/memory/…`: the same
//! `manage` code on the server's store, for the key's tenant) and prints the answer with the same
//! structs and tables; the user and agent default to the server's `[memory]` ones, and flags the
//! route has no field for are refused.
//!
//! This module holds what the commands share (who they act for, argument parsing, the store and
//! the embedder); each command is in its own module: [`search`], [`ls`] (with tree), [`read`],
//! [`history`], [`write`] (remember and forget).

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;
use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use skald_engine::memory::MemoryIdentity;
use skald_engine::memory::manage;
use skald_llm::{Embedder, embedder_from_config};
use skald_store::DATABASE_FILE;
use skald_store::memories::SqliteMemoryStore;
#[cfg(test)]
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::home::Home;
use crate::remote;

mod history;
mod ls;
mod read;
mod search;
mod write;

pub use history::{HistoryArgs, run_history, run_history_remote};
pub use ls::{LsArgs, TreeArgs, run_ls, run_ls_remote, run_tree, run_tree_remote};
pub use read::{ReadArgs, run_read, run_read_remote};
pub use search::{
    SearchArgs, SearchDocsArgs, run_search, run_search_docs, run_search_docs_remote,
    run_search_remote,
};
pub use write::{
    ForgetArgs, RememberArgs, run_forget, run_forget_remote, run_remember, run_remember_remote,
};

/// Who a memory command acts for.
#[derive(Debug, Clone, Args)]
pub struct IdentityArgs {
    /// The user id in viking://user/{user}/… (default: `user` of [memory] in skald.toml, else
    /// "default").
    #[arg(long, value_name = "ID")]
    pub user: Option<String>,
    /// The agent id in viking://agent/{agent}/… (default: `agent` of [memory], else "default").
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
    /// The tenant whose memories to use (default: `tenant` of [memory], else "default").
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
}

impl IdentityArgs {
    /// Refuses `--tenant` against a server (the key decides it); `--user`/`--agent` go along.
    pub fn check_remote(&self) -> Result<()> {
        remote::refuse("--tenant", self.tenant.is_some(), remote::TENANT_FROM_KEY)
    }

    /// Refuses `--tenant`, `--user` and `--agent` against a server route that takes none: the
    /// URI says whose memories it is.
    pub fn check_remote_uri_only(&self, command: &str) -> Result<()> {
        self.check_remote()?;
        let why = format!("the server's {command} takes a URI, which names whose memories it is");
        remote::refuse("--user", self.user.is_some(), &why)?;
        remote::refuse("--agent", self.agent.is_some(), &why)
    }
}

/// The resolved identity: ids checked against the URI layout and the tenant rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub agent: String,
    pub tenant: String,
}

impl Identity {
    pub fn resolve(args: &IdentityArgs, config: &Config) -> Result<Identity> {
        let pick = |flag: &Option<String>, configured: &str| {
            flag.clone().unwrap_or_else(|| configured.to_owned())
        };
        let identity = Identity {
            user: pick(&args.user, &config.memory.user),
            agent: pick(&args.agent, &config.memory.agent),
            tenant: pick(&args.tenant, &config.memory.tenant),
        };
        for (what, scope, id) in [
            ("user", "user", &identity.user),
            ("agent", "agent", &identity.agent),
        ] {
            if id.is_empty() {
                bail!("the {what} id is empty");
            }
            if id.contains('/') {
                bail!("the {what} id {id:?} has a '/'; an id is one path segment");
            }
            MemoryUri::parse(&format!("viking://{scope}/{id}"))
                .with_context(|| format!("the {what} id {id:?} is not usable in a URI"))?;
        }
        skald_store::validate_tenant(&identity.tenant)
            .with_context(|| format!("the tenant {:?}", identity.tenant))?;
        Ok(identity)
    }

    /// The user and agent as the engine names them.
    pub fn memory_identity(&self) -> Result<MemoryIdentity> {
        MemoryIdentity::new(&self.user, &self.agent).with_context(|| {
            format!(
                "the memory identity (user {:?}, agent {:?})",
                self.user, self.agent
            )
        })
    }

    /// The directory of a memory category for this user or agent.
    pub fn category_dir(&self, category: MemoryCategory) -> Result<MemoryUri> {
        Ok(manage::category_dir(&self.memory_identity()?, category)?)
    }
}

/// Parses a `--category` value, naming the accepted ones when it is unknown.
pub fn parse_category(text: &str) -> Result<MemoryCategory> {
    Ok(manage::parse_category(text)?)
}

/// Parses a URI argument, saying which argument it was.
pub fn parse_uri(text: &str, what: &str) -> Result<MemoryUri> {
    MemoryUri::parse(text).with_context(|| format!("{what} {text:?} is not a memory URI"))
}

/// Opens the memory store in the data directory's database (created if missing).
pub fn open_store(home: &Home) -> Result<SqliteMemoryStore> {
    home.ensure()?;
    let path = home.path.join(DATABASE_FILE);
    SqliteMemoryStore::open(&path)
        .with_context(|| format!("cannot open the memory store {}", path.display()))
}

/// The embedder of `[embedding]`, with the runtime its calls run on.
pub struct Embedding {
    runtime: tokio::runtime::Runtime,
    embedder: Arc<dyn Embedder>,
}

impl Embedding {
    /// `None` when no `[embedding]` is configured.
    pub fn from_config(config: &Config) -> Result<Option<Embedding>> {
        let embedder = embedder_from_config(config.embedding.as_ref())
            .context("cannot use the embedder configured in [embedding]")?;
        embedder.map(Embedding::new).transpose()
    }

    pub fn new(embedder: Arc<dyn Embedder>) -> Result<Embedding> {
        Ok(Embedding {
            runtime: crate::compact_cmd::runtime()?,
            embedder,
        })
    }

    pub fn name(&self) -> &str {
        self.embedder.name()
    }

    /// The embedder itself, for the engine's async calls run through [`Embedding::block_on`].
    pub fn embedder(&self) -> &dyn Embedder {
        self.embedder.as_ref()
    }

    /// Runs an engine future on this embedding's runtime.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// One vector per text, in order.
    pub fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(self.block_on(manage::embed_texts(self.embedder(), texts))?)
    }
}

/// Runs a memory operation of the engine, with the embedder when one is configured (on its
/// runtime), else on a runtime of its own.
pub fn run_memory_op<T>(
    embedding: Option<&Embedding>,
    op: impl AsyncFnOnce(Option<&dyn Embedder>) -> Result<T, manage::ManageError>,
) -> Result<T> {
    Ok(match embedding {
        Some(embedding) => embedding.block_on(op(Some(embedding.embedder())))?,
        None => crate::compact_cmd::runtime()?.block_on(op(None))?,
    })
}

/// A deterministic embedder for tests: words (longer than 3 characters) hashed into 64
/// buckets, so texts that share words point the same way.
#[cfg(test)]
pub struct WordsEmbedder;

#[cfg(test)]
#[async_trait::async_trait]
impl Embedder for WordsEmbedder {
    fn name(&self) -> &str {
        "words"
    }

    fn dimensions(&self) -> Option<usize> {
        Some(64)
    }

    async fn embed(
        &self,
        texts: &[String],
        _cancel: &CancellationToken,
    ) -> Result<Vec<Vec<f32>>, skald_llm::LlmError> {
        Ok(texts
            .iter()
            .map(|text| {
                let mut vector = vec![0.001_f32; 64];
                for word in text.split(|c: char| !c.is_alphanumeric()) {
                    let word = word.to_lowercase();
                    if word.len() > 3 {
                        let bucket = word.bytes().map(usize::from).sum::<usize>() % 64;
                        if let Some(slot) = vector.get_mut(bucket) {
                            *slot += 1.0;
                        }
                    }
                }
                skald_llm::embed::l2_normalize(&mut vector);
                vector
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn identities_are_checked_and_map_categories_to_directories() {
        let config = Config::default();
        let args = IdentityArgs {
            user: Some("alice".to_owned()),
            agent: None,
            tenant: None,
        };
        let identity = Identity::resolve(&args, &config).unwrap();
        assert_eq!(identity.agent, "default");
        assert_eq!(
            identity
                .category_dir(MemoryCategory::Preferences)
                .unwrap()
                .as_str(),
            "viking://user/alice/memories/preferences"
        );
        assert_eq!(
            identity
                .category_dir(MemoryCategory::Cases)
                .unwrap()
                .as_str(),
            "viking://agent/default/memories/cases"
        );
        for bad in ["a/b", "-x", "a b", ""] {
            let args = IdentityArgs {
                user: Some(bad.to_owned()),
                agent: None,
                tenant: None,
            };
            assert!(Identity::resolve(&args, &config).is_err(), "{bad:?}");
        }
        let error = parse_category("memos").unwrap_err().to_string();
        assert!(
            error.contains("memos") && error.contains("preferences"),
            "{error}"
        );
    }
}
