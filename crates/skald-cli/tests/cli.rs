//! End-to-end tests of the `skald` binary: JSON output shapes, exit codes, error messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn skald(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skald"))
        .args(args)
        .current_dir(repo_root())
        .env_remove("SKALD_HOME")
        .output()
        .unwrap()
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

#[test]
fn inspect_example_session_reports_every_promised_key() {
    let output = skald(&["inspect", "examples/openclaw-session.jsonl"]);
    assert!(output.status.success(), "{output:?}");
    let report = json(&output);
    let file = &report[0];
    for key in [
        "format",
        "messages",
        "tool_calls",
        "tool_result_chars",
        "tokens",
        "repair",
    ] {
        assert!(file.get(key).is_some(), "missing {key} in {file}");
    }
    assert_eq!(file["format"], "openclaw-session");
    assert_eq!(file["messages"]["assistant"], 5);
    assert_eq!(file["messages"]["tool_result"], 4);
    assert_eq!(file["tool_calls"]["read"], 2);
    assert_eq!(file["tool_result_chars"]["count"], 4);
    for key in ["count", "median", "p90", "max"] {
        assert!(file["tool_result_chars"][key].is_u64());
    }
    assert!(file["tokens"]["estimate"].as_u64().unwrap() > 500);
    assert!(file["tokens"]["bpe"].as_u64().unwrap() > 500);
    // The example's second read call never got a result: repair inserts one.
    assert_eq!(file["repair"]["inserted"], 1);
    assert!(
        file["repair"]["reasons"][0]
            .as_str()
            .unwrap()
            .contains("toolu_01C")
    );
}

