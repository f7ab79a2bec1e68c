//! The two-threshold upload: spans leave the live context in the background, before the
//! context is full, instead of all at once at compaction.
//!
//! At defined points of a turn — a proxied turn before its first model call is sent, from that
//! call's measured size (`TurnDriver::prepare`); an OpenClaw host's turn at its end, from the
//! host's count (`after_turn`) — [`UploadDriver::before_request`] consults
//! `skald_core::memory::upload::plan_upload` and acts on its decision: it starts an upload as a
//! tokio task holding its own copy of the messages (the request is never blocked; with
//! [`UploadDriver::with_tracker`] on a `TaskTracker`, so a host's graceful stop waits for it),
//! records the upload's state (id, status, range) as [`UPLOAD_CUSTOM_TYPE`] entries, collects
//! finished uploads into the session records, and when the planner says so removes the range
//! from the live context durably: a compaction checkpoint whose summary is the extractive
//! summary of the range plus where its archive is ([`dropped_range_summary`]), first kept entry
//! = the range's end. An upload found `running` with no task behind it (the process ended) is
//! recorded failed ([`INTERRUPTED_ERROR`]) and retried — unless the span's lease (`claims`)
//! says another server runs it (then it is waited for) or finished it (then its outcome is
//! recorded). Starting an upload claims its range first, so of several servers one uploads it. When a range is dropped before a call,
//! the driver builds the call again from the session the drop left, so what is sent always
//! matches what is stored.
//!
//! Session entries are written only here on the caller's path, never from the background
//! task, so they never race the host's appends; the task only runs the memory writer.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use skald_core::extractive::{ExtractiveInput, summarize};
use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::upload::{
    DropReason, UploadDecision, UploadInputs, UploadRange, UploadState, UploadStatus, plan_upload,
    upload_may_start,
};
use skald_core::message::{Message, Role};
use skald_core::session::Session;
use skald_core::tokens::estimate::estimate_messages_tokens;
use skald_store::memories::LeaseState;
use skald_store::sessions::{CompactionCheckpoint, SessionStore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::records::{
    append_custom, compaction_ids, latest_outcomes, pending_spans, record_outcome,
};
use super::writer::{
    ArchiveOrigin, ArchiveOutcome, ArchiveSpan, ExtractionStatus, FailedStage, MemoryWriteError,
    MemoryWriter, SpanRange,
};
use crate::compact::DETAILS_KEY;
use crate::session::SessionState;
use skald_core::session::session_context;

/// `customType` of the session entries recording the two-threshold upload's state.
pub const UPLOAD_CUSTOM_TYPE: &str = "skald.memory_upload";

/// The error an upload found running with no task behind it is recorded with.
pub const INTERRUPTED_ERROR: &str =
    "interrupted: the process ended before the upload finished; it will be retried";

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
    /// The upload that archived the range (`upload-NNN`).
    pub upload_id: String,
    /// Why the range left: the upload finished, or the context reached the drop threshold first.
    pub reason: DropReason,
    /// The session entries of the range; the context now starts at its end entry.
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
    /// The range removed from the live context now, if one was.
    pub dropped: Option<DroppedRange>,
}

