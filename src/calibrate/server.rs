//! The server's own figures: its Prometheus metrics (vLLM's and SGLang's histograms,
//! llama.cpp's counters) read before and after a sample, and its per-response timings
//! (llama.cpp's `timings`, Ollama's durations); and whether what they hold is our request's alone.

use std::time::Duration;

use anyhow::{anyhow, bail, Context};

use super::figure::{reading, Figure, Reading};
use crate::config::{ServerKind, Target};
use crate::result::ProbeResult;
use crate::util::error_chain;

/// A server's histogram names, for the servers that report histograms.
pub(super) struct Names {
    pub ttft: &'static str,
    pub e2e: &'static str,
    /// Inter-token latency, then the older and the per-request names for the same figure.
    pub itl: &'static [&'static str],
    pub queue: &'static str,
    pub requests: &'static str,
}

pub(super) const VLLM: Names = Names {
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

pub(super) const SGLANG: Names = Names {
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
pub(super) const RECOUNT_AFTER: Duration = Duration::from_millis(100);

/// Where the server's figures come from.
pub(super) enum Source {
    /// vLLM and SGLang: histogram deltas.
    Histograms { url: String, names: &'static Names },
    /// llama.cpp: each response's timings, and counter deltas when its /metrics has them.
    LlamaCpp(Metrics),
    /// Ollama: each response's durations.
    Timings,
}

/// llama.cpp's /metrics, as found before the samples.
pub(super) enum Metrics {
    /// Its counters are served here.
    At(String),
    /// It did not answer, or without the counters (a server started without `--metrics`):
    /// per-response timings only.
    Unreachable,
}

/// What a scrape of the server's metrics is read for.
#[derive(Clone, Copy)]
pub(super) enum Counters {
    Histograms(&'static Names),
    /// llama.cpp's token and time counters.
    Llama,
}

impl Source {
    /// Where a target's own figures should be, by its server kind; not looked at yet.
    pub(super) fn of(target: &Target, metrics_url: Option<&str>) -> anyhow::Result<Source> {
        if target.api.is_hosted() {
            bail!(
                "target {:?} speaks the hosted API `{}`: hosted providers publish no server metrics and no first-token timing of their own, so calibrate has nothing of theirs to set beside ours (`once` and `gate` measure it from outside)",
                target.name,
                target.api.as_str()
            );
        }
        let url = metrics_url.map_or_else(|| format!("{}/metrics", root(target)), str::to_string);
        Ok(match target.server {
            ServerKind::Vllm => Source::Histograms { url, names: &VLLM },
            ServerKind::Sglang => Source::Histograms {
                url,
                names: &SGLANG,
            },
            ServerKind::LlamaCpp => Source::LlamaCpp(Metrics::At(url)),
            ServerKind::Ollama => Source::Timings,
            other => bail!(
                "target {:?} is server kind `{}`, whose own figures calibrate cannot read: set `server:` to vllm, sglang, llama-cpp or ollama",
                target.name,
                other.as_str()
            ),
        })
    }

    /// Looks at the server's metrics once, before the samples: a histogram server's must hold
    /// its TTFT histogram; llama.cpp's may be missing (timings only). Says what it found.
    pub(super) async fn inspect(
        self,
        scraper: &reqwest::Client,
        target: &Target,
    ) -> anyhow::Result<(Source, Vec<String>)> {
        let mut notes = Vec::new();
        let source = match self {
            Source::Histograms { url, names } => {
                let text = scrape(scraper, &url).await.context(
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
            Source::LlamaCpp(Metrics::At(url)) => match scrape(scraper, &url).await {
                Ok(text) if total(&text, LLAMA_PREDICTED_TOKENS).is_some() => {
                    notes.push(
                        "llama.cpp counts no requests: a sample's `llamacpp:` counter deltas were taken as ours only when they matched its response's own token counts (timings.prompt_n, predicted_n)".into()
                    );
                    Source::LlamaCpp(Metrics::At(url))
                }
                Ok(_) => {
                    notes.push(format!(
                        "{url} has no `{LLAMA_PREDICTED_TOKENS}`: per-response timings only"
                    ));
                    Source::LlamaCpp(Metrics::Unreachable)
                }
                Err(e) => {
                    notes.push(format!(
                        "{e}: per-response timings only (llama.cpp's server serves its counters when started with --metrics)"
                    ));
                    Source::LlamaCpp(Metrics::Unreachable)
                }
            },
            other => other,
        };
        Ok((source, notes))
    }

    /// The metrics scraped around each sample, and what they are read for.
    pub(super) fn metrics(&self) -> Option<(&str, Counters)> {
        match self {
            Source::Histograms { url, names } => Some((url, Counters::Histograms(names))),
            Source::LlamaCpp(Metrics::At(url)) => Some((url, Counters::Llama)),
            Source::LlamaCpp(Metrics::Unreachable) | Source::Timings => None,
        }
    }

    /// What a response says about itself: its own timings are ours, whoever else used the
    /// server.
    pub(super) fn timings(&self, r: &ProbeResult) -> Vec<Reading> {
        match self {
            Source::Histograms { .. } => Vec::new(),
            Source::LlamaCpp(_) | Source::Timings => from_timings(r),
        }
    }

    /// The counter that says whether a sample was ours, and which rows leave it out.
    pub(super) fn counted_by(&self) -> (&'static str, &'static str) {
        match self {
            Source::Histograms { names, .. } => (names.requests, "left out"),
            _ => (
                LLAMA_PREDICTED_TOKENS,
                "left out of the `llamacpp:` rows (their timings rows keep them)",
            ),
        }
    }

    /// In a sentence: where the server's figures came from.
    pub(super) fn describe(&self) -> String {
        match self {
            Source::Histograms { url, .. } => format!("histogram deltas from {url}"),
            Source::LlamaCpp(Metrics::At(url)) => {
                format!("per-response timings and counter deltas from {url}")
            }
            Source::LlamaCpp(Metrics::Unreachable) | Source::Timings => {
                "per-response timings".into()
            }
        }
    }
}

impl Counters {
    /// Whether the deltas between two scrapes are one request's: ours.
    pub(super) fn alone(self, before: &str, after: &str, r: &ProbeResult) -> Alone {
        match self {
            Counters::Histograms(names) => alone_histograms(before, after, names),
            Counters::Llama => alone_llama(before, after, r),
        }
    }

    /// The server's figures between two scrapes.
    pub(super) fn readings(self, before: &str, after: &str) -> Vec<Reading> {
        match self {
            Counters::Histograms(names) => from_histograms(before, after, names),
            Counters::Llama => from_llama_counters(before, after),
        }
    }
}

/// The server's root: its base URL without `/v1`.
pub(super) fn root(target: &Target) -> &str {
    target
        .base_url
        .as_str()
        .trim_end_matches('/')
        .trim_end_matches("/v1")
}

/// The sum over every series of the metric `name` (a counter, or a histogram's `_sum` or
/// `_count`), from the text exposition format. Written here rather than taken from a parser
/// crate: the one maintained parser (prometheus-parse) brings chrono and itertools for what is a
/// match on a line's first word.
pub(super) fn total(text: &str, name: &str) -> Option<f64> {
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

pub(super) async fn scrape(client: &reqwest::Client, url: &str) -> anyhow::Result<String> {
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
pub(super) enum Alone {
    Yes,
    /// Other requests ran meanwhile: as many as the server counted, when it counts them.
    Shared(Option<f64>),
    /// The server counted nothing.
    Uncounted,
}

/// By the request counter (or, without one, the TTFT histogram's count), and never when the
/// TTFT histogram took in more than one first token: a request still running elsewhere.
pub(super) fn alone_histograms(before: &str, after: &str, names: &Names) -> Alone {
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
pub(super) fn alone_llama(before: &str, after: &str, r: &ProbeResult) -> Alone {
    let predicted = delta(before, after, LLAMA_PREDICTED_TOKENS).unwrap_or(0.0);
    if predicted < 0.5 {
        return Alone::Uncounted;
    }
    let t = r.measured.reading.server_timings.as_ref();
    let own_predicted = t
        .and_then(|t| t["predicted_n"].as_f64())
        .or(r.measured.output_tokens.map(|n| n as f64));
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

pub(super) fn from_histograms(before: &str, after: &str, names: &Names) -> Vec<Reading> {
    let mut v = Vec::new();
    v.extend(reading(
        Figure::Ttft,
        names.ttft,
        mean_between(before, after, names.ttft),
    ));
    v.extend(reading(
        Figure::E2e,
        names.e2e,
        mean_between(before, after, names.e2e),
    ));
    v.extend(
        names
            .itl
            .iter()
            .find_map(|n| reading(Figure::Tpot, n, mean_between(before, after, n))),
    );
    v.extend(reading(
        Figure::Queue,
        names.queue,
        mean_between(before, after, names.queue),
    ));
    v
}

/// llama.cpp's counters over one request: its prompt time, and its generation time per token.
/// The first token comes out of prompt processing, so generation time covers the ones after it
/// (as `timings.predicted_per_second` counts).
pub(super) fn from_llama_counters(before: &str, after: &str) -> Vec<Reading> {
    let prompt = delta(before, after, LLAMA_PROMPT_SECONDS).map(|s| s * 1000.0);
    let tpot = delta(before, after, LLAMA_PREDICTED_SECONDS)
        .zip(delta(before, after, LLAMA_PREDICTED_TOKENS))
        .filter(|(_, n)| *n > 1.5)
        .map(|(s, n)| s * 1000.0 / (n - 1.0));
    let mut v = Vec::new();
    v.extend(reading(Figure::Ttft, LLAMA_PROMPT_SECONDS, prompt));
    v.extend(reading(Figure::Tpot, LLAMA_PREDICTED_SECONDS, tpot));
    v
}

/// llama.cpp's `timings` or Ollama's durations in one response.
fn from_timings(r: &ProbeResult) -> Vec<Reading> {
    let Some(t) = r.measured.reading.server_timings.as_ref() else {
        return Vec::new();
    };
    let mut v = Vec::new();
    let ttft_from = if t["prompt_ms"].is_number() {
        "timings.prompt_ms"
    } else {
        "prompt_eval_duration + load_duration"
    };
    v.extend(reading(Figure::Ttft, ttft_from, r.measured.server_ttft_ms));
    if let Some(per_second) = t["predicted_per_second"].as_f64().filter(|v| *v > 0.0) {
        v.extend(reading(
            Figure::Tpot,
            "timings.predicted_per_second",
            Some(1000.0 / per_second),
        ));
    } else if let (Some(n), Some(ns)) = (t["eval_count"].as_f64(), t["eval_duration"].as_f64()) {
        let tpot = (n > 0.0).then(|| ns / n / 1e6);
        v.extend(reading(Figure::Tpot, "eval_duration / eval_count", tpot));
    }
    v
}

/// Scrapes after a sample; when the server has not counted it yet, once more a moment later.
pub(super) async fn settle<F: Fn(&str) -> Alone>(
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
