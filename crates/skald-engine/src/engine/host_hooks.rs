//! The use cases of a host that keeps its own context and calls skald from its hooks (Claude
//! Code's plugin, `skald hook <event>`), not through the proxy: recall for the prompt a person
//! just submitted ([`Engine::recall_for_prompt`]), the host's transcript compacted by skald's
//! summarizer when the host compacts, its replaced span archived for memory extraction
//! ([`Engine::compact_transcript`]; at the session's end too), and the summary handed back to
//! the host after its own compaction ([`Engine::compaction_summary`]). A large tool output is
//! [`Engine::offload_output`].

use skald_core::codec::claude_code::instruction_files;
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Block, Message, Role};
use skald_core::session::EntryKind;
use skald_store::sessions::SessionError;
use skald_store::sessions::import::ImportOptions;
use tokio_util::sync::CancellationToken;

use super::Engine;
use crate::compact::{CompactRequest, Compaction, SpanArchive, compact_and_archive};
use crate::memory::usage::{ToolMemoryUpdate, record_tool_reports};
use crate::memory::{RecallReport, recall_for_turn, session_start_memory};
use crate::{EngineError, MemoryIdentityError};
use skald_core::compaction::CompactionTrigger;
use skald_core::memory::usage::ToolCallReport;
use skald_store::memories::MemoryError;

/// The memories recalled for one prompt, as text a host adds to the model's context.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptRecall {
    /// The simulated `search_memories` call and its result, as the model reads them: the
    /// query and the memories with their URIs.
    pub context: String,
    /// What the recall searched for, kept and dropped.
    pub report: RecallReport,
}

/// A host's transcript compacted by skald ([`Engine::compact_transcript`]).
#[derive(Debug)]
pub struct TranscriptCompaction {
    /// Entries the import appended to skald's copy of the session.
    pub entries_imported: usize,
    /// The compaction (its outcome, and the archive of the replaced span when memory is on).
    pub compaction: Compaction,
}

impl Engine {
    /// Per-turn recall (seed 002, Component 2, Part 2) for a prompt a host is about to send,
    /// with the configured `[memory]` user, settings and embedder: the same search, relevance
    /// floor and budget as the proxy's recall, rendered as the text of the simulated
    /// `search_memories` call. `None` when recall is skipped (a greeting, a short message),
    /// finds nothing relevant, or memory is off. Nothing is stored.
    pub async fn recall_for_prompt(
        &self,
        tenant: &Tenant,
        prompt: &str,
    ) -> Result<Option<PromptRecall>, EngineError> {
        self.recall_for_prompt_after(tenant, &[], prompt).await
    }

    /// [`Engine::recall_for_prompt`] with the user's earlier messages of the session (oldest
    /// first; a host's transcript): the query is made of the last `query_messages` (5) user
    /// messages, the prompt included, as the proxy's recall makes it.
    pub async fn recall_for_prompt_after(
        &self,
        tenant: &Tenant,
        earlier: &[String],
        prompt: &str,
    ) -> Result<Option<PromptRecall>, EngineError> {
        let config = self.config();
        if !config.memory.enabled {
            return Ok(None);
        }
        let identity = self.identity_for_hooks()?;
        let mut messages: Vec<Message> = earlier
            .iter()
            .filter(|text| !text.trim().is_empty())
            .map(|text| Message::text(Role::User, text.as_str()))
            .collect();
        messages.push(Message::text(Role::User, prompt));
        let outcome = recall_for_turn(
            self.memories(),
            config.embedder.as_deref(),
            tenant,
            &identity,
            &config.memory.recall,
            messages,
        )
        .await;
        if outcome.report.kept.is_empty() {
            return Ok(None);
        }
        let mut context = String::new();
        for block in outcome.messages.iter().flat_map(|m| m.content.iter()) {
            match block {
                Block::ToolCall(call) => {
                    context.push_str(&format!(
                        "skald recalled these memories for the prompt ({}({})):\n",
                        call.name, call.arguments
                    ));
                }
                Block::ToolResult(result) => {
                    for part in &result.content {
                        if let Block::Text(text) = part {
                            context.push_str(&text.text);
                        }
                    }
                }
                Block::Text(_) | Block::Image(_) | Block::Thinking(_) | Block::Opaque(_) => {}
            }
        }
        Ok(Some(PromptRecall {
            context,
            report: outcome.report,
        }))
    }

