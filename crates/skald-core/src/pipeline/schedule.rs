//! Cost-aware offload scheduling: whether taking old content out of a request pays for the
//! prompt-cache write it causes.
//!
//! A provider bills the leading part of a request that repeats the previous one (sent within the
//! cache TTL) as cache reads, and everything from the first changed byte on as cache writes.
//! Replacing a result that is already in the cache with its placeholder therefore costs a
//! rewrite of every cached token after it, at the write price instead of the read price; what
//! it saves is the removed tokens on each later call, at the read price. A short run ends before
//! that saving pays the rewrite back, and then offloading costs more than keeping — which is
//! what [`plan_rewrite`] prevents: a rewrite happens only when the tokens it removes, over the
//! calls it is expected to serve, outweigh the write it causes. Pending offloads leave together:
//! the rewrite point is the earliest of them, and every later one rides along for free.
//!
//! Content not yet in the cache (the new tail of a request, or everything once the cache has
//! expired) costs nothing to rewrite, so an offload there always pays.
//!
//! The expected number of calls still to come is [`expected_remaining_calls`]: the run's calls
//! so far times a ratio. Why calls so far: with no knowledge of how long a run will last beyond
//! how long it has lasted, the scale-free (Copernican, Lindy) prior on its length gives
//! P(the run makes at least `r·t` more calls | it has made `t`) = 1 / (1 + r). Agent runs are
//! heavy-tailed (most end within tens of calls, a few go on for hundreds), the shape that prior
//! assumes. Which ratio depends on what a wrong guess costs:
//! - The session's first offload brings the fetch tool and rewrites everything cached: one lump,
//!   lost whole if the run ends soon. skald's preset weighs it at `r = 0.25`, the remaining
//!   length a run reaches 4 times in 5 (1 / 1.25 = 0.8): it is made only when it pays back even
//!   if the run goes on for just a quarter as long again (at 1, the median, it cost more than
//!   keeping on 4 of the 40 dev mini-swe-agent runs). That prior knows nothing of agent loops and
//!   is most pessimistic for young runs — at call 3 it expects less than a call more, so a first
//!   offload never happens while the cached prefix is small and its rewrite cheap. An agent run
//!   that has produced output worth offloading rarely stops within a dozen calls (the shortest
//!   of the 40 dev mini-swe-agent runs made 14), so the preset weighs a first offload over at
//!   least 12 calls to come (`first_offload_min_calls`): 84.5 % of `none` on those runs against
//!   87.8 % without, and still none above `none` (14 gives 83.6 %, 16 puts one run 0.3 % above).
//! - Later rewrites are small (a young result and the few messages after it) and many, so their
//!   errors average out over a run and their expectation is what counts. Under the prior cut at
//!   a horizon of `H` calls the expected remaining length is `t·ln(H/t)`, at least `2t` while
//!   `t ≤ H/e²`; skald weighs them at `r = 2`. On the dev Claude Code sessions this costs
//!   46 % of keeping everything, against 53 % at 0.25, and no transcript more than keeping.
//!
//! Every estimate here (chars/4 tokens, a digest's planned length) errs, so a rewrite must gain
//! a margin over its cost (a tenth in the preset): a 4-call Claude Code session lost 7 % to an
//! offload whose expected gain was 5 % of its cost.

use serde::{Deserialize, Serialize};

/// The provider's cache prices, as multiples of the price of an uncached input token.
///
/// Anthropic: writes 1.25 (the 5-minute cache; 2.0 for the 1-hour cache), reads 0.1. OpenAI's
/// automatic caching has no write premium (1.0) and discounts cached input to 0.5 (gpt-4o),
/// 0.25 (gpt-4.1) or 0.1 (gpt-5).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CachePrices {
    /// Price of a token written to the cache (or sent uncached), per uncached input token.
    pub cache_write: f64,
    /// Price of a token read from the cache, per uncached input token.
    pub cache_read: f64,
}

impl CachePrices {
    /// Anthropic's 5-minute prompt cache.
    pub const ANTHROPIC: CachePrices = CachePrices {
        cache_write: 1.25,
        cache_read: 0.1,
    };
    /// OpenAI's automatic caching, gpt-4.1's discount.
    pub const OPENAI: CachePrices = CachePrices {
        cache_write: 1.0,
        cache_read: 0.25,
    };

