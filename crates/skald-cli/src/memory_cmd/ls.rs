//! `skald ls` and `skald tree`: what a memory directory holds, one level or several.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use skald_core::memory::uri::{MAX_DEPTH, MemoryUri};
use skald_engine::memory::manage::LsRow;
use skald_engine::storage::TreeNode;

use super::{Identity, IdentityArgs, memory_engine, parse_category, parse_uri};
use crate::config::Config;
use crate::home::Home;
use crate::output::{self, Mode};
use crate::remote::Remote;

#[derive(Debug, Args)]
pub struct LsArgs {
    /// The directory to list, e.g. viking://user/default/memories or viking://resources/docs
    /// (default: viking://, or the --category directory).
    #[arg(value_name = "URI")]
    pub uri: Option<String>,
    /// List this category's directory for the current user/agent instead of a URI:
    /// profile, preferences, entities, events, cases, patterns, skills, tools, resources, session.
    #[arg(long, short = 'c', value_name = "CATEGORY", conflicts_with = "uri")]
    pub category: Option<String>,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

#[derive(Debug, Args)]
pub struct TreeArgs {
    /// The directory to show (default: viking://).
    #[arg(value_name = "URI")]
    pub uri: Option<String>,
    /// How many levels below URI to show.
    #[arg(long, short = 'L', default_value_t = 3, value_name = "N")]
    pub depth: usize,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

pub fn run_ls(args: &LsArgs, home: &Home, config: &Config, mode: Mode) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let dir = match (&args.uri, &args.category) {
        (Some(text), _) => parse_uri(text, "URI")?,
        (None, Some(name)) => identity.category_dir(parse_category(name)?)?,
        (None, None) => MemoryUri::root(),
    };
    let engine = memory_engine(home, config, false)?;
    let rows: Vec<LsRow> = engine.list_memories(&identity.tenant, &dir)?;
    print_ls(&rows, dir.as_str(), mode)
}

pub fn run_ls_remote(args: &LsArgs, remote: &Remote, mode: Mode) -> Result<ExitCode> {
    args.identity.check_remote()?;
    let uri = args
        .uri
        .as_deref()
        .map(|text| parse_uri(text, "URI"))
        .transpose()?;
    let shown = match (&uri, &args.category) {
        (Some(uri), _) => uri.to_string(),
        (None, Some(category)) => format!("the {category} directory"),
        (None, None) => MemoryUri::root().to_string(),
    };
    let query = [
        ("uri", uri.map(|uri| uri.to_string())),
        ("category", args.category.clone()),
        ("user", args.identity.user.clone()),
        ("agent", args.identity.agent.clone()),
    ];
    let rows: Vec<LsRow> = remote.get(&["v1", "memory", "ls"], &query)?;
    print_ls(&rows, &shown, mode)
}

fn print_ls(rows: &[LsRow], dir: &str, mode: Mode) -> Result<ExitCode> {
    match mode {
        Mode::Json => output::emit(mode, &rows, |_| output::table(&[]))?,
        Mode::Table => {
            if rows.is_empty() {
                println!("{dir}: empty");
            }
            for row in rows {
                let detail = match (row.kind.as_str(), row.entries) {
                    ("directory", Some(entries)) => format!(" ({entries})"),
                    _ => String::new(),
                };
                match &row.l0 {
                    Some(l0) => println!("{}{detail} — {l0}", row.name),
                    None => println!("{}{detail}", row.name),
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_tree(args: &TreeArgs, home: &Home, config: &Config, mode: Mode) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let dir = match &args.uri {
        Some(text) => parse_uri(text, "URI")?,
        None => MemoryUri::root(),
    };
    let engine = memory_engine(home, config, false)?;
    let tree: TreeNode = engine.memory_tree(&identity.tenant, &dir, args.depth)?;
    print_tree(&tree, mode)
}

pub fn run_tree_remote(args: &TreeArgs, remote: &Remote, mode: Mode) -> Result<ExitCode> {
    args.identity.check_remote_uri_only("tree")?;
    let uri = args
        .uri
        .as_deref()
        .map(|text| parse_uri(text, "URI"))
        .transpose()?;
    let query = [
        ("uri", uri.map(|uri| uri.to_string())),
        // Nothing is deeper than a URI can be: the server refuses more, the store shows the same.
        ("depth", Some(args.depth.min(MAX_DEPTH).to_string())),
    ];
    let tree: TreeNode = remote.get(&["v1", "memory", "tree"], &query)?;
    print_tree(&tree, mode)
}

fn print_tree(tree: &TreeNode, mode: Mode) -> Result<ExitCode> {
    match mode {
        Mode::Json => output::emit(mode, tree, |_| output::table(&[]))?,
        Mode::Table => print!("{}", tree.render()),
    }
    Ok(ExitCode::SUCCESS)
}
