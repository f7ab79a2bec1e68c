//! The PostgreSQL schema and its migrations, run when a [`Database`](super::Database) opens:
//! under a transaction-scoped advisory lock (so several skald servers starting at once migrate
//! once), the version in `skald_schema` is brought up to [`PG_SCHEMA_VERSION`]. The tables
//! mirror the SQLite ones (`crate::schema`); what differs is said where it does:
//!
//! - Text compared by range or sorted (`tenant`, ids, URIs) is `COLLATE "C"`: byte order, as
//!   SQLite compares, so URI prefix ranges and listings come out the same.
//! - Append-only and add-only rules are triggers here too, refusing whoever sends the statement.
//! - The full-text index is `memory_terms`: for each live version, every token SQLite's FTS5
//!   (`porter unicode61 remove_diacritics 2`) makes of its indexed columns, with positions, and
//!   `memory_index_totals`, FTS5's row and token counts; BM25 is computed over them exactly as
//!   FTS5 computes it (`crate::memories::postgres::fts`), so the ranking is SQLite's.
//! - Vectors are `real[]` and compared in the store, as SQLite's are: the exact cosine the
//!   ranking policy fuses. (pgvector is not needed for that, and Debian 12 does not package it
//!   for PostgreSQL 15.)
//! - `memory_tenants` has a row per tenant whose `writes` counter every memory write of the
//!   tenant bumps: the row lock serialises a tenant's memory writes (the duplicate checks see
//!   every earlier write, across servers) and the counter keys the vector cache.

use super::{Conn, fail};
use crate::StoreError;

/// The schema version this build writes and reads.
pub const PG_SCHEMA_VERSION: i32 = 4;

/// The advisory lock key migrations hold ("skald" in ASCII).
const MIGRATION_LOCK: i64 = 0x0073_6b61_6c64;

