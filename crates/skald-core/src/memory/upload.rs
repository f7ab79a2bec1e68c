//! The two-threshold compact upload (seed 002, "Two-Threshold Compact Upload Mechanism") as a
//! pure state machine: given the live context, its size, the window and the state of the
//! session's upload, [`plan_upload`] says what to do before this request.
//!
//! - At [`UploadSettings::upload_ratio`] (50 %) of the window, with no upload running: start one
//!   in the background ([`UploadDecision::StartUpload`]) for the older messages not yet
//!   uploaded. The newest turns (as compaction keeps them) stay out of it, and the range never
//!   ends between a tool call and its result. Nothing leaves the context yet.
//! - At [`UploadSettings::drop_ratio`] (70 %): the range being uploaded leaves the context even
//!   though the upload still runs ([`DropReason::ForcedAtDropThreshold`]); the upload holds its
//!   own copy, and the session store keeps every entry.
//! - When the upload has completed (below 70 %, or above): only its range leaves
//!   ([`DropReason::UploadCompleted`]).
//! - Otherwise nothing ([`UploadDecision::Nothing`], with the reason).
//!
//! Messages that arrived after the upload started are never in its range, so they always stay.
//! A failed upload whose range is still in the context is started again (a retry); one whose
//! range already left is retried by the engine from the session store.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::compaction::settings::{DEFAULT_KEEP_RECENT_TURNS, MAX_KEEP_RECENT_TURNS};
use crate::compaction::split::split_preserved_recent_turns;
use crate::message::Message;

/// Threshold 1 of the seed: start the background upload.
pub const DEFAULT_UPLOAD_RATIO: f64 = 0.5;

/// Threshold 2 of the seed: the uploaded range leaves the context, finished or not.
pub const DEFAULT_DROP_RATIO: f64 = 0.7;

/// The background upload's settings (`[memory.upload]`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct UploadSettings {
    /// Whether the two-threshold upload runs at all.
    pub enabled: bool,
    /// Share of the window from which an upload starts (seed: 0.5).
    pub upload_ratio: f64,
    /// Share of the window from which the range being uploaded leaves the context (seed: 0.7).
    pub drop_ratio: f64,
    /// User turns kept out of an upload (and so in the context), as compaction keeps them.
    pub keep_recent_turns: usize,
    /// Fewest messages worth an upload.
    pub min_messages: usize,
}

impl Default for UploadSettings {
    fn default() -> Self {
        UploadSettings {
            enabled: true,
            upload_ratio: DEFAULT_UPLOAD_RATIO,
            drop_ratio: DEFAULT_DROP_RATIO,
            keep_recent_turns: DEFAULT_KEEP_RECENT_TURNS,
            min_messages: 2,
        }
    }
}

/// Upload settings that cannot work.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UploadSettingsError {
    /// The ratios are not `0 < upload_ratio < drop_ratio <= 1`.
    #[error(
        "upload_ratio {upload} and drop_ratio {drop}: expected 0 < upload_ratio < drop_ratio <= 1 \
         (the seed uses 0.5 and 0.7)"
    )]
    Ratios {
        /// `upload_ratio`.
        upload: f64,
        /// `drop_ratio`.
        drop: f64,
    },
    /// `keep_recent_turns` is over the most the planner handles.
    #[error("keep_recent_turns: expected at most {MAX_KEEP_RECENT_TURNS}, found {0}")]
    KeepRecentTurns(usize),
    /// `min_messages` is 0, so an upload could take nothing.
    #[error("min_messages: expected at least 1, found 0")]
    MinMessages,
}

impl UploadSettings {
    /// Checks every setting, naming the one out of range.
    pub fn validate(&self) -> Result<(), UploadSettingsError> {
        let (upload, drop) = (self.upload_ratio, self.drop_ratio);
        if !(upload.is_finite() && drop.is_finite() && upload > 0.0 && upload < drop && drop <= 1.0)
        {
            return Err(UploadSettingsError::Ratios { upload, drop });
        }
        if self.keep_recent_turns > MAX_KEEP_RECENT_TURNS {
            return Err(UploadSettingsError::KeepRecentTurns(self.keep_recent_turns));
        }
        if self.min_messages == 0 {
            return Err(UploadSettingsError::MinMessages);
        }
        Ok(())
    }
}

