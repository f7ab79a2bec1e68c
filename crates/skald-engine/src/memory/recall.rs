//! Per-turn recall against a store, and the session-start snapshot (profile, tool memories,
//! directory listing) a caller keeps for the whole session.

use serde::Serialize;
use skald_core::ids::Tenant;
use skald_core::memory::recall::{
    CLI_MEMORY_SECTION, DropReason, ListingEntry, ProfileEntry, RecallCandidate, RecallLevel,
    RecallSettings, Relevance, SkipReason, directory_messages, insert_after_first_user,
    insert_after_latest_user, recall_messages, recall_query, render_profile_section,
    select_memories,
};
use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use skald_core::memory::usage::{is_system_memory, render_tool_memory_section};
use skald_core::message::Message;
use skald_llm::embed::Embedder;
use skald_store::memories::{
    DirEntryKind, MemoryError, MemoryStore, SearchFilter, SearchHit, SearchQuery, TreeNode,
};
use tokio_util::sync::CancellationToken;

use super::MemoryIdentity;
use super::usage::load_tool_stats;

/// How many hits a recall asks the store for, per result it may inject: the threshold and the
/// visibility filter drop some, and the next ones take their place.
const CANDIDATES_PER_RESULT: usize = 3;

/// At most this many tools are described in the system prompt.
const MAX_TOOLS_IN_PROMPT: usize = 10;

/// A memory recall injected.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecalledMemory {
    /// The memory's `viking://` URI, as the model sees it in the injected result.
    pub uri: String,
    /// How much of it was injected: abstract, overview or full content, the most that fit the
    /// budget.
    pub level: RecallLevel,
    /// How well it matched the query: matched terms, their coverage and, with an embedder, the
    /// cosine.
    pub relevance: Relevance,
}

/// A memory a search found that recall did not inject.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DroppedMemory {
    /// The memory's `viking://` URI.
    pub uri: String,
    /// Why it was left out: below the relevance thresholds, over `max_results` or over the token
    /// budget.
    pub reason: DropReason,
    /// How well it matched the query.
    pub relevance: Relevance,
}

/// What a recall did, for logs and `skald` reports.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct RecallReport {
    /// The query searched for (none when skipped).
    pub query: Option<String>,
    /// Why there was no search.
    pub skipped: Option<SkipReason>,
    /// The search failed; nothing was injected and the turn goes on.
    pub error: Option<String>,
    /// The query could not be embedded; the search ran on text alone.
    pub embedding_error: Option<String>,
    /// Visible hits the store returned.
    pub candidates: usize,
    /// The memories injected, in the order the result shows them.
    pub kept: Vec<RecalledMemory>,
    /// Visible hits that were not injected, each with its reason.
    pub dropped: Vec<DroppedMemory>,
    /// Estimated tokens of the injected memories.
    pub tokens_injected: u64,
}

/// The messages of one model call, with the recall injected, and what recall did.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallOutcome {
    /// The caller's messages with a simulated `search_memories` call and its result right after
    /// the latest user message (unchanged when nothing was injected). For this call only: never
    /// store them in the session.
    pub messages: Vec<Message>,
    /// What the recall searched for, kept and dropped.
    pub report: RecallReport,
}

/// Recalls memories for the next model call over `messages` (seed 002, Component 2, Part 2):
/// skip greetings and short messages, build the query from the last user messages, search the
/// visible memories (text, and vectors when `embedder` is given), keep the relevant ones within
/// the budget, and inject them as a simulated tool call. A failing search or embedder never
/// fails the turn: the report says what happened and nothing is injected.
pub async fn recall_for_turn(
    store: &dyn MemoryStore,
    embedder: Option<&dyn Embedder>,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    settings: &RecallSettings,
    messages: Vec<Message>,
) -> RecallOutcome {
    recall_for_turn_memo(
        &mut None, store, embedder, tenant, identity, settings, messages,
    )
    .await
}

