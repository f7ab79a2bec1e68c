//! The one derivation of a session id, for every way a conversation reaches skald — a proxied
//! request, an `assemble` with the host's messages, `skald import` of a transcript — so one
//! conversation is one session whichever way it came in.
//!
//! - A host that names its conversations (Claude Code's session id, Codex's thread id) gives
//!   [`for_client`]: `<host>-<its id>-<hash of the opening>`. Hosts reuse one id for several
//!   conversations at once (Claude Code's sub-agents share their parent's), so the opening —
//!   the system prompt and the first user message, which a resumed conversation sends again —
//!   tells them apart.
//! - Otherwise [`derive`]: `conv-<hash of the opening>`, the same for a conversation and for the
//!   same conversation grown longer.
//!
//! The opening is hashed by [`content_key`] (what a message says, whatever its spelling: a
//! string or blocks, extra fields, timestamps), so the same conversation in two wire formats
//! derives the same id.
//!
//! [`derive`]: fn@derive

use crate::message::{Block, Message, Role};
use crate::refs::RefId;

/// Hex digits of the opening's hash in a derived id.
const DERIVED_HEX: usize = 24;

/// Hex digits of the opening's hash joined to a host's own id.
const OPENING_HEX: usize = 12;

/// Characters of a host's own id kept (ids are at most 128 characters).
const MAX_CLIENT_ID_CHARS: usize = 80;

/// `conv-<24 hex>`: a stable id for a conversation that names none (see the module docs).
pub fn derive(messages: &[Message]) -> String {
    let hash = opening_hash(messages);
    let hex = hash.as_str().get(..DERIVED_HEX).unwrap_or(hash.as_str());
    format!("conv-{hex}")
}

/// `<host>-<client id>-<12 hex>`: the session of a conversation its host names `client_id`.
/// Characters a session id may not hold become `-`.
pub fn for_client(host: &str, client_id: &str, messages: &[Message]) -> String {
    let hash = opening_hash(messages);
    let opening = hash.as_str().get(..OPENING_HEX).unwrap_or(hash.as_str());
    let id: String = client_id
        .chars()
        .take(MAX_CLIENT_ID_CHARS)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{host}-{id}-{opening}")
}

/// The hash of a conversation's opening: its messages up to and including the first user
/// message, each as its role side and [`content_key`].
fn opening_hash(messages: &[Message]) -> RefId {
    let opening = messages
        .iter()
        .position(|message| message.role == Role::User)
        .map_or(messages.len(), |at| at + 1);
    let mut bytes = Vec::new();
    for message in messages.get(..opening).unwrap_or_default() {
        bytes.extend_from_slice(role_tag(&message.role).as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(content_key(message).as_bytes());
        bytes.push(b'\n');
    }
    RefId::of_bytes(&bytes)
}

/// The side of the conversation a role speaks for: tool results are the user's side (Anthropic
/// carries them in user messages, OpenAI in tool messages).
pub fn role_tag(role: &Role) -> &str {
    match role {
        Role::System => "system",
        Role::User | Role::ToolResult => "user",
        Role::Assistant => "assistant",
        Role::Custom(name) => name,
    }
}

/// What identifies a message's content, whatever its spelling: texts, thinking, images (by
/// hash), tool calls and results by their call ids (a result skald truncated is still the same
/// result), opaque blocks as written.
pub fn content_key(message: &Message) -> String {
    let mut key = String::new();
    for block in &message.content {
        match block {
            Block::Text(text) => {
                key.push_str("t:");
                key.push_str(&text.text);
            }
            Block::Image(image) => {
                key.push_str("i:");
                key.push_str(RefId::of_bytes(format!("{image:?}").as_bytes()).as_str());
            }
            Block::Thinking(thinking) => {
                key.push_str("k:");
                key.push_str(&thinking.thinking);
            }
            Block::ToolCall(call) => {
                key.push_str("c:");
                key.push_str(&call.id);
            }
            Block::ToolResult(result) => {
                key.push_str("r:");
                key.push_str(&result.call_id);
            }
            Block::Opaque(value) => {
                key.push_str("o:");
                key.push_str(&value.to_string());
            }
        }
        key.push('\u{1f}');
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_derived_id_follows_the_opening_not_the_length_or_the_spelling() {
        let mut conversation = vec![
            Message::text(Role::System, "be brief"),
            Message::text(Role::User, "hello"),
        ];
        let id = derive(&conversation);
        assert!(
            id.starts_with("conv-") && id.len() == 5 + DERIVED_HEX,
            "{id}"
        );
        conversation.push(Message::text(Role::Assistant, "hi"));
        assert_eq!(derive(&conversation), id);
        let spelled_as_blocks = vec![
            Message::new(Role::System, vec![Block::text("be brief")]),
            Message::new(Role::User, vec![Block::text("hello")]),
        ];
        assert_eq!(derive(&spelled_as_blocks), id);
        assert_ne!(derive(&[Message::text(Role::User, "goodbye")]), id);
    }

    #[test]
    fn a_hosts_id_is_joined_with_the_opening_and_made_valid() {
        let opening = [Message::text(Role::User, "fix the build")];
        let id = for_client("claude-code", "a b/c", &opening);
        assert!(id.starts_with("claude-code-a-b-c-"), "{id}");
        assert_eq!(id.len(), "claude-code-a-b-c-".len() + OPENING_HEX);
        assert_ne!(
            id,
            for_client(
                "claude-code",
                "a b/c",
                &[Message::text(Role::User, "another task")]
            )
        );
        let long = "x".repeat(500);
        assert!(for_client("codex", &long, &opening).len() <= 128);
    }
}
