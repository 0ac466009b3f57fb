//! The fleet as the page shows it: the PromQL each figure comes from, and the fold of the
//! answers into targets, each with one row per location and the N-of-M state the shipped
//! alerts use (deploy/prometheus/llm-canary.rules.yml, `LLMCanaryTargetFailingFromLocations`).
//!
//! A location is the agents' `region` label (`agent.labels.region`); series without one are no
//! location, as in the alerts. The current state reads the raw series over 3 minutes (the
//! alerts' own expression, cheap); uptime over 24 h, 7 d and 90 d reads the recording rules of
//! deploy/prometheus/status-page.rules.yml, one sample a minute per (target, location) instead
//! of every run's counters.
//!
//! A location whose agents stopped writing is silent (`silence`): it keeps the state it had
//! over its last 3 minutes of runs, read as the store stood at its last report, so a target
//! never looks better because a failing location went quiet.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Serialize;

use super::query::{Client, QueryError, Sample, Series};
use super::silence::{self, AgentKey, LOCATION};
use crate::sinks::state::State;

/// The store could not be read: why, in one sentence, and since when (the first of the failed
/// readings in a row). `/api/v1/fleet` answers it as JSON.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub(crate) struct Outage {
    pub error: String,
    pub unavailable_since: jiff::Timestamp,
}

/// Under this success ratio over 3 minutes a location fails the target: the alerts' threshold.
pub(crate) const FAILING_BELOW: f64 = 0.5;
/// From this many failing locations a target is down (fewer: degraded): the alerts' N.
pub(crate) const DOWN_FROM: usize = 2;

/// Each location's success ratio over the last 3 minutes (the recorded
/// `llm_canary:target_location_success:ratio_rate3m`, evaluated here from the raw counters).
const SUCCESS_3M: &str = r#"(sum by (target, region) (rate(llm_canary_probe_runs_total{outcome="ok",region!=""}[3m])) or sum by (target, region) (rate(llm_canary_probe_runs_total{region!=""}[3m])) * 0) / (sum by (target, region) (rate(llm_canary_probe_runs_total{region!=""}[3m])) > 0)"#;
/// Over a day, not the store's 5-minute lookback: a location whose agent stopped writing stays
/// on the page (pending, with its last run) instead of vanishing from it.
/// By `instance` too: which agents write a (target, location) decides when it is silent.
const LAST_RUN: &str = r#"max by (target, region, model, instance) (max_over_time(llm_canary_last_run_timestamp_seconds{region!=""}[1d]))"#;
const LAST_SUCCESS: &str = r#"max by (target, region) (max_over_time(llm_canary_last_success_timestamp_seconds{region!=""}[1d]))"#;
const TTFT_P95_1H: &str = r#"histogram_quantile(0.95, sum by (target, region, le) (rate(llm_canary_ttft_seconds_bucket{region!=""}[1h])))"#;
const MAINTENANCE: &str = r#"max by (target) (llm_canary_maintenance) == 1"#;
const FAILURES_24H: &str = r#"sum by (target, region, probe, outcome) (increase(llm_canary_probe_runs_total{outcome!="ok",region!=""}[24h])) > 0"#;

/// The uptime windows the page shows, with the range each reads the recorded series over.
pub(crate) const WINDOWS: [(&str, &str); 3] = [("24h", "24h"), ("7d", "7d"), ("90d", "90d")];

/// Uptime over `range`: failed runs over runs, both from the recorded 5-minute increases.
/// Every evaluation counts the runs of its 5 minutes, so each run is counted as many times as
/// the rule is evaluated in 5 minutes: the same factor above and below the bar.
fn uptime_query(range: &str) -> String {
    format!(
        "1 - sum by (target, region) (sum_over_time(llm_canary:target_location_failures:increase5m[{range}])) \
         / (sum by (target, region) (sum_over_time(llm_canary:target_location_runs:increase5m[{range}])) > 0)"
    )
}

/// One location's view of one target.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Location {
    pub location: String,
    pub state: State,
    /// Runs that succeeded over the last 3 minutes, 0..1; none without runs in them.
    pub success_ratio_3m: Option<f64>,
    pub uptime_24h: Option<f64>,
    pub uptime_7d: Option<f64>,
    pub uptime_90d: Option<f64>,
    /// TTFT p95 over the last hour, from the histogram's buckets (an estimate within a bucket).
    pub ttft_p95_seconds: Option<f64>,
    pub last_run: Option<Timestamp>,
    pub last_success: Option<Timestamp>,
    /// Its agents stopped writing: `state` and `success_ratio_3m` are then as they were over
    /// the 3 minutes before `silent_since`. A flag beside the time, so a reader tests one field.
    pub silent: bool,
    /// The last report of its agents, when they are silent.
    pub silent_since: Option<Timestamp>,
}

