//! The `<read-files>` / `<modified-files>` appendix: which files the tool calls read and
//! changed, recognised by tool name and path argument across OpenClaw, Claude Code and editor
//! tools, patches included ([`file_accesses`], [`collect_file_ops`]).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{Message, ToolCall};

/// Files the agent read and modified, each sorted and once; a file both read and modified is
/// only listed as modified (`computeFileLists`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileLists {
    /// Files only read, sorted.
    pub read: Vec<String>,
    /// Files edited or written, sorted.
    pub modified: Vec<String>,
}

impl FileLists {
    /// True when no file was read or modified.
    pub fn is_empty(&self) -> bool {
        self.read.is_empty() && self.modified.is_empty()
    }
}

/// File operations seen in tool calls, before they become [`FileLists`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileOps {
    /// Files a tool read.
    pub read: BTreeSet<String>,
    /// Files a tool changed in part (an edit, a patch).
    pub edited: BTreeSet<String>,
    /// Files a tool wrote whole.
    pub written: BTreeSet<String>,
}

impl FileOps {
    /// Adds the lists of an earlier compaction, so files touched before it stay listed.
    pub fn extend_with(&mut self, previous: &FileLists) {
        self.read.extend(previous.read.iter().cloned());
        self.edited.extend(previous.modified.iter().cloned());
    }

    /// The lists: modified = edited ∪ written; read = read − modified.
    pub fn lists(&self) -> FileLists {
        let modified: BTreeSet<&String> = self.edited.iter().chain(&self.written).collect();
        FileLists {
            read: self
                .read
                .iter()
                .filter(|path| !modified.contains(path))
                .cloned()
                .collect(),
            modified: modified.into_iter().cloned().collect(),
        }
    }
}

/// What a tool call did to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileAccess {
    /// The tool read the file.
    Read,
    /// The tool changed part of the file.
    Edit,
    /// The tool wrote the whole file.
    Write,
}

const READ_TOOLS: &[&str] = &[
    "read",
    "read_file",
    "readfile",
    "view_file",
    "open_file",
    "notebookread",
];
const EDIT_TOOLS: &[&str] = &[
    "edit",
    "multiedit",
    "edit_file",
    "notebookedit",
    "str_replace",
    "search_replace",
    "replace",
    "apply_diff",
];
const WRITE_TOOLS: &[&str] = &["write", "write_file", "writefile", "create_file"];
const EDITOR_TOOLS: &[&str] = &["str_replace_editor", "str_replace_based_edit_tool"];
const PATCH_TOOLS: &[&str] = &["apply_patch", "applypatch"];
const PATH_KEYS: &[&str] = &[
    "path",
    "file_path",
    "filePath",
    "notebook_path",
    "target_file",
    "file",
    "filename",
];

/// The files one tool call reads or changes, by the tool names of OpenClaw/pi (`read`, `edit`,
/// `write`), Claude Code (`Read`, `Edit`, `MultiEdit`, `Write`, `NotebookEdit`), Codex
/// (`apply_patch`), SWE-agent's and Anthropic's editors (`str_replace_editor`,
/// `str_replace_based_edit_tool` with their `command`) and common `read_file`/`write_file`
/// spellings. Names compare case-insensitively.
pub fn file_accesses(call: &ToolCall) -> Vec<(FileAccess, String)> {
    let name = call.name.trim().to_ascii_lowercase();
    let arguments = arguments_of(call);
    let path = || path_argument(&arguments);
    let single = |access: FileAccess| path().map(|p| vec![(access, p)]).unwrap_or_default();
    if READ_TOOLS.contains(&name.as_str()) {
        return single(FileAccess::Read);
    }
    if EDIT_TOOLS.contains(&name.as_str()) {
        return single(FileAccess::Edit);
    }
    if WRITE_TOOLS.contains(&name.as_str()) {
        return single(FileAccess::Write);
    }
    if EDITOR_TOOLS.contains(&name.as_str()) {
        let access = match arguments.get("command").and_then(Value::as_str) {
            Some("view") => FileAccess::Read,
            Some("create") => FileAccess::Write,
            Some(_) | None => FileAccess::Edit,
        };
        return single(access);
    }
    if PATCH_TOOLS.contains(&name.as_str()) {
        let patch = match &arguments {
            Value::String(text) => Some(text.as_str()),
            Value::Object(fields) => ["input", "patch", "diff"]
                .iter()
                .find_map(|key| fields.get(*key).and_then(Value::as_str)),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => None,
        };
        return patch.map(patch_files).unwrap_or_default();
    }
    Vec::new()
}

/// The arguments as JSON; a string that holds JSON (an OpenAI wire string kept as text) is parsed.
fn arguments_of(call: &ToolCall) -> Value {
    if let Value::String(text) = &call.arguments {
        if let Ok(parsed) = serde_json::from_str(text) {
            return parsed;
        }
    }
    call.arguments.clone()
}

