//! The pre-release gate (`llm-canary gate`): samples each gated probe against the candidate —
//! interleaved with the baseline target (A, B, A, B …) so drift of the machine or network hits
//! both alike — after warm-up runs that do not count, and judges every limit of the probe's
//! `gate:` block. Sequential by default: pairs in batches, every limit judged on anytime-valid
//! confidence sequences after each ([`decide`]), until all are decided, one fails (unless
//! `--keep-sampling`), or the cap is reached. A fixed N (`--samples`, `gate.samples:`) samples N
//! and judges once with the bootstrap ([`stats`]). Before any run, [`needs`] says the least
//! samples each limit needs to pass. The core returns data and reports progress through a
//! callback ([`Event`]); `commands::gate` prints.

pub mod decide;
pub(crate) mod needs;
mod plan;
pub(crate) mod report;
mod rounds;
pub mod sample;
pub(crate) mod sequence;
pub mod stats;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use serde::{Deserialize, Serialize};

use crate::config::{Config, Probe, Target};
use crate::runner::Runner;
use plan::Setup;
// Reached from outside through `testing`.
pub(crate) use plan::EarlyStop;
pub(crate) use plan::{Event, Plan, ProbeNeeds};
pub use plan::{GateOptions, BATCH, DEFAULT_MAX_SAMPLES};
use rounds::{sample, verdicts, Sides};
use sample::Sample;
use stats::{LimitReport, Stopped, Verdict};

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
    /// The failure that stopped sampling before the cap (`null` when none did).
    pub stopped_by: Option<EarlyStop>,
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
        let last = format!(
            "{} {}",
            r.judged.outcome,
            r.judged.error.unwrap_or_default()
        );
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
        .filter(|p| p.gate.compares())
        .map(|p| {
            let relative = p.gate.vs_baseline.iter().map(|r| (&r.name, &r.text));
            let similar = p.gate.answer_similarity.iter().map(|l| (&l.name, &l.text));
            let limits: Vec<String> = relative
                .chain(similar)
                .map(|(name, text)| format!("{name} {text}"))
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
                !p.gate.slo.is_empty() || p.gate.compares()
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
    on(Event::Needs(needs::of(
        &s.probes,
        opts,
        needs::Baseline::of(s.base.is_some(), s.file.as_ref()),
    )));
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
    let (sampling, stopped_by) = sample(&s, &sides, &runner, opts, on).await;

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
        stopped_by,
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
