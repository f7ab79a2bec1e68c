//! Reading OpenClaw 2026.9's own SQLite transcript store (`agents/<id>/agent/openclaw-agent.sqlite`):
//! OpenClaw keeps no session JSONL any more, only rows of
//! `transcript_events(session_id, seq, event_json | event_zstd, event_utf8_bytes, navigation_json)`.
//!
//! Each row is one line of what used to be the session file — the `{"type":"session"}` header or
//! one entry — as JSON text in `event_json`, or, for larger events, zstd-compressed UTF-8 in
//! `event_zstd` with its decoded length in `event_utf8_bytes` (OpenClaw's
//! `prepareTranscriptPayload`; its `transcriptEventJsonSql` reads
//! `coalesce(event_json, decode(event_zstd, event_utf8_bytes))`). `navigation_json` is a
//! projection OpenClaw derives from the event for its own queries; skald derives the same facts
//! from the event itself, so it is not read.
//!
//! [`OpenClawStore::session_jsonl`] turns one session's rows, in `seq` order, back into the
//! session JSONL the rest of skald reads ([`super::import`], the engine's bootstrap). The host's
//! database is opened read-only and never written. A row that cannot be decoded is an error that
//! names the session and the `seq`, so an import of a damaged store stores nothing.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::{Map, Value};
use skald_core::session::CURRENT_VERSION;

/// The first 16 bytes of every SQLite database file.
pub const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// OpenClaw's bound on one event, compressed or not (`MAX_COMPRESSED_EVENT_BYTES`, 4 MiB).
const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// The columns skald reads; a table without them is not OpenClaw's transcript store.
const REQUIRED_COLUMNS: [&str; 5] = [
    "session_id",
    "seq",
    "event_json",
    "event_zstd",
    "event_utf8_bytes",
];

/// True when `head` (the first bytes of a file) is a SQLite database's header.
pub fn is_sqlite(head: &[u8]) -> bool {
    head.starts_with(SQLITE_MAGIC)
}

