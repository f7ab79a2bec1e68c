//! The client's own spelling for what goes upstream. The session store keeps messages in
//! OpenClaw's form, which has no room for a wire format's hints (a `developer` role, a tool
//! result spelled as a string, a call without `type`…); the engine's prepared messages come from
//! the store. A prepared message skald did not change is put back exactly as the client sent it
//! (so the upstream sees the client's bytes and its prompt cache its prefix); a changed one — a
//! result behind a placeholder — keeps the spelling of the client's original: the message's
//! form and fields, and the tool result's content form.

use std::collections::HashMap;

use skald_core::identity::quick_message_identity;
use skald_core::message::{Block, ContentForm, Message};

/// The client's messages of one request, found by content or by tool call id.
#[derive(Debug, Default)]
pub struct ClientMessages {
    messages: Vec<Message>,
    /// Every position of each content, in order: the k-th prepared copy of a content takes the
    /// k-th original's spelling (a repeated "ok" may carry a cache breakpoint only the last time).
    by_identity: HashMap<u128, Vec<usize>>,
    by_call_id: HashMap<String, usize>,
}

impl ClientMessages {
    pub fn new(messages: Vec<Message>) -> ClientMessages {
        let mut by_identity = HashMap::with_capacity(messages.len());
        let mut by_call_id = HashMap::new();
        for (at, message) in messages.iter().enumerate() {
            by_identity
                .entry(quick_message_identity(message))
                .or_insert_with(Vec::new)
                .push(at);
            for result in message.tool_results() {
                by_call_id.entry(result.call_id.clone()).or_insert(at);
            }
        }
        ClientMessages {
            messages,
            by_identity,
            by_call_id,
        }
    }

    /// Puts the client's spelling back on every prepared message it has an original of.
    pub fn restore(&self, prepared: &mut [Message]) {
        let mut seen: HashMap<u128, usize> = HashMap::new();
        for message in prepared {
            let identity = quick_message_identity(message);
            let original = self.by_identity.get(&identity).and_then(|positions| {
                let nth = seen.entry(identity).or_insert(0);
                let at = positions.get(*nth).or_else(|| positions.last())?;
                *nth += 1;
                self.messages.get(*at)
            });
            if let Some(original) =
                original.filter(|original| same_content(&original.content, &message.content))
            {
                *message = original.clone();
                continue;
            }
            let original = message
                .tool_results()
                .next()
                .and_then(|result| self.by_call_id.get(&result.call_id))
                .and_then(|at| self.messages.get(*at));
            if let Some(original) = original {
                respell_results(message, original);
            }
        }
    }
}

/// A changed tool result message in its original's spelling.
fn respell_results(message: &mut Message, original: &Message) {
    message.extra = original.extra.clone();
    message.content_form = original.content_form;
    for block in &mut message.content {
        let Block::ToolResult(result) = block else {
            continue;
        };
        let Some(source) = original
            .tool_results()
            .find(|candidate| candidate.call_id == result.call_id)
        else {
            continue;
        };
        result.extra = source.extra.clone();
        let one_text = matches!(result.content.as_slice(), [Block::Text(_)]);
        result.content_form = match source.content_form {
            ContentForm::Text if !one_text => ContentForm::Blocks,
            form @ (ContentForm::Text
            | ContentForm::Blocks
            | ContentForm::Null
            | ContentForm::Absent) => form,
        };
        if matches!(result.content_form, ContentForm::Null | ContentForm::Absent)
            && !result.content.is_empty()
        {
            result.content_form = ContentForm::Blocks;
        }
    }
}

/// The same blocks, whatever their extra fields and hints.
fn same_content(a: &[Block], b: &[Block]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_block(a, b))
}

fn same_block(a: &Block, b: &Block) -> bool {
    match (a, b) {
        (Block::Text(a), Block::Text(b)) => a.text == b.text,
        (Block::Thinking(a), Block::Thinking(b)) => {
            a.thinking == b.thinking && a.signature == b.signature
        }
        (Block::ToolCall(a), Block::ToolCall(b)) => {
            a.id == b.id && a.name == b.name && a.arguments == b.arguments
        }
        (Block::ToolResult(a), Block::ToolResult(b)) => {
            a.call_id == b.call_id
                && a.failed() == b.failed()
                && same_content(&a.content, &b.content)
        }
        (Block::Image(a), Block::Image(b)) => a.source == b.source,
        (Block::Opaque(a), Block::Opaque(b)) => a == b,
        (
            Block::Text(_)
            | Block::Image(_)
            | Block::Thinking(_)
            | Block::ToolCall(_)
            | Block::ToolResult(_)
            | Block::Opaque(_),
            _,
        ) => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;
    use skald_core::codec::openai;
    use skald_core::codec::openclaw::{decode_agent_message, encode_agent_message};

    use super::*;

    /// What the session store gives back for a message.
    fn stored(message: &Message) -> Message {
        decode_agent_message(&encode_agent_message(message)).unwrap()
    }

    #[test]
    fn an_unchanged_message_comes_back_exactly_as_the_client_spelled_it() {
        let request = json!({"messages": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}]});
        let decoded = openai::decode_request(&request).unwrap();
        let client = ClientMessages::new(decoded.messages.clone());
        let mut prepared: Vec<Message> = decoded.messages.iter().map(stored).collect();
        client.restore(&mut prepared);
        let conversation = skald_core::message::Conversation {
            messages: prepared,
            ..decoded.clone()
        };
        assert_eq!(openai::encode_request(&conversation), request);
    }

    #[test]
    fn repeated_contents_keep_each_occurrences_own_fields() {
        let request = json!({"max_tokens": 10, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "go on"}]},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": [{"type": "text", "text": "go on",
                                          "cache_control": {"type": "ephemeral"}}]}]});
        let decoded = skald_core::codec::anthropic::decode_request(&request).unwrap();
        let client = ClientMessages::new(decoded.messages.clone());
        let mut prepared: Vec<Message> = decoded.messages.iter().map(stored).collect();
        client.restore(&mut prepared);
        let conversation = skald_core::message::Conversation {
            messages: prepared,
            ..decoded
        };
        assert_eq!(
            skald_core::codec::anthropic::encode_request(&conversation),
            request
        );
    }

    #[test]
    fn a_result_behind_a_placeholder_keeps_the_string_form() {
        let request = json!({"messages": [
            {"role": "tool", "tool_call_id": "c1", "content": "a long output"}]});
        let decoded = openai::decode_request(&request).unwrap();
        let client = ClientMessages::new(decoded.messages.clone());
        let mut prepared: Vec<Message> = decoded.messages.iter().map(stored).collect();
        if let Block::ToolResult(result) = &mut prepared[0].content[0] {
            result.content = vec![Block::text("[REF_ID: x] (Summary: short)")].into();
        }
        client.restore(&mut prepared);
        let conversation = skald_core::message::Conversation {
            messages: prepared,
            ..decoded
        };
        let encoded = openai::encode_request(&conversation);
        assert_eq!(
            encoded["messages"][0]["content"],
            "[REF_ID: x] (Summary: short)"
        );
    }
}
