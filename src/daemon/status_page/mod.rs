//! The status page (`GET /`) and the badges (`GET /badge/<target>.svg`), rendered on the server
//! from the targets' status, one target at a time: one self-contained HTML document (inline CSS and SVG, no script, no
//! external asset, so it works on an air-gapped instance) that refreshes itself.
//!
//! Every text that did not come from this file is escaped, error messages above all: they quote
//! what a server sent, and a hostile server may send markup.

use std::fmt::Write;

use jiff::Timestamp;

use super::history::TargetDays;
use super::status::{Head, ProbeStatus, State, TargetStatus, RULES, UPTIME_RULE};
use crate::sinks::incidents::Incident;
use crate::sinks::status_history::{Failure, Series, Tally, FAILURES_KEPT};

/// How often the page reloads itself, in seconds.
pub(crate) const REFRESH_SECONDS: u32 = 30;
/// Failures listed at the bottom, newest first, across every pair.
const FAILURES_LISTED: usize = 20;
/// Incidents listed, newest first, across every target.
const INCIDENTS_LISTED: usize = 20;

/// `s` escaped for HTML text and quoted attribute values.
pub(crate) fn esc(out: &mut String, s: &str) {
    // Writing into a String cannot fail.
    let _ = pulldown_cmark_escape::escape_html(&mut *out, s);
}

fn color(s: State) -> &'static str {
    match s {
        State::Up => "#1a7f37",
        State::Degraded => "#bf8700",
        State::Down => "#cf222e",
        State::Maintenance => "#0969da",
        State::Pending => "#6e7781",
    }
}

/// How long an incident lasted (so far), as people write it: `1h 5m`.
pub(crate) fn lasted(i: &Incident) -> String {
    format!("{:#}", jiff::SignedDuration::from_secs(i.duration_seconds))
}

/// A time in RFC 3339 to the second (`2025-03-10T11:54:00Z`), cut (not rounded) so it names
/// the 5-minute slot it falls in.
pub fn when(t: Timestamp) -> String {
    let second = jiff::TimestampRound::new()
        .smallest(jiff::Unit::Second)
        .mode(jiff::RoundMode::Trunc);
    t.round(second).unwrap_or(t).to_string()
}

/// Milliseconds as people read them: `0.8 ms`, `312 ms`, `1.25 s`.
pub(crate) fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

/// An uptime ratio as a percentage with two decimals, or a dash without runs.
pub fn percent(u: Option<f64>) -> String {
    u.map_or_else(|| "–".into(), |u| format!("{:.2}%", u * 100.0))
}

pub(crate) const STYLE: &str = "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:0 24px 24px;color:#1f2328;background:#fff}\
h1{font-size:20px;margin:16px 0 2px}h2{font-size:16px;margin:24px 0 8px}\
.meta{color:#59636e;margin:0 0 12px}.meta a{color:#0969da}\
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #d1d9e0;vertical-align:middle}\
thead th{font-size:12px;color:#59636e;font-weight:600;border-bottom:2px solid #d1d9e0}\
tr.target th{background:#f6f8fa;font-size:15px;padding-top:8px}\
.state{display:inline-block;min-width:86px;text-align:center;border-radius:10px;color:#fff;font-size:12px;font-weight:600;padding:1px 8px}\
.up{background:#1a7f37}.degraded{background:#bf8700}.down{background:#cf222e}.maintenance{background:#0969da}.pending{background:#6e7781}\
small,.sub{color:#59636e;font-size:12px}.num{font-variant-numeric:tabular-nums;white-space:nowrap}\
svg.chart{display:block;width:200px;height:36px;background:#f6f8fa}svg.week{display:block;width:168px;height:10px}\
.days-strip{float:right;font-weight:400}svg.days{display:inline-block;vertical-align:middle;width:360px;height:14px;margin-right:6px}a.badge{text-decoration:none}\
td.err{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:12px;word-break:break-word;overflow-wrap:anywhere;max-width:420px}\
code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:12px;word-break:break-all}\
.legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px;vertical-align:middle}\
ul.rules{margin:0;padding-left:20px}";

