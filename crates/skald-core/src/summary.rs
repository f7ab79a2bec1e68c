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

/// `summary` with every id of `ids` it does not already mention listed under
/// `## Exact identifiers` as `- [REF_ID: <id>]` (the placeholder's own spelling, so a later
/// compaction finds them again), after the section's items; a `- (none)` / `- None.` item is
/// replaced. A summary without the heading gets it at its end.
pub fn list_ref_ids(summary: &str, ids: &[String]) -> String {
    let missing: Vec<String> = ids
        .iter()
        .filter(|id| !summary.contains(id.as_str()))
        .map(|id| format!("- {}{id}]", crate::refs::REF_PREFIX))
        .collect();
    if missing.is_empty() {
        return summary.to_owned();
    }
    let heading = REQUIRED_SECTIONS[4];
    let lines: Vec<&str> = summary.lines().collect();
    let Some(start) = lines
        .iter()
        .position(|line| line.trim().eq_ignore_ascii_case(heading))
    else {
        return format!(
            "{}\n\n{heading}\n{}",
            summary.trim_end(),
            missing.join("\n")
        );
    };
    let end = lines
        .iter()
        .skip(start + 1)
        .position(|line| line.trim_start().starts_with("## "))
        .map_or(lines.len(), |offset| start + 1 + offset);
    let is_none = |line: &&str| {
        let item = line.trim().trim_start_matches(['-', '*']).trim();
        item.eq_ignore_ascii_case("(none)")
            || item.eq_ignore_ascii_case("none.")
            || item.eq_ignore_ascii_case("none")
    };
    let mut section: Vec<String> = lines
        .get(start + 1..end)
        .unwrap_or_default()
        .iter()
        .filter(|line| !is_none(line))
        .map(|line| (*line).to_owned())
        .collect();
    while section.last().is_some_and(|line| line.trim().is_empty()) {
        section.pop();
    }
    section.extend(missing);
    let mut out: Vec<String> = lines
        .get(..=start)
        .unwrap_or_default()
        .iter()
        .map(|line| (*line).to_owned())
        .collect();
    out.extend(section);
    if end < lines.len() {
        out.push(String::new());
        out.extend(
            lines
                .get(end..)
                .unwrap_or_default()
                .iter()
                .map(|line| (*line).to_owned()),
        );
    }
    out.join("\n")
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
    fn offloaded_ref_ids_listed_as_exact_identifiers() {
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let summary = "## Decisions\n- x\n## Exact identifiers\n- (none)\n\n## Tool Failures\n- y";
        let listed = list_ref_ids(summary, &[a.clone(), b.clone()]);
        assert_eq!(
            listed,
            format!(
                "## Decisions\n- x\n## Exact identifiers\n- [REF_ID: {a}]\n- [REF_ID: {b}]\n\n\
                 ## Tool Failures\n- y"
            )
        );
        let refs = crate::refs::ref_ids_in(&listed);
        assert_eq!(refs.len(), 2);
        // Already mentioned: unchanged.
        assert_eq!(list_ref_ids(&listed, std::slice::from_ref(&a)), listed);
        // No heading: added at the end.
        assert_eq!(
            list_ref_ids("## Decisions\n- x", std::slice::from_ref(&a)),
            format!("## Decisions\n- x\n\n## Exact identifiers\n- [REF_ID: {a}]")
        );
    }

    #[test]
    fn a_heading_inside_a_sentence_does_not_count() {
        let summary = "We discussed ## Decisions at length.\n## Open TODOs\n";
        let missing = missing_sections(summary);
        assert_eq!(missing.len(), 4);
        assert!(missing.contains(&"## Decisions"));
    }
}
