//! Compaction of a stored session: the async half of seed 001 / seed 003 §3. The planning, the
//! staged-summary state machine, the quality guard and the appendices live in
//! `skald_core::compaction`; this module loads the session's context, drives that state
//! machine through a [`Summarizer`] under the compaction timeout, and — only when the outcome is
//! `Compacted` — writes the result durably: originals of truncated tail results into the ref
//! store, a branch rewrite when the kept tail was shrunk, then the checkpoint entry.
//!
//! Invariant: nothing is written before the outcome is known, and any failure, timeout or abort
//! leaves the session exactly as it was (the "pre-compaction snapshot" is simply the untouched
//! store).
//!
//! [`compact_and_archive`] is the compaction use case every caller runs — the engine API's
//! `compact`, `skald compact`, the threshold and overflow compactions of a turn: compact, tell
//! the session's engine state, archive the span that left the context for long-term memory,
//! and report ([`Compaction::report`]).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use skald_core::compaction::{
    CancelReason, CompactionInputs, CompactionOutcome, CompactionPlan, CompactionSettings,
    CompactionTrigger, FileLists, RulesFile, SkipReason, SummaryFailure, plan_compaction,
};
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::Block;
use skald_core::refs::RefPayload;
use skald_core::session::{EntryKind, Session, session_context};
use skald_llm::{Summarizer, SummaryRequest};
use skald_store::RefStore;
use skald_store::sessions::{CompactionCheckpoint, SessionStore};
use tokio_util::sync::CancellationToken;

use crate::EngineError;
use crate::SessionState;
use crate::memory_write::{ArchiveOutcome, MemoryWriter, archive_compacted_span};

/// The key under a checkpoint's `details` that holds skald's own record of the compaction.
pub const DETAILS_KEY: &str = "skald";

/// What to compact and how.
#[derive(Debug, Clone)]
pub struct CompactRequest<'a> {
    /// The tenant whose session is compacted; its ref store receives the originals of truncated
    /// tail results.
    pub tenant: &'a Tenant,
    /// The session to compact; its current branch is what is read and rewritten.
    pub session_id: &'a SessionId,
    /// The model's context window in tokens.
    pub window_tokens: u64,
    /// Why the compaction is asked for; a threshold compaction is skipped below the threshold, and
    /// only an overflow accepts a degraded summary.
    pub trigger: CompactionTrigger,
    /// Reserve, kept tail, summarizer timeout and the other compaction settings.
    pub settings: &'a CompactionSettings,
    /// Instructions given with this compaction (`skald compact --instructions`).
    pub custom_instructions: Option<&'a str>,
    /// The workspace's AGENTS.md, for the critical-rules appendix.
    pub agents_md: Option<&'a str>,
    /// Rules files the host loaded outside the session's messages (a Claude Code transcript's
    /// instruction files, a host's system prompt), for the same appendix; those in the messages
    /// are found there.
    pub rules_files: &'a [RulesFile],
    /// What the context really costs when known (provider-reported input tokens).
    pub context_tokens: Option<u64>,
}

/// The outcome and what was written for it.
#[derive(Debug, Clone)]
pub struct CompactResult {
    /// Compacted (with the summary), skipped or cancelled, with the context's tokens before and
    /// after.
    pub outcome: CompactionOutcome,
    /// The checkpoint entry (only for `Compacted`).
    pub checkpoint_entry_id: Option<String>,
    /// The entry the model sees first after the summary (after a tail rewrite, the copy's id).
    pub first_kept_entry_id: Option<String>,
    /// Set when the kept tail was shrunk on a new branch.
    pub rewritten_entries: usize,
    /// Summarizer used.
    pub summarizer: String,
}

