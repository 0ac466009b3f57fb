//! The sim's own `/metrics`: what it served, as the server it plays would report it, so
//! `calibrate` can be checked without a GPU. Every finished request is recorded three ways, and
//! a scrape picks one with the scenario's `metrics=` (see [`Exposition`]):
//!
//! - vLLM's histograms (time to first token, end-to-end latency, every inter-token gap, queue
//!   time) and its finished-request counter;
//! - SGLang's equivalents under `sglang:`;
//! - llama.cpp's counters (prompt and generation tokens and seconds; it has no request counter).
//!
//! A scenario's `skew=` scales what is reported, to show that `calibrate` catches a server whose
//! own figures are wrong.

use prometheus::{
    Counter, Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts, Registry,
    TextEncoder,
};

use super::scenarios::Exposition;

/// vLLM's latency buckets (seconds), enough for the sim's scenarios.
const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
];

/// One request the sim finished, as it served it (seconds after its arrival).
pub(super) struct Observation<'a> {
    pub(super) model: &'a str,
    pub(super) ttft: f64,
    pub(super) e2e: f64,
    /// The gaps between successive content writes.
    pub(super) gaps: &'a [f64],
    pub(super) prompt_tokens: usize,
    pub(super) output_tokens: usize,
    pub(super) skew: f64,
}

/// The histograms and request counter of a server that reports them (vLLM, SGLang).
struct Histograms {
    registry: Registry,
    ttft: HistogramVec,
    e2e: HistogramVec,
    itl: HistogramVec,
    queue: HistogramVec,
    requests: IntCounterVec,
    /// vLLM labels finished requests by their finish reason; SGLang does not.
    by_reason: bool,
}

impl Histograms {
    fn new(prefix: &str, queue: &str, requests: &str, by_reason: bool) -> Histograms {
        let registry = Registry::new();
        let hist = |name: &str, help: &str| {
            let h = HistogramVec::new(
                HistogramOpts::new(format!("{prefix}:{name}"), help).buckets(BUCKETS.to_vec()),
                &["model_name"],
            )
            .expect("static histogram definitions are valid");
            registry
                .register(Box::new(h.clone()))
                .expect("names are unique");
            h
        };
        let ttft = hist(
            "time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
        );
        let e2e = hist(
            "e2e_request_latency_seconds",
            "Histogram of end to end request latency in seconds.",
        );
        let itl = hist(
            "inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
        );
        let queue = hist(queue, "Histogram of time spent waiting in the queue.");
        let labels: &[&str] = if by_reason {
            &["finished_reason", "model_name"]
        } else {
            &["model_name"]
        };
        let requests = IntCounterVec::new(
            Opts::new(
                format!("{prefix}:{requests}"),
                "Count of successfully processed requests.",
            ),
            labels,
        )
        .expect("static counter definition is valid");
        registry
            .register(Box::new(requests.clone()))
            .expect("names are unique");
        Histograms {
            registry,
            ttft,
            e2e,
            itl,
            queue,
            requests,
            by_reason,
        }
    }

    /// The sim queues nothing, so its queue time is zero.
    fn observe(&self, o: &Observation) {
        let m = [o.model];
        self.ttft.with_label_values(&m).observe(o.ttft * o.skew);
        self.e2e.with_label_values(&m).observe(o.e2e * o.skew);
        for gap in o.gaps {
            self.itl.with_label_values(&m).observe(gap * o.skew);
        }
        self.queue.with_label_values(&m).observe(0.0);
        if self.by_reason {
            self.requests.with_label_values(&["stop", o.model]).inc();
        } else {
            self.requests.with_label_values(&m).inc();
        }
    }
}

/// llama.cpp's counters (`--metrics`): unlabelled, and no count of requests.
struct LlamaCounters {
    registry: Registry,
    prompt_tokens: IntCounter,
    prompt_seconds: Counter,
    predicted_tokens: IntCounter,
    predicted_seconds: Counter,
}

impl Default for LlamaCounters {
    fn default() -> Self {
        let registry = Registry::new();
        let int = |name: &str, help: &str| {
            let c = IntCounter::new(name, help).expect("static counter definitions are valid");
            registry
                .register(Box::new(c.clone()))
                .expect("names are unique");
            c
        };
        let float = |name: &str, help: &str| {
            let c = Counter::new(name, help).expect("static counter definitions are valid");
            registry
                .register(Box::new(c.clone()))
                .expect("names are unique");
            c
        };
        LlamaCounters {
            prompt_tokens: int(
                "llamacpp:prompt_tokens_total",
                "Number of prompt tokens processed, excluding cached tokens",
            ),
            prompt_seconds: float(
                "llamacpp:prompt_seconds_total",
                "Total time spent processing prompts",
            ),
            predicted_tokens: int(
                "llamacpp:tokens_predicted_total",
                "Number of generation tokens processed",
            ),
            predicted_seconds: float(
                "llamacpp:tokens_predicted_seconds_total",
                "Total time spent generating tokens",
            ),
            registry,
        }
    }
}

impl LlamaCounters {
    /// As llama.cpp counts: prompt processing ends with the first token, so generation time
    /// covers the tokens after it.
    fn observe(&self, o: &Observation) {
        self.prompt_tokens.inc_by(o.prompt_tokens as u64);
        self.prompt_seconds.inc_by(o.ttft * o.skew);
        self.predicted_tokens.inc_by(o.output_tokens as u64);
        self.predicted_seconds
            .inc_by(o.gaps.iter().sum::<f64>() * o.skew);
    }
}

pub(super) struct Served {
    vllm: Histograms,
    sglang: Histograms,
    llama: LlamaCounters,
}

impl Default for Served {
    fn default() -> Self {
        Served {
            vllm: Histograms::new(
                "vllm",
                "request_queue_time_seconds",
                "request_success_total",
                true,
            ),
            sglang: Histograms::new("sglang", "queue_time_seconds", "num_requests_total", false),
            llama: LlamaCounters::default(),
        }
    }
}

impl Served {
    /// One finished request, recorded in every server's names.
    pub(super) fn observe(&self, o: &Observation) {
        self.vllm.observe(o);
        self.sglang.observe(o);
        self.llama.observe(o);
    }

    /// The text exposition in `names`; `None` for a server started without metrics.
    pub(super) fn encode(&self, names: Exposition) -> Option<Vec<u8>> {
        let registry = match names {
            Exposition::Vllm => &self.vllm.registry,
            Exposition::Sglang => &self.sglang.registry,
            Exposition::LlamaCpp => &self.llama.registry,
            Exposition::None => return None,
        };
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&registry.gather(), &mut buf)
            .expect("encoding into memory cannot fail");
        Some(buf)
    }
}
