//! The gate's outputs: a table for the terminal, Markdown for a CI step summary, JUnit XML (one
//! testcase per probe × limit) for CI test reports. JSON is the report itself, serialized.

use std::fmt::Write;

use super::stats::{LimitReport, Stopped, Verdict};
use super::{GateReport, Plan, ProbeGate};
use crate::config::gate::Figure;

fn fig(l: &LimitReport) -> Option<Figure> {
    Figure::parse(&l.name).ok()
}

fn value(l: &LimitReport, v: Option<f64>, ci: Option<(f64, f64)>) -> String {
    let Some(f) = fig(l) else { return "-".into() };
    match (v, ci) {
        (Some(v), Some((lo, hi))) => format!(
            "{} [{}-{}]",
            super::stats::show(f, v),
            super::stats::show(f, lo),
            upper(hi, |hi| super::stats::show(f, hi))
        ),
        (Some(v), None) => super::stats::show(f, v),
        (None, _) => "-".into(),
    }
}

/// An interval's upper end, or `∞` where the samples do not bound it yet.
fn upper(hi: f64, show: impl Fn(f64) -> String) -> String {
    if hi.is_finite() {
        show(hi)
    } else {
        "∞".into()
    }
}

fn ratio(l: &LimitReport) -> String {
    match (l.ratio, l.ratio_ci) {
        (Some(r), Some((lo, hi))) => {
            format!("{r:.2} [{lo:.2}-{}]", upper(hi, |h| format!("{h:.2}")))
        }
        (Some(r), None) => format!("{r:.2}"),
        _ => "-".into(),
    }
}

fn verdict(l: &LimitReport) -> &'static str {
    match (l.verdict, l.failing) {
        (Verdict::Pass, _) => "pass",
        (Verdict::Fail, _) => "FAIL",
        (Verdict::Inconclusive, true) => "INCONCLUSIVE (fails)",
        (Verdict::Inconclusive, false) => "inconclusive (passes)",
        (Verdict::Skipped, _) => "skipped",
    }
}

/// Samples per side behind a verdict, and why sampling stopped there.
fn samples(p: &ProbeGate, l: &LimitReport) -> String {
    match l.verdict {
        Verdict::Skipped => "-".into(),
        _ => format!("{} ({})", l.samples_used, stopped(p, l)),
    }
}

fn rows(r: &GateReport) -> Vec<[String; 8]> {
    r.limits()
        .map(|(p, l)| {
            [
                p.probe.clone(),
                format!("{} {}", l.name, l.limit),
                value(l, l.candidate, l.candidate_ci),
                value(l, l.baseline, l.baseline_ci),
                ratio(l),
                verdict(l).to_string(),
                samples(p, l),
                match (l.verdict, l.samples_needed) {
                    (Verdict::Skipped, _) => "no baseline".to_string(),
                    (_, Some(n)) => format!("~{n} samples to settle"),
                    (_, None) => String::new(),
                },
            ]
        })
        .collect()
}

fn headline(r: &GateReport) -> String {
    let against = r
        .baseline
        .as_deref()
        .map_or(String::new(), |b| format!(" against {b}"));
    let mut s = format!(
        "gate {}: {}{against}: {} limits, {} failed, {} inconclusive",
        if r.pass { "PASSED" } else { "FAILED" },
        r.target,
        r.limits().count(),
        r.count(Verdict::Fail),
        r.count(Verdict::Inconclusive)
    );
    let skipped = r.count(Verdict::Skipped);
    if skipped > 0 {
        let _ = write!(s, ", {skipped} skipped (no baseline)");
    }
    if let Some(c) = r.cold_start_ms {
        let _ = write!(s, "; cold start {:.1}s", c / 1000.0);
    }
    s
}

/// What the intervals are, in one line.
fn intervals(r: &GateReport) -> String {
    let sequential = r
        .probes
        .iter()
        .any(|p| matches!(p.plan, Plan::Sequential { .. }));
    let fixed = r
        .probes
        .iter()
        .any(|p| matches!(p.plan, Plan::Fixed { .. }));
    let mut parts = Vec::new();
    if sequential {
        parts.push(format!(
            "sequential: anytime-valid confidence sequences, {:.0}% for all limits together",
            (1.0 - r.alpha) * 100.0
        ));
    }
    if fixed {
        parts.push("fixed samples: bootstrap 95% per limit".to_string());
    }
    format!("intervals: {}", parts.join("; "))
}

/// Which failure stopped sampling before the cap, when one did.
fn early(r: &GateReport) -> Option<String> {
    r.stopped_by.as_ref().map(|e| {
        format!(
            "sampling stopped early: {} {} {} failed after {} samples per side (--keep-sampling samples on for a complete report)",
            e.probe, e.name, e.limit, e.samples
        )
    })
}

/// The failed runs behind a failing limit, one line each, indented by `indent`.
fn failed_runs(l: &LimitReport, indent: &str) -> String {
    l.failed_runs
        .iter()
        .map(|f| format!("{indent}{}: {}\n", f.request_id, f.sentence))
        .collect()
}

