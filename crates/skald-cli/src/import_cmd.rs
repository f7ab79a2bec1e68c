//! `skald import`: a transcript into the local session store (`Engine::import`) or a server's
//! (through `POST /v1/sessions/{id}/bootstrap`), once — OpenClaw sessions with their whole entry tree,
//! every other format as a chain of messages.
//!
//! A SQLite file (its first bytes say so) is OpenClaw 2026.9's transcript store
//! (`openclaw-agent.sqlite`): opened read-only, each of its sessions (or the one `--session`
//! names) is read back as a session JSONL and imported like one. Every session is read and
//! checked before the first is stored, so a damaged store imports nothing.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::json;
use skald_engine::now_ms;
use skald_engine::storage::RefSettings;
use skald_engine::transcripts::{
    ImportOptions, OpenClawStore, SQLITE_MAGIC, is_sqlite, plan_import,
};

use crate::home::Home;
use crate::local::{self, StoreKind, StoreLocation};
use crate::output::{self, Mode};
use crate::remote::{self, Remote};

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The transcript: an OpenClaw session JSONL (versions 1 to 4) or OpenClaw's SQLite
    /// transcript store (`openclaw-agent.sqlite`), a Claude Code session, an OpenAI or Anthropic
    /// request or response, a mini-swe-agent or SWE-agent trajectory.
    #[arg(value_name = "TRANSCRIPT")]
    pub path: PathBuf,
    /// With OpenClaw's SQLite store: import only this session of it (default: every session).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
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

/// `location`: where the local stores are (read only when there is no `remote`).
pub fn run(
    args: &ImportArgs,
    home: &Home,
    location: &dyn Fn() -> Result<StoreLocation>,
    remote: Option<&Remote>,
    mode: Mode,
) -> Result<ExitCode> {
    let session_id = args
        .session_id
        .as_deref()
        .map(|id| local::session_arg(id, "--session-id"))
        .transpose()?;
    if starts_like_sqlite(args)? {
        return run_openclaw_store(args, (home, location), remote, mode, session_id);
    }
    if args.session.is_some() {
        anyhow::bail!(
            "--session picks a session of OpenClaw's SQLite transcript store, and {} is not one \
             (use --session-id to store a transcript under another id)",
            args.path.display()
        );
    }
    let text = std::fs::read_to_string(&args.path)
        .with_context(|| format!("cannot read {}", args.path.display()))?;
    let options = ImportOptions {
        source: Some(args.path.display().to_string()),
        session_id,
        now_ms: now_ms(),
    };
    let report = match remote {
        Some(remote) => import_remote(args, &text, &options, remote)?,
        None => import_local(args, &text, &options, home, &location()?)?,
    };
    print(&report, mode)
}

/// True when the file begins with SQLite's 16-byte header.
fn starts_like_sqlite(args: &ImportArgs) -> Result<bool> {
    let mut head = [0_u8; SQLITE_MAGIC.len()];
    let mut file = std::fs::File::open(&args.path)
        .with_context(|| format!("cannot read {}", args.path.display()))?;
    let mut filled = 0;
    // A short read is not the end of the file; read until the header is whole or the file ends.
    while filled < head.len() {
        let Some(rest) = head.get_mut(filled..) else {
            break;
        };
        let read = file
            .read(rest)
            .with_context(|| format!("cannot read {}", args.path.display()))?;
        if read == 0 {
            break;
        }
        filled += read;
    }
    Ok(head.get(..filled).is_some_and(is_sqlite))
}

/// Imports the sessions of OpenClaw's SQLite transcript store: all of them, or `--session`.
/// Every session is read and planned before anything is stored.
fn run_openclaw_store(
    args: &ImportArgs,
    (home, location): (&Home, &dyn Fn() -> Result<StoreLocation>),
    remote: Option<&Remote>,
    mode: Mode,
    session_id: Option<skald_core::ids::SessionId>,
) -> Result<ExitCode> {
    let cannot = || format!("cannot import {}", args.path.display());
    let store = OpenClawStore::open(&args.path).with_context(cannot)?;
    let chosen = match &args.session {
        Some(session) => vec![session.clone()],
        None => store.session_ids().with_context(cannot)?,
    };
    if chosen.len() > 1 && session_id.is_some() {
        anyhow::bail!(
            "{} holds {} sessions; --session-id can name only one (pick it with --session)",
            args.path.display(),
            chosen.len()
        );
    }
    let mut planned = Vec::with_capacity(chosen.len());
    for session in &chosen {
        let text = store.session_jsonl(session).with_context(cannot)?;
        let id = match &session_id {
            Some(id) => id.clone(),
            // The store's key, which OpenClaw's engine calls also carry as `sessionId`.
            None => local::session_arg(session, "the store's session_id")?,
        };
        let options = ImportOptions {
            source: Some(format!("{}#{session}", args.path.display())),
            session_id: Some(id),
            now_ms: now_ms(),
        };
        plan_import(&text, &options).with_context(|| {
            format!(
                "cannot import session {session:?} of {}",
                args.path.display()
            )
        })?;
        planned.push((text, options));
    }
    let location = match remote {
        Some(_) => None,
        None => Some(location()?),
    };
    let mut reports = Vec::with_capacity(planned.len());
    for (text, options) in &planned {
        reports.push(match (remote, &location) {
            (Some(remote), _) => import_remote(args, text, options, remote)?,
            (None, Some(location)) => import_local(args, text, options, home, location)?,
            (None, None) => anyhow::bail!("the store's location was not read"),
        });
    }
    print_all(&reports, mode)
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
    location: &StoreLocation,
) -> Result<ImportReport> {
    let tenant = local::tenant_arg(args.tenant.as_deref())?;
    home.ensure()?;
    let engine = local::local_engine(
        home,
        location,
        StoreKind::Sessions,
        // A command that stores no ref: how long refs are kept is the writers' setting.
        &RefSettings::default(),
        local::default_engine_config()?,
    )?;
    let outcome = engine
        .import(&tenant, text, options)
        .with_context(|| format!("cannot import {}", args.path.display()))?;
    let info = engine.session_info(&tenant, &outcome.session_id)?;
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
    output::emit(mode, report, |r| report_table(std::slice::from_ref(r)))?;
    Ok(ExitCode::SUCCESS)
}

/// A store's sessions: a JSON array of the reports one transcript's import prints.
fn print_all(reports: &[ImportReport], mode: Mode) -> Result<ExitCode> {
    output::emit(mode, &reports, |r| report_table(r))?;
    Ok(ExitCode::SUCCESS)
}

fn report_table(reports: &[ImportReport]) -> comfy_table::Table {
    let mut table = output::table(&[
        "session_id",
        "format",
        "status",
        "entries added",
        "entries",
        "messages",
    ]);
    for r in reports {
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
    }
    table
}
