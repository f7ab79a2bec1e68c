//! Every overflow form of reference/openclaw.md §4 as a named case, with a body shaped like the
//! one the provider sends; the rate-limit, billing and look-alike negatives; and the token
//! counts each form states.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use skald_core::message::{Message, Role, StopReason};
use skald_llm::overflow::{
    ErrorClass, assistant_error_overflow, assistant_error_text, classify_error,
    is_context_overflow, is_likely_context_overflow, overflow_pattern, parse_overflow_counts,
};
use skald_llm::{ChatResponse, LlmError};

/// `body` matches the pattern `name` and classifies as an overflow under `status`.
fn assert_overflow(name: &str, status: Option<u16>, body: &str) {
    assert_eq!(overflow_pattern(body), Some(name), "pattern for {body:?}");
    assert_eq!(
        classify_error(status, body),
        ErrorClass::ContextOverflow,
        "class for {body:?}"
    );
}

macro_rules! overflow_case {
    ($test:ident, $status:expr, $body:expr) => {
        #[test]
        fn $test() {
            assert_overflow(stringify!($test), $status, $body);
        }
    };
}

// --- OpenClaw's `isContextOverflowError` substrings --------------------------------------------

overflow_case!(
    request_too_large,
    Some(413),
    r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}"#
);
overflow_case!(
    invalid_argument_maximum_number_of_tokens,
    Some(400),
    r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#
);
overflow_case!(
    request_exceeds_maximum_size,
    Some(400),
    "Request exceeds the maximum size of 32 MB for this endpoint"
);
overflow_case!(
    context_length_exceeded,
    Some(400),
    r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#
);

#[test]
fn context_length_exceeded_spelled_in_words() {
    assert_overflow(
        "context_length_exceeded",
        Some(400),
        "Context length exceeded: the conversation is longer than this deployment accepts",
    );
}

overflow_case!(
    maximum_context_length,
    Some(400),
    r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#
);
overflow_case!(
    prompt_is_too_long,
    Some(400),
    r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#
);
overflow_case!(
    prompt_too_long,
    Some(400),
    "400 Bad Request: prompt too long"
);
overflow_case!(
    exceeds_model_context_window,
    Some(400),
    r#"{"type":"error","error":{"type":"invalid_request_error","message":"Request size exceeds model context window"}}"#
);
overflow_case!(
    model_token_limit,
    Some(400),
    "This request would exceed the model token limit (8192)."
);
overflow_case!(
    input_exceeds_maximum_number_of_tokens,
    Some(400),
    "Input exceeds the maximum number of tokens allowed for this model."
);
overflow_case!(
    context_ran_out_of_room,
    None,
    "Codex ran out of room in the model's context window. Start a new thread or clear earlier history before retrying."
);
overflow_case!(
    request_size_exceeds_context,
    Some(400),
    "The request size exceeds the context length of this model (8192)."
);
overflow_case!(
    context_overflow_prefix,
    None,
    "Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh session, or use a larger-context model."
);
overflow_case!(
    exceed_context_limit,
    Some(400),
    r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 156321 + 48384 > 200000, decrease input length or `max_tokens` and try again"}}"#
);
overflow_case!(
    exceeds_models_maximum_context,
    Some(400),
    "The prompt exceeds the model's maximum context size."
);
overflow_case!(
    max_tokens_exceed_context,
    Some(400),
    "max_tokens (4096) plus the prompt tokens exceed the context available to this model"
);
overflow_case!(
    input_length_exceed_context,
    Some(400),
    r#"{"error":{"message":"the input length exceeds the context length","type":"api_error","param":null,"code":null}}"#
);
overflow_case!(
    status_413_too_large,
    Some(413),
    "<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>"
);
overflow_case!(
    context_window_exceeded,
    Some(400),
    r#"{"code":"context_window_exceeded","error":"The prompt is larger than the window this model can read."}"#
);

// --- The Chinese proxy messages ---------------------------------------------------------------

overflow_case!(
    zh_context_too_long,
    Some(400),
    r#"{"error":{"message":"上下文过长,请精简后重试","type":"invalid_request_error"}}"#
);

