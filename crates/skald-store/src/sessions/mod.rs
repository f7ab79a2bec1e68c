//! The session store: one append-only tree of OpenClaw entries per session, per tenant, with a
//! leaf pointer that selects the active branch and the model context rebuilt from it.
//!
//! What this module owns:
//! - [`SessionStore`], the interface the engine and the CLI use, and [`SqliteSessionStore`], the
//!   product behind it (the same database file as the ref store).
//! - The entry rules: entries are [`Entry`] values of pi/OpenClaw's session format (messages,
//!   compaction checkpoints, branch summaries, custom entries…) stored in append order; an id is
//!   unique in its session and a parent is stored before its children; **no entry is ever changed
//!   or removed** (the schema's triggers refuse an `UPDATE` or `DELETE`, whoever sends it). A
//!   change of history is a new branch: [`SessionStore::rewrite_branch`] forks where the first
//!   rewritten entry hangs, as OpenClaw's persistent truncation does, and the old branch stays
//!   readable.
//! - The context rule: [`SessionStore::context`] is pi's `buildSessionContext` + `convertToLlm`
//!   over the path from the leaf ([`Session::build_context`]), so an imported OpenClaw session
//!   gives the model what OpenClaw would give it.
//! - [`import`]: any transcript `skald_core::codec` reads, into the store, without duplicates.
//! - [`openclaw_store`]: OpenClaw 2026.9's own SQLite transcript store
//!   (`openclaw-agent.sqlite`), opened read-only and read back as session JSONL, one session at a
//!   time, for [`import`] and the engine's bootstrap.
//!
//! ```
//! use std::collections::{BTreeMap, HashMap, HashSet};
//! use skald_core::ids::{SessionId, Tenant};
//! use skald_core::session::{EntryKind, SessionHeader};
//! use skald_core::message::{Message, Role};
//! use skald_store::sessions::{NewSession, SessionStore, SqliteSessionStore};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = SqliteSessionStore::in_memory()?;
//! let (acme, demo) = (Tenant::parse("acme")?, SessionId::parse("demo")?);
//! let header = SessionHeader { id: demo.to_string(), ..SessionHeader::default() };
//! store.create(&acme, NewSession::new(header, "openclaw-session"))?;
//! let ask = store.append_message(&acme, &demo, Message::text(Role::User, "list the files"))?;
//! let reply = store.append_message(&acme, &demo, Message::text(Role::Assistant, "a.txt b.txt"))?;
//! assert_eq!(reply.parent_id.as_deref(), Some(ask.id.as_str()));
//! assert_eq!(store.context(&acme, &demo, None)?.len(), 2);
//!
//! // A rewrite is a new branch: the old entries stay, the leaf moves to the copy.
//! let rewrites = BTreeMap::from([(
//!     reply.id.clone(),
//!     EntryKind::Message(Message::text(Role::Assistant, "2 files")),
//! )]);
//! let rewrite = store.rewrite_branch(&acme, &demo, rewrites, "shorter answer")?;
//! assert_eq!(store.context(&acme, &demo, None)?[1].plain_text(), "2 files");
//! assert_eq!(store.context(&acme, &demo, Some(&reply.id))?[1].plain_text(), "a.txt b.txt");
//! assert_eq!(store.get(&acme, &demo)?.leaf_id, Some(rewrite.leaf_id));
//!
//! // Nothing crosses tenants.
//! assert!(store.get(&Tenant::parse("globex")?, &demo).is_err());
//! # Ok(())
//! # }
//! ```

pub mod import;
pub mod openclaw_store;
mod postgres;
mod sqlite;

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Value, json};
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Extra, Message};
use skald_core::session::{Entry, EntryKind, Session, SessionHeader};

use crate::StoreError;
use crate::error::{BackendError, BackendErrorKind, corrupt_message};

pub use postgres::PgSessionStore;
pub use sqlite::SqliteSessionStore;

/// `customType` of the marker entry [`SessionStore::rewrite_branch`] appends where a rewritten
/// branch starts. Its `data` is `{"reason": …, "rewrittenEntryIds": […]}`.
pub const BRANCH_REWRITE_CUSTOM_TYPE: &str = "skald.branch_rewrite";

