//! The five memory tools an agent may call (seed 002, Component 3 and the tool-injection
//! appendix, option 2): their definitions ([`tool_specs`]), strict argument parsing
//! ([`parse_tool_call`]) with errors written for the model to correct itself, and where
//! `commit_memory` writes ([`commit_uri`]).
//!
//! | tool | arguments |
//! |---|---|
//! | `search_memories` | `query`, `max_results` (1–20, default 5), `category`?, `path`? |
//! | `memory_ls` | `path` (default `viking://`), `category`? |
//! | `memory_read` | `uri`, `level`? (`l0`, `l1`, `l2`; default `l2`) |
//! | `commit_memory` | `memory_content`, `memory_type`, `priority`? (0–10 or low/medium/high), `category`? |
//! | `memory_forget` | `uri` |
//!
//! **Where `commit_memory` writes.** `memory_type` chooses the layout category — `profile`,
//! `preference`, `entity` and `event` are the user's (`viking://user/{user}/memories/…`), `case`
//! and `pattern` the agent's (`viking://agent/{agent}/memories/…`); plural spellings are
//! accepted. `category` is the topic inside it (seed 002 names the field `category`; the layout
//! already has categories, so here it is the subject the memory is about: `editor`,
//! `project-x`), slugged into the file name; without one the first content words are the topic.
//! Profile, preference, entity and pattern memories are one entry per topic (`{topic}.md`): a
//! commit on a topic that exists writes a new version of it. Events and cases accumulate: an
//! event goes to `events/{YYYY}/{MM}/{DD}/{topic}-{hash}.md` (the date of the commit), a case to
//! `cases/{topic}-{hash}.md`, where `hash` is 8 hex digits of the content's hash.
//!
//! ```
//! use serde_json::json;
//! use skald_core::memory::tools::{MemoryToolCall, commit_uri, parse_tool_call};
//!
//! let call = parse_tool_call("commit_memory", &json!({
//!     "memory_content": "Alice prefers dark mode in every editor.",
//!     "memory_type": "preference", "priority": "high", "category": "Editor theme"
//! })).unwrap();
//! let MemoryToolCall::Commit(commit) = call else { unreachable!() };
//! let uri = commit_uri(&commit, "alice", "main", 0).unwrap();
//! assert_eq!(uri.as_str(), "viking://user/alice/memories/preferences/editor-theme.md");
//!
//! let error = parse_tool_call("search_memories", &json!({"qeury": "x"})).unwrap_err();
//! assert!(error.to_string().contains("unknown argument \"qeury\""));
//! ```

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::dedup::normalize;
use super::query::is_stopword;
use super::recall::{LS_TOOL_NAME, RecallLevel, SEARCH_TOOL_NAME};
use super::uri::{MemoryCategory, MemoryUri, UriError};
use crate::message::{Extra, ToolSpec};

/// The tool that reads one memory at a chosen level.
pub const READ_TOOL_NAME: &str = "memory_read";
/// The tool through which the agent writes a memory it decided to keep.
pub const COMMIT_TOOL_NAME: &str = "commit_memory";
/// The tool that deletes one memory.
pub const FORGET_TOOL_NAME: &str = "memory_forget";

/// The five tools, in the order [`tool_specs`] lists them.
pub const MEMORY_TOOL_NAMES: [&str; 5] = [
    SEARCH_TOOL_NAME,
    LS_TOOL_NAME,
    READ_TOOL_NAME,
    COMMIT_TOOL_NAME,
    FORGET_TOOL_NAME,
];

/// The most results one `search_memories` call returns.
pub const MAX_TOOL_RESULTS: usize = 20;

/// The default of `max_results`.
pub const DEFAULT_TOOL_RESULTS: usize = 5;

/// The longest memory `commit_memory` accepts, in characters.
pub const MAX_COMMIT_CHARS: usize = 4000;

/// The longest topic slug, in characters.
pub const MAX_TOPIC_CHARS: usize = 48;

/// Whether `name` is one of the memory tools.
pub fn is_memory_tool(name: &str) -> bool {
    MEMORY_TOOL_NAMES.contains(&name)
}

