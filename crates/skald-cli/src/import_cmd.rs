//! `skald import`: a transcript into the local session store, once — OpenClaw sessions with their
//! whole entry tree, every other format as a chain of messages.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use skald_store::sessions::SessionStore;
use skald_store::sessions::import::{ImportOptions, import_transcript};

use crate::home::Home;
use crate::output::{self, Mode};
use crate::sessions_cmd::{now_ms, open_store};

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The transcript: an OpenClaw session JSONL, a Claude Code session, an OpenAI or Anthropic
    /// request or response, a mini-swe-agent or SWE-agent trajectory.
    #[arg(value_name = "TRANSCRIPT")]
    pub path: PathBuf,
    /// The tenant the session belongs to.
    #[arg(long, default_value = "default")]
    pub tenant: String,
    /// Store it under this session id instead of the transcript's own (OpenClaw's header id) or
    /// the one derived from its opening messages.
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,
}

#[derive(Debug, Serialize)]
struct ImportReport {
    session_id: String,
    tenant: String,
    format: &'static str,
    /// `created`, `appended` or `already_imported`.
    status: &'static str,
    entries_added: usize,
    /// Entries the session holds now, of every branch.
    entries: u64,
    messages: u64,
    title: Option<String>,
    /// Lines the reader skipped or repaired, with the reason.
    issues: Vec<String>,
}

pub fn run(args: &ImportArgs, home: &Home, mode: Mode) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&args.path)
        .with_context(|| format!("cannot read {}", args.path.display()))?;
    home.ensure()?;
    let store = open_store(home)?;
    let options = ImportOptions {
        source: Some(args.path.display().to_string()),
        session_id: args.session_id.clone(),
        now_ms: now_ms(),
    };
    let outcome = import_transcript(&store, &args.tenant, &text, &options)
        .with_context(|| format!("cannot import {}", args.path.display()))?;
    let info = store.get(&args.tenant, &outcome.session_id)?;
    let report = ImportReport {
        session_id: outcome.session_id,
        tenant: args.tenant.clone(),
        format: outcome.format.name(),
        status: outcome.status.name(),
        entries_added: outcome.entries_added,
        entries: info.entry_count,
        messages: info.message_count,
        title: info.title,
        issues: outcome.issues.iter().map(ToString::to_string).collect(),
    };
    output::emit(mode, &report, |r| {
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
            r.format.to_owned(),
            r.status.to_owned(),
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
