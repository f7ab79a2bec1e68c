//! The session use cases of [`Engine`]: ingest a host's messages, sync its whole conversation,
//! build the model's view of a session (as a preview, or for a call: [`Engine::assemble`]),
//! bring an existing history in (bootstrap and import), and read what is stored.

use std::collections::HashSet;

use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::tools::MEMORY_TOOL_NAMES;
use skald_core::message::{Message, ToolSpec};
use skald_core::pipeline::offload::FETCH_TOOL_NAME;
use skald_core::session::Session;
use skald_store::sessions::import::{
    ImportOptions, ImportOutcome, ImportStatus, import_transcript,
};
use skald_store::sessions::{
    NewSession, SessionError, SessionInfo, SessionStore, SessionSwitches, SqliteSessionStore,
};

use skald_core::compaction::CompactionTrigger;
use tokio_util::sync::CancellationToken;

use super::{CompactInput, Engine};
use crate::compact::Compaction;
use crate::ingest::{self, CommitOutcome, IngestOutcome, SyncOutcome, TurnAnchors};
use crate::memory::MemoryIdentity;
use crate::timeline::{CallTimeline, Savings, call_series, call_timeline, savings};
use crate::{
    EngineError, MemoryIdentityError, ModelView, RecallHook, SessionState, ViewRequest,
    prepare_view,
};

/// How a view is asked for.
#[derive(Debug, Clone, Default)]
pub struct ViewOptions {
    /// The model's context window (default: the engine's).
    pub window_tokens: Option<u64>,
    /// The tools the host runs (`None`: all of skald's); skald offers no tool the host cannot
    /// run.
    pub available_tools: Option<HashSet<String>>,
    /// Whether recall, the session-start snapshot and the memory tools are part of the view.
    pub with_memory: bool,
    /// Whose memories (default: the configured `[memory]` user and agent).
    pub identity: Option<MemoryIdentity>,
    /// The prompt the host is about to send (recall searches with it).
    pub pending_prompt: Option<String>,
}

impl ViewOptions {
    /// Whether the host runs skald's tool `name`.
    fn host_runs(&self, name: &str) -> bool {
        self.available_tools
            .as_ref()
            .is_none_or(|names| names.contains(name))
    }
}

/// A session's view for the model, and what built it.
#[derive(Debug)]
pub struct View {
    /// The messages, system prompt additions and reports.
    pub view: ModelView,
    /// skald's tools the host runs, in the order they are offered.
    pub tools: Vec<ToolSpec>,
    /// Whose memories the view used (memory on).
    pub identity: Option<MemoryIdentity>,
}

/// An `assemble` call: the host's conversation (synced first, when given), and the view's
/// options.
#[derive(Debug, Clone, Default)]
pub struct AssembleInput {
    /// The host's whole conversation; `None`: the stored session as it is.
    pub messages: Option<Vec<Message>>,
    /// The session's source format if the sync creates it.
    pub source_format: String,
    /// The model the view is for (token calibration is per model).
    pub model: Option<String>,
    /// How the view is built.
    pub options: ViewOptions,
    /// The tokens the returned messages may take, when the host says (OpenClaw's `tokenBudget`:
    /// the window less the reserve, the prompt and the turn's pending messages; down to 1). A
    /// view over it compacts the session first — skald owns compaction — and is built again.
    pub budget_tokens: Option<u64>,
    /// The workspace's AGENTS.md, for the critical rules of that compaction.
    pub agents_md: Option<String>,
}

/// What [`Engine::assemble`] did.
#[derive(Debug)]
pub struct Assembly {
    /// The sync of the host's messages (when it sent them and the session is not fed by
    /// commits).
    pub sync: Option<SyncOutcome>,
    /// The host sent its messages, and they were not synced: the session holds the host's
    /// committed turns and is the source of its context (`ingest::fed_by_commits`).
    pub fed_by_commits: bool,
    /// The view built.
    pub view: View,
    /// The view's tokens, calibrated against what the provider reported for this model.
    pub estimated_tokens: u64,
    /// The view was over the host's budget, and the session was compacted to fit it.
    pub fit_to_budget: Option<BudgetFit>,
}

