//! Prompt-cache and cost accounting for a sequence of requests, the way providers bill them.
//!
//! A request is a list of segments (tool definitions, system prompt, then each message) with a
//! fingerprint and a token count each. The tokens of the longest run of leading segments equal to
//! the previous request's, sent within the cache TTL of it, are cache reads (a tenth of the price);
//! the rest are cache writes (1.25× the price). This is Anthropic's prompt-cache model and a fair
//! upper bound of OpenAI's automatic caching.

use serde::{Deserialize, Serialize};

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
}

impl Default for Pricing {
    fn default() -> Pricing {
        Pricing {
            input_per_million: 3.0,
            cache_write_multiplier: 1.25,
            cache_read_multiplier: 0.1,
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
}
