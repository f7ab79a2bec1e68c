//! OpenAI Chat Completions codec: exact round trips, the neutral model it decodes to, valid
//! requests from Anthropic conversations, error paths, and no panics on any input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod wire_common;

use proptest::prelude::*;
use serde_json::{Value, json};
use skald_core::codec::{self, anthropic, openai};
use skald_core::message::{
    Block, ContentForm, Conversation, Extra, ImageSource, Message, Role, StopReason, Timestamp,
    ToolCall, ToolResult, Usage,
};
use wire_common::{
    arb_json, assert_clean, call_block, image_block, keys, mutate, parse, pointers, text_block,
};

const REQUEST: &str = include_str!("fixtures/wire/openai_request.json");
const RESPONSE: &str = include_str!("fixtures/wire/openai_response.json");
const ANTHROPIC_REQUEST: &str = include_str!("fixtures/wire/anthropic_request.json");

fn text_of(block: &Block) -> &str {
    &text_block(block).text
}

fn result_of(message: &Message) -> &ToolResult {
    message.tool_results().next().expect("a tool result")
}

#[test]
fn request_round_trip_is_exact() {
    let input = parse(REQUEST);
    let conversation = openai::decode_request(&input).unwrap();
    let encoded = openai::encode_request(&conversation);
    assert_eq!(encoded, input);
    assert_clean(&encoded);
    // And once more through the string entry point.
    let again = openai::decode_request_str(&serde_json::to_string(&encoded).unwrap()).unwrap();
    assert_eq!(again, conversation);
}

#[test]
fn request_decodes_into_the_neutral_model() {
    let conversation = openai::decode_request(&parse(REQUEST)).unwrap();
    assert_eq!(conversation.model.as_deref(), Some("gpt-4o-2024-08-06"));
    assert_eq!(conversation.extra.get("temperature"), Some(&json!(0.2)));
    assert_eq!(
        conversation.extra.get("x_vendor_flag"),
        Some(&json!([true, null]))
    );
    let m = &conversation.messages;
    assert_eq!(m.len(), 15);

    // system and developer are both System; the spelling is a hint.
    assert_eq!(m[0].role, Role::System);
    assert_eq!(m[0].content_form, ContentForm::Text);
    assert_eq!(m[0].extra.get(openai::ROLE_HINT), None);
    assert_eq!(m[1].role, Role::System);
    assert_eq!(m[1].content_form, ContentForm::Blocks);
    assert_eq!(m[1].extra.get(openai::ROLE_HINT), Some(&json!("developer")));
    assert_eq!(m[1].extra.get("name"), Some(&json!("policy")));

    // A user message with every kind of part.
    assert_eq!(m[2].content_form, ContentForm::Text);
    assert_eq!(text_of(&m[2].content[0]), "List the files in src/.");
    let parts = &m[3].content;
    assert_eq!(parts.len(), 6);
    assert_eq!(
        text_block(&parts[0]).extra.get("cache_control"),
        Some(&json!({"type": "ephemeral"}))
    );
    let image = image_block(&parts[1]);
    assert_eq!(
        image.source,
        ImageSource::Url {
            url: "https://example.com/cat.png".into()
        }
    );
    assert_eq!(image.extra.get("detail"), Some(&json!("high")));
    assert!(matches!(&parts[2], Block::Image(_)));
    for opaque in &parts[3..] {
        assert!(matches!(opaque, Block::Opaque(_)), "{opaque:?}");
    }

    // Assistant with tool calls: arguments parsed, text kept byte for byte.
    let assistant = &m[4];
    assert_eq!(assistant.role, Role::Assistant);
    assert_eq!(assistant.content_form, ContentForm::Null);
    let calls: Vec<&ToolCall> = assistant.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].id, "call_1");
    assert_eq!(calls[0].arguments, json!({"path": "src/", "depth": 1}));
    assert_eq!(
        calls[0].arguments_text.as_deref(),
        Some("{\"path\": \"src/\",  \"depth\":1}")
    );
    // Not JSON: kept as the string it was.
    assert_eq!(calls[1].arguments, json!("ls -la"));
    assert!(calls[1].extra.contains_key("extra_content"));
    assert_eq!(
        assistant.extra.get("reasoning_content"),
        Some(&json!("I should look at the directory first."))
    );

    // Tool messages are ToolResult messages with one result block each.
    assert_eq!(m[5].role, Role::ToolResult);
    let first = result_of(&m[5]);
    assert_eq!(first.call_id, "call_1");
    assert_eq!(first.content_form, ContentForm::Text);
    assert_eq!(first.is_error, None);
    let second = result_of(&m[6]);
    assert_eq!(second.content_form, ContentForm::Blocks);
    assert_eq!(second.content.len(), 2);
    assert_eq!(second.tool_name.as_deref(), Some("shell"));

    // Absent content beside tool calls; empty arguments are not JSON.
    assert_eq!(m[7].content_form, ContentForm::Absent);
    assert_eq!(call_block(&m[7].content[0]).arguments, json!(""));
    // `tool_calls: []` stays as written, in extra.
    assert_eq!(m[9].tool_calls().count(), 0);
    assert_eq!(m[9].extra.get("tool_calls"), Some(&json!([])));
    assert!(matches!(m[10].content[0], Block::Opaque(_)));
    assert_eq!(m[11].content_form, ContentForm::Null);

    // Legacy function calling pairs by name.
    let legacy = call_block(&m[12].content[0]);
    assert_eq!(legacy.name, "get_weather");
    assert_eq!(legacy.arguments, json!({"city": "Oslo"}));
    assert_eq!(m[13].role, Role::ToolResult);
    assert_eq!(result_of(&m[13]).tool_name.as_deref(), Some("get_weather"));

    assert_eq!(m[14].content_form, ContentForm::Blocks);
    assert!(m[14].content.is_empty());

    let tools = &conversation.tools;
    assert_eq!(tools.len(), 3);
    assert_eq!(tools[0].name, "list_dir");
    assert_eq!(tools[0].description.as_deref(), Some("List a directory."));
    assert_eq!(tools[0].parameters["required"], json!(["path"]));
    assert_eq!(tools[0].extra.get("strict"), Some(&json!(true)));
    assert_eq!(tools[2].parameters, Value::Null);
    assert_eq!(tools[2].description, None);
}

