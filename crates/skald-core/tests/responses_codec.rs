//! OpenAI Responses codec: exact round trips of Codex traffic, the neutral model it decodes to,
//! valid requests from other formats and from skald-built messages, error paths, and no panics on
//! any input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod wire_common;

use proptest::prelude::*;
use serde_json::{Value, json};
use skald_core::codec::{anthropic, openai, responses};
use skald_core::message::{
    Block, ContentForm, Conversation, Extra, ImageSource, Message, Role, StopReason, Timestamp,
    ToolCall, ToolResult, Usage,
};
use wire_common::{
    arb_json, assert_clean, call_block, image_block, mutate, parse, pointers, text_block,
};

const REQUEST: &str = include_str!("fixtures/wire/responses_request.json");
const RESPONSE: &str = include_str!("fixtures/wire/responses_response.json");
const ANTHROPIC_REQUEST: &str = include_str!("fixtures/wire/anthropic_request.json");
const OPENAI_REQUEST: &str = include_str!("fixtures/wire/openai_request.json");

fn opaque_type(block: &Block) -> &str {
    let Block::Opaque(value) = block else {
        panic!("expected an opaque block, found {block:?}");
    };
    value["type"].as_str().unwrap_or("")
}

fn result_of(message: &Message) -> &ToolResult {
    message.tool_results().next().expect("a tool result")
}

#[test]
fn request_round_trip_is_exact() {
    let input = parse(REQUEST);
    let conversation = responses::decode_request(&input).unwrap();
    let encoded = responses::encode_request(&conversation);
    assert_eq!(encoded, input);
    assert_clean(&encoded);
    let again = responses::decode_request_str(&serde_json::to_string(&encoded).unwrap()).unwrap();
    assert_eq!(again, conversation);
}

