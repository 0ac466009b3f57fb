//! Tests of the status history: slots, uptime windows, the recent-runs state input, failures,
//! and the rebuild from a rotated results log.

use super::*;
use crate::result::ProbeResult;
use crate::sinks::results_log::ResultsLog;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn run(at: &str, success: bool, ttft: Option<f64>) -> Run {
    Run {
        probe: "p".into(),
        target: "t".into(),
        started_at: ts(at),
        outcome: if success { "ok" } else { "http_error" }.into(),
        success,
        maintenance: false,
        warmup: false,
        cache_phase: None,
        ttft_ms: ttft,
        tokens_per_second: ttft.map(|_| 50.0),
        http_status: Some(if success { 200 } else { 500 }),
        request_id: "req".into(),
        trace_id: "trace".into(),
        error: (!success).then(|| "HTTP 500: <b>boom</b>".into()),
        failed_checks: vec![],
        repetition: None,
    }
}

fn history() -> StatusHistory {
    let h = StatusHistory::default();
    h.retain_pairs(&[("p".into(), "t".into())]);
    h
}

#[test]
fn the_log_scale_keeps_figures_to_a_thousandth() {
    for v in [0.01, 0.7, 3.0, 250.0, 1234.5, 60_000.0] {
        let back = LogScale::decode(LogScale::encode(Some(v))).unwrap();
        assert!((back / v - 1.0).abs() < 3e-4, "{v} -> {back}");
    }
    assert_eq!(LogScale::encode(None), 0);
    assert_eq!(LogScale::encode(Some(0.0)), 0);
    assert_eq!(LogScale::decode(0), None);
}

#[test]
fn the_ring_moves_forward_and_forgets_what_falls_out() {
    let mut r: Ring<u16, 4> = Ring::new();
    *r.slot_mut(10).unwrap() = 1;
    *r.slot_mut(11).unwrap() = 2;
    assert_eq!((r.get(10), r.get(11), r.get(12)), (1, 2, 0));
    *r.slot_mut(13).unwrap() = 4;
    assert_eq!(r.get(12), 0, "skipped slots are cleared");
    assert!(r.slot_mut(9).is_none(), "older than the ring holds");
    *r.slot_mut(20).unwrap() = 7;
    assert_eq!((r.get(13), r.get(17), r.get(20)), (0, 0, 7));
    *r.slot_mut(18).unwrap() += 1;
    assert_eq!(r.get(18), 1, "a late run within the ring still counts");
}

#[test]
fn uptime_windows_count_whole_slots_and_leave_maintenance_out() {
    let h = history();
    // Two days ago: a failure (7 d only). An hour and a half ago: a failure (24 h, 7 d).
    h.record(&run("2025-03-08T12:00:00Z", false, None));
    h.record(&run("2025-03-10T10:30:00Z", false, None));
    for m in 0..10 {
        h.record(&run(
            &format!("2025-03-10T11:{:02}:10Z", 30 + m),
            true,
            Some(100.0),
        ));
    }
    let mut in_window = run("2025-03-10T11:45:00Z", false, None);
    in_window.maintenance = true;
    h.record(&in_window);
    let s = &h.snapshot(ts("2025-03-10T12:00:00Z"))[0];
    assert_eq!(
        (s.last_1h.runs, s.last_1h.failed, s.last_1h.maintenance),
        (10, 0, 1)
    );
    assert_eq!((s.last_24h.runs, s.last_24h.failed), (11, 1));
    assert_eq!((s.last_7d.runs, s.last_7d.failed), (12, 2));
    assert_eq!(s.last_1h.uptime(), Some(1.0));
    assert_eq!(s.last_7d.uptime(), Some(10.0 / 12.0));
    assert_eq!(Tally::default().uptime(), None);
    assert_eq!(s.day.len(), FINE_SLOTS);
    assert_eq!(s.week.len(), COARSE_SLOTS);
    // The failure in the window is listed too, flagged.
    assert_eq!(s.failures.len(), 3);
    assert!(s.failures[0].maintenance);
    assert_eq!(s.failures[1].started_at, ts("2025-03-10T10:30:00Z"));
}