/// What one turn's recall chose, kept so that every model call of the same turn (the same
/// query: the agent's tool loop after one user message) gets the same memories — the same
/// bytes, so the prompt cache holds — without searching again. A new user message is a new
/// query, and a new search.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallMemo {
    query: String,
    injection: Vec<Message>,
    report: RecallReport,
}

impl RecallMemo {
    /// Approximate bytes held: the query and the injected messages (the report's counts and
    /// short strings are left out).
    pub(crate) fn approx_bytes(&self) -> usize {
        std::mem::size_of::<RecallMemo>()
            + self.query.len()
            + crate::footprint::messages_bytes(&self.injection)
    }
}

/// [`recall_for_turn`] that reuses `memo` when the query is the one it was made for, and
/// keeps the new search's choice there otherwise (a search that failed is not kept).
pub async fn recall_for_turn_memo(
    memo: &mut Option<RecallMemo>,
    store: &dyn MemoryStore,
    embedder: Option<&dyn Embedder>,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    settings: &RecallSettings,
    messages: Vec<Message>,
) -> RecallOutcome {
    let (injection, report) =
        recall_injection_memo(memo, store, embedder, tenant, identity, settings, &messages).await;
    RecallOutcome {
        messages: inject(messages, &injection),
        report,
    }
}

/// What [`recall_for_turn_memo`] would inject into `messages` (empty: nothing), and its
/// report, for a caller that places the injection itself (the view, which keeps every turn's
/// recall where it went: [`skald_core::memory::recall::KeptRecalls`]).
pub(crate) async fn recall_injection_memo(
    memo: &mut Option<RecallMemo>,
    store: &dyn MemoryStore,
    embedder: Option<&dyn Embedder>,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    settings: &RecallSettings,
    messages: &[Message],
) -> (Vec<Message>, RecallReport) {
    let query = match recall_query(messages, settings) {
        Ok(query) => query,
        Err(reason) => {
            let report = RecallReport {
                skipped: Some(reason),
                ..RecallReport::default()
            };
            return (Vec::new(), report);
        }
    };
    if let Some(kept) = memo.as_ref().filter(|kept| kept.query == query) {
        return (kept.injection.clone(), kept.report.clone());
    }
    let (injection, report) =
        search_and_select(store, embedder, tenant, identity, settings, &query).await;
    if report.error.is_none() && report.embedding_error.is_none() {
        *memo = Some(RecallMemo {
            query,
            injection: injection.clone(),
            report: report.clone(),
        });
    }
    (injection, report)
}

fn inject(messages: Vec<Message>, injection: &[Message]) -> Vec<Message> {
    if injection.is_empty() {
        messages
    } else {
        insert_after_latest_user(messages, injection.to_vec())
    }
}

/// The search for `query` and the memories kept: the messages to inject (none when nothing
/// was kept) and the report.
async fn search_and_select(
    store: &dyn MemoryStore,
    embedder: Option<&dyn Embedder>,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    settings: &RecallSettings,
    query: &str,
) -> (Vec<Message>, RecallReport) {
    let mut report = RecallReport {
        query: Some(query.to_owned()),
        ..RecallReport::default()
    };
    let vector = match embedder {
        Some(embedder) => match embed_one(embedder, query).await {
            Ok(vector) => vector,
            Err(error) => {
                report.embedding_error = Some(error);
                None
            }
        },
        None => None,
    };
    let filter = SearchFilter {
        categories: recall_categories(settings),
        ..SearchFilter::default()
    };
    let limit = settings
        .max_results
        .saturating_mul(CANDIDATES_PER_RESULT)
        .max(10);
    let hits = match search_visible(store, tenant, identity, query, vector, filter, limit) {
        Ok(hits) => hits,
        Err(error) => {
            report.error = Some(error.to_string());
            return (Vec::new(), report);
        }
    };
    let candidates: Vec<RecallCandidate> = hits.iter().map(candidate_of).collect();
    report.candidates = candidates.len();
    let selection = select_memories(&candidates, query, settings);
    report.kept = selection
        .kept
        .iter()
        .map(|entry| RecalledMemory {
            uri: entry.candidate.uri.clone(),
            level: entry.level,
            relevance: entry.relevance,
        })
        .collect();
    report.dropped = selection
        .dropped
        .iter()
        .map(|(uri, reason, relevance)| DroppedMemory {
            uri: uri.clone(),
            reason: *reason,
            relevance: *relevance,
        })
        .collect();
    if selection.kept.is_empty() {
        return (Vec::new(), report);
    }
    report.tokens_injected = selection.tokens;
    (recall_messages(query, settings, &selection), report)
}

