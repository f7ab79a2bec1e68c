//! The conformance suite: the behaviour every backend of the store traits must show, written
//! against the traits only ([`SessionStore`], [`RefStore`], [`MemoryStore`], [`KeyStore`]), so
//! the SQLite stores and any later backend (PostgreSQL) are held to the same checks.
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
//! No check feeds a store a bad tenant name or session id: the store methods take a [`Tenant`]
//! and a [`SessionId`] (`skald_core::ids`), parsed where a name enters skald, so a store never
//! sees a malformed one (the parse is checked by `skald_core::ids`'s tests, and that it refuses
//! what the stores used to refuse, in the same words, by the session store's). A session's id
//! inside a new session's header is still text, and `create` refusing a bad one is checked.
//!
//! Every store is `Send + Sync` and shared between threads, so each module has a check that
//! reads run while another thread writes and that a read sees every write that returned before
//! it began ([`reads_beside_writes`] drives them): a backend with a connection pool, or with
//! replicas, must keep that promise.
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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use skald_core::ids::{SessionId, Tenant};

use crate::clock::Clock;
use crate::keys::KeyStore;
use crate::memories::MemoryStore;
use crate::refs::RefStore;
use crate::sessions::SessionStore;

pub mod keys;
pub mod leases;
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

/// `name` (a well-formed tenant name of the checks) as the [`Tenant`] the store methods take.
pub fn tenant_named(name: &str) -> Tenant {
    Tenant::parse(name).unwrap()
}

/// [`TENANT_A`] as the [`Tenant`] the store methods take.
pub fn tenant_a() -> Tenant {
    tenant_named(TENANT_A)
}

/// [`TENANT_B`] as the [`Tenant`] the store methods take.
pub fn tenant_b() -> Tenant {
    tenant_named(TENANT_B)
}

/// A session id of the checks, as the [`SessionId`] the session store's methods take.
pub fn session_id(id: &str) -> SessionId {
    SessionId::parse(id).unwrap()
}

/// Threads that read while one thread writes: `write(step)` runs for each step in turn on the
/// writing thread; meanwhile `readers` threads call `read(written)` over and over, where
/// `written` steps had returned before the call began (at least 1), and once more with every
/// step written. `read` panics when what it reads is missing one of those steps.
///
/// The writer does not run ahead: before each next step it waits until some read that began
/// after the step returned has finished, so every step is read while later writes go on (and a
/// store that serves reads from a stale copy is caught however fast it writes).
pub fn reads_beside_writes(
    steps: usize,
    readers: usize,
    write: &(dyn Fn(usize) + Sync),
    read: &(dyn Fn(usize) + Sync),
) {
    let written = AtomicUsize::new(0);
    let read_up_to = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let readers_gone = AtomicUsize::new(0);
    let failure = std::thread::scope(|scope| {
        let mut threads = Vec::with_capacity(readers + 1);
        for _ in 0..readers {
            threads.push(scope.spawn(|| {
                // Counted even when a read panics, so the writer stops waiting for reads.
                let _gone = CountOnDrop(&readers_gone);
                while !done.load(Ordering::SeqCst) {
                    match written.load(Ordering::SeqCst) {
                        0 => std::thread::yield_now(),
                        steps_seen => {
                            read(steps_seen);
                            read_up_to.fetch_max(steps_seen, Ordering::SeqCst);
                        }
                    }
                }
                match written.load(Ordering::SeqCst) {
                    0 => {}
                    steps_seen => read(steps_seen),
                }
            }));
        }
        threads.push(scope.spawn(|| {
            // Set even when a write panics, so the readers stop and the panic is reported.
            let _finished = SetOnDrop(&done);
            for step in 0..steps {
                write(step);
                written.store(step + 1, Ordering::SeqCst);
                while read_up_to.load(Ordering::SeqCst) <= step
                    && readers_gone.load(Ordering::SeqCst) < readers
                {
                    std::thread::yield_now();
                }
            }
        }));
        // Joined here, so the first failure is reported with its own message rather than as
        // "a scoped thread panicked".
        // Every thread is joined (a panicked one left unjoined would make the scope panic).
        let failures: Vec<_> = threads
            .into_iter()
            .filter_map(|thread| thread.join().err())
            .collect();
        failures.into_iter().next()
    });
    if let Some(panic) = failure {
        std::panic::resume_unwind(panic);
    }
}

struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

struct CountOnDrop<'a>(&'a AtomicUsize);

impl Drop for CountOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
