//! The pre-release gate (`llm-canary gate`): samples each gated probe against the candidate —
//! interleaved with the baseline target (A, B, A, B …) so drift of the machine or network hits
//! both alike — after warm-up runs that do not count, and judges every limit of the probe's
//! `gate:` block. Sequential by default: pairs in batches, every limit judged on anytime-valid
//! confidence sequences after each ([`decide`]), until all are decided or the cap is reached.
//! A fixed N (`--samples`, `gate.samples:`) samples N and judges once with the bootstrap
//! ([`stats`]). The core returns data and reports progress through a callback ([`Event`]);
//! `commands::gate` prints.

pub mod decide;
pub mod report;
mod sample;
mod sampling;
pub mod sequence;
pub mod stats;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use serde::{Deserialize, Serialize};

use crate::config::{Config, Probe, Target};
use crate::runner::Runner;
use sampling::{sample, verdicts, Sides};
use stats::{LimitReport, Sample, Stopped, Verdict};

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
    fn of(opts: &GateOptions, p: &Probe) -> Plan {
        match (opts.samples, opts.max_samples, p.gate.samples) {
            (Some(n), _, _) => Plan::Fixed { samples: n },
            (None, Some(m), _) => Plan::Sequential { max_samples: m },
            (None, None, Some(n)) => Plan::Fixed { samples: n },
            (None, None, None) => Plan::Sequential {
                max_samples: p.gate.max_samples.unwrap_or(DEFAULT_MAX_SAMPLES),
            },
        }
    }

    fn cap(self) -> u32 {
        match self {
            Plan::Fixed { samples } => samples,
            Plan::Sequential { max_samples } => max_samples,
        }
    }

    /// Pairs per round: a fixed N all at once, the sequential gate a batch between looks.
    fn batch(self) -> u32 {
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
    /// Sampling is over.
    Done,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProbeGate {
    pub probe: String,
    #[serde(flatten)]
    pub plan: Plan,
    /// Samples taken per side.
    pub samples: u32,
    /// Why sampling ended: every limit decided, or the cap.
    pub stopped: Stopped,
    pub candidate: Vec<Sample>,
    pub baseline: Vec<Sample>,
    pub limits: Vec<LimitReport>,
    pub pass: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    pub version: u32,
    pub target: String,
    /// The baseline: a target name, a file, or none.
    pub baseline: Option<String>,
    pub started_at: String,
    pub finished_at: String,
    /// Time from the first readiness poll to the candidate's first successful generation.
    pub cold_start_ms: Option<f64>,
    /// The sequential gate's error rate, all its limits together.
    pub alpha: f64,
    pub pass: bool,
    pub probes: Vec<ProbeGate>,
}

/// What `--baseline FILE` reads of a previous gate's JSON: each probe's candidate samples.
#[derive(Deserialize)]
struct PreviousGate {
    probes: Vec<PreviousProbe>,
}

#[derive(Deserialize)]
struct PreviousProbe {
    probe: String,
    candidate: Vec<Sample>,
}

fn load_baseline_file(path: &PathBuf) -> anyhow::Result<HashMap<String, Vec<Sample>>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the baseline file {}", path.display()))?;
    let prev: PreviousGate = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: not a gate JSON report (llm-canary gate --format json): {e}",
            path.display()
        )
    })?;
    Ok(prev
        .probes
        .into_iter()
        .map(|p| (p.probe, p.candidate))
        .collect())
}

/// The candidate never produced a successful generation within `--wait-ready`: a failed gate,
/// not a usage error.
#[derive(Debug, thiserror::Error)]
#[error("the candidate {target} produced no successful generation within {limit} (--wait-ready); last: {last}")]
pub struct NotReady {
    pub target: String,
    pub limit: String,
    pub last: String,
}

/// Polls the candidate until its first successful generation.
async fn wait_ready(
    runner: &Runner,
    probe: &Probe,
    target: &Target,
    limit: Duration,
    on: &mut (dyn FnMut(Event) + Send),
) -> Result<f64, NotReady> {
    let start = Instant::now();
    let deadline = start + limit;
    loop {
        let r = runner.run_one(probe, target).await;
        if r.success() {
            return Ok(start.elapsed().as_secs_f64() * 1000.0);
        }
        let last = format!("{} {}", r.outcome, r.error.unwrap_or_default());
        on(Event::Waiting {
            target: target.name.clone(),
            last: last.clone(),
        });
        let next = Instant::now() + Duration::from_secs(1);
        if next >= deadline {
            return Err(NotReady {
                target: target.name.clone(),
                limit: crate::util::human_duration(limit),
                last,
            });
        }
        tokio::time::sleep_until(next.into()).await;
    }
}

/// Why a gate could not decide: the candidate never became ready (a verdict of its own: the
/// gate fails with a report), or the set-up was wrong (a usage error).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    NotReady(#[from] NotReady),
    #[error(transparent)]
    Setup(#[from] anyhow::Error),
}

