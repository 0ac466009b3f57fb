//! `llm-canary calibrate`: probes a target while reading the server's own figures, and prints
//! ours beside theirs. Samples run one at a time:
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
use crate::timeline::nearest_rank;
use crate::util::error_chain;

/// A server's histogram names, for the servers that report histograms.
struct Names {
    ttft: &'static str,
    e2e: &'static str,
    /// Inter-token latency, then the older and the per-request names for the same figure.
    itl: &'static [&'static str],
    queue: &'static str,
    requests: &'static str,
}

const VLLM: Names = Names {
    ttft: "vllm:time_to_first_token_seconds",
    e2e: "vllm:e2e_request_latency_seconds",
    itl: &[
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
        "vllm:request_time_per_output_token_seconds",
    ],
    queue: "vllm:request_queue_time_seconds",
    requests: "vllm:request_success_total",
};

const SGLANG: Names = Names {
    ttft: "sglang:time_to_first_token_seconds",
    e2e: "sglang:e2e_request_latency_seconds",
    itl: &[
        "sglang:inter_token_latency_seconds",
        "sglang:time_per_output_token_seconds",
    ],
    queue: "sglang:queue_time_seconds",
    requests: "sglang:num_requests_total",
};

/// llama.cpp's counters (`--metrics`); it has none of requests.
const LLAMA_PROMPT_TOKENS: &str = "llamacpp:prompt_tokens_total";
const LLAMA_PROMPT_SECONDS: &str = "llamacpp:prompt_seconds_total";
const LLAMA_PREDICTED_TOKENS: &str = "llamacpp:tokens_predicted_total";
const LLAMA_PREDICTED_SECONDS: &str = "llamacpp:tokens_predicted_seconds_total";

/// A server may count a request a moment after its last byte: when a scrape finds it not yet
/// counted, scrape once more this much later before calling the sample uncounted.
const RECOUNT_AFTER: Duration = Duration::from_millis(100);

/// How each side is summarised over the samples.
const STATISTIC: &str = "median (nearest rank)";

/// The figures in the order they are printed.
const FIGURES: [&str; 4] = ["ttft", "e2e", "tpot", "queue"];

/// One of the server's figures for one sample, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
struct Reading {
    figure: &'static str,
    /// Where the server says it: its metric, or the response's field.
    from: String,
    ms: f64,
}

fn reading(figure: &'static str, from: &str, ms: Option<f64>) -> Option<Reading> {
    ms.filter(|v| v.is_finite()).map(|ms| Reading {
        figure,
        from: from.to_string(),
        ms,
    })
}

/// One figure, ours beside one of the server's, each side's median over the samples both have.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub figure: &'static str,
    /// Where the server reports it: a metric, or a response field.
    pub server_figure: String,
    pub samples: usize,
    pub ours_ms: f64,
    pub theirs_ms: f64,
    /// Ours minus theirs: network, queueing, tokenization.
    pub gap_ms: f64,
    pub ratio: f64,
    /// What the round trip does not explain, relative to the server's figure (latencies only).
    pub unexplained: Option<f64>,
}

