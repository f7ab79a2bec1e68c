//! Tool output inside an envelope (Codex's JSON string on the chat wire, its Responses `Output:`
//! header) is digested and sliced as the output it holds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use skald_core::digest::{ContentKind, DigestSettings, digest};
use skald_core::fetch::{FetchArgs, render_payload};
use skald_core::message::Block;
use skald_core::refs::RefPayload;

fn pytest_output() -> String {
    let mut out = String::from(
        "============================= test session starts ==============================\n\
         platform linux -- Python 3.12.1, pytest-8.3.2\ncollected 42 items\n\n",
    );
    for index in 0..40 {
        out.push_str(&format!("tests/test_api.py::test_case_{index} PASSED\n"));
    }
    out.push_str("tests/test_api.py::test_delete FAILED\n");
    out.push_str("E   AssertionError: expected 204, got 500\n");
    out.push_str("=================== 1 failed, 41 passed in 3.21s ===================\n");
    out
}

/// Codex (chat wire): `{"output": "...", "metadata": {"exit_code": …}}` as the tool message text.
fn codex_chat_wrapped(output: &str, exit_code: i64) -> String {
    json!({"output": output, "metadata": {"exit_code": exit_code, "duration_seconds": 3.4}})
        .to_string()
}

/// Codex 0.169 Responses `function_call_output.output`.
fn codex_responses_wrapped(output: &str, exit_code: i64) -> String {
    format!(
        "Chunk ID: 8c1e7a\nWall time: 3.4012 seconds\nProcess exited with code {exit_code}\nOriginal token count: 812\nOutput:\n{output}"
    )
}

#[test]
fn json_wrapped_codex_output_is_digested_as_its_text() {
    let plain = digest(&pytest_output(), &DigestSettings::default());
    let wrapped = digest(
        &codex_chat_wrapped(&pytest_output(), 1),
        &DigestSettings::default(),
    );
    assert_ne!(wrapped.kind, ContentKind::Json);
    assert_eq!(wrapped.kind, plain.kind);
    assert!(!wrapped.summary.contains("1 line"), "{}", wrapped.summary);
    assert!(wrapped.summary.contains("exit 1"), "{}", wrapped.summary);
    assert!(
        wrapped.summary.contains("1 failed, 41 passed"),
        "{}",
        wrapped.summary
    );
    assert!(
        wrapped.summary.contains("test_delete"),
        "{}",
        wrapped.summary
    );
}

#[test]
fn codex_responses_header_output_is_digested_as_its_body_with_the_exit_code() {
    let plain = digest(&pytest_output(), &DigestSettings::default());
    let wrapped = digest(
        &codex_responses_wrapped(&pytest_output(), 1),
        &DigestSettings::default(),
    );
    assert_eq!(wrapped.kind, plain.kind);
    assert!(wrapped.summary.contains("exit 1"), "{}", wrapped.summary);
    assert!(
        wrapped.summary.contains("1 failed, 41 passed"),
        "{}",
        wrapped.summary
    );
    assert!(!wrapped.summary.contains("Chunk ID"), "{}", wrapped.summary);
}

#[test]
fn a_wrapped_json_body_is_digested_as_json() {
    let body = serde_json::to_string_pretty(&json!({"items": [1, 2, 3], "next": null})).unwrap();
    let wrapped = digest(
        &codex_responses_wrapped(&body, 0),
        &DigestSettings::default(),
    );
    assert_eq!(wrapped.kind, ContentKind::Json);
    assert!(wrapped.summary.contains("exit 0"), "{}", wrapped.summary);
}

#[test]
fn fetch_slices_the_unwrapped_text_of_a_json_wrapped_output() {
    let payload = RefPayload::new(vec![Block::text(codex_chat_wrapped(&pytest_output(), 1))]);
    let id = payload.id();
    let grep = FetchArgs::from_json(&json!({
        "ref_ids": [id.as_str()], "grep": "AssertionError", "context": 0
    }))
    .unwrap();
    let out = render_payload(&id, &payload, &grep);
    assert!(
        out.contains("| E   AssertionError: expected 204, got 500"),
        "{out}"
    );
    assert!(!out.contains("no line matches"), "{out}");
    assert!(
        out.contains("unwrapped from JSON field \"output\", exit code 1"),
        "{out}"
    );
    let lines = FetchArgs::from_json(&json!({"ref_ids": [id.as_str()], "lines": "2:3"})).unwrap();
    let out = render_payload(&id, &payload, &lines);
    assert!(out.contains("2| platform linux"), "{out}");
    assert!(out.contains("3| collected 42 items"), "{out}");
}

#[test]
fn fetch_slices_the_body_of_a_codex_responses_output() {
    let payload = RefPayload::new(vec![Block::text(codex_responses_wrapped(
        &pytest_output(),
        1,
    ))]);
    let id = payload.id();
    let args = FetchArgs::from_json(&json!({"ref_ids": [id.as_str()], "lines": "1:1"})).unwrap();
    let out = render_payload(&id, &payload, &args);
    assert!(out.contains("1| ===="), "{out}");
    assert!(
        out.contains("unwrapped from Codex output header, exit code 1"),
        "{out}"
    );
}
