//! [`Session`]: the append-only entry tree and the leaf pointer.
//!
//! Entries are kept in append order and never edited or removed; each names its parent, so they
//! form a tree. The leaf is the entry the next append hangs under: the last entry appended, unless
//! [`Session::set_leaf`] moved it back, which is how a branch starts (the old branch stays in the
//! tree). The active path is the walk from a leaf up to its root ([`Session::path_to`]), root
//! first; it is what [`Session::build_context`] reads. New ids are 8 lowercase hex digits, chosen
//! by the caller ([`Session::fresh_id`]): core has no randomness.
//!
//! Version 4: once a session holds a valid `leaf` record, the leaf and the parents paths follow
//! are OpenClaw's, from the scan in `navigation` (a `reset` and stale parents normalise where an
//! entry really hangs); without one, the raw `parent_id`s and the last entry, as before.
//!
//! The tree is not validated here: a damaged file (duplicate ids, dangling parents, cycles) still
//! gives a session whose every walk ends; [`crate::codec::openclaw::decode_session`] reports the
//! damage line by line.

use std::collections::{HashMap, HashSet};

use super::navigation::Navigation;
use super::{Entry, EntryKind, SessionHeader};
use crate::message::{Extra, Message};

/// Why an edit of a [`Session`] was refused; the session is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionEditError {
    /// The id is not 8 lowercase hex digits, the form every new entry id takes.
    #[error("entry id {id:?}: expected exactly 8 lowercase hex digits")]
    InvalidId {
        /// The id that was refused.
        id: String,
    },
    /// Another entry of the session already has the id.
    #[error("entry id {id:?} is already used in this session")]
    DuplicateId {
        /// The id that was refused.
        id: String,
    },
    /// The id names no entry of the session.
    #[error("no entry has id {id:?}")]
    UnknownEntry {
        /// The id that was looked for.
        id: String,
    },
}

/// A session: header, entries in file order, and the leaf pointer that selects a branch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Session {
    /// What the session is: id, format version, working directory, parent session.
    pub header: SessionHeader,
    entries: Vec<Entry>,
    /// Entry id → position in `entries`. With duplicate ids the later entry wins, as in pi.
    index: HashMap<String, usize>,
    /// `None`: no entries, or the leaf was reset so the next append starts a new root.
    leaf: Option<String>,
    /// OpenClaw's version-4 navigation over the entries pushed so far.
    navigation: Navigation,
}

impl Session {
    /// An empty session.
    pub fn new(header: SessionHeader) -> Session {
        Session {
            header,
            ..Session::default()
        }
    }

    /// A session from entries already read (for example from a store), in append order. The
    /// leaf is the last entry. The tree is not checked here;
    /// [`crate::codec::openclaw::decode_session`] reports problems.
    pub fn from_entries(header: SessionHeader, entries: Vec<Entry>) -> Session {
        let mut session = Session::new(header);
        session.extend_from_entries(entries);
        session
    }

    /// Adds entries read from a store after the ones already here, in append order, as
    /// [`Session::from_entries`] would have: a reader catches up with an append-only session
    /// without reading it again. The leaf is the last entry.
    pub fn extend_from_entries(&mut self, entries: Vec<Entry>) {
        for entry in entries {
            self.push_entry(entry);
        }
    }

    /// All entries, in file (append) order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entry with this id (the later one when a damaged file repeats an id).
    pub fn entry(&self, id: &str) -> Option<&Entry> {
        self.index
            .get(id)
            .and_then(|&position| self.entries.get(position))
    }

    /// Entries whose parent is `id`, in append order.
    pub fn children(&self, id: &str) -> Vec<&Entry> {
        self.entries
            .iter()
            .filter(|entry| entry.parent_id.as_deref() == Some(id))
            .collect()
    }

