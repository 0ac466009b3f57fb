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
    if let Some(e) = &r.judged.error {
        return e.clone();
    }
    if r.judged.failed_checks.is_empty() {
        return cache_detail(r);
    }
    let names: Vec<&str> = r.judged.failed_checks.iter().map(|o| o.as_str()).collect();
    format!("failed: {}", names.join(", "))
}

/// A cache check's run: which one, and what the warm one showed.
fn cache_detail(r: &ProbeResult) -> String {
    use crate::probe::cache_check::CachePhase;
    match r.context.cache_phase() {
        Some(CachePhase::Cold) => "cache check: cold".into(),
        Some(CachePhase::Warm) => {
            let figures = r.context.cache_check.map(|c| c.figures).unwrap_or_default();
            let ratio = figures.hit_ratio.map_or("no cached count".into(), |x| {
                format!("{:.1}% cached", x * 100.0)
            });
            let speedup = figures
                .ttft_speedup
                .map_or(String::new(), |x| format!(", {x:.2}x sooner"));
            format!("cache check: warm, {ratio}{speedup}")
        }
        None => String::new(),
    }
}

pub(crate) fn render(results: &[ProbeResult]) -> String {
    let header = [
        "PROBE", "TARGET", "OUTCOME", "TTFT", "E2E", "TOK/S", "TOKENS", "ITL P99", "FINISH",
        "DETAIL",
    ];
    let rows: Vec<[String; 10]> = results
        .iter()
        .map(|r| {
            [
                match r.id.rung.map(|r| r.size) {
                    Some(rung) => format!("{}@{rung}", r.id.probe),
                    None => r.id.probe.clone(),
                },
                r.id.target.clone(),
                r.judged.outcome.to_string(),
                ms(r.measured.figures.ttft_ms),
                ms(r.measured.figures.e2e_ms),
                num(r.measured.figures.tokens_per_second),
                r.measured
                    .output_tokens
                    .map_or("-".into(), |n| n.to_string()),
                ms(r.measured.figures.itl_p99_ms),
                r.measured
                    .reading
                    .finish_reason
                    .clone()
                    .unwrap_or_else(|| "-".into()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::cache_check::{CacheFigures, CachePhase, CacheRun};

    #[test]
    fn a_cache_checks_runs_say_which_and_what_the_warm_one_showed() {
        let mut r = ProbeResult::example();
        assert_eq!(detail(&r), "");
        let mut run = |phase, hit_ratio, ttft_speedup| {
            r.context.cache_check = Some(CacheRun {
                phase,
                figures: CacheFigures {
                    hit_ratio,
                    ttft_speedup,
                },
            });
            detail(&r)
        };
        assert_eq!(run(CachePhase::Cold, None, None), "cache check: cold");
        assert_eq!(
            run(CachePhase::Warm, None, Some(2.3)),
            "cache check: warm, no cached count, 2.30x sooner"
        );
        assert_eq!(
            run(CachePhase::Warm, Some(0.999), Some(2.3)),
            "cache check: warm, 99.9% cached, 2.30x sooner"
        );
    }
}
