//! The session store's form of a message is lossless: every block of every client message
//! survives decode (Anthropic, OpenAI) → `encode_entry` / `decode_entry` (the store's OpenClaw
//! entry) → encode back to the wire, when no stage changed anything.
//!
//! The store's form has no room for codec hints (`skald:` keys, a wire format's spelling notes);
//! the proxy puts those back from the client's own request. The tests do the same, by position,
//! and then demand the exact wire JSON: a block lost or reordered by the store shows up either as
//! a difference modulo hints or as a different wire body.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Value, json};
use skald_core::codec::openclaw::{
    SKALD_CONTENT_KEY, decode_entry, encode_agent_messages, encode_entry,
};
use skald_core::codec::{anthropic, openai};
use skald_core::message::{Block, Extra, Message, Role, is_hint_key};
use skald_core::session::{Entry, EntryKind};

// ---------------------------------------------------------------------------------------------
// Store round trip
// ---------------------------------------------------------------------------------------------

/// A message written as a session entry line and read back, as the store does.
fn through_store(message: &Message) -> Message {
    let entry = Entry {
        id: "0000abcd".to_owned(),
        parent_id: None,
        timestamp: "2025-01-01T00:00:00.000Z".to_owned(),
        kind: EntryKind::Message(message.clone()),
        extra: Extra::new(),
    };
    let line = encode_entry(&entry).to_string();
    let read = decode_entry(&serde_json::from_str(&line).unwrap()).unwrap();
    read.kind
        .as_message()
        .cloned()
        .expect("a message entry reads back as a message")
}

fn strip(extra: &mut Extra) {
    extra.retain(|key, _| !is_hint_key(key));
}

fn strip_block(block: &mut Block) {
    match block {
        Block::Text(text) => strip(&mut text.extra),
        Block::Image(image) => strip(&mut image.extra),
        Block::Thinking(thinking) => strip(&mut thinking.extra),
        Block::ToolCall(call) => strip(&mut call.extra),
        Block::ToolResult(result) => {
            strip(&mut result.extra);
            result.content.iter_mut().for_each(strip_block);
        }
        Block::Opaque(_) => {}
    }
}

/// The message without codec hints: what the store is asked to keep.
fn without_hints(message: &Message) -> Message {
    let mut out = message.clone();
    strip(&mut out.extra);
    out.content.iter_mut().for_each(strip_block);
    out
}

fn copy_hints(into: &mut Extra, from: &Extra) {
    for (key, value) in from {
        if is_hint_key(key) {
            into.insert(key.clone(), value.clone());
        }
    }
}

fn hint_block(into: &mut Block, from: &Block) {
    match (into, from) {
        (Block::Text(a), Block::Text(b)) => copy_hints(&mut a.extra, &b.extra),
        (Block::Image(a), Block::Image(b)) => copy_hints(&mut a.extra, &b.extra),
        (Block::Thinking(a), Block::Thinking(b)) => copy_hints(&mut a.extra, &b.extra),
        (Block::ToolCall(a), Block::ToolCall(b)) => {
            copy_hints(&mut a.extra, &b.extra);
            // The exact argument text is a spelling too; the proxy restores it with the rest.
            a.arguments_text.clone_from(&b.arguments_text);
        }
        (Block::ToolResult(a), Block::ToolResult(b)) => {
            copy_hints(&mut a.extra, &b.extra);
            for (inner, original) in a.content.iter_mut().zip(&b.content) {
                hint_block(inner, original);
            }
        }
        _ => {}
    }
}

/// The client's spelling notes put back on a message read from the store, block by position.
fn with_hints(mut restored: Message, original: &Message) -> Message {
    copy_hints(&mut restored.extra, &original.extra);
    restored.content_form = original.content_form;
    for (block, original) in restored.content.iter_mut().zip(&original.content) {
        hint_block(block, original);
    }
    restored
}

/// Every message of `conversation` through the store; asserts nothing but hints was lost.
fn stored(messages: &[Message]) -> Vec<Message> {
    messages
        .iter()
        .map(|message| {
            let back = through_store(message);
            let (mut got, mut want) = (without_hints(&back), without_hints(message));
            // A block list and its one-string spelling are the same content; the spelling is the
            // client's to restore.
            got.content_form = want.content_form;
            for block in got.content.iter_mut().chain(want.content.iter_mut()) {
                if let Block::ToolCall(call) = block {
                    call.arguments_text = None;
                }
            }
            assert_eq!(got, want, "the store changed a message");
            with_hints(back, message)
        })
        .collect()
}

fn anthropic_store_round_trip(body: &Value) {
    let conversation = anthropic::decode_request(body).unwrap();
    let messages = stored(&conversation.messages);
    let wire = anthropic::encode_request(&skald_core::message::Conversation {
        messages,
        ..conversation
    });
    assert_eq!(&wire, body);
}

