//! What the engine remembers about one session between requests: the decisions that must repeat
//! byte for byte (which results left the context), the memo that makes repeating them cheap, the
//! prompt-cache clocks and the refs already stored.

use std::collections::{HashMap, HashSet};

use skald_core::pipeline::offload::{ArgumentsCache, OffloadCache};
use skald_core::pipeline::prune::PruneClock;

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
}