#[test]
fn slots_carry_ttft_quantiles_without_warmups_and_the_mean_decode_speed() {
    let h = history();
    for (i, t) in [10.0, 20.0, 30.0, 40.0, 1000.0].iter().enumerate() {
        h.record(&run(&format!("2025-03-10T11:5{i}:00Z"), true, Some(*t)));
    }
    let mut cold = run("2025-03-10T11:54:30Z", true, Some(9000.0));
    cold.warmup = true;
    h.record(&cold);
    // A cache check's warm run is served from the cache on purpose: no user's latency either.
    let mut cached = run("2025-03-10T11:54:40Z", true, Some(0.5));
    cached.cache_phase = Some(crate::result::CachePhase::Warm);
    h.record(&cached);
    let s = &h.snapshot(ts("2025-03-10T11:54:59Z"))[0];
    let d = &s.day;
    let last = FINE_SLOTS - 1;
    // Within the log scale's 0.03%, to a tenth.
    let near =
        |v: Option<f32>, want: f64| (f64::from(v.unwrap()) - want).abs() <= want * 3e-4 + 0.05;
    assert!(near(d.ttft_p50_ms[last], 30.0), "{:?}", d.ttft_p50_ms[last]);
    assert!(
        near(d.ttft_p95_ms[last], 1000.0),
        "{:?}",
        d.ttft_p95_ms[last]
    );
    assert!(near(d.tokens_per_second[last], 50.0));
    assert_eq!(d.tally(last).runs, 7);
    assert_eq!(d.ttft_p50_ms[last - 1], None);
    assert_eq!(d.start, ts("2025-03-09T11:55:00Z"));
}

#[test]
fn the_recent_runs_and_failures_are_bounded() {
    let h = history();
    for i in 0..12 {
        h.record(&run(&format!("2025-03-10T11:00:{i:02}Z"), i % 4 != 0, None));
    }
    let s = &h.snapshot(ts("2025-03-10T11:01:00Z"))[0];
    // Runs 7..=11: run 8 failed.
    assert_eq!((s.recent_runs, s.recent_failed), (5, 1));
    assert_eq!(s.failures.len(), 3);
    for i in 12..30 {
        h.record(&run(&format!("2025-03-10T11:00:{i:02}Z"), false, None));
    }
    let s = &h.snapshot(ts("2025-03-10T11:01:00Z"))[0];
    assert_eq!((s.recent_runs, s.recent_failed), (5, 5));
    assert_eq!(s.failures.len(), FAILURES_KEPT);
    assert_eq!(s.failures[0].started_at, ts("2025-03-10T11:00:29Z"));
    assert_eq!(s.last_outcome.as_deref(), Some("http_error"));
}

#[test]
fn the_rebuild_reads_rotated_files_oldest_first_and_skips_what_is_too_old() {
    let tmp = tempfile::tempdir().unwrap();
    let mut r = ProbeResult::example();
    (r.id.probe, r.id.target) = ("p".into(), "t".into());
    let line = r.to_json_line().len() as u64 + 1;
    let settings = ResultsLogSettings {
        path: tmp.path().join("results.jsonl"),
        max_bytes: (line + 10) * 3,
        keep: 3,
    };
    let mut log = ResultsLog::open(&settings).unwrap();
    for i in 0..8 {
        r.id.started_at = ts(&format!("2025-03-10T11:0{i}:00Z"));
        r.judged.outcome = if i == 3 {
            crate::outcome::Outcome::Stall
        } else {
            crate::outcome::Outcome::Ok
        };
        r.id.request_id = format!("req-{i}");
        log.append(&r).unwrap();
    }
    r.id.started_at = ts("2025-01-01T00:00:00Z");
    log.append(&r).unwrap();
    std::fs::write(
        tmp.path().join("results.jsonl.1"),
        format!(
            "{}not json\n",
            std::fs::read_to_string(tmp.path().join("results.jsonl.1")).unwrap()
        ),
    )
    .unwrap();
    assert!(log_files(&settings.path).len() > 1, "the log rotated");
    let h = history();
    let (taken, bad) = replay(&settings, ts("2025-03-03T12:00:00Z"), |r| h.record(r));
    assert_eq!((taken, bad), (8, 1));
    let s = &h.snapshot(ts("2025-03-10T12:00:00Z"))[0];
    assert_eq!((s.last_24h.runs, s.last_24h.failed), (8, 1));
    assert_eq!(s.failures[0].request_id, "req-3");
    assert_eq!(s.last_run, Some(ts("2025-03-10T11:07:00Z")), "in order");
}

