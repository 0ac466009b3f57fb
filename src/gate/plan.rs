//! What a gate is asked to do and how each probe is sampled: the options, the plan (a fixed N
//! or sequential up to a cap), the progress events, and the resolved setup the sampling works
//! on.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::sample::Sample;
use crate::config::gate::Figure;
use crate::config::{Inconclusive, Probe, Target};

/// The sequential gate's cap per side when neither the command line nor the probe sets one.
pub const DEFAULT_MAX_SAMPLES: u32 = 200;

/// Pairs per probe between two looks of the sequential gate.
pub const BATCH: u32 = 10;

/// What the gate is asked to do (the command builds it from its flags).
#[derive(Debug, Clone, Default)]
pub struct GateOptions {
    /// The candidate target.
    pub target: String,
    /// A baseline target sampled in the same run, interleaved with the candidate.
    pub baseline_target: Option<String>,
    /// A previous gate's JSON report as the baseline.
    pub baseline_file: Option<PathBuf>,
    /// Refuse to start when relative limits have no baseline.
    pub require_baseline: bool,
    /// A fixed number of samples per probe and side, for every probe.
    pub samples: Option<u32>,
    /// The sequential cap per probe and side, for every probe.
    pub max_samples: Option<u32>,
    /// Uncounted runs per probe and side before sampling.
    pub warmup: u32,
    /// Only these probes (default: every probe with gate limits).
    pub probes: Vec<String>,
    /// Runs in flight at once.
    pub concurrency: usize,
    /// Poll the candidate until its first successful generation, this long at most.
    pub wait_ready: Option<Duration>,
    /// Sample on after a limit has failed, to every limit's verdict or the cap.
    pub keep_sampling: bool,
}

/// How a probe is sampled: a fixed N, or sequentially up to a cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Plan {
    /// The report's `samples` (per side) already says N.
    Fixed {
        #[serde(skip_serializing)]
        samples: u32,
    },
    Sequential {
        max_samples: u32,
    },
}

impl Plan {
    /// `--samples` over `--max-samples` over the probe's `samples:` over its `max_samples:`.
    pub(super) fn of(opts: &GateOptions, p: &Probe) -> Plan {
        match (opts.samples, opts.max_samples, p.gate.samples) {
            (Some(n), _, _) => Plan::Fixed { samples: n },
            (None, Some(m), _) => Plan::Sequential { max_samples: m },
            (None, None, Some(n)) => Plan::Fixed { samples: n },
            (None, None, None) => Plan::Sequential {
                max_samples: p.gate.max_samples.unwrap_or(DEFAULT_MAX_SAMPLES),
            },
        }
    }

    pub(super) fn cap(self) -> u32 {
        match self {
            Plan::Fixed { samples } => samples,
            Plan::Sequential { max_samples } => max_samples,
        }
    }

    /// Pairs per round: a fixed N all at once, the sequential gate a batch between looks.
    pub(super) fn batch(self) -> u32 {
        match self {
            Plan::Fixed { samples } => samples,
            Plan::Sequential { .. } => BATCH,
        }
    }
}

/// What the gate reports while it works; the command decides how to show it.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `--wait-ready`: the candidate's last attempt failed so.
    Waiting { target: String, last: String },
    /// No baseline: these probes' relative limits go unjudged (`probe (limit, …); …`).
    Unjudged { limits: String },
    /// A run finished: `done` of at most `total` runs.
    Run { done: usize, total: usize },
    /// A sequential look: the limits still open (`probe limit`); empty once all are decided.
    Open {
        done: usize,
        total: usize,
        open: Vec<String>,
    },
    /// Before any run: the least samples per side each limit needs to pass, per probe.
    Needs(Vec<ProbeNeeds>),
    /// A limit failed, and the gate stopped sampling after `done` runs.
    StoppedEarly { done: usize, stop: EarlyStop },
    /// Sampling is over.
    Done,
}

/// Why the sequential gate stopped before its cap: a limit failed, so the gate has failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EarlyStop {
    pub probe: String,
    /// The limit that failed: its figure (`success_rate`) and bound (`>= 0.95`).
    pub name: String,
    pub limit: String,
    /// Samples per side when it failed.
    pub samples: u32,
}

/// The error rate each limit the sequential gate judges on an interval is held to: the
/// gate's, shared among them.
pub(crate) fn sequential_alpha(
    probes: &[Arc<Probe>],
    opts: &GateOptions,
    baseline_given: bool,
) -> f64 {
    super::decide::alpha_per_limit(judged_limits(probes, opts, baseline_given))
}

/// The limits the sequential gate judges on an interval (outcome counts are counted, relative
/// limits without a baseline skipped): they share the gate's error rate.
fn judged_limits(probes: &[Arc<Probe>], opts: &GateOptions, baseline_given: bool) -> usize {
    probes
        .iter()
        .filter(|p| matches!(Plan::of(opts, p), Plan::Sequential { .. }))
        .map(|p| {
            let slo = p.gate.slo.iter();
            let estimated = slo.filter(|l| !matches!(l.figure, Figure::OutcomeCount(_)));
            estimated.count()
                + if baseline_given {
                    p.gate.vs_baseline.len() + p.gate.answer_similarity.len()
                } else {
                    0
                }
        })
        .sum()
}

/// What a gate compares: the candidate, the baseline (a target or a file's samples per probe)
/// and the gated probes.
pub(super) struct Setup {
    pub(super) cand: Arc<Target>,
    pub(super) base: Option<Arc<Target>>,
    pub(super) file: Option<HashMap<String, Vec<Sample>>>,
    pub(super) probes: Vec<Arc<Probe>>,
}

/// One limit's need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The limit as the reports show it (`success_rate >= 0.95`).
    pub limit: String,
    /// The least samples per side with which it can pass under the probe's plan (the first
    /// look that can, for the sequential gate); `None` when no number can.
    pub samples: Option<u32>,
}

/// A probe's plan and what each of its judged limits needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeNeeds {
    pub probe: String,
    pub plan: Plan,
    pub limits: Vec<Need>,
    /// What an inconclusive limit does to the gate.
    pub inconclusive: Inconclusive,
}

impl ProbeNeeds {
    /// The limits that cannot pass within the plan's samples: they can only fail or end
    /// inconclusive.
    pub(crate) fn short(&self) -> impl Iterator<Item = &Need> {
        let cap = self.plan.cap();
        self.limits
            .iter()
            .filter(move |n| n.samples.is_none_or(|s| s > cap))
    }
}
