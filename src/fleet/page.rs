//! The fleet page (`GET /`): the single-agent status page's look (its style sheet, escaping
//! and summary), one self-contained HTML document that refreshes itself, with each target's
//! rows one per location; and the page that says the store cannot be read. Every text that
//! came from the store is escaped.

use std::fmt::Write;

use jiff::Timestamp;

use super::model::{Fleet, Location, Outage, Target, RULES};
use crate::daemon::status_page::{esc, ms, percent, summary, when, REFRESH_SECONDS, STYLE};

/// The page's own additions to the shared style sheet.
const FLEET_STYLE: &str = "td.loc{padding-left:20px}.silent{background:#8250df}\
tr.location[data-silent] td{background:#fbf7ff}\
p.quiet{border-left:4px solid #8250df;background:#fbf7ff;padding:6px 10px;margin:0 0 12px}\
p.outage{border-left:4px solid #cf222e;background:#fff5f5;padding:6px 10px;margin:0 0 12px}";

/// The head of every page: its title, the shared style sheet and the refresh.
fn head(o: &mut String, title: &str) {
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{title}</title><style>{STYLE}{FLEET_STYLE}</style></head><body>\n"
    );
}

/// A duration to the second, as people write it: `3m 10s`.
fn lasted(from: Timestamp, to: Timestamp) -> String {
    let secs = to.as_second().saturating_sub(from.as_second()).max(0);
    format!("{:#}", jiff::SignedDuration::from_secs(secs))
}

/// The page while the store cannot be read (served with a 503): what, since when, and that it
/// keeps trying.
pub(super) fn outage(o: &Outage, source: &str, now: Timestamp) -> String {
    let mut page = String::with_capacity(4096);
    head(&mut page, "llm-canary fleet status: store unreachable");
    let since = when(o.unavailable_since);
    let _ = write!(
        page,
        "<h1>llm-canary fleet status</h1><p class=\"meta\">Checked <span id=\"generated\">{}</span>; \
         refreshes every {REFRESH_SECONDS} s · <a href=\"/api/v1/fleet\">JSON</a></p>\n\
         <p class=\"outage\"><span class=\"state down\">store unreachable</span> \
         The store this page reads, <code>",
        when(now)
    );
    esc(&mut page, source);
    let _ = write!(
        page,
        "</code>, has failed every reading since <span id=\"unavailable-since\" class=\"num\">{since}</span> \
         (for {}). The targets' states are unknown here until it answers; this page reads it again at every refresh.</p>\n<p class=\"sub\">",
        lasted(o.unavailable_since, now)
    );
    esc(&mut page, &o.error);
    page.push_str("</p></body></html>\n");
    page
}

/// The whole page.
pub(super) fn render(f: &Fleet) -> String {
    let mut o = String::with_capacity(8 * 1024 + f.targets.len() * 2048);
    head(&mut o, "llm-canary fleet status");
    let _ = write!(
        o,
        "<h1>llm-canary fleet status</h1><p class=\"meta\">Generated <span id=\"generated\">{}</span> from ",
        when(f.generated_at)
    );
    esc(&mut o, &f.source);
    let _ = writeln!(
        o,
        "; refreshes every {REFRESH_SECONDS} s · <a href=\"/api/v1/fleet\">JSON</a> · <a href=\"#failures\">failures</a></p>"
    );
    let states: Vec<_> = f.targets.iter().map(|t| t.state).collect();
    o.push_str(&summary(&states));
    quiet(&mut o, f);
    o.push_str(
        "<table class=\"fleet\"><thead><tr><th>Location</th><th>State</th>\
         <th>Uptime&nbsp;24&nbsp;h</th><th>7&nbsp;d</th><th>90&nbsp;d</th>\
         <th>TTFT p95, last hour</th><th>Last run</th><th>Last success</th></tr></thead><tbody>\n",
    );
    if f.targets.is_empty() {
        o.push_str("<tr><td colspan=\"8\"><small>No agent with a <code>region</code> label has written runs to this store yet.</small></td></tr>\n");
    }
    for t in &f.targets {
        target_rows(&mut o, t);
    }
    o.push_str("</tbody></table>\n");
    failures(&mut o, &f.targets);
    o.push_str("<h2>How states are decided</h2><ul class=\"rules\">");
    for (name, rule) in RULES {
        let _ = write!(
            o,
            "<li><span class=\"state {name}\">{name}</span> {rule}</li>"
        );
    }
    o.push_str(
        "</ul><p class=\"sub\">A location is the agents' <code>region</code> label. Uptime: the \
         share of runs that succeeded over the window, from the recording rules of \
         status-page.rules.yml; a dash where the store holds none.</p></body></html>\n",
    );
    o
}

