//! The context pi sends to the model, rebuilt from a session: [`Session::build_context`] (pi's
//! `buildSessionContext`) and [`convert_to_llm`] (pi's `convertToLlm`), as OpenClaw runs them.
//!
//! Only the active path counts. A compaction checkpoint on it (the last one) replaces everything
//! before its first kept entry with its summary, wrapped in [`COMPACTION_SUMMARY_PREFIX`] /
//! [`COMPACTION_SUMMARY_SUFFIX`]; a branch summary becomes a user message wrapped in
//! [`BRANCH_SUMMARY_PREFIX`] / [`BRANCH_SUMMARY_SUFFIX`]; custom roles become user messages or
//! drop out. The wrappers are pi's exact text, so other parts of skald (the extractive
//! summarizer) can recognise an earlier summary in a context.
//!
//! [`session_context`] is that context as skald uses it everywhere (compaction, the memory
//! archive and upload, the engine's view): root system messages stored as entries stay in front
//! of a compaction summary.

use serde_json::Value;

use super::{Entry, EntryKind, Session};
use crate::message::{Block, Extra, Message, MessageMeta, Role, Timestamp};

/// pi wraps a compaction summary in this text (and [`COMPACTION_SUMMARY_SUFFIX`]) for the model.
pub const COMPACTION_SUMMARY_PREFIX: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
/// Closes [`COMPACTION_SUMMARY_PREFIX`].
pub const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";
/// pi wraps a branch summary in this text (and [`BRANCH_SUMMARY_SUFFIX`]) for the model.
pub const BRANCH_SUMMARY_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
/// Closes [`BRANCH_SUMMARY_PREFIX`]; pi writes it without a leading newline.
pub const BRANCH_SUMMARY_SUFFIX: &str = "</summary>";

impl Session {
    /// The messages pi sends to the model from `leaf` (`None`: the current leaf): OpenClaw
    /// 2026.9's `buildSessionContext` followed by `convertToLlm`.
    ///
    /// The last boundary on the path — a compaction or a version-4 reset — cuts the context:
    /// - a compaction's summary comes first as a user message wrapped in
    ///   [`COMPACTION_SUMMARY_PREFIX`] / [`COMPACTION_SUMMARY_SUFFIX`], then the entries from its
    ///   `firstKeptEntryId` up to it;
    /// - a reset says nothing itself; from its `firstKeptEntryId` up to it, only user and
    ///   assistant messages and the tool results that answer their calls are carried over;
    ///
    /// then the entries after the boundary. Message entries go through [`convert_to_llm`] (one
    /// marked `excludeFromContext` is left out, unless a reset carries it over);
    /// `custom_message` entries become user messages with their content; `branch_summary` entries
    /// with a non-empty summary become user messages wrapped in [`BRANCH_SUMMARY_PREFIX`] /
    /// [`BRANCH_SUMMARY_SUFFIX`]; other entries add nothing. Every message's `meta.id` is the id
    /// of the entry it came from.
    pub fn build_context(&self, leaf: Option<&str>) -> Vec<Message> {
        let path = self.path_to(leaf);
        let boundary = path.iter().rposition(|entry| {
            matches!(
                entry.kind,
                EntryKind::Compaction { .. } | EntryKind::Reset { .. }
            )
        });
        let mut out = Vec::new();
        let Some(at) = boundary else {
            for entry in &path {
                push_context(entry, &mut out);
            }
            return out;
        };
        let Some(boundary_entry) = path.get(at) else {
            return out;
        };
        // OpenClaw's `resolveSessionContextWindow`: a first kept entry not before the boundary
        // keeps nothing.
        let kept_from = boundary_entry
            .kind
            .first_kept_entry_id()
            .and_then(|kept| path.iter().take(at).position(|entry| entry.id == kept))
            .unwrap_or(at);
        let retained = path.get(kept_from..at).unwrap_or_default();
        match &boundary_entry.kind {
            EntryKind::Compaction { summary, .. } => {
                out.push(summary_message(
                    boundary_entry,
                    COMPACTION_SUMMARY_PREFIX,
                    summary,
                    COMPACTION_SUMMARY_SUFFIX,
                ));
                for kept in retained {
                    push_context(kept, &mut out);
                }
            }
            EntryKind::Reset { .. } => {
                for kept in reset_kept(retained) {
                    if let EntryKind::Message(message) = &kept.kind {
                        let mut carried = message.clone();
                        carried.meta.id = Some(kept.id.clone());
                        out.push(carried);
                    }
                }
            }
            EntryKind::Message(_)
            | EntryKind::BranchSummary { .. }
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. }
            | EntryKind::Other(_) => {}
        }
        for after in path.iter().skip(at + 1) {
            push_context(after, &mut out);
        }
        out
    }
}

