//! `skald context`: what the model would see for a stored session — the context rebuilt from the
//! leaf, run through a policy's pipeline (`assemble`) with a cold state, the refs it hands out
//! stored in the local ref store.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use serde_json::Value;
use skald_core::codec::openclaw::encode_agent_messages;
use skald_core::memory::tools::tool_specs as memory_tool_specs;
use skald_core::render::render_messages;
use skald_core::tokens::estimate::estimate_messages_tokens;
use skald_engine::compact::session_context;
use skald_engine::memory::{
    MemoryIdentity, RecallReport, SessionMemoryReport, recall_for_turn, session_start_memory,
};
use skald_engine::{AssembleRequest, Assembled, SessionState, assemble};
use skald_llm::embedder_from_config;
use skald_store::sessions::{SessionError, SessionStore};
use skald_store::{DATABASE_FILE, RefSettings, SqliteRefStore};

use crate::config::Config;
use crate::home::Home;
use crate::memory_cmd::{Identity, IdentityArgs};
use crate::output::Mode;
use crate::replay_cmd::load_policy;
use crate::sessions_cmd::{now_ms, open_existing_store};

#[derive(Debug, Args)]
pub struct ContextArgs {
    /// The session id (`skald sessions` lists them).
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The policy: a preset (none, openclaw, sccs, skald) or a policy TOML file. `skald` carries
    /// the overrides of the configuration's [policy] table.
    #[arg(long, default_value = "skald")]
    pub policy: String,
    /// The model's context window in tokens (default: [llm] context_window_tokens of the
    /// configuration, else 200000).
    #[arg(long, value_name = "TOKENS")]
    pub window: Option<u64>,
    /// The tenant the session belongs to.
    #[arg(long, default_value = "default")]
    pub tenant: String,
    /// Rebuild from this entry instead of the session's leaf (another branch, an earlier point).
    #[arg(long, value_name = "ENTRY_ID")]
    pub leaf: Option<String>,
    /// Print the readable rendering even when stdout is not a terminal.
    #[arg(long)]
    pub text: bool,
    /// Add what long-term memory gives the call: the profile and tool memories in the system
    /// prompt, the `memory_ls` listing after the first user message, the memories recalled for
    /// the latest user messages (a simulated `search_memories` call), and the memory tools.
    /// Memories of the session's tenant, for [memory] user and agent of skald.toml.
    #[arg(long)]
    pub memory: bool,
    /// With --memory: the user whose memories are recalled (default: [memory] user).
    #[arg(long, value_name = "ID", requires = "memory")]
    pub user: Option<String>,
    /// With --memory: the agent whose memories are recalled (default: [memory] agent).
    #[arg(long, value_name = "ID", requires = "memory")]
    pub agent: Option<String>,
}

/// What memory added (`--memory`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct MemoryView {
    user: String,
    agent: String,
    session_start: SessionMemoryReport,
    recall: RecallReport,
}

/// The JSON form: OpenClaw's `assemble` result (`messages` as AgentMessages, `estimatedTokens`,
/// `systemPromptAddition`), plus what was asked.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ContextReport {
    session_id: String,
    policy: String,
    messages: Vec<Value>,
    estimated_tokens: u64,
    system_prompt_addition: Option<String>,
    /// Names of the tools the engine adds to the request (`fetch_original_data` once anything is
    /// a ref).
    tools: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<MemoryView>,
}

