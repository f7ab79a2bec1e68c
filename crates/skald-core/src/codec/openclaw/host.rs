//! Messages a live OpenClaw host can take: the lossless encoding keeps every message's shape as
//! it arrived (a Claude Code import's tool result with string content, an assistant message
//! skald wrote itself without the provider fields), but OpenClaw's runtime reads `content` of a
//! tool result as an array (`toolMsg.content.filter`) and an assistant message's `api`,
//! `provider`, `model`, `usage` and `stopReason`. [`make_host_valid`] fills in exactly that,
//! for what is handed to a host (the engine API's `assemble`), never for what is stored.

use serde_json::{Map, Value, json};

/// What an assistant message skald gives a host names as its `api`, `provider` and `model` when
/// it carries none: not a provider's, so the host treats it as foreign (thinking it cannot
/// verify becomes text) rather than replaying it to a provider as that provider's own.
pub const HOST_FILL: &str = "skald";

/// Brings one encoded `AgentMessage` to the shape OpenClaw's runtime reads (see the module
/// docs): a tool result's or assistant's string `content` becomes one text block, a missing
/// `content` an empty list, a tool result without `isError` is not an error, and an assistant
/// message without them gets `api`/`provider`/`model` ([`HOST_FILL`]), zero `usage`, and a
/// `stopReason` (`toolUse` when it calls a tool, else `stop`). A missing `timestamp` is 0.
/// Fields already there are left as they are; other roles only get the timestamp.
pub fn make_host_valid(message: &mut Value) {
    let Some(object) = message.as_object_mut() else {
        return;
    };
    object.entry("timestamp").or_insert(json!(0));
    let role = object
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match role {
        "toolResult" => {
            content_as_blocks(object);
            object.entry("isError").or_insert(Value::Bool(false));
        }
        "assistant" => {
            content_as_blocks(object);
            let calls_a_tool = object
                .get("content")
                .and_then(Value::as_array)
                .is_some_and(|blocks| blocks.iter().any(|block| block["type"] == "toolCall"));
            for field in ["api", "provider", "model"] {
                object.entry(field).or_insert(json!(HOST_FILL));
            }
            object.entry("usage").or_insert_with(|| {
                json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})
            });
            object.entry("stopReason").or_insert(json!(if calls_a_tool {
                "toolUse"
            } else {
                "stop"
            }));
        }
        _ => {}
    }
}

/// `content` as a list of blocks: a string becomes one text block, nothing an empty list.
fn content_as_blocks(object: &mut Map<String, Value>) {
    let blocks = match object.remove("content") {
        Some(Value::String(text)) => json!([{"type": "text", "text": text}]),
        Some(Value::Null) | None => json!([]),
        Some(other) => other,
    };
    object.insert("content".to_owned(), blocks);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(mut message: Value) -> Value {
        make_host_valid(&mut message);
        message
    }

    #[test]
    fn a_tool_result_with_string_content_gets_one_text_block() {
        let fixed = valid(
            json!({"role": "toolResult", "toolCallId": "c1", "toolName": "memory_ls",
            "content": "viking://user/"}),
        );
        assert_eq!(
            fixed["content"],
            json!([{"type": "text", "text": "viking://user/"}])
        );
        assert_eq!(fixed["isError"], false);
        assert_eq!(fixed["timestamp"], 0);
    }

    #[test]
    fn an_assistant_without_provider_fields_gets_them_and_a_stop_reason() {
        let fixed = valid(json!({"role": "assistant", "content": [
            {"type": "toolCall", "id": "c1", "name": "memory_ls", "arguments": {}}]}));
        assert_eq!(fixed["api"], HOST_FILL);
        assert_eq!(fixed["provider"], HOST_FILL);
        assert_eq!(fixed["model"], HOST_FILL);
        assert_eq!(fixed["usage"]["totalTokens"], 0);
        assert_eq!(fixed["usage"]["cost"]["total"], 0);
        assert_eq!(fixed["stopReason"], "toolUse");
        let text = valid(json!({"role": "assistant", "content": "done"}));
        assert_eq!(text["stopReason"], "stop");
        assert_eq!(text["content"], json!([{"type": "text", "text": "done"}]));
    }

    #[test]
    fn what_is_already_there_is_kept() {
        let original = json!({"role": "assistant", "content": [{"type": "text", "text": "hi"}],
            "api": "openai-completions", "provider": "openai", "model": "gpt",
            "usage": {"input": 5}, "stopReason": "length", "timestamp": 7});
        assert_eq!(valid(original.clone()), original);
        let user = json!({"role": "user", "content": "hello", "timestamp": 1});
        assert_eq!(
            valid(user.clone()),
            user,
            "a user's string content is valid as it is"
        );
    }
}