fn openai_store_round_trip(body: &Value) {
    let conversation = openai::decode_request(body).unwrap();
    let messages = stored(&conversation.messages);
    let wire = openai::encode_request(&skald_core::message::Conversation {
        messages,
        ..conversation
    });
    assert_eq!(&wire, body);
}

// ---------------------------------------------------------------------------------------------
// Named regressions
// ---------------------------------------------------------------------------------------------

#[test]
fn text_beside_a_tool_result_survives_the_store() {
    let body = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": "delete a.txt"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "rm a.txt"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "removed"},
                {"type": "text", "text": "now delete b.txt"}
            ]}
        ]
    });
    anthropic_store_round_trip(&body);
    let conversation = anthropic::decode_request(&body).unwrap();
    let back = through_store(&conversation.messages[2]);
    assert_eq!(back.role, Role::ToolResult);
    assert_eq!(back.plain_text(), "now delete b.txt");
}

#[test]
fn parallel_tool_results_in_one_message_survive_the_store() {
    let body = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": "read both"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "toolu_b", "name": "read", "input": {"path": "b"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "is_error": true,
                 "content": [{"type": "text", "text": "B failed"}], "cache_control": {"type": "ephemeral"}}
            ]}
        ]
    });
    anthropic_store_round_trip(&body);
    let conversation = anthropic::decode_request(&body).unwrap();
    let back = through_store(&conversation.messages[2]);
    let ids: Vec<&str> = back.tool_results().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["toolu_a", "toolu_b"]);
}

/// The stored line reads as a valid pi `toolResult` (the first result) and carries the whole
/// content under `skaldContent`; a pi-shaped result is written as before, without it.
#[test]
fn stored_form_of_a_multi_block_tool_result_message() {
    let body = json!({"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "two"},
        {"type": "text", "text": "go on"}
    ]}]});
    let message = &anthropic::decode_request(&body).unwrap().messages[0];
    let line = skald_core::codec::openclaw::encode_agent_message(message);
    assert_eq!(line["role"], "toolResult");
    assert_eq!(line["toolCallId"], "t1");
    assert_eq!(line["content"], "one");
    assert_eq!(
        line[SKALD_CONTENT_KEY],
        json!([
            {"type": "toolResult", "toolCallId": "t1", "content": "one"},
            {"type": "toolResult", "toolCallId": "t2", "content": "two"},
            {"type": "text", "text": "go on"}
        ])
    );

    let single = json!({"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "one"}
    ]}]});
    let message = &anthropic::decode_request(&single).unwrap().messages[0];
    let line = skald_core::codec::openclaw::encode_agent_message(message);
    assert!(line.get(SKALD_CONTENT_KEY).is_none());
}

/// What OpenClaw hosts get from the engine API stays pi-shaped: one `toolResult` per result, the
/// text after them as a user message, no skald field.
#[test]
fn host_output_stays_pi_shaped_for_multi_block_tool_results() {
    let body = json!({"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "two"},
        {"type": "text", "text": "go on"}
    ]}]});
    let message = through_store(&anthropic::decode_request(&body).unwrap().messages[0]);
    let out = encode_agent_messages(&[message]);
    assert_eq!(
        out,
        vec![
            json!({"role": "toolResult", "toolCallId": "t1", "content": "one"}),
            json!({"role": "toolResult", "toolCallId": "t2", "content": "two"}),
            json!({"role": "user", "content": [{"type": "text", "text": "go on"}]}),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

fn words() -> impl Strategy<Value = String> {
    "[a-z ]{0,12}[a-z]".prop_map(|text| text)
}

fn cache_control() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![Just(None), Just(Some(json!({"type": "ephemeral"})))]
}

fn with_cache(mut block: Value, cache: Option<Value>) -> Value {
    if let (Some(cache), Value::Object(fields)) = (cache, &mut block) {
        fields.insert("cache_control".to_owned(), cache);
    }
    block
}

fn anthropic_text() -> impl Strategy<Value = Value> {
    (words(), cache_control())
        .prop_map(|(text, cache)| with_cache(json!({"type": "text", "text": text}), cache))
}

fn anthropic_image() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
        ),
        Just(
            json!({"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}})
        ),
    ]
}

fn anthropic_opaque() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(
            json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}})
        ),
        Just(
            json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}})
        ),
    ]
}

