//! Prompt-cache and cost accounting for a sequence of requests, the way providers bill them.
//!
//! A request is a list of segments (tool definitions, system prompt, then each message) with a
//! fingerprint and a token count each. The tokens of the longest run of leading segments equal to
//! the previous request's, sent within the cache TTL of it, are cache reads (a tenth of the price);
//! the rest are cache writes (1.25× the price). This is Anthropic's prompt-cache model and a fair
//! upper bound of OpenAI's automatic caching.
//!
//! [`BreakpointCache`] is the finer model the replay bills a host's calls with: the provider
//! keeps an entry only where a request put a cache breakpoint (the end of the tools and system
//! prompt, the newest message) and looks a limited number of blocks back from each breakpoint
//! for one, so a change deep in the history costs everything after the system prompt, not just
//! what follows the change.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use skald_core::message::Usage;

/// Prices of input tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Pricing {
    /// Dollars per million uncached input tokens.
    pub input_per_million: f64,
    /// Multiplier for tokens written to the cache.
    pub cache_write_multiplier: f64,
    /// Multiplier for tokens read from the cache.
    pub cache_read_multiplier: f64,
    /// Multiplier for tokens written to the cache with a one-hour lifetime (Anthropic bills
    /// them at twice the input price, five-minute writes at 1.25 times).
    pub cache_write_1h_multiplier: f64,
}

impl Default for Pricing {
    fn default() -> Pricing {
        Pricing {
            input_per_million: 3.0,
            cache_write_multiplier: 1.25,
            cache_read_multiplier: 0.1,
            cache_write_1h_multiplier: 2.0,
        }
    }
}

impl Pricing {
    /// Dollars for a request of `uncached` uncached input tokens, `cache_write` tokens written to
    /// the cache and `cache_read` tokens read from it.
    pub fn cost(&self, uncached: u64, cache_write: u64, cache_read: u64) -> f64 {
        (uncached as f64
            + cache_write as f64 * self.cache_write_multiplier
            + cache_read as f64 * self.cache_read_multiplier)
            * self.input_per_million
            / 1e6
    }

    /// What writing `tokens` to the cache for an hour costs beyond writing them for five
    /// minutes (what [`Pricing::cost`] charges them).
    pub fn one_hour_write_surcharge(&self, tokens: u64) -> f64 {
        tokens as f64
            * (self.cache_write_1h_multiplier - self.cache_write_multiplier).max(0.0)
            * self.input_per_million
            / 1e6
    }

    /// Dollars for the input of a call the provider reported `usage` for, its one-hour cache
    /// writes at their own price.
    pub fn cost_of_usage(&self, usage: &Usage) -> f64 {
        self.cost(usage.input, usage.cache_write, usage.cache_read)
            + self.one_hour_write_surcharge(usage.cache_write_1h.min(usage.cache_write))
    }
}

/// One part of a request, for prefix matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Fingerprint of the segment's content; two segments are the same for the cache when theirs
    /// are equal.
    pub fingerprint: u128,
    /// Tokens the segment takes in the request.
    pub tokens: u64,
}

/// How one request was billed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestBill {
    /// Input tokens of the whole request: cache reads plus cache writes.
    pub total_tokens: u64,
    /// Tokens of the leading segments equal to the previous request's, sent within the TTL: billed
    /// as cache reads.
    pub cache_read_tokens: u64,
    /// The other tokens of the request (`total_tokens - cache_read_tokens`): billed as cache
    /// writes.
    pub cache_write_tokens: u64,
}

/// Tracks the previous request to bill the next one.
#[derive(Debug, Clone, Default)]
pub struct CacheAccount {
    previous: Vec<Segment>,
    previous_at_ms: Option<i64>,
    ttl_ms: i64,
}

impl CacheAccount {
    /// An account with nothing cached yet, whose cached prefix stays warm for `ttl_ms` milliseconds
    /// after each request.
    pub fn new(ttl_ms: i64) -> CacheAccount {
        CacheAccount {
            previous: Vec::new(),
            previous_at_ms: None,
            ttl_ms,
        }
    }

