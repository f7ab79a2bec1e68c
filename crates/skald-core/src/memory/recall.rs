//! Per-turn recall and session-start injection, the pure part (seed 002, Components 2 and 3):
//! the settings, the query built from the last user messages, when recall is skipped, how
//! relevant a found memory is, which memories fit the token budget at which level, and the
//! model-visible messages — a simulated `search_memories` call with its result, the profile
//! section of the system prompt, and a simulated `memory_ls` of `viking://`.
//!
//! The engine (`skald_engine::memory`) searches the store and hands the hits here as
//! [`RecallCandidate`]s; nothing in this module reads or writes anything.
//!
//! **Relevance.** The store's fused score (reciprocal rank fusion) says how a hit ranks against
//! the other hits of the same search, not whether it is relevant at all: the best hit of a search
//! for something never remembered still has the top score. So the threshold applies to two
//! absolute measures instead, and a hit is kept when either clears its bar:
//! - **term coverage** ([`term_coverage`]): the share of the query's content words (after
//!   [`QueryPlan`]'s stopwords, with a light suffix stemmer) that occur in the memory's text or
//!   the informative part of its URI ([`informative_path`]), counted against at most
//!   [`COVERAGE_SATURATION_TERMS`] words. A query made of five
//!   messages has many words and a relevant memory shares a few of them, so matching three is
//!   full coverage; one word of a long query is 0.33, below the default bar of 0.5 — the
//!   one-common-word matches users complained of as noisy recall. Measured on LoCoMo (1,155
//!   questions, the question as query, the store's top 10 hits; the ignored test
//!   `memory_threshold_locomo` in skald-engine): 0.5 keeps 96% of the evidence hits and drops
//!   19% of the others; 0.67 drops 70% of the others but also 32% of the evidence.
//! - **cosine similarity** of the query's and the memory's embeddings, when both exist
//!   (OpenViking's recall thresholds are cosine values: 0.15 for its plugin's default, 0.35 for
//!   its experience memory; skald uses 0.35).
//!
//! **Budget.** Kept memories fill [`RecallSettings::max_tokens`] tier by tier, as OpenViking's
//! context assembly does: every memory first at L0 (a memory whose abstract does not fit is
//! dropped, never cut), then each in rank order deepened to L1, then to L2, up to
//! [`RecallSettings::level`], while the whole entry still fits.
//!
//! ```
//! use skald_core::memory::recall::{RecallSettings, SkipReason, recall_query};
//! use skald_core::message::{Message, Role};
//!
//! let settings = RecallSettings::default();
//! let messages = vec![
//!     Message::text(Role::User, "How do I optimise the database?"),
//!     Message::text(Role::Assistant, "Which one?"),
//!     Message::text(Role::User, "The Postgres one behind billing"),
//! ];
//! let query = recall_query(&messages, &settings).unwrap();
//! assert_eq!(query, "The Postgres one behind billing\nHow do I optimise the database?");
//!
//! let greeting = vec![Message::text(Role::User, "thanks!")];
//! assert!(matches!(recall_query(&greeting, &settings), Err(SkipReason::Greeting { .. })));
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::dedup::words;
use super::levels::cut_at_word;
use super::query::QueryPlan;
use crate::compaction::plan::is_user_ask;
use crate::message::{Block, Extra, Message, Role, ToolCall, ToolResult, join_text};
use crate::tokens::{CHARS_PER_TOKEN, estimate_string_chars};

/// The name of the recall tool, real (the agent may call it) and simulated (per-turn recall).
pub const SEARCH_TOOL_NAME: &str = "search_memories";

/// The name of the listing tool, real and simulated (directory pre-injection).
pub const LS_TOOL_NAME: &str = "memory_ls";

/// Term coverage counts matched words against at most this many query words.
pub const COVERAGE_SATURATION_TERMS: usize = 3;

/// At most this many characters of one user message go into a recall query: a pasted log
/// would otherwise drown the question.
pub const MAX_QUERY_MESSAGE_CHARS: usize = 500;

/// Id prefix of the simulated calls (followed by 16 hex digits of a hash of what they ask).
pub const SIMULATED_CALL_PREFIX: &str = "skald_mem_";

/// Tags whose blocks inside a user message are context a harness or plugin injected, not words
/// of the user; they never become part of a query.
const INJECTED_TAGS: [&str; 5] = [
    "system-reminder",
    "openviking-context",
    "relevant-memories",
    "skald-memory",
    "memory-context",
];

/// Whole messages that are a greeting, a thank-you or an acknowledgement, after lower-casing
/// and dropping punctuation; recall is skipped for them (seed 002: "你好", "在吗", "hi",
/// "hello").
const GREETINGS: &[&str] = &[
    "hi",
    "hello",
    "hey",
    "hi there",
    "hello there",
    "hey there",
    "yo",
    "good morning",
    "good afternoon",
    "good evening",
    "thanks",
    "thank you",
    "thanks a lot",
    "thank you very much",
    "thx",
    "ty",
    "ok",
    "okay",
    "ok thanks",
    "ok thank you",
    "cool",
    "great",
    "nice",
    "yes",
    "no",
    "yep",
    "nope",
    "sure",
    "bye",
    "goodbye",
    "got it",
    "你好",
    "您好",
    "在吗",
    "在么",
    "谢谢",
    "多谢",
    "好的",
    "好",
    "嗯",
    "嗯嗯",
    "收到",
    "再见",
    "早上好",
    "晚上好",
    "こんにちは",
    "ありがとう",
    "안녕하세요",
    "hola",
    "gracias",
    "bonjour",
    "merci",
    "salut",
    "hallo",
    "danke",
    "ciao",
    "grazie",
    "olá",
    "obrigado",
    "привет",
    "спасибо",
];

/// Which level of a memory recall shows at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecallLevel {
    /// The abstract (`abstract` in the result).
    L0,
    /// The overview (`overview`).
    L1,
    /// The full content (`content`).
    L2,
}

