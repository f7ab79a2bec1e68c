//! [`RowMemo`]: the session store as the engine sees it, remembering a session's row
//! ([`SessionInfo`]: its entry count, leaf and switches) for as long as a request holds the
//! session ([`RowScope`]), so that request reads the row once.
//!
//! A proxied request used to read the row two to four times — the sync, the note of the state
//! the sync left, the prepare's rebuilt context and the memory upload's catch-up — each a round
//! trip on PostgreSQL. While a scope is open, the first `get` of its session reads the row and
//! every later one answers from the memo; every write of the session goes through this store
//! and moves the memo with it (an append adds its entries and moves the leaf; a write whose
//! effect on the row is not known here, or a failed one, forgets the memo, and the next `get`
//! reads again). Outside a scope every call goes to the store.
//!
//! What another process writes while a scope is open is seen from the session's next request,
//! as if it had been written just after this request's first read. The engine's readers do not
//! trust the row for the entries themselves: catching up on a held session reads the entries
//! appended since, and a count that disagrees with them makes it read the whole session.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use skald_core::ids::{SessionId, Tenant};
use skald_core::message::Message;
use skald_core::session::{Entry, EntryKind, Session};
use skald_store::sessions::{
    BranchRewrite, CompactionCheckpoint, NewSession, SessionError, SessionInfo, SessionStore,
    SessionSwitches,
};

/// Which session a memo is of.
type Key = (Tenant, SessionId);

/// A session in scope.
struct InScope {
    /// Open scopes (a use case that lets go of the state lock in the middle, as assembling with
    /// a compaction does, opens a second one inside the first).
    open: usize,
    row: Option<SessionInfo>,
}

/// A session store that remembers the rows of the sessions in scope (see the module docs).
pub(crate) struct RowMemo {
    inner: Arc<dyn SessionStore>,
    /// The sessions in scope: how many scopes of each are open, and its row once known.
    rows: Mutex<HashMap<Key, InScope>>,
}

impl RowMemo {
    pub(crate) fn new(inner: Arc<dyn SessionStore>) -> RowMemo {
        RowMemo {
            inner,
            rows: Mutex::new(HashMap::new()),
        }
    }

    /// Opens a scope of `session`: its row is read once from here until the last open scope is
    /// dropped. The caller holds the session's state lock (the memo is right whoever holds it:
    /// every write of the process goes through it; the lock is what makes a scope one request).
    pub(crate) fn scope(self: &Arc<Self>, tenant: &Tenant, session: &SessionId) -> RowScope {
        let key = (tenant.clone(), session.clone());
        self.rows()
            .entry(key.clone())
            .or_insert(InScope { open: 0, row: None })
            .open += 1;
        RowScope {
            memo: Arc::clone(self),
            key,
        }
    }

    fn rows(&self) -> std::sync::MutexGuard<'_, HashMap<Key, InScope>> {
        // The map holds plain values, each replaced whole: a panic elsewhere cannot leave one
        // half-written.
        self.rows.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `change` to the session's memo, if the session is in scope and its row known.
    fn update(&self, tenant: &Tenant, session: &SessionId, change: impl FnOnce(&mut SessionInfo)) {
        if let Some(InScope { row: Some(row), .. }) =
            self.rows().get_mut(&(tenant.clone(), session.clone()))
        {
            change(row);
        }
    }

    /// Forgets the session's row (it stays in scope): the next `get` reads it.
    fn forget(&self, tenant: &Tenant, session: &SessionId) {
        if let Some(scope) = self.rows().get_mut(&(tenant.clone(), session.clone())) {
            scope.row = None;
        }
    }

    /// Remembers `info` as the session's row, if it is in scope.
    fn remember(&self, tenant: &Tenant, session: &SessionId, info: &SessionInfo) {
        if let Some(scope) = self.rows().get_mut(&(tenant.clone(), session.clone())) {
            scope.row = Some(info.clone());
        }
    }

