//! The conformance suite: the behaviour every backend of the store traits must show, written
//! against the traits only ([`SessionStore`](crate::SessionStore),
//! [`RefStore`](crate::RefStore), [`MemoryStore`](crate::MemoryStore),
//! [`KeyStore`](crate::KeyStore)), so the SQLite stores and any later backend (PostgreSQL) are
//! held to the same checks.
//!
//! Behind the cargo feature `conformance` (off by default). A backend's test turns it on with a
//! dev-dependency, `skald-store = { workspace = true, features = ["conformance"] }`; this crate's
//! own `tests/conformance_sqlite.rs` gets it from a dev-dependency of the crate on itself.
//!
//! Each check is a public function that takes a factory and **panics** with a message naming the
//! violated property, as a test assertion does: the module is test support, so `unwrap`,
//! `expect` and `panic!` are allowed here on purpose (`clippy::unwrap_used` and
//! `clippy::expect_used` are denied everywhere else).
//!
//! - A **fresh** factory ([`NewSessionStore`], [`NewRefStore`], [`NewMemoryStore`],
//!   [`NewKeyStore`]) returns a new, empty store on every call.
//! - A **reopen** factory (same types) returns, on every call, a new handle on the *same*
//!   persistent storage (for SQLite: the same database file). The durability checks write through
//!   one handle, drop it, and read through the next. A backend with no persistent storage (an
//!   in-memory store) skips them.
//!
//! [`sessions::run_all`], [`refs::run_all`], [`memories::run_all`] and [`keys::run_all`] run
//! every check of a store but durability; each module's `CHECKS` lists the checks by name, for a
//! backend that wants one test per check.
//!
//! ```ignore
//! // In a PostgreSQL backend's tests (the feature turned on by its dev-dependency):
//! use skald_store::conformance;
//! #[test]
//! fn sessions_conform() {
//!     conformance::sessions::run_all(&|| Box::new(PgSessionStore::fresh_schema(&url())));
//! }
//! #[test]
//! fn sessions_survive_reopen() {
//!     let schema = unique_schema();
//!     conformance::sessions::survives_reopen(&|| Box::new(PgSessionStore::open(&url(), &schema)));
//! }
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use crate::clock::Clock;
use crate::keys::KeyStore;
use crate::memories::MemoryStore;
use crate::refs::RefStore;
use crate::sessions::SessionStore;

pub mod keys;
pub mod memories;
pub mod refs;
pub mod sessions;

/// Makes a session store: a fresh, empty one, or (for durability) a reopened one.
pub type NewSessionStore<'a> = dyn Fn() -> Box<dyn SessionStore> + 'a;

/// Makes a ref store whose expiry is measured on `clock` (the suite moves it by hand). The
/// store's TTL is what the backend chooses; the checks that need it take it as an argument.
pub type NewRefStore<'a> = dyn Fn(Arc<dyn Clock>) -> Box<dyn RefStore> + 'a;

/// Makes a memory store: a fresh, empty one, or (for durability) a reopened one.
pub type NewMemoryStore<'a> = dyn Fn() -> Box<dyn MemoryStore> + 'a;

/// Makes a key store: a fresh, empty one, or (for durability) a reopened one.
pub type NewKeyStore<'a> = dyn Fn() -> Box<dyn KeyStore> + 'a;

/// A check of session stores, as listed in [`sessions::CHECKS`].
pub type SessionCheck = fn(&NewSessionStore<'_>);

/// A check of ref stores, as listed in [`refs::CHECKS`]: it takes the stores' TTL too.
pub type RefCheck = fn(&NewRefStore<'_>, std::time::Duration);

/// A check of memory stores, as listed in [`memories::CHECKS`].
pub type MemoryCheck = fn(&NewMemoryStore<'_>);

/// A check of key stores, as listed in [`keys::CHECKS`].
pub type KeyCheck = fn(&NewKeyStore<'_>);

/// Two tenants every check uses; the isolation checks write as [`TENANT_A`] and look as
/// [`TENANT_B`].
pub const TENANT_A: &str = "conformance-a";
/// See [`TENANT_A`].
pub const TENANT_B: &str = "conformance-b";

/// Tenant names every store must refuse before touching storage.
pub const INVALID_TENANTS: &[&str] = &["", "../a", "a b", "a/b"];