impl RecallLevel {
    /// The field name of the text at this level in a tool result.
    pub fn field(self) -> &'static str {
        match self {
            RecallLevel::L0 => "abstract",
            RecallLevel::L1 => "overview",
            RecallLevel::L2 => "content",
        }
    }

    /// Parses `l0`, `l1` or `l2` (any case).
    pub fn parse(text: &str) -> Option<RecallLevel> {
        match text.to_ascii_lowercase().as_str() {
            "l0" => Some(RecallLevel::L0),
            "l1" => Some(RecallLevel::L1),
            "l2" => Some(RecallLevel::L2),
            _ => None,
        }
    }
}

/// `[memory.recall]`: per-turn recall and what is injected at session start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecallSettings {
    /// Per-turn recall on or off (the agent tools work either way).
    pub enabled: bool,
    /// How many of the last user messages make the query (seed 002: 5).
    pub query_messages: usize,
    /// A latest user message with fewer characters than this skips recall (seed 002: messages
    /// of 3 characters or fewer).
    pub min_query_chars: usize,
    /// At most this many memories are injected.
    pub max_results: usize,
    /// A memory is relevant when this share of the query's words (see [`term_coverage`]) occur
    /// in it, 0 to 1…
    pub min_term_coverage: f64,
    /// …or when its embedding's cosine similarity to the query's is at least this, -1 to 1.
    pub min_cosine: f64,
    /// The deepest level shown.
    pub level: RecallLevel,
    /// The token budget of the injected memories (OpenViking's `max_tokens`: 1600).
    pub max_tokens: u64,
    /// Inject the user's profile into the system prompt at session start.
    pub profile: bool,
    /// Characters of the profile section.
    pub profile_max_chars: usize,
    /// Pre-inject a simulated `memory_ls` of `viking://` at session start.
    pub directory: bool,
    /// How deep the pre-injected listing goes below `viking://`.
    pub directory_depth: usize,
    /// Characters of the pre-injected listing.
    pub directory_max_chars: usize,
    /// Inject the tool usage statistics into the system prompt at session start.
    pub tool_memory: bool,
    /// Append skill memories to reads of `skills/<name>/SKILL.md`.
    pub skill_memory: bool,
}

impl Default for RecallSettings {
    fn default() -> RecallSettings {
        RecallSettings {
            enabled: true,
            query_messages: 5,
            min_query_chars: 4,
            max_results: 5,
            min_term_coverage: 0.5,
            min_cosine: 0.35,
            level: RecallLevel::L1,
            max_tokens: 1600,
            profile: true,
            profile_max_chars: 2000,
            directory: true,
            directory_depth: 3,
            directory_max_chars: 3000,
            tool_memory: true,
            skill_memory: true,
        }
    }
}

/// A recall setting out of range; the message names the field and the accepted range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("memory.recall.{field} is {found}; {expected}")]
pub struct RecallSettingsError {
    pub field: &'static str,
    pub found: String,
    pub expected: &'static str,
}

impl RecallSettings {
    /// Checks every setting, naming the first one out of range.
    pub fn validate(&self) -> Result<(), RecallSettingsError> {
        let error = |field, found: String, expected| {
            Err(RecallSettingsError {
                field,
                found,
                expected,
            })
        };
        if !(1..=50).contains(&self.query_messages) {
            return error(
                "query_messages",
                self.query_messages.to_string(),
                "it must be from 1 to 50",
            );
        }
        if self.min_query_chars > 1000 {
            return error(
                "min_query_chars",
                self.min_query_chars.to_string(),
                "it must be at most 1000",
            );
        }
        if !(1..=50).contains(&self.max_results) {
            return error(
                "max_results",
                self.max_results.to_string(),
                "it must be from 1 to 50",
            );
        }
        if !(self.min_term_coverage.is_finite() && (0.0..=1.0).contains(&self.min_term_coverage)) {
            return error(
                "min_term_coverage",
                self.min_term_coverage.to_string(),
                "it must be from 0 to 1",
            );
        }
        if !(self.min_cosine.is_finite() && (-1.0..=1.0).contains(&self.min_cosine)) {
            return error(
                "min_cosine",
                self.min_cosine.to_string(),
                "it must be from -1 to 1",
            );
        }
        if !(50..=100_000).contains(&self.max_tokens) {
            return error(
                "max_tokens",
                self.max_tokens.to_string(),
                "it must be from 50 to 100000",
            );
        }
        for (field, found) in [
            ("profile_max_chars", self.profile_max_chars),
            ("directory_max_chars", self.directory_max_chars),
        ] {
            if !(100..=100_000).contains(&found) {
                return error(field, found.to_string(), "it must be from 100 to 100000");
            }
        }
        if !(1..=10).contains(&self.directory_depth) {
            return error(
                "directory_depth",
                self.directory_depth.to_string(),
                "it must be from 1 to 10",
            );
        }
        Ok(())
    }
}

/// Why no recall was made for a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum SkipReason {
    /// `enabled = false`.
    Disabled,
    /// No user message with text of its own (only injected or harness content).
    NoUserMessage,
    /// The latest user message is a greeting or an acknowledgement.
    Greeting { text: String },
    /// The latest user message is shorter than `min_query_chars`.
    TooShort { chars: usize, min: usize },
    /// The query has no word to search for.
    NoSearchableWords,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Disabled => f.write_str("recall is disabled"),
            SkipReason::NoUserMessage => f.write_str("no user message to recall for"),
            SkipReason::Greeting { text } => write!(f, "{text:?} is a greeting"),
            SkipReason::TooShort { chars, min } => write!(
                f,
                "the latest user message has {chars} characters, fewer than {min}"
            ),
            SkipReason::NoSearchableWords => f.write_str("the query has no words to search for"),
        }
    }
}

/// Whether `text` is, as a whole, a greeting, a thank-you or an acknowledgement.
pub fn is_greeting(text: &str) -> bool {
    let normalized = words(text).collect::<Vec<_>>().join(" ");
    !normalized.is_empty() && GREETINGS.contains(&normalized.as_str())
}

/// The text a person wrote in a user message: its text blocks, without blocks of injected
/// context (`<system-reminder>…</system-reminder>` and the like), trimmed. Empty for messages a
/// harness wrote (see [`is_user_ask`]).
pub fn user_text(message: &Message) -> String {
    if message.role != Role::User {
        return String::new();
    }
    let mut text = message.plain_text();
    for tag in INJECTED_TAGS {
        text = strip_tag_blocks(&text, tag);
    }
    let stripped = Message {
        content: vec![Block::text(text.trim())],
        ..message.clone()
    };
    if is_user_ask(&stripped) {
        text.trim().to_owned()
    } else {
        String::new()
    }
}

