//! `skald keys create|list|revoke`: the API keys of `skald serve`, each bound to one tenant.
//! The secret is printed once, at creation; the store keeps only its hash.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde::Serialize;
use skald_core::ids::Tenant;
use skald_core::time::format_rfc3339_seconds;
use skald_engine::storage::{ApiKey, DATABASE_FILE, redact};
use skald_engine::{DatabaseLocation, open_key_store};

use crate::config::Config;
use crate::home::Home;
use crate::output::{self, Mode};

#[derive(Debug, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub command: KeysCommand,
    /// The PostgreSQL database of the server's stores (default: [database] url in skald.toml,
    /// else the data directory's SQLite file).
    #[arg(long, value_name = "URL", global = true)]
    pub database: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key for a tenant and print its secret (shown only this once).
    ///
    /// Output (JSON): {id, tenant, name, prefix, created_at, secret}.
    ///
    /// Examples:
    ///   skald keys create --tenant acme --name "ci runner"
    #[command(verbatim_doc_comment)]
    Create {
        /// The tenant whose sessions, refs and memories the key reaches.
        #[arg(long)]
        tenant: String,
        /// Who or what uses the key.
        #[arg(long, default_value = "default")]
        name: String,
    },
    /// List every key (revoked ones too), without secrets.
    ///
    /// Output (JSON): [{id, tenant, name, prefix, created_at, revoked_at}].
    List,
    /// Revoke a key by id; it stops working at once.
    ///
    /// Examples:
    ///   skald keys revoke key_3fa2b1c9d0e4f5a6
    #[command(verbatim_doc_comment)]
    Revoke {
        /// The key's id, from `skald keys list`.
        id: String,
    },
}

#[derive(Debug, Clone, Serialize)]
struct KeyView {
    id: String,
    tenant: String,
    name: String,
    prefix: String,
    created_at: String,
    revoked_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

fn view(key: ApiKey, secret: Option<String>) -> KeyView {
    KeyView {
        id: key.id,
        tenant: key.tenant,
        name: key.name,
        prefix: key.prefix,
        created_at: format_rfc3339_seconds(key.created_at_ms),
        revoked_at: key.revoked_at_ms.map(format_rfc3339_seconds),
        secret,
    }
}

pub fn run(args: &KeysArgs, config: &Config, home: &Home, mode: Mode) -> Result<ExitCode> {
    // Bad input is refused before the store is opened (and so before a data directory is made).
    let new_key_tenant = match &args.command {
        KeysCommand::Create { tenant, name } => {
            let tenant = Tenant::parse(tenant.as_str())?;
            if name.trim().is_empty() {
                anyhow::bail!("--name is empty: say who or what uses the key");
            }
            Some(tenant)
        }
        KeysCommand::List | KeysCommand::Revoke { .. } => None,
    };
    let keys = match crate::serve_cmd::database_url(config, args.database.as_deref())? {
        Some(url) => open_key_store(DatabaseLocation::Postgres(&url))
            .with_context(|| format!("cannot open the key store in {}", redact(&url)))?,
        None => {
            let path = home.ensure()?.join(DATABASE_FILE);
            open_key_store(DatabaseLocation::Sqlite(&path))
                .with_context(|| format!("cannot open the key store {}", path.display()))?
        }
    };
    let rows = match &args.command {
        KeysCommand::Create { name, .. } => {
            let Some(tenant) = &new_key_tenant else {
                anyhow::bail!("the tenant of the new key was not parsed");
            };
            let created = keys.create(tenant, name)?;
            vec![view(created.key, Some(created.secret))]
        }
        KeysCommand::List => keys
            .list()?
            .into_iter()
            .map(|key| view(key, None))
            .collect(),
        KeysCommand::Revoke { id } => vec![view(keys.revoke(id)?, None)],
    };
    let render = |rows: &[KeyView]| {
        let mut table = output::table(&[
            "id", "tenant", "name", "prefix", "created", "revoked", "secret",
        ]);
        for row in rows {
            table.add_row(vec![
                row.id.clone(),
                row.tenant.clone(),
                row.name.clone(),
                row.prefix.clone(),
                row.created_at.clone(),
                row.revoked_at.clone().unwrap_or_default(),
                row.secret.clone().unwrap_or_default(),
            ]);
        }
        table
    };
    match (&args.command, rows.first()) {
        (KeysCommand::List, _) | (_, None) => output::emit(mode, &rows, |rows| render(rows))?,
        (KeysCommand::Create { .. } | KeysCommand::Revoke { .. }, Some(row)) => {
            output::emit(mode, row, |row| render(std::slice::from_ref(row)))?;
        }
    }
    if let KeysCommand::Create { .. } = &args.command {
        eprintln!("skald: store the secret now: it is not shown again (only its hash is kept)");
    }
    Ok(ExitCode::SUCCESS)
}
