//! Exact BPE token counts with the `o200k_base` and `cl100k_base` tables bundled in tiktoken-rs
//! (compiled into the binary: no download, no file access).
//!
//! A message is counted the way a chat template roughly renders it: the role, then every counted
//! piece (text, thinking, tool-call name and arguments JSON, tool-result content, opaque JSON), plus
//! [`TOKENS_PER_MESSAGE`] for the template's delimiters. Images cannot be tokenized and cost
//! [`IMAGE_TOKENS`] each. Special-token spellings such as `<|endoftext|>` in the text are counted as
//! ordinary text, since that is what a provider does with user-supplied content.
//!
//! Pieces are tokenized separately rather than concatenated, which avoids building one large string
//! per message; token boundaries between pieces move by at most a token or so.

use tiktoken_rs::CoreBPE;

use crate::message::{Message, Role};

use super::IMAGE_TOKENS;
use super::visit::{Piece, json_text, visit_message};

/// Tokens a chat template adds around each message (OpenAI's cookbook: `<|start|>`, the role's
/// separator and `<|end|>`); the role name itself is counted as text on top.
pub const TOKENS_PER_MESSAGE: u64 = 3;

/// Tokens a request adds once to prime the reply (`<|start|>assistant<|message|>` in the
/// cookbook). Not part of any message; [`crate::tokens::TokenCounter::count_request`] adds it.
pub const REPLY_PRIMING_TOKENS: u64 = 3;

/// Text is handed to the tokenizer in segments of about this many bytes, split at whitespace where
/// possible. It bounds the work of any one regex and merge step on pathological input (megabytes
/// without a space) while moving the count by at most a token per segment.
const SEGMENT_BYTES: usize = 16 * 1024;

/// A BPE vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Encoding {
    /// GPT-4o, GPT-4.1, GPT-5 and the o-series; also skald's approximation for every model whose
    /// tokenizer is not public (Claude, Gemini, …).
    O200kBase,
    /// GPT-4 and GPT-3.5.
    Cl100kBase,
}

impl Encoding {
    /// The encoding to count `model`'s tokens with. Provider prefixes (`openai/gpt-4o`) and dated
    /// suffixes are accepted. Models whose tokenizer is not public get `o200k_base`, the better
    /// general approximation.
    pub fn for_model(model: &str) -> Encoding {
        let lower = model.trim().to_ascii_lowercase();
        let name = lower.rsplit('/').next().unwrap_or(&lower);
        let o200k_prefixes = [
            "gpt-4o",
            "gpt-4.1",
            "gpt-4.5",
            "gpt-5",
            "chatgpt-4o",
            "o1",
            "o3",
            "o4",
        ];
        if o200k_prefixes.iter().any(|prefix| name.starts_with(prefix)) {
            return Encoding::O200kBase;
        }
        if name.starts_with("gpt-4") || name.starts_with("gpt-3.5") || name.starts_with("gpt-35") {
            return Encoding::Cl100kBase;
        }
        Encoding::O200kBase
    }

    /// tiktoken's name for the encoding.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    fn bpe(self) -> &'static CoreBPE {
        match self {
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        }
    }

    /// Tokens of `text`, special-token spellings counted as plain text.
    pub fn count_text(self, text: &str) -> u64 {
        let bpe = self.bpe();
        segments(text)
            .map(|segment| bpe.encode_ordinary(segment).len() as u64)
            .sum()
    }
}

/// Splits `text` into pieces of about [`SEGMENT_BYTES`], cutting just before a whitespace character
/// that follows a non-whitespace one (where the tokenizer's own pre-split would usually cut), or at
/// any character boundary when a segment has no such place.
fn segments(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if rest.len() <= SEGMENT_BYTES {
            let all = rest;
            rest = "";
            return Some(all);
        }
        let mut limit = SEGMENT_BYTES;
        while !rest.is_char_boundary(limit) {
            limit -= 1;
        }
        let window = &rest[..limit];
        let mut cut = limit;
        let mut previous_non_space = false;
        let mut best = None;
        for (index, c) in window.char_indices() {
            let space = c.is_whitespace();
            if space && previous_non_space && index > 0 {
                best = Some(index);
            }
            previous_non_space = !space;
        }
        if let Some(index) = best {
            // Only cut at whitespace when it does not leave a tiny segment behind.
            if index >= SEGMENT_BYTES / 2 {
                cut = index;
            }
        }
        let (head, tail) = rest.split_at(cut);
        rest = tail;
        Some(head)
    })
}

/// The role as a chat template names it.
fn role_text(role: &Role) -> &str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::ToolResult => "tool",
        Role::Custom(name) => name,
    }
}

/// BPE tokens of one message: role, counted pieces and [`TOKENS_PER_MESSAGE`].
pub fn count_message(encoding: Encoding, message: &Message) -> u64 {
    let mut tokens = TOKENS_PER_MESSAGE + encoding.count_text(role_text(&message.role));
    visit_message(message, &mut |piece| {
        tokens += match piece {
            Piece::Text(text) => encoding.count_text(text),
            Piece::Json(value) => encoding.count_text(&json_text(value)),
            Piece::Image => IMAGE_TOKENS,
        };
    });
    tokens
}

