//! OpenAI Responses wire format: request bodies (`model`, `instructions`, `input` items, `tools`)
//! and non-streaming responses (`object: "response"`, `output` items, `usage`), decoded into and
//! encoded from the neutral [`crate::message`] model.
//!
//! # Mapping
//! Responses has no messages, only a list of typed *items*; the codec maps them so the pipeline
//! sees ordinary turns, and so a response's `output` decodes exactly as the same items do when the
//! client sends them back in the next request's `input`:
//! - `instructions` (a string) becomes a leading [`Role::System`] message marked with
//!   [`INSTRUCTIONS_HINT`]; `input` given as a bare string becomes one [`Role::User`] message.
//! - A `message` item (or an "easy input message", `role` without `type`) with role `user`,
//!   `developer` or `system` is one message: `developer` and `system` are [`Role::System`], with
//!   [`ROLE_HINT`] `"system"` for the second spelling. `input_text`/`output_text` parts are text
//!   blocks, `input_image` parts with an `image_url` are images, other parts are opaque blocks.
//! - **A run of consecutive model-output items is one [`Role::Assistant`] message**, its blocks in
//!   item order: an assistant `message` item gives one text block per part (the item's own fields
//!   ride on the first as [`ITEM_HINT`]); a `function_call` is a [`Block::ToolCall`] (`call_id` is
//!   the id, `arguments` parsed, `arguments_text` kept; `id`, `status` and the rest in its extra);
//!   `reasoning` (with its `encrypted_content`), `custom_tool_call`, `local_shell_call`,
//!   `web_search_call` and the other hosted-tool calls are [`Block::Opaque`] blocks holding the
//!   item verbatim. An assistant `message` item whose content is not plain text parts (a
//!   `refusal`, no parts) is opaque too. Parallel calls thus share one assistant message, as in the
//!   other formats, and repair and turn counting see one turn per model response.
//! - A `function_call_output` is one [`Role::ToolResult`] message with one [`Block::ToolResult`]
//!   (`output` as text or as parts, its form kept; the item's other fields in the result's extra).
//!   Outputs of other tool kinds (`custom_tool_call_output`, `local_shell_call_output`…) are
//!   [`Role::ToolResult`] messages holding the item as an opaque block.
//! - Every other item (`compaction`, `context_compaction`, `item_reference`, types added later) is
//!   a [`Role::User`] message holding the item as one opaque block ([`OPAQUE_ITEMS_HINT`]), in
//!   place.
//! - Function tools (`{"type": "function", "name", …}`, flat) are tool specs; every other tool
//!   (`namespace`, `web_search`, `custom`, `local_shell`…) is a spec holding its fields verbatim in
//!   `extra`, named by its `name` or else its `type`, and is written back as it was.
//! - A response's `output` decodes to one assistant message by the rule above; its `meta` comes
//!   from `id`, `model`, `created_at`, `status` (plus `incomplete_details`, and whether it called a
//!   function) and `usage`, where `input_tokens` includes the cached tokens and [`Usage::input`]
//!   does not.
//!
//! # Round trips and provenance
//! `encode_request(&decode_request(v)?)` equals `v` as a [`serde_json::Value`] (key order inside
//! rebuilt objects is canonical), and likewise for responses. As in [`super::openai`], the decoder
//! marks what it produces with `extra[ORIGIN_KEY] = "responses"`, and the encoder writes extra
//! fields, hints and opaque blocks only for marked messages (top-level fields and non-function
//! tools only for a marked conversation). A marked message the pipeline built or changed (no item
//! hints) is written in the default spelling. Anything else is written as a valid Responses
//! request from its typed parts: the leading system messages become `instructions`, later ones
//! `developer` messages; text is `input_text` (`output_text` with empty `annotations` for the
//! assistant); tool calls are `function_call` items after their message's text; each tool result
//! is a `function_call_output` with string output, the images it carried following in a `user`
//! message; thinking and opaque blocks are dropped; tools are flat function tools with
//! `strict: false`; an OpenAI or Anthropic conversation's sampling parameters are translated.
//! [`ToolResult::details`] and `is_error` are never written (the format has no such field).