pub fn run(args: &ContextArgs, home: &Home, config: &Config, json: bool) -> Result<ExitCode> {
    if args.text && json {
        bail!("--text and --json exclude each other: choose one output");
    }
    let window = config.window_tokens(args.window);
    if window < 1_000 {
        bail!("--window is {window} tokens: a context window is at least 1000 tokens");
    }
    let policy = load_policy(&args.policy, config)?;
    let sessions = open_existing_store(home)?;
    let session = sessions.load(&args.tenant, &args.session)?;
    if let Some(leaf) = args.leaf.as_deref() {
        if session.entry(leaf).is_none() {
            return Err(SessionError::UnknownEntry {
                session: args.session.clone(),
                id: leaf.to_owned(),
            }
            .into());
        }
    }
    // The engine's view: what compaction summarises is what `context` shows (system messages
    // stored at the root stay in front of a compaction summary).
    let messages = session_context(&session, args.leaf.as_deref());
    let refs_path = home.path.join(DATABASE_FILE);
    let refs = SqliteRefStore::open(&refs_path, RefSettings::default())
        .with_context(|| format!("cannot open the ref store {}", refs_path.display()))?;
    let mut state = SessionState::default();
    let request = AssembleRequest {
        tenant: &args.tenant,
        context_window_tokens: window,
        now_ms: now_ms(),
        fetch_available: true,
    };
    let mut assembled = assemble(&refs, &policy, &mut state, messages, request)?;
    let mut tools: Vec<String> = assembled
        .tools
        .iter()
        .map(|tool| tool.name.clone())
        .collect();
    let memory = if args.memory {
        let view = add_memory(args, home, config, &mut assembled)?;
        tools.extend(memory_tool_specs().into_iter().map(|spec| spec.name));
        Some(view)
    } else {
        None
    };
    let report = ContextReport {
        session_id: args.session.clone(),
        policy: policy.name.clone(),
        messages: encode_agent_messages(&assembled.messages),
        estimated_tokens: assembled.estimated_tokens,
        system_prompt_addition: assembled.system_prompt_addition.clone(),
        tools,
        memory,
    };
    let mode = if args.text {
        Mode::Table
    } else {
        Mode::detect(json)
    };
    match mode {
        Mode::Json => crate::output::emit(mode, &report, |_| crate::output::table(&[]))?,
        Mode::Table => {
            print!("{}", render_report(&report, &assembled.messages));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Puts what memory gives the call into `assembled` (system prompt addition, listing, recall;
/// its tokens counted) and says what it found.
fn add_memory(
    args: &ContextArgs,
    home: &Home,
    config: &Config,
    assembled: &mut Assembled,
) -> Result<MemoryView> {
    // The memory commands' identity rules; the tenant is the session's.
    let Identity { user, agent, .. } = Identity::resolve(
        &IdentityArgs {
            user: args.user.clone(),
            agent: args.agent.clone(),
            tenant: Some(args.tenant.clone()),
        },
        config,
    )?;
    let identity = MemoryIdentity::new(&user, &agent)
        .with_context(|| format!("the memory identity (user {user:?}, agent {agent:?})"))?;
    let embedder = embedder_from_config(config.embedding.as_ref())
        .context("cannot use the embedder configured in [embedding]")?;
    let store = crate::memory_cmd::open_store(home)?;
    let settings = &config.memory.recall;
    let session_memory = session_start_memory(&store, &args.tenant, &identity, settings);
    if let Some(addition) = &session_memory.system_prompt_addition {
        assembled.system_prompt_addition = Some(match assembled.system_prompt_addition.take() {
            Some(existing) => format!("{existing}\n\n{addition}"),
            None => addition.clone(),
        });
    }
    let messages = session_memory.apply(std::mem::take(&mut assembled.messages));
    let recalled = crate::compact_cmd::runtime()?.block_on(recall_for_turn(
        &store,
        embedder.as_deref(),
        &args.tenant,
        &identity,
        settings,
        messages,
    ));
    assembled.messages = recalled.messages;
    assembled.estimated_tokens = estimate_messages_tokens(&assembled.messages);
    Ok(MemoryView {
        user,
        agent,
        session_start: session_memory.report,
        recall: recalled.report,
    })
}

/// The terminal form: a summary line, what the engine adds around the messages, then the
/// messages as the model reads them.
fn render_report(report: &ContextReport, messages: &[skald_core::message::Message]) -> String {
    let mut out = format!(
        "session {} · policy {} · {} messages · ~{} tokens\n",
        report.session_id,
        report.policy,
        messages.len(),
        report.estimated_tokens
    );
    if let Some(addition) = &report.system_prompt_addition {
        out.push_str(&format!("\n--- system prompt addition ---\n{addition}\n"));
    }
    if !report.tools.is_empty() {
        out.push_str(&format!(
            "\n--- tools added ---\n{}\n",
            report.tools.join(", ")
        ));
    }
    out.push('\n');
    out.push_str(&render_messages(messages));
    out
}
