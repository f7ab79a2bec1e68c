//! What the tool calls say was done, for the Decisions section: files edited or written (calls
//! whose result did not fail), shell commands that succeeded after failing, and commits made.
//! Tool *output* is only read for success or failure here, never quoted as a decision.

use std::collections::HashMap;

use crate::message::ToolCall;

use super::span::{Span, argument_str, result_text};
use super::text::{compact_spaces, cut_to_chars};
use super::{Body, Candidate, Labels};

/// Presentation group of the changed-files bullet: after the dated decisions.
const FILES_GROUP: u32 = 3;
/// Presentation group of decisions taken from the span (text and actions, by position).
pub(super) const SPAN_GROUP: u32 = 2;

/// Score of the changed-files bullet: above every sentence, it is the densest record of work.
const FILES_SCORE: i64 = 390;
const COMMIT_SCORE: i64 = 220;
const RECOVERY_SCORE: i64 = 200;

/// Longest command shown in a recovery item.
const MAX_COMMAND_CHARS: usize = 160;

const PATH_KEYS: &[&str] = &[
    "file_path",
    "path",
    "filePath",
    "notebook_path",
    "target_file",
    "filename",
    "file",
];

fn is_edit_tool(call: &ToolCall) -> bool {
    let name = call.name.to_ascii_lowercase();
    if name.contains("todo") || name.contains("memory") {
        return false;
    }
    let editing = name.contains("edit")
        || name.contains("write")
        || name.contains("patch")
        || name.contains("replace")
        || name == "create_file";
    // `str_replace_based_edit_tool` also views files.
    let viewing = argument_str(call, &["command"]).is_some_and(|command| command == "view");
    editing && !viewing
}

fn is_shell_tool(call: &ToolCall) -> bool {
    let name = call.name.to_ascii_lowercase();
    matches!(
        name.as_str(),
        "exec"
            | "execute"
            | "execute_command"
            | "run_command"
            | "run_terminal_cmd"
            | "terminal"
            | "command"
            | "sh"
    ) || name.contains("bash")
        || name.contains("shell")
}

/// The files a call edits: its path argument, or the files an `apply_patch` names.
fn edited_paths(call: &ToolCall) -> Vec<String> {
    if let Some(path) = argument_str(call, PATH_KEYS) {
        return vec![path.to_owned()];
    }
    let patch = argument_str(call, &["input", "patch", "diff"])
        .unwrap_or_else(|| call.arguments.as_str().unwrap_or(""));
    patch
        .lines()
        .filter_map(|line| {
            [
                "*** Update File: ",
                "*** Add File: ",
                "*** Delete File: ",
                "+++ b/",
            ]
            .iter()
            .find_map(|prefix| line.strip_prefix(prefix))
        })
        .map(|path| path.trim().to_owned())
        .filter(|path| !path.is_empty())
        .collect()
}

