//! The names every stored thing is filed under — a [`Tenant`] and a [`SessionId`] — parsed once
//! where they enter skald (an API key's record, a URL path, a command-line argument) and
//! trusted after: code that holds one knows it is well formed and does not check it again.
//!
//! Both are short ASCII names that start with a letter or digit, so neither `.`/`..` nor a name
//! that looks like a command-line option is ever one, and either can be a path component or a
//! SQL value without escaping.
//!
//! ```
//! use skald_core::ids::{SessionId, Tenant};
//!
//! let tenant = Tenant::parse("acme-corp").unwrap();
//! let session = SessionId::parse("claude-code-1b2c:3").unwrap();
//! assert_eq!((tenant.as_str(), session.as_str()), ("acme-corp", "claude-code-1b2c:3"));
//!
//! let refused = Tenant::parse("../etc").unwrap_err();
//! assert_eq!(refused.to_string(), "invalid tenant \"../etc\": a tenant name starts with a letter or digit");
//! assert!(SessionId::parse("").is_err());
//! ```

use std::fmt;

/// The longest tenant name accepted.
pub const MAX_TENANT_LEN: usize = 128;

/// The longest session id accepted (OpenClaw's UUIDs, and every id skald derives, are shorter).
pub const MAX_SESSION_ID_LEN: usize = 128;

/// Characters of a refused name shown in the error (a runaway value is not echoed whole).
const SHOWN_CHARS: usize = 80;

/// Which kind of name was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    /// A [`Tenant`].
    Tenant,
    /// A [`SessionId`].
    Session,
}

/// Why a name was refused: its kind, its first characters as given, and the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {} {shown:?}: {reason}", match kind { IdKind::Tenant => "tenant", IdKind::Session => "session id" })]
pub struct InvalidId {
    /// What was being parsed.
    pub kind: IdKind,
    /// The refused value, cut to its first 80 characters.
    pub shown: String,
    /// The rule it broke, as a sentence a user can act on.
    pub reason: &'static str,
}

/// A tenant: the owner every stored row belongs to, `[A-Za-z0-9._-]{1,128}` starting with a
/// letter or digit. Nothing of one tenant is visible to another.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tenant(String);

/// The tenant of a server that runs without keys, and of the CLI on its local store.
pub const DEFAULT_TENANT: &str = "default";

impl Default for Tenant {
    /// [`DEFAULT_TENANT`].
    fn default() -> Tenant {
        Tenant(DEFAULT_TENANT.to_owned())
    }
}

