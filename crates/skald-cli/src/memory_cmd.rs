//! The memory commands: `skald search`, `ls`, `tree`, `read`, `search-docs`, `history`,
//! `remember` and `forget` over the memory store in the data directory's database (`skald add`
//! is `add_cmd`). Also what they share: who they act for ([`Identity`]: `[memory]` in
//! skald.toml, overridden by `--user`/`--agent`/`--tenant`), the store, and the embedder of
//! `[embedding]` (when configured, queries are embedded and writes store vectors; without one,
//! search is full-text only).
//!
//! Every argument is checked before the store is opened, so bad input writes nothing.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use serde::Serialize;
use skald_core::memory::chunk::slugify;
use skald_core::memory::dedup::content_hash;
use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use skald_llm::{Embedder, embedder_from_config};
use skald_store::DATABASE_FILE;
use skald_store::memories::{
    AddOutcome, DirEntry, DirEntryKind, DuplicateKind, Memory, MemoryError, MemoryLevel,
    MemorySource, MemoryStatus, MemoryStore, MemoryWrite, NewMemory, SearchFilter, SearchHit,
    SearchQuery, SqliteMemoryStore, TreeNode, WriteAction,
};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::home::Home;
use crate::output::{self, Mode};

/// The entry that holds a directory's L0/L1 (`skald add` writes one in every directory it
/// creates; `skald read DIR` reads it). A segment may not start with `.`, so OpenViking's
/// `.abstract.md`/`.overview.md` sidecars become this one entry.
pub const OVERVIEW_NAME: &str = "_overview";

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

    /// The directory of a memory category for this user or agent.
    pub fn category_dir(&self, category: MemoryCategory) -> Result<MemoryUri> {
        let text = match category {
            MemoryCategory::Profile
            | MemoryCategory::Preferences
            | MemoryCategory::Entities
            | MemoryCategory::Events => {
                format!("viking://user/{}/memories/{}", self.user, category.name())
            }
            MemoryCategory::Cases | MemoryCategory::Patterns => {
                format!("viking://agent/{}/memories/{}", self.agent, category.name())
            }
            MemoryCategory::Skills => format!("viking://agent/{}/skills", self.agent),
            MemoryCategory::Tools => format!("viking://agent/{}/tools", self.agent),
            MemoryCategory::Resources => "viking://resources".to_owned(),
            MemoryCategory::Session => "viking://session".to_owned(),
        };
        Ok(MemoryUri::parse(&text)?)
    }

    /// Whether `uri` belongs to this user's or agent's memories, the resources or a session
    /// archive (what `search` may return).
    fn owns(&self, uri: &MemoryUri) -> bool {
        let segments: Vec<&str> = uri.segments().collect();
        match segments.as_slice() {
            ["user", user, ..] => *user == self.user,
            ["agent", agent, ..] => *agent == self.agent,
            _ => true,
        }
    }
}

/// Parses a `--category` value, naming the accepted ones when it is unknown.
pub fn parse_category(text: &str) -> Result<MemoryCategory> {
    MemoryCategory::from_name(text.trim()).with_context(|| {
        format!(
            "unknown category {text:?}; the categories are {}",
            category_names()
        )
    })
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

    /// One vector per text, in order.
    pub fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let cancel = CancellationToken::new();
        let vectors = self
            .runtime
            .block_on(self.embedder.embed(texts, &cancel))
            .with_context(|| format!("embedding with {}", self.embedder.name()))?;
        if vectors.len() != texts.len() {
            bail!(
                "the embedder {} returned {} vectors for {} texts",
                self.embedder.name(),
                vectors.len(),
                texts.len()
            );
        }
        Ok(vectors)
    }

    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>> {
        self.embed(&[text.to_owned()])?
            .pop()
            .context("the embedder returned no vector")
    }
}

/// ISO 8601 (UTC) of milliseconds since the Unix epoch.
pub fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |time| time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

