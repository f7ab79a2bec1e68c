//! The shape every compaction summary has, whoever writes it (an LLM or the extractive
//! summarizer): seed 001's five required sections, in order. The quality guard checks for these
//! headings and the extractive summarizer fills them, so both read the same constants.

/// The headings a summary must contain, in the order they are written.
pub const REQUIRED_SECTIONS: [&str; 5] = [
    "## Decisions",
    "## Open TODOs",
    "## Constraints/Rules",
    "## Pending user asks",
    "## Exact identifiers",
];

/// The headings of [`REQUIRED_SECTIONS`] that `summary` lacks (a heading counts when it starts a
/// line, ignoring surrounding whitespace and ASCII case).
pub fn missing_sections(summary: &str) -> Vec<&'static str> {
    REQUIRED_SECTIONS
        .iter()
        .copied()
        .filter(|heading| {
            !summary
                .lines()
                .any(|line| line.trim().eq_ignore_ascii_case(heading))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_with_every_heading_misses_none() {
        let summary = REQUIRED_SECTIONS.join("\n- none\n");
        assert!(missing_sections(&summary).is_empty());
    }

    #[test]
    fn a_heading_inside_a_sentence_does_not_count() {
        let summary = "We discussed ## Decisions at length.\n## Open TODOs\n";
        let missing = missing_sections(summary);
        assert_eq!(missing.len(), 4);
        assert!(missing.contains(&"## Decisions"));
    }
}