    /// Rejects prices no provider charges: negative, not finite, or reads dearer than writes.
    pub fn validate(&self) -> Result<(), String> {
        let ok = |price: f64| price.is_finite() && price >= 0.0;
        if !ok(self.cache_write) || !ok(self.cache_read) {
            return Err(format!(
                "prices must be finite and non-negative, found cache_write {} and cache_read {}",
                self.cache_write, self.cache_read
            ));
        }
        if self.cache_read > self.cache_write {
            return Err(format!(
                "cache_read ({}) is dearer than cache_write ({})",
                self.cache_read, self.cache_write
            ));
        }
        Ok(())
    }
}

impl Default for CachePrices {
    fn default() -> CachePrices {
        CachePrices::ANTHROPIC
    }
}

/// Calls a run is expected to make after this one, having made `calls_so_far` (this one
/// included): `ratio × calls_so_far` (see the module docs for why).
pub fn expected_remaining_calls(calls_so_far: u64, ratio: f64) -> f64 {
    (calls_so_far as f64 * ratio).max(0.0)
}

/// One offload that could happen in this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    /// Index of the message it changes.
    pub message_index: usize,
    /// Tokens it takes out of the request (original minus placeholder).
    pub saved_tokens: u64,
}

/// The request the offloads would change, as the cache sees it.
#[derive(Debug, Clone, Copy)]
pub struct RequestShape<'a> {
    /// Estimated tokens of each message, in order.
    pub message_tokens: &'a [u64],
    /// How many leading messages repeat the previous request within the TTL (read from the
    /// cache unless something at or before them changes); 0 when the cache is cold.
    pub cached_messages: usize,
    /// Tokens the host sends before the messages (system prompt, tool definitions) that are in
    /// the cache now; 0 when the cache is cold or they are unknown.
    pub cached_host_tokens: u64,
    /// Tokens the fetch tool and its instruction add to every request from the first offload
    /// on, when this offload would be the first (they go before the messages, so adding them
    /// rewrites everything cached); `None` when they are already there.
    pub first_offload_tokens: Option<u64>,
    /// Calls of the run so far, this one included.
    pub calls_so_far: u64,
    /// Calls the run is expected to make after this one at the least, whatever its age says
    /// (the policy's `first_offload_min_calls` for a first offload, else 0).
    pub min_remaining_calls: f64,
}

/// A rewrite worth making: every pending offload at or after `from_message` leaves now.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewrite {
    /// The earliest message the rewrite changes.
    pub from_message: usize,
    /// Indices into the `pending` slice given to [`plan_rewrite`] of the offloads that leave.
    pub leave: Vec<usize>,
    /// Expected saving net of the cache write, in uncached-input-token equivalents.
    pub net_gain: f64,
}

