//! Anthropic Messages codec: exact round trips, the neutral model it decodes to, valid requests
//! from OpenAI conversations, error paths, and no panics on any input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod wire_common;

use proptest::prelude::*;
use serde_json::{Value, json};
use skald_core::codec::{self, anthropic, openai};
use skald_core::message::{
    Block, ContentForm, Conversation, Extra, ImageSource, Message, Role, StopReason, ThinkingBlock,
    ToolCall, ToolResult, ToolSpec, Usage,
};
use wire_common::{arb_json, assert_clean, mutate, parse, pointers, text_block};

const REQUEST: &str = include_str!("fixtures/wire/anthropic_request.json");
const RESPONSE: &str = include_str!("fixtures/wire/anthropic_response.json");
const OPENAI_REQUEST: &str = include_str!("fixtures/wire/openai_request.json");

#[test]
fn request_round_trip_is_exact() {
    let input = parse(REQUEST);
    let conversation = anthropic::decode_request(&input).unwrap();
    let encoded = anthropic::encode_request(&conversation);
    assert_eq!(encoded, input);
    assert_clean(&encoded);
    let again = anthropic::decode_request_str(&serde_json::to_string(&encoded).unwrap()).unwrap();
    assert_eq!(again, conversation);
}

#[test]
fn request_decodes_into_the_neutral_model() {
    let conversation = anthropic::decode_request(&parse(REQUEST)).unwrap();
    assert_eq!(conversation.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(conversation.extra.get("max_tokens"), Some(&json!(8192)));
    assert!(conversation.extra.contains_key("thinking"));
    let m = &conversation.messages;
    assert_eq!(m.len(), 10);

    // `system` is a leading System message spelled as blocks.
    assert_eq!(m[0].role, Role::System);
    assert_eq!(m[0].content_form, ContentForm::Blocks);
    assert_eq!(
        text_block(&m[0].content[0]).extra.get("cache_control"),
        Some(&json!({"type": "ephemeral"}))
    );

    assert_eq!(m[1].role, Role::User);
    assert_eq!(m[1].content_form, ContentForm::Text);

    let blocks = &m[2].content;
    assert!(matches!(
        &blocks[1],
        Block::Image(image) if image.source == ImageSource::Base64 {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into()
        }
    ));
    assert!(matches!(
        &blocks[2],
        Block::Image(image) if image.source == ImageSource::Url { url: "https://example.com/diagram.png".into() }
            && image.extra.contains_key("cache_control")
    ));
    // A file source and a document are nothing skald reads.
    assert!(matches!(&blocks[3], Block::Opaque(_)));
    assert!(matches!(&blocks[4], Block::Opaque(_)));

    let assistant = &m[3];
    assert_eq!(assistant.role, Role::Assistant);
    assert!(matches!(
        &assistant.content[0],
        Block::Thinking(ThinkingBlock { signature: Some(signature), .. }) if signature == "EqQBCkYIARgCKkA="
    ));
    assert!(
        matches!(&assistant.content[1], Block::Opaque(value) if value["type"] == "redacted_thinking")
    );
    assert!(
        text_block(&assistant.content[2])
            .extra
            .contains_key("citations")
    );
    let calls: Vec<&ToolCall> = assistant.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].arguments, json!({"path": "tests/a.rs"}));
    assert_eq!(calls[0].arguments_text, None);
    assert!(calls[1].extra.contains_key("cache_control"));

    // A user message with tool results is a ToolResult message, text included, in order.
    let results = &m[4];
    assert_eq!(results.role, Role::ToolResult);
    assert_eq!(results.content.len(), 3);
    let found: Vec<&ToolResult> = results.tool_results().collect();
    assert_eq!(found[0].call_id, "toolu_01");
    assert_eq!(found[0].content_form, ContentForm::Text);
    assert_eq!(found[0].is_error, None);
    assert_eq!(found[1].content_form, ContentForm::Blocks);
    assert_eq!(found[1].is_error, Some(true));
    assert!(matches!(found[1].content[1], Block::Image(_)));
    assert_eq!(found[1].extra.get("x_result"), Some(&json!("kept")));
    assert!(matches!(&results.content[2], Block::Text(text) if text.text == "Keep going."));

    assert!(matches!(
        &m[5].content[0],
        Block::Thinking(ThinkingBlock {
            signature: None,
            ..
        })
    ));
    let absent = m[6].tool_results().next().unwrap();
    assert_eq!(absent.content_form, ContentForm::Absent);
    assert_eq!(m[6].extra.get("x_message_level"), Some(&json!(true)));
    assert!(matches!(&m[7].content[0], Block::Opaque(_)));

    let tools = &conversation.tools;
    assert_eq!(tools.len(), 3);
    assert_eq!(tools[0].description.as_deref(), Some("Read a file."));
    assert!(tools[1].extra.contains_key("cache_control"));
    assert_eq!(tools[2].parameters, Value::Null);
    assert_eq!(
        tools[2].extra.get("type"),
        Some(&json!("web_search_20250305"))
    );
}

