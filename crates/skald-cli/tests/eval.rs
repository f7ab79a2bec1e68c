//! `skald eval locomo` on a tiny LoCoMo-shaped fixture: the JSON report's keys and figures, the
//! errors file's corrections, merged duplicate turns and questions without evidence.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

const FIXTURE: &str = "tests/fixtures/locomo/tiny.json";
const ERRORS: &str = "tests/fixtures/locomo/tiny-errors.json";

fn eval(extra: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_skald"))
        .args(["eval", "locomo", FIXTURE])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn reports_recall_latency_and_ingest_with_the_corrected_evidence() {
    let report = eval(&["--errors", ERRORS, "--json"]);
    assert_eq!(report["conversations"], 2);
    assert_eq!(report["turns"], 19);
    // Ada's two "Thanks!" are one memory with both turns as sources.
    assert_eq!(report["merged_exact"], 1);
    assert_eq!(report["memories_stored"], 18);
    assert_eq!(report["questions"], 5);
    // Only the entry with a correct_evidence counts as a correction.
    assert_eq!(report["evidence_corrections"], 1);
    assert_eq!(report["questions_scored"], 4);
    assert_eq!(report["questions_without_evidence"], 1);
    assert_eq!(report["evidence_turns_missing"], 0);
    for key in [
        "session_recall_at_10",
        "turn_recall_at_10",
        "turn_any_at_10",
    ] {
        assert_eq!(report[key], 1.0, "{key}");
    }
    for key in [
        "session_recall_at_1",
        "session_recall_at_5",
        "turn_recall_at_1",
        "turn_recall_at_5",
        "search_p50_ms",
        "search_p95_ms",
        "ingest_memories_per_s",
    ] {
        assert!(
            report[key].as_f64().unwrap() > 0.0,
            "{key}: {}",
            report[key]
        );
    }
    // Per-turn recall's injection, judged by the evidence: the floor's settings are reported.
    let injected = report["memories_injected"].as_u64().unwrap();
    assert!(injected > 0, "{report}");
    let precision = report["injection_precision"].as_f64().unwrap();
    assert!(
        (0.0..=1.0).contains(&precision) && precision > 0.0,
        "{precision}"
    );
    assert!(report["injection_turn_precision"].as_f64().unwrap() <= precision);
    assert!(report["questions_nothing_injected"].as_u64().unwrap() <= 4);
    assert!(
        report["unrelated_questions_with_injection"]
            .as_u64()
            .unwrap()
            <= 4
    );
    assert_eq!(
        report["injection_min_text_relevance"],
        skald_core::memory::recall::DEFAULT_MIN_TEXT_RELEVANCE
    );
    assert_eq!(report["injection_max_results"], 5);
    assert!(report["by_category"][0]["injection_precision"].is_number());
    let categories: Vec<(i64, &str, u64)> = report["by_category"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["category"].as_i64().unwrap(),
                c["name"].as_str().unwrap(),
                c["questions"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        categories,
        [
            (1, "multi-hop", 1),
            (2, "temporal", 1),
            (4, "single-hop", 2)
        ]
    );
}

#[test]
fn without_the_errors_file_a_wrong_citation_is_not_scored() {
    let report = eval(&["--json"]);
    assert_eq!(report["evidence_corrections"], 0);
    // "D9:9" names no turn of the conversation.
    assert_eq!(report["evidence_turns_missing"], 1);
    assert_eq!(report["questions_scored"], 3);
    assert_eq!(report["questions_without_evidence"], 2);
}

#[test]
fn turns_can_be_indexed_without_their_context() {
    let report = eval(&[
        "--errors",
        ERRORS,
        "--json",
        "--context-before",
        "0",
        "--context-after",
        "0",
        "--no-date-ranking",
    ]);
    assert_eq!(report["context_before"], 0);
    assert_eq!(report["context_after"], 0);
    assert_eq!(report["date_ranking"], false);
    assert_eq!(report["turn_recall_at_10"], 1.0);
}

#[test]
fn the_relevance_floor_of_the_injection_can_be_set() {
    let floor = |value: &str| {
        let report = eval(&["--errors", ERRORS, "--json", "--min-text-relevance", value]);
        assert_eq!(
            report["injection_min_text_relevance"],
            value.parse::<f64>().unwrap()
        );
        report["memories_injected"].as_u64().unwrap()
    };
    // No floor injects at least what the strictest floor does.
    assert!(floor("0") >= floor("1"));
    let output = Command::new(env!("CARGO_BIN_EXE_skald"))
        .args(["eval", "locomo", FIXTURE, "--min-text-relevance", "2"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("min_text_relevance is 2"), "{stderr}");
}

#[test]
fn a_missing_or_malformed_file_is_a_clear_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_skald"))
        .args(["eval", "locomo", "tests/fixtures/locomo/none.json"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot read the LoCoMo file"), "{stderr}");

    let output = Command::new(env!("CARGO_BIN_EXE_skald"))
        .args(["eval", "locomo", ERRORS])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("has no `conversation` object"), "{stderr}");
}

#[test]
fn hybrid_evaluation_needs_an_embedder() {
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_skald"))
        .arg("--home")
        .arg(home.path())
        .args(["eval", "locomo", FIXTURE, "--embedder"])
        .env_remove("SKALD_HOME")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--embedder needs an [embedding] table"),
        "{stderr}"
    );

    let output = Command::new(env!("CARGO_BIN_EXE_skald"))
        .args([
            "eval",
            "locomo",
            FIXTURE,
            "--model-dir",
            "tests/fixtures/no-model",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot load the model in"), "{stderr}");
}
