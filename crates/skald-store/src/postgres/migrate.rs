//! `skald migrate`: an existing SQLite data directory's database copied into an empty
//! PostgreSQL database — tenants' sessions and entries, refs, memory versions with their merges
//! and LSH bands, API keys — row for row (ids, timestamps, key hashes and memory version chains
//! kept), the full-text index built for every live version, in one transaction. Then every table
//! is read back on both sides and compared: a row count and a SHA-256 over every row in key
//! order ([`TableCheck`]); the migration reports success only when all agree.

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde::Serialize;
use sha2::{Digest, Sha256};
use skald_core::memory::uri::MemoryUri;
use tokio_postgres::types::ToSql;

use super::{Conn, Database, fail};
use crate::memories::postgres::write::{index, postings_of};
use crate::{SCHEMA_VERSION, StoreError};

/// What one table holds on each side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableCheck {
    /// The table.
    pub table: &'static str,
    /// Rows in the SQLite database.
    pub source_rows: u64,
    /// Rows in PostgreSQL after the copy.
    pub target_rows: u64,
    /// SHA-256 over the SQLite rows, in key order.
    pub source_sha256: String,
    /// SHA-256 over the PostgreSQL rows, in the same order and rendering.
    pub target_sha256: String,
}

impl TableCheck {
    /// Whether both sides hold the same rows.
    pub fn matches(&self) -> bool {
        self.source_rows == self.target_rows && self.source_sha256 == self.target_sha256
    }
}

/// What [`migrate_sqlite_to_postgres`] copied and checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigrationReport {
    /// Every table, checked.
    pub tables: Vec<TableCheck>,
    /// The distinct tenants found (sessions, refs, memories and keys together).
    pub tenants: Vec<String>,
}

/// A column value as both sides render it for the check.
#[derive(Debug, Clone, PartialEq)]
enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Bytes(Vec<u8>),
    Vector(Vec<f32>),
}

impl Val {
    fn render(&self, out: &mut String) {
        match self {
            Val::Null => out.push_str("null"),
            Val::Int(value) => out.push_str(&value.to_string()),
            Val::Real(value) => out.push_str(&format!("{value:?}")),
            Val::Text(text) => out.push_str(&serde_json::Value::from(text.as_str()).to_string()),
            Val::Bytes(bytes) => {
                out.push('x');
                for byte in bytes {
                    out.push_str(&format!("{byte:02x}"));
                }
            }
            Val::Vector(vector) => {
                out.push('[');
                for (at, x) in vector.iter().enumerate() {
                    if at > 0 {
                        out.push(',');
                    }
                    out.push_str(&format!("{x:?}"));
                }
                out.push(']');
            }
        }
    }
}

/// The kind of a column, for reading it on either side.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Int,
    OptInt,
    Real,
    Text,
    OptText,
    Bytes,
    /// An SQLite integer 0/1, a PostgreSQL boolean.
    Flag,
    /// An SQLite little-endian `f32` blob, a PostgreSQL `real[]`.
    OptVector,
}

/// A table: its columns in order, the key order, and how PostgreSQL takes a row.
struct Table {
    name: &'static str,
    columns: &'static [(&'static str, Kind)],
    /// `ORDER BY` on SQLite.
    sqlite_order: &'static str,
    /// `ORDER BY` on PostgreSQL (the same rows in the same order).
    pg_order: &'static str,
}

