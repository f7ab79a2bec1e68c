//! Each turn's recall kept where it was injected. A turn's simulated `search_memories` pair sits
//! right after the user message it was searched for; if the next user turn's request left it
//! out, that request would share with the previous one only the messages before the pair, and
//! the provider would write everything after it — the previous turn's whole tool loop — to its
//! prompt cache again, on every user turn. [`KeptRecalls`] sends every earlier turn's pair again,
//! byte for byte, at the place it first had, so each request starts with the one before it.
//!
//! Keeping a pair is not free either: every later call reads it from the cache. So when a turn
//! ends (the next user message arrives), its pair is weighed as the cost-aware offload schedule
//! weighs an offload ([`crate::pipeline::schedule`]): it stays when leaving now would rewrite more
//! (the turn's messages after it, at the write price instead of the read price) than keeping it
//! costs in reads over the calls the run is expected to make; otherwise it leaves at once, while
//! little follows it ([`RecallLeaving::CheaperToLeave`]). A pair that stayed is not weighed again:
//! the more follows it, the dearer its leaving. Kept pairs leave together, where leaving is free
//! or must happen:
//! - the prompt cache has gone cold (no request within the policy's TTL): nothing cached is lost;
//! - the message a pair followed has left the context (a compaction summarised it, the turn
//!   limit cut it, the client's conversation branched): the request changed there anyway;
//! - their tokens together exceed [`RecallSettings::max_kept_tokens`]: a prefix break, named
//!   in the report, so that old recalls never crowd the conversation out of the window.
//!
//! Nothing here is stored in the session; it is per-session state the engine keeps, as it keeps
//! the offload decisions.
//!
//! ```
//! use skald_core::memory::recall::{KeepTerms, KeptRecalls, Placement, simulated_call};
//! use skald_core::message::{Message, Role};
//!
//! let pair = |query: &str| simulated_call("search_memories", serde_json::json!({"query": query}), "{}".into());
//! let mut kept = KeptRecalls::default();
//! let mut messages = vec![Message::text(Role::User, "Which database do we use for billing?")];
//! let terms = KeepTerms { cache_warm: true, ..KeepTerms::default() };
//! let (first, _) = kept.place(messages.clone(), Placement::AfterAnchor, pair("billing"), 40, &terms);
//! assert_eq!(first.len(), 3);
//!
//! // The next user turn: the first turn's pair is still where it was.
//! messages.push(Message::text(Role::Assistant, "PostgreSQL."));
//! messages.push(Message::text(Role::User, "And how are its backups scheduled?"));
//! let (second, report) = kept.place(messages, Placement::AfterAnchor, pair("backups"), 40, &terms);
//! assert_eq!(second[..3], first[..]);
//! assert_eq!(second.len(), 7);
//! assert_eq!(report.kept, 1);
//! ```
//!
//! [`RecallSettings::max_kept_tokens`]: super::RecallSettings::max_kept_tokens

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde::Serialize;

use super::{is_simulated, user_text};
use crate::message::{Block, Message};
use crate::pipeline::schedule::CachePrices;
use crate::tokens::estimate::estimate_message_tokens;

/// Where a recall goes relative to the user message it was searched for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Right after the message (and the simulated calls already following it): the message was
    /// in the conversation the call was given.
    AfterAnchor,
    /// Right before it: the host sends its prompt after the view (OpenClaw's `assemble`), so
    /// the model read the recall before the prompt, and the prompt is stored after it.
    BeforeAnchor,
}

/// The user message a recall belongs to: its text (as [`user_text`] reads it) and how many such
/// messages came before it, with the recall's [`Placement`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct RecallAnchor {
    text_hash: u64,
    ordinal: usize,
    placement: Placement,
}

impl RecallAnchor {
    /// The anchor of a recall made for the messages whose [`user_messages`] are `users`: their
    /// latest message a person wrote. `None` when there is none.
    fn of_latest_user(users: &[(usize, u64)], placement: Placement) -> Option<RecallAnchor> {
        let ordinal = users.len().checked_sub(1)?;
        let (_, text_hash) = users[ordinal];
        Some(RecallAnchor {
            text_hash,
            ordinal,
            placement,
        })
    }