/// A figure only the server knows, such as its queue time (which a client waits inside its
/// TTFT): the median over the samples.
#[derive(Debug, Clone, Serialize)]
pub struct ServerOnly {
    pub figure: &'static str,
    pub server_figure: String,
    pub samples: usize,
    pub theirs_ms: f64,
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

/// Where the server's figures come from.
enum Source {
    /// vLLM and SGLang: histogram deltas.
    Histograms { url: String, names: &'static Names },
    /// llama.cpp: each response's timings, and counter deltas when its /metrics answers.
    LlamaCpp { url: Option<String> },
    /// Ollama: each response's durations.
    Timings,
}

fn source(target: &Target, metrics_url: Option<&str>) -> anyhow::Result<Source> {
    let root = target
        .base_url
        .as_str()
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .to_string();
    let url = metrics_url.map_or_else(|| format!("{root}/metrics"), str::to_string);
    Ok(match target.server {
        ServerKind::Vllm => Source::Histograms { url, names: &VLLM },
        ServerKind::Sglang => Source::Histograms {
            url,
            names: &SGLANG,
        },
        ServerKind::LlamaCpp => Source::LlamaCpp { url: Some(url) },
        ServerKind::Ollama => Source::Timings,
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
            "the server's metrics at {url} answered HTTP {}",
            resp.status().as_u16()
        );
    }
    Ok(resp.text().await?)
}

/// How much the metric `name` grew between two scrapes.
fn delta(before: &str, after: &str, name: &str) -> Option<f64> {
    Some(total(after, name)? - total(before, name)?)
}

/// One histogram's mean over what it observed between two scrapes, in milliseconds.
fn mean_between(before: &str, after: &str, name: &str) -> Option<f64> {
    let sum = delta(before, after, &format!("{name}_sum"))?;
    let count = delta(before, after, &format!("{name}_count"))?;
    (count > 0.0).then(|| sum / count * 1000.0)
}

/// Whether the server's figures between two scrapes are one request's: ours.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Alone {
    Yes,
    /// Other requests ran meanwhile: as many as the server counted, when it counts them.
    Shared(Option<f64>),
    /// The server counted nothing.
    Uncounted,
}

/// By the request counter (or, without one, the TTFT histogram's count), and never when the
/// TTFT histogram took in more than one first token: a request still running elsewhere.
fn alone_histograms(before: &str, after: &str, names: &Names) -> Alone {
    let first_tokens = delta(before, after, &format!("{}_count", names.ttft));
    let requests = delta(before, after, names.requests).or(first_tokens);
    let n = requests.unwrap_or(0.0);
    if n < 0.5 {
        return Alone::Uncounted;
    }
    let n = n.max(first_tokens.unwrap_or(0.0));
    if n > 1.5 {
        Alone::Shared(Some(n))
    } else {
        Alone::Yes
    }
}

/// llama.cpp counts no requests: its counters' deltas are ours when they hold the response's own
/// token counts, no more.
fn alone_llama(before: &str, after: &str, r: &ProbeResult) -> Alone {
    let predicted = delta(before, after, LLAMA_PREDICTED_TOKENS).unwrap_or(0.0);
    if predicted < 0.5 {
        return Alone::Uncounted;
    }
    let t = r.server_timings.as_ref();
    let own_predicted = t
        .and_then(|t| t["predicted_n"].as_f64())
        .or(r.output_tokens.map(|n| n as f64));
    let own_prompt = t.and_then(|t| t["prompt_n"].as_f64());
    let differs = |counted: Option<f64>, own: Option<f64>| matches!((counted, own), (Some(a), Some(b)) if (a - b).abs() > 0.5);
    if differs(Some(predicted), own_predicted)
        || differs(delta(before, after, LLAMA_PROMPT_TOKENS), own_prompt)
    {
        Alone::Shared(None)
    } else {
        Alone::Yes
    }
}

fn from_histograms(before: &str, after: &str, names: &Names) -> Vec<Reading> {
    let mut v = Vec::new();
    v.extend(reading(
        "ttft",
        names.ttft,
        mean_between(before, after, names.ttft),
    ));
    v.extend(reading(
        "e2e",
        names.e2e,
        mean_between(before, after, names.e2e),
    ));
    v.extend(
        names
            .itl
            .iter()
            .find_map(|n| reading("tpot", n, mean_between(before, after, n))),
    );
    v.extend(reading(
        "queue",
        names.queue,
        mean_between(before, after, names.queue),
    ));
    v
}

/// llama.cpp's counters over one request: its prompt time, and its generation time per token.
/// The first token comes out of prompt processing, so generation time covers the ones after it
/// (as `timings.predicted_per_second` counts).
fn from_llama_counters(before: &str, after: &str) -> Vec<Reading> {
    let prompt = delta(before, after, LLAMA_PROMPT_SECONDS).map(|s| s * 1000.0);
    let tpot = delta(before, after, LLAMA_PREDICTED_SECONDS)
        .zip(delta(before, after, LLAMA_PREDICTED_TOKENS))
        .filter(|(_, n)| *n > 1.5)
        .map(|(s, n)| s * 1000.0 / (n - 1.0));
    let mut v = Vec::new();
    v.extend(reading("ttft", LLAMA_PROMPT_SECONDS, prompt));
    v.extend(reading("tpot", LLAMA_PREDICTED_SECONDS, tpot));
    v
}

/// llama.cpp's `timings` or Ollama's durations in one response.
fn from_timings(r: &ProbeResult) -> Vec<Reading> {
    let Some(t) = r.server_timings.as_ref() else {
        return Vec::new();
    };
    let mut v = Vec::new();
    let ttft_from = if t["prompt_ms"].is_number() {
        "timings.prompt_ms"
    } else {
        "prompt_eval_duration + load_duration"
    };
    v.extend(reading("ttft", ttft_from, r.server_ttft_ms));
    if let Some(per_second) = t["predicted_per_second"].as_f64().filter(|v| *v > 0.0) {
        v.extend(reading(
            "tpot",
            "timings.predicted_per_second",
            Some(1000.0 / per_second),
        ));
    } else if let (Some(n), Some(ns)) = (t["eval_count"].as_f64(), t["eval_duration"].as_f64()) {
        let tpot = (n > 0.0).then(|| ns / n / 1e6);
        v.extend(reading("tpot", "eval_duration / eval_count", tpot));
    }
    v
}

/// Our figure that the server's `figure` is compared with.
fn ours(r: &ProbeResult, figure: &str) -> Option<f64> {
    match figure {
        "ttft" => r.figures.ttft_ms,
        "e2e" => r.figures.e2e_ms,
        "tpot" => r.figures.tpot_ms,
        _ => None,
    }
}

/// One figure from one of the server's sources: (ours, theirs) for each sample.
struct Row {
    figure: &'static str,
    from: String,
    samples: Vec<(Option<f64>, f64)>,
}

/// The rows, in the order first seen.
#[derive(Default)]
struct Collected {
    rows: Vec<Row>,
}

impl Collected {
    fn add(&mut self, r: &ProbeResult, readings: Vec<Reading>) {
        for x in readings {
            let ours = ours(r, x.figure);
            // A figure both sides have is compared over the samples where both have it.
            if ours.is_none() && x.figure != "queue" {
                continue;
            }
            match self
                .rows
                .iter_mut()
                .find(|row| row.figure == x.figure && row.from == x.from)
            {
                Some(row) => row.samples.push((ours, x.ms)),
                None => self.rows.push(Row {
                    figure: x.figure,
                    from: x.from,
                    samples: vec![(ours, x.ms)],
                }),
            }
        }
    }

