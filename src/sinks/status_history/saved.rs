//! A pair's history as the status store keeps it, and back: its slots as rows (one per
//! 5-minute slot, hour and UTC day that holds runs) and the rest in one piece (the rings' heads,
//! the open slot's and the open day's samples, the last runs and the last failures). A pair
//! restored from what was saved is the pair that was saved, so the page reads the same before
//! and after a restart.

use std::collections::VecDeque;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::days::{Daily, Days, OpenDay};
use super::run::{Run, DAY_SECONDS};
use super::slots::{Counts, Fine, Reservoir, Ring};
use super::{Failure, Open, PairHistory, COARSE_SECONDS, FINE_SECONDS};
use crate::sinks::state::Recent;

/// A 5-minute slot: its runs, failures and maintenance runs, TTFT p50 and p95 and mean decode
/// speed (on the history's 16-bit log scale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FineRow {
    /// Unix seconds / 300.
    pub bucket: i64,
    pub runs: u16,
    pub failed: u16,
    pub maintenance: u16,
    pub ttft_p50: u16,
    pub ttft_p95: u16,
    pub tps: u16,
}

/// An hour: its runs, failures and maintenance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoarseRow {
    /// Unix seconds / 3600.
    pub bucket: i64,
    pub runs: u16,
    pub failed: u16,
    pub maintenance: u16,
}

/// A UTC day: its runs, failures and maintenance runs, TTFT p50 and p95 and median decode speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DayRow {
    /// Unix seconds / 86400.
    pub day: i64,
    pub runs: u32,
    pub failed: u32,
    pub maintenance: u32,
    pub ttft_p50: u16,
    pub ttft_p95: u16,
    pub tps_p50: u16,
}

/// A uniform sample as saved: how many figures it has seen, and the ones it keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Sample {
    seen: u32,
    kept: Vec<u16>,
}

impl<const N: usize> From<&Reservoir<N>> for Sample {
    fn from(r: &Reservoir<N>) -> Sample {
        Sample {
            seen: r.seen,
            kept: r.v.clone(),
        }
    }
}

impl Sample {
    fn reservoir<const N: usize>(&self) -> Reservoir<N> {
        let mut v = self.kept.clone();
        v.truncate(N);
        Reservoir { seen: self.seen, v }
    }
}

/// What a pair's history holds beside its slots, in one piece.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tail {
    fine_head: Option<i64>,
    coarse_head: Option<i64>,
    day_head: Option<i64>,
    open_bucket: i64,
    open_ttft: Sample,
    /// The open slot's decode speeds' sum, as its IEEE 754 bits (exact through JSON).
    open_tps_sum: u64,
    open_tps_n: u32,
    open_day: i64,
    open_day_ttft: Sample,
    open_day_tps: Sample,
    recent: Recent,
    figures_head: Option<i64>,
    /// The recent figures ring's slots, in the ring's order.
    figures: Vec<[u16; 2]>,
    last: Option<(Timestamp, String, bool)>,
    /// Oldest first.
    failures: Vec<Failure>,
}

/// A pair's history, or the part of it one run changed: the rows it holds (or touched) and
/// its tail.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SavedPair {
    pub probe: String,
    pub target: String,
    pub fine: Vec<FineRow>,
    pub coarse: Vec<CoarseRow>,
    pub days: Vec<DayRow>,
    pub tail: Tail,
}

fn fine_row(bucket: i64, f: Fine) -> FineRow {
    FineRow {
        bucket,
        runs: f.counts.runs,
        failed: f.counts.failed,
        maintenance: f.counts.maintenance,
        ttft_p50: f.ttft_p50,
        ttft_p95: f.ttft_p95,
        tps: f.tps,
    }
}

fn coarse_row(bucket: i64, c: Counts) -> CoarseRow {
    CoarseRow {
        bucket,
        runs: c.runs,
        failed: c.failed,
        maintenance: c.maintenance,
    }
}

fn day_row(day: i64, d: Daily) -> DayRow {
    DayRow {
        day,
        runs: d.runs,
        failed: d.failed,
        maintenance: d.maintenance,
        ttft_p50: d.ttft_p50,
        ttft_p95: d.ttft_p95,
        tps_p50: d.tps_p50,
    }
}

