//! Leases: a claim on a piece of memory work that several servers over one store could each
//! start — the archive and extraction of one span that left a session — so it runs once. A
//! lease is a row `(tenant, name)` with a holder and an expiry; claiming it is one atomic
//! statement that takes a free row, an expired one, or the caller's own; the holder that does
//! the work finishes the lease with its result (kept, so a later claimer reads the result instead
//! of running the work again) or releases it (the work failed: anyone may try again).
//!
//! The expiry is what makes a crashed holder's work run again: a claim past it takes the lease
//! over. Servers' clocks are assumed close (NTP) next to the minutes a lease lasts.

use super::MemoryError;

/// Longest lease name, in bytes.
pub const MAX_LEASE_NAME_BYTES: usize = 512;

/// Longest holder id, in bytes.
pub const MAX_LEASE_HOLDER_BYTES: usize = 200;

/// Longest finished result, in bytes.
pub const MAX_LEASE_RESULT_BYTES: usize = 1 << 20;

/// Longest lease, in milliseconds (a day): a holder that needs longer claims again.
pub const MAX_LEASE_TTL_MS: u64 = 24 * 60 * 60 * 1000;

/// A lease as one caller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseState {
    /// Nobody holds it: no row, or its holder's time ran out (only a read answers this; a claim
    /// takes such a lease).
    Free,
    /// The caller holds it, until its expiry.
    Claimed,
    /// Another holder has it until `expires_at_ms` (the store's clock).
    Held {
        /// Who holds it.
        holder: String,
        /// When the claim runs out.
        expires_at_ms: i64,
    },
    /// The work is done: its holder stored this result.
    Finished {
        /// Who did the work.
        holder: String,
        /// What the holder stored.
        result: String,
    },
}

/// The row of a lease as a backend reads it.
pub(crate) struct LeaseRow {
    pub holder: String,
    pub expires_at_ms: i64,
    pub result: Option<String>,
}

impl LeaseRow {
    /// What the row means to `viewer` at `now_ms`.
    pub(crate) fn state_for(self, viewer: &str, now_ms: i64) -> LeaseState {
        match self.result {
            Some(result) => LeaseState::Finished {
                holder: self.holder,
                result,
            },
            None if self.expires_at_ms <= now_ms => LeaseState::Free,
            None if self.holder == viewer => LeaseState::Claimed,
            None => LeaseState::Held {
                holder: self.holder,
                expires_at_ms: self.expires_at_ms,
            },
        }
    }
}

/// Checks a lease's name and holder before anything is read or written.
pub(crate) fn check_lease(name: &str, holder: &str) -> Result<(), MemoryError> {
    if name.is_empty() || name.len() > MAX_LEASE_NAME_BYTES {
        return Err(MemoryError::invalid(
            "lease name",
            format!(
                "must be 1 to {MAX_LEASE_NAME_BYTES} bytes, got {}",
                name.len()
            ),
        ));
    }
    if holder.is_empty() || holder.len() > MAX_LEASE_HOLDER_BYTES {
        return Err(MemoryError::invalid(
            "lease holder",
            format!(
                "must be 1 to {MAX_LEASE_HOLDER_BYTES} bytes, got {}",
                holder.len()
            ),
        ));
    }
    Ok(())
}

/// Checks a claim's length; the expiry it gives at `now_ms`.
pub(crate) fn expiry(now_ms: i64, ttl_ms: u64) -> Result<i64, MemoryError> {
    if ttl_ms > MAX_LEASE_TTL_MS {
        return Err(MemoryError::invalid(
            "lease ttl",
            format!("must be at most {MAX_LEASE_TTL_MS} ms (a day), got {ttl_ms}"),
        ));
    }
    let ttl_ms = i64::try_from(ttl_ms).unwrap_or(i64::MAX);
    Ok(now_ms.saturating_add(ttl_ms))
}

/// Checks a finished lease's result.
pub(crate) fn check_result(result: &str) -> Result<(), MemoryError> {
    if result.len() > MAX_LEASE_RESULT_BYTES {
        return Err(MemoryError::invalid(
            "lease result",
            format!(
                "must be at most {MAX_LEASE_RESULT_BYTES} bytes, got {}",
                result.len()
            ),
        ));
    }
    Ok(())
}