/// The whole page, taking the targets one at a time, with the incidents (newest first).
pub(crate) fn render(
    head: &Head,
    targets: impl Iterator<Item = TargetStatus>,
    incidents: &[Incident],
) -> String {
    // About 6 KiB a pair with a full day: sized once, so the buffer is not copied as it grows.
    let mut o = String::with_capacity(16 * 1024 + head.pairs * 6 * 1024);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>llm-canary status: "
    );
    esc(&mut o, &head.agent);
    let _ = write!(
        o,
        "</title><style>{STYLE}</style></head><body>\n<h1>llm-canary status: "
    );
    esc(&mut o, &head.agent);
    let _ = writeln!(
        o,
        "</h1><p class=\"meta\">Generated <span id=\"generated\">{}</span>; refreshes every {REFRESH_SECONDS} s · \
         <a href=\"/api/v1/status\">JSON</a> · <a href=\"#incidents\">incidents</a> · \
         <a href=\"/feed.atom\">Atom feed</a> · <a href=\"/metrics\">metrics</a></p>",
        when(head.generated_at)
    );
    // The summary counts states the table is about to show: it goes in here afterwards.
    let summary_at = o.len();
    o.push_str(
        "<table class=\"pairs\"><thead><tr><th>Probe</th><th>State</th>\
         <th>Uptime&nbsp;1&nbsp;h</th><th>24&nbsp;h</th><th>7&nbsp;d</th><th>Last 7 days, hourly</th>\
         <th>TTFT p50 / p95, last 24 h</th><th>Decode speed, last 24 h</th><th>Last run</th></tr></thead><tbody>\n",
    );
    let mut states = Vec::new();
    let mut failed: Vec<(String, String, Failure)> = Vec::new();
    for t in targets {
        target_rows(
            &mut o,
            &t,
            incidents.iter().find(|i| i.target == t.target),
            head.generated_at,
        );
        states.push(t.state);
        for p in t.probes {
            let h = p.history;
            failed.extend(
                h.failures
                    .into_iter()
                    .map(|f| (h.target.clone(), h.probe.clone(), f)),
            );
        }
    }
    o.push_str("</tbody></table>\n<p class=\"legend sub\">Charts: 5-minute slots;\
        <span style=\"background:#0969da\"></span>TTFT p50<span style=\"background:#bf3989\"></span>TTFT p95\
        <span style=\"background:#1a7f37\"></span>decode speed. Week strip:\
        <span style=\"background:#1a7f37\"></span>all ok<span style=\"background:#bf8700\"></span>some failed\
        <span style=\"background:#cf222e\"></span>all failed<span style=\"background:#0969da\"></span>maintenance\
        <span style=\"background:#d1d9e0\"></span>no runs. The bars beside each target: its last 90 days (UTC), \
        coloured the same way, one bar a day; hover for the day's uptime and TTFT p95.</p>\n");
    incident_list(&mut o, incidents);
    failures(&mut o, failed);
    o.push_str("<h2>How states are decided</h2><ul class=\"rules\">");
    for (name, rule) in RULES {
        let _ = write!(
            o,
            "<li><span class=\"state {name}\">{name}</span> {rule}</li>"
        );
    }
    let _ = writeln!(o, "</ul><p class=\"sub\">{UPTIME_RULE}</p></body></html>");
    o.insert_str(summary_at, &summary(&states));
    o
}

pub(crate) fn summary(states: &[State]) -> String {
    let mut o = String::from("<p class=\"summary\">");
    for s in [
        State::Up,
        State::Degraded,
        State::Down,
        State::Maintenance,
        State::Pending,
    ] {
        let n = states.iter().filter(|t| **t == s).count();
        if n > 0 {
            let _ = write!(o, "<span class=\"state {0}\">{n} {0}</span> ", s.as_str());
        }
    }
    o.push_str("<small>targets</small></p>\n");
    o
}