    /// Notes a successful append of `entries` (the leaf moved to the last one).
    fn appended(&self, tenant: &Tenant, session: &SessionId, entries: &[Entry]) {
        let Some(last) = entries.last() else {
            return;
        };
        let messages = entries
            .iter()
            .filter(|entry| entry.kind.as_message().is_some())
            .count() as u64;
        self.update(tenant, session, |row| {
            row.entry_count += entries.len() as u64;
            row.message_count += messages;
            row.leaf_id = Some(last.id.clone());
            row.updated_at_ms = row.updated_at_ms.max(skald_store::clock::now_ms());
        });
    }

    /// Passes a write's outcome on, forgetting the row when it failed (what the store did is
    /// then not known here).
    fn written<T>(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        outcome: Result<T, SessionError>,
    ) -> Result<T, SessionError> {
        if outcome.is_err() {
            self.forget(tenant, session);
        }
        outcome
    }
}

/// An open scope of [`RowMemo`]; dropping the last of a session's closes it and drops the memo.
pub(crate) struct RowScope {
    memo: Arc<RowMemo>,
    key: Key,
}

impl Drop for RowScope {
    fn drop(&mut self) {
        let mut rows = self.memo.rows();
        if let Some(scope) = rows.get_mut(&self.key) {
            scope.open = scope.open.saturating_sub(1);
            if scope.open == 0 {
                rows.remove(&self.key);
            }
        }
    }
}

impl SessionStore for RowMemo {
    fn create(&self, tenant: &Tenant, session: NewSession) -> Result<SessionInfo, SessionError> {
        let id = SessionId::parse(&session.header.id).ok();
        let created = self.inner.create(tenant, session);
        if let Some(id) = &id {
            match &created {
                Ok(info) => self.remember(tenant, id, info),
                Err(_) => self.forget(tenant, id),
            }
        }
        created
    }

    fn append(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        entries: &[Entry],
    ) -> Result<(), SessionError> {
        let appended = self.inner.append(tenant, session, entries);
        if appended.is_ok() {
            self.appended(tenant, session, entries);
        }
        self.written(tenant, session, appended)
    }

    fn append_message(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        message: Message,
    ) -> Result<Entry, SessionError> {
        let appended = self.inner.append_message(tenant, session, message);
        if let Ok(entry) = &appended {
            self.appended(tenant, session, std::slice::from_ref(entry));
        }
        self.written(tenant, session, appended)
    }

    fn append_compaction(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        checkpoint: CompactionCheckpoint,
    ) -> Result<Entry, SessionError> {
        let appended = self.inner.append_compaction(tenant, session, checkpoint);
        if let Ok(entry) = &appended {
            self.appended(tenant, session, std::slice::from_ref(entry));
        }
        self.written(tenant, session, appended)
    }

    fn rewrite_branch(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        rewrites: BTreeMap<String, EntryKind>,
        reason: &str,
    ) -> Result<BranchRewrite, SessionError> {
        // A marker and a copy of part of the path: read the row again rather than count them.
        self.forget(tenant, session);
        self.inner.rewrite_branch(tenant, session, rewrites, reason)
    }

    fn set_leaf(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<(), SessionError> {
        self.forget(tenant, session);
        self.inner.set_leaf(tenant, session, leaf)
    }

    fn get(&self, tenant: &Tenant, session: &SessionId) -> Result<SessionInfo, SessionError> {
        let key = (tenant.clone(), session.clone());
        let in_scope = match self.rows().get(&key) {
            Some(InScope { row: Some(row), .. }) => return Ok(row.clone()),
            Some(InScope { row: None, .. }) => true,
            None => false,
        };
        let info = self.inner.get(tenant, session)?;
        if in_scope {
            self.remember(tenant, session, &info);
        }
        Ok(info)
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
        let set = self.inner.set_switches(tenant, session, switches);
        match &set {
            Ok(info) => self.remember(tenant, session, info),
            Err(_) => self.forget(tenant, session),
        }
        set
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

    fn entries(&self, tenant: &Tenant, session: &SessionId) -> Result<Vec<Entry>, SessionError> {
        self.inner.entries(tenant, session)
    }

    fn path(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<Vec<Entry>, SessionError> {
        self.inner.path(tenant, session, leaf)
    }

    fn context(
        &self,
        tenant: &Tenant,
        session: &SessionId,
        leaf: Option<&str>,
    ) -> Result<Vec<Message>, SessionError> {
        self.inner.context(tenant, session, leaf)
    }
}
