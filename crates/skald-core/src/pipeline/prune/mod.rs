//! Context pruning (seed 003 §2.2, OpenClaw's `context-pruning` pruner): slims old tool results
//! once the context is filling up — soft trim first (head + tail), hard clear (a placeholder) only
//! when that is not enough.
//!
//! The algorithm, in the seed's terms (defaults in brackets):
//! 1. **Gate.** Mode `off` does nothing. Mode `cache-ttl` \[default\] prunes only when the
//!    provider's prompt cache has expired: `now − last_cache_touch ≥ ttl` [5 min], and never when
//!    the clock was never touched. Mode `always` skips the gate (providers without a prompt
//!    cache). After a prune that changed something the returned [`PruneClock`] is touched.
//! 2. `char_window = context_window_tokens × 4`; a window of 0 means unknown and does nothing.
//!    Characters are estimator characters ([`crate::tokens::estimate_chars`]: CJK ×4, image 8,000).
//! 3. **Protected:** everything before the first user message (bootstrap reads), everything from
//!    the Nth-from-last assistant on [N = 3; 0 = nothing protected; fewer than N assistants ⇒ no
//!    pruning], results holding an image unless `trim_images` is on, and tools the allow/deny
//!    globs exclude (case-insensitive, deny wins, empty allow = all; a result without a tool name
//!    takes the name of its call).
//! 4. If `total / char_window < soft_trim_ratio` [0.3] nothing changes. Otherwise every prunable
//!    result whose text (blocks joined by newlines) exceeds `soft_trim.max_chars` \[4,000\]
//!    becomes head \[1,500\] + `"\n...\n"` + tail \[1,500\] + `"\n\n[Tool result trimmed: kept
//!    first H chars and last T chars of N chars.]"`, head and tail taken across block boundaries.
//!    With `trim_images` every image block of a prunable result counts as the text
//!    `[image removed during context pruning]`, and a result holding an image is rewritten even
//!    when its text is short (the images leave, their markers stay).
//! 5. If the ratio is still ≥ `hard_clear_ratio` [0.5] and the prunable results hold at least
//!    `min_prunable_tool_chars` \[50,000\], results are replaced by the placeholder ["[Old tool
//!    result content cleared]"], oldest first, until the ratio drops below `hard_clear_ratio`.
//!
//! 6. With `sticky`, every result trimmed or cleared is recorded in the caller's [`PruneMarks`]
//!    and stays trimmed or cleared on every later request, before the gate (see [`marks`]).
//!
//! **Seed 003 and OpenClaw 2026.9.** The defaults are the seed's. OpenClaw 2026.9
//! (`pruneExpiredCacheTtlToolResults`) keeps the same algorithm with three changes, which the
//! `openclaw` preset turns on: pruning is sticky, images are trimmed too (8,000 characters each),
//! and the tuning knobs are retired — its ratios (0.3, 0.5), the protected assistants (3), the
//! 50,000-character minimum and the soft-trim sizes (4,000 / 1,500 / 1,500) are fixed at the
//! defaults here; only `ttl`, `hardClear` (switch and placeholder) and the tool globs remain
//! settings. skald keeps the retired knobs for `openclaw-seed` and custom policies.
//!
//! Differences from OpenClaw, all deliberate: a trim or clear that would not make a result
//! shorter is skipped (so pruning never grows the context); tool results are blocks, so an
//! Anthropic-style message holding several results is pruned result by result; non-text,
//! non-image blocks (opaque) survive a soft trim (OpenClaw drops them); characters are the
//! estimator's for every role (OpenClaw counts a tool call's arguments but not its name, and 256
//! for a message of another role); a trim or clear that cuts out a ref placeholder
//! (`[REF_ID: …]`, e.g. from an earlier offload or truncation) names that ref in its note, so a
//! stored original stays reachable.
//!
//! **Keeping originals** (`keep_originals`, off by default = OpenClaw): trimmed and cleared
//! originals are returned as [`NewRef`]s, the trim note names the ref id, and a cleared result
//! becomes [`refs::placeholder`]`(id, summary)`. [`prune_with`] lets the caller write the summary
//! (e.g. a content-aware digest); [`prune`] uses a plain one.
//!
//! Cost: the gate is O(1); below the soft-trim ratio the stage is one estimating pass over the
//! messages; messages are moved, and only the results that change are rebuilt.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::message::{Block, Message, Role, ToolResult};
use crate::refs::NewRef;
use crate::tokens::{CHARS_PER_TOKEN, estimate_messages_chars};