const CATEGORY_NAMES: &str =
    "profile, preferences, entities, events, cases, patterns, skills, tools, resources, session";

/// The definitions of the five tools, to add to a request's tools.
pub fn tool_specs() -> Vec<ToolSpec> {
    let spec = |name: &str, description: &str, parameters: Value| ToolSpec {
        name: name.to_owned(),
        description: Some(description.to_owned()),
        parameters,
        extra: Extra::new(),
    };
    vec![
        spec(
            SEARCH_TOOL_NAME,
            "Search long-term memory (what the user told you in earlier sessions, their \
             preferences, people and projects, past events, solved problems, documents). Use \
             specific keywords; search again with other words when the first results miss. \
             Results come best first, each with its abstract; read one whole with memory_read.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for, in natural language or keywords."},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_TOOL_RESULTS, "description": "How many memories to return (default 5)."},
                    "category": {"type": "string", "enum": MemoryCategory::ALL.map(MemoryCategory::name), "description": "Only memories of this category."},
                    "path": {"type": "string", "description": "Only memories at or below this viking:// directory."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        ),
        spec(
            LS_TOOL_NAME,
            "List a directory of long-term memory: its subdirectories (with how many memories \
             each holds) and its memories (with their abstracts), a few levels deep.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "A viking:// directory, e.g. viking:// or viking://user/alice/memories (default viking://)."},
                    "category": {"type": "string", "enum": MemoryCategory::ALL.map(MemoryCategory::name), "description": "Only memories of this category."}
                },
                "additionalProperties": false
            }),
        ),
        spec(
            READ_TOOL_NAME,
            "Read one memory by its viking:// URI: l0 is its abstract, l1 its overview, l2 \
             (default) the full content.",
            json!({
                "type": "object",
                "properties": {
                    "uri": {"type": "string", "description": "The memory's URI as search_memories or memory_ls showed it."},
                    "level": {"type": "string", "enum": ["l0", "l1", "l2"], "description": "How much to read (default l2)."}
                },
                "required": ["uri"],
                "additionalProperties": false
            }),
        ),
        spec(
            COMMIT_TOOL_NAME,
            "Remember something for future sessions, now: when the user asks you to remember \
             something, states a strong preference, or makes an important decision. One fact \
             per call, written so it is clear without this conversation.",
            json!({
                "type": "object",
                "properties": {
                    "memory_content": {"type": "string", "description": "The fact, self-contained (who, what, when)."},
                    "memory_type": {"type": "string", "enum": ["profile", "preference", "entity", "event", "case", "pattern"], "description": "profile: who the user is; preference: what they prefer; entity: a person, project or thing and its state; event: something that happened; case: a problem and how it was solved; pattern: a reusable way of working."},
                    // Strings low/medium/high are accepted too; the schema stays one plain type
                    // because some providers refuse `anyOf`.
                    "priority": {"type": "integer", "minimum": 0, "maximum": 10, "description": "How important: 0 (lowest) to 10 (default 5)."},
                    "category": {"type": "string", "description": "The topic it is about, e.g. editor or project-x; a new fact on the same topic replaces the old one for profile, preference, entity and pattern memories."}
                },
                "required": ["memory_content", "memory_type"],
                "additionalProperties": false
            }),
        ),
        spec(
            FORGET_TOOL_NAME,
            "Forget one memory by its viking:// URI, when the user asks you to or it is wrong. \
             Earlier versions stay in its history.",
            json!({
                "type": "object",
                "properties": {
                    "uri": {"type": "string", "description": "The memory's URI."}
                },
                "required": ["uri"],
                "additionalProperties": false
            }),
        ),
    ]
}

/// The name of `search_docs`: search over the documents added as resources (`skald add`).
pub const SEARCH_DOCS_TOOL_NAME: &str = "search_docs";

