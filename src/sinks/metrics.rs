//! The agent's Prometheus registry: DESIGN's series per (probe, target), labelled with probe,
//! target, model and the static labels, plus the agent's own health. Metric names live here
//! and nowhere else.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use prometheus::core::Collector;
use prometheus::proto::LabelPair;
use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::config::{Config, Target};
use crate::outcome::Outcome;
use crate::result::ProbeResult;

pub const PREFIX: &str = "llm_canary_";

/// TTFT and end-to-end buckets, in seconds (DESIGN).
pub const LATENCY_BUCKETS: [f64; 20] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0,
    20.0, 30.0, 60.0,
];
/// Per-token gap buckets, in seconds (DESIGN).
pub const TOKEN_BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0,
];

pub struct Metrics {
    /// Every collector, read one family at a time (the text format, remote-write), never the
    /// whole registry at once. A `Registry` checks at construction that names are unique.
    collectors: Vec<Box<dyn Collector>>,
    /// The agent's static labels, which the registry adds to every series it gathers.
    static_labels: Vec<(String, String)>,
    /// The target label keys this registry was built for (series labels are fixed per family).
    target_keys: Vec<String>,
    probe_success: GaugeVec,
    runs: IntCounterVec,
    ttft: HistogramVec,
    answer_ttft: HistogramVec,
    e2e: HistogramVec,
    tpot: HistogramVec,
    itl: HistogramVec,
    tokens_per_second: GaugeVec,
    last_ttft: GaugeVec,
    last_e2e: GaugeVec,
    output_tokens: GaugeVec,
    repetition_score: GaugeVec,
    last_run: GaugeVec,
    last_success: GaugeVec,
    warmup_ttft: GaugeVec,
    server_ttft: GaugeVec,
    target_info: GaugeVec,
    target_changes: IntCounterVec,
    last_change: GaugeVec,
    output_changes: IntCounterVec,
    /// The (reported_model, fingerprint) each pair's `target_info` series carries now.
    info_of: Mutex<HashMap<Vec<String>, [String; 2]>>,
    skipped: IntCounterVec,
    aborted: IntCounterVec,
    /// Per target (no probe label): 1 while it is in a maintenance window.
    maintenance: GaugeVec,
    pub push_failures: IntCounter,
    pub last_push_success: Gauge,
    pub last_push_failure: Gauge,
    pub runs_in_flight: IntGauge,
    pub reload_successful: IntGauge,
    pub reload_success_time: Gauge,
    pub remote_write: RemoteWriteMetrics,
}

/// The remote-write queue's health.
pub struct RemoteWriteMetrics {
    pub samples_sent: IntCounter,
    /// By `reason`: `queue_full` (an outage outlasted the queue) or `rejected` (the receiver
    /// refused the request with a 4xx; resending would not help).
    pub samples_dropped: IntCounterVec,
    pub failures: IntCounter,
    pub queue_samples: IntGauge,
    pub last_success: Gauge,
}

/// Why remote-write samples were dropped (the `reason` label).
pub const DROPPED_QUEUE_FULL: &str = "queue_full";
pub const DROPPED_REJECTED: &str = "rejected";

fn name(n: &str) -> String {
    format!("{PREFIX}{n}")
}

/// The label keys the targets of `cfg` use, sorted: every family carries all of them.
pub fn target_label_keys(cfg: &Config) -> Vec<String> {
    let keys: BTreeSet<&String> = cfg.targets.iter().flat_map(|t| t.labels.keys()).collect();
    keys.into_iter().cloned().collect()
}

