//! `skald fetch`: the original content behind a ref id, from the local ref store — the same
//! slices (`--lines`, `--grep`) a model gets from `fetch_original_data`.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use serde::Serialize;
use serde_json::json;
use skald_engine::execute_fetch;
use skald_store::{DATABASE_FILE, RefSettings, SqliteRefStore};

use crate::home::Home;
use crate::output::Mode;

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
    /// The tenant whose refs to read.
    #[arg(long, default_value = "default")]
    pub tenant: String,
}

#[derive(Debug, Serialize)]
struct FetchReport {
    found: usize,
    failed: usize,
    text: String,
}

pub fn run(args: &FetchArgs, home: &Home, mode: Mode) -> Result<ExitCode> {
    let path = home.path.join(DATABASE_FILE);
    if !path.exists() {
        bail!(
            "no ref store at {} (data directory from {}): nothing has been offloaded there yet",
            path.display(),
            home.source.name()
        );
    }
    let store = SqliteRefStore::open(&path, RefSettings::default())?;
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
    let output = execute_fetch(&store, &args.tenant, &arguments);
    let report = FetchReport {
        found: output.found_ids,
        failed: output.failed_ids,
        text: output.text,
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