#[test]
fn system_string_and_content_forms_round_trip() {
    for input in [
        json!({"model": "m", "max_tokens": 1, "system": "Be brief.", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": []},
            {"role": "user", "content": null},
            {"role": "assistant"}
        ]}),
        json!({"system": null, "messages": [], "tools": []}),
        json!({"system": [], "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": null, "is_error": null}
        ]}]}),
    ] {
        let conversation = anthropic::decode_request(&input).unwrap();
        assert_eq!(anthropic::encode_request(&conversation), input);
    }
    let conversation =
        anthropic::decode_request(&json!({"system": "Be brief.", "messages": []})).unwrap();
    assert_eq!(conversation.messages[0].content_form, ContentForm::Text);
}

#[test]
fn decode_as_uses_this_codec() {
    let decoded = codec::decode_as(codec::Format::AnthropicResponse, RESPONSE).unwrap();
    assert_eq!(decoded.conversation.messages.len(), 1);
    let decoded = codec::decode_as(codec::Format::AnthropicRequest, REQUEST).unwrap();
    assert_eq!(decoded.conversation.messages.len(), 10);
}

#[test]
fn response_round_trip_is_exact_and_meta_is_filled() {
    let input = parse(RESPONSE);
    let response = anthropic::decode_response(&input).unwrap();
    assert_eq!(anthropic::encode_response(&response), input);
    let message = &response.message;
    assert_eq!(message.role, Role::Assistant);
    assert_eq!(message.content.len(), 3);
    assert_eq!(message.meta.id.as_deref(), Some("msg_01ABC"));
    assert_eq!(
        message.meta.model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );
    assert_eq!(message.meta.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(
        message.meta.usage,
        Some(Usage {
            input: 12,
            output: 85,
            cache_read: 4000,
            cache_write: 300,
            cache_write_1h: 0,
        })
    );
    assert_eq!(response.envelope["content"], Value::Null);
    assert_eq!(
        response.envelope["usage"]["service_tier"],
        json!("standard")
    );
}

#[test]
fn response_meta_changes_are_written_and_stop_sequence_survives() {
    let mut response = anthropic::decode_response(&parse(RESPONSE)).unwrap();
    response.message.meta.usage = Some(Usage {
        input: 1,
        output: 2,
        cache_read: 3,
        cache_write: 0,
        cache_write_1h: 0,
    });
    response.message.meta.stop_reason = Some(StopReason::MaxTokens);
    let encoded = anthropic::encode_response(&response);
    assert_eq!(encoded["stop_reason"], json!("max_tokens"));
    assert_eq!(encoded["usage"]["input_tokens"], json!(1));
    assert_eq!(encoded["usage"]["output_tokens"], json!(2));
    assert_eq!(encoded["usage"]["cache_read_input_tokens"], json!(3));
    assert_eq!(encoded["usage"]["cache_creation_input_tokens"], json!(0));
    assert_eq!(
        encoded["usage"]["cache_creation"]["ephemeral_5m_input_tokens"],
        json!(300)
    );

    // `stop_sequence` means the same as `end_turn` but is written back as it was.
    let mut input = parse(RESPONSE);
    input["stop_reason"] = json!("stop_sequence");
    input["stop_sequence"] = json!("</done>");
    let response = anthropic::decode_response(&input).unwrap();
    assert_eq!(response.message.meta.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(anthropic::encode_response(&response), input);
}

#[test]
fn an_openai_response_becomes_an_anthropic_response() {
    let decoded =
        openai::decode_response(&parse(include_str!("fixtures/wire/openai_response.json")))
            .unwrap();
    let response = anthropic::WireResponse {
        message: decoded.message,
        envelope: serde_json::Map::new(),
    };
    let encoded = anthropic::encode_response(&response);
    assert_clean(&encoded);
    assert_eq!(
        encoded,
        json!({
            "id": "chatcmpl-9xYz",
            "type": "message",
            "role": "assistant",
            "model": "gpt-4o-2024-08-06",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "call_9", "name": "shell", "input": {"cmd": "ls"}}
            ],
            "stop_reason": "tool_use",
            "stop_sequence": null,
            "usage": {"input_tokens": 200, "cache_read_input_tokens": 1000, "output_tokens": 40}
        })
    );
}