/// A compaction [`Engine::assemble`] ran because the view was over the host's budget.
#[derive(Debug)]
pub struct BudgetFit {
    /// The view's calibrated tokens before the compaction.
    pub view_tokens_before: u64,
    /// What the compaction did (its outcome says whether it could), or why it failed.
    pub compaction: Result<Compaction, String>,
}

/// Where a bootstrap's history comes from.
#[derive(Debug, Clone)]
pub enum BootstrapSource {
    /// A session file's content (an OpenClaw session JSONL, or any transcript import reads),
    /// and the file's path on the host, kept as the session's source.
    File {
        /// The file's content.
        text: String,
        /// The file's path on the host.
        path: Option<String>,
    },
    /// The session's messages.
    Messages {
        /// The messages, oldest first.
        messages: Vec<Message>,
        /// The session's source format if the bootstrap creates it.
        source_format: String,
    },
}

/// What [`Engine::bootstrap`] did.
#[derive(Debug)]
pub struct Bootstrap {
    /// Messages the session held before.
    pub messages_before: u64,
    /// Messages it holds now.
    pub messages_after: u64,
    /// Why nothing was stored (the session already held this history).
    pub already: Option<String>,
    /// The import of a file, and the session as it is after it.
    pub import: Option<(ImportOutcome, SessionInfo)>,
}

/// A stored session and the size of its context.
#[derive(Debug, Clone)]
pub struct SessionOverview {
    /// What the store keeps about the session.
    pub info: SessionInfo,
    /// Estimated tokens (chars/4) of the context rebuilt from the leaf, before any policy.
    pub estimated_tokens: u64,
}

impl Engine {
    /// Stores `messages` at the end of the session (created if new): what was stored, and what
    /// was recognised as already stored (a batch resent after a restart, or stored first by
    /// another server) and skipped.
    pub async fn ingest(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        messages: Vec<Message>,
    ) -> Result<IngestOutcome, EngineError> {
        let slot = self.slot(tenant, session);
        let mut state = slot.lock().await;
        let _row = self.row_scope(tenant, session);
        ingest::ingest_messages(&mut state, self.sessions(), tenant, session, messages)
    }

    /// Commits one finished turn atomically and idempotently by its `advancement_key` (see
    /// `ingest::commit_turn`): a retried commit is a duplicate that writes nothing.
    pub async fn commit_turn(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        advancement_key: &str,
        anchors: &TurnAnchors,
        messages: Vec<Message>,
        source_format: &str,
    ) -> Result<CommitOutcome, EngineError> {
        let slot = self.slot(tenant, session);
        let mut state = slot.lock().await;
        let _row = self.row_scope(tenant, session);
        ingest::commit_turn(
            &mut state,
            self.sessions(),
            tenant,
            session,
            advancement_key,
            anchors,
            messages,
            source_format,
        )
    }

    /// Brings the stored session in line with a host's whole conversation (see
    /// `ingest::sync_conversation`).
    pub async fn sync(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        messages: &[Message],
        source_format: &str,
    ) -> Result<SyncOutcome, EngineError> {
        let slot = self.slot(tenant, session);
        let mut state = slot.lock().await;
        let _row = self.row_scope(tenant, session);
        ingest::sync_conversation(
            &mut state,
            self.sessions(),
            tenant,
            session,
            messages,
            source_format,
        )
    }

    /// What the model would be shown for the session now, built on a copy of its state: the
    /// session's own memos are not changed (an inspection, not a call).
    pub async fn view(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        options: ViewOptions,
    ) -> Result<View, EngineError> {
        let mut copy = self.slot(tenant, session).lock().await.clone();
        self.view_with(self.sessions(), tenant, session, &mut copy, options)
            .await
    }