#[test]
fn decode_as_uses_this_codec() {
    let decoded = codec::decode_as(codec::Format::OpenAiResponse, RESPONSE).unwrap();
    assert_eq!(decoded.conversation.messages.len(), 1);
    let decoded = codec::decode_as(codec::Format::OpenAiRequest, REQUEST).unwrap();
    assert_eq!(decoded.conversation.messages.len(), 15);
}

#[test]
fn developer_spelling_is_written_back_and_system_is_the_default() {
    let input = json!({"messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "system", "content": "Be kind."}
    ]});
    let conversation = openai::decode_request(&input).unwrap();
    assert_eq!(openai::encode_request(&conversation), input);

    // A System message from anywhere else is `system`.
    let built = Conversation {
        messages: vec![Message::text(Role::System, "Be brief.")],
        ..Conversation::default()
    };
    assert_eq!(
        openai::encode_request(&built),
        json!({"messages": [{"role": "system", "content": "Be brief."}]})
    );
}

#[test]
fn changed_arguments_are_serialized_when_the_text_is_cleared() {
    let input = json!({"messages": [{"role": "assistant", "content": null, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}
    ]}]});
    let mut conversation = openai::decode_request(&input).unwrap();
    if let Block::ToolCall(call) = &mut conversation.messages[0].content[0] {
        call.arguments = json!({"a": 2});
        call.arguments_text = None;
    }
    let encoded = openai::encode_request(&conversation);
    assert_eq!(
        encoded["messages"][0]["tool_calls"][0]["function"]["arguments"],
        json!("{\"a\":2}")
    );
}