#[test]
fn zh_context_too_long_spelled_too_many() {
    assert_overflow("zh_context_too_long", Some(400), "请求失败:上下文过多");
}

overflow_case!(
    zh_context_exceeded,
    Some(400),
    r#"{"error":{"message":"请求失败:上下文超出模型限制","code":"400"}}"#
);
overflow_case!(
    zh_context_length_exceeded,
    Some(400),
    "错误:上下文长度超过限制,请减少输入"
);
overflow_case!(
    zh_exceeds_maximum_context,
    Some(500),
    r#"{"error":{"message":"输入超出最大上下文长度","type":"server_error"}}"#
);
overflow_case!(
    zh_please_compress_context,
    Some(400),
    "会话内容过长,请压缩上下文后重试"
);

// --- Provider forms (OpenClaw's provider-error-patterns.ts and newer cases) --------------------

overflow_case!(
    anthropic_long_context_extra_usage,
    Some(429),
    r#"{"type":"error","error":{"type":"rate_limit_error","message":"Extra usage is required for long context requests."}}"#
);
overflow_case!(
    llama_cpp_exceeds_available_context_size,
    Some(400),
    r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#
);
overflow_case!(
    llama_cpp_n_keep_n_ctx,
    Some(500),
    r#"{"error":{"code":500,"message":"n_keep (5000) >= n_ctx (4096)","type":"server_error"}}"#
);
overflow_case!(
    bedrock_validation_input_too_long,
    Some(400),
    "ValidationException: Input is too long for requested model."
);
overflow_case!(
    bedrock_input_too_long_for_requested_model,
    Some(400),
    r#"{"message":"Input is too long for requested model."}"#
);
overflow_case!(
    bedrock_validation_exceeds_max_tokens,
    Some(400),
    "An error occurred (ValidationException) when calling the InvokeModel operation: The input exceeds the maximum number of input tokens"
);
overflow_case!(
    bedrock_model_stream_input_too_long,
    None,
    "ModelStreamErrorException: The model received too many input tokens"
);
overflow_case!(
    azure_content_filter_input_too_long,
    Some(400),
    r#"{"error":{"code":"content_filter","message":"The input exceeds the allowed length for this deployment"}}"#
);
overflow_case!(
    ollama_context,
    Some(500),
    r#"{"error":"ollama runner: prompt is longer than the context length of the loaded model"}"#
);
overflow_case!(
    truncating_input_too_long,
    Some(400),
    "truncating input prompt: input is too long (limit=2048 prompt=4096)"
);
overflow_case!(
    mistral_input_too_long,
    Some(400),
    "Mistral API error: input is too long for this deployment"
);
overflow_case!(
    total_tokens_exceed_maximum,
    Some(400),
    "Bad request: total tokens 140000 exceeds the model's maximum of 128000"
);
overflow_case!(
    deepseek_input_too_long,
    Some(400),
    "DeepSeek API error: input too long, please shorten it"
);
overflow_case!(
    vertex_invalid_argument_exceeds_maximum,
    Some(400),
    "400 INVALID_ARGUMENT: The input content is too large for this model version."
);
overflow_case!(
    input_too_long_for_model,
    Some(400),
    "Input is too long for the model."
);

#[test]
fn every_named_pattern_has_a_case_here() {
    // Reading this file's own source keeps the list and the cases from drifting apart.
    let source = include_str!("overflow_patterns.rs");
    let library = include_str!("../src/overflow.rs");
    let names: Vec<&str> = library
        .lines()
        .filter_map(|line| line.trim().strip_prefix("name: \""))
        .filter_map(|rest| rest.strip_suffix("\","))
        .collect();
    assert!(names.len() >= 38, "found only {} names", names.len());
    for name in names {
        let has_case = source.contains(&format!("assert_overflow(\"{name}\""))
            || source.contains(&format!("overflow_case!({name},"))
            || source.contains(&format!("overflow_case!(\n    {name},\n"));
        assert!(has_case, "no test case for pattern {name}");
    }
}

// --- Broad heuristic (isLikelyContextOverflowError) --------------------------------------------