#[test]
fn a_content_failure_keeps_its_sentence_checks_and_detector() {
    use crate::checks::repetition;
    use crate::outcome::Outcome;
    let h = history();
    let mut r = ProbeResult::example();
    (r.id.probe, r.id.target) = ("p".into(), "t".into());
    r.id.started_at = ts("2025-03-10T11:00:00Z");
    r.judged.outcome = Outcome::Repetition;
    r.judged.failed_checks = vec![Outcome::Repetition, Outcome::TooLong];
    r.judged.error = Some("repetition, detector tail_loop: the text ends in a loop".into());
    r.judged.repetition = Some(repetition::analyze(
        &"Paris! ".repeat(40),
        &repetition::Thresholds::default(),
    ));
    let detector = r
        .judged
        .repetition
        .as_ref()
        .and_then(|x| x.decided())
        .map(|f| f.detector())
        .unwrap();
    assert_eq!(detector.as_str(), "tail_loop");
    h.record(&Run::from(&r));
    // A line logged before content failures carried a sentence still names the detector.
    r.id.started_at = ts("2025-03-10T11:01:00Z");
    r.judged.error = None;
    let line: Run = serde_json::from_str(&r.to_json_line()).unwrap();
    h.record(&line);
    let s = &h.snapshot(ts("2025-03-10T11:02:00Z"))[0];
    let f = &s.failures;
    assert_eq!(f[0].error, "repetition, detector tail_loop");
    assert_eq!(
        f[1].error,
        "repetition, detector tail_loop: the text ends in a loop"
    );
    for f in f {
        assert_eq!(f.failed_checks, ["repetition", "too_long"]);
        assert_eq!(f.detector.as_deref(), Some("tail_loop"));
    }
    let v = serde_json::to_value(&f[0]).unwrap();
    assert_eq!(v["detector"], "tail_loop");
    assert_eq!(v["failed_checks"][1], "too_long");
}

#[test]
fn pairs_that_leave_are_dropped_and_unknown_ones_ignored() {
    let h = history();
    let mut other = run("2025-03-10T11:00:00Z", true, None);
    other.probe = "q".into();
    h.record(&other);
    assert_eq!(h.snapshot(ts("2025-03-10T11:01:00Z")).len(), 1);
    h.retain_pairs(&[("q".into(), "t".into())]);
    let s = h.snapshot(ts("2025-03-10T11:01:00Z"));
    assert_eq!(
        (s.len(), s[0].probe.as_str(), s[0].last_run),
        (1, "q", None)
    );
}

#[test]
fn a_pair_history_stays_within_its_stated_size() {
    // docs/status-page.md states about 6.5 KiB a pair; the fixed part is what the rings take.
    let fixed = std::mem::size_of::<PairHistory>();
    assert!(fixed <= 6700, "{fixed} bytes");
}

#[test]
fn days_roll_up_runs_and_figures_for_ninety_days() {
    let h = history();
    let now = ts("2025-03-10T12:00:00Z");
    // 100 days ago (beyond the ring), 89 days ago (its first day), and today.
    let mut old = run("2024-11-30T10:00:00Z", false, Some(10.0));
    h.record(&old);
    old.started_at = ts("2024-12-11T10:00:00Z");
    h.record(&old);
    for (i, ttft) in (1..=20).map(|i| (i, f64::from(i) * 10.0)) {
        let mut r = run(&format!("2025-03-10T11:{:02}:00Z", i), i != 7, Some(ttft));
        r.tokens_per_second = Some(f64::from(i));
        h.record(&r);
    }
    let mut m = run("2025-03-10T11:30:00Z", false, None);
    m.maintenance = true;
    h.record(&m);
    let d = h.days_target("t", now).remove(0);
    assert_eq!(d.days.len(), DAYS);
    assert_eq!(d.start, ts("2024-12-11T00:00:00Z"));
    assert_eq!((d.days[0].tally.runs, d.days[0].tally.failed), (1, 1));
    let today = d.days[DAYS - 1];
    let t = today.tally;
    assert_eq!((t.runs, t.failed, t.maintenance), (20, 1, 1));
    assert_eq!(t.uptime(), Some(0.95));
    // Nearest rank over 10, 20, ... 200 ms: p50 the 10th, p95 the 19th.
    assert_eq!(today.ttft_p50_ms, Some(100.0));
    assert_eq!(today.ttft_p95_ms, Some(190.0));
    assert_eq!(today.tokens_per_second_p50, Some(10.0));
    assert_eq!(d.days[50], Day::default());
    assert!(h.days_target("nope", now).is_empty());
}

