//! A fixed interval (`every: 5m`, or `@every 5m` in `schedule:`): fire times at whole multiples
//! of the interval counted from the Unix epoch, so they do not depend on when the agent started
//! and a restart keeps the phase. An interval that divides a day (`30s`, `5m`, `8h`) fires at the
//! same times every day (`5m`: :00, :05, ...); one that does not (`7m`) fires at times of day
//! that move from one day to the next, always exactly one interval apart.

use std::time::Duration;

use jiff::{Timestamp, Zoned};

/// The shortest interval: one second, cron's finest resolution.
pub(super) const SHORTEST: Duration = Duration::from_secs(1);

/// A validated interval: at least [`SHORTEST`], in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Every {
    secs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EveryError(String);

impl Every {
    pub fn new(interval: Duration) -> Result<Every, EveryError> {
        let text = match interval.is_zero() {
            true => "0s".to_string(),
            false => crate::util::human_duration(interval),
        };
        if interval < SHORTEST {
            return Err(EveryError(format!(
                "an interval of {text} is too short: the shortest is 1s"
            )));
        }
        if interval.subsec_nanos() != 0 {
            return Err(EveryError(format!(
                "an interval of {text} is not a whole number of seconds (write e.g. 2s or 1m30s)"
            )));
        }
        Ok(Every {
            secs: interval.as_secs(),
        })
    }

    pub fn interval(&self) -> Duration {
        Duration::from_secs(self.secs)
    }

    /// The first multiple of the interval strictly after `after`, in `after`'s time zone.
    pub fn next_after(&self, after: &Zoned) -> Option<Zoned> {
        let secs = i64::try_from(self.secs).ok()?;
        // Whole seconds at or before `after` (floored, also before the epoch), then one step on.
        let t = after.timestamp();
        let floor = t.as_second() - i64::from(t.subsec_nanosecond() < 0);
        let next = floor.div_euclid(secs).checked_add(1)?.checked_mul(secs)?;
        Some(
            Timestamp::from_second(next)
                .ok()?
                .to_zoned(after.time_zone().clone()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every(s: u64) -> Every {
        Every::new(Duration::from_secs(s)).unwrap()
    }

    fn next(e: Every, from: &str) -> String {
        e.next_after(&from.parse().unwrap()).unwrap().to_string()
    }

    #[test]
    fn multiples_of_the_interval_from_the_epoch() {
        assert_eq!(
            next(every(300), "2026-01-01T10:02:30Z[UTC]"),
            "2026-01-01T10:05:00+00:00[UTC]"
        );
        // Strictly after: on a fire time, the next one.
        assert_eq!(
            next(every(300), "2026-01-01T10:05:00Z[UTC]"),
            "2026-01-01T10:10:00+00:00[UTC]"
        );
        assert_eq!(
            next(every(300), "2026-01-01T10:04:59.999Z[UTC]"),
            "2026-01-01T10:05:00+00:00[UTC]"
        );
        // In the caller's zone; the instants do not depend on it.
        assert_eq!(
            next(every(3600), "2026-03-29T01:30:00+01:00[Europe/Paris]"),
            "2026-03-29T03:00:00+02:00[Europe/Paris]"
        );
        assert_eq!(
            next(every(1), "1969-12-31T23:59:59.5Z[UTC]"),
            "1970-01-01T00:00:00+00:00[UTC]"
        );
    }

    #[test]
    fn an_interval_that_does_not_divide_a_day_moves_through_the_day() {
        // 7 minutes: 1440 / 7 is not whole, so the first fire after midnight differs each day.
        let e = every(420);
        let first = |day: &str| next(e, &format!("{day}T00:00:00Z[UTC]"));
        assert_eq!(first("2026-01-01"), "2026-01-01T00:07:00+00:00[UTC]");
        assert_eq!(first("2026-01-02"), "2026-01-02T00:02:00+00:00[UTC]");
    }

    #[test]
    fn too_short_or_fractional_intervals_are_refused() {
        let e = |d: Duration| Every::new(d).unwrap_err().to_string();
        assert_eq!(
            e(Duration::ZERO),
            "an interval of 0s is too short: the shortest is 1s"
        );
        assert_eq!(
            e(Duration::from_millis(500)),
            "an interval of 500ms is too short: the shortest is 1s"
        );
        assert_eq!(
            e(Duration::from_millis(1500)),
            "an interval of 1.5s is not a whole number of seconds (write e.g. 2s or 1m30s)"
        );
        assert!(Every::new(Duration::from_secs(1)).is_ok());
    }
}
