//! `report`: a results log (its rotated files included) summarised per (probe, target), as a
//! table, Markdown (for `$GITHUB_STEP_SUMMARY` or a weekly report) or JSON.

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{ReportArgs, ReportFormat};
use crate::summary::{summarise, PairSummary, Summary};

pub(super) fn report(args: &ReportArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let since = match args.since {
        Some(d) => Some(
            jiff::Timestamp::now()
                .checked_sub(jiff::SignedDuration::try_from(d)?)
                .context("--since reaches before the year -9999")?,
        ),
        None => None,
    };
    let summary = summarise(&args.log, since)
        .with_context(|| format!("cannot read the results log {}", args.log.display()))?;
    let text = match args.format {
        ReportFormat::Json => {
            let mut s = serde_json::to_string_pretty(&summary)?;
            s.push('\n');
            s
        }
        ReportFormat::Table => table(&summary),
        ReportFormat::Markdown => markdown(&summary),
    };
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn ms(v: Option<f64>) -> String {
    match v {
        Some(x) if x >= 10_000.0 => format!("{:.1}s", x / 1000.0),
        Some(x) => format!("{x:.0}ms"),
        None => "-".into(),
    }
}

fn outcomes(p: &PairSummary) -> String {
    let failed: Vec<String> = p
        .outcomes
        .iter()
        .filter(|(o, _)| o.as_str() != "ok")
        .map(|(o, n)| format!("{o} {n}"))
        .collect();
    if failed.is_empty() {
        "-".into()
    } else {
        failed.join(", ")
    }
}

const HEADER: [&str; 11] = [
    "PROBE",
    "TARGET",
    "RUNS",
    "SUCCESS",
    "TTFT P50",
    "TTFT P95",
    "TTFT P99",
    "TOK/S P50",
    "E2E P95",
    "INCIDENTS",
    "FAILED",
];

fn rows(s: &Summary) -> Vec<[String; 11]> {
    s.pairs
        .iter()
        .map(|p| {
            [
                match &p.rung {
                    Some(rung) => format!("{}@{rung}", p.probe),
                    None => p.probe.clone(),
                },
                p.target.clone(),
                p.runs.to_string(),
                format!("{:.1}%", p.success_rate * 100.0),
                ms(p.ttft_p50_ms),
                ms(p.ttft_p95_ms),
                ms(p.ttft_p99_ms),
                p.tokens_per_second_p50
                    .map_or("-".into(), |x| format!("{x:.1}")),
                ms(p.e2e_p95_ms),
                p.incidents.to_string(),
                outcomes(p),
            ]
        })
        .collect()
}

fn span(s: &Summary) -> String {
    match (s.first_run, s.last_run) {
        (Some(a), Some(b)) => format!("runs from {a} to {b}"),
        _ => "no runs".into(),
    }
}

fn table(s: &Summary) -> String {
    let rows = rows(s);
    let mut widths = HEADER.map(|h| h.len());
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &[String]| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                let _ = write!(l, "{c:<w$}  ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&mut out, &HEADER.map(String::from));
    for r in &rows {
        line(&mut out, r);
    }
    let _ = writeln!(out, "\n{}", span(s));
    if !s.incidents.is_empty() {
        let _ = writeln!(out, "\nINCIDENTS");
        for i in &s.incidents {
            let _ = writeln!(
                out,
                "{}  {}  {}  {}  {}",
                i.started_at,
                i.target,
                serde_plain(&i.state),
                end(i),
                i.first_error
            );
        }
    }
    if !s.latest_failures.is_empty() {
        let _ = writeln!(out, "\nLATEST FAILURES");
        for f in &s.latest_failures {
            let _ = writeln!(
                out,
                "{}  {} -> {}  {}  {}",
                f.failure.started_at, f.probe, f.target, f.failure.request_id, f.failure.error
            );
        }
    }
    if s.skipped_lines > 0 {
        let _ = writeln!(
            out,
            "\n{} lines were not records and were skipped",
            s.skipped_lines
        );
    }
    out
}

fn serde_plain(v: &impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

fn end(i: &crate::sinks::incidents::Incident) -> String {
    match i.ended_at {
        Some(_) => format!(
            "resolved after {}",
            crate::util::human_duration(std::time::Duration::from_secs(
                i.duration_seconds.max(0) as u64
            ))
        ),
        None => "open".into(),
    }
}

/// Markdown cells: a pipe or a line break inside one would end it.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn markdown(s: &Summary) -> String {
    let mut out = String::from("## LLM canary report\n\n");
    let _ = writeln!(out, "{}.\n", span(s));
    let header: Vec<&str> = HEADER.to_vec();
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        header
            .iter()
            .enumerate()
            .map(|(i, _)| if (2..10).contains(&i) {
                "---:|"
            } else {
                "---|"
            })
            .collect::<String>()
    );
    for r in rows(s) {
        let cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    if !s.incidents.is_empty() {
        out.push_str("\n### Incidents\n\n| started | target | state | end | first error |\n|---|---|---|---|---|\n");
        for i in &s.incidents {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                i.started_at,
                cell(&i.target),
                serde_plain(&i.state),
                end(i),
                cell(&i.first_error)
            );
        }
    }
    if !s.latest_failures.is_empty() {
        out.push_str("\n### Latest failures\n\n| started | probe | target | request id | sentence |\n|---|---|---|---|---|\n");
        for f in &s.latest_failures {
            let _ = writeln!(
                out,
                "| {} | {} | {} | `{}` | {} |",
                f.failure.started_at,
                cell(&f.probe),
                cell(&f.target),
                cell(&f.failure.request_id),
                cell(&f.failure.error)
            );
        }
    }
    out
}