fn category_names() -> String {
    MemoryCategory::ALL.map(MemoryCategory::name).join(", ")
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

#[derive(Debug, Serialize)]
struct SearchReport {
    query: String,
    /// "hybrid" (full text and vectors) or "full-text".
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    embedder: Option<String>,
    results: Vec<SearchRow>,
}

#[derive(Debug, Serialize)]
struct SearchRow {
    rank: usize,
    uri: MemoryUri,
    category: MemoryCategory,
    score: f64,
    /// The entry's abstract (L0); read the rest with `skald read URI`.
    l0: String,
    priority: u8,
    created_at: String,
    updated_at: String,
}

pub fn run_search(args: &SearchArgs, home: &Home, config: &Config, mode: Mode) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let categories = if args.category.is_empty() {
        MemoryCategory::ALL
            .into_iter()
            .filter(|category| *category != MemoryCategory::Resources)
            .collect()
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
    let under = match &args.path {
        Some(text) => {
            let uri = parse_uri(text, "--path")?;
            if uri.category() != Some(MemoryCategory::Resources) {
                bail!(
                    "--path {text:?} is not under viking://resources; search-docs searches the \
                     resources added with `skald add` (use `skald search` for memories)"
                );
            }
            Some(uri)
        }
        None => None,
    };
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
    if text.trim().is_empty() {
        bail!("--query is empty; say what to look for");
    }
    let embedding = Embedding::from_config(config)?;
    let store = open_store(home)?;
    let report = search_store(&store, text, filter, limit, identity, embedding.as_ref())?;
    output::emit(mode, &report, |report| {
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
    store: &dyn MemoryStore,
    text: &str,
    filter: SearchFilter,
    limit: usize,
    identity: &Identity,
    embedding: Option<&Embedding>,
) -> Result<SearchReport> {
    // Other users' and agents' memories of the tenant are not this identity's: ask for more and
    // keep the first `limit` that are.
    let mut query = SearchQuery::text(text, (limit * 4).min(400)).with_filter(filter);
    if let Some(embedding) = embedding {
        query = query.with_vector(embedding.embed_one(text)?);
    }
    let hits: Vec<SearchHit> = match store.search(&identity.tenant, &query) {
        Ok(hits) => hits,
        // Only stopwords and no vector: nothing can match.
        Err(MemoryError::InvalidInput { field: "query", .. }) => Vec::new(),
        Err(error) => return Err(error.into()),
    };
    let results: Vec<SearchRow> = hits
        .into_iter()
        .filter(|hit| identity.owns(&hit.memory.uri))
        .take(limit)
        .enumerate()
        .map(|(index, hit)| SearchRow {
            rank: index + 1,
            uri: hit.memory.uri,
            category: hit.memory.category,
            score: (hit.score * 10_000.0).round() / 10_000.0,
            l0: hit.memory.l0,
            priority: hit.memory.priority,
            created_at: iso(hit.memory.created_at_ms),
            updated_at: iso(hit.memory.updated_at_ms),
        })
        .collect();
    Ok(SearchReport {
        query: text.to_owned(),
        mode: if embedding.is_some() {
            "hybrid"
        } else {
            "full-text"
        },
        embedder: embedding.map(|e| e.name().to_owned()),
        results,
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

#[derive(Debug, Serialize)]
struct LsRow {
    uri: MemoryUri,
    name: String,
    /// "directory" or "entry".
    #[serde(rename = "type")]
    kind: &'static str,
    /// Directories: live entries below it at any depth.
    #[serde(skip_serializing_if = "Option::is_none")]
    entries: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    category: Option<MemoryCategory>,
    /// Entries: the abstract; directories: the abstract of their `_overview`, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    l0: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    updated_at: Option<String>,
}

fn directory_abstract(store: &SqliteMemoryStore, tenant: &str, dir: &MemoryUri) -> Option<String> {
    let overview = dir.join(OVERVIEW_NAME).ok()?;
    store.get(tenant, &overview).ok().map(|memory| memory.l0)
}

fn ls_row(store: &SqliteMemoryStore, tenant: &str, entry: DirEntry) -> LsRow {
    let name = entry.uri.name().unwrap_or("viking://").to_owned();
    match entry.kind {
        DirEntryKind::Directory { entries } => LsRow {
            l0: directory_abstract(store, tenant, &entry.uri),
            uri: entry.uri,
            name: format!("{name}/"),
            kind: "directory",
            entries: Some(entries),
            category: None,
            priority: None,
            updated_at: None,
        },
        DirEntryKind::Entry {
            category,
            l0,
            priority,
            updated_at_ms,
        } => LsRow {
            uri: entry.uri,
            name,
            kind: "entry",
            entries: None,
            category: Some(category),
            l0: Some(l0),
            priority: Some(priority),
            updated_at: Some(iso(updated_at_ms)),
        },
    }
}

pub fn run_ls(args: &LsArgs, home: &Home, config: &Config, mode: Mode) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let dir = match (&args.uri, &args.category) {
        (Some(text), _) => parse_uri(text, "URI")?,
        (None, Some(name)) => identity.category_dir(parse_category(name)?)?,
        (None, None) => MemoryUri::root(),
    };
    let store = open_store(home)?;
    let rows: Vec<LsRow> = store
        .ls(&identity.tenant, &dir)?
        .into_iter()
        .map(|entry| ls_row(&store, &identity.tenant, entry))
        .collect();
    match mode {
        Mode::Json => output::emit(mode, &rows, |_| output::table(&[]))?,
        Mode::Table => {
            if rows.is_empty() {
                println!("{dir}: empty");
            }
            for row in &rows {
                let detail = match (row.kind, row.entries) {
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
    match mode {
        Mode::Json => output::emit(mode, &tree, |_| output::table(&[]))?,
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

#[derive(Debug, Serialize)]
struct ReadReport {
    uri: MemoryUri,
    /// The entry the text came from (the `_overview` entry for a directory).
    entry: MemoryUri,
    level: MemoryLevel,
    text: String,
    category: MemoryCategory,
    version: u32,
    priority: u8,
    created_at: String,
    updated_at: String,
    sources: Vec<MemorySource>,
}

pub fn run_read(args: &ReadArgs, home: &Home, config: &Config, mode: Mode) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let uri = parse_uri(&args.uri, "URI")?;
    let store = open_store(home)?;
    let direct = if uri.is_entry_location() {
        store.get(&identity.tenant, &uri).map_err(Some)
    } else {
        Err(None)
    };
    let memory = match direct {
        Ok(memory) => memory,
        Err(error) => {
            let overview = uri
                .join(OVERVIEW_NAME)
                .ok()
                .and_then(|overview| store.get(&identity.tenant, &overview).ok());
            match (overview, error) {
                (Some(memory), _) => memory,
                (None, Some(error)) => return Err(error.into()),
                (None, None) => bail!(
                    "{uri} is a directory with no overview; list it with `skald ls {uri}` or \
                     `skald tree {uri}`"
                ),
            }
        }
    };
    let level = args.level.level();
    let report = ReadReport {
        uri,
        entry: memory.uri.clone(),
        level,
        text: memory.text(level).to_owned(),
        category: memory.category,
        version: memory.version,
        priority: memory.priority,
        created_at: iso(memory.created_at_ms),
        updated_at: iso(memory.updated_at_ms),
        sources: memory.sources.clone(),
    };
    match mode {
        Mode::Json => output::emit(mode, &report, |_| output::table(&[]))?,
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

#[derive(Debug, Serialize)]
struct WriteRow {
    at: String,
    /// added, updated, merged or forgotten.
    action: WriteAction,
    uri: MemoryUri,
    #[serde(skip_serializing_if = "Option::is_none")]
    requested_uri: Option<MemoryUri>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duplicate: Option<DuplicateKind>,
    version: u32,
    category: MemoryCategory,
    l0: String,
}

impl From<MemoryWrite> for WriteRow {
    fn from(write: MemoryWrite) -> WriteRow {
        WriteRow {
            at: iso(write.at_ms),
            action: write.action,
            uri: write.uri,
            requested_uri: write.requested_uri,
            duplicate: write.duplicate,
            version: write.version,
            category: write.category,
            l0: write.l0,
        }
    }
}

#[derive(Debug, Serialize)]
struct VersionRow {
    version: u32,
    /// live, superseded or forgotten.
    status: &'static str,
    written_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ended_at: Option<String>,
    priority: u8,
    l0: String,
    l2: String,
}

fn version_row(memory: Memory) -> VersionRow {
    let (status, ended_at) = match memory.status {
        MemoryStatus::Live => ("live", None),
        MemoryStatus::Superseded { at_ms, .. } => ("superseded", Some(iso(at_ms))),
        MemoryStatus::Forgotten { at_ms } => ("forgotten", Some(iso(at_ms))),
    };
    VersionRow {
        version: memory.version,
        status,
        written_at: iso(memory.updated_at_ms),
        ended_at,
        priority: memory.priority,
        l0: memory.l0,
        l2: memory.l2,
    }
}

pub fn run_history(
    args: &HistoryArgs,
    home: &Home,
    config: &Config,
    mode: Mode,
) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let entry = args
        .uri
        .as_deref()
        .map(|text| -> Result<MemoryUri> {
            let uri = parse_uri(text, "--uri")?;
            uri.require_entry()?;
            Ok(uri)
        })
        .transpose()?;
    let store = open_store(home)?;
    if let Some(uri) = entry {
        let mut versions: Vec<VersionRow> = store
            .history(&identity.tenant, &uri)?
            .into_iter()
            .map(version_row)
            .collect();
        versions.reverse();
        output::emit(mode, &versions, |versions| {
            let mut table = output::table(&["version", "status", "written", "abstract"]);
            for row in versions {
                table.add_row(vec![
                    row.version.to_string(),
                    row.status.to_owned(),
                    row.written_at.clone(),
                    row.l0.clone(),
                ]);
            }
            table
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<WriteRow> = store
        .recent_writes(&identity.tenant, usize::from(args.limit))?
        .into_iter()
        .map(WriteRow::from)
        .collect();
    output::emit(mode, &rows, |rows| {
        let mut table = output::table(&["when", "action", "uri", "abstract"]);
        for row in rows {
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

/// The file name `remember` gives a memory: up to eight of its words as a slug, then eight hex
/// digits of its normalised content hash, so the same content always gets the same name and
/// different contents never share one.
pub fn memory_file_name(content: &str) -> String {
    let words: Vec<&str> = content.split_whitespace().take(8).collect();
    let words = slugify(&words.join(" ")).unwrap_or_else(|| "memory".to_owned());
    let words = skald_core::memory::levels::prefix_chars(&words, 48).trim_end_matches('-');
    let hash = content_hash(content);
    format!("{words}-{}.md", hash.get(..8).unwrap_or(&hash))
}

#[derive(Debug, Serialize)]
struct RememberReport {
    /// "added" (stored as a new entry) or "merged" (a duplicate of `uri`, which now records
    /// this write too).
    outcome: &'static str,
    /// Where the memory lives now.
    uri: MemoryUri,
    /// Where it would have been stored.
    requested_uri: MemoryUri,
    #[serde(skip_serializing_if = "Option::is_none")]
    duplicate: Option<DuplicateKind>,
    category: MemoryCategory,
    l0: String,
    priority: u8,
    embedded: bool,
}

pub fn run_remember(
    args: &RememberArgs,
    home: &Home,
    config: &Config,
    mode: Mode,
) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    if args.content.trim().is_empty() {
        bail!("--content is empty; say what to remember");
    }
    let embedding = Embedding::from_config(config)?;
    let store = open_store(home)?;
    let report = remember(&store, args, &identity, embedding.as_ref())?;
    output::emit(mode, &report, |report| {
        let mut table = output::table(&["outcome", "uri", "abstract"]);
        table.add_row(vec![
            report.outcome.to_owned(),
            report.uri.to_string(),
            report.l0.clone(),
        ]);
        table
    })?;
    Ok(ExitCode::SUCCESS)
}

fn remember(
    store: &dyn MemoryStore,
    args: &RememberArgs,
    identity: &Identity,
    embedding: Option<&Embedding>,
) -> Result<RememberReport> {
    let content = args.content.trim();
    let uri = identity
        .category_dir(args.memory_type.category())?
        .join(&memory_file_name(content))?;
    let mut memory = NewMemory::new(uri.clone(), content);
    if let Some(priority) = args.priority {
        memory = memory.with_priority(priority);
    }
    if let Some(embedding) = embedding {
        memory = memory.with_embedding(embedding.embed_one(content)?);
    }
    let outcome = store.add(&identity.tenant, memory)?;
    let (name, duplicate) = match &outcome {
        AddOutcome::Added(_) => ("added", None),
        AddOutcome::Merged(merge) => ("merged", Some(merge.kind)),
    };
    let stored = outcome.memory();
    Ok(RememberReport {
        outcome: name,
        uri: stored.uri.clone(),
        requested_uri: uri,
        duplicate,
        category: stored.category,
        l0: stored.l0.clone(),
        priority: stored.priority,
        embedded: stored.embedding_dimensions.is_some(),
    })
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

#[derive(Debug, Serialize)]
struct ForgetReport {
    uri: MemoryUri,
    forgotten_at: String,
    version: u32,
    l0: String,
}

fn forget_report(memory: Memory) -> ForgetReport {
    let at_ms = match memory.status {
        MemoryStatus::Forgotten { at_ms } => at_ms,
        MemoryStatus::Live | MemoryStatus::Superseded { .. } => memory.updated_at_ms,
    };
    ForgetReport {
        uri: memory.uri,
        forgotten_at: iso(at_ms),
        version: memory.version,
        l0: memory.l0,
    }
}

/// The live entries at or below `dir` (none when nothing is there).
pub fn live_entries(
    store: &dyn MemoryStore,
    tenant: &str,
    dir: &MemoryUri,
) -> Result<Vec<MemoryUri>> {
    fn collect(node: &TreeNode, out: &mut Vec<MemoryUri>) {
        match node.entry.kind {
            DirEntryKind::Entry { .. } => out.push(node.entry.uri.clone()),
            DirEntryKind::Directory { .. } => {}
        }
        for child in &node.children {
            collect(child, out);
        }
    }
    let tree = match store.tree(tenant, dir, skald_core::memory::uri::MAX_DEPTH) {
        Ok(tree) => tree,
        Err(MemoryError::NotFound { .. }) => return Ok(Vec::new()),
        Err(error) => return Err(error.into()),
    };
    let mut out = Vec::new();
    collect(&tree, &mut out);
    Ok(out)
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
    if !args.recursive {
        let report = forget_report(store.forget(&identity.tenant, &uri)?);
        output::emit(mode, &report, |report| {
            render_forgotten(std::slice::from_ref(report))
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let entries = live_entries(&store, &identity.tenant, &uri)?;
    if entries.is_empty() {
        bail!(
            "no memory at or below {uri} for tenant {:?}",
            identity.tenant
        );
    }
    let mut reports = Vec::new();
    for entry in entries {
        reports.push(forget_report(store.forget(&identity.tenant, &entry)?));
    }
    output::emit(mode, &reports, |reports| render_forgotten(reports))?;
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
        let remember_args = |content: &str| RememberArgs {
            content: content.to_owned(),
            memory_type: MemoryType::Preferences,
            priority: None,
            identity: IdentityArgs {
                user: None,
                agent: None,
                tenant: None,
            },
        };
        let report = remember(
            &store,
            &remember_args("The user prefers dark themes everywhere"),
            &identity,
            Some(&embedding),
        )
        .unwrap();
        assert!(report.embedded);
        remember(
            &store,
            &remember_args("The user drinks green tea"),
            &identity,
            Some(&embedding),
        )
        .unwrap();
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
        assert_eq!(store.stats("default").unwrap().with_embedding, 2);
    }

    #[test]
    fn remembered_names_are_stable_slugs_with_a_content_hash() {
        let name = memory_file_name("Alice prefers dark mode in every editor.");
        assert!(
            name.starts_with("alice-prefers-dark-mode-in-every-editor-"),
            "{name}"
        );
        assert!(name.ends_with(".md"));
        assert_eq!(
            name,
            memory_file_name("alice prefers  dark mode in every editor")
        );
        assert_ne!(
            name,
            memory_file_name("Alice prefers light mode in every editor.")
        );
        assert!(memory_file_name("!!!").starts_with("memory-"));
        assert!(memory_file_name(&"long ".repeat(100)).len() < 70);
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
