//! Whether a turn recalls at all, and with what query: the query is built from the last user
//! messages' own words (injected `<tag>` blocks left out, each message cut to
//! [`MAX_QUERY_MESSAGE_CHARS`](super::MAX_QUERY_MESSAGE_CHARS)), and a greeting, a message too
//! short or one with no searchable word skips recall with a [`SkipReason`].

use std::fmt;

use serde::Serialize;

use super::{MAX_QUERY_MESSAGE_CHARS, RecallSettings};
use crate::compaction::asks::is_user_ask_with_text;
use crate::memory::dedup::words;
use crate::memory::levels::cut_at_word;
use crate::memory::query::QueryPlan;
use crate::message::{Message, Role};

/// Tags whose blocks inside a user message are context a harness or plugin injected, not words
/// of the user; they never become part of a query.
const INJECTED_TAGS: [&str; 5] = [
    "system-reminder",
    "openviking-context",
    "relevant-memories",
    "skald-memory",
    "memory-context",
];

/// Whole messages that are a greeting, a thank-you or an acknowledgement, after lower-casing
/// and dropping punctuation; recall is skipped for them (seed 002: "你好", "在吗", "hi",
/// "hello").
const GREETINGS: &[&str] = &[
    "hi",
    "hello",
    "hey",
    "hi there",
    "hello there",
    "hey there",
    "yo",
    "good morning",
    "good afternoon",
    "good evening",
    "thanks",
    "thank you",
    "thanks a lot",
    "thank you very much",
    "thx",
    "ty",
    "ok",
    "okay",
    "ok thanks",
    "ok thank you",
    "cool",
    "great",
    "nice",
    "yes",
    "no",
    "yep",
    "nope",
    "sure",
    "bye",
    "goodbye",
    "got it",
    "你好",
    "您好",
    "在吗",
    "在么",
    "谢谢",
    "多谢",
    "好的",
    "好",
    "嗯",
    "嗯嗯",
    "收到",
    "再见",
    "早上好",
    "晚上好",
    "こんにちは",
    "ありがとう",
    "안녕하세요",
    "hola",
    "gracias",
    "bonjour",
    "merci",
    "salut",
    "hallo",
    "danke",
    "ciao",
    "grazie",
    "olá",
    "obrigado",
    "привет",
    "спасибо",
];

/// Why no recall was made for a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum SkipReason {
    /// `enabled = false`.
    Disabled,
    /// No user message with text of its own (only injected or harness content).
    NoUserMessage,
    /// The latest user message is a greeting or an acknowledgement.
    Greeting {
        /// The greeting, as the user wrote it.
        text: String,
    },
    /// The latest user message is shorter than `min_query_chars`.
    TooShort {
        /// The message's length in characters.
        chars: usize,
        /// `min_query_chars`.
        min: usize,
    },
    /// The query has no word to search for.
    NoSearchableWords,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Disabled => f.write_str("recall is disabled"),
            SkipReason::NoUserMessage => f.write_str("no user message to recall for"),
            SkipReason::Greeting { text } => write!(f, "{text:?} is a greeting"),
            SkipReason::TooShort { chars, min } => write!(
                f,
                "the latest user message has {chars} characters, fewer than {min}"
            ),
            SkipReason::NoSearchableWords => f.write_str("the query has no words to search for"),
        }
    }
}

/// Whether `text` is, as a whole, a greeting, a thank-you or an acknowledgement.
pub fn is_greeting(text: &str) -> bool {
    let normalized = words(text).collect::<Vec<_>>().join(" ");
    !normalized.is_empty() && GREETINGS.contains(&normalized.as_str())
}

/// The text a person wrote in a user message: its text blocks, without blocks of injected
/// context (`<system-reminder>…</system-reminder>` and the like), trimmed. Empty for messages a
/// harness wrote (see [`is_user_ask`]).
pub fn user_text(message: &Message) -> String {
    if message.role != Role::User {
        return String::new();
    }
    let mut text = message.plain_text();
    for tag in INJECTED_TAGS {
        // Most messages hold none of them: no copy then (this runs over every user message of
        // a request, on every request).
        if text.contains(&format!("<{tag}")) {
            text = strip_tag_blocks(&text, tag);
        }
    }
    if is_user_ask_with_text(message, &text) {
        text.trim().to_owned()
    } else {
        String::new()
    }
}