    /// Bills `segments` sent at `now_ms` and remembers them as the cached prefix.
    pub fn bill(&mut self, segments: Vec<Segment>, now_ms: i64) -> RequestBill {
        let total_tokens: u64 = segments.iter().map(|s| s.tokens).sum();
        let warm = self
            .previous_at_ms
            .is_some_and(|at| now_ms.saturating_sub(at) <= self.ttl_ms);
        let cache_read_tokens = if warm {
            segments
                .iter()
                .zip(&self.previous)
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| a.tokens)
                .sum()
        } else {
            0
        };
        self.previous = segments;
        self.previous_at_ms = Some(now_ms);
        RequestBill {
            total_tokens,
            cache_read_tokens,
            cache_write_tokens: total_tokens - cache_read_tokens,
        }
    }
}

/// How many tokens fewer than the previous call sent a call may read and still count as having
/// read all of it (a provider's cache granularity makes a hit read slightly less than was sent);
/// a call that read less than that broke the cache.
pub const CACHE_HIT_SLACK_TOKENS: u64 = 1_024;

/// How many segments before a breakpoint the provider looks for a cached prefix (Anthropic
/// checks about 20 content blocks back from each breakpoint; a segment is one message, which
/// may hold several blocks, so this is the generous reading).
pub const BREAKPOINT_LOOKBACK: usize = 20;

/// The prompt cache as Anthropic keeps it: an entry is the prefix up to a breakpoint of an
/// earlier request, alive for the TTL after it was last written or read; a request reads the
/// longest entry found at one of its own breakpoints or up to [`BREAKPOINT_LOOKBACK`] segments
/// before one.
#[derive(Debug, Clone, Default)]
pub struct BreakpointCache {
    /// Prefix hash of an entry → when it expires.
    entries: HashMap<u128, i64>,
    ttl_ms: i64,
}

impl BreakpointCache {
    /// An empty cache whose entries live `ttl_ms` milliseconds after each use.
    pub fn new(ttl_ms: i64) -> BreakpointCache {
        BreakpointCache {
            entries: HashMap::new(),
            ttl_ms,
        }
    }

    /// Puts the prefix of `segments` in the cache as if a request had ended there at `now_ms`
    /// (what an earlier session of the host left warm).
    pub fn keep(&mut self, segments: &[Segment], now_ms: i64) {
        let hash = segments.iter().fold(0u128, |hash, segment| {
            prefix_hash(hash, segment.fingerprint)
        });
        self.entries
            .insert(hash, now_ms.saturating_add(self.ttl_ms));
    }

    /// Bills `segments` sent at `now_ms` with cache breakpoints after the first `breakpoints[i]`
    /// segments each (counts beyond the request are ignored), and keeps their prefixes.
    pub fn bill(
        &mut self,
        segments: &[Segment],
        breakpoints: &[usize],
        now_ms: i64,
    ) -> RequestBill {
        let mut hashes = Vec::with_capacity(segments.len() + 1);
        let mut tokens_before = Vec::with_capacity(segments.len() + 1);
        let (mut hash, mut tokens) = (0u128, 0u64);
        hashes.push(hash);
        tokens_before.push(tokens);
        for segment in segments {
            hash = prefix_hash(hash, segment.fingerprint);
            tokens += segment.tokens;
            hashes.push(hash);
            tokens_before.push(tokens);
        }
        let breakpoints: Vec<usize> = breakpoints
            .iter()
            .copied()
            .filter(|&at| at > 0 && at <= segments.len())
            .collect();
        let alive = |entries: &HashMap<u128, i64>, at: usize| {
            entries
                .get(&hashes[at])
                .is_some_and(|&expires| expires >= now_ms)
        };
        let hit = breakpoints
            .iter()
            .filter_map(|&at| {
                (at.saturating_sub(BREAKPOINT_LOOKBACK).max(1)..=at)
                    .rev()
                    .find(|&candidate| alive(&self.entries, candidate))
            })
            .max();
        let expires = now_ms.saturating_add(self.ttl_ms);
        self.entries.retain(|_, &mut at| at >= now_ms);
        if let Some(at) = hit {
            self.entries.insert(hashes[at], expires);
        }
        for &at in &breakpoints {
            self.entries.insert(hashes[at], expires);
        }
        let cache_read_tokens = hit.map_or(0, |at| tokens_before[at]);
        RequestBill {
            total_tokens: tokens,
            cache_read_tokens,
            cache_write_tokens: tokens - cache_read_tokens,
        }
    }
}

