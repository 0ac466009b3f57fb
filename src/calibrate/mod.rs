//! `llm-canary calibrate`: probes a target while reading the server's own figures, and sets
//! ours beside theirs (returned as data; `commands` prints it). Samples run one at a time:
//!
//! - vLLM and SGLang report histograms on their `/metrics`, scraped before and after each
//!   sample, so the deltas are that one request's figures. The server's request counter must
//!   move by exactly one: more says someone else used the server meanwhile, none says the scrape
//!   did not see our request (another replica's `/metrics`, or a server that counts late). Either
//!   way the sample is left out and the output says how many and why.
//! - llama.cpp reports each response's `timings`, and counters on its `/metrics` when started
//!   with `--metrics`. It counts no requests, so a sample's counter deltas are taken as ours
//!   only when they match the response's own token counts.
//! - Ollama reports each response's durations.
//!
//! Each side is summarised by its median (nearest rank), so one sample slowed by something else
//! on a busy machine does not decide the verdict. The gap is split into the round trip measured
//! apart (a fresh connection's GET) and what is left, which must stay within the tolerance of
//! the server's own figure.
//!
//! - this file: the options, the result, and the sample loop;
//! - `figure`: the figures compared; `server`: where the server's own figures come from and
//!   whether a sample's are ours alone; `summary`: medians, what was left out, the verdict.

mod figure;
mod server;
mod summary;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use serde::Serialize;

use crate::config::{Config, Probe, ServerKind, Target};
use crate::outcome::Outcome;
use crate::runner::Runner;
use crate::util::error_chain;
pub use figure::Figure;
use server::{settle, Alone, Source};
use summary::{left_out, median, verdict, Collected, Tally};
pub(crate) use summary::{Comparison, ServerOnly};

/// How each side is summarised over the samples.
const STATISTIC: &str = "median (nearest rank)";

/// What to calibrate, and how strictly.
#[derive(Debug, Clone)]
pub struct Options {
    pub target: String,
    /// The probe to run; by default the first that runs against the target.
    pub probe: Option<String>,
    /// Samples, one at a time (at least one).
    pub samples: u32,
    /// How far our TTFT may be from the server's after the round trip (0.05 is 5%).
    pub tolerance: f64,
    /// Where the server's Prometheus metrics are, when not beside its API.
    pub metrics_url: Option<String>,
}

/// How far the calibration has got, for a command that shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Progress {
    /// The round trip of a fresh connection was measured, in milliseconds.
    RoundTrip(f64),
    /// A sample ended: `done` of `of`.
    Sample { done: u32, of: u32 },
}

#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    pub target: String,
    pub server: &'static str,
    pub probe: String,
    pub source: String,
    /// How each side is summarised over the samples.
    pub statistic: &'static str,
    pub round_trip_ms: f64,
    pub tolerance: f64,
    /// Samples asked for.
    pub samples: u32,
    pub comparisons: Vec<Comparison>,
    pub server_only: Vec<ServerOnly>,
    /// Samples during which the server served other requests too: their deltas are not ours.
    pub shared_samples: usize,
    /// Samples the server's counters did not count at all: their deltas hold nothing of ours.
    pub uncounted_samples: usize,
    pub failed_samples: usize,
    /// What was left out and why, and how the samples were checked.
    pub notes: Vec<String>,
    pub agree: bool,
    pub verdict: String,
}

/// Runs the calibration, telling `progress` how far it has got.
pub async fn calibrate(
    cfg: &Config,
    opts: &Options,
    mut progress: impl FnMut(Progress),
) -> anyhow::Result<Calibration> {
    let target = cfg.known_target("target", &opts.target)?.clone();
    let probe = pick_probe(cfg, &target, opts.probe.as_deref())?;
    let source = Source::of(&target, opts.metrics_url.as_deref())?;
    let rtt = round_trip(&target, probe.timeouts.connect).await?;
    progress(Progress::RoundTrip(rtt));
    let scraper = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let runner = Runner::new(1);
    // One uncounted run first: a cold server's first answer is not what is being compared.
    runner.run_one(&probe, &target).await;
    let samples = opts.samples.max(1);
    let (source, mut notes) = source.inspect(&scraper, &target).await?;
    let mut collected = Collected::default();
    let mut tally = Tally::default();
    for done in 1..=samples {
        let metrics = source.metrics();
        let before = match metrics {
            Some((url, _)) => Some(server::scrape(&scraper, url).await?),
            None => None,
        };
        let r = runner.run_one(&probe, &target).await;
        progress(Progress::Sample { done, of: samples });
        if r.judged.outcome != Outcome::Ok {
            tally.failed += 1;
            continue;
        }
        collected.add(&r, source.timings(&r));
        if let (Some((url, counters)), Some(before)) = (metrics, before) {
            let judge = |after: &str| counters.alone(&before, after, &r);
            let (after, alone) = settle(&scraper, url, judge).await?;
            tally.note(alone);
            if alone == Alone::Yes {
                collected.add(&r, counters.readings(&before, &after));
            }
        }
    }
    notes.extend(left_out(&source, &tally, samples));
    let (comparisons, server_only) = collected.summarise(rtt);
    let (agree, verdict) = verdict(&comparisons, rtt, opts.tolerance, &tally);
    Ok(Calibration {
        target: target.name.clone(),
        server: target.server.as_str(),
        probe: probe.name.clone(),
        source: source.describe(),
        statistic: STATISTIC,
        round_trip_ms: rtt,
        tolerance: opts.tolerance,
        samples,
        comparisons,
        server_only,
        shared_samples: tally.shared,
        uncounted_samples: tally.uncounted,
        failed_samples: tally.failed,
        notes,
        agree,
        verdict,
    })
}

/// A probe without a context ladder: calibration compares one figure run after run.
fn pick_probe(cfg: &Config, target: &Target, name: Option<&str>) -> anyhow::Result<Arc<Probe>> {
    match name {
        Some(n) => {
            let p = cfg.known_probe(n)?;
            anyhow::ensure!(
                p.ladder.is_none(),
                "probe {n:?} climbs a context ladder, whose rungs differ by design: name a probe without one"
            );
            Ok(p.clone())
        }
        None => cfg
            .probes
            .iter()
            .find(|p| p.targets.contains(&target.name) && p.ladder.is_none())
            .cloned()
            .with_context(|| {
                format!(
                    "no probe runs against target {:?}: name one with --probe",
                    target.name
                )
            }),
    }
}

/// The round trip of a fresh connection to the server (the median of five `GET`s of its
/// health or models endpoint), which every probe run pays before the server starts work.
async fn round_trip(target: &Target, connect: Duration) -> anyhow::Result<f64> {
    let client = reqwest::Client::builder()
        .connect_timeout(connect)
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()?;
    let root = server::root(target);
    let url = match target.server {
        ServerKind::Ollama => format!("{root}/api/version"),
        _ => format!("{root}/health"),
    };
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        client
            .get(&url)
            .send()
            .await
            .map_err(|e| anyhow!("cannot reach {url}: {}", error_chain(&e)))?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(median(times.into_iter()))
}
