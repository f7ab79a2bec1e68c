//! Retrying failed provider calls (seed 003 §3.3): a few attempts with exponential backoff and
//! jitter, only for failures that may pass on their own (server errors, rate limits, timeouts,
//! broken connections), never after the caller aborted, and waiting as long as the provider's
//! `retry-after` asks. The jitter source is injectable so tests are deterministic.

use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::error::LlmError;

/// How a client retries a failed call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first one included (seed 003: 3). Zero counts as one.
    pub attempts: u32,
    /// Delay before the first retry; it doubles with each retry (seed 003: 500 ms).
    pub min_delay_ms: u64,
    /// Longest backoff delay (seed 003: 5000 ms).
    pub max_delay_ms: u64,
    /// Relative spread of each delay, ±`jitter` (seed 003: 0.2), so that clients that failed
    /// together do not retry together.
    pub jitter: f64,
    /// Longest wait a provider's `retry-after` may ask for. A provider that asks for more is
    /// not retried: the error (with its `retry_after_ms`) goes back to the caller, who may
    /// prefer to fail over than to sleep that long.
    pub max_retry_after_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            min_delay_ms: 500,
            max_delay_ms: 5_000,
            jitter: 0.2,
            max_retry_after_ms: 60_000,
        }
    }
}

impl RetryPolicy {
    /// One attempt, no retries.
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `retry` (1 for the first retry), or `None` when the
    /// provider asked for a longer wait than [`RetryPolicy::max_retry_after_ms`].
    ///
    /// Without `retry_after_ms`: `min_delay_ms × 2^(retry-1)`, capped at `max_delay_ms`,
    /// spread by ±`jitter` using `unit` (a number in `[0, 1)`; 0.5 means no spread), and kept
    /// within `[min_delay_ms, max_delay_ms]`. With it: exactly what the provider asked (at least
    /// `min_delay_ms`), since retrying earlier only earns another 429.
    pub fn backoff_delay(
        &self,
        retry: u32,
        retry_after_ms: Option<u64>,
        unit: f64,
    ) -> Option<Duration> {
        let floor = self.min_delay_ms;
        let ceiling = self.max_delay_ms.max(floor);
        if let Some(asked) = retry_after_ms {
            return (asked <= self.max_retry_after_ms)
                .then(|| Duration::from_millis(asked.max(floor)));
        }
        let doublings = retry.saturating_sub(1).min(63);
        let exponential = floor.saturating_mul(1u64 << doublings).min(ceiling);
        let jitter = if self.jitter.is_finite() {
            self.jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 1.0)
        } else {
            0.5
        };
        let spread = 1.0 + (unit * 2.0 - 1.0) * jitter;
        // Delays are at most `ceiling`, far below f64's exact integer range.
        let jittered = (exponential as f64 * spread).round().max(0.0) as u64;
        Some(Duration::from_millis(jittered.clamp(floor, ceiling)))
    }
}

/// A source of numbers in `[0, 1)` that spreads retry delays.
pub trait JitterSource: Send + Sync + fmt::Debug {
    /// The next number, uniformly in `[0, 1)`.
    fn unit(&self) -> f64;
}

/// Jitter from the standard library's per-process random hash keys: unpredictable enough to
/// spread retries, with no extra dependency.
#[derive(Debug, Default)]
pub struct RandomJitter {
    counter: AtomicU64,
}

