//! The host's side of a replayed call, read from the usage the transcript recorded: what the host
//! sent beyond the transcript's messages (its tools and system prompt: the **prefix**), how the
//! provider's tokenizer relates to the replay's BPE (the **scale**), how long its cache entries
//! live (Claude Code writes one-hour entries on some plans), and what the provider does to a
//! request before it reaches the cache (Anthropic drops the thinking of earlier turns).
//!
//! With these, a replayed call is billed as the provider billed the host
//! ([`HostBill`], over a [`BreakpointCache`] with the host's breakpoints), so `none` can be checked
//! against what was billed and every policy's saving read as a share of the real bill.
//!
//! The prefix and scale are a least-squares fit of `recorded input = prefix + scale × counted`
//! over the transcript's own calls, `counted` being the BPE tokens of the messages of each call's
//! request as the provider kept them; a transcript with no recorded usage has no host fit.

use std::borrow::Cow;

use serde::Serialize;
use skald_core::message::{Block, Message, Role, Usage};
use skald_core::tokens::{TokenCounter, message_fingerprint};

use crate::accounting::{BreakpointCache, CACHE_HIT_SLACK_TOKENS, Pricing, Segment};

/// How long a one-hour cache entry lives, in milliseconds.
const ONE_HOUR_MS: i64 = 3_600_000;

/// The fingerprint of the host's prefix segment: one constant, the host sending the same tools
/// and system prompt on every call.
const HOST_PREFIX_FINGERPRINT: u128 = 0x686f_7374_5f70_7265_6669_78ff_0000_0001;

/// The fingerprint of the part of the host's prefix its earlier sessions left in the cache.
const WARM_PREFIX_FINGERPRINT: u128 = 0x686f_7374_5f77_6172_6d00_0000_0000_0002;

/// The fingerprint of what the host adds after its system breakpoint without recording it.
const UNRECORDED_FINGERPRINT: u128 = 0x686f_7374_5f68_6964_6465_6e00_0000_0003;

/// How the host's provider caches prompts, which decides how a replayed call is billed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderCache {
    /// Anthropic's: entries only at the request's cache breakpoints, looked up a few blocks back
    /// from each, writes priced above input (1.25×, one-hour writes 2×), and the thinking of
    /// earlier turns dropped before the lookup.
    Anthropic,
    /// OpenAI's and Gemini's automatic caching: any earlier prefix is read, and what is not read
    /// is billed as plain input.
    #[default]
    Automatic,
}

impl ProviderCache {
    /// Anthropic's when an answer says it came from Anthropic or a Claude model, else the
    /// automatic kind: for a transcript whose format does not say (an OpenClaw session, a
    /// stored one).
    pub fn of_answers(messages: &[Message]) -> ProviderCache {
        let anthropic = messages
            .iter()
            .filter(|message| message.role == Role::Assistant)
            .any(|message| {
                let provider = message.meta.provider.as_deref().unwrap_or_default();
                let model = message.meta.model.as_deref().unwrap_or_default();
                provider.contains("anthropic") || model.starts_with("claude")
            });
        if anthropic {
            ProviderCache::Anthropic
        } else {
            ProviderCache::Automatic
        }
    }

    fn strips_earlier_thinking(self) -> bool {
        match self {
            ProviderCache::Anthropic => true,
            ProviderCache::Automatic => false,
        }
    }
}

/// What the recorded usage says about the host, for billing replayed calls as it was billed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostFit {
    /// Provider tokens every call sent before the transcript's messages (tools and system prompt,
    /// with whatever the host adds that its transcript does not record).
    pub prefix_tokens: u64,
    /// Provider tokens per BPE token of the transcript's messages.
    pub tokens_per_bpe_token: f64,
    /// How long the host's cache entries live, in milliseconds: an hour when the recorded usage
    /// shows one-hour writes, else the replay's TTL.
    pub cache_ttl_ms: i64,
    /// Of the prefix, the tokens before the host's system-prompt cache breakpoint (its tools and
    /// system prompt): what the provider still read on a call whose history no longer matched
    /// the cache. The rest is what the host adds to the conversation's first messages without
    /// recording it (Claude Code's reminders), lost with the history. All of the prefix when no
    /// recorded call shows such a break.
    pub system_prefix_tokens: u64,
    /// Of the prefix, the tokens already in the provider's cache when the transcript began (its
    /// first call read them: the host's tools and system prompt as its earlier sessions sent
    /// them).
    pub warm_prefix_tokens: u64,
    /// Whether the host's cache writes are one-hour writes (priced apart).
    pub one_hour_cache: bool,
    /// Calls with recorded usage the fit was made on.
    pub calls: u64,
    /// The largest difference between a call's recorded input and the fit, in provider tokens.
    pub max_residual_tokens: u64,
    /// Calls (by the index of their answer) at which the host changed its own prefix: the
    /// provider read less than the call before had sent although the conversation only grew and
    /// the cache was warm (Claude Code rewrites its tool list when an MCP server reconnects).
    /// Every policy's replay loses the cached prefix there too.
    pub prefix_changes: Vec<usize>,
}

