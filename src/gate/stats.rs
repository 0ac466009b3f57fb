//! The fixed-N gate's statistics: bootstrap 95% confidence intervals of a figure,
//! and verdicts that do not flap on noise — a relative limit fails only when the whole interval
//! of the candidate/baseline ratio is past it, and is `inconclusive` when the interval straddles
//! it. Pure functions over samples; a fixed seed makes every verdict reproducible.

use serde::Serialize;

use super::sample::{run_value, value, Sample};
use crate::config::gate::{Figure, Metric, Op, Relative, Similarity, Slo};

use crate::timeline::nearest_rank;

const RESAMPLES: usize = 2000;

/// `n` indices drawn with replacement from `0..n`.
fn draw(rng: &mut fastrand::Rng, n: usize) -> Vec<usize> {
    (0..n).map(|_| rng.usize(..n)).collect()
}

fn pick<'a>(idx: &[usize], s: &[&'a Sample]) -> Vec<&'a Sample> {
    idx.iter().map(|&i| s[i]).collect()
}

fn resample<'a>(rng: &mut fastrand::Rng, s: &[&'a Sample]) -> Vec<&'a Sample> {
    pick(&draw(rng, s.len()), s)
}

fn interval(mut v: Vec<f64>) -> Option<(f64, f64)> {
    v.retain(|x| x.is_finite());
    if v.len() < RESAMPLES / 2 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some((nearest_rank(&v, 0.025), nearest_rank(&v, 0.975)))
}

/// Bootstrap 95% interval of a figure (whole runs are resampled, so pooled gaps stay honest).
pub fn ci(figure: Figure, samples: &[&Sample]) -> Option<(f64, f64)> {
    if samples.len() < 2 {
        return None;
    }
    let mut rng = fastrand::Rng::with_seed(0x6761_7465);
    interval(
        (0..RESAMPLES)
            .filter_map(|_| value(figure, &resample(&mut rng, samples)))
            .collect(),
    )
}

/// Bootstrap 95% interval of candidate / baseline. When the two sides are `paired` (sample i of
/// each ran back to back, as the live gate interleaves them) whole pairs are resampled, so a
/// slow spell that hit both alike stays matched and does not widen the interval; otherwise (a
/// stored baseline) each side is resampled on its own.
pub fn ratio_ci(
    figure: Figure,
    cand: &[&Sample],
    base: &[&Sample],
    paired: bool,
) -> Option<(f64, f64)> {
    if cand.len() < 2 || base.len() < 2 {
        return None;
    }
    let paired = paired && cand.len() == base.len();
    let mut rng = fastrand::Rng::with_seed(0x7261_7469);
    let ratios = (0..RESAMPLES).filter_map(|_| {
        let (c, b) = if paired {
            let idx = draw(&mut rng, cand.len());
            (pick(&idx, cand), pick(&idx, base))
        } else {
            (resample(&mut rng, cand), resample(&mut rng, base))
        };
        let (c, b) = (value(figure, &c)?, value(figure, &b)?);
        (b != 0.0).then(|| c / b)
    });
    interval(ratios.collect())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Inconclusive,
    /// Not judged: a relative limit without a baseline. Never fails the gate; `--require-baseline`
    /// refuses to start instead.
    Skipped,
}

/// The judgement of one limit, with the numbers behind it.
#[derive(Debug, Clone, Serialize)]
pub struct LimitReport {
    pub name: String,
    /// `slo` or `vs_baseline`.
    pub kind: &'static str,
    pub limit: String,
    pub candidate: Option<f64>,
    pub candidate_ci: Option<(f64, f64)>,
    pub baseline: Option<f64>,
    pub baseline_ci: Option<(f64, f64)>,
    pub ratio: Option<f64>,
    pub ratio_ci: Option<(f64, f64)>,
    pub verdict: Verdict,
    /// Whether this limit makes the gate fail (a failure, or inconclusive under `fail`).
    pub failing: bool,
    /// About how many samples per side would settle an inconclusive limit (fixed N only).
    pub samples_needed: Option<u32>,
    /// Samples per side when the verdict was reached.
    pub samples_used: u32,
    /// Whether the verdict came as soon as the interval allowed, or at the cap.
    pub stopped: Stopped,
    pub message: String,
    /// The candidate's failed runs behind a failing limit, at most [`FAILED_RUNS`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed_runs: Vec<FailedRun>,
}

/// Why sampling ended for a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stopped {
    /// The interval lay wholly past or wholly within the limit.
    Decided,
    /// The samples ran out first: `--max-samples`, or the fixed `--samples N`.
    Cap,
    /// Another limit failed first, and the gate stopped sampling there (see `--keep-sampling`).
    Early,
}

