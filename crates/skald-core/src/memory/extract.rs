//! The deterministic memory extractor (no LLM): what a span of messages says that is worth
//! remembering across sessions, found by precise patterns rather than guessed.
//!
//! What this module owns:
//! - [`MemoryCandidate`], the shape every extractor (this one, and the LLM one in `skald-llm`)
//!   hands the write path: a category, a stable name (a slug path under the category's
//!   directory), the content, the session entries it came from and when it was said; and
//!   [`MemoryCandidate::uri`], where it lives for a user and an agent.
//! - [`extract_memories`], four kinds of candidates, each from **user text only** (tool output is
//!   data, never a source; injected `<…>` blocks such as recalled memories are stripped first):
//!   - explicit requests: "remember (that) …", "don't forget …", "keep in mind …", "note that
//!     …", 记住/记下/别忘了/记得 …; the assistant's confirmation ("I'll remember that …") is a
//!     source too, and supplies the fact when the user said only "remember this";
//!   - stated preferences: "I prefer / like / love / hate / always use / never …", "my
//!     favourite X is Y", 我喜欢/我讨厌/我总是/我最喜欢的…是…; the name is the topic, so a
//!     later preference about the same thing lands on the same URI;
//!   - dated events: a statement with a date ("2026-03-14", "March 14", "8 May 2023") or a
//!     relative one ("yesterday", "next Friday", "3 days ago", 昨天…) resolved against the
//!     message's timestamp (a relative date with no timestamp is not guessed);
//!   - named entities: "my sister Alice …", "Alice is my manager", "project Apollo …", and where
//!     the user lives or comes from (profile).
//!
//!   Questions, hypotheticals ("if …", "suppose …", "what if …", 如果/假如…), remarks about
//!   the conversation ("I like that idea") and long pasted text are not memories.
//!
//! Users of memory systems complain about noisy memories more than missing ones, so every
//! pattern here errs on the side of saying nothing.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, NaiveDate, Weekday};
use regex::Regex;

use crate::memory::query::is_stopword;
use crate::memory::uri::{MemoryCategory, MemoryUri};
use crate::message::{Block, Message, Role};

/// The longest sentence read for a memory; longer text is pasted material, not a statement.
pub const MAX_SENTENCE_CHARS: usize = 400;

/// The most words of a slug.
const MAX_SLUG_WORDS: usize = 5;

/// What a candidate asks the writer to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CandidateAction {
    /// A new memory (merged by the store if it duplicates one).
    Add,
    /// A new version of the existing memory at `uri` (an LLM extractor told about it).
    Update {
        /// The memory the candidate replaces.
        uri: MemoryUri,
    },
}

/// Which pattern produced a deterministic candidate (for reports and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtractionKind {
    /// An explicit request to remember ("remember that …", 记住…), or the assistant's
    /// confirmation of one.
    Remember,
    /// A stated preference ("I prefer …", "my favourite X is Y").
    Preference,
    /// A statement with an absolute or resolved relative date.
    Event,
    /// A named person, project or place of the user's ("my sister Alice …").
    Entity,
    /// From an LLM extractor.
    Model,
}

/// A memory an extractor found, before it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryCandidate {
    /// Whether to add a memory or update a stored one.
    pub action: CandidateAction,
    /// Which pattern (or the LLM) produced it.
    pub kind: ExtractionKind,
    /// The category it is filed under, which decides its directory and owner.
    pub category: MemoryCategory,
    /// A slug path under the category directory (`dark-mode`, `2026/03/13/dentist`), without
    /// the `.md` the URI gets.
    pub name: String,
    /// The memory's text, as it will be stored (the L2 level).
    pub content: String,
    /// The session entries (message ids) it was drawn from.
    pub source_entry_ids: Vec<String>,
    /// When it was said (the message's timestamp, ms since the Unix epoch).
    pub created_at_ms: Option<i64>,
}

