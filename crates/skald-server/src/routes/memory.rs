//! The memory API: the caller's tenant's long-term memories under `viking://` URIs, with the
//! semantics and the output fields of the `skald` memory commands (both run
//! `skald_engine::memory::manage`).
//!
//! - `GET /v1/memory/ls`, `GET /v1/memory/tree`, `GET /v1/memory/read` — browse and read.
//! - `POST /v1/memory/search` — BM25 (and vectors with an embedder), fused.
//! - `POST /v1/memory/remember`, `POST /v1/memory/forget` — write by hand.
//! - `POST /v1/memory/resources` — add a document, or a directory of them (chunked, with
//!   `_overview` entries).
//! - `GET /v1/memory/history` — the tenant's latest writes, or one entry's versions.
//!
//! The user and the agent default to the server's `[memory]` user and agent; a request may name
//! others of the same tenant. Every URI is parsed before the store is touched.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use skald_core::memory::tools::MemoryType;
use skald_core::memory::uri::{MAX_DEPTH, MemoryCategory, MemoryUri};
use skald_engine::memory::MemoryIdentity;
use skald_engine::memory::manage::{
    self, AddReport, Document, ForgetReport, LsRow, ReadReport, RememberReport, SearchReport,
    Skipped, VersionRow, WriteRow,
};
use skald_engine::storage::{MemoryLevel, SearchFilter, TreeNode};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, ApiQuery, failure};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// Search results per request at most.
pub const MAX_SEARCH_LIMIT: usize = 100;

/// History rows per request at most.
pub const MAX_HISTORY_LIMIT: usize = 1_000;

/// `tree` levels by default.
const DEFAULT_TREE_DEPTH: usize = 3;

/// The memory API's routes with their OpenAPI operations: ls, tree, read, search, remember, forget,
/// resources and history.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(ls))
        .routes(routes!(tree))
        .routes(routes!(read))
        .routes(routes!(search))
        .routes(routes!(remember))
        .routes(routes!(forget))
        .routes(routes!(add_resource))
        .routes(routes!(history))
}

/// Parses a URI field, naming it.
pub(crate) fn parse_uri(text: &str, field: &str) -> Result<MemoryUri, ApiError> {
    MemoryUri::parse(text).map_err(|error| {
        ApiError::BadRequest(format!("{field} {text:?} is not a memory URI: {error}"))
    })
}

/// The identity a request acts for.
pub(crate) fn identity(
    state: &AppState,
    user: Option<&str>,
    agent: Option<&str>,
) -> Result<MemoryIdentity, ApiError> {
    let memory = &state.engine.config().memory;
    let user = user.unwrap_or(&memory.user);
    let agent = agent.unwrap_or(&memory.agent);
    MemoryIdentity::new(user, agent).map_err(|error| {
        ApiError::BadRequest(format!(
            "user {user:?} and agent {agent:?} must each be one URI segment: {error}"
        ))
    })
}

fn category(text: &str) -> Result<MemoryCategory, ApiError> {
    manage::parse_category(text).map_err(failure)
}

// ---------------------------------------------------------------------------------------------
// ls, tree, read

/// `GET /v1/memory/ls` parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LsQuery {
    /// The directory to list (default: `viking://`, or the category's directory).
    pub uri: Option<String>,
    /// List this category's directory for the user/agent instead: profile, preferences,
    /// entities, events, cases, patterns, skills, tools, resources, session.
    pub category: Option<String>,
    /// With `category`: the user whose directory is listed (default: the server's `[memory]` user).
    pub user: Option<String>,
    /// With `category`: the agent whose directory is listed (default: the server's `[memory]`
    /// agent).
    pub agent: Option<String>,
}

/// The directories and entries directly in a directory, directories first.
#[utoipa::path(get, path = "/v1/memory/ls", tag = "memory", params(LsQuery),
    responses(
        (status = 200, description = "The listing (empty when nothing is there)", body = Vec<LsRow>),
        (status = 400, description = "Bad URI or category, or both given"),
    ))]
async fn ls(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<LsQuery>,
) -> Result<Json<Vec<LsRow>>, ApiError> {
    // Checked whatever else the query says, as on every other route: a bad name is refused, not
    // ignored.
    let identity = identity(&state, query.user.as_deref(), query.agent.as_deref())?;
    let dir = match (&query.uri, &query.category) {
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest(
                "give either `uri` or `category`, not both".to_owned(),
            ));
        }
        (Some(text), None) => parse_uri(text, "uri")?,
        (None, Some(name)) => manage::category_dir(&identity, category(name)?)
            .map_err(|error| ApiError::BadRequest(error.to_string()))?,
        (None, None) => MemoryUri::root(),
    };
    let rows = state
        .engine
        .list_memories(&caller.tenant, &dir)
        .map_err(failure)?;
    Ok(Json(rows))
}

