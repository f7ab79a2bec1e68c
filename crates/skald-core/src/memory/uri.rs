//! `viking://` URIs: where a memory lives, following OpenViking's layout. Parsing is strict and
//! total: any text either becomes a [`MemoryUri`] in canonical form or a [`UriError`] that says
//! what is wrong and what is expected, before any storage is touched.
//!
//! The layout (every other path is refused):
//!
//! ```text
//! viking://
//! ├── user/{user}/memories/{profile,preferences,entities,events}/…
//! ├── agent/{agent}/memories/{cases,patterns}/…
//! ├── agent/{agent}/skills/{name}/…
//! ├── agent/{agent}/tools/{name}
//! ├── resources/…
//! └── session/{id}/…
//! ```
//!
//! A URI names either a directory (any prefix of the layout, or a folder under it) or an entry
//! location ([`MemoryUri::is_entry_location`]): a path below a category, skill, tool, resources
//! or session directory. The canonical form has no trailing slash (except the root,
//! `viking://`); `viking://user/alice/` and `viking://user/alice` are the same directory.

use std::fmt;
use std::str::FromStr;

/// The scheme every memory URI starts with.
pub const SCHEME: &str = "viking://";

/// The longest URI accepted, in bytes.
pub const MAX_URI_LEN: usize = 1024;

/// The longest path segment accepted, in bytes.
pub const MAX_SEGMENT_LEN: usize = 128;

/// The most segments a URI may have after the scheme.
pub const MAX_DEPTH: usize = 24;

/// The top-level directories of `viking://`.
pub const SCOPES: [&str; 4] = ["user", "agent", "resources", "session"];

/// The category directories under `viking://user/{user}/memories/`.
pub const USER_CATEGORIES: [&str; 4] = ["profile", "preferences", "entities", "events"];

/// The category directories under `viking://agent/{agent}/memories/`.
pub const AGENT_MEMORY_CATEGORIES: [&str; 2] = ["cases", "patterns"];

/// The directories under `viking://agent/{agent}/`.
pub const AGENT_DIRECTORIES: [&str; 3] = ["memories", "skills", "tools"];

/// What kind of knowledge an entry holds; decided by where it lives.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum MemoryCategory {
    /// `user/{u}/memories/profile/…`: who the user is.
    Profile,
    /// `user/{u}/memories/preferences/…`: what the user prefers, one facet per entry.
    Preferences,
    /// `user/{u}/memories/entities/…`: people, projects and things and their state.
    Entities,
    /// `user/{u}/memories/events/…`: what happened, when.
    Events,
    /// `agent/{a}/memories/cases/…`: a problem and how it was solved.
    Cases,
    /// `agent/{a}/memories/patterns/…`: a reusable way of working.
    Patterns,
    /// `agent/{a}/skills/{name}/…`: what was learned using a skill.
    Skills,
    /// `agent/{a}/tools/{name}`: what was learned using a tool.
    Tools,
    /// `resources/…`: documents added as knowledge.
    Resources,
    /// `session/{id}/…`: archives of sessions.
    Session,
}

impl MemoryCategory {
    /// Every category, in layout order.
    pub const ALL: [MemoryCategory; 10] = [
        MemoryCategory::Profile,
        MemoryCategory::Preferences,
        MemoryCategory::Entities,
        MemoryCategory::Events,
        MemoryCategory::Cases,
        MemoryCategory::Patterns,
        MemoryCategory::Skills,
        MemoryCategory::Tools,
        MemoryCategory::Resources,
        MemoryCategory::Session,
    ];

    /// The name used in URIs, storage and the CLI (`preferences`, `skills`, `session`…).
    pub fn name(self) -> &'static str {
        match self {
            MemoryCategory::Profile => "profile",
            MemoryCategory::Preferences => "preferences",
            MemoryCategory::Entities => "entities",
            MemoryCategory::Events => "events",
            MemoryCategory::Cases => "cases",
            MemoryCategory::Patterns => "patterns",
            MemoryCategory::Skills => "skills",
            MemoryCategory::Tools => "tools",
            MemoryCategory::Resources => "resources",
            MemoryCategory::Session => "session",
        }
    }

    /// The category called `name` (as [`MemoryCategory::name`] writes it).
    pub fn from_name(name: &str) -> Option<MemoryCategory> {
        MemoryCategory::ALL
            .into_iter()
            .find(|category| category.name() == name)
    }
}

