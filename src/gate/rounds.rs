//! Sampling a gate: rounds of interleaved pairs (a fixed N in one round, the sequential gate a
//! batch a round with a look after each), the runs in flight, and each probe's verdicts once
//! its sampling has stopped.

use std::sync::Arc;

use super::decide::{self, State};
use super::plan::{EarlyStop, Event, GateOptions, Plan, Setup};
use super::sample::Sample;
use super::stats::{self, LimitReport, Stopped, Verdict};
use crate::config::{Inconclusive, Probe, Target};
use crate::runner::Runner;

/// One probe being sampled: its samples so far and, sequentially, where its limits stand.
pub(super) struct Sampling {
    pub(super) plan: Plan,
    /// Pairs planned so far.
    pub(super) taken: u32,
    /// Candidate and baseline samples, kept in pair order whatever order they finish in, so
    /// sample i of A and of B are a pair.
    got: [Vec<Option<Sample>>; 2],
    /// A decided limit keeps the report of the look that decided it.
    settled: Vec<Option<LimitReport>>,
    /// Every limit at the last look (`None`: a relative limit without a baseline).
    last: Vec<Option<(LimitReport, State)>>,
    pub(super) stopped: Option<Stopped>,
}

impl Sampling {
    fn new(plan: Plan, limits: usize) -> Sampling {
        Sampling {
            plan,
            taken: 0,
            got: [Vec::new(), Vec::new()],
            settled: vec![None; limits],
            last: vec![None; limits],
            stopped: None,
        }
    }

    /// Pairs to plan in the next round.
    fn round(&self) -> u32 {
        if self.stopped.is_some() {
            return 0;
        }
        self.plan.batch().min(self.plan.cap() - self.taken)
    }

    /// Runs this probe may still take, on `sides` sides.
    fn most_runs(&self, sides: usize) -> usize {
        let pairs = if self.stopped.is_some() {
            self.taken
        } else {
            self.plan.cap()
        };
        pairs as usize * sides
    }

    fn samples(&self, side: usize) -> Vec<Sample> {
        self.got[side].iter().flatten().cloned().collect()
    }
}

/// What the limits of a probe are judged on: its candidate and baseline samples, whether
/// they are pairs, and whether there is a baseline at all.
pub(super) struct Sides {
    pub(super) cand: Vec<Sample>,
    pub(super) base: Vec<Sample>,
    paired: bool,
    baseline_given: bool,
}

impl Sides {
    pub(super) fn of(s: &Sampling, file: Option<&Vec<Sample>>, baseline_given: bool) -> Sides {
        let (base, paired) = match file {
            Some(f) => (f.clone(), false),
            None => (s.samples(1), true),
        };
        Sides {
            cand: s.samples(0),
            base,
            paired,
            baseline_given,
        }
    }
}

/// What a sequential look found: the limits still open (`probe limit`), and the first limit it
/// decided `fail` (its name and limit), if any.
struct Look {
    open: Vec<String>,
    failed: Option<(String, String)>,
}

/// A sequential look at one probe: judges every limit not yet decided, and stops the probe
/// once none is open or its cap is reached.
fn look(p: &Probe, s: &mut Sampling, sides: &Sides, alpha: f64) -> Look {
    let (c, b): (Vec<&Sample>, Vec<&Sample>) =
        (sides.cand.iter().collect(), sides.base.iter().collect());
    let fails = p.gate.inconclusive == Inconclusive::Fail;
    let slo = p
        .gate
        .slo
        .iter()
        .map(|l| Some(decide::slo(l, &c, alpha, fails)));
    let rel = p.gate.vs_baseline.iter().map(|l| {
        sides
            .baseline_given
            .then(|| decide::relative(l, &c, &b, alpha, fails))
    });
    // Answers are paired only against a baseline target (a baseline file keeps none).
    let similar = p.gate.answer_similarity.iter().map(|l| {
        (sides.baseline_given && sides.paired).then(|| decide::similarity(l, &c, &b, alpha, fails))
    });
    let mut open = Vec::new();
    let mut failed = None;
    for (i, now) in slo.chain(rel).chain(similar).enumerate() {
        if s.settled[i].is_some() {
            continue;
        }
        match &now {
            Some((r, State::Decided)) => {
                if r.verdict == Verdict::Fail && failed.is_none() {
                    failed = Some((r.name.clone(), r.limit.clone()));
                }
                s.settled[i] = Some(r.clone());
            }
            Some((r, State::Open)) => open.push(format!("{} {} {}", p.name, r.name, r.limit)),
            _ => {}
        }
        s.last[i] = now;
    }
    // Counts alone estimate nothing: they are counted over the whole cap.
    let estimating = s
        .last
        .iter()
        .flatten()
        .any(|(_, st)| *st != State::Counting)
        || s.settled.iter().flatten().any(|r| !is_count(r));
    if (open.is_empty() && estimating) || s.taken >= s.plan.cap() {
        s.stopped = Some(if open.is_empty() {
            Stopped::Decided
        } else {
            Stopped::Cap
        });
    }
    Look { open, failed }
}