/// Failed runs of one (location, probe, outcome) over the last 24 hours.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Failures {
    pub location: String,
    pub probe: String,
    pub outcome: String,
    /// The store's `increase` over 24 h: Prometheus extrapolates it, so it may not be whole.
    pub runs_24h: f64,
}

/// One target as seen from every location.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Target {
    pub target: String,
    pub model: String,
    pub state: State,
    /// Silent locations count here as they last were.
    pub locations_failing: usize,
    pub locations_silent: usize,
    pub locations: Vec<Location>,
    pub failures: Vec<Failures>,
}

/// What the page shows.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Fleet {
    pub generated_at: Timestamp,
    pub source: String,
    pub targets: Vec<Target>,
}

/// A location's state from its success ratio over 3 minutes.
pub(crate) fn location_state(ratio: Option<f64>, in_maintenance: bool) -> State {
    match ratio {
        _ if in_maintenance => State::Maintenance,
        None => State::Pending,
        Some(r) if r < FAILING_BELOW => State::Down,
        Some(r) if r >= 1.0 => State::Up,
        Some(_) => State::Degraded,
    }
}

/// A target's state from its locations' states, the N-of-M rule of the shipped alerts: down
/// when at least [`DOWN_FROM`] locations fail it (or its only location does), degraded when one
/// of several does or some location sees some runs fail, up when every location sees all succeed.
pub(crate) fn target_state(locations: &[State], in_maintenance: bool) -> State {
    let judged: Vec<State> = locations
        .iter()
        .copied()
        .filter(|s| *s != State::Pending)
        .collect();
    let failing = judged.iter().filter(|s| **s == State::Down).count();
    if in_maintenance {
        State::Maintenance
    } else if judged.is_empty() {
        State::Pending
    } else if failing >= DOWN_FROM || failing == judged.len() {
        State::Down
    } else if judged.iter().all(|s| *s == State::Up) {
        State::Up
    } else {
        State::Degraded
    }
}

/// The rules the page lists under "How states are decided".
pub(crate) const RULES: [(&str, &str); 6] = [
    ("up", "every location's runs of the target succeeded over the last 3 minutes"),
    ("degraded", "one location fails the target (under 50% of its runs ok over 3 minutes) while others reach it, or some location sees some runs fail"),
    ("down", "two or more locations fail the target, or its only location does: the rule of the LLMCanaryTargetFailingFromLocations alert"),
    ("maintenance", "the target is in a maintenance window (llm_canary_maintenance is 1)"),
    ("pending", "a location that ran the target within the day made no run of it in the last 3 minutes while its agent still writes (a probe that runs less often); a target is pending when every location is"),
    ("silent", "the location's agent wrote no sample for two of its cadences (the usual gap between its samples), and at least 5 s; with fewer than two samples in 10 minutes, none in them. It keeps the state of its last 3 minutes of runs and counts for the target as it last was"),
];

/// Reads every figure from the store at once and folds them into the fleet.
pub(crate) async fn read(client: &Client, now: Timestamp) -> Result<Fleet, QueryError> {
    let uptime: Vec<String> = WINDOWS
        .iter()
        .map(|(_, range)| uptime_query(range))
        .collect();
    let (success, last_run, last_success, ttft, maintenance, failures, up, recent, heard) = tokio::try_join!(
        client.vector(SUCCESS_3M),
        client.vector(LAST_RUN),
        client.vector(LAST_SUCCESS),
        client.vector(TTFT_P95_1H),
        client.vector(MAINTENANCE),
        client.vector(FAILURES_24H),
        futures_util::future::try_join_all(uptime.iter().map(|q| client.vector(q))),
        client.series(silence::RECENT),
        client.vector(silence::LAST_HEARD),
    )?;
    let mut a = Answers {
        success,
        last_run,
        last_success,
        ttft,
        maintenance,
        failures,
        uptime: up,
        recent,
        heard,
        success_then: Vec::new(),
    };
    // The state of each silent location as it stood at its agents' last report: one query per
    // (location, last report), however many targets it ran.
    let silent = silent_rows(&a, seconds(now));
    let moments: std::collections::BTreeSet<(&str, u64)> = silent
        .iter()
        .map(|((_, location), at)| (location.as_str(), at.to_bits()))
        .collect();
    a.success_then = futures_util::future::try_join_all(moments.into_iter().map(|(l, at)| {
        let query = SUCCESS_3M.replace(
            &format!("{LOCATION}!=\"\""),
            &format!("{LOCATION}=\"{}\"", promql_string(l)),
        );
        async move { client.vector_at(&query, f64::from_bits(at)).await }
    }))
    .await?
    .into_iter()
    .flatten()
    .collect();
    Ok(fold(a, client.base(), now))
}

