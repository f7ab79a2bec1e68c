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
//!    pruning], results holding an image, and tools the allow/deny globs exclude (case-insensitive,
//!    deny wins, empty allow = all; a result without a tool name takes the name of its call).
//! 4. If `total / char_window < soft_trim_ratio` [0.3] nothing changes. Otherwise every prunable
//!    result whose text (blocks joined by newlines) exceeds `soft_trim.max_chars` \[4,000\]
//!    becomes head \[1,500\] + `"\n...\n"` + tail \[1,500\] + `"\n\n[Tool result trimmed: kept
//!    first H chars and last T chars of N chars.]"`, head and tail taken across block boundaries.
//! 5. If the ratio is still ≥ `hard_clear_ratio` [0.5] and the prunable results hold at least
//!    `min_prunable_tool_chars` \[50,000\], results are replaced by the placeholder ["[Old tool
//!    result content cleared]"], oldest first, until the ratio drops below `hard_clear_ratio`.
//!
//! Differences from OpenClaw, all deliberate: a trim or clear that would not make a result
//! shorter is skipped (so pruning never grows the context); tool results are blocks, so an
//! Anthropic-style message holding several results is pruned result by result; non-text,
//! non-image blocks (opaque) survive a soft trim; a trim or clear that cuts out a ref placeholder
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

use std::borrow::Cow;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::message::{Block, Message, Role, TextBlock, ToolResult};
use crate::refs::{self, NewRef, REF_PREFIX, RefId, RefPayload};
use crate::tokens::{CHARS_PER_TOKEN, estimate_messages_chars, estimate_string_chars};

use super::truncate::{content_chars, prefix_end, suffix_start};

mod globs;
#[cfg(test)]
mod tests;