fn is_count(r: &LimitReport) -> bool {
    r.name.starts_with("outcome.")
}

/// A probe's verdicts once its sampling has stopped.
pub(super) fn verdicts(p: &Probe, s: &Sampling, sides: &Sides) -> Vec<LimitReport> {
    let (c, b): (Vec<&Sample>, Vec<&Sample>) =
        (sides.cand.iter().collect(), sides.base.iter().collect());
    let fails = p.gate.inconclusive == Inconclusive::Fail;
    if let Plan::Fixed { .. } = s.plan {
        let mut limits: Vec<LimitReport> =
            p.gate.slo.iter().map(|l| stats::judge_slo(l, &c)).collect();
        limits.extend(p.gate.vs_baseline.iter().map(|r| {
            if sides.baseline_given {
                stats::judge_relative(r, &c, &b, sides.paired, fails)
            } else {
                stats::skip_relative(r, &c)
            }
        }));
        limits.extend(p.gate.answer_similarity.iter().map(|l| {
            if sides.baseline_given && sides.paired {
                let (mut r, _) = decide::similarity(l, &c, &b, alpha_fixed(p), fails);
                r.stopped = Stopped::Cap;
                r
            } else {
                stats::skip_similarity(l, &c)
            }
        }));
        return limits;
    }
    let stopped = s.stopped.unwrap_or(Stopped::Cap);
    let figures = p.gate.slo.iter().map(|l| l.figure);
    let figures = figures.chain(p.gate.vs_baseline.iter().map(|l| l.figure));
    let figures = figures.chain(p.gate.answer_similarity.iter().map(|l| l.figure()));
    let mut limits: Vec<LimitReport> = s
        .settled
        .iter()
        .zip(&s.last)
        .zip(figures)
        .filter_map(|((settled, last), figure)| match (settled, last) {
            (Some(r), _) => Some(r.clone()),
            (None, Some((r, state))) => Some(
                LimitReport {
                    // An open limit was cut short by the cap, or by another limit's failure.
                    stopped: match (state, stopped) {
                        (State::Open, Stopped::Early) => Stopped::Early,
                        (State::Open, _) => Stopped::Cap,
                        _ => stopped,
                    },
                    ..r.clone()
                }
                .with_failed_runs(figure, &c),
            ),
            (None, None) => None,
        })
        .collect();
    // Relative limits without a baseline were never looked at, nor answers without pairs.
    if !sides.baseline_given {
        let skipped = p.gate.vs_baseline.iter();
        limits.extend(skipped.map(|r| stats::skip_relative(r, &c)));
    }
    if !(sides.baseline_given && sides.paired) {
        let skipped = p.gate.answer_similarity.iter();
        limits.extend(skipped.map(|l| stats::skip_similarity(l, &c)));
    }
    limits
}

/// A fixed N's similarity limits: the interval at the gate's error rate shared among the
/// probe's limits, as the sequential gate shares it.
pub(super) fn alpha_fixed(p: &Probe) -> f64 {
    decide::alpha_per_limit(
        p.gate.slo.len() + p.gate.vs_baseline.len() + p.gate.answer_similarity.len(),
    )
}

/// Runs `plan` (probe, side, pair) with at most `concurrency` in flight, handing each result
/// to `each` as it comes.
async fn execute(
    plan: Vec<(usize, usize, u32)>,
    probes: &[Arc<Probe>],
    sides: &[Arc<Target>],
    runner: &Arc<Runner>,
    concurrency: usize,
    mut each: impl FnMut(usize, usize, u32, Sample),
) {
    let limit = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let spawner = {
        let (probes, sides, runner) = (probes.to_vec(), sides.to_vec(), runner.clone());
        tokio::spawn(async move {
            for (pi, side, i) in plan {
                let permit = limit
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed");
                let (p, t, runner, tx) = (
                    probes[pi].clone(),
                    sides[side].clone(),
                    runner.clone(),
                    tx.clone(),
                );
                tokio::spawn(async move {
                    let r = runner.run_one(&p, &t).await;
                    drop(permit);
                    let _ = tx.send((pi, side, i, Sample::from(&r)));
                });
            }
        })
    };
    while let Some((pi, side, i, s)) = rx.recv().await {
        each(pi, side, i, s);
    }
    let _ = spawner.await;
}

