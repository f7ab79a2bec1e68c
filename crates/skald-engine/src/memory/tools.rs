//! The executors of the five memory tools: the model's arguments in, one JSON answer out
//! (`{"success": true, …}` or `{"success": false, "error": …}` flagged as a tool error). Bad
//! arguments and store failures are answers the model can act on, never a Rust error or a
//! panic.

use serde_json::{Value, json};
use skald_core::ids::Tenant;
use skald_core::memory::query::QueryPlan;
use skald_core::memory::recall::{
    RecallLevel, Relevance, format_date, listing_result_text, memory_json, render_result_json,
    search_result_text,
};
use skald_core::memory::tools::{
    CommitArgs, LsArgs, MemoryToolCall, ReadArgs, SearchArgs, commit_uri, parse_search_docs,
    parse_tool_call,
};
use skald_core::memory::uri::MemoryUri;
use skald_llm::embed::Embedder;
use skald_store::memories::{
    AddOutcome, DuplicateKind, MemoryError, MemoryLevel, MemoryStore, NewMemory, SearchFilter,
    UpdateOutcome,
};

use super::MemoryIdentity;
use super::recall::{candidate_of, directory_listing, embed_one, search_visible};

/// How deep `memory_ls` lists.
const LS_DEPTH: usize = 3;

/// The most characters of a `memory_ls` answer.
const LS_MAX_CHARS: usize = 8000;

/// The answer to one memory tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryToolOutput {
    /// JSON for the tool result.
    pub text: String,
    /// Whether to flag the tool result as an error.
    pub is_error: bool,
}

impl MemoryToolOutput {
    fn ok(text: String) -> MemoryToolOutput {
        MemoryToolOutput {
            text,
            is_error: false,
        }
    }

    fn error(message: impl Into<String>) -> MemoryToolOutput {
        MemoryToolOutput {
            text: render_result_json(&[
                ("success", json!(false)),
                ("error", json!(message.into())),
            ]),
            is_error: true,
        }
    }
}

/// Runs `search_docs` with the model's `arguments` for `identity`: `search_memories` over the
/// resources (the documents added with `skald add`).
pub async fn execute_search_docs(
    store: &dyn MemoryStore,
    embedder: Option<&dyn Embedder>,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    arguments: &Value,
) -> MemoryToolOutput {
    match parse_search_docs(arguments) {
        Ok(args) => search(store, embedder, tenant, identity, args).await,
        Err(error) => MemoryToolOutput::error(error.to_string()),
    }
}

/// Runs memory tool `name` with the model's `arguments` (a JSON object, or a string holding
/// one) for `identity`, dating what `commit_memory` writes at `now_ms` (the engine's clock).
pub async fn execute_memory_tool(
    store: &dyn MemoryStore,
    embedder: Option<&dyn Embedder>,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    name: &str,
    arguments: &Value,
    now_ms: i64,
) -> MemoryToolOutput {
    let call = match parse_tool_call(name, arguments) {
        Ok(call) => call,
        Err(error) => return MemoryToolOutput::error(error.to_string()),
    };
    match call {
        MemoryToolCall::Search(args) => search(store, embedder, tenant, identity, args).await,
        MemoryToolCall::Ls(args) => ls(store, tenant, identity, &args),
        MemoryToolCall::Read(args) => read(store, tenant, identity, &args),
        MemoryToolCall::Commit(args) => {
            commit(store, embedder, tenant, identity, &args, now_ms).await
        }
        MemoryToolCall::Forget(uri) => forget(store, tenant, identity, &uri),
    }
}

fn not_visible(identity: &MemoryIdentity, uri: &MemoryUri) -> MemoryToolOutput {
    MemoryToolOutput::error(format!(
        "{uri} is outside this session's memory; you can use {}/…, {}/…, viking://resources/… \
         and viking://session/…",
        identity.user_root(),
        identity.agent_root()
    ))
}

/// A store error as the model should read it.
fn describe(error: &MemoryError) -> String {
    match error {
        MemoryError::NotFound { uri, .. } => format!(
            "no memory at {uri}; list what exists with memory_ls or find it with search_memories"
        ),
        MemoryError::InvalidUri(_)
        | MemoryError::InvalidInput { .. }
        | MemoryError::Forgotten { .. }
        | MemoryError::AlreadyExists { .. }
        | MemoryError::PathConflict { .. }
        | MemoryError::InBatch { .. }
        | MemoryError::Cancelled
        | MemoryError::DimensionMismatch { .. }
        | MemoryError::InvalidSettings(_)
        | MemoryError::Store(_)
        | MemoryError::Storage { .. }
        | MemoryError::Corrupt(_) => error.to_string(),
    }
}

async fn search(
    store: &dyn MemoryStore,
    embedder: Option<&dyn Embedder>,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    args: SearchArgs,
) -> MemoryToolOutput {
    if let Some(path) = &args.path
        && !identity.can_see(path)
        && !identity.is_visible_ancestor(path)
    {
        return not_visible(identity, path);
    }
    let vector = match embedder {
        Some(embedder) => embed_one(embedder, &args.query).await.unwrap_or(None),
        None => None,
    };
    let filter = SearchFilter {
        categories: args.category.into_iter().collect(),
        under: args.path.clone().filter(|path| identity.can_see(path)),
        ..SearchFilter::default()
    };
    // More than asked: hits of other users in the tenant are filtered out after the search.
    let limit = args.max_results.saturating_mul(3);
    match search_visible(store, tenant, identity, &args.query, vector, filter, limit) {
        Ok(hits) => {
            let plan = QueryPlan::new(&args.query);
            let memories = hits
                .iter()
                .take(args.max_results)
                .map(|hit| {
                    let candidate = candidate_of(hit);
                    let relevance = Relevance::of(&candidate, plan.terms());
                    memory_json(&candidate, RecallLevel::L0, Some(relevance.score()))
                })
                .collect();
            MemoryToolOutput::ok(search_result_text(memories))
        }
        Err(error) => MemoryToolOutput::error(format!("search failed: {}", describe(&error))),
    }
}

