//! How results reach the user: JSON when stdout is not a terminal (or with `--json`), a table on a
//! terminal. Commands build one serializable value and a table renderer; this module picks.

use std::io::{IsTerminal, Write};

use anyhow::Result;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;

/// The output mode for this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Json,
    Table,
}

impl Mode {
    pub fn detect(force_json: bool) -> Mode {
        if force_json || !std::io::stdout().is_terminal() {
            Mode::Json
        } else {
            Mode::Table
        }
    }
}

/// Prints `value` as pretty JSON, or the table `render` builds from it.
pub fn emit<T: Serialize>(mode: Mode, value: &T, render: impl FnOnce(&T) -> Table) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match mode {
        Mode::Json => {
            serde_json::to_writer_pretty(&mut stdout, value)?;
            writeln!(stdout)?;
        }
        Mode::Table => writeln!(stdout, "{}", render(value))?,
    }
    Ok(())
}

/// A table with skald's house style and the given header.
pub fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header(header);
    table
}