/// A failed run named in a report: its request id and what went wrong.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedRun {
    pub request_id: String,
    pub sentence: String,
}

/// How many failed runs a failing limit names.
pub const FAILED_RUNS: usize = 5;

impl LimitReport {
    /// Names the runs behind this limit when it fails: those with the counted outcome for an
    /// outcome count, the failed runs for the success rate, and for a latency or decode-speed
    /// limit the candidate's worst runs by that figure (the slowest first), with it.
    pub fn with_failed_runs(mut self, figure: Figure, cand: &[&Sample]) -> LimitReport {
        if !self.failing {
            return self;
        }
        let named = |s: &Sample, sentence| FailedRun {
            request_id: s.request_id.clone(),
            sentence,
        };
        self.failed_runs = match figure {
            Figure::Quantile(metric, _) => {
                let mut worst: Vec<(f64, &Sample)> = cand
                    .iter()
                    .filter_map(|s| run_value(metric, s).map(|v| (v, *s)))
                    .collect();
                // Worst first: the longest latency, the slowest decode.
                match metric {
                    Metric::TokensPerSecond => worst.sort_by(|a, b| a.0.total_cmp(&b.0)),
                    _ => worst.sort_by(|a, b| b.0.total_cmp(&a.0)),
                }
                worst
                    .into_iter()
                    .take(FAILED_RUNS)
                    .map(|(v, s)| {
                        let figure = format!("{} {}", metric.as_str(), show(figure, v));
                        let sentence = match s.success {
                            true => figure,
                            false => format!("{figure}; {}", s.sentence()),
                        };
                        named(s, sentence)
                    })
                    .collect()
            }
            Figure::OutcomeCount(o) => cand
                .iter()
                .filter(|s| s.outcome == o.as_str())
                .take(FAILED_RUNS)
                .map(|s| named(s, s.sentence()))
                .collect(),
            Figure::SuccessRate => cand
                .iter()
                .filter(|s| !s.success)
                .take(FAILED_RUNS)
                .map(|s| named(s, s.sentence()))
                .collect(),
            // Named from the pairs when judged (see `decide::similarity`).
            Figure::AnswerSimilarity(_) => std::mem::take(&mut self.failed_runs),
        };
        self
    }
}

