//! A results log summarised per (probe, target), a context ladder's per rung: runs, success
//! rate, outcome counts, latency
//! percentiles (nearest rank, as the gate computes them) and the incidents the status page's
//! rule finds in it. Pure data: `commands::report` and the MCP server print it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufRead;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::sinks::incidents::{detect, Incident};
use crate::sinks::results_log::log_files;
use crate::sinks::status_history::{Failure, Run};
use crate::timeline::nearest_rank;

/// One line of the results log, as far as the summary needs it.
#[derive(Debug, Deserialize)]
struct Line {
    #[serde(flatten)]
    run: Run,
    #[serde(default)]
    e2e_ms: Option<f64>,
    /// The connection's TCP and TLS steps (absent in logs written before they were recorded).
    #[serde(default)]
    connect_ms: Option<f64>,
    #[serde(default)]
    tls_ms: Option<f64>,
    /// A context ladder's rung: its runs are summarised apart, their prompts differ in size.
    #[serde(default)]
    rung: Option<String>,
}

/// The summary of a results log.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
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
pub(crate) const LATEST_FAILURES: usize = 10;

/// A failed run of a pair.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PairFailure {
    pub probe: String,
    pub target: String,
    #[serde(flatten)]
    pub failure: Failure,
}

/// One (probe, target) pair's figures. Latencies are in milliseconds over the runs that are
/// not warm-ups (cold starts are reported on their own, as in the metrics) and carry the
/// figure; `None` when there are none.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PairSummary {
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
    /// The connection's TCP connect and TLS handshake, medians over every run that took them
    /// (warm-ups too: a cold model does not slow the connection).
    pub connect_p50_ms: Option<f64>,
    pub tls_p50_ms: Option<f64>,
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
    connect: Vec<f64>,
    tls: Vec<f64>,
}

/// How often [`open_log`] lists and opens the files before it gives up on a log that keeps
/// rotating; one rotation in every try would take a log written faster than it can be read.
const OPEN_TRIES: usize = 100;

/// The log's files, oldest first, opened as they stood at one moment. The daemon may rotate
/// the log while it is read, renaming each file one place on: the files are listed and opened
/// again until a listing after the opening names the same files, each still the one opened
/// under its name, so that no run is missed or read twice.
fn open_log(path: &Path) -> std::io::Result<Vec<File>> {
    let id = |m: std::fs::Metadata| (m.dev(), m.ino());
    for _ in 0..OPEN_TRIES {
        let names = log_files(path);
        if names.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{}: no such results log", path.display()),
            ));
        }
        let files = match names.iter().map(File::open).collect::<Result<Vec<_>, _>>() {
            Ok(files) => files,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let unmoved = names.iter().zip(&files).all(|(name, file)| {
            match (std::fs::metadata(name), file.metadata()) {
                (Ok(now), Ok(opened)) => id(now) == id(opened),
                _ => false,
            }
        });
        if unmoved && log_files(path) == names {
            return Ok(files);
        }
    }
    Err(std::io::Error::other(format!(
        "{}: the log rotated each time it was opened ({OPEN_TRIES} tries)",
        path.display()
    )))
}

/// Reads `path` and its rotated files and summarises the runs that started at or after `since`.
/// An error only when no file can be read at all.
pub(crate) fn summarise(path: &Path, since: Option<Timestamp>) -> std::io::Result<Summary> {
    let files = open_log(path)?;
    let mut lines = Vec::new();
    let mut skipped = 0;
    for file in files {
        let reader = std::io::BufReader::new(file);
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
        a.connect.extend(l.connect_ms);
        a.tls.extend(l.tls_ms);
        if !r.warmup {
            a.ttft.extend(r.ttft_ms);
            a.tps.extend(r.tokens_per_second);
            a.e2e.extend(l.e2e_ms);
        }
    }
    let pairs = acc
        .into_iter()
        .map(|((target, probe, rung), mut a)| {
            for v in [
                &mut a.ttft,
                &mut a.tps,
                &mut a.e2e,
                &mut a.connect,
                &mut a.tls,
            ] {
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
                connect_p50_ms: q(&a.connect, 0.50),
                tls_p50_ms: q(&a.tls, 0.50),
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
        // Logs from before the connection's steps were recorded: no figure.
        assert_eq!((p.connect_p50_ms, p.tls_p50_ms), (None, None));
    }

    #[test]
    fn the_connections_steps_are_medians_over_the_runs_that_took_them() {
        let lines: Vec<Line> = (1..=5)
            .map(|i| {
                let mut l = line("p", "t", i, "ok", 100.0);
                l.connect_ms = Some(i as f64);
                // Over http:// there is no handshake.
                l.tls_ms = (i > 2).then_some(10.0 * i as f64);
                l
            })
            .collect();
        let p = &summarise_lines(lines, None, 0).pairs[0];
        assert_eq!((p.connect_p50_ms, p.tls_p50_ms), (Some(3.0), Some(40.0)));
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

    /// `report` on the log of a running daemon: the log rotates while it is read (every file
    /// renamed one place on, a new current file made), and each summary still reads every run
    /// written up to some moment, none missed or read twice, and never fails for a file gone.
    #[test]
    fn a_log_rotating_while_it_is_read_is_read_whole() {
        use crate::result::ProbeResult;
        use crate::sinks::results_log::ResultsLog;
        use std::sync::atomic::{AtomicBool, Ordering};

        const WRITTEN: usize = 1000;
        let tmp = tempfile::tempdir().unwrap();
        let r = ProbeResult::example();
        // Ten runs a file, and room for all of them: no run is ever dropped.
        let settings = crate::config::ResultsLogSettings {
            path: tmp.path().join("results.jsonl"),
            max_bytes: 10 * (r.to_json_line().len() as u64 + 1),
            keep: 200,
        };
        let mut log = ResultsLog::open(&settings).unwrap();
        log.append(&r).unwrap();
        let writing = AtomicBool::new(true);
        let (reads, last) = std::thread::scope(|s| {
            s.spawn(|| {
                // A run finished every 200 µs: a rotation every 2 ms, renaming up to 100 files.
                for _ in 1..WRITTEN {
                    log.append(&r).unwrap();
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                writing.store(false, Ordering::Relaxed);
            });
            let (mut reads, mut last) = (0, 0);
            while writing.load(Ordering::Relaxed) {
                let runs = summarise(&settings.path, None).map(|s| s.pairs[0].runs);
                let read = runs.as_ref().is_ok_and(|&n| n >= last);
                if !read {
                    // Stop the writer's loop from holding the scope open.
                    writing.store(false, Ordering::Relaxed);
                }
                assert!(read, "after {last} runs read, then {runs:?}");
                (reads, last) = (reads + 1, runs.unwrap());
            }
            (reads, last)
        });
        assert!(reads > 10, "only {reads} reads while the log rotated");
        assert!(last <= WRITTEN);
        assert_eq!(
            summarise(&settings.path, None).unwrap().pairs[0].runs,
            WRITTEN
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
