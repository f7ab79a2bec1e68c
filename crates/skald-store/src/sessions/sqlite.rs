//! [`SqliteSessionStore`]: the session store on SQLite, in the same database file as the ref
//! store. Two tables (see `schema.rs`): `sessions` (header, source, leaf pointer, counts) and
//! `session_entries` (one row per entry: id, parent id, type, timestamp and the rest of the entry
//! as JSON, numbered in append order). Entries are only ever inserted.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::{Map, Value};
use skald_core::codec::Format;
use skald_core::codec::openclaw::{decode_entry, decode_session, encode_entry, encode_header};
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Extra, Message};
use skald_core::session::{Entry, EntryKind, Session, SessionHeader};

use super::{
    BranchRewrite, CompactionCheckpoint, NewSession, SessionError, SessionInfo, SessionStore,
    SessionSwitches, branch_rewrite_batch, validate_entry_id, validate_session_id,
};
use crate::clock::{Clock, SystemClock};
use crate::sqlite::pool::Connections;

/// The envelope of an entry lives in its own columns; the body column holds the rest.
pub(super) const ENVELOPE_KEYS: [&str; 3] = ["id", "parentId", "timestamp"];

/// The session store on SQLite: a writer connection and, for a database file, a pool of readers
/// that loads and listings use beside it ([see the crate
/// documentation](crate#how-storage-is-laid-out)). `Send + Sync`: share it with an `Arc`. Several
/// processes may open the same file; writes take SQLite's write lock for the whole
/// check-then-insert, so two writers never both take the same id.
pub struct SqliteSessionStore {
    connections: Connections,
    clock: Arc<dyn Clock>,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for SqliteSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteSessionStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// A row of `sessions`.
struct SessionRow {
    header: String,
    source_format: String,
    source: Option<String>,
    title: Option<String>,
    leaf_id: Option<String>,
    entry_count: i64,
    message_count: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
    pause_compaction: bool,
    pause_offload: bool,
}

impl SqliteSessionStore {
    /// Opens (creating if needed) the database at `path`, creating its parent directory too. Use
    /// the ref store's file ([`crate::DATABASE_FILE`] in the data directory): one file holds both.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteSessionStore, SessionError> {
        SqliteSessionStore::open_with_clock(path, Arc::new(SystemClock))
    }

    /// [`SqliteSessionStore::open`] with the clock entry timestamps and update times come from.
    pub fn open_with_clock(
        path: impl AsRef<Path>,
        clock: Arc<dyn Clock>,
    ) -> Result<SqliteSessionStore, SessionError> {
        let path = path.as_ref();
        Ok(SqliteSessionStore {
            connections: Connections::open::<SessionError>(path)?,
            clock,
            path: Some(path.to_path_buf()),
        })
    }

    /// A store that lives in memory and disappears when dropped; for tests.
    pub fn in_memory() -> Result<SqliteSessionStore, SessionError> {
        SqliteSessionStore::in_memory_with_clock(Arc::new(SystemClock))
    }

    /// [`SqliteSessionStore::in_memory`] with the clock entry timestamps come from.
    pub fn in_memory_with_clock(clock: Arc<dyn Clock>) -> Result<SqliteSessionStore, SessionError> {
        Ok(SqliteSessionStore {
            connections: Connections::in_memory::<SessionError>()?,
            clock,
            path: None,
        })
    }

