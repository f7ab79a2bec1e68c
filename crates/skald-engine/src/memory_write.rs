//! The memory write path (seed 002, Component 1): what leaves a session's context goes to
//! long-term memory, and nothing a user gave is lost on the way.
//!
//! What this module owns:
//! - [`MemoryWriter::archive`]: one span that left the context (system prompt and tool calls
//!   included) is written under `viking://session/{id}/archive_NNN` — the rendered transcript
//!   as L2 (split into `archive_NNN/part_MMM` entries above the store's `MAX_CONTENT_BYTES`),
//!   the compaction summary as L0/L1 when there is one — then memories are extracted through a
//!   [`MemoryExtractor`] (shown the most similar stored memories) and written with their
//!   sources (session and entry ids); duplicates merge in the store, a preference or profile
//!   fact on an existing URI supersedes it, an entity gains the new statement, an event gets a
//!   fresh name. Vectors are stored when an [`Embedder`] is given. It writes only to the memory
//!   store and never fails: what went wrong is in the [`ArchiveOutcome`].
//! - **Records in the session.** Every outcome is appended to the session as a
//!   [`EXTRACTION_CUSTOM_TYPE`] custom entry (status `done` or `failed`, the error, the range,
//!   the attempts, the archive and memory URIs). A failed one is retried
//!   ([`retry_pending_extractions`], also run automatically before the next archive) from the
//!   session's own entries until [`WriteSettings::max_extraction_attempts`]; it is never
//!   silently dropped. Re-running a span does not duplicate anything: a span already recorded
//!   `done` is skipped, and the store merges exact duplicates.
//! - **The compaction hook** ([`archive_compacted_span`]): after `compact_session` returned
//!   `Compacted`, the span its checkpoint replaced is archived and extracted. The working
//!   memory (open TODOs, decisions, pending asks) stays in the context through the summary.
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use skald_core::compaction::prompts::render_transcript;
use skald_core::extractive::{ExtractiveInput, summarize};
use skald_core::memory::extract::{CandidateAction, ExistingMemory, MemoryCandidate};
use skald_core::memory::levels::{MAX_ABSTRACT_CHARS, MAX_OVERVIEW_CHARS, cut_at_word};
use skald_core::memory::upload::{
    DropReason, UploadDecision, UploadInputs, UploadRange, UploadState, UploadStatus, plan_upload,
    upload_may_start,
};
use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use skald_core::memory::write::WriteSettings;
use skald_core::message::{Message, Role, Timestamp};
use skald_core::session::{Entry, EntryKind, Session};
use skald_core::tokens::estimate::estimate_messages_tokens;
use skald_llm::memory_extract::EXTRACTABLE_CATEGORIES;
use skald_llm::{Embedder, MemoryExtractor};
use skald_store::memories::{
    AddOutcome, DuplicateKind, MAX_CONTENT_BYTES, MAX_SOURCE_ENTRY_IDS, MemoryError, MemorySource,
    MemoryStore, NewMemory, SearchFilter, SearchQuery,
};
use skald_store::sessions::{CompactionCheckpoint, SessionError, SessionStore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::compact::{CompactResult, DETAILS_KEY, session_context};
use crate::session::SessionState;

/// `customType` of the session entries recording each archive and extraction.
pub const EXTRACTION_CUSTOM_TYPE: &str = "skald.memory_extraction";

/// `customType` of the session entries recording the two-threshold upload's state.
pub const UPLOAD_CUSTOM_TYPE: &str = "skald.memory_upload";

/// The error an upload found running with no task behind it is recorded with.
pub const INTERRUPTED_ERROR: &str =
    "interrupted: the process ended before the upload finished; it will be retried";

/// Why the write path could not run. Memory-store and extractor failures are not errors: they
/// are recorded in the session and retried.
#[derive(Debug, thiserror::Error)]
pub enum MemoryWriteError {
    /// The session could not be read or the record could not be appended.
    #[error("session store: {0}")]
    Session(#[from] SessionError),
    #[error("memory write settings: {0}")]
    Settings(#[from] skald_core::memory::write::WriteSettingsError),
}

/// The session entries of a span, `[first, last]`, and the first entry after it when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanRange {
    pub first_entry_id: String,
    pub last_entry_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_entry_id: Option<String>,
    pub messages: usize,
}

impl SpanRange {
    /// The key records of the same span share.
    pub fn key(&self) -> String {
        format!("{}..{}", self.first_entry_id, self.last_entry_id)
    }

    fn of(messages: &[Message], end_entry_id: Option<String>) -> Option<SpanRange> {
        let first = messages.iter().find_map(|m| m.meta.id.clone())?;
        let last = messages.iter().rev().find_map(|m| m.meta.id.clone())?;
        Some(SpanRange {
            first_entry_id: first,
            last_entry_id: last,
            end_entry_id,
            messages: messages.len(),
        })
    }
}

/// What made a span leave the context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ArchiveOrigin {
    /// A compaction checkpoint replaced it.
    Compaction { checkpoint_entry_id: String },
    /// The two-threshold upload took it.
    Upload { upload_id: String },
}

/// A span to archive and extract.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveSpan {
    pub session_id: String,
    /// Everything that left the context, oldest first (a host system prompt first, if any).
    pub messages: Vec<Message>,
    /// The summary that replaced it, for the archive's L0/L1.
    pub summary: Option<String>,
    pub range: SpanRange,
    pub origin: ArchiveOrigin,
    /// Archive entries already written by an earlier attempt (a retry only extracts).
    pub archived: Vec<MemoryUri>,
    /// Attempts made before this one.
    pub previous_attempts: u32,
}

