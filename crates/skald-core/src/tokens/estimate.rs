//! The chars/4 token heuristic of the seeds (pi's `estimateTokens`, OpenClaw's
//! `estimateStringChars`): no tokenizer, linear in the text, deliberately rough.
//!
//! CJK code points count as [`CJK_CHAR_WEIGHT`] characters each because one of them is roughly one
//! token, not a quarter of one. Counting is per `char` (Unicode scalar value), so an astral
//! ideograph such as U+20000 counts once (×4), not once per UTF-16 unit.

use crate::message::Message;
use crate::swar::{bytes_between, bytes_equal};

use super::visit::{Piece, visit_message};
use super::{CHARS_PER_TOKEN, IMAGE_CHARS};

/// Weight of one CJK code point in estimator characters.
pub const CJK_CHAR_WEIGHT: usize = 4;

/// Fixed characters added per message for the role and the delimiters a chat template wraps
/// around it (about 4 tokens, matching the BPE path's per-message overhead). pi's estimator adds
/// nothing; the difference is negligible next to real messages and keeps tiny messages from
/// counting as free.
pub const MESSAGE_OVERHEAD_CHARS: usize = 16;

/// True for Han, Hiragana, Katakana, Hangul, Bopomofo, CJK punctuation and symbols, and
/// fullwidth forms, including the astral ideograph planes.
pub fn is_cjk(c: char) -> bool {
    matches!(
        c as u32,
        0x1100..=0x11FF      // Hangul Jamo
        | 0x2E80..=0x2FFF    // CJK radicals, Kangxi radicals, ideographic description
        | 0x3000..=0x303F    // CJK symbols and punctuation
        | 0x3040..=0x309F    // Hiragana
        | 0x30A0..=0x30FF    // Katakana
        | 0x3100..=0x312F    // Bopomofo
        | 0x3130..=0x318F    // Hangul compatibility Jamo
        | 0x3190..=0x31FF    // Kanbun, Bopomofo ext., CJK strokes, Katakana phonetic ext.
        | 0x3200..=0x33FF    // Enclosed CJK, CJK compatibility
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xA960..=0xA97F    // Hangul Jamo extended A
        | 0xAC00..=0xD7FF    // Hangul syllables, Jamo extended B
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0xFE30..=0xFE4F    // CJK compatibility forms
        | 0xFF00..=0xFFEF    // Halfwidth and fullwidth forms
        | 0x20000..=0x3FFFF  // Supplementary and tertiary ideographic planes
    )
}

/// Estimator characters of a string: one per code point, [`CJK_CHAR_WEIGHT`] per CJK code point.
///
/// ```
/// use skald_core::tokens::estimate_string_chars;
/// assert_eq!(estimate_string_chars("hello"), 5);
/// assert_eq!(estimate_string_chars("你好世"), 12);
/// assert_eq!(estimate_string_chars("hi你好"), 10);
/// assert_eq!(estimate_string_chars("\u{20000}"), 4);
/// ```
pub fn estimate_string_chars(text: &str) -> usize {
    // ASCII is the common case and needs no per-char classification.
    if text.is_ascii() {
        return text.len();
    }
    text.chars().count() + cjk_chars(text) * (CJK_CHAR_WEIGHT - 1)
}

/// The CJK code points of `text`. Every CJK range starts at U+1100 or above, where UTF-8 lead
/// bytes are 0xE1 or more: only characters with such a lead byte are decoded, and runs of ASCII
/// are skipped eight bytes at a time. Mostly-ASCII text with a few symbols (the `→` of
/// numbered file listings) then costs about what ASCII does.
fn cjk_chars(text: &str) -> usize {
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let bytes = text.as_bytes();
    let mut cjk = 0;
    let mut at = 0;
    while let Some(&lead) = bytes.get(at) {
        if let Some(chunk) = bytes.get(at..at + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            if u64::from_le_bytes(word) & HIGH_BITS == 0 {
                at += 8;
                continue;
            }
        }
        // Continuation bytes, two-byte leads and 0xE0 (below U+1000) are stepped over one
        // at a time; a lead of 0xE1 or more is always a character boundary.
        if lead < 0xE1 {
            at += 1;
            continue;
        }
        let width = if lead >= 0xF0 { 4 } else { 3 };
        let decoded = text.get(at..at + width).and_then(|c| c.chars().next());
        if decoded.is_some_and(is_cjk) {
            cjk += 1;
        }
        at += width;
    }
    cjk
}

/// [`estimate_string_chars`] of a JSON value's compact serialization, computed by walking the
/// value instead of serializing it: tool arguments are counted on every request, and most of
/// them are large strings whose serialization would be a copy.
pub fn json_estimate_chars(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(number) => number.to_string().len(),
        Value::String(text) => json_string_chars(text),
        Value::Array(items) => {
            2 + items.iter().map(json_estimate_chars).sum::<usize>() + items.len().saturating_sub(1)
        }
        Value::Object(fields) => {
            2 + fields
                .iter()
                .map(|(key, value)| json_string_chars(key) + 1 + json_estimate_chars(value))
                .sum::<usize>()
                + fields.len().saturating_sub(1)
        }
    }
}