/// The rewrite with the largest expected net gain, if any gains: which of the `pending`
/// offloads should leave in this request.
///
/// For a rewrite from message `c` taking out `D` tokens, with `R` cached tokens from `c` on
/// (rewritten at the write price instead of read), `N` calls expected after this one, and
/// prices `w` (write) and `r` (read): the gain is `(N·r + w)·D − (w − r)·R` — `D` is neither
/// written now nor read on each later call. When the rewrite is the first offload, the fetch
/// tool and instruction (`T` tokens) come too: everything cached is rewritten, and `T` is
/// written now and read on every later call, `(w + N·r)·T`. A rewrite is made only when its gain
/// exceeds `margin` times its cost: the gain comes from estimates (chars/4 tokens, a digest's
/// planned length), and a rewrite whose gain is inside their error is as likely to lose as to
/// win.
pub fn plan_rewrite(
    shape: &RequestShape<'_>,
    pending: &[Pending],
    prices: CachePrices,
    remaining_calls_ratio: f64,
    margin: f64,
) -> Option<Rewrite> {
    if pending.is_empty() {
        return None;
    }
    let (w, r) = (prices.cache_write, prices.cache_read);
    let later = expected_remaining_calls(shape.calls_so_far, remaining_calls_ratio)
        .max(shape.min_remaining_calls);
    let cached = shape.cached_messages.min(shape.message_tokens.len());
    // cached_after[i]: cached message tokens from message i on.
    let mut cached_after = vec![0u64; cached + 1];
    for index in (0..cached).rev() {
        let tokens = shape.message_tokens.get(index).copied().unwrap_or(0);
        cached_after[index] = cached_after[index + 1] + tokens;
    }
    let cached_from = |message: usize| cached_after.get(message).copied().unwrap_or(0);
    let tool_cost = shape.first_offload_tokens.map_or(0.0, |tokens| {
        // Everything cached is rewritten, and the tool is paid for on every call from now.
        (w - r) * (shape.cached_host_tokens + cached_from(0)) as f64
            + (w + later * r) * tokens as f64
    });

    let mut order: Vec<usize> = (0..pending.len()).collect();
    order.sort_by_key(|&i| pending.get(i).map_or(usize::MAX, |p| p.message_index));
    let mut best: Option<Rewrite> = None;
    let mut saved = 0u64;
    // Walk from the latest offload back: each step moves the rewrite point earlier, adding the
    // offload there to the batch (a batch is always every pending offload from its point on).
    for (rank, &index) in order.iter().enumerate().rev() {
        let Some(item) = pending.get(index) else {
            continue;
        };
        saved += item.saved_tokens;
        // Offloads in the same message share its rewrite point: only the earliest rank counts.
        let same_as_previous = rank > 0
            && order
                .get(rank - 1)
                .and_then(|&i| pending.get(i))
                .is_some_and(|p| p.message_index == item.message_index);
        if same_as_previous {
            continue;
        }
        let rewritten = if shape.first_offload_tokens.is_some() {
            0.0 // counted in tool_cost: everything cached is rewritten anyway
        } else {
            (w - r) * cached_from(item.message_index) as f64
        };
        let cost = rewritten + tool_cost;
        let gain = (later * r + w) * saved as f64 - cost;
        if gain > margin * cost && best.as_ref().is_none_or(|b| gain > b.net_gain) {
            best = Some(Rewrite {
                from_message: item.message_index,
                leave: order.get(rank..).unwrap_or_default().to_vec(),
                net_gain: gain,
            });
        }
    }
    best
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn shape(tokens: &[u64], cached: usize, calls: u64) -> RequestShape<'_> {
        RequestShape {
            message_tokens: tokens,
            cached_messages: cached,
            cached_host_tokens: 0,
            first_offload_tokens: None,
            calls_so_far: calls,
            min_remaining_calls: 0.0,
        }
    }

    #[test]
    fn offload_waits_until_it_pays_for_its_cache_write() {
        // A 1,000-token result at message 2, with 4,000 cached tokens after it.
        let tokens = [500, 200, 1_000, 2_000, 2_000, 300];
        let pending = [Pending {
            message_index: 2,
            saved_tokens: 900,
        }];
        let at = |calls| {
            plan_rewrite(
                &shape(&tokens, 5, calls),
                &pending,
                CachePrices::ANTHROPIC,
                1.0,
                0.0,
            )
        };
        // Rewrite: 1.15 × 5,000 = 5,750. Gain: (0.1·N + 1.25) × 900 — pays once N ≥ 52.
        assert_eq!(at(5), None, "a young run does not pay the rewrite back");
        // With a margin of a quarter the gain must reach 1.25 × 5,750: N ≥ 67.
        let with_margin = |calls| {
            plan_rewrite(
                &shape(&tokens, 5, calls),
                &pending,
                CachePrices::ANTHROPIC,
                1.0,
                0.25,
            )
        };
        assert_eq!(with_margin(60), None, "inside the estimates' error");
        assert!(with_margin(70).is_some());
        assert_eq!(at(40), None);
        let late = at(60).expect("a long run pays it back");
        assert_eq!(late.leave, vec![0]);
        assert_eq!(late.from_message, 2);
        assert!(late.net_gain > 0.0);
    }

    #[test]
    fn pending_offloads_leave_together() {
        // Three results, each alone not worth its rewrite, together worth the earliest one's.
        let tokens = [500, 1_000, 300, 1_000, 300, 1_000, 300];
        let pending = [
            Pending {
                message_index: 5,
                saved_tokens: 900,
            },
            Pending {
                message_index: 1,
                saved_tokens: 900,
            },
            Pending {
                message_index: 3,
                saved_tokens: 900,
            },
        ];
        let one = plan_rewrite(
            &shape(&tokens, 7, 10),
            &pending[1..2],
            CachePrices::ANTHROPIC,
            1.0,
            0.0,
        );
        assert_eq!(one, None, "alone, the earliest does not pay");
        let all = plan_rewrite(
            &shape(&tokens, 7, 10),
            &pending,
            CachePrices::ANTHROPIC,
            1.0,
            0.0,
        )
        .expect("together they pay");
        assert_eq!(all.from_message, 1);
        let mut leave = all.leave.clone();
        leave.sort_unstable();
        assert_eq!(
            leave,
            vec![0, 1, 2],
            "all pending offloads leave in one rewrite"
        );
    }

    #[test]
    fn huge_outputs_leave_before_entering_the_cache() {
        // The result is in the new tail (messages 0..3 are cached): rewriting it costs nothing.
        let tokens = [500, 200, 300, 3_000];
        let pending = [Pending {
            message_index: 3,
            saved_tokens: 2_900,
        }];
        let plan = plan_rewrite(
            &shape(&tokens, 3, 2),
            &pending,
            CachePrices::ANTHROPIC,
            1.0,
            0.0,
        )
        .expect("free to take out");
        assert_eq!(plan.leave, vec![0]);
        // Once it is cached and followed by more, the same offload waits at call 2.
        let later = [500, 200, 300, 3_000, 4_000, 4_000];
        let pending = [Pending {
            message_index: 3,
            saved_tokens: 2_900,
        }];
        assert_eq!(
            plan_rewrite(
                &shape(&later, 6, 2),
                &pending,
                CachePrices::ANTHROPIC,
                1.0,
                0.0
            ),
            None
        );
    }

    #[test]
    fn openai_prices_make_rewrites_cheaper() {
        let tokens = [500, 200, 1_000, 2_000, 2_000, 300];
        let pending = [Pending {
            message_index: 2,
            saved_tokens: 900,
        }];
        let shape = shape(&tokens, 5, 15);
        assert_eq!(
            plan_rewrite(&shape, &pending, CachePrices::ANTHROPIC, 1.0, 0.0),
            None
        );
        // Anthropic: 1.15 × 5,000 rewritten against (0.1 × 15 + 1.25) × 900 saved. OpenAI: no
        // write premium and a smaller discount — 0.75 × 5,000 against (0.25 × 15 + 1) × 900.
        assert!(plan_rewrite(&shape, &pending, CachePrices::OPENAI, 1.0, 0.0).is_some());
    }

    #[test]
    fn the_first_offload_pays_for_the_fetch_tool() {
        let tokens = [500, 200, 300, 3_000];
        let pending = [Pending {
            message_index: 3,
            saved_tokens: 2_900,
        }];
        let mut first = shape(&tokens, 3, 2);
        first.first_offload_tokens = Some(400);
        assert!(plan_rewrite(&first, &pending, CachePrices::ANTHROPIC, 1.0, 0.0).is_some());
        // A small saving does not pay for adding the tool to a long cached prefix.
        first.cached_host_tokens = 25_000;
        let small = [Pending {
            message_index: 3,
            saved_tokens: 600,
        }];
        assert_eq!(
            plan_rewrite(&first, &small, CachePrices::ANTHROPIC, 1.0, 0.0),
            None
        );
    }

    #[test]
    fn a_young_runs_first_offload_is_weighed_over_its_minimum_horizon() {
        // Call 3 of a run: 1,566 cached tokens, a 1,066-token output pending, a 160-token tool.
        let tokens = [600, 966, 4_300];
        let pending = [Pending {
            message_index: 2,
            saved_tokens: 1_066,
        }];
        let mut young = shape(&tokens, 2, 3);
        young.first_offload_tokens = Some(160);
        // At a quarter of the run so far it expects less than a call more: the lump waits, and
        // grows with every call the prefix grows.
        assert_eq!(
            plan_rewrite(&young, &pending, CachePrices::ANTHROPIC, 0.25, 0.1),
            None
        );
        // Weighed over at least 12 calls to come, the cheap early lump pays.
        young.min_remaining_calls = 12.0;
        assert!(plan_rewrite(&young, &pending, CachePrices::ANTHROPIC, 0.25, 0.1).is_some());
        // The same horizon does not carry an offload whose lump is a long cached prefix.
        let old = [20_000, 966, 4_300];
        let mut late = shape(&old, 2, 3);
        late.first_offload_tokens = Some(160);
        late.min_remaining_calls = 12.0;
        assert_eq!(
            plan_rewrite(&late, &pending, CachePrices::ANTHROPIC, 0.25, 0.1),
            None
        );
    }

    #[test]
    fn a_cold_cache_makes_every_rewrite_free() {
        let tokens = [500, 1_000, 2_000, 2_000];
        let pending = [Pending {
            message_index: 1,
            saved_tokens: 900,
        }];
        assert!(
            plan_rewrite(
                &shape(&tokens, 0, 2),
                &pending,
                CachePrices::ANTHROPIC,
                1.0,
                0.0
            )
            .is_some()
        );
    }

    #[test]
    fn prices_are_validated() {
        assert!(CachePrices::ANTHROPIC.validate().is_ok());
        assert!(CachePrices::OPENAI.validate().is_ok());
        let odd = CachePrices {
            cache_write: 0.1,
            cache_read: 1.0,
        };
        assert!(odd.validate().unwrap_err().contains("dearer"));
        let nan = CachePrices {
            cache_write: f64::NAN,
            cache_read: 0.1,
        };
        assert!(nan.validate().is_err());
    }
}
