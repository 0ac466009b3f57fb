//! The agent's Prometheus registry: docs/design.md's series per (probe, target), labelled with probe,
//! target, model and the static labels, plus the agent's own health. Metric names live here
//! and nowhere else.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use prometheus::core::Collector;
use prometheus::{
    Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry,
};

pub(crate) use crate::buckets::LATENCY_BUCKETS;
use crate::config::{Config, Probe, Target, TlsHolder};
use crate::outcome::{HttpReason, Outcome};
use crate::result::CachePhase;
use crate::result::ProbeResult;
use crate::sinks::budget::{Change, Period, Spend};
use crate::sinks::pair_series::{PairSeries, Slot};

pub(crate) const PREFIX: &str = "llm_canary_";

/// Per-token gap buckets, in seconds (docs/design.md).
pub(crate) const TOKEN_BUCKETS: [f64; 13] = [
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
    /// The pairs' counters and gauges; `slots` says which is which.
    pair: PairSeries,
    slots: PairSlots,
    ttft: HistogramVec,
    answer_ttft: HistogramVec,
    e2e: HistogramVec,
    tpot: HistogramVec,
    itl: HistogramVec,
    /// Confirmation runs by outcome: few pairs ever have one, so a series is made only when
    /// its first run is counted.
    confirm_runs: IntCounterVec,
    target_info: GaugeVec,
    /// The (reported_model, fingerprint) each pair's `target_info` series carries now.
    info_of: Mutex<HashMap<Vec<String>, [String; 2]>>,
    /// Per target (no probe label): 1 while it is in a maintenance window.
    maintenance: GaugeVec,
    /// Per target: the earliest expiry in the chain its last TLS handshake showed.
    cert_expiry: GaugeVec,
    /// Per run (its pair and rung) and `phase`: the last run's connection setup, step by step.
    connection_phase: GaugeVec,
    /// Per `tls:` block (a target's, or an output's by `sink`): 1 where the server's
    /// certificate goes unverified.
    tls_insecure: IntGaugeVec,
    pub push_failures: IntCounter,
    pub status_store_errors: IntCounter,
    pub last_push_success: Gauge,
    pub last_push_failure: Gauge,
    runs_in_flight: IntGauge,
    pub reload_successful: IntGauge,
    pub reload_success_time: Gauge,
    pub remote_write: RemoteWriteMetrics,
    pub otlp: OtlpMetrics,
    /// 1 while a period's spend is over `agent.budget`.
    budget_exceeded: IntGaugeVec,
    /// The budget and what was spent against it.
    spend: Mutex<(Option<crate::config::Budget>, Spend)>,
}

/// A cache check's warm run: served from the cache on purpose.
fn warm_run(r: &ProbeResult) -> bool {
    r.context.cache_phase() == Some(CachePhase::Warm)
}

