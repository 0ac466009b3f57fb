//! `rules`: a config's `slo:` objectives → Prometheus recording rules and multiwindow,
//! multi-burn-rate alerts (the Google SRE workbook's scheme, as sloth and pyrra generate it).
//!
//! An objective counts a [`Scope`]'s runs: a target's `slo:` every run on that target, a probe's
//! `slo:` that probe's runs on each of its targets apart (series with `probe` and `target`).
//! Where both exist, both are generated, as sloth and pyrra treat every SLO as its own: each has
//! its own budget and alerts, told apart by the `probe` label.
//!
//! Per scope and objective (availability, or a latency figure at or under a bound), the error
//! ratio is recorded over the windows the alerts read; the alerts page at 14.4× the budget's
//! burn over 1 h and 5 m (P0), 6× over 6 h and 30 m (P1), and open a ticket at 1× over 3 d and
//! 6 h (P2), all held while the target is in a maintenance window. Goodput (runs that succeeded
//! and met every latency objective, of all runs) is recorded beside them.

use std::fmt::Write;

use crate::config::{Config, LatencyObjective, Slo};

/// The windows the alerts read, and the rule names' suffix for each.
const WINDOWS: [&str; 5] = ["5m", "30m", "1h", "6h", "3d"];

/// (alert, severity, burn factor, long window, short window, for)
const ALERTS: [(&str, &str, &str, &str, &str, &str); 3] = [
    ("LLMCanarySLOFastBurn", "P0", "14.4", "1h", "5m", "2m"),
    ("LLMCanarySLOSlowBurn", "P1", "6", "6h", "30m", "15m"),
    ("LLMCanarySLOBudgetBurn", "P2", "1", "3d", "6h", "1h"),
];

/// A share as PromQL reads it, without binary noise (`0.999`, not `0.9990000000000001`).
fn num(x: f64) -> String {
    let s = format!("{x:.10}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `le` as the agent writes it (`1`) and as Prometheus 3 normalises it (`1.0`).
fn le_matcher(bound: f64) -> String {
    let s = num(bound);
    if s.contains('.') {
        format!("le=\"{s}\"")
    } else {
        format!("le=~`{s}|{s}\\.0`")
    }
}

/// Whose runs an objective counts.
#[derive(Debug, Clone)]
enum Scope {
    /// Every run on a target, whatever its probe (a target's `slo:`).
    Target(String),
    /// One probe's runs, on each target it runs on apart (a probe's `slo:`).
    Probe(String),
}

impl Scope {
    fn matcher(&self) -> String {
        match self {
            Scope::Target(t) => format!("target=\"{t}\""),
            Scope::Probe(p) => format!("probe=\"{p}\""),
        }
    }

    /// The static label that keeps its recorded series apart from another scope's (promtool
    /// refuses two rules of one name with the same labels).
    fn label(&self) -> (&'static str, &str) {
        match self {
            Scope::Target(t) => ("target", t),
            Scope::Probe(p) => ("probe", p),
        }
    }

    /// The labels its series keep.
    fn by(&self) -> &'static str {
        match self {
            Scope::Target(_) => "target",
            Scope::Probe(_) => "probe, target",
        }
    }
}

fn runs(scope: &Scope, extra: &str, w: &str) -> String {
    format!(
        "sum by ({}) (rate(llm_canary_probe_runs_total{{{}{extra}}}[{w}]))",
        scope.by(),
        scope.matcher()
    )
}

/// The share of runs that failed over `w`: absent while the window holds no run.
fn availability_errors(scope: &Scope, w: &str) -> String {
    format!(
        "1 - (\n  ({ok} or {all} * 0)\n  / ({all} > 0)\n)",
        ok = runs(scope, ",outcome=\"ok\"", w),
        all = runs(scope, "", w)
    )
}

fn latency_good(scope: &Scope, o: &LatencyObjective, w: &str) -> String {
    format!(
        "sum by ({by}) (rate({h}_bucket{{{m},{le}}}[{w}]))",
        by = scope.by(),
        h = o.figure.histogram(),
        m = scope.matcher(),
        le = le_matcher(o.at_most)
    )
}

fn latency_count(scope: &Scope, o: &LatencyObjective, w: &str) -> String {
    format!(
        "sum by ({by}) (rate({h}_count{{{m}}}[{w}]))",
        by = scope.by(),
        h = o.figure.histogram(),
        m = scope.matcher()
    )
}

/// The share of timed runs over `w` slower than the bound.
fn latency_errors(scope: &Scope, o: &LatencyObjective, w: &str) -> String {
    format!(
        "1 - (\n  {good}\n  / ({count} > 0)\n)",
        good = latency_good(scope, o, w),
        count = latency_count(scope, o, w)
    )
}

/// One objective of a scope: its `slo` label value, the share, and its error ratio per window.
struct Objective {
    name: String,
    share: f64,
    what: String,
    errors: Box<dyn Fn(&str) -> String>,
}

fn objectives(scope: &Scope, slo: &Slo) -> Vec<Objective> {
    let mut out = Vec::new();
    if let Some(a) = slo.availability {
        let scope = scope.clone();
        out.push(Objective {
            name: "availability".into(),
            share: a,
            what: format!("{}% of runs succeed", num(a * 100.0)),
            errors: Box::new(move |w| availability_errors(&scope, w)),
        });
    }
    for o in &slo.latency {
        let (scope, o) = (scope.clone(), o.clone());
        out.push(Objective {
            name: format!("{}_le_{}s", o.figure.as_str(), num(o.at_most)),
            share: o.share,
            what: format!(
                "{} <= {}s for {}% of runs",
                o.figure.as_str(),
                num(o.at_most),
                num(o.share * 100.0)
            ),
            errors: Box::new(move |w| latency_errors(&scope, &o, w)),
        });
    }
    out
}

fn indent(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    text.lines()
        .map(|l| format!("{pad}{l}\n"))
        .collect::<String>()
}

fn record(s: &mut String, name: &str, expr: &str, labels: &[(&str, &str)]) {
    let _ = writeln!(s, "      - record: {name}");
    let _ = writeln!(s, "        expr: |");
    s.push_str(&indent(expr, 10));
    if !labels.is_empty() {
        let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}: {v:?}")).collect();
        let _ = writeln!(s, "        labels: {{{}}}", l.join(", "));
    }
}

