//! The memory writer: archives one span that left a session's context and writes the memories
//! extracted from it.
//!
//! [`MemoryWriter::archive`] stores the span's rendered transcript under the session's next
//! free `viking://session/{id}/archive_NNN` (in `part_MMM` pieces above the store's
//! `MAX_CONTENT_BYTES`, the replacing summary as L0/L1), then asks the extractor for memories
//! (showing it the most similar stored ones) and writes each by its category's rule: an
//! `update` candidate supersedes its URI; on a taken URI a profile or preference fact
//! supersedes it, an entity gains the new statement, and anything else gets a fresh name
//! (`name-2.md` …). Vectors are stored when an embedder is given.
//!
//! It is kept apart from the session records and the upload because it is the one piece that
//! touches only the memory store: it never reads or writes a session and never fails — every
//! failure is in the [`ArchiveOutcome`], which the callers in `records` and `upload` record.

use std::sync::Arc;

use super::claims::{ARCHIVE_LEASE_TTL_MS, archive_lease, new_holder, outcome_without_work};
use serde::{Deserialize, Serialize};
use skald_core::compaction::prompts::render_transcript;
use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::extract::{CandidateAction, ExistingMemory, MemoryCandidate};
use skald_core::memory::levels::{MAX_ABSTRACT_CHARS, MAX_OVERVIEW_CHARS, cut_at_word};
use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use skald_core::memory::write::WriteSettings;
use skald_core::message::{Message, Role, Timestamp};
use skald_llm::memory_extract::EXTRACTABLE_CATEGORIES;
use skald_llm::{Embedder, MemoryExtractor};
use skald_store::memories::{
    AddOutcome, DuplicateKind, LeaseState, MAX_CONTENT_BYTES, MAX_SOURCE_ENTRY_IDS, MemoryError,
    MemorySource, MemoryStore, NewMemory, SearchFilter, SearchQuery,
};
use skald_store::sessions::SessionError;
use tokio_util::sync::CancellationToken;

/// Why the write path could not run. Memory-store and extractor failures are not errors: they
/// are recorded in the session and retried.
#[derive(Debug, thiserror::Error)]
pub enum MemoryWriteError {
    /// The session could not be read or the record could not be appended.
    #[error("session store: {0}")]
    Session(#[from] SessionError),
    /// The write settings are invalid ([`WriteSettings::validate`]); no writer was built.
    #[error("memory write settings: {0}")]
    Settings(#[from] skald_core::memory::write::WriteSettingsError),
}

/// The session entries of a span, `[first, last]`, and the first entry after it when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanRange {
    /// The session entry of the span's first message.
    pub first_entry_id: String,
    /// The session entry of the span's last message.
    pub last_entry_id: String,
    /// The first entry after the span, where the context resumes once it left; `None` when not
    /// known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_entry_id: Option<String>,
    /// Session messages in the span (a host system prompt put in front of the archive not counted).
    pub messages: usize,
}

impl SpanRange {
    /// The key records of the same span share.
    pub fn key(&self) -> String {
        format!("{}..{}", self.first_entry_id, self.last_entry_id)
    }

    pub(super) fn of(messages: &[Message], end_entry_id: Option<String>) -> Option<SpanRange> {
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
    Compaction {
        /// The checkpoint entry that replaced the span.
        checkpoint_entry_id: String,
    },
    /// The two-threshold upload took it.
    Upload {
        /// The upload that took the span (`upload-NNN`).
        upload_id: String,
    },
    /// The session ended (the host said so, or it was idle) with this span not yet archived;
    /// the span stays in the session's context.
    SessionEnd {
        /// Why it ended.
        reason: SessionEndReason,
    },
}

/// Why a session's memory was archived at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionEndReason {
    /// The host ended the session (OpenClaw's `session_end`, Claude Code's `SessionEnd`, a
    /// client's `POST …/end`).
    Ended,
    /// The user started a new session in its place (OpenClaw's `/new`).
    New,
    /// The user reset the session (OpenClaw's `/reset`).
    Reset,
    /// Nothing happened in the session for `[memory] idle_archive_secs`.
    Idle,
}

impl SessionEndReason {
    /// The reason as the wire and the records spell it.
    pub fn name(self) -> &'static str {
        match self {
            SessionEndReason::Ended => "ended",
            SessionEndReason::New => "new",
            SessionEndReason::Reset => "reset",
            SessionEndReason::Idle => "idle",
        }
    }
}

/// A span to archive and extract.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveSpan {
    /// The session the span left; its archive goes under `viking://session/{session_id}`.
    pub session_id: SessionId,
    /// Everything that left the context, oldest first (a host system prompt first, if any).
    pub messages: Vec<Message>,
    /// The summary that replaced it, for the archive's L0/L1.
    pub summary: Option<String>,
    /// The session entries the span covers; the key its records share.
    pub range: SpanRange,
    /// What made the span leave the context.
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
    /// The span is archived and its memories are written.
    Done,
    /// A step failed; the outcome is recorded and the span retried, up to
    /// `max_extraction_attempts`.
    Failed,
}

/// Which step failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailedStage {
    /// Writing the archive entries to the memory store.
    Archive,
    /// Extracting the memories, or writing them.
    Extraction,
}

/// One memory the extraction wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenMemory {
    /// Where the memory is stored (for `merged`, the live duplicate it went into).
    pub uri: MemoryUri,
    /// `added`, `merged` (into `uri`, a live duplicate), `updated` or `unchanged`.
    pub outcome: String,
}

