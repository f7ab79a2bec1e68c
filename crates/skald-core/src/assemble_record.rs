//! [`AssembleRecord`]: what each stage of skald's pipeline did on the request that produced one
//! answer, kept on the answer's [`MessageMeta`](crate::message::MessageMeta) so a session's
//! timeline of model calls can say it per call. Compact by design (counts, ref ids, a few
//! reasons): it rides along in the answer's stored entry, and every field that says "nothing"
//! is left out of the JSON.

use serde::{Deserialize, Serialize};

/// Reasons kept per record at most (the first ones; the full report is the engine API's).
pub const MAX_REASONS: usize = 4;
/// Characters kept of one reason at most.
pub const MAX_REASON_CHARS: usize = 200;

/// What the pipeline did to the context of one model request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AssembleRecord {
    /// Estimated tokens of the session's context before the pipeline (the raw history).
    pub tokens_raw: u64,
    /// Estimated tokens of the messages sent after the pipeline.
    pub tokens_sent: u64,
    /// Refs of the tool results replaced by a placeholder, in message order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub offloaded_refs: Vec<String>,
    /// Estimated tokens the offloads (results and arguments) took out.
    #[serde(skip_serializing_if = "is_zero")]
    pub offloaded_tokens: u64,
    /// Tool-call arguments replaced by a ref.
    #[serde(skip_serializing_if = "is_zero")]
    pub arguments_offloaded: u64,
    /// Results over the threshold the selector kept for now.
    #[serde(skip_serializing_if = "is_zero")]
    pub deferred: u64,
    /// Old results soft-trimmed by pruning.
    #[serde(skip_serializing_if = "is_zero")]
    pub trimmed: u64,
    /// Old results cleared by pruning.
    #[serde(skip_serializing_if = "is_zero")]
    pub cleared: u64,
    /// Results cut to the per-result or aggregate budget.
    #[serde(skip_serializing_if = "is_zero")]
    pub truncated: u64,
    /// User turns the turn limit dropped from the front.
    #[serde(skip_serializing_if = "is_zero")]
    pub turns_dropped: u64,
    /// Changes repair made to the call/result pairing.
    #[serde(skip_serializing_if = "is_zero")]
    pub repaired: u64,
    /// Refs this request stored.
    #[serde(skip_serializing_if = "is_zero")]
    pub refs_stored: u64,
    /// The session's offload switch was paused: the offload stage did not run.
    #[serde(skip_serializing_if = "is_false")]
    pub offload_paused: bool,
    /// The session's compaction switch was paused.
    #[serde(skip_serializing_if = "is_false")]
    pub compaction_paused: bool,
    /// Why, in the stages' own words: the first few reasons (at most [`MAX_REASONS`], each cut
    /// to [`MAX_REASON_CHARS`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl AssembleRecord {
    /// Adds `reason` when fewer than [`MAX_REASONS`] are kept, cut to [`MAX_REASON_CHARS`].
    pub fn push_reason(&mut self, reason: &str) {
        if self.reasons.len() >= MAX_REASONS {
            return;
        }
        let cut: String = reason.chars().take(MAX_REASON_CHARS).collect();
        self.reasons.push(cut);
    }

    /// One short line for a timeline row, e.g. `offloaded 2 (3,412 tokens) · truncated 1 ·
    /// compaction paused`; `unchanged` when no stage changed anything.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if !self.offloaded_refs.is_empty() {
            parts.push(format!(
                "offloaded {} ({} tokens)",
                self.offloaded_refs.len(),
                thousands(self.offloaded_tokens)
            ));
        }
        let counts = [
            (self.arguments_offloaded, "arguments offloaded"),
            (self.deferred, "deferred"),
            (self.trimmed, "trimmed"),
            (self.cleared, "cleared"),
            (self.truncated, "truncated"),
            (self.turns_dropped, "turns dropped"),
            (self.repaired, "repaired"),
        ];
        for (count, what) in counts {
            if count > 0 {
                parts.push(format!("{what} {count}"));
            }
        }
        if self.offload_paused {
            parts.push("offload paused".to_owned());
        }
        if self.compaction_paused {
            parts.push("compaction paused".to_owned());
        }
        if parts.is_empty() {
            parts.push("unchanged".to_owned());
        }
        parts.join(" · ")
    }
}

/// `3412` as `3,412`.
fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_record_that_changed_nothing_serializes_only_its_token_counts() {
        let record = AssembleRecord {
            tokens_raw: 10,
            tokens_sent: 10,
            ..AssembleRecord::default()
        };
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json, serde_json::json!({"tokensRaw": 10, "tokensSent": 10}));
        assert_eq!(record.summary(), "unchanged");
        let back: AssembleRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, record);
    }

    #[test]
    fn the_summary_names_each_stage_that_acted() {
        let mut record = AssembleRecord {
            offloaded_refs: vec!["a".into(), "b".into()],
            offloaded_tokens: 3_412,
            truncated: 1,
            compaction_paused: true,
            ..AssembleRecord::default()
        };
        assert_eq!(
            record.summary(),
            "offloaded 2 (3,412 tokens) · truncated 1 · compaction paused"
        );
        for _ in 0..10 {
            record.push_reason(&"x".repeat(500));
        }
        assert_eq!(record.reasons.len(), MAX_REASONS);
        assert_eq!(record.reasons[0].chars().count(), MAX_REASON_CHARS);
    }

    #[test]
    fn a_stored_answer_keeps_its_record_and_one_without_writes_no_key() {
        use crate::codec::openclaw::{decode_agent_message, encode_agent_message};
        use crate::message::{Message, Role};
        let plain = Message::text(Role::Assistant, "Done.");
        let encoded = encode_agent_message(&plain);
        assert!(encoded.get("skaldAssemble").is_none(), "{encoded}");

        let mut answered = plain.clone();
        answered.meta.assemble = Some(Box::new(AssembleRecord {
            tokens_raw: 9_000,
            tokens_sent: 2_000,
            offloaded_refs: vec!["ref_1".into()],
            offloaded_tokens: 7_000,
            ..AssembleRecord::default()
        }));
        let encoded = encode_agent_message(&answered);
        assert_eq!(encoded["skaldAssemble"]["offloadedRefs"][0], "ref_1");
        assert_eq!(decode_agent_message(&encoded).unwrap(), answered);

        // A record skald cannot read stays as written, in the message's extra fields.
        let mut odd = encode_agent_message(&plain);
        odd["skaldAssemble"] = serde_json::json!("not a record");
        let decoded = decode_agent_message(&odd).unwrap();
        assert_eq!(decoded.meta.assemble, None);
        assert_eq!(
            encode_agent_message(&decoded)["skaldAssemble"],
            "not a record"
        );
    }
}
