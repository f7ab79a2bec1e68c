//! The pinned Codex with skald's hooks manifest (`integrations/codex/hooks.json`) in its
//! `CODEX_HOME`, straight against a scripted Responses upstream (no proxy): what Codex's hooks
//! can do for skald is the per-turn recall (see `integrations/codex/README.md` for the events
//! they cannot serve).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod hosts;

use std::path::Path;
use std::process::Command;

use hosts::upstream::{Script, Upstream};
use hosts::{HOST_TIMEOUT, repo_root, run, workdir};

#[test]
fn codex_with_skalds_hooks_sends_the_memory_recalled_for_the_prompt() {
    let dir = workdir();
    let state = tempfile::tempdir().unwrap();
    let skald_home = tempfile::tempdir().unwrap();
    let upstream = Upstream::start(Script {
        steps: vec![],
        fetch_at: None,
    });
    let memory = "The staging cluster's database password rotates every Tuesday at 09:00 UTC";
    let remembered = Command::new(env!("CARGO_BIN_EXE_skald"))
        .args(["remember", "--content", memory])
        .env("SKALD_HOME", skald_home.path())
        .output()
        .unwrap();
    assert!(remembered.status.success(), "{remembered:?}");
    // The manifest as shipped, where Codex reads a user's hooks.
    std::fs::copy(
        repo_root().join("integrations/codex/hooks.json"),
        state.path().join("hooks.json"),
    )
    .unwrap();
    let skald = Path::new(env!("CARGO_BIN_EXE_skald"));
    let path = format!(
        "{}:{}",
        skald.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = hosts::codex_command(
        &format!("{}/v1", upstream.url()),
        None,
        dir.path(),
        state.path(),
        "",
        // Headless, Codex runs a user's hooks only once trusted; this is the flag for that.
        &[
            "--dangerously-bypass-hook-trust",
            "When does the staging database password rotate?",
        ],
    );
    command
        .env("PATH", path)
        .env("SKALD_HOME", skald_home.path());
    let finished = run(command, state.path(), "codex", HOST_TIMEOUT);
    assert!(
        finished.success(),
        "codex failed:\n{}\n{}",
        finished.tail(4000),
        upstream.dump()
    );
    let calls = upstream.model_calls();
    let first = calls
        .first()
        .unwrap_or_else(|| panic!("{}", upstream.dump()));
    let body = first.body.to_string();
    assert!(
        body.contains("Tuesday at 09:00 UTC") && body.contains("search_memories"),
        "the recalled memory is not in the request: {body:.4000}"
    );
}
