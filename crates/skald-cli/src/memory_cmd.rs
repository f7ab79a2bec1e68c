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

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use serde_json::json;
use skald_core::ids::Tenant;
use skald_core::memory::uri::{MAX_DEPTH, MemoryCategory, MemoryUri};
use skald_engine::memory::MemoryIdentity;
use skald_engine::memory::manage::{
    self, ForgetReport, LsRow, ReadReport, RememberReport, SearchReport, VersionRow, WriteRow,
};
use skald_llm::{Embedder, embedder_from_config};
use skald_store::DATABASE_FILE;
use skald_store::memories::{MemoryLevel, MemoryStore, SearchFilter, SqliteMemoryStore, TreeNode};
#[cfg(test)]
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::home::Home;
use crate::output::{self, Mode};
use crate::remote::{self, Remote};

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
        let (user, agent) = (
            pick(&args.user, &config.memory.user),
            pick(&args.agent, &config.memory.agent),
        );
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
        let tenant = pick(&args.tenant, &config.memory.tenant);
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

// ---------------------------------------------------------------------------------------------
// search and search-docs

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
    let embedding = Embedding::from_config(config)?;
    let store = open_store(home)?;
    let report = search_store(&store, text, filter, limit, identity, embedding.as_ref())?;
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

fn search_store(
    store: &SqliteMemoryStore,
    text: &str,
    filter: SearchFilter,
    limit: usize,
    identity: &Identity,
    embedding: Option<&Embedding>,
) -> Result<SearchReport> {
    let memory_identity = identity.memory_identity()?;
    run_memory_op(embedding, async |embedder| {
        manage::search_memories(
            store,
            embedder,
            &identity.tenant,
            &memory_identity,
            text,
            filter,
            limit,
        )
        .await
    })
}

// ---------------------------------------------------------------------------------------------
// ls and tree

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
    let store = open_store(home)?;
    let rows: Vec<LsRow> = manage::list_directory(&store, &identity.tenant, &dir)?;
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
    let store = open_store(home)?;
    let tree: TreeNode = store.tree(&identity.tenant, &dir, args.depth)?;
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

// ---------------------------------------------------------------------------------------------
// read

/// Which level `skald read` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LevelArg {
    /// The abstract (at most 256 characters).
    L0,
    /// The overview (at most 4,000 characters).
    L1,
    /// The full content.
    L2,
}

impl LevelArg {
    /// The name the server's `level` takes.
    fn name(self) -> &'static str {
        match self {
            LevelArg::L0 => "l0",
            LevelArg::L1 => "l1",
            LevelArg::L2 => "l2",
        }
    }

    fn level(self) -> MemoryLevel {
        match self {
            LevelArg::L0 => MemoryLevel::L0,
            LevelArg::L1 => MemoryLevel::L1,
            LevelArg::L2 => MemoryLevel::L2,
        }
    }
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// The entry to read, e.g. viking://user/default/memories/preferences/dark-mode-1a2b3c4d.md;
    /// a directory written by `skald add` reads its _overview entry.
    #[arg(value_name = "URI")]
    pub uri: String,
    /// l0: abstract, l1: overview, l2: full content.
    #[arg(long, short = 'l', value_enum, default_value = "l2")]
    pub level: LevelArg,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

pub fn run_read(args: &ReadArgs, home: &Home, config: &Config, mode: Mode) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let uri = parse_uri(&args.uri, "URI")?;
    let store = open_store(home)?;
    let report = match manage::read_memory(&store, &identity.tenant, &uri, args.level.level()) {
        Err(manage::ManageError::DirectoryWithoutOverview { uri }) => bail!(
            "{uri} is a directory with no overview; list it with `skald ls {uri}` or \
             `skald tree {uri}`"
        ),
        other => other?,
    };
    print_read(&report, mode)
}

pub fn run_read_remote(args: &ReadArgs, remote: &Remote, mode: Mode) -> Result<ExitCode> {
    args.identity.check_remote_uri_only("read")?;
    let uri = parse_uri(&args.uri, "URI")?;
    let query = [
        ("uri", Some(uri.to_string())),
        ("level", Some(args.level.name().to_owned())),
    ];
    let report: ReadReport = remote.get(&["v1", "memory", "read"], &query)?;
    print_read(&report, mode)
}

fn print_read(report: &ReadReport, mode: Mode) -> Result<ExitCode> {
    match mode {
        Mode::Json => output::emit(mode, report, |_| output::table(&[]))?,
        Mode::Table => println!("{}", report.text),
    }
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------------------------
// history

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// How many writes to list, newest first (1 to 1000).
    #[arg(long, short = 'n', default_value_t = 20, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub limit: u16,
    /// Instead, every version of this one entry, newest first.
    #[arg(long, value_name = "URI")]
    pub uri: Option<String>,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

pub fn run_history(
    args: &HistoryArgs,
    home: &Home,
    config: &Config,
    mode: Mode,
) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let entry = history_entry(args)?;
    let store = open_store(home)?;
    if let Some(uri) = entry {
        let versions = manage::entry_versions(&store, &identity.tenant, &uri)?;
        return print_versions(&versions, mode);
    }
    let rows = manage::recent_writes(&store, &identity.tenant, usize::from(args.limit))?;
    print_writes(&rows, mode)
}

