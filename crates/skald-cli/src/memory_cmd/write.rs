//! `skald remember` and `skald forget`: memories written and forgotten by hand.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use serde_json::json;
use skald_core::memory::uri::MemoryCategory;
use skald_engine::memory::manage::{ForgetReport, RememberReport};

use super::{Identity, IdentityArgs, memory_engine, parse_uri};
use crate::config::Config;
use crate::home::Home;
use crate::local;
use crate::output::{self, Mode};
use crate::remote::Remote;

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
    let engine = memory_engine(home, config, true)?;
    let memory_identity = identity.memory_identity()?;
    let report = local::block_on(engine.remember(
        &identity.tenant,
        &memory_identity,
        &args.content,
        args.memory_type.category(),
        args.priority,
    ))??;
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
    let engine = memory_engine(home, config, false)?;
    let reports = engine.forget_memories(&identity.tenant, &uri, args.recursive)?;
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