/// The key, in a compaction entry's extra fields, of the context size after the compaction (pi's
/// entry has only `tokensBefore`).
pub const TOKENS_AFTER_KEY: &str = "tokensAfter";

/// The longest session id accepted.
pub use skald_core::ids::MAX_SESSION_ID_LEN;

/// The longest entry id accepted (pi writes 8 hex digits; other writers use UUIDs).
pub const MAX_ENTRY_ID_LEN: usize = 128;

/// What the engine and the CLI need from a session store. Every method takes the tenant; a
/// session of one tenant does not exist for any other. Writes are atomic and durable when they
/// return; a write that fails changes nothing.
pub trait SessionStore: Send + Sync {
    /// Creates a session with its first entries (possibly none) in one transaction. The session
    /// id is `session.header.id`. The leaf is the last entry.
    fn create(&self, tenant: &Tenant, session: NewSession) -> Result<SessionInfo, SessionError>;

    /// Appends entries as given (ids, parents, timestamps) and moves the leaf to the last one.
    /// Every id must be new to the session and every parent already stored or earlier in
    /// `entries`; otherwise nothing is appended and the error names the entry.
    fn append(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        entries: &[Entry],
    ) -> Result<(), SessionError>;

    /// Appends a message as a child of the leaf, with a fresh id, and moves the leaf to it.
    fn append_message(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        message: Message,
    ) -> Result<Entry, SessionError>;

    /// Appends a compaction entry as a child of the leaf and moves the leaf to it. The first kept
    /// entry must be on the active path.
    fn append_compaction(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        checkpoint: CompactionCheckpoint,
    ) -> Result<Entry, SessionError>;

    /// Rewrites entries of the active path as a new branch: from the parent of the first
    /// rewritten entry, a [`BRANCH_REWRITE_CUSTOM_TYPE`] marker, then a copy of every entry of the
    /// path from the first rewritten one to the leaf, with the replacements; the leaf moves to the
    /// last copy. The old branch is untouched. Every id in `rewrites` must be on the active path.
    fn rewrite_branch(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        rewrites: BTreeMap<String, EntryKind>,
        reason: &str,
    ) -> Result<BranchRewrite, SessionError>;

