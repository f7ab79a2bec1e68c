//! `skald context`: what the model would see for a stored session — `Engine::view` (the
//! builder the server's assemble and context routes use) from the session's leaf with a cold
//! state, the refs it hands out stored in the local ref store; with `--url`, the server's
//! `GET /v1/sessions/{id}/context`, printed the same way.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use skald_core::codec::openclaw::{decode_agent_message_at, encode_agent_messages};
use skald_core::message::Message;
use skald_core::render::{ContextHeading, render_context};
use skald_engine::memory::{KeptRecallReport, RecallReport, SessionMemoryReport};
use skald_engine::{View, ViewOptions};

use crate::config::Config;
use crate::home::Home;
use crate::local::{self, Models, StoreKind, StoreLocation};
use crate::memory_cmd::{Identity, IdentityArgs};
use crate::output::Mode;
use crate::remote::{self, Remote};
use crate::replay_cmd::load_policy;

#[derive(Debug, Args)]
pub struct ContextArgs {
    /// The session id (`skald sessions` lists them).
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The policy: a preset (none, openclaw, openclaw-seed, sccs, skald) or a policy TOML file
    /// (default:
    /// skald, which carries the overrides of the configuration's [policy] table; with --url
    /// the server's policy).
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<String>,
    /// The model's context window in tokens (default: [llm] context_window_tokens of the
    /// configuration, else 200000; with --url the server's window).
    #[arg(long, value_name = "TOKENS")]
    pub window: Option<u64>,
    /// The tenant the session belongs to (default: default; with --url the key's).
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
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

/// What memory added (`--memory`); the server's context route answers the same under `memory`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct MemoryView {
    user: String,
    agent: String,
    session_start: SessionMemoryReport,
    recall: RecallReport,
    kept_recalls: KeptRecallReport,
}

/// The JSON form: OpenClaw's `assemble` result (`messages` as AgentMessages, `estimatedTokens`,
/// `systemPromptAddition`), plus what was asked.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ContextReport {
    session_id: String,
    policy: String,
    messages: Vec<Value>,
    /// The messages and the system prompt addition (tools excluded).
    estimated_tokens: u64,
    system_prompt_addition: Option<String>,
    /// Names of the tools the engine adds to the request (`fetch_original_data` once anything is
    /// a ref, the memory tools with --memory).
    tools: Vec<String>,
    /// [`MemoryView`], as JSON (the server's answer is passed on as it came).
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<Value>,
}

/// The server's context answer, as far as `context` reads it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServerContext {
    session_id: String,
    policy: String,
    messages: Vec<Value>,
    estimated_tokens: u64,
    system_prompt_addition: Option<String>,
    tools: Vec<ServerTool>,
    memory: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct ServerTool {
    name: String,
}