    /// The database file, or `None` for an in-memory store.
    pub fn database_path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Runs `work` in one write transaction and commits it (on disk when this returns: the
    /// connection runs with `synchronous=FULL`). An error rolls everything back.
    fn write<T>(
        &self,
        work: impl FnOnce(&Connection, i64) -> Result<T, SessionError>,
    ) -> Result<T, SessionError> {
        let now = self.clock.now_ms();
        let mut conn = self.connections.writer();
        // IMMEDIATE takes the write lock before the checks read anything, so what they saw is
        // still true when the inserts run, even with another process on the same file.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(SessionError::storage("starting a session write"))?;
        let value = work(&tx, now)?;
        tx.commit()
            .map_err(SessionError::storage("committing a session write"))?;
        Ok(value)
    }

    /// Runs `work` on one consistent snapshot of the database, on a reader.
    fn read<T>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, SessionError>,
    ) -> Result<T, SessionError> {
        self.connections.read(|conn, _| {
            let tx = conn
                .transaction()
                .map_err(SessionError::storage("starting a session read"))?;
            work(&tx)
        })
    }

    /// Appends one entry of `kind` under the leaf, after `check` approved it against the leaf.
    fn append_under_leaf(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        kind: EntryKind,
        extra: Extra,
        check: impl FnOnce(&Connection, Option<&str>) -> Result<(), SessionError>,
    ) -> Result<Entry, SessionError> {
        self.write(|tx, now| {
            let row = read_session(tx, tenant, session)?;
            check(tx, row.leaf_id.as_deref())?;
            let entry = Entry {
                id: fresh_entry_id(tx, tenant, session, &HashSet::new())?,
                parent_id: row.leaf_id,
                timestamp: iso_millis(now),
                kind,
                extra,
            };
            let batch = std::slice::from_ref(&entry);
            let messages = check_batch(tx, tenant, session, batch)?;
            insert_entries(tx, tenant, session, batch)?;
            finish_write(tx, tenant, session, Some(&entry.id), 1, messages, now)?;
            Ok(entry)
        })
    }
}

impl SessionStore for SqliteSessionStore {
    fn create(&self, tenant: &Tenant, session: NewSession) -> Result<SessionInfo, SessionError> {
        let id = session.header.id.clone();
        validate_session_id(&id)?;
        self.write(|tx, now| {
            let exists = tx
                .query_row(
                    "SELECT 1 FROM sessions WHERE tenant = ?1 AND id = ?2",
                    params![tenant.as_str(), id],
                    |_| Ok(()),
                )
                .optional()
                .map_err(SessionError::storage("looking up a session"))?;
            if exists.is_some() {
                return Err(SessionError::AlreadyExists {
                    tenant: tenant.to_string(),
                    id,
                });
            }
            tx.execute(
                "INSERT INTO sessions (tenant, id, header, source_format, source, title,
                                       created_at_ms, updated_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                params![
                    tenant.as_str(),
                    id,
                    encode_header(&session.header).to_string(),
                    session.source_format,
                    session.source,
                    session.title,
                    now
                ],
            )
            .map_err(SessionError::storage("creating a session"))?;
            let messages = check_batch(tx, tenant, &id, &session.entries)?;
            insert_entries(tx, tenant, &id, &session.entries)?;
            let leaf = if has_leaf_record(&session.entries) {
                Session::from_entries(session.header.clone(), session.entries.clone())
                    .leaf_id()
                    .map(str::to_owned)
            } else {
                session.entries.last().map(|entry| entry.id.clone())
            };
            finish_write(
                tx,
                tenant,
                &id,
                leaf.as_deref(),
                count(session.entries.len()),
                messages,
                now,
            )?;
            info(tx, tenant, &id)
        })
    }

    fn append(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        entries: &[Entry],
    ) -> Result<(), SessionError> {
        self.write(|tx, now| {
            let row = read_session(tx, tenant, session)?;
            let messages = check_batch(tx, tenant, session, entries)?;
            let Some(last) = entries.last() else {
                return Ok(());
            };
            // Only an OpenClaw session file brings `leaf` records, so only such a session pays
            // for looking for them.
            let from_openclaw = row.source_format == Format::OpenClawSession.name();
            let leaf = if has_leaf_record(entries)
                || (from_openclaw && stores_leaf_record(tx, tenant, session)?)
            {
                // Read before the insert: extending the loaded session scans just the batch.
                let mut loaded = load_session(tx, tenant, session)?;
                loaded.extend_from_entries(entries.to_vec());
                loaded.leaf_id().map(str::to_owned)
            } else {
                Some(last.id.clone())
            };
            insert_entries(tx, tenant, session, entries)?;
            finish_write(
                tx,
                tenant,
                session,
                leaf.as_deref(),
                count(entries.len()),
                messages,
                now,
            )
        })
    }