/// Whether an attempt succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtractionStatus {
    Done,
    Failed,
}

/// Which step failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailedStage {
    Archive,
    Extraction,
}

/// One memory the extraction wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenMemory {
    pub uri: MemoryUri,
    /// `added`, `merged` (into `uri`, a live duplicate), `updated` or `unchanged`.
    pub outcome: String,
}

/// What one archive-and-extract attempt did. Serialised as the record's `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchiveOutcome {
    pub status: ExtractionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_stage: Option<FailedStage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub range: SpanRange,
    pub origin: ArchiveOrigin,
    /// This attempt included.
    pub attempts: u32,
    pub archive: Vec<MemoryUri>,
    pub memories: Vec<WrittenMemory>,
    pub extractor: String,
    /// Vectors could not be computed or stored (the memories are written; search works
    /// without them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_error: Option<String>,
}

impl ArchiveOutcome {
    pub fn is_done(&self) -> bool {
        self.status == ExtractionStatus::Done
    }
}

/// Archives spans and writes the memories extracted from them.
#[derive(Clone)]
pub struct MemoryWriter {
    pub memories: Arc<dyn MemoryStore>,
    pub extractor: Arc<dyn MemoryExtractor>,
    pub embedder: Option<Arc<dyn Embedder>>,
    pub settings: WriteSettings,
}

impl std::fmt::Debug for MemoryWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryWriter")
            .field("extractor", &self.extractor.name())
            .field("settings", &self.settings)
            .finish()
    }
}

impl MemoryWriter {
    /// A writer with validated settings.
    pub fn new(
        memories: Arc<dyn MemoryStore>,
        extractor: Arc<dyn MemoryExtractor>,
        settings: WriteSettings,
    ) -> Result<MemoryWriter, MemoryWriteError> {
        settings.validate()?;
        Ok(MemoryWriter {
            memories,
            extractor,
            embedder: None,
            settings,
        })
    }

    pub fn with_embedder(mut self, embedder: Arc<dyn Embedder>) -> MemoryWriter {
        self.embedder = Some(embedder);
        self
    }

    /// Archives `span` (unless an earlier attempt did) and extracts its memories. Writes only
    /// to the memory store; every failure is in the outcome.
    pub async fn archive(
        &self,
        tenant: &str,
        span: &ArchiveSpan,
        cancel: &CancellationToken,
    ) -> ArchiveOutcome {
        let mut outcome = ArchiveOutcome {
            status: ExtractionStatus::Done,
            failed_stage: None,
            error: None,
            range: span.range.clone(),
            origin: span.origin.clone(),
            attempts: span.previous_attempts + 1,
            archive: span.archived.clone(),
            memories: Vec::new(),
            extractor: self.extractor.name().to_owned(),
            embedding_error: None,
        };
        if outcome.archive.is_empty() {
            match self.write_archive(tenant, span) {
                Ok(uris) => outcome.archive = uris,
                Err(error) => {
                    outcome.status = ExtractionStatus::Failed;
                    outcome.failed_stage = Some(FailedStage::Archive);
                    outcome.error = Some(error.to_string());
                    return outcome;
                }
            }
        }
        match self.extract_and_write(tenant, span, cancel).await {
            Ok((memories, embedding_error)) => {
                outcome.memories = memories;
                outcome.embedding_error = embedding_error;
            }
            Err(error) => {
                outcome.status = ExtractionStatus::Failed;
                outcome.failed_stage = Some(FailedStage::Extraction);
                outcome.error = Some(error);
            }
        }
        outcome
    }

