//! The idle sweep: while [`crate::serve`] runs, every tenant's sessions that nothing changed
//! for `[memory] idle_archive_secs` have what of them no archive covers yet archived to memory
//! (`Engine::archive_idle_sessions`). Proxied and API sessions have no end a host reports: this
//! is how a short one reaches memory.
//!
//! The tenants are those of the key store's live keys, and the open server's. A sweep runs
//! every quarter of the idle time (at most a minute apart, at least a second); it stops with
//! the server, and one under way when the stop comes finishes within the shutdown grace (its
//! span's lease runs out otherwise, and the next start archives it).

use std::collections::BTreeSet;
use std::time::Duration;

use skald_core::ids::Tenant;
use tokio_util::sync::CancellationToken;

use crate::auth::OPEN_TENANT;
use crate::state::AppState;

/// How long the sweep waits between two passes for an idle time of `idle_secs`.
pub(crate) fn sweep_period(idle_secs: u64) -> Duration {
    Duration::from_millis((idle_secs * 1000 / 4).clamp(1000, 60_000))
}

/// Starts the sweep on the server's task tracker, unless `idle_archive_secs` is 0 or memory is
/// off; it ends when `stop` is cancelled.
pub(crate) fn start(state: &AppState, stop: CancellationToken) {
    let memory = &state.config.engine.memory;
    if memory.idle_archive_secs == 0 || !memory.enabled {
        return;
    }
    let idle_ms = memory.idle_archive_secs.saturating_mul(1000);
    let period = sweep_period(memory.idle_archive_secs);
    let state = state.clone();
    state.tasks.clone().spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(period) => {}
            }
            for tenant in tenants(&state) {
                if stop.is_cancelled() {
                    return;
                }
                match state.engine.archive_idle_sessions(&tenant, idle_ms).await {
                    Ok(archived) => {
                        for (session, _) in archived {
                            tracing::info!(%tenant, %session,
                                "archived an idle session's memory");
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%tenant, %error,
                            "the idle sweep could not list the sessions; it tries again");
                    }
                }
            }
        }
    });
}

/// The tenants whose sessions are swept: every live key's, and the open server's.
fn tenants(state: &AppState) -> BTreeSet<Tenant> {
    let mut tenants = BTreeSet::new();
    if let Ok(tenant) = Tenant::parse(OPEN_TENANT) {
        tenants.insert(tenant);
    }
    match state.keys.list() {
        Ok(keys) => {
            for key in keys.into_iter().filter(|key| key.revoked_at_ms.is_none()) {
                if let Ok(tenant) = Tenant::parse(key.tenant) {
                    tenants.insert(tenant);
                }
            }
        }
        Err(error) => tracing::warn!(%error, "the idle sweep could not list the API keys"),
    }
    tenants
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_runs_every_quarter_of_the_idle_time_between_a_second_and_a_minute() {
        assert_eq!(sweep_period(1), Duration::from_secs(1));
        assert_eq!(sweep_period(120), Duration::from_secs(30));
        assert_eq!(sweep_period(1800), Duration::from_secs(60));
    }
}
