//! The memory use cases of [`Engine`]: search, list, read, remember, forget, add documents,
//! history, and the memory tools the model calls — each [`crate::memory::manage`] or
//! [`crate::memory::tools`] operation over the engine's memory store and embedder.

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
    /// The memories of `identity` that best match `text` (see [`manage::search_memories`]).
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

    /// Adds documents as resources under `root`, chunked (see [`manage::add_documents`]).
    pub async fn add_documents(
        &self,
        tenant: &Tenant,
        root: &MemoryUri,
        documents: Vec<Document>,
        max_chunk_chars: usize,
        skipped: Vec<Skipped>,
    ) -> Result<AddReport, ManageError> {
        let embedder = self.config().embedder.as_deref();
        manage::add_documents(
            self.memories(),
            embedder,
            tenant,
            root,
            documents,
            max_chunk_chars,
            skipped,
        )
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
        execute_memory_tool(self.memories(), embedder, tenant, identity, name, arguments).await
    }
}