/// Checks what Anthropic enforces on a request built from another format.
fn assert_valid_anthropic_request(request: &Value) {
    assert_clean(request);
    let top = request.as_object().expect("an object");
    for key in top.keys() {
        assert!(
            [
                "model",
                "max_tokens",
                "system",
                "messages",
                "tools",
                "temperature",
                "top_p",
                "stream",
                "stop_sequences",
                "tool_choice"
            ]
            .contains(&key.as_str()),
            "unexpected top-level key {key}"
        );
    }
    assert!(request["max_tokens"].is_u64());
    if let Some(system) = top.get("system") {
        match system {
            Value::String(text) => assert!(!text.is_empty()),
            Value::Array(blocks) => {
                for block in blocks {
                    assert_eq!(block["type"], json!("text"));
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => {
                panic!("system: {system}")
            }
        }
    }
    for tool in top
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        assert!(tool["name"].is_string());
        assert!(tool["input_schema"].is_object(), "{tool}");
    }
    let messages = request["messages"].as_array().unwrap();
    let mut open_calls: Vec<String> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap();
        assert!(
            role == "user" || role == "assistant",
            "messages[{index}]: role {role}"
        );
        let blocks: Vec<Value> = match &message["content"] {
            Value::String(text) => {
                assert!(!text.is_empty(), "messages[{index}]: empty text");
                Vec::new()
            }
            Value::Array(blocks) => {
                assert!(!blocks.is_empty(), "messages[{index}]: empty content");
                blocks.clone()
            }
            other @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_)) => {
                panic!("messages[{index}]: content {other}")
            }
        };
        if !open_calls.is_empty() {
            // Every call of the previous turn is answered first thing in this user message.
            assert_eq!(
                role, "user",
                "messages[{index}]: calls {open_calls:?} unanswered"
            );
            let answered: Vec<String> = blocks
                .iter()
                .take_while(|block| block["type"] == "tool_result")
                .map(|block| block["tool_use_id"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(answered, open_calls, "messages[{index}]");
            open_calls.clear();
        }
        let mut seen_other = false;
        for block in &blocks {
            match block["type"].as_str().unwrap() {
                "text" => {
                    assert!(!block["text"].as_str().unwrap().is_empty());
                    seen_other = true;
                }
                "image" => {
                    assert_eq!(role, "user");
                    let source = &block["source"];
                    match source["type"].as_str().unwrap() {
                        "base64" => {
                            assert!(source["media_type"].is_string() && source["data"].is_string())
                        }
                        "url" => assert!(!source["url"].as_str().unwrap().starts_with("data:")),
                        other => panic!("source type {other}"),
                    }
                    seen_other = true;
                }
                "thinking" => {
                    assert_eq!(role, "assistant");
                    assert!(block["signature"].is_string());
                }
                "tool_use" => {
                    assert_eq!(role, "assistant");
                    assert!(block["input"].is_object());
                    open_calls.push(block["id"].as_str().unwrap().to_owned());
                }
                "tool_result" => {
                    assert_eq!(role, "user");
                    assert!(
                        !seen_other,
                        "messages[{index}]: tool_result after other blocks"
                    );
                    if let Some(Value::Array(inner)) = block.get("content") {
                        for part in inner {
                            let kind = part["type"].as_str().unwrap();
                            assert!(kind == "text" || kind == "image");
                        }
                    }
                }
                other => panic!("messages[{index}]: block type {other}"),
            }
        }
    }
    assert!(open_calls.is_empty(), "unanswered calls {open_calls:?}");
}