use serde_json::{Map, Value};

use super::json::{
    Path, as_object, count, each, insert_changed_str, insert_opt_str, object_entry, optional_array,
    optional_object, optional_str, required, required_array, required_str, rest, write_extra,
    wrong,
};
pub use super::openai::{HINT_PREFIX, ORIGIN_KEY};
use super::openai::{arguments_text, mark, origin, parse_arguments};
use crate::message::{
    Block, ContentForm, Conversation, Extra, ImageBlock, ImageSource, Message, MessageMeta, Role,
    StopReason, TextBlock, Timestamp, ToolCall, ToolResult, ToolSpec, Usage, join_text,
};

pub use super::wire::{WireError, WireResponse};

/// The [`ORIGIN_KEY`] value this codec writes.
pub const ORIGIN: &str = "responses";
/// On a [`Role::System`] message: `"system"` when the item spelled its role so (`developer` is
/// the default).
pub const ROLE_HINT: &str = "skald:responses.role";
/// On a [`Role::System`] message: it is the request's top-level `instructions`.
pub const INSTRUCTIONS_HINT: &str = "skald:responses.instructions";
/// On the first text block of an assistant `message` item: the item's fields other than
/// `content` (`type`, `role`, `id`, `status`…). A text block carrying it starts a new item.
pub const ITEM_HINT: &str = "skald:responses.item";
/// On a [`Role::User`] message: its opaque blocks are whole input items, not content parts.
pub const OPAQUE_ITEMS_HINT: &str = "skald:responses.items";

/// On a text block: the part's `type` when it is not the default for its place (`output_text` in
/// assistant items, `input_text` elsewhere).
const PART_HINT: &str = "skald:responses.part";
/// On an `output_text` block that had no `annotations` (others from elsewhere get an empty list).
const BARE_HINT: &str = "skald:responses.bare";
/// On the first text block of an assistant item whose `content` was a bare string.
const TEXT_CONTENT_HINT: &str = "skald:responses.text";
/// On a message: the item had no `type` (an easy input message).
const UNTYPED_HINT: &str = "skald:responses.untyped";
/// On a conversation: `input` was a bare string (`"text"`) or absent (`"absent"`).
const INPUT_HINT: &str = "skald:responses.input";
/// On a tool spec: not a function tool; its fields are in `extra`, written back verbatim.
const TOOL_HINT: &str = "skald:responses.tool";
/// On a verbatim tool spec that had no `name` (its `name` here is its `type`).
const NAMELESS_HINT: &str = "skald:responses.nameless";

/// Model-output items other than messages and function calls: kept opaque in the assistant turn.
const OUTPUT_ITEMS: [&str; 13] = [
    "reasoning",
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
    "file_search_call",
    "computer_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "tool_search_call",
    "shell_call",
];
/// Outputs of tools other than functions: kept opaque in a tool-result message.
const TOOL_OUTPUT_ITEMS: [&str; 6] = [
    "custom_tool_call_output",
    "local_shell_call_output",
    "computer_call_output",
    "mcp_approval_response",
    "tool_search_output",
    "shell_call_output",
];

/// Text put before images that came out of tool results from elsewhere.
const TOOL_IMAGES_LABEL: &str = "Attached image(s) from tool result:";
/// Output of a result from elsewhere that was only images.
const IMAGE_ONLY_RESULT: &str = "(see attached image)";

mod decode;
mod encode;

pub use decode::{decode_request, decode_request_str, decode_response, decode_response_str};
pub use encode::{encode_request, encode_response, tool_from_function_spec};

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

fn is_own(extra: &Extra) -> bool {
    origin(extra) == Some(ORIGIN)
}

fn hint<'e>(extra: &'e Extra, key: &str) -> Option<&'e str> {
    extra.get(key).and_then(Value::as_str)
}