impl Metrics {
    pub fn new(cfg: &Config) -> Arc<Metrics> {
        let target_keys = target_label_keys(cfg);
        let registry =
            Registry::new_custom(None, Some(cfg.agent.labels.clone().into_iter().collect()))
                .expect("agent labels are validated label names");
        let mut pair: Vec<&str> = vec!["probe", "target", "model"];
        pair.extend(target_keys.iter().map(String::as_str));
        let mut with_outcome = pair.clone();
        with_outcome.push("outcome");
        let mut with_identity = pair.clone();
        with_identity.extend(["reported_model", "fingerprint"]);
        let counter = |n: &str, help: &str| IntCounterVec::new(Opts::new(name(n), help), &pair);
        let per_target = &pair[1..];

        let mut collectors: Vec<Box<dyn Collector>> = Vec::new();
        macro_rules! reg {
            ($m:expr) => {{
                let m = $m.expect("metric definitions are static and valid");
                registry
                    .register(Box::new(m.clone()))
                    .expect("metric names are unique");
                collectors.push(Box::new(m.clone()));
                m
            }};
        }
        let gauge = |n: &str, help: &str| GaugeVec::new(Opts::new(name(n), help), &pair);
        let hist = |n: &str, help: &str, b: &[f64]| {
            HistogramVec::new(HistogramOpts::new(name(n), help).buckets(b.to_vec()), &pair)
        };
        let build = reg!(IntGaugeVec::new(
            Opts::new(name("build_info"), "The agent's version."),
            &["version"]
        ));
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        let m = Metrics {
            probe_success: reg!(gauge("probe_success", "1 if the last run of this probe on this target was ok, else 0.")),
            runs: reg!(IntCounterVec::new(Opts::new(name("probe_runs_total"), "Probe runs by outcome."), &with_outcome)),
            ttft: reg!(hist("ttft_seconds", "Time to first generated token (warm-up runs excluded).", &LATENCY_BUCKETS)),
            answer_ttft: reg!(hist("answer_ttft_seconds", "Time to the first token of the answer, after any reasoning (warm-up runs excluded).", &LATENCY_BUCKETS)),
            e2e: reg!(hist("e2e_seconds", "Request start to end of stream, for completed streams (warm-up runs excluded).", &LATENCY_BUCKETS)),
            tpot: reg!(hist("time_per_output_token_seconds", "Decode time per output token after the first (warm-up runs excluded).", &TOKEN_BUCKETS)),
            itl: reg!(hist("inter_token_latency_seconds", "Gaps between successive content chunks (warm-up runs excluded).", &TOKEN_BUCKETS)),
            tokens_per_second: reg!(gauge("output_tokens_per_second", "Decode speed of the last run.")),
            last_ttft: reg!(gauge("last_ttft_seconds", "Time to first token of the last (non-warm-up) run.")),
            last_e2e: reg!(gauge("last_e2e_seconds", "End-to-end time of the last completed (non-warm-up) run.")),
            output_tokens: reg!(gauge("output_tokens", "Output tokens of the last run.")),
            repetition_score: reg!(gauge("repetition_score", "Degeneration score (0..1) of the last run's output.")),
            last_run: reg!(gauge("last_run_timestamp_seconds", "When the last run started (Unix time).")),
            last_success: reg!(gauge("last_success_timestamp_seconds", "When the last ok run started (Unix time).")),
            warmup_ttft: reg!(gauge("warmup_ttft_seconds", "Time to first token of the last cold start (first ok run after start or after the target was unreachable).")),
            server_ttft: reg!(gauge("server_ttft_seconds", "The server's own time to first token for the last run, when its response carries it.")),
            target_info: reg!(GaugeVec::new(Opts::new(name("target_info"), "1, labelled with the model name and build fingerprint the target reported last."), &with_identity)),
            target_changes: reg!(counter("target_changes_total", "Times the target's reported build fingerprint changed.")),
            last_change: reg!(gauge("target_last_change_timestamp_seconds", "When the target's reported build fingerprint last changed (Unix time): what alert texts say 'serving build changed N minutes ago' from.")),
            output_changes: reg!(counter("output_changes_total", "Times a temperature-0 probe's output differed from its previous one.")),
            info_of: Mutex::new(HashMap::new()),
            skipped: reg!(counter("skipped_runs_total", "Scheduled runs skipped because the previous run of the pair was still in flight.")),
            aborted: reg!(counter("aborted_runs_total", "Runs still in flight when the shutdown grace period ended.")),
            maintenance: reg!(GaugeVec::new(Opts::new(name("maintenance"), "1 while the target is in a maintenance window (configured or announced), else 0."), per_target)),
            push_failures: reg!(IntCounter::new(name("push_failures_total"), "Failed pushes to the Pushgateway.")),
            last_push_success: reg!(Gauge::new(name("last_push_success_timestamp_seconds"), "When the last push succeeded (Unix time).")),
            last_push_failure: reg!(Gauge::new(name("last_push_failure_timestamp_seconds"), "When the last push failed (Unix time).")),
            runs_in_flight: reg!(IntGauge::new(name("runs_in_flight"), "Probe runs in flight now.")),
            reload_successful: reg!(IntGauge::new(name("config_last_reload_successful"), "1 if the last config load or reload succeeded.")),
            reload_success_time: reg!(Gauge::new(name("config_last_reload_success_timestamp_seconds"), "When the config was last loaded successfully (Unix time).")),
            remote_write: RemoteWriteMetrics {
                samples_sent: reg!(IntCounter::new(name("remote_write_samples_sent_total"), "Samples the remote-write receiver accepted.")),
                samples_dropped: reg!(IntCounterVec::new(Opts::new(name("remote_write_samples_dropped_total"), "Samples never delivered: queue_full when an outage outlasted the queue, rejected when the receiver refused them."), &["reason"])),
                failures: reg!(IntCounter::new(name("remote_write_failures_total"), "Failed remote-write requests (each retry counts).")),
                queue_samples: reg!(IntGauge::new(name("remote_write_queue_samples"), "Samples waiting in the remote-write queue.")),
                last_success: reg!(Gauge::new(name("remote_write_last_success_timestamp_seconds"), "When a remote-write request last succeeded (Unix time).")),
            },
            static_labels: cfg.agent.labels.clone().into_iter().collect(),
            collectors,
            target_keys,
        };
        for reason in [DROPPED_QUEUE_FULL, DROPPED_REJECTED] {
            m.remote_write.samples_dropped.with_label_values(&[reason]);
        }
        m.reload_successful.set(1);
        m.reload_success_time.set(now_seconds());
        Arc::new(m)
    }

