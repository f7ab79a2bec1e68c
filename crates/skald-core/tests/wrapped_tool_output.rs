//! Tool output inside an envelope (Codex's JSON string on the chat wire, its Responses `Output:`
//! header) is digested as the output it holds, and an offloaded output of any shape — JSON
//! objects with `stdout`, `output`, `metadata`… included — is fetched back byte for byte as the
//! model was shown it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Value, json};
use skald_core::digest::{ContentKind, DigestSettings, digest};
use skald_core::fetch::{FetchArgs, render_payload};
use skald_core::message::{Block, ContentForm, Extra, Message, Role, ToolCall, ToolResult};
use skald_core::pipeline::offload::{OffloadCache, OffloadSettings, offload};
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

/// [`pytest_output`] with a slow-test report before it: over the offload threshold.
fn long_pytest_output() -> String {
    let mut out = String::from("slowest durations:\n");
    for index in 0..80 {
        out.push_str(&format!(
            "0.{index:02}s call tests/test_api.py::test_case_{index}\n"
        ));
    }
    out + &pytest_output()
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

/// The original a whole `fetch_original_data` answer gives back: its numbered lines, without
/// the numbers, each ended by a line break unless the header says the last has none.
fn read_back(rendered: &str) -> String {
    let (header, body) = rendered.split_once('\n').unwrap();
    assert!(header.starts_with("=== REF_ID "), "{header}");
    assert!(!body.contains("[… cut at max_chars"), "{rendered}");
    let mut text = String::new();
    for line in body.split_inclusive('\n') {
        let (number, rest) = line.split_once("| ").unwrap();
        assert!(number.trim().parse::<usize>().is_ok(), "{line:?}");
        text.push_str(rest);
    }
    if header.contains("; no line break at the end") {
        assert_eq!(text.pop(), Some('\n'));
    }
    text
}

/// A whole fetch of `text` offloaded by the pipeline, as the model asks for it.
fn offloaded_and_fetched(text: &str) -> String {
    let messages = vec![
        Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                arguments: json!({"command": "cat out.json"}),
                arguments_text: None,
                extra: Extra::new(),
            })],
        ),
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: "c1".into(),
                tool_name: Some("bash".into()),
                content: vec![Block::text(text)].into(),
                content_form: ContentForm::Text,
                is_error: None,
                details: None,
                extra: Extra::new(),
            })],
        ),
    ];
    let outcome = offload(
        messages,
        &OffloadSettings::default(),
        &mut OffloadCache::default(),
        |_, _| true,
    );
    let [new_ref] = outcome.new_refs.as_slice() else {
        panic!("one original offloaded, got {}", outcome.new_refs.len());
    };
    let args = FetchArgs::from_json(&json!({
        "ref_ids": [new_ref.id.as_str()], "max_chars": 10_000_000
    }))
    .unwrap();
    render_payload(&new_ref.id, &new_ref.payload, &args)
}

/// What `jq .toolUseResult` prints from a Claude Code record of a Bash call: its record of
/// the output, which a tool result carrying it shows the model whole.
fn claude_code_tool_use_result(stdout: &str, stderr: &str) -> String {
    serde_json::to_string_pretty(&json!({
        "stdout": stdout,
        "stderr": stderr,
        "interrupted": false,
        "isImage": false,
        "noOutputExpected": false,
    }))
    .unwrap()
}

#[test]
fn a_claude_code_tool_use_result_object_is_given_back_whole_not_its_stdout() {
    let text = claude_code_tool_use_result(&long_pytest_output(), "warning: 3 tests were slow\n");
    assert!(text.chars().count() > 3_000);
    let rendered = offloaded_and_fetched(&text);
    assert_eq!(read_back(&rendered), text);
    assert!(
        rendered.contains("warning: 3 tests were slow"),
        "{rendered}"
    );
    assert!(
        rendered.contains("\"noOutputExpected\": false"),
        "{rendered}"
    );
}

#[test]
fn fetch_gives_a_json_wrapped_output_back_as_the_model_saw_it() {
    let text = codex_chat_wrapped(&long_pytest_output(), 1);
    let rendered = offloaded_and_fetched(&text);
    assert_eq!(read_back(&rendered), text);
    assert!(
        rendered.contains("output inside JSON field \"output\", exit code 1"),
        "{rendered}"
    );
    // A grep finds the envelope's one line, as the model saw it.
    let payload = RefPayload::new(vec![Block::text(text.clone())]);
    let id = payload.id();
    let grep = FetchArgs::from_json(&json!({
        "ref_ids": [id.as_str()], "grep": "AssertionError", "context": 0, "max_chars": 100_000
    }))
    .unwrap();
    let out = render_payload(&id, &payload, &grep);
    assert!(out.contains(&format!("1| {text}")), "{out}");
}

#[test]
fn fetch_gives_a_codex_responses_output_back_with_its_header() {
    let text = codex_responses_wrapped(&long_pytest_output(), 1);
    let rendered = offloaded_and_fetched(&text);
    assert_eq!(read_back(&rendered), text);
    let payload = RefPayload::new(vec![Block::text(text)]);
    let id = payload.id();
    let args = FetchArgs::from_json(&json!({"ref_ids": [id.as_str()], "lines": "1:1"})).unwrap();
    let out = render_payload(&id, &payload, &args);
    assert!(out.contains("1| Chunk ID: 8c1e7a"), "{out}");
    assert!(
        out.contains("output inside Codex output header, exit code 1"),
        "{out}"
    );
}

/// Text that may be a field of a tool's JSON output: lines, blank lines, CR LF, tabs, quotes,
/// backslashes, non-ASCII.
fn field_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            "[a-zA-Z0-9 _./:=-]{0,60}",
            Just(String::new()),
            Just("\r".to_owned()),
            Just("\t\"quoted\" \\ back".to_owned()),
            Just("héllo wörld ✓ 日本".to_owned()),
        ],
        0..120,
    )
    .prop_map(|lines| lines.join("\n"))
}

/// JSON objects shaped like tool outputs (Claude Code's Bash record, Codex's envelope, MCP-ish
/// results), compact or pretty, with or without a line break at the end.
fn json_shaped_output() -> impl Strategy<Value = String> {
    let keys = prop_oneof![
        Just("stdout"),
        Just("stderr"),
        Just("output"),
        Just("content"),
        Just("text"),
        Just("result"),
        Just("metadata"),
        Just("interrupted"),
        Just("isImage"),
        Just("exit_code"),
    ];
    let value = prop_oneof![
        field_text().prop_map(Value::String),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..300).prop_map(|code| json!(code)),
        (0i64..256).prop_map(|code| json!({"exit_code": code, "duration_seconds": 0.25})),
    ];
    (
        proptest::collection::vec((keys, value), 1..6),
        any::<bool>(),
        prop_oneof![Just(""), Just("\n"), Just("\r\n")],
        "[a-z ]{0,5000}",
    )
        .prop_map(|(fields, pretty, end, padding)| {
            let mut object: serde_json::Map<String, Value> = fields
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value))
                .collect();
            // Long enough to be offloaded.
            object.insert("padding".to_owned(), Value::String(padding));
            let object = Value::Object(object);
            let text = if pretty {
                serde_json::to_string_pretty(&object).unwrap()
            } else {
                object.to_string()
            };
            format!("{text}{end}")
        })
        .prop_filter("over the offload threshold", |text| {
            text.chars().count() > OffloadSettings::default().compress_threshold
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn an_offloaded_json_shaped_output_is_fetched_back_byte_for_byte(text in json_shaped_output()) {
        prop_assert_eq!(read_back(&offloaded_and_fetched(&text)), text);
    }
}