    /// What the model would be shown for the session with its leaf at entry `leaf` — another
    /// branch, or an earlier point of this one — built by the same code as [`Engine::view`] on
    /// a copy of the session whose leaf is moved there. The stored session and its memos are
    /// not changed; an entry the session does not hold is [`SessionError::UnknownEntry`].
    pub async fn view_at_leaf(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: &str,
        options: ViewOptions,
    ) -> Result<View, EngineError> {
        let stored = self.sessions().load(tenant, session)?;
        if stored.entry(leaf).is_none() {
            return Err(SessionError::UnknownEntry {
                session: session.to_string(),
                id: leaf.to_owned(),
            }
            .into());
        }
        let info = self.sessions().get(tenant, session)?;
        let at_leaf = SqliteSessionStore::in_memory()?;
        at_leaf.create(
            tenant,
            NewSession {
                header: stored.header.clone(),
                source_format: info.source_format,
                source: info.source,
                title: info.title,
                entries: stored.entries().to_vec(),
            },
        )?;
        at_leaf.set_leaf(tenant, session, Some(leaf))?;
        let mut fresh = SessionState::default();
        self.view_with(&at_leaf, tenant, session, &mut fresh, options)
            .await
    }

    /// The view for a model call: the host's conversation synced first (when given), the view
    /// built on the session's state, and its size recorded for calibration.
    pub async fn assemble(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        input: AssembleInput,
    ) -> Result<Assembly, EngineError> {
        let slot = self.slot(tenant, session);
        let mut state = slot.lock().await;
        let _row = self.row_scope(tenant, session);
        // A session a host feeds with its committed turns is the source of its context: the
        // host's projection of the conversation (tool-call ids rewritten, pending messages left
        // out) would fork it if it were synced in.
        let fed_by_commits = input.messages.is_some()
            && match state.stored_session(self.sessions(), tenant, session) {
                Ok(stored) => ingest::fed_by_commits(stored),
                Err(SessionError::NotFound { .. }) => false,
                Err(error) => return Err(error.into()),
            };
        let sync = match (&input.messages, fed_by_commits) {
            (Some(messages), false) => Some(ingest::sync_conversation(
                &mut state,
                self.sessions(),
                tenant,
                session,
                messages,
                &input.source_format,
            )?),
            (Some(_), true) | (None, _) => None,
        };
        let model = input.model.as_deref();
        let (view, estimated_tokens) = self
            .counted_view(tenant, session, &mut state, input.options.clone(), model)
            .await?;
        let mut assembly = Assembly {
            sync,
            fed_by_commits,
            estimated_tokens,
            view,
            fit_to_budget: None,
        };
        let Some(budget) = input
            .budget_tokens
            .filter(|budget| estimated_tokens > *budget)
        else {
            return Ok(assembly);
        };
        drop(state);
        // Compacting at a window of budget + reserve triggers exactly when the context is over
        // the budget, and aims the summary and the kept turns at it.
        let compact = CompactInput {
            window_tokens: Some(budget.saturating_add(self.config().compaction.reserve_tokens)),
            trigger: CompactionTrigger::Threshold,
            custom_instructions: None,
            agents_md: input.agents_md.clone(),
            context_tokens: Some(estimated_tokens),
            archive: true,
        };
        let compaction = self
            .compact(tenant, session, &compact, &CancellationToken::new())
            .await;
        let compacted = matches!(&compaction, Ok(done) if done.result.outcome.is_compacted());
        assembly.fit_to_budget = Some(BudgetFit {
            view_tokens_before: estimated_tokens,
            compaction: compaction.map_err(|error| crate::error_with_causes(&error)),
        });
        if compacted {
            let mut state = slot.lock().await;
            (assembly.view, assembly.estimated_tokens) = self
                .counted_view(tenant, session, &mut state, input.options, model)
                .await?;
        }
        Ok(assembly)
    }

    /// The view for a call of `model`, its size recorded for calibration, and its calibrated
    /// tokens.
    async fn counted_view(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        state: &mut SessionState,
        options: ViewOptions,
        model: Option<&str>,
    ) -> Result<(View, u64), EngineError> {
        let view = self
            .view_with(self.sessions(), tenant, session, state, options)
            .await?;
        let counted = view.view.estimated_tokens();
        state.record_counted(model, counted);
        Ok((view, state.calibrated_tokens(model, counted)))
    }

