//! Who may open MCP sessions over HTTP, and how many they may hold.
//!
//! Every request to `/mcp` is authenticated here, before the MCP transport sees it: on a server
//! with keys an `initialize` without one opens nothing. A session belongs to the key that opened
//! it (an open server's callers share one owner); another key naming it is told it does not
//! exist. Each owner holds at most [`EdgeConfig::mcp_sessions_per_key`] sessions: opening one
//! more closes its least recently used one (a client whose session was closed gets 404 and, as
//! the MCP specification has it, starts a new one). The transport closes a session idle for
//! [`EdgeConfig::mcp_session_idle`] by itself.
//!
//! [`EdgeConfig::mcp_sessions_per_key`]: crate::config::EdgeConfig::mcp_sessions_per_key
//! [`EdgeConfig::mcp_session_idle`]: crate::config::EdgeConfig::mcp_session_idle

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::auth::authenticate;
use crate::error::ApiError;
use crate::state::AppState;

/// The header the streamable HTTP transport names a session in.
const SESSION_HEADER: &str = "mcp-session-id";

/// The owner of an open server's sessions (no keys).
const OPEN_OWNER: &str = "";

/// The sessions the transport holds, with the owner and last use of each.
pub struct McpSessions {
    manager: Arc<LocalSessionManager>,
    held: Mutex<HashMap<Arc<str>, Held>>,
    /// Held while a session is being opened, so concurrent `initialize`s cannot all find room
    /// before any of them is counted.
    opening: tokio::sync::Mutex<()>,
    per_owner: usize,
    idle: Duration,
}

impl std::fmt::Debug for McpSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSessions")
            .field("per_owner", &self.per_owner)
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

struct Held {
    owner: String,
    last_used: Instant,
}

/// What a request naming a session found.
enum Named {
    /// A session of this owner (now marked used).
    Own,
    /// A session of another owner.
    Foreign,
    /// Not a session this server opened (or one already forgotten): the transport answers.
    Unknown,
}

impl McpSessions {
    /// The sessions of `manager`, at most `per_owner` per owner, closed after `idle`.
    pub fn new(manager: Arc<LocalSessionManager>, per_owner: usize, idle: Duration) -> McpSessions {
        McpSessions {
            manager,
            held: Mutex::new(HashMap::new()),
            opening: tokio::sync::Mutex::new(()),
            per_owner: per_owner.max(1),
            idle,
        }
    }

    /// Sessions the transport holds now.
    pub async fn open_sessions(&self) -> usize {
        self.manager.sessions.read().await.len()
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Held>> {
        // The map holds plain records; a panic elsewhere leaves none half-written.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn name(&self, id: &str, owner: &str) -> Named {
        let mut held = self.held();
        match held.get_mut(id) {
            Some(session) if session.owner == owner => {
                session.last_used = Instant::now();
                Named::Own
            }
            Some(_) => Named::Foreign,
            None => Named::Unknown,
        }
    }

    /// Before `owner` opens a session: forgets its sessions the transport no longer holds and
    /// closes those idle past the limit, then its least recently used ones until one more fits.
    async fn make_room(&self, owner: &str) {
        let mut theirs: Vec<(Arc<str>, Instant)> = self
            .held()
            .iter()
            .filter(|(_, session)| session.owner == owner)
            .map(|(id, session)| (id.clone(), session.last_used))
            .collect();
        theirs.sort_by_key(|(_, last_used)| *last_used);
        let mut to_close = Vec::new();
        let mut kept = Vec::new();
        for (id, last_used) in theirs {
            let alive = self.manager.has_session(&id).await.unwrap_or(false);
            if !alive {
                self.held().remove(&id);
            } else if last_used.elapsed() >= self.idle {
                to_close.push(id);
            } else {
                kept.push(id);
            }
        }
        let over = (kept.len() + 1).saturating_sub(self.per_owner);
        to_close.extend(kept.into_iter().take(over));
        for id in to_close {
            self.held().remove(&id);
            if let Err(error) = self.manager.close_session(&id).await {
                tracing::debug!(%error, session = %id, "closing an MCP session failed");
            }
        }
    }

    fn opened(&self, id: Arc<str>, owner: &str) {
        self.held().insert(
            id,
            Held {
                owner: owner.to_owned(),
                last_used: Instant::now(),
            },
        );
    }

    fn closed(&self, id: &str) {
        self.held().remove(id);
    }
}

/// The gate in front of the MCP transport: authenticates, keeps each key to its own sessions,
/// and bounds how many it holds.
pub async fn gate(
    State((state, sessions)): State<(AppState, Arc<McpSessions>)>,
    request: Request,
    next: Next,
) -> Response {
    let caller = match authenticate(&state, request.headers()) {
        Ok(caller) => caller,
        Err(error) => return error.into_response(),
    };
    let owner = caller.key_id.unwrap_or_else(|| OPEN_OWNER.to_owned());
    let named: Option<Arc<str>> = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(Arc::from);
    let method = request.method().clone();
    let mut opening = None;
    match &named {
        Some(id) => match sessions.name(id, &owner) {
            Named::Own | Named::Unknown => {}
            Named::Foreign => {
                return ApiError::NotFound(format!(
                    "no MCP session {id} for this key: send `initialize` without a session id \
                     to start one"
                ))
                .into_response();
            }
        },
        None if method == Method::POST => {
            opening = Some(sessions.opening.lock().await);
            sessions.make_room(&owner).await;
        }
        None => {}
    }
    let response = next.run(request).await;
    match &named {
        None => {
            if let Some(id) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|value| value.to_str().ok())
            {
                sessions.opened(Arc::from(id), &owner);
            }
        }
        Some(id) if method == Method::DELETE && response.status().is_success() => {
            sessions.closed(id);
        }
        Some(_) => {}
    }
    drop(opening);
    let open = sessions.open_sessions().await;
    state
        .metrics
        .mcp_sessions
        .set(i64::try_from(open).unwrap_or(i64::MAX));
    response
}