/// Where each of a pair's counters and gauges is in [`PairSeries`].
struct PairSlots {
    probe_success: Slot,
    /// By outcome, in the order of `Outcome::ALL`.
    runs: Slot,
    tokens_per_second: Slot,
    last_ttft: Slot,
    last_e2e: Slot,
    output_tokens: Slot,
    repetition_score: Slot,
    last_run: Slot,
    last_success: Slot,
    warmup_ttft: Slot,
    server_ttft: Slot,
    target_changes: Slot,
    last_change: Slot,
    output_changes: Slot,
    skipped: Slot,
    aborted: Slot,
    confirmed_failure: Slot,
    /// By direction: input, then output.
    tokens: Slot,
    cost: Slot,
    /// A cache check's warm run beside its cold run.
    prefix_cache_hit_ratio: Slot,
    prefix_cache_ttft_speedup: Slot,
    prefill: Slot,
    answer_similarity: Slot,
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

/// The OTLP queues' health, by `signal` (`metrics`: data points, `traces`: spans).
pub struct OtlpMetrics {
    pub sent: IntCounterVec,
    /// By `signal` and `reason` (`queue_full`, `rejected`), as remote-write's.
    pub dropped: IntCounterVec,
    pub failures: IntCounterVec,
    pub queued: IntGaugeVec,
}

/// The steps of setting up a connection (the `phase` label), in order.
const CONNECTION_PHASES: [&str; 3] = ["dns", "connect", "tls"];

/// Why remote-write samples were dropped (the `reason` label).
pub(crate) const DROPPED_QUEUE_FULL: &str = "queue_full";
pub(crate) const DROPPED_REJECTED: &str = "rejected";

/// The runs counter's series: one an outcome, and `http_error` once a reason.
fn runs_label_sets() -> Vec<Vec<(&'static str, &'static str)>> {
    let mut sets = Vec::new();
    for o in Outcome::ALL {
        if o == Outcome::HttpError {
            sets.extend(
                HttpReason::ALL.map(|r| vec![("outcome", o.as_str()), ("reason", r.as_str())]),
            );
        } else {
            sets.push(vec![("outcome", o.as_str())]);
        }
    }
    sets
}

/// A run's series among [`runs_label_sets`]. An `http_error` without a reason (none is made
/// so) counts as `server_error`.
fn runs_index(outcome: Outcome, reason: Option<HttpReason>) -> usize {
    let (i, http) = (outcome.index(), Outcome::HttpError.index());
    match outcome {
        Outcome::HttpError => {
            let r = reason.unwrap_or(HttpReason::ServerError);
            http + HttpReason::ALL.iter().position(|x| *x == r).unwrap_or(0)
        }
        _ if i < http => i,
        _ => i + HttpReason::ALL.len() - 1,
    }
}

fn name(n: &str) -> String {
    format!("{PREFIX}{n}")
}

/// The label keys the targets of `cfg` use, sorted: every family carries all of them.
pub(crate) fn target_label_keys(cfg: &Config) -> Vec<String> {
    let keys: BTreeSet<&String> = cfg.targets.iter().flat_map(|t| t.labels.keys()).collect();
    keys.into_iter().cloned().collect()
}

/// A firing counted in `runs_in_flight` until it drops, whether it finished or its future was
/// cancelled.
pub struct InFlightRun(IntGauge);

impl Drop for InFlightRun {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Metrics {
    /// Counts a firing in `runs_in_flight` for as long as the returned value lives.
    pub fn run_started(&self) -> InFlightRun {
        self.runs_in_flight.inc();
        InFlightRun(self.runs_in_flight.clone())
    }

    /// Firings in flight now, as `runs_in_flight` says.
    #[cfg(test)]
    pub fn runs_in_flight(&self) -> i64 {
        self.runs_in_flight.get()
    }

