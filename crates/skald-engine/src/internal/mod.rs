//! The pieces [`Engine`](crate::Engine) is made of, below its use cases: the pipeline run over
//! a caller's messages ([`assemble`]), the builder of a stored session's view (`view`),
//! getting a host's messages into a stored session (`ingest`), compaction of a stored session
//! (`compact`), the after-turn use case (`after_turn`), the executor of
//! `fetch_original_data` (`fetch`) and the memory write path (`memory_write`).
//!
//! **Internal.** These functions take the stores and the session's state themselves, without the
//! engine's session lock, its row memo or its configuration. All but [`assemble`] are
//! crate-private; [`assemble`] is public for the criterion benchmarks of the pipeline alone
//! (`benches/assemble.rs`). Everything else — an edge (the server, the proxy, the CLI's
//! commands, hooks) and the engine's own test suites — goes through [`Engine`](crate::Engine),
//! and the crate root re-exports every value type its API takes and returns;
//! `tests/facade.rs` fails when an edge names this module.
//!
//! The pipeline alone, over messages a caller holds:
//!
//! ```
//! use skald_core::message::{Block, Message, Role, ToolCall, ToolResult, ContentForm, Extra};
//! use skald_core::pipeline::policy::Policy;
//! use skald_engine::SessionState;
//! use skald_engine::internal::assemble::{AssembleRequest, assemble};
//! use skald_store::SqliteRefStore;
//!
//! let store = SqliteRefStore::in_memory(Default::default()).unwrap();
//! let policy = Policy::preset("sccs").unwrap();
//! let log = "2026-01-01 INFO step ok\n".repeat(400);
//! let messages = vec![
//!     Message::text(Role::User, "run the build"),
//!     Message::new(Role::Assistant, vec![Block::ToolCall(ToolCall {
//!         id: "c1".into(), name: "bash".into(), arguments: serde_json::json!({"command": "make"}),
//!         arguments_text: None, extra: Extra::new() })]),
//!     Message::new(Role::ToolResult, vec![Block::ToolResult(ToolResult {
//!         call_id: "c1".into(), tool_name: Some("bash".into()),
//!         content: vec![Block::text(log)].into(), content_form: ContentForm::Blocks,
//!         is_error: None, details: None, extra: Extra::new() })]),
//! ];
//! let mut state = SessionState::default();
//! let acme = skald_core::ids::Tenant::parse("acme").unwrap();
//! let request = AssembleRequest { tenant: &acme, context_window_tokens: 200_000, now_ms: 0, fetch_available: true, host_prefix_tokens: 0 };
//! let assembled = assemble(&store, &policy, &mut state, messages, request).unwrap();
//! assert_eq!(assembled.report.offload.offloaded.len(), 1);
//! assert!(assembled.system_prompt_addition.is_some());
//! assert_eq!(assembled.tools[0].name, "fetch_original_data");
//! ```

pub(crate) mod after_turn;
pub mod assemble;
pub(crate) mod compact;
pub(crate) mod fetch;
pub(crate) mod ingest;
pub(crate) mod memory_write;
pub(crate) mod view;