#[test]
fn request_decodes_into_the_neutral_model() {
    let conversation = responses::decode_request(&parse(REQUEST)).unwrap();
    assert_eq!(conversation.model.as_deref(), Some("gpt-5-codex"));
    assert_eq!(
        conversation.extra["include"],
        json!(["reasoning.encrypted_content"])
    );
    assert_eq!(conversation.extra["store"], json!(false));
    let m = &conversation.messages;
    let roles: Vec<&str> = m.iter().map(|message| message.role.name()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "system",
            "system",
            "user",
            "user",
            "assistant",
            "tool_result",
            "tool_result",
            "assistant",
            "tool_result",
            "assistant",
            "tool_result",
            "assistant",
            "user",
            "user",
            "user",
            "system",
            "user",
            "user"
        ]
    );
    // `instructions`, then the two developer messages: the host prompt is the leading run.
    assert_eq!(m[0].extra[responses::INSTRUCTIONS_HINT], json!(true));
    assert_eq!(m[0].plain_text(), "You are Codex, a coding agent.");
    assert_eq!(m[1].content_form, ContentForm::Blocks);
    assert_eq!(m[1].extra.get(responses::ROLE_HINT), None);
    assert_eq!(m[2].content_form, ContentForm::Text);
    assert_eq!(m[16].extra[responses::ROLE_HINT], json!("system"));

    // Environment context and prompt are ordinary user text; images and files are parts.
    assert!(m[3].plain_text().contains("<environment_context>"));
    let image = image_block(&m[4].content[1]);
    assert_eq!(
        image.source,
        ImageSource::Url {
            url: "data:image/png;base64,iVBORw0KGgo=".into()
        }
    );
    assert_eq!(image.extra["detail"], json!("auto"));
    assert_eq!(opaque_type(&m[4].content[2]), "input_file");

    // One model turn: reasoning, the message's text, both parallel calls, in item order.
    let turn = &m[5].content;
    assert_eq!(turn.len(), 4);
    assert_eq!(opaque_type(&turn[0]), "reasoning");
    let Block::Opaque(reasoning) = &turn[0] else {
        unreachable!()
    };
    assert_eq!(
        reasoning["encrypted_content"],
        json!("gAAAAABo-ENCRYPTED-1")
    );
    let text = text_block(&turn[1]);
    assert_eq!(text.text, "Let me look at the tests.");
    assert_eq!(
        text.extra[responses::ITEM_HINT],
        json!({"type": "message", "role": "assistant", "id": "msg_01", "status": "completed"})
    );
    let calls: Vec<&ToolCall> = m[5].tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].id, "call_A");
    assert_eq!(calls[0].name, "shell");
    assert_eq!(calls[0].arguments["timeout_ms"], json!(120000));
    assert_eq!(
        calls[0].arguments_text.as_deref(),
        Some("{\"command\":[\"bash\",\"-lc\",\"cargo test\"],\"timeout_ms\":120000}")
    );
    assert_eq!(calls[0].extra["id"], json!("fc_01"));
    assert_eq!(calls[1].arguments, json!({"path": "src/lib.rs"}));
    assert!(calls[1].extra.is_empty());

    // One result per output item, as text or as parts.
    let first = result_of(&m[6]);
    assert_eq!(first.call_id, "call_A");
    assert_eq!(first.content_form, ContentForm::Text);
    assert_eq!(first.is_error, None);
    let second = result_of(&m[7]);
    assert_eq!(second.call_id, "call_B");
    assert_eq!(second.content_form, ContentForm::Blocks);
    assert!(matches!(second.content[1], Block::Image(_)));

    // Other tools' calls and outputs stay verbatim, in place.
    assert_eq!(opaque_type(&m[8].content[0]), "reasoning");
    assert_eq!(opaque_type(&m[8].content[1]), "custom_tool_call");
    assert_eq!(opaque_type(&m[9].content[0]), "custom_tool_call_output");
    assert_eq!(m[9].tool_results().count(), 0);
    assert_eq!(opaque_type(&m[10].content[0]), "local_shell_call");
    assert_eq!(opaque_type(&m[12].content[0]), "web_search_call");
    // An easy assistant message joins the turn.
    assert_eq!(text_block(&m[12].content[1]).text, "Fixed: `add` now adds.");
    for (index, kind) in [
        (13, "compaction"),
        (14, "item_reference"),
        (15, "future_item"),
    ] {
        assert_eq!(opaque_type(&m[index].content[0]), kind);
        assert_eq!(m[index].extra[responses::OPAQUE_ITEMS_HINT], json!(true));
    }
    assert_eq!(m[17].content_form, ContentForm::Text);
    assert_eq!(m[18].plain_text(), "quoted answer");

    let tools = &conversation.tools;
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "shell",
            "read_file",
            "apply_patch",
            "mcp__github",
            "web_search",
            "local_shell"
        ]
    );
    assert_eq!(tools[0].parameters["required"], json!(["command"]));
    assert_eq!(tools[0].extra.get("strict"), Some(&json!(false)));
    assert_eq!(tools[1].description, None);
    assert_eq!(tools[3].parameters, Value::Null);
    assert_eq!(tools[3].extra["tools"][0]["name"], json!("create_issue"));
}

#[test]
fn small_requests_round_trip_exactly() {
    let cases = [
        json!({"model": "m", "input": "hello"}),
        json!({"instructions": "Be brief.", "input": "hello", "stream": false}),
        json!({"model": "m", "previous_response_id": "resp_1"}),
        json!({"input": null, "instructions": null, "tools": []}),
        json!({"input": []}),
        json!({"input": [{"role": "user", "content": "hi"}]}),
        json!({"input": [{"role": "developer", "content": [{"type": "input_text", "text": "x"}]}]}),
        json!({"input": [{"type": "message", "role": "user", "content": []}]}),
        json!({"input": [{"type": "message", "role": "user", "content": ""}]}),
        json!({"input": [{"type": "message", "role": "assistant", "content": []}]}),
        json!({"input": [{"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}]}),
        json!({"input": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]}]}),
        json!({"input": [
            {"role": "assistant", "content": "a"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "b", "annotations": []}]},
            {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "c", "annotations": []},
                {"type": "input_text", "text": "d"}
            ]}
        ]}),
        json!({"input": [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": ""},
            {"type": "function_call_output", "call_id": "c", "output": ""},
            {"type": "function_call_output", "call_id": "c", "output": []}
        ]}),
    ];
    for input in cases {
        let conversation = responses::decode_request(&input).unwrap();
        assert_eq!(responses::encode_request(&conversation), input, "{input}");
    }
}

