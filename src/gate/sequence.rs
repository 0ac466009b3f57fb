//! Anytime-valid confidence sequences for the sequential gate: intervals that hold at every
//! sample count at once, so the gate may look after every batch and stop as soon as a limit is
//! decided without raising its error rate.
//!
//! One construction serves both figures the gate estimates:
//! - a share (the success rate): the beta-binomial mixture martingale of Robbins (1970) and
//!   Howard, Ramdas, McAuliffe & Sekhon (Ann. Statist. 2021): for a true share `p0`,
//!   `M_t = ∫ θ^s (1-θ)^f dBeta(a, b)(θ) / (p0^s (1-p0)^f)` is a nonnegative martingale with
//!   mean 1, so by Ville's inequality it ever reaches `1/α` with probability at most `α`;
//!   the shares it has not rejected form the interval.
//! - a quantile `q_p` (Howard & Ramdas, Bernoulli 2022, the fixed-quantile sequence): the
//!   number of samples at or below the true `q_p` is binomial with share `p`, so the same test
//!   of `p0 = p` on the count below each candidate value rejects all but a run of order
//!   statistics; that run is the interval.

/// The prior's weight: how many pseudo-samples it is worth. Smaller reacts sooner to a large
/// difference, larger settles a small one sooner; 10 suits the gate's 50 to a few hundred
/// samples (docs/gate-statistics.md gives the figures it was chosen by).
const PRIOR_WEIGHT: f64 = 10.0;

/// The Beta prior centred on `m`, kept off the edges so both tails carry weight.
fn prior(m: f64) -> (f64, f64) {
    let m = m.clamp(0.02, 0.98);
    (PRIOR_WEIGHT * m, PRIOR_WEIGHT * (1.0 - m))
}

/// `ln (x (x+1) … (x+n-1))` for every `n` in `0..=t`: the rising factors of the Beta function
/// for whole counts, so no gamma function is needed.
fn ln_rising(x: f64, t: u64) -> Vec<f64> {
    let mut v = Vec::with_capacity(t as usize + 1);
    let mut acc = 0.0;
    v.push(acc);
    for i in 0..t {
        acc += (x + i as f64).ln();
        v.push(acc);
    }
    v
}

/// `ln M_t` for every count `s` of `t` under a Beta(a, b) mixture, against the share `p0`:
/// `ln B(a+s, b+t-s) - ln B(a, b) - s ln p0 - (t-s) ln(1-p0)`.
fn ln_mixtures(a: f64, b: f64, t: u64, p0: f64) -> impl Iterator<Item = f64> {
    let (ra, rb) = (ln_rising(a, t), ln_rising(b, t));
    let rab = ln_rising(a + b, t)[t as usize];
    (0..=t).map(move |s| {
        let f = t - s;
        against(ra[s as usize] + rb[f as usize] - rab, s, f, p0)
    })
}

/// The mixture's log numerator less the log likelihood of `s` successes and `f` failures at
/// `p0` (a zero count contributes nothing, also at `p0` = 0 or 1).
fn against(numerator: f64, s: u64, f: u64, p0: f64) -> f64 {
    let mut v = numerator;
    if s > 0 {
        v -= s as f64 * p0.ln();
    }
    if f > 0 {
        v -= f as f64 * (1.0 - p0).ln();
    }
    v
}

/// The confidence sequence for a share after `s` successes in `t` trials, at level `alpha`
/// (the probability that the true share ever leaves it), with the prior centred on `centre`
/// (the limit under test, where telling above from below matters). `(0, 1)` before any trial.
pub(crate) fn share(s: u64, t: u64, alpha: f64, centre: f64) -> (f64, f64) {
    if t == 0 {
        return (0.0, 1.0);
    }
    let (a, b) = prior(centre);
    let bar = (1.0 / alpha).ln();
    let f = t - s;
    let numerator =
        ln_rising(a, s)[s as usize] + ln_rising(b, f)[f as usize] - ln_rising(a + b, t)[t as usize];
    let rejected = |p0: f64| against(numerator, s, f, p0) >= bar;
    // ln M is convex in p0 with its least value at s/t: bisect each side.
    let mle = s as f64 / t as f64;
    let edge = |mut inside: f64, mut outside: f64| {
        if !rejected(outside) {
            return outside;
        }
        for _ in 0..50 {
            let mid = (inside + outside) / 2.0;
            if rejected(mid) {
                outside = mid;
            } else {
                inside = mid;
            }
        }
        inside
    };
    (edge(mle, 0.0), edge(mle, 1.0))
}

