//! Tests of the incident detector: opening and closing on the page's rule, maintenance, the
//! retention and the cap, and that a replay gives the same incidents as the live fold.

use super::*;

fn at(min: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + 60 * min).unwrap()
}

fn run(probe: &str, target: &str, min: i64, outcome: &str) -> Run {
    let ok = outcome == "ok";
    Run {
        probe: probe.into(),
        target: target.into(),
        started_at: at(min),
        outcome: outcome.into(),
        success: ok,
        maintenance: false,
        warmup: false,
        cache_phase: None,
        ttft_ms: Some(50.0),
        tokens_per_second: Some(40.0),
        http_status: Some(if ok { 200 } else { 503 }),
        request_id: format!("r{min}"),
        trace_id: String::new(),
        error: (!ok).then(|| format!("HTTP 503 at minute {min}")),
        failed_checks: vec![],
        repetition: None,
    }
}

#[test]
fn one_failure_opens_a_degraded_incident_and_the_first_good_run_closes_it() {
    let mut runs = vec![run("p", "t", 0, "ok"), run("p", "t", 1, "http_error")];
    let open = detect(&runs);
    assert_eq!(open.len(), 1);
    assert!(open[0].is_open());
    assert_eq!(open[0].state, State::Degraded);
    runs.extend((2..6).map(|m| run("p", "t", m, "ok")));
    let i = &detect(&runs)[0];
    assert_eq!(i.id, format!("t-{}", at(1).as_millisecond()));
    assert_eq!((i.started_at, i.ended_at), (at(1), Some(at(2))));
    assert_eq!(i.duration_seconds, 60);
    assert_eq!(i.first_error, "HTTP 503 at minute 1");
    assert_eq!(i.outcomes, BTreeMap::from([("http_error".into(), 1)]));
}

#[test]
fn an_incident_lasts_from_the_first_failed_run_to_the_first_good_one_whatever_the_cadence() {
    // Every 2 minutes: down from minute 4 to 10, with the second failure turning it down.
    for cadence in [1, 2, 5] {
        let runs: Vec<Run> = (0..8)
            .map(|k| {
                let failed = (2..5).contains(&k);
                run(
                    "p",
                    "t",
                    k * cadence,
                    if failed { "http_error" } else { "ok" },
                )
            })
            .collect();
        let all = detect(&runs);
        assert_eq!(all.len(), 1, "cadence {cadence}");
        let i = &all[0];
        assert_eq!(i.state, State::Down);
        assert_eq!(
            (i.started_at, i.ended_at),
            (at(2 * cadence), Some(at(5 * cadence))),
            "cadence {cadence}"
        );
        assert_eq!(i.duration_seconds, 3 * 60 * cadence);
    }
}

#[test]
fn an_incident_that_goes_down_says_down_and_counts_every_outcome() {
    let mut runs: Vec<Run> = (0..5).map(|m| run("p", "t", m, "http_error")).collect();
    runs.push(run("p", "t", 5, "timeout"));
    let i = &detect(&runs)[0];
    assert_eq!(i.state, State::Down);
    assert_eq!(
        i.outcomes,
        BTreeMap::from([("http_error".into(), 5), ("timeout".into(), 1)])
    );
    assert!(i.is_open());
}

#[test]
fn a_target_is_judged_on_all_its_probes_and_targets_apart() {
    // q fails on t: t is degraded (p is up); u's runs never touch t's incident.
    let runs = [
        run("p", "t", 0, "ok"),
        run("q", "t", 0, "empty_output"),
        run("p", "u", 1, "ok"),
        run("q", "t", 2, "ok"),
    ];
    let all = detect(&runs);
    assert_eq!(all.len(), 1);
    assert_eq!(
        (all[0].target.as_str(), all[0].state),
        ("t", State::Degraded)
    );
    assert_eq!(all[0].ended_at, Some(at(2)), "q's first good run ends it");
}

#[test]
fn maintenance_never_opens_an_incident() {
    let mut runs: Vec<Run> = (0..6).map(|m| run("p", "t", m, "http_error")).collect();
    for r in &mut runs {
        r.maintenance = true;
    }
    assert!(detect(&runs).is_empty());
    // The window's failures still count among the last runs afterwards, as on the page: one
    // more failure is two in a row, down at once.
    let mut failing = runs.clone();
    failing.push(run("p", "t", 6, "http_error"));
    let i = &detect(&failing)[0];
    assert_eq!((i.started_at, i.state), (at(6), State::Down));
    // A success after the window is up: nothing opens.
    runs.push(run("p", "t", 6, "ok"));
    assert!(detect(&runs).is_empty());
}

#[test]
fn pairs_left_out_of_the_config_do_not_count() {
    let mut inc = Incidents::new(std::time::Duration::from_secs(86_400));
    inc.retain_pairs(&[("p".into(), "t".into())]);
    inc.record(&run("gone", "t", 0, "http_error"));
    assert!(inc.list(None).is_empty());
}

#[test]
fn closed_incidents_older_than_the_retention_go() {
    let mut inc = Incidents::new(std::time::Duration::from_secs(3600));
    inc.record(&run("p", "t", 0, "http_error"));
    for m in 1..=5 {
        inc.record(&run("p", "t", m, "ok"));
    }
    assert_eq!(inc.list(Some("t")).len(), 1);
    assert!(inc.list(Some("u")).is_empty());
    inc.record(&run("p", "t", 60, "ok"));
    assert_eq!(inc.list(None).len(), 1, "ended 59 minutes ago");
    inc.record(&run("p", "t", 62, "ok"));
    assert!(inc.list(None).is_empty(), "ended 61 minutes ago");
}

#[test]
fn the_list_is_capped_newest_kept() {
    let mut inc = Incidents::new(std::time::Duration::MAX);
    let mut m = 0;
    for _ in 0..MAX_INCIDENTS + 5 {
        inc.record(&run("p", "t", m, "http_error"));
        for k in 1..=5 {
            inc.record(&run("p", "t", m + k, "ok"));
        }
        m += 6;
    }
    let list = inc.list(None);
    assert_eq!(list.len(), MAX_INCIDENTS);
    assert_eq!(list[0].started_at, at(m - 6), "newest first");
}

#[test]
fn saved_incidents_restore_to_the_same_list_and_fold_on_alike() {
    let mut a = Incidents::new(std::time::Duration::from_secs(86_400));
    a.retain_pairs(&[("p".into(), "t".into()), ("q".into(), "t".into())]);
    let mut touched = Vec::new();
    for m in 0..40 {
        let outcome = if m % 9 < 3 { "timeout" } else { "ok" };
        touched.push(a.record_saved(&run("p", "t", m, outcome)).unwrap());
        a.record(&run("q", "t", m, "ok"));
    }
    assert!(touched
        .iter()
        .any(|(_, i)| i.as_ref().is_some_and(|i| i.is_open())));
    assert!(
        a.record_saved(&run("x", "t", 41, "ok")).is_none(),
        "not kept"
    );
    let mut b = Incidents::new(std::time::Duration::from_secs(86_400));
    b.retain_pairs(&[("p".into(), "t".into()), ("q".into(), "t".into())]);
    b.restore(a.saved(), at(40));
    assert_eq!(a.list(None), b.list(None));
    let sorted = |i: &Incidents| {
        let mut s = i.saved();
        s.recent.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
        s
    };
    assert_eq!(sorted(&a), sorted(&b));
    for m in 41..50 {
        let r = run("p", "t", m, if m == 42 { "timeout" } else { "ok" });
        a.record(&r);
        b.record(&r);
    }
    assert_eq!(a.list(None), b.list(None));
}