/// Unix seconds.
fn seconds(t: Timestamp) -> f64 {
    t.as_millisecond() as f64 / 1000.0
}

/// `s` inside a PromQL double-quoted string.
fn promql_string(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Every (target, location) whose agents are all silent at `now`, with their last report.
fn silent_rows(a: &Answers, now: f64) -> BTreeMap<Key, f64> {
    let agents = silence::agents(&a.recent, &a.heard);
    let mut writers: BTreeMap<Key, Vec<AgentKey>> = BTreeMap::new();
    for s in &a.last_run {
        writers
            .entry((s.label("target").to_string(), s.label(LOCATION).to_string()))
            .or_default()
            .push((
                s.label("instance").to_string(),
                s.label(LOCATION).to_string(),
            ));
    }
    writers
        .into_iter()
        .filter_map(|(k, w)| Some((k, silence::since(&w, &agents, now)?)))
        .collect()
}

/// The store's answers, one vector a query.
pub(crate) struct Answers {
    pub success: Vec<Sample>,
    pub last_run: Vec<Sample>,
    pub last_success: Vec<Sample>,
    pub ttft: Vec<Sample>,
    pub maintenance: Vec<Sample>,
    pub failures: Vec<Sample>,
    /// One vector per [`WINDOWS`] entry.
    pub uptime: Vec<Vec<Sample>>,
    /// The agents' samples of [`silence::RECENT`] and their last reports.
    pub recent: Vec<Series>,
    pub heard: Vec<Sample>,
    /// [`SUCCESS_3M`] for silent locations, each as it stood at its last report.
    pub success_then: Vec<Sample>,
}

type Key = (String, String);

/// The samples by (target, location), the greatest where several agents wrote one.
fn by_location(samples: &[Sample]) -> BTreeMap<Key, f64> {
    let mut out: BTreeMap<Key, f64> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.value.is_finite()) {
        let key = (s.label("target").to_string(), s.label(LOCATION).to_string());
        let v = out.entry(key).or_insert(s.value);
        *v = v.max(s.value);
    }
    out
}

fn timestamp(v: Option<&f64>) -> Option<Timestamp> {
    v.and_then(|s| Timestamp::from_duration(jiff::SignedDuration::try_from_secs_f64(*s).ok()?).ok())
}

/// The answers as targets (by name) with their locations (by name) and failures (most first).
pub(crate) fn fold(a: Answers, source: &str, now: Timestamp) -> Fleet {
    let success = by_location(&a.success);
    let success_then = by_location(&a.success_then);
    let silent = silent_rows(&a, seconds(now));
    let last_run = by_location(&a.last_run);
    let last_success = by_location(&a.last_success);
    let ttft = by_location(&a.ttft);
    let uptime: Vec<BTreeMap<Key, f64>> = a.uptime.iter().map(|u| by_location(u)).collect();
    let held: std::collections::BTreeSet<&str> =
        a.maintenance.iter().map(|s| s.label("target")).collect();
    let mut models: BTreeMap<&str, &str> = BTreeMap::new();
    for s in &a.last_run {
        models.entry(s.label("target")).or_insert(s.label("model"));
    }
    // Every (target, location) that ran within the store's lookback or over the last 3 minutes.
    let keys: std::collections::BTreeSet<&Key> = last_run.keys().chain(success.keys()).collect();
    let mut targets: BTreeMap<String, Target> = BTreeMap::new();
    for key in keys {
        let (target, location) = key;
        let in_maintenance = held.contains(target.as_str());
        let silent_since = silent.get(key).copied();
        let ratio = match silent_since {
            Some(_) => success_then.get(key).or(success.get(key)).copied(),
            None => success.get(key).copied(),
        };
        let window = |i: usize| uptime.get(i).and_then(|u| u.get(key)).copied();
        let t = targets.entry(target.clone()).or_insert_with(|| Target {
            target: target.clone(),
            model: models
                .get(target.as_str())
                .copied()
                .unwrap_or("")
                .to_string(),
            state: State::Pending,
            locations_failing: 0,
            locations_silent: 0,
            locations: Vec::new(),
            failures: Vec::new(),
        });
        t.locations.push(Location {
            location: location.clone(),
            state: location_state(ratio, in_maintenance),
            success_ratio_3m: ratio,
            uptime_24h: window(0),
            uptime_7d: window(1),
            uptime_90d: window(2),
            ttft_p95_seconds: ttft.get(key).copied(),
            last_run: timestamp(last_run.get(key)),
            last_success: timestamp(last_success.get(key)),
            silent: silent_since.is_some(),
            silent_since: timestamp(silent_since.as_ref()),
        });
    }
    for s in &a.failures {
        if let Some(t) = targets.get_mut(s.label("target")) {
            t.failures.push(Failures {
                location: s.label(LOCATION).to_string(),
                probe: s.label("probe").to_string(),
                outcome: s.label("outcome").to_string(),
                runs_24h: s.value,
            });
        }
    }
    for t in targets.values_mut() {
        let states: Vec<State> = t.locations.iter().map(|l| l.state).collect();
        t.locations_failing = states.iter().filter(|s| **s == State::Down).count();
        t.locations_silent = t.locations.iter().filter(|l| l.silent).count();
        t.state = target_state(&states, held.contains(t.target.as_str()));
        t.failures.sort_by(|a, b| {
            b.runs_24h.total_cmp(&a.runs_24h).then_with(|| {
                (&a.location, &a.probe, &a.outcome).cmp(&(&b.location, &b.probe, &b.outcome))
            })
        });
    }
    Fleet {
        generated_at: now,
        source: source.to_string(),
        targets: targets.into_values().collect(),
    }
}