/// Goodput: runs that succeeded and met every latency objective, of all runs. The agent
/// counts outcomes and each latency figure apart, so this is the lower bound
/// `ok − Σ slower than a bound` (exact when slow runs are ok runs, and with one objective).
fn goodput(scope: &Scope, slo: &Slo, w: &str) -> String {
    let all = runs(scope, "", w);
    let mut e = format!("(\n  ({} or {all} * 0)", runs(scope, ",outcome=\"ok\"", w));
    for o in &slo.latency {
        let _ = write!(
            e,
            "\n  - (({} - {}) or {all} * 0)",
            latency_count(scope, o, w),
            latency_good(scope, o, w)
        );
    }
    let _ = write!(e, "\n) / ({all} > 0)");
    format!("clamp_min(\n{}\n, 0)", indent(&e, 2).trim_end())
}

/// The runbook's address, as the shipped rules have it (docs/metrics-and-alerts.md, "Runbook");
/// the anchor is the alert's name in lower case, as GitHub makes a heading's.
const RUNBOOK: &str = "https://github.com/your-org/llm-canary/blob/main/docs/metrics-and-alerts.md";

/// Names the probe in an alert's text when the objective is a probe's.
const PROBE: &str = "{{ with $labels.probe }} (probe {{ . }}){{ end }}";

fn alert(s: &mut String, a: &(&str, &str, &str, &str, &str, &str)) {
    let (name, severity, factor, long, short, hold) = *a;
    let _ = writeln!(s, "      - alert: {name}");
    let _ = writeln!(s, "        expr: |");
    let expr = format!(
        "(\n  llm_canary:slo_burn_rate:rate{long} > {factor}\n  and\n  llm_canary:slo_burn_rate:rate{short} > {factor}\n)\nunless on(target) llm_canary_maintenance == 1"
    );
    s.push_str(&indent(&expr, 10));
    let _ = writeln!(s, "        for: {hold}");
    let _ = writeln!(s, "        labels:");
    let _ = writeln!(s, "          severity: {severity}");
    let _ = writeln!(s, "        annotations:");
    let _ = writeln!(
        s,
        "          summary: \"{{{{ $labels.target }}}}{PROBE} burns its {{{{ $labels.slo }}}} error budget at {{{{ $value | printf \\\"%.1f\\\" }}}}x the sustainable rate over {long} (and over {short})\""
    );
    let _ = writeln!(
        s,
        "          description: \"At over {factor}x the sustainable rate the whole error budget of {{{{ $labels.slo }}}} on {{{{ $labels.target }}}}{PROBE} is gone in {}. Budget left: {{{{ with printf \\\"llm_canary:slo_error_budget_remaining:ratio{{probe='%s',target='%s',slo='%s'}}\\\" $labels.probe $labels.target $labels.slo | query }}}}{{{{ . | first | value | humanizePercentage }}}}{{{{ end }}}}.\"",
        lasts(factor)
    );
    let _ = writeln!(
        s,
        "          value: \"{{{{ $value | printf \\\"%.1f\\\" }}}}x\""
    );
    let _ = writeln!(s, "          baseline: \"{factor}x\"");
    let _ = writeln!(
        s,
        "          runbook_url: \"{RUNBOOK}#{}\"",
        name.to_lowercase()
    );
    let _ = writeln!(
        s,
        "          dashboard_url: \"https://grafana.example.com/d/llm-canary/llm-canary?var-target={{{{ $labels.target }}}}\""
    );
}

/// What share of the window the whole budget lasts at `factor` times the sustainable burn.
fn lasts(factor: &str) -> String {
    let f: f64 = factor.parse().unwrap_or(1.0);
    format!("{:.0}% of its window", 100.0 / f.max(1.0))
}

/// One `slo:` and whose runs it counts.
struct Scoped<'a> {
    scope: Scope,
    /// The labels of its objective records but `slo`: one set per series the objective joins.
    series: Vec<Vec<(&'a str, &'a str)>>,
    heading: String,
    slo: &'a Slo,
}

