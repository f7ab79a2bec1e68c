//! Opening a database: connection settings (WAL, full sync, busy timeout) and schema migrations
//! tracked in SQLite's `user_version`. One database file holds every store (refs, sessions,
//! memories), so whichever store opens it first brings the whole schema up to date.

use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};

use crate::StoreError;

/// The schema version this build writes and reads (SQLite's `PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 7;

/// Migration `n` takes a database from version `n` to `n + 1`. Append only: a released
/// migration never changes, so every database reaches the same schema by the same steps.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 0 -> 1: the ref store.
    "CREATE TABLE refs (
        tenant         TEXT    NOT NULL,
        id             TEXT    NOT NULL,
        codec          TEXT    NOT NULL CHECK (codec IN ('raw', 'zstd')),
        content        BLOB    NOT NULL,
        original_bytes INTEGER NOT NULL,
        stored_bytes   INTEGER NOT NULL,
        created_at_ms  INTEGER NOT NULL,
        expires_at_ms  INTEGER NOT NULL,
        PRIMARY KEY (tenant, id)
    );
    CREATE INDEX refs_by_expiry ON refs (expires_at_ms);",
    // 1 -> 2: the session store. Entries are append-only: the triggers make an UPDATE or DELETE
    // of one fail, whoever issues it.
    "CREATE TABLE sessions (
        tenant         TEXT    NOT NULL,
        id             TEXT    NOT NULL,
        header         TEXT    NOT NULL,
        source_format  TEXT    NOT NULL,
        source         TEXT,
        title          TEXT,
        leaf_id        TEXT,
        entry_count    INTEGER NOT NULL DEFAULT 0,
        message_count  INTEGER NOT NULL DEFAULT 0,
        created_at_ms  INTEGER NOT NULL,
        updated_at_ms  INTEGER NOT NULL,
        PRIMARY KEY (tenant, id)
    );
    CREATE INDEX sessions_by_update ON sessions (tenant, updated_at_ms);
    CREATE TABLE session_entries (
        tenant     TEXT    NOT NULL,
        session_id TEXT    NOT NULL,
        seq        INTEGER NOT NULL,
        id         TEXT    NOT NULL,
        parent_id  TEXT,
        type       TEXT    NOT NULL,
        timestamp  TEXT    NOT NULL,
        body       TEXT    NOT NULL,
        PRIMARY KEY (tenant, session_id, seq),
        UNIQUE (tenant, session_id, id)
    );
    CREATE TRIGGER session_entries_are_never_updated BEFORE UPDATE ON session_entries
    BEGIN
        SELECT RAISE(ABORT, 'session entries are append-only: an entry is never updated');
    END;
    CREATE TRIGGER session_entries_are_never_deleted BEFORE DELETE ON session_entries
    BEGIN
        SELECT RAISE(ABORT, 'session entries are append-only: an entry is never deleted');
    END;",
    // 2 -> 3: the memory store. A row is one version of an entry and is never deleted; of its
    // columns only the status (set once: superseded or forgotten) and the derived vector change.
    // The FTS table and the LSH bands index live versions only.
    "CREATE TABLE memories (
        id               INTEGER PRIMARY KEY,
        tenant           TEXT    NOT NULL,
        uri              TEXT    NOT NULL,
        parent           TEXT    NOT NULL,
        version          INTEGER NOT NULL,
        category         TEXT    NOT NULL,
        dedup_root       TEXT    NOT NULL,
        l0               TEXT    NOT NULL,
        l1               TEXT    NOT NULL,
        l2               TEXT    NOT NULL,
        l0_given         INTEGER NOT NULL,
        l1_given         INTEGER NOT NULL,
        content_hash     TEXT    NOT NULL,
        priority         INTEGER NOT NULL,
        source           TEXT    NOT NULL,
        created_at_ms    INTEGER NOT NULL,
        updated_at_ms    INTEGER NOT NULL,
        supersedes       INTEGER,
        superseded_by    INTEGER,
        superseded_at_ms INTEGER,
        forgotten_at_ms  INTEGER,
        embedding        BLOB,
        UNIQUE (tenant, uri, version)
    );
    CREATE UNIQUE INDEX memories_live_by_uri ON memories (tenant, uri)
        WHERE superseded_by IS NULL AND forgotten_at_ms IS NULL;
    CREATE INDEX memories_live_by_hash ON memories (tenant, dedup_root, content_hash)
        WHERE superseded_by IS NULL AND forgotten_at_ms IS NULL;
    CREATE TABLE memory_merges (
        memory_id     INTEGER NOT NULL REFERENCES memories (id),
        merged_at_ms  INTEGER NOT NULL,
        kind          TEXT    NOT NULL CHECK (kind IN ('exact', 'near')),
        similarity    REAL    NOT NULL,
        requested_uri TEXT    NOT NULL,
        source        TEXT    NOT NULL
    );
    CREATE INDEX memory_merges_by_memory ON memory_merges (memory_id);
    CREATE TABLE memory_bands (
        tenant    TEXT    NOT NULL,
        band      INTEGER NOT NULL,
        memory_id INTEGER NOT NULL,
        PRIMARY KEY (tenant, band, memory_id)
    ) WITHOUT ROWID;
    CREATE VIRTUAL TABLE memories_fts USING fts5(
        tenant, path, l0, l1, l2,
        content = '', contentless_delete = 1,
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER memories_are_never_deleted BEFORE DELETE ON memories
    BEGIN
        SELECT RAISE(ABORT, 'memories are add-only: a version is never deleted (forget marks it)');
    END;
    CREATE TRIGGER memories_are_never_rewritten BEFORE UPDATE OF
        id, tenant, uri, parent, version, category, dedup_root, l0, l1, l2, l0_given, l1_given,
        content_hash, priority, source, created_at_ms, updated_at_ms, supersedes ON memories
    BEGIN
        SELECT RAISE(ABORT, 'memories are add-only: an update writes a new version');
    END;
    CREATE TRIGGER memory_status_is_set_once BEFORE UPDATE OF
        superseded_by, superseded_at_ms, forgotten_at_ms ON memories
        WHEN OLD.superseded_by IS NOT NULL OR OLD.forgotten_at_ms IS NOT NULL
    BEGIN
        SELECT RAISE(ABORT, 'a superseded or forgotten memory version stays as it is');
    END;
    CREATE TRIGGER memory_merges_are_never_changed BEFORE UPDATE ON memory_merges
    BEGIN
        SELECT RAISE(ABORT, 'memory merges are add-only');
    END;
    CREATE TRIGGER memory_merges_are_never_deleted BEFORE DELETE ON memory_merges
    BEGIN
        SELECT RAISE(ABORT, 'memory merges are add-only');
    END;",
    // 3 -> 4: API keys of `skald serve`. Only a key's SHA-256 is stored; revoking sets
    // `revoked_at_ms` once and a key row is never removed, so an audit sees every key there was.
    "CREATE TABLE api_keys (
        id            TEXT    NOT NULL PRIMARY KEY,
        tenant        TEXT    NOT NULL,
        name          TEXT    NOT NULL,
        secret_sha256 TEXT    NOT NULL UNIQUE,
        prefix        TEXT    NOT NULL,
        created_at_ms INTEGER NOT NULL,
        revoked_at_ms INTEGER
    );
    CREATE TRIGGER api_keys_are_never_deleted BEFORE DELETE ON api_keys
    BEGIN
        SELECT RAISE(ABORT, 'api keys are revoked, never deleted');
    END;
    CREATE TRIGGER api_key_revocation_is_final BEFORE UPDATE ON api_keys
        WHEN OLD.revoked_at_ms IS NOT NULL
          OR NEW.id IS NOT OLD.id OR NEW.tenant IS NOT OLD.tenant
          OR NEW.secret_sha256 IS NOT OLD.secret_sha256
    BEGIN
        SELECT RAISE(ABORT, 'an api key changes only by being revoked, once');
    END;",
    // 4 -> 5: a session's switches (a person's pauses), kept on its row, off by default.
    "ALTER TABLE sessions ADD COLUMN pause_compaction INTEGER NOT NULL DEFAULT 0
        CHECK (pause_compaction IN (0, 1));
    ALTER TABLE sessions ADD COLUMN pause_offload INTEGER NOT NULL DEFAULT 0
        CHECK (pause_offload IN (0, 1));",
    // 5 -> 6: leases on memory work (`memories::lease`): one row per claimed piece of work, its
    // holder and expiry, and once finished its result. Rows change and are deleted: a lease is
    // coordination, not history.
    "CREATE TABLE memory_leases (
        tenant        TEXT    NOT NULL,
        name          TEXT    NOT NULL,
        holder        TEXT    NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        result        TEXT,
        PRIMARY KEY (tenant, name)
    );",
    // 6 -> 7: the merges that carry a source, indexed apart: a memory that many duplicates were
    // merged into (each with no source, as every resource chunk's) is read without visiting a
    // row per merge. The condition is `memories::rows::empty_source_sql!`, spelled out here.
    r#"CREATE INDEX memory_merges_with_source ON memory_merges (memory_id)
        WHERE source <> '{"session_id":null,"entry_ids":[]}';"#,
];

