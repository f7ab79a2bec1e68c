//! A session's end: [`Engine::end_session`] archives what of the session no archive covers yet
//! and extracts its memories (the host said the session ended — OpenClaw's `session_end` on
//! `/new` or `reset`, a client's `POST …/end`), and [`Engine::archive_idle_sessions`] does the
//! same for every session of a tenant idle for `[memory] idle_archive_secs` (proxied and API
//! sessions, whose hosts never say). Without it a session shorter than the upload threshold
//! never reached memory.
//!
//! Each span is archived once: the span is what follows the last archived message, and a
//! span that has a recorded attempt is not started again (a failed one is retried with the
//! session's other failures); the memory store's lease keeps two servers from archiving it at
//! once, and a finished lease hands its outcome to a server that crashed before recording it.

use std::collections::HashMap;

use serde::Serialize;
use skald_core::ids::{SessionId, Tenant};
use tokio_util::sync::CancellationToken;

use super::Engine;
use crate::EngineError;
use crate::memory_write::{
    ArchiveOutcome, MemoryWriteError, SessionEndReason, archive_session_tail,
};

/// Sessions last changed longer ago than this are not archived by the idle sweep: they ended
/// before this server could have seen them (an import of old transcripts), and archiving them
/// all at once would spend an extraction on each.
pub const IDLE_ARCHIVE_HORIZON_MS: i64 = 7 * 24 * 3_600_000;

/// Sessions the idle sweep remembers having looked at, at most; past it the memory is cleared
/// (each session is then looked at once more).
const MAX_IDLE_CHECKED: usize = 10_000;

/// What ending a session did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SessionEndOutcome {
    /// The unarchived part was archived (or the attempt failed and is recorded, to be retried).
    Archived {
        /// What the attempt did.
        archive: Box<ArchiveOutcome>,
    },
    /// Every message of the session is archived already (or nothing was said in it).
    NothingNew,
    /// Memory, or its write path, is off.
    MemoryOff,
}

/// The memory of the idle sweep: each session it looked at, with the session's `updated_at_ms`
/// then, so that an unchanged session is not loaded again.
#[derive(Debug, Default)]
pub(super) struct IdleChecked {
    seen: HashMap<(String, String), i64>,
}

impl Engine {
    /// Ends `session` for memory (see the module docs): what no archive covers yet is archived
    /// and its memories extracted, pending failures retried first. The session itself is not
    /// changed beyond the archive's record, and may go on. Fails only when the session cannot
    /// be read or the record cannot be written.
    pub async fn end_session(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        reason: SessionEndReason,
    ) -> Result<SessionEndOutcome, EngineError> {
        // An unknown session is an error, not "nothing new".
        self.sessions().get(tenant, session)?;
        let config = self.config();
        if !config.memory.enabled || !self.writer().settings.enabled {
            return Ok(SessionEndOutcome::MemoryOff);
        }
        // An upload running for the session records its range when it finishes: the tail
        // starts after it.
        self.uploads().wait_finished(tenant, session).await;
        let slot = self.slot(tenant, session);
        let _state = slot.lock().await;
        let _row = self.row_scope(tenant, session);
        let archived = archive_session_tail(
            self.sessions(),
            self.writer(),
            tenant,
            session,
            reason,
            &CancellationToken::new(),
        )
        .await
        .map_err(|error| match error {
            MemoryWriteError::Session(error) => EngineError::Session(error),
            MemoryWriteError::Settings(error) => EngineError::InvalidInput {
                field: "memory.write",
                reason: error.to_string(),
            },
        })?;
        Ok(match archived {
            Some(archive) => SessionEndOutcome::Archived {
                archive: Box::new(archive),
            },
            None => SessionEndOutcome::NothingNew,
        })
    }

    /// Ends every session of `tenant` that nothing changed for `idle_ms` (and at most
    /// [`IDLE_ARCHIVE_HORIZON_MS`]), as [`Engine::end_session`] with
    /// [`SessionEndReason::Idle`]; a session already looked at and unchanged since is skipped
    /// without being read. Returns the sessions archived (or whose attempt failed). A session
    /// that cannot be read is left for the next sweep and said in the log.
    pub async fn archive_idle_sessions(
        &self,
        tenant: &Tenant,
        idle_ms: u64,
    ) -> Result<Vec<(SessionId, SessionEndOutcome)>, EngineError> {
        let config = self.config();
        if !config.memory.enabled || !self.writer().settings.enabled {
            return Ok(Vec::new());
        }
        let now = self.now_ms();
        let idle_ms = i64::try_from(idle_ms).unwrap_or(i64::MAX);
        let sessions = self.sessions().list(tenant)?;
        let mut archived = Vec::new();
        for info in sessions {
            let age = now.saturating_sub(info.updated_at_ms);
            if age < idle_ms || age > IDLE_ARCHIVE_HORIZON_MS {
                continue;
            }
            let key = (tenant.as_str().to_owned(), info.id.clone());
            if self.idle_checked().seen.get(&key) == Some(&info.updated_at_ms) {
                continue;
            }
            let Ok(id) = SessionId::parse(&info.id) else {
                continue;
            };
            match self.end_session(tenant, &id, SessionEndReason::Idle).await {
                Ok(outcome) => {
                    // The record the archive appended changed the session: what the sweep
                    // remembers is the session as it left it.
                    let after = self
                        .sessions()
                        .get(tenant, &id)
                        .map_or(info.updated_at_ms, |info| info.updated_at_ms);
                    let mut checked = self.idle_checked();
                    if checked.seen.len() >= MAX_IDLE_CHECKED {
                        checked.seen.clear();
                    }
                    checked.seen.insert(key, after);
                    drop(checked);
                    if let SessionEndOutcome::Archived { .. } = &outcome {
                        archived.push((id, outcome));
                    }
                }
                Err(error) => {
                    tracing::warn!(tenant = %tenant, session = %id, %error,
                        "an idle session could not be archived; the next sweep tries again");
                }
            }
        }
        Ok(archived)
    }

    fn idle_checked(&self) -> std::sync::MutexGuard<'_, IdleChecked> {
        // A panic while the lock was held left a map that is still whole.
        self.inner
            .idle_checked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