    /// The transcript under the next free `archive_NNN`; a span archived before (same text)
    /// merges into its archive instead of being stored twice.
    fn write_archive(
        &self,
        tenant: &str,
        span: &ArchiveSpan,
    ) -> Result<Vec<MemoryUri>, MemoryError> {
        let session_dir = MemoryUri::parse(&format!("viking://session/{}", span.session_id))?;
        let transcript = archive_text(span);
        let chunks = chunk(&transcript, MAX_CONTENT_BYTES);
        let source = source_of(&span.session_id, &span.messages);
        let created_at = span
            .messages
            .iter()
            .filter_map(|message| message.meta.timestamp.as_ref().and_then(Timestamp::millis))
            .min();
        let mut last_error = None;
        for _ in 0..5 {
            let number = next_archive_number(self.memories.as_ref(), tenant, &session_dir)?;
            let base = session_dir.join(&format!("archive_{number:03}"))?;
            let uris: Vec<MemoryUri> = if chunks.len() == 1 {
                vec![base.clone()]
            } else {
                (1..=chunks.len())
                    .map(|part| base.join(&format!("part_{part:03}")))
                    .collect::<Result<_, _>>()?
            };
            let total = uris.len();
            let batch: Vec<NewMemory> = uris
                .iter()
                .zip(&chunks)
                .enumerate()
                .map(|(index, (uri, text))| {
                    let mut memory = NewMemory::new(uri.clone(), text.clone())
                        .with_l0(archive_abstract(span, number, index + 1, total))
                        .with_source(source.clone());
                    if let Some(summary) = span.summary.as_deref().filter(|s| !s.trim().is_empty())
                    {
                        memory = memory.with_l1(cut_at_word(summary.trim(), MAX_OVERVIEW_CHARS));
                    }
                    if let Some(at) = created_at {
                        memory = memory.created_at(at);
                    }
                    memory
                })
                .collect();
            match self.memories.add_many(tenant, batch.clone()) {
                Ok(outcomes) => {
                    let mut stored = Vec::new();
                    for (outcome, memory) in outcomes.into_iter().zip(batch) {
                        stored.push(self.keep_content(tenant, outcome, memory)?);
                    }
                    return Ok(stored);
                }
                // Another writer took the number first: take the next one.
                Err(MemoryError::InBatch { source, .. })
                    if matches!(
                        *source,
                        MemoryError::AlreadyExists { .. } | MemoryError::PathConflict { .. }
                    ) =>
                {
                    last_error = Some(*source);
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_error.unwrap_or(MemoryError::InvalidSettings(
            "no free archive number".to_owned(),
        )))
    }

    /// An archive part merged into a *near* duplicate would lose its own text: it is written
    /// at its URI anyway (a short marker first, then its content as a new version — an update
    /// is not deduplicated). An exact duplicate loses nothing.
    fn keep_content(
        &self,
        tenant: &str,
        outcome: AddOutcome,
        memory: NewMemory,
    ) -> Result<MemoryUri, MemoryError> {
        match outcome {
            AddOutcome::Added(added) => Ok(added.uri),
            AddOutcome::Merged(merge) => match merge.kind {
                DuplicateKind::Exact => Ok(merge.into.uri),
                DuplicateKind::Near { .. } => {
                    let marker = NewMemory::new(
                        memory.uri.clone(),
                        format!("archive-part {}", memory.uri.as_str().replace('/', "_")),
                    )
                    .with_source(memory.source.clone());
                    self.memories.add(tenant, marker)?;
                    self.memories.update(tenant, memory.clone())?;
                    Ok(memory.uri)
                }
            },
        }
    }

    async fn extract_and_write(
        &self,
        tenant: &str,
        span: &ArchiveSpan,
        cancel: &CancellationToken,
    ) -> Result<(Vec<WrittenMemory>, Option<String>), String> {
        let existing = self.similar_memories(tenant, &span.messages, cancel).await;
        let candidates = self
            .extractor
            .extract(&span.messages, &existing, cancel)
            .await
            .map_err(|error| format!("{}: {error}", self.extractor.name()))?;
        let mut written = Vec::new();
        let mut to_embed: Vec<(MemoryUri, String)> = Vec::new();
        for candidate in candidates {
            let Some(uri) = candidate.uri(&self.settings.user, &self.settings.agent) else {
                continue;
            };
            let memory = self.new_memory(uri, &span.session_id, &candidate);
            let (uri, outcome) = self
                .write_candidate(tenant, &candidate, memory)
                .map_err(|error| format!("writing {}: {error}", candidate.name))?;
            if outcome == "added" || outcome == "updated" {
                to_embed.push((uri.clone(), candidate.content.clone()));
            }
            written.push(WrittenMemory {
                uri,
                outcome: outcome.to_owned(),
            });
        }
        let embedding_error = self.embed(tenant, &to_embed, cancel).await.err();
        Ok((written, embedding_error))
    }

    fn new_memory(
        &self,
        uri: MemoryUri,
        session_id: &str,
        candidate: &MemoryCandidate,
    ) -> NewMemory {
        let mut memory =
            NewMemory::new(uri, candidate.content.clone()).with_source(MemorySource::new(
                session_id,
                candidate
                    .source_entry_ids
                    .iter()
                    .take(MAX_SOURCE_ENTRY_IDS)
                    .cloned(),
            ));
        if let Some(at) = candidate.created_at_ms {
            memory = memory.created_at(at);
        }
        memory
    }

    /// Writes one candidate by its category's rule (see the module docs); returns where it
    /// landed and how.
    fn write_candidate(
        &self,
        tenant: &str,
        candidate: &MemoryCandidate,
        memory: NewMemory,
    ) -> Result<(MemoryUri, &'static str), MemoryError> {
        if let CandidateAction::Update { .. } = candidate.action {
            return match self.memories.update(tenant, memory.clone()) {
                Ok(outcome) => Ok(update_result(outcome)),
                Err(MemoryError::NotFound { .. } | MemoryError::Forgotten { .. }) => {
                    self.memories.add(tenant, memory).map(add_result)
                }
                Err(error) => Err(error),
            };
        }
        match self.memories.add(tenant, memory.clone()) {
            Ok(outcome) => Ok(add_result(outcome)),
            Err(MemoryError::AlreadyExists { uri }) => match candidate.category {
                MemoryCategory::Profile | MemoryCategory::Preferences => {
                    self.memories.update(tenant, memory).map(update_result)
                }
                MemoryCategory::Entities => {
                    let current = self.memories.get(tenant, &uri)?;
                    if current.l2.contains(memory.content.trim()) {
                        return Ok((uri, "unchanged"));
                    }
                    let merged = NewMemory {
                        content: format!("{}\n{}", current.l2.trim_end(), memory.content.trim()),
                        ..memory
                    };
                    self.memories.update(tenant, merged).map(update_result)
                }
                MemoryCategory::Events
                | MemoryCategory::Cases
                | MemoryCategory::Patterns
                | MemoryCategory::Skills
                | MemoryCategory::Tools
                | MemoryCategory::Resources
                | MemoryCategory::Session => {
                    for n in 2..=9 {
                        let Some(name) = uri.name() else { break };
                        let stem = name.strip_suffix(".md").unwrap_or(name);
                        let Some(other) = uri
                            .parent()
                            .and_then(|dir| dir.join(&format!("{stem}-{n}.md")).ok())
                        else {
                            break;
                        };
                        match self.memories.add(
                            tenant,
                            NewMemory {
                                uri: other,
                                ..memory.clone()
                            },
                        ) {
                            Ok(outcome) => return Ok(add_result(outcome)),
                            Err(MemoryError::AlreadyExists { .. }) => continue,
                            Err(error) => return Err(error),
                        }
                    }
                    Err(MemoryError::AlreadyExists { uri })
                }
            },
            Err(error) => Err(error),
        }
    }

    /// The stored memories most like the span's user text, for the extractor.
    async fn similar_memories(
        &self,
        tenant: &str,
        messages: &[Message],
        cancel: &CancellationToken,
    ) -> Vec<ExistingMemory> {
        if self.settings.similar_memories == 0 {
            return Vec::new();
        }
        let text: String = messages
            .iter()
            .filter(|message| message.role == Role::User)
            .map(Message::plain_text)
            .collect::<Vec<_>>()
            .join("\n");
        let text: String = text.chars().take(2000).collect();
        if text.trim().is_empty() {
            return Vec::new();
        }
        let mut query = SearchQuery::text(text.clone(), self.settings.similar_memories)
            .with_filter(SearchFilter {
                categories: EXTRACTABLE_CATEGORIES.to_vec(),
                ..SearchFilter::default()
            });
        if let Some(embedder) = &self.embedder {
            if let Ok(mut vectors) = embedder.embed(&[text], cancel).await {
                if let Some(vector) = vectors.pop() {
                    query = query.with_vector(vector);
                }
            }
        }
        let hits = match self.memories.search(tenant, &query) {
            Ok(hits) => hits,
            // A vector of another model: the text ranking alone.
            Err(MemoryError::DimensionMismatch { .. }) => {
                query.vector = None;
                self.memories.search(tenant, &query).unwrap_or_default()
            }
            Err(_) => Vec::new(),
        };
        hits.into_iter()
            .map(|hit| ExistingMemory {
                uri: hit.memory.uri,
                content: hit.memory.l2,
            })
            .collect()
    }

    async fn embed(
        &self,
        tenant: &str,
        written: &[(MemoryUri, String)],
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        let Some(embedder) = &self.embedder else {
            return Ok(());
        };
        if written.is_empty() {
            return Ok(());
        }
        let texts: Vec<String> = written.iter().map(|(_, text)| text.clone()).collect();
        let vectors = embedder
            .embed(&texts, cancel)
            .await
            .map_err(|error| format!("{}: {error}", embedder.name()))?;
        for ((uri, _), vector) in written.iter().zip(vectors) {
            self.memories
                .set_embedding(tenant, uri, &vector)
                .map_err(|error| format!("storing the vector of {uri}: {error}"))?;
        }
        Ok(())
    }
}

fn add_result(outcome: AddOutcome) -> (MemoryUri, &'static str) {
    match outcome {
        AddOutcome::Added(memory) => (memory.uri, "added"),
        AddOutcome::Merged(merge) => (merge.into.uri, "merged"),
    }
}

fn update_result(outcome: skald_store::memories::UpdateOutcome) -> (MemoryUri, &'static str) {
    match outcome {
        skald_store::memories::UpdateOutcome::Updated { memory, .. } => (memory.uri, "updated"),
        skald_store::memories::UpdateOutcome::Unchanged(memory) => (memory.uri, "unchanged"),
    }
}

/// The archive's L2: a header naming the span, then the transcript as a summarizer reads it
/// (tool calls and results included, tool output marked as untrusted data, `details` left out).
fn archive_text(span: &ArchiveSpan) -> String {
    let origin = match &span.origin {
        ArchiveOrigin::Compaction {
            checkpoint_entry_id,
        } => format!("compaction {checkpoint_entry_id}"),
        ArchiveOrigin::Upload { upload_id } => format!("upload {upload_id}"),
    };
    format!(
        "Session {} archive: entries {} to {} ({} messages), archived by {origin}.\n\n{}",
        span.session_id,
        span.range.first_entry_id,
        span.range.last_entry_id,
        span.range.messages,
        render_transcript(&span.messages)
    )
}

fn archive_abstract(span: &ArchiveSpan, number: u32, part: usize, parts: usize) -> String {
    let about = span
        .summary
        .as_deref()
        .and_then(|summary| {
            summary
                .lines()
                .map(str::trim)
                .find(|line| !line.is_empty() && !line.starts_with('#') && *line != "- (none)")
        })
        .map(|line| line.trim_start_matches("- ").to_owned())
        .or_else(|| {
            span.messages
                .iter()
                .find(|message| message.role == Role::User)
                .map(Message::plain_text)
        })
        .unwrap_or_default();
    let part = if parts > 1 {
        format!(" part {part} of {parts}")
    } else {
        String::new()
    };
    let head = format!(
        "Session {} archive {number:03}{part} ({} messages): {}",
        span.session_id,
        span.range.messages,
        about.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    cut_at_word(&head, MAX_ABSTRACT_CHARS)
}

/// The entry ids of a span as a store source (the first and last ones when there are more
/// than the store lists).
fn source_of(session_id: &str, messages: &[Message]) -> MemorySource {
    let ids: Vec<String> = messages.iter().filter_map(|m| m.meta.id.clone()).collect();
    let ids = if ids.len() > MAX_SOURCE_ENTRY_IDS {
        let half = MAX_SOURCE_ENTRY_IDS / 2;
        let tail = ids.len() - half;
        ids.iter()
            .take(half)
            .chain(ids.iter().skip(tail))
            .cloned()
            .collect()
    } else {
        ids
    };
    MemorySource::new(session_id, ids)
}

/// `text` in pieces of at most `max` bytes, cut at a line end when there is one in the second
/// half of the piece, else at a character boundary.
fn chunk(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut cut = max;
        while cut > 0 && !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if let Some(newline) = rest.get(..cut).and_then(|head| head.rfind('\n')) {
            if newline >= cut / 2 {
                cut = newline + 1;
            }
        }
        if cut == 0 {
            break;
        }
        out.push(rest.get(..cut).unwrap_or("").to_owned());
        rest = rest.get(cut..).unwrap_or("");
    }
    if !rest.is_empty() || out.is_empty() {
        out.push(rest.to_owned());
    }
    out
}

/// One more than the highest `archive_NNN` in the session's directory.
fn next_archive_number(
    store: &dyn MemoryStore,
    tenant: &str,
    session_dir: &MemoryUri,
) -> Result<u32, MemoryError> {
    let listed = store.ls(tenant, session_dir)?;
    let highest = listed
        .iter()
        .filter_map(|entry| {
            entry
                .uri
                .name()?
                .strip_prefix("archive_")?
                .parse::<u32>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    Ok(highest + 1)
}

// ---------------------------------------------------------------------------------------------
// Session records
// ---------------------------------------------------------------------------------------------

/// Appends a custom entry under the leaf.
fn append_custom(
    sessions: &dyn SessionStore,
    tenant: &str,
    session_id: &str,
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
    tenant: &str,
    session_id: &str,
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
fn latest_outcomes(session: &Session) -> BTreeMap<String, ArchiveOutcome> {
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
fn pending_spans(session: &Session, session_id: &str, max_attempts: u32) -> Vec<ArchiveSpan> {
    latest_outcomes(session)
        .into_values()
        .filter(|outcome| !outcome.is_done() && outcome.attempts < max_attempts)
        .filter_map(|outcome| {
            let messages = span_messages(session, &outcome.range)?;
            Some(ArchiveSpan {
                session_id: session_id.to_owned(),
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
    tenant: &str,
    session_id: &str,
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
fn compaction_ids(session: &Session) -> HashSet<String> {
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
    tenant: &str,
    session_id: &str,
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
        session_id: session_id.to_owned(),
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

// ---------------------------------------------------------------------------------------------
// The two-threshold upload
// ---------------------------------------------------------------------------------------------

/// An upload's task: its id, and the outcomes of the spans it archived (pending retries first,
/// then its own range).
struct RunningUpload {
    upload_id: String,
    range: SpanRange,
    handle: JoinHandle<Vec<ArchiveOutcome>>,
}

/// A range that left the live context.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DroppedRange {
    pub upload_id: String,
    pub reason: DropReason,
    pub range: UploadRange,
    /// The compaction checkpoint that removed it.
    pub checkpoint_entry_id: String,
    /// Whether the upload was still running.
    pub upload_running: bool,
}

/// What [`UploadDriver::before_request`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UploadStep {
    /// Uploads found finished (or interrupted) and recorded now.
    pub completed: Vec<ArchiveOutcome>,
    /// The upload started now.
    pub started: Option<String>,
    pub dropped: Option<DroppedRange>,
}

/// Runs the two-threshold upload for any number of sessions (see the module docs). Dropping
/// the driver aborts its running uploads, as a process exit would: their `running` records are
/// found and retried by the next driver.
pub struct UploadDriver {
    writer: MemoryWriter,
    running: Mutex<HashMap<(String, String), RunningUpload>>,
    /// Where upload tasks are spawned, when the host waits for them at shutdown.
    tracker: Option<TaskTracker>,
}

impl std::fmt::Debug for UploadDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadDriver")
            .field("writer", &self.writer)
            .finish()
    }
}

impl Drop for UploadDriver {
    fn drop(&mut self) {
        for upload in self.lock().values() {
            upload.handle.abort();
        }
    }
}

/// The state recorded in an upload entry's data.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct UploadRecord {
    #[serde(flatten)]
    state: UploadState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_of: Option<String>,
}

impl UploadDriver {
    pub fn new(writer: MemoryWriter) -> UploadDriver {
        UploadDriver {
            writer,
            running: Mutex::new(HashMap::new()),
            tracker: None,
        }
    }

    /// Spawns upload tasks on `tracker`, so a host that waits for it at shutdown (a server's
    /// graceful stop) lets running uploads finish instead of leaving them to be retried.
    pub fn with_tracker(mut self, tracker: TaskTracker) -> UploadDriver {
        self.tracker = Some(tracker);
        self
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), RunningUpload>> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether an upload task of the session is in flight.
    pub fn is_running(&self, tenant: &str, session_id: &str) -> bool {
        self.lock()
            .get(&(tenant.to_owned(), session_id.to_owned()))
            .is_some_and(|upload| !upload.handle.is_finished())
    }

    /// Waits until the session's upload task (if any) has finished, without recording it (the
    /// next [`UploadDriver::before_request`] does). For shutdown and tests.
    pub async fn wait_finished(&self, tenant: &str, session_id: &str) {
        loop {
            if !self.is_running(tenant, session_id) {
                return;
            }
            tokio::task::yield_now().await;
        }
    }

    /// Consults the planner for this request and acts on its decision (see the module docs).
    /// Never waits for an upload. `context_tokens` is the size of the request about to be
    /// made.
    pub async fn before_request(
        &self,
        held: &mut SessionState,
        sessions: &dyn SessionStore,
        tenant: &str,
        session_id: &str,
        context_tokens: u64,
        window_tokens: u64,
    ) -> Result<UploadStep, MemoryWriteError> {
        let mut step = UploadStep::default();
        if !self.writer.settings.enabled || !self.writer.settings.upload.enabled {
            return Ok(step);
        }
        // Asked before every request: with no upload on record and the context below the
        // upload threshold there is nothing to plan, and the held session (caught up with, not
        // read again) is enough to know that. After each write below, catching up again reads
        // only what was written.
        let mut state = latest_upload(held.stored_session(sessions, tenant, session_id)?);
        if state.is_none()
            && !upload_may_start(context_tokens, window_tokens, &self.writer.settings.upload)
        {
            return Ok(step);
        }
        if let Some(record) = state
            .clone()
            .filter(|r| r.state.status == UploadStatus::Running)
        {
            if let Some(finished) = self.collect(sessions, tenant, session_id, &record).await? {
                step.completed = finished;
                state = latest_upload(held.stored_session(sessions, tenant, session_id)?);
            }
        }
        for _ in 0..2 {
            let session = held.stored_session(sessions, tenant, session_id)?;
            let messages = session_context(session, None);
            let summaries = compaction_ids(session);
            let first_uploadable = messages
                .iter()
                .take_while(|message| {
                    message.role == Role::System
                        || message
                            .meta
                            .id
                            .as_deref()
                            .is_some_and(|id| summaries.contains(id))
                })
                .count();
            let decision = plan_upload(
                &UploadInputs {
                    messages: &messages,
                    first_uploadable,
                    context_tokens,
                    window_tokens,
                    state: state.as_ref().map(|record| &record.state),
                },
                &self.writer.settings.upload,
            );
            match decision {
                UploadDecision::Nothing { .. } => break,
                UploadDecision::StartUpload {
                    range,
                    indices,
                    retry_of,
                } => {
                    let span = messages.get(indices).unwrap_or(&[]).to_vec();
                    let id =
                        self.start(sessions, tenant, session_id, session, range, span, retry_of)?;
                    step.started = Some(id);
                    // At the drop threshold the range may leave at once.
                    state = latest_upload(held.stored_session(sessions, tenant, session_id)?);
                }
                UploadDecision::DropRange {
                    upload_id,
                    range,
                    indices,
                    reason,
                } => {
                    let dropped = messages.get(indices).unwrap_or(&[]);
                    let checkpoint = drop_range(
                        sessions,
                        tenant,
                        session_id,
                        session,
                        &upload_id,
                        &range,
                        dropped,
                        reason,
                        context_tokens,
                    )?;
                    step.dropped = Some(DroppedRange {
                        upload_running: self.is_running(tenant, session_id),
                        upload_id,
                        reason,
                        range,
                        checkpoint_entry_id: checkpoint,
                    });
                    break;
                }
            }
        }
        Ok(step)
    }

    /// Records a finished upload, or an interrupted one (running in the session, no task
    /// here). `None` while it still runs.
    async fn collect(
        &self,
        sessions: &dyn SessionStore,
        tenant: &str,
        session_id: &str,
        record: &UploadRecord,
    ) -> Result<Option<Vec<ArchiveOutcome>>, MemoryWriteError> {
        let key = (tenant.to_owned(), session_id.to_owned());
        let task = {
            let mut running = self.lock();
            match running.get(&key) {
                Some(upload) if upload.upload_id == record.state.upload_id => {
                    if !upload.handle.is_finished() {
                        return Ok(None);
                    }
                    running.remove(&key)
                }
                Some(_) | None => None,
            }
        };
        let (outcomes, upload_error) = match task {
            Some(upload) => match upload.handle.await {
                Ok(outcomes) => {
                    let own = outcomes
                        .iter()
                        .rfind(|outcome| outcome.range.key() == upload.range.key());
                    let error = match own {
                        Some(outcome) if outcome.is_done() => None,
                        Some(outcome) => Some(outcome.error.clone().unwrap_or_default()),
                        None => Some("the upload wrote no outcome".to_owned()),
                    };
                    (outcomes, error)
                }
                Err(join) => (
                    vec![interrupted(
                        record,
                        &format!("the upload task failed: {join}"),
                    )],
                    Some(format!("the upload task failed: {join}")),
                ),
            },
            None => (
                vec![interrupted(record, INTERRUPTED_ERROR)],
                Some(INTERRUPTED_ERROR.to_owned()),
            ),
        };
        for outcome in &outcomes {
            record_outcome(sessions, tenant, session_id, outcome)?;
        }
        let status = if upload_error.is_none() {
            UploadStatus::Done
        } else {
            UploadStatus::Failed
        };
        let finished = UploadRecord {
            state: UploadState {
                status,
                ..record.state.clone()
            },
            error: upload_error,
            retry_of: None,
        };
        append_custom(
            sessions,
            tenant,
            session_id,
            UPLOAD_CUSTOM_TYPE,
            serde_json::to_value(&finished).unwrap_or(Value::Null),
        )?;
        Ok(Some(outcomes))
    }

    /// Records the upload as running, then spawns its task (pending retries first).
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        sessions: &dyn SessionStore,
        tenant: &str,
        session_id: &str,
        session: &Session,
        range: UploadRange,
        messages: Vec<Message>,
        retry_of: Option<String>,
    ) -> Result<String, MemoryWriteError> {
        let number = upload_ids(session).len() + 1;
        let upload_id = format!("upload-{number:03}");
        let span_range = SpanRange {
            first_entry_id: range.first_entry_id.clone(),
            last_entry_id: range.last_entry_id.clone(),
            end_entry_id: Some(range.end_entry_id.clone()),
            messages: range.messages,
        };
        let previous = latest_outcomes(session);
        let own_previous = previous.get(&span_range.key());
        let mut jobs: Vec<ArchiveSpan> = pending_spans(
            session,
            session_id,
            self.writer.settings.max_extraction_attempts,
        )
        .into_iter()
        .filter(|span| span.range.key() != span_range.key())
        .collect();
        jobs.push(ArchiveSpan {
            session_id: session_id.to_owned(),
            messages,
            summary: None,
            range: span_range.clone(),
            origin: ArchiveOrigin::Upload {
                upload_id: upload_id.clone(),
            },
            archived: own_previous.map(|o| o.archive.clone()).unwrap_or_default(),
            previous_attempts: own_previous.map_or(0, |o| o.attempts),
        });
        let record = UploadRecord {
            state: UploadState {
                upload_id: upload_id.clone(),
                status: UploadStatus::Running,
                range,
            },
            error: None,
            retry_of,
        };
        append_custom(
            sessions,
            tenant,
            session_id,
            UPLOAD_CUSTOM_TYPE,
            serde_json::to_value(&record).unwrap_or(Value::Null),
        )?;
        let writer = self.writer.clone();
        let owned_tenant = tenant.to_owned();
        let upload = async move {
            let cancel = CancellationToken::new();
            let mut outcomes = Vec::new();
            for job in jobs {
                outcomes.push(writer.archive(&owned_tenant, &job, &cancel).await);
            }
            outcomes
        };
        let handle = match &self.tracker {
            Some(tracker) => tracker.spawn(upload),
            None => tokio::spawn(upload),
        };
        self.lock().insert(
            (tenant.to_owned(), session_id.to_owned()),
            RunningUpload {
                upload_id: upload_id.clone(),
                range: span_range,
                handle,
            },
        );
        Ok(upload_id)
    }
}

/// The failed outcome of an upload that never reported back.
fn interrupted(record: &UploadRecord, error: &str) -> ArchiveOutcome {
    let range = &record.state.range;
    ArchiveOutcome {
        status: ExtractionStatus::Failed,
        failed_stage: Some(FailedStage::Archive),
        error: Some(error.to_owned()),
        range: SpanRange {
            first_entry_id: range.first_entry_id.clone(),
            last_entry_id: range.last_entry_id.clone(),
            end_entry_id: Some(range.end_entry_id.clone()),
            messages: range.messages,
        },
        origin: ArchiveOrigin::Upload {
            upload_id: record.state.upload_id.clone(),
        },
        attempts: 1,
        archive: Vec::new(),
        memories: Vec::new(),
        extractor: String::new(),
        embedding_error: None,
    }
}

/// The latest upload record on the active path.
fn latest_upload(session: &Session) -> Option<UploadRecord> {
    session
        .path_to(None)
        .into_iter()
        .rev()
        .filter_map(|entry| entry.kind.custom_data(UPLOAD_CUSTOM_TYPE))
        .find_map(|data| serde_json::from_value(data.clone()).ok())
}

/// Every upload id the session recorded.
fn upload_ids(session: &Session) -> HashSet<String> {
    session
        .entries()
        .iter()
        .filter_map(|entry| entry.kind.custom_data(UPLOAD_CUSTOM_TYPE))
        .filter_map(|data| data.get("upload_id").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// The summary a dropped range leaves behind: the extractive summary of the range (the latest
/// compaction summary merged in), and where the full messages are.
pub fn dropped_range_summary(
    session_id: &str,
    upload_id: &str,
    dropped: &[Message],
    previous_summary: Option<&str>,
) -> String {
    let summary = summarize(
        dropped,
        &ExtractiveInput {
            previous_summary: previous_summary.map(str::to_owned),
            ..ExtractiveInput::default()
        },
    );
    format!(
        "{summary}\n\nThe full messages of this part of the conversation are archived in \
         long-term memory under viking://session/{session_id}/ (upload {upload_id}); search or \
         read them there when their details matter."
    )
}

/// Removes a range from the live context: a compaction checkpoint whose first kept entry is
/// the range's end.
#[allow(clippy::too_many_arguments)]
fn drop_range(
    sessions: &dyn SessionStore,
    tenant: &str,
    session_id: &str,
    session: &Session,
    upload_id: &str,
    range: &UploadRange,
    dropped: &[Message],
    reason: DropReason,
    context_tokens: u64,
) -> Result<String, MemoryWriteError> {
    let previous = session
        .path_to(None)
        .into_iter()
        .rev()
        .find_map(|entry| match &entry.kind {
            EntryKind::Compaction { summary, .. } => Some(summary.clone()),
            EntryKind::Message(_)
            | EntryKind::BranchSummary { .. }
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. }
            | EntryKind::Other(_) => None,
        });
    let summary = dropped_range_summary(session_id, upload_id, dropped, previous.as_deref());
    let summary_tokens = estimate_messages_tokens(&[Message::text(Role::User, summary.clone())]);
    let tokens_after = context_tokens
        .saturating_sub(estimate_messages_tokens(dropped))
        .saturating_add(summary_tokens);
    let entry = sessions.append_compaction(
        tenant,
        session_id,
        CompactionCheckpoint {
            summary,
            first_kept_entry_id: Some(range.end_entry_id.clone()),
            tokens_before: context_tokens,
            tokens_after,
            details: Some(json!({
                DETAILS_KEY: {
                    "summarizer": "extractive",
                    "memory_upload": {
                        "upload_id": upload_id,
                        "reason": reason,
                        "range": range,
                    }
                }
            })),
        },
    )?;
    Ok(entry.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_respect_the_limit_and_char_boundaries() {
        let text = "é".repeat(10) + "\n" + &"abc\n".repeat(5);
        let pieces = chunk(&text, 8);
        assert!(pieces.iter().all(|piece| piece.len() <= 8));
        assert_eq!(pieces.concat(), text);
        assert_eq!(chunk("short", 100), ["short"]);
    }

    #[test]
    fn iso_timestamps_of_millis() {
        assert_eq!(iso_of_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_of_millis(1_773_482_400_123), "2026-03-14T10:00:00.123Z");
    }
}
