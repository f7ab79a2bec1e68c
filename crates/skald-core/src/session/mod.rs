//! The session model: pi's append-only entry tree, the leaf that selects a branch, and the
//! context OpenClaw builds from it for the model. The file format that stores a session (a JSONL
//! header line, then one entry per line) is [`crate::codec::openclaw`]; this module is what the
//! lines mean, and the engine and the session store work with it directly.
//!
//! - A [`Session`] is a [`SessionHeader`] and its [`Entry`]s in append order. Entries are never
//!   edited or removed: each names its parent (`parent_id`, `None` for a root), so together they
//!   form a tree, and every earlier state of the conversation is still in it.
//! - The leaf ([`Session::leaf_id`]) is where the next append goes: the last entry appended,
//!   unless [`Session::set_leaf`] moved it to an earlier entry, which starts a branch.
//! - The active path ([`Session::path_to`]) runs from the root to the leaf; the other branches
//!   are history.
//! - [`Session::build_context`] turns the active path into the messages the model sees, as
//!   OpenClaw does (pi's `buildSessionContext`, then [`convert_to_llm`] for every message).
//! - Checkpoints: a compaction ([`EntryKind::Compaction`]) is an entry like any other; the last
//!   one on the path stands in for everything before its `first_kept_entry_id`, as a summary
//!   wrapped in [`COMPACTION_SUMMARY_PREFIX`] / [`COMPACTION_SUMMARY_SUFFIX`]. A branch summary
//!   ([`EntryKind::BranchSummary`]) says what happened on a branch the conversation came back
//!   from. Compacting appends; it never rewrites the tree.
//!
//! - Version 4 (OpenClaw 2026.9): a `reset` entry ([`EntryKind::Reset`]) is a boundary like a
//!   compaction, without a summary; a `leaf` record ([`EntryKind::leaf_control`]) moves the leaf
//!   inside the file, and once a session has one, its leaf and paths follow OpenClaw's
//!   navigation scan (`navigation`).
//!
//! Submodules, private (every item has one path: here): `entry` ([`SessionHeader`], [`Entry`],
//! [`EntryKind`] and its accessors, [`LeafControl`], [`CURRENT_VERSION`]), `navigation`
//! (OpenClaw's version-4 leaf and parent normalisation), `tree` ([`Session`]'s tree: reading
//! it, the leaf, paths, ids, appends; [`SessionEditError`]) and `context`
//! ([`Session::build_context`], [`convert_to_llm`] and the summary wrappers).
//!
//! ```
//! use skald_core::message::{Message, Role};
//! use skald_core::session::{Session, SessionHeader};
//!
//! let mut session = Session::new(SessionHeader::default());
//! let question = session.fresh_id(0);
//! let user = Message::text(Role::User, "hi");
//! session.append_message(&question, "2025-01-01T00:00:00Z", user).unwrap();
//! let answer = session.fresh_id(0);
//! let assistant = Message::text(Role::Assistant, "hello");
//! session.append_message(&answer, "2025-01-01T00:00:01Z", assistant).unwrap();
//!
//! // Branch: move the leaf back to the question and answer again; the first answer stays.
//! session.set_leaf(Some(&question)).unwrap();
//! let retry = session.fresh_id(0);
//! let again = Message::text(Role::Assistant, "hello again");
//! session.append_message(&retry, "2025-01-01T00:00:02Z", again).unwrap();
//! assert_eq!(session.entries().len(), 3);
//! assert_eq!(session.children(&question).len(), 2);
//! let context = session.build_context(None);
//! assert_eq!(context.len(), 2);
//! assert_eq!(context[1].plain_text(), "hello again");
//! ```

mod context;
mod entry;
mod navigation;
mod tree;

pub use context::{
    BRANCH_SUMMARY_PREFIX, BRANCH_SUMMARY_SUFFIX, COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX, context_appended, convert_to_llm, session_context,
};
pub use entry::{CURRENT_VERSION, Entry, EntryKind, LeafControl, SessionHeader};
pub use tree::{Session, SessionEditError};
