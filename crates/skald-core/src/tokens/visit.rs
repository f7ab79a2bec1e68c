//! One walk over the model-visible content of a message, shared by the estimator, the BPE counter
//! and the cache fingerprint so the three can never disagree about what counts.

use serde_json::Value;

use crate::message::{Block, Message};

/// A piece of model-visible content.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Piece<'a> {
    /// Text counted as written.
    Text(&'a str),
    /// JSON counted as its compact serialization (tool arguments without a wire string, opaque
    /// blocks).
    Json(&'a Value),
    /// An image, counted at a fixed cost.
    Image,
}

/// Calls `f` for every counted piece of `message`'s content, in order. The role is not a piece:
/// the estimator ignores it and the BPE counter charges it separately.
pub(crate) fn visit_message<'a>(message: &'a Message, f: &mut impl FnMut(Piece<'a>)) {
    visit_blocks(&message.content, f);
}

fn visit_blocks<'a>(blocks: &'a [Block], f: &mut impl FnMut(Piece<'a>)) {
    for block in blocks {
        match block {
            Block::Text(text) => f(Piece::Text(&text.text)),
            Block::Image(_) => f(Piece::Image),
            Block::Thinking(thinking) => f(Piece::Text(&thinking.thinking)),
            Block::ToolCall(call) => {
                f(Piece::Text(&call.name));
                // The wire string is what the provider actually reads when a format kept it.
                match &call.arguments_text {
                    Some(text) => f(Piece::Text(text)),
                    None => f(Piece::Json(&call.arguments)),
                }
            }
            // `details` is host-only and deliberately not visited.
            Block::ToolResult(result) => visit_blocks(&result.content, f),
            Block::Opaque(value) => f(Piece::Json(value)),
        }
    }
}

/// Compact JSON text of a value, as providers receive it. Serializing a `Value` cannot fail (its
/// map keys are strings), so the empty fallback is never taken.
pub(crate) fn json_text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