    /// Moves the leaf to a stored entry, or to `None` (the next append starts a new root).
    fn set_leaf(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<(), SessionError>;

    /// What is known about one session, without its entries.
    fn get(&self, tenant: &Tenant, session: &SessionId) -> Result<SessionInfo, SessionError>;

    /// The tenant's sessions, most recently updated first.
    fn list(&self, tenant: &Tenant) -> Result<Vec<SessionInfo>, SessionError>;

    /// Sets the session's [`SessionSwitches`] (a person's pauses, kept with the session, not in
    /// its entry tree) and returns the session as it is after. Not an activity: the session's
    /// `updated_at_ms` stays.
    fn set_switches(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        switches: SessionSwitches,
    ) -> Result<SessionInfo, SessionError>;

    /// The whole session: header, every entry in append order, and the stored leaf.
    fn load(&self, tenant: &Tenant, session: &SessionId) -> Result<Session, SessionError>;

    /// The entries appended after the first `skip`, in append order. Sessions are append-only,
    /// so a reader that holds the first `skip` entries catches up with this instead of reading
    /// the whole session again.
    fn entries_after(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        skip: u64,
    ) -> Result<Vec<Entry>, SessionError> {
        let loaded = self.load(tenant, session)?;
        let skip = usize::try_from(skip).unwrap_or(usize::MAX);
        Ok(loaded.entries().get(skip..).unwrap_or_default().to_vec())
    }

    /// Every entry, in append order.
    fn entries(&self, tenant: &Tenant, session: &SessionId) -> Result<Vec<Entry>, SessionError> {
        Ok(self.load(tenant, session)?.entries().to_vec())
    }

    /// The entries from the root to `leaf` (`None`: the stored leaf), root first.
    fn path(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<Vec<Entry>, SessionError> {
        let loaded = self.load(tenant, session)?;
        check_leaf(&loaded, session, leaf)?;
        Ok(loaded.path_to(leaf).into_iter().cloned().collect())
    }

    /// The messages the model sees from `leaf` (`None`: the stored leaf): OpenClaw's
    /// `buildSessionContext` + `convertToLlm` ([`Session::build_context`]).
    fn context(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<Vec<Message>, SessionError> {
        let loaded = self.load(tenant, session)?;
        check_leaf(&loaded, session, leaf)?;
        Ok(loaded.build_context(leaf))
    }
}

/// An explicit leaf must be an entry of the session: an unknown one is an error, not an empty
/// context.
fn check_leaf(loaded: &Session, session: &str, leaf: Option<&str>) -> Result<(), SessionError> {
    match leaf {
        Some(id) if loaded.entry(id).is_none() => Err(SessionError::UnknownEntry {
            session: session.to_owned(),
            id: id.to_owned(),
        }),
        Some(_) | None => Ok(()),
    }
}

/// A session to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    /// The session header; its `id` is the session id.
    pub header: SessionHeader,
    /// The format the session came from (`openclaw-session`, `claude-code`…; see
    /// `skald_core::codec::Format::name`).
    pub source_format: String,
    /// Where it came from (a file path), for listings.
    pub source: Option<String>,
    /// A human title for listings.
    pub title: Option<String>,
    /// The first entries, under the same rules as [`SessionStore::append`].
    pub entries: Vec<Entry>,
}

impl NewSession {
    /// A session with no entries, no source and no title.
    pub fn new(header: SessionHeader, source_format: impl Into<String>) -> NewSession {
        NewSession {
            header,
            source_format: source_format.into(),
            source: None,
            title: None,
            entries: Vec::new(),
        }
    }
}

/// What is stored about a session, besides its entries.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    /// The tenant the session belongs to.
    pub tenant: String,
    /// The session id (`header.id`), unique within the tenant.
    pub id: String,
    /// The session header as it was created.
    pub header: SessionHeader,
    /// The format the session came from ([`NewSession::source_format`]).
    pub source_format: String,
    /// Where it came from (a file path); `None` when the creator gave none.
    pub source: Option<String>,
    /// A human title for listings; `None` when the creator gave none.
    pub title: Option<String>,
    /// The entry the active branch ends at; `None` for an empty session or after
    /// `set_leaf(None)`.
    pub leaf_id: Option<String>,
    /// Entries of every branch.
    pub entry_count: u64,
    /// Entries of type `message`, of every branch.
    pub message_count: u64,
    /// Milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// The last append or leaf move, in milliseconds since the Unix epoch.
    pub updated_at_ms: i64,
    /// What a person paused for this session (all off for a new one).
    pub switches: SessionSwitches,
}

/// Switches a person sets on one session (the dashboard's pause buttons, `PUT
/// /v1/sessions/{id}/switches`), honoured by the engine on every call of the session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionSwitches {
    /// No compaction of the session (threshold, overflow, budget or asked for) until unpaused:
    /// each is skipped with the reason `paused`.
    pub pause_compaction: bool,
    /// The offload stage does not run: the model sees every tool output and argument as it is
    /// (what truncation and pruning do is unchanged).
    pub pause_offload: bool,
}

/// A compaction to record: the summary that replaces the history before `first_kept_entry_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionCheckpoint {
    /// The summary the model sees in place of the history before the first kept entry.
    pub summary: String,
    /// The first entry of the active path the model still sees after the summary; `None`
    /// keeps no entry from before the checkpoint (everything was summarised).
    pub first_kept_entry_id: Option<String>,
    /// The context size before the compaction, in tokens (pi's `tokensBefore`).
    pub tokens_before: u64,
    /// The context size after the compaction, in tokens; stored in the entry's extra fields as
    /// [`TOKENS_AFTER_KEY`].
    pub tokens_after: u64,
    /// Host-only data (read and modified files…); never shown to a model.
    pub details: Option<Value>,
}