fn strip_tag_blocks(text: &str, tag: &str) -> String {
    let open = format!("<{tag}");
    let close = format!("</{tag}>");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let Some(end) = rest
            .get(start..)
            .and_then(|tail| tail.find(&close))
            .map(|at| start + at + close.len())
        else {
            break;
        };
        out.push_str(rest.get(..start).unwrap_or(""));
        rest = rest.get(end..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// The recall query for the next model call: the texts of the last
/// [`RecallSettings::query_messages`] user messages, newest first (a query keeps at most
/// 32 words, so the newest message's words must come first), each cut to
/// [`MAX_QUERY_MESSAGE_CHARS`]; greetings and too-short earlier messages are left out. Or why
/// recall is skipped: judged on the latest user message alone.
pub fn recall_query(messages: &[Message], settings: &RecallSettings) -> Result<String, SkipReason> {
    if !settings.enabled {
        return Err(SkipReason::Disabled);
    }
    let mut texts = messages
        .iter()
        .rev()
        .map(user_text)
        .filter(|text| !text.is_empty());
    let Some(latest) = texts.next() else {
        return Err(SkipReason::NoUserMessage);
    };
    skip_reason(&latest, settings).map_or(Ok(()), Err)?;
    let mut parts = vec![cut_at_word(&latest, MAX_QUERY_MESSAGE_CHARS)];
    for text in texts.take(settings.query_messages.saturating_sub(1)) {
        if skip_reason(&text, settings).is_none() {
            parts.push(cut_at_word(&text, MAX_QUERY_MESSAGE_CHARS));
        }
    }
    let query = parts.join("\n");
    if QueryPlan::new(&query).is_empty() {
        return Err(SkipReason::NoSearchableWords);
    }
    Ok(query)
}

fn skip_reason(text: &str, settings: &RecallSettings) -> Option<SkipReason> {
    if is_greeting(text) {
        return Some(SkipReason::Greeting {
            text: cut_at_word(text, 40),
        });
    }
    let chars = text.chars().count();
    if chars < settings.min_query_chars {
        return Some(SkipReason::TooShort {
            chars,
            min: settings.min_query_chars,
        });
    }
    None
}

/// A light suffix stemmer for matching query words with memory words (`likes`, `liked`,
/// `liking` → `lik`; `paintings` → `paint`): a plural ending, then `ing`/`ed`, then a final
/// `e`/`y`, each only when 3 characters remain. Both sides go through it, so only agreement
/// matters. Words of 3 characters or fewer and non-ASCII words stay as they are.
pub fn stem(word: &str) -> &str {
    if word.len() <= 3 || !word.is_ascii() {
        return word;
    }
    let strip = |word: &'_ str, suffixes: &[&str]| -> usize {
        suffixes
            .iter()
            .find(|suffix| word.ends_with(*suffix) && word.len() >= suffix.len() + 3)
            .map_or(0, |suffix| suffix.len())
    };
    let mut end = word.len();
    if !word.ends_with("ss") {
        end -= strip(word, &["ies", "es", "s"]);
    }
    let rest = word.get(..end).unwrap_or(word);
    end -= strip(rest, &["ing", "ed"]);
    let rest = word.get(..end).unwrap_or(word);
    end -= strip(rest, &["e", "y"]);
    word.get(..end).unwrap_or(word)
}

/// How many of `terms` occur in `text`, and the coverage: matched / min(terms,
/// [`COVERAGE_SATURATION_TERMS`]), at most 1. A term matches a word of the text with the same
/// [`stem`]. A term in a script written without spaces (CJK) is a whole run of characters
/// ("如何优化数据库"), so it matches when at least half of its character pairs occur in the
/// text.
pub fn term_coverage(terms: &[String], text: &str) -> (usize, f64) {
    if terms.is_empty() {
        return (0, 0.0);
    }
    let stems: std::collections::HashSet<String> =
        words(text).map(|word| stem(&word).to_owned()).collect();
    let lowered = text.to_lowercase();
    let matched = terms
        .iter()
        .filter(|term| {
            if term.chars().any(crate::tokens::estimate::is_cjk) {
                cjk_pairs_found(term, &lowered)
            } else {
                stems.contains(stem(term))
            }
        })
        .count();
    let denominator = terms.len().min(COVERAGE_SATURATION_TERMS);
    (matched, (matched as f64 / denominator as f64).min(1.0))
}

/// Whether at least half of the adjacent character pairs of `term` occur in `text` (the whole
/// term, when it has one or two characters).
fn cjk_pairs_found(term: &str, text: &str) -> bool {
    let chars: Vec<char> = term.chars().collect();
    if chars.len() <= 2 {
        return text.contains(term);
    }
    let pairs: Vec<String> = chars.windows(2).map(|pair| pair.iter().collect()).collect();
    let found = pairs
        .iter()
        .filter(|pair| text.contains(pair.as_str()))
        .count();
    found * 2 >= pairs.len()
}

/// The informative part of a memory URI: the segments below its fixed layout (the user's name,
/// `memories` and the category say nothing about the content, and would match every memory of
/// a user named in the query), without a `.md` extension.
pub fn informative_path(uri: &str) -> String {
    let Ok(parsed) = super::uri::MemoryUri::parse(uri) else {
        return String::new();
    };
    let segments: Vec<&str> = parsed.segments().collect();
    let skip = match segments.as_slice() {
        ["user" | "agent", _, "memories", ..] => 4,
        ["agent", _, "skills" | "tools", ..] => 3,
        ["session", ..] => 2,
        ["resources", ..] => 1,
        _ => segments.len(),
    };
    segments
        .iter()
        .skip(skip)
        .map(|segment| segment.strip_suffix(".md").unwrap_or(segment))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A memory a search found, as recall needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallCandidate {
    pub uri: String,
    pub category: String,
    pub l0: String,
    pub l1: String,
    pub l2: String,
    /// When what it records happened (ms since the Unix epoch).
    pub created_at_ms: i64,
    /// The cosine similarity to the query vector, when the search had one and the memory a
    /// vector.
    pub cosine: Option<f32>,
}

impl RecallCandidate {
    fn text(&self, level: RecallLevel) -> &str {
        match level {
            RecallLevel::L0 => &self.l0,
            RecallLevel::L1 => &self.l1,
            RecallLevel::L2 => &self.l2,
        }
    }
}

/// How relevant a candidate is (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Relevance {
    pub matched_terms: usize,
    pub term_coverage: f64,
    pub cosine: Option<f32>,
}

impl Relevance {
    /// The candidate's relevance to the query's `terms`.
    pub fn of(candidate: &RecallCandidate, terms: &[String]) -> Relevance {
        let searchable = format!(
            "{}\n{}\n{}\n{}",
            informative_path(&candidate.uri),
            candidate.l0,
            candidate.l1,
            candidate.l2
        );
        let (matched_terms, term_coverage) = term_coverage(terms, &searchable);
        Relevance {
            matched_terms,
            term_coverage,
            cosine: candidate.cosine,
        }
    }

    /// Whether either measure clears its threshold.
    pub fn passes(&self, settings: &RecallSettings) -> bool {
        self.term_coverage >= settings.min_term_coverage
            || self
                .cosine
                .is_some_and(|cosine| f64::from(cosine) >= settings.min_cosine)
    }

    /// The score shown to the model: the better of the two measures, 2 decimals.
    pub fn score(&self) -> f64 {
        let best = self
            .cosine
            .map_or(self.term_coverage, |cosine| {
                self.term_coverage.max(f64::from(cosine))
            })
            .clamp(0.0, 1.0);
        (best * 100.0).round() / 100.0
    }
}

/// Why a candidate was not injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Neither relevance measure cleared its threshold.
    BelowThreshold,
    /// `max_results` relevant memories were already kept.
    OverLimit,
    /// Its abstract did not fit in what was left of the token budget.
    OverBudget,
}

