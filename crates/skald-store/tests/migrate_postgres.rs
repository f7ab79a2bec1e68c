//! `postgres::migrate`: a SQLite database holding every kind of row (sessions with a branch,
//! refs, memory versions with an update, a forget, a merge and vectors, keys live and revoked)
//! copied into an empty PostgreSQL schema; every table's count and SHA-256 agree, the stores on
//! PostgreSQL read what the SQLite ones read (sessions, refs, keys, memory history), memory
//! search ranks the same, and a second migration into the now full schema is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pg;

use std::collections::BTreeMap;

use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::uri::MemoryUri;
use skald_core::message::{Block, Message, Role};
use skald_core::refs::RefPayload;
use skald_core::session::{EntryKind, SessionHeader};
use skald_store::memories::{MemoryStore, NewMemory, SearchQuery};
use skald_store::postgres::migrate::migrate_sqlite_to_postgres;
use skald_store::sessions::{NewSession, SessionStore};
use skald_store::{
    KeyStore, PgKeyStore, PgMemoryStore, PgRefStore, PgSessionStore, RefSettings, RefStore,
    SqliteKeyStore, SqliteMemoryStore, SqliteRefStore, SqliteSessionStore,
};

fn uri(text: &str) -> MemoryUri {
    MemoryUri::parse(text).unwrap()
}

#[test]
fn a_sqlite_database_migrates_to_postgres_verified_row_for_row() {
    let Some(schemas) = pg::Schemas::new("migrate") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skald.sqlite3");
    let (acme, globex) = (
        Tenant::parse("acme").unwrap(),
        Tenant::parse("globex").unwrap(),
    );
    let demo = SessionId::parse("demo").unwrap();

    let sessions = SqliteSessionStore::open(&path).unwrap();
    let header = SessionHeader {
        id: "demo".into(),
        ..SessionHeader::default()
    };
    sessions
        .create(&acme, NewSession::new(header, "openclaw-session"))
        .unwrap();
    sessions
        .append_message(&acme, &demo, Message::text(Role::User, "list the files"))
        .unwrap();
    let reply = sessions
        .append_message(&acme, &demo, Message::text(Role::Assistant, "a.txt b.txt"))
        .unwrap();
    sessions
        .rewrite_branch(
            &acme,
            &demo,
            BTreeMap::from([(
                reply.id.clone(),
                EntryKind::Message(Message::text(Role::Assistant, "2 files")),
            )]),
            "shorter",
        )
        .unwrap();
    let refs = SqliteRefStore::open(&path, RefSettings::default()).unwrap();
    let payload = RefPayload::new(vec![Block::text("error: disk full\n".repeat(300))]);
    let ref_id = refs.put(&acme, &payload).unwrap();
    refs.put(&globex, &RefPayload::new(vec![Block::text("short")]))
        .unwrap();
    let memories = SqliteMemoryStore::open(&path).unwrap();
    let editor = uri("viking://user/alice/memories/preferences/editor.md");
    memories
        .add(
            &acme,
            NewMemory::new(editor.clone(), "Alice prefers dark mode in every editor.")
                .with_embedding(vec![0.1, 0.9, 0.0]),
        )
        .unwrap();
    memories
        .add(
            &acme,
            NewMemory::new(
                uri("viking://user/alice/memories/preferences/theme.md"),
                "alice prefers dark mode in every editor",
            ),
        )
        .unwrap();
    memories
        .update(
            &acme,
            NewMemory::new(editor.clone(), "Alice prefers light mode since May.")
                .with_l0("Light mode"),
        )
        .unwrap();
    let kiln = uri("viking://user/alice/memories/events/kiln.md");
    memories
        .add(
            &acme,
            NewMemory::new(kiln.clone(), "Alice bought a kiln in Lyon."),
        )
        .unwrap();
    memories.forget(&acme, &kiln).unwrap();
    memories
        .add(
            &globex,
            NewMemory::new(
                uri("viking://resources/notes/pottery.md"),
                "Pottery notes: wedging.",
            ),
        )
        .unwrap();
    let keys = SqliteKeyStore::open(&path).unwrap();
    let live = keys.create(&acme, "ci").unwrap();
    let revoked = keys.create(&globex, "old").unwrap();
    keys.revoke(&revoked.key.id).unwrap();

    let target = schemas.fresh();
    let report = migrate_sqlite_to_postgres(&path, &target).unwrap();
    for check in &report.tables {
        assert!(check.matches(), "{check:?}");
    }
    let rows = |table: &str| {
        report
            .tables
            .iter()
            .find(|check| check.table == table)
            .unwrap()
            .target_rows
    };
    assert_eq!(rows("sessions"), 1);
    assert_eq!(rows("session_entries"), 4);
    assert_eq!(rows("refs"), 2);
    assert_eq!(
        rows("memories"),
        4,
        "the exact duplicate was merged, not stored"
    );
    assert_eq!(rows("memory_merges"), 1);
    assert_eq!(rows("api_keys"), 2);
    assert_eq!(report.tenants, ["acme", "globex"]);

    // The PostgreSQL stores read what the SQLite ones read.
    let pg_sessions = PgSessionStore::new(target.clone());
    assert_eq!(
        pg_sessions.load(&acme, &demo).unwrap(),
        sessions.load(&acme, &demo).unwrap()
    );
    let pg_refs = PgRefStore::new(target.clone(), RefSettings::default()).unwrap();
    assert_eq!(pg_refs.get(&acme, ref_id.as_str()).unwrap(), payload);
    let pg_keys = PgKeyStore::new(target.clone());
    assert_eq!(pg_keys.authenticate(&live.secret).unwrap().tenant, "acme");
    assert!(pg_keys.authenticate(&revoked.secret).is_err());
    assert_eq!(pg_keys.list().unwrap(), keys.list().unwrap());
    let pg_memories = PgMemoryStore::new(target.clone()).unwrap();
    assert_eq!(
        pg_memories.history(&acme, &editor).unwrap(),
        memories.history(&acme, &editor).unwrap()
    );
    for query in [
        SearchQuery::text("which mode does alice prefer", 5),
        SearchQuery::text("light mode editor", 5).with_vector(vec![0.2, 0.8, 0.1]),
    ] {
        assert_eq!(
            format!("{:?}", pg_memories.search(&acme, &query).unwrap()),
            format!("{:?}", memories.search(&acme, &query).unwrap())
        );
    }
    // New writes on PostgreSQL continue the ids and the index.
    let added = pg_memories
        .add(
            &acme,
            NewMemory::new(
                uri("viking://user/alice/memories/events/rome.md"),
                "Alice flew to Rome.",
            ),
        )
        .unwrap();
    assert!(added.memory().id > 4);
    assert_eq!(
        pg_memories
            .search(&acme, &SearchQuery::text("rome", 5))
            .unwrap()[0]
            .memory
            .id,
        added.memory().id
    );

    let again = migrate_sqlite_to_postgres(&path, &target).unwrap_err();
    assert!(again.to_string().contains("empty database"), "{again}");
}
