//! Earlier summaries read back into their five sections, so a new summary merges them item by
//! item. Any summary is accepted: lines under a required heading become that section's items
//! (bullets unwrapped, `(none)` dropped); text outside the headings contributes only the
//! identifiers it names.

use crate::summary::REQUIRED_SECTIONS;

use super::text::strip_list_marker;

/// Items of each required section, in [`REQUIRED_SECTIONS`] order, and the text outside them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct PreviousSummary {
    pub sections: [Vec<String>; 5],
    /// Lines outside every required section (free text, appendices), for identifiers.
    pub other: String,
}

fn is_none_marker(item: &str) -> bool {
    let bare = item.trim_matches(|c: char| c == '(' || c == ')' || c == '（' || c == '）');
    matches!(
        bare.to_ascii_lowercase().as_str(),
        "none" | "n/a" | "无" | "nothing" | "-"
    )
}

/// Reads `summary` into sections; `previous` accumulates several summaries in order.
pub(super) fn read_into(summary: &str, previous: &mut PreviousSummary) {
    let mut current: Option<usize> = None;
    for line in summary.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            current = REQUIRED_SECTIONS
                .iter()
                .position(|heading| trimmed.eq_ignore_ascii_case(heading));
            if current.is_none() {
                push_other(&mut previous.other, trimmed);
            }
            continue;
        }
        let item = strip_list_marker(trimmed);
        if item.is_empty() {
            continue;
        }
        match current.and_then(|section| previous.sections.get_mut(section)) {
            Some(items) => {
                if !is_none_marker(item) && !items.iter().any(|known| known == item) {
                    items.push(item.to_owned());
                }
            }
            None => push_other(&mut previous.other, trimmed),
        }
    }
}

/// The pending asks of several summaries in order: those of the latest one. A later summary
/// speaks for the time after the earlier ones, and a span cut before the next user turn mostly
/// ends on an answer, so an earlier summary's asks were answered by the time a later one says
/// "(none)". (A later part that is tool work only, with no answer, loses them: the summary does
/// not say which of the two it was.)
pub(super) fn latest_asks(summaries: &[&str]) -> Vec<String> {
    summaries
        .last()
        .map(|summary| {
            let mut read = PreviousSummary::default();
            read_into(summary, &mut read);
            let [_, _, _, asks, _] = read.sections;
            asks
        })
        .unwrap_or_default()
}

fn push_other(other: &mut String, line: &str) {
    if !other.is_empty() {
        other.push('\n');
    }
    other.push_str(line);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_read_back_item_by_item() {
        let summary = "Intro /srv/a/b\n## Decisions\n- use x\n- use y\n## Open TODOs\n- (none)\n\
                       ## Tool Failures\n- bash: boom\n## Exact identifiers\n- /x/y\n";
        let mut previous = PreviousSummary::default();
        read_into(summary, &mut previous);
        assert_eq!(previous.sections[0], ["use x", "use y"]);
        assert!(previous.sections[1].is_empty());
        assert_eq!(previous.sections[4], ["/x/y"]);
        assert!(previous.other.contains("/srv/a/b"));
        assert!(previous.other.contains("bash: boom"));
    }
}
