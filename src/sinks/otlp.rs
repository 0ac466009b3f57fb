//! OpenTelemetry metrics over OTLP/HTTP: each run adds to a few histograms and a counter named
//! by the GenAI semantic conventions (`gen_ai.client.*`) or, for figures the conventions have
//! no name for, under `llm_canary.*`; an export turns them into one
//! `ExportMetricsServiceRequest` of the official protobuf definitions, cumulative or delta.
//! The attributes every run carries, and the resource, are built here too; spans reuse them.

use std::collections::HashMap;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Histogram, HistogramDataPoint, Metric,
    NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use crate::config::{Api, Config, Target, Temporality};
use crate::outcome::Outcome;
use crate::result::ProbeResult;
use crate::timeline::TokensSource;

/// The conventions' boundaries for every GenAI duration, in seconds.
pub(crate) const GEN_AI_SECONDS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/// The conventions' boundaries for token counts.
pub(crate) const GEN_AI_TOKENS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];
/// Ours, for decode speed: from a stalled CPU replica to a speculative-decoding GPU one.
pub(crate) const TOKENS_PER_SECOND: [f64; 16] = [
    1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 75.0, 100.0, 150.0, 200.0, 300.0, 500.0,
    1000.0,
];

/// What the agent measures, under its OpenTelemetry name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Instrument {
    /// Request start to the end of the stream, or to the failure.
    Duration,
    TimeToFirstChunk,
    /// Every gap between two successive content chunks.
    TimePerOutputChunk,
    /// Output tokens, when the server counted them (the conventions forbid estimates).
    TokenUsage,
    /// Decode speed after the first token.
    TokensPerSecond,
    /// Runs by outcome (a stall is `llm_canary.outcome=stall`).
    Runs,
}

impl Instrument {
    pub(crate) const ALL: [Instrument; 6] = [
        Instrument::Duration,
        Instrument::TimeToFirstChunk,
        Instrument::TimePerOutputChunk,
        Instrument::TokenUsage,
        Instrument::TokensPerSecond,
        Instrument::Runs,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Instrument::Duration => "gen_ai.client.operation.duration",
            Instrument::TimeToFirstChunk => "gen_ai.client.operation.time_to_first_chunk",
            Instrument::TimePerOutputChunk => "gen_ai.client.operation.time_per_output_chunk",
            Instrument::TokenUsage => "gen_ai.client.token.usage",
            Instrument::TokensPerSecond => "llm_canary.output.tokens_per_second",
            Instrument::Runs => "llm_canary.probe.runs",
        }
    }

    pub(crate) fn unit(self) -> &'static str {
        match self {
            Instrument::Duration
            | Instrument::TimeToFirstChunk
            | Instrument::TimePerOutputChunk => "s",
            Instrument::TokenUsage => "{token}",
            Instrument::TokensPerSecond => "{token}/s",
            Instrument::Runs => "{run}",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Instrument::Duration => "GenAI operation duration.",
            Instrument::TimeToFirstChunk => {
                "Time to receive the first chunk, from the request's start."
            }
            Instrument::TimePerOutputChunk => "Time between two successive output chunks.",
            Instrument::TokenUsage => "Number of output tokens used, as the server counted them.",
            Instrument::TokensPerSecond => {
                "Decode speed: output tokens per second after the first."
            }
            Instrument::Runs => "Probe runs, by outcome.",
        }
    }

    /// Histogram boundaries; `None` for the counter.
    pub(crate) fn bounds(self) -> Option<&'static [f64]> {
        match self {
            Instrument::Duration
            | Instrument::TimeToFirstChunk
            | Instrument::TimePerOutputChunk => Some(&GEN_AI_SECONDS),
            Instrument::TokenUsage => Some(&GEN_AI_TOKENS),
            Instrument::TokensPerSecond => Some(&TOKENS_PER_SECOND),
            Instrument::Runs => None,
        }
    }
}

/// An attribute value as the agent uses them: text, or a number (a port, a rung).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
}

pub(crate) type Attrs = Vec<(String, Value)>;

pub(crate) fn key_values(attrs: &[(String, Value)]) -> Vec<KeyValue> {
    attrs
        .iter()
        .map(|(k, v)| KeyValue {
            key: k.clone(),
            value: Some(AnyValue {
                value: Some(match v {
                    Value::Str(s) => any_value::Value::StringValue(s.clone()),
                    Value::Int(i) => any_value::Value::IntValue(*i),
                }),
            }),
            ..Default::default()
        })
        .collect()
}

/// `gen_ai.operation.name`.
pub(crate) fn operation(api: Api) -> &'static str {
    api.flavor().otel_operation()
}

/// `gen_ai.provider.name`, as the API's flavor names its provider.
pub(crate) fn provider(api: Api) -> &'static str {
    api.flavor().otel_provider()
}