/// The command line of a shell call.
fn command_of(call: &ToolCall) -> Option<String> {
    if let Some(command) = argument_str(call, &["command", "cmd", "script"]) {
        return Some(command.to_owned());
    }
    let parts = call
        .arguments
        .as_object()?
        .get("command")?
        .as_array()?
        .iter()
        .filter_map(|part| part.as_str())
        .collect::<Vec<_>>();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// True when shell output reports a non-zero exit (Claude Code's `Exit code N`, mini-swe's
/// `<returncode>N</returncode>`, "exited with code N").
fn output_reports_failure(text: &str) -> bool {
    let nonzero = |digits: &str| {
        let number: String = digits.chars().take_while(char::is_ascii_digit).collect();
        !number.is_empty() && number.bytes().any(|b| b != b'0')
    };
    let first_line = text.lines().next().unwrap_or("").trim();
    if let Some(rest) = first_line.strip_prefix("Exit code ") {
        return nonzero(rest);
    }
    if let Some(at) = text.find("<returncode>") {
        return nonzero(text.get(at + "<returncode>".len()..).unwrap_or(""));
    }
    for marker in ["exited with code ", "exit code: ", "exit status "] {
        if let Some(at) = text.find(marker) {
            return nonzero(text.get(at + marker.len()..).unwrap_or(""));
        }
    }
    false
}

/// A command's first line, spaces collapsed, marked when lines follow.
fn first_line(command: &str) -> String {
    let mut lines = command.trim().lines();
    let first = compact_spaces(lines.next().unwrap_or(""));
    if lines.next().is_some() {
        format!("{first} …")
    } else {
        first
    }
}

/// What identifies "the same command" across attempts: the program and its leading
/// sub-commands and flags, without `cd … &&` prefixes, environment assignments or paths.
fn command_key(command: &str) -> String {
    let last_segment = command
        .rsplit("&&")
        .find(|segment| {
            let segment = segment.trim();
            !segment.is_empty() && !segment.starts_with("cd ")
        })
        .unwrap_or(command);
    last_segment
        .split_whitespace()
        .skip_while(|word| word.contains('=') && !word.starts_with('-'))
        .take_while(|word| !word.contains(['/', '.', '"', '\'', '>', '<', '|', '=', '$', '`']))
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The subject line of a `git commit`: from `-m "…"`, or the first line of a here-document.
fn commit_subject(command: &str) -> Option<String> {
    if let Some(heredoc) = command.find("<<") {
        let body = command.get(heredoc..)?;
        return body
            .lines()
            .skip(1)
            .map(str::trim)
            .find(|line| !line.is_empty())
            .map(str::to_owned);
    }
    let rest = [" -m ", " -am ", " --message ", " --message="]
        .iter()
        .filter_map(|flag| {
            command
                .find(flag)
                .map(|at| (at, command.get(at + flag.len()..).unwrap_or("")))
        })
        .min_by_key(|(at, _)| *at)
        .map(|(_, rest)| rest.trim_start())?;
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let inner = rest.get(quote.len_utf8()..)?;
    let end = inner.find(quote).unwrap_or(inner.len());
    inner
        .get(..end)?
        .lines()
        .next()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
}

/// Decisions the span's tool calls record.
pub(super) fn action_candidates(span: &Span<'_>, labels: &Labels) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut changed: Vec<(String, usize)> = Vec::new();
    let mut changed_at: HashMap<String, usize> = HashMap::new();
    let mut failures: HashMap<String, usize> = HashMap::new();

    for turn in &span.turns {
        for call in &turn.calls {
            let result = span.result_for(&call.id);
            let failed = result.is_some_and(|result| result.failed());
            if is_edit_tool(call) && !failed {
                for path in edited_paths(call) {
                    match changed_at.get(&path) {
                        Some(&slot) => {
                            if let Some(entry) = changed.get_mut(slot) {
                                entry.1 = turn.index;
                            }
                        }
                        None => {
                            changed_at.insert(path.clone(), changed.len());
                            changed.push((path, turn.index));
                        }
                    }
                }
            }
            if !is_shell_tool(call) {
                continue;
            }
            let (Some(command), Some(result)) = (command_of(call), result) else {
                continue;
            };
            let failed = failed || output_reports_failure(&result_text(result));
            let key = command_key(&command);
            if failed {
                *failures.entry(key).or_insert(0) += 1;
                continue;
            }
            let recency = span.recency(turn.index);
            let position = u64::try_from(turn.index).unwrap_or(u64::MAX);
            let is_commit = command.contains("git commit");
            let attempts = failures.remove(&key).filter(|n| *n > 0);
            // A commit that went through after failing is reported as the commit.
            if let Some(attempts) = attempts.filter(|_| !is_commit) {
                let shown = cut_to_chars(&first_line(&command), MAX_COMMAND_CHARS)
                    .unwrap_or_else(|| key.clone());
                out.push(Candidate {
                    body: Body::Text(labels.recovered(&shown, attempts)),
                    score: RECOVERY_SCORE + recency,
                    order: (SPAN_GROUP, position),
                });
            }
            if is_commit {
                if let Some(subject) = commit_subject(&command) {
                    out.push(Candidate {
                        body: Body::Text(format!("{} {subject}", labels.committed)),
                        score: COMMIT_SCORE + recency,
                        order: (SPAN_GROUP, position),
                    });
                }
            }
        }
    }

    if !changed.is_empty() {
        changed.sort_by_key(|(_, last)| *last);
        out.push(Candidate {
            body: Body::List {
                label: labels.files_changed.to_owned(),
                entries: changed.into_iter().map(|(path, _)| path).collect(),
            },
            score: FILES_SCORE,
            order: (FILES_GROUP, 0),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_keys_ignore_prefixes_paths_and_redirections() {
        assert_eq!(
            command_key("cd /repo && mix test test/a_test.exs 2>&1"),
            "mix test"
        );
        assert_eq!(
            command_key("RUST_LOG=debug cargo test -p core"),
            "cargo test -p"
        );
        assert_eq!(command_key("python -m pytest tests/"), "python -m pytest");
    }

    #[test]
    fn failure_markers() {
        assert!(output_reports_failure("Exit code 1\nerror"));
        assert!(!output_reports_failure("Exit code 0"));
        assert!(output_reports_failure("<returncode>2</returncode>"));
        assert!(!output_reports_failure("<returncode>0</returncode>\nok"));
        assert!(!output_reports_failure("all good"));
    }

    #[test]
    fn commit_subjects() {
        assert_eq!(
            commit_subject("git commit -m \"fix: parse ids\n\nbody\"").as_deref(),
            Some("fix: parse ids")
        );
        assert_eq!(
            commit_subject("git commit -m \"$(cat <<'EOF'\nfeat: add x\n\nmore\nEOF\n)\"")
                .as_deref(),
            Some("feat: add x")
        );
        assert_eq!(commit_subject("git commit --amend"), None);
        assert_eq!(
            commit_subject("git commit -am 'wip: x'").as_deref(),
            Some("wip: x")
        );
    }
}
