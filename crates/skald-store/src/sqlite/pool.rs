//! The connections of a SQLite store: one writer, and beside it, for a database file, a small
//! pool of read-only connections.
//!
//! Why: a connection is used by one thread at a time, so a store with one connection runs its
//! reads one after another, and behind every write (a write holds the connection through its
//! `fsync`). In WAL mode SQLite lets readers run beside the one writer, each on its own
//! snapshot; a read transaction begun after a commit returned sees that commit. So reads take
//! a reader of the pool and only writes queue for the writer.
//!
//! - **The writer** is the connection the store was opened with: WAL, `synchronous=FULL`, the
//!   busy timeout and the schema ([`schema::prepare`]). Every write, and every read that must
//!   see the store's own uncommitted changes, runs on it.
//! - **Readers** are opened read-only (SQLite refuses any write on them) when a read finds no
//!   idle one, up to [`MAX_READERS`]; past that a read waits for one. A store that never reads
//!   concurrently opens one.
//! - **In memory** there is only the writer: separate in-memory connections would be separate
//!   databases, so reads run on the writer, as before the pool.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use rusqlite::{Connection, OpenFlags};

use super::SqliteFailure;
use crate::StoreError;
use crate::schema;

/// Read-only connections a file-backed store opens at most. Reads are short (an index lookup, a
/// full-text query over one tenant), so a few connections keep the cores busy; more would only
/// hold more page caches and statement caches in memory.
pub(crate) const MAX_READERS: usize = 4;

/// Which connection a read ran on, for state kept per connection (what it last saw).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ConnectionId(usize);

impl ConnectionId {
    /// The id of reader slot `index`, for tests that drive connections by hand.
    #[cfg(test)]
    pub(crate) fn reader(index: usize) -> ConnectionId {
        ConnectionId(index)
    }
}

/// The writer and the readers of one store.
pub(crate) struct Connections {
    /// `None` in memory. Declared before the writer so the readers close first: the last
    /// connection to close checkpoints the WAL and removes it, which a read-only one cannot.
    readers: Option<Readers>,
    writer: Mutex<Connection>,
}

struct Readers {
    /// The database file, absolute, so a reader opened later finds the same file even if the
    /// process has changed its working directory since.
    path: PathBuf,
    /// Each slot holds a reader once one was needed there.
    slots: [Mutex<Option<Connection>>; MAX_READERS],
    /// Which slot a read waits for when every slot is busy: in turn, so waiting reads spread.
    next_wait: AtomicUsize,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field(
                "readers",
                &self.readers.as_ref().map(|readers| &readers.path),
            )
            .finish_non_exhaustive()
    }
}

impl Connections {
    /// Opens the database file at `path` (creating it and its directory if needed) and brings
    /// its schema up to date through the writer. No reader is opened yet.
    pub(crate) fn open<E>(path: &Path) -> Result<Connections, E>
    where
        E: SqliteFailure + From<StoreError>,
    {
        schema::create_parent_dir(path)?;
        let mut writer =
            Connection::open(path).map_err(|error| E::failure("opening the database", error))?;
        schema::prepare(&mut writer)?;
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(Connections {
            readers: Some(Readers {
                path,
                slots: Default::default(),
                next_wait: AtomicUsize::new(0),
            }),
            writer: Mutex::new(writer),
        })
    }

    /// A database in memory, gone when dropped: the writer alone.
    pub(crate) fn in_memory<E>() -> Result<Connections, E>
    where
        E: SqliteFailure + From<StoreError>,
    {
        let mut writer = Connection::open_in_memory()
            .map_err(|error| E::failure("opening an in-memory database", error))?;
        schema::prepare(&mut writer)?;
        Ok(Connections {
            readers: None,
            writer: Mutex::new(writer),
        })
    }

    /// The writer, for a write (or a read that must run where the writes do).
    // A panic while the lock was held cannot leave SQLite inconsistent (an open transaction is
    // rolled back when dropped), so a poisoned lock is used as it is.
    pub(crate) fn writer(&self) -> MutexGuard<'_, Connection> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `work` on a reader: an idle one of the pool, a new one while the pool has room, or
    /// the first to come free. In memory, on the writer.
    pub(crate) fn read<T, E: SqliteFailure>(
        &self,
        work: impl FnOnce(&mut Connection, ConnectionId) -> Result<T, E>,
    ) -> Result<T, E> {
        let Some(readers) = &self.readers else {
            return work(&mut self.writer(), ConnectionId(MAX_READERS));
        };
        let (index, mut slot) = readers.take_slot();
        // take-then-insert rather than a match on `as_mut()`: the borrow checker cannot see that
        // the `None` arm no longer borrows the slot.
        let conn = match slot.take() {
            Some(conn) => slot.insert(conn),
            None => slot.insert(
                open_reader(&readers.path)
                    .map_err(|error| E::failure("opening a read connection", error))?,
            ),
        };
        work(conn, ConnectionId(index))
    }