pub fn run(
    args: &ContextArgs,
    home: &Home,
    config: Option<&Config>,
    remote: Option<&Remote>,
    json: bool,
) -> Result<ExitCode> {
    if args.text && json {
        bail!("--text and --json exclude each other: choose one output");
    }
    let (report, messages) = match (remote, config) {
        (Some(remote), _) => context_remote(args, remote)?,
        (None, Some(config)) => context_local(args, home, config)?,
        (None, None) => bail!("the configuration was not loaded"),
    };
    let mode = if args.text {
        Mode::Table
    } else {
        Mode::detect(json)
    };
    match mode {
        Mode::Json => crate::output::emit(mode, &report, |_| crate::output::table(&[]))?,
        Mode::Table => {
            print!("{}", render_report(&report, &messages));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The server's context of the session (its policy, its window unless --window, its memory).
fn context_remote(args: &ContextArgs, remote: &Remote) -> Result<(ContextReport, Vec<Message>)> {
    remote::refuse("--tenant", args.tenant.is_some(), remote::TENANT_FROM_KEY)?;
    remote::refuse(
        "--policy",
        args.policy.is_some(),
        "the server assembles with its own policy ([policy] of its skald.toml)",
    )?;
    remote::refuse(
        "--leaf",
        args.leaf.is_some(),
        "the server builds the context from the session's leaf",
    )?;
    let query = [
        ("memory", args.memory.then(|| "true".to_owned())),
        ("tokenBudget", args.window.map(|window| window.to_string())),
        ("user", args.user.clone()),
        ("agent", args.agent.clone()),
    ];
    let answer: ServerContext =
        remote.get(&["v1", "sessions", &args.session, "context"], &query)?;
    let messages = decode_messages(&answer.messages)?;
    let report = ContextReport {
        session_id: answer.session_id,
        policy: answer.policy,
        messages: answer.messages,
        estimated_tokens: answer.estimated_tokens,
        system_prompt_addition: answer.system_prompt_addition,
        tools: answer.tools.into_iter().map(|tool| tool.name).collect(),
        memory: answer.memory,
    };
    Ok((report, messages))
}

fn decode_messages(values: &[Value]) -> Result<Vec<Message>> {
    values
        .iter()
        .enumerate()
        .map(|(index, value)| {
            decode_agent_message_at(value, &format!("messages[{index}]"))
                .context("the server's context holds a message this skald cannot read")
        })
        .collect()
}

fn context_local(
    args: &ContextArgs,
    home: &Home,
    config: &Config,
) -> Result<(ContextReport, Vec<Message>)> {
    let window = config.window_tokens(args.window);
    if window < 1_000 {
        bail!("--window is {window} tokens: a context window is at least 1000 tokens");
    }
    let policy = load_policy(args.policy.as_deref().unwrap_or("skald"), config)?;
    let tenant = local::tenant_arg(args.tenant.as_deref())?;
    let session = local::session_arg(&args.session, "SESSION")?;
    let location = StoreLocation::of(config);
    local::require_session_store(home, &location)?;
    let stores = local::open_stores(home, &location, StoreKind::Sessions, &config.refs)?;
    let identity = if args.memory {
        // The memory commands' identity rules; the tenant is the session's.
        let identity = Identity::resolve(
            &IdentityArgs {
                user: args.user.clone(),
                agent: args.agent.clone(),
                tenant: Some(tenant.to_string()),
            },
            config,
        )?;
        Some(identity.memory_identity()?)
    } else {
        None
    };
    let models = Models {
        summarizer: false,
        embedder: args.memory,
    };
    let mut engine_config = local::engine_config(config, args.window, args.memory, models)?;
    engine_config.policy = policy;
    let engine = local::engine(stores, engine_config)?;
    // An unknown session (or tenant) fails here, with the store's own error.
    engine.session_info(&tenant, &session)?;
    let options = ViewOptions {
        window_tokens: Some(window),
        // The view shows everything skald would offer a host that runs all of its tools.
        available_tools: None,
        with_memory: args.memory,
        identity,
        pending_prompt: None,
    };
    let View {
        view,
        tools,
        identity,
    } = match args.leaf.as_deref() {
        Some(leaf) => local::block_on(engine.view_at_leaf(&tenant, &session, leaf, options))??,
        None => local::block_on(engine.view(&tenant, &session, options))??,
    };
    let memory_view = match (view.memory.clone(), &identity) {
        (Some(report), Some(identity)) => Some(serde_json::to_value(MemoryView {
            user: identity.user().to_owned(),
            agent: identity.agent().to_owned(),
            session_start: report.session_start,
            recall: report.recall,
            kept_recalls: report.kept_recalls,
        })?),
        (Some(_), None) | (None, _) => None,
    };
    let report = ContextReport {
        session_id: args.session.clone(),
        policy: engine.config().policy.name.clone(),
        messages: encode_agent_messages(&view.messages),
        estimated_tokens: view.estimated_tokens(),
        system_prompt_addition: view.system_prompt_addition(),
        tools: tools.iter().map(|tool| tool.name.clone()).collect(),
        memory: memory_view,
    };
    Ok((report, view.messages))
}

/// The terminal form: [`render_context`], the dashboard's rendering too.
fn render_report(report: &ContextReport, messages: &[skald_core::message::Message]) -> String {
    render_context(
        &ContextHeading {
            session_id: &report.session_id,
            policy: &report.policy,
            estimated_tokens: report.estimated_tokens,
            system_prompt_addition: report.system_prompt_addition.as_deref(),
            tools: &report.tools,
        },
        messages,
    )
}