/// How long a writer waits for another connection (another process on the same file) to finish.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Creates the directory that will hold the database file at `path`, if it has one.
pub(crate) fn create_parent_dir(path: &std::path::Path) -> Result<(), StoreError> {
    match path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        Some(parent) => std::fs::create_dir_all(parent).map_err(|source| StoreError::Io {
            path: parent.to_path_buf(),
            source,
        }),
        None => Ok(()),
    }
}

/// Applies connection settings and brings the schema up to [`SCHEMA_VERSION`].
pub(crate) fn prepare(conn: &mut Connection) -> Result<(), StoreError> {
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(StoreError::storage("setting the busy timeout"))?;
    // WAL lets readers (a fetch from the HTTP server) proceed while a put commits. On a file
    // system without WAL support SQLite keeps its rollback journal; with synchronous=FULL that
    // is just as durable, only slower, so the returned mode is not treated as an error.
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
        .map_err(StoreError::storage("enabling WAL"))?;
    // FULL, not NORMAL: in WAL mode NORMAL skips the fsync at commit, so a commit survives a
    // killed process but not a power cut or kernel crash. A ref id is shown to a model as soon as
    // `put` returns, so the commit must be on disk by then: FULL fsyncs the WAL at each commit.
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(StoreError::storage("setting synchronous=FULL"))?;
    migrate(conn)
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    // A schema already current is only read: every store of a process opens the database, and a
    // write transaction here would be a commit — an fsync with synchronous=FULL — per store and
    // per process (a `skald hook` opens three stores to answer once).
    let current: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(StoreError::storage("reading the schema version"))?;
    if current == SCHEMA_VERSION {
        return Ok(());
    }
    // IMMEDIATE takes the write lock before reading the version, so two processes opening a new
    // file at once cannot both run the same migration.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::storage("starting the schema migration"))?;
    let found: i64 = tx
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(StoreError::storage("reading the schema version"))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::UnsupportedSchema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    let applied = usize::try_from(found)
        .map_err(|_| StoreError::Corrupt(format!("schema version {found} is negative")))?;
    for sql in MIGRATIONS.iter().skip(applied) {
        tx.execute_batch(sql)
            .map_err(StoreError::storage("migrating the schema"))?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(StoreError::storage("writing the schema version"))?;
    tx.commit()
        .map_err(StoreError::storage("committing the schema migration"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn migrations_match_the_version() {
        assert_eq!(i64::try_from(MIGRATIONS.len()).unwrap(), SCHEMA_VERSION);
    }

    #[test]
    fn prepare_is_idempotent_and_refuses_newer_schemas() {
        let mut conn = Connection::open_in_memory().unwrap();
        prepare(&mut conn).unwrap();
        prepare(&mut conn).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let error = prepare(&mut conn).unwrap_err();
        assert!(
            matches!(error, StoreError::UnsupportedSchema { found, .. } if found == SCHEMA_VERSION + 1),
            "{error}"
        );
    }
}