#[test]
fn response_round_trip_is_exact_and_meta_is_filled() {
    let input = parse(RESPONSE);
    let response = openai::decode_response(&input).unwrap();
    assert_eq!(openai::encode_response(&response), input);

    let message = &response.message;
    assert_eq!(message.role, Role::Assistant);
    assert_eq!(message.content_form, ContentForm::Text);
    assert_eq!(text_of(&message.content[0]), "Let me check.");
    assert_eq!(
        call_block(&message.content[1]).arguments,
        json!({"cmd": "ls"})
    );
    let meta = &message.meta;
    assert_eq!(meta.id.as_deref(), Some("chatcmpl-9xYz"));
    assert_eq!(meta.model.as_deref(), Some("gpt-4o-2024-08-06"));
    assert_eq!(meta.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(meta.timestamp, Some(Timestamp::Millis(1_731_000_000_000)));
    // prompt_tokens includes the cached ones; `input` does not.
    assert_eq!(
        meta.usage,
        Some(Usage {
            input: 200,
            output: 40,
            cache_read: 1000,
            cache_write: 0,
            cache_write_1h: 0,
        })
    );
    // The envelope keeps everything else, with the message slot emptied.
    assert_eq!(response.envelope["choices"][0]["message"], Value::Null);
    assert_eq!(
        response.envelope["choices"][1]["message"]["content"],
        json!("An alternative.")
    );
    assert_eq!(response.envelope["system_fingerprint"], json!("fp_abc"));
}

#[test]
fn response_meta_changes_are_written_to_the_envelope() {
    let mut response = openai::decode_response(&parse(RESPONSE)).unwrap();
    response.message.meta.usage = Some(Usage {
        input: 10,
        output: 5,
        cache_read: 90,
        cache_write: 0,
        cache_write_1h: 0,
    });
    response.message.meta.stop_reason = Some(StopReason::EndTurn);
    response.message.meta.model = Some("gpt-4.1".into());
    let encoded = openai::encode_response(&response);
    assert_eq!(encoded["model"], json!("gpt-4.1"));
    assert_eq!(encoded["choices"][0]["finish_reason"], json!("stop"));
    assert_eq!(encoded["usage"]["prompt_tokens"], json!(100));
    assert_eq!(encoded["usage"]["completion_tokens"], json!(5));
    assert_eq!(encoded["usage"]["total_tokens"], json!(105));
    assert_eq!(
        encoded["usage"]["prompt_tokens_details"]["cached_tokens"],
        json!(90)
    );
    assert_eq!(
        encoded["usage"]["prompt_tokens_details"]["audio_tokens"],
        json!(0)
    );
    assert_eq!(encoded["service_tier"], json!("default"));
}

#[test]
fn a_response_built_elsewhere_gets_a_minimal_envelope() {
    let anthropic = parse(include_str!("fixtures/wire/anthropic_response.json"));
    let decoded = anthropic::decode_response(&anthropic).unwrap();
    let response = openai::WireResponse {
        message: decoded.message,
        envelope: serde_json::Map::new(),
    };
    let encoded = openai::encode_response(&response);
    assert_clean(&encoded);
    assert_eq!(encoded["object"], json!("chat.completion"));
    assert_eq!(encoded["id"], json!("msg_01ABC"));
    let choice = &encoded["choices"][0];
    assert_eq!(choice["finish_reason"], json!("tool_calls"));
    // Thinking is dropped; text and the call remain.
    assert_eq!(
        choice["message"]["content"],
        json!([{"type": "text", "text": "Running the tests now."}])
    );
    assert_eq!(
        choice["message"]["tool_calls"][0]["function"]["arguments"],
        json!("{\"cmd\":\"cargo test\"}")
    );
    // Uncached + cache reads + cache writes.
    assert_eq!(encoded["usage"]["prompt_tokens"], json!(4312));
    assert_eq!(
        encoded["usage"]["prompt_tokens_details"]["cached_tokens"],
        json!(4000)
    );
    // And it decodes again to the same meta.
    let again = openai::decode_response(&encoded).unwrap();
    assert_eq!(again.message.meta.stop_reason, Some(StopReason::ToolUse));
}

/// Checks what OpenAI enforces on a request built from another format.
fn assert_valid_openai_request(request: &Value) {
    assert_clean(request);
    let top = request.as_object().expect("an object");
    for key in top.keys() {
        assert!(
            [
                "model",
                "messages",
                "tools",
                "max_completion_tokens",
                "temperature",
                "top_p",
                "stream",
                "stop",
                "tool_choice",
                "parallel_tool_calls"
            ]
            .contains(&key.as_str()),
            "unexpected top-level key {key}"
        );
    }
    assert!(!keys(request).iter().any(|key| key == "cache_control"));
    let mut open_calls: Vec<String> = Vec::new();
    for (index, message) in request["messages"].as_array().unwrap().iter().enumerate() {
        let role = message["role"].as_str().unwrap();
        if role != "tool" {
            assert!(
                open_calls.is_empty(),
                "messages[{index}]: unanswered calls {open_calls:?}"
            );
        }
        let content = &message["content"];
        if let Some(parts) = content.as_array() {
            assert!(!parts.is_empty(), "messages[{index}]: empty content array");
            for part in parts {
                let kind = part["type"].as_str().unwrap();
                assert!(
                    kind == "text" || (kind == "image_url" && role == "user"),
                    "{part}"
                );
                if kind == "text" {
                    assert!(part["text"].is_string());
                }
            }
        }
        match role {
            "system" | "user" => assert!(content.is_string() || content.is_array()),
            "assistant" => {
                let calls = message.get("tool_calls").and_then(Value::as_array);
                assert!(content.is_string() || content.is_array() || calls.is_some());
                for call in calls.into_iter().flatten() {
                    assert_eq!(call["type"], json!("function"));
                    assert!(call["function"]["name"].is_string());
                    let arguments = call["function"]["arguments"].as_str().unwrap();
                    serde_json::from_str::<Value>(arguments).expect("arguments are JSON");
                    open_calls.push(call["id"].as_str().unwrap().to_owned());
                }
            }
            "tool" => {
                assert!(
                    content.is_string(),
                    "messages[{index}]: tool content must be text"
                );
                let id = message["tool_call_id"].as_str().unwrap();
                let position = open_calls.iter().position(|open| open == id);
                let position =
                    position.unwrap_or_else(|| panic!("messages[{index}]: {id} answers no call"));
                open_calls.remove(position);
            }
            other => panic!("messages[{index}]: role {other}"),
        }
    }
    assert!(open_calls.is_empty(), "unanswered calls {open_calls:?}");
}

#[test]
fn anthropic_request_becomes_a_valid_openai_request() {
    let conversation = anthropic::decode_request(&parse(ANTHROPIC_REQUEST)).unwrap();
    let request = openai::encode_request(&conversation);
    assert_valid_openai_request(&request);

    // Sampling parameters are translated, Anthropic-only ones dropped.
    assert_eq!(request["model"], json!("claude-sonnet-4-5"));
    assert_eq!(request["max_completion_tokens"], json!(8192));
    assert_eq!(request["stop"], json!(["</done>"]));
    assert_eq!(request["tool_choice"], json!("auto"));
    assert_eq!(request["parallel_tool_calls"], json!(false));
    assert_eq!(
        request["tools"][0]["function"]["parameters"]["required"],
        json!(["path"])
    );
    // Anthropic runs its server tools itself; OpenAI has nothing to answer them.
    assert_eq!(request["tools"].as_array().unwrap().len(), 2);

    let messages = request["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "user",
            "assistant",
            "tool",
            "tool",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant"
        ]
    );
    // The system blocks are text parts of one system message.
    assert_eq!(
        messages[0]["content"][1]["text"],
        json!("Prefer small diffs.")
    );
    // Base64 images become data URLs; file sources and documents are Anthropic-only.
    assert_eq!(
        messages[2]["content"][1]["image_url"]["url"],
        json!("data:image/png;base64,iVBORw0KGgo=")
    );
    assert_eq!(messages[2]["content"].as_array().unwrap().len(), 3);
    // Results follow their calls in order, with text joined.
    assert_eq!(messages[3]["tool_calls"][0]["id"], json!("toolu_01"));
    assert_eq!(
        messages[3]["content"],
        json!([{"type": "text", "text": "I'll look at the test first."}])
    );
    assert_eq!(messages[4]["tool_call_id"], json!("toolu_01"));
    assert_eq!(messages[4]["content"], json!("fn a() {}"));
    assert_eq!(messages[5]["tool_call_id"], json!("toolu_02"));
    assert_eq!(messages[5]["content"], json!("1 failed"));
    // The image a tool returned, then the user's own text, follow in one user message.
    let after = messages[6]["content"].as_array().unwrap();
    assert_eq!(
        after[1]["image_url"]["url"],
        json!("data:image/jpeg;base64,/9j/4AAQ")
    );
    assert_eq!(after[2]["text"], json!("Keep going."));
    // Unsigned thinking and all thinking are gone; a call with no text has null content.
    assert_eq!(messages[7]["content"], Value::Null);
    assert_eq!(messages[8]["content"], json!(""));
}

