//! Import codecs (Claude Code, mini-swe-agent, SWE-agent) and format detection, on hand-written
//! fixtures in `tests/fixtures/import/` that mirror the real formats.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use skald_core::codec::{self, DetectError, Format, claude_code, detect, mini_swe, swe_agent};
use skald_core::message::{
    Block, ContentForm, ImageSource, Message, Role, StopReason, Timestamp, ToolCall, ToolResult,
    Usage,
};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/import/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

fn roles(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|message| message.role.name()).collect()
}

fn only_call(message: &Message) -> &ToolCall {
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 1, "{message:?}");
    calls[0]
}

fn only_result(message: &Message) -> &ToolResult {
    let results: Vec<_> = message.tool_results().collect();
    assert_eq!(results.len(), 1, "{message:?}");
    results[0]
}

fn result_text(result: &ToolResult) -> &str {
    match result.content.as_slice() {
        [Block::Text(text)] => &text.text,
        other => panic!("expected one text block, found {other:?}"),
    }
}

// ---- Claude Code ---------------------------------------------------------------------------

#[test]
fn claude_code_session_decodes_to_one_message_per_api_call() {
    let read = claude_code::decode(&fixture("claude_code_session.jsonl")).unwrap();
    let messages = &read.conversation.messages;
    assert_eq!(
        roles(messages),
        [
            "user",
            "assistant",
            "tool_result",
            "tool_result",
            "assistant",
            "stop_hook_summary",
            "compact_boundary",
            "user",
            "user",
            "user",
            "assistant",
            "turn_duration",
        ]
    );
    // Snapshot, two progress lines, one queue operation.
    assert_eq!(read.ignored_lines, 4);
    assert_eq!(
        read.conversation.model.as_deref(),
        Some("claude-sonnet-4-5")
    );
}

#[test]
fn claude_code_bad_lines_are_reported_and_skipped() {
    let read = claude_code::decode(&fixture("claude_code_session.jsonl")).unwrap();
    assert_eq!(read.issues.len(), 2, "{:?}", read.issues);
    assert_eq!(read.issues[0].line, 12);
    assert!(
        read.issues[0].message.contains("invalid JSON"),
        "{}",
        read.issues[0]
    );
    assert_eq!(read.issues[1].line, 13);
    assert_eq!(
        read.issues[1].message,
        "message.content[1]: expected an object with \"type\", found a number"
    );
}

#[test]
fn claude_code_split_response_is_merged_with_its_results_after_it() {
    let read = claude_code::decode(&fixture("claude_code_session.jsonl")).unwrap();
    let assistant = &read.conversation.messages[1];
    assert_eq!(assistant.meta.id.as_deref(), Some("msg_A"));
    assert_eq!(assistant.meta.model.as_deref(), Some("claude-opus-4-6"));
    assert_eq!(assistant.meta.stop_reason, None);
    // The last line's usage carries the final output count, and its one-hour cache writes
    // (`cache_creation.ephemeral_1h_input_tokens`), which are priced apart.
    assert_eq!(
        assistant.meta.usage,
        Some(Usage {
            input: 3,
            output: 87,
            cache_read: 4000,
            cache_write: 120,
            cache_write_1h: 120,
        })
    );
    assert_eq!(
        assistant.meta.timestamp,
        Some(Timestamp::Rfc3339("2026-01-05T10:00:02.000Z".into()))
    );
    match assistant.content.as_slice() {
        [
            Block::Thinking(thinking),
            Block::Text(text),
            Block::ToolCall(first),
            Block::ToolCall(second),
        ] => {
            assert_eq!(thinking.signature.as_deref(), Some("sig-A"));
            assert_eq!(text.text, "Let me look at both.");
            assert_eq!(first.id, "toolu_1");
            assert_eq!(first.arguments, json!({"command": "make 2>&1 | tail -5"}));
            assert_eq!(first.extra.get("caller"), Some(&json!({"type": "direct"})));
            assert_eq!(second.name, "Read");
        }
        other => panic!("unexpected content {other:?}"),
    }
    assert_eq!(
        assistant.extra.get(claude_code::LINE_UUIDS),
        Some(&json!(["a-1", "a-2", "a-3", "a-4"]))
    );
    assert_eq!(assistant.extra.get("uuid"), Some(&json!("a-1")));
    assert_eq!(assistant.extra.get("requestId"), Some(&json!("req_A")));
    assert!(!assistant.extra.contains_key("type"));

    let first = only_result(&read.conversation.messages[2]);
    assert_eq!(first.call_id, "toolu_1");
    assert_eq!(first.tool_name.as_deref(), Some("Bash"));
    assert_eq!(first.is_error, Some(false));
    assert_eq!(first.content_form, ContentForm::Text);
    assert_eq!(result_text(first), "error: missing header foo.h");
    assert_eq!(
        first.details.as_deref(),
        Some(&json!({"stdout": "error: missing header foo.h", "stderr": "", "interrupted": false}))
    );
    let result_message = &read.conversation.messages[2];
    assert_eq!(result_message.meta.id.as_deref(), Some("u-2"));
    assert!(!result_message.extra.contains_key("toolUseResult"));
    assert_eq!(
        result_message.extra.get("sourceToolAssistantUUID"),
        Some(&json!("a-3"))
    );

    let second = only_result(&read.conversation.messages[3]);
    assert_eq!(second.call_id, "toolu_2");
    assert!(second.failed());
    assert_eq!(second.content_form, ContentForm::Blocks);
    assert_eq!(result_text(second), "File does not exist.");
    assert_eq!(
        second.details.as_deref(),
        Some(&json!("Error: File does not exist."))
    );
}