/// The context size a compaction entry recorded after compacting ([`TOKENS_AFTER_KEY`]).
pub fn tokens_after(entry: &Entry) -> Option<u64> {
    entry.extra.get(TOKENS_AFTER_KEY).and_then(Value::as_u64)
}

/// What [`SessionStore::rewrite_branch`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchRewrite {
    /// The [`BRANCH_REWRITE_CUSTOM_TYPE`] entry the new branch starts with.
    pub marker_id: String,
    /// Where the new branch hangs (the parent of the first rewritten entry; `None`: a new root).
    pub fork_parent_id: Option<String>,
    /// Original id → id of its copy on the new branch, for every copied entry, in path order.
    pub copies: Vec<(String, String)>,
    /// The new leaf: the copy of the old leaf.
    pub leaf_id: String,
}

/// Why a session operation failed. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A session id given as text (a new session's header, an imported transcript's) is empty,
    /// too long, or has characters outside `[A-Za-z0-9._:-]`.
    #[error("invalid session id {shown:?}: {reason}")]
    InvalidSessionId {
        /// The refused id, cut to its first 80 characters.
        shown: String,
        /// The rule it broke, as a sentence a user can act on.
        reason: &'static str,
    },

    /// No such session for this tenant (sessions of other tenants are never visible).
    #[error(
        "no session {id:?} for tenant {tenant:?}: import a transcript first, or list the stored \
         sessions with `skald sessions`"
    )]
    NotFound {
        /// The tenant the lookup was made for.
        tenant: String,
        /// The session id looked up.
        id: String,
    },

    /// `create` of a session id the tenant already has.
    #[error("session {id:?} already exists for tenant {tenant:?}")]
    AlreadyExists {
        /// The tenant the session was to be created for.
        tenant: String,
        /// The session id it already has.
        id: String,
    },

    /// An entry id is empty, too long or has control characters.
    #[error("invalid entry id {shown:?}: {reason}")]
    InvalidEntryId {
        /// The refused id, cut to its first 80 characters.
        shown: String,
        /// The rule it broke, as a sentence a user can act on.
        reason: &'static str,
    },

    /// An appended entry reuses an id of the session (or of the same batch).
    #[error("session {session:?}: entry id {id:?} is already used")]
    DuplicateEntryId {
        /// The session appended to.
        session: String,
        /// The entry id used twice.
        id: String,
    },

    /// An appended entry's parent is neither stored nor earlier in the batch.
    #[error(
        "session {session:?}: entry {id:?} names parent {parent:?}, which is not an entry of the \
         session (a parent is stored before its children)"
    )]
    UnknownParent {
        /// The session appended to.
        session: String,
        /// The id of the entry whose parent is missing.
        id: String,
        /// The parent id it names.
        parent: String,
    },

    /// An entry named by the caller does not exist in the session.
    #[error("session {session:?} has no entry {id:?}")]
    UnknownEntry {
        /// The session looked in.
        session: String,
        /// The entry id no entry of the session has.
        id: String,
    },

    /// An entry that must be on the active branch is on another one.
    #[error(
        "session {session:?}: entry {id:?} is not on the active branch (which ends at {})",
        leaf.as_deref().unwrap_or("no entry")
    )]
    NotOnActivePath {
        /// The session looked in.
        session: String,
        /// The entry that is off the active branch.
        id: String,
        /// The stored leaf the active branch ends at; `None` when the session has no leaf.
        leaf: Option<String>,
    },

    /// An entry cannot be stored as it is (for example an unknown entry kind without a `type`).
    #[error("entry {id:?}: {reason}")]
    InvalidEntry {
        /// The refused entry's id.
        id: String,
        /// Why it cannot be stored.
        reason: String,
    },

    /// `rewrite_branch` with no rewrites.
    #[error("rewrite_branch needs at least one entry to rewrite")]
    NothingToRewrite,

    /// The data directory cannot be created, or the schema is newer than this build.
    #[error(transparent)]
    Store(#[from] StoreError),

    /// The storage backend failed (disk full, permissions, locked for longer than the busy
    /// timeout, …); [`BackendError::kind`] says which of these it was.
    #[error("session store: {action} failed: {source}")]
    Storage {
        /// What the store was doing when the backend failed, e.g. `"appending a session entry"`.
        action: &'static str,
        /// The backend's failure, with its [`BackendErrorKind`].
        #[source]
        source: BackendError,
    },

    /// Stored rows do not decode (damaged file, or edited by hand).
    #[error("session store data is corrupt: {0}")]
    Corrupt(String),
}