/// Where an upload stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UploadStatus {
    /// Archiving and extraction are under way.
    Running,
    /// The range is archived and its memories extracted.
    Done,
    /// The upload failed; the planner may start it again.
    Failed,
}

/// The messages of an upload, by session entry id: `[first, end)`, `last` the final one in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadRange {
    /// The session entry of the range's first message.
    pub first_entry_id: String,
    /// The session entry of its last message.
    pub last_entry_id: String,
    /// The first message after the range: what the context starts with once the range left.
    pub end_entry_id: String,
    /// Messages in the range.
    pub messages: usize,
}

/// The session's upload, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadState {
    /// The upload's id, which names its archive.
    pub upload_id: String,
    /// Where it stands.
    pub status: UploadStatus,
    /// The messages it takes.
    pub range: UploadRange,
}

/// What the planner reads.
#[derive(Debug, Clone, Copy)]
pub struct UploadInputs<'a> {
    /// The live context, oldest first; messages from the session carry their entry id in
    /// `meta.id`.
    pub messages: &'a [Message],
    /// Index of the first message an upload may take: after the pinned system messages and the
    /// latest compaction summary.
    pub first_uploadable: usize,
    /// The context's size in tokens.
    pub context_tokens: u64,
    /// The model's context window (0 when unknown).
    pub window_tokens: u64,
    /// The latest recorded upload of the session, if any.
    pub state: Option<&'a UploadState>,
}

/// Why a range leaves the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The context reached the drop threshold: the range leaves whether the upload finished or
    /// not.
    ForcedAtDropThreshold,
    /// The upload finished: its range leaves.
    UploadCompleted,
}

/// Why nothing happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IdleReason {
    /// Uploads are off in the settings.
    Disabled,
    /// No window to compare with.
    NoWindow,
    /// The context is below the upload threshold.
    BelowUploadThreshold,
    /// An upload runs and the context is below the drop threshold (or its range already left).
    UploadRunning,
    /// Over the upload threshold, but no older messages outside the kept turns.
    NothingToUpload,
}

/// What to do before this request.
#[derive(Debug, Clone, PartialEq)]
pub enum UploadDecision {
    /// Start a background upload of `messages[indices]`. `retry_of` names a failed upload of
    /// the same range.
    StartUpload {
        /// The messages to upload, by entry id.
        range: UploadRange,
        /// Their indices in the planner's messages.
        indices: Range<usize>,
        /// The id of the failed upload this one retries.
        retry_of: Option<String>,
    },
    /// Remove `messages[indices]` (the range of upload `upload_id`) from the context.
    DropRange {
        /// The upload whose range leaves.
        upload_id: String,
        /// The range, by entry id.
        range: UploadRange,
        /// Its indices in the planner's messages.
        indices: Range<usize>,
        /// Why it leaves now.
        reason: DropReason,
    },
    /// Nothing to do on this request.
    Nothing {
        /// Why there is nothing to do.
        reason: IdleReason,
    },
}