/// BPE tokens of a slice: the sum of [`count_message`] (no reply priming).
pub fn count_messages(encoding: Encoding, messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|message| count_message(encoding, message))
        .sum()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;
    use crate::message::{
        Block, ContentForm, Extra, ImageBlock, ImageSource, ToolCall, ToolResult,
    };

    #[test]
    fn models_map_to_encodings() {
        for model in [
            "gpt-4o",
            "gpt-4o-mini-2024-07-18",
            "openai/gpt-4.1",
            "gpt-5",
            "o1-preview",
            "o3-mini",
            "o4-mini",
        ] {
            assert_eq!(Encoding::for_model(model), Encoding::O200kBase, "{model}");
        }
        for model in [
            "gpt-4",
            "gpt-4-turbo",
            "gpt-4-0613",
            "gpt-3.5-turbo",
            "GPT-3.5-turbo-16k",
        ] {
            assert_eq!(Encoding::for_model(model), Encoding::Cl100kBase, "{model}");
        }
        for model in [
            "claude-sonnet-4-5",
            "anthropic/claude-3-opus",
            "gemini-3-pro-preview",
            "google/gemini-2.5-flash",
            "llama-3",
            "",
        ] {
            assert_eq!(Encoding::for_model(model), Encoding::O200kBase, "{model}");
        }
    }

    #[test]
    fn known_counts_match_tiktoken() {
        // Reference values from OpenAI's tiktoken.
        assert_eq!(Encoding::O200kBase.count_text("hello world"), 2);
        assert_eq!(Encoding::Cl100kBase.count_text("hello world"), 2);
        assert_eq!(Encoding::Cl100kBase.count_text("tiktoken is great!"), 6);
        assert_eq!(Encoding::O200kBase.count_text(""), 0);
    }

    #[test]
    fn special_tokens_are_plain_text() {
        let count = Encoding::O200kBase.count_text("<|endoftext|>");
        assert!(
            count > 1,
            "special token spelled in text must not be one token"
        );
    }

    #[test]
    fn message_count_adds_role_and_overhead() {
        let message = Message::text(Role::User, "hello world");
        // 3 overhead + "user" (1) + "hello world" (2)
        assert_eq!(count_message(Encoding::O200kBase, &message), 6);
        let messages = [message.clone(), message];
        assert_eq!(count_messages(Encoding::O200kBase, &messages), 12);
    }

    #[test]
    fn tool_calls_results_and_images() {
        let call = Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "read".into(),
                arguments: json!({"path": "src/lib.rs"}),
                arguments_text: None,
                extra: Extra::new(),
            })],
        );
        let expected = TOKENS_PER_MESSAGE
            + Encoding::O200kBase.count_text("assistant")
            + Encoding::O200kBase.count_text("read")
            + Encoding::O200kBase.count_text(r#"{"path":"src/lib.rs"}"#);
        assert_eq!(count_message(Encoding::O200kBase, &call), expected);

        let result = |details: Option<serde_json::Value>| {
            Message::new(
                Role::ToolResult,
                vec![Block::ToolResult(ToolResult {
                    call_id: "call_1".into(),
                    tool_name: None,
                    content: vec![
                        Block::text("fn main() {}"),
                        Block::Image(ImageBlock {
                            source: ImageSource::Url {
                                url: "https://example.invalid/a.png".into(),
                            },
                            extra: Extra::new(),
                        }),
                    ]
                    .into(),
                    content_form: ContentForm::Blocks,
                    is_error: None,
                    details: details.map(std::sync::Arc::new),
                    extra: Extra::new(),
                })],
            )
        };
        let plain = count_message(Encoding::O200kBase, &result(None));
        let detailed = count_message(
            Encoding::O200kBase,
            &result(Some(json!({"stdout": "x".repeat(10_000)}))),
        );
        assert_eq!(plain, detailed);
        let expected = TOKENS_PER_MESSAGE
            + Encoding::O200kBase.count_text("tool")
            + Encoding::O200kBase.count_text("fn main() {}")
            + IMAGE_TOKENS;
        assert_eq!(plain, expected);
    }

    #[test]
    fn segments_cover_the_text_exactly() {
        let text = "word ".repeat(10_000) + &"x".repeat(40_000) + "你好".repeat(9_000).as_str();
        let joined: String = segments(&text).collect();
        assert_eq!(joined, text);
        assert!(segments(&text).all(|s| s.len() <= SEGMENT_BYTES));
        assert_eq!(segments("").count(), 0);
    }

    #[test]
    fn segmenting_barely_moves_counts() {
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(2_000);
        let whole = Encoding::O200kBase.bpe().encode_ordinary(&text).len() as u64;
        let segmented = Encoding::O200kBase.count_text(&text);
        let segments_used = segments(&text).count() as u64;
        assert!(
            segmented.abs_diff(whole) <= segments_used,
            "{whole} vs {segmented}"
        );
    }

    #[test]
    fn long_whitespace_does_not_panic() {
        // Unsegmented, tiktoken-rs panics on a megabyte of spaces (regex backtrack limit).
        let text = " ".repeat(1 << 20);
        assert!(Encoding::O200kBase.count_text(&text) > 0);
    }

    #[test]
    fn pathological_inputs_finish() {
        for text in [
            "\n".repeat(1 << 15),
            " \n".repeat(1 << 15),
            "\t ".repeat(1 << 15),
            "a".repeat(1 << 15),
            "1".repeat(1 << 15),
            "!".repeat(1 << 15),
            "你".repeat(1 << 14),
        ] {
            assert!(Encoding::O200kBase.count_text(&text) > 0);
            assert!(Encoding::Cl100kBase.count_text(&text) > 0);
        }
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_text_counts_without_panicking(text in "(\\PC|\\s){0,400}") {
            let o200k = Encoding::O200kBase.count_text(&text);
            let cl100k = Encoding::Cl100kBase.count_text(&text);
            proptest::prop_assert!(o200k <= text.len() as u64);
            proptest::prop_assert!(cl100k <= text.len() as u64);
            proptest::prop_assert_eq!(o200k == 0, text.is_empty());
        }
    }
}