use super::truncate::content_chars;

mod cut;
mod globs;
pub mod marks;
#[cfg(test)]
mod tests;

pub use cut::IMAGE_REMOVED_MARKER;
use cut::{hard_clear, has_image, soft_trim};
#[cfg(test)]
use cut::{take_head, take_tail};
use globs::CompiledMatch;
#[cfg(test)]
use globs::glob_match;
pub use marks::{PruneMark, PruneMarks};

/// How long a provider's prompt cache lives without use (Anthropic's 5 minutes), in `cache-ttl`
/// mode.
pub const DEFAULT_TTL_MS: u64 = 5 * 60 * 1000;
/// Assistant messages at the end of the context whose results are never pruned.
pub const DEFAULT_KEEP_LAST_ASSISTANTS: usize = 3;
/// Context fill (characters over the window's characters) from which results are soft-trimmed.
pub const DEFAULT_SOFT_TRIM_RATIO: f64 = 0.3;
/// Context fill from which soft-trimmed results are also cleared.
pub const DEFAULT_HARD_CLEAR_RATIO: f64 = 0.5;
/// Characters the prunable results must hold before a hard clear is worth a cache miss.
pub const DEFAULT_MIN_PRUNABLE_TOOL_CHARS: usize = 50_000;
/// Results with more joined text than this are soft-trimmed.
pub const DEFAULT_SOFT_TRIM_MAX_CHARS: usize = 4_000;
/// Characters a soft trim keeps from the start of a result.
pub const DEFAULT_SOFT_TRIM_HEAD_CHARS: usize = 1_500;
/// Characters a soft trim keeps from the end of a result.
pub const DEFAULT_SOFT_TRIM_TAIL_CHARS: usize = 1_500;
/// What a hard-cleared result says in place of its content (OpenClaw's text).
pub const DEFAULT_HARD_CLEAR_PLACEHOLDER: &str = "[Old tool result content cleared]";

/// When pruning may run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PruneMode {
    /// Never prune.
    Off,
    /// Only once the provider's prompt cache has expired (the seed's default).
    #[default]
    CacheTtl,
    /// On every request (providers without a prompt cache).
    Always,
}

/// Soft-trim sizes, in characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SoftTrimSettings {
    /// Results whose joined text is longer than this are trimmed.
    pub max_chars: usize,
    /// Characters kept from the start of a trimmed result.
    pub head_chars: usize,
    /// Characters kept from the end of a trimmed result.
    pub tail_chars: usize,
}

impl Default for SoftTrimSettings {
    fn default() -> Self {
        SoftTrimSettings {
            max_chars: DEFAULT_SOFT_TRIM_MAX_CHARS,
            head_chars: DEFAULT_SOFT_TRIM_HEAD_CHARS,
            tail_chars: DEFAULT_SOFT_TRIM_TAIL_CHARS,
        }
    }
}

/// Hard-clear switch and text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HardClearSettings {
    /// Whether results may be cleared at all once soft trim is not enough.
    pub enabled: bool,
    /// What a cleared result says when originals are not kept.
    pub placeholder: String,
}

impl Default for HardClearSettings {
    fn default() -> Self {
        HardClearSettings {
            enabled: true,
            placeholder: DEFAULT_HARD_CLEAR_PLACEHOLDER.to_owned(),
        }
    }
}

/// Which tools' results may be pruned: case-insensitive globs (`*`, `?`); deny wins; an empty
/// allow list allows every tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolMatch {
    /// Globs of the tools whose results may be pruned; empty means every tool.
    pub allow: Vec<String>,
    /// Globs of the tools whose results are never pruned, whatever `allow` says.
    pub deny: Vec<String>,
}

impl ToolMatch {
    /// True when results of `tool_name` may be pruned.
    pub fn is_prunable(&self, tool_name: &str) -> bool {
        CompiledMatch::new(self).is_prunable(tool_name)
    }
}