#[test]
fn likely_overflow_positives() {
    for body in [
        "Model context window is 128k tokens, you requested 256k tokens",
        "Context window exceeded: requested 12000 tokens",
        "Prompt too large for this model",
        // Cohere words it without any of the explicit forms.
        "too many tokens: total number of tokens in the prompt cannot exceed 4081 - received 4500. Try using a shorter prompt, or enabling prompt truncating.",
    ] {
        assert!(is_likely_context_overflow(body), "{body}");
        assert_eq!(
            classify_error(Some(400), body),
            ErrorClass::ContextOverflow,
            "{body}"
        );
        assert_eq!(
            classify_error(None, body),
            ErrorClass::ContextOverflow,
            "{body}"
        );
    }
}

#[test]
fn the_broad_heuristic_is_not_applied_to_server_errors() {
    let body = "Prompt too large for this model";
    assert_eq!(classify_error(Some(503), body), ErrorClass::Server);
}

// --- Negatives ---------------------------------------------------------------------------------

#[test]
fn rate_limit_exceeded_is_not_an_overflow() {
    assert!(!is_context_overflow("rate limit exceeded"));
    assert!(!is_likely_context_overflow("rate limit exceeded"));
    assert_eq!(
        classify_error(Some(429), "rate limit exceeded"),
        ErrorClass::RateLimited
    );
    assert_eq!(
        classify_error(None, "rate limit exceeded"),
        ErrorClass::RateLimited
    );
}

#[test]
fn groq_413_tokens_per_minute_is_a_rate_limit() {
    let body = r#"{"error":{"message":"Request too large for model `llama-3.3-70b-versatile` in organization `org_01` service tier `on_demand` on tokens per minute (TPM): Limit 12000, Requested 15000, please reduce your message size and try again.","type":"tokens","code":"rate_limit_exceeded"}}"#;
    assert!(!is_context_overflow(body));
    assert_eq!(classify_error(Some(413), body), ErrorClass::RateLimited);
}

#[test]
fn openai_tpm_rate_limit_is_a_rate_limit() {
    let body = r#"{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 25000, Requested 8000. Please try again in 2.5s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#;
    assert!(!is_likely_context_overflow(body));
    assert_eq!(classify_error(Some(429), body), ErrorClass::RateLimited);
}

#[test]
fn tokens_per_day_rate_limit_is_a_rate_limit() {
    let body = "Rate limit reached for model in organization org-abc on tokens per day (TPD): Limit 100000, Used 99000, Requested 5000.";
    assert!(!is_likely_context_overflow(body));
    assert_eq!(classify_error(Some(429), body), ErrorClass::RateLimited);
}

#[test]
fn too_many_requests_is_a_rate_limit() {
    assert!(!is_likely_context_overflow("429 Too Many Requests"));
    assert_eq!(
        classify_error(None, "429 Too Many Requests"),
        ErrorClass::RateLimited
    );
}

#[test]
fn exceeded_quota_is_billing_not_overflow_nor_rate_limit() {
    let body = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
    assert!(!is_likely_context_overflow(body));
    assert_eq!(classify_error(Some(429), body), ErrorClass::Billing);
}

#[test]
fn low_credit_balance_is_billing() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}"#;
    assert_eq!(classify_error(Some(400), body), ErrorClass::Billing);
    assert_eq!(
        classify_error(Some(402), r#"{"error":{"message":"Insufficient Balance"}}"#),
        ErrorClass::Billing
    );
}

#[test]
fn a_per_minute_quota_is_a_rate_limit() {
    let body = "Quota exceeded for quota metric 'Generate Content API requests per minute'";
    assert_eq!(classify_error(Some(429), body), ErrorClass::RateLimited);
}

#[test]
fn request_size_over_an_upload_limit_is_not_an_overflow() {
    let body = "request size exceeds upload limit";
    assert!(!is_context_overflow(body));
    assert!(!is_likely_context_overflow(body));
    assert_eq!(classify_error(Some(400), body), ErrorClass::BadRequest);
}