/// The definition of `search_docs`, for a host that runs skald's tools itself (MCP, the
/// OpenClaw plugin): `search_memories` over `viking://resources` only.
pub fn search_docs_spec() -> ToolSpec {
    ToolSpec {
        name: SEARCH_DOCS_TOOL_NAME.to_owned(),
        description: Some(
            "Search the documents added to skald (project docs, READMEs, notes: resources under \
             viking://resources). Use specific keywords; results come best first, each with its \
             abstract; read one whole with memory_read."
                .to_owned(),
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for, in natural language or keywords."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_TOOL_RESULTS, "description": "How many passages to return (default 5)."},
                "path": {"type": "string", "description": "Only documents at or below this viking://resources directory."}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
        extra: Extra::new(),
    }
}

/// Parses a `search_docs` call: a `search_memories` of the resources category, under `path`
/// when given (which must be a `viking://resources` directory).
pub fn parse_search_docs(arguments: &Value) -> Result<SearchArgs, ToolArgsError> {
    let args = Arguments::new(
        SEARCH_DOCS_TOOL_NAME,
        arguments,
        &["query", "max_results", "path"],
        "query, max_results and path",
        r#"{"query": "how are tokens refreshed", "max_results": 5}"#,
    )?;
    let query = args.required("query", "what to search for, as text")?;
    let max_results = args
        .integer("max_results", 1, MAX_TOOL_RESULTS as u64)?
        .map_or(DEFAULT_TOOL_RESULTS, |n| n as usize);
    let path = match args.string("path")? {
        Some(text) => {
            let uri = args.uri("path", &text)?;
            if uri.category() != Some(MemoryCategory::Resources) {
                return Err(ToolArgsError::Invalid {
                    tool: SEARCH_DOCS_TOOL_NAME,
                    field: "path",
                    expected: "a directory under viking://resources (search_memories searches \
                               memories)"
                        .to_owned(),
                });
            }
            Some(uri)
        }
        None => None,
    };
    Ok(SearchArgs {
        query,
        max_results,
        category: Some(MemoryCategory::Resources),
        path,
    })
}

/// What a model got wrong in a memory tool call; the message says how to correct it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolArgsError {
    /// The tool name is not one of the five memory tools.
    #[error(
        "unknown tool {0:?}: the memory tools are search_memories, memory_ls, memory_read, commit_memory and memory_forget"
    )]
    UnknownTool(String),
    /// The arguments are not a JSON object.
    #[error("{tool}: the arguments must be a JSON object, for example {example}")]
    NotAnObject {
        /// The tool called.
        tool: &'static str,
        /// A valid argument object for that tool, to copy from.
        example: &'static str,
    },
    /// An argument the tool does not define.
    #[error("{tool}: unknown argument {found:?}; the arguments are {expected}")]
    Unknown {
        /// The tool called.
        tool: &'static str,
        /// The argument's name.
        found: String,
        /// The arguments the tool does define.
        expected: &'static str,
    },
    /// A required argument is absent.
    #[error("{tool}: missing required argument {field:?} ({expected})")]
    Missing {
        /// The tool called.
        tool: &'static str,
        /// The argument's name.
        field: &'static str,
        /// What it should hold.
        expected: &'static str,
    },
    /// An argument has a value the tool does not accept.
    #[error("{tool}: {field:?} must be {expected}")]
    Invalid {
        /// The tool called.
        tool: &'static str,
        /// The argument's name.
        field: &'static str,
        /// What it must be.
        expected: String,
    },
    /// An argument that must be a memory URI is not one.
    #[error("{tool}: {field:?} is not a memory URI: {error}")]
    Uri {
        /// The tool called.
        tool: &'static str,
        /// The argument's name.
        field: &'static str,
        /// Why the text is not a memory URI.
        error: UriError,
    },
}

/// The parsed arguments of `search_memories`.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchArgs {
    /// What to look for, in natural language or keywords.
    pub query: String,
    /// How many memories to return.
    pub max_results: usize,
    /// Only memories of this category.
    pub category: Option<MemoryCategory>,
    /// Only memories at or below this directory.
    pub path: Option<MemoryUri>,
}