/// The rules file for every target and probe with an `slo:`; `None` when none has one.
pub(crate) fn generate(cfg: &Config) -> Option<String> {
    let scoped = scoped(cfg);
    if scoped.is_empty() {
        return None;
    }
    let mut s = String::new();
    header(&mut s, cfg);
    for one in &scoped {
        objective_rules(&mut s, one);
    }
    shared_rules(&mut s);
    Some(s)
}

/// Every `slo:`, targets' first, then probes'.
fn scoped(cfg: &Config) -> Vec<Scoped<'_>> {
    let mut scoped: Vec<Scoped> = Vec::new();
    for t in &cfg.targets {
        if let Some(slo) = &t.slo {
            scoped.push(Scoped {
                scope: Scope::Target(t.name.clone()),
                series: vec![vec![("target", t.name.as_str())]],
                heading: t.name.clone(),
                slo,
            });
        }
    }
    for p in &cfg.probes {
        if let Some(slo) = &p.slo {
            scoped.push(Scoped {
                scope: Scope::Probe(p.name.clone()),
                series: p
                    .targets
                    .iter()
                    .map(|t| vec![("probe", p.name.as_str()), ("target", t.as_str())])
                    .collect(),
                heading: format!("probe {} on {}", p.name, p.targets.join(", ")),
                slo,
            });
        }
    }
    scoped
}

/// What the file is, and the group its rules are in.
fn header(s: &mut String, cfg: &Config) {
    let _ = writeln!(
        s,
        "# Generated by `llm-canary rules -c {}`: do not edit, generate again.\n\
         # Error ratios per target (a probe's objectives: per probe and target) and objective\n\
         # (label slo), burn-rate alerts (P0: 14.4x over 1h and 5m; P1: 6x over 6h and 30m; P2: 1x\n\
         # over 3d and 6h), the error budget left over each objective's window, and goodput.\n\
         # Alerts hold while llm_canary_maintenance is 1.\n\
         groups:\n  - name: llm_canary_slo\n    interval: 30s\n    rules:",
        cfg.path.file_name().map(|f| f.to_string_lossy()).unwrap_or_default()
    );
}

/// One `slo:`'s records: each objective's share and error ratios over every window, and the
/// scope's goodput.
fn objective_rules(
    s: &mut String,
    Scoped {
        scope,
        series,
        heading,
        slo,
    }: &Scoped,
) {
    let _ = writeln!(s, "      # --- {heading} ---");
    for o in objectives(scope, slo) {
        let _ = writeln!(
            s,
            "      # {}: {} over {}",
            o.name,
            o.what,
            window_name(slo.window)
        );
        let labels = [scope.label(), ("slo", o.name.as_str())];
        for each in series {
            let mut with_slo = each.clone();
            with_slo.push(("slo", o.name.as_str()));
            record(
                s,
                "llm_canary:slo_objective:ratio",
                &format!("vector({})", num(o.share)),
                &with_slo,
            );
        }
        for w in WINDOWS {
            record(
                s,
                &format!("llm_canary:slo_errors:ratio_rate{w}"),
                &(o.errors)(w),
                &labels,
            );
        }
        record(
            s,
            "llm_canary:slo_errors:ratio_window",
            &(o.errors)(&window_name(slo.window)),
            &labels,
        );
    }
    for w in ["5m", "1h"] {
        record(
            s,
            &format!("llm_canary:goodput_ratio:rate{w}"),
            &goodput(scope, slo, w),
            &[scope.label()],
        );
    }
}

/// The rules every objective shares: burn rates, budget left, alerts.
fn shared_rules(s: &mut String) {
    let _ = writeln!(
        s,
        "      # --- every objective: burn rates, budget left, alerts ---"
    );
    // `probe` is empty on both sides for a target's objectives.
    let budget = "on(probe, target, slo) group_left() (1 - llm_canary:slo_objective:ratio)";
    for w in WINDOWS {
        record(
            s,
            &format!("llm_canary:slo_burn_rate:rate{w}"),
            &format!("llm_canary:slo_errors:ratio_rate{w}\n/ {budget}"),
            &[],
        );
    }
    record(
        s,
        "llm_canary:slo_error_budget_remaining:ratio",
        &format!("1 - llm_canary:slo_errors:ratio_window\n/ {budget}"),
        &[],
    );
    for a in &ALERTS {
        alert(s, a);
    }
}

/// A window as a PromQL range: whole days as `30d`, else seconds.
fn window_name(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if secs.is_multiple_of(86_400) {
        format!("{}d", secs / 86_400)
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_without_binary_noise() {
        assert_eq!(num(0.999), "0.999");
        assert_eq!(num(99.9 / 100.0), "0.999");
        assert_eq!(num(1.0), "1");
        assert_eq!(le_matcher(1.0), "le=~`1|1\\.0`");
        assert_eq!(le_matcher(0.5), "le=\"0.5\"");
        assert_eq!(
            window_name(std::time::Duration::from_secs(30 * 86_400)),
            "30d"
        );
    }
}