    fn append_message(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        message: Message,
    ) -> Result<Entry, SessionError> {
        self.append_under_leaf(
            tenant,
            session,
            EntryKind::Message(message),
            Extra::new(),
            |_, _| Ok(()),
        )
    }

    fn append_compaction(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        checkpoint: CompactionCheckpoint,
    ) -> Result<Entry, SessionError> {
        let (kind, extra, kept) = checkpoint.into_entry_parts();
        self.append_under_leaf(tenant, session, kind, extra, |tx, leaf| {
            // A first kept entry off the path would make pi keep nothing before the summary.
            let Some(kept) = kept else {
                return Ok(());
            };
            if path_ids(tx, tenant, session, leaf)?.contains(&kept) {
                return Ok(());
            }
            Err(off_path_error(tx, tenant, session, &kept, leaf)?)
        })
    }

    fn rewrite_branch(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        rewrites: BTreeMap<String, EntryKind>,
        reason: &str,
    ) -> Result<BranchRewrite, SessionError> {
        if rewrites.is_empty() {
            return Err(SessionError::NothingToRewrite);
        }
        self.write(|tx, now| {
            let loaded = load_session(tx, tenant, session)?;
            let path = loaded.path_to(None);
            let mut first = path.len();
            for id in rewrites.keys() {
                match path.iter().position(|entry| &entry.id == id) {
                    Some(at) => first = first.min(at),
                    None => {
                        return Err(off_path_error(tx, tenant, session, id, loaded.leaf_id())?);
                    }
                }
            }
            let Some(fork) = path.get(first) else {
                return Err(SessionError::NothingToRewrite);
            };
            let fork_parent_id = fork.parent_id.clone();
            let later = path.get(first..).unwrap_or_default();
            let (batch, rewrite) = branch_rewrite_batch(
                later,
                fork_parent_id,
                &rewrites,
                reason,
                &iso_millis(now),
                |taken| fresh_entry_id(tx, tenant, session, taken),
            )?;
            let messages = check_batch(tx, tenant, session, &batch)?;
            insert_entries(tx, tenant, session, &batch)?;
            finish_write(
                tx,
                tenant,
                session,
                Some(&rewrite.leaf_id),
                count(batch.len()),
                messages,
                now,
            )?;
            Ok(rewrite)
        })
    }