    /// The comparisons and the server-only figures, grouped by figure.
    fn summarise(mut self, rtt: f64) -> (Vec<Comparison>, Vec<ServerOnly>) {
        let rank = |f: &str| {
            FIGURES
                .iter()
                .position(|x| *x == f)
                .unwrap_or(FIGURES.len())
        };
        self.rows.sort_by_key(|row| rank(row.figure));
        let (mut both, mut theirs_only) = (Vec::new(), Vec::new());
        for Row {
            figure,
            from,
            samples,
        } in self.rows
        {
            let pairs: Vec<(f64, f64)> = samples
                .iter()
                .filter_map(|(o, t)| o.map(|o| (o, *t)))
                .collect();
            if pairs.is_empty() {
                theirs_only.push(ServerOnly {
                    figure,
                    server_figure: from,
                    samples: samples.len(),
                    theirs_ms: median(samples.iter().map(|s| s.1)),
                });
                continue;
            }
            let latency = figure == "ttft" || figure == "e2e";
            both.push(compare(figure, from, &pairs, latency.then_some(rtt)));
        }
        (both, theirs_only)
    }
}

/// The nearest-rank median: always one of the values (`values` is never empty here).
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    nearest_rank(&v, 0.5)
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
        .as_str()
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
    Ok(median(times.into_iter()))
}

fn compare(
    figure: &'static str,
    server_figure: String,
    pairs: &[(f64, f64)],
    round_trip: Option<f64>,
) -> Comparison {
    let ours = median(pairs.iter().map(|p| p.0));
    let theirs = median(pairs.iter().map(|p| p.1));
    Comparison {
        figure,
        server_figure,
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
    }
}