#[test]
fn edits_by_the_pipeline_are_written_in_the_default_spelling() {
    let mut conversation = responses::decode_request(&parse(REQUEST)).unwrap();
    // skald's addition to the host prompt, as the proxy makes it.
    if let [Block::Text(text)] = conversation.messages[0].content.as_mut_slice() {
        text.text.push_str("\n\nskald: recall is available.");
    }
    // Changed arguments, a truncated result, and a marked message skald built.
    if let Block::ToolCall(call) = &mut conversation.messages[5].content[2] {
        call.arguments = json!({"command": ["ls"]});
        call.arguments_text = None;
    }
    if let Block::ToolResult(result) = &mut conversation.messages[6].content[0] {
        result.content = vec![Block::text("[truncated]")].into();
    }
    let mut summary = Message::text(Role::Assistant, "Summary of earlier work.");
    summary
        .extra
        .insert(responses::ORIGIN_KEY.into(), json!(responses::ORIGIN));
    conversation.messages.insert(13, summary);

    let encoded = responses::encode_request(&conversation);
    assert_clean(&encoded);
    assert_eq!(
        encoded["instructions"],
        json!("You are Codex, a coding agent.\n\nskald: recall is available.")
    );
    let input = encoded["input"].as_array().unwrap();
    assert_eq!(input[6]["arguments"], json!("{\"command\":[\"ls\"]}"));
    assert_eq!(input[6]["id"], json!("fc_01"));
    assert_eq!(input[8]["output"], json!("[truncated]"));
    assert_eq!(
        input[17],
        json!({"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Summary of earlier work.", "annotations": []}
        ]})
    );
    // Everything else is untouched.
    assert_eq!(
        input.len(),
        parse(REQUEST)["input"].as_array().unwrap().len() + 1
    );
    assert_eq!(input[4], parse(REQUEST)["input"][4]);
}