    /// How many readers are open; for tests of the pool.
    #[cfg(test)]
    fn open_readers(&self) -> usize {
        self.readers.as_ref().map_or(0, |readers| {
            readers
                .slots
                .iter()
                .filter(|slot| {
                    slot.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .is_some()
                })
                .count()
        })
    }
}

impl Readers {
    /// The first idle slot (opened ones come first, so a store that reads from one thread at a
    /// time keeps one reader), or, when all are busy, the next slot in turn once it is free.
    fn take_slot(&self) -> (usize, MutexGuard<'_, Option<Connection>>) {
        for (index, slot) in self.slots.iter().enumerate() {
            match slot.try_lock() {
                Ok(guard) => return (index, guard),
                Err(TryLockError::Poisoned(poisoned)) => return (index, poisoned.into_inner()),
                Err(TryLockError::WouldBlock) => {}
            }
        }
        let index = self.next_wait.fetch_add(1, Ordering::Relaxed) % MAX_READERS;
        let guard = self.slots[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (index, guard)
    }
}

/// A read-only connection to the file the writer prepared (so it is in WAL mode with the current
/// schema).
pub(crate) fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // A reader waits only while another process recovers the WAL or changes the journal mode.
    conn.busy_timeout(schema::BUSY_TIMEOUT)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::{Arc, Barrier};

    use super::*;

    fn file_connections() -> (tempfile::TempDir, Connections) {
        let dir = tempfile::tempdir().unwrap();
        let connections = Connections::open::<StoreError>(&dir.path().join("db.sqlite3")).unwrap();
        (dir, connections)
    }

    #[test]
    fn readers_are_opened_when_needed_and_refuse_writes() {
        let (_dir, connections) = file_connections();
        assert_eq!(connections.open_readers(), 0);
        let count: i64 = connections
            .read(|conn, _| {
                conn.query_row("SELECT count(*) FROM refs", [], |row| row.get(0))
                    .map_err(StoreError::storage("counting"))
            })
            .unwrap();
        assert_eq!(count, 0);
        connections
            .read(|conn, _| {
                let refused = conn.execute("DELETE FROM refs", []);
                assert!(refused.is_err(), "a reader wrote");
                Ok::<_, StoreError>(())
            })
            .unwrap();
        assert_eq!(
            connections.open_readers(),
            1,
            "reads one at a time share a reader"
        );
    }

    #[test]
    fn concurrent_reads_get_their_own_readers_up_to_the_bound() {
        let (_dir, connections) = file_connections();
        let connections = Arc::new(connections);
        let barrier = Arc::new(Barrier::new(MAX_READERS));
        let arrived = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..MAX_READERS + 2)
            .map(|_| {
                let connections = Arc::clone(&connections);
                let barrier = Arc::clone(&barrier);
                let arrived = Arc::clone(&arrived);
                std::thread::spawn(move || {
                    connections
                        .read(|conn, _| {
                            // The first MAX_READERS reads wait here for each other, which they
                            // can only do each on a reader of its own; the later ones wait for
                            // a reader to come free.
                            if arrived.fetch_add(1, Ordering::SeqCst) < MAX_READERS {
                                barrier.wait();
                            }
                            conn.query_row("SELECT 1", [], |row| row.get::<_, i64>(0))
                                .map_err(StoreError::storage("reading"))
                        })
                        .unwrap()
                })
            })
            .collect();
        for handle in handles {
            assert_eq!(handle.join().unwrap(), 1);
        }
        assert_eq!(connections.open_readers(), MAX_READERS);
    }

    #[test]
    fn closing_the_store_leaves_no_write_ahead_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite3");
        let connections = Connections::open::<StoreError>(&path).unwrap();
        connections
            .read(|conn, _| {
                conn.query_row("SELECT count(*) FROM refs", [], |row| row.get::<_, i64>(0))
                    .map_err(StoreError::storage("counting"))
            })
            .unwrap();
        drop(connections);
        let wal = dir.path().join("db.sqlite3-wal");
        assert!(
            !wal.exists(),
            "the last connection to close left the WAL behind"
        );
    }

    #[test]
    fn in_memory_reads_run_on_the_writer() {
        let connections = Connections::in_memory::<StoreError>().unwrap();
        connections
            .writer()
            .execute(
                "INSERT INTO api_keys (id, tenant, name, secret_sha256, prefix, created_at_ms)
                 VALUES ('k', 't', 'n', 's', 'p', 0)",
                [],
            )
            .unwrap();
        let count: i64 = connections
            .read(|conn, _| {
                conn.query_row("SELECT count(*) FROM api_keys", [], |row| row.get(0))
                    .map_err(StoreError::storage("counting"))
            })
            .unwrap();
        assert_eq!(count, 1);
        assert_eq!(connections.open_readers(), 0);
    }
}