fn target_rows(o: &mut String, t: &TargetStatus, latest: Option<&Incident>, now: Timestamp) {
    o.push_str("<tr class=\"target\" data-target=\"");
    esc(o, &t.target);
    let _ = write!(
        o,
        "\" data-state=\"{0}\"><th colspan=\"9\">",
        t.state.as_str()
    );
    esc(o, &t.target);
    o.push_str(" <small>");
    esc(o, &t.model);
    // The badge leads to the target's latest incident.
    o.push_str("</small> <a class=\"badge\" href=\"#");
    match latest {
        Some(i) => {
            o.push_str("incident-");
            esc(o, &i.id);
        }
        None => o.push_str("incidents"),
    }
    let _ = write!(
        o,
        "\"><span class=\"state {0}\">{0}</span></a>",
        t.state.as_str()
    );
    if let Some(w) = &t.maintenance {
        let _ = write!(
            o,
            " <small class=\"window\">maintenance until {}",
            when(w.until)
        );
        if let Some(reason) = &w.reason {
            o.push_str(": ");
            esc(o, reason);
        }
        o.push_str(if w.announced { " (announced)" } else { "" });
        o.push_str("</small>");
    }
    let since = t
        .probes
        .iter()
        .filter_map(|p| p.history.history_since)
        .min();
    day_bars(o, &t.days, since, now);
    o.push_str("</th></tr>\n");
    for p in &t.probes {
        pair_row(o, p, now);
    }
}

/// "since 19:00 UTC, 6 min": where a window reaches back before the history, the figure covers
/// only the time with data, and says so.
fn since_note(since: Timestamp, now: Timestamp) -> String {
    let age = now.duration_since(since).as_secs().max(0);
    let span = match age {
        a if a < 3600 => format!("{} min", a / 60),
        a if a < 2 * 86_400 => format!("{} h", a / 3600),
        a => format!("{} d", a / 86_400),
    };
    let utc = since.to_zoned(jiff::tz::TimeZone::UTC);
    let at = if age < 86_400 {
        utc.strftime("%H:%M").to_string()
    } else {
        utc.strftime("%Y-%m-%d %H:%M").to_string()
    };
    format!("since {at} UTC, {span}")
}

fn pair_row(o: &mut String, p: &ProbeStatus, now: Timestamp) {
    let h = &p.history;
    o.push_str("<tr class=\"pair\" data-target=\"");
    esc(o, &h.target);
    o.push_str("\" data-probe=\"");
    esc(o, &h.probe);
    let state = p.state.as_str();
    let _ = write!(o, "\" data-state=\"{state}\"><td>");
    esc(o, &h.probe);
    let _ = write!(
        o,
        "</td><td><span class=\"state {state}\">{state}</span><br><small class=\"recent\">{} of last {} failed</small></td>",
        h.recent_failed, h.recent_runs
    );
    // Each window's first slot: uptime is counted in whole slots.
    let hour_start = h.day.start
        + jiff::SignedDuration::from_secs(h.day.step_seconds * (h.day.len() as i64 - 12).max(0));
    for (window, tally, u, start) in [
        ("1h", h.last_1h, p.uptime_1h, hour_start),
        ("24h", h.last_24h, p.uptime_24h, h.day.start),
        ("7d", h.last_7d, p.uptime_7d, h.week.start),
    ] {
        let _ = write!(
            o,
            "<td class=\"uptime num\" data-window=\"{window}\" title=\"{} runs, {} failed, {} in maintenance\">{}",
            tally.runs,
            tally.failed,
            tally.maintenance,
            percent(u)
        );
        if let Some(since) = h.history_since.filter(|s| *s > start) {
            let _ = write!(
                o,
                "<br><small class=\"since\">{}</small>",
                since_note(since, now)
            );
        }
        o.push_str("</td>");
    }
    o.push_str("<td>");
    week_strip(o, &h.week);
    o.push_str("</td><td>");
    let d = &h.day;
    chart(
        o,
        &[(&d.ttft_p50_ms, "#0969da"), (&d.ttft_p95_ms, "#bf3989")],
    );
    let latest = (0..d.len()).rev().find(|&i| d.ttft_p50_ms[i].is_some());
    match latest {
        Some(i) => {
            let _ = write!(
                o,
                "<small class=\"num\">latest: p50 <span class=\"ttft-p50\">{}</span> · p95 <span class=\"ttft-p95\">{}</span></small>",
                d.ttft_p50_ms[i].map_or_else(String::new, |v| ms(f64::from(v))),
                d.ttft_p95_ms[i].map_or_else(String::new, |v| ms(f64::from(v)))
            );
        }
        None => o.push_str("<small>no TTFT yet</small>"),
    }
    o.push_str("</td><td>");
    chart(o, &[(&d.tokens_per_second, "#1a7f37")]);
    match (0..d.len()).rev().find_map(|i| d.tokens_per_second[i]) {
        Some(v) => {
            let _ = write!(
                o,
                "<small class=\"num\">latest: <span class=\"tps\">{v:.1}</span> tokens/s</small>"
            );
        }
        None => o.push_str("<small>no decode speed yet</small>"),
    }
    o.push_str("</td><td class=\"num\">");
    match (&h.last_run, &h.last_outcome) {
        (Some(t), Some(outcome)) => {
            // Time first, the date below it: the column stays narrow.
            let full = when(*t);
            let (date, time) = full.split_once('T').unwrap_or(("", &full));
            let _ = write!(
                o,
                "<span class=\"last-run\" title=\"{full}\">{time}</span><br><small>{date}<br><span class=\"last-outcome\">"
            );
            esc(o, outcome);
            o.push_str("</span></small>");
        }
        _ => o.push_str("<small>no run yet</small>"),
    }
    o.push_str("</td></tr>\n");
}