/// The parsed arguments of `memory_ls`.
#[derive(Debug, Clone, PartialEq)]
pub struct LsArgs {
    /// The directory to list (`viking://` when not given).
    pub path: MemoryUri,
    /// Only memories of this category.
    pub category: Option<MemoryCategory>,
}

/// The parsed arguments of `memory_read`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadArgs {
    /// The memory to read.
    pub uri: MemoryUri,
    /// How much of it: abstract, overview or full content.
    pub level: RecallLevel,
}

/// What kind of memory `commit_memory` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryType {
    /// Who the user is.
    Profile,
    /// What the user prefers.
    Preference,
    /// A person, project or thing and its state.
    Entity,
    /// Something that happened.
    Event,
    /// A problem and how it was solved (the agent's).
    Case,
    /// A reusable way of working (the agent's).
    Pattern,
}

impl MemoryType {
    /// Parses a type name, singular or plural, any case.
    pub fn parse(text: &str) -> Option<MemoryType> {
        match text.trim().to_ascii_lowercase().as_str() {
            "profile" | "profiles" => Some(MemoryType::Profile),
            "preference" | "preferences" => Some(MemoryType::Preference),
            "entity" | "entities" => Some(MemoryType::Entity),
            "event" | "events" => Some(MemoryType::Event),
            "case" | "cases" => Some(MemoryType::Case),
            "pattern" | "patterns" => Some(MemoryType::Pattern),
            _ => None,
        }
    }

    /// The layout category it is written to.
    pub fn category(self) -> MemoryCategory {
        match self {
            MemoryType::Profile => MemoryCategory::Profile,
            MemoryType::Preference => MemoryCategory::Preferences,
            MemoryType::Entity => MemoryCategory::Entities,
            MemoryType::Event => MemoryCategory::Events,
            MemoryType::Case => MemoryCategory::Cases,
            MemoryType::Pattern => MemoryCategory::Patterns,
        }
    }

    /// Whether a commit on an existing topic replaces it (a new version) rather than adding an
    /// entry next to it.
    pub fn one_per_topic(self) -> bool {
        match self {
            MemoryType::Profile
            | MemoryType::Preference
            | MemoryType::Entity
            | MemoryType::Pattern => true,
            MemoryType::Event | MemoryType::Case => false,
        }
    }
}

/// The parsed arguments of `commit_memory`.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitArgs {
    /// The fact, self-contained.
    pub content: String,
    /// What kind of memory it is, which decides its category and whether it replaces an older
    /// one on the same topic.
    pub memory_type: MemoryType,
    /// How important it is, 0 to 10 (5 unless given).
    pub priority: u8,
    /// The topic, as given.
    pub topic: Option<String>,
}

/// One parsed memory tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum MemoryToolCall {
    /// `search_memories`.
    Search(SearchArgs),
    /// `memory_ls`.
    Ls(LsArgs),
    /// `memory_read`.
    Read(ReadArgs),
    /// `commit_memory`.
    Commit(CommitArgs),
    /// `memory_forget`, with the memory to delete.
    Forget(MemoryUri),
}

struct Arguments {
    tool: &'static str,
    map: Map<String, Value>,
}

impl Arguments {
    fn new(
        tool: &'static str,
        arguments: &Value,
        allowed: &[&str],
        expected: &'static str,
        example: &'static str,
    ) -> Result<Arguments, ToolArgsError> {
        let map = match arguments {
            Value::Object(map) => map.clone(),
            // Some formats carry arguments as a JSON string; an empty one means no arguments.
            Value::String(text) if text.trim().is_empty() => Map::new(),
            Value::String(text) => match serde_json::from_str(text) {
                Ok(Value::Object(map)) => map,
                Ok(_) | Err(_) => return Err(ToolArgsError::NotAnObject { tool, example }),
            },
            Value::Null => Map::new(),
            Value::Bool(_) | Value::Number(_) | Value::Array(_) => {
                return Err(ToolArgsError::NotAnObject { tool, example });
            }
        };
        if let Some(found) = map.keys().find(|key| !allowed.contains(&key.as_str())) {
            return Err(ToolArgsError::Unknown {
                tool,
                found: found.clone(),
                expected,
            });
        }
        Ok(Arguments { tool, map })
    }