    fn set_leaf(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<(), SessionError> {
        self.write(|tx, now| {
            read_session(tx, tenant, session)?;
            if let Some(id) = leaf {
                if !entry_exists(tx, tenant, session, id)? {
                    return Err(SessionError::UnknownEntry {
                        session: session.to_string(),
                        id: id.to_owned(),
                    });
                }
            }
            finish_write(tx, tenant, session, leaf, 0, 0, now)
        })
    }

    fn set_switches(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        switches: SessionSwitches,
    ) -> Result<SessionInfo, SessionError> {
        self.write(|tx, _now| {
            let changed = tx
                .execute(
                    "UPDATE sessions SET pause_compaction = ?3, pause_offload = ?4
                     WHERE tenant = ?1 AND id = ?2",
                    params![
                        tenant.as_str(),
                        session.as_str(),
                        switches.pause_compaction,
                        switches.pause_offload
                    ],
                )
                .map_err(SessionError::storage("setting a session's switches"))?;
            if changed == 0 {
                return Err(SessionError::NotFound {
                    tenant: tenant.to_string(),
                    id: session.to_string(),
                });
            }
            info(tx, tenant, session)
        })
    }

    fn get(&self, tenant: &Tenant, session: &SessionId) -> Result<SessionInfo, SessionError> {
        self.read(|conn| info(conn, tenant, session))
    }

    fn list(&self, tenant: &Tenant) -> Result<Vec<SessionInfo>, SessionError> {
        self.read(|conn| {
            let mut statement = conn
                .prepare(
                    "SELECT id, header, source_format, source, title, leaf_id, entry_count,
                            message_count, created_at_ms, updated_at_ms, pause_compaction,
                            pause_offload
                     FROM sessions WHERE tenant = ?1 ORDER BY updated_at_ms DESC, id",
                )
                .map_err(SessionError::storage("listing sessions"))?;
            let rows = statement
                .query_map(params![tenant.as_str()], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        SessionRow {
                            header: row.get(1)?,
                            source_format: row.get(2)?,
                            source: row.get(3)?,
                            title: row.get(4)?,
                            leaf_id: row.get(5)?,
                            entry_count: row.get(6)?,
                            message_count: row.get(7)?,
                            created_at_ms: row.get(8)?,
                            updated_at_ms: row.get(9)?,
                            pause_compaction: row.get(10)?,
                            pause_offload: row.get(11)?,
                        },
                    ))
                })
                .map_err(SessionError::storage("listing sessions"))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(SessionError::storage("listing sessions"))?;
            rows.into_iter()
                .map(|(id, row)| info_from_row(tenant, id, row))
                .collect()
        })
    }

    fn load(&self, tenant: &Tenant, session: &SessionId) -> Result<Session, SessionError> {
        self.read(|conn| load_session(conn, tenant, session))
    }

    fn entries_after(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        skip: u64,
    ) -> Result<Vec<Entry>, SessionError> {
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        self.read(|conn| {
            read_session(conn, tenant, session)?;
            read_entries(conn, tenant, session, skip)
        })
    }
}

fn read_session(conn: &Connection, tenant: &str, id: &str) -> Result<SessionRow, SessionError> {
    // Cached: the proxy reads a session's row on every request.
    conn.prepare_cached(
        "SELECT header, source_format, source, title, leaf_id, entry_count, message_count,
                created_at_ms, updated_at_ms, pause_compaction, pause_offload
         FROM sessions WHERE tenant = ?1 AND id = ?2",
    )
    .map_err(SessionError::storage("reading a session"))?
    .query_row(params![tenant, id], |row| {
        Ok(SessionRow {
            header: row.get(0)?,
            source_format: row.get(1)?,
            source: row.get(2)?,
            title: row.get(3)?,
            leaf_id: row.get(4)?,
            entry_count: row.get(5)?,
            message_count: row.get(6)?,
            created_at_ms: row.get(7)?,
            updated_at_ms: row.get(8)?,
            pause_compaction: row.get(9)?,
            pause_offload: row.get(10)?,
        })
    })
    .optional()
    .map_err(SessionError::storage("reading a session"))?
    .ok_or_else(|| SessionError::NotFound {
        tenant: tenant.to_owned(),
        id: id.to_owned(),
    })
}

fn info(conn: &Connection, tenant: &str, id: &str) -> Result<SessionInfo, SessionError> {
    let row = read_session(conn, tenant, id)?;
    info_from_row(tenant, id.to_owned(), row)
}

fn info_from_row(tenant: &str, id: String, row: SessionRow) -> Result<SessionInfo, SessionError> {
    let unsigned = |value: i64| u64::try_from(value).unwrap_or(0);
    Ok(SessionInfo {
        tenant: tenant.to_owned(),
        header: decode_header(&id, &row.header)?,
        id,
        source_format: row.source_format,
        source: row.source,
        title: row.title,
        leaf_id: row.leaf_id,
        entry_count: unsigned(row.entry_count),
        message_count: unsigned(row.message_count),
        created_at_ms: row.created_at_ms,
        updated_at_ms: row.updated_at_ms,
        switches: SessionSwitches {
            pause_compaction: row.pause_compaction,
            pause_offload: row.pause_offload,
        },
    })
}

