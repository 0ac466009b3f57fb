//! The terminal table of `once` and `demo`: one row per (probe, target), or per rung of a
//! context ladder (`probe@2048`), the figures an on-call engineer looks at first, and why a run
//! failed.

use crate::result::ProbeResult;

fn ms(v: Option<f64>) -> String {
    match v {
        Some(x) if x >= 10_000.0 => format!("{:.1}s", x / 1000.0),
        Some(x) => format!("{x:.0}ms"),
        None => "-".into(),
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.1}"))
}

/// Why a run failed, in a few words: the transport error, or the failed checks.
fn detail(r: &ProbeResult) -> String {
    if let Some(e) = &r.error {
        return e.clone();
    }
    if r.failed_checks.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = r.failed_checks.iter().map(|o| o.as_str()).collect();
    format!("failed: {}", names.join(", "))
}

pub fn render(results: &[ProbeResult]) -> String {
    let header = [
        "PROBE", "TARGET", "OUTCOME", "TTFT", "E2E", "TOK/S", "TOKENS", "ITL P99", "FINISH",
        "DETAIL",
    ];
    let rows: Vec<[String; 10]> = results
        .iter()
        .map(|r| {
            [
                match r.rung {
                    Some(rung) => format!("{}@{rung}", r.probe),
                    None => r.probe.clone(),
                },
                r.target.clone(),
                r.outcome.to_string(),
                ms(r.figures.ttft_ms),
                ms(r.figures.e2e_ms),
                num(r.figures.tokens_per_second),
                r.output_tokens.map_or("-".into(), |n| n.to_string()),
                ms(r.figures.itl_p99_ms),
                r.finish_reason.clone().unwrap_or_else(|| "-".into()),
                detail(r),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let last = cells.len() - 1;
        for (i, c) in cells.iter().enumerate() {
            if i == last {
                out.push_str(c);
            } else {
                let pad = widths[i] - c.chars().count();
                out.push_str(c);
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    let ok = results.iter().filter(|r| r.success()).count();
    out.push_str(&format!("\n{ok} of {} probe runs ok\n", results.len()));
    out
}