/// What every metric point and span of a run carries: the GenAI attributes, `server.*`,
/// `error.type` on failure, the probe and target, a ladder's rung, and the target's labels.
pub(crate) fn run_attributes(r: &ProbeResult, target: &Target) -> Attrs {
    let s = |v: &str| Value::Str(v.to_string());
    let mut a: Attrs = vec![
        ("gen_ai.operation.name".into(), s(operation(target.api))),
        ("gen_ai.provider.name".into(), s(provider(target.api))),
        ("gen_ai.request.model".into(), s(&target.model)),
    ];
    if let Some(m) = &r.measured.reading.reported_model {
        a.push(("gen_ai.response.model".into(), s(m)));
    }
    let u = &target.base_url;
    if let Some(host) = u.host_str() {
        a.push(("server.address".into(), s(host)));
        if let Some(port) = u.port_or_known_default() {
            a.push(("server.port".into(), Value::Int(i64::from(port))));
        }
    }
    if r.judged.outcome != Outcome::Ok {
        a.push(("error.type".into(), s(r.judged.outcome.as_str())));
    }
    a.push(("llm_canary.probe".into(), s(&r.id.probe)));
    a.push(("llm_canary.target".into(), s(&r.id.target)));
    if let Some(rung) = r.id.rung.map(|r| r.size) {
        a.push(("llm_canary.rung".into(), Value::Int(i64::from(rung))));
    }
    for (k, v) in &target.labels {
        a.push((k.clone(), s(v)));
    }
    a
}

/// `service.name`, the agent's name as `service.instance.id`, the version, and the agent's
/// static labels.
pub(crate) fn resource(cfg: &Config) -> Resource {
    let mut attrs: Attrs = vec![
        ("service.name".into(), Value::Str("llm-canary".into())),
        (
            "service.instance.id".into(),
            Value::Str(cfg.agent.name.clone()),
        ),
        (
            "service.version".into(),
            Value::Str(env!("CARGO_PKG_VERSION").into()),
        ),
    ];
    for (k, v) in &cfg.agent.labels {
        attrs.push((k.clone(), Value::Str(v.clone())));
    }
    Resource {
        attributes: key_values(&attrs),
        ..Default::default()
    }
}

pub(crate) fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "llm-canary".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    }
}

#[derive(Debug, Clone)]
struct Hist {
    counts: Vec<u64>,
    sum: f64,
    min: f64,
    max: f64,
}

#[derive(Debug, Clone)]
enum State {
    Hist(Hist),
    Count(u64),
}

/// Seconds from milliseconds.
fn s(ms: f64) -> f64 {
    ms / 1000.0
}

/// The run's own duration: to the end of the stream, else to where it failed.
pub(crate) fn elapsed_ms(r: &ProbeResult) -> Option<f64> {
    r.measured.figures.e2e_ms.or_else(|| {
        let t = &r.measured.reading.timeline;
        let end = t.end.or(t.last_content()).or(t.headers)?;
        Some(crate::timeline::ms(end - t.start))
    })
}

/// The histograms and the counter, per instrument and attribute set, since `start_ns`.
#[derive(Debug)]
pub(crate) struct Aggregator {
    series: HashMap<(Instrument, Attrs), State>,
    start_ns: u64,
}

impl Aggregator {
    pub(crate) fn new(start_ns: u64) -> Aggregator {
        Aggregator {
            series: HashMap::new(),
            start_ns,
        }
    }

    fn observe(&mut self, i: Instrument, attrs: &Attrs, v: f64) {
        let Some(bounds) = i.bounds() else {
            return;
        };
        let state = self.series.entry((i, attrs.clone())).or_insert_with(|| {
            State::Hist(Hist {
                counts: vec![0; bounds.len() + 1],
                sum: 0.0,
                min: f64::INFINITY,
                max: f64::NEG_INFINITY,
            })
        });
        if let State::Hist(h) = state {
            // A bucket holds values up to and including its upper bound.
            let at = bounds.partition_point(|b| *b < v);
            h.counts[at] += 1;
            h.sum += v;
            h.min = h.min.min(v);
            h.max = h.max.max(v);
        }
    }

