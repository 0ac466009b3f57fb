//! `rules`: a config's `slo:` objectives → Prometheus recording rules and multiwindow,
//! multi-burn-rate alerts (the Google SRE workbook's scheme, as sloth and pyrra generate it).
//!
//! Per target and objective (availability, or a latency figure at or under a bound), the error
//! ratio is recorded over the windows the alerts read; the alerts page at 14.4× the budget's
//! burn over 1 h and 5 m (P0), 6× over 6 h and 30 m (P1), and open a ticket at 1× over 3 d and
//! 6 h (P2), all held while the target is in a maintenance window. Goodput (runs that succeeded
//! and met every latency objective, of all runs) is recorded beside them.

use std::fmt::Write;

use crate::config::{Config, LatencyObjective, Slo, Target};

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

fn runs(target: &str, extra: &str, w: &str) -> String {
    format!(
        "sum by (target) (rate(llm_canary_probe_runs_total{{target=\"{target}\"{extra}}}[{w}]))"
    )
}

/// The share of runs that failed over `w`: absent while the window holds no run.
fn availability_errors(target: &str, w: &str) -> String {
    format!(
        "1 - (\n  ({ok} or {all} * 0)\n  / ({all} > 0)\n)",
        ok = runs(target, ",outcome=\"ok\"", w),
        all = runs(target, "", w)
    )
}

fn latency_good(target: &str, o: &LatencyObjective, w: &str) -> String {
    format!(
        "sum by (target) (rate({h}_bucket{{target=\"{target}\",{le}}}[{w}]))",
        h = o.figure.histogram(),
        le = le_matcher(o.at_most)
    )
}

fn latency_count(target: &str, o: &LatencyObjective, w: &str) -> String {
    format!(
        "sum by (target) (rate({h}_count{{target=\"{target}\"}}[{w}]))",
        h = o.figure.histogram()
    )
}

/// The share of timed runs over `w` slower than the bound.
fn latency_errors(target: &str, o: &LatencyObjective, w: &str) -> String {
    format!(
        "1 - (\n  {good}\n  / ({count} > 0)\n)",
        good = latency_good(target, o, w),
        count = latency_count(target, o, w)
    )
}

/// One objective of a target: its `slo` label value, the share, and its error ratio per window.
struct Objective {
    name: String,
    share: f64,
    what: String,
    errors: Box<dyn Fn(&str) -> String>,
}

