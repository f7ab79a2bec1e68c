//! [`PgKeyStore`]: the API keys on PostgreSQL, shared by every server on the database: a key
//! created or revoked through one works or stops working on all at once (every lookup reads the
//! table).

use std::sync::Arc;

use skald_core::ids::Tenant;
use tokio_postgres::Row;

use super::{
    ApiKey, CreatedKey, KEY_PREFIX, KeyError, KeyStore, SECRET_BYTES, SHOWN_CHARS, hex,
    secret_hash, validate_name,
};
use crate::clock::{Clock, SystemClock};
use crate::postgres::{Database, fail};

/// The API keys on PostgreSQL.
pub struct PgKeyStore {
    database: Database,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for PgKeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgKeyStore")
            .field("database", &self.database)
            .finish_non_exhaustive()
    }
}

const COLUMNS: &str = "id, tenant, name, prefix, created_at_ms, revoked_at_ms";

impl PgKeyStore {
    /// The key store in `database`.
    pub fn new(database: Database) -> PgKeyStore {
        PgKeyStore::with_clock(database, Arc::new(SystemClock))
    }

    /// [`PgKeyStore::new`] with the clock creation and revocation times come from.
    pub fn with_clock(database: Database, clock: Arc<dyn Clock>) -> PgKeyStore {
        PgKeyStore { database, clock }
    }
}

fn read_key(row: &Row) -> ApiKey {
    ApiKey {
        id: row.get(0),
        tenant: row.get(1),
        name: row.get(2),
        prefix: row.get(3),
        created_at_ms: row.get(4),
        revoked_at_ms: row.get(5),
    }
}

impl KeyStore for PgKeyStore {
    fn create(&self, tenant: &Tenant, name: &str) -> Result<CreatedKey, KeyError> {
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
        self.database
            .conn::<KeyError>("storing the new API key")?
            .execute(
                "INSERT INTO api_keys (id, tenant, name, secret_sha256, prefix, created_at_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &key.id,
                    &key.tenant,
                    &key.name,
                    &secret_hash(&secret),
                    &key.prefix,
                    &key.created_at_ms,
                ],
            )
            .map_err(fail::<KeyError>("storing the new API key"))?;
        Ok(CreatedKey { key, secret })
    }

    fn list(&self) -> Result<Vec<ApiKey>, KeyError> {
        // `seq` (insertion order) breaks ties between keys created in the same millisecond.
        Ok(self
            .database
            .conn::<KeyError>("listing API keys")?
            .query(
                &format!("SELECT {COLUMNS} FROM api_keys ORDER BY created_at_ms, seq"),
                &[],
            )
            .map_err(fail::<KeyError>("listing API keys"))?
            .iter()
            .map(read_key)
            .collect())
    }

    fn any_active(&self) -> Result<bool, KeyError> {
        Ok(self
            .database
            .conn::<KeyError>("looking for API keys")?
            .query_opt(
                "SELECT 1 FROM api_keys WHERE revoked_at_ms IS NULL LIMIT 1",
                &[],
            )
            .map_err(fail::<KeyError>("looking for API keys"))?
            .is_some())
    }

    fn revoke(&self, id: &str) -> Result<ApiKey, KeyError> {
        let now = self.clock.now_ms();
        self.database.write(|conn| {
            let key = conn
                .query_opt(
                    &format!("SELECT {COLUMNS} FROM api_keys WHERE id = $1 FOR UPDATE"),
                    &[&id],
                )
                .map_err(fail::<KeyError>("reading the API key"))?
                .map(|row| read_key(&row))
                .ok_or_else(|| KeyError::NoSuchId(id.to_owned()))?;
            if key.revoked_at_ms.is_some() {
                return Err(KeyError::AlreadyRevoked(key.id));
            }
            conn.execute(
                "UPDATE api_keys SET revoked_at_ms = $1 WHERE id = $2",
                &[&now, &id],
            )
            .map_err(fail::<KeyError>("revoking the API key"))?;
            Ok(ApiKey {
                revoked_at_ms: Some(now),
                ..key
            })
        })
    }

    fn authenticate(&self, secret: &str) -> Result<ApiKey, KeyError> {
        if !secret.starts_with(KEY_PREFIX) {
            return Err(KeyError::Unknown);
        }
        let key = self
            .database
            .conn::<KeyError>("looking up the API key")?
            .query_opt(
                &format!("SELECT {COLUMNS} FROM api_keys WHERE secret_sha256 = $1"),
                &[&secret_hash(secret)],
            )
            .map_err(fail::<KeyError>("looking up the API key"))?
            .map(|row| read_key(&row))
            .ok_or(KeyError::Unknown)?;
        match key.revoked_at_ms {
            Some(_) => Err(KeyError::Revoked { id: key.id }),
            None => Ok(key),
        }
    }
}
