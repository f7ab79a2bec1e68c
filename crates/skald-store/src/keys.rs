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
//!   wraps a [`StoreError`], which exposes `rusqlite::Error` in its `Storage` variant.
//!
//! ```
//! use skald_store::keys::{KeyError, SqliteKeyStore};
//!
//! # fn main() -> Result<(), KeyError> {
//! let keys = SqliteKeyStore::in_memory()?;
//! let created = keys.create("acme", "ci runner")?;
//! assert!(created.secret.starts_with("sk-skald-"));
//! assert_eq!(keys.authenticate(&created.secret)?.tenant, "acme");
//!
//! keys.revoke(&created.key.id)?;
//! assert!(matches!(keys.authenticate(&created.secret), Err(KeyError::Revoked { .. })));
//! assert!(matches!(keys.authenticate("sk-skald-nope"), Err(KeyError::Unknown)));
//! # Ok(())
//! # }
//! ```

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use skald_core::refs::RefId;

use crate::clock::{Clock, SystemClock};
use crate::{StoreError, validate_tenant};

/// What every skald API key starts with, so a leaked one is recognisable (secret scanners match
/// on prefixes) and is never mistaken for a provider's key.
pub const KEY_PREFIX: &str = "sk-skald-";

/// Random bytes in a key.
const SECRET_BYTES: usize = 24;

/// Characters of the secret kept in clear for listings (the prefix and 6 hex digits).
const SHOWN_CHARS: usize = KEY_PREFIX.len() + 6;

/// The longest key name accepted.
pub const MAX_KEY_NAME_LEN: usize = 200;

/// A key as listed: everything but the secret.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ApiKey {
    /// `key_` and 16 hex digits; what `skald keys revoke` takes.
    pub id: String,
    pub tenant: String,
    pub name: String,
    /// The first characters of the secret, to recognise the key.
    pub prefix: String,
    pub created_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
}

/// A key just created: the only time its secret is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedKey {
    pub key: ApiKey,
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
    Revoked { id: String },
    /// `revoke` was given an id no key has.
    #[error("no API key has the id {0:?}; `skald keys list` shows the ids")]
    NoSuchId(String),
    /// The key was already revoked; nothing changed.
    #[error("API key {0} is already revoked")]
    AlreadyRevoked(String),
    /// A key name that is empty, too long or has control characters.
    #[error("invalid key name: {0}")]
    InvalidName(&'static str),
    /// The tenant name is not valid.
    #[error(transparent)]
    Tenant(StoreError),
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
    /// An invalid tenant is [`KeyError::Tenant`], an empty, over-long or control-character name
    /// [`KeyError::InvalidName`]; nothing is stored then.
    fn create(&self, tenant: &str, name: &str) -> Result<CreatedKey, KeyError>;

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

/// The API keys, in the data directory's database.
pub struct SqliteKeyStore {
    conn: Mutex<Connection>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for SqliteKeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteKeyStore").finish_non_exhaustive()
    }
}

