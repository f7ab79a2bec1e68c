//! `skald read`: one memory entry (or a directory's overview) at a level of detail.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use skald_engine::memory::manage::{self, ReadReport};
use skald_engine::storage::MemoryLevel;

use super::{Identity, IdentityArgs, memory_engine, parse_uri};
use crate::config::Config;
use crate::home::Home;
use crate::output::{self, Mode};
use crate::remote::Remote;

/// Which level `skald read` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LevelArg {
    /// The abstract (at most 256 characters).
    L0,
    /// The overview (at most 4,000 characters).
    L1,
    /// The full content.
    L2,
}

impl LevelArg {
    /// The name the server's `level` takes.
    fn name(self) -> &'static str {
        match self {
            LevelArg::L0 => "l0",
            LevelArg::L1 => "l1",
            LevelArg::L2 => "l2",
        }
    }

    fn level(self) -> MemoryLevel {
        match self {
            LevelArg::L0 => MemoryLevel::L0,
            LevelArg::L1 => MemoryLevel::L1,
            LevelArg::L2 => MemoryLevel::L2,
        }
    }
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// The entry to read, e.g. viking://user/default/memories/preferences/dark-mode-1a2b3c4d.md;
    /// a directory written by `skald add` reads its _overview entry.
    #[arg(value_name = "URI")]
    pub uri: String,
    /// l0: abstract, l1: overview, l2: full content.
    #[arg(long, short = 'l', value_enum, default_value = "l2")]
    pub level: LevelArg,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

pub fn run_read(args: &ReadArgs, home: &Home, config: &Config, mode: Mode) -> Result<ExitCode> {
    let identity = Identity::resolve(&args.identity, config)?;
    let uri = parse_uri(&args.uri, "URI")?;
    let engine = memory_engine(home, config, false)?;
    let report = match engine.read_memory(&identity.tenant, &uri, args.level.level()) {
        Err(manage::ManageError::DirectoryWithoutOverview { uri }) => bail!(
            "{uri} is a directory with no overview; list it with `skald ls {uri}` or \
             `skald tree {uri}`"
        ),
        other => other?,
    };
    print_read(&report, mode)
}

pub fn run_read_remote(args: &ReadArgs, remote: &Remote, mode: Mode) -> Result<ExitCode> {
    args.identity.check_remote_uri_only("read")?;
    let uri = parse_uri(&args.uri, "URI")?;
    let query = [
        ("uri", Some(uri.to_string())),
        ("level", Some(args.level.name().to_owned())),
    ];
    let report: ReadReport = remote.get(&["v1", "memory", "read"], &query)?;
    print_read(&report, mode)
}

fn print_read(report: &ReadReport, mode: Mode) -> Result<ExitCode> {
    match mode {
        Mode::Json => output::emit(mode, report, |_| output::table(&[]))?,
        Mode::Table => println!("{}", report.text),
    }
    Ok(ExitCode::SUCCESS)
}
