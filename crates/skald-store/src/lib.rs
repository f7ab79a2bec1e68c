//! Durable storage for skald. The **ref store** keeps the originals of tool outputs that the
//! pipeline offloaded or truncated, per tenant under their content hash, so a model can fetch
//! them back through a `[REF_ID: …]` placeholder. The **session store** ([`sessions`]) keeps each
//! session as an append-only tree of OpenClaw entries. The **memory store** ([`memories`]) keeps
//! long-term memories under `viking://` URIs, add-only, deduplicated, with full-text and vector
//! search. The **key store** ([`keys`]) keeps the API keys of `skald serve`. All four live in one
//! database: a SQLite file (the `Sqlite*` stores, the default), or a PostgreSQL database shared
//! by several servers (the `Pg*` stores over a [`postgres::Database`]).
//!
//! Guarantees, each with its own tests:
//! - **A ref id is handed out only once its content is durable.** [`SqliteRefStore::put`] returns
//!   after the row is committed with `synchronous=FULL` (WAL mode), so it survives the process
//!   being killed, and the OS crashing, the moment `put` returns.
//! - **Ids are checked before storage is touched.** Lookups take untrusted text and parse it with
//!   [`RefId::parse`](skald_core::refs::RefId::parse): `../../x`, upper case and short ids are
//!   [`StoreError::InvalidId`].
//! - **Nothing crosses tenants.** A ref stored for one tenant is [`StoreError::NotFound`] for
//!   every other.
//! - **Everything is kept.** The stored content is the canonical bytes of the whole
//!   [`RefPayload`](skald_core::refs::RefPayload), images included; zstd-compressed when that is
//!   smaller.
//! - **Expiry is explicit.** Refs live for a TTL (default 24 h, at least 10 min) after their last
//!   put; reading an expired ref gives [`StoreError::Expired`] and removes it. Time comes from a
//!   [`Clock`], so tests move it by hand.
//!
//! ```
//! use std::sync::Arc;
//! use skald_core::ids::Tenant;
//! use skald_core::message::Block;
//! use skald_core::refs::{placeholder, RefPayload};
//! use skald_store::{ManualClock, RefSettings, RefStore, SqliteRefStore, StoreError};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Tenants are parsed where they enter skald; the store trusts what it is given.
//! let (acme, globex) = (Tenant::parse("acme")?, Tenant::parse("globex")?);
//! let clock = Arc::new(ManualClock::new(1_700_000_000_000));
//! let store = SqliteRefStore::in_memory_with_clock(RefSettings::default(), clock.clone())?;
//!
//! // Offload: store the original first, then show the model the placeholder.
//! let output = RefPayload::new(vec![Block::text("error: disk full\n".repeat(500))]);
//! let id = store.put(&acme, &output)?;
//! let shown = placeholder(&id, "log: 500 lines, 500 errors");
//!
//! // The model asks for it back with the token it saw; any other tenant cannot see it.
//! assert_eq!(store.get(&acme, &shown)?, output);
//! assert!(matches!(store.get(&globex, &shown), Err(StoreError::NotFound { .. })));
//! assert!(matches!(store.get(&acme, "../../etc/passwd"), Err(StoreError::InvalidId(_))));
//!
//! let stats = store.stats(&acme)?;
//! assert_eq!(stats.count, 1);
//! assert!(stats.stored_bytes < stats.original_bytes / 10, "repetitive text compresses");
//!
//! // A day later the ref has expired: a distinct error, and then it is gone.
//! clock.advance(24 * 60 * 60 * 1000);
//! assert!(matches!(store.get(&acme, id.as_str()), Err(StoreError::Expired { .. })));
//! assert!(matches!(store.get(&acme, id.as_str()), Err(StoreError::NotFound { .. })));
//!
//! // The engine only needs the trait, so its tests can use any implementation.
//! fn fetch(refs: &dyn RefStore, tenant: &Tenant, token: &str) -> Result<String, StoreError> {
//!     Ok(refs.get(tenant, token)?.text())
//! }
//! let id = store.put(&acme, &output)?;
//! assert!(fetch(&store, &acme, id.as_str())?.starts_with("error: disk full"));
//! # Ok(())
//! # }
//! ```
//!
//! On disk: [`SqliteRefStore::open`] takes the database file's path (the caller decides where in
//! the data directory; [`DATABASE_FILE`] is the suggested name).
//!
//! # How storage is laid out
//!
//! - **Traits, then backends.** Callers see the traits [`RefStore`], [`SessionStore`],
//!   [`MemoryStore`] and [`KeyStore`] and their error types ([`StoreError`], [`SessionError`],
//!   [`MemoryError`], [`KeyError`]). No public type names the backend's library: a backend
//!   failure is a [`BackendError`], whose [`BackendErrorKind`] (busy, corrupt, full, other) says
//!   what a caller can do about it. The SQLite backend is the `Sqlite*` stores.
//! - **One file, one schema.** The SQLite stores share [`DATABASE_FILE`]; whichever opens it
//!   first brings the schema up to [`SCHEMA_VERSION`] (migrations tracked in `user_version`).
//!   The PostgreSQL stores share one [`postgres::Database`] (a pool on a database and, if given,
//!   a schema); opening it migrates the schema under an advisory lock (`skald_schema`).
//! - **A writer and a pool of readers.** Each file-backed SQLite store has one writer connection
//!   (WAL, `synchronous=FULL`, a 5 s busy timeout), through which every write goes, and up to 4
//!   read-only connections, opened when reads need them, that reads use beside the writer. WAL
//!   gives each read a snapshot holding every commit that returned before the read began. A store
//!   in memory (`in_memory()`) has only its one connection: separate in-memory connections would
//!   be separate databases.
//! - **Policy above primitives.** What a memory search returns (which terms count, the BM25,
//!   date, directory and vector rankings, their fusion) is decided in [`memories::search`], and
//!   what counts as a duplicate on the write path in [`memories::dedup`], over small primitive
//!   traits ([`memories::search::SearchPrimitives`], [`memories::dedup::DuplicatePrimitives`])
//!   that a backend implements: candidates with raw scores, document counts, rows by id,
//!   duplicate lookups. SQLite provides them with FTS5, vectors compared in memory and MinHash
//!   LSH bands; PostgreSQL provides the same primitives (FTS5's tokens in a term table, BM25
//!   computed as FTS5 computes it) and ranks identically.
//! - **One contract for every backend.** The `conformance` feature's suite
//!   (`skald_store::conformance`) checks any backend of the traits: behaviour, tenant isolation,
//!   documented errors, reads beside writes on other threads, durability across a reopen.
//!
//! # Synchronous traits, async callers
//!
//! The store traits are synchronous, and stay so; an async caller runs a store call that can
//! take long (a search over a large store, a batch write waiting for its `fsync`, an import) so
//! that it does not stall the runtime — the engine uses `tokio::task::block_in_place` on a
//! multi-threaded runtime (`skald_engine::blocking`), which borrows instead of copying;
//! `spawn_blocking` with the store in an `Arc` works as well — and a call that is short by
//! construction (an API key lookup, one indexed row) inline. Why:
//!
//! - SQLite is synchronous by nature: a call is a few microseconds to a few milliseconds of
//!   in-process work and disk I/O, with nothing to await. An async trait would only wrap each
//!   call in a future that blocks anyway, and make every caller and every test async.
//! - The PostgreSQL backend ([`postgres`]) fits the same shape. It uses `tokio-postgres` with a
//!   `deadpool-postgres` pool, driven by a two-thread tokio runtime of its own; a store call
//!   waits for its statements' answers on the calling thread (`futures::executor::block_on` on
//!   a client future, which needs no runtime), so it works from `block_in_place`, from a plain
//!   thread, and inline in a handler alike. The synchronous `postgres` crate was the other
//!   candidate; its calls `block_on` a runtime of their own, which panics on a runtime thread
//!   outside `block_in_place` (an inline key lookup). It passes the same conformance suite
//!   (`tests/conformance_postgres.rs`), and its searches equal SQLite's to the last bit
//!   (`tests/search_pinned.rs`): FTS5's tokens and BM25 are recomputed over a term table.
//! - One trait shape for every backend keeps the engine's code free of backend differences, and
//!   keeps `&dyn RefStore` and friends object-safe without boxing futures.
//!
//! The stores are `Send + Sync`, so a store shared in an `Arc` moves into `spawn_blocking`
//! closures as it is.

