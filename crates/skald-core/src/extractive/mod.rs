//! The extractive summarizer: a compaction summary with no LLM. Deterministic, pure, and shaped
//! like every other summary (seed 001's five sections, [`crate::summary::REQUIRED_SECTIONS`]),
//! it is what compaction falls back to without a provider and the baseline an LLM summary is
//! measured against.
//!
//! What each section is made of, and from whom:
//! - **Decisions** — the assistant's statements of choice and diagnosis ("I'll use…", "instead
//!   of…", "the root cause is…", their Chinese equivalents), then its plans and announced
//!   actions; what the tool calls show was done: files edited or written, commands that
//!   succeeded after failing, commits. Recent ones rank higher.
//! - **Open TODOs** — the latest todo list a todo tool wrote (pending and in-progress items),
//!   unchecked `- [ ]` boxes, `TODO:` lines and "next step / still need to / remaining"
//!   sentences of the latest assistant turns; an item a later list or sentence reports done is
//!   dropped.
//! - **Constraints/Rules** — imperative clauses the user wrote ("always…", "never…", "don't…",
//!   "must…", "make sure…", "only…", "please use…", 必须/不要/请使用/务必/禁止…), also after a
//!   label ("Step 3: never…", "Note: …", "注意：…") or a comma ("ok, never push to main"), then
//!   rules from system messages; a rule said in several turns is one item. Never from tool
//!   output (data), nor from host boilerplate — system reminders, caveats, command wrappers,
//!   tool-usage banners — wrapped or not.
//! - **Pending user asks** — what the user said after the assistant's last answer (prose with no
//!   tool call), quoted, continuations ("continue", "好的") left out. The latest substantive ask
//!   is always there (marked `[answered]` once answered and not continued): the next turn builds
//!   on it, and the quality guard checks for it.
//! - **Exact identifiers** — the caller's must-keep identifiers verbatim, then those
//!   [`crate::identifiers`] finds anywhere in the span, ranked by who used them (user, assistant
//!   prose, tool calls, then tool output alone), frequency and recency; each whole, as written.
//!
//! A previous summary (passed in, or carried in the span as a Claude Code `isCompactSummary`
//! message, an OpenClaw `compactionSummary` entry, a user message wrapping a summary the way a
//! compacted context shows it, or a bare five-section summary such as the partial summaries a
//! staged compaction merges) is merged section by section; the span's items rank above it, so
//! the newest survive when space runs out. Of several summaries, the latest one's pending asks
//! stay pending until the span answers. The output never exceeds
//! [`ExtractiveInput::max_chars`] characters (or [`MIN_MAX_CHARS`], the five headings with
//! `- (none)`, if that is more); items are cut at a word or character boundary, never inside an
//! identifier, and marked with `…`.
//!
//! ```
//! use skald_core::extractive::{ExtractiveInput, summarize};
//! use skald_core::message::{Message, Role};
//! use skald_core::summary::missing_sections;
//!
//! let messages = vec![
//!     Message::text(Role::User, "Never touch /etc/app/prod.toml. Why does the build fail?"),
//!     Message::text(Role::Assistant, "The root cause is a stale lockfile, so I'll use cargo update."),
//!     Message::text(Role::User, "Ok, also bump the version."),
//! ];
//! let summary = summarize(&messages, &ExtractiveInput::default());
//! assert!(missing_sections(&summary).is_empty());
//! assert!(summary.contains("- Never touch /etc/app/prod.toml."));
//! assert!(summary.contains("The root cause is a stale lockfile"));
//! assert!(summary.contains("- \"Ok, also bump the version.\""));
//! ```

mod actions;
mod budget;
mod decisions;
mod ids;
mod imperative;
mod previous;
mod rules;
mod span;
mod text;
mod todos;

use crate::message::Message;
use crate::tokens::estimate::is_cjk;

use span::Span;

/// Default size of a summary in characters (about 3,000 tokens).
pub const DEFAULT_MAX_CHARS: usize = 12_000;