/// One line per silent location at the top: it is news, and its rows alone are easy to miss.
fn quiet(o: &mut String, f: &Fleet) {
    // The earliest time each location's rows went silent, and how many targets it ran.
    let mut silent: std::collections::BTreeMap<&str, (Timestamp, usize)> = Default::default();
    for l in f.targets.iter().flat_map(|t| &t.locations) {
        if let Some(since) = l.silent_since {
            let e = silent.entry(&l.location).or_insert((since, 0));
            e.0 = e.0.min(since);
            e.1 += 1;
        }
    }
    for (location, (since, targets)) in silent {
        o.push_str("<p class=\"quiet\" data-location=\"");
        esc(o, location);
        o.push_str("\"><span class=\"state silent\">silent</span> <b>");
        esc(o, location);
        let _ = writeln!(
            o,
            "</b> has written nothing since <span class=\"num\">{}</span> ({} ago): its {targets} target{} below show{} how {} last were, and count so.</p>",
            when(since),
            lasted(since, f.generated_at),
            if targets == 1 { "" } else { "s" },
            if targets == 1 { "s" } else { "" },
            if targets == 1 { "it" } else { "they" },
        );
    }
}

fn target_rows(o: &mut String, t: &Target) {
    let state = t.state.as_str();
    o.push_str("<tr class=\"target\" data-target=\"");
    esc(o, &t.target);
    let _ = write!(o, "\" data-state=\"{state}\"><th colspan=\"8\">");
    esc(o, &t.target);
    o.push_str(" <small>");
    esc(o, &t.model);
    let _ = write!(
        o,
        "</small> <span class=\"state {state}\">{state}</span> <small class=\"failing\">{} of {} locations failing",
        t.locations_failing,
        t.locations.len()
    );
    if t.locations_silent > 0 {
        let _ = write!(o, ", {} silent", t.locations_silent);
    }
    o.push_str("</small></th></tr>\n");
    for l in &t.locations {
        location_row(o, &t.target, l);
    }
}

fn location_row(o: &mut String, target: &str, l: &Location) {
    let state = l.state.as_str();
    o.push_str("<tr class=\"location\" data-target=\"");
    esc(o, target);
    o.push_str("\" data-location=\"");
    esc(o, &l.location);
    let _ = write!(o, "\" data-state=\"{state}\"");
    if l.silent {
        o.push_str(" data-silent");
    }
    o.push_str("><td class=\"loc\">");
    esc(o, &l.location);
    let _ = write!(o, "</td><td><span class=\"state {state}\">{state}</span>");
    match l.silent_since {
        Some(since) => {
            let _ = write!(
                o,
                " <span class=\"state silent\">silent</span><br><small class=\"recent\">since <span class=\"silent-since\" title=\"{0}\">{0}</span>; {1} ok over its last 3 min</small></td>",
                when(since),
                percent(l.success_ratio_3m)
            );
        }
        None => {
            let _ = write!(
                o,
                "<br><small class=\"recent\">{} ok over 3 min</small></td>",
                percent(l.success_ratio_3m)
            );
        }
    }
    for (window, u) in [
        ("24h", l.uptime_24h),
        ("7d", l.uptime_7d),
        ("90d", l.uptime_90d),
    ] {
        let _ = write!(
            o,
            "<td class=\"uptime num\" data-window=\"{window}\">{}</td>",
            percent(u)
        );
    }
    let _ = write!(
        o,
        "<td class=\"num ttft-p95\">{}</td>",
        l.ttft_p95_seconds
            .map_or_else(|| "–".to_string(), |s| ms(s * 1000.0))
    );
    time_cell(o, "last-run", l.last_run);
    time_cell(o, "last-success", l.last_success);
    o.push_str("</tr>\n");
}

