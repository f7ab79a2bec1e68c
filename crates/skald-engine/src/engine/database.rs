//! Where a `[database]` setting becomes stores — the one place: [`open_database`] (every store
//! of a server), [`open_stores`] (the engine's three, the one a command is about first),
//! [`open_key_store`] (the API keys), on SQLite, PostgreSQL or in memory;
//! [`ScratchMemoryStore`], a memory store an evaluation fills and throws away; and
//! [`migrate_database`], a SQLite database copied into PostgreSQL and verified table by table.

use std::sync::Arc;

use skald_store::keys::{KeyError, KeyStore, PgKeyStore, SqliteKeyStore};
use skald_store::memories::{MemorySettings, MemoryStore};
use skald_store::postgres::migrate::{MigrationReport, migrate_sqlite_to_postgres};
use skald_store::sessions::SessionStore;
use skald_store::{
    Database, PgMemoryStore, RefSettings, RefStore, SqliteMemoryStore, SqliteRefStore,
    SqliteSessionStore, SystemClock,
};

use crate::memory_write::MemoryWriteError;

/// The three stores an engine works on; any backend of each trait.
#[derive(Clone)]
pub struct Stores {
    /// Sessions as append-only entry trees.
    pub sessions: Arc<dyn SessionStore>,
    /// The originals behind `[REF_ID: …]` placeholders.
    pub refs: Arc<dyn RefStore>,
    /// Long-term memories.
    pub memories: Arc<dyn MemoryStore>,
}

impl Stores {
    /// The SQLite stores, all three in one database file (created if needed), refs kept as
    /// [`RefSettings::default`] says.
    pub fn open_sqlite(database: &std::path::Path) -> Result<Stores, OpenError> {
        Stores::open_sqlite_in_order(database, StoreKind::Refs, &RefSettings::default())
    }

    /// [`Stores::open_sqlite`], `first` first, refs kept as `refs` says.
    fn open_sqlite_in_order(
        database: &std::path::Path,
        first: StoreKind,
        refs_settings: &RefSettings,
    ) -> Result<Stores, OpenError> {
        let sessions = || -> Result<Arc<dyn SessionStore>, OpenError> {
            Ok(Arc::new(SqliteSessionStore::open(database)?))
        };
        let refs = || -> Result<Arc<dyn RefStore>, OpenError> {
            Ok(Arc::new(SqliteRefStore::open(
                database,
                refs_settings.clone(),
            )?))
        };
        let memories = || -> Result<Arc<dyn MemoryStore>, OpenError> {
            Ok(Arc::new(SqliteMemoryStore::open(database)?))
        };
        // Struct fields are evaluated in the order written.
        Ok(match first {
            StoreKind::Sessions => Stores {
                sessions: sessions()?,
                refs: refs()?,
                memories: memories()?,
            },
            StoreKind::Refs => Stores {
                refs: refs()?,
                sessions: sessions()?,
                memories: memories()?,
            },
            StoreKind::Memories => Stores {
                memories: memories()?,
                sessions: sessions()?,
                refs: refs()?,
            },
        })
    }

    /// The PostgreSQL stores, all three in `database` (its schema migrated when it was
    /// connected): the shared store of several servers; refs kept as [`RefSettings::default`]
    /// says.
    pub fn open_postgres(database: &skald_store::Database) -> Result<Stores, OpenError> {
        Stores::open_postgres_with(database, &RefSettings::default())
    }

    /// [`Stores::open_postgres`], refs kept as `refs` says.
    fn open_postgres_with(
        database: &skald_store::Database,
        refs: &RefSettings,
    ) -> Result<Stores, OpenError> {
        Ok(Stores {
            refs: Arc::new(skald_store::PgRefStore::new(
                database.clone(),
                refs.clone(),
            )?),
            sessions: Arc::new(skald_store::PgSessionStore::new(database.clone())),
            memories: Arc::new(skald_store::PgMemoryStore::new(database.clone())?),
        })
    }