impl SqliteKeyStore {
    /// Opens (creating if needed) the database at `path`, the same file as the other stores.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteKeyStore, KeyError> {
        SqliteKeyStore::open_with_clock(path, Arc::new(SystemClock))
    }

    /// [`SqliteKeyStore::open`] with the clock creation and revocation times come from.
    pub fn open_with_clock(
        path: impl AsRef<Path>,
        clock: Arc<dyn Clock>,
    ) -> Result<SqliteKeyStore, KeyError> {
        let path = path.as_ref();
        crate::schema::create_parent_dir(path)?;
        let conn = Connection::open(path).map_err(StoreError::storage("opening the database"))?;
        SqliteKeyStore::with_connection(conn, clock)
    }

    /// A store in memory, gone when dropped; for tests.
    pub fn in_memory() -> Result<SqliteKeyStore, KeyError> {
        let conn = Connection::open_in_memory()
            .map_err(StoreError::storage("opening an in-memory database"))?;
        SqliteKeyStore::with_connection(conn, Arc::new(SystemClock))
    }

    fn with_connection(
        mut conn: Connection,
        clock: Arc<dyn Clock>,
    ) -> Result<SqliteKeyStore, KeyError> {
        crate::schema::prepare(&mut conn)?;
        Ok(SqliteKeyStore {
            conn: Mutex::new(conn),
            clock,
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a half-written row (SQLite transactions
        // roll back), so the connection is still good.
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Creates a key for `tenant`; the returned secret is not stored and cannot be shown again.
    pub fn create(&self, tenant: &str, name: &str) -> Result<CreatedKey, KeyError> {
        validate_tenant(tenant).map_err(KeyError::Tenant)?;
        validate_name(name)?;
        let mut random = [0u8; SECRET_BYTES + 8];
        getrandom::fill(&mut random).map_err(|error| KeyError::Random(error.to_string()))?;
        let (secret_bytes, id_bytes) = random.split_at(SECRET_BYTES);
        let secret = format!("{KEY_PREFIX}{}", hex(secret_bytes));
        let key = ApiKey {
            id: format!("key_{}", hex(id_bytes)),
            tenant: tenant.to_owned(),
            name: name.to_owned(),
            prefix: secret.chars().take(SHOWN_CHARS).collect(),
            created_at_ms: self.clock.now_ms(),
            revoked_at_ms: None,
        };
        self.conn()
            .execute(
                "INSERT INTO api_keys (id, tenant, name, secret_sha256, prefix, created_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    key.id,
                    key.tenant,
                    key.name,
                    secret_hash(&secret),
                    key.prefix,
                    key.created_at_ms
                ],
            )
            .map_err(StoreError::storage("storing the new API key"))?;
        Ok(CreatedKey { key, secret })
    }

    /// Every key, of every tenant, oldest first (the operator's view; revoked keys included).
    pub fn list(&self) -> Result<Vec<ApiKey>, KeyError> {
        let conn = self.conn();
        let mut statement = conn
            .prepare(
                // `rowid` (insertion order; rows are never deleted) breaks ties between keys
                // created in the same millisecond, which `id` (random) would shuffle.
                "SELECT id, tenant, name, prefix, created_at_ms, revoked_at_ms FROM api_keys \
                 ORDER BY created_at_ms, rowid",
            )
            .map_err(StoreError::storage("listing API keys"))?;
        let rows = statement
            .query_map([], read_key)
            .map_err(StoreError::storage("listing API keys"))?;
        let keys = rows
            .collect::<Result<Vec<_>, _>>()
            .map_err(StoreError::storage("reading API keys"))?;
        Ok(keys)
    }

    /// Whether some key is live (created and not revoked); see [`KeyStore::any_active`].
    pub fn any_active(&self) -> Result<bool, KeyError> {
        // Cached: an open server asks on every request.
        let found: Option<i64> = self
            .conn()
            .prepare_cached("SELECT 1 FROM api_keys WHERE revoked_at_ms IS NULL LIMIT 1")
            .and_then(|mut statement| statement.query_row([], |row| row.get(0)).optional())
            .map_err(StoreError::storage("looking for API keys"))?;
        Ok(found.is_some())
    }

    /// Revokes a key by id; it stops working at once.
    pub fn revoke(&self, id: &str) -> Result<ApiKey, KeyError> {
        let conn = self.conn();
        let key = conn
            .query_row(
                "SELECT id, tenant, name, prefix, created_at_ms, revoked_at_ms FROM api_keys \
                 WHERE id = ?1",
                [id],
                read_key,
            )
            .optional()
            .map_err(StoreError::storage("reading the API key"))?
            .ok_or_else(|| KeyError::NoSuchId(id.to_owned()))?;
        if key.revoked_at_ms.is_some() {
            return Err(KeyError::AlreadyRevoked(key.id));
        }
        let now = self.clock.now_ms();
        conn.execute(
            "UPDATE api_keys SET revoked_at_ms = ?1 WHERE id = ?2",
            params![now, id],
        )
        .map_err(StoreError::storage("revoking the API key"))?;
        Ok(ApiKey {
            revoked_at_ms: Some(now),
            ..key
        })
    }

    /// The key whose secret this is, if it is live.
    pub fn authenticate(&self, secret: &str) -> Result<ApiKey, KeyError> {
        if !secret.starts_with(KEY_PREFIX) {
            return Err(KeyError::Unknown);
        }
        let key = self
            .conn()
            .prepare_cached(
                "SELECT id, tenant, name, prefix, created_at_ms, revoked_at_ms FROM api_keys \
                 WHERE secret_sha256 = ?1",
            )
            .and_then(|mut statement| {
                statement
                    .query_row([secret_hash(secret)], read_key)
                    .optional()
            })
            .map_err(StoreError::storage("looking up the API key"))?
            .ok_or(KeyError::Unknown)?;
        match key.revoked_at_ms {
            Some(_) => Err(KeyError::Revoked { id: key.id }),
            None => Ok(key),
        }
    }
}

impl KeyStore for SqliteKeyStore {
    fn create(&self, tenant: &str, name: &str) -> Result<CreatedKey, KeyError> {
        SqliteKeyStore::create(self, tenant, name)
    }

    fn list(&self) -> Result<Vec<ApiKey>, KeyError> {
        SqliteKeyStore::list(self)
    }

    fn any_active(&self) -> Result<bool, KeyError> {
        SqliteKeyStore::any_active(self)
    }

    fn revoke(&self, id: &str) -> Result<ApiKey, KeyError> {
        SqliteKeyStore::revoke(self, id)
    }

    fn authenticate(&self, secret: &str) -> Result<ApiKey, KeyError> {
        SqliteKeyStore::authenticate(self, secret)
    }
}

fn read_key(row: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKey> {
    Ok(ApiKey {
        id: row.get(0)?,
        tenant: row.get(1)?,
        name: row.get(2)?,
        prefix: row.get(3)?,
        created_at_ms: row.get(4)?,
        revoked_at_ms: row.get(5)?,
    })
}

fn validate_name(name: &str) -> Result<(), KeyError> {
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
fn secret_hash(secret: &str) -> String {
    RefId::of_bytes(secret.as_bytes()).as_str().to_owned()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::ManualClock;

    #[test]
    fn a_created_key_authenticates_for_its_tenant_only() {
        let keys = SqliteKeyStore::in_memory().unwrap();
        let a = keys.create("tenant-a", "agent a").unwrap();
        let b = keys.create("tenant-b", "agent b").unwrap();
        assert_ne!(a.secret, b.secret);
        assert_eq!(a.secret.len(), KEY_PREFIX.len() + 2 * SECRET_BYTES);
        assert_eq!(keys.authenticate(&a.secret).unwrap().tenant, "tenant-a");
        assert_eq!(keys.authenticate(&b.secret).unwrap().tenant, "tenant-b");
        assert!(a.secret.starts_with(&a.key.prefix));
    }

    #[test]
    fn the_secret_is_not_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skald.sqlite3");
        let keys = SqliteKeyStore::open(&path).unwrap();
        let created = keys.create("acme", "ci").unwrap();
        drop(keys);
        let conn = Connection::open(&path).unwrap();
        let stored: String = conn
            .query_row("SELECT secret_sha256 FROM api_keys", [], |row| row.get(0))
            .unwrap();
        assert_eq!(stored, secret_hash(&created.secret));
        let bytes = std::fs::read(&path).unwrap();
        let needle = created.secret.as_bytes();
        assert!(!bytes.windows(needle.len()).any(|window| window == needle));
    }

    #[test]
    fn revoking_stops_the_key_at_once_and_keeps_its_row() {
        let clock = Arc::new(ManualClock::new(1_000));
        let dir = tempfile::tempdir().unwrap();
        let keys = SqliteKeyStore::open_with_clock(dir.path().join("db"), clock.clone()).unwrap();
        let created = keys.create("acme", "laptop").unwrap();
        assert!(keys.any_active().unwrap());
        clock.advance(5);
        let revoked = keys.revoke(&created.key.id).unwrap();
        assert_eq!(revoked.revoked_at_ms, Some(1_005));
        assert!(matches!(
            keys.authenticate(&created.secret),
            Err(KeyError::Revoked { .. })
        ));
        assert!(matches!(
            keys.revoke(&created.key.id),
            Err(KeyError::AlreadyRevoked(_))
        ));
        assert!(!keys.any_active().unwrap());
        assert_eq!(keys.list().unwrap(), vec![revoked]);
    }

    /// Regression: `list` ordered ties by the random key id, so keys created in the same
    /// millisecond were not listed oldest first (found by the conformance suite).
    #[test]
    fn keys_created_in_the_same_millisecond_list_in_creation_order() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_000));
        let keys = SqliteKeyStore::open_with_clock(dir.path().join("db"), clock).unwrap();
        let created: Vec<ApiKey> = (0..20)
            .map(|n| keys.create("acme", &format!("key {n}")).unwrap().key)
            .collect();
        assert_eq!(keys.list().unwrap(), created);
    }

    #[test]
    fn bad_input_is_refused_and_changes_nothing() {
        let keys = SqliteKeyStore::in_memory().unwrap();
        assert!(matches!(keys.create("../x", "n"), Err(KeyError::Tenant(_))));
        assert!(matches!(
            keys.create("acme", "  "),
            Err(KeyError::InvalidName(_))
        ));
        assert!(matches!(
            keys.create("acme", "a\nb"),
            Err(KeyError::InvalidName(_))
        ));
        assert!(matches!(
            keys.revoke("key_nope"),
            Err(KeyError::NoSuchId(_))
        ));
        assert!(matches!(keys.authenticate(""), Err(KeyError::Unknown)));
        assert!(matches!(
            keys.authenticate("sk-proj-provider-key"),
            Err(KeyError::Unknown)
        ));
        assert!(keys.list().unwrap().is_empty());
    }

    #[test]
    fn the_schema_refuses_deleting_or_unrevoking_a_key() {
        let keys = SqliteKeyStore::in_memory().unwrap();
        let created = keys.create("acme", "x").unwrap();
        keys.revoke(&created.key.id).unwrap();
        let conn = keys.conn();
        assert!(conn.execute("DELETE FROM api_keys", []).is_err());
        assert!(
            conn.execute("UPDATE api_keys SET revoked_at_ms = NULL", [])
                .is_err()
        );
    }
}
