//! The pipeline stages that shape what a model sees on each request. Every stage is a pure
//! function: it takes the messages by value and returns them (moved, not cloned, where unchanged)
//! with a report of what it changed and why.
//!
//! Order on a request: repair → [`turn_limit`] → [`offload`] (seed 000) → [`prune`](mod@prune) →
//! [`truncate`](mod@truncate) (seed 003). Stages that take content out return it as
//! [`crate::refs::NewRef`]s for the caller to store before the output reaches a model.
//! [`policy`] holds the settings of all of them, loaded from TOML presets; [`schedule`] decides
//! when an offload of content already in the prompt cache pays for the rewrite it causes.
//!
//! ```
//! use skald_core::message::{Message, Role};
//! use skald_core::pipeline::*;
//!
//! let messages = vec![Message::text(Role::User, "hi"), Message::text(Role::Assistant, "hello")];
//! let (messages, _) = limit_turns(messages, &TurnLimitSettings::default());
//! let env = PruneEnv { context_window_tokens: 200_000, now_ms: 0, clock: PruneClock::default() };
//! let pruned = prune(messages, &PruneSettings::default(), env);
//! let truncated = truncate(pruned.messages, &TruncateSettings::default(), 200_000);
//! // Store `pruned.new_refs` and `truncated.new_refs` before sending `truncated.messages`.
//! assert_eq!(truncated.messages.len(), 2);
//! ```

pub mod offload;
pub mod policy;
pub mod prune;
pub mod schedule;
pub mod truncate;
pub mod turn_limit;

pub use prune::{
    ClearedResult, HardClearSettings, IMAGE_REMOVED_MARKER, PruneAction, PruneChange, PruneClock,
    PruneEnv, PruneMark, PruneMarks, PruneMode, PruneOutcome, PruneReport, PruneSettings,
    PruneSettingsError, PruneSkip, SoftTrimSettings, ToolMatch, default_cleared_summary, prune,
    prune_with, prune_with_marks,
};
pub use truncate::{
    AggregateSettings, TruncateChange, TruncateMemory, TruncateMode, TruncateOutcome,
    TruncateReport, TruncateSettings, TruncateSettingsError, WindowCap, result_budget_chars,
    truncate, truncate_with_memory, truncation_marker,
};
pub use turn_limit::{
    BatchRule, TurnBatch, TurnLimitReport, TurnLimitSettings, TurnLimitSettingsError, limit_turns,
};
