//! The nodes of a session: [`SessionHeader`] (what the session is), [`Entry`] (one node of the
//! append-only tree: an id, the parent it hangs under, a time) and [`EntryKind`] (what the node
//! records — a message, a compaction checkpoint, a branch summary, extension state, a setting
//! change). Field names follow pi's `SessionManager` types, so an entry is one line of an OpenClaw
//! session file; reading and writing that line is [`crate::codec::openclaw`]'s job, not this
//! module's.
//!
//! The accessors on [`EntryKind`] answer the questions the rest of skald asks of an entry without
//! matching on it: its pi `type`, its message, a `custom` record's data, a compaction's summary,
//! a `session_info` name, whether it is a compaction checkpoint, and whether
//! [`Session::build_context`](super::Session::build_context) can turn it into model-visible text.

use serde_json::Value;

use crate::message::{Block, ContentForm, Extra, Message};

/// The session format version this model is: pi's entry tree with ids and parents (version 2),
/// the `custom` message role (version 3), and OpenClaw 2026.9's `reset` boundaries and opaque
/// `leaf` navigation records (version 4, OpenClaw's `CURRENT_SESSION_VERSION`).
/// [`crate::codec::openclaw`] reads versions 1 to this one, migrating older files up to it, and
/// writes only this one. Version 3 needs no change to become 4: OpenClaw's own migration stops at
/// 3, and 4 only adds entry types.
pub const CURRENT_VERSION: u64 = 4;

/// Line 1 of a session file.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionHeader {
    /// Always [`CURRENT_VERSION`] once read: older files are migrated.
    pub version: u64,
    /// The session's own id, as the host that created it assigned it.
    pub id: String,
    /// ISO 8601 creation time.
    pub timestamp: Option<String>,
    /// The working directory the session started in (absent in old files).
    pub cwd: Option<String>,
    /// The session this one was forked from.
    pub parent_session: Option<String>,
    /// Header fields the model does not interpret, written back unchanged.
    pub extra: Extra,
}

impl Default for SessionHeader {
    fn default() -> Self {
        SessionHeader {
            version: CURRENT_VERSION,
            id: String::new(),
            timestamp: None,
            cwd: None,
            parent_session: None,
            extra: Extra::new(),
        }
    }
}

/// One line after the header: a node of the session tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// pi writes 8 lowercase hex digits; older or foreign files may use other strings.
    pub id: String,
    /// `None` for a root.
    pub parent_id: Option<String>,
    /// ISO 8601 time the entry was appended.
    pub timestamp: String,
    /// What the entry records.
    pub kind: EntryKind,
    /// Entry fields the model does not interpret, kept so the codec writes them back.
    pub extra: Extra,
}

