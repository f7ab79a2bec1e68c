//! What the engine remembers about one session between requests: the decisions that must repeat
//! byte for byte (which results left the context), the memo that makes repeating them cheap, the
//! prompt-cache clocks and the refs already stored.

use std::collections::{HashMap, HashSet};

use skald_core::pipeline::offload::{ArgumentsCache, OffloadCache};
use skald_core::pipeline::prune::PruneClock;
use skald_core::tokens::Calibration;

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
    /// What providers reported against skald's counts, per model, and the model of the latest
    /// report: the threshold decisions of later calls use the corrected size.
    pub(crate) calibration: Calibration,
    pub(crate) calibration_model: Option<String>,
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

    /// Feeds token calibration: a request skald estimated at `counted` tokens was reported by
    /// the provider as `reported` input tokens (cache reads and writes included) for `model`.
    /// From then on [`SessionState::calibrated_tokens`] corrects for that model.
    pub fn observe_usage(&mut self, model: &str, counted: u64, reported: u64) {
        self.calibration.observe(model, counted, reported);
        if self.calibration_model.as_deref() != Some(model) {
            self.calibration_model = Some(model.to_owned());
        }
    }

    /// `counted` corrected by what the latest reporting model taught (unchanged before any
    /// report).
    pub fn calibrated_tokens(&self, counted: u64) -> u64 {
        match &self.calibration_model {
            Some(model) => self.calibration.correct(model, counted),
            None => counted,
        }
    }
}
