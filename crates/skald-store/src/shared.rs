//! A store behind an `Arc` is a store: each trait's methods forwarded, so a caller holding
//! `Arc<dyn SessionStore>` (the engine's `Stores`, a test's stores) passes it wherever a store
//! is taken, `&dyn SessionStore` included.

use std::collections::BTreeMap;
use std::sync::Arc;

use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::uri::MemoryUri;
use skald_core::message::Message;
use skald_core::refs::{CanonicalPayload, RefId, RefPayload};
use skald_core::session::{Entry, EntryKind, Session};

use crate::StoreError;
use crate::memories::{
    AddOutcome, DirEntry, LeaseState, Memory, MemoryError, MemoryStats, MemoryStore, MemoryWrite,
    NewMemory, SearchHit, SearchQuery, TreeNode, UpdateOutcome,
};
use crate::refs::{RefStats, RefStore};
use crate::sessions::{
    BranchRewrite, CompactionCheckpoint, NewSession, SessionError, SessionInfo, SessionStore,
    SessionSwitches,
};

impl<S: SessionStore + ?Sized> SessionStore for Arc<S> {
    fn create(&self, tenant: &Tenant, session: NewSession) -> Result<SessionInfo, SessionError> {
        (**self).create(tenant, session)
    }

    fn append(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        entries: &[Entry],
    ) -> Result<(), SessionError> {
        (**self).append(tenant, session, entries)
    }

    fn append_message(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        message: Message,
    ) -> Result<Entry, SessionError> {
        (**self).append_message(tenant, session, message)
    }

    fn append_compaction(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        checkpoint: CompactionCheckpoint,
    ) -> Result<Entry, SessionError> {
        (**self).append_compaction(tenant, session, checkpoint)
    }

    fn rewrite_branch(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        rewrites: BTreeMap<String, EntryKind>,
        reason: &str,
    ) -> Result<BranchRewrite, SessionError> {
        (**self).rewrite_branch(tenant, session, rewrites, reason)
    }

    fn set_leaf(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<(), SessionError> {
        (**self).set_leaf(tenant, session, leaf)
    }

    fn get(&self, tenant: &Tenant, session: &SessionId) -> Result<SessionInfo, SessionError> {
        (**self).get(tenant, session)
    }

    fn list(&self, tenant: &Tenant) -> Result<Vec<SessionInfo>, SessionError> {
        (**self).list(tenant)
    }

    fn set_switches(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        switches: SessionSwitches,
    ) -> Result<SessionInfo, SessionError> {
        (**self).set_switches(tenant, session, switches)
    }

    fn load(&self, tenant: &Tenant, session: &SessionId) -> Result<Session, SessionError> {
        (**self).load(tenant, session)
    }

    fn entries_after(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        skip: u64,
    ) -> Result<Vec<Entry>, SessionError> {
        (**self).entries_after(tenant, session, skip)
    }

    fn entries(&self, tenant: &Tenant, session: &SessionId) -> Result<Vec<Entry>, SessionError> {
        (**self).entries(tenant, session)
    }

    fn path(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<Vec<Entry>, SessionError> {
        (**self).path(tenant, session, leaf)
    }

    fn context(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<Vec<Message>, SessionError> {
        (**self).context(tenant, session, leaf)
    }
}

impl<S: RefStore + ?Sized> RefStore for Arc<S> {
    fn put(&self, tenant: &Tenant, payload: &RefPayload) -> Result<RefId, StoreError> {
        (**self).put(tenant, payload)
    }

    fn put_many(&self, tenant: &Tenant, payloads: &[&CanonicalPayload]) -> Result<(), StoreError> {
        (**self).put_many(tenant, payloads)
    }

    fn get(&self, tenant: &Tenant, id: &str) -> Result<RefPayload, StoreError> {
        (**self).get(tenant, id)
    }

    fn stats(&self, tenant: &Tenant) -> Result<RefStats, StoreError> {
        (**self).stats(tenant)
    }
}

impl<S: MemoryStore + ?Sized> MemoryStore for Arc<S> {
    fn add(&self, tenant: &Tenant, memory: NewMemory) -> Result<AddOutcome, MemoryError> {
        (**self).add(tenant, memory)
    }

    fn add_many(
        &self,
        tenant: &Tenant,
        memories: Vec<NewMemory>,
    ) -> Result<Vec<AddOutcome>, MemoryError> {
        (**self).add_many(tenant, memories)
    }

    fn add_many_while(
        &self,
        tenant: &Tenant,
        memories: Vec<NewMemory>,
        keep_going: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<AddOutcome>, MemoryError> {
        (**self).add_many_while(tenant, memories, keep_going)
    }

    fn update(&self, tenant: &Tenant, memory: NewMemory) -> Result<UpdateOutcome, MemoryError> {
        (**self).update(tenant, memory)
    }

    fn forget(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Memory, MemoryError> {
        (**self).forget(tenant, uri)
    }

    fn get(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Memory, MemoryError> {
        (**self).get(tenant, uri)
    }

    fn history(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Vec<Memory>, MemoryError> {
        (**self).history(tenant, uri)
    }

    fn ls(&self, tenant: &Tenant, dir: &MemoryUri) -> Result<Vec<DirEntry>, MemoryError> {
        (**self).ls(tenant, dir)
    }

    fn tree(
        &self,
        tenant: &Tenant,
        dir: &MemoryUri,
        max_depth: usize,
    ) -> Result<TreeNode, MemoryError> {
        (**self).tree(tenant, dir, max_depth)
    }

    fn search(&self, tenant: &Tenant, query: &SearchQuery) -> Result<Vec<SearchHit>, MemoryError> {
        (**self).search(tenant, query)
    }

    fn set_embedding(
        &self,
        tenant: &Tenant,
        uri: &MemoryUri,
        vector: &[f32],
    ) -> Result<(), MemoryError> {
        (**self).set_embedding(tenant, uri, vector)
    }

    fn stats(&self, tenant: &Tenant) -> Result<MemoryStats, MemoryError> {
        (**self).stats(tenant)
    }

    fn recent_writes(
        &self,
        tenant: &Tenant,
        limit: usize,
    ) -> Result<Vec<MemoryWrite>, MemoryError> {
        (**self).recent_writes(tenant, limit)
    }

    fn claim_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<LeaseState, MemoryError> {
        (**self).claim_lease(tenant, name, holder, ttl_ms)
    }

    fn finish_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
        result: &str,
    ) -> Result<bool, MemoryError> {
        (**self).finish_lease(tenant, name, holder, result)
    }

    fn release_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
    ) -> Result<bool, MemoryError> {
        (**self).release_lease(tenant, name, holder)
    }

    fn lease(&self, tenant: &Tenant, name: &str, viewer: &str) -> Result<LeaseState, MemoryError> {
        (**self).lease(tenant, name, viewer)
    }
}
