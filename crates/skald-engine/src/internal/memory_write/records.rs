//! The session records of the write path: every archive-and-extract outcome is appended to
//! the session as a [`EXTRACTION_CUSTOM_TYPE`] custom entry, and the session is where failed
//! spans are found again and retried from.
//!
//! The session is the durable record because it is the one store the host already keeps: a
//! failed extraction is rebuilt from the session's own entries ([`retry_pending_extractions`],
//! up to the attempt limit) rather than from state held in memory, so a restart loses nothing,
//! and a span recorded `done` is never archived twice. [`archive_compacted_span`], the
//! compaction hook, is here because it is built on these records (retry first, skip what is
//! done, record the outcome). `append_custom` and the timestamps are shared with the upload's
//! own records.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Message, Role};
use skald_core::session::{Entry, EntryKind, Session};
use skald_store::sessions::{SessionError, SessionStore};
use tokio_util::sync::CancellationToken;

use super::writer::{
    ArchiveOrigin, ArchiveOutcome, ArchiveSpan, MemoryWriteError, MemoryWriter, SessionEndReason,
    SpanRange,
};
use crate::compact::CompactResult;
use skald_core::session::session_context;

/// `customType` of the session entries recording each archive and extraction.
pub const EXTRACTION_CUSTOM_TYPE: &str = "skald.memory_extraction";

/// Appends a custom entry under the leaf.
pub(super) fn append_custom(
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    custom_type: &str,
    data: Value,
) -> Result<String, MemoryWriteError> {
    let session = sessions.load(tenant, session_id)?;
    let seed = session.entries().len() as u64;
    let mut attempt = 0u32;
    loop {
        let candidate = (seed.wrapping_mul(2_654_435_761) as u32)
            ^ attempt.wrapping_mul(0x9E37_79B9)
            ^ fxhash(custom_type);
        let id = session.fresh_id(candidate);
        let entry = Entry {
            id: id.clone(),
            parent_id: session.leaf_id().map(str::to_owned),
            timestamp: now_iso(),
            kind: EntryKind::Custom {
                custom_type: custom_type.to_owned(),
                data: Some(data.clone()),
            },
            extra: Default::default(),
        };
        match sessions.append(tenant, session_id, std::slice::from_ref(&entry)) {
            Ok(()) => return Ok(id),
            Err(SessionError::DuplicateEntryId { .. }) if attempt < 8 => attempt += 1,
            Err(error) => return Err(error.into()),
        }
    }
}