    /// Whether both anchors name the same user message (wherever the recall goes).
    fn same_message(&self, other: &RecallAnchor) -> bool {
        self.text_hash == other.text_hash && self.ordinal == other.ordinal
    }
}

/// Why earlier turns' recalls left the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecallLeaving {
    /// The prompt cache had expired: leaving rewrote nothing that was cached.
    CacheCold,
    /// The turn it belonged to had just ended, and the little that followed it cost less to
    /// rewrite than keeping it would cost in reads over the calls expected: a prefix break,
    /// chosen as the cheaper.
    CheaperToLeave,
    /// Together they were over `max_kept_tokens`: a prefix break.
    OverBudget,
    /// The message it followed is no longer in the context (compaction, turn limit, a branch).
    AnchorGone,
}

/// An earlier turn's recall that left with this call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftRecall {
    /// Why it left.
    pub cause: RecallLeaving,
    /// Its estimated tokens.
    pub tokens: u64,
}

/// What [`KeptRecalls::place`] did with earlier turns' recalls on one call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KeptRecallReport {
    /// Earlier turns' recalls sent again where they were first injected.
    pub kept: usize,
    /// Their estimated tokens.
    pub kept_tokens: u64,
    /// Earlier turns' recalls that left with this call.
    pub left: Vec<LeftRecall>,
}

/// What a call's [`KeptRecalls::place`] weighs keeping with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeepTerms {
    /// The previous request of the session was within the prompt cache's lifetime.
    pub cache_warm: bool,
    /// Kept recalls over this many tokens together all leave
    /// ([`RecallSettings::max_kept_tokens`](super::RecallSettings::max_kept_tokens)).
    pub max_kept_tokens: u64,
    /// The provider's cache prices.
    pub prices: CachePrices,
    /// Calls the run is expected to make after this one
    /// ([`crate::pipeline::schedule::expected_remaining_calls`]).
    pub expected_remaining_calls: f64,
}

