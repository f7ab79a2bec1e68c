//! `skald sessions`: the sessions in the local store, with their size and the tokens their
//! context holds; and the opening of that store, shared by the session commands.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use skald_core::tokens::estimate_messages_tokens;
use skald_store::DATABASE_FILE;
use skald_store::sessions::{SessionStore, SqliteSessionStore};

use crate::home::Home;
use crate::output::{self, Mode};

#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// The tenant whose sessions to list.
    #[arg(long, default_value = "default")]
    pub tenant: String,
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

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn run(args: &SessionsArgs, home: &Home, mode: Mode) -> Result<ExitCode> {
    let rows = if home.path.join(DATABASE_FILE).exists() {
        let store = open_store(home)?;
        let mut rows = Vec::new();
        for info in store.list(&args.tenant)? {
            let context = store.context(&args.tenant, &info.id, None)?;
            rows.push(SessionRow {
                estimated_tokens: estimate_messages_tokens(&context),
                session_id: info.id,
                title: info.title,
                source_format: info.source_format,
                source: info.source,
                entries: info.entry_count,
                messages: info.message_count,
                leaf_id: info.leaf_id,
                updated_at: iso(info.updated_at_ms),
            });
        }
        rows
    } else {
        Vec::new()
    };
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
        for row in rows {
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