/// Runs the two-threshold upload for any number of sessions (see the module docs). Dropping
/// the driver aborts its running uploads, as a process exit would: their `running` records are
/// found and retried by the next driver.
pub struct UploadDriver {
    writer: MemoryWriter,
    running: Mutex<HashMap<(Tenant, SessionId), RunningUpload>>,
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
        for ((tenant, session_id), upload) in self.lock().iter() {
            upload.handle.abort();
            // An upload that will not finish gives its span up, so the next driver (of any
            // server) retries it now rather than when the claim runs out.
            if !upload.handle.is_finished() {
                self.writer.release_span(tenant, session_id, &upload.range);
            }
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
    /// A driver with no uploads running, archiving with `writer`.
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

    fn lock(&self) -> MutexGuard<'_, HashMap<(Tenant, SessionId), RunningUpload>> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether an upload task of the session is in flight.
    pub fn is_running(&self, tenant: &Tenant, session_id: &SessionId) -> bool {
        self.lock()
            .get(&(tenant.clone(), session_id.clone()))
            .is_some_and(|upload| !upload.handle.is_finished())
    }

    /// Waits until the session's upload task (if any) has finished, without recording it (the
    /// next [`UploadDriver::before_request`] does). For shutdown and tests.
    pub async fn wait_finished(&self, tenant: &Tenant, session_id: &SessionId) {
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
        tenant: &Tenant,
        session_id: &SessionId,
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
                    let Some(id) =
                        self.start(sessions, tenant, session_id, session, range, span, retry_of)?
                    else {
                        // Another server took the range a moment ago; its record comes next.
                        break;
                    };
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
        tenant: &Tenant,
        session_id: &SessionId,
        record: &UploadRecord,
    ) -> Result<Option<Vec<ArchiveOutcome>>, MemoryWriteError> {
        let key = (tenant.clone(), session_id.clone());
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
            // No task here: the upload runs (or ran) on another server, or its process ended.
            // The span's lease tells which.
            None => match self
                .writer
                .span_lease(tenant, session_id, &span_range(record))
            {
                Ok(LeaseState::Held { .. }) => return Ok(None),
                Ok(LeaseState::Finished { result, .. }) => {
                    match serde_json::from_str::<ArchiveOutcome>(&result) {
                        Ok(outcome) => {
                            let error = (!outcome.is_done())
                                .then(|| outcome.error.clone().unwrap_or_default());
                            (vec![outcome], error)
                        }
                        Err(error) => {
                            let error =
                                format!("the upload's recorded outcome is unreadable: {error}");
                            (vec![interrupted(record, &error)], Some(error))
                        }
                    }
                }
                Ok(LeaseState::Claimed | LeaseState::Free) | Err(_) => (
                    vec![interrupted(record, INTERRUPTED_ERROR)],
                    Some(INTERRUPTED_ERROR.to_owned()),
                ),
            },
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

    /// Claims the range's span, records the upload as running, then spawns its task (pending
    /// retries first). `None`: another server holds the span (or finished it), so no upload
    /// starts here.
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        sessions: &dyn SessionStore,
        tenant: &Tenant,
        session_id: &SessionId,
        session: &Session,
        range: UploadRange,
        messages: Vec<Message>,
        retry_of: Option<String>,
    ) -> Result<Option<String>, MemoryWriteError> {
        let number = upload_ids(session).len() + 1;
        let upload_id = format!("upload-{number:03}");
        let span_range = SpanRange {
            first_entry_id: range.first_entry_id.clone(),
            last_entry_id: range.last_entry_id.clone(),
            end_entry_id: Some(range.end_entry_id.clone()),
            messages: range.messages,
        };
        match self.writer.claim_span(tenant, session_id, &span_range) {
            // Not claimable, or the store cannot say: no upload now (the next request plans
            // again); the request itself goes on.
            Ok(LeaseState::Held { .. } | LeaseState::Finished { .. }) | Err(_) => return Ok(None),
            Ok(LeaseState::Claimed | LeaseState::Free) => {}
        }
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
            session_id: session_id.clone(),
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
        if let Err(error) = append_custom(
            sessions,
            tenant,
            session_id,
            UPLOAD_CUSTOM_TYPE,
            serde_json::to_value(&record).unwrap_or(Value::Null),
        ) {
            self.writer.release_span(tenant, session_id, &span_range);
            return Err(error);
        }
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
            (tenant.clone(), session_id.clone()),
            RunningUpload {
                upload_id: upload_id.clone(),
                range: span_range,
                handle,
            },
        );
        Ok(Some(upload_id))
    }
}

/// The span an upload record's range covers.
fn span_range(record: &UploadRecord) -> SpanRange {
    let range = &record.state.range;
    SpanRange {
        first_entry_id: range.first_entry_id.clone(),
        last_entry_id: range.last_entry_id.clone(),
        end_entry_id: Some(range.end_entry_id.clone()),
        messages: range.messages,
    }
}

/// The failed outcome of an upload that never reported back.
fn interrupted(record: &UploadRecord, error: &str) -> ArchiveOutcome {
    ArchiveOutcome {
        status: ExtractionStatus::Failed,
        failed_stage: Some(FailedStage::Archive),
        error: Some(error.to_owned()),
        range: span_range(record),
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
    session_id: &SessionId,
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
    tenant: &Tenant,
    session_id: &SessionId,
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
        .find_map(|entry| entry.kind.compaction_summary().map(str::to_owned));
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
