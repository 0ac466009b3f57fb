//! Which agents went quiet, from the times of the samples they wrote. An agent that
//! remote-writes samples its whole registry every `interval` with one timestamp, so its
//! `llm_canary_build_info` holds one sample per interval: the newest sample's time is its last
//! report, the usual gap between its samples its cadence. An agent is silent once it has written
//! nothing for [`SILENT_AFTER`] cadences (the series the alert `LLMCanaryFleetAgentSilent` watches).

use std::collections::BTreeMap;

use super::query::{Sample, Series};

/// The label that names a location (the agents' `region`).
pub(crate) const LOCATION: &str = "region";

/// The agents' raw samples over the window their cadence is read from.
pub(crate) const RECENT: &str = r#"llm_canary_build_info{region!=""}[10m]"#;
/// [`RECENT`]'s range, in seconds: an agent with fewer than two samples in it has no cadence,
/// and is silent once it has none.
pub(crate) const WINDOW_SECONDS: f64 = 600.0;
/// Each agent's last report within the day the page keeps a location for: the newest sample's
/// own time (`timestamp` of a selector is its sample's time), looked up every 5 minutes, the
/// store's lookback, so no sample is missed.
pub(crate) const LAST_HEARD: &str = r#"max by (instance, region) (max_over_time(timestamp(llm_canary_build_info{region!=""})[1d:5m]))"#;
/// Cadences without a sample after which an agent is silent: one late sampling (a slow send,
/// a retry) is not silence; a second missed one is.
pub(crate) const SILENT_AFTER: f64 = 2.0;
/// Never silent sooner than this, seconds: an agent sampling every second or faster is late by
/// a send's latency alone.
pub(crate) const QUIET_AT_LEAST: f64 = 5.0;

/// One agent: `instance` and location.
pub(crate) type AgentKey = (String, String);

/// What the store says of one agent's writing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Agent {
    /// The newest sample's time, Unix seconds.
    pub last_report: f64,
    /// The median gap between its samples in the window, seconds; none with fewer than two.
    pub cadence: Option<f64>,
}

impl Agent {
    /// Whether the agent has written nothing for too long at `now` (Unix seconds).
    pub(crate) fn silent(&self, now: f64) -> bool {
        let quiet = now - self.last_report;
        match self.cadence {
            Some(c) => quiet > (SILENT_AFTER * c).max(QUIET_AT_LEAST),
            None => quiet > WINDOW_SECONDS,
        }
    }
}

/// Every agent seen within the day, by (instance, location), from [`RECENT`] and [`LAST_HEARD`].
pub(crate) fn agents(recent: &[Series], heard: &[Sample]) -> BTreeMap<AgentKey, Agent> {
    // Several series of one agent (a `version` label that changed at an upgrade) are sampled
    // together: their times are merged before the gaps are read.
    let mut times: BTreeMap<AgentKey, Vec<f64>> = BTreeMap::new();
    for s in recent {
        times
            .entry(key(&s.labels))
            .or_default()
            .extend(s.times.iter().copied().filter(|t| t.is_finite()));
    }
    let mut out: BTreeMap<AgentKey, Agent> = times
        .into_iter()
        .filter_map(|(k, mut t)| {
            t.sort_by(f64::total_cmp);
            t.dedup();
            let last_report = *t.last()?;
            Some((
                k,
                Agent {
                    last_report,
                    cadence: median_gap(&t),
                },
            ))
        })
        .collect();
    for s in heard.iter().filter(|s| s.value.is_finite()) {
        let a = out.entry(key(&s.labels)).or_insert(Agent {
            last_report: s.value,
            cadence: None,
        });
        a.last_report = a.last_report.max(s.value);
    }
    out
}

fn key(labels: &BTreeMap<String, String>) -> AgentKey {
    let get = |l: &str| labels.get(l).cloned().unwrap_or_default();
    (get("instance"), get(LOCATION))
}

/// The median gap between sorted times: one long gap (a restart) does not stretch it.
fn median_gap(sorted: &[f64]) -> Option<f64> {
    let mut gaps: Vec<f64> = sorted
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|g| *g > 0.0)
        .collect();
    gaps.sort_by(f64::total_cmp);
    gaps.get(gaps.len() / 2).copied()
}

/// When a (target, location) written by `writers` went silent at `now`: every one of its agents
/// is silent, and the newest last report among them; `None` while one still writes or none of
/// them is known.
pub(crate) fn since<'a>(
    writers: impl IntoIterator<Item = &'a AgentKey>,
    agents: &BTreeMap<AgentKey, Agent>,
    now: f64,
) -> Option<f64> {
    let mut newest: Option<f64> = None;
    for w in writers {
        let a = agents.get(w)?;
        if !a.silent(now) {
            return None;
        }
        newest = Some(newest.map_or(a.last_report, |n: f64| n.max(a.last_report)));
    }
    newest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(instance: &str, region: &str, times: &[f64]) -> Series {
        Series {
            labels: [("instance", instance), ("region", region)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            times: times.to_vec(),
        }
    }

    fn k(i: &str, r: &str) -> AgentKey {
        (i.to_string(), r.to_string())
    }

    #[test]
    fn silent_after_two_cadences_without_a_sample() {
        let every_15 = [1000.0, 1015.0, 1030.0, 1045.0, 1060.0];
        let a = agents(&[series("a", "eu", &every_15)], &[]);
        let eu = a[&k("a", "eu")];
        assert_eq!(eu.cadence, Some(15.0));
        assert_eq!(eu.last_report, 1060.0);
        assert!(
            !eu.silent(1060.0 + 29.0),
            "one late sampling is not silence"
        );
        assert!(eu.silent(1060.0 + 31.0));
    }

    #[test]
    fn a_restart_gap_does_not_stretch_the_cadence() {
        let a = agents(
            &[series("a", "eu", &[0.0, 10.0, 20.0, 200.0, 210.0, 220.0])],
            &[],
        );
        assert_eq!(a[&k("a", "eu")].cadence, Some(10.0));
    }

    #[test]
    fn a_fast_agent_is_not_silent_for_a_send_s_latency() {
        let a = agents(&[series("a", "eu", &[0.0, 0.5, 1.0, 1.5])], &[]);
        assert!(!a[&k("a", "eu")].silent(1.5 + 3.0));
        assert!(a[&k("a", "eu")].silent(1.5 + QUIET_AT_LEAST + 0.1));
    }

    #[test]
    fn an_agent_quiet_past_the_window_is_known_from_its_last_report() {
        let heard = Sample {
            labels: [("instance", "a"), ("region", "ap")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value: 500.0,
        };
        let a = agents(&[], &[heard]);
        let ap = a[&k("a", "ap")];
        assert_eq!((ap.last_report, ap.cadence), (500.0, None));
        assert!(!ap.silent(500.0 + WINDOW_SECONDS - 1.0));
        assert!(ap.silent(500.0 + WINDOW_SECONDS + 1.0));
    }

    #[test]
    fn a_location_is_silent_only_when_all_its_writers_are() {
        let a = agents(
            &[
                series("a", "eu", &[0.0, 10.0, 20.0]),
                series("b", "eu", &[0.0, 10.0, 20.0, 30.0, 40.0, 50.0]),
            ],
            &[],
        );
        let both = [k("a", "eu"), k("b", "eu")];
        assert_eq!(since(&both, &a, 45.0), None, "b still writes");
        assert_eq!(since(&both, &a, 80.0), Some(50.0), "the newest report");
        assert_eq!(
            since(&[k("z", "eu")], &a, 80.0),
            None,
            "unknown is not silent"
        );
    }
}
