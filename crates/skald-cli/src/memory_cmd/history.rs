//! `skald history`: the tenant's latest memory writes, or every version of one entry.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use skald_core::memory::uri::MemoryUri;
use skald_engine::memory::manage::{VersionRow, WriteRow};

use super::{Identity, IdentityArgs, memory_engine, parse_uri};
use crate::config::Config;
use crate::home::Home;
use crate::output::{self, Mode};
use crate::remote::Remote;

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// How many writes to list, newest first (1 to 1000).
    #[arg(long, short = 'n', default_value_t = 20, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub limit: u16,
    /// Instead, every version of this one entry, newest first.
    #[arg(long, value_name = "URI")]
    pub uri: Option<String>,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

pub fn run_history(
    args: &HistoryArgs,
    home: &Home,
    config: &Config,
    mode: Mode,
) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let entry = history_entry(args)?;
    let engine = memory_engine(home, config, false)?;
    if let Some(uri) = entry {
        let versions = engine.memory_versions(&identity.tenant, &uri)?;
        return print_versions(&versions, mode);
    }
    let rows = engine.recent_memory_writes(&identity.tenant, usize::from(args.limit))?;
    print_writes(&rows, mode)
}

/// `--uri` of history, checked to name an entry.
fn history_entry(args: &HistoryArgs) -> Result<Option<MemoryUri>> {
    args.uri
        .as_deref()
        .map(|text| -> Result<MemoryUri> {
            let uri = parse_uri(text, "--uri")?;
            uri.require_entry()?;
            Ok(uri)
        })
        .transpose()
}

pub fn run_history_remote(args: &HistoryArgs, remote: &Remote, mode: Mode) -> Result<ExitCode> {
    args.identity.check_remote_uri_only("history")?;
    let entry = history_entry(args)?;
    let query = [
        ("limit", Some(args.limit.to_string())),
        ("uri", entry.as_ref().map(ToString::to_string)),
    ];
    let path = ["v1", "memory", "history"];
    match entry {
        Some(_) => print_versions(&remote.get::<Vec<VersionRow>>(&path, &query)?, mode),
        None => print_writes(&remote.get::<Vec<WriteRow>>(&path, &query)?, mode),
    }
}

fn print_versions(versions: &[VersionRow], mode: Mode) -> Result<ExitCode> {
    output::emit(mode, &versions, |versions| {
        let mut table = output::table(&["version", "status", "written", "abstract"]);
        for row in versions.iter() {
            table.add_row(vec![
                row.version.to_string(),
                row.status.clone(),
                row.written_at.clone(),
                row.l0.clone(),
            ]);
        }
        table
    })?;
    Ok(ExitCode::SUCCESS)
}

fn print_writes(rows: &[WriteRow], mode: Mode) -> Result<ExitCode> {
    output::emit(mode, &rows, |rows| {
        let mut table = output::table(&["when", "action", "uri", "abstract"]);
        for row in rows.iter() {
            let uri = match &row.requested_uri {
                Some(requested) if *requested != row.uri => format!("{requested} → {}", row.uri),
                Some(_) | None => row.uri.to_string(),
            };
            table.add_row(vec![
                row.at.clone(),
                format!("{:?}", row.action).to_lowercase(),
                uri,
                row.l0.clone(),
            ]);
        }
        table
    })?;
    Ok(ExitCode::SUCCESS)
}