#[test]
fn anthropic_to_openai_and_back_keeps_every_call_and_result() {
    let original = anthropic::decode_request(&parse(ANTHROPIC_REQUEST)).unwrap();
    let via_openai = openai::decode_request(&openai::encode_request(&original)).unwrap();
    let pairs = |conversation: &Conversation| -> Vec<(String, String)> {
        let calls: Vec<(String, String)> = conversation
            .messages
            .iter()
            .flat_map(|m| m.tool_calls().map(|c| (c.id.clone(), c.name.clone())))
            .collect();
        let results: Vec<String> = conversation
            .messages
            .iter()
            .flat_map(|m| m.tool_results().map(|r| r.call_id.clone()))
            .collect();
        assert_eq!(
            calls.iter().map(|c| c.0.clone()).collect::<Vec<_>>(),
            results
        );
        calls
    };
    assert_eq!(pairs(&original), pairs(&via_openai));
    let call = via_openai
        .messages
        .iter()
        .flat_map(Message::tool_calls)
        .next()
        .unwrap();
    assert_eq!(call.arguments, json!({"path": "tests/a.rs"}));
}

#[test]
fn assistant_entries_of_one_turn_are_joined_before_their_results() {
    // Claude Code writes each block of a response as its own assistant entry.
    let call = |id: &str| {
        Block::ToolCall(ToolCall {
            id: id.into(),
            name: "shell".into(),
            arguments: json!({"cmd": "ls"}),
            arguments_text: None,
            extra: Extra::new(),
        })
    };
    let result = |id: &str| {
        Block::ToolResult(ToolResult {
            call_id: id.into(),
            tool_name: None,
            content: vec![Block::text("ok")].into(),
            content_form: ContentForm::Text,
            is_error: None,
            details: None,
            extra: Extra::new(),
        })
    };
    let conversation = Conversation {
        messages: vec![
            Message::text(Role::User, "go"),
            Message::new(Role::Assistant, vec![Block::text("Looking.")]),
            Message::new(Role::Assistant, vec![call("a")]),
            Message::new(Role::Assistant, vec![call("b")]),
            Message::new(Role::ToolResult, vec![result("a")]),
            Message::new(Role::ToolResult, vec![result("b")]),
        ],
        ..Conversation::default()
    };
    let request = openai::encode_request(&conversation);
    assert_valid_openai_request(&request);
    let messages = request["messages"].as_array().unwrap();
    // Text-only assistant messages stay apart; the calls of one turn are joined.
    assert_eq!(messages.len(), 5);
    assert_eq!(messages[2]["tool_calls"].as_array().unwrap().len(), 2);
}