/// Why OpenClaw's transcript store could not be read. Nothing was stored anywhere.
#[derive(Debug, thiserror::Error)]
pub enum OpenClawStoreError {
    /// The file could not be opened as a SQLite database.
    #[error("cannot open {path} as a SQLite database (read-only): {source}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// The database has no `transcript_events` table of OpenClaw's shape.
    #[error(
        "{path} is a SQLite database but not OpenClaw's transcript store: {what} (expected \
         OpenClaw 2026.9's agents/<id>/agent/openclaw-agent.sqlite)"
    )]
    NotATranscriptStore {
        /// The database file.
        path: PathBuf,
        /// What is missing.
        what: String,
    },
    /// The store has no rows for the session asked for.
    #[error("{path} holds no transcript for session {session:?}; it holds {held}")]
    UnknownSession {
        /// The database file.
        path: PathBuf,
        /// The session asked for.
        session: String,
        /// The sessions it does hold, for the message.
        held: String,
    },
    /// One row cannot be turned back into its event.
    #[error("session {session:?}, transcript event seq {seq}: {reason}")]
    CorruptRow {
        /// The row's session.
        session: String,
        /// The row's `seq`.
        seq: i64,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading failed (a locked or damaged file, an I/O error).
    #[error("reading {path}: {source}")]
    Read {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
}

/// OpenClaw's transcript store, open read-only.
#[derive(Debug)]
pub struct OpenClawStore {
    conn: Connection,
    path: PathBuf,
}

impl OpenClawStore {
    /// Opens the database at `path` read-only and checks it has OpenClaw's `transcript_events`.
    pub fn open(path: impl AsRef<Path>) -> Result<OpenClawStore, OpenClawStoreError> {
        let path = path.as_ref().to_path_buf();
        // Read-only: the host owns this file (and may be writing it); skald only reads.
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| OpenClawStoreError::Open {
            path: path.clone(),
            source,
        })?;
        let store = OpenClawStore { conn, path };
        store.check_schema()?;
        Ok(store)
    }

    fn read_error(&self) -> impl Fn(rusqlite::Error) -> OpenClawStoreError + '_ {
        |source| OpenClawStoreError::Read {
            path: self.path.clone(),
            source,
        }
    }

    fn check_schema(&self) -> Result<(), OpenClawStoreError> {
        let not_store = |what: String| OpenClawStoreError::NotATranscriptStore {
            path: self.path.clone(),
            what,
        };
        let columns: Vec<String> = self
            .conn
            .prepare("SELECT name FROM pragma_table_info('transcript_events')")
            .and_then(|mut statement| {
                statement
                    .query_map([], |row| row.get::<_, String>(0))?
                    .collect::<Result<Vec<String>, _>>()
            })
            // A file that is not a database at all fails here, at the first read.
            .map_err(|source| OpenClawStoreError::Open {
                path: self.path.clone(),
                source,
            })?;
        if columns.is_empty() {
            return Err(not_store("it has no transcript_events table".to_owned()));
        }
        let missing: Vec<&str> = REQUIRED_COLUMNS
            .into_iter()
            .filter(|column| !columns.iter().any(|found| found == column))
            .collect();
        if !missing.is_empty() {
            return Err(not_store(format!(
                "transcript_events lacks the column(s) {}",
                missing.join(", ")
            )));
        }
        Ok(())
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The sessions with transcript rows, in the order they were first written.
    pub fn session_ids(&self) -> Result<Vec<String>, OpenClawStoreError> {
        self.conn
            .prepare(
                "SELECT session_id FROM transcript_events GROUP BY session_id
                 ORDER BY MIN(created_at), session_id",
            )
            .or_else(|_| {
                // `created_at` is OpenClaw's; a store without it is still read, in id order.
                self.conn.prepare(
                    "SELECT session_id FROM transcript_events GROUP BY session_id
                     ORDER BY session_id",
                )
            })
            .and_then(|mut statement| {
                statement
                    .query_map([], |row| row.get::<_, String>(0))?
                    .collect::<Result<Vec<String>, _>>()
            })
            .map_err(self.read_error())
    }

    /// The session's transcript as a session JSONL: its header line (OpenClaw writes one as the
    /// session's first event; when there is none, a version-4 header with the session's id),
    /// then one line per event, in `seq` order.
    pub fn session_jsonl(&self, session: &str) -> Result<String, OpenClawStoreError> {
        let exists: Option<i64> = self
            .conn
            .query_row(
                "SELECT 1 FROM transcript_events WHERE session_id = ?1 LIMIT 1",
                params![session],
                |row| row.get(0),
            )
            .optional()
            .map_err(self.read_error())?;
        if exists.is_none() {
            let held = self.session_ids()?;
            return Err(OpenClawStoreError::UnknownSession {
                path: self.path.clone(),
                session: session.to_owned(),
                held: if held.is_empty() {
                    "none".to_owned()
                } else {
                    held.iter()
                        .map(|id| format!("{id:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            });
        }
        let mut statement = self
            .conn
            .prepare(
                "SELECT seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events
                 WHERE session_id = ?1 ORDER BY seq",
            )
            .map_err(self.read_error())?;
        let rows = statement
            .query_map(params![session], |row| {
                Ok(Row {
                    seq: row.get(0)?,
                    json: row.get(1)?,
                    zstd: row.get(2)?,
                    utf8_bytes: row.get(3)?,
                })
            })
            .map_err(self.read_error())?;
        let mut lines = Vec::new();
        for row in rows {
            let row = row.map_err(self.read_error())?;
            lines.push(event(session, row)?);
        }
        let has_header = lines
            .first()
            .is_some_and(|first| first.get("type").and_then(Value::as_str) == Some("session"));
        let mut out = String::new();
        if !has_header {
            let mut header = Map::new();
            header.insert("type".to_owned(), Value::from("session"));
            header.insert("version".to_owned(), Value::from(CURRENT_VERSION));
            header.insert("id".to_owned(), Value::from(session));
            out.push_str(&Value::Object(header).to_string());
            out.push('\n');
        }
        for line in lines {
            // Written compact, so an event pretty-printed in its row is still one line.
            out.push_str(&Value::Object(line).to_string());
            out.push('\n');
        }
        Ok(out)
    }
}

/// One `transcript_events` row, as read.
struct Row {
    seq: i64,
    json: Option<String>,
    zstd: Option<Vec<u8>>,
    utf8_bytes: Option<i64>,
}

/// The event a row holds, as a JSON object.
fn event(session: &str, row: Row) -> Result<Map<String, Value>, OpenClawStoreError> {
    let corrupt = |reason: String| OpenClawStoreError::CorruptRow {
        session: session.to_owned(),
        seq: row.seq,
        reason,
    };
    let text = match (&row.json, &row.zstd) {
        (Some(json), _) => json.clone(),
        (None, Some(compressed)) => decompress(compressed, row.utf8_bytes).map_err(corrupt)?,
        (None, None) => {
            return Err(corrupt(
                "the row has neither event_json nor event_zstd".to_owned(),
            ));
        }
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_),
        ) => Err(corrupt("the event is JSON but not an object".to_owned())),
        Err(error) => Err(corrupt(format!("the event is not valid JSON: {error}"))),
    }
}

/// OpenClaw's compressed payload: one zstd frame of exactly `utf8_bytes` bytes of UTF-8.
fn decompress(compressed: &[u8], utf8_bytes: Option<i64>) -> Result<String, String> {
    let expected = utf8_bytes
        .and_then(|bytes| usize::try_from(bytes).ok())
        .filter(|bytes| (1..=MAX_EVENT_BYTES).contains(bytes))
        .ok_or_else(|| {
            format!(
                "event_zstd needs event_utf8_bytes between 1 and {MAX_EVENT_BYTES}, found {}",
                utf8_bytes.map_or_else(|| "NULL".to_owned(), |bytes| bytes.to_string())
            )
        })?;
    if compressed.is_empty() || compressed.len() > MAX_EVENT_BYTES {
        return Err(format!(
            "event_zstd holds {} bytes; OpenClaw stores 1 to {MAX_EVENT_BYTES}",
            compressed.len()
        ));
    }
    let bytes = zstd::bulk::decompress(compressed, expected)
        .map_err(|error| format!("event_zstd does not decompress as zstd: {error}"))?;
    if bytes.len() != expected {
        return Err(format!(
            "event_zstd decompresses to {} bytes, but event_utf8_bytes says {expected}",
            bytes.len()
        ));
    }
    String::from_utf8(bytes)
        .map_err(|error| format!("event_zstd does not decompress to UTF-8: {error}"))
}