#[test]
fn openai_request_becomes_a_valid_anthropic_request() {
    let conversation = openai::decode_request(&parse(OPENAI_REQUEST)).unwrap();
    let request = anthropic::encode_request(&conversation);
    assert_valid_anthropic_request(&request);

    assert_eq!(request["model"], json!("gpt-4o-2024-08-06"));
    assert_eq!(request["max_tokens"], json!(anthropic::DEFAULT_MAX_TOKENS));
    assert_eq!(request["temperature"], json!(0.2));
    assert_eq!(request["stream"], json!(true));
    assert_eq!(request["tool_choice"], json!({"type": "auto"}));
    // Leading system and developer messages become `system`.
    assert_eq!(
        request["system"],
        json!([
            {"type": "text", "text": "You are a careful coding agent."},
            {"type": "text", "text": "Prefer small diffs."}
        ])
    );
    // Tools keep their schema; `strict` is OpenAI's. A tool without parameters gets an empty one.
    assert_eq!(
        request["tools"][0]["input_schema"]["required"],
        json!(["path"])
    );
    assert!(request["tools"][0].get("strict").is_none());
    assert_eq!(
        request["tools"][2]["input_schema"],
        json!({"type": "object", "properties": {}})
    );

    let messages = request["messages"].as_array().unwrap();
    // Data URLs become base64 sources; audio, files and unknown parts are OpenAI's.
    let parts = messages[1]["content"].as_array().unwrap();
    assert_eq!(parts.len(), 3);
    assert_eq!(
        parts[2]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="})
    );
    // The two tool messages are one user message; arguments that were not JSON are wrapped.
    assert_eq!(
        messages[2]["content"][1]["input"],
        json!({"arguments": "ls -la"})
    );
    assert_eq!(
        messages[3]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "call_1", "content": "main.rs\nlib.rs"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": [
                {"type": "text", "text": "total 8"}, {"type": "text", "text": "-rw-r--r-- main.rs"}
            ]}
        ])
    );
    // Empty arguments are an empty input; an empty result has no content.
    assert_eq!(messages[4]["content"][0]["input"], json!({}));
    assert_eq!(
        messages[5]["content"],
        json!([{"type": "tool_result", "tool_use_id": "call_3"}])
    );
}

#[test]
fn later_system_messages_become_user_text() {
    let conversation = Conversation {
        messages: vec![
            Message::text(Role::System, "Be brief."),
            Message::text(Role::User, "hi"),
            Message::text(Role::Assistant, "hello"),
            Message::text(Role::System, "Now summarise."),
        ],
        ..Conversation::default()
    };
    let request = anthropic::encode_request(&conversation);
    assert_valid_anthropic_request(&request);
    assert_eq!(
        request,
        json!({
            "max_tokens": anthropic::DEFAULT_MAX_TOKENS,
            "system": "Be brief.",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "Now summarise."}
            ]
        })
    );
}

fn tool_call(id: &str, arguments: Value) -> Block {
    Block::ToolCall(ToolCall {
        id: id.into(),
        name: "shell".into(),
        arguments,
        arguments_text: None,
        extra: Extra::new(),
    })
}

