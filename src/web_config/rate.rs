//! `rate_limit`: a token bucket over every request of a listener, as the toolkit's (Go's
//! `rate.Limiter`): one token every `interval`, at most `burst` saved up; a request finding none
//! is answered 429 before auth is even looked at.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(super) struct Limiter {
    every: Duration,
    burst: u32,
    /// Tokens saved up, and when they were counted.
    bucket: Mutex<(f64, Instant)>,
}

impl Limiter {
    /// A full bucket: `burst` requests at once, then one per `every`.
    pub(super) fn new(every: Duration, burst: u32, now: Instant) -> Limiter {
        Limiter {
            every,
            burst,
            bucket: Mutex::new((f64::from(burst), now)),
        }
    }

    /// Whether a request at `now` may go on; takes its token if so.
    pub(super) fn allow(&self, now: Instant) -> bool {
        let mut b = self.bucket.lock().expect("rate limit lock");
        let earned = now.saturating_duration_since(b.1).as_secs_f64() / self.every.as_secs_f64();
        b.0 = (b.0 + earned).min(f64::from(self.burst));
        b.1 = b.1.max(now);
        if b.0 >= 1.0 {
            b.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_request_per_interval() {
        let t0 = Instant::now();
        let l = Limiter::new(Duration::from_millis(100), 3, t0);
        assert_eq!((0..5).filter(|_| l.allow(t0)).count(), 3);
        assert!(!l.allow(t0 + Duration::from_millis(50)));
        assert!(l.allow(t0 + Duration::from_millis(100)));
        assert!(!l.allow(t0 + Duration::from_millis(120)));
        // A long quiet spell saves up no more than the burst.
        let later = t0 + Duration::from_secs(60);
        assert_eq!((0..10).filter(|_| l.allow(later)).count(), 3);
    }
}