#[test]
fn talking_about_an_overflow_bug_is_not_an_overflow() {
    assert!(!is_context_overflow(
        "Let's investigate the context overflow bug"
    ));
}

#[test]
fn incidental_context_wording_is_not_an_overflow() {
    let body = "For context, here's the error message";
    assert!(!is_likely_context_overflow(body));
    assert_eq!(classify_error(Some(400), body), ErrorClass::BadRequest);
}

#[test]
fn a_context_window_that_is_too_small_is_not_an_overflow() {
    let body = "context window too small (minimum is 16000 tokens)";
    assert!(!is_likely_context_overflow(body));
    assert_eq!(classify_error(Some(400), body), ErrorClass::BadRequest);
}

#[test]
fn reasoning_constraints_are_not_overflows() {
    let body = "Reasoning is mandatory for this endpoint and cannot be disabled; max_tokens must exceed the reasoning context";
    assert!(!is_context_overflow(body));
    assert!(!is_likely_context_overflow(body));
    assert_eq!(classify_error(Some(400), body), ErrorClass::BadRequest);
}

#[test]
fn overloaded_and_auth_errors_keep_their_class() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    assert_eq!(classify_error(Some(529), overloaded), ErrorClass::Server);
    assert_eq!(classify_error(None, overloaded), ErrorClass::Server);
    let auth =
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
    assert_eq!(classify_error(Some(401), auth), ErrorClass::Auth);
    assert_eq!(classify_error(None, auth), ErrorClass::Auth);
    assert_eq!(classify_error(Some(403), "Forbidden"), ErrorClass::Auth);
    assert_eq!(
        classify_error(Some(408), "Request Timeout"),
        ErrorClass::Timeout
    );
    assert_eq!(
        classify_error(Some(404), "model not found"),
        ErrorClass::BadRequest
    );
}

#[test]
fn a_bare_413_is_an_overflow() {
    assert_eq!(classify_error(Some(413), ""), ErrorClass::ContextOverflow);
}

#[test]
fn an_overflow_wrapped_in_a_server_error_is_an_overflow() {
    let body = r#"{"error":{"message":"upstream error: prompt is too long: 250000 tokens > 200000 maximum","type":"server_error"}}"#;
    assert_eq!(classify_error(Some(500), body), ErrorClass::ContextOverflow);
}

// --- Token counts ------------------------------------------------------------------------------

#[test]
fn counts_anthropic_prompt_is_too_long() {
    assert_eq!(
        parse_overflow_counts("prompt is too long: 208310 tokens > 200000 maximum"),
        (Some(208_310), Some(200_000))
    );
}

#[test]
fn counts_openai_resulted_in() {
    assert_eq!(
        parse_overflow_counts(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages."
        ),
        (Some(130_532), Some(128_000))
    );
}

#[test]
fn counts_vllm_and_deepseek_you_requested() {
    assert_eq!(
        parse_overflow_counts(
            "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens (70000 in the messages, 0 in the completion)."
        ),
        (Some(70_000), Some(65_536))
    );
}

#[test]
fn counts_token_limit_requested() {
    assert_eq!(
        parse_overflow_counts("token limit: 200000 (requested: 250000)"),
        (Some(250_000), Some(200_000))
    );
}

#[test]
fn counts_input_length_and_max_tokens_add_up() {
    assert_eq!(
        parse_overflow_counts(
            "input length and `max_tokens` exceed context limit: 156321 + 48384 > 200000, decrease input length or `max_tokens` and try again"
        ),
        (Some(204_705), Some(200_000))
    );
}

#[test]
fn counts_with_k_suffixes() {
    assert_eq!(
        parse_overflow_counts("Model context window is 128k tokens, you requested 256k tokens"),
        (Some(256_000), Some(128_000))
    );
}

#[test]
fn counts_requested_only() {
    assert_eq!(
        parse_overflow_counts("Context window exceeded: requested 12000 tokens"),
        (Some(12_000), None)
    );
}

#[test]
fn counts_gemini_input_token_count() {
    assert_eq!(
        parse_overflow_counts(
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
        ),
        (Some(1_200_000), Some(1_048_576))
    );
}

