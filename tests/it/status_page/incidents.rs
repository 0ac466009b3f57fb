//! The incidents, the 90-day history and the Atom feeds, checked against the results log: the
//! incidents are worked out here from the log alone (the page's rule, written again), and the
//! feeds are read by a real XML parser (Python's xml.etree).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::process::{Command, Stdio};

use llm_canary::testing::util::clip;
use regex::Regex;
use serde_json::Value;

use super::common::daemon::Daemon;
use super::common::services::get;

const ATOM: &str = "http://www.w3.org/2005/Atom";

fn at(r: &Value) -> jiff::Timestamp {
    r["started_at"].as_str().unwrap().parse().unwrap()
}

/// What an incident must be, from the log.
#[derive(Debug, PartialEq)]
struct Want {
    id: String,
    state: String,
    ended_at: Option<i64>,
    outcomes: BTreeMap<String, u64>,
    first_error: String,
}

/// Each target has one probe here, so its state is its pair's: down when its last two runs
/// failed, degraded when only the last one did, up when the last one succeeded; a maintenance
/// run changes nothing.
fn incidents_from_log(records: &[Value]) -> Vec<(jiff::Timestamp, Want)> {
    let mut last: HashMap<String, Vec<bool>> = HashMap::new();
    let mut open: HashMap<String, (jiff::Timestamp, Want)> = HashMap::new();
    let mut done = Vec::new();
    for r in records {
        let target = r["target"].as_str().unwrap().to_string();
        let ok = r["success"] == true;
        let recent = last.entry(target.clone()).or_default();
        recent.push(ok);
        if r["maintenance"] == true {
            continue;
        }
        let in_a_row = recent.iter().rev().take_while(|ok| !**ok).count();
        let state = match in_a_row {
            0 => "up",
            1 => "degraded",
            _ => "down",
        };
        match (open.remove(&target), state) {
            (Some((start, mut w)), "up") => {
                w.ended_at = Some(at(r).as_millisecond());
                done.push((start, w));
            }
            (Some((start, mut w)), s) => {
                if s == "down" {
                    w.state = "down".into();
                }
                if !ok {
                    *w.outcomes
                        .entry(r["outcome"].as_str().unwrap().into())
                        .or_default() += 1;
                }
                open.insert(target, (start, w));
            }
            (None, s @ ("down" | "degraded")) => {
                let w = Want {
                    id: format!("{target}-{}", at(r).as_millisecond()),
                    state: s.into(),
                    ended_at: None,
                    outcomes: [(r["outcome"].as_str().unwrap().to_string(), 1)].into(),
                    first_error: clip(r["error"].as_str().unwrap()),
                };
                open.insert(target, (at(r), w));
            }
            (None, _) => {}
        }
    }
    done.extend(open.into_values());
    // The latest started first, then by id, as the API lists them.
    done.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
    done
}

fn of_api(i: &Value) -> Want {
    Want {
        id: i["id"].as_str().unwrap().into(),
        state: i["state"].as_str().unwrap().into(),
        ended_at: i["ended_at"]
            .as_str()
            .map(|t| t.parse::<jiff::Timestamp>().unwrap().as_millisecond()),
        outcomes: serde_json::from_value(i["outcomes"].clone()).unwrap(),
        first_error: i["first_error"].as_str().unwrap().into(),
    }
}