/// Migration `n` takes a database from version `n` to `n + 1`. Append only.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 0 -> 1: every store.
    r#"
    CREATE TABLE refs (
        tenant         TEXT COLLATE "C" NOT NULL,
        id             TEXT COLLATE "C" NOT NULL,
        codec          TEXT   NOT NULL CHECK (codec IN ('raw', 'zstd')),
        content        BYTEA  NOT NULL,
        original_bytes BIGINT NOT NULL,
        stored_bytes   BIGINT NOT NULL,
        created_at_ms  BIGINT NOT NULL,
        expires_at_ms  BIGINT NOT NULL,
        PRIMARY KEY (tenant, id)
    );
    CREATE INDEX refs_by_expiry ON refs (expires_at_ms);

    CREATE TABLE sessions (
        tenant         TEXT COLLATE "C" NOT NULL,
        id             TEXT COLLATE "C" NOT NULL,
        header         TEXT   NOT NULL,
        source_format  TEXT   NOT NULL,
        source         TEXT,
        title          TEXT,
        leaf_id        TEXT COLLATE "C",
        entry_count    BIGINT NOT NULL DEFAULT 0,
        message_count  BIGINT NOT NULL DEFAULT 0,
        created_at_ms  BIGINT NOT NULL,
        updated_at_ms  BIGINT NOT NULL,
        PRIMARY KEY (tenant, id)
    );
    CREATE INDEX sessions_by_update ON sessions (tenant, updated_at_ms);
    CREATE TABLE session_entries (
        tenant     TEXT COLLATE "C" NOT NULL,
        session_id TEXT COLLATE "C" NOT NULL,
        seq        BIGINT NOT NULL,
        id         TEXT COLLATE "C" NOT NULL,
        parent_id  TEXT COLLATE "C",
        type       TEXT   NOT NULL,
        timestamp  TEXT   NOT NULL,
        body       TEXT   NOT NULL,
        PRIMARY KEY (tenant, session_id, seq),
        UNIQUE (tenant, session_id, id)
    );
    CREATE FUNCTION skald_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION '%', TG_ARGV[0];
    END $$;
    CREATE TRIGGER session_entries_are_never_updated BEFORE UPDATE ON session_entries
        FOR EACH ROW EXECUTE FUNCTION
        skald_refuse('session entries are append-only: an entry is never updated');
    CREATE TRIGGER session_entries_are_never_deleted BEFORE DELETE ON session_entries
        FOR EACH ROW EXECUTE FUNCTION
        skald_refuse('session entries are append-only: an entry is never deleted');

    CREATE TABLE memories (
        id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant           TEXT COLLATE "C" NOT NULL,
        uri              TEXT COLLATE "C" NOT NULL,
        parent           TEXT COLLATE "C" NOT NULL,
        version          BIGINT  NOT NULL,
        category         TEXT    NOT NULL,
        dedup_root       TEXT COLLATE "C" NOT NULL,
        l0               TEXT    NOT NULL,
        l1               TEXT    NOT NULL,
        l2               TEXT    NOT NULL,
        l0_given         BOOLEAN NOT NULL,
        l1_given         BOOLEAN NOT NULL,
        content_hash     TEXT    NOT NULL,
        priority         BIGINT  NOT NULL,
        source           TEXT    NOT NULL,
        created_at_ms    BIGINT  NOT NULL,
        updated_at_ms    BIGINT  NOT NULL,
        supersedes       BIGINT,
        superseded_by    BIGINT,
        superseded_at_ms BIGINT,
        forgotten_at_ms  BIGINT,
        embedding        REAL[],
        fts_tokens       BIGINT  NOT NULL,
        UNIQUE (tenant, uri, version)
    );
    CREATE UNIQUE INDEX memories_live_by_uri ON memories (tenant, uri)
        WHERE superseded_by IS NULL AND forgotten_at_ms IS NULL;
    CREATE INDEX memories_live_by_hash ON memories (tenant, dedup_root, content_hash)
        WHERE superseded_by IS NULL AND forgotten_at_ms IS NULL;
    CREATE TABLE memory_merges (
        seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        memory_id     BIGINT NOT NULL REFERENCES memories (id),
        merged_at_ms  BIGINT NOT NULL,
        kind          TEXT   NOT NULL CHECK (kind IN ('exact', 'near')),
        similarity    DOUBLE PRECISION NOT NULL,
        requested_uri TEXT   NOT NULL,
        source        TEXT   NOT NULL
    );
    CREATE INDEX memory_merges_by_memory ON memory_merges (memory_id);
    CREATE TABLE memory_bands (
        tenant    TEXT COLLATE "C" NOT NULL,
        band      BIGINT NOT NULL,
        memory_id BIGINT NOT NULL,
        PRIMARY KEY (tenant, band, memory_id)
    );
    CREATE TABLE memory_terms (
        memory_id BIGINT   NOT NULL,
        tenant    TEXT COLLATE "C" NOT NULL,
        term      TEXT COLLATE "C" NOT NULL,
        col       SMALLINT NOT NULL,
        positions TEXT     NOT NULL,
        PRIMARY KEY (memory_id, term, col)
    );
    CREATE INDEX memory_terms_by_tenant_term ON memory_terms (tenant, term);
    CREATE INDEX memory_terms_by_term ON memory_terms (term);
    CREATE TABLE memory_index_totals (
        only_row  BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
        documents BIGINT NOT NULL,
        tokens    BIGINT NOT NULL,
        live      BIGINT NOT NULL
    );
    INSERT INTO memory_index_totals (documents, tokens, live) VALUES (0, 0, 0);
    CREATE TABLE memory_tenants (
        tenant TEXT COLLATE "C" PRIMARY KEY,
        writes BIGINT NOT NULL
    );
    CREATE TRIGGER memories_are_never_deleted BEFORE DELETE ON memories
        FOR EACH ROW EXECUTE FUNCTION
        skald_refuse('memories are add-only: a version is never deleted (forget marks it)');
    CREATE FUNCTION skald_memory_update_check() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF (NEW.id, NEW.tenant, NEW.uri, NEW.parent, NEW.version, NEW.category, NEW.dedup_root,
            NEW.l0, NEW.l1, NEW.l2, NEW.l0_given, NEW.l1_given, NEW.content_hash, NEW.priority,
            NEW.source, NEW.created_at_ms, NEW.updated_at_ms, NEW.supersedes, NEW.fts_tokens)
           IS DISTINCT FROM
           (OLD.id, OLD.tenant, OLD.uri, OLD.parent, OLD.version, OLD.category, OLD.dedup_root,
            OLD.l0, OLD.l1, OLD.l2, OLD.l0_given, OLD.l1_given, OLD.content_hash, OLD.priority,
            OLD.source, OLD.created_at_ms, OLD.updated_at_ms, OLD.supersedes, OLD.fts_tokens)
        THEN
            RAISE EXCEPTION 'memories are add-only: an update writes a new version';
        END IF;
        IF (OLD.superseded_by IS NOT NULL OR OLD.forgotten_at_ms IS NOT NULL)
           AND (NEW.superseded_by, NEW.superseded_at_ms, NEW.forgotten_at_ms)
               IS DISTINCT FROM (OLD.superseded_by, OLD.superseded_at_ms, OLD.forgotten_at_ms)
        THEN
            RAISE EXCEPTION 'a superseded or forgotten memory version stays as it is';
        END IF;
        RETURN NEW;
    END $$;
    CREATE TRIGGER memories_are_never_rewritten BEFORE UPDATE ON memories
        FOR EACH ROW EXECUTE FUNCTION skald_memory_update_check();
    CREATE TRIGGER memory_merges_are_never_changed BEFORE UPDATE ON memory_merges
        FOR EACH ROW EXECUTE FUNCTION skald_refuse('memory merges are add-only');
    CREATE TRIGGER memory_merges_are_never_deleted BEFORE DELETE ON memory_merges
        FOR EACH ROW EXECUTE FUNCTION skald_refuse('memory merges are add-only');

    CREATE TABLE api_keys (
        seq           BIGINT GENERATED ALWAYS AS IDENTITY,
        id            TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        tenant        TEXT   NOT NULL,
        name          TEXT   NOT NULL,
        secret_sha256 TEXT   NOT NULL UNIQUE,
        prefix        TEXT   NOT NULL,
        created_at_ms BIGINT NOT NULL,
        revoked_at_ms BIGINT
    );
    CREATE TRIGGER api_keys_are_never_deleted BEFORE DELETE ON api_keys
        FOR EACH ROW EXECUTE FUNCTION skald_refuse('api keys are revoked, never deleted');
    CREATE FUNCTION skald_api_key_update_check() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF OLD.revoked_at_ms IS NOT NULL OR NEW.id IS DISTINCT FROM OLD.id
           OR NEW.tenant IS DISTINCT FROM OLD.tenant
           OR NEW.secret_sha256 IS DISTINCT FROM OLD.secret_sha256 THEN
            RAISE EXCEPTION 'an api key changes only by being revoked, once';
        END IF;
        RETURN NEW;
    END $$;
    CREATE TRIGGER api_key_revocation_is_final BEFORE UPDATE ON api_keys
        FOR EACH ROW EXECUTE FUNCTION skald_api_key_update_check();
    "#,
    // 1 -> 2: a session's switches (a person's pauses), kept on its row, off by default.
    r#"
    ALTER TABLE sessions ADD COLUMN pause_compaction BOOLEAN NOT NULL DEFAULT false;
    ALTER TABLE sessions ADD COLUMN pause_offload BOOLEAN NOT NULL DEFAULT false;
    "#,
    // 2 -> 3: leases on memory work, as SQLite's `memory_leases`.
    r#"
    CREATE TABLE memory_leases (
        tenant        TEXT COLLATE "C" NOT NULL,
        name          TEXT COLLATE "C" NOT NULL,
        holder        TEXT   NOT NULL,
        expires_at_ms BIGINT NOT NULL,
        result        TEXT,
        PRIMARY KEY (tenant, name)
    );
    "#,
    // 3 -> 4: the merges that carry a source, indexed apart, as SQLite's.
    r#"
    CREATE INDEX memory_merges_with_source ON memory_merges (memory_id, seq)
        WHERE source <> '{"session_id":null,"entry_ids":[]}';
    "#,
];