#[test]
fn response_round_trip_is_exact_and_is_one_assistant_turn() {
    let input = parse(RESPONSE);
    let response = responses::decode_response(&input).unwrap();
    assert_eq!(responses::encode_response(&response), input);

    let message = &response.message;
    assert_eq!(message.role, Role::Assistant);
    let blocks = &message.content;
    assert_eq!(blocks.len(), 5);
    assert_eq!(opaque_type(&blocks[0]), "reasoning");
    assert_eq!(text_block(&blocks[1]).text, "I'll run both checks.");
    assert_eq!(text_block(&blocks[1]).extra["logprobs"], json!([]));
    assert_eq!(text_block(&blocks[2]).text, "See the docs.");
    assert!(
        !text_block(&blocks[2])
            .extra
            .contains_key(responses::ITEM_HINT)
    );
    assert_eq!(call_block(&blocks[3]).id, "call_X");
    assert_eq!(call_block(&blocks[4]).arguments, json!("not json"));

    let meta = &message.meta;
    assert_eq!(meta.id.as_deref(), Some("resp_0abc"));
    assert_eq!(meta.model.as_deref(), Some("gpt-5-codex"));
    assert_eq!(meta.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(meta.timestamp, Some(Timestamp::Millis(1_760_000_000_000)));
    // input_tokens includes the cached ones; `input` does not.
    assert_eq!(
        meta.usage,
        Some(Usage {
            input: 1000,
            output: 300,
            cache_read: 11000,
            cache_write: 0,
            cache_write_1h: 0,
        })
    );
    assert_eq!(response.envelope["output"], Value::Null);
    assert_eq!(response.envelope["truncation"], json!("disabled"));

    // The same items sent back as input decode to the same turn.
    let request = json!({"input": input["output"].clone()});
    let replayed = responses::decode_request(&request).unwrap();
    assert_eq!(replayed.messages.len(), 1);
    assert_eq!(replayed.messages[0].content, message.content);
}

#[test]
fn response_meta_changes_are_written_to_the_envelope() {
    let mut response = responses::decode_response(&parse(RESPONSE)).unwrap();
    response.message.meta.usage = Some(Usage {
        input: 10,
        output: 5,
        cache_read: 90,
        cache_write: 0,
        cache_write_1h: 0,
    });
    response.message.meta.stop_reason = Some(StopReason::MaxTokens);
    response.message.meta.model = Some("gpt-5".into());
    let encoded = responses::encode_response(&response);
    assert_eq!(encoded["model"], json!("gpt-5"));
    assert_eq!(encoded["status"], json!("incomplete"));
    assert_eq!(
        encoded["incomplete_details"],
        json!({"reason": "max_output_tokens"})
    );
    assert_eq!(encoded["usage"]["input_tokens"], json!(100));
    assert_eq!(
        encoded["usage"]["input_tokens_details"]["cached_tokens"],
        json!(90)
    );
    assert_eq!(encoded["usage"]["output_tokens"], json!(5));
    assert_eq!(encoded["usage"]["total_tokens"], json!(105));
    assert_eq!(
        encoded["usage"]["output_tokens_details"]["reasoning_tokens"],
        json!(200)
    );
    let again = responses::decode_response(&encoded).unwrap();
    assert_eq!(again.message.meta, response.message.meta);
}

#[test]
fn a_response_built_elsewhere_gets_a_minimal_envelope() {
    let anthropic = parse(include_str!("fixtures/wire/anthropic_response.json"));
    let decoded = anthropic::decode_response(&anthropic).unwrap();
    let response = responses::WireResponse {
        message: decoded.message,
        envelope: serde_json::Map::new(),
    };
    let encoded = responses::encode_response(&response);
    assert_clean(&encoded);
    assert_eq!(encoded["object"], json!("response"));
    assert_eq!(encoded["id"], json!("msg_01ABC"));
    assert_eq!(encoded["status"], json!("completed"));
    // Thinking is dropped; text and the call remain, as items.
    let output = encoded["output"].as_array().unwrap();
    assert_eq!(
        output[0],
        json!({"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Running the tests now.", "annotations": []}
        ]})
    );
    assert_eq!(output[1]["type"], json!("function_call"));
    assert_eq!(output[1]["arguments"], json!("{\"cmd\":\"cargo test\"}"));
    assert_eq!(encoded["usage"]["input_tokens"], json!(4312));
    let again = responses::decode_response(&encoded).unwrap();
    assert_eq!(again.message.meta.stop_reason, Some(StopReason::ToolUse));
}

