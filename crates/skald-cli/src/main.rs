//! `skald`: the command-line interface of the skald context engine.
//!
//! Thin by design: each command parses its arguments, calls the library, and prints JSON when
//! stdout is not a terminal (or with `--json`) and a table on a terminal. With `--url` the
//! session, memory and ref commands call a `skald serve` instead of the data directory
//! ([`remote`]) and print the same output.

mod add_cmd;
mod compact_cmd;
mod compare_cmd;
mod config;
mod context_cmd;
mod eval_cmd;
mod fetch_cmd;
mod files;
mod home;
mod hook_cmd;
mod hook_jobs;
mod import_cmd;
mod inspect;
mod keys_cmd;
mod local;
mod mcp_cmd;
mod memory_cmd;
mod migrate_cmd;
mod output;
mod remote;
mod replay_cmd;
mod serve_cmd;
mod sessions_cmd;
mod tokens_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use serde::Serialize;

use crate::home::Home;
use crate::output::Mode;

/// mimalloc instead of the system allocator: `skald serve` allocates on every worker thread for
/// every request, and glibc's malloc took about 30 % of its CPU (the proxy's throughput nearly
/// doubles with mimalloc; `cargo run --release -p skald-server --example proxy_load`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use crate::remote::Remote;

/// skald decides what an LLM agent's model sees on every call: it offloads large tool outputs,
/// prunes and compacts history, recovers from context overflows and remembers across sessions,
/// without ever losing the original data.
#[derive(Debug, Parser)]
#[command(name = "skald", version, propagate_version = true)]
struct Cli {
    /// Data directory (default: $SKALD_HOME, else the platform's data directory + /skald).
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Print JSON even on a terminal (JSON is the default when stdout is not a terminal).
    #[arg(long, global = true)]
    json: bool,
    /// Configuration file (default: skald.toml in the data directory, if present). Its
    /// [policy] table overrides the settings of the default `skald` policy.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Run the command against a skald server (`skald serve`, e.g. http://127.0.0.1:7420)
    /// instead of the data directory, with the same output: sessions, context, import,
    /// compact, fetch, search, search-docs, ls, tree, read, history, remember, forget and add
    /// (which sends the local files). The other commands (inspect, tokens, replay, eval,
    /// serve, keys, home) always work locally and ignore it.
    #[arg(
        long,
        global = true,
        env = "SKALD_URL",
        value_name = "URL",
        hide_env_values = true,
        display_order = 900
    )]
    url: Option<String>,
    /// The API key for --url (`skald keys create` on the server), sent in x-skald-key; the
    /// commands see its tenant's data. Needed once the server has keys.
    #[arg(
        long,
        global = true,
        env = "SKALD_API_KEY",
        value_name = "KEY",
        hide_env_values = true,
        display_order = 901
    )]
    key: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show what transcripts hold: format, messages by role, tool calls by name, tool-result
    /// sizes, token counts and what transcript repair would change.
    ///
    /// Formats are detected from the content: OpenAI and Anthropic requests and responses,
    /// OpenClaw session JSONL, Claude Code session JSONL, mini-swe-agent and SWE-agent
    /// trajectories. Directories are searched for .jsonl, .json and .traj files.
    ///
    /// Examples:
    ///   skald inspect examples/openclaw-session.jsonl
    ///   skald inspect ~/.claude/projects/my-project/ --json
    #[command(verbatim_doc_comment)]
    Inspect(inspect::InspectArgs),
    /// Measure token estimates against what providers billed.
    ///
    /// For every assistant call in transcripts that record real usage (Claude Code,
    /// mini-swe-agent), the request is the conversation before that call; its input tokens are
    /// estimated with chars/4, counted with a BPE, and corrected by per-model calibration learned
    /// online from earlier calls. Prints mean and p90 absolute percentage error of each.
    ///
    /// Examples:
    ///   skald tokens ../shared/data/trajectories/mini-swe-agent
    ///   skald tokens session.jsonl --json
    #[command(verbatim_doc_comment)]
    Tokens(tokens_cmd::TokensArgs),
    /// Replay real transcripts under each policy and measure tokens, prompt-cache use, cost and
    /// what the model could still see or fetch.
    ///
    /// Every model call is re-created (its request is the conversation before it) and run
    /// through the policy's pipeline call after call, as a host would. Costs count the prompt
    /// cache: the prefix a request shares with the previous one within 5 minutes is a cache read
    /// (0.1x), the rest a cache write (1.25x). Retention checks every identifier (path, hash,
    /// URL, host:port, long number) an assistant message uses that first appeared in a tool
    /// result: still visible, or recoverable through a ref (charged as one fetch).
    ///
    /// Examples:
    ///   skald replay ../shared/data/trajectories/claude-code/*.jsonl
    ///   skald replay session.jsonl --policy none,skald --chart context.svg
    ///   skald replay runs/ --policy none,my-policy.toml --json
    #[command(verbatim_doc_comment)]
    Replay(replay_cmd::ReplayArgs),
    /// Print the original content behind a ref id from the local ref store (or a server's,
    /// with --url), whole or sliced.
    ///
    /// Examples:
    ///   skald fetch 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    ///   skald fetch "[REF_ID: 9f86…]" --lines 120:180
    ///   skald fetch 9f86d0… --grep "error|panic" --context 3
    ///   skald fetch 9f86d0… --url http://127.0.0.1:7420 --key sk-skald-…
    #[command(verbatim_doc_comment)]
    Fetch(fetch_cmd::FetchArgs),
    /// Import a transcript into the local session store (or a server's, with --url: its
    /// bootstrap route) and print its session id.
    ///
    /// An OpenClaw session keeps its whole entry tree (ids, branches, compactions, leaf), so its
    /// context rebuilds exactly as OpenClaw builds it; any other format becomes a chain of
    /// messages. Importing the same file again changes nothing; a file that grew appends only
    /// its new entries. OpenClaw 2026.9 keeps its sessions in SQLite: give its
    /// `openclaw-agent.sqlite` (opened read-only) to import every session in it, or one with
    /// --session.
    ///
    /// Examples:
    ///   skald import ~/.openclaw/agents/main/sessions/8555a0a4-….jsonl
    ///   skald import ~/.openclaw/agents/main/agent/openclaw-agent.sqlite --session 01a21cfb-…
    ///   skald import request.json --tenant acme --json
    ///   SKALD_URL=http://127.0.0.1:7420 skald import session.jsonl
    #[command(verbatim_doc_comment)]
    Import(import_cmd::ImportArgs),
    /// List the sessions in the local store (or a server's, with --url): title, source,
    /// entries, messages, the estimated tokens of their context and when they last changed.
    ///
    /// Examples:
    ///   skald sessions
    ///   skald sessions --url http://127.0.0.1:7420 --key sk-skald-…
    #[command(verbatim_doc_comment)]
    Sessions(sessions_cmd::SessionsArgs),
    /// Show what the model would see for a stored session: the context rebuilt from its leaf,
    /// after the policy's pipeline (cold state; the refs it hands out go to the local ref store).
    /// With --url, what the server's next assemble would give (its policy and window).
    ///
    /// On a terminal (or with --text), a readable rendering; otherwise JSON with the messages
    /// as OpenClaw AgentMessages, estimatedTokens and systemPromptAddition.
    ///
    /// Examples:
    ///   skald context 8555a0a4-0b79-459d-939c-e17cdbbf4fe2
    ///   skald context conv-1f2e3d4c5b6a79801f2e3d4c --policy none --window 128000 --json
    ///   skald context 8555a0a4-… --memory --url http://127.0.0.1:7420
    #[command(verbatim_doc_comment)]
    Context(context_cmd::ContextArgs),
    /// Compact a stored session now: summarise its older history (the recent turns stay
    /// verbatim) and write a compaction checkpoint, so `skald context` starts from the summary.
    ///
    /// The summary is written by the model of [llm.summary] (else [llm]) in the configuration,
    /// or, with no model configured, by the extractive summarizer (no provider, no key).
    /// [compaction] in the configuration overrides the settings. Prints the outcome
    /// (compacted, skipped or cancelled), its reason, the tokens before and after and the
    /// summary. Exit status: 0 compacted or skipped, 3 cancelled (session unchanged),
    /// 130 interrupted, 1 error.
    ///
    /// --compare measures the extractive summary against Claude Code's own compactions: for
    /// each compact_boundary of a Claude Code session (or of every session in a directory
    /// with a <session>/subagents/agent-acompact-*.jsonl), the tokens, the share of the
    /// span's exact identifiers kept and the five required sections of each summary.
    ///
    /// With --url the server compacts with its own summarizer and archives with its own
    /// [memory] settings (--user and --extract-with are refused; --compare runs locally only).
    ///
    /// Examples:
    ///   skald compact 8555a0a4-0b79-459d-939c-e17cdbbf4fe2
    ///   skald compact 8555a0a4-… --instructions "focus on the failing migration" --json
    ///   skald compact 8555a0a4-… --url http://127.0.0.1:7420 --key sk-skald-…
    ///   skald compact --compare ../shared/data/trajectories/claude-code
    #[command(verbatim_doc_comment)]
    Compact(compact_cmd::CompactArgs),
    /// Measure skald on public benchmarks (no model calls, no data directory).
    ///
    /// Examples:
    ///   skald eval locomo ../shared/data/locomo/locomo-dev.json --errors ../shared/data/locomo/locomo-dev-errors.json
    #[command(verbatim_doc_comment)]
    Eval(eval_cmd::EvalArgs),
    /// Search long-term memories (the user's and the agent's) for what a query is about.
    ///
    /// Ranks entries by full text (BM25) and, when [embedding] is configured in skald.toml,
    /// by vector similarity too, fused. Searches the current user's memories (profile,
    /// preferences, entities, events), the current agent's (cases, patterns, skills, tools) and
    /// session archives; --category narrows that (resources are searched by search-docs).
    ///
    /// Output (JSON when stdout is not a terminal): {query, mode: "hybrid"|"full-text",
    /// results: [{rank, uri, category, score, l0, priority, created_at, updated_at}]}, best
    /// first; l0 is the entry's one-line abstract. Read a whole entry with `skald read URI`.
    ///
    /// Examples:
    ///   skald search --query "which editor theme does the user like"
    ///   skald search -q "flaky CI fix" --category cases,patterns --limit 5
    ///   skald search -q "trip to Lisbon" --user alice --json
    ///   skald search -q "dark mode" --url http://127.0.0.1:7420 --key sk-skald-…
    #[command(verbatim_doc_comment)]
    Search(memory_cmd::SearchArgs),
    /// List a memory directory: its subdirectories (with how many entries they hold and their
    /// abstract) and its entries (with their abstract).
    ///
    /// URIs look like viking://user/{user}/memories/{profile|preferences|entities|events}/…,
    /// viking://agent/{agent}/memories/{cases|patterns}/…, viking://agent/{agent}/skills/…,
    /// viking://agent/{agent}/tools/{name}, viking://resources/… and viking://session/{id}/….
    /// Without a URI, lists viking:// (or the --category directory of the current user/agent).
    ///
    /// Output (JSON): [{uri, name, type: "directory"|"entry", entries, category, l0, priority,
    /// updated_at}]; on a terminal one line per item, "name/ (entries) — abstract".
    ///
    /// Examples:
    ///   skald ls
    ///   skald ls viking://user/default/memories
    ///   skald ls --category preferences
    ///   skald ls viking://resources/my-project
    ///   skald ls --category cases --url http://127.0.0.1:7420
    #[command(verbatim_doc_comment)]
    Ls(memory_cmd::LsArgs),
    /// Show a memory directory and everything below it, entries with their abstract.
    ///
    /// Output (JSON): {uri, type, entries | l0, children: […]}; on a terminal an indented tree.
    ///
    /// Examples:
    ///   skald tree
    ///   skald tree viking://resources/my-project --depth 2
    ///   skald tree --url http://127.0.0.1:7420
    #[command(verbatim_doc_comment)]
    Tree(memory_cmd::TreeArgs),
    /// Print one memory entry at a level: l0 (abstract, ≤ 256 chars), l1 (overview, ≤ 4,000
    /// chars) or l2 (full content, the default). A directory written by `skald add` reads its
    /// _overview entry (what the directory holds).
    ///
    /// Output (JSON): {uri, entry, level, text, category, version, priority, created_at,
    /// updated_at, sources}; on a terminal only the text.
    ///
    /// Examples:
    ///   skald read viking://user/default/memories/preferences/dark-mode-3fa2b1c9.md
    ///   skald read viking://resources/my-project/docs/auth.md --level l1
    ///   skald read viking://resources/my-project --url http://127.0.0.1:7420
    #[command(verbatim_doc_comment)]
    Read(memory_cmd::ReadArgs),
    /// Search the documents added with `skald add` (everything under viking://resources).
    ///
    /// Same ranking and output as `skald search`; results are chunks of files
    /// (viking://resources/{dir}/…/{file}/{chunk}) and directory overviews
    /// (…/{dir}/_overview). --path limits the search to one directory.
    ///
    /// Examples:
    ///   skald search-docs --query "how are tokens refreshed"
    ///   skald search-docs -q "retry policy" --path viking://resources/my-project/docs
    ///   skald search-docs -q "retry policy" --url http://127.0.0.1:7420
    #[command(verbatim_doc_comment)]
    SearchDocs(memory_cmd::SearchDocsArgs),
    /// Add a file or a directory as resources: chunked, indexed, searchable with search-docs.
    ///
    /// Markdown is cut at headings, code and text at blank lines (chunks of at most
    /// --max-chunk-chars). Each chunk is an entry at viking://resources/{name}/…/{file}/{chunk}
    /// (or under --to); every directory, each file's included, gets an _overview entry with
    /// its abstract (L0) and a list of what it holds. Adding again updates what changed and
    /// forgets entries whose file is gone; unchanged chunks write nothing. Hidden entries
    /// (.git…), target, node_modules, binary files and files over 1 MiB are skipped.
    ///
    /// Output (JSON): {root, files, chunks, directories, added, updated, unchanged, merged,
    /// forgotten, embedded, skipped: [{path, reason}]}.
    ///
    /// Examples:
    ///   skald add docs/
    ///   skald add README.md --to viking://resources/my-project
    ///   skald add docs/ --url http://127.0.0.1:7420 --key sk-skald-…   (reads docs/ here)
    #[command(verbatim_doc_comment)]
    Add(add_cmd::AddArgs),
    /// List recent memory writes, newest first: added, updated, merged (a duplicate folded
    /// into an existing entry) and forgotten. --uri lists every version of one entry instead.
    ///
    /// Output (JSON): [{at, action, uri, requested_uri (merges), duplicate (merges), version,
    /// category, l0}]; with --uri: [{version, status, written_at, ended_at, priority, l0, l2}].
    ///
    /// Examples:
    ///   skald history --limit 10
    ///   skald history --uri viking://user/default/memories/preferences/dark-mode-3fa2b1c9.md
    ///   skald history --url http://127.0.0.1:7420
    #[command(verbatim_doc_comment)]
    History(memory_cmd::HistoryArgs),
    /// Store a memory now. --type decides where: profile, preferences, entities, events go to
    /// viking://user/{user}/memories/{type}/, cases and patterns to
    /// viking://agent/{agent}/memories/{type}/. The file name is a slug of the first words
    /// and a hash of the content, so the same content always lands at the same URI.
    ///
    /// A duplicate of an existing memory (same or nearly the same words) is not stored twice:
    /// the outcome is "merged" and uri names the entry it was merged into.
    ///
    /// Output (JSON): {outcome: "added"|"merged", uri, requested_uri, duplicate, category, l0,
    /// priority, embedded}.
    ///
    /// Examples:
    ///   skald remember --content "The user prefers dark mode in every editor" --type preferences
    ///   skald remember --content "CI flakes were fixed by pinning node 20" --type cases --priority 8
    ///   SKALD_URL=http://127.0.0.1:7420 SKALD_API_KEY=sk-skald-… skald remember --content "…"
    #[command(verbatim_doc_comment)]
    Remember(memory_cmd::RememberArgs),
    /// Forget one memory entry: search and reads no longer see it (`skald history --uri URI`
    /// still lists its versions). --recursive forgets every entry at or below a directory.
    ///
    /// Output (JSON): {uri, forgotten_at, version, l0}; with --recursive an array of them.
    ///
    /// Examples:
    ///   skald forget viking://user/default/memories/preferences/dark-mode-3fa2b1c9.md
    ///   skald forget --recursive viking://resources/my-project/docs/old-guide.md
    ///   skald forget viking://user/default/memories/events/… --url http://127.0.0.1:7420
    #[command(verbatim_doc_comment)]
    Forget(memory_cmd::ForgetArgs),
    /// Run the HTTP server: the engine API, the memory and refs API, and the OpenAI / Anthropic
    /// proxy, on the data directory's database.
    ///
    /// Agents point their base URL at it (OPENAI_BASE_URL=http://127.0.0.1:7420/v1 or
    /// ANTHROPIC_BASE_URL=http://127.0.0.1:7420) once skald.toml names the upstream:
    ///   [proxy.openai]
    ///   base_url = "https://api.openai.com/v1"
    /// Without API keys the server accepts only loopback addresses; with keys (`skald keys
    /// create`) every request needs one (x-skald-key, or Authorization: Bearer sk-skald-… when
    /// [proxy.*] api_key_env gives skald the provider key) and sees only its tenant's data.
    /// GET /openapi.json describes every route. Ctrl-C or SIGTERM stops it gracefully.
    ///
    /// Examples:
    ///   skald serve
    ///   skald serve --addr 0.0.0.0:7420 --config /etc/skald/skald.toml
    #[command(verbatim_doc_comment)]
    Serve(serve_cmd::ServeArgs),
    /// Serve skald's tools over MCP on stdin/stdout: fetch_original_data and the memory tools
    /// (search_memories, memory_ls, memory_read, commit_memory, memory_forget), on the data
    /// directory's store. `skald serve` offers the same at /mcp (streamable HTTP, by key).
    ///
    /// Examples:
    ///   claude mcp add skald -- skald mcp
    ///   skald mcp --tenant acme
    #[command(verbatim_doc_comment)]
    Mcp(mcp_cmd::McpArgs),
    /// Answer one Claude Code hook (JSON on stdin, the answer on stdout) on the local store,
    /// for a Claude Code that does not go through the proxy: `post-tool-use` offloads a large
    /// tool output behind skald's placeholder (the model fetches it with `skald mcp`'s
    /// fetch_original_data), `user-prompt-submit` adds the memories recalled for the prompt,
    /// `pre-compact` compacts the transcript with skald's summarizer, `session-start` (source
    /// `compact`) hands that summary back, `session-end` archives the session for memory
    /// extraction. `integrations/claude-code` is the plugin that wires them.
    ///
    /// Example (in hooks.json):
    ///   {"type": "command", "command": "skald hook post-tool-use"}
    #[command(verbatim_doc_comment)]
    Hook(hook_cmd::HookArgs),
    /// Manage the API keys of `skald serve`: each key belongs to one tenant.
    ///
    /// Examples:
    ///   skald keys create --tenant acme --name "ci runner"
    ///   skald keys list
    ///   skald keys revoke key_3fa2b1c9d0e4f5a6
    #[command(verbatim_doc_comment)]
    Keys(keys_cmd::KeysArgs),
    /// Copy a SQLite database (sessions, refs, memories, API keys) into an empty PostgreSQL
    /// database, then compare every table on both sides (row counts and SHA-256).
    ///
    /// Output (JSON): {tables: [{table, source_rows, target_rows, source_sha256,
    /// target_sha256}], tenants}; fails unless every table matches.
    ///
    /// Examples:
    ///   skald migrate --from sqlite://$(skald home | jq -r .path)/skald.sqlite3 \
    ///                 --to postgres://skald@db:5432/skald
    #[command(verbatim_doc_comment)]
    Migrate(migrate_cmd::MigrateArgs),
    /// Print the data directory skald uses and where that choice came from.
    Home,
}

