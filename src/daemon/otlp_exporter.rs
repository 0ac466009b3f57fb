//! The daemon's OpenTelemetry export: runs add to the aggregator (and, with `otlp.traces`,
//! queue their sampled span); every `otlp.interval` the metrics are exported into their
//! outbox; each outbox's sender delivers to `<endpoint>/v1/metrics` or `/v1/traces` with the
//! retries and the bounded queue remote-write uses.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::bytes::Bytes;
use prost::Message;

use super::outbox::{self, Outbox, Tally};
use super::schedules::Schedules;
use super::{Agent, Stop};
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
    }
}

fn tally(agent: &Agent, signal: &str) -> Tally {
    let m = &agent.metrics().otlp;
    Tally {
        sent: m.sent.with_label_values(&[signal]),
        rejected: m.dropped.with_label_values(&[signal, DROPPED_REJECTED]),
        failures: m.failures.with_label_values(&[signal]),
        queued: m.queued.with_label_values(&[signal]),
        last_success: None,
    }
}

fn metrics_routing(agent: &Agent) -> Option<(Route, Tally)> {
    let s = agent.cfg().otlp.clone()?;
    let r = route("OTLP metrics", s.metrics_url(), &s);
    Some((r, tally(agent, SIGNAL_METRICS)))
}

fn traces_routing(agent: &Agent) -> Option<(Route, Tally)> {
    let s = agent.cfg().otlp.clone().filter(|s| s.traces)?;
    let r = route("OTLP traces", s.traces_url(), &s);
    Some((r, tally(agent, SIGNAL_TRACES)))
}

/// The aggregator and the two outboxes.
pub struct OtlpExporter {
    aggregator: Mutex<Aggregator>,
    metrics_out: Arc<Outbox>,
    traces_out: Arc<Outbox>,
}

impl OtlpExporter {
    pub fn new() -> OtlpExporter {
        OtlpExporter {
            aggregator: Mutex::new(Aggregator::new(now_ns())),
            metrics_out: Outbox::new(),
            traces_out: Outbox::new(),
        }
    }

    fn aggregator(&self) -> std::sync::MutexGuard<'_, Aggregator> {
        self.aggregator.lock().expect("otlp aggregator lock")
    }

    /// Queues `body`, bounded by `max`; counts what made room.
    fn put(
        &self,
        agent: &Agent,
        outbox: &Outbox,
        signal: &str,
        body: Vec<u8>,
        n: usize,
        max: usize,
    ) {
        let mut dropped = outbox.queue().set_max(max);
        dropped += outbox.put(Bytes::from(body), n);
        let m = &agent.metrics().otlp;
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
    pub fn record(&self, agent: &Agent, r: &ProbeResult, target: &Target) {
        let cfg = agent.cfg();
        let Some(s) = &cfg.otlp else {
            return;
        };
        self.aggregator().record(r, target);
        if !s.traces || !otlp_trace::sampled(r, s.success_sample_ratio) {
            return;
        }
        if let Some(span) = otlp_trace::span(r, target) {
            let body = otlp_trace::request(otlp::resource(&cfg), vec![span]).encode_to_vec();
            self.put(agent, &self.traces_out, SIGNAL_TRACES, body, 1, s.max_spans);
        }
    }

    /// Exports the metrics into their outbox now.
    fn export(&self, agent: &Agent, s: &OtlpSettings) {
        let resource = otlp::resource(&agent.cfg());
        let exported = self.aggregator().export(resource, now_ns(), s.temporality);
        if let Some((req, points)) = exported {
            let body = req.encode_to_vec();
            self.put(
                agent,
                &self.metrics_out,
                SIGNAL_METRICS,
                body,
                points,
                s.max_points,
            );
        }
    }

    /// The export loop and the two senders.
    pub fn start(
        &self,
        agent: &Arc<Agent>,
        schedules: &Schedules,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        vec![
            tokio::spawn(export_loop(agent.clone(), schedules.stop_signal())),
            tokio::spawn(outbox::send_loop(
                agent.clone(),
                self.metrics_out.clone(),
                metrics_routing,
                schedules.stop_signal(),
            )),
            tokio::spawn(outbox::send_loop(
                agent.clone(),
                self.traces_out.clone(),
                traces_routing,
                schedules.stop_signal(),
            )),
        ]
    }

    /// At shutdown: one last export, then both outboxes, each within `otlp.timeout`.
    pub async fn final_flush(&self, agent: &Agent) {
        let Some(s) = agent.cfg().otlp.clone() else {
            return;
        };
        self.export(agent, &s);
        tokio::join!(
            outbox::flush(agent, &self.metrics_out, metrics_routing),
            outbox::flush(agent, &self.traces_out, traces_routing),
        );
    }
}

/// Exports on the configured interval until `stop`.
async fn export_loop(agent: Arc<Agent>, mut stop: Stop) {
    let mut next = Instant::now();
    loop {
        let wait = match agent.cfg().otlp.clone() {
            Some(s) => {
                if next <= Instant::now() {
                    agent.otlp.export(&agent, &s);
                    next += s.interval;
                    let now = Instant::now();
                    while next <= now {
                        next += s.interval;
                    }
                }
                next
            }
            None => {
                let ex = &agent.otlp;
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