#[test]
fn counts_mistral_prompt_contains() {
    assert_eq!(
        parse_overflow_counts(
            "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length"
        ),
        (Some(40_000), Some(32_768))
    );
}

#[test]
fn counts_cohere_received() {
    assert_eq!(
        parse_overflow_counts(
            "too many tokens: total number of tokens in the prompt cannot exceed 4081 - received 4500."
        ),
        (Some(4_500), Some(4_081))
    );
}

#[test]
fn counts_llama_cpp() {
    assert_eq!(
        parse_overflow_counts(
            "request (8000 tokens) exceeds the available context size (4096 tokens), try increasing it"
        ),
        (Some(8_000), Some(4_096))
    );
    assert_eq!(
        parse_overflow_counts("n_keep (5000) >= n_ctx (4096)"),
        (Some(5_000), Some(4_096))
    );
}

#[test]
fn counts_with_thousands_separators() {
    assert_eq!(
        parse_overflow_counts("prompt is too long: 208,310 tokens > 200,000 maximum"),
        (Some(208_310), Some(200_000))
    );
}

#[test]
fn no_counts_when_none_are_stated() {
    assert_eq!(
        parse_overflow_counts("Input is too long for requested model."),
        (None, None)
    );
}

// --- Overflow reported as an assistant message (seed 003 §4 "assistantError") -------------------

fn failed_assistant(error_message: &str) -> Message {
    let mut message = Message::new(Role::Assistant, Vec::new());
    message.meta.stop_reason = Some(StopReason::Error);
    message
        .extra
        .insert("errorMessage".to_owned(), error_message.into());
    message
}

#[test]
fn assistant_error_with_an_overflow_message_is_an_overflow() {
    let message = failed_assistant(
        r#"400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
    );
    assert_eq!(
        assistant_error_overflow(&message),
        Some(LlmError::ContextOverflow {
            requested_tokens: Some(210_000),
            limit_tokens: Some(200_000),
            message: r#"400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#.to_owned(),
        })
    );
}

#[test]
fn assistant_error_text_falls_back_to_the_error_field_and_the_text() {
    let mut message = Message::new(Role::Assistant, Vec::new());
    message.meta.stop_reason = Some(StopReason::Error);
    message.extra.insert(
        "error".to_owned(),
        serde_json::json!({"message": "Context window exceeded: requested 12000 tokens"}),
    );
    assert_eq!(
        assistant_error_text(&message).as_deref(),
        Some("Context window exceeded: requested 12000 tokens")
    );
    assert!(assistant_error_overflow(&message).is_some());

    let mut message = Message::text(Role::Assistant, "上下文过长");
    message.meta.stop_reason = Some(StopReason::Error);
    assert!(assistant_error_overflow(&message).is_some());
}

#[test]
fn assistant_errors_that_are_not_overflows_are_left_alone() {
    assert_eq!(
        assistant_error_overflow(&failed_assistant("429 Too Many Requests")),
        None
    );
    assert_eq!(
        assistant_error_overflow(&failed_assistant("Overloaded")),
        None
    );
}

#[test]
fn a_normal_answer_that_mentions_an_overflow_is_not_one() {
    let mut message = Message::text(
        Role::Assistant,
        "The prompt is too long: 5 tokens > 4 maximum",
    );
    message.meta.stop_reason = Some(StopReason::EndTurn);
    assert_eq!(assistant_error_text(&message), None);
    assert_eq!(assistant_error_overflow(&message), None);
    let user = failed_assistant("prompt is too long");
    let user = Message {
        role: Role::User,
        ..user
    };
    assert_eq!(assistant_error_overflow(&user), None);
}

#[test]
fn chat_response_exposes_the_assistant_error_overflow() {
    let message = failed_assistant("Context overflow: prompt too large for the model.");
    let response = ChatResponse {
        stop_reason: message.meta.stop_reason.clone(),
        message,
        usage: Default::default(),
        model: "m".to_owned(),
    };
    assert!(
        response
            .overflow_error()
            .is_some_and(|error| error.is_context_overflow())
    );
}
