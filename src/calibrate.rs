//! `llm-canary calibrate`: probes a target while reading the server's own figures, and prints
//! ours beside theirs. vLLM and SGLang report histograms on their `/metrics`: each sample runs
//! alone between two scrapes, so the deltas are that one request's figures (and a delta of more
//! than one request says someone else used the server meanwhile). llama.cpp and Ollama report
//! per-response timings. The gap is split into the round trip measured apart (a fresh
//! connection's GET) and what is left, which must stay within the tolerance of the server's
//! own figure.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde::Serialize;

use crate::cli::{CalibrateArgs, Format};
use crate::config::{Config, Probe, ServerKind, Target};
use crate::result::ProbeResult;
use crate::runner::Runner;
use crate::util::error_chain;

/// A server's histogram names, for the servers that report histograms.
struct Names {
    ttft: &'static str,
    e2e: &'static str,
    itl: [&'static str; 2],
    queue: &'static str,
    requests: &'static str,
}

const VLLM: Names = Names {
    ttft: "vllm:time_to_first_token_seconds",
    e2e: "vllm:e2e_request_latency_seconds",
    itl: [
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
    ],
    queue: "vllm:request_queue_time_seconds",
    requests: "vllm:request_success_total",
};

const SGLANG: Names = Names {
    ttft: "sglang:time_to_first_token_seconds",
    e2e: "sglang:e2e_request_latency_seconds",
    itl: [
        "sglang:inter_token_latency_seconds",
        "sglang:time_per_output_token_seconds",
    ],
    queue: "sglang:queue_time_seconds",
    requests: "sglang:num_requests_total",
};

/// The server's view of one sample, in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Theirs {
    pub ttft_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub queue_ms: Option<f64>,
    /// Requests the server finished between the two scrapes (histogram servers only).
    pub requests: Option<f64>,
}

/// One figure, ours beside theirs over the samples both have.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub figure: &'static str,
    pub samples: usize,
    pub ours_ms: f64,
    pub theirs_ms: f64,
    /// Ours minus theirs, on average: network, queueing, tokenization.
    pub gap_ms: f64,
    pub ratio: f64,
    /// What the round trip does not explain, relative to the server's figure (latencies only).
    pub unexplained: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    pub target: String,
    pub server: &'static str,
    pub probe: String,
    pub source: String,
    pub round_trip_ms: f64,
    pub tolerance: f64,
    pub comparisons: Vec<Comparison>,
    /// Samples during which the server finished other requests too: their deltas are not ours.
    pub shared_samples: usize,
    pub failed_samples: usize,
    pub agree: bool,
    pub verdict: String,
}

/// Where the server's figures come from.
enum Source {
    Metrics { url: String, names: &'static Names },
    Timings,
}

fn source(target: &Target, metrics_url: Option<&str>) -> anyhow::Result<Source> {
    let root = target
        .base_url
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .to_string();
    let url = metrics_url.map_or_else(|| format!("{root}/metrics"), str::to_string);
    Ok(match target.server {
        ServerKind::Vllm => Source::Metrics { url, names: &VLLM },
        ServerKind::Sglang => Source::Metrics {
            url,
            names: &SGLANG,
        },
        ServerKind::LlamaCpp | ServerKind::Ollama => Source::Timings,
        other => bail!(
            "target {:?} is server kind `{}`, whose own figures calibrate cannot read: set `server:` to vllm, sglang, llama-cpp or ollama",
            target.name,
            other.as_str()
        ),
    })
}

/// The sum over every series of the metric `name` (a counter, or a histogram's `_sum` or
/// `_count`), from the text exposition format. Written here rather than taken from a parser
/// crate: the one maintained parser (prometheus-parse) brings chrono and itertools for what is a
/// match on a line's first word.
pub fn total(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        let value = rest
            .rsplit_once('}')
            .map_or(rest, |(_, v)| v)
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok());
        if let Some(v) = value {
            *found.get_or_insert(0.0) += v;
        }
    }
    found
}

async fn scrape(client: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let resp = client.get(url).send().await.map_err(|e| {
        anyhow!(
            "cannot read the server's metrics at {url}: {}",
            error_chain(&e)
        )
    })?;
    if !resp.status().is_success() {
        bail!(
            "the server's metrics at {url} answered HTTP {} (vLLM and SGLang serve /metrics; pass --metrics-url if elsewhere)",
            resp.status().as_u16()
        );
    }
    Ok(resp.text().await?)
}

/// One histogram's mean over the requests between two scrapes, in milliseconds.
fn mean_between(before: &str, after: &str, name: &str) -> Option<f64> {
    let sum = total(after, &format!("{name}_sum"))? - total(before, &format!("{name}_sum"))?;
    let count = total(after, &format!("{name}_count"))? - total(before, &format!("{name}_count"))?;
    (count > 0.0).then(|| sum / count * 1000.0)
}