    pub fn new(cfg: &Config) -> Arc<Metrics> {
        let target_keys = target_label_keys(cfg);
        let registry =
            Registry::new_custom(None, Some(cfg.agent.labels.clone().into_iter().collect()))
                .expect("agent labels are validated label names");
        let mut pair: Vec<&str> = vec!["probe", "target", "model"];
        pair.extend(target_keys.iter().map(String::as_str));
        let mut with_identity = pair.clone();
        with_identity.extend(["reported_model", "fingerprint"]);
        let per_target = &pair[1..];
        // A run's series carry its ladder rung; a probe without a ladder's leave it out.
        let mut run: Vec<&str> = pair.clone();
        run.push(RUNG);
        let mut by_outcome = run.clone();
        by_outcome.push("outcome");
        let mut by_phase = run.clone();
        by_phase.push("phase");

        let mut collectors: Vec<Box<dyn Collector>> = Vec::new();
        macro_rules! reg {
            ($m:expr) => {{
                let m = $m.expect("metric definitions are static and valid");
                registry
                    .register(Box::new(m.clone()))
                    .expect("metric names are unique");
                collectors.push(Box::new(Rungless(m.clone())));
                m
            }};
        }
        let hist = |n: &str, help: &str, b: &[f64]| {
            HistogramVec::new(HistogramOpts::new(name(n), help).buckets(b.to_vec()), &run)
        };
        let build = reg!(IntGaugeVec::new(
            Opts::new(name("build_info"), "The agent's version."),
            &["version"]
        ));
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        let mut b = PairSeries::builder(&run);
        let slots = PairSlots {
            probe_success: b.gauge(name("probe_success"), "1 if the last run of this probe on this target was ok, else 0."),
            runs: b.counter_by_sets(name("probe_runs_total"), "Probe runs by outcome, and an http_error's reason.", runs_label_sets()),
            tokens_per_second: b.gauge(name("output_tokens_per_second"), "Decode speed of the last run."),
            last_ttft: b.gauge(name("last_ttft_seconds"), "Time to first token of the last (non-warm-up) run."),
            last_e2e: b.gauge(name("last_e2e_seconds"), "End-to-end time of the last completed (non-warm-up) run."),
            output_tokens: b.gauge(name("output_tokens"), "Output tokens of the last run."),
            repetition_score: b.gauge(name("repetition_score"), "Degeneration score (0..1) of the last run's output."),
            last_run: b.gauge(name("last_run_timestamp_seconds"), "When the last run started (Unix time)."),
            last_success: b.gauge(name("last_success_timestamp_seconds"), "When the last ok run started (Unix time)."),
            warmup_ttft: b.gauge(name("warmup_ttft_seconds"), "Time to first token of the last cold start (first ok run after start or after the target was unreachable)."),
            server_ttft: b.gauge(name("server_ttft_seconds"), "The server's own time to first token for the last run, when its response carries it."),
            target_changes: b.counter(name("target_changes_total"), "Times the target's reported build fingerprint changed."),
            last_change: b.gauge(name("target_last_change_timestamp_seconds"), "When the target's reported build fingerprint last changed (Unix time): what alert texts say 'serving build changed N minutes ago' from."),
            output_changes: b.counter(name("output_changes_total"), "Times a temperature-0 probe's output differed from its previous one."),
            skipped: b.counter(name("skipped_runs_total"), "Scheduled runs skipped because the previous run of the pair was still in flight."),
            aborted: b.counter(name("aborted_runs_total"), "Runs still in flight when the shutdown grace period ended."),
            confirmed_failure: b.gauge(name("confirmed_failure_timestamp_seconds"), "When the first run of the pair's last confirmed failure started (Unix time): that run and its confirmation runs all failed. Older than last_success_timestamp_seconds once the pair succeeded again."),
            tokens: b.counter_by(name("probe_tokens_total"), "Tokens the probe's runs sent (input: the server's count of prompt tokens) and generated (output), as the server counted them (output: else the content chunks).", "direction", ["input", "output"]),
            prefix_cache_hit_ratio: b.gauge(name("prefix_cache_hit_ratio"), "A cache check's last warm run: the share of its prompt tokens the server says it served from its prefix cache (0..1). Absent when the server reports no cached count."),
            prefix_cache_ttft_speedup: b.gauge(name("prefix_cache_ttft_speedup"), "A cache check's last firing: cold TTFT / warm TTFT (the busted run's time to first token over the repeated run's); about 1 when the prefix cache does not help."),
            cost: b.counter(name("probe_cost_total"), "What the probe's runs cost at the target's price: (input tokens x price.input + output tokens x price.output) / 1e6, in the target's price.currency."),
            answer_similarity: b.gauge(name("answer_similarity"), "The last run's answer beside the probe's checks.reference: chrF, 0 (nothing shared) to 1 (the same text). Absent without a reference."),
            prefill: b.gauge(name("prefill_tokens_per_second"), "Prefill speed of a ladder rung's last run, an estimate: the prompt tokens it adds over the smallest rung / the time to first token it adds; in the server's token counts where it reports them, else estimated at 4 characters a token (the record's prefill_tokens_source says which)."),
        };
        let pair = b.build().expect("metric definitions are static and valid");
        for f in pair.families() {
            registry
                .register(Box::new(f.clone()))
                .expect("metric names are unique");
            collectors.push(Box::new(Rungless(f)));
        }
        let m = Metrics {
            pair,
            slots,
            ttft: reg!(hist("ttft_seconds", "Time to first generated token (warm-up runs excluded).", &LATENCY_BUCKETS)),
            answer_ttft: reg!(hist("answer_ttft_seconds", "Time to the first token of the answer, after any reasoning (warm-up runs excluded).", &LATENCY_BUCKETS)),
            e2e: reg!(hist("e2e_seconds", "Request start to end of stream, for completed streams (warm-up runs excluded).", &LATENCY_BUCKETS)),
            tpot: reg!(hist("time_per_output_token_seconds", "Decode time per output token after the first (warm-up runs excluded).", &TOKEN_BUCKETS)),
            itl: reg!(hist("inter_token_latency_seconds", "Gaps between successive content chunks (warm-up runs excluded).", &TOKEN_BUCKETS)),
            confirm_runs: reg!(IntCounterVec::new(Opts::new(name("confirm_runs_total"), "Confirmation runs (a failed pair re-run before its next scheduled run) by outcome; they count in probe_runs_total too."), &by_outcome)),
            target_info: reg!(GaugeVec::new(Opts::new(name("target_info"), "1, labelled with the model name and build fingerprint the target reported last."), &with_identity)),
            info_of: Mutex::new(HashMap::new()),
            maintenance: reg!(GaugeVec::new(Opts::new(name("maintenance"), "1 while the target is in a maintenance window (configured or announced), else 0."), per_target)),
            cert_expiry: reg!(GaugeVec::new(Opts::new(name("tls_earliest_cert_expiry_timestamp_seconds"), "The earliest notAfter (Unix time) among the certificates the target sent in its last run's TLS handshake."), per_target)),
            connection_phase: reg!(GaugeVec::new(Opts::new(name("last_connection_phase_seconds"), "How long each step of setting up the last run's connection took: phase dns, connect (TCP; through a proxy, to the proxy with its tunnel) or tls. A step the last run did not take has no series."), &by_phase)),
            tls_insecure: reg!(IntGaugeVec::new(Opts::new(name("tls_insecure_skip_verify"), "1 where a tls: block skips verifying the server's certificate (insecure_skip_verify), else 0; one series per target (target label) or output (sink label: push, remote_write, otlp) with a tls: block."), &["target", "sink"])),
            push_failures: reg!(IntCounter::new(name("push_failures_total"), "Failed pushes to the Pushgateway.")),
            status_store_errors: reg!(IntCounter::new(name("status_store_errors_total"), "Changes to the status page's history that did not reach the status store: failed writes and sweeps, and changes dropped while the writer was behind.")),
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
            otlp: OtlpMetrics {
                sent: reg!(IntCounterVec::new(Opts::new(name("otlp_items_sent_total"), "Data points (signal=metrics) or spans (signal=traces) the OTLP receiver accepted."), &["signal"])),
                dropped: reg!(IntCounterVec::new(Opts::new(name("otlp_items_dropped_total"), "OTLP items never delivered: queue_full when an outage outlasted the queue, rejected when the receiver refused them."), &["signal", "reason"])),
                failures: reg!(IntCounterVec::new(Opts::new(name("otlp_failures_total"), "Failed OTLP requests (each retry counts)."), &["signal"])),
                queued: reg!(IntGaugeVec::new(Opts::new(name("otlp_queue_items"), "OTLP items waiting in the queue."), &["signal"])),
            },
            budget_exceeded: reg!(IntGaugeVec::new(Opts::new(name("budget_exceeded"), "1 while what probing spent this period (UTC day or month, counted since the agent started) is over agent.budget, else 0."), &["period"])),
            spend: Mutex::new((cfg.agent.budget.clone(), Spend::default())),
            static_labels: cfg.agent.labels.clone().into_iter().collect(),
            collectors,
            target_keys,
        };
        for reason in [DROPPED_QUEUE_FULL, DROPPED_REJECTED] {
            m.remote_write.samples_dropped.with_label_values(&[reason]);
        }
        if let Some(b) = &cfg.agent.budget {
            for (p, limit) in Period::ALL.into_iter().zip([b.daily, b.monthly]) {
                if limit.is_some() {
                    m.budget_exceeded.with_label_values(&[p.as_str()]).set(0);
                }
            }
        }
        m.set_tls(cfg);
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

    /// Sets `llm_canary_tls_insecure_skip_verify` to what `cfg` says, dropping the series of
    /// blocks it no longer has.
    pub fn set_tls(&self, cfg: &Config) {
        self.tls_insecure.reset();
        for (holder, insecure) in cfg.tls_blocks() {
            let labels = match &holder {
                TlsHolder::Target(t) => [t.as_str(), ""],
                TlsHolder::Sink(s) => ["", *s],
            };
            self.tls_insecure
                .with_label_values(&labels)
                .set(i64::from(insecure));
        }
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
        let l: Vec<&str> = v.iter().map(String::as_str).collect();
        let _ = self.maintenance.remove_label_values(&l);
        let _ = self.cert_expiry.remove_label_values(&l);
    }

    /// Takes in one run: the pair's counters and last-run gauges, its changes, its confirmation
    /// count, its cost, its build, and (unless it was a warm-up) its latency histograms.
    pub fn record(&self, r: &ProbeResult, target: &Target) {
        let values = self.pair_values(&r.id.probe, target);
        let run = run_key(&values, r.id.rung.map(|r| r.size));
        let l: Vec<&str> = run.iter().map(String::as_str).collect();
        let (input, output) = (r.measured.reading.input_tokens, r.measured.output_tokens);
        let cost = target
            .price
            .as_ref()
            .map(|price| price.cost(input.unwrap_or(0) as f64, output.unwrap_or(0) as f64));
        self.record_pair(r, &run, cost);
        self.record_changes(r, &values);
        if r.context.confirm {
            self.confirm_runs
                .with_label_values(&with(&l, &[r.judged.outcome.as_str().to_string()]))
                .inc();
        }
        if let Some(c) = cost {
            self.spent(c, r.id.started_at);
        }
        self.record_build(r, &values);
        self.record_connection(r, &l);
        // A cache check's warm run is served from the cache on purpose: its latency is no
        // user's, so it stays out of the latency series (as a warm-up does).
        if !r.context.warmup && !warm_run(r) {
            self.observe_latency(r, &l);
        }
    }

    /// The run's counters and last-run gauges in its pair's series.
    fn record_pair(&self, r: &ProbeResult, run: &[String], cost: Option<f64>) {
        let started = seconds(r.id.started_at);
        let s = &self.slots;
        let (input, output) = (r.measured.reading.input_tokens, r.measured.output_tokens);
        let secs = |ms: Option<f64>| ms.map(|v| v / 1000.0);
        let warm = warm_run(r);
        let cache = r.context.cache_check.map(|c| c.figures).unwrap_or_default();
        self.pair.update(run, |v| {
            v.inc(
                s.runs
                    .nth(runs_index(r.judged.outcome, r.measured.reading.http_reason)),
            );
            v.set(s.probe_success, if r.success() { 1.0 } else { 0.0 });
            v.set(s.last_run, started);
            if r.success() {
                v.set(s.last_success, started);
            }
            // Warm-up runs cost like any other.
            if let Some(n) = input {
                v.add(s.tokens.nth(0), n as f64);
            }
            if let Some(n) = output {
                v.add(s.tokens.nth(1), n as f64);
            }
            if let Some(c) = cost {
                v.add(s.cost, c);
            }
            let ttft = secs(r.measured.figures.ttft_ms);
            // A transport failure has no meaningful end-to-end time (a timeout or a reset).
            let e2e = secs(r.measured.figures.e2e_ms).filter(|_| !r.judged.outcome.is_transport());
            let latency = !r.context.warmup && !warm;
            let figures = [
                (s.output_tokens, r.measured.output_tokens.map(|n| n as f64)),
                (s.repetition_score, r.judged.repetition_score()),
                (s.server_ttft, secs(r.measured.server_ttft_ms)),
                (s.tokens_per_second, r.measured.figures.tokens_per_second),
                (s.warmup_ttft, ttft.filter(|_| r.context.warmup)),
                (s.last_ttft, ttft.filter(|_| latency)),
                (s.last_e2e, e2e.filter(|_| latency)),
                (s.prefix_cache_ttft_speedup, cache.ttft_speedup),
                (s.prefill, r.context.prefill.map(|p| p.tokens_per_second)),
                (s.answer_similarity, r.judged.similarity),
            ];
            match cache.hit_ratio {
                Some(x) => v.set(s.prefix_cache_hit_ratio, x),
                // A server that stopped reporting its cached count leaves no stale ratio.
                None if warm => v.clear(s.prefix_cache_hit_ratio),
                None => {}
            }
            for (slot, x) in figures {
                if let Some(x) = x {
                    v.set(slot, x);
                }
            }
        });
    }

    /// A changed build or output: the pair's, whichever rung saw it.
    fn record_changes(&self, r: &ProbeResult, values: &[String]) {
        let s = &self.slots;
        let started = seconds(r.id.started_at);
        if r.context.target_changed || r.context.output_changed {
            self.pair.update(&run_key(values, None), |v| {
                if r.context.target_changed {
                    v.inc(s.target_changes);
                    v.set(s.last_change, started);
                }
                if r.context.output_changed {
                    v.inc(s.output_changes);
                }
            });
        }
    }

    /// `target_info` follows the build the run names: its old series goes when it changes.
    fn record_build(&self, r: &ProbeResult, values: &[String]) {
        if let Some(fp) = &r.context.fingerprint {
            let identity = [
                r.measured
                    .reading
                    .reported_model
                    .clone()
                    .unwrap_or_default(),
                fp.to_string(),
            ];
            let pair: Vec<&str> = values.iter().map(String::as_str).collect();
            let mut info_of = self.info_of.lock().expect("info lock");
            if info_of.get(values) != Some(&identity) {
                if let Some(old) = info_of.insert(values.to_vec(), identity.clone()) {
                    let _ = self.target_info.remove_label_values(&with(&pair, &old));
                }
                self.target_info
                    .with_label_values(&with(&pair, &identity))
                    .set(1.0);
            }
        }
    }

    /// The run's latency histograms: TTFT, answer TTFT, end to end (not for a transport
    /// failure), time per output token and every inter-token gap.
    /// The run's connection: each setup step it took (a step it did not take loses its last
    /// value), and the target's earliest certificate expiry when it shook hands over TLS.
    fn record_connection(&self, r: &ProbeResult, l: &[&str]) {
        let f = &r.measured.figures;
        for (phase, ms) in CONNECTION_PHASES
            .into_iter()
            .zip([f.dns_ms, f.connect_ms, f.tls_ms])
        {
            let phase = [phase.to_string()];
            let labels = with(l, &phase);
            match ms {
                Some(ms) => self
                    .connection_phase
                    .with_label_values(&labels)
                    .set(ms / 1000.0),
                None => {
                    let _ = self.connection_phase.remove_label_values(&labels);
                }
            }
        }
        if let Some(tls) = &r.measured.reading.tls {
            // The target's own labels: the pair's without its probe and rung.
            let target = &l[1..l.len() - 1];
            self.cert_expiry
                .with_label_values(target)
                .set(tls.earliest_expiry.as_second() as f64);
        }
    }

    fn observe_latency(&self, r: &ProbeResult, l: &[&str]) {
        let secs = |ms: Option<f64>| ms.map(|v| v / 1000.0);
        if let Some(t) = secs(r.measured.figures.answer_ttft_ms) {
            self.answer_ttft.with_label_values(l).observe(t);
        }
        if let Some(t) = secs(r.measured.figures.ttft_ms) {
            self.ttft.with_label_values(l).observe(t);
        }
        if !r.judged.outcome.is_transport() {
            if let Some(t) = secs(r.measured.figures.e2e_ms) {
                self.e2e.with_label_values(l).observe(t);
            }
        }
        if let Some(t) = secs(r.measured.figures.tpot_ms) {
            self.tpot.with_label_values(l).observe(t);
        }
        let h = self.itl.with_label_values(l);
        for g in r.measured.reading.timeline.gaps() {
            h.observe(g.as_secs_f64());
        }
    }

    /// Counts `cost` against the budget: the gauge and a warning when a period goes over.
    fn spent(&self, cost: f64, at: jiff::Timestamp) {
        let mut guard = self.spend.lock().expect("spend lock");
        let (budget, spend) = &mut *guard;
        let Some(budget) = budget.as_ref() else {
            return;
        };
        for change in spend.add(cost, at, budget) {
            match change {
                Change::Exceeded {
                    period,
                    spent,
                    budget: limit,
                } => {
                    self.budget_exceeded
                        .with_label_values(&[period.as_str()])
                        .set(1);
                    tracing::warn!(
                        period = period.as_str(),
                        spent = format!("{spent:.2} {}", budget.currency),
                        budget = format!("{limit:.2} {}", budget.currency),
                        "probing cost is over its budget"
                    );
                }
                Change::Reset(period) => {
                    self.budget_exceeded
                        .with_label_values(&[period.as_str()])
                        .set(0);
                }
            }
        }
    }

    /// A reloaded config's budget; what was spent so far still counts.
    pub fn set_budget(&self, budget: Option<crate::config::Budget>) {
        self.spend.lock().expect("spend lock").0 = budget;
    }

    /// Creates a pair's counters at zero, so rates and ratios exist before anything happens:
    /// its runs' for each rung of its ladder.
    pub fn init_pair(&self, probe: &Probe, target: &Target) {
        let s = &self.slots;
        let values = self.pair_values(&probe.name, target);
        self.pair.update(&run_key(&values, None), |v| {
            for slot in [s.skipped, s.aborted, s.target_changes, s.output_changes] {
                v.init(slot);
            }
        });
        let rungs: Vec<Option<u32>> = match &probe.ladder {
            Some(l) => l.sizes.iter().copied().map(Some).collect(),
            None => vec![None],
        };
        for rung in rungs {
            self.pair.update(&run_key(&values, rung), |v| {
                for slot in [
                    s.runs.nth(Outcome::Ok.index()),
                    s.tokens.nth(0),
                    s.tokens.nth(1),
                ] {
                    v.init(slot);
                }
                if target.price.is_some() {
                    v.init(s.cost);
                }
            });
        }
    }

    pub fn skipped(&self, probe: &str, target: &Target) {
        self.inc(probe, target, self.slots.skipped);
    }

    pub fn aborted(&self, probe: &str, target: &Target) {
        self.inc(probe, target, self.slots.aborted);
    }

    /// Sets `llm_canary_confirmed_failure_timestamp_seconds` of a pair: its failure that began
    /// at `since` is confirmed.
    pub fn confirmed_failure(&self, probe: &str, target: &Target, since: jiff::Timestamp) {
        let s = self.slots.confirmed_failure;
        let key = run_key(&self.pair_values(probe, target), None);
        self.pair.update(&key, |v| v.set(s, seconds(since)));
    }

    fn inc(&self, probe: &str, target: &Target, slot: Slot) {
        let key = run_key(&self.pair_values(probe, target), None);
        self.pair.update(&key, |v| v.inc(slot));
    }

    /// Drops every series of a pair (a probe or target that left the config): retired series
    /// disappear from /metrics and, with the next PUT, from the Pushgateway.
    pub fn remove_pair(&self, values: &[String]) {
        let l: Vec<&str> = values.iter().map(String::as_str).collect();
        if let Some(old) = self.info_of.lock().expect("info lock").remove(values) {
            let _ = self.target_info.remove_label_values(&with(&l, &old));
        }
        // Each of its rungs' series, and the pair's own.
        for run in self.pair.remove_under(values) {
            let l: Vec<&str> = run.iter().map(String::as_str).collect();
            for outcome in Outcome::ALL {
                let _ = self
                    .confirm_runs
                    .remove_label_values(&with(&l, &[outcome.as_str().to_string()]));
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
            for phase in CONNECTION_PHASES {
                let phase = [phase.to_string()];
                let _ = self.connection_phase.remove_label_values(&with(&l, &phase));
            }
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
}

/// Pair label values with more appended.
fn with<'a>(pair: &[&'a str], more: &'a [String]) -> Vec<&'a str> {
    let mut v = pair.to_vec();
    v.extend(more.iter().map(String::as_str));
    v
}

/// A run's start in Unix seconds, rounded as the results log writes it, so a run's time is the
/// same in both.
fn seconds(t: jiff::Timestamp) -> f64 {
    t.round(jiff::Unit::Millisecond)
        .unwrap_or(t)
        .as_millisecond() as f64
        / 1000.0
}

pub(crate) fn now_seconds() -> f64 {
    jiff::Timestamp::now().as_millisecond() as f64 / 1000.0
}

mod encode;

mod rung;
use rung::{run_key, Rungless, RUNG};

#[cfg(test)]
mod tests;
