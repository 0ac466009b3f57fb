//! The 90-day memory of a pair: one slot a UTC day, and the open day's samples its figures
//! are redone from.

use jiff::Timestamp;
use serde::Serialize;

use super::run::{figures_of, Run, DAYS, DAY_SAMPLES, DAY_SECONDS};
use super::slots::{tenth, Reservoir, Ring, Tally};

/// A pair's daily rollups and the open day's samples.
#[derive(Debug)]
pub(super) struct Days {
    pub(super) daily: Ring<Daily, DAYS>,
    pub(super) open_day: OpenDay,
}

/// One UTC day of a pair: runs, failures and maintenance runs, TTFT p50 and p95 (warm-ups left
/// out) and the decode speed's median. 20 bytes.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Daily {
    pub(super) runs: u32,
    pub(super) failed: u32,
    pub(super) maintenance: u32,
    pub(super) ttft_p50: u16,
    pub(super) ttft_p95: u16,
    pub(super) tps_p50: u16,
}

/// The day still filling: its samples, from which its slot's figures are redone on each run.
#[derive(Debug)]
pub(super) struct OpenDay {
    pub(super) day: i64,
    pub(super) ttft: Reservoir<DAY_SAMPLES>,
    pub(super) tps: Reservoir<DAY_SAMPLES>,
}

impl OpenDay {
    pub(super) fn starting(day: i64) -> OpenDay {
        OpenDay {
            day,
            ttft: Reservoir::default(),
            tps: Reservoir::default(),
        }
    }
}

impl Days {
    pub(super) fn new() -> Days {
        Days {
            daily: Ring::new(),
            open_day: OpenDay::starting(i64::MIN),
        }
    }

    /// Counts the run in its day, and redoes the day's figures while it is the open one (runs
    /// older than the week still come in here while the log is replayed).
    pub(super) fn add(&mut self, run: &Run) {
        let d = run.started_at.as_second().div_euclid(DAY_SECONDS);
        let Some(slot) = self.daily.slot_mut(d) else {
            return;
        };
        if run.maintenance {
            slot.maintenance = slot.maintenance.saturating_add(1);
        } else {
            slot.runs = slot.runs.saturating_add(1);
            slot.failed = slot.failed.saturating_add(u32::from(!run.success));
        }
        if d > self.open_day.day {
            self.open_day = OpenDay::starting(d);
        }
        if d == self.open_day.day {
            let (ttft, tps) = figures_of(run);
            let o = &mut self.open_day;
            ttft.inspect(|t| o.ttft.add(*t));
            tps.inspect(|t| o.tps.add(*t));
            [slot.ttft_p50, slot.ttft_p95] = o.ttft.quantiles([0.5, 0.95]);
            [slot.tps_p50] = o.tps.quantiles([0.5]);
        }
    }

    pub(super) fn view(&self, probe: &str, now: Timestamp) -> PairDays {
        let today = now.as_second().div_euclid(DAY_SECONDS);
        let first = today - DAYS as i64 + 1;
        PairDays {
            probe: probe.to_string(),
            start: Timestamp::from_second(first * DAY_SECONDS).unwrap_or_default(),
            days: (first..=today)
                .map(|d| {
                    let s = self.daily.get(d);
                    Day {
                        tally: Tally {
                            runs: s.runs,
                            failed: s.failed,
                            maintenance: s.maintenance,
                        },
                        ttft_p50_ms: tenth(s.ttft_p50),
                        ttft_p95_ms: tenth(s.ttft_p95),
                        tokens_per_second_p50: tenth(s.tps_p50),
                    }
                })
                .collect(),
        }
    }
}

/// One UTC day of a pair, decoded.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub(crate) struct Day {
    #[serde(flatten)]
    pub tally: Tally,
    pub ttft_p50_ms: Option<f32>,
    pub ttft_p95_ms: Option<f32>,
    pub tokens_per_second_p50: Option<f32>,
}

/// A pair's last `DAYS` UTC days, oldest first, today last.
#[derive(Debug, Clone)]
pub(crate) struct PairDays {
    pub probe: String,
    /// Midnight (UTC) of the first day.
    pub start: Timestamp,
    pub days: Vec<Day>,
}