/// Says which relative limits go unjudged for want of a baseline, or refuses to start under
/// `--require-baseline`: in CI a gate that passes on half its limits must not look whole.
fn no_baseline(
    probes: &[Arc<Probe>],
    require: bool,
    on: &mut (dyn FnMut(Event) + Send),
) -> anyhow::Result<()> {
    let unjudged: Vec<String> = probes
        .iter()
        .filter(|p| !p.gate.vs_baseline.is_empty())
        .map(|p| {
            let limits: Vec<String> = p
                .gate
                .vs_baseline
                .iter()
                .map(|r| format!("{} {}", r.name, r.text))
                .collect();
            format!("{} ({})", p.name, limits.join(", "))
        })
        .collect();
    if unjudged.is_empty() {
        return Ok(());
    }
    if require {
        return Err(anyhow!(
            "--require-baseline: no baseline for the vs_baseline limits of {}: add --baseline-target T or --baseline FILE",
            unjudged.join("; ")
        ));
    }
    on(Event::Unjudged {
        limits: unjudged.join("; "),
    });
    Ok(())
}

/// What a gate compares: the candidate, the baseline (a target or a file's samples per probe)
/// and the gated probes.
struct Setup {
    cand: Arc<Target>,
    base: Option<Arc<Target>>,
    file: Option<HashMap<String, Vec<Sample>>>,
    probes: Vec<Arc<Probe>>,
}

/// Resolves the options against the config, or says what is wrong before a single run.
fn setup(
    cfg: &Config,
    opts: &GateOptions,
    on: &mut (dyn FnMut(Event) + Send),
) -> anyhow::Result<Setup> {
    let cand = cfg.known_target("target", &opts.target)?.clone();
    let base = match &opts.baseline_target {
        Some(b) => Some(cfg.known_target("baseline target", b)?.clone()),
        None => None,
    };
    let file = opts
        .baseline_file
        .as_ref()
        .map(load_baseline_file)
        .transpose()?;
    for p in &opts.probes {
        cfg.known_probe(p)?;
    }
    let probes: Vec<Arc<Probe>> = cfg
        .probes
        .iter()
        .filter(|p| {
            if opts.probes.is_empty() {
                !p.gate.slo.is_empty() || !p.gate.vs_baseline.is_empty()
            } else {
                opts.probes.contains(&p.name)
            }
        })
        .cloned()
        .collect();
    if probes.is_empty() {
        return Err(anyhow!(
            "no probe has a `gate:` section with limits (or name probes with --probe)"
        ));
    }
    if let Some(p) = probes.iter().find(|p| p.ladder.is_some()) {
        return Err(anyhow!(
            "probe {:?} climbs a context ladder, whose rungs are not samples of one figure: gate a probe without a ladder",
            p.name
        ));
    }
    if base.is_none() && file.is_none() {
        no_baseline(&probes, opts.require_baseline, on)?;
    }
    if let Some(file) = &file {
        for p in &probes {
            if !p.gate.vs_baseline.is_empty() && !file.contains_key(&p.name) {
                return Err(anyhow!(
                    "the baseline file has no samples for probe {:?}",
                    p.name
                ));
            }
        }
    }
    Ok(Setup {
        cand,
        base,
        file,
        probes,
    })
}

/// Runs the gate: returns its report, or why it could not decide. Progress goes to `on`.
pub async fn run(
    cfg: &Config,
    opts: &GateOptions,
    on: &mut (dyn FnMut(Event) + Send),
) -> Result<GateReport, GateError> {
    let started_at = jiff::Timestamp::now().to_string();
    let s = setup(cfg, opts, on)?;
    let runner = Arc::new(Runner::new(opts.concurrency.max(1)));
    let cold_start_ms = match opts.wait_ready {
        Some(limit) => Some(wait_ready(&runner, &s.probes[0], &s.cand, limit, on).await?),
        None => None,
    };
    let sides: Vec<Arc<Target>> = std::iter::once(s.cand.clone())
        .chain(s.base.clone())
        .collect();
    for _ in 0..opts.warmup {
        for p in &s.probes {
            for t in &sides {
                runner.run_one(p, t).await;
            }
        }
    }
    let baseline_given = s.base.is_some() || s.file.is_some();
    let sampling = sample(&s, &sides, &runner, opts, on).await;

    let mut out = Vec::new();
    for (p, sp) in s.probes.iter().zip(&sampling) {
        let file = s.file.as_ref().and_then(|f| f.get(&p.name));
        let judged_on = Sides::of(sp, file, baseline_given);
        let limits = verdicts(p, sp, &judged_on);
        out.push(ProbeGate {
            probe: p.name.clone(),
            plan: sp.plan,
            samples: sp.taken,
            stopped: sp.stopped.unwrap_or(Stopped::Cap),
            pass: limits.iter().all(|l| !l.failing),
            candidate: judged_on.cand,
            baseline: judged_on.base,
            limits,
        });
    }
    Ok(GateReport {
        version: 1,
        target: s.cand.name.clone(),
        baseline: opts
            .baseline_target
            .clone()
            .or_else(|| opts.baseline_file.as_ref().map(|f| f.display().to_string())),
        started_at,
        finished_at: jiff::Timestamp::now().to_string(),
        cold_start_ms,
        alpha: decide::GATE_ALPHA,
        pass: out.iter().all(|p| p.pass),
        probes: out,
    })
}

impl GateReport {
    pub fn limits(&self) -> impl Iterator<Item = (&ProbeGate, &LimitReport)> {
        self.probes
            .iter()
            .flat_map(|p| p.limits.iter().map(move |l| (p, l)))
    }

    pub fn count(&self, v: Verdict) -> usize {
        self.limits().filter(|(_, l)| l.verdict == v).count()
    }
}
