//! Token accounting: how many tokens a message or a slice of messages costs a model.
//!
//! Three layers, cheapest first:
//! - [`estimate`]: the seeds' chars/4 heuristic (OpenClaw's `estimateTokens` with
//!   `estimateStringChars`), no tokenizer, used wherever a rough, conservative figure is enough.
//!   Pruning works in the estimator's characters ([`estimate_chars`]).
//! - [`bpe`]: exact BPE counts with the bundled `o200k_base` / `cl100k_base` tables
//!   ([`Encoding`]), rendered roughly as a chat template would.
//! - [`TokenCounter`]: BPE counts cached per message by a fingerprint of what the model sees, so
//!   re-counting a conversation after one more turn only tokenizes the new turn.
//!
//! [`Calibration`] learns, per model, how the provider's reported input tokens relate to what
//! skald counted, and corrects later counts.
//!
//! What is counted, in every layer: text, thinking, tool-call names and JSON arguments, tool-result
//! content, opaque blocks as their JSON text, images at a fixed cost. Never counted: a tool result's
//! `details` (host-only), ids, signatures, metadata and `extra` fields. Every message passed in is
//! counted whatever its role; leaving out host-only [`crate::message::Role::Custom`] entries that
//! will not be sent is the caller's choice.
//!
//! Estimates are deliberately rough; thresholds compare `estimate × SAFETY_MARGIN` against limits
//! ([`exceeds_with_margin`], [`budget_within_margin`]).

pub mod bpe;
mod calibration;
mod counter;
pub mod estimate;
mod visit;
pub mod windows;

pub use bpe::{Encoding, count_message as bpe_count_message, count_messages as bpe_count_messages};
pub use calibration::{Calibration, CalibrationSettings, ModelCalibration};
pub use counter::{CacheStats, DEFAULT_CACHE_CAPACITY, TokenCounter, message_fingerprint};
pub use estimate::{
    estimate_chars, estimate_message_tokens, estimate_messages_chars, estimate_messages_tokens,
    estimate_string_chars,
};

/// Characters per token in the heuristic (pi's `estimateTokens`).
pub const CHARS_PER_TOKEN: usize = 4;

/// Cost of one image in estimator characters: OpenClaw's pruner constant. A tokenizer cannot
/// count images, so the BPE path uses the same figure in tokens ([`IMAGE_TOKENS`]).
pub const IMAGE_CHARS: usize = 8_000;

/// Cost of one image in tokens (`IMAGE_CHARS / CHARS_PER_TOKEN`).
pub const IMAGE_TOKENS: u64 = (IMAGE_CHARS / CHARS_PER_TOKEN) as u64;

/// Factor applied to a token estimate before it is compared with a limit, so an estimate that is
/// up to 20% low still triggers in time (the seeds' `SAFETY_MARGIN`).
pub const SAFETY_MARGIN: f64 = 1.2;

/// `tokens × SAFETY_MARGIN`, rounded up: the figure to compare against a limit.
pub fn with_margin(tokens: u64) -> u64 {
    (tokens as f64 * SAFETY_MARGIN).ceil() as u64
}

/// True when `tokens × SAFETY_MARGIN` is above `limit`.
pub fn exceeds_with_margin(tokens: u64, limit: u64) -> bool {
    tokens as f64 * SAFETY_MARGIN > limit as f64
}

/// The largest raw estimate that still fits `limit` once the margin is applied:
/// `floor(limit / SAFETY_MARGIN)`, at least 1 (the seeds' `effectiveMax` for chunking).
pub fn budget_within_margin(limit: u64) -> u64 {
    ((limit as f64 / SAFETY_MARGIN).floor() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margin_helpers_apply_twenty_percent() {
        assert_eq!(with_margin(100), 120);
        assert_eq!(with_margin(0), 0);
        assert_eq!(with_margin(1), 2);
        assert!(exceeds_with_margin(1000, 1199));
        assert!(!exceeds_with_margin(1000, 1200));
        assert_eq!(budget_within_margin(1200), 1000);
        assert_eq!(budget_within_margin(0), 1);
    }

    #[test]
    fn image_constants_agree() {
        assert_eq!(IMAGE_TOKENS, 2_000);
    }
}
