//! [`PgSessionStore`]: the session store on PostgreSQL, with the SQLite store's tables and
//! rules (see [`SqliteSessionStore`](super::SqliteSessionStore)). Every write locks the
//! session's row (`SELECT … FOR UPDATE`) before it checks anything, so writes to one session
//! from several servers take turns and each sees every write before it; an entry is only ever
//! inserted (triggers refuse the rest).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;
use skald_core::codec::Format;
use skald_core::codec::openclaw::{encode_entry, encode_header};
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Extra, Message};
use skald_core::session::{Entry, EntryKind, Session};
use tokio_postgres::Row;

use super::sqlite::{
    ENVELOPE_KEYS, count, decode_header, decode_row, entry_type, has_leaf_record, iso_millis,
    random_u32,
};
use super::{
    BranchRewrite, CompactionCheckpoint, NewSession, SessionError, SessionInfo, SessionStore,
    SessionSwitches, branch_rewrite_batch, validate_entry_id, validate_session_id,
};
use crate::clock::{Clock, SystemClock};
use crate::postgres::{Conn, Database, fail, unsigned};

/// The session store on PostgreSQL. `Send + Sync`: share it with an `Arc`.
pub struct PgSessionStore {
    database: Database,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for PgSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgSessionStore")
            .field("database", &self.database)
            .finish_non_exhaustive()
    }
}

const SESSION_COLUMNS: &str = "header, source_format, source, title, leaf_id, entry_count, \
                               message_count, created_at_ms, updated_at_ms, pause_compaction, \
                               pause_offload";

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

impl SessionRow {
    /// From a row of [`SESSION_COLUMNS`] starting at column `at`.
    fn read(row: &Row, at: usize) -> SessionRow {
        SessionRow {
            header: row.get(at),
            source_format: row.get(at + 1),
            source: row.get(at + 2),
            title: row.get(at + 3),
            leaf_id: row.get(at + 4),
            entry_count: row.get(at + 5),
            message_count: row.get(at + 6),
            created_at_ms: row.get(at + 7),
            updated_at_ms: row.get(at + 8),
            pause_compaction: row.get(at + 9),
            pause_offload: row.get(at + 10),
        }
    }
}

impl PgSessionStore {
    /// The session store in `database`.
    pub fn new(database: Database) -> PgSessionStore {
        PgSessionStore::with_clock(database, Arc::new(SystemClock))
    }

    /// [`PgSessionStore::new`] with the clock entry timestamps and update times come from.
    pub fn with_clock(database: Database, clock: Arc<dyn Clock>) -> PgSessionStore {
        PgSessionStore { database, clock }
    }

    fn write<T>(
        &self,
        work: impl FnOnce(&mut Conn, i64) -> Result<T, SessionError>,
    ) -> Result<T, SessionError> {
        let now = self.clock.now_ms();
        self.database.write(|conn| work(conn, now))
    }

    /// Appends one entry of `kind` under the leaf, after `check` approved it against the leaf.
    fn append_under_leaf(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        kind: EntryKind,
        extra: Extra,
        check: impl FnOnce(&mut Conn, Option<&str>) -> Result<(), SessionError>,
    ) -> Result<Entry, SessionError> {
        self.write(|conn, now| {
            let row = lock_session(conn, tenant, session)?;
            check(conn, row.leaf_id.as_deref())?;
            let entry = Entry {
                id: fresh_entry_id(conn, tenant, session, &HashSet::new())?,
                parent_id: row.leaf_id,
                timestamp: iso_millis(now),
                kind,
                extra,
            };
            let batch = std::slice::from_ref(&entry);
            let messages = check_batch(conn, tenant, session, batch)?;
            insert_entries(conn, tenant, session, row.entry_count, batch)?;
            finish_write(conn, tenant, session, Some(&entry.id), 1, messages, now)?;
            Ok(entry)
        })
    }
}