impl MemoryCandidate {
    /// Where the candidate lives: `viking://user/{user}/memories/{category}/{name}.md` for the
    /// user's categories, `viking://agent/{agent}/memories/{category}/{name}.md` for cases and
    /// patterns; an update's own URI. `None` for a category extraction does not write (skills,
    /// tools, resources, sessions) or a name the layout refuses.
    pub fn uri(&self, user: &str, agent: &str) -> Option<MemoryUri> {
        if let CandidateAction::Update { uri } = &self.action {
            return Some(uri.clone());
        }
        let owner = match self.category {
            MemoryCategory::Profile
            | MemoryCategory::Preferences
            | MemoryCategory::Entities
            | MemoryCategory::Events => format!("user/{user}"),
            MemoryCategory::Cases | MemoryCategory::Patterns => format!("agent/{agent}"),
            MemoryCategory::Skills
            | MemoryCategory::Tools
            | MemoryCategory::Resources
            | MemoryCategory::Session => return None,
        };
        let uri = MemoryUri::parse(&format!(
            "viking://{owner}/memories/{}/{}.md",
            self.category.name(),
            self.name
        ))
        .ok()?;
        uri.is_entry_location().then_some(uri)
    }
}

/// A memory already stored that resembles what a span talks about, shown to an extractor so it
/// can update or skip instead of adding a duplicate.
#[derive(Debug, Clone, PartialEq)]
pub struct ExistingMemory {
    /// Where it is stored.
    pub uri: MemoryUri,
    /// Its full text.
    pub content: String,
}

/// Limits of the deterministic extractor.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExtractSettings {
    /// Most candidates from one span (the earliest are kept).
    pub max_candidates: usize,
}

impl Default for ExtractSettings {
    fn default() -> Self {
        ExtractSettings { max_candidates: 50 }
    }
}

/// The candidates of `messages` (a span, oldest first), deduplicated by category and name.
pub fn extract_memories(messages: &[Message], settings: &ExtractSettings) -> Vec<MemoryCandidate> {
    let mut found: Vec<MemoryCandidate> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        if message.role != Role::User {
            continue;
        }
        let text = user_text(message);
        let timestamp = message.meta.timestamp.as_ref().and_then(|t| t.millis());
        let id = message.meta.id.clone();
        for sentence in sentences(&text) {
            let Some(candidate) = sentence_candidate(sentence, timestamp) else {
                continue;
            };
            let mut candidate = candidate;
            candidate.source_entry_ids.extend(id.clone());
            if candidate.kind == ExtractionKind::Remember {
                confirm_with_assistant(&mut candidate, messages.get(index + 1..).unwrap_or(&[]));
            }
            if candidate.content.is_empty() {
                continue;
            }
            found.push(candidate);
        }
    }
    merge_same_names(found, settings.max_candidates)
}

/// A user's own text: text blocks, with injected `<tag>…</tag>` blocks (recalled memories,
/// harness reminders) removed.
fn user_text(message: &Message) -> String {
    let mut out = String::new();
    for text in message.content.iter().filter_map(Block::as_text) {
        out.push_str(&strip_tagged_blocks(&text.text));
        out.push('\n');
    }
    out
}

/// `text` without `<name …>…</name>` regions (an unclosed one runs to the end).
fn strip_tagged_blocks(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let after = rest.get(open + 1..).unwrap_or("");
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        if name.is_empty()
            || !after
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
        {
            out.push_str(rest.get(..open + 1).unwrap_or(""));
            rest = after;
            continue;
        }
        out.push_str(rest.get(..open).unwrap_or(""));
        let closing = format!("</{name}>");
        rest = match after.find(&closing) {
            Some(end) => after.get(end + closing.len()..).unwrap_or(""),
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// Sentences with their terminators. A `.` ends a sentence only before whitespace or the end
/// (`e.g.`, `3.5` and `a.txt` do not).
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let next = chars.peek().map(|(_, next)| *next);
        let ends = match c {
            '!' | '?' | '。' | '！' | '？' | '\n' => true,
            '.' => next.is_none_or(char::is_whitespace),
            _ => false,
        };
        if ends {
            let end = at + c.len_utf8();
            if let Some(sentence) = text.get(start..end) {
                push_sentence(&mut out, sentence);
            }
            start = end;
        }
    }
    if let Some(sentence) = text.get(start..) {
        push_sentence(&mut out, sentence);
    }
    out
}

