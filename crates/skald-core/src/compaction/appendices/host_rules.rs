//! The rules files a host put into the conversation itself, found so that every compaction
//! keeps them (issue 28, gap 3): a compaction summarises the first user message away, and with
//! it the project's instructions the host loaded there.
//!
//! - **Claude Code** (2.1): a `<system-reminder>` text block of the first user message that
//!   starts "Codebase and user instructions are shown below", holding each CLAUDE.md as
//!   `Contents of {path} ({what it is}):\n\n{text}`, separated by blank lines.
//! - **Codex** (0.169): a user message `# AGENTS.md instructions for {cwd}\n\n<INSTRUCTIONS>\n
//!   {text}\n</INSTRUCTIONS>`.
//!
//! Only user and system messages are read, never a tool's output: a file the agent read that
//! looks like a rules block is data, not the host's rules. [`rules_of_files`] turns the files
//! into the `<workspace-critical-rules>` text: of each, the seed's sections when it has them
//! (AGENTS.md's "Session Startup" and "Red Lines"), else the whole file — a CLAUDE.md is rules
//! throughout.

use super::rules::{RULES_CLOSE, RULES_OPEN, cut_to_limit, workspace_critical_rules};
use crate::message::{Message, Role};

/// One rules file a host loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesFile {
    /// Where it came from, as the host named it (`/repo/CLAUDE.md`, `AGENTS.md for /repo`).
    pub source: String,
    /// Its text.
    pub text: String,
}

/// How Claude Code's block of instruction files begins.
const CLAUDE_CODE_MARKER: &str = "Codebase and user instructions are shown below.";
/// How each file of that block begins.
const CLAUDE_CODE_FILE: &str = "Contents of ";
/// How Codex's AGENTS.md message begins.
const CODEX_MARKER: &str = "# AGENTS.md instructions for ";

/// The rules files in `messages` (user and system messages only), in order, each once.
pub fn host_rules_in(messages: &[Message]) -> Vec<RulesFile> {
    let mut found: Vec<RulesFile> = Vec::new();
    for message in messages {
        if !matches!(message.role, Role::User | Role::System) {
            continue;
        }
        for file in host_rules_in_text(&message.plain_text()) {
            if !found.iter().any(|known| known.source == file.source) {
                found.push(file);
            }
        }
    }
    found
}

/// The rules files in one text (a message's, or a host's system prompt).
pub fn host_rules_in_text(text: &str) -> Vec<RulesFile> {
    let mut found = claude_code_files(text);
    found.extend(codex_files(text));
    found
}

fn claude_code_files(text: &str) -> Vec<RulesFile> {
    let Some(start) = text.find(CLAUDE_CODE_MARKER) else {
        return Vec::new();
    };
    let block = &text[start..];
    let block = block
        .find("</system-reminder>")
        .map_or(block, |end| &block[..end]);
    // Each file starts a line with "Contents of {path} (…):" and runs to the next such line.
    let mut starts: Vec<usize> = Vec::new();
    let mut offset = 0;
    for line in block.split_inclusive('\n') {
        if line.starts_with(CLAUDE_CODE_FILE) && line.trim_end().ends_with("):") {
            starts.push(offset);
        }
        offset += line.len();
    }
    starts
        .iter()
        .enumerate()
        .filter_map(|(index, &from)| {
            let to = starts.get(index + 1).copied().unwrap_or(block.len());
            let file = &block[from..to];
            let (header, body) = file.split_once('\n')?;
            let named = header.strip_prefix(CLAUDE_CODE_FILE)?;
            let source = named.rfind(" (").map_or(named, |at| &named[..at]).trim();
            let text = body.trim();
            (!text.is_empty()).then(|| RulesFile {
                source: source.to_owned(),
                text: text.to_owned(),
            })
        })
        .collect()
}

fn codex_files(text: &str) -> Vec<RulesFile> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(CODEX_MARKER) {
        let after = &rest[at + CODEX_MARKER.len()..];
        let (directory, body) = after.split_once('\n').unwrap_or((after, ""));
        let Some(open) = body.find("<INSTRUCTIONS>") else {
            break;
        };
        let inner = &body[open + "<INSTRUCTIONS>".len()..];
        let Some(close) = inner.find("</INSTRUCTIONS>") else {
            break;
        };
        let text = inner[..close].trim();
        if !text.is_empty() {
            found.push(RulesFile {
                source: format!("AGENTS.md for {}", directory.trim()),
                text: text.to_owned(),
            });
        }
        rest = &inner[close..];
    }
    found
}

