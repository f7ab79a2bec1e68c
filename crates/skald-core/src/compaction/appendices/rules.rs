//! The `<workspace-critical-rules>` appendix: the AGENTS.md sections a compaction must not lose
//! ([`CRITICAL_RULE_SECTIONS`](super::CRITICAL_RULE_SECTIONS), or the legacy names), found by
//! Markdown heading ([`markdown_sections`]) and cut to their limit.

use super::{CRITICAL_RULE_SECTIONS, LEGACY_CRITICAL_RULE_SECTIONS, TRUNCATED_MARKER};

/// The "Session Startup" and "Red Lines" sections of an AGENTS.md text (or, when neither exists,
/// the older "Every Session" and "Safety"), joined by a blank line and cut to `max_chars`
/// characters with a truncation marker. `None` when no section is found or `max_chars` is 0.
pub fn workspace_critical_rules(agents_md: &str, max_chars: usize) -> Option<String> {
    if max_chars == 0 {
        return None;
    }
    let mut sections = markdown_sections(agents_md, &CRITICAL_RULE_SECTIONS);
    if sections.is_empty() {
        sections = markdown_sections(agents_md, &LEGACY_CRITICAL_RULE_SECTIONS);
    }
    if sections.is_empty() {
        return None;
    }
    Some(cut_to_limit(sections.join("\n\n"), max_chars))
}

/// `text` whole when it has at most `max_chars` characters, else its first `max_chars` with
/// the truncation marker.
pub(super) fn cut_to_limit(text: String, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text;
    }
    let mut cut: String = text.chars().take(max_chars).collect();
    cut.push_str(TRUNCATED_MARKER);
    cut
}

/// How the `<workspace-critical-rules>` block opens, and how it closes.
pub(super) const RULES_OPEN: &str = "<workspace-critical-rules>\n";
pub(super) const RULES_CLOSE: &str = "\n</workspace-critical-rules>";

/// The `<workspace-critical-rules>` block, empty without rules.
pub fn format_critical_rules(rules: Option<&str>) -> String {
    match rules {
        Some(rules) if !rules.trim().is_empty() => format!("{RULES_OPEN}{rules}{RULES_CLOSE}"),
        Some(_) | None => String::new(),
    }
}

/// Sections of a Markdown text whose ATX heading names one of `names` (compared ignoring case,
/// punctuation and emoji), each from its heading line to the next heading of the same or a
/// higher level, trimmed. Headings inside fenced code blocks do not count.
pub fn markdown_sections(text: &str, names: &[&str]) -> Vec<String> {
    let wanted: Vec<String> = names.iter().map(|name| heading_key(name)).collect();
    let lines: Vec<&str> = text.lines().collect();
    let mut headings: Vec<(usize, usize, String)> = Vec::new();
    let mut fence: Option<&str> = None;
    for (index, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"]
            .into_iter()
            .find(|marker| trimmed.starts_with(marker));
        if let Some(marker) = marker {
            fence = match fence {
                None => Some(marker),
                Some(open) if open == marker => None,
                Some(open) => Some(open),
            };
            continue;
        }
        if fence.is_some() {
            continue;
        }
        if let Some((level, title)) = atx_heading(line) {
            headings.push((index, level, heading_key(title)));
        }
    }
    let mut sections = Vec::new();
    for (position, (start, level, key)) in headings.iter().enumerate() {
        if !wanted.contains(key) {
            continue;
        }
        let end = headings
            .iter()
            .skip(position + 1)
            .find(|(_, next_level, _)| next_level <= level)
            .map_or(lines.len(), |(index, _, _)| *index);
        let body = lines.get(*start..end).unwrap_or_default().join("\n");
        let body = body.trim();
        if !body.is_empty() {
            sections.push(body.to_owned());
        }
    }
    sections
}

fn atx_heading(line: &str) -> Option<(usize, &str)> {
    let level = line.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = line.get(level..)?;
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    Some((level, rest.trim().trim_end_matches('#').trim()))
}

fn heading_key(title: &str) -> String {
    title
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const AGENTS_MD: &str = "# AGENTS.md\n\nIntro.\n\n## Session Startup\n\n1. Read SOUL.md.\n\n### Details\n\nnested stays\n\n## Tools\n\nskip me\n\n```md\n## Red Lines\nnot a heading\n```\n\n## 🚫 Red Lines\n\n- Never push to main.\n";

    #[test]
    fn critical_rules_take_session_startup_and_red_lines() {
        let rules = workspace_critical_rules(AGENTS_MD, 2000).unwrap();
        assert_eq!(
            rules,
            "## Session Startup\n\n1. Read SOUL.md.\n\n### Details\n\nnested stays\n\n## 🚫 Red Lines\n\n- Never push to main."
        );
        assert!(
            format_critical_rules(Some(&rules))
                .starts_with("<workspace-critical-rules>\n## Session")
        );
    }

    #[test]
    fn critical_rules_fall_back_to_legacy_names_and_cut_at_the_limit() {
        let legacy = "## Every Session\nDo X.\n## Safety\nNever Y.";
        assert_eq!(
            workspace_critical_rules(legacy, 2000).unwrap(),
            "## Every Session\nDo X.\n\n## Safety\nNever Y."
        );
        let long = format!("## Red Lines\n{}", "z".repeat(3000));
        let cut = workspace_critical_rules(&long, 2000).unwrap();
        assert_eq!(cut.chars().count(), 2000 + TRUNCATED_MARKER.chars().count());
        assert!(cut.ends_with("...[truncated]..."));
        assert_eq!(workspace_critical_rules("# Nothing here", 2000), None);
        assert_eq!(workspace_critical_rules(AGENTS_MD, 0), None);
    }
}