impl Default for KeepTerms {
    /// A cold cache (nothing earlier is kept), 8,000 tokens, Anthropic's prices, no calls to come.
    fn default() -> KeepTerms {
        KeepTerms {
            cache_warm: false,
            max_kept_tokens: 8_000,
            prices: CachePrices::ANTHROPIC,
            expected_remaining_calls: 0.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct KeptRecall {
    anchor: RecallAnchor,
    injection: Vec<Message>,
    tokens: u64,
}

/// Every turn's recall of a session, kept where it was injected (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptRecalls {
    /// Earlier turns' recalls, oldest first.
    past: Vec<KeptRecall>,
    /// The current turn's: the calls of one turn (the agent's tool loop) send the same.
    current: Option<KeptRecall>,
}

impl KeptRecalls {
    /// `messages` for one call with every kept recall and this call's `injection` (what recall
    /// chose for the call's latest user message, to go at `placement` from it; empty when
    /// nothing) in place, kept
    /// or let go on `terms`. The injection of a call whose anchor is the current turn's keeps
    /// the current turn's place; a new anchor ends the current turn, whose recall is then
    /// weighed (see the module docs).
    pub fn place(
        &mut self,
        messages: Vec<Message>,
        placement: Placement,
        injection: Vec<Message>,
        tokens: u64,
        terms: &KeepTerms,
    ) -> (Vec<Message>, KeptRecallReport) {
        let mut report = KeptRecallReport::default();
        // Nothing kept and nothing to place: no pass over the messages (the common call, with
        // recall finding nothing).
        if self.past.is_empty() && self.current.is_none() && injection.is_empty() {
            return (messages, report);
        }
        let users = user_messages(&messages);
        let anchor = RecallAnchor::of_latest_user(&users, placement);
        let same_turn = match (&self.current, &anchor) {
            (Some(current), Some(anchor)) => current.anchor.same_message(anchor),
            (Some(_), None) | (None, Some(_)) | (None, None) => false,
        };
        if !same_turn && let Some(finished) = self.current.take() {
            if terms.cache_warm && worth_keeping(&finished, &messages, &users, terms) {
                self.past.push(finished);
            } else if terms.cache_warm {
                report.left.push(LeftRecall {
                    cause: RecallLeaving::CheaperToLeave,
                    tokens: finished.tokens,
                });
            } else {
                report.left.push(LeftRecall {
                    cause: RecallLeaving::CacheCold,
                    tokens: finished.tokens,
                });
            }
        }
        if !injection.is_empty() {
            match (&mut self.current, anchor) {
                (Some(current), _) => {
                    current.injection = injection;
                    current.tokens = tokens;
                }
                (None, Some(anchor)) => {
                    self.current = Some(KeptRecall {
                        anchor,
                        injection,
                        tokens,
                    })
                }
                // A recall has a user message to search for; without one there is no place.
                (None, None) => {}
            }
        }
        let past_tokens: u64 = self.past.iter().map(|kept| kept.tokens).sum();
        let leaving = if !terms.cache_warm {
            Some(RecallLeaving::CacheCold)
        } else if past_tokens > terms.max_kept_tokens {
            Some(RecallLeaving::OverBudget)
        } else {
            None
        };
        if let Some(cause) = leaving {
            report
                .left
                .extend(self.past.drain(..).map(|kept| LeftRecall {
                    cause,
                    tokens: kept.tokens,
                }));
        }
        let messages = self.insert_all(messages, &users, &mut report);
        report.kept = self.past.len();
        report.kept_tokens = self.past.iter().map(|kept| kept.tokens).sum();
        (messages, report)
    }

    /// Every injection held, for the caller's accounting of what it keeps.
    pub fn injections(&self) -> impl Iterator<Item = &[Message]> {
        self.past
            .iter()
            .chain(&self.current)
            .map(|kept| kept.injection.as_slice())
    }

    /// Places every kept recall, oldest first, each at its anchor at or after the previous
    /// one's; a recall whose anchor is gone leaves (and is reported), as does one repeating a
    /// call id already placed (the same query twice: a request may not hold two calls of one id).
    fn insert_all(
        &mut self,
        messages: Vec<Message>,
        users: &[(usize, u64)],
        report: &mut KeptRecallReport,
    ) -> Vec<Message> {
        let mut cursor = 0;
        let mut ids = HashSet::new();
        let mut at_positions: Vec<(usize, Vec<Message>)> = Vec::new();
        let mut place = |kept: &KeptRecall, cursor: &mut usize| -> Option<usize> {
            let at = anchor_index(users, &kept.anchor, *cursor)?;
            let call_ids = call_ids(&kept.injection);
            if call_ids.iter().any(|id| ids.contains(id)) {
                return None;
            }
            ids.extend(call_ids);
            *cursor = at + 1;
            Some(match kept.anchor.placement {
                Placement::BeforeAnchor => at,
                Placement::AfterAnchor => {
                    at + 1
                        + messages[at + 1..]
                            .iter()
                            .take_while(|message| is_simulated(message))
                            .count()
                }
            })
        };
        let mut still = Vec::with_capacity(self.past.len());
        for kept in self.past.drain(..) {
            match place(&kept, &mut cursor) {
                Some(position) => {
                    at_positions.push((position, kept.injection.clone()));
                    still.push(kept);
                }
                None => report.left.push(LeftRecall {
                    cause: RecallLeaving::AnchorGone,
                    tokens: kept.tokens,
                }),
            }
        }
        self.past = still;
        if let Some(current) = &self.current {
            match place(current, &mut cursor) {
                Some(position) => at_positions.push((position, current.injection.clone())),
                // Its anchor is this call's latest user message, so it is always found unless
                // an earlier recall claimed it; then this call goes without.
                None => self.current = None,
            }
        }
        if at_positions.is_empty() {
            return messages;
        }
        let added: usize = at_positions
            .iter()
            .map(|(_, injection)| injection.len())
            .sum();
        let mut out = Vec::with_capacity(messages.len() + added);
        let mut pending = at_positions.into_iter().peekable();
        for (index, message) in messages.into_iter().enumerate() {
            while let Some((_, injection)) = pending.next_if(|(position, _)| *position == index) {
                out.extend(injection);
            }
            out.push(message);
        }
        for (_, injection) in pending {
            out.extend(injection);
        }
        out
    }
}

/// Whether a just-finished turn's recall should stay: leaving now would rewrite the cached
/// messages that followed it in the turn (from its anchor to the next message a person wrote)
/// at the write price instead of the read price; staying costs its tokens at the read price
/// on every call expected. Staying must cost less. A recall whose anchor is gone is kept here
/// and let go by the placement, which names why.
fn worth_keeping(
    finished: &KeptRecall,
    messages: &[Message],
    users: &[(usize, u64)],
    terms: &KeepTerms,
) -> bool {
    let Some(at) = anchor_index(users, &finished.anchor, 0) else {
        return true;
    };
    let next_user = users
        .iter()
        .map(|(index, _)| *index)
        .find(|index| *index > at)
        .unwrap_or(messages.len());
    let followed_by: u64 = messages[at + 1..next_user]
        .iter()
        .map(estimate_message_tokens)
        .sum();
    let rewrite = followed_by as f64 * (terms.prices.cache_write - terms.prices.cache_read);
    let reads = finished.tokens as f64 * terms.prices.cache_read * terms.expected_remaining_calls;
    rewrite > reads
}

/// Where `anchor`'s message is among `users` (see [`user_messages`]), at or after message
/// `from`: the message of the anchor's ordinal if it still has the anchor's text, else the
/// first with that text.
fn anchor_index(users: &[(usize, u64)], anchor: &RecallAnchor, from: usize) -> Option<usize> {
    users
        .get(anchor.ordinal)
        .filter(|(at, hash)| *at >= from && *hash == anchor.text_hash)
        .or_else(|| {
            users
                .iter()
                .find(|(at, hash)| *at >= from && *hash == anchor.text_hash)
        })
        .map(|(at, _)| *at)
}

/// The messages a person wrote: their index and a hash of their text.
fn user_messages(messages: &[Message]) -> Vec<(usize, u64)> {
    messages
        .iter()
        .enumerate()
        .filter_map(|(at, message)| {
            let text = user_text(message);
            (!text.is_empty()).then(|| {
                let mut hasher = DefaultHasher::new();
                text.hash(&mut hasher);
                (at, hasher.finish())
            })
        })
        .collect()
}

fn call_ids(injection: &[Message]) -> Vec<String> {
    injection
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            Block::ToolCall(call) => Some(call.id.clone()),
            Block::ToolResult(_)
            | Block::Text(_)
            | Block::Image(_)
            | Block::Thinking(_)
            | Block::Opaque(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::memory::recall::{insert_after_first_user, simulated_call};
    use crate::message::Role;
    use serde_json::json;

    fn pair(query: &str) -> Vec<Message> {
        simulated_call(
            "search_memories",
            json!({"query": query}),
            format!("{{\"memories\":[\"about {query}\"]}}"),
        )
    }

    fn user(text: &str) -> Message {
        Message::text(Role::User, text)
    }

    fn assistant(text: &str) -> Message {
        Message::text(Role::Assistant, text)
    }

    /// A warm cache with room for everything, and no calls expected after this one (so keeping
    /// a recall costs nothing).
    const WARM: KeepTerms = KeepTerms {
        cache_warm: true,
        max_kept_tokens: 10_000,
        prices: CachePrices::ANTHROPIC,
        expected_remaining_calls: 0.0,
    };

    /// Calls `place` on [`WARM`] terms, for a recall of 100 tokens.
    fn warm(
        kept: &mut KeptRecalls,
        messages: &[Message],
        injection: Vec<Message>,
    ) -> (Vec<Message>, KeptRecallReport) {
        kept.place(
            messages.to_vec(),
            Placement::AfterAnchor,
            injection,
            100,
            &WARM,
        )
    }

    #[test]
    fn every_request_starts_with_the_previous_one_over_ten_turns_with_recall() {
        let mut kept = KeptRecalls::default();
        let mut messages: Vec<Message> = Vec::new();
        let mut previous: Vec<Message> = Vec::new();
        for turn in 1..=10 {
            messages.push(user(&format!("question number {turn} about billing")));
            // Two calls in the turn (a tool loop): the second adds to the first.
            for call in 0..2 {
                let (sent, report) = warm(&mut kept, &messages, pair(&format!("q{turn}")));
                assert!(
                    sent.starts_with(&previous),
                    "turn {turn} call {call} does not start with the previous request"
                );
                assert_eq!(report.kept, turn - 1);
                assert!(report.left.is_empty());
                previous = sent;
                messages.push(assistant(&format!("step {call} of turn {turn}")));
            }
        }
        let pairs = previous
            .iter()
            .filter(|message| is_simulated(message))
            .count();
        assert_eq!(pairs, 20);
    }

    #[test]
    fn a_turn_without_recall_keeps_the_earlier_ones_in_place() {
        let mut kept = KeptRecalls::default();
        let mut messages = vec![user("which database holds invoices")];
        let (first, _) = warm(&mut kept, &messages, pair("invoices"));
        messages.push(assistant("postgres"));
        messages.push(user("thanks, and now something unrelated entirely"));
        let (second, report) = warm(&mut kept, &messages, Vec::new());
        assert!(second.starts_with(&first));
        assert_eq!(second.len(), 5);
        assert_eq!(report.kept, 1);
    }

    #[test]
    fn a_cold_cache_lets_earlier_recalls_go_and_keeps_the_current_one() {
        let mut kept = KeptRecalls::default();
        let mut messages = vec![user("which database holds invoices")];
        warm(&mut kept, &messages, pair("invoices"));
        messages.push(assistant("postgres"));
        messages.push(user("how are backups of it scheduled"));
        let cold = KeepTerms {
            cache_warm: false,
            ..WARM
        };
        let (sent, report) = kept.place(
            messages.clone(),
            Placement::AfterAnchor,
            pair("backups"),
            100,
            &cold,
        );
        assert_eq!(
            report.left,
            [LeftRecall {
                cause: RecallLeaving::CacheCold,
                tokens: 100
            }]
        );
        assert_eq!(report.kept, 0);
        // Only this turn's pair, after the latest user message.
        assert_eq!(sent.len(), 5);
        assert!(is_simulated(&sent[3]) && is_simulated(&sent[4]));
        assert!(!is_simulated(&sent[1]));
    }

    #[test]
    fn over_the_budget_every_earlier_recall_leaves_at_once() {
        let mut kept = KeptRecalls::default();
        let mut messages = Vec::new();
        let mut lefts = Vec::new();
        for turn in 0..6 {
            messages.push(user(&format!("question {turn} about the invoices table")));
            let terms = KeepTerms {
                max_kept_tokens: 250,
                ..WARM
            };
            let (_, report) = kept.place(
                messages.clone(),
                Placement::AfterAnchor,
                pair(&format!("q{turn}")),
                100,
                &terms,
            );
            lefts.push(report.left.len());
            messages.push(assistant("ok"));
        }
        // Past recalls reach 300 tokens on the fourth turn, all three leave together; then
        // they gather again.
        assert_eq!(lefts, [0, 0, 0, 3, 0, 0]);
    }

    #[test]
    fn a_recall_whose_message_was_compacted_away_leaves_and_the_rest_stay() {
        let mut kept = KeptRecalls::default();
        let mut messages = Vec::new();
        for turn in 0..3 {
            messages.push(user(&format!("question {turn} about the invoices table")));
            warm(&mut kept, &messages, pair(&format!("q{turn}")));
            messages.push(assistant("ok"));
        }
        // A compaction replaced the first turn by a summary.
        let mut compacted = vec![user("<summary>the first question</summary> summary of it")];
        compacted.extend(messages[2..].iter().cloned());
        compacted.push(user("question 3 about the invoices table"));
        let (sent, report) = warm(&mut kept, &compacted, pair("q3"));
        assert_eq!(
            report.left,
            [LeftRecall {
                cause: RecallLeaving::AnchorGone,
                tokens: 100
            }]
        );
        assert_eq!(report.kept, 2);
        let pairs = sent.iter().filter(|message| is_simulated(message)).count();
        assert_eq!(pairs, 6);
        // Question 1's pair follows question 1.
        assert_eq!(sent[1].plain_text(), "question 1 about the invoices table");
        assert!(is_simulated(&sent[2]));
    }

    #[test]
    fn a_recall_before_a_pending_prompt_stays_before_it_once_it_is_stored() {
        let mut kept = KeptRecalls::default();
        let prompt = user("which database holds invoices");
        let mut messages = vec![user("hello there, a first question"), assistant("hi")];
        messages.push(prompt.clone());
        let (mut first, _) = kept.place(
            messages.clone(),
            Placement::BeforeAnchor,
            pair("invoices"),
            100,
            &WARM,
        );
        // What the model saw: the recall, then the prompt the host sends after the view.
        assert_eq!(first.last(), Some(&prompt));
        assert!(is_simulated(&first[2]));
        first.pop();
        // The next call of the same run: the prompt is stored; no prompt pending.
        messages.push(assistant("let me look"));
        let (second, report) = warm(&mut kept, &messages, pair("invoices"));
        assert!(second.starts_with(&first), "{second:?}");
        assert_eq!(second[4], prompt);
        assert_eq!(report.kept, 0);
    }

    #[test]
    fn a_finished_turns_recall_stays_when_its_leaving_would_rewrite_more_than_keeping_costs() {
        // 100 tokens read on each of 50 calls expected (500 at the read price) against the
        // rewrite of what followed it: a 40-token answer (46) leaves, a 4,000-token tool loop
        // (4,600) stays.
        let terms = KeepTerms {
            expected_remaining_calls: 50.0,
            ..WARM
        };
        for (followed_by, stays) in [("x".repeat(160), false), ("x".repeat(16_000), true)] {
            let mut kept = KeptRecalls::default();
            let mut messages = vec![user("which database holds invoices")];
            kept.place(
                messages.clone(),
                Placement::AfterAnchor,
                pair("invoices"),
                100,
                &terms,
            );
            messages.push(assistant(&followed_by));
            messages.push(user("and where are refunds kept"));
            let (sent, report) = kept.place(
                messages.clone(),
                Placement::AfterAnchor,
                pair("refunds"),
                100,
                &terms,
            );
            let pairs = sent.iter().filter(|message| is_simulated(message)).count();
            if stays {
                assert_eq!((report.kept, pairs), (1, 4));
                assert!(report.left.is_empty());
            } else {
                assert_eq!((report.kept, pairs), (0, 2));
                assert_eq!(
                    report.left,
                    [LeftRecall {
                        cause: RecallLeaving::CheaperToLeave,
                        tokens: 100
                    }]
                );
            }
        }
    }

    #[test]
    fn the_same_call_id_twice_is_sent_once() {
        let mut kept = KeptRecalls::default();
        let mut messages = vec![user("which database holds invoices")];
        warm(&mut kept, &messages, pair("same"));
        messages.push(assistant("postgres"));
        messages.push(user("which database holds refunds"));
        let (sent, _) = warm(&mut kept, &messages, pair("same"));
        let pairs = sent.iter().filter(|message| is_simulated(message)).count();
        assert_eq!(pairs, 2);
    }

    #[test]
    fn the_session_start_listing_stays_between_the_first_message_and_its_recall() {
        let mut kept = KeptRecalls::default();
        let listing = simulated_call("memory_ls", json!({"uri": "viking://"}), "[]".into());
        let mut messages =
            insert_after_first_user(vec![user("which database holds invoices")], listing.clone());
        let (first, _) = warm(&mut kept, &messages, pair("invoices"));
        assert_eq!(first[1..3], listing[..]);
        messages.push(assistant("postgres"));
        messages.push(user("and refunds, where are they kept"));
        let (second, _) = warm(&mut kept, &messages, pair("refunds"));
        assert!(second.starts_with(&first));
    }
}
