//! The engine's cache of per-session state ([`SessionState`]), bounded by count
//! ([`EngineConfig::max_cached_sessions`](super::EngineConfig::max_cached_sessions)) and by
//! bytes ([`EngineConfig::max_cached_bytes`](super::EngineConfig::max_cached_bytes)).
//!
//! The state is a cache (memoised decisions, the stored session as last read, the rebuilt
//! context, calibration): a session whose state is evicted rebuilds it from the store on its
//! next request, so a long-running server's memory follows its active sessions, not every
//! session it ever saw, nor the size of the largest tool output one of them held.
//!
//! Sizes are measured when a request releases a state (its guard is dropped: the request has
//! the state in hand then, and nobody else can be changing it), with
//! [`SessionState::approx_bytes`], and kept as a running total. Eviction takes the least
//! recently used *idle* states — referenced by the cache alone — until the cache is within both
//! bounds; a state a request holds (or waits for) is never evicted, so two requests of one
//! session always share one state. A state that alone is over the byte budget sheds its copy of
//! the stored session and context when released, and is emptied if that is not enough: its next
//! request reads the session again.

use lru::LruCache;
use skald_core::ids::{SessionId, Tenant};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::SessionState;

/// Which session a state belongs to: tenant and session id.
type Key = (Tenant, SessionId);

/// One session's engine state, behind an async lock: two requests of the same session run one
/// after the other (their decisions build on each other), requests of different sessions in
/// parallel. Lock it with `lock` or `lock_owned`; releasing the guard reports
/// the state's size to the cache.
pub type SessionSlot = Arc<Slot>;

/// A cached state and what its release needs to report back.
#[derive(Debug)]
pub struct Slot {
    state: Arc<tokio::sync::Mutex<SessionState>>,
    key: Key,
    /// The state's size as counted in the cache's total (from its last release). Written only
    /// under the cache's lock, so the total and the slots' figures agree.
    bytes: AtomicUsize,
    /// Weak: the cache holds its slots, and a slot must not keep a dropped server's cache alive.
    cache: Weak<SessionCache>,
}

impl Slot {
    /// Waits for the state (requests of the session before this one finish first).
    pub async fn lock(&self) -> SlotGuard<'_> {
        SlotGuard {
            guard: self.state.lock().await,
            slot: self,
        }
    }

    /// [`Slot::lock`] with a guard that owns its slot, for work that outlives the caller (a
    /// streamed answer's task).
    pub async fn lock_owned(self: Arc<Self>) -> OwnedSlotGuard {
        OwnedSlotGuard {
            guard: self.state.clone().lock_owned().await,
            slot: self,
        }
    }

    /// Measures `state` as its request lets go of it, trims it if it alone is over the budget,
    /// and reports its size to the cache (which may evict other, idle, states).
    fn release(&self, state: &mut SessionState) {
        let Some(cache) = self.cache.upgrade() else {
            return;
        };
        let mut bytes = state.approx_bytes();
        if bytes > cache.max_bytes {
            // The stored session and its context are most of a large state and are read again
            // on the next request; the decisions kept make that request's bytes repeat.
            state.forget_stored_session();
            bytes = state.approx_bytes();
            if bytes > cache.max_bytes {
                *state = SessionState::default();
                bytes = state.approx_bytes();
            }
        }
        cache.record(self, bytes);
    }
}

/// A request's hold on a session's state (from the slot's `lock`).
pub struct SlotGuard<'a> {
    guard: tokio::sync::MutexGuard<'a, SessionState>,
    slot: &'a Slot,
}

/// A request's hold on a session's state that owns its slot (from the slot's `lock_owned`).
pub struct OwnedSlotGuard {
    guard: tokio::sync::OwnedMutexGuard<SessionState>,
    slot: SessionSlot,
}

impl Deref for SlotGuard<'_> {
    type Target = SessionState;
    fn deref(&self) -> &SessionState {
        &self.guard
    }
}

impl DerefMut for SlotGuard<'_> {
    fn deref_mut(&mut self) -> &mut SessionState {
        &mut self.guard
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.slot.release(&mut self.guard);
    }
}

impl Deref for OwnedSlotGuard {
    type Target = SessionState;
    fn deref(&self) -> &SessionState {
        &self.guard
    }
}

impl DerefMut for OwnedSlotGuard {
    fn deref_mut(&mut self) -> &mut SessionState {
        &mut self.guard
    }
}

impl Drop for OwnedSlotGuard {
    fn drop(&mut self) {
        self.slot.release(&mut self.guard);
    }
}

/// The states of the sessions seen lately, least recently used first out.
pub struct SessionCache {
    inner: Mutex<Inner>,
    max_sessions: usize,
    max_bytes: usize,
}