/// `GET /v1/memory/tree` parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TreeQuery {
    /// The directory to show (default: `viking://`).
    pub uri: Option<String>,
    /// Levels below it (default 3).
    pub depth: Option<usize>,
}

/// A directory and everything below it, to a depth: each node with its `uri`, `type`
/// (`directory` with `entries`, or `entry` with `category`, `l0`, `priority`,
/// `updated_at_ms`) and `children`.
#[utoipa::path(get, path = "/v1/memory/tree", tag = "memory", params(TreeQuery),
    responses(
        (status = 200, description = "The tree", body = Object),
        (status = 400, description = "Bad URI or depth"),
    ))]
async fn tree(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<TreeQuery>,
) -> Result<Json<TreeNode>, ApiError> {
    let dir = match &query.uri {
        Some(text) => parse_uri(text, "uri")?,
        None => MemoryUri::root(),
    };
    let depth = query.depth.unwrap_or(DEFAULT_TREE_DEPTH);
    if depth > MAX_DEPTH {
        return Err(ApiError::BadRequest(format!(
            "depth is {depth}; a memory URI has at most {MAX_DEPTH} levels"
        )));
    }
    let node = state
        .engine
        .memory_tree(&caller.tenant, &dir, depth)
        .map_err(failure)?;
    Ok(Json(node))
}

/// Which level `read` returns.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The abstract (at most 256 characters).
    L0,
    /// The overview (at most 4,000 characters).
    L1,
    /// The full content.
    #[default]
    L2,
}

impl From<Level> for MemoryLevel {
    fn from(level: Level) -> MemoryLevel {
        match level {
            Level::L0 => MemoryLevel::L0,
            Level::L1 => MemoryLevel::L1,
            Level::L2 => MemoryLevel::L2,
        }
    }
}

/// `GET /v1/memory/read` parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReadQuery {
    /// The entry (a directory written by resources/`skald add` reads its `_overview`).
    pub uri: String,
    /// l0, l1 or l2 (default).
    #[serde(default)]
    #[param(inline)]
    pub level: Level,
}

/// One level of an entry.
#[utoipa::path(get, path = "/v1/memory/read", tag = "memory", params(ReadQuery),
    responses(
        (status = 200, description = "The text and the entry's metadata", body = ReadReport),
        (status = 400, description = "Bad URI or level"),
        (status = 404, description = "No live entry there"),
    ))]
async fn read(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ReadQuery>,
) -> Result<Json<ReadReport>, ApiError> {
    let uri = parse_uri(&query.uri, "uri")?;
    let report = state
        .engine
        .read_memory(&caller.tenant, &uri, query.level.into())
        .map_err(failure)?;
    Ok(Json(report))
}

// ---------------------------------------------------------------------------------------------
// search

/// A category name, or several.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Categories {
    /// One name, or names separated by commas.
    One(String),
    /// Several names, each one category.
    Many(Vec<String>),
}

/// `POST /v1/memory/search`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// What to look for, in natural language.
    pub query: String,
    /// Only these categories. Default: every category but resources (with `path`: every
    /// category).
    pub category: Option<Categories>,
    /// 1 to 100 results (default 10).
    pub limit: Option<usize>,
    /// Only at or below this URI (e.g. `viking://resources/my-project/docs`).
    pub path: Option<String>,
    /// The user whose memories are searched, besides the resources and session archives (default:
    /// the server's `[memory]` user).
    pub user: Option<String>,
    /// The agent whose memories are searched, besides the resources and session archives (default:
    /// the server's `[memory]` agent).
    pub agent: Option<String>,
}

/// Searches the memories the user and agent may see (their own, the resources and the session
/// archives): BM25 over the levels and the path, a date-aware ranking, a directory ranking and,
/// with an embedder, vectors, fused by reciprocal rank.
#[utoipa::path(post, path = "/v1/memory/search", tag = "memory", request_body = SearchRequest,
    responses(
        (status = 200, description = "The results, best first", body = SearchReport),
        (status = 400, description = "Empty query, bad category, limit or path"),
    ))]
async fn search(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<SearchRequest>,
) -> Result<Json<SearchReport>, ApiError> {
    let identity = identity(&state, body.user.as_deref(), body.agent.as_deref())?;
    let limit = body.limit.unwrap_or(10);
    if !(1..=MAX_SEARCH_LIMIT).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "limit is {limit}; it is 1 to {MAX_SEARCH_LIMIT}"
        )));
    }
    let under = body
        .path
        .as_deref()
        .map(|text| parse_uri(text, "path"))
        .transpose()?;
    let names: Vec<String> = match body.category {
        None => Vec::new(),
        Some(Categories::One(text)) => text.split(',').map(str::to_owned).collect(),
        Some(Categories::Many(names)) => names,
    };
    let categories = if names.is_empty() {
        if under.is_some() {
            Vec::new()
        } else {
            manage::memory_categories()
        }
    } else {
        names
            .iter()
            .map(|name| category(name))
            .collect::<Result<Vec<_>, _>>()?
    };
    let filter = SearchFilter {
        categories,
        under,
        ..SearchFilter::default()
    };
    let report = state
        .engine
        .search_memories(&caller.tenant, &identity, &body.query, filter, limit)
        .await
        .map_err(failure)?;
    Ok(Json(report))
}