/// Brings the schema of the connection's search path up to [`PG_SCHEMA_VERSION`].
pub(crate) fn migrate(conn: &mut Conn) -> Result<(), StoreError> {
    conn.execute_batch("BEGIN")
        .map_err(fail::<StoreError>("starting the schema migration"))?;
    let result = migrate_in_transaction(conn);
    match result {
        Ok(()) => conn
            .execute_batch("COMMIT")
            .map_err(fail::<StoreError>("committing the schema migration")),
        Err(error) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(error)
        }
    }
}

fn migrate_in_transaction(conn: &mut Conn) -> Result<(), StoreError> {
    conn.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(fail::<StoreError>("locking the schema migration"))?;
    conn.execute_batch("CREATE TABLE IF NOT EXISTS skald_schema (version INTEGER NOT NULL)")
        .map_err(fail::<StoreError>("reading the schema version"))?;
    let found: i32 = match conn
        .query_opt("SELECT version FROM skald_schema", &[])
        .map_err(fail::<StoreError>("reading the schema version"))?
    {
        Some(row) => row.get(0),
        None => {
            conn.execute("INSERT INTO skald_schema (version) VALUES (0)", &[])
                .map_err(fail::<StoreError>("writing the schema version"))?;
            0
        }
    };
    if found > PG_SCHEMA_VERSION {
        return Err(StoreError::UnsupportedSchema {
            found: i64::from(found),
            supported: i64::from(PG_SCHEMA_VERSION),
        });
    }
    let applied = usize::try_from(found)
        .map_err(|_| StoreError::Corrupt(format!("schema version {found} is negative")))?;
    for sql in MIGRATIONS.iter().skip(applied) {
        conn.execute_batch(sql)
            .map_err(fail::<StoreError>("migrating the schema"))?;
    }
    conn.execute(
        "UPDATE skald_schema SET version = $1",
        &[&PG_SCHEMA_VERSION],
    )
    .map_err(fail::<StoreError>("writing the schema version"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn migrations_match_the_version() {
        assert_eq!(i32::try_from(MIGRATIONS.len()).unwrap(), PG_SCHEMA_VERSION);
    }
}