    /// Adds one run: to the runs counter always, to the histograms unless it was a warm-up.
    pub(crate) fn record(&mut self, r: &ProbeResult, target: &Target) {
        let attrs = run_attributes(r, target);
        let mut runs = attrs.clone();
        runs.push((
            "llm_canary.outcome".into(),
            Value::Str(r.judged.outcome.as_str().into()),
        ));
        if let State::Count(n) = self
            .series
            .entry((Instrument::Runs, runs))
            .or_insert(State::Count(0))
        {
            *n += 1;
        }
        // A cold start's figures would skew the histograms, as on the Prometheus side, and so
        // would a cache check's warm run, served from the cache on purpose; the run still counts.
        if r.context.warmup || r.context.cache_phase() == Some(crate::result::CachePhase::Warm) {
            return;
        }
        if let Some(ms) = elapsed_ms(r) {
            self.observe(Instrument::Duration, &attrs, s(ms));
        }
        if let Some(ms) = r.measured.figures.ttft_ms {
            self.observe(Instrument::TimeToFirstChunk, &attrs, s(ms));
        }
        for gap in r.measured.reading.timeline.gaps() {
            self.observe(Instrument::TimePerOutputChunk, &attrs, gap.as_secs_f64());
        }
        if let (Some(n), Some(TokensSource::Usage)) =
            (r.measured.output_tokens, r.measured.tokens_source)
        {
            let mut tokens = attrs.clone();
            tokens.push(("gen_ai.token.type".into(), Value::Str("output".into())));
            self.observe(Instrument::TokenUsage, &tokens, n as f64);
        }
        if let Some(tps) = r.measured.figures.tokens_per_second {
            self.observe(Instrument::TokensPerSecond, &attrs, tps);
        }
    }

    /// The points as of `now_ns`, and how many there are; `None` when there is nothing to
    /// say. Delta starts afresh after each export; cumulative keeps counting from the start.
    pub(crate) fn export(
        &mut self,
        resource: Resource,
        now_ns: u64,
        temporality: Temporality,
    ) -> Option<(ExportMetricsServiceRequest, usize)> {
        if self.series.is_empty() {
            return None;
        }
        let window = Window {
            start_ns: self.start_ns,
            now_ns,
            temporality: match temporality {
                Temporality::Cumulative => AggregationTemporality::Cumulative as i32,
                Temporality::Delta => AggregationTemporality::Delta as i32,
            },
        };
        let series = self.take(now_ns, temporality);
        let mut by_instrument: Vec<((Instrument, Attrs), State)> = series.into_iter().collect();
        by_instrument.sort_by(|a, b| a.0.cmp(&b.0));
        let points = by_instrument.len();
        let metrics = Instrument::ALL
            .into_iter()
            .filter_map(|i| instrument_metric(i, &by_instrument, window))
            .collect();
        Some((request(resource, metrics), points))
    }

    /// The series to export: cumulative, a copy; delta, taken, and the next delta starts at
    /// `now_ns`.
    fn take(
        &mut self,
        now_ns: u64,
        temporality: Temporality,
    ) -> HashMap<(Instrument, Attrs), State> {
        match temporality {
            Temporality::Cumulative => self.series.clone(),
            Temporality::Delta => {
                self.start_ns = now_ns;
                std::mem::take(&mut self.series)
            }
        }
    }
}

/// What an export's points span, and how they add up (`AggregationTemporality`).
#[derive(Debug, Clone, Copy)]
struct Window {
    start_ns: u64,
    now_ns: u64,
    temporality: i32,
}

/// One instrument's metric from the series (sorted by instrument), `None` without points.
fn instrument_metric(
    i: Instrument,
    series: &[((Instrument, Attrs), State)],
    window: Window,
) -> Option<Metric> {
    let mine = series
        .iter()
        .filter(|((j, _), _)| *j == i)
        .map(|((_, attrs), st)| (attrs, st));
    let data = match i.bounds() {
        Some(bounds) => histogram(mine, bounds, window),
        None => sum(mine, window),
    };
    let empty = match &data {
        metric::Data::Histogram(h) => h.data_points.is_empty(),
        metric::Data::Sum(s) => s.data_points.is_empty(),
        _ => true,
    };
    (!empty).then(|| Metric {
        name: i.name().into(),
        description: i.description().into(),
        unit: i.unit().into(),
        data: Some(data),
        ..Default::default()
    })
}

/// A histogram instrument's points.
fn histogram<'a>(
    series: impl Iterator<Item = (&'a Attrs, &'a State)>,
    bounds: &[f64],
    window: Window,
) -> metric::Data {
    metric::Data::Histogram(Histogram {
        data_points: series
            .filter_map(|(attrs, st)| match st {
                State::Hist(h) => Some(HistogramDataPoint {
                    attributes: key_values(attrs),
                    start_time_unix_nano: window.start_ns,
                    time_unix_nano: window.now_ns,
                    count: h.counts.iter().sum(),
                    sum: Some(h.sum),
                    bucket_counts: h.counts.clone(),
                    explicit_bounds: bounds.to_vec(),
                    min: Some(h.min),
                    max: Some(h.max),
                    ..Default::default()
                }),
                State::Count(_) => None,
            })
            .collect(),
        aggregation_temporality: window.temporality,
    })
}