/// The hash of a prefix extended by one segment.
fn prefix_hash(prefix: u128, fingerprint: u128) -> u128 {
    (prefix.rotate_left(7) ^ fingerprint).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn seg(fingerprint: u128, tokens: u64) -> Segment {
        Segment {
            fingerprint,
            tokens,
        }
    }

    #[test]
    fn shared_prefix_within_ttl_is_read_from_cache() {
        let mut account = CacheAccount::new(300_000);
        let first = account.bill(vec![seg(1, 100), seg(2, 50)], 0);
        assert_eq!(
            (first.cache_read_tokens, first.cache_write_tokens),
            (0, 150)
        );
        let second = account.bill(vec![seg(1, 100), seg(2, 50), seg(3, 10)], 60_000);
        assert_eq!(
            (second.cache_read_tokens, second.cache_write_tokens),
            (150, 10)
        );
    }

    #[test]
    fn a_changed_segment_ends_the_cached_prefix() {
        let mut account = CacheAccount::new(300_000);
        account.bill(vec![seg(1, 100), seg(2, 50), seg(3, 10)], 0);
        let bill = account.bill(vec![seg(1, 100), seg(9, 5), seg(3, 10)], 1_000);
        assert_eq!((bill.cache_read_tokens, bill.cache_write_tokens), (100, 15));
    }

    #[test]
    fn after_the_ttl_everything_is_written_again() {
        let mut account = CacheAccount::new(300_000);
        account.bill(vec![seg(1, 100)], 0);
        let bill = account.bill(vec![seg(1, 100)], 300_001);
        assert_eq!((bill.cache_read_tokens, bill.cache_write_tokens), (0, 100));
    }

    #[test]
    fn pricing_follows_the_multipliers() {
        let pricing = Pricing::default();
        let cost = pricing.cost(1_000_000, 1_000_000, 1_000_000);
        assert!((cost - (3.0 + 3.75 + 0.3)).abs() < 1e-9);
    }

    #[test]
    fn one_hour_writes_cost_twice_the_input_price() {
        let pricing = Pricing::default();
        let usage = Usage {
            input: 0,
            output: 0,
            cache_read: 0,
            cache_write: 2_000_000,
            cache_write_1h: 1_000_000,
        };
        assert!((pricing.cost_of_usage(&usage) - (3.75 + 6.0)).abs() < 1e-9);
    }

    #[test]
    fn a_breakpoint_cache_reads_the_previous_request_up_to_its_end() {
        let mut cache = BreakpointCache::new(300_000);
        let first = [seg(1, 100), seg(2, 50)];
        assert_eq!(cache.bill(&first, &[1, 2], 0).cache_read_tokens, 0);
        let second = [seg(1, 100), seg(2, 50), seg(3, 10)];
        let bill = cache.bill(&second, &[1, 3], 1_000);
        assert_eq!((bill.cache_read_tokens, bill.cache_write_tokens), (150, 10));
    }

    #[test]
    fn a_change_deep_in_the_history_reads_only_up_to_the_last_breakpoint_before_it() {
        let mut cache = BreakpointCache::new(300_000);
        let long: Vec<Segment> = (1..=30).map(|n| seg(n, 10)).collect();
        cache.bill(&long, &[1, long.len()], 0);
        let mut changed = long.clone();
        changed[5] = seg(99, 10);
        changed.push(seg(31, 10));
        let bill = cache.bill(&changed, &[1, changed.len()], 1_000);
        // CacheAccount would read the five segments before the change; the provider finds only
        // the system prompt's entry (segment 1), the previous request's end being changed.
        assert_eq!(bill.cache_read_tokens, 10);
        let mut plain = CacheAccount::new(300_000);
        plain.bill(long, 0);
        assert_eq!(plain.bill(changed, 1_000).cache_read_tokens, 50);
    }

    #[test]
    fn a_breakpoint_entry_lives_its_ttl_from_its_last_use() {
        let mut cache = BreakpointCache::new(300_000);
        cache.bill(&[seg(1, 100), seg(2, 10)], &[1, 2], 0);
        // The system entry is read at 200 s, which keeps it warm until 500 s.
        let bill = cache.bill(&[seg(1, 100), seg(3, 10)], &[1, 2], 200_000);
        assert_eq!(bill.cache_read_tokens, 100);
        let bill = cache.bill(&[seg(1, 100), seg(4, 10)], &[1, 2], 450_000);
        assert_eq!(bill.cache_read_tokens, 100);
        let bill = cache.bill(&[seg(1, 100), seg(5, 10)], &[1, 2], 800_000);
        assert_eq!(bill.cache_read_tokens, 0);
    }
}