/// What a manual compaction did, as `skald compact` prints it and the server's compact route
/// returns it under `report`: the same struct on both sides, so a compaction reads the same
/// whether it ran on the local store or on a server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactReport {
    /// The session that was compacted.
    pub session_id: String,
    /// The tenant the session belongs to.
    pub tenant: String,
    /// `compacted`, `compacted_over_target` (compacted, but still over `window − reserve`),
    /// `skipped` or `cancelled`.
    pub outcome: String,
    /// Why it was skipped or cancelled, or why the context is still over target, for people
    /// (`None` when compacted to target).
    pub reason: Option<String>,
    /// The same reason, typed (`{"kind": "nothing_to_compact"}`…).
    pub reason_detail: Option<Value>,
    /// Tokens the context took before: skald's estimate, or the provider's figure when one was
    /// given and is larger.
    pub tokens_before: u64,
    /// Tokens the context takes after (equal to `tokens_before` unless compacted).
    pub tokens_after: u64,
    /// The summary that now stands for the compacted span (`None` unless compacted).
    pub summary: Option<String>,
    /// The entry the model sees first after the summary.
    pub first_kept_entry_id: Option<String>,
    /// The compaction entry written (only when compacted).
    pub checkpoint_entry_id: Option<String>,
    /// Entries copied onto a new branch because the kept tail had to be shrunk.
    pub rewritten_entries: usize,
    /// `extractive` or `llm:<model>`.
    pub summarizer: String,
    /// The model's context window the compaction planned for, in tokens.
    pub window_tokens: u64,
    /// What the compaction did (stages, calls, quality audit, identifiers, files).
    pub details: Option<Value>,
    /// The archive of the compacted span and the memories extracted from it (also recorded in
    /// the session; a failure is retried by the next archive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_archive: Option<ArchiveOutcome>,
    /// The archive could not even be recorded (the stores failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_error: Option<String>,
}

impl CompactReport {
    /// The report of `result`; the archive fields are the caller's to fill.
    pub fn new(
        session_id: &SessionId,
        tenant: &Tenant,
        window_tokens: u64,
        result: &CompactResult,
    ) -> Self {
        let (outcome, reason, reason_detail, summary, details) = match &result.outcome {
            CompactionOutcome::Compacted {
                summary,
                details,
                over_target,
                ..
            } => (
                result.outcome.name(),
                over_target.as_ref().map(|over| over.describe()),
                over_target.as_ref().and_then(|over| {
                    let mut detail = serde_json::to_value(over).ok()?;
                    if let Value::Object(fields) = &mut detail {
                        fields.insert("kind".to_owned(), json!("over_target"));
                    }
                    Some(detail)
                }),
                Some(summary.clone()),
                serde_json::to_value(details.as_ref()).ok(),
            ),
            CompactionOutcome::Skipped { reason, .. } => (
                "skipped",
                Some(reason.describe()),
                serde_json::to_value(reason).ok(),
                None,
                None,
            ),
            CompactionOutcome::Cancelled { reason, .. } => (
                "cancelled",
                Some(reason.describe()),
                serde_json::to_value(reason).ok(),
                None,
                None,
            ),
        };
        CompactReport {
            session_id: session_id.to_string(),
            tenant: tenant.to_string(),
            outcome: outcome.to_owned(),
            reason,
            reason_detail,
            tokens_before: result.outcome.tokens_before(),
            tokens_after: result.outcome.tokens_after(),
            summary,
            first_kept_entry_id: result.first_kept_entry_id.clone(),
            checkpoint_entry_id: result.checkpoint_entry_id.clone(),
            rewritten_entries: result.rewritten_entries,
            summarizer: result.summarizer.clone(),
            window_tokens,
            details,
            memory_archive: None,
            memory_error: None,
        }
    }

    /// Whether work started and was abandoned (the session is unchanged).
    pub fn cancelled(&self) -> bool {
        self.outcome == "cancelled"
    }
}