// ---------------------------------------------------------------------------------------------
// remember, forget

/// `POST /v1/memory/remember`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberRequest {
    /// One fact, preference or lesson in plain words.
    pub content: String,
    /// profile, preferences, entities (default), events (the user's); cases, patterns (the
    /// agent's). Singular names are accepted too.
    #[serde(rename = "type")]
    pub memory_type: Option<String>,
    /// 0 (lowest) to 10 (highest); default 5.
    pub priority: Option<u8>,
    /// The user the memory is remembered for (default: the server's `[memory]` user).
    pub user: Option<String>,
    /// The agent a case or pattern is remembered for (default: the server's `[memory]` agent).
    pub agent: Option<String>,
}

/// Remembers something for the user (or the agent, for cases and patterns); a duplicate of a
/// live memory is merged into it.
#[utoipa::path(post, path = "/v1/memory/remember", tag = "memory", request_body = RememberRequest,
    responses(
        (status = 200, description = "Where it was stored, or merged", body = RememberReport),
        (status = 400, description = "Empty content, bad type or priority"),
    ))]
async fn remember(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<RememberRequest>,
) -> Result<Json<RememberReport>, ApiError> {
    let identity = identity(&state, body.user.as_deref(), body.agent.as_deref())?;
    let category = match body.memory_type.as_deref() {
        None => MemoryCategory::Entities,
        Some(text) => MemoryType::parse(text)
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "type {text:?} is not a memory type: profile, preferences, entities, events, \
                     cases or patterns"
                ))
            })?
            .category(),
    };
    let report = state
        .engine
        .remember(
            &caller.tenant,
            &identity,
            &body.content,
            category,
            body.priority,
        )
        .await
        .map_err(failure)?;
    Ok(Json(report))
}

/// `POST /v1/memory/forget`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetRequest {
    /// The entry to forget (with `recursive`: a directory).
    pub uri: String,
    /// Forget every live entry at or below `uri`.
    #[serde(default)]
    pub recursive: bool,
}

/// Forgets an entry (or everything below a directory): its versions stay in the history, search
/// and reads no longer see it.
#[utoipa::path(post, path = "/v1/memory/forget", tag = "memory", request_body = ForgetRequest,
    responses(
        (status = 200, description = "The entries forgotten", body = Vec<ForgetReport>),
        (status = 400, description = "Bad URI (or a directory without recursive)"),
        (status = 404, description = "Nothing live there"),
    ))]
async fn forget(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<ForgetRequest>,
) -> Result<Json<Vec<ForgetReport>>, ApiError> {
    let uri = parse_uri(&body.uri, "uri")?;
    let reports = state
        .engine
        .forget_memories(&caller.tenant, &uri, body.recursive)
        .map_err(failure)?;
    Ok(Json(reports))
}

// ---------------------------------------------------------------------------------------------
// resources

/// `POST /v1/memory/resources`: one document (`content`) or a directory of them (`documents`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceRequest {
    /// The resources directory to add under (default: `viking://resources`).
    pub uri: Option<String>,
    /// With `content`: the document's file name (`auth.md`), its directory's name, and
    /// Markdown or text. With `documents`: the directory's name.
    pub name: String,
    /// The document's text.
    pub content: Option<String>,
    /// With `content`: how the report names the document (the client's path; default: `name`).
    pub source: Option<String>,
    /// Instead of `content`: the files of the directory `name`, each at its path below it.
    pub documents: Option<Vec<ResourceDocument>>,
    /// Files the client left out (binary, too large), listed in the report's `skipped`.
    #[serde(default)]
    pub skipped: Vec<Skipped>,
    /// The largest chunk, in characters (default 3000, at least 200).
    pub max_chunk_chars: Option<usize>,
}

/// A file of a directory added with `documents`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceDocument {
    /// Its path below the directory, `/`-separated (`docs/auth.md`): its chunks go in
    /// `{uri}/{name}/docs/auth.md/`.
    pub path: String,
    /// Its text.
    pub content: String,
    /// How the report names it (the client's path; default: `path`).
    pub source: Option<String>,
}

