//! The memory use cases of [`Engine`]: search, list, read, remember, forget, add documents,
//! history, and the memory tools the model calls — each [`crate::memory::manage`] or
//! [`crate::memory::tools`] operation over the engine's memory store and embedder.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use skald_core::ids::Tenant;
use skald_core::memory::uri::{MemoryCategory, MemoryUri};
use skald_store::memories::{MemoryError, MemoryLevel, SearchFilter, TreeNode};

use super::Engine;
use crate::memory::manage::{
    self, AddReport, Document, ForgetReport, LsRow, ManageError, ReadReport, RememberReport,
    SearchReport, Skipped, VersionRow, WriteRow,
};
use crate::memory::{MemoryIdentity, MemoryToolOutput, execute_memory_tool};

impl Engine {
    /// The memories of `identity` that best match `text` (`manage::search_memories`).
    pub async fn search_memories(
        &self,
        tenant: &Tenant,
        identity: &MemoryIdentity,
        text: &str,
        filter: SearchFilter,
        limit: usize,
    ) -> Result<SearchReport, ManageError> {
        let embedder = self.config().embedder.as_deref();
        manage::search_memories(
            self.memories(),
            embedder,
            tenant,
            identity,
            text,
            filter,
            limit,
        )
        .await
    }

    /// The directories and entries directly in `dir`.
    pub fn list_memories(
        &self,
        tenant: &Tenant,
        dir: &MemoryUri,
    ) -> Result<Vec<LsRow>, ManageError> {
        manage::list_directory(self.memories(), tenant, dir)
    }

    /// `dir` and everything below it, down to `max_depth` levels.
    pub fn memory_tree(
        &self,
        tenant: &Tenant,
        dir: &MemoryUri,
        max_depth: usize,
    ) -> Result<TreeNode, MemoryError> {
        self.memories().tree(tenant, dir, max_depth)
    }

    /// One memory (or a directory's overview) at `level` of detail.
    pub fn read_memory(
        &self,
        tenant: &Tenant,
        uri: &MemoryUri,
        level: MemoryLevel,
    ) -> Result<ReadReport, ManageError> {
        manage::read_memory(self.memories(), tenant, uri, level)
    }

    /// Writes `content` as a memory of `identity` in `category` (deduplicated, embedded when an
    /// embedder is configured).
    pub async fn remember(
        &self,
        tenant: &Tenant,
        identity: &MemoryIdentity,
        content: &str,
        category: MemoryCategory,
        priority: Option<u8>,
    ) -> Result<RememberReport, ManageError> {
        let embedder = self.config().embedder.as_deref();
        manage::remember(
            self.memories(),
            embedder,
            tenant,
            identity,
            content,
            category,
            priority,
        )
        .await
    }

    /// Forgets the entry at `uri` (with `recursive`, everything below it); every version stays
    /// in the history.
    pub fn forget_memories(
        &self,
        tenant: &Tenant,
        uri: &MemoryUri,
        recursive: bool,
    ) -> Result<Vec<ForgetReport>, ManageError> {
        manage::forget(self.memories(), tenant, uri, recursive)
    }

    /// Adds `documents` under `root` as resources: each is cut into chunks of at most
    /// `max_chunk_chars` (Markdown at headings, anything else at blank lines), each chunk an
    /// entry in the document's directory, and every directory gets an `_overview` entry. Adding
    /// again mirrors the documents: an unchanged chunk writes nothing, a changed one becomes a
    /// new version, and entries under `root` that no longer come from a document are forgotten.
    /// New entries are written in one transaction, before any update or forget. `skipped` lists
    /// documents the caller already left out; the report adds its own. The two store phases
    /// (`manage::plan_documents`, `manage::write_documents`) run on blocking threads, the
    /// embedding of the new texts between them.
    ///
    /// The store work (chunking, comparing, writing: seconds for a large document) runs on
    /// blocking threads, so the async caller stays responsive and can be dropped: dropping the
    /// returned future (an HTTP client that disconnects drops its handler's) tells the work to
    /// stop, and it does at the next entry, writing nothing (see `manage::write_documents`).
    pub async fn add_documents(
        &self,
        tenant: &Tenant,
        root: &MemoryUri,
        documents: Vec<Document>,
        max_chunk_chars: usize,
        skipped: Vec<Skipped>,
    ) -> Result<AddReport, ManageError> {
        let wanted = Arc::new(AtomicBool::new(true));
        let _stop_when_dropped = StopWhenDropped(wanted.clone());
        let plan = {
            let (engine, wanted) = (self.clone(), wanted.clone());
            let (tenant, root) = (tenant.clone(), root.clone());
            off_thread(move || {
                let keep_going = || wanted.load(Ordering::Relaxed);
                manage::plan_documents(
                    engine.memories(),
                    &tenant,
                    &root,
                    documents,
                    max_chunk_chars,
                    skipped,
                    &keep_going,
                )
            })
            .await?
        };
        let vectors = manage::embed_plan(self.config().embedder.as_deref(), &plan).await?;
        let (engine, tenant) = (self.clone(), tenant.clone());
        off_thread(move || {
            let keep_going = || wanted.load(Ordering::Relaxed);
            manage::write_documents(engine.memories(), &tenant, plan, vectors, &keep_going)
        })
        .await
    }

    /// Every version ever written at `uri`, oldest first.
    pub fn memory_versions(
        &self,
        tenant: &Tenant,
        uri: &MemoryUri,
    ) -> Result<Vec<VersionRow>, ManageError> {
        manage::entry_versions(self.memories(), tenant, uri)
    }

    /// The tenant's most recent memory writes, newest first.
    pub fn recent_memory_writes(
        &self,
        tenant: &Tenant,
        limit: usize,
    ) -> Result<Vec<WriteRow>, ManageError> {
        manage::recent_writes(self.memories(), tenant, limit)
    }

    /// Runs one of the memory tools the model called, for `identity`.
    pub async fn memory_tool(
        &self,
        tenant: &Tenant,
        identity: &MemoryIdentity,
        name: &str,
        arguments: &Value,
    ) -> MemoryToolOutput {
        let embedder = self.config().embedder.as_deref();
        let now_ms = self.now_ms();
        execute_memory_tool(
            self.memories(),
            embedder,
            tenant,
            identity,
            name,
            arguments,
            now_ms,
        )
        .await
    }
}

/// Clears its flag when dropped: the work of a future that was dropped stops.
struct StopWhenDropped(Arc<AtomicBool>);

impl Drop for StopWhenDropped {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// Runs `work` on a blocking thread; its panic is the caller's.
async fn off_thread<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ManageError> + Send + 'static,
) -> Result<T, ManageError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        // Only a runtime shutting down cancels a blocking task.
        Err(_) => Err(ManageError::Store(MemoryError::Cancelled)),
    }
}