impl PairHistory {
    fn tail(&self) -> Tail {
        Tail {
            fine_head: self.fine.head,
            coarse_head: self.coarse.head,
            day_head: self.days.daily.head,
            open_bucket: self.open.bucket,
            open_ttft: Sample::from(&self.open.ttft),
            open_tps_sum: self.open.tps_sum.to_bits(),
            open_tps_n: self.open.tps_n,
            open_day: self.days.open_day.day,
            open_day_ttft: Sample::from(&self.days.open_day.ttft),
            open_day_tps: Sample::from(&self.days.open_day.tps),
            recent: self.recent,
            figures_head: self.figures.head,
            figures: self.figures.slots.to_vec(),
            last: self.last.clone(),
            failures: self.failures.iter().cloned().collect(),
        }
    }

    /// Everything, each slot that holds runs as a row.
    pub(super) fn saved(&self, probe: &str, target: &str) -> SavedPair {
        SavedPair {
            probe: probe.to_string(),
            target: target.to_string(),
            fine: (self.fine.held())
                .filter(|(_, f)| *f != Fine::default())
                .map(|(b, f)| fine_row(b, f))
                .collect(),
            coarse: (self.coarse.held())
                .filter(|(_, c)| *c != Counts::default())
                .map(|(b, c)| coarse_row(b, c))
                .collect(),
            days: (self.days.daily.held())
                .filter(|(_, d)| d.runs + d.maintenance > 0)
                .map(|(b, d)| day_row(b, d))
                .collect(),
            tail: self.tail(),
        }
    }

    /// What taking in `run` changed: the rows of its slots (those still held) and the tail.
    pub(super) fn touched(&self, run: &Run) -> SavedPair {
        let secs = run.started_at.as_second();
        let fine = secs.div_euclid(FINE_SECONDS);
        let coarse = secs.div_euclid(COARSE_SECONDS);
        let day = secs.div_euclid(DAY_SECONDS);
        SavedPair {
            probe: run.probe.clone(),
            target: run.target.clone(),
            fine: (self.fine.holds(fine))
                .then(|| fine_row(fine, self.fine.get(fine)))
                .into_iter()
                .collect(),
            coarse: (self.coarse.holds(coarse))
                .then(|| coarse_row(coarse, self.coarse.get(coarse)))
                .into_iter()
                .collect(),
            days: (self.days.daily.holds(day))
                .then(|| day_row(day, self.days.daily.get(day)))
                .into_iter()
                .collect(),
            tail: self.tail(),
        }
    }

    /// The history that was saved.
    pub(super) fn restored(s: &SavedPair) -> Box<PairHistory> {
        let t = &s.tail;
        let fine = s.fine.iter().map(|r| {
            let f = Fine {
                counts: Counts {
                    runs: r.runs,
                    failed: r.failed,
                    maintenance: r.maintenance,
                },
                ttft_p50: r.ttft_p50,
                ttft_p95: r.ttft_p95,
                tps: r.tps,
            };
            (r.bucket, f)
        });
        let coarse = s.coarse.iter().map(|r| {
            let c = Counts {
                runs: r.runs,
                failed: r.failed,
                maintenance: r.maintenance,
            };
            (r.bucket, c)
        });
        let daily = s.days.iter().map(|r| {
            let d = Daily {
                runs: r.runs,
                failed: r.failed,
                maintenance: r.maintenance,
                ttft_p50: r.ttft_p50,
                ttft_p95: r.ttft_p95,
                tps_p50: r.tps_p50,
            };
            (r.day, d)
        });
        let mut figures = Ring::new();
        figures.head = t.figures_head;
        for (slot, f) in figures.slots.iter_mut().zip(&t.figures) {
            *slot = *f;
        }
        Box::new(PairHistory {
            fine: Ring::restored(t.fine_head, fine),
            coarse: Ring::restored(t.coarse_head, coarse),
            open: Open {
                bucket: t.open_bucket,
                ttft: t.open_ttft.reservoir(),
                tps_sum: f64::from_bits(t.open_tps_sum),
                tps_n: t.open_tps_n,
            },
            days: Days {
                daily: Ring::restored(t.day_head, daily),
                open_day: OpenDay {
                    day: t.open_day,
                    ttft: t.open_day_ttft.reservoir(),
                    tps: t.open_day_tps.reservoir(),
                },
            },
            recent: t.recent,
            figures,
            last: t.last.clone(),
            failures: t.failures.iter().cloned().collect::<VecDeque<_>>(),
        })
    }
}
