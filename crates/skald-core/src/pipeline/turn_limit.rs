//! History turn limit (seed 003 §2.1, OpenClaw `limitHistoryTurns`): keep only the last N user
//! turns and everything after them.
//!
//! A user turn starts at a [`Role::User`] message; tool-result messages ([`Role::ToolResult`],
//! which is where every decoder puts results, Anthropic's included) never start one. The cut lies
//! exactly on a user message, so a call and its results are never split. The leading prelude —
//! the contiguous run of messages at the start that are neither user nor assistant messages
//! (system prompts, a host's compaction or branch summary) — is always kept, as OpenClaw keeps
//! its `compactionSummary`/`branchSummary` prelude; everything else before the cut, including a
//! system message in the middle of dropped history, is dropped.
//!
//! Batched eviction (`batch`): with `limit` N and `batch` B the stage keeps between N and N + B
//! turns and, once N + B would be exceeded, drops B + 1 turns at once. The number of dropped turns
//! only changes every B + 1 turns, so the kept history keeps the same first message — and the
//! provider's cached prefix — for B + 1 consecutive requests instead of moving on every turn.
//! `batch = 0` is the classic behaviour of seed 003 (always exactly the last N turns);
//! `batch = "half"` is OpenClaw 2026.9's `limitHistoryTurns`, which always batches: nothing is cut
//! until `ceil(N × 1.5)` user turns, then it keeps `N + (excess mod batch size)` — the same rule
//! with B = `ceil(N / 2)`.
//!
//! Cost: one pass over the roles; messages are moved, never cloned.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::message::{Message, Role};

/// Largest `batch` accepted: beyond this, "evict in batches" means "never evict" in practice.
pub const MAX_BATCH: usize = 10_000;

/// How many extra turns the limit tolerates before it evicts, all at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TurnBatch {
    /// A fixed number of extra turns (0 = classic, evict every turn).
    Turns(usize),
    /// A number derived from the limit.
    Rule(BatchRule),
}

/// A batch size derived from the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BatchRule {
    /// `ceil(limit / 2)` extra turns: OpenClaw 2026.9's `limitHistoryTurns`, which cuts nothing
    /// until `ceil(limit × 1.5)` user turns.
    Half,
}

impl Default for TurnBatch {
    fn default() -> TurnBatch {
        TurnBatch::Turns(0)
    }
}

impl From<usize> for TurnBatch {
    fn from(turns: usize) -> TurnBatch {
        TurnBatch::Turns(turns)
    }
}

impl TurnBatch {
    /// Extra turns tolerated for `limit`.
    pub fn turns(self, limit: usize) -> usize {
        match self {
            TurnBatch::Turns(turns) => turns,
            TurnBatch::Rule(BatchRule::Half) => limit.div_ceil(2),
        }
    }
}

/// How many user turns to keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TurnLimitSettings {
    /// Keep the last `limit` user turns; `None` or 0 keeps everything (the default of seed 003
    /// and of OpenClaw, whose limit comes only from a channel's `dmHistoryLimit`/`historyLimit`).
    pub limit: Option<usize>,
    /// Extra turns tolerated before evicting, all at once: a number (0 = classic, evict every
    /// turn) or `"half"` (OpenClaw 2026.9).
    pub batch: TurnBatch,
}

/// A turn-limit setting that makes no sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnLimitSettingsError {
    /// `batch` is larger than the stage allows.
    #[error("batch: expected at most {MAX_BATCH} turns, found {0}")]
    BatchTooLarge(usize),
    /// `batch` is set without a `limit`, so there is nothing to batch.
    #[error("batch: set to {0} but there is no limit; set limit or remove batch")]
    BatchWithoutLimit(usize),
}

impl TurnLimitSettings {
    /// Rejects settings that cannot be what the author meant.
    pub fn validate(&self) -> Result<(), TurnLimitSettingsError> {
        match self.batch {
            TurnBatch::Turns(batch) if batch > MAX_BATCH => {
                Err(TurnLimitSettingsError::BatchTooLarge(batch))
            }
            TurnBatch::Turns(batch) if batch > 0 && self.active_limit().is_none() => {
                Err(TurnLimitSettingsError::BatchWithoutLimit(batch))
            }
            // A rule derives the batch from the limit, so without a limit it simply waits for
            // one (a preset sets the rule, the user the limit).
            TurnBatch::Turns(_) | TurnBatch::Rule(BatchRule::Half) => Ok(()),
        }
    }

