//! Compaction planning (seed 001 and seed 003 §3): the pure half of replacing old history with a
//! structured summary. Everything here is a computation on values; calling a summarizer,
//! enforcing the timeout and writing the checkpoint belong to the caller (`skald-engine`), whose
//! loop is thin because every decision is made here:
//!
//! - [`settings`] — [`CompactionSettings`], the seed's constants as defaults, validated.
//! - [`outcome`] — [`CompactionTrigger`], [`should_compact`] and the typed
//!   [`CompactionOutcome`]: `Compacted` only when the context shrank, else `Skipped` or
//!   `Cancelled` with a reason, the history unchanged.
//! - [`split`] — details stripped, recent turns kept verbatim with their results, split turns
//!   (the preserved turns cut inside a turn when they are too large or hold everything),
//!   history pruned for the context share, token-share parts, chunks, the adaptive chunk ratio,
//!   oversized messages and the three-level fallback plan.
//! - [`asks`] — the latest substantive user ask (harness messages and continuations such as
//!   "continue" or "继续" skipped), which the guard checks and the summary carries.
//! - [`plan`] — [`plan_compaction`]: the whole decision before any summarizer call.
//! - [`prompts`] — the summarizer's instructions and the transcript rendering, with untrusted
//!   content wrapped as data.
//! - [`quality`] — the quality guard and the feedback for a retry.
//! - [`appendices`] — tool failures, files read and modified, workspace critical rules.
//! - [`tail`] — the kept tail shrunk when it alone is over its budget: tool results truncated,
//!   then the middles of large texts cut, every original kept as a ref.
//! - [`run`] — [`CompactionRun`]: the summary loop as a state machine.
//!
//! ```
//! use skald_core::compaction::*;
//! use skald_core::message::{Message, Role};
//!
//! let mut messages = Vec::new();
//! for turn in 0..6 {
//!     messages.push(Message::text(Role::User, format!("Step {turn}: update /srv/app/config.toml")));
//!     messages.push(Message::text(Role::Assistant, "Done. ".repeat(2_000)));
//! }
//! let settings = CompactionSettings::default();
//! let plan = plan_compaction(
//!     &messages, 60_000, &settings, CompactionTrigger::Manual, &CompactionInputs::default(),
//! ).unwrap();
//! assert_eq!(plan.first_kept_index(), 6); // the last three user turns stay verbatim
//!
//! // The engine's loop: here a summarizer that always answers with the five sections.
//! let mut run = CompactionRun::new(plan);
//! while let Some(request) = run.next_request() {
//!     assert!(request.instructions.contains("## Exact identifiers"));
//!     let summary = [
//!         "## Decisions", "- Config updated.", "## Open TODOs", "- Step 3.",
//!         "## Constraints/Rules", "- None.", "## Pending user asks", "- Step 2: update config.",
//!         "## Exact identifiers", "- /srv/app/config.toml",
//!     ]
//!     .join("\n");
//!     run.record(Ok(summary.to_owned()));
//! }
//! let outcome = run.finish();
//! assert!(outcome.is_compacted());
//! assert!(outcome.tokens_after() < outcome.tokens_before());
//! let context = compacted_context(&messages, &outcome).unwrap();
//! assert_eq!(context.len(), 1 + 6); // the summary message, then the kept turns
//! ```

pub mod appendices;
pub mod asks;
pub mod outcome;
pub mod plan;
pub mod prompts;
pub mod quality;
pub mod run;
pub mod settings;
pub mod split;
pub mod tail;

pub use appendices::{
    Appendices, FileAccess, FileLists, FileOps, RulesFile, ToolFailure, collect_file_ops,
    collect_tool_failures, file_accesses, finish_summary, format_critical_rules, format_file_lists,
    format_tool_failures, host_rules_in, host_rules_in_text, workspace_critical_rules,
};
pub use asks::{is_continuation, is_user_ask, latest_user_ask};
pub use outcome::{
    CancelReason, CompactionDetails, CompactionOutcome, CompactionTrigger, OverTarget, SkipReason,
    TailTruncation, should_compact,
};
pub use plan::{
    CompactionInputs, CompactionPlan, DroppedHistory, PlanError, compacted_context, plan_compaction,
};
pub use prompts::{
    Language, PromptContext, chunk_prompt, detect_language, merge_prompt, render_transcript,
    resolve_custom_instructions, summary_instructions, summary_message, wrap_untrusted,
};
pub use quality::{
    QualityExpectations, QualityFailure, QualityReport, audit_summary, feedback_for_retry,
};
pub use run::{
    CompactionRun, SummaryFailure, SummaryRequest, SummaryStage, SummaryStep,
    structured_fallback_summary,
};
pub use settings::{
    CompactionSettings, CompactionSettingsError, IdentifierPolicy, QualityGuardSettings,
    ToolFailureSettings,
};
pub use split::{
    FallbackLevel, HistoryPrune, PartPlan, PreservedSplit, StagePlan, TurnSplit, TurnSplitReason,
    chunk_messages_by_max_tokens, compute_adaptive_chunk_ratio, cut_preserved_turns,
    is_oversized_for_summary, max_chunk_tokens, plan_stages, prune_history_for_context_share,
    split_messages_by_token_share, split_preserved_recent_turns, strip_details, turn_cut_points,
};
