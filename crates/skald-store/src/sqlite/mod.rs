//! What the SQLite stores share: their connections (a writer and a pool of readers, [`pool`])
//! and turning `rusqlite` errors into the backend-neutral [`BackendError`], so that no public
//! error type of the crate names `rusqlite`.

pub(crate) mod pool;

use crate::StoreError;
use crate::error::{BackendError, BackendErrorKind};
use crate::keys::KeyError;
use crate::memories::MemoryError;
use crate::sessions::SessionError;

/// A SQLite error as a [`BackendError`], its kind read from SQLite's result code.
pub(crate) fn backend_error(error: rusqlite::Error) -> BackendError {
    let code = error.sqlite_error_code();
    let is_one_of = |codes: &[rusqlite::ErrorCode]| code.is_some_and(|code| codes.contains(&code));
    // Every other code, and errors that are not SQLite's (a column of an unexpected type, a query
    // returning no row), tell a caller nothing it could act on.
    let kind = if is_one_of(&[
        rusqlite::ErrorCode::DatabaseCorrupt,
        rusqlite::ErrorCode::NotADatabase,
    ]) {
        BackendErrorKind::Corrupt
    } else if is_one_of(&[
        rusqlite::ErrorCode::DatabaseBusy,
        rusqlite::ErrorCode::DatabaseLocked,
    ]) {
        BackendErrorKind::Busy
    } else if is_one_of(&[rusqlite::ErrorCode::DiskFull]) {
        BackendErrorKind::Full
    } else {
        BackendErrorKind::Other
    };
    BackendError::new(kind, error)
}

/// An error type of a store, made from a SQLite failure and the action that failed; what the
/// shared SQLite code (the connection pool) reports its failures with.
pub(crate) trait SqliteFailure {
    fn failure(action: &'static str, error: rusqlite::Error) -> Self;
}

impl SqliteFailure for StoreError {
    fn failure(action: &'static str, error: rusqlite::Error) -> StoreError {
        StoreError::storage(action)(error)
    }
}

impl SqliteFailure for SessionError {
    fn failure(action: &'static str, error: rusqlite::Error) -> SessionError {
        SessionError::storage(action)(error)
    }
}

impl SqliteFailure for MemoryError {
    fn failure(action: &'static str, error: rusqlite::Error) -> MemoryError {
        MemoryError::storage(action)(error)
    }
}

impl SqliteFailure for KeyError {
    fn failure(action: &'static str, error: rusqlite::Error) -> KeyError {
        KeyError::Storage(StoreError::storage(action)(error))
    }
}

// The constructors the SQLite code maps its errors with (`.map_err(StoreError::storage("…"))`).
// They live here, beside the conversion, so the error types themselves stay free of `rusqlite`.

impl StoreError {
    /// Wraps a SQLite error, telling damage apart from ordinary failures.
    pub(crate) fn storage(action: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
        move |error| StoreError::backend(action, backend_error(error))
    }
}

impl SessionError {
    /// Wraps a SQLite error, telling damage apart from ordinary failures.
    pub(crate) fn storage(action: &'static str) -> impl FnOnce(rusqlite::Error) -> SessionError {
        move |error| SessionError::backend(action, backend_error(error))
    }
}

impl MemoryError {
    /// Wraps a SQLite error, telling damage apart from ordinary failures.
    pub(crate) fn storage(action: &'static str) -> impl FnOnce(rusqlite::Error) -> MemoryError {
        move |error| MemoryError::backend(action, backend_error(error))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn sqlite_failure(code: std::ffi::c_int) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    #[test]
    fn sqlite_result_codes_map_to_the_kinds_a_caller_acts_on() {
        let kind = |code| backend_error(sqlite_failure(code)).kind();
        assert_eq!(kind(rusqlite::ffi::SQLITE_BUSY), BackendErrorKind::Busy);
        assert_eq!(kind(rusqlite::ffi::SQLITE_LOCKED), BackendErrorKind::Busy);
        assert_eq!(
            kind(rusqlite::ffi::SQLITE_CORRUPT),
            BackendErrorKind::Corrupt
        );
        assert_eq!(
            kind(rusqlite::ffi::SQLITE_NOTADB),
            BackendErrorKind::Corrupt
        );
        assert_eq!(kind(rusqlite::ffi::SQLITE_FULL), BackendErrorKind::Full);
        assert_eq!(kind(rusqlite::ffi::SQLITE_PERM), BackendErrorKind::Other);
        assert_eq!(
            backend_error(rusqlite::Error::QueryReturnedNoRows).kind(),
            BackendErrorKind::Other
        );
    }

    #[test]
    fn the_message_is_the_one_sqlite_gave() {
        let error = sqlite_failure(rusqlite::ffi::SQLITE_FULL);
        let shown = error.to_string();
        let wrapped = StoreError::storage("storing a ref")(error);
        assert_eq!(
            wrapped.to_string(),
            format!("ref store: storing a ref failed: {shown}")
        );
        let StoreError::Storage { source, .. } = &wrapped else {
            panic!("not a storage error: {wrapped:?}");
        };
        assert_eq!(source.kind(), BackendErrorKind::Full);
        assert!(source.backend_error().is::<rusqlite::Error>());
    }

    #[test]
    fn damage_is_a_corrupt_error_with_advice() {
        let error = sqlite_failure(rusqlite::ffi::SQLITE_CORRUPT);
        let shown = error.to_string();
        let wrapped = MemoryError::storage("reading a memory")(error);
        assert!(matches!(wrapped, MemoryError::Corrupt(_)), "{wrapped:?}");
        assert_eq!(
            wrapped.to_string(),
            format!(
                "memory store data is corrupt: reading a memory: {shown}; move the database file \
                 away to start a new store"
            )
        );
    }
}