/// A step chart of one or more series over the day's slots (one x unit a slot), scaled to the
/// largest value, with that value as the chart's title.
fn chart(o: &mut String, lines: &[(&[Option<f32>], &str)]) {
    let n = lines.first().map_or(0, |l| l.0.len());
    let max = lines
        .iter()
        .flat_map(|l| l.0.iter().flatten())
        .fold(0.0_f32, |a, &b| a.max(b));
    let _ = write!(
        o,
        "<svg class=\"chart\" viewBox=\"0 0 {n} 36\" preserveAspectRatio=\"none\" role=\"img\">"
    );
    if max > 0.0 {
        let _ = write!(o, "<title>max {max:.1}</title>");
    }
    for (values, stroke) in lines {
        // A step per slot: `M x y h1` starts a run, `V y h1` continues it (short: the page
        // holds 100 pairs).
        let mut d = String::new();
        let mut prev: Option<usize> = None;
        for (i, v) in values.iter().enumerate() {
            let Some(v) = v else {
                prev = None;
                continue;
            };
            let y = (34.0 - 32.0 * v / max).round();
            if prev == Some(i.wrapping_sub(1)) {
                let _ = write!(d, "V{y}h1");
            } else {
                let _ = write!(d, "M{i} {y}h1");
            }
            prev = Some(i);
        }
        if !d.is_empty() {
            let _ = write!(
                o,
                "<path d=\"{d}\" fill=\"none\" stroke=\"{stroke}\" stroke-width=\"2\" stroke-linecap=\"square\" vector-effect=\"non-scaling-stroke\"/>"
            );
        }
    }
    o.push_str("</svg>");
}

/// A cell's colour: blue for maintenance only, grey without runs, else by how many failed.
fn cell_colour(t: Tally) -> &'static str {
    match t {
        t if t.runs == 0 && t.maintenance > 0 => "#0969da",
        t if t.runs == 0 => "#d1d9e0",
        t if t.failed == 0 => "#1a7f37",
        t if t.failed == t.runs => "#cf222e",
        _ => "#bf8700",
    }
}