impl SessionError {
    /// Wraps a backend error, telling damage apart from ordinary failures.
    pub(crate) fn backend(action: &'static str, source: BackendError) -> SessionError {
        match source.kind() {
            BackendErrorKind::Corrupt => SessionError::Corrupt(corrupt_message(action, &source)),
            BackendErrorKind::Busy | BackendErrorKind::Full | BackendErrorKind::Other => {
                SessionError::Storage { action, source }
            }
        }
    }
}

/// Checks a session id by [`skald_core::ids::SessionId`]'s rules: 1 to [`MAX_SESSION_ID_LEN`]
/// characters from `[A-Za-z0-9._:-]`, starting with a letter or digit. OpenClaw's UUIDs and the
/// ids [`import`] derives all qualify.
pub fn validate_session_id(id: &str) -> Result<(), SessionError> {
    skald_core::ids::check_session_id(id).map_err(|refused| SessionError::InvalidSessionId {
        shown: refused.shown,
        reason: refused.reason,
    })
}

/// Parses a session id read from untrusted text (a transcript's header) into a [`SessionId`], with
/// the error [`validate_session_id`] gives.
pub(crate) fn parse_session_id(id: &str) -> Result<SessionId, SessionError> {
    SessionId::parse(id).map_err(|refused| SessionError::InvalidSessionId {
        shown: refused.shown,
        reason: refused.reason,
    })
}

/// Checks an entry id: 1 to [`MAX_ENTRY_ID_LEN`] bytes, no whitespace or control characters.
pub fn validate_entry_id(id: &str) -> Result<(), SessionError> {
    let invalid = |reason| SessionError::InvalidEntryId {
        shown: id.chars().take(80).collect(),
        reason,
    };
    if id.is_empty() {
        return Err(invalid("an entry id must not be empty"));
    }
    if id.len() > MAX_ENTRY_ID_LEN {
        return Err(invalid("an entry id has at most 128 bytes"));
    }
    if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid(
            "an entry id has no whitespace or control characters",
        ));
    }
    Ok(())
}

impl CompactionCheckpoint {
    /// The checkpoint as a `compaction` entry: its kind, its extra fields (the tokens after),
    /// and the first kept entry, which a store must find on the leaf's path before appending.
    pub(crate) fn into_entry_parts(self) -> (EntryKind, Extra, Option<String>) {
        let CompactionCheckpoint {
            summary,
            first_kept_entry_id,
            tokens_before,
            tokens_after,
            details,
        } = self;
        let kept = first_kept_entry_id.clone();
        let mut extra = Extra::new();
        extra.insert(TOKENS_AFTER_KEY.to_owned(), Value::from(tokens_after));
        let kind = EntryKind::Compaction {
            summary,
            first_kept_entry_id,
            tokens_before: Some(tokens_before),
            details,
            from_hook: None,
        };
        (kind, extra, kept)
    }
}

