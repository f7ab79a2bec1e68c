//! `skald fetch`: the original content behind a ref id, from the local ref store
//! (`Engine::fetch`, the executor of `fetch_original_data`) or a server's
//! (`POST /v1/refs/fetch`) — the same slices (`--lines`, `--grep`) a model gets from
//! `fetch_original_data`.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::home::Home;
use crate::local::{self, StoreKind, StoreLocation};
use crate::output::Mode;
use crate::remote::{self, Remote};
use skald_engine::storage::RefSettings;

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Ref ids (64 hex characters) or whole `[REF_ID: …]` tokens.
    #[arg(required = true, value_name = "REF_ID")]
    pub ref_ids: Vec<String>,
    /// Only these lines, 1-based and inclusive: "120:180", "120:" or ":50".
    #[arg(long)]
    pub lines: Option<String>,
    /// Only lines matching this regular expression, with --context lines around each.
    #[arg(long)]
    pub grep: Option<String>,
    /// Lines of context around each --grep match.
    #[arg(long, default_value_t = 2)]
    pub context: u64,
    /// Cap on characters printed per ref.
    #[arg(long, default_value_t = 20_000)]
    pub max_chars: u64,
    /// The tenant whose refs to read (default: default; with --url the key's).
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
}

/// What `fetch` prints; the server's `POST /v1/refs/fetch` answers the same fields.
#[derive(Debug, Serialize, Deserialize)]
struct FetchReport {
    found: usize,
    failed: usize,
    text: String,
}

/// `location`: where the local stores are (read only when there is no `remote`).
pub fn run(
    args: &FetchArgs,
    home: &Home,
    location: impl FnOnce() -> Result<StoreLocation>,
    remote: Option<&Remote>,
    mode: Mode,
) -> Result<ExitCode> {
    let report = match remote {
        Some(remote) => fetch_remote(args, remote)?,
        None => fetch_local(args, home, &location()?)?,
    };
    match mode {
        Mode::Json => crate::output::emit(mode, &report, |_| crate::output::table(&[]))?,
        Mode::Table => print!("{}", report.text),
    }
    Ok(if report.failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn fetch_remote(args: &FetchArgs, remote: &Remote) -> Result<FetchReport> {
    remote::refuse("--tenant", args.tenant.is_some(), remote::TENANT_FROM_KEY)?;
    let mut body = json!({
        "ref_ids": args.ref_ids,
        "context": args.context,
        "max_chars": args.max_chars,
    });
    if let Some(lines) = &args.lines {
        body["lines"] = json!(lines);
    }
    if let Some(grep) = &args.grep {
        body["grep"] = json!(grep);
    }
    remote.post(&["v1", "refs", "fetch"], &body)
}

fn fetch_local(args: &FetchArgs, home: &Home, location: &StoreLocation) -> Result<FetchReport> {
    let tenant = local::tenant_arg(args.tenant.as_deref())?;
    if let Some(path) = location.missing_file(home) {
        bail!(
            "no ref store at {} (data directory from {}): nothing has been offloaded there yet",
            path.display(),
            home.source.name()
        );
    }
    let engine = local::local_engine(
        home,
        location,
        StoreKind::Refs,
        // A command that stores no ref: how long refs are kept is the writers' setting.
        &RefSettings::default(),
        local::default_engine_config()?,
    )?;
    let mut arguments = json!({
        "ref_ids": args.ref_ids,
        "context": args.context,
        "max_chars": args.max_chars,
    });
    if let Some(lines) = &args.lines {
        arguments["lines"] = json!(lines);
    }
    if let Some(grep) = &args.grep {
        arguments["grep"] = json!(grep);
    }
    let output = engine.fetch(&tenant, &arguments);
    Ok(FetchReport {
        found: output.found_ids,
        failed: output.failed_ids,
        text: output.text,
    })
}
