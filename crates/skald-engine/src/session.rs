//! What the engine remembers about one session between requests: the decisions that must repeat
//! byte for byte (which results left the context, which skill memories were appended), the memo
//! that makes repeating them cheap, the prompt-cache clocks, the refs already stored, the
//! calibration of its token estimates against what the provider reported, and what makes a
//! request that brings nothing new cheap (the rebuilt context, the turn's recall, the host's
//! last sync) and one that brings a little cheap too (the stored session, caught up with by
//! reading only what was appended).

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use skald_core::assemble_record::AssembleRecord;
use skald_core::compaction::CompactionOutcome;
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Message, Usage};
use skald_core::pipeline::offload::{ArgumentsCache, OffloadCache};
use skald_core::pipeline::prune::{PruneClock, PruneMarks};
use skald_core::pipeline::truncate::TruncateMemory;
use skald_core::session::Session;
use skald_core::tokens::Calibration;
use skald_store::sessions::{SessionError, SessionInfo, SessionStore, SessionSwitches};

use crate::compact::CompactResult;
use crate::footprint::{self, MAP_ENTRY_OVERHEAD, string_entry_bytes};

/// The model name calibration uses when the host does not name one.
pub const UNNAMED_MODEL: &str = "unnamed";

/// Per-session state kept by whoever drives the engine (the server keeps one per session; replay
/// keeps one per transcript and policy). Start with `SessionState::default()`.
#[derive(Debug, Clone, Default)]
pub struct SessionState {
    /// Call ids whose results left the context; once decided, they stay out (sticky).
    pub(crate) offloaded_calls: HashSet<String>,
    /// The cost-aware schedule's memory of the previous request: a cheap identity of each
    /// message the offload stage was given, to tell which leading messages the prompt cache
    /// holds now.
    pub(crate) previous_offload_input: Vec<u128>,
    /// Requests assembled in this session: the run's length so far, from which the cost-aware
    /// schedule predicts how many calls an offload will serve, and the view how many reads a
    /// kept recall will cost.
    pub(crate) requests_assembled: u64,
    /// Whether the previous request carried the fetch tool and the REF_ID instruction.
    pub(crate) fetch_tool_sent: bool,
    pub(crate) offload_cache: OffloadCache,
    pub(crate) arguments_cache: ArgumentsCache,
    /// When the previous request was assembled (epoch ms): the prompt cache is warm within the
    /// policy's TTL of it.
    pub(crate) last_request_ms: Option<i64>,
    pub(crate) prune_clock: PruneClock,
    /// The results a sticky pruning policy trimmed or cleared: they stay so (OpenClaw 2026.9).
    pub(crate) prune_marks: PruneMarks,
    /// What an aggregate truncation budget needs to keep sent results' bytes frozen.
    pub(crate) truncate_memory: TruncateMemory,
    /// Ref ids known to be durably stored for this session's tenant.
    pub(crate) stored_refs: HashSet<String>,
    /// Token estimates of assembled messages by their cheap identity.
    pub(crate) estimates: HashMap<u128, u64>,
    /// What memory gave the session at its start (profile, tool memories, directory listing),
    /// kept so every later call sends the same bytes.
    pub(crate) session_memory: Option<crate::memory::SessionMemory>,
    /// The skill memory appended to each `SKILL.md` read, by tool call id ("" when nothing was
    /// remembered then): decided once, so later requests send the same bytes.
    pub(crate) skill_memories: HashMap<String, String>,
    /// What recall chose for the current turn (see [`crate::memory::RecallMemo`]).
    pub(crate) recall_memo: Option<crate::memory::RecallMemo>,
    /// Every turn's recall, sent again where it went while the prompt cache is warm.
    pub(crate) kept_recalls: skald_core::memory::recall::KeptRecalls,
    /// What the provider reported against what skald counted, per model.
    pub(crate) calibration: Calibration,
    /// The model and the tokens skald counted for the last view it prepared, to pair with the
    /// usage the provider reports for that call.
    pub(crate) last_counted: Option<(String, u64)>,
    /// The stored session's context as last rebuilt, and the state it was rebuilt from.
    pub(crate) context: Option<CachedContext>,
    /// The stored session as last read, with its tenant, caught up with incrementally (see
    /// [`SessionState::stored_session`]).
    stored: Option<(String, Session)>,
    /// [`footprint::entry_bytes`] summed over `stored`'s entries, kept as entries are read so
    /// [`SessionState::approx_bytes`] does not walk the session.
    stored_bytes: usize,
    sync_mark: Option<SyncMark>,
    /// The session's switches as its row said at the last read ([`SessionState::stored_session`]
    /// reads the row on every call, so a switch set by any server is honoured from the next).
    pub(crate) switches: SessionSwitches,
    /// The usage, model and assemble record of the latest answers a caller relayed (the
    /// proxy), by a fingerprint of their content: the client sends an answer back without
    /// them, and the sync that stores it puts them back ([`SessionState::usage_of_answer`]).
    answer_usage: Vec<(u64, RelayedAnswer)>,
    /// What the pipeline did on the latest assembled request whose answer is not stored yet
    /// ([`crate::view::prepare_view`] sets it): the proxy pairs it with the answer it relays,
    /// and a sync stores it on the first new answer that has none.
    pub(crate) pending_assemble: Option<AssembleRecord>,
}

