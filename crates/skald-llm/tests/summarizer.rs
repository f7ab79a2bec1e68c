//! `LlmSummarizer`: the request it sends (the model-visible layout is snapshot-tested), what it
//! returns, and how model failures come back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::*;
use serde_json::json;
use skald_core::message::{Message, Role, StopReason, Usage};
use skald_llm::{
    Anthropic, ChatModel, ChatRequest, ChatResponse, FixedJitter, LlmError, LlmSummarizer,
    ProviderKind, Summarizer, SummaryRequest,
};
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A model that answers from a script and records what it was asked.
struct ScriptedModel {
    replies: Mutex<VecDeque<Result<ChatResponse, LlmError>>>,
    seen: Mutex<Vec<ChatRequest>>,
}

impl ScriptedModel {
    fn new(replies: Vec<Result<ChatResponse, LlmError>>) -> Arc<ScriptedModel> {
        Arc::new(ScriptedModel {
            replies: Mutex::new(replies.into()),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn requests(&self) -> Vec<ChatRequest> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn model_name(&self) -> &str {
        "scripted-model"
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        _cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        self.seen.lock().unwrap().push(request.clone());
        self.replies
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Err(LlmError::InvalidResponse {
                message: "script exhausted".to_owned(),
            }))
    }
}

fn reply(text: &str) -> Result<ChatResponse, LlmError> {
    Ok(ChatResponse {
        message: Message::text(Role::Assistant, text),
        usage: Usage::default(),
        stop_reason: Some(StopReason::EndTurn),
        model: "scripted-model".to_owned(),
    })
}

fn summary_request() -> SummaryRequest {
    SummaryRequest {
        instructions: "Summarise the conversation with the five required sections.".to_owned(),
        transcript: "[user] Fix the failing test in src/lib.rs.\n[assistant] Reading src/lib.rs.\n[tool_result read_file] pub fn add(a: i32, b: i32) -> i32 { a - b }".to_owned(),
        messages: conversation(),
        previous_summary: Some("## Decisions\n- Use cargo nextest.".to_owned()),
        identifiers: vec!["src/lib.rs".to_owned()],
        feedback: Some("missing sections: ## Open TODOs; missing identifiers: src/lib.rs".to_owned()),
        max_output_tokens: 2048,
        latest_user_ask: Some("Fix the failing test in src/lib.rs.".to_owned()),
    }
}

/// The request as the model reads it.
fn render(request: &ChatRequest) -> String {
    let mut out = format!(
        "max_output_tokens: {:?}\ntemperature: {:?}\ntools: {}\n",
        request.max_output_tokens,
        request.temperature,
        request.tools.len()
    );
    if let Some(system) = &request.system {
        out.push_str(&format!("\n=== system ===\n{system}\n"));
    }
    for message in &request.messages {
        out.push_str(&format!(
            "\n=== {} ===\n{}\n",
            message.role.name(),
            message.plain_text()
        ));
    }
    out
}

#[tokio::test]
async fn the_summary_request_layout() {
    let model = ScriptedModel::new(vec![reply("## Decisions\n- done")]);
    let summarizer = LlmSummarizer::new(model.clone());
    summarizer
        .summarize(&summary_request(), &CancellationToken::new())
        .await
        .unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    insta::assert_snapshot!(render(&requests[0]));
}

#[tokio::test]
async fn a_first_attempt_has_only_the_conversation_block() {
    let model = ScriptedModel::new(vec![reply("summary")]);
    let request = SummaryRequest {
        previous_summary: None,
        feedback: None,
        ..summary_request()
    };
    LlmSummarizer::new(model.clone())
        .with_temperature(0.0)
        .summarize(&request, &CancellationToken::new())
        .await
        .unwrap();
    insta::assert_snapshot!(render(&model.requests()[0]));
}

#[tokio::test]
async fn the_summary_is_the_answer_text_trimmed() {
    let model = ScriptedModel::new(vec![reply("\n## Decisions\n- keep going\n\n")]);
    let summarizer = LlmSummarizer::new(model);
    assert_eq!(summarizer.name(), "llm:scripted-model");
    let summary = summarizer
        .summarize(&summary_request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(summary, "## Decisions\n- keep going");
}

#[tokio::test]
async fn an_empty_answer_is_an_error() {
    let model = ScriptedModel::new(vec![reply("  \n")]);
    let error = LlmSummarizer::new(model)
        .summarize(&summary_request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::InvalidResponse { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_overflow_reported_in_the_answer_is_an_overflow() {
    let mut message = Message::new(Role::Assistant, Vec::new());
    message.meta.stop_reason = Some(StopReason::Error);
    message.extra.insert(
        "errorMessage".to_owned(),
        json!("prompt is too long: 150000 tokens > 128000 maximum"),
    );
    let model = ScriptedModel::new(vec![Ok(ChatResponse {
        stop_reason: Some(StopReason::Error),
        message,
        usage: Usage::default(),
        model: "scripted-model".to_owned(),
    })]);
    let error = LlmSummarizer::new(model)
        .summarize(&summary_request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            LlmError::ContextOverflow {
                requested_tokens: Some(150_000),
                limit_tokens: Some(128_000),
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn model_errors_come_back_unchanged() {
    let model = ScriptedModel::new(vec![Err(LlmError::Aborted)]);
    let error = LlmSummarizer::new(model)
        .summarize(&summary_request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(error, LlmError::Aborted);
}

#[tokio::test]
async fn summarizing_over_a_real_client_sends_the_instructions_as_system() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": "## Decisions\n- fixed"}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5}
        })))
        .mount(&server)
        .await;
    let client = Anthropic::with_api_key(config(ProviderKind::Anthropic, &server), None)
        .unwrap()
        .with_retry_policy(fast_retry(1))
        .with_jitter(Arc::new(FixedJitter(0.5)));
    let summarizer: Arc<dyn Summarizer> = Arc::new(LlmSummarizer::new(Arc::new(client)));
    let summary = summarizer
        .summarize(&summary_request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(summary, "## Decisions\n- fixed");

    let body = request_body(&server, 0).await;
    assert_eq!(
        body["system"],
        "Summarise the conversation with the five required sections."
    );
    assert_eq!(body["max_tokens"], 2048);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1);
    let text = messages[0]["content"].as_str().unwrap();
    assert!(text.starts_with("<previous-summary>\n"), "{text}");
    assert!(
        text.contains("<conversation>\n[user] Fix the failing test"),
        "{text}"
    );
    assert!(!text.contains(SECRET_DETAILS));
}

#[tokio::test]
async fn extractive_summarizer_fills_the_five_sections_with_no_model() {
    let user = Message::text(
        Role::User,
        "Always run the tests. Fix the crash in /srv/app/main.rs",
    );
    let request = SummaryRequest {
        messages: vec![user],
        identifiers: vec!["/srv/app/main.rs".to_owned()],
        max_output_tokens: 1024,
        ..SummaryRequest::default()
    };
    let summarizer = skald_llm::ExtractiveSummarizer::default();
    assert_eq!(summarizer.name(), "extractive");
    let summary = summarizer
        .summarize(&request, &CancellationToken::new())
        .await
        .unwrap();
    assert!(
        skald_core::summary::missing_sections(&summary).is_empty(),
        "{summary}"
    );
    assert!(summary.contains("/srv/app/main.rs"));
    assert!(summary.chars().count() <= 4096);
    // Deterministic: the same request gives the same bytes.
    let again = summarizer
        .summarize(&request, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(summary, again);
}

#[tokio::test]
async fn extractive_summarizer_honours_a_cancelled_token() {
    let cancel = CancellationToken::new();
    cancel.cancel();
    let result = skald_llm::ExtractiveSummarizer::default()
        .summarize(&SummaryRequest::default(), &cancel)
        .await;
    assert!(matches!(result, Err(LlmError::Aborted)));
}
