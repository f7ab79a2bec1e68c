//! skald in the real Claude Code without the proxy: the pinned CLI (`hosts/package-lock.json`)
//! with skald's plugin (`integrations/claude-code`, loaded with `--plugin-dir`) talks straight to
//! a scripted Anthropic upstream, and skald's `PostToolUse` hook (`skald hook post-tool-use`)
//! replaces a large Bash output by its placeholder before the model sees it — the original
//! stored in skald's local store, where `fetch_original_data` finds it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod hosts;

use std::path::Path;
use std::process::Command;

use hosts::upstream::{Script, Step, Upstream, first_ref_id};
use hosts::{HOST_TIMEOUT, repo_root, run, workdir};

#[test]
fn claude_code_with_skalds_plugin_sends_a_large_bash_output_as_a_placeholder() {
    let dir = workdir();
    let upstream = Upstream::start(Script {
        steps: vec![Step::Large, Step::Echo("echo step-1-ok".to_owned())],
        fetch_at: None,
    });
    let skald_home = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let skald = Path::new(env!("CARGO_BIN_EXE_skald"));
    let path = format!(
        "{}:{}",
        skald.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let plugin = repo_root().join("integrations/claude-code");
    let mut command = hosts::claude_code_command(
        &upstream.url(),
        None,
        &dir,
        &state,
        &[
            "-p",
            hosts::PROMPT,
            "--plugin-dir",
            plugin.to_str().unwrap(),
        ],
    );
    // The hooks and the MCP server run `skald` from PATH, on this store.
    command
        .env("PATH", path)
        .env("SKALD_HOME", skald_home.path());
    let finished = run(command, state.path(), "claude", HOST_TIMEOUT);
    assert!(
        finished.success(),
        "claude failed:\n{}\n{}",
        finished.tail(4000),
        upstream.dump()
    );
    let calls = upstream.model_calls();
    assert!(calls.len() >= 2, "{}", upstream.dump());
    // The call after the large output: the placeholder went up, not the output.
    let second = calls[1].body.to_string();
    let id = first_ref_id(&calls[1].body)
        .unwrap_or_else(|| panic!("no placeholder in the call after the output:\n{second:.3000}"));
    assert!(
        !second.contains("\\n3999\\n4000"),
        "the large output went up whole: {second:.3000}"
    );
    // The original is in skald's store, whole.
    let fetched = Command::new(skald)
        .args(["fetch", &id, "--lines", "3999:4000"])
        .env("SKALD_HOME", skald_home.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&fetched.stdout);
    assert!(
        fetched.status.success() && text.contains("3999") && text.contains("4000"),
        "skald fetch {id}: {text}\n{}",
        String::from_utf8_lossy(&fetched.stderr)
    );
}