/// A fleet with one of everything, for the contract test.
#[cfg(test)]
pub(crate) fn example() -> Fleet {
    Fleet {
        generated_at: Timestamp::UNIX_EPOCH,
        source: "http://prometheus:9090".into(),
        targets: vec![Target {
            target: "t".into(),
            model: "m".into(),
            state: State::Degraded,
            locations_failing: 1,
            locations_silent: 1,
            locations: vec![Location {
                location: "eu".into(),
                state: State::Down,
                success_ratio_3m: Some(0.0),
                uptime_24h: Some(0.5),
                uptime_7d: Some(0.9),
                uptime_90d: Some(0.99),
                ttft_p95_seconds: Some(0.3),
                last_run: Some(Timestamp::UNIX_EPOCH),
                last_success: None,
                silent: true,
                silent_since: Some(Timestamp::UNIX_EPOCH),
            }],
            failures: vec![Failures {
                location: "eu".into(),
                probe: "p".into(),
                outcome: "http_error".into(),
                runs_24h: 3.0,
            }],
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_failing_location_of_several_degrades_two_take_the_target_down() {
        use State::{Degraded, Down, Pending, Up};
        assert_eq!(target_state(&[Up, Up, Up], false), Up);
        assert_eq!(target_state(&[Down, Up, Up], false), Degraded);
        assert_eq!(target_state(&[Down, Down, Up], false), Down);
        assert_eq!(target_state(&[Down], false), Down);
        assert_eq!(target_state(&[Degraded, Up], false), Degraded);
        assert_eq!(target_state(&[Down, Pending, Up], false), Degraded);
        assert_eq!(target_state(&[Pending], false), Pending);
        assert_eq!(target_state(&[Down, Down], true), State::Maintenance);
    }

    #[test]
    fn a_location_fails_under_half_its_runs_ok() {
        assert_eq!(location_state(Some(0.49), false), State::Down);
        assert_eq!(location_state(Some(0.5), false), State::Degraded);
        assert_eq!(location_state(Some(1.0), false), State::Up);
        assert_eq!(location_state(None, false), State::Pending);
        assert_eq!(location_state(Some(0.0), true), State::Maintenance);
    }

    fn s(labels: &[(&str, &str)], value: f64) -> Sample {
        Sample {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
        }
    }

    #[test]
    fn answers_fold_into_one_row_per_location() {
        let loc = |t: &str, r: &str, v: f64| s(&[("target", t), ("region", r)], v);
        let a = Answers {
            success: vec![
                loc("t", "eu", 1.0),
                loc("t", "us", 0.0),
                loc("t", "ap", 1.0),
            ],
            last_run: vec![
                s(&[("target", "t"), ("region", "eu"), ("model", "m")], 1.7e9),
                s(&[("target", "t"), ("region", "us"), ("model", "m")], 1.7e9),
                // An agent that stopped writing: a run within the day, none in 3 minutes.
                s(&[("target", "t"), ("region", "zz"), ("model", "m")], 1.6e9),
            ],
            last_success: vec![loc("t", "eu", 1.7e9)],
            ttft: vec![loc("t", "eu", 0.25), loc("t", "us", f64::NAN)],
            maintenance: vec![],
            failures: vec![
                s(
                    &[
                        ("target", "t"),
                        ("region", "us"),
                        ("probe", "p"),
                        ("outcome", "http_error"),
                    ],
                    3.0,
                ),
                s(
                    &[
                        ("target", "t"),
                        ("region", "us"),
                        ("probe", "p"),
                        ("outcome", "timeout"),
                    ],
                    9.0,
                ),
            ],
            uptime: vec![vec![loc("t", "us", 0.5)], vec![], vec![]],
            recent: vec![],
            heard: vec![],
            success_then: vec![],
        };
        let f = fold(a, "http://prom", Timestamp::UNIX_EPOCH);
        assert_eq!(f.targets.len(), 1);
        let t = &f.targets[0];
        assert_eq!(
            (t.state, t.locations_failing, t.model.as_str()),
            (State::Degraded, 1, "m")
        );
        let names: Vec<&str> = t.locations.iter().map(|l| l.location.as_str()).collect();
        assert_eq!(names, ["ap", "eu", "us", "zz"]);
        assert_eq!(t.locations[3].state, State::Pending);
        assert_eq!(
            t.locations[3].last_run.map(|t| t.as_second()),
            Some(1_600_000_000)
        );
        assert_eq!(t.locations[1].ttft_p95_seconds, Some(0.25));
        assert_eq!(t.locations[2].ttft_p95_seconds, None, "NaN is no figure");
        assert_eq!(t.locations[2].uptime_24h, Some(0.5));
        assert_eq!(t.failures[0].outcome, "timeout", "most failures first");
    }

    #[test]
    fn a_silent_location_counts_as_it_last_was() {
        let loc = |r: &str, v: f64| s(&[("target", "t"), ("region", r)], v);
        let run = |r: &str| {
            s(
                &[
                    ("target", "t"),
                    ("region", r),
                    ("model", "m"),
                    ("instance", r),
                ],
                900.0,
            )
        };
        let agent = |r: &str, last: f64| Series {
            labels: [("instance", r), ("region", r)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            times: vec![last - 30.0, last - 15.0, last],
        };
        let now = Timestamp::from_second(1000).unwrap();
        let a = Answers {
            // ap made no run in the last 3 minutes: the live ratio has none of it.
            success: vec![loc("eu", 1.0), loc("us", 1.0)],
            last_run: vec![run("ap"), run("eu"), run("us")],
            last_success: vec![],
            ttft: vec![],
            maintenance: vec![],
            failures: vec![],
            uptime: vec![],
            recent: vec![agent("ap", 780.0), agent("eu", 995.0), agent("us", 990.0)],
            heard: vec![],
            // Over the 3 minutes before its last report, ap failed every run.
            success_then: vec![loc("ap", 0.0)],
        };
        let t = &fold(a, "http://prom", now).targets[0];
        assert_eq!(t.state, State::Degraded, "not up: {t:?}");
        assert_eq!((t.locations_failing, t.locations_silent), (1, 1));
        let ap = &t.locations[0];
        assert_eq!((ap.state, ap.silent), (State::Down, true));
        assert_eq!(ap.silent_since.map(|t| t.as_second()), Some(780));
        assert_eq!(ap.success_ratio_3m, Some(0.0));
        assert!(t.locations[1..]
            .iter()
            .all(|l| !l.silent && l.silent_since.is_none()));
    }

    #[test]
    fn a_target_in_maintenance_holds_every_location() {
        let loc = |r: &str, v: f64| s(&[("target", "t"), ("region", r)], v);
        let a = Answers {
            success: vec![loc("eu", 0.0), loc("us", 0.0)],
            last_run: vec![],
            last_success: vec![],
            ttft: vec![],
            maintenance: vec![s(&[("target", "t")], 1.0)],
            failures: vec![],
            uptime: vec![],
            recent: vec![],
            heard: vec![],
            success_then: vec![],
        };
        let t = &fold(a, "http://prom", Timestamp::UNIX_EPOCH).targets[0];
        assert_eq!(t.state, State::Maintenance);
        assert!(t.locations.iter().all(|l| l.state == State::Maintenance));
        assert_eq!(t.locations_failing, 0);
    }
}
