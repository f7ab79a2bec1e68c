//! The one error type of the store: every variant names what went wrong and what a caller can do.

use std::path::PathBuf;

use skald_core::refs::{RefId, RefIdError};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The id given to a lookup is not a ref id; rejected before storage is touched.
    #[error("invalid ref id: {0}")]
    InvalidId(#[from] RefIdError),

    /// A setting is out of range; the message names the setting and the accepted range.
    #[error("invalid ref store settings: {0}")]
    InvalidSettings(String),

    /// No ref with this id exists for this tenant (refs of other tenants are never visible).
    #[error(
        "ref {id} not found for tenant {tenant:?}: it was never stored for this tenant, or it \
         expired and was purged"
    )]
    NotFound {
        /// The tenant the lookup was made for.
        tenant: String,
        /// The id looked up, as parsed from the caller's text.
        id: RefId,
    },

    /// The ref existed but its time to live had run out; it has now been removed.
    #[error(
        "ref {id} for tenant {tenant:?} expired at {} and has been removed; run the tool that \
         produced it again to get the content",
        format_ms(*.expired_at)
    )]
    Expired {
        /// The tenant the lookup was made for.
        tenant: String,
        /// The id of the expired ref, as parsed from the caller's text.
        id: RefId,
        /// When the ref expired, in milliseconds since the Unix epoch.
        expired_at: i64,
    },

    /// The storage backend failed (disk full, permissions, locked for longer than the busy
    /// timeout, …); [`BackendError::kind`] says which of these it was.
    #[error("ref store: {action} failed: {source}")]
    Storage {
        /// What the store was doing when the backend failed, e.g. `"storing a ref"`.
        action: &'static str,
        /// The backend's failure, with its [`BackendErrorKind`].
        #[source]
        source: BackendError,
    },

    /// The directory that should hold the database could not be created.
    #[error("ref store: could not create directory {}: {source}", .path.display())]
    Io {
        /// The directory that could not be created (the database file's parent).
        path: PathBuf,
        /// Why the operating system refused.
        #[source]
        source: std::io::Error,
    },

    /// The database was written by a newer skald.
    #[error(
        "ref store database has schema version {found}, newer than the {supported} this build \
         supports: upgrade skald or use another data directory"
    )]
    UnsupportedSchema {
        /// The schema version recorded in the database file.
        found: i64,
        /// The newest schema version this build knows: [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
        supported: i64,
    },

    /// Stored bytes do not decode to what was put (damaged file, or edited by hand).
    #[error("ref store data is corrupt: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Wraps a backend error, telling damage apart from ordinary failures.
    pub(crate) fn backend(action: &'static str, source: BackendError) -> StoreError {
        match source.kind() {
            BackendErrorKind::Corrupt => StoreError::Corrupt(corrupt_message(action, &source)),
            BackendErrorKind::Busy | BackendErrorKind::Full | BackendErrorKind::Other => {
                StoreError::Storage { action, source }
            }
        }
    }
}

/// A failure of the storage backend (SQLite, or any other behind the store traits), with what
/// kind of failure it was so a caller can act on it without knowing the backend.
///
/// It displays as the backend's own message and is transparent in the error chain (its
/// [`source`](std::error::Error::source) is the backend error's source), so wrapping a backend
/// error in it changes no text a user sees.
#[derive(Debug)]
pub struct BackendError {
    kind: BackendErrorKind,
    source: Box<dyn std::error::Error + Send + Sync>,
}

/// What kind of failure a [`BackendError`] is: what a caller can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendErrorKind {
    /// Another connection or process held a lock for longer than the store waits: retrying
    /// later may succeed.
    Busy,
    /// The stored data is damaged or is not a database of this store: retrying will not help;
    /// the data needs to be moved away or restored.
    Corrupt,
    /// The disk or the database is full: free space, then retry.
    Full,
    /// Anything else (permissions, a constraint, a bug): see the message.
    Other,
}

impl BackendError {
    /// A backend failure of `kind` caused by `source`.
    pub fn new(
        kind: BackendErrorKind,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> BackendError {
        BackendError {
            kind,
            source: source.into(),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> BackendErrorKind {
        self.kind
    }

    /// The backend's own error, for a caller that knows the backend and wants its details.
    pub fn backend_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.source
    }
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.source, f)
    }
}

impl std::error::Error for BackendError {
    // The message is the backend error's, so its source comes next in the chain; returning the
    // backend error itself would print the same message twice.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

/// The message of a `Corrupt` error made from a backend error: what failed, how, and what to do.
pub(crate) fn corrupt_message(action: &str, source: &BackendError) -> String {
    format!("{action}: {source}; move the database file away to start a new store")
}

fn format_ms(ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(time) => format!(
            "{} ({ms} ms since the Unix epoch)",
            time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        ),
        None => format!("{ms} ms since the Unix epoch"),
    }
}