/// What skald knew of an answer when it relayed it, and the client's copy lacks.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RelayedAnswer {
    /// What the provider reported.
    pub(crate) usage: Option<Usage>,
    /// The model that answered.
    pub(crate) model: Option<String>,
    /// What the pipeline did on the request that produced it.
    pub(crate) assemble: Option<AssembleRecord>,
}

impl RelayedAnswer {
    /// Its bytes: the entry, the model's name and the assemble record's ref ids.
    fn approx_bytes(&self) -> usize {
        std::mem::size_of::<(u64, RelayedAnswer)>()
            + self.model.as_ref().map_or(0, String::len)
            + self.assemble.as_ref().map_or(0, assemble_bytes)
    }
}

/// The heap bytes of an assemble record: its offloaded ref ids (the rest are numbers).
fn assemble_bytes(record: &AssembleRecord) -> usize {
    record
        .offloaded_refs
        .iter()
        .map(|id| id.len() + std::mem::size_of::<String>())
        .sum()
}

/// Answers whose usage is remembered at most (the latest; a client sends an answer back with
/// its next request).
const REMEMBERED_ANSWERS: usize = 64;

fn answer_fingerprint(message: &Message) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    skald_core::session_id::content_key(message).hash(&mut hasher);
    hasher.finish()
}

/// One pairing of skald's count with the provider's, fed to the calibration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsageObservation {
    /// The model the call was made to ([`UNNAMED_MODEL`] when the host named none); calibration is
    /// kept per model.
    pub model: String,
    /// Tokens skald estimated for the call's view.
    pub counted: u64,
    /// Input tokens the provider reported (uncached, cache reads and cache writes).
    pub reported: u64,
}

/// What a host last brought into the session from a client's full conversation (the proxy's
/// sync): a fingerprint per client message and the stored session's state right after. A next
/// request whose conversation starts with those messages, with the session unchanged since,
/// only has its new tail to append — no need to read the session back and compare.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncMark {
    /// A full-content fingerprint of each client message synced, in the client's order.
    pub fingerprints: Vec<u128>,
    /// The stored session's entry count right after the sync; a different count means another
    /// writer changed the session since.
    pub entry_count: u64,
    /// The stored session's leaf right after the sync (`None` for a session without entries).
    pub leaf_id: Option<String>,
}

