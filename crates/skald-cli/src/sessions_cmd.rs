//! `skald sessions`: the sessions in the local store (`Engine::list_sessions`) or a server's
//! (`GET /v1/sessions`), with their size and the tokens their context holds.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde::{Deserialize, Serialize};
use skald_core::time::format_rfc3339_seconds;
use skald_engine::SessionOverview;
use skald_engine::storage::RefSettings;

use crate::home::Home;
use crate::local::{self, StoreKind, StoreLocation};
use crate::output::{self, Mode};
use crate::remote::{self, Remote};

#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// The tenant whose sessions to list (default: default; with --url the key's).
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
}

#[derive(Debug, Serialize)]
struct SessionRow {
    session_id: String,
    title: Option<String>,
    source_format: String,
    source: Option<String>,
    /// Entries of every branch.
    entries: u64,
    /// Message entries of every branch.
    messages: u64,
    /// Estimated tokens (chars/4) of the context rebuilt from the leaf, before any policy.
    estimated_tokens: u64,
    leaf_id: Option<String>,
    /// ISO 8601, UTC.
    updated_at: String,
}

/// A session as the server's `GET /v1/sessions` lists it (the fields `skald sessions` prints).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServerSession {
    session_id: String,
    title: Option<String>,
    source_format: String,
    source: Option<String>,
    entries: u64,
    messages: u64,
    estimated_tokens: u64,
    leaf_id: Option<String>,
    updated_at: String,
}

#[derive(Debug, Deserialize)]
struct ServerSessions {
    sessions: Vec<ServerSession>,
}

impl From<ServerSession> for SessionRow {
    fn from(session: ServerSession) -> SessionRow {
        SessionRow {
            session_id: session.session_id,
            title: session.title,
            source_format: session.source_format,
            source: session.source,
            entries: session.entries,
            messages: session.messages,
            estimated_tokens: session.estimated_tokens,
            leaf_id: session.leaf_id,
            updated_at: session.updated_at,
        }
    }
}

impl From<SessionOverview> for SessionRow {
    fn from(overview: SessionOverview) -> SessionRow {
        let info = overview.info;
        SessionRow {
            session_id: info.id,
            title: info.title,
            source_format: info.source_format,
            source: info.source,
            entries: info.entry_count,
            messages: info.message_count,
            estimated_tokens: overview.estimated_tokens,
            leaf_id: info.leaf_id,
            updated_at: format_rfc3339_seconds(info.updated_at_ms),
        }
    }
}

pub fn run(
    args: &SessionsArgs,
    home: &Home,
    location: impl FnOnce() -> Result<StoreLocation>,
    remote: Option<&Remote>,
    mode: Mode,
) -> Result<ExitCode> {
    if let Some(remote) = remote {
        remote::refuse("--tenant", args.tenant.is_some(), remote::TENANT_FROM_KEY)?;
        let listed: ServerSessions = remote.get(&["v1", "sessions"], &[])?;
        let rows: Vec<SessionRow> = listed.sessions.into_iter().map(SessionRow::from).collect();
        return print_rows(&rows, mode);
    }
    let tenant = local::tenant_arg(args.tenant.as_deref())?;
    let location = location()?;
    let rows = if location.missing_file(home).is_none() {
        let engine = local::local_engine(
            home,
            &location,
            StoreKind::Sessions,
            // A command that stores no ref: how long refs are kept is the writers' setting.
            &RefSettings::default(),
            local::default_engine_config()?,
        )?;
        engine
            .list_sessions(&tenant)
            .map_err(local::store_error)?
            .into_iter()
            .map(SessionRow::from)
            .collect()
    } else {
        Vec::new()
    };
    print_rows(&rows, mode)
}

fn print_rows(rows: &[SessionRow], mode: Mode) -> Result<ExitCode> {
    output::emit(mode, &rows, |rows| {
        let mut table = output::table(&[
            "session_id",
            "title",
            "source",
            "entries",
            "messages",
            "est. tokens",
            "updated",
        ]);
        for row in rows.iter() {
            let source = match &row.source {
                Some(source) => format!("{} ({source})", row.source_format),
                None => row.source_format.clone(),
            };
            table.add_row(vec![
                row.session_id.clone(),
                row.title.clone().unwrap_or_default(),
                source,
                row.entries.to_string(),
                row.messages.to_string(),
                row.estimated_tokens.to_string(),
                row.updated_at.clone(),
            ]);
        }
        table
    })?;
    Ok(ExitCode::SUCCESS)
}