impl ResourceDocument {
    /// The engine's document: each part of `path` becomes a URI segment (the file's own, too:
    /// its chunks get a directory), its last part is the file name.
    fn into_document(self) -> Result<Document, ApiError> {
        let parts: Vec<&str> = self.path.split('/').collect();
        let Some(file_name) = parts.last() else {
            return Err(ApiError::BadRequest(
                "a document's path is empty".to_owned(),
            ));
        };
        if parts
            .iter()
            .any(|part| part.is_empty() || *part == "." || *part == "..")
        {
            return Err(ApiError::BadRequest(format!(
                "document path {:?} is not a relative path of names (no empty, `.` or `..` \
                 parts)",
                self.path
            )));
        }
        Ok(Document {
            segments: parts.iter().map(|part| manage::segment_of(part)).collect(),
            file_name: (*file_name).to_owned(),
            text: self.content,
            shown: self.source.unwrap_or(self.path),
        })
    }
}

/// Adds a document as a resource at `{uri}/{name}` (or a directory of them: `documents`): cut
/// into chunks (Markdown at headings, text at blank lines), each chunk an entry with its L0, and
/// an `_overview` entry per directory. Adding it again mirrors it: unchanged chunks write
/// nothing, changed ones become new versions, chunks (and files) that are gone are forgotten.
#[utoipa::path(post, path = "/v1/memory/resources", tag = "memory", request_body = ResourceRequest,
    responses(
        (status = 200, description = "What was written", body = AddReport),
        (status = 400, description = "Bad URI (not under viking://resources), name or chunk size"),
    ))]
async fn add_resource(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<ResourceRequest>,
) -> Result<Json<AddReport>, ApiError> {
    let parent = match &body.uri {
        Some(text) => parse_uri(text, "uri")?,
        None => MemoryUri::root()
            .join("resources")
            .map_err(|error| ApiError::Internal(error.to_string()))?,
    };
    manage::resources_parent(&parent).map_err(failure)?;
    if body.name.trim().is_empty() {
        return Err(ApiError::BadRequest(
            "name is empty; give the document's file name (e.g. auth.md)".to_owned(),
        ));
    }
    let root = parent
        .join(&manage::segment_of(&body.name))
        .map_err(|error| {
            ApiError::BadRequest(format!(
                "cannot add {:?} under {parent}: {error}",
                body.name
            ))
        })?;
    let documents = match (body.content, body.documents) {
        (Some(content), None) => vec![Document {
            segments: Vec::new(),
            file_name: body.name.clone(),
            text: content,
            shown: body.source.unwrap_or(body.name),
        }],
        (None, Some(documents)) => documents
            .into_iter()
            .map(ResourceDocument::into_document)
            .collect::<Result<_, _>>()?,
        (Some(_), Some(_)) | (None, None) => {
            return Err(ApiError::BadRequest(
                "give either `content` (one document) or `documents` (a directory's files)"
                    .to_owned(),
            ));
        }
    };
    let report = state
        .engine
        .add_documents(
            &caller.tenant,
            &root,
            documents,
            body.max_chunk_chars
                .unwrap_or(skald_core::memory::chunk::DEFAULT_MAX_CHUNK_CHARS),
            body.skipped,
        )
        .await
        .map_err(failure)?;
    Ok(Json(report))
}

// ---------------------------------------------------------------------------------------------
// history

/// `GET /v1/memory/history` parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// How many writes, newest first (1 to 1000, default 20).
    pub limit: Option<usize>,
    /// Instead, every version of this one entry, newest first.
    pub uri: Option<String>,
}

/// The tenant's latest writes (adds, updates, merges, forgets), or one entry's versions.
#[derive(Debug, serde::Serialize, ToSchema)]
#[serde(untagged)]
pub enum HistoryResponse {
    /// Without `uri`: the tenant's latest writes, newest first.
    Writes(Vec<WriteRow>),
    /// With `uri`: every version of that entry, newest first.
    Versions(Vec<VersionRow>),
}

/// The tenant's latest memory writes, newest first; with `uri`, every version of that entry.
#[utoipa::path(get, path = "/v1/memory/history", tag = "memory", params(HistoryQuery),
    responses(
        (status = 200, description = "Writes or versions", body = HistoryResponse),
        (status = 400, description = "Bad limit or URI"),
    ))]
async fn history(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<HistoryQuery>,
) -> Result<Json<HistoryResponse>, ApiError> {
    let limit = query.limit.unwrap_or(20);
    if !(1..=MAX_HISTORY_LIMIT).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "limit is {limit}; it is 1 to {MAX_HISTORY_LIMIT}"
        )));
    }
    let engine = &state.engine;
    Ok(Json(match &query.uri {
        Some(text) => {
            let uri = parse_uri(text, "uri")?;
            HistoryResponse::Versions(
                engine
                    .memory_versions(&caller.tenant, &uri)
                    .map_err(failure)?,
            )
        }
        None => HistoryResponse::Writes(
            engine
                .recent_memory_writes(&caller.tenant, limit)
                .map_err(failure)?,
        ),
    }))
}
