//! A results log summarised per (probe, target), a context ladder's per rung: runs, success
//! rate, outcome counts, latency
//! percentiles (nearest rank, as the gate computes them) and the incidents the status page's
//! rule finds in it. Pure data: `commands::report` and the MCP server print it.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::sinks::incidents::{detect, Incident};
use crate::sinks::status_history::{Failure, Run};
use crate::timeline::nearest_rank;

/// One line of the results log, as far as the summary needs it.
#[derive(Debug, Deserialize)]
struct Line {
    #[serde(flatten)]
    run: Run,
    #[serde(default)]
    e2e_ms: Option<f64>,
    /// A context ladder's rung: its runs are summarised apart, their prompts differ in size.
    #[serde(default)]
    rung: Option<String>,
}

/// The summary of a results log.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Runs that started at or after this instant were read (`--since`); `None`: all of them.
    pub since: Option<Timestamp>,
    /// The first and last run read.
    pub first_run: Option<Timestamp>,
    pub last_run: Option<Timestamp>,
    /// Lines that were not a record (skipped).
    pub skipped_lines: usize,
    /// Per (probe, target), sorted by target then probe.
    pub pairs: Vec<PairSummary>,
    /// Every incident found, the latest started first.
    pub incidents: Vec<Incident>,
    /// The latest failed runs, the latest first, at most [`LATEST_FAILURES`]: each with its
    /// sentence, as the status page lists them.
    pub latest_failures: Vec<PairFailure>,
}

/// How many failed runs the summary lists.
pub const LATEST_FAILURES: usize = 10;

/// A failed run of a pair.
#[derive(Debug, Clone, Serialize)]
pub struct PairFailure {
    pub probe: String,
    pub target: String,
    #[serde(flatten)]
    pub failure: Failure,
}

/// One (probe, target) pair's figures. Latencies are in milliseconds over the runs that are
/// not warm-ups (cold starts are reported on their own, as in the metrics) and carry the
/// figure; `None` when there are none.
#[derive(Debug, Clone, Serialize)]
pub struct PairSummary {
    pub probe: String,
    pub target: String,
    /// A context ladder's rung (`"2048"`); absent for a probe without a ladder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rung: Option<String>,
    pub runs: usize,
    pub ok: usize,
    /// `ok / runs`.
    pub success_rate: f64,
    /// Runs counted by outcome.
    pub outcomes: BTreeMap<String, usize>,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p95_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tokens_per_second_p50: Option<f64>,
    pub e2e_p95_ms: Option<f64>,
    /// Incidents of this pair's target.
    pub incidents: usize,
}

#[derive(Default)]
struct Acc {
    runs: usize,
    ok: usize,
    outcomes: BTreeMap<String, usize>,
    ttft: Vec<f64>,
    tps: Vec<f64>,
    e2e: Vec<f64>,
}

/// A log and its rotated files, oldest first: `PATH.N` … `PATH.1`, then `PATH` (those that
/// exist). The results log rotates by renaming `PATH` to `PATH.1`, `.1` to `.2` and so on.
pub fn log_files(path: &Path) -> Vec<PathBuf> {
    let rotated = |n: u32| {
        let mut s = path.as_os_str().to_owned();
        s.push(format!(".{n}"));
        PathBuf::from(s)
    };
    let mut out: Vec<PathBuf> = (1..).map(rotated).take_while(|p| p.exists()).collect();
    out.reverse();
    if path.exists() {
        out.push(path.to_path_buf());
    }
    out
}

/// Reads `path` and its rotated files and summarises the runs that started at or after `since`.
/// An error only when no file can be read at all.
pub fn summarise(path: &Path, since: Option<Timestamp>) -> std::io::Result<Summary> {
    let files = log_files(path);
    if files.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{}: no such results log", path.display()),
        ));
    }
    let mut lines = Vec::new();
    let mut skipped = 0;
    for file in files {
        let reader = std::io::BufReader::new(std::fs::File::open(&file)?);
        for line in reader.lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Line>(&line) {
                Ok(l) if since.is_none_or(|s| l.run.started_at >= s) => lines.push(l),
                Ok(_) => {}
                Err(_) => skipped += 1,
            }
        }
    }
    Ok(summarise_lines(lines, since, skipped))
}