fn tool_result(id: &str, content: Vec<Block>) -> Block {
    Block::ToolResult(ToolResult {
        call_id: id.into(),
        tool_name: Some("shell".into()),
        content: content.into(),
        content_form: ContentForm::Blocks,
        is_error: Some(false),
        details: Some(json!({"exitCode": 0, "secret": "host only"}).into()),
        extra: Extra::new(),
    })
}

#[test]
fn results_of_one_turn_merge_into_one_user_message_and_details_stay_out() {
    let image = Block::Image(skald_core::message::ImageBlock {
        source: ImageSource::Url {
            url: "data:image/gif;base64,R0lGOD".into(),
        },
        extra: Extra::new(),
    });
    let conversation = Conversation {
        messages: vec![
            Message::text(Role::User, "go"),
            Message::new(
                Role::Assistant,
                vec![
                    Block::Thinking(ThinkingBlock {
                        thinking: "unsigned".into(),
                        signature: None,
                        extra: Extra::new(),
                    }),
                    Block::text(""),
                    tool_call("a", json!({"cmd": "ls"})),
                    tool_call("b", Value::Null),
                ],
            ),
            Message::new(
                Role::ToolResult,
                vec![tool_result("a", vec![Block::text("a.rs")])],
            ),
            Message::new(Role::ToolResult, vec![tool_result("b", vec![image])]),
            Message::text(Role::User, "thanks"),
        ],
        tools: vec![ToolSpec {
            name: "shell".into(),
            description: None,
            parameters: json!({"type": "object"}),
            extra: Extra::new(),
        }],
        ..Conversation::default()
    };
    let request = anthropic::encode_request(&conversation);
    assert_valid_anthropic_request(&request);
    assert!(
        !serde_json::to_string(&request)
            .unwrap()
            .contains("host only")
    );
    assert_eq!(
        request["messages"],
        json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "a", "name": "shell", "input": {"cmd": "ls"}},
                {"type": "tool_use", "id": "b", "name": "shell", "input": {}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": "a.rs"}], "is_error": false},
                {"type": "tool_result", "tool_use_id": "b", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lGOD"}}
                ], "is_error": false}
            ]},
            {"role": "user", "content": "thanks"}
        ])
    );
}

#[test]
fn openai_to_anthropic_and_back_keeps_every_call_and_result() {
    let original = openai::decode_request(&parse(OPENAI_REQUEST)).unwrap();
    let via_anthropic = anthropic::decode_request(&anthropic::encode_request(&original)).unwrap();
    let ids = |conversation: &Conversation| -> (Vec<String>, Vec<String>) {
        (
            conversation
                .messages
                .iter()
                .flat_map(|m| m.tool_calls().map(|c| c.id.clone()))
                .collect(),
            conversation
                .messages
                .iter()
                .flat_map(|m| m.tool_results().map(|r| r.call_id.clone()))
                .collect(),
        )
    };
    assert_eq!(ids(&original), ids(&via_anthropic));
    // And to OpenAI again: valid, with the original arguments text where it was JSON.
    let back = openai::encode_request(&via_anthropic);
    assert_eq!(
        back["messages"][3]["tool_calls"][0]["function"]["arguments"],
        json!("{\"path\":\"src/\",\"depth\":1}")
    );
}

fn error_text(input: Value) -> String {
    anthropic::decode_request(&input).unwrap_err().to_string()
}