impl fmt::Display for MemoryCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MemoryCategory {
    type Err = UriError;

    fn from_str(name: &str) -> Result<MemoryCategory, UriError> {
        MemoryCategory::from_name(name).ok_or_else(|| UriError::UnknownCategory {
            found: shown(name),
            expected: "one of profile, preferences, entities, events, cases, patterns, skills, \
                       tools, resources, session",
        })
    }
}

/// Why a text is not a memory URI. Each message names the problem and what is expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UriError {
    /// The text does not start with `viking://`.
    #[error(
        "memory URI {shown:?} must start with viking:// (for example viking://user/alice/memories/preferences/editor.md)"
    )]
    MissingScheme {
        /// The start of the text, cut for the message.
        shown: String,
    },

    /// The URI is longer than the most accepted.
    #[error("memory URI is {len} bytes long; at most {MAX_URI_LEN} are accepted")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },

    /// The URI has more path segments than the most accepted.
    #[error("memory URI has {depth} path segments; at most {MAX_DEPTH} are accepted")]
    TooDeep {
        /// How many it has.
        depth: usize,
    },

    /// Two slashes in a row.
    #[error(
        "memory URI {shown:?} has an empty path segment at position {position} (two slashes in a row)"
    )]
    EmptySegment {
        /// The URI, cut for the message.
        shown: String,
        /// The empty segment's position, counting from 0.
        position: usize,
    },

    /// A path segment the layout refuses: too long, starting with `.`, or with a character
    /// outside letters, digits and `- _ . ~ @ + : = ,`.
    #[error("memory URI segment {segment:?} is not allowed: {reason}")]
    InvalidSegment {
        /// The segment.
        segment: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// The first segment is not `user`, `agent`, `resources` or `session`.
    #[error(
        "memory URI {shown:?}: {found:?} is not a top-level directory; expected user, agent, resources or session"
    )]
    UnknownScope {
        /// The URI, cut for the message.
        shown: String,
        /// The first segment.
        found: String,
    },

    /// A category name the layout does not define.
    #[error("unknown category {found:?}: expected {expected}")]
    UnknownCategory {
        /// The name given.
        found: String,
        /// The category names there are.
        expected: &'static str,
    },

    /// A segment where the layout expects another one.
    #[error("memory URI {shown:?}: expected {expected} after {after:?}, found {found:?}")]
    UnexpectedSegment {
        /// The URI, cut for the message.
        shown: String,
        /// The segment it follows.
        after: String,
        /// The segment found.
        found: String,
        /// What the layout expects there.
        expected: &'static str,
    },

    /// A tool entry with segments after the tool's name.
    #[error(
        "memory URI {shown:?}: a tool entry is exactly viking://agent/{{agent}}/tools/{{name}}, with nothing after the tool's name"
    )]
    ToolTooDeep {
        /// The URI, cut for the message.
        shown: String,
    },

    /// A directory where an entry is required.
    #[error("memory URI {shown:?} is a directory; an entry lives below it, for example {example}")]
    NotAnEntry {
        /// The URI, cut for the message.
        shown: String,
        /// An entry URI below it, for the message.
        example: String,
    },
}

/// A validated memory URI in canonical form (no trailing slash, except the root `viking://`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryUri {
    text: String,
}

/// The first characters of untrusted text, for error messages.
fn shown(text: &str) -> String {
    text.chars().take(120).collect()
}

impl MemoryUri {
    /// The root directory, `viking://`.
    pub fn root() -> MemoryUri {
        MemoryUri {
            text: SCHEME.to_owned(),
        }
    }

