//! The memory write path (seed 002, Component 1): what leaves a session's context goes to
//! long-term memory, and nothing a user gave is lost on the way.
//!
//! What this module owns:
//! - [`MemoryWriter::archive`]: one span that left the context (system prompt and tool calls
//!   included) is written under `viking://session/{id}/archive_NNN` — the rendered transcript
//!   as L2 (split into `archive_NNN/part_MMM` entries above the store's `MAX_CONTENT_BYTES`),
//!   the compaction summary as L0/L1 when there is one — then memories are extracted through a
//!   [`MemoryExtractor`](skald_llm::MemoryExtractor) (shown the most similar stored memories)
//!   and written with their sources (session and entry ids); duplicates merge in the store, a
//!   preference or profile fact on an existing URI supersedes it, an entity gains the new
//!   statement, an event gets a fresh name. Vectors are stored when an
//!   [`Embedder`](skald_llm::Embedder) is given. It writes only to the memory store and never
//!   fails: what went wrong is in the [`ArchiveOutcome`].
//! - **Records in the session.** Every outcome is appended to the session as a
//!   [`EXTRACTION_CUSTOM_TYPE`] custom entry (status `done` or `failed`, the error, the range,
//!   the attempts, the archive and memory URIs). A failed one is retried
//!   ([`retry_pending_extractions`], also run automatically before the next archive) from the
//!   session's own entries until
//!   [`WriteSettings::max_extraction_attempts`](skald_core::memory::write::WriteSettings::max_extraction_attempts);
//!   it is never silently dropped. Re-running a span does not duplicate anything: a span
//!   already recorded `done` is skipped, and the store merges exact duplicates.
//! - **Once across servers** (`claims`): the writer claims a span's lease in the memory store
//!   before archiving it, so of several servers over one store one archives and extracts it;
//!   the others take its recorded outcome, or wait for it.
//! - **The compaction hook** ([`archive_compacted_span`]): after `compact_session` returned
//!   `Compacted`, the span its checkpoint replaced is archived and extracted. The working
//!   memory (open TODOs, decisions, pending asks) stays in the context through the summary.
//! - **The session-end hook** ([`archive_session_tail`]): when a session ends — the host says
//!   so, or it was idle for `idle_archive_secs` — what of its context no archive covers yet is
//!   archived and extracted, so a session that never reached a compaction or the upload still
//!   leaves its memories. It stays in the context.
//! - **The two-threshold upload** ([`UploadDriver`]): before each request it consults
//!   `skald_core::memory::upload::plan_upload`; it starts an upload as a tokio task holding
//!   its own copy of the messages (the request is never blocked), records the upload's state
//!   (id, status, range) as [`UPLOAD_CUSTOM_TYPE`] entries, and when the planner says so removes
//!   the range from the live context durably: a compaction checkpoint whose summary is the
//!   extractive summary of the range plus where its archive is, first kept entry = the range's
//!   end. An upload found `running` with no task behind it (the process ended) is recorded
//!   failed and retried.
//!
//! Session entries are written only on the caller's path (the hook, the driver's
//! `before_request`), never from the background task, so they never race the host's appends.
//!
//! # Layout
//!
//! Four submodules, each depending only on the ones before it (`claims` beside `writer`); everything public is
//! re-exported here, so callers name `skald_engine::internal::memory_write::X` (the value types also at the crate root) and never a submodule:
//!
//! - `claims`: the span's lease, its holder ids and the outcome of an attempt it did not run.
//! - `writer`: [`MemoryWriter`] and the span it archives ([`ArchiveSpan`], [`SpanRange`],
//!   [`ArchiveOrigin`]) and what an attempt did ([`ArchiveOutcome`]). Touches only the memory
//!   store, never a session.
//! - `records`: the [`EXTRACTION_CUSTOM_TYPE`] session entries — appending a custom entry,
//!   reading the recorded outcomes back, rebuilding the failed spans from the session for a
//!   retry — and the compaction hook built on them.
//! - `upload`: the two-threshold upload ([`UploadDriver`]), its [`UPLOAD_CUSTOM_TYPE`] entries
//!   and the checkpoint that drops an uploaded range from the live context.

mod claims;
mod records;
#[cfg(test)]
mod tests;
mod upload;
mod writer;

pub use claims::ARCHIVING_ELSEWHERE;
pub(crate) use records::now_iso;
pub use records::{
    EXTRACTION_CUSTOM_TYPE, archive_compacted_span, archive_session_tail, recorded_outcomes,
};
pub use upload::{DroppedRange, INTERRUPTED_ERROR, UPLOAD_CUSTOM_TYPE, UploadDriver, UploadStep};
pub use writer::{
    ArchiveOrigin, ArchiveOutcome, ExtractionStatus, FailedStage, MemoryWriteError, MemoryWriter,
    SessionEndReason, SpanRange, WrittenMemory,
};
