//! The leases of [`super::SqliteMemoryStore`] (`memories::lease`): the `memory_leases` table,
//! each operation one statement or two in an `IMMEDIATE` transaction, which holds SQLite's write
//! lock, so a claim's check and write are one step for every process on the file.

use rusqlite::{Connection, OptionalExtension, params};
use skald_core::ids::Tenant;

use crate::memories::MemoryError;
use crate::memories::lease::{LeaseRow, LeaseState};

/// Takes the lease when free, expired or `holder`'s own; then what it is.
pub(super) fn claim(
    tx: &Connection,
    tenant: &Tenant,
    name: &str,
    holder: &str,
    now_ms: i64,
    expires_at_ms: i64,
) -> Result<LeaseState, MemoryError> {
    tx.execute(
        "INSERT INTO memory_leases (tenant, name, holder, expires_at_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (tenant, name) DO UPDATE
            SET holder = excluded.holder, expires_at_ms = excluded.expires_at_ms
          WHERE memory_leases.result IS NULL
            AND (memory_leases.holder = excluded.holder OR memory_leases.expires_at_ms <= ?5)",
        params![tenant.as_str(), name, holder, expires_at_ms, now_ms],
    )
    .map_err(MemoryError::storage("claiming a lease"))?;
    Ok(match row(tx, tenant, name)? {
        // The statement above leaves a row: a claim's own, or one it could not take.
        Some(row) if row.result.is_none() && row.holder == holder => LeaseState::Claimed,
        Some(row) => row.state_for(holder, now_ms),
        None => LeaseState::Free,
    })
}

/// Stores the result on `holder`'s unfinished lease.
pub(super) fn finish(
    tx: &Connection,
    tenant: &Tenant,
    name: &str,
    holder: &str,
    result: &str,
) -> Result<bool, MemoryError> {
    let changed = tx
        .execute(
            "UPDATE memory_leases SET result = ?4
              WHERE tenant = ?1 AND name = ?2 AND holder = ?3 AND result IS NULL",
            params![tenant.as_str(), name, holder, result],
        )
        .map_err(MemoryError::storage("finishing a lease"))?;
    Ok(changed == 1)
}

/// Deletes `holder`'s unfinished lease.
pub(super) fn release(
    tx: &Connection,
    tenant: &Tenant,
    name: &str,
    holder: &str,
) -> Result<bool, MemoryError> {
    let changed = tx
        .execute(
            "DELETE FROM memory_leases
              WHERE tenant = ?1 AND name = ?2 AND holder = ?3 AND result IS NULL",
            params![tenant.as_str(), name, holder],
        )
        .map_err(MemoryError::storage("releasing a lease"))?;
    Ok(changed == 1)
}

/// The lease's row, if it has one.
pub(super) fn row(
    tx: &Connection,
    tenant: &Tenant,
    name: &str,
) -> Result<Option<LeaseRow>, MemoryError> {
    tx.query_row(
        "SELECT holder, expires_at_ms, result FROM memory_leases WHERE tenant = ?1 AND name = ?2",
        params![tenant.as_str(), name],
        |row| {
            Ok(LeaseRow {
                holder: row.get(0)?,
                expires_at_ms: row.get(1)?,
                result: row.get(2)?,
            })
        },
    )
    .optional()
    .map_err(MemoryError::storage("reading a lease"))
}
