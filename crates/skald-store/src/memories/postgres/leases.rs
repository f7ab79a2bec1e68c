//! The leases of [`super::PgMemoryStore`] (`memories::lease`): the `memory_leases` table. A
//! claim is one `INSERT … ON CONFLICT DO UPDATE … WHERE`, which locks the row whether or not
//! it takes it, so of several servers claiming at once one takes the lease and the others read
//! its holder in the same transaction.

use skald_core::ids::Tenant;

use crate::memories::MemoryError;
use crate::memories::lease::{LeaseRow, LeaseState};
use crate::postgres::{Conn, fail};

/// Takes the lease when free, expired or `holder`'s own; then what it is.
pub(super) fn claim(
    conn: &mut Conn,
    tenant: &Tenant,
    name: &str,
    holder: &str,
    now_ms: i64,
    expires_at_ms: i64,
) -> Result<LeaseState, MemoryError> {
    conn.execute(
        "INSERT INTO memory_leases (tenant, name, holder, expires_at_ms) VALUES ($1, $2, $3, $4)
         ON CONFLICT (tenant, name) DO UPDATE
            SET holder = excluded.holder, expires_at_ms = excluded.expires_at_ms
          WHERE memory_leases.result IS NULL
            AND (memory_leases.holder = excluded.holder OR memory_leases.expires_at_ms <= $5)",
        &[&tenant.as_str(), &name, &holder, &expires_at_ms, &now_ms],
    )
    .map_err(fail::<MemoryError>("claiming a lease"))?;
    Ok(match row(conn, tenant, name)? {
        // The statement above leaves a row: a claim's own, or one it could not take.
        Some(row) if row.result.is_none() && row.holder == holder => LeaseState::Claimed,
        Some(row) => row.state_for(holder, now_ms),
        None => LeaseState::Free,
    })
}

/// Stores the result on `holder`'s unfinished lease.
pub(super) fn finish(
    conn: &mut Conn,
    tenant: &Tenant,
    name: &str,
    holder: &str,
    result: &str,
) -> Result<bool, MemoryError> {
    let changed = conn
        .execute(
            "UPDATE memory_leases SET result = $4
              WHERE tenant = $1 AND name = $2 AND holder = $3 AND result IS NULL",
            &[&tenant.as_str(), &name, &holder, &result],
        )
        .map_err(fail::<MemoryError>("finishing a lease"))?;
    Ok(changed == 1)
}

/// Deletes `holder`'s unfinished lease.
pub(super) fn release(
    conn: &mut Conn,
    tenant: &Tenant,
    name: &str,
    holder: &str,
) -> Result<bool, MemoryError> {
    let changed = conn
        .execute(
            "DELETE FROM memory_leases
              WHERE tenant = $1 AND name = $2 AND holder = $3 AND result IS NULL",
            &[&tenant.as_str(), &name, &holder],
        )
        .map_err(fail::<MemoryError>("releasing a lease"))?;
    Ok(changed == 1)
}

/// The lease's row, if it has one.
pub(super) fn row(
    conn: &mut Conn,
    tenant: &Tenant,
    name: &str,
) -> Result<Option<LeaseRow>, MemoryError> {
    let row = conn
        .query_opt(
            "SELECT holder, expires_at_ms, result FROM memory_leases \
             WHERE tenant = $1 AND name = $2",
            &[&tenant.as_str(), &name],
        )
        .map_err(fail::<MemoryError>("reading a lease"))?;
    Ok(row.map(|row| LeaseRow {
        holder: row.get(0),
        expires_at_ms: row.get(1),
        result: row.get(2),
    }))
}