fn ls(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    args: &LsArgs,
) -> MemoryToolOutput {
    if !identity.can_see(&args.path) && !identity.is_visible_ancestor(&args.path) {
        return not_visible(identity, &args.path);
    }
    match directory_listing(store, tenant, identity, &args.path, LS_DEPTH, args.category) {
        Ok(entries) => MemoryToolOutput::ok(listing_result_text(
            args.path.as_str(),
            &entries,
            LS_MAX_CHARS,
        )),
        Err(error) => MemoryToolOutput::error(format!("listing failed: {}", describe(&error))),
    }
}

fn read(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    args: &ReadArgs,
) -> MemoryToolOutput {
    if !identity.can_see(&args.uri) {
        return not_visible(identity, &args.uri);
    }
    if !args.uri.is_entry_location() {
        return MemoryToolOutput::error(format!(
            "{} is a directory; list it with memory_ls, then read one of its memories",
            args.uri
        ));
    }
    match store.get(tenant, &args.uri) {
        Ok(memory) => {
            let level = match args.level {
                RecallLevel::L0 => MemoryLevel::L0,
                RecallLevel::L1 => MemoryLevel::L1,
                RecallLevel::L2 => MemoryLevel::L2,
            };
            MemoryToolOutput::ok(render_result_json(&[
                ("success", json!(true)),
                ("uri", json!(memory.uri)),
                ("category", json!(memory.category)),
                ("version", json!(memory.version)),
                ("created_at", json!(format_date(memory.created_at_ms))),
                ("updated_at", json!(format_date(memory.updated_at_ms))),
                (args.level.field(), json!(memory.text(level))),
            ]))
        }
        Err(error) => MemoryToolOutput::error(describe(&error)),
    }
}

async fn commit(
    store: &dyn MemoryStore,
    embedder: Option<&dyn Embedder>,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    args: &CommitArgs,
    now_ms: i64,
) -> MemoryToolOutput {
    let uri = match commit_uri(args, identity.user(), identity.agent(), now_ms) {
        Ok(uri) => uri,
        Err(error) => return MemoryToolOutput::error(error.to_string()),
    };
    let mut memory = NewMemory::new(uri.clone(), args.content.clone())
        .with_priority(args.priority)
        .created_at(now_ms);
    if let Some(embedder) = embedder
        && let Ok(Some(vector)) = embed_one(embedder, &args.content).await
    {
        memory = memory.with_embedding(vector);
    }
    let answer = |outcome: &str, uri: &MemoryUri, extra: Vec<(&str, Value)>| {
        let mut fields = vec![
            ("success", json!(true)),
            ("outcome", json!(outcome)),
            ("uri", json!(uri)),
        ];
        fields.extend(extra);
        MemoryToolOutput::ok(render_result_json(&fields))
    };
    match store.add(tenant, memory.clone()) {
        Ok(AddOutcome::Added(added)) => answer("added", &added.uri, Vec::new()),
        Ok(AddOutcome::Merged(merge)) => {
            let kind = match merge.kind {
                DuplicateKind::Exact => "exact",
                DuplicateKind::Near { .. } => "near",
            };
            answer(
                "merged",
                &merge.into.uri,
                vec![
                    ("duplicate", json!(kind)),
                    (
                        "note",
                        json!(
                            "already remembered: the memory above holds it, nothing new was stored"
                        ),
                    ),
                ],
            )
        }
        Err(MemoryError::AlreadyExists { .. }) if args.memory_type.one_per_topic() => {
            match store.update(tenant, memory) {
                Ok(UpdateOutcome::Updated { memory, previous }) => answer(
                    "updated",
                    &memory.uri,
                    vec![
                        ("version", json!(memory.version)),
                        ("previous", json!(previous.l0)),
                    ],
                ),
                Ok(UpdateOutcome::Unchanged(memory)) => {
                    answer("unchanged", &memory.uri, Vec::new())
                }
                Err(error) => MemoryToolOutput::error(describe(&error)),
            }
        }
        Err(error) => MemoryToolOutput::error(describe(&error)),
    }
}

fn forget(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    uri: &MemoryUri,
) -> MemoryToolOutput {
    if !identity.can_forget(uri) {
        return MemoryToolOutput::error(format!(
            "{uri} cannot be forgotten from this session; only memories under {}/… and {}/… can",
            identity.user_root(),
            identity.agent_root()
        ));
    }
    if !uri.is_entry_location() {
        return MemoryToolOutput::error(format!(
            "{uri} is a directory; forget its memories one by one (memory_ls lists them)"
        ));
    }
    match store.forget(tenant, uri) {
        Ok(memory) => MemoryToolOutput::ok(render_result_json(&[
            ("success", json!(true)),
            ("forgotten", json!(memory.uri)),
            ("version", json!(memory.version)),
        ])),
        Err(error) => MemoryToolOutput::error(describe(&error)),
    }
}
