//! A BPE token counter that remembers what it has counted.
//!
//! Every request re-counts the whole conversation, but only its tail is new. The counter keys each
//! message's count by an xxh3-128 fingerprint of exactly what the count depends on (role and
//! counted pieces, see [`crate::tokens`]) plus the encoding, so a repeat costs one hash of the
//! message instead of a tokenization. Ids, metadata, `extra` and `details` are not in the
//! fingerprint: two messages that read the same to the model share an entry.
//!
//! The cache is bounded by two generations: lookups read the current map, then the previous one
//! (promoting a hit); when the current map reaches `capacity` entries it becomes the previous map
//! and the old previous map is dropped. Memory therefore stays below `2 × capacity` entries, and a
//! message touched at least once per `capacity` insertions is never evicted, which is the access
//! pattern of a conversation re-counted on every turn.

use std::collections::HashMap;

use serde_json::Value;
use xxhash_rust::xxh3::Xxh3Default;

use crate::message::{Message, Role};

use super::bpe::{self, Encoding, REPLY_PRIMING_TOKENS};
use super::visit::{Piece, visit_message};

/// Default number of entries per generation (about 2.5 MB per generation at most).
pub const DEFAULT_CACHE_CAPACITY: usize = 64 * 1024;

/// Hits and misses since the counter was made or cleared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheStats {
    /// Messages whose token count came from the cache.
    pub hits: u64,
    /// Messages that had to be tokenized.
    pub misses: u64,
    /// Tokens produced by actual tokenization (misses only).
    pub tokenized_tokens: u64,
}

type Key = (u128, Encoding);

/// Cached BPE counting for one thread (`&mut self`, no locks).
#[derive(Debug, Clone)]
pub struct TokenCounter {
    encoding: Encoding,
    capacity: usize,
    current: HashMap<Key, u64>,
    previous: HashMap<Key, u64>,
    stats: CacheStats,
}

impl TokenCounter {
    /// A counter for `encoding` with [`DEFAULT_CACHE_CAPACITY`].
    pub fn new(encoding: Encoding) -> TokenCounter {
        TokenCounter::with_capacity(encoding, DEFAULT_CACHE_CAPACITY)
    }

    /// A counter with the encoding [`Encoding::for_model`] picks.
    pub fn for_model(model: &str) -> TokenCounter {
        TokenCounter::new(Encoding::for_model(model))
    }

    /// A counter keeping up to `capacity` entries per generation (at least 1).
    pub fn with_capacity(encoding: Encoding, capacity: usize) -> TokenCounter {
        TokenCounter {
            encoding,
            capacity: capacity.max(1),
            current: HashMap::new(),
            previous: HashMap::new(),
            stats: CacheStats::default(),
        }
    }

    /// The encoding counts are made with.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Switches the encoding; cached counts of either encoding stay valid, being keyed by it.
    pub fn set_encoding(&mut self, encoding: Encoding) {
        self.encoding = encoding;
    }

    /// BPE tokens of one message, as [`bpe::count_message`] would count them.
    pub fn count_message(&mut self, message: &Message) -> u64 {
        let key = (message_fingerprint(message), self.encoding);
        if let Some(&tokens) = self.current.get(&key) {
            self.stats.hits += 1;
            return tokens;
        }
        if let Some(tokens) = self.previous.remove(&key) {
            self.stats.hits += 1;
            self.insert(key, tokens);
            return tokens;
        }
        self.stats.misses += 1;
        let tokens = bpe::count_message(self.encoding, message);
        self.stats.tokenized_tokens += tokens;
        self.insert(key, tokens);
        tokens
    }

    /// BPE tokens of a slice: the sum of [`TokenCounter::count_message`].
    pub fn count_messages(&mut self, messages: &[Message]) -> u64 {
        messages
            .iter()
            .map(|message| self.count_message(message))
            .sum()
    }

    /// Tokens of a whole request's messages: [`TokenCounter::count_messages`] plus
    /// [`REPLY_PRIMING_TOKENS`] (nothing for an empty request).
    pub fn count_request(&mut self, messages: &[Message]) -> u64 {
        if messages.is_empty() {
            return 0;
        }
        self.count_messages(messages) + REPLY_PRIMING_TOKENS
    }