fn push_sentence<'a>(out: &mut Vec<&'a str>, sentence: &'a str) {
    let sentence = sentence.trim();
    if !sentence.is_empty() && sentence.chars().count() <= MAX_SENTENCE_CHARS {
        out.push(sentence);
    }
}

fn regex(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

/// Words in front of a request that do not change it.
static FILLER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(
        r"(?i)^(?:(?:please|pls|kindly|also|and|oh|btw|by the way|ok|okay|so|hey|fyi|just|can you|could you|would you|will you)\b[\s,]*)+",
    )
});
static REMEMBER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(
        r"(?i)^(?:remember|don't forget|do not forget|never forget|keep in mind|make a note|note)\b(?:\s+(?:that|this|it))?\s*[:,]?\s*(.*)$",
    )
});
static REMEMBER_ZH: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"^(?:请|帮我)?(?:记住|记下|别忘了|不要忘记|不要忘了|记得)[：:，,]?\s*(.*)$")
});
static ASSISTANT_CONFIRMATION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"(?i)\b(?:I'll|I will|I'm going to)\s+remember\s+(?:that\s+)?([^.!?\n]+)")
});
static PREFERENCE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(
        r"(?i)^I\s+(?:really\s+|much\s+|strongly\s+|generally\s+|usually\s+|do\s+)?(prefer|like|love|hate|dislike|don't like|do not like|can't stand|enjoy|always use|never use|always|never)\s+(.+)$",
    )
});
static PREFERENCE_RATHER: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"(?i)^I(?:'d| would)\s+(?:prefer|rather)\s+(.+)$"));
static FAVOURITE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"(?i)^my\s+(?:favou?rite|preferred)\s+([a-z][a-z0-9 -]{0,40}?)\s+(?:is|are)\s+(.+)$")
});
static PREFERENCE_ZH: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"^我(?:更|比较|很|非常|一直)?(喜欢|偏好|讨厌|不喜欢|总是|从不|习惯用)(.+)$")
});
static FAVOURITE_ZH: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"^我最喜欢的(.{1,20}?)是(.+)$"));
static RELATION: &str = r"sister|brother|mother|mom|mum|father|dad|wife|husband|partner|son|daughter|friend|colleague|coworker|boss|manager|cousin|aunt|uncle|grandmother|grandfather|dog|cat|teammate|roommate|neighbou?r|girlfriend|boyfriend";
static MY_RELATION_NAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(&format!(
        r"\b[Mm]y\s+({RELATION}),?\s+([A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)\b"
    ))
});
static NAME_IS_MY_RELATION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(&format!(
        r"\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)\s+is\s+my\s+({RELATION})\b"
    ))
});
static PROJECT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"\b(?:[Pp]roject\s+([A-Z][A-Za-z0-9_-]+)|([A-Z][A-Za-z0-9_-]+)\s+project\b)")
});
static LIVES: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(
        r"^I\s+(?:live|am living|moved|relocated|have moved)\s+(?:in|to)\s+([A-Z][A-Za-z]+(?:\s+[A-Z][A-Za-z]+)?)",
    )
});
static FROM: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"^I(?:'m| am)\s+(?:originally\s+)?from\s+([A-Z][A-Za-z]+(?:\s+[A-Z][A-Za-z]+)?)")
});
/// An event is something that happens to the user or their people, or a named occasion; an
/// instruction that mentions a date ("fix the logs from 2026-03-14") is not one.
static EVENT_SUBJECT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(
        r"(?i)\b(?:i|i'm|i've|i'll|we|we're|we've|we'll|my|our|me|us)\b|我|我们|\b(?:deadline|meeting|appointment|birthday|anniversary|release|launch|interview|flight|trip|party|wedding|exam|vacation|holiday)s?\b",
    )
});
static HYPOTHETICAL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(
        r"(?i)\b(?:if|suppose|supposing|imagine|hypothetically|what if|pretend|unless|whether)\b|如果|假如|假设|要是",
    )
});
static QUESTION_START: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(
        r"(?i)^(?:what|how|why|when|where|who|whom|which|do|does|did|can|could|would|should|is|are|was|were|will|shall|have|has)\b",
    )
});

