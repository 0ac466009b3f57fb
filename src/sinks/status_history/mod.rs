//! The status page's memory: per (probe, target) pair, a fixed amount of history, filled from
//! each result and rebuilt from the results log at start (so a restart does not blank the page).
//!
//! Per pair, whatever the probe rate:
//! - a day of 5-minute slots (288 × 12 bytes): runs, failures and maintenance runs, TTFT p50 and
//!   p95 of the slot's runs (warm-ups left out), and the mean decode speed;
//! - a week of 1-hour slots (168 × 6 bytes): runs, failures and maintenance runs;
//! - 90 UTC days (90 × 20 bytes): runs, failures, maintenance runs, TTFT p50 and p95 and the
//!   median decode speed;
//! - the outcomes of the last 5 runs, the last run, and the last 5 failures (their sentence
//!   clipped to 200 characters, their failed checks and, for `repetition`, the detector);
//! - the TTFT and decode speed of each of the last 32 runs (32 × 4 bytes), for `watch`'s
//!   sparklines;
//! - the open slot's TTFT samples (at most 64: past that a uniform sample of the slot's runs),
//!   and today's TTFT and decode-speed samples (at most 288 each, exact up to a run every 5
//!   minutes, a uniform sample beyond).
//!
//! That is about 6.5 KiB a pair fixed and up to 1.3 KiB of samples (0.8 MiB for 100 pairs),
//! plus up to ~2 KiB of failure text. Two resolutions for the week, not a week of 5-minute
//! slots (2016 × 6 bytes, 12 KiB a pair): the daemon's idle budget is 8 MiB for 100 pairs, and
//! a weekly uptime needs no 5-minute detail.
//!
//! Runs in a maintenance window count apart: uptime is successes over runs outside windows.

use std::collections::{HashMap, VecDeque};
use std::io::BufRead;
use std::sync::Mutex;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::config::ResultsLogSettings;
use crate::sinks::results_log::log_files;
use crate::sinks::state::Recent;

mod days;
mod run;
mod saved;
mod slots;

use days::{Daily, Days, OpenDay};
pub(crate) use days::{Day, PairDays};
use run::figures_of;
pub(crate) use run::{sentence, Failure, Run, DAYS, DAY_SECONDS};
use saved::{coarse_row, day_row, fine_row, Sample, Tail};
pub(crate) use saved::{CoarseRow, DayRow, FineRow, SavedPair};
pub(crate) use slots::Tally;
use slots::{tenth, Counts, Fine, LogScale, Reservoir, Ring};

pub(crate) const FINE_SECONDS: i64 = 300;
pub(crate) const FINE_SLOTS: usize = 288;
pub(crate) const COARSE_SECONDS: i64 = 3600;
pub(crate) const COARSE_SLOTS: usize = 168;
pub(crate) const FAILURES_KEPT: usize = 5;
const OPEN_SAMPLES: usize = 64;
/// Runs whose own TTFT and decode speed are kept, newest last: a terminal row's sparkline.
pub(crate) const RECENT_FIGURES: usize = 32;

/// The 5-minute slot still filling: its TTFT samples and decode speeds.
#[derive(Debug)]
struct Open {
    bucket: i64,
    ttft: Reservoir<OPEN_SAMPLES>,
    tps_sum: f64,
    tps_n: u32,
}

impl Open {
    fn starting(bucket: i64) -> Open {
        Open {
            bucket,
            ttft: Reservoir::default(),
            tps_sum: 0.0,
            tps_n: 0,
        }
    }

    fn add(&mut self, run: &Run) {
        let (ttft, tps) = figures_of(run);
        if let Some(t) = ttft {
            self.ttft.add(t);
        }
        if let Some(tps) = tps {
            self.tps_sum += tps;
            self.tps_n += 1;
        }
    }

    /// (p50, p95, mean decode speed), encoded.
    fn figures(&self) -> (u16, u16, u16) {
        let [p50, p95] = self.ttft.quantiles([0.5, 0.95]);
        let tps = (self.tps_n > 0).then(|| self.tps_sum / f64::from(self.tps_n));
        (p50, p95, LogScale::encode(tps))
    }
}

