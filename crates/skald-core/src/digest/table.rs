//! Tables: tab-, pipe-, comma-, semicolon- or space-separated columns.
//!
//! A text is a table when its first line splits into columns and nearly all of the rows sampled
//! after it have as many cells; the summary states rows, columns, the header and the first row.

use super::input::{Input, LINE_HEAD_BYTES};
use super::show::Shape;
use super::text::clean_inline;

pub(super) struct TableShape {
    separator: &'static str,
    rows: usize,
    header: Vec<String>,
    first_row: Option<String>,
}

fn split_row<'a>(line: &'a str, separator: &str) -> Vec<&'a str> {
    match separator {
        "|" => {
            let t = line.trim();
            let t = t.strip_prefix('|').unwrap_or(t);
            let t = t.strip_suffix('|').unwrap_or(t);
            t.split('|').map(str::trim).collect()
        }
        "  " => line
            .split("  ")
            .map(str::trim)
            .filter(|cell| !cell.is_empty())
            .collect(),
        "," => split_csv(line),
        other => line.split(other).map(str::trim).collect(),
    }
}

/// `split_row(line, separator).len()`, without collecting the cells.
fn count_cells(line: &str, separator: &str) -> usize {
    match separator {
        "|" => {
            let t = line.trim();
            let t = t.strip_prefix('|').unwrap_or(t);
            let t = t.strip_suffix('|').unwrap_or(t);
            t.split('|').count()
        }
        "  " => line
            .split("  ")
            .filter(|cell| !cell.trim().is_empty())
            .count(),
        "," => {
            let mut cells = 1;
            let mut quoted = false;
            for b in line.bytes() {
                match b {
                    b'"' => quoted = !quoted,
                    b',' if !quoted => cells += 1,
                    _ => {}
                }
            }
            cells
        }
        other => line.split(other).count(),
    }
}

/// Splits on commas outside double quotes.
fn split_csv(line: &str) -> Vec<&str> {
    let mut cells = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, b) in line.bytes().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b',' if !quoted => {
                cells.push(line.get(start..i).unwrap_or("").trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    cells.push(line.get(start..).unwrap_or("").trim());
    cells
}

/// A separator-ruled row (`|---|:--:|`, `+----+`).
fn is_rule(row: &str) -> bool {
    row.bytes()
        .all(|b| matches!(b, b'|' | b'-' | b':' | b' ' | b'+' | b'='))
}

pub(super) fn table_shape(input: &Input<'_>) -> Option<TableShape> {
    let mut rows = input.nonempty();
    let header_line = rows.next()?;
    // Column agreement is checked on a sample; a table's regularity shows in its first rows.
    let sample: Vec<&str> = rows.take(200).collect();
    if sample.len() < 2 || header_line.len() > 4 * LINE_HEAD_BYTES {
        return None;
    }
    for separator in ["\t", "|", ",", ";", "  "] {
        if separator == "  " && header_line.starts_with(' ') {
            continue;
        }
        let header = split_row(header_line, separator);
        let min_cols = if separator == "  " { 3 } else { 2 };
        if header.len() < min_cols || header.iter().any(|c| c.is_empty()) {
            continue;
        }
        let agreeing = sample
            .iter()
            .filter(|row| count_cells(row, separator) == header.len())
            .count();
        if agreeing * 10 < sample.len() * 9 {
            continue;
        }
        let data_rows = input.nonempty().skip(1).filter(|r| !is_rule(r));
        let first_row = input.nonempty().skip(1).find(|r| !is_rule(r)).map(|row| {
            split_row(row, separator)
                .iter()
                .map(|c| clean_inline(c, 30))
                .collect::<Vec<_>>()
                .join(" | ")
        });
        return Some(TableShape {
            separator,
            rows: data_rows.count(),
            header: header.iter().map(|c| clean_inline(c, 40)).collect(),
            first_row,
        });
    }
    None
}

pub(super) fn table_summary(table: &TableShape) -> Shape {
    let format = match table.separator {
        "\t" => "tsv",
        "|" => "pipe",
        "," => "csv",
        ";" => "semicolon",
        _ => "columns",
    };
    let head = format!(
        "table ({format}), {} rows x {} cols",
        table.rows,
        table.header.len()
    );
    Shape::new(head)
        .items("cols:", table.header.clone(), 8)
        .details(table.first_row.iter().map(|row| format!("row 1: {row}")))
}