#[test]
fn details_and_foreign_extras_are_never_written() {
    let mut from_elsewhere = Extra::new();
    from_elsewhere.insert("parentUuid".into(), json!("abc"));
    from_elsewhere.insert("cache_control".into(), json!({"type": "ephemeral"}));
    let mut result_extra = Extra::new();
    result_extra.insert("isError".into(), json!(false));
    let conversation = Conversation {
        messages: vec![
            Message {
                extra: from_elsewhere.clone(),
                ..Message::new(
                    Role::Assistant,
                    vec![
                        Block::Opaque(json!({"type": "redacted_thinking", "data": "x"})),
                        Block::ToolCall(ToolCall {
                            id: "c1".into(),
                            name: "shell".into(),
                            arguments: json!({"cmd": "ls"}),
                            arguments_text: None,
                            extra: from_elsewhere.clone(),
                        }),
                    ],
                )
            },
            Message {
                extra: from_elsewhere.clone(),
                ..Message::new(
                    Role::ToolResult,
                    vec![Block::ToolResult(ToolResult {
                        call_id: "c1".into(),
                        tool_name: Some("shell".into()),
                        content: vec![Block::text("a.rs")].into(),
                        content_form: ContentForm::Blocks,
                        is_error: Some(false),
                        details: Some(json!({"secret": "host only"}).into()),
                        extra: result_extra,
                    })],
                )
            },
        ],
        extra: from_elsewhere,
        ..Conversation::default()
    };
    let request = openai::encode_request(&conversation);
    assert_valid_openai_request(&request);
    let text = serde_json::to_string(&request).unwrap();
    for leaked in ["host only", "parentUuid", "redacted_thinking", "isError"] {
        assert!(!text.contains(leaked), "{leaked} leaked: {text}");
    }
    assert_eq!(
        request,
        json!({"messages": [
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\":\"ls\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.rs"}
        ]})
    );

    // Details on a result of an OpenAI message are not written either.
    let mut own = openai::decode_request(&json!({"messages": [
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    ]}))
    .unwrap();
    if let Block::ToolResult(result) = &mut own.messages[0].content[0] {
        result.details = Some(json!({"secret": "host only"}).into());
    }
    assert_clean(&openai::encode_request(&own));
}

