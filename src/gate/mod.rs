//! The pre-release gate (`llm-canary gate`): samples each gated probe `--samples` times against
//! the candidate — interleaved with the baseline target (A, B, A, B …) so drift of the machine
//! or network hits both alike — after warm-up runs that do not count, then judges every limit
//! of the probe's `gate:` block with [`stats`].

pub mod report;
pub mod stats;

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use serde::{Deserialize, Serialize};

use crate::cli::GateArgs;
use crate::config::{Config, Inconclusive, Probe, Target};
use crate::runner::Runner;
use stats::{LimitReport, Sample, Verdict};

#[derive(Debug, Clone, Serialize)]
pub struct ProbeGate {
    pub probe: String,
    pub samples: u32,
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

/// Progress on stderr: a bar on a terminal, plain lines otherwise.
struct Progress {
    total: usize,
    done: usize,
    tty: bool,
    last_line: usize,
}

impl Progress {
    fn step(&mut self) {
        self.done += 1;
        let mut err = std::io::stderr().lock();
        if self.tty {
            let width = 30;
            let filled = width * self.done / self.total.max(1);
            let _ = write!(
                err,
                "\r[{}{}] {}/{} runs",
                "#".repeat(filled),
                "-".repeat(width - filled),
                self.done,
                self.total
            );
            if self.done == self.total {
                let _ = writeln!(err);
            }
        } else {
            let tenth = (self.done * 10) / self.total.max(1);
            if tenth > self.last_line || self.done == self.total {
                self.last_line = tenth;
                let _ = writeln!(err, "gate: {}/{} runs", self.done, self.total);
            }
        }
    }
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
) -> Result<f64, NotReady> {
    let start = Instant::now();
    let deadline = start + limit;
    loop {
        let r = runner.run_one(probe, target).await;
        if r.success() {
            return Ok(start.elapsed().as_secs_f64() * 1000.0);
        }
        let last = format!("{} {}", r.outcome, r.error.unwrap_or_default());
        eprintln!("gate: waiting for {}: {last}", target.name);
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

/// Says on stderr which relative limits go unjudged for want of a baseline, or refuses to start
/// under `--require-baseline`: in CI a gate that passes on half its limits must not look whole.
fn no_baseline(probes: &[Arc<Probe>], require: bool) -> anyhow::Result<()> {
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
    eprintln!(
        "gate: no baseline (--baseline-target T or --baseline FILE): the vs_baseline limits of {} are skipped, not judged",
        unjudged.join("; ")
    );
    Ok(())
}

pub async fn run(cfg: &Config, opts: &GateArgs) -> Result<GateReport, GateError> {
    let started_at = jiff::Timestamp::now().to_string();
    let cand = cfg
        .known_target("target", &opts.target)
        .map_err(anyhow::Error::from)?
        .clone();
    let base = match &opts.baseline_target {
        Some(b) => Some(
            cfg.known_target("baseline target", b)
                .map_err(anyhow::Error::from)?
                .clone(),
        ),
        None => None,
    };
    let file_baseline = opts.baseline.as_ref().map(load_baseline_file).transpose()?;
    for p in &opts.probes {
        cfg.known_probe(p).map_err(anyhow::Error::from)?;
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
        )
        .into());
    }
    if base.is_none() && file_baseline.is_none() {
        no_baseline(&probes, opts.require_baseline)?;
    }
    if let Some(file) = &file_baseline {
        for p in &probes {
            if !p.gate.vs_baseline.is_empty() && !file.contains_key(&p.name) {
                return Err(
                    anyhow!("the baseline file has no samples for probe {:?}", p.name).into(),
                );
            }
        }
    }

    let runner = Arc::new(Runner::new(opts.concurrency.max(1)));
    let cold_start_ms = match opts.wait_ready {
        Some(limit) => Some(wait_ready(&runner, &probes[0], &cand, limit).await?),
        None => None,
    };
    let sides: Vec<Arc<Target>> = std::iter::once(cand.clone()).chain(base.clone()).collect();
    for _ in 0..opts.warmup {
        for p in &probes {
            for t in &sides {
                runner.run_one(p, t).await;
            }
        }
    }

    // The plan, interleaved: pair i of every probe runs on A and B back to back, A first in even
    // pairs and B first in odd ones, so neither side always runs right after the other.
    let n_of = |p: &Probe| opts.samples.or(p.gate.samples).unwrap_or(20);
    let max_n = probes.iter().map(|p| n_of(p)).max().unwrap_or(0);
    let mut plan: Vec<(usize, usize, u32)> = Vec::new();
    for i in 0..max_n {
        for (pi, p) in probes.iter().enumerate() {
            if i < n_of(p) {
                for k in 0..sides.len() {
                    let side = if i % 2 == 0 { k } else { sides.len() - 1 - k };
                    plan.push((pi, side, i));
                }
            }
        }
    }
    let mut progress = Progress {
        total: plan.len(),
        done: 0,
        tty: std::io::stderr().is_terminal(),
        last_line: 0,
    };
    let limit = Arc::new(tokio::sync::Semaphore::new(opts.concurrency.max(1)));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let spawner = {
        let (probes, sides, runner) = (probes.clone(), sides.clone(), runner.clone());
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
    // Kept in pair order whatever order they finish in, so sample i of A and of B are a pair.
    let mut got: Vec<[Vec<Option<Sample>>; 2]> = probes
        .iter()
        .map(|p| [vec![None; n_of(p) as usize], vec![None; n_of(p) as usize]])
        .collect();
    while let Some((pi, side, i, s)) = rx.recv().await {
        got[pi][side][i as usize] = Some(s);
        progress.step();
    }
    let _ = spawner.await;

    let mut out = Vec::new();
    for (p, [cand_s, base_s]) in probes.iter().zip(got) {
        let (cand_s, base_s): (Vec<Sample>, Vec<Sample>) = (
            cand_s.into_iter().flatten().collect(),
            base_s.into_iter().flatten().collect(),
        );
        let (base_s, paired) = match &file_baseline {
            Some(f) => (f.get(&p.name).cloned().unwrap_or_default(), false),
            None => (base_s, true),
        };
        let c: Vec<&Sample> = cand_s.iter().collect();
        let b: Vec<&Sample> = base_s.iter().collect();
        let inconclusive_fails = p.gate.inconclusive == Inconclusive::Fail;
        let mut limits: Vec<LimitReport> =
            p.gate.slo.iter().map(|s| stats::judge_slo(s, &c)).collect();
        let baseline_given = base.is_some() || file_baseline.is_some();
        limits.extend(p.gate.vs_baseline.iter().map(|r| {
            if baseline_given {
                stats::judge_relative(r, &c, &b, paired, inconclusive_fails)
            } else {
                stats::skip_relative(r, &c)
            }
        }));
        let pass = limits.iter().all(|l| !l.failing);
        out.push(ProbeGate {
            probe: p.name.clone(),
            samples: n_of(p),
            candidate: cand_s,
            baseline: base_s,
            limits,
            pass,
        });
    }
    Ok(GateReport {
        version: 1,
        target: cand.name.clone(),
        baseline: opts
            .baseline_target
            .clone()
            .or_else(|| opts.baseline.as_ref().map(|f| f.display().to_string())),
        started_at,
        finished_at: jiff::Timestamp::now().to_string(),
        cold_start_ms,
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