fn anthropic_result(index: usize) -> impl Strategy<Value = Value> {
    let content = prop_oneof![
        Just(None),
        words().prop_map(|text| Some(Value::from(text))),
        prop::collection::vec(prop_oneof![anthropic_text(), anthropic_image()], 0..3)
            .prop_map(|parts| Some(Value::Array(parts))),
    ];
    let is_error = prop_oneof![Just(None), any::<bool>().prop_map(Some)];
    (content, is_error, cache_control()).prop_map(move |(content, is_error, cache)| {
        let mut block = json!({"type": "tool_result", "tool_use_id": format!("toolu_{index}")});
        if let Some(content) = content {
            block["content"] = content;
        }
        if let Some(flag) = is_error {
            block["is_error"] = Value::Bool(flag);
        }
        with_cache(block, cache)
    })
}

fn anthropic_user() -> impl Strategy<Value = Value> {
    prop_oneof![
        words().prop_map(|text| json!({"role": "user", "content": text})),
        prop::collection::vec(
            prop_oneof![anthropic_text(), anthropic_image(), anthropic_opaque()],
            1..4
        )
        .prop_map(|content| json!({"role": "user", "content": content})),
    ]
}

/// A user message answering calls: one or more results (parallel calls) with text, images and
/// opaque blocks around them.
fn anthropic_results() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(anthropic_result(0), 1..4),
        prop::collection::vec(
            prop_oneof![anthropic_text(), anthropic_image(), anthropic_opaque()],
            0..3,
        ),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(results, others, split)| {
            let mut content: Vec<Value> = results
                .into_iter()
                .enumerate()
                .map(|(index, mut result)| {
                    result["tool_use_id"] = Value::from(format!("toolu_{index}"));
                    result
                })
                .collect();
            // Other blocks mostly follow the results, sometimes sit between them.
            let at = split.index(content.len() + 1).max(1);
            let tail = content.split_off(at);
            content.extend(others);
            content.extend(tail);
            json!({"role": "user", "content": content})
        })
}

fn anthropic_assistant() -> impl Strategy<Value = Value> {
    let block = prop_oneof![
        anthropic_text(),
        (words(), "[A-Za-z0-9+/]{8,16}").prop_map(
            |(thinking, signature)| json!({"type": "thinking", "thinking": thinking, "signature": signature})
        ),
        Just(json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy"})),
        (0usize..4, words(), cache_control()).prop_map(|(index, text, cache)| with_cache(
            json!({"type": "tool_use", "id": format!("toolu_{index}"), "name": "bash", "input": {"command": text}}),
            cache
        )),
    ];
    prop::collection::vec(block, 1..5)
        .prop_map(|content| json!({"role": "assistant", "content": content}))
}

fn anthropic_body() -> impl Strategy<Value = Value> {
    let message = prop_oneof![anthropic_user(), anthropic_assistant(), anthropic_results()];
    let system = prop_oneof![
        Just(None),
        words().prop_map(|text| Some(Value::from(text))),
        prop::collection::vec(anthropic_text(), 1..3).prop_map(|parts| Some(Value::Array(parts))),
    ];
    (prop::collection::vec(message, 1..8), system).prop_map(|(messages, system)| {
        let mut body =
            json!({"model": "claude-opus-4-1", "max_tokens": 2048, "messages": messages});
        if let Some(system) = system {
            body["system"] = system;
        }
        body
    })
}

fn openai_message() -> impl Strategy<Value = Value> {
    let part = prop_oneof![
        words().prop_map(|text| json!({"type": "text", "text": text})),
        Just(
            json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}})
        ),
    ];
    let content = prop_oneof![
        words().prop_map(Value::from),
        prop::collection::vec(part, 1..3).prop_map(Value::Array),
    ];
    let call = (0usize..3, words()).prop_map(|(index, text)| {
        json!({"id": format!("call_{index}"), "type": "function",
               "function": {"name": "shell", "arguments": json!({"cmd": text}).to_string()}})
    });
    prop_oneof![
        content
            .clone()
            .prop_map(|content| json!({"role": "user", "content": content})),
        words().prop_map(|text| json!({"role": "developer", "content": text})),
        (
            prop_oneof![Just(Value::Null), words().prop_map(Value::from)],
            prop::collection::vec(call, 0..3)
        )
            .prop_map(|(content, calls)| {
                let mut message = json!({"role": "assistant", "content": content});
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(calls);
                }
                message
            }),
        (0usize..3, content).prop_map(|(index, content)| {
            json!({"role": "tool", "tool_call_id": format!("call_{index}"), "content": content})
        }),
    ]
}

fn openai_body() -> impl Strategy<Value = Value> {
    prop::collection::vec(openai_message(), 1..8)
        .prop_map(|messages| json!({"model": "gpt-5", "messages": messages, "stream": true}))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn anthropic_messages_survive_the_store(body in anthropic_body()) {
        anthropic_store_round_trip(&body);
    }

    #[test]
    fn openai_messages_survive_the_store(body in openai_body()) {
        openai_store_round_trip(&body);
    }
}