/// The shortest summary there is: the five headings, each with `- (none)`. A smaller
/// `max_chars` still gets this.
pub const MIN_MAX_CHARS: usize = 138;

/// The item an empty section holds.
pub const NONE_ITEM: &str = "(none)";

/// The language of the few words the summarizer writes itself (labels such as "Files
/// changed:"); quoted sentences stay in the language they were written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SummaryLanguage {
    /// Chinese when the user's and assistant's prose is mostly Chinese, English otherwise.
    #[default]
    Auto,
    /// English labels whatever the conversation's language.
    English,
    /// Chinese labels whatever the conversation's language.
    Chinese,
}

/// Tuning of the extractive summarizer.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractiveSettings {
    /// Longest item (a sentence, a todo, a file list) before it is cut.
    pub max_item_chars: usize,
    /// Longest quoted pending ask.
    pub max_ask_chars: usize,
    /// How many of the latest assistant messages are read for TODO statements.
    pub recent_assistant_messages: usize,
    /// Most rules taken from system messages and harness text.
    pub max_system_rules: usize,
    /// Relative shares of the budget, in [`crate::summary::REQUIRED_SECTIONS`] order, for
    /// sections that have more to say than fits.
    pub section_weights: [u32; 5],
}

impl Default for ExtractiveSettings {
    fn default() -> Self {
        ExtractiveSettings {
            max_item_chars: 320,
            max_ask_chars: 600,
            recent_assistant_messages: 8,
            max_system_rules: 10,
            section_weights: [3, 2, 2, 3, 3],
        }
    }
}

/// What a summary is made from besides the messages.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractiveInput {
    /// The summary of what came before the span, merged section by section.
    pub previous_summary: Option<String>,
    /// Identifiers the summary must show verbatim (the quality guard's list), first in their
    /// section.
    pub identifiers: Vec<String>,
    /// Longest summary in characters (Unicode scalar values).
    pub max_chars: usize,
    /// The language of the summary's own labels.
    pub language: SummaryLanguage,
    /// Item lengths, how much is read, and section shares.
    pub settings: ExtractiveSettings,
    /// The latest substantive user ask (continuations skipped) when the caller knows it: always
    /// quoted under Pending user asks. Without it the span's own latest ask is.
    pub latest_ask: Option<String>,
}

impl Default for ExtractiveInput {
    fn default() -> Self {
        ExtractiveInput {
            previous_summary: None,
            identifiers: Vec::new(),
            max_chars: DEFAULT_MAX_CHARS,
            language: SummaryLanguage::Auto,
            settings: ExtractiveSettings::default(),
            latest_ask: None,
        }
    }
}

/// A section item before budgeting.
#[derive(Debug, Clone)]
struct Candidate {
    body: Body,
    /// Higher is kept first.
    score: i64,
    /// Where the item is written within its section: group, then position.
    order: (u32, u64),
}

#[derive(Debug, Clone)]
enum Body {
    Text(String),
    /// A label and entries (oldest first); a shortened list drops the oldest entries, never
    /// part of one.
    List {
        label: String,
        entries: Vec<String>,
    },
}

/// The words the summarizer writes itself.
#[derive(Debug, Clone, Copy)]
struct Labels {
    files_changed: &'static str,
    committed: &'static str,
    in_progress: &'static str,
    pending: &'static str,
    answered: &'static str,
    chinese: bool,
}

impl Labels {
    fn new(language: SummaryLanguage) -> Labels {
        match language {
            SummaryLanguage::Chinese => Labels {
                files_changed: "已修改文件：",
                committed: "已提交：",
                in_progress: "[进行中]",
                pending: "[待办]",
                answered: "[已答复]",
                chinese: true,
            },
            SummaryLanguage::English | SummaryLanguage::Auto => Labels {
                files_changed: "Files changed:",
                committed: "Committed:",
                in_progress: "[in progress]",
                pending: "[pending]",
                answered: "[answered]",
                chinese: false,
            },
        }
    }