/// Checks what the Responses API enforces on a request built from another format.
fn assert_valid_responses_request(request: &Value) {
    assert_clean(request);
    for key in request.as_object().unwrap().keys() {
        assert!(
            [
                "model",
                "instructions",
                "input",
                "tools",
                "max_output_tokens",
                "temperature",
                "top_p",
                "stream",
                "tool_choice",
                "parallel_tool_calls"
            ]
            .contains(&key.as_str()),
            "unexpected top-level key {key}"
        );
    }
    if let Some(instructions) = request.get("instructions") {
        assert!(instructions.is_string());
    }
    let mut open: Vec<String> = Vec::new();
    for (index, item) in request["input"].as_array().unwrap().iter().enumerate() {
        match item["type"].as_str().unwrap() {
            "message" => {
                let role = item["role"].as_str().unwrap();
                assert!(["user", "developer", "assistant"].contains(&role), "{item}");
                let parts = item["content"].as_array().expect("content parts");
                assert!(!parts.is_empty(), "input[{index}]: empty content");
                for part in parts {
                    match (role, part["type"].as_str().unwrap()) {
                        ("assistant", "output_text") => assert!(part["annotations"].is_array()),
                        ("user" | "developer", "input_text") => {}
                        ("user", "input_image") => assert!(part["image_url"].is_string()),
                        other => panic!("input[{index}]: part {other:?}"),
                    }
                }
            }
            "function_call" => {
                let arguments = item["arguments"].as_str().unwrap();
                serde_json::from_str::<Value>(arguments).expect("arguments are JSON");
                assert!(item["name"].is_string());
                open.push(item["call_id"].as_str().unwrap().to_owned());
            }
            "function_call_output" => {
                assert!(item["output"].is_string(), "input[{index}]: output is text");
                let id = item["call_id"].as_str().unwrap();
                let position = open.iter().position(|call| call == id);
                open.remove(position.unwrap_or_else(|| panic!("{id} answers no call")));
            }
            other => panic!("input[{index}]: item type {other}"),
        }
    }
    assert!(open.is_empty(), "unanswered calls {open:?}");
    for tool in request["tools"].as_array().into_iter().flatten() {
        assert_eq!(tool["type"], json!("function"));
        assert!(tool["name"].is_string() && tool["parameters"].is_object());
        assert_eq!(tool["strict"], json!(false));
    }
}

#[test]
fn anthropic_request_becomes_a_valid_responses_request() {
    let conversation = anthropic::decode_request(&parse(ANTHROPIC_REQUEST)).unwrap();
    let request = responses::encode_request(&conversation);
    assert_valid_responses_request(&request);
    assert_eq!(request["model"], json!("claude-sonnet-4-5"));
    assert_eq!(request["max_output_tokens"], json!(8192));
    assert_eq!(
        request["instructions"],
        json!("You are a careful coding agent.\nPrefer small diffs.")
    );
    // Server tools are Anthropic's to run.
    assert_eq!(request["tools"].as_array().unwrap().len(), 2);
    let input = request["input"].as_array().unwrap();
    assert_eq!(
        input[1]["content"][1]["image_url"],
        json!("data:image/png;base64,iVBORw0KGgo=")
    );
    let text = serde_json::to_string(&request).unwrap();
    for leaked in [
        "cache_control",
        "redacted_thinking",
        "signature",
        "document",
    ] {
        assert!(!text.contains(leaked), "{leaked} leaked");
    }
}

#[test]
fn openai_request_becomes_a_valid_responses_request() {
    let conversation = openai::decode_request(&parse(OPENAI_REQUEST)).unwrap();
    let request = responses::encode_request(&conversation);
    // Legacy function calls have no id and pair by name; they have no Responses spelling.
    let input = request["input"].as_array().unwrap();
    assert!(
        input
            .iter()
            .any(|item| item["type"] == json!("function_call"))
    );
    assert_clean(&request);
    assert_eq!(
        request["instructions"].as_str().map(str::is_empty),
        Some(false)
    );
    assert_eq!(request["temperature"], json!(0.2));
}

