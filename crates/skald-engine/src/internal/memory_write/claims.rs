//! Each span is archived and extracted once, whichever of several servers over one store tries:
//! [`MemoryWriter::archive`](super::MemoryWriter::archive) claims the span's lease in the memory
//! store (`skald_store::memories::lease`) before it does anything. The claimer does the work and
//! then finishes the lease with its outcome (done) or releases it (failed: anyone may retry); a
//! writer that finds the lease finished takes the recorded outcome instead of extracting again,
//! and one that finds it held by another server writes nothing and says so in its outcome (a
//! failed attempt that does not count, retried later). The upload driver asks the same lease
//! whether an upload recorded `running` with no task here runs on another server.
//!
//! A holder is one writer (its clones share it): the process id, the time it was made and a
//! counter, unique across the servers of one store.

use std::sync::atomic::{AtomicU64, Ordering};

use skald_core::ids::SessionId;
use skald_store::memories::LeaseState;

use super::writer::{ArchiveOutcome, ArchiveSpan, ExtractionStatus, FailedStage, SpanRange};

/// How long a writer's claim on a span lasts (renewed by each attempt it starts). A server that
/// dies mid-extraction leaves its span to the others after this long.
pub const ARCHIVE_LEASE_TTL_MS: u64 = 15 * 60 * 1000;

/// The start of the error of an attempt that found another server archiving the span.
pub const ARCHIVING_ELSEWHERE: &str = "another server is archiving this span";

/// The lease of one span of a session: its range's key, which the span's records share.
pub(super) fn archive_lease(session_id: &SessionId, range: &SpanRange) -> String {
    format!("archive:{session_id}:{}", range.key())
}

/// A holder id no other writer of any server has.
pub(super) fn new_holder() -> String {
    static MADE: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    format!(
        "writer-{}-{nanos:x}-{}",
        std::process::id(),
        MADE.fetch_add(1, Ordering::Relaxed)
    )
}

/// What a claim that was not granted means for `span`'s attempt: the outcome another server
/// finished it with, or a failed attempt that does not count (held elsewhere; the store could
/// not be asked). `None`: the writer holds the lease and does the work.
pub(super) fn outcome_without_work(
    span: &ArchiveSpan,
    extractor: &str,
    claim: Result<LeaseState, String>,
) -> Option<ArchiveOutcome> {
    let not_run = |error: String| ArchiveOutcome {
        status: ExtractionStatus::Failed,
        failed_stage: Some(FailedStage::Archive),
        error: Some(error),
        range: span.range.clone(),
        origin: span.origin.clone(),
        attempts: span.previous_attempts,
        archive: span.archived.clone(),
        memories: Vec::new(),
        extractor: extractor.to_owned(),
        embedding_error: None,
    };
    match claim {
        Ok(LeaseState::Claimed | LeaseState::Free) => None,
        Ok(LeaseState::Finished { holder, result }) => {
            Some(match serde_json::from_str::<ArchiveOutcome>(&result) {
                Ok(finished) => ArchiveOutcome {
                    origin: span.origin.clone(),
                    ..finished
                },
                Err(error) => not_run(format!(
                    "the span was archived by {holder}, whose recorded outcome cannot be read: \
                     {error}"
                )),
            })
        }
        Ok(LeaseState::Held {
            holder,
            expires_at_ms,
        }) => Some(not_run(format!(
            "{ARCHIVING_ELSEWHERE} ({holder}, its claim runs until {})",
            skald_core::time::format_rfc3339_seconds(expires_at_ms)
        ))),
        Err(error) => Some(not_run(format!(
            "cannot claim the span in the memory store: {error}"
        ))),
    }
}