/// A candidate recall shows, at the level that fit.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectedMemory {
    pub candidate: RecallCandidate,
    pub level: RecallLevel,
    pub relevance: Relevance,
}

impl SelectedMemory {
    /// The memory as the tool result shows it.
    pub fn to_json(&self) -> Value {
        memory_json(&self.candidate, self.level, Some(self.relevance.score()))
    }
}

/// What [`select_memories`] decided.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Selection {
    pub kept: Vec<SelectedMemory>,
    /// Each dropped candidate's URI, why, and its relevance.
    pub dropped: Vec<(String, DropReason, Relevance)>,
    /// Estimated tokens of the kept memories as rendered.
    pub tokens: u64,
}

/// The JSON object of one memory in a tool result: URI, category, score (when given), the text
/// at `level` under its field name, and the creation date.
pub fn memory_json(candidate: &RecallCandidate, level: RecallLevel, score: Option<f64>) -> Value {
    let mut object = serde_json::Map::new();
    object.insert("uri".into(), json!(candidate.uri));
    object.insert("category".into(), json!(candidate.category));
    if let Some(score) = score {
        object.insert("score".into(), json!(score));
    }
    object.insert(level.field().into(), json!(candidate.text(level)));
    object.insert(
        "created_at".into(),
        json!(format_date(candidate.created_at_ms)),
    );
    Value::Object(object)
}

/// `YYYY-MM-DD` (UTC) of a time in ms since the Unix epoch.
pub fn format_date(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|time| time.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

fn json_tokens(value: &Value) -> u64 {
    let chars = crate::tokens::estimate::json_estimate_chars(value);
    chars.div_ceil(CHARS_PER_TOKEN) as u64
}

/// Chooses what recall injects from `candidates` (best first): relevant ones (see the module
/// docs) up to `max_results`, then filled into `max_tokens` tier by tier without cutting any
/// memory.
pub fn select_memories(
    candidates: &[RecallCandidate],
    query: &str,
    settings: &RecallSettings,
) -> Selection {
    let plan = QueryPlan::new(query);
    let mut selection = Selection::default();
    let mut relevant: Vec<(RecallCandidate, Relevance)> = Vec::new();
    for candidate in candidates {
        let relevance = Relevance::of(candidate, plan.terms());
        if !relevance.passes(settings) {
            selection
                .dropped
                .push((candidate.uri.clone(), DropReason::BelowThreshold, relevance));
        } else if relevant.len() >= settings.max_results {
            selection
                .dropped
                .push((candidate.uri.clone(), DropReason::OverLimit, relevance));
        } else {
            relevant.push((candidate.clone(), relevance));
        }
    }
    let mut used = 0u64;
    let mut kept: Vec<SelectedMemory> = Vec::new();
    for (candidate, relevance) in relevant {
        let entry = SelectedMemory {
            candidate,
            level: RecallLevel::L0,
            relevance,
        };
        let cost = json_tokens(&entry.to_json());
        if used + cost <= settings.max_tokens {
            used += cost;
            kept.push(entry);
        } else {
            selection.dropped.push((
                entry.candidate.uri.clone(),
                DropReason::OverBudget,
                relevance,
            ));
        }
    }
    for level in [RecallLevel::L1, RecallLevel::L2] {
        if level > settings.level {
            break;
        }
        for entry in &mut kept {
            if entry.candidate.text(level) == entry.candidate.text(entry.level) {
                // Same text under a deeper name: deepen for free, so the model knows it has
                // everything.
                if level == RecallLevel::L2 || entry.candidate.l2 == entry.candidate.l1 {
                    entry.level = level;
                }
                continue;
            }
            let before = json_tokens(&entry.to_json());
            let deeper = SelectedMemory {
                level,
                ..entry.clone()
            };
            let after = json_tokens(&deeper.to_json());
            if used - before + after <= settings.max_tokens {
                used = used - before + after;
                *entry = deeper;
            }
        }
    }
    selection.tokens = used;
    selection.kept = kept;
    selection
}

/// A call id derived from what the call asks, so the same call renders byte-identically on every
/// request (the prompt cache depends on it).
pub fn simulated_call_id(tool: &str, arguments: &Value) -> String {
    let digest = Sha256::digest(format!("{tool}\n{arguments}").as_bytes());
    let hex: String = digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{SIMULATED_CALL_PREFIX}{hex}")
}

/// An assistant message calling `tool` with `arguments`, and the tool result message answering
/// it with `result`.
pub fn simulated_call(tool: &str, arguments: Value, result: String) -> Vec<Message> {
    let id = simulated_call_id(tool, &arguments);
    let call = Message::new(
        Role::Assistant,
        vec![Block::ToolCall(ToolCall {
            id: id.clone(),
            name: tool.to_owned(),
            arguments,
            arguments_text: None,
            extra: Extra::new(),
        })],
    );
    let answer = Message::new(
        Role::ToolResult,
        vec![Block::ToolResult(ToolResult {
            call_id: id,
            tool_name: Some(tool.to_owned()),
            content: vec![Block::text(result)],
            content_form: crate::message::ContentForm::Text,
            is_error: None,
            details: None,
            extra: Extra::new(),
        })],
    );
    vec![call, answer]
}

/// A JSON object written with each element of its array fields on a line of its own: valid JSON,
/// compact, and readable in a transcript.
pub fn render_result_json(fields: &[(&str, Value)]) -> String {
    let mut out = String::from("{");
    for (index, (key, value)) in fields.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&json!(key).to_string());
        out.push(':');
        match value {
            Value::Array(items) if !items.is_empty() => {
                out.push('[');
                for (at, item) in items.iter().enumerate() {
                    out.push_str(if at == 0 { "\n" } else { ",\n" });
                    out.push_str(&item.to_string());
                }
                out.push_str("\n]");
            }
            Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Array(_)
            | Value::Object(_) => out.push_str(&value.to_string()),
        }
    }
    out.push('}');
    out
}