#[derive(Debug, Serialize)]
struct HomeReport {
    path: String,
    source: &'static str,
}

impl Command {
    /// Whether the command can run against a server (`--url`).
    fn has_server_counterpart(&self) -> bool {
        match self {
            Command::Fetch(_)
            | Command::Import(_)
            | Command::Sessions(_)
            | Command::Context(_)
            | Command::Compact(_)
            | Command::Search(_)
            | Command::Ls(_)
            | Command::Tree(_)
            | Command::Read(_)
            | Command::SearchDocs(_)
            | Command::Add(_)
            | Command::History(_)
            | Command::Remember(_)
            | Command::Forget(_) => true,
            Command::Inspect(_)
            | Command::Tokens(_)
            | Command::Replay(_)
            | Command::Eval(_)
            | Command::Serve(_)
            | Command::Mcp(_)
            | Command::Hook(_)
            | Command::Keys(_)
            | Command::Migrate(_)
            | Command::Home => false,
        }
    }
}

/// The server the command talks to, if any.
fn connect(cli: &Cli) -> Result<Option<Remote>> {
    if !cli.command.has_server_counterpart() {
        return Ok(None);
    }
    match (&cli.url, &cli.key) {
        (Some(url), key) if !url.trim().is_empty() => {
            remote::refuse(
                "--config",
                cli.config.is_some(),
                "the server runs with its own configuration (its skald.toml)",
            )?;
            Ok(Some(Remote::new(url, key.as_deref())?))
        }
        (Some(_) | None, Some(_)) if std::env::var_os("SKALD_API_KEY").is_none() => {
            anyhow::bail!(
                "--key is the API key of a skald server: give the server's address with --url \
                 (or SKALD_URL) too"
            )
        }
        (Some(_) | None, _) => Ok(None),
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let mode = Mode::detect(cli.json);
    let env_home = std::env::var_os("SKALD_HOME");
    let home = Home::resolve(cli.home.as_deref(), env_home.as_deref())?;
    let remote = connect(&cli)?;
    let remote = remote.as_ref();
    // Against a server the local configuration has no say (the server's applies).
    let config = || -> Result<Option<config::Config>> {
        match remote {
            Some(_) => Ok(None),
            None => Ok(Some(config::Config::load(cli.config.as_deref(), &home)?)),
        }
    };
    // Where the stores of a command that reads no other configuration are.
    let location = || local::StoreLocation::configured(cli.config.as_deref(), &home);
    // A memory command: on the server, or locally with the configuration.
    macro_rules! memory_command {
        ($args:expr, $remote_fn:path, $local_fn:path) => {
            match remote {
                Some(remote) => $remote_fn(&$args, remote, mode),
                None => {
                    let config = config::Config::load(cli.config.as_deref(), &home)?;
                    $local_fn(&$args, &home, &config, mode)
                }
            }
        };
    }
    match &cli.command {
        Command::Inspect(args) => inspect::run(args, mode),
        Command::Tokens(args) => tokens_cmd::run(args, mode),
        Command::Replay(args) => {
            let config = config::Config::load(cli.config.as_deref(), &home)?;
            replay_cmd::run(args, &config, mode)
        }
        Command::Fetch(args) => fetch_cmd::run(args, &home, location, remote, mode),
        Command::Import(args) => import_cmd::run(args, &home, &location, remote, mode),
        Command::Sessions(args) => sessions_cmd::run(args, &home, location, remote, mode),
        Command::Context(args) => {
            let config = config()?;
            context_cmd::run(args, &home, config.as_ref(), remote, cli.json)
        }
        Command::Compact(args) => {
            let config = config()?;
            compact_cmd::run(args, &home, config.as_ref(), remote, mode)
        }
        Command::Eval(args) => eval_cmd::run(args, cli.config.as_deref(), &home, mode),
        Command::Search(args) => {
            memory_command!(args, memory_cmd::run_search_remote, memory_cmd::run_search)
        }
        Command::Ls(args) => memory_command!(args, memory_cmd::run_ls_remote, memory_cmd::run_ls),
        Command::Tree(args) => {
            memory_command!(args, memory_cmd::run_tree_remote, memory_cmd::run_tree)
        }
        Command::Read(args) => {
            memory_command!(args, memory_cmd::run_read_remote, memory_cmd::run_read)
        }
        Command::SearchDocs(args) => memory_command!(
            args,
            memory_cmd::run_search_docs_remote,
            memory_cmd::run_search_docs
        ),
        Command::Add(args) => {
            let config = config()?;
            add_cmd::run(args, &home, config.as_ref(), remote, mode)
        }
        Command::History(args) => memory_command!(
            args,
            memory_cmd::run_history_remote,
            memory_cmd::run_history
        ),
        Command::Remember(args) => memory_command!(
            args,
            memory_cmd::run_remember_remote,
            memory_cmd::run_remember
        ),
        Command::Forget(args) => {
            memory_command!(args, memory_cmd::run_forget_remote, memory_cmd::run_forget)
        }
        Command::Serve(args) => {
            let config = config::Config::load(cli.config.as_deref(), &home)?;
            serve_cmd::run(args, &config, &home)
        }
        Command::Hook(args) => {
            let config = config::Config::load(cli.config.as_deref(), &home)?;
            hook_cmd::run(args, &config, cli.config.as_deref(), &home)
        }
        Command::Mcp(args) => {
            let config = config::Config::load(cli.config.as_deref(), &home)?;
            mcp_cmd::run(args, &config, &home)
        }
        Command::Keys(args) => {
            let config = config::Config::load(cli.config.as_deref(), &home)?;
            keys_cmd::run(args, &config, &home, mode)
        }
        Command::Migrate(args) => migrate_cmd::run(args, mode),
        Command::Home => {
            let report = HomeReport {
                path: home.path.display().to_string(),
                source: home.source.name(),
            };
            output::emit(mode, &report, |r| {
                let mut table = output::table(&["data directory", "from"]);
                table.add_row(vec![r.path.clone(), r.source.to_owned()]);
                table
            })?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("skald: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
