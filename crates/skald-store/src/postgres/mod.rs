//! What the PostgreSQL stores share: [`Database`] (a pool of connections to one database and
//! schema, driven by a small tokio runtime the backend owns, behind a synchronous facade), the
//! schema migrations run when it opens, and turning `tokio_postgres` errors into the
//! backend-neutral [`BackendError`].
//!
//! # Why a runtime of its own, and how a synchronous call waits
//!
//! The store traits are synchronous (see the crate documentation). The connections' sockets are
//! driven by tasks on the backend's own two-thread runtime; a store call sends its statements
//! through a pooled client and waits for the answers with `futures::executor::block_on` on the
//! calling thread, whatever that thread is: an engine call inside `block_in_place`, a CLI thread,
//! or a handler's inline key lookup. A client future needs no runtime of its own (it talks to its
//! connection task over a channel), so waiting on it can never hit tokio's "runtime inside a
//! runtime" panic that the synchronous `postgres` crate's `block_on` would. Getting a connection
//! from the pool (which may connect, and so needs tokio's reactor) runs as a task on the
//! backend's runtime.
//!
//! # Consistency
//!
//! Every write is one transaction (`READ COMMITTED`, with the rows or advisory locks it needs:
//! a session's row `FOR UPDATE`, a tenant's memory lock), committed before the call returns —
//! with PostgreSQL's default `synchronous_commit = on`, the commit is flushed to the WAL on disk,
//! so what a call acknowledged survives a crash of skald or of the database server. Reads that
//! take several statements run in one `REPEATABLE READ READ ONLY` transaction, one snapshot.

pub mod migrate;
pub(crate) mod schema;

use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio_postgres::error::SqlState;
use tokio_postgres::row::Row;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Config, NoTls};

use crate::StoreError;
use crate::error::{BackendError, BackendErrorKind};

/// Connections in the pool at most, per [`Database`].
pub const DEFAULT_POOL_SIZE: usize = 16;

/// Parameters of a statement.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// A pool of connections to one PostgreSQL database (and schema), shared by every PostgreSQL
/// store opened on it. Cheap to clone.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    /// Always `Some` until dropped (see the `Drop` impl).
    runtime: Option<tokio::runtime::Runtime>,
    schema: Option<String>,
    shown: String,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropping a runtime waits for its threads, which tokio refuses inside an async context
        // (the last store of a database dropped at the end of a request or an async test): stop
        // it without waiting. Its connection tasks end, closing their connections.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("url", &self.inner.shown)
            .field("schema", &self.inner.schema)
            .finish_non_exhaustive()
    }
}

impl Database {
    /// Connects to the database at `url` (`postgres://user[:password]@host[:port]/database`,
    /// libpq's URL form), in its default schema, and brings the schema up to date.
    pub fn connect(url: &str) -> Result<Database, StoreError> {
        Database::open(url, None, true)
    }

    /// [`Database::connect`] with every table in `schema`, created if missing: several skald
    /// deployments (or tests running in parallel) in one database. `schema` is 1 to 63 of
    /// `[a-z0-9_]`, starting with a letter.
    pub fn connect_in_schema(url: &str, schema: &str) -> Result<Database, StoreError> {
        Database::open(url, Some(schema), true)
    }