/// A rebuilt context and what identifies the stored session it came from: sessions are
/// append-only, so the same entry count and leaf mean the same entries on the same path.
#[derive(Debug, Clone)]
pub(crate) struct CachedContext {
    entry_count: u64,
    leaf_id: Option<String>,
    messages: Vec<Message>,
    /// [`footprint::messages_bytes`] of `messages`, measured once when it was rebuilt.
    bytes: usize,
}

/// Leaves an answer's assemble record out: it is skald's bookkeeping (the timeline reads it from
/// the entries), not context, and left out once here it costs no clone per call.
fn without_assemble_records(messages: &mut [Message]) {
    for message in messages {
        message.meta.assemble = None;
    }
}

/// A memo of the offload or arguments cache, on average: a key, a decision and, for the few
/// results that left the context, a placeholder (a digest of at most 300 characters by default
/// and a ref id). Their contents live in `skald_core` behind private fields, so they are
/// counted at this size rather than walked.
const OFFLOAD_MEMO_BYTES: usize = 256;

impl SessionState {
    /// Remembers the provider's usage (and model) of an answer relayed to a client, with what
    /// the pipeline did on the request that produced it (the pending assemble record, taken),
    /// so the answer the client sends back is stored with them — the session's timeline of
    /// calls reads them there. An answer with neither is not remembered.
    pub fn remember_answer_usage(&mut self, answer: &Message) {
        let assemble = self.pending_assemble.take();
        if answer.meta.usage.is_none() && assemble.is_none() {
            return;
        }
        if self.answer_usage.len() >= REMEMBERED_ANSWERS {
            self.answer_usage.remove(0);
        }
        let relayed = RelayedAnswer {
            usage: answer.meta.usage,
            model: answer.meta.model.clone(),
            assemble,
        };
        self.answer_usage
            .push((answer_fingerprint(answer), relayed));
    }

    /// What was remembered for a relayed answer of this content.
    pub(crate) fn usage_of_answer(&self, answer: &Message) -> Option<RelayedAnswer> {
        if self.answer_usage.is_empty() {
            return None;
        }
        let fingerprint = answer_fingerprint(answer);
        self.answer_usage
            .iter()
            .rev()
            .find(|(key, _)| *key == fingerprint)
            .map(|(_, relayed)| relayed.clone())
    }

    /// Approximately how many bytes this state holds, for a cache that bounds its states by
    /// size. Counted: the stored session held (every entry's strings, JSON and blocks, measured
    /// as entries are read), the rebuilt context, the session-start memory and the turn's
    /// recall, the skill memories, the offloaded call and stored ref ids, the estimate memo, the
    /// calibration and the sync mark — see the engine's `footprint` module for how a message is
    /// sized. Estimated rather than walked: the offload and arguments memos, at
    /// `OFFLOAD_MEMO_BYTES` each. Not counted: allocator overhead and spare capacity, the
    /// session header, reports' counts and error strings. Messages shared between the stored
    /// session and the context are separate copies and counted twice, as they are held twice.
    ///
    /// Cheap: proportional to the number of ids and memo entries, never to the session's length
    /// or its text (the session's and the context's sizes are kept when they are read).
    pub fn approx_bytes(&self) -> usize {
        let ids =
            |ids: &HashSet<String>| ids.iter().map(|id| string_entry_bytes(id)).sum::<usize>();
        let estimate_entry = std::mem::size_of::<(u128, u64)>() + MAP_ENTRY_OVERHEAD;
        let skill_memories: usize = self
            .skill_memories
            .iter()
            .map(|(call, memory)| {
                string_entry_bytes(call) + std::mem::size_of::<String>() + memory.len()
            })
            .sum();
        let calibration: usize = self
            .calibration
            .models
            .keys()
            .map(|model| {
                string_entry_bytes(model)
                    + std::mem::size_of::<skald_core::tokens::ModelCalibration>()
            })
            .sum();
        let sync_mark = self.sync_mark.as_ref().map_or(0, |mark| {
            mark.fingerprints.len() * std::mem::size_of::<u128>()
                + mark.leaf_id.as_ref().map_or(0, String::len)
        });
        let stored = self
            .stored
            .as_ref()
            .map_or(0, |(tenant, _)| tenant.len() + self.stored_bytes);
        std::mem::size_of::<SessionState>()
            + ids(&self.offloaded_calls)
            + self.previous_offload_input.len() * std::mem::size_of::<u128>()
            + self.prune_marks.approx_bytes()
            + self.truncate_memory.approx_bytes()
            + ids(&self.stored_refs)
            + (self.offload_cache.len() + self.arguments_cache.len()) * OFFLOAD_MEMO_BYTES
            + self.estimates.len() * estimate_entry
            + self
                .session_memory
                .as_ref()
                .map_or(0, crate::memory::SessionMemory::approx_bytes)
            + skill_memories
            + self
                .recall_memo
                .as_ref()
                .map_or(0, crate::memory::RecallMemo::approx_bytes)
            + self
                .kept_recalls
                .injections()
                .map(crate::footprint::messages_bytes)
                .sum::<usize>()
            + calibration
            + self
                .last_counted
                .as_ref()
                .map_or(0, |(model, _)| model.len())
            + self.context.as_ref().map_or(0, |context| {
                context.bytes + context.leaf_id.as_ref().map_or(0, String::len)
            })
            + stored
            + sync_mark
            + self
                .answer_usage
                .iter()
                .map(|(_, relayed)| relayed.approx_bytes())
                .sum::<usize>()
            + self.pending_assemble.as_ref().map_or(0, assemble_bytes)
    }

