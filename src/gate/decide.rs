//! The sequential gate's verdicts: every limit judged on anytime-valid confidence sequences
//! ([`sequence`]) after each batch. A limit is decided once its interval lies wholly past or
//! wholly within the limit; until then it is open and sampling goes on. Each limit gets its
//! own share of the gate's error rate (see [`alpha_per_limit`]).

use super::sample::{self, Sample};
use super::sequence;
use super::stats::{self, LimitReport, Stopped, Verdict};
use crate::config::gate::{Figure, Op, Relative, Similarity, Slo};

/// The gate's error rate: the chance that any of its verdicts is wrong, all limits together.
pub const GATE_ALPHA: f64 = 0.05;

/// Bonferroni: `limits` judged limits share [`GATE_ALPHA`] equally (a relative limit splits its
/// share again between its two sides).
pub fn alpha_per_limit(limits: usize) -> f64 {
    GATE_ALPHA / limits.max(1) as f64
}

/// Where a limit stands after a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The verdict holds whatever more samples show.
    Decided,
    /// The interval straddles the limit: sampling goes on.
    Open,
    /// An outcome count below its limit: a count of what happened, not an estimate, so it
    /// never keeps sampling going; its verdict is the one at the stop.
    Counting,
}

/// A figure's interval over `samples` at level `alpha`: `(lower, upper)`, 0 and infinity where
/// the samples cannot bound it yet (every gate figure is non-negative). `centre` is where the
/// share's prior sits (the limit for an absolute one).
pub fn interval(figure: Figure, samples: &[&Sample], alpha: f64, centre: f64) -> (f64, f64) {
    match figure {
        Figure::Quantile(metric, q) => {
            let v = sample::values(metric, samples);
            let (lo, hi) = sequence::quantile(&v, f64::from(q) / 100.0, alpha);
            (lo.unwrap_or(0.0), hi.unwrap_or(f64::INFINITY))
        }
        Figure::SuccessRate => {
            let s = samples.iter().filter(|s| s.success).count() as u64;
            sequence::share(s, samples.len() as u64, alpha, centre)
        }
        Figure::OutcomeCount(_) | Figure::AnswerSimilarity(_) => (0.0, f64::INFINITY),
    }
}

/// Where an interval `(lo, hi)` lies against `bound`: past it, within it, or across it.
fn place(lo: f64, hi: f64, bound: f64, higher_is_worse: bool) -> Option<Verdict> {
    let (past, within) = if higher_is_worse {
        (lo > bound, hi <= bound)
    } else {
        (hi < bound, lo >= bound)
    };
    if past {
        Some(Verdict::Fail)
    } else if within {
        Some(Verdict::Pass)
    } else {
        None
    }
}

fn shown(figure: Figure, (lo, hi): (f64, f64)) -> String {
    let hi = if hi.is_finite() {
        stats::show(figure, hi)
    } else {
        "unbounded".into()
    };
    format!("{}-{hi}", stats::show(figure, lo))
}

/// An absolute limit on the candidate.
pub fn slo(slo: &Slo, cand: &[&Sample], alpha: f64, fails: bool) -> (LimitReport, State) {
    if let Figure::OutcomeCount(_) = slo.figure {
        let mut r = stats::judge_slo(slo, cand);
        r.stopped = Stopped::Decided;
        let settled = match r.verdict {
            Verdict::Fail => matches!(slo.op, Op::Le | Op::Lt),
            _ => matches!(slo.op, Op::Ge | Op::Gt),
        };
        return (
            r,
            if settled {
                State::Decided
            } else {
                State::Counting
            },
        );
    }
    let mut r = stats::blank(&slo.name, "slo", stats::slo_limit(slo), cand);
    r.candidate = sample::value(slo.figure, cand);
    if cand.is_empty() {
        r.message = format!("{}: nothing measured on the candidate yet", slo.name);
        return (open(r, fails), State::Open);
    }
    let worse_up = matches!(slo.op, Op::Le | Op::Lt);
    let ci = interval(slo.figure, cand, alpha, slo.value);
    r.candidate_ci = Some(ci);
    let text = format!("{} interval {}", slo.name, shown(slo.figure, ci));
    let placed = place(ci.0, ci.1, slo.value, worse_up);
    let limit = r.limit.clone();
    conclude(r, placed, (&text, &limit), slo.figure, cand, fails)
}