fn fxhash(text: &str) -> u32 {
    text.bytes().fold(0x811C_9DC5u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

pub(crate) fn now_iso() -> String {
    iso_of_millis(skald_store::clock::now_ms())
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of epoch milliseconds.
fn iso_of_millis(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// Records an attempt's outcome in the session.
pub fn record_outcome(
    sessions: &dyn SessionStore,
    tenant: &Tenant,
    session_id: &SessionId,
    outcome: &ArchiveOutcome,
) -> Result<String, MemoryWriteError> {
    let data = serde_json::to_value(outcome).unwrap_or(Value::Null);
    append_custom(sessions, tenant, session_id, EXTRACTION_CUSTOM_TYPE, data)
}

/// Every recorded outcome of the session, in append order (all branches).
pub fn recorded_outcomes(session: &Session) -> Vec<ArchiveOutcome> {
    session
        .entries()
        .iter()
        .filter_map(|entry| entry.kind.custom_data(EXTRACTION_CUSTOM_TYPE))
        .filter_map(|data| serde_json::from_value(data.clone()).ok())
        .collect()
}

/// The latest outcome of each span, by [`SpanRange::key`].
pub(super) fn latest_outcomes(session: &Session) -> BTreeMap<String, ArchiveOutcome> {
    let mut latest = BTreeMap::new();
    for outcome in recorded_outcomes(session) {
        latest.insert(outcome.range.key(), outcome);
    }
    latest
}

/// The messages of `range` from the session's entries (whatever branch they are on now).
fn span_messages(session: &Session, range: &SpanRange) -> Option<Vec<Message>> {
    let path = session.path_to(Some(&range.last_entry_id));
    let start = path
        .iter()
        .position(|entry| entry.id == range.first_entry_id)?;
    Some(
        path.get(start..)?
            .iter()
            .filter_map(|entry| {
                let mut message = entry.kind.as_message()?.clone();
                message.meta.id = Some(entry.id.clone());
                Some(message)
            })
            .collect(),
    )
}

/// The failed spans still worth a retry, rebuilt from the session.
pub(super) fn pending_spans(
    session: &Session,
    session_id: &SessionId,
    max_attempts: u32,
) -> Vec<ArchiveSpan> {
    latest_outcomes(session)
        .into_values()
        .filter(|outcome| !outcome.is_done() && outcome.attempts < max_attempts)
        .filter_map(|outcome| {
            let messages = span_messages(session, &outcome.range)?;
            Some(ArchiveSpan {
                session_id: session_id.clone(),
                messages,
                summary: None,
                range: outcome.range,
                origin: outcome.origin,
                archived: outcome.archive,
                previous_attempts: outcome.attempts,
            })
        })
        .collect()
}

/// Retries every failed archive or extraction of the session (below the attempt limit) and
/// records each new outcome. Returns them.
pub async fn retry_pending_extractions(
    sessions: &dyn SessionStore,
    writer: &MemoryWriter,
    tenant: &Tenant,
    session_id: &SessionId,
    cancel: &CancellationToken,
) -> Result<Vec<ArchiveOutcome>, MemoryWriteError> {
    let session = sessions.load(tenant, session_id)?;
    let mut done = Vec::new();
    for span in pending_spans(
        &session,
        session_id,
        writer.settings.max_extraction_attempts,
    ) {
        if cancel.is_cancelled() {
            break;
        }
        let outcome = writer.archive(tenant, &span, cancel).await;
        record_outcome(sessions, tenant, session_id, &outcome)?;
        done.push(outcome);
    }
    Ok(done)
}

/// Ids of the session's compaction entries (their summaries show in the context as messages
/// with these ids).
pub(super) fn compaction_ids(session: &Session) -> HashSet<String> {
    session
        .entries()
        .iter()
        .filter(|entry| entry.kind.is_compaction())
        .map(|entry| entry.id.clone())
        .collect()
}

/// The compaction hook: after `compact_session` wrote a checkpoint, archives the span it
/// replaced (the host's `system_prompt` first, if given) and extracts its memories; pending
/// failures are retried first. `Ok(None)` when nothing was compacted, the writer is disabled,
/// or this span was already archived.
pub async fn archive_compacted_span(
    sessions: &dyn SessionStore,
    writer: &MemoryWriter,
    tenant: &Tenant,
    session_id: &SessionId,
    result: &CompactResult,
    system_prompt: Option<&str>,
    cancel: &CancellationToken,
) -> Result<Option<ArchiveOutcome>, MemoryWriteError> {
    let Some(checkpoint_id) = result.checkpoint_entry_id.as_deref() else {
        return Ok(None);
    };
    if !writer.settings.enabled {
        return Ok(None);
    }
    retry_pending_extractions(sessions, writer, tenant, session_id, cancel).await?;
    let session = sessions.load(tenant, session_id)?;
    let Some(checkpoint) = session.entry(checkpoint_id) else {
        return Ok(None);
    };
    let EntryKind::Compaction {
        summary,
        first_kept_entry_id,
        ..
    } = &checkpoint.kind
    else {
        return Ok(None);
    };
    let before = session_context(&session, checkpoint.parent_id.as_deref());
    let summaries = compaction_ids(&session);
    let mut span: Vec<Message> = before
        .into_iter()
        .take_while(|message| {
            first_kept_entry_id.is_none()
                || message.meta.id.as_deref() != first_kept_entry_id.as_deref()
        })
        .filter(|message| {
            message
                .meta
                .id
                .as_deref()
                .is_none_or(|id| !summaries.contains(id))
        })
        .collect();
    let Some(range) = SpanRange::of(&span, first_kept_entry_id.clone()) else {
        return Ok(None);
    };
    if latest_outcomes(&session)
        .get(&range.key())
        .is_some_and(ArchiveOutcome::is_done)
    {
        return Ok(None);
    }
    if let Some(prompt) = system_prompt.filter(|prompt| !prompt.trim().is_empty()) {
        span.insert(0, Message::text(Role::System, prompt));
    }
    let archive = ArchiveSpan {
        session_id: session_id.clone(),
        messages: span,
        summary: Some(summary.clone()),
        range,
        origin: ArchiveOrigin::Compaction {
            checkpoint_entry_id: checkpoint_id.to_owned(),
        },
        archived: Vec::new(),
        previous_attempts: 0,
    };
    let outcome = writer.archive(tenant, &archive, cancel).await;
    record_outcome(sessions, tenant, session_id, &outcome)?;
    Ok(Some(outcome))
}

/// The session-end hook: archives what of the session's active branch no archive covers yet —
/// the messages after the last one a recorded archive ends at (all of them when none does, or
/// when that message was compacted away) — and extracts its memories; pending failures are
/// retried first. The span stays in the context: a session that goes on later archives only
/// what came after it. `Ok(None)` when the writer is disabled, nothing new was said (no user or
/// assistant message), or this span already has a recorded attempt (a failed one is retried by
/// [`retry_pending_extractions`], so a session ended twice is archived once).
pub async fn archive_session_tail(
    sessions: &dyn SessionStore,
    writer: &MemoryWriter,
    tenant: &Tenant,
    session_id: &SessionId,
    reason: SessionEndReason,
    cancel: &CancellationToken,
) -> Result<Option<ArchiveOutcome>, MemoryWriteError> {
    if !writer.settings.enabled {
        return Ok(None);
    }
    retry_pending_extractions(sessions, writer, tenant, session_id, cancel).await?;
    let session = sessions.load(tenant, session_id)?;
    let Some(span) = unarchived_tail(&session) else {
        return Ok(None);
    };
    let Some(range) = SpanRange::of(&span, None) else {
        return Ok(None);
    };
    if latest_outcomes(&session).contains_key(&range.key()) {
        return Ok(None);
    }
    let archive = ArchiveSpan {
        session_id: session_id.clone(),
        messages: span,
        summary: None,
        range,
        origin: ArchiveOrigin::SessionEnd { reason },
        archived: Vec::new(),
        previous_attempts: 0,
    };
    let outcome = writer.archive(tenant, &archive, cancel).await;
    record_outcome(sessions, tenant, session_id, &outcome)?;
    Ok(Some(outcome))
}

/// The messages of the session's context after the last one a recorded archive ends at,
/// compaction summaries left out; `None` when no user or assistant message is among them.
pub(super) fn unarchived_tail(session: &Session) -> Option<Vec<Message>> {
    let context = session_context(session, session.leaf_id());
    let archived_ends: HashSet<String> = recorded_outcomes(session)
        .into_iter()
        .map(|outcome| outcome.range.last_entry_id)
        .collect();
    let start = context
        .iter()
        .rposition(|message| {
            message
                .meta
                .id
                .as_deref()
                .is_some_and(|id| archived_ends.contains(id))
        })
        .map_or(0, |last| last + 1);
    let summaries = compaction_ids(session);
    let tail: Vec<Message> = context
        .into_iter()
        .skip(start)
        .filter(|message| {
            message
                .meta
                .id
                .as_deref()
                .is_some_and(|id| !summaries.contains(id))
        })
        .collect();
    tail.iter()
        .any(|message| matches!(message.role, Role::User | Role::Assistant))
        .then_some(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_timestamps_of_millis() {
        assert_eq!(iso_of_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_of_millis(1_773_482_400_123), "2026-03-14T10:00:00.123Z");
    }
}