#[test]
fn claude_code_user_content_keeps_images_and_form() {
    let read = claude_code::decode(&fixture("claude_code_session.jsonl")).unwrap();
    let prompt = &read.conversation.messages[0];
    assert_eq!(prompt.content_form, ContentForm::Blocks);
    assert_eq!(prompt.meta.id.as_deref(), Some("u-1"));
    match prompt.content.as_slice() {
        [Block::Text(_), Block::Image(image)] => assert_eq!(
            image.source,
            ImageSource::Base64 {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into()
            }
        ),
        other => panic!("unexpected content {other:?}"),
    }
    assert_eq!(prompt.extra.get("permissionMode"), Some(&json!("default")));
}

#[test]
fn claude_code_compaction_restarts_the_request() {
    let read = claude_code::decode(&fixture("claude_code_session.jsonl")).unwrap();
    let messages = &read.conversation.messages;
    let boundary = &messages[6];
    assert!(claude_code::is_compact_boundary(boundary));
    assert!(!boundary.is_model_visible());
    assert_eq!(
        boundary.extra.get("compactMetadata"),
        Some(&json!({"trigger": "auto", "preTokens": 167000}))
    );
    assert_eq!(boundary.plain_text(), "Conversation compacted");

    let summary = &messages[7];
    assert_eq!(summary.role, Role::User);
    assert_eq!(summary.content_form, ContentForm::Text);
    assert_eq!(summary.extra.get("isCompactSummary"), Some(&json!(true)));
    assert_eq!(
        summary.extra.get("isVisibleInTranscriptOnly"),
        Some(&json!(true))
    );
    assert_eq!(messages[8].extra.get("isMeta"), Some(&json!(true)));

    assert_eq!(claude_code::request_start(messages, 1), 0);
    assert_eq!(claude_code::request_start(messages, 4), 0);
    assert_eq!(claude_code::request_start(messages, 10), 7);
    let request: Vec<&str> = messages[claude_code::request_start(messages, 10)..10]
        .iter()
        .filter(|message| message.is_model_visible())
        .map(|message| message.role.name())
        .collect();
    assert_eq!(request, ["user", "user", "user"]);
}

#[test]
fn claude_code_system_lines_are_custom_host_entries() {
    let read = claude_code::decode(&fixture("claude_code_session.jsonl")).unwrap();
    let hook = &read.conversation.messages[5];
    assert_eq!(hook.role, Role::Custom("stop_hook_summary".into()));
    assert!(hook.content.is_empty());
    assert_eq!(hook.content_form, ContentForm::Absent);
    assert_eq!(hook.extra.get("hookCount"), Some(&json!(1)));
    assert_eq!(hook.meta.id.as_deref(), Some("s-1"));
}