/// `--uri` of history, checked to name an entry.
fn history_entry(args: &HistoryArgs) -> Result<Option<MemoryUri>> {
    args.uri
        .as_deref()
        .map(|text| -> Result<MemoryUri> {
            let uri = parse_uri(text, "--uri")?;
            uri.require_entry()?;
            Ok(uri)
        })
        .transpose()
}

pub fn run_history_remote(args: &HistoryArgs, remote: &Remote, mode: Mode) -> Result<ExitCode> {
    args.identity.check_remote_uri_only("history")?;
    let entry = history_entry(args)?;
    let query = [
        ("limit", Some(args.limit.to_string())),
        ("uri", entry.as_ref().map(ToString::to_string)),
    ];
    let path = ["v1", "memory", "history"];
    match entry {
        Some(_) => print_versions(&remote.get::<Vec<VersionRow>>(&path, &query)?, mode),
        None => print_writes(&remote.get::<Vec<WriteRow>>(&path, &query)?, mode),
    }
}

fn print_versions(versions: &[VersionRow], mode: Mode) -> Result<ExitCode> {
    output::emit(mode, &versions, |versions| {
        let mut table = output::table(&["version", "status", "written", "abstract"]);
        for row in versions.iter() {
            table.add_row(vec![
                row.version.to_string(),
                row.status.clone(),
                row.written_at.clone(),
                row.l0.clone(),
            ]);
        }
        table
    })?;
    Ok(ExitCode::SUCCESS)
}

fn print_writes(rows: &[WriteRow], mode: Mode) -> Result<ExitCode> {
    output::emit(mode, &rows, |rows| {
        let mut table = output::table(&["when", "action", "uri", "abstract"]);
        for row in rows.iter() {
            let uri = match &row.requested_uri {
                Some(requested) if *requested != row.uri => format!("{requested} → {}", row.uri),
                Some(_) | None => row.uri.to_string(),
            };
            table.add_row(vec![
                row.at.clone(),
                format!("{:?}", row.action).to_lowercase(),
                uri,
                row.l0.clone(),
            ]);
        }
        table
    })?;
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------------------------
// remember and forget

/// What kind of memory `remember` writes, and so where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MemoryType {
    /// Who the user is (viking://user/{user}/memories/profile/…).
    Profile,
    /// What the user prefers (…/memories/preferences/…).
    Preferences,
    /// A person, project or thing and its state (…/memories/entities/…).
    Entities,
    /// Something that happened (…/memories/events/…).
    Events,
    /// A problem the agent solved and how (viking://agent/{agent}/memories/cases/…).
    Cases,
    /// A reusable way of working (viking://agent/{agent}/memories/patterns/…).
    Patterns,
}

impl MemoryType {
    /// The name the server's `type` takes.
    fn name(self) -> &'static str {
        match self {
            MemoryType::Profile => "profile",
            MemoryType::Preferences => "preferences",
            MemoryType::Entities => "entities",
            MemoryType::Events => "events",
            MemoryType::Cases => "cases",
            MemoryType::Patterns => "patterns",
        }
    }

    pub fn category(self) -> MemoryCategory {
        match self {
            MemoryType::Profile => MemoryCategory::Profile,
            MemoryType::Preferences => MemoryCategory::Preferences,
            MemoryType::Entities => MemoryCategory::Entities,
            MemoryType::Events => MemoryCategory::Events,
            MemoryType::Cases => MemoryCategory::Cases,
            MemoryType::Patterns => MemoryCategory::Patterns,
        }
    }
}

#[derive(Debug, Args)]
pub struct RememberArgs {
    /// What to remember: one fact, preference or lesson in plain words.
    #[arg(long, value_name = "TEXT")]
    pub content: String,
    /// The kind of memory (decides where it is stored).
    #[arg(long = "type", short = 't', value_enum, default_value = "entities")]
    pub memory_type: MemoryType,
    /// 0 (lowest) to 10 (highest); default 5.
    #[arg(long, short = 'p', value_name = "N",
          value_parser = clap::value_parser!(u8).range(0..=10))]
    pub priority: Option<u8>,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

pub fn run_remember(
    args: &RememberArgs,
    home: &Home,
    config: &Config,
    mode: Mode,
) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    check_content(&args.content)?;
    let embedding = Embedding::from_config(config)?;
    let store = open_store(home)?;
    let memory_identity = identity.memory_identity()?;
    let report = run_memory_op(embedding.as_ref(), async |embedder| {
        manage::remember(
            &store,
            embedder,
            &identity.tenant,
            &memory_identity,
            &args.content,
            args.memory_type.category(),
            args.priority,
        )
        .await
    })?;
    print_remember(&report, mode)
}

