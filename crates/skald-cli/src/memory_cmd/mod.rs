//! The memory commands: `skald search`, `ls`, `tree`, `read`, `search-docs`, `history`,
//! `remember` and `forget` over the memory store in the data directory's database (`skald add`
//! is `add_cmd`). Each is one memory operation of the local engine (`Engine::search_memories`,
//! `list_memories`, `memory_tree`, `read_memory`, `memory_versions`, `recent_memory_writes`,
//! `remember`, `forget_memories`; the server's memory API makes the same calls); this module
//! parses, resolves who they act for ([`Identity`]: `[memory]` in skald.toml, overridden by
//! `--user`/`--agent`/`--tenant`), builds the engine with the embedder of `[embedding]` for the
//! commands that embed (when configured, queries are embedded and writes store vectors; without
//! one, search is full-text only), and prints.
//!
//! Every argument is checked before the store is opened, so bad input writes nothing.
//!
//! With `--url` each command calls the server's memory API instead (`/v1/memory/…`: the same
//! `manage` code on the server's store, for the key's tenant) and prints the answer with the same
//! structs and tables; the user and agent default to the server's `[memory]` ones, and flags the
//! route has no field for are refused.
//!
//! This module holds what the commands share (who they act for, argument parsing, the engine);
//! each command is in its own module: [`search`], [`ls`] (with tree), [`read`],
//! [`history`], [`write`] (remember and forget).

use anyhow::{Context, Result, bail};
use clap::Args;
use skald_core::ids::Tenant;
use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use skald_engine::Engine;
use skald_engine::memory::MemoryIdentity;
use skald_engine::memory::manage;
#[cfg(test)]
use skald_llm::Embedder;
#[cfg(test)]
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::home::Home;
use crate::local::{self, Models, StoreKind, StoreLocation};
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
    pub tenant: Tenant,
}

impl Identity {
    pub fn resolve(args: &IdentityArgs, config: &Config) -> Result<Identity> {
        let pick = |flag: &Option<String>, configured: &str| {
            flag.clone().unwrap_or_else(|| configured.to_owned())
        };
        let user = pick(&args.user, &config.memory.user);
        let agent = pick(&args.agent, &config.memory.agent);
        let tenant = pick(&args.tenant, &config.memory.tenant);
        for (what, scope, id) in [("user", "user", &user), ("agent", "agent", &agent)] {
            if id.is_empty() {
                bail!("the {what} id is empty");
            }
            if id.contains('/') {
                bail!("the {what} id {id:?} has a '/'; an id is one path segment");
            }
            MemoryUri::parse(&format!("viking://{scope}/{id}"))
                .with_context(|| format!("the {what} id {id:?} is not usable in a URI"))?;
        }
        let tenant =
            Tenant::parse(tenant.as_str()).with_context(|| format!("the tenant {tenant:?}"))?;
        Ok(Identity {
            user,
            agent,
            tenant,
        })
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

/// The local engine of a memory command, over the data directory's database (created if
/// missing; a database that cannot be opened is reported as the memory store). `embed`: the
/// command embeds (search, remember, add), so the engine gets the embedder of `[embedding]`
/// (without one, search is full-text only and writes store no vectors); the other commands do
/// not build it, so a broken `[embedding]` does not stop them.
pub fn memory_engine(home: &Home, config: &Config, embed: bool) -> Result<Engine> {
    let models = Models {
        summarizer: false,
        embedder: embed,
    };
    let engine_config = local::engine_config(config, None, true, models)?;
    home.ensure()?;
    local::local_engine(
        home,
        &StoreLocation::of(config),
        StoreKind::Memories,
        &config.refs,
        engine_config,
    )
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
