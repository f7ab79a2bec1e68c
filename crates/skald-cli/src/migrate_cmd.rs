//! `skald migrate --from sqlite://PATH --to postgres://URL`: a data directory's SQLite database
//! copied into an empty PostgreSQL database ([`skald_engine::migrate_database`]), then every
//! table compared on both sides by row count and SHA-256. Prints the comparison; fails unless
//! every table matches.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use skald_engine::migrate_database;
use skald_engine::storage::{MigrationReport, is_postgres_url, redact};

use crate::output::{self, Mode};

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The SQLite database to copy: sqlite://PATH (or a plain path), e.g. the data directory's
    /// skald.sqlite3. Opened read-only.
    #[arg(long, value_name = "sqlite://PATH")]
    pub from: String,
    /// The PostgreSQL database to copy into (postgres://user@host:5432/db); its skald tables
    /// must be empty (they are created if missing).
    #[arg(long, value_name = "postgres://URL")]
    pub to: String,
}

/// The SQLite file `--from` names.
fn source_path(from: &str) -> Result<PathBuf> {
    let path = from.strip_prefix("sqlite://").unwrap_or(from);
    if path.is_empty() {
        bail!("--from {from:?} names no file: give sqlite://PATH");
    }
    let path = PathBuf::from(path);
    if !path.is_file() {
        bail!("--from: no SQLite database at {}", path.display());
    }
    Ok(path)
}

pub fn run(args: &MigrateArgs, mode: Mode) -> Result<ExitCode> {
    let source = source_path(&args.from)?;
    if !is_postgres_url(&args.to) {
        bail!(
            "--to {:?} is not a PostgreSQL URL (postgres://user@host:5432/database)",
            redact(&args.to)
        );
    }
    let shown = redact(&args.to);
    let report = migrate_database(&source, &args.to).map_err(|error| match error {
        skald_engine::MigrateError::Connect(error) => {
            anyhow::Error::new(error).context(format!("cannot open {shown}"))
        }
        skald_engine::MigrateError::Copy(error) => anyhow::Error::new(error)
            .context(format!("cannot migrate {} to {shown}", source.display())),
    })?;
    let verified = report.tables.iter().all(|check| check.matches());
    output::emit(mode, &report, |report: &MigrationReport| {
        let mut table = output::table(&["table", "rows", "copied", "sha256", "verified"]);
        for check in &report.tables {
            table.add_row(vec![
                check.table.to_owned(),
                check.source_rows.to_string(),
                check.target_rows.to_string(),
                check.source_sha256.chars().take(16).collect(),
                if check.matches() { "yes" } else { "NO" }.to_owned(),
            ]);
        }
        table
    })?;
    if !verified {
        bail!("the copy in {shown} differs from {}", source.display());
    }
    Ok(ExitCode::SUCCESS)
}
