//! Reading provider error messages: is this a context overflow (and with how many tokens), a
//! rate limit, a billing problem, an auth failure…? Pure functions over a status and a body, so
//! the proxy and the engine classify errors the same way the clients do.
//!
//! The overflow patterns are OpenClaw's (`isContextOverflowError`, its provider patterns and the
//! broader `isLikelyContextOverflowError` fallback): every provider spells "your prompt is too
//! big" differently, and recovering from an overflow (compact, then retry) is only possible when
//! it is recognised. Rate-limit and billing messages that mention tokens ("tokens per minute",
//! "exceeded your current quota") are kept out: compacting does not help them.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;
use skald_core::message::{Message, Role, StopReason};

use crate::error::{LlmError, provider_message};

/// What kind of failure an error message describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The prompt does not fit the context window: compact and retry.
    ContextOverflow,
    /// Requests or tokens per unit of time: wait and retry.
    RateLimited,
    /// No credit or quota left: a human must act.
    Billing,
    /// Missing or rejected credentials.
    Auth,
    /// The request is malformed for another reason than its size.
    BadRequest,
    /// The provider failed or is overloaded.
    Server,
    /// The provider or a gateway timed out.
    Timeout,
    /// Nothing recognisable.
    Unknown,
}

/// How a named overflow pattern matches lower-cased text.
enum Rule {
    /// Every group must be present; a group is present when any of its substrings is.
    Words(&'static [&'static [&'static str]]),
    /// A case-insensitive regular expression (`.` also matches newlines).
    Regex(&'static str),
}

/// One way a provider says the prompt is too large, named so tests and logs can tell which
/// provider form was recognised.
struct OverflowPattern {
    name: &'static str,
    rule: Rule,
}

/// The explicit overflow forms (OpenClaw's `isContextOverflowError`, its provider patterns and
/// the llama.cpp and Anthropic long-context forms of newer versions). Checked after the TPM and
/// reasoning-constraint exclusions.
const OVERFLOW_PATTERNS: &[OverflowPattern] = &[
    OverflowPattern {
        name: "request_too_large",
        rule: Rule::Words(&[&["request_too_large"]]),
    },
    OverflowPattern {
        name: "invalid_argument_maximum_number_of_tokens",
        rule: Rule::Words(&[&["invalid_argument"], &["maximum number of tokens"]]),
    },
    OverflowPattern {
        name: "request_exceeds_maximum_size",
        rule: Rule::Words(&[&["request exceeds the maximum size"]]),
    },
    OverflowPattern {
        name: "context_length_exceeded",
        rule: Rule::Words(&[&["context length exceeded", "context_length_exceeded"]]),
    },
    OverflowPattern {
        name: "maximum_context_length",
        rule: Rule::Words(&[&["maximum context length"]]),
    },
    OverflowPattern {
        name: "prompt_is_too_long",
        rule: Rule::Words(&[&["prompt is too long"]]),
    },
    OverflowPattern {
        name: "prompt_too_long",
        rule: Rule::Words(&[&["prompt too long"]]),
    },
    OverflowPattern {
        name: "exceeds_model_context_window",
        rule: Rule::Words(&[&["exceeds model context window"]]),
    },
    OverflowPattern {
        name: "model_token_limit",
        rule: Rule::Words(&[&["model token limit"]]),
    },
    OverflowPattern {
        name: "input_exceeds_maximum_number_of_tokens",
        rule: Rule::Words(&[&["input exceeds"], &["maximum number of tokens"]]),
    },
    OverflowPattern {
        name: "context_ran_out_of_room",
        rule: Rule::Words(&[
            &["context window", "context length"],
            &["ran out of room", "ran out of space"],
        ]),
    },
    OverflowPattern {
        name: "request_size_exceeds_context",
        rule: Rule::Words(&[
            &["request size exceeds"],
            &["context window", "context length"],
        ]),
    },
    OverflowPattern {
        name: "context_overflow_prefix",
        rule: Rule::Words(&[&["context overflow:"]]),
    },
    OverflowPattern {
        name: "exceed_context_limit",
        rule: Rule::Words(&[&["exceed context limit"]]),
    },
    OverflowPattern {
        name: "exceeds_models_maximum_context",
        rule: Rule::Words(&[&["exceeds the model's maximum context"]]),
    },
    OverflowPattern {
        name: "max_tokens_exceed_context",
        rule: Rule::Words(&[&["max_tokens"], &["exceed"], &["context"]]),
    },
    OverflowPattern {
        name: "input_length_exceed_context",
        rule: Rule::Words(&[&["input length"], &["exceed"], &["context"]]),
    },
    OverflowPattern {
        name: "status_413_too_large",
        rule: Rule::Words(&[&["413"], &["too large"]]),
    },
    OverflowPattern {
        name: "context_window_exceeded",
        rule: Rule::Words(&[&["context_window_exceeded"]]),
    },
    OverflowPattern {
        name: "zh_context_too_long",
        rule: Rule::Words(&[&["上下文过长", "上下文过多"]]),
    },
    OverflowPattern {
        name: "zh_context_exceeded",
        rule: Rule::Words(&[&["上下文超出"]]),
    },
    OverflowPattern {
        name: "zh_context_length_exceeded",
        rule: Rule::Words(&[&["上下文长度超"]]),
    },
    OverflowPattern {
        name: "zh_exceeds_maximum_context",
        rule: Rule::Words(&[&["超出最大上下文"]]),
    },
    OverflowPattern {
        name: "zh_please_compress_context",
        rule: Rule::Words(&[&["请压缩上下文"]]),
    },
    OverflowPattern {
        // Anthropic answers a long-context request without the long-context entitlement with a
        // 429; a shorter prompt goes through, so it is an overflow, not a rate limit.
        name: "anthropic_long_context_extra_usage",
        rule: Rule::Words(&[&["extra usage is required for long context"]]),
    },
    OverflowPattern {
        name: "llama_cpp_exceeds_available_context_size",
        rule: Rule::Words(&[&["exceeds the available context size"]]),
    },
    OverflowPattern {
        name: "llama_cpp_n_keep_n_ctx",
        rule: Rule::Regex(r"n_keep\W.*n_ctx"),
    },
    OverflowPattern {
        name: "bedrock_validation_input_too_long",
        rule: Rule::Regex(
            r"ValidationException.*(?:input is too long|max input token|input token.*exceed)",
        ),
    },
    OverflowPattern {
        // Bedrock's JSON body; the SDKs prefix it with "ValidationException".
        name: "bedrock_input_too_long_for_requested_model",
        rule: Rule::Words(&[&["input is too long for requested model"]]),
    },
    OverflowPattern {
        name: "bedrock_validation_exceeds_max_tokens",
        rule: Rule::Regex(
            r"ValidationException.*(?:exceeds? the (?:maximum|max) (?:number of )?(?:input )?tokens)",
        ),
    },
    OverflowPattern {
        name: "bedrock_model_stream_input_too_long",
        rule: Rule::Regex(
            r"ModelStreamErrorException.*(?:Input is too long|too many input tokens)",
        ),
    },
    OverflowPattern {
        name: "azure_content_filter_input_too_long",
        rule: Rule::Regex(r"content_filter.*(?:prompt|input).*(?:too long|exceed)"),
    },
    OverflowPattern {
        name: "ollama_context",
        rule: Rule::Regex(r"\bollama\b.*(?:context length|too many tokens|context window)"),
    },
    OverflowPattern {
        name: "truncating_input_too_long",
        rule: Rule::Regex(r"\btruncating input\b.*\btoo long\b"),
    },
    OverflowPattern {
        name: "mistral_input_too_long",
        rule: Rule::Regex(r"\bmistral\b.*(?:input.*too long|token limit.*exceeded)"),
    },
    OverflowPattern {
        name: "total_tokens_exceed_maximum",
        rule: Rule::Regex(
            r"\btotal tokens?.*exceeds? (?:the )?(?:model(?:'s)? )?(?:max|maximum|limit)",
        ),
    },
    OverflowPattern {
        name: "deepseek_input_too_long",
        rule: Rule::Regex(r"\bdeepseek\b.*(?:input.*too long|context.*exceed)"),
    },
    OverflowPattern {
        name: "vertex_invalid_argument_exceeds_maximum",
        rule: Rule::Regex(
            r"INVALID_ARGUMENT.*(?:exceeds? the (?:maximum|max)|input.*too (?:long|large))",
        ),
    },
    OverflowPattern {
        name: "input_too_long_for_model",
        rule: Rule::Regex(r"\binput (?:is )?too long for (?:the )?model\b"),
    },
];

/// OpenClaw's broad fallback (`isLikelyContextOverflowError`): an error that talks about the
/// context, the prompt or the input being too large. Used only where the text is known to be an
/// error about this request (see [`classify_error`]).
const LIKELY_OVERFLOW: &str = concat!(
    r"context.*overflow",
    r"|context window.*(?:too (?:large|long)|exceed|over|limit|max(?:imum)?|requested|sent|tokens)",
    r"|prompt.*(?:too (?:large|long)|exceed|over|limit|max(?:imum)?)",
    r"|(?:request|input).*(?:context|window|length|token).*(?:too (?:large|long)|exceed|over|limit|max(?:imum)?)",
);

/// A context window that is too *small* for the agent is a configuration problem, not an
/// overflow compaction can fix.
const WINDOW_TOO_SMALL: &str = r"context window.*(?:too small|minimum is)";

/// Rate limits, including token rate limits that mention tokens and limits like an overflow.
const RATE_LIMIT: &str = concat!(
    r"rate[ _-]?limit|too many requests|requests per (?:minute|hour|day|second)",
    r"|tokens per (?:minute|day|hour)|\btpm\b|\brpm\b|throttl|\b429\b|resource_exhausted",
    r"|(?:quota|limit).*per (?:minute|hour|day|second)",
);

/// "Tokens per minute": a 413 or 429 that names tokens and limits but is a rate limit.
const TPM_HINT: &str = r"\btpm\b|tokens per minute";

/// Billing and quota problems: waiting or compacting does not help.
const BILLING: &str = concat!(
    r"insufficient[_ ]quota|exceeded your current quota|quota exceeded|out of quota",
    r"|billing|credit balance|insufficient[_ ](?:credits?|balance|funds)|payment required",
    r"|out of credits",
);

/// Providers that require reasoning to stay on; "max tokens" wording must not read as overflow.
fn is_reasoning_constraint(lower: &str) -> bool {
    lower.contains("reasoning is mandatory")
        || lower.contains("reasoning is required")
        || lower.contains("requires reasoning")
        || (lower.contains("reasoning") && lower.contains("cannot be disabled"))
}

struct Compiled {
    /// `OVERFLOW_PATTERNS` regexes by index (`None` for word rules).
    overflow: Vec<Option<Regex>>,
    likely: Option<Regex>,
    window_too_small: Option<Regex>,
    rate_limit: Option<Regex>,
    tpm: Option<Regex>,
    billing: Option<Regex>,
}

/// Compiles a pattern case-insensitively; the patterns are constants a unit test compiles, so
/// `None` never happens in practice and would only make that one check never match.
fn compile(pattern: &str) -> Option<Regex> {
    Regex::new(&format!("(?is){pattern}")).ok()
}

static COMPILED: LazyLock<Compiled> = LazyLock::new(|| Compiled {
    overflow: OVERFLOW_PATTERNS
        .iter()
        .map(|pattern| match pattern.rule {
            Rule::Regex(regex) => compile(regex),
            Rule::Words(_) => None,
        })
        .collect(),
    likely: compile(LIKELY_OVERFLOW),
    window_too_small: compile(WINDOW_TOO_SMALL),
    rate_limit: compile(RATE_LIMIT),
    tpm: compile(TPM_HINT),
    billing: compile(BILLING),
});

fn is_match(regex: Option<&Regex>, text: &str) -> bool {
    regex.is_some_and(|regex| regex.is_match(text))
}

/// The name of the explicit overflow pattern `text` matches, if any (OpenClaw's
/// `isContextOverflowError`). Token rate limits ("TPM", "tokens per minute") and "reasoning is
/// required" errors never match.
pub fn overflow_pattern(text: &str) -> Option<&'static str> {
    let lower = text.to_lowercase();
    let compiled = &*COMPILED;
    if is_match(compiled.tpm.as_ref(), &lower) || is_reasoning_constraint(&lower) {
        return None;
    }
    OVERFLOW_PATTERNS
        .iter()
        .zip(&compiled.overflow)
        .find(|(pattern, regex)| match pattern.rule {
            Rule::Words(groups) => groups
                .iter()
                .all(|group| group.iter().any(|word| lower.contains(word))),
            Rule::Regex(_) => is_match(regex.as_ref(), &lower),
        })
        .map(|(pattern, _)| pattern.name)
}

/// True when `text` states a context overflow in one of the explicit forms.
pub fn is_context_overflow(text: &str) -> bool {
    overflow_pattern(text).is_some()
}

/// True when `text`, known to be an error message, probably describes a context overflow: the
/// explicit forms, or the broad "context/prompt/input … too large/exceeds/limit" heuristic.
/// False for rate limits, billing problems, reasoning constraints and "context window too
/// small".
pub fn is_likely_context_overflow(text: &str) -> bool {
    let lower = text.to_lowercase();
    let compiled = &*COMPILED;
    if is_match(compiled.tpm.as_ref(), &lower)
        || is_reasoning_constraint(&lower)
        || is_match(compiled.billing.as_ref(), &lower)
        || is_match(compiled.window_too_small.as_ref(), &lower)
    {
        return false;
    }
    if is_context_overflow(&lower) {
        return true;
    }
    if is_match(compiled.rate_limit.as_ref(), &lower) {
        return false;
    }
    is_match(compiled.likely.as_ref(), &lower)
}

/// True when `text` describes a rate limit (requests or tokens per unit of time).
pub fn is_rate_limit(text: &str) -> bool {
    is_match(COMPILED.rate_limit.as_ref(), &text.to_lowercase())
}

/// True when `text` describes a billing or quota problem (no credit left). A quota "per
/// minute" is a rate limit instead.
pub fn is_billing(text: &str) -> bool {
    let lower = text.to_lowercase();
    let compiled = &*COMPILED;
    is_match(compiled.billing.as_ref(), &lower) && !is_match(compiled.rate_limit.as_ref(), &lower)
}

/// Classifies a failed provider answer from its HTTP `status` (`None` for an error reported
/// inside a stream or an assistant message; a 2xx status counts as `None`) and its `body`.
///
/// Order matters: token rate limits first (Groq answers some with 413), then the explicit
/// overflow forms whatever the status (proxies wrap overflows in 500s, Anthropic's long-context
/// refusal is a 429), then billing, status 413, rate limits, the broad overflow heuristic for
/// 400, 422 and status-less errors, and last the status itself.
pub fn classify_error(status: Option<u16>, body: &str) -> ErrorClass {
    let status = status.filter(|status| *status >= 300);
    let lower = body.to_lowercase();
    let compiled = &*COMPILED;
    if is_match(compiled.tpm.as_ref(), &lower) {
        return ErrorClass::RateLimited;
    }
    if is_context_overflow(&lower) {
        return ErrorClass::ContextOverflow;
    }
    if status == Some(402) || is_billing(&lower) {
        return ErrorClass::Billing;
    }
    if status == Some(413) {
        return ErrorClass::ContextOverflow;
    }
    if status == Some(429) || is_match(compiled.rate_limit.as_ref(), &lower) {
        return ErrorClass::RateLimited;
    }
    if status.is_none() {
        // "Overloaded" or "invalid x-api-key" inside a stream is never an overflow, however
        // loosely the heuristic below reads it.
        let by_words = classify_text(&lower);
        if matches!(
            by_words,
            ErrorClass::Server | ErrorClass::Auth | ErrorClass::Timeout
        ) {
            return by_words;
        }
    }
    let about_this_request = matches!(status, None | Some(400) | Some(422));
    if about_this_request && is_likely_context_overflow(&lower) {
        return ErrorClass::ContextOverflow;
    }
    match status {
        Some(401 | 403) => ErrorClass::Auth,
        Some(408) => ErrorClass::Timeout,
        Some(400..=499) => ErrorClass::BadRequest,
        Some(500..=599) => ErrorClass::Server,
        Some(_) => ErrorClass::Unknown,
        None => classify_text(&lower),
    }
}

/// Classification of a status-less error by its words alone (after overflow and rate limits).
fn classify_text(lower: &str) -> ErrorClass {
    let any = |words: &[&str]| words.iter().any(|word| lower.contains(word));
    if any(&[
        "overloaded",
        "internal server error",
        "server_error",
        "server error",
        "api_error",
        "service unavailable",
        "bad gateway",
        "gateway timeout",
    ]) {
        ErrorClass::Server
    } else if any(&[
        "authentication_error",
        "permission_error",
        "invalid_api_key",
        "invalid api key",
        "incorrect api key",
        "invalid x-api-key",
        "unauthorized",
    ]) {
        ErrorClass::Auth
    } else if any(&["timed out", "timeout"]) {
        ErrorClass::Timeout
    } else if any(&["invalid_request_error", "bad request"]) {
        ErrorClass::BadRequest
    } else {
        ErrorClass::Unknown
    }
}

/// A token count as providers write it: `208000`, `200,000`, `128k`, `1.5m`.
const COUNT: &str = r"(\d[\d,]*(?:\.\d+)?(?:\s?[km]\b)?)";

/// A pattern that gives both counts at once.
struct PairPattern<R> {
    regex: R,
    /// Capture groups whose counts add up to the requested tokens.
    requested: &'static [usize],
    limit: usize,
}

static PAIR_PATTERNS: LazyLock<Vec<PairPattern<Option<Regex>>>> = LazyLock::new(|| {
    [
        // "input length and max_tokens exceed context limit: 156321 + 48384 > 200000"
        PairPattern {
            regex: format!(r"{COUNT}\s*\+\s*{COUNT}\s*>\s*{COUNT}"),
            requested: &[1, 2],
            limit: 3,
        },
        // "prompt is too long: 208000 tokens > 200000 maximum"
        PairPattern {
            regex: format!(r"{COUNT}\s*tokens?\s*>\s*{COUNT}"),
            requested: &[1],
            limit: 2,
        },
        // "token limit: 200000 (requested: 250000)"
        PairPattern {
            regex: format!(r"token limit:?\s*{COUNT}\s*\(\s*requested:?\s*{COUNT}"),
            requested: &[2],
            limit: 1,
        },
        // llama.cpp: "n_keep (5000) >= n_ctx (4096)"
        PairPattern {
            regex: format!(r"n_keep\W*{COUNT}.*?n_ctx\W*{COUNT}"),
            requested: &[1],
            limit: 2,
        },
    ]
    .into_iter()
    .map(|pattern| PairPattern {
        regex: compile(&pattern.regex),
        requested: pattern.requested,
        limit: pattern.limit,
    })
    .collect()
});

static REQUESTED_PATTERNS: LazyLock<Vec<Option<Regex>>> = LazyLock::new(|| {
    [
        // OpenAI, Azure: "However, your messages resulted in 130532 tokens"
        format!(r"resulted in\s*{COUNT}\s*tokens?"),
        // vLLM, DeepSeek: "you requested 70000 tokens"; "Context window exceeded: requested 12000 tokens"
        format!(r"requested:?\s*{COUNT}\s*tokens?"),
        // llama.cpp: "request (8000 tokens) exceeds the available context size"
        format!(r"request\s*\(\s*{COUNT}\s*tokens?\s*\)"),
        // Gemini, Vertex: "The input token count (1200000) exceeds the maximum"
        format!(r"input token count\D{{0,4}}{COUNT}"),
        // Mistral: "Prompt contains 40000 tokens"
        format!(r"contains\s*{COUNT}\s*tokens?"),
        // Cohere: "cannot exceed 4081 - received 4500"
        format!(r"received\s*{COUNT}"),
    ]
    .iter()
    .map(|pattern| compile(pattern))
    .collect()
});

static LIMIT_PATTERNS: LazyLock<Vec<Option<Regex>>> = LazyLock::new(|| {
    [
        // OpenAI, Azure, vLLM, DeepSeek: "maximum context length is 128000 tokens"
        format!(r"maximum context length is\s*{COUNT}"),
        // Mistral: "too large for model with 32768 maximum context length"
        format!(r"{COUNT}\s*maximum context length"),
        // "Model context window is 128k tokens", "context window of 8192 tokens"
        format!(r"context window (?:is|of)\s*{COUNT}"),
        // Gemini, Vertex: "maximum number of tokens allowed (1048576)"
        format!(r"maximum number of tokens allowed\D{{0,4}}{COUNT}"),
        // llama.cpp: "exceeds the available context size (4096 tokens)"
        format!(r"available context size\s*\(\s*{COUNT}"),
        // Cohere: "cannot exceed 4081"
        format!(r"cannot exceed\s*{COUNT}"),
        // "context limit of 8192", "token limit: 8192"
        format!(r"(?:context|token) limit(?: of| is|:)?\s*{COUNT}"),
    ]
    .iter()
    .map(|pattern| compile(pattern))
    .collect()
});

/// Parses a count matched by [`COUNT`]: digits with optional thousands separators, optionally
/// a decimal and a `k`/`m` multiplier.
fn parse_count(raw: &str) -> Option<u64> {
    let lower = raw.trim().to_lowercase().replace(',', "");
    let (number, multiplier) = if let Some(number) = lower.strip_suffix('k') {
        (number.trim_end(), 1_000.0)
    } else if let Some(number) = lower.strip_suffix('m') {
        (number.trim_end(), 1_000_000.0)
    } else {
        return lower.parse().ok();
    };
    let value: f64 = number.parse().ok()?;
    let tokens = (value * multiplier).round();
    // `as` saturates; the bounds keep nonsense (NaN, negative) out.
    (0.0..1e18).contains(&tokens).then_some(tokens as u64)
}

fn capture_count(captures: &regex::Captures<'_>, group: usize) -> Option<u64> {
    captures
        .get(group)
        .and_then(|found| parse_count(found.as_str()))
}

fn first_count(patterns: &[Option<Regex>], text: &str) -> Option<u64> {
    patterns.iter().flatten().find_map(|regex| {
        regex
            .captures(text)
            .and_then(|captures| capture_count(&captures, 1))
    })
}

/// The token counts an overflow message states: `(requested, limit)`, each `None` when the
/// message does not say. Covers the forms OpenClaw's `extractObservedOverflowTokenCount` reads
/// (`prompt is too long: N tokens > M maximum`, `requested N tokens`, `token limit: M
/// (requested: N)`, `resulted in N tokens`, `N + K > M`, which counts N + K as requested) and
/// the limit forms of OpenAI, Mistral, Gemini, Cohere and llama.cpp.
pub fn parse_overflow_counts(message: &str) -> (Option<u64>, Option<u64>) {
    for pattern in PAIR_PATTERNS.iter() {
        let Some(captures) = pattern
            .regex
            .as_ref()
            .and_then(|regex| regex.captures(message))
        else {
            continue;
        };
        let requested = pattern
            .requested
            .iter()
            .map(|group| capture_count(&captures, *group))
            .try_fold(0u64, |sum, count| {
                count.and_then(|count| sum.checked_add(count))
            });
        let limit = capture_count(&captures, pattern.limit);
        if requested.is_some() || limit.is_some() {
            return (requested, limit);
        }
    }
    (
        first_count(&REQUESTED_PATTERNS, message),
        first_count(&LIMIT_PATTERNS, message),
    )
}

/// The error text of an assistant message that reports a failed call (stop reason `error`):
/// pi/OpenClaw's `errorMessage`, an `error` field (string or `{message}`), or the message's
/// text. `None` for any other message.
pub fn assistant_error_text(message: &Message) -> Option<String> {
    let failed = matches!(message.role, Role::Assistant)
        && matches!(message.meta.stop_reason, Some(StopReason::Error));
    if !failed {
        return None;
    }
    let extra = &message.extra;
    let from_extra = ["errorMessage", "error_message", "error"]
        .iter()
        .find_map(|key| match extra.get(*key) {
            Some(Value::String(text)) if !text.trim().is_empty() => Some(text.clone()),
            Some(object @ Value::Object(_)) => Some(provider_message(&object.to_string())),
            Some(_) | None => None,
        });
    from_extra.or_else(|| {
        let text = message.plain_text();
        (!text.trim().is_empty()).then_some(text)
    })
}

/// Seed 003 §4's "assistantError": the provider accepted the prompt but the answer came back as
/// an assistant message with stop reason `error` whose text is an overflow. Returns the
/// [`LlmError::ContextOverflow`] to recover from, with the counts the text states.
pub fn assistant_error_overflow(message: &Message) -> Option<LlmError> {
    let text = assistant_error_text(message)?;
    match classify_error(None, &text) {
        ErrorClass::ContextOverflow => {
            let (requested_tokens, limit_tokens) = parse_overflow_counts(&text);
            Some(LlmError::ContextOverflow {
                requested_tokens,
                limit_tokens,
                message: provider_message(&text),
            })
        }
        ErrorClass::RateLimited
        | ErrorClass::Billing
        | ErrorClass::Auth
        | ErrorClass::BadRequest
        | ErrorClass::Server
        | ErrorClass::Timeout
        | ErrorClass::Unknown => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        let compiled = &*COMPILED;
        for (pattern, regex) in OVERFLOW_PATTERNS.iter().zip(&compiled.overflow) {
            match pattern.rule {
                Rule::Regex(_) => assert!(regex.is_some(), "{} does not compile", pattern.name),
                Rule::Words(_) => assert!(regex.is_none()),
            }
        }
        assert!(compiled.likely.is_some());
        assert!(compiled.window_too_small.is_some());
        assert!(compiled.rate_limit.is_some());
        assert!(compiled.tpm.is_some());
        assert!(compiled.billing.is_some());
        assert!(PAIR_PATTERNS.iter().all(|pattern| pattern.regex.is_some()));
        assert!(REQUESTED_PATTERNS.iter().all(Option::is_some));
        assert!(LIMIT_PATTERNS.iter().all(Option::is_some));
    }

    #[test]
    fn pattern_names_are_unique() {
        let mut names: Vec<&str> = OVERFLOW_PATTERNS.iter().map(|p| p.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }

    #[test]
    fn counts_parse_with_separators_and_multipliers() {
        assert_eq!(parse_count("200,000"), Some(200_000));
        assert_eq!(parse_count("128k"), Some(128_000));
        assert_eq!(parse_count("1.5m"), Some(1_500_000));
        assert_eq!(parse_count("12 K"), Some(12_000));
        assert_eq!(parse_count("x"), None);
    }
}