/// Estimator characters of `text` written as a JSON string: quotes and escapes included.
fn json_string_chars(text: &str) -> usize {
    2 + estimate_string_chars(text) + json_escape_extra(text.as_bytes())
}

/// The characters JSON escaping adds to `bytes`: one for `"`, `\\` and the control characters
/// with a short escape (`\n`, `\r`, `\t`, `\b`, `\f`), five for other control characters
/// (`\u00xx`). Words of eight bytes without any are passed over with a few integer operations.
fn json_escape_extra(bytes: &[u8]) -> usize {
    let escape_extra = |byte: u8| match byte {
        b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
        0x00..=0x1f => 5,
        _ => 0,
    };
    let mut chunks = bytes.chunks_exact(8);
    let mut extra = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        let special =
            bytes_between(word, 0, 0x1f) | bytes_equal(word, b'"') | bytes_equal(word, b'\\');
        if special != 0 {
            extra += chunk.iter().map(|&b| escape_extra(b)).sum::<usize>();
        }
    }
    extra
        + chunks
            .remainder()
            .iter()
            .map(|&b| escape_extra(b))
            .sum::<usize>()
}

/// Estimator characters of one message: its counted content (see the module docs of
/// [`crate::tokens`]) plus [`MESSAGE_OVERHEAD_CHARS`].
pub fn estimate_chars(message: &Message) -> usize {
    let mut chars = MESSAGE_OVERHEAD_CHARS;
    visit_message(message, &mut |piece| {
        chars += match piece {
            Piece::Text(text) => estimate_string_chars(text),
            Piece::Json(value) => json_estimate_chars(value),
            Piece::Image => IMAGE_CHARS,
        };
    });
    chars
}

/// Estimator characters of a slice of messages.
pub fn estimate_messages_chars(messages: &[Message]) -> usize {
    messages.iter().map(estimate_chars).sum()
}

/// Estimated tokens of one message: `ceil(estimate_chars / 4)`.
pub fn estimate_message_tokens(message: &Message) -> u64 {
    estimate_chars(message).div_ceil(CHARS_PER_TOKEN) as u64
}