/// Where the span a compaction replaced goes: the memory writer that archives it and extracts
/// its memories, and the host's system prompt to put in front of it (the archive is what the
/// model saw).
#[derive(Clone, Copy)]
pub struct SpanArchive<'a> {
    /// The memory writer that archives the span and extracts its memories.
    pub writer: &'a MemoryWriter,
    /// The host's system prompt, put in front of the archived span; `None` when the host has none
    /// or did not send it.
    pub system_prompt: Option<&'a str>,
}

/// A compaction and what became of the span it replaced ([`Engine::compact`](crate::Engine::compact)).
#[derive(Debug, Clone)]
pub struct Compaction {
    /// What the compaction did and wrote to the session.
    pub result: CompactResult,
    /// The archive of the replaced span (`None`: nothing was compacted, no archive was asked
    /// for, or the span was archived before).
    pub memory_archive: Option<ArchiveOutcome>,
    /// The archive could not even be recorded (the stores failed): the error and its causes.
    pub memory_error: Option<String>,
}

impl Compaction {
    /// The report of this compaction, its archive included.
    pub fn report(
        &self,
        session_id: &SessionId,
        tenant: &Tenant,
        window_tokens: u64,
    ) -> CompactReport {
        let mut report = CompactReport::new(session_id, tenant, window_tokens, &self.result);
        report.memory_archive = self.memory_archive.clone();
        report.memory_error = self.memory_error.clone();
        report
    }
}

/// The compaction use case, the one every caller runs (see the module docs): [`compact_session`],
/// then the session's engine `state` told (its memos of the old context are dropped), then —
/// when `archive` is given and a checkpoint was written — the replaced span archived and its
/// memories extracted. `Err` only when the compaction itself could not read or write the
/// stores; an archive that fails is reported in [`Compaction::memory_error`] (the compaction
/// stands, and the next archive retries the span).
pub async fn compact_and_archive(
    sessions: &dyn SessionStore,
    refs: &dyn RefStore,
    summarizer: &dyn Summarizer,
    request: &CompactRequest<'_>,
    archive: Option<SpanArchive<'_>>,
    state: Option<&mut SessionState>,
    cancel: &CancellationToken,
) -> Result<Compaction, EngineError> {
    let result = compact_session(sessions, refs, summarizer, request, cancel).await?;
    if let Some(state) = state {
        state.note_compaction(&result);
    }
    let (memory_archive, memory_error) = match archive {
        None => (None, None),
        Some(archive) => match archive_compacted_span(
            sessions,
            archive.writer,
            request.tenant,
            request.session_id,
            &result,
            archive.system_prompt,
            cancel,
        )
        .await
        {
            Ok(outcome) => (outcome, None),
            Err(error) => (None, Some(error_with_causes(&error))),
        },
    };
    Ok(Compaction {
        result,
        memory_archive,
        memory_error,
    })
}

/// An error and each of its causes, `: `-separated (as `anyhow` prints `{:#}`), a cause its
/// message already holds left out: what a report or a log line says about a failure.
pub fn error_with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// Shortest tool result skald's pipeline ever offloads; shorter ones are not looked up.
const MIN_OFFLOADED_CHARS: usize = 500;

/// Adds to the plan's `## Exact identifiers` the REF_IDs of the summarised tool results the
/// pipeline offloaded when it built the model's requests: the stored session keeps the
/// originals, so their placeholders are not in the span's text, but a ref's id is the hash of
/// the result's content and the ref store says whether it holds it. The summary then names the
/// ids the model saw, and `fetch_original_data` still finds them after the compaction.
fn list_offloaded_originals(plan: &mut CompactionPlan, refs: &dyn RefStore, tenant: &Tenant) {
    let mut found = Vec::new();
    for message in &plan.span {
        for block in &message.content {
            let Block::ToolResult(result) = block else {
                continue;
            };
            let chars: usize = result
                .content
                .iter()
                .filter_map(Block::as_text)
                .map(|text| text.text.len())
                .sum();
            if chars < MIN_OFFLOADED_CHARS {
                continue;
            }
            let id = RefPayload::new(result.content.clone()).id();
            let id = id.as_str().to_owned();
            if !plan.offloaded_refs.contains(&id)
                && !found.contains(&id)
                && refs.get(tenant, &id).is_ok()
            {
                found.push(id);
            }
        }
    }
    plan.offloaded_refs.extend(found);
}

