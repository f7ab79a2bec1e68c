//! [`CompactionRun`]: the summary loop of seed 001 as a state machine, so that the caller's
//! orchestration is a thin loop with no decisions of its own:
//!
//! ```text
//! let mut run = CompactionRun::new(plan);
//! while let Some(request) = run.next_request() {
//!     let result = summarizer.summarize(&request).await;   // the caller's I/O
//!     run.record(result);
//! }
//! let outcome = run.finish();                              // or run.cancel(Timeout) on timeout
//! ```
//!
//! What it does, in order:
//! 1. When history was pruned for the context share, the dropped part is summarised first
//!    (on top of the previous summary); that summary becomes the previous summary of step 2.
//! 2. The span is summarised in stages: each part through the three-level fallback (all
//!    messages in rolling chunks → only the messages that are not oversized, with a note for
//!    each oversized one → the seed's plain note), then the partial summaries merged with the
//!    merge instructions (when the merge fails at every level, the partial summaries are
//!    joined instead, so nothing already summarised is lost).
//! 3. The quality guard audits the result; a failed audit starts another attempt of step 2 with
//!    the failed checks as feedback, up to `max_retries` times.
//! 4. [`CompactionRun::finish`] picks the best attempt, appends the appendices and returns a
//!    typed outcome: `Compacted` only when the context shrank; a summary that only reached the
//!    plain note, or still fails the guard, cancels unless the trigger is an overflow
//!    ([`super::outcome::CompactionTrigger::accepts_degraded`]).
//!
//! An [`SummaryFailure::Aborted`] result cancels at once. The run never looks at a clock: the
//! caller enforces `timeout_ms` around the loop and calls [`CompactionRun::cancel`].

use serde::Serialize;

use super::appendices::finish_summary;
use super::outcome::{CancelReason, CompactionDetails, CompactionOutcome, OverTarget};
use super::plan::{CompactionPlan, identifiers_of};
use super::prompts::{
    Language, PromptContext, chunk_prompt, merge_prompt, summary_instructions, summary_message,
};
use super::quality::{
    QualityExpectations, QualityFailure, QualityReport, audit_summary, feedback_for_retry,
};
use super::split::{FallbackLevel, StagePlan, fallback_note, plan_part};
use crate::message::{Message, Role};
use crate::summary::{REQUIRED_SECTIONS, list_ref_ids, missing_sections};
use crate::tokens::estimate_message_tokens;

/// The summary when there is no history at all (`DEFAULT_SUMMARY_FALLBACK`).
pub const NO_PRIOR_HISTORY: &str = "No prior history.";

/// Why one summarizer call gave no summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummaryFailure {
    /// The call failed (too large, provider error, empty output…): the next fallback level
    /// applies.
    Failed {
        /// What went wrong, for the report and the last-resort note.
        message: String,
    },
    /// The caller aborted: the compaction is cancelled at once.
    Aborted,
}

/// Which history a request summarises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryStage {
    /// The oldest history, pruned for `max_history_share`.
    DroppedHistory,
    /// The main span.
    History,
}

/// Where a request sits in its stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SummaryStep {
    /// Chunk `chunk` of `chunks` (1-based) of part `part` of `parts`.
    Chunk {
        /// The part, counting from 1.
        part: usize,
        /// How many parts the stage has.
        parts: usize,
        /// The chunk within the part, counting from 1.
        chunk: usize,
        /// How many chunks the part has.
        chunks: usize,
    },
    /// Chunk `chunk` of `chunks` of the merge of `parts` partial summaries.
    Merge {
        /// How many partial summaries are merged.
        parts: usize,
        /// The chunk of the merge, counting from 1.
        chunk: usize,
        /// How many chunks the merge takes.
        chunks: usize,
    },
}