fn captures<'a>(pattern: &LazyLock<Option<Regex>>, text: &'a str) -> Option<regex::Captures<'a>> {
    pattern.as_ref().and_then(|re| re.captures(text))
}

fn group<'a>(captures: &regex::Captures<'a>, index: usize) -> &'a str {
    captures.get(index).map_or("", |m| m.as_str())
}

/// The candidate one user sentence gives, if any.
fn sentence_candidate(sentence: &str, timestamp: Option<i64>) -> Option<MemoryCandidate> {
    let question = sentence.ends_with('?') || sentence.ends_with('？');
    let body = strip_filler(sentence);
    if let Some(fact) = remember_fact(body) {
        // "Could you remember that …?" is a request, not a question.
        return Some(remember_candidate(&fact, timestamp));
    }
    if question || QUESTION_START.as_ref().is_some_and(|re| re.is_match(body)) {
        return None;
    }
    if HYPOTHETICAL.as_ref().is_some_and(|re| re.is_match(body)) {
        return None;
    }
    preference_candidate(body, timestamp)
        .or_else(|| entity_candidate(body, timestamp))
        .or_else(|| event_candidate(body, timestamp))
}

fn strip_filler(sentence: &str) -> &str {
    let trimmed = sentence.trim();
    match FILLER.as_ref().and_then(|re| re.find(trimmed)) {
        Some(found) => trimmed.get(found.end()..).unwrap_or(trimmed).trim(),
        None => trimmed,
    }
}

/// The fact of a remember request ("" when it only points at something: "remember this").
fn remember_fact(body: &str) -> Option<String> {
    let fact = captures(&REMEMBER, body).or_else(|| captures(&REMEMBER_ZH, body))?;
    let fact = group(&fact, 1)
        .trim()
        .trim_end_matches(['?', '？', '!', '！', '.', '。'])
        .trim();
    if !fact.chars().any(char::is_alphanumeric) {
        return Some(String::new());
    }
    // "Remember to stay positive" is advice to the listener, not a fact; "remember to always
    // run fmt" is a standing rule.
    let lower = fact.to_lowercase();
    if lower.starts_with("to ") && !(lower.contains(" always ") || lower.contains(" never ")) {
        return None;
    }
    Some(fact.to_owned())
}

fn remember_candidate(fact: &str, timestamp: Option<i64>) -> MemoryCandidate {
    let category = if fact.is_empty() {
        MemoryCategory::Profile
    } else if preference_candidate(fact, timestamp).is_some() {
        MemoryCategory::Preferences
    } else if event_candidate(fact, timestamp).is_some() {
        MemoryCategory::Events
    } else if first_person(fact) {
        MemoryCategory::Profile
    } else {
        MemoryCategory::Entities
    };
    MemoryCandidate {
        action: CandidateAction::Add,
        kind: ExtractionKind::Remember,
        category,
        name: slug(fact),
        content: remember_content(fact),
        source_entry_ids: Vec::new(),
        created_at_ms: timestamp,
    }
}

fn remember_content(fact: &str) -> String {
    if fact.is_empty() {
        return String::new();
    }
    format!("The user asked to remember: {}", finish_sentence(fact))
}

fn first_person(text: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .any(|word| {
            matches!(
                word.to_lowercase().as_str(),
                "i" | "i'm" | "my" | "me" | "mine"
            )
        })
        || text.starts_with('我')
}

/// The next assistant message confirms a remember request: it becomes a source, and supplies
/// the fact when the user only said "remember this".
fn confirm_with_assistant(candidate: &mut MemoryCandidate, after: &[Message]) {
    let Some(reply) = after
        .iter()
        .find(|message| message.role != Role::ToolResult)
    else {
        return;
    };
    if reply.role != Role::Assistant {
        return;
    }
    let text = reply.plain_text();
    let Some(confirmation) = captures(&ASSISTANT_CONFIRMATION, &text) else {
        return;
    };
    if candidate.content.is_empty() {
        let fact = group(&confirmation, 1).trim();
        if fact.is_empty() {
            return;
        }
        candidate.name = slug(fact);
        candidate.content = remember_content(fact);
    }
    candidate.source_entry_ids.extend(reply.meta.id.clone());
}