fn path_argument(arguments: &Value) -> Option<String> {
    let fields = arguments.as_object()?;
    PATH_KEYS
        .iter()
        .find_map(|key| fields.get(*key).and_then(Value::as_str))
        .map(str::trim)
        .filter(|path| !path.is_empty())
        .map(str::to_owned)
}

/// Files named in a Codex patch (`*** Add File:`, `*** Update File:`, `*** Delete File:`,
/// `*** Move to:`) or a unified diff (`+++ b/…`).
fn patch_files(patch: &str) -> Vec<(FileAccess, String)> {
    let mut files = Vec::new();
    for line in patch.lines() {
        let line = line.trim_end();
        let found = if let Some(path) = line.strip_prefix("*** Add File: ") {
            Some((FileAccess::Write, path))
        } else if let Some(path) = line.strip_prefix("*** Update File: ") {
            Some((FileAccess::Edit, path))
        } else if let Some(path) = line.strip_prefix("*** Delete File: ") {
            Some((FileAccess::Edit, path))
        } else if let Some(path) = line.strip_prefix("*** Move to: ") {
            Some((FileAccess::Write, path))
        } else if let Some(path) = line.strip_prefix("+++ ") {
            let path = path.strip_prefix("b/").unwrap_or(path);
            (path != "/dev/null").then_some((FileAccess::Edit, path))
        } else {
            None
        };
        if let Some((access, path)) = found {
            let path = path.trim();
            if !path.is_empty() {
                files.push((access, path.to_owned()));
            }
        }
    }
    files
}

/// The file operations of every tool call in `messages`.
pub fn collect_file_ops(messages: &[Message]) -> FileOps {
    let mut ops = FileOps::default();
    for call in messages.iter().flat_map(|message| message.tool_calls()) {
        for (access, path) in file_accesses(call) {
            match access {
                FileAccess::Read => ops.read.insert(path),
                FileAccess::Edit => ops.edited.insert(path),
                FileAccess::Write => ops.written.insert(path),
            };
        }
    }
    ops
}

/// `<read-files>` and `<modified-files>` blocks, each only when non-empty.
pub fn format_file_lists(lists: &FileLists) -> String {
    let mut sections = Vec::new();
    if !lists.read.is_empty() {
        sections.push(format!(
            "<read-files>\n{}\n</read-files>",
            lists.read.join("\n")
        ));
    }
    if !lists.modified.is_empty() {
        sections.push(format!(
            "<modified-files>\n{}\n</modified-files>",
            lists.modified.join("\n")
        ));
    }
    sections.join("\n\n")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;
    use crate::compaction::appendices::tests::call;

    #[test]
    fn file_lists_from_openclaw_and_claude_code_tools() {
        let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** Add File: src/new.rs\n*** End Patch";
        let messages = vec![
            call("1", "read", json!({"path": "src/a.rs"})),
            call("2", "Read", json!({"file_path": "/repo/README.md"})),
            call(
                "3",
                "Edit",
                json!({"file_path": "src/a.rs", "old_string": "x"}),
            ),
            call("4", "MultiEdit", json!({"file_path": "src/b.rs"})),
            call("5", "Write", json!({"file_path": "notes.md"})),
            call("6", "read_file", json!({"path": "Cargo.toml"})),
            call("7", "apply_patch", json!({"input": patch})),
            call(
                "8",
                "str_replace_editor",
                json!({"command": "view", "path": "/x/y.py"}),
            ),
            call(
                "9",
                "str_replace_editor",
                json!({"command": "str_replace", "path": "/x/z.py"}),
            ),
            call("10", "bash", json!({"command": "cat secret.txt"})),
        ];
        let lists = collect_file_ops(&messages).lists();
        assert_eq!(lists.read, ["/repo/README.md", "/x/y.py", "Cargo.toml"]);
        assert_eq!(
            lists.modified,
            [
                "/x/z.py",
                "notes.md",
                "src/a.rs",
                "src/b.rs",
                "src/lib.rs",
                "src/new.rs"
            ]
        );
        assert_eq!(
            format_file_lists(&FileLists {
                read: vec!["a".into()],
                modified: vec!["b".into()],
            }),
            "<read-files>\na\n</read-files>\n\n<modified-files>\nb\n</modified-files>"
        );
        assert_eq!(format_file_lists(&FileLists::default()), "");
    }

    #[test]
    fn previous_file_lists_carry_over() {
        let mut ops = collect_file_ops(&[call("1", "read", json!({"path": "b"}))]);
        ops.extend_with(&FileLists {
            read: vec!["a".into()],
            modified: vec!["b".into()],
        });
        let lists = ops.lists();
        assert_eq!(lists.read, ["a"]);
        assert_eq!(lists.modified, ["b"]);
    }

    #[test]
    fn string_arguments_holding_json_are_parsed() {
        let message = call(
            "1",
            "write_file",
            Value::String(r#"{"path":"out.txt"}"#.into()),
        );
        assert_eq!(collect_file_ops(&[message]).lists().modified, ["out.txt"]);
    }
}