#[test]
fn claude_code_parallel_results_between_response_lines_follow_the_response() {
    // Two calls of one response, each result written before the next call's line.
    let lines = [
        json!({"type":"user","sessionId":"s","uuid":"u1","message":{"role":"user","content":"go"}}),
        json!({"type":"assistant","sessionId":"s","uuid":"a1","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}],"usage":{"output_tokens":1}}}),
        json!({"type":"user","sessionId":"s","uuid":"r1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"one"}]}}),
        json!({"type":"user","sessionId":"s","uuid":"meta","isMeta":true,"message":{"role":"user","content":"<system-reminder>hook context</system-reminder>"}}),
        json!({"type":"assistant","sessionId":"s","uuid":"a2","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t2","name":"Grep","input":{}}],"usage":{"output_tokens":9}}}),
        json!({"type":"user","sessionId":"s","uuid":"r2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"two"}]}}),
        json!({"type":"assistant","sessionId":"s","uuid":"a3","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"done"}]}}),
    ];
    let input: String = lines.iter().map(|line| format!("{line}\n")).collect();
    let read = claude_code::decode(&input).unwrap();
    let messages = &read.conversation.messages;
    assert_eq!(
        roles(messages),
        [
            "user",
            "assistant",
            "tool_result",
            "user",
            "tool_result",
            "assistant"
        ]
    );
    let ids: Vec<_> = messages[1]
        .tool_calls()
        .map(|call| call.id.as_str())
        .collect();
    assert_eq!(ids, ["t1", "t2"]);
    assert_eq!(messages[1].meta.usage.map(|usage| usage.output), Some(9));
    assert_eq!(only_result(&messages[4]).tool_name.as_deref(), Some("Grep"));
    assert!(read.issues.is_empty());
}

#[test]
fn claude_code_whole_input_errors() {
    assert!(matches!(
        claude_code::decode("\n  \n"),
        Err(claude_code::ClaudeCodeError::Empty)
    ));
    let error = claude_code::decode("not json\n[1]\n").unwrap_err();
    match &error {
        claude_code::ClaudeCodeError::NoEntries { lines, first } => {
            assert_eq!(*lines, 2);
            assert_eq!(first.line, 1);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(error.to_string().contains("line 1"), "{error}");
    // Only ignored lines: a valid, empty session.
    let read = claude_code::decode("{\"type\":\"progress\",\"sessionId\":\"s\"}\n").unwrap();
    assert!(read.conversation.messages.is_empty());
    assert_eq!(read.ignored_lines, 1);
}

// ---- mini-swe-agent ------------------------------------------------------------------------

#[test]
fn mini_swe_bash_blocks_become_tool_calls_with_results() {
    let conversation = mini_swe::decode(&fixture("mini_swe.traj.json")).unwrap();
    let messages = &conversation.messages;
    assert_eq!(
        roles(messages),
        [
            "system",
            "user",
            "assistant",
            "tool_result",
            "assistant",
            "tool_result",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "tool_result",
            "assistant",
            "user",
        ]
    );

    let first = &messages[2];
    match first.content.as_slice() {
        [Block::Text(thought), Block::ToolCall(call)] => {
            assert_eq!(thought.text, "THOUGHT: Look at the file first.\n\n");
            assert_eq!(call.id, "call_2");
            assert_eq!(call.name, mini_swe::BASH_TOOL);
            assert_eq!(call.arguments, json!({"command": "cat calc.py"}));
        }
        other => panic!("unexpected content {other:?}"),
    }
    let ok = only_result(&messages[3]);
    assert_eq!(ok.call_id, "call_2");
    assert_eq!(ok.tool_name.as_deref(), Some("bash"));
    assert_eq!(ok.is_error, Some(false));
    assert_eq!(
        result_text(ok),
        "<returncode>0</returncode>\n<output>\ndef last(xs):\n    return xs[len(xs)]\n</output>"
    );

    let failed = only_result(&messages[5]);
    assert_eq!(failed.call_id, "call_4");
    assert!(failed.failed());
    assert!(result_text(failed).starts_with("<returncode>1</returncode>"));
}

#[test]
fn mini_swe_ambiguous_commands_stay_plain_text() {
    let conversation = mini_swe::decode(&fixture("mini_swe.traj.json")).unwrap();
    let messages = &conversation.messages;
    // Two blocks: the harness answered with a format error.
    assert_eq!(messages[6].tool_calls().count(), 0);
    assert_eq!(messages[6].content_form, ContentForm::Text);
    // No block: the following `<returncode>` message has no call to answer.
    assert_eq!(messages[8].tool_calls().count(), 0);
    assert_eq!(messages[9].role, Role::User);
    assert!(messages[9].plain_text().starts_with("<returncode>0"));
    // The submission's output is not a `<returncode>` reply: no call is left unanswered.
    assert_eq!(messages[12].tool_calls().count(), 0);

    let calls: Vec<_> = messages.iter().flat_map(Message::tool_calls).collect();
    let results: Vec<_> = messages.iter().flat_map(Message::tool_results).collect();
    assert_eq!(calls.len(), 3);
    assert_eq!(results.len(), 3);
    for (call, result) in calls.iter().zip(&results) {
        assert_eq!(call.id, result.call_id);
    }
}

#[test]
fn mini_swe_response_usage_and_extra() {
    let conversation = mini_swe::decode(&fixture("mini_swe.traj.json")).unwrap();
    let second = &conversation.messages[4];
    assert_eq!(
        second.meta.usage,
        Some(Usage {
            input: 300,
            output: 35,
            cache_read: 1100,
            cache_write: 0,
            cache_write_1h: 0,
        })
    );
    assert_eq!(second.meta.id.as_deref(), Some("gen-4"));
    assert_eq!(
        second.meta.model.as_deref(),
        Some("google/gemini-3-pro-preview")
    );
    assert_eq!(second.meta.provider.as_deref(), Some("Google"));
    assert_eq!(second.meta.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(
        second.meta.timestamp,
        Some(Timestamp::Millis(1_763_510_004_000))
    );
    let extra = second.extra.get("extra").unwrap();
    assert_eq!(extra.get("cost"), Some(&json!(0.002)));
    assert!(extra.get("response").is_some());

    assert_eq!(
        conversation.model.as_deref(),
        Some("google/gemini-3-pro-preview")
    );
    let keys: Vec<&str> = conversation.extra.keys().map(String::as_str).collect();
    assert_eq!(keys, ["info", "trajectory_format", "instance_id"]);
    assert_eq!(conversation.messages[0].content_form, ContentForm::Text);
}

#[test]
fn mini_swe_v2_tool_calling_messages_are_linked() {
    let document = json!({
        "trajectory_format": "mini-swe-agent-1.1",
        "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "<returncode>2</returncode>", "extra": {"returncode": 2}},
            {"role": "tool", "tool_call_id": "nope", "content": "orphan"},
        ]
    });
    let conversation = mini_swe::decode_value(&document).unwrap();
    let messages = &conversation.messages;
    assert_eq!(
        roles(messages),
        ["user", "assistant", "tool_result", "user"]
    );
    let call = only_call(&messages[1]);
    assert_eq!(call.arguments_text.as_deref(), Some("{\"command\":\"ls\"}"));
    assert_eq!(messages[1].content_form, ContentForm::Null);
    let result = only_result(&messages[2]);
    assert_eq!(result.call_id, "c1");
    assert_eq!(result.is_error, Some(true));
    assert_eq!(messages[3].extra.get("role"), Some(&json!("tool")));
}

#[test]
fn mini_swe_errors_name_the_field() {
    let error = mini_swe::decode("{\"messages\": 3}").unwrap_err();
    assert_eq!(
        error.to_string(),
        "messages: expected an array of messages, found a number"
    );
    let error =
        mini_swe::decode("{\"messages\": [{\"role\": \"user\", \"content\": [7]}]}").unwrap_err();
    assert_eq!(
        error.to_string(),
        "messages[0].content[0]: expected an object with \"type\", found a number"
    );
    assert!(matches!(
        mini_swe::decode("{"),
        Err(mini_swe::MiniSweError::Json { line: 1, .. })
    ));
}

// ---- SWE-agent -----------------------------------------------------------------------------

#[test]
fn swe_agent_function_calling_uses_structured_calls() {
    let conversation = swe_agent::decode(&fixture("swe_agent_function_calling.traj")).unwrap();
    let messages = &conversation.messages;
    assert_eq!(
        roles(messages),
        [
            "system",
            "user",
            "assistant",
            "tool_result",
            "assistant",
            "tool_result",
            "user",
            "assistant",
            "tool_result",
        ]
    );
    let open = only_call(&messages[2]);
    assert_eq!(open.id, "call_open1");
    assert_eq!(open.name, "open");
    assert_eq!(open.arguments, json!({"path": "calc.py"}));
    assert_eq!(
        open.arguments_text.as_deref(),
        Some("{\"path\": \"calc.py\"}")
    );
    assert_eq!(messages[2].plain_text(), "Open the file.");
    assert_eq!(
        messages[2].extra.get("thought"),
        Some(&json!("Open the file."))
    );
    assert_eq!(
        messages[2].extra.get("message_type"),
        Some(&json!("action"))
    );

    let edit = only_call(&messages[4]);
    assert_eq!(
        edit.arguments_text.as_deref(),
        Some("{ \"search\":\"xs[len(xs)]\",\"replace\":\"xs[len(xs) - 1]\" }")
    );
    let result = only_result(&messages[3]);
    assert_eq!(result.call_id, "call_open1");
    assert_eq!(result.tool_name.as_deref(), Some("open"));
    assert_eq!(result.is_error, None);

    // An observation for an unknown call stays a user message.
    assert_eq!(messages[6].extra.get("role"), Some(&json!("tool")));
    assert_eq!(messages[6].tool_results().count(), 0);

    // List content keeps its parts and their extra fields.
    assert_eq!(messages[1].content_form, ContentForm::Blocks);
    match messages[1].content.as_slice() {
        [Block::Text(text)] => assert!(text.extra.contains_key("cache_control")),
        other => panic!("unexpected content {other:?}"),
    }
    assert_eq!(conversation.model.as_deref(), Some("gpt-4o"));
    assert!(conversation.extra.contains_key("trajectory"));
    assert!(!conversation.extra.contains_key("history"));
}

#[test]
fn swe_agent_classic_actions_become_calls_named_by_their_command() {
    let conversation = swe_agent::decode(&fixture("swe_agent_classic.traj")).unwrap();
    let messages = &conversation.messages;
    assert_eq!(
        roles(messages),
        [
            "system",
            "user",
            "user",
            "assistant",
            "tool_result",
            "assistant",
            "tool_result",
            "assistant",
            "user",
            "assistant",
        ]
    );
    // The demonstration is part of what the model saw.
    assert_eq!(messages[1].extra.get("is_demo"), Some(&json!(true)));

    match messages[3].content.as_slice() {
        [Block::Text(thought), Block::ToolCall(call)] => {
            assert_eq!(thought.text, "List the files first.\n\n");
            assert_eq!(call.id, "call_3");
            assert_eq!(call.name, "ls");
            assert_eq!(call.arguments, json!({"command": "ls -a\n"}));
        }
        other => panic!("unexpected content {other:?}"),
    }
    let listing = only_result(&messages[4]);
    assert_eq!(listing.call_id, "call_3");
    assert_eq!(listing.tool_name.as_deref(), Some("ls"));
    assert_eq!(listing.is_error, None);
    assert_eq!(
        result_text(listing),
        ".\n..\ncalc.py\n(Open file: n/a)\nbash-$"
    );

    assert_eq!(only_call(&messages[5]).name, "edit");
    // An action not fenced in the text, and a last action with no observation, stay text.
    assert_eq!(messages[7].tool_calls().count(), 0);
    assert_eq!(messages[9].tool_calls().count(), 0);
    assert_eq!(conversation.model, None);
}

#[test]
fn swe_agent_errors_name_the_field() {
    let error = swe_agent::decode("{\"history\": [{\"content\": \"x\"}]}").unwrap_err();
    assert_eq!(
        error.to_string(),
        "history[0].role: expected a string, found nothing"
    );
    let error = swe_agent::decode("[]").unwrap_err();
    assert_eq!(
        error.to_string(),
        "$: expected a trajectory object with \"history\", found an array"
    );
}

// ---- Detection -----------------------------------------------------------------------------

#[test]
fn fixtures_are_detected_and_decoded_through_codec() {
    for (name, format) in [
        ("claude_code_session.jsonl", Format::ClaudeCode),
        ("mini_swe.traj.json", Format::MiniSweAgent),
        ("swe_agent_function_calling.traj", Format::SweAgent),
        ("swe_agent_classic.traj", Format::SweAgent),
    ] {
        let input = fixture(name);
        assert_eq!(detect(&input), Ok(format), "{name}");
        let decoded = codec::decode(&input).unwrap();
        assert_eq!(decoded.format, format);
        assert!(!decoded.conversation.messages.is_empty());
    }
    let decoded = codec::decode(&fixture("claude_code_session.jsonl")).unwrap();
    assert_eq!(decoded.issues.len(), 2);
    assert_eq!(decoded.ignored_lines, 4);
}

#[test]
fn detects_wire_formats() {
    let cases = [
        (
            r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#,
            Format::OpenAiRequest,
        ),
        (
            r#"{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}"#,
            Format::OpenAiRequest,
        ),
        (
            r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}"#,
            Format::OpenAiResponse,
        ),
        (
            r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}"#,
            Format::AnthropicResponse,
        ),
        (
            r#"{"model":"claude","max_tokens":10,"system":"be brief","messages":[{"role":"user","content":"hi"}]}"#,
            Format::AnthropicRequest,
        ),
        (
            r#"{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]}"#,
            Format::AnthropicRequest,
        ),
        (
            r#"{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}"#,
            Format::AnthropicRequest,
        ),
        (
            r#"{"model":"claude","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}"#,
            Format::AnthropicRequest,
        ),
    ];
    for (input, format) in cases {
        assert_eq!(detect(input), Ok(format), "{input}");
    }
    // Pretty-printed documents are read whole.
    let pretty =
        serde_json::to_string_pretty(&json!({"messages": [{"role": "user", "content": "hi"}]}))
            .unwrap();
    assert_eq!(detect(&pretty), Ok(Format::OpenAiRequest));
}

#[test]
fn detects_sessions_and_trajectories() {
    let openclaw = concat!(
        r#"{"type":"session","version":3,"id":"abc","timestamp":"2026-03-08T12:15:35.580Z","cwd":"/w"}"#,
        "\n",
        r#"{"type":"message","id":"9a533f48","parentId":null,"timestamp":"2026-03-08T12:15:36.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
        "\n"
    );
    assert_eq!(detect(openclaw), Ok(Format::OpenClawSession));
    assert_eq!(
        detect(r#"{"type":"session","version":3,"id":"abc"}"#),
        Ok(Format::OpenClawSession)
    );

    let claude = concat!(
        r#"{"type":"file-history-snapshot","messageId":"m","snapshot":{},"isSnapshotUpdate":false}"#,
        "\n",
        r#"{"type":"user","sessionId":"s","uuid":"u","message":{"role":"user","content":"hi"}}"#,
        "\n"
    );
    assert_eq!(detect(claude), Ok(Format::ClaudeCode));
    // A single line is still a session line, and a broken first line does not hide the rest.
    assert_eq!(
        detect(r#"{"type":"user","sessionId":"s","message":{"role":"user","content":"hi"}}"#),
        Ok(Format::ClaudeCode)
    );
    let broken_first = format!("{{\"type\":\"user\",\n{}", claude);
    assert_eq!(detect(&broken_first), Ok(Format::ClaudeCode));

    // mini-swe-agent without `trajectory_format`: assistant `extra.response` tells it.
    let mini = r#"{"messages":[{"role":"user","content":"t"},{"role":"assistant","content":"x","extra":{"response":{"usage":{}}}}]}"#;
    assert_eq!(detect(mini), Ok(Format::MiniSweAgent));
    assert_eq!(
        detect(r#"{"trajectory_format":"mini-swe-agent-1.1","messages":[]}"#),
        Ok(Format::MiniSweAgent)
    );
    assert_eq!(
        detect(r#"{"history":[],"trajectory":[],"info":{}}"#),
        Ok(Format::SweAgent)
    );
    // A byte-order mark is not content.
    assert_eq!(detect(&format!("\u{feff}{claude}")), Ok(Format::ClaudeCode));
}

#[test]
fn detection_reads_only_the_first_lines() {
    // A large session whose tail is not JSON: detection must not look that far.
    let head = fixture("claude_code_session.jsonl");
    let mut input = head.clone();
    for _ in 0..50_000 {
        input.push_str("this line is not JSON and would fail a full parse\n");
    }
    let started = std::time::Instant::now();
    assert_eq!(detect(&input), Ok(Format::ClaudeCode));
    // Generous bound: a full parse of every line would still be far slower than the check.
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

#[test]
fn detection_errors_say_what_the_input_looked_like() {
    assert_eq!(detect(""), Err(DetectError::Empty));
    let error = detect("hello there").unwrap_err();
    assert!(
        matches!(error, DetectError::NotJson { line: 1, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("mini-swe-agent"), "{error}");

    let error = detect("[1, 2]").unwrap_err();
    assert!(error.to_string().contains("an array"), "{error}");

    let error = detect(r#"{"foo": 1, "bar": 2}"#).unwrap_err();
    assert_eq!(
        error,
        DetectError::UnknownDocument {
            shape: "a JSON object with keys \"foo\", \"bar\"".into()
        }
    );

    let error = detect("{\"kind\": \"x\"}\n{\"kind\": \"y\"}\n").unwrap_err();
    assert!(
        matches!(error, DetectError::UnknownLines { line: 1, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("\"kind\""), "{error}");
}

#[test]
fn decode_reports_detection_errors() {
    let error = codec::decode("{}").unwrap_err();
    assert!(matches!(error, codec::DecodeError::Detect(_)), "{error:?}");
    assert!(
        error.to_string().contains("an empty JSON object"),
        "{error}"
    );
}
