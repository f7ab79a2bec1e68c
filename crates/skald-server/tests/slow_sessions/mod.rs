//! A session store whose writes take a while (each waits before it reaches the inner store),
//! so a test can see what a client is told before a write is done — without racing the clock:
//! whatever reaches a client before the wait is over reached it before the write.
//!
//! The wait is `block_in_place` on a multi-threaded runtime, as a write's wait for a database
//! behaves when the runtime has moved the worker's other tasks on (the connection's task, woken
//! by the bytes the request just sent, is one of them): without it the sleeping worker would
//! hold that task back, and the test would see an order the server does not guarantee.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use skald_core::ids::{SessionId, Tenant};
use skald_core::message::Message;
use skald_core::session::{Entry, EntryKind, Session};
use skald_store::sessions::{
    BranchRewrite, CompactionCheckpoint, NewSession, SessionError, SessionInfo, SessionStore,
    SessionSwitches,
};

/// Delegates to `inner`; every write first sleeps `delay`.
pub struct SlowWrites {
    pub inner: Arc<dyn SessionStore>,
    pub delay: Duration,
}

impl SlowWrites {
    pub fn new(inner: Arc<dyn SessionStore>, delay: Duration) -> Arc<SlowWrites> {
        Arc::new(SlowWrites { inner, delay })
    }

    fn wait(&self) {
        let sleep = || std::thread::sleep(self.delay);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(sleep);
            }
            Ok(_) | Err(_) => sleep(),
        }
    }
}

impl SessionStore for SlowWrites {
    fn create(&self, tenant: &Tenant, session: NewSession) -> Result<SessionInfo, SessionError> {
        self.wait();
        self.inner.create(tenant, session)
    }

    fn append(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        entries: &[Entry],
    ) -> Result<(), SessionError> {
        self.wait();
        self.inner.append(tenant, session, entries)
    }

    fn append_message(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        message: Message,
    ) -> Result<Entry, SessionError> {
        self.wait();
        self.inner.append_message(tenant, session, message)
    }

    fn append_compaction(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        checkpoint: CompactionCheckpoint,
    ) -> Result<Entry, SessionError> {
        self.wait();
        self.inner.append_compaction(tenant, session, checkpoint)
    }

    fn rewrite_branch(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        rewrites: BTreeMap<String, EntryKind>,
        reason: &str,
    ) -> Result<BranchRewrite, SessionError> {
        self.wait();
        self.inner.rewrite_branch(tenant, session, rewrites, reason)
    }

    fn set_leaf(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<(), SessionError> {
        self.wait();
        self.inner.set_leaf(tenant, session, leaf)
    }

    fn get(&self, tenant: &Tenant, session: &SessionId) -> Result<SessionInfo, SessionError> {
        self.inner.get(tenant, session)
    }

    fn list(&self, tenant: &Tenant) -> Result<Vec<SessionInfo>, SessionError> {
        self.inner.list(tenant)
    }

    fn set_switches(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        switches: SessionSwitches,
    ) -> Result<SessionInfo, SessionError> {
        self.wait();
        self.inner.set_switches(tenant, session, switches)
    }

    fn load(&self, tenant: &Tenant, session: &SessionId) -> Result<Session, SessionError> {
        self.inner.load(tenant, session)
    }

    fn entries_after(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        skip: u64,
    ) -> Result<Vec<Entry>, SessionError> {
        self.inner.entries_after(tenant, session, skip)
    }
}