/// The latest compaction on the active path: its entry id, summary and the file lists it
/// recorded.
fn latest_compaction(session: &Session) -> Option<(String, String, Option<FileLists>)> {
    let entry = session
        .path_to(None)
        .into_iter()
        .rev()
        .find(|entry| entry.kind.is_compaction())?;
    let EntryKind::Compaction {
        summary, details, ..
    } = &entry.kind
    else {
        return None;
    };
    let files = details
        .as_ref()
        .and_then(|details| details.get(DETAILS_KEY))
        .and_then(|record| record.get("details"))
        .and_then(|compaction| compaction.get("files"))
        .and_then(|files| serde_json::from_value::<FileLists>(files.clone()).ok());
    Some((entry.id.clone(), summary.clone(), files))
}

/// Compacts the session's active branch. Returns the typed outcome; `Err` only when the session
/// or the stores could not be read or written (then nothing was changed either: the checkpoint
/// is the last write and a single transaction).
pub async fn compact_session(
    sessions: &dyn SessionStore,
    refs: &dyn RefStore,
    summarizer: &dyn Summarizer,
    request: &CompactRequest<'_>,
    cancel: &CancellationToken,
) -> Result<CompactResult, EngineError> {
    let session = sessions.load(request.tenant, request.session_id)?;
    let previous = latest_compaction(&session);
    let mut messages = session_context(&session, None);
    if let Some((compaction_id, _, _)) = &previous {
        // The previous summary is passed on as text, not summarised as a message.
        messages.retain(|message| message.meta.id.as_deref() != Some(compaction_id.as_str()));
    }
    let inputs = CompactionInputs {
        previous_summary: previous.as_ref().map(|(_, summary, _)| summary.as_str()),
        context_tokens: request.context_tokens,
        custom_instructions: request.custom_instructions,
        agents_md: request.agents_md,
        rules_files: request.rules_files,
        previous_files: previous.as_ref().and_then(|(_, _, files)| files.as_ref()),
    };
    let mut plan = plan_compaction(
        &messages,
        request.window_tokens,
        request.settings,
        request.trigger,
        &inputs,
    )?;
    // A person's pause wins over every trigger; the plan still measures the context, so the
    // skip reports its size.
    if sessions
        .get(request.tenant, request.session_id)?
        .switches
        .pause_compaction
    {
        plan.skip = Some(SkipReason::Paused);
        plan.tail_truncation = None;
    }
    list_offloaded_originals(&mut plan, refs, request.tenant);
    let timeout_ms = plan.settings.timeout_ms;
    let max_timeout_ms = plan.settings.max_timeout_ms.max(timeout_ms);
    // Seed 001's aggregate timeout: past `timeout_ms` no summary request starts, but one still
    // running is waited for — the provider's own deadlines (first byte, each gap) end a request
    // that hangs — up to the hard cap.
    let started = tokio::time::Instant::now();
    let deadline = started + Duration::from_millis(timeout_ms);
    let hard_deadline = started + Duration::from_millis(max_timeout_ms);
    let mut run = skald_core::compaction::CompactionRun::new(plan);
    let outcome = loop {
        let Some(core_request) = run.next_request() else {
            break run.finish();
        };
        if tokio::time::Instant::now() >= deadline {
            break run.cancel(CancelReason::Timeout { timeout_ms });
        }
        let llm_request = SummaryRequest {
            instructions: core_request.instructions,
            transcript: core_request.prompt,
            messages: core_request.messages,
            previous_summary: core_request.previous_summary,
            identifiers: core_request.identifiers,
            feedback: None,
            max_output_tokens: u32::try_from(core_request.max_output_tokens).unwrap_or(u32::MAX),
            latest_user_ask: core_request.latest_user_ask,
        };
        let call = summarizer.summarize(&llm_request, cancel);
        match tokio::time::timeout_at(hard_deadline, call).await {
            Err(_elapsed) => {
                break run.cancel(CancelReason::Timeout {
                    timeout_ms: max_timeout_ms,
                });
            }
            Ok(Ok(summary)) => run.record(Ok(summary)),
            Ok(Err(skald_llm::LlmError::Aborted)) => run.record(Err(SummaryFailure::Aborted)),
            Ok(Err(error)) => run.record(Err(SummaryFailure::Failed {
                message: error.to_string(),
            })),
        }
    };
    let mut result = CompactResult {
        outcome,
        checkpoint_entry_id: None,
        first_kept_entry_id: None,
        rewritten_entries: 0,
        summarizer: summarizer.name().to_owned(),
    };
    if cancel.is_cancelled() && result.outcome.is_compacted() {
        // An abort that raced the last summary: the caller asked for nothing to change.
        result.outcome = CompactionOutcome::Cancelled {
            reason: CancelReason::Aborted,
            tokens_before: result.outcome.tokens_before(),
        };
    }
    write_checkpoint(sessions, refs, request, &session, &mut result)?;
    Ok(result)
}