    /// Builds the view of the session `sessions` holds on `state` (see [`crate::view`]).
    async fn view_with(
        &self,
        sessions: &dyn SessionStore,
        tenant: &Tenant,
        session: &SessionId,
        state: &mut SessionState,
        options: ViewOptions,
    ) -> Result<View, EngineError> {
        let config = self.config();
        let identity = match (options.with_memory, &options.identity) {
            (false, _) => None,
            (true, Some(identity)) => Some(identity.clone()),
            (true, None) => Some(self.memory_identity().map_err(|error| {
                EngineError::MemoryIdentity(Box::new(MemoryIdentityError {
                    user: config.memory.user.clone(),
                    agent: config.memory.agent.clone(),
                    source: error,
                }))
            })?),
        };
        let hook = identity.as_ref().map(|identity| RecallHook {
            store: self.memories(),
            embedder: config.embedder.as_deref(),
            identity,
            settings: &config.memory.recall,
            offer_tools: MEMORY_TOOL_NAMES.iter().any(|name| options.host_runs(name)),
            simulated_calls: true,
        });
        let request = ViewRequest {
            sessions,
            refs: self.refs(),
            tenant,
            session_id: session,
            policy: &config.policy,
            window_tokens: options.window_tokens.unwrap_or(config.window_tokens),
            now_ms: self.now_ms(),
            fetch_available: options.host_runs(FETCH_TOOL_NAME),
            // The engine API's host (OpenClaw) sends its system prompt apart; unknown here.
            host_prefix_tokens: 0,
            memory: hook.as_ref(),
            pending_prompt: options.pending_prompt.as_deref(),
        };
        let view = prepare_view(&request, state).await?;
        let tools = view
            .tools
            .iter()
            .filter(|tool| options.host_runs(&tool.name))
            .cloned()
            .collect();
        Ok(View {
            view,
            tools,
            identity,
        })
    }

    /// Brings a session's existing history in: a session file (its entry tree, ids and leaf
    /// kept) or its messages. Idempotent: what is already stored is not stored again, and a
    /// history that only grew appends what is new.
    pub async fn bootstrap(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        source: BootstrapSource,
    ) -> Result<Bootstrap, EngineError> {
        // Held so no call of the session runs in between, even when a file is imported.
        let slot = self.slot(tenant, session);
        let mut state = slot.lock().await;
        let _row = self.row_scope(tenant, session);
        let messages_before = self.message_count(tenant, session)?;
        let (already, import) = match source {
            BootstrapSource::File { text, path } => {
                let options = ImportOptions {
                    source: path,
                    session_id: Some(session.clone()),
                    now_ms: self.now_ms(),
                };
                let outcome = crate::blocking(|| {
                    import_transcript(self.sessions(), tenant, &text, &options)
                })?;
                let info = self.sessions().get(tenant, session)?;
                let already = match outcome.status {
                    ImportStatus::AlreadyImported => Some(
                        "already bootstrapped: the session holds this whole history".to_owned(),
                    ),
                    ImportStatus::Created | ImportStatus::Appended => None,
                };
                (already, Some((outcome, info)))
            }
            BootstrapSource::Messages {
                messages,
                source_format,
            } => {
                let outcome = ingest::sync_conversation(
                    &mut state,
                    self.sessions(),
                    tenant,
                    session,
                    &messages,
                    &source_format,
                )?;
                let already = (!outcome.created && outcome.appended == 0 && !outcome.forked)
                    .then(|| "already bootstrapped: the session holds these messages".to_owned());
                (already, None)
            }
        };
        Ok(Bootstrap {
            messages_before,
            messages_after: self.message_count(tenant, session)?,
            already,
            import,
        })
    }

    /// Imports a transcript file's content as a session of `tenant` (see
    /// [`import_transcript`]); the session's id comes from `options`, the file, or is derived.
    /// A cached state notices the new entries by itself (it checks the stored entry count).
    pub fn import(
        &self,
        tenant: &Tenant,
        text: &str,
        options: &ImportOptions,
    ) -> Result<ImportOutcome, EngineError> {
        Ok(crate::blocking(|| {
            import_transcript(self.sessions(), tenant, text, options)
        })?)
    }

    /// The tenant's sessions, most recently updated first, each with its context's size.
    pub fn list_sessions(&self, tenant: &Tenant) -> Result<Vec<SessionOverview>, EngineError> {
        self.sessions()
            .list(tenant)?
            .into_iter()
            .map(|info| self.overview(tenant, info))
            .collect()
    }