/// One summarizer call: instructions (the system prompt) and prompt for an LLM, and the same
/// content as values for a summarizer that needs no LLM.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRequest {
    /// Which history the request summarises.
    pub stage: SummaryStage,
    /// 0 for the first attempt, then one per quality-guard retry.
    pub attempt: u32,
    /// Where the request sits in its stage.
    pub step: SummaryStep,
    /// The fallback level the request is made at (whole, without oversized messages, note).
    pub level: FallbackLevel,
    /// The system prompt for an LLM summarizer.
    pub instructions: String,
    /// The user prompt for an LLM summarizer: the transcript and what to do with it.
    pub prompt: String,
    /// The messages summarised (details stripped); for a merge, the partial summaries as user
    /// messages.
    pub messages: Vec<Message>,
    /// The summary this one updates.
    pub previous_summary: Option<String>,
    /// Identifiers to keep verbatim.
    pub identifiers: Vec<String>,
    /// The language to write the summary in.
    pub language: Language,
    /// Most tokens the summary may take (`0.8 × reserve_tokens`).
    pub max_output_tokens: u64,
    /// The latest substantive user ask of the span (continuations skipped), which the quality
    /// guard checks the summary against: a summarizer that needs no LLM quotes it. `None` for
    /// the dropped history (the guard checks only the main span).
    pub latest_user_ask: Option<String>,
}

impl SummaryRequest {
    /// A readable rendering of the whole request (for logs and snapshot tests).
    pub fn render(&self) -> String {
        let stage = match self.stage {
            SummaryStage::DroppedHistory => "dropped history",
            SummaryStage::History => "history",
        };
        let step = match self.step {
            SummaryStep::Chunk {
                part,
                parts,
                chunk,
                chunks,
            } => format!("part {part}/{parts}, chunk {chunk}/{chunks}"),
            SummaryStep::Merge {
                parts,
                chunk,
                chunks,
            } => format!("merge of {parts} parts, chunk {chunk}/{chunks}"),
        };
        let level = match self.level {
            FallbackLevel::Full => "full",
            FallbackLevel::SmallOnly => "small only",
            FallbackLevel::Note => "note",
        };
        format!(
            "=== summary request: {stage}, attempt {}, {step}, level {level}, {} messages, max \
             {} output tokens ===\n--- instructions ---\n{}\n--- prompt ---\n{}\n",
            self.attempt + 1,
            self.messages.len(),
            self.max_output_tokens,
            self.instructions,
            self.prompt
        )
    }
}

/// The seed's structured summary for when there is nothing to summarise: the previous summary
/// when it already has the five sections, else the five sections with the previous summary (or
/// "No prior history.") under `## Decisions` (`buildStructuredFallbackSummary`).
pub fn structured_fallback_summary(previous: Option<&str>) -> String {
    let previous = previous.map(str::trim).filter(|text| !text.is_empty());
    if let Some(text) = previous {
        if missing_sections(text).is_empty() {
            return text.to_owned();
        }
    }
    let mut sections = Vec::new();
    for (index, heading) in REQUIRED_SECTIONS.iter().enumerate() {
        let body = match index {
            0 => previous.unwrap_or(NO_PRIOR_HISTORY),
            4 => "None captured.",
            _ => "None.",
        };
        sections.push(format!("{heading}\n{body}"));
    }
    sections.join("\n\n")
}

// ---------------------------------------------------------------------------------------------
// Jobs
// ---------------------------------------------------------------------------------------------

/// What a fallback job summarises.
#[derive(Debug, Clone)]
enum Source {
    /// A part of the stage plan.
    Part,
    /// The partial summaries being merged, as user messages.
    Merge(Vec<Message>),
}

/// One part (or the merge) through the three fallback levels.
#[derive(Debug, Clone)]
struct FallbackJob {
    source: Source,
    level: FallbackLevel,
    chunks: Vec<Vec<usize>>,
    small_chunks: Vec<Vec<usize>>,
    notes: Vec<String>,
    messages: usize,
    next_chunk: usize,
    rolling: Option<String>,
    initial_previous: Option<String>,
}

struct JobResult {
    text: String,
    level: FallbackLevel,
}

enum JobPoll {
    Request {
        indices: Vec<usize>,
        previous: Option<String>,
        chunk: usize,
        chunks: usize,
    },
    Finished(JobResult),
}