/// One call's request as the provider keeps it: Anthropic's drops the thinking of every
/// assistant message before the newest user message (it ignores the thinking of earlier turns,
/// and a request whose thinking went stops matching the cached one there).
pub fn provider_view(messages: &[Message], provider: ProviderCache) -> Cow<'_, [Message]> {
    if !provider.strips_earlier_thinking() {
        return Cow::Borrowed(messages);
    }
    let Some(turn_start) = messages.iter().rposition(is_user_turn) else {
        return Cow::Borrowed(messages);
    };
    let has_earlier_thinking = messages
        .get(..turn_start)
        .unwrap_or_default()
        .iter()
        .any(has_thinking);
    if !has_earlier_thinking {
        return Cow::Borrowed(messages);
    }
    let mut view = messages.to_vec();
    for message in view.iter_mut().take(turn_start) {
        if has_thinking(message) {
            message
                .content
                .retain(|block| !matches!(block, Block::Thinking(_)));
        }
    }
    Cow::Owned(view)
}

/// A message that starts a user turn: the user's, with something besides tool results.
fn is_user_turn(message: &Message) -> bool {
    message.role == Role::User
        && message
            .content
            .iter()
            .any(|block| !matches!(block, Block::ToolResult(_)))
}

fn has_thinking(message: &Message) -> bool {
    message.role == Role::Assistant
        && message
            .content
            .iter()
            .any(|block| matches!(block, Block::Thinking(_)))
}

/// One recorded call for the fit: the BPE tokens of its request's messages as the provider kept
/// them, and what the provider reported reading.
#[derive(Debug, Clone, Copy)]
pub struct RecordedCall {
    /// The index of the call's answer in the transcript.
    pub message_index: usize,
    /// When the call was made, in epoch milliseconds.
    pub at_ms: i64,
    /// Whether the request's messages (as the provider kept them) start with the previous
    /// recorded call's.
    pub extends_previous: bool,
    /// BPE tokens of the request's messages.
    pub counted_tokens: u64,
    /// Input tokens the provider reported: uncached, cache reads and cache writes.
    pub recorded_tokens: u64,
    /// Input tokens the provider reported reading from its cache.
    pub cache_read_tokens: u64,
    /// Whether the provider reported one-hour cache writes for it.
    pub one_hour_writes: bool,
}