struct Inner {
    slots: LruCache<Key, SessionSlot>,
    /// The sum of the slots' `bytes`.
    total_bytes: usize,
}

impl std::fmt::Debug for SessionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCache")
            .field("max_sessions", &self.max_sessions)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl SessionCache {
    /// A cache of at most `max_sessions` states and `max_bytes` bytes of them (both at least
    /// 1).
    pub fn new(max_sessions: usize, max_bytes: usize) -> Arc<SessionCache> {
        Arc::new(SessionCache {
            inner: Mutex::new(Inner {
                slots: LruCache::unbounded(),
                total_bytes: 0,
            }),
            max_sessions: max_sessions.max(1),
            max_bytes: max_bytes.max(1),
        })
    }

    /// The state of one session of one tenant, created empty on first use.
    pub fn slot(self: &Arc<Self>, tenant: &Tenant, session: &SessionId) -> SessionSlot {
        let mut inner = self.lock();
        let key = (tenant.clone(), session.clone());
        let slot = inner
            .slots
            .get_or_insert(key.clone(), || {
                Arc::new(Slot {
                    state: Arc::default(),
                    key,
                    bytes: AtomicUsize::new(0),
                    cache: Arc::downgrade(self),
                })
            })
            .clone();
        // Slots that became idle since the last release may be evictable now.
        self.evict(&mut inner);
        slot
    }

    /// Sessions whose state is cached.
    pub fn len(&self) -> usize {
        self.lock().slots.len()
    }

    /// Whether no state is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cached states' sizes as last measured, summed.
    pub fn bytes(&self) -> usize {
        self.lock().total_bytes
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The cache's bookkeeping is updated in single steps; a panic elsewhere leaves it usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts `slot`'s new size and evicts what is over the bounds.
    fn record(&self, slot: &Slot, bytes: usize) {
        let mut inner = self.lock();
        // A slot no longer cached (only possible if it was evicted while idle and then locked
        // through a reference kept elsewhere) is not in the total.
        let cached = inner
            .slots
            .peek(&slot.key)
            .is_some_and(|cached| std::ptr::eq(Arc::as_ptr(cached), slot));
        if cached {
            let before = slot.bytes.swap(bytes, Ordering::Relaxed);
            inner.total_bytes = inner.total_bytes.saturating_sub(before) + bytes;
        }
        self.evict(&mut inner);
    }

    /// Evicts least recently used idle states until the cache is within both bounds, or no
    /// idle state is left. Idle: only the cache references it — a request's slot, guard or
    /// wait holds another reference, and new references are handed out only under this lock.
    fn evict(&self, inner: &mut Inner) {
        let over = |count: usize, bytes: usize| count > self.max_sessions || bytes > self.max_bytes;
        if !over(inner.slots.len(), inner.total_bytes) {
            return;
        }
        let mut count = inner.slots.len();
        let mut bytes = inner.total_bytes;
        let mut victims = Vec::new();
        for (key, slot) in inner.slots.iter().rev() {
            if !over(count, bytes) {
                break;
            }
            if Arc::strong_count(slot) == 1 {
                victims.push(key.clone());
                count -= 1;
                bytes = bytes.saturating_sub(slot.bytes.load(Ordering::Relaxed));
            }
        }
        for key in victims {
            if let Some(slot) = inner.slots.pop(&key) {
                let freed = slot.bytes.load(Ordering::Relaxed);
                inner.total_bytes = inner.total_bytes.saturating_sub(freed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use skald_core::message::{Message, Role};
    use skald_core::session::SessionHeader;
    use skald_store::SqliteSessionStore;
    use skald_store::sessions::{NewSession, SessionStore};

    use super::*;

    /// A tenant name of the tests, parsed (it is well formed).
    fn tenant_named(name: &str) -> skald_core::ids::Tenant {
        skald_core::ids::Tenant::parse(name).unwrap()
    }

    /// A session id of the tests, parsed (it is well formed).
    fn session_named(id: &str) -> skald_core::ids::SessionId {
        skald_core::ids::SessionId::parse(id).unwrap()
    }

    /// A store with `count` sessions, each holding one output of `output_bytes`.
    fn store_with(count: usize, output_bytes: usize) -> SqliteSessionStore {
        let store = SqliteSessionStore::in_memory().unwrap();
        for index in 0..count {
            let id = format!("s{index}");
            let header = SessionHeader {
                id: id.clone(),
                ..SessionHeader::default()
            };
            store
                .create(&tenant_named("t"), NewSession::new(header, "openai"))
                .unwrap();
            store
                .append_message(
                    &tenant_named("t"),
                    &session_named(&id),
                    Message::text(Role::User, "x".repeat(output_bytes)),
                )
                .unwrap();
        }
        store
    }

    fn cache(max_sessions: usize, max_bytes: usize) -> Arc<SessionCache> {
        SessionCache::new(max_sessions, max_bytes)
    }

    async fn read(cache: &Arc<SessionCache>, store: &SqliteSessionStore, id: &str) -> usize {
        let slot = cache.slot(&tenant_named("t"), &session_named(id));
        let mut state = slot.lock().await;
        state
            .session_context(store, &tenant_named("t"), &session_named(id))
            .unwrap()
            .len()
    }

    fn cached(cache: &SessionCache, id: &str) -> bool {
        cache
            .lock()
            .slots
            .peek(&(tenant_named("t"), session_named(id)))
            .is_some()
    }

    #[tokio::test]
    async fn the_cache_stays_under_its_byte_budget_evicting_the_oldest_idle_states() {
        let output = 1_000_000;
        let store = store_with(20, output);
        // Room for about five states (each holds the output twice: session and context).
        let cache = cache(10_000, 10 * output + output / 2);
        for index in 0..20 {
            assert_eq!(read(&cache, &store, &format!("s{index}")).await, 1);
            assert!(
                cache.bytes() <= 10 * output + output / 2,
                "{}",
                cache.bytes()
            );
        }
        assert_eq!(cache.len(), 5);
        assert!(cache.bytes() >= 5 * 2 * output);
        // The most recent ones stayed.
        assert!(cached(&cache, "s19") && cached(&cache, "s15") && !cached(&cache, "s14"));
    }

    #[tokio::test]
    async fn a_held_state_is_never_evicted() {
        let output = 1_000_000;
        let store = store_with(7, output);
        let cache = cache(10_000, 5 * output);
        let held = cache.slot(&tenant_named("t"), &session_named("s0"));
        {
            let mut state = held.lock().await;
            state
                .session_context(&store, &tenant_named("t"), &session_named("s0"))
                .unwrap();
        }
        // s0 is the least recently used, and over budget with the others, but a request
        // still holds its slot (as one waiting for its lock would).
        for index in 1..6 {
            read(&cache, &store, &format!("s{index}")).await;
        }
        assert!(
            cache
                .lock()
                .slots
                .peek(&held.key)
                .is_some_and(|slot| Arc::ptr_eq(slot, &held))
        );
        assert!(cache.bytes() <= 5 * output + held.lock().await.approx_bytes());
        // Once let go, it is evictable like the others.
        drop(held);
        read(&cache, &store, "s6").await;
        assert!(!cached(&cache, "s0"));
        assert!(cache.bytes() <= 5 * output);
    }

    #[tokio::test]
    async fn a_state_over_the_whole_budget_is_trimmed_when_released_and_rebuilt_next() {
        let output = 1_000_000;
        let store = store_with(1, output);
        let cache = cache(10_000, output / 2);
        let slot = cache.slot(&tenant_named("t"), &session_named("s0"));
        let held = {
            let mut state = slot.lock().await;
            let context = state
                .session_context(&store, &tenant_named("t"), &session_named("s0"))
                .unwrap();
            assert!(state.approx_bytes() > output);
            context
        };
        // Released: the stored session and context it read went, the cache counts what is left.
        assert!(cache.bytes() < output / 2);
        assert!(slot.lock().await.approx_bytes() < output / 2);
        // The next request reads them again and gets the same context.
        let mut state = slot.lock().await;
        assert_eq!(
            state
                .session_context(&store, &tenant_named("t"), &session_named("s0"))
                .unwrap(),
            held
        );
    }

    #[tokio::test]
    async fn a_released_state_is_measured_again_each_time() {
        let store = store_with(1, 10);
        let cache = cache(10_000, usize::MAX);
        let slot = cache.slot(&tenant_named("t"), &session_named("s0"));
        drop(slot.lock().await);
        let empty = cache.bytes();
        {
            let mut state = slot.lock().await;
            state
                .session_context(&store, &tenant_named("t"), &session_named("s0"))
                .unwrap();
        }
        let read = cache.bytes();
        assert!(read > empty);
        store
            .append_message(
                &tenant_named("t"),
                &session_named("s0"),
                Message::text(Role::User, "y".repeat(100_000)),
            )
            .unwrap();
        {
            let mut state = slot.clone().lock_owned().await;
            state
                .session_context(&store, &tenant_named("t"), &session_named("s0"))
                .unwrap();
        }
        assert!(cache.bytes() >= read + 2 * 100_000);
    }
}
