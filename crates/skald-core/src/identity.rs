//! Cheap identities of content, for memo keys: a hash of lengths and of the first and last bytes
//! of every text instead of the whole text. Computing one costs O(blocks), not O(content), which
//! is what lets a request over a long session cost work only for what is new in it. Sessions are
//! append-only, so content that keeps its place, its lengths and its edges is the same content;
//! each caller says what a collision would cost it.

use xxhash_rust::xxh3::Xxh3;

use crate::message::{Block, Message};

/// Feeds `text`'s length and its first and last `edge` bytes to `hasher`.
pub fn hash_edges(hasher: &mut Xxh3, text: &str, edge: usize) {
    let bytes = text.as_bytes();
    hasher.update(&(bytes.len() as u64).to_le_bytes());
    hasher.update(bytes.get(..edge).unwrap_or(bytes));
    hasher.update(
        bytes
            .get(bytes.len().saturating_sub(edge)..)
            .unwrap_or(bytes),
    );
}

/// A cheap identity of a message: role, and for every block its kind, length, and first and
/// last bytes. The engine keys its per-message token estimates with it: two different messages
/// that collided would skew an estimate, never change what the model sees.
pub fn quick_message_identity(message: &Message) -> u128 {
    const EDGE: usize = 64;
    fn blocks(hasher: &mut Xxh3, content: &[Block]) {
        for block in content {
            match block {
                Block::Text(t) => {
                    hasher.update(b"t");
                    hash_edges(hasher, &t.text, EDGE);
                }
                Block::Thinking(t) => {
                    hasher.update(b"k");
                    hash_edges(hasher, &t.thinking, EDGE);
                }
                Block::ToolCall(call) => {
                    hasher.update(b"c");
                    hasher.update(call.id.as_bytes());
                    hasher.update(call.name.as_bytes());
                    if let serde_json::Value::Object(fields) = &call.arguments {
                        for (key, value) in fields {
                            hasher.update(key.as_bytes());
                            match value {
                                serde_json::Value::String(s) => hash_edges(hasher, s, EDGE),
                                serde_json::Value::Null
                                | serde_json::Value::Bool(_)
                                | serde_json::Value::Number(_)
                                | serde_json::Value::Array(_)
                                | serde_json::Value::Object(_) => {
                                    hasher.update(value.to_string().as_bytes())
                                }
                            }
                        }
                    }
                }
                Block::ToolResult(result) => {
                    hasher.update(b"r");
                    hasher.update(result.call_id.as_bytes());
                    blocks(hasher, &result.content);
                }
                Block::Image(_) => hasher.update(b"i"),
                Block::Opaque(value) => hasher.update(value.to_string().as_bytes()),
            }
        }
    }
    let mut hasher = Xxh3::new();
    hasher.update(message.role.name().as_bytes());
    blocks(&mut hasher, &message.content);
    hasher.digest128()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_follows_length_and_edges() {
        let a = Message::text(crate::message::Role::User, "x".repeat(1_000));
        let b = Message::text(crate::message::Role::User, "x".repeat(1_001));
        let c = Message::text(crate::message::Role::Assistant, "x".repeat(1_000));
        assert_eq!(
            quick_message_identity(&a),
            quick_message_identity(&a.clone())
        );
        assert_ne!(quick_message_identity(&a), quick_message_identity(&b));
        assert_ne!(quick_message_identity(&a), quick_message_identity(&c));
    }
}