/// A relative limit: candidate over baseline, from each side's interval at half the limit's
/// share — `[c_lo / b_hi, c_hi / b_lo]` holds the ratio whenever both hold their figure.
pub fn relative(
    rel: &Relative,
    cand: &[&Sample],
    base: &[&Sample],
    alpha: f64,
    fails: bool,
) -> (LimitReport, State) {
    let mut r = stats::blank(&rel.name, "vs_baseline", rel.text.clone(), cand);
    let (c, b) = (
        sample::value(rel.figure, cand),
        sample::value(rel.figure, base),
    );
    (r.candidate, r.baseline) = (c, b);
    r.ratio = c.zip(b).filter(|&(_, b)| b != 0.0).map(|(c, b)| c / b);
    let Some(ratio) = r.ratio else {
        r.message = format!("{}: nothing measured on one side yet", rel.name);
        return (open(r, fails), State::Open);
    };
    // The prior must not depend on the samples (it would void the guarantee): success rates
    // worth gating sit high.
    let (cl, ch) = interval(rel.figure, cand, alpha / 2.0, 0.95);
    let (bl, bh) = interval(rel.figure, base, alpha / 2.0, 0.95);
    let ci = (
        if bh > 0.0 { cl / bh } else { 0.0 },
        if bl > 0.0 { ch / bl } else { f64::INFINITY },
    );
    r.candidate_ci = Some((cl, ch));
    r.baseline_ci = Some((bl, bh));
    r.ratio_ci = Some(ci);
    let hi = if ci.1.is_finite() {
        format!("{:.2}", ci.1)
    } else {
        "unbounded".into()
    };
    let text = format!("{} ratio {ratio:.2} (interval {:.2}-{hi})", rel.name, ci.0);
    let placed = place(ci.0, ci.1, 1.0 + rel.change, rel.figure.higher_is_worse());
    conclude(r, placed, (&text, &rel.text), rel.figure, cand, fails)
}

/// `answer_similarity_pNN`: the candidate's answers beside the baseline's, pair by pair (chrF),
/// held to an absolute bound; the interval is the quantile's confidence sequence, as for any
/// quantile. A failing report names the least similar pairs' candidate runs.
pub fn similarity(
    l: &Similarity,
    cand: &[&Sample],
    base: &[&Sample],
    alpha: f64,
    fails: bool,
) -> (LimitReport, State) {
    let figure = l.figure();
    let mut r = stats::blank(&l.name, "vs_baseline", stats::slo_text(l.op, &l.text), cand);
    let mut pairs = sample::similarities(cand, base);
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let sorted: Vec<f64> = pairs.iter().map(|(s, _)| *s).collect();
    let q = f64::from(l.quantile) / 100.0;
    r.samples_used = sorted.len() as u32;
    if sorted.is_empty() {
        r.message = format!("{}: no pair of answers yet", l.name);
        return (open(r, fails), State::Open);
    }
    r.candidate = Some(crate::timeline::nearest_rank(&sorted, q));
    let (lo, hi) = sequence::quantile(&sorted, q, alpha);
    let ci = (lo.unwrap_or(0.0), hi.unwrap_or(1.0));
    r.candidate_ci = Some(ci);
    let text = format!(
        "{} {} (interval {})",
        l.name,
        stats::show(figure, r.candidate.unwrap_or(0.0)),
        shown(figure, ci)
    );
    let bound = l.value;
    let placed = match l.op {
        Op::Gt if ci.1 <= bound => Some(Verdict::Fail),
        Op::Gt if ci.0 > bound => Some(Verdict::Pass),
        _ if ci.1 < bound => Some(Verdict::Fail),
        _ if ci.0 >= bound => Some(Verdict::Pass),
        _ => None,
    };
    let limit = r.limit.clone();
    let (mut r, state) = conclude(r, placed, (&text, &limit), figure, cand, fails);
    if r.failing {
        r.failed_runs = pairs
            .iter()
            .take(stats::FAILED_RUNS)
            .map(|(s, c)| stats::FailedRun {
                request_id: c.request_id.clone(),
                sentence: format!(
                    "similarity {} to the baseline's answer{}",
                    stats::show(figure, *s),
                    if c.success {
                        String::new()
                    } else {
                        format!("; {}", c.sentence())
                    }
                ),
            })
            .collect();
    }
    (r, state)
}