/// Formats a figure's value for people: durations for latencies, plain numbers otherwise.
pub fn show(figure: Figure, v: f64) -> String {
    if figure.is_latency() {
        if v < 1.0 {
            format!("{:.0}ms", v * 1000.0)
        } else {
            format!("{v:.2}s")
        }
    } else if matches!(figure, Figure::OutcomeCount(_)) {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// An absolute limit as people read it, with its operator even where the config left it implied
/// (`ttft_p95: 2s` is `<= 2s`): a bare `2s` in a report does not say which side passes.
pub fn slo_limit(slo: &Slo) -> String {
    slo_text(slo.op, &slo.text)
}

/// A bound as written (`0.8`, `>= 0.8`) with its operator spelled out.
pub fn slo_text(op: Op, text: &str) -> String {
    let op = match op {
        Op::Le => "<=",
        Op::Lt => "<",
        Op::Ge => ">=",
        Op::Gt => ">",
    };
    let bound = text.trim().trim_start_matches(['<', '>', '=']).trim();
    format!("{op} {bound}")
}

/// An absolute limit, decided on the candidate's observed figure (the interval is shown).
pub fn judge_slo(slo: &Slo, cand: &[&Sample]) -> LimitReport {
    let v = value(slo.figure, cand);
    let limit = slo_limit(slo);
    let (verdict, message) = match v {
        None => (
            Verdict::Fail,
            format!("{}: nothing measured on the candidate", slo.name),
        ),
        Some(v) => {
            let ok = match slo.op {
                Op::Le => v <= slo.value,
                Op::Lt => v < slo.value,
                Op::Ge => v >= slo.value,
                Op::Gt => v > slo.value,
            };
            let shown = show(slo.figure, v);
            if ok {
                (
                    Verdict::Pass,
                    format!("{} {shown} is within {limit}", slo.name),
                )
            } else {
                (
                    Verdict::Fail,
                    format!("{} {shown} is past {limit}", slo.name),
                )
            }
        }
    };
    LimitReport {
        name: slo.name.clone(),
        kind: "slo",
        limit,
        candidate: v,
        candidate_ci: if matches!(slo.figure, Figure::Quantile(..)) {
            ci(slo.figure, cand)
        } else {
            None
        },
        baseline: None,
        baseline_ci: None,
        ratio: None,
        ratio_ci: None,
        failing: verdict == Verdict::Fail,
        verdict,
        samples_needed: None,
        samples_used: cand.len() as u32,
        stopped: Stopped::Cap,
        message,
        failed_runs: Vec::new(),
    }
    .with_failed_runs(slo.figure, cand)
}

/// A relative limit: the 95% interval of candidate/baseline against the allowed change
/// (`paired`: see [`ratio_ci`]).
pub fn judge_relative(
    rel: &Relative,
    cand: &[&Sample],
    base: &[&Sample],
    paired: bool,
    inconclusive_fails: bool,
) -> LimitReport {
    let (c, b) = (value(rel.figure, cand), value(rel.figure, base));
    let bound = 1.0 + rel.change;
    let ratio = match (c, b) {
        (Some(c), Some(b)) if b != 0.0 => Some(c / b),
        _ => None,
    };
    let rci = ratio_ci(rel.figure, cand, base, paired);
    let worse_up = rel.figure.higher_is_worse();
    let mut needed = None;
    let (verdict, message) = match (ratio, rci) {
        (None, _) | (_, None) => (
            Verdict::Fail,
            format!(
                "{}: cannot compare (nothing measured on one side)",
                rel.name
            ),
        ),
        (Some(r), Some((lo, hi))) => {
            let (past, within) = if worse_up {
                (lo > bound, hi <= bound)
            } else {
                (hi < bound, lo >= bound)
            };
            let shown = format!("{} ratio {r:.2} (95% CI {lo:.2}-{hi:.2})", rel.name);
            if past {
                (Verdict::Fail, format!("{shown} is past {}", rel.text))
            } else if within {
                (Verdict::Pass, format!("{shown} is within {}", rel.text))
            } else {
                // The interval narrows as 1/sqrt(n): the n at which the half of it that reaches
                // across the bound would clear it (the lower half when the ratio is above).
                let half = if r > bound { r - lo } else { hi - r };
                let gap = (r - bound).abs();
                let n = cand.len().min(base.len()) as f64;
                needed = Some(if gap > 0.0 {
                    (n * (half / gap).powi(2)).ceil().min(1e6) as u32
                } else {
                    1_000_000
                });
                (
                    Verdict::Inconclusive,
                    format!(
                        "{shown} straddles {}; about {} samples per side would settle it",
                        rel.text,
                        needed.unwrap_or(0)
                    ),
                )
            }
        }
    };
    LimitReport {
        name: rel.name.clone(),
        kind: "vs_baseline",
        limit: rel.text.clone(),
        candidate: c,
        candidate_ci: ci(rel.figure, cand),
        baseline: b,
        baseline_ci: ci(rel.figure, base),
        ratio,
        ratio_ci: rci,
        failing: verdict == Verdict::Fail
            || (verdict == Verdict::Inconclusive && inconclusive_fails),
        verdict,
        samples_needed: needed,
        samples_used: cand.len().min(base.len()) as u32,
        stopped: Stopped::Cap,
        message,
        failed_runs: Vec::new(),
    }
    .with_failed_runs(rel.figure, cand)
}

/// A relative limit that could not be judged: there is no baseline to compare with.
pub fn skip_relative(rel: &Relative, cand: &[&Sample]) -> LimitReport {
    let mut r = skipped(
        &rel.name,
        rel.text.clone(),
        cand,
        format!(
            "{} {}: skipped, no baseline (--baseline-target T or --baseline FILE)",
            rel.name, rel.text
        ),
    );
    r.candidate = value(rel.figure, cand);
    r.candidate_ci = ci(rel.figure, cand);
    r
}

/// An `answer_similarity` limit with no answers to pair: no baseline, or a baseline file
/// (which keeps no answers).
pub fn skip_similarity(l: &Similarity, cand: &[&Sample]) -> LimitReport {
    skipped(
        &l.name,
        slo_text(l.op, &l.text),
        cand,
        format!(
            "{} {}: skipped, no answers to pair (--baseline-target T; a baseline file keeps no answers)",
            l.name, l.text
        ),
    )
}

/// A `vs_baseline` limit left unjudged, saying why.
fn skipped(name: &str, limit: String, cand: &[&Sample], message: String) -> LimitReport {
    let mut r = blank(name, "vs_baseline", limit, cand);
    r.verdict = Verdict::Skipped;
    r.stopped = Stopped::Cap;
    r.message = message;
    r
}

/// A report to fill in, decided until found otherwise.
pub(crate) fn blank(
    name: &str,
    kind: &'static str,
    limit: String,
    cand: &[&Sample],
) -> LimitReport {
    LimitReport {
        name: name.to_string(),
        kind,
        limit,
        candidate: None,
        candidate_ci: None,
        baseline: None,
        baseline_ci: None,
        ratio: None,
        ratio_ci: None,
        verdict: Verdict::Pass,
        failing: false,
        samples_needed: None,
        samples_used: cand.len() as u32,
        stopped: Stopped::Decided,
        message: String::new(),
        failed_runs: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::gate::{parse_relative, parse_slo};

    fn s(ttft: f64, outcome: &str) -> Sample {
        Sample {
            request_id: String::new(),
            outcome: outcome.into(),
            success: outcome == "ok",
            ttft_ms: Some(ttft),
            answer_ttft_ms: Some(ttft),
            e2e_ms: Some(ttft * 3.0),
            tpot_ms: Some(10.0),
            tokens_per_second: Some(100.0),
            itl_gaps_ms: vec![10.0, 12.0],
            error: None,
            failed_checks: Vec::new(),
            answer: None,
        }
    }

    fn refs(v: &[Sample]) -> Vec<&Sample> {
        v.iter().collect()
    }

    #[test]
    fn figures_from_samples() {
        let v: Vec<Sample> = (1..=20)
            .map(|i| s(i as f64 * 10.0, if i == 3 { "repetition" } else { "ok" }))
            .collect();
        let r = refs(&v);
        assert_eq!(value(Figure::parse("ttft_p50").unwrap(), &r), Some(0.1));
        assert_eq!(value(Figure::parse("ttft_p95").unwrap(), &r), Some(0.19));
        assert_eq!(
            value(Figure::parse("success_rate").unwrap(), &r),
            Some(0.95)
        );
        assert_eq!(
            value(Figure::parse("outcome.repetition").unwrap(), &r),
            Some(1.0)
        );
        assert_eq!(value(Figure::parse("itl_p99").unwrap(), &r), Some(0.012));
        let (lo, hi) = ci(Figure::parse("ttft_p50").unwrap(), &r).unwrap();
        assert!(lo < 0.1 && hi > 0.1, "{lo} {hi}");
    }

    #[test]
    fn answer_ttft_is_its_own_figure() {
        // A reasoning model: the first token at 100 ms, the answer after 800 ms of thinking.
        let v: Vec<Sample> = (0..20)
            .map(|_| Sample {
                answer_ttft_ms: Some(900.0),
                ..s(100.0, "ok")
            })
            .collect();
        let r = refs(&v);
        assert_eq!(value(Figure::parse("ttft_p95").unwrap(), &r), Some(0.1));
        assert_eq!(
            value(Figure::parse("answer_ttft_p95").unwrap(), &r),
            Some(0.9)
        );
        let slo = judge_slo(&parse_slo("answer_ttft_p95", "500ms").unwrap(), &r);
        assert_eq!(slo.message, "answer_ttft_p95 900ms is past <= 500ms");
        assert!(judge_slo(&parse_slo("ttft_p95", "500ms").unwrap(), &r)
            .message
            .contains("within"));
    }

    #[test]
    fn relative_limits_fail_pass_or_stay_inconclusive() {
        let base: Vec<Sample> = (0..20).map(|i| s(100.0 + (i % 5) as f64, "ok")).collect();
        let rel = parse_relative("ttft_p50", "+20%").unwrap();
        let slow: Vec<Sample> = (0..20).map(|i| s(200.0 + (i % 5) as f64, "ok")).collect();
        let r = judge_relative(&rel, &refs(&slow), &refs(&base), false, true);
        assert_eq!(r.verdict, Verdict::Fail, "{}", r.message);
        let same: Vec<Sample> = (0..20).map(|i| s(101.0 + (i % 5) as f64, "ok")).collect();
        let r = judge_relative(&rel, &refs(&same), &refs(&base), false, true);
        assert_eq!(r.verdict, Verdict::Pass, "{}", r.message);
        // Widely spread, centred on the limit: neither pass nor fail.
        let noisy: Vec<Sample> = (0..20)
            .map(|i| s(40.0 + (i * 9 % 20) as f64 * 9.0, "ok"))
            .collect();
        let r = judge_relative(&rel, &refs(&noisy), &refs(&base), false, true);
        assert_eq!(r.verdict, Verdict::Inconclusive, "{}", r.message);
        assert!(r.failing && r.samples_needed.unwrap() > 20, "{r:?}");
        assert!(!judge_relative(&rel, &refs(&noisy), &refs(&base), false, false).failing);
    }

    #[test]
    fn pairs_that_drift_together_stay_matched() {
        // Every pair ran in its own slow or fast spell (factor 1 to 3), the candidate 2% slower
        // than the baseline within each pair.
        let spell = |i: usize| 1.0 + (i * 7 % 20) as f64 / 10.0;
        let base: Vec<Sample> = (0..20).map(|i| s(100.0 * spell(i), "ok")).collect();
        let cand: Vec<Sample> = (0..20).map(|i| s(102.0 * spell(i), "ok")).collect();
        let rel = parse_relative("ttft_p50", "+20%").unwrap();
        let paired = judge_relative(&rel, &refs(&cand), &refs(&base), true, true);
        assert_eq!(paired.verdict, Verdict::Pass, "{}", paired.message);
        let (lo, hi) = paired.ratio_ci.unwrap();
        assert!(lo <= 1.02 && 1.02 <= hi && hi - lo < 0.05, "{lo}-{hi}");
        // The same figures taken as two unrelated sets cannot tell.
        let apart = judge_relative(&rel, &refs(&cand), &refs(&base), false, true);
        assert_eq!(apart.verdict, Verdict::Inconclusive, "{}", apart.message);
        // Unequal sides cannot be paired: resampled apart.
        let short = judge_relative(&rel, &refs(&cand[..19]), &refs(&base), true, true);
        assert_eq!(short.verdict, Verdict::Inconclusive, "{}", short.message);
    }

    #[test]
    fn samples_needed_measures_the_half_that_reaches_the_bound() {
        // The interval is lopsided (a long upper tail), so using the wrong half shows.
        let skew = |i: usize| {
            if i.is_multiple_of(3) {
                2.5
            } else {
                1.0 + (i % 5) as f64 / 8.0
            }
        };
        let base: Vec<Sample> = (0..12).map(|i| s(100.0 * skew(i), "ok")).collect();
        let cases = [
            // tokens/s: lower is worse; ratio above the bound, its lower half reaches down.
            ("tokens_per_second_p50", "-15%", 0.95),
            // tokens/s: ratio below the bound, its upper half reaches up.
            ("tokens_per_second_p50", "-15%", 0.80),
            // ttft: higher is worse; ratio below the bound, its upper half reaches up.
            ("ttft_p50", "+10%", 1.05),
            // ttft: ratio above the bound, its lower half reaches down.
            ("ttft_p50", "+10%", 1.15),
        ];
        for (figure, limit, k) in cases {
            let with = |v: f64| {
                let mut x = s(v, "ok");
                x.tokens_per_second = Some(v);
                x
            };
            let b: Vec<Sample> = base.iter().map(|x| with(x.ttft_ms.unwrap())).collect();
            let c: Vec<Sample> = (0..12)
                .map(|i| with(100.0 * k * skew((i + 2) % 12)))
                .collect();
            let rel = parse_relative(figure, limit).unwrap();
            let r = judge_relative(&rel, &refs(&c), &refs(&b), false, true);
            assert_eq!(
                r.verdict,
                Verdict::Inconclusive,
                "{figure} {k}: {}",
                r.message
            );
            let (ratio, (lo, hi)) = (r.ratio.unwrap(), r.ratio_ci.unwrap());
            let bound = 1.0 + rel.change;
            let half = if ratio > bound {
                ratio - lo
            } else {
                hi - ratio
            };
            let want = (12.0 * (half / (ratio - bound)).powi(2)).ceil() as u32;
            assert_eq!(r.samples_needed, Some(want), "{figure} {k}: {}", r.message);
        }
    }

    #[test]
    fn slo_on_the_observed_figure() {
        let v: Vec<Sample> = (0..10).map(|_| s(2500.0, "ok")).collect();
        let r = judge_slo(&parse_slo("ttft_p95", "2s").unwrap(), &refs(&v));
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(r.message, "ttft_p95 2.50s is past <= 2s");
        assert_eq!(r.limit, "<= 2s");
        let r = judge_slo(&parse_slo("success_rate", ">=0.95").unwrap(), &refs(&v));
        assert_eq!(r.limit, ">= 0.95");
        let r = judge_slo(&parse_slo("success_rate", ">= 0.95").unwrap(), &refs(&v));
        assert_eq!(r.verdict, Verdict::Pass);
        let r = judge_slo(&parse_slo("ttft_p95", "2s").unwrap(), &[]);
        assert_eq!(r.verdict, Verdict::Fail);
    }

    #[test]
    fn samples_round_trip_through_json() {
        let a = s(123.0, "ok");
        let b: Sample = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(a, b);
    }
}