impl Tenant {
    /// Checks `name` against the rules in the type's docs.
    pub fn parse(name: impl Into<String>) -> Result<Tenant, InvalidId> {
        let name = name.into();
        check_tenant(&name)?;
        Ok(Tenant(name))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A session's id: `[A-Za-z0-9._:-]{1,128}` starting with a letter or digit. Unique within its
/// tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

impl SessionId {
    /// Checks `id` against the rules in the type's docs.
    pub fn parse(id: impl Into<String>) -> Result<SessionId, InvalidId> {
        let id = id.into();
        check_session_id(&id)?;
        Ok(SessionId(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! text_like {
    ($name:ident) => {
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = InvalidId;
            fn from_str(text: &str) -> Result<$name, InvalidId> {
                $name::parse(text)
            }
        }

        impl From<$name> for String {
            fn from(name: $name) -> String {
                name.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(
                deserializer: D,
            ) -> Result<$name, D::Error> {
                let text = String::deserialize(deserializer)?;
                $name::parse(text).map_err(serde::de::Error::custom)
            }
        }
    };
}

text_like!(Tenant);
text_like!(SessionId);

/// The tenant rules (see [`Tenant`]), for code that checks a name it does not keep.
pub fn check_tenant(name: &str) -> Result<(), InvalidId> {
    check(
        IdKind::Tenant,
        name,
        MAX_TENANT_LEN,
        |c| matches!(c, '.' | '_' | '-'),
        [
            "a tenant name must not be empty",
            "a tenant name has at most 128 characters",
            "a tenant name starts with a letter or digit",
            "a tenant name has only ASCII letters, digits, '.', '_' and '-'",
        ],
    )
}

/// The session-id rules (see [`SessionId`]), for code that checks an id it does not keep.
pub fn check_session_id(id: &str) -> Result<(), InvalidId> {
    check(
        IdKind::Session,
        id,
        MAX_SESSION_ID_LEN,
        |c| matches!(c, '.' | '_' | '-' | ':'),
        [
            "a session id must not be empty",
            "a session id has at most 128 characters",
            "a session id starts with a letter or digit",
            "a session id has only ASCII letters, digits, '.', '_', '-' and ':'",
        ],
    )
}

/// One rule set: not empty, at most `max_len` bytes, a letter or digit first, then letters,
/// digits and the `punctuation` allowed. `reasons` word each rule for the kind.
fn check(
    kind: IdKind,
    text: &str,
    max_len: usize,
    punctuation: impl Fn(char) -> bool,
    [empty, too_long, bad_first, bad_char]: [&'static str; 4],
) -> Result<(), InvalidId> {
    let invalid = |reason| InvalidId {
        kind,
        shown: text.chars().take(SHOWN_CHARS).collect(),
        reason,
    };
    let Some(first) = text.chars().next() else {
        return Err(invalid(empty));
    };
    if text.len() > max_len {
        return Err(invalid(too_long));
    }
    if !first.is_ascii_alphanumeric() {
        return Err(invalid(bad_first));
    }
    if !text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || punctuation(c))
    {
        return Err(invalid(bad_char));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn ordinary_names_parse_and_read_back() {
        for good in [
            "default",
            "acme-corp",
            "team_7",
            "a",
            "user.name",
            &"x".repeat(128),
        ] {
            assert_eq!(Tenant::parse(good).unwrap().as_str(), good);
        }
        for good in [
            "conv-0a1b",
            "claude-code-x:y",
            "0",
            "019a2b3c-uuid",
            &"s".repeat(128),
        ] {
            assert_eq!(SessionId::parse(good).unwrap().as_str(), good);
        }
    }

    #[test]
    fn bad_names_are_refused_with_the_rule_they_broke() {
        for (bad, reason) in [
            ("", "a tenant name must not be empty"),
            ("..", "a tenant name starts with a letter or digit"),
            ("-rf", "a tenant name starts with a letter or digit"),
            (
                "a b",
                "a tenant name has only ASCII letters, digits, '.', '_' and '-'",
            ),
            (
                "a:b",
                "a tenant name has only ASCII letters, digits, '.', '_' and '-'",
            ),
            (&"x".repeat(129), "a tenant name has at most 128 characters"),
        ] {
            let refused = Tenant::parse(bad).unwrap_err();
            assert_eq!(
                (refused.kind, refused.reason),
                (IdKind::Tenant, reason),
                "{bad:?}"
            );
        }
        for bad in ["", "/etc", "a/b", "é", &"s".repeat(129)] {
            assert_eq!(
                SessionId::parse(bad).unwrap_err().kind,
                IdKind::Session,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_default_tenant_follows_the_rules() {
        assert_eq!(Tenant::parse(DEFAULT_TENANT).unwrap(), Tenant::default());
    }

    #[test]
    fn a_refused_runaway_value_is_shown_cut() {
        let refused = SessionId::parse("/".repeat(10_000)).unwrap_err();
        assert_eq!(refused.shown.chars().count(), 80);
    }

    #[test]
    fn deserializing_checks_the_rules() {
        let tenant: Tenant = serde_json::from_str("\"acme\"").unwrap();
        assert_eq!(tenant, "acme");
        assert!(serde_json::from_str::<SessionId>("\"../x\"").is_err());
        assert_eq!(serde_json::to_string(&tenant).unwrap(), "\"acme\"");
    }
}