/// Finishes a report from where its interval lies: decided (`past` or `within` the limit) or
/// open (`straddles` it); the message is `what`, that word, and `limit`.
fn conclude(
    mut r: LimitReport,
    placed: Option<Verdict>,
    (what, limit): (&str, &str),
    figure: Figure,
    cand: &[&Sample],
    fails: bool,
) -> (LimitReport, State) {
    let word = match placed {
        Some(Verdict::Fail) => "is past",
        Some(_) => "is within",
        None => "straddles",
    };
    r.message = format!("{what} {word} {limit}");
    match placed {
        Some(v) => {
            r.verdict = v;
            r.failing = v == Verdict::Fail;
            (r.with_failed_runs(figure, cand), State::Decided)
        }
        None => (open(r, fails), State::Open),
    }
}

/// An undecided report: inconclusive, failing the gate under `inconclusive: fail`.
fn open(mut r: LimitReport, fails: bool) -> LimitReport {
    r.verdict = Verdict::Inconclusive;
    r.failing = fails;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::gate::{parse_relative, parse_slo};

    fn runs(ttfts: impl Iterator<Item = f64>) -> Vec<Sample> {
        ttfts
            .enumerate()
            .map(|(i, t)| Sample {
                request_id: format!("r{i}"),
                outcome: "ok".into(),
                success: true,
                ttft_ms: Some(t),
                answer_ttft_ms: Some(t),
                e2e_ms: Some(t * 2.0),
                tpot_ms: Some(10.0),
                tokens_per_second: Some(100.0),
                itl_gaps_ms: vec![10.0],
                error: None,
                failed_checks: Vec::new(),
                answer: None,
            })
            .collect()
    }

    fn uniform(seed: u64, n: usize, scale: f64) -> Vec<Sample> {
        let mut rng = fastrand::Rng::with_seed(seed);
        runs((0..n).map(move |_| scale * (100.0 + 40.0 * rng.f64())))
    }

    #[test]
    fn a_doubled_first_token_fails_and_the_same_passes() {
        let rel = parse_relative("ttft_p95", "+15%").unwrap();
        let base = uniform(1, 100, 1.0);
        let b: Vec<&Sample> = base.iter().collect();
        let slow = uniform(2, 100, 2.0);
        let (r, state) = relative(&rel, &slow.iter().collect::<Vec<_>>(), &b, 0.05, true);
        assert_eq!(
            (r.verdict, state),
            (Verdict::Fail, State::Decided),
            "{}",
            r.message
        );
        let same = uniform(3, 100, 1.0);
        let (r, state) = relative(&rel, &same.iter().collect::<Vec<_>>(), &b, 0.05, true);
        assert_eq!(
            (r.verdict, state),
            (Verdict::Pass, State::Decided),
            "{}",
            r.message
        );
        // Ten samples cannot bound a p95 from above: open, failing under `inconclusive: fail`.
        let few: Vec<&Sample> = b[..10].to_vec();
        let (r, state) = relative(&rel, &few, &few, 0.05, true);
        assert_eq!(
            (r.verdict, state, r.failing),
            (Verdict::Inconclusive, State::Open, true)
        );
        assert!(r.message.contains("unbounded"), "{}", r.message);
    }

    /// Pairs whose answers are the healthy text, or word salad on the candidate's side.
    fn answered(n: usize, salad: bool) -> (Vec<Sample>, Vec<Sample>) {
        let good = "The sky is blue on a clear day because the air scatters the blue part of sunlight more than the red.";
        let bad =
            "YouYouYou wis-__print(1,L_print(You ately Theth ond:: ingly]] Bre ynam_x olt seud";
        let with = |text: &str, i: usize| Sample {
            request_id: format!("r{i}"),
            answer: Some(std::sync::Arc::from(text)),
            ..runs(std::iter::once(100.0)).remove(0)
        };
        let cand = (0..n)
            .map(|i| with(if salad { bad } else { good }, i))
            .collect();
        let base = (0..n).map(|i| with(good, i)).collect();
        (cand, base)
    }

    #[test]
    fn the_same_answers_pass_answer_similarity_and_word_salad_fails_naming_its_runs() {
        let l = match crate::config::gate::parse_vs_baseline("answer_similarity_p50", ">= 0.8") {
            Ok(crate::config::gate::VsBaseline::Similarity(l)) => l,
            other => panic!("{other:?}"),
        };
        fn refs(v: &[Sample]) -> Vec<&Sample> {
            v.iter().collect()
        }
        // Looked at after each batch, as the sequential gate looks: the same answers pass and
        // word salad fails, each within a few batches.
        let batch = super::super::BATCH as usize;
        let decided = |salad: bool| {
            (1..=20)
                .map(|k| {
                    let (c, b) = answered(k * batch, salad);
                    (
                        k * batch,
                        similarity(&l, &refs(&c), &refs(&b), 0.05, true).0,
                    )
                })
                .find(|(_, r)| r.verdict != Verdict::Inconclusive)
                .unwrap()
        };
        let (n, r) = decided(false);
        assert_eq!(r.verdict, Verdict::Pass, "{}", r.message);
        assert!(n <= 3 * batch, "{n}: {}", r.message);
        assert_eq!(r.candidate, Some(1.0));
        let (n, r) = decided(true);
        assert_eq!(r.verdict, Verdict::Fail, "{}", r.message);
        assert!(n <= 3 * batch, "{n}: {}", r.message);
        assert!(r.candidate.unwrap() < 0.2, "{}", r.message);
        assert!(
            r.message.starts_with("answer_similarity_p50 0.1"),
            "{}",
            r.message
        );
        assert_eq!(r.failed_runs.len(), stats::FAILED_RUNS);
        assert!(
            r.failed_runs[0].sentence.starts_with("similarity 0.1")
                && r.failed_runs[0]
                    .sentence
                    .ends_with("to the baseline's answer"),
            "{:?}",
            r.failed_runs[0]
        );
        // A candidate run without an answer counts 0; a baseline run without one is left out.
        let (mut c, mut b) = answered(4, false);
        c[0].answer = None;
        b[1].answer = None;
        let pairs = super::super::sample::similarities(&refs(&c), &refs(&b));
        let got: Vec<f64> = pairs.iter().map(|(s, _)| *s).collect();
        assert_eq!(got, [0.0, 1.0, 1.0]);
        // One pair cannot bound a median: open.
        let (c, b) = answered(1, false);
        let (r, state) = similarity(&l, &refs(&c), &refs(&b), 0.05, true);
        assert_eq!(
            (r.verdict, state, r.failing),
            (Verdict::Inconclusive, State::Open, true)
        );
    }

    #[test]
    fn counts_settle_once_passed_and_never_hold_sampling() {
        let mut v = uniform(4, 20, 1.0);
        let slo_rep = parse_slo("outcome.repetition", "<= 0").unwrap();
        let all: Vec<&Sample> = v.iter().collect();
        assert_eq!(slo(&slo_rep, &all, 0.05, true).1, State::Counting);
        v[3].outcome = "repetition".into();
        v[3].success = false;
        v[3].failed_checks = vec!["repetition".into()];
        let all: Vec<&Sample> = v.iter().collect();
        let (r, state) = slo(&slo_rep, &all, 0.05, true);
        assert_eq!((r.verdict, state), (Verdict::Fail, State::Decided));
        assert_eq!(r.failed_runs[0].request_id, "r3");
        assert_eq!(
            r.failed_runs[0].sentence,
            "repetition: failed checks repetition"
        );
    }

    #[test]
    fn a_failing_latency_limit_names_its_slowest_runs_not_its_failed_ones() {
        let mut v = uniform(4, 100, 1.0);
        v[7].ttft_ms = Some(9000.0);
        v[9].ttft_ms = Some(8000.0);
        v[9].outcome = "repetition".into();
        v[9].success = false;
        v[9].failed_checks = vec!["repetition".into()];
        // A fast failed run is not what a latency limit is about.
        v[11].outcome = "repetition".into();
        v[11].success = false;
        v[11].ttft_ms = Some(1.0);
        let all: Vec<&Sample> = v.iter().collect();
        let (r, _) = slo(&parse_slo("ttft_p95", "50ms").unwrap(), &all, 0.05, true);
        assert_eq!(r.verdict, Verdict::Fail, "{}", r.message);
        let named: Vec<(&str, &str)> = r
            .failed_runs
            .iter()
            .map(|f| (f.request_id.as_str(), f.sentence.as_str()))
            .collect();
        assert_eq!(named.len(), 5);
        assert_eq!(named[0], ("r7", "ttft 9.00s"));
        assert_eq!(
            named[1],
            ("r9", "ttft 8.00s; repetition: failed checks repetition")
        );
        assert!(named.iter().all(|(id, _)| *id != "r11"), "{named:?}");
    }

    #[test]
    fn success_rates_need_enough_runs_to_pass() {
        let rate = parse_slo("success_rate", ">= 0.9").unwrap();
        let v = uniform(5, 200, 1.0);
        let all: Vec<&Sample> = v.iter().collect();
        assert_eq!(slo(&rate, &all[..10], 0.05, true).1, State::Open);
        let (r, state) = slo(&rate, &all, 0.05, true);
        assert_eq!(
            (r.verdict, state),
            (Verdict::Pass, State::Decided),
            "{}",
            r.message
        );
    }

    #[test]
    fn a_candidate_exactly_at_the_limit_is_rarely_failed() {
        // Every `fail` here is wrong: the candidate's p95 is exactly 15% above the baseline's.
        // 300 seeded gates looking every 10 pairs up to 200: the share failed must stay within
        // the limit's error rate (5%, plus sampling slack).
        let rel = parse_relative("ttft_p95", "+15%").unwrap();
        let mut wrong = 0;
        for seed in 0..300 {
            let (c, b) = (uniform(seed, 200, 1.15), uniform(seed + 1000, 200, 1.0));
            let (c, b): (Vec<&Sample>, Vec<&Sample>) = (c.iter().collect(), b.iter().collect());
            let failed = (10..=200).step_by(10).any(|n| {
                let (r, _) = relative(&rel, &c[..n], &b[..n], 0.05, true);
                r.verdict == Verdict::Fail
            });
            wrong += usize::from(failed);
        }
        assert!(
            wrong <= 20,
            "{wrong} of 300 gates failed a candidate at the limit"
        );
    }

    #[test]
    fn alpha_is_split_over_limits() {
        assert_eq!(alpha_per_limit(5), 0.01);
        assert_eq!(alpha_per_limit(0), GATE_ALPHA);
    }
}
