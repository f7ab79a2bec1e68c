//! Long-term memory in the engine (seed 002, Components 2–5): per-turn recall injected as a
//! simulated `search_memories` call (`recall`), what is injected once at session start — the
//! user's profile and the tool usage memories in the system prompt, a simulated `memory_ls` of
//! `viking://` ([`SessionMemory`]) —, skill memories appended to reads of
//! `skills/<name>/SKILL.md` (`usage`), tool statistics kept from finished turns, the executors
//! of the five memory tools (`tools`), and what the memory commands and the memory API do by
//! hand ([`manage`]: search, ls, read, history, remember, forget, adding documents). A caller
//! reaches all of it through [`Engine`](crate::Engine): a view with memory on, its memory tool
//! and memory methods; this module holds the value types they return and pure helpers.
//!
//! Everything here reads and writes through `&dyn MemoryStore` and works with no embedder; with
//! one, queries and committed memories are embedded too. What the model sees is decided by
//! `skald_core::memory::{recall, tools, usage}`.
//!
//! **Who sees what.** A tenant may hold several users and agents. A [`MemoryIdentity`] names the
//! user and agent of a session; recall and the tools only show the user's own memories, the
//! agent's own memories, skills and tools, the resources and the session archives
//! ([`MemoryIdentity::can_see`]), and the tools only forget the user's and agent's own entries.
//!
//! **Order of a view.** The pipeline runs over the stored messages first; then memory's system
//! prompt addition is set apart from the pipeline's, the listing goes after the first user
//! message and the recall after the latest one (recall always lands after the listing), and the
//! memory tools are offered with the request's tools. None of the injected messages is stored
//! in the session.
//!
//! ```
//! use serde_json::json;
//! use skald_core::ids::{SessionId, Tenant};
//! use skald_core::message::{Message, Role};
//! use skald_engine::memory::MemoryIdentity;
//! use skald_engine::{AssembleInput, Engine, EngineConfig, ViewOptions};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut config = EngineConfig::new(skald_core::pipeline::policy::Policy::preset("skald").unwrap());
//! config.memory.user = "alice".into();
//! config.memory.agent = "main".into();
//! let skald = Engine::in_memory(config).unwrap();
//! let alice = MemoryIdentity::new("alice", "main").unwrap();
//! let acme = Tenant::parse("acme").unwrap();
//!
//! // The agent remembers something when asked to.
//! let answer = skald.memory_tool(&acme, &alice, "commit_memory", &json!({
//!     "memory_content": "Alice deploys the billing service with `make deploy-billing`.",
//!     "memory_type": "entity", "category": "billing deploys"
//! })).await;
//! assert!(answer.text.contains("\"outcome\":\"added\""), "{}", answer.text);
//!
//! // A later session: the listing once at its start, and recall on each turn.
//! let input = AssembleInput {
//!     messages: Some(vec![Message::text(Role::User, "How do I deploy billing again?")]),
//!     options: ViewOptions { with_memory: true, ..ViewOptions::default() },
//!     ..AssembleInput::default()
//! };
//! let later = SessionId::parse("s-later").unwrap();
//! let view = skald.assemble(&acme, &later, input).await.unwrap().view.view;
//! assert_eq!(view.memory.unwrap().recall.kept.len(), 1);
//! assert_eq!(view.messages.len(), 5); // ask, memory_ls call + result, search call + result
//! # });
//! ```

pub mod manage;
pub(crate) mod recall;
pub(crate) mod tools;
pub(crate) mod usage;

use skald_core::memory::uri::{MemoryUri, UriError};