const TABLES: &[Table] = &[
    Table {
        name: "refs",
        columns: &[
            ("tenant", Kind::Text),
            ("id", Kind::Text),
            ("codec", Kind::Text),
            ("content", Kind::Bytes),
            ("original_bytes", Kind::Int),
            ("stored_bytes", Kind::Int),
            ("created_at_ms", Kind::Int),
            ("expires_at_ms", Kind::Int),
        ],
        sqlite_order: "tenant, id",
        pg_order: "tenant, id",
    },
    Table {
        name: "sessions",
        columns: &[
            ("tenant", Kind::Text),
            ("id", Kind::Text),
            ("header", Kind::Text),
            ("source_format", Kind::Text),
            ("source", Kind::OptText),
            ("title", Kind::OptText),
            ("leaf_id", Kind::OptText),
            ("entry_count", Kind::Int),
            ("message_count", Kind::Int),
            ("created_at_ms", Kind::Int),
            ("updated_at_ms", Kind::Int),
            ("pause_compaction", Kind::Flag),
            ("pause_offload", Kind::Flag),
        ],
        sqlite_order: "tenant, id",
        pg_order: "tenant, id",
    },
    Table {
        name: "session_entries",
        columns: &[
            ("tenant", Kind::Text),
            ("session_id", Kind::Text),
            ("seq", Kind::Int),
            ("id", Kind::Text),
            ("parent_id", Kind::OptText),
            ("type", Kind::Text),
            ("timestamp", Kind::Text),
            ("body", Kind::Text),
        ],
        sqlite_order: "tenant, session_id, seq",
        pg_order: "tenant, session_id, seq",
    },
    Table {
        name: "memories",
        columns: &[
            ("id", Kind::Int),
            ("tenant", Kind::Text),
            ("uri", Kind::Text),
            ("parent", Kind::Text),
            ("version", Kind::Int),
            ("category", Kind::Text),
            ("dedup_root", Kind::Text),
            ("l0", Kind::Text),
            ("l1", Kind::Text),
            ("l2", Kind::Text),
            ("l0_given", Kind::Flag),
            ("l1_given", Kind::Flag),
            ("content_hash", Kind::Text),
            ("priority", Kind::Int),
            ("source", Kind::Text),
            ("created_at_ms", Kind::Int),
            ("updated_at_ms", Kind::Int),
            ("supersedes", Kind::OptInt),
            ("superseded_by", Kind::OptInt),
            ("superseded_at_ms", Kind::OptInt),
            ("forgotten_at_ms", Kind::OptInt),
            ("embedding", Kind::OptVector),
        ],
        sqlite_order: "id",
        pg_order: "id",
    },
    Table {
        name: "memory_merges",
        columns: &[
            ("memory_id", Kind::Int),
            ("merged_at_ms", Kind::Int),
            ("kind", Kind::Text),
            ("similarity", Kind::Real),
            ("requested_uri", Kind::Text),
            ("source", Kind::Text),
        ],
        sqlite_order: "rowid",
        pg_order: "seq",
    },
    Table {
        name: "memory_bands",
        columns: &[
            ("tenant", Kind::Text),
            ("band", Kind::Int),
            ("memory_id", Kind::Int),
        ],
        sqlite_order: "tenant, band, memory_id",
        pg_order: "tenant, band, memory_id",
    },
    Table {
        name: "api_keys",
        columns: &[
            ("id", Kind::Text),
            ("tenant", Kind::Text),
            ("name", Kind::Text),
            ("secret_sha256", Kind::Text),
            ("prefix", Kind::Text),
            ("created_at_ms", Kind::Int),
            ("revoked_at_ms", Kind::OptInt),
        ],
        sqlite_order: "rowid",
        pg_order: "seq",
    },
];

fn sqlite_failure(action: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |error| StoreError::backend(action, crate::sqlite::backend_error(error))
}