fn objectives(t: &Target, slo: &Slo) -> Vec<Objective> {
    let mut out = Vec::new();
    if let Some(a) = slo.availability {
        let target = t.name.clone();
        out.push(Objective {
            name: "availability".into(),
            share: a,
            what: format!("{}% of runs succeed", num(a * 100.0)),
            errors: Box::new(move |w| availability_errors(&target, w)),
        });
    }
    for o in &slo.latency {
        let (target, o) = (t.name.clone(), o.clone());
        out.push(Objective {
            name: format!("{}_le_{}s", o.figure.as_str(), num(o.at_most)),
            share: o.share,
            what: format!(
                "{} <= {}s for {}% of runs",
                o.figure.as_str(),
                num(o.at_most),
                num(o.share * 100.0)
            ),
            errors: Box::new(move |w| latency_errors(&target, &o, w)),
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
fn goodput(t: &str, slo: &Slo, w: &str) -> String {
    let all = runs(t, "", w);
    let mut e = format!("(\n  ({} or {all} * 0)", runs(t, ",outcome=\"ok\"", w));
    for o in &slo.latency {
        let _ = write!(
            e,
            "\n  - (({} - {}) or {all} * 0)",
            latency_count(t, o, w),
            latency_good(t, o, w)
        );
    }
    let _ = write!(e, "\n) / ({all} > 0)");
    format!("clamp_min(\n{}\n, 0)", indent(&e, 2).trim_end())
}

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
        "          summary: \"{{{{ $labels.target }}}} burns its {{{{ $labels.slo }}}} error budget at {{{{ $value | printf \\\"%.1f\\\" }}}}x the sustainable rate over {long} (and over {short})\""
    );
    let _ = writeln!(
        s,
        "          description: \"At over {factor}x the sustainable rate the whole error budget of {{{{ $labels.slo }}}} on {{{{ $labels.target }}}} is gone in {}. Budget left: {{{{ with printf \\\"llm_canary:slo_error_budget_remaining:ratio{{target='%s',slo='%s'}}\\\" $labels.target $labels.slo | query }}}}{{{{ . | first | value | humanizePercentage }}}}{{{{ end }}}}.\"",
        lasts(factor)
    );
    let _ = writeln!(
        s,
        "          value: \"{{{{ $value | printf \\\"%.1f\\\" }}}}x\""
    );
    let _ = writeln!(s, "          baseline: \"{factor}x\"");
    let _ = writeln!(
        s,
        "          runbook_url: \"https://runbooks.example.com/llm-canary#{name}\""
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

/// The rules file for every target with an `slo:`; `None` when no target has one.
pub fn generate(cfg: &Config) -> Option<String> {
    let with_slo: Vec<(&Target, &Slo)> = cfg
        .targets
        .iter()
        .filter_map(|t| t.slo.as_ref().map(|s| (t.as_ref(), s)))
        .collect();
    if with_slo.is_empty() {
        return None;
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Generated by `llm-canary rules -c {}`: do not edit, generate again.\n\
         # Error ratios per target and objective (label slo), burn-rate alerts (P0: 14.4x over 1h\n\
         # and 5m; P1: 6x over 6h and 30m; P2: 1x over 3d and 6h), the error budget left over each\n\
         # objective's window, and goodput. Alerts hold while llm_canary_maintenance is 1.\n\
         groups:\n  - name: llm_canary_slo\n    interval: 30s\n    rules:",
        cfg.path.file_name().map(|f| f.to_string_lossy()).unwrap_or_default()
    );
    for (t, slo) in &with_slo {
        let _ = writeln!(s, "      # --- {} ---", t.name);
        for o in objectives(t, slo) {
            let _ = writeln!(
                s,
                "      # {}: {} over {}",
                o.name,
                o.what,
                window_name(slo.window)
            );
            let labels = [("slo", o.name.as_str())];
            record(
                &mut s,
                "llm_canary:slo_objective:ratio",
                &format!("vector({})", num(o.share)),
                &[("target", t.name.as_str()), ("slo", o.name.as_str())],
            );
            for w in WINDOWS {
                record(
                    &mut s,
                    &format!("llm_canary:slo_errors:ratio_rate{w}"),
                    &(o.errors)(w),
                    &labels,
                );
            }
            record(
                &mut s,
                "llm_canary:slo_errors:ratio_window",
                &(o.errors)(&window_name(slo.window)),
                &labels,
            );
        }
        for w in ["5m", "1h"] {
            record(
                &mut s,
                &format!("llm_canary:goodput_ratio:rate{w}"),
                &goodput(&t.name, slo, w),
                &[],
            );
        }
    }
    let _ = writeln!(
        s,
        "      # --- every target: burn rates, budget left, alerts ---"
    );
    let budget = "on(target, slo) group_left() (1 - llm_canary:slo_objective:ratio)";
    for w in WINDOWS {
        record(
            &mut s,
            &format!("llm_canary:slo_burn_rate:rate{w}"),
            &format!("llm_canary:slo_errors:ratio_rate{w}\n/ {budget}"),
            &[],
        );
    }
    record(
        &mut s,
        "llm_canary:slo_error_budget_remaining:ratio",
        &format!("1 - llm_canary:slo_errors:ratio_window\n/ {budget}"),
        &[],
    );
    for a in &ALERTS {
        alert(&mut s, a);
    }
    Some(s)
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