/// What the write path records in a session — entries of these custom types, an outcome's
/// error when an upload's process ended or another server holds its span — and the pure
/// reader of the recorded archive outcomes, for a host or a test that checks them.
pub use crate::memory_write::{
    ARCHIVING_ELSEWHERE, EXTRACTION_CUSTOM_TYPE, INTERRUPTED_ERROR, UPLOAD_CUSTOM_TYPE,
    recorded_outcomes,
};
pub(crate) use recall::recall_injection_memo;
pub use recall::{
    DroppedMemory, RecallMemo, RecallOutcome, RecallReport, RecalledMemory, SessionMemory,
    SessionMemoryReport,
};
pub(crate) use recall::{recall_for_turn, session_start_memory};
pub use skald_core::memory::recall::{KeptRecallReport, LeftRecall, RecallLeaving};
pub use tools::MemoryToolOutput;
pub(crate) use tools::{execute_memory_tool, execute_search_docs};
pub use usage::{SkillAugmentation, ToolMemoryUpdate, skill_directory, tool_reports_in, tool_uri};
pub(crate) use usage::{
    augment_skill_reads_with, load_tool_stats, record_skill_uses, record_tool_reports,
};

/// The user and the agent a session belongs to, as they appear in `viking://` URIs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryIdentity {
    user: String,
    agent: String,
    user_root: MemoryUri,
    agent_root: MemoryUri,
}

impl MemoryIdentity {
    /// Validates both names as URI segments (letters, digits and `-_.~@+:=,`, starting with a
    /// letter or digit).
    pub fn new(user: &str, agent: &str) -> Result<MemoryIdentity, UriError> {
        let user_root = owner_root("user", user)?;
        let agent_root = owner_root("agent", agent)?;
        Ok(MemoryIdentity {
            user: user.to_owned(),
            agent: agent.to_owned(),
            user_root,
            agent_root,
        })
    }

    /// The user's name, one segment of `viking://user/{user}`.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The agent's name, one segment of `viking://agent/{agent}`.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// `viking://user/{user}`.
    pub fn user_root(&self) -> &MemoryUri {
        &self.user_root
    }

    /// `viking://agent/{agent}`.
    pub fn agent_root(&self) -> &MemoryUri {
        &self.agent_root
    }

    /// Whether `uri` is visible in this session: at or below the user's or the agent's
    /// directory, the resources or the session archives.
    pub fn can_see(&self, uri: &MemoryUri) -> bool {
        self.user_root.contains(uri)
            || self.agent_root.contains(uri)
            || matches!(uri.segments().next(), Some("resources" | "session"))
    }

    /// Whether `uri` is a directory above what this session sees (`viking://`,
    /// `viking://user`, `viking://agent`): listing it shows only the visible part.
    pub fn is_visible_ancestor(&self, uri: &MemoryUri) -> bool {
        !self.can_see(uri) && (uri.contains(&self.user_root) || uri.contains(&self.agent_root))
    }

    /// Whether the agent may forget `uri`: the user's and the agent's own entries.
    pub fn can_forget(&self, uri: &MemoryUri) -> bool {
        self.user_root.contains(uri) || self.agent_root.contains(uri)
    }
}

fn owner_root(scope: &str, name: &str) -> Result<MemoryUri, UriError> {
    let uri = MemoryUri::parse(&format!("viking://{scope}/{name}"))?;
    if uri.depth() != 2 {
        return Err(UriError::InvalidSegment {
            segment: name.chars().take(120).collect(),
            reason: "a user or agent name is one segment, with no '/'",
        });
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn identity_sees_its_own_memories_resources_and_sessions() {
        let identity = MemoryIdentity::new("alice", "main").unwrap();
        let see = |text: &str| identity.can_see(&MemoryUri::parse(text).unwrap());
        assert!(see("viking://user/alice/memories/preferences/x.md"));
        assert!(see("viking://agent/main/tools/bash"));
        assert!(see("viking://resources/docs/a.md"));
        assert!(see("viking://session/s1/archive.md"));
        assert!(!see("viking://user/bob/memories/preferences/x.md"));
        assert!(!see("viking://agent/other/tools/bash"));
        assert!(!see("viking://"));
        assert!(identity.is_visible_ancestor(&MemoryUri::root()));
        assert!(identity.is_visible_ancestor(&MemoryUri::parse("viking://user").unwrap()));
        assert!(!identity.can_forget(&MemoryUri::parse("viking://resources/a").unwrap()));
        assert!(MemoryIdentity::new("a/b", "main").is_err());
        assert!(MemoryIdentity::new("alice", "-x").is_err());
        assert!(MemoryIdentity::new("", "main").is_err());
    }
}