/// The categories per-turn recall searches: everything a person would call a memory. Tool
/// statistics and skill memories have their own injection; the profile is in the system prompt
/// already when profile injection is on.
fn recall_categories(settings: &RecallSettings) -> Vec<MemoryCategory> {
    MemoryCategory::ALL
        .into_iter()
        .filter(|category| match category {
            MemoryCategory::Tools | MemoryCategory::Skills => false,
            MemoryCategory::Profile => !settings.profile,
            MemoryCategory::Preferences
            | MemoryCategory::Entities
            | MemoryCategory::Events
            | MemoryCategory::Cases
            | MemoryCategory::Patterns
            | MemoryCategory::Resources
            | MemoryCategory::Session => true,
        })
        .collect()
}

/// One vector for `text`, or why not.
pub(super) async fn embed_one(
    embedder: &dyn Embedder,
    text: &str,
) -> Result<Option<Vec<f32>>, String> {
    let cancel = CancellationToken::new();
    let vectors = embedder
        .embed(&[text.to_owned()], &cancel)
        .await
        .map_err(|error| error.to_string())?;
    Ok(vectors
        .into_iter()
        .next()
        .filter(|vector| !vector.is_empty()))
}

/// A search of what `identity` may see. A query vector whose dimensions match no stored vector
/// (the embedding model changed) is dropped and the search runs on text.
pub(super) fn search_visible(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    text: &str,
    vector: Option<Vec<f32>>,
    filter: SearchFilter,
    limit: usize,
) -> Result<Vec<SearchHit>, MemoryError> {
    let mut query = SearchQuery::text(text, limit).with_filter(filter);
    query.vector = vector;
    let hits = match crate::blocking(|| store.search(tenant, &query)) {
        Err(MemoryError::DimensionMismatch { .. }) => {
            query.vector = None;
            crate::blocking(|| store.search(tenant, &query))?
        }
        Err(MemoryError::InvalidInput { field: "query", .. }) => Vec::new(),
        other => other?,
    };
    Ok(hits
        .into_iter()
        .filter(|hit| identity.can_see(&hit.memory.uri))
        .collect())
}

pub(super) fn candidate_of(hit: &SearchHit) -> RecallCandidate {
    RecallCandidate {
        uri: hit.memory.uri.to_string(),
        category: hit.memory.category.name().to_owned(),
        l0: hit.memory.l0.clone(),
        l1: hit.memory.l1.clone(),
        l2: hit.memory.l2.clone(),
        created_at_ms: hit.memory.created_at_ms,
        cosine: hit.cosine,
        text_relevance: hit.text_relevance,
    }
}

/// What a session is given once, at its start, and keeps for every request: the same bytes each
/// time, so the provider's prompt cache holds (seed 002: the profile "injected once at session
/// start"; the directory "at session start").
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionMemory {
    /// The `## User Profile` and `## Tool Usage Memories` sections, to append to the system
    /// prompt.
    pub system_prompt_addition: Option<String>,
    /// A simulated `memory_ls {"path": "viking://"}` and its result.
    pub directory_messages: Vec<Message>,
    /// What the session-start injection found, and the reads that failed.
    pub report: SessionMemoryReport,
}

impl SessionMemory {
    /// Approximate bytes held: the system prompt addition and the directory listing (the
    /// report's counts and error strings are left out).
    pub(crate) fn approx_bytes(&self) -> usize {
        std::mem::size_of::<SessionMemory>()
            + self.system_prompt_addition.as_ref().map_or(0, String::len)
            + crate::footprint::messages_bytes(&self.directory_messages)
    }