/// The `search_memories` result for `memories` (already JSON objects, see [`memory_json`]).
pub fn search_result_text(memories: Vec<Value>) -> String {
    render_result_json(&[
        ("success", json!(true)),
        ("memories", Value::Array(memories)),
    ])
}

/// The simulated `search_memories` call of per-turn recall and its result.
pub fn recall_messages(
    query: &str,
    settings: &RecallSettings,
    selection: &Selection,
) -> Vec<Message> {
    let arguments = json!({"query": query, "max_results": settings.max_results});
    let memories = selection.kept.iter().map(SelectedMemory::to_json).collect();
    simulated_call(SEARCH_TOOL_NAME, arguments, search_result_text(memories))
}

/// `messages` with `injection` inserted right after the latest user message a person wrote
/// (see [`user_text`]) and the simulated calls already following it; unchanged when there is
/// none. The injection is for one model call: the caller never stores it. Passing over the
/// session-start injection keeps it where every request of the session has it, whichever is
/// inserted first, so the cached prefix reaches past it.
pub fn insert_after_latest_user(messages: Vec<Message>, injection: Vec<Message>) -> Vec<Message> {
    let at = messages
        .iter()
        .rposition(|message| !user_text(message).is_empty())
        .map(|at| {
            let simulated = messages
                .iter()
                .skip(at + 1)
                .take_while(|message| is_simulated(message))
                .count();
            at + simulated
        });
    insert_after(messages, at, injection)
}

/// Whether `message` is part of a simulated call of this module: an assistant message whose
/// blocks are all calls with a simulated id, or a result message answering such calls only.
pub fn is_simulated(message: &Message) -> bool {
    let simulated = |id: &str| id.starts_with(SIMULATED_CALL_PREFIX);
    !message.content.is_empty()
        && message.content.iter().all(|block| match block {
            Block::ToolCall(call) => simulated(&call.id),
            Block::ToolResult(result) => simulated(&result.call_id),
            Block::Text(_) | Block::Image(_) | Block::Thinking(_) | Block::Opaque(_) => false,
        })
}

/// `messages` with every simulated call of this module (see [`is_simulated`]) turned into one
/// user message holding the calls and their results as text, for a model request in which a
/// tool call must come with the model's own reasoning: with extended thinking on, Anthropic
/// refuses an assistant turn that calls a tool without a thinking block — and only the model can
/// write a signed one. The memory reaches the model the same; only its form differs.
pub fn simulated_calls_as_text(messages: Vec<Message>) -> Vec<Message> {
    if !messages.iter().any(is_simulated) {
        return messages;
    }
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut pending: Vec<ToolCall> = Vec::new();
    for message in messages {
        if !is_simulated(&message) {
            out.push(message);
            continue;
        }
        if message.role == Role::Assistant {
            pending.extend(message.tool_calls().cloned());
            continue;
        }
        let mut text = String::new();
        for result in message.tool_results() {
            let call = pending.iter().find(|call| call.id == result.call_id);
            let name = call.map_or("memory", |call| call.name.as_str());
            let arguments = call.map_or_else(String::new, |call| call.arguments.to_string());
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&format!(
                "<skald-memory tool=\"{name}\" arguments='{arguments}'>\n{}\n</skald-memory>",
                join_text(&result.content)
            ));
        }
        pending.retain(|call| {
            !message
                .tool_results()
                .any(|result| result.call_id == call.id)
        });
        if !text.is_empty() {
            out.push(Message::new(Role::User, vec![Block::text(text)]));
        }
    }
    out
}

/// `messages` with `injection` inserted right after the first user message a person wrote (where
/// session-start injections stay, so every request of the session shares the same prefix).
pub fn insert_after_first_user(messages: Vec<Message>, injection: Vec<Message>) -> Vec<Message> {
    let at = messages
        .iter()
        .position(|message| !user_text(message).is_empty());
    insert_after(messages, at, injection)
}

fn insert_after(
    mut messages: Vec<Message>,
    at: Option<usize>,
    injection: Vec<Message>,
) -> Vec<Message> {
    if let Some(at) = at
        && !injection.is_empty()
    {
        let tail = messages.split_off(at + 1);
        messages.extend(injection);
        messages.extend(tail);
    }
    messages
}

/// One memory of the user's profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileEntry {
    pub uri: String,
    /// The full content for `profile.md`, the abstract for the others.
    pub text: String,
}

/// The name of the user's main profile file, shown first and whole (cut only if alone it
/// exceeds the budget).
pub const PROFILE_FILE: &str = "profile.md";

