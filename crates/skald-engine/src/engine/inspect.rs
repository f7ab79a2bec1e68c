//! Read-only looks at what the engine holds, for a host, a dashboard or a test that checks what
//! a call stored: a session's row and its context from the leaf, the tenant's ref and memory
//! totals, an agent's tool statistics, and whether a session's memory upload is running. None of
//! them changes anything.

use skald_core::ids::{SessionId, Tenant};
use skald_core::message::Message;
use skald_store::memories::{MemoryError, MemoryStats};
use skald_store::sessions::SessionInfo;
use skald_store::{RefStats, StoreError};

use super::Engine;
use crate::EngineError;
use skald_core::memory::usage::ToolStats;

impl Engine {
    /// The stored session's row: its entries, messages, leaf and switches.
    pub fn session_info(
        &self,
        tenant: &Tenant,
        session: &SessionId,
    ) -> Result<SessionInfo, EngineError> {
        Ok(self.sessions().get(tenant, session)?)
    }

    /// The stored session's context as its leaf holds it (compactions applied), before any
    /// pipeline: what the session itself says.
    pub fn stored_context(
        &self,
        tenant: &Tenant,
        session: &SessionId,
    ) -> Result<Vec<Message>, EngineError> {
        let stored = self.sessions().load(tenant, session)?;
        Ok(skald_core::session::session_context(&stored, None))
    }

    /// How many refs the tenant holds, and their bytes.
    pub fn ref_stats(&self, tenant: &Tenant) -> Result<RefStats, StoreError> {
        self.refs().stats(tenant)
    }

    /// How many memories the tenant holds, and how many have an embedding.
    pub fn memory_stats(&self, tenant: &Tenant) -> Result<MemoryStats, MemoryError> {
        self.memories().stats(tenant)
    }

    /// `agent`'s tool statistics, and the entries that could not be read as such.
    pub fn tool_stats(
        &self,
        tenant: &Tenant,
        agent: &str,
    ) -> Result<(Vec<ToolStats>, Vec<String>), MemoryError> {
        crate::memory::load_tool_stats(self.memories(), tenant, agent)
    }

    /// Whether a memory upload of the session is running in the background.
    pub fn upload_running(&self, tenant: &Tenant, session: &SessionId) -> bool {
        self.uploads().is_running(tenant, session)
    }

    /// Waits until the session's background memory upload (if any) has finished.
    pub async fn upload_finished(&self, tenant: &Tenant, session: &SessionId) {
        self.uploads().wait_finished(tenant, session).await;
    }
}
