//! skald's own tools inside a proxied answer: which calls are skald's (the tools this call
//! offered, never a tool the client defined itself), running them (`fetch_original_data`
//! against the tenant's refs, the memory tools against its memories), the hidden messages that
//! record them in the session, and the client's view of a non-streamed answer with them taken
//! out.

use serde_json::Value;
use skald_core::ids::Tenant;
use skald_core::memory::usage::ToolCallReport;
use skald_core::message::{
    Block, ContentForm, Extra, Message, MessageMeta, Role, StopReason, ToolCall, ToolResult,
};
use skald_engine::memory::MemoryIdentity;
use std::collections::HashSet;

use super::upstream::Api;
use crate::state::AppState;

/// The names of the skald tools one call offered.
#[derive(Debug, Clone, Default)]
pub struct SkaldTools {
    names: HashSet<String>,
}

impl SkaldTools {
    pub fn new(names: impl IntoIterator<Item = String>) -> SkaldTools {
        SkaldTools {
            names: names.into_iter().collect(),
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }
}

/// One skald tool call, run.
#[derive(Debug, Clone)]
pub struct Executed {
    pub result: Message,
    pub report: ToolCallReport,
}

/// Runs one skald tool call for the request's tenant (the engine's [`Engine::run_tool`], the one
/// executor of skald's tools).
///
/// [`Engine::run_tool`]: skald_engine::Engine::run_tool
pub async fn execute(
    state: &AppState,
    tenant: &Tenant,
    identity: Option<&MemoryIdentity>,
    call: &ToolCall,
) -> Executed {
    let run = state
        .engine
        .run_tool(tenant, identity, &call.name, &call.arguments)
        .await;
    state.metrics.tool_interceptions.inc();
    let (text, is_error, report) = (run.text, run.is_error, run.report);
    let result = Message::new(
        Role::ToolResult,
        vec![Block::ToolResult(ToolResult {
            call_id: call.id.clone(),
            tool_name: Some(call.name.clone()),
            content: vec![Block::text(text)],
            content_form: ContentForm::Text,
            is_error: is_error.then_some(true),
            details: None,
            extra: Extra::new(),
        })],
    );
    Executed { result, report }
}

/// An assistant message for the session holding `calls` after what the answer said (its text,
/// thinking and opaque blocks such as reasoning items): built from the typed parts only, so no field of the
/// provider's response envelope ends up in a later request.
pub fn hidden_assistant(answer: Option<&Message>, calls: &[ToolCall]) -> Message {
    let mut content: Vec<Block> = Vec::new();
    if let Some(answer) = answer {
        for block in &answer.content {
            match block {
                Block::Text(text) if !text.text.is_empty() => {
                    content.push(Block::text(text.text.clone()))
                }
                Block::Thinking(thinking) => content.push(Block::Thinking(thinking.clone())),
                // Redacted thinking, a Responses reasoning item (its encrypted content is what
                // lets a stateless client's reasoning model go on), a server tool's block.
                Block::Opaque(value) => content.push(Block::Opaque(value.clone())),
                Block::Text(_) | Block::Image(_) | Block::ToolCall(_) | Block::ToolResult(_) => {}
            }
        }
    }
    for call in calls {
        content.push(Block::ToolCall(ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            arguments_text: call.arguments_text.clone(),
            extra: Extra::new(),
        }));
    }
    Message {
        meta: MessageMeta {
            stop_reason: Some(StopReason::ToolUse),
            ..MessageMeta::default()
        },
        ..Message::new(Role::Assistant, content)
    }
}

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