/// What one archive-and-extract attempt did. Serialised as the record's `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchiveOutcome {
    /// Whether the span is archived and its memories written.
    pub status: ExtractionStatus,
    /// Which step failed (`None` when done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_stage: Option<FailedStage>,
    /// What went wrong, for people (`None` when done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The session entries of the span.
    pub range: SpanRange,
    /// What made the span leave the context.
    pub origin: ArchiveOrigin,
    /// This attempt included.
    pub attempts: u32,
    /// The archive entries of the span: one `archive_NNN`, or its `part_MMM` pieces; empty when
    /// archiving failed.
    pub archive: Vec<MemoryUri>,
    /// The memories extracted from the span and what became of each.
    pub memories: Vec<WrittenMemory>,
    /// The name of the extractor that ran (`deterministic` or the LLM extractor's name).
    pub extractor: String,
    /// Vectors could not be computed or stored (the memories are written; search works
    /// without them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_error: Option<String>,
}

impl ArchiveOutcome {
    /// Whether the attempt succeeded (status `done`).
    pub fn is_done(&self) -> bool {
        self.status == ExtractionStatus::Done
    }
}

/// Archives spans and writes the memories extracted from them.
#[derive(Clone)]
pub struct MemoryWriter {
    /// The memory store archives and memories are written to.
    pub memories: Arc<dyn MemoryStore>,
    /// Proposes the memories of a span.
    pub extractor: Arc<dyn MemoryExtractor>,
    /// Embeds the span's query for similar memories and the memories added or updated; `None`:
    /// no vectors are stored and similar memories are found by text alone.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// Which user and agent memories belong to, the extraction's limits and the retry budget
    /// (validated by [`MemoryWriter::new`]).
    pub settings: WriteSettings,
    /// Who this writer (and its clones) is when it claims a span's lease.
    holder: Arc<str>,
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
            holder: Arc::from(new_holder()),
        })
    }

    /// This writer with `embedder`, which then embeds the memories it adds or updates.
    pub fn with_embedder(mut self, embedder: Arc<dyn Embedder>) -> MemoryWriter {
        self.embedder = Some(embedder);
        self
    }

    /// Who this writer is when it claims a span (see `claims`).
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The span's lease as this writer sees it: whether another server is archiving it now or
    /// has finished it.
    pub fn span_lease(
        &self,
        tenant: &Tenant,
        session_id: &SessionId,
        range: &SpanRange,
    ) -> Result<LeaseState, MemoryError> {
        self.memories
            .lease(tenant, &archive_lease(session_id, range), &self.holder)
    }

    /// Claims the span's lease for this writer ([`ARCHIVE_LEASE_TTL_MS`]).
    pub(super) fn claim_span(
        &self,
        tenant: &Tenant,
        session_id: &SessionId,
        range: &SpanRange,
    ) -> Result<LeaseState, MemoryError> {
        self.memories.claim_lease(
            tenant,
            &archive_lease(session_id, range),
            &self.holder,
            ARCHIVE_LEASE_TTL_MS,
        )
    }

    /// Gives up this writer's claim on the span, unfinished (an upload that will not run).
    pub(super) fn release_span(&self, tenant: &Tenant, session_id: &SessionId, range: &SpanRange) {
        // Best effort: a claim not given up runs out after ARCHIVE_LEASE_TTL_MS.
        let _ =
            self.memories
                .release_lease(tenant, &archive_lease(session_id, range), &self.holder);
    }

    /// Archives `span` (unless an earlier attempt did) and extracts its memories, once across
    /// every server over the store: it claims the span first, and a span another server
    /// finished gives that outcome, one it is archiving a failed attempt that does not count
    /// (see `claims`). Writes only to the memory store; every failure is in the outcome.
    pub async fn archive(
        &self,
        tenant: &Tenant,
        span: &ArchiveSpan,
        cancel: &CancellationToken,
    ) -> ArchiveOutcome {
        let claim = self
            .claim_span(tenant, &span.session_id, &span.range)
            .map_err(|error| error.to_string());
        if let Some(outcome) = outcome_without_work(span, self.extractor.name(), claim) {
            return outcome;
        }
        let outcome = self.archive_claimed(tenant, span, cancel).await;
        let lease = archive_lease(&span.session_id, &span.range);
        // Best effort on both paths: the outcome is recorded in the session whatever happens
        // here, and a claim left behind runs out after ARCHIVE_LEASE_TTL_MS.
        if outcome.is_done() {
            if let Ok(result) = serde_json::to_string(&outcome) {
                let _ = self
                    .memories
                    .finish_lease(tenant, &lease, &self.holder, &result);
            }
        } else {
            let _ = self.memories.release_lease(tenant, &lease, &self.holder);
        }
        outcome
    }

    /// [`MemoryWriter::archive`] once the span is this writer's.
    async fn archive_claimed(
        &self,
        tenant: &Tenant,
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
        tenant: &Tenant,
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
        tenant: &Tenant,
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
        tenant: &Tenant,
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
        session_id: &SessionId,
        candidate: &MemoryCandidate,
    ) -> NewMemory {
        let mut memory =
            NewMemory::new(uri, candidate.content.clone()).with_source(MemorySource::new(
                session_id.as_str(),
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
        tenant: &Tenant,
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
        tenant: &Tenant,
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
        let hits = match crate::blocking(|| self.memories.search(tenant, &query)) {
            Ok(hits) => hits,
            // A vector of another model: the text ranking alone.
            Err(MemoryError::DimensionMismatch { .. }) => {
                query.vector = None;
                crate::blocking(|| self.memories.search(tenant, &query)).unwrap_or_default()
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
        tenant: &Tenant,
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
        ArchiveOrigin::SessionEnd { reason } => format!("the session's end ({})", reason.name()),
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
fn source_of(session_id: &SessionId, messages: &[Message]) -> MemorySource {
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
    MemorySource::new(session_id.as_str(), ids)
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
    tenant: &Tenant,
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
}