/// Pruning settings; the defaults are the seed's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PruneSettings {
    /// When pruning may run.
    pub mode: PruneMode,
    /// Prompt-cache lifetime in `cache-ttl` mode.
    pub ttl_ms: u64,
    /// Results of the last N assistant messages (and everything after them) are protected.
    pub keep_last_assistants: usize,
    /// Context fill at which soft trim starts.
    pub soft_trim_ratio: f64,
    /// Context fill at which hard clear starts (at least `soft_trim_ratio`).
    pub hard_clear_ratio: f64,
    /// Hard clear runs only when prunable results hold at least this many characters.
    pub min_prunable_tool_chars: usize,
    /// How a soft trim cuts a result.
    pub soft_trim: SoftTrimSettings,
    /// Whether and how results are cleared.
    pub hard_clear: HardClearSettings,
    /// Which tools' results may be pruned.
    pub tools: ToolMatch,
    /// Return trimmed and cleared originals as refs and name them in the context.
    pub keep_originals: bool,
    /// Keep every trimmed or cleared result so on later requests (OpenClaw 2026.9); off, each
    /// prune decides afresh (seed 003).
    pub sticky: bool,
    /// Trim results that hold images too, each image becoming a marker (OpenClaw 2026.9); off,
    /// results holding an image are protected (seed 003).
    pub trim_images: bool,
}

impl Default for PruneSettings {
    fn default() -> Self {
        PruneSettings {
            mode: PruneMode::CacheTtl,
            ttl_ms: DEFAULT_TTL_MS,
            keep_last_assistants: DEFAULT_KEEP_LAST_ASSISTANTS,
            soft_trim_ratio: DEFAULT_SOFT_TRIM_RATIO,
            hard_clear_ratio: DEFAULT_HARD_CLEAR_RATIO,
            min_prunable_tool_chars: DEFAULT_MIN_PRUNABLE_TOOL_CHARS,
            soft_trim: SoftTrimSettings::default(),
            hard_clear: HardClearSettings::default(),
            tools: ToolMatch::default(),
            keep_originals: false,
            sticky: false,
            trim_images: false,
        }
    }
}

/// A pruning setting that makes no sense.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PruneSettingsError {
    /// A ratio outside 0 to 1 (or not a number).
    #[error("{field}: expected a ratio between 0 and 1, found {found}")]
    Ratio {
        /// The setting's name.
        field: &'static str,
        /// The value given.
        found: f64,
    },
    /// `hard_clear_ratio` is below `soft_trim_ratio`, so hard clear could run before soft trim.
    #[error(
        "hard_clear_ratio: expected at least soft_trim_ratio ({soft}), found {hard}; hard clear \
         only runs after soft trim"
    )]
    RatioOrder {
        /// `soft_trim_ratio`.
        soft: f64,
        /// `hard_clear_ratio`.
        hard: f64,
    },
    /// `cache-ttl` mode with a lifetime of 0, which would prune on every request.
    #[error("ttl_ms: expected more than 0 in cache-ttl mode, found 0; use mode = \"always\"")]
    ZeroTtl,
    /// Head and tail together keep as much as a result may hold, so trimming shortens nothing.
    #[error(
        "soft_trim: expected head_chars + tail_chars ({kept}) below max_chars ({max_chars}), or \
         trimming would not shorten anything"
    )]
    SoftTrimSizes {
        /// `head_chars + tail_chars`.
        kept: usize,
        /// `soft_trim.max_chars`.
        max_chars: usize,
    },
    /// Hard clear is on but its placeholder says nothing.
    #[error("hard_clear.placeholder: expected text, found an empty string")]
    EmptyPlaceholder,
    /// An empty tool-name glob, which matches no tool and is surely a typo.
    #[error("tools.{list}[{index}]: expected a tool-name glob, found an empty string")]
    EmptyGlob {
        /// `allow` or `deny`.
        list: &'static str,
        /// The glob's position in that list.
        index: usize,
    },
}

