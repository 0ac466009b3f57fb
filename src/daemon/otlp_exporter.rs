//! The daemon's OpenTelemetry export: runs add to the aggregator (and, with `otlp.traces`,
//! queue their sampled span); every `otlp.interval` the metrics are exported into their
//! outbox; each outbox's sender delivers to `<endpoint>/v1/metrics` or `/v1/traces` with the
//! retries and the bounded queue remote-write uses.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::bytes::Bytes;
use prost::Message;

use super::outbox::{self, Outbox, Tally};
use super::phase::Stop;
use super::state::{Running, SinkClient};
use crate::config::{OtlpSettings, Target};
use crate::result::ProbeResult;
use crate::sinks::metrics::{DROPPED_QUEUE_FULL, DROPPED_REJECTED};
use crate::sinks::otlp::{self, Aggregator};
use crate::sinks::otlp_trace;
use crate::sinks::outbound::Route;

/// How often an agent without `otlp:` looks again (a reload may add it).
const UNCONFIGURED_RECHECK: Duration = Duration::from_secs(15);
const SIGNAL_METRICS: &str = "metrics";
const SIGNAL_TRACES: &str = "traces";
const HEADERS: &[(&str, &str)] = &[("content-type", "application/x-protobuf")];

fn now_ns() -> u64 {
    u64::try_from(jiff::Timestamp::now().as_nanosecond()).unwrap_or(0)
}

fn route(what: &'static str, url: String, s: &OtlpSettings) -> Route {
    Route {
        what,
        url,
        headers: HEADERS,
        auth: s.auth.clone(),
        timeout: s.timeout,
        max_backoff: s.max_backoff,
        outbound: s.outbound.clone(),
    }
}

fn tally(running: &Running, signal: &str) -> Tally {
    let m = &running.metrics().otlp;
    Tally {
        sent: m.sent.with_label_values(&[signal]),
        rejected: m.dropped.with_label_values(&[signal, DROPPED_REJECTED]),
        failures: m.failures.with_label_values(&[signal]),
        queued: m.queued.with_label_values(&[signal]),
        last_success: None,
    }
}

fn metrics_routing(running: &Running) -> Option<(Route, Tally)> {
    let s = running.cfg().otlp.clone()?;
    let r = route("OTLP metrics", s.metrics_url(), &s);
    Some((r, tally(running, SIGNAL_METRICS)))
}

fn traces_routing(running: &Running) -> Option<(Route, Tally)> {
    let s = running.cfg().otlp.clone().filter(|s| s.traces)?;
    let r = route("OTLP traces", s.traces_url(), &s);
    Some((r, tally(running, SIGNAL_TRACES)))
}

/// The aggregator and the two outboxes, following the running config.
pub(super) struct OtlpExporter {
    running: Running,
    client: SinkClient,
    aggregator: Mutex<Aggregator>,
    metrics_out: Arc<Outbox>,
    traces_out: Arc<Outbox>,
}

impl OtlpExporter {
    pub(super) fn new(running: Running, client: SinkClient) -> Arc<OtlpExporter> {
        Arc::new(OtlpExporter {
            running,
            client,
            aggregator: Mutex::new(Aggregator::new(now_ns())),
            metrics_out: Outbox::new(),
            traces_out: Outbox::new(),
        })
    }

    fn aggregator(&self) -> std::sync::MutexGuard<'_, Aggregator> {
        self.aggregator.lock().expect("otlp aggregator lock")
    }

    /// Queues `body`, bounded by `max`; counts what made room.
    fn put(&self, outbox: &Outbox, signal: &str, body: Vec<u8>, n: usize, max: usize) {
        let mut dropped = outbox.queue().set_max(max);
        dropped += outbox.put(Bytes::from(body), n);
        let m = &self.running.metrics().otlp;
        if dropped > 0 {
            m.dropped
                .with_label_values(&[signal, DROPPED_QUEUE_FULL])
                .inc_by(dropped as u64);
            tracing::warn!(
                signal,
                dropped,
                "OTLP queue full: the oldest items were dropped"
            );
        }
        m.queued
            .with_label_values(&[signal])
            .set(outbox.queue().items() as i64);
    }

    /// Adds a finished run: to the metrics, and its span when sampled.
    pub(super) fn record(&self, r: &ProbeResult, target: &Target) {
        let cfg = self.running.cfg();
        let Some(s) = &cfg.otlp else {
            return;
        };
        self.aggregator().record(r, target);
        if !s.traces || !otlp_trace::sampled(r, s.success_sample_ratio) {
            return;
        }
        if let Some(span) = otlp_trace::span(r, target) {
            let body = otlp_trace::request(otlp::resource(&cfg), vec![span]).encode_to_vec();
            self.put(&self.traces_out, SIGNAL_TRACES, body, 1, s.max_spans);
        }
    }

    /// Exports the metrics into their outbox now.
    fn export(&self, s: &OtlpSettings) {
        let resource = otlp::resource(&self.running.cfg());
        let exported = self.aggregator().export(resource, now_ns(), s.temporality);
        if let Some((req, points)) = exported {
            let body = req.encode_to_vec();
            self.put(
                &self.metrics_out,
                SIGNAL_METRICS,
                body,
                points,
                s.max_points,
            );
        }
    }

    /// The export loop and the two senders.
    pub(super) fn start(self: &Arc<Self>, stop: &Stop) -> Vec<tokio::task::JoinHandle<()>> {
        vec![
            tokio::spawn(export_loop(self.clone(), stop.clone())),
            outbox::spawn_sender(
                &self.running,
                &self.client,
                &self.metrics_out,
                metrics_routing,
                stop,
            ),
            outbox::spawn_sender(
                &self.running,
                &self.client,
                &self.traces_out,
                traces_routing,
                stop,
            ),
        ]
    }

    /// At shutdown: one last export, then both outboxes, each within `otlp.timeout`.
    pub(super) async fn final_flush(&self) {
        let Some(s) = self.running.cfg().otlp.clone() else {
            return;
        };
        self.export(&s);
        let (running, client) = (&self.running, &self.client);
        tokio::join!(
            outbox::flush(running, client, &self.metrics_out, metrics_routing),
            outbox::flush(running, client, &self.traces_out, traces_routing),
        );
    }
}

/// Exports on the configured interval until `stop`.
async fn export_loop(ex: Arc<OtlpExporter>, mut stop: Stop) {
    let mut next = Instant::now();
    loop {
        let wait = match ex.running.cfg().otlp.clone() {
            Some(s) => {
                if next <= Instant::now() {
                    ex.export(&s);
                    next += s.interval;
                    let now = Instant::now();
                    while next <= now {
                        next += s.interval;
                    }
                }
                next
            }
            None => {
                let dropped = ex.metrics_out.queue().clear() + ex.traces_out.queue().clear();
                if dropped > 0 {
                    tracing::info!(dropped, "otlp removed from the config: queues emptied");
                }
                Instant::now() + UNCONFIGURED_RECHECK
            }
        };
        tokio::select! {
            _ = tokio::time::sleep_until(wait.into()) => {}
            _ = stop.stopped() => return,
        }
    }
}