/// The `## User Profile` section of the system prompt: `profile.md` first, then the other
/// profile entries (by URI) as bullets, each whole, while they fit in `max_chars`. `None` when
/// there is nothing to say.
pub fn render_profile_section(entries: &[ProfileEntry], max_chars: usize) -> Option<String> {
    let header = "## User Profile\n";
    let mut out = String::from(header);
    let is_main = |entry: &&ProfileEntry| entry.uri.ends_with(&format!("/{PROFILE_FILE}"));
    let main: Vec<&ProfileEntry> = entries.iter().filter(is_main).collect();
    let mut others: Vec<&ProfileEntry> = entries.iter().filter(|e| !is_main(e)).collect();
    others.sort_by(|a, b| a.uri.cmp(&b.uri));
    for entry in main {
        let room = max_chars.saturating_sub(out.chars().count() + 1);
        let text = cut_at_word(entry.text.trim(), room);
        if !text.is_empty() {
            out.push_str(&text);
            out.push('\n');
        }
    }
    for entry in others {
        let line = format!("- {}\n", entry.text.trim());
        if entry.text.trim().is_empty() {
            continue;
        }
        if out.chars().count() + line.chars().count() > max_chars {
            break;
        }
        out.push_str(&line);
    }
    (out.len() > header.len()).then(|| out.trim_end().to_owned())
}

/// One line of a listing: a directory with its entry count, or an entry with its abstract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListingEntry {
    Directory { uri: String, entries: u64 },
    Entry { uri: String, abstract_text: String },
}

impl ListingEntry {
    fn to_json(&self) -> Value {
        match self {
            ListingEntry::Directory { uri, entries } => {
                json!({"uri": format!("{uri}/"), "entries": entries})
            }
            ListingEntry::Entry { uri, abstract_text } => {
                json!({"uri": uri, "abstract": abstract_text})
            }
        }
    }
}

/// The `memory_ls` result: the listing in order, one line per entry. When it does not fit in
/// `max_chars`, the deepest levels go first, so the answer stays an overview of everything
/// (every top directory with its count) rather than the first subtree in full; `omitted` says
/// how many lines were left out.
pub fn listing_result_text(path: &str, entries: &[ListingEntry], max_chars: usize) -> String {
    let items: Vec<(usize, Value, usize)> = listing_levels(entries)
        .into_iter()
        .zip(entries)
        .map(|(level, entry)| {
            let item = entry.to_json();
            let chars = estimate_string_chars(&item.to_string()) + 2;
            (level, item, chars)
        })
        .collect();
    let deepest = items.iter().map(|(level, _, _)| *level).max().unwrap_or(0);
    let cost = |limit: usize| -> usize {
        items
            .iter()
            .filter(|(level, _, _)| *level <= limit)
            .map(|(_, _, chars)| chars)
            .sum()
    };
    let limit = (0..=deepest).rev().find(|limit| cost(*limit) <= max_chars);
    let mut shown = Vec::new();
    let mut used = 0usize;
    for (level, item, chars) in &items {
        let wanted = match limit {
            Some(limit) => *level <= limit,
            None => *level == 0 && used + chars <= max_chars,
        };
        if wanted {
            used += chars;
            shown.push(item.clone());
        }
    }
    let omitted = items.len() - shown.len();
    let mut fields = vec![
        ("success", json!(true)),
        ("path", json!(path)),
        ("entries", Value::Array(shown)),
    ];
    if omitted > 0 {
        fields.push(("omitted", json!(omitted)));
        fields.push((
            "more",
            json!("call memory_ls on a directory to see what is below it"),
        ));
    }
    render_result_json(&fields)
}

/// How deep each line of a listing (parents before children) is below the lines above it: 0
/// for a line with no listed ancestor.
fn listing_levels(entries: &[ListingEntry]) -> Vec<usize> {
    let mut open: Vec<String> = Vec::new();
    let mut levels = Vec::with_capacity(entries.len());
    for entry in entries {
        let uri = match entry {
            ListingEntry::Directory { uri, .. } | ListingEntry::Entry { uri, .. } => uri,
        };
        while open
            .last()
            .is_some_and(|dir| !uri.starts_with(&format!("{}/", dir.trim_end_matches('/'))))
        {
            open.pop();
        }
        levels.push(open.len());
        if let ListingEntry::Directory { uri, .. } = entry {
            open.push(uri.clone());
        }
    }
    levels
}