/// Objects that point at the conversation rather than at a durable preference ("I like that
/// idea", "I hate how it looks").
fn is_conversational_object(object: &str) -> bool {
    let lower = object.trim().to_lowercase();
    let first = lower
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
        .to_owned();
    matches!(
        first.as_str(),
        "" | "it"
            | "that"
            | "this"
            | "them"
            | "those"
            | "these"
            | "your"
            | "you"
            | "how"
            | "what"
            | "when"
            | "where"
            | "why"
    ) || [
        "the idea",
        "the way",
        "the plan",
        "the approach",
        "the answer",
    ]
    .iter()
    .any(|prefix| lower.starts_with(prefix))
}

fn preference_candidate(body: &str, timestamp: Option<i64>) -> Option<MemoryCandidate> {
    let (topic, content) = if let Some(found) = captures(&FAVOURITE, body) {
        let topic = group(&found, 1).trim();
        (format!("favorite {topic}"), body.to_owned())
    } else if let Some(found) = captures(&FAVOURITE_ZH, body) {
        (format!("最喜欢的{}", group(&found, 1)), body.to_owned())
    } else if let Some(found) = captures(&PREFERENCE, body) {
        let verb = group(&found, 1).to_lowercase();
        let object = group(&found, 2).trim();
        let saying = object
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_lowercase();
        if (verb == "never" || verb == "always")
            && matches!(
                saying.as_str(),
                "said" | "told" | "asked" | "meant" | "thought" | "knew" | "wanted" | "did"
            )
        {
            return None;
        }
        if is_conversational_object(object) {
            return None;
        }
        (topic_of(object), body.to_owned())
    } else if let Some(found) = captures(&PREFERENCE_RATHER, body) {
        let object = group(&found, 1).trim();
        if is_conversational_object(object) {
            return None;
        }
        (topic_of(object), body.to_owned())
    } else if let Some(found) = captures(&PREFERENCE_ZH, body) {
        let object = group(&found, 2).trim();
        if object.chars().count() < 2 || object.starts_with('这') || object.starts_with('那') {
            return None;
        }
        (object.chars().take(12).collect(), body.to_owned())
    } else {
        return None;
    };
    let name = slug(&topic);
    if name.is_empty() {
        return None;
    }
    Some(MemoryCandidate {
        action: CandidateAction::Add,
        kind: ExtractionKind::Preference,
        category: MemoryCategory::Preferences,
        name,
        content: format!("User preference: {}", finish_sentence(&content)),
        source_entry_ids: Vec::new(),
        created_at_ms: timestamp,
    })
}

/// The topic of a preference's object: its first words up to a clause boundary, so "dark mode
/// in every editor" and "dark mode, it is easier" share `dark-mode-in-every-editor`…
fn topic_of(object: &str) -> String {
    let cut = object
        .find([',', ';', '.', '!', '—', '('])
        .map_or(object, |at| object.get(..at).unwrap_or(object));
    let cut = [" because ", " since ", " as ", " when ", " so "]
        .iter()
        .filter_map(|marker| cut.find(marker))
        .min()
        .map_or(cut, |at| cut.get(..at).unwrap_or(cut));
    cut.to_owned()
}

/// Whether a [`PROJECT`] match names a project rather than using the word: "the Apollo project"
/// and "project Hermes" do; "Add project-level review", "The project had no tests" (a
/// capitalised word that only starts a sentence or a list item) and "Project The" do not.
fn names_a_project(body: &str, found: &regex::Captures<'_>) -> bool {
    let Some(whole) = found.get(0) else {
        return false;
    };
    let name = [group(found, 1), group(found, 2)]
        .into_iter()
        .find(|name| !name.is_empty())
        .unwrap_or("");
    if name.is_empty() || is_stopword(&name.to_lowercase()) {
        return false;
    }
    let after = body.get(whole.end()..).unwrap_or("");
    if after.starts_with(['-', '_']) {
        return false;
    }
    if group(found, 2).is_empty() {
        return true;
    }
    // "X project": X must be capitalised for a reason, inside a sentence after a lower-case
    // word, not because it starts the sentence or follows a list marker or a colon.
    let before = body.get(..whole.start()).unwrap_or("");
    before.ends_with(' ')
        && before
            .trim_end()
            .chars()
            .next_back()
            .is_some_and(|c| c.is_lowercase())
}