impl FallbackJob {
    fn new(
        source: Source,
        part: &super::split::PartPlan,
        initial_previous: Option<String>,
    ) -> FallbackJob {
        FallbackJob {
            source,
            level: FallbackLevel::Full,
            chunks: part
                .chunks
                .iter()
                .map(|range| range.clone().collect())
                .collect(),
            small_chunks: part.small_chunks.clone(),
            notes: part.oversized_notes.clone(),
            messages: part.len(),
            next_chunk: 0,
            rolling: None,
            initial_previous,
        }
    }

    fn poll(&mut self) -> JobPoll {
        if self.level == FallbackLevel::Note {
            return JobPoll::Finished(JobResult {
                text: fallback_note(self.messages, self.notes.len()),
                level: FallbackLevel::Note,
            });
        }
        if let Some(indices) = self.chunks.get(self.next_chunk) {
            return JobPoll::Request {
                indices: indices.clone(),
                previous: self
                    .rolling
                    .clone()
                    .or_else(|| self.initial_previous.clone()),
                chunk: self.next_chunk + 1,
                chunks: self.chunks.len(),
            };
        }
        let mut text = self
            .rolling
            .clone()
            .or_else(|| self.initial_previous.clone())
            .unwrap_or_else(|| NO_PRIOR_HISTORY.to_owned());
        if self.level == FallbackLevel::SmallOnly && !self.notes.is_empty() {
            text = format!("{}\n\n{}", text.trim_end(), self.notes.join("\n"));
        }
        JobPoll::Finished(JobResult {
            text,
            level: self.level,
        })
    }

    fn succeed(&mut self, text: String) {
        self.rolling = Some(text);
        self.next_chunk += 1;
    }

    fn fail(&mut self) {
        self.rolling = None;
        self.next_chunk = 0;
        match self.level {
            FallbackLevel::Full if !self.small_chunks.is_empty() => {
                self.level = FallbackLevel::SmallOnly;
                self.chunks = std::mem::take(&mut self.small_chunks);
            }
            FallbackLevel::Full | FallbackLevel::SmallOnly | FallbackLevel::Note => {
                self.level = FallbackLevel::Note;
            }
        }
    }
}

/// One staged summary: parts, then the merge.
#[derive(Debug, Clone)]
struct StagedJob {
    stage: SummaryStage,
    attempt: u32,
    context: PromptContext,
    previous: Option<String>,
    part_index: usize,
    partials: Vec<String>,
    part_levels: Vec<FallbackLevel>,
    current: Option<FallbackJob>,
    merging: bool,
    merge_fell_back: bool,
}

struct StagedResult {
    text: String,
    /// Every part ended with the plain note.
    degraded: bool,
    deepest: FallbackLevel,
    merge_fell_back: bool,
}

enum StagedPoll {
    Request(SummaryRequest),
    Finished(StagedResult),
}

impl StagedJob {
    fn new(
        stage: SummaryStage,
        attempt: u32,
        context: PromptContext,
        previous: Option<String>,
    ) -> StagedJob {
        StagedJob {
            stage,
            attempt,
            context,
            previous,
            part_index: 0,
            partials: Vec::new(),
            part_levels: Vec::new(),
            current: None,
            merging: false,
            merge_fell_back: false,
        }
    }

    fn result(&self, text: String) -> StagedResult {
        StagedResult {
            text,
            degraded: !self.part_levels.is_empty()
                && self
                    .part_levels
                    .iter()
                    .all(|level| *level == FallbackLevel::Note),
            deepest: self
                .part_levels
                .iter()
                .copied()
                .max()
                .unwrap_or(FallbackLevel::Full),
            merge_fell_back: self.merge_fell_back,
        }
    }

