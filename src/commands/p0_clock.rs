//! Whether a target's probes, by their cadence and confirmation runs, can page it hard down
//! within the 3-minute P0 clock, for `check` to warn about.
//!
//! From the fault, at worst: a period until the first failed run (the fault came just after a
//! run), then the confirmation runs, each `after` later or at the next scheduled run if that
//! comes first (runs that fail fast, as a refused connection does), then the alerting path: the
//! push, a scrape and an evaluation, 45 s with the deploy kit's 15 s scrape and 30 s evaluation.
//! Without confirmation runs the rules wait for 3 minutes without a success and a second failed
//! run in a row.

use std::time::Duration;

use crate::config::{Config, Confirm, Probe};
use crate::util::human_duration;

/// The P0 clock: a hard-down target pages within this of the fault.
pub(super) const P0_CLOCK: Duration = Duration::from_secs(180);
/// Push, scrape and evaluation with the deploy kit's Prometheus settings (a push within
/// seconds, a 15 s scrape, a 30 s evaluation).
const ALERTING: Duration = Duration::from_secs(45);
/// The period up to which the rules' own 3-minute clock pages without confirmation runs.
const UNCONFIRMED_PERIOD: Duration = Duration::from_secs(90);

/// From the fault to a confirmed failure at worst: a period, then `runs` confirmation runs.
pub(super) fn confirmed_after(period: Duration, confirm: Confirm) -> Duration {
    period + confirm.runs * confirm.after.min(period)
}

/// The schedule's usual gap between runs: the median over its next fire times.
fn period(probe: &Probe, now: &jiff::Timestamp) -> Option<Duration> {
    let schedule = probe.schedule.as_ref()?;
    let fires = schedule.upcoming(&now.to_zoned(probe.timezone.clone()), 25);
    let mut gaps: Vec<Duration> = fires
        .windows(2)
        .filter_map(|w| Duration::try_from(w[1].timestamp().duration_since(w[0].timestamp())).ok())
        .collect();
    gaps.sort();
    gaps.get(gaps.len() / 2).copied()
}

/// At worst, from the fault to the page through `probe` with the kit's alerting path, why, and
/// what would make it sooner.
fn time_to_page(probe: &Probe, now: &jiff::Timestamp) -> Option<(Duration, String, &'static str)> {
    let period = period(probe, now)?;
    let every = human_duration(period);
    if !probe.confirm.is_on() {
        // The rules' own clock: 3 minutes without success and two failed runs in a row.
        let page = if period <= UNCONFIRMED_PERIOD {
            P0_CLOCK
        } else {
            2 * period + ALERTING
        };
        let why = format!(
            "probe {:?} runs every {every} with `confirm: off`",
            probe.name
        );
        let fix = "confirm its failures (e.g. `confirm: {runs: 2, after: 20s}`) or run a probe of it every 90s or more often";
        return Some((page, why, fix));
    }
    let why = format!(
        "probe {:?} runs every {every} and confirms a failure with {} run(s) {} apart",
        probe.name,
        probe.confirm.runs,
        human_duration(probe.confirm.after)
    );
    let fix = "run a probe of it every 90s or more often, or shorten `confirm.after`";
    Some((confirmed_after(period, probe.confirm) + ALERTING, why, fix))
}

/// For each target none of whose probes can page a hard-down within the P0 clock (the page is
/// per target: one probe that can is enough), why not.
pub(super) fn warnings(cfg: &Config, now: &jiff::Timestamp) -> Vec<String> {
    let mut out = Vec::new();
    for t in &cfg.targets {
        let best = cfg
            .probes
            .iter()
            .filter(|p| p.targets.contains(&t.name))
            .filter_map(|p| time_to_page(p, now))
            .min_by_key(|(page, _, _)| *page);
        if let Some((page, why, fix)) = best.filter(|(page, _, _)| *page > P0_CLOCK) {
            out.push(format!(
                "target {:?} may page only {} after it goes down, past the 3-minute P0 clock: its fastest, {why}, and the alert follows a push, a 15s scrape and a 30s evaluation; {fix}",
                t.name,
                human_duration(page),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confirm(runs: u32, after: u64) -> Confirm {
        Confirm {
            runs,
            after: Duration::from_secs(after),
        }
    }

    #[test]
    fn a_confirmation_waits_for_after_or_the_next_scheduled_run() {
        let s = Duration::from_secs;
        // Every 30 s: the second confirmation is the next scheduled run (20 s + 20 s > 30 s
        // is not counted: each step is at most a period).
        assert_eq!(confirmed_after(s(30), confirm(2, 20)), s(70));
        assert_eq!(confirmed_after(s(10), confirm(2, 20)), s(30));
        assert_eq!(confirmed_after(s(120), confirm(2, 20)), s(160));
        assert_eq!(confirmed_after(s(300), confirm(2, 20)), s(340));
        assert_eq!(confirmed_after(s(60), Confirm::OFF), s(60));
    }

    #[test]
    fn the_default_meets_the_clock_up_to_a_90_second_cadence() {
        let d = Confirm::default();
        let meets = |period| confirmed_after(Duration::from_secs(period), d) + ALERTING <= P0_CLOCK;
        assert!(meets(30) && meets(60) && meets(90));
        assert!(!meets(120) && !meets(300));
    }
}
