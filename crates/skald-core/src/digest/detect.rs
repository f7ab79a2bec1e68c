//! Detection: which kind a text is, tried in the order the module documentation gives (JSON,
//! unified diff, log, table, Markdown, code, plain text).
//!
//! [`Detected`] carries what was computed to decide the kind (the JSON shape, the table shape,
//! the scan), so the summary of that kind does not compute it again.

use super::ContentKind;
use super::input::Input;
use super::json::{JsonShape, json_shape};
use super::scan::{Scan, ScanFor, links_over};
use super::table::{TableShape, table_shape};

pub(super) enum Detected<'a> {
    Json(JsonShape),
    Table(TableShape),
    Log,
    Markdown(Scan<'a>),
    Diff(Scan<'a>),
    Code(Scan<'a>),
    Plain(Scan<'a>),
}

impl Detected<'_> {
    pub(super) fn kind(&self) -> ContentKind {
        match self {
            Detected::Json(_) => ContentKind::Json,
            Detected::Table(_) => ContentKind::Table,
            Detected::Log => ContentKind::Log,
            Detected::Markdown(_) => ContentKind::Markdown,
            Detected::Diff(_) | Detected::Code(_) => ContentKind::Code,
            Detected::Plain(_) => ContentKind::PlainText,
        }
    }
}

pub(super) fn detect<'a>(input: &Input<'a>) -> Detected<'a> {
    if let Some(json) = json_shape(input) {
        return Detected::Json(json);
    }
    let scan = Scan::over(input.sample(), ScanFor::Detection);
    let n = scan.nonempty;
    if n == 0 {
        return Detected::Plain(scan);
    }
    if scan.diff_headers >= 1 && scan.hunks >= 1 {
        return Detected::Diff(scan);
    }
    if scan.is_log(n) {
        return Detected::Log;
    }
    if let Some(table) = table_shape(input) {
        return Detected::Table(table);
    }
    let codeish = scan.code_lines * 10 >= scan.nonempty_outside_fences.max(1) * 3;
    if !scan.headings.is_empty() && !codeish {
        // Links matter only here (and in the Markdown summary): counted only now.
        let mut scan = scan;
        scan.links = links_over(input.sample());
        if scan.list_items + scan.fences + scan.links >= 1 {
            return Detected::Markdown(scan);
        }
        return not_markdown(scan, codeish, n);
    }
    not_markdown(scan, codeish, n)
}

/// The rest of [`detect`], once the text is known not to be Markdown.
fn not_markdown(scan: Scan<'_>, codeish: bool, n: usize) -> Detected<'_> {
    // `hits * 2 < n`: fewer than half the lines.
    let half = n.div_ceil(2);
    if codeish && !scan.grep_lines_reach(half) && !scan.ls_long_lines_reach(half) {
        return Detected::Code(scan);
    }
    Detected::Plain(scan)
}