/// What an entry records. Field names follow pi's `SessionManager` types.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryKind {
    /// `message`: an `AgentMessage`.
    Message(Message),
    /// `compaction`: everything on the path before `first_kept_entry_id` is replaced by `summary`.
    Compaction {
        /// The text that stands for everything before the first kept entry.
        summary: String,
        /// `None` when the file has none (a version-1 index that pointed nowhere): then no entry
        /// before the compaction is kept, as in pi.
        first_kept_entry_id: Option<String>,
        /// The context size in tokens when the compaction ran, as the host measured it.
        tokens_before: Option<u64>,
        /// Extension data about the compaction (skald's own outcome record among them); never shown
        /// to the model.
        details: Option<Value>,
        /// True when an extension hook wrote the summary rather than the host's own compaction.
        from_hook: Option<bool>,
    },
    /// `reset` (version 4): the conversation starts over here (`/new`, `/reset`, an idle or daily
    /// reset). Like a compaction it is a boundary: on the path, the context is what follows the
    /// last boundary, plus — for a reset with `first_kept_entry_id` — the user and assistant
    /// messages (and the tool results that answer their calls) from that entry up to the reset.
    Reset {
        /// Why: OpenClaw writes `new`, `reset`, `idle`, `daily` or `cron-stale`.
        reason: Option<String>,
        /// The first entry before the reset whose conversation is carried over; `None`: nothing is.
        first_kept_entry_id: Option<String>,
    },
    /// `branch_summary`: what happened on the branch the conversation came back from.
    BranchSummary {
        /// The entry the conversation returned from: the leaf of the abandoned branch.
        from_id: String,
        /// What happened on that branch, as the model will read it.
        summary: String,
        /// Extension data about the summary; never shown to the model.
        details: Option<Value>,
        /// True when an extension hook wrote the summary.
        from_hook: Option<bool>,
    },
    /// `custom`: extension state. Never in the model's context.
    Custom {
        /// Which extension the record belongs to; skald's own records use `skald.` names.
        custom_type: String,
        /// The extension's state, as it wrote it.
        data: Option<Value>,
    },
    /// `custom_message`: extension content that is in the model's context, as a user message.
    CustomMessage {
        /// Which extension wrote the message.
        custom_type: String,
        /// What the model reads, as a user message.
        content: Vec<Block>,
        /// How the file spelled `content`, so it is written back the same way.
        content_form: ContentForm,
        /// Whether the host shows the message in its own interface (the model sees it either way).
        display: Option<bool>,
        /// Extension data about the message; never shown to the model.
        details: Option<Value>,
    },
    /// `thinking_level_change`.
    ThinkingLevelChange {
        /// The reasoning effort chosen from here on (`off`, `low`, `high`…), as the host spells it.
        thinking_level: String,
    },
    /// `model_change`.
    ModelChange {
        /// The provider of the model chosen from here on.
        provider: String,
        /// The model chosen from here on, as the provider names it.
        model_id: String,
    },
    /// `label`: a bookmark on `target_id`; `None` clears it.
    Label {
        /// The entry the bookmark is on.
        target_id: String,
        /// The bookmark's text; `None` removes an earlier label of the same entry.
        label: Option<String>,
    },
    /// `session_info`: a display name.
    SessionInfo {
        /// The session's display name from here on; `None` clears it.
        name: Option<String>,
    },
    /// An entry type this model does not know (OpenClaw adds its own), or a known type whose body
    /// did not decode (reported as a [`LineIssue`](crate::codec::LineIssue)). Holds the entry
    /// object without `id`, `parentId` and `timestamp` (those live on [`Entry`]), `type`
    /// included, written back verbatim.
    ///
    /// OpenClaw's own opaque records are here too: a version-4 `leaf` record moves the active
    /// leaf (see [`EntryKind::leaf_control`]); it is not part of the conversation, and OpenClaw
    /// keeps it out of its typed entries in the same way.
    Other(Extra),
}

impl EntryKind {
    /// The `type` pi writes for this entry (`None` for an [`EntryKind::Other`] without a string
    /// `type`).
    pub fn type_name(&self) -> Option<&str> {
        Some(match self {
            EntryKind::Message(_) => "message",
            EntryKind::Compaction { .. } => "compaction",
            EntryKind::Reset { .. } => "reset",
            EntryKind::BranchSummary { .. } => "branch_summary",
            EntryKind::Custom { .. } => "custom",
            EntryKind::CustomMessage { .. } => "custom_message",
            EntryKind::ThinkingLevelChange { .. } => "thinking_level_change",
            EntryKind::ModelChange { .. } => "model_change",
            EntryKind::Label { .. } => "label",
            EntryKind::SessionInfo { .. } => "session_info",
            EntryKind::Other(body) => return body.get("type").and_then(Value::as_str),
        })
    }