#[derive(Debug)]
struct PairHistory {
    fine: Ring<Fine, FINE_SLOTS>,
    coarse: Ring<Counts, COARSE_SLOTS>,
    open: Open,
    days: Days,
    recent: Recent,
    /// Each run's TTFT and decode speed, encoded, numbered in arrival order.
    figures: Ring<[u16; 2], RECENT_FIGURES>,
    last: Option<(Timestamp, String, bool)>,
    failures: VecDeque<Failure>,
}

impl PairHistory {
    fn new() -> Box<PairHistory> {
        Box::new(PairHistory {
            fine: Ring::new(),
            coarse: Ring::new(),
            open: Open::starting(i64::MIN),
            days: Days::new(),
            recent: Recent::default(),
            figures: Ring::new(),
            last: None,
            failures: VecDeque::with_capacity(FAILURES_KEPT),
        })
    }

    fn add(&mut self, run: &Run) {
        let secs = run.started_at.as_second();
        self.days.add(run);
        let b = secs.div_euclid(FINE_SECONDS);
        let Some(slot) = self.fine.slot_mut(b) else {
            return;
        };
        slot.counts.add(run);
        if let Some(c) = self.coarse.slot_mut(secs.div_euclid(COARSE_SECONDS)) {
            c.add(run);
        }
        // A pair's runs never overlap, so they arrive in the order they started; a late one
        // (older than the open slot) still counts, but its slot's samples are gone.
        if b > self.open.bucket {
            self.open = Open::starting(b);
        }
        if b == self.open.bucket {
            self.open.add(run);
            let (p50, p95, tps) = self.open.figures();
            if let Some(slot) = self.fine.slot_mut(b) {
                (slot.ttft_p50, slot.ttft_p95, slot.tps) = (p50, p95, tps);
            }
        }
        self.recent.push(run.success);
        let (ttft, tps) = figures_of(run);
        let n = self.figures.head.map_or(0, |h| h + 1);
        if let Some(f) = self.figures.slot_mut(n) {
            *f = [LogScale::encode(ttft), LogScale::encode(tps)];
        }
        self.last = Some((run.started_at, run.outcome.clone(), run.success));
        if !run.success {
            if self.failures.len() == FAILURES_KEPT {
                self.failures.pop_front();
            }
            self.failures.push_back(Failure::of(run));
        }
    }
}

impl std::iter::Sum for Tally {
    fn sum<I: Iterator<Item = Tally>>(iter: I) -> Tally {
        iter.fold(Tally::default(), |a, b| Tally {
            runs: a.runs + b.runs,
            failed: a.failed + b.failed,
            maintenance: a.maintenance + b.maintenance,
        })
    }
}

impl Tally {
    /// Successes over runs outside maintenance; `None` without such runs.
    pub(crate) fn uptime(&self) -> Option<f64> {
        (self.runs > 0).then(|| f64::from(self.runs - self.failed) / f64::from(self.runs))
    }
}

/// Consecutive slots of equal length, oldest first, in columns (compact in JSON). The week's
/// series carries counts only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Series {
    pub start: Timestamp,
    pub step_seconds: i64,
    pub runs: Vec<u16>,
    pub failed: Vec<u16>,
    pub maintenance: Vec<u16>,
    // f32: the figures are good to 0.03% and shown to three digits; a snapshot of 100 pairs
    // is then 1 MB smaller while the page renders.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_p50_ms: Vec<Option<f32>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_p95_ms: Vec<Option<f32>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens_per_second: Vec<Option<f32>>,
}

impl Series {
    fn new(first_bucket: i64, step_seconds: i64, len: usize) -> Series {
        Series {
            start: Timestamp::from_second(first_bucket * step_seconds).unwrap_or_default(),
            step_seconds,
            runs: Vec::with_capacity(len),
            failed: Vec::with_capacity(len),
            maintenance: Vec::with_capacity(len),
            ttft_p50_ms: Vec::new(),
            ttft_p95_ms: Vec::new(),
            tokens_per_second: Vec::new(),
        }
    }

