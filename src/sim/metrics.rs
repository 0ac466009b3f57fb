//! The sim's own `/metrics`, in vLLM's names: what it served, as a vLLM server would report it
//! (time to first token, end-to-end latency, queue time, finished requests), so `calibrate` can
//! be checked without a GPU. A scenario's `skew=` scales what is reported, to show that
//! `calibrate` catches a server whose own figures are wrong.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder,
};

/// vLLM's latency buckets (seconds), enough for the sim's scenarios.
const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
];

pub(super) struct Served {
    registry: Registry,
    ttft: HistogramVec,
    e2e: HistogramVec,
    queue: HistogramVec,
    success: IntCounterVec,
}

impl Default for Served {
    fn default() -> Self {
        let registry = Registry::new();
        let hist = |name: &str, help: &str| {
            let h = HistogramVec::new(
                HistogramOpts::new(name, help).buckets(BUCKETS.to_vec()),
                &["model_name"],
            )
            .expect("static histogram definitions are valid");
            registry
                .register(Box::new(h.clone()))
                .expect("names are unique");
            h
        };
        let ttft = hist(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
        );
        let e2e = hist(
            "vllm:e2e_request_latency_seconds",
            "Histogram of end to end request latency in seconds.",
        );
        let queue = hist(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
        );
        let success = IntCounterVec::new(
            Opts::new(
                "vllm:request_success_total",
                "Count of successfully processed requests.",
            ),
            &["finished_reason", "model_name"],
        )
        .expect("static counter definition is valid");
        registry
            .register(Box::new(success.clone()))
            .expect("names are unique");
        Served {
            registry,
            ttft,
            e2e,
            queue,
            success,
        }
    }
}

impl Served {
    /// One finished request: its first token and end after arrival, scaled by `skew`. The sim
    /// queues nothing, so its queue time is zero.
    pub(super) fn observe(&self, model: &str, ttft: f64, e2e: f64, skew: f64) {
        self.ttft.with_label_values(&[model]).observe(ttft * skew);
        self.e2e.with_label_values(&[model]).observe(e2e * skew);
        self.queue.with_label_values(&[model]).observe(0.0);
        self.success.with_label_values(&["stop", model]).inc();
    }

    pub(super) fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("encoding into memory cannot fail");
        buf
    }
}