    /// A host's whole transcript (any format `skald import` reads; Claude Code's JSONL) brought
    /// into `session` (only what is new), then compacted by skald's summarizer as a manual
    /// compaction that keeps no turn verbatim — the host replaces its whole history with its
    /// own summary, so skald's must stand for all of it — and, memory on, the replaced span
    /// archived and its memories extracted (seed 002's write at compaction). Used before a
    /// host compacts and when its session ends.
    pub async fn compact_transcript(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        transcript: &str,
        cancel: &CancellationToken,
    ) -> Result<TranscriptCompaction, EngineError> {
        let imported = self.import(
            tenant,
            transcript,
            &ImportOptions {
                source: None,
                session_id: Some(session.clone()),
                now_ms: self.now_ms(),
            },
        )?;
        let config = self.config();
        let mut settings = config.compaction.clone();
        settings.keep_recent_turns = 0;
        // The CLAUDE.md files Claude Code loaded are in the transcript, outside its messages.
        let rules_files = instruction_files(transcript);
        let request = CompactRequest {
            tenant,
            session_id: session,
            window_tokens: config.window_tokens,
            trigger: CompactionTrigger::Manual,
            settings: &settings,
            custom_instructions: None,
            agents_md: None,
            rules_files: &rules_files,
            context_tokens: None,
        };
        let archive = config.memory.enabled.then(|| SpanArchive {
            writer: self.writer(),
            system_prompt: None,
        });
        let slot = self.slot(tenant, session);
        let mut state = slot.lock().await;
        let _row = self.row_scope(tenant, session);
        let compaction = compact_and_archive(
            self.sessions(),
            self.refs(),
            config.summarizer.as_ref(),
            &request,
            archive,
            Some(&mut state),
            cancel,
        )
        .await?;
        Ok(TranscriptCompaction {
            entries_imported: imported.entries_added,
            compaction,
        })
    }

    /// What a session is given from memory when it starts (Claude Code's `SessionStart` on
    /// `startup`, `resume` or `clear`), as one text for the host's context: the user's profile
    /// and the agent's tool memories (with their advice), then the listing of what memory
    /// holds — the same snapshot the proxy and the engine API put in the system prompt and
    /// after the first user message. `None` when memory is off or holds nothing to say.
    pub fn memory_at_session_start(&self, tenant: &Tenant) -> Result<Option<String>, EngineError> {
        let config = self.config();
        if !config.memory.enabled {
            return Ok(None);
        }
        let identity = self.identity_for_hooks()?;
        let snapshot =
            session_start_memory(self.memories(), tenant, &identity, &config.memory.recall);
        let mut parts: Vec<String> = snapshot.system_prompt_addition.into_iter().collect();
        let listing: String = snapshot
            .directory_messages
            .iter()
            .flat_map(Message::tool_results)
            .map(|result| skald_core::message::join_text(&result.content))
            .collect();
        if !listing.trim().is_empty() {
            parts.push(format!(
                "## What long-term memory holds (memory_ls viking://)\n{listing}"
            ));
        }
        Ok((!parts.is_empty()).then(|| parts.join("\n\n")))
    }

    /// Adds the reports of tool calls a host ran (Claude Code's `PostToolUse`) to the agent's
    /// tool memories: counts, success rate, time, errors and argument patterns.
    /// Nothing is written with memory off.
    pub fn record_host_tool_calls(
        &self,
        tenant: &Tenant,
        reports: &[ToolCallReport],
    ) -> Result<ToolMemoryUpdate, MemoryError> {
        let config = self.config();
        if !config.memory.enabled || reports.is_empty() {
            return Ok(ToolMemoryUpdate::default());
        }
        record_tool_reports(self.memories(), tenant, &config.memory.agent, reports)
    }

    fn identity_for_hooks(&self) -> Result<crate::memory::MemoryIdentity, EngineError> {
        let config = self.config();
        self.memory_identity().map_err(|error| {
            EngineError::MemoryIdentity(Box::new(MemoryIdentityError {
                user: config.memory.user.clone(),
                agent: config.memory.agent.clone(),
                source: error,
            }))
        })
    }

    /// The summary of `session`'s latest compaction on its active path, at most `max_chars`
    /// characters (cut at a line where it can be, with a note of what was cut): what a host
    /// puts back into its context after compacting it itself. `None` when the session does not
    /// exist or was never compacted.
    pub fn compaction_summary(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        max_chars: usize,
    ) -> Result<Option<String>, EngineError> {
        let stored = match self.sessions().load(tenant, session) {
            Ok(stored) => stored,
            Err(SessionError::NotFound { .. }) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let summary = stored.path_to(None).into_iter().rev().find_map(|entry| {
            if let EntryKind::Compaction { summary, .. } = &entry.kind {
                Some(summary.clone())
            } else {
                None
            }
        });
        Ok(summary.map(|summary| cut_to(&summary, max_chars)))
    }
}

/// `text` within `max_chars` characters: whole when it fits, else its first lines that fit
/// with a last line saying how much was left out.
fn cut_to(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_owned();
    }
    let note = |left: usize| format!("\n[… {left} more characters of skald's summary cut]");
    let room = max_chars.saturating_sub(note(total).chars().count());
    let mut kept = String::new();
    let mut kept_chars = 0;
    for line in text.split_inclusive('\n') {
        let chars = line.chars().count();
        if kept_chars + chars > room {
            if kept.is_empty() {
                kept = line.chars().take(room).collect();
                kept_chars = room;
            }
            break;
        }
        kept.push_str(line);
        kept_chars += chars;
    }
    let mut cut = kept.trim_end_matches('\n').to_owned();
    cut.push_str(&note(total - kept_chars));
    cut
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_long_summary_is_cut_at_a_line_within_the_limit_and_says_so() {
        let text: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        let cut = cut_to(&text, 1000);
        assert!(cut.chars().count() <= 1000, "{}", cut.chars().count());
        assert!(cut.starts_with("line 0\nline 1\n"));
        assert!(
            cut.ends_with("more characters of skald's summary cut]"),
            "{cut}"
        );
        assert_eq!(cut_to("short", 1000), "short");
    }
}