    fn invalid(&self, field: &'static str, expected: impl Into<String>) -> ToolArgsError {
        ToolArgsError::Invalid {
            tool: self.tool,
            field,
            expected: expected.into(),
        }
    }

    fn string(&self, field: &'static str) -> Result<Option<String>, ToolArgsError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) if text.trim().is_empty() => {
                Err(self.invalid(field, "a non-empty string"))
            }
            Some(Value::String(text)) => Ok(Some(text.trim().to_owned())),
            Some(_) => Err(self.invalid(field, "a string")),
        }
    }

    fn required(
        &self,
        field: &'static str,
        expected: &'static str,
    ) -> Result<String, ToolArgsError> {
        self.string(field)?.ok_or(ToolArgsError::Missing {
            tool: self.tool,
            field,
            expected,
        })
    }

    fn integer(
        &self,
        field: &'static str,
        min: u64,
        max: u64,
    ) -> Result<Option<u64>, ToolArgsError> {
        let expected = || format!("an integer from {min} to {max}");
        let value = match self.map.get(field) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Number(number)) => number.as_u64().or_else(|| {
                number
                    .as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                    .map(|f| f as u64)
            }),
            // Models often quote numbers; "5" is unambiguous.
            Some(Value::String(text)) => text.trim().parse::<u64>().ok(),
            Some(_) => None,
        };
        match value {
            Some(value) if (min..=max).contains(&value) => Ok(Some(value)),
            Some(_) | None => Err(self.invalid(field, expected())),
        }
    }

    fn uri(&self, field: &'static str, text: &str) -> Result<MemoryUri, ToolArgsError> {
        MemoryUri::parse(text).map_err(|error| ToolArgsError::Uri {
            tool: self.tool,
            field,
            error,
        })
    }

    fn category(&self) -> Result<Option<MemoryCategory>, ToolArgsError> {
        match self.string("category")? {
            None => Ok(None),
            Some(name) => MemoryCategory::from_name(&name.to_ascii_lowercase())
                .map(Some)
                .ok_or_else(|| self.invalid("category", format!("one of {CATEGORY_NAMES}"))),
        }
    }
}