    /// Parses and validates `text`. One trailing slash is accepted and dropped; everything else
    /// must already be canonical (no `..`, no empty segments, no whitespace or control
    /// characters, no percent-encoding).
    pub fn parse(text: &str) -> Result<MemoryUri, UriError> {
        if text.len() > MAX_URI_LEN {
            return Err(UriError::TooLong { len: text.len() });
        }
        let Some(path) = text.strip_prefix(SCHEME) else {
            return Err(UriError::MissingScheme { shown: shown(text) });
        };
        let path = path.strip_suffix('/').unwrap_or(path);
        if path.is_empty() {
            return Ok(MemoryUri::root());
        }
        let segments: Vec<&str> = path.split('/').collect();
        if segments.len() > MAX_DEPTH {
            return Err(UriError::TooDeep {
                depth: segments.len(),
            });
        }
        for (position, segment) in segments.iter().enumerate() {
            if segment.is_empty() {
                return Err(UriError::EmptySegment {
                    shown: shown(text),
                    position: position + 1,
                });
            }
            validate_segment(segment)?;
        }
        check_layout(text, &segments)?;
        Ok(MemoryUri {
            text: format!("{SCHEME}{path}"),
        })
    }

    /// [`MemoryUri::parse`], then [`MemoryUri::require_entry`]: a URI an entry can be written at.
    pub fn parse_entry(text: &str) -> Result<MemoryUri, UriError> {
        let uri = MemoryUri::parse(text)?;
        uri.require_entry()?;
        Ok(uri)
    }