    /// The SQLite stores in memory; for tests and throw-away runs.
    pub fn in_memory() -> Result<Stores, OpenError> {
        Stores::in_memory_with(&RefSettings::default())
    }

    /// [`Stores::in_memory`], refs kept as `refs` says.
    fn in_memory_with(refs: &RefSettings) -> Result<Stores, OpenError> {
        Ok(Stores {
            refs: Arc::new(SqliteRefStore::in_memory(refs.clone())?),
            sessions: Arc::new(SqliteSessionStore::in_memory()?),
            memories: Arc::new(SqliteMemoryStore::in_memory()?),
        })
    }
}

/// Where every store of one skald lives.
#[derive(Debug, Clone, Copy)]
pub enum DatabaseLocation<'a> {
    /// One SQLite file (created if needed).
    Sqlite(&'a std::path::Path),
    /// A PostgreSQL database by URL (its schema migrated first): the shared store of several
    /// servers.
    Postgres(&'a str),
    /// SQLite in memory; for tests and throw-away runs.
    InMemory,
}

/// Every store of one database: the engine's, and the key store a server authenticates
/// callers with.
#[derive(Clone)]
pub struct OpenedDatabase {
    /// The engine's stores.
    pub stores: Stores,
    /// The API keys.
    pub keys: Arc<dyn KeyStore>,
}

/// Opens every store at `location`, refs kept as `refs` says (`[refs]`) — the one place a
/// `[database]` setting becomes stores (with [`open_stores`] and [`open_key_store`], which it is
/// made of).
pub fn open_database(
    location: DatabaseLocation<'_>,
    refs: &RefSettings,
) -> Result<OpenedDatabase, OpenError> {
    Ok(match location {
        DatabaseLocation::Postgres(url) => {
            // One connection pool (and one migration) for every store.
            let database = skald_store::Database::connect(url).map_err(OpenError::Database)?;
            OpenedDatabase {
                stores: Stores::open_postgres_with(&database, refs)?,
                keys: Arc::new(PgKeyStore::new(database)),
            }
        }
        DatabaseLocation::Sqlite(_) | DatabaseLocation::InMemory => OpenedDatabase {
            stores: open_stores(location, StoreKind::Refs, refs)?,
            keys: open_key_store(location)?,
        },
    })
}

/// One of the engine's stores: the one a command is about, opened first
/// ([`open_stores`]), so a database that cannot be opened at all is reported as that store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// The session store.
    Sessions,
    /// The ref store.
    Refs,
    /// The memory store.
    Memories,
}

/// The engine's three stores at `location`, `first` first (on SQLite; PostgreSQL connects
/// once for all three, and its error names the database), refs kept as `refs` says.
pub fn open_stores(
    location: DatabaseLocation<'_>,
    first: StoreKind,
    refs: &RefSettings,
) -> Result<Stores, OpenError> {
    match location {
        DatabaseLocation::Postgres(url) => Stores::open_postgres_with(
            &skald_store::Database::connect(url).map_err(OpenError::Database)?,
            refs,
        ),
        DatabaseLocation::Sqlite(path) => Stores::open_sqlite_in_order(path, first, refs),
        DatabaseLocation::InMemory => Stores::in_memory_with(refs),
    }
}

/// The API keys at `location`: the store a server authenticates callers with, and `skald keys`
/// manages.
pub fn open_key_store(location: DatabaseLocation<'_>) -> Result<Arc<dyn KeyStore>, OpenError> {
    Ok(match location {
        DatabaseLocation::Sqlite(path) => Arc::new(SqliteKeyStore::open(path)?),
        DatabaseLocation::Postgres(url) => Arc::new(PgKeyStore::new(
            skald_store::Database::connect(url).map_err(OpenError::Database)?,
        )),
        DatabaseLocation::InMemory => Arc::new(SqliteKeyStore::in_memory()?),
    })
}

