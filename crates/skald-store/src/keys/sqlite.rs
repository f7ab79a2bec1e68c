//! [`SqliteKeyStore`]: the API keys on SQLite, in the same database file as the other stores.

use std::path::Path;
use std::sync::Arc;

use rusqlite::{OptionalExtension, params};
use skald_core::ids::Tenant;

use super::{
    ApiKey, CreatedKey, KEY_PREFIX, KeyError, KeyStore, SECRET_BYTES, SHOWN_CHARS, hex,
    secret_hash, validate_name,
};
use crate::StoreError;
use crate::clock::{Clock, SystemClock};
use crate::sqlite::pool::Connections;

/// The API keys, in the data directory's database: a writer connection for creating and revoking
/// keys, and for a database file a pool of readers for the lookups every request makes ([see the
/// crate documentation](crate#how-storage-is-laid-out)).
pub struct SqliteKeyStore {
    connections: Connections,
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
        Ok(SqliteKeyStore {
            connections: Connections::open::<KeyError>(path.as_ref())?,
            clock,
        })
    }

    /// A store in memory, gone when dropped; for tests.
    pub fn in_memory() -> Result<SqliteKeyStore, KeyError> {
        Ok(SqliteKeyStore {
            connections: Connections::in_memory::<KeyError>()?,
            clock: Arc::new(SystemClock),
        })
    }

    /// Creates a key for `tenant`; the returned secret is not stored and cannot be shown again.
    pub fn create(&self, tenant: &Tenant, name: &str) -> Result<CreatedKey, KeyError> {
        validate_name(name)?;
        let mut random = [0u8; SECRET_BYTES + 8];
        getrandom::fill(&mut random).map_err(|error| KeyError::Random(error.to_string()))?;
        let (secret_bytes, id_bytes) = random.split_at(SECRET_BYTES);
        let secret = format!("{KEY_PREFIX}{}", hex(secret_bytes));
        let key = ApiKey {
            id: format!("key_{}", hex(id_bytes)),
            tenant: tenant.to_string(),
            name: name.to_owned(),
            prefix: secret.chars().take(SHOWN_CHARS).collect(),
            created_at_ms: self.clock.now_ms(),
            revoked_at_ms: None,
        };
        self.connections
            .writer()
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
        self.connections.read(|conn, _| {
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
        })
    }

    /// Whether some key is live (created and not revoked); see [`KeyStore::any_active`].
    pub fn any_active(&self) -> Result<bool, KeyError> {
        // Cached: an open server asks on every request.
        let found: Option<i64> = self.connections.read(|conn, _| {
            conn.prepare_cached("SELECT 1 FROM api_keys WHERE revoked_at_ms IS NULL LIMIT 1")
                .and_then(|mut statement| statement.query_row([], |row| row.get(0)).optional())
                .map_err(StoreError::storage("looking for API keys"))
        })?;
        Ok(found.is_some())
    }

    /// Revokes a key by id; it stops working at once.
    pub fn revoke(&self, id: &str) -> Result<ApiKey, KeyError> {
        // On the writer, read and update alike: the check that the key is not revoked yet and
        // the revocation go through one connection, one after the other.
        let conn = self.connections.writer();
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
            .connections
            .read(|conn, _| {
                conn.prepare_cached(
                    "SELECT id, tenant, name, prefix, created_at_ms, revoked_at_ms \
                     FROM api_keys WHERE secret_sha256 = ?1",
                )
                .and_then(|mut statement| {
                    statement
                        .query_row([secret_hash(secret)], read_key)
                        .optional()
                })
                .map_err(StoreError::storage("looking up the API key"))
            })?
            .ok_or(KeyError::Unknown)?;
        match key.revoked_at_ms {
            Some(_) => Err(KeyError::Revoked { id: key.id }),
            None => Ok(key),
        }
    }
}

impl KeyStore for SqliteKeyStore {
    fn create(&self, tenant: &Tenant, name: &str) -> Result<CreatedKey, KeyError> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use rusqlite::Connection;

    use super::*;
    use crate::ManualClock;

    /// A tenant name of the tests, parsed (it is well formed).
    fn tenant_named(name: &str) -> skald_core::ids::Tenant {
        skald_core::ids::Tenant::parse(name).unwrap()
    }

    #[test]
    fn a_created_key_authenticates_for_its_tenant_only() {
        let keys = SqliteKeyStore::in_memory().unwrap();
        let a = keys.create(&tenant_named("tenant-a"), "agent a").unwrap();
        let b = keys.create(&tenant_named("tenant-b"), "agent b").unwrap();
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
        let created = keys.create(&tenant_named("acme"), "ci").unwrap();
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
        let created = keys.create(&tenant_named("acme"), "laptop").unwrap();
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
            .map(|n| {
                keys.create(&tenant_named("acme"), &format!("key {n}"))
                    .unwrap()
                    .key
            })
            .collect();
        assert_eq!(keys.list().unwrap(), created);
    }

    #[test]
    fn bad_input_is_refused_and_changes_nothing() {
        let keys = SqliteKeyStore::in_memory().unwrap();
        assert!(matches!(
            keys.create(&tenant_named("acme"), "  "),
            Err(KeyError::InvalidName(_))
        ));
        assert!(matches!(
            keys.create(&tenant_named("acme"), "a\nb"),
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
        let created = keys.create(&tenant_named("acme"), "x").unwrap();
        keys.revoke(&created.key.id).unwrap();
        let conn = keys.connections.writer();
        assert!(conn.execute("DELETE FROM api_keys", []).is_err());
        assert!(
            conn.execute("UPDATE api_keys SET revoked_at_ms = NULL", [])
                .is_err()
        );
    }
}