/// The entries a branch rewrite appends, whatever the backend: a
/// [`BRANCH_REWRITE_CUSTOM_TYPE`] marker under `fork_parent_id`, then a copy of every entry of
/// `later` (the path from the first rewritten entry to the leaf), rewritten where `rewrites`
/// says, each the child of the one before. `fresh_id` gives an id unused in the session and
/// not among those it is shown.
pub(crate) fn branch_rewrite_batch(
    later: &[&Entry],
    fork_parent_id: Option<String>,
    rewrites: &BTreeMap<String, EntryKind>,
    reason: &str,
    timestamp: &str,
    mut fresh_id: impl FnMut(&HashSet<String>) -> Result<String, SessionError>,
) -> Result<(Vec<Entry>, BranchRewrite), SessionError> {
    let rewritten: Vec<&str> = later
        .iter()
        .filter(|entry| rewrites.contains_key(&entry.id))
        .map(|entry| entry.id.as_str())
        .collect();
    let mut taken = HashSet::new();
    let marker_id = fresh_id(&taken)?;
    taken.insert(marker_id.clone());
    let mut batch = vec![Entry {
        id: marker_id.clone(),
        parent_id: fork_parent_id.clone(),
        timestamp: timestamp.to_owned(),
        kind: EntryKind::Custom {
            custom_type: BRANCH_REWRITE_CUSTOM_TYPE.to_owned(),
            data: Some(json!({ "reason": reason, "rewrittenEntryIds": rewritten })),
        },
        extra: Extra::new(),
    }];
    let mut copies: Vec<(String, String)> = Vec::with_capacity(later.len());
    let mut new_ids: HashMap<&str, String> = HashMap::new();
    let mut parent = marker_id.clone();
    for original in later {
        let id = fresh_id(&taken)?;
        taken.insert(id.clone());
        let kind = rewrites
            .get(&original.id)
            .cloned()
            .unwrap_or_else(|| original.kind.clone());
        batch.push(Entry {
            id: id.clone(),
            parent_id: Some(parent),
            timestamp: timestamp.to_owned(),
            kind: point_at_copies(kind, &new_ids),
            extra: original.extra.clone(),
        });
        new_ids.insert(&original.id, id.clone());
        copies.push((original.id.clone(), id.clone()));
        parent = id;
    }
    Ok((
        batch,
        BranchRewrite {
            marker_id,
            fork_parent_id,
            copies,
            leaf_id: parent,
        },
    ))
}

/// Makes a copied entry that names another copied entry name its copy: a compaction must keep
/// from the copy (the original is on the old branch, off the new path), so must a reset, and a
/// label follows it.
fn point_at_copies(kind: EntryKind, new_ids: &HashMap<&str, String>) -> EntryKind {
    match kind {
        EntryKind::Compaction {
            summary,
            first_kept_entry_id,
            tokens_before,
            details,
            from_hook,
        } => EntryKind::Compaction {
            summary,
            first_kept_entry_id: first_kept_entry_id
                .map(|kept| new_ids.get(kept.as_str()).cloned().unwrap_or(kept)),
            tokens_before,
            details,
            from_hook,
        },
        EntryKind::Reset {
            reason,
            first_kept_entry_id,
        } => EntryKind::Reset {
            reason,
            first_kept_entry_id: first_kept_entry_id
                .map(|kept| new_ids.get(kept.as_str()).cloned().unwrap_or(kept)),
        },
        EntryKind::Label { target_id, label } => EntryKind::Label {
            target_id: new_ids
                .get(target_id.as_str())
                .cloned()
                .unwrap_or(target_id),
            label,
        },
        other @ (EntryKind::Message(_)
        | EntryKind::BranchSummary { .. }
        | EntryKind::Custom { .. }
        | EntryKind::CustomMessage { .. }
        | EntryKind::ThinkingLevelChange { .. }
        | EntryKind::ModelChange { .. }
        | EntryKind::SessionInfo { .. }
        | EntryKind::Other(_)) => other,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// The store traits take a [`SessionId`](skald_core::ids::SessionId) and do not check it
    /// again: the ids the stores used to refuse are refused where they are parsed, in the same
    /// words [`validate_session_id`] (still used for ids that arrive as text) gives.
    #[test]
    fn the_parse_edge_refuses_what_the_stores_refused() {
        let long = "s".repeat(129);
        for bad in [
            "",
            "../etc/passwd",
            "a b",
            "-leading-dash",
            "a/b",
            long.as_str(),
        ] {
            assert_eq!(
                skald_core::ids::SessionId::parse(bad)
                    .unwrap_err()
                    .to_string(),
                validate_session_id(bad).unwrap_err().to_string(),
                "{bad:?}"
            );
        }
    }
}