    /// The current leaf: the last entry appended, unless [`Session::set_leaf`] moved it. In a
    /// session with `leaf` records, the leaf OpenClaw's navigation selects instead.
    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf.as_deref()
    }

    /// Moves the leaf to an existing entry (the next append branches from there), or to `None`
    /// (the next append starts a new root).
    pub fn set_leaf(&mut self, id: Option<&str>) -> Result<(), SessionEditError> {
        match id {
            Some(id) if !self.index.contains_key(id) => {
                Err(SessionEditError::UnknownEntry { id: id.to_owned() })
            }
            Some(id) => {
                self.leaf = Some(id.to_owned());
                Ok(())
            }
            None => {
                self.leaf = None;
                Ok(())
            }
        }
    }

    /// The entries from the root to `leaf` (`None`: the current leaf), root first.
    ///
    /// An unknown leaf gives an empty path. The walk stops at a parent that does not exist or
    /// that closes a cycle, so every input gives a finite path. In a session with `leaf` records
    /// the walk follows the normalised parents ([`Session::parent_of`]) and leaves the `leaf`
    /// records out, as OpenClaw's `selectSessionTranscriptTreePathNodes` does (a cycle there
    /// gives an empty path).
    pub fn path_to(&self, leaf: Option<&str>) -> Vec<&Entry> {
        let start = match leaf {
            Some(id) => Some(id),
            None => self.leaf.as_deref(),
        };
        if self.navigation.has_leaf_control() {
            return self.navigated_path(start);
        }
        let mut position = start.and_then(|id| self.index.get(id).copied());
        let mut seen = HashSet::new();
        let mut path = Vec::new();
        while let Some(at) = position {
            if !seen.insert(at) {
                break;
            }
            let Some(entry) = self.entries.get(at) else {
                break;
            };
            path.push(entry);
            position = entry
                .parent_id
                .as_deref()
                .and_then(|parent| self.index.get(parent).copied());
        }
        path.reverse();
        path
    }

    /// The entry `entry` hangs under on a path: its `parent_id`, or in a session with `leaf`
    /// records the parent OpenClaw's navigation normalised it to.
    pub fn parent_of<'a>(&'a self, entry: &'a Entry) -> Option<&'a str> {
        if !self.navigation.has_leaf_control() {
            return entry.parent_id.as_deref();
        }
        match self.navigation.node(&entry.id) {
            Some((parent, _)) => parent,
            None => entry.parent_id.as_deref(),
        }
    }

    /// True when the session holds a valid version-4 `leaf` record, so its paths follow
    /// OpenClaw's navigation rather than the raw parents.
    pub fn is_leaf_controlled(&self) -> bool {
        self.navigation.has_leaf_control()
    }

    fn navigated_path(&self, start: Option<&str>) -> Vec<&Entry> {
        let mut path = Vec::new();
        let mut seen = HashSet::new();
        let mut current = start;
        while let Some(id) = current {
            if !seen.insert(id) {
                return Vec::new();
            }
            let (Some(entry), Some((parent, leaf_control))) =
                (self.entry(id), self.navigation.node(id))
            else {
                break;
            };
            if !leaf_control {
                path.push(entry);
            }
            current = parent;
        }
        path.reverse();
        path
    }

    /// True when `id` is 8 lowercase hex digits and no entry uses it.
    pub fn is_fresh_id(&self, id: &str) -> bool {
        is_entry_id(id) && !self.index.contains_key(id)
    }

    /// An unused 8-hex-digit id derived from `candidate` (the caller's random number): the
    /// candidate itself, or the next free value after it. Core has no randomness of its own.
    pub fn fresh_id(&self, candidate: u32) -> String {
        let mut value = candidate;
        // At most `entries.len()` ids are taken, so this finds a free one within that many steps.
        for _ in 0..=self.entries.len() {
            let id = format!("{value:08x}");
            if !self.index.contains_key(&id) {
                return id;
            }
            value = value.wrapping_add(1);
        }
        format!("{value:08x}")
    }

    /// Appends an entry with the caller's `id` as a child of the leaf and moves the leaf to it.
    /// The id must be 8 lowercase hex digits and unused (see [`Session::fresh_id`]).
    pub fn append(
        &mut self,
        id: &str,
        timestamp: impl Into<String>,
        kind: EntryKind,
    ) -> Result<&Entry, SessionEditError> {
        if !is_entry_id(id) {
            return Err(SessionEditError::InvalidId { id: id.to_owned() });
        }
        if self.index.contains_key(id) {
            return Err(SessionEditError::DuplicateId { id: id.to_owned() });
        }
        let entry = Entry {
            id: id.to_owned(),
            parent_id: self.leaf.clone(),
            timestamp: timestamp.into(),
            kind,
            extra: Extra::new(),
        };
        let position = self.push_entry(entry);
        self.entries
            .get(position)
            .ok_or_else(|| SessionEditError::UnknownEntry { id: id.to_owned() })
    }

    /// [`Session::append`] for a message entry.
    pub fn append_message(
        &mut self,
        id: &str,
        timestamp: impl Into<String>,
        message: Message,
    ) -> Result<&Entry, SessionEditError> {
        self.append(id, timestamp, EntryKind::Message(message))
    }

    /// Adds a decoded entry as it is (its parent already set) and makes it the leaf. The codec's
    /// reader adds entries this way, unchecked, and reports the tree's problems itself.
    pub(crate) fn push_entry(&mut self, entry: Entry) -> usize {
        let position = self.entries.len();
        self.index.insert(entry.id.clone(), position);
        self.navigation.push(&entry);
        // Version 4: a `leaf` record (or an append beside the conversation) need not move the
        // leaf to itself; OpenClaw's scan says where it is.
        self.leaf = if self.navigation.has_leaf_control() {
            self.navigation.leaf().map(str::to_owned)
        } else {
            Some(entry.id.clone())
        };
        self.entries.push(entry);
        position
    }

    /// The position in [`Session::entries`] of the entry `id` names (with duplicate ids, the
    /// later entry). For the codec's tree checks.
    pub(crate) fn position(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }
}

fn is_entry_id(id: &str) -> bool {
    id.len() == 8
        && id
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}
