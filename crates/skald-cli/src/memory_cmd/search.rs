//! `skald search` and `skald search-docs`: memories (or the resources added with `skald add`)
//! that best match a query — full text, and vectors when `[embedding]` is configured.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use serde_json::json;
use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use skald_engine::Engine;
use skald_engine::memory::manage::{self, SearchReport};
use skald_engine::storage::SearchFilter;

use super::{Identity, IdentityArgs, memory_engine, parse_category, parse_uri};
use crate::config::Config;
use crate::home::Home;
use crate::local;
use crate::output::{self, Mode};
use crate::remote::Remote;

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to look for, in natural language.
    #[arg(long, short = 'q', value_name = "TEXT")]
    pub query: String,
    /// Only these categories (repeat or separate with commas): profile, preferences, entities,
    /// events (the user's); cases, patterns, skills, tools (the agent's); session; resources.
    /// Default: every category but resources.
    #[arg(long, short = 'c', value_name = "CATEGORY", value_delimiter = ',')]
    pub category: Vec<String>,
    /// How many results, 1 to 100.
    #[arg(long, short = 'n', default_value_t = 10, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=100))]
    pub limit: u16,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

#[derive(Debug, Args)]
pub struct SearchDocsArgs {
    /// What to look for, in natural language.
    #[arg(long, short = 'q', value_name = "TEXT")]
    pub query: String,
    /// Only below this resources directory, e.g. viking://resources/my-project/docs.
    #[arg(long, short = 'p', value_name = "URI")]
    pub path: Option<String>,
    /// How many results, 1 to 100.
    #[arg(long, short = 'n', default_value_t = 10, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=100))]
    pub limit: u16,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

/// Runs a search on the server.
fn search_remote(
    remote: &Remote,
    mut body: serde_json::Value,
    identity: &IdentityArgs,
) -> Result<SearchReport> {
    identity.check_remote()?;
    if let Some(user) = &identity.user {
        body["user"] = json!(user);
    }
    if let Some(agent) = &identity.agent {
        body["agent"] = json!(agent);
    }
    remote.post(&["v1", "memory", "search"], &body)
}

pub fn run_search_remote(args: &SearchArgs, remote: &Remote, mode: Mode) -> Result<ExitCode> {
    check_query(&args.query)?;
    let mut body = json!({"query": args.query, "limit": args.limit});
    if !args.category.is_empty() {
        body["category"] = json!(args.category);
    }
    let report = search_remote(remote, body, &args.identity)?;
    print_search(&report, mode)
}

pub fn run_search_docs_remote(
    args: &SearchDocsArgs,
    remote: &Remote,
    mode: Mode,
) -> Result<ExitCode> {
    check_query(&args.query)?;
    let mut body = json!({"query": args.query, "limit": args.limit, "category": "resources"});
    if let Some(path) = docs_path(args)? {
        body["path"] = json!(path.as_str());
    }
    let report = search_remote(remote, body, &args.identity)?;
    print_search(&report, mode)
}

fn check_query(text: &str) -> Result<()> {
    if text.trim().is_empty() {
        bail!("--query is empty; say what to look for");
    }
    Ok(())
}

/// `--path` of search-docs, checked to be under viking://resources.
fn docs_path(args: &SearchDocsArgs) -> Result<Option<MemoryUri>> {
    args.path
        .as_deref()
        .map(|text| {
            let uri = parse_uri(text, "--path")?;
            if uri.category() != Some(MemoryCategory::Resources) {
                bail!(
                    "--path {text:?} is not under viking://resources; search-docs searches the \
                     resources added with `skald add` (use `skald search` for memories)"
                );
            }
            Ok(uri)
        })
        .transpose()
}

pub fn run_search(args: &SearchArgs, home: &Home, config: &Config, mode: Mode) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let categories = if args.category.is_empty() {
        manage::memory_categories()
    } else {
        args.category
            .iter()
            .map(|name| parse_category(name))
            .collect::<Result<Vec<_>>>()?
    };
    let filter = SearchFilter {
        categories,
        ..SearchFilter::default()
    };
    search(
        &args.query,
        filter,
        usize::from(args.limit),
        &identity,
        home,
        config,
        mode,
    )
}

pub fn run_search_docs(
    args: &SearchDocsArgs,
    home: &Home,
    config: &Config,
    mode: Mode,
) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let under = docs_path(args)?;
    let filter = SearchFilter {
        categories: vec![MemoryCategory::Resources],
        under,
        ..SearchFilter::default()
    };
    search(
        &args.query,
        filter,
        usize::from(args.limit),
        &identity,
        home,
        config,
        mode,
    )
}

fn search(
    text: &str,
    filter: SearchFilter,
    limit: usize,
    identity: &Identity,
    home: &Home,
    config: &Config,
    mode: Mode,
) -> Result<ExitCode> {
    check_query(text)?;
    let engine = memory_engine(home, config, true)?;
    let report = search_engine(&engine, text, filter, limit, identity)?;
    print_search(&report, mode)
}

fn print_search(report: &SearchReport, mode: Mode) -> Result<ExitCode> {
    output::emit(mode, report, |report| {
        let mut table = output::table(&["#", "uri", "category", "score", "abstract"]);
        for row in &report.results {
            table.add_row(vec![
                row.rank.to_string(),
                row.uri.to_string(),
                row.category.to_string(),
                format!("{:.4}", row.score),
                row.l0.clone(),
            ]);
        }
        table
    })?;
    if mode == Mode::Table && report.results.is_empty() {
        println!("no results for {:?} ({})", report.query, report.mode);
    }
    Ok(ExitCode::SUCCESS)
}

fn search_engine(
    engine: &Engine,
    text: &str,
    filter: SearchFilter,
    limit: usize,
    identity: &Identity,
) -> Result<SearchReport> {
    let memory_identity = identity.memory_identity()?;
    Ok(local::block_on(engine.search_memories(
        &identity.tenant,
        &memory_identity,
        text,
        filter,
        limit,
    ))??)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;

    use skald_core::pipeline::policy::Policy;
    use skald_engine::EngineConfig;

    use super::*;
    use crate::memory_cmd::WordsEmbedder;

    #[test]
    fn with_an_embedder_remember_stores_vectors_and_search_is_hybrid() {
        let mut config = EngineConfig::new(Policy::preset("skald").unwrap());
        config.embedder = Some(Arc::new(WordsEmbedder));
        let engine = Engine::in_memory(config).unwrap();
        let identity = Identity::resolve(
            &IdentityArgs {
                user: None,
                agent: None,
                tenant: None,
            },
            &Config::default(),
        )
        .unwrap();
        let memory_identity = identity.memory_identity().unwrap();
        let remember = |content: &'static str| {
            local::block_on(engine.remember(
                &identity.tenant,
                &memory_identity,
                content,
                MemoryCategory::Preferences,
                None,
            ))
            .unwrap()
            .unwrap()
        };
        let report = remember("The user prefers dark themes everywhere");
        assert!(report.embedded);
        remember("The user drinks green tea");
        let filter = SearchFilter::default();
        let found = search_engine(&engine, "dark themes", filter, 5, &identity).unwrap();
        assert_eq!(found.mode, "hybrid");
        assert_eq!(found.embedder.as_deref(), Some("words"));
        assert_eq!(
            found.results.first().map(|row| row.uri.clone()),
            Some(report.uri)
        );
        assert_eq!(
            engine
                .memory_stats(&skald_core::ids::Tenant::default())
                .unwrap()
                .with_embedding,
            2
        );
    }
}