    fn open(url: &str, schema: Option<&str>, migrate: bool) -> Result<Database, StoreError> {
        let mut config: Config = url.parse().map_err(|error: tokio_postgres::Error| {
            StoreError::InvalidSettings(format!(
                "database url {:?} is not a PostgreSQL URL (postgres://user@host:port/database): \
                 {error}",
                redact(url)
            ))
        })?;
        if let Some(schema) = schema {
            check_schema_name(schema)?;
            config.options(format!("-c search_path={schema}"));
        }
        if config.get_application_name().is_none() {
            config.application_name("skald");
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("skald-postgres")
            .enable_all()
            .build()
            .map_err(|error| {
                StoreError::backend(
                    "starting the PostgreSQL runtime",
                    BackendError::new(BackendErrorKind::Other, error),
                )
            })?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(DEFAULT_POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(std::time::Duration::from_secs(30)))
            .create_timeout(Some(std::time::Duration::from_secs(10)))
            .build()
            .map_err(|error| {
                StoreError::InvalidSettings(format!("database pool for {}: {error}", redact(url)))
            })?;
        let database = Database {
            inner: Arc::new(Inner {
                pool,
                runtime: Some(runtime),
                schema: schema.map(str::to_owned),
                shown: redact(url),
            }),
        };
        if !migrate {
            return Ok(database);
        }
        let mut conn = database.conn::<StoreError>("connecting to PostgreSQL")?;
        if let Some(schema) = schema {
            conn.execute_batch(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                .map_err(|error| StoreError::backend("creating the schema", error))?;
        }
        schema::migrate(&mut conn)?;
        Ok(database)
    }

    /// Drops `schema` and everything in it (tests that gave each store a schema of its own
    /// leave nothing behind). Refuses a name [`Database::connect_in_schema`] would refuse.
    pub fn drop_schema(url: &str, schema: &str) -> Result<(), StoreError> {
        check_schema_name(schema)?;
        let database = Database::open(url, None, false)?;
        database
            .conn::<StoreError>("dropping a schema")?
            .execute_batch(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .map_err(|error| StoreError::backend("dropping a schema", error))
    }

    /// The URL connected to, without its password.
    pub fn url(&self) -> &str {
        &self.inner.shown
    }

    /// The schema the tables live in, when one was given.
    pub fn schema(&self) -> Option<&str> {
        self.inner.schema.as_deref()
    }

    /// A connection from the pool; `action` names what failed if none can be had.
    pub(crate) fn conn<E: PgFailure>(&self, action: &'static str) -> Result<Conn, E> {
        let pool = self.inner.pool.clone();
        let Some(runtime) = &self.inner.runtime else {
            return Err(E::failure(
                action,
                BackendError::new(BackendErrorKind::Other, "the database was closed"),
            ));
        };
        let handle = runtime.spawn(async move { pool.get().await });
        // Waited for outside tokio's cooperative budget: a caller on a tokio worker (an engine
        // call in async code) whose task spent its budget would get `Pending` from the join
        // handle on every poll, and this loop, which never yields to that scheduler, would spin
        // for ever.
        let object = futures::executor::block_on(tokio::task::unconstrained(handle))
            .map_err(|error| E::failure(action, BackendError::new(BackendErrorKind::Other, error)))?
            .map_err(|error| E::failure(action, pool_error(error)))?;
        Ok(Conn { client: object })
    }

    /// Runs `work` in one write transaction (`READ COMMITTED`) and commits it; an error rolls
    /// everything back.
    pub(crate) fn write<T, E: PgFailure>(
        &self,
        work: impl FnOnce(&mut Conn) -> Result<T, E>,
    ) -> Result<T, E> {
        self.transaction("BEGIN", work)
    }

    /// Runs `work` on one snapshot (`REPEATABLE READ READ ONLY`).
    pub(crate) fn read<T, E: PgFailure>(
        &self,
        work: impl FnOnce(&mut Conn) -> Result<T, E>,
    ) -> Result<T, E> {
        self.transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", work)
    }

    fn transaction<T, E: PgFailure>(
        &self,
        begin: &str,
        work: impl FnOnce(&mut Conn) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut conn = self.conn::<E>("getting a connection")?;
        conn.execute_batch(begin)
            .map_err(|error| E::failure("starting a transaction", error))?;
        match work(&mut conn) {
            Ok(value) => {
                conn.execute_batch("COMMIT")
                    .map_err(|error| E::failure("committing", error))?;
                Ok(value)
            }
            Err(error) => {
                // A failed rollback leaves the connection in an aborted transaction: drop it
                // from the pool rather than hand it to the next caller.
                if conn.execute_batch("ROLLBACK").is_err() {
                    let _ = Object::take(conn.client);
                }
                Err(error)
            }
        }
    }
}

/// One pooled connection, used synchronously: each call waits for its answer on the calling
/// thread.
pub(crate) struct Conn {
    client: Object,
}

impl Conn {
    pub(crate) fn query(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, BackendError> {
        let statement =
            futures::executor::block_on(self.client.prepare_cached(sql)).map_err(backend_error)?;
        futures::executor::block_on(self.client.query(&statement, params)).map_err(backend_error)
    }

    pub(crate) fn query_opt(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Option<Row>, BackendError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    pub(crate) fn query_one(&mut self, sql: &str, params: Params<'_>) -> Result<Row, BackendError> {
        self.query_opt(sql, params)?.ok_or_else(|| {
            BackendError::new(
                BackendErrorKind::Other,
                format!("the statement returned no row: {sql}"),
            )
        })
    }

    pub(crate) fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, BackendError> {
        let statement =
            futures::executor::block_on(self.client.prepare_cached(sql)).map_err(backend_error)?;
        futures::executor::block_on(self.client.execute(&statement, params)).map_err(backend_error)
    }

    pub(crate) fn execute_batch(&mut self, sql: &str) -> Result<(), BackendError> {
        futures::executor::block_on(self.client.batch_execute(sql)).map_err(backend_error)
    }
}

/// A `tokio_postgres` error as a [`BackendError`], its kind read from the SQLSTATE.
pub(crate) fn backend_error(error: tokio_postgres::Error) -> BackendError {
    let kind = match error.code() {
        Some(code)
            if [
                SqlState::T_R_SERIALIZATION_FAILURE,
                SqlState::T_R_DEADLOCK_DETECTED,
                SqlState::LOCK_NOT_AVAILABLE,
                SqlState::TOO_MANY_CONNECTIONS,
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
            ]
            .contains(code) =>
        {
            BackendErrorKind::Busy
        }
        Some(code) if [SqlState::DATA_CORRUPTED, SqlState::INDEX_CORRUPTED].contains(code) => {
            BackendErrorKind::Corrupt
        }
        Some(code)
            if [
                SqlState::DISK_FULL,
                SqlState::OUT_OF_MEMORY,
                SqlState::PROGRAM_LIMIT_EXCEEDED,
            ]
            .contains(code) =>
        {
            BackendErrorKind::Full
        }
        Some(_) | None => BackendErrorKind::Other,
    };
    BackendError::new(kind, error)
}

fn pool_error(error: deadpool_postgres::PoolError) -> BackendError {
    match error {
        deadpool_postgres::PoolError::Backend(error) => backend_error(error),
        deadpool_postgres::PoolError::Timeout(_) => BackendError::new(
            BackendErrorKind::Busy,
            format!("no PostgreSQL connection free or made in time: {error}"),
        ),
        other @ (deadpool_postgres::PoolError::Closed
        | deadpool_postgres::PoolError::NoRuntimeSpecified
        | deadpool_postgres::PoolError::PostCreateHook(_)) => {
            BackendError::new(BackendErrorKind::Other, other.to_string())
        }
    }
}

/// The error a store reports a PostgreSQL failure with.
pub(crate) trait PgFailure: Sized {
    fn failure(action: &'static str, error: BackendError) -> Self;
}

impl PgFailure for StoreError {
    fn failure(action: &'static str, error: BackendError) -> StoreError {
        StoreError::backend(action, error)
    }
}

impl PgFailure for crate::sessions::SessionError {
    fn failure(action: &'static str, error: BackendError) -> Self {
        crate::sessions::SessionError::backend(action, error)
    }
}

impl PgFailure for crate::memories::MemoryError {
    fn failure(action: &'static str, error: BackendError) -> Self {
        crate::memories::MemoryError::backend(action, error)
    }
}

impl PgFailure for crate::keys::KeyError {
    fn failure(action: &'static str, error: BackendError) -> Self {
        crate::keys::KeyError::Storage(StoreError::backend(action, error))
    }
}

/// `map_err` helper: `.map_err(fail("reading a session"))`.
pub(crate) fn fail<E: PgFailure>(action: &'static str) -> impl FnOnce(BackendError) -> E {
    move |error| E::failure(action, error)
}

fn check_schema_name(schema: &str) -> Result<(), StoreError> {
    let ok = (1..=63).contains(&schema.len())
        && schema.starts_with(|c: char| c.is_ascii_lowercase())
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidSettings(format!(
            "schema {schema:?}: a schema name is 1 to 63 of a-z, 0-9 and _, starting with a letter"
        )))
    }
}

/// `url` without its password, to show in messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Whether `url` names a PostgreSQL database (`postgres://` or `postgresql://`).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

pub(crate) fn len_i64(len: usize) -> i64 {
    i64::try_from(len).unwrap_or(i64::MAX)
}

pub(crate) fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_password_never_shows() {
        assert_eq!(
            redact("postgres://skald:hunter2@db:5432/skald"),
            "postgres://skald:***@db:5432/skald"
        );
        assert_eq!(
            redact("postgres://postgres@127.0.0.1/test"),
            "postgres://postgres@127.0.0.1/test"
        );
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(check_schema_name("skald_test_1").is_ok());
        for bad in ["", "1abc", "a-b", "A", "a;drop", &"a".repeat(64)] {
            assert!(check_schema_name(bad).is_err(), "{bad:?}");
        }
    }
}