/// The least and the most of `t` samples that may lie at or below the true `p` quantile, at
/// level `alpha`: the counts the test keeps, which depend on `t` alone, not on the values.
fn kept(t: u64, p: f64, alpha: f64) -> Option<(u64, u64)> {
    let (a, b) = prior(p);
    let bar = (1.0 / alpha).ln();
    let mut kept = ln_mixtures(a, b, t, p)
        .enumerate()
        .filter(|&(_, m)| m < bar)
        .map(|(s, _)| s as u64);
    let lo = kept.next()?;
    Some((lo, kept.last().unwrap_or(lo)))
}

/// Whether `t` samples bound the `p` quantile at level `alpha` from below and from above:
/// which ends of [`quantile`]'s interval exist, whatever the values.
pub(crate) fn quantile_bounded(t: u64, p: f64, alpha: f64) -> (bool, bool) {
    match kept(t, p, alpha) {
        Some((lo, hi)) => (lo > 0, hi < t),
        None => (false, false),
    }
}

/// The confidence sequence for the `p` quantile of the distribution behind `sorted` (ascending),
/// at level `alpha`: `(lower, upper)`, either `None` where the samples cannot bound it yet.
pub(crate) fn quantile(sorted: &[f64], p: f64, alpha: f64) -> (Option<f64>, Option<f64>) {
    let t = sorted.len() as u64;
    let Some((lo, hi)) = kept(t, p, alpha) else {
        return (None, None);
    };
    // At least `lo` samples lie at or below q, so q >= the lo-th smallest; at most `hi` do, so
    // q < the (hi+1)-th smallest.
    let lower = (lo > 0).then(|| sorted[lo as usize - 1]);
    let upper = (hi < t).then(|| sorted[hi as usize]);
    (lower, upper)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A uniform draw on [100, 140]: the sim's first token of 100 ms with 40 ms of jitter.
    fn draw(rng: &mut fastrand::Rng) -> f64 {
        100.0 + 40.0 * rng.f64()
    }

    #[test]
    fn quantile_sequences_cover_at_every_look() {
        // 400 seeded runs of 300 samples each, looked at after every 10: the true p95 (138)
        // must leave the interval at some look in at most alpha of the runs (plus sampling
        // slack: 400 runs put 2 standard errors at about 2.2%).
        let (alpha, truth) = (0.05, 138.0);
        let mut missed = 0;
        for seed in 0..400 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut v: Vec<f64> = Vec::new();
            let mut ever = false;
            for _ in 0..30 {
                v.extend((0..10).map(|_| draw(&mut rng)));
                v.sort_by(f64::total_cmp);
                let (lo, hi) = quantile(&v, 0.95, alpha);
                if lo.is_some_and(|l| l > truth) || hi.is_some_and(|h| h < truth) {
                    ever = true;
                }
            }
            missed += usize::from(ever);
        }
        assert!(missed <= 28, "{missed} of 400 runs lost the true p95");
    }

    #[test]
    fn share_sequences_cover_at_every_look() {
        let (alpha, truth) = (0.05, 0.9);
        let mut missed = 0;
        for seed in 0..400 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let (mut s, mut ever) = (0, false);
            for t in 1..=300u64 {
                s += u64::from(rng.f64() < truth);
                if t % 10 == 0 {
                    let (lo, hi) = share(s, t, alpha, 0.95);
                    ever |= !(lo..=hi).contains(&truth);
                }
            }
            missed += usize::from(ever);
        }
        assert!(missed <= 28, "{missed} of 400 runs lost the true share");
    }

    #[test]
    fn intervals_narrow_and_hold_their_order() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut v: Vec<f64> = (0..400).map(|_| draw(&mut rng)).collect();
        v.sort_by(f64::total_cmp);
        // Too few samples cannot bound a p95 from above.
        assert_eq!(quantile(&v[..10], 0.95, 0.01).1, None);
        let mut short = v[..100].to_vec();
        short.sort_by(f64::total_cmp);
        let (lo100, hi100) = quantile(&short, 0.95, 0.01);
        let (lo400, hi400) = quantile(&v, 0.95, 0.01);
        let (lo400, hi400) = (lo400.unwrap(), hi400.unwrap());
        assert!(lo400 < 138.0 && 138.0 < hi400, "{lo400} {hi400}");
        assert!(lo100.unwrap() <= lo400 + 1.0 && hi400 <= hi100.unwrap_or(f64::MAX));
        // A share: all 100 of 100 bound it near 1 but not at it; none of 100 near 0.
        let (lo, hi) = share(100, 100, 0.05, 0.95);
        assert!(hi == 1.0 && (0.9..0.99).contains(&lo), "{lo}");
        let (lo, hi) = share(0, 100, 0.05, 0.05);
        assert!(lo == 0.0 && hi < 0.1, "{hi}");
        assert_eq!(share(0, 0, 0.05, 0.5), (0.0, 1.0));
    }
}