fn pick_probe(cfg: &Config, target: &Target, name: Option<&str>) -> anyhow::Result<Arc<Probe>> {
    match name {
        Some(n) => Ok(cfg.known_probe(n)?.clone()),
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

/// What the samples left out, and why.
#[derive(Default)]
struct Tally {
    shared: usize,
    /// The most requests the server counted between two scrapes.
    most: f64,
    uncounted: usize,
    failed: usize,
}

impl Tally {
    fn note(&mut self, alone: Alone) {
        match alone {
            Alone::Yes => {}
            Alone::Shared(n) => {
                self.shared += 1;
                self.most = self.most.max(n.unwrap_or(0.0));
            }
            Alone::Uncounted => self.uncounted += 1,
        }
    }
}

/// Scrapes after a sample; when the server has not counted it yet, once more a moment later.
async fn settle<F: Fn(&str) -> Alone>(
    client: &reqwest::Client,
    url: &str,
    judge: F,
) -> anyhow::Result<(String, Alone)> {
    let after = scrape(client, url).await?;
    let alone = judge(&after);
    if alone != Alone::Uncounted {
        return Ok((after, alone));
    }
    tokio::time::sleep(RECOUNT_AFTER).await;
    let after = scrape(client, url).await?;
    let alone = judge(&after);
    Ok((after, alone))
}

/// Runs the calibration.
pub async fn calibrate(cfg: &Config, args: &CalibrateArgs) -> anyhow::Result<Calibration> {
    let target = cfg.known_target("target", &args.target)?.clone();
    let probe = pick_probe(cfg, &target, args.probe.as_deref())?;
    let source = source(&target, args.metrics_url.as_deref())?;
    let rtt = round_trip(&target, probe.timeouts.connect).await?;
    let scraper = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let runner = Runner::new(1);
    // One uncounted run first: a cold server's first answer is not what is being compared.
    runner.run_one(&probe, &target).await;
    let samples = args.samples.max(1);
    let mut notes = Vec::new();
    // What the server's metrics hold, looked at once before the samples.
    let source = match source {
        Source::Histograms { url, names } => {
            let text = scrape(&scraper, &url).await.context(
                "vLLM and SGLang serve /metrics beside /v1; pass --metrics-url if it is elsewhere",
            )?;
            if total(&text, &format!("{}_count", names.ttft)).is_none() {
                bail!(
                    "the metrics at {url} have no `{}` (yet): is target {:?}'s `server: {}` right, and are these its metrics? (--metrics-url)",
                    names.ttft,
                    target.name,
                    target.server.as_str()
                );
            }
            if total(&text, names.requests).is_none() {
                notes.push(format!(
                    "the server exposes no request counter (`{}`): each sample was checked with the count of `{}` instead",
                    names.requests, names.ttft
                ));
            }
            Source::Histograms { url, names }
        }
        Source::LlamaCpp { url: Some(url) } => match scrape(&scraper, &url).await {
            Ok(text) if total(&text, LLAMA_PREDICTED_TOKENS).is_some() => {
                notes.push(
                    "llama.cpp counts no requests: a sample's `llamacpp:` counter deltas were taken as ours only when they matched its response's own token counts (timings.prompt_n, predicted_n)".into()
                );
                Source::LlamaCpp { url: Some(url) }
            }
            Ok(_) => {
                notes.push(format!(
                    "{url} has no `{LLAMA_PREDICTED_TOKENS}`: per-response timings only"
                ));
                Source::LlamaCpp { url: None }
            }
            Err(e) => {
                notes.push(format!(
                    "{e}: per-response timings only (llama.cpp's server serves its counters when started with --metrics)"
                ));
                Source::LlamaCpp { url: None }
            }
        },
        other => other,
    };

    let mut collected = Collected::default();
    let mut tally = Tally::default();
    for _ in 0..samples {
        match &source {
            Source::Histograms { url, names } => {
                let before = scrape(&scraper, url).await?;
                let r = runner.run_one(&probe, &target).await;
                if !r.success() {
                    tally.failed += 1;
                    continue;
                }
                let (after, alone) = settle(&scraper, url, |after| {
                    alone_histograms(&before, after, names)
                })
                .await?;
                tally.note(alone);
                if alone == Alone::Yes {
                    collected.add(&r, from_histograms(&before, &after, names));
                }
            }
            Source::LlamaCpp { url } => {
                let before = match url {
                    Some(url) => Some(scrape(&scraper, url).await?),
                    None => None,
                };
                let r = runner.run_one(&probe, &target).await;
                if !r.success() {
                    tally.failed += 1;
                    continue;
                }
                // Each response's timings are its own, whoever else used the server.
                collected.add(&r, from_timings(&r));
                if let (Some(url), Some(before)) = (url, before) {
                    let (after, alone) =
                        settle(&scraper, url, |after| alone_llama(&before, after, &r)).await?;
                    tally.note(alone);
                    if alone == Alone::Yes {
                        collected.add(&r, from_llama_counters(&before, &after));
                    }
                }
            }
            Source::Timings => {
                let r = runner.run_one(&probe, &target).await;
                if !r.success() {
                    tally.failed += 1;
                    continue;
                }
                collected.add(&r, from_timings(&r));
            }
        }
    }
    notes.extend(left_out(&source, &tally, samples));
    let (comparisons, server_only) = collected.summarise(rtt);
    let (agree, verdict) = verdict(&comparisons, rtt, args.tolerance, &tally);
    Ok(Calibration {
        target: target.name.clone(),
        server: target.server.as_str(),
        probe: probe.name.clone(),
        source: match &source {
            Source::Histograms { url, .. } => format!("histogram deltas from {url}"),
            Source::LlamaCpp { url: Some(url) } => {
                format!("per-response timings and counter deltas from {url}")
            }
            Source::LlamaCpp { url: None } | Source::Timings => "per-response timings".into(),
        },
        statistic: STATISTIC,
        round_trip_ms: rtt,
        tolerance: args.tolerance,
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

/// The samples left out, said plainly: a shared server, or a scrape that did not see ours.
fn left_out(source: &Source, t: &Tally, samples: u32) -> Vec<String> {
    let mut notes = Vec::new();
    let (counter, rows) = match source {
        Source::Histograms { names, .. } => (names.requests, "left out"),
        _ => (
            LLAMA_PREDICTED_TOKENS,
            "left out of the `llamacpp:` rows (their timings rows keep them)",
        ),
    };
    if t.shared > 0 {
        let how_many = if t.most > 0.0 {
            format!(" (up to {} requests between two scrapes)", t.most)
        } else {
            " (its token counters moved by more than our response's own counts)".into()
        };
        notes.push(format!(
            "{} of {samples} sample(s) {rows}: the server served other requests meanwhile{how_many}, so its figures were not ours alone: this is a shared server; calibrate where no other traffic reaches it",
            t.shared
        ));
    }
    if t.uncounted > 0 {
        notes.push(format!(
            "{} of {samples} sample(s) {rows}: the server's `{counter}` did not move while our request ran (nor {} ms after it ended), so its figures hold nothing of ours: are these metrics another replica's, behind a load balancer? (--metrics-url)",
            t.uncounted,
            RECOUNT_AFTER.as_millis()
        ));
    }
    if t.failed > 0 {
        notes.push(format!(
            "{} of {samples} sample(s) failed and were left out",
            t.failed
        ));
    }
    notes
}

/// Agreement on TTFT, against each of the server's TTFT figures: what the round trip leaves of
/// the gap between the medians must be within the tolerance of the server's median.
fn verdict(comparisons: &[Comparison], rtt: f64, tolerance: f64, t: &Tally) -> (bool, String) {
    let ttft: Vec<&Comparison> = comparisons.iter().filter(|c| c.figure == "ttft").collect();
    let off = |c: &Comparison| c.unexplained.unwrap_or(f64::NAN);
    let Some(worst) = ttft
        .iter()
        .copied()
        .max_by(|a, b| off(a).abs().total_cmp(&off(b).abs()))
    else {
        return (
            false,
            format!(
                "no sample gave both sides' time to first token ({} failed, {} shared with other traffic, {} not counted by the server)",
                t.failed, t.shared, t.uncounted
            ),
        );
    };
    let w = off(worst);
    if w.abs() <= tolerance {
        let each: Vec<String> = ttft
            .iter()
            .map(|c| format!("{:+.1}% against {}", off(c) * 100.0, c.server_figure))
            .collect();
        (
            true,
            format!(
                "agree: after the {rtt:.1} ms round trip, our median TTFT is within {:.1}% of the server's ({})",
                tolerance * 100.0,
                each.join(", ")
            ),
        )
    } else {
        (
            false,
            format!(
                "disagree: after the {rtt:.1} ms round trip, our median TTFT is {:+.1}% off the server's {} (tolerance {:.1}%): {}",
                w * 100.0,
                worst.server_figure,
                tolerance * 100.0,
                if w > 0.0 {
                    "the server reports less than a client waits (queueing in front of it, or its figures leave something out)"
                } else {
                    "the server reports more than a client waits (its clock or its figures are wrong)"
                }
            ),
        )
    }
}

/// The table a person reads.
pub fn table(c: &Calibration) -> String {
    let mut s = format!(
        "calibrate {} ({}), probe {}: {}; round trip {:.1} ms; each side's {} over {} sample(s)\n",
        c.target, c.server, c.probe, c.source, c.round_trip_ms, c.statistic, c.samples
    );
    s.push_str(&format!(
        "{:<6} {:>7} {:>11} {:>13} {:>10} {:>7} {:>12}  {}\n",
        "figure",
        "samples",
        "ours ms",
        "server ms",
        "gap ms",
        "ratio",
        "unexplained",
        "server's figure"
    ));
    for x in &c.comparisons {
        let unexplained = x
            .unexplained
            .map_or("-".to_string(), |u| format!("{:+.1}%", u * 100.0));
        s.push_str(&format!(
            "{:<6} {:>7} {:>11.2} {:>13.2} {:>+10.2} {:>7.3} {:>12}  {}\n",
            x.figure,
            x.samples,
            x.ours_ms,
            x.theirs_ms,
            x.gap_ms,
            x.ratio,
            unexplained,
            x.server_figure
        ));
    }
    for x in &c.server_only {
        s.push_str(&format!(
            "{:<6} {:>7} {:>11} {:>13.2} {:>10} {:>7} {:>12}  {} (the server's alone: a client waits it inside its TTFT)\n",
            x.figure, x.samples, "-", x.theirs_ms, "-", "-", "-", x.server_figure
        ));
    }
    for note in &c.notes {
        s.push_str(note);
        s.push('\n');
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

    const BEFORE: &str = "# HELP vllm:time_to_first_token_seconds x\n# TYPE vllm:time_to_first_token_seconds histogram\nvllm:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 3\nvllm:time_to_first_token_seconds_sum{model_name=\"m\"} 0.15\nvllm:time_to_first_token_seconds_count{model_name=\"m\"} 3\nvllm:inter_token_latency_seconds_sum{model_name=\"m\"} 1.0\nvllm:inter_token_latency_seconds_count{model_name=\"m\"} 100\nvllm:request_queue_time_seconds_sum{model_name=\"m\"} 0.0\nvllm:request_queue_time_seconds_count{model_name=\"m\"} 3\nvllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} 3\nvllm:request_success_total{finished_reason=\"length\",model_name=\"m\"} 1\n";
    const AFTER: &str = "vllm:time_to_first_token_seconds_sum{model_name=\"m\"} 0.2\nvllm:time_to_first_token_seconds_count{model_name=\"m\"} 4\nvllm:time_to_first_token_seconds_count_other 9\nvllm:inter_token_latency_seconds_sum{model_name=\"m\"} 1.2\nvllm:inter_token_latency_seconds_count{model_name=\"m\"} 120\nvllm:request_queue_time_seconds_sum{model_name=\"m\"} 0.004\nvllm:request_queue_time_seconds_count{model_name=\"m\"} 4\nvllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} 4\nvllm:request_success_total{finished_reason=\"length\",model_name=\"m\"} 1\n";

    fn find<'a>(v: &'a [Reading], figure: &str) -> Option<&'a Reading> {
        v.iter().find(|r| r.figure == figure)
    }

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
        assert_eq!(alone_histograms(BEFORE, AFTER, &VLLM), Alone::Yes);
        let v = from_histograms(BEFORE, AFTER, &VLLM);
        assert!((find(&v, "ttft").unwrap().ms - 50.0).abs() < 1e-9);
        // Twenty gaps of 10 ms: the inter-token histogram counts gaps, not requests.
        let tpot = find(&v, "tpot").unwrap();
        assert!((tpot.ms - 10.0).abs() < 1e-9);
        assert_eq!(tpot.from, "vllm:inter_token_latency_seconds");
        assert!((find(&v, "queue").unwrap().ms - 4.0).abs() < 1e-9);
        assert_eq!(find(&v, "e2e"), None);
    }

    #[test]
    fn a_counter_that_moved_by_none_or_by_more_leaves_the_sample_out() {
        assert_eq!(alone_histograms(BEFORE, BEFORE, &VLLM), Alone::Uncounted);
        let busy = AFTER.replace(
            "finished_reason=\"length\",model_name=\"m\"} 1",
            "finished_reason=\"length\",model_name=\"m\"} 3",
        );
        assert_eq!(
            alone_histograms(BEFORE, &busy, &VLLM),
            Alone::Shared(Some(3.0))
        );
        // One request finished, but another's first token came meanwhile: not ours alone.
        let started = AFTER.replace(
            "vllm:time_to_first_token_seconds_count{model_name=\"m\"} 4",
            "vllm:time_to_first_token_seconds_count{model_name=\"m\"} 5",
        );
        assert_eq!(
            alone_histograms(BEFORE, &started, &VLLM),
            Alone::Shared(Some(2.0))
        );
        // No request counter: the TTFT histogram's count stands in.
        let strip = |t: &str| {
            t.lines()
                .filter(|l| !l.starts_with("vllm:request_success_total"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(
            alone_histograms(&strip(BEFORE), &strip(AFTER), &VLLM),
            Alone::Yes
        );
    }

    #[test]
    fn llama_counters_are_ours_when_they_hold_our_token_counts() {
        let before = "llamacpp:prompt_tokens_total 100\nllamacpp:prompt_seconds_total 1.0\nllamacpp:tokens_predicted_total 50\nllamacpp:tokens_predicted_seconds_total 2.0\n";
        let after = "llamacpp:prompt_tokens_total 145\nllamacpp:prompt_seconds_total 1.432\nllamacpp:tokens_predicted_total 75\nllamacpp:tokens_predicted_seconds_total 2.662\n";
        let mut r = ProbeResult::example();
        r.server_timings = Some(serde_json::json!({"prompt_n": 45, "predicted_n": 25}));
        assert_eq!(alone_llama(before, after, &r), Alone::Yes);
        let v = from_llama_counters(before, after);
        assert!((find(&v, "ttft").unwrap().ms - 432.0).abs() < 1e-6);
        // 662 ms over the 24 tokens after the first.
        assert!((find(&v, "tpot").unwrap().ms - 662.0 / 24.0).abs() < 1e-6);
        r.server_timings = Some(serde_json::json!({"prompt_n": 45, "predicted_n": 20}));
        assert_eq!(alone_llama(before, after, &r), Alone::Shared(None));
        assert_eq!(alone_llama(before, before, &r), Alone::Uncounted);
    }

    #[test]
    fn medians_not_means_decide() {
        // One sample slowed by something else: the mean would read +12%, the median does not.
        let pairs = [
            (101.0, 100.0),
            (102.0, 100.0),
            (101.0, 100.0),
            (160.0, 100.0),
            (102.0, 100.0),
        ];
        let c = compare("ttft", "x".into(), &pairs, Some(1.0));
        assert_eq!((c.ours_ms, c.theirs_ms), (102.0, 100.0));
        assert!((c.gap_ms - 2.0).abs() < 1e-9);
        assert!((c.unexplained.unwrap() - 0.01).abs() < 1e-9);
        let (agree, verdict) = verdict(&[c], 1.0, 0.05, &Tally::default());
        assert!(agree, "{verdict}");
        assert!(verdict.contains("median"), "{verdict}");
    }

    #[test]
    fn queue_time_is_the_servers_alone() {
        let mut c = Collected::default();
        let mut r = ProbeResult::example();
        r.figures.ttft_ms = Some(52.0);
        c.add(&r, from_histograms(BEFORE, AFTER, &VLLM));
        let (both, theirs) = c.summarise(1.0);
        let figures: Vec<&str> = both.iter().map(|c| c.figure).collect();
        assert_eq!(figures, ["ttft"]);
        assert_eq!(theirs.len(), 1);
        assert_eq!(theirs[0].figure, "queue");
        assert_eq!(theirs[0].server_figure, "vllm:request_queue_time_seconds");
        assert!((theirs[0].theirs_ms - 4.0).abs() < 1e-9);
    }
}
