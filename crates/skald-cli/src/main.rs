//! `skald`: the command-line interface of the skald context engine.
//!
//! Thin by design: each command parses its arguments, calls the library, and prints JSON when
//! stdout is not a terminal (or with `--json`) and a table on a terminal.

mod files;
mod home;
mod inspect;
mod output;
mod tokens_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use serde::Serialize;

use crate::home::Home;
use crate::output::Mode;

/// skald decides what an LLM agent's model sees on every call: it offloads large tool outputs,
/// prunes and compacts history, recovers from context overflows and remembers across sessions,
/// without ever losing the original data.
#[derive(Debug, Parser)]
#[command(name = "skald", version, propagate_version = true)]
struct Cli {
    /// Data directory (default: $SKALD_HOME, else the platform's data directory + /skald).
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Print JSON even on a terminal (JSON is the default when stdout is not a terminal).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show what transcripts hold: format, messages by role, tool calls by name, tool-result
    /// sizes, token counts and what transcript repair would change.
    ///
    /// Formats are detected from the content: OpenAI and Anthropic requests and responses,
    /// OpenClaw session JSONL, Claude Code session JSONL, mini-swe-agent and SWE-agent
    /// trajectories. Directories are searched for .jsonl, .json and .traj files.
    ///
    /// Examples:
    ///   skald inspect examples/openclaw-session.jsonl
    ///   skald inspect ~/.claude/projects/my-project/ --json
    #[command(verbatim_doc_comment)]
    Inspect(inspect::InspectArgs),
    /// Measure token estimates against what providers billed.
    ///
    /// For every assistant call in transcripts that record real usage (Claude Code,
    /// mini-swe-agent), the request is the conversation before that call; its input tokens are
    /// estimated with chars/4, counted with a BPE, and corrected by per-model calibration learned
    /// online from earlier calls. Prints mean and p90 absolute percentage error of each.
    ///
    /// Examples:
    ///   skald tokens ../shared/data/trajectories/mini-swe-agent
    ///   skald tokens session.jsonl --json
    #[command(verbatim_doc_comment)]
    Tokens(tokens_cmd::TokensArgs),
    /// Print the data directory skald uses and where that choice came from.
    Home,
}

#[derive(Debug, Serialize)]
struct HomeReport {
    path: String,
    source: &'static str,
}

fn run(cli: Cli) -> Result<ExitCode> {
    let mode = Mode::detect(cli.json);
    let env_home = std::env::var_os("SKALD_HOME");
    let home = Home::resolve(cli.home.as_deref(), env_home.as_deref())?;
    match cli.command {
        Command::Inspect(args) => inspect::run(&args, mode),
        Command::Tokens(args) => tokens_cmd::run(&args, mode),
        Command::Home => {
            let report = HomeReport {
                path: home.path.display().to_string(),
                source: home.source.name(),
            };
            output::emit(mode, &report, |r| {
                let mut table = output::table(&["data directory", "from"]);
                table.add_row(vec![r.path.clone(), r.source.to_owned()]);
                table
            })?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("skald: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