fn read_sqlite(conn: &Connection, table: &Table) -> Result<Vec<Vec<Val>>, StoreError> {
    let names: Vec<&str> = table.columns.iter().map(|(name, _)| *name).collect();
    let sql = format!(
        "SELECT {} FROM {} ORDER BY {}",
        names.join(", "),
        table.name,
        table.sqlite_order
    );
    let mut statement = conn
        .prepare(&sql)
        .map_err(sqlite_failure("reading the SQLite database"))?;
    let mut rows = statement
        .query([])
        .map_err(sqlite_failure("reading the SQLite database"))?;
    let mut out = Vec::new();
    while let Some(row) = rows
        .next()
        .map_err(sqlite_failure("reading the SQLite database"))?
    {
        let mut values = Vec::with_capacity(table.columns.len());
        for (at, (_, kind)) in table.columns.iter().enumerate() {
            let read = sqlite_failure("reading the SQLite database");
            let value = match kind {
                Kind::Int | Kind::Flag => Val::Int(row.get(at).map_err(read)?),
                Kind::OptInt => row
                    .get::<_, Option<i64>>(at)
                    .map_err(read)?
                    .map_or(Val::Null, Val::Int),
                Kind::Real => Val::Real(row.get(at).map_err(read)?),
                Kind::Text => Val::Text(row.get(at).map_err(read)?),
                Kind::OptText => row
                    .get::<_, Option<String>>(at)
                    .map_err(read)?
                    .map_or(Val::Null, Val::Text),
                Kind::Bytes => Val::Bytes(row.get(at).map_err(read)?),
                Kind::OptVector => match row.get::<_, Option<Vec<u8>>>(at).map_err(read)? {
                    Some(bytes) => Val::Vector(
                        bytes
                            .chunks_exact(4)
                            .map(|chunk| {
                                f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]])
                            })
                            .collect(),
                    ),
                    None => Val::Null,
                },
            };
            values.push(value);
        }
        out.push(values);
    }
    Ok(out)
}

fn read_postgres(conn: &mut Conn, table: &Table) -> Result<Vec<Vec<Val>>, StoreError> {
    let names: Vec<&str> = table.columns.iter().map(|(name, _)| *name).collect();
    let sql = format!(
        "SELECT {} FROM {} ORDER BY {}",
        names.join(", "),
        table.name,
        table.pg_order
    );
    let rows = conn
        .query(&sql, &[])
        .map_err(fail::<StoreError>("reading the PostgreSQL database"))?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let mut values = Vec::with_capacity(table.columns.len());
        for (at, (_, kind)) in table.columns.iter().enumerate() {
            let value = match kind {
                Kind::Int => Val::Int(row.get(at)),
                Kind::Flag => Val::Int(i64::from(row.get::<_, bool>(at))),
                Kind::OptInt => row.get::<_, Option<i64>>(at).map_or(Val::Null, Val::Int),
                Kind::Real => Val::Real(row.get(at)),
                Kind::Text => Val::Text(row.get(at)),
                Kind::OptText => row
                    .get::<_, Option<String>>(at)
                    .map_or(Val::Null, Val::Text),
                Kind::Bytes => Val::Bytes(row.get(at)),
                Kind::OptVector => row
                    .get::<_, Option<Vec<f32>>>(at)
                    .map_or(Val::Null, Val::Vector),
            };
            values.push(value);
        }
        out.push(values);
    }
    Ok(out)
}

