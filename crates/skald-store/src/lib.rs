//! Durable storage for skald. The **ref store** keeps the originals of tool outputs that the
//! pipeline offloaded or truncated, per tenant under their content hash, so a model can fetch
//! them back through a `[REF_ID: …]` placeholder. The **session store** ([`sessions`]) keeps each
//! session as an append-only tree of OpenClaw entries. The **memory store** ([`memories`]) keeps
//! long-term memories under `viking://` URIs, add-only, deduplicated, with full-text and vector
//! search. All three live in one database file.
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
//! use skald_core::message::Block;
//! use skald_core::refs::{placeholder, RefPayload};
//! use skald_store::{ManualClock, RefSettings, RefStore, SqliteRefStore, StoreError};
//!
//! # fn main() -> Result<(), StoreError> {
//! let clock = Arc::new(ManualClock::new(1_700_000_000_000));
//! let store = SqliteRefStore::in_memory_with_clock(RefSettings::default(), clock.clone())?;
//!
//! // Offload: store the original first, then show the model the placeholder.
//! let output = RefPayload::new(vec![Block::text("error: disk full\n".repeat(500))]);
//! let id = store.put("acme", &output)?;
//! let shown = placeholder(&id, "log: 500 lines, 500 errors");
//!
//! // The model asks for it back with the token it saw; any other tenant cannot see it.
//! assert_eq!(store.get("acme", &shown)?, output);
//! assert!(matches!(store.get("globex", &shown), Err(StoreError::NotFound { .. })));
//! assert!(matches!(store.get("acme", "../../etc/passwd"), Err(StoreError::InvalidId(_))));
//!
//! let stats = store.stats("acme")?;
//! assert_eq!(stats.count, 1);
//! assert!(stats.stored_bytes < stats.original_bytes / 10, "repetitive text compresses");
//!
//! // A day later the ref has expired: a distinct error, and then it is gone.
//! clock.advance(24 * 60 * 60 * 1000);
//! assert!(matches!(store.get("acme", id.as_str()), Err(StoreError::Expired { .. })));
//! assert!(matches!(store.get("acme", id.as_str()), Err(StoreError::NotFound { .. })));
//!
//! // The engine only needs the trait, so its tests can use any implementation.
//! fn fetch(refs: &dyn RefStore, tenant: &str, token: &str) -> Result<String, StoreError> {
//!     Ok(refs.get(tenant, token)?.text())
//! }
//! let id = store.put("acme", &output)?;
//! assert!(fetch(&store, "acme", id.as_str())?.starts_with("error: disk full"));
//! # Ok(())
//! # }
//! ```
//!
//! On disk: [`SqliteRefStore::open`] takes the database file's path (the caller decides where in
//! the data directory; [`DATABASE_FILE`] is the suggested name).

mod cache;
pub mod clock;
mod codec;
#[cfg(feature = "conformance")]
pub mod conformance;
mod error;
pub mod keys;
pub mod memories;
pub mod refs;
mod schema;
pub mod sessions;
mod sqlite;
pub mod tenant;

pub use cache::CacheStats;
pub use clock::{Clock, ManualClock, SystemClock};
pub use codec::Codec;
pub use error::{BackendError, BackendErrorKind, StoreError};
pub use keys::{KeyError, KeyStore, SqliteKeyStore};
pub use memories::{MemoryError, MemoryStore, SqliteMemoryStore};
pub use refs::{
    DEFAULT_CACHE_BYTES, DEFAULT_CACHE_ENTRIES, DEFAULT_TTL, MAX_TTL, MIN_TTL, RefInfo,
    RefSettings, RefStats, RefStore, SqliteRefStore,
};
pub use schema::SCHEMA_VERSION;
pub use sessions::{SessionError, SessionStore, SqliteSessionStore};
pub use tenant::{MAX_TENANT_LEN, validate_tenant};

/// The suggested file name of the database in skald's data directory.
pub const DATABASE_FILE: &str = "skald.sqlite3";