/// Fits the host's prefix and scale to `calls`; `None` without a recorded call.
pub fn fit_host(
    calls: &[RecordedCall],
    default_ttl_ms: i64,
    provider: ProviderCache,
) -> Option<HostFit> {
    if calls.is_empty() {
        return None;
    }
    let n = calls.len() as f64;
    let mean_x = calls.iter().map(|c| c.counted_tokens as f64).sum::<f64>() / n;
    let mean_y = calls.iter().map(|c| c.recorded_tokens as f64).sum::<f64>() / n;
    let (mut covariance, mut variance) = (0.0, 0.0);
    for call in calls {
        let dx = call.counted_tokens as f64 - mean_x;
        covariance += dx * (call.recorded_tokens as f64 - mean_y);
        variance += dx * dx;
    }
    let fitted_scale = if variance > 0.0 {
        covariance / variance
    } else {
        0.0
    };
    // One call, calls of one size, or a fit that says more messages cost fewer tokens: the scale
    // cannot be read from them, so the tokenizers are taken as equal and the prefix is the mean
    // difference.
    let (scale, prefix) = if fitted_scale > 0.0 && mean_y - fitted_scale * mean_x >= 0.0 {
        (fitted_scale, mean_y - fitted_scale * mean_x)
    } else {
        (1.0, (mean_y - mean_x).max(0.0))
    };
    let max_residual = calls
        .iter()
        .map(|c| (c.recorded_tokens as f64 - (prefix + scale * c.counted_tokens as f64)).abs())
        .fold(0.0, f64::max);
    let one_hour_cache = calls.iter().any(|c| c.one_hour_writes);
    let cache_ttl_ms = if one_hour_cache {
        ONE_HOUR_MS
    } else {
        default_ttl_ms
    };
    let prefix_tokens = prefix.round() as u64;
    // Only an explicit cache says the host changed something: an automatic one may simply not
    // have kept the prefix.
    let explicit = provider == ProviderCache::Anthropic;
    let prefix_changes = calls
        .windows(2)
        .filter(|pair| {
            let (before, call) = (pair[0], pair[1]);
            explicit
                && call.extends_previous
                && call.at_ms.saturating_sub(before.at_ms) <= cache_ttl_ms
                && call.cache_read_tokens + CACHE_HIT_SLACK_TOKENS < before.recorded_tokens
        })
        .map(|pair| pair[1].message_index)
        .collect();
    // A break of the history: the call read less than half of what the one before it sent, but
    // not nothing (a cold cache reads nothing). What it read is the host's system prefix.
    let mut kept_through_breaks: Vec<u64> = calls
        .windows(2)
        .filter(|pair| {
            let (before, call) = (pair[0], pair[1]);
            provider == ProviderCache::Anthropic
                && call.cache_read_tokens > 0
                && call.cache_read_tokens * 2 < before.recorded_tokens
        })
        .map(|pair| pair[1].cache_read_tokens)
        .collect();
    kept_through_breaks.sort_unstable();
    let system_prefix_tokens = kept_through_breaks
        .get(kept_through_breaks.len() / 2)
        .map_or(prefix_tokens, |&median| median.min(prefix_tokens));
    Some(HostFit {
        prefix_tokens,
        system_prefix_tokens,
        warm_prefix_tokens: calls
            .first()
            .map_or(0, |first| first.cache_read_tokens.min(system_prefix_tokens)),
        tokens_per_bpe_token: (scale * 1000.0).round() / 1000.0,
        cache_ttl_ms,
        one_hour_cache,
        calls: calls.len() as u64,
        max_residual_tokens: max_residual.round() as u64,
        prefix_changes,
    })
}

/// A policy's calls billed as the host's provider billed them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct HostFigures {
    /// Provider input tokens summed over calls, the host's prefix included.
    pub input_tokens: u64,
    /// Of them, the tokens read from the cache.
    pub cache_read_tokens: u64,
    /// Of them, the tokens written to the cache.
    pub cache_write_tokens: u64,
    /// Dollars: reads, writes (one-hour writes at their price) and fetches.
    pub cost_usd: f64,
}

impl HostFigures {
    /// Adds another transcript's figures.
    pub fn absorb(&mut self, other: HostFigures) {
        self.input_tokens += other.input_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cost_usd += other.cost_usd;
    }
}

/// One replayed call, as [`HostBill::bill`] bills it.
#[derive(Debug, Clone, Copy)]
pub struct HostCall<'a> {
    /// The index of the call's answer in the transcript (where the host may have changed its
    /// prefix).
    pub message_index: usize,
    /// skald's own segments of the request (its tools and system prompt addition), in BPE
    /// tokens.
    pub leading: &'a [Segment],
    /// The request's messages as the policy assembled them.
    pub messages: &'a [Message],
    /// When the call was made.
    pub now_ms: i64,
    /// BPE tokens of the fetches the call is charged.
    pub fetch_tokens: u64,
}

/// Bills one policy's replayed calls with the host's prefix, scale, breakpoints and cache.
pub struct HostBill {
    fit: HostFit,
    cache: BreakpointCache,
    provider: ProviderCache,
    /// Whether a call was billed yet (before the first, the warm prefix is put in the cache).
    started: bool,
    /// How many times the host changed its prefix so far: its part after the warm one is a new
    /// segment each time.
    prefix_version: u128,
    /// The recorded call billed last: the calls of one recorded call (a hidden round's and the
    /// answer's) share its prefix change.
    last_message_index: Option<usize>,
    /// The figures so far.
    pub figures: HostFigures,
}

impl HostBill {
    /// A bill for calls of a host fitted as `fit`.
    pub fn new(fit: HostFit, provider: ProviderCache) -> HostBill {
        HostBill {
            cache: BreakpointCache::new(fit.cache_ttl_ms),
            fit,
            provider,
            started: false,
            prefix_version: 0,
            last_message_index: None,
            figures: HostFigures::default(),
        }
    }

    fn scaled(&self, bpe_tokens: u64) -> u64 {
        (bpe_tokens as f64 * self.fit.tokens_per_bpe_token).round() as u64
    }