    /// `messages` with the directory listing right after the first user message.
    pub fn apply(&self, messages: Vec<Message>) -> Vec<Message> {
        insert_after_first_user(messages, self.directory_messages.clone())
    }
}

/// What the session-start injection found.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct SessionMemoryReport {
    /// Entries under the user's `memories/profile` put in the `## User Profile` section.
    pub profile_entries: usize,
    /// Tools of the agent whose statistics were loaded (at most 10 of them are described in the
    /// system prompt).
    pub tools: usize,
    /// Nodes in the `memory_ls` listing of `viking://`: none when the store holds nothing the
    /// user or the agent wrote (only skald's tool statistics and skill usage counts).
    pub directory_entries: usize,
    /// Whether the system prompt names the memory commands (`[memory] teach_cli`).
    pub cli_taught: bool,
    /// Reads that failed; what they would have added is left out.
    pub errors: Vec<String>,
}

/// Builds the session-start snapshot for `identity` (see [`SessionMemory`]). The directory
/// listing is left out when nothing in it was written by the user or the agent. Store failures
/// leave their part out and are reported; they never fail the session.
pub fn session_start_memory(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    settings: &RecallSettings,
) -> SessionMemory {
    let mut report = SessionMemoryReport::default();
    let mut sections: Vec<String> = Vec::new();
    if settings.profile {
        match profile_entries(store, tenant, identity) {
            Ok(entries) => {
                report.profile_entries = entries.len();
                sections.extend(render_profile_section(&entries, settings.profile_max_chars));
            }
            Err(error) => report.errors.push(format!("profile: {error}")),
        }
    }
    if settings.tool_memory {
        match load_tool_stats(store, tenant, identity.agent()) {
            Ok((stats, problems)) => {
                report.tools = stats.len();
                report.errors.extend(problems);
                sections.extend(render_tool_memory_section(&stats, MAX_TOOLS_IN_PROMPT));
            }
            Err(error) => report.errors.push(format!("tool memories: {error}")),
        }
    }
    if settings.teach_cli {
        report.cli_taught = true;
        sections.push(CLI_MEMORY_SECTION.to_owned());
    }
    let mut directory = Vec::new();
    let worth_listing = if settings.directory {
        holds_authored_memories(store, tenant, identity).unwrap_or_else(|error| {
            report.errors.push(format!("directory: {error}"));
            false
        })
    } else {
        false
    };
    if worth_listing {
        match directory_listing(
            store,
            tenant,
            identity,
            &MemoryUri::root(),
            settings.directory_depth,
            None,
        ) {
            Ok(entries) if !entries.is_empty() => {
                report.directory_entries = entries.len();
                directory = directory_messages(&entries, settings.directory_max_chars);
            }
            Ok(_) => {}
            Err(error) => report.errors.push(format!("directory: {error}")),
        }
    }
    SessionMemory {
        system_prompt_addition: (!sections.is_empty()).then(|| sections.join("\n\n")),
        directory_messages: directory,
        report,
    }
}

/// How deep [`holds_authored_memories`] looks below the agent's directory: deep enough to reach
/// a skill's `stats.json` (`skills/{skill}/stats.json`) and the entries of `tools/`.
const AUTHORED_SCAN_DEPTH: usize = 3;

/// Whether anything `identity` sees was written by the user or the agent (see
/// [`is_system_memory`]). A listing of skald's own tool statistics tells the model nothing it
/// can use, and would cost every new session its tokens: the session-start `memory_ls` is only
/// given when this holds.
fn holds_authored_memories(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    identity: &MemoryIdentity,
) -> Result<bool, MemoryError> {
    // Below these, everything is the user's or came from a conversation or a document.
    for root in [
        identity.user_root().clone(),
        MemoryUri::root().join("resources")?,
        MemoryUri::root().join("session")?,
    ] {
        if let DirEntryKind::Directory { entries } = store.tree(tenant, &root, 0)?.entry.kind
            && entries > 0
        {
            return Ok(true);
        }
    }
    let tree = store.tree(tenant, identity.agent_root(), AUTHORED_SCAN_DEPTH)?;
    Ok(holds_authored(&tree))
}