/// Samples every probe in rounds until each has stopped: a fixed N in one round, the
/// sequential gate a batch a round with a look after each. Once a look decides a limit
/// `fail`, the gate has failed: every sequential probe stops there (unless
/// `--keep-sampling`), and the stop says which limit decided it.
pub(super) async fn sample(
    setup: &Setup,
    sides: &[Arc<Target>],
    runner: &Arc<Runner>,
    opts: &GateOptions,
    on: &mut (dyn FnMut(Event) + Send),
) -> (Vec<Sampling>, Option<EarlyStop>) {
    let probes = &setup.probes;
    let baseline_given = setup.base.is_some() || setup.file.is_some();
    let mut sampling: Vec<Sampling> = probes
        .iter()
        .map(|p| {
            let limits =
                p.gate.slo.len() + p.gate.vs_baseline.len() + p.gate.answer_similarity.len();
            Sampling::new(Plan::of(opts, p), limits)
        })
        .collect();
    let alpha = super::plan::sequential_alpha(probes, opts, baseline_given);
    let mut done = 0;
    let mut early = None;
    loop {
        let plan = next_round(&sampling, sides.len());
        if plan.is_empty() {
            break;
        }
        for s in &mut sampling {
            s.taken += s.round();
            for side in &mut s.got {
                side.resize(s.taken as usize, None);
            }
        }
        let total: usize = sampling.iter().map(|s| s.most_runs(sides.len())).sum();
        execute(
            plan,
            probes,
            sides,
            runner,
            opts.concurrency,
            |pi, side, i, r| {
                sampling[pi].got[side][i as usize] = Some(r);
                done += 1;
                on(Event::Run { done, total });
            },
        )
        .await;
        let mut open = Vec::new();
        let mut sequential = false;
        let mut failed = None;
        for (p, s) in probes.iter().zip(&mut sampling) {
            match s.plan {
                Plan::Fixed { samples } if s.taken >= samples => s.stopped = Some(Stopped::Cap),
                Plan::Sequential { .. } if s.stopped.is_none() => {
                    sequential = true;
                    let file = setup.file.as_ref().and_then(|f| f.get(&p.name));
                    let l = look(p, s, &Sides::of(s, file, baseline_given), alpha);
                    open.extend(l.open);
                    failed = failed.or(l.failed.map(|(name, limit)| EarlyStop {
                        probe: p.name.clone(),
                        name,
                        limit,
                        samples: s.taken,
                    }));
                }
                _ => {}
            }
        }
        if let Some(stop) = failed.filter(|_| !opts.keep_sampling) {
            let cut: Vec<&mut Sampling> = sampling
                .iter_mut()
                .filter(|s| s.stopped.is_none() && matches!(s.plan, Plan::Sequential { .. }))
                .collect();
            // Only a stop that left something unsampled is early.
            if !cut.is_empty() {
                for s in cut {
                    s.stopped = Some(Stopped::Early);
                }
                early = Some(stop);
            }
        }
        if sequential {
            let total = sampling.iter().map(|s| s.most_runs(sides.len())).sum();
            on(Event::Open { done, total, open });
        }
    }
    if let Some(stop) = &early {
        on(Event::StoppedEarly {
            done,
            stop: stop.clone(),
        });
    }
    on(Event::Done);
    (sampling, early)
}

/// The next round's runs (probe, side, pair), interleaved: pair n of every probe runs on A
/// and B back to back, A first in even pairs and B first in odd ones, so neither side always
/// runs right after the other.
fn next_round(sampling: &[Sampling], sides: usize) -> Vec<(usize, usize, u32)> {
    let rounds = sampling.iter().map(Sampling::round).max().unwrap_or(0);
    let mut plan = Vec::new();
    for i in 0..rounds {
        for (pi, s) in sampling.iter().enumerate() {
            if i < s.round() {
                let n = s.taken + i;
                for k in 0..sides {
                    let side = if n % 2 == 0 { k } else { sides - 1 - k };
                    plan.push((pi, side, n));
                }
            }
        }
    }
    plan
}
