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

use serde_json::Value;
use xxhash_rust::xxh3::Xxh3Default;

use crate::message::{Block, ImageBlock, ImageSource, Message, Role};
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

/// What identifies a message's content, whatever its spelling: texts, thinking, images (by a
/// hash of their bytes or address), tool calls and results by their call ids (a result skald
/// truncated is still the same result), opaque blocks as written. A block's `cache_control`
/// is where the client put a cache breakpoint this time, not what it says (Claude Code moves it
/// to the newest message every call), so it is no part of the key.
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
                key.push_str(&format!("{:032x}", image_hash(image)));
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
                match value {
                    Value::Object(object) if object.contains_key(CACHE_CONTROL) => {
                        let mut object = object.clone();
                        object.remove(CACHE_CONTROL);
                        key.push_str(&Value::Object(object).to_string());
                    }
                    Value::Object(_)
                    | Value::Null
                    | Value::Bool(_)
                    | Value::Number(_)
                    | Value::String(_)
                    | Value::Array(_) => key.push_str(&value.to_string()),
                }
            }
        }
        key.push('\u{1f}');
    }
    key
}

/// The field a client marks a cache breakpoint with.
const CACHE_CONTROL: &str = "cache_control";

/// An image by what it shows: its bytes (base64, with their type) or its address, read once by
/// the hash (not printed first: an inline image is megabytes of base64).
fn image_hash(image: &ImageBlock) -> u128 {
    let mut hasher = Xxh3Default::new();
    let mut field = |tag: &[u8], text: &str| {
        hasher.update(tag);
        hasher.update(&(text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    };
    match &image.source {
        ImageSource::Base64 { media_type, data } => {
            field(b"b", media_type);
            field(b"d", data);
        }
        ImageSource::Url { url } => field(b"u", url),
    }
    hasher.digest128()
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

    fn image(data: &str, cache_control: bool) -> Block {
        let mut extra = crate::message::Extra::new();
        if cache_control {
            extra.insert(
                CACHE_CONTROL.to_owned(),
                serde_json::json!({"type": "ephemeral"}),
            );
        }
        Block::Image(ImageBlock {
            source: ImageSource::Base64 {
                media_type: "image/png".to_owned(),
                data: data.to_owned(),
            },
            extra,
        })
    }

    #[test]
    fn a_moved_cache_breakpoint_leaves_the_key_and_the_derived_id_alone() {
        // Claude Code marks the newest message's last block: on the first call that is the
        // opening's image, on the next it is not.
        let opening = |marked| {
            vec![Message::new(
                Role::User,
                vec![
                    Block::text("what is on the screen?"),
                    image("iVBORw0KGgo=", marked),
                ],
            )]
        };
        assert_eq!(derive(&opening(true)), derive(&opening(false)));
        let document = |marked: bool| {
            let mut value = serde_json::json!({"type": "document", "source": {"data": "JVBERi0="}});
            if marked {
                value[CACHE_CONTROL] = serde_json::json!({"type": "ephemeral"});
            }
            Message::new(Role::User, vec![Block::Opaque(value)])
        };
        assert_eq!(content_key(&document(true)), content_key(&document(false)));
    }

    #[test]
    fn images_key_by_their_bytes() {
        let with = |data| Message::new(Role::User, vec![image(data, false)]);
        assert_eq!(content_key(&with("AAAA")), content_key(&with("AAAA")));
        assert_ne!(content_key(&with("AAAA")), content_key(&with("AAAB")));
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