/// An Atom document through xml.etree: its root, and each entry's id, title, published and
/// updated, as JSON. Not well-formed XML fails the parse, and so the test.
fn parse_atom(xml: &str) -> Value {
    const SCRIPT: &str = r#"
import json, sys
import xml.etree.ElementTree as ET
root = ET.fromstring(sys.stdin.buffer.read())
A = "{http://www.w3.org/2005/Atom}"
one = lambda e, tag: (e.find(A + tag).text if e.find(A + tag) is not None else None)
print(json.dumps({
    "root": root.tag,
    "id": one(root, "id"), "title": one(root, "title"), "updated": one(root, "updated"),
    "entries": [{"id": one(e, "id"), "title": one(e, "title"), "published": one(e, "published"),
                 "updated": one(e, "updated"), "content": one(e, "content"),
                 "link": e.find(A + "link").get("href")} for e in root.findall(A + "entry")],
}))
"#;
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(xml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "not well-formed Atom: {}\n{xml}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// RFC 3339, with a `Z` or an offset (jiff's Timestamp parser takes nothing else).
fn rfc3339(s: &Value) -> jiff::Timestamp {
    let s = s.as_str().expect("a time");
    assert!(
        Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
            .unwrap()
            .is_match(s),
        "{s}"
    );
    s.parse().unwrap()
}

pub async fn check(d: &Daemon, dom: &str, records: &[Value]) {
    // The API lists what the log says, every incident.
    let api: Value = serde_json::from_str(&get(&d.url("/api/v1/incidents")).await).unwrap();
    let got: Vec<Want> = api["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(of_api)
        .collect();
    let want: Vec<Want> = incidents_from_log(records)
        .into_iter()
        .map(|w| w.1)
        .collect();
    assert_eq!(got, want);
    let of = |t: &str| got.iter().find(|i| i.id.starts_with(&format!("{t}-")));
    assert_eq!(
        of("failing").map(|i| (i.state.as_str(), i.ended_at)),
        Some(("down", None))
    );
    assert!(of("flaky").is_some() && of("looping").is_some());
    assert!(
        of("nightly").is_none(),
        "maintenance never opens an incident"
    );
    assert!(
        got.iter().filter(|i| i.id.starts_with("healthy-")).count() > 20,
        "the seeded week's failures, resolved each"
    );
    for i in api["incidents"].as_array().unwrap() {
        if let Some(end) = i["ended_at"].as_str() {
            let secs = end.parse::<jiff::Timestamp>().unwrap().as_second()
                - rfc3339(&i["started_at"]).as_second();
            assert!(
                (i["duration_seconds"].as_i64().unwrap() - secs).abs() <= 1,
                "{i}"
            );
        }
    }

    // The page lists them, and each target's badge leads to its latest.
    for i in got.iter().take(20) {
        assert!(
            dom.contains(&format!("<tr class=\"incident\" id=\"incident-{}\"", i.id)),
            "{}",
            i.id
        );
    }
    for t in ["failing", "flaky", "healthy"] {
        let latest = of(t).unwrap();
        assert!(
            dom.contains(&format!(
                "<a class=\"badge\" href=\"#incident-{}\"><span class=\"state",
                latest.id
            )),
            "{t}"
        );
    }
    assert!(
        dom.contains("<a class=\"badge\" href=\"#incidents\"><span class=\"state maintenance\">")
    );

    check_days(d, dom, records).await;
    check_feeds(d, &api).await;
}

/// Per UTC date, runs and failures outside maintenance, from the log.
fn days_from_log(records: &[Value], target: &str) -> BTreeMap<String, (u64, u64, Vec<f64>)> {
    let mut days: BTreeMap<String, (u64, u64, Vec<f64>)> = BTreeMap::new();
    for r in records.iter().filter(|r| r["target"] == target) {
        let date = at(r).to_zoned(jiff::tz::TimeZone::UTC).date().to_string();
        let d = days.entry(date).or_default();
        if r["maintenance"] == false {
            d.0 += 1;
            d.1 += u64::from(r["success"] == false);
        }
        if let (Some(t), false) = (r["ttft_ms"].as_f64(), r["warmup"] == true) {
            d.2.push(t);
        }
    }
    days
}

async fn check_days(d: &Daemon, dom: &str, records: &[Value]) {
    let bar = Regex::new(
        r#"<rect class="day" data-date="([0-9-]+)" data-runs="(\d+)" data-failed="(\d+)""#,
    )
    .unwrap();
    for t in ["healthy", "failing", "nightly"] {
        let row = Regex::new(&format!(
            r#"(?s)<tr class="target" data-target="{t}".*?</tr>"#
        ))
        .unwrap()
        .find(dom)
        .unwrap()
        .as_str();
        let bars: Vec<(String, u64, u64)> = bar
            .captures_iter(row)
            .map(|c| {
                (
                    c[1].to_string(),
                    c[2].parse().unwrap(),
                    c[3].parse().unwrap(),
                )
            })
            .collect();
        assert_eq!(bars.len(), 90, "{t}");
        let log = days_from_log(records, t);
        for (date, runs, failed) in &bars {
            let (r, f, _) = log.get(date).cloned().unwrap_or_default();
            assert_eq!((*runs, *failed), (r, f), "{t} on {date}");
        }
        let with_runs = bars.iter().filter(|b| b.1 > 0).count();
        match t {
            "healthy" => assert!(with_runs >= 9, "{t}: {with_runs} days with runs"),
            "failing" => assert!(with_runs >= 1 && row.contains("fill=\"#cf222e\"")),
            // Runs in maintenance only: no uptime, a blue bar.
            _ => assert!(with_runs == 0 && row.contains("fill=\"#0969da\"><title>")),
        }
    }

    // The history API says the same, per metric and window.
    let healthy = days_from_log(records, "healthy");
    for (window, n) in [("90d", 90), ("30d", 30)] {
        for metric in ["uptime", "ttft_p95"] {
            let url = d.url(&format!(
                "/api/v1/history?target=healthy&window={window}&metric={metric}"
            ));
            let h: Value = serde_json::from_str(&get(&url).await).unwrap();
            let points = h["points"].as_array().unwrap();
            assert_eq!(points.len(), n, "{window}");
            assert_eq!(h["probes"][0]["probe"], "p");
            for p in points {
                let (runs, failed, mut ttft) = healthy
                    .get(p["date"].as_str().unwrap())
                    .cloned()
                    .unwrap_or_default();
                assert_eq!(p["runs"].as_u64(), Some(runs), "{p}");
                let want = match metric {
                    "uptime" => (runs > 0).then(|| (runs - failed) as f64 / runs as f64),
                    _ => (!ttft.is_empty()).then(|| {
                        ttft.sort_by(f64::total_cmp);
                        ttft[((0.95 * ttft.len() as f64).ceil() as usize).max(1) - 1]
                    }),
                };
                match (p["value"].as_f64(), want) {
                    (Some(g), Some(w)) => {
                        assert!((g - w).abs() <= 0.05 + w * 1e-3, "{metric} {p}: {w}")
                    }
                    (g, w) => assert_eq!(g, w, "{metric} {p}"),
                }
            }
        }
    }
    for (query, status) in [
        ("target=healthy&window=7d", 400),
        ("target=healthy&metric=e2e", 400),
        ("window=30d", 400),
        ("target=nope", 404),
    ] {
        let r = reqwest::get(d.url(&format!("/api/v1/history?{query}")))
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{query}");
    }
}

async fn check_feeds(d: &Daemon, api: &Value) {
    let incidents = api["incidents"].as_array().unwrap();
    let agent = api["agent"].as_str().unwrap();
    let r = reqwest::get(d.url("/feed.atom")).await.unwrap();
    assert_eq!(
        r.headers()["content-type"],
        "application/atom+xml; charset=utf-8"
    );
    let all = parse_atom(&r.text().await.unwrap());
    assert_eq!(all["root"], format!("{{{ATOM}}}feed"));
    assert_eq!(all["id"], format!("tag:llm-canary,2025:{agent}/incidents"));
    rfc3339(&all["updated"]);
    let entries = all["entries"].as_array().unwrap();
    assert_eq!(entries.len(), incidents.len().min(50));
    // One entry per incident, its id stable (the incident's), the latest change first.
    let by_id: HashMap<String, &Value> = incidents
        .iter()
        .map(|i| {
            (
                format!(
                    "tag:llm-canary,2025:{agent}/incident/{}",
                    i["id"].as_str().unwrap()
                ),
                i,
            )
        })
        .collect();
    let mut previous = None;
    for e in entries {
        let i = by_id[e["id"].as_str().unwrap()];
        let (published, updated) = (rfc3339(&e["published"]), rfc3339(&e["updated"]));
        assert_eq!(published.as_second(), rfc3339(&i["started_at"]).as_second());
        let resolved = !i["ended_at"].is_null();
        let end = if resolved {
            rfc3339(&i["ended_at"])
        } else {
            published
        };
        assert_eq!(updated.as_second(), end.as_second(), "{e}");
        assert!(previous.is_none_or(|p| p >= updated), "newest first");
        previous = Some(updated);
        let title = e["title"].as_str().unwrap();
        assert_eq!(title.ends_with(", resolved"), resolved, "{title}");
        assert!(e["content"]
            .as_str()
            .unwrap()
            .contains(i["first_error"].as_str().unwrap()));
        assert_eq!(
            e["link"],
            format!("/#incident-{}", i["id"].as_str().unwrap())
        );
    }
    // A hostile server's markup stays text: the hostile sentence of the seeded failures parses.
    assert!(entries
        .iter()
        .any(|e| e["content"].as_str().unwrap().contains("<script>")));

    let one = parse_atom(&get(&d.url("/feed/failing.atom")).await);
    let e = one["entries"].as_array().unwrap();
    assert_eq!(e.len(), 1, "{one}");
    assert_eq!(
        e[0]["id"],
        entries
            .iter()
            .find(|x| x["title"] == "failing down")
            .unwrap()["id"]
    );
    assert_eq!(
        one["id"],
        format!("tag:llm-canary,2025:{agent}/incidents/failing")
    );
    let again = parse_atom(&get(&d.url("/feed.atom")).await);
    assert_eq!(
        again["entries"], all["entries"],
        "the same feed while nothing ran"
    );
    let r = reqwest::get(d.url("/feed/nope.atom")).await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
}
