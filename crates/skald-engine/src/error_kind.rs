//! [`ErrorKind`]: what a failure of a use case means for the caller that asked, whichever layer
//! it came from (a store, a plan, the memory operations). The edges map a kind to their own
//! terms — the server to an HTTP status, the CLI to its message — and never look inside a store's
//! error, so a new store failure is classified once, here.

use skald_store::StoreError;
use skald_store::memories::MemoryError;
use skald_store::sessions::SessionError;
use skald_store::sessions::import::ImportError;

use crate::EngineError;
use crate::memory::manage::ManageError;
use crate::replay::ReplayError;

/// What a failure means for the caller (see the module docs). The error's own message says
/// what exactly went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed or out of range (an id, a field, a plan that cannot be made);
    /// nothing was changed.
    BadInput,
    /// The session does not exist.
    SessionNotFound {
        /// The session asked for.
        id: String,
    },
    /// No memory at that URI.
    MemoryNotFound {
        /// The URI asked for.
        uri: String,
    },
    /// Something else named does not exist (an entry, a ref, a forgotten memory).
    NotFound,
    /// It existed and has expired.
    Gone,
    /// It conflicts with what is stored (it exists already, it is not on the active path, the
    /// file is another session's).
    Conflict,
    /// Over a size limit.
    TooLarge,
    /// A service skald called for it (an embedder) failed.
    Upstream,
    /// skald's own failure (a store, a setting): `what` names the part that failed.
    Internal {
        /// The part that failed (`the session store`, `the memory store`, `the policy`…).
        what: &'static str,
    },
}

/// An error that knows what it means for the caller.
pub trait Classify: std::fmt::Display {
    /// What the failure means for the caller.
    fn kind(&self) -> ErrorKind;
}

impl Classify for StoreError {
    fn kind(&self) -> ErrorKind {
        match self {
            StoreError::InvalidId(_) => ErrorKind::BadInput,
            StoreError::NotFound { .. } => ErrorKind::NotFound,
            StoreError::Expired { .. } => ErrorKind::Gone,
            StoreError::InvalidSettings(_)
            | StoreError::Storage { .. }
            | StoreError::Io { .. }
            | StoreError::UnsupportedSchema { .. }
            | StoreError::Corrupt(_) => ErrorKind::Internal { what: "the store" },
        }
    }
}

impl Classify for SessionError {
    fn kind(&self) -> ErrorKind {
        match self {
            SessionError::InvalidSessionId { .. }
            | SessionError::InvalidEntryId { .. }
            | SessionError::InvalidEntry { .. }
            | SessionError::NothingToRewrite => ErrorKind::BadInput,
            SessionError::NotFound { id, .. } => ErrorKind::SessionNotFound { id: id.clone() },
            SessionError::UnknownEntry { .. } => ErrorKind::NotFound,
            SessionError::AlreadyExists { .. }
            | SessionError::DuplicateEntryId { .. }
            | SessionError::UnknownParent { .. }
            | SessionError::NotOnActivePath { .. } => ErrorKind::Conflict,
            SessionError::Store(store) => store.kind(),
            SessionError::Storage { .. } | SessionError::Corrupt(_) => ErrorKind::Internal {
                what: "the session store",
            },
        }
    }
}

impl Classify for ImportError {
    fn kind(&self) -> ErrorKind {
        match self {
            ImportError::Decode(_) | ImportError::InvalidTree { .. } => ErrorKind::BadInput,
            ImportError::Session(session) => session.kind(),
            ImportError::Conflict { .. } | ImportError::FormatMismatch { .. } => {
                ErrorKind::Conflict
            }
        }
    }
}

impl Classify for MemoryError {
    fn kind(&self) -> ErrorKind {
        match self {
            MemoryError::InvalidUri(_) | MemoryError::InvalidInput { .. } => ErrorKind::BadInput,
            MemoryError::NotFound { uri, .. } => ErrorKind::MemoryNotFound {
                uri: uri.to_string(),
            },
            MemoryError::Forgotten { .. } => ErrorKind::NotFound,
            MemoryError::AlreadyExists { .. }
            | MemoryError::PathConflict { .. }
            | MemoryError::DimensionMismatch { .. }
            // Only a client that left gets this, and it is gone: nothing to tell it.
            | MemoryError::Cancelled => ErrorKind::Conflict,
            MemoryError::InBatch { source, .. } => source.kind(),
            MemoryError::Store(store) => store.kind(),
            MemoryError::InvalidSettings(_)
            | MemoryError::Storage { .. }
            | MemoryError::Corrupt(_) => ErrorKind::Internal {
                what: "the memory store",
            },
        }
    }
}

impl Classify for ManageError {
    fn kind(&self) -> ErrorKind {
        match self {
            ManageError::Store(store) => store.kind(),
            ManageError::Uri(_) | ManageError::InvalidInput { .. } => ErrorKind::BadInput,
            ManageError::TooManyChunks { .. } => ErrorKind::TooLarge,
            ManageError::DirectoryWithoutOverview { .. } | ManageError::NothingToForget { .. } => {
                ErrorKind::NotFound
            }
            ManageError::Embedding { .. } => ErrorKind::Upstream,
        }
    }
}

impl Classify for EngineError {
    fn kind(&self) -> ErrorKind {
        match self {
            EngineError::Session(session) => session.kind(),
            EngineError::Store(store) => store.kind(),
            EngineError::Plan(_) | EngineError::InvalidInput { .. } => ErrorKind::BadInput,
            EngineError::Policy(_) => ErrorKind::Internal {
                what: "the server's policy",
            },
            EngineError::Import(import) => import.kind(),
            EngineError::MemoryIdentity(_) => ErrorKind::Internal {
                what: "the memory identity",
            },
        }
    }
}

impl Classify for ReplayError {
    fn kind(&self) -> ErrorKind {
        match self {
            ReplayError::Open(_) => ErrorKind::Internal {
                what: "opening the replay's stores",
            },
            ReplayError::Engine(error) => error.kind(),
            ReplayError::Turn(_) => ErrorKind::Internal {
                what: "the replay's turn loop",
            },
        }
    }
}