    fn active_limit(&self) -> Option<usize> {
        self.limit.filter(|limit| *limit > 0)
    }
}

/// What the turn limit did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TurnLimitReport {
    /// User turns in the input.
    pub turns_before: usize,
    /// User turns dropped from the front.
    pub turns_dropped: usize,
    /// Messages dropped with those turns.
    pub messages_dropped: usize,
    /// Leading prelude messages (neither user nor assistant: system prompts, host summaries)
    /// kept in front of the cut.
    pub system_messages_kept: usize,
    /// Input indices of the dropped messages (`None` when nothing was dropped).
    pub dropped: Option<Range<usize>>,
    /// Why the cut fell where it did, one line per decision.
    pub reasons: Vec<String>,
}

impl TurnLimitReport {
    /// True when nothing was dropped.
    pub fn is_noop(&self) -> bool {
        self.messages_dropped == 0
    }

    /// One line for tables.
    pub fn summary(&self) -> String {
        if self.is_noop() {
            "unchanged".to_owned()
        } else {
            format!(
                "dropped {} turns ({} messages)",
                self.turns_dropped, self.messages_dropped
            )
        }
    }
}

/// How many of `turns` user turns to drop for `limit` and `batch` (see the module docs).
pub fn turns_to_drop(turns: usize, limit: usize, batch: usize) -> usize {
    if limit == 0 || turns <= limit {
        return 0;
    }
    let step = batch.saturating_add(1);
    (turns - limit) / step * step
}

/// Keeps the last `settings.limit` user turns (plus the leading prelude); see the module docs.
pub fn limit_turns(
    mut messages: Vec<Message>,
    settings: &TurnLimitSettings,
) -> (Vec<Message>, TurnLimitReport) {
    let mut report = TurnLimitReport::default();
    let Some(limit) = settings.active_limit() else {
        return (messages, report);
    };
    report.turns_before = messages.iter().filter(|m| m.role == Role::User).count();
    let batch = settings.batch.turns(limit);
    let drop_turns = turns_to_drop(report.turns_before, limit, batch);
    if drop_turns == 0 {
        return (messages, report);
    }
    // The first kept turn is user message number `drop_turns` (0-based).
    let Some(cut) = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User)
        .nth(drop_turns)
        .map(|(index, _)| index)
    else {
        return (messages, report);
    };
    let lead = messages
        .iter()
        .take_while(|m| !matches!(m.role, Role::User | Role::Assistant))
        .count()
        .min(cut);
    messages.drain(lead..cut);
    report.turns_dropped = drop_turns;
    report.messages_dropped = cut - lead;
    report.system_messages_kept = lead;
    report.dropped = Some(lead..cut);
    report.reasons.push(format!(
        "dropped messages {lead}..{cut} ({drop_turns} user turns of {}) to keep the last {} \
         user turns (limit {limit}, batch {})",
        report.turns_before,
        report.turns_before - drop_turns,
        batch
    ));
    (messages, report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_counts_follow_the_batch_steps() {
        // Classic: always exactly the last 4.
        let classic: Vec<usize> = (0..10).map(|t| turns_to_drop(t, 4, 0)).collect();
        assert_eq!(classic, vec![0, 0, 0, 0, 0, 1, 2, 3, 4, 5]);
        // Batch 2: keep 4..=6 turns, drop 3 at a time.
        let batched: Vec<usize> = (0..14).map(|t| turns_to_drop(t, 4, 2)).collect();
        assert_eq!(batched, vec![0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 6, 6, 6, 9]);
        for turns in 0..100 {
            let kept = turns - turns_to_drop(turns, 4, 2);
            assert!(kept <= 6 && (turns < 4 || kept >= 4), "{turns} -> {kept}");
        }
        assert_eq!(turns_to_drop(10, 0, 3), 0);
        assert_eq!(turns_to_drop(10, 3, usize::MAX), 0);
    }

    #[test]
    fn half_batch_is_openclaw_hysteresis() {
        // OpenClaw: maxUserTurns = ceil(limit * 1.5), batch size = maxUserTurns - limit + 1.
        for limit in 1..20usize {
            let batch = TurnBatch::Rule(BatchRule::Half).turns(limit);
            let max_user_turns = (limit * 3).div_ceil(2);
            assert_eq!(batch + 1, max_user_turns - limit + 1, "limit {limit}");
        }
    }
}