fn entity_candidate(body: &str, timestamp: Option<i64>) -> Option<MemoryCandidate> {
    let entity = |name: &str, content: String, category: MemoryCategory| MemoryCandidate {
        action: CandidateAction::Add,
        kind: ExtractionKind::Entity,
        category,
        name: slug(name),
        content,
        source_entry_ids: Vec::new(),
        created_at_ms: timestamp,
    };
    let sentence = finish_sentence(body);
    if let Some(found) = captures(&MY_RELATION_NAME, body) {
        let (relation, name) = (group(&found, 1).to_lowercase(), group(&found, 2));
        return Some(entity(
            name,
            format!("{name}: the user's {relation}. {sentence}"),
            MemoryCategory::Entities,
        ));
    }
    if let Some(found) = captures(&NAME_IS_MY_RELATION, body) {
        let (name, relation) = (group(&found, 1), group(&found, 2).to_lowercase());
        if name != "He" && name != "She" && name != "This" && name != "That" && name != "It" {
            return Some(entity(
                name,
                format!("{name}: the user's {relation}. {sentence}"),
                MemoryCategory::Entities,
            ));
        }
    }
    if let Some(found) = captures(&PROJECT, body).filter(|found| names_a_project(body, found)) {
        let name = [group(&found, 1), group(&found, 2)]
            .into_iter()
            .find(|name| !name.is_empty())
            .unwrap_or("");
        if !name.is_empty() && body.split_whitespace().count() >= 4 {
            return Some(entity(
                &format!("project {name}"),
                format!("Project {name}: {sentence}"),
                MemoryCategory::Entities,
            ));
        }
    }
    if let Some(found) = captures(&LIVES, body) {
        let place = group(&found, 1);
        return Some(entity(
            "location",
            format!("The user lives in {place}. {sentence}"),
            MemoryCategory::Profile,
        ));
    }
    if let Some(found) = captures(&FROM, body) {
        let place = group(&found, 1);
        return Some(entity(
            "origin",
            format!("The user is from {place}. {sentence}"),
            MemoryCategory::Profile,
        ));
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Dates
// ---------------------------------------------------------------------------------------------

const MONTH: &str = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)";
const WEEKDAY: &str = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)";

static ISO_DATE: LazyLock<Option<Regex>> = LazyLock::new(|| regex(r"\b(\d{4})-(\d{2})-(\d{2})\b"));
static MONTH_DAY: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)\b{MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?"
    ))
});
static DAY_MONTH: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH}\b\.?(?:,?\s+(\d{{4}}))?"
    ))
});
static RELATIVE_DAY: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"(?i)\b(today|tonight|yesterday|tomorrow)\b|(前天|昨天|今天|明天|后天)")
});
static RELATIVE_WEEKDAY: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(&format!(r"(?i)\b(last|next|this)\s+{WEEKDAY}\b")));
static RELATIVE_PERIOD: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"(?i)\b(last|next)\s+(week|month|year)\b|(上周|下周|上个月|下个月|去年|明年)")
});
static COUNT_AGO: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"(?i)\b(\d{1,3}|a|an|one|two|three|four|five|six|seven)\s+(day|week)s?\s+ago\b")
});
static IN_COUNT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"(?i)\bin\s+(\d{1,3}|a|an|one|two|three|four|five|six|seven)\s+(day|week)s?\b")
});

/// A date the sentence names: the day, the words that named it, and whether it was relative.
#[derive(Debug, Clone, PartialEq)]
struct NamedDate {
    date: NaiveDate,
    phrase: String,
    relative: bool,
}

fn month_number(name: &str) -> Option<u32> {
    let prefix = name.chars().take(3).collect::<String>().to_lowercase();
    [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ]
    .iter()
    .position(|month| *month == prefix)
    .and_then(|index| u32::try_from(index + 1).ok())
}

fn weekday(name: &str) -> Option<Weekday> {
    name.to_lowercase().parse().ok()
}