#![warn(missing_docs)]

mod cache;
pub mod clock;
mod codec;
#[cfg(feature = "conformance")]
pub mod conformance;
mod error;
pub mod keys;
pub mod memories;
pub mod postgres;
pub mod refs;
mod schema;
pub mod sessions;
mod shared;
mod sqlite;
#[cfg(feature = "test-stores")]
pub mod test_stores;

pub use cache::CacheStats;
pub use clock::{Clock, ManualClock, SystemClock};
pub use codec::Codec;
pub use error::{BackendError, BackendErrorKind, StoreError};
pub use keys::{KeyError, KeyStore, PgKeyStore, SqliteKeyStore};
pub use memories::{MemoryError, MemoryStore, PgMemoryStore, SqliteMemoryStore};
pub use postgres::Database;
pub use refs::{
    DEFAULT_CACHE_BYTES, DEFAULT_CACHE_ENTRIES, DEFAULT_TTL, MAX_TTL, MIN_TTL, PgRefStore, RefInfo,
    RefSettings, RefStats, RefStore, SqliteRefStore,
};
pub use schema::SCHEMA_VERSION;
pub use sessions::{PgSessionStore, SessionError, SessionStore, SqliteSessionStore};

/// The suggested file name of the database in skald's data directory.
pub const DATABASE_FILE: &str = "skald.sqlite3";