/// OpenClaw's `selectResetKeptEntries`: of the entries a reset carries over, the user and
/// assistant messages, and the tool results that answer a tool call among them (a result whose
/// call is not carried over would be an orphan the provider refuses). A result answers the latest
/// earlier call of its id not answered yet; a second result for the same call is left out. (OpenClaw
/// pairs within each assistant's turn first and refuses a late result that two unanswered calls
/// could claim; and it swaps its own synthetic "missing tool result" stubs for a late real one.
/// Those corner cases are not modelled here.)
fn reset_kept<'a>(entries: &[&'a Entry]) -> Vec<&'a Entry> {
    // Open calls by id, oldest first, each a slot that a result can answer once.
    let mut open: Vec<(String, bool)> = Vec::new();
    let mut kept = Vec::new();
    for entry in entries {
        let Some(message) = entry.kind.as_message() else {
            continue;
        };
        match &message.role {
            Role::User => kept.push(*entry),
            Role::Assistant => {
                for call in message.tool_calls() {
                    open.push((call.id.clone(), false));
                }
                kept.push(*entry);
            }
            Role::ToolResult => {
                let answered = message.tool_results().any(|result| {
                    let id = &result.call_id;
                    // The latest unanswered call of this id.
                    let slot = open
                        .iter_mut()
                        .rev()
                        .find(|(call, done)| call == id && !*done);
                    match slot {
                        Some((_, done)) => {
                            *done = true;
                            true
                        }
                        None => false,
                    }
                });
                if answered {
                    kept.push(*entry);
                }
            }
            Role::System | Role::Custom(_) => {}
        }
    }
    kept
}

/// pi's `convertToLlm` for one message: the three model roles pass through; custom roles become
/// user messages (`bashExecution` as "Ran `cmd`" text unless `excludeFromContext`, `custom` and
/// `hookMessage` with their content, `branchSummary` and `compactionSummary` wrapped in their
/// `<summary>` text); any other custom role is not for the model and gives `None`.
///
/// Converted messages keep the original's `meta.id` and `meta.timestamp` and nothing else, as pi
/// keeps only `timestamp`.
pub fn convert_to_llm(message: &Message) -> Option<Message> {
    let name = match &message.role {
        Role::System | Role::User | Role::Assistant | Role::ToolResult => {
            return Some(message.clone());
        }
        Role::Custom(name) => name.as_str(),
    };
    let text_field = |key: &str| message.extra.get(key).and_then(Value::as_str);
    let content = match name {
        "bashExecution" => {
            if message.extra.get("excludeFromContext") == Some(&Value::Bool(true)) {
                return None;
            }
            vec![Block::text(bash_execution_text(&message.extra))]
        }
        "custom" | "hookMessage" => message.content.to_vec(),
        "branchSummary" => vec![Block::text(format!(
            "{BRANCH_SUMMARY_PREFIX}{}{BRANCH_SUMMARY_SUFFIX}",
            text_field("summary")?
        ))],
        "compactionSummary" => vec![Block::text(format!(
            "{COMPACTION_SUMMARY_PREFIX}{}{COMPACTION_SUMMARY_SUFFIX}",
            text_field("summary")?
        ))],
        _ => return None,
    };
    Some(Message {
        meta: MessageMeta {
            id: message.meta.id.clone(),
            timestamp: message.meta.timestamp.clone(),
            ..MessageMeta::default()
        },
        ..Message::new(Role::User, content)
    })
}

