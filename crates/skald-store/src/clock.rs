//! Where the store's notion of "now" comes from: the system clock in production, a clock the test
//! moves by hand in tests, so expiry logic never reads a hidden wall clock.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of the current time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync {
    /// The current time in milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        // A clock set before 1970 reads as the epoch: refs then expire late, never early.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| {
                i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
            })
    }
}

/// Now by the system clock, in milliseconds since the Unix epoch: the one reading of the wall
/// clock every part of skald that has no injected [`Clock`] uses.
pub fn now_ms() -> i64 {
    SystemClock.now_ms()
}

/// A clock that stands still until told to move; for tests and replays.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    /// A clock that reads `now_ms` (milliseconds since the Unix epoch) until it is moved.
    pub fn new(now_ms: i64) -> ManualClock {
        ManualClock {
            now_ms: AtomicI64::new(now_ms),
        }
    }

    /// Moves the clock to `now_ms` (milliseconds since the Unix epoch), backwards if it is
    /// earlier than the current reading.
    pub fn set(&self, now_ms: i64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the clock forward by `by_ms` milliseconds (backwards if negative).
    pub fn advance(&self, by_ms: i64) {
        self.now_ms.fetch_add(by_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}