    /// The message of a `message` entry.
    pub fn as_message(&self) -> Option<&Message> {
        match self {
            EntryKind::Message(message) => Some(message),
            EntryKind::Compaction { .. }
            | EntryKind::Reset { .. }
            | EntryKind::BranchSummary { .. }
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. }
            | EntryKind::Other(_) => None,
        }
    }

    /// The data of a `custom` entry of type `custom_type` (skald's own records, an
    /// extension's state).
    pub fn custom_data(&self, custom_type: &str) -> Option<&serde_json::Value> {
        match self {
            EntryKind::Custom {
                custom_type: found,
                data,
            } if found == custom_type => data.as_ref(),
            EntryKind::Message(_)
            | EntryKind::Compaction { .. }
            | EntryKind::Reset { .. }
            | EntryKind::BranchSummary { .. }
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. }
            | EntryKind::Other(_) => None,
        }
    }

    /// The summary of a `compaction` checkpoint: the text that stands for everything before its
    /// first kept entry.
    pub fn compaction_summary(&self) -> Option<&str> {
        match self {
            EntryKind::Compaction { summary, .. } => Some(summary),
            EntryKind::Message(_)
            | EntryKind::Reset { .. }
            | EntryKind::BranchSummary { .. }
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. }
            | EntryKind::Other(_) => None,
        }
    }

    /// The display name a `session_info` entry sets (`None` also when it clears the name).
    pub fn session_name(&self) -> Option<&str> {
        match self {
            EntryKind::SessionInfo { name } => name.as_deref(),
            EntryKind::Message(_)
            | EntryKind::Compaction { .. }
            | EntryKind::Reset { .. }
            | EntryKind::BranchSummary { .. }
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange { .. }
            | EntryKind::Label { .. }
            | EntryKind::Other(_) => None,
        }
    }

    /// True for a `compaction` checkpoint.
    pub fn is_compaction(&self) -> bool {
        match self {
            EntryKind::Compaction { .. } => true,
            EntryKind::Message(_)
            | EntryKind::Reset { .. }
            | EntryKind::BranchSummary { .. }
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. }
            | EntryKind::Other(_) => false,
        }
    }

    /// True for the kinds [`Session::build_context`](super::Session::build_context) can turn into
    /// model-visible text.
    pub fn feeds_context(&self) -> bool {
        match self {
            EntryKind::Message(_)
            | EntryKind::Compaction { .. }
            | EntryKind::BranchSummary { .. }
            | EntryKind::CustomMessage { .. } => true,
            // A reset shapes the context (it is a boundary) but says nothing to the model itself.
            EntryKind::Reset { .. }
            | EntryKind::Custom { .. }
            | EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. }
            | EntryKind::Other(_) => false,
        }
    }

    /// The `leaf` navigation record this is (version 4), when its fields have the shapes
    /// OpenClaw accepts (`targetId` a non-blank string or null; `appendParentId` absent, null or a
    /// non-blank string; `appendMode` absent or `"side"`). A `leaf` record of any other shape is
    /// ignored by OpenClaw's navigation, so `None` here too.
    pub fn leaf_control(&self) -> Option<LeafControl> {
        let body = match self {
            EntryKind::Other(body) => body,
            EntryKind::Message(_)
            | EntryKind::Compaction { .. }
            | EntryKind::Reset { .. }
            | EntryKind::BranchSummary { .. }
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. } => return None,
        };
        if body.get("type").and_then(Value::as_str) != Some("leaf") {
            return None;
        }
        // OpenClaw's `readNonBlankString`, with null allowed: `Some(None)` is null.
        let id_or_null = |value: &Value| match value {
            Value::Null => Some(None),
            Value::String(text) if !text.trim().is_empty() => Some(Some(text.clone())),
            Value::Bool(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Array(_)
            | Value::Object(_) => None,
        };
        let target_id = id_or_null(body.get("targetId")?)?;
        let append_parent_id = match body.get("appendParentId") {
            None => target_id.clone(),
            Some(value) => id_or_null(value)?,
        };
        let side = match body.get("appendMode") {
            None => false,
            Some(Value::String(mode)) if mode == "side" => true,
            Some(_) => return None,
        };
        Some(LeafControl {
            target_id,
            append_parent_id,
            side,
        })
    }

    /// The entry a `compaction` or `reset` boundary keeps the conversation from.
    pub fn first_kept_entry_id(&self) -> Option<&str> {
        match self {
            EntryKind::Compaction {
                first_kept_entry_id,
                ..
            }
            | EntryKind::Reset {
                first_kept_entry_id,
                ..
            } => first_kept_entry_id.as_deref(),
            EntryKind::Message(_)
            | EntryKind::BranchSummary { .. }
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. }
            | EntryKind::Other(_) => None,
        }
    }
}

/// A version-4 `leaf` record: OpenClaw's way of moving the active leaf without touching the tree.
/// From this record on, the conversation continues at `target_id`, and the host's next append
/// hangs under `append_parent_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafControl {
    /// The entry that becomes the leaf; `None` (null) empties the conversation.
    pub target_id: Option<String>,
    /// Where the host appends next; the target unless the record says otherwise.
    pub append_parent_id: Option<String>,
    /// `appendMode: "side"`: appends go beside the conversation, not onto it.
    pub side: bool,
}