    /// Whether this registry can hold `cfg`'s series (same target label keys and agent labels).
    pub fn fits(
        &self,
        cfg: &Config,
        agent_labels_before: &std::collections::BTreeMap<String, String>,
    ) -> bool {
        self.target_keys == target_label_keys(cfg) && &cfg.agent.labels == agent_labels_before
    }

    /// The variable label values of one (probe, target) pair, in family order.
    pub fn pair_values(&self, probe: &str, target: &Target) -> Vec<String> {
        let mut v = vec![probe.to_string()];
        v.extend(self.target_values(target));
        v
    }

    /// The label values of a target's own series (no probe), in family order.
    pub fn target_values(&self, target: &Target) -> Vec<String> {
        let mut v = vec![target.name.clone(), target.model.clone()];
        v.extend(
            self.target_keys
                .iter()
                .map(|k| target.labels.get(k).cloned().unwrap_or_default()),
        );
        v
    }

    /// Sets `llm_canary_maintenance` of `target`.
    pub fn set_maintenance(&self, target: &Target, on: bool) {
        let v = self.target_values(target);
        self.maintenance
            .with_label_values(&v.iter().map(String::as_str).collect::<Vec<_>>())
            .set(if on { 1.0 } else { 0.0 });
    }

    /// Drops the series of a target that left the config (or changed its labels).
    pub fn remove_target(&self, target: &Target) {
        let v = self.target_values(target);
        let _ = self
            .maintenance
            .remove_label_values(&v.iter().map(String::as_str).collect::<Vec<_>>());
    }

    pub fn record(&self, r: &ProbeResult, target: &Target) {
        let values = self.pair_values(&r.probe, target);
        let l: Vec<&str> = values.iter().map(String::as_str).collect();
        let mut lo = l.clone();
        lo.push(r.outcome.as_str());
        self.runs.with_label_values(&lo).inc();
        self.probe_success
            .with_label_values(&l)
            .set(if r.success { 1.0 } else { 0.0 });
        // Rounded as the results log writes it, so a run's time is the same in both.
        let started = r
            .started_at
            .round(jiff::Unit::Millisecond)
            .unwrap_or(r.started_at)
            .as_millisecond() as f64
            / 1000.0;
        self.last_run.with_label_values(&l).set(started);
        if r.success {
            self.last_success.with_label_values(&l).set(started);
        }
        let secs = |ms: Option<f64>| ms.map(|v| v / 1000.0);
        if let Some(n) = r.output_tokens {
            self.output_tokens.with_label_values(&l).set(n as f64);
        }
        if let Some(s) = r.repetition_score {
            self.repetition_score.with_label_values(&l).set(s);
        }
        if let Some(t) = secs(r.server_ttft_ms) {
            self.server_ttft.with_label_values(&l).set(t);
        }
        if let Some(fp) = &r.fingerprint {
            let identity = [r.reported_model.clone().unwrap_or_default(), fp.clone()];
            let mut info_of = self.info_of.lock().expect("info lock");
            if info_of.get(&values) != Some(&identity) {
                if let Some(old) = info_of.insert(values.clone(), identity.clone()) {
                    let _ = self.target_info.remove_label_values(&with(&l, &old));
                }
                self.target_info
                    .with_label_values(&with(&l, &identity))
                    .set(1.0);
            }
        }
        if r.target_changed {
            self.target_changes.with_label_values(&l).inc();
            self.last_change.with_label_values(&l).set(started);
        }
        if r.output_changed {
            self.output_changes.with_label_values(&l).inc();
        }
        if let Some(tps) = r.figures.tokens_per_second {
            self.tokens_per_second.with_label_values(&l).set(tps);
        }
        if r.warmup {
            if let Some(t) = secs(r.figures.ttft_ms) {
                self.warmup_ttft.with_label_values(&l).set(t);
            }
            return;
        }
        if let Some(t) = secs(r.figures.answer_ttft_ms) {
            self.answer_ttft.with_label_values(&l).observe(t);
        }
        if let Some(t) = secs(r.figures.ttft_ms) {
            self.ttft.with_label_values(&l).observe(t);
            self.last_ttft.with_label_values(&l).set(t);
        }
        // A transport failure has no meaningful end-to-end time (it is a timeout or a reset).
        if !r.outcome.is_transport() {
            if let Some(t) = secs(r.figures.e2e_ms) {
                self.e2e.with_label_values(&l).observe(t);
                self.last_e2e.with_label_values(&l).set(t);
            }
        }
        if let Some(t) = secs(r.figures.tpot_ms) {
            self.tpot.with_label_values(&l).observe(t);
        }
        if let Some(tl) = &r.timeline {
            let h = self.itl.with_label_values(&l);
            for g in tl.gaps() {
                h.observe(g.as_secs_f64());
            }
        }
    }

