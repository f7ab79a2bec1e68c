//! What the engine remembers about one session between requests: the decisions that must repeat
//! byte for byte (which results left the context, which skill memories were appended), the memo
//! that makes repeating them cheap, the prompt-cache clocks, the refs already stored, and the
//! calibration of its token estimates against what the provider reported.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use skald_core::compaction::CompactionOutcome;
use skald_core::pipeline::offload::{ArgumentsCache, OffloadCache};
use skald_core::pipeline::prune::PruneClock;
use skald_core::tokens::Calibration;

use crate::compact::CompactResult;

/// The model name calibration uses when the host does not name one.
pub const UNNAMED_MODEL: &str = "unnamed";

/// Per-session state kept by whoever drives the engine (the server keeps one per session; replay
/// keeps one per transcript and policy). Start with `SessionState::default()`.
#[derive(Debug, Clone, Default)]
pub struct SessionState {
    /// Call ids whose results left the context; once decided, they stay out (sticky).
    pub(crate) offloaded_calls: HashSet<String>,
    pub(crate) offload_cache: OffloadCache,
    pub(crate) arguments_cache: ArgumentsCache,
    /// When the previous request was assembled (epoch ms): the prompt cache is warm within the
    /// policy's TTL of it.
    pub(crate) last_request_ms: Option<i64>,
    pub(crate) prune_clock: PruneClock,
    /// Ref ids known to be durably stored for this session's tenant.
    pub(crate) stored_refs: HashSet<String>,
    /// Token estimates of assembled messages by their cheap identity.
    pub(crate) estimates: HashMap<u128, u64>,
    /// What memory gave the session at its start (profile, tool memories, directory listing),
    /// kept so every later call sends the same bytes.
    pub(crate) session_memory: Option<crate::memory::SessionMemory>,
    /// The skill memory appended to each `SKILL.md` read, by tool call id ("" when nothing was
    /// remembered then): decided once, so later requests send the same bytes.
    pub(crate) skill_memories: HashMap<String, String>,
    /// What the provider reported against what skald counted, per model.
    pub(crate) calibration: Calibration,
    /// The model and the tokens skald counted for the last view it prepared, to pair with the
    /// usage the provider reports for that call.
    pub(crate) last_counted: Option<(String, u64)>,
}

/// One pairing of skald's count with the provider's, fed to the calibration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsageObservation {
    pub model: String,
    /// Tokens skald estimated for the call's view.
    pub counted: u64,
    /// Input tokens the provider reported (uncached, cache reads and cache writes).
    pub reported: u64,
}

impl SessionState {
    /// Number of results this session has moved out of the context for good.
    pub fn offloaded_count(&self) -> usize {
        self.offloaded_calls.len()
    }

    /// Number of refs this session has stored.
    pub fn stored_ref_count(&self) -> usize {
        self.stored_refs.len()
    }

    /// Takes note of a compaction that wrote a checkpoint: the refs its tail truncation stored
    /// are refs of this session (the REF_ID instruction and the fetch tool stay from now on).
    pub fn note_compaction(&mut self, result: &CompactResult) {
        if result.checkpoint_entry_id.is_none() {
            return;
        }
        if let CompactionOutcome::Compacted {
            tail_truncation: Some(truncation),
            ..
        } = &result.outcome
        {
            for new_ref in &truncation.new_refs {
                self.stored_refs.insert(new_ref.id.to_string());
            }
        }
    }

    /// Remembers that skald counted `counted` tokens for the call about to be made to `model`.
    pub fn record_counted(&mut self, model: Option<&str>, counted: u64) {
        let model = model.unwrap_or(UNNAMED_MODEL).to_owned();
        self.last_counted = Some((model, counted));
    }

    /// Feeds the provider's reported input tokens for the last counted call to the
    /// calibration; `None` when no call was counted since the last report (the pairing would be
    /// a guess).
    pub fn observe_usage(&mut self, reported: u64) -> Option<UsageObservation> {
        let (model, counted) = self.last_counted.take()?;
        self.calibration.observe(&model, counted, reported);
        Some(UsageObservation {
            model,
            counted,
            reported,
        })
    }

    /// `counted` corrected by what this session learnt about `model` (unchanged until the
    /// provider has reported usage for it).
    pub fn calibrated_tokens(&self, model: Option<&str>, counted: u64) -> u64 {
        self.calibration
            .correct(model.unwrap_or(UNNAMED_MODEL), counted)
    }
}