    fn poll(&mut self, plan: &CompactionPlan) -> StagedPoll {
        let (messages, stages) = source_of(plan, self.stage);
        loop {
            if self.current.is_none() {
                if self.merging {
                    let text = self.partials.join("\n\n");
                    return StagedPoll::Finished(self.result(text));
                }
                match stages.parts.get(self.part_index) {
                    Some(part) => {
                        let previous = if stages.parts.len() == 1 {
                            self.previous.clone()
                        } else {
                            None
                        };
                        self.current = Some(FallbackJob::new(Source::Part, part, previous));
                    }
                    None if self.partials.len() <= 1 => {
                        let text = self
                            .partials
                            .first()
                            .cloned()
                            .or_else(|| self.previous.clone())
                            .unwrap_or_else(|| NO_PRIOR_HISTORY.to_owned());
                        return StagedPoll::Finished(self.result(text));
                    }
                    None => {
                        self.merging = true;
                        let merge_messages: Vec<Message> = self
                            .partials
                            .iter()
                            .map(|partial| Message::text(Role::User, partial.clone()))
                            .collect();
                        let part = plan_part(
                            &merge_messages,
                            0..merge_messages.len(),
                            plan.window_tokens,
                            stages.max_chunk_tokens,
                            &plan.settings,
                        );
                        self.current = Some(FallbackJob::new(
                            Source::Merge(merge_messages),
                            &part,
                            self.previous.clone(),
                        ));
                    }
                }
            }
            // Every branch above sets a job or returns; finishing here keeps the loop finite
            // should that ever change.
            let Some(job) = self.current.as_mut() else {
                let text = self.partials.join("\n\n");
                return StagedPoll::Finished(self.result(text));
            };
            match job.poll() {
                JobPoll::Request {
                    indices,
                    previous,
                    chunk,
                    chunks,
                } => {
                    return StagedPoll::Request(
                        self.request(plan, messages, stages, indices, previous, chunk, chunks),
                    );
                }
                JobPoll::Finished(result) => {
                    self.current = None;
                    if self.merging {
                        let text = if result.level == FallbackLevel::Note {
                            self.merge_fell_back = true;
                            self.partials.join("\n\n")
                        } else {
                            result.text
                        };
                        return StagedPoll::Finished(self.result(text));
                    }
                    self.partials.push(result.text);
                    self.part_levels.push(result.level);
                    self.part_index += 1;
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        plan: &CompactionPlan,
        messages: &[Message],
        stages: &StagePlan,
        indices: Vec<usize>,
        previous: Option<String>,
        chunk: usize,
        chunks: usize,
    ) -> SummaryRequest {
        let level = self
            .current
            .as_ref()
            .map_or(FallbackLevel::Full, |job| job.level);
        let (step, chosen, prompt) = match self.current.as_ref().map(|job| &job.source) {
            Some(Source::Merge(merge_messages)) => {
                let chosen: Vec<Message> = indices
                    .iter()
                    .filter_map(|&i| merge_messages.get(i).cloned())
                    .collect();
                let partials: Vec<String> = chosen.iter().map(Message::plain_text).collect();
                let prompt = merge_prompt(&partials, previous.as_deref(), &self.context);
                let step = SummaryStep::Merge {
                    parts: self.partials.len(),
                    chunk,
                    chunks,
                };
                (step, chosen, prompt)
            }
            Some(Source::Part) | None => {
                let chosen: Vec<Message> = indices
                    .iter()
                    .filter_map(|&i| messages.get(i).cloned())
                    .collect();
                let parts = stages.parts.len();
                let position = (parts > 1 || chunks > 1).then(|| {
                    format!(
                        "part {} of {parts}, chunk {chunk} of {chunks}",
                        self.part_index + 1
                    )
                });
                let prompt = chunk_prompt(
                    &chosen,
                    previous.as_deref(),
                    position.as_deref(),
                    &self.context,
                );
                let step = SummaryStep::Chunk {
                    part: self.part_index + 1,
                    parts,
                    chunk,
                    chunks,
                };
                (step, chosen, prompt)
            }
        };
        SummaryRequest {
            stage: self.stage,
            attempt: self.attempt,
            step,
            level,
            instructions: summary_instructions(&self.context),
            prompt,
            messages: chosen,
            previous_summary: previous,
            identifiers: self.context.identifiers.clone(),
            language: self.context.language,
            max_output_tokens: plan.settings.max_summary_tokens(),
            latest_user_ask: match self.stage {
                SummaryStage::History => plan.latest_user_ask.clone(),
                SummaryStage::DroppedHistory => None,
            },
        }
    }

    fn record(&mut self, result: Result<String, String>) {
        if let Some(job) = self.current.as_mut() {
            match result {
                Ok(text) => job.succeed(text),
                Err(_) => job.fail(),
            }
        }
    }
}

fn source_of(plan: &CompactionPlan, stage: SummaryStage) -> (&[Message], &StagePlan) {
    match (stage, plan.dropped.as_ref()) {
        (SummaryStage::DroppedHistory, Some(dropped)) => (&dropped.messages, &dropped.stages),
        (SummaryStage::DroppedHistory, None) | (SummaryStage::History, _) => {
            (&plan.span, &plan.stages)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Attempt {
    text: String,
    report: Option<QualityReport>,
    degraded: bool,
    deepest: FallbackLevel,
    merge_fell_back: bool,
}

#[derive(Debug, Clone)]
enum State {
    Dropped(StagedJob),
    Main(StagedJob),
    Done,
}

/// A compaction in progress; see the module docs for the loop that drives it.
#[derive(Debug, Clone)]
pub struct CompactionRun {
    plan: CompactionPlan,
    state: State,
    pending: Option<SummaryRequest>,
    effective_previous: Option<String>,
    attempts: Vec<Attempt>,
    calls: u32,
    failed_calls: u32,
    last_error: Option<String>,
    aborted: bool,
    dropped_fell_back: bool,
}

impl CompactionRun {
    /// Starts the summary loop of `plan` (a skipped plan has no request).
    pub fn new(plan: CompactionPlan) -> CompactionRun {
        let effective_previous = plan.previous_summary.clone();
        let state = if plan.skip.is_some() {
            State::Done
        } else if let Some(dropped) = &plan.dropped {
            let context = PromptContext::new(
                &plan.settings,
                plan.language,
                plan.custom_instructions.clone(),
                identifiers_of(&dropped.messages),
            );
            State::Dropped(StagedJob::new(
                SummaryStage::DroppedHistory,
                0,
                context,
                effective_previous.clone(),
            ))
        } else if !plan.span.is_empty() {
            State::Main(Self::main_job(&plan, 0, None, effective_previous.clone()))
        } else {
            State::Done
        };
        CompactionRun {
            plan,
            state,
            pending: None,
            effective_previous,
            attempts: Vec::new(),
            calls: 0,
            failed_calls: 0,
            last_error: None,
            aborted: false,
            dropped_fell_back: false,
        }
    }

    fn main_job(
        plan: &CompactionPlan,
        attempt: u32,
        feedback: Option<String>,
        previous: Option<String>,
    ) -> StagedJob {
        let mut context = PromptContext::new(
            &plan.settings,
            plan.language,
            plan.custom_instructions.clone(),
            plan.identifiers.clone(),
        );
        context.quality_feedback = feedback;
        context.turn_continues = plan
            .split
            .turn_split
            .as_ref()
            .is_some_and(|split| split.turn_start.is_some());
        StagedJob::new(SummaryStage::History, attempt, context, previous)
    }

    /// The plan being run.
    pub fn plan(&self) -> &CompactionPlan {
        &self.plan
    }

    /// Summarizer calls made so far.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// The next summarizer call, or `None` when the run is over (then call [`Self::finish`]).
    /// Until [`Self::record`] is called, the same request is returned again.
    pub fn next_request(&mut self) -> Option<SummaryRequest> {
        if let Some(pending) = &self.pending {
            return Some(pending.clone());
        }
        loop {
            let poll = match &mut self.state {
                State::Done => return None,
                State::Dropped(job) | State::Main(job) => job.poll(&self.plan),
            };
            match poll {
                StagedPoll::Request(request) => {
                    self.pending = Some(request.clone());
                    return Some(request);
                }
                StagedPoll::Finished(result) => self.stage_finished(result),
            }
        }
    }

    fn stage_finished(&mut self, result: StagedResult) {
        let state = std::mem::replace(&mut self.state, State::Done);
        match state {
            State::Done => {}
            State::Dropped(_) => {
                self.effective_previous = if result.degraded {
                    self.dropped_fell_back = true;
                    let previous = self.plan.previous_summary.clone().unwrap_or_default();
                    Some(format!("{previous}\n\n{}", result.text).trim().to_owned())
                } else {
                    Some(result.text)
                };
                if !self.plan.span.is_empty() {
                    self.state = State::Main(Self::main_job(
                        &self.plan,
                        0,
                        None,
                        self.effective_previous.clone(),
                    ));
                }
            }
            State::Main(job) => {
                let settings = &self.plan.settings;
                let report = settings.quality_guard.enabled.then(|| {
                    audit_summary(
                        &result.text,
                        &QualityExpectations {
                            identifier_policy: settings.identifier_policy,
                            identifiers: self.plan.identifiers.clone(),
                            latest_user_ask: self.plan.latest_user_ask.clone(),
                        },
                    )
                });
                let passed = report.as_ref().is_none_or(QualityReport::passed);
                let done =
                    (passed && !result.degraded) || job.attempt + 1 >= settings.max_attempts();
                let feedback = report
                    .as_ref()
                    .map(|report| feedback_for_retry(report, settings.identifier_policy));
                self.attempts.push(Attempt {
                    text: result.text,
                    report,
                    degraded: result.degraded,
                    deepest: result.deepest,
                    merge_fell_back: result.merge_fell_back,
                });
                if !done {
                    self.state = State::Main(Self::main_job(
                        &self.plan,
                        job.attempt + 1,
                        feedback,
                        self.effective_previous.clone(),
                    ));
                }
            }
        }
    }

    /// Records the result of the request last returned by [`Self::next_request`]. An empty
    /// summary counts as a failure. Without a pending request this does nothing.
    pub fn record(&mut self, result: Result<String, SummaryFailure>) {
        if self.pending.take().is_none() {
            return;
        }
        self.calls += 1;
        let outcome = match result {
            Ok(text) if !text.trim().is_empty() => Ok(text.trim().to_owned()),
            Ok(_) => Err("the summarizer returned an empty summary".to_owned()),
            Err(SummaryFailure::Failed { message }) => Err(message),
            Err(SummaryFailure::Aborted) => {
                self.aborted = true;
                self.state = State::Done;
                return;
            }
        };
        if let Err(message) = &outcome {
            self.failed_calls += 1;
            self.last_error = Some(message.clone());
        }
        match &mut self.state {
            State::Dropped(job) | State::Main(job) => job.record(outcome),
            State::Done => {}
        }
    }

    /// Abandons the run (the caller's timeout, a shutdown): the history stays as it was.
    pub fn cancel(self, reason: CancelReason) -> CompactionOutcome {
        CompactionOutcome::Cancelled {
            reason,
            tokens_before: self.plan.tokens_before,
        }
    }

    /// The outcome. Called before [`Self::next_request`] returned `None`, the run counts as
    /// aborted.
    pub fn finish(self) -> CompactionOutcome {
        if let Some(skipped) = self.plan.skipped() {
            return skipped;
        }
        let unfinished = !matches!(self.state, State::Done) || self.pending.is_some();
        if self.aborted || unfinished {
            return self.cancel(CancelReason::Aborted);
        }
        let trigger = self.plan.trigger;
        let best = self
            .attempts
            .iter()
            .enumerate()
            .min_by_key(|(index, attempt)| {
                (
                    attempt.degraded,
                    attempt.report.as_ref().map_or(0, |r| r.failures.len()),
                    std::cmp::Reverse(*index),
                )
            })
            .map(|(_, attempt)| attempt.clone());
        let mut degraded = self.dropped_fell_back;
        let (text, quality, deepest, merge_fell_back) = match best {
            None => (
                structured_fallback_summary(self.effective_previous.as_deref()),
                None,
                FallbackLevel::Full,
                false,
            ),
            Some(attempt) => {
                if attempt.degraded {
                    if !trigger.accepts_degraded() {
                        let last_error = self
                            .last_error
                            .clone()
                            .unwrap_or_else(|| "no summary".to_owned());
                        return self.cancel(CancelReason::SummarizerFailed { last_error });
                    }
                    degraded = true;
                }
                let failures: Vec<QualityFailure> = attempt
                    .report
                    .as_ref()
                    .map(|report| report.failures.clone())
                    .unwrap_or_default();
                if !failures.is_empty() && !attempt.degraded {
                    if !trigger.accepts_degraded() {
                        let attempts = self.attempts.len() as u32;
                        return self
                            .cancel(CancelReason::QualityGuardExhausted { attempts, failures });
                    }
                    degraded = true;
                }
                (
                    attempt.text,
                    attempt.report,
                    attempt.deepest,
                    attempt.merge_fell_back,
                )
            }
        };
        let plan = &self.plan;
        // Listed here, after the guard, for every summarizer: the ids are exact by construction.
        let text = list_ref_ids(&text, &plan.offloaded_refs);
        let summary = finish_summary(&text, &plan.appendices);
        let tokens_after = plan.tokens_after(&summary);
        if tokens_after >= plan.tokens_before {
            let tokens_before = plan.tokens_before;
            return self.cancel(CancelReason::WouldNotShrink {
                tokens_before,
                tokens_after,
            });
        }
        let details = CompactionDetails {
            trigger,
            window_tokens: plan.window_tokens,
            threshold_tokens: plan.threshold_tokens,
            pinned_prefix: plan.split.pinned_prefix,
            summarized_messages: plan.span.len(),
            dropped_messages: plan.dropped.as_ref().map_or(0, |d| d.messages.len()),
            preserved_messages: plan.message_count.saturating_sub(plan.split.boundary),
            summarizer_calls: self.calls,
            failed_calls: self.failed_calls,
            attempts: self.attempts.len() as u32,
            fallback_level: deepest,
            merge_fell_back,
            quality,
            degraded,
            identifiers: plan.identifiers.clone(),
            language: plan.language,
            files: plan.appendices.files.clone(),
            tool_failures: plan.appendices.tool_failures.len(),
            turn_split: plan.split.turn_split.clone(),
            truncated_tail_results: plan
                .tail_truncation
                .as_ref()
                .map_or(0, |t| t.report.truncated),
            cut_tail_texts: plan.tail_truncation.as_ref().map_or(0, |t| t.middle_cuts),
            offloaded_refs: plan.offloaded_refs.clone(),
            still_over_threshold: tokens_after > plan.threshold_tokens,
        };
        let summary_tokens = estimate_message_tokens(&summary_message(&summary));
        let over_target = (tokens_after > plan.threshold_tokens).then(|| OverTarget {
            tokens_after,
            target_tokens: plan.threshold_tokens,
            summary_tokens,
            kept_tokens: tokens_after
                .saturating_sub(summary_tokens + plan.prefix_tokens + plan.overhead_tokens),
            fixed_tokens: plan.prefix_tokens + plan.overhead_tokens,
        });
        let first_kept_index = plan.split.boundary;
        let first_kept_entry = plan.first_kept_entry.clone();
        let tokens_before = plan.tokens_before;
        let tail_truncation = self.plan.tail_truncation.map(Box::new);
        CompactionOutcome::Compacted {
            tokens_before,
            tokens_after,
            summary,
            first_kept_index,
            first_kept_entry,
            tail_truncation,
            details: Box::new(details),
            over_target,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_fallback_keeps_a_structured_previous_summary() {
        let previous = REQUIRED_SECTIONS.join("\n- x\n");
        assert_eq!(structured_fallback_summary(Some(&previous)), previous);
        let built = structured_fallback_summary(Some("We fixed the build."));
        assert!(built.starts_with("## Decisions\nWe fixed the build.\n\n## Open TODOs\nNone."));
        assert!(missing_sections(&built).is_empty());
        assert!(structured_fallback_summary(None).contains(NO_PRIOR_HISTORY));
    }
}
