//! What `watch` shows, as plain data: each (probe, target) pair's state, last outcome and
//! figures, taken from the status page's own judging (`daemon::status`), whether that judging
//! ran in this process or in the daemon being followed. Nothing here is judged again.

use jiff::Timestamp;
use serde::Deserialize;

use crate::daemon::status::{State, TargetStatus};

/// `/api/v1/status` as the daemon writes it (`daemon::status::json`), read back.
#[derive(Debug, Deserialize)]
pub(super) struct Document {
    pub agent: String,
    pub generated_at: Timestamp,
    pub targets: Vec<TargetStatus>,
}

/// The whole view.
#[derive(Debug, Default)]
pub(super) struct Board {
    pub agent: String,
    /// Where the figures come from, as the header says it.
    pub source: String,
    /// When the figures were judged; `None` before the first answer.
    pub generated_at: Option<Timestamp>,
    pub rows: Vec<Row>,
    /// Why the figures may be stale (the daemon cannot be read), on a line of its own.
    pub problem: Option<String>,
}

/// One (probe, target) pair.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub target: String,
    pub probe: String,
    pub state: State,
    pub last_outcome: Option<String>,
    pub last_run: Option<Timestamp>,
    /// The TTFT of its last runs, oldest first (`None`: none, as for a run that failed before
    /// its first token, or a warm-up).
    pub ttft_ms: Vec<Option<f32>>,
    /// The last run's decode speed.
    pub tokens_per_second: Option<f32>,
    /// The latest failure (outcome, sentence), while the pair is degraded or down.
    pub failure: Option<(String, String)>,
}

impl Board {
    pub(super) fn new(source: String) -> Board {
        Board {
            source,
            ..Board::default()
        }
    }

    /// Takes a fresh judgement: every row is replaced and a past problem is over.
    pub(super) fn update(&mut self, doc: Document) {
        self.agent = doc.agent;
        self.generated_at = Some(doc.generated_at);
        self.problem = None;
        self.rows = doc
            .targets
            .into_iter()
            .flat_map(|t| t.probes)
            .map(|p| {
                let h = p.history;
                let failing = matches!(p.state, State::Degraded | State::Down);
                Row {
                    failure: h
                        .failures
                        .first()
                        .filter(|_| failing)
                        .map(|f| (f.outcome.clone(), f.error.clone())),
                    target: h.target,
                    probe: h.probe,
                    state: p.state,
                    last_outcome: h.last_outcome,
                    last_run: h.last_run,
                    tokens_per_second: h.recent_tokens_per_second.last().copied().flatten(),
                    ttft_ms: h.recent_ttft_ms,
                }
            })
            .collect();
    }

    /// How many pairs are in each state, in the order the header says them.
    pub(super) fn counts(&self) -> [(State, usize); 5] {
        [
            State::Up,
            State::Degraded,
            State::Down,
            State::Maintenance,
            State::Pending,
        ]
        .map(|s| (s, self.rows.iter().filter(|r| r.state == s).count()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::history::TargetDays;
    use crate::daemon::status::{self, Head, ProbeStatus};
    use crate::sinks::status_history::{Run, StatusHistory};

    fn run(probe: &str, at: &str, success: bool, ttft: f64) -> Run {
        Run {
            probe: probe.into(),
            target: "t".into(),
            started_at: at.parse().unwrap(),
            outcome: if success { "ok" } else { "connect_error" }.into(),
            success,
            maintenance: false,
            warmup: false,
            ttft_ms: success.then_some(ttft),
            tokens_per_second: success.then_some(42.0),
            http_status: None,
            request_id: "r".into(),
            trace_id: String::new(),
            error: (!success).then(|| "connection refused (127.0.0.1:9)".into()),
            failed_checks: vec![],
            repetition: None,
            cache_phase: None,
        }
    }

    /// The daemon's own JSON, written by its own code, read back into rows.
    #[test]
    fn the_daemons_json_reads_back_into_rows_with_its_states() {
        let h = StatusHistory::default();
        h.retain_pairs(&[("a".into(), "t".into()), ("b".into(), "t".into())]);
        h.record(&run("a", "2025-03-10T11:00:00Z", true, 120.0));
        h.record(&run("a", "2025-03-10T11:01:00Z", true, 240.0));
        h.record(&run("b", "2025-03-10T11:00:00Z", true, 100.0));
        h.record(&run("b", "2025-03-10T11:01:00Z", false, 0.0));
        let now: Timestamp = "2025-03-10T11:02:00Z".parse().unwrap();
        let probes = h
            .snapshot_target("t", now)
            .into_iter()
            .map(|s| ProbeStatus {
                state: status::pair_state(&s, false),
                uptime_1h: None,
                uptime_24h: None,
                uptime_7d: None,
                history: s,
            })
            .collect();
        let target = TargetStatus {
            target: "t".into(),
            model: "m".into(),
            state: State::Degraded,
            maintenance: None,
            probes,
            days: TargetDays::default(),
        };
        let head = Head {
            agent: "canary-1".into(),
            generated_at: now,
            pairs: 2,
        };
        let json = status::json(&head, std::iter::once(target));
        let mut board = Board::new("test".into());
        board.problem = Some("stale".into());
        board.update(serde_json::from_slice(&json).unwrap());
        assert_eq!(board.agent, "canary-1");
        assert_eq!(board.generated_at, Some(now));
        assert_eq!(board.problem, None);
        let [a, b] = &board.rows[..] else {
            panic!("{:?}", board.rows)
        };
        assert_eq!((a.probe.as_str(), a.state), ("a", State::Up));
        assert_eq!(a.ttft_ms, vec![Some(120.0), Some(240.0)]);
        assert_eq!(a.tokens_per_second, Some(42.0));
        assert_eq!(a.failure, None);
        assert_eq!((b.probe.as_str(), b.state), ("b", State::Degraded));
        assert_eq!(b.last_outcome.as_deref(), Some("connect_error"));
        assert_eq!(b.tokens_per_second, None, "the last run failed");
        assert_eq!(
            b.failure,
            Some((
                "connect_error".into(),
                "connection refused (127.0.0.1:9)".into()
            ))
        );
        assert_eq!(board.counts()[0], (State::Up, 1));
        assert_eq!(board.counts()[1], (State::Degraded, 1));
        assert_eq!(board.counts()[2], (State::Down, 0));
    }
}
