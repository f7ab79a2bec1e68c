//! skald's HTTP server: the engine API (OpenClaw's ContextEngine over HTTP: ingest, assemble,
//! compact, after-turn, bootstrap), the memory and refs API, and an OpenAI / Anthropic proxy
//! that runs every request through the engine before it goes upstream — all on the embedded
//! SQLite store, scoped by API key to a tenant.
//!
//! `/ui` is a dashboard over the same engine ([`ui`]).
//!
//! [`router`] builds the axum router over an [`AppState`]; [`serve`] runs it with graceful
//! shutdown. `/openapi.json` is generated from the handlers themselves.
//!
//! ```
//! use axum::body::Body;
//! use axum::http::Request;
//! use skald_core::pipeline::policy::Policy;
//! use skald_server::{AppState, ServerConfig, router};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let state = AppState::in_memory(ServerConfig::new(Policy::preset("skald")?))?;
//! let app = router(state);
//! let response = app
//!     .oneshot(Request::get("/healthz").body(Body::empty())?)
//!     .await?;
//! assert_eq!(response.status(), 200);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod app;
pub mod auth;
pub mod config;
mod edge;
pub mod error;
mod idle;
pub mod mcp;
pub mod metrics;
pub mod proxy;
pub mod routes;
pub mod state;
pub mod ui;

pub use app::{Health, openapi, router, serve};
pub use auth::{Caller, KeySource};
pub use config::{MemoryDefaults, ServerConfig, Upstream};
pub use error::ApiError;
pub use state::{AppState, OpenError};