impl PruneSettings {
    /// Rejects settings that cannot be what the author meant.
    pub fn validate(&self) -> Result<(), PruneSettingsError> {
        for (field, found) in [
            ("soft_trim_ratio", self.soft_trim_ratio),
            ("hard_clear_ratio", self.hard_clear_ratio),
        ] {
            if !(found.is_finite() && (0.0..=1.0).contains(&found)) {
                return Err(PruneSettingsError::Ratio { field, found });
            }
        }
        if self.hard_clear_ratio < self.soft_trim_ratio {
            return Err(PruneSettingsError::RatioOrder {
                soft: self.soft_trim_ratio,
                hard: self.hard_clear_ratio,
            });
        }
        if self.mode == PruneMode::CacheTtl && self.ttl_ms == 0 {
            return Err(PruneSettingsError::ZeroTtl);
        }
        let kept = self
            .soft_trim
            .head_chars
            .saturating_add(self.soft_trim.tail_chars);
        if kept >= self.soft_trim.max_chars {
            return Err(PruneSettingsError::SoftTrimSizes {
                kept,
                max_chars: self.soft_trim.max_chars,
            });
        }
        if self.hard_clear.enabled && self.hard_clear.placeholder.trim().is_empty() {
            return Err(PruneSettingsError::EmptyPlaceholder);
        }
        for (list, globs) in [("allow", &self.tools.allow), ("deny", &self.tools.deny)] {
            if let Some(index) = globs.iter().position(|glob| glob.trim().is_empty()) {
                return Err(PruneSettingsError::EmptyGlob { list, index });
            }
        }
        Ok(())
    }
}

/// When the provider's prompt cache was last written or read, in epoch milliseconds. The caller
/// touches it after every model request to a caching provider; [`prune`] touches it after a
/// prune that changed something.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PruneClock {
    /// The last cache write or read, in epoch milliseconds; `None` until the first request.
    pub last_cache_touch_ms: Option<i64>,
}

impl PruneClock {
    /// A clock touched at `now_ms`.
    pub fn touched(now_ms: i64) -> PruneClock {
        PruneClock {
            last_cache_touch_ms: Some(now_ms),
        }
    }

    /// Records a cache write or read at `now_ms`.
    pub fn touch(&mut self, now_ms: i64) {
        self.last_cache_touch_ms = Some(now_ms);
    }
}

/// Facts of this request that are not settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneEnv {
    /// The model's context window in tokens (0 = unknown: nothing is pruned).
    pub context_window_tokens: u64,
    /// The time of this request, in epoch milliseconds.
    pub now_ms: i64,
    /// When the prompt cache was last used, to gate `cache-ttl` mode.
    pub clock: PruneClock,
}

/// Why pruning changed nothing without looking at results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PruneSkip {
    /// Mode `off`.
    Off,
    /// The context window is unknown (0), so there is no fill to measure.
    NoContextWindow,
    /// `cache-ttl` mode and the clock was never touched.
    NoCacheTouch,
    /// `cache-ttl` mode and the cache is still warm.
    CacheWarm {
        /// Time since the cache was last touched.
        elapsed_ms: i64,
        /// The cache lifetime it has not yet reached.
        ttl_ms: u64,
    },
    /// Fewer assistant messages than `keep_last_assistants`.
    TooFewAssistants {
        /// Assistant messages in the context.
        found: usize,
        /// Assistant messages the protection needs before anything may be pruned.
        needed: usize,
    },
    /// The context fill is below `soft_trim_ratio`.
    BelowSoftTrimRatio,
}

/// What happened to one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PruneAction {
    /// Cut to head and tail.
    Trimmed,
    /// Replaced by the placeholder (or a ref placeholder, with `keep_originals`).
    Cleared,
}

/// One trimmed or cleared result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PruneChange {
    /// The index of the message holding the result.
    pub message_index: usize,
    /// Index of the result block within its message.
    pub block_index: usize,
    /// The id of the call the result answers.
    pub call_id: String,
    /// The tool that produced the result, from the result or its call.
    pub tool_name: Option<String>,
    /// Whether the result was trimmed or cleared.
    pub action: PruneAction,
    /// Estimator characters of the result's content before and after this change.
    pub chars_before: usize,
    /// Estimator characters after the change (see `chars_before`).
    pub chars_after: usize,
    /// The ref holding the original, with `keep_originals`.
    pub ref_id: Option<String>,
    /// Why the result was changed, with the numbers that decided it.
    pub reason: String,
}