use globs::CompiledMatch;
#[cfg(test)]
use globs::glob_match;

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
    /// Every change, in message order.
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
/// placeholder (it is not called otherwise).
pub fn prune_with(
    mut messages: Vec<Message>,
    settings: &PruneSettings,
    env: PruneEnv,
    summarize: &mut dyn FnMut(&ClearedResult<'_>) -> String,
) -> PruneOutcome {
    let mut report = PruneReport::default();
    let mut clock = env.clock;
    let skip = |mut report: PruneReport, messages, skip: PruneSkip| {
        report.skipped_by_ttl =
            matches!(skip, PruneSkip::NoCacheTouch | PruneSkip::CacheWarm { .. });
        report.skipped = Some(skip);
        report.chars_after = report.chars_before;
        report.ratio_after = report.ratio_before;
        PruneOutcome {
            messages,
            report,
            new_refs: Vec::new(),
            clock,
        }
    };
    if let Some(reason) = gate(settings, &env) {
        return skip(report, messages, reason);
    }
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
        return skip(report, messages, PruneSkip::BelowSoftTrimRatio);
    }

    let mut candidates = collect_candidates(&messages, prune_start, cutoff, &settings.tools);
    report.prunable_results = candidates.len();
    let mut new_refs = Vec::new();

    for candidate in &mut candidates {
        let Some(result) = result_mut(&mut messages, candidate) else {
            continue;
        };
        let Some(change) = soft_trim(result, candidate, settings, &mut new_refs) else {
            continue;
        };
        total = total - change.chars_before + change.chars_after;
        report.trimmed += 1;
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
            report.changes.push(change);
        }
    }

    report.chars_after = total;
    report.ratio_after = ratio(total);
    if !report.changes.is_empty() {
        clock.touch(env.now_ms);
    }
    PruneOutcome {
        messages,
        report,
        new_refs,
        clock,
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
    tools: &ToolMatch,
) -> Vec<Candidate> {
    let filter = CompiledMatch::new(tools);
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
                    if message_index < prune_start || has_image(&result.content) {
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

fn has_image(blocks: &[Block]) -> bool {
    blocks.iter().any(|block| matches!(block, Block::Image(_)))
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

/// A 64-character id for measuring texts before the real one is computed.
fn dummy_id() -> RefId {
    RefId::of_bytes(b"")
}

fn trim_note(head: usize, tail: usize, total: usize, id: Option<&RefId>) -> String {
    match id {
        None => format!(
            "[Tool result trimmed: kept first {head} chars and last {tail} chars of {total} chars.]"
        ),
        Some(id) => format!(
            "[Tool result trimmed: kept first {head} chars and last {tail} chars of {total} \
             chars; full output: {REF_PREFIX}{id}] - call fetch_original_data with this ref id \
             to read it.]"
        ),
    }
}

fn soft_trim(
    result: &mut ToolResult,
    candidate: &mut Candidate,
    settings: &PruneSettings,
    new_refs: &mut Vec<NewRef>,
) -> Option<PruneChange> {
    let trim = &settings.soft_trim;
    let parts = text_parts(&result.content);
    let separators = parts.len().saturating_sub(1);
    let raw_len = parts
        .iter()
        .map(|p| estimate_string_chars(p))
        .sum::<usize>()
        + separators;
    if raw_len <= trim.max_chars || trim.head_chars.saturating_add(trim.tail_chars) >= raw_len {
        return None;
    }
    let head = take_head(&parts, trim.head_chars);
    let tail = take_tail(&parts, trim.tail_chars);
    let body = format!("{head}\n...\n{tail}\n\n");
    let keep = settings.keep_originals;
    // Without a ref of its own, the trimmed text must still name the refs it cuts out.
    let plain_note = (!keep).then(|| {
        trim_note(trim.head_chars, trim.tail_chars, raw_len, None)
            + &carried_suffix(&carried_refs(&parts, &[&head, &tail]))
    });
    let note_len = match &plain_note {
        Some(note) => note.len(),
        None => trim_note(trim.head_chars, trim.tail_chars, raw_len, Some(&dummy_id())).len(),
    };
    let text_chars: usize = parts.iter().map(|p| estimate_string_chars(p)).sum();
    let after = candidate.chars - text_chars + estimate_string_chars(&body) + note_len;
    if after >= candidate.chars {
        return None;
    }
    let original = std::mem::take(&mut result.content);
    let (content, ref_id) = match plain_note {
        None => {
            let new_ref = NewRef::new(RefPayload::new(original));
            let note = trim_note(trim.head_chars, trim.tail_chars, raw_len, Some(&new_ref.id));
            let content = rebuild(
                new_ref.payload.blocks.iter().map(Cow::Borrowed),
                body + &note,
            );
            let id = new_ref.id.to_string();
            candidate.original_ref = Some(new_refs.len());
            new_refs.push(new_ref);
            (content, Some(id))
        }
        Some(note) => (
            rebuild(original.into_iter().map(Cow::Owned), body + &note),
            None,
        ),
    };
    result.content = content;
    let before = candidate.chars;
    candidate.chars = content_chars(&result.content);
    Some(PruneChange {
        message_index: candidate.message,
        block_index: candidate.block,
        call_id: result.call_id.clone(),
        tool_name: candidate.tool_name.clone(),
        action: PruneAction::Trimmed,
        chars_before: before,
        chars_after: candidate.chars,
        ref_id,
        reason: format!(
            "soft trim: result text of {raw_len} chars exceeds soft_trim.max_chars {}",
            trim.max_chars
        ),
    })
}

fn hard_clear(
    messages: &mut [Message],
    candidate: &mut Candidate,
    settings: &PruneSettings,
    new_refs: &mut Vec<NewRef>,
    summarize: &mut dyn FnMut(&ClearedResult<'_>) -> String,
    ratio: f64,
) -> Option<PruneChange> {
    let keep = settings.keep_originals;
    let summary = if keep {
        let result = result_mut(messages, candidate)?;
        let content = match candidate.original_ref.and_then(|i| new_refs.get(i)) {
            Some(original) => original.payload.blocks.as_slice(),
            None => result.content.as_slice(),
        };
        Some(summarize(&ClearedResult {
            call_id: &result.call_id,
            tool_name: candidate.tool_name.as_deref(),
            content,
            chars: content_chars(content),
        }))
    } else {
        None
    };
    let plain = summary.is_none().then(|| {
        let texts: Vec<&str> = result_mut(messages, candidate)
            .map(|result| text_parts(&result.content))
            .unwrap_or_default();
        settings.hard_clear.placeholder.clone() + &carried_suffix(&carried_refs(&texts, &[]))
    });
    let after = match (&summary, &plain) {
        (Some(summary), _) => estimate_string_chars(&refs::placeholder(&dummy_id(), summary)),
        (None, Some(plain)) => estimate_string_chars(plain),
        (None, None) => return None,
    };
    if after >= candidate.chars {
        return None;
    }
    let result = result_mut(messages, candidate)?;
    let original = std::mem::take(&mut result.content);
    let (text, ref_id) = match summary {
        None => (plain.unwrap_or_default(), None),
        Some(summary) => {
            let id = match candidate.original_ref.and_then(|i| new_refs.get(i)) {
                // A soft trim in this prune already kept the original.
                Some(original_ref) => original_ref.id.clone(),
                None => {
                    let new_ref = NewRef::new(RefPayload::new(original));
                    let id = new_ref.id.clone();
                    new_refs.push(new_ref);
                    id
                }
            };
            (refs::placeholder(&id, &summary), Some(id.to_string()))
        }
    };
    result.content = vec![Block::text(text)];
    let before = candidate.chars;
    candidate.chars = content_chars(&result.content);
    Some(PruneChange {
        message_index: candidate.message,
        block_index: candidate.block,
        call_id: result.call_id.clone(),
        tool_name: candidate.tool_name.clone(),
        action: PruneAction::Cleared,
        chars_before: before,
        chars_after: candidate.chars,
        ref_id,
        reason: format!(
            "hard clear: context ratio {ratio:.3} at or above hard_clear_ratio {}",
            settings.hard_clear_ratio
        ),
    })
}

fn text_parts(blocks: &[Block]) -> Vec<&str> {
    blocks
        .iter()
        .filter_map(Block::as_text)
        .map(|text| text.text.as_str())
        .collect()
}

/// Ref ids named in `texts` but in none of `kept`, in order of appearance, without repeats: a
/// result that already pointed at stored originals keeps pointing at them when cut.
fn carried_refs(texts: &[&str], kept: &[&str]) -> Vec<RefId> {
    let kept: Vec<RefId> = kept
        .iter()
        .flat_map(|text| refs::ref_ids_in(text))
        .collect();
    let mut carried: Vec<RefId> = Vec::new();
    for id in texts.iter().flat_map(|text| refs::ref_ids_in(text)) {
        if !kept.contains(&id) && !carried.contains(&id) {
            carried.push(id);
        }
    }
    carried
}

fn carried_suffix(ids: &[RefId]) -> String {
    if ids.is_empty() {
        return String::new();
    }
    let tokens: Vec<String> = ids.iter().map(|id| format!("{REF_PREFIX}{id}]")).collect();
    format!(" Refs in the removed part: {}", tokens.join(" "))
}

/// `blocks` with their text blocks replaced by one block holding `text`, where the first text
/// block was; other blocks stay in place.
fn rebuild<'a>(blocks: impl Iterator<Item = Cow<'a, Block>>, text: String) -> Vec<Block> {
    let mut text = Some(text);
    let mut out = Vec::new();
    for block in blocks {
        if let Block::Text(first) = block.as_ref() {
            if let Some(text) = text.take() {
                out.push(Block::Text(TextBlock {
                    text,
                    extra: first.extra.clone(),
                }));
            }
        } else {
            out.push(block.into_owned());
        }
    }
    if let Some(text) = text {
        out.push(Block::text(text));
    }
    out
}

/// The first `budget` characters of `parts` joined by newlines (a newline counts as one).
fn take_head(parts: &[&str], budget: usize) -> String {
    let mut remaining = budget;
    let mut out = String::new();
    for (index, part) in parts.iter().enumerate() {
        if remaining == 0 {
            break;
        }
        if index > 0 {
            out.push('\n');
            remaining -= 1;
            if remaining == 0 {
                break;
            }
        }
        let end = prefix_end(part, remaining);
        let taken = part.get(..end).unwrap_or_default();
        out.push_str(taken);
        if end < part.len() {
            break;
        }
        remaining -= estimate_string_chars(taken);
    }
    out
}

/// The last `budget` characters of `parts` joined by newlines (a newline counts as one).
fn take_tail(parts: &[&str], budget: usize) -> String {
    let mut remaining = budget;
    let mut pieces: Vec<&str> = Vec::new();
    for (index, part) in parts.iter().enumerate().rev() {
        if remaining == 0 {
            break;
        }
        let start = suffix_start(part, remaining);
        let taken = part.get(start..).unwrap_or_default();
        pieces.push(taken);
        if start > 0 {
            break;
        }
        remaining -= estimate_string_chars(taken);
        if remaining > 0 && index > 0 {
            pieces.push("\n");
            remaining -= 1;
        }
    }
    pieces.iter().rev().copied().collect()
}
