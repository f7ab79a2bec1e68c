//! The provider-neutral chat interface: [`ChatModel`] (one request in, one assistant message
//! out, whole), its request and response types, and the rule every
//! implementation follows: tool results' `details` never leave the process.

use async_trait::async_trait;
use serde_json::Value;
use skald_core::message::{Block, Message, StopReason, Usage};
use tokio_util::sync::CancellationToken;

use crate::error::LlmError;
use crate::overflow;

/// One model call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    /// System prompt, sent before `messages` (Anthropic's top-level `system`).
    pub system: Option<String>,
    /// The conversation, in skald's neutral model (any codec's output, or built by hand).
    /// `details` of tool results are stripped before sending.
    pub messages: Vec<Message>,
    /// Tools on offer, as OpenAI function specs (`{"type":"function","function":{"name",
    /// "description","parameters"}}`; a bare `{"name","description","parameters"}` is accepted
    /// too). The Anthropic client converts them to `{name, description, input_schema}`.
    pub tools: Vec<Value>,
    /// Output limit; the provider configuration's `max_output_tokens` when `None`.
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature; the provider's default when `None`. Anthropic takes 0 to 1, so
    /// its client clamps the value into that range.
    pub temperature: Option<f32>,
}

impl ChatRequest {
    /// A request with a system prompt and one user message.
    pub fn new(system: Option<String>, messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            system,
            messages,
            ..ChatRequest::default()
        }
    }
}

/// A complete answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The assistant message, with `meta` (id, model, stop reason, usage) filled in.
    pub message: Message,
    /// Tokens the provider reported (`input` excludes cached tokens, as in
    /// [`skald_core::message::Usage`]); zero when it reported none.
    pub usage: Usage,
    /// Why the model stopped (end of turn, output limit, tool use…), when the provider said.
    pub stop_reason: Option<StopReason>,
    /// The model that answered, as the provider names it (else the configured model).
    pub model: String,
}

impl ChatResponse {
    /// The overflow this response reports, if it is an assistant message that ended with stop
    /// reason `error` and an overflow message (seed 003 §4's "assistantError"), see
    /// [`overflow::assistant_error_overflow`].
    pub fn overflow_error(&self) -> Option<LlmError> {
        overflow::assistant_error_overflow(&self.message)
    }

    /// The answer's text blocks, joined.
    pub fn text(&self) -> String {
        self.message.plain_text()
    }
}

/// A chat model behind some provider API. Object-safe: the engine holds an
/// `Arc<dyn ChatModel>`.
///
/// [`ChatModel::complete`] retries transient failures (see [`crate::retry`]) before returning.
/// Cancelling `cancel` aborts the request in flight or a backoff sleep with
/// [`LlmError::Aborted`].
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// The configured model name.
    fn model_name(&self) -> &str;

    /// The model's context window, when configured.
    fn context_window_tokens(&self) -> Option<u64> {
        None
    }

    /// Sends `request` and waits for the whole answer.
    async fn complete(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError>;
}

/// `messages` with every tool result's `details` removed: host-only data never reaches a
/// model (nested results inside results included).
pub fn strip_details(messages: &[Message]) -> Vec<Message> {
    messages
        .iter()
        .map(|message| Message {
            content: strip_blocks(&message.content).into(),
            ..message.clone()
        })
        .collect()
}

fn strip_blocks(blocks: &[Block]) -> Vec<Block> {
    blocks
        .iter()
        .map(|block| match block.as_tool_result() {
            Some(result) => {
                let mut result = result.clone();
                result.details = None;
                result.content = strip_blocks(&result.content).into();
                Block::ToolResult(result)
            }
            None => block.clone(),
        })
        .collect()
}

/// A tool as both APIs need it, read from an OpenAI function spec (or a bare one).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FunctionSpec {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Option<Value>,
}

/// Reads `tools[index]`: `{"type":"function","function":{…}}`, a bare `{name, description,
/// parameters}`, or an Anthropic-style `{name, description, input_schema}`.
pub(crate) fn function_spec(tool: &Value, index: usize) -> Result<FunctionSpec, LlmError> {
    let invalid = |what: &str| LlmError::InvalidRequest {
        message: format!("tools[{index}]: {what}"),
    };
    let object = tool
        .as_object()
        .ok_or_else(|| invalid("expected an object (an OpenAI function spec)"))?;
    let function = match object.get("function") {
        Some(Value::Object(function)) => function,
        Some(_) => return Err(invalid("`function` must be an object")),
        None => object,
    };
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|name| !name.trim().is_empty())
        .ok_or_else(|| invalid("missing the function's `name`"))?;
    let parameters = function
        .get("parameters")
        .or_else(|| function.get("input_schema"))
        .filter(|schema| !schema.is_null())
        .cloned();
    if let Some(schema) = &parameters {
        if !schema.is_object() {
            return Err(invalid("`parameters` must be a JSON Schema object"));
        }
    }
    Ok(FunctionSpec {
        name: name.to_owned(),
        description: function
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned),
        parameters,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;
    use skald_core::message::{ContentForm, Extra, Role, ToolResult};

    #[test]
    fn details_are_stripped_everywhere() {
        let result = |details| {
            Block::ToolResult(ToolResult {
                call_id: "c1".to_owned(),
                tool_name: None,
                content: vec![Block::text("out")].into(),
                content_form: ContentForm::Blocks,
                is_error: None,
                details,
                extra: Extra::new(),
            })
        };
        let nested = {
            let Block::ToolResult(mut outer) = result(Some(json!({"secret": 1}).into())) else {
                unreachable!()
            };
            outer
                .content
                .push(result(Some(json!({"secret": 2}).into())));
            Block::ToolResult(outer)
        };
        let messages = vec![Message::new(Role::ToolResult, vec![nested])];
        let stripped = strip_details(&messages);
        let Block::ToolResult(outer) = &stripped[0].content[0] else {
            panic!("expected a result")
        };
        assert_eq!(outer.details, None);
        let Block::ToolResult(inner) = &outer.content[1] else {
            panic!("expected a nested result")
        };
        assert_eq!(inner.details, None);
    }

    #[test]
    fn function_specs_are_read_in_three_shapes() {
        let wrapped = json!({"type":"function","function":{"name":"ls","description":"list","parameters":{"type":"object"}}});
        let bare = json!({"name":"ls","description":"list","parameters":{"type":"object"}});
        let anthropic = json!({"name":"ls","description":"list","input_schema":{"type":"object"}});
        let expected = FunctionSpec {
            name: "ls".to_owned(),
            description: Some("list".to_owned()),
            parameters: Some(json!({"type":"object"})),
        };
        assert_eq!(function_spec(&wrapped, 0).unwrap(), expected);
        assert_eq!(function_spec(&bare, 0).unwrap(), expected);
        assert_eq!(function_spec(&anthropic, 0).unwrap(), expected);
    }

    #[test]
    fn a_tool_without_a_name_is_rejected_with_its_index() {
        let error = function_spec(&json!({"type":"function","function":{}}), 3).unwrap_err();
        assert_eq!(
            error,
            LlmError::InvalidRequest {
                message: "tools[3]: missing the function's `name`".to_owned()
            }
        );
        assert!(function_spec(&json!("ls"), 0).is_err());
        assert!(function_spec(&json!({"name":"ls","parameters":"x"}), 0).is_err());
    }
}
