//! `check`: the config is valid; here is what it will do (each probe's targets, its cadence in
//! words and next fire times), and what deserves a warning.

use std::fmt::Write;

use crate::config::{Config, Probe, Target};
use crate::schedule::Schedule;

/// The next `n` fire times of `schedule` in `tz`, for people.
fn next_fires(
    schedule: &Schedule,
    tz: &jiff::tz::TimeZone,
    now: &jiff::Timestamp,
    n: usize,
) -> String {
    let next: Vec<String> = schedule
        .upcoming(&now.to_zoned(tz.clone()), n)
        .iter()
        .map(rfc3339)
        .collect();
    next.join(", ")
}

/// RFC 3339 with the zone's offset at that instant, `Z` for UTC: what people and parsers read
/// (a `Zoned`'s own display appends the zone name in brackets, which RFC 3339 has no room for).
fn rfc3339(z: &jiff::Zoned) -> String {
    match z.offset() {
        jiff::tz::Offset::UTC => z.timestamp().to_string(),
        offset => z.timestamp().display_with_offset(offset).to_string(),
    }
}

/// What `check` prints of a valid config: a section each, in this order.
pub(super) fn describe(cfg: &Config, now: &jiff::Timestamp) -> String {
    let mut s = String::new();
    agent(&mut s, cfg);
    for t in &cfg.targets {
        target(&mut s, t);
    }
    let needs = crate::gate::needs::for_check(cfg);
    for p in &cfg.probes {
        probe(&mut s, p, now);
        if let Some(line) = needs
            .iter()
            .find(|n| n.probe == p.name)
            .and_then(super::gate::needs_line)
        {
            // The error rate is shared by every gated probe's limits, as `gate` shares it.
            let _ = writeln!(
                s,
                "  gate (every gated probe against a baseline target): {line}"
            );
        }
    }
    s.push_str(&super::cost::describe(cfg, now));
    maintenance(&mut s, cfg, now);
    admin(&mut s, cfg);
    warnings(&mut s, cfg, now);
    for w in needs.iter().filter_map(super::gate::short_line) {
        let _ = writeln!(s, "warning: gate: {w}");
    }
    s
}

/// A valid web config: what the endpoints will speak and ask for.
pub(super) fn web(path: &std::path::Path, web: &crate::web_config::WebConfig) -> String {
    format!(
        "{}: valid web config: {}, {}\n",
        path.display(),
        if web.tls() { "HTTPS" } else { "plain HTTP" },
        if web.basic_auth() {
            "basic auth"
        } else {
            "no basic auth"
        }
    )
}

/// The config's file and counts, the agent's labels and its shard.
fn agent(s: &mut String, cfg: &Config) {
    let _ = writeln!(
        s,
        "{}: valid: agent {:?}, {} target(s), {} probe(s)",
        cfg.path.display(),
        cfg.agent.name,
        cfg.targets.len(),
        cfg.probes.len()
    );
    if !cfg.agent.labels.is_empty() {
        let labels: Vec<String> = cfg
            .agent
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(s, "agent labels: {}", labels.join(", "));
    }
    if let Some((i, n)) = cfg.agent.shard {
        let all: usize = cfg.probes.iter().map(|p| p.targets.len()).sum();
        let _ = writeln!(
            s,
            "shard {i}/{n}: {} of {all} (probe, target) pairs",
            crate::daemon::scheduled_pairs(cfg).len()
        );
    }
}

/// A target: how its requests are authorised, its API version and its priority.
fn target(s: &mut String, t: &Target) {
    let _ = writeln!(s, "target {}: {}", t.name, key(t));
    if let Some(v) = &t.api_version {
        let _ = writeln!(s, "  api-version {v}");
    }
    if let Some(p) = t.priority {
        let _ = writeln!(s, "  {}", p.describe());
    }
}

/// Where a target's key goes (as its provider's own server takes it, as a bearer token, or in
/// its API's header), or what signs or authorises its requests in place of a key.
fn key(t: &Target) -> String {
    match (t.key_header(), t.provider_auth()) {
        (Some(h), Some(own)) if h == own.key_header => own.describe(),
        (Some(h), _) if h == reqwest::header::AUTHORIZATION => {
            "key as a bearer token in authorization".to_string()
        }
        (Some(h), _) => format!("key in {h}"),
        (None, _) => match (&t.aws, &t.entra) {
            (Some(aws), _) => format!(
                "requests signed with AWS SigV4 for {}, {}",
                aws.region,
                aws.credentials.describe()
            ),
            (None, Some(entra)) => entra.describe(),
            (None, None) => "no key".to_string(),
        },
    }
}