/// A counter's points: a monotonic sum.
fn sum<'a>(series: impl Iterator<Item = (&'a Attrs, &'a State)>, window: Window) -> metric::Data {
    metric::Data::Sum(Sum {
        data_points: series
            .filter_map(|(attrs, st)| match st {
                State::Count(n) => Some(NumberDataPoint {
                    attributes: key_values(attrs),
                    start_time_unix_nano: window.start_ns,
                    time_unix_nano: window.now_ns,
                    value: Some(number_data_point::Value::AsInt(*n as i64)),
                    ..Default::default()
                }),
                State::Hist(_) => None,
            })
            .collect(),
        aggregation_temporality: window.temporality,
        is_monotonic: true,
    })
}

/// The request that carries the metrics, under the resource and our scope.
fn request(resource: Resource, metrics: Vec<Metric>) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(scope()),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerKind;
    use std::collections::BTreeMap;

    fn target() -> Target {
        Target {
            name: "t".into(),
            base_url: "http://llm.svc:8000/v1".parse().expect("a URL"),
            api: Api::default(),
            server: ServerKind::Vllm,
            model: "m".into(),
            labels: BTreeMap::from([("env".to_string(), "prod".to_string())]),
            api_key: None,
            headers: Default::default(),
            price: None,
            slo: None,
            priority: None,
            aws: None,
            api_version: None,
            entra: None,
            outbound: Default::default(),
        }
    }

    fn run(e2e_ms: f64, outcome: Outcome) -> ProbeResult {
        let mut r = ProbeResult::example();
        r.measured.figures.e2e_ms = Some(e2e_ms);
        r.judged.outcome = outcome;
        r
    }

    fn histogram(req: &ExportMetricsServiceRequest, name: &str) -> Vec<HistogramDataPoint> {
        let m = &req.resource_metrics[0].scope_metrics[0].metrics;
        match &m.iter().find(|m| m.name == name).unwrap().data {
            Some(metric::Data::Histogram(h)) => h.data_points.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_value_on_a_bound_falls_in_that_bucket_and_failures_carry_error_type() {
        let mut a = Aggregator::new(1);
        let t = target();
        // 40 ms is a bound: it belongs to the (20 ms, 40 ms] bucket, index 2.
        a.record(&run(40.0, Outcome::Ok), &t);
        a.record(&run(40.1, Outcome::Ok), &t);
        a.record(&run(100_000.0, Outcome::Stall), &t);
        let (req, points) = a
            .export(Resource::default(), 5, Temporality::Cumulative)
            .unwrap();
        // Two attribute sets (ok, stall) for the duration and the runs counter.
        assert_eq!(points, 4);
        let mut d = histogram(&req, "gen_ai.client.operation.duration");
        d.sort_by_key(|p| p.count);
        let (stall, ok) = (&d[0], &d[1]);
        assert_eq!(ok.bucket_counts[2..4], [1, 1]);
        assert_eq!(
            (ok.count, ok.min, ok.max),
            (2, Some(0.04), Some(40.1 / 1000.0))
        );
        assert_eq!(*stall.bucket_counts.last().unwrap(), 1, "above every bound");
        assert!(stall
            .attributes
            .iter()
            .any(|kv| kv.key == "error.type" && format!("{:?}", kv.value).contains("stall")));
        assert!(!ok.attributes.iter().any(|kv| kv.key == "error.type"));
        assert_eq!((ok.start_time_unix_nano, ok.time_unix_nano), (1, 5));
        // A ladder's rungs are apart; a run without one carries none.
        assert!(!ok.attributes.iter().any(|kv| kv.key == "llm_canary.rung"));
        let mut rung = run(40.0, Outcome::Ok);
        rung.id.rung = Some(crate::result::Rung {
            size: 2048,
            prompt_tokens_estimate: 2000,
        });
        let attrs = run_attributes(&rung, &t);
        assert!(attrs.contains(&("llm_canary.rung".into(), Value::Int(2048))));
    }

    #[test]
    fn delta_starts_afresh_and_cumulative_keeps_counting() {
        let t = target();
        for (temporality, second_count, second_start) in
            [(Temporality::Cumulative, 2, 1), (Temporality::Delta, 1, 5)]
        {
            let mut a = Aggregator::new(1);
            a.record(&run(10.0, Outcome::Ok), &t);
            a.export(Resource::default(), 5, temporality).unwrap();
            a.record(&run(10.0, Outcome::Ok), &t);
            let (req, _) = a.export(Resource::default(), 9, temporality).unwrap();
            let p = &histogram(&req, "gen_ai.client.operation.duration")[0];
            assert_eq!(
                (p.count, p.start_time_unix_nano),
                (second_count, second_start)
            );
            if temporality == Temporality::Delta {
                assert!(a.export(Resource::default(), 12, temporality).is_none());
            }
        }
    }
}