    /// Bills `call` with the host's prefix first and Claude Code's breakpoints: after the part
    /// of the prefix that was warm (its earlier sessions' entry), after the tools and system
    /// prompt, and on the newest message. Returns the input the provider would have reported
    /// for the call (output not counted).
    pub fn bill(
        &mut self,
        call: &HostCall<'_>,
        counter: &mut TokenCounter,
        pricing: &Pricing,
    ) -> Usage {
        let HostCall {
            message_index,
            leading,
            messages,
            now_ms,
            fetch_tokens,
        } = *call;
        let view = provider_view(messages, self.provider);
        let mut segments = Vec::with_capacity(2 + leading.len() + view.len());
        let warm = Segment {
            fingerprint: WARM_PREFIX_FINGERPRINT,
            tokens: self.fit.warm_prefix_tokens,
        };
        if warm.tokens > 0 {
            segments.push(warm);
            if !self.started {
                self.cache.keep(&[warm], now_ms);
            }
        }
        self.started = true;
        if self.last_message_index != Some(message_index)
            && self.fit.prefix_changes.contains(&message_index)
        {
            self.prefix_version += 1;
        }
        self.last_message_index = Some(message_index);
        let warm_end = segments.len();
        segments.push(Segment {
            fingerprint: HOST_PREFIX_FINGERPRINT ^ self.prefix_version,
            tokens: self.fit.system_prefix_tokens.saturating_sub(warm.tokens),
        });
        segments.extend(leading.iter().map(|segment| Segment {
            fingerprint: segment.fingerprint,
            tokens: self.scaled(segment.tokens),
        }));
        let system_end = segments.len();
        let unrecorded = self
            .fit
            .prefix_tokens
            .saturating_sub(self.fit.system_prefix_tokens);
        if unrecorded > 0 {
            segments.push(Segment {
                fingerprint: UNRECORDED_FINGERPRINT,
                tokens: unrecorded,
            });
        }
        for message in view.iter() {
            segments.push(Segment {
                fingerprint: message_fingerprint(message),
                tokens: self.scaled(counter.count_message(message)),
            });
        }
        let fetch = self.scaled(fetch_tokens);
        let (bill, cost) = match self.provider {
            ProviderCache::Anthropic => {
                let bill =
                    self.cache
                        .bill(&segments, &[warm_end, system_end, segments.len()], now_ms);
                let written = bill.cache_write_tokens + fetch;
                let mut cost = pricing.cost(0, written, bill.cache_read_tokens);
                if self.fit.one_hour_cache {
                    cost += pricing.one_hour_write_surcharge(written);
                }
                (bill, cost)
            }
            ProviderCache::Automatic => {
                // Every prefix is an entry: a breakpoint after each segment.
                let everywhere: Vec<usize> = (1..=segments.len()).collect();
                let bill = self.cache.bill(&segments, &everywhere, now_ms);
                let uncached = bill.cache_write_tokens + fetch;
                (bill, pricing.cost(uncached, 0, bill.cache_read_tokens))
            }
        };
        let written = bill.cache_write_tokens + fetch;
        self.figures.input_tokens += bill.total_tokens;
        self.figures.cache_read_tokens += bill.cache_read_tokens;
        self.figures.cache_write_tokens += written;
        self.figures.cost_usd += cost;
        let one_hour = |tokens: u64| if self.fit.one_hour_cache { tokens } else { 0 };
        match self.provider {
            ProviderCache::Anthropic => Usage {
                cache_read: bill.cache_read_tokens,
                cache_write: written,
                cache_write_1h: one_hour(written),
                ..Usage::default()
            },
            ProviderCache::Automatic => Usage {
                input: written,
                cache_read: bill.cache_read_tokens,
                ..Usage::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use skald_core::message::ThinkingBlock;

    fn thinking_answer(text: &str) -> Message {
        let mut message = Message::text(Role::Assistant, text);
        message.content.insert(
            0,
            Block::Thinking(ThinkingBlock {
                thinking: format!("thinking about {text}"),
                signature: None,
                extra: Default::default(),
            }),
        );
        message
    }

    #[test]
    fn the_provider_drops_the_thinking_of_earlier_turns_only() {
        let messages = vec![
            Message::text(Role::User, "first ask"),
            thinking_answer("first answer"),
            Message::text(Role::User, "second ask"),
            thinking_answer("second answer, in the current turn"),
        ];
        let view = provider_view(&messages, ProviderCache::Anthropic);
        assert!(
            !has_thinking(&view[1]),
            "the earlier turn's thinking is gone"
        );
        assert!(
            has_thinking(&view[3]),
            "the current turn keeps its thinking"
        );
        assert_eq!(
            provider_view(&messages, ProviderCache::Automatic).as_ref(),
            messages.as_slice()
        );
    }

    #[test]
    fn tool_results_do_not_start_a_turn() {
        let messages = vec![
            Message::text(Role::User, "ask"),
            thinking_answer("calling a tool"),
            Message::text(Role::ToolResult, "file contents"),
            thinking_answer("calling another"),
        ];
        assert!(matches!(
            provider_view(&messages, ProviderCache::Anthropic),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn the_fit_recovers_a_prefix_and_a_scale() {
        let calls: Vec<RecordedCall> = [0u64, 1_000, 5_000, 20_000]
            .iter()
            .enumerate()
            .map(|(index, &counted)| RecordedCall {
                message_index: index,
                at_ms: index as i64 * 1_000,
                extends_previous: index > 0,
                counted_tokens: counted,
                recorded_tokens: 20_000 + counted * 5 / 4,
                cache_read_tokens: 0,
                one_hour_writes: false,
            })
            .collect();
        let fit = fit_host(&calls, 300_000, ProviderCache::Anthropic).unwrap();
        assert_eq!(fit.prefix_tokens, 20_000);
        assert!((fit.tokens_per_bpe_token - 1.25).abs() < 1e-9);
        assert_eq!(fit.max_residual_tokens, 0);
        assert_eq!(fit.cache_ttl_ms, 300_000);
        assert!(fit_host(&[], 300_000, ProviderCache::Anthropic).is_none());
    }

    #[test]
    fn what_a_call_after_a_break_of_the_history_read_is_the_system_prefix() {
        let call = |counted, read| RecordedCall {
            message_index: 0,
            at_ms: 0,
            extends_previous: false,
            counted_tokens: counted,
            recorded_tokens: 30_000 + counted,
            cache_read_tokens: read,
            one_hour_writes: false,
        };
        let calls = [
            call(1_000, 12_000),
            call(40_000, 31_000),
            call(41_000, 21_000), // the history broke: only the system prefix was read
            call(42_000, 71_000),
        ];
        let fit = fit_host(&calls, 300_000, ProviderCache::Anthropic).unwrap();
        assert_eq!(fit.prefix_tokens, 30_000);
        assert_eq!(fit.system_prefix_tokens, 21_000);
        assert_eq!(fit.warm_prefix_tokens, 12_000);
        let unbroken = fit_host(
            &[call(1_000, 0), call(2_000, 31_000)],
            300_000,
            ProviderCache::Anthropic,
        )
        .unwrap();
        assert_eq!(unbroken.system_prefix_tokens, unbroken.prefix_tokens);
    }

    #[test]
    fn a_warm_call_that_reads_less_than_the_grown_request_before_it_is_a_change_of_the_host() {
        let call = |index: usize, at_ms, read, extends_previous| RecordedCall {
            message_index: index,
            at_ms,
            extends_previous,
            counted_tokens: index as u64 * 1_000,
            recorded_tokens: 20_000 + index as u64 * 1_000,
            cache_read_tokens: read,
            one_hour_writes: false,
        };
        let calls = [
            call(1, 0, 0, false),
            call(3, 10_000, 21_000, true),
            // The conversation only grew and the cache was warm, yet only 18,000 were read.
            call(5, 20_000, 18_000, true),
            // The history changed (extends_previous false): not the host's doing.
            call(7, 30_000, 0, false),
            // After more than the TTL: a cold cache.
            call(9, 400_000, 0, true),
        ];
        let fit = fit_host(&calls, 300_000, ProviderCache::Anthropic).unwrap();
        assert_eq!(fit.prefix_changes, vec![5]);
        let automatic = fit_host(&calls, 300_000, ProviderCache::Automatic).unwrap();
        assert!(
            automatic.prefix_changes.is_empty(),
            "an automatic cache that read less may just not have kept the prefix"
        );
    }

    #[test]
    fn one_call_gives_the_difference_as_the_prefix_and_one_hour_writes_the_ttl() {
        let fit = fit_host(
            &[RecordedCall {
                message_index: 1,
                at_ms: 0,
                extends_previous: false,
                counted_tokens: 100,
                recorded_tokens: 25_100,
                cache_read_tokens: 30_000,
                one_hour_writes: true,
            }],
            300_000,
            ProviderCache::Anthropic,
        )
        .unwrap();
        assert_eq!((fit.prefix_tokens, fit.tokens_per_bpe_token), (25_000, 1.0));
        assert!(fit.one_hour_cache);
        assert_eq!(
            fit.warm_prefix_tokens, 25_000,
            "what the first call read was in the cache before, at most the prefix"
        );
        assert_eq!(fit.cache_ttl_ms, ONE_HOUR_MS);
    }
}