    /// The tenant's sessions, most recently updated first, as the store keeps them (one read,
    /// no session loaded): for listings that size only the sessions they show
    /// ([`Engine::session_overview`]).
    pub fn session_infos(&self, tenant: &Tenant) -> Result<Vec<SessionInfo>, EngineError> {
        Ok(self.sessions().list(tenant)?)
    }

    /// One stored session, with its context's size.
    pub fn session_overview(
        &self,
        tenant: &Tenant,
        session: &SessionId,
    ) -> Result<SessionOverview, EngineError> {
        let info = self.sessions().get(tenant, session)?;
        self.overview(tenant, info)
    }

    /// Sets a session's switches (pause compaction, pause offload; see [`SessionSwitches`]),
    /// kept with the session and honoured from its next call, on any server of the store. Taken
    /// under the session's lock, so a call running now finishes under the old switches.
    pub async fn set_switches(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        switches: SessionSwitches,
    ) -> Result<SessionInfo, EngineError> {
        let slot = self.slot(tenant, session);
        let mut state = slot.lock().await;
        let _row = self.row_scope(tenant, session);
        let info = self.sessions().set_switches(tenant, session, switches)?;
        state.switches = info.switches;
        Ok(info)
    }

    /// A page of the session's model calls and compactions, newest first, costed at the
    /// configured prices (see [`crate::timeline`]).
    pub fn call_timeline(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        page: usize,
        per_page: usize,
    ) -> Result<CallTimeline, EngineError> {
        let session = self.sessions().load(tenant, session)?;
        Ok(call_timeline(
            &session,
            &self.config().pricing,
            page,
            per_page,
        ))
    }

    /// Tokens and cost saved over the tenant's `max_sessions` most recently active sessions,
    /// per session and per day (see [`crate::timeline::savings`]).
    pub fn savings(&self, tenant: &Tenant, max_sessions: usize) -> Result<Savings, EngineError> {
        let infos = self.sessions().list(tenant)?;
        let not_read = infos.len().saturating_sub(max_sessions);
        let mut read = Vec::with_capacity(infos.len().min(max_sessions));
        for info in infos.into_iter().take(max_sessions) {
            let id = SessionId::parse(info.id.as_str()).map_err(|refused| {
                SessionError::Corrupt(format!("stored session id: {refused}"))
            })?;
            let session = self.sessions().load(tenant, &id)?;
            read.push((info, session));
        }
        let mut savings = savings(read, &self.config().pricing);
        savings.sessions_not_read = not_read;
        Ok(savings)
    }

    /// A session's calls, oldest first, as (raw history, input sent) token pairs: the savings
    /// chart's data.
    pub fn call_series(
        &self,
        tenant: &Tenant,
        session: &SessionId,
    ) -> Result<Vec<(u64, u64)>, EngineError> {
        let session = self.sessions().load(tenant, session)?;
        Ok(call_series(&session, &self.config().pricing))
    }

    /// A session's whole entry tree.
    pub fn load_session(
        &self,
        tenant: &Tenant,
        session: &SessionId,
    ) -> Result<Session, EngineError> {
        Ok(self.sessions().load(tenant, session)?)
    }

    fn overview(&self, tenant: &Tenant, info: SessionInfo) -> Result<SessionOverview, EngineError> {
        // A stored id was a `SessionId` when it was stored; one that no longer parses is damage.
        let session = SessionId::parse(info.id.as_str())
            .map_err(|refused| SessionError::Corrupt(format!("stored session id: {refused}")))?;
        let context = self.sessions().context(tenant, &session, None)?;
        Ok(SessionOverview {
            estimated_tokens: skald_core::tokens::estimate::estimate_messages_tokens(&context),
            info,
        })
    }

    /// Stored message count of a session (0 when it does not exist).
    fn message_count(&self, tenant: &Tenant, session: &SessionId) -> Result<u64, EngineError> {
        match self.sessions().get(tenant, session) {
            Ok(info) => Ok(info.message_count),
            Err(SessionError::NotFound { .. }) => Ok(0),
            Err(error) => Err(error.into()),
        }
    }
}