/// The target's days as bars (3 units wide, 1 apart), each titled with its figures, and the
/// uptime over all of them.
fn day_bars(o: &mut String, days: &TargetDays, since: Option<Timestamp>, now: Timestamp) {
    if days.days.is_empty() {
        return;
    }
    let _ = write!(
        o,
        "<span class=\"days-strip\"><svg class=\"days\" viewBox=\"0 0 {} 14\" preserveAspectRatio=\"none\" role=\"img\">",
        4 * days.days.len()
    );
    for (i, d) in days.days.iter().enumerate() {
        let t = d.tally;
        let _ = write!(
            o,
            "<rect class=\"day\" data-date=\"{date}\" data-runs=\"{}\" data-failed=\"{}\" x=\"{}\" width=\"3\" height=\"14\" fill=\"{}\"><title>{date}: {} of {} runs",
            t.runs,
            t.failed,
            4 * i,
            cell_colour(t),
            percent(t.uptime()),
            t.runs,
            date = days.date(i),
        );
        if let Some(p95) = d.ttft_p95_ms {
            let _ = write!(o, ", TTFT p95 {}", ms(f64::from(p95)));
        }
        o.push_str("</title></rect>");
    }
    let all: Tally = days.days.iter().map(|d| d.tally).sum();
    let has_data = |t: Tally| t.runs > 0 || t.maintenance > 0;
    // The days before the first with runs are no data, not downtime: the label says so.
    let label = match days.days.iter().position(|d| has_data(d.tally)) {
        Some(0) | None => format!("{} days", days.days.len()),
        Some(i) if i + 1 == days.days.len() => match since {
            Some(s) => since_note(s, now),
            None => format!("since {}", days.date(i)),
        },
        Some(i) => format!("since {}", days.date(i)),
    };
    let _ = write!(
        o,
        "</svg><small class=\"uptime-90d\">{label}: {}</small></span>",
        percent(all.uptime())
    );
}

/// The week in hourly cells, one path per colour.
fn week_strip(o: &mut String, week: &Series) {
    let _ = write!(
        o,
        "<svg class=\"week\" viewBox=\"0 0 {} 10\" preserveAspectRatio=\"none\" role=\"img\">",
        week.len()
    );
    // One rectangle per run of equal cells, one path per colour.
    let cells: Vec<&str> = (0..week.len())
        .map(|i| cell_colour(week.tally(i)))
        .collect();
    for fill in ["#d1d9e0", "#1a7f37", "#bf8700", "#cf222e", "#0969da"] {
        let mut d = String::new();
        let mut i = 0;
        while i < cells.len() {
            let run = cells[i..].iter().take_while(|c| **c == cells[i]).count();
            if cells[i] == fill {
                let _ = write!(d, "M{i} 0h{run}v10h-{run}z");
            }
            i += run;
        }
        if !d.is_empty() {
            let _ = write!(o, "<path d=\"{d}\" fill=\"{fill}\"/>");
        }
    }
    o.push_str("</svg>");
}

fn failures(o: &mut String, mut all: Vec<(String, String, Failure)>) {
    // Newest first; runs that started at the same instant by target, then probe.
    all.sort_by(|a, b| {
        (b.2.started_at.cmp(&a.2.started_at))
            .then(a.0.cmp(&b.0))
            .then(a.1.cmp(&b.1))
    });
    let _ = write!(
        o,
        "<h2>Latest failures</h2><p class=\"sub\">The last {FAILURES_KEPT} failures of each probe and target, newest first (at most {FAILURES_LISTED}).</p>",
    );
    if all.is_empty() {
        o.push_str("<p class=\"none\">No failures recorded.</p>\n");
        return;
    }
    o.push_str("<table class=\"failures\"><thead><tr><th>Time</th><th>Target</th><th>Probe</th><th>Outcome</th><th>HTTP</th><th>Request id</th><th>Trace id</th><th>Error</th></tr></thead><tbody>\n");
    for (target, probe, f) in all.into_iter().take(FAILURES_LISTED) {
        let _ = write!(
            o,
            "<tr class=\"failure\"><td class=\"num\">{}",
            when(f.started_at)
        );
        if f.maintenance {
            o.push_str("<br><small>in maintenance</small>");
        }
        o.push_str("</td><td class=\"f-target\">");
        esc(o, &target);
        o.push_str("</td><td class=\"f-probe\">");
        esc(o, &probe);
        o.push_str("</td><td class=\"f-outcome\">");
        esc(o, &f.outcome);
        o.push_str("</td><td class=\"f-http num\">");
        if let Some(s) = f.http_status {
            let _ = write!(o, "{s}");
        }
        o.push_str("</td><td><code class=\"f-request-id\">");
        esc(o, &f.request_id);
        o.push_str("</code></td><td><code class=\"f-trace-id\">");
        esc(o, &f.trace_id);
        o.push_str("</code></td><td class=\"err\"><span class=\"f-error\">");
        esc(o, &f.error);
        o.push_str("</span>");
        if f.failed_checks.len() > 1 {
            o.push_str("<br><small class=\"f-checks\">failed checks: ");
            esc(o, &f.failed_checks.join(", "));
            o.push_str("</small>");
        }
        o.push_str("</td></tr>\n");
    }
    o.push_str("</tbody></table>\n");
}

