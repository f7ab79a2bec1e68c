//! `skald import`: a transcript into the local session store (`Engine::import`) or a server's
//! (through `POST /v1/sessions/{id}/bootstrap`), once — OpenClaw sessions with their whole entry tree,
//! every other format as a chain of messages.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::json;
use skald_store::sessions::import::{ImportOptions, plan_import};

use crate::home::Home;
use crate::local::{self, StoreKind};
use crate::output::{self, Mode};
use crate::remote::{self, Remote};
use skald_store::clock::now_ms;

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The transcript: an OpenClaw session JSONL, a Claude Code session, an OpenAI or Anthropic
    /// request or response, a mini-swe-agent or SWE-agent trajectory.
    #[arg(value_name = "TRANSCRIPT")]
    pub path: PathBuf,
    /// The tenant the session belongs to (default: default; with --url the key's).
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
    /// Store it under this session id instead of the transcript's own (OpenClaw's header id) or
    /// the one derived from its opening messages.
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,
}

/// What `import` prints; the server's bootstrap answers the same fields (in the engine API's
/// camelCase) under `import`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all(deserialize = "camelCase"))]
struct ImportReport {
    session_id: String,
    tenant: String,
    format: String,
    /// `created`, `appended` or `already_imported`.
    status: String,
    entries_added: usize,
    /// Entries the session holds now, of every branch.
    entries: u64,
    messages: u64,
    title: Option<String>,
    /// Lines the reader skipped or repaired, with the reason.
    issues: Vec<String>,
}

/// The server's bootstrap answer, as far as `import` reads it.
#[derive(Debug, Deserialize)]
struct BootstrapAnswer {
    import: Option<ImportReport>,
}

pub fn run(
    args: &ImportArgs,
    home: &Home,
    remote: Option<&Remote>,
    mode: Mode,
) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&args.path)
        .with_context(|| format!("cannot read {}", args.path.display()))?;
    let session_id = args
        .session_id
        .as_deref()
        .map(|id| local::session_arg(id, "--session-id"))
        .transpose()?;
    let options = ImportOptions {
        source: Some(args.path.display().to_string()),
        session_id,
        now_ms: now_ms(),
    };
    let report = match remote {
        Some(remote) => import_remote(args, &text, &options, remote)?,
        None => import_local(args, &text, &options, home)?,
    };
    print(&report, mode)
}

/// Bootstraps the session on the server with the transcript's content. The session id is the
/// transcript's own (or `--session-id`), decided here exactly as a local import decides it.
fn import_remote(
    args: &ImportArgs,
    text: &str,
    options: &ImportOptions,
    remote: &Remote,
) -> Result<ImportReport> {
    remote::refuse("--tenant", args.tenant.is_some(), remote::TENANT_FROM_KEY)?;
    let plan = plan_import(text, options)
        .with_context(|| format!("cannot import {}", args.path.display()))?;
    let session_id = plan.header.id;
    let body = json!({
        "sessionJsonl": text,
        "sessionFile": options.source,
    });
    let answer: BootstrapAnswer = remote
        .post(&["v1", "sessions", &session_id, "bootstrap"], &body)
        .with_context(|| format!("cannot import {}", args.path.display()))?;
    answer.import.with_context(|| {
        format!(
            "the server at {} bootstrapped session {session_id:?} but did not say what it \
             imported (is it an older skald?)",
            remote.base()
        )
    })
}

fn import_local(
    args: &ImportArgs,
    text: &str,
    options: &ImportOptions,
    home: &Home,
) -> Result<ImportReport> {
    let tenant = local::tenant_arg(args.tenant.as_deref())?;
    home.ensure()?;
    let engine = local::local_engine(home, StoreKind::Sessions, local::default_engine_config()?)?;
    let outcome = engine
        .import(&tenant, text, options)
        .with_context(|| format!("cannot import {}", args.path.display()))?;
    let info = engine.sessions().get(&tenant, &outcome.session_id)?;
    Ok(ImportReport {
        session_id: outcome.session_id.to_string(),
        tenant: tenant.to_string(),
        format: outcome.format.name().to_owned(),
        status: outcome.status.name().to_owned(),
        entries_added: outcome.entries_added,
        entries: info.entry_count,
        messages: info.message_count,
        title: info.title,
        issues: outcome.issues.iter().map(ToString::to_string).collect(),
    })
}

fn print(report: &ImportReport, mode: Mode) -> Result<ExitCode> {
    output::emit(mode, report, |r| {
        let mut table = output::table(&[
            "session_id",
            "format",
            "status",
            "entries added",
            "entries",
            "messages",
        ]);
        table.add_row(vec![
            r.session_id.clone(),
            r.format.clone(),
            r.status.clone(),
            r.entries_added.to_string(),
            r.entries.to_string(),
            r.messages.to_string(),
        ]);
        for issue in &r.issues {
            table.add_row(vec![format!("issue: {issue}")]);
        }
        table
    })?;
    Ok(ExitCode::SUCCESS)
}
