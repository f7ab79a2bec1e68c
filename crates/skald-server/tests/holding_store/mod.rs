//! A memory store that holds a batch of `add_many_while` open after its first entry until the
//! batch's caller stops wanting it, so a test can make a client leave while a resource is being
//! written — without racing the clock — and see what the store then kept.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use skald_core::ids::Tenant;
use skald_core::memory::uri::MemoryUri;
use skald_store::memories::{
    AddOutcome, DirEntry, LeaseState, Memory, MemoryError, MemoryStats, MemoryStore, MemoryWrite,
    NewMemory, SearchHit, SearchQuery, TreeNode, UpdateOutcome,
};

/// How long a held batch waits for its caller to stop before it gives up and lets the batch
/// through (the test then fails on what was written, instead of hanging).
const HOLD_AT_MOST: Duration = Duration::from_secs(60);

/// Delegates to `inner`; a batch of `add_many_while` is held after its first entry.
pub struct HoldingStore {
    pub inner: Arc<dyn MemoryStore>,
    /// Set once a batch is held (its first entry written inside the transaction).
    pub holding: AtomicBool,
    /// What the held batch ended with (`Ok(entries)` or the error), once it ended.
    pub ended: Mutex<Option<Result<usize, String>>>,
}

impl HoldingStore {
    pub fn new(inner: Arc<dyn MemoryStore>) -> Arc<HoldingStore> {
        Arc::new(HoldingStore {
            inner,
            holding: AtomicBool::new(false),
            ended: Mutex::new(None),
        })
    }

    /// Waits (at most a minute) until `done` says so.
    pub async fn wait_for(&self, what: &str, done: impl Fn(&HoldingStore) -> bool) {
        let started = Instant::now();
        while !done(self) {
            assert!(
                started.elapsed() < HOLD_AT_MOST,
                "waited a minute for {what}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl MemoryStore for HoldingStore {
    fn add(&self, tenant: &Tenant, memory: NewMemory) -> Result<AddOutcome, MemoryError> {
        self.inner.add(tenant, memory)
    }
    fn add_many(
        &self,
        tenant: &Tenant,
        memories: Vec<NewMemory>,
    ) -> Result<Vec<AddOutcome>, MemoryError> {
        self.inner.add_many(tenant, memories)
    }
    fn add_many_while(
        &self,
        tenant: &Tenant,
        memories: Vec<NewMemory>,
        keep_going: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<AddOutcome>, MemoryError> {
        let asked = AtomicUsize::new(0);
        let held = || {
            if asked.fetch_add(1, Ordering::SeqCst) == 1 {
                self.holding.store(true, Ordering::SeqCst);
                let started = Instant::now();
                while keep_going() && started.elapsed() < HOLD_AT_MOST {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            keep_going()
        };
        let result = self.inner.add_many_while(tenant, memories, &held);
        *self.ended.lock().unwrap() = Some(match &result {
            Ok(outcomes) => Ok(outcomes.len()),
            Err(error) => Err(error.to_string()),
        });
        result
    }
    fn update(&self, tenant: &Tenant, memory: NewMemory) -> Result<UpdateOutcome, MemoryError> {
        self.inner.update(tenant, memory)
    }
    fn forget(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Memory, MemoryError> {
        self.inner.forget(tenant, uri)
    }
    fn get(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Memory, MemoryError> {
        self.inner.get(tenant, uri)
    }
    fn history(&self, tenant: &Tenant, uri: &MemoryUri) -> Result<Vec<Memory>, MemoryError> {
        self.inner.history(tenant, uri)
    }
    fn ls(&self, tenant: &Tenant, dir: &MemoryUri) -> Result<Vec<DirEntry>, MemoryError> {
        self.inner.ls(tenant, dir)
    }
    fn tree(
        &self,
        tenant: &Tenant,
        dir: &MemoryUri,
        max_depth: usize,
    ) -> Result<TreeNode, MemoryError> {
        self.inner.tree(tenant, dir, max_depth)
    }
    fn search(&self, tenant: &Tenant, query: &SearchQuery) -> Result<Vec<SearchHit>, MemoryError> {
        self.inner.search(tenant, query)
    }
    fn set_embedding(
        &self,
        tenant: &Tenant,
        uri: &MemoryUri,
        vector: &[f32],
    ) -> Result<(), MemoryError> {
        self.inner.set_embedding(tenant, uri, vector)
    }
    fn stats(&self, tenant: &Tenant) -> Result<MemoryStats, MemoryError> {
        self.inner.stats(tenant)
    }
    fn recent_writes(
        &self,
        tenant: &Tenant,
        limit: usize,
    ) -> Result<Vec<MemoryWrite>, MemoryError> {
        self.inner.recent_writes(tenant, limit)
    }
    fn claim_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<LeaseState, MemoryError> {
        self.inner.claim_lease(tenant, name, holder, ttl_ms)
    }
    fn finish_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
        result: &str,
    ) -> Result<bool, MemoryError> {
        self.inner.finish_lease(tenant, name, holder, result)
    }
    fn release_lease(
        &self,
        tenant: &Tenant,
        name: &str,
        holder: &str,
    ) -> Result<bool, MemoryError> {
        self.inner.release_lease(tenant, name, holder)
    }
    fn lease(&self, tenant: &Tenant, name: &str, viewer: &str) -> Result<LeaseState, MemoryError> {
        self.inner.lease(tenant, name, viewer)
    }
}