    /// Creates a pair's counters at zero, so rates and ratios exist before anything happens.
    pub fn init_pair(&self, probe: &str, target: &Target) {
        let v = self.pair_values(probe, target);
        let l: Vec<&str> = v.iter().map(String::as_str).collect();
        for c in [
            &self.skipped,
            &self.aborted,
            &self.target_changes,
            &self.output_changes,
        ] {
            c.with_label_values(&l);
        }
        let mut lo = l.clone();
        lo.push(Outcome::Ok.as_str());
        self.runs.with_label_values(&lo);
    }

    pub fn skipped(&self, probe: &str, target: &Target) {
        let v = self.pair_values(probe, target);
        self.skipped
            .with_label_values(&v.iter().map(String::as_str).collect::<Vec<_>>())
            .inc();
    }

    pub fn aborted(&self, probe: &str, target: &Target) {
        let v = self.pair_values(probe, target);
        self.aborted
            .with_label_values(&v.iter().map(String::as_str).collect::<Vec<_>>())
            .inc();
    }

    /// Drops every series of a pair (a probe or target that left the config): retired series
    /// disappear from /metrics and, with the next PUT, from the Pushgateway.
    pub fn remove_pair(&self, values: &[String]) {
        let l: Vec<&str> = values.iter().map(String::as_str).collect();
        for g in [
            &self.probe_success,
            &self.tokens_per_second,
            &self.last_ttft,
            &self.last_e2e,
            &self.output_tokens,
            &self.repetition_score,
            &self.last_run,
            &self.last_success,
            &self.warmup_ttft,
            &self.server_ttft,
            &self.last_change,
        ] {
            let _ = g.remove_label_values(&l);
        }
        if let Some(old) = self.info_of.lock().expect("info lock").remove(values) {
            let _ = self.target_info.remove_label_values(&with(&l, &old));
        }
        for h in [
            &self.ttft,
            &self.answer_ttft,
            &self.e2e,
            &self.tpot,
            &self.itl,
        ] {
            let _ = h.remove_label_values(&l);
        }
        for c in [
            &self.skipped,
            &self.aborted,
            &self.target_changes,
            &self.output_changes,
        ] {
            let _ = c.remove_label_values(&l);
        }
        for o in Outcome::ALL {
            let mut lo = l.clone();
            lo.push(o.as_str());
            let _ = self.runs.remove_label_values(&lo);
        }
    }

    /// Every collector, to be read one at a time, never the whole registry at once. The
    /// agent's static labels are not in what they collect: see [`Metrics::static_labels`].
    pub fn collectors(&self) -> impl Iterator<Item = &dyn Collector> {
        self.collectors.iter().map(|c| c.as_ref())
    }

    pub fn static_labels(&self) -> &[(String, String)] {
        &self.static_labels
    }

    /// One collector's families in the text format, with the agent's labels added (sorted)
    /// as the registry's gather() would.
    fn encode_collector(&self, c: &dyn Collector, buf: &mut Vec<u8>) {
        self.encode_collector_where(c, buf, |_| true)
    }