#[test]
fn errors_name_the_path_and_what_was_expected() {
    assert_eq!(
        error_text(json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]}
        ]})),
        "messages[1].content[0].name: missing, expected a string"
    );
    assert_eq!(
        error_text(
            json!({"messages": [{"role": "user", "content": [{"type": "image", "source": "x"}]}]})
        ),
        "messages[0].content[0].source: expected an object with \"type\", found a string"
    );
    assert_eq!(
        error_text(json!({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": [7]}
        ]}]})),
        "messages[0].content[0].content[0]: expected an object with \"type\", found a number"
    );
    assert_eq!(
        error_text(json!({"messages": [{"role": "tool", "content": "x"}]})),
        "messages[0].role: expected \"user\", \"assistant\" or \"system\", found \"tool\""
    );
    assert_eq!(
        error_text(json!({"system": 3, "messages": []})),
        "system: expected a string or an array of text blocks, found a number"
    );
    assert_eq!(
        error_text(json!({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}
        ]}]})),
        "messages[0].content[0].is_error: expected a boolean, found a string"
    );
    assert_eq!(
        error_text(json!({"messages": [], "tools": [{"description": "d"}]})),
        "tools[0].name: missing, expected a string"
    );
    let error = anthropic::decode_request_str("not json").unwrap_err();
    assert!(matches!(error, anthropic::WireError::Json(_)));
    assert_eq!(error.path(), None);

    let error = anthropic::decode_response(
        &json!({"type": "error", "error": {"type": "overloaded_error"}}),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "content: missing, expected an array of content blocks"
    );
    let error = anthropic::decode_response(&json!({"content": [], "usage": {"input_tokens": -1}}))
        .unwrap_err();
    assert_eq!(error.path(), Some("usage.input_tokens"));
}

#[test]
fn every_single_field_change_to_the_fixtures_round_trips_or_names_its_path() {
    let replacements = [
        Value::Null,
        json!("tool"),
        json!({}),
        json!([]),
        json!(1),
        json!(true),
        json!([{"type": "text", "text": "x"}]),
    ];
    for fixture in [REQUEST, RESPONSE] {
        let base = parse(fixture);
        for pick in 0..pointers(&base).len() {
            let changes = replacements.iter().map(|r| (r.clone(), false));
            for (replacement, remove) in changes.chain([(Value::Null, true)]) {
                let value = mutate(&base, pick, replacement, remove);
                match anthropic::decode_request(&value) {
                    Ok(conversation) => {
                        assert_eq!(anthropic::encode_request(&conversation), value);
                        assert_clean(&openai::encode_request(&conversation));
                    }
                    Err(error) => assert!(error.path().is_some()),
                }
                match anthropic::decode_response(&value) {
                    Ok(response) => assert_eq!(anthropic::encode_response(&response), value),
                    Err(error) => assert!(error.path().is_some()),
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decoders_never_panic_on_strings(input in ".{0,200}") {
        let _ = anthropic::decode_request_str(&input);
        let _ = anthropic::decode_response_str(&input);
    }

    #[test]
    fn decoders_never_panic_on_json(value in arb_json()) {
        if let Ok(conversation) = anthropic::decode_request(&value) {
            prop_assert_eq!(anthropic::encode_request(&conversation), value.clone());
            let _ = openai::encode_request(&conversation);
        }
        if let Ok(response) = anthropic::decode_response(&value) {
            prop_assert_eq!(anthropic::encode_response(&response), value.clone());
        }
    }

    #[test]
    fn mutated_fixtures_decode_or_fail_cleanly(
        pick in any::<usize>(),
        replacement in arb_json(),
        remove in any::<bool>(),
        which in 0usize..2,
    ) {
        let base = parse([REQUEST, RESPONSE][which]);
        let value = mutate(&base, pick, replacement, remove);
        match anthropic::decode_request(&value) {
            Ok(conversation) => {
                prop_assert_eq!(anthropic::encode_request(&conversation), value.clone());
                assert_clean(&openai::encode_request(&conversation));
            }
            Err(error) => prop_assert!(error.path().is_some()),
        }
        match anthropic::decode_response(&value) {
            Ok(response) => prop_assert_eq!(anthropic::encode_response(&response), value.clone()),
            Err(error) => prop_assert!(error.path().is_some()),
        }
    }
}

/// Current Claude Code: three top-level system blocks with cache breakpoints, a mid-conversation
/// `system` message between user turns, signed thinking, cached tool use and results, and the
/// newer top-level fields.
fn claude_code_body() -> Value {
    json!({
        "model": "claude-opus-4-5-20251101",
        "max_tokens": 32000,
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.3"},
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
             "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "You are an interactive CLI tool that helps users with software engineering tasks.",
             "cache_control": {"type": "ephemeral", "ttl": "1h"}}
        ],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>\nAs you answer, use this context.\n</system-reminder>"},
                {"type": "text", "text": "list the files"}
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should run ls.", "signature": "EpYBCkYIBxgCKkB1c2Vy"},
                {"type": "tool_use", "id": "toolu_01A", "name": "Bash",
                 "input": {"command": "ls", "description": "List files"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "a.txt\nb.txt",
                 "is_error": false, "cache_control": {"type": "ephemeral"}}
            ]},
            {"role": "system", "content": "The user changed the permission mode to acceptEdits."},
            {"role": "user", "content": [
                {"type": "text", "text": "now delete b.txt", "cache_control": {"type": "ephemeral"}}
            ]}
        ],
        "tools": [{"name": "Bash", "description": "Run a command",
                   "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
                   "cache_control": {"type": "ephemeral"}}],
        "metadata": {"user_id": "user_abc_account_def_session_123"},
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "stream": true
    })
}