    /// Hits and misses so far.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Cached entries across both generations.
    pub fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every cached count and resets the statistics.
    pub fn clear(&mut self) {
        self.current.clear();
        self.previous.clear();
        self.stats = CacheStats::default();
    }

    fn insert(&mut self, key: Key, tokens: u64) {
        if self.current.len() >= self.capacity {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(key, tokens);
    }
}

/// A 128-bit fingerprint of what a message's token count depends on: its role and its counted
/// pieces, each tagged and length-prefixed so that different splits of the same text differ.
pub fn message_fingerprint(message: &Message) -> u128 {
    let mut hasher = Xxh3Default::new();
    match &message.role {
        Role::System => hasher.update(&[0]),
        Role::User => hasher.update(&[1]),
        Role::Assistant => hasher.update(&[2]),
        Role::ToolResult => hasher.update(&[3]),
        Role::Custom(name) => {
            hasher.update(&[4]);
            hash_str(&mut hasher, name);
        }
    }
    visit_message(message, &mut |piece| match piece {
        Piece::Text(text) => {
            hasher.update(b"T");
            hash_str(&mut hasher, text);
        }
        Piece::Json(value) => {
            hasher.update(b"J");
            hash_value(&mut hasher, value);
        }
        Piece::Image => hasher.update(b"I"),
    });
    hasher.digest128()
}

fn hash_str(hasher: &mut Xxh3Default, text: &str) {
    hasher.update(&(text.len() as u64).to_le_bytes());
    hasher.update(text.as_bytes());
}

/// Hashes a JSON value by structure; values that serialize to the same text hash the same, without
/// serializing.
fn hash_value(hasher: &mut Xxh3Default, value: &Value) {
    match value {
        Value::Null => hasher.update(b"n"),
        Value::Bool(flag) => hasher.update(if *flag { b"t" } else { b"f" }),
        Value::Number(number) => {
            if let Some(n) = number.as_u64() {
                hasher.update(b"u");
                hasher.update(&n.to_le_bytes());
            } else if let Some(n) = number.as_i64() {
                hasher.update(b"i");
                hasher.update(&n.to_le_bytes());
            } else {
                hasher.update(b"d");
                let n = number.as_f64().unwrap_or(f64::NAN);
                hasher.update(&n.to_bits().to_le_bytes());
            }
        }
        Value::String(text) => {
            hasher.update(b"s");
            hash_str(hasher, text);
        }
        Value::Array(items) => {
            hasher.update(b"[");
            hasher.update(&(items.len() as u64).to_le_bytes());
            for item in items {
                hash_value(hasher, item);
            }
        }
        Value::Object(map) => {
            hasher.update(b"{");
            hasher.update(&(map.len() as u64).to_le_bytes());
            for (key, item) in map {
                hash_str(hasher, key);
                hash_value(hasher, item);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;
    use crate::message::{Block, ContentForm, Extra, ToolCall, ToolResult};

    fn conversation(turns: usize) -> Vec<Message> {
        let mut messages = vec![Message::text(Role::System, "You are terse.")];
        for turn in 0..turns {
            messages.push(Message::text(Role::User, format!("question {turn}")));
            messages.push(Message::text(
                Role::Assistant,
                format!("answer {turn} ").repeat(50),
            ));
        }
        messages
    }

    #[test]
    fn cached_counts_equal_direct_counts() {
        let messages = conversation(10);
        let mut counter = TokenCounter::new(Encoding::O200kBase);
        let direct = bpe::count_messages(Encoding::O200kBase, &messages);
        assert_eq!(counter.count_messages(&messages), direct);
        assert_eq!(counter.count_messages(&messages), direct);
        assert_eq!(
            counter.count_request(&messages),
            direct + REPLY_PRIMING_TOKENS
        );
        assert_eq!(counter.count_request(&[]), 0);
    }

    #[test]
    fn appending_a_turn_tokenizes_only_the_new_turn() {
        let mut messages = conversation(20);
        let mut counter = TokenCounter::new(Encoding::O200kBase);
        counter.count_messages(&messages);
        let before = counter.stats();
        assert_eq!(before.misses as usize, messages.len());

        messages.push(Message::text(Role::User, "one more"));
        let total = counter.count_messages(&messages);
        let after = counter.stats();
        assert_eq!(after.misses, before.misses + 1);
        assert_eq!(after.hits, before.hits + messages.len() as u64 - 1);
        assert_eq!(
            after.tokenized_tokens - before.tokenized_tokens,
            bpe::count_message(Encoding::O200kBase, &Message::text(Role::User, "one more"))
        );
        assert_eq!(total, bpe::count_messages(Encoding::O200kBase, &messages));
    }

    #[test]
    fn cache_is_keyed_by_encoding() {
        let messages = conversation(3);
        let mut counter = TokenCounter::new(Encoding::O200kBase);
        let o200k = counter.count_messages(&messages);
        counter.set_encoding(Encoding::Cl100kBase);
        let cl100k = counter.count_messages(&messages);
        assert_eq!(cl100k, bpe::count_messages(Encoding::Cl100kBase, &messages));
        assert_eq!(o200k, bpe::count_messages(Encoding::O200kBase, &messages));
        assert_eq!(counter.stats().hits, 0);
    }

    #[test]
    fn cache_stays_bounded_and_keeps_recent_entries() {
        let mut counter = TokenCounter::with_capacity(Encoding::O200kBase, 8);
        for i in 0..100 {
            counter.count_message(&Message::text(Role::User, format!("message {i}")));
            assert!(counter.len() <= 16);
        }
        let misses = counter.stats().misses;
        counter.count_message(&Message::text(Role::User, "message 99"));
        assert_eq!(counter.stats().misses, misses);
        counter.clear();
        assert!(counter.is_empty());
    }

    #[test]
    fn fingerprint_ignores_what_is_not_counted() {
        let result = |call_id: &str, details: Option<serde_json::Value>| {
            let mut message = Message::new(
                Role::ToolResult,
                vec![Block::ToolResult(ToolResult {
                    call_id: call_id.into(),
                    tool_name: None,
                    content: vec![Block::text("ok")].into(),
                    content_form: ContentForm::Text,
                    is_error: None,
                    details: details.map(std::sync::Arc::new),
                    extra: Extra::new(),
                })],
            );
            message.meta.id = Some(call_id.to_owned());
            message
        };
        assert_eq!(
            message_fingerprint(&result("a", None)),
            message_fingerprint(&result("b", Some(json!({"x": 1}))))
        );
    }

    #[test]
    fn fingerprint_separates_what_is_counted() {
        let user = Message::text(Role::User, "ab");
        let assistant = Message::text(Role::Assistant, "ab");
        let split = Message::new(Role::User, vec![Block::text("a"), Block::text("b")]);
        let custom = Message::text(Role::Custom("note".into()), "ab");
        let prints = [&user, &assistant, &split, &custom].map(message_fingerprint);
        for (i, a) in prints.iter().enumerate() {
            for b in &prints[i + 1..] {
                assert_ne!(a, b);
            }
        }
        let call = |arguments| {
            Message::new(
                Role::Assistant,
                vec![Block::ToolCall(ToolCall {
                    id: "c".into(),
                    name: "f".into(),
                    arguments,
                    arguments_text: None,
                    extra: Extra::new(),
                })],
            )
        };
        assert_ne!(
            message_fingerprint(&call(json!({"n": 1}))),
            message_fingerprint(&call(json!({"n": 1.0})))
        );
        assert_ne!(
            message_fingerprint(&call(json!({"n": "1"}))),
            message_fingerprint(&call(json!({"n": 1})))
        );
        assert_eq!(
            message_fingerprint(&call(json!({"a": [1, {"b": null}]}))),
            message_fingerprint(&call(json!({"a": [1, {"b": null}]})))
        );
    }
}
