//! History over months: a target's daily rollups pooled over its probes (for the status page's
//! 90-day bars), and `GET /api/v1/history?target=T&window=30d|90d&metric=uptime|ttft_p95`.
//!
//! A target's day pools its probes: uptime is their successes over their runs outside
//! maintenance; TTFT p95 is the highest of their p95s (percentiles do not add up, and the page
//! judges a target by its worst probe too).

use jiff::Timestamp;
use serde::Serialize;
use serde_json::json;

use super::state::Shared;
use crate::sinks::status_history::{Day, PairDays, DAYS, DAY_SECONDS};
use crate::util::unknown_name;

/// A target's last `DAYS` UTC days, oldest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct TargetDays {
    /// Midnight (UTC) of the first day.
    pub start: Timestamp,
    pub days: Vec<Day>,
}

impl TargetDays {
    /// The day `i` as `YYYY-MM-DD`.
    pub(crate) fn date(&self, i: usize) -> String {
        let t = self.start + jiff::SignedDuration::from_secs(DAY_SECONDS * i as i64);
        t.to_zoned(jiff::tz::TimeZone::UTC).date().to_string()
    }
}

/// The probes' days pooled into the target's.
pub(crate) fn pool(pairs: &[PairDays]) -> TargetDays {
    let Some(first) = pairs.first() else {
        return TargetDays::default();
    };
    let days = (0..first.days.len())
        .map(|i| {
            pairs
                .iter()
                .map(|p| p.days[i])
                .fold(Day::default(), |a, b| Day {
                    tally: [a.tally, b.tally].into_iter().sum(),
                    ttft_p50_ms: max(a.ttft_p50_ms, b.ttft_p50_ms),
                    ttft_p95_ms: max(a.ttft_p95_ms, b.ttft_p95_ms),
                    tokens_per_second_p50: match (a.tokens_per_second_p50, b.tokens_per_second_p50)
                    {
                        (Some(x), Some(y)) => Some(x.min(y)),
                        (x, y) => x.or(y),
                    },
                })
        })
        .collect();
    TargetDays {
        start: first.start,
        days,
    }
}

fn max(a: Option<f32>, b: Option<f32>) -> Option<f32> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

/// Why a history request names nothing to answer: the status code and the sentence.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refused(pub u16, pub String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    Uptime,
    TtftP95,
}

impl Metric {
    fn value(self, day: &Day) -> Option<f64> {
        match self {
            Metric::Uptime => day.tally.uptime(),
            Metric::TtftP95 => day.ttft_p95_ms.map(f64::from),
        }
    }
}

#[derive(Debug, Serialize)]
struct Point {
    date: String,
    value: Option<f64>,
    runs: u32,
}

fn points(days: &TargetDays, window: usize, metric: Metric) -> Vec<Point> {
    let from = days.days.len().saturating_sub(window);
    (from..days.days.len())
        .map(|i| Point {
            date: days.date(i),
            value: metric.value(&days.days[i]),
            runs: days.days[i].tally.runs,
        })
        .collect()
}

/// `/api/v1/history`'s answer for a query, as of `now`.
pub(super) fn json(
    shared: &Shared,
    query: Option<&str>,
    now: Timestamp,
) -> Result<Vec<u8>, Refused> {
    const USAGE: &str = "usage: /api/v1/history?target=T&window=30d|90d&metric=uptime|ttft_p95";
    let (mut target, mut window, mut metric) = (None, "90d".to_string(), "uptime".to_string());
    if let Ok(url) = reqwest::Url::parse(&format!("http://agent/?{}", query.unwrap_or(""))) {
        for (k, v) in url.query_pairs() {
            match k.as_ref() {
                "target" => target = Some(v.into_owned()),
                "window" => window = v.into_owned(),
                "metric" => metric = v.into_owned(),
                _ => {}
            }
        }
    }
    let Some(target) = target else {
        return Err(Refused(400, USAGE.into()));
    };
    let window_days = match window.as_str() {
        "30d" => 30,
        "90d" => DAYS,
        w => return Err(Refused(400, format!("unknown window {w:?}: 30d or 90d"))),
    };
    let m = match metric.as_str() {
        "uptime" => Metric::Uptime,
        "ttft_p95" => Metric::TtftP95,
        m => {
            return Err(Refused(
                400,
                format!("unknown metric {m:?}: uptime or ttft_p95"),
            ))
        }
    };
    let cfg = shared.cfg();
    if cfg.target(&target).is_none() {
        let names = cfg.targets.iter().map(|t| t.name.as_str());
        return Err(Refused(404, unknown_name("target", &target, names)));
    }
    let pairs = shared.days_target(&target, now);
    let probes: Vec<serde_json::Value> = pairs
        .iter()
        .map(|p| {
            let one = pool(std::slice::from_ref(p));
            json!({"probe": p.probe, "points": points(&one, window_days, m)})
        })
        .collect();
    let body = json!({
        "target": target,
        "window": window,
        "metric": metric,
        "step_seconds": DAY_SECONDS,
        "generated_at": now,
        "points": points(&pool(&pairs), window_days, m),
        "probes": probes,
    });
    Ok(body.to_string().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::status_history::Tally;

    fn day(runs: u32, failed: u32, p95: Option<f32>) -> Day {
        Day {
            tally: Tally {
                runs,
                failed,
                maintenance: 0,
            },
            ttft_p95_ms: p95,
            ..Day::default()
        }
    }

    #[test]
    fn a_target_pools_its_probes_days() {
        let start = Timestamp::from_second(0).unwrap();
        let p = |days| PairDays {
            probe: "p".into(),
            start,
            days,
        };
        let t = pool(&[
            p(vec![day(10, 1, Some(100.0)), day(0, 0, None)]),
            p(vec![day(30, 0, Some(300.0)), day(0, 0, None)]),
        ]);
        assert_eq!(t.days[0].tally.uptime(), Some(39.0 / 40.0));
        assert_eq!(t.days[0].ttft_p95_ms, Some(300.0), "the worst probe's");
        assert_eq!(
            (t.days[1].tally.uptime(), t.days[1].ttft_p95_ms),
            (None, None)
        );
        assert_eq!(
            (t.date(0), t.date(1)),
            ("1970-01-01".into(), "1970-01-02".into())
        );
        let ps = points(&t, 1, Metric::TtftP95);
        assert_eq!((ps.len(), ps[0].date.as_str()), (1, "1970-01-02"));
        assert!(pool(&[]).days.is_empty());
    }
}
