//! `skald sessions`: the sessions in the local store (or a server's, `GET /v1/sessions`), with
//! their size and the tokens their context holds; and the opening of that store, shared by the
//! session commands.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};
use skald_core::ids::{SessionId, Tenant};
use skald_core::time::format_rfc3339_seconds;
use skald_core::tokens::estimate_messages_tokens;
use skald_store::DATABASE_FILE;
use skald_store::sessions::{SessionStore, SqliteSessionStore};

use crate::home::Home;
use crate::output::{self, Mode};
use crate::remote::{self, Remote};

/// The tenant of a local command: its `--tenant`, parsed here once, or the default tenant
/// ([`Tenant::default`]) when none is given.
pub fn tenant_arg(tenant: Option<&str>) -> Result<Tenant> {
    match tenant {
        Some(name) => Tenant::parse(name).context("--tenant"),
        None => Ok(Tenant::default()),
    }
}

/// A session id given on the command line, parsed here once; `arg` names the argument (`SESSION`,
/// `--session-id`) in the error.
pub fn session_arg(id: &str, arg: &str) -> Result<SessionId> {
    SessionId::parse(id).with_context(|| arg.to_owned())
}

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

/// Opens the session store in the data directory's database (created if missing).
pub fn open_store(home: &Home) -> Result<SqliteSessionStore> {
    let path = home.path.join(DATABASE_FILE);
    SqliteSessionStore::open(&path)
        .with_context(|| format!("cannot open the session store {}", path.display()))
}

/// Opens the session store for a command that reads sessions: a data directory without a
/// database has none, which is said plainly rather than creating an empty store.
pub fn open_existing_store(home: &Home) -> Result<SqliteSessionStore> {
    let path = home.path.join(DATABASE_FILE);
    if !path.exists() {
        bail!(
            "no session store at {} (data directory from {}): import a transcript first with \
             `skald import FILE`",
            path.display(),
            home.source.name()
        );
    }
    open_store(home)
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

pub fn run(
    args: &SessionsArgs,
    home: &Home,
    remote: Option<&Remote>,
    mode: Mode,
) -> Result<ExitCode> {
    if let Some(remote) = remote {
        remote::refuse("--tenant", args.tenant.is_some(), remote::TENANT_FROM_KEY)?;
        let listed: ServerSessions = remote.get(&["v1", "sessions"], &[])?;
        let rows: Vec<SessionRow> = listed.sessions.into_iter().map(SessionRow::from).collect();
        return print_rows(&rows, mode);
    }
    let tenant = tenant_arg(args.tenant.as_deref())?;
    let rows = if home.path.join(DATABASE_FILE).exists() {
        let store = open_store(home)?;
        let mut rows = Vec::new();
        for info in store.list(&tenant)? {
            let session = session_arg(&info.id, "a stored session's id")?;
            let context = store.context(&tenant, &session, None)?;
            rows.push(SessionRow {
                estimated_tokens: estimate_messages_tokens(&context),
                session_id: info.id,
                title: info.title,
                source_format: info.source_format,
                source: info.source,
                entries: info.entry_count,
                messages: info.message_count,
                leaf_id: info.leaf_id,
                updated_at: format_rfc3339_seconds(info.updated_at_ms),
            });
        }
        rows
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