#[test]
fn conversations_built_by_skald_are_valid_input() {
    let call = |id: &str| {
        Block::ToolCall(ToolCall {
            id: id.into(),
            name: "shell".into(),
            arguments: json!({"cmd": "ls"}),
            arguments_text: None,
            extra: Extra::new(),
        })
    };
    let result = |id: &str, content: Vec<Block>| {
        Block::ToolResult(ToolResult {
            call_id: id.into(),
            tool_name: Some("shell".into()),
            content: content.into(),
            content_form: ContentForm::Blocks,
            is_error: Some(true),
            details: Some(json!({"secret": "host only"}).into()),
            extra: Extra::new(),
        })
    };
    let png = Block::Image(skald_core::message::ImageBlock {
        source: ImageSource::Base64 {
            media_type: "image/png".into(),
            data: "AAAA".into(),
        },
        extra: Extra::new(),
    });
    let conversation = Conversation {
        messages: vec![
            Message::text(Role::System, "Be careful."),
            Message::text(Role::User, "go"),
            Message::new(
                Role::Assistant,
                vec![
                    Block::Thinking(skald_core::message::ThinkingBlock {
                        thinking: "hmm".into(),
                        signature: None,
                        extra: Extra::new(),
                    }),
                    Block::text("Looking."),
                    Block::text(""),
                    call("a"),
                    Block::text(""),
                    call("b"),
                ],
            ),
            Message::new(Role::ToolResult, vec![result("a", vec![Block::text("ok")])]),
            Message::new(Role::ToolResult, vec![result("b", vec![png])]),
            Message::text(Role::System, "Later reminder."),
            Message::text(Role::Custom("note".into()), "host only"),
        ],
        ..Conversation::default()
    };
    let request = responses::encode_request(&conversation);
    assert_valid_responses_request(&request);
    assert!(
        !serde_json::to_string(&request)
            .unwrap()
            .contains("host only")
    );
    assert_eq!(request["instructions"], json!("Be careful."));
    let input = request["input"].as_array().unwrap();
    let kinds: Vec<&str> = input
        .iter()
        .map(|item| {
            item["role"]
                .as_str()
                .unwrap_or_else(|| item["type"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "user",
            "assistant",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "user",
            "developer"
        ]
    );
    assert_eq!(input[4]["output"], json!("ok"));
    // An image-only result says so, and the image follows in a user message.
    assert_eq!(input[5]["output"], json!("(see attached image)"));
    assert_eq!(
        input[6]["content"][1]["image_url"],
        json!("data:image/png;base64,AAAA")
    );
}

#[test]
fn skald_tools_are_written_flat() {
    let spec = json!({"type": "function", "function": {
        "name": "skald_recall", "description": "Search memory.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}
    }});
    assert_eq!(
        responses::tool_from_function_spec(spec),
        json!({"type": "function", "name": "skald_recall", "description": "Search memory.",
               "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
               "strict": false})
    );
    let bare = json!({"type": "function", "function": {"name": "f", "strict": true}});
    assert_eq!(
        responses::tool_from_function_spec(bare),
        json!({"type": "function", "name": "f", "strict": true,
               "parameters": {"type": "object", "properties": {}}})
    );
    let flat = json!({"type": "web_search"});
    assert_eq!(responses::tool_from_function_spec(flat.clone()), flat);
}

fn error_text(input: Value) -> String {
    responses::decode_request(&input).unwrap_err().to_string()
}

#[test]
fn errors_name_the_path_and_what_was_expected() {
    let call = json!({"type": "function_call", "name": "f", "arguments": "{}"});
    let hi = json!({"role": "user", "content": "hi"});
    assert_eq!(
        error_text(json!({"input": [hi, hi, hi, call]})),
        "input[3].call_id: missing, expected a string"
    );
    assert_eq!(
        error_text(
            json!({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]})
        ),
        "input[0].arguments: expected a string of JSON, found an object"
    );
    assert_eq!(
        error_text(json!({"input": [{"type": "function_call_output", "call_id": "c"}]})),
        "input[0].output: missing, expected a string or an array of content parts"
    );
    assert_eq!(
        error_text(json!({"input": [{"role": "robot", "content": "hi"}]})),
        "input[0].role: expected one of \"user\", \"assistant\", \"system\", \"developer\", found \"robot\""
    );
    assert_eq!(
        error_text(json!({"input": [{"content": "hi"}]})),
        "input[0].type: missing, expected a string"
    );
    assert_eq!(
        error_text(
            json!({"input": [{"type": "message", "role": "assistant", "content": [
                {"type": "output_text"}
            ]}]})
        ),
        "input[0].content[0].text: missing, expected a string"
    );
    assert_eq!(
        error_text(
            json!({"input": [{"role": "user", "content": [{"type": "input_text", "text": 3}]}]})
        ),
        "input[0].content[0].text: expected a string, found a number"
    );
    assert_eq!(
        error_text(json!({"input": [], "tools": [{"type": "function"}]})),
        "tools[0].name: missing, expected a string"
    );
    assert_eq!(
        error_text(json!({"input": 3})),
        "input: expected a string or an array of input items, found a number"
    );
    assert_eq!(
        error_text(json!({"input": [], "instructions": ["x"]})),
        "instructions: expected a string, found an array"
    );
    assert_eq!(
        error_text(json!([1])),
        "top level: expected an object with \"input\", found an array"
    );
    let error = responses::decode_request_str("{\"input\": [").unwrap_err();
    assert!(matches!(error, responses::WireError::Json(_)));
    assert_eq!(error.path(), None);

    let response_error = |input: Value| responses::decode_response(&input).unwrap_err();
    assert_eq!(
        response_error(json!({"id": "r"})).to_string(),
        "output: missing, expected an array of output items"
    );
    let error = response_error(json!({"output": [], "usage": {"input_tokens": "12"}}));
    assert_eq!(error.path(), Some("usage.input_tokens"));
    assert_eq!(
        response_error(json!({"output": [{"type": "function_call", "call_id": "c", "name": "f"}]}))
            .to_string(),
        "output[0].arguments: missing, expected a string of JSON"
    );
}

#[test]
fn every_single_field_change_to_the_fixtures_round_trips_or_names_its_path() {
    let replacements = [
        Value::Null,
        json!("assistant"),
        json!({}),
        json!([]),
        json!(1),
        json!(true),
        json!([{"type": "output_text", "text": "x"}]),
        json!({"role": "user", "content": "x"}),
    ];
    for fixture in [REQUEST, RESPONSE] {
        let base = parse(fixture);
        for pick in 0..pointers(&base).len() {
            let changes = replacements.iter().map(|r| (r.clone(), false));
            for (replacement, remove) in changes.chain([(Value::Null, true)]) {
                let value = mutate(&base, pick, replacement, remove);
                match responses::decode_request(&value) {
                    Ok(conversation) => {
                        assert_eq!(responses::encode_request(&conversation), value);
                        assert_clean(&openai::encode_request(&conversation));
                        assert_clean(&anthropic::encode_request(&conversation));
                    }
                    Err(error) => assert!(error.path().is_some()),
                }
                match responses::decode_response(&value) {
                    Ok(response) => assert_eq!(responses::encode_response(&response), value),
                    Err(error) => assert!(error.path().is_some()),
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decoders_never_panic_on_strings(input in ".{0,200}") {
        let _ = responses::decode_request_str(&input);
        let _ = responses::decode_response_str(&input);
    }

    #[test]
    fn decoders_never_panic_on_json(value in arb_json()) {
        if let Ok(conversation) = responses::decode_request(&value) {
            prop_assert_eq!(responses::encode_request(&conversation), value.clone());
        }
        if let Ok(response) = responses::decode_response(&value) {
            prop_assert_eq!(responses::encode_response(&response), value.clone());
        }
    }

    #[test]
    fn foreign_conversations_always_encode_cleanly(value in arb_json()) {
        if let Ok(conversation) = openai::decode_request(&value) {
            assert_clean(&responses::encode_request(&conversation));
        }
        if let Ok(conversation) = anthropic::decode_request(&value) {
            assert_clean(&responses::encode_request(&conversation));
        }
    }
}