/// pi's `bashExecutionToText`, including its JavaScript truthiness rules.
fn bash_execution_text(fields: &Extra) -> String {
    let text_of = |key: &str| fields.get(key).and_then(Value::as_str).unwrap_or("");
    let is_true = |key: &str| fields.get(key) == Some(&Value::Bool(true));
    let mut text = format!("Ran `{}`\n", text_of("command"));
    let output = text_of("output");
    if output.is_empty() {
        text.push_str("(no output)");
    } else {
        text.push_str(&format!("```\n{output}\n```"));
    }
    let exit_code = match fields.get("exitCode") {
        Some(Value::Number(code)) if code.as_f64() != Some(0.0) => Some(code.to_string()),
        Some(Value::String(code)) => Some(code.clone()),
        Some(Value::Bool(flag)) => Some(flag.to_string()),
        Some(Value::Number(_) | Value::Null | Value::Array(_) | Value::Object(_)) | None => None,
    };
    if is_true("cancelled") {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = exit_code {
        text.push_str(&format!("\n\nCommand exited with code {code}"));
    }
    let full_output = text_of("fullOutputPath");
    if is_true("truncated") && !full_output.is_empty() {
        text.push_str(&format!(
            "\n\n[Output truncated. Full output: {full_output}]"
        ));
    }
    text
}

fn entry_timestamp(entry: &Entry) -> Timestamp {
    match crate::time::parse_rfc3339_millis(&entry.timestamp) {
        Some(millis) => Timestamp::Millis(millis),
        None => Timestamp::Rfc3339(entry.timestamp.clone()),
    }
}

fn user_message_from(entry: &Entry, content: Vec<Block>) -> Message {
    Message {
        meta: MessageMeta {
            id: Some(entry.id.clone()),
            timestamp: Some(entry_timestamp(entry)),
            ..MessageMeta::default()
        },
        ..Message::new(Role::User, content)
    }
}

fn summary_message(entry: &Entry, prefix: &str, summary: &str, suffix: &str) -> Message {
    user_message_from(
        entry,
        vec![Block::text(format!("{prefix}{summary}{suffix}"))],
    )
}

fn push_context(entry: &Entry, out: &mut Vec<Message>) {
    match &entry.kind {
        EntryKind::Message(message) => {
            // OpenClaw's `projectSessionEntryMessage` leaves out any message so marked, of
            // every role (pi only honoured it on `bashExecution`).
            if message.extra.get("excludeFromContext") == Some(&Value::Bool(true)) {
                return;
            }
            if let Some(mut converted) = convert_to_llm(message) {
                converted.meta.id = Some(entry.id.clone());
                out.push(converted);
            }
        }
        EntryKind::CustomMessage { content, .. } => {
            out.push(user_message_from(entry, content.clone()));
        }
        EntryKind::BranchSummary { summary, .. } => {
            if !summary.is_empty() {
                out.push(summary_message(
                    entry,
                    BRANCH_SUMMARY_PREFIX,
                    summary,
                    BRANCH_SUMMARY_SUFFIX,
                ));
            }
        }
        EntryKind::Compaction { .. }
        | EntryKind::Reset { .. }
        | EntryKind::Custom { .. }
        | EntryKind::ThinkingLevelChange { .. }
        | EntryKind::ModelChange { .. }
        | EntryKind::Label { .. }
        | EntryKind::SessionInfo { .. }
        | EntryKind::Other(_) => {}
    }
}

/// The model-visible context of a stored session from its leaf, as [`Session::build_context`]
/// builds it, plus one thing OpenClaw's sessions never need: system messages stored as entries
/// at the root of the path (imported Chat Completions transcripts have them) stay in front of a
/// compaction summary instead of being summarised away.
pub fn session_context(session: &Session, leaf: Option<&str>) -> Vec<Message> {
    let mut context = session.build_context(leaf);
    let path = session.path_to(leaf);
    let Some(compaction_at) = path.iter().rposition(|entry| entry.kind.is_compaction()) else {
        return context;
    };
    let visible: std::collections::HashSet<&str> = context
        .iter()
        .filter_map(|message| message.meta.id.as_deref())
        .collect();
    let pinned: Vec<Message> = path
        .iter()
        .take(compaction_at)
        .map_while(|entry| {
            entry
                .kind
                .as_message()
                .filter(|message| message.role == Role::System)
        })
        .filter(|message| {
            message
                .meta
                .id
                .as_deref()
                .is_none_or(|id| !visible.contains(id))
        })
        .cloned()
        .collect();
    if !pinned.is_empty() {
        context.splice(0..0, pinned);
    }
    context
}

/// What [`session_context`] from `leaf` holds beyond [`session_context`] from `since`, when the
/// path to `leaf` runs through `since` and adds no compaction or reset after it: then the
/// context of `leaf` is the context of `since` followed by these messages, and a reader that
/// holds the one gets the other without rebuilding it. `None` when that is not so (another
/// branch, a new boundary): rebuild.
pub fn context_appended(
    session: &Session,
    since: &str,
    leaf: Option<&str>,
) -> Option<Vec<Message>> {
    let path = session.path_to(leaf);
    let at = path.iter().rposition(|entry| entry.id == since)?;
    // The path to `since` must be the start of this one (it is, where paths follow parents).
    if session.path_to(Some(since)).len() != at + 1 {
        return None;
    }
    let after = path.get(at + 1..).unwrap_or_default();
    if after.iter().any(|entry| {
        matches!(
            entry.kind,
            EntryKind::Compaction { .. } | EntryKind::Reset { .. }
        )
    }) {
        return None;
    }
    let mut out = Vec::new();
    for entry in after {
        push_context(entry, &mut out);
    }
    Some(out)
}
