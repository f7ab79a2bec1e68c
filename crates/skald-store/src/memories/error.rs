//! [`MemoryError`]: why a memory operation failed, with what a caller can do about each case.

use skald_core::memory::uri::{MemoryUri, UriError};

use crate::StoreError;
use crate::error::{BackendError, BackendErrorKind, corrupt_message};

/// Why a memory operation failed. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The URI does not follow the layout, or names a directory where an entry belongs.
    #[error(transparent)]
    InvalidUri(#[from] UriError),

    /// A field of the request is out of range; the message names it and the accepted range.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The field refused, e.g. `"l0"`, `"limit"` or `"source.entry_ids"`.
        field: &'static str,
        /// What is wrong with it and what is accepted.
        reason: String,
    },

    /// No live entry at the URI for this tenant (entries of other tenants are never visible).
    #[error("no memory at {uri} for tenant {tenant:?}; list what exists with `skald ls`")]
    NotFound {
        /// The tenant the lookup was made for.
        tenant: String,
        /// The URI looked up.
        uri: MemoryUri,
    },

    /// The entry at the URI was forgotten.
    #[error(
        "the memory at {uri} was forgotten at {at_ms} ms since the Unix epoch; its versions are \
         still listed by history"
    )]
    Forgotten {
        /// The URI looked up.
        uri: MemoryUri,
        /// When its latest version was forgotten, in ms since the Unix epoch.
        at_ms: i64,
    },

    /// `add` at a URI that holds a different live entry.
    #[error("a different memory already lives at {uri}; update it to write a new version")]
    AlreadyExists {
        /// The URI written to, where the live entry is.
        uri: MemoryUri,
    },

    /// The URI is below an existing entry, or existing entries are below it.
    #[error("{uri} conflicts with the entry {existing}: a URI is either an entry or a directory")]
    PathConflict {
        /// The URI written to.
        uri: MemoryUri,
        /// A live entry it conflicts with: the one `uri` would be inside, or one of those that
        /// would be inside `uri`.
        existing: MemoryUri,
    },

    /// A write of [`MemoryStore::add_many`](super::MemoryStore::add_many) failed; nothing of the
    /// batch was written.
    #[error("memory {index} of the batch ({uri}): {source}")]
    InBatch {
        /// The 0-based position of the failed memory in the batch.
        index: usize,
        /// Its URI.
        uri: MemoryUri,
        /// Why it failed.
        #[source]
        source: Box<MemoryError>,
    },

    /// A batch of [`MemoryStore::add_many_while`](super::MemoryStore::add_many_while) was
    /// given up because its caller stopped wanting it; nothing of the batch was written.
    #[error("the batch was cancelled before it was written; nothing of it was stored")]
    Cancelled,

    /// The query vector's dimensions match no stored vector of the tenant.
    #[error(
        "the query vector has {query} dimensions but the stored vectors have {stored:?}; embed \
         the query with the model the memories were embedded with"
    )]
    DimensionMismatch {
        /// The query vector's dimensions.
        query: usize,
        /// The dimensions of the stored vectors the search could see, ascending, each once.
        stored: Vec<usize>,
    },

    /// A setting is out of range.
    #[error("invalid memory store settings: {0}")]
    InvalidSettings(String),

    /// The data directory cannot be created, or the schema is newer than this build.
    #[error(transparent)]
    Store(#[from] StoreError),

    /// The storage backend failed (disk full, permissions, locked for longer than the busy
    /// timeout, …); [`BackendError::kind`] says which of these it was.
    #[error("memory store: {action} failed: {source}")]
    Storage {
        /// What the store was doing when the backend failed, e.g. `"counting memories"`.
        action: &'static str,
        /// The backend's failure, with its [`BackendErrorKind`].
        #[source]
        source: BackendError,
    },

    /// Stored rows do not decode (damaged file, or edited by hand).
    #[error("memory store data is corrupt: {0}")]
    Corrupt(String),
}

impl MemoryError {
    /// Wraps a backend error, telling damage apart from ordinary failures.
    pub(crate) fn backend(action: &'static str, source: BackendError) -> MemoryError {
        match source.kind() {
            BackendErrorKind::Corrupt => MemoryError::Corrupt(corrupt_message(action, &source)),
            BackendErrorKind::Busy | BackendErrorKind::Full | BackendErrorKind::Other => {
                MemoryError::Storage { action, source }
            }
        }
    }

    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> MemoryError {
        MemoryError::InvalidInput {
            field,
            reason: reason.into(),
        }
    }
}