    fn recovered(&self, command: &str, failures: usize) -> String {
        if self.chinese {
            format!("`{command}` 在失败 {failures} 次后成功")
        } else {
            let plural = if failures == 1 { "" } else { "s" };
            format!("`{command}` succeeded after {failures} failed attempt{plural}")
        }
    }
}

/// The language of the prose the user and the assistant wrote.
fn resolve_language(requested: SummaryLanguage, span: &Span<'_>) -> SummaryLanguage {
    match requested {
        SummaryLanguage::English | SummaryLanguage::Chinese => return requested,
        SummaryLanguage::Auto => {}
    }
    let (mut cjk, mut words) = (0usize, 0usize);
    for turn in &span.turns {
        for text in [&turn.user_own, &turn.assistant] {
            cjk += text.chars().filter(|c| is_cjk(*c)).count();
            words += text
                .split(|c: char| !c.is_ascii_alphabetic())
                .filter(|word| !word.is_empty())
                .count();
        }
    }
    if cjk > words {
        SummaryLanguage::Chinese
    } else {
        SummaryLanguage::English
    }
}

/// The summary of `messages` (the span being compacted), in the five required sections,
/// within `input.max_chars` characters.
pub fn summarize(messages: &[Message], input: &ExtractiveInput) -> String {
    let span = Span::read(messages);
    let labels = Labels::new(resolve_language(input.language, &span));
    let settings = &input.settings;

    let summaries: Vec<&str> = input
        .previous_summary
        .as_deref()
        .into_iter()
        .chain(span.turns.iter().filter_map(|turn| turn.summary.as_deref()))
        .collect();
    let mut previous = previous::PreviousSummary::default();
    for summary in &summaries {
        previous::read_into(summary, &mut previous);
    }
    let [
        previous_decisions,
        previous_todos,
        previous_rules,
        _all_previous_asks,
        _previous_ids,
    ] = &previous.sections;
    let previous_asks = &previous::latest_asks(&summaries);

    let mut decisions = decisions::decision_candidates(&span, previous_decisions);
    decisions.extend(actions::action_candidates(&span, &labels));
    let todos = todos::todo_candidates(
        &span,
        previous_todos,
        settings.recent_assistant_messages,
        &labels,
    );
    let rules = rules::rule_candidates(&span, previous_rules, settings.max_system_rules);
    let asks = rules::ask_candidates(
        &span,
        previous_asks,
        settings.max_ask_chars,
        labels.answered,
        input.latest_ask.as_deref(),
    );
    let identifiers = ids::identifier_candidates(&span, &input.identifiers, &previous);

    budget::render(
        [decisions, todos, rules, asks],
        identifiers,
        input.max_chars,
        settings.max_item_chars,
        &settings.section_weights,
    )
}

/// The words the user wrote in a user text block, harness wrappers (`<system-reminder>…`,
/// `<local-command-stdout>…`, interruption markers) removed: what an ask is read from.
pub(crate) fn user_own_text(text: &str) -> String {
    text::split_user_text(text).own
}

/// The text of a span the way the summarizer reads it: every model-visible message's text,
/// tool-call arguments (their string values) and tool-result text, one piece per line; thinking,
/// images and `details` left out. Measures of what a summary kept (the share of the span's
/// identifiers) extract from this.
pub fn span_text(messages: &[Message]) -> String {
    use crate::message::Block;
    let mut out = String::new();
    for message in messages.iter().filter(|message| message.is_model_visible()) {
        for block in &message.content {
            match block {
                Block::Text(text) => push_line(&mut out, &text.text),
                Block::ToolCall(call) => push_line(&mut out, &span::arguments_text(call)),
                Block::ToolResult(result) => push_line(&mut out, &span::result_text(result)),
                Block::Image(_) | Block::Thinking(_) | Block::Opaque(_) => {}
            }
        }
    }
    out
}

fn push_line(out: &mut String, text: &str) {
    if text.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(text);
}