pub(super) fn decode_header(session: &str, text: &str) -> Result<SessionHeader, SessionError> {
    decode_session(text)
        .map(|read| read.session.header)
        .map_err(|error| {
            SessionError::Corrupt(format!("session {session:?}: stored header: {error}"))
        })
}

/// The whole session as stored, with its leaf.
fn load_session(conn: &Connection, tenant: &str, id: &str) -> Result<Session, SessionError> {
    let row = read_session(conn, tenant, id)?;
    let header = decode_header(id, &row.header)?;
    let entries = read_entries(conn, tenant, id, 0)?;
    let mut session = Session::from_entries(header, entries);
    session
        .set_leaf(row.leaf_id.as_deref())
        .map_err(|error| SessionError::Corrupt(format!("session {id:?}: stored leaf: {error}")))?;
    Ok(session)
}

/// The entries from position `first_seq` on (seq counts a session's entries from 0, with no
/// gaps: entries are never deleted), in append order.
fn read_entries(
    conn: &Connection,
    tenant: &str,
    id: &str,
    first_seq: i64,
) -> Result<Vec<Entry>, SessionError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT id, parent_id, timestamp, body FROM session_entries
             WHERE tenant = ?1 AND session_id = ?2 AND seq >= ?3 ORDER BY seq",
        )
        .map_err(SessionError::storage("reading session entries"))?;
    statement
        .query_map(params![tenant, id, first_seq], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, Option<String>>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
            ))
        })
        .map_err(SessionError::storage("reading session entries"))?
        .map(|row| {
            let (entry_id, parent_id, timestamp, body) =
                row.map_err(SessionError::storage("reading session entries"))?;
            decode_row(id, entry_id, parent_id, timestamp, &body)
        })
        .collect::<Result<Vec<Entry>, SessionError>>()
}

/// An entry back from its columns and body. A body whose known type no longer decodes (it was
/// stored as an unknown-kind entry in the first place, because the file it came from had it so)
/// comes back as that same [`EntryKind::Other`], as the session reader treats it.
pub(super) fn decode_row(
    session: &str,
    id: String,
    parent_id: Option<String>,
    timestamp: String,
    body: &str,
) -> Result<Entry, SessionError> {
    let body = match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(body)) => body,
        Ok(_) | Err(_) => {
            return Err(SessionError::Corrupt(format!(
                "session {session:?}: entry {id:?}: the stored body is not a JSON object"
            )));
        }
    };
    let mut line = Map::new();
    if let Some(kind) = body.get("type") {
        line.insert("type".to_owned(), kind.clone());
    }
    line.insert("id".to_owned(), Value::from(id.clone()));
    line.insert(
        "parentId".to_owned(),
        parent_id.clone().map_or(Value::Null, Value::from),
    );
    line.insert("timestamp".to_owned(), Value::from(timestamp.clone()));
    for (key, value) in &body {
        if key != "type" {
            line.insert(key.clone(), value.clone());
        }
    }
    Ok(
        decode_entry(&Value::Object(line)).unwrap_or_else(|_| Entry {
            id,
            parent_id,
            timestamp,
            kind: EntryKind::Other(body.into()),
            extra: Extra::new(),
        }),
    )
}