impl JitterSource for RandomJitter {
    fn unit(&self) -> f64 {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(self.counter.fetch_add(1, Ordering::Relaxed));
        // The top 53 bits make a uniformly spread double in [0, 1).
        (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The same number every time: deterministic delays for tests (0.5 means no spread).
#[derive(Debug, Clone, Copy)]
pub struct FixedJitter(pub f64);

impl JitterSource for FixedJitter {
    fn unit(&self) -> f64 {
        self.0
    }
}

/// Runs `operation` (given the attempt number, from 1) until it succeeds, fails with an error
/// that is not retryable, runs out of attempts, or `cancel` fires. Cancellation aborts the
/// attempt in flight and any backoff sleep, and is reported as [`LlmError::Aborted`].
pub async fn retry<T, F, Fut>(
    policy: &RetryPolicy,
    jitter: &dyn JitterSource,
    cancel: &CancellationToken,
    mut operation: F,
) -> Result<T, LlmError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, LlmError>>,
{
    let attempts = policy.attempts.max(1);
    let mut attempt = 1;
    loop {
        if cancel.is_cancelled() {
            return Err(LlmError::Aborted);
        }
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(LlmError::Aborted),
            outcome = operation(attempt) => outcome,
        };
        let error = match outcome {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if !error.is_retryable() || attempt >= attempts {
            return Err(error);
        }
        let Some(delay) = policy.backoff_delay(attempt, error.retry_after_ms(), jitter.unit())
        else {
            return Err(error);
        };
        tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(LlmError::Aborted),
            () = tokio::time::sleep(delay) => {}
        }
        attempt += 1;
    }
}

/// Longest wait a `retry-after` header is read as, so a bogus header cannot overflow a timer.
const RETRY_AFTER_CAP_MS: u64 = 24 * 60 * 60 * 1000;

/// The wait a provider asked for, in milliseconds: `retry-after-ms` (OpenAI's, fractional
/// milliseconds) when present, else `retry-after` as seconds or as an HTTP date (measured from
/// `now`; a date in the past means no wait). `None` when neither header is usable.
pub fn retry_after_ms(
    retry_after_ms_header: Option<&str>,
    retry_after_header: Option<&str>,
    now: SystemTime,
) -> Option<u64> {
    let millis = |value: f64| {
        (value.is_finite() && value >= 0.0).then(|| (value.ceil() as u64).min(RETRY_AFTER_CAP_MS))
    };
    if let Some(ms) = retry_after_ms_header
        .and_then(|raw| raw.trim().parse::<f64>().ok())
        .and_then(millis)
    {
        return Some(ms);
    }
    let raw = retry_after_header?.trim();
    if let Ok(seconds) = raw.parse::<f64>() {
        return millis(seconds * 1000.0);
    }
    let date = httpdate::parse_http_date(raw).ok()?;
    let wait = date.duration_since(now).unwrap_or(Duration::ZERO);
    Some(
        u64::try_from(wait.as_millis()).map_or(RETRY_AFTER_CAP_MS, |ms| ms.min(RETRY_AFTER_CAP_MS)),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn seed_003_defaults() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.attempts, 3);
        assert_eq!(policy.min_delay_ms, 500);
        assert_eq!(policy.max_delay_ms, 5_000);
        assert!((policy.jitter - 0.2).abs() < f64::EPSILON);
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy::default();
        let delay = |retry| policy.backoff_delay(retry, None, 0.5).unwrap().as_millis();
        assert_eq!(delay(1), 500);
        assert_eq!(delay(2), 1_000);
        assert_eq!(delay(3), 2_000);
        assert_eq!(delay(4), 4_000);
        assert_eq!(delay(5), 5_000);
        assert_eq!(delay(60), 5_000);
        assert_eq!(delay(u32::MAX), 5_000);
    }

    #[test]
    fn jitter_spreads_by_twenty_percent_within_bounds() {
        let policy = RetryPolicy::default();
        let delay = |retry, unit| policy.backoff_delay(retry, None, unit).unwrap().as_millis();
        assert_eq!(delay(2, 0.0), 800);
        assert_eq!(delay(2, 1.0), 1_200);
        // Never below the minimum nor above the maximum.
        assert_eq!(delay(1, 0.0), 500);
        assert_eq!(delay(5, 1.0), 5_000);
        assert_eq!(delay(2, f64::NAN), 1_000);
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.backoff_delay(1, Some(7_000), 0.0),
            Some(Duration::from_millis(7_000))
        );
        assert_eq!(
            policy.backoff_delay(1, Some(10), 0.0),
            Some(Duration::from_millis(500))
        );
        assert_eq!(policy.backoff_delay(1, Some(60_001), 0.5), None);
    }

    #[test]
    fn random_jitter_stays_in_the_unit_interval() {
        let jitter = RandomJitter::default();
        for _ in 0..1_000 {
            let unit = jitter.unit();
            assert!((0.0..1.0).contains(&unit));
        }
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        assert_eq!(retry_after_ms(None, Some("2"), now), Some(2_000));
        assert_eq!(retry_after_ms(None, Some(" 1.5 "), now), Some(1_500));
        assert_eq!(retry_after_ms(Some("250.2"), Some("9"), now), Some(251));
        // 2015-10-21T07:28:00Z is 1445412480 s.
        assert_eq!(
            retry_after_ms(None, Some("Wed, 21 Oct 2015 07:28:30 GMT"), now),
            Some(30_000)
        );
        assert_eq!(
            retry_after_ms(None, Some("Wed, 21 Oct 2015 07:27:00 GMT"), now),
            Some(0)
        );
        assert_eq!(retry_after_ms(None, Some("soon"), now), None);
        assert_eq!(retry_after_ms(Some("-1"), None, now), None);
        assert_eq!(retry_after_ms(None, None, now), None);
        assert_eq!(
            retry_after_ms(None, Some("1e300"), now),
            Some(RETRY_AFTER_CAP_MS)
        );
    }
}
