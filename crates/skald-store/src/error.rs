//! The one error type of the store: every variant names what went wrong and what a caller can do.

use std::path::PathBuf;

use skald_core::refs::{RefId, RefIdError};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The id given to a lookup is not a ref id; rejected before storage is touched.
    #[error("invalid ref id: {0}")]
    InvalidId(#[from] RefIdError),

    /// The tenant name is empty, too long or has characters outside `[A-Za-z0-9._-]`.
    #[error("invalid tenant {shown:?}: {reason}")]
    InvalidTenant { shown: String, reason: &'static str },

    /// A setting is out of range; the message names the setting and the accepted range.
    #[error("invalid ref store settings: {0}")]
    InvalidSettings(String),

    /// No ref with this id exists for this tenant (refs of other tenants are never visible).
    #[error(
        "ref {id} not found for tenant {tenant:?}: it was never stored for this tenant, or it \
         expired and was purged"
    )]
    NotFound { tenant: String, id: RefId },

    /// The ref existed but its time to live had run out; it has now been removed.
    #[error(
        "ref {id} for tenant {tenant:?} expired at {} and has been removed; run the tool that \
         produced it again to get the content",
        format_ms(*.expired_at)
    )]
    Expired {
        tenant: String,
        id: RefId,
        /// Milliseconds since the Unix epoch.
        expired_at: i64,
    },

    /// SQLite failed (disk full, permissions, locked for longer than the busy timeout, …).
    #[error("ref store: {action} failed: {source}")]
    Storage {
        action: &'static str,
        #[source]
        source: rusqlite::Error,
    },

    /// The directory that should hold the database could not be created.
    #[error("ref store: could not create directory {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The database was written by a newer skald.
    #[error(
        "ref store database has schema version {found}, newer than the {supported} this build \
         supports: upgrade skald or use another data directory"
    )]
    UnsupportedSchema { found: i64, supported: i64 },

    /// Stored bytes do not decode to what was put (damaged file, or edited by hand).
    #[error("ref store data is corrupt: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Wraps a SQLite error, telling damage apart from ordinary failures.
    pub(crate) fn storage(action: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
        move |source| {
            let damaged = matches!(
                source.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
            );
            if damaged {
                StoreError::Corrupt(format!(
                    "{action}: {source}; move the database file away to start a new store"
                ))
            } else {
                StoreError::Storage { action, source }
            }
        }
    }
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