fn summarise_lines(mut lines: Vec<Line>, since: Option<Timestamp>, skipped: usize) -> Summary {
    // The log holds runs as they finished; the incident rule takes them as they started.
    lines.sort_by_key(|l| l.run.started_at);
    let mut incidents = detect(lines.iter().map(|l| &l.run));
    incidents.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(a.id.cmp(&b.id)));
    // Rungs in the order of their sizes.
    let mut acc: BTreeMap<(String, String, Option<u32>), Acc> = BTreeMap::new();
    for l in &lines {
        let r = &l.run;
        let rung = l.rung.as_deref().and_then(|s| s.parse().ok());
        let key = (r.target.clone(), r.probe.clone(), rung);
        let a = acc.entry(key).or_default();
        a.runs += 1;
        a.ok += usize::from(r.success);
        *a.outcomes.entry(r.outcome.clone()).or_default() += 1;
        if !r.warmup {
            a.ttft.extend(r.ttft_ms);
            a.tps.extend(r.tokens_per_second);
            a.e2e.extend(l.e2e_ms);
        }
    }
    let pairs = acc
        .into_iter()
        .map(|((target, probe, rung), mut a)| {
            for v in [&mut a.ttft, &mut a.tps, &mut a.e2e] {
                v.retain(|x| x.is_finite());
                v.sort_by(f64::total_cmp);
            }
            let q = |v: &[f64], q: f64| (!v.is_empty()).then(|| nearest_rank(v, q));
            PairSummary {
                incidents: incidents.iter().filter(|i| i.target == target).count(),
                success_rate: a.ok as f64 / a.runs as f64,
                ttft_p50_ms: q(&a.ttft, 0.50),
                ttft_p95_ms: q(&a.ttft, 0.95),
                ttft_p99_ms: q(&a.ttft, 0.99),
                tokens_per_second_p50: q(&a.tps, 0.50),
                e2e_p95_ms: q(&a.e2e, 0.95),
                runs: a.runs,
                ok: a.ok,
                outcomes: a.outcomes,
                probe,
                target,
                rung: rung.map(|r| r.to_string()),
            }
        })
        .collect();
    let latest_failures = lines
        .iter()
        .rev()
        .filter(|l| !l.run.success)
        .take(LATEST_FAILURES)
        .map(|l| PairFailure {
            probe: l.run.probe.clone(),
            target: l.run.target.clone(),
            failure: Failure::of(&l.run),
        })
        .collect();
    Summary {
        latest_failures,
        since,
        first_run: lines.first().map(|l| l.run.started_at),
        last_run: lines.last().map(|l| l.run.started_at),
        skipped_lines: skipped,
        pairs,
        incidents,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(probe: &str, target: &str, secs: i64, outcome: &str, ttft: f64) -> Line {
        let json = serde_json::json!({
            "probe": probe, "target": target,
            "started_at": Timestamp::from_second(1_700_000_000 + secs).unwrap(),
            "outcome": outcome, "success": outcome == "ok",
            "ttft_ms": ttft, "tokens_per_second": 50.0, "e2e_ms": ttft * 10.0,
            "warmup": false, "error": (outcome != "ok").then_some("boom"),
        });
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn percentiles_are_nearest_rank_and_outcomes_are_counted() {
        let mut lines: Vec<Line> = (1..=100)
            .map(|i| line("p", "t", i, "ok", i as f64))
            .collect();
        lines.push(line("p", "t", 101, "stall", 500.0));
        let s = summarise_lines(lines, None, 0);
        let p = &s.pairs[0];
        assert_eq!((p.runs, p.ok), (101, 100));
        assert_eq!(p.outcomes["stall"], 1);
        assert_eq!(p.outcomes["ok"], 100);
        // 101 sorted values 1..=100, 500: rank ceil(0.95 * 101) = 96.
        assert_eq!(p.ttft_p95_ms, Some(96.0));
        assert_eq!(p.ttft_p50_ms, Some(51.0));
        assert_eq!(p.ttft_p99_ms, Some(100.0));
        assert_eq!(p.e2e_p95_ms, Some(960.0));
    }

    #[test]
    fn a_ladders_rungs_are_summarised_apart_in_the_order_of_their_sizes() {
        let rung = |secs, rung: &str, ttft| {
            let mut l = line("needle", "t", secs, "ok", ttft);
            l.rung = Some(rung.into());
            l
        };
        let lines = vec![
            rung(0, "512", 100.0),
            rung(1, "8192", 900.0),
            rung(2, "512", 110.0),
            rung(3, "2048", 300.0),
        ];
        let s = summarise_lines(lines, None, 0);
        let got: Vec<(Option<&str>, usize, Option<f64>)> = s
            .pairs
            .iter()
            .map(|p| (p.rung.as_deref(), p.runs, p.ttft_p99_ms))
            .collect();
        assert_eq!(
            got,
            [
                (Some("512"), 2, Some(110.0)),
                (Some("2048"), 1, Some(300.0)),
                (Some("8192"), 1, Some(900.0))
            ]
        );
    }

    #[test]
    fn a_failing_spell_is_an_incident_of_its_target() {
        let mut lines = vec![line("p", "t", 0, "ok", 1.0)];
        lines.extend((1..=5).map(|i| line("p", "t", i, "http_error", 1.0)));
        lines.extend((6..=12).map(|i| line("p", "t", i, "ok", 1.0)));
        lines.push(line("q", "u", 3, "ok", 1.0));
        let s = summarise_lines(lines, None, 0);
        assert_eq!(s.incidents.len(), 1);
        assert_eq!(s.incidents[0].target, "t");
        assert!(s.incidents[0].ended_at.is_some());
        let by_target: Vec<(&str, usize)> = s
            .pairs
            .iter()
            .map(|p| (p.target.as_str(), p.incidents))
            .collect();
        assert_eq!(by_target, [("t", 1), ("u", 0)]);
    }
}