/// Writes a `Compacted` outcome: ref originals, the tail rewrite, then the checkpoint.
fn write_checkpoint(
    sessions: &dyn SessionStore,
    refs: &dyn RefStore,
    request: &CompactRequest<'_>,
    session: &Session,
    result: &mut CompactResult,
) -> Result<(), EngineError> {
    let CompactionOutcome::Compacted {
        tokens_before,
        tokens_after,
        summary,
        first_kept_entry,
        tail_truncation,
        details,
        ..
    } = &result.outcome
    else {
        return Ok(());
    };
    let mut first_kept = first_kept_entry.clone();
    if let Some(truncation) = tail_truncation {
        // Originals first: no placeholder naming a ref is stored before the ref is.
        for new_ref in &truncation.new_refs {
            refs.put(request.tenant, &new_ref.payload)?;
        }
        let rewrites: BTreeMap<String, EntryKind> = truncation
            .messages
            .iter()
            .filter(|message| {
                message
                    .meta
                    .id
                    .as_deref()
                    .and_then(|id| session.entries().iter().rev().find(|entry| entry.id == id))
                    .and_then(|entry| entry.kind.as_message())
                    .is_some_and(|original| original != *message)
            })
            .filter_map(|message| {
                let id = message.meta.id.clone()?;
                Some((id, EntryKind::Message(message.clone())))
            })
            .collect();
        if !rewrites.is_empty() {
            let rewrite = sessions.rewrite_branch(
                request.tenant,
                request.session_id,
                rewrites,
                "compaction: the preserved tail alone was over its budget; its largest tool \
                 results were truncated (originals in the ref store)",
            )?;
            result.rewritten_entries = rewrite.copies.len();
            if let Some(kept) = &first_kept {
                if let Some((_, copy)) = rewrite.copies.iter().find(|(old, _)| old == kept) {
                    first_kept = Some(copy.clone());
                }
            }
        }
    }
    let record = json!({
        DETAILS_KEY: {
            "summarizer": result.summarizer,
            "details": serde_json::to_value(details.as_ref()).unwrap_or(Value::Null),
        }
    });
    let entry = sessions.append_compaction(
        request.tenant,
        request.session_id,
        CompactionCheckpoint {
            summary: summary.clone(),
            first_kept_entry_id: first_kept.clone(),
            tokens_before: *tokens_before,
            tokens_after: *tokens_after,
            details: Some(record),
        },
    )?;
    result.checkpoint_entry_id = Some(entry.id);
    result.first_kept_entry_id = first_kept;
    Ok(())
}