    fn push(&mut self, c: Counts) {
        self.runs.push(c.runs);
        self.failed.push(c.failed);
        self.maintenance.push(c.maintenance);
    }

    pub(crate) fn len(&self) -> usize {
        self.runs.len()
    }

    /// Slot `i`'s counts.
    pub(crate) fn tally(&self, i: usize) -> Tally {
        Tally {
            runs: u32::from(self.runs[i]),
            failed: u32::from(self.failed[i]),
            maintenance: u32::from(self.maintenance[i]),
        }
    }

    /// The counts of the last `n` slots.
    pub(crate) fn last(&self, n: usize) -> Tally {
        (self.len().saturating_sub(n)..self.len())
            .map(|i| self.tally(i))
            .sum()
    }
}

/// One pair's history as of an instant: plain data for the page, the JSON and the badge (and,
/// read back from a daemon's JSON, for `watch --from`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PairSnapshot {
    pub probe: String,
    pub target: String,
    /// Of the last `recent_runs` runs (at most RECENT_RUNS), how many failed.
    pub recent_runs: u8,
    pub recent_failed: u8,
    /// How many of the latest runs failed in a row: the state's rule reads it.
    #[serde(default)]
    pub recent_failed_in_a_row: u8,
    pub last_run: Option<Timestamp>,
    pub last_outcome: Option<String>,
    /// The TTFT of each of the last `RECENT_FIGURES` runs, oldest first (`null`: none, as for
    /// a run that failed before its first token, or a warm-up).
    #[serde(default)]
    pub recent_ttft_ms: Vec<Option<f32>>,
    /// The decode speed of the same runs.
    #[serde(default)]
    pub recent_tokens_per_second: Vec<Option<f32>>,
    pub last_1h: Tally,
    pub last_24h: Tally,
    pub last_7d: Tally,
    /// The last 24 hours in 5-minute slots, with figures.
    pub day: Series,
    /// The last 7 days in 1-hour slots, counts only.
    pub week: Series,
    /// Newest first.
    pub failures: Vec<Failure>,
    /// When the history begins, to its slot ([`PairSnapshot::since`]): a window that reaches
    /// further back has data only from here. `null` without runs in the week.
    #[serde(default)]
    pub history_since: Option<Timestamp>,
}

impl PairSnapshot {
    /// The start of the earliest slot with a run (maintenance runs too): to the hour when runs
    /// lie before the day, else to the 5-minute slot.
    fn since(day: &Series, week: &Series) -> Option<Timestamp> {
        let first = |s: &Series| {
            (0..s.len())
                .find(|&i| s.runs[i] > 0 || s.maintenance[i] > 0)
                .map(|i| s.start + jiff::SignedDuration::from_secs(s.step_seconds * i as i64))
        };
        let hour = first(week)?;
        let hour_end = hour + jiff::SignedDuration::from_secs(week.step_seconds);
        if hour_end <= day.start {
            return Some(hour);
        }
        first(day).or(Some(hour))
    }
}