#[test]
fn claude_code_mid_conversation_system_message_round_trips() {
    let body = claude_code_body();
    let conversation = anthropic::decode_request(&body).unwrap();
    let roles: Vec<&str> = conversation
        .messages
        .iter()
        .map(|m| m.role.name())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool_result",
            "system",
            "user"
        ]
    );
    assert_eq!(
        conversation.messages[4].plain_text(),
        "The user changed the permission mode to acceptEdits."
    );
    assert_eq!(anthropic::encode_request(&conversation), body);
}

#[test]
fn a_system_message_first_in_messages_without_top_level_system_round_trips() {
    let body = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Mode: plan."}]},
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "Mode: edit."}
        ]
    });
    let conversation = anthropic::decode_request(&body).unwrap();
    assert_eq!(conversation.messages.len(), 3);
    assert_eq!(anthropic::encode_request(&conversation), body);
    // Both a top-level `system` and one first in `messages` keep their places.
    let both = json!({
        "system": "Be brief.",
        "messages": [
            {"role": "system", "content": "Mode: plan."},
            {"role": "user", "content": "hi"}
        ]
    });
    let conversation = anthropic::decode_request(&both).unwrap();
    assert_eq!(anthropic::encode_request(&conversation), both);
}

#[test]
fn a_foreign_later_system_message_still_becomes_user_text() {
    let conversation = Conversation {
        messages: vec![
            Message::text(Role::System, "Be brief."),
            Message::text(Role::User, "hi"),
            Message::text(Role::System, "Mode: edit."),
        ],
        ..Conversation::default()
    };
    let request = anthropic::encode_request(&conversation);
    assert_eq!(request["system"], "Be brief.");
    let messages = request["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert!(messages.iter().all(|message| message["role"] == "user"));
    assert_valid_anthropic_request(&request);
}

#[test]
fn one_hour_cache_writes_are_read_from_the_usage_and_the_response_still_round_trips() {
    let input = json!({
        "id": "msg_1h", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 3, "output_tokens": 5, "cache_read_input_tokens": 40_000,
                  "cache_creation_input_tokens": 2_000,
                  "cache_creation": {"ephemeral_5m_input_tokens": 500,
                                     "ephemeral_1h_input_tokens": 1_500}}
    });
    let response = anthropic::decode_response(&input).unwrap();
    let usage = response.message.meta.usage.unwrap();
    assert_eq!((usage.cache_write, usage.cache_write_1h), (2_000, 1_500));
    assert_eq!(anthropic::encode_response(&response), input);
    // A stream's event carries the same object; read leniently.
    let streamed = anthropic::usage_of(&input["usage"]).unwrap();
    assert_eq!(streamed, usage);
    assert_eq!(anthropic::usage_of(&json!("not usage")), None);
}
