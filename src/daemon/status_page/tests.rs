//! Tests of the status page and badge rendering: hostile text stays text, the page needs
//! nothing from outside, and numbers read as the report says.

use super::*;
use crate::daemon::status::ProbeStatus;
use crate::maintenance::Window;
use crate::sinks::status_history::{Run, StatusHistory};

const HOSTILE: &str = "</td><script>alert(1)</script><img src=x onerror=\"alert(2)\"> & 'quoted'";

struct Report {
    head: Head,
    targets: Vec<TargetStatus>,
}

fn render_report(r: Report) -> String {
    render(&r.head, r.targets.into_iter(), &[])
}

fn report() -> Report {
    let h = StatusHistory::default();
    h.retain_pairs(&[("capital".into(), "chat".into())]);
    let at: Timestamp = "2025-03-10T11:50:00Z".parse().unwrap();
    for (i, ok) in [true, true, false, true].iter().enumerate() {
        h.record(&Run {
            probe: "capital".into(),
            target: "chat".into(),
            started_at: at + jiff::SignedDuration::from_secs(30 * i as i64),
            outcome: if *ok { "ok" } else { "http_error" }.into(),
            success: *ok,
            maintenance: false,
            warmup: false,
            cache_phase: None,
            ttft_ms: Some(100.0 * (i + 1) as f64),
            tokens_per_second: Some(42.0),
            http_status: Some(if *ok { 200 } else { 502 }),
            request_id: "req-\"1\"".into(),
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
            error: (!ok).then(|| HOSTILE.into()),
            failed_checks: vec![],
            repetition: None,
        });
    }
    let snap = h
        .snapshot("2025-03-10T11:54:00Z".parse().unwrap())
        .remove(0);
    Report {
        head: Head {
            agent: "canary <eu>".into(),
            generated_at: "2025-03-10T11:54:00Z".parse().unwrap(),
            pairs: 1,
        },
        targets: vec![TargetStatus {
            target: "chat".into(),
            model: "m".into(),
            state: State::Maintenance,
            maintenance: Some(Window {
                until: "2025-03-10T12:30:00Z".parse().unwrap(),
                reason: Some("<b>deploy</b>".into()),
                announced: true,
            }),
            probes: vec![ProbeStatus {
                state: State::Degraded,
                uptime_1h: snap.last_1h.uptime(),
                uptime_24h: snap.last_24h.uptime(),
                uptime_7d: snap.last_7d.uptime(),
                history: snap,
            }],
            days: Default::default(),
        }],
    }
}

#[test]
fn hostile_text_is_escaped_everywhere() {
    let page = render_report(report());
    assert!(!page.contains("<script"), "no script, hostile or ours");
    assert!(!page.contains("<img"));
    assert!(!page.contains("<b>"));
    assert!(page.contains(
        "&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;alert(2)&quot;&gt; &amp; &#39;quoted&#39;"
    ));
    assert!(page.contains("llm-canary status: canary &lt;eu&gt;"));
    assert!(page.contains("req-&quot;1&quot;"));
    assert!(page
        .contains("maintenance until 2025-03-10T12:30:00Z: &lt;b&gt;deploy&lt;/b&gt; (announced)"));
}

#[test]
fn the_page_needs_nothing_from_outside_and_refreshes_itself() {
    let page = render_report(report());
    assert!(page.contains("<meta http-equiv=\"refresh\" content=\"30\">"));
    for outside in ["src=\"http", "href=\"http", "<link", "@import", "url("] {
        assert!(!page.contains(outside), "{outside}");
    }
}

#[test]
fn the_page_shows_states_uptime_figures_and_failures() {
    let page = render_report(report());
    assert!(page.contains("data-target=\"chat\" data-probe=\"capital\" data-state=\"degraded\""));
    assert!(page.contains("data-target=\"chat\" data-state=\"maintenance\""));
    assert!(page.contains("<small class=\"recent\">1 of last 4 failed</small>"));
    // The history began 4 minutes before: the hour's figure says so.
    assert!(page.contains(
        "data-window=\"1h\" title=\"4 runs, 1 failed, 0 in maintenance\">75.00%<br><small class=\"since\">since 11:50 UTC, 4 min</small></td>"
    ));
    // The slot's p50 of 100, 200, 300, 400 ms is 200 ms; its p95, 400 ms.
    assert!(page.contains(
        "p50 <span class=\"ttft-p50\">200 ms</span> · p95 <span class=\"ttft-p95\">400 ms</span>"
    ));
    assert!(page.contains("<span class=\"tps\">42.0</span> tokens/s"));
    assert!(
        page.contains("<td class=\"f-outcome\">http_error</td><td class=\"f-http num\">502</td>")
    );
    assert!(page.contains("<code class=\"f-trace-id\">4bf92f3577b34da6a3ce929d0e0e4736</code>"));
    for (name, _) in RULES {
        assert!(page.contains(&format!("<li><span class=\"state {name}\">{name}</span>")));
    }
}

