//! Warnings a client can trigger at will (every request to a faulty policy fails) are rate-limited
//! per policy: at most one line per interval, and the next line says how many were held back. The
//! metrics count every one.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use web_time::Instant;

/// One line per key per interval.
#[derive(Debug)]
pub struct LogLimit {
    interval: Duration,
    keys: Mutex<HashMap<String, Window>>,
}

#[derive(Debug)]
struct Window {
    last: Instant,
    held_back: u64,
}

impl LogLimit {
    /// At most one line per key per `interval`.
    pub fn new(interval: Duration) -> Self {
        Self { interval, keys: Mutex::default() }
    }

    /// Whether a line for `key` may be written now: `Some(lines held back since the last one)`,
    /// or `None` (the line is counted as held back).
    pub fn allow(&self, key: &str) -> Option<u64> {
        self.allow_at(key, Instant::now())
    }

    fn allow_at(&self, key: &str, now: Instant) -> Option<u64> {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        match keys.get_mut(key) {
            Some(window) if now.saturating_duration_since(window.last) < self.interval => {
                window.held_back += 1;
                None
            }
            Some(window) => {
                let held_back = std::mem::take(&mut window.held_back);
                window.last = now;
                Some(held_back)
            }
            None => {
                keys.insert(key.to_owned(), Window { last: now, held_back: 0 });
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_the_count_of_the_rest() {
        let limit = LogLimit::new(Duration::from_secs(1));
        let start = Instant::now();
        assert_eq!(limit.allow_at("a", start), Some(0));
        for _ in 0..3 {
            assert_eq!(limit.allow_at("a", start + Duration::from_millis(500)), None);
        }
        // Another policy has its own window.
        assert_eq!(limit.allow_at("b", start + Duration::from_millis(600)), Some(0));
        assert_eq!(limit.allow_at("a", start + Duration::from_secs(1)), Some(3));
        assert_eq!(limit.allow_at("a", start + Duration::from_millis(1500)), None);
        assert_eq!(limit.allow_at("a", start + Duration::from_secs(3)), Some(1));
    }
}