fn from_metrics(before: &str, after: &str, names: &Names) -> Theirs {
    Theirs {
        ttft_ms: mean_between(before, after, names.ttft),
        e2e_ms: mean_between(before, after, names.e2e),
        tpot_ms: names
            .itl
            .iter()
            .find_map(|n| mean_between(before, after, n)),
        queue_ms: mean_between(before, after, names.queue),
        requests: total(after, names.requests)
            .zip(total(before, names.requests))
            .map(|(a, b)| a - b),
    }
}

/// llama.cpp's `timings` or Ollama's durations in one response.
fn from_timings(r: &ProbeResult) -> Theirs {
    let t = r.server_timings.as_ref();
    let tpot_ms = t.and_then(|t| {
        if let Some(per_second) = t["predicted_per_second"].as_f64().filter(|v| *v > 0.0) {
            return Some(1000.0 / per_second);
        }
        let (n, ns) = (t["eval_count"].as_f64()?, t["eval_duration"].as_f64()?);
        (n > 0.0).then(|| ns / n / 1e6)
    });
    Theirs {
        ttft_ms: r.server_ttft_ms,
        tpot_ms,
        ..Theirs::default()
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
    let root = target
        .base_url
        .trim_end_matches('/')
        .trim_end_matches("/v1");
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
    times.sort_by(f64::total_cmp);
    Ok(times[2])
}

fn compare(
    figure: &'static str,
    pairs: &[(f64, f64)],
    round_trip: Option<f64>,
) -> Option<Comparison> {
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len() as f64;
    let ours = pairs.iter().map(|p| p.0).sum::<f64>() / n;
    let theirs = pairs.iter().map(|p| p.1).sum::<f64>() / n;
    Some(Comparison {
        figure,
        samples: pairs.len(),
        ours_ms: ours,
        theirs_ms: theirs,
        gap_ms: ours - theirs,
        ratio: if theirs > 0.0 {
            ours / theirs
        } else {
            f64::NAN
        },
        unexplained: round_trip
            .filter(|_| theirs > 0.0)
            .map(|rtt| (ours - theirs - rtt) / theirs),
    })
}

fn pick_probe(cfg: &Config, target: &Target, name: Option<&str>) -> anyhow::Result<Arc<Probe>> {
    let known = || {
        cfg.probes
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match name {
        Some(n) => cfg
            .probes
            .iter()
            .find(|p| p.name == n)
            .cloned()
            .with_context(|| format!("unknown probe {n:?} (known: {})", known())),
        None => cfg
            .probes
            .iter()
            .find(|p| p.targets.contains(&target.name))
            .cloned()
            .with_context(|| {
                format!(
                    "no probe runs against target {:?}: name one with --probe",
                    target.name
                )
            }),
    }
}

/// Runs the calibration.
pub async fn calibrate(cfg: &Config, args: &CalibrateArgs) -> anyhow::Result<Calibration> {
    let target = cfg.target(&args.target).cloned().with_context(|| {
        let known: Vec<&str> = cfg.targets.iter().map(|t| t.name.as_str()).collect();
        format!(
            "unknown target {:?} (known: {})",
            args.target,
            known.join(", ")
        )
    })?;
    let probe = pick_probe(cfg, &target, args.probe.as_deref())?;
    let source = source(&target, args.metrics_url.as_deref())?;
    let rtt = round_trip(&target, probe.timeouts.connect).await?;
    let scraper = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let runner = Runner::new(1);
    // One uncounted run first: a cold server's first answer is not what is being compared.
    runner.run_one(&probe, &target).await;
    let (mut ttft, mut e2e, mut tpot) = (Vec::new(), Vec::new(), Vec::new());
    let (mut shared, mut failed) = (0, 0);
    for _ in 0..args.samples.max(1) {
        let (r, theirs) = match &source {
            Source::Metrics { url, names } => {
                let before = scrape(&scraper, url).await?;
                let r = runner.run_one(&probe, &target).await;
                let after = scrape(&scraper, url).await?;
                let theirs = from_metrics(&before, &after, names);
                if theirs.requests.is_some_and(|n| n > 1.0) {
                    shared += 1;
                    continue;
                }
                (r, theirs)
            }
            Source::Timings => {
                let r = runner.run_one(&probe, &target).await;
                let theirs = from_timings(&r);
                (r, theirs)
            }
        };
        if !r.success {
            failed += 1;
            continue;
        }
        let pair = |list: &mut Vec<(f64, f64)>, ours: Option<f64>, theirs: Option<f64>| {
            if let (Some(o), Some(t)) = (ours, theirs) {
                list.push((o, t));
            }
        };
        pair(&mut ttft, r.figures.ttft_ms, theirs.ttft_ms);
        pair(&mut e2e, r.figures.e2e_ms, theirs.e2e_ms);
        pair(&mut tpot, r.figures.tpot_ms, theirs.tpot_ms);
    }
    let comparisons: Vec<Comparison> = [
        compare("ttft", &ttft, Some(rtt)),
        compare("e2e", &e2e, Some(rtt)),
        compare("tpot", &tpot, None),
    ]
    .into_iter()
    .flatten()
    .collect();
    let tolerance = args.tolerance;
    let (agree, verdict) = match comparisons.iter().find(|c| c.figure == "ttft") {
        None => (
            false,
            format!(
                "no sample gave both sides' time to first token ({failed} failed, {shared} shared with other traffic)"
            ),
        ),
        Some(c) => {
            let off = c.unexplained.unwrap_or(f64::NAN);
            if off.abs() <= tolerance {
                (
                    true,
                    format!(
                        "agree: after the {rtt:.1} ms round trip, our TTFT is within {:.1}% of the server's ({:+.1}%)",
                        tolerance * 100.0,
                        off * 100.0
                    ),
                )
            } else {
                (
                    false,
                    format!(
                        "disagree: after the {rtt:.1} ms round trip, our TTFT is {:+.1}% off the server's (tolerance {:.1}%): {}",
                        off * 100.0,
                        tolerance * 100.0,
                        if off > 0.0 {
                            "the server reports less than a client waits (queueing in front of it, or its figures leave something out)"
                        } else {
                            "the server reports more than a client waits (its clock or its figures are wrong)"
                        }
                    ),
                )
            }
        }
    };
    Ok(Calibration {
        target: target.name.clone(),
        server: target.server.as_str(),
        probe: probe.name.clone(),
        source: match &source {
            Source::Metrics { url, .. } => format!("histogram deltas from {url}"),
            Source::Timings => "per-response timings".into(),
        },
        round_trip_ms: rtt,
        tolerance,
        comparisons,
        shared_samples: shared,
        failed_samples: failed,
        agree,
        verdict,
    })
}

/// The table a person reads.
pub fn table(c: &Calibration) -> String {
    let mut s = format!(
        "calibrate {} ({}), probe {}: {}; round trip {:.1} ms\n",
        c.target, c.server, c.probe, c.source, c.round_trip_ms
    );
    s.push_str(&format!(
        "{:<6} {:>7} {:>11} {:>13} {:>10} {:>7} {:>12}\n",
        "figure", "samples", "ours ms", "server ms", "gap ms", "ratio", "unexplained"
    ));
    for x in &c.comparisons {
        let unexplained = x
            .unexplained
            .map_or("-".to_string(), |u| format!("{:+.1}%", u * 100.0));
        s.push_str(&format!(
            "{:<6} {:>7} {:>11.2} {:>13.2} {:>+10.2} {:>7.3} {:>12}\n",
            x.figure, x.samples, x.ours_ms, x.theirs_ms, x.gap_ms, x.ratio, unexplained
        ));
    }
    if c.shared_samples > 0 {
        s.push_str(&format!(
            "{} sample(s) left out: the server finished other requests meanwhile, so its deltas were not ours alone\n",
            c.shared_samples
        ));
    }
    if c.failed_samples > 0 {
        s.push_str(&format!(
            "{} sample(s) failed and were left out\n",
            c.failed_samples
        ));
    }
    s.push_str(&c.verdict);
    s.push('\n');
    s
}

/// The `calibrate` command: 0 agree, 1 disagree, errors exit 2 through the caller.
pub async fn run(
    cfg: &Config,
    args: &CalibrateArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let c = calibrate(cfg, args).await?;
    match args.format {
        Format::Table => write!(out, "{}", table(&c))?,
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&c)?)?,
    }
    out.flush()?;
    Ok(if c.agree {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "# HELP vllm:time_to_first_token_seconds x\n# TYPE vllm:time_to_first_token_seconds histogram\nvllm:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 3\nvllm:time_to_first_token_seconds_sum{model_name=\"m\"} 0.15\nvllm:time_to_first_token_seconds_count{model_name=\"m\"} 3\nvllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} 3\nvllm:request_success_total{finished_reason=\"length\",model_name=\"m\"} 1\n";
    const AFTER: &str = "vllm:time_to_first_token_seconds_sum{model_name=\"m\"} 0.2\nvllm:time_to_first_token_seconds_count{model_name=\"m\"} 4\nvllm:time_to_first_token_seconds_count_other 9\nvllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} 4\nvllm:request_success_total{finished_reason=\"length\",model_name=\"m\"} 1\n";

    #[test]
    fn totals_sum_every_series_of_exactly_that_name() {
        assert_eq!(total(BEFORE, "vllm:request_success_total"), Some(4.0));
        assert_eq!(
            total(AFTER, "vllm:time_to_first_token_seconds_count"),
            Some(4.0)
        );
        assert_eq!(total(AFTER, "vllm:nothing"), None);
    }

    #[test]
    fn one_request_between_scrapes_is_that_request() {
        let t = from_metrics(BEFORE, AFTER, &VLLM);
        assert!((t.ttft_ms.unwrap() - 50.0).abs() < 1e-9);
        assert_eq!(t.requests, Some(1.0));
        assert_eq!(t.e2e_ms, None);
    }

    #[test]
    fn the_unexplained_gap_is_what_the_round_trip_leaves() {
        let c = compare("ttft", &[(52.0, 50.0), (54.0, 50.0)], Some(1.0)).unwrap();
        assert!((c.gap_ms - 3.0).abs() < 1e-9);
        assert!((c.unexplained.unwrap() - 0.04).abs() < 1e-9);
    }
}