/// The simulated `memory_ls {"path": "viking://"}` of session start.
pub fn directory_messages(entries: &[ListingEntry], max_chars: usize) -> Vec<Message> {
    let path = "viking://";
    simulated_call(
        LS_TOOL_NAME,
        json!({"path": path}),
        listing_result_text(path, entries, max_chars),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn user(text: &str) -> Message {
        Message::text(Role::User, text)
    }

    fn candidate(uri: &str, l0: &str, l1: &str, l2: &str) -> RecallCandidate {
        RecallCandidate {
            uri: uri.into(),
            category: "preferences".into(),
            l0: l0.into(),
            l1: l1.into(),
            l2: l2.into(),
            created_at_ms: 1_683_504_000_000,
            cosine: None,
        }
    }

    #[test]
    fn query_is_built_from_the_last_five_user_messages_newest_first() {
        let mut messages = Vec::new();
        for n in 1..=7 {
            messages.push(user(&format!("message number {n} about rust")));
            messages.push(Message::text(Role::Assistant, "noted"));
        }
        let query = recall_query(&messages, &RecallSettings::default()).unwrap();
        let lines: Vec<&str> = query.lines().collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0], "message number 7 about rust");
        assert_eq!(lines[4], "message number 3 about rust");
        let settings = RecallSettings {
            query_messages: 2,
            ..RecallSettings::default()
        };
        assert_eq!(
            recall_query(&messages, &settings).unwrap().lines().count(),
            2
        );
    }

    #[test]
    fn query_skips_injected_content_and_greetings_in_earlier_messages() {
        let mut meta = user("Caveat: generated by local commands.");
        meta.extra.insert("isMeta".into(), Value::Bool(true));
        let messages = vec![
            user("Which database does billing use?"),
            user("thanks"),
            meta,
            user("<system-reminder>files changed</system-reminder>And the cache layer?"),
        ];
        let query = recall_query(&messages, &RecallSettings::default()).unwrap();
        assert_eq!(
            query,
            "And the cache layer?\nWhich database does billing use?"
        );
    }

    #[test]
    fn greetings_skip_recall_in_several_languages() {
        for text in [
            "hi",
            "Hello!",
            "thank you.",
            "OK",
            "你好",
            "谢谢！",
            "在吗",
            "Merci",
            "hey there",
        ] {
            let result = recall_query(&[user(text)], &RecallSettings::default());
            assert!(
                matches!(
                    result,
                    Err(SkipReason::Greeting { .. }) | Err(SkipReason::TooShort { .. })
                ),
                "{text}: {result:?}"
            );
        }
        assert!(matches!(
            recall_query(&[user("hello there")], &RecallSettings::default()),
            Err(SkipReason::Greeting { .. })
        ));
        assert!(
            recall_query(
                &[user("hello, what is my editor theme?")],
                &RecallSettings::default()
            )
            .is_ok()
        );
    }

    #[test]
    fn messages_of_three_chars_or_fewer_skip_recall() {
        let error = recall_query(&[user("why")], &RecallSettings::default()).unwrap_err();
        assert_eq!(error, SkipReason::TooShort { chars: 3, min: 4 });
        assert_eq!(
            error.to_string(),
            "the latest user message has 3 characters, fewer than 4"
        );
        assert!(recall_query(&[user("why?!")], &RecallSettings::default()).is_ok());
        let disabled = RecallSettings {
            enabled: false,
            ..RecallSettings::default()
        };
        assert_eq!(
            recall_query(&[user("what is my theme")], &disabled),
            Err(SkipReason::Disabled)
        );
        assert_eq!(
            recall_query(
                &[Message::text(Role::Assistant, "hello")],
                &RecallSettings::default()
            ),
            Err(SkipReason::NoUserMessage)
        );
    }

    #[test]
    fn term_coverage_saturates_and_stems() {
        let terms: Vec<String> = ["caroline", "likes", "painting"].map(String::from).to_vec();
        assert_eq!(term_coverage(&terms, "Caroline liked painting"), (3, 1.0));
        assert_eq!(
            term_coverage(&terms, "Caroline's paintings"),
            (2, 2.0 / 3.0)
        );
        assert_eq!(term_coverage(&terms, "nothing here"), (0, 0.0));
        let long: Vec<String> = (0..20).map(|n| format!("word{n}")).collect();
        assert_eq!(term_coverage(&long, "word1 word2 word3").1, 1.0);
        for (a, b) in [
            ("likes", "liked"),
            ("liking", "like"),
            ("cities", "city"),
            ("classes", "class"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} {b}");
        }
        assert_eq!(term_coverage(&long, "word1").1, 1.0 / 3.0);
        let cjk = vec!["数据库".to_owned()];
        assert_eq!(term_coverage(&cjk, "用户的数据库是Postgres").0, 1);
        let sentence = vec!["如何优化账单数据库".to_owned()];
        assert_eq!(term_coverage(&sentence, "账单数据库运行在Postgres上").0, 1);
        assert_eq!(term_coverage(&sentence, "用户喜欢深色模式").0, 0);
    }

    #[test]
    fn the_fixed_layout_of_a_uri_is_not_evidence() {
        assert_eq!(
            informative_path("viking://user/alice/memories/events/2023/05/trip.md"),
            "2023 05 trip"
        );
        assert_eq!(informative_path("viking://agent/main/tools/bash"), "bash");
        assert_eq!(informative_path("viking://resources/docs/a.md"), "docs a");
        let memory = candidate(
            "viking://user/alice/memories/preferences/editor.md",
            "Prefers dark mode.",
            "Prefers dark mode.",
            "Prefers dark mode.",
        );
        let terms = vec![
            "alice".to_owned(),
            "memories".to_owned(),
            "editor".to_owned(),
        ];
        assert_eq!(Relevance::of(&memory, &terms).matched_terms, 1);
    }

    #[test]
    fn threshold_drops_memories_that_share_one_word_of_a_long_query() {
        let settings = RecallSettings::default();
        let candidates = vec![
            candidate(
                "viking://user/a/memories/entities/db.md",
                "Billing runs on Postgres 15.",
                "Billing runs on Postgres 15.",
                "Billing runs on Postgres 15.",
            ),
            candidate(
                "viking://user/a/memories/events/lunch.md",
                "Lunch with the billing team.",
                "Lunch with the billing team.",
                "Lunch with the billing team.",
            ),
        ];
        let selection = select_memories(
            &candidates,
            "which postgres version does billing run",
            &settings,
        );
        assert_eq!(selection.kept.len(), 1);
        assert_eq!(
            selection.kept[0].candidate.uri,
            "viking://user/a/memories/entities/db.md"
        );
        assert_eq!(selection.dropped.len(), 1);
        assert_eq!(selection.dropped[0].1, DropReason::BelowThreshold);
        // A semantic match with no shared word is kept by its cosine.
        let mut semantic = candidates[1].clone();
        semantic.cosine = Some(0.6);
        let selection = select_memories(
            &[semantic],
            "which postgres version does billing run",
            &settings,
        );
        assert_eq!(selection.kept.len(), 1);
        assert_eq!(selection.kept[0].relevance.score(), 0.6);
    }

    #[test]
    fn budget_fills_tier_by_tier_without_cutting_a_memory() {
        let long = "postgres billing tuning ".repeat(40);
        let candidates: Vec<RecallCandidate> = (0..3)
            .map(|n| {
                candidate(
                    &format!("viking://user/a/memories/entities/db{n}.md"),
                    "Postgres billing tuning notes.",
                    &long,
                    &long,
                )
            })
            .collect();
        let settings = RecallSettings {
            max_tokens: 400,
            ..RecallSettings::default()
        };
        let selection = select_memories(&candidates, "postgres billing tuning", &settings);
        assert_eq!(selection.kept.len(), 3);
        assert!(selection.tokens <= 400);
        // The first is deepened to its overview; the others stay at the abstract.
        assert_eq!(selection.kept[0].level, RecallLevel::L1);
        assert_eq!(selection.kept[1].level, RecallLevel::L0);
        let tiny = RecallSettings {
            max_tokens: 50,
            ..RecallSettings::default()
        };
        let selection = select_memories(&candidates, "postgres billing tuning", &tiny);
        assert_eq!(selection.kept.len(), 1);
        assert_eq!(
            selection
                .dropped
                .iter()
                .filter(|d| d.1 == DropReason::OverBudget)
                .count(),
            2
        );
    }

    #[test]
    fn level_setting_caps_the_deepest_level_shown() {
        let c = candidate(
            "viking://user/a/memories/entities/db.md",
            "Postgres.",
            "Postgres 15 on billing.",
            "Postgres 15 on billing, tuned in May.",
        );
        for (level, field) in [
            (RecallLevel::L0, "abstract"),
            (RecallLevel::L1, "overview"),
            (RecallLevel::L2, "content"),
        ] {
            let settings = RecallSettings {
                level,
                ..RecallSettings::default()
            };
            let selection =
                select_memories(std::slice::from_ref(&c), "postgres billing", &settings);
            assert_eq!(selection.kept[0].level, level);
            assert!(selection.kept[0].to_json().get(field).is_some(), "{field}");
        }
    }

    #[test]
    fn simulated_calls_are_deterministic() {
        let a = simulated_call_id(SEARCH_TOOL_NAME, &json!({"query": "x", "max_results": 5}));
        let b = simulated_call_id(SEARCH_TOOL_NAME, &json!({"query": "x", "max_results": 5}));
        let c = simulated_call_id(SEARCH_TOOL_NAME, &json!({"query": "y", "max_results": 5}));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(
            a.starts_with(SIMULATED_CALL_PREFIX) && a.len() == SIMULATED_CALL_PREFIX.len() + 16
        );
    }

    #[test]
    fn injection_goes_after_the_latest_user_message() {
        let messages = vec![
            user("first ask"),
            Message::text(Role::Assistant, "done"),
            user("second ask"),
            Message::text(Role::Assistant, "working"),
        ];
        let injection = vec![Message::text(Role::Assistant, "INJECTED")];
        let out = insert_after_latest_user(messages.clone(), injection.clone());
        assert_eq!(out.len(), 5);
        assert_eq!(out[3].plain_text(), "INJECTED");
        let out = insert_after_first_user(messages, injection);
        assert_eq!(out[1].plain_text(), "INJECTED");
    }

    #[test]
    fn a_listing_too_long_loses_its_deepest_levels_first() {
        let dir = |uri: &str, entries| ListingEntry::Directory {
            uri: uri.into(),
            entries,
        };
        let entry = |uri: &str| ListingEntry::Entry {
            uri: uri.into(),
            abstract_text: "x".repeat(80),
        };
        let listing = vec![
            dir("viking://user/a", 2),
            dir("viking://user/a/memories", 2),
            entry("viking://user/a/memories/x.md"),
            entry("viking://user/a/memories/y.md"),
            dir("viking://resources", 1),
            entry("viking://resources/r.md"),
        ];
        assert_eq!(listing_levels(&listing), [0, 1, 2, 2, 0, 1]);
        let full = listing_result_text("viking://", &listing, 10_000);
        assert!(!full.contains("omitted"));
        let short = listing_result_text("viking://", &listing, 300);
        assert!(short.contains("\"viking://user/a/memories/\""), "{short}");
        assert!(short.contains("\"viking://resources/\""), "{short}");
        assert!(!short.contains("x.md"), "{short}");
        assert!(short.contains("\"omitted\":2"), "{short}");
        let tiny = listing_result_text("viking://", &listing, 60);
        assert!(tiny.contains("\"omitted\":5"), "{tiny}");
        assert!(tiny.contains("viking://user/a/"), "{tiny}");
    }

    #[test]
    fn recall_goes_after_the_session_start_injection_in_either_order() {
        let listing = directory_messages(
            &[ListingEntry::Directory {
                uri: "viking://user/a".into(),
                entries: 1,
            }],
            1000,
        );
        let recall = simulated_call(SEARCH_TOOL_NAME, json!({"query": "q"}), "{}".into());
        let messages = vec![user("only ask")];
        let listing_first = insert_after_latest_user(
            insert_after_first_user(messages.clone(), listing.clone()),
            recall.clone(),
        );
        let recall_first = insert_after_first_user(
            insert_after_latest_user(messages, recall.clone()),
            listing.clone(),
        );
        assert_eq!(listing_first, recall_first);
        assert_eq!(&listing_first[1..3], &listing[..]);
        assert_eq!(&listing_first[3..5], &recall[..]);
        assert!(is_simulated(&listing_first[1]) && is_simulated(&listing_first[4]));
        assert!(!is_simulated(&listing_first[0]));
    }

    #[test]
    fn profile_section_puts_profile_md_first_and_keeps_entries_whole() {
        let entries = vec![
            ProfileEntry {
                uri: "viking://user/a/memories/profile/work.md".into(),
                text: "Works at Acme as an SRE.".into(),
            },
            ProfileEntry {
                uri: "viking://user/a/memories/profile/profile.md".into(),
                text: "Alice, based in Lyon.".into(),
            },
            ProfileEntry {
                uri: "viking://user/a/memories/profile/zz.md".into(),
                text: "x".repeat(500),
            },
        ];
        let section = render_profile_section(&entries, 200).unwrap();
        assert_eq!(
            section,
            "## User Profile\nAlice, based in Lyon.\n- Works at Acme as an SRE."
        );
        assert_eq!(render_profile_section(&[], 200), None);
    }

    #[test]
    fn settings_validate_names_the_bad_field() {
        RecallSettings::default().validate().unwrap();
        let bad = RecallSettings {
            min_term_coverage: 1.5,
            ..RecallSettings::default()
        };
        let error = bad.validate().unwrap_err();
        assert_eq!(error.field, "min_term_coverage");
        assert!(
            error
                .to_string()
                .contains("memory.recall.min_term_coverage is 1.5")
        );
        let parsed: Result<RecallSettings, _> = toml::from_str("max_result = 3");
        assert!(parsed.unwrap_err().to_string().contains("max_result"));
        let parsed: RecallSettings = toml::from_str("level = \"l2\"\nmax_tokens = 800").unwrap();
        assert_eq!(parsed.level, RecallLevel::L2);
        assert_eq!(parsed.max_results, 5);
    }
}
