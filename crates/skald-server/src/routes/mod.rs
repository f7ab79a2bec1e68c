//! The non-proxy routes, one module per API: `engine` (sessions: ingest, assemble, compact,
//! after-turn, bootstrap, reads), `memory` (ls, tree, read, search, remember, forget, resources)
//! and `refs` (fetch with slices).

pub mod engine;
pub mod memory;
pub mod refs;