/// The critical rules of `files`: of each, its seed sections when it has them, else its whole
/// text, under a line naming it; joined by blank lines and cut to `max_chars` with the
/// truncation marker. `None` without a file with text, or when `max_chars` is 0.
pub fn rules_of_files(files: &[RulesFile], max_chars: usize) -> Option<String> {
    if max_chars == 0 {
        return None;
    }
    let parts: Vec<String> = files
        .iter()
        .filter(|file| !file.text.trim().is_empty())
        .map(|file| {
            let rules = workspace_critical_rules(&file.text, usize::MAX)
                .unwrap_or_else(|| file.text.trim().to_owned());
            format!("From {}:\n{rules}", file.source)
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(cut_to_limit(parts.join("\n\n"), max_chars))
}

/// Where `summary`'s `<workspace-critical-rules>` block is: from its opening tag to the end of
/// its closing one, and its text between them.
fn rules_block(summary: &str) -> Option<(std::ops::Range<usize>, &str)> {
    let start = summary.find(RULES_OPEN)?;
    let inner = start + RULES_OPEN.len();
    let length = summary[inner..].find(RULES_CLOSE)?;
    let end = inner + length + RULES_CLOSE.len();
    Some((start..end, &summary[inner..inner + length]))
}

/// The critical rules a previous compaction appended to its summary (the text of its
/// `<workspace-critical-rules>` block), so that the next compaction carries them on when their
/// source has been compacted away.
pub fn rules_in_summary(summary: &str) -> Option<&str> {
    let (_, rules) = rules_block(summary)?;
    let rules = rules.trim();
    (!rules.is_empty()).then_some(rules)
}

/// `summary` without its `<workspace-critical-rules>` block: what the summarizer is shown of a
/// previous summary, since the compaction appends the rules again itself (shown them, a
/// summarizer would copy them into its text, and every compaction would carry them twice).
pub fn without_critical_rules(summary: &str) -> String {
    match rules_block(summary) {
        Some((block, _)) => format!(
            "{}{}",
            summary[..block.start].trim_end(),
            &summary[block.end..]
        )
        .trim()
        .to_owned(),
        None => summary.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::compaction::appendices::TRUNCATED_MARKER;

    /// The block Claude Code 2.1.332 sent for a workspace with a CLAUDE.md (captured from the
    /// real CLI), with a second, user-level file.
    const CLAUDE_CODE_BLOCK: &str = "<system-reminder>\nCodebase and user instructions are shown below. Be sure to adhere to these instructions. IMPORTANT: These instructions OVERRIDE any default behavior and you MUST follow them exactly as written.\n\nContents of /home/ana/.claude/CLAUDE.md (user's private global instructions for all projects):\n\nAnswer in French.\n\nContents of /tmp/cap/ws/CLAUDE.md (project instructions, checked into the codebase):\n\n# Project rules\n\nAlways run `make check` before committing.\n\n## Red Lines\n\nNever push to main.\n</system-reminder>";

    /// The message Codex 0.169 sent for a workspace with an AGENTS.md (captured).
    const CODEX_MESSAGE: &str = "# AGENTS.md instructions for /tmp/cap/ws\n\n<INSTRUCTIONS>\n# Agents\n\nUse tabs.\n\n</INSTRUCTIONS>";

    #[test]
    fn claude_codes_instruction_files_are_found_with_their_paths() {
        let files = host_rules_in_text(CLAUDE_CODE_BLOCK);
        assert_eq!(
            files,
            vec![
                RulesFile {
                    source: "/home/ana/.claude/CLAUDE.md".into(),
                    text: "Answer in French.".into()
                },
                RulesFile {
                    source: "/tmp/cap/ws/CLAUDE.md".into(),
                    text: "# Project rules\n\nAlways run `make check` before committing.\n\n## Red Lines\n\nNever push to main.".into()
                },
            ]
        );
    }

    #[test]
    fn codexs_agents_md_is_found_with_its_directory() {
        assert_eq!(
            host_rules_in_text(CODEX_MESSAGE),
            vec![RulesFile {
                source: "AGENTS.md for /tmp/cap/ws".into(),
                text: "# Agents\n\nUse tabs.".into()
            }]
        );
    }

    #[test]
    fn rules_in_a_tool_output_are_not_the_hosts() {
        let read = Message::text(Role::ToolResult, CODEX_MESSAGE);
        let user = Message::text(Role::User, CLAUDE_CODE_BLOCK);
        let files = host_rules_in(&[read, user.clone(), user]);
        let sources: Vec<&str> = files.iter().map(|file| file.source.as_str()).collect();
        assert_eq!(
            sources,
            ["/home/ana/.claude/CLAUDE.md", "/tmp/cap/ws/CLAUDE.md"],
            "each file once, none from the tool result"
        );
    }

    #[test]
    fn a_files_rules_are_its_seed_sections_else_all_of_it_cut_to_the_limit() {
        let files = host_rules_in_text(CLAUDE_CODE_BLOCK);
        let rules = rules_of_files(&files, 2000).unwrap();
        assert_eq!(
            rules,
            "From /home/ana/.claude/CLAUDE.md:\nAnswer in French.\n\nFrom /tmp/cap/ws/CLAUDE.md:\n## Red Lines\n\nNever push to main."
        );
        let cut = rules_of_files(&files, 30).unwrap();
        assert_eq!(cut.chars().count(), 30 + TRUNCATED_MARKER.chars().count());
        assert_eq!(rules_of_files(&files, 0), None);
        assert_eq!(rules_of_files(&[], 2000), None);
    }

    #[test]
    fn the_rules_a_summary_carries_are_read_back() {
        let summary = "## Decisions\n- x\n\n<workspace-critical-rules>\nFrom AGENTS.md for /r:\nUse tabs.\n</workspace-critical-rules>";
        assert_eq!(
            rules_in_summary(summary),
            Some("From AGENTS.md for /r:\nUse tabs.")
        );
        assert_eq!(rules_in_summary("## Decisions\n- x"), None);
        assert_eq!(without_critical_rules(summary), "## Decisions\n- x");
        assert_eq!(
            without_critical_rules("## Decisions\n- x"),
            "## Decisions\n- x"
        );
    }
}