    /// Drops the stored session and the context rebuilt from it — the bulk of a long session's
    /// state, and both read again from the store on the next request — and keeps the decisions
    /// and memos that make later requests repeat their bytes (offloads, skill memories, the
    /// session-start memory, the turn's recall) and cheap. For a cache over its byte budget.
    pub fn forget_stored_session(&mut self) {
        self.stored = None;
        self.stored_bytes = 0;
        self.context = None;
    }

    /// Number of results this session has moved out of the context for good.
    pub fn offloaded_count(&self) -> usize {
        self.offloaded_calls.len()
    }

    /// Number of refs this session has stored.
    pub fn stored_ref_count(&self) -> usize {
        self.stored_refs.len()
    }

    /// Takes note of a compaction that wrote a checkpoint: the refs its tail truncation stored
    /// are refs of this session (the REF_ID instruction and the fetch tool stay from now on).
    pub fn note_compaction(&mut self, result: &CompactResult) {
        if result.checkpoint_entry_id.is_none() {
            return;
        }
        if let CompactionOutcome::Compacted {
            tail_truncation: Some(truncation),
            ..
        } = &result.outcome
        {
            for new_ref in &truncation.new_refs {
                self.stored_refs.insert(new_ref.id.to_string());
            }
        }
    }

    /// Remembers that skald counted `counted` tokens for the call about to be made to `model`.
    pub fn record_counted(&mut self, model: Option<&str>, counted: u64) {
        let model = model.unwrap_or(UNNAMED_MODEL).to_owned();
        self.last_counted = Some((model, counted));
    }

    /// Feeds the provider's reported input tokens for the last counted call to the
    /// calibration; `None` when no call was counted since the last report (the pairing would be
    /// a guess).
    pub fn observe_usage(&mut self, reported: u64) -> Option<UsageObservation> {
        let (model, counted) = self.last_counted.take()?;
        self.calibration.observe(&model, counted, reported);
        Some(UsageObservation {
            model,
            counted,
            reported,
        })
    }

    /// `counted` corrected by what this session learnt about `model` (unchanged until the
    /// provider has reported usage for it).
    pub fn calibrated_tokens(&self, model: Option<&str>, counted: u64) -> u64 {
        self.calibration
            .correct(model.unwrap_or(UNNAMED_MODEL), counted)
    }