fn digest(rows: &[Vec<Val>]) -> String {
    let mut hasher = Sha256::new();
    let mut line = String::new();
    for row in rows {
        line.clear();
        for (at, value) in row.iter().enumerate() {
            if at > 0 {
                line.push('\t');
            }
            value.render(&mut line);
        }
        line.push('\n');
        hasher.update(line.as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// A value as PostgreSQL takes it for a column of `kind`.
fn to_sql(value: &Val, kind: Kind) -> Box<dyn ToSql + Sync> {
    match (value, kind) {
        (Val::Int(flag), Kind::Flag) => Box::new(*flag != 0),
        (Val::Int(value), _) => Box::new(*value),
        (Val::Real(value), _) => Box::new(*value),
        (Val::Text(text), _) => Box::new(text.clone()),
        (Val::Bytes(bytes), _) => Box::new(bytes.clone()),
        (Val::Vector(vector), _) => Box::new(vector.clone()),
        (Val::Null, Kind::OptVector) => Box::new(None::<Vec<f32>>),
        (Val::Null, Kind::OptText | Kind::Text) => Box::new(None::<String>),
        (Val::Null, Kind::Int | Kind::OptInt | Kind::Real | Kind::Bytes | Kind::Flag) => {
            Box::new(None::<i64>)
        }
    }
}

fn text_at(row: &[Val], at: usize) -> Result<&str, StoreError> {
    match row.get(at) {
        Some(Val::Text(text)) => Ok(text),
        other => Err(StoreError::Corrupt(format!(
            "column {at} of a memory row is {other:?}, not text"
        ))),
    }
}

/// Copies the SQLite database at `source` into `target`, whose skald tables must be empty,
/// and checks every table on both sides. Nothing is written to `source` (it is opened
/// read-only) and, on any failure, nothing stays in `target` (one transaction).
pub fn migrate_sqlite_to_postgres(
    source: &std::path::Path,
    target: &Database,
) -> Result<MigrationReport, StoreError> {
    let sqlite = Connection::open_with_flags(source, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(sqlite_failure("opening the SQLite database"))?;
    let version: i64 = sqlite
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(sqlite_failure("reading the SQLite schema version"))?;
    if version != SCHEMA_VERSION {
        return Err(StoreError::InvalidSettings(format!(
            "{} has schema version {version}, this skald reads {SCHEMA_VERSION}: open it once \
             with this skald (any command) to bring it up to date, then migrate",
            source.display()
        )));
    }
    let mut sources = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        sources.push(read_sqlite(&sqlite, table)?);
    }
    let mut tenants: Vec<String> = Vec::new();
    for (table, rows) in TABLES.iter().zip(&sources) {
        let Some(at) = table.columns.iter().position(|(name, _)| *name == "tenant") else {
            continue;
        };
        for row in rows {
            if let Some(Val::Text(tenant)) = row.get(at) {
                if !tenants.contains(tenant) {
                    tenants.push(tenant.clone());
                }
            }
        }
    }
    tenants.sort();
    target.write::<_, StoreError>(|conn| {
        for table in TABLES {
            let row = conn
                .query_one(&format!("SELECT COUNT(*) FROM {}", table.name), &[])
                .map_err(fail::<StoreError>("checking the target is empty"))?;
            let rows: i64 = row.get(0);
            if rows > 0 {
                return Err(StoreError::InvalidSettings(format!(
                    "the PostgreSQL database already has {rows} rows in {}: migrate into an \
                     empty database (nothing was written)",
                    table.name
                )));
            }
        }
        let postings = memory_postings(&sources)?;
        let bm25_totals = fts5_totals(&sqlite)?;
        for (table, rows) in TABLES.iter().zip(&sources) {
            let tokens: Vec<i64> = postings.iter().map(|(_, _, p, _)| p.tokens).collect();
            let extra = (table.name == "memories").then_some(tokens.as_slice());
            copy_table(conn, table, rows, extra)?;
        }
        rebuild_memory_index(conn, &postings)?;
        // FTS5's BM25 counts every row it ever indexed; carry its totals over so the copy
        // ranks as the original does.
        if let Some((rows, tokens)) = bm25_totals {
            conn.execute(
                "UPDATE memory_index_totals SET documents = $1, tokens = $2",
                &[&rows, &tokens],
            )
            .map_err(fail::<StoreError>("copying the full-text totals"))?;
        }
        Ok(())
    })?;
    let mut conn = target.conn::<StoreError>("checking the copy")?;
    let mut checks = Vec::with_capacity(TABLES.len());
    for (table, rows) in TABLES.iter().zip(&sources) {
        let copied = read_postgres(&mut conn, table)?;
        checks.push(TableCheck {
            table: table.name,
            source_rows: rows.len() as u64,
            target_rows: copied.len() as u64,
            source_sha256: digest(rows),
            target_sha256: digest(&copied),
        });
    }
    Ok(MigrationReport {
        tables: checks,
        tenants,
    })
}

/// `fts_tokens`: the memories' token counts, one per row, when `table` is `memories`.
fn copy_table(
    conn: &mut Conn,
    table: &Table,
    rows: &[Vec<Val>],
    fts_tokens: Option<&[i64]>,
) -> Result<(), StoreError> {
    let names: Vec<&str> = table.columns.iter().map(|(name, _)| *name).collect();
    let placeholders: Vec<String> = (1..=names.len()).map(|at| format!("${at}")).collect();
    let (mut columns, mut values) = (names.join(", "), placeholders.join(", "));
    let overriding = if fts_tokens.is_some() {
        columns.push_str(", fts_tokens");
        values.push_str(&format!(", ${}", names.len() + 1));
        " OVERRIDING SYSTEM VALUE"
    } else {
        ""
    };
    let sql = format!(
        "INSERT INTO {} ({columns}){overriding} VALUES ({values})",
        table.name
    );
    for (at, row) in rows.iter().enumerate() {
        let mut boxed: Vec<Box<dyn ToSql + Sync>> = row
            .iter()
            .zip(table.columns)
            .map(|(value, (_, kind))| to_sql(value, *kind))
            .collect();
        if let Some(tokens) = fts_tokens {
            boxed.push(Box::new(tokens.get(at).copied().unwrap_or_default()));
        }
        let params: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|value| value.as_ref()).collect();
        conn.query(&sql, &params)
            .map_err(fail::<StoreError>("copying a row"))?;
    }
    Ok(())
}

/// FTS5's own row and token totals in the SQLite database (`None` before anything was indexed).
fn fts5_totals(sqlite: &Connection) -> Result<Option<(i64, i64)>, StoreError> {
    let record: Option<Vec<u8>> = sqlite
        .query_row(
            "SELECT block FROM memories_fts_data WHERE id = 1",
            [],
            |row| row.get(0),
        )
        .optional()
        .map_err(sqlite_failure("reading the full-text totals"))?;
    match record {
        None => Ok(None),
        Some(record) => crate::memories::postgres::fts::parse_averages(&record)
            .map(Some)
            .ok_or_else(|| StoreError::Corrupt("the FTS5 averages record does not parse".into())),
    }
}

/// Each memory row's id, tenant, postings (what FTS5 would index of it) and whether it is live.
type MemoryPostings = Vec<(i64, String, crate::memories::postgres::fts::Postings, bool)>;

fn memory_postings(sources: &[Vec<Vec<Val>>]) -> Result<MemoryPostings, StoreError> {
    let Some(at) = TABLES.iter().position(|table| table.name == "memories") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for row in sources.get(at).map(Vec::as_slice).unwrap_or_default() {
        let Some(Val::Int(id)) = row.first() else {
            return Err(StoreError::Corrupt("a memory row without an id".into()));
        };
        let tenant = text_at(row, 1)?;
        let uri = MemoryUri::parse(text_at(row, 2)?)
            .map_err(|error| StoreError::Corrupt(format!("a copied memory's URI: {error}")))?;
        let given = |column: usize, flag: usize| -> Result<Option<&str>, StoreError> {
            Ok(match row.get(flag) {
                Some(Val::Int(0)) => None,
                Some(_) | None => Some(text_at(row, column)?),
            })
        };
        let postings = postings_of(tenant, &uri, given(7, 10)?, given(8, 11)?, text_at(row, 9)?)
            .map_err(|error| StoreError::Corrupt(format!("indexing memory {id}: {error}")))?;
        let live = matches!(row.get(18), Some(Val::Null)) && matches!(row.get(20), Some(Val::Null));
        out.push((*id, tenant.to_owned(), postings, live));
    }
    Ok(out)
}

/// The full-text index of every live version, the totals, the per-tenant write counters, and
/// the id sequence past the copied ids.
fn rebuild_memory_index(conn: &mut Conn, postings: &MemoryPostings) -> Result<(), StoreError> {
    let mut tenants: Vec<&str> = Vec::new();
    for (id, tenant, postings, live) in postings {
        if *live {
            index(conn, tenant, *id, postings)
                .map_err(|error| StoreError::Corrupt(format!("indexing memory {id}: {error}")))?;
        }
        if !tenants.contains(&tenant.as_str()) {
            tenants.push(tenant);
        }
    }
    for tenant in tenants {
        conn.execute(
            "INSERT INTO memory_tenants (tenant, writes) VALUES ($1, 1)",
            &[&tenant],
        )
        .map_err(fail::<StoreError>("counting a tenant's memory writes"))?;
    }
    conn.execute_batch(
        "SELECT setval(pg_get_serial_sequence('memories', 'id'), \
         GREATEST((SELECT MAX(id) FROM memories), 1))",
    )
    .map_err(fail::<StoreError>("moving the memory id sequence"))?;
    Ok(())
}