#[test]
fn numbers_read_as_people_write_them() {
    assert_eq!(ms(0.84), "0.8 ms");
    assert_eq!(ms(312.4), "312 ms");
    assert_eq!(ms(1250.0), "1.25 s");
    assert_eq!(percent(Some(0.99934)), "99.93%");
    assert_eq!(percent(None), "–");
    // Times are RFC 3339 in UTC, to the second (cut, so a time names its 5-minute slot).
    assert_eq!(
        when("2025-03-10T11:54:59.999Z".parse().unwrap()),
        "2025-03-10T11:54:59Z"
    );
}

#[test]
fn a_badge_names_the_target_and_its_state() {
    let mut r = report();
    let t = &mut r.targets[0];
    let svg = badge(t);
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.contains(">maintenance</text>"));
    t.state = State::Degraded;
    t.maintenance = None;
    assert!(badge(t).contains("aria-label=\"chat: degraded 75.00%\""));
    t.target = "<x>".into();
    assert!(badge(t).contains("&lt;x&gt;") && !badge(t).contains("<x>"));
}

#[test]
fn a_content_failure_shows_its_sentence_and_every_failed_check() {
    let mut r = report();
    let h = &mut r.targets[0].probes[0].history;
    let mut f = h.failures[0].clone();
    f.outcome = "repetition".into();
    f.error = "repetition, detector tail_loop: the text ends in a loop of 3 units repeated 9 times"
        .into();
    f.failed_checks = vec!["repetition".into(), "too_long".into()];
    f.detector = Some("tail_loop".into());
    f.started_at += jiff::SignedDuration::from_secs(1);
    h.failures.insert(0, f);
    let page = render_report(r);
    assert!(
        page.contains("<td class=\"f-outcome\">repetition</td><td class=\"f-http num\">502</td>")
    );
    assert!(page.contains(
        "<td class=\"err\"><span class=\"f-error\">repetition, detector tail_loop: the text ends in a loop of 3 units repeated 9 times</span>\
         <br><small class=\"f-checks\">failed checks: repetition, too_long</small></td>"
    ));
    // One failed check is the outcome already: not said twice.
    assert_eq!(page.matches("class=\"f-checks\"").count(), 1);
}

/// A history that began 6 minutes before the page: every window that reaches further back says
/// since when its figure counts, and the day strip says the same instead of "90 days".
#[test]
fn windows_longer_than_the_history_say_since_when() {
    let h = StatusHistory::default();
    h.retain_pairs(&[("capital".into(), "chat".into())]);
    let first: Timestamp = "2025-03-10T19:02:00Z".parse().unwrap();
    for i in 0..4 {
        h.record(&run_at(first + jiff::SignedDuration::from_secs(90 * i)));
    }
    let now: Timestamp = "2025-03-10T19:08:00Z".parse().unwrap();
    let page = page_of(&h, now);
    // The history begins at its first 5-minute slot: 19:00, 8 minutes before.
    assert_eq!(
        page.matches("since 19:00 UTC, 8 min").count(),
        4,
        "1 h, 24 h, 7 d and the day strip: {page}"
    );
    assert!(!page.contains("90 days: "));

    // A history that began 3 days before: the pair's windows are full, the strip names its
    // first day.
    let h = StatusHistory::default();
    h.retain_pairs(&[("capital".into(), "chat".into())]);
    let old: Timestamp = "2025-03-07T10:00:00Z".parse().unwrap();
    h.record(&run_at(old));
    for i in 0..4 {
        h.record(&run_at(first + jiff::SignedDuration::from_secs(90 * i)));
    }
    let page = page_of(&h, now);
    assert!(page.contains("since 2025-03-07: "), "{page}");
    assert!(
        page.contains("class=\"since\">since 2025-03-07 10:00 UTC, 3 d"),
        "the week: {page}"
    );
    assert_eq!(
        page.matches("class=\"since\"").count(),
        1,
        "1 h and 24 h are full"
    );
}

fn run_at(t: Timestamp) -> Run {
    Run {
        probe: "capital".into(),
        target: "chat".into(),
        started_at: t,
        outcome: "ok".into(),
        success: true,
        maintenance: false,
        warmup: false,
        cache_phase: None,
        ttft_ms: Some(100.0),
        tokens_per_second: Some(42.0),
        http_status: Some(200),
        request_id: "r".into(),
        trace_id: String::new(),
        error: None,
        failed_checks: vec![],
        repetition: None,
    }
}

fn page_of(h: &StatusHistory, now: Timestamp) -> String {
    let snap = h.snapshot(now).remove(0);
    let days = crate::daemon::history::pool(&h.days_target("chat", now));
    let t = TargetStatus {
        target: "chat".into(),
        model: "m".into(),
        state: State::Up,
        maintenance: None,
        probes: vec![ProbeStatus {
            state: State::Up,
            uptime_1h: snap.last_1h.uptime(),
            uptime_24h: snap.last_24h.uptime(),
            uptime_7d: snap.last_7d.uptime(),
            history: snap,
        }],
        days,
    };
    let head = Head {
        agent: "a".into(),
        generated_at: now,
        pairs: 1,
    };
    render(&head, std::iter::once(t), &[])
}