fn incident_list(o: &mut String, incidents: &[Incident]) {
    let _ = write!(
        o,
        "<h2 id=\"incidents\">Incidents</h2><p class=\"sub\">A target's spells of degraded or down, by the rule below; \
         maintenance never opens one. Newest first (at most {INCIDENTS_LISTED}) · \
         <a href=\"/api/v1/incidents\">JSON</a> · <a href=\"/feed.atom\">Atom feed</a></p>"
    );
    if incidents.is_empty() {
        o.push_str("<p class=\"none\">No incidents recorded.</p>\n");
        return;
    }
    o.push_str("<table class=\"incidents\"><thead><tr><th>Target</th><th>State</th><th>Started</th><th>Ended</th><th>Duration</th><th>Failed runs</th><th>First error</th></tr></thead><tbody>\n");
    for i in incidents.iter().take(INCIDENTS_LISTED) {
        let state = i.state.as_str();
        o.push_str("<tr class=\"incident\" id=\"incident-");
        esc(o, &i.id);
        o.push_str("\" data-target=\"");
        esc(o, &i.target);
        let _ = write!(
            o,
            "\" data-state=\"{state}\" data-open=\"{}\"><td class=\"i-target\">",
            i.is_open()
        );
        esc(o, &i.target);
        let _ = write!(
            o,
            "</td><td><span class=\"state {state}\">{state}</span></td><td class=\"num i-start\">{}</td><td class=\"num i-end\">{}</td><td class=\"num i-duration\">{}{}</td><td class=\"i-outcomes\">",
            when(i.started_at),
            i.ended_at.map_or_else(|| "ongoing".to_string(), when),
            lasted(i),
            if i.is_open() { " so far" } else { "" },
        );
        let outcomes: Vec<String> = i
            .outcomes
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect();
        esc(o, &outcomes.join(", "));
        o.push_str("</td><td class=\"err i-error\">");
        esc(o, &i.first_error);
        o.push_str("</td></tr>\n");
    }
    o.push_str("</tbody></table>\n");
}

/// A shields-style badge: the target's name, and its state with its 24-hour uptime.
pub(crate) fn badge(t: &TargetStatus) -> String {
    let runs: Tally = t.probes.iter().map(|p| p.history.last_24h).sum();
    let right = match (t.state, runs.uptime()) {
        (State::Up | State::Degraded | State::Down, Some(u)) => {
            format!("{} {}", t.state.as_str(), percent(Some(u)))
        }
        (s, _) => s.as_str().to_string(),
    };
    // Verdana at 11 px averages about 7 px a character.
    let width = |s: &str| 10 + 7 * s.chars().count();
    let (lw, rw) = (width(&t.target), width(&right));
    let mut o = String::with_capacity(1024);
    let mut label = String::new();
    esc(&mut label, &format!("{}: {right}", t.target));
    let mut name = String::new();
    esc(&mut name, &t.target);
    let _ = write!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"20\" role=\"img\" aria-label=\"{label}\">\
         <title>{label}</title><rect width=\"{lw}\" height=\"20\" fill=\"#555\"/>\
         <rect x=\"{lw}\" width=\"{rw}\" height=\"20\" fill=\"{c}\"/>\
         <g fill=\"#fff\" text-anchor=\"middle\" font-family=\"Verdana,DejaVu Sans,sans-serif\" font-size=\"11\">\
         <text x=\"{lx}\" y=\"14\">{name}</text><text x=\"{rx}\" y=\"14\">{right}</text></g></svg>",
        w = lw + rw,
        c = color(t.state),
        lx = lw / 2,
        rx = lw + rw / 2,
    );
    o
}

#[cfg(test)]
mod tests;