impl SessionStore for PgSessionStore {
    fn create(&self, tenant: &Tenant, session: NewSession) -> Result<SessionInfo, SessionError> {
        let id = session.header.id.clone();
        validate_session_id(&id)?;
        self.write(|conn, now| {
            let inserted = conn
                .execute(
                    "INSERT INTO sessions (tenant, id, header, source_format, source, title,
                                           created_at_ms, updated_at_ms)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $7) ON CONFLICT DO NOTHING",
                    &[
                        &tenant.as_str(),
                        &id,
                        &encode_header(&session.header).to_string(),
                        &session.source_format,
                        &session.source,
                        &session.title,
                        &now,
                    ],
                )
                .map_err(fail::<SessionError>("creating a session"))?;
            if inserted == 0 {
                return Err(SessionError::AlreadyExists {
                    tenant: tenant.to_string(),
                    id,
                });
            }
            let messages = check_batch(conn, tenant, &id, &session.entries)?;
            insert_entries(conn, tenant, &id, 0, &session.entries)?;
            let leaf = if has_leaf_record(&session.entries) {
                Session::from_entries(session.header.clone(), session.entries.clone())
                    .leaf_id()
                    .map(str::to_owned)
            } else {
                session.entries.last().map(|entry| entry.id.clone())
            };
            finish_write(
                conn,
                tenant,
                &id,
                leaf.as_deref(),
                count(session.entries.len()),
                messages,
                now,
            )?;
            info(conn, tenant, &id)
        })
    }

    fn append(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        entries: &[Entry],
    ) -> Result<(), SessionError> {
        self.write(|conn, now| {
            let row = lock_session(conn, tenant, session)?;
            let messages = check_batch(conn, tenant, session, entries)?;
            let Some(last) = entries.last() else {
                return Ok(());
            };
            let from_openclaw = row.source_format == Format::OpenClawSession.name();
            let leaf = if has_leaf_record(entries)
                || (from_openclaw && stores_leaf_record(conn, tenant, session)?)
            {
                let mut loaded = load_session(conn, tenant, session)?;
                loaded.extend_from_entries(entries.to_vec());
                loaded.leaf_id().map(str::to_owned)
            } else {
                Some(last.id.clone())
            };
            insert_entries(conn, tenant, session, row.entry_count, entries)?;
            finish_write(
                conn,
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
        self.append_under_leaf(tenant, session, kind, extra, |conn, leaf| {
            let Some(kept) = kept else {
                return Ok(());
            };
            if path_ids(conn, tenant, session, leaf)?.contains(&kept) {
                return Ok(());
            }
            Err(off_path_error(conn, tenant, session, &kept, leaf)?)
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
        self.write(|conn, now| {
            let row = lock_session(conn, tenant, session)?;
            let loaded = load_session(conn, tenant, session)?;
            let path = loaded.path_to(None);
            let mut first = path.len();
            for id in rewrites.keys() {
                match path.iter().position(|entry| &entry.id == id) {
                    Some(at) => first = first.min(at),
                    None => {
                        return Err(off_path_error(conn, tenant, session, id, loaded.leaf_id())?);
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
                |taken| fresh_entry_id(conn, tenant, session, taken),
            )?;
            let messages = check_batch(conn, tenant, session, &batch)?;
            insert_entries(conn, tenant, session, row.entry_count, &batch)?;
            finish_write(
                conn,
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
        self.write(|conn, now| {
            lock_session(conn, tenant, session)?;
            if let Some(id) = leaf {
                if !entry_exists(conn, tenant, session, id)? {
                    return Err(SessionError::UnknownEntry {
                        session: session.to_string(),
                        id: id.to_owned(),
                    });
                }
            }
            finish_write(conn, tenant, session, leaf, 0, 0, now)
        })
    }

    fn set_switches(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        switches: SessionSwitches,
    ) -> Result<SessionInfo, SessionError> {
        self.write(|conn, _now| {
            let changed = conn
                .execute(
                    "UPDATE sessions SET pause_compaction = $3, pause_offload = $4
                     WHERE tenant = $1 AND id = $2",
                    &[
                        &tenant.as_str(),
                        &session.as_str(),
                        &switches.pause_compaction,
                        &switches.pause_offload,
                    ],
                )
                .map_err(fail::<SessionError>("setting a session's switches"))?;
            if changed == 0 {
                return Err(SessionError::NotFound {
                    tenant: tenant.to_string(),
                    id: session.to_string(),
                });
            }
            info(conn, tenant, session)
        })
    }

    fn get(&self, tenant: &Tenant, session: &SessionId) -> Result<SessionInfo, SessionError> {
        let mut conn = self.database.conn::<SessionError>("reading a session")?;
        info(&mut conn, tenant, session)
    }

    fn list(&self, tenant: &Tenant) -> Result<Vec<SessionInfo>, SessionError> {
        let mut conn = self.database.conn::<SessionError>("listing sessions")?;
        let rows = conn
            .query(
                &format!(
                    "SELECT id, {SESSION_COLUMNS} FROM sessions WHERE tenant = $1
                     ORDER BY updated_at_ms DESC, id"
                ),
                &[&tenant.as_str()],
            )
            .map_err(fail::<SessionError>("listing sessions"))?;
        rows.iter()
            .map(|row| info_from_row(tenant, row.get(0), SessionRow::read(row, 1)))
            .collect()
    }

    fn load(&self, tenant: &Tenant, session: &SessionId) -> Result<Session, SessionError> {
        self.database
            .read(|conn| load_session(conn, tenant, session))
    }

    fn entries_after(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        skip: u64,
    ) -> Result<Vec<Entry>, SessionError> {
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        self.database.read(|conn| {
            read_session(conn, tenant, session, false)?;
            read_entries(conn, tenant, session, skip)
        })
    }
}

fn read_session(
    conn: &mut Conn,
    tenant: &str,
    id: &str,
    for_update: bool,
) -> Result<SessionRow, SessionError> {
    let lock = if for_update { " FOR UPDATE" } else { "" };
    conn.query_opt(
        &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant = $1 AND id = $2{lock}"),
        &[&tenant, &id],
    )
    .map_err(fail::<SessionError>("reading a session"))?
    .map(|row| SessionRow::read(&row, 0))
    .ok_or_else(|| SessionError::NotFound {
        tenant: tenant.to_owned(),
        id: id.to_owned(),
    })
}

/// The session's row, locked until the write transaction ends: writes to one session, from any
/// server, take turns.
fn lock_session(conn: &mut Conn, tenant: &str, id: &str) -> Result<SessionRow, SessionError> {
    read_session(conn, tenant, id, true)
}

fn info(conn: &mut Conn, tenant: &str, id: &str) -> Result<SessionInfo, SessionError> {
    let row = read_session(conn, tenant, id, false)?;
    info_from_row(tenant, id.to_owned(), row)
}

fn info_from_row(tenant: &str, id: String, row: SessionRow) -> Result<SessionInfo, SessionError> {
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

fn load_session(conn: &mut Conn, tenant: &str, id: &str) -> Result<Session, SessionError> {
    let row = read_session(conn, tenant, id, false)?;
    let header = decode_header(id, &row.header)?;
    let entries = read_entries(conn, tenant, id, 0)?;
    let mut session = Session::from_entries(header, entries);
    session
        .set_leaf(row.leaf_id.as_deref())
        .map_err(|error| SessionError::Corrupt(format!("session {id:?}: stored leaf: {error}")))?;
    Ok(session)
}

fn read_entries(
    conn: &mut Conn,
    tenant: &str,
    id: &str,
    first_seq: i64,
) -> Result<Vec<Entry>, SessionError> {
    conn.query(
        "SELECT id, parent_id, timestamp, body FROM session_entries
         WHERE tenant = $1 AND session_id = $2 AND seq >= $3 ORDER BY seq",
        &[&tenant, &id, &first_seq],
    )
    .map_err(fail::<SessionError>("reading session entries"))?
    .iter()
    .map(|row| {
        let body: String = row.get(3);
        decode_row(id, row.get(0), row.get(1), row.get(2), &body)
    })
    .collect()
}

fn path_ids(
    conn: &mut Conn,
    tenant: &str,
    session: &str,
    leaf: Option<&str>,
) -> Result<Vec<String>, SessionError> {
    let Some(leaf) = leaf else {
        return Ok(Vec::new());
    };
    let parents: HashMap<String, Option<String>> = conn
        .query(
            "SELECT id, parent_id FROM session_entries WHERE tenant = $1 AND session_id = $2",
            &[&tenant, &session],
        )
        .map_err(fail::<SessionError>("reading session entries"))?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
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

fn off_path_error(
    conn: &mut Conn,
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
    conn: &mut Conn,
    tenant: &str,
    session: &str,
    id: &str,
) -> Result<bool, SessionError> {
    Ok(conn
        .query_opt(
            "SELECT 1 FROM session_entries WHERE tenant = $1 AND session_id = $2 AND id = $3",
            &[&tenant, &session, &id],
        )
        .map_err(fail::<SessionError>("looking up an entry"))?
        .is_some())
}

/// Checks a batch against the rules of `append` (one query for every id and parent it names)
/// and returns how many of its entries are messages. Nothing is written.
fn check_batch(
    conn: &mut Conn,
    tenant: &str,
    session: &str,
    entries: &[Entry],
) -> Result<u64, SessionError> {
    for entry in entries {
        validate_entry_id(&entry.id)?;
        entry_type(entry)?;
    }
    let named: Vec<&str> = entries
        .iter()
        .flat_map(|entry| std::iter::once(entry.id.as_str()).chain(entry.parent_id.as_deref()))
        .collect();
    let stored: HashSet<String> = if named.is_empty() {
        HashSet::new()
    } else {
        conn.query(
            "SELECT id FROM session_entries
             WHERE tenant = $1 AND session_id = $2 AND id = ANY($3)",
            &[&tenant, &session, &named],
        )
        .map_err(fail::<SessionError>("looking up entries"))?
        .iter()
        .map(|row| row.get(0))
        .collect()
    };
    let mut batch: HashSet<&str> = HashSet::with_capacity(entries.len());
    let mut messages = 0;
    for entry in entries {
        if batch.contains(entry.id.as_str()) || stored.contains(&entry.id) {
            return Err(SessionError::DuplicateEntryId {
                session: session.to_owned(),
                id: entry.id.clone(),
            });
        }
        if let Some(parent) = &entry.parent_id {
            if !batch.contains(parent.as_str()) && !stored.contains(parent) {
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

fn stores_leaf_record(conn: &mut Conn, tenant: &str, session: &str) -> Result<bool, SessionError> {
    Ok(conn
        .query_opt(
            "SELECT 1 FROM session_entries
             WHERE tenant = $1 AND session_id = $2 AND type = 'leaf' LIMIT 1",
            &[&tenant, &session],
        )
        .map_err(fail::<SessionError>("reading session entries"))?
        .is_some())
}

/// Inserts checked entries after the session's `stored` entries (its `entry_count`, read under
/// the row lock), in one statement.
fn insert_entries(
    conn: &mut Conn,
    tenant: &str,
    session: &str,
    stored: i64,
    entries: &[Entry],
) -> Result<(), SessionError> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut seqs = Vec::with_capacity(entries.len());
    let mut ids = Vec::with_capacity(entries.len());
    let mut parents = Vec::with_capacity(entries.len());
    let mut types = Vec::with_capacity(entries.len());
    let mut timestamps = Vec::with_capacity(entries.len());
    let mut bodies = Vec::with_capacity(entries.len());
    for (offset, entry) in (0_i64..).zip(entries) {
        let kind = entry_type(entry)?;
        let mut body = encode_entry(entry);
        if let Value::Object(line) = &mut body {
            line.retain(|key, _| !ENVELOPE_KEYS.contains(&key.as_str()));
        }
        seqs.push(stored.saturating_add(offset));
        ids.push(entry.id.as_str());
        parents.push(entry.parent_id.as_deref());
        types.push(kind);
        timestamps.push(entry.timestamp.as_str());
        bodies.push(body.to_string());
    }
    conn.execute(
        "INSERT INTO session_entries
             (tenant, session_id, seq, id, parent_id, type, timestamp, body)
         SELECT $1, $2, * FROM UNNEST($3::BIGINT[], $4::TEXT[], $5::TEXT[], $6::TEXT[],
                                      $7::TEXT[], $8::TEXT[])",
        &[
            &tenant,
            &session,
            &seqs,
            &ids,
            &parents,
            &types,
            &timestamps,
            &bodies,
        ],
    )
    .map_err(fail::<SessionError>("appending a session entry"))?;
    Ok(())
}

fn finish_write(
    conn: &mut Conn,
    tenant: &str,
    session: &str,
    leaf: Option<&str>,
    entries_added: u64,
    messages_added: u64,
    now: i64,
) -> Result<(), SessionError> {
    let signed = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    conn.execute(
        "UPDATE sessions SET leaf_id = $3, entry_count = entry_count + $4,
                message_count = message_count + $5, updated_at_ms = $6
         WHERE tenant = $1 AND id = $2",
        &[
            &tenant,
            &session,
            &leaf,
            &signed(entries_added),
            &signed(messages_added),
            &now,
        ],
    )
    .map_err(fail::<SessionError>("updating a session"))?;
    Ok(())
}

fn fresh_entry_id(
    conn: &mut Conn,
    tenant: &str,
    session: &str,
    taken: &HashSet<String>,
) -> Result<String, SessionError> {
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