pub fn run_remember_remote(args: &RememberArgs, remote: &Remote, mode: Mode) -> Result<ExitCode> {
    args.identity.check_remote()?;
    check_content(&args.content)?;
    let mut body = json!({"content": args.content, "type": args.memory_type.name()});
    if let Some(priority) = args.priority {
        body["priority"] = json!(priority);
    }
    if let Some(user) = &args.identity.user {
        body["user"] = json!(user);
    }
    if let Some(agent) = &args.identity.agent {
        body["agent"] = json!(agent);
    }
    let report: RememberReport = remote.post(&["v1", "memory", "remember"], &body)?;
    print_remember(&report, mode)
}

fn check_content(content: &str) -> Result<()> {
    if content.trim().is_empty() {
        bail!("--content is empty; say what to remember");
    }
    Ok(())
}

fn print_remember(report: &RememberReport, mode: Mode) -> Result<ExitCode> {
    output::emit(mode, report, |report| {
        let mut table = output::table(&["outcome", "uri", "abstract"]);
        table.add_row(vec![
            report.outcome.clone(),
            report.uri.to_string(),
            report.l0.clone(),
        ]);
        table
    })?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Args)]
pub struct ForgetArgs {
    /// The entry to forget, e.g. viking://user/default/memories/preferences/dark-mode-1a2b3c4d.md
    /// (with --recursive: a directory, e.g. viking://resources/my-project/docs).
    #[arg(value_name = "URI")]
    pub uri: String,
    /// Forget every entry at or below URI (a document added with `skald add`, a directory).
    #[arg(long, short = 'r')]
    pub recursive: bool,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

fn render_forgotten(reports: &[ForgetReport]) -> comfy_table::Table {
    let mut table = output::table(&["forgotten", "at", "abstract"]);
    for report in reports {
        table.add_row(vec![
            report.uri.to_string(),
            report.forgotten_at.clone(),
            report.l0.clone(),
        ]);
    }
    table
}

pub fn run_forget(args: &ForgetArgs, home: &Home, config: &Config, mode: Mode) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let uri = parse_uri(&args.uri, "URI")?;
    if !args.recursive {
        uri.require_entry()?;
    }
    let store = open_store(home)?;
    let reports = manage::forget(&store, &identity.tenant, &uri, args.recursive)?;
    print_forgotten(args, &reports, mode)
}

pub fn run_forget_remote(args: &ForgetArgs, remote: &Remote, mode: Mode) -> Result<ExitCode> {
    args.identity.check_remote_uri_only("forget")?;
    let uri = parse_uri(&args.uri, "URI")?;
    if !args.recursive {
        uri.require_entry()?;
    }
    let body = json!({"uri": uri.as_str(), "recursive": args.recursive});
    let reports: Vec<ForgetReport> = remote.post(&["v1", "memory", "forget"], &body)?;
    print_forgotten(args, &reports, mode)
}

fn print_forgotten(args: &ForgetArgs, reports: &[ForgetReport], mode: Mode) -> Result<ExitCode> {
    match (args.recursive, reports) {
        (false, [report]) => output::emit(mode, report, |report| {
            render_forgotten(std::slice::from_ref(report))
        })?,
        _ => output::emit(mode, &reports, |reports| render_forgotten(reports))?,
    }
    Ok(ExitCode::SUCCESS)
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

    /// A tenant name of the tests, parsed (it is well formed).
    fn tenant_named(name: &str) -> skald_core::ids::Tenant {
        skald_core::ids::Tenant::parse(name).unwrap()
    }

    #[test]
    fn with_an_embedder_remember_stores_vectors_and_search_is_hybrid() {
        let store = SqliteMemoryStore::in_memory().unwrap();
        let embedding = Embedding::new(Arc::new(WordsEmbedder)).unwrap();
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
            run_memory_op(Some(&embedding), async |embedder| {
                manage::remember(
                    &store,
                    embedder,
                    &identity.tenant,
                    &memory_identity,
                    content,
                    MemoryCategory::Preferences,
                    None,
                )
                .await
            })
            .unwrap()
        };
        let report = remember("The user prefers dark themes everywhere");
        assert!(report.embedded);
        remember("The user drinks green tea");
        let filter = SearchFilter::default();
        let found = search_store(
            &store,
            "dark themes",
            filter,
            5,
            &identity,
            Some(&embedding),
        )
        .unwrap();
        assert_eq!(found.mode, "hybrid");
        assert_eq!(found.embedder.as_deref(), Some("words"));
        assert_eq!(
            found.results.first().map(|row| row.uri.clone()),
            Some(report.uri)
        );
        assert_eq!(
            store
                .stats(&tenant_named("default"))
                .unwrap()
                .with_embedding,
            2
        );
    }

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