/// Estimated tokens of a slice: the sum of the per-message estimates, so that a slice's figure is
/// the sum of its parts however it is split.
pub fn estimate_messages_tokens(messages: &[Message]) -> u64 {
    messages.iter().map(estimate_message_tokens).sum()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;
    use crate::message::{
        Block, ContentForm, Extra, ImageBlock, ImageSource, Role, ThinkingBlock, ToolCall,
        ToolResult,
    };

    fn content_chars(message: &Message) -> usize {
        estimate_chars(message) - MESSAGE_OVERHEAD_CHARS
    }

    #[test]
    fn cjk_counts_four_per_code_point() {
        assert_eq!(estimate_string_chars("你好世"), 12);
        assert_eq!(estimate_string_chars("hi你好"), 10);
        assert_eq!(estimate_string_chars("\u{20000}"), 4);
        assert_eq!(estimate_string_chars("こんにちは"), 20);
        assert_eq!(estimate_string_chars("한국"), 8);
        assert_eq!(estimate_string_chars("。"), 4);
        assert_eq!(estimate_string_chars("ＡＢ"), 8);
    }

    #[test]
    fn mixed_text_counts_like_a_walk_over_every_code_point() {
        // The fast path skips ASCII eight bytes at a time and decodes only possible CJK leads:
        // it must agree with classifying every code point, at every alignment.
        let pieces = [
            "a",
            "→",
            "字",
            "é",
            "\u{20000}",
            "\u{10000}",
            "\u{1100}",
            "\u{0fff}",
            "ＡＢ",
            "\n",
            "🙂",
            "abcdefghij",
        ];
        for (i, first) in pieces.iter().enumerate() {
            for second in &pieces {
                for pad in 0..9 {
                    let text =
                        format!("{}{first}{}{second}{first}", "x".repeat(pad), "y".repeat(i));
                    let walked: usize = text
                        .chars()
                        .map(|c| if is_cjk(c) { CJK_CHAR_WEIGHT } else { 1 })
                        .sum();
                    assert_eq!(estimate_string_chars(&text), walked, "{text:?}");
                }
            }
        }
    }

    #[test]
    fn ascii_and_other_scripts_count_one_per_code_point() {
        assert_eq!(estimate_string_chars(""), 0);
        assert_eq!(estimate_string_chars("hello world"), 11);
        assert_eq!(estimate_string_chars("héllo"), 5);
        assert_eq!(estimate_string_chars("привет"), 6);
        assert_eq!(estimate_string_chars("🙂"), 1);
    }

    #[test]
    fn text_thinking_and_tool_calls_count() {
        let message = Message::new(
            Role::Assistant,
            vec![
                Block::text("abcd"),
                Block::Thinking(ThinkingBlock {
                    thinking: "hmm".into(),
                    signature: Some("x".repeat(500)),
                    extra: Extra::new(),
                }),
                Block::ToolCall(ToolCall {
                    id: "call_with_a_long_id".into(),
                    name: "read".into(),
                    arguments: json!({"path": "a.rs"}),
                    arguments_text: None,
                    extra: Extra::new(),
                }),
            ],
        );
        // 4 + 3 + "read" 4 + {"path":"a.rs"} 15; signature and id are not counted.
        assert_eq!(content_chars(&message), 4 + 3 + 4 + 15);
    }

    #[test]
    fn arguments_text_wins_over_parsed_arguments() {
        let message = Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: "c".into(),
                name: "f".into(),
                arguments: json!({"a": 1}),
                arguments_text: Some("{ \"a\": 1 }".into()),
                extra: Extra::new(),
            })],
        );
        assert_eq!(content_chars(&message), 1 + 10);
    }

    #[test]
    fn tool_result_details_are_never_counted() {
        let result = |details: Option<serde_json::Value>| {
            Message::new(
                Role::ToolResult,
                vec![Block::ToolResult(ToolResult {
                    call_id: "c".into(),
                    tool_name: Some("read".into()),
                    content: vec![Block::text("output")].into(),
                    content_form: ContentForm::Text,
                    is_error: None,
                    details: details.map(std::sync::Arc::new),
                    extra: Extra::new(),
                })],
            )
        };
        let without = result(None);
        let with = result(Some(json!({"huge": "x".repeat(100_000)})));
        assert_eq!(content_chars(&without), 6);
        assert_eq!(estimate_chars(&with), estimate_chars(&without));
    }

    #[test]
    fn images_cost_a_fixed_amount() {
        let image = Block::Image(ImageBlock {
            source: ImageSource::Base64 {
                media_type: "image/png".into(),
                data: "A".repeat(1_000_000),
            },
            extra: Extra::new(),
        });
        let message = Message::new(Role::User, vec![image.clone(), image]);
        assert_eq!(content_chars(&message), 2 * IMAGE_CHARS);
        assert_eq!(
            estimate_message_tokens(&message),
            ((2 * IMAGE_CHARS + MESSAGE_OVERHEAD_CHARS) / 4) as u64
        );
    }

    #[test]
    fn opaque_blocks_count_their_json() {
        let message = Message::new(
            Role::Assistant,
            vec![Block::Opaque(
                json!({"type": "redacted_thinking", "data": "zz"}),
            )],
        );
        let expected = r#"{"type":"redacted_thinking","data":"zz"}"#.len();
        assert_eq!(content_chars(&message), expected);
    }

    #[test]
    fn slices_sum_rounded_messages() {
        let a = Message::text(Role::User, "abc"); // 19 chars -> 5 tokens
        let b = Message::text(Role::Assistant, "abcdefgh"); // 24 chars -> 6 tokens
        assert_eq!(estimate_message_tokens(&a), 5);
        assert_eq!(estimate_message_tokens(&b), 6);
        let both = [a, b];
        assert_eq!(estimate_messages_tokens(&both), 11);
        assert_eq!(estimate_messages_chars(&both), 43);
        assert_eq!(estimate_messages_tokens(&[]), 0);
    }
}

#[cfg(test)]
mod json_walk_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn walking_json_counts_what_serializing_would() {
        let values = [
            json!(null),
            json!({"path": "src/a.rs", "n": 12, "ok": true, "f": 1.5, "none": null}),
            json!({"content": "line 1\nline \"2\"\t\\ end\u{1}", "list": [1, "x", [], {}]}),
            json!({"中文": "你好世界", "mixed": "hi你好"}),
            json!([]),
        ];
        for value in values {
            let serialized = serde_json::to_string(&value).unwrap();
            assert_eq!(
                json_estimate_chars(&value),
                estimate_string_chars(&serialized),
                "{serialized}"
            );
        }
    }

    #[test]
    fn escapes_are_counted_at_every_position_of_a_word() {
        // Long strings are checked eight bytes at a time: put each kind of escape at every
        // offset, in words with and without other escapes.
        for special in [
            "\"", "\\", "\n", "\r", "\t", "\u{8}", "\u{c}", "\u{1}", "\u{1f}", "é",
        ] {
            for offset in 0..17 {
                for tail in ["", "abc", "\n\u{2}x"] {
                    let text = format!("{}{special}{}{tail}", "a".repeat(offset), "b".repeat(9));
                    let value = serde_json::Value::String(text);
                    let serialized = serde_json::to_string(&value).unwrap();
                    assert_eq!(
                        json_estimate_chars(&value),
                        estimate_string_chars(&serialized),
                        "{serialized}"
                    );
                }
            }
        }
    }
}