/// What pruning did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PruneReport {
    /// Why the stage stopped before looking at results, if it did.
    pub skipped: Option<PruneSkip>,
    /// True when the cache-TTL gate stopped the stage (cache warm or clock never touched).
    pub skipped_by_ttl: bool,
    /// The context window in estimator characters (`context_window_tokens × 4`).
    pub char_window: usize,
    /// Estimator characters of all messages (0 when the stage stopped before measuring).
    pub chars_before: usize,
    /// Estimator characters of all messages after pruning.
    pub chars_after: usize,
    /// `chars_before / char_window`: the fill the thresholds are compared with.
    pub ratio_before: f64,
    /// `chars_after / char_window`.
    pub ratio_after: f64,
    /// Results outside every protection, and their characters after soft trim.
    pub prunable_results: usize,
    /// Estimator characters of those results after soft trim (what hard clear may free).
    pub prunable_tool_chars: usize,
    /// How many results were soft-trimmed.
    pub trimmed: usize,
    /// How many results were cleared.
    pub cleared: usize,
    /// How many results were kept trimmed or cleared by an earlier request's mark (`sticky`).
    pub sticky: usize,
    /// Every change: re-applied marks first, then this prune's, each in message order.
    pub changes: Vec<PruneChange>,
}

impl PruneReport {
    /// True when no result was changed.
    pub fn is_noop(&self) -> bool {
        self.changes.is_empty()
    }

    /// One line for tables.
    pub fn summary(&self) -> String {
        if let Some(skip) = &self.skipped {
            return format!("skipped ({skip:?})");
        }
        format!(
            "trimmed {}, cleared {}; ratio {:.2} -> {:.2}",
            self.trimmed, self.cleared, self.ratio_before, self.ratio_after
        )
    }
}

/// Messages after pruning, what changed, the originals to store (with `keep_originals`) before
/// the messages are shown to a model, and the clock to keep for the next request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PruneOutcome {
    /// The messages after pruning.
    pub messages: Vec<Message>,
    /// What was changed and why.
    pub report: PruneReport,
    /// Originals of trimmed and cleared results (with `keep_originals`), to store before the
    /// messages reach a model.
    pub new_refs: Vec<NewRef>,
    /// The clock to keep for the next request (touched when something changed).
    pub clock: PruneClock,
}

/// A result about to be cleared, for the caller's summary (see [`prune_with`]).
#[derive(Debug, Clone, Copy)]
pub struct ClearedResult<'a> {
    /// The id of the call the result answers.
    pub call_id: &'a str,
    /// The tool that produced it, when known.
    pub tool_name: Option<&'a str>,
    /// The content being cleared as it was before this prune (a soft trim earlier in the same
    /// prune does not hide it).
    pub content: &'a [Block],
    /// Its estimator characters.
    pub chars: usize,
}

/// The summary [`prune`] puts in a cleared result's ref placeholder.
pub fn default_cleared_summary(result: &ClearedResult<'_>) -> String {
    format!(
        "old {} result of {} chars cleared from context; fetch_original_data returns it",
        result.tool_name.unwrap_or("tool"),
        result.chars
    )
}

/// Prunes with the plain summary for cleared results; see the module docs.
pub fn prune(messages: Vec<Message>, settings: &PruneSettings, env: PruneEnv) -> PruneOutcome {
    prune_with(messages, settings, env, &mut |result| {
        default_cleared_summary(result)
    })
}