#[test]
fn inspect_reports_an_unreadable_file_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"foo": 1}"#).unwrap();
    let output = skald(&[
        "inspect",
        bad.to_str().unwrap(),
        "examples/openclaw-session.jsonl",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let report = json(&output);
    assert!(
        report[0]["error"]
            .as_str()
            .unwrap()
            .contains("no supported format")
    );
    assert_eq!(report[1]["format"], "openclaw-session");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad.json"), "{stderr}");
}

#[test]
fn inspect_missing_path_is_a_clear_error() {
    let output = skald(&["inspect", "no/such/file.jsonl"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read no/such/file.jsonl"),
        "{stderr}"
    );
}

#[test]
fn inspect_rejects_an_unknown_encoding() {
    let output = skald(&[
        "inspect",
        "--encoding",
        "p50k",
        "examples/openclaw-session.jsonl",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("expected auto, o200k_base or cl100k_base"),
        "{stderr}"
    );
}

#[test]
fn tokens_compares_methods_on_calls_with_usage() {
    let output = skald(&["tokens", "examples/openclaw-session.jsonl"]);
    assert!(output.status.success(), "{output:?}");
    let report = json(&output);
    assert_eq!(report["all"]["calls"], 5);
    for method in ["chars4", "bpe", "calibrated"] {
        assert!(report["all"][method]["mean_ape_pct"].is_f64());
        assert!(report["all"][method]["p90_ape_pct"].is_f64());
    }
    assert_eq!(report["by_format"]["openclaw-session"]["calls"], 5);
}

#[test]
fn tokens_without_usage_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("req.json");
    std::fs::write(
        &file,
        r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .unwrap();
    let output = skald(&["tokens", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no assistant call with provider-reported usage"),
        "{stderr}"
    );
}

#[test]
fn home_honours_flag_then_environment() {
    let output = Command::new(env!("CARGO_BIN_EXE_skald"))
        .args(["home", "--home", "/tmp/skald-flag"])
        .env("SKALD_HOME", "/tmp/skald-env")
        .output()
        .unwrap();
    let report = json(&output);
    assert_eq!(report["path"], "/tmp/skald-flag");
    assert_eq!(report["source"], "--home");
    let output = Command::new(env!("CARGO_BIN_EXE_skald"))
        .arg("home")
        .env("SKALD_HOME", "/tmp/skald-env")
        .output()
        .unwrap();
    let report = json(&output);
    assert_eq!(report["path"], "/tmp/skald-env");
    assert_eq!(report["source"], "SKALD_HOME");
}

#[test]
fn replay_reports_every_promised_key_and_writes_a_chart() {
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("context.svg");
    let output = skald(&[
        "replay",
        "examples/openclaw-session.jsonl",
        "--chart",
        chart.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{output:?}");
    let report = json(&output);
    for policy in ["none", "openclaw", "sccs", "skald"] {
        let figures = &report["policies"][policy];
        for key in [
            "input_tokens",
            "peak_context_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "cost_usd",
            "retention",
            "fetch_penalty_tokens",
            "offloads",
            "trims",
            "clears",
            "truncations",
            "assemble_ms",
            "hidden_rounds",
            "recalls",
            "recall_tokens",
            "compactions",
            "prefix_breaks",
        ] {
            assert!(
                figures.get(key).is_some(),
                "{policy} lacks {key}: {figures}"
            );
        }
        assert!(figures["retention"]["visible"].is_f64());
        assert!(figures["retention"]["recoverable"].is_f64());
    }
    // The example's 3.4 kB pytest log leaves the context under SCCS, which offloads at first
    // sight. (skald's cost-aware schedule keeps it: with the host's own prefix in front, a
    // rewrite of the cache does not pay back over a five-call session.)
    assert!(report["policies"]["sccs"]["offloads"].as_u64().unwrap() >= 1);
    // Memory is on by default, as in `skald serve`: its tools are in every call but `none`'s.
    assert_eq!(report["settings"]["memory"], true);
    assert!(
        report["policies"]["skald"]["input_tokens"]
            .as_u64()
            .unwrap()
            > report["policies"]["none"]["input_tokens"].as_u64().unwrap()
    );
    // OpenClaw sessions record usage: the billed figures sit beside the replay.
    assert!(report["billed"]["calls"].as_u64().unwrap() >= 1);
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert_eq!(svg.matches("<polyline").count(), 4);
}

#[test]
fn replay_rejects_an_unknown_policy_with_the_choices() {
    let output = skald(&[
        "replay",
        "examples/openclaw-session.jsonl",
        "--policy",
        "fast",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("none, openclaw, openclaw-seed, sccs, skald"),
        "{stderr}"
    );
}

/// Regression: two policy files that kept their preset's name reported as one policy, the
/// later silently replacing the earlier.
#[test]
fn replay_rejects_two_policies_of_one_name() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.toml");
    let second = dir.path().join("second.toml");
    std::fs::write(&first, "preset = \"skald\"\n").unwrap();
    std::fs::write(
        &second,
        "preset = \"skald\"\n[schedule]\nmode = \"immediate\"\n",
    )
    .unwrap();
    let output = skald(&[
        "replay",
        "examples/openclaw-session.jsonl",
        "--policy",
        &format!("none,{},{}", first.display(), second.display()),
    ]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("both named \"skald\""), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn replay_accepts_a_policy_file_with_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("mine.toml");
    std::fs::write(
        &policy,
        "preset = \"sccs\"\nname = \"mine\"\n[offload]\ncompress_threshold = 2500\n",
    )
    .unwrap();
    let output = skald(&[
        "replay",
        "examples/openclaw-session.jsonl",
        "--policy",
        &format!("none,{}", policy.display()),
    ]);
    assert!(output.status.success(), "{output:?}");
    let report = json(&output);
    assert!(report["policies"]["mine"]["offloads"].as_u64().unwrap() >= 1);
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[offload]\ncompress_threshold = 10\n").unwrap();
    let output = skald(&[
        "replay",
        "examples/openclaw-session.jsonl",
        "--policy",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("at least 2000"));
}

#[test]
fn fetch_reads_slices_from_the_local_store_and_rejects_bad_ids() {
    use skald_core::message::Block;
    use skald_core::refs::RefPayload;
    use skald_store::{DATABASE_FILE, RefSettings, SqliteRefStore};

    let home = tempfile::tempdir().unwrap();
    let text: Vec<String> = (1..=300).map(|i| format!("line {i}")).collect();
    let id = {
        let store =
            SqliteRefStore::open(home.path().join(DATABASE_FILE), RefSettings::default()).unwrap();
        store
            .put(
                &tenant_named("default"),
                &RefPayload::new(vec![Block::text(text.join("\n"))]),
            )
            .unwrap()
    };
    let home_arg = home.path().to_str().unwrap();
    let output = skald(&[
        "fetch",
        id.as_str(),
        "--lines",
        "120:121",
        "--home",
        home_arg,
    ]);
    assert!(output.status.success(), "{output:?}");
    let report = json(&output);
    assert_eq!(report["found"], 1);
    let body = report["text"].as_str().unwrap();
    assert!(body.contains("120| line 120\n121| line 121\n"), "{body}");
    assert!(!body.contains("line 122"));

    let output = skald(&["fetch", "../../etc/passwd", "--home", home_arg]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        json(&output)["text"]
            .as_str()
            .unwrap()
            .contains("not a ref id")
    );

    let empty = tempfile::tempdir().unwrap();
    let output = skald(&[
        "fetch",
        id.as_str(),
        "--home",
        empty.path().to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no ref store"));
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}

#[test]
fn replay_reports_cost_ratio_per_transcript() {
    let output = skald(&[
        "replay",
        "examples/openclaw-session.jsonl",
        "crates/skald-cli/tests/fixtures/claude-code/synthetic.jsonl",
        "--policy",
        "none,skald",
        // Memory's tools cost every call a fixed amount that these short transcripts never earn
        // back; the comparison is of the pipeline.
        "--no-memory",
    ]);
    assert!(output.status.success(), "{output:?}");
    let report = json(&output);
    let transcripts = report["transcripts"].as_array().unwrap();
    assert_eq!(transcripts.len(), 2);
    for row in transcripts {
        let ratio = &row["cost_vs_first"];
        assert_eq!(ratio["none"].as_f64(), Some(1.0), "{row}");
        let none = row["policies"]["none"]["cost_usd"].as_f64().unwrap();
        let skald = row["policies"]["skald"]["cost_usd"].as_f64().unwrap();
        let expected = ((skald / none) * 1000.0).round() / 1000.0;
        assert_eq!(ratio["skald"].as_f64(), Some(expected), "{row}");
        // skald's pipeline costs next to nothing more than keeping everything on these short
        // transcripts, where nothing pays for an offload.
        assert!(expected <= 1.02, "{row}");
        // Both record usage: every policy is also billed as the host was, against the bill.
        assert!(row["host"]["prefix_tokens"].is_u64(), "{row}");
        for policy in ["none", "skald"] {
            let host = &row["policies"][policy]["host"];
            let share = row["cost_vs_billed"][policy].as_f64().unwrap();
            let billed = row["billed"]["cost_usd"].as_f64().unwrap();
            let expected =
                ((host["cost_usd"].as_f64().unwrap() / billed) * 1000.0).round() / 1000.0;
            assert_eq!(share, expected, "{row}");
            assert!(
                host["input_tokens"].as_u64().unwrap()
                    > row["policies"][policy]["input_tokens"].as_u64().unwrap(),
                "the host's prefix is billed too: {row}"
            );
        }
    }
    assert!(report["cost_vs_billed"]["none"].is_f64(), "{report}");
}