/// Parses the arguments of memory tool `name` (a JSON object, or a JSON string holding one).
pub fn parse_tool_call(name: &str, arguments: &Value) -> Result<MemoryToolCall, ToolArgsError> {
    match name {
        SEARCH_TOOL_NAME => {
            let args = Arguments::new(
                SEARCH_TOOL_NAME,
                arguments,
                &["query", "max_results", "category", "path"],
                "query, max_results, category and path",
                r#"{"query": "database optimisation", "max_results": 5}"#,
            )?;
            let query = args.required("query", "what to search for, as text")?;
            let max_results = args
                .integer("max_results", 1, MAX_TOOL_RESULTS as u64)?
                .map_or(DEFAULT_TOOL_RESULTS, |n| n as usize);
            let path = match args.string("path")? {
                Some(text) => Some(args.uri("path", &text)?),
                None => None,
            };
            Ok(MemoryToolCall::Search(SearchArgs {
                query,
                max_results,
                category: args.category()?,
                path,
            }))
        }
        LS_TOOL_NAME => {
            let args = Arguments::new(
                LS_TOOL_NAME,
                arguments,
                &["path", "category"],
                "path and category",
                r#"{"path": "viking://"}"#,
            )?;
            let path = match args.string("path")? {
                Some(text) => args.uri("path", &text)?,
                None => MemoryUri::root(),
            };
            Ok(MemoryToolCall::Ls(LsArgs {
                path,
                category: args.category()?,
            }))
        }
        READ_TOOL_NAME => {
            let args = Arguments::new(
                READ_TOOL_NAME,
                arguments,
                &["uri", "level"],
                "uri and level",
                r#"{"uri": "viking://user/alice/memories/preferences/editor.md"}"#,
            )?;
            let uri = args.uri("uri", &args.required("uri", "a viking:// memory URI")?)?;
            let level = match args.string("level")? {
                None => RecallLevel::L2,
                Some(text) => RecallLevel::parse(&text)
                    .ok_or_else(|| args.invalid("level", "one of l0, l1, l2"))?,
            };
            Ok(MemoryToolCall::Read(ReadArgs { uri, level }))
        }
        COMMIT_TOOL_NAME => {
            let args = Arguments::new(
                COMMIT_TOOL_NAME,
                arguments,
                &["memory_content", "memory_type", "priority", "category"],
                "memory_content, memory_type, priority and category",
                r#"{"memory_content": "Alice prefers dark mode.", "memory_type": "preference"}"#,
            )?;
            let content = args.required("memory_content", "the fact to remember, as text")?;
            if content.chars().count() > MAX_COMMIT_CHARS {
                return Err(args.invalid(
                    "memory_content",
                    format!(
                        "at most {MAX_COMMIT_CHARS} characters (it has {}); commit one fact per call",
                        content.chars().count()
                    ),
                ));
            }
            let type_name = args.required(
                "memory_type",
                "one of profile, preference, entity, event, case, pattern",
            )?;
            let memory_type = MemoryType::parse(&type_name).ok_or_else(|| {
                args.invalid(
                    "memory_type",
                    "one of profile, preference, entity, event, case, pattern",
                )
            })?;
            let priority = match args.map.get("priority") {
                Some(Value::String(text)) if text.trim().parse::<u64>().is_err() => {
                    match text.trim().to_ascii_lowercase().as_str() {
                        "low" => 2,
                        "medium" | "normal" => 5,
                        "high" => 8,
                        _ => {
                            return Err(args.invalid(
                                "priority",
                                "an integer from 0 to 10, or low, medium or high",
                            ));
                        }
                    }
                }
                _ => args
                    .integer("priority", 0, 10)
                    .map_err(|_| {
                        args.invalid(
                            "priority",
                            "an integer from 0 to 10, or low, medium or high",
                        )
                    })?
                    .map_or(5, |n| n as u8),
            };
            let topic = args.string("category")?;
            if let Some(topic) = &topic
                && slug(topic).is_empty()
            {
                return Err(args.invalid(
                    "category",
                    "a topic with letters or digits, such as editor or project-x",
                ));
            }
            Ok(MemoryToolCall::Commit(CommitArgs {
                content,
                memory_type,
                priority,
                topic,
            }))
        }
        FORGET_TOOL_NAME => {
            let args = Arguments::new(
                FORGET_TOOL_NAME,
                arguments,
                &["uri"],
                "uri",
                r#"{"uri": "viking://user/alice/memories/preferences/editor.md"}"#,
            )?;
            let uri = args.uri(
                "uri",
                &args.required("uri", "the viking:// URI of the memory")?,
            )?;
            Ok(MemoryToolCall::Forget(uri))
        }
        other => Err(ToolArgsError::UnknownTool(other.chars().take(80).collect())),
    }
}

/// A file-name slug of `text`: lower case, letters and digits of any script, words joined by
/// `-`, at most [`MAX_TOPIC_CHARS`] characters.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        let word = word.to_lowercase();
        let needed = word.chars().count() + usize::from(!out.is_empty());
        if out.chars().count() + needed > MAX_TOPIC_CHARS {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word);
    }
    out
}

/// The topic of content with no `category`: its first four content words.
fn topic_of(content: &str) -> String {
    let words: Vec<String> = super::dedup::words(content)
        .filter(|word| !is_stopword(word))
        .take(4)
        .collect();
    let topic = slug(&words.join(" "));
    if topic.is_empty() {
        "memory".to_owned()
    } else {
        topic
    }
}