pub(crate) fn table(r: &GateReport) -> String {
    let header = [
        "PROBE",
        "LIMIT",
        "CANDIDATE [CI]",
        "BASELINE [CI]",
        "RATIO [CI]",
        "VERDICT",
        "SAMPLES",
        "NOTE",
    ];
    let rows = rows(r);
    let mut w = header.map(|h| h.chars().count());
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(header.map(String::from)).chain(rows) {
        let mut line = String::new();
        for (i, c) in row.iter().enumerate() {
            let _ = write!(line, "{c}{}", " ".repeat(w[i] - c.chars().count() + 2));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let _ = writeln!(out, "\n{}\n{}", headline(r), intervals(r));
    if let Some(e) = early(r) {
        let _ = writeln!(out, "{e}");
    }
    for (p, l) in r.limits().filter(|(_, l)| l.failing) {
        let _ = writeln!(out, "  {}: {}", p.probe, l.message);
        out.push_str(&failed_runs(l, "    run "));
    }
    out
}

pub(crate) fn markdown(r: &GateReport) -> String {
    let mut out = format!(
        "## {} llm-canary gate\n\n{}\n\n{}\n\n",
        if r.pass { "✅" } else { "❌" },
        headline(r),
        intervals(r)
    );
    if let Some(e) = early(r) {
        let _ = write!(out, "{e}\n\n");
    }
    out.push_str("| probe | limit | candidate [CI] | baseline [CI] | ratio [CI] | verdict | samples |\n|---|---|---|---|---|---|---|\n");
    for row in rows(r) {
        let cells: Vec<String> = row[..7].iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    let failing: Vec<String> = r
        .limits()
        .filter(|(_, l)| l.failing)
        .map(|(p, l)| {
            let runs = l.failed_runs.iter().map(|f| {
                format!(
                    "\n  - `{}`: {}",
                    f.request_id,
                    f.sentence.replace('|', "\\|")
                )
            });
            format!(
                "- **{}**: {}{}",
                p.probe,
                l.message,
                runs.collect::<String>()
            )
        })
        .collect();
    if !failing.is_empty() {
        let _ = write!(out, "\n{}\n", failing.join("\n"));
    }
    let skipped: Vec<String> = r
        .limits()
        .filter(|(_, l)| l.verdict == Verdict::Skipped)
        .map(|(p, l)| format!("- {}: {}", p.probe, l.message))
        .collect();
    if !skipped.is_empty() {
        let _ = write!(out, "\n**Not judged:**\n{}\n", skipped.join("\n"));
    }
    out
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Why sampling stopped, for people: decided, at the sequential gate's cap, at a fixed N
/// (where there is no cap to reach), or early, when another limit failed.
fn stopped(p: &ProbeGate, l: &LimitReport) -> &'static str {
    match (l.stopped, p.plan) {
        (Stopped::Decided, _) => "decided",
        (Stopped::Early, _) => "early",
        (Stopped::Cap, Plan::Fixed { .. }) => "fixed",
        (Stopped::Cap, Plan::Sequential { .. }) => "cap",
    }
}

pub(crate) fn junit(r: &GateReport) -> String {
    let tests = r.limits().count();
    let failures = r.limits().filter(|(_, l)| l.failing).count();
    let skipped = r.count(Verdict::Skipped);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"llm-canary gate\" tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skipped}\">"
    );
    for p in &r.probes {
        let f = p.limits.iter().filter(|l| l.failing).count();
        let sk = p
            .limits
            .iter()
            .filter(|l| l.verdict == Verdict::Skipped)
            .count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{f}\" skipped=\"{sk}\">",
            xml(&format!("{} on {}", p.probe, r.target)),
            p.limits.len()
        );
        for l in &p.limits {
            let name = xml(&format!("{} {}", l.name, l.limit));
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{name}\"",
                xml(&p.probe)
            );
            if l.verdict == Verdict::Skipped {
                let _ = writeln!(
                    out,
                    ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                    xml(&l.message)
                );
            } else if l.failing {
                let kind = if l.verdict == Verdict::Inconclusive {
                    "inconclusive"
                } else {
                    "limit"
                };
                let _ = writeln!(
                    out,
                    ">\n      <failure type=\"{kind}\" message=\"{}\">{}</failure>\n    </testcase>",
                    xml(&l.message),
                    xml(&format!("{} samples per side, stopped: {}\n{}", l.samples_used, stopped(p, l), failed_runs(l, "run ")))
                );
            } else {
                let _ = writeln!(
                    out,
                    ">\n      <system-out>{} ({} samples per side, stopped: {})</system-out>\n    </testcase>",
                    xml(&l.message),
                    l.samples_used,
                    stopped(p, l)
                );
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// JUnit for a gate that could not start sampling: one failing testcase.
pub(crate) fn junit_not_ready(message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"llm-canary gate\" tests=\"1\" failures=\"1\">\n  <testsuite name=\"gate\" tests=\"1\" failures=\"1\">\n    <testcase classname=\"gate\" name=\"wait-ready\">\n      <failure type=\"not-ready\" message=\"{}\"/>\n    </testcase>\n  </testsuite>\n</testsuites>\n",
        xml(message)
    )
}