/// The ids from the root to `leaf`, root first, read from the id columns only (no body is
/// decoded). The walk stops at a missing parent or a repeated id.
fn path_ids(
    conn: &Connection,
    tenant: &str,
    session: &str,
    leaf: Option<&str>,
) -> Result<Vec<String>, SessionError> {
    let Some(leaf) = leaf else {
        return Ok(Vec::new());
    };
    let mut statement = conn
        .prepare_cached(
            "SELECT id, parent_id FROM session_entries WHERE tenant = ?1 AND session_id = ?2",
        )
        .map_err(SessionError::storage("reading session entries"))?;
    let parents = statement
        .query_map(params![tenant, session], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
        })
        .map_err(SessionError::storage("reading session entries"))?
        .collect::<Result<HashMap<String, Option<String>>, _>>()
        .map_err(SessionError::storage("reading session entries"))?;
    let mut path = Vec::new();
    let mut seen = HashSet::new();
    let mut at = Some(leaf.to_owned());
    while let Some(id) = at {
        let Some(parent) = parents.get(&id) else {
            break;
        };
        if !seen.insert(id.clone()) {
            break;
        }
        at = parent.clone();
        path.push(id);
    }
    path.reverse();
    Ok(path)
}

/// The error for an entry a caller expected on the active path: off it, or not in the session.
fn off_path_error(
    conn: &Connection,
    tenant: &str,
    session: &str,
    id: &str,
    leaf: Option<&str>,
) -> Result<SessionError, SessionError> {
    Ok(if entry_exists(conn, tenant, session, id)? {
        SessionError::NotOnActivePath {
            session: session.to_owned(),
            id: id.to_owned(),
            leaf: leaf.map(str::to_owned),
        }
    } else {
        SessionError::UnknownEntry {
            session: session.to_owned(),
            id: id.to_owned(),
        }
    })
}

fn entry_exists(
    conn: &Connection,
    tenant: &str,
    session: &str,
    id: &str,
) -> Result<bool, SessionError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT 1 FROM session_entries WHERE tenant = ?1 AND session_id = ?2 AND id = ?3",
        )
        .map_err(SessionError::storage("looking up an entry"))?;
    statement
        .exists(params![tenant, session, id])
        .map_err(SessionError::storage("looking up an entry"))
}

/// Checks a batch against the rules of `append` and returns how many of its entries are
/// messages. Nothing is written.
fn check_batch(
    conn: &Connection,
    tenant: &str,
    session: &str,
    entries: &[Entry],
) -> Result<u64, SessionError> {
    let mut batch: HashSet<&str> = HashSet::with_capacity(entries.len());
    let mut messages = 0;
    for entry in entries {
        validate_entry_id(&entry.id)?;
        entry_type(entry)?;
        if batch.contains(entry.id.as_str()) || entry_exists(conn, tenant, session, &entry.id)? {
            return Err(SessionError::DuplicateEntryId {
                session: session.to_owned(),
                id: entry.id.clone(),
            });
        }
        if let Some(parent) = &entry.parent_id {
            if !batch.contains(parent.as_str()) && !entry_exists(conn, tenant, session, parent)? {
                return Err(SessionError::UnknownParent {
                    session: session.to_owned(),
                    id: entry.id.clone(),
                    parent: parent.clone(),
                });
            }
        }
        if let EntryKind::Message(_) = entry.kind {
            messages += 1;
        }
        batch.insert(&entry.id);
    }
    Ok(messages)
}

/// True when `entries` hold a version-4 `leaf` record: OpenClaw's navigation, not the last
/// entry, then says where the leaf is ([`Session::leaf_id`]).
pub(super) fn has_leaf_record(entries: &[Entry]) -> bool {
    entries
        .iter()
        .any(|entry| entry.kind.type_name() == Some("leaf"))
}

/// True when the stored session holds a version-4 `leaf` record.
fn stores_leaf_record(
    conn: &Connection,
    tenant: &str,
    session: &str,
) -> Result<bool, SessionError> {
    conn.prepare_cached(
        "SELECT EXISTS(SELECT 1 FROM session_entries
                       WHERE tenant = ?1 AND session_id = ?2 AND type = 'leaf')",
    )
    .and_then(|mut statement| statement.query_row(params![tenant, session], |row| row.get(0)))
    .map_err(SessionError::storage("reading session entries"))
}