#[test]
fn the_last_runs_keep_their_own_figures_oldest_first() {
    let h = history();
    let mut first = run("2025-03-10T10:59:00Z", true, Some(5.0));
    first.warmup = true;
    h.record(&first);
    let s = h.snapshot(ts("2025-03-10T11:00:00Z")).remove(0);
    // A warm-up's TTFT stays out, as everywhere in the history; its decode speed counts.
    assert_eq!(s.recent_ttft_ms, vec![None]);
    assert_eq!(s.recent_tokens_per_second, vec![Some(50.0)]);
    for i in 1..=41 {
        let ok = i % 10 != 0;
        let mut r = run(
            &format!("2025-03-10T11:{i:02}:00Z"),
            ok,
            ok.then(|| f64::from(i) * 10.0),
        );
        r.tokens_per_second = ok.then(|| f64::from(i));
        h.record(&r);
    }
    let s = h.snapshot(ts("2025-03-10T12:00:00Z")).remove(0);
    // Runs 10 to 41: run 10 failed, 41 is the newest.
    assert_eq!(s.recent_ttft_ms.len(), RECENT_FIGURES);
    assert_eq!(s.recent_tokens_per_second.len(), RECENT_FIGURES);
    let near = |v: Option<f32>, want: f32| v.is_some_and(|v| (v - want).abs() < 0.1);
    assert_eq!(s.recent_ttft_ms[0], None);
    assert!(near(s.recent_ttft_ms[1], 110.0), "{:?}", s.recent_ttft_ms);
    assert!(near(s.recent_ttft_ms[31], 410.0), "{:?}", s.recent_ttft_ms);
    assert_eq!(s.recent_ttft_ms[20], None, "run 30 failed");
    assert!(near(s.recent_tokens_per_second[31], 41.0));
}

#[test]
fn a_saved_history_restores_to_the_same_page_and_goes_on_alike() {
    let (a, b) = (history(), history());
    let start = ts("2026-03-01T00:00:00Z").as_second();
    let mut runs = Vec::new();
    // Ten days, every 7 minutes, a failure every 13th run; the last run just landed.
    for i in 0..(10 * 24 * 60 / 7) {
        let at = Timestamp::from_second(start + 420 * i).unwrap().to_string();
        let mut r = run(&at, i % 13 != 0, Some(40.0 + (i % 30) as f64));
        r.maintenance = i % 51 == 0;
        runs.push(r);
    }
    let mut touched = Vec::new();
    for r in &runs {
        touched.push(a.record_saved(r).unwrap());
    }
    let saved = a.saved();
    assert_eq!(saved.len(), 1);
    b.restore(&saved[0]);
    let now = runs.last().unwrap().started_at + jiff::SignedDuration::from_mins(3);
    let json = |h: &StatusHistory| {
        let s = serde_json::to_string(&h.snapshot(now)).unwrap();
        let d = h.days_target("t", now);
        (s, format!("{:?}", d[0].days))
    };
    assert_eq!(json(&a), json(&b));
    // A run's change carries its slots as they are now, and the tail whole.
    let last = touched.last().unwrap();
    assert_eq!(
        (last.fine.len(), last.coarse.len(), last.days.len()),
        (1, 1, 1)
    );
    assert_eq!(last.tail, saved[0].tail);
    assert_eq!(saved[0].fine.last(), last.fine.last());
    // The restored history takes the next run as the saved one does.
    let next = run(
        &(now + jiff::SignedDuration::from_mins(1)).to_string(),
        false,
        Some(99.0),
    );
    a.record(&next);
    b.record(&next);
    let later = now + jiff::SignedDuration::from_mins(2);
    assert_eq!(
        serde_json::to_string(&a.snapshot(later)).unwrap(),
        serde_json::to_string(&b.snapshot(later)).unwrap()
    );
    assert_eq!(a.last_runs(), b.last_runs());
}

#[test]
fn a_rotated_file_that_ends_an_hour_before_the_oldest_run_wanted_is_left_unread() {
    let tmp = tempfile::tempdir().unwrap();
    let settings = ResultsLogSettings {
        path: tmp.path().join("results.jsonl"),
        max_bytes: 1 << 20,
        keep: 3,
    };
    let line = |at: &str| {
        let mut r = ProbeResult::example();
        (r.id.probe, r.id.target) = ("p".into(), "t".into());
        r.id.started_at = ts(at);
        r.to_json_line()
    };
    // The rotated file has a line that does not read: counted only when the file is read.
    let old = format!(
        "{}\nnot json\n{}\n",
        line("2025-03-01T00:00:00Z"),
        line("2025-03-01T01:00:00Z")
    );
    std::fs::write(tmp.path().join("results.jsonl.1"), old).unwrap();
    std::fs::write(
        &settings.path,
        format!("{}\n", line("2025-03-10T00:00:00Z")),
    )
    .unwrap();
    let h = history();
    assert_eq!(
        replay(&settings, ts("2025-03-05T00:00:00Z"), |r| h.record(r)),
        (1, 0)
    );
    // Within the hour's margin of its last run, the file is read.
    assert_eq!(
        replay(&settings, ts("2025-03-01T01:30:00Z"), |r| h.record(r)),
        (1, 1)
    );
    assert_eq!(
        replay(&settings, ts("2025-02-01T00:00:00Z"), |r| h.record(r)),
        (3, 1)
    );
}