/// A probe: its file and targets, its ladder, and its schedule (or that it has none).
fn probe(s: &mut String, p: &Probe, now: &jiff::Timestamp) {
    let _ = writeln!(
        s,
        "probe {} ({}) -> {}",
        p.name,
        p.file.display(),
        p.targets.join(", ")
    );
    if let Some(l) = &p.ladder {
        let sizes: Vec<String> = l.sizes.iter().map(u32::to_string).collect();
        let _ = writeln!(
            s,
            "  ladder: a run per rung each firing, of about {} tokens{}",
            sizes.join(", "),
            if l.needle {
                ", each asked for a fact hidden in it"
            } else {
                ", the prompt padded"
            }
        );
    }
    match &p.schedule {
        Some(schedule) => scheduled(s, p, schedule, now),
        None => {
            let _ = writeln!(
                s,
                "  no schedule: runs only with `once`, `gate` and the daemon's /probe"
            );
        }
    }
}

/// A scheduled probe's cadence and next fire times, its confirmation runs and its cache check.
fn scheduled(s: &mut String, p: &Probe, schedule: &Schedule, now: &jiff::Timestamp) {
    let written = match schedule {
        Schedule::Every { text, .. } if !text.starts_with('@') => {
            format!("every {text}")
        }
        _ => format!("schedule {:?}", schedule.as_str()),
    };
    let jitter = match p.jitter {
        j if j.is_zero() => String::new(),
        j => format!(
            "; each target at its own fixed share of the {} jitter after these",
            crate::util::human_duration(j)
        ),
    };
    let _ = writeln!(
        s,
        "  {written}{}: next {}{jitter}",
        in_words(schedule),
        next_fires(schedule, &p.timezone, now, 3)
    );
    let confirm = match p.confirm {
        c if c.is_on() => format!(
            "a failed run is re-run up to {} time(s), {} after each failure, before its next scheduled run",
            c.runs,
            crate::util::human_duration(c.after)
        ),
        _ => "off".to_string(),
    };
    let _ = writeln!(s, "  confirm: {confirm}");
    if let Some(c) = p.cache_check {
        let _ = writeln!(
            s,
            "  cache_check: each firing is two runs (cold, then warm) with a {}-character prefix",
            c.prefix_chars
        );
    }
}

/// Each maintenance window and when it next opens.
fn maintenance(s: &mut String, cfg: &Config, now: &jiff::Timestamp) {
    for w in &cfg.maintenance {
        let _ = writeln!(
            s,
            "maintenance of {} for {} from {:?}{}: next {}",
            w.targets.join(", "),
            crate::util::human_duration(w.duration),
            w.schedule.as_str(),
            in_words(&w.schedule),
            next_fires(&w.schedule, &w.timezone, now, 2)
        );
    }
}

/// Whether the admin endpoints are off, when that may surprise.
fn admin(s: &mut String, cfg: &Config) {
    if cfg.agent.admin_token.is_none() && cfg.agent.listen.is_some_and(|a| !a.ip().is_loopback()) {
        // Not a warning: a scrape-only agent needs no admin endpoint; said so it is no surprise.
        let _ = writeln!(s, "admin endpoints (POST /-/reload, /-/maintenance): off, as agent.listen is not loopback-only and no admin token is set (agent.admin_token_env or admin_token_file); SIGHUP still reloads");
    }
}

/// The config's own warnings, the clock's, and what `run` could not export.
fn warnings(s: &mut String, cfg: &Config, now: &jiff::Timestamp) {
    for w in &cfg.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    for w in cfg.insecure_tls_warnings() {
        let _ = writeln!(s, "warning: {w}");
    }
    for w in super::p0_clock::warnings(cfg, now) {
        let _ = writeln!(s, "warning: {w}");
    }
    if let Some(why) = crate::daemon::unexported(cfg) {
        let _ = writeln!(s, "warning: `run` with this config: {why}");
    }
}

/// A schedule's cadence in words, in parentheses, when it has a simple one.
fn in_words(schedule: &Schedule) -> String {
    super::cadence::of(schedule).map_or(String::new(), |words| format!(" ({words})"))
}