    /// The host's last [`SyncMark`], if it left one.
    pub fn sync_mark(&self) -> Option<&SyncMark> {
        self.sync_mark.as_ref()
    }

    /// Records (or forgets) what the host synced last.
    pub fn set_sync_mark(&mut self, mark: Option<SyncMark>) {
        self.sync_mark = mark;
    }

    /// The stored session's context (`compact::session_context` from its leaf), read and rebuilt
    /// only when the session changed since the last call: a request over a long session that
    /// added nothing costs one row read, not a decode of every entry.
    pub fn session_context(
        &mut self,
        sessions: &dyn SessionStore,
        tenant: &Tenant,
        session_id: &SessionId,
    ) -> Result<Vec<Message>, SessionError> {
        let info = sessions.get(tenant, session_id)?;
        self.switches = info.switches;
        if let Some(cached) = &self.context {
            if cached.entry_count == info.entry_count && cached.leaf_id == info.leaf_id {
                return Ok(cached.messages.clone());
            }
        }
        let held = self.context.take();
        let session = self.stored_session_as_of(sessions, tenant, session_id, &info)?;
        // A conversation that grew on its path (the common case: every request appends its
        // new messages) extends the context held; anything else rebuilds it.
        let appended = held.as_ref().and_then(|held| {
            let since = held.leaf_id.as_deref()?;
            skald_core::session::context_appended(session, since, None)
        });
        let (entry_count, leaf_id) = (
            // What was read, which a write between the two reads may have moved past.
            session.entries().len() as u64,
            session.leaf_id().map(str::to_owned),
        );
        let context = match (held, appended) {
            (Some(mut held), Some(mut appended)) => {
                without_assemble_records(&mut appended);
                held.bytes += footprint::messages_bytes(&appended);
                held.messages.extend(appended);
                held.entry_count = entry_count;
                held.leaf_id = leaf_id;
                held
            }
            (Some(_) | None, None) | (None, Some(_)) => {
                let mut messages = skald_core::session::session_context(session, None);
                without_assemble_records(&mut messages);
                CachedContext {
                    entry_count,
                    leaf_id,
                    bytes: footprint::messages_bytes(&messages),
                    messages,
                }
            }
        };
        let messages = context.messages.clone();
        self.context = Some(context);
        Ok(messages)
    }

    /// The stored session, up to date. Sessions are append-only (the store refuses to change or
    /// delete an entry), so the entries held from an earlier read are still the first ones: only
    /// those appended since are read, and a growing conversation costs its new entries, not its
    /// whole history.
    pub fn stored_session(
        &mut self,
        sessions: &dyn SessionStore,
        tenant: &Tenant,
        session_id: &SessionId,
    ) -> Result<&Session, SessionError> {
        let info = sessions.get(tenant, session_id)?;
        self.stored_session_as_of(sessions, tenant, session_id, &info)
    }

    /// Whether a request made at `now_ms` finds the prompt cache warm: the previous request of
    /// the session was assembled within `cache_ttl_ms` of it.
    pub(crate) fn cache_warm_at(&self, now_ms: i64, cache_ttl_ms: u64) -> bool {
        let ttl = i64::try_from(cache_ttl_ms).unwrap_or(i64::MAX);
        self.last_request_ms
            .is_some_and(|at| now_ms.saturating_sub(at) <= ttl)
    }