impl PairHistory {
    fn snapshot(&self, probe: &str, target: &str, now: Timestamp) -> PairSnapshot {
        let nb = now.as_second().div_euclid(FINE_SECONDS);
        let mut day = Series::new(nb - FINE_SLOTS as i64 + 1, FINE_SECONDS, FINE_SLOTS);
        for b in nb - FINE_SLOTS as i64 + 1..=nb {
            let f = self.fine.get(b);
            day.push(f.counts);
            day.ttft_p50_ms.push(tenth(f.ttft_p50));
            day.ttft_p95_ms.push(tenth(f.ttft_p95));
            day.tokens_per_second.push(tenth(f.tps));
        }
        let cb = now.as_second().div_euclid(COARSE_SECONDS);
        let mut week = Series::new(cb - COARSE_SLOTS as i64 + 1, COARSE_SECONDS, COARSE_SLOTS);
        for b in cb - COARSE_SLOTS as i64 + 1..=cb {
            week.push(self.coarse.get(b));
        }
        let recent: Vec<[u16; 2]> = match self.figures.head {
            Some(h) => ((h - RECENT_FIGURES as i64 + 1).max(0)..=h)
                .map(|n| self.figures.get(n))
                .collect(),
            None => Vec::new(),
        };
        let history_since = PairSnapshot::since(&day, &week);
        PairSnapshot {
            history_since,
            probe: probe.to_string(),
            target: target.to_string(),
            recent_runs: self.recent.runs(),
            recent_failed: self.recent.failed(),
            recent_failed_in_a_row: self.recent.failed_in_a_row(),
            last_run: self.last.as_ref().map(|l| l.0),
            last_outcome: self.last.as_ref().map(|l| l.1.clone()),
            recent_ttft_ms: recent.iter().map(|f| tenth(f[0])).collect(),
            recent_tokens_per_second: recent.iter().map(|f| tenth(f[1])).collect(),
            last_1h: day.last(12),
            last_24h: day.last(FINE_SLOTS),
            last_7d: week.last(COARSE_SLOTS),
            day,
            week,
            failures: self.failures.iter().rev().cloned().collect(),
        }
    }
}

