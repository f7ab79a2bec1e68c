//! Sticky pruning (OpenClaw 2026.9): once a result has been trimmed or cleared it stays so on
//! every later request, whatever the cache clock and the context fill say then.
//!
//! OpenClaw keeps this in its session as an `openclaw.cache-ttl` custom entry whose
//! `prunedToolResults` lists `{key, mode: "soft"}` and `{key, mode: "hard", placeholder}` (the key
//! is `tool:<toolCallId>:<timestamp>`), beside `frozenToolResults` (`{key, sourceHash, texts?}`:
//! results whose truncated projection is frozen) and `ambiguousToolResultBaseKeys`. On the next
//! request it re-derives a soft trim from the original result and re-sends a hard clear's
//! placeholder. [`PruneMarks`] is the same record for one session, keyed by tool call id: the
//! caller keeps it between requests (the engine in its session state, a replay per transcript)
//! and passes it to [`super::prune_with_marks`], which re-applies every mark before it looks at
//! the clock, so the bytes of an old result never change back — the cached prompt prefix stays
//! valid after the one miss the prune itself caused.

use std::collections::HashMap;

use serde::Serialize;

/// How a result was pruned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PruneMark {
    /// Soft-trimmed (OpenClaw's `"soft"`): re-trimmed from the original on every request.
    Trimmed,
    /// Hard-cleared (OpenClaw's `"hard"`): its placeholder on every request, and never a
    /// candidate again.
    Cleared,
}

/// The results a session has pruned, by tool call id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneMarks {
    marks: HashMap<String, PruneMark>,
}

impl PruneMarks {
    /// The mark of the result answering `call_id`, if it was pruned.
    pub fn get(&self, call_id: &str) -> Option<PruneMark> {
        self.marks.get(call_id).copied()
    }

    /// How many results are marked.
    pub fn len(&self) -> usize {
        self.marks.len()
    }

    /// True when nothing was pruned yet.
    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }

    /// Records a prune; a clear is final, so a later trim mark never replaces it.
    pub fn record(&mut self, call_id: &str, mark: PruneMark) {
        let entry = self.marks.entry(call_id.to_owned()).or_insert(mark);
        if mark == PruneMark::Cleared {
            *entry = PruneMark::Cleared;
        }
    }

    /// Bytes this record holds, for memory accounting.
    pub fn approx_bytes(&self) -> usize {
        self.marks.keys().map(|key| key.len() + 48).sum()
    }
}
