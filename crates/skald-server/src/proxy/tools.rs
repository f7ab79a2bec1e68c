//! skald's own tools inside a proxied answer, in the client's wire API: the client's view of a
//! non-streamed answer with skald's calls taken out. Which calls are skald's, running them and
//! recording them is the engine's turn loop (`skald_engine::TurnLoop`).

use serde_json::Value;
use skald_engine::SkaldTools;

use super::upstream::Api;

/// The client's view of a non-streamed answer: skald's tool calls taken out, and the stop reason
/// no longer asking for tools when none of the client's are left.
pub fn strip_skald_calls(api: Api, response: &mut Value, skald: &SkaldTools) {
    match api {
        Api::OpenAi => {
            let Some(choices) = response.get_mut("choices").and_then(Value::as_array_mut) else {
                return;
            };
            for choice in choices {
                let Some(message) = choice.get_mut("message").and_then(Value::as_object_mut) else {
                    continue;
                };
                let mut left = None;
                if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
                    calls.retain(|call| {
                        let name = call
                            .get("function")
                            .and_then(|function| function.get("name"))
                            .and_then(Value::as_str);
                        !name.is_some_and(|name| skald.contains(name))
                    });
                    left = Some(calls.len());
                }
                if left == Some(0) {
                    message.remove("tool_calls");
                    if let Some(reason) = choice.get_mut("finish_reason") {
                        if reason == "tool_calls" {
                            *reason = Value::String("stop".to_owned());
                        }
                    }
                }
            }
        }
        Api::Responses => {
            if let Some(Value::Array(items)) = response.get_mut("output") {
                items.retain(|item| {
                    let is_call = item.get("type").and_then(Value::as_str) == Some("function_call");
                    let name = item.get("name").and_then(Value::as_str);
                    !(is_call && name.is_some_and(|name| skald.contains(name)))
                });
            }
        }
        Api::Anthropic => {
            let mut left = 0;
            if let Some(Value::Array(blocks)) = response.get_mut("content") {
                blocks.retain(|block| {
                    let is_call = block.get("type").and_then(Value::as_str) == Some("tool_use");
                    let name = block.get("name").and_then(Value::as_str);
                    !(is_call && name.is_some_and(|name| skald.contains(name)))
                });
                left = blocks
                    .iter()
                    .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_use"))
                    .count();
            }
            if left == 0 {
                if let Some(reason) = response.get_mut("stop_reason") {
                    if reason == "tool_use" {
                        *reason = Value::String("end_turn".to_owned());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    fn skald() -> SkaldTools {
        SkaldTools::new(["fetch_original_data".to_owned()])
    }

    #[test]
    fn openai_answers_lose_skald_calls_and_keep_the_clients() {
        let mut mixed = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "fetch_original_data", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}}]});
        strip_skald_calls(Api::OpenAi, &mut mixed, &skald());
        let calls = mixed["choices"][0]["message"]["tool_calls"]
            .as_array()
            .unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0]["id"], "b");
        assert_eq!(mixed["choices"][0]["finish_reason"], "tool_calls");

        let mut only = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "x", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "fetch_original_data", "arguments": "{}"}}]}}]});
        strip_skald_calls(Api::OpenAi, &mut only, &skald());
        assert!(only["choices"][0]["message"].get("tool_calls").is_none());
        assert_eq!(only["choices"][0]["finish_reason"], "stop");
    }

    #[test]
    fn anthropic_answers_lose_skald_blocks() {
        let mut answer = json!({"type": "message", "stop_reason": "tool_use", "content": [
            {"type": "text", "text": "checking"},
            {"type": "tool_use", "id": "a", "name": "fetch_original_data", "input": {}}]});
        strip_skald_calls(Api::Anthropic, &mut answer, &skald());
        assert_eq!(answer["content"].as_array().unwrap().len(), 1);
        assert_eq!(answer["stop_reason"], "end_turn");
    }
}