/// A time, the clock first and the date below it, so the column stays narrow.
fn time_cell(o: &mut String, class: &str, t: Option<Timestamp>) {
    let _ = write!(o, "<td class=\"num {class}\">");
    match t {
        Some(t) => {
            let full = when(t);
            let (date, time) = full.split_once('T').unwrap_or(("", &full));
            let _ = write!(
                o,
                "<span title=\"{full}\">{time}</span><br><small>{date}</small>"
            );
        }
        None => o.push_str("<small>never</small>"),
    }
    o.push_str("</td>");
}

fn failures(o: &mut String, targets: &[Target]) {
    o.push_str("<h2 id=\"failures\">Failures, last 24 hours</h2>");
    let rows: Vec<_> = targets
        .iter()
        .flat_map(|t| t.failures.iter().map(move |f| (&t.target, f)))
        .collect();
    if rows.is_empty() {
        o.push_str("<p class=\"sub\">No failed run in the last 24 hours.</p>\n");
        return;
    }
    o.push_str("<table class=\"failures\"><thead><tr><th>Target</th><th>Location</th><th>Probe</th><th>Outcome</th><th>Failed runs</th></tr></thead><tbody>\n");
    for (target, f) in rows {
        o.push_str("<tr class=\"failure\"><td>");
        esc(o, target);
        o.push_str("</td><td>");
        esc(o, &f.location);
        o.push_str("</td><td>");
        esc(o, &f.probe);
        o.push_str("</td><td><code>");
        esc(o, &f.outcome);
        let _ = writeln!(
            o,
            "</code></td><td class=\"num\">{:.0}</td></tr>",
            f.runs_24h
        );
    }
    o.push_str("</tbody></table>\n<p class=\"sub\">Counts are the store's <code>increase</code> over 24 hours (Prometheus extrapolates it to the window's edges).</p>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::model::example;

    #[test]
    fn names_from_the_store_are_escaped() {
        let hostile = "<script>alert(1)</script>";
        let mut f = example();
        let t = &mut f.targets[0];
        t.target = hostile.into();
        t.model = hostile.into();
        t.locations[0].location = hostile.into();
        let failure = &mut t.failures[0];
        failure.location = hostile.into();
        failure.probe = hostile.into();
        failure.outcome = hostile.into();
        let page = render(&f);
        assert!(!page.contains(hostile), "{page}");
        assert!(page.contains("&lt;script&gt;"));
        assert!(page.contains("data-state=\"degraded\""));
        assert!(page.contains("1 of 1 locations failing"));
        assert!(page.contains(">50.00%<") && page.contains(">300 ms<"));
    }

    #[test]
    fn a_silent_location_is_said_at_the_top_and_in_its_row() {
        let mut f = example();
        f.generated_at = Timestamp::from_second(190).unwrap();
        let page = render(&f);
        assert!(
            page.contains("<p class=\"quiet\" data-location=\"eu\">"),
            "{page}"
        );
        assert!(page.contains("since <span class=\"num\">1970-01-01T00:00:00Z</span> (3m 10s ago)"));
        assert!(
            page.contains("1 of 1 locations failing, 1 silent"),
            "{page}"
        );
        assert!(page.contains("data-state=\"down\" data-silent>"), "{page}");
        let mut live = example();
        live.targets[0].locations[0].silent = false;
        live.targets[0].locations[0].silent_since = None;
        live.targets[0].locations_silent = 0;
        let page = render(&live);
        assert!(!page.contains("<p class=\"quiet\"") && !page.contains(" data-silent>"));
        assert!(page.contains("1 of 1 locations failing</small>"));
    }

    #[test]
    fn the_outage_page_refreshes_and_says_since_when() {
        let o = Outage {
            error: "The fleet status is unavailable: the store at <x> did not answer".into(),
            unavailable_since: Timestamp::from_second(60).unwrap(),
        };
        let page = outage(
            &o,
            "http://prom<9090>",
            Timestamp::from_second(125).unwrap(),
        );
        assert!(page.contains(&format!(
            "<meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">"
        )));
        assert!(
            page.contains("1970-01-01T00:01:00Z</span> (for 1m 5s)"),
            "{page}"
        );
        assert!(page.contains("http://prom&lt;9090&gt;") && page.contains("at &lt;x&gt;"));
        assert!(page.contains(STYLE));
    }
}