/// A memory store with its own settings that lives as long as the value: SQLite in memory, or a
/// PostgreSQL schema of its own (`skald_eval_<pid>`), dropped with the value. What an
/// evaluation (`skald eval locomo`) writes its conversations into, searches, and recalls from
/// through an [`Engine`](crate::Engine) over it.
pub struct ScratchMemoryStore {
    store: Arc<dyn MemoryStore>,
    /// The database URL and schema to drop, on PostgreSQL.
    schema: Option<(String, String)>,
}

impl ScratchMemoryStore {
    /// A scratch store in memory (`database` `None`) or in a new schema of the PostgreSQL
    /// database at `database`.
    pub fn open(
        database: Option<&str>,
        settings: MemorySettings,
    ) -> Result<ScratchMemoryStore, OpenError> {
        Ok(match database {
            None => ScratchMemoryStore {
                store: Arc::new(SqliteMemoryStore::in_memory_with(
                    settings,
                    Arc::new(SystemClock),
                )?),
                schema: None,
            },
            Some(url) => {
                let schema = format!("skald_eval_{}", std::process::id());
                let database =
                    Database::connect_in_schema(url, &schema).map_err(OpenError::Database)?;
                ScratchMemoryStore {
                    store: Arc::new(PgMemoryStore::with(
                        database,
                        settings,
                        Arc::new(SystemClock),
                    )?),
                    schema: Some((url.to_owned(), schema)),
                }
            }
        })
    }

    /// The store.
    pub fn store(&self) -> &dyn MemoryStore {
        self.store.as_ref()
    }

    /// The store, for stores an engine is built over ([`Stores::memories`]).
    pub fn shared(&self) -> Arc<dyn MemoryStore> {
        self.store.clone()
    }
}

impl Drop for ScratchMemoryStore {
    fn drop(&mut self) {
        if let Some((url, schema)) = &self.schema {
            // A schema left behind is only disk; the evaluation's figures are already out.
            if let Err(error) = Database::drop_schema(url, schema) {
                tracing::warn!(%error, schema = %schema, "the evaluation's schema was not dropped");
            }
        }
    }
}

/// The stores could not be opened, or the configuration is not usable.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The ref store failed to open.
    #[error("cannot open the ref store: {0}")]
    Refs(#[from] skald_store::StoreError),
    /// The session store failed to open.
    #[error("cannot open the session store: {0}")]
    Sessions(#[from] skald_store::SessionError),
    /// The memory store failed to open.
    #[error("cannot open the memory store: {0}")]
    Memories(#[from] skald_store::MemoryError),
    /// The key store failed to open.
    #[error("cannot open the key store: {0}")]
    Keys(#[from] KeyError),
    /// The PostgreSQL database could not be connected to (or its schema migrated).
    #[error("cannot connect to the database: {0}")]
    Database(skald_store::StoreError),
    /// `[memory.write]` is out of range.
    #[error("the memory write settings are not usable: {0}")]
    MemoryWrite(#[from] MemoryWriteError),
}

/// A migration could not be made or verified; nothing in the SQLite database was changed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The PostgreSQL database could not be connected to (or its schema created).
    #[error("cannot connect to the database: {0}")]
    Connect(skald_store::StoreError),
    /// Reading the SQLite database or writing the PostgreSQL one failed (or its tables were not
    /// empty).
    #[error(transparent)]
    Copy(skald_store::StoreError),
}

/// Copies the SQLite database at `source` (opened read-only) into the empty PostgreSQL
/// database at `target_url`, then compares every table on both sides by row count and
/// SHA-256; the report says which match.
pub fn migrate_database(
    source: &std::path::Path,
    target_url: &str,
) -> Result<MigrationReport, MigrateError> {
    let target = skald_store::Database::connect(target_url).map_err(MigrateError::Connect)?;
    migrate_sqlite_to_postgres(source, &target).map_err(MigrateError::Copy)
}