    /// [`SessionState::stored_session`] when the caller has just read the session's row
    /// (`info`): caught up to it without reading the row again.
    pub fn stored_session_as_of(
        &mut self,
        sessions: &dyn SessionStore,
        tenant: &Tenant,
        session_id: &SessionId,
        info: &SessionInfo,
    ) -> Result<&Session, SessionError> {
        self.switches = info.switches;
        let caught_up = match self.stored.take() {
            Some((held_tenant, mut held))
                if held_tenant == info.tenant
                    && held.header.id == info.id
                    && (held.entries().len() as u64) <= info.entry_count =>
            {
                let have = held.entries().len() as u64;
                if have < info.entry_count {
                    let appended = sessions.entries_after(tenant, session_id, have)?;
                    self.stored_bytes += appended.iter().map(footprint::entry_bytes).sum::<usize>();
                    held.extend_from_entries(appended);
                }
                // A write between the two reads leaves more entries than the row said: read
                // the whole session rather than guess its leaf.
                let consistent = held.entries().len() as u64 == info.entry_count
                    && held.set_leaf(info.leaf_id.as_deref()).is_ok();
                consistent.then_some(held)
            }
            Some(_) | None => None,
        };
        let session = match caught_up {
            Some(session) => session,
            None => {
                // Whatever was held is gone (`take` above): its size goes with it.
                self.stored_bytes = 0;
                let session = sessions.load(tenant, session_id)?;
                self.stored_bytes = session.entries().iter().map(footprint::entry_bytes).sum();
                session
            }
        };
        let (_, session) = self.stored.insert((info.tenant.clone(), session));
        Ok(session)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use skald_core::message::Role;
    use skald_core::session::SessionHeader;
    use skald_store::SqliteSessionStore;
    use skald_store::sessions::NewSession;

    use super::*;

    /// A tenant name of the tests, parsed (it is well formed).
    fn tenant_named(name: &str) -> skald_core::ids::Tenant {
        skald_core::ids::Tenant::parse(name).unwrap()
    }

    /// A session id of the tests, parsed (it is well formed).
    fn session_named(id: &str) -> skald_core::ids::SessionId {
        skald_core::ids::SessionId::parse(id).unwrap()
    }

    fn create(store: &SqliteSessionStore, tenant: &str, id: &str) {
        let header = SessionHeader {
            id: id.into(),
            ..SessionHeader::default()
        };
        store
            .create(&tenant_named(tenant), NewSession::new(header, "openai"))
            .unwrap();
    }

    #[test]
    fn the_context_is_rebuilt_exactly_when_the_session_changed() {
        let store = SqliteSessionStore::in_memory().unwrap();
        create(&store, "t", "s");
        let first = store
            .append_message(
                &tenant_named("t"),
                &session_named("s"),
                Message::text(Role::User, "one"),
            )
            .unwrap();
        let mut state = SessionState::default();
        assert_eq!(
            state
                .session_context(&store, &tenant_named("t"), &session_named("s"))
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            state
                .session_context(&store, &tenant_named("t"), &session_named("s"))
                .unwrap()
                .len(),
            1
        );
        store
            .append_message(
                &tenant_named("t"),
                &session_named("s"),
                Message::text(Role::Assistant, "two"),
            )
            .unwrap();
        assert_eq!(
            state
                .session_context(&store, &tenant_named("t"), &session_named("s"))
                .unwrap()
                .len(),
            2
        );
        // A leaf moved back: same entry count, another path.
        store
            .set_leaf(&tenant_named("t"), &session_named("s"), Some(&first.id))
            .unwrap();
        let context = state
            .session_context(&store, &tenant_named("t"), &session_named("s"))
            .unwrap();
        assert_eq!(context.len(), 1);
        assert_eq!(context[0].plain_text(), "one");
    }

    #[test]
    fn a_grown_conversation_extends_the_held_context_as_a_rebuild_would() {
        let store = SqliteSessionStore::in_memory().unwrap();
        create(&store, "t", "s");
        let (tenant, session) = (tenant_named("t"), session_named("s"));
        let mut state = SessionState::default();
        for (round, text) in ["one", "two", "three", "four"].into_iter().enumerate() {
            let role = if round % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let mut message = Message::text(role, text);
            // An answer's assemble record stays out of the context, extended or rebuilt.
            message.meta.assemble = Some(Box::default());
            store.append_message(&tenant, &session, message).unwrap();
            let held = state.session_context(&store, &tenant, &session).unwrap();
            let mut fresh = SessionState::default();
            let rebuilt = fresh.session_context(&store, &tenant, &session).unwrap();
            assert_eq!(held, rebuilt, "after {text:?}");
            assert_eq!(held.len(), round + 1);
            assert!(held.iter().all(|message| message.meta.assemble.is_none()));
            let (Some(held), Some(rebuilt)) = (&state.context, &fresh.context) else {
                panic!("both contexts are cached");
            };
            assert_eq!(held.bytes, rebuilt.bytes, "its size is kept as it grows");
        }
    }

    #[test]
    fn the_stored_session_is_caught_up_with_and_equals_a_fresh_read() {
        let store = SqliteSessionStore::in_memory().unwrap();
        create(&store, "t", "s");
        let mut state = SessionState::default();
        assert!(
            state
                .stored_session(&store, &tenant_named("t"), &session_named("s"))
                .unwrap()
                .entries()
                .is_empty()
        );
        let first = store
            .append_message(
                &tenant_named("t"),
                &session_named("s"),
                Message::text(Role::User, "one"),
            )
            .unwrap();
        for text in ["two", "three"] {
            store
                .append_message(
                    &tenant_named("t"),
                    &session_named("s"),
                    Message::text(Role::Assistant, text),
                )
                .unwrap();
        }
        assert_eq!(
            state
                .stored_session(&store, &tenant_named("t"), &session_named("s"))
                .unwrap(),
            &store.load(&tenant_named("t"), &session_named("s")).unwrap()
        );
        // A branch from the first message: the leaf moves back, then a new entry grows from it.
        store
            .set_leaf(&tenant_named("t"), &session_named("s"), Some(&first.id))
            .unwrap();
        assert_eq!(
            state
                .stored_session(&store, &tenant_named("t"), &session_named("s"))
                .unwrap(),
            &store.load(&tenant_named("t"), &session_named("s")).unwrap()
        );
        store
            .append_message(
                &tenant_named("t"),
                &session_named("s"),
                Message::text(Role::Assistant, "two, again"),
            )
            .unwrap();
        let held = state
            .stored_session(&store, &tenant_named("t"), &session_named("s"))
            .unwrap()
            .clone();
        assert_eq!(
            held,
            store.load(&tenant_named("t"), &session_named("s")).unwrap()
        );
        assert_eq!(held.entries().len(), 4);
        assert_eq!(
            held.build_context(None)
                .iter()
                .map(Message::plain_text)
                .collect::<Vec<_>>(),
            ["one", "two, again"]
        );
    }

    #[test]
    fn a_held_session_of_another_id_or_tenant_is_not_caught_up_with() {
        let store = SqliteSessionStore::in_memory().unwrap();
        for id in ["a", "b"] {
            create(&store, "t", id);
            store
                .append_message(
                    &tenant_named("t"),
                    &session_named(id),
                    Message::text(Role::User, id),
                )
                .unwrap();
        }
        let mut state = SessionState::default();
        state
            .stored_session(&store, &tenant_named("t"), &session_named("a"))
            .unwrap();
        assert_eq!(
            state
                .stored_session(&store, &tenant_named("t"), &session_named("b"))
                .unwrap(),
            &store.load(&tenant_named("t"), &session_named("b")).unwrap()
        );
        // The same id in another tenant is another session.
        create(&store, "u", "b");
        for text in ["x", "y"] {
            store
                .append_message(
                    &tenant_named("u"),
                    &session_named("b"),
                    Message::text(Role::User, text),
                )
                .unwrap();
        }
        assert_eq!(
            state
                .stored_session(&store, &tenant_named("u"), &session_named("b"))
                .unwrap(),
            &store.load(&tenant_named("u"), &session_named("b")).unwrap()
        );
    }

    #[test]
    fn approx_bytes_grows_with_what_is_held_and_falls_when_it_is_dropped() {
        let store = SqliteSessionStore::in_memory().unwrap();
        create(&store, "t", "s");
        store
            .append_message(
                &tenant_named("t"),
                &session_named("s"),
                Message::text(Role::User, "short"),
            )
            .unwrap();
        let mut state = SessionState::default();
        let empty = state.approx_bytes();
        state
            .session_context(&store, &tenant_named("t"), &session_named("s"))
            .unwrap();
        let small = state.approx_bytes();
        assert!(small > empty);
        // A large output, read incrementally: held once in the session, once in the context.
        let output = "x".repeat(1_000_000);
        store
            .append_message(
                &tenant_named("t"),
                &session_named("s"),
                Message::text(Role::Assistant, output.clone()),
            )
            .unwrap();
        state
            .session_context(&store, &tenant_named("t"), &session_named("s"))
            .unwrap();
        let large = state.approx_bytes();
        assert!(large >= small + 2 * output.len(), "{large} {small}");
        assert!(large < small + 2 * output.len() + 4_096, "{large} {small}");
        // The same figure as a state that read the session in one go.
        let mut fresh = SessionState::default();
        fresh
            .session_context(&store, &tenant_named("t"), &session_named("s"))
            .unwrap();
        assert_eq!(fresh.approx_bytes(), large);

        // Memos count too, and clearing them gives their bytes back.
        for index in 0..1_000_u32 {
            state.estimates.insert(u128::from(index), 1);
            state.offloaded_calls.insert(format!("call_{index:04}"));
        }
        let memoised = state.approx_bytes();
        assert!(memoised >= large + 1_000 * (24 + 9), "{memoised} {large}");
        state.estimates.clear();
        state.offloaded_calls.clear();
        assert_eq!(state.approx_bytes(), large);

        state.forget_stored_session();
        assert_eq!(state.approx_bytes(), empty);
        // What was forgotten is read again, whole.
        state
            .session_context(&store, &tenant_named("t"), &session_named("s"))
            .unwrap();
        assert_eq!(state.approx_bytes(), large);
    }

    #[test]
    fn approx_bytes_counts_the_relayed_answers_and_their_assemble_records() {
        let mut state = SessionState::default();
        let empty = state.approx_bytes();
        let refs: Vec<String> = (0..50).map(|at| format!("ref_{at:040}")).collect();
        let ref_bytes: usize = refs.iter().map(String::len).sum();
        for at in 0..REMEMBERED_ANSWERS {
            state.pending_assemble = Some(AssembleRecord {
                offloaded_refs: refs.clone(),
                ..AssembleRecord::default()
            });
            let mut answer = Message::text(Role::Assistant, format!("answer {at}"));
            answer.meta.model = Some("gpt-test".to_owned());
            state.remember_answer_usage(&answer);
        }
        assert_eq!(state.answer_usage.len(), REMEMBERED_ANSWERS);
        let held = state.approx_bytes() - empty;
        // Every remembered record's ref ids and model name, at the least.
        assert!(
            held >= REMEMBERED_ANSWERS * (ref_bytes + "gpt-test".len()),
            "{held}"
        );
        // And the pending record, until an answer takes it.
        state.pending_assemble = Some(AssembleRecord {
            offloaded_refs: refs,
            ..AssembleRecord::default()
        });
        assert!(state.approx_bytes() - empty >= held + ref_bytes);
    }

    #[test]
    fn calibration_corrects_only_after_a_report() {
        let mut state = SessionState::default();
        assert_eq!(state.calibrated_tokens(Some("gpt-test"), 1_000), 1_000);
        state.record_counted(Some("gpt-test"), 1_000);
        state.observe_usage(1_500);
        assert_eq!(state.calibrated_tokens(Some("gpt-test"), 1_000), 1_500);
    }
}