/// To and from what the status store keeps: a pair restored from what was saved is the pair
/// that was saved, so the page reads the same before and after a restart.
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
            figures: self.figures.slots.iter().flatten().copied().collect(),
            last: self.last.clone(),
            failures: self.failures.iter().cloned().collect(),
        }
    }

    /// Everything, each slot that holds runs as a row.
    fn saved(&self, probe: &str, target: &str) -> SavedPair {
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
    fn touched(&self, run: &Run) -> SavedPair {
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
    fn restored(s: &SavedPair) -> Box<PairHistory> {
        let t = &s.tail;
        let fine = s.fine.iter().map(|r| (r.bucket, Fine::from(r)));
        let coarse = s.coarse.iter().map(|r| (r.bucket, Counts::from(r)));
        let daily = s.days.iter().map(|r| (r.day, Daily::from(r)));
        let mut figures = Ring::new();
        figures.head = t.figures_head;
        for (slot, f) in figures.slots.iter_mut().zip(t.figures.chunks_exact(2)) {
            *slot = [f[0], f[1]];
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

/// Every configured pair's history.
#[derive(Debug, Default)]
pub(crate) struct StatusHistory {
    pairs: Mutex<HashMap<(String, String), Box<PairHistory>>>,
}

impl StatusHistory {
    /// Keeps exactly these (probe, target) pairs: new ones start empty, others are dropped.
    pub(crate) fn retain_pairs(&self, pairs: &[(String, String)]) {
        let mut map = self.pairs.lock().expect("history lock");
        map.retain(|k, _| pairs.contains(k));
        for k in pairs {
            map.entry(k.clone()).or_insert_with(PairHistory::new);
        }
    }

    /// Takes in one run of a pair this history keeps.
    pub(crate) fn record(&self, run: &Run) {
        let mut map = self.pairs.lock().expect("history lock");
        if let Some(h) = map.get_mut(&(run.probe.clone(), run.target.clone())) {
            h.add(run);
        }
    }

    /// Takes in one run of a pair this history keeps, and answers what it changed, for the
    /// status store.
    pub(crate) fn record_saved(&self, run: &Run) -> Option<SavedPair> {
        let mut map = self.pairs.lock().expect("history lock");
        let h = map.get_mut(&(run.probe.clone(), run.target.clone()))?;
        h.add(run);
        Some(h.touched(run))
    }

    /// Every kept pair's history, whole, for the status store.
    pub(crate) fn saved(&self) -> Vec<SavedPair> {
        let map = self.pairs.lock().expect("history lock");
        map.iter().map(|((p, t), h)| h.saved(p, t)).collect()
    }

    /// Puts back a pair's saved history, if this history keeps the pair.
    pub(crate) fn restore(&self, saved: &SavedPair) {
        let mut map = self.pairs.lock().expect("history lock");
        if let Some(h) = map.get_mut(&(saved.probe.clone(), saved.target.clone())) {
            *h = PairHistory::restored(saved);
        }
    }

    /// When each kept pair's newest run started, for pairs with one.
    pub(crate) fn last_runs(&self) -> HashMap<(String, String), Timestamp> {
        let map = self.pairs.lock().expect("history lock");
        map.iter()
            .filter_map(|(k, h)| h.last.as_ref().map(|l| (k.clone(), l.0)))
            .collect()
    }

    /// The last `DAYS` days of `target`'s pairs as of `now`, sorted by probe.
    pub(crate) fn days_target(&self, target: &str, now: Timestamp) -> Vec<PairDays> {
        let map = self.pairs.lock().expect("history lock");
        let mut out: Vec<PairDays> = map
            .iter()
            .filter(|((_, t), _)| t == target)
            .map(|((p, _), h)| h.days.view(p, now))
            .collect();
        out.sort_by(|a, b| a.probe.cmp(&b.probe));
        out
    }

    /// Every pair's history as of `now`, sorted by target then probe.
    #[cfg(test)]
    pub(crate) fn snapshot(&self, now: Timestamp) -> Vec<PairSnapshot> {
        self.snapshot_where(now, |_| true)
    }

    /// The history of `target`'s pairs as of `now`, sorted by probe: the page takes one target
    /// at a time, so a snapshot of every pair never sits in memory at once.
    pub(crate) fn snapshot_target(&self, target: &str, now: Timestamp) -> Vec<PairSnapshot> {
        self.snapshot_where(now, |t| t == target)
    }

    fn snapshot_where(&self, now: Timestamp, keep: impl Fn(&str) -> bool) -> Vec<PairSnapshot> {
        let map = self.pairs.lock().expect("history lock");
        let mut out: Vec<PairSnapshot> = map
            .iter()
            .filter(|((_, t), _)| keep(t))
            .map(|((p, t), h)| h.snapshot(p, t, now))
            .collect();
        out.sort_by(|a, b| (&a.target, &a.probe).cmp(&(&b.target, &b.probe)));
        out
    }
}

/// Replays the results log (rotated files oldest first) into `each`, skipping runs that
/// started before `oldest`; returns the runs taken in and the lines that did not parse.
pub(crate) fn replay(
    settings: &ResultsLogSettings,
    oldest: Timestamp,
    mut each: impl FnMut(&Run),
) -> (usize, usize) {
    let (mut taken, mut bad) = (0, 0);
    let mut line = String::new();
    let files = log_files(&settings.path);
    let last = files.len().saturating_sub(1);
    for (i, path) in files.into_iter().enumerate() {
        if i < last && ends_before(&path, oldest) {
            continue;
        }
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        let mut reader = std::io::BufReader::new(file);
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot read the results log");
                    break;
                }
            }
            match serde_json::from_str::<Run>(&line) {
                Ok(run) if run.started_at >= oldest => {
                    each(&run);
                    taken += 1;
                }
                Ok(_) => {}
                Err(_) => bad += 1,
            }
        }
    }
    (taken, bad)
}

/// Whether a rotated file of the results log holds only runs that started before `oldest`: its
/// last line (the run that finished last) started an hour before it. Lines are in the order runs
/// finished, so an earlier line's run may have started a little later than the last one's, never
/// an hour later (no run lasts that long). A file whose end does not read is read whole.
fn ends_before(path: &std::path::Path, oldest: Timestamp) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 64 * 1024;
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(len) = file.seek(SeekFrom::End(0)) else {
        return false;
    };
    if file
        .seek(SeekFrom::Start(len.saturating_sub(TAIL)))
        .is_err()
    {
        return false;
    }
    let mut tail = Vec::new();
    if file.read_to_end(&mut tail).is_err() {
        return false;
    }
    let text = String::from_utf8_lossy(&tail);
    let Some(last) = text.trim_end().rsplit('\n').next() else {
        return false;
    };
    let margin = jiff::SignedDuration::from_hours(1);
    serde_json::from_str::<Run>(last)
        .is_ok_and(|run| oldest.checked_sub(margin).is_ok_and(|o| run.started_at < o))
}

#[cfg(test)]
mod tests;