fn count_word(word: &str) -> Option<i64> {
    match word.to_lowercase().as_str() {
        "a" | "an" | "one" => Some(1),
        "two" => Some(2),
        "three" => Some(3),
        "four" => Some(4),
        "five" => Some(5),
        "six" => Some(6),
        "seven" => Some(7),
        number => number.parse().ok(),
    }
}

fn said_on(timestamp: Option<i64>) -> Option<NaiveDate> {
    DateTime::from_timestamp_millis(timestamp?).map(|at| at.date_naive())
}

/// The first date `text` names, relative ones resolved against the day it was said.
fn named_date(text: &str, timestamp: Option<i64>) -> Option<NamedDate> {
    let today = said_on(timestamp);
    let absolute = |phrase: &str, year: Option<i32>, month: u32, day: u32| {
        let year = year.or_else(|| today.map(|today| today.year()))?;
        Some(NamedDate {
            date: NaiveDate::from_ymd_opt(year, month, day)?,
            phrase: phrase.to_owned(),
            relative: false,
        })
    };
    if let Some(found) = captures(&ISO_DATE, text) {
        let parse = |index| group(&found, index).parse::<u32>().ok();
        let year = group(&found, 1).parse::<i32>().ok();
        if let (Some(month), Some(day)) = (parse(2), parse(3)) {
            return absolute(group(&found, 0), year, month, day);
        }
    }
    if let Some(found) = captures(&MONTH_DAY, text) {
        let year = group(&found, 3).parse::<i32>().ok();
        if let (Some(month), Ok(day)) = (month_number(group(&found, 1)), group(&found, 2).parse()) {
            return absolute(group(&found, 0).trim(), year, month, day);
        }
    }
    if let Some(found) = captures(&DAY_MONTH, text) {
        let year = group(&found, 3).parse::<i32>().ok();
        if let (Some(month), Ok(day)) = (month_number(group(&found, 2)), group(&found, 1).parse()) {
            return absolute(group(&found, 0).trim(), year, month, day);
        }
    }
    let today = today?;
    let relative = |phrase: &str, date: Option<NaiveDate>| {
        Some(NamedDate {
            date: date?,
            phrase: phrase.to_owned(),
            relative: true,
        })
    };
    if let Some(found) = captures(&RELATIVE_DAY, text) {
        let phrase = group(&found, 0);
        let offset = match phrase.to_lowercase().as_str() {
            "yesterday" | "昨天" => -1,
            "tomorrow" | "明天" => 1,
            "前天" => -2,
            "后天" => 2,
            _ => 0,
        };
        return relative(phrase, today.checked_add_signed(Duration::days(offset)));
    }
    if let Some(found) = captures(&RELATIVE_WEEKDAY, text) {
        let target = weekday(group(&found, 2))?;
        let from = i64::from(today.weekday().num_days_from_monday());
        let to = i64::from(target.num_days_from_monday());
        let offset = match group(&found, 1).to_lowercase().as_str() {
            "last" => -((from - to + 6).rem_euclid(7) + 1),
            "next" => (to - from + 6).rem_euclid(7) + 1,
            _ => to - from,
        };
        return relative(
            group(&found, 0),
            today.checked_add_signed(Duration::days(offset)),
        );
    }
    if let Some(found) = captures(&COUNT_AGO, text) {
        let count = count_word(group(&found, 1))?;
        let days = if group(&found, 2).eq_ignore_ascii_case("week") {
            7
        } else {
            1
        };
        return relative(
            group(&found, 0),
            today.checked_sub_signed(Duration::days(count * days)),
        );
    }
    if let Some(found) = captures(&IN_COUNT, text) {
        let count = count_word(group(&found, 1))?;
        let days = if group(&found, 2).eq_ignore_ascii_case("week") {
            7
        } else {
            1
        };
        return relative(
            group(&found, 0),
            today.checked_add_signed(Duration::days(count * days)),
        );
    }
    if let Some(found) = captures(&RELATIVE_PERIOD, text) {
        let phrase = group(&found, 0);
        let offset = match phrase.to_lowercase().as_str() {
            "last week" | "上周" => -7,
            "next week" | "下周" => 7,
            "last month" | "上个月" => -30,
            "next month" | "下个月" => 30,
            "last year" | "去年" => -365,
            "next year" | "明年" => 365,
            _ => 0,
        };
        return relative(phrase, today.checked_add_signed(Duration::days(offset)));
    }
    None
}