/// Prunes; with `keep_originals`, `summarize` writes the summary of each cleared result's ref
/// placeholder (it is not called otherwise). Marks of a `sticky` policy last for this call only;
/// use [`prune_with_marks`] to keep them between requests.
pub fn prune_with(
    messages: Vec<Message>,
    settings: &PruneSettings,
    env: PruneEnv,
    summarize: &mut dyn FnMut(&ClearedResult<'_>) -> String,
) -> PruneOutcome {
    prune_with_marks(
        messages,
        settings,
        env,
        &mut PruneMarks::default(),
        summarize,
    )
}

/// Prunes, re-applying and extending `marks` when the policy is `sticky` (see [`marks`]); the
/// caller keeps `marks` for the session's next request.
pub fn prune_with_marks(
    mut messages: Vec<Message>,
    settings: &PruneSettings,
    env: PruneEnv,
    marks: &mut PruneMarks,
    summarize: &mut dyn FnMut(&ClearedResult<'_>) -> String,
) -> PruneOutcome {
    let mut report = PruneReport::default();
    let mut new_refs = Vec::new();
    let clock = env.clock;
    if settings.sticky && !marks.is_empty() {
        reapply_marks(
            &mut messages,
            settings,
            marks,
            &mut new_refs,
            summarize,
            &mut report,
        );
    }
    let skip = |mut report: PruneReport, messages, new_refs, skip: PruneSkip| {
        report.skipped_by_ttl =
            matches!(skip, PruneSkip::NoCacheTouch | PruneSkip::CacheWarm { .. });
        report.skipped = Some(skip);
        report.chars_after = report.chars_before;
        report.ratio_after = report.ratio_before;
        PruneOutcome {
            messages,
            report,
            new_refs,
            clock,
        }
    };
    if let Some(reason) = gate(settings, &env) {
        return skip(report, messages, new_refs, reason);
    }
    let mut clock = clock;
    let char_window = usize::try_from(env.context_window_tokens)
        .unwrap_or(usize::MAX)
        .saturating_mul(CHARS_PER_TOKEN);
    report.char_window = char_window;
    let Some(cutoff) = assistant_cutoff(&messages, settings.keep_last_assistants) else {
        let found = messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let needed = settings.keep_last_assistants;
        return skip(
            report,
            messages,
            new_refs,
            PruneSkip::TooFewAssistants { found, needed },
        );
    };
    let prune_start = messages
        .iter()
        .position(|m| m.role == Role::User)
        .unwrap_or(messages.len());
    let mut total = estimate_messages_chars(&messages);
    let ratio = |total: usize| total as f64 / char_window as f64;
    report.chars_before = total;
    report.ratio_before = ratio(total);
    if report.ratio_before < settings.soft_trim_ratio {
        return skip(report, messages, new_refs, PruneSkip::BelowSoftTrimRatio);
    }

    // A cleared result is final: OpenClaw never counts it among the candidates again.
    let cleared_before =
        |call_id: &str| settings.sticky && marks.get(call_id) == Some(PruneMark::Cleared);
    let mut candidates =
        collect_candidates(&messages, prune_start, cutoff, settings, &cleared_before);
    report.prunable_results = candidates.len();

    for candidate in &mut candidates {
        let Some(result) = result_mut(&mut messages, candidate) else {
            continue;
        };
        let Some(change) = soft_trim(result, candidate, settings, &mut new_refs) else {
            continue;
        };
        total = total - change.chars_before + change.chars_after;
        report.trimmed += 1;
        if settings.sticky {
            marks.record(&change.call_id, PruneMark::Trimmed);
        }
        report.changes.push(change);
    }

    report.prunable_tool_chars = candidates.iter().map(|c| c.chars).sum();
    if settings.hard_clear.enabled
        && ratio(total) >= settings.hard_clear_ratio
        && report.prunable_tool_chars >= settings.min_prunable_tool_chars
    {
        for candidate in &mut candidates {
            if ratio(total) < settings.hard_clear_ratio {
                break;
            }
            let Some(change) = hard_clear(
                &mut messages,
                candidate,
                settings,
                &mut new_refs,
                summarize,
                ratio(total),
            ) else {
                continue;
            };
            total = total - change.chars_before + change.chars_after;
            report.cleared += 1;
            if settings.sticky {
                marks.record(&change.call_id, PruneMark::Cleared);
            }
            report.changes.push(change);
        }
    }

    report.chars_after = total;
    report.ratio_after = ratio(total);
    // Only a new prune rewrites the cached prefix; re-applied marks repeat earlier bytes.
    if report.trimmed + report.cleared > 0 {
        clock.touch(env.now_ms);
    }
    PruneOutcome {
        messages,
        report,
        new_refs,
        clock,
    }
}

/// Trims or clears again every result `marks` names, as the earlier request did.
fn reapply_marks(
    messages: &mut [Message],
    settings: &PruneSettings,
    marks: &PruneMarks,
    new_refs: &mut Vec<NewRef>,
    summarize: &mut dyn FnMut(&ClearedResult<'_>) -> String,
    report: &mut PruneReport,
) {
    let mut marked = Vec::new();
    let mut call_names: HashMap<String, String> = HashMap::new();
    for (message_index, message) in messages.iter().enumerate() {
        for (block_index, block) in message.content.iter().enumerate() {
            match block {
                Block::ToolCall(call) => {
                    call_names.insert(call.id.clone(), call.name.clone());
                }
                Block::ToolResult(result) => {
                    if let Some(mark) = marks.get(&result.call_id) {
                        let tool_name = result
                            .tool_name
                            .clone()
                            .or_else(|| call_names.get(&result.call_id).cloned());
                        let candidate = Candidate {
                            message: message_index,
                            block: block_index,
                            tool_name,
                            chars: content_chars(&result.content),
                            original_ref: None,
                        };
                        marked.push((candidate, mark));
                    }
                }
                Block::Text(_) | Block::Image(_) | Block::Thinking(_) | Block::Opaque(_) => {}
            }
        }
    }
    for (mut candidate, mark) in marked {
        let change = match mark {
            PruneMark::Trimmed => result_mut(messages, &candidate)
                .and_then(|result| soft_trim(result, &mut candidate, settings, new_refs)),
            PruneMark::Cleared => hard_clear(
                messages,
                &mut candidate,
                settings,
                new_refs,
                summarize,
                f64::NAN,
            ),
        };
        if let Some(mut change) = change {
            change.reason = format!("sticky: pruned on an earlier request ({mark:?})");
            report.sticky += 1;
            report.changes.push(change);
        }
    }
}

fn gate(settings: &PruneSettings, env: &PruneEnv) -> Option<PruneSkip> {
    match settings.mode {
        PruneMode::Off => return Some(PruneSkip::Off),
        PruneMode::Always => {}
        PruneMode::CacheTtl => {
            let Some(last) = env.clock.last_cache_touch_ms else {
                return Some(PruneSkip::NoCacheTouch);
            };
            let elapsed_ms = env.now_ms.saturating_sub(last);
            let ttl_ms = settings.ttl_ms;
            if ttl_ms == 0 || elapsed_ms < i64::try_from(ttl_ms).unwrap_or(i64::MAX) {
                return Some(PruneSkip::CacheWarm { elapsed_ms, ttl_ms });
            }
        }
    }
    if env.context_window_tokens == 0 {
        return Some(PruneSkip::NoContextWindow);
    }
    None
}

/// Index of the `keep`-th assistant message from the end (`len` when `keep` is 0).
fn assistant_cutoff(messages: &[Message], keep: usize) -> Option<usize> {
    let Some(nth) = keep.checked_sub(1) else {
        return Some(messages.len());
    };
    messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.role == Role::Assistant)
        .nth(nth)
        .map(|(index, _)| index)
}

/// A prunable result.
struct Candidate {
    message: usize,
    block: usize,
    tool_name: Option<String>,
    /// Current estimator characters of its content.
    chars: usize,
    /// Index in `new_refs` of its original, when a soft trim in this prune kept it.
    original_ref: Option<usize>,
}

fn collect_candidates(
    messages: &[Message],
    prune_start: usize,
    cutoff: usize,
    settings: &PruneSettings,
    cleared_before: &dyn Fn(&str) -> bool,
) -> Vec<Candidate> {
    let filter = CompiledMatch::new(&settings.tools);
    // The name of the most recent call with each id: Anthropic and OpenAI results do not carry
    // their tool's name.
    let mut call_names: HashMap<&str, &str> = HashMap::new();
    let mut candidates = Vec::new();
    for (message_index, message) in messages.iter().enumerate().take(cutoff) {
        for (block_index, block) in message.content.iter().enumerate() {
            match block {
                Block::ToolCall(call) => {
                    call_names.insert(&call.id, &call.name);
                }
                Block::ToolResult(result) => {
                    if message_index < prune_start
                        || (!settings.trim_images && has_image(&result.content))
                        || cleared_before(&result.call_id)
                    {
                        continue;
                    }
                    let name = result
                        .tool_name
                        .as_deref()
                        .or_else(|| call_names.get(result.call_id.as_str()).copied());
                    if !filter.is_prunable(name.unwrap_or("")) {
                        continue;
                    }
                    candidates.push(Candidate {
                        message: message_index,
                        block: block_index,
                        tool_name: name.map(str::to_owned),
                        chars: content_chars(&result.content),
                        original_ref: None,
                    });
                }
                Block::Text(_) | Block::Image(_) | Block::Thinking(_) | Block::Opaque(_) => {}
            }
        }
    }
    candidates
}

fn result_mut<'a>(
    messages: &'a mut [Message],
    candidate: &Candidate,
) -> Option<&'a mut ToolResult> {
    messages
        .get_mut(candidate.message)?
        .content
        .get_mut(candidate.block)?
        .as_tool_result_mut()
}
