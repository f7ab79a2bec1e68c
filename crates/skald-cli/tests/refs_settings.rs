//! `[refs]` in skald.toml through the `skald` binary: a hook's ref is kept as long as the file
//! says (read back from the data directory's database), and a bad value stops the command with
//! an error naming the key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use skald_store::{DATABASE_FILE, RefSettings, SqliteRefStore};

/// `skald ARGS` on `home` with `stdin`.
fn skald_on(home: &std::path::Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skald"))
        .args(args)
        .env("SKALD_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// What Claude Code's PostToolUse hook hands `skald hook post-tool-use` for a long Bash output.
fn post_tool_use_input() -> String {
    let output: String = (0..400)
        .map(|line| {
            format!(
                "INFO step {line}: processed batch {} of 400\n",
                line * 7 % 400
            )
        })
        .collect();
    json!({
        "hook_event_name": "PostToolUse",
        "session_id": "cc-session-1",
        "tool_name": "Bash",
        "tool_input": {"command": "make check"},
        "tool_response": {"stdout": output, "stderr": "", "interrupted": false},
    })
    .to_string()
}

/// How long the ref the hook stored in `home` is kept: its expiry less its creation, in ms.
fn kept_ms_of_the_hooks_ref(home: &std::path::Path) -> i64 {
    let output = skald_on(home, &["hook", "post-tool-use"], &post_tool_use_input());
    assert!(output.status.success(), "{output:?}");
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    let placeholder = answer["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
        .as_str()
        .unwrap_or_else(|| panic!("no placeholder: {answer}"));
    let (_, rest) = placeholder.split_once("[REF_ID: ").unwrap();
    let store = SqliteRefStore::open(home.join(DATABASE_FILE), RefSettings::default()).unwrap();
    let info = store.info(&Default::default(), &rest[..64]).unwrap();
    info.expires_at_ms - info.created_at_ms
}

#[test]
fn a_hooks_ref_is_kept_as_long_as_the_refs_table_says() {
    let configured = tempfile::tempdir().unwrap();
    std::fs::write(
        configured.path().join("skald.toml"),
        "[refs]\nttl_secs = 900\nmax_entries = 1000\n",
    )
    .unwrap();
    assert_eq!(kept_ms_of_the_hooks_ref(configured.path()), 900_000);
    // Without the table, a day.
    let default = tempfile::tempdir().unwrap();
    assert_eq!(kept_ms_of_the_hooks_ref(default.path()), 86_400_000);
}

#[test]
fn a_bad_refs_value_stops_the_command_naming_the_key_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("skald.toml"), "[refs]\nttl_secs = 60\n").unwrap();
    let output = skald_on(home.path(), &["remember", "--content", "x"], "");
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("[refs] ttl_secs in") && stderr.contains("is 60: it must be from 600"),
        "{stderr}"
    );
    assert!(!home.path().join(DATABASE_FILE).exists());
}