/// Whether `node` is, or holds, an entry that is not a system memory. A directory at the scan's
/// depth limit holds authored entries unless it is one of the tool statistics' directories.
fn holds_authored(node: &TreeNode) -> bool {
    let uri = &node.entry.uri;
    match &node.entry.kind {
        DirEntryKind::Entry { .. } => !is_system_memory(uri),
        DirEntryKind::Directory { entries } => {
            if *entries == 0 {
                false
            } else if node.children.is_empty() {
                uri.category() != Some(MemoryCategory::Tools)
            } else {
                node.children.iter().any(holds_authored)
            }
        }
    }
}

fn profile_entries(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    identity: &MemoryIdentity,
) -> Result<Vec<ProfileEntry>, MemoryError> {
    let dir = identity.user_root().join("memories/profile")?;
    let tree = store.tree(tenant, &dir, 8)?;
    let mut out = Vec::new();
    let mut stack = vec![&tree];
    while let Some(node) = stack.pop() {
        match &node.entry.kind {
            DirEntryKind::Entry { l0, .. } => {
                let uri = &node.entry.uri;
                let text = if uri.name() == Some(skald_core::memory::recall::PROFILE_FILE) {
                    store.get(tenant, uri)?.l2
                } else {
                    l0.clone()
                };
                out.push(ProfileEntry {
                    uri: uri.to_string(),
                    text,
                });
            }
            DirEntryKind::Directory { .. } => stack.extend(node.children.iter().rev()),
        }
    }
    Ok(out)
}

/// The listing of `path` as `memory_ls` shows it: each node once, parents before children,
/// `depth` levels deep, only what `identity` may see (a directory above it, such as
/// `viking://`, lists the user's and agent's directories, the resources and the sessions, each
/// `depth` levels deep; an invisible path lists nothing), and
/// with `category`, only that category's entries and the directories leading to them.
pub fn directory_listing(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    path: &MemoryUri,
    depth: usize,
    category: Option<MemoryCategory>,
) -> Result<Vec<ListingEntry>, MemoryError> {
    let roots: Vec<MemoryUri> = if identity.can_see(path) {
        vec![path.clone()]
    } else if identity.is_visible_ancestor(path) {
        let mut roots = Vec::new();
        for root in [
            identity.user_root().clone(),
            identity.agent_root().clone(),
            MemoryUri::root().join("resources")?,
            MemoryUri::root().join("session")?,
        ] {
            if path.contains(&root) {
                roots.push(root);
            }
        }
        roots
    } else {
        Vec::new()
    };
    let mut out = Vec::new();
    for root in roots {
        let tree = store.tree(tenant, &root, depth)?;
        flatten(&tree, category, &mut out);
    }
    Ok(out)
}

fn flatten(node: &TreeNode, category: Option<MemoryCategory>, out: &mut Vec<ListingEntry>) {
    let uri = &node.entry.uri;
    match &node.entry.kind {
        DirEntryKind::Directory { entries } => {
            if *entries == 0 {
                return;
            }
            let wanted = category.is_none_or(|wanted| uri.category().is_none_or(|c| c == wanted));
            if !wanted {
                return;
            }
            out.push(ListingEntry::Directory {
                uri: uri.to_string(),
                entries: *entries,
            });
            for child in &node.children {
                flatten(child, category, out);
            }
        }
        DirEntryKind::Entry {
            category: entry_category,
            l0,
            ..
        } => {
            if category.is_none_or(|wanted| wanted == *entry_category) {
                out.push(ListingEntry::Entry {
                    uri: uri.to_string(),
                    abstract_text: l0.clone(),
                });
            }
        }
    }
}