fn error_text(input: Value) -> String {
    openai::decode_request(&input).unwrap_err().to_string()
}

#[test]
fn errors_name_the_path_and_what_was_expected() {
    assert_eq!(
        error_text(json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": "f"}]}
        ]})),
        "messages[2].tool_calls[0].function: expected an object with \"name\" and \"arguments\", found a string"
    );
    assert_eq!(
        error_text(json!({"messages": [{"role": "user", "content": ["hi"]}]})),
        "messages[0].content[0]: expected an object with \"type\", found a string"
    );
    assert_eq!(
        error_text(json!({"messages": [{"content": "hi"}]})),
        "messages[0].role: missing, expected a string"
    );
    assert_eq!(
        error_text(json!({"messages": [{"role": "robot", "content": "hi"}]})),
        "messages[0].role: expected one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\", \"function\", found \"robot\""
    );
    assert_eq!(
        error_text(json!({"messages": [{"role": "tool", "content": "x"}]})),
        "messages[0].tool_call_id: missing, expected a string"
    );
    assert_eq!(
        error_text(json!({"messages": [{"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
        ]}]})),
        "messages[0].tool_calls[0].function.arguments: expected a string of JSON, found an object"
    );
    assert_eq!(
        error_text(
            json!({"messages": [], "tools": [{"type": "function", "function": {"description": "d"}}]})
        ),
        "tools[0].function.name: missing, expected a string"
    );
    assert_eq!(
        error_text(json!([1])),
        "top level: expected an object with \"messages\", found an array"
    );
    assert_eq!(
        error_text(json!({"model": "m"})),
        "messages: missing, expected an array of messages"
    );

    let error = openai::decode_request_str("{\"messages\": [").unwrap_err();
    assert!(matches!(error, openai::WireError::Json(_)));
    assert!(error.to_string().contains("line 1"), "{error}");

    let response_error = |input: Value| openai::decode_response(&input).unwrap_err();
    assert_eq!(
        response_error(json!({"choices": []})).to_string(),
        "choices: expected at least one choice, found an empty array"
    );
    let error = response_error(
        json!({"choices": [{"message": {"role": "assistant"}}], "usage": {"prompt_tokens": "12"}}),
    );
    assert_eq!(error.path(), Some("usage.prompt_tokens"));
    assert_eq!(
        error.to_string(),
        "usage.prompt_tokens: expected a non-negative integer, found a string"
    );
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
                match openai::decode_request(&value) {
                    Ok(conversation) => {
                        assert_eq!(openai::encode_request(&conversation), value);
                        assert_clean(&anthropic::encode_request(&conversation));
                    }
                    Err(error) => assert!(error.path().is_some()),
                }
                match openai::decode_response(&value) {
                    Ok(response) => assert_eq!(openai::encode_response(&response), value),
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
        let _ = openai::decode_request_str(&input);
        let _ = openai::decode_response_str(&input);
    }

    #[test]
    fn decoders_never_panic_on_json(value in arb_json()) {
        if let Ok(conversation) = openai::decode_request(&value) {
            prop_assert_eq!(openai::encode_request(&conversation), value.clone());
            let _ = anthropic::encode_request(&conversation);
        }
        if let Ok(response) = openai::decode_response(&value) {
            prop_assert_eq!(openai::encode_response(&response), value.clone());
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
        match openai::decode_request(&value) {
            Ok(conversation) => {
                prop_assert_eq!(openai::encode_request(&conversation), value.clone());
                assert_clean(&anthropic::encode_request(&conversation));
            }
            Err(error) => prop_assert!(error.path().is_some()),
        }
        match openai::decode_response(&value) {
            Ok(response) => prop_assert_eq!(openai::encode_response(&response), value.clone()),
            Err(error) => prop_assert!(error.path().is_some()),
        }
    }
}