    /// The same, keeping only the series `keep` accepts.
    fn encode_collector_where(
        &self,
        c: &dyn Collector,
        buf: &mut Vec<u8>,
        keep: impl Fn(&prometheus::proto::Metric) -> bool,
    ) {
        for mut mf in c.collect() {
            mf.mut_metric().retain(&keep);
            if mf.get_metric().is_empty() {
                continue;
            }
            let mut metrics = mf.take_metric();
            for m in &mut metrics {
                let mut labels = m.take_label();
                for (k, v) in &self.static_labels {
                    let mut l = LabelPair::default();
                    l.set_name(k.clone());
                    l.set_value(v.clone());
                    labels.push(l);
                }
                labels.sort_by(|a, b| a.name().cmp(b.name()));
                m.set_label(labels);
            }
            mf.set_metric(metrics);
            TextEncoder::new()
                .encode(&[mf], buf)
                .expect("encoding into memory cannot fail");
        }
    }

    /// The whole registry in the Prometheus text format, one collector at a time: what the
    /// registry's gather() would copy whole (a thousand pairs make over 100,000 series) is
    /// never in memory at once, only the text.
    pub fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        for c in self.collectors() {
            self.encode_collector(c, &mut buf);
        }
        buf
    }

    /// The same, giving way to other tasks between collectors: on the daemon's one thread, the
    /// text of a large registry would otherwise delay the timestamps of probe runs in flight.
    /// (A blocking thread would not: each one the pool starts keeps its own malloc arena, and
    /// with it the memory of the largest text it wrote.)
    pub async fn encode_yielding(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        for c in self.collectors() {
            self.encode_collector(c, &mut buf);
            tokio::task::yield_now().await;
        }
        buf
    }

    /// One pair's series (those labelled with its probe and target, and its target's own), for
    /// `/probe`: what blackbox_exporter answers for one module and target.
    pub fn encode_pair(&self, probe: &str, target: &str) -> Vec<u8> {
        let mut buf = Vec::new();
        for c in self.collectors() {
            self.encode_collector_where(c, &mut buf, |m| {
                let value = |k: &str| {
                    m.get_label()
                        .iter()
                        .find(|l| l.name() == k)
                        .map(|l| l.value())
                };
                value("target") == Some(target) && value("probe").is_none_or(|p| p == probe)
            });
        }
        buf
    }
}

/// Pair label values with more appended.
fn with<'a>(pair: &[&'a str], more: &'a [String]) -> Vec<&'a str> {
    let mut v = pair.to_vec();
    v.extend(more.iter().map(String::as_str));
    v
}

pub fn now_seconds() -> f64 {
    jiff::Timestamp::now().as_millisecond() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("probes")).unwrap();
        std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
        std::fs::write(
            dir.path().join("llm-canary.yaml"),
            "targets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m, labels: {model_version: \"7\"}}\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("probes/p.yaml"), "name: p\nprompt: q.txt\n").unwrap();
        std::fs::write(dir.path().join("prompts/q.txt"), "hi").unwrap();
        let cfg = crate::config::load(&dir.path().join("llm-canary.yaml")).unwrap();
        (dir, cfg)
    }

    #[test]
    fn a_build_change_shows_in_the_series() {
        let (_dir, cfg) = config();
        let m = Metrics::new(&cfg);
        let target = cfg.targets[0].clone();
        let mut r = ProbeResult::example();
        r.reported_model = Some("m".into());
        r.fingerprint = Some("build-a".into());
        m.record(&r, &target);
        r.fingerprint = Some("build-b".into());
        (r.target_changed, r.output_changed) = (true, true);
        m.record(&r, &target);
        let text = String::from_utf8(m.encode()).unwrap();
        let line = |name: &str| {
            text.lines()
                .filter(|l| l.starts_with(name))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(
            line("llm_canary_target_changes_total").ends_with(" 1"),
            "{text}"
        );
        assert!(
            line("llm_canary_output_changes_total").ends_with(" 1"),
            "{text}"
        );
        // One info series, for what the target reports now.
        let info = line("llm_canary_target_info");
        assert_eq!(info.lines().count(), 1, "{info}");
        assert!(info.contains("fingerprint=\"build-b\""), "{info}");
        assert!(info.contains("model_version=\"7\""), "{info}");
        assert!(
            line("llm_canary_target_last_change_timestamp_seconds").ends_with(" 0"),
            "{text}"
        );
    }
}