fn strip_tag_blocks(text: &str, tag: &str) -> String {
    let open = format!("<{tag}");
    let close = format!("</{tag}>");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let Some(end) = rest
            .get(start..)
            .and_then(|tail| tail.find(&close))
            .map(|at| start + at + close.len())
        else {
            break;
        };
        out.push_str(rest.get(..start).unwrap_or(""));
        rest = rest.get(end..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// The recall query for the next model call: the texts of the last
/// [`RecallSettings::query_messages`] user messages, newest first (a query keeps at most
/// 32 words, so the newest message's words must come first), each cut to
/// [`MAX_QUERY_MESSAGE_CHARS`]; greetings and too-short earlier messages are left out. Or why
/// recall is skipped: judged on the latest user message alone.
pub fn recall_query(messages: &[Message], settings: &RecallSettings) -> Result<String, SkipReason> {
    if !settings.enabled {
        return Err(SkipReason::Disabled);
    }
    let mut texts = messages
        .iter()
        .rev()
        .map(user_text)
        .filter(|text| !text.is_empty());
    let Some(latest) = texts.next() else {
        return Err(SkipReason::NoUserMessage);
    };
    skip_reason(&latest, settings).map_or(Ok(()), Err)?;
    let mut parts = vec![cut_at_word(&latest, MAX_QUERY_MESSAGE_CHARS)];
    for text in texts.take(settings.query_messages.saturating_sub(1)) {
        if skip_reason(&text, settings).is_none() {
            parts.push(cut_at_word(&text, MAX_QUERY_MESSAGE_CHARS));
        }
    }
    let query = parts.join("\n");
    if QueryPlan::new(&query).is_empty() {
        return Err(SkipReason::NoSearchableWords);
    }
    Ok(query)
}

fn skip_reason(text: &str, settings: &RecallSettings) -> Option<SkipReason> {
    if is_greeting(text) {
        return Some(SkipReason::Greeting {
            text: cut_at_word(text, 40),
        });
    }
    let chars = text.chars().count();
    if chars < settings.min_query_chars {
        return Some(SkipReason::TooShort {
            chars,
            min: settings.min_query_chars,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::Value;

    fn user(text: &str) -> Message {
        Message::text(Role::User, text)
    }

    #[test]
    fn query_is_built_from_the_last_five_user_messages_newest_first() {
        let mut messages = Vec::new();
        for n in 1..=7 {
            messages.push(user(&format!("message number {n} about rust")));
            messages.push(Message::text(Role::Assistant, "noted"));
        }
        let query = recall_query(&messages, &RecallSettings::default()).unwrap();
        let lines: Vec<&str> = query.lines().collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0], "message number 7 about rust");
        assert_eq!(lines[4], "message number 3 about rust");
        let settings = RecallSettings {
            query_messages: 2,
            ..RecallSettings::default()
        };
        assert_eq!(
            recall_query(&messages, &settings).unwrap().lines().count(),
            2
        );
    }

    #[test]
    fn query_skips_injected_content_and_greetings_in_earlier_messages() {
        let mut meta = user("Caveat: generated by local commands.");
        meta.extra.insert("isMeta".into(), Value::Bool(true));
        let messages = vec![
            user("Which database does billing use?"),
            user("thanks"),
            meta,
            user("<system-reminder>files changed</system-reminder>And the cache layer?"),
        ];
        let query = recall_query(&messages, &RecallSettings::default()).unwrap();
        assert_eq!(
            query,
            "And the cache layer?\nWhich database does billing use?"
        );
    }

    #[test]
    fn greetings_skip_recall_in_several_languages() {
        for text in [
            "hi",
            "Hello!",
            "thank you.",
            "OK",
            "你好",
            "谢谢！",
            "在吗",
            "Merci",
            "hey there",
        ] {
            let result = recall_query(&[user(text)], &RecallSettings::default());
            assert!(
                matches!(
                    result,
                    Err(SkipReason::Greeting { .. }) | Err(SkipReason::TooShort { .. })
                ),
                "{text}: {result:?}"
            );
        }
        assert!(matches!(
            recall_query(&[user("hello there")], &RecallSettings::default()),
            Err(SkipReason::Greeting { .. })
        ));
        assert!(
            recall_query(
                &[user("hello, what is my editor theme?")],
                &RecallSettings::default()
            )
            .is_ok()
        );
    }

    #[test]
    fn messages_of_three_chars_or_fewer_skip_recall() {
        let error = recall_query(&[user("why")], &RecallSettings::default()).unwrap_err();
        assert_eq!(error, SkipReason::TooShort { chars: 3, min: 4 });
        assert_eq!(
            error.to_string(),
            "the latest user message has 3 characters, fewer than 4"
        );
        assert!(recall_query(&[user("why?!")], &RecallSettings::default()).is_ok());
        let disabled = RecallSettings {
            enabled: false,
            ..RecallSettings::default()
        };
        assert_eq!(
            recall_query(&[user("what is my theme")], &disabled),
            Err(SkipReason::Disabled)
        );
        assert_eq!(
            recall_query(
                &[Message::text(Role::Assistant, "hello")],
                &RecallSettings::default()
            ),
            Err(SkipReason::NoUserMessage)
        );
    }
}
