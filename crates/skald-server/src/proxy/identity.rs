//! Which session a proxied request belongs to, from what the client already sends.
//!
//! In order:
//! 1. **The client's own conversation id.** Claude Code sends its session id in
//!    `X-Claude-Code-Session-Id` and inside `metadata.user_id` (a JSON string with `session_id`,
//!    or the older `user_…_account_…_session_<uuid>` spelling); Codex sends its thread id in the
//!    `session-id` / `thread-id` headers (older versions `conversation_id`) and as the body's
//!    `prompt_cache_key` (another OpenAI client that sends a `prompt_cache_key` is named by it
//!    too, under `openai-` rather than `codex-`: Codex says who it is in `originator`). Such an id is new for every `claude -p` or `codex exec` run and kept
//!    across `--resume`, so two runs with the same prompt are two sessions and a resumed
//!    conversation lands in its own. One client session can hold several conversations at once
//!    (Claude Code's sub-agents share their parent's id), so the id is joined with a hash of the
//!    conversation's opening: each conversation gets a session of its own, and a resume (which
//!    sends the same opening) finds it again.
//! 2. **`x-skald-session`**, for clients that send neither.
//! 3. **The derived id**: a hash of the system prompt and the first user message.
//!
//! Both derivations are `skald_core::session_id`'s, the one every path uses.

use axum::http::HeaderMap;
use serde_json::Value;
use skald_core::ids::SessionId;
use skald_core::message::Message;
use skald_core::session_id;

use super::upstream::SESSION_HEADER;
use super::wire::Api;
use crate::error::ApiError;

/// The session of a request (see the module docs).
pub fn session_id(
    api: Api,
    headers: &HeaderMap,
    body: &Value,
    messages: &[Message],
) -> Result<SessionId, ApiError> {
    let derived = if let Some((host, id)) = api.client_session(headers, body) {
        session_id::for_client(host, &id, messages)
    } else if let Some(value) = headers.get(SESSION_HEADER) {
        let id = value.to_str().map_err(|_| {
            ApiError::BadRequest(format!("the {SESSION_HEADER} header is not ASCII text"))
        })?;
        return SessionId::parse(id).map_err(|error| {
            ApiError::BadRequest(format!("the {SESSION_HEADER} header: {error}"))
        });
    } else {
        session_id::derive(messages)
    };
    // Both derivations only make valid ids; a failure here is a bug worth a clear 500.
    SessionId::parse(derived)
        .map_err(|error| ApiError::Internal(format!("the derived session id: {error}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use axum::http::HeaderValue;
    use serde_json::json;
    use skald_core::message::Role;

    use super::super::wire::{CHAT, MESSAGES, RESPONSES};
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn opening(text: &str) -> Vec<Message> {
        vec![Message::text(Role::User, text)]
    }

    #[test]
    fn claude_codes_session_id_names_the_session_from_its_header_or_metadata() {
        let uuid = "4f1c2d3e-0000-4000-8000-123456789abc";
        let from_header = session_id(
            MESSAGES,
            &headers(&[("x-claude-code-session-id", uuid)]),
            &json!({}),
            &opening("fix the build"),
        )
        .unwrap();
        let user_id = json!({"device_id": "d", "account_uuid": "", "session_id": uuid}).to_string();
        let from_metadata = session_id(
            MESSAGES,
            &HeaderMap::new(),
            &json!({"metadata": {"user_id": user_id}}),
            &opening("fix the build"),
        )
        .unwrap();
        assert_eq!(from_header, from_metadata);
        assert!(from_header.starts_with(&format!("claude-code-{uuid}-")));
        SessionId::parse(from_header.as_str()).unwrap();
        let older = session_id(
            MESSAGES,
            &HeaderMap::new(),
            &json!({"metadata": {"user_id": format!("user_abc_account__session_{uuid}")}}),
            &opening("fix the build"),
        )
        .unwrap();
        assert_eq!(older, from_header);
    }

    #[test]
    fn two_runs_with_the_same_prompt_are_two_sessions_and_a_sub_agent_has_its_own() {
        let run = |id: &str, prompt: &str| {
            session_id(
                MESSAGES,
                &headers(&[("x-claude-code-session-id", id)]),
                &json!({}),
                &opening(prompt),
            )
            .unwrap()
        };
        assert_ne!(run("run-1", "same prompt"), run("run-2", "same prompt"));
        assert_eq!(run("run-1", "same prompt"), run("run-1", "same prompt"));
        assert_ne!(
            run("run-1", "same prompt"),
            run("run-1", "a sub-agent's task")
        );
    }

    #[test]
    fn codex_threads_name_the_session_and_the_client_id_wins_over_skalds_header() {
        let thread = "019a0000-1111-7222-8333-444455556666";
        let by_header = session_id(
            RESPONSES,
            &headers(&[
                ("session-id", thread),
                ("originator", "codex_exec"),
                ("x-skald-session", "mine"),
            ]),
            &json!({}),
            &opening("hi"),
        )
        .unwrap();
        let by_cache_key = session_id(
            RESPONSES,
            &headers(&[("originator", "codex_exec")]),
            &json!({"prompt_cache_key": thread}),
            &opening("hi"),
        )
        .unwrap();
        assert_eq!(by_header, by_cache_key);
        assert!(by_header.starts_with("codex-019a0000"));
        // Another OpenAI client with a cache key is named by it, not taken for Codex.
        let sdk = session_id(
            CHAT,
            &HeaderMap::new(),
            &json!({"prompt_cache_key": "user-42"}),
            &opening("hi"),
        )
        .unwrap();
        assert!(sdk.starts_with("openai-user-42-"), "{sdk}");
    }

    #[test]
    fn without_a_client_id_skalds_header_then_the_derived_id() {
        let named = session_id(
            CHAT,
            &headers(&[("x-skald-session", "mine")]),
            &json!({}),
            &opening("hi"),
        )
        .unwrap();
        assert_eq!(named, "mine");
        let derived = session_id(CHAT, &HeaderMap::new(), &json!({}), &opening("hi")).unwrap();
        assert!(derived.starts_with("conv-"));
        let bad = session_id(
            CHAT,
            &headers(&[("x-skald-session", "no spaces allowed")]),
            &json!({}),
            &opening("hi"),
        )
        .unwrap_err();
        assert!(bad.to_string().contains("x-skald-session"), "{bad}");
    }

    #[test]
    fn odd_characters_in_a_client_id_still_make_a_valid_session_id() {
        let id = session_id(
            MESSAGES,
            &headers(&[("x-claude-code-session-id", "a b/c?d")]),
            &json!({}),
            &opening("hi"),
        )
        .unwrap();
        SessionId::parse(id.as_str()).unwrap();
        assert!(id.starts_with("claude-code-a-b-c-d-"));
    }
}