    /// The canonical text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The path segments after `viking://` (none for the root).
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.path().split('/').filter(|segment| !segment.is_empty())
    }

    /// The number of segments after `viking://`.
    pub fn depth(&self) -> usize {
        self.segments().count()
    }

    fn path(&self) -> &str {
        self.text.get(SCHEME.len()..).unwrap_or("")
    }

    /// The last segment (`None` for the root).
    pub fn name(&self) -> Option<&str> {
        self.segments().last()
    }

    /// The directory this URI is in (`None` for the root).
    pub fn parent(&self) -> Option<MemoryUri> {
        let path = self.path();
        if path.is_empty() {
            return None;
        }
        let text = match path.rfind('/') {
            Some(cut) => format!("{SCHEME}{}", path.get(..cut).unwrap_or("")),
            None => SCHEME.to_owned(),
        };
        Some(MemoryUri { text })
    }

    /// Every directory above this URI, nearest first, ending with the root.
    pub fn ancestors(&self) -> Vec<MemoryUri> {
        let mut out = Vec::new();
        let mut current = self.parent();
        while let Some(uri) = current {
            current = uri.parent();
            out.push(uri);
        }
        out
    }

    /// This URI with `name` appended (which may hold several `/`-separated segments); the result
    /// is validated like any parsed URI.
    pub fn join(&self, name: &str) -> Result<MemoryUri, UriError> {
        let separator = if self.path().is_empty() { "" } else { "/" };
        MemoryUri::parse(&format!("{}{separator}{name}", self.text))
    }

    /// Whether `other` is this directory or lies below it.
    pub fn contains(&self, other: &MemoryUri) -> bool {
        if self.path().is_empty() {
            return true;
        }
        other.text == self.text
            || other
                .text
                .strip_prefix(self.text.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// The text every URI strictly below this directory starts with (`viking://a/b/`; for the
    /// root, `viking://`). Used for prefix filters.
    pub fn descendant_prefix(&self) -> String {
        if self.path().is_empty() {
            self.text.clone()
        } else {
            format!("{}/", self.text)
        }
    }

    /// The category of an entry at or below this URI, when the path decides one.
    pub fn category(&self) -> Option<MemoryCategory> {
        let segments: Vec<&str> = self.segments().collect();
        match segments.as_slice() {
            ["user", _, "memories", category, ..] => match *category {
                "profile" => Some(MemoryCategory::Profile),
                "preferences" => Some(MemoryCategory::Preferences),
                "entities" => Some(MemoryCategory::Entities),
                "events" => Some(MemoryCategory::Events),
                _ => None,
            },
            ["agent", _, "memories", "cases", ..] => Some(MemoryCategory::Cases),
            ["agent", _, "memories", "patterns", ..] => Some(MemoryCategory::Patterns),
            ["agent", _, "skills", _, ..] => Some(MemoryCategory::Skills),
            ["agent", _, "tools", _] => Some(MemoryCategory::Tools),
            ["resources", ..] => Some(MemoryCategory::Resources),
            ["session", _, ..] => Some(MemoryCategory::Session),
            _ => None,
        }
    }

    /// Whether an entry may be written here: below a memory category, a skill, the resources or
    /// a session directory, or exactly a tool.
    pub fn is_entry_location(&self) -> bool {
        let segments: Vec<&str> = self.segments().collect();
        matches!(
            segments.as_slice(),
            ["user", _, "memories", _, _, ..]
                | ["agent", _, "memories", _, _, ..]
                | ["agent", _, "skills", _, _, ..]
                | ["agent", _, "tools", _]
                | ["resources", _, ..]
                | ["session", _, _, ..]
        )
    }

    /// `Ok` when [`MemoryUri::is_entry_location`]; otherwise an error with an example of a URI
    /// that would be one.
    pub fn require_entry(&self) -> Result<(), UriError> {
        if self.is_entry_location() {
            return Ok(());
        }
        let example = match self.segments().collect::<Vec<_>>().as_slice() {
            [] => "viking://user/alice/memories/preferences/editor.md".to_owned(),
            ["user"] => format!("{}/alice/memories/events/trip.md", self.text),
            ["user", _] => format!("{}/memories/preferences/editor.md", self.text),
            ["user", _, _] => format!("{}/preferences/editor.md", self.text),
            ["agent"] => format!("{}/main/memories/cases/fix.md", self.text),
            ["agent", _] => format!("{}/memories/cases/fix.md", self.text),
            ["agent", _, "memories"] => format!("{}/cases/fix.md", self.text),
            ["agent", _, "skills"] => format!("{}/pptx/tips.md", self.text),
            ["agent", _, "tools"] => format!("{}/run_shell", self.text),
            ["session"] => format!("{}/8555a0a4/archive-001.md", self.text),
            _ => format!("{}/note.md", self.text),
        };
        Err(UriError::NotAnEntry {
            shown: self.text.clone(),
            example,
        })
    }

    /// Where duplicates of an entry here are looked for: the user's or agent's memories, one
    /// skill, one tool, the resources, or one session.
    pub fn dedup_root(&self) -> Option<MemoryUri> {
        let keep = match self.segments().collect::<Vec<_>>().as_slice() {
            ["user", _, "memories", ..] | ["agent", _, "memories", ..] => 3,
            ["agent", _, "skills", _, ..] | ["agent", _, "tools", _, ..] => 4,
            ["resources", ..] => 1,
            ["session", _, ..] => 2,
            _ => return None,
        };
        let path: Vec<&str> = self.segments().take(keep).collect();
        Some(MemoryUri {
            text: format!("{SCHEME}{}", path.join("/")),
        })
    }
}

impl fmt::Display for MemoryUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for MemoryUri {
    type Err = UriError;

    fn from_str(text: &str) -> Result<MemoryUri, UriError> {
        MemoryUri::parse(text)
    }
}

impl serde::Serialize for MemoryUri {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for MemoryUri {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<MemoryUri, D::Error> {
        let text = String::deserialize(deserializer)?;
        MemoryUri::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A segment is a file or directory name: letters and digits of any script and `-_.~@+:=,`;
/// never `.`/`..`, never starting with `.` (OpenViking's sidecars such as `.abstract.md` are
/// reserved), never whitespace, `/`, `\`, `%`, `?`, `#` or control characters.
fn validate_segment(segment: &str) -> Result<(), UriError> {
    let invalid = |reason| UriError::InvalidSegment {
        segment: shown(segment),
        reason,
    };
    if segment.len() > MAX_SEGMENT_LEN {
        return Err(invalid("a segment has at most 128 bytes"));
    }
    if segment.starts_with('.') {
        return Err(invalid(
            "a segment does not start with '.' ('.', '..' and hidden names are refused)",
        ));
    }
    let allowed = |c: char| {
        c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '@' | '+' | ':' | '=' | ',')
    };
    if !segment.chars().all(allowed) {
        return Err(invalid(
            "a segment has only letters, digits and - _ . ~ @ + : = , (no spaces, slashes, \
             percent-encoding, '?' or '#')",
        ));
    }
    Ok(())
}

/// A user, agent or session id: a segment that also starts with a letter or digit.
fn validate_owner(segment: &str, what: &'static str) -> Result<(), UriError> {
    if segment.chars().next().is_some_and(char::is_alphanumeric) {
        Ok(())
    } else {
        Err(UriError::InvalidSegment {
            segment: shown(segment),
            reason: what,
        })
    }
}

fn check_layout(text: &str, segments: &[&str]) -> Result<(), UriError> {
    let unexpected = |index: usize, expected: &'static str| {
        let after = segments
            .get(..index)
            .map(|before| format!("{SCHEME}{}", before.join("/")))
            .unwrap_or_default();
        UriError::UnexpectedSegment {
            shown: shown(text),
            after,
            found: segments.get(index).map(|s| shown(s)).unwrap_or_default(),
            expected,
        }
    };
    let Some(scope) = segments.first() else {
        return Ok(());
    };
    match *scope {
        "user" => {
            if let Some(user) = segments.get(1) {
                validate_owner(user, "a user id starts with a letter or digit")?;
            }
            if segments.get(2).is_some_and(|s| *s != "memories") {
                return Err(unexpected(2, "memories"));
            }
            if segments
                .get(3)
                .is_some_and(|s| !USER_CATEGORIES.contains(s))
            {
                return Err(unexpected(
                    3,
                    "a user memory category: profile, preferences, entities or events",
                ));
            }
            Ok(())
        }
        "agent" => {
            if let Some(agent) = segments.get(1) {
                validate_owner(agent, "an agent id starts with a letter or digit")?;
            }
            match segments.get(2) {
                None => Ok(()),
                Some(&"memories") => {
                    if segments
                        .get(3)
                        .is_some_and(|s| !AGENT_MEMORY_CATEGORIES.contains(s))
                    {
                        return Err(unexpected(3, "an agent memory category: cases or patterns"));
                    }
                    Ok(())
                }
                Some(&"skills") => Ok(()),
                Some(&"tools") => {
                    if segments.len() > 4 {
                        return Err(UriError::ToolTooDeep { shown: shown(text) });
                    }
                    Ok(())
                }
                Some(_) => Err(unexpected(2, "memories, skills or tools")),
            }
        }
        "resources" => Ok(()),
        "session" => {
            if let Some(id) = segments.get(1) {
                validate_owner(id, "a session id starts with a letter or digit")?;
            }
            Ok(())
        }
        other => Err(UriError::UnknownScope {
            shown: shown(text),
            found: shown(other),
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn valid_uris_parse_to_canonical_form() {
        for (text, canonical) in [
            ("viking://", "viking://"),
            ("viking://user", "viking://user"),
            ("viking://user/", "viking://user"),
            (
                "viking://user/alice/memories/",
                "viking://user/alice/memories",
            ),
            (
                "viking://user/alice/memories/events/2023/05/08/camping.md",
                "viking://user/alice/memories/events/2023/05/08/camping.md",
            ),
            (
                "viking://agent/main/memories/cases/fix-ci.md",
                "viking://agent/main/memories/cases/fix-ci.md",
            ),
            (
                "viking://agent/main/skills/pptx/SKILL.md",
                "viking://agent/main/skills/pptx/SKILL.md",
            ),
            (
                "viking://agent/main/tools/run_shell",
                "viking://agent/main/tools/run_shell",
            ),
            (
                "viking://resources/docs/auth.md",
                "viking://resources/docs/auth.md",
            ),
            (
                "viking://session/8555a0a4/D1:3",
                "viking://session/8555a0a4/D1:3",
            ),
            (
                "viking://user/张三/memories/entities/项目.md",
                "viking://user/张三/memories/entities/项目.md",
            ),
        ] {
            let uri = MemoryUri::parse(text).unwrap();
            assert_eq!(uri.as_str(), canonical, "{text}");
            assert_eq!(uri.to_string().parse::<MemoryUri>().unwrap(), uri);
        }
    }

    #[test]
    fn invalid_uris_are_refused_with_the_reason() {
        for (text, expected) in [
            ("user/alice", "must start with viking://"),
            ("VIKING://user", "must start with viking://"),
            ("viking:/user", "must start with viking://"),
            ("viking://users/alice", "not a top-level directory"),
            (
                "viking://user//memories",
                "empty path segment at position 2",
            ),
            ("viking://user/alice/notes/x", "expected memories"),
            (
                "viking://user/alice/memories/cases/x",
                "a user memory category",
            ),
            ("viking://agent/main/memories/events/x", "cases or patterns"),
            ("viking://agent/main/secrets/x", "memories, skills or tools"),
            (
                "viking://agent/main/tools/run_shell/extra",
                "a tool entry is exactly",
            ),
            (
                "viking://resources/../etc/passwd",
                "does not start with '.'",
            ),
            ("viking://resources/.abstract.md", "does not start with '.'"),
            ("viking://resources/a b", "no spaces"),
            ("viking://resources/a%2Fb", "percent-encoding"),
            ("viking://resources/a?b", "'?'"),
            ("viking://resources/a\\b", "no spaces"),
            ("viking://resources/a\nb", "no spaces"),
            (
                "viking://user/-rf/memories",
                "a user id starts with a letter or digit",
            ),
            (
                "viking://session/_x/a",
                "a session id starts with a letter or digit",
            ),
        ] {
            let error = MemoryUri::parse(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
        let long = format!("viking://resources/{}", "a/".repeat(600));
        assert!(matches!(
            MemoryUri::parse(&long),
            Err(UriError::TooLong { .. })
        ));
        let deep = format!("viking://resources/{}", vec!["a"; 30].join("/"));
        assert!(matches!(
            MemoryUri::parse(&deep),
            Err(UriError::TooDeep { .. })
        ));
        let wide = format!("viking://resources/{}", "a".repeat(129));
        assert!(matches!(
            MemoryUri::parse(&wide),
            Err(UriError::InvalidSegment { .. })
        ));
    }

    #[test]
    fn entry_locations_and_categories_follow_the_layout() {
        for (text, category) in [
            (
                "viking://user/a/memories/profile/profile.md",
                MemoryCategory::Profile,
            ),
            (
                "viking://user/a/memories/preferences/x",
                MemoryCategory::Preferences,
            ),
            (
                "viking://user/a/memories/entities/x",
                MemoryCategory::Entities,
            ),
            (
                "viking://user/a/memories/events/2023/x",
                MemoryCategory::Events,
            ),
            ("viking://agent/b/memories/cases/x", MemoryCategory::Cases),
            (
                "viking://agent/b/memories/patterns/x",
                MemoryCategory::Patterns,
            ),
            (
                "viking://agent/b/skills/pptx/SKILL.md",
                MemoryCategory::Skills,
            ),
            ("viking://agent/b/tools/grep", MemoryCategory::Tools),
            ("viking://resources/x", MemoryCategory::Resources),
            ("viking://session/s1/archive.md", MemoryCategory::Session),
        ] {
            let uri = MemoryUri::parse_entry(text).unwrap();
            assert_eq!(uri.category(), Some(category), "{text}");
        }
        for directory in [
            "viking://",
            "viking://user",
            "viking://user/a",
            "viking://user/a/memories",
            "viking://user/a/memories/events",
            "viking://agent/b/skills/pptx",
            "viking://agent/b/tools",
            "viking://resources",
            "viking://session/s1",
        ] {
            let error = MemoryUri::parse_entry(directory).unwrap_err();
            assert!(
                matches!(&error, UriError::NotAnEntry { example, .. } if MemoryUri::parse_entry(example).is_ok()),
                "{directory}: {error}"
            );
        }
    }

    #[test]
    fn parents_prefixes_and_joins() {
        let uri = MemoryUri::parse("viking://user/a/memories/events/x.md").unwrap();
        let chain: Vec<String> = uri.ancestors().iter().map(ToString::to_string).collect();
        assert_eq!(
            chain,
            [
                "viking://user/a/memories/events",
                "viking://user/a/memories",
                "viking://user/a",
                "viking://user",
                "viking://",
            ]
        );
        let events = uri.parent().unwrap();
        assert!(events.contains(&uri));
        assert!(MemoryUri::root().contains(&uri));
        assert!(!uri.contains(&events));
        let sibling = MemoryUri::parse("viking://user/a/memories/eventsX").unwrap_err();
        assert!(matches!(sibling, UriError::UnexpectedSegment { .. }));
        assert_eq!(
            events.descendant_prefix(),
            "viking://user/a/memories/events/"
        );
        assert_eq!(
            events.join("y.md").unwrap().as_str(),
            "viking://user/a/memories/events/y.md"
        );
        assert_eq!(
            MemoryUri::root().join("resources").unwrap().as_str(),
            "viking://resources"
        );
        assert!(events.join("../x").is_err());
        assert_eq!(
            uri.dedup_root().unwrap().as_str(),
            "viking://user/a/memories"
        );
        assert_eq!(uri.name(), Some("x.md"));
    }
}