/// Where `commit_memory` writes `args` for `user` and `agent` at `now_ms` (see the module
/// docs).
pub fn commit_uri(
    args: &CommitArgs,
    user: &str,
    agent: &str,
    now_ms: i64,
) -> Result<MemoryUri, UriError> {
    let topic = match &args.topic {
        Some(topic) if !slug(topic).is_empty() => slug(topic),
        Some(_) | None => topic_of(&args.content),
    };
    let digest = Sha256::digest(normalize(&args.content).as_bytes());
    let hash: String = digest
        .iter()
        .take(4)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let category = args.memory_type.category().name();
    let path = match args.memory_type {
        MemoryType::Profile | MemoryType::Preference | MemoryType::Entity => {
            format!("user/{user}/memories/{category}/{topic}.md")
        }
        MemoryType::Pattern => format!("agent/{agent}/memories/{category}/{topic}.md"),
        MemoryType::Event => {
            let date = chrono::DateTime::from_timestamp_millis(now_ms)
                .map(|time| time.format("%Y/%m/%d").to_string())
                .unwrap_or_else(|| "1970/01/01".to_owned());
            format!("user/{user}/memories/{category}/{date}/{topic}-{hash}.md")
        }
        MemoryType::Case => format!("agent/{agent}/memories/{category}/{topic}-{hash}.md"),
    };
    MemoryUri::parse_entry(&format!("viking://{path}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn search_docs_searches_resources_only_and_refuses_a_path_elsewhere() {
        let args = parse_search_docs(&json!({"query": "signing keys", "max_results": 3})).unwrap();
        assert_eq!(args.category, Some(MemoryCategory::Resources));
        assert_eq!((args.query.as_str(), args.max_results), ("signing keys", 3));
        let under =
            parse_search_docs(&json!({"query": "keys", "path": "viking://resources/runbook"}))
                .unwrap();
        assert_eq!(
            under.path.unwrap().to_string(),
            "viking://resources/runbook"
        );
        let elsewhere =
            parse_search_docs(&json!({"query": "keys", "path": "viking://user"})).unwrap_err();
        assert!(
            elsewhere.to_string().contains("viking://resources"),
            "{elsewhere}"
        );
        let typo = parse_search_docs(&json!({"qeury": "keys"})).unwrap_err();
        assert!(
            typo.to_string().contains("unknown argument \"qeury\""),
            "{typo}"
        );
        assert_eq!(search_docs_spec().name, SEARCH_DOCS_TOOL_NAME);
    }

    #[test]
    fn specs_cover_the_five_tools_with_strict_schemas() {
        let specs = tool_specs();
        let names: Vec<&str> = specs.iter().map(|spec| spec.name.as_str()).collect();
        assert_eq!(names, MEMORY_TOOL_NAMES);
        for spec in &specs {
            assert_eq!(
                spec.parameters["additionalProperties"],
                json!(false),
                "{}",
                spec.name
            );
            assert!(is_memory_tool(&spec.name));
        }
        assert!(!is_memory_tool("bash"));
    }

    #[test]
    fn search_arguments_parse_with_defaults_and_strings() {
        let call = parse_tool_call(SEARCH_TOOL_NAME, &json!("{\"query\":\" db \",\"max_results\":\"3\",\"category\":\"Events\",\"path\":\"viking://user/a/\"}")).unwrap();
        assert_eq!(
            call,
            MemoryToolCall::Search(SearchArgs {
                query: "db".into(),
                max_results: 3,
                category: Some(MemoryCategory::Events),
                path: Some(MemoryUri::parse("viking://user/a").unwrap()),
            })
        );
        let MemoryToolCall::Search(args) =
            parse_tool_call(SEARCH_TOOL_NAME, &json!({"query": "x"})).unwrap()
        else {
            panic!()
        };
        assert_eq!(args.max_results, DEFAULT_TOOL_RESULTS);
    }

    #[test]
    fn bad_arguments_say_what_was_wrong() {
        for (tool, arguments, expected) in [
            (SEARCH_TOOL_NAME, json!([1]), "must be a JSON object"),
            (
                SEARCH_TOOL_NAME,
                json!({}),
                "missing required argument \"query\"",
            ),
            (
                SEARCH_TOOL_NAME,
                json!({"query": ""}),
                "\"query\" must be a non-empty string",
            ),
            (
                SEARCH_TOOL_NAME,
                json!({"query": 3}),
                "\"query\" must be a string",
            ),
            (
                SEARCH_TOOL_NAME,
                json!({"query": "x", "max_results": 0}),
                "from 1 to 20",
            ),
            (
                SEARCH_TOOL_NAME,
                json!({"query": "x", "max_results": 2.5}),
                "from 1 to 20",
            ),
            (
                SEARCH_TOOL_NAME,
                json!({"query": "x", "category": "notes"}),
                "one of profile",
            ),
            (
                SEARCH_TOOL_NAME,
                json!({"query": "x", "path": "/etc"}),
                "must start with viking://",
            ),
            (
                LS_TOOL_NAME,
                json!({"dir": "viking://"}),
                "unknown argument \"dir\"; the arguments are path and category",
            ),
            (
                READ_TOOL_NAME,
                json!({"uri": "viking://user/a/memories/x/y"}),
                "a user memory category",
            ),
            (
                READ_TOOL_NAME,
                json!({"uri": "viking://resources/x", "level": "full"}),
                "one of l0, l1, l2",
            ),
            (
                COMMIT_TOOL_NAME,
                json!({"memory_content": "x"}),
                "missing required argument \"memory_type\"",
            ),
            (
                COMMIT_TOOL_NAME,
                json!({"memory_content": "x", "memory_type": "note"}),
                "one of profile, preference",
            ),
            (
                COMMIT_TOOL_NAME,
                json!({"memory_content": "x", "memory_type": "event", "priority": 11}),
                "low, medium or high",
            ),
            (
                COMMIT_TOOL_NAME,
                json!({"memory_content": "x", "memory_type": "event", "priority": "urgent"}),
                "low, medium or high",
            ),
            (
                COMMIT_TOOL_NAME,
                json!({"memory_content": "x", "memory_type": "event", "category": "!!"}),
                "a topic with letters",
            ),
            (FORGET_TOOL_NAME, json!("not json"), "must be a JSON object"),
            ("memory_delete", json!({}), "unknown tool \"memory_delete\""),
        ] {
            let error = parse_tool_call(tool, &arguments).unwrap_err().to_string();
            assert!(error.contains(expected), "{tool} {arguments}: {error}");
        }
    }

    #[test]
    fn commit_types_map_to_the_layout() {
        let commit = |memory_type, topic: Option<&str>, content: &str| CommitArgs {
            content: content.into(),
            memory_type,
            priority: 5,
            topic: topic.map(String::from),
        };
        let now = 1_683_504_000_000; // 2023-05-08
        for (args, expected) in [
            (
                commit(MemoryType::Preference, Some("Editor"), "x"),
                "viking://user/u/memories/preferences/editor.md",
            ),
            (
                commit(MemoryType::Profile, None, "Alice is an SRE at Acme"),
                "viking://user/u/memories/profile/alice-sre-acme.md",
            ),
            (
                commit(MemoryType::Entity, Some("Project X"), "x"),
                "viking://user/u/memories/entities/project-x.md",
            ),
            (
                commit(MemoryType::Pattern, Some("deploys"), "x"),
                "viking://agent/main/memories/patterns/deploys.md",
            ),
        ] {
            assert_eq!(
                commit_uri(&args, "u", "main", now).unwrap().as_str(),
                expected
            );
        }
        let event = commit_uri(
            &commit(MemoryType::Event, Some("trip"), "Went camping"),
            "u",
            "main",
            now,
        )
        .unwrap();
        assert!(
            event
                .as_str()
                .starts_with("viking://user/u/memories/events/2023/05/08/trip-"),
            "{event}"
        );
        let case = commit_uri(
            &commit(MemoryType::Case, None, "Fixed CI by pinning node"),
            "u",
            "main",
            now,
        )
        .unwrap();
        assert!(
            case.as_str()
                .starts_with("viking://agent/main/memories/cases/fixed-ci-pinning-node-"),
            "{case}"
        );
        assert_eq!(slug("  Über   Straße "), "über-straße");
        assert_eq!(slug(&"long ".repeat(30)).chars().count(), 44);
        assert_eq!(
            MemoryType::parse("Preferences"),
            Some(MemoryType::Preference)
        );
    }
}