fn event_candidate(body: &str, timestamp: Option<i64>) -> Option<MemoryCandidate> {
    if !EVENT_SUBJECT.as_ref().is_some_and(|re| re.is_match(body)) {
        return None;
    }
    let named = named_date(body, timestamp)?;
    let rest = body.replace(&named.phrase, " ");
    let words = rest.split_whitespace().count() + rest.chars().filter(|c| is_cjk(*c)).count();
    if words < 3 {
        return None;
    }
    let date = named.date.format("%Y-%m-%d").to_string();
    let sentence = finish_sentence(body);
    let content = match (named.relative, said_on(timestamp)) {
        (true, Some(said)) => format!(
            "On {date} (\"{}\", said on {}): {sentence}",
            named.phrase,
            said.format("%Y-%m-%d")
        ),
        (true, None) | (false, _) => format!("On {date}: {sentence}"),
    };
    let topic = slug(&rest);
    if topic.is_empty() {
        return None;
    }
    Some(MemoryCandidate {
        action: CandidateAction::Add,
        kind: ExtractionKind::Event,
        category: MemoryCategory::Events,
        name: format!("{}/{topic}", named.date.format("%Y/%m/%d")),
        content,
        source_entry_ids: Vec::new(),
        created_at_ms: timestamp,
    })
}

// ---------------------------------------------------------------------------------------------
// Names and content
// ---------------------------------------------------------------------------------------------

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF)
}

/// A stable URI name: up to five content words, lowercased and joined by `-` (CJK text keeps
/// its first characters). Empty when the text has no content word.
pub fn slug(text: &str) -> String {
    let lowered = text.to_lowercase();
    let words: Vec<&str> = lowered
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|word| word.trim_matches('\''))
        .filter(|word| !word.is_empty())
        .collect();
    let content: Vec<String> = words
        .iter()
        .filter(|word| !is_stopword(word) || words.len() <= 2)
        .map(|word| {
            if word.chars().any(is_cjk) {
                word.chars().take(12).collect()
            } else {
                word.replace('\'', "")
            }
        })
        .take(MAX_SLUG_WORDS)
        .collect();
    let mut slug = content.join("-");
    while slug.len() > 80 {
        slug.pop();
    }
    slug.trim_end_matches('-').to_owned()
}

/// The sentence with its first letter capitalised and a final full stop when it has none.
fn finish_sentence(text: &str) -> String {
    let text = text.trim();
    let mut chars = text.chars();
    let mut out: String = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    };
    if !out.ends_with(['.', '!', '?', '。', '！', '？']) && !out.is_empty() {
        out.push(if out.chars().any(is_cjk) { '。' } else { '.' });
    }
    out
}

/// One candidate per category and name, in order of first mention: later statements about the
/// same entity are appended, a later preference or request replaces the earlier one's content.
fn merge_same_names(found: Vec<MemoryCandidate>, max: usize) -> Vec<MemoryCandidate> {
    let mut order: Vec<(MemoryCategory, String)> = Vec::new();
    let mut merged: BTreeMap<(MemoryCategory, String), MemoryCandidate> = BTreeMap::new();
    for candidate in found {
        let key = (candidate.category, candidate.name.clone());
        match merged.get_mut(&key) {
            Some(existing) => {
                for id in candidate.source_entry_ids {
                    if !existing.source_entry_ids.contains(&id) {
                        existing.source_entry_ids.push(id);
                    }
                }
                if existing.category == MemoryCategory::Entities
                    || existing.category == MemoryCategory::Events
                {
                    if !existing.content.contains(&candidate.content) {
                        existing.content = format!("{}\n{}", existing.content, candidate.content);
                    }
                } else {
                    existing.content = candidate.content;
                    existing.created_at_ms = candidate.created_at_ms.or(existing.created_at_ms);
                }
            }
            None => {
                if order.len() >= max {
                    continue;
                }
                order.push(key.clone());
                merged.insert(key, candidate);
            }
        }
    }
    order
        .into_iter()
        .filter_map(|key| merged.remove(&key))
        .collect()
}
