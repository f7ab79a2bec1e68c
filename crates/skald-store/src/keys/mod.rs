//! API keys of `skald serve`: each key belongs to one tenant, and a request made with it sees
//! only that tenant's sessions, refs and memories.
//!
//! What this module owns:
//! - The key format: `sk-skald-` followed by 48 lowercase hex digits (24 bytes from the operating
//!   system's random source). The secret is shown once, when the key is created; the store keeps
//!   only its SHA-256, its first characters (to tell keys apart in a listing) and who it is for.
//! - Revocation: a revoked key stops working at once (every lookup reads the table) and its row
//!   stays, revoked, so the list shows every key there was. The schema's triggers refuse a delete
//!   and any change but the one revocation.
//! - [`KeyStore`], the interface the server and the CLI use, and [`SqliteKeyStore`], the product
//!   behind it. [`KeyError`] is the error of every backend; its [`KeyError::Storage`] variant
//!   wraps a [`StoreError`], whose own `Storage` variant says what the backend reported.
//!
//! ```
//! use skald_core::ids::Tenant;
//! use skald_store::keys::{KeyError, SqliteKeyStore};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let keys = SqliteKeyStore::in_memory()?;
//! let created = keys.create(&Tenant::parse("acme")?, "ci runner")?;
//! assert!(created.secret.starts_with("sk-skald-"));
//! assert_eq!(keys.authenticate(&created.secret)?.tenant, "acme");
//!
//! keys.revoke(&created.key.id)?;
//! assert!(matches!(keys.authenticate(&created.secret), Err(KeyError::Revoked { .. })));
//! assert!(matches!(keys.authenticate("sk-skald-nope"), Err(KeyError::Unknown)));
//! # Ok(())
//! # }
//! ```

mod postgres;
mod sqlite;

use skald_core::ids::Tenant;
use skald_core::refs::RefId;

use crate::StoreError;

pub use postgres::PgKeyStore;
pub use sqlite::SqliteKeyStore;

/// What every skald API key starts with, so a leaked one is recognisable (secret scanners match
/// on prefixes) and is never mistaken for a provider's key.
pub const KEY_PREFIX: &str = "sk-skald-";

/// Random bytes in a key.
pub(crate) const SECRET_BYTES: usize = 24;

/// Characters of the secret kept in clear for listings (the prefix and 6 hex digits).
pub(crate) const SHOWN_CHARS: usize = KEY_PREFIX.len() + 6;

/// The longest key name accepted.
pub const MAX_KEY_NAME_LEN: usize = 200;

/// A key as listed: everything but the secret.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ApiKey {
    /// `key_` and 16 hex digits; what `skald keys revoke` takes.
    pub id: String,
    /// The tenant whose sessions, refs and memories a request with this key sees.
    pub tenant: String,
    /// What the key is for, as given at creation (e.g. `ci runner`); at most
    /// [`MAX_KEY_NAME_LEN`] characters, none of them control characters.
    pub name: String,
    /// The first characters of the secret, to recognise the key.
    pub prefix: String,
    /// When the key was created, in milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// When the key was revoked, in milliseconds since the Unix epoch; `None` while it is live.
    pub revoked_at_ms: Option<i64>,
}

/// A key just created: the only time its secret is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedKey {
    /// The key as it is stored and listed.
    pub key: ApiKey,
    /// The whole key, [`KEY_PREFIX`] and 48 hex digits, to hand to the user; the store keeps only
    /// its hash.
    pub secret: String,
}

/// Why a key operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// No key has this secret (or the text is not a skald key at all).
    #[error("unknown API key: no skald key has this secret")]
    Unknown,
    /// The key existed and was revoked.
    #[error("API key {id} was revoked")]
    Revoked {
        /// The revoked key's id (`key_…`), to find it in `skald keys list`.
        id: String,
    },
    /// `revoke` was given an id no key has.
    #[error("no API key has the id {0:?}; `skald keys list` shows the ids")]
    NoSuchId(String),
    /// The key was already revoked; nothing changed.
    #[error("API key {0} is already revoked")]
    AlreadyRevoked(String),
    /// A key name that is empty, too long or has control characters.
    #[error("invalid key name: {0}")]
    InvalidName(&'static str),
    /// The operating system's random source failed.
    #[error("no random bytes for a new key: {0}")]
    Random(String),
    /// SQLite failed.
    #[error(transparent)]
    Storage(#[from] StoreError),
}

/// What the server and the CLI need from a key store. A backend keeps only what identifies a
/// key (never its secret), never deletes a key, and never un-revokes one.
pub trait KeyStore: Send + Sync {
    /// Creates a key for `tenant`; the returned secret is not stored and cannot be shown again.
    /// An empty, over-long or control-character name is [`KeyError::InvalidName`]; nothing is
    /// stored then.
    fn create(&self, tenant: &Tenant, name: &str) -> Result<CreatedKey, KeyError>;

    /// Every key, of every tenant, oldest first (the operator's view; revoked keys included).
    fn list(&self) -> Result<Vec<ApiKey>, KeyError>;

    /// Whether some key is live (created and not revoked). The server asks on every request
    /// while it is open; once this is true it requires a key (see `AppState::auth_required`).
    fn any_active(&self) -> Result<bool, KeyError>;

    /// Revokes a key by id; it stops working at once, and for good. An unknown id is
    /// [`KeyError::NoSuchId`], a key revoked before [`KeyError::AlreadyRevoked`].
    fn revoke(&self, id: &str) -> Result<ApiKey, KeyError>;

    /// The key whose secret this is, if it is live: [`KeyError::Unknown`] for text no key has
    /// (or that is not a skald key at all), [`KeyError::Revoked`] for a revoked key.
    fn authenticate(&self, secret: &str) -> Result<ApiKey, KeyError>;
}

pub(crate) fn validate_name(name: &str) -> Result<(), KeyError> {
    if name.trim().is_empty() {
        return Err(KeyError::InvalidName(
            "a key needs a name saying who or what uses it",
        ));
    }
    if name.chars().count() > MAX_KEY_NAME_LEN {
        return Err(KeyError::InvalidName(
            "a key name has at most 200 characters",
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(KeyError::InvalidName(
            "a key name has no control characters",
        ));
    }
    Ok(())
}

/// The SHA-256 of a secret (lowercase hex, as a ref id is), as stored: a leaked database gives
/// no usable key.
pub(crate) fn secret_hash(secret: &str) -> String {
    RefId::of_bytes(secret.as_bytes()).as_str().to_owned()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