/// The `type` an entry is stored under; an entry whose kind names none cannot be read back.
pub(super) fn entry_type(entry: &Entry) -> Result<&str, SessionError> {
    match entry.kind.type_name() {
        Some("session") => Err(SessionError::InvalidEntry {
            id: entry.id.clone(),
            reason: "type \"session\" is the header's, not an entry's".to_owned(),
        }),
        Some(kind) => Ok(kind),
        None => Err(SessionError::InvalidEntry {
            id: entry.id.clone(),
            reason: "an entry of an unknown kind needs a string \"type\" in its body".to_owned(),
        }),
    }
}

/// Inserts checked entries after the session's last one.
fn insert_entries(
    conn: &Connection,
    tenant: &str,
    session: &str,
    entries: &[Entry],
) -> Result<(), SessionError> {
    let first_seq: i64 = conn
        .query_row(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM session_entries
             WHERE tenant = ?1 AND session_id = ?2",
            params![tenant, session],
            |row| row.get(0),
        )
        .map_err(SessionError::storage("numbering session entries"))?;
    let mut statement = conn
        .prepare_cached(
            "INSERT INTO session_entries
                 (tenant, session_id, seq, id, parent_id, type, timestamp, body)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(SessionError::storage("appending a session entry"))?;
    for (offset, entry) in (0_i64..).zip(entries) {
        let kind = entry_type(entry)?;
        let mut body = encode_entry(entry);
        if let Value::Object(line) = &mut body {
            line.retain(|key, _| !ENVELOPE_KEYS.contains(&key.as_str()));
        }
        statement
            .execute(params![
                tenant,
                session,
                first_seq.saturating_add(offset),
                entry.id,
                entry.parent_id,
                kind,
                entry.timestamp,
                body.to_string()
            ])
            .map_err(SessionError::storage("appending a session entry"))?;
    }
    Ok(())
}

/// Moves the leaf, adds to the counts and stamps the update time.
fn finish_write(
    conn: &Connection,
    tenant: &str,
    session: &str,
    leaf: Option<&str>,
    entries_added: u64,
    messages_added: u64,
    now: i64,
) -> Result<(), SessionError> {
    let signed = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    conn.execute(
        "UPDATE sessions SET leaf_id = ?3, entry_count = entry_count + ?4,
                message_count = message_count + ?5, updated_at_ms = ?6
         WHERE tenant = ?1 AND id = ?2",
        params![
            tenant,
            session,
            leaf,
            signed(entries_added),
            signed(messages_added),
            now
        ],
    )
    .map_err(SessionError::storage("updating a session"))?;
    Ok(())
}

/// An unused id of 8 lowercase hex digits, as pi makes them.
fn fresh_entry_id(
    conn: &Connection,
    tenant: &str,
    session: &str,
    taken: &HashSet<String>,
) -> Result<String, SessionError> {
    // With 2^32 ids a clash is rare even in a huge session; a few draws always suffice unless
    // the session holds billions of entries.
    for _ in 0..64 {
        let id = format!("{:08x}", random_u32());
        if !taken.contains(&id) && !entry_exists(conn, tenant, session, &id)? {
            return Ok(id);
        }
    }
    Err(SessionError::Corrupt(format!(
        "session {session:?}: no free entry id found in 64 random draws"
    )))
}

/// A random number without a random-number crate: std's `RandomState` is seeded from the OS
/// once per thread and varied per instance; the counter and the time separate calls further.
pub(super) fn random_u32() -> u32 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    hasher.write_u128(nanos);
    let hash = hasher.finish();
    (hash ^ (hash >> 32)) as u32
}

/// ISO 8601 with milliseconds in UTC, as pi writes entry timestamps.
pub(crate) fn iso_millis(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub(super) fn count(len: usize) -> u64 {
    u64::try_from(len).unwrap_or(u64::MAX)
}