/// The decision for one request (see the module docs).
pub fn plan_upload(inputs: &UploadInputs<'_>, settings: &UploadSettings) -> UploadDecision {
    let nothing = |reason| UploadDecision::Nothing { reason };
    if !settings.enabled {
        return nothing(IdleReason::Disabled);
    }
    if inputs.window_tokens == 0 {
        return nothing(IdleReason::NoWindow);
    }
    let ratio = inputs.context_tokens as f64 / inputs.window_tokens as f64;
    let over_drop = ratio >= settings.drop_ratio;
    let over_upload = ratio >= settings.upload_ratio;
    if let Some(state) = inputs.state {
        let present = locate(inputs.messages, &state.range);
        let drop = |indices: Range<usize>, reason| UploadDecision::DropRange {
            upload_id: state.upload_id.clone(),
            range: state.range.clone(),
            indices,
            reason,
        };
        match (state.status, present) {
            (UploadStatus::Running, Some(indices)) if over_drop => {
                return drop(indices, DropReason::ForcedAtDropThreshold);
            }
            (UploadStatus::Running, Some(_) | None) => return nothing(IdleReason::UploadRunning),
            (UploadStatus::Done, Some(indices)) => {
                return drop(indices, DropReason::UploadCompleted);
            }
            (UploadStatus::Failed, Some(indices)) if over_drop => {
                return drop(indices, DropReason::ForcedAtDropThreshold);
            }
            (UploadStatus::Failed, Some(indices)) if over_upload => {
                return UploadDecision::StartUpload {
                    range: state.range.clone(),
                    indices,
                    retry_of: Some(state.upload_id.clone()),
                };
            }
            (UploadStatus::Failed, Some(_)) => {
                return nothing(IdleReason::BelowUploadThreshold);
            }
            // The range already left the context: a new upload may start.
            (UploadStatus::Done | UploadStatus::Failed, None) => {}
        }
    }
    if !over_upload {
        return nothing(IdleReason::BelowUploadThreshold);
    }
    match upload_range(inputs.messages, inputs.first_uploadable, settings) {
        Some((range, indices)) => UploadDecision::StartUpload {
            range,
            indices,
            retry_of: None,
        },
        None => nothing(IdleReason::NothingToUpload),
    }
}

/// Whether a session with no upload on record could start one at this size: the check a caller
/// makes before it builds the context [`plan_upload`] needs (below the upload threshold, with
/// nothing on record, the plan is always to do nothing).
pub fn upload_may_start(
    context_tokens: u64,
    window_tokens: u64,
    settings: &UploadSettings,
) -> bool {
    let inputs = UploadInputs {
        messages: &[],
        first_uploadable: 0,
        context_tokens,
        window_tokens,
        state: None,
    };
    match plan_upload(&inputs, settings) {
        UploadDecision::Nothing {
            reason: IdleReason::Disabled | IdleReason::NoWindow | IdleReason::BelowUploadThreshold,
        } => false,
        UploadDecision::Nothing {
            reason: IdleReason::UploadRunning | IdleReason::NothingToUpload,
        }
        | UploadDecision::StartUpload { .. }
        | UploadDecision::DropRange { .. } => true,
    }
}

/// Where `range` is in `messages`, when its first and end entries are both there, in order.
fn locate(messages: &[Message], range: &UploadRange) -> Option<Range<usize>> {
    let position = |id: &str| {
        messages
            .iter()
            .position(|message| message.meta.id.as_deref() == Some(id))
    };
    let start = position(&range.first_entry_id)?;
    let end = position(&range.end_entry_id)?;
    (start < end).then_some(start..end)
}

/// The older messages an upload takes: from `first_uploadable` to where the kept recent turns
/// start (moved back so no call is split from its result), when that is at least
/// `min_messages` and both ends are session entries.
pub fn upload_range(
    messages: &[Message],
    first_uploadable: usize,
    settings: &UploadSettings,
) -> Option<(UploadRange, Range<usize>)> {
    let split = split_preserved_recent_turns(messages, settings.keep_recent_turns.max(1));
    let start = first_uploadable.max(split.pinned_prefix);
    let end = split.boundary;
    if end >= messages.len() || end <= start || end - start < settings.min_messages {
        return None;
    }
    let span = messages.get(start..end)?;
    let first = span.iter().find_map(|message| message.meta.id.clone())?;
    let last = span
        .iter()
        .rev()
        .find_map(|message| message.meta.id.clone())?;
    let end_entry = messages.get(end)?.meta.id.clone()?;
    Some((
        UploadRange {
            first_entry_id: first,
            last_entry_id: last,
            end_entry_id: end_entry,
            messages: span.len(),
        },
        start..end,
    ))
}
