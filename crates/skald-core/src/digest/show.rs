//! What every kind shows: a head, a labelled list of items, details.
//!
//! [`Shape`] is the one form every kind's summary takes, so that assembly fits any of them into
//! the budget the same way; [`shape_of`] picks the summary for the detected kind.

use super::detect::Detected;
use super::input::{Input, MAX_ITEMS};
use super::json::json_summary;
use super::plain::plain_summary;
use super::scan::{Scan, ScanFor};
use super::structured::{code_summary, diff_summary, log_summary, markdown_summary};
use super::table::table_summary;

pub(super) struct Shape {
    pub(super) head: String,
    /// Label of the item list (`keys:`, `fns:`); may be empty.
    pub(super) label: &'static str,
    pub(super) items: Vec<String>,
    /// How many items rank above the identifiers.
    pub(super) primary: usize,
    pub(super) details: Vec<String>,
}

impl Shape {
    pub(super) fn new(head: String) -> Shape {
        Shape {
            head,
            label: "",
            items: Vec::new(),
            primary: 0,
            details: Vec::new(),
        }
    }

    pub(super) fn items(
        mut self,
        label: &'static str,
        items: Vec<String>,
        primary: usize,
    ) -> Shape {
        self.label = label;
        self.items = items;
        self.primary = primary;
        self
    }

    pub(super) fn details(mut self, details: impl IntoIterator<Item = String>) -> Shape {
        self.details.extend(details);
        self
    }
}

pub(super) fn shape_of(detected: &Detected<'_>, input: &Input<'_>) -> Shape {
    // Markdown and diff summaries state counts the sample cannot give.
    let full = |purpose| {
        input
            .is_sampled()
            .then(|| Scan::over(input.lines.iter(), purpose))
    };
    match detected {
        Detected::Json(json) => json_summary(json),
        Detected::Table(table) => table_summary(table),
        Detected::Log => log_summary(input),
        Detected::Markdown(scan) => {
            markdown_summary(input, full(ScanFor::Markdown).as_ref().unwrap_or(scan))
        }
        Detected::Diff(scan) => diff_summary(input, full(ScanFor::Diff).as_ref().unwrap_or(scan)),
        Detected::Code(scan) => code_summary(input, scan),
        Detected::Plain(scan) => plain_summary(input, scan),
    }
}

/// `1 line`, `2 lines`.
pub(super) fn count_of(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

pub(super) fn lines_word(n: usize) -> String {
    count_of(n, "line")
}

/// Pushes `item` unless present or the list is full.
pub(super) fn push_unique(list: &mut Vec<String>, item: String) {
    if list.len() < MAX_ITEMS && !item.is_empty() && !list.contains(&item) {
        list.push(item);
    }
}
